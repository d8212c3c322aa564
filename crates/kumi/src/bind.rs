//! Binding ranks to cores when a host runs more ranks than it has cores.
//!
//! With one rank per core the scheduler places ranks well enough and binding
//! would only keep a rank on a core that some other program wants, so ranks
//! stay free; but ranks the scheduler put on one core move apart
//! ([`Spread`]), since it is slow to part them itself. Oversubscribed, the waiting ranks yield (see the engine's wait
//! policy), and what a collective costs is how fast the cores go round their
//! ranks. Free ranks migrate between the cores at every turn, which makes
//! each turn several times dearer (docs/BENCHMARKS.md, "Figures moved out of
//! the code"). So, oversubscribed,
//! local rank i is bound to the i-th allowed core modulo their number, which
//! spreads the ranks evenly and keeps each where its caches are.
//!
//! `KUMI_BIND`: `auto` (the default: bind only when oversubscribed, move
//! apart otherwise), `core` (always bind), `none` (never bind nor move).

use crate::error::Result;
use kumi_core::config::Bind;
use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};
use std::time::{Duration, Instant};

/// The cores this process may run on, in order.
fn allowed() -> Vec<usize> {
    match sched_getaffinity(None) {
        Ok(set) => (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect(),
        Err(_) => Vec::new(),
    }
}

/// Binds the calling thread (and so every thread it starts afterwards) as
/// the mode says, for local rank `local_rank` on a host that is
/// `oversubscribed` or not (as the whole host sees it: `KUMI_LOCAL_CORES`).
/// Returns, if it bound, the number of cores the local ranks are spread
/// over: local ranks `a` and `b` then share a core exactly when `a % n ==
/// b % n` (every rank of the host binds by the same rule, from the same
/// allowed set, which the launcher's affinity gives them all). Call it before
/// the progress thread starts.
pub(crate) fn apply(mode: Bind, local_rank: usize, oversubscribed: bool) -> Result<Option<usize>> {
    let cores = allowed();
    let bind = match mode {
        Bind::None => false,
        Bind::Core => true,
        Bind::Auto => oversubscribed,
    };
    if !bind || cores.is_empty() {
        return Ok(None);
    }
    let core = cores[local_rank % cores.len()];
    let mut set = CpuSet::new();
    set.set(core);
    match sched_setaffinity(None, &set) {
        Ok(()) => Ok(Some(cores.len())),
        // A cpuset that changed under us, or a kernel that refuses: running
        // unbound is slower, not wrong, so say so and go on.
        Err(e) => {
            eprintln!("kumi: could not bind local rank {local_rank} to core {core}: {e}");
            Ok(None)
        }
    }
}

/// Unbound ranks of a host with a core each that find themselves sharing
/// one move apart (`Capabilities::roomier_cpu`). The scheduler wakes a
/// task on its waker's core, so ranks woken by one socket or doorbell (the
/// launcher's last fence as a job starts) land on one core; polling there,
/// each yielding to the other, they stay until the load balancer parts
/// them, which is slow (measured: docs/BENCHMARKS.md, session 49). A move is a pin to the
/// chosen core and at once the thread's allowed set again, as it is at that
/// moment (a program that binds its threads itself, as OpenMP runtimes do,
/// keeps its binding; a thread bound to one core never moves).
pub(crate) struct Spread {
    /// The cores the rank could run on at start, to choose among.
    allowed: Vec<usize>,
    /// No move before this: a rank the scheduler keeps putting back is not
    /// moved more than once per `SPREAD_EVERY`.
    next: Instant,
}

/// The least time between two moves of one rank.
const SPREAD_EVERY: Duration = Duration::from_millis(10);

impl Spread {
    /// For a rank that kumi did not bind (`bound` false) under `KUMI_BIND`
    /// `mode`, on a host with `local_size` ranks that is not
    /// `oversubscribed`: `None` where moving does not apply (bound, told
    /// not to, alone, or a single allowed core).
    pub(crate) fn new(
        mode: Bind,
        bound: bool,
        oversubscribed: bool,
        local_size: usize,
    ) -> Option<Spread> {
        if mode != Bind::Auto || bound || oversubscribed || local_size < 2 {
            return None;
        }
        let allowed = allowed();
        (allowed.len() >= 2).then(|| Spread {
            allowed,
            next: Instant::now(),
        })
    }

    /// Moves the calling thread to the core `pick` chooses among the
    /// allowed ones, if it may still run there and on another (a thread
    /// bound since is left alone), and leaves it free on its set of the
    /// moment again. Best effort: a refused pin leaves the rank where it
    /// is.
    pub(crate) fn try_move(&mut self, pick: impl FnOnce(&[usize]) -> Option<usize>) {
        let now = Instant::now();
        if now < self.next {
            return;
        }
        let Some(cpu) = pick(&self.allowed) else {
            return;
        };
        let Ok(set) = sched_getaffinity(None) else {
            return;
        };
        if !set.is_set(cpu) || set.count() < 2 {
            return;
        }
        self.next = now + SPREAD_EVERY;
        let mut one = CpuSet::new();
        one.set(cpu);
        // The pin migrates the running thread before it returns; widening
        // the set again does not move it back.
        if sched_setaffinity(None, &one).is_ok() {
            let _ = sched_setaffinity(None, &set);
        }
    }
}
