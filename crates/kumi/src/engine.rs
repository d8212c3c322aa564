//! The progress engine: one per rank, owning the transports, the matching queues
//! and every request in flight.
//!
//! Nothing here runs on its own thread: progress happens inside kumi calls
//! (`wait`, `test`, blocking sends and receives). A request is a slot in a slab; a
//! frame that arrives is handed to [`Engine::on_frame`], which either completes a
//! posted receive (copying straight from the transport into the user's buffer) or
//! queues the message as unexpected.
//!
//! Protocols, chosen per message:
//! - **eager** (`len <= eager_limit`): the whole message in one frame. A plain send
//!   completes when the transport accepts the frame; a synchronous send completes
//!   when the receiver's `Ack` comes back.
//! - **rendezvous** (larger): `Rts` carries the sender's buffer address. The
//!   receiver, once matched, reads the message straight out of the sender's memory
//!   with `process_vm_readv` (one copy) and answers `Fin`. If the kernel refuses
//!   that call, the engine says so once and from then on answers `Cts`, and the
//!   sender pushes the message in `Data` chunks through the ring (pipelined copy).
//!
//! Small-message path: no allocation and no lock. A frame that finds its ring full
//! is copied to a per-peer overflow queue (allocation only then), which keeps the
//! per-pair order every later frame to that peer must respect.

use crate::error::{Error, Result};
use crate::request::Status;
use crate::watch::Watch;
use kumi_core::call::Call;
use kumi_core::header::{Header, Kind, FLAG_SYNC};
use kumi_core::matching::{Envelope, Matcher, Pattern};
use kumi_transport::shm::{ShmTransport, Turn, AWAITS_NOTHING, AWAITS_OTHER};
use kumi_transport::{cma, Transport};
use std::collections::VecDeque;
use std::panic::Location;
use std::time::{Duration, Instant};

/// What a rank is blocked in, for reports: the call, its communicator, peer
/// and tag, and where in the user's program it was made.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WaitInfo {
    pub call: Call,
    /// Point-to-point context id of the communicator (`u32::MAX`: none).
    pub ctx: u32,
    /// Peer's rank in that communicator, `ANY_SOURCE` (-1), or -2 for none.
    pub peer: i32,
    /// Tag, `ANY_TAG` (-1), or -2 for none.
    pub tag: i32,
    /// The user's call site (`#[track_caller]`).
    pub at: &'static Location<'static>,
    /// World rank of the one rank whose message the wait is for (`u32::MAX`:
    /// none, any, or not known): ranks bound to cores publish it when they
    /// wait ([`Engine::wait_until_with_mates`]).
    pub world: u32,
}

impl WaitInfo {
    /// A wait with no communicator, peer or tag (wait on a request, finalize).
    #[track_caller]
    pub fn plain(call: Call) -> WaitInfo {
        WaitInfo {
            call,
            ctx: u32::MAX,
            peer: -2,
            tag: -2,
            at: Location::caller(),
            world: u32::MAX,
        }
    }
}

/// Passes a waiting rank that found its core to be its own polls before it
/// looks again ([`ShmTransport::turn`]). A guess: a pass is ~50 ns,
/// so the look is repeated about every microsecond, which is how soon a rank
/// of the core may become nearer to the message than this one.
const KEPT_PASSES: u32 = 16;

/// How a world rank is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// This rank itself: frames go through an in-engine queue.
    Me,
    /// A rank of this host: the shared-memory transport.
    Shm,
    /// A rank of another host: the network transport.
    Net,
}

/// A request handle: slab index in the low 32 bits, generation in the high 32.
pub(crate) type ReqId = u64;

/// Bits of a request's slot index in a packed id ([`pack_id`]).
const PACKED_INDEX_BITS: u32 = 16;
/// Bits of the slot's generation in a packed id: what tells a stale id from
/// a live one (it fails to unless the slot was reused a multiple of 1024
/// times since).
const PACKED_GEN_BITS: u32 = 10;

/// Request id `id` in 26 bits (a slot index below 65536 and the low bits
/// of its generation), for handles of 32 bits that keep 6 for their kind;
/// `None` for a slot beyond that. [`Engine::unpack_id`] undoes it.
#[inline(always)]
pub(crate) fn pack_id(id: ReqId) -> Option<u32> {
    let (gen, i) = ((id >> 32) as u32, id as u32);
    (i < 1 << PACKED_INDEX_BITS)
        .then_some(((gen & ((1 << PACKED_GEN_BITS) - 1)) << PACKED_INDEX_BITS) | i)
}

/// What a send needs until it completes.
enum SendPhase {
    /// Waiting for `Fin` (rendezvous, single copy) or `Ack` (synchronous eager).
    AwaitReply,
    /// Pushing `Data` chunks to receiver request `recv_req`; `off` bytes sent.
    Streaming { recv_req: u64, off: usize },
}

enum Op {
    Send {
        peer: u32,
        buf: *const u8,
        len: usize,
        phase: SendPhase,
    },
    Recv {
        buf: *mut u8,
        cap: usize,
        data: Option<(usize, usize)>,
    },
}

struct Req {
    done: bool,
    status: Status,
    /// Boxed: a request moves into and out of the slab once per message,
    /// and an inline error would make it half again as large (128 bytes).
    error: Option<Box<Error>>,
    /// The user let go of the handle; free the slot on completion.
    detached: bool,
    op: Op,
}

/// The blocking receive the application thread waits in, when it is
/// matched without a request ([`Engine::recv`]).
#[derive(Clone, Copy)]
enum Direct {
    /// None.
    Idle,
    /// Waiting: the next arriving message that `pat` accepts is its.
    Waiting {
        pat: Pattern,
        buf: *mut u8,
        cap: usize,
    },
    /// An eager message arrived for it: its status, as `Err` if it did not
    /// fit (then with the message's length).
    Done(std::result::Result<Status, Status>),
    /// A rendezvous arrived for it: it became request `id`.
    Promoted(ReqId),
}

/// Lands eager message `data` (envelope `env`) in a receive of `cap` bytes
/// at `buf` and counts it: its status, or `Err` with it if it does not fit
/// (then nothing is written).
///
/// # Safety
/// `buf` must be valid for writes of `cap` bytes, and not overlap `data`.
#[inline(always)]
unsafe fn land_eager(
    counters: &mut Counters,
    env: &Envelope,
    data: &[u8],
    buf: *mut u8,
    cap: usize,
) -> std::result::Result<Status, Status> {
    let st = Status {
        source: env.src as i32,
        tag: env.tag,
        bytes: data.len(),
        cancelled: false,
    };
    counters.msgs_recv += 1;
    counters.bytes_recv += data.len() as u64;
    if data.len() > cap {
        return Err(st);
    }
    if !data.is_empty() {
        // SAFETY: the caller's contract; `data.len() <= cap`.
        unsafe { kumi_transport::copy_bytes(data.as_ptr(), buf, data.len()) };
    }
    Ok(st)
}

/// The error of message `st` that did not fit a receive of `cap` bytes.
fn truncated(st: Status, cap: usize) -> Error {
    Error::Truncated {
        message_bytes: st.bytes,
        buffer_bytes: cap,
        source: st.source,
        tag: st.tag,
    }
}

impl Req {
    /// A receive into the `cap` bytes at `buf`, in flight.
    fn recv(buf: *mut u8, cap: usize) -> Req {
        Req {
            done: false,
            status: Status::empty(),
            error: None,
            detached: false,
            op: Op::Recv {
                buf,
                cap,
                data: None,
            },
        }
    }
}

/// An unexpected message, kept until a receive matches it.
enum Unexpected {
    Eager {
        from: u32,
        data: Vec<u8>,
        sync_id: Option<u64>,
    },
    Rts {
        from: u32,
        len: usize,
        sender_req: u64,
        addr: u64,
    },
}

/// A frame the transport had no room for yet.
struct OutFrame {
    header: Header,
    payload: Vec<u8>,
}

/// How a rank waits when nothing is arriving: poll, then yield, then sleep.
#[derive(Clone, Debug)]
pub(crate) struct WaitPolicy {
    /// Empty polls before the clock is first read (a wait shorter than this
    /// costs no system call).
    pub polls: u32,
    pub spin: Duration,
    pub yield_for: Duration,
    pub sleep_timeout: Duration,
    /// Empty passes per `sched_yield` before the clock is read
    /// (`KUMI_YIELD_EVERY`; default by transport, see `wait_loop`).
    pub yield_every: Option<u32>,
    /// More ranks on this host than cores.
    pub oversubscribed: bool,
    /// Oversubscribed, how long a rank waiting in a collective keeps the
    /// core without yielding once every other rank bound to its core waits
    /// in the same collective (`KUMI_MATE_SPIN_US`; see
    /// [`Engine::wait_until_with_mates`]).
    pub mate_spin: Duration,
}

impl WaitPolicy {
    /// Defaults depend on whether this host runs more ranks than it has cores.
    ///
    /// One rank per core: waking a process that sleeps in the kernel costs
    /// ~50 us on an idle virtual CPU, so the rank keeps polling for a good
    /// while (`spin` 200 us, then `yield_for` 2 ms) before it sleeps on its
    /// doorbell. Both phases poll *and* yield now and then (see `wait_loop`):
    /// the scheduler may have put both ranks of a pair on one core, and a rank
    /// that only spins would keep its peer off that core until the next tick.
    ///
    /// Oversubscribed: every poll a waiting rank makes is time the rank that
    /// holds the data cannot run, so it yields after a handful of empty polls
    /// and does not spin at all; after 50 ms of yielding it sleeps. Not
    /// sooner: a yield costs the core's other ranks almost nothing, while a
    /// rank asleep costs whoever needs it a wake-up of 50 us to milliseconds
    /// (the scheduler places a woken task by its lag). When a stall of the
    /// machine (another tenant, a busy host) made waits pass a 2 ms bound,
    /// ranks fell asleep one after another and each one's wake-up lengthened
    /// the others' waits past the bound again: collectives at np=8 took
    /// milliseconds instead of microseconds until the stalls ended
    /// (docs/BENCHMARKS.md, session 6). The numbers are measured choices,
    /// overridable: `KUMI_POLLS`, `KUMI_SPIN_US`, `KUMI_YIELD_US`,
    /// `KUMI_SLEEP_MS` (the configuration's [`kumi_core::config::Wait`]).
    pub fn new(w: &kumi_core::config::Wait, oversubscribed: bool) -> WaitPolicy {
        let (polls, spin, yield_for) = if oversubscribed {
            (4, 0, 50_000)
        } else {
            (128, 200, 2_000)
        };
        WaitPolicy {
            polls: w.polls.unwrap_or(polls),
            spin: Duration::from_micros(w.spin_us.unwrap_or(spin)),
            yield_for: Duration::from_micros(w.yield_us.unwrap_or(yield_for)),
            sleep_timeout: Duration::from_millis(w.sleep_ms),
            oversubscribed,
            mate_spin: Duration::from_micros(w.mate_spin_us),
            yield_every: w.yield_every,
        }
    }
}

/// Eager limit on the network when `KUMI_EAGER_LIMIT` is unset. Measured
/// over TCP between two namespace hosts (docs/BENCHMARKS.md, session 11):
/// against 8 KiB, 16 and 32 KiB messages ping-pong 2.5x and 2.3x faster
/// (23 -> 9 us, 28 -> 12 us) and stream 1.7x and 1.1x faster; at 64 KiB,
/// eager streamed 16 % slower than the pipelined rendezvous.
const EAGER_NET: usize = 32 * 1024;

/// The eager limits `(shared memory, network)`: the largest message sent in
/// one frame, above which a send is a rendezvous (single copy on shared
/// memory). `shm_max`/`net_max`: the largest frame each transport present
/// carries; `asked`: `KUMI_EAGER_LIMIT`, which sets both and must fit both.
///
/// Unset, the shared-memory limit follows the ring: a quarter of the largest
/// record rounded down to a power of two, between 8 and 32 KiB (32 KiB with
/// the rings of up to 8 ranks on a host, 16 KiB up to 11, 8 KiB from 12),
/// so an eager record never takes more than a sixteenth of its ring.
/// Measured (docs/BENCHMARKS.md, session 11): with a 1 MiB ring, eager 16
/// and 32 KiB messages ping-pong 3x and 2x faster than by rendezvous (4.6 ->
/// 1.6 us, 5.6 -> 2.6 us) and stream 3x and 2x faster. Eager 64 KiB
/// ping-ponged faster too (7.7 -> 4.7 us) but streamed at 8.5-22.6 GB/s from
/// run to run against a steady 10.6-12.9 by rendezvous, and 64 KiB streaming
/// is a target (issue 3): hence the cap. (With the 64 KiB rings of the first
/// sessions, eager 16 KiB filled a ring after three records and streamed at
/// a fifth of the rendezvous rate: hence the floor of 8 KiB and the
/// scaling.) On the network: [`EAGER_NET`].
fn eager_limits(
    shm_max: Option<usize>,
    net_max: Option<usize>,
    asked: Option<u64>,
) -> Result<(usize, usize)> {
    if let Some(v) = asked {
        let v = usize::try_from(v).unwrap_or(usize::MAX);
        if let Some(m) = shm_max.into_iter().chain(net_max).min().filter(|&m| v > m) {
            return Err(Error::Bootstrap(format!(
                "KUMI_EAGER_LIMIT={v} exceeds the largest frame the transport holds ({m} bytes); \
                 lower it or raise KUMI_SHM_RING_BYTES"
            )));
        }
        return Ok((v, v));
    }
    let net = EAGER_NET.min(net_max.unwrap_or(usize::MAX));
    let shm = match shm_max {
        Some(m) => {
            let quarter = (m / 4).max(1);
            let pow2 = 1usize << (usize::BITS - 1 - quarter.leading_zeros());
            pow2.clamp(8 * 1024, 32 * 1024).min(m)
        }
        None => net,
    };
    Ok((shm, if net_max.is_some() { net } else { shm }))
}

/// What an operation started as a [`crate::raw::Ticket`] waits for, kept
/// beside its request for wait reports ("MPI_Recv from rank 1, tag 7"):
/// a ticket is one word (the C library's request handle encodes it), so
/// the rest lives here.
#[derive(Clone, Copy)]
pub(crate) struct Described {
    pub send: bool,
    /// Point-to-point context id of the operation's communicator.
    pub ctx: u32,
    /// The peer's rank in that communicator, or `ANY_SOURCE`.
    pub peer: i32,
    /// The tag, or `ANY_TAG`.
    pub tag: i32,
}

impl Described {
    /// What a wait on the operation is: (call, context, peer, tag).
    pub fn what(&self) -> (Call, u32, i32, i32) {
        let call = if self.send { Call::Send } else { Call::Recv };
        (call, self.ctx, self.peer, self.tag)
    }
}

#[derive(Default)]
struct Slab {
    /// Each slot's generation (bumped when its request is removed: an old
    /// id no longer finds the slot's next request) and request.
    entries: Vec<(u32, Option<Req>)>,
    /// The descriptions of requests started as tickets, by slot, each with
    /// the generation of the request it describes: a slot's description is
    /// its request's only while the generations agree, so the requests
    /// not started as tickets (the Rust API's, the runtime's own) write
    /// nothing here and are not found by [`Engine::unpack_id`]. Apart from
    /// `entries`, whose slots stay as small as before tickets existed.
    tickets: Vec<(u32, Described)>,
    free: Vec<u32>,
    /// Requests not completed yet (for the progress thread).
    open: usize,
}

impl Slab {
    /// Stores request `r` (described as `what`, if given: see
    /// [`Engine::describe`]); its id.
    #[inline(always)]
    fn insert(&mut self, r: Req, what: Option<Described>) -> ReqId {
        self.open += usize::from(!r.done);
        let id = match self.free.pop() {
            Some(i) => {
                let e = &mut self.entries[i as usize];
                // A free slot holds `None` (`remove` took its request), so
                // there is nothing to drop: skip the drop glue.
                let old = e.1.replace(r);
                debug_assert!(old.is_none());
                std::mem::forget(old);
                ((e.0 as u64) << 32) | i as u64
            }
            None => {
                self.entries.push((1, Some(r)));
                (1u64 << 32) | (self.entries.len() as u64 - 1)
            }
        };
        if let Some(w) = what {
            self.describe(id, w);
        }
        id
    }

    /// Records `what` as the description of request `id` (live).
    #[inline(always)]
    fn describe(&mut self, id: ReqId, what: Described) {
        let (gen, i) = ((id >> 32) as u32, id as u32 as usize);
        if i >= self.tickets.len() {
            self.grow_tickets(i);
        }
        self.tickets[i] = (gen, what);
    }

    #[cold]
    fn grow_tickets(&mut self, i: usize) {
        let none = Described {
            send: false,
            ctx: u32::MAX,
            peer: -2,
            tag: -2,
        };
        self.tickets.resize(i + 1, (0, none));
    }

    /// The description of live request `id`, if it was started as a ticket.
    #[inline(always)]
    fn described(&self, id: ReqId) -> Option<Described> {
        let (gen, i) = ((id >> 32) as u32, id as u32 as usize);
        match (self.entries.get(i), self.tickets.get(i)) {
            (Some((g, Some(_))), Some(&(dg, d))) if *g == gen && dg == gen => Some(d),
            _ => None,
        }
    }

    fn get(&mut self, id: ReqId) -> Option<&mut Req> {
        self.get_with_open(id).map(|(r, _)| r)
    }

    /// [`Slab::get`], with the count of open requests beside it (for
    /// [`Engine::mark_done`] while the request is borrowed).
    fn get_with_open(&mut self, id: ReqId) -> Option<(&mut Req, &mut usize)> {
        let (gen, i) = ((id >> 32) as u32, id as u32 as usize);
        match self.entries.get_mut(i) {
            Some((g, Some(r))) if *g == gen => Some((r, &mut self.open)),
            _ => None,
        }
    }

    #[inline(always)]
    fn remove(&mut self, id: ReqId) -> Option<Req> {
        let (gen, i) = ((id >> 32) as u32, id as u32 as usize);
        match self.entries.get_mut(i) {
            Some((g, slot @ Some(_))) if *g == gen => {
                *g = g.wrapping_add(1).max(1);
                self.free.push(i as u32);
                let r = slot.take();
                self.open -= usize::from(r.as_ref().is_some_and(|r| !r.done));
                r
            }
            _ => None,
        }
    }
}

/// Per-rank counters, for statistics and the monitor.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    /// Messages sent (eager and rendezvous), counting sends to self.
    pub msgs_sent: u64,
    /// Payload bytes sent.
    pub bytes_sent: u64,
    /// Messages received (matched).
    pub msgs_recv: u64,
    /// Payload bytes received.
    pub bytes_recv: u64,
    /// Progress passes that moved something on the progress thread, while
    /// the application computed.
    pub async_passes: u64,
    /// Frames of any kind that arrived (data chunks and replies included):
    /// a wait during which they keep coming is moving, not stuck.
    pub frames_in: u64,
    /// Per world peer: messages and bytes sent to it (counted when the send
    /// starts) and arrived from it (counted when the first frame of the message
    /// arrives, matched or not); the internal messages of collectives apart.
    /// The deadlock detector compares the two ends.
    pub peers: Vec<kumi_core::deadlock::PeerCount>,
}

pub(crate) struct Engine {
    pub world_rank: u32,
    pub world_size: u32,
    /// Boxed: `progress` takes it out and puts it back on every pass (the
    /// frames' sink needs the engine), which should move a pointer, not the
    /// whole transport.
    shm: Option<Box<ShmTransport>>,
    /// The network transport, for ranks on other hosts.
    net: Option<Box<dyn Transport + Send>>,
    /// How each world rank is reached.
    route: Vec<Route>,
    /// Process id of each local world rank (for single copy); 0 if unknown.
    pids: Vec<i32>,
    my_local: usize,
    /// Local ranks are bound to this many cores, round robin (see
    /// [`Engine::shares_core_with`]), or not bound.
    bound_cores: Option<usize>,
    /// Oversubscribed with the ranks bound to cores: waits publish whom they
    /// wait for, a waiting rank keeps or hands on its core by the chains of
    /// waits ([`ShmTransport::turn`]), and a frame sent to a rank of this
    /// host wakes the ranks asleep in a wait for that rank
    /// ([`ShmTransport::wake_waiters_of`]).
    wake_ahead: bool,
    /// Local ranks (below 64) sent to since this rank last started a wait,
    /// whose waiters it wakes when it does ([`Engine::wake_waiters`]).
    sent_to: u64,
    self_frames: VecDeque<(Header, Vec<u8>)>,
    /// Frames waiting for room, per world peer (allocated on first overflow).
    outq: Vec<VecDeque<OutFrame>>,
    outq_len: usize,
    streaming: Vec<ReqId>,
    matcher: Matcher<ReqId, Unexpected>,
    reqs: Slab,
    /// The blocking receive in progress, if it goes without a request.
    direct: Direct,
    /// Largest message sent eagerly to a rank on this host (and to self).
    eager_limit: usize,
    /// Largest message sent eagerly to a rank on another host.
    eager_net: usize,
    /// The smaller of the two: below it no send asks which route it takes.
    pub(crate) eager_min: usize,
    single_copy: bool,
    policy: WaitPolicy,
    pub counters: Counters,
    /// Next free communicator context id (pairs: p2p, collective).
    pub next_ctx: u32,
    /// Supervision: reports long waits to the launcher.
    pub watch: Watch,
    /// Messages at least this long use the two-sided single copy.
    split_min: usize,
    /// A single-copy read has succeeded once (so the kernel allows it).
    cma_verified: bool,
    /// First halves of two-sided copies, read after the `Split` frame is out.
    pending_reads: Vec<PendingRead>,
    /// Collectives in flight and the combining service (`coll`).
    pub(crate) coll: crate::coll::CollState,
    /// One-sided access across hosts (`rma`): parts served, answers awaited.
    /// Boxed, like `ctxs`: rarely used, and kept off the cache lines of the
    /// engine's hot fields (inline they made the engine ~400 bytes larger).
    pub(crate) rma: Box<crate::rma::RmaState>,
    /// Contexts of nonblocking duplicates.
    ctxs: Box<Ctxs>,
    /// An error met by the progress thread, returned by the next call.
    async_error: Option<Error>,
}

// SAFETY: what keeps `Engine` from being `Send` automatically are raw pointers:
// the buffers of requests in flight (lent by the caller until the request
// completes; the Rust API borrows them for the request's scope, the C ABI has
// MPI's rule that they are untouched until completion) and the collectives'
// buffers of the same kind. These are addresses in this process, valid from any
// of its threads. The engine is only reached through `progress::Shared`, whose
// mutex makes sure one thread at a time uses it, so the application thread and
// the progress thread never touch a buffer, or the engine, at once.
unsafe impl Send for Engine {}

/// Which transport a waiting rank sleeps on.
#[derive(Clone, Copy)]
enum Bed {
    Shm,
    Net,
}

/// A receiver's half of a two-sided single copy, waiting to be read.
struct PendingRead {
    id: ReqId,
    from: u32,
    addr: u64,
    sender_req: u64,
}

/// Where a two-sided copy splits a message of `len` bytes: the receiver reads
/// `[0, split)`, the sender writes `[split, len)`. Cache-line aligned.
fn split_point(len: usize) -> usize {
    (len / 2) & !63
}

/// Contexts of nonblocking duplicates: the server (used on world rank 0),
/// how many each parent made here, and the answers awaited.
#[derive(Default)]
struct Ctxs {
    server: kumi_core::ctxsvc::Server,
    idups: std::collections::HashMap<(u32, u32), u64>,
    /// Communicators made from groups here, by (string tag, members).
    from_groups: std::collections::HashMap<(String, Vec<u32>), u64>,
    asks: std::collections::HashMap<u64, Option<std::result::Result<u32, String>>>,
    next_ask: u64,
}

/// How the engine is put together; see `Universe::init`.
pub(crate) struct EngineSetup<'a> {
    pub world_rank: u32,
    pub world_size: u32,
    pub shm: Option<ShmTransport>,
    pub net: Option<Box<dyn Transport + Send>>,
    pub route: Vec<Route>,
    pub pids: Vec<i32>,
    pub watch: Watch,
    pub my_local: usize,
    pub oversubscribed: bool,
    /// What `bind::apply` returned: the number of cores the local ranks are
    /// bound over, if they are.
    pub bound_cores: Option<usize>,
    /// The rank's configuration.
    pub tuning: &'a kumi_core::config::Tuning,
}

impl Engine {
    pub fn new(s: EngineSetup) -> Result<Engine> {
        let t = s.tuning;
        let (eager_limit, eager_net) = eager_limits(
            s.shm.as_ref().map(|t| t.max_payload()),
            s.net.as_ref().map(|t| t.max_payload()),
            t.eager_limit,
        )?;
        // What the job allows, the same on every rank; `single_copy` below
        // is this rank's, which turns off if the kernel refuses a copy.
        let single_copy = t.single_copy && !t.deny_cma;
        Ok(Engine {
            world_rank: s.world_rank,
            world_size: s.world_size,
            shm: s.shm.map(Box::new),
            net: s.net,
            route: s.route,
            pids: s.pids,
            my_local: s.my_local,
            bound_cores: s.bound_cores,
            wake_ahead: s.oversubscribed && s.bound_cores.is_some(),
            sent_to: 0,
            self_frames: VecDeque::new(),
            outq: Vec::new(),
            outq_len: 0,
            streaming: Vec::new(),
            matcher: Matcher::new(),
            reqs: Slab::default(),
            direct: Direct::Idle,
            eager_limit,
            eager_net,
            eager_min: eager_limit.min(eager_net),
            single_copy: t.single_copy,
            policy: WaitPolicy::new(&t.wait, s.oversubscribed),
            counters: Counters {
                peers: vec![Default::default(); s.world_size as usize],
                ..Counters::default()
            },
            next_ctx: 2,
            watch: s.watch,
            coll: crate::coll::CollState::new(crate::coll::Config::new(&t.coll, single_copy)),
            rma: Default::default(),
            ctxs: Default::default(),
            // Measured (docs/BENCHMARKS.md, session 4): splitting pays from
            // 16 KiB on; below that each half is smaller than an eager message.
            split_min: t.split_copy_min,
            cma_verified: false,
            pending_reads: Vec::new(),
            async_error: None,
        })
    }

    /// Publishes the call this rank is in (read by the launcher on a crash).
    #[inline]
    pub fn set_call(&self, c: Call) {
        if let Some(shm) = &self.shm {
            shm.segment().rank_block(self.my_local).set_call(c);
        }
    }

    /// Asks the context server for the context of the communicator of
    /// `size` members that `key` names (`kumi_core::ctxsvc`); the answer
    /// comes to [`Engine::ctx_answer`].
    pub(crate) fn ask_ctx(&mut self, key: &[u8], size: usize) -> Result<u64> {
        if key.len() > kumi_core::ctxsvc::MAX_KEY {
            return Err(Error::invalid(
                "stringtag",
                key.len() as i64,
                format!(
                    "a key of at most {} bytes (tag and members)",
                    kumi_core::ctxsvc::MAX_KEY
                ),
            ));
        }
        self.ctxs.next_ask += 1;
        let id = self.ctxs.next_ask;
        let mut h = Header::new(Kind::Ctx);
        h.src =
            u32::try_from(size).map_err(|_| Error::Protocol("communicator too large".into()))?;
        h.len = key.len() as u64;
        h.id = id;
        self.ctxs.asks.insert(id, None);
        self.push_frame(0, &h, key)?;
        Ok(id)
    }

    /// How many communicators this rank made before from the group of
    /// world ranks `members` with string tag `tag` (counting this one).
    pub(crate) fn next_from_group(&mut self, tag: &str, members: &[u32]) -> u64 {
        let n = self
            .ctxs
            .from_groups
            .entry((tag.to_string(), members.to_vec()))
            .or_insert(0);
        *n += 1;
        *n - 1
    }

    /// The number of the next nonblocking duplicate of communicator
    /// (context, leader) made here.
    pub(crate) fn next_idup(&mut self, parent: (u32, u32)) -> u64 {
        let n = self.ctxs.idups.entry(parent).or_insert(0);
        *n += 1;
        *n - 1
    }

    /// The answer to ask `id`, once it came (taken: asked once).
    pub(crate) fn ctx_answer(&mut self, id: u64) -> Option<Result<u32>> {
        if !matches!(self.ctxs.asks.get(&id), Some(Some(_))) {
            return None;
        }
        let a = self.ctxs.asks.remove(&id).flatten()?;
        Some(a.map_err(|m| Error::Protocol(format!("the context server (world rank 0): {m}"))))
    }

    /// Whether ask `id` has its answer.
    pub(crate) fn ctx_answered(&self, id: u64) -> bool {
        matches!(self.ctxs.asks.get(&id), Some(Some(_)))
    }

    fn on_ctx_frame(&mut self, from: u32, h: &Header, p: &[u8]) -> Result<()> {
        use kumi_core::ctxsvc::FLAG_ANSWER;
        let answer = h.flags & FLAG_ANSWER != 0;
        if h.flags & !FLAG_ANSWER != 0 || h.len != p.len() as u64 || (answer && !p.is_empty()) {
            return Err(Error::Protocol(format!(
                "context frame with flags {:#x}, {} bytes",
                h.flags,
                p.len()
            )));
        }
        if h.flags & FLAG_ANSWER == 0 {
            if self.world_rank != 0 {
                return Err(Error::Protocol(format!(
                    "rank {from} asked for a context of rank {}, not the server",
                    self.world_rank
                )));
            }
            let got = self.ctxs.server.ask(p, h.src);
            if let Err(m) = &got {
                log(
                    self.world_rank,
                    &format!("refused a context to rank {from}: {m}"),
                );
            }
            let mut a = Header::new(Kind::Ctx);
            a.flags = FLAG_ANSWER;
            a.id = h.id;
            // 0 (the world's context, never handed out): refused.
            a.aux = u64::from(got.unwrap_or(0));
            return self.push_frame(from, &a, &[]);
        }
        match self.ctxs.asks.get_mut(&h.id) {
            Some(slot @ None) if from == 0 => {
                *slot = Some(match u32::try_from(h.aux) {
                    Ok(c) if c >= kumi_core::ctxsvc::FIRST && c % 2 == 0 => Ok(c),
                    _ => Err(format!("refused (answer {:#x})", h.aux)),
                });
                Ok(())
            }
            _ => Err(Error::Protocol(format!(
                "context answer {:#x} from rank {from} to no open ask",
                h.id
            ))),
        }
    }

    /// The largest payload one frame to world rank `peer` may carry.
    pub(crate) fn frame_limit(&self, peer: u32) -> usize {
        match self.route.get(peer as usize) {
            Some(Route::Shm) => self.shm.as_ref().map(|t| t.max_payload()),
            Some(Route::Net) => self.net.as_ref().map(|t| t.max_payload()),
            _ => None,
        }
        .unwrap_or(self.eager_limit)
    }

    /// How each world rank is reached (for host-aware collectives).
    pub(crate) fn routes(&self) -> &[Route] {
        &self.route
    }

    pub fn shm(&self) -> Option<&ShmTransport> {
        self.shm.as_deref()
    }

    // ----- sending ---------------------------------------------------------------

    /// Starts a send of `len` bytes at `buf` to world rank `peer`.
    ///
    /// Returns `None` if the send is already complete (the usual eager case),
    /// otherwise the request to wait on. The caller guarantees `buf..buf+len`
    /// stays valid and unmodified until the request completes.
    /// Inline: the sends' own frame was a tenth of a small send's path
    /// (always: left to itself, the compiler kept it out of the C library's
    /// `MPI_Send`).
    #[inline(always)]
    pub fn start_send(
        &mut self,
        env: Envelope,
        peer: u32,
        buf: *const u8,
        len: usize,
        sync: bool,
    ) -> Result<Option<ReqId>> {
        self.counters.msgs_sent += 1;
        self.counters.bytes_sent += len as u64;
        if let Some(c) = self.counters.peers.get_mut(peer as usize) {
            // Collectives run on odd (collective) contexts: counted apart, so
            // the user's own messages can be counted exactly.
            if env.ctx & 1 == 0 {
                c.msgs_out += 1;
                c.bytes_out += len as u64;
            } else {
                c.coll_msgs_out += 1;
                c.coll_bytes_out += len as u64;
            }
        }
        let mut line = LineHeader(Header::new(Kind::Eager));
        let h = &mut line.0;
        h.ctx = env.ctx;
        h.src = env.src;
        h.tag = env.tag;
        h.len = len as u64;
        // SAFETY: the caller guarantees `buf` points to `len` readable bytes (it
        // comes from a slice) for the duration of the send.
        let payload = unsafe { slice_or_empty(buf, len) };
        if len <= self.eager_min || peer == self.world_rank || self.eager_to(peer, len) {
            if !sync {
                self.push_frame(peer, h, payload)?;
                return Ok(None);
            }
            let id = self.new_send(peer, buf, len);
            h.flags = FLAG_SYNC;
            h.id = id;
            self.push_frame(peer, h, payload)?;
            return Ok(Some(id));
        }
        let id = self.new_send(peer, buf, len);
        h.kind = Kind::Rts;
        h.id = id;
        h.aux = buf as u64;
        self.push_frame(peer, h, &[])?;
        Ok(Some(id))
    }

    /// Whether `len` bytes (above both limits' minimum) go eagerly to `peer`.
    #[cold]
    fn eager_to(&self, peer: u32, len: usize) -> bool {
        match self.route.get(peer as usize) {
            Some(Route::Net) => len <= self.eager_net,
            _ => len <= self.eager_limit,
        }
    }

    fn new_send(&mut self, peer: u32, buf: *const u8, len: usize) -> ReqId {
        self.reqs.insert(
            Req {
                done: false,
                status: Status::empty(),
                error: None,
                detached: false,
                op: Op::Send {
                    peer,
                    buf,
                    len,
                    phase: SendPhase::AwaitReply,
                },
            },
            None,
        )
    }

    /// Sends one frame now, or queues a copy behind earlier frames to that peer.
    /// The usual case, a frame to a rank of this host with nothing queued
    /// before it, is inlined into the sends; the rest is [`Self::push_frame_any`].
    /// (Out of line, the call's frame alone was a tenth of a small send's path.)
    #[inline(always)]
    pub(crate) fn push_frame(&mut self, peer: u32, h: &Header, payload: &[u8]) -> Result<()> {
        if self.outq_len == 0 && peer != self.world_rank {
            if let (Some(Route::Shm), Some(t)) = (self.route.get(peer as usize), self.shm.as_mut())
            {
                if t.try_send(peer, h, payload)? {
                    if self.wake_ahead {
                        // Noted, woken at the next wait (`wake_waiters`);
                        // beyond 64 local ranks, the doorbells wake them.
                        if let Some(j) = t.local_of(peer).filter(|&j| j < 64) {
                            self.sent_to |= 1 << j;
                        }
                    }
                    return Ok(());
                }
                // The ring is full: behind it, without a second try.
                return self.queue_frame(peer, h, payload);
            }
        }
        self.push_frame_any(peer, h, payload)
    }

    /// [`Self::push_frame`] for every frame.
    #[inline(never)]
    fn push_frame_any(&mut self, peer: u32, h: &Header, payload: &[u8]) -> Result<()> {
        if peer == self.world_rank {
            self.self_frames.push_back((*h, payload.to_vec()));
            return Ok(());
        }
        // While a poll is delivering frames its transport is lent out; replies
        // made then (Ack, Fin, Cts) wait in the queue, which the same progress
        // pass flushes right after the poll.
        if self.outq_len == 0 || self.outq.get(peer as usize).is_none_or(|q| q.is_empty()) {
            let sent = match self.route.get(peer as usize) {
                Some(Route::Shm) => match self.shm.as_mut() {
                    Some(t) => t.try_send(peer, h, payload)?,
                    None => false,
                },
                Some(Route::Net) => match self.net.as_mut() {
                    Some(t) => t.try_send(peer, h, payload)?,
                    None => false,
                },
                Some(Route::Me) => unreachable!("frames to self are queued above"),
                None => return Err(Error::Protocol(format!("no route to rank {peer}"))),
            };
            if sent {
                return Ok(());
            }
        }
        self.queue_frame(peer, h, payload)
    }

    /// Queues a copy of a frame to `peer`, sent in order by `flush_outq`.
    #[inline(never)]
    fn queue_frame(&mut self, peer: u32, h: &Header, payload: &[u8]) -> Result<()> {
        if self.outq.len() <= peer as usize {
            self.outq
                .resize_with(self.world_size as usize, VecDeque::new);
        }
        self.outq[peer as usize].push_back(OutFrame {
            header: *h,
            payload: payload.to_vec(),
        });
        self.outq_len += 1;
        Ok(())
    }

    // ----- receiving -------------------------------------------------------------

    /// Posts a receive into `buf` (capacity `cap` bytes). The caller guarantees the
    /// buffer stays valid and otherwise untouched until the request completes.
    ///
    /// Inlined, as [`Engine::post_recv_ticket`]: called, it took the pattern
    /// (and the description) through memory, written field by field by the
    /// caller and read back in wider words, which the processor cannot
    /// forward from its store buffer (docs/BENCHMARKS.md, session 18).
    #[inline(always)]
    pub fn post_recv(&mut self, pat: Pattern, buf: *mut u8, cap: usize) -> Result<ReqId> {
        self.post_recv_with(pat, buf, cap, None)
    }

    /// [`Engine::post_recv`] of a receive started as a ticket: described
    /// (see [`Engine::describe`]) as it is posted.
    #[inline(always)]
    pub fn post_recv_ticket(
        &mut self,
        pat: Pattern,
        buf: *mut u8,
        cap: usize,
        what: Described,
    ) -> Result<ReqId> {
        self.post_recv_with(pat, buf, cap, Some(what))
    }

    #[inline(always)]
    fn post_recv_with(
        &mut self,
        pat: Pattern,
        buf: *mut u8,
        cap: usize,
        what: Option<Described>,
    ) -> Result<ReqId> {
        let id = self.reqs.insert(Req::recv(buf, cap), what);
        if let Some((env, m, id)) = self.matcher.post(pat, id) {
            self.deliver_unexpected(id, env, m)?;
        }
        Ok(id)
    }

    /// A blocking receive into the `cap` bytes at `buf`: [`Engine::post_recv`]
    /// and [`Engine::wait`], without a request when nothing is posted before
    /// it and no message already here matches it (the usual case). The
    /// receive then waits in [`Engine::direct`], where an arriving eager
    /// message is copied at once: no matching queue, no request slot to take
    /// and free on the way from the message's arrival to the caller (a
    /// tenth of an 8-byte half round trip). A posted receive would be matched
    /// first by exactly these messages: one posted earlier takes precedence
    /// (none is), and the unexpected queue has none for it. A rendezvous
    /// makes it a request ([`Direct::Promoted`]), which the wait continues on.
    /// The caller guarantees the buffer as for [`Engine::post_recv`], until
    /// this returns. Inline, into the blocking receives, as `start_send`.
    #[inline]
    pub fn recv(
        &mut self,
        info: WaitInfo,
        pat: Pattern,
        buf: *mut u8,
        cap: usize,
    ) -> Result<Status> {
        if !matches!(self.direct, Direct::Idle)
            || self.matcher.posted_len() > 0
            || self.matcher.peek_unexpected(&pat).is_some()
        {
            let id = self.post_recv(pat, buf, cap)?;
            return self.wait(info, id);
        }
        self.direct = Direct::Waiting { pat, buf, cap };
        let waited = self.wait_until(info, |e| !matches!(e.direct, Direct::Waiting { .. }));
        let direct = std::mem::replace(&mut self.direct, Direct::Idle);
        waited?;
        match direct {
            Direct::Done(Ok(st)) => Ok(st),
            Direct::Done(Err(st)) => Err(truncated(st, cap)),
            Direct::Promoted(id) => self.wait(info, id),
            Direct::Idle | Direct::Waiting { .. } => Err(Error::Protocol(
                "a blocking receive lost its place in the engine".into(),
            )),
        }
    }

    /// Delivers eager message `data` to the waiting direct receive, if it
    /// accepts `env`; `false` if there is none or it does not.
    #[inline(always)]
    fn direct_eager(
        &mut self,
        from: u32,
        env: &Envelope,
        data: &[u8],
        sync_id: Option<u64>,
    ) -> bool {
        let Direct::Waiting { pat, buf, cap } = self.direct else {
            return false;
        };
        if !pat.accepts(env) {
            return false;
        }
        self.ack_sync(from, sync_id);
        // SAFETY: `Engine::recv`'s caller guarantees `buf` is valid for `cap`
        // bytes while it waits, which it does until `direct` leaves `Waiting`.
        self.direct = Direct::Done(unsafe { land_eager(&mut self.counters, env, data, buf, cap) });
        true
    }

    /// A rendezvous message for the waiting direct receive, if it accepts
    /// `env`: the receive becomes a request, returned (then matched).
    fn direct_promote(&mut self, env: &Envelope) -> Option<ReqId> {
        let Direct::Waiting { pat, buf, cap } = self.direct else {
            return None;
        };
        if !pat.accepts(env) {
            return None;
        }
        let id = self.reqs.insert(Req::recv(buf, cap), None);
        self.direct = Direct::Promoted(id);
        Some(id)
    }

    /// Acknowledges a synchronous send whose message just matched.
    #[inline(always)]
    fn ack_sync(&mut self, from: u32, sync_id: Option<u64>) {
        if let Some(sid) = sync_id {
            let mut ack = Header::new(Kind::Ack);
            ack.id = sid;
            if let Err(e) = self.push_frame(from, &ack, &[]) {
                log(
                    self.world_rank,
                    &format!("could not acknowledge a synchronous send to rank {from}: {e}"),
                );
            }
        }
    }

    fn deliver_unexpected(&mut self, id: ReqId, env: Envelope, m: Unexpected) -> Result<()> {
        match m {
            Unexpected::Eager {
                from,
                data,
                sync_id,
            } => {
                self.complete_eager(id, from, env, &data, sync_id);
                Ok(())
            }
            Unexpected::Rts {
                from,
                len,
                sender_req,
                addr,
            } => self.start_pull(id, from, env, len, sender_req, addr),
        }
    }

    #[inline(always)]
    fn complete_eager(
        &mut self,
        id: ReqId,
        from: u32,
        env: Envelope,
        data: &[u8],
        sync_id: Option<u64>,
    ) {
        self.ack_sync(from, sync_id);
        let Some((r, open)) = self.reqs.get_with_open(id) else {
            return;
        };
        let Op::Recv { buf, cap, .. } = r.op else {
            return;
        };
        // SAFETY: the receive's owner guarantees `buf` is valid for `cap`
        // bytes and untouched until completion, which is now.
        match unsafe { land_eager(&mut self.counters, &env, data, buf, cap) } {
            Ok(st) => r.status = st,
            Err(st) => {
                r.status = st;
                r.error = Some(Box::new(truncated(st, cap)));
            }
        }
        // `r` is at hand: no second lookup through `finish`.
        if Self::mark_done(open, r) {
            self.drop_detached(id);
        }
    }

    /// A rendezvous message matched receive `id`: pull it, or ask for it.
    fn start_pull(
        &mut self,
        id: ReqId,
        from: u32,
        env: Envelope,
        len: usize,
        sender_req: u64,
        addr: u64,
    ) -> Result<()> {
        let Some(r) = self.reqs.get(id) else {
            return Ok(());
        };
        let Op::Recv { buf, cap, .. } = r.op else {
            return Ok(());
        };
        r.status = Status {
            source: env.src as i32,
            tag: env.tag,
            bytes: len,
            cancelled: false,
        };
        let mut fin = Header::new(Kind::Fin);
        fin.id = sender_req;
        if len > cap {
            r.error = Some(Box::new(truncated(r.status, cap)));
            // The sender's part is done either way: release it.
            self.push_frame(from, &fin, &[])?;
            self.finish(id);
            return Ok(());
        }
        let same_host = self.route.get(from as usize) == Some(&Route::Shm);
        if self.single_copy && same_host && self.cma_verified && len >= self.split_min {
            // Two-sided single copy: ask the sender to write the second half
            // while we read the first. The read waits until the progress pass
            // has flushed the `Split` frame, so both copies really overlap.
            if let Some(Req {
                op: Op::Recv { data, .. },
                ..
            }) = self.reqs.get(id)
            {
                *data = Some((len, 0));
            }
            let mut sp = Header::new(Kind::Split);
            sp.id = sender_req;
            sp.aux = buf as u64;
            sp.len = len as u64;
            sp.ctx = id as u32;
            sp.src = (id >> 32) as u32;
            self.push_frame(from, &sp, &[])?;
            self.pending_reads.push(PendingRead {
                id,
                from,
                addr,
                sender_req,
            });
            return Ok(());
        }
        if self.single_copy && same_host {
            // SAFETY: as in `complete_eager`: `buf` is valid for `cap >= len` bytes.
            let dst = unsafe { std::slice::from_raw_parts_mut(buf, len) };
            let pid = self.pids.get(from as usize).copied().unwrap_or(0);
            match cma::read_from(pid, addr, dst) {
                Ok(()) => {
                    self.cma_verified = true;
                    self.push_frame(from, &fin, &[])?;
                    self.counters.msgs_recv += 1;
                    self.counters.bytes_recv += len as u64;
                    self.finish(id);
                    return Ok(());
                }
                Err(e) => {
                    self.single_copy = false;
                    log(
                        self.world_rank,
                        &format!(
                            "single copy between processes (process_vm_readv) is not available ({e}); \
                             large messages use pipelined copies through shared memory from now on"
                        ),
                    );
                }
            }
        }
        if let Some(Req {
            op: Op::Recv { data, .. },
            ..
        }) = self.reqs.get(id)
        {
            *data = Some((len, 0));
        }
        let mut cts = Header::new(Kind::Cts);
        cts.id = sender_req;
        cts.aux = id;
        cts.len = len as u64;
        self.push_frame(from, &cts, &[])
    }

    // ----- arrivals --------------------------------------------------------------

    /// Handles one arrived frame. A frame that breaks the protocol is dropped with
    /// a logged reason; it never takes the rank down.
    ///
    /// Inlined into the transports' poll closures: a well-formed eager frame
    /// (the small-message path) is handled here, everything else out of line
    /// in [`Engine::on_other_frame`]. Per message that saves two call frames
    /// and the dispatch on the other kinds (`scripts/count-instructions.sh`).
    #[inline(always)]
    fn on_frame(&mut self, from: u32, h: &Header, p: &[u8]) {
        self.counters.frames_in += 1;
        if h.kind == Kind::Eager && h.len == p.len() as u64 {
            self.on_eager(from, h, p);
        } else {
            self.on_other_frame(from, h, p);
        }
    }

    /// Every frame but a well-formed eager one (see `on_frame`).
    #[inline(never)]
    fn on_other_frame(&mut self, from: u32, h: &Header, p: &[u8]) {
        if let Err(e) = self.on_frame_inner(from, h, p) {
            log(
                self.world_rank,
                &format!("dropped a frame from rank {from}: {e}"),
            );
        }
    }

    /// Counts an arriving message (eager or rendezvous) for the deadlock
    /// detector and the statistics.
    #[inline(always)]
    fn count_in(&mut self, from: u32, h: &Header) {
        if let Some(c) = self.counters.peers.get_mut(from as usize) {
            if h.ctx & 1 == 0 {
                c.msgs_in += 1;
                c.bytes_in += h.len;
            } else {
                c.coll_msgs_in += 1;
                c.coll_bytes_in += h.len;
            }
        }
    }

    /// An eager frame whose length matches its payload.
    #[inline(always)]
    fn on_eager(&mut self, from: u32, h: &Header, p: &[u8]) {
        self.count_in(from, h);
        let env = Envelope {
            ctx: h.ctx,
            src: h.src,
            tag: h.tag,
        };
        let sync_id = (h.flags & FLAG_SYNC != 0).then_some(h.id);
        if self.direct_eager(from, &env, p, sync_id) {
            return;
        }
        match self.matcher.take_posted(&env) {
            Some(id) => self.complete_eager(id, from, env, p, sync_id),
            None => self.push_unexpected_eager(env, from, p, sync_id),
        }
    }

    #[inline(never)]
    fn push_unexpected_eager(&mut self, env: Envelope, from: u32, p: &[u8], sync_id: Option<u64>) {
        self.matcher.push_unexpected(
            env,
            Unexpected::Eager {
                from,
                data: p.to_vec(),
                sync_id,
            },
        );
    }

    fn on_frame_inner(&mut self, from: u32, h: &Header, p: &[u8]) -> Result<()> {
        match h.kind {
            Kind::Combine => crate::coll::on_combine_frame(self, from, h, p)?,
            Kind::Rma => crate::rma::on_frame(self, from, h, p)?,
            Kind::Ctx => self.on_ctx_frame(from, h, p)?,
            // `on_frame` handles every eager frame whose length matches.
            Kind::Eager => {
                return Err(Error::Protocol(format!(
                    "eager frame announces {} bytes, carries {}",
                    h.len,
                    p.len()
                )))
            }
            Kind::Rts => {
                self.count_in(from, h);
                let len = usize::try_from(h.len)
                    .map_err(|_| Error::Protocol("length overflows".into()))?;
                let env = Envelope {
                    ctx: h.ctx,
                    src: h.src,
                    tag: h.tag,
                };
                let posted = match self.direct_promote(&env) {
                    Some(id) => Some(id),
                    None => self.matcher.take_posted(&env),
                };
                match posted {
                    Some(id) => self.start_pull(id, from, env, len, h.id, h.aux)?,
                    None => self.matcher.push_unexpected(
                        env,
                        Unexpected::Rts {
                            from,
                            len,
                            sender_req: h.id,
                            addr: h.aux,
                        },
                    ),
                }
            }
            Kind::Fin | Kind::Ack => match self.reqs.get(h.id) {
                Some(Req {
                    op: Op::Send { peer, .. },
                    done: false,
                    ..
                }) if *peer == from => self.finish(h.id),
                _ => {
                    return Err(Error::Protocol(format!(
                        "{:?} for unknown send request {:#x}",
                        h.kind, h.id
                    )))
                }
            },
            Kind::Cts => match self.reqs.get(h.id) {
                Some(Req {
                    op:
                        Op::Send {
                            peer, phase, len, ..
                        },
                    done: false,
                    ..
                }) if *peer == from && *len as u64 == h.len => {
                    *phase = SendPhase::Streaming {
                        recv_req: h.aux,
                        off: 0,
                    };
                    self.streaming.push(h.id);
                }
                _ => {
                    return Err(Error::Protocol(format!(
                        "clear-to-send for unknown send request {:#x}",
                        h.id
                    )))
                }
            },
            Kind::Split => {
                let recv_req = h.ctx as u64 | ((h.src as u64) << 32);
                let (buf, len) = match self.reqs.get(h.id) {
                    Some(Req {
                        op:
                            Op::Send {
                                peer,
                                buf,
                                len,
                                phase: SendPhase::AwaitReply,
                            },
                        done: false,
                        ..
                    }) if *peer == from && *len as u64 == h.len => (*buf, *len),
                    _ => {
                        return Err(Error::Protocol(format!(
                            "split copy for unknown send request {:#x}",
                            h.id
                        )))
                    }
                };
                let split = split_point(len);
                // SAFETY: the send's owner keeps `buf` valid for `len` bytes until
                // the request completes, which needs the receiver's `Fin`, and
                // `split <= len`.
                let half = unsafe { std::slice::from_raw_parts(buf.add(split), len - split) };
                let pid = self.pids.get(from as usize).copied().unwrap_or(0);
                let mut w = Header::new(Kind::Wrote);
                w.id = recv_req;
                if let Err(e) = cma::write_to(pid, h.aux + split as u64, half) {
                    log(
                        self.world_rank,
                        &format!("writing {} bytes into rank {from}: {e}", len - split),
                    );
                    w.flags = 1;
                }
                self.push_frame(from, &w, &[])?;
            }
            Kind::Wrote => {
                let Some(Req {
                    op:
                        Op::Recv {
                            data: Some((total, got)),
                            ..
                        },
                    done: false,
                    error,
                    ..
                }) = self.reqs.get(h.id)
                else {
                    return Err(Error::Protocol(format!(
                        "split copy done for unknown receive {:#x}",
                        h.id
                    )));
                };
                if h.flags & 1 != 0 {
                    *error = Some(Box::new(Error::Protocol(format!(
                        "rank {from} could not write its half of the message"
                    ))));
                }
                *got += *total - split_point(*total);
                if *got == *total {
                    let total = *total;
                    self.counters.msgs_recv += 1;
                    self.counters.bytes_recv += total as u64;
                    self.finish(h.id);
                }
            }
            Kind::Data => {
                let Some(Req {
                    op:
                        Op::Recv {
                            buf,
                            data: Some((total, got)),
                            ..
                        },
                    done: false,
                    ..
                }) = self.reqs.get(h.id)
                else {
                    return Err(Error::Protocol(format!(
                        "data for unknown receive request {:#x}",
                        h.id
                    )));
                };
                let off = usize::try_from(h.aux).unwrap_or(usize::MAX);
                if off.checked_add(p.len()).is_none_or(|end| end > *total) {
                    return Err(Error::Protocol(format!(
                        "data chunk at offset {off} of {} bytes overruns the {total}-byte message",
                        p.len()
                    )));
                }
                // SAFETY: `buf` holds at least `total` bytes (checked against the
                // capacity when the rendezvous started) and `off + p.len() <= total`.
                unsafe { std::ptr::copy_nonoverlapping(p.as_ptr(), buf.add(off), p.len()) };
                *got += p.len();
                if *got == *total {
                    self.counters.msgs_recv += 1;
                    self.counters.bytes_recv += *total as u64;
                    self.finish(h.id);
                }
            }
        }
        Ok(())
    }

    fn finish(&mut self, id: ReqId) {
        let detached = match self.reqs.get_with_open(id) {
            Some((r, open)) => Self::mark_done(open, r),
            None => false,
        };
        if detached {
            self.drop_detached(id);
        }
    }

    /// Marks `r` complete (counted out of `open`, the slab's count of open
    /// requests); returns whether nobody waits for it any more. For callers
    /// that hold `r` already (`complete_eager`), so it is not looked up twice.
    #[inline(always)]
    fn mark_done(open: &mut usize, r: &mut Req) -> bool {
        *open -= usize::from(!r.done);
        r.done = true;
        r.detached
    }

    /// Frees a completed request nobody waits for, logging its error if any.
    #[cold]
    fn drop_detached(&mut self, id: ReqId) {
        if let Some(r) = self.reqs.remove(id) {
            if let Some(e) = r.error {
                log(
                    self.world_rank,
                    &format!("a request nobody waits for failed: {e}"),
                );
            }
        }
    }

    // ----- progress --------------------------------------------------------------

    /// One pass over everything that can move. Returns how many events happened.
    pub fn progress(&mut self) -> Result<usize> {
        // Looks before it takes: this runs on every pass of a waiting rank,
        // and `take` moves the whole (empty) value out and back.
        if self.async_error.is_some() {
            if let Some(e) = self.async_error.take() {
                return Err(e);
            }
        }
        let mut n = 0;
        while let Some((h, p)) = self.self_frames.pop_front() {
            let me = self.world_rank;
            self.on_frame(me, &h, &p);
            n += 1;
        }
        // Asked first: an empty poll's round robin is most of a waiting
        // rank's pass, and that pass bounds how soon it sees a frame.
        if self.shm.as_deref().is_some_and(|s| s.needs_poll()) {
            if let Some(mut shm) = self.shm.take() {
                let r = shm.poll_with(&mut |from, h: &Header, p: &[u8]| self.on_frame(from, h, p));
                self.shm = Some(shm);
                n += r?;
            }
        }
        if let Some(mut net) = self.net.take() {
            let r = net.poll(&mut |from, h, p| self.on_frame(from, h, p));
            self.net = Some(net);
            n += r?;
        }
        if self.coll.busy() {
            n += crate::coll::progress(self)?;
        }
        if self.rma.busy() {
            n += crate::rma::progress(self)?;
        }
        if self.outq_len > 0 {
            n += self.flush_outq()?;
        }
        if !self.streaming.is_empty() {
            n += self.stream_data()?;
        }
        if !self.pending_reads.is_empty() {
            n += self.read_first_halves()?;
        }
        Ok(n)
    }

    /// Whether this host runs more ranks than it has cores (the waiting
    /// policy and some collective algorithms differ then).
    pub(crate) fn oversubscribed(&self) -> bool {
        self.policy.oversubscribed
    }

    /// Whether anything is outstanding that other ranks may wait on while the
    /// application computes (see `progress.rs`): then the progress thread looks
    /// at the engine.
    #[inline]
    pub fn needs_async(&self) -> bool {
        self.reqs.open > 0
            || self.outq_len > 0
            || !self.streaming.is_empty()
            || !self.pending_reads.is_empty()
            || self.coll.busy()
            || self.coll.combine.serving()
            || self.rma.serving()
    }

    /// The progress thread's turn: progress until nothing moves (bounded, so
    /// the application is never kept out for long). An error is kept for the
    /// application's next call.
    /// Returns whether anything moved.
    pub fn async_pass(&mut self) -> bool {
        if self.async_error.is_some() {
            return false;
        }
        let mut moved = false;
        for _ in 0..64 {
            match self.progress() {
                Ok(0) => break,
                Ok(_) => {
                    self.counters.async_passes += 1;
                    moved = true;
                }
                Err(e) => {
                    self.async_error = Some(e);
                    break;
                }
            }
        }
        moved
    }

    /// The receiver's half of each two-sided copy whose `Split` frame is out.
    fn read_first_halves(&mut self) -> Result<usize> {
        let mut n = 0;
        for pr in std::mem::take(&mut self.pending_reads) {
            let Some(Req {
                op:
                    Op::Recv {
                        buf,
                        data: Some((total, got)),
                        ..
                    },
                error,
                ..
            }) = self.reqs.get(pr.id)
            else {
                continue;
            };
            let split = split_point(*total);
            // SAFETY: `buf` holds at least `total` bytes (checked against the
            // receive's capacity when the rendezvous started) and `split <= total`.
            let dst = unsafe { std::slice::from_raw_parts_mut(*buf, split) };
            let pid = self.pids.get(pr.from as usize).copied().unwrap_or(0);
            if let Err(e) = cma::read_from(pid, pr.addr, dst) {
                *error = Some(Box::new(Error::Io(std::io::Error::new(
                    e.kind(),
                    format!("reading {split} bytes from rank {}: {e}", pr.from),
                ))));
            }
            *got += split;
            let complete = *got == *total;
            let total = *total;
            let mut fin = Header::new(Kind::Fin);
            fin.id = pr.sender_req;
            self.push_frame(pr.from, &fin, &[])?;
            if complete {
                self.counters.msgs_recv += 1;
                self.counters.bytes_recv += total as u64;
                self.finish(pr.id);
            }
            n += 1;
        }
        Ok(n)
    }

    fn flush_outq(&mut self) -> Result<usize> {
        let mut n = 0;
        for (peer, q) in self.outq.iter_mut().enumerate() {
            if q.is_empty() {
                continue;
            }
            let Some(t) = pick(&self.route, &mut self.shm, &mut self.net, peer as u32) else {
                continue;
            };
            while let Some(f) = q.front() {
                if !t.try_send(peer as u32, &f.header, &f.payload)? {
                    break;
                }
                q.pop_front();
                self.outq_len -= 1;
                n += 1;
            }
        }
        Ok(n)
    }

    fn stream_data(&mut self) -> Result<usize> {
        let mut n = 0;
        let mut i = 0;
        while i < self.streaming.len() {
            let id = self.streaming[i];
            let finished = match self.reqs.get(id) {
                Some(Req {
                    op:
                        Op::Send {
                            peer,
                            buf,
                            len,
                            phase: SendPhase::Streaming { recv_req, off },
                        },
                    ..
                }) => {
                    let blocked = self.outq.get(*peer as usize).is_some_and(|q| !q.is_empty());
                    let t = pick(&self.route, &mut self.shm, &mut self.net, *peer);
                    if let (false, Some(t)) = (blocked, t) {
                        let chunk_max = t.max_payload();
                        while *off < *len {
                            let chunk = chunk_max.min(*len - *off);
                            let mut h = Header::new(Kind::Data);
                            h.id = *recv_req;
                            h.aux = *off as u64;
                            h.len = *len as u64;
                            // SAFETY: the send's owner keeps `buf` valid for `len`
                            // bytes until completion, and `off + chunk <= len`.
                            let data = unsafe { std::slice::from_raw_parts(buf.add(*off), chunk) };
                            if !t.try_send(*peer, &h, data)? {
                                break;
                            }
                            *off += chunk;
                            n += 1;
                        }
                    }
                    *off == *len
                }
                _ => true,
            };
            if finished {
                self.streaming.swap_remove(i);
                self.finish(id);
            } else {
                i += 1;
            }
        }
        Ok(n)
    }

    /// Makes progress until `done` holds, waiting by the [`WaitPolicy`].
    #[inline]
    pub fn wait_until(
        &mut self,
        info: WaitInfo,
        done: impl FnMut(&mut Engine) -> bool,
    ) -> Result<()> {
        self.wait_until_with_mates(info, done, |_| false)
    }

    /// [`Engine::wait_until`], for a wait that every member of a collective
    /// makes until all have arrived (a barrier, an allreduce), where
    /// `mates_wait` says that every other rank bound to this core has
    /// arrived and so waits too. Oversubscribed, a waiting rank yields its
    /// core on every empty pass, which hands it to a rank of its own core;
    /// when those all wait for the same ranks of other cores, the hand-over
    /// is wasted (1.2 us here) and the rank keeps the core instead, polling,
    /// for up to `KUMI_MATE_SPIN_US` (then yields as usual). Each core then
    /// changes ranks once per collective, not back and forth: a barrier of
    /// 4 processes on 2 cores, one line each, 2.3-2.7 -> 1.6-1.9 us
    /// (docs/BENCHMARKS.md, session 12).
    ///
    /// Every wait of a bound, oversubscribed rank also publishes whom it
    /// waits for ([`WaitInfo::world`]), and a wait for one local rank keeps
    /// or hands on the core by the chains of waits of the core's ranks
    /// ([`ShmTransport::turn`]): the rank nearest to the next message keeps
    /// it (as above, up to `KUMI_MATE_SPIN_US`), the others yield, and one
    /// handed the core back while a nearer rank waits for it sleeps until a
    /// send to its source wakes it ([`ShmTransport::wake_waiters_of`]).
    /// Yields alone keep the order in which the core's ranks take turns,
    /// whatever the order their messages come in; the sleeps re-order them.
    /// A token ring of 8 ranks on 2 cores: 2.4 us a hop (each hop waited
    /// for ~2 wrong turns of 1.2 us) -> 0.95 (docs/BENCHMARKS.md, session 16).
    #[inline]
    pub fn wait_until_with_mates(
        &mut self,
        info: WaitInfo,
        mut done: impl FnMut(&mut Engine) -> bool,
        mut mates_wait: impl FnMut(&Engine) -> bool,
    ) -> Result<()> {
        if done(self) {
            return Ok(());
        }
        self.set_call(info.call);
        let r = self.wait_loop(&info, &mut done, &mut mates_wait);
        self.set_call(Call::None);
        self.watch.wait_ended();
        r
    }

    /// Whether kumi bound the local ranks to cores (see `bind`).
    pub(crate) fn bound(&self) -> bool {
        self.bound_cores.is_some()
    }

    /// Whether local rank `local` is another rank bound to this rank's core.
    pub(crate) fn shares_core_with(&self, local: usize) -> bool {
        local != self.my_local
            && self
                .bound_cores
                .is_some_and(|n| n > 0 && local % n == self.my_local % n)
    }

    fn wait_loop(
        &mut self,
        info: &WaitInfo,
        done: &mut dyn FnMut(&mut Engine) -> bool,
        mates_wait: &mut dyn FnMut(&Engine) -> bool,
    ) -> Result<()> {
        if self.wake_ahead {
            return self.wait_loop_bound(info, done, mates_wait);
        }
        self.wait_passes(info, done, mates_wait, None)
    }

    /// [`Engine::wait_loop`] of a rank bound to a core on an oversubscribed
    /// host: it says at once whom it waits for, wakes the ranks waiting for
    /// those it sent to, and if it waits for one rank of this host, decides
    /// on its first empty pass whether to keep the core (the polls before it
    /// are for a message about to come, which the decision tells).
    #[inline(never)]
    fn wait_loop_bound(
        &mut self,
        info: &WaitInfo,
        done: &mut dyn FnMut(&mut Engine) -> bool,
        mates_wait: &mut dyn FnMut(&Engine) -> bool,
    ) -> Result<()> {
        let awaited = self.publish_awaits(info);
        self.wake_waiters();
        let r = self.wait_passes(info, done, mates_wait, awaited);
        if let Some(shm) = &self.shm {
            shm.publish_awaits(AWAITS_NOTHING);
        }
        r
    }

    /// Publishes what this rank waits for, for the other ranks of its core
    /// ([`ShmTransport::turn`]); returns the awaited local rank if the wait
    /// is for one. Called as a wait starts (a wait whose condition held at
    /// once publishes nothing).
    fn publish_awaits(&self, info: &WaitInfo) -> Option<usize> {
        let shm = self.shm.as_ref()?;
        let local = match info.world {
            u32::MAX => None,
            w => shm.local_of(w).filter(|&l| l != self.my_local),
        };
        shm.publish_awaits(local.map_or(AWAITS_OTHER, |l| l as u32 + 1));
        local
    }

    /// Wakes the ranks asleep in a wait for a local rank this one has sent to
    /// since its last wait ([`ShmTransport::wake_waiters_of`]). Done here,
    /// once this rank's own wait is published, not at the send: a woken rank
    /// of this core may take the core at once, and this one, caught between
    /// its waits, would look to the others as if it ran (so nearer than the
    /// token, which cost a hand-over each time).
    fn wake_waiters(&mut self) {
        let (Some(shm), mut sent) = (&self.shm, std::mem::take(&mut self.sent_to)) else {
            return;
        };
        while sent != 0 {
            let j = sent.trailing_zeros() as usize;
            sent &= sent - 1;
            shm.wake_waiters_of(j);
        }
    }

    /// See [`ShmTransport::turn`].
    fn turn(&self, src: usize) -> Turn {
        match (&self.shm, self.bound_cores) {
            (Some(shm), Some(cores)) => shm.turn(src, cores),
            _ => Turn::Yield,
        }
    }

    /// The passes of a wait; `awaited`: the local rank it waits for, when
    /// the rank is bound and oversubscribed ([`Engine::wait_loop_bound`]).
    #[inline(always)]
    fn wait_passes(
        &mut self,
        info: &WaitInfo,
        done: &mut dyn FnMut(&mut Engine) -> bool,
        mates_wait: &mut dyn FnMut(&Engine) -> bool,
        awaited: Option<usize>,
    ) -> Result<()> {
        // Passes left before the next look at whether the core is this
        // rank's (`ShmTransport::turn`).
        let mut kept = 0u32;
        // Whether this wait has handed its core on to a nearer rank before.
        let mut passed = false;
        // The clock is read only after `policy.polls` empty polls, so a short
        // wait costs no system call at all.
        // (Waiting for one rank of this host, oversubscribed and bound: the
        // decision on the first empty pass, see `wait_loop_bound`.)
        let mut idle_polls = if awaited.is_some() {
            self.policy.polls
        } else {
            0
        };
        // Counts down to the next yield (a `%` per pass would be a division
        // in the loop that decides how soon a waiting rank sees a frame).
        let mut until_yield = 0u32;
        let mut idle_since: Option<Instant> = None;
        let mut started: Option<Instant> = None;
        // Why a waiting rank yields: two ranks that wait on each other often
        // end up on ONE core, even with a core free for each. Seen with perf on
        // this 2-core VM: both ranks on one CPU for a whole run while the other
        // ran a compiler or a stress test; over TCP it happens on an idle
        // machine too, because a rank asleep in epoll is woken by its peer's
        // send and the kernel treats a socket wake-up as synchronous (the waker
        // is expected to sleep next), so it moves the wakee onto the waker's
        // core. A rank that then only spins keeps the peer it waits for off the
        // core until its spin budget ends (200 us) or the scheduler preempts it
        // at a tick (4 ms): the 235 us / 4 ms TCP latencies, and 210 us on
        // shared memory under load. `sched_yield` hands the core over at once
        // when the peer shares it and costs one cheap system call (~0.3 us)
        // when nothing else wants the core. So:
        // - network only: every empty pass makes a system call anyway
        //   (`epoll_wait`, ~0.5 us); yield on each;
        // - network and shared memory: yield on one empty pass in 8;
        // - shared memory only: passes cost tens of nanoseconds and a reply
        //   usually comes within a few of them (0.4 us), so yield on one empty
        //   pass in 32 (~1.5 us of spinning), which keeps that fast path free
        //   of system calls and bounds what a shared core costs;
        // and once the clock is read (`policy.polls` empty passes), on each.
        let yield_every: u32 = match (self.shm.is_some(), self.net.is_some()) {
            (_, false) => 32,
            (true, true) => 8,
            (false, true) => 1,
        };
        let yield_every = self.policy.yield_every.unwrap_or(yield_every);
        // With shared memory only and a core per rank, the scheduler still
        // sometimes puts two ranks on one core (see above); then, and only
        // then, yielding helps. So such a rank yields only while another
        // awake local rank last ran on its CPU (`ShmTransport::shares_core`),
        // and otherwise polls on without a system call: a yield costs ~0.5 us,
        // more than a whole 8-byte message. `KUMI_YIELD_EVERY` (set) restores
        // unconditional yields.
        let ask_core =
            self.net.is_none() && !self.policy.oversubscribed && self.policy.yield_every.is_none();
        let may_yield = |e: &mut Engine| -> bool {
            if !ask_core {
                return true;
            }
            e.shm.as_mut().is_none_or(|s| s.shares_core())
        };
        loop {
            let n = self.progress()?;
            if done(self) {
                return Ok(());
            }
            if n > 0 {
                idle_polls = 0;
                until_yield = 0;
                idle_since = None;
                continue;
            }
            idle_polls += 1;
            if idle_polls < self.policy.polls {
                until_yield += 1;
                if until_yield == yield_every {
                    until_yield = 0;
                    if may_yield(self) {
                        std::thread::yield_now();
                        continue;
                    }
                }
                std::hint::spin_loop();
                continue;
            }
            if kept > 0 {
                // The core was found to be this rank's a moment ago: poll
                // without looking again (a look follows chains of waits
                // through other ranks' lines, and the message comes sooner
                // to a tighter loop).
                kept -= 1;
                std::hint::spin_loop();
                continue;
            }
            let now = Instant::now();
            let start = *started.get_or_insert(now);
            self.watch.waiting(info, start, now, &self.counters);
            let idle = now - *idle_since.get_or_insert(now);
            // The `spin` and `yield_for` phases now both poll and yield (see
            // above); their sum is how long the rank waits before sleeping.
            if idle < self.policy.spin {
                if may_yield(self) {
                    std::thread::yield_now();
                }
            } else if idle < self.policy.spin + self.policy.yield_for {
                // Oversubscribed, with every rank of this core waiting here
                // too, or nearest to the next message: keep the core (see
                // `wait_until_with_mates`), for a while; hand it on to a
                // nearer rank at any time (`KUMI_MATE_SPIN_US=0`: never look).
                let turn = match awaited {
                    Some(s) if self.policy.mate_spin > Duration::ZERO => self.turn(s),
                    _ => Turn::Yield,
                };
                let keep = self.policy.oversubscribed
                    && idle < self.policy.spin + self.policy.mate_spin
                    && (turn == Turn::Keep || mates_wait(self));
                if keep {
                    if turn == Turn::Keep {
                        kept = KEPT_PASSES;
                    }
                    std::hint::spin_loop();
                } else if turn == Turn::Pass && passed && self.net.is_none() {
                    // Handed on before in this wait and given the core back
                    // while a nearer rank still waits for it: the core's
                    // ranks take their turns in an order that is not the
                    // order their messages come in, and yielding keeps that
                    // order (a yield sends the rank to the back). Sleeping
                    // takes this rank out of it; the rank that sends to its
                    // source wakes it (`wake_waiters_of`), which puts it
                    // back in the order of the messages.
                    self.sleep(done);
                } else {
                    passed |= turn == Turn::Pass;
                    std::thread::yield_now();
                }
            } else {
                self.sleep(done);
            }
        }
    }

    /// Sleeps until a frame may have arrived (or the policy's timeout passes).
    /// A sender blocked on a full ring sleeps too: the shm consumer rings its
    /// doorbell when it frees room.
    ///
    /// `done` is asked once more after the sleep is announced: a condition
    /// that is not a frame (a collective area's sequence word, see
    /// `coll/shm.rs`) may have come true between the last look and the
    /// announcement, and its publisher, having seen no sleeper, rang nobody.
    /// (Dekker: our announcement and fence in `prepare_sleep`, then this
    /// look; the publisher's store, fence, then its look at our flag.)
    fn sleep(&mut self, done: &mut dyn FnMut(&mut Engine) -> bool) {
        let timeout = self.policy.sleep_timeout;
        let (bed, timeout) = match (self.shm.is_some(), self.net.is_some()) {
            (true, false) => (Bed::Shm, timeout),
            (false, true) => (Bed::Net, timeout),
            // Two wake-up sources and no common one yet: sleep on the network
            // briefly and look at the rings in between.
            (true, true) => (Bed::Net, timeout.min(Duration::from_millis(1))),
            // Only messages to self could arrive, and none will while we sleep.
            (false, false) => {
                std::thread::sleep(timeout.min(Duration::from_millis(10)));
                return;
            }
        };
        if !self.bed(bed).prepare_sleep() {
            return;
        }
        if done(self) {
            self.bed(bed).cancel_sleep();
            return;
        }
        self.bed(bed).sleep(timeout);
    }

    /// The transport a rank sleeps on (see `sleep`).
    fn bed(&mut self, bed: Bed) -> &mut dyn Transport {
        match bed {
            Bed::Shm => &mut **self.shm.as_mut().expect("sleeping on shared memory"),
            Bed::Net => &mut **self.net.as_mut().expect("sleeping on the network"),
        }
    }

    // ----- requests --------------------------------------------------------------

    pub fn is_done(&mut self, id: ReqId) -> bool {
        self.reqs.get(id).is_none_or(|r| r.done)
    }

    /// Records what request `id`, started as a ticket, waits for (which
    /// makes [`Engine::unpack_id`] find it).
    #[inline(always)]
    pub fn describe(&mut self, id: ReqId, what: Described) {
        if self.reqs.get(id).is_some() {
            self.reqs.describe(id, what);
        }
    }

    /// What request `id` (started as a ticket) waits for, as a wait report
    /// gives it; `None` if it is not a live request started as a ticket.
    pub fn described(&self, id: ReqId) -> Option<Described> {
        self.reqs.described(id)
    }

    /// The live request, started as a ticket, whose id [`pack_id`] packed
    /// into `bits`, if there is one (a stale id names a slot freed since, or
    /// reused: its generation has moved on, unless it wrapped around
    /// [`PACKED_GEN_BITS`]).
    #[inline(always)]
    pub fn unpack_id(&self, bits: u32) -> Option<ReqId> {
        self.unpack_ticket(bits).map(|(id, _, _)| id)
    }

    /// [`Engine::unpack_id`] with, from the same lookup, whether the request
    /// is done and what it waits for.
    #[inline(always)]
    pub fn unpack_ticket(&self, bits: u32) -> Option<(ReqId, bool, Described)> {
        let i = (bits & ((1 << PACKED_INDEX_BITS) - 1)) as usize;
        let gen = bits >> PACKED_INDEX_BITS;
        let (g, Some(req)) = self.reqs.entries.get(i)? else {
            return None;
        };
        let &(tg, what) = self.reqs.tickets.get(i)?;
        (g & ((1 << PACKED_GEN_BITS) - 1) == gen && tg == *g).then_some((
            ((*g as u64) << 32) | i as u64,
            req.done,
            what,
        ))
    }

    /// [`Engine::take_result`] of a request started as a ticket: an error
    /// comes with the context of the operation's communicator.
    #[inline]
    pub fn take_outcome(&mut self, id: ReqId) -> std::result::Result<Status, (Error, u32)> {
        match self.reqs.remove(id) {
            Some(r) => match r.error {
                Some(e) => {
                    // Read after the removal: the slot's description stays
                    // until the slot's next ticket.
                    let i = id as u32 as usize;
                    let ctx = match self.reqs.tickets.get(i) {
                        Some(&(g, d)) if g == (id >> 32) as u32 => d.ctx,
                        _ => u32::MAX,
                    };
                    Err((*e, ctx))
                }
                None => Ok(r.status),
            },
            None => Ok(Status::empty()),
        }
    }

    /// The result of request `id` if it has completed, left in place (for a
    /// call that reports it without completing the request); `None` while
    /// it is in flight. A request that is not live reports an empty status.
    pub fn peek_result(&mut self, id: ReqId) -> Option<Result<Status>> {
        match self.reqs.get(id) {
            Some(r) if !r.done => None,
            Some(r) => Some(match &r.error {
                Some(e) => Err((**e).clone()),
                None => Ok(r.status),
            }),
            None => Some(Ok(Status::empty())),
        }
    }

    /// Takes the result of a completed request and frees its slot. (Not
    /// [`Engine::take_outcome`] with the context dropped: the Rust API's
    /// `wait_all` ran 18 instructions more per message that way.)
    pub fn take_result(&mut self, id: ReqId) -> Result<Status> {
        match self.reqs.remove(id) {
            Some(r) => match r.error {
                Some(e) => Err(*e),
                None => Ok(r.status),
            },
            None => Ok(Status::empty()),
        }
    }

    /// Blocks until request `id` completes and returns its result.
    pub fn wait(&mut self, info: WaitInfo, id: ReqId) -> Result<Status> {
        self.wait_until(info, |e| e.is_done(id))?;
        self.take_result(id)
    }

    /// The user dropped the handle of a request that may still be in flight.
    pub fn detach(&mut self, id: ReqId) {
        let done = match self.reqs.get(id) {
            Some(r) => {
                r.detached = true;
                r.done
            }
            None => return,
        };
        if done {
            self.reqs.remove(id);
        }
    }

    /// Probe: the envelope and size of the earliest matching unexpected message.
    pub fn iprobe(&mut self, pat: &Pattern) -> Result<Option<Status>> {
        self.progress()?;
        Ok(self.matcher.peek_unexpected(pat).map(|(e, m)| Status {
            source: e.src as i32,
            tag: e.tag,
            bytes: match m {
                Unexpected::Eager { data, .. } => data.len(),
                Unexpected::Rts { len, .. } => *len,
            },
            cancelled: false,
        }))
    }

    /// Cancels a posted receive that has not matched. Returns whether it was
    /// cancelled (a receive that already matched completes normally).
    pub fn cancel_recv(&mut self, id: ReqId) -> bool {
        if self.matcher.cancel_posted(|&r| r == id).is_some() {
            if let Some(r) = self.reqs.get(id) {
                r.status.cancelled = true;
            }
            self.finish(id);
            true
        } else {
            false
        }
    }
}

/// # Safety
/// `ptr` must be valid for `len` bytes of reads when `len > 0`.
#[inline]
unsafe fn slice_or_empty<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if len == 0 {
        &[]
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}

/// The transport that reaches `peer` (field-level borrow, so callers can keep
/// other fields of the engine borrowed).
fn pick<'a>(
    route: &[Route],
    shm: &'a mut Option<Box<ShmTransport>>,
    net: &'a mut Option<Box<dyn Transport + Send>>,
    peer: u32,
) -> Option<&'a mut dyn Transport> {
    match route.get(peer as usize)? {
        Route::Shm => shm.as_mut().map(|t| &mut **t as &mut dyn Transport),
        Route::Net => match net {
            Some(t) => Some(&mut **t),
            None => None,
        },
        Route::Me => None,
    }
}

pub(crate) fn log(rank: u32, msg: &str) {
    eprintln!("kumi: rank {rank}: {msg}");
}

/// A send's header on the stack, alone in its cache line. The transport reads
/// it back right after the send has written it (loads over several stores,
/// which wait for them to reach the cache). Where it fell in its line moved
/// with the caller's stack, and in one position of the four the C library's
/// small-message streaming ran at 0.6-0.8x; aligned, it runs alike in all
/// (docs/BENCHMARKS.md, session 19).
#[repr(align(64))]
struct LineHeader(Header);

#[cfg(test)]
mod tests {
    use super::*;
    use kumi_transport::shm::max_payload;

    #[test]
    fn eager_limits_follow_the_ring_and_are_32k_on_the_network() {
        let shm = |ring: usize| eager_limits(Some(max_payload(ring)), None, None).unwrap();
        // 1 MiB rings (up to 5 ranks), 512 KiB (6-8), 256 KiB (9-11),
        // 128 KiB (12-16), 64 KiB.
        assert_eq!(shm(1 << 20), (32 << 10, 32 << 10));
        assert_eq!(shm(512 << 10), (32 << 10, 32 << 10));
        assert_eq!(shm(256 << 10), (16 << 10, 16 << 10));
        assert_eq!(shm(128 << 10), (8 << 10, 8 << 10));
        assert_eq!(shm(64 << 10), (8 << 10, 8 << 10));
        // A ring too small for 8 KiB: the limit follows it down.
        let tiny = max_payload(4096);
        assert_eq!(shm(4096), (tiny, tiny));
        // Hosts too: the network's limit is its own; alone, both are it.
        let both = eager_limits(Some(max_payload(1 << 20)), Some(1 << 30), None).unwrap();
        assert_eq!(both, (32 << 10, 32 << 10));
        assert_eq!(
            eager_limits(None, Some(1 << 30), None).unwrap(),
            (32 << 10, 32 << 10)
        );
        // A transport whose frames are smaller than that bounds it.
        assert_eq!(
            eager_limits(None, Some(10_000), None).unwrap(),
            (10_000, 10_000)
        );
    }

    #[test]
    fn an_asked_eager_limit_sets_both_and_must_fit_every_transport() {
        let m = max_payload(1 << 20);
        assert_eq!(
            eager_limits(Some(m), Some(1 << 30), Some(100)).unwrap(),
            (100, 100)
        );
        assert_eq!(eager_limits(Some(m), None, Some(0)).unwrap(), (0, 0));
        let e = eager_limits(Some(m), Some(1 << 30), Some(m as u64 + 1)).unwrap_err();
        assert!(e.to_string().contains("KUMI_EAGER_LIMIT"), "{e}");
        let e = eager_limits(Some(m), Some(4096), Some(8192)).unwrap_err();
        assert!(e.to_string().contains("4096 bytes"), "{e}");
    }
}
