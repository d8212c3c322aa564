//! Distributed shared memory, in the two models of the seeds (`SEEDS.md`):
//! - DSE's global arrays ([`Array`]): every rank reads and writes them by
//!   index, whichever rank holds the element, with global locks to order
//!   what ranks do; and DSE's task queue ([`TaskQueue`]);
//! - SCASH's page-shared segments ([`Shared`]): memory every rank maps and
//!   uses with plain loads and stores, kept coherent page by page at locks
//!   and barriers (see `pages.rs`).
//!
//! An [`Array`] is allocated collectively and dealt to the ranks as its
//! [`Dist`] says (block, cyclic, or counts the owners choose). Then:
//! - [`Array::read`] returns the elements; [`Array::write`] returns at once
//!   and is complete at the next [`Array::fence`] (or unlock, or barrier);
//!   [`Array::write_sync`] returns when the copy at the owner is done
//!   (DSE's `writeS`); [`Array::fetch_op`] and [`Array::compare_and_swap`]
//!   are atomic with respect to each other at the element's owner;
//! - [`Array::lock`] and [`Array::unlock`] take and release global locks
//!   (FIFO per lock, granted by the lock's manager rank, `lock % ranks`);
//!   [`Array::barrier`] completes every write and synchronises all ranks.
//!
//! Elements held by ranks of this host are plain memory that every rank of
//! the host maps: reading and writing them are loads and stores, with no
//! copy through a buffer and no message ([`Array::local`] hands out this
//! rank's own part as a pointer). Elements on other hosts are reached
//! through their owner's progress engine, which serves requests while the
//! owner computes. The array is a one-sided window underneath
//! ([`crate::win`]); the locks are the DSM lock service (`service.rs`,
//! over `kumi_core::dsm`).
//!
//! Memory model: release consistency. Writes of a rank before its unlock
//! (or barrier) are visible to a rank after its next lock of the same lock
//! (or the same barrier); concurrent conflicting accesses outside locks and
//! barriers are the program's race, as in DSE.
//!
//! ```no_run
//! use kumi::dsm::{Array, Dist};
//! let universe = kumi::init()?;
//! let world = universe.world();
//! let a: Array<u64> = Array::new(&world, 1000, Dist::Block)?;
//! a.write(world.rank(), &[world.rank() as u64])?;
//! a.barrier()?;
//! a.lock(0)?;
//! let total = a.fetch_op(999, kumi::win::AccOp::Sum, 1)?;
//! a.unlock(0)?;
//! # let _ = total;
//! # Ok::<(), kumi::Error>(())
//! ```

mod pages;
pub(crate) mod service;
pub(crate) mod tasks;

pub use pages::Shared;
pub use tasks::{RawTaskQueue, TaskQueue};

use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::win::{AccOp, Elem, Window};
use kumi_core::call::Call;
pub use kumi_core::dist::{Dist, Layout, Run};
use kumi_core::dsm::Geometry;
use std::marker::PhantomData;
use std::panic::Location;
use std::sync::atomic::{fence, Ordering};

/// A type a DSM array holds: plain data that one-sided operations know.
pub trait Value: bytemuck::Pod + Send + Sync {
    /// Its element kind for atomic operations.
    const ELEM: Elem;
}

macro_rules! values {
    ($($t:ty => $e:ident),*) => {$(
        impl Value for $t {
            const ELEM: Elem = Elem::$e;
        }
    )*};
}
values!(i8 => I8, u8 => U8, i16 => I16, u16 => U16, i32 => I32, u32 => U32,
        i64 => I64, u64 => U64, f32 => F32, f64 => F64);

/// A global array of `T` (see the module documentation).
pub struct Array<T: Value> {
    win: Window,
    layout: Layout,
    locks: u32,
    _t: PhantomData<T>,
}

impl<T: Value> Array<T> {
    /// An array of `len` elements dealt as `dist` says, with one lock per
    /// rank. Collective: every rank passes the same arguments.
    #[track_caller]
    pub fn new(comm: &Comm, len: usize, dist: Dist) -> Result<Array<T>> {
        Self::with_locks(comm, len, dist, comm.size() as u32)
    }

    /// An array whose rank holds `mine` consecutive elements, after those
    /// of the ranks before it (the owners choose), with one lock per rank.
    /// Collective.
    #[track_caller]
    pub fn owned(comm: &Comm, mine: usize) -> Result<Array<T>> {
        let mut counts = vec![0u64; comm.size()];
        comm.allgather(&[mine as u64], &mut counts)?;
        let counts: Vec<usize> = counts.iter().map(|&c| c as usize).collect();
        let len = counts
            .iter()
            .try_fold(0usize, |a, &c| a.checked_add(c))
            .ok_or_else(|| Error::invalid("mine", mine as i64, "counts whose sum fits"))?;
        Self::with_locks(comm, len, Dist::Counts(counts), comm.size() as u32)
    }

    /// [`Array::new`] with `locks` locks (numbered from 0). Collective.
    #[track_caller]
    pub fn with_locks(comm: &Comm, len: usize, dist: Dist, locks: u32) -> Result<Array<T>> {
        let at = Location::caller();
        let layout = Layout::new(len, comm.size(), dist)
            .map_err(|why| Error::invalid("dist", len as i64, why))?;
        let size = std::mem::size_of::<T>();
        let bytes = layout
            .local_len(comm.rank())
            .checked_mul(size)
            .ok_or_else(|| Error::invalid("len", len as i64, "an array that fits in memory"))?;
        let win = Window::allocate(comm, bytes, size)?;
        let c = win.comm();
        let g = Geometry {
            nodes: c.size() as u32,
            pages: 0,
            page_size: 1,
            locks,
        };
        // Open before the exchange below, which every rank passes only once
        // all have opened: no lock request finds the segment missing.
        c.engine().svc.dsm.open(
            c.ctx(),
            g,
            c.rank() as u32,
            c.members().to_vec(),
            Box::new(service::NoPages),
        );
        let a = Array {
            win,
            layout,
            locks,
            _t: PhantomData,
        };
        a.agree(at)?;
        Ok(a)
    }

    /// Fails on every rank unless all passed the same shape.
    fn agree(&self, at: &'static Location<'static>) -> Result<()> {
        let c = self.win.comm();
        let (kind, param) = match self.layout.dist() {
            Dist::Block => (0, 0),
            Dist::Cyclic(b) => (1, *b as u64),
            Dist::Counts(counts) => (
                2,
                counts.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &n| {
                    (h ^ n as u64).wrapping_mul(0x100_0000_01b3)
                }),
            ),
        };
        let mine = [self.layout.len() as u64, self.locks as u64, kind, param];
        let mut all = vec![0u64; 4 * c.size()];
        c.allgather(&mine, &mut all)?;
        match all.chunks(4).position(|other| other != mine) {
            None => Ok(()),
            Some(r) => Err(Error::invalid(
                "len",
                self.layout.len() as i64,
                format!(
                    "the same length, distribution and locks on every rank (rank {r} passed \
                     another; at {at})"
                ),
            )),
        }
    }

    /// The segment's id (its window's communicator context), as errors name it.
    fn id(&self) -> u32 {
        self.win.comm().ctx()
    }

    /// Elements in the array.
    pub fn len(&self) -> usize {
        self.layout.len()
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.layout.is_empty()
    }

    /// Where the elements live.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The array's communicator (a duplicate of the one it was made on).
    pub fn comm(&self) -> &Comm {
        self.win.comm()
    }

    /// This rank's part: its address and its element count. Global index
    /// `layout().global(rank, j)` is element `j` there. Loads and stores
    /// through it are accesses of the array like any other (ordered by
    /// locks and barriers).
    pub fn local(&self) -> (*mut T, usize) {
        let me = self.win.comm().rank();
        let p = self.win.mapped(me).expect("a rank's own part is mapped");
        (p.cast(), self.layout.local_len(me))
    }

    /// The runs of `[start, start + count)`, or an error naming the array
    /// and the range.
    fn runs(&self, start: usize, count: usize) -> Result<Vec<Run>> {
        self.layout.runs(start, count).map_err(|why| {
            Error::invalid(
                "index",
                start as i64,
                format!("{why} (DSM array #{})", self.id()),
            )
        })
    }

    /// Where element `local` of rank `r`'s part starts, in bytes.
    fn offset(local: usize) -> u64 {
        (local * std::mem::size_of::<T>()) as u64
    }

    /// Copies elements `[start, start + out.len())` into `out`.
    #[track_caller]
    pub fn read(&self, start: usize, out: &mut [T]) -> Result<()> {
        for run in self.runs(start, out.len())? {
            let dst = &mut out[run.at..run.at + run.len];
            match self.win.mapped(run.rank) {
                // SAFETY: the run is inside rank `run.rank`'s part (the
                // layout says so, and its part holds local_len elements),
                // mapped here; `dst` is the caller's. A concurrent write of
                // the same elements is the program's race (module doc).
                Some(p) => unsafe {
                    let src = p.cast::<T>().add(run.local);
                    std::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), run.len);
                },
                None => self.win.get(
                    run.rank,
                    Self::offset(run.local),
                    bytemuck::cast_slice_mut(dst),
                )?,
            }
        }
        Ok(())
    }

    /// Element `i`.
    #[track_caller]
    pub fn get(&self, i: usize) -> Result<T> {
        let mut v = [T::zeroed()];
        self.read(i, &mut v)?;
        Ok(v[0])
    }

    /// Copies `data` to elements `[start, start + data.len())`. Returns at
    /// once; complete at the owner at this rank's next [`Array::fence`],
    /// [`Array::unlock`] or [`Array::barrier`].
    #[track_caller]
    pub fn write(&self, start: usize, data: &[T]) -> Result<()> {
        for run in self.runs(start, data.len())? {
            let src = &data[run.at..run.at + run.len];
            match self.win.mapped(run.rank) {
                // SAFETY: as in `read`, the other way.
                Some(p) => unsafe {
                    let dst = p.cast::<T>().add(run.local);
                    std::ptr::copy_nonoverlapping(src.as_ptr(), dst, run.len);
                },
                None => {
                    self.win
                        .put(run.rank, Self::offset(run.local), bytemuck::cast_slice(src))?
                }
            }
        }
        Ok(())
    }

    /// Element `i` becomes `v` (as [`Array::write`]).
    #[track_caller]
    pub fn set(&self, i: usize, v: T) -> Result<()> {
        self.write(i, &[v])
    }

    /// [`Array::write`], returning once the owners hold the elements (and
    /// every earlier write of this rank to the array).
    #[track_caller]
    pub fn write_sync(&self, start: usize, data: &[T]) -> Result<()> {
        self.write(start, data)?;
        self.fence()
    }

    /// Combines `v` into element `i` (`element = v op element`) and returns
    /// the element as it was, atomically with respect to every other
    /// fetch-and-op and compare-and-swap on it.
    #[track_caller]
    pub fn fetch_op(&self, i: usize, op: AccOp, v: T) -> Result<T> {
        self.atomic(i, op, v, None)
    }

    /// Element `i` becomes `new` if it equals `expected`; returns what it
    /// was (so the swap happened if that equals `expected`).
    #[track_caller]
    pub fn compare_and_swap(&self, i: usize, expected: T, new: T) -> Result<T> {
        self.atomic(i, AccOp::Cas, new, Some(expected))
    }

    #[track_caller]
    fn atomic(&self, i: usize, op: AccOp, v: T, compare: Option<T>) -> Result<T> {
        let run = self.runs(i, 1)?[0];
        let mut old = T::zeroed();
        let cmp = compare.as_ref().map_or(&[][..], bytemuck::bytes_of);
        self.win.accumulate(
            run.rank,
            Self::offset(run.local),
            (op, T::ELEM),
            bytemuck::bytes_of(&v),
            cmp,
            Some(bytemuck::bytes_of_mut(&mut old)),
        )?;
        Ok(old)
    }

    /// Completes every write of this rank to the array: at return the
    /// owners hold them.
    #[track_caller]
    pub fn fence(&self) -> Result<()> {
        self.win.sync()
    }

    /// Completes every rank's writes and waits for all ranks (collective).
    #[track_caller]
    pub fn barrier(&self) -> Result<()> {
        self.win.fence()
    }

    /// Takes global lock `lock`, waiting while another rank holds it (in
    /// the order asked). Locks are not recursive. A wait that can never end
    /// (a cycle of ranks each holding what the next asks for) is reported by
    /// the launcher as a deadlock, naming the lock and its holder.
    #[track_caller]
    pub fn lock(&self, lock: u32) -> Result<()> {
        take_lock(self.win.comm(), lock, Location::caller())?;
        // Acquire: loads of this host's memory after the grant see stores
        // made before the holder's release (which ended with a full fence).
        fence(Ordering::SeqCst);
        Ok(())
    }

    /// Releases global lock `lock` once this rank's writes are complete.
    #[track_caller]
    pub fn unlock(&self, lock: u32) -> Result<()> {
        self.fence()?;
        give_lock(self.win.comm(), lock, Location::caller())
    }
}

/// Takes lock `lock` of the segment of `c` (its context), waiting for the
/// grant; the wait is reported on the lock's holder once the manager said
/// who it is (a report names a rank the wait is on).
fn take_lock(c: &Comm, lock: u32, at: &'static Location<'static>) -> Result<()> {
    let id = c.ctx();
    let mut e = c.engine();
    service::acquire(&mut e, id, lock)?;
    service::wait(&mut e, id, |now| {
        let peer = match now {
            Some((_, Some(holder))) => holder as i32,
            _ => -2,
        };
        c.info(Call::DsmLock, peer, lock as i32, at)
    })
}

/// Releases lock `lock` of the segment of `c`, once this rank's writes are
/// at their homes (page-shared segments send their diffs first).
fn give_lock(c: &Comm, lock: u32, at: &'static Location<'static>) -> Result<()> {
    let id = c.ctx();
    let mut e = c.engine();
    service::release(&mut e, id, lock)?;
    service::wait(&mut e, id, |_| c.info(Call::DsmLock, -2, -1, at))
}

impl<T: Value> Drop for Array<T> {
    fn drop(&mut self) {
        let id = self.id();
        self.win.comm().engine().svc.dsm.close(id);
    }
}
