//! Which local ranks have ever sent to a rank: one bit per sender in words
//! of the receiver's, set by each sender before its first record and never
//! cleared, so that a receiver polls only the rings that were ever used.
//!
//! Why: a rank has one incoming ring per local rank, and a poll that visits
//! them all reads a cache line per ring on every pass of a waiting rank (and
//! makes the kernel allocate every ring's first page): the cost grows with
//! the host's ranks, not with the peers a rank talks to (docs/BENCHMARKS.md,
//! session 32). Most programs talk to a few peers each; their polls now
//! visit those. The receiver's words are read on every poll but written once
//! per sender, so they stay in the receiver's cache.
//!
//! Orderings. The bit says only where to look: the record itself is
//! published by its ring's stamp (Release/Acquire in `ring`), so a receiver
//! that sees the bit before the record finds the ring empty and looks again
//! on its next pass. What the bit must not do is let a receiver go to sleep
//! without ever looking at a ring whose record is there. The sender sets
//! the bit before pushing its first record, and both come before the fence
//! of the sleep protocol (`transport`'s module doc) that precedes its load
//! of the receiver's `sleeping` flag; the sleeper reads the words after its
//! own fence. Of the two fences one comes first in the single SeqCst order:
//! either the sleeper reads the bit and the stamp (and stays up), or the
//! sender reads `sleeping` and rings. So the bit can be Relaxed on both
//! sides; `loom_senders_no_lost_wakeup` checks exactly this.

use crate::sync::{AtomicU64, Ordering};

/// Words of one rank's sender set for `n` local ranks.
pub(crate) const fn words(n: usize) -> usize {
    n.div_ceil(64)
}

/// Marks `sender` in a receiver's `set`: before its first record to it.
#[inline]
pub(crate) fn announce(set: &[AtomicU64], sender: usize) {
    // Relaxed: see the module doc (the record is published by its stamp,
    // and the sleep protocol's fences order this store like the stamp).
    set[sender / 64].fetch_or(1 << (sender % 64), Ordering::Relaxed);
}

/// The receiver's view of its sender set: what it has read so far, and the
/// senders in the order it learnt them.
pub(crate) struct Senders {
    known: Box<[u64]>,
    list: Vec<usize>,
}

impl Senders {
    /// Nobody known yet, for a set of `words` words.
    pub(crate) fn new(words: usize) -> Senders {
        Senders {
            known: vec![0; words].into_boxed_slice(),
            list: Vec::new(),
        }
    }

    /// The senders learnt so far (each once).
    #[inline]
    pub(crate) fn list(&self) -> &[usize] {
        &self.list
    }

    /// Whether `set` holds a sender not learnt yet. No side effects.
    #[inline]
    pub(crate) fn behind(&self, set: &[AtomicU64]) -> bool {
        // Relaxed: see the module doc.
        set.iter()
            .zip(self.known.iter())
            .any(|(w, &k)| w.load(Ordering::Relaxed) != k)
    }

    /// Learns the senders `set` holds that are new; returns whether there
    /// were any.
    #[inline]
    pub(crate) fn refresh(&mut self, set: &[AtomicU64]) -> bool {
        let mut grew = false;
        for (i, (w, k)) in set.iter().zip(self.known.iter_mut()).enumerate() {
            // Relaxed: see the module doc.
            let now = w.load(Ordering::Relaxed);
            let mut new = now & !*k;
            if new == 0 {
                continue;
            }
            *k = now;
            grew = true;
            while new != 0 {
                self.list.push(i * 64 + new.trailing_zeros() as usize);
                new &= new - 1;
            }
        }
        grew
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(not(loom))]
    #[test]
    fn learns_each_sender_once_in_the_order_seen() {
        let set: Vec<AtomicU64> = (0..words(130)).map(|_| AtomicU64::new(0)).collect();
        let mut s = Senders::new(set.len());
        assert!(!s.behind(&set) && !s.refresh(&set));
        announce(&set, 129);
        announce(&set, 3);
        assert!(s.behind(&set));
        assert!(s.refresh(&set));
        assert!(!s.behind(&set));
        announce(&set, 64);
        announce(&set, 3);
        assert!(s.refresh(&set));
        assert!(!s.refresh(&set));
        assert_eq!(s.list(), &[3, 129, 64]);
    }

    /// Two senders, each announcing itself, publishing a record (a stamp)
    /// and ringing the receiver if it sleeps, as `ShmTransport::try_send`
    /// does; the receiver polls the rings it knows, and sleeps as
    /// `prepare_sleep` does. Whatever the interleaving, it receives both
    /// records: a sleep that no ring would end is a lost wake-up, which loom
    /// reports as a deadlock.
    #[cfg(loom)]
    #[test]
    fn loom_senders_no_lost_wakeup() {
        use crate::sync::{fence, AtomicU32};
        use loom::sync::Arc;
        struct Shared {
            set: [AtomicU64; 1],
            stamps: [AtomicU64; 2],
            sleeping: AtomicU32,
            doorbell: AtomicU32,
        }
        let mut b = loom::model::Builder::new();
        if std::env::var("LOOM_MAX_PREEMPTIONS").is_err() {
            b.preemption_bound = Some(3);
        }
        b.check(|| {
            let sh = Arc::new(Shared {
                set: [AtomicU64::new(0)],
                stamps: [AtomicU64::new(0), AtomicU64::new(0)],
                sleeping: AtomicU32::new(0),
                doorbell: AtomicU32::new(0),
            });
            let senders: Vec<_> = (0..2)
                .map(|j| {
                    let sh = sh.clone();
                    loom::thread::spawn(move || {
                        announce(&sh.set, j);
                        sh.stamps[j].store(1, Ordering::Release);
                        fence(Ordering::SeqCst);
                        if sh.sleeping.load(Ordering::Relaxed) == 1 {
                            sh.doorbell.fetch_add(1, Ordering::Release);
                        }
                    })
                })
                .collect();
            let mut s = Senders::new(1);
            let mut got = [false; 2];
            let poll = |s: &mut Senders, got: &mut [bool; 2]| {
                s.refresh(&sh.set);
                for &j in s.list() {
                    got[j] |= sh.stamps[j].load(Ordering::Acquire) == 1;
                }
            };
            while got != [true, true] {
                poll(&mut s, &mut got);
                if got == [true, true] {
                    break;
                }
                let seen = sh.doorbell.load(Ordering::Acquire);
                sh.sleeping.store(1, Ordering::Relaxed);
                fence(Ordering::SeqCst);
                let before = got;
                poll(&mut s, &mut got);
                if got == before {
                    // "FUTEX_WAIT": blocks until the doorbell moves.
                    while sh.doorbell.load(Ordering::Acquire) == seen {
                        loom::thread::yield_now();
                    }
                }
                sh.sleeping.store(0, Ordering::Relaxed);
            }
            for t in senders {
                t.join().unwrap();
            }
        });
    }
}
