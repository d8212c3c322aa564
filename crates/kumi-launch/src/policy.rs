//! The failure policy: how a job ends, decided from events alone.
//!
//! The rule is "the first failure is the cause". A rank that exits non-zero, dies
//! of a signal, calls abort, or exits 0 after opening the control channel without
//! finalizing (its peers may wait for it forever) fails the job; the launcher then
//! stops every other rank, and whatever happens to those ranks afterwards is a
//! consequence, never reported as a cause. A signal to the launcher is a cause of
//! its own. [`Supervisor`] holds this rule and nothing else: no processes, no
//! clocks, no printing, so every case is a unit test.

use kumi_core::call::Call;

/// How a job ended: the launcher's exit code and, when it failed, one line saying
/// why (without the `kumi run: ` prefix).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Exit code for the launcher.
    pub exit_code: i32,
    /// Why the job failed; `None` for success.
    pub cause: Option<String>,
    /// What the job lost, which says whether running it again from a
    /// checkpoint could succeed (`kumi run --max-restarts`).
    pub loss: Loss,
}

/// What a failed job lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Loss {
    /// Nothing a restart would bring back: success, or an ending that would
    /// come again (a deadlock, the time limit, an interruption of kumi, a
    /// program that cannot be started).
    None,
    /// A rank died, failed or aborted.
    Rank,
    /// A whole host (its agent and its ranks), by name.
    Host(String),
}

impl Outcome {
    /// A failure with a cause, which a restart would not cure.
    pub fn failed(exit_code: i32, cause: impl Into<String>) -> Outcome {
        Outcome {
            exit_code,
            cause: Some(cause.into()),
            loss: Loss::None,
        }
    }
}

/// `kumi run`'s exit code when the job ran out of time (`--timeout`): GNU
/// `timeout`'s.
pub const TIMEOUT_EXIT: i32 = 124;

/// How a rank process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Termination {
    /// It exited with this code.
    Exited(i32),
    /// A signal killed it.
    Signaled(i32),
}

/// Everything the policy needs to know about an ended rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankEnd {
    /// Global rank.
    pub rank: u32,
    /// Its process id.
    pub pid: u32,
    /// How it ended.
    pub how: Termination,
    /// The kumi call it was in, as its segment block said.
    pub call: Call,
    /// It had authenticated on the control channel.
    pub connected: bool,
    /// It had sent `Finalize`.
    pub finalized: bool,
}

/// Decides the outcome of a job from its events.
#[derive(Debug)]
pub struct Supervisor {
    running: u32,
    verdict: Option<Outcome>,
}

impl Supervisor {
    /// A job of `size` running ranks.
    pub fn new(size: u32) -> Supervisor {
        Supervisor {
            running: size,
            verdict: None,
        }
    }

    /// True once a cause has been decided: the caller must stop every rank.
    pub fn stopping(&self) -> bool {
        self.verdict.is_some()
    }

    /// Ranks not yet ended.
    pub fn running(&self) -> u32 {
        self.running
    }

    fn decide(&mut self, exit_code: i32, cause: String, loss: Loss) -> bool {
        if self.verdict.is_some() {
            return false;
        }
        self.verdict = Some(Outcome {
            loss,
            ..Outcome::failed(exit_code, cause)
        });
        true
    }

    /// A rank ended. Returns true if this is the job's first failure (the caller
    /// must now stop the other ranks).
    pub fn rank_ended(&mut self, end: &RankEnd) -> bool {
        self.running = self.running.saturating_sub(1);
        let call = match end.call {
            Call::None => String::new(),
            c => format!(" in {}", c.name()),
        };
        let (code, what) = match end.how {
            Termination::Exited(0) if end.connected && !end.finalized => {
                (1, "exited without finalizing kumi".to_string())
            }
            Termination::Exited(0) => return false,
            Termination::Exited(c) => (c, format!("exited with code {c}")),
            Termination::Signaled(s) => (
                128 + s,
                format!("was killed by signal {}", crate::signals::describe(s)),
            ),
        };
        let cause = format!(
            "rank {} (pid {}) {what}{call}{}",
            end.rank,
            end.pid,
            stopping_others(self.running)
        );
        // A program that cannot be executed (126) or found (127) would fail
        // again.
        let loss = match end.how {
            Termination::Exited(126 | 127) => Loss::None,
            _ => Loss::Rank,
        };
        self.decide(code, cause, loss)
    }

    /// A rank called abort. Returns true if this is the first failure.
    pub fn aborted(&mut self, rank: u32, code: i32, message: &str) -> bool {
        let exit_code = code.clamp(1, 255);
        let others = stopping_others(self.running.saturating_sub(1));
        self.decide(
            exit_code,
            format!(
                "rank {rank} called abort with code {code}: {}{others}",
                one_line(message)
            ),
            Loss::Rank,
        )
    }

    /// The launcher received `sig`. Returns true if this is the first cause.
    pub fn interrupted(&mut self, sig: i32) -> bool {
        let n = self.running;
        let s = if n == 1 { "" } else { "s" };
        self.decide(
            128 + sig,
            format!(
                "interrupted by {}; stopped {n} rank{s}",
                crate::signals::name(sig)
            ),
            Loss::None,
        )
    }

    /// The job ran for its whole time limit (`--timeout`). Returns true if
    /// this is the first cause.
    pub fn timed_out(&mut self, limit: std::time::Duration) -> bool {
        let n = self.running;
        let s = if n == 1 { "" } else { "s" };
        self.decide(
            TIMEOUT_EXIT,
            format!(
                "the job ran longer than its time limit of {} s (--timeout); stopped {n} rank{s}",
                limit.as_secs_f64()
            ),
            Loss::None,
        )
    }

    /// The outcome, once every rank has ended.
    pub fn outcome(&self) -> Outcome {
        self.verdict.clone().unwrap_or(Outcome {
            exit_code: 0,
            cause: None,
            loss: Loss::None,
        })
    }
}

fn stopping_others(n: u32) -> String {
    match n {
        0 => String::new(),
        1 => "; stopping 1 other rank".to_string(),
        n => format!("; stopping {n} other ranks"),
    }
}

/// A rank's text made safe for one line of a report: control characters escaped,
/// length bounded.
pub fn one_line(text: &str) -> String {
    const MAX: usize = 500;
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == MAX {
            out.push_str("...");
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(rank: u32, how: Termination) -> RankEnd {
        RankEnd {
            rank,
            pid: 4700 + rank,
            how,
            call: Call::None,
            connected: false,
            finalized: false,
        }
    }

    #[test]
    fn all_zero_is_success() {
        let mut s = Supervisor::new(2);
        assert!(!s.rank_ended(&end(0, Termination::Exited(0))));
        assert!(!s.rank_ended(&end(1, Termination::Exited(0))));
        assert_eq!(
            s.outcome(),
            Outcome {
                exit_code: 0,
                cause: None,
                loss: Loss::None
            }
        );
    }

    fn rank_failed(code: i32, cause: &str) -> Outcome {
        Outcome {
            loss: Loss::Rank,
            ..Outcome::failed(code, cause)
        }
    }

    #[test]
    fn only_what_a_restart_could_cure_counts_as_a_loss() {
        let mut s = Supervisor::new(2);
        s.rank_ended(&end(0, Termination::Exited(127)));
        assert_eq!(s.outcome().loss, Loss::None, "a program that is not there");
        let mut s = Supervisor::new(2);
        s.interrupted(libc::SIGINT);
        assert_eq!(s.outcome().loss, Loss::None, "the user stopped kumi");
        let mut s = Supervisor::new(2);
        s.timed_out(std::time::Duration::from_secs(1));
        assert_eq!(s.outcome().loss, Loss::None, "the time limit");
        let mut s = Supervisor::new(2);
        s.rank_ended(&end(1, Termination::Signaled(libc::SIGKILL)));
        assert_eq!(s.outcome().loss, Loss::Rank);
    }

    #[test]
    fn first_failure_is_the_cause() {
        let mut s = Supervisor::new(4);
        assert!(s.rank_ended(&end(1, Termination::Exited(3))));
        assert!(!s.rank_ended(&end(2, Termination::Signaled(libc::SIGTERM))));
        assert_eq!(
            s.outcome(),
            rank_failed(
                3,
                "rank 1 (pid 4701) exited with code 3; stopping 3 other ranks"
            )
        );
    }

    #[test]
    fn signal_names_the_call() {
        let mut s = Supervisor::new(4);
        let e = RankEnd {
            call: Call::Recv,
            ..end(2, Termination::Signaled(libc::SIGSEGV))
        };
        assert!(s.rank_ended(&e));
        assert_eq!(
            s.outcome(),
            rank_failed(139, "rank 2 (pid 4702) was killed by signal SIGSEGV (segmentation fault) in kumi::recv; stopping 3 other ranks")
        );
    }

    #[test]
    fn connected_rank_must_finalize() {
        let mut s = Supervisor::new(1);
        assert!(s.rank_ended(&RankEnd {
            connected: true,
            ..end(0, Termination::Exited(0))
        }));
        assert_eq!(
            s.outcome(),
            rank_failed(1, "rank 0 (pid 4700) exited without finalizing kumi")
        );
        let mut s = Supervisor::new(1);
        assert!(!s.rank_ended(&RankEnd {
            connected: true,
            finalized: true,
            ..end(0, Termination::Exited(0))
        }));
    }

    #[test]
    fn abort_code_is_clamped() {
        let mut s = Supervisor::new(3);
        assert!(s.aborted(1, 0, "bad\ninput"));
        assert_eq!(
            s.outcome(),
            rank_failed(
                1,
                "rank 1 called abort with code 0: bad\\ninput; stopping 2 other ranks"
            )
        );
        let mut s = Supervisor::new(1);
        s.aborted(0, 300, "x");
        assert_eq!(s.outcome().exit_code, 255);
    }

    #[test]
    fn a_timeout_is_a_cause_unless_the_job_already_failed() {
        let mut s = Supervisor::new(2);
        assert!(s.timed_out(std::time::Duration::from_millis(2500)));
        assert!(!s.rank_ended(&end(0, Termination::Signaled(libc::SIGTERM))));
        assert_eq!(
            s.outcome(),
            Outcome::failed(
                TIMEOUT_EXIT,
                "the job ran longer than its time limit of 2.5 s (--timeout); stopped 2 ranks"
            )
        );
        let mut s = Supervisor::new(2);
        s.rank_ended(&end(1, Termination::Exited(3)));
        assert!(!s.timed_out(std::time::Duration::from_secs(1)));
        assert_eq!(s.outcome().exit_code, 3);
    }

    #[test]
    fn interrupt_counts_running_ranks() {
        let mut s = Supervisor::new(3);
        s.rank_ended(&end(0, Termination::Exited(0)));
        assert!(s.interrupted(libc::SIGINT));
        assert!(!s.rank_ended(&end(1, Termination::Signaled(libc::SIGTERM))));
        assert_eq!(
            s.outcome(),
            Outcome::failed(130, "interrupted by SIGINT; stopped 2 ranks")
        );
    }
}
