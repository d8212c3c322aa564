//! The point-to-point protocol without processes: engines of one process
//! joined by the loopback transport (`kumi_transport::loopback`) as their
//! network, driven through thousands of generated schedules of sends,
//! receives, cancellations and progress passes, and checked against MPI's
//! rules at the end of each:
//!
//! - every message is received at most once, by a receive whose pattern
//!   accepts it, with its bytes intact, or reported truncated with both sizes;
//! - messages of one sender to one receiver do not overtake: if a receive
//!   that got the later message also accepts the earlier one, the earlier
//!   one went to a receive posted before it;
//! - nothing is left that could match: no receive still pending accepts a
//!   message still unexpected at its rank;
//! - a cancelled receive gets no message; a standard send completes; a
//!   synchronous send completes exactly when its message was matched.
//!
//! Small frames (256 bytes), a small eager limit (64) and inboxes of four
//! frames make every schedule cross the eager, rendezvous (request, clear to
//! send, pushed chunks) and full-transport paths.

use super::{Engine, EngineSetup, ReqId, Route};
use crate::error::Error;
use crate::request::Status;
use crate::services::Services;
use crate::watch::Watch;
use kumi_core::config::{Env, Tuning};
use kumi_core::matching::{Envelope, Pattern};
use kumi_transport::loopback::Loopback;
use proptest::prelude::*;

const RANKS: u32 = 3;
/// Two communicators' point-to-point contexts.
fn ctx() -> impl Strategy<Value = u32> {
    prop_oneof![Just(0u32), Just(2u32)]
}
const MAX_LEN: usize = 700;
/// The eager limit of the schedules (`KUMI_EAGER_LIMIT`).
const EAGER: usize = 64;

/// One step of a schedule.
#[derive(Clone, Debug)]
enum Step {
    Send {
        ctx: u32,
        from: u32,
        to: u32,
        tag: i32,
        len: usize,
        sync: bool,
    },
    Recv {
        ctx: u32,
        at: u32,
        src: Option<u32>,
        tag: Option<i32>,
        cap: usize,
    },
    /// Cancels the `k`-th receive posted so far (modulo their number).
    Cancel(usize),
    Progress(u32),
}

fn step() -> impl Strategy<Value = Step> {
    let rank = 0..RANKS;
    prop_oneof![
        3 => (ctx(), 0..RANKS, 0..RANKS, 0..3i32, 2..MAX_LEN, any::<bool>())
            .prop_map(|(ctx, from, to, tag, len, sync)| Step::Send { ctx, from, to, tag, len, sync }),
        3 => (ctx(), 0..RANKS, proptest::option::weighted(0.7, 0..RANKS), proptest::option::weighted(0.7, 0..3i32), 0..MAX_LEN)
            .prop_map(|(ctx, at, src, tag, cap)| Step::Recv { ctx, at, src, tag, cap }),
        1 => any::<usize>().prop_map(Step::Cancel),
        3 => rank.prop_map(Step::Progress),
    ]
}

/// The bytes of message `id` from `from`: its first two bytes name it.
fn payload(from: u32, id: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| match i {
            0 => from as u8,
            1 => id as u8,
            _ => (from as usize * 31 + id * 7 + i) as u8,
        })
        .collect()
}

fn engines(tuning: &Tuning) -> Vec<Engine> {
    Loopback::fabric(RANKS as usize, 4, 256)
        .into_iter()
        .enumerate()
        .map(|(i, link)| {
            Engine::new(EngineSetup {
                world_rank: i as u32,
                world_size: RANKS,
                shm: None,
                net: Some(Box::new(link)),
                route: (0..RANKS as usize)
                    .map(|j| if j == i { Route::Me } else { Route::Net })
                    .collect(),
                pids: vec![0; RANKS as usize],
                watch: Watch::disabled(),
                my_local: 0,
                oversubscribed: false,
                cores: 1,
                bound_cores: None,
                tuning,
                single_copy: false,
                spread: None,
                services: Services::new(crate::coll::Config::new(&tuning.coll, false)),
            })
            .unwrap()
        })
        .collect()
}

struct SendOp {
    ctx: u32,
    from: u32,
    to: u32,
    tag: i32,
    data: Vec<u8>,
    sync: bool,
    req: Option<ReqId>,
    /// Its place among the sends from `from` to `to`.
    seq: usize,
}

struct RecvOp {
    at: u32,
    pat: Pattern,
    buf: Vec<u8>,
    req: ReqId,
    cancelled: bool,
    result: Option<Result<Status, Error>>,
}

fn run(steps: &[Step]) -> Result<(), TestCaseError> {
    let limit = EAGER.to_string();
    let tuning = Tuning::parse(&Env::from_vars([("KUMI_EAGER_LIMIT", limit.as_str())])).unwrap();
    let mut e = engines(&tuning);
    let mut sends: Vec<SendOp> = Vec::new();
    let mut recvs: Vec<RecvOp> = Vec::new();
    for s in steps {
        match *s {
            Step::Send {
                ctx,
                from,
                to,
                tag,
                len,
                sync,
            } => {
                let seq = sends
                    .iter()
                    .filter(|s| (s.ctx, s.from, s.to) == (ctx, from, to))
                    .count();
                let data = payload(from, sends.len(), len);
                let env = Envelope {
                    ctx,
                    src: from,
                    tag,
                };
                // The buffer's heap block stays put while `data` lives in
                // `sends` (a move of the vector does not move it).
                let req = e[from as usize]
                    .start_send(env, to, data.as_ptr(), len, sync)
                    .unwrap();
                sends.push(SendOp {
                    ctx,
                    from,
                    to,
                    tag,
                    data,
                    sync,
                    req,
                    seq,
                });
            }
            Step::Recv {
                ctx,
                at,
                src,
                tag,
                cap,
            } => {
                let pat = Pattern { ctx, src, tag };
                let mut buf = vec![0xEE; cap];
                let req = e[at as usize]
                    .post_recv(pat, buf.as_mut_ptr(), cap)
                    .unwrap();
                recvs.push(RecvOp {
                    at,
                    pat,
                    buf,
                    req,
                    cancelled: false,
                    result: None,
                });
            }
            Step::Cancel(k) if !recvs.is_empty() => {
                let n = recvs.len();
                let r = &mut recvs[k % n];
                if r.result.is_none() && !r.cancelled {
                    r.cancelled = e[r.at as usize].cancel_recv(r.req);
                }
            }
            Step::Cancel(_) => {}
            Step::Progress(r) => {
                e[r as usize].progress().unwrap();
            }
        }
    }
    // Drive every engine until nothing moves any more.
    let mut quiet = 0;
    for _ in 0..100_000 {
        let moved: usize = e.iter_mut().map(|x| x.progress().unwrap()).sum();
        quiet = if moved == 0 { quiet + 1 } else { 0 };
        if quiet == 3 {
            break;
        }
    }
    prop_assert_eq!(quiet, 3, "the engines never went quiet");
    for r in &mut recvs {
        if e[r.at as usize].is_done(r.req) {
            r.result = Some(e[r.at as usize].take_result(r.req));
        }
    }

    // Which message each receive got.
    let mut got: Vec<Option<usize>> = vec![None; recvs.len()];
    let mut taken = vec![false; sends.len()];
    for (i, r) in recvs.iter().enumerate() {
        let st = match &r.result {
            None => {
                prop_assert!(!r.cancelled, "a cancelled receive is complete at once");
                continue;
            }
            Some(Ok(st)) if st.cancelled => {
                prop_assert!(r.cancelled, "receive {} reports a cancel nobody made", i);
                continue;
            }
            Some(Ok(st)) => {
                prop_assert!(
                    !r.cancelled,
                    "receive {} was cancelled yet got a message",
                    i
                );
                *st
            }
            Some(Err(Error::Truncated {
                message_bytes,
                buffer_bytes,
                source,
                tag,
            })) => {
                prop_assert_eq!(*buffer_bytes, r.buf.len());
                prop_assert!(*message_bytes > r.buf.len());
                Status {
                    source: *source,
                    tag: *tag,
                    bytes: *message_bytes,
                    cancelled: false,
                }
            }
            Some(Err(other)) => return Err(TestCaseError::fail(format!("receive {i}: {other}"))),
        };
        // The message it names: from its source to this rank, with its tag
        // and length, the first such not taken yet whose bytes it holds (a
        // truncated one holds none; its envelope and length decide).
        let candidates: Vec<usize> = (0..sends.len())
            .filter(|&k| {
                let s = &sends[k];
                !taken[k]
                    && s.ctx == r.pat.ctx
                    && s.to == r.at
                    && s.from as i32 == st.source
                    && s.tag == st.tag
                    && s.data.len() == st.bytes
            })
            .collect();
        let k = if st.bytes <= r.buf.len() {
            candidates
                .into_iter()
                .find(|&k| r.buf[..st.bytes] == sends[k].data[..])
        } else {
            candidates.into_iter().next()
        };
        let Some(k) = k else {
            return Err(TestCaseError::fail(format!(
                "receive {i} at rank {} got a message nobody sent: {st:?}",
                r.at
            )));
        };
        let env = Envelope {
            ctx: sends[k].ctx,
            src: sends[k].from,
            tag: sends[k].tag,
        };
        prop_assert!(
            r.pat.accepts(&env),
            "receive {} got a message its pattern refuses",
            i
        );
        taken[k] = true;
        got[i] = Some(k);
    }
    // Non-overtaking: of two messages of one sender to one receiver on one
    // communicator, if the
    // receive that got the later one accepts the earlier one, the earlier one
    // went to a receive posted before it.
    for (rb, kb) in got
        .iter()
        .enumerate()
        .filter_map(|(i, k)| k.map(|k| (i, k)))
    {
        for (ra, ka) in got
            .iter()
            .enumerate()
            .filter_map(|(i, k)| k.map(|k| (i, k)))
        {
            let (a, b) = (&sends[ka], &sends[kb]);
            let env_a = Envelope {
                ctx: a.ctx,
                src: a.from,
                tag: a.tag,
            };
            let pair = (a.ctx, a.from, a.to) == (b.ctx, b.from, b.to);
            if pair && a.seq < b.seq && recvs[rb].pat.accepts(&env_a) {
                prop_assert!(
                    ra < rb,
                    "message {} (sent before {}) went to receive {}, posted after {}",
                    ka,
                    kb,
                    ra,
                    rb
                );
            }
        }
    }
    // Nothing left that could match.
    for r in recvs.iter().filter(|r| r.result.is_none()) {
        let left = e[r.at as usize].iprobe(&r.pat).unwrap();
        prop_assert!(
            left.is_none(),
            "a pending receive accepts a waiting message {:?}",
            left
        );
    }
    // Sends: a matched one completes; an unmatched one has completed only
    // if it was a standard send short enough to go eagerly.
    for (k, s) in sends.iter().enumerate() {
        let done = s.req.is_none_or(|id| e[s.from as usize].is_done(id));
        // (A send to self always goes eagerly: it is copied at once.)
        let eager = !s.sync && (s.data.len() <= EAGER || s.from == s.to);
        prop_assert_eq!(
            done,
            taken[k] || eager,
            "send {} ({} bytes, sync {}): done {}, matched {}",
            k,
            s.data.len(),
            s.sync,
            done,
            taken[k]
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn generated_schedules_keep_mpi_point_to_point_semantics(
        steps in proptest::collection::vec(step(), 1..60)
    ) {
        run(&steps)?;
    }
}

/// A schedule by hand: a rendezvous whose receive is posted before the send
/// and one posted after it, an `ANY_SOURCE` receive in posting order, and a
/// truncated message reported with both sizes.
#[test]
fn rendezvous_both_ways_wildcards_and_truncation() {
    let steps = [
        Step::Recv {
            ctx: 0,
            at: 1,
            src: Some(0),
            tag: Some(1),
            cap: 600,
        },
        Step::Send {
            ctx: 0,
            from: 0,
            to: 1,
            tag: 1,
            len: 500,
            sync: false,
        },
        Step::Send {
            ctx: 0,
            from: 2,
            to: 1,
            tag: 2,
            len: 300,
            sync: true,
        },
        Step::Progress(1),
        Step::Progress(2),
        Step::Recv {
            ctx: 0,
            at: 1,
            src: None,
            tag: None,
            cap: 400,
        },
        Step::Send {
            ctx: 2,
            from: 0,
            to: 2,
            tag: 0,
            len: 200,
            sync: false,
        },
        Step::Recv {
            ctx: 2,
            at: 2,
            src: Some(0),
            tag: None,
            cap: 300,
        },
        Step::Recv {
            ctx: 0,
            at: 2,
            src: Some(0),
            tag: None,
            cap: 100,
        },
    ];
    run(&steps).unwrap();
}

/// Regression: an eager send behind a full transport completed at once with
/// a copy of its payload queued, so a sender that outran its receiver copied
/// into memory without bound (and slowly: fresh pages each time). Now it is
/// a request that completes when its frame goes, read from the sender's own
/// buffer then, in order; an eager send with room completes at once still.
#[test]
fn an_eager_send_behind_a_full_transport_waits_for_room_in_the_senders_buffer() {
    let tuning = Tuning::defaults();
    let mut e = engines(&tuning);
    let env = Envelope {
        ctx: 0,
        src: 0,
        tag: 5,
    };
    let msgs: Vec<Vec<u8>> = (0..10).map(|i| payload(0, i, 100)).collect();
    let reqs: Vec<Option<ReqId>> = msgs
        .iter()
        .map(|m| e[0].start_send(env, 1, m.as_ptr(), m.len(), false).unwrap())
        .collect();
    // The link holds 4 frames: the first 4 went, the rest wait.
    assert!(reqs[..4].iter().all(Option::is_none), "{reqs:?}");
    assert!(reqs[4..].iter().all(Option::is_some), "{reqs:?}");
    for r in reqs[4..].iter().flatten() {
        assert!(
            !e[0].is_done(*r),
            "a queued send completed before its frame went"
        );
    }
    let mut got = Vec::new();
    for _ in 0..10 {
        let mut buf = vec![0u8; 100];
        let pat = Pattern {
            ctx: 0,
            src: Some(0),
            tag: Some(5),
        };
        let id = e[1].post_recv(pat, buf.as_mut_ptr(), buf.len()).unwrap();
        while !e[1].is_done(id) {
            e[0].progress().unwrap();
            e[1].progress().unwrap();
        }
        e[1].take_result(id).unwrap();
        got.push(buf);
    }
    assert_eq!(got, msgs, "messages arrive whole and in order");
    for r in reqs.into_iter().flatten() {
        e[0].progress().unwrap();
        assert!(e[0].is_done(r));
        e[0].take_result(r).unwrap();
    }
}
