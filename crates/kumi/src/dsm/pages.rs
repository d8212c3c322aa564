//! Page-based shared memory (SCASH's model): a segment that every rank maps
//! as ordinary memory, kept coherent page by page by the protocol of
//! `kumi_core::dsm` (home-based release consistency).
//!
//! How a rank's loads and stores reach the protocol:
//! - **Two views of one memory file.** The segment is a `memfd` mapped
//!   twice: the *application view* ([`Shared::as_ptr`]) carries each page's
//!   protection as the protocol sets it (none: no copy here; read-only: a
//!   clean copy; read-write: written since the last release), the *engine
//!   view* is always readable and writable and is what the protocol reads,
//!   installs and applies diffs through — so a home can take a diff into a
//!   page its application may only read, and no protection is ever opened
//!   for the engine's sake.
//! - **Faults.** A load or store the protection stops raises `SIGSEGV`. The
//!   handler (installed once, chaining to the one it replaced for every
//!   address outside a segment, so a real crash stays a crash) finds the
//!   segment, asks the protocol (`Node::access`: fetch the page for a load,
//!   and make a twin and allow stores for a store, which the fault's error
//!   code tells), waits in the engine for the page if it must, and
//!   returns: the instruction runs again. This is `mprotect` and a
//!   signal handler, which every user may use; `userfaultfd` would need a
//!   privilege (`vm.unprivileged_userfaultfd`) or root.
//! - **Rules the handler relies on.** Only the rank's own thread (the one
//!   that made the segment) may touch the segment; and not from inside a
//!   kumi call (a page fault there would need the engine that call holds):
//!   pass segment memory to kumi calls only where it is readable for sure,
//!   or copy it out first. Either case is stopped with a message naming the
//!   segment and the page, never a hang.

use super::{service, Value};
use crate::comm::Comm;
use crate::engine::WaitInfo;
use crate::error::{Error, Result};
use kumi_core::call::Call;
use kumi_core::dsm::{Geometry, Page, Prot, Store};
use std::marker::PhantomData;
use std::os::fd::OwnedFd;
use std::panic::Location;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Once;

/// A segment of `len` values of `T` shared page by page (see the module
/// documentation).
pub struct Shared<T: Value> {
    seg: Box<Segment>,
    len: usize,
    _t: PhantomData<T>,
}

/// What the fault handler needs of a segment.
struct Segment {
    comm: Comm,
    app: NonNull<u8>,
    eng: NonNull<u8>,
    bytes: usize,
    page: usize,
    /// The thread allowed to touch the segment (its maker).
    tid: i32,
    /// Its entry in [`SEGMENTS`].
    slot: usize,
    _fd: OwnedFd,
}

/// The protocol's view of a segment's memory (addresses of the two views).
struct Views {
    app: usize,
    eng: usize,
    page: usize,
    /// The memory file (a duplicate of the segment's descriptor).
    file: OwnedFd,
    /// Pages the file has memory for (each bit set once a page was
    /// installed or prepared; pages touched otherwise may have memory too).
    backed: Vec<u64>,
    /// Each page's protection in the application view, as last set (the
    /// view is mapped with none): a change to the same is no system call.
    prot: Vec<Prot>,
}

impl Store for Views {
    fn page(&self, p: Page) -> &[u8] {
        // SAFETY: the protocol checked `p` against the segment's pages; the
        // engine view is mapped read-write for as long as the segment is
        // open in the service (closed before it is unmapped).
        unsafe {
            std::slice::from_raw_parts((self.eng + p as usize * self.page) as *const u8, self.page)
        }
    }
    fn page_mut(&mut self, p: Page) -> &mut [u8] {
        // SAFETY: as above. The application may load or store the same bytes
        // through its view meanwhile only as a data race of its own program
        // (release consistency makes that the program's business).
        unsafe {
            std::slice::from_raw_parts_mut(
                (self.eng + p as usize * self.page) as *mut u8,
                self.page,
            )
        }
    }
    fn install(&mut self, p: Page, data: &[u8]) {
        let (word, bit) = (p as usize / 64, 1u64 << (p % 64));
        if self.backed[word] & bit == 0 {
            // The page's first copy, not prepared: writing it into the file
            // gives the page its memory and fills it in one system call,
            // where a copy through the engine view would first take a fault
            // to get the memory (measured: docs/BENCHMARKS.md, "The remote
            // page fault").
            self.backed[word] |= bit;
            let at = p as u64 * self.page as u64;
            if rustix::io::pwrite(&self.file, data, at).is_ok_and(|n| n == data.len()) {
                return;
            }
        }
        self.page_mut(p).copy_from_slice(data);
    }
    /// While the page's copy travels: memory for it, mapped in both views,
    /// and the application view already readable, so that the install is a
    /// copy and the protocol's `protect(Read)` after it no system call.
    /// Opening the page before its data is there is safe because nothing
    /// can load from it meanwhile: only the segment's own thread may touch
    /// the application view, and that thread is in the fault handler,
    /// waiting for this copy (the engine itself uses the engine view only).
    /// Each step is an optimization: if one fails (no memory now), the
    /// install and the first load after it do the work, and report.
    /// (Measured: docs/BENCHMARKS.md, session 39.)
    fn prepare(&mut self, p: Page) {
        let (word, bit) = (p as usize / 64, 1u64 << (p % 64));
        let off = p as usize * self.page;
        if self.backed[word] & bit == 0 {
            // SAFETY: one page of the engine view, a mapping this segment
            // owns; populating changes no byte.
            let r = unsafe {
                rustix::mm::madvise(
                    (self.eng + off) as *mut _,
                    self.page,
                    rustix::mm::Advice::LinuxPopulateWrite,
                )
            };
            if r.is_err() {
                return;
            }
            self.backed[word] |= bit;
        }
        self.protect(p, Prot::Read);
        // SAFETY: one page of the application view, readable now; populating
        // maps the file's page there and changes no byte.
        let _ = unsafe {
            rustix::mm::madvise(
                (self.app + off) as *mut _,
                self.page,
                rustix::mm::Advice::LinuxPopulateRead,
            )
        };
    }
    fn protect(&mut self, p: Page, prot: Prot) {
        if std::mem::replace(&mut self.prot[p as usize], prot) == prot {
            return;
        }
        let flags = match prot {
            Prot::None => rustix::mm::MprotectFlags::empty(),
            Prot::Read => rustix::mm::MprotectFlags::READ,
            Prot::ReadWrite => rustix::mm::MprotectFlags::READ | rustix::mm::MprotectFlags::WRITE,
        };
        // SAFETY: a page of the application view, a mapping this segment owns.
        let r = unsafe {
            rustix::mm::mprotect(
                (self.app + p as usize * self.page) as *mut _,
                self.page,
                flags,
            )
        };
        if let Err(e) = r {
            // Cannot happen on a mapping we own with a valid range; if it
            // did, the protocol's idea of the page would be wrong: stop.
            fatal(&format!("mprotect of a DSM page failed: {e}"));
        }
    }
}

impl<T: Value> Shared<T> {
    /// A segment of `len` values of `T`, zero at first, over every rank of
    /// `comm`; its pages are homed in blocks (the first pages at rank 0),
    /// and it has one lock per rank. Collective.
    #[track_caller]
    pub fn new(comm: &Comm, len: usize) -> Result<Shared<T>> {
        let comm = comm.dup()?;
        let page = rustix::param::page_size();
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .map(|b| b.max(1).next_multiple_of(page))
            .filter(|&b| b / page <= u32::MAX as usize && b <= isize::MAX as usize / 2)
            .ok_or_else(|| Error::invalid("len", len as i64, "a segment that fits in memory"))?;
        let id = comm.ctx();
        {
            let e = comm.engine();
            let me = comm.rank();
            if let Some(small) = (0..comm.size())
                .filter(|&r| r != me)
                .map(|r| e.frame_limit(comm.members()[r]))
                .find(|&l| l < page + 64)
            {
                return Err(Error::invalid(
                    "len",
                    len as i64,
                    format!("pages of {page} bytes in one frame, where a transport takes {small}"),
                ));
            }
        }
        let fd = rustix::fs::memfd_create("kumi-dsm", rustix::fs::MemfdFlags::CLOEXEC)
            .and_then(|fd| rustix::fs::ftruncate(&fd, bytes as u64).map(|()| fd))
            .map_err(|e| Error::Io(e.into()))?;
        let app = map(&fd, bytes, rustix::mm::ProtFlags::empty())?;
        let eng = map(
            &fd,
            bytes,
            rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
        )?;
        let g = Geometry {
            nodes: comm.size() as u32,
            pages: (bytes / page) as u32,
            page_size: page as u32,
            locks: comm.size() as u32,
        };
        let views = Views {
            app: app.as_ptr() as usize,
            eng: eng.as_ptr() as usize,
            page,
            file: fd.try_clone().map_err(Error::Io)?,
            backed: vec![0; (bytes / page).div_ceil(64)],
            prot: vec![Prot::None; bytes / page],
        };
        comm.engine().svc.dsm.open(
            id,
            g,
            comm.rank() as u32,
            comm.members().to_vec(),
            Box::new(views),
        );
        let mut seg = Box::new(Segment {
            comm,
            app,
            eng,
            bytes,
            page,
            tid: thread_id(),
            slot: usize::MAX,
            _fd: fd,
        });
        seg.slot = register(&seg)?;
        // Every rank opened the segment before any can ask for a page.
        seg.comm.barrier()?;
        Ok(Shared {
            seg,
            len,
            _t: PhantomData,
        })
    }

    /// Values in the segment.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the segment holds no values.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The segment's communicator (a duplicate of the one it was made on).
    pub fn comm(&self) -> &Comm {
        &self.seg.comm
    }

    /// The segment as memory of this rank: loads and stores of
    /// `len` values from here are the shared memory's accesses.
    pub fn as_ptr(&self) -> *mut T {
        self.seg.app.as_ptr().cast()
    }

    /// The segment as a slice.
    ///
    /// # Safety
    /// The program must be free of data races under the segment's
    /// consistency (module documentation of [`crate::dsm`]): between two
    /// synchronisations, no value is written by one rank and read or written
    /// by another. Only this thread may use the slice, and not inside kumi
    /// calls (see the module documentation of `pages`).
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn as_mut_slice(&self) -> &mut [T] {
        // SAFETY: `len` values fit the mapping (made so in `new`); the
        // caller promises the rest.
        unsafe { std::slice::from_raw_parts_mut(self.as_ptr(), self.len) }
    }

    /// Takes global lock `lock` (acquire: writes other ranks made before
    /// they released it are visible after).
    #[track_caller]
    pub fn lock(&self, lock: u32) -> Result<()> {
        super::take_lock(&self.seg.comm, lock, Location::caller())
    }

    /// Releases global lock `lock` once this rank's writes are at their
    /// pages' homes.
    #[track_caller]
    pub fn unlock(&self, lock: u32) -> Result<()> {
        super::give_lock(&self.seg.comm, lock, Location::caller())
    }

    /// Waits for every rank (collective); writes made by any rank before it
    /// are visible to all after it.
    #[track_caller]
    pub fn barrier(&self) -> Result<()> {
        let at = Location::caller();
        let (c, id) = (&self.seg.comm, self.seg.comm.ctx());
        let mut e = c.engine();
        service::barrier(&mut e, id)?;
        service::wait(&mut e, id, |_| c.info(Call::Barrier, -2, -2, at))
    }

    /// Frees the segment after a barrier (collective), so no rank asks for
    /// a page of it any more. Dropping it without does not wait.
    #[track_caller]
    pub fn free(self) -> Result<()> {
        self.barrier()
    }
}

impl<T: Value> Drop for Shared<T> {
    fn drop(&mut self) {
        let s = &self.seg;
        unregister(s.slot);
        s.comm.engine().svc.dsm.close(s.comm.ctx());
        for p in [s.app, s.eng] {
            // SAFETY: the views made in `new`, no longer reachable: the
            // handler's entry and the service's segment are gone.
            let _ = unsafe { rustix::mm::munmap(p.as_ptr().cast(), s.bytes) };
        }
    }
}

fn map(fd: &OwnedFd, bytes: usize, prot: rustix::mm::ProtFlags) -> Result<NonNull<u8>> {
    // SAFETY: a fresh shared mapping of a file of `bytes` bytes; it aliases
    // no Rust object.
    let p = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            bytes,
            prot,
            rustix::mm::MapFlags::SHARED,
            fd,
            0,
        )
    }
    .map_err(|e| Error::Io(e.into()))?;
    NonNull::new(p.cast()).ok_or_else(|| Error::Protocol("mmap returned null".into()))
}

/// Segments the fault handler knows: the application view's start and end,
/// and the segment. A slot is free while its start is 0.
const SLOTS: usize = 64;

struct Slot {
    start: AtomicUsize,
    end: AtomicUsize,
    seg: AtomicPtr<Segment>,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot {
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
    seg: AtomicPtr::new(std::ptr::null_mut()),
};
static SEGMENTS: [Slot; SLOTS] = [FREE; SLOTS];

/// The action `SIGSEGV` had before kumi's, to which other faults go.
static PREVIOUS: AtomicPtr<libc::sigaction> = AtomicPtr::new(std::ptr::null_mut());

fn register(seg: &Segment) -> Result<usize> {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(install);
    signal_stack()?;
    let start = seg.app.as_ptr() as usize;
    for (i, s) in SEGMENTS.iter().enumerate() {
        // The segment and end are stored before the start (Release), which
        // the handler reads first (Acquire): a start it sees comes with them.
        if s.start.load(Ordering::Relaxed) == 0 && s.seg.load(Ordering::Relaxed).is_null() {
            s.seg
                .store(seg as *const Segment as *mut Segment, Ordering::Relaxed);
            s.end.store(start + seg.bytes, Ordering::Relaxed);
            s.start.store(start, Ordering::Release);
            return Ok(i);
        }
    }
    Err(Error::invalid(
        "len",
        SLOTS as i64,
        format!("at most {SLOTS} page-shared segments at once per rank"),
    ))
}

fn unregister(slot: usize) {
    let s = &SEGMENTS[slot];
    s.start.store(0, Ordering::Release);
    s.end.store(0, Ordering::Relaxed);
    s.seg.store(std::ptr::null_mut(), Ordering::Release);
}

fn install() {
    // SAFETY: a zeroed sigaction is a valid value to fill; the handler is an
    // `extern "C"` function of the signature SA_SIGINFO asks for; the old
    // action is written to a leaked box the handler reads later.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_segv as *const () as usize;
        act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER;
        libc::sigemptyset(&mut act.sa_mask);
        let old = Box::into_raw(Box::new(std::mem::zeroed::<libc::sigaction>()));
        if libc::sigaction(libc::SIGSEGV, &act, old) == 0 {
            PREVIOUS.store(old, Ordering::Release);
        }
    }
}

/// Bytes of the alternate signal stack the fault handler runs on.
const SIGNAL_STACK: usize = 1 << 20;

/// Gives this thread (the one that touches the segment) an alternate signal
/// stack of [`SIGNAL_STACK`] bytes, once: the handler runs there
/// (`SA_ONSTACK`, so that a stack overflow, a fault outside every segment,
/// still reaches Rust's handler with room to report it), and resolving a
/// fault runs the engine, which needs more than the few kilobytes of the
/// stack Rust gives a thread for that report.
fn signal_stack() -> Result<()> {
    thread_local! {
        static DONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if DONE.get() {
        return Ok(());
    }
    // SAFETY: a fresh private mapping for the stack, kept for the thread's
    // life (it is never unmapped: a handler may run on it until the end);
    // `sigaltstack` reads the descriptor we pass.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            SIGNAL_STACK,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            return Err(Error::Io(std::io::Error::last_os_error()));
        }
        let st = libc::stack_t {
            ss_sp: p,
            ss_flags: 0,
            ss_size: SIGNAL_STACK,
        };
        if libc::sigaltstack(&st, std::ptr::null_mut()) != 0 {
            return Err(Error::Io(std::io::Error::last_os_error()));
        }
    }
    DONE.set(true);
    Ok(())
}

/// The segment whose application view holds `addr`, if any.
fn find(addr: usize) -> Option<&'static Segment> {
    SEGMENTS.iter().find_map(|s| {
        let start = s.start.load(Ordering::Acquire);
        if start == 0 || addr < start || addr >= s.end.load(Ordering::Relaxed) {
            return None;
        }
        // SAFETY: a registered segment stays alive until it unregisters,
        // which its own thread (the only one that faults on it) does.
        unsafe { s.seg.load(Ordering::Acquire).as_ref() }
    })
}

extern "C" fn on_segv(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SIGSEGV.
    let addr = unsafe { (*info).si_addr() } as usize;
    if let Some(seg) = find(addr) {
        // No panic may unwind out of a signal handler.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            resolve(seg, addr, stored(ctx))
        }));
        match r {
            Ok(Ok(())) => return,
            Ok(Err(why)) => fatal(&why),
            Err(_) => fatal("a DSM page fault panicked"),
        }
    }
    chain(sig, info, ctx);
}

/// Hands a fault outside every segment to the action before kumi's.
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let prev = PREVIOUS.load(Ordering::Acquire);
    // SAFETY: `prev` is the action `sigaction` returned, or null.
    let act = unsafe { prev.as_ref() }.map(|a| (a.sa_sigaction, a.sa_flags));
    match act {
        Some((h, flags)) if h != libc::SIG_DFL && h != libc::SIG_IGN => {
            if flags & libc::SA_SIGINFO != 0 {
                // SAFETY: the previous handler was installed with
                // SA_SIGINFO, so it has this signature.
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    unsafe { std::mem::transmute(h) };
                f(sig, info, ctx);
            } else {
                // SAFETY: as above, the one-argument form.
                let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
                f(sig);
            }
        }
        _ => {
            // The default action: restore it; returning re-runs the faulting
            // instruction, which then ends the process as it would have.
            // SAFETY: resetting a signal to its default action.
            unsafe { libc::signal(sig, libc::SIG_DFL) };
        }
    }
}

/// Whether the access that faulted was a store, if the signal's context
/// says (x86-64: bit 1 of the page fault's error code).
#[cfg(target_arch = "x86_64")]
fn stored(ctx: *mut libc::c_void) -> Option<bool> {
    // SAFETY: the kernel passes a `ucontext_t` to an SA_SIGINFO handler.
    let err =
        unsafe { (*ctx.cast::<libc::ucontext_t>()).uc_mcontext.gregs[libc::REG_ERR as usize] };
    Some(err & 2 != 0)
}

#[cfg(not(target_arch = "x86_64"))]
fn stored(_: *mut libc::c_void) -> Option<bool> {
    None
}

/// Resolves a fault at `addr` in `seg`, from its own thread; `write` says
/// whether the access was a store, if known. A load gets a copy to read; a
/// store gets a copy and a twin. Not knowing, the handler returns once the
/// copy is there: a store then faults again, on a page it may read, which
/// the protocol takes as a store.
fn resolve(seg: &Segment, addr: usize, write: Option<bool>) -> std::result::Result<(), String> {
    let page = ((addr - seg.app.as_ptr() as usize) / seg.page) as Page;
    let id = seg.comm.ctx();
    let whose = || {
        format!(
            "DSM segment #{id}, page {page} (byte {})",
            page as usize * seg.page
        )
    };
    if thread_id() != seg.tid {
        return Err(format!(
            "{} touched by a thread other than the one that made the segment",
            whose()
        ));
    }
    let Some(mut e) = seg.comm.engine_rc().try_borrow_mut() else {
        return Err(format!(
            "{} touched inside a kumi call: pass segment memory to kumi calls only once \
             this rank has read it since its last lock or barrier, or copy it out first",
            whose()
        ));
    };
    loop {
        let ready =
            service::fault(&mut e, id, page, write).map_err(|err| format!("{}: {err}", whose()))?;
        if ready {
            return Ok(());
        }
        let home = service::home(&e, id, page).map_or(-2, |h| h as i32);
        let info: WaitInfo = seg
            .comm
            .info(Call::DsmFault, home, page as i32, Location::caller());
        service::wait(&mut e, id, |_| info).map_err(|err| format!("{}: {err}", whose()))?;
        if write.is_none() {
            return Ok(());
        }
    }
}

/// Ends the rank after a fault that cannot be resolved.
fn fatal(why: &str) -> ! {
    eprintln!("kumi: {why}");
    std::process::abort()
}

/// This thread's id.
fn thread_id() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() }
}
