//! A lock for one owner thread and one occasional visitor: the runtime's
//! engine is used by the application thread on every kumi call and, now and
//! then, by the rank's progress thread (see `kumi/src/progress.rs`).
//!
//! Why not `std::sync::Mutex`: its unlock is an atomic swap and its lock a
//! compare-exchange, and a read-modify-write waits until every store before
//! it has left the core. Right after a send those stores include the ring
//! line the receiver is polling, so each kumi call would wait for a
//! cache-line transfer: measured, taking the engine cost 9 % of the 8-byte
//! message rate and 3.5 % of the latency (docs/BENCHMARKS.md).
//!
//! Here the two sides are not symmetric, and neither is the protocol. Each
//! side has a flag it alone writes. To enter, a side raises its flag, fences,
//! and looks at the other's (Dekker): at least one of two sides entering at
//! once sees the other. The owner, if it sees the visitor, keeps its flag up
//! and waits for the visitor to leave (a bounded pass of a few
//! microseconds); the visitor, if it sees the owner, lowers its flag and
//! goes away (it only ever *tries*). Leaving is a Release store of the flag.
//!
//! The fences: the owner enters on every call, the visitor at most once per
//! progress interval (500 us by default). With asymmetric fences the owner's
//! is only a compiler fence and the visitor's a `membarrier` (private
//! expedited), which makes every running thread of the process execute a
//! full barrier, so it does the work of both (as in `shm/transport.rs`, and
//! as folly's asymmetric thread fence does). It costs the visitor a system
//! call and the owner, if it is running, an interrupt: at most once per
//! interval, and only while the application computes with work outstanding.
//! Without `membarrier` (or with `KUMI_SHM_MEMBARRIER=off`) both sides use a
//! SeqCst fence; that protocol is the one model-checked with loom
//! (`loom_tests`, data in a loom cell so that an unsynchronized access would
//! be reported).

use crate::sync::{fence, AtomicBool, Ordering};
#[cfg(not(loom))]
use std::cell::UnsafeCell;
#[cfg(not(loom))]
use std::ops::{Deref, DerefMut};
use std::sync::atomic::compiler_fence;

/// The two flags alone (the protocol, model-checked).
pub struct RawLock {
    /// The owner is inside, or entering. Written by the owner thread only.
    owner: AtomicBool,
    /// The visitor is inside, or trying to enter. Written by the visitor only.
    visitor: AtomicBool,
    /// The visitor's fence is a `membarrier`, the owner's a compiler fence.
    asym: bool,
}

impl RawLock {
    /// A free lock. `asym`: use asymmetric fences; the caller has registered
    /// the process for private expedited membarriers
    /// ([`register_membarrier`] returned `true`).
    pub fn new(asym: bool) -> RawLock {
        RawLock {
            owner: AtomicBool::new(false),
            visitor: AtomicBool::new(false),
            asym,
        }
    }

    /// The owner enters, waiting (spinning, yielding now and then) while the
    /// visitor is inside. Only the owner thread calls this, and not while it
    /// is inside already.
    #[inline]
    pub fn acquire(&self) {
        // A nested entry would hand out a second `&mut` to the value; the old
        // compare-exchange lock deadlocked there, this one refuses loudly.
        // (A load of our own flag: a cycle.)
        assert!(
            !self.owner_inside(),
            "kumi bug: the engine was entered twice"
        );
        // Relaxed store: the fence orders it before the load below.
        self.owner.store(true, Ordering::Relaxed);
        if self.asym {
            // The visitor's membarrier is the full barrier between our store
            // and our load, whenever it matters (module doc).
            compiler_fence(Ordering::SeqCst);
        } else {
            fence(Ordering::SeqCst);
        }
        // Acquire: pairs with the visitor's Release in `leave`, so what it did
        // inside happens before what we do now.
        if self.visitor.load(Ordering::Acquire) {
            self.wait_for_visitor();
        }
    }

    #[cold]
    fn wait_for_visitor(&self) {
        // Our flag stays up: a visitor that tries now sees it and goes away,
        // so the one inside (or withdrawing) is the last we wait for.
        let mut spins = 0u32;
        // Acquire: as in `acquire`.
        while self.visitor.load(Ordering::Acquire) {
            spins += 1;
            if spins.is_multiple_of(64) {
                yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// The owner leaves.
    #[inline]
    pub fn release(&self) {
        // Release: our writes inside happen before those of a visitor whose
        // Acquire load sees the flag down.
        self.owner.store(false, Ordering::Release);
    }

    /// Whether the owner is inside. Exact only on the owner's thread (the one
    /// that writes the flag); used there to detect a nested attempt.
    #[inline]
    pub fn owner_inside(&self) -> bool {
        self.owner.load(Ordering::Relaxed)
    }

    /// The visitor enters if the owner is not inside (never waits).
    pub fn try_visit(&self) -> bool {
        // The owner visibly inside (it waits in kumi, often for long): go
        // away without the membarrier, which would interrupt its core for
        // nothing. Relaxed: a stale `false` only means trying for real.
        if self.owner.load(Ordering::Relaxed) {
            return false;
        }
        // Relaxed store: the fence orders it before the load below.
        self.visitor.store(true, Ordering::Relaxed);
        if self.asym {
            // Registered by the caller of `new`, so it cannot fail on this
            // kernel; were it to, the SeqCst fence alone would be unsound,
            // hence the abort rather than a guess.
            if rustix_membarrier_private().is_err() {
                eprintln!("kumi: membarrier failed after registration; aborting");
                std::process::abort();
            }
        }
        fence(Ordering::SeqCst);
        // Acquire: pairs with the owner's Release in `release`, so what it did
        // inside happens before what we do now.
        if self.owner.load(Ordering::Acquire) {
            // Relaxed: we did nothing inside.
            self.visitor.store(false, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// The visitor leaves.
    #[inline]
    pub fn leave(&self) {
        // Release: our writes inside happen before the owner's Acquire load
        // that sees the flag down.
        self.visitor.store(false, Ordering::Release);
    }
}

#[cfg(not(loom))]
fn rustix_membarrier_private() -> rustix::io::Result<()> {
    rustix::thread::membarrier(rustix::thread::MembarrierCommand::PrivateExpedited)
}

#[cfg(loom)]
fn rustix_membarrier_private() -> Result<(), ()> {
    unreachable!("loom models the symmetric protocol only")
}

/// Registers this process for private expedited membarriers (once per
/// process; later calls are cheap) and checks that one works: `true` if the
/// asymmetric protocol may be used.
#[cfg(not(loom))]
pub fn register_membarrier() -> bool {
    use rustix::thread::{membarrier, MembarrierCommand};
    membarrier(MembarrierCommand::RegisterPrivateExpedited).is_ok()
        && membarrier(MembarrierCommand::PrivateExpedited).is_ok()
}

#[cfg(not(loom))]
fn yield_now() {
    std::thread::yield_now();
}

#[cfg(loom)]
fn yield_now() {
    loom::thread::yield_now();
}

/// A value behind a [`RawLock`].
#[cfg(not(loom))]
pub struct VisitLock<T> {
    raw: RawLock,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached through a guard, which exists only while
// the lock is held, so one thread at a time uses it; moving it between threads
// therefore needs `T: Send` and nothing more (as for `std::sync::Mutex`).
#[cfg(not(loom))]
unsafe impl<T: Send> Sync for VisitLock<T> {}
// SAFETY: as above; owning the lock owns the value.
#[cfg(not(loom))]
unsafe impl<T: Send> Send for VisitLock<T> {}

#[cfg(not(loom))]
impl<T> VisitLock<T> {
    /// The value, free. `asym` as for [`RawLock::new`].
    pub fn new(value: T, asym: bool) -> VisitLock<T> {
        VisitLock {
            raw: RawLock::new(asym),
            value: UnsafeCell::new(value),
        }
    }

    /// The value, for the owner thread (waiting for a visitor to leave).
    /// Only ever called from one thread, and not while its guard lives
    /// (see [`Self::owner_inside`]).
    #[inline]
    pub fn lock(&self) -> VisitGuard<'_, T> {
        self.raw.acquire();
        VisitGuard {
            lock: self,
            visitor: false,
        }
    }

    /// Whether the owner holds the lock (exact on the owner's thread).
    #[inline]
    pub fn owner_inside(&self) -> bool {
        self.raw.owner_inside()
    }

    /// The value for the visitor thread, if the owner is not inside.
    pub fn try_visit(&self) -> Option<VisitGuard<'_, T>> {
        // Build the guard only on success: a guard built for a failed attempt
        // (as `bool::then_some` would) would lower the flag when dropped.
        if self.raw.try_visit() {
            Some(VisitGuard {
                lock: self,
                visitor: true,
            })
        } else {
            None
        }
    }
}

/// Exclusive access to a [`VisitLock`]'s value; leaves the lock when dropped
/// (also during unwinding, so a panic does not leave it held).
#[cfg(not(loom))]
pub struct VisitGuard<'a, T> {
    lock: &'a VisitLock<T>,
    visitor: bool,
}

#[cfg(not(loom))]
impl<T> Deref for VisitGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while this thread holds the lock.
        unsafe { &*self.lock.value.get() }
    }
}

#[cfg(not(loom))]
impl<T> DerefMut for VisitGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard exists only while this thread holds the lock, and
        // `&mut self` makes this the only reference through the guard.
        unsafe { &mut *self.lock.value.get() }
    }
}

#[cfg(not(loom))]
impl<T> VisitGuard<'_, T> {
    /// Leaves the lock for the length of `f`, then enters it again, for an
    /// owner that waits with nothing of the value borrowed (`&mut self`
    /// proves it): under `MPI_THREAD_MULTIPLE` another application thread
    /// takes the owner's side meanwhile (the caller serializes the threads
    /// that may, so one at a time is the owner), or the visitor does.
    /// Re-entered also if `f` unwinds, so the guard's drop always leaves a
    /// lock this thread holds.
    pub fn unlocked<R>(&mut self, f: impl FnOnce() -> R) -> R {
        assert!(!self.visitor, "kumi bug: the visitor never waits inside");
        struct Reenter<'b>(&'b RawLock);
        impl Drop for Reenter<'_> {
            fn drop(&mut self) {
                self.0.acquire();
            }
        }
        self.lock.raw.release();
        let _back = Reenter(&self.lock.raw);
        f()
    }
}

#[cfg(not(loom))]
impl<T> Drop for VisitGuard<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.visitor {
            self.lock.raw.leave();
        } else {
            self.lock.raw.release();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Both increment one counter, the owner under `lock`, the visitor under
    /// `try_visit` (failing often: it must then leave the owner alone); a
    /// non-atomic read-modify-write would lose updates if they ever
    /// overlapped. A yield inside widens the window; the owner computes a
    /// little between entries, as an application does, so the visitor gets
    /// in too (which is checked: a visitor that never enters tests nothing).
    fn never_overlap(asym: bool, n: u64) {
        use std::sync::atomic::AtomicBool;
        let l = Arc::new(VisitLock::new(0u64, asym));
        let stop = Arc::new(AtomicBool::new(false));
        let (v, vstop) = (l.clone(), stop.clone());
        let visitor = std::thread::spawn(move || {
            let (mut got, mut failed) = (0u64, 0u64);
            while !vstop.load(std::sync::atomic::Ordering::Relaxed) {
                match v.try_visit() {
                    Some(mut g) => {
                        let x = std::hint::black_box(*g);
                        *g = x + 1;
                        got += 1;
                    }
                    None => failed += 1,
                }
                // The progress thread tries once per interval; one that
                // tried back to back would keep the owner waiting on a flag
                // that is only ever up for a failed try.
                for _ in 0..500 {
                    std::hint::spin_loop();
                }
            }
            (got, failed)
        });
        for i in 0..n {
            let mut g = l.lock();
            let x = std::hint::black_box(*g);
            if i % 64 == 0 {
                std::thread::yield_now();
            }
            *g = x + 1;
            drop(g);
            // Outside for a few microseconds, as an application between
            // calls; every 64th time long enough for a descheduled visitor
            // to come back (the tests run in parallel on few cores).
            for _ in 0..(300 + i % 300) {
                std::hint::spin_loop();
            }
            if i % 64 == 32 {
                std::thread::yield_now();
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let (got, failed) = visitor.join().unwrap();
        assert!(got > 0, "the visitor never got in ({failed} tries)");
        assert_eq!(*l.lock(), n + got, "updates lost ({failed} failed tries)");
    }

    #[test]
    fn owner_and_visitor_never_overlap_with_fences() {
        never_overlap(false, 50_000);
    }

    #[test]
    fn owner_and_visitor_never_overlap_with_membarrier() {
        // The protocol loom cannot model (the visitor's fence is a system
        // call), stressed instead.
        assert!(register_membarrier(), "this kernel has no membarrier");
        never_overlap(true, 50_000);
    }

    #[test]
    fn visitor_fails_while_the_owner_is_inside_and_succeeds_after() {
        for asym in [false, register_membarrier()] {
            let l = VisitLock::new(5, asym);
            let g = l.lock();
            assert!(l.owner_inside());
            assert!(l.try_visit().is_none());
            drop(g);
            assert!(!l.owner_inside());
            assert_eq!(*l.try_visit().expect("free"), 5);
            // The visitor's guard left: the owner enters without waiting.
            assert_eq!(*l.lock(), 5);
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;

    /// An owner that always takes the lock and a visitor that only tries:
    /// their accesses to the data never overlap (loom reports a data race on
    /// the cell otherwise) and the owner's writes are seen by the visitor.
    #[test]
    fn loom_owner_and_visitor_exclude_each_other() {
        loom::model(|| {
            let lock = Arc::new((RawLock::new(false), UnsafeCell::new(0u32)));
            let v = lock.clone();
            let visitor = loom::thread::spawn(move || {
                if v.0.try_visit() {
                    v.1.with_mut(|p| {
                        // SAFETY: the lock is held (loom checks it).
                        unsafe { *p += 10 }
                    });
                    v.0.leave();
                }
            });
            lock.0.acquire();
            lock.1.with_mut(|p| {
                // SAFETY: the lock is held (loom checks it).
                unsafe { *p += 1 }
            });
            lock.0.release();
            visitor.join().unwrap();
            lock.0.acquire();
            let total = lock.1.with(|p| {
                // SAFETY: the lock is held.
                unsafe { *p }
            });
            lock.0.release();
            assert!(total == 1 || total == 11, "lost an update: {total}");
        });
    }
}
