//! DSE's task queue (`SEEDS.md` §3): one FIFO of work items that every rank
//! pushes to and pops from, which knows when the work is over.
//!
//! The queue lives at one rank (its *keeper*, whose engine serves it while
//! its application computes); the others send [`Msg::Push`] and
//! [`Msg::Pop`] and get [`Msg::Task`] or [`Msg::Done`] back. A pop says
//! that its rank has no work of its own left: it pushed every item its last
//! task made. So when every rank waits in a pop and no item is queued,
//! nobody can push any more: the keeper answers every pop with `Done`
//! (termination detection, with no extra round of messages). A pushed item
//! goes to the longest-waiting pop if there is one, else to the back of the
//! queue; pops take from the front.
//!
//! A rank that still works may also ask for its next item ahead of time
//! ([`Msg::Take`]): the keeper answers with an item if one is queued, or
//! [`Msg::Empty`], and the rank does not count as waiting. So a rank hides
//! the round trip to the keeper behind its current task (several takes may
//! be in flight). It must have every answer before it pops (an item in
//! hand is work of its own).
//!
//! The keeper relies on one order only: a rank's push arrives before that
//! rank's next pop (kumi's transports deliver frames between two ranks in
//! order). Items are bytes of at most [`Queue::max_item`]; a message that
//! does not fit, a second pop of a rank already waiting, a take from a rank
//! waiting in a pop, or anything after `Done` is an error naming why, and
//! changes nothing.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// A message between a rank and the keeper.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Msg {
    /// To the keeper: queue this item.
    Push {
        /// The item.
        #[serde(with = "serde_bytes")]
        item: Vec<u8>,
    },
    /// To the keeper: give me an item (I have no work left).
    Pop,
    /// From the keeper: your item.
    Task {
        /// The item.
        #[serde(with = "serde_bytes")]
        item: Vec<u8>,
    },
    /// From the keeper: every rank is idle and the queue is empty.
    Done,
    /// To the keeper: give me an item if one is queued (I still work).
    Take,
    /// From the keeper, to a take: no item is queued.
    Empty,
}

impl Msg {
    /// The wire form.
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("a message always serializes")
    }

    /// A message from its wire form; items longer than `max_item` are
    /// refused.
    pub fn decode(bytes: &[u8], max_item: usize) -> Result<Msg, String> {
        let m: Msg = postcard::from_bytes(bytes).map_err(|e| format!("malformed: {e}"))?;
        match &m {
            Msg::Push { item } | Msg::Task { item } if item.len() > max_item => Err(format!(
                "an item of {} bytes where items have at most {max_item}",
                item.len()
            )),
            _ => Ok(m),
        }
    }
}

/// The keeper's queue.
pub struct Queue {
    ranks: u32,
    max_item: usize,
    items: VecDeque<Vec<u8>>,
    /// Ranks waiting in a pop, longest first.
    waiting: VecDeque<u32>,
    done: bool,
    out: VecDeque<(u32, Msg)>,
}

impl Queue {
    /// An empty queue of `ranks` ranks, items of at most `max_item` bytes.
    pub fn new(ranks: u32, max_item: usize) -> Queue {
        Queue {
            ranks,
            max_item,
            items: VecDeque::new(),
            waiting: VecDeque::new(),
            done: false,
            out: VecDeque::new(),
        }
    }

    /// The largest item.
    pub fn max_item(&self) -> usize {
        self.max_item
    }

    /// Items queued.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether no item is queued.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Whether the work is over (every rank was told).
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The next answer to send, with its rank.
    pub fn poll_transmit(&mut self) -> Option<(u32, Msg)> {
        self.out.pop_front()
    }

    /// Handles message `m` from rank `from`.
    pub fn handle(&mut self, from: u32, m: Msg) -> Result<(), String> {
        if from >= self.ranks {
            return Err(format!("a message from rank {from} of {}", self.ranks));
        }
        if self.done {
            return Err(format!("{m:?} from rank {from} after the work was over"));
        }
        match m {
            Msg::Push { item } => {
                if item.len() > self.max_item {
                    return Err(format!("an item of {} bytes", item.len()));
                }
                match self.waiting.pop_front() {
                    Some(r) => self.out.push_back((r, Msg::Task { item })),
                    None => self.items.push_back(item),
                }
            }
            Msg::Pop => {
                if self.waiting.contains(&from) {
                    return Err(format!("rank {from} pops twice"));
                }
                match self.items.pop_front() {
                    Some(item) => self.out.push_back((from, Msg::Task { item })),
                    None => {
                        self.waiting.push_back(from);
                        if self.waiting.len() == self.ranks as usize {
                            self.done = true;
                            for r in self.waiting.drain(..) {
                                self.out.push_back((r, Msg::Done));
                            }
                        }
                    }
                }
            }
            Msg::Take => {
                if self.waiting.contains(&from) {
                    return Err(format!("rank {from} takes while it waits in a pop"));
                }
                let answer = match self.items.pop_front() {
                    Some(item) => Msg::Task { item },
                    None => Msg::Empty,
                };
                self.out.push_back((from, answer));
            }
            Msg::Task { .. } | Msg::Done | Msg::Empty => {
                return Err(format!("{m:?} sent to the keeper by rank {from}"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) % n as u64) as usize
        }
    }

    /// A tree of tasks: a task `(depth, id)` spawns `fanout(id)` children
    /// until `depth` reaches `max`. Ranks run concurrently over channels
    /// that keep each pair's order but interleave pairs at random; rank 0
    /// pushes the root. Every task must run exactly once, `Done` must come
    /// only after all ran, and every rank must get it.
    fn run(ranks: u32, max: u32, seed: u64) {
        let mut rng = Rng(seed);
        let keeper = (seed % ranks as u64) as u32;
        let mut q = Queue::new(ranks, 16);
        let enc = |d: u32, id: u64| [d.to_le_bytes().to_vec(), id.to_le_bytes().to_vec()].concat();
        // 0 to 3 children (the root, id 0, has 3).
        let fanout = |id: u64| ((id * 7 + 3) % 4) as u32;
        // Per ordered pair (from, to): messages in flight, in order.
        let mut chan: std::collections::HashMap<(u32, u32), VecDeque<Msg>> = Default::default();
        // Per rank: the task in hand (to run, then push its children), or
        // waiting in a pop, or done.
        #[derive(PartialEq)]
        enum St {
            Idle,
            Holding(Vec<u8>),
            /// Done with its task, waiting for the answer to its take.
            Awaiting,
            Popping,
            Finished,
        }
        let mut st: Vec<St> = (0..ranks).map(|_| St::Idle).collect();
        // Per rank: takes in flight (up to two), and the items they brought.
        let mut taking = vec![0u32; ranks as usize];
        let mut ahead: Vec<VecDeque<Vec<u8>>> = (0..ranks).map(|_| VecDeque::new()).collect();
        st[0] = St::Holding(Vec::new()); // rank 0 starts by pushing the root
        let mut ran = std::collections::HashSet::new();
        let mut expected = 0u64;
        let mut next_id = 1u64;
        loop {
            while let Some((to, m)) = q.poll_transmit() {
                let m = Msg::decode(&m.encode(), 16).unwrap();
                chan.entry((keeper, to)).or_default().push_back(m);
            }
            let movable: Vec<usize> = (0..ranks as usize)
                .filter(|&r| matches!(st[r], St::Idle | St::Holding(_)))
                .collect();
            // A rank at work may ask for its next item ahead.
            if let Some(&r) = movable.get(rng.below(movable.len() + 1)) {
                if matches!(st[r], St::Holding(_)) && taking[r] as usize + ahead[r].len() < 2 {
                    taking[r] += 1;
                    chan.entry((r as u32, keeper))
                        .or_default()
                        .push_back(Msg::Take);
                }
            }
            let pairs: Vec<(u32, u32)> = chan
                .iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, _)| *k)
                .collect();
            if movable.is_empty() && pairs.is_empty() {
                break;
            }
            let pick = rng.below(movable.len() + pairs.len());
            if pick < movable.len() {
                let r = movable[pick];
                match std::mem::replace(&mut st[r], St::Popping) {
                    St::Holding(task) => {
                        // Run it: push its children, then pop.
                        let children = if task.is_empty() {
                            expected += 1;
                            vec![enc(0, 0)]
                        } else {
                            let d = u32::from_le_bytes(task[..4].try_into().unwrap());
                            let id = u64::from_le_bytes(task[4..].try_into().unwrap());
                            assert!(ran.insert(id), "task {id} ran twice");
                            if d < max {
                                (0..fanout(id))
                                    .map(|_| {
                                        next_id += 1;
                                        expected += 1;
                                        enc(d + 1, next_id)
                                    })
                                    .collect()
                            } else {
                                vec![]
                            }
                        };
                        for c in children {
                            chan.entry((r as u32, keeper))
                                .or_default()
                                .push_back(Msg::Push { item: c });
                        }
                    }
                    St::Idle => {}
                    _ => unreachable!(),
                }
                // Its next item: the one taken ahead, or the answer to its
                // take first, or a pop.
                match ahead[r].pop_front() {
                    Some(item) => st[r] = St::Holding(item),
                    None if taking[r] > 0 => st[r] = St::Awaiting,
                    _ => chan
                        .entry((r as u32, keeper))
                        .or_default()
                        .push_back(Msg::Pop),
                }
            } else {
                let (from, to) = pairs[pick - movable.len()];
                let m = chan.get_mut(&(from, to)).unwrap().pop_front().unwrap();
                if to == keeper && !matches!(m, Msg::Task { .. } | Msg::Done | Msg::Empty) {
                    q.handle(from, m).unwrap();
                } else if taking[to as usize] > 0 {
                    // The answer to a take (they come before any pop's).
                    let r = to as usize;
                    taking[r] -= 1;
                    match m {
                        Msg::Task { item } => ahead[r].push_back(item),
                        Msg::Empty => {}
                        m => panic!("{m:?} to a take"),
                    }
                    if st[r] == St::Awaiting {
                        if let Some(item) = ahead[r].pop_front() {
                            st[r] = St::Holding(item);
                        } else if taking[r] == 0 {
                            chan.entry((r as u32, keeper))
                                .or_default()
                                .push_back(Msg::Pop);
                            st[r] = St::Popping;
                        }
                    }
                } else {
                    let r = to as usize;
                    assert!(st[r] == St::Popping, "an answer to a rank not popping");
                    st[r] = match m {
                        Msg::Task { item } => St::Holding(item),
                        Msg::Done => {
                            assert_eq!(ran.len() as u64, expected, "done before all ran");
                            St::Finished
                        }
                        _ => unreachable!(),
                    };
                }
            }
        }
        assert!(
            st.iter().all(|s| *s == St::Finished),
            "a rank was never told"
        );
        assert_eq!(ran.len() as u64, expected);
        assert!(q.is_done() && q.is_empty());
    }

    #[test]
    fn every_task_runs_once_and_the_end_comes_after_the_last() {
        for seed in 0..3000 {
            run(1 + (seed % 6) as u32, (seed % 5) as u32 + 1, seed);
        }
    }

    #[test]
    fn out_of_turn_messages_are_refused() {
        let mut q = Queue::new(2, 4);
        assert!(q.handle(2, Msg::Pop).unwrap_err().contains("rank 2 of 2"));
        assert!(q
            .handle(0, Msg::Push { item: vec![0; 5] })
            .unwrap_err()
            .contains("5 bytes"));
        assert!(q
            .handle(0, Msg::Done)
            .unwrap_err()
            .contains("sent to the keeper"));
        q.handle(0, Msg::Take).unwrap();
        assert_eq!(q.poll_transmit(), Some((0, Msg::Empty)));
        q.handle(0, Msg::Pop).unwrap();
        assert!(q.handle(0, Msg::Pop).unwrap_err().contains("pops twice"));
        assert!(q
            .handle(0, Msg::Take)
            .unwrap_err()
            .contains("takes while it waits"));
        q.handle(1, Msg::Pop).unwrap();
        assert!(q.is_done());
        assert_eq!(q.poll_transmit(), Some((0, Msg::Done)));
        assert!(q
            .handle(1, Msg::Push { item: vec![] })
            .unwrap_err()
            .contains("after the work"));
        assert!(Msg::decode(&Msg::Task { item: vec![1; 9] }.encode(), 8)
            .unwrap_err()
            .contains("9 bytes"));
    }

    proptest! {
        #[test]
        fn decode_never_panics(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = Msg::decode(&b, 16);
        }
    }
}
