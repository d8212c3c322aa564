//! Asynchronous progress: the engine is shared by the application thread and a
//! progress thread that moves messages while the application computes.
//!
//! Why: a rank that computes for seconds without calling kumi would otherwise
//! hold up everyone who needs it to forward something: the interior ranks of a
//! combining tree, the rounds of a nonblocking collective it started, a
//! rendezvous whose clear-to-send it owes. The progress thread takes the engine
//! only when the application is out of kumi, so it never competes with a rank
//! that communicates.
//!
//! The mode, documented for users in the README ("Asynchronous progress"):
//! - `KUMI_PROGRESS=on` (default for jobs of more than one rank): the thread
//!   sleeps on the rank's progress bell (`kumi_transport::bell`) and looks
//!   when asked. Leaving kumi, the application arms the bell if it leaves
//!   something outstanding that others may wait on ([`Engine::needs_async`]:
//!   a nonblocking operation or collective in flight, a combining service,
//!   frames queued for a full ring); the thread disarms it after a pass that
//!   leaves nothing outstanding (see `Guard`'s drop for why not the
//!   application). A rank of the host stuck in kumi for `KUMI_PROGRESS_US`
//!   microseconds (default 500) rings the armed bells of the host's ranks
//!   that are not inside a blocking kumi call ([`Demand`]), and again every
//!   interval while it stays stuck; the thread then runs a pass if the
//!   engine is free.
//!   So a computing rank delays the others by at most about one interval
//!   plus a wake-up (~50 us here) per step of theirs that needs it, and
//!   costs nothing while nobody waits for it: the thread wakes only on
//!   demand. A wake-up costs tens of microseconds of the application's core
//!   on a virtual machine, and where ranks share cores a woken thread
//!   preempts a rank (measured: docs/BENCHMARKS.md, sessions 61 and 62).
//!   After a pass that moved something the thread looks again within 50 us,
//!   since traffic comes in streams, until a pass moves nothing.
//!   Ranks of other hosts cannot ring the bell: while a rank that reaches
//!   others over the network leaves work outstanding, its thread also looks
//!   every interval on its own, backing off to [`ACTIVE_BACKOFF`] intervals
//!   while the application calls kumi often (it progresses itself then) and
//!   to 50 ms while the application waits inside kumi.
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
use kumi_transport::bell::{Bell, ARMED, IDLE, RUNG};
use kumi_transport::lock::{VisitGuard, VisitLock};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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
    /// Where the progress thread sleeps, armed by the application when it
    /// leaves kumi with work outstanding (`kumi_transport::bell`).
    bell: Bell,
    /// The rank reaches others over the network, who cannot ring the bell:
    /// while armed, the thread looks on a timer too.
    net: bool,
    /// With `net`: the thread sleeps without a timer, and the application
    /// rings the bell when it arms it. Dekker with the thread (each side
    /// stores, fences SeqCst, then loads the other's word): either the
    /// thread sees the bell armed and keeps its timer, or the application
    /// sees this flag and rings. Without `net` nobody reads it.
    untimed: AtomicBool,
    /// Set once, at finalize, before the bell is rung. Relaxed: the thread
    /// looks at it after every wake-up, and the ring changes the word the
    /// thread sleeps on, so the thread cannot sleep through it.
    stop: AtomicBool,
    /// Whether a progress thread runs (set once, when it starts).
    started: OnceLock<()>,
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
        if self.shared.started.get().is_none() {
            return;
        }
        // Arms only: the thread disarms after a pass that leaves nothing
        // outstanding. Disarming here too would write the bell's line twice
        // per nonblocking operation, a line that every sender to this rank
        // reads; a bell left armed costs at most one needless pass per ring.
        // Under the engine's lock, like the thread's own writes of the bell.
        let bell = &self.shared.bell;
        if bell.get() == IDLE && self.guard.needs_async() {
            bell.set(ARMED);
            if self.shared.net {
                // Dekker with the thread (see `Shared::untimed`).
                fence(Ordering::SeqCst);
                if self.shared.untimed.load(Ordering::Relaxed) {
                    self.shared.untimed.store(false, Ordering::Relaxed);
                    bell.ring();
                }
            }
        }
    }
}

impl Shared {
    /// The engine, shared with a progress thread that serves others' waits
    /// of `interval` (`KUMI_PROGRESS_US`) while the application computes;
    /// `membarrier`: whether the lock may use asymmetric fences
    /// (`KUMI_SHM_MEMBARRIER`).
    pub(crate) fn new(engine: Engine, interval: Duration, membarrier: bool) -> EngineRef {
        // The application's side of the engine lock costs no atomic
        // read-modify-write when the progress thread's may be a membarrier
        // (`kumi_transport::lock`); `KUMI_SHM_MEMBARRIER=off` forbids it.
        let asym = membarrier && kumi_transport::lock::register_membarrier();
        let (bell, net) = (engine.progress_bell(), engine.has_net());
        Arc::new(Shared {
            engine: VisitLock::new(engine, asym),
            entries: AtomicU64::new(0),
            bell,
            net,
            untimed: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            started: OnceLock::new(),
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
        // Its own handle on the bell keeps the word alive while it sleeps
        // there without the engine.
        let weak = Arc::downgrade(self);
        let bell = self.bell.clone();
        let handle = std::thread::Builder::new()
            .name("kumi-progress".into())
            .stack_size(256 << 10)
            .spawn(move || run(weak, bell))
            .map_err(|e| Error::Bootstrap(format!("cannot start the progress thread: {e}")))?;
        let _ = self.started.set(());
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
        self.bell.ring();
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

fn run(weak: std::sync::Weak<Shared>, bell: Bell) {
    let body = std::panic::AssertUnwindSafe(|| {
        // `Some(wait)` while the thread looks on a timer: right after a pass
        // that moved something, and while a rank with network peers leaves
        // work outstanding. `None`: asleep until rung.
        let mut timer: Option<Duration> = None;
        loop {
            let Some(shared) = weak.upgrade() else { return };
            if shared.stop.load(Ordering::Relaxed) {
                return;
            }
            let (interval, net) = (shared.interval, shared.net);
            let seen = shared.entries.load(Ordering::Relaxed);
            let mut v = bell.get();
            if v != RUNG && timer.is_none() && net {
                // Dekker with the application (see `Shared::untimed`).
                shared.untimed.store(true, Ordering::Relaxed);
                fence(Ordering::SeqCst);
                v = bell.get();
                if v == ARMED {
                    shared.untimed.store(false, Ordering::Relaxed);
                    timer = Some(interval);
                }
            }
            drop(shared);
            if v != RUNG {
                bell.wait(v, timer);
            }
            let Some(shared) = weak.upgrade() else { return };
            if shared.stop.load(Ordering::Relaxed) {
                return;
            }
            if net {
                shared.untimed.store(false, Ordering::Relaxed);
            }
            if bell.get() != RUNG {
                // Not rung: the timer ran out (or the application took a
                // ring back, having progressed itself, or a spurious wake).
                let Some(wait) = timer else { continue };
                if shared.entries.load(Ordering::Relaxed) != seen {
                    // The application was in kumi meanwhile and progressed
                    // itself: back to the bell, or with network peers look
                    // less often, up to ACTIVE_BACKOFF intervals
                    // (docs/BENCHMARKS.md, sessions 36 and 61).
                    timer = net.then(|| (wait * 2).clamp(interval, interval * ACTIVE_BACKOFF));
                    continue;
                }
            }
            let Some(mut e) = shared.engine.try_visit() else {
                // The application waits inside kumi and progresses itself.
                bell.unring();
                timer = timer.filter(|_| net).map(|w| (w * 2).min(MAX_BACKOFF));
                continue;
            };
            // Traffic tends to come in streams (a client's next request right
            // after its reply): after a pass that moved something, look again
            // soon.
            let moved = e.async_pass();
            let needs = e.needs_async();
            bell.set(if needs { ARMED } else { IDLE });
            timer = if moved {
                Some(QUICK_LOOK.min(interval))
            } else if needs && net {
                // The application computes: every interval (after quick
                // looks, back up to it).
                Some(timer.map_or(interval, |w| (w * 2).min(interval)))
            } else {
                None
            };
        }
    });
    if std::panic::catch_unwind(body).is_err() {
        // The engine may be half-updated; nothing sound can continue.
        eprintln!("kumi: the progress thread panicked; aborting this rank");
        std::process::abort();
    }
}

/// Empty passes between looks at the clock in [`Demand::after_pass`]: a pass
/// is ~50 ns, so the clock is read every few microseconds of a test loop.
const LOOK_EVERY: u32 = 64;

/// The waiting side of demand-driven progress: a rank stuck for an interval
/// (`KUMI_PROGRESS_US`) rings the progress bells of its host's ranks
/// (`Capabilities::ring_progress`), then again every interval while it stays
/// stuck. Stuck: in a blocking wait, since the wait began
/// ([`Demand::waiting`]); otherwise (test and probe loops, with or without
/// computation between the calls), since the first look at the clock in a
/// run of passes that moved nothing, counted without reading the clock on
/// each ([`Demand::after_pass`]). Rings are at least an interval apart
/// whatever the count says, so a rank that probes now and then between long
/// computations rings now and then too, which costs an armed peer a pass.
pub(crate) struct Demand {
    after: Duration,
    /// Empty passes since the last that moved something.
    empty: u32,
    /// The first look at the clock in the current run of empty passes.
    first: Option<Instant>,
    /// When this rank last rang.
    rung: Option<Instant>,
}

impl Demand {
    pub(crate) fn new(after: Duration) -> Demand {
        Demand {
            after,
            empty: 0,
            first: None,
            rung: None,
        }
    }

    /// After a pass that moved `moved` events: whether to ring now.
    #[inline]
    pub(crate) fn after_pass(&mut self, moved: usize) -> bool {
        if moved > 0 {
            if self.empty != 0 {
                self.empty = 0;
                self.first = None;
            }
            return false;
        }
        self.empty = self.empty.wrapping_add(1);
        self.empty.is_multiple_of(LOOK_EVERY) && self.looked(Instant::now())
    }

    #[cold]
    fn looked(&mut self, now: Instant) -> bool {
        let first = *self.first.get_or_insert(now);
        self.waiting(now, first)
    }

    /// Stuck since `since` (in a blocking wait, its start): whether to ring
    /// now, having been stuck for an interval and not rung for one.
    pub(crate) fn waiting(&mut self, now: Instant, since: Instant) -> bool {
        if now - since < self.after || self.rung.is_some_and(|r| now - r < self.after) {
            return false;
        }
        self.rung = Some(now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AFTER: Duration = Duration::from_micros(500);

    /// Feeds `d` empty passes until one asks to ring, at most `limit`.
    fn passes_until_ring(d: &mut Demand, limit: u32) -> Option<u32> {
        (1..=limit).find(|_| d.after_pass(0))
    }

    #[test]
    fn a_test_loop_stuck_for_an_interval_rings_then_once_per_interval() {
        let mut d = Demand::new(AFTER);
        let t = Instant::now();
        assert!(passes_until_ring(&mut d, 1 << 30).is_some());
        assert!(t.elapsed() >= AFTER, "rang before an interval");
        let t = Instant::now();
        assert!(passes_until_ring(&mut d, 1 << 30).is_some());
        assert!(t.elapsed() >= AFTER / 2, "rang twice within an interval");
    }

    #[test]
    fn a_pass_that_moves_starts_the_count_again() {
        let mut d = Demand::new(AFTER);
        for _ in 0..LOOK_EVERY * 4 {
            assert!(!d.after_pass(0));
        }
        std::thread::sleep(AFTER * 2);
        assert!(!d.after_pass(1));
        // The next look is the first of a new run: no ring yet.
        assert_eq!(passes_until_ring(&mut d, LOOK_EVERY), None);
    }

    #[test]
    fn a_blocking_wait_rings_an_interval_after_it_began() {
        let mut d = Demand::new(AFTER);
        let start = Instant::now();
        assert!(!d.waiting(start + AFTER / 2, start));
        assert!(d.waiting(start + AFTER, start));
        assert!(!d.waiting(start + AFTER + AFTER / 2, start));
        assert!(d.waiting(start + AFTER * 2, start));
    }
}
