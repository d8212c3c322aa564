//! A lock for one owner thread and one occasional visitor: the runtime's
//! engine is used by the application thread on every kumi call and, now and
//! then, by the rank's progress thread (see `kumi/src/progress.rs`).
//!
//! Why not `std::sync::Mutex`: its unlock is an atomic swap (it must learn
//! whether someone sleeps on the lock), so every kumi call would pay two
//! read-modify-writes. Here nobody ever sleeps on the lock: the visitor only
//! *tries* it and goes away if it is taken, and the owner, in the rare case it
//! finds the visitor inside (a bounded pass of a few microseconds), spins and
//! yields until it leaves. So unlock is a plain Release store, and a call
//! costs one compare-exchange.
//!
//! The protocol is the textbook test-and-set lock: acquire is a
//! compare-exchange from `false` to `true` with Acquire, release a store of
//! `false` with Release, so everything one holder did happens before the next
//! holder's acquire. It is model-checked with loom (`loom_tests`, data in a
//! loom cell so that an unsynchronized access would be reported).

use crate::sync::{AtomicBool, Ordering};
#[cfg(not(loom))]
use std::cell::UnsafeCell;
#[cfg(not(loom))]
use std::ops::{Deref, DerefMut};

/// The lock word alone (the protocol, model-checked).
pub struct RawLock {
    locked: AtomicBool,
}

impl RawLock {
    /// An unlocked lock.
    pub fn new() -> RawLock {
        RawLock {
            locked: AtomicBool::new(false),
        }
    }

    /// Takes the lock if it is free.
    #[inline]
    pub fn try_acquire(&self) -> bool {
        // Acquire on success: the previous holder's writes (before its Release
        // store in `release`) are visible to us. Relaxed on failure: we touch
        // nothing then.
        self.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Takes the lock, spinning (and yielding the core now and then) while
    /// another thread holds it.
    #[inline]
    pub fn acquire(&self) {
        if self.try_acquire() {
            return;
        }
        self.acquire_slow();
    }

    #[cold]
    fn acquire_slow(&self) {
        let mut spins = 0u32;
        loop {
            // Relaxed read while waiting (no cache-line ping-pong of failed
            // compare-exchanges); the compare-exchange orders.
            while self.locked.load(Ordering::Relaxed) {
                spins += 1;
                if spins.is_multiple_of(64) {
                    yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
            if self.try_acquire() {
                return;
            }
        }
    }

    /// Releases the lock. Only the holder calls this.
    #[inline]
    pub fn release(&self) {
        // Release: our writes under the lock happen before the next holder's
        // Acquire compare-exchange that sees `false`.
        self.locked.store(false, Ordering::Release);
    }
}

impl Default for RawLock {
    fn default() -> Self {
        RawLock::new()
    }
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
    /// The value, unlocked.
    pub fn new(value: T) -> VisitLock<T> {
        VisitLock {
            raw: RawLock::new(),
            value: UnsafeCell::new(value),
        }
    }

    /// The value, waiting for another holder to leave.
    #[inline]
    pub fn lock(&self) -> VisitGuard<'_, T> {
        self.raw.acquire();
        VisitGuard { lock: self }
    }

    /// The value if nobody holds it.
    #[inline]
    pub fn try_lock(&self) -> Option<VisitGuard<'_, T>> {
        // Build the guard only on success: a guard built for a failed attempt
        // (as `bool::then_some` would) releases the holder's lock when dropped.
        if self.raw.try_acquire() {
            Some(VisitGuard { lock: self })
        } else {
            None
        }
    }
}

/// Exclusive access to a [`VisitLock`]'s value; releases the lock when dropped
/// (also during unwinding, so a panic does not leave it held).
#[cfg(not(loom))]
pub struct VisitGuard<'a, T> {
    lock: &'a VisitLock<T>,
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
impl<T> Drop for VisitGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.raw.release();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn owner_and_visitor_never_overlap() {
        // Both increment one counter, the owner under `lock`, the visitor under
        // `try_lock` (failing often: it must then leave the owner's lock
        // alone); a non-atomic read-modify-write would lose updates if they
        // ever overlapped. A yield inside widens the window.
        let l = Arc::new(VisitLock::new(0u64));
        let v = l.clone();
        let visitor = std::thread::spawn(move || {
            let (mut got, mut failed) = (0u64, 0u64);
            while got < 100_000 {
                match v.try_lock() {
                    Some(mut g) => {
                        let x = std::hint::black_box(*g);
                        *g = x + 1;
                        got += 1;
                    }
                    None => failed += 1,
                }
            }
            failed
        });
        for i in 0..100_000u64 {
            let mut g = l.lock();
            let x = std::hint::black_box(*g);
            if i % 64 == 0 {
                std::thread::yield_now();
            }
            *g = x + 1;
        }
        let failed = visitor.join().unwrap();
        assert_eq!(*l.lock(), 200_000, "updates lost ({failed} failed tries)");
    }

    #[test]
    fn try_lock_fails_while_held_and_succeeds_after() {
        let l = VisitLock::new(5);
        let g = l.lock();
        assert!(l.try_lock().is_none());
        drop(g);
        assert_eq!(*l.try_lock().expect("free"), 5);
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
            let lock = Arc::new((RawLock::new(), UnsafeCell::new(0u32)));
            let v = lock.clone();
            let visitor = loom::thread::spawn(move || {
                if v.0.try_acquire() {
                    v.1.with_mut(|p| {
                        // SAFETY: the lock is held (loom checks it).
                        unsafe { *p += 10 }
                    });
                    v.0.release();
                }
            });
            for _ in 0..2 {
                lock.0.acquire();
                lock.1.with_mut(|p| {
                    // SAFETY: the lock is held (loom checks it).
                    unsafe { *p += 1 }
                });
                lock.0.release();
            }
            visitor.join().unwrap();
            lock.0.acquire();
            let total = lock.1.with(|p| {
                // SAFETY: the lock is held.
                unsafe { *p }
            });
            lock.0.release();
            assert!(total == 2 || total == 12, "lost an update: {total}");
        });
    }
}
