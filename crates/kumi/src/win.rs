//! Windows for one-sided communication, the base of distributed shared
//! memory: either memory every rank of a host maps, each rank's part after
//! the one before it (MPI's `MPI_Win_allocate_shared`,
//! [`Window::allocate_shared`], and [`Window::allocate`], which does the
//! same per host when its ranks span hosts), or each rank's own memory
//! (`MPI_Win_create`, [`Window::create`]), reached by the ranks of its host
//! through cross-memory attach. Ranks on other hosts reach a part through
//! active messages that its owner's progress engine serves (`rma.rs`), even
//! while its application computes.
//!
//! Design decisions a newcomer might otherwise undo:
//! - **One anonymous memory file, mapped by every rank of a host.** The
//!   host's first rank makes it (`memfd_create`) and the others open it
//!   through `/proc/<pid>/fd/<fd>`, so nothing has a name in the file system
//!   and nothing is left behind however the job ends. Ranks on different
//!   hosts cannot share it: `allocate_shared` across hosts fails, naming the
//!   rule.
//! - **Accesses within a host are copies, complete at return.** A put is a
//!   copy into the target's part (a store, or a `process_vm_writev` into the
//!   owner), a get a copy out of it, so a flush only orders memory and a
//!   fence is a barrier with full fences. **Across hosts** a put or an
//!   accumulate is complete at the origin when its frame is queued, and at
//!   the target when a flush ([`Window::sync`], which every MPI epoch end
//!   calls) has seen its acknowledgement; a get or a fetch waits for its
//!   answer.
//! - **Locks are words in the host's shared memory**
//!   (`kumi_transport::shm::wordlock`, model-checked), after the data: one
//!   reader-writer lock per rank for MPI's passive-target epochs
//!   (`MPI_Win_lock`), and one mutex per rank that every accumulate to that
//!   rank holds while it reads, combines and writes, so concurrent
//!   accumulates are atomic per element as MPI wants, whatever epoch they
//!   are in. A rank's engine takes the same words for requests from other
//!   hosts, so both kinds of access exclude each other.

use crate::coll::Op;
use crate::comm::Comm;
use crate::engine::WaitInfo;
use crate::error::{Error, Result};
use crate::rma::{self, Mem, Part};
use kumi_core::call::Call;
pub use kumi_core::rma::{AccOp, Elem};
use kumi_transport::shm::wordlock::{MutexWord, RwWord};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::panic::Location;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// Bytes of the lock area per rank: two words, each on its own line.
const LOCK_BYTES: usize = 128;

/// A rank's part is not in this host's mapping (exchanged in place of its
/// start there).
const NOT_MAPPED: u64 = u64::MAX;

/// A window (see the module documentation).
pub struct Window {
    comm: Comm,
    base: NonNull<u8>,
    len: usize,
    /// Per rank: its part (an offset in the mapping, or, for a window over
    /// the ranks' own memory, the address in the owner), its size, its unit.
    parts: Vec<(usize, usize, usize)>,
    /// For a window over the ranks' own memory: each rank's process id (the
    /// parts are reached by cross-memory attach; only the locks are mapped).
    pids: Option<Vec<i32>>,
    /// Per rank: its index in this host's lock area, or `None` for a rank on
    /// another host (reached by active messages).
    slot: Vec<Option<usize>>,
    /// Offset of the lock area.
    locks: usize,
    /// For a window over the ranks' own memory: per rank, where its part
    /// starts in this host's mapping if the window allocated it there (ranks
    /// of this host, `Window::allocate` across hosts).
    mapped: Vec<Option<usize>>,
    /// Ranks on other hosts reach this rank's part through its engine.
    exposed: bool,
    /// A dynamic window (`MPI_Win_create_dynamic`): displacements are
    /// addresses in the target, inside regions it attached; every access
    /// goes through the target's engine, which alone knows them.
    dynamic: bool,
    _fd: OwnedFd,
}

impl Window {
    /// Allocates `size` bytes for this rank (displacement unit `disp_unit`)
    /// in memory every rank of its host maps: all of `comm` when it is on
    /// one host (as [`Window::allocate_shared`]); across hosts, the parts of
    /// each host's ranks share one mapping there ([`Window::mapped`]) and
    /// ranks on other hosts reach them through their owners' engines.
    /// Collective.
    #[track_caller]
    pub fn allocate(comm: &Comm, size: usize, disp_unit: usize) -> Result<Window> {
        let at = Location::caller();
        let comm = comm.dup()?;
        check_unit(disp_unit)?;
        let labels = comm.host_labels(at)?;
        if labels.iter().all(|&l| l == labels[0]) {
            return Self::shared_on(comm, size, disp_unit);
        }
        // SAFETY: the window allocates the part itself (in the host's
        // mapping, unmapped only when the window drops).
        unsafe {
            Self::over(
                comm,
                &labels,
                (std::ptr::null_mut(), size, disp_unit),
                true,
                false,
            )
        }
    }

    /// Allocates `size` bytes for this rank (displacement unit `disp_unit`)
    /// in memory every rank of `comm` maps. Collective; every rank of `comm`
    /// must run on this host.
    #[track_caller]
    pub fn allocate_shared(comm: &Comm, size: usize, disp_unit: usize) -> Result<Window> {
        let comm = comm.dup()?;
        one_host(&comm)?;
        check_unit(disp_unit)?;
        Self::shared_on(comm, size, disp_unit)
    }

    fn shared_on(comm: Comm, size: usize, disp_unit: usize) -> Result<Window> {
        let mut all = vec![0u64; 2 * comm.size()];
        comm.allgather(&[size as u64, disp_unit as u64], &mut all)?;
        let mut parts = Vec::with_capacity(comm.size());
        let mut at = 0usize;
        for pair in all.chunks(2) {
            let (s, u) = (pair[0] as usize, pair[1] as usize);
            parts.push((at, s, u));
            at = at
                .checked_add(s)
                .filter(|&a| a <= isize::MAX as usize / 2)
                .ok_or_else(|| {
                    Error::invalid("size", s as i64, "sizes whose sum fits in memory")
                })?;
        }
        let locks = at.next_multiple_of(LOCK_BYTES);
        let len = locks + LOCK_BYTES * comm.size();
        let (fd, base) = share(&comm, len)?;
        let slot = (0..comm.size()).map(Some).collect();
        Ok(Window {
            comm,
            base,
            len,
            parts,
            pids: None,
            slot,
            locks,
            mapped: Vec::new(),
            exposed: false,
            dynamic: false,
            _fd: fd,
        })
    }

    /// A window over `size` bytes of this rank's own memory at `base` (MPI's
    /// `MPI_Win_create`): ranks of this host reach it by cross-memory attach
    /// (`process_vm_readv`/`writev`), which the kernel must allow, ranks of
    /// other hosts through this rank's engine; only the locks are shared
    /// memory. Collective.
    ///
    /// # Safety
    /// `base..base + size` must stay valid, and be accessed by this process
    /// only as MPI's window rules allow, until the window is dropped.
    #[track_caller]
    pub unsafe fn create(
        comm: &Comm,
        base: *mut u8,
        size: usize,
        disp_unit: usize,
    ) -> Result<Window> {
        let at = Location::caller();
        let comm = comm.dup()?;
        check_unit(disp_unit)?;
        let labels = comm.host_labels(at)?;
        // SAFETY: the caller's promise, passed on.
        unsafe { Self::over(comm, &labels, (base, size, disp_unit), false, false) }
    }

    /// A window with no memory yet (MPI's `MPI_Win_create_dynamic`): each
    /// rank adds regions of its own memory with [`Window::attach`], and a
    /// displacement is an address in the target. Collective.
    #[track_caller]
    pub fn create_dynamic(comm: &Comm) -> Result<Window> {
        let at = Location::caller();
        let comm = comm.dup()?;
        let labels = comm.host_labels(at)?;
        // SAFETY: no memory yet: what `attach` adds is the caller's promise.
        unsafe { Self::over(comm, &labels, (std::ptr::null_mut(), 0, 1), false, true) }
    }

    /// Makes `size` bytes at `base` of this rank's memory reachable through
    /// the dynamic window (not collective). A region may not overlap one
    /// attached already.
    ///
    /// # Safety
    /// `base..base + size` must stay valid, and be accessed by this process
    /// only as MPI's window rules allow, until [`Window::detach`] or the
    /// window's end.
    pub unsafe fn attach(&self, base: *mut u8, size: usize) -> Result<()> {
        self.need_dynamic()?;
        self.comm
            .engine()
            .svc
            .rma
            .attach(self.id(), base as usize, size)
    }

    /// Withdraws the region attached at `base`.
    pub fn detach(&self, base: *const u8) -> Result<()> {
        self.need_dynamic()?;
        self.comm.engine().svc.rma.detach(self.id(), base as usize)
    }

    fn need_dynamic(&self) -> Result<()> {
        if self.dynamic {
            return Ok(());
        }
        Err(Error::invalid(
            "win",
            self.id() as i64,
            "a dynamic window (create_dynamic)",
        ))
    }

    /// Whether the window is dynamic ([`Window::create_dynamic`]).
    pub fn is_dynamic(&self) -> bool {
        self.dynamic
    }

    /// The window over memory of each rank, its ranks on the hosts `labels`
    /// tells: the memory at `base` (`MPI_Win_create`), or, with `alloc`,
    /// `size` bytes the window allocates in its host's mapping (`base` is
    /// then ignored).
    ///
    /// # Safety
    /// As [`Window::create`], unless `alloc`.
    unsafe fn over(
        comm: Comm,
        labels: &[usize],
        (base, size, disp_unit): (*mut u8, usize, usize),
        alloc: bool,
        dynamic: bool,
    ) -> Result<Window> {
        kumi_transport::cma::allow_peer_access();
        let me = comm.rank();
        // This host's mapping, shared by its ranks only: their parts if the
        // window allocates them, then their lock words.
        let mut next = 0;
        let slot: Vec<Option<usize>> = labels
            .iter()
            .map(|&l| {
                (l == labels[me]).then(|| {
                    next += 1;
                    next - 1
                })
            })
            .collect();
        let spans = next < comm.size();
        let host_size = next;
        let split;
        let host = if spans {
            let color = u32::try_from(labels[me])
                .map_err(|_| Error::Protocol(format!("host label {} too large", labels[me])))?;
            split = comm
                .split(Some(color), me as i32)?
                .ok_or_else(|| Error::Protocol("no communicator for this host".into()))?;
            &split
        } else {
            &comm
        };
        // Where each of the host's parts starts in the mapping (a cache line
        // apart), and where the lock words start.
        let mut sizes = vec![0u64; host_size];
        if alloc {
            host.allgather(&[size as u64], &mut sizes)?;
        }
        let mut starts = Vec::with_capacity(host_size);
        let mut at = 0usize;
        for &s in &sizes {
            starts.push(at);
            at = usize::try_from(s)
                .ok()
                .and_then(|s| at.checked_add(s.next_multiple_of(LOCK_BYTES)))
                .filter(|&a| a <= isize::MAX as usize / 2)
                .ok_or_else(|| {
                    Error::invalid("size", s as i64, "sizes whose sum fits in memory")
                })?;
        }
        let locks = at;
        let len = locks + LOCK_BYTES * host_size;
        let (fd, map) = share(host, len)?;
        let mine = slot[me].expect("own host");
        let (base, own_start) = if alloc {
            // SAFETY: `starts[mine] + size <= locks < len`: inside the mapping.
            (
                unsafe { map.as_ptr().add(starts[mine]) },
                starts[mine] as u64,
            )
        } else {
            (base, NOT_MAPPED)
        };
        let mut w = Window {
            comm,
            base: map,
            len,
            parts: Vec::new(),
            pids: None,
            mapped: Vec::new(),
            slot,
            locks,
            exposed: false,
            dynamic,
            _fd: fd,
        };
        if spans || dynamic {
            // Served before anyone can know the part (the exchange below is
            // collective, so no request arrives before every rank is here).
            let mine = w.slot[me].expect("own host");
            let mem = Mem {
                base: base as usize,
                size,
                rw: w.word_at(mine, 0) as *const AtomicU64 as usize,
                mutex: w.word_at(mine, 1) as *const AtomicU64 as usize,
            };
            let members = w.comm.members().to_vec();
            let regions = dynamic.then(Vec::new);
            w.comm.engine().svc.rma.expose(
                w.comm.ctx(),
                Part {
                    mem,
                    regions,
                    members,
                },
            );
            w.exposed = true;
        }
        let card = [
            base as u64,
            size as u64,
            disp_unit as u64,
            std::process::id() as u64,
            own_start,
        ];
        let mut all = vec![0u64; 5 * w.comm.size()];
        w.comm.allgather(&card, &mut all)?;
        w.parts = all
            .chunks(5)
            .map(|c| (c[0] as usize, c[1] as usize, c[2] as usize))
            .collect();
        w.pids = Some(all.chunks(5).map(|c| c[3] as i32).collect());
        w.mapped = all
            .chunks(5)
            .zip(&w.slot)
            .map(|(c, s)| (s.is_some() && c[4] != NOT_MAPPED).then_some(c[4] as usize))
            .collect();
        Ok(w)
    }

    /// The window's id on the wire (its communicator's context).
    fn id(&self) -> u32 {
        self.comm.ctx()
    }

    /// What the active messages to rank `r` need: the window, our rank in
    /// it, `r`'s world rank.
    fn wire(&self, r: usize) -> (u32, u32, u32) {
        let w = self.comm.world_rank(r).expect("a rank of the window") as u32;
        (self.id(), self.comm.rank() as u32, w)
    }

    /// Whether rank `r`'s part is reached through its engine: on another
    /// host, or in a dynamic window.
    fn remote(&self, r: usize) -> bool {
        self.dynamic || self.slot.get(r).is_some_and(|s| s.is_none())
    }

    /// How a wait for another rank's engine is reported: with no peer, as
    /// the target's engine answers whatever its application does, so the
    /// wait depends on no call of the target's.
    fn wait_info(&self, at: &'static Location<'static>) -> WaitInfo {
        self.comm.info(Call::Wait, -2, -2, at)
    }

    /// The window's own communicator (a duplicate of the one it was made on).
    pub fn comm(&self) -> &Comm {
        &self.comm
    }

    /// Rank `r`'s part: its address in this process, its size, its unit.
    /// (For a window over the ranks' own memory the address is the owner's,
    /// usable in the owner only.)
    pub fn part(&self, r: usize) -> Option<(*mut u8, usize, usize)> {
        let &(off, size, unit) = self.parts.get(r)?;
        if self.pids.is_some() {
            return Some((off as *mut u8, size, unit));
        }
        // SAFETY: `off` is within the mapping of `len` bytes (made so above).
        Some((unsafe { self.base.as_ptr().add(off) }, size, unit))
    }

    /// Rank `r`'s part, if it is memory of this process: its address here.
    /// Every part of a window on one host ([`Window::allocate_shared`]);
    /// across hosts, this rank's own, and those of its host's ranks when
    /// the window allocated them ([`Window::allocate`]). Loads and stores
    /// there are the window's accesses, with no copy and no message.
    pub fn mapped(&self, r: usize) -> Option<*mut u8> {
        if self.dynamic {
            return None;
        }
        if self.pids.is_none() || r == self.comm.rank() {
            return self.part(r).map(|p| p.0);
        }
        let start = self.mapped.get(r).copied().flatten()?;
        // SAFETY: a start inside the mapping, exchanged at creation.
        Some(unsafe { self.base.as_ptr().add(start) })
    }

    /// Whether the parts are shared memory every rank maps
    /// (`MPI_Win_allocate_shared`, `MPI_Win_allocate`).
    pub fn is_shared(&self) -> bool {
        self.pids.is_none()
    }

    /// Moves `len` bytes between `local` and rank `r`'s part at `p` (an
    /// address from `range`): a copy in shared memory or in this process, a
    /// cross-memory attach to another process otherwise.
    fn transfer(
        &self,
        r: usize,
        p: *mut u8,
        local: *mut u8,
        len: usize,
        to_target: bool,
    ) -> Result<()> {
        match &self.pids {
            Some(pids) if r != self.comm.rank() && self.mapped[r].is_none() => {
                let addr = p as u64;
                let res = if to_target {
                    // SAFETY: `local` is `len` bytes the caller owns for the call.
                    let src = unsafe { std::slice::from_raw_parts(local, len) };
                    kumi_transport::cma::write_to(pids[r], addr, src)
                } else {
                    // SAFETY: as above, and writable (the caller's buffer).
                    let dst = unsafe { std::slice::from_raw_parts_mut(local, len) };
                    kumi_transport::cma::read_from(pids[r], addr, dst)
                };
                res.map_err(|e| cma_error(r, to_target, e))
            }
            _ => {
                // Rank r's part here: `p` is its address in the owner, the
                // same as here unless the part is in this host's mapping.
                let p = match self.mapped.get(r).copied().flatten() {
                    Some(start) if self.pids.is_some() => {
                        let off = (p as usize).wrapping_sub(self.parts[r].0);
                        // SAFETY: `off + len` is within rank r's part (checked
                        // by `range`), which starts at `start` in the mapping.
                        unsafe { self.base.as_ptr().add(start + off) }
                    }
                    _ => p,
                };
                // SAFETY: `p..p + len` is inside rank r's part (checked by
                // `range`), in shared memory or in this process; `local` is the
                // caller's. MPI's epochs order racing accesses.
                unsafe {
                    if to_target {
                        std::ptr::copy_nonoverlapping(local, p, len)
                    } else {
                        std::ptr::copy_nonoverlapping(p, local, len)
                    }
                }
                Ok(())
            }
        }
    }

    /// The byte offset of displacement `disp` in rank `r`'s part.
    pub fn offset(&self, r: usize, disp: i64) -> Result<u64> {
        let (_, size, unit) = self.part(r).ok_or_else(|| self.no_rank(r))?;
        u64::try_from(disp)
            .ok()
            .and_then(|d| d.checked_mul(unit as u64))
            .ok_or_else(|| {
                Error::invalid(
                    "target_disp",
                    disp,
                    format!("a displacement within rank {r}'s {size} bytes (unit {unit})"),
                )
            })
    }

    fn no_rank(&self, r: usize) -> Error {
        Error::invalid(
            "target_rank",
            r as i64,
            format!("a rank of the window's {} ranks", self.parts.len()),
        )
    }

    /// The bytes `[offset, offset + len)` of rank `r`'s part, checked (in a
    /// dynamic window only the target can check: the offset is returned).
    fn range(&self, r: usize, offset: u64, len: usize) -> Result<*mut u8> {
        let (p, size, _) = self.part(r).ok_or_else(|| self.no_rank(r))?;
        if self.dynamic {
            return Ok(offset as usize as *mut u8);
        }
        match offset.checked_add(len as u64) {
            // Address arithmetic only: within rank r's part (in the mapping,
            // or in the owner's address space for a window over own memory).
            Some(end) if end <= size as u64 => Ok(p.wrapping_add(offset as usize)),
            _ => Err(Error::invalid(
                "target_disp",
                offset as i64,
                format!(
                    "an access of {len} bytes at byte {offset} fits in rank {r}'s {size} bytes"
                ),
            )),
        }
    }

    /// Lock word `which` (0: reader-writer, 1: accumulate mutex) of rank
    /// `r`, a rank of this host.
    fn word(&self, r: usize, which: usize) -> &AtomicU64 {
        self.word_at(self.slot[r].expect("a rank of this host"), which)
    }

    fn word_at(&self, slot: usize, which: usize) -> &AtomicU64 {
        let off = self.locks + slot * LOCK_BYTES + which * 64;
        debug_assert!(off + 8 <= self.len);
        // SAFETY: the lock area is inside the mapping, 64-byte aligned, and
        // only ever accessed as atomics (every rank maps it the same way).
        unsafe { &*(self.base.as_ptr().add(off) as *const AtomicU64) }
    }

    /// Copies `data` into rank `r`'s part at byte `offset`. Complete at
    /// return within a host; across hosts, at the next [`Window::sync`].
    pub fn put(&self, r: usize, offset: u64, data: &[u8]) -> Result<()> {
        let p = self.range(r, offset, data.len())?;
        if self.remote(r) {
            let (win, me, to) = self.wire(r);
            return rma::put(&mut self.comm.engine(), win, me, to, offset, data);
        }
        self.transfer(r, p, data.as_ptr() as *mut u8, data.len(), true)
    }

    /// Copies `data` into rank `r`'s part at the byte ranges `at` (offset,
    /// length), one after the other (their lengths sum to `data.len()`).
    /// Where the part is another process's memory reached by single copy,
    /// a thousand ranges go in one system call, not one each (a strided
    /// target layout of small pieces).
    pub fn put_scattered(&self, r: usize, at: &[(u64, usize)], data: &[u8]) -> Result<()> {
        self.scattered(r, at, data.as_ptr() as *mut u8, data.len(), true)
    }

    /// Copies from rank `r`'s part at the byte ranges `at` into `out`, one
    /// after the other (see [`Window::put_scattered`]).
    #[track_caller]
    pub fn get_scattered(&self, r: usize, at: &[(u64, usize)], out: &mut [u8]) -> Result<()> {
        self.scattered(r, at, out.as_mut_ptr(), out.len(), false)
    }

    #[track_caller]
    fn scattered(
        &self,
        r: usize,
        at: &[(u64, usize)],
        local: *mut u8,
        len: usize,
        to_target: bool,
    ) -> Result<()> {
        let total = at.iter().try_fold(0usize, |a, x| a.checked_add(x.1));
        if total != Some(len) {
            return Err(Error::invalid(
                "data",
                len as i64,
                "as many bytes as the target ranges hold",
            ));
        }
        match &self.pids {
            Some(pids) if !self.remote(r) && r != self.comm.rank() && self.mapped[r].is_none() => {
                let ranges = at
                    .iter()
                    .map(|&(o, l)| Ok((self.range(r, o, l)? as u64, l)))
                    .collect::<Result<Vec<_>>>()?;
                let lo = ranges.iter().map(|x| x.0).min().unwrap_or(0);
                let hi = ranges.iter().map(|x| x.0 + x.1 as u64).max().unwrap_or(0);
                let res = if to_target {
                    // SAFETY: `local` is `len` bytes the caller owns for the call.
                    let src = unsafe { std::slice::from_raw_parts(local, len) };
                    kumi_transport::cma::write_scattered(pids[r], &ranges, src)
                } else if ranges.len() > DENSE_PIECES && hi - lo <= 4 * len.max(4096) as u64 {
                    // Many small pieces close together: the kernel pins the
                    // pages of every piece, so one read of the span they lie
                    // in (inside the part) costs less; the gaps are dropped.
                    let mut span = vec![0u8; (hi - lo) as usize];
                    kumi_transport::cma::read_from(pids[r], lo, &mut span).map(|()| {
                        let mut done = 0;
                        for &(a, l) in &ranges {
                            let from = (a - lo) as usize;
                            // SAFETY: `done + l <= len`, the caller's buffer.
                            unsafe {
                                std::ptr::copy_nonoverlapping(
                                    span.as_ptr().add(from),
                                    local.add(done),
                                    l,
                                )
                            };
                            done += l;
                        }
                    })
                } else {
                    // SAFETY: as above, and writable (the caller's buffer).
                    let dst = unsafe { std::slice::from_raw_parts_mut(local, len) };
                    kumi_transport::cma::read_scattered(pids[r], &ranges, dst)
                };
                res.map_err(|e| cma_error(r, to_target, e))
            }
            _ => {
                let mut done = 0;
                for &(o, l) in at {
                    // SAFETY: `done + l <= len`, bytes of the caller's buffer.
                    let piece = unsafe { local.add(done) };
                    if to_target {
                        // SAFETY: as above.
                        self.put(r, o, unsafe { std::slice::from_raw_parts(piece, l) })?;
                    } else {
                        // SAFETY: as above, and writable.
                        self.get(r, o, unsafe { std::slice::from_raw_parts_mut(piece, l) })?;
                    }
                    done += l;
                }
                Ok(())
            }
        }
    }

    /// Copies from rank `r`'s part at byte `offset` into `out`.
    #[track_caller]
    pub fn get(&self, r: usize, offset: u64, out: &mut [u8]) -> Result<()> {
        let p = self.range(r, offset, out.len())?;
        if self.remote(r) {
            let info = self.wait_info(Location::caller());
            return rma::get(&mut self.comm.engine(), info, self.wire(r), offset, out);
        }
        self.transfer(r, p, out.as_mut_ptr(), out.len(), false)
    }

    /// Combines `data` (whole elements of `elem`) into rank `r`'s part at
    /// byte `offset`, `cur = data op cur` element by element (for
    /// [`AccOp::Cas`], `cur = data` where `cur == compare`, one element),
    /// atomically with respect to every other accumulate to rank `r`; the
    /// bytes before are copied to `fetch` (as long as `data`) if given.
    #[track_caller]
    #[allow(clippy::too_many_arguments)]
    pub fn accumulate(
        &self,
        r: usize,
        offset: u64,
        how: (AccOp, Elem),
        data: &[u8],
        compare: &[u8],
        fetch: Option<&mut [u8]>,
    ) -> Result<()> {
        self.accumulate_scattered(r, &[(offset, data.len())], how, data, compare, fetch)
    }

    /// [`Window::accumulate`] at the byte ranges `at` of rank `r`'s part,
    /// one after the other (each whole elements; their lengths sum to
    /// `data.len()`). Within a host the ranges are read, combined and
    /// written back under one hold of the accumulate mutex (in one system
    /// call per thousand ranges where the part is another process's
    /// memory); across hosts each range is one request.
    #[track_caller]
    #[allow(clippy::too_many_arguments)]
    pub fn accumulate_scattered(
        &self,
        r: usize,
        at: &[(u64, usize)],
        (op, elem): (AccOp, Elem),
        data: &[u8],
        compare: &[u8],
        mut fetch: Option<&mut [u8]>,
    ) -> Result<()> {
        let whole = at.iter().all(|a| a.1.is_multiple_of(elem.size()))
            && data.len().is_multiple_of(elem.size())
            && fetch.as_ref().is_none_or(|f| f.len() == data.len())
            && (op != AccOp::Cas || (data.len() == elem.size() && compare.len() == data.len()));
        if !whole || !op.takes(elem) {
            return Err(Error::invalid(
                "data",
                data.len() as i64,
                format!("whole {elem:?} elements that {op:?} takes (a fetch buffer as long; one element and a comparand to compare and swap)"),
            ));
        }
        for &(o, l) in at {
            self.range(r, o, l)?;
        }
        if self.remote(r) {
            let info = self.wait_info(Location::caller());
            let mut e = self.comm.engine();
            let mut done = 0;
            for &(o, l) in at {
                let b = done..done + l;
                let f = fetch.as_deref_mut().map(|f| &mut f[b.clone()]);
                rma::accumulate(
                    &mut e,
                    info,
                    self.wire(r),
                    o,
                    (op, elem),
                    &data[b],
                    compare,
                    f,
                )?;
                done += l;
            }
            return Ok(());
        }
        let m = MutexWord(self.word(r, 1));
        m.lock();
        let mut cur = vec![0u8; data.len()];
        // Under the accumulate mutex: read, combine, write back.
        let mut r2 = self.get_scattered(r, at, &mut cur);
        if r2.is_ok() {
            if let Some(f) = fetch {
                f.copy_from_slice(&cur);
            }
            r2 = rma::apply(op, elem, &mut cur, data, compare);
        }
        if r2.is_ok() {
            r2 = self.put_scattered(r, at, &cur);
        }
        m.unlock();
        r2
    }

    /// Locks rank `r`'s part: exclusively, or shared with other shared
    /// lockers (MPI's passive-target epoch).
    #[track_caller]
    pub fn lock(&self, r: usize, exclusive: bool) -> Result<()> {
        self.range(r, 0, 0)?;
        if self.remote(r) {
            let info = self.wait_info(Location::caller());
            return rma::lock(&mut self.comm.engine(), info, self.wire(r), exclusive);
        }
        let word = RwWord(self.word(r, 0));
        if !self.spans() {
            word.lock(exclusive);
            return Ok(());
        }
        // The holder may be on another host and wait for an answer from
        // this rank's part: serve while waiting (the progress thread would
        // too, but only every interval, and not at all when it is off).
        while !word.try_lock(exclusive) {
            self.comm.engine().progress()?;
            std::thread::yield_now();
        }
        Ok(())
    }

    /// Whether some accesses go through engines (a rank on another host,
    /// or a dynamic window).
    fn spans(&self) -> bool {
        self.dynamic || self.slot.iter().any(|s| s.is_none())
    }

    /// Releases a lock taken by [`Window::lock`], once this rank's accesses
    /// to the window are complete.
    #[track_caller]
    pub fn unlock(&self, r: usize, exclusive: bool) -> Result<()> {
        self.range(r, 0, 0)?;
        if self.remote(r) {
            let info = self.wait_info(Location::caller());
            return rma::unlock(&mut self.comm.engine(), info, self.wire(r), exclusive);
        }
        fence(Ordering::SeqCst);
        RwWord(self.word(r, 0)).unlock(exclusive);
        Ok(())
    }

    /// Completes this rank's accesses to the window and orders them with
    /// everyone's (MPI's `MPI_Win_sync` and flushes): within a host a full
    /// fence; across hosts, waits until every put and accumulate is
    /// acknowledged, and returns the first error one met at its target.
    #[track_caller]
    pub fn sync(&self) -> Result<()> {
        fence(Ordering::SeqCst);
        if self.spans() {
            let info = self.wait_info(Location::caller());
            rma::flush(&mut self.comm.engine(), info, self.id())?;
        }
        Ok(())
    }

    /// Ends an access epoch and starts the next one on every rank
    /// (collective): every access complete, then a barrier.
    #[track_caller]
    pub fn fence(&self) -> Result<()> {
        self.sync()?;
        self.comm.barrier()?;
        fence(Ordering::SeqCst);
        Ok(())
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        if self.exposed {
            let mut e = self.comm.engine();
            let refused = e.svc.rma.withdraw(self.id());
            // Answers lock requests still waiting (an erroneous program's:
            // MPI frees a window only when its epochs are over), so no origin
            // waits forever; an error here has nowhere to go.
            let _ = rma::refuse(&mut e, self.id(), refused);
        }
        // SAFETY: the mapping made at creation, of `len` bytes, unmapped
        // once (no reference into it outlives the window).
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

fn check_unit(disp_unit: usize) -> Result<()> {
    if disp_unit == 0 {
        return Err(Error::invalid(
            "disp_unit",
            0,
            "a positive displacement unit",
        ));
    }
    Ok(())
}

/// Refuses a communicator whose ranks are not all on this host.
#[track_caller]
fn one_host(comm: &Comm) -> Result<()> {
    let labels = comm.host_labels(std::panic::Location::caller())?;
    if labels.iter().any(|&l| l != labels[0]) {
        return Err(Error::invalid(
            "comm",
            comm.size() as i64,
            "ranks that share memory: all on one host (split by MPI_COMM_TYPE_SHARED)",
        ));
    }
    Ok(())
}

/// `len` bytes of memory every rank of `comm` maps (collective): rank 0
/// makes the file, the others open it through `/proc`; every rank fails if
/// one does.
fn share(comm: &Comm, len: usize) -> Result<(OwnedFd, NonNull<u8>)> {
    let mut card = [0i64; 3];
    let mut made = None;
    if comm.rank() == 0 {
        match make(len) {
            Ok(fd) => {
                card = [std::process::id() as i64, fd.as_raw_fd() as i64, 0];
                made = Some(fd);
            }
            Err(e) => card[2] = e.raw_os_error().unwrap_or(libc::EIO) as i64,
        }
    }
    comm.bcast(&mut card, 0)?;
    if card[2] != 0 {
        return Err(Error::Io(io::Error::from_raw_os_error(card[2] as i32)));
    }
    let fd = match made {
        Some(fd) => Ok(fd),
        None => open_peer(card[0], card[1]),
    };
    let mapped = fd.and_then(|fd| map(&fd, len).map(|p| (fd, p)));
    let mut bad_ranks = [mapped.is_err() as u32];
    comm.allreduce_in_place(&mut bad_ranks, &Op::sum())?;
    let (fd, base) = mapped.map_err(Error::Io)?;
    if bad_ranks[0] != 0 {
        return Err(Error::Protocol(format!(
            "{} ranks could not map the window's memory",
            bad_ranks[0]
        )));
    }
    Ok((fd, base))
}

fn make(len: usize) -> io::Result<OwnedFd> {
    let fd = rustix::fs::memfd_create("kumi-window", rustix::fs::MemfdFlags::CLOEXEC)?;
    rustix::fs::ftruncate(&fd, len as u64)?;
    Ok(fd)
}

fn open_peer(pid: i64, fd: i64) -> io::Result<OwnedFd> {
    let path = format!("/proc/{pid}/fd/{fd}");
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)?;
    Ok(OwnedFd::from(f))
}

fn map(fd: &OwnedFd, len: usize) -> io::Result<NonNull<u8>> {
    // SAFETY: a fresh shared mapping of a file of at least `len` bytes; it
    // aliases no Rust object.
    let p = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            len.max(1),
            rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
            rustix::mm::MapFlags::SHARED,
            fd,
            0,
        )
    }?;
    NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))
}

/// Pieces above which a get reads the span they lie in at once, if they
/// fill a quarter of it (a guess at where pinning each piece's pages costs
/// more than copying the gaps).
const DENSE_PIECES: usize = 16;

/// A single copy to or from rank `r`'s memory that the kernel refused.
fn cma_error(r: usize, to_target: bool, e: io::Error) -> Error {
    Error::Io(io::Error::new(
        e.kind(),
        format!(
            "one-sided access to rank {r} (process_vm_{}v): {e}",
            if to_target { "write" } else { "read" }
        ),
    ))
}
