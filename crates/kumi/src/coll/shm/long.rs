//! Collectives longer than a payload half inside one host: which way they
//! go (single copy or the area in chunks), the per-group trial that
//! decides it under `auto`, and the chunked area paths themselves.

use super::*;

/// Where a group's `LongCopy::Auto` trial stands.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Long {
    /// Long calls `0..TRIAL_CALLS` of the group: one each way untimed (they
    /// pay for first touches: scratch buffers, the area's payload pages),
    /// then the two ways alternately, timed. `best`: the fastest seconds per
    /// byte each way so far (single copy, area).
    Trial {
        call: u8,
        best: [f64; 2],
    },
    Single,
    Area,
}

/// Long calls a group's trial takes: two untimed, then [`TRIAL_TIMED`]
/// timed each way.
const TRIAL_CALLS: u8 = 2 + 2 * TRIAL_TIMED;

/// Timed calls each way in a trial. One was not enough: a single copy's
/// second call can still be warming up and lose to the area it later beats
/// (docs/BENCHMARKS.md, session 16). The fastest of three each way is past
/// the warm-up and the machine's hiccups.
const TRIAL_TIMED: u8 = 3;

/// How much faster than single copy the area must be in a trial to be
/// kept: the area's copies across cores slow down three- to fourfold for
/// minutes at a time on some machines, where single copy does not, and a
/// trial sees one moment; single copy, kept where the area was a little
/// faster, costs little then (measured: docs/BENCHMARKS.md, session 56).
const AREA_MARGIN: f64 = 0.5;

impl Long {
    pub(super) const TRIAL: Long = Long::Trial {
        call: 0,
        best: [f64::INFINITY; 2],
    };
}

/// Whether [`allreduce_area`] can run on `g` with elements of `elem` bytes:
/// a chunk holds at least one element per member in a payload half.
pub(crate) fn area_fits(g: &Group, elem: usize) -> bool {
    elem > 0 && g.slots.len() * elem <= g.payload
}

/// A commutative allreduce longer than a payload half, by single copy or
/// through the area as `KUMI_COLL_ALLREDUCE_COPY` says (`auto`: [`tried`];
/// through the area whenever single copy is off). Why a trial: which is
/// faster depends on the machine, on how long its kernel takes to pin pages
/// against how fast its `memcpy` is (docs/BENCHMARKS.md, sessions 6 and 11).
pub(crate) fn allreduce_long(
    e: &mut Guard<'_>,
    g: &mut Group,
    buf: &mut [u8],
    elem: usize,
    op: &Combine<'_>,
    info: WaitInfo,
) -> Result<()> {
    let n = buf.len();
    let mut run = |e: &mut Guard<'_>, g: &mut Group, area: bool| {
        if area {
            allreduce_area(e, g, buf, elem, op, info)
        } else {
            allreduce_single_copy(e, g, buf, elem, op, true, info)
        }
    };
    let cfg = e.svc.coll.config();
    match (cfg.allreduce_copy, cfg.single_copy) {
        (LongCopy::Auto, true) => tried(e, g, |g| &mut g.long, n, Whose::Last, info, run),
        (LongCopy::Single, true) => run(e, g, false),
        _ => run(e, g, true),
    }
}

/// How a reduction longer than a payload half goes where the area can
/// take it (`area_ok`) and its trial is not the one under way: a
/// nonblocking allreduce ([`Reducing`]; the blocking one times both ways,
/// [`allreduce_long`]) and a reduce-scatter, blocking or not. `Some(true)`
/// through the area in chunks, `Some(false)` by single copy, `None` by
/// messages (single copy off, and the area cannot take it). They follow
/// `KUMI_COLL_ALLREDUCE_COPY` and, under `auto`, the outcome of the
/// group's allreduce trial (the same trade of page pinning against copies
/// on this machine), through the area until it has one (measured:
/// docs/BENCHMARKS.md, session 44). Every member decides alike: the
/// trial's state is the group's.
fn long_area(e: &Engine, g: &Group, area_ok: bool) -> Option<bool> {
    let cfg = e.svc.coll.config();
    if !area_ok {
        return cfg.single_copy.then_some(false);
    }
    Some(match (cfg.allreduce_copy, cfg.single_copy) {
        (LongCopy::Single, true) => false,
        (LongCopy::Auto, true) => g.long != Long::Single,
        _ => true,
    })
}

/// Whether a blocking allreduce or reduce of `n` bytes in `g` goes the long
/// way ([`allreduce_long`], [`reduce_long`]: by single copy, or through the
/// area in chunks where the group's trial found it twice as fast) rather
/// than through the area in one piece: where longer than a payload half,
/// and from `KUMI_COLL_COPY_MIN` where the host chose single copy. Every
/// member decides alike.
pub(crate) fn long_reduction(e: &Engine, g: &Group, n: usize) -> bool {
    n > g.payload || vector_by_copy(e, n)
}

/// Whether an allgather(v) whose longest block is `longest` bytes goes by
/// single copy: where the host allows it, from
/// `KUMI_COLL_ALLGATHER_COPY_MIN`, with a core per member (measured:
/// docs/BENCHMARKS.md, session 54; with more members than cores each makes
/// a read of every other's block, and the area was as fast or faster:
/// session 57). Every member knows every length, so all decide alike.
pub(crate) fn allgather_by_copy(e: &Engine, longest: usize) -> bool {
    let cfg = e.svc.coll.config();
    cfg.single_copy && !e.oversubscribed() && longest >= cfg.allgather_copy_min
}

/// Whether a vector of `n` bytes that every member holds (a reduction's;
/// a scan's as [`scan_by_copy`] says) goes by single copy rather than
/// through the area in one piece: where the host allows it, from
/// `KUMI_COLL_COPY_MIN`. Every member decides alike.
pub(crate) fn vector_by_copy(e: &Engine, n: usize) -> bool {
    let cfg = e.svc.coll.config();
    cfg.single_copy && n > 0 && n >= cfg.copy_min
}

/// Whether a scan's or an exscan's vector of `n` bytes goes by single copy:
/// as [`vector_by_copy`], with a core per member. With more members than
/// cores a chain of p reads waits on ranks that share a core, and the area
/// was the faster way but where copies across cores slow down at 2 ranks a
/// core (measured: docs/BENCHMARKS.md, session 57). Every member decides
/// alike.
pub(crate) fn scan_by_copy(e: &Engine, n: usize) -> bool {
    vector_by_copy(e, n) && !e.oversubscribed()
}

/// Whether an alltoall of `block` bytes a member goes by single copy in
/// `g`: from [`alltoall_copy_min`] where the host allows it, and the
/// addresses (16 bytes a member) fit a payload half.
pub(crate) fn alltoall_by_copy(e: &Engine, g: &Group, block: usize) -> bool {
    let cfg = e.svc.coll.config();
    cfg.single_copy && block >= alltoall_copy_min(e) && 16 * g.slots.len() <= g.payload
}

/// The shortest block of an alltoall(v) that goes by single copy where
/// the host allows it: `KUMI_COLL_ALLTOALL_COPY_MIN` with a core per
/// member; with more members than cores no shorter than
/// `KUMI_COLL_COPY_MIN`, where 16 KiB blocks by single copy were 1.2-3x
/// slower than through the area (docs/BENCHMARKS.md, session 59). Every
/// member decides alike.
pub(crate) fn alltoall_copy_min(e: &Engine) -> usize {
    let cfg = e.svc.coll.config();
    match e.oversubscribed() {
        true => cfg.alltoall_copy_min.max(cfg.copy_min),
        false => cfg.alltoall_copy_min,
    }
}

/// Whether a broadcast of `n` bytes that fits a payload half goes by
/// single copy in `g` (else through the area): from
/// `KUMI_COLL_COPY_MIN`, where the host allows single copy and
/// `KUMI_COLL_BCAST_COPY` does too (`auto`: with a core per member;
/// measured: docs/BENCHMARKS.md, session 55). Every member decides alike.
pub(crate) fn short_bcast_by_copy(e: &Engine, g: &Group, n: usize) -> bool {
    let cfg = e.svc.coll.config();
    (cfg.copy_min..=g.payload).contains(&n)
        && cfg.single_copy
        && match cfg.bcast_copy {
            LongCopy::Single => true,
            LongCopy::Auto => !e.oversubscribed(),
            LongCopy::Area => false,
        }
}

/// Whether a nonblocking broadcast of `n` bytes goes by single copy in
/// `g` (else through the area in rounds): a short one as the blocking one
/// ([`short_bcast_by_copy`]); a longer one where the host allows single
/// copy and `KUMI_COLL_BCAST_COPY` says so, under `auto` with a core per
/// member unless the group's trial of the blocking broadcast
/// ([`bcast_long`]) found the area faster (the host's own measurement
/// chose single copy already). Every member decides alike.
pub(crate) fn ibcast_by_copy(e: &Engine, g: &Group, n: usize) -> bool {
    let cfg = e.svc.coll.config();
    if n <= g.payload {
        return short_bcast_by_copy(e, g, n);
    }
    cfg.single_copy
        && match cfg.bcast_copy {
            LongCopy::Single => true,
            LongCopy::Auto => !e.oversubscribed() && g.long_bcast != Long::Area,
            LongCopy::Area => false,
        }
}

/// How a nonblocking allreduce by `op` longer than `g`'s payload half goes
/// ([`long_area`]): `Some(true)` through the area in chunks, `Some(false)`
/// by single copy, `None` by messages.
pub(crate) fn iallreduce_way<T: bytemuck::Pod>(e: &Engine, g: &Group, op: &Op<T>) -> Option<bool> {
    long_area(e, g, op.commutative && area_fits(g, op.unit_bytes()))
}

/// Whether a nonblocking reduce by `op` longer than `g`'s payload half goes
/// through the area in chunks (`Reduction::Root`), as the blocking one does
/// where [`reduce_long`] chooses [`reduce_area`]: a commutative operation,
/// and single copy off or not the group's reduce trial's choice (through
/// the area until the trial has one). Otherwise by messages: there is no
/// nonblocking reduce by single copy. Every member decides alike.
pub(crate) fn ireduce_in_area<T: bytemuck::Pod>(e: &Engine, g: &Group, op: &Op<T>) -> bool {
    let cfg = e.svc.coll.config();
    op.commutative
        && op.unit_bytes() <= g.payload
        && match (cfg.allreduce_copy, cfg.single_copy) {
            (LongCopy::Single, true) => false,
            (LongCopy::Auto, true) => g.long_reduce != Long::Single,
            _ => true,
        }
}

/// How a blocking reduce-scatter of `n` bytes (all of them, from every
/// member) goes inside `g`: where longer than a payload half as
/// [`long_area`] says, `Some(true)` through the area in rounds,
/// `Some(false)` by single copy, `None` by messages; a shorter one by
/// single copy from `KUMI_COLL_COPY_MIN` where the host chose it, else
/// (`None`) through the area in one piece (`reduce_scatter`).
pub(crate) fn reduce_scatter_way<T: bytemuck::Pod>(
    e: &Engine,
    g: &Group,
    n: usize,
    op: &Op<T>,
) -> Option<bool> {
    if n <= g.payload {
        return vector_by_copy(e, n).then_some(false);
    }
    long_area(e, g, area_fits(g, op.unit_bytes()))
}

/// How a nonblocking reduce-scatter of `n` bytes goes inside `g`: as
/// [`reduce_scatter_way`] says where longer than a payload half, a shorter
/// one through the area in rounds (one, mostly) where its elements fit.
pub(crate) fn ireduce_scatter_way<T: bytemuck::Pod>(
    e: &Engine,
    g: &Group,
    n: usize,
    op: &Op<T>,
) -> Option<bool> {
    match n > g.payload {
        true => reduce_scatter_way(e, g, n, op),
        false => area_fits(g, op.unit_bytes()).then_some(true),
    }
}

/// Reduce-scatter of `send` (blocks at byte `offsets`, one per member)
/// through the area, for one longer than a payload half: in rounds, each
/// member writes a member's share of a payload half of every other
/// member's block into its half ([`Round::scatter_write`]) and folds the
/// pieces of its own block from every half, in rank order, into `recv`
/// ([`Round::scatter_fold`]); one collective number a round, as many rounds
/// as the longest block needs (`area_fits` must hold for `elem`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn reduce_scatter_area(
    e: &mut Guard<'_>,
    g: &mut Group,
    send: &[u8],
    offsets: &[usize],
    recv: &mut [u8],
    elem: usize,
    op: &Combine<'_>,
    info: WaitInfo,
) -> Result<()> {
    let (m, me) = (g.slots.len(), g.me);
    let plan = Scatter::new(g.payload, m, elem, offsets);
    g.kind = kind(K_REDUCE_SCATTER_AREA, 0, send.len());
    for r in 0..plan.rounds() {
        let s = begin(e, g, 1, info)?;
        wait_writable(e, g, s, plan.total(m), info)?;
        Round::of(&area(e, g.area), &g.slots, me, s).scatter_write(&plan, r, send);
        publish_at(e, g, s);
        wait_all(e, g, s, info)?;
        Round::of(&area(e, g.area), &g.slots, me, s).scatter_fold(&plan, r, send, recv, op);
        g.finish(s);
    }
    Ok(())
}

/// How a reduce-scatter of blocks at byte `offsets` (one per member) goes
/// through the area: `share` bytes of each block a round. Every member
/// knows every block, so all make the same plan.
pub(super) struct Scatter<'o> {
    pub offsets: &'o [usize],
    pub share: usize,
}

impl<'o> Scatter<'o> {
    /// Among `m` members with payload halves of `payload` bytes and
    /// elements of `elem`: a member's share of a half in whole elements
    /// (positive where `area_fits`), or the longest block where that is
    /// shorter (so that a short one's contributions take the area's small
    /// storage: `coll_area::placement`).
    pub(super) fn new(payload: usize, m: usize, elem: usize, offsets: &'o [usize]) -> Scatter<'o> {
        let longest = Scatter { offsets, share: 1 }.longest();
        let share = ((payload / m / elem) * elem).min(longest.max(elem));
        Scatter { offsets, share }
    }

    fn longest(&self) -> usize {
        self.offsets
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or(0)
    }

    /// As many rounds as the longest block needs, one at least.
    pub(super) fn rounds(&self) -> usize {
        self.longest().div_ceil(self.share).max(1)
    }

    /// The length of a member's contribution to each round, in `m` members.
    pub(super) fn total(&self, m: usize) -> usize {
        m * self.share
    }

    /// Round `r`'s piece of block `j`, as bytes of the send buffer.
    fn piece(&self, j: usize, r: usize) -> std::ops::Range<usize> {
        let (a, b) = (self.offsets[j], self.offsets[j + 1]);
        let start = (a + r * self.share).min(b);
        start..(start + self.share).min(b)
    }
}

/// Member `me` of `slots` in collective `s` of an area: the steps the long
/// reductions through the area make, blocking ([`reduce_scatter_area`],
/// [`allreduce_area`]) and nonblocking ([`Reducing`]).
pub(super) struct Round<'r, 'a> {
    a: &'r CollArea<'a>,
    slots: &'r [usize],
    me: usize,
    s: u64,
}

impl<'r, 'a> Round<'r, 'a> {
    pub(super) fn of(a: &'r CollArea<'a>, slots: &'r [usize], me: usize, s: u64) -> Self {
        Round { a, slots, me, s }
    }

    fn others(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.slots.len()).filter(|&j| j != self.me)
    }

    /// Writes into my contribution, round `r` of reduce-scatter `plan`, the
    /// round's pieces of the other members' blocks of `send`, member j's at
    /// `j * share`.
    pub(super) fn scatter_write(&self, plan: &Scatter<'_>, r: usize, send: &[u8]) {
        let total = plan.total(self.slots.len());
        for j in self.others() {
            let p = plan.piece(j, r);
            if !p.is_empty() {
                let at = j * plan.share;
                self.a
                    .write(self.slots[self.me], self.s, total, at, &send[p]);
            }
        }
    }

    /// Folds round `r`'s piece of my block of every member's `send` (mine
    /// from my own buffer, the others' from their contributions) into its
    /// place in `recv`, in rank order as [`fold`] does.
    pub(super) fn scatter_fold(
        &self,
        plan: &Scatter<'_>,
        r: usize,
        send: &[u8],
        recv: &mut [u8],
        op: &Combine<'_>,
    ) {
        let (m, me) = (self.slots.len(), self.me);
        let p = plan.piece(me, r);
        if p.is_empty() {
            return;
        }
        let at = p.start - plan.offsets[me];
        let acc = &mut recv[at..at + p.len()];
        let total = plan.total(m);
        let piece = |j: usize| match j == me {
            true => &send[p.clone()],
            false => self
                .a
                .bytes(self.slots[j], self.s, total, me * plan.share, p.len()),
        };
        acc.copy_from_slice(piece(m - 1));
        for k in (0..m - 1).rev() {
            op(piece(k), acc);
        }
    }

    /// Member j's block of an allreduce's chunk of `len` bytes to fold.
    fn chunk_block(&self, len: usize, elem: usize, j: usize) -> std::ops::Range<usize> {
        block_of(len / elem, self.slots.len(), elem, j)
    }

    /// Writes into my contribution the blocks of allreduce chunk `part` that
    /// the other members fold, each at its place in the chunk.
    pub(super) fn write_inputs(&self, part: &[u8], elem: usize) {
        let len = part.len();
        for j in self.others() {
            let b = self.chunk_block(len, elem, j);
            self.a
                .write(self.slots[self.me], self.s, len, b.start, &part[b]);
        }
    }

    /// Folds my block of every other member's inputs into chunk `part` (in
    /// any order: a commutative operation).
    pub(super) fn fold_inputs(&self, part: &mut [u8], elem: usize, op: &Combine<'_>) {
        let (len, m) = (part.len(), self.slots.len());
        let mine = self.chunk_block(len, elem, self.me);
        for k in 1..m {
            let j = (self.me + k) % m;
            let theirs = self
                .a
                .bytes(self.slots[j], self.s, len, mine.start, mine.len());
            op(theirs, &mut part[mine.clone()]);
        }
    }

    /// Writes my folded block of chunk `part` into my contribution.
    pub(super) fn write_result(&self, part: &[u8], elem: usize) {
        let mine = self.chunk_block(part.len(), elem, self.me);
        let slot = self.slots[self.me];
        self.a
            .write(slot, self.s, part.len(), mine.start, &part[mine]);
    }

    /// Copies every other member's folded block into chunk `part`.
    pub(super) fn read_results(&self, part: &mut [u8], elem: usize) {
        let len = part.len();
        for j in self.others() {
            let b = self.chunk_block(len, elem, j);
            self.a
                .read(self.slots[j], self.s, len, b.start, &mut part[b]);
        }
    }
}

/// A reduce longer than a payload half (arguments as
/// [`reduce_single_copy`]): a commutative one by single copy or through the
/// area as `KUMI_COLL_ALLREDUCE_COPY` says (`auto`: [`tried`], apart from the
/// allreduce's trial), a rank-order one by single copy; `None` when neither
/// may run (single copy off, and not commutative): then it goes by messages.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reduce_long(
    e: &mut Guard<'_>,
    g: &mut Group,
    own: Option<&[u8]>,
    out: &mut [u8],
    elem: usize,
    op: &Combine<'_>,
    commutative: bool,
    root: usize,
    info: WaitInfo,
) -> Option<Result<()>> {
    let n = own.map_or(out.len(), <[u8]>::len);
    let cfg = e.svc.coll.config();
    let single = cfg.single_copy;
    if !commutative || elem > g.payload {
        return single
            .then(|| reduce_single_copy(e, g, own, out, elem, op, commutative, root, info));
    }
    let mut run = |e: &mut Guard<'_>, g: &mut Group, area: bool| {
        if area {
            reduce_area(e, g, own, out, elem, op, root, info)
        } else {
            reduce_single_copy(e, g, own, out, elem, op, true, root, info)
        }
    };
    Some(match (cfg.allreduce_copy, single) {
        (LongCopy::Auto, true) => tried(e, g, |g| &mut g.long_reduce, n, Whose::Root, info, run),
        (LongCopy::Single, true) => run(e, g, false),
        _ => run(e, g, true),
    })
}

/// Commutative reduce longer than a payload half through the area (arguments
/// as [`reduce_single_copy`]), a chunk of at most a payload half per
/// collective number: every member but the root copies its chunk into its
/// half, and the root folds them straight into its result buffer (holding
/// its own chunk), so the root folds chunk c while the others copy chunk
/// c + 1 into their other half. No system call and no page pinning; the
/// root does all the folding.
#[allow(clippy::too_many_arguments)]
fn reduce_area(
    e: &mut Guard<'_>,
    g: &mut Group,
    own: Option<&[u8]>,
    out: &mut [u8],
    elem: usize,
    op: &Combine<'_>,
    root: usize,
    info: WaitInfo,
) -> Result<()> {
    let n = own.map_or(out.len(), <[u8]>::len);
    let chunk = (g.payload / elem) * elem;
    g.kind = kind(K_REDUCE_AREA, root, n);
    let mut off = 0;
    while off < n {
        let len = chunk.min(n - off);
        let s = begin(e, g, 1, info)?;
        if g.me == root {
            let acc = &mut out[off..off + len];
            if let Some(own) = own {
                acc.copy_from_slice(&own[off..off + len]);
            }
            // Nothing to contribute: publishing `s` tells the others this
            // rank is done with the half of `s - 1`.
            publish_at(e, g, s);
            wait_all(e, g, s, info)?;
            fold_into_own(&area(e, g.area), &g.slots, root, s, acc, op);
        } else {
            let own = own.expect("a contribution off the root");
            contribute(e, g, s, &own[off..off + len], info)?;
        }
        g.finish(s);
        off += len;
    }
    Ok(())
}

/// A broadcast longer than a payload half with `KUMI_COLL_BCAST_COPY=auto`
/// and a core per member: the group times single copy and the chunked area
/// as [`allreduce_long`] does and keeps single copy unless the area was
/// twice as fast (as there, the winner depends on the machine:
/// docs/BENCHMARKS.md, sessions 6 and 11).
pub(crate) fn bcast_long(
    e: &mut Guard<'_>,
    g: &mut Group,
    buf: &mut [u8],
    root: usize,
    info: WaitInfo,
) -> Result<()> {
    tried(
        e,
        g,
        |g| &mut g.long_bcast,
        buf.len(),
        Whose::Last,
        info,
        |e, g, area| {
            if area {
                bcast(e, g, buf, root, info)
            } else {
                bcast_single_copy(e, g, buf, root, info)
            }
        },
    )
}

/// Which member's time is a trial's: where every member waits for all the
/// others, the last to arrive (the shortest time: an earlier arrival's
/// counts its wait for the others); in a reduce, where only the root waits
/// for them and the others may leave as soon as their data is out, the
/// root's (the longest).
#[derive(Clone, Copy)]
enum Whose {
    Last,
    Root,
}

/// Runs one long collective of `n` bytes the way `state` says (`run(..,
/// true)`: through the area; `false`: by single copy), and moves a trial on
/// ([`Long::Trial`]): calls 0 (single copy) and 1 (area) untimed, then
/// single copy on even calls and the area on odd ones, each timed in
/// seconds per byte; after the last the members agree on each way's time
/// (see [`Whose`]) by an allreduce of their fastest, and keep the area only
/// where it took at most [`AREA_MARGIN`] of single copy's time.
fn tried(
    e: &mut Guard<'_>,
    g: &mut Group,
    state: fn(&mut Group) -> &mut Long,
    n: usize,
    whose: Whose,
    info: WaitInfo,
    mut run: impl FnMut(&mut Guard<'_>, &mut Group, bool) -> Result<()>,
) -> Result<()> {
    let (call, mut best) = match *state(g) {
        Long::Single => return run(e, g, false),
        Long::Area => return run(e, g, true),
        Long::Trial { call, best } => (call, best),
    };
    let area = call % 2 == 1;
    let t = Instant::now();
    run(e, g, area)?;
    if call >= 2 {
        let per_byte = t.elapsed().as_secs_f64() / n.max(1) as f64;
        let way = &mut best[usize::from(area)];
        *way = way.min(per_byte);
    }
    *state(g) = match call + 1 {
        TRIAL_CALLS => {
            let agree = match whose {
                Whose::Last => Op::<f64>::min(),
                Whose::Root => Op::<f64>::max(),
            };
            let f = |a: &[u8], b: &mut [u8]| {
                agree
                    .f
                    .call(bytemuck::cast_slice(a), bytemuck::cast_slice_mut(b))
            };
            allreduce(e, g, bytemuck::cast_slice_mut(&mut best), &f, info)?;
            if best[1] <= AREA_MARGIN * best[0] {
                Long::Area
            } else {
                Long::Single
            }
        }
        next => Long::Trial { call: next, best },
    };
    Ok(())
}

/// Commutative allreduce of `buf` through the area, in chunks of at most a
/// payload half: each member copies into its half the blocks of the chunk
/// that the others fold ([`Round::write_inputs`]), folds its own block from
/// everyone's half into its buffer ([`Round::fold_inputs`]), publishes that
/// result in its other half ([`Round::write_result`]), and copies the
/// others' results out ([`Round::read_results`]). Two collective numbers per chunk; no system call and
/// no page pinning, for four copies of every byte where single copy makes
/// two (`area_fits` must hold).
fn allreduce_area(
    e: &mut Guard<'_>,
    g: &mut Group,
    buf: &mut [u8],
    elem: usize,
    op: &Combine<'_>,
    info: WaitInfo,
) -> Result<()> {
    let (n, m, me) = (buf.len(), g.slots.len(), g.me);
    let chunk = area_chunk(g.payload, m, elem);
    g.kind = kind(K_ALLREDUCE_AREA, 0, n);
    for part in buf.chunks_mut(chunk) {
        let len = part.len();
        let s = begin(e, g, 2, info)?;
        // The inputs are this chunk's contribution to `s`, the results its
        // contribution to `s + 1`.
        wait_writable(e, g, s, len, info)?;
        Round::of(&area(e, g.area), &g.slots, me, s).write_inputs(part, elem);
        publish_at(e, g, s);
        wait_all(e, g, s, info)?;
        Round::of(&area(e, g.area), &g.slots, me, s).fold_inputs(part, elem, op);
        // At once: every member has entered `s`, so all are done with
        // `s - 1` and before, the last to use the results' storage (in the
        // other half than `s`'s); this notes `s + 1` as its user.
        wait_writable(e, g, s + 1, len, info)?;
        Round::of(&area(e, g.area), &g.slots, me, s + 1).write_result(part, elem);
        publish_at(e, g, s + 1);
        wait_all(e, g, s + 1, info)?;
        Round::of(&area(e, g.area), &g.slots, me, s + 1).read_results(part, elem);
        g.finish(s + 1);
    }
    Ok(())
}

/// Bytes of a chunk of an allreduce through the area among `m` members:
/// whole elements, the same number of bytes per member (the last chunk may
/// be shorter), at most a payload half (positive where `area_fits`).
pub(super) fn area_chunk(payload: usize, m: usize, elem: usize) -> usize {
    (payload / (m * elem)) * m * elem
}
