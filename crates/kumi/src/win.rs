//! Windows for one-sided communication between the ranks of one host, the
//! intra-host half of one-sided communication and of distributed shared
//! memory: either memory every rank maps, each rank's part after the one
//! before it (MPI's `MPI_Win_allocate_shared`, [`Window::allocate`]), or each
//! rank's own memory, reached by the others through cross-memory attach
//! (`MPI_Win_create`, [`Window::create`]).
//!
//! Design decisions a newcomer might otherwise undo:
//! - **One anonymous memory file, mapped by every rank.** Rank 0 makes it
//!   (`memfd_create`) and the others open it through `/proc/<pid>/fd/<fd>`, so
//!   nothing has a name in the file system and nothing is left behind however
//!   the job ends. Ranks on different hosts cannot share it: creation fails,
//!   naming the rule.
//! - **Accesses are copies, complete at return.** A put is a copy into the
//!   target's part (a store, or a `process_vm_writev` into the owner), a get
//!   a copy out of it, so a flush only orders memory and a fence is a barrier
//!   with full fences.
//! - **Locks are words in the shared memory** (`kumi_transport::shm::wordlock`,
//!   model-checked), after the data: one
//!   reader-writer lock per rank for MPI's passive-target epochs
//!   (`MPI_Win_lock`), and one mutex per rank that every accumulate to that
//!   rank holds while it reads, combines and writes, so concurrent
//!   accumulates are atomic per element as MPI wants, whatever epoch they
//!   are in.

use crate::coll::Op;
use crate::comm::Comm;
use crate::error::{Error, Result};
use kumi_transport::shm::wordlock::{MutexWord, RwWord};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// Bytes of the lock area per rank: two words, each on its own line.
const LOCK_BYTES: usize = 128;

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
    /// Offset of the lock area.
    locks: usize,
    _fd: OwnedFd,
}

impl Window {
    /// Allocates `size` bytes for this rank (displacement unit `disp_unit`)
    /// in memory every rank of `comm` maps. Collective; every rank of `comm`
    /// must run on this host.
    #[track_caller]
    pub fn allocate(comm: &Comm, size: usize, disp_unit: usize) -> Result<Window> {
        let comm = comm.dup()?;
        one_host(&comm)?;
        if disp_unit == 0 {
            return Err(Error::invalid(
                "disp_unit",
                0,
                "a positive displacement unit",
            ));
        }
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
        Ok(Window {
            comm,
            base,
            len,
            parts,
            pids: None,
            locks,
            _fd: fd,
        })
    }

    /// A window over `size` bytes of this rank's own memory at `base` (MPI's
    /// `MPI_Win_create`): other ranks reach it by cross-memory attach
    /// (`process_vm_readv`/`writev`), which the kernel must allow; only the
    /// locks are shared memory. Collective; every rank of `comm` must run
    /// on this host.
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
        let comm = comm.dup()?;
        one_host(&comm)?;
        if disp_unit == 0 {
            return Err(Error::invalid(
                "disp_unit",
                0,
                "a positive displacement unit",
            ));
        }
        kumi_transport::cma::allow_peer_access();
        let card = [
            base as u64,
            size as u64,
            disp_unit as u64,
            std::process::id() as u64,
        ];
        let mut all = vec![0u64; 4 * comm.size()];
        comm.allgather(&card, &mut all)?;
        let parts = all
            .chunks(4)
            .map(|c| (c[0] as usize, c[1] as usize, c[2] as usize))
            .collect();
        let pids = all.chunks(4).map(|c| c[3] as i32).collect();
        let len = LOCK_BYTES * comm.size();
        let (fd, map) = share(&comm, len)?;
        Ok(Window {
            comm,
            base: map,
            len,
            parts,
            pids: Some(pids),
            locks: 0,
            _fd: fd,
        })
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
            Some(pids) if r != self.comm.rank() => {
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
                res.map_err(|e| {
                    Error::Io(io::Error::new(
                        e.kind(),
                        format!(
                            "one-sided access to rank {r} (process_vm_{}v): {e}",
                            if to_target { "write" } else { "read" }
                        ),
                    ))
                })
            }
            _ => {
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

    /// The bytes `[offset, offset + len)` of rank `r`'s part, checked.
    fn range(&self, r: usize, offset: u64, len: usize) -> Result<*mut u8> {
        let (p, size, _) = self.part(r).ok_or_else(|| self.no_rank(r))?;
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

    fn word(&self, r: usize, which: usize) -> &AtomicU64 {
        let off = self.locks + r * LOCK_BYTES + which * 64;
        debug_assert!(off + 8 <= self.len);
        // SAFETY: the lock area is inside the mapping, 64-byte aligned, and
        // only ever accessed as atomics (every rank maps it the same way).
        unsafe { &*(self.base.as_ptr().add(off) as *const AtomicU64) }
    }

    /// Copies `data` into rank `r`'s part at byte `offset`.
    pub fn put(&self, r: usize, offset: u64, data: &[u8]) -> Result<()> {
        let p = self.range(r, offset, data.len())?;
        self.transfer(r, p, data.as_ptr() as *mut u8, data.len(), true)
    }

    /// Copies from rank `r`'s part at byte `offset` into `out`.
    pub fn get(&self, r: usize, offset: u64, out: &mut [u8]) -> Result<()> {
        let p = self.range(r, offset, out.len())?;
        self.transfer(r, p, out.as_mut_ptr(), out.len(), false)
    }

    /// Combines `data` into rank `r`'s part at byte `offset` with
    /// `combine(cur, data)` (which turns `cur`, the bytes there, into the new
    /// ones), atomically with respect to every other accumulate to rank `r`;
    /// the bytes before are copied to `fetch` if given.
    pub fn accumulate(
        &self,
        r: usize,
        offset: u64,
        data: &[u8],
        fetch: Option<&mut [u8]>,
        combine: impl FnOnce(&mut [u8], &[u8]) -> Result<()>,
    ) -> Result<()> {
        let p = self.range(r, offset, data.len())?;
        let m = MutexWord(self.word(r, 1));
        m.lock();
        let mut cur = vec![0u8; data.len()];
        // Under the accumulate mutex: read, combine, write back.
        let mut r2 = self.transfer(r, p, cur.as_mut_ptr(), cur.len(), false);
        if r2.is_ok() {
            if let Some(f) = fetch {
                let n = f.len().min(cur.len());
                f[..n].copy_from_slice(&cur[..n]);
            }
            r2 = combine(&mut cur, data);
        }
        if r2.is_ok() {
            r2 = self.transfer(r, p, cur.as_mut_ptr(), cur.len(), true);
        }
        m.unlock();
        r2
    }

    /// Locks rank `r`'s part: exclusively, or shared with other shared
    /// lockers (MPI's passive-target epoch).
    pub fn lock(&self, r: usize, exclusive: bool) -> Result<()> {
        self.range(r, 0, 0)?;
        RwWord(self.word(r, 0)).lock(exclusive);
        Ok(())
    }

    /// Releases a lock taken by [`Window::lock`].
    pub fn unlock(&self, r: usize, exclusive: bool) -> Result<()> {
        self.range(r, 0, 0)?;
        RwWord(self.word(r, 0)).unlock(exclusive);
        Ok(())
    }

    /// Orders this rank's accesses to the window with everyone's (MPI's
    /// `MPI_Win_sync` and flushes: every access is complete at return).
    pub fn sync(&self) {
        fence(Ordering::SeqCst);
    }

    /// Ends an access epoch and starts the next one on every rank
    /// (collective): full fences around a barrier.
    #[track_caller]
    pub fn fence(&self) -> Result<()> {
        fence(Ordering::SeqCst);
        self.comm.barrier()?;
        fence(Ordering::SeqCst);
        Ok(())
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `allocate`, of `len` bytes, unmapped
        // once (no reference into it outlives the window).
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), self.len) };
    }
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
