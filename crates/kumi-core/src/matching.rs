//! MPI message matching: posted receives and unexpected messages.
//!
//! A receive names a context, a source or any source, and a tag or any tag. An
//! arriving message matches the *earliest posted* receive whose pattern it fits; a
//! new receive matches the *earliest arrived* unexpected message that fits. Since
//! each transport delivers the frames of one sender in send order, these two rules
//! give MPI's non-overtaking guarantee: two messages from one sender on one
//! communicator that both fit a receive are received in the order they were sent.
//!
//! The engine is generic over what it stores: `R` is whatever the runtime needs to
//! complete a receive (a request handle), `M` whatever it keeps of an unexpected
//! message (a copied payload, or a rendezvous descriptor). Both queues are scanned
//! linearly, as MPICH and Open MPI do; real programs keep them short.
//!
//! The usual blocking receive is posted when nothing else is and no message
//! waits for it ([`Matcher::post_direct`]): it then sits in a slot of its own
//! that an arriving message looks at before the queue, an optimisation
//! inside the one mechanism (it is the earliest posted receive, and matches
//! exactly as it would from the queue).

use std::collections::VecDeque;

/// Where a message comes from: its matching envelope.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Envelope {
    /// Communicator context id.
    pub ctx: u32,
    /// Sender's rank in that communicator.
    pub src: u32,
    /// Tag.
    pub tag: i32,
}

/// What a receive accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pattern {
    /// Communicator context id (never a wildcard).
    pub ctx: u32,
    /// A source rank, or `None` for any source.
    pub src: Option<u32>,
    /// A tag, or `None` for any tag.
    pub tag: Option<i32>,
}

impl Pattern {
    /// Does a message with envelope `e` fit this pattern?
    #[inline]
    pub fn accepts(&self, e: &Envelope) -> bool {
        self.ctx == e.ctx
            && self.src.is_none_or(|s| s == e.src)
            && self.tag.is_none_or(|t| t == e.tag)
    }
}

/// The posted-receive and unexpected-message queues of one rank.
#[derive(Debug)]
pub struct Matcher<R, M> {
    /// A receive posted when nothing else was ([`Matcher::post_direct`]):
    /// the earliest posted receive whenever it is there (receives posted
    /// after it queue behind it).
    direct: Option<(Pattern, R)>,
    posted: VecDeque<(Pattern, R)>,
    unexpected: VecDeque<(Envelope, M)>,
}

impl<R, M> Default for Matcher<R, M> {
    fn default() -> Self {
        Matcher {
            direct: None,
            posted: VecDeque::new(),
            unexpected: VecDeque::new(),
        }
    }
}

impl<R, M> Matcher<R, M> {
    /// An empty matcher.
    pub fn new() -> Self {
        Self::default()
    }

    /// A receive is posted. If an unexpected message fits, it is removed and
    /// returned together with `r`; otherwise `r` is queued and `None` returned.
    #[inline(always)]
    pub fn post(&mut self, pat: Pattern, r: R) -> Option<(Envelope, M, R)> {
        // Usually nothing waits (checked here, inline, before the search).
        if !self.unexpected.is_empty() {
            if let Some((e, m)) = self.take_unexpected(&pat) {
                return Some((e, m, r));
            }
        }
        self.posted.push_back((pat, r));
        None
    }

    /// Posts `r` in the direct slot, where an arriving message finds it before
    /// the queue, if nothing else is posted and no unexpected message fits
    /// `pat` (the usual blocking receive); otherwise posts nothing and gives
    /// `r` back (post it with [`Matcher::post`]).
    #[inline(always)]
    pub fn post_direct(&mut self, pat: Pattern, r: R) -> Result<(), R> {
        if self.direct.is_some() || !self.posted.is_empty() || self.peek_unexpected(&pat).is_some()
        {
            return Err(r);
        }
        self.direct = Some((pat, r));
        Ok(())
    }

    /// Takes the receive in the direct slot if it fits `env` (what
    /// [`Matcher::take_posted`] looks at first, for a caller that knows the
    /// slot is occupied: the usual blocking receive's message).
    #[inline(always)]
    pub fn take_direct(&mut self, env: &Envelope) -> Option<R> {
        match &self.direct {
            Some((p, _)) if p.accepts(env) => self.direct.take().map(|(_, r)| r),
            _ => None,
        }
    }

    /// A message arrives. If a posted receive fits, it is removed and returned
    /// with the message; otherwise the message is queued as unexpected.
    pub fn arrive(&mut self, env: Envelope, m: M) -> Option<(R, M)> {
        match self.take_posted(&env) {
            Some(r) => Some((r, m)),
            None => {
                self.push_unexpected(env, m);
                None
            }
        }
    }

    /// The first half of [`Matcher::arrive`], for callers that build the stored
    /// message only when no receive is waiting (so the expected path copies
    /// nothing): removes and returns the earliest posted receive that fits.
    #[inline(always)]
    pub fn take_posted(&mut self, env: &Envelope) -> Option<R> {
        if let Some((p, _)) = &self.direct {
            if p.accepts(env) {
                return self.direct.take().map(|(_, r)| r);
            }
        }
        if self.posted.is_empty() {
            return None;
        }
        // The first posted receive usually fits: take it without the general
        // removal's shifting.
        if self.posted.front().is_some_and(|(p, _)| p.accepts(env)) {
            return self.posted.pop_front().map(|(_, r)| r);
        }
        let i = self.posted.iter().position(|(p, _)| p.accepts(env))?;
        self.posted.remove(i).map(|(_, r)| r)
    }

    /// The second half of [`Matcher::arrive`]: queues a message no posted receive
    /// took. Call only right after `take_posted` returned `None` for `env`.
    pub fn push_unexpected(&mut self, env: Envelope, m: M) {
        self.unexpected.push_back((env, m));
    }

    /// The earliest unexpected message that fits, left in the queue (probe).
    #[inline]
    pub fn peek_unexpected(&self, pat: &Pattern) -> Option<(&Envelope, &M)> {
        // Usually nothing waits (every blocking receive asks first): an
        // empty queue answers without setting up a search (~15 instructions).
        if self.unexpected.is_empty() {
            return None;
        }
        self.unexpected
            .iter()
            .find(|(e, _)| pat.accepts(e))
            .map(|(e, m)| (e, m))
    }

    /// Removes and returns the earliest unexpected message that fits (matched probe).
    pub fn take_unexpected(&mut self, pat: &Pattern) -> Option<(Envelope, M)> {
        // Usually nothing waits: every receive posted comes through here, and
        // setting up the search of an empty queue cost it ~20 instructions.
        if self.unexpected.is_empty() {
            return None;
        }
        if self.unexpected.front().is_some_and(|(e, _)| pat.accepts(e)) {
            return self.unexpected.pop_front();
        }
        let i = self.unexpected.iter().position(|(e, _)| pat.accepts(e))?;
        self.unexpected.remove(i)
    }

    /// Removes the first posted receive for which `pred` holds (cancel).
    pub fn cancel_posted(&mut self, mut pred: impl FnMut(&R) -> bool) -> Option<R> {
        if self.direct.as_ref().is_some_and(|(_, r)| pred(r)) {
            return self.direct.take().map(|(_, r)| r);
        }
        let i = self.posted.iter().position(|(_, r)| pred(r))?;
        self.posted.remove(i).map(|(_, r)| r)
    }

    /// Number of posted receives waiting for a message.
    pub fn posted_len(&self) -> usize {
        self.posted.len() + usize::from(self.direct.is_some())
    }

    /// Number of unexpected messages waiting for a receive.
    pub fn unexpected_len(&self) -> usize {
        self.unexpected.len()
    }

    /// Posted receives, in post order (for state reports).
    pub fn posted(&self) -> impl Iterator<Item = &(Pattern, R)> {
        self.direct.iter().chain(self.posted.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One step of a random schedule: a message arrives, or a receive is posted.
    #[derive(Clone, Debug)]
    enum Step {
        Arrive {
            src: u32,
            ctx: u32,
            tag: i32,
        },
        Post {
            src: Option<u32>,
            ctx: u32,
            tag: Option<i32>,
            /// Through the direct slot when it can (the engine's blocking
            /// receive), else queued.
            direct: bool,
        },
        /// Cancels the `k`-th receive posted so far, if still pending.
        Cancel(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0u32..4, 0u32..2, 0i32..3).prop_map(|(src, ctx, tag)| Step::Arrive { src, ctx, tag }),
            (
                proptest::option::of(0u32..4),
                0u32..2,
                proptest::option::of(0i32..3),
                any::<bool>()
            )
                .prop_map(|(src, ctx, tag, direct)| Step::Post {
                    src,
                    ctx,
                    tag,
                    direct
                }),
            any::<usize>().prop_map(Step::Cancel),
        ]
    }

    /// The naive model: every message and every receive ever seen in one flat list
    /// each, with a "taken" mark; matching rescans everything from the start.
    #[derive(Default)]
    struct Model {
        msgs: Vec<(Envelope, usize, bool)>,
        recvs: Vec<(Pattern, usize, bool)>,
    }

    impl Model {
        fn arrive(&mut self, e: Envelope, id: usize) -> Option<usize> {
            for r in self.recvs.iter_mut() {
                if !r.2 && r.0.accepts(&e) {
                    r.2 = true;
                    self.msgs.push((e, id, true));
                    return Some(r.1);
                }
            }
            self.msgs.push((e, id, false));
            None
        }
        fn post(&mut self, p: Pattern, id: usize) -> Option<usize> {
            for m in self.msgs.iter_mut() {
                if !m.2 && p.accepts(&m.0) {
                    m.2 = true;
                    self.recvs.push((p, id, true));
                    return Some(m.1);
                }
            }
            self.recvs.push((p, id, false));
            None
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// The matcher pairs exactly the receives and messages the model pairs, and
        /// every pairing respects the pattern and per-sender send order.
        #[test]
        fn matches_naive_model(steps in proptest::collection::vec(step(), 0..60)) {
            let mut m: Matcher<usize, usize> = Matcher::new();
            let mut model = Model::default();
            // (message id, receive id) pairs, from both sides.
            let mut got = Vec::new();
            let mut want = Vec::new();
            let mut envs = Vec::new();
            let mut pats = Vec::new();
            for s in steps {
                match s {
                    Step::Arrive { src, ctx, tag } => {
                        let id = envs.len();
                        let e = Envelope { ctx, src, tag };
                        envs.push(e);
                        if let Some((r, mid)) = m.arrive(e, id) { got.push((mid, r)); }
                        if let Some(r) = model.arrive(e, id) { want.push((id, r)); }
                    }
                    Step::Post { src, ctx, tag, direct } => {
                        let id = pats.len();
                        let p = Pattern { ctx, src, tag };
                        pats.push(p);
                        let queued = match direct {
                            true => m.post_direct(p, id).err(),
                            false => Some(id),
                        };
                        if let Some(id) = queued {
                            if let Some((_, mid, r)) = m.post(p, id) { got.push((mid, r)); }
                        }
                        if let Some(mid) = model.post(p, id) { want.push((mid, id)); }
                    }
                    Step::Cancel(k) if !pats.is_empty() => {
                        let id = k % pats.len();
                        let pending = model.recvs.iter_mut().find(|r| r.1 == id && !r.2);
                        let cancelled = m.cancel_posted(|&r| r == id);
                        prop_assert_eq!(cancelled.is_some(), pending.is_some());
                        if let Some(r) = pending {
                            r.2 = true;
                        }
                    }
                    Step::Cancel(_) => {}
                }
            }
            prop_assert_eq!(&got, &want);
            for &(mid, rid) in &got {
                prop_assert!(pats[rid].accepts(&envs[mid]));
            }
            // Non-overtaking: for two messages from one sender on one context, if the
            // later one was received, the earlier one was received too, by a receive
            // posted no later, whenever that receive could have taken either.
            for &(m1, r1) in &got {
                for &(m2, r2) in &got {
                    let (e1, e2) = (envs[m1], envs[m2]);
                    if m1 < m2 && e1.src == e2.src && e1.ctx == e2.ctx
                        && pats[r1].accepts(&e2) && pats[r2].accepts(&e1) {
                        prop_assert!(r1 < r2, "message {m2} overtook {m1}");
                    }
                }
            }
            prop_assert_eq!(m.unexpected_len(), model.msgs.iter().filter(|x| !x.2).count());
            prop_assert_eq!(m.posted_len(), model.recvs.iter().filter(|x| !x.2).count());
        }
    }

    #[test]
    fn probe_leaves_message_and_cancel_removes_receive() {
        let mut m: Matcher<u32, &str> = Matcher::new();
        let any = Pattern {
            ctx: 0,
            src: None,
            tag: None,
        };
        assert!(m
            .arrive(
                Envelope {
                    ctx: 0,
                    src: 1,
                    tag: 5
                },
                "a"
            )
            .is_none());
        assert_eq!(m.peek_unexpected(&any).map(|(e, _)| e.tag), Some(5));
        assert_eq!(m.unexpected_len(), 1);
        assert_eq!(m.post(any, 9).map(|(_, s, r)| (s, r)), Some(("a", 9)));
        assert!(m
            .post(
                Pattern {
                    ctx: 1,
                    src: Some(0),
                    tag: Some(1)
                },
                7
            )
            .is_none());
        assert_eq!(m.cancel_posted(|&r| r == 7), Some(7));
        assert_eq!(m.posted_len(), 0);
    }
}
