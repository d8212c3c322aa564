//! Collectives inside one host through the segment's collective areas
//! (`kumi_transport::shm::coll_area`): each rank runs once per collective and
//! touches one cache line (or its contribution's lines) per member, instead
//! of lg p rounds of messages through the rings and the matching engine.
//!
//! A member's contribution to a collective lies where its length puts it
//! (`coll_area::placement`): up to 48 bytes in the collective's entry line,
//! up to a piece (4 KiB up to 8 ranks on a host) in one of the slot's
//! `PIECES` pieces, longer in a section of one of its two payload halves
//! (`coll_area::section`: a 16th of a half, 8 KiB up to 8 ranks, up to the
//! whole half). Below, "a payload half" is the most one contribution holds.
//! A writer may run up to `DEPTH - 1` collectives ahead of the slowest
//! member through entries, `PIECES - 1` through pieces, 31 through the
//! smallest sections and one through whole halves (`coll_area::writable`),
//! so back-to-back rooted collectives of up to a few sections do not run
//! in lock-step.
//!
//! A communicator's *local group* is its members on this host (on a pretend
//! host with `KUMI_COLL_HOSTS`). Every member finds the same area for it, or
//! every member finds none (see the area's module doc), and the choice of path
//! depends only on what all members share (sizes, configuration), so the
//! members always agree whether a collective runs here or through messages.
//!
//! - barrier: publish, wait until every member has: one line read per member.
//! - allreduce of at most one payload half (and, where single copy is on,
//!   shorter than `KUMI_COLL_COPY_MIN`; longer ones go the long way, below):
//!   write, publish, wait for all, fold every half in rank order (right to
//!   left, `d0 ⊕ (d1 ⊕ (...))`), the same on every member, so the results
//!   are bitwise identical and user operations need not be commutative.
//! - reduce: the same, only the root waits and folds.
//! - scan and exscan, in chunks of a payload half: every member writes its
//!   own and folds those of the members before it; with more than two
//!   members a core, a chain instead, each member folding only the prefix
//!   the one before it published into its own and publishing that
//!   ([`scan_chains`]).
//! - bcast: the root writes the data, the others copy it out; longer messages
//!   go in chunks of one payload half, two chunks in flight.
//! - alltoall with `size() * block` at most one payload half: every rank
//!   writes its blocks for the others (its own it copies straight across),
//!   then copies its block out of every other slot.
//!   Alltoallv (and a longer alltoall): the blocks of at most a member's
//!   share of a half at once, the longer ones in rounds of a share, as many
//!   as the longest block of all needs, or, where single copy is on and a
//!   block is long (`KUMI_COLL_ALLTOALL_COPY_MIN`), read straight out of
//!   the sender's buffer (see [`alltoallv`]). A longer alltoall where
//!   single copy is on: every member reads its block straight out of every
//!   other's buffer.
//! - gather of one payload half per member at most: every member writes its
//!   block, the root waits and copies every slot's out; scatter of one
//!   payload half in all: the root writes every block but its own, each
//!   member copies its own; reduce-scatter of one payload half (where
//!   single copy is on, shorter than `KUMI_COLL_COPY_MIN`; from it by
//!   single copy): every
//!   member writes its send buffer and folds its own block of every slot,
//!   as allreduce folds;
//!   allgather(v): every member writes its block and copies every other's
//!   out, in rounds of a payload half where blocks are longer
//!   (`Comm::allgather_area`), or, where single copy is on and a block is
//!   long (`KUMI_COLL_ALLGATHER_COPY_MIN`), reads every other's straight
//!   out of its buffer.
//! - gatherv and scatterv, member by member: a member's block goes through
//!   the area if it fits its place there and, where single copy is on, is
//!   shorter than `KUMI_COLL_COPY_MIN` (a gather's: than
//!   `KUMI_COLL_GATHER_COPY_MIN`) ([`Rooted`]; the root knows every
//!   length, a member its own, so the two agree without a message), else
//!   as a message (by single copy where on, even below the eager limit); a
//!   gather or scatter of equal blocks that the area does not carry goes all
//!   by messages. The messages go in the same call; every member also takes
//!   the call's message tag, used or not, so the tags of later collectives
//!   agree. A neighbourhood exchange's pairs follow the same rule.
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
//!   chunks of a payload half ([`long`], `allreduce_area`): no system call and no
//!   page pinning, for twice the copies. Which is faster depends on the
//!   machine (docs/BENCHMARKS.md, session 11), so by default each
//!   communicator times both and keeps single copy unless the area was
//!   twice as fast ([`allreduce_long`]); the members agree on the outcome
//!   through an allreduce of the times, so none goes its own way.
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
//! - scan and exscan, where single copy is on, from `KUMI_COLL_COPY_MIN`,
//!   with a core per member: an exclusive scan's member reads its left
//!   neighbour's contribution straight into its result, an inclusive one's
//!   starts from its own, and each folds the others' out of their buffers,
//!   right to left; the nonblocking forms alike ([`Pending`]).
//!
//! The nonblocking collectives run through the area too ([`Pending`]): they
//! publish when started (if every earlier collective of the group has
//! completed here) and complete in the engine's progress; a longer
//! `iallreduce` or `ireduce_scatter`, and the allgather(v), alltoall,
//! broadcast, scan and exscan that their blocking twins move by single
//! copy, go by single copy too, round by round.
//!
//! `KUMI_COLL_SHM=off` turns all of this off (every collective then runs
//! through messages, as before); single copy off (`KUMI_SINGLE_COPY=off`,
//! or `auto` on a host where it does not pay, or a kernel that refuses,
//! simulated by `KUMI_TEST_DENY_CMA=1`) leaves the long messages to the
//! chunked area (bcast, commutative allreduce) and the message algorithms
//! (other allreduces). The choice must be the same on every rank, so it is
//! the host's, made once by the creator of its segment, not a trial of the
//! kernel's permission by each rank: a rank whose kernel refuses a copy
//! mid-collective returns an error naming `KUMI_SINGLE_COPY` rather than
//! disagree with its peers
//! (which wait for it until the program ends or the deadlock detector
//! reports them).

//!
//! Submodules: `single` holds the single-copy collectives, `long` the
//! choice between single copy and the area for long calls (the trial) and
//! the area's chunked paths, `pending` the nonblocking collectives
//! ([`Pending`]); the area primitives and the short collectives stay here.
use super::exec::AlignedBuf;
use super::ops::Op;
use crate::engine::{Engine, WaitInfo};
use crate::error::{Error, Result};
use crate::progress::Guard;
use kumi_transport::cma;
use kumi_transport::shm::coll_area::{
    self, all_reached_as, all_reached_naming, claim, group_key, progress, publish, reached_as,
    writable_after, AreaMem, CollArea, HalfUses, AREAS,
};
use kumi_transport::shm::ShmTransport;
use kumi_transport::Capabilities;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

mod long;
mod pending;
mod place;
mod single;

use long::Long;
pub(crate) use long::{
    allgather_by_copy, allreduce_long, alltoall_by_copy, area_fits, bcast_long, iallreduce_way,
    ibcast_by_copy, ireduce_in_area, ireduce_scatter_way, long_reduction, reduce_long,
    reduce_scatter_area, reduce_scatter_way, scan_by_copy, short_bcast_by_copy,
};
pub(crate) use pending::{Copied, Pending, Reducing, Reduction};
use place::others_at;
pub(crate) use place::{
    neighbor_long, neighbor_place, pair_word, scatterv_place, Packed, Rooted, Spot,
};
pub(crate) use single::{
    allgather_single_copy, allreduce_single_copy, alltoall_single_copy, bcast_single_copy,
    reduce_scatter_single_copy, reduce_single_copy, scan_single_copy, Directory,
};

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
    mates: Option<Arc<[usize]>>,
    /// Bytes of a payload half.
    pub payload: usize,
    /// Last collective number used.
    seq: u64,
    /// What this rank knows of its slot's storage being free (shared with
    /// the nonblocking ones in flight).
    storage: Arc<Storage>,
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
/// the faster (`long::tried`); `Single`: by single copy, unless single copy is
/// off; `Area`: through the area.
pub(crate) use kumi_core::config::CopyMode as LongCopy;

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
const K_SCAN: u64 = 19;
const K_EXSCAN: u64 = 20;
const K_NEIGHBOR: u64 = 21;
const K_REDUCE_SCATTER_AREA: u64 = 22;
const K_INEIGHBOR: u64 = 23;
const K_ALLGATHER_COPY: u64 = 24;
const K_ALLTOALL_COPY: u64 = 25;
const K_EXSCAN_COPY: u64 = 26;
const K_SCAN_CHAIN: u64 = 27;
const K_EXSCAN_CHAIN: u64 = 28;

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
            storage: Arc::default(),
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

/// Whether a publisher fences fully before it looks for sleepers
/// (`coll_area::publish`): with the transport's asymmetric fences a sleeper's
/// `membarrier` does it, but in a group that names whom it waits for
/// ([`NAMING_FROM`]) a member may change the name after its `membarrier`,
/// and that store and the publisher's need a fence each.
fn full_fence(shm: &ShmTransport, slots: &[usize]) -> bool {
    shm.full_fences() || slots.len() > NAMING_FROM
}

fn area(e: &Engine, k: usize) -> CollArea<'_> {
    e.shm()
        .expect("a rank with a collective area has shared memory")
        .segment()
        .coll_area(k)
}

fn publish_at(e: &Engine, g: &Group, s: u64) {
    let shm = e.shm().expect("shared memory");
    let a = shm.segment().coll_area(g.area);
    publish(
        &a,
        &g.slots,
        g.my_slot(),
        s,
        g.kind,
        full_fence(shm, &g.slots),
        |j| shm.wake(j),
    );
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
/// rank keeps its core ([`wait_keeping_core`]).
fn wait_all_reached(e: &mut Guard<'_>, g: &Group, s: u64, info: WaitInfo) -> Result<()> {
    wait_keeping_core(e, g, s, info, |a| g.all_reached(a, s))?;
    saw_all(&g.storage.seen_all, s);
    Ok(())
}

/// Waits until `cond` holds on the area, keeping the core while every other
/// member bound to it has reached collective `s`
/// ([`Engine::wait_until_with_mates`]; so does a rank alone on its core,
/// which has nobody to hand it to): what this rank waits for then comes
/// from other cores, and handing the core to a mate only has it hand the
/// core back.
fn wait_keeping_core(
    e: &mut Guard<'_>,
    g: &Group,
    s: u64,
    info: WaitInfo,
    cond: impl Fn(&CollArea<'_>) -> bool,
) -> Result<()> {
    let k = g.area;
    e.wait_until_with_mates(
        info,
        |e| cond(&area(e, k)),
        |e| {
            g.mates
                .as_ref()
                .is_some_and(|m| all_reached_as(&area(e, k), m, s, g.kind))
        },
    )
}

/// Waits until every member has reached collective `s` as this one.
fn wait_all(e: &mut Guard<'_>, g: &Group, s: u64, info: WaitInfo) -> Result<()> {
    wait(e, info, g.area, |a| g.all_reached(a, s))?;
    saw_all(&g.storage.seen_all, s);
    Ok(())
}

/// Waits until my contribution of `total` bytes to collective `s` is
/// writable ([`writable_seen`]), unless this rank has already seen every member
/// get far enough (in an earlier collective or look): then it is, and
/// looking again would only pull the other members' lines into this core's
/// cache once more. That earlier Acquire orders the writes that follow as
/// `writable`'s would. A look notes how far the slowest member is, so a
/// writer running ahead of its readers (a root of back-to-back short
/// broadcasts) looks once per few collectives, not once per collective.
fn wait_writable(e: &mut Guard<'_>, g: &Group, s: u64, total: usize, info: WaitInfo) -> Result<()> {
    let writable = |a: &CollArea<'_>| writable_seen(a, &g.slots, s, total, &g.storage);
    if writable(&area(e, g.area)) {
        return Ok(());
    }
    wait(e, info, g.area, writable)
}

/// What a member knows of its slot's storage being free: how far it has
/// seen every member get, and which collectives last wrote its halves.
/// Relaxed, as `Group::completed`: only the thread holding the engine
/// touches it, and the engine's mutex orders that (and carries the Acquire
/// that saw the members to whichever thread writes next).
#[derive(Debug, Default)]
pub(crate) struct Storage {
    /// Every member is known to have entered this collective (this rank saw
    /// it with Acquire loads), so storage it frees is writable without
    /// looking again ([`writable_seen`]).
    seen_all: AtomicU64,
    /// See [`coll_area::writable_after`].
    halves: HalfUses,
}

/// Whether my contribution of `total` bytes to collective `s` is writable
/// ([`coll_area::writable`], which notes `s` in the record of my halves):
/// at once if this rank has already seen every member get far enough (in
/// an earlier collective or look; that Acquire orders the writes that
/// follow as `writable`'s would), else by looking at every member's
/// progress and noting the slowest's.
fn writable_seen(
    a: &CollArea<'_>,
    slots: &[usize],
    s: u64,
    total: usize,
    storage: &Storage,
) -> bool {
    let (seen, after) = (
        &storage.seen_all,
        writable_after(a, s, total, &storage.halves),
    );
    if seen.load(Ordering::Relaxed) >= after {
        return true;
    }
    let slowest = slots.iter().map(|&i| progress(a, i)).min().unwrap_or(s);
    saw_all(seen, slowest);
    slowest >= after
}

/// Notes that every member has entered collective `s` (seen with Acquire).
fn saw_all(seen: &AtomicU64, s: u64) {
    // Relaxed, and no read-modify-write: see `Storage` (one thread at a
    // time).
    if seen.load(Ordering::Relaxed) < s {
        seen.store(s, Ordering::Relaxed);
    }
}

/// Takes the next `k` collective numbers for a blocking collective, after
/// the group's nonblocking ones before it have completed: publishing `s`
/// tells the others this rank is done with everything up to `s - 1` (so
/// they may overwrite what `s - 1` used, from `s + 1` on), which a
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

/// Writes my contribution of collective `s` (waiting until its storage is
/// free).
fn contribute(e: &mut Guard<'_>, g: &Group, s: u64, data: &[u8], info: WaitInfo) -> Result<()> {
    wait_writable(e, g, s, data.len(), info)?;
    if !data.is_empty() {
        area(e, g.area).write(g.my_slot(), s, data.len(), 0, data);
    }
    publish_at(e, g, s);
    Ok(())
}

/// `buf = d0 ⊕ (d1 ⊕ (... ⊕ d_last))` over every member's contribution to
/// `s`, where `buf` holds this member's own: the last member's, the
/// rightmost operand, is already in place (a copy of up to a payload half
/// saved).
fn fold(a: &CollArea<'_>, g: &Group, s: u64, buf: &mut [u8], op: &Combine<'_>) {
    fold_at(a, g, s, buf.len(), 0, buf, op, g.me + 1 == g.slots.len());
}

/// [`fold`] of bytes `off..off + buf.len()` of contributions of `total`
/// bytes; `in_place`: `buf` holds the last member's already.
#[allow(clippy::too_many_arguments)]
fn fold_at(
    a: &CollArea<'_>,
    g: &Group,
    s: u64,
    total: usize,
    off: usize,
    buf: &mut [u8],
    op: &Combine<'_>,
    in_place: bool,
) {
    let n = buf.len();
    let last = g.slots.len() - 1;
    if !in_place {
        let src = a.bytes(g.slots[last], s, total, off, n);
        // SAFETY: both are `n` bytes (`bytes` returns exactly `n`), and the
        // area (kumi's own mapping, private to the collectives) is no
        // caller's buffer. (Not `copy_from_slice`: for an 8-byte allreduce,
        // a call into `memcpy` cost more than the copy.)
        unsafe { kumi_transport::copy_bytes(src.as_ptr(), buf.as_mut_ptr(), n) };
    }
    for k in (0..last).rev() {
        op(a.bytes(g.slots[k], s, total, off, n), buf);
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
    (op, commutative): (&Combine<'_>, bool),
    root: usize,
    info: WaitInfo,
) -> Result<()> {
    let s = begin(e, g, 1, info)?;
    let mine: &[u8] = match &side {
        Side::Root(b) => b,
        Side::Give(b) => b,
    };
    g.kind = kind(K_REDUCE, root, mine.len());
    match side {
        // Nobody reads the root's contribution: with an operation that
        // commutes it publishes none and folds the others' straight into
        // its own (two copies of the vector fewer than in rank order).
        Side::Root(buf) if commutative => {
            publish_at(e, g, s);
            wait_all(e, g, s, info)?;
            fold_into_own(&area(e, g.area), &g.slots, g.me, s, buf, op);
        }
        Side::Root(buf) => {
            contribute(e, g, s, buf, info)?;
            wait_all(e, g, s, info)?;
            fold(&area(e, g.area), g, s, buf, op);
        }
        Side::Give(b) => contribute(e, g, s, b, info)?,
    }
    g.finish(s);
    Ok(())
}

/// `buf = d_j ⊕ buf` for every member j but `me`, in member order, over
/// their contributions of `buf.len()` bytes to `s`: a commutative fold
/// into this member's own contribution, in `buf` (published by nobody).
fn fold_into_own(
    a: &CollArea<'_>,
    slots: &[usize],
    me: usize,
    s: u64,
    buf: &mut [u8],
    op: &Combine<'_>,
) {
    let n = buf.len();
    for (_, &slot) in slots.iter().enumerate().filter(|&(j, _)| j != me) {
        op(a.bytes(slot, s, n, 0, n), buf);
    }
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
    fold_at(
        &area(e, g.area),
        g,
        s,
        send.len(),
        mine.start,
        recv,
        op,
        false,
    );
    g.finish(s);
    Ok(())
}

/// A neighbourhood exchange inside the group (`Comm::neighbor_each`): this
/// member's messages `sends[k] = (member, bytes, len)` in order, and its
/// receives `recvs[k] = (member, where, room)` in order; between two
/// members the k-th message one sends is the k-th the other receives.
///
/// Each member writes a directory of its messages (to whom, how long) and,
/// in order, those of at most a quarter of a payload half that fit its
/// payload half after it; a header in its entry says where that body lies
/// (its length places it). Then it publishes, waits for the members it
/// receives short messages from, and copies from each body the messages
/// addressed to it, in order. Whoever sends nothing to a member never waits
/// for it, so members run ahead as in a gather. Returns the indices of the
/// sends and of the receives left to messages (the longer ones, which both
/// ends know by their length, as MPI requires the two to agree, and the
/// short ones that did not fit, which the directory names), which the
/// caller moves in the same call: a long one through the area would cost
/// an extra copy and a wait for its sender before the messages start
/// (docs/BENCHMARKS.md, session 41).
///
/// # Safety
/// Every `sends` pointer readable and every `recvs` one writable for its
/// length, the latter overlapping nothing, for the call.
pub(crate) unsafe fn neighbor(
    e: &mut Guard<'_>,
    g: &mut Group,
    sends: &[(usize, *const u8, usize)],
    recvs: &[(usize, *mut u8, usize)],
    info: WaitInfo,
) -> Result<(Vec<usize>, Vec<usize>)> {
    const BY_MESSAGE: u32 = u32::MAX;
    const HEADER: usize = 16;
    let s = begin(e, g, 1, info)?;
    g.kind = kind(K_NEIGHBOR, 0, 0);
    let (payload, k, me_slot) = (g.payload, g.area, g.my_slot());
    // A longer message goes as a message, as a rooted collective's block
    // does ([`Rooted`]).
    let short = (payload / 4).min(Rooted::of(e, g).longest());
    // The body: 8 bytes of directory per message, then the messages that
    // fit, in order. No room even for the directory: every one by message.
    let dir = 8 * sends.len();
    // Whether a send of `n` bytes fits behind a body of `body` bytes so far
    // (asked in the sends' order, here and when writing them).
    let fits = |body: usize, n: usize| dir <= payload && n <= short && n <= payload - body;
    let mut body = dir;
    let mut left_sends = Vec::new();
    for (i, &(_, _, n)) in sends.iter().enumerate() {
        if fits(body, n) {
            body += n;
        } else {
            left_sends.push(i);
        }
    }
    let count = if dir <= payload {
        sends.len() as u64
    } else {
        u64::MAX
    };
    // Where the body goes: beside the header in the entry when both fit
    // there, else placed by its length (more than the entry's inline bytes).
    let (body_total, body_at) = if dir > payload {
        (0, 0)
    } else if HEADER + body <= coll_area::INLINE {
        (coll_area::INLINE, HEADER)
    } else {
        (body.max(coll_area::INLINE + 1), 0)
    };
    wait_writable(e, g, s, body_total.max(HEADER), info)?;
    {
        let a = area(e, k);
        let header = [u64::from(body_at == 0) * body_total as u64, count];
        a.write(me_slot, s, HEADER, 0, bytemuck::cast_slice(&header));
        if count != u64::MAX {
            let mut at = body_at + dir;
            for (i, &(to, p, n)) in sends.iter().enumerate() {
                let fit = fits(at - body_at, n);
                let len = if fit { n as u32 } else { BY_MESSAGE };
                let entry = [to as u32, len];
                a.write(
                    me_slot,
                    s,
                    body_total,
                    body_at + 8 * i,
                    bytemuck::cast_slice(&entry),
                );
                if fit && n > 0 {
                    // SAFETY: the caller vouches for `n` readable bytes.
                    a.write(me_slot, s, body_total, at, unsafe {
                        std::slice::from_raw_parts(p, n)
                    });
                    at += n;
                }
            }
        }
    }
    publish_at(e, g, s);
    // The members that may send me a short message.
    let mut sources: smallvec::SmallVec<[usize; 16]> = recvs
        .iter()
        .filter(|&&(_, _, room)| room <= short)
        .map(|&(j, _, _)| j)
        .collect();
    sources.sort_unstable();
    sources.dedup();
    // A mate that has reached `s` may have completed it already (its
    // sources came) and be back in the program, which keeping the core
    // delays by at most `KUMI_MATE_SPIN_US`; measured, it pays
    // (docs/BENCHMARKS.md, session 53).
    wait_keeping_core(e, g, s, info, |a| {
        sources
            .iter()
            .all(|&j| reached_as(a, g.slots[j], s, g.kind))
    })?;
    let a = area(e, k);
    let me = g.me;
    // From the others, only long messages.
    let mut left_recvs: Vec<usize> = (0..recvs.len())
        .filter(|&i| sources.binary_search(&recvs[i].0).is_err())
        .collect();
    for &j in &sources {
        let slot = g.slots[j];
        let mut h = [0u64; 2];
        a.read(slot, s, HEADER, 0, bytemuck::cast_slice_mut(&mut h));
        let mine = recvs.iter().enumerate().filter(|(_, r)| r.0 == j);
        if h[1] == u64::MAX {
            left_recvs.extend(mine.map(|(i, _)| i));
            continue;
        }
        let (total, at0) = if h[0] == 0 {
            (coll_area::INLINE, HEADER)
        } else {
            (h[0] as usize, 0)
        };
        let entry = |i: usize| -> (usize, u32) {
            let mut w = [0u32; 2];
            a.read(
                slot,
                s,
                total,
                at0 + 8 * i,
                bytemuck::cast_slice_mut(&mut w),
            );
            (w[0] as usize, w[1])
        };
        // Walk j's messages in order, pairing those to me with my receives
        // from j in order.
        let mut at = at0 + 8 * h[1] as usize;
        let mut mine = mine.peekable();
        for i in 0..h[1] as usize {
            let (to, len) = entry(i);
            if to == me {
                let Some((r, &(_, dst, room))) = mine.next() else {
                    return Err(Error::Protocol(format!(
                        "neighbourhood exchange: rank {j} sends more blocks to rank {me} than it receives from {j}"
                    )));
                };
                if len == BY_MESSAGE {
                    left_recvs.push(r);
                } else if len as usize > room {
                    return Err(Error::Truncated {
                        message_bytes: len as usize,
                        buffer_bytes: room,
                        source: j as i32,
                        tag: -2,
                    });
                } else if len > 0 {
                    let src = a.bytes(slot, s, total, at, len as usize);
                    // SAFETY: `dst` is writable for `room >= len` bytes
                    // (the caller's contract).
                    unsafe { kumi_transport::copy_bytes(src.as_ptr(), dst, len as usize) };
                }
            }
            if len != BY_MESSAGE {
                at += len as usize;
            }
        }
        if mine.peek().is_some() {
            return Err(Error::Protocol(format!(
                "neighbourhood exchange: rank {me} receives more blocks from rank {j} than it sends to {me}"
            )));
        }
    }
    g.finish(s);
    left_recvs.sort_unstable();
    Ok((left_sends, left_recvs))
}

/// Whether a scan of a vector of `n` bytes through the area of `g` goes as
/// a chain (member j folds member j-1's published prefix into its own part
/// and publishes the result) rather than with every member folding the
/// contributions of all those before it: with more than two members a
/// core, for a vector shorter than a payload half, and for any with four
/// or more. The fan-in makes p(p-1)/2 folds in all, p(p-1)/2c a core on c
/// cores, which the chain's p-1 beat when p > 2c; but the chain's links run
/// one after another, and for a vector of a payload half or more that path
/// cost more than the folds it saved at three members a core, less at four
/// (measured: docs/BENCHMARKS.md, session 64). Every member decides alike
/// (the launcher gives every rank of a host the same core count), and the
/// kind word tells the two ways apart.
pub(crate) fn scan_chains(e: &Engine, g: &Group, n: usize) -> bool {
    let (p, c) = (g.slots.len(), e.cores());
    p > 2 * c && (n < g.payload || p >= 4 * c)
}

/// The kind word of a scan of `n` bytes through the area.
pub(crate) fn scan_kind(exclusive: bool, chain: bool, n: usize) -> u64 {
    let op = match (exclusive, chain) {
        (false, false) => K_SCAN,
        (true, false) => K_EXSCAN,
        (false, true) => K_SCAN_CHAIN,
        (true, true) => K_EXSCAN_CHAIN,
    };
    kind(op, 0, n)
}

/// Inclusive (or `exclusive`) scan inside the group, of contributions of at
/// most one payload half, part of a vector that goes as a `chain` or not
/// ([`scan_chains`]; every member passes the same). The first member writes
/// its own (`own`, or `buf` when that is `None`). Then, unless as a chain,
/// every member but the last writes its own too, waits for the members
/// before it and folds theirs into `buf` right to left (`d0 ⊕ (d1 ⊕ (... ⊕
/// d_me))`, or up to `d_(me-1)` when exclusive, as [`fold`] does); as a
/// chain, each later member waits for the one before it only, folds that
/// one's inclusive prefix into its own part and publishes the result (the
/// last member: nothing). Either way nobody waits for a member after it.
/// An exclusive scan leaves the first member's `buf` alone.
pub(crate) fn scan(
    e: &mut Guard<'_>,
    g: &mut Group,
    own: Option<&[u8]>,
    buf: &mut [u8],
    op: &Combine<'_>,
    (exclusive, chain): (bool, bool),
    info: WaitInfo,
) -> Result<()> {
    let s = begin(e, g, 1, info)?;
    let (n, me) = (buf.len(), g.me);
    g.kind = scan_kind(exclusive, chain, n);
    // Nobody reads the last member's contribution.
    let last = me + 1 == g.slots.len();
    if chain && me > 0 {
        let left = g.slots[me - 1];
        wait(e, info, g.area, |a| reached_as(a, left, s, g.kind))?;
        if last || (!exclusive && own.is_none()) {
            // Nobody reads the last member's prefix; an inclusive scan in
            // place folds into `buf`, which holds its own part, and
            // publishes that.
            if !exclusive {
                if let Some(own) = own {
                    buf.copy_from_slice(own);
                }
                op(area(e, g.area).bytes(left, s, n, 0, n), buf);
            }
            contribute(e, g, s, if last { &[] } else { buf }, info)?;
            if exclusive {
                buf.copy_from_slice(area(e, g.area).bytes(left, s, n, 0, n));
            }
        } else {
            // My inclusive prefix `P_(me-1) ⊕ d_me`, which the next member
            // folds, formed in my storage (my own part written there, the
            // prefix before it folded in) and published before I copy my
            // result out (that prefix when exclusive, else mine), which the
            // next member need not wait for.
            wait_writable(e, g, s, n, info)?;
            let a = area(e, g.area);
            let mine = g.my_slot();
            a.write(mine, s, n, 0, own.unwrap_or(buf));
            // SAFETY: my own storage, writable (waited for above) and not
            // yet published; no other slice of it lives.
            op(a.bytes(left, s, n, 0, n), unsafe {
                a.bytes_mut(mine, s, n, 0, n)
            });
            publish_at(e, g, s);
            let result = if exclusive { left } else { mine };
            buf.copy_from_slice(a.bytes(result, s, n, 0, n));
        }
        g.finish(s);
        return Ok(());
    }
    contribute(e, g, s, if last { &[] } else { own.unwrap_or(buf) }, info)?;
    if exclusive && me == 0 {
        g.finish(s);
        return Ok(());
    }
    let before = &g.slots[..me];
    wait(e, info, g.area, |a| all_reached_as(a, before, s, g.kind))?;
    let a = area(e, g.area);
    // The rightmost operand first: my own, or (exclusive) my left neighbour's.
    let right = if exclusive {
        buf.copy_from_slice(a.bytes(before[me - 1], s, n, 0, n));
        me - 1
    } else {
        if let Some(own) = own {
            buf.copy_from_slice(own);
        }
        me
    };
    for &slot in before[..right].iter().rev() {
        op(a.bytes(slot, s, n, 0, n), buf);
    }
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
    let rooted = Rooted::gather(e, g);
    let kind_of = |n: usize| kind(if same { K_GATHER } else { K_GATHERV }, root, n);
    g.kind = kind_of(send.len());
    let mine = if g.me == root || !rooted.carries(send.len()) {
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
            if rooted.carries(n) {
                recv(j, a.bytes(slot, s, n, 0, n));
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
        recv(j, a.bytes(slot, s, n, 0, n));
    }
    g.finish(s);
    Ok(())
}

/// Scatter from member `root`: the root writes member j's block (`send(j)`,
/// read at the root only) where `rooted` says ([`Rooted::spot`]), each
/// member copies its own out into `recv`, or, where `rooted` says `None`,
/// leaves it to a message and does not wait.
///
/// `recv` is written, and at the root may be its own block itself (in
/// place). The caller vouches for both (`Comm::scatter_area`,
/// `Comm::scatterv_area`).
pub(crate) fn scatter(
    e: &mut Guard<'_>,
    g: &mut Group,
    send: &dyn Fn(usize) -> (*const u8, usize),
    recv: (*mut u8, usize),
    rooted: Rooted,
    root: usize,
    info: WaitInfo,
) -> Result<()> {
    let m = g.slots.len();
    let s = begin(e, g, 1, info)?;
    g.kind = scatter_kind(rooted, root, recv.1 * m, 0);
    let (k, root_slot) = (g.area, g.slots[root]);
    if g.me == root {
        // The writes twice: their longest first, for the storage's rule
        // (the packed section's in the halves covers the entries' and the
        // pieces'), then for real.
        let mut longest = 0;
        // SAFETY: the caller vouches for `send`'s blocks (the first pass
        // reads none).
        unsafe {
            scatter_writes(send, rooted, root, m, &mut |t, _, _| {
                longest = longest.max(t)
            })
        };
        wait_writable(e, g, s, longest, info)?;
        let a = area(e, k);
        let mut put = |total: usize, off: usize, b: &[u8]| a.write(root_slot, s, total, off, b);
        // SAFETY: as above.
        let number = unsafe { scatter_writes(send, rooted, root, m, &mut put) };
        g.kind = scatter_kind(rooted, root, recv.1 * m, number);
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
    let n = recv.1;
    let Some(spot) = rooted.spot(g.me, n, m).filter(|_| n > 0) else {
        g.finish(s);
        return Ok(());
    };
    wait(e, info, k, |a| reached_as(a, root_slot, s, g.kind))?;
    let a = area(e, k);
    let found = match spot {
        Spot::At(total, off) => Ok((total, off)),
        Spot::Packed => Packed::find(&a, root_slot, s, (g.me, m, n), g.payload),
    };
    if let Ok((total, off)) = found {
        // SAFETY: the caller vouches for `recv`, this member's own.
        let dst = unsafe { std::slice::from_raw_parts_mut(recv.0, n) };
        a.read(root_slot, s, total, off, dst);
    }
    // Done with `s` either way: the next collective follows it.
    g.finish(s);
    found.map(drop)
}

/// Hands each write of a scatter(v)'s root of `m` members to `put`
/// (`total`, offset and bytes, as the area's `write` takes them): the blocks
/// `send(j)` of the others, where `rooted` says ([`Rooted::spot`]), the
/// packed ones with their card ([`Packed`]); returns the packed section's
/// number for the root's kind ([`scatter_kind`]), 0 if none.
///
/// # Safety
/// Each `send(j)` is readable for its length (read only where `put` reads
/// its bytes).
#[inline]
pub(crate) unsafe fn scatter_writes<F: FnMut(usize, usize, &[u8]) + ?Sized>(
    send: &dyn Fn(usize) -> (*const u8, usize),
    rooted: Rooted,
    root: usize,
    m: usize,
    put: &mut F,
) -> u64 {
    // No list but of the packed blocks, where there are any.
    let mut packed = Vec::new();
    for j in (0..m).filter(|&j| j != root) {
        let (p, n) = send(j);
        match rooted.spot(j, n, m) {
            Some(Spot::At(total, off)) if n > 0 => {
                // SAFETY: the caller's contract.
                put(total, off, unsafe { std::slice::from_raw_parts(p, n) });
            }
            Some(Spot::Packed) => packed.push((j, p, n)),
            _ => {}
        }
    }
    if packed.is_empty() {
        return 0;
    }
    let layout = Packed::layout(&packed, m, rooted.payload);
    // The caller's contract covers the packed blocks too.
    layout.write(put, &packed);
    layout.number
}

/// The kind of a scatter from member `root` by `rooted`'s rule: an equal
/// scatter's says its length (`whole`: every member knows it, and one that
/// expects another waits), a scatterv's its packed section's number
/// (`packed`, [`Packed::number`]; a member reads it, [`Packed::find`]).
pub(crate) fn scatter_kind(rooted: Rooted, root: usize, whole: usize, packed: u64) -> u64 {
    match rooted.equal {
        Some(_) => kind(K_SCATTER, root, whole),
        None => kind(K_SCATTERV, root, 0) | coll_area::KIND_OWN | packed,
    }
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
    let (n, chunk) = (buf.len(), g.payload);
    let chunks = n.div_ceil(chunk).max(1);
    let s0 = begin(e, g, chunks as u64, info)?;
    g.kind = kind(K_BCAST, root, n);
    let (k, me, root_slot) = (g.area, g.my_slot(), g.slots[root]);
    // Both sides place a chunk by its length: a short message, or a long
    // one's tail, travels in an entry or a piece (`coll_area::placement`).
    let range = |c: usize| c * chunk..(c * chunk + chunk).min(n);
    if g.me == root {
        for c in 0..chunks {
            let s = s0 + c as u64;
            let r = range(c);
            wait_writable(e, g, s, r.len(), info)?;
            area(e, k).write(me, s, r.len(), 0, &buf[r]);
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
        area(e, k).read(root_slot, s, r.len(), 0, &mut buf[r]);
    }
    g.finish(s0 + chunks as u64 - 1);
    Ok(())
}

/// Alltoall inside the group: `send` holds one block of `block` bytes per
/// member, in group order (at most one payload half in all); block j of
/// `recv` receives member j's block for me. A member's contribution is its
/// blocks for the others side by side, its own left out and copied
/// straight across while the others write: at 2 members half the copies
/// (docs/BENCHMARKS.md, session 59).
pub(crate) fn alltoall(
    e: &mut Guard<'_>,
    g: &mut Group,
    send: &[u8],
    recv: &mut [u8],
    block: usize,
    info: WaitInfo,
) -> Result<()> {
    let s = begin(e, g, 1, info)?;
    let (m, me) = (g.slots.len(), g.me);
    let total = (m - 1) * block;
    let blocks = |j: usize| j * block..(j + 1) * block;
    g.kind = kind(K_ALLTOALL, 0, send.len());
    wait_writable(e, g, s, total, info)?;
    if block > 0 {
        let a = area(e, g.area);
        for j in (0..m).filter(|&j| j != me) {
            a.write(
                g.my_slot(),
                s,
                total,
                others_at(j, me, block),
                &send[blocks(j)],
            );
        }
    }
    publish_at(e, g, s);
    recv[blocks(me)].copy_from_slice(&send[blocks(me)]);
    wait_all_reached(e, g, s, info)?;
    let a = area(e, g.area);
    for (j, &slot) in g.slots.iter().enumerate().filter(|&(j, _)| j != me) {
        let at = others_at(me, j, block);
        recv[blocks(j)].copy_from_slice(a.bytes(slot, s, total, at, block));
    }
    g.finish(s);
    Ok(())
}

/// Alltoallv inside the group, block by block: member j writes its block
/// for member i where [`scatterv_place`] puts one of its length in j's own
/// half (both ends know the length: j sends it, i receives it; the last 8
/// bytes of the payload half are kept for the rounds, below), publishes,
/// waits for every member, and copies out of every other member's half the
/// block for itself. Blocks without a place are left, and the own block is
/// copied, by the caller.
///
/// Blocks of at least `copy` bytes go by single copy, whether a place in the
/// area would hold them or not (the area's copies across cores slow down
/// where a read does not: docs/BENCHMARKS.md, session 56): the sender
/// writes where the block lies (its [`single::card`], 16 bytes) where a
/// block of 16 bytes would go, and the receiver reads the card and then the
/// block straight out of the sender's buffer; the sender's buffer must stay
/// as it is until the receiver has read it, which the caller's next round
/// (one at least: `rounds` counts it) tells.
///
/// Rounds: each member also writes `rounds` (how many rounds of
/// [`alltoallv_share`] its longest block without a place needs, sent or
/// received) at the end of its payload half, and says with its kind whether
/// it is more than zero ([`coll_area::KIND_OWN`]); the call returns the
/// most any member wrote, read from the halves only when some kind says
/// so (a small call reads no more lines than before). Every member so
/// learns the same number; `Comm::alltoallv_segments` then moves the long
/// blocks in that many rounds, calling this again. The halves are the
/// authority, not the kinds: a member a depth of collectives ahead may have
/// written a later kind over the hint, but when any member has rounds,
/// every member waits for all in the first round, so none gets two ahead
/// before everyone has read.
///
/// # Safety
/// Each `send` segment readable and each `recv` segment writable for its
/// length during the call; `recv` segments overlap nothing.
pub(crate) unsafe fn alltoallv(
    e: &mut Guard<'_>,
    g: &mut Group,
    send: &[(*const u8, usize)],
    recv: &[(*mut u8, usize)],
    (rounds, copy): (u64, usize),
    info: WaitInfo,
) -> Result<u64> {
    let (m, me, payload) = (g.slots.len(), g.me, g.payload);
    let room = payload - 8;
    // Where a block goes through the area, or, from `copy` bytes, has the
    // card of its single copy instead (both ends find the same).
    let placed = |j: usize, n: usize| {
        (1..copy)
            .contains(&n)
            .then(|| scatterv_place(j, n, m, room))
            .flatten()
    };
    let carded = |j: usize, n: usize| {
        (n >= copy)
            .then(|| scatterv_place(j, 16, m, room))
            .flatten()
    };
    let s = begin(e, g, 1, info)?;
    g.kind = kind(K_ALLTOALLV, 0, 0) | coll_area::KIND_OWN | u64::from(rounds > 0);
    let k = g.area;
    // The count of rounds always goes in the payload half.
    wait_writable(e, g, s, payload, info)?;
    {
        let a = area(e, k);
        for (i, &(p, n)) in send.iter().enumerate().filter(|&(i, _)| i != me) {
            if let Some((total, off)) = placed(i, n) {
                // SAFETY: the caller vouches for `n` readable bytes.
                a.write(g.my_slot(), s, total, off, unsafe {
                    std::slice::from_raw_parts(p, n)
                });
            } else if let Some((total, off)) = carded(i, n) {
                let card = single::card([p as u64, n as u64]);
                a.write(g.my_slot(), s, total, off, &card[..16]);
            }
        }
        // Always, so that a stale count of an earlier call is never read.
        a.write(g.my_slot(), s, payload, room, &rounds.to_le_bytes());
    }
    publish_at(e, g, s);
    wait_all_reached(e, g, s, info)?;
    let shm = e.shm().expect("shared memory");
    let a = shm.segment().coll_area(k);
    for (j, &(p, n)) in recv.iter().enumerate().filter(|&(j, _)| j != me) {
        // SAFETY: the caller vouches for `n` writable bytes that overlap
        // nothing.
        let into = || unsafe { std::slice::from_raw_parts_mut(p, n) };
        if let Some((total, off)) = placed(me, n) {
            a.read(g.slots[j], s, total, off, into());
        } else if let Some(at) = carded(me, n) {
            single::read_carded(&a, shm, g.slots[j], s, at, into())?;
        }
    }
    let mut most = 0;
    for &slot in g.slots.iter() {
        if slot != g.my_slot() && coll_area::own_number(&a, slot, s) != 0 {
            let mut w = [0u8; 8];
            a.read(slot, s, payload, room, &mut w);
            most = most.max(u64::from_le_bytes(w));
        }
    }
    g.finish(s);
    Ok(most.max(rounds))
}

/// An alltoallv of any block lengths inside the group: the blocks that fit
/// a member's share of a payload half at once ([`alltoallv`]), then the
/// longer ones in rounds of a share each, as many as the longest block of
/// all needs (the first pass tells every member that number), each round's
/// pieces written while the others read the last. Both ends of a block
/// know its length, so they agree on its pieces. The own block is left to
/// the caller. `None` where a share would be empty (more members than bytes
/// in a half): the caller goes by messages.
///
/// # Safety
/// As for [`alltoallv`].
pub(crate) unsafe fn alltoallv_rounds(
    e: &mut Guard<'_>,
    g: &mut Group,
    send: &[(*const u8, usize)],
    recv: &[(*mut u8, usize)],
    info: WaitInfo,
) -> Option<Result<()>> {
    let share = alltoallv_share(g);
    if share == 0 {
        return None;
    }
    let me = g.me;
    // Blocks by single copy in the first pass (where the host allows it,
    // from `KUMI_COLL_ALLTOALL_COPY_MIN`): both ends know a block's length.
    let cfg = e.svc.coll.config();
    let copy = match cfg.single_copy {
        true => long::alltoall_copy_min(e),
        false => usize::MAX,
    };
    let long = |n: usize| if n > share && n < copy { n } else { 0 };
    let others = || (0..send.len()).filter(|&j| j != me);
    let longest = others()
        .map(|j| long(send[j].1).max(long(recv[j].1)))
        .max()
        .unwrap_or(0);
    // A block by single copy needs a round after the first, which tells
    // its sender that it has been read.
    let copies = others().any(|j| send[j].1 >= copy || recv[j].1 >= copy);
    let rounds = (longest.div_ceil(share) as u64).max(u64::from(copies));
    Some((|| {
        // SAFETY: the caller's contract.
        let all = unsafe { alltoallv(e, g, send, recv, (rounds, copy), info) }?;
        let (mut s, mut r) = (Vec::new(), Vec::new());
        for k in 0..all as usize {
            let at = k * share;
            let piece = |n: usize| long(n).saturating_sub(at).min(share);
            s.clear();
            r.clear();
            s.extend(send.iter().map(|&(b, n)| (b.wrapping_add(at), piece(n))));
            r.extend(recv.iter().map(|&(b, n)| (b.wrapping_add(at), piece(n))));
            // SAFETY: each piece lies inside its segment (`at + piece(n) <=
            // n`), valid by the caller's contract.
            unsafe { alltoallv(e, g, &s, &r, (0, usize::MAX), info) }?;
        }
        Ok(())
    })())
}

/// An allgather(v) inside the group of blocks of any length: [`allgather`]
/// in rounds of a payload half where they are longer (every member knows
/// every block's length, so all count the same rounds), the next round
/// written while the others still read the last. `mine` is this member's
/// block; the own segment of `recv` is left to the caller.
///
/// # Safety
/// Each `recv` segment but this member's writable for its length during
/// the call, overlapping nothing.
pub(crate) unsafe fn allgather_rounds(
    e: &mut Guard<'_>,
    g: &mut Group,
    mine: &[u8],
    recv: &[(*mut u8, usize)],
    info: WaitInfo,
) -> Result<()> {
    let half = g.payload;
    let longest = recv.iter().map(|&(_, n)| n).max().unwrap_or(0);
    for round in 0..longest.div_ceil(half).max(1) {
        let at = round * half;
        let piece = |n: usize| n.saturating_sub(at).min(half);
        let mut put = |j: usize, b: &[u8]| {
            // SAFETY: bytes `at..at + b.len()` of segment j, writable (the
            // caller's contract; `b` is j's piece of this round, inside its
            // length), never this member's own here.
            unsafe { kumi_transport::copy_bytes(b.as_ptr(), recv[j].0.add(at), b.len()) };
        };
        let from = at.min(mine.len());
        allgather(
            e,
            g,
            &mine[from..from + piece(mine.len())],
            &|j| piece(recv[j].1),
            &mut put,
            info,
        )?;
    }
    Ok(())
}

/// Bytes of each block an alltoallv moves through the area per member at
/// once, and per round for the longer ones ([`alltoallv`]).
pub(crate) fn alltoallv_share(g: &Group) -> usize {
    (g.payload - 8) / g.slots.len()
}

/// The longest block of a nonblocking alltoallv through the area: a
/// member's share, and shorter than [`long::alltoall_copy_min`] where the
/// host chose single copy: the longer ones go as messages, which took
/// 0.69x the area's time at 32 KiB (docs/BENCHMARKS.md, session 59).
pub(crate) fn alltoallv_longest(e: &Engine, g: &Group) -> usize {
    match e.svc.coll.config().single_copy {
        true => alltoallv_share(g).min(long::alltoall_copy_min(e).saturating_sub(1)),
        false => alltoallv_share(g),
    }
}

/// Bytes of block `j` of `count` elements of `elem` bytes split among `m`
/// members: whole elements, as even as possible, the first ones one longer.
fn block_of(count: usize, m: usize, elem: usize, j: usize) -> std::ops::Range<usize> {
    let (q, r) = (count / m, count % m);
    let start = (j * q + j.min(r)) * elem;
    start..start + (q + usize::from(j < r)) * elem
}
