//! Asynchronous progress: the engine is shared by the application thread and a
//! progress thread that moves messages while the application computes.
//!
//! Why: a rank that computes for seconds without calling kumi would otherwise
//! hold up everyone who needs it to forward something: the interior ranks of a
//! combining tree, the rounds of a nonblocking collective it started, a
//! rendezvous whose clear-to-send it owes. The progress thread takes the engine
//! only when the application has stayed out of kumi for a whole interval, so it
//! never competes with a rank that communicates.
//!
//! The mode, documented for users in the README ("Asynchronous progress"):
//! - `KUMI_PROGRESS=on` (default for jobs of more than one rank): the thread
//!   exists but sleeps (parked, no timer) until the application leaves kumi
//!   with something outstanding that others may wait on ([`Engine::needs_async`]:
//!   a nonblocking operation or collective in flight, a combining service,
//!   frames queued for a full ring). Then it looks every `KUMI_PROGRESS_US`
//!   microseconds (default 500): if the application has not entered kumi since
//!   its last look and the engine is free, it runs the engine until nothing
//!   moves. A computing rank therefore delays the others by at most one
//!   interval plus a wake-up (~50 us here) per step of theirs that needs it;
//!   after a pass that moved something it looks again within 50 us, so a
//!   stream of requests through a computing rank is served at that pace.
//!   Cost: about one wake-up per interval while work is outstanding and the
//!   application computes; nothing when nothing is outstanding; backing off
//!   to 50 ms while the application itself waits in kumi (it progresses
//!   then), and to [`ACTIVE_BACKOFF`] intervals while it calls kumi often,
//!   whatever it leaves outstanding, since a wake-up costs tens of
//!   microseconds of the application's core on a virtual machine, and more
//!   where ranks share cores: a woken thread preempts a rank (so the first
//!   look after such a phase may come that many intervals late).
//! - `KUMI_PROGRESS=off`: no thread; progress happens only inside kumi calls.
//!
//! The application thread pays a few plain stores and loads per kumi call (no
//! atomic read-modify-write: the progress thread's side of the engine lock is
//! a `membarrier`, see `kumi_transport::lock`); the progress thread never
//! waits for the lock, and the application waits only for the rest of a
//! bounded pass.

use crate::engine::{Engine, ReqId, WaitInfo};
use crate::error::{Error, Result};
use crate::request::Status;
use kumi_core::matching::Pattern;
use kumi_transport::lock::{VisitGuard, VisitLock};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

/// The engine as every handle of this rank holds it.
pub(crate) type EngineRef = Arc<Shared>;

/// The engine and what the progress thread needs to decide when to step in.
pub(crate) struct Shared {
    /// Entered by the application thread on every call, tried by the
    /// progress thread (see `kumi_transport::lock`).
    engine: VisitLock<Engine>,
    /// Bumped each time the application thread takes the engine. Written only
    /// by the application thread (a `Comm` is not `Send`, so there is one),
    /// hence a relaxed load and store instead of an atomic add; the progress
    /// thread only compares two of its values, and needs no ordering with
    /// the engine's data, which the mutex orders.
    entries: AtomicU64,
    /// The progress thread is parked without a timer and must be unparked
    /// when work appears. Relaxed: a lost race costs one extra unpark or one
    /// interval of delay (the thread re-checks the engine under the mutex
    /// before parking, and `unpark` before `park` makes `park` return).
    parked: AtomicBool,
    /// Set once, at finalize. Relaxed: it is stored before the unpark that
    /// wakes the thread (an unpark synchronizes with the park it ends), and a
    /// thread that is not parked sees it at its next look at the latest.
    stop: AtomicBool,
    thread: OnceLock<Thread>,
    /// Joined at finalize (see [`Shared::stop_thread`]).
    handle: Mutex<Option<JoinHandle<()>>>,
    interval: Duration,
}

/// Exclusive access to the engine for the application thread.
pub(crate) struct Guard<'a> {
    guard: VisitGuard<'a, Engine>,
    shared: &'a Shared,
}

impl Deref for Guard<'_> {
    type Target = Engine;
    #[inline]
    fn deref(&self) -> &Engine {
        &self.guard
    }
}

impl DerefMut for Guard<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut Engine {
        &mut self.guard
    }
}

/// The waits of blocking calls, on the guard rather than the engine, so that
/// under `MPI_THREAD_MULTIPLE` they can leave the engine between passes and
/// let another thread in (`crate::threads`). Without a hand-over each is the
/// engine's own wait, after one load and branch.
impl Guard<'_> {
    /// [`Engine::wait_until`], handing the turn on between passes when
    /// several threads may call.
    #[inline(always)]
    pub(crate) fn wait_until(
        &mut self,
        info: WaitInfo,
        done: impl FnMut(&mut Engine) -> bool,
    ) -> Result<()> {
        match crate::threads::hand_over() {
            None => self.guard.wait_until(info, done),
            Some(h) => self.wait_handing_over(done, h),
        }
    }

    /// [`Engine::wait_until_with_mates`], likewise (the mates matter only to
    /// the engine's own wait).
    #[inline(always)]
    pub(crate) fn wait_until_with_mates(
        &mut self,
        info: WaitInfo,
        done: impl FnMut(&mut Engine) -> bool,
        mates_wait: impl FnMut(&Engine) -> bool,
    ) -> Result<()> {
        match crate::threads::hand_over() {
            None => self.guard.wait_until_with_mates(info, done, mates_wait),
            Some(h) => self.wait_handing_over(done, h),
        }
    }

    /// [`Engine::wait`], likewise.
    #[inline(always)]
    pub(crate) fn wait(&mut self, info: WaitInfo, id: ReqId) -> Result<Status> {
        self.wait_until(info, |e| e.is_done(id))?;
        self.guard.take_result(id)
    }

    /// [`Engine::recv`], likewise: with several threads, a receive posted
    /// and waited for (the direct receive is one per engine and waits
    /// inside it).
    #[inline(always)]
    pub(crate) fn recv(
        &mut self,
        info: WaitInfo,
        pat: Pattern,
        buf: *mut u8,
        cap: usize,
    ) -> Result<Status> {
        if crate::threads::hand_over().is_none() {
            return self.guard.recv(info, pat, buf, cap);
        }
        let id = self.guard.post_recv(pat, buf, cap)?;
        self.wait(info, id)
    }

    /// A wait under `MPI_THREAD_MULTIPLE`: a pass of the engine, then the
    /// hand-over with the engine left, until `done`. Not reported to the
    /// launcher as blocked (see `crate::threads`).
    #[cold]
    fn wait_handing_over(
        &mut self,
        mut done: impl FnMut(&mut Engine) -> bool,
        hand_over: crate::threads::HandOver,
    ) -> Result<()> {
        let mut idle = 0u32;
        loop {
            if done(&mut self.guard) {
                return Ok(());
            }
            let moved = self.guard.progress()?;
            if done(&mut self.guard) {
                return Ok(());
            }
            idle = if moved > 0 { 0 } else { idle.saturating_add(1) };
            self.guard.unlocked(|| hand_over(idle));
        }
    }
}

impl Drop for Guard<'_> {
    // Always: every blocking call drops one or two, and out of line each
    // was a call of its own.
    #[inline(always)]
    fn drop(&mut self) {
        let Some(t) = self.shared.thread.get() else {
            return;
        };
        // Relaxed: see the field docs.
        if self.shared.parked.load(Ordering::Relaxed) && self.guard.needs_async() {
            self.shared.parked.store(false, Ordering::Relaxed);
            t.unpark();
        }
    }
}

impl Shared {
    /// The engine, shared with a progress thread that looks at it every
    /// `interval` (`KUMI_PROGRESS_US`) while the application computes;
    /// `membarrier`: whether the lock may use asymmetric fences
    /// (`KUMI_SHM_MEMBARRIER`).
    pub(crate) fn new(engine: Engine, interval: Duration, membarrier: bool) -> EngineRef {
        // The application's side of the engine lock costs no atomic
        // read-modify-write when the progress thread's may be a membarrier
        // (`kumi_transport::lock`); `KUMI_SHM_MEMBARRIER=off` forbids it.
        let asym = membarrier && kumi_transport::lock::register_membarrier();
        Arc::new(Shared {
            engine: VisitLock::new(engine, asym),
            entries: AtomicU64::new(0),
            parked: AtomicBool::new(true),
            stop: AtomicBool::new(false),
            thread: OnceLock::new(),
            handle: Mutex::new(None),
            interval,
        })
    }

    /// The engine, for the application thread (blocks while the progress
    /// thread runs a pass, a few microseconds at most).
    #[inline]
    pub(crate) fn borrow_mut(&self) -> Guard<'_> {
        let guard = self.engine.lock();
        self.enter();
        Guard {
            guard,
            shared: self,
        }
    }

    /// Same as [`Shared::borrow_mut`] (the engine has no shared borrows).
    #[inline]
    pub(crate) fn borrow(&self) -> Guard<'_> {
        self.borrow_mut()
    }

    /// The engine unless this thread already holds it (drops of requests
    /// during unwinding).
    pub(crate) fn try_borrow_mut(&self) -> Option<Guard<'_>> {
        if self.engine.owner_inside() {
            return None;
        }
        let guard = self.engine.lock();
        self.enter();
        Some(Guard {
            guard,
            shared: self,
        })
    }

    #[inline]
    fn enter(&self) {
        // Relaxed load and store: single writer (see the field docs).
        let n = self.entries.load(Ordering::Relaxed);
        self.entries.store(n.wrapping_add(1), Ordering::Relaxed);
    }

    /// Starts the progress thread (`KUMI_PROGRESS` on).
    pub(crate) fn start_thread(self: &Arc<Self>) -> Result<()> {
        // The thread holds only a weak reference, so the engine is dropped
        // (and its transports closed) when the application lets it go.
        let weak = Arc::downgrade(self);
        let handle = std::thread::Builder::new()
            .name("kumi-progress".into())
            .stack_size(256 << 10)
            .spawn(move || run(weak))
            .map_err(|e| Error::Bootstrap(format!("cannot start the progress thread: {e}")))?;
        let _ = self.thread.set(handle.thread().clone());
        *self.handle.lock().unwrap_or_else(PoisonError::into_inner) = Some(handle);
        Ok(())
    }

    /// Stops the progress thread (at finalize) and waits for it: at most the
    /// rest of a pass, as it exits at its next look.
    ///
    /// Waiting matters: the thread holds a strong reference for a moment at
    /// each look. Were the application to drop its last one then, the engine
    /// would be dropped on the progress thread (its transports' linger and
    /// last words included) while the process exits under it, and the last
    /// frames of the job could be lost.
    pub(crate) fn stop_thread(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let Some(handle) = self
            .handle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return;
        };
        handle.thread().unpark();
        // The thread catches its own panics (it aborts the process instead).
        let _ = handle.join();
    }
}

/// How soon the thread looks again after a pass that moved something.
const QUICK_LOOK: Duration = Duration::from_micros(50);

/// Longest sleep, in intervals, while the application calls kumi often.
const ACTIVE_BACKOFF: u32 = 8;

/// Longest back-off while the application itself is inside kumi.
const MAX_BACKOFF: Duration = Duration::from_millis(50);

fn run(weak: std::sync::Weak<Shared>) {
    let body = std::panic::AssertUnwindSafe(|| loop {
        let Some(shared) = weak.upgrade() else { return };
        if shared.stop.load(Ordering::Relaxed) {
            return;
        }
        let parked = shared.parked.load(Ordering::Relaxed);
        let interval = shared.interval;
        drop(shared);
        if parked {
            std::thread::park();
            continue;
        }
        let mut wait = interval;
        loop {
            let Some(shared) = weak.upgrade() else { return };
            let seen = shared.entries.load(Ordering::Relaxed);
            drop(shared);
            std::thread::park_timeout(wait);
            let Some(shared) = weak.upgrade() else { return };
            if shared.stop.load(Ordering::Relaxed) {
                return;
            }
            if shared.entries.load(Ordering::Relaxed) != seen {
                // The application was in kumi during the interval, so it
                // progressed itself, and the thread has nothing to do but
                // wake: sleep longer each time, up to ACTIVE_BACKOFF
                // intervals, whether or not it left work outstanding (a
                // program that starts a collective and waits for it,
                // or posts a receive, sends and waits, leaves some at every
                // other call). Each wake-up costs tens of microseconds of
                // the application's core on a virtual machine, and where
                // ranks share cores it preempts one (measured:
                // docs/BENCHMARKS.md, sessions 36 and 61).
                wait = (wait * 2).clamp(interval, interval * ACTIVE_BACKOFF);
                continue;
            }
            let mut e = match shared.engine.try_visit() {
                Some(e) => e,
                None => {
                    // The application waits inside kumi and progresses itself.
                    wait = (wait * 2).min(MAX_BACKOFF);
                    continue;
                }
            };
            // Traffic tends to come in streams (a client's next request right
            // after its reply): after a pass that moved something, look again
            // soon, then back off to the interval.
            wait = if e.async_pass() {
                QUICK_LOOK.min(interval)
            } else {
                (wait * 2).min(interval)
            };
            if !e.needs_async() {
                shared.parked.store(true, Ordering::Relaxed);
                break;
            }
        }
    });
    if std::panic::catch_unwind(body).is_err() {
        // The engine may be half-updated; nothing sound can continue.
        eprintln!("kumi: the progress thread panicked; aborting this rank");
        std::process::abort();
    }
}
