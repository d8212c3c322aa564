//! The progress bell: how a rank asks another rank's progress thread for a
//! pass.
//!
//! A progress thread that looked at its engine on a timer woke its rank's
//! core every few hundred microseconds whenever work was outstanding, though
//! almost always nobody needed it (docs/BENCHMARKS.md, session 62). So the
//! thread sleeps on a bell, one futex word per rank, and looks when asked:
//!
//! - [`IDLE`]: the rank left kumi with nothing outstanding that others may
//!   wait on. Nobody rings.
//! - [`ARMED`]: it left kumi with such work. A rank of the same host that has
//!   waited on something for a while rings it
//!   ([`Capabilities::ring_progress`](crate::Capabilities::ring_progress)).
//! - [`RUNG`]: someone asked for a pass (a peer, the rank's own application,
//!   or finalize, which stops the thread). The thread never sleeps on this
//!   value; it takes the engine if it is free, runs a pass and sets the word
//!   back to what the engine needs.
//!
//! The owner writes [`ARMED`] (its application, leaving kumi) and [`IDLE`]
//! (its thread, after a pass that left nothing outstanding) under the
//! engine's lock, so their view is the engine's; others only move [`ARMED`]
//! to [`RUNG`], with a compare-and-swap, which also makes several rings of
//! one pass one wake-up. Every access is Relaxed: the word publishes no data
//! (the engine's lock and the transports order that), and a ring is never
//! lost, because `FUTEX_WAIT` compares the word with the value the thread
//! last read and returns at once if it changed. A stale read costs one
//! ring more or one ring less, and a waiter that is not served rings again.
//!
//! The word lives in the rank's block of the host's segment, so ranks of
//! other processes can ring it (a shared futex); a rank without a segment
//! gets a word of its own, which only its application rings.

use rustix::thread::futex;
use std::any::Any;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// [`Bell`]: nothing outstanding; nobody rings.
pub const IDLE: u32 = 0;
/// [`Bell`]: work outstanding that others may wait on; a waiting peer rings.
pub const ARMED: u32 = 1;
/// [`Bell`]: a pass is asked for.
pub const RUNG: u32 = 2;

/// One rank's progress bell (see the module doc). Cloning shares the word.
#[derive(Clone)]
pub struct Bell {
    word: NonNull<AtomicU32>,
    /// Keeps the memory of `word` alive: the mapping of a segment, or the
    /// word itself.
    _keep: Arc<dyn Any + Send + Sync>,
}

// SAFETY: `word` points into memory that `_keep` owns and keeps alive for as
// long as any clone exists, and is only ever accessed as an atomic.
unsafe impl Send for Bell {}
// SAFETY: as above; `&Bell` offers atomic operations and futex calls only.
unsafe impl Sync for Bell {}

impl Bell {
    /// A bell of this process alone (a rank without a segment).
    pub fn private() -> Bell {
        let word = Arc::new(AtomicU32::new(IDLE));
        Bell {
            word: NonNull::from(&*word),
            _keep: word,
        }
    }

    /// The bell at `word`, which lives as long as `keep` does.
    ///
    /// # Safety
    /// `word` must point to an `AtomicU32` inside memory that `keep` owns and
    /// does not free or move while it exists.
    pub(crate) unsafe fn within(word: &AtomicU32, keep: Arc<dyn Any + Send + Sync>) -> Bell {
        Bell {
            word: NonNull::from(word),
            _keep: keep,
        }
    }

    fn word(&self) -> &AtomicU32 {
        // SAFETY: see the `Send` impl: `_keep` keeps the word alive.
        unsafe { self.word.as_ref() }
    }

    /// The word now ([`IDLE`], [`ARMED`] or [`RUNG`]).
    #[inline]
    pub fn get(&self) -> u32 {
        self.word().load(Ordering::Relaxed)
    }

    /// Sets the word to [`IDLE`] or [`ARMED`]: the owner, under its engine's
    /// lock (see the module doc for why Relaxed suffices).
    #[inline]
    pub fn set(&self, v: u32) {
        debug_assert!(v == IDLE || v == ARMED);
        self.word().store(v, Ordering::Relaxed);
    }

    /// Asks the owner's thread for a pass whatever the word says (its own
    /// application, or finalize).
    pub fn ring(&self) {
        self.word().store(RUNG, Ordering::Relaxed);
        wake(self.word());
    }

    /// A ring the thread could not serve (the application held the engine,
    /// and progresses itself): back to [`ARMED`] unless someone changed the
    /// word meanwhile, so that the next ring wakes the thread again.
    pub fn unring(&self) {
        let _ = self
            .word()
            .compare_exchange(RUNG, ARMED, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// Sleeps while the word is `seen` (never [`RUNG`]), for at most
    /// `timeout` (`None`: until rung). Returns early on a ring, a change of
    /// the word, a signal, or spuriously.
    pub fn wait(&self, seen: u32, timeout: Option<Duration>) {
        let ts = timeout.map(|t| futex::Timespec {
            tv_sec: t.as_secs().min(i64::MAX as u64) as i64,
            tv_nsec: i64::from(t.subsec_nanos()),
        });
        // Shared futex: the word may be in a mapping of several processes.
        // EAGAIN (the word moved), EINTR and ETIMEDOUT all mean "look again".
        let _ = futex::wait(self.word(), futex::Flags::empty(), seen, ts.as_ref());
    }

    /// Rings the bell `word` of another rank if it is [`ARMED`]; returns
    /// whether it did.
    pub(crate) fn ring_if_armed(word: &AtomicU32) -> bool {
        let rung = word
            .compare_exchange(ARMED, RUNG, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok();
        if rung {
            wake(word);
        }
        rung
    }
}

fn wake(word: &AtomicU32) {
    // An error cannot happen for a valid word; if it did, the thread would
    // look at its next ring or timeout.
    let _ = futex::wake(word, futex::Flags::empty(), 1);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_ring_wakes_a_sleeping_thread_and_an_idle_bell_is_not_rung() {
        let bell = Bell::private();
        assert!(!Bell::ring_if_armed(bell.word()), "an idle bell was rung");
        bell.set(ARMED);
        let b = bell.clone();
        let t = Instant::now();
        let sleeper = std::thread::spawn(move || {
            while b.get() != RUNG {
                b.wait(ARMED, Some(Duration::from_secs(10)));
            }
        });
        std::thread::sleep(Duration::from_millis(20));
        assert!(Bell::ring_if_armed(bell.word()));
        assert!(!Bell::ring_if_armed(bell.word()), "rung twice for one pass");
        sleeper.join().unwrap();
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the ring did not wake"
        );
        bell.unring();
        assert_eq!(bell.get(), ARMED);
    }

    #[test]
    fn a_ring_before_the_wait_is_not_lost() {
        let bell = Bell::private();
        bell.set(ARMED);
        let seen = bell.get();
        assert!(Bell::ring_if_armed(bell.word()));
        let t = Instant::now();
        bell.wait(seen, Some(Duration::from_secs(10)));
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}
