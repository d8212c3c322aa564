//! Collective schedules: what each rank sends and receives, round by round.
//!
//! A collective algorithm is a pure function of (group, my place in it, root)
//! that returns a [`Schedule`]: a list of [`Round`]s, each a set of sends and
//! receives of *block ranges* of one working buffer. The runtime executes a round
//! by posting all its receives, then all its sends, waiting for all of them, and
//! only then applying the reductions in the order the receives are listed. The
//! buffer's partition into blocks is the runtime's business (it knows counts and
//! element sizes); a schedule only names block indices. That split is the point:
//! every algorithm here is checked against a serial evaluation for every group
//! size 1..17 by [`simulate`], with a free (non-commutative) "operation" that
//! records the order of contributions, without starting a process.
//!
//! Peers are given as the members of `group` (ranks of the communicator), so a
//! schedule for a subgroup (the ranks of one host, the leaders of all hosts)
//! composes into a hierarchical one by concatenating rounds.
//!
//! Costs below use the usual model: a message of n bytes costs α + nβ, a
//! reduction costs nγ; p is the group size and lg = ceil(log2 p).

use std::ops::Range;

/// How a received block range is applied to the working buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Apply {
    /// Overwrite the blocks with what arrived.
    Put,
    /// `work = received ⊕ work`: the sender's contributions come from lower ranks.
    ReduceLeft,
    /// `work = work ⊕ received`: the sender's contributions come from higher ranks.
    ReduceRight,
}

/// One transfer of a block range with a peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Xfer {
    /// Rank of the peer in the communicator.
    pub peer: usize,
    /// Blocks of the working buffer sent or received.
    pub blocks: Range<usize>,
    /// For receives: what to do with the data (sends ignore it).
    pub apply: Apply,
}

/// A set of transfers that may proceed concurrently.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Round {
    /// Sends of this round (read the buffer as it was when the round began).
    pub sends: Vec<Xfer>,
    /// Receives of this round; reductions are applied in this order at its end.
    pub recvs: Vec<Xfer>,
}

/// What one rank does in a collective.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Schedule {
    /// The rounds, in order.
    pub rounds: Vec<Round>,
}

impl Schedule {
    fn round(&mut self, sends: Vec<Xfer>, recvs: Vec<Xfer>) {
        if !sends.is_empty() || !recvs.is_empty() {
            self.rounds.push(Round { sends, recvs });
        }
    }

    /// Appends the rounds of `other` (hierarchical composition).
    pub fn then(mut self, other: Schedule) -> Schedule {
        self.rounds.extend(other.rounds);
        self
    }
}

fn x(peer: usize, blocks: Range<usize>, apply: Apply) -> Xfer {
    Xfer {
        peer,
        blocks,
        apply,
    }
}

fn pof2_below(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        1 << (usize::BITS - 1 - n.leading_zeros())
    }
}

/// Largest power of two not above `n` (0 for 0): the block count of
/// [`allreduce_rabenseifner`].
pub fn pof2_floor(n: usize) -> usize {
    pof2_below(n)
}

fn index_of(group: &[usize], me: usize) -> usize {
    group
        .iter()
        .position(|&r| r == me)
        .expect("the calling rank is a member of the group")
}

/// Dissemination barrier: lg rounds of one empty message. Cost lg·α.
pub fn barrier(group: &[usize], me: usize) -> Schedule {
    let (p, i) = (group.len(), index_of(group, me));
    let mut s = Schedule::default();
    let mut d = 1;
    while d < p {
        s.round(
            vec![x(group[(i + d) % p], 0..0, Apply::Put)],
            vec![x(group[(i + p - d) % p], 0..0, Apply::Put)],
        );
        d *= 2;
    }
    s
}

/// Binomial-tree broadcast of blocks `0..nb` from `group[root]`.
/// Cost lg·(α + nβ): best for short messages.
pub fn bcast_binomial(group: &[usize], root: usize, me: usize, nb: usize) -> Schedule {
    let (p, i) = (group.len(), index_of(group, me));
    let v = (i + p - root) % p;
    let real = |v: usize| group[(v + root) % p];
    let mut s = Schedule::default();
    let mut mask = 1;
    while mask < p {
        if v & mask != 0 {
            s.round(vec![], vec![x(real(v - mask), 0..nb, Apply::Put)]);
            break;
        }
        mask <<= 1;
    }
    let mut sends = Vec::new();
    mask >>= 1;
    while mask > 0 {
        if v + mask < p {
            sends.push(x(real(v + mask), 0..nb, Apply::Put));
        }
        mask >>= 1;
    }
    s.round(sends, vec![]);
    s
}

/// Binomial scatter of blocks `0..p` (block b goes to virtual rank b, that is
/// `group[(b + root) % p]`). Cost lg·α + (p-1)/p·nβ.
pub fn scatter_binomial(group: &[usize], root: usize, me: usize) -> Schedule {
    let (p, i) = (group.len(), index_of(group, me));
    let v = (i + p - root) % p;
    let real = |v: usize| group[(v + root) % p];
    let mut s = Schedule::default();
    let mut mask = 1;
    while mask < p {
        if v & mask != 0 {
            s.round(
                vec![],
                vec![x(real(v - mask), v..(v + mask).min(p), Apply::Put)],
            );
            break;
        }
        mask <<= 1;
    }
    let mut sends = Vec::new();
    mask >>= 1;
    while mask > 0 {
        if v + mask < p {
            sends.push(x(
                real(v + mask),
                v + mask..(v + 2 * mask).min(p),
                Apply::Put,
            ));
        }
        mask >>= 1;
    }
    s.round(sends, vec![]);
    s
}

/// Binomial gather of blocks `0..p` to the root (block b from virtual rank b).
/// Cost lg·α + (p-1)/p·nβ.
pub fn gather_binomial(group: &[usize], root: usize, me: usize) -> Schedule {
    let (p, i) = (group.len(), index_of(group, me));
    let v = (i + p - root) % p;
    let real = |v: usize| group[(v + root) % p];
    let mut s = Schedule::default();
    let mut recvs = Vec::new();
    let mut mask = 1;
    while mask < p {
        if v & mask != 0 {
            break;
        }
        if v + mask < p {
            recvs.push(x(
                real(v + mask),
                v + mask..(v + 2 * mask).min(p),
                Apply::Put,
            ));
        }
        mask <<= 1;
    }
    s.round(vec![], recvs);
    if v != 0 {
        s.round(
            vec![x(real(v - mask), v..(v + mask).min(p), Apply::Put)],
            vec![],
        );
    }
    s
}

/// Ring allgather of blocks `0..p` (block b from `group[b]`): p-1 steps.
/// Cost (p-1)·α + (p-1)/p·nβ: bandwidth-optimal, any p.
pub fn allgather_ring(group: &[usize], me: usize) -> Schedule {
    let (p, i) = (group.len(), index_of(group, me));
    let (right, left) = (group[(i + 1) % p], group[(i + p - 1) % p]);
    let mut s = Schedule::default();
    for k in 0..p.saturating_sub(1) {
        let sb = (i + p - k) % p;
        let rb = (i + 2 * p - k - 1) % p;
        s.round(
            vec![x(right, sb..sb + 1, Apply::Put)],
            vec![x(left, rb..rb + 1, Apply::Put)],
        );
    }
    s
}

/// Linear gather: each rank but the root sends block 0 of its own buffer
/// (its contribution alone) to the root, which receives rank r's into its
/// block r (the root's own is already in place). For uneven counts (gatherv).
/// Cost (p-1)·α + nβ at the root.
pub fn gather_linear(group: &[usize], root: usize, me: usize) -> Schedule {
    gather_linear_from(group, root, me, &|_| true)
}

/// [`gather_linear`] of the members `from` names only (by index in
/// `group`; the others' blocks go another way, e.g. through a host's
/// collective area). Every member must be able to tell its own `from`,
/// and the root everyone's.
pub fn gather_linear_from(
    group: &[usize],
    root: usize,
    me: usize,
    from: &dyn Fn(usize) -> bool,
) -> Schedule {
    let (p, i) = (group.len(), index_of(group, me));
    let mut s = Schedule::default();
    if i == root {
        let recvs = (0..p)
            .filter(|&r| r != root && from(r))
            .map(|r| x(group[r], r..r + 1, Apply::Put))
            .collect();
        s.round(vec![], recvs);
    } else if from(i) {
        s.round(vec![x(group[root], 0..1, Apply::Put)], vec![]);
    }
    s
}

/// Linear scatter, the reverse of [`gather_linear`]: the root sends its block
/// r to rank r, which receives it as block 0 of its own buffer.
pub fn scatter_linear(group: &[usize], root: usize, me: usize) -> Schedule {
    scatter_linear_to(group, root, me, &|_| true)
}

/// [`scatter_linear`] to the members `to` names only (as
/// [`gather_linear_from`]).
pub fn scatter_linear_to(
    group: &[usize],
    root: usize,
    me: usize,
    to: &dyn Fn(usize) -> bool,
) -> Schedule {
    let (p, i) = (group.len(), index_of(group, me));
    let mut s = Schedule::default();
    if i == root {
        let sends = (0..p)
            .filter(|&r| r != root && to(r))
            .map(|r| x(group[r], r..r + 1, Apply::Put))
            .collect();
        s.round(sends, vec![]);
    } else if to(i) {
        s.round(vec![], vec![x(group[root], 0..1, Apply::Put)]);
    }
    s
}

/// Inclusive prefix reduction along the ranks, in rank order: rank i
/// combines what rank i-1 passes on (`received ⊕ block 0`) and passes the
/// result to rank i+1. With `exclusive`, block 1 also receives rank i-1's
/// prefix alone (sent twice), which is rank i's exclusive result; the last
/// rank, which passes nothing on, receives that alone (once) and leaves
/// block 0 as it was. Cost (p-1)·(α + nβ) along the chain.
pub fn scan_linear(group: &[usize], me: usize, exclusive: bool) -> Schedule {
    let (p, i) = (group.len(), index_of(group, me));
    let last = |i: usize| i + 1 == p;
    let mut s = Schedule::default();
    if i > 0 {
        let mut recvs = Vec::new();
        if !(exclusive && last(i)) {
            recvs.push(x(group[i - 1], 0..1, Apply::ReduceLeft));
        }
        if exclusive {
            recvs.push(x(group[i - 1], 1..2, Apply::Put));
        }
        s.round(vec![], recvs);
    }
    if !last(i) {
        let copies = if exclusive && !last(i + 1) { 2 } else { 1 };
        s.round(vec![x(group[i + 1], 0..1, Apply::Put); copies], vec![]);
    }
    s
}

/// One round of explicit transfers: block `b` to `peer` for each `(peer, b)`
/// of `sends` and from `peer` for each of `recvs`, posted in the order given
/// (which pairs up repeated messages between two ranks). For neighbourhood
/// collectives. Cost: one α per neighbour, overlapped, plus nβ.
pub fn exchange(sends: &[(usize, usize)], recvs: &[(usize, usize)]) -> Schedule {
    let mut s = Schedule::default();
    s.round(
        sends
            .iter()
            .map(|&(peer, b)| x(peer, b..b + 1, Apply::Put))
            .collect(),
        recvs
            .iter()
            .map(|&(peer, b)| x(peer, b..b + 1, Apply::Put))
            .collect(),
    );
    s
}

/// Pairwise all-to-all over blocks `0..2p`: blocks `0..p` are this rank's
/// outgoing ones (block j for `group[j]`), blocks `p..2p` the incoming ones
/// (block `p + j` from `group[j]`); the caller copies its own block `i` to
/// `p + i`. Round k sends to `i + k` and receives from `i - k`, so each
/// round is one exchange per rank. Cost (p-1)·(α + nβ/p).
pub fn alltoall_pairwise(group: &[usize], me: usize) -> Schedule {
    alltoall_pairwise_some(group, me, &|_, _| true)
}

/// [`alltoall_pairwise`] of the blocks `long(from, to)` names only (by
/// index in `group`; the others go another way, e.g. through a host's
/// collective area). Both ends of a block must be able to tell, and a
/// round with nothing to send or receive is left out.
pub fn alltoall_pairwise_some(
    group: &[usize],
    me: usize,
    long: &dyn Fn(usize, usize) -> bool,
) -> Schedule {
    let (p, i) = (group.len(), index_of(group, me));
    let mut s = Schedule::default();
    for k in 1..p {
        let (to, from) = ((i + k) % p, (i + p - k) % p);
        let sends: Vec<_> = long(i, to)
            .then(|| x(group[to], to..to + 1, Apply::Put))
            .into_iter()
            .collect();
        let recvs: Vec<_> = long(from, i)
            .then(|| x(group[from], p + from..p + from + 1, Apply::Put))
            .into_iter()
            .collect();
        if !sends.is_empty() || !recvs.is_empty() {
            s.round(sends, recvs);
        }
    }
    s
}

/// The blocks of [`alltoall_pairwise_some`] in one round: every send and
/// receive posted at once, to and from the members in the pairwise order.
/// Where ranks share cores, each pairwise round waits for its one peer to
/// be scheduled; one round proceeds with whichever peer runs first
/// (docs/BENCHMARKS.md, session 60).
pub fn alltoall_linear_some(
    group: &[usize],
    me: usize,
    long: &dyn Fn(usize, usize) -> bool,
) -> Schedule {
    let (mut sends, mut recvs) = (Vec::new(), Vec::new());
    for r in alltoall_pairwise_some(group, me, long).rounds {
        sends.extend(r.sends);
        recvs.extend(r.recvs);
    }
    let mut s = Schedule::default();
    s.round(sends, recvs);
    s
}

/// Recursive-doubling allgather of blocks `0..p` (block b from `group[b]`);
/// p must be a power of two. Cost lg·α + (p-1)/p·nβ.
pub fn allgather_rd(group: &[usize], me: usize) -> Schedule {
    let (p, i) = (group.len(), index_of(group, me));
    debug_assert!(p.is_power_of_two());
    let mut s = Schedule::default();
    let mut mask = 1;
    while mask < p {
        let mine = i & !(mask - 1);
        let theirs = (i ^ mask) & !(mask - 1);
        s.round(
            vec![x(group[i ^ mask], mine..mine + mask, Apply::Put)],
            vec![x(group[i ^ mask], theirs..theirs + mask, Apply::Put)],
        );
        mask <<= 1;
    }
    s
}

/// Scatter then ring allgather broadcast (van de Geijn) of blocks `0..p`.
/// Cost (lg + p-1)·α + 2(p-1)/p·nβ: for long messages.
pub fn bcast_scatter_allgather(group: &[usize], root: usize, me: usize) -> Schedule {
    let p = group.len();
    // The allgather runs in virtual-rank order so block v sits at virtual rank v.
    let rotated: Vec<usize> = (0..p).map(|v| group[(v + root) % p]).collect();
    scatter_binomial(group, root, me).then(allgather_ring(&rotated, me))
}

/// Binomial-tree reduction of blocks `0..nb` to `group[root]`; contributions
/// are combined in group order, so a non-commutative operation is fine (the
/// tree is rooted at group index 0 and the result moved to the root).
/// Cost lg·(α + nβ + nγ).
pub fn reduce_binomial(
    group: &[usize],
    root: usize,
    me: usize,
    nb: usize,
    commutative: bool,
) -> Schedule {
    let (p, i) = (group.len(), index_of(group, me));
    let base = if commutative { root } else { 0 };
    let v = (i + p - base) % p;
    let real = |v: usize| group[(v + base) % p];
    let mut s = Schedule::default();
    let mut recvs = Vec::new();
    let mut mask = 1;
    while mask < p {
        if v & mask != 0 {
            break;
        }
        if v + mask < p {
            recvs.push(x(real(v + mask), 0..nb, Apply::ReduceRight));
        }
        mask <<= 1;
    }
    s.round(vec![], recvs);
    if v != 0 {
        s.round(vec![x(real(v - mask), 0..nb, Apply::Put)], vec![]);
    } else if base != root {
        s.round(vec![x(group[root], 0..nb, Apply::Put)], vec![]);
    }
    if i == root && base != root {
        s.round(vec![], vec![x(group[base], 0..nb, Apply::Put)]);
    }
    s
}

/// The fold that makes a group of p a power of two p' for the recursive
/// algorithms: the first 2(p-p') members pair up, the even one hands its data to
/// the odd one and sits out. Returns (p', my new rank or None, new rank -> index).
fn fold(p: usize, i: usize) -> (usize, Option<usize>, impl Fn(usize) -> usize) {
    let pof2 = pof2_below(p);
    let rem = p - pof2;
    let nr = if i < 2 * rem {
        (i % 2 == 1).then_some(i / 2)
    } else {
        Some(i - rem)
    };
    (
        pof2,
        nr,
        move |n: usize| if n < rem { 2 * n + 1 } else { n + rem },
    )
}

/// Recursive-doubling allreduce of blocks `0..nb`, any p (non-powers of two
/// fold first). Order-preserving. Cost (lg+2)·(α + nβ + nγ): short messages.
pub fn allreduce_rd(group: &[usize], me: usize, nb: usize) -> Schedule {
    let (p, i) = (group.len(), index_of(group, me));
    let (pof2, nr, idx) = fold(p, i);
    let rem = p - pof2;
    let mut s = Schedule::default();
    if i < 2 * rem {
        if i % 2 == 0 {
            s.round(vec![x(group[i + 1], 0..nb, Apply::Put)], vec![]);
        } else {
            s.round(vec![], vec![x(group[i - 1], 0..nb, Apply::ReduceLeft)]);
        }
    }
    if let Some(nr) = nr {
        let mut mask = 1;
        while mask < pof2 {
            let pi = idx(nr ^ mask);
            let apply = if pi < i {
                Apply::ReduceLeft
            } else {
                Apply::ReduceRight
            };
            s.round(
                vec![x(group[pi], 0..nb, Apply::Put)],
                vec![x(group[pi], 0..nb, apply)],
            );
            mask <<= 1;
        }
    }
    if i < 2 * rem {
        if i % 2 == 1 {
            s.round(vec![x(group[i - 1], 0..nb, Apply::Put)], vec![]);
        } else {
            s.round(vec![], vec![x(group[i + 1], 0..nb, Apply::Put)]);
        }
    }
    s
}

/// Rabenseifner's allreduce: recursive-halving reduce-scatter, then
/// recursive-doubling allgather, over blocks `0..pof2_floor(p)`. Any p (fold
/// first), order-preserving. Cost 2lg·α + 2nβ + nγ: long messages.
pub fn allreduce_rabenseifner(group: &[usize], me: usize) -> Schedule {
    let (p, i) = (group.len(), index_of(group, me));
    let (pof2, nr, idx) = fold(p, i);
    let rem = p - pof2;
    let nb = pof2;
    let mut s = Schedule::default();
    if i < 2 * rem {
        if i % 2 == 0 {
            s.round(vec![x(group[i + 1], 0..nb, Apply::Put)], vec![]);
        } else {
            s.round(vec![], vec![x(group[i - 1], 0..nb, Apply::ReduceLeft)]);
        }
    }
    if let Some(nr) = nr {
        let mut cur = 0..nb;
        let mut steps = Vec::new();
        let mut mask = 1;
        while mask < pof2 {
            let pi = idx(nr ^ mask);
            let mid = cur.start + (cur.end - cur.start) / 2;
            let (keep, give) = if nr & mask == 0 {
                (cur.start..mid, mid..cur.end)
            } else {
                (mid..cur.end, cur.start..mid)
            };
            let apply = if pi < i {
                Apply::ReduceLeft
            } else {
                Apply::ReduceRight
            };
            s.round(
                vec![x(group[pi], give.clone(), Apply::Put)],
                vec![x(group[pi], keep.clone(), apply)],
            );
            steps.push((pi, keep.clone(), give));
            cur = keep;
            mask <<= 1;
        }
        for (pi, keep, give) in steps.into_iter().rev() {
            s.round(
                vec![x(group[pi], keep, Apply::Put)],
                vec![x(group[pi], give, Apply::Put)],
            );
        }
    }
    if i < 2 * rem {
        if i % 2 == 1 {
            s.round(vec![x(group[i - 1], 0..nb, Apply::Put)], vec![]);
        } else {
            s.round(vec![], vec![x(group[i + 1], 0..nb, Apply::Put)]);
        }
    }
    s
}

/// Ring reduce-scatter of blocks `0..p`: afterwards member i holds block
/// `(i + 1) % p` fully reduced. Commutative operations only.
/// Cost (p-1)·α + (p-1)/p·n(β+γ).
pub fn reduce_scatter_ring(group: &[usize], me: usize) -> Schedule {
    let (p, i) = (group.len(), index_of(group, me));
    let (right, left) = (group[(i + 1) % p], group[(i + p - 1) % p]);
    let mut s = Schedule::default();
    for k in 0..p.saturating_sub(1) {
        let sb = (i + p - k) % p;
        let rb = (i + 2 * p - k - 1) % p;
        s.round(
            vec![x(right, sb..sb + 1, Apply::Put)],
            vec![x(left, rb..rb + 1, Apply::ReduceLeft)],
        );
    }
    s
}

/// Ring allreduce of blocks `0..p`: ring reduce-scatter then ring allgather.
/// Commutative operations only. Cost 2(p-1)·α + 2(p-1)/p·nβ + (p-1)/p·nγ.
pub fn allreduce_ring(group: &[usize], me: usize) -> Schedule {
    let (p, i) = (group.len(), index_of(group, me));
    let (right, left) = (group[(i + 1) % p], group[(i + p - 1) % p]);
    let mut s = reduce_scatter_ring(group, me);
    for k in 0..p.saturating_sub(1) {
        let sb = (i + 1 + p - k) % p;
        let rb = (i + p - k) % p;
        s.round(
            vec![x(right, sb..sb + 1, Apply::Put)],
            vec![x(left, rb..rb + 1, Apply::Put)],
        );
    }
    s
}

/// The ranks of each host, given the host of every member of the group (any
/// labels). Hosts are ordered by their first member; members keep group order.
pub fn hosts_of(group: &[usize], host: impl Fn(usize) -> usize) -> Vec<Vec<usize>> {
    let mut out: Vec<(usize, Vec<usize>)> = Vec::new();
    for &r in group {
        let h = host(r);
        match out.iter_mut().find(|(k, _)| *k == h) {
            Some((_, v)) => v.push(r),
            None => out.push((h, vec![r])),
        }
    }
    out.into_iter().map(|(_, v)| v).collect()
}

/// Two-level allreduce (S-3000 style): binomial reduce to the first rank of
/// each host, `inter` among those leaders, binomial broadcast inside each host.
/// `inter` builds the leaders' schedule (e.g. [`allreduce_rd`]); `nb` is the
/// block count that schedule uses. With one host it is a reduce then a bcast;
/// callers use the plain algorithm then.
pub fn allreduce_hier(
    hosts: &[Vec<usize>],
    me: usize,
    nb: usize,
    commutative: bool,
    inter: impl Fn(&[usize], usize) -> Schedule,
) -> Schedule {
    let local = hosts
        .iter()
        .find(|h| h.contains(&me))
        .expect("the calling rank is on one of the hosts");
    let leaders: Vec<usize> = hosts.iter().map(|h| h[0]).collect();
    let mut s = reduce_binomial(local, 0, me, nb, commutative);
    if local[0] == me {
        s = s.then(inter(&leaders, me));
    }
    s.then(bcast_binomial(local, 0, me, nb))
}

/// Allreduce across two groups (an intercommunicator's, in ranks of the
/// communicator of both): every rank of `local` gets, in blocks `nb..2nb`,
/// the combination of the *other* group's blocks `0..nb`. Binomial
/// reduction to `local[0]`, which sends its group's result to the other
/// group's leader `other` and receives theirs into the second half (a round
/// never receives into blocks it sends), then a binomial broadcast of the
/// second half from `local[0]`. The other group runs the mirror image. Cost
/// 2·lg·(α + nβ) + (α + nβ) + lg·nγ.
pub fn allreduce_inter(
    local: &[usize],
    other: usize,
    me: usize,
    nb: usize,
    commutative: bool,
) -> Schedule {
    let mut s = reduce_binomial(local, 0, me, nb, commutative);
    if local[0] == me {
        s.round(
            vec![x(other, 0..nb, Apply::Put)],
            vec![x(other, nb..2 * nb, Apply::Put)],
        );
    }
    s.then(shifted(bcast_binomial(local, 0, me, nb), nb))
}

/// `s` on blocks `by` further on.
fn shifted(mut s: Schedule, by: usize) -> Schedule {
    for r in &mut s.rounds {
        for t in r.sends.iter_mut().chain(r.recvs.iter_mut()) {
            t.blocks = t.blocks.start + by..t.blocks.end + by;
        }
    }
    s
}

/// Reduction across two groups to `root`, a rank of the other group: the
/// contributing side (`local`, holding `me`) reduces to `local[0]`, which
/// sends to `root`. The root's side is [`recv_from`] `local[0]`.
pub fn reduce_inter(
    local: &[usize],
    root: usize,
    me: usize,
    nb: usize,
    commutative: bool,
) -> Schedule {
    let mut s = reduce_binomial(local, 0, me, nb, commutative);
    if local[0] == me {
        s.round(vec![x(root, 0..nb, Apply::Put)], vec![]);
    }
    s
}

/// One receive of blocks `0..nb` from `peer`, replacing them.
pub fn recv_from(peer: usize, nb: usize) -> Schedule {
    let mut s = Schedule::default();
    s.round(vec![], vec![x(peer, 0..nb, Apply::Put)]);
    s
}

/// Two-level broadcast: binomial
/// among the leaders (the root stands in for its host's leader), then binomial
/// inside each host from its leader.
pub fn bcast_hier(hosts: &[Vec<usize>], root: usize, me: usize, nb: usize) -> Schedule {
    let leader_of = |h: &Vec<usize>| if h.contains(&root) { root } else { h[0] };
    let leaders: Vec<usize> = hosts.iter().map(leader_of).collect();
    let local = hosts
        .iter()
        .find(|h| h.contains(&me))
        .expect("the calling rank is on one of the hosts");
    let my_leader = leader_of(local);
    let mut s = Schedule::default();
    if me == my_leader {
        let ri = leaders.iter().position(|&l| l == root).expect("root leads");
        s = bcast_binomial(&leaders, ri, me, nb);
    }
    let li = local.iter().position(|&r| r == my_leader).expect("leader");
    s.then(bcast_binomial(local, li, me, nb))
}

/// Two-level barrier: gather-style arrival inside each host (empty reduce to
/// the leader), dissemination among leaders, release inside each host.
pub fn barrier_hier(hosts: &[Vec<usize>], me: usize) -> Schedule {
    allreduce_hier(hosts, me, 0, true, barrier)
}

/// Result of [`simulate`]: every rank's blocks at the end. A block's value is
/// the sequence of contributions (ranks) it combines, in order.
pub type SimBlocks = Vec<Vec<Vec<usize>>>;

/// Runs the schedules of every rank of a communicator of `n` ranks against each
/// other, with per-pair FIFO channels and a free operation (concatenation of
/// contribution lists, so order errors show). `init[r]` is rank r's starting
/// blocks. Returns the final blocks, or why it stalled or misbehaved.
pub fn simulate(scheds: &[Schedule], init: SimBlocks) -> Result<SimBlocks, String> {
    let n = scheds.len();
    let mut work = init;
    let mut pos = vec![0usize; n];
    let mut posted = vec![false; n];
    // chan[from][to]: FIFO of (blocks, data)
    type Msg = (Range<usize>, Vec<Vec<usize>>);
    let mut chan: Vec<Vec<std::collections::VecDeque<Msg>>> =
        vec![vec![std::collections::VecDeque::new(); n]; n];
    loop {
        let mut moved = false;
        for r in 0..n {
            let Some(round) = scheds[r].rounds.get(pos[r]) else {
                continue;
            };
            if !posted[r] {
                for s in &round.sends {
                    for rv in &round.recvs {
                        if rv.apply == Apply::Put
                            && rv.blocks.start < s.blocks.end
                            && s.blocks.start < rv.blocks.end
                        {
                            return Err(format!(
                                "rank {r} round {}: receives into blocks it sends",
                                pos[r]
                            ));
                        }
                    }
                    if s.peer >= n || s.blocks.end > work[r].len() {
                        return Err(format!("rank {r}: bad send {s:?}"));
                    }
                    let data = work[r][s.blocks.clone()].to_vec();
                    chan[r][s.peer].push_back((s.blocks.clone(), data));
                }
                posted[r] = true;
                moved = true;
            }
            // All receives must be there (per-peer order within the round).
            let mut need = vec![0usize; n];
            let ready = round.recvs.iter().all(|rv| {
                need[rv.peer] += 1;
                chan[rv.peer][r].len() >= need[rv.peer]
            });
            if !ready {
                continue;
            }
            for rv in &round.recvs {
                let (blocks, data) = chan[rv.peer][r].pop_front().expect("ready");
                if blocks.len() != rv.blocks.len() {
                    return Err(format!(
                        "rank {r} expects blocks {:?} from {}, gets {blocks:?}",
                        rv.blocks, rv.peer
                    ));
                }
                for (k, b) in rv.blocks.clone().enumerate() {
                    let cur = &mut work[r][b];
                    match rv.apply {
                        Apply::Put => *cur = data[k].clone(),
                        Apply::ReduceLeft => {
                            let mut v = data[k].clone();
                            v.extend_from_slice(cur);
                            *cur = v;
                        }
                        Apply::ReduceRight => cur.extend_from_slice(&data[k]),
                    }
                }
            }
            pos[r] += 1;
            posted[r] = false;
            moved = true;
        }
        if (0..n).all(|r| pos[r] == scheds[r].rounds.len()) {
            if let Some((a, b)) = (0..n)
                .flat_map(|a| (0..n).map(move |b| (a, b)))
                .find(|&(a, b)| !chan[a][b].is_empty())
            {
                return Err(format!("message from {a} to {b} never received"));
            }
            return Ok(work);
        }
        if !moved {
            return Err(format!("deadlock at rounds {pos:?}"));
        }
    }
}

// Tests index ranks by number on purpose (rank r's state), and tables of
// algorithms are clearer spelled out than behind type aliases.
#[cfg(test)]
#[allow(clippy::needless_range_loop, clippy::type_complexity)]
mod tests {
    use super::*;

    fn world(n: usize) -> Vec<usize> {
        (0..n).collect()
    }

    fn serial(n: usize) -> Vec<usize> {
        (0..n).collect()
    }

    #[test]
    fn barrier_completes_for_every_p() {
        for n in 1..=17 {
            let g = world(n);
            let sc: Vec<_> = (0..n).map(|r| barrier(&g, r)).collect();
            simulate(&sc, vec![vec![]; n]).unwrap();
        }
    }

    #[test]
    fn allreduce_algorithms_match_serial_in_rank_order() {
        for n in 1..=17 {
            let g = world(n);
            let algos: Vec<(&str, usize, Box<dyn Fn(usize) -> Schedule>, bool)> = vec![
                ("rd", 3, Box::new(|r| allreduce_rd(&g, r, 3)), true),
                (
                    "rabenseifner",
                    pof2_floor(n),
                    Box::new(|r| allreduce_rabenseifner(&g, r)),
                    true,
                ),
                ("ring", n, Box::new(|r| allreduce_ring(&g, r)), false),
            ];
            for (name, nb, f, ordered) in algos {
                let sc: Vec<_> = (0..n).map(&f).collect();
                let init = (0..n).map(|r| vec![vec![r]; nb]).collect();
                let out = simulate(&sc, init).unwrap_or_else(|e| panic!("{name} p={n}: {e}"));
                for (r, blocks) in out.iter().enumerate() {
                    for b in blocks {
                        let mut got = b.clone();
                        if !ordered {
                            got.sort();
                        }
                        assert_eq!(got, serial(n), "{name} p={n} rank {r}");
                    }
                }
            }
        }
    }

    #[test]
    fn reduce_and_bcast_for_every_root() {
        for n in 1..=17 {
            let g = world(n);
            for root in 0..n {
                for comm in [false, true] {
                    let sc: Vec<_> = (0..n)
                        .map(|r| reduce_binomial(&g, root, r, 2, comm))
                        .collect();
                    let init = (0..n).map(|r| vec![vec![r]; 2]).collect();
                    let out = simulate(&sc, init).unwrap();
                    let mut got = out[root][0].clone();
                    if comm {
                        got.sort();
                    }
                    assert_eq!(got, serial(n), "reduce p={n} root={root}");
                }
                let bin: Vec<_> = (0..n).map(|r| bcast_binomial(&g, root, r, 1)).collect();
                let sag: Vec<_> = (0..n)
                    .map(|r| bcast_scatter_allgather(&g, root, r))
                    .collect();
                for (sc, nb) in [(bin, 1), (sag, n)] {
                    let init = (0..n)
                        .map(|r| vec![if r == root { vec![100] } else { vec![] }; nb])
                        .collect();
                    let out = simulate(&sc, init).unwrap();
                    for blocks in out {
                        assert!(blocks.iter().all(|b| b == &vec![100]), "bcast p={n}");
                    }
                }
            }
        }
    }

    #[test]
    fn linear_gather_scatter_and_scans() {
        for n in 1..=17 {
            let g = world(n);
            for root in [0, n / 2, n - 1] {
                let sc: Vec<_> = (0..n).map(|r| gather_linear(&g, root, r)).collect();
                // The root's buffer has n blocks (its own at `root`); the
                // others' have one, their contribution.
                let init = (0..n)
                    .map(|r| {
                        if r == root {
                            (0..n)
                                .map(|b| if b == r { vec![r] } else { vec![] })
                                .collect()
                        } else {
                            vec![vec![r]]
                        }
                    })
                    .collect();
                let out = simulate(&sc, init).unwrap();
                for b in 0..n {
                    assert_eq!(out[root][b], vec![b], "gather_linear p={n}");
                }
                let sc: Vec<_> = (0..n).map(|r| scatter_linear(&g, root, r)).collect();
                let init = (0..n)
                    .map(|r| {
                        if r == root {
                            (0..n).map(|b| vec![b]).collect()
                        } else {
                            vec![vec![]]
                        }
                    })
                    .collect();
                let out = simulate(&sc, init).unwrap();
                for (r, blocks) in out.iter().enumerate() {
                    let b = if r == root { r } else { 0 };
                    assert_eq!(blocks[b], vec![r], "scatter_linear p={n}");
                }
            }
            // Only some members by message (the others' blocks go another
            // way): exactly those arrive, and nobody waits for the rest.
            for root in [0, n - 1] {
                let some = |r: usize| r % 3 != 1;
                let sc: Vec<_> = (0..n)
                    .map(|r| gather_linear_from(&g, root, r, &some))
                    .collect();
                let init = (0..n)
                    .map(|r| {
                        if r == root {
                            (0..n)
                                .map(|b| if b == r { vec![r] } else { vec![] })
                                .collect()
                        } else {
                            vec![vec![r]]
                        }
                    })
                    .collect();
                let out = simulate(&sc, init).unwrap();
                for b in 0..n {
                    let want = if b == root || some(b) {
                        vec![b]
                    } else {
                        vec![]
                    };
                    assert_eq!(out[root][b], want, "gather_linear_from p={n}");
                }
                let sc: Vec<_> = (0..n)
                    .map(|r| scatter_linear_to(&g, root, r, &some))
                    .collect();
                let init = (0..n)
                    .map(|r| {
                        if r == root {
                            (0..n).map(|b| vec![b]).collect()
                        } else {
                            vec![vec![]]
                        }
                    })
                    .collect();
                let out = simulate(&sc, init).unwrap();
                for (r, blocks) in out.iter().enumerate().filter(|&(r, _)| r != root) {
                    let want = if some(r) { vec![r] } else { vec![] };
                    assert_eq!(blocks[0], want, "scatter_linear_to p={n}");
                }
            }
            for exclusive in [false, true] {
                let sc: Vec<_> = (0..n).map(|r| scan_linear(&g, r, exclusive)).collect();
                let init = (0..n).map(|r| vec![vec![r], vec![]]).collect();
                let out = simulate(&sc, init).unwrap();
                for (r, blocks) in out.iter().enumerate() {
                    // The last rank of an exclusive scan keeps its own part.
                    let own = exclusive && r + 1 == n && r > 0;
                    let want: Vec<_> = if own { vec![r] } else { (0..=r).collect() };
                    assert_eq!(blocks[0], want, "scan p={n}");
                    if exclusive && r > 0 {
                        assert_eq!(blocks[1], (0..r).collect::<Vec<_>>(), "exscan p={n}");
                    }
                }
            }
        }
    }

    #[test]
    fn exchange_pairs_repeated_neighbours_in_order() {
        // A periodic ring (a 1-d Cartesian grid) of n ranks, n = 1 and 2
        // making a rank its own or its only neighbour on both sides. Block 0
        // goes to the source side, block 1 to the dest side; slot 2 receives
        // from the source, slot 3 from the dest. Sends list the dest side
        // first, receives the source side first, so that the k-th message
        // between two ranks is the k-th each expects.
        for n in 1..=6 {
            let sc: Vec<_> = (0..n)
                .map(|i| {
                    let (src, dst) = ((i + n - 1) % n, (i + 1) % n);
                    exchange(&[(dst, 1), (src, 0)], &[(src, 2), (dst, 3)])
                })
                .collect();
            let init = (0..n)
                .map(|r| vec![vec![r * 10], vec![r * 10 + 1], vec![], vec![]])
                .collect();
            let out = simulate(&sc, init).unwrap();
            for (i, blocks) in out.iter().enumerate() {
                let (src, dst) = ((i + n - 1) % n, (i + 1) % n);
                assert_eq!(
                    blocks[2],
                    vec![src * 10 + 1],
                    "n={n}: rank {i} from its source"
                );
                assert_eq!(blocks[3], vec![dst * 10], "n={n}: rank {i} from its dest");
            }
        }
    }

    #[test]
    fn alltoall_pairwise_delivers_every_block() {
        for n in 1..=17 {
            let g = world(n);
            let sc: Vec<_> = (0..n).map(|r| alltoall_pairwise(&g, r)).collect();
            // Rank r's outgoing block j holds [r, j] (from r, for j); its own
            // block is copied in by the caller, as kumi does.
            let init = (0..n)
                .map(|r| {
                    (0..2 * n)
                        .map(|b| match b {
                            b if b < n => vec![r, b],
                            b if b - n == r => vec![r, r],
                            _ => vec![],
                        })
                        .collect()
                })
                .collect();
            let out = simulate(&sc, init).unwrap();
            for (r, blocks) in out.iter().enumerate() {
                for j in 0..n {
                    assert_eq!(blocks[n + j], vec![j, r], "alltoall p={n}: {r} from {j}");
                }
            }
            assert!(sc.iter().all(|s| s.rounds.len() == n - 1));
            // Only some blocks by message: exactly those arrive.
            let long = |f: usize, t: usize| (f * 7 + t * 3).is_multiple_of(4);
            let some: [fn(&[usize], usize, &dyn Fn(usize, usize) -> bool) -> Schedule; 2] =
                [alltoall_pairwise_some, alltoall_linear_some];
            for (way, schedule) in some.into_iter().enumerate() {
                let sc: Vec<_> = (0..n).map(|r| schedule(&g, r, &long)).collect();
                let init = (0..n)
                    .map(|r| {
                        (0..2 * n)
                            .map(|b| if b < n { vec![r, b] } else { vec![] })
                            .collect()
                    })
                    .collect();
                let out = simulate(&sc, init).unwrap();
                for (r, blocks) in out.iter().enumerate() {
                    for j in (0..n).filter(|&j| j != r) {
                        let want = if long(j, r) { vec![j, r] } else { vec![] };
                        assert_eq!(blocks[n + j], want, "way {way}, p={n}: {r} from {j}");
                    }
                }
                // The linear form moves everything in one round.
                if way == 1 {
                    assert!(sc.iter().all(|s| s.rounds.len() <= 1));
                }
            }
        }
    }

    #[test]
    fn gather_scatter_allgather_place_blocks() {
        for n in 1..=17 {
            let g = world(n);
            for root in 0..n {
                // Gather: virtual rank v contributes block v.
                let sc: Vec<_> = (0..n).map(|r| gather_binomial(&g, root, r)).collect();
                let init = (0..n)
                    .map(|r| {
                        let v = (r + n - root) % n;
                        (0..n)
                            .map(|b| if b == v { vec![r] } else { vec![] })
                            .collect()
                    })
                    .collect();
                let out = simulate(&sc, init).unwrap();
                for v in 0..n {
                    assert_eq!(out[root][v], vec![(v + root) % n], "gather p={n}");
                }
                let sc: Vec<_> = (0..n).map(|r| scatter_binomial(&g, root, r)).collect();
                let init = (0..n)
                    .map(|r| {
                        (0..n)
                            .map(|b| if r == root { vec![b] } else { vec![] })
                            .collect()
                    })
                    .collect();
                let out = simulate(&sc, init).unwrap();
                for (r, blocks) in out.iter().enumerate() {
                    let v = (r + n - root) % n;
                    assert_eq!(blocks[v], vec![v], "scatter p={n}");
                }
            }
            let mut algos: Vec<Box<dyn Fn(usize) -> Schedule>> =
                vec![Box::new(|r| allgather_ring(&g, r))];
            if n.is_power_of_two() {
                algos.push(Box::new(|r| allgather_rd(&g, r)));
            }
            for f in algos {
                let sc: Vec<_> = (0..n).map(f).collect();
                let init = (0..n)
                    .map(|r| {
                        (0..n)
                            .map(|b| if b == r { vec![r] } else { vec![] })
                            .collect()
                    })
                    .collect();
                for blocks in simulate(&sc, init).unwrap() {
                    for (b, v) in blocks.iter().enumerate() {
                        assert_eq!(v, &vec![b]);
                    }
                }
            }
        }
    }

    #[test]
    fn reduce_scatter_ring_leaves_block_i_plus_1() {
        for n in 1..=17 {
            let g = world(n);
            let sc: Vec<_> = (0..n).map(|r| reduce_scatter_ring(&g, r)).collect();
            let init = (0..n).map(|r| vec![vec![r]; n]).collect();
            let out = simulate(&sc, init).unwrap();
            for (r, blocks) in out.iter().enumerate() {
                let mut got = blocks[(r + 1) % n].clone();
                got.sort();
                assert_eq!(got, serial(n));
            }
        }
    }

    /// Host maps: uneven, interleaved, one rank per host, all on one.
    fn host_maps(n: usize) -> Vec<Vec<usize>> {
        vec![
            (0..n).map(|r| r * 3 / n.max(1)).collect(),
            (0..n).map(|r| r % 2).collect(),
            (0..n).collect(),
            vec![0; n],
            (0..n).map(|r| if r < 1 { 0 } else { 1 + r % 3 }).collect(),
        ]
    }

    #[test]
    fn hierarchical_schedules_for_arbitrary_host_maps() {
        for n in 1..=17 {
            let g = world(n);
            for map in host_maps(n) {
                let hosts = hosts_of(&g, |r| map[r]);
                let sc: Vec<_> = (0..n)
                    .map(|r| allreduce_hier(&hosts, r, 2, true, |l, me| allreduce_rd(l, me, 2)))
                    .collect();
                let init = (0..n).map(|r| vec![vec![r]; 2]).collect();
                for blocks in simulate(&sc, init).unwrap() {
                    for b in blocks {
                        let mut b = b.clone();
                        b.sort();
                        assert_eq!(b, serial(n), "hier allreduce p={n} map={map:?}");
                    }
                }
                let sc: Vec<_> = (0..n).map(|r| barrier_hier(&hosts, r)).collect();
                simulate(&sc, vec![vec![]; n]).unwrap();
                for root in 0..n {
                    let sc: Vec<_> = (0..n).map(|r| bcast_hier(&hosts, root, r, 1)).collect();
                    let init = (0..n)
                        .map(|r| vec![if r == root { vec![7] } else { vec![] }])
                        .collect();
                    for blocks in simulate(&sc, init).unwrap() {
                        assert_eq!(blocks[0], vec![7], "hier bcast p={n} root={root}");
                    }
                }
            }
        }
    }

    #[test]
    fn hierarchical_allreduce_keeps_rank_order_when_hosts_are_contiguous() {
        for n in 1..=17 {
            let g = world(n);
            let map: Vec<usize> = (0..n).map(|r| r * 3 / n).collect();
            let hosts = hosts_of(&g, |r| map[r]);
            let sc: Vec<_> = (0..n)
                .map(|r| allreduce_hier(&hosts, r, 1, false, |l, me| allreduce_rd(l, me, 1)))
                .collect();
            let init = (0..n).map(|r| vec![vec![r]]).collect();
            for blocks in simulate(&sc, init).unwrap() {
                assert_eq!(blocks[0], serial(n));
            }
        }
    }

    /// Both groups of every split of 1..=9 ranks into two, in either
    /// order: each rank ends with the other group's contributions, in rank
    /// order (non-commutative), and the root of a reduction across with
    /// them; the root's group mates with nothing.
    #[test]
    fn intercommunicator_reductions_combine_the_other_group() {
        for n in 2..=9 {
            for split in 1..n {
                for first_low in [true, false] {
                    let (a, b): (Vec<usize>, Vec<usize>) = if first_low {
                        ((0..split).collect(), (split..n).collect())
                    } else {
                        ((n - split..n).collect(), (0..n - split).collect())
                    };
                    let group = |r: usize| if a.contains(&r) { (&a, &b) } else { (&b, &a) };
                    let sc: Vec<_> = (0..n)
                        .map(|r| {
                            let (mine, other) = group(r);
                            allreduce_inter(mine, other[0], r, 1, false)
                        })
                        .collect();
                    let init = (0..n).map(|r| vec![vec![r], vec![]]).collect();
                    for (r, blocks) in simulate(&sc, init).unwrap().into_iter().enumerate() {
                        assert_eq!(&blocks[1], group(r).1, "n {n} split {split} rank {r}");
                    }
                    // A reduction to b's last rank: a contributes.
                    let root = *b.last().unwrap();
                    let sc: Vec<_> = (0..n)
                        .map(|r| match r {
                            _ if a.contains(&r) => reduce_inter(&a, root, r, 1, false),
                            _ if r == root => recv_from(a[0], 1),
                            _ => Schedule::default(),
                        })
                        .collect();
                    let init = (0..n).map(|r| vec![vec![r]]).collect();
                    let out = simulate(&sc, init).unwrap();
                    assert_eq!(out[root][0], a, "n {n} split {split}");
                }
            }
        }
    }

    #[test]
    fn simulator_catches_a_deadlock() {
        // Both ranks wait for the other first.
        let a = Schedule {
            rounds: vec![Round {
                sends: vec![],
                recvs: vec![x(1, 0..1, Apply::Put)],
            }],
        };
        let b = Schedule {
            rounds: vec![Round {
                sends: vec![],
                recvs: vec![x(0, 0..1, Apply::Put)],
            }],
        };
        assert!(simulate(&[a, b], vec![vec![vec![]]; 2]).is_err());
    }
}
