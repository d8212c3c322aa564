//! The hardware's own limits, measured in the same run as everything else, so a
//! figure can be read as a fraction of what the machine allows:
//! - the cache-line floor: two threads on two cores hand a flag back and forth
//!   through one cache line; half of one round trip is the least any
//!   shared-memory message can cost between those cores;
//! - single-thread `memcpy` bandwidth in cache (1 MiB) and from memory (64 MiB),
//!   the ceiling of any copy-based transfer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

#[repr(align(128))]
struct Line(AtomicU64);

fn pin(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    // Best effort: an unpinned measurement is still a measurement.
    let _ = rustix::thread::sched_setaffinity(None, &set);
}

/// Half round-trip time, in microseconds, of a flag bounced `iters` times
/// between threads pinned to CPUs 0 and 1.
pub fn cacheline_half_rtt_us(iters: u64) -> f64 {
    let line = Arc::new(Line(AtomicU64::new(0)));
    let other = line.clone();
    let t = std::thread::spawn(move || {
        pin(1);
        for i in 0..iters {
            // Acquire/Release pair: each side publishes its turn to the other;
            // nothing else is shared, so no stronger ordering is needed.
            while other.0.load(Ordering::Acquire) != 2 * i + 1 {
                std::hint::spin_loop();
            }
            other.0.store(2 * i + 2, Ordering::Release);
        }
    });
    pin(0);
    let start = Instant::now();
    for i in 0..iters {
        line.0.store(2 * i + 1, Ordering::Release);
        while line.0.load(Ordering::Acquire) != 2 * i + 2 {
            std::hint::spin_loop();
        }
    }
    let el = start.elapsed();
    t.join().expect("floor thread");
    el.as_secs_f64() * 1e6 / (2.0 * iters as f64)
}

/// Single-thread copy bandwidth in MB/s for buffers of `bytes`, copied `reps`
/// times.
pub fn memcpy_mbps(bytes: usize, reps: usize) -> f64 {
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    dst.copy_from_slice(&src); // fault the pages in before timing
    let start = Instant::now();
    for _ in 0..reps {
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
    }
    (bytes * reps) as f64 / start.elapsed().as_secs_f64() / 1e6
}

#[cfg(test)]
mod tests {
    #[test]
    fn floor_figures_are_positive_and_finite() {
        let l = super::cacheline_half_rtt_us(2000);
        assert!(l.is_finite() && l > 0.0);
        let b = super::memcpy_mbps(1 << 16, 10);
        assert!(b.is_finite() && b > 0.0);
    }
}
