//! The supervisor of a job that a process manager started (`srun
//! --mpi=pmi2|pmix`), where no `kumi run` sits beside the ranks.
//!
//! Rank 0 starts it (`kumi supervise`, one process for the whole job, on
//! rank 0's host) and tells the other ranks its TCP address through the
//! process manager's key-value store; every rank then opens the same control
//! channel to it as to `kumi run` (the job secret's proof first) and sends
//! what it sends `kumi run`: its long waits, its counters, `Finalize`. The
//! supervisor runs the same deadlock rule and statistics as `kumi run`
//! ([`Supervision`]). It cannot signal ranks on other hosts, so it ends the
//! job by telling every rank [`ToRank::End`]; a rank's listener thread
//! exits with the code. A rank whose channel closes before it finalized
//! (killed with SIGKILL: no handler of the rank could say so) ends the job
//! the same way, where the process manager alone would let the others wait.
//!
//! It ends when every rank that connected has closed its channel, or when
//! no rank connected at all within [`FIRST_CONTACT`].

use crate::server::{ControlEvent, ControlServer};
use crate::supervise::{Supervision, SupervisionConfig, DEADLOCK_EXIT};
use kumi_core::control::ToRank;
use rustix::event::{PollFd, PollFlags, Timespec};
use std::time::{Duration, Instant};

/// How long the supervisor waits for the first rank to connect.
pub const FIRST_CONTACT: Duration = Duration::from_secs(120);
/// After it told the ranks to end, how long it waits for their channels to
/// close before it exits anyway.
pub const END_GRACE: Duration = Duration::from_secs(5);
/// How long after a rank's channel closed without `Finalize` the supervisor
/// ends the job itself: a rank that dies of a signal it catches, exits
/// without finalizing or aborts has the process manager end the job first
/// (and say why), which ends the supervisor too; a rank killed outright does
/// not.
pub const LOST_GRACE: Duration = Duration::from_secs(1);
/// Longest poll: the deadlock rule's turn (see [`crate::supervise::CHECK_EVERY`]).
const TURN: Duration = Duration::from_millis(50);

/// What the supervisor of one job is told.
pub struct StepSupervisor {
    /// The job id the ranks prove (the process manager's).
    pub job: String,
    /// The job secret (rank 0's, which every rank learned from the exchange).
    pub secret: Vec<u8>,
    /// Ranks in the job.
    pub size: u32,
    /// The program's name, for reports.
    pub program: String,
    /// Deadlock detection and statistics.
    pub supervision: SupervisionConfig,
}

impl StepSupervisor {
    /// Listens on TCP at `ip`; `listening` is called once with the address
    /// for the ranks. Runs until the job ends; returns the exit code the
    /// supervisor asked the ranks to end with (0 if it asked nothing).
    pub fn run(
        self,
        ip: std::net::IpAddr,
        listening: impl FnOnce(&str),
        notices: &mut dyn FnMut(&str),
    ) -> std::io::Result<i32> {
        crate::fds::for_control(self.size as usize).map_err(std::io::Error::other)?;
        let mut server = ControlServer::bind(&self.job, &self.secret, self.size)?;
        let addr = server.listen_tcp(ip)?;
        listening(&addr.to_string());
        let start = Instant::now();
        let mut watch =
            Supervision::new(self.supervision, &self.job, &self.program, self.size, start);
        let mut events = Vec::new();
        let mut gone = vec![false; self.size as usize];
        let mut aborted = vec![false; self.size as usize];
        let mut lost: Option<(u32, Instant)> = None;
        let mut ending: Option<(i32, Instant)> = None;
        loop {
            poll_once(&server)?;
            let now = Instant::now();
            server.accept(now, &mut events);
            server.accept_tcp(now, &mut events);
            let ids: Vec<_> = server.conn_fds().map(|(id, _, _)| id).collect();
            for id in ids {
                server.ready(id, true, true, &mut events);
            }
            server.expire(now, &mut events);
            for ev in events.drain(..) {
                match ev {
                    ControlEvent::Connected { rank, pid } => watch.connected(rank, pid),
                    ControlEvent::Report { rank, report } => watch.report(rank, report, now),
                    ControlEvent::SnapshotWanted(id) => {
                        server.reply(id, &ToRank::Snapshot(watch.snapshot(now)))
                    }
                    ControlEvent::Refused(why) => {
                        notices(&format!("refused a control connection: {why}"))
                    }
                    ControlEvent::Dropped { rank, reason } => notices(&format!(
                        "dropped the control connection of rank {rank}: {reason}"
                    )),
                    // Ranks under a process manager abort through it, which
                    // ends the job; the rank's channel then closes unfinalized.
                    ControlEvent::Abort { rank, .. } => {
                        if let Some(a) = aborted.get_mut(rank as usize) {
                            *a = true;
                        }
                    }
                }
            }
            for r in 0..self.size {
                if server.connected(r) && !server.open(r) && !gone[r as usize] {
                    gone[r as usize] = true;
                    watch.rank_ended(r);
                    if !server.finalized(r) && !aborted[r as usize] && lost.is_none() {
                        lost = Some((r, now));
                    }
                }
            }
            if ending.is_none() {
                if let Some((r, _)) = lost.filter(|&(_, at)| now >= at + LOST_GRACE) {
                    notices(&format!(
                        "rank {r} ended without finalizing kumi (its channel to the supervisor closed: killed?); ending the job"
                    ));
                    ending = Some((1, now));
                } else if let Some(found) = watch.check(now) {
                    notices(&found.text);
                    if found.abort {
                        notices(&format!(
                            "the job deadlocked (see above); ending every rank (exit code {DEADLOCK_EXIT})"
                        ));
                        ending = Some((DEADLOCK_EXIT, now));
                    }
                }
                if let Some((code, _)) = ending {
                    for r in 0..self.size {
                        server.tell(r, &ToRank::End { code });
                    }
                }
            }
            let connected = (0..self.size).filter(|&r| server.connected(r)).count();
            let open = (0..self.size).filter(|&r| server.open(r)).count();
            let done = (connected > 0 && open == 0)
                || (connected == 0 && now >= start + FIRST_CONTACT)
                || ending.is_some_and(|(_, at)| now >= at + END_GRACE);
            if done {
                watch.finish(notices);
                return Ok(ending.map_or(0, |(code, _)| code));
            }
        }
    }
}

/// Waits up to [`TURN`] for the listeners or any channel.
fn poll_once(server: &ControlServer) -> std::io::Result<()> {
    let conns: Vec<_> = server.conn_fds().collect();
    let listener = server.listener_fd();
    let tcp = server.tcp_listener_fd();
    let mut fds = vec![PollFd::new(&listener, PollFlags::IN)];
    if let Some(t) = &tcp {
        fds.push(PollFd::new(t, PollFlags::IN));
    }
    for (_, fd, want_write) in &conns {
        let flags = if *want_write {
            PollFlags::IN | PollFlags::OUT
        } else {
            PollFlags::IN
        };
        fds.push(PollFd::new(fd, flags));
    }
    let ts = Timespec {
        tv_sec: 0,
        tv_nsec: TURN.as_nanos() as _,
    };
    match rustix::event::poll(&mut fds, Some(&ts)) {
        Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
