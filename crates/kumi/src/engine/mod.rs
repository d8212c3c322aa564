//! The progress engine: one per rank, owning the transports, the matching
//! queues and every request in flight.
//!
//! Nothing here runs on its own thread: progress happens inside kumi calls
//! (`wait`, `test`, blocking sends and receives), and on the progress thread
//! (`progress.rs`) while the application computes. The engine is split by
//! concern:
//!
//! - this module: the engine itself, its transports, frames out (sent now, or
//!   queued per peer behind a full ring, which keeps per-pair order) and frames
//!   in: a well-formed eager frame goes straight to point-to-point (the
//!   small-message path), every other frame to the handler registered for its
//!   kind ([`Engine::register`]). Point-to-point registers its kinds here; the
//!   services (collectives and combining, one-sided access, contexts:
//!   `crate::services`) register theirs at start, so the engine names none of
//!   them;
//! - [`p2p`]: point-to-point carried out: `kumi_core::p2p` decides (eager
//!   or rendezvous, how a matched rendezvous moves, what each reply means,
//!   whether a frame fits its request), this module keeps the buffers and
//!   makes the copies and system calls; the direct receive, probes,
//!   cancellation;
//! - [`slab`]: requests, their ids and their results;
//! - [`wait`]: how a rank waits (poll, yield, turns on a shared core, sleep).
//!
//! Small-message path: no allocation and no lock. A frame that finds its ring
//! full is copied to a per-peer overflow queue (allocation only then).
//!
//! The one cycle between the crate's modules runs through here: the engine
//! holds the services' state and lends itself to their progress
//! (`services::progress(&mut Engine)`), and the services (and the
//! communicators above them: `comm`, `request`, `progress`) call the engine
//! to send and wait. Cutting it would take an engine generic over its
//! services, or their progress as registered function pointers called on
//! every pass; the services' frames already go through registered handlers.
//! The leaves (`error`, `datatype`, `report`, `bootstrap`, `watch`, `net`,
//! `bind`) depend on none of it.

mod p2p;
#[cfg(test)]
mod p2p_model;
mod slab;
mod wait;

pub use crate::report::Counters;
pub(crate) use crate::report::WaitInfo;
pub(crate) use slab::{pack_id, Described, ReqId};
pub(crate) use wait::WaitPolicy;

use crate::error::{Error, Result};
use crate::services::Services;
use crate::watch::Watch;
use kumi_core::call::Call;
use kumi_core::header::{Header, Kind};
use kumi_core::matching::Matcher;
use kumi_core::p2p::{Limits, Protocol, Unexpected};
use kumi_transport::shm::ShmTransport;
use kumi_transport::{Capabilities, Transport};
use p2p::{Direct, PendingRead};
use slab::Slab;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The transport between the ranks of this host. The engine reaches it
/// through [`Transport`] and [`Capabilities`] alone; it is a concrete type
/// rather than a trait object because its `try_send` and `poll_with` are
/// inlined into every message's path (through a pointer, each would be an
/// indirect call, and the sink could not be compiled into the poll). Another
/// host transport takes this alias's place.
pub(crate) type HostTransport = ShmTransport;

/// Handles the frames of one kind (see [`Engine::register`]): from world
/// rank `from`, header and payload. An error drops the frame with a logged
/// reason; it never takes the rank down.
pub(crate) type FrameHandler = fn(&mut Engine, u32, &Header, &[u8]) -> Result<()>;

/// Entries of the handler table: every [`Kind`]'s number is below it.
const KIND_SLOTS: usize = 16;

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

/// A frame the transport had no room for yet.
struct OutFrame {
    header: Header,
    payload: Payload,
}

/// The payload of a queued frame.
enum Payload {
    /// A copy (control frames, whose payload is the engine's own).
    Owned(Vec<u8>),
    /// Still in the sender's buffer, which its send request keeps valid
    /// until `req` completes, when the frame goes (an eager send behind a
    /// full ring: the sender waits instead of copying without bound).
    Borrowed {
        ptr: *const u8,
        len: usize,
        req: ReqId,
    },
}

impl OutFrame {
    fn bytes(&self) -> &[u8] {
        match &self.payload {
            Payload::Owned(v) => v,
            // SAFETY: the send request `req` keeps `ptr..ptr + len` valid and
            // unchanged until it completes, which is after the frame went.
            Payload::Borrowed { ptr, len, .. } => unsafe { p2p::slice_or_empty(*ptr, *len) },
        }
    }
}

pub(crate) struct Engine {
    pub world_rank: u32,
    pub world_size: u32,
    /// Boxed: `progress` takes it out and puts it back on every pass (the
    /// frames' sink needs the engine), which should move a pointer, not the
    /// whole transport.
    shm: Option<Box<HostTransport>>,
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
    /// The cores this host's ranks share (`KUMI_LOCAL_CORES`, or what the
    /// system allows), the same on every rank of the host.
    cores: usize,
    /// Oversubscribed with the ranks bound to cores: waits publish whom they
    /// wait for, a waiting rank keeps or hands on its core by the chains of
    /// waits ([`Capabilities::turn`]), and a frame sent to a rank of this
    /// host wakes the ranks asleep in a wait for that rank
    /// ([`Capabilities::wake_waiters_of`]).
    wake_ahead: bool,
    /// Unbound with a core per rank: moves apart from a local rank found
    /// on this rank's core while waiting (`bind::Spread`).
    spread: Option<crate::bind::Spread>,
    /// Local ranks (below 64) sent to since this rank last started a wait,
    /// whose waiters it wakes when it does ([`Engine::wake_waiters`]).
    sent_to: u64,
    self_frames: VecDeque<(Header, Vec<u8>)>,
    /// Frames waiting for room, per world peer (allocated on first overflow).
    outq: Vec<VecDeque<OutFrame>>,
    outq_len: usize,
    /// Buffers of unexpected eager messages, kept for the next ones.
    spare: p2p::Spare,
    streaming: Vec<ReqId>,
    matcher: Matcher<ReqId, Unexpected>,
    reqs: Slab,
    /// The blocking receive in progress, if it goes without a request.
    direct: Direct,
    /// The point-to-point protocol's limits and single-copy state.
    proto: Protocol,
    policy: WaitPolicy,
    pub counters: Counters,
    /// Next free communicator context id (pairs: p2p, collective).
    pub next_ctx: u32,
    /// Supervision: reports long waits to the launcher.
    pub watch: Watch,
    /// First halves of two-sided copies, read after the `Split` frame is out.
    pending_reads: Vec<PendingRead>,
    /// The state of the services beside point-to-point (collectives,
    /// one-sided access, contexts): the engine lends itself to their
    /// progress and dispatches their frames, and names none of them.
    pub(crate) svc: Services,
    /// Who handles each kind of frame but a well-formed eager one, by the
    /// kind's number ([`Engine::register`]).
    handlers: [Option<FrameHandler>; KIND_SLOTS],
    /// An error met by the progress thread, returned by the next call.
    async_error: Option<Error>,
    /// When to ring the progress threads of this host's ranks (with a
    /// progress thread and a host shared with other ranks).
    demand: Option<crate::progress::Demand>,
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

/// How the engine is put together; see `Universe::init`.
pub(crate) struct EngineSetup<'a> {
    pub world_rank: u32,
    pub world_size: u32,
    pub shm: Option<HostTransport>,
    pub net: Option<Box<dyn Transport + Send>>,
    pub route: Vec<Route>,
    pub pids: Vec<i32>,
    pub watch: Watch,
    pub my_local: usize,
    pub oversubscribed: bool,
    /// The cores this host's ranks share.
    pub cores: usize,
    /// What `bind::apply` returned: the number of cores the local ranks are
    /// bound over, if they are.
    pub bound_cores: Option<usize>,
    /// The rank's configuration.
    pub tuning: &'a kumi_core::config::Tuning,
    /// Single copy between this host's ranks (the host's choice,
    /// `Segment::single_copy`).
    pub single_copy: bool,
    /// Moving apart from a local rank that shares this one's core, for an
    /// unbound rank (`bind::Spread`).
    pub spread: Option<crate::bind::Spread>,
    /// The services' state (their frame handlers register afterwards:
    /// `services::register`).
    pub services: Services,
}

/// The transport that reaches `peer` (field-level borrow, so callers can keep
/// other fields of the engine borrowed).
fn pick<'a>(
    route: &[Route],
    shm: &'a mut Option<Box<HostTransport>>,
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

impl Engine {
    /// The engine of `s`, with point-to-point's frame kinds registered (the
    /// services register theirs: `services::register`).
    pub fn new(s: EngineSetup) -> Result<Engine> {
        let t = s.tuning;
        let limits = Limits::new(
            s.shm.as_ref().map(|t| t.max_payload()),
            s.net.as_ref().map(|t| t.max_payload()),
            t.eager_limit,
            t.split_copy_min,
        )
        .map_err(|e| Error::Bootstrap(e.to_string()))?
        .with_coll_copy(t.coll.copy_min);
        let mut e = Engine {
            world_rank: s.world_rank,
            world_size: s.world_size,
            shm: s.shm.map(Box::new),
            net: s.net,
            route: s.route,
            pids: s.pids,
            my_local: s.my_local,
            bound_cores: s.bound_cores,
            cores: s.cores,
            wake_ahead: s.oversubscribed && s.bound_cores.is_some(),
            spread: s.spread,
            sent_to: 0,
            self_frames: VecDeque::new(),
            outq: Vec::new(),
            outq_len: 0,
            spare: p2p::Spare::default(),
            streaming: Vec::new(),
            matcher: Matcher::new(),
            reqs: Slab::default(),
            direct: Direct::Idle,
            // This rank's: single copy turns off if the kernel refuses a copy.
            proto: Protocol::new(limits, s.single_copy),
            policy: WaitPolicy::new(&t.wait, s.oversubscribed),
            counters: Counters {
                peers: vec![Default::default(); s.world_size as usize],
                ..Counters::default()
            },
            next_ctx: 2,
            watch: s.watch,
            svc: s.services,
            handlers: [None; KIND_SLOTS],
            pending_reads: Vec::new(),
            async_error: None,
            demand: None,
        };
        if t.progress && s.world_size > 1 && e.shm.is_some() {
            e.demand = Some(crate::progress::Demand::new(Duration::from_micros(
                t.progress_us,
            )));
        }
        p2p::register(&mut e)?;
        Ok(e)
    }

    /// Publishes the call this rank is in (read by the launcher on a crash).
    #[inline]
    pub fn set_call(&self, c: Call) {
        if let Some(shm) = &self.shm {
            shm.publish_call(c);
        }
    }

    /// The smaller eager limit: every message up to it goes in one frame,
    /// whichever route it takes.
    pub(crate) fn eager_min(&self) -> usize {
        self.proto.limits.min
    }

    /// The largest payload one frame to world rank `peer` may carry.
    pub(crate) fn frame_limit(&self, peer: u32) -> usize {
        match self.route.get(peer as usize) {
            Some(Route::Shm) => self.shm.as_ref().map(|t| t.max_payload()),
            Some(Route::Net) => self.net.as_ref().map(|t| t.max_payload()),
            _ => None,
        }
        .unwrap_or(self.proto.limits.host)
    }

    /// How each world rank is reached (for host-aware collectives).
    pub(crate) fn routes(&self) -> &[Route] {
        &self.route
    }

    pub fn shm(&self) -> Option<&HostTransport> {
        self.shm.as_deref()
    }

    /// Sends one frame now, or queues a copy behind earlier frames to that peer.
    #[inline(always)]
    pub(crate) fn push_frame(&mut self, peer: u32, h: &Header, payload: &[u8]) -> Result<()> {
        if self.try_push_frame(peer, h, payload)? {
            return Ok(());
        }
        self.queue_frame(peer, h, Payload::Owned(payload.to_vec()));
        Ok(())
    }

    /// Sends one frame now if it can go now: the transport has room and no
    /// earlier frame to that peer waits. The usual case, a frame to a rank of
    /// this host with nothing queued before it, is inlined into the sends;
    /// the rest is [`Self::try_push_frame_any`]. (Out of line, the call's
    /// frame alone was a tenth of a small send's path.)
    #[inline(always)]
    pub(crate) fn try_push_frame(&mut self, peer: u32, h: &Header, payload: &[u8]) -> Result<bool> {
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
                    return Ok(true);
                }
                // The ring is full: behind it, without a second try.
                return Ok(false);
            }
        }
        self.try_push_frame_any(peer, h, payload)
    }

    /// [`Self::try_push_frame`] for every frame.
    #[inline(never)]
    fn try_push_frame_any(&mut self, peer: u32, h: &Header, payload: &[u8]) -> Result<bool> {
        if peer == self.world_rank {
            let mut p = self.spare.take(payload.len());
            p.extend_from_slice(payload);
            self.self_frames.push_back((*h, p));
            return Ok(true);
        }
        // While a poll is delivering frames its transport is lent out; replies
        // made then (Ack, Fin, Cts) wait in the queue, which the same progress
        // pass flushes right after the poll.
        if self.outq_len == 0 || self.outq.get(peer as usize).is_none_or(|q| q.is_empty()) {
            return match self.route.get(peer as usize) {
                Some(Route::Shm) => match self.shm.as_mut() {
                    Some(t) => Ok(t.try_send(peer, h, payload)?),
                    None => Ok(false),
                },
                Some(Route::Net) => match self.net.as_mut() {
                    Some(t) => Ok(t.try_send(peer, h, payload)?),
                    None => Ok(false),
                },
                Some(Route::Me) => unreachable!("frames to self are queued above"),
                None => Err(Error::Protocol(format!("no route to rank {peer}"))),
            };
        }
        Ok(false)
    }

    /// Queues a frame to `peer`, sent in order by `flush_outq`.
    #[inline(never)]
    fn queue_frame(&mut self, peer: u32, h: &Header, payload: Payload) {
        if self.outq.len() <= peer as usize {
            self.outq
                .resize_with(self.world_size as usize, VecDeque::new);
        }
        self.outq[peer as usize].push_back(OutFrame {
            header: *h,
            payload,
        });
        self.outq_len += 1;
    }

    /// Queues an eager frame whose payload, `len` bytes at `buf`, stays in
    /// the sender's buffer: send request `req` completes when it goes.
    pub(crate) fn queue_borrowed(
        &mut self,
        peer: u32,
        h: &Header,
        buf: *const u8,
        len: usize,
        req: ReqId,
    ) {
        self.queue_frame(peer, h, Payload::Borrowed { ptr: buf, len, req });
    }

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
        // A rendezvous's request or reply may start a copy of gigabytes in
        // this pass, with no turn of the wait loop until it ends.
        self.watch.moving();
        if let Err(e) = self.dispatch(from, h, p) {
            log(
                self.world_rank,
                &format!("dropped a frame from rank {from}: {e}"),
            );
        }
    }

    /// Hands a frame to the handler registered for its kind; a kind nobody
    /// registered is an error naming the kind and the peer.
    pub(crate) fn dispatch(&mut self, from: u32, h: &Header, p: &[u8]) -> Result<()> {
        match self.handlers.get(h.kind as usize).copied().flatten() {
            Some(handle) => handle(self, from, h, p),
            None => Err(Error::Protocol(format!(
                "a frame of kind {:?} from rank {from}, which nothing on this rank handles",
                h.kind
            ))),
        }
    }

    /// Makes `handle` the handler of frames of `kind`. Each kind has one
    /// handler: registering a second is an error (two services claiming one
    /// kind would each see half the frames).
    pub(crate) fn register(&mut self, kind: Kind, handle: FrameHandler) -> Result<()> {
        match self.handlers.get_mut(kind as usize) {
            Some(slot @ None) => {
                *slot = Some(handle);
                Ok(())
            }
            Some(Some(_)) => Err(Error::Protocol(format!(
                "frames of kind {kind:?} have a handler already"
            ))),
            None => Err(Error::Protocol(format!(
                "frame kind {kind:?} is beyond the engine's table"
            ))),
        }
    }

    /// One pass over everything that can move. Returns how many events
    /// happened. A rank whose passes have moved nothing for a progress
    /// interval asks for the progress threads of its host's ranks
    /// ([`crate::progress::Demand`]).
    #[inline]
    pub fn progress(&mut self) -> Result<usize> {
        let n = self.pass()?;
        if let Some(d) = &mut self.demand {
            if d.after_pass(n) {
                self.ring_progress();
            }
        }
        Ok(n)
    }

    /// In a blocking wait that began at `start`: rings the progress threads
    /// of the host's ranks if the wait has lasted a progress interval since
    /// it began and since this rank last rang ([`crate::progress::Demand`]).
    #[inline]
    pub(crate) fn demand_waiting(&mut self, now: Instant, start: Instant) {
        if let Some(d) = &mut self.demand {
            if d.waiting(now, start) {
                self.ring_progress();
            }
        }
    }

    #[cold]
    fn ring_progress(&self) {
        if let Some(shm) = &self.shm {
            shm.ring_progress();
        }
    }

    /// This rank's progress bell, where its progress thread sleeps
    /// (`kumi_transport::bell`): in the host's segment, where the host's
    /// other ranks can ring it, or a private one.
    pub(crate) fn progress_bell(&self) -> kumi_transport::bell::Bell {
        self.shm
            .as_ref()
            .and_then(|s| s.progress_bell())
            .unwrap_or_else(kumi_transport::bell::Bell::private)
    }

    /// Whether this rank reaches others over the network (which cannot
    /// ring its progress bell).
    pub(crate) fn has_net(&self) -> bool {
        self.net.is_some()
    }

    /// One pass of [`Engine::progress`], without the demand bookkeeping.
    fn pass(&mut self) -> Result<usize> {
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
            self.spare.put(p);
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
        if self.svc.busy() {
            n += crate::services::progress(self)?;
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

    /// The cores this host's ranks share, alike on all of them.
    pub(crate) fn cores(&self) -> usize {
        self.cores
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
            || self.svc.serving()
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
            match self.pass() {
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

    fn flush_outq(&mut self) -> Result<usize> {
        let mut n = 0;
        let mut sent = Vec::new();
        for (peer, q) in self.outq.iter_mut().enumerate() {
            if q.is_empty() {
                continue;
            }
            let Some(t) = pick(&self.route, &mut self.shm, &mut self.net, peer as u32) else {
                continue;
            };
            while let Some(f) = q.front() {
                if !t.try_send(peer as u32, &f.header, f.bytes())? {
                    break;
                }
                if let Some(OutFrame {
                    payload: Payload::Borrowed { req, .. },
                    ..
                }) = q.pop_front()
                {
                    sent.push(req);
                }
                self.outq_len -= 1;
                n += 1;
            }
        }
        for req in sent {
            self.finish(req);
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kumi_core::config::Tuning;

    /// An engine of a job of one rank, with no transport.
    fn engine(tuning: &Tuning) -> Engine {
        Engine::new(EngineSetup {
            world_rank: 0,
            world_size: 1,
            shm: None,
            net: None,
            route: vec![Route::Me],
            pids: vec![0],
            watch: Watch::disabled(),
            my_local: 0,
            oversubscribed: false,
            cores: 1,
            bound_cores: None,
            tuning,
            single_copy: true,
            spread: None,
            services: Services::new(crate::coll::Config::new(&tuning.coll, true)),
        })
        .unwrap()
    }

    #[test]
    fn a_frame_of_a_kind_nobody_registered_is_an_error_naming_kind_and_peer() {
        let mut e = engine(&Tuning::defaults());
        // Point-to-point's kinds are the engine's own: a stray `Fin` reaches
        // point-to-point, which refuses it for what it is.
        let mut fin = Header::new(Kind::Fin);
        fin.id = 77;
        let err = e.dispatch(0, &fin, &[]).unwrap_err().to_string();
        assert!(err.contains("unknown send request"), "{err}");
        // The services' kinds are not, until they register.
        for kind in [Kind::Combine, Kind::Rma, Kind::Ctx, Kind::Dsm, Kind::Tasks] {
            let err = e
                .dispatch(5, &Header::new(kind), &[])
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(&format!("{kind:?}"))
                    && err.contains("rank 5")
                    && err.contains("nothing"),
                "{err}"
            );
        }
        crate::services::register(&mut e).unwrap();
        let mut ask = Header::new(Kind::Ctx);
        ask.flags = 0x80;
        let err = e.dispatch(5, &ask, &[]).unwrap_err().to_string();
        assert!(
            err.contains("context frame"),
            "the context service answers: {err}"
        );
        // One handler per kind.
        let err = crate::services::register(&mut e).unwrap_err().to_string();
        assert!(
            err.contains("Combine") && err.contains("handler already"),
            "{err}"
        );
    }

    #[test]
    fn a_dropped_frame_does_not_take_the_rank_down() {
        let mut e = engine(&Tuning::defaults());
        // Through the arrival path (a frame to self), the frame is logged and
        // dropped, and the engine goes on.
        e.push_frame(0, &Header::new(Kind::Rma), &[]).unwrap();
        assert_eq!(e.progress().unwrap(), 1);
        assert_eq!(e.counters.frames_in, 1);
        assert_eq!(e.progress().unwrap(), 0);
    }
}
