//! Binding ranks to cores when a host runs more ranks than it has cores.
//!
//! With one rank per core the scheduler places ranks well enough and binding
//! would only keep a rank on a core that some other program wants, so ranks
//! stay free. Oversubscribed, the waiting ranks yield (see the engine's wait
//! policy), and what a collective costs is how fast the cores go round their
//! ranks. Free ranks migrate between the cores at every turn, which makes
//! each turn several times dearer (docs/BENCHMARKS.md, "Figures moved out of
//! the code"). So, oversubscribed,
//! local rank i is bound to the i-th allowed core modulo their number, which
//! spreads the ranks evenly and keeps each where its caches are.
//!
//! `KUMI_BIND`: `auto` (the default: bind only when oversubscribed), `core`
//! (always bind), `none` (never).

use crate::error::Result;
use kumi_core::config::Bind;
use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};

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
