//! Locks that are single words of shared memory, for one-sided windows (see
//! `kumi::win`): a reader-writer lock (MPI's passive-target epochs:
//! `MPI_LOCK_SHARED` / `MPI_LOCK_EXCLUSIVE`) and a mutex (every accumulate to
//! a rank holds that rank's, which makes accumulates atomic per element).
//! Ranks of a host take them in a mapping they all share; the word is all the
//! state, so a lock survives nothing but the mapping (which goes with the
//! job).
//!
//! Waiting spins with a yield in each pass (ranks may share a core).
//! Model-checked with loom (`loom_tests`, the protected data in loom cells,
//! so an access outside the lock would be reported as a race).

use crate::sync::{AtomicU64, Ordering};

/// The writer bit of a reader-writer word; the readers are counted below it.
const WRITER: u64 = 1 << 63;

#[cfg(not(loom))]
fn pause() {
    std::hint::spin_loop();
    std::thread::yield_now();
}

#[cfg(loom)]
fn pause() {
    loom::thread::yield_now();
}

/// A reader-writer lock in one word: 0 free, `WRITER` held exclusively, `n`
/// held by `n` readers.
pub struct RwWord<'a>(pub &'a AtomicU64);

impl RwWord<'_> {
    /// Takes the lock shared with other readers, or exclusively.
    pub fn lock(&self, exclusive: bool) {
        while !self.try_lock(exclusive) {
            pause();
        }
    }

    /// Takes the lock if it is free for this kind of holder now (for a
    /// server that must not wait: a progress engine granting a lock to
    /// another host). A spurious failure is possible; the caller retries.
    pub fn try_lock(&self, exclusive: bool) -> bool {
        let cur = self.0.load(Ordering::Relaxed);
        let next = if exclusive {
            (cur == 0).then_some(WRITER)
        } else {
            (cur & WRITER == 0).then_some(cur + 1)
        };
        // Acquire on success: see what the previous holders wrote (their
        // Release in `unlock`). Relaxed on failure: we only retry.
        next.is_some_and(|n| {
            self.0
                .compare_exchange_weak(cur, n, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        })
    }

    /// Gives back a lock taken with the same `exclusive`.
    pub fn unlock(&self, exclusive: bool) {
        // Release: our accesses happen before the next holder's.
        if exclusive {
            self.0.store(0, Ordering::Release);
        } else {
            self.0.fetch_sub(1, Ordering::Release);
        }
    }
}

/// A mutex in one word: 0 free, 1 held.
pub struct MutexWord<'a>(pub &'a AtomicU64);

impl MutexWord<'_> {
    /// Takes the mutex.
    pub fn lock(&self) {
        // Acquire: see the bytes the previous holder wrote (its Release).
        while self
            .0
            .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            pause();
        }
    }

    /// Gives the mutex back.
    pub fn unlock(&self) {
        // Release: our writes happen before the next holder's reads.
        self.0.store(0, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn readers_share_writers_exclude() {
        let w = AtomicU64::new(0);
        let l = RwWord(&w);
        l.lock(false);
        l.lock(false);
        assert_eq!(w.load(Ordering::Relaxed), 2);
        l.unlock(false);
        l.unlock(false);
        l.lock(true);
        assert_eq!(w.load(Ordering::Relaxed), WRITER);
        l.unlock(true);
        assert_eq!(w.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn mutex_under_contention_loses_no_update() {
        let word = Arc::new(AtomicU64::new(0));
        let count = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (w, c) = (word.clone(), count.clone());
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        MutexWord(&w).lock();
                        // A non-atomic read-modify-write, made safe by the mutex.
                        let v = c.load(Ordering::Relaxed);
                        c.store(v + 1, Ordering::Relaxed);
                        MutexWord(&w).unlock();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(count.load(Ordering::Relaxed), 40_000);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;

    /// Two threads each add under the mutex: no race (loom checks the cell)
    /// and no lost update.
    #[test]
    fn loom_mutex_word_excludes() {
        loom::model(|| {
            let s = Arc::new((AtomicU64::new(0), UnsafeCell::new(0u32)));
            let t = s.clone();
            let h = loom::thread::spawn(move || {
                MutexWord(&t.0).lock();
                // SAFETY: the mutex is held (loom checks it).
                t.1.with_mut(|p| unsafe { *p += 1 });
                MutexWord(&t.0).unlock();
            });
            MutexWord(&s.0).lock();
            // SAFETY: the mutex is held.
            s.1.with_mut(|p| unsafe { *p += 1 });
            MutexWord(&s.0).unlock();
            h.join().unwrap();
            // SAFETY: every other thread has finished.
            assert_eq!(s.1.with(|p| unsafe { *p }), 2);
        });
    }

    /// A writer updates two cells under the exclusive lock while a reader
    /// reads them under a shared one: the reader sees both old or both new,
    /// never a race.
    #[test]
    fn loom_rw_word_readers_see_whole_writes() {
        loom::model(|| {
            let s = Arc::new((
                AtomicU64::new(0),
                UnsafeCell::new(0u32),
                UnsafeCell::new(0u32),
            ));
            let t = s.clone();
            let h = loom::thread::spawn(move || {
                RwWord(&t.0).lock(true);
                // SAFETY: held exclusively (loom checks it).
                t.1.with_mut(|p| unsafe { *p = 1 });
                // SAFETY: as above.
                t.2.with_mut(|p| unsafe { *p = 1 });
                RwWord(&t.0).unlock(true);
            });
            RwWord(&s.0).lock(false);
            // SAFETY: held shared; the writer is excluded.
            let (a, b) = (s.1.with(|p| unsafe { *p }), s.2.with(|p| unsafe { *p }));
            RwWord(&s.0).unlock(false);
            assert_eq!(a, b, "a reader saw half a write");
            h.join().unwrap();
        });
    }
}
