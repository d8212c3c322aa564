//! Deadlock detection: what ranks report about their waits, and the pure
//! decision the launcher makes from those reports.
//!
//! A rank that has been blocked for longer than a short threshold sends a
//! [`Report::Blocked`] naming its call and what could end it, with its per-peer
//! message counters; it sends [`Report::Unblocked`] when the wait ends. From the
//! latest report of every rank, [`detect`] finds the ranks that can never move
//! again:
//!
//! 1. Start from the set `S` of blocked ranks.
//! 2. Remove a rank from `S` if some rank that could end its wait is not in `S`
//!    (that rank computes, or has not started yet: it may still send), or if a
//!    message from one of those ranks is *in flight*: the sender counted more
//!    messages to it than it counted arrivals from that sender. A wait whose
//!    possible partners are unknown (a wait on a request, a communicator whose
//!    members the rank does not know) can be ended by anybody, so it stays only
//!    while every live rank of the job is in `S`.
//! 3. Repeat until nothing changes. What remains waits only on ranks that wait
//!    too, with nothing on the way that could wake any of them: a deadlock.
//!
//! Arrived messages that matched no receive count as arrived: the receive that
//! blocks was posted after them or does not match them, so they cannot end it
//! (the matcher would have). Ranks that ended count as members of `S` that will
//! never send again. The rule never fires while a rank computes outside kumi,
//! however long, unless no blocked rank waits on it: the computing rank is not
//! blocked, so every wait that names it leaves `S`.
//!
//! The detector is a pure function of one snapshot; the launcher adds the grace
//! period (the same deadlock must persist for it) because reports are sent at
//! different times and a snapshot may mix an old report with a new one.

use crate::call::Call;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// Messages and bytes between this rank and one peer (world rank index).
/// Point-to-point messages of the program and the internal messages of
/// collectives are counted apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerCount {
    /// Point-to-point messages sent to the peer (counted when started).
    pub msgs_out: u64,
    /// Payload bytes of those.
    pub bytes_out: u64,
    /// Point-to-point messages from the peer that arrived (matched or not).
    pub msgs_in: u64,
    /// Payload bytes of those.
    pub bytes_in: u64,
    /// Internal messages of collectives sent to the peer.
    pub coll_msgs_out: u64,
    /// Payload bytes of those.
    pub coll_bytes_out: u64,
    /// Internal messages of collectives from the peer that arrived.
    pub coll_msgs_in: u64,
    /// Payload bytes of those.
    pub coll_bytes_in: u64,
}

impl PeerCount {
    fn add(self, p: &PeerCount) -> PeerCount {
        PeerCount {
            msgs_out: self.msgs_out + p.msgs_out,
            bytes_out: self.bytes_out + p.bytes_out,
            msgs_in: self.msgs_in + p.msgs_in,
            bytes_in: self.bytes_in + p.bytes_in,
            coll_msgs_out: self.coll_msgs_out + p.coll_msgs_out,
            coll_bytes_out: self.coll_bytes_out + p.coll_bytes_out,
            coll_msgs_in: self.coll_msgs_in + p.coll_msgs_in,
            coll_bytes_in: self.coll_bytes_in + p.coll_bytes_in,
        }
    }
}

/// A rank's counters as of its report.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankCounters {
    /// The peers with anything counted, by world rank (self included:
    /// messages to oneself), in rank order. Sparse: a rank of a large job
    /// talks to a few of its peers, and every report carries these.
    pub peers: Vec<(u32, PeerCount)>,
    /// Time spent in waits that lasted more than a few microseconds.
    pub blocked_us: u64,
    /// Time since the rank started kumi.
    pub wall_us: u64,
}

impl RankCounters {
    /// Sum over all peers.
    pub fn total(&self) -> PeerCount {
        self.peers
            .iter()
            .fold(PeerCount::default(), |a, (_, p)| a.add(p))
    }

    /// The counts of peer `r` (zero if it has none).
    pub fn peer(&self, r: u32) -> PeerCount {
        self.peers
            .binary_search_by_key(&r, |&(q, _)| q)
            .map_or_else(|_| PeerCount::default(), |i| self.peers[i].1)
    }

    /// The counters of `dense[q]` for every peer q, keeping those with
    /// anything counted.
    pub fn sparse(dense: &[PeerCount]) -> Vec<(u32, PeerCount)> {
        dense
            .iter()
            .enumerate()
            .filter(|(_, p)| **p != PeerCount::default())
            .map(|(q, p)| (q as u32, *p))
            .collect()
    }
}

/// What a blocked rank waits in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wait {
    /// The call, as a [`Call`] code.
    pub call: u32,
    /// The communicator's name for people ("world", "comm #4"); empty for a
    /// wait on requests (which may be on several).
    pub comm: String,
    /// Peer's rank in that communicator; -1: any source; -2: none.
    pub peer: i32,
    /// Tag; -1: any tag; -2: none.
    pub tag: i32,
    /// World ranks that could end the wait; `None`: unknown (anybody).
    pub waits_on: Option<Vec<u32>>,
    /// Where in the user's program (file:line:column).
    pub location: String,
    /// The function, when the location comes from a symbolized address.
    pub function: Option<String>,
    /// How long the rank had been blocked when it sent this, in milliseconds.
    pub blocked_ms: u64,
}

impl Wait {
    /// The call.
    pub fn call(&self) -> Call {
        Call::from_code(self.call)
    }

    /// "kumi::recv on world from rank 3, tag 7": what the wait is, for people.
    /// Internal peers and tags of collectives are left out.
    pub fn describe(&self) -> String {
        let call = self.call();
        let mut s = crate::call::name_of(self.call).to_string();
        if !self.comm.is_empty() {
            let _ = write!(s, " on {}", self.comm);
        }
        if call == Call::DsmLock && self.tag >= 0 {
            let _ = write!(s, ", lock {}", self.tag);
            if self.peer >= 0 {
                let _ = write!(s, " held by rank {}", self.peer);
            }
        }
        if call == Call::DsmFault && self.peer >= 0 {
            let _ = write!(s, ", page {} from rank {}", self.tag, self.peer);
        }
        if matches!(call, Call::Send | Call::Recv | Call::Probe) {
            match (call, self.peer) {
                (Call::Send, p) if p >= 0 => {
                    let _ = write!(s, " to rank {p}");
                }
                (_, -1) => s.push_str(" from any source"),
                (_, p) if p >= 0 => {
                    let _ = write!(s, " from rank {p}");
                }
                _ => {}
            }
            match self.tag {
                -1 => s.push_str(", any tag"),
                t if (0..=crate::TAG_UB).contains(&t) => {
                    let _ = write!(s, ", tag {t}");
                }
                _ => {}
            }
        }
        s
    }
}

/// What a rank tells the launcher about its waits and traffic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Report {
    /// Blocked for longer than the threshold (sent again about every second,
    /// and whenever messages arrived, while the wait lasts).
    Blocked {
        /// The wait.
        wait: Wait,
        /// Counters at the time of the report.
        counters: RankCounters,
    },
    /// The wait that was reported ended.
    Unblocked,
    /// Periodic counters.
    Counters(RankCounters),
    /// The counters of the rank's own work, sent at finalize before its last
    /// barrier (so they hold exactly what the program sent): for statistics.
    Final(RankCounters),
    /// Sent once at start: the host the rank runs on.
    Started {
        /// Host name.
        host: String,
    },
}

/// One rank as the detector sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RankView<'a> {
    /// Not yet reported anything, or computing: it may send.
    Active(&'a RankCounters),
    /// Blocked in `Wait`.
    Blocked(&'a Wait, &'a RankCounters),
    /// Ended: it will never send again.
    Ended(&'a RankCounters),
}

impl<'a> RankView<'a> {
    fn counters(&self) -> &'a RankCounters {
        match self {
            RankView::Active(c) | RankView::Blocked(_, c) | RankView::Ended(c) => c,
        }
    }
}

/// A deadlock: the ranks involved and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deadlock {
    /// The blocked ranks that can never move, ascending.
    pub ranks: Vec<u32>,
    /// A cycle of waits among them (first rank repeated at the end), if any.
    pub cycle: Option<Vec<u32>>,
    /// Every live rank of the job is involved.
    pub whole_job: bool,
}

/// Messages from `q` to `r` not yet arrived at `r`, by their counters.
fn in_flight(view: &[RankView<'_>], q: u32, r: u32) -> bool {
    let sent = view[q as usize].counters().peer(r);
    let arrived = view[r as usize].counters().peer(q);
    sent.msgs_out > arrived.msgs_in || sent.coll_msgs_out > arrived.coll_msgs_in
}

/// Finds the ranks that can never move again (see the module doc).
pub fn detect(view: &[RankView<'_>]) -> Option<Deadlock> {
    let n = view.len() as u32;
    let ended = |q: u32| matches!(view[q as usize], RankView::Ended(_));
    let mut stuck: Vec<bool> = view
        .iter()
        .map(|v| matches!(v, RankView::Blocked(..)))
        .collect();
    loop {
        let mut changed = false;
        let all_stuck = (0..n).all(|q| stuck[q as usize] || ended(q));
        for r in 0..n {
            if !stuck[r as usize] {
                continue;
            }
            let RankView::Blocked(w, _) = &view[r as usize] else {
                continue;
            };
            let keep = match &w.waits_on {
                Some(on) => on.iter().all(|&q| {
                    q == r || (q < n && (stuck[q as usize] || ended(q)) && !in_flight(view, q, r))
                }),
                None => all_stuck && (0..n).all(|q| !in_flight(view, q, r)),
            };
            if !keep {
                stuck[r as usize] = false;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let ranks: Vec<u32> = (0..n).filter(|&r| stuck[r as usize]).collect();
    if ranks.is_empty() {
        return None;
    }
    let whole_job = (0..n).all(|q| stuck[q as usize] || ended(q));
    let cycle = find_cycle(view, &stuck);
    Some(Deadlock {
        ranks,
        cycle,
        whole_job,
    })
}

/// A cycle in the wait-for graph of point-to-point waits (one partner each)
/// among stuck ranks. (A collective waits on every member: a "cycle" through
/// it would say nothing the list of waits does not.)
fn find_cycle(view: &[RankView<'_>], stuck: &[bool]) -> Option<Vec<u32>> {
    let n = view.len();
    let edges = |r: usize| -> Vec<u32> {
        match &view[r] {
            RankView::Blocked(w, _) => match w.waits_on.as_deref() {
                Some(&[q]) if (q as usize) < n && stuck[q as usize] && q as usize != r => {
                    vec![q]
                }
                _ => Vec::new(),
            },
            _ => Vec::new(),
        }
    };
    // 0 = unvisited, 1 = on the current path, 2 = done.
    let mut mark = vec![0u8; n];
    for start in (0..n).filter(|&r| stuck[r]) {
        if mark[start] != 0 {
            continue;
        }
        let mut path: Vec<(usize, Vec<u32>, usize)> = vec![(start, edges(start), 0)];
        mark[start] = 1;
        while let Some((node, out, i)) = path.last_mut() {
            if *i == out.len() {
                mark[*node] = 2;
                path.pop();
                continue;
            }
            let next = out[*i] as usize;
            *i += 1;
            match mark[next] {
                0 => {
                    mark[next] = 1;
                    let e = edges(next);
                    path.push((next, e, 0));
                }
                1 => {
                    let from = path.iter().position(|(v, ..)| *v == next).unwrap_or(0);
                    let mut cycle: Vec<u32> =
                        path[from..].iter().map(|(v, ..)| *v as u32).collect();
                    cycle.push(next as u32);
                    return Some(cycle);
                }
                _ => {}
            }
        }
    }
    None
}

/// "0-2, 5, 7-8".
pub fn ranges(ranks: &[u32]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        out.push(match j - i {
            0 => ranks[i].to_string(),
            1 => format!("{}, {}", ranks[i], ranks[j]),
            _ => format!("{}-{}", ranks[i], ranks[j]),
        });
        i = j + 1;
    }
    out.join(", ")
}

/// The report a user reads: one line per group of ranks that wait in the same
/// call at the same place, then the cycle or the reason.
pub fn report(d: &Deadlock, view: &[RankView<'_>]) -> String {
    let mut groups: Vec<(String, Vec<u32>)> = Vec::new();
    for &r in &d.ranks {
        let RankView::Blocked(w, _) = &view[r as usize] else {
            continue;
        };
        let mut what = w.describe();
        let _ = write!(what, " (at {}", w.location);
        if let Some(f) = &w.function {
            let _ = write!(what, " in {f}");
        }
        what.push(')');
        match groups.iter_mut().find(|(k, _)| *k == what) {
            Some((_, rs)) => rs.push(r),
            None => groups.push((what, vec![r])),
        }
    }
    let mut s = format!(
        "deadlock: rank{} {} can never continue",
        if d.ranks.len() == 1 { "" } else { "s" },
        ranges(&d.ranks)
    );
    for (what, rs) in &groups {
        let who = if rs.len() == 1 {
            format!("rank {} waits", rs[0])
        } else {
            format!("ranks {} wait", ranges(rs))
        };
        let _ = write!(s, "\n  {who} in {what}");
    }
    let ended: Vec<u32> = (0..view.len() as u32)
        .filter(|&q| matches!(view[q as usize], RankView::Ended(_)))
        .collect();
    let reason = match &d.cycle {
        Some(c) => format!(
            "each waits for the next in the cycle {}, and no message that could end a wait is in flight",
            c.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(" -> ")
        ),
        None if d.whole_job => {
            "every rank of the job is blocked and no message that any of them waits for is in flight or queued"
                .to_string()
        }
        None => "they wait only on each other and no message that could end a wait is in flight"
            .to_string(),
    };
    let _ = write!(s, "\n  why: {reason}");
    if !ended.is_empty() {
        let _ = write!(s, "\n  (ranks that already ended: {})", ranges(&ended));
    }
    s
}

/// What a monitor (`kumi top`, `kumi ps`) sees of a running job.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Job id.
    pub job: String,
    /// The program the ranks run.
    pub program: String,
    /// Number of ranks.
    pub size: u32,
    /// Time since the launcher started the job, in milliseconds.
    pub elapsed_ms: u64,
    /// One entry per rank.
    pub ranks: Vec<RankStatus>,
    /// How to reach each host that is not the launcher's (for `kumi stacks`
    /// and `kumi attach`), by the name its ranks report.
    pub reach: Vec<(String, crate::debug::Reach)>,
}

impl Snapshot {
    /// How to reach `host` (the launcher's own when it is not listed).
    pub fn reach_of(&self, host: &str) -> crate::debug::Reach {
        self.reach
            .iter()
            .find(|(h, _)| h == host)
            .map_or(crate::debug::Reach::Local, |(_, r)| r.clone())
    }
}

/// One rank in a [`Snapshot`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankStatus {
    /// Global rank.
    pub rank: u32,
    /// Host it runs on.
    pub host: String,
    /// Process id (0: not connected yet).
    pub pid: u32,
    /// Blocked in this wait, if it reported one.
    pub blocked: Option<Wait>,
    /// How long it has been in that wait, in milliseconds.
    pub blocked_for_ms: u64,
    /// It has ended.
    pub ended: bool,
    /// CPU time used (user + system), in milliseconds, as the launcher read it
    /// (`None`: not on the launcher's host, or unreadable).
    pub cpu_ms: Option<u64>,
    /// Latest counters the rank reported.
    pub counters: RankCounters,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn wait(call: Call, peer: i32, tag: i32, on: Option<Vec<u32>>) -> Wait {
        Wait {
            call: call as u32,
            comm: "world".into(),
            peer,
            tag,
            waits_on: on,
            location: "prog.rs:1:1".into(),
            function: None,
            blocked_ms: 200,
        }
    }

    /// Counters for `n` ranks where `sent[q][r]` messages went from q to r and
    /// `arrived[r][q]` arrived.
    fn counters(
        n: usize,
        sent: &[(u32, u32, u64)],
        arrived: &[(u32, u32, u64)],
    ) -> Vec<RankCounters> {
        let mut dense = vec![vec![PeerCount::default(); n]; n];
        for &(q, r, k) in sent {
            dense[q as usize][r as usize].msgs_out = k;
        }
        for &(r, q, k) in arrived {
            dense[r as usize][q as usize].msgs_in = k;
        }
        dense
            .iter()
            .map(|d| RankCounters {
                peers: RankCounters::sparse(d),
                ..Default::default()
            })
            .collect()
    }

    #[test]
    fn a_wait_on_requests_names_no_communicator() {
        let mut w = wait(Call::Wait, -2, -2, None);
        w.comm = String::new();
        assert_eq!(w.describe(), crate::call::name_of(Call::Wait as u32));
        assert_eq!(
            wait(Call::Recv, 3, 7, None).describe(),
            format!(
                "{} on world from rank 3, tag 7",
                crate::call::name_of(Call::Recv as u32)
            )
        );
    }

    #[test]
    fn recv_cycle_of_two_is_a_deadlock_with_its_cycle() {
        let c = counters(2, &[], &[]);
        let w0 = wait(Call::Recv, 1, 7, Some(vec![1]));
        let w1 = wait(Call::Recv, 0, 7, Some(vec![0]));
        let v = [RankView::Blocked(&w0, &c[0]), RankView::Blocked(&w1, &c[1])];
        let d = detect(&v).unwrap();
        assert_eq!(d.ranks, [0, 1]);
        assert_eq!(d.cycle, Some(vec![0, 1, 0]));
        let text = report(&d, &v);
        assert!(
            text.contains("rank 0 waits in kumi::recv on world from rank 1, tag 7"),
            "{text}"
        );
        assert!(text.contains("0 -> 1 -> 0"), "{text}");
    }

    #[test]
    fn a_message_in_flight_to_a_waiter_is_no_deadlock() {
        let c = counters(2, &[(1, 0, 1)], &[]);
        let w0 = wait(Call::Recv, 1, 7, Some(vec![1]));
        let w1 = wait(Call::Recv, 0, 7, Some(vec![0]));
        let v = [RankView::Blocked(&w0, &c[0]), RankView::Blocked(&w1, &c[1])];
        assert_eq!(detect(&v), None);
        // Once it arrived (and matched nothing), it cannot help.
        let c = counters(2, &[(1, 0, 1)], &[(0, 1, 1)]);
        let v = [RankView::Blocked(&w0, &c[0]), RankView::Blocked(&w1, &c[1])];
        assert!(detect(&v).is_some());
    }

    #[test]
    fn a_computing_rank_keeps_its_waiters_alive() {
        let c = counters(3, &[], &[]);
        let w0 = wait(Call::Recv, 2, 0, Some(vec![2]));
        let w1 = wait(Call::Recv, -1, 0, None);
        let v = [
            RankView::Blocked(&w0, &c[0]),
            RankView::Blocked(&w1, &c[1]),
            RankView::Active(&c[2]),
        ];
        assert_eq!(detect(&v), None);
    }

    #[test]
    fn barrier_against_recv_names_every_rank() {
        // Ranks 0-2 wait in a receive from 3; rank 3 waits in a barrier whose
        // partner (by the dissemination schedule) is rank 2.
        let c = counters(4, &[], &[]);
        let r = wait(Call::Recv, 3, 7, Some(vec![3]));
        let b = wait(Call::Barrier, 2, crate::TAG_UB + 1, Some(vec![2]));
        let v = [
            RankView::Blocked(&r, &c[0]),
            RankView::Blocked(&r, &c[1]),
            RankView::Blocked(&r, &c[2]),
            RankView::Blocked(&b, &c[3]),
        ];
        let d = detect(&v).unwrap();
        assert!(d.whole_job);
        let text = report(&d, &v);
        assert!(
            text.contains("ranks 0-2 wait in kumi::recv on world from rank 3, tag 7"),
            "{text}"
        );
        assert!(
            text.contains("rank 3 waits in kumi::barrier on world (at"),
            "{text}"
        );
    }

    #[test]
    fn a_subset_deadlocks_while_others_compute() {
        let c = counters(4, &[], &[]);
        let w0 = wait(Call::Recv, 1, 0, Some(vec![1]));
        let w1 = wait(Call::Recv, 0, 0, Some(vec![0]));
        let v = [
            RankView::Blocked(&w0, &c[0]),
            RankView::Blocked(&w1, &c[1]),
            RankView::Active(&c[2]),
            RankView::Active(&c[3]),
        ];
        let d = detect(&v).unwrap();
        assert_eq!(d.ranks, [0, 1]);
        assert!(!d.whole_job);
    }

    #[test]
    fn unknown_partners_need_the_whole_job_blocked() {
        let c = counters(3, &[], &[]);
        let w = wait(Call::Wait, -2, -2, None);
        let v = [
            RankView::Blocked(&w, &c[0]),
            RankView::Blocked(&w, &c[1]),
            RankView::Ended(&c[2]),
        ];
        let d = detect(&v).unwrap();
        assert_eq!(d.ranks, [0, 1]);
        assert!(d.whole_job);
        assert!(report(&d, &v).contains("already ended: 2"));
    }

    #[test]
    fn ranges_compact() {
        assert_eq!(ranges(&[0, 1, 2, 5, 7, 8]), "0-2, 5, 7, 8");
        assert_eq!(ranges(&[]), "");
    }

    proptest! {
        /// No rank that waits on an active rank, directly or through other
        /// waits, is ever declared deadlocked; and no active rank is.
        #[test]
        fn never_blames_a_rank_that_depends_on_an_active_one(
            states in proptest::collection::vec(0u8..3, 1..8),
            targets in proptest::collection::vec(proptest::option::of(0u32..8), 8),
        ) {
            let n = states.len();
            let c = counters(n, &[], &[]);
            let waits: Vec<Wait> = (0..n)
                .map(|r| wait(Call::Recv, 0, 0, targets[r].map(|t| vec![t % n as u32])))
                .collect();
            let v: Vec<RankView<'_>> = (0..n)
                .map(|r| match states[r] {
                    0 => RankView::Active(&c[r]),
                    1 => RankView::Blocked(&waits[r], &c[r]),
                    _ => RankView::Ended(&c[r]),
                })
                .collect();
            if let Some(d) = detect(&v) {
                for &r in &d.ranks {
                    // Follow known waits: never reach an active rank.
                    let mut seen = vec![false; n];
                    let mut stack = vec![r as usize];
                    while let Some(x) = stack.pop() {
                        if std::mem::replace(&mut seen[x], true) { continue; }
                        match &v[x] {
                            RankView::Active(_) => prop_assert!(false, "rank {r} depends on active {x}"),
                            RankView::Blocked(w, _) => match &w.waits_on {
                                Some(on) => stack.extend(on.iter().map(|&q| q as usize)),
                                None => stack.extend(0..n),
                            },
                            RankView::Ended(_) => {}
                        }
                    }
                }
            }
        }
    }
}
