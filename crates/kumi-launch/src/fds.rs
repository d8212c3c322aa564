//! Room for a job's file descriptors: the launcher holds a control
//! connection per rank of the job and two output pipes per rank of its host
//! (an agent: the pipes), more than the soft limit of 1024 open files many
//! systems start a shell with once a host runs a few hundred ranks.

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
use std::sync::atomic::{AtomicU64, Ordering};

/// Descriptors a process needs besides those it holds per rank (its own
/// standard streams, sockets, the segment, the signal pipes).
const BASE: u64 = 64;

/// This process's control connections (the launcher: one per rank of the
/// job) and rank pipes (stdin, stdout, stderr per rank spawned here). Set,
/// not added: a job that restarts asks again for the same.
static CONTROL: AtomicU64 = AtomicU64::new(0);
static PIPES: AtomicU64 = AtomicU64::new(0);

/// Makes room for the control connections of a job of `ranks`.
pub(crate) fn for_control(ranks: usize) -> Result<(), String> {
    // Relaxed: the launching thread's own tally.
    CONTROL.store(ranks as u64, Ordering::Relaxed);
    ensure(&format!("the control connections of {ranks} ranks"))
}

/// Makes room for the pipes of `local` ranks spawned here.
pub(crate) fn for_ranks(local: usize) -> Result<(), String> {
    // Relaxed: as above.
    PIPES.store(3 * local as u64, Ordering::Relaxed);
    ensure(&format!("{local} ranks on this host"))
}

/// The soft limit to set for `need` descriptors under limits `(soft, hard)`
/// (`None`: unlimited): unchanged when it suffices, else raised to `need`;
/// an error when the hard limit is below `need`.
fn plan(soft: Option<u64>, hard: Option<u64>, need: u64) -> Result<Option<u64>, u64> {
    if soft.is_none_or(|s| s >= need) {
        return Ok(None);
    }
    match hard {
        Some(h) if h < need => Err(h),
        _ => Ok(Some(need)),
    }
}

/// Raises this process's soft limit of open files (which the ranks
/// inherit) as far as what it holds needs, never beyond the hard limit;
/// `what` names what asked, for the error.
fn ensure(what: &str) -> Result<(), String> {
    // Relaxed: as above.
    let need = BASE + CONTROL.load(Ordering::Relaxed) + PIPES.load(Ordering::Relaxed);
    let l = getrlimit(Resource::Nofile);
    match plan(l.current, l.maximum, need) {
        Ok(None) => Ok(()),
        Ok(Some(soft)) => setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(soft),
                maximum: l.maximum,
            },
        )
        .map_err(|e| format!("{what} need {need} open files; raising the limit failed: {e}")),
        Err(hard) => Err(format!(
            "{what} need about {need} open files here, above the hard limit of {hard} \
             (`ulimit -Hn`); raise it (limits.conf, or `ulimit -n {need}` as root) or spread the \
             ranks over more hosts"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raises_only_as_far_as_needed_and_names_a_low_hard_limit() {
        assert_eq!(plan(Some(1024), Some(4096), 900), Ok(None));
        assert_eq!(plan(None, None, 1 << 20), Ok(None));
        assert_eq!(plan(Some(1024), Some(524288), 3200), Ok(Some(3200)));
        assert_eq!(plan(Some(1024), None, 3200), Ok(Some(3200)));
        assert_eq!(plan(Some(1024), Some(2048), 3200), Err(2048));
    }
}
