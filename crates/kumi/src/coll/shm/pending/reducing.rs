//! A nonblocking reduction longer than a payload half ([`Reducing`]): its
//! rounds, which [`Pending`] drives.

use super::*;

/// A nonblocking reduction longer than a payload half, round by round as
/// its blocking twin goes, one of two ways ([`Way`]).
///
/// By single copy between the members' buffers (`single.rs`): in the first
/// round every member publishes where its buffer is and, once every member
/// has, folds its block of all of them (an allreduce's commutative fold
/// also writes the result into every other buffer); in the next, a
/// rank-order allreduce reads the others' folded blocks; the last round
/// tells every member that nobody reads or writes its buffer any more.
///
/// Through the area (`long.rs`): a commutative allreduce in chunks of two
/// rounds each, the first carrying the blocks the others fold, the second
/// each member's folded block (`allreduce_area`); a reduce-scatter in
/// rounds that each carry a share of every member's block
/// (`reduce_scatter_area`); a commutative reduce in chunks of a payload
/// half, which the members other than the root publish and the root folds
/// (`reduce_area`; only this way).
pub(crate) struct Reducing {
    pub(super) what: Reduction,
    way: Way,
    op: crate::coll::exec::ByteOp,
    elem: usize,
    commutative: bool,
    /// The first round's collective number.
    pub(super) first: u64,
    /// Single copy: every member's buffer, once all have published it.
    peers: Option<single::Peers>,
}

/// How a [`Reducing`] goes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Way {
    /// By single copy, folding `.0` bytes at a time
    /// ([`single::piece_of`]).
    Single(usize),
    /// Through the area, `.0` bytes a round: an allreduce's chunk
    /// ([`long::area_chunk`]), a reduce-scatter's share of each block
    /// ([`long::Scatter`]).
    Area(usize),
}

/// What a [`Reducing`] reduces; the buffers are the caller's, valid and
/// left alone until the request completes.
pub(crate) enum Reduction {
    /// An allreduce of `.1` bytes in place at `.0`.
    All(*mut u8, usize),
    /// A reduce-scatter of `send`, member j's block at bytes `offsets[j]..
    /// offsets[j + 1]` of it; this member's folds into `recv`.
    Scatter {
        send: *const u8,
        offsets: Vec<usize>,
        recv: *mut u8,
    },
    /// A reduce to member `root` of the `n` bytes at `buf`: this member's
    /// contribution, only read but at the root, where the result replaces
    /// it.
    Root { buf: *mut u8, n: usize, root: usize },
}

impl Reduction {
    /// The bytes every member reduces (and, by single copy, publishes).
    fn len(&self) -> usize {
        match self {
            Reduction::All(_, n) | Reduction::Root { n, .. } => *n,
            Reduction::Scatter { offsets, .. } => offsets.last().copied().unwrap_or(0),
        }
    }
}

impl Reducing {
    /// A reduction by `op` (on `elem`-byte elements) of `what`, by single
    /// copy, or with `area` through the area of `g` (where [`area_fits`];
    /// an allreduce only with a commutative operation; a reduce only so,
    /// [`ireduce_in_area`]).
    pub fn new(
        e: &Engine,
        g: &Group,
        what: Reduction,
        op: crate::coll::exec::ByteOp,
        (elem, commutative): (usize, bool),
        area: bool,
    ) -> Reducing {
        let m = g.slots.len();
        let way = match (area, &what) {
            (false, _) => Way::Single(single::piece_of(e, elem)),
            (true, Reduction::All(..)) => {
                debug_assert!(commutative && area_fits(g, elem));
                Way::Area(long::area_chunk(g.payload, m, elem))
            }
            (true, Reduction::Scatter { offsets, .. }) => {
                debug_assert!(area_fits(g, elem));
                Way::Area(long::Scatter::new(g.payload, m, elem, offsets).share)
            }
            (_, Reduction::Root { .. }) => {
                debug_assert!(area && commutative && elem <= g.payload);
                Way::Area((g.payload / elem) * elem)
            }
        };
        Reducing {
            what,
            way,
            op,
            elem,
            commutative,
            first: 0,
            peers: None,
        }
    }

    pub(super) fn rounds(&self) -> u64 {
        (match (self.way, &self.what) {
            (Way::Area(chunk), &Reduction::All(_, n)) => 2 * n.div_ceil(chunk),
            (Way::Area(chunk), &Reduction::Root { n, .. }) => n.div_ceil(chunk),
            (Way::Area(share), Reduction::Scatter { offsets, .. }) => {
                long::Scatter { offsets, share }.rounds()
            }
            (Way::Single(_), Reduction::All(..)) => {
                return single::allreduce_rounds(self.commutative)
            }
            (Way::Single(_), Reduction::Scatter { .. }) => 2,
            (Way::Single(_), Reduction::Root { .. }) => unreachable!("a reduce through the area"),
        }) as u64
    }

    /// The blocking twin's kind: a reduce's, [`reduce_area`]'s.
    pub(super) fn kind(&self) -> u64 {
        let (k, root) = match (self.way, &self.what) {
            (Way::Area(_), Reduction::All(..)) => (K_ALLREDUCE_AREA, 0),
            (Way::Area(_), Reduction::Scatter { .. }) => (K_REDUCE_SCATTER_AREA, 0),
            (_, &Reduction::Root { root, .. }) => (K_REDUCE_AREA, root),
            (Way::Single(_), Reduction::All(..)) => (K_ALLREDUCE_COPY, 0),
            (Way::Single(_), Reduction::Scatter { .. }) => (K_REDUCE_SCATTER_COPY, 0),
        };
        kind(k, root, self.what.len())
    }

    /// A reduce's chunk of round `s` (its bytes of the buffer), and the
    /// root.
    fn root_chunk(&mut self, s: u64) -> Option<(&mut [u8], usize)> {
        let (Way::Area(chunk), &Reduction::Root { buf, n, root }) = (self.way, &self.what) else {
            return None;
        };
        let at = self.round(s) * chunk;
        let len = chunk.min(n - at);
        // SAFETY: the reduce's bytes at `buf`, the caller's until
        // completion and touched by nobody else meanwhile; written only at
        // the root (`arrived`).
        Some((
            unsafe { std::slice::from_raw_parts_mut(buf.add(at), len) },
            root,
        ))
    }

    /// The round `s` is of this reduction (from 0).
    fn round(&self, s: u64) -> usize {
        (s - self.first) as usize
    }

    /// An allreduce through the area: the bytes of round `s`'s chunk, and
    /// whether the round carries the folded blocks (else the inputs).
    fn chunk_at(&self, s: u64) -> Option<(std::ops::Range<usize>, bool)> {
        let (Way::Area(chunk), &Reduction::All(_, n)) = (self.way, &self.what) else {
            return None;
        };
        let r = self.round(s);
        let at = (r / 2) * chunk;
        Some((at..at + chunk.min(n - at), r % 2 == 1))
    }

    /// [`Reducing::chunk_at`]'s chunk itself.
    fn chunk(&mut self, s: u64) -> Option<(&mut [u8], bool)> {
        let (r, results) = self.chunk_at(s)?;
        let Reduction::All(buf, _) = self.what else {
            unreachable!("an allreduce's chunk")
        };
        // SAFETY: the allreduce's bytes at `buf`, the caller's until
        // completion, and only this request touches them meanwhile.
        let part = unsafe { std::slice::from_raw_parts_mut(buf.add(r.start), r.len()) };
        Some((part, results))
    }

    /// A reduce-scatter's buffers: `send`, and this member's block of
    /// `recv` (`me` of the members).
    fn scatter_bufs(&mut self, me: usize) -> Option<(&[u8], &mut [u8], &[usize])> {
        let Reduction::Scatter {
            send,
            ref offsets,
            recv,
        } = self.what
        else {
            return None;
        };
        let (n, mine) = (self.what.len(), offsets[me + 1] - offsets[me]);
        // SAFETY: `n` bytes at `send` and `mine` at `recv` (either may be
        // null when its length is 0), not overlapping, the caller's until
        // completion.
        Some(unsafe {
            (
                match n {
                    0 => &[][..],
                    n => std::slice::from_raw_parts(send, n),
                },
                match mine {
                    0 => &mut [][..],
                    len => std::slice::from_raw_parts_mut(recv, len),
                },
                offsets,
            )
        })
    }

    /// The length of member `me`'s (of `m`) contribution to round `s`, if
    /// it makes one: a single copy's card in the first round, each round's
    /// pieces through the area (a reduce's root: none).
    pub(super) fn contribution(&self, s: u64, me: usize, m: usize) -> Option<usize> {
        match (self.way, &self.what) {
            (Way::Single(_), _) => (s == self.first).then_some(16),
            (Way::Area(_), Reduction::All(..)) => self.chunk_at(s).map(|(r, _)| r.len()),
            (Way::Area(share), Reduction::Scatter { .. }) => Some(m * share),
            (Way::Area(chunk), &Reduction::Root { n, root, .. }) => {
                (me != root).then(|| chunk.min(n - self.round(s) * chunk))
            }
        }
    }

    /// Writes this member's contribution to round `s` ([`Reducing::contribution`]).
    pub(super) fn write(&mut self, a: &CollArea<'_>, slots: &[usize], me: usize, s: u64) {
        let (elem, r) = (self.elem, self.round(s));
        match self.way {
            Way::Area(share) => {
                if let Some((part, results)) = self.chunk(s) {
                    if results {
                        long::Round::of(a, slots, me, s).write_result(part, elem);
                    } else {
                        long::Round::of(a, slots, me, s).write_inputs(part, elem);
                    }
                } else if let Some((send, _, offsets)) = self.scatter_bufs(me) {
                    let plan = long::Scatter { offsets, share };
                    long::Round::of(a, slots, me, s).scatter_write(&plan, r, send);
                } else if let Some((part, _)) = self.root_chunk(s) {
                    a.write(slots[me], s, part.len(), 0, part);
                }
            }
            Way::Single(_) => {
                let addr = match self.what {
                    Reduction::All(buf, _) | Reduction::Root { buf, .. } => buf as usize,
                    Reduction::Scatter { send, .. } => send as usize,
                };
                let card = single::card([addr as u64, self.what.len() as u64]);
                a.write(slots[me], s, 16, 0, &card[..16]);
            }
        }
    }

    /// The work of round `s`, once every member has published it.
    pub(super) fn arrived(
        &mut self,
        shm: &ShmTransport,
        a: &CollArea<'_>,
        slots: &Arc<[usize]>,
        me: usize,
        s: u64,
    ) -> Result<()> {
        // Its own handle: the buffers below borrow `self` mutably.
        let op = self.op.clone();
        let op = &*op;
        let (elem, c, r) = (self.elem, self.commutative, self.round(s));
        let piece = match self.way {
            Way::Area(share) => {
                if let Some((part, results)) = self.chunk(s) {
                    if results {
                        long::Round::of(a, slots, me, s).read_results(part, elem);
                    } else {
                        long::Round::of(a, slots, me, s).fold_inputs(part, elem, op);
                    }
                } else if let Some((send, recv, offsets)) = self.scatter_bufs(me) {
                    let plan = long::Scatter { offsets, share };
                    long::Round::of(a, slots, me, s).scatter_fold(&plan, r, send, recv, op);
                } else if let Some((acc, root)) = self.root_chunk(s).filter(|c| c.1 == me) {
                    // Commutative: the others' chunks in any order.
                    fold_into_own(a, slots, root, s, acc, op);
                }
                return Ok(());
            }
            Way::Single(piece) => piece,
        };
        let n = self.what.len();
        match (r, &self.what) {
            (0, &Reduction::All(buf, _)) => {
                let peers = single::Peers::published(shm, a, slots, me, s, n, "allreduce")?;
                // SAFETY: `n` bytes at `buf`, the caller's until completion.
                let buf = unsafe { std::slice::from_raw_parts_mut(buf, n) };
                single::allreduce_fold(&peers, buf, elem, op, c, piece)?;
                self.peers = Some(peers);
            }
            (0, Reduction::Scatter { .. }) => {
                let peers = single::Peers::published(shm, a, slots, me, s, n, "reduce-scatter")?;
                let (send, recv, offsets) = self.scatter_bufs(me).expect("a reduce-scatter");
                let mine = offsets[me]..offsets[me + 1];
                single::reduce_scatter_fold(&peers, send, mine, recv, op, c, piece)?;
            }
            (1, &Reduction::All(buf, _)) if !c => {
                let peers = self.peers.as_ref().expect("known since the first round");
                // SAFETY: as above.
                let buf = unsafe { std::slice::from_raw_parts_mut(buf, n) };
                single::allreduce_read_blocks(peers, buf, elem)?;
            }
            _ => {}
        }
        Ok(())
    }
}
