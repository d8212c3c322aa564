//! Collectives on any communicator, and the combining service.
//!
//! Every collective here is a [`Schedule`] from `kumi_core::coll` (pure, checked
//! against a serial evaluation for every group size 1..17) run by one executor
//! (`exec.rs`) on the communicator's collective context, with a tag taken from
//! a per-communicator sequence number, so collectives never match user messages
//! and nonblocking ones never match each other. Contributions are combined in
//! rank order, so user operations need not be commutative.
//!
//! **Algorithms** (α latency, β per byte, γ per byte reduced, p ranks, n bytes):
//! - barrier: dissemination, lg p·α.
//! - bcast: binomial, lg p·(α+nβ), below `KUMI_COLL_BCAST_LONG`; above it
//!   scatter + ring allgather, (lg p + p-1)·α + 2nβ.
//! - reduce: binomial, lg p·(α+nβ+nγ).
//! - allreduce: recursive doubling, lg p·(α+nβ+nγ), below
//!   `KUMI_COLL_ALLREDUCE_LONG`; above it Rabenseifner (reduce-scatter by
//!   recursive halving + allgather by recursive doubling), 2 lg p·α + 2nβ + nγ;
//!   at or above `KUMI_COLL_ALLREDUCE_RING` and for commutative operations a ring,
//!   2(p-1)·α + 2nβ + nγ. Non-powers of two fold the first 2(p - 2^⌊lg p⌋) ranks
//!   in pairs first (two more steps).
//! - gather / scatter and their v-forms: linear, each block one message
//!   between the ranks' own buffers, (p-1)·α + nβ at the root (`rooted.rs`).
//! - allgather: recursive doubling (p a power of two, total below
//!   `KUMI_COLL_ALLGATHER_LONG`), lg p·α + nβ; else ring, (p-1)·α + nβ; allgatherv
//!   ring (`all.rs`, with the alltoalls).
//! - alltoall(v): pairwise exchange, (p-1)·(α + nβ/p).
//! - reduce_scatter(_block): ring for commutative operations, (p-1)·α + n(β+γ);
//!   else binomial reduce + binomial scatter.
//! - scan / exscan: linear chain, (p-1)·(α+nβ+nγ) (`scan.rs`).
//!
//! **Inside a host** (`shm.rs`): when all members of a communicator are on one
//! host, barrier, bcast, reduce, allreduce, alltoall, gather, scatter,
//! reduce-scatter, scan, exscan and allgather(v) of blocks that fit run through the
//! segment's collective areas, each rank once per collective (gatherv and
//! scatterv member by member, `rooted.rs`), and long bcasts, reduces,
//! allreduces and reduce-scatters by single copy between the ranks' buffers
//! or through the area in chunks, whichever the group's trial found faster
//! (`KUMI_COLL_BCAST_COPY`, `KUMI_COLL_ALLREDUCE_COPY`);
//! `KUMI_COLL_SHM=off` runs them as messages (the algorithms above) instead.
//! `KUMI_COLL_SHM_BCAST_MAX` caps the broadcasts that go through the area in
//! chunks (when single copy is off). `ibarrier` and `iallreduce` (up to one
//! payload half) go through the area too, so they match blocking ones as
//! before; a longer blocking allreduce (single copy) does not match an
//! `iallreduce` (MPI does not ask blocking and nonblocking collectives to
//! match). `ibcast`, `iallgather(v)`, `igather(v)`, `iscatter(v)` and
//! `ialltoall(v)` go through the area too, between the program's buffers
//! (`shm::Pending`), and so do `ireduce_scatter` (in rounds, or by single
//! copy where its blocking twin would) and a longer `iallreduce` (in chunks
//! or by single copy, as its blocking twin goes); the other nonblocking
//! reductions (`ireduce`, `iscan`, `iexscan`) run message
//! schedules, on the program's memory in their raw and scoped forms and on
//! a buffer the request owns in the owned ones (`nonblocking.rs`).
//! Neighbourhood collectives are one round of explicit transfers, the
//! blocking ones' short blocks through the area (`neighbor.rs`).
//!
//! **Two levels.** When a communicator spans hosts, barrier, bcast and
//! allreduce run inside each host first (to the host's first rank), then among
//! one leader per host, then fan out inside each host. Bcast's fan-out goes
//! through the host's collective area; barrier and allreduce stay messages
//! through the rings here, because their nonblocking twins (`ibarrier`,
//! `iallreduce`, which kumi lets match the blocking ones) run the same
//! schedules, and a two-level nonblocking run through the area is not built
//! yet (`KUMI_COLL_HIERARCHICAL=0` turns two levels off for comparison). A
//! non-commutative allreduce uses it only when every host holds consecutive
//! ranks. `KUMI_COLL_HOSTS=k` pretends the job's ranks are spread in blocks over
//! k hosts, so the two-level paths can be exercised on one machine.
//!
//! **Progress.** Nonblocking collectives ([`CollRequest`], `inflight.rs`) and
//! the combining service keep all their state in the engine and are advanced by
//! the engine's `progress`, i.e. inside every kumi call of this rank, not only
//! their own.

mod all;
mod combine;
pub(crate) mod exec;
#[cfg(target_arch = "x86_64")]
mod inflight;
mod ldouble;
mod neighbor;
mod nonblocking;
mod ops;
mod rooted;
mod scan;
mod scoped;
mod shm;

pub use combine::{Arrival, CombineOp, CombineValue, Combiner};
pub use inflight::CollRequest;
pub(crate) use inflight::{progress, Active};
use inflight::{started, Owned};
#[cfg(target_arch = "x86_64")]
pub use ldouble::LongDouble;
pub use ops::{Builtin, Elem, Loc, LocInt, LocValue, Op, ALL_BUILTINS};
pub use scoped::ScopedRequest;

use crate::comm::Comm;
use crate::engine::{Engine, Route, WaitInfo};
use crate::error::{Error, Result};
use crate::progress::{EngineRef, Guard};
use bytemuck::Pod;
use exec::{AlignedBuf, Blocks, ByteOp, Finish, Run, Wire};
use kumi_core::call::Call;
use kumi_core::coll::{self as sc, Schedule};
use kumi_core::TAG_UB;
use kumi_transport::Capabilities;
// foldhash, not SipHash: `comms` is looked up on every collective call, and
// SipHash of the context id was a quarter of a shared-memory barrier's
// instructions (scripts/count-instructions.sh). The keys are kumi's own
// context ids, so flooding resistance buys nothing here.
use foldhash::HashMap;
use std::marker::PhantomData;
use std::panic::Location;
use std::sync::Arc;

/// Collective tags: `TAG_BASE + (sequence mod 2^24)` on the collective context.
const TAG_BASE: i32 = TAG_UB + 64;

/// Thresholds and switches, read once per process.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    bcast_long: usize,
    allreduce_long: usize,
    allreduce_ring: usize,
    allgather_long: usize,
    hierarchical: bool,
    fake_hosts: Option<usize>,
    pub combine_store: usize,
    /// Collectives inside a host through the segment's areas (`shm.rs`).
    shm: bool,
    /// Longest bcast through the areas (longer: the message algorithms).
    shm_bcast_max: usize,
    /// How a bcast too long for one payload half goes inside a host
    /// (`KUMI_COLL_BCAST_COPY`). `Auto`: through the area when the host runs
    /// more ranks than cores; otherwise each local group times both
    /// (`shm::bcast_long`) and keeps single copy unless the area was twice
    /// as fast (`shm::long::AREA_MARGIN`), because the machine decides
    /// (one machine's area was twice as fast as single copy, another's three
    /// times slower: docs/BENCHMARKS.md, sessions 6 and 11). Oversubscribed,
    /// the area wins: its chunks stay in the cache the ranks of a core
    /// share, while each single-copy reader pins and copies the root's pages
    /// on its own. `Single`: every reader copies from the
    /// root's buffer (`process_vm_readv`); `Area`: pipelined through the
    /// root's area slot, one payload half at a time.
    bcast_copy: shm::LongCopy,
    /// Bytes the single-copy allreduce reads, folds and writes at a time.
    pub allreduce_piece: usize,
    /// How a commutative allreduce too long for one payload half goes inside
    /// a host.
    pub allreduce_copy: shm::LongCopy,
    /// The long-message paths may use single copy: the host's choice, the
    /// same on every rank of it (every path that asks runs inside one host).
    pub single_copy: bool,
    /// Shortest block of an allgather(v) that goes by single copy where
    /// `single_copy` allows it.
    pub allgather_copy_min: usize,
    /// Shortest block of the other data movers that goes by single copy
    /// where `single_copy` allows it (a broadcast's: and `bcast_copy`).
    pub copy_min: usize,
    /// The same for a gather(v)'s blocks.
    pub gather_copy_min: usize,
    /// The same for an alltoall(v)'s blocks.
    pub alltoall_copy_min: usize,
}

impl Config {
    /// The collectives' part of the configuration; `single_copy`: whether
    /// the host's ranks copy by single copy (its segment says, and not
    /// denied for tests), the same on every rank of the host.
    pub(crate) fn new(c: &kumi_core::config::Coll, single_copy: bool) -> Config {
        Config {
            bcast_copy: c.bcast_copy,
            bcast_long: c.bcast_long,
            allreduce_long: c.allreduce_long,
            allreduce_ring: c.allreduce_ring,
            allgather_long: c.allgather_long,
            allgather_copy_min: c.allgather_copy_min,
            copy_min: c.copy_min,
            gather_copy_min: c.gather_copy_min,
            alltoall_copy_min: c.alltoall_copy_min,
            hierarchical: c.hierarchical,
            fake_hosts: c.fake_hosts,
            combine_store: c.combine_store,
            shm: c.shm,
            shm_bcast_max: c.shm_bcast_max,
            // Measured (docs/BENCHMARKS.md, session 4): 128 KiB pieces beat
            // 64 KiB at np=2-8 and 256 KiB (which leaves L2) at np=2.
            allreduce_piece: c.piece,
            allreduce_copy: c.allreduce_copy,
            single_copy,
        }
    }
}

/// Per communicator: its members and, if it spans hosts, its host groups.
struct CommInfo {
    members: Arc<[u32]>,
    seq: u32,
    hosts: Option<Option<Arc<Vec<Vec<usize>>>>>,
    labels: Option<Arc<Vec<usize>>>,
    /// The local group's area, once looked for (`None` inside: none; the
    /// group is also taken out while a collective uses it). Boxed: taken out
    /// and put back on every collective, the group moved as a whole was two
    /// copies of its ~200 bytes per call.
    shm: Option<Option<Box<shm::Group>>>,
}

/// Everything of collectives and combining that lives in the engine.
pub(crate) struct CollState {
    config: Arc<Config>,
    comms: HashMap<u32, CommInfo>,
    active: Vec<(u64, Active)>,
    done: inflight::Done,
    abandoned: Vec<u64>,
    owned: Vec<(u64, inflight::Owned)>,
    next_nb: u64,
    pub(crate) combine: combine::State,
}

impl CollState {
    /// The collectives of an engine configured as `config` says.
    pub(crate) fn new(config: Config) -> CollState {
        CollState {
            config: Arc::new(config),
            comms: Default::default(),
            active: Vec::new(),
            done: Default::default(),
            abandoned: Vec::new(),
            owned: Vec::new(),
            next_nb: 0,
            combine: Default::default(),
        }
    }

    /// Whether `progress` has anything to do here.
    #[inline]
    pub(crate) fn busy(&self) -> bool {
        !self.active.is_empty() || self.combine.wake.is_some()
    }

    /// The collectives' configuration.
    #[inline]
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// The configuration to keep (an operation in flight keeps it while the
    /// engine is lent out). Not on a small collective's path: the clone is a
    /// locked increment.
    pub(crate) fn config_arc(&self) -> Arc<Config> {
        self.config.clone()
    }
}

pub(crate) use combine::on_frame as on_combine_frame;

fn as_bytes<T: Pod>(b: &[T]) -> &[u8] {
    bytemuck::cast_slice(b)
}

fn as_bytes_mut<T: Pod>(b: &mut [T]) -> &mut [u8] {
    bytemuck::cast_slice_mut(b)
}

/// Byte offsets of `nb` blocks splitting `count` elements as evenly as possible.
fn even_offsets(count: usize, nb: usize, elem: usize) -> Vec<usize> {
    let mut v = Vec::with_capacity(nb + 1);
    let (q, r) = (count / nb.max(1), count % nb.max(1));
    let mut off = 0;
    v.push(0);
    for b in 0..nb {
        off += (q + usize::from(b < r)) * elem;
        v.push(off);
    }
    v
}

/// Blocks of `counts[i]` elements of `elem` bytes one after the other from
/// `base`, as (start, bytes), collected as the caller asks (a `Vec`, or a
/// `SmallVec` where there are few); `add` offsets a pointer.
fn byte_segments<P: Copy, C: FromIterator<(P, usize)>>(
    base: P,
    counts: &[usize],
    elem: usize,
    add: fn(P, usize) -> P,
) -> C {
    let mut off = 0;
    counts
        .iter()
        .map(|&c| {
            let seg = (add(base, off), c * elem);
            off += c * elem;
            seg
        })
        .collect()
}

/// `p` blocks of `bytes` bytes each one after the other from `base` (the
/// forms of equal blocks: no counts to build first), as
/// [`byte_segments`].
fn equal_segments<P: Copy>(
    base: P,
    p: usize,
    bytes: usize,
    add: fn(P, usize) -> P,
) -> Vec<(P, usize)> {
    (0..p).map(|j| (add(base, j * bytes), bytes)).collect()
}

/// Segment j of [`byte_segments`] found without the list: by walking the
/// counts on from the last segment asked for (from the start again for an
/// earlier one). The collectives ask in increasing order but for one
/// segment of their own, so a call's walk is linear in the ranks.
struct Consecutive<'a, P> {
    base: P,
    counts: &'a [usize],
    elem: usize,
    add: fn(P, usize) -> P,
    /// The last segment asked for and its byte offset.
    at: std::cell::Cell<(usize, usize)>,
}

impl<'a, P: Copy> Consecutive<'a, P> {
    fn new(base: P, counts: &'a [usize], elem: usize, add: fn(P, usize) -> P) -> Self {
        Consecutive {
            base,
            counts,
            elem,
            add,
            at: Default::default(),
        }
    }

    /// Segment `j`: (start, bytes).
    fn seg(&self, j: usize) -> (P, usize) {
        let (mut k, mut off) = self.at.get();
        if j < k {
            (k, off) = (0, 0);
        }
        for &c in &self.counts[k..j] {
            off += c * self.elem;
        }
        self.at.set((j, off));
        ((self.add)(self.base, off), self.counts[j] * self.elem)
    }
}

/// Checks the segments of a collective over segments (`what`: the
/// argument): one per rank, this rank's `own` bytes long (the length of its
/// other side).
fn own_segment<P>(
    what: &'static str,
    segs: &[(P, usize)],
    p: usize,
    me: usize,
    own: usize,
) -> Result<()> {
    match segs.get(me) {
        Some(&(_, n)) if segs.len() == p && n == own => Ok(()),
        _ => Err(bad(
            what,
            segs.len(),
            format!("{p} segments, this rank's of {own} bytes as its other side"),
        )),
    }
}

/// How a collective over segments runs: to completion before the call
/// returns (reported as called at the location), or started, completed by
/// the request's `wait` (the segments then stay valid until it returns).
#[derive(Clone, Copy)]
enum Exec {
    Now(&'static Location<'static>),
    Start,
}

/// `dst.copy_from_slice(src)` through [`kumi_transport::copy_bytes`], which
/// avoids `memcpy`'s slow case for buffers a few bytes apart modulo 4 KiB.
#[inline]
fn copy_slice<T: Pod>(dst: &mut [T], src: &[T]) {
    assert_eq!(dst.len(), src.len(), "copy_slice: lengths differ");
    // SAFETY: two slices of one length, and `&mut` excludes overlap.
    unsafe {
        kumi_transport::copy_bytes(
            src.as_ptr().cast::<u8>(),
            dst.as_mut_ptr().cast::<u8>(),
            std::mem::size_of_val(src),
        )
    };
}

/// An all-to-all's blocks for its schedule: 0..p what goes out (only ever
/// read: the schedule sends from them), p..2p what comes in.
fn alltoall_blocks(
    send: &[(*const u8, usize)],
    recv: &[(*mut u8, usize)],
) -> Vec<(*mut u8, usize)> {
    send.iter()
        .map(|&(b, n)| (b as *mut u8, n))
        .chain(recv.iter().copied())
        .collect()
}

/// Copies this rank's own block of a collective, `len` bytes from `from`
/// to `to` (nothing in place, where the two are one).
///
/// # Safety
/// `from` readable and `to` writable for `len` bytes.
unsafe fn copy_own(from: *const u8, to: *mut u8, len: usize) {
    if len > 0 && from != to.cast_const() {
        // SAFETY: the caller's contract; in place is the same memory, and
        // MPI allows no other overlap.
        unsafe { kumi_transport::copy_bytes(from, to, len) };
    }
}

/// Byte offsets of blocks of `counts[i]` elements each.
fn count_offsets(counts: &[usize], elem: usize) -> Vec<usize> {
    let mut v = vec![0];
    let mut off = 0;
    for &c in counts {
        off += c * elem;
        v.push(off);
    }
    v
}

fn bad(arg: &'static str, value: usize, allowed: String) -> Error {
    Error::invalid(arg, value as i64, allowed)
}

impl CollState {
    /// The collective state of communicator `ctx` (collective context), made
    /// on first use with its `members`.
    fn comm_info(&mut self, ctx: u32, members: impl FnOnce() -> Arc<[u32]>) -> &mut CommInfo {
        self.comms.entry(ctx).or_insert_with(|| CommInfo {
            members: members(),
            seq: 0,
            hosts: None,
            labels: None,
            shm: None,
        })
    }
}

/// The message tag of a communicator's next collective, taken from its
/// counter `seq`.
fn take_tag_of(seq: &mut u32) -> i32 {
    let tag = TAG_BASE + (*seq & 0xff_ffff) as i32;
    *seq = seq.wrapping_add(1);
    tag
}

impl Comm {
    /// The message tag of the next collective on this communicator, taken.
    fn next_tag<'e>(&self, e: &'e mut Engine) -> (i32, &'e CommInfo) {
        let info = e
            .svc
            .coll
            .comm_info(self.coll_ctx(), || self.members().into());
        let tag = take_tag_of(&mut info.seq);
        (tag, info)
    }

    /// The tag and wire of the next collective on this communicator.
    fn wire(&self) -> Result<(Arc<Config>, Wire)> {
        let mut e = self.engine();
        let cfg = e.svc.coll.config_arc();
        let (tag, info) = self.next_tag(&mut e);
        Ok((cfg, self.wire_of(tag, info)))
    }

    /// The wire of a collective on this communicator with message `tag`.
    fn wire_of(&self, tag: i32, info: &CommInfo) -> Wire {
        Wire {
            ctx: self.coll_ctx(),
            tag,
            me: self.rank() as u32,
            members: info.members.clone(),
        }
    }

    /// The host of each member (labels: any numbers, equal on one host).
    /// Collective the first time on a communicator that really spans hosts.
    pub(crate) fn host_labels(&self, at: &'static Location<'static>) -> Result<Arc<Vec<usize>>> {
        let ctx = self.coll_ctx();
        {
            let e = self.engine();
            if let Some(l) = e.svc.coll.comms.get(&ctx).and_then(|i| i.labels.clone()) {
                return Ok(l);
            }
        }
        let (cfg, spans) = {
            let e = self.engine();
            let cfg = e.svc.coll.config_arc();
            let spans = e.routes().contains(&Route::Net);
            (cfg, spans)
        };
        let labels: Vec<usize> = if let Some(k) = cfg.fake_hosts {
            let world = self.engine().world_size as usize;
            self.members()
                .iter()
                .map(|&w| w as usize * k / world.max(1))
                .collect()
        } else if spans {
            // My host's label: its smallest world rank. Everyone learns everyone's.
            let mine = {
                let e = self.engine();
                e.routes()
                    .iter()
                    .position(|r| *r != Route::Net)
                    .unwrap_or(0) as u64
            };
            let mut all = vec![0u64; self.size()];
            all[self.rank()] = mine;
            self.allgather_messages(&mut all, at)?;
            all.into_iter().map(|l| l as usize).collect()
        } else {
            vec![0; self.size()]
        };
        let labels = Arc::new(labels);
        let mut e = self.engine();
        let info = e.svc.coll.comm_info(ctx, || self.members().into());
        info.labels = Some(labels.clone());
        Ok(labels)
    }

    /// Host groups of this communicator if it spans hosts and the two-level
    /// algorithms are on; `None` otherwise.
    fn host_groups(&self, at: &'static Location<'static>) -> Result<Option<Arc<Vec<Vec<usize>>>>> {
        let ctx = self.coll_ctx();
        {
            let e = self.engine();
            if !e.svc.coll.config().hierarchical {
                return Ok(None);
            }
            if let Some(h) = e.svc.coll.comms.get(&ctx).and_then(|i| i.hosts.clone()) {
                return Ok(h);
            }
        }
        let labels = self.host_labels(at)?;
        let g: Vec<usize> = (0..self.size()).collect();
        let groups = sc::hosts_of(&g, |r| labels[r]);
        let h = (groups.len() > 1).then(|| Arc::new(groups));
        if let Some(i) = self.engine().svc.coll.comms.get_mut(&ctx) {
            i.hosts = Some(h.clone());
        }
        Ok(h)
    }

    /// This rank's local group (its communicator's members on its host) if
    /// it has a collective area: `(whole, my index, group size)`, `whole`
    /// meaning the group is the entire communicator. Looked up once per
    /// communicator; every member of a group gets the same answer.
    fn shm_view(&self, at: &'static Location<'static>) -> Result<Option<(bool, usize, usize)>> {
        self.shm_resolve(Some(at))
    }

    /// `shm_view`; with `at` = `None` it finds the group only if that needs
    /// no communication (the communicator is all on this host, or it is
    /// already known), for the nonblocking collectives, which must not wait
    /// for others to start.
    fn shm_resolve(
        &self,
        at: Option<&'static Location<'static>>,
    ) -> Result<Option<(bool, usize, usize)>> {
        let ctx = self.coll_ctx();
        let view = |g: &shm::Group| (g.slots.len() == self.size(), g.me, g.slots.len());
        let local = {
            let e = self.engine();
            let cfg = e.svc.coll.config();
            if !cfg.shm || self.size() == 1 {
                return Ok(None);
            }
            let Some(t) = e.shm() else {
                // Alone on its host (no segment): the others exchange host
                // labels to find their groups (they are not all on one
                // host), so this rank takes part, and the exchange is one
                // every rank makes whichever collective asks first.
                drop(e);
                if let Some(at) = at {
                    self.host_labels(at)?;
                    let mut e = self.engine();
                    e.svc.coll.comm_info(ctx, || self.members().into()).shm = Some(None);
                }
                return Ok(None);
            };
            if let Some(found) = e.svc.coll.comms.get(&ctx).and_then(|i| i.shm.as_ref()) {
                return Ok(found.as_deref().map(view));
            }
            // All on this host (and on one pretend host): the group is the
            // whole communicator, whatever the labels would say, so no need
            // to exchange them.
            let world = e.world_size as usize;
            let fake = |w: u32| cfg.fake_hosts.map(|k| w as usize * k / world.max(1));
            let m = self.members();
            m.iter()
                .all(|&w| t.local_of(w).is_some() && fake(w) == fake(m[0]))
        };
        let me = self.rank();
        let (ranks, whole, hier) = if local {
            ((0..self.size()).collect::<Vec<_>>(), true, false)
        } else {
            let Some(at) = at else { return Ok(None) };
            let labels = self.host_labels(at)?;
            let hier = self.host_groups(at)?.is_some();
            let ranks: Vec<usize> = (0..self.size())
                .filter(|&r| labels[r] == labels[me])
                .collect();
            let whole = ranks.len() == self.size();
            (ranks, whole, hier)
        };
        let mut e = self.engine();
        let group = if ranks.len() < 2 || !(whole || hier) {
            None
        } else {
            let worlds: Vec<u32> = ranks.iter().map(|&r| self.members()[r]).collect();
            let idx = ranks.iter().position(|&r| r == me).expect("own host");
            // The world's context is 0 (collectives on 1).
            shm::Group::find(&e, ctx, &worlds, idx, whole && self.ctx() == 0).map(Box::new)
        };
        let out = group.as_deref().map(view);
        let info = e.svc.coll.comm_info(ctx, || self.members().into());
        info.shm = Some(group);
        Ok(out)
    }

    /// Whether `n` bytes fit one payload half of the local group's area.
    fn shm_fits(&self, n: usize) -> bool {
        let e = self.engine();
        e.svc
            .coll
            .comms
            .get(&self.coll_ctx())
            .and_then(|i| i.shm.as_ref())
            .and_then(|g| g.as_ref())
            .is_some_and(|g| n <= g.payload)
    }

    /// The fast path of a collective inside one host: if the communicator's
    /// local group is all of it and has an area, runs `f` on it (one engine
    /// lock) unless `f` declines with `None`. Finds the group the first time
    /// (for a `nonblocking` collective only if that needs no communication).
    #[inline]
    fn shm_whole<R>(
        &self,
        at: &'static Location<'static>,
        nonblocking: bool,
        f: impl FnOnce(&mut Guard<'_>, &mut shm::Group) -> Option<Result<R>>,
    ) -> Result<Option<R>> {
        self.shm_whole_tagged(at, nonblocking, false, f)
            .map(|r| r.map(|(r, _)| r))
    }

    /// [`Comm::shm_whole`] that, when `f` did the collective and `take_tag`
    /// is set, also takes the call's message tag (returned beside `f`'s
    /// result; 0 when not asked for), under the same lock and lookup: for the collectives whose
    /// blocks too long for the area go as messages ([`Comm::run_rest`]),
    /// whose every rank takes a tag whether it sends any or not.
    fn shm_whole_tagged<R>(
        &self,
        at: &'static Location<'static>,
        nonblocking: bool,
        take_tag: bool,
        f: impl FnOnce(&mut Guard<'_>, &mut shm::Group) -> Option<Result<R>>,
    ) -> Result<Option<(R, i32)>> {
        if self.size() == 1 {
            return Ok(None);
        }
        let ctx = self.coll_ctx();
        let mut e = self.engine();
        let mut g = match e.svc.coll.comms.get_mut(&ctx) {
            Some(i) if i.shm.is_some() => match i.shm.as_mut().and_then(Option::take) {
                Some(g) if g.slots.len() == self.size() => g,
                // A group of part of the communicator (put back), or none.
                g => {
                    i.shm = Some(g);
                    return Ok(None);
                }
            },
            _ => {
                drop(e);
                let done = match self.shm_resolve((!nonblocking).then_some(at))? {
                    Some((true, _, _)) => self.shm_op(|e, g| f(e, g).transpose())?,
                    _ => None,
                };
                return Ok(done.map(|r| {
                    let tag = if take_tag {
                        self.next_tag(&mut self.engine()).0
                    } else {
                        0
                    };
                    (r, tag)
                }));
            }
        };
        let r = f(&mut e, &mut g);
        let mut tag = 0;
        if let Some(i) = e.svc.coll.comms.get_mut(&ctx) {
            i.shm = Some(Some(g));
            if take_tag && r.is_some() {
                tag = take_tag_of(&mut i.seq);
            }
        }
        Ok(r.transpose()?.map(|r| (r, tag)))
    }

    /// Runs `f` on the local group's area (found by `shm_view`).
    fn shm_op<R>(&self, f: impl FnOnce(&mut Guard<'_>, &mut shm::Group) -> Result<R>) -> Result<R> {
        let ctx = self.coll_ctx();
        let mut e = self.engine();
        let mut g = e
            .svc
            .coll
            .comms
            .get_mut(&ctx)
            .and_then(|i| i.shm.as_mut())
            .and_then(Option::take)
            .expect("shm_view found the group");
        let r = f(&mut e, &mut g);
        if let Some(i) = e.svc.coll.comms.get_mut(&ctx) {
            i.shm = Some(Some(g));
        }
        r
    }

    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        sched: Schedule,
        wire: Wire,
        work: &mut [u8],
        offsets: Vec<usize>,
        op: Option<ByteOp>,
        call: Call,
        at: &'static Location<'static>,
    ) -> Result<()> {
        if offsets.last().copied().unwrap_or(0) > work.len() {
            return Err(Error::Protocol(
                "collective blocks overrun the buffer".into(),
            ));
        }
        let base = work.as_mut_ptr();
        self.run_blocks(sched, wire, Blocks::Split { base, offsets }, op, call, at)
    }

    /// The schedule `plan` makes for this rank (from the group and its
    /// rank) over blocks where they lie (kept valid by the caller until it
    /// completes), run now or started ([`Exec`]).
    fn exec_each(
        &self,
        blocks: Vec<(*mut u8, usize)>,
        how: Exec,
        plan: impl FnOnce(&[usize], usize) -> Schedule,
    ) -> Result<Option<CollRequest<u8>>> {
        // Every rank takes the call's tag, used or not, so the tags of later
        // collectives agree.
        let (_, wire) = self.wire()?;
        let sched = plan(&self.group(), self.rank());
        if sched.rounds.is_empty() {
            return Ok(match how {
                Exec::Now(_) => None,
                Exec::Start => Some(CollRequest::done(self.engine_rc().clone())),
            });
        }
        match how {
            Exec::Now(at) => {
                self.run_blocks(
                    sched,
                    wire,
                    Blocks::Each(blocks),
                    None,
                    Call::Collective,
                    at,
                )?;
                Ok(None)
            }
            Exec::Start => {
                let run = Run::new(sched, wire, Blocks::Each(blocks), None);
                Ok(Some(self.start(Active::Sched(run))))
            }
        }
    }

    /// Starts `sched` on a buffer the request owns.
    fn start_sched<T: Pod>(
        &self,
        sched: Schedule,
        work: AlignedBuf,
        offsets: Vec<usize>,
        op: Option<ByteOp>,
        finish: Option<Finish>,
    ) -> Result<CollRequest<T>> {
        let (_, wire) = self.wire()?;
        let mut run = Run::owning(sched, wire, work, offsets, op);
        run.finish = finish;
        Ok(self.start(Active::Sched(run)))
    }

    /// The blocks of a collective that its area part could not carry, as
    /// messages (`blocks`: `None` where this rank has none to send or
    /// receive), with the call's message `tag`, which every rank took with
    /// its area part ([`Comm::shm_whole_tagged`]), used or not, so the tags
    /// of later collectives agree on every rank.
    fn run_rest(
        &self,
        blocks: Option<Vec<(*mut u8, usize)>>,
        tag: i32,
        at: &'static Location<'static>,
        plan: impl FnOnce(&[usize]) -> Schedule,
    ) -> Result<()> {
        let Some(blocks) = blocks else {
            return Ok(());
        };
        let wire = {
            let mut e = self.engine();
            let info = e
                .svc
                .coll
                .comm_info(self.coll_ctx(), || self.members().into());
            self.wire_of(tag, info)
        };
        let sched = plan(&self.group());
        self.run_blocks(
            sched,
            wire,
            Blocks::Each(blocks),
            None,
            Call::Collective,
            at,
        )
    }

    /// A nonblocking collective whose area part is `pending`, and whose
    /// blocks the area could not carry go as messages (`blocks`: `None`
    /// where this rank has none), as [`Comm::run_rest`] for the blocking
    /// forms: every rank takes the message tag, used or not.
    fn start_rest(
        &self,
        pending: shm::Pending,
        blocks: Option<Vec<(*mut u8, usize)>>,
        plan: impl FnOnce(&[usize]) -> Schedule,
    ) -> Result<CollRequest<u8>> {
        self.start_rest_upto(pending, blocks, plan, usize::MAX)
    }

    /// [`Comm::start_rest`] with the messages longer than `eager_max` bytes
    /// by rendezvous ([`Run::eager_max`]).
    fn start_rest_upto(
        &self,
        pending: shm::Pending,
        blocks: Option<Vec<(*mut u8, usize)>>,
        plan: impl FnOnce(&[usize]) -> Schedule,
        eager_max: usize,
    ) -> Result<CollRequest<u8>> {
        let Some(blocks) = blocks else {
            // The tag and the list under one lock.
            let mut e = self.engine();
            self.next_tag(&mut e);
            let id = Self::push_active(&mut e, Active::Shm(pending));
            drop(e);
            return Ok(self.request(id));
        };
        let (_, wire) = self.wire()?;
        let mut run = Run::new(plan(&self.group()), wire, Blocks::Each(blocks), None);
        run.eager_max = eager_max;
        Ok(self.start(Active::ShmAndSched(pending, Box::new(run))))
    }

    /// [`Comm::run`] over blocks anywhere (which the caller keeps valid and
    /// otherwise untouched until this returns).
    fn run_blocks(
        &self,
        sched: Schedule,
        wire: Wire,
        blocks: Blocks,
        op: Option<ByteOp>,
        call: Call,
        at: &'static Location<'static>,
    ) -> Result<()> {
        if sched.rounds.is_empty() {
            return Ok(());
        }
        let mut run = Run::new(sched, wire, blocks, op);
        let mut err = None;
        let info = self.info(call, -2, -2, at);
        let mut e = self.engine();
        let r = e.wait_until(info, |e| match run.poll(e) {
            Ok(d) => d,
            Err(x) => {
                err = Some(x);
                true
            }
        });
        if err.is_some() || r.is_err() {
            run.abort(&mut e);
        }
        r?;
        err.map_or(Ok(()), Err)
    }

    fn group(&self) -> Vec<usize> {
        (0..self.size()).collect()
    }

    /// [`Comm::check_counts`], and that this rank's own `len` is its count;
    /// returns this rank.
    fn check_own_count(&self, counts: &[usize], len: usize) -> Result<usize> {
        self.check_counts(counts)?;
        let me = self.rank();
        if len != counts[me] {
            return Err(bad("send", len, format!("counts[{me}] = {}", counts[me])));
        }
        Ok(me)
    }

    fn check_counts(&self, counts: &[usize]) -> Result<()> {
        if counts.len() != self.size() {
            return Err(bad(
                "counts",
                counts.len(),
                format!("{} counts, one per rank", self.size()),
            ));
        }
        Ok(())
    }

    fn check_root(&self, root: usize) -> Result<()> {
        if root >= self.size() {
            return Err(bad(
                "root",
                root,
                format!("a rank from 0 to {} of this communicator", self.size() - 1),
            ));
        }
        Ok(())
    }

    // ----- barrier -----------------------------------------------------------------

    /// Blocks until every rank of the communicator has entered the barrier
    /// (dissemination; two-level across hosts).
    pub(crate) fn barrier_at(&self, at: &'static Location<'static>) -> Result<()> {
        if self.size() == 1 {
            return Ok(());
        }
        let info = self.info(Call::Barrier, -2, -2, at);
        if let Some(()) = self.shm_whole(at, false, |e, g| Some(shm::barrier(e, g, info)))? {
            return Ok(());
        }
        let hosts = self.host_groups(at)?;
        let (_, wire) = self.wire()?;
        let me = self.rank();
        let sched = match hosts {
            Some(h) => sc::barrier_hier(&h, me),
            None => sc::barrier(&self.group(), me),
        };
        self.run(sched, wire, &mut [], vec![0], None, Call::Barrier, at)
    }

    /// Starts a barrier; it completes once every rank has started it.
    pub fn ibarrier(&self) -> Result<CollRequest<()>> {
        let at = Location::caller();
        if let Some(r) = self.shm_start(at, |e, g| Some(Ok(shm::Pending::start(e, g))))? {
            return Ok(r);
        }
        let (_, wire) = self.wire()?;
        let sched = sc::barrier(&self.group(), self.rank());
        Ok(self.start(Active::Sched(Run::owning(
            sched,
            wire,
            AlignedBuf::zeroed(0),
            vec![0],
            None,
        ))))
    }

    // ----- broadcast ---------------------------------------------------------------

    /// Sends `buf` of rank `root` to every rank's `buf` (same length everywhere).
    #[track_caller]
    pub fn bcast<T: Pod>(&self, buf: &mut [T], root: usize) -> Result<()> {
        let at = Location::caller();
        self.check_root(root)?;
        let (p, me) = (self.size(), self.rank());
        if p == 1 {
            return Ok(());
        }
        let info = self.info(Call::Collective, -2, -2, at);
        let bytes = as_bytes_mut(buf);
        let n = bytes.len();
        // A short one inside one host: one look at the group.
        let short = self.shm_whole(at, false, |e, g| {
            if n > g.payload || n > e.svc.coll.config().shm_bcast_max {
                return None;
            }
            Some(match shm::short_bcast_by_copy(e, g, n) {
                true => shm::bcast_single_copy(e, g, bytes, root, info),
                false => shm::bcast(e, g, bytes, root, info),
            })
        })?;
        if let Some(()) = short {
            return Ok(());
        }
        let view = self.shm_view(at)?;
        let (shm_max, single, trial, single_copy) = {
            let e = self.engine();
            let cfg = e.svc.coll.config();
            // Auto, a core per rank: the local group times both ways.
            let (single, trial) = match cfg.bcast_copy {
                shm::LongCopy::Auto => (!e.oversubscribed(), !e.oversubscribed()),
                shm::LongCopy::Single => (true, false),
                shm::LongCopy::Area => (false, false),
            };
            (cfg.shm_bcast_max, single, trial, cfg.single_copy)
        };
        if let Some((true, _, _)) = view {
            let long = !self.shm_fits(n);
            if long && trial && n <= shm_max && single_copy {
                return self.shm_op(|e, g| shm::bcast_long(e, g, bytes, root, info));
            }
            if long && (single || n > shm_max) && single_copy {
                return self.shm_op(|e, g| shm::bcast_single_copy(e, g, bytes, root, info));
            }
            if n <= shm_max {
                return self.shm_op(|e, g| shm::bcast(e, g, bytes, root, info));
            }
        }
        let hosts = self.host_groups(at)?;
        let (cfg, wire) = self.wire()?;
        let elem = std::mem::size_of::<T>();
        if let (Some((false, _, _)), Some(h), true) = (view, &hosts, n <= shm_max) {
            // The root stands in for its host's leader; leaders first, then
            // each host through its area from its leader.
            let leader_of = |l: &Vec<usize>| if l.contains(&root) { root } else { l[0] };
            let local = h.iter().find(|l| l.contains(&me)).expect("own host");
            let my_leader = leader_of(local);
            if me == my_leader {
                let leaders: Vec<usize> = h.iter().map(leader_of).collect();
                let ri = leaders.iter().position(|&l| l == root).expect("root leads");
                let sched = sc::bcast_binomial(&leaders, ri, me, 1);
                self.run(sched, wire, bytes, vec![0, n], None, Call::Collective, at)?;
            }
            let li = local.iter().position(|&r| r == my_leader).expect("leader");
            return self.shm_op(|e, g| shm::bcast(e, g, bytes, li, info));
        }
        let (sched, offsets) = match hosts {
            Some(h) => (sc::bcast_hier(&h, root, me, 1), vec![0, n]),
            None if n >= cfg.bcast_long && n / elem.max(1) >= p => (
                sc::bcast_scatter_allgather(&self.group(), root, me),
                even_offsets(n / elem.max(1), p, elem.max(1)),
            ),
            None => (sc::bcast_binomial(&self.group(), root, me, 1), vec![0, n]),
        };
        self.run(sched, wire, bytes, offsets, None, Call::Collective, at)
    }

    // ----- reductions --------------------------------------------------------------

    /// Combines every rank's `send` with `op` (in rank order) into `recv` of
    /// rank `root`; `recv` is not used on other ranks (pass `&mut []`).
    #[track_caller]
    pub fn reduce<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: &Op<T>,
        root: usize,
    ) -> Result<()> {
        let at = Location::caller();
        self.check_root(root)?;
        if self.rank() == root && recv.len() < send.len() {
            return Err(bad(
                "recv",
                recv.len(),
                format!(
                    "at least {} elements at the root (the length of send)",
                    send.len()
                ),
            ));
        }
        let out = if self.rank() == root {
            &mut recv[..send.len()]
        } else {
            &mut []
        };
        self.reduce_work(Some(send), out, op, root, at)
    }

    /// [`Comm::reduce`] in place: `buf` is the contribution everywhere and the
    /// result at the root (other ranks' `buf` is unchanged).
    #[track_caller]
    pub fn reduce_in_place<T: Pod>(&self, buf: &mut [T], op: &Op<T>, root: usize) -> Result<()> {
        let at = Location::caller();
        self.check_root(root)?;
        if self.rank() == root {
            self.reduce_work(None, buf, op, root, at)
        } else {
            self.reduce_work(Some(buf), &mut [], op, root, at)
        }
    }

    /// A reduce: `own` is this rank's contribution (`None` at the root: it is
    /// in `out`, in place); `out` is the root's result buffer, empty
    /// elsewhere. The root reduces in `out` (others may read and write it
    /// there), and no rank copies its contribution where a path only reads it.
    fn reduce_work<T: Pod>(
        &self,
        own: Option<&[T]>,
        out: &mut [T],
        op: &Op<T>,
        root: usize,
        at: &'static Location<'static>,
    ) -> Result<()> {
        let count = own.map_or(out.len(), <[T]>::len);
        op.check_for(count)?;
        let is_root = self.rank() == root;
        // The root's contribution in its result buffer, for the paths that
        // reduce there.
        let root_in_out = |out: &mut [T]| {
            if let Some(own) = own.filter(|_| is_root) {
                copy_slice(out, own);
            }
        };
        if self.size() == 1 {
            root_in_out(out);
            return Ok(());
        }
        let n = count * std::mem::size_of::<T>();
        let info = self.info(Call::Collective, -2, -2, at);
        let elem = op.unit_bytes();
        let f = |a: &[u8], b: &mut [u8]| {
            op.f.call(bytemuck::cast_slice(a), bytemuck::cast_slice_mut(b))
        };
        let done = self.shm_whole(at, false, |e, g| {
            if !shm::long_reduction(e, g, n) {
                root_in_out(&mut *out);
                let side = match own {
                    Some(own) if !is_root => shm::Side::Give(as_bytes(own)),
                    _ => shm::Side::Root(as_bytes_mut(&mut *out)),
                };
                Some(shm::reduce(e, g, side, (&f, op.commutative), root, info))
            } else {
                // Longer: by single copy straight between the callers'
                // buffers, each member reducing one block and writing it
                // into the root's, or through the area chunk by chunk,
                // rather than a tree of whole-buffer messages through
                // temporaries (measured: docs/BENCHMARKS.md, sessions 22
                // and 31).
                shm::reduce_long(
                    e,
                    g,
                    own.map(as_bytes),
                    as_bytes_mut(&mut *out),
                    elem,
                    &f,
                    op.commutative,
                    root,
                    info,
                )
            }
        })?;
        if done.is_some() {
            return Ok(());
        }
        // Through messages: every rank of the tree may combine into its
        // buffer, so a rank other than the root works on a copy.
        let mut copy;
        let work = if is_root {
            root_in_out(out);
            out
        } else {
            copy = own.expect("a contribution off the root").to_vec();
            &mut copy[..]
        };
        let bytes = as_bytes_mut(work);
        let (_, wire) = self.wire()?;
        let sched = sc::reduce_binomial(&self.group(), root, self.rank(), 1, op.commutative);
        self.run(
            sched,
            wire,
            bytes,
            vec![0, n],
            Some(op.bytes_fn()),
            Call::Collective,
            at,
        )
    }

    /// Every rank gets the combination (in rank order) of every rank's `send`.
    #[track_caller]
    pub fn allreduce<T: Pod>(&self, send: &[T], recv: &mut [T], op: &Op<T>) -> Result<()> {
        if recv.len() != send.len() {
            return Err(bad(
                "recv",
                recv.len(),
                format!("the length of send ({})", send.len()),
            ));
        }
        copy_slice(&mut recv[..], send);
        self.allreduce_at(recv, op, Location::caller())
    }

    /// [`Comm::allreduce`] in place: `buf` is the contribution and the result.
    #[track_caller]
    pub fn allreduce_in_place<T: Pod>(&self, buf: &mut [T], op: &Op<T>) -> Result<()> {
        self.allreduce_at(buf, op, Location::caller())
    }

    fn allreduce_plan(
        &self,
        cfg: &Config,
        hosts: Option<Arc<Vec<Vec<usize>>>>,
        count: usize,
        elem: usize,
        commutative: bool,
    ) -> (Schedule, Vec<usize>) {
        let (p, me) = (self.size(), self.rank());
        let n = count * elem;
        let contiguous =
            |h: &Vec<Vec<usize>>| h.iter().all(|g| g.windows(2).all(|w| w[1] == w[0] + 1));
        if let Some(h) = hosts.filter(|h| commutative || contiguous(h)) {
            let s = sc::allreduce_hier(&h, me, 1, commutative, |l, me| sc::allreduce_rd(l, me, 1));
            return (s, vec![0, n]);
        }
        let g = self.group();
        if commutative && n >= cfg.allreduce_ring && count >= p {
            (sc::allreduce_ring(&g, me), even_offsets(count, p, elem))
        } else if n >= cfg.allreduce_long && count >= sc::pof2_floor(p) {
            let nb = sc::pof2_floor(p);
            (
                sc::allreduce_rabenseifner(&g, me),
                even_offsets(count, nb, elem),
            )
        } else {
            (sc::allreduce_rd(&g, me, 1), vec![0, n])
        }
    }

    pub(crate) fn allreduce_at<T: Pod>(
        &self,
        buf: &mut [T],
        op: &Op<T>,
        at: &'static Location<'static>,
    ) -> Result<()> {
        op.check_for(buf.len())?;
        if self.size() == 1 {
            return Ok(());
        }
        let n = std::mem::size_of_val(buf);
        let info = self.info(Call::Collective, -2, -2, at);
        // What may not be split: one element, or one group of a grouped
        // operation (`Op::user_grouped`).
        let elem = op.unit_bytes();
        let bytes = as_bytes_mut(buf);
        let done = self.shm_whole(at, false, |e, g| {
            let f = |a: &[u8], b: &mut [u8]| {
                op.f.call(bytemuck::cast_slice(a), bytemuck::cast_slice_mut(b))
            };
            if !shm::long_reduction(e, g, n) {
                Some(shm::allreduce(e, g, bytes, &f, info))
            } else if op.commutative && shm::area_fits(g, elem) {
                Some(shm::allreduce_long(e, g, bytes, elem, &f, info))
            } else if e.svc.coll.config().single_copy {
                Some(shm::allreduce_single_copy(
                    e,
                    g,
                    bytes,
                    elem,
                    &f,
                    op.commutative,
                    info,
                ))
            } else {
                None
            }
        })?;
        if done.is_some() {
            return Ok(());
        }
        let hosts = self.host_groups(at)?;
        let (cfg, wire) = self.wire()?;
        let count = buf.len() / op.group();
        let (sched, offsets) = self.allreduce_plan(&cfg, hosts, count, elem, op.commutative);
        self.run(
            sched,
            wire,
            as_bytes_mut(buf),
            offsets,
            Some(op.bytes_fn()),
            Call::Collective,
            at,
        )
    }

    /// Rank i gets block i (of `recv.len()` elements) of the combination of
    /// every rank's `send` (`size() * recv.len()` elements).
    #[track_caller]
    pub fn reduce_scatter_block<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: &Op<T>,
    ) -> Result<()> {
        let p = self.size();
        if send.len() != p * recv.len() {
            return Err(bad(
                "send",
                send.len(),
                format!("size() * recv.len() = {} elements", p * recv.len()),
            ));
        }
        self.reduce_scatter(send, recv, &vec![recv.len(); p], op)
    }

    /// Rank i gets the `counts[i]` elements at block i of the combination of
    /// every rank's `send` (the sum of `counts` elements).
    #[track_caller]
    pub fn reduce_scatter<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        op: &Op<T>,
    ) -> Result<()> {
        let at = Location::caller();
        op.check()?;
        for &c in counts {
            op.check_for(c)?;
        }
        let (p, me) = (self.size(), self.rank());
        if counts.len() != p {
            return Err(bad(
                "counts",
                counts.len(),
                format!("{p} counts, one per rank"),
            ));
        }
        let total: usize = counts.iter().sum();
        if send.len() != total || recv.len() < counts[me] {
            return Err(bad(
                "send",
                send.len(),
                format!(
                    "the sum of counts ({total}), with recv holding at least counts[{me}] = {}",
                    counts[me]
                ),
            ));
        }
        let elem = std::mem::size_of::<T>().max(1);
        let start: usize = counts[..me].iter().sum();
        if p == 1 {
            copy_slice(&mut recv[..total], send);
            return Ok(());
        }
        // Inside one host: small, through the collective area in one piece;
        // longer, by single copy out of the others' buffers or through the
        // area in rounds ([`shm::reduce_scatter_way`]; every rank knows
        // every count and the configuration, so all decide alike).
        let (sb, mine) = (as_bytes(send), start * elem..(start + counts[me]) * elem);
        let rb = as_bytes_mut(recv);
        let done = self.shm_whole(at, false, |e, g| {
            let info = self.info(Call::Collective, -2, -2, at);
            let f = op.bytes_fn();
            let Some(area) = shm::reduce_scatter_way(e, g, sb.len(), op) else {
                return (sb.len() <= g.payload)
                    .then(|| shm::reduce_scatter(e, g, sb, mine, rb, &*f, info));
            };
            let unit = op.unit_bytes();
            Some(if area {
                let offsets = count_offsets(counts, elem);
                shm::reduce_scatter_area(e, g, sb, &offsets, rb, unit, &*f, info)
            } else {
                let c = op.commutative;
                shm::reduce_scatter_single_copy(e, g, sb, mine, rb, unit, &*f, c, info)
            })
        })?;
        if done.is_some() {
            return Ok(());
        }
        let (_, wire) = self.wire()?;
        let g = self.group();
        if op.commutative {
            // Ring: rank i ends with schedule block i+1, so block k holds data
            // block k-1.
            let order: Vec<usize> = (0..p).map(|k| (k + p - 1) % p).collect();
            let mut work = Vec::with_capacity(total);
            let mut offs = Vec::with_capacity(p);
            for &b in &order {
                let s: usize = counts[..b].iter().sum();
                work.extend_from_slice(&send[s..s + counts[b]]);
                offs.push(counts[b]);
            }
            let offsets = count_offsets(&offs, elem);
            let sched = sc::reduce_scatter_ring(&g, me);
            let k = (me + 1) % p;
            let bytes = as_bytes_mut(&mut work);
            self.run(
                sched,
                wire,
                bytes,
                offsets.clone(),
                Some(op.bytes_fn()),
                Call::Collective,
                at,
            )?;
            let b = &bytemuck::cast_slice::<u8, T>(as_bytes(&work))
                [offsets[k] / elem..offsets[k + 1] / elem];
            copy_slice(&mut recv[..counts[me]], b);
        } else {
            let mut work = send.to_vec();
            let sched =
                sc::reduce_binomial(&g, 0, me, p, false).then(sc::scatter_binomial(&g, 0, me));
            let offsets = count_offsets(counts, elem);
            self.run(
                sched,
                wire,
                as_bytes_mut(&mut work),
                offsets,
                Some(op.bytes_fn()),
                Call::Collective,
                at,
            )?;
            copy_slice(&mut recv[..counts[me]], &work[start..start + counts[me]]);
        }
        Ok(())
    }
}
