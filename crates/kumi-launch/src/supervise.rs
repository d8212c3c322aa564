//! Job supervision in the launcher: the latest state of every rank, the
//! deadlock check with its grace period, the monitor's snapshot and the
//! end-of-job statistics.
//!
//! Ranks report long waits and counters on the control channel
//! (`kumi_core::deadlock::Report`); this module keeps the latest report of each
//! rank and, on every turn of the event loop, runs the pure detector
//! ([`kumi_core::deadlock::detect`]) over them. Reports arrive at different times,
//! so one snapshot can mix an old report with a new one; a deadlock is declared
//! only when the *same* set of ranks has been found stuck for the whole grace
//! period (`--deadlock-timeout`, default 1 s). A rank that computes is never
//! blocked, so it is never part of a deadlock, however long it computes.
//!
//! Statistics: `--stats` prints per rank wall time, time blocked and traffic per
//! peer, and a summary; `--stats-json FILE` writes the same as JSON. The figures
//! are the ones each rank sent at finalize, before its final barrier, so the
//! message and byte counts are exactly what the program sent and received.

use kumi_core::deadlock::{self, RankCounters, RankStatus, RankView, Report, Snapshot, Wait};
use kumi_core::debug::Reach;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Exit code of `kumi run` when it ends a job because of a deadlock.
pub const DEADLOCK_EXIT: i32 = 86;

/// What to do when a deadlock is found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnDeadlock {
    /// Print the report and end the job with [`DEADLOCK_EXIT`].
    Abort,
    /// Print the report and let the job go on.
    Report,
}

/// How a job is supervised.
#[derive(Clone, Debug)]
pub struct SupervisionConfig {
    /// A deadlock must persist this long before it is reported; `None`: never.
    pub deadlock_timeout: Option<Duration>,
    /// What follows the report.
    pub on_deadlock: OnDeadlock,
    /// Print statistics at the end.
    pub stats: bool,
    /// Write statistics as JSON here at the end.
    pub stats_json: Option<PathBuf>,
}

impl Default for SupervisionConfig {
    fn default() -> Self {
        SupervisionConfig {
            deadlock_timeout: Some(Duration::from_secs(1)),
            on_deadlock: OnDeadlock::Abort,
            stats: false,
            stats_json: None,
        }
    }
}

#[derive(Default)]
struct RankInfo {
    pid: u32,
    /// Host the rank said it runs on.
    host: Option<String>,
    /// Its pid is a process of this host that belongs to this job and rank
    /// (checked once in its environment); `None`: not checked yet.
    local: Option<bool>,
    /// The reported wait and when it began (by the launcher's clock).
    blocked: Option<(Wait, Instant)>,
    counters: RankCounters,
    final_counters: Option<RankCounters>,
    ended: bool,
}

/// A deadlock the caller must act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The report, several lines, without a prefix.
    pub text: String,
    /// The ranks the deadlock holds.
    pub ranks: Vec<u32>,
    /// End the job (else only report).
    pub abort: bool,
}

/// The supervision state of one job.
pub struct Supervision {
    cfg: SupervisionConfig,
    job: String,
    program: String,
    host: String,
    started: Instant,
    ranks: Vec<RankInfo>,
    suspect: Option<(Vec<u32>, Instant)>,
    reported: Option<Vec<u32>>,
    /// When the deadlock rule last ran (see [`CHECK_EVERY`]).
    checked: Option<Instant>,
    /// How to reach the hosts that are not the launcher's.
    reach: Vec<(String, Reach)>,
}

/// How often the deadlock rule runs at most. It reads every rank's
/// counters for every peer (n^2 numbers), and the event loop turns once per
/// event: at a thousand ranks, running it every turn left the launcher too
/// busy to read the ranks' reports. A grace period is at least this coarse.
pub const CHECK_EVERY: Duration = Duration::from_millis(50);

impl Supervision {
    /// A job of `size` ranks running `program`.
    pub fn new(cfg: SupervisionConfig, job: &str, program: &str, size: u32, now: Instant) -> Self {
        Supervision {
            cfg,
            job: job.to_string(),
            program: program.to_string(),
            host: rustix::system::uname()
                .nodename()
                .to_string_lossy()
                .into_owned(),
            started: now,
            ranks: (0..size).map(|_| RankInfo::default()).collect(),
            suspect: None,
            reported: None,
            checked: None,
            reach: Vec::new(),
        }
    }

    /// How tools reach the job's other hosts (`kumi stacks`, `kumi attach`).
    pub fn set_reach(&mut self, reach: Vec<(String, Reach)>) {
        self.reach = reach;
    }

    /// A rank authenticated.
    pub fn connected(&mut self, rank: u32, pid: u32) {
        if let Some(r) = self.ranks.get_mut(rank as usize) {
            r.pid = pid;
        }
    }

    /// A rank's report arrived.
    pub fn report(&mut self, rank: u32, report: Report, now: Instant) {
        let Some(r) = self.ranks.get_mut(rank as usize) else {
            return;
        };
        match report {
            Report::Blocked { wait, counters } => {
                let since = now
                    .checked_sub(Duration::from_millis(wait.blocked_ms))
                    .unwrap_or(now);
                // A refresh of the same wait keeps its start.
                let since = match &r.blocked {
                    Some((w, s)) if same_wait(w, &wait) => *s,
                    _ => since,
                };
                r.blocked = Some((wait, since));
                r.counters = counters;
            }
            Report::Unblocked => r.blocked = None,
            Report::Counters(c) => r.counters = c,
            Report::Final(c) => {
                r.counters = c.clone();
                r.final_counters = Some(c);
            }
            Report::Started { host } => r.host = Some(host),
        }
    }

    /// A rank ended.
    pub fn rank_ended(&mut self, rank: u32) {
        if let Some(r) = self.ranks.get_mut(rank as usize) {
            r.ended = true;
            r.blocked = None;
        }
    }

    /// Runs the detector; returns a deadlock once it has lasted the grace period
    /// (once per deadlock).
    pub fn check(&mut self, now: Instant) -> Option<Found> {
        let grace = self.cfg.deadlock_timeout?;
        if self
            .checked
            .is_some_and(|t| now.saturating_duration_since(t) < CHECK_EVERY)
        {
            return None;
        }
        self.checked = Some(now);
        let (d, text) = {
            let view = self.view();
            match deadlock::detect(&view) {
                Some(d) => {
                    let text = deadlock::report(&d, &view);
                    (Some(d), text)
                }
                None => (None, String::new()),
            }
        };
        let Some(d) = d else {
            self.suspect = None;
            self.reported = None;
            return None;
        };
        let since = match &self.suspect {
            Some((ranks, since)) if *ranks == d.ranks => *since,
            _ => {
                self.suspect = Some((d.ranks.clone(), now));
                now
            }
        };
        if now.saturating_duration_since(since) < grace || self.reported.as_ref() == Some(&d.ranks)
        {
            return None;
        }
        self.reported = Some(d.ranks.clone());
        Some(Found {
            text,
            ranks: d.ranks,
            abort: self.cfg.on_deadlock == OnDeadlock::Abort,
        })
    }

    fn view(&self) -> Vec<RankView<'_>> {
        self.ranks
            .iter()
            .map(|r| match (&r.blocked, r.ended) {
                (_, true) => RankView::Ended(&r.counters),
                (Some((w, _)), false) => RankView::Blocked(w, &r.counters),
                (None, false) => RankView::Active(&r.counters),
            })
            .collect()
    }

    /// What a monitor sees now.
    pub fn snapshot(&mut self, now: Instant) -> Snapshot {
        for (i, r) in self.ranks.iter_mut().enumerate() {
            if r.local.is_none() && r.pid != 0 {
                r.local = Some(is_our_rank(r.pid, &self.job, i));
            }
        }
        Snapshot {
            job: self.job.clone(),
            program: self.program.clone(),
            size: self.ranks.len() as u32,
            elapsed_ms: now.saturating_duration_since(self.started).as_millis() as u64,
            ranks: self
                .ranks
                .iter()
                .enumerate()
                .map(|(i, r)| RankStatus {
                    rank: i as u32,
                    host: r.host.clone().unwrap_or_else(|| self.host.clone()),
                    pid: r.pid,
                    blocked: r.blocked.as_ref().map(|(w, _)| w.clone()),
                    blocked_for_ms: r.blocked.as_ref().map_or(0, |(_, s)| {
                        now.saturating_duration_since(*s).as_millis() as u64
                    }),
                    ended: r.ended,
                    cpu_ms: match (r.ended, r.local) {
                        (false, Some(true)) => cpu_ms(r.pid),
                        _ => None,
                    },
                    counters: r.counters.clone(),
                })
                .collect(),
            reach: self.reach.clone(),
        }
    }

    /// Prints and writes the statistics the configuration asks for.
    pub fn finish(&self, notices: &mut dyn FnMut(&str)) {
        if !self.cfg.stats && self.cfg.stats_json.is_none() {
            return;
        }
        let stats: Vec<&RankCounters> = self
            .ranks
            .iter()
            .map(|r| r.final_counters.as_ref().unwrap_or(&r.counters))
            .collect();
        let wall: f64 = stats.iter().map(|c| c.wall_us as f64).sum();
        let blocked: f64 = stats.iter().map(|c| c.blocked_us as f64).sum();
        let f = if wall > 0.0 {
            (blocked / wall).min(1.0)
        } else {
            0.0
        };
        let serial = serial_fraction(&stats);
        if self.cfg.stats {
            notices(&text_stats(&stats, f, serial));
        }
        if let Some(path) = &self.cfg.stats_json {
            let json = json_stats(&self.job, &stats, f, serial);
            if let Err(e) = std::fs::write(path, json) {
                notices(&format!(
                    "cannot write the statistics to {}: {e}",
                    path.display()
                ));
            }
        }
    }
}

/// The Amdahl serial fraction estimate `a`: the share of its wall time a rank
/// spends blocked, averaged over ranks (time a rank waits is taken as time the
/// program does not run in parallel), and the speedup Amdahl's law gives for
/// it. `None` for a job of one rank.
fn serial_fraction(stats: &[&RankCounters]) -> Option<(f64, f64)> {
    let n = stats.len();
    if n < 2 {
        return None;
    }
    let a = stats
        .iter()
        .map(|c| {
            if c.wall_us > 0 {
                (c.blocked_us as f64 / c.wall_us as f64).min(1.0)
            } else {
                0.0
            }
        })
        .sum::<f64>()
        / n as f64;
    let speedup = 1.0 / (a + (1.0 - a) / n as f64);
    Some((a, speedup))
}

fn same_wait(a: &Wait, b: &Wait) -> bool {
    (a.call, &a.comm, a.peer, a.tag, &a.location) == (b.call, &b.comm, b.peer, b.tag, &b.location)
}

/// Whether process `pid` of this host is rank `rank` of `job` (a rank on
/// another host has a pid that means nothing here).
fn is_our_rank(pid: u32, job: &str, rank: usize) -> bool {
    let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let want_job = format!("KUMI_JOB={job}");
    let want_rank = format!("KUMI_RANK={rank}");
    let mut job_ok = false;
    let mut rank_ok = false;
    for var in env.split(|&b| b == 0) {
        job_ok |= var == want_job.as_bytes();
        rank_ok |= var == want_rank.as_bytes();
    }
    job_ok && rank_ok
}

/// CPU time (user + system) of a process, in milliseconds.
pub fn cpu_ms(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut f = stat.rsplit_once(')')?.1.split_whitespace();
    // After the command: state(3) ... utime(14) stime(15), 1-based over the
    // whole line, so fields 12 and 13 after the state's index 1.
    let utime: u64 = f.nth(11)?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    let hz = rustix::param::clock_ticks_per_second().max(1);
    Some((utime + stime) * 1000 / hz)
}

fn secs(us: u64) -> f64 {
    us as f64 / 1e6
}

fn text_stats(stats: &[&RankCounters], f: f64, serial: Option<(f64, f64)>) -> String {
    let mut s = String::from(
        "statistics (point-to-point messages; coll: internal messages of collectives):\n  \
         rank    wall s  blocked s  blocked %   msgs out   bytes out    msgs in    bytes in  coll out   coll in",
    );
    for (r, c) in stats.iter().enumerate() {
        let t = c.total();
        let pct = if c.wall_us > 0 {
            100.0 * c.blocked_us as f64 / c.wall_us as f64
        } else {
            0.0
        };
        let _ = write!(
            s,
            "\n  {r:>4} {:>9.3} {:>10.3} {pct:>9.1}% {:>10} {:>11} {:>10} {:>11} {:>9} {:>9}",
            secs(c.wall_us),
            secs(c.blocked_us),
            t.msgs_out,
            t.bytes_out,
            t.msgs_in,
            t.bytes_in,
            t.coll_msgs_out,
            t.coll_msgs_in
        );
    }
    s.push_str("\n  per peer (from -> to: messages, bytes):");
    for (r, c) in stats.iter().enumerate() {
        for (q, p) in &c.peers {
            if p.msgs_out > 0 {
                let _ = write!(s, "\n    {r} -> {q}: {}, {}", p.msgs_out, p.bytes_out);
            }
        }
    }
    let _ = write!(
        s,
        "\n  communication fraction {:.1}% (time blocked / wall time, all ranks); {}",
        100.0 * f,
        serial.map_or("serial fraction: n/a (one rank)".to_string(), |(a, sp)| {
            format!(
                "serial fraction estimate a = {a:.3} (Amdahl: speedup {sp:.2} on {} ranks)",
                stats.len()
            )
        })
    );
    s
}

fn json_counts(p: &kumi_core::deadlock::PeerCount) -> String {
    format!(
        "\"msgs_out\": {}, \"bytes_out\": {}, \"msgs_in\": {}, \"bytes_in\": {}, \
         \"coll_msgs_out\": {}, \"coll_bytes_out\": {}, \"coll_msgs_in\": {}, \"coll_bytes_in\": {}",
        p.msgs_out,
        p.bytes_out,
        p.msgs_in,
        p.bytes_in,
        p.coll_msgs_out,
        p.coll_bytes_out,
        p.coll_msgs_in,
        p.coll_bytes_in
    )
}

fn json_stats(job: &str, stats: &[&RankCounters], f: f64, serial: Option<(f64, f64)>) -> String {
    let mut s = format!(
        "{{\n  \"job\": \"{}\",\n  \"size\": {},\n  \"communication_fraction\": {f:.6},\n  \"serial_fraction\": {},\n  \"ranks\": [",
        job.escape_default(),
        stats.len(),
        serial.map_or("null".to_string(), |(a, _)| format!("{a:.6}"))
    );
    for (r, c) in stats.iter().enumerate() {
        let t = c.total();
        // Every peer of the job, as the reports' sparse lists do not.
        let peers: Vec<String> = (0..stats.len() as u32)
            .map(|q| format!("{{\"peer\": {q}, {}}}", json_counts(&c.peer(q))))
            .collect();
        let _ = write!(
            s,
            "{}\n    {{\"rank\": {r}, \"wall_s\": {:.6}, \"blocked_s\": {:.6}, {},\n     \"peers\": [{}]}}",
            if r == 0 { "" } else { "," },
            secs(c.wall_us),
            secs(c.blocked_us),
            json_counts(&t),
            peers.join(", ")
        );
    }
    s.push_str("\n  ]\n}\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use kumi_core::call::Call;

    fn wait(peer: u32) -> Wait {
        Wait {
            call: Call::Recv as u32,
            comm: "world".into(),
            peer: peer as i32,
            tag: 1,
            waits_on: Some(vec![peer]),
            location: "p.rs:1:1".into(),
            function: None,
            blocked_ms: 100,
        }
    }

    #[test]
    fn a_deadlock_is_reported_once_after_the_grace_period() {
        let t0 = Instant::now();
        let mut s = Supervision::new(SupervisionConfig::default(), "j1", "p", 2, t0);
        for r in 0..2 {
            s.report(
                r,
                Report::Blocked {
                    wait: wait(1 - r),
                    counters: RankCounters::default(),
                },
                t0,
            );
        }
        assert_eq!(s.check(t0), None);
        assert_eq!(s.check(t0 + Duration::from_millis(900)), None);
        let f = s.check(t0 + Duration::from_millis(1000)).unwrap();
        assert!(f.abort && f.text.contains("0 -> 1 -> 0"), "{}", f.text);
        assert_eq!(s.check(t0 + Duration::from_millis(1100)), None);
    }

    #[test]
    fn an_unblocked_rank_resets_the_grace_period() {
        let t0 = Instant::now();
        let mut s = Supervision::new(SupervisionConfig::default(), "j1", "p", 2, t0);
        let blocked = |s: &mut Supervision, r: u32, t| {
            s.report(
                r,
                Report::Blocked {
                    wait: wait(1 - r),
                    counters: RankCounters::default(),
                },
                t,
            )
        };
        blocked(&mut s, 0, t0);
        blocked(&mut s, 1, t0);
        assert_eq!(s.check(t0), None);
        s.report(1, Report::Unblocked, t0 + Duration::from_millis(500));
        assert_eq!(s.check(t0 + Duration::from_millis(500)), None);
        blocked(&mut s, 1, t0 + Duration::from_millis(600));
        assert_eq!(s.check(t0 + Duration::from_millis(700)), None);
        assert_eq!(s.check(t0 + Duration::from_millis(1500)), None);
        assert!(s.check(t0 + Duration::from_millis(1700)).is_some());
    }

    #[test]
    fn serial_fraction_is_the_mean_blocked_share() {
        let c = |b| RankCounters {
            peers: vec![],
            blocked_us: b,
            wall_us: 1_000_000,
        };
        let (a, b) = (c(100_000), c(300_000));
        let (s, speedup) = serial_fraction(&[&a, &b]).unwrap();
        assert!((s - 0.2).abs() < 1e-9);
        assert!((speedup - 1.0 / (0.2 + 0.8 / 2.0)).abs() < 1e-9);
        assert_eq!(serial_fraction(&[&a]), None);
        let text = text_stats(&[&a, &b], 0.2, Some((s, speedup)));
        assert!(text.contains("communication fraction 20.0%"), "{text}");
        assert!(
            text.contains("a = 0.200 (Amdahl: speedup 1.67 on 2 ranks)"),
            "{text}"
        );
    }
}
