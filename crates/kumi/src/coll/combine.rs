//! The runtime side of the combining service: one `kumi_core::combine::Node`
//! per communicator that has a [`Combiner`], fed with `Combine` frames by the
//! engine whenever this rank makes progress in *any* kumi call, and with the
//! clock when a level-2 wait is pending.
//!
//! Frames that arrive for a communicator before this rank has created its
//! combiner (another rank was faster) are kept and replayed at creation.
//! Messages handled per rank are counted ([`Combiner::messages_handled`]), which
//! is what shows that combining spreads the load of a hot counter.

use super::Config;
use crate::comm::Comm;
use crate::engine::Engine;
use crate::error::{Error, Result};
use bytemuck::Pod;
use kumi_core::call::Call;
use kumi_core::combine::{self as cc, op, Action, Level, Mode, Msg, Node, Ops, Tree};
use kumi_core::header::{Header, Kind};
use std::cell::Cell;
// foldhash, not SipHash: these maps are consulted for every combining
// request, keyed by kumi's own ids (see `coll/mod.rs`).
use foldhash::HashMap;
use std::panic::Location;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A user combining operation: `(a, b) -> a ⊕ b` over value bytes.
type UserOp = Arc<dyn Fn(&[u8], &[u8]) -> Vec<u8> + Send + Sync>;

/// A level-3 entry at an interior rank still incomplete after this long goes
/// up as it is (part of its subtree may have gone ahead uncombined after a
/// store overflow); the owner still waits for every contribution.
const LEVEL3_FALLBACK_NS: u64 = 2_000_000;

/// Most frames kept for combiners not created yet.
const EARLY_MAX: usize = 1 << 16;

struct Service {
    node: Node,
    members: Arc<[u32]>,
    me: u32,
    next_client: u64,
    results: HashMap<u64, std::result::Result<Vec<u8>, String>>,
}

/// Combining state in the engine.
#[derive(Default)]
pub(crate) struct State {
    services: HashMap<u32, Service>,
    early: Vec<(u32, Vec<u8>)>,
    user_ops: HashMap<u32, UserOp>,
    /// Earliest level-2 deadline of any node (ns since `epoch`).
    pub wake: Option<u64>,
    epoch: Option<Instant>,
}

struct OpsRef<'a>(&'a HashMap<u32, UserOp>);

impl Ops for OpsRef<'_> {
    fn combine(&self, id: u32, a: &[u8], b: &[u8]) -> std::result::Result<Vec<u8>, String> {
        if id < cc::OP_USER_FIRST {
            return cc::builtin(id, a, b);
        }
        match self.0.get(&id) {
            Some(f) => Ok(f(a, b)),
            None => Err(format!(
                "combining operation {id} is not registered on every rank (call Combiner::register_op everywhere first)"
            )),
        }
    }
}

impl State {
    /// A combining service exists, so other ranks' requests may pass here.
    #[inline]
    pub(crate) fn serving(&self) -> bool {
        !self.services.is_empty()
    }

    fn now(&mut self) -> u64 {
        let epoch = *self.epoch.get_or_insert_with(Instant::now);
        epoch.elapsed().as_nanos() as u64
    }

    fn rewake(&mut self) {
        self.wake = self
            .services
            .values()
            .filter_map(|s| s.node.next_deadline())
            .min();
    }
}

/// Sends what the node of `ctx` asked for; keeps replies for local clients.
fn flush(e: &mut Engine, ctx: u32) -> Result<()> {
    let Some(s) = e.svc.coll.combine.services.get_mut(&ctx) else {
        return Ok(());
    };
    let (me, members) = (s.me, s.members.clone());
    let mut sends = Vec::new();
    for a in s.node.take_actions() {
        match a {
            Action::Deliver { id, value } => {
                s.results.insert(id, value);
            }
            Action::Send { to, msg } => sends.push((to, msg)),
        }
    }
    e.svc.coll.combine.rewake();
    for (to, msg) in sends {
        let Some(&world) = members.get(to as usize) else {
            continue;
        };
        let payload = msg.encode();
        let mut h = Header::new(Kind::Combine);
        h.ctx = ctx;
        h.src = me;
        h.len = payload.len() as u64;
        e.push_frame(world, &h, &payload)?;
    }
    Ok(())
}

fn handle(e: &mut Engine, ctx: u32, src: u32, payload: &[u8]) -> Result<()> {
    let msg = Msg::decode(payload).map_err(Error::Protocol)?;
    let now = e.svc.coll.combine.now();
    let st = &mut e.svc.coll.combine;
    let Some(s) = st.services.get_mut(&ctx) else {
        return Ok(());
    };
    if src as usize >= s.members.len() {
        return Err(Error::Protocol(format!(
            "combining frame from rank {src} of a smaller communicator"
        )));
    }
    s.node.on_msg(now, src, msg, &OpsRef(&st.user_ops));
    flush(e, ctx)
}

/// A `Combine` frame arrived (called by the engine for every one).
pub(crate) fn on_frame(e: &mut Engine, _from: u32, h: &Header, p: &[u8]) -> Result<()> {
    if h.len != p.len() as u64 {
        return Err(Error::Protocol(format!(
            "combining frame announces {} bytes, carries {}",
            h.len,
            p.len()
        )));
    }
    if !e.svc.coll.combine.services.contains_key(&h.ctx) {
        if e.svc.coll.combine.early.len() >= EARLY_MAX {
            return Err(Error::Protocol(
                "too many combining frames for a communicator without a combiner".into(),
            ));
        }
        let mut b = h.src.to_le_bytes().to_vec();
        b.extend_from_slice(p);
        e.svc.coll.combine.early.push((h.ctx, b));
        return Ok(());
    }
    handle(e, h.ctx, h.src, p)
}

/// Level-2 deadlines: called from `progress` while one is pending.
pub(crate) fn on_timer(e: &mut Engine) -> Result<usize> {
    let now = e.svc.coll.combine.now();
    if e.svc.coll.combine.wake.is_none_or(|w| w > now) {
        return Ok(0);
    }
    let ctxs: Vec<u32> = e.svc.coll.combine.services.keys().copied().collect();
    for ctx in &ctxs {
        if let Some(s) = e.svc.coll.combine.services.get_mut(ctx) {
            s.node.poll(now);
        }
        flush(e, *ctx)?;
    }
    e.svc.coll.combine.rewake();
    Ok(1)
}

/// When a combining request may be merged with others (the arrival level).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// Level 0: never combined; every request travels to the owner.
    Never,
    /// Level 1: no wait; requests arriving while one is outstanding attach to it.
    Attach,
    /// Level 2: wait up to this long at each tree node for partners.
    Wait(Duration),
    /// Level 3: wait for every rank's contribution (each rank must call).
    All,
}

/// Operations of keyed reductions and fetch-and-op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CombineOp {
    /// Sum (wrapping for integers).
    Sum,
    /// Product (wrapping for integers).
    Prod,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
    /// Bitwise and (integers).
    Band,
    /// Bitwise or (integers).
    Bor,
    /// Bitwise exclusive or (integers).
    Bxor,
    /// A registered user operation ([`Combiner::register_op`]).
    User(u32),
}

/// Value types of the combining service: 64-bit lanes.
pub trait CombineValue: Pod {
    /// The wire id of `op` on this type, or why it is not defined.
    fn op_id(op: CombineOp) -> Result<u32>;
}

fn undefined(op: CombineOp, t: &str) -> Error {
    Error::InvalidArgument {
        arg: "op",
        value: 0,
        allowed: format!("{op:?} is not defined on {t} in the combining service"),
    }
}

impl CombineValue for i64 {
    fn op_id(o: CombineOp) -> Result<u32> {
        Ok(match o {
            CombineOp::Sum => op::SUM_I64,
            CombineOp::Prod => op::PROD_I64,
            CombineOp::Min => op::MIN_I64,
            CombineOp::Max => op::MAX_I64,
            CombineOp::Band => op::BAND,
            CombineOp::Bor => op::BOR,
            CombineOp::Bxor => op::BXOR,
            CombineOp::User(id) => id,
        })
    }
}

impl CombineValue for u64 {
    fn op_id(o: CombineOp) -> Result<u32> {
        Ok(match o {
            CombineOp::Sum => op::SUM_I64,
            CombineOp::Prod => op::PROD_I64,
            CombineOp::Min => op::MIN_U64,
            CombineOp::Max => op::MAX_U64,
            CombineOp::Band => op::BAND,
            CombineOp::Bor => op::BOR,
            CombineOp::Bxor => op::BXOR,
            CombineOp::User(id) => id,
        })
    }
}

impl CombineValue for f64 {
    fn op_id(o: CombineOp) -> Result<u32> {
        Ok(match o {
            CombineOp::Sum => op::SUM_F64,
            CombineOp::Prod => op::PROD_F64,
            CombineOp::Min => op::MIN_F64,
            CombineOp::Max => op::MAX_F64,
            CombineOp::User(id) => id,
            other => return Err(undefined(other, "f64")),
        })
    }
}

/// Stable 64-bit key of a name (FNV-1a): the same on every rank.
fn key_of(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A handle on the combining service of a communicator: named counters with
/// fetch-and-op, test-and-set, keyed reductions and a barrier, all served by a
/// tree of the communicator's ranks that merges requests on their way to each
/// key's owner. See `kumi_core::combine` for the protocol.
///
/// ```no_run
/// let universe = kumi::init()?;
/// let world = universe.world();
/// let c = world.combiner()?;
/// let ticket = c.fetch_add("tickets", 1, kumi::Arrival::Attach)?;
/// // Every rank got a different ticket, 0..size().
/// # let _ = ticket;
/// # Ok::<(), kumi::Error>(())
/// ```
pub struct Combiner {
    comm: Comm,
    barriers: Cell<u64>,
}

impl Comm {
    /// The combining service on this communicator. Collective: every member
    /// calls it (once; later calls return a handle on the same service).
    #[track_caller]
    pub fn combiner(&self) -> Result<Combiner> {
        let at = Location::caller();
        let ctx = self.ctx();
        let labels = self.host_labels(at)?;
        let mut e = self.engine();
        let cfg: Arc<Config> = e.svc.coll.config_arc();
        if let std::collections::hash_map::Entry::Vacant(slot) =
            e.svc.coll.combine.services.entry(ctx)
        {
            let tree = Tree::new(labels.to_vec());
            let me = self.rank() as u32;
            slot.insert(Service {
                node: Node::new(me, tree, cfg.combine_store),
                members: self.members().into(),
                me,
                next_client: 0,
                results: HashMap::default(),
            });
            let early = std::mem::take(&mut e.svc.coll.combine.early);
            for (c, b) in early {
                if c != ctx {
                    e.svc.coll.combine.early.push((c, b));
                    continue;
                }
                let src = u32::from_le_bytes(b[..4].try_into().expect("4 bytes"));
                if let Err(x) = handle(&mut e, ctx, src, &b[4..]) {
                    crate::engine::log(e.world_rank, &format!("dropped a combining frame: {x}"));
                }
            }
        }
        drop(e);
        Ok(Combiner {
            comm: self.clone(),
            barriers: Cell::new(0),
        })
    }
}

impl Combiner {
    #[allow(clippy::too_many_arguments)]
    fn call(
        &self,
        key: u64,
        opid: u32,
        mode: Mode,
        arrival: Arrival,
        value: Vec<u8>,
        at: &'static Location<'static>,
    ) -> Result<Vec<u8>> {
        let ctx = self.comm.ctx();
        let size = self.comm.size() as u32;
        let (level, wait_ns) = match arrival {
            Arrival::Never => (Level::Never, 0),
            Arrival::Attach => (Level::Attach, 0),
            Arrival::Wait(d) => (Level::Wait, d.as_nanos().min(u64::MAX as u128) as u64),
            Arrival::All => (Level::All, LEVEL3_FALLBACK_NS),
        };
        let mut e = self.comm.engine();
        if value.len() + 64 > e.eager_min() {
            return Err(Error::InvalidArgument {
                arg: "value",
                value: value.len() as i64,
                allowed: format!(
                    "at most {} bytes (the eager limit less 64)",
                    e.eager_min().saturating_sub(64)
                ),
            });
        }
        let now = e.svc.coll.combine.now();
        let st = &mut e.svc.coll.combine;
        let s = st
            .services
            .get_mut(&ctx)
            .expect("created with the combiner");
        let client = s.next_client;
        s.next_client += 1;
        let req = cc::Request {
            key,
            op: opid,
            mode,
            level,
            count: size,
            wait_ns,
            weight: 1,
            reply_to: 0,
            reply_id: 0,
            value,
        };
        s.node.submit(now, client, req, &OpsRef(&st.user_ops));
        flush(&mut e, ctx)?;
        // Serve others at least once even when the answer is already here (the
        // owner of a key answers itself): a rank spinning on its own counter must
        // not starve everyone else's requests.
        e.progress()?;
        let info = self.comm.info(Call::Collective, -2, -2, at);
        e.wait_until(info, |e| {
            e.svc
                .coll
                .combine
                .services
                .get(&ctx)
                .is_some_and(|s| s.results.contains_key(&client))
        })?;
        let s = e.svc.coll.combine.services.get_mut(&ctx).expect("service");
        s.results
            .remove(&client)
            .expect("waited for it")
            .map_err(|m| Error::Protocol(format!("combining request failed: {m}")))
    }

    /// Registers user operation `id` (from 1024): `f(a, b) = a ⊕ b` over value
    /// bytes, associative (and commutative for [`Combiner::reduce`]). Every
    /// rank must register it before any uses it: interior ranks apply it.
    pub fn register_op(
        &self,
        id: u32,
        f: impl Fn(&[u8], &[u8]) -> Vec<u8> + Send + Sync + 'static,
    ) -> Result<()> {
        if id < cc::OP_USER_FIRST {
            return Err(Error::InvalidArgument {
                arg: "id",
                value: id as i64,
                allowed: format!("an id from {} (lower ids are built in)", cc::OP_USER_FIRST),
            });
        }
        self.comm
            .engine()
            .svc
            .coll
            .combine
            .user_ops
            .insert(id, Arc::new(f));
        Ok(())
    }

    /// Adds `delta` to counter `name` (initially 0) and returns its previous
    /// value. Concurrent callers get distinct values, exactly as if their calls
    /// ran one after another.
    #[track_caller]
    pub fn fetch_add(&self, name: &str, delta: i64, arrival: Arrival) -> Result<i64> {
        self.fetch_op(name, CombineOp::Sum, delta, arrival)
    }

    /// `counter = counter ⊕ value`, returning the previous value (serialized as
    /// [`Combiner::fetch_add`]).
    #[track_caller]
    pub fn fetch_op<T: CombineValue>(
        &self,
        name: &str,
        op: CombineOp,
        value: T,
        arrival: Arrival,
    ) -> Result<T> {
        let at = Location::caller();
        let id = T::op_id(op)?;
        let v = self.call(
            key_of(name),
            id,
            Mode::Fetch,
            arrival,
            bytemuck::bytes_of(&value).to_vec(),
            at,
        )?;
        bytemuck::try_pod_read_unaligned(&v)
            .map_err(|_| Error::Protocol(format!("counter {name:?} holds {} bytes", v.len())))
    }

    /// The current value of counter `name` (reads of one counter in flight
    /// together share one trip to its owner).
    #[track_caller]
    pub fn read(&self, name: &str) -> Result<i64> {
        let v = self.call(
            key_of(name),
            op::KEEP,
            Mode::Fetch,
            Arrival::Attach,
            vec![0; 8],
            Location::caller(),
        )?;
        bytemuck::try_pod_read_unaligned(&v)
            .map_err(|_| Error::Protocol(format!("counter {name:?} holds {} bytes", v.len())))
    }

    /// Sets flag `name` and returns whether it was already set (a lock is
    /// taken when this returns `false`). Concurrent callers attach to one
    /// another: one trip to the owner serves them all.
    #[track_caller]
    pub fn test_and_set(&self, name: &str) -> Result<bool> {
        let prev = self.fetch_op(name, CombineOp::Bor, 1u64, Arrival::Attach)?;
        Ok(prev & 1 == 1)
    }

    /// Clears flag (or counter) `name`.
    #[track_caller]
    pub fn reset(&self, name: &str) -> Result<()> {
        self.fetch_op(name, CombineOp::Band, 0u64, Arrival::Never)
            .map(|_| ())
    }

    /// Keyed reduction: every rank of the communicator contributes `value`
    /// under `key`; each gets the combination of all (a commutative `op`: the
    /// tree merges in arrival order).
    #[track_caller]
    pub fn reduce<T: CombineValue>(&self, key: &str, value: &[T], op: CombineOp) -> Result<Vec<T>> {
        let id = T::op_id(op)?;
        let v = self.call(
            key_of(key),
            id,
            Mode::Reduce,
            Arrival::All,
            bytemuck::cast_slice(value).to_vec(),
            Location::caller(),
        )?;
        if v.len() != std::mem::size_of_val(value) {
            return Err(Error::Protocol(format!(
                "keyed reduction {key:?}: ranks contributed values of different lengths"
            )));
        }
        let mut out = vec![T::zeroed(); value.len()];
        bytemuck::cast_slice_mut::<T, u8>(&mut out).copy_from_slice(&v);
        Ok(out)
    }

    /// A barrier through the combining tree (level 3: each node waits for its
    /// whole subtree, then one message goes up; the release comes down).
    #[track_caller]
    pub fn barrier(&self) -> Result<()> {
        let g = self.barriers.get();
        self.barriers.set(g + 1);
        let key = key_of("kumi.barrier") ^ g.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.call(
            key,
            op::NONE,
            Mode::Reduce,
            Arrival::All,
            Vec::new(),
            Location::caller(),
        )
        .map(|_| ())
    }

    /// Combining messages this rank has received so far (requests and replies).
    pub fn messages_handled(&self) -> u64 {
        let ctx = self.comm.ctx();
        self.comm
            .engine()
            .svc
            .coll
            .combine
            .services
            .get(&ctx)
            .map_or(0, |s| s.node.handled)
    }
}

impl std::fmt::Debug for Combiner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Combiner")
            .field("comm", &self.comm)
            .finish()
    }
}
