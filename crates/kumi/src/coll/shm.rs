//! Collectives inside one host through the segment's collective areas
//! (`kumi_transport::shm::coll_area`): each rank runs once per collective and
//! touches one cache line (or one payload half) per member, instead of lg p
//! rounds of messages through the rings and the matching engine.
//!
//! A communicator's *local group* is its members on this host (on a pretend
//! host with `KUMI_COLL_HOSTS`). Every member finds the same area for it, or
//! every member finds none (see the area's module doc), and the choice of path
//! depends only on what all members share (sizes, configuration), so the
//! members always agree whether a collective runs here or through messages.
//!
//! - barrier: publish, wait until every member has: one line read per member.
//! - allreduce of at most one payload half: write, publish, wait for all, fold
//!   every half in rank order (right to left, `d0 ⊕ (d1 ⊕ (...))`), the same
//!   on every member, so the results are bitwise identical and user operations
//!   need not be commutative.
//! - reduce: the same, only the root waits and folds.
//! - bcast: the root writes the data, the others copy it out; longer messages
//!   go in chunks of one payload half, two chunks in flight.
//! - alltoall with `size() * block` at most one payload half: every rank
//!   writes its send buffer, then copies its block out of every slot.
//! - gather of one payload half per member at most: every member writes its
//!   block, the root waits and copies every slot's out; scatter of one
//!   payload half in all: the root writes every block, each member copies
//!   its own; reduce-scatter of one payload half: every member writes its
//!   send buffer and folds its own block of every slot, as allreduce folds;
//!   allgather(v) with every block at most one payload half: every member
//!   writes its block and copies every other's out.
//! - gatherv and scatterv, member by member: a member's block goes through
//!   the area if it fits its place there (the root knows every length, a
//!   member its own, so the two agree without a message), else as a message
//!   in the same call; every member also takes the call's message tag, used
//!   or not, so the tags of later collectives agree.
//! - longer bcast and allreduce, where the kernel allows single copy
//!   (`process_vm_readv`): the area carries only buffer addresses, and the
//!   data moves once, straight between the ranks' own buffers. Bcast: every
//!   rank reads the root's buffer but one m-th block of it, which the root
//!   writes into the reader's buffer meanwhile, so all members copy alike.
//!   Allreduce:
//!   member i reduces block i of every member's buffer, in rank order, then
//!   everyone reads the finished blocks (a reduce-scatter and an allgather,
//!   each rank reading (p-1)/p of the data twice; nothing goes through the
//!   rings). For a commutative operation member i folds each piece (32 KiB,
//!   `KUMI_COLL_PIECE`)
//!   it reads straight into its own buffer, in any order, and writes the
//!   finished piece into every other member's buffer at once, while it is
//!   still in its cache (`process_vm_writev`): one round of publishing
//!   instead of two (docs/BENCHMARKS.md, session 4). Block i of
//!   every buffer is only ever touched by member i (read for the fold, then
//!   written with the result), so those writes race with nothing.
//! - longer reduce, by single copy: member i folds block i of every
//!   member's contribution, piece by piece, and writes each finished piece
//!   into the root's result buffer; no member copies its contribution.
//! - longer commutative allreduce, the other way: through the area in
//!   chunks of a payload half ([`allreduce_area`]): no system call and no
//!   page pinning, for twice the copies. Which is faster depends on the
//!   machine (docs/BENCHMARKS.md, session 11), so by default each communicator times
//!   both and keeps the faster ([`allreduce_long`]); the members agree on
//!   the outcome through an allreduce of the times, so none goes its own way.
//!
//! Waiting goes through `Engine::wait_until`, so the rank keeps draining its
//! rings (a peer blocked on a full ring never deadlocks with it), the
//! supervision sees the call, and the waiting policy (poll, yield, sleep on
//! the doorbell) applies; publishing wakes members that sleep. One gap, in
//! the engine: between its last `done` check and `prepare_sleep` a member
//! may miss a publication (the engine re-checks only its rings after
//! announcing sleep), and then sleeps until the doorbell's timeout
//! (`KUMI_SLEEP_MS`, 100 ms). It can only happen after a wait already longer
//! than the spin and yield phases (2 ms); the fix is for the engine to call
//! `done` once more after `prepare_sleep` returns true.
//!
//! `ibarrier` and `iallreduce` (up to one payload half) run through the area
//! too ([`Pending`]): they publish when started (if every earlier collective
//! of the group has completed here) and complete in the engine's progress.
//!
//! `KUMI_COLL_SHM=off` turns all of this off (every collective then runs
//! through messages, as before); `KUMI_SINGLE_COPY=off` (or a kernel that
//! refuses, simulated by `KUMI_TEST_DENY_CMA=1`) leaves the long messages to
//! the chunked area (bcast, commutative allreduce) and the message
//! algorithms (other allreduces). The choice must be the same on every rank,
//! so it follows the environment, not a trial of the kernel's permission: a
//! rank whose kernel refuses a copy mid-collective returns an
//! error naming `KUMI_SINGLE_COPY` rather than disagree with its peers
//! (which wait for it until the program ends or the deadlock detector
//! reports them).

use super::exec::AlignedBuf;
use super::ops::Op;
use crate::engine::{Engine, WaitInfo};
use crate::error::{Error, Result};
use crate::progress::Guard;
use kumi_transport::cma;
use kumi_transport::shm::coll_area::{
    self, all_reached_as, all_reached_naming, claim, group_key, publish, reached_as, writable,
    AreaMem, CollArea, AREAS,
};
use kumi_transport::Capabilities;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// `inout = in ⊕ inout` over bytes of whole, aligned elements (borrowed: a
/// collective needs no `Arc` of its operation).
pub(crate) type Combine<'a> = dyn Fn(&[u8], &mut [u8]) + 'a;

/// This rank's view of its communicator's local group and area.
#[derive(Clone, Debug)]
pub(crate) struct Group {
    area: usize,
    /// Local rank (slot) of each member, in communicator rank order.
    pub slots: Arc<[usize]>,
    /// My index in `slots`.
    pub me: usize,
    /// The slots of the other ranks bound to my core (none: I have it to
    /// myself), when ranks are bound and all of those are members; else
    /// `None` (see [`wait_all_reached`]).
    mates: Option<Box<[usize]>>,
    /// Bytes of a payload half.
    pub payload: usize,
    /// Last collective number used.
    seq: u64,
    /// Every member is known to have entered this collective (this rank saw
    /// it with Acquire loads), so the half of the one after next is
    /// writable without looking again (`wait_writable`).
    seen_all: std::cell::Cell<u64>,
    /// Every collective of this group up to this number is complete here
    /// (shared with the nonblocking ones in flight). Relaxed: only the thread
    /// holding the engine touches it, and the engine's mutex orders that.
    completed: Arc<AtomicU64>,
    /// What the collective in progress is (`kind`), published with each of
    /// its sequence numbers; members wait only for the same kind.
    kind: u64,
    /// How this group's long commutative allreduces go (see `allreduce_long`).
    long: Long,
    /// How its long broadcasts go (see `bcast_long`).
    long_bcast: Long,
    /// How its long commutative reduces go (see `reduce_long`).
    long_reduce: Long,
}

/// `KUMI_COLL_ALLREDUCE_COPY`, `KUMI_COLL_BCAST_COPY`: how a commutative
/// allreduce or a broadcast longer than a payload half goes inside a host.
/// `Auto`: each group times both ways (its first eight such calls) and keeps
/// the faster ([`tried`]); `Single`: by single copy, unless single copy is
/// off; `Area`: through the area.
pub(crate) use kumi_core::config::CopyMode as LongCopy;

/// Where a group's `LongCopy::Auto` trial stands.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Long {
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

impl Long {
    const TRIAL: Long = Long::Trial {
        call: 0,
        best: [f64::INFINITY; 2],
    };
}

thread_local! {
    /// Two pieces of scratch for `allreduce_single_copy`, kept between calls.
    static SCRATCH: std::cell::RefCell<[AlignedBuf; 2]> = Default::default();
}

/// Kinds of collective, for `kind`.
const K_BARRIER: u64 = 1;
const K_ALLREDUCE: u64 = 2;
const K_REDUCE: u64 = 3;
const K_BCAST: u64 = 4;
const K_ALLTOALL: u64 = 5;
const K_BCAST_COPY: u64 = 6;
const K_ALLREDUCE_COPY: u64 = 7;
const K_ALLREDUCE_AREA: u64 = 8;
const K_GATHER: u64 = 9;
const K_SCATTER: u64 = 10;
const K_REDUCE_SCATTER: u64 = 11;
const K_ALLGATHER: u64 = 12;
const K_GATHERV: u64 = 13;
const K_SCATTERV: u64 = 14;
const K_REDUCE_SCATTER_COPY: u64 = 15;
const K_ALLTOALLV: u64 = 16;
const K_REDUCE_COPY: u64 = 17;
const K_REDUCE_AREA: u64 = 18;

/// The kind word of a collective: operation, root and size. Two members see
/// the same word exactly when they are in the same call (as MPI requires of a
/// correct program); see the area's module doc for why it is published.
fn kind(op: u64, root: usize, len: usize) -> u64 {
    (op << 56) | ((root as u64 & 0xffff) << 40) | (len as u64 & ((1 << 40) - 1))
}

impl Group {
    /// Finds (claiming if needed) the area of the local group whose members
    /// are world ranks `worlds` (in communicator rank order), with `me` the
    /// caller's index. `whole_world`: the group is the world communicator and
    /// holds every local rank (it then owns area 0). `None` if some member is
    /// not on this host's segment or every area is taken.
    pub fn find(
        e: &Engine,
        coll_ctx: u32,
        worlds: &[u32],
        me: usize,
        whole_world: bool,
    ) -> Option<Group> {
        let shm = e.shm()?;
        let slots: Option<Vec<usize>> = worlds.iter().map(|&w| shm.local_of(w)).collect();
        let slots = slots?;
        let seg = shm.segment();
        let key = group_key(coll_ctx, *worlds.iter().min()?);
        let candidates = if whole_world && slots.len() == seg.local_size() {
            0..1
        } else {
            1..AREAS
        };
        let area = candidates
            .into_iter()
            .find(|&k| claim(&seg.coll_area(k), key))?;
        // Only when the ranks are bound, and every other rank of my core is
        // a member: one that is not may be computing, and a member keeping
        // the core would hold it up.
        let mine = (0..seg.local_size()).filter(|&l| e.shares_core_with(l));
        let mates = (e.bound() && mine.clone().all(|l| slots.contains(&l))).then(|| mine.collect());
        Some(Group {
            area,
            slots: slots.into(),
            me,
            mates,
            payload: coll_area::payload_bytes(seg.local_size()),
            seq: 0,
            seen_all: std::cell::Cell::new(0),
            completed: Arc::new(AtomicU64::new(0)),
            kind: 0,
            long: Long::TRIAL,
            long_bcast: Long::TRIAL,
            long_reduce: Long::TRIAL,
        })
    }

    /// The next `k` collective numbers; returns the first.
    fn take(&mut self, k: u64) -> u64 {
        let s = self.seq + 1;
        self.seq += k;
        s
    }

    /// Marks every collective up to `s` complete.
    fn finish(&self, s: u64) {
        self.completed.store(s, Ordering::Relaxed);
    }

    fn my_slot(&self) -> usize {
        self.slots[self.me]
    }

    /// Whether every member has entered collective `s` as this one. In a
    /// group of more than [`NAMING_FROM`] members, a member still waiting
    /// names the one it waits for, so that only that one's publish wakes it
    /// (`coll_area::all_reached_naming`).
    #[inline]
    fn all_reached(&self, a: &CollArea<'_>, s: u64) -> bool {
        if self.slots.len() > NAMING_FROM {
            all_reached_naming(a, &self.slots, self.my_slot(), s, self.kind)
        } else {
            all_reached_as(a, &self.slots, s, self.kind)
        }
    }
}

/// Group size above which the members waiting for all name whom they wait
/// for: below it the wake-ups saved are few (at most n^2 per collective),
/// and naming costs a fence on a small barrier's path each time the first
/// member missing changes.
const NAMING_FROM: usize = 16;

fn area(e: &Engine, k: usize) -> CollArea<'_> {
    e.shm()
        .expect("a rank with a collective area has shared memory")
        .segment()
        .coll_area(k)
}

fn publish_at(e: &Engine, g: &Group, s: u64) {
    let shm = e.shm().expect("shared memory");
    let a = shm.segment().coll_area(g.area);
    publish(&a, &g.slots, g.my_slot(), s, g.kind, |j| shm.wake(j));
}

/// Waits until `cond` holds on the area, through the engine's wait loop.
fn wait(
    e: &mut Guard<'_>,
    info: WaitInfo,
    k: usize,
    cond: impl Fn(&CollArea<'_>) -> bool,
) -> Result<()> {
    e.wait_until(info, |e| cond(&area(e, k)))
}

/// Waits until every member has reached collective `s`, in a collective
/// whose every member waits so (barrier, allreduce, alltoall): a member of
/// my core that has reached `s` while some other has not cannot have left
/// it, so when all of them have, they all wait for other cores and this
/// rank keeps its core ([`Engine::wait_until_with_mates`]); so does a rank
/// alone on its core, which has nobody to hand it to.
fn wait_all_reached(e: &mut Guard<'_>, g: &Group, s: u64, info: WaitInfo) -> Result<()> {
    let k = g.area;
    e.wait_until_with_mates(
        info,
        |e| g.all_reached(&area(e, k), s),
        |e| {
            g.mates
                .as_ref()
                .is_some_and(|m| all_reached_as(&area(e, k), m, s, g.kind))
        },
    )?;
    g.seen_all.set(s);
    Ok(())
}

/// Waits until every member has reached collective `s` as this one.
fn wait_all(e: &mut Guard<'_>, g: &Group, s: u64, info: WaitInfo) -> Result<()> {
    wait(e, info, g.area, |a| g.all_reached(a, s))?;
    g.seen_all.set(s);
    Ok(())
}

/// Waits until my half of collective `s` is writable ([`writable`]), unless
/// this rank has already seen every member enter `s - 1` (it waited for
/// them in an earlier collective): then it is, and looking again would only
/// pull the other members' lines into this core's cache once more. That
/// earlier Acquire orders the writes that follow as `writable`'s would.
fn wait_writable(e: &mut Guard<'_>, g: &Group, s: u64, info: WaitInfo) -> Result<()> {
    if g.seen_all.get() + 1 >= s {
        return Ok(());
    }
    wait(e, info, g.area, |a| writable(a, &g.slots, s))
}

/// Takes the next `k` collective numbers for a blocking collective, after
/// the group's nonblocking ones before it have completed: publishing `s`
/// tells the others this rank is done with everything up to `s - 1` (so
/// they may overwrite the half `s - 1` used, at `s + 1`), which a
/// nonblocking collective still reading would break. They complete once every member has started them, which every
/// member does before this collective, so the wait ends.
fn begin(e: &mut Guard<'_>, g: &mut Group, k: u64, info: WaitInfo) -> Result<u64> {
    let s = g.take(k);
    if g.completed.load(Ordering::Relaxed) + 1 < s {
        let c = g.completed.clone();
        e.wait_until(info, |_| c.load(Ordering::Relaxed) + 1 >= s)?;
    }
    Ok(s)
}

/// Barrier of the group.
pub(crate) fn barrier(e: &mut Guard<'_>, g: &mut Group, info: WaitInfo) -> Result<()> {
    let s = begin(e, g, 1, info)?;
    g.kind = kind(K_BARRIER, 0, 0);
    publish_at(e, g, s);
    wait_all_reached(e, g, s, info)?;
    g.finish(s);
    Ok(())
}

/// Writes my contribution of collective `s` (waiting until the half is free).
fn contribute(e: &mut Guard<'_>, g: &Group, s: u64, data: &[u8], info: WaitInfo) -> Result<()> {
    wait_writable(e, g, s, info)?;
    area(e, g.area).write(g.my_slot(), (s & 1) as usize, data.len(), 0, data);
    publish_at(e, g, s);
    Ok(())
}

/// `buf = d0 ⊕ (d1 ⊕ (... ⊕ d_last))` over every member's half of `s`.
fn fold(a: &CollArea<'_>, g: &Group, s: u64, buf: &mut [u8], op: &Combine<'_>) {
    fold_at(a, g, s, buf.len(), 0, buf, op);
}

/// [`fold`] of bytes `off..off + buf.len()` of contributions of `total`
/// bytes.
fn fold_at(
    a: &CollArea<'_>,
    g: &Group,
    s: u64,
    total: usize,
    off: usize,
    buf: &mut [u8],
    op: &Combine<'_>,
) {
    let (n, half) = (buf.len(), (s & 1) as usize);
    let last = g.slots.len() - 1;
    let src = a.bytes(g.slots[last], half, total, off, n);
    // SAFETY: both are `n` bytes (`bytes` returns exactly `n`), and the area
    // (kumi's own mapping, private to the collectives) is no caller's buffer. (Not `copy_from_slice`: for an
    // 8-byte allreduce, a call into `memcpy` cost more than the copy.)
    unsafe { kumi_transport::copy_bytes(src.as_ptr(), buf.as_mut_ptr(), n) };
    for k in (0..last).rev() {
        op(a.bytes(g.slots[k], half, total, off, n), buf);
    }
}

/// Allreduce of `buf` (at most one payload half) inside the group.
pub(crate) fn allreduce(
    e: &mut Guard<'_>,
    g: &mut Group,
    buf: &mut [u8],
    op: &Combine<'_>,
    info: WaitInfo,
) -> Result<()> {
    let s = begin(e, g, 1, info)?;
    g.kind = kind(K_ALLREDUCE, 0, buf.len());
    contribute(e, g, s, buf, info)?;
    wait_all_reached(e, g, s, info)?;
    fold(&area(e, g.area), g, s, buf, op);
    g.finish(s);
    Ok(())
}

/// A member's side of a reduce: the root's buffer holds its contribution
/// and receives the result; every other member only gives its own.
pub(crate) enum Side<'a> {
    Root(&'a mut [u8]),
    Give(&'a [u8]),
}

/// Reduce of at most one payload half to member `root` (an index into the
/// group; `side` is [`Side::Root`] there); only the root waits.
pub(crate) fn reduce(
    e: &mut Guard<'_>,
    g: &mut Group,
    side: Side<'_>,
    op: &Combine<'_>,
    root: usize,
    info: WaitInfo,
) -> Result<()> {
    let s = begin(e, g, 1, info)?;
    let mine: &[u8] = match &side {
        Side::Root(b) => b,
        Side::Give(b) => b,
    };
    g.kind = kind(K_REDUCE, root, mine.len());
    contribute(e, g, s, mine, info)?;
    if let Side::Root(buf) = side {
        wait_all(e, g, s, info)?;
        fold(&area(e, g.area), g, s, buf, op);
    }
    g.finish(s);
    Ok(())
}

/// Reduce-scatter inside the group: every member contributes `send` (at
/// most one payload half), and folds bytes `mine` of every contribution, in
/// rank order as [`fold`] does, into `recv`.
pub(crate) fn reduce_scatter(
    e: &mut Guard<'_>,
    g: &mut Group,
    send: &[u8],
    mine: std::ops::Range<usize>,
    recv: &mut [u8],
    op: &Combine<'_>,
    info: WaitInfo,
) -> Result<()> {
    let s = begin(e, g, 1, info)?;
    g.kind = kind(K_REDUCE_SCATTER, 0, send.len());
    contribute(e, g, s, send, info)?;
    wait_all_reached(e, g, s, info)?;
    let recv = &mut recv[..mine.len()];
    fold_at(&area(e, g.area), g, s, send.len(), mine.start, recv, op);
    g.finish(s);
    Ok(())
}

/// Gather to member `root`: every other member writes its `send` if it
/// fits one payload half (a longer one goes as a message, the caller's
/// business), only the root waits, and hands each other member's block
/// that came this way to `recv(j, bytes)`. `len(j)`: member j's length,
/// read at the root. `same`: every member knows every length (a gather);
/// else only the root does (a gatherv). Either way each member publishes
/// its own length in its kind word and the root waits for exactly the one
/// it expects from each, so a member whose block is not as long as the root
/// says never has it read as if it were. The root's own block is the
/// caller's business.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gather(
    e: &mut Guard<'_>,
    g: &mut Group,
    send: &[u8],
    len: &dyn Fn(usize) -> usize,
    same: bool,
    recv: &mut dyn FnMut(usize, &[u8]),
    root: usize,
    info: WaitInfo,
) -> Result<()> {
    let s = begin(e, g, 1, info)?;
    let payload = g.payload;
    let kind_of = |n: usize| kind(if same { K_GATHER } else { K_GATHERV }, root, n);
    g.kind = kind_of(send.len());
    let mine = if g.me == root || send.len() > payload {
        &[][..]
    } else {
        send
    };
    contribute(e, g, s, mine, info)?;
    if g.me == root {
        wait(e, info, g.area, |a| {
            g.slots
                .iter()
                .enumerate()
                .all(|(j, &slot)| reached_as(a, slot, s, kind_of(len(j))))
        })?;
        let a = area(e, g.area);
        for (j, &slot) in g.slots.iter().enumerate().filter(|&(j, _)| j != root) {
            let n = len(j);
            if n > 0 && n <= payload {
                recv(j, a.bytes(slot, (s & 1) as usize, n, 0, n));
            }
        }
    }
    g.finish(s);
    Ok(())
}

/// Allgather inside the group: every member writes its `send` (member j's
/// of `len(j)` bytes, at most one payload half), waits for all, and hands
/// every other member's to `recv(j, bytes)`.
pub(crate) fn allgather(
    e: &mut Guard<'_>,
    g: &mut Group,
    send: &[u8],
    len: &dyn Fn(usize) -> usize,
    recv: &mut dyn FnMut(usize, &[u8]),
    info: WaitInfo,
) -> Result<()> {
    let s = begin(e, g, 1, info)?;
    // The kind names what every member knows alike: all lengths together.
    g.kind = kind(K_ALLGATHER, 0, (0..g.slots.len()).map(len).sum());
    contribute(e, g, s, send, info)?;
    wait_all_reached(e, g, s, info)?;
    let a = area(e, g.area);
    for (j, &slot) in g.slots.iter().enumerate().filter(|&(j, _)| j != g.me) {
        let n = len(j);
        recv(j, a.bytes(slot, (s & 1) as usize, n, 0, n));
    }
    g.finish(s);
    Ok(())
}

/// Where member `j`'s block of `n` bytes goes in the root's half in a
/// scatterv, whose members know only their own lengths: the control line's
/// inline bytes split evenly among the `m` members when it fits there, else
/// the payload half split evenly, else nowhere (it goes as a message). As
/// `(total, offset)` for the area's `write`/`read`.
pub(crate) fn scatterv_place(
    j: usize,
    n: usize,
    m: usize,
    payload: usize,
) -> Option<(usize, usize)> {
    let (small, big) = (coll_area::INLINE / m, payload / m);
    if n <= small {
        Some((coll_area::INLINE, j * small))
    } else if n <= big {
        // More than INLINE, so the payload half (payload >= 4 KiB).
        Some((payload, j * big))
    } else {
        None
    }
}

/// Scatter from member `root`: the root writes member j's block (`send(j)`,
/// read at the root only) where `place(j, len)` says (`(total, offset)` for
/// the area), each member copies its own out into `recv`, or, where `place`
/// says `None`, leaves it to a message and does not wait. `same`: the block
/// length every member knows (a scatter's); `None` for a scatterv.
///
/// `recv` is written, and at the root may be its own block itself (in
/// place). The caller vouches for both (`Comm::scatter_area`,
/// `Comm::scatterv_area`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter(
    e: &mut Guard<'_>,
    g: &mut Group,
    send: &dyn Fn(usize) -> (*const u8, usize),
    recv: (*mut u8, usize),
    place: &dyn Fn(usize, usize) -> Option<(usize, usize)>,
    same: Option<usize>,
    root: usize,
    info: WaitInfo,
) -> Result<()> {
    let m = g.slots.len();
    let s = begin(e, g, 1, info)?;
    g.kind = match same {
        Some(n) => kind(K_SCATTER, root, n * m),
        None => kind(K_SCATTERV, root, 0),
    };
    let (k, root_slot, half) = (g.area, g.slots[root], (s & 1) as usize);
    if g.me == root {
        wait_writable(e, g, s, info)?;
        let a = area(e, k);
        for j in (0..m).filter(|&j| j != root) {
            let (p, n) = send(j);
            if let (Some((total, off)), 1..) = (place(j, n), n) {
                // SAFETY: the caller vouches for `n` readable bytes per member.
                let block = unsafe { std::slice::from_raw_parts(p, n) };
                a.write(root_slot, half, total, off, block);
            }
        }
        publish_at(e, g, s);
        let (own, n) = send(root);
        // SAFETY: as above, and `recv` is the root's own block or does not
        // overlap it (in place or not at all).
        unsafe { super::copy_own(own, recv.0, n.min(recv.1)) };
        g.finish(s);
        return Ok(());
    }
    // Entering `s` tells the root this member is done with `s - 1`.
    publish_at(e, g, s);
    if let (Some((total, off)), 1..) = (place(g.me, recv.1), recv.1) {
        wait(e, info, k, |a| reached_as(a, root_slot, s, g.kind))?;
        // SAFETY: the caller vouches for `recv`, this member's own.
        let dst = unsafe { std::slice::from_raw_parts_mut(recv.0, recv.1) };
        area(e, k).read(root_slot, half, total, off, dst);
    }
    g.finish(s);
    Ok(())
}

/// Broadcast of `buf` from member `root` (an index into the group), in chunks
/// of one payload half with two in flight.
pub(crate) fn bcast(
    e: &mut Guard<'_>,
    g: &mut Group,
    buf: &mut [u8],
    root: usize,
    info: WaitInfo,
) -> Result<()> {
    let n = buf.len();
    let chunk = if n <= coll_area::INLINE {
        n.max(1)
    } else {
        g.payload
    };
    let chunks = n.div_ceil(chunk).max(1);
    let s0 = begin(e, g, chunks as u64, info)?;
    g.kind = kind(K_BCAST, root, n);
    let (k, me, root_slot) = (g.area, g.my_slot(), g.slots[root]);
    // A chunk of at most INLINE bytes (a short message, or a long one's
    // tail) travels in the control line; both sides place it by its length.
    let range = |c: usize| c * chunk..(c * chunk + chunk).min(n);
    if g.me == root {
        for c in 0..chunks {
            let s = s0 + c as u64;
            wait_writable(e, g, s, info)?;
            let r = range(c);
            area(e, k).write(me, (s & 1) as usize, r.len(), 0, &buf[r]);
            publish_at(e, g, s);
        }
        g.finish(s0 + chunks as u64 - 1);
        return Ok(());
    }
    for c in 0..chunks {
        let s = s0 + c as u64;
        // Entering chunk c tells the root we are done with chunk c - 1.
        publish_at(e, g, s);
        wait(e, info, k, |a| reached_as(a, root_slot, s, g.kind))?;
        let r = range(c);
        area(e, k).read(root_slot, (s & 1) as usize, r.len(), 0, &mut buf[r]);
    }
    g.finish(s0 + chunks as u64 - 1);
    Ok(())
}

/// Alltoall inside the group: `send` holds one block of `block` bytes per
/// member, in group order (at most one payload half in all); block j of
/// `recv` receives member j's block for me.
pub(crate) fn alltoall(
    e: &mut Guard<'_>,
    g: &mut Group,
    send: &[u8],
    recv: &mut [u8],
    block: usize,
    info: WaitInfo,
) -> Result<()> {
    let s = begin(e, g, 1, info)?;
    let total = send.len();
    g.kind = kind(K_ALLTOALL, 0, total);
    contribute(e, g, s, send, info)?;
    wait_all_reached(e, g, s, info)?;
    let a = area(e, g.area);
    let half = (s & 1) as usize;
    for (j, &slot) in g.slots.iter().enumerate() {
        recv[j * block..(j + 1) * block].copy_from_slice(a.bytes(
            slot,
            half,
            total,
            g.me * block,
            block,
        ));
    }
    g.finish(s);
    Ok(())
}

/// Alltoallv inside the group, block by block: member j writes its block
/// for member i where [`scatterv_place`] puts one of its length in j's own
/// half (both ends know the length: j sends it, i receives it), publishes,
/// waits for every member, and copies out of every other member's half the
/// block for itself. Blocks without a place go as messages, and the own
/// block is copied, by the caller.
///
/// # Safety
/// Each `send` segment readable and each `recv` segment writable for its
/// length during the call; `recv` segments overlap nothing.
pub(crate) unsafe fn alltoallv(
    e: &mut Guard<'_>,
    g: &mut Group,
    send: &[(*const u8, usize)],
    recv: &[(*mut u8, usize)],
    info: WaitInfo,
) -> Result<()> {
    let (m, me, payload) = (g.slots.len(), g.me, g.payload);
    let s = begin(e, g, 1, info)?;
    g.kind = kind(K_ALLTOALLV, 0, 0);
    let (k, half) = (g.area, (s & 1) as usize);
    wait_writable(e, g, s, info)?;
    {
        let a = area(e, k);
        for (i, &(p, n)) in send.iter().enumerate().filter(|&(i, _)| i != me) {
            if let (Some((total, off)), 1..) = (scatterv_place(i, n, m, payload), n) {
                // SAFETY: the caller vouches for `n` readable bytes.
                a.write(g.my_slot(), half, total, off, unsafe {
                    std::slice::from_raw_parts(p, n)
                });
            }
        }
    }
    publish_at(e, g, s);
    wait_all_reached(e, g, s, info)?;
    let a = area(e, k);
    for (j, &(p, n)) in recv.iter().enumerate().filter(|&(j, _)| j != me) {
        if let (Some((total, off)), 1..) = (scatterv_place(me, n, m, payload), n) {
            // SAFETY: the caller vouches for `n` writable bytes that
            // overlap nothing.
            a.read(g.slots[j], half, total, off, unsafe {
                std::slice::from_raw_parts_mut(p, n)
            });
        }
    }
    g.finish(s);
    Ok(())
}

/// Publishes my buffer's address and length for collective `s`.
fn publish_addr(
    e: &mut Guard<'_>,
    g: &Group,
    s: u64,
    addr: usize,
    len: usize,
    info: WaitInfo,
) -> Result<()> {
    publish_card(e, g, s, [addr as u64, len as u64], info)
}

/// Publishes `N` words (addresses, lengths) for collective `s`: inline in
/// the control line for two, in the payload half beyond.
fn publish_card<const N: usize>(
    e: &mut Guard<'_>,
    g: &Group,
    s: u64,
    words: [u64; N],
    info: WaitInfo,
) -> Result<()> {
    let mut card = [0u8; 64];
    for (i, w) in words.iter().enumerate() {
        card[8 * i..8 * i + 8].copy_from_slice(&w.to_le_bytes());
    }
    contribute(e, g, s, &card[..8 * N], info)
}

/// Member `k`'s pid and the `N` words it published for collective `s`.
fn peer_card<const N: usize>(
    a: &CollArea<'_>,
    e: &Engine,
    g: &Group,
    k: usize,
    s: u64,
) -> (i32, [u64; N]) {
    let slot = g.slots[k];
    let mut card = [0u8; 64];
    a.read(slot, (s & 1) as usize, 8 * N, 0, &mut card[..8 * N]);
    let pid = e
        .shm()
        .expect("shared memory")
        .segment()
        .rank_block(slot)
        .pid() as i32;
    let words = std::array::from_fn(|i| {
        u64::from_le_bytes(card[8 * i..8 * i + 8].try_into().expect("8 bytes"))
    });
    (pid, words)
}

/// Publishes `buf`'s address for collective `s`, waits for every member's,
/// and returns each member's (pid, address, length), after checking that
/// every length is `buf`'s (`what` names the collective in the error).
fn exchange_bufs(
    e: &mut Guard<'_>,
    g: &Group,
    s: u64,
    buf: &[u8],
    what: &str,
    info: WaitInfo,
) -> Result<Vec<(i32, u64, usize)>> {
    let (k, n) = (g.area, buf.len());
    publish_addr(e, g, s, buf.as_ptr() as usize, n, info)?;
    wait_all(e, g, s, info)?;
    let peers: Vec<(i32, u64, usize)> = {
        let a = area(e, k);
        (0..g.slots.len())
            .map(|j| peer_buf(&a, e, g, j, s))
            .collect()
    };
    if let Some(j) = peers.iter().position(|p| p.2 != n) {
        return Err(Error::Protocol(format!(
            "{what} of {n} bytes met one of {} (member {j})",
            peers[j].2
        )));
    }
    Ok(peers)
}

/// (pid, buffer address, length) member `k` published for collective `s`.
fn peer_buf(a: &CollArea<'_>, e: &Engine, g: &Group, k: usize, s: u64) -> (i32, u64, usize) {
    let (pid, [addr, len]) = peer_card(a, e, g, k, s);
    (pid, addr, len as usize)
}

fn copy_error(what: &str, n: usize, peer: usize, err: std::io::Error) -> Error {
    Error::Io(std::io::Error::new(
        err.kind(),
        format!(
            "collective single copy ({what} {n} bytes, local rank {peer}): {err}; \
             set KUMI_SINGLE_COPY=off if the kernel refuses process_vm_readv"
        ),
    ))
}

/// Broadcast of `buf` from member `root` by single copy out of the root's
/// buffer (see the module doc).
///
/// The copying is shared evenly: of m members, each reader copies all but
/// one m-th block of the message out of the root's buffer, and the root
/// writes that block into each reader's buffer meanwhile, so every member
/// copies (m-1)/m of the message. (With every reader copying it all, the
/// root idled and the readers sharing a core with another reader took twice
/// as long: oversubscribed, the cores go round the members, and the busiest
/// core sets the time.)
pub(crate) fn bcast_single_copy(
    e: &mut Guard<'_>,
    g: &mut Group,
    buf: &mut [u8],
    root: usize,
    info: WaitInfo,
) -> Result<()> {
    let n = buf.len();
    let s = begin(e, g, 2, info)?;
    g.kind = kind(K_BCAST_COPY, root, n);
    let (k, m) = (g.area, g.slots.len());
    publish_addr(e, g, s, buf.as_ptr() as usize, n, info)?;
    // The block of reader j that the root writes: the j-th of m, cache-line
    // aligned (the last one takes the rest).
    let block = |j: usize| {
        let b = (n / m) & !63;
        let start = (j * b).min(n);
        start..if j + 1 == m { n } else { (start + b).min(n) }
    };
    if g.me == root {
        // Write each reader's block as soon as its buffer is known.
        let mut left: Vec<usize> = (0..m).filter(|&j| j != root).collect();
        while !left.is_empty() {
            wait(e, info, k, |a| {
                left.iter().any(|&j| reached_as(a, g.slots[j], s, g.kind))
            })?;
            let a = area(e, k);
            let ready: Vec<usize> = left
                .iter()
                .copied()
                .filter(|&j| reached_as(&a, g.slots[j], s, g.kind))
                .collect();
            let peers: Vec<_> = ready.iter().map(|&j| peer_buf(&a, e, g, j, s)).collect();
            for (&j, (pid, addr, len)) in ready.iter().zip(peers) {
                if len != n {
                    return Err(Error::Protocol(format!(
                        "bcast of {n} bytes met one of {len}"
                    )));
                }
                let b = block(j);
                if !b.is_empty() {
                    cma::write_to(pid, addr + b.start as u64, &buf[b.clone()])
                        .map_err(|x| copy_error("writing", b.len(), g.slots[j], x))?;
                }
            }
            left.retain(|j| !ready.contains(j));
        }
        publish_at(e, g, s + 1);
        // Our buffer must stay as it is until every reader is done.
        wait_all(e, g, s + 1, info)?;
        g.finish(s + 1);
        return Ok(());
    }
    wait(e, info, k, |a| reached_as(a, g.slots[root], s, g.kind))?;
    let (pid, addr, len) = peer_buf(&area(e, k), e, g, root, s);
    if len != n {
        return Err(Error::Protocol(format!(
            "bcast of {n} bytes met one of {len}"
        )));
    }
    // Everything but my block (which the root writes): before it, then after.
    let mine = block(g.me);
    for part in [0..mine.start, mine.end..n] {
        if !part.is_empty() {
            let len = part.len();
            cma::read_from(pid, addr + part.start as u64, &mut buf[part])
                .map_err(|x| copy_error("reading", len, g.slots[root], x))?;
        }
    }
    publish_at(e, g, s + 1);
    // The root writes my block; done when it publishes.
    wait(e, info, k, |a| reached_as(a, g.slots[root], s + 1, g.kind))?;
    g.finish(s + 1);
    Ok(())
}

/// Folds one piece of every member's buffer into `acc`: `read(j, into)`
/// reads member j's; `mine` is my own (`None`: it is in `acc` already,
/// which only a commutative operation allows); `t` is scratch of the
/// piece's length. In rank order right to left as [`fold`] does
/// (`d0 ⊕ (d1 ⊕ (...))`), or, for a commutative operation, the others' first
/// (the first straight into `acc` when it does not hold mine), each member
/// starting after itself: the kernel locks a process's page table for every
/// page it copies, and members that all began with member 0 queued on that
/// lock (docs/BENCHMARKS.md, session 7).
fn fold_piece(
    g: &Group,
    acc: &mut [u8],
    mine: Option<&[u8]>,
    t: &mut [u8],
    op: &Combine<'_>,
    commutative: bool,
    mut read: impl FnMut(usize, &mut [u8]) -> Result<()>,
) -> Result<()> {
    let (m, me) = (g.slots.len(), g.me);
    if commutative {
        let mut others = (1..m).map(|d| (me + d) % m);
        if mine.is_some() {
            read(others.next().expect("two members at least"), acc)?;
        }
        for j in others {
            read(j, t)?;
            op(t, acc);
        }
        if let Some(p) = mine {
            op(p, acc);
        }
        return Ok(());
    }
    let mine = mine.expect("a rank-order fold keeps my piece apart");
    for j in (0..m).rev() {
        match (j == m - 1, j == me) {
            (true, true) => acc.copy_from_slice(mine),
            (true, false) => read(j, acc)?,
            (false, true) => op(mine, acc),
            (false, false) => {
                read(j, t)?;
                op(t, acc);
            }
        }
    }
    Ok(())
}

/// Allreduce of `buf` (`elem`-byte elements) by single copy between the
/// members' buffers: reduce-scatter, then allgather (see the module doc).
// The collective's arguments, as the other entry points take them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn allreduce_single_copy(
    e: &mut Guard<'_>,
    g: &mut Group,
    buf: &mut [u8],
    elem: usize,
    op: &Combine<'_>,
    commutative: bool,
    info: WaitInfo,
) -> Result<()> {
    let n = buf.len();
    // Commutative: each member writes its reduced pieces into the others'
    // buffers as soon as they are folded, instead of everyone reading them
    // after a second round (module doc); one round of publishing ends it.
    let write_through = commutative;
    let s = begin(e, g, if write_through { 2 } else { 3 }, info)?;
    g.kind = kind(K_ALLREDUCE_COPY, 0, n);
    let (m, me) = (g.slots.len(), g.me);
    let peers = exchange_bufs(e, g, s, buf, "allreduce", info)?;
    // Block j (whole elements, as even as possible) is member j's to reduce.
    let block = |j: usize| block_of(n / elem, m, elem, j);
    // Reduce my block in pieces that stay in cache (`KUMI_COLL_PIECE`),
    // reading the others' pieces into scratch buffers kept from call to call
    // (a fresh pair would cost zeroing and page faults every time).
    let piece = (e.svc.coll.config().allreduce_piece / elem).max(1) * elem;
    let mine = block(me);
    let others = || (1..m).map(|k| (me + k) % m).map(|j| (j, &peers[j]));
    SCRATCH.with_borrow_mut(|[r, t]| -> Result<()> {
        for b in [&mut *r, &mut *t] {
            if b.bytes().len() < piece.min(mine.len()) {
                *b = AlignedBuf::zeroed(piece);
            }
        }
        let mut off = mine.start;
        while off < mine.end {
            let len = piece.min(mine.end - off);
            let (r, t) = (&mut r.bytes_mut()[..len], &mut t.bytes_mut()[..len]);
            let read = |j: usize, into: &mut [u8]| {
                let (pid, addr, _) = peers[j];
                cma::read_from(pid, addr + off as u64, into)
                    .map_err(|x| copy_error("reading", len, g.slots[j], x))
            };
            if write_through {
                // Every other member's piece folded straight into mine, with
                // no copy of it; then, while the reduced piece is in this
                // core's cache, written into every other member's buffer.
                fold_piece(g, &mut buf[off..off + len], None, t, op, true, read)?;
                for (j, &(pid, addr, _)) in others() {
                    cma::write_to(pid, addr + off as u64, &buf[off..off + len])
                        .map_err(|x| copy_error("writing", len, g.slots[j], x))?;
                }
            } else {
                // Rank order: into scratch (my piece is folded after the
                // others'), then into place.
                fold_piece(g, r, Some(&buf[off..off + len]), t, op, false, read)?;
                buf[off..off + len].copy_from_slice(r);
            }
            off += len;
        }
        Ok(())
    })?;
    publish_at(e, g, s + 1);
    wait_all(e, g, s + 1, info)?;
    if write_through {
        // Every member has written its reduced block into every buffer.
        g.finish(s + 1);
        return Ok(());
    }
    for (j, &(pid, addr, _)) in peers.iter().enumerate() {
        let b = block(j);
        if j != me && !b.is_empty() {
            let len = b.len();
            cma::read_from(pid, addr + b.start as u64, &mut buf[b])
                .map_err(|x| copy_error("reading", len, g.slots[j], x))?;
        }
    }
    publish_at(e, g, s + 2);
    // Others may still read my block until they publish.
    wait_all(e, g, s + 2, info)?;
    g.finish(s + 2);
    Ok(())
}

/// Reduce-scatter by single copy, for contributions longer than a payload
/// half: every member publishes its `send` buffer, member i reads bytes
/// `mine` (its block) of every other member's, a piece at a time through
/// a scratch buffer, and folds them into `recv`, in rank order as [`fold`]
/// does (`d0 ⊕ (d1 ⊕ (...))`; in any order for a commutative operation); a
/// second round tells every member that nobody reads its buffer any more.
/// Each member reads (m-1)/m of its block's bytes from others and no byte
/// goes through the area or the rings.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reduce_scatter_single_copy(
    e: &mut Guard<'_>,
    g: &mut Group,
    send: &[u8],
    mine: std::ops::Range<usize>,
    recv: &mut [u8],
    elem: usize,
    op: &Combine<'_>,
    commutative: bool,
    info: WaitInfo,
) -> Result<()> {
    let n = send.len();
    let s = begin(e, g, 2, info)?;
    g.kind = kind(K_REDUCE_SCATTER_COPY, 0, n);
    let peers = exchange_bufs(e, g, s, send, "reduce-scatter", info)?;
    let piece = (e.svc.coll.config().allreduce_piece / elem).max(1) * elem;
    let out = &mut recv[..mine.len()];
    SCRATCH.with_borrow_mut(|[_, t]| -> Result<()> {
        if t.bytes().len() < piece.min(out.len()) {
            *t = AlignedBuf::zeroed(piece);
        }
        let mut off = 0;
        while off < out.len() {
            let len = piece.min(out.len() - off);
            let at = mine.start + off;
            let (acc, t) = (&mut out[off..off + len], &mut t.bytes_mut()[..len]);
            let read = |j: usize, into: &mut [u8]| {
                let (pid, addr, _) = peers[j];
                cma::read_from(pid, addr + at as u64, into)
                    .map_err(|x| copy_error("reading", len, g.slots[j], x))
            };
            fold_piece(g, acc, Some(&send[at..at + len]), t, op, commutative, read)?;
            off += len;
        }
        Ok(())
    })?;
    publish_at(e, g, s + 1);
    // Others may still read my buffer until they publish.
    wait_all(e, g, s + 1, info)?;
    g.finish(s + 1);
    Ok(())
}

/// Reduce by single copy, for contributions of `n` bytes longer than a
/// payload half: every member publishes where its contribution is (`own`;
/// at the root, `None` when it is already in `out`, in place) and the root
/// also where the result goes (`out`, empty elsewhere). Member i folds block
/// i of every contribution, a piece at a time (into the root's `out`
/// directly at the root, through scratch elsewhere), in rank order as
/// [`fold`] does (any order for a commutative operation), and writes each
/// finished piece into the root's `out` while it is in cache. Block i of
/// the root's buffers is only touched by member i, so in place is safe. No
/// member copies its whole contribution, and no byte goes through the area
/// or the rings; a second round tells the root its result is complete and
/// every member that nobody reads its contribution any more.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reduce_single_copy(
    e: &mut Guard<'_>,
    g: &mut Group,
    own: Option<&[u8]>,
    out: &mut [u8],
    elem: usize,
    op: &Combine<'_>,
    commutative: bool,
    root: usize,
    info: WaitInfo,
) -> Result<()> {
    let n = own.map_or(out.len(), <[u8]>::len);
    let s = begin(e, g, 2, info)?;
    g.kind = kind(K_REDUCE_COPY, root, n);
    let (k, m, me) = (g.area, g.slots.len(), g.me);
    let from = own.map_or(out.as_ptr(), <[u8]>::as_ptr) as u64;
    let to = if me == root { out.as_ptr() as u64 } else { 0 };
    publish_card(e, g, s, [from, n as u64, to], info)?;
    wait_all(e, g, s, info)?;
    let peers: Vec<(i32, [u64; 3])> = {
        let a = area(e, k);
        (0..m).map(|j| peer_card(&a, e, g, j, s)).collect()
    };
    if let Some(j) = peers.iter().position(|p| p.1[1] != n as u64) {
        return Err(Error::Protocol(format!(
            "reduce of {n} bytes met one of {} (member {j})",
            peers[j].1[1]
        )));
    }
    let (root_pid, result) = (peers[root].0, peers[root].1[2]);
    let mine = block_of(n / elem, m, elem, me);
    let piece = (e.svc.coll.config().allreduce_piece / elem).max(1) * elem;
    SCRATCH.with_borrow_mut(|[r, t]| -> Result<()> {
        for b in [&mut *r, &mut *t] {
            if b.bytes().len() < piece.min(mine.len()) {
                *b = AlignedBuf::zeroed(piece);
            }
        }
        let mut at = mine.start;
        while at < mine.end {
            let len = piece.min(mine.end - at);
            let read = |j: usize, into: &mut [u8]| {
                let (pid, [addr, ..]) = peers[j];
                cma::read_from(pid, addr + at as u64, into)
                    .map_err(|x| copy_error("reading", len, g.slots[j], x))
            };
            let t = &mut t.bytes_mut()[..len];
            // Where the result piece forms (at the root its own result
            // buffer, elsewhere scratch) and my contribution's piece: `None`
            // when it is already there (in place at the root). A rank-order
            // fold needs my piece after the others', so it keeps a copy.
            let (acc, mine_piece): (&mut [u8], Option<&[u8]>) = match own {
                Some(own) if me == root => (&mut out[at..at + len], Some(&own[at..at + len])),
                Some(own) => (&mut r.bytes_mut()[..len], Some(&own[at..at + len])),
                None if commutative => (&mut out[at..at + len], None),
                None => {
                    let r = &mut r.bytes_mut()[..len];
                    r.copy_from_slice(&out[at..at + len]);
                    (&mut out[at..at + len], Some(&*r))
                }
            };
            fold_piece(g, acc, mine_piece, t, op, commutative, read)?;
            if me != root {
                cma::write_to(root_pid, result + at as u64, acc)
                    .map_err(|x| copy_error("writing", len, g.slots[root], x))?;
            }
            at += len;
        }
        Ok(())
    })?;
    publish_at(e, g, s + 1);
    wait_all(e, g, s + 1, info)?;
    g.finish(s + 1);
    Ok(())
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
            let a = area(e, g.area);
            for j in (0..g.slots.len()).filter(|&j| j != root) {
                op(a.bytes(g.slots[j], (s & 1) as usize, len, 0, len), acc);
            }
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
/// as [`allreduce_long`] does and keeps the faster (as there, the winner
/// depends on the machine: docs/BENCHMARKS.md, sessions 6 and 11).
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
/// (see [`Whose`]) by an allreduce of their fastest, and keep the faster way.
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
            if best[1] < best[0] {
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
/// that the others fold, folds its own block from everyone's half into its
/// buffer, publishes that result in its other half, and copies the others'
/// results out. Two collective numbers per chunk; no system call and no
/// page pinning, for four copies of every byte where single copy makes two
/// (`area_fits` must hold).
pub(crate) fn allreduce_area(
    e: &mut Guard<'_>,
    g: &mut Group,
    buf: &mut [u8],
    elem: usize,
    op: &Combine<'_>,
    info: WaitInfo,
) -> Result<()> {
    let (n, m, me) = (buf.len(), g.slots.len(), g.me);
    // Whole elements, the same number of bytes per member (the last chunk
    // may be shorter), so a chunk fits a payload half.
    let chunk = (g.payload / (m * elem)) * m * elem;
    debug_assert!(chunk > 0, "area_fits");
    g.kind = kind(K_ALLREDUCE_AREA, 0, n);
    let mut off = 0;
    while off < n {
        let len = chunk.min(n - off);
        // Member j folds block j of the chunk.
        let block = |j: usize| block_of(len / elem, m, elem, j);
        let s = begin(e, g, 2, info)?;
        let (inputs, results) = ((s & 1) as usize, ((s + 1) & 1) as usize);
        wait_writable(e, g, s, info)?;
        {
            let a = area(e, g.area);
            for j in (0..m).filter(|&j| j != me) {
                let b = block(j);
                a.write(
                    g.my_slot(),
                    inputs,
                    len,
                    b.start,
                    &buf[off + b.start..off + b.end],
                );
            }
        }
        publish_at(e, g, s);
        wait_all(e, g, s, info)?;
        let mine = block(me);
        {
            let a = area(e, g.area);
            let dst = &mut buf[off + mine.start..off + mine.end];
            for k in 1..m {
                let j = (me + k) % m;
                op(
                    a.bytes(g.slots[j], inputs, len, mine.start, mine.len()),
                    dst,
                );
            }
            // The results' half is free: every member has entered `s`, so
            // all are done with collective `s - 1`, the last to use it.
            a.write(g.my_slot(), results, len, mine.start, dst);
        }
        publish_at(e, g, s + 1);
        wait_all(e, g, s + 1, info)?;
        {
            let a = area(e, g.area);
            for j in (0..m).filter(|&j| j != me) {
                let b = block(j);
                a.read(
                    g.slots[j],
                    results,
                    len,
                    b.start,
                    &mut buf[off + b.start..off + b.end],
                );
            }
        }
        g.finish(s + 1);
        off += len;
    }
    Ok(())
}

/// Bytes of block `j` of `count` elements of `elem` bytes split among `m`
/// members: whole elements, as even as possible, the first ones one longer.
fn block_of(count: usize, m: usize, elem: usize, j: usize) -> std::ops::Range<usize> {
    let (q, r) = (count / m, count % m);
    let start = (j * q + j.min(r)) * elem;
    start..start + (q + usize::from(j < r)) * elem
}

/// A nonblocking barrier or allreduce through the area, advanced by the
/// engine's `progress` (so the progress thread serves it while the
/// application computes). It publishes only once every earlier collective
/// of the group has completed here (see `begin`), then completes when every
/// member has published.
pub(crate) struct Pending {
    area: usize,
    slots: Arc<[usize]>,
    me: usize,
    s: u64,
    completed: Arc<AtomicU64>,
    published: bool,
    done: bool,
    /// The collective's kind (the same as its blocking twin's).
    kind: u64,
    /// Allreduce: the contribution, then the result, and the operation.
    pub data: Option<(AlignedBuf, super::exec::ByteOp)>,
}

impl Pending {
    /// Starts the next collective of `g`: a barrier, or with `data` an
    /// allreduce (at most one payload half).
    pub fn start(
        e: &mut Engine,
        g: &mut Group,
        data: Option<(AlignedBuf, super::exec::ByteOp)>,
    ) -> Pending {
        let mut p = Pending {
            area: g.area,
            slots: g.slots.clone(),
            me: g.me,
            s: g.take(1),
            completed: g.completed.clone(),
            published: false,
            done: false,
            kind: match &data {
                Some((buf, _)) => kind(K_ALLREDUCE, 0, buf.bytes().len()),
                None => kind(K_BARRIER, 0, 0),
            },
            data,
        };
        // Publish at once if possible: the others may be waiting for it.
        p.poll(e);
        p
    }

    /// Advances; `true` once complete.
    pub fn poll(&mut self, e: &mut Engine) -> bool {
        if self.done {
            return true;
        }
        let s = self.s;
        let shm = e.shm().expect("shared memory");
        let a = shm.segment().coll_area(self.area);
        let mine = self.slots[self.me];
        if !self.published {
            if self.completed.load(Ordering::Relaxed) + 1 < s {
                return false;
            }
            if let Some((buf, _)) = &self.data {
                if !writable(&a, &self.slots, s) {
                    return false;
                }
                let b = buf.bytes();
                a.write(mine, (s & 1) as usize, b.len(), 0, b);
            }
            publish(&a, &self.slots, mine, s, self.kind, |j| shm.wake(j));
            self.published = true;
        }
        if !all_reached_as(&a, &self.slots, s, self.kind) {
            return false;
        }
        if let Some((buf, op)) = &mut self.data {
            let b = buf.bytes_mut();
            let (n, half) = (b.len(), (s & 1) as usize);
            let last = self.slots.len() - 1;
            b.copy_from_slice(a.bytes(self.slots[last], half, n, 0, n));
            for k in (0..last).rev() {
                op(a.bytes(self.slots[k], half, n, 0, n), b);
            }
        }
        self.completed.store(s, Ordering::Relaxed);
        self.done = true;
        true
    }
}
