//! Point-to-point, carried out: the protocol's decisions are
//! `kumi_core::p2p`'s (which protocol a message takes, how a matched
//! rendezvous moves, what each reply means for its request, and the checks
//! on every frame); this module holds the buffers and makes the copies and
//! system calls those decisions ask for: eager messages landed in their
//! receives, single and split copies between processes, pushed chunks, the
//! direct receive slot, probes and cancellation.
//!
//! Matching is one mechanism, `kumi_core::matching`; a blocking receive with
//! nothing posted before it and nothing unexpected for it waits in the direct
//! slot, which an arriving message meets before the posted queue: exactly
//! the message the matcher would have given it (see [`Engine::recv`]).

use super::slab::{Described, Op, Req, ReqId};
use super::{log, pick, Counters, Engine, FrameHandler, Route, WaitInfo};
use crate::error::{Error, Result};
use crate::request::Status;
use kumi_core::header::{Header, Kind, FLAG_SYNC};
use kumi_core::matching::{Envelope, Pattern};
use kumi_core::p2p::{self, Arrival, Incoming, Pull, Reply, Unexpected, Violation};
use kumi_transport::cma;

/// The frame kinds point-to-point handles (beside the eager fast path).
pub(super) const KINDS: [Kind; 8] = [
    Kind::Eager,
    Kind::Rts,
    Kind::Cts,
    Kind::Data,
    Kind::Fin,
    Kind::Ack,
    Kind::Split,
    Kind::Wrote,
];

/// Registers point-to-point's frame kinds with the engine.
pub(super) fn register(e: &mut Engine) -> Result<()> {
    for k in KINDS {
        e.register(k, Engine::on_p2p_frame as FrameHandler)?;
    }
    Ok(())
}

/// What the matcher returns for the receive in its direct slot
/// ([`Engine::recv`]): never a request's id (a slab id's generation is at
/// least 1).
pub(super) const DIRECT: ReqId = 0;

/// The buffer side of the blocking receive the application thread waits in
/// when it is matched without a request ([`Engine::recv`]; its pattern is
/// in the matcher's direct slot).
#[derive(Clone, Copy)]
pub(super) enum Direct {
    /// None.
    Idle,
    /// Waiting: the matcher holds its pattern as [`DIRECT`].
    Waiting { buf: *mut u8, cap: usize },
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
pub(super) unsafe fn land_eager(
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
pub(super) fn truncated(st: Status, cap: usize) -> Error {
    Error::Truncated {
        message_bytes: st.bytes,
        buffer_bytes: cap,
        source: st.source,
        tag: st.tag,
    }
}

/// A receiver's half of a two-sided single copy, waiting to be read.
pub(super) struct PendingRead {
    pub(super) id: ReqId,
    pub(super) from: u32,
    pub(super) addr: u64,
    pub(super) sender_req: u64,
    /// It reads `[0, split)`.
    pub(super) split: usize,
}

/// # Safety
/// `ptr` must be valid for `len` bytes of reads when `len > 0`.
#[inline]
pub(super) unsafe fn slice_or_empty<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if len == 0 {
        &[]
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}

/// A send's header on the stack, alone in its cache line. The transport reads
/// it back right after the send has written it (loads over several stores,
/// which wait for them to reach the cache); where it fell in its line moved
/// with the caller's stack, and one position of the four was slow
/// (docs/BENCHMARKS.md, session 19). Aligned, every caller runs alike.
#[repr(align(64))]
pub(super) struct LineHeader(Header);

impl Engine {
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
        self.start_send_upto(env, peer, buf, len, sync, usize::MAX)
    }

    /// [`Engine::start_send`], by rendezvous if longer than `eager_max`
    /// bytes (and not to itself), whatever the eager limit: a collective
    /// whose long blocks are to be read straight out of the sender's
    /// buffer.
    #[inline(always)]
    pub fn start_send_upto(
        &mut self,
        env: Envelope,
        peer: u32,
        buf: *const u8,
        len: usize,
        sync: bool,
        eager_max: usize,
    ) -> Result<Option<ReqId>> {
        self.counters.msgs_sent += 1;
        self.counters.bytes_sent += len as u64;
        // Collectives run on odd (collective) contexts: counted apart, so
        // the user's own messages can be counted exactly, and their long
        // blocks may go by rendezvous below the eager limit.
        let coll = env.ctx & 1 == 1;
        if let Some(c) = self.counters.peers.get_mut(peer as usize) {
            if coll {
                c.coll_msgs_out += 1;
                c.coll_bytes_out += len as u64;
            } else {
                c.msgs_out += 1;
                c.bytes_out += len as u64;
            }
        }
        let mut line = LineHeader(p2p::eager(&env, len));
        let h = &mut line.0;
        // SAFETY: the caller guarantees `buf` points to `len` readable bytes (it
        // comes from a slice) for the duration of the send.
        let payload = unsafe { slice_or_empty(buf, len) };
        if (len <= self.proto.surely_eager && len <= eager_max)
            || peer == self.world_rank
            || (len <= eager_max && self.eager_to(peer, len, coll))
        {
            if !sync {
                if self.try_push_frame(peer, h, payload)? {
                    return Ok(None);
                }
                // Behind a full ring or earlier frames: the frame waits with
                // its payload where it is, and the send completes when it
                // goes. A sender that outruns its receiver so waits, as for
                // a rendezvous, rather than copying into memory without bound
                // (docs/BENCHMARKS.md, session 22).
                let id = self.new_send(peer, buf, len, false);
                self.queue_borrowed(peer, h, buf, len, id);
                return Ok(Some(id));
            }
            let id = self.new_send(peer, buf, len, false);
            h.flags = FLAG_SYNC;
            h.id = id;
            self.push_frame(peer, h, payload)?;
            return Ok(Some(id));
        }
        // Only a receiver on this host may ask the sender to write half.
        let fan_out = len >= self.proto.limits.split_min
            && self.route.get(peer as usize) == Some(&Route::Shm)
            && self.rendezvous_out(|p| p != peer);
        let id = self.new_send(peer, buf, len, true);
        self.push_frame(peer, &p2p::rts(&env, len, id, buf as u64, fan_out), &[])?;
        Ok(Some(id))
    }

    /// Whether `len` bytes (above [`p2p::Protocol::surely_eager`]) of a
    /// collective (`coll`) or not go eagerly to `peer`.
    #[cold]
    pub(super) fn eager_to(&self, peer: u32, len: usize, coll: bool) -> bool {
        let net = self.route.get(peer as usize) == Some(&Route::Net);
        self.proto.eager(len, net, coll)
    }

    pub(super) fn new_send(
        &mut self,
        peer: u32,
        buf: *const u8,
        len: usize,
        rendezvous: bool,
    ) -> ReqId {
        self.reqs.insert(
            Req {
                done: false,
                status: Status::empty(),
                error: None,
                detached: false,
                op: Op::Send {
                    buf,
                    send: p2p::Send::new(peer, len, rendezvous),
                },
            },
            None,
        )
    }

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
    pub(super) fn post_recv_with(
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
    /// receive is then posted in the matcher's direct slot
    /// (`Matcher::post_direct`, as [`DIRECT`]) and its buffer kept in
    /// [`Engine::direct`], where an arriving eager message is copied at once:
    /// no request slot to take and free on the way from the message's
    /// arrival to the caller (a tenth of an 8-byte half round trip). A
    /// rendezvous makes it a request ([`Direct::Promoted`]), which the wait
    /// continues on.
    /// The caller guarantees the buffer as for [`Engine::post_recv`], until
    /// this returns. Inline, into the blocking receives, as `start_send`.
    #[inline(always)]
    pub fn recv(
        &mut self,
        info: WaitInfo,
        pat: Pattern,
        buf: *mut u8,
        cap: usize,
    ) -> Result<Status> {
        if !matches!(self.direct, Direct::Idle) || self.matcher.post_direct(pat, DIRECT).is_err() {
            let id = self.post_recv(pat, buf, cap)?;
            return self.wait(info, id);
        }
        self.direct = Direct::Waiting { buf, cap };
        let waited = self.wait_until(info, |e| !matches!(e.direct, Direct::Waiting { .. }));
        let direct = std::mem::replace(&mut self.direct, Direct::Idle);
        if waited.is_err() {
            self.abandon_direct();
        }
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

    /// Delivers eager message `data` to the receive in the direct slot (its
    /// `cap` bytes at `buf`), which the matcher gave it.
    #[inline(always)]
    pub(super) fn direct_eager(
        &mut self,
        from: u32,
        env: &Envelope,
        data: &[u8],
        sync_id: Option<u64>,
        buf: *mut u8,
        cap: usize,
    ) {
        self.ack_sync(from, sync_id);
        // SAFETY: `Engine::recv`'s caller guarantees `buf` is valid for `cap`
        // bytes while it waits, which it does until `direct` leaves `Waiting`.
        self.direct = Direct::Done(unsafe { land_eager(&mut self.counters, env, data, buf, cap) });
    }

    /// A rendezvous message for the receive in the direct slot, which the
    /// matcher gave it: the receive becomes a request, returned.
    pub(super) fn direct_promote(&mut self) -> Option<ReqId> {
        let Direct::Waiting { buf, cap } = self.direct else {
            self.lost_direct();
            return None;
        };
        let id = self.reqs.insert(Req::recv(buf, cap), None);
        self.direct = Direct::Promoted(id);
        Some(id)
    }

    /// A blocking receive's wait failed before a message came: its slot in
    /// the matcher goes with it. Out of line: it would keep [`Engine::recv`]
    /// from being inlined into the receives.
    #[cold]
    #[inline(never)]
    fn abandon_direct(&mut self) {
        self.matcher.cancel_posted(|&r| r == DIRECT);
    }

    /// The matcher gave a message to a direct receive the engine does not
    /// hold: a broken invariant, said loudly (the message is lost).
    #[cold]
    fn lost_direct(&mut self) {
        log(
            self.world_rank,
            "a message matched the direct receive, which is not waiting (a kumi bug)",
        );
    }

    /// Acknowledges a synchronous send whose message just matched.
    #[inline(always)]
    pub(super) fn ack_sync(&mut self, from: u32, sync_id: Option<u64>) {
        if let Some(sid) = sync_id {
            if let Err(e) = self.push_frame(from, &p2p::ack(sid), &[]) {
                log(
                    self.world_rank,
                    &format!("could not acknowledge a synchronous send to rank {from}: {e}"),
                );
            }
        }
    }

    pub(super) fn deliver_unexpected(
        &mut self,
        id: ReqId,
        env: Envelope,
        m: Unexpected,
    ) -> Result<()> {
        match m {
            Unexpected::Eager {
                from,
                data,
                sync_id,
            } => {
                self.complete_eager(id, from, env, &data, sync_id);
                self.spare.put(data);
                Ok(())
            }
            Unexpected::Rts {
                from,
                len,
                sender_req,
                addr,
                fan_out,
            } => self.start_pull(id, from, env, len, (sender_req, addr), fan_out),
        }
    }

    #[inline(always)]
    pub(super) fn complete_eager(
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

    /// Whether a rendezvous message of this rank's to a peer `to` accepts
    /// still waits for that peer to take it. A scan of the requests, made
    /// only for a message long enough to split (whose copy costs more).
    fn rendezvous_out(&self, to: impl Fn(u32) -> bool) -> bool {
        self.reqs.entries.iter().any(|(_, r)| {
            matches!(r, Some(Req { done: false, op: Op::Send { send, .. }, .. })
                if to(send.peer)
                    && send.phase == p2p::SendPhase::AwaitReply
                    && send.rendezvous)
        })
    }

    /// A rendezvous message matched receive `id`: move it as the protocol
    /// says ([`p2p::Protocol::pull`]). `(sender_req, addr)`: the sender's
    /// request and where the message lies in its memory.
    pub(super) fn start_pull(
        &mut self,
        id: ReqId,
        from: u32,
        env: Envelope,
        len: usize,
        (sender_req, addr): (u64, u64),
        fan_out: bool,
    ) -> Result<()> {
        let same_host = self.route.get(from as usize) == Some(&Route::Shm);
        let sender_busy = fan_out
            || same_host
                && len >= self.proto.limits.split_min
                && self.rendezvous_out(|p| p == from);
        let Some(Req {
            op: Op::Recv { buf, cap, data },
            status,
            error,
            ..
        }) = self.reqs.get(id)
        else {
            return Ok(());
        };
        let (buf, cap) = (*buf, *cap);
        *status = Status {
            source: env.src as i32,
            tag: env.tag,
            bytes: len,
            cancelled: false,
        };
        match self.proto.pull(len, cap, same_host, sender_busy) {
            Pull::Truncated => {
                *error = Some(Box::new(truncated(*status, cap)));
                // The sender's part is done either way: release it.
                self.push_frame(from, &p2p::fin(sender_req), &[])?;
                self.finish(id);
                Ok(())
            }
            Pull::Split { split } => {
                // The read waits until the progress pass has flushed the
                // `Split` frame, so both copies really overlap.
                *data = Some(Incoming::new(len));
                self.push_frame(from, &p2p::split(sender_req, id, buf as u64, len), &[])?;
                self.pending_reads.push(PendingRead {
                    id,
                    from,
                    addr,
                    sender_req,
                    split,
                });
                Ok(())
            }
            Pull::Read => {
                // SAFETY: the receive's owner guarantees `buf` is valid for
                // `cap >= len` bytes (the pull checked) until completion.
                let dst = unsafe { std::slice::from_raw_parts_mut(buf, len) };
                let pid = self.pids.get(from as usize).copied().unwrap_or(0);
                match cma::read_from(pid, addr, dst) {
                    Ok(()) => {
                        self.proto.read_done();
                        self.push_frame(from, &p2p::fin(sender_req), &[])?;
                        self.counters.msgs_recv += 1;
                        self.counters.bytes_recv += len as u64;
                        self.finish(id);
                        Ok(())
                    }
                    Err(e) => {
                        self.proto.read_refused();
                        log(
                            self.world_rank,
                            &format!(
                                "single copy between processes (process_vm_readv) is not available ({e}); \
                                 large messages use pipelined copies through shared memory from now on"
                            ),
                        );
                        self.ask_push(id, from, len, sender_req)
                    }
                }
            }
            Pull::Push => self.ask_push(id, from, len, sender_req),
        }
    }

    /// Asks the sender of `len` bytes for receive `id` to push them.
    fn ask_push(&mut self, id: ReqId, from: u32, len: usize, sender_req: u64) -> Result<()> {
        if let Some(Req {
            op: Op::Recv { data, .. },
            ..
        }) = self.reqs.get(id)
        {
            *data = Some(Incoming::new(len));
        }
        self.push_frame(from, &p2p::cts(sender_req, id, len), &[])
    }

    /// Counts an arriving message (eager or rendezvous) for the deadlock
    /// detector and the statistics.
    #[inline(always)]
    pub(super) fn count_in(&mut self, from: u32, h: &Header) {
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
    pub(super) fn on_eager(&mut self, from: u32, h: &Header, p: &[u8]) {
        self.count_in(from, h);
        let env = Envelope {
            ctx: h.ctx,
            src: h.src,
            tag: h.tag,
        };
        let sync_id = (h.flags & FLAG_SYNC != 0).then_some(h.id);
        // A blocking receive waits in the matcher's direct slot: looked at
        // first, as `take_posted` would, without the general search.
        if let Direct::Waiting { buf, cap } = self.direct {
            if self.matcher.take_direct(&env).is_some() {
                return self.direct_eager(from, &env, p, sync_id, buf, cap);
            }
        }
        match self.matcher.take_posted(&env) {
            Some(DIRECT) => self.lost_direct(),
            Some(id) => self.complete_eager(id, from, env, p, sync_id),
            None => self.push_unexpected_eager(env, from, p, sync_id),
        }
    }

    #[inline(never)]
    pub(super) fn push_unexpected_eager(
        &mut self,
        env: Envelope,
        from: u32,
        p: &[u8],
        sync_id: Option<u64>,
    ) {
        let mut data = self.spare.take(p.len());
        data.extend_from_slice(p);
        self.matcher.push_unexpected(
            env,
            Unexpected::Eager {
                from,
                data,
                sync_id,
            },
        );
    }

    /// Every point-to-point frame but a well-formed eager one (which
    /// [`Engine::on_frame`] hands to [`Engine::on_eager`] directly).
    /// A frame that does not fit the requests it names is a
    /// [`Violation`], returned (and so logged and dropped) before any
    /// buffer is touched.
    pub(super) fn on_p2p_frame(&mut self, from: u32, h: &Header, p: &[u8]) -> Result<()> {
        match h.kind {
            // `on_frame` handles every eager frame whose length matches.
            Kind::Eager => Err(Violation::EagerLength {
                announced: h.len,
                carried: p.len(),
            }
            .into()),
            Kind::Rts => {
                self.count_in(from, h);
                let len = p2p::rts_len(h)?;
                let env = Envelope {
                    ctx: h.ctx,
                    src: h.src,
                    tag: h.tag,
                };
                let posted = match self.matcher.take_posted(&env) {
                    Some(DIRECT) => self.direct_promote(),
                    other => other,
                };
                let m = Unexpected::Rts {
                    from,
                    len,
                    sender_req: h.id,
                    addr: h.aux,
                    fan_out: p2p::rts_fan_out(h),
                };
                match posted {
                    Some(id) => self.deliver_unexpected(id, env, m),
                    None => {
                        self.matcher.push_unexpected(env, m);
                        Ok(())
                    }
                }
            }
            Kind::Fin | Kind::Ack | Kind::Cts | Kind::Split => {
                let (buf, send) = match self.reqs.get(h.id) {
                    Some(Req {
                        op: Op::Send { buf, send },
                        done: false,
                        ..
                    }) => (*buf, Some(send)),
                    _ => (std::ptr::null(), None),
                };
                match p2p::Send::on_reply(send, from, h)? {
                    Reply::Done => self.finish(h.id),
                    Reply::Push => self.streaming.push(h.id),
                    Reply::WriteHalf {
                        at,
                        remote,
                        recv_req,
                    } => {
                        let len = h.len as usize;
                        // SAFETY: the send's owner keeps `buf` valid for its
                        // `len` bytes (which `on_reply` checked the frame
                        // names) until the request completes, which needs the
                        // receiver's `Fin`; `at <= len`.
                        let half = unsafe { std::slice::from_raw_parts(buf.add(at), len - at) };
                        let pid = self.pids.get(from as usize).copied().unwrap_or(0);
                        let failed = match cma::write_to(pid, remote + at as u64, half) {
                            Ok(()) => false,
                            Err(e) => {
                                log(
                                    self.world_rank,
                                    &format!("writing {} bytes into rank {from}: {e}", len - at),
                                );
                                true
                            }
                        };
                        let w = p2p::wrote(recv_req, failed);
                        self.push_frame(from, &w, &[])?;
                    }
                }
                Ok(())
            }
            Kind::Data | Kind::Wrote => {
                let (buf, incoming) = match self.reqs.get(h.id) {
                    Some(Req {
                        op: Op::Recv { buf, data, .. },
                        done: false,
                        ..
                    }) => (*buf, data.as_mut()),
                    _ => (std::ptr::null_mut(), None),
                };
                let total = incoming.as_ref().map_or(0, |r| r.total);
                let complete = match Incoming::on_frame(incoming, h, p.len())? {
                    Arrival::CopyAt { off, complete } => {
                        // SAFETY: `buf` holds at least `total` bytes (checked
                        // against the receive's capacity when the rendezvous
                        // started) and `on_frame` checked `off + p.len() <= total`.
                        unsafe { std::ptr::copy_nonoverlapping(p.as_ptr(), buf.add(off), p.len()) };
                        complete
                    }
                    Arrival::Wrote { failed, complete } => {
                        if failed {
                            if let Some(r) = self.reqs.get(h.id) {
                                r.error = Some(Box::new(Error::Protocol(format!(
                                    "rank {from} could not write its half of the message"
                                ))));
                            }
                        }
                        complete
                    }
                };
                if complete {
                    self.counters.msgs_recv += 1;
                    self.counters.bytes_recv += total as u64;
                    self.finish(h.id);
                }
                Ok(())
            }
            kind => Err(Violation::NotPointToPoint(kind).into()),
        }
    }

    /// The receiver's half of each two-sided copy whose `Split` frame is out.
    pub(super) fn read_first_halves(&mut self) -> Result<usize> {
        let mut n = 0;
        for pr in std::mem::take(&mut self.pending_reads) {
            let Some(Req {
                op:
                    Op::Recv {
                        buf,
                        data: Some(incoming),
                        ..
                    },
                error,
                ..
            }) = self.reqs.get(pr.id)
            else {
                continue;
            };
            // SAFETY: `buf` holds at least the message's bytes (checked
            // against the receive's capacity when the rendezvous started)
            // and `split` is inside the message.
            let dst = unsafe { std::slice::from_raw_parts_mut(*buf, pr.split) };
            let pid = self.pids.get(pr.from as usize).copied().unwrap_or(0);
            if let Err(e) = cma::read_from(pid, pr.addr, dst) {
                *error = Some(Box::new(Error::Io(std::io::Error::new(
                    e.kind(),
                    format!("reading {} bytes from rank {}: {e}", pr.split, pr.from),
                ))));
            }
            let total = incoming.total;
            let complete = incoming.add(pr.split);
            self.push_frame(pr.from, &p2p::fin(pr.sender_req), &[])?;
            if complete {
                self.counters.msgs_recv += 1;
                self.counters.bytes_recv += total as u64;
                self.finish(pr.id);
            }
            n += 1;
        }
        Ok(n)
    }

    pub(super) fn stream_data(&mut self) -> Result<usize> {
        let mut n = 0;
        let mut i = 0;
        while i < self.streaming.len() {
            let id = self.streaming[i];
            let finished = match self.reqs.get(id) {
                Some(Req {
                    op: Op::Send { buf, send },
                    ..
                }) => {
                    let peer = send.peer;
                    let blocked = self.outq.get(peer as usize).is_some_and(|q| !q.is_empty());
                    let t = pick(&self.route, &mut self.shm, &mut self.net, peer);
                    if let (false, Some(t)) = (blocked, t) {
                        while let Some(c) = send.chunk(t.max_payload()) {
                            // SAFETY: the send's owner keeps `buf` valid for
                            // its bytes until completion; the chunk is inside.
                            let data = unsafe { std::slice::from_raw_parts(buf.add(c.off), c.len) };
                            if !t.try_send(peer, &c.header, data)? {
                                break;
                            }
                            send.pushed(c.len);
                            self.counters.chunks_out += 1;
                            n += 1;
                        }
                    }
                    send.all_pushed()
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

    /// Probe: the envelope and size of the earliest matching unexpected message.
    pub fn iprobe(&mut self, pat: &Pattern) -> Result<Option<Status>> {
        self.progress()?;
        Ok(self.matcher.peek_unexpected(pat).map(|(e, m)| Status {
            source: e.src as i32,
            tag: e.tag,
            bytes: m.bytes(),
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

/// Buffers of unexpected eager messages that were delivered, and of frames
/// to this rank itself that were handled, for the next ones: a sender that
/// runs ahead of its receiver makes one per message, a send to itself one
/// per frame, and fresh heap memory each time costs page faults (glibc gives
/// a freed top of its heap back at once; measured: docs/BENCHMARKS.md,
/// sessions 22 and 42).
#[derive(Default)]
pub(super) struct Spare {
    bufs: Vec<Vec<u8>>,
    bytes: usize,
}

impl Spare {
    /// What the pool keeps at most (bytes of capacity): a ring's worth of
    /// eager messages to one peer is a few of the largest.
    const KEEP: usize = 4 << 20;

    /// An empty buffer with room for `len` bytes (a kept one if one fits).
    #[inline]
    pub(super) fn take(&mut self, len: usize) -> Vec<u8> {
        if let Some(i) = self.bufs.iter().rposition(|b| b.capacity() >= len) {
            let b = self.bufs.swap_remove(i);
            self.bytes -= b.capacity();
            return b;
        }
        Vec::with_capacity(len)
    }

    /// Keeps `b` for a later message, if the pool has room.
    #[inline]
    pub(super) fn put(&mut self, mut b: Vec<u8>) {
        if b.capacity() > 0 && self.bytes + b.capacity() <= Self::KEEP {
            b.clear();
            self.bytes += b.capacity();
            self.bufs.push(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use kumi_core::p2p::Limits;
    use kumi_transport::shm::max_payload;

    #[test]
    fn eager_limits_follow_the_rings_of_each_job_size() {
        let shm = |ring: usize| Limits::new(Some(max_payload(ring)), None, None, 0).unwrap();
        // 1 MiB rings (up to 5 ranks), 512 KiB (6-8), 256 KiB (9-11),
        // 128 KiB (12-16), 64 KiB.
        let kib = |ring: usize| (shm(ring).host >> 10, shm(ring).net >> 10);
        assert_eq!(kib(1 << 20), (64, 64));
        assert_eq!(kib(512 << 10), (32, 32));
        assert_eq!(kib(256 << 10), (16, 16));
        assert_eq!(kib(128 << 10), (8, 8));
        assert_eq!(kib(64 << 10), (8, 8));
        // A ring too small for 8 KiB: the limit follows it down.
        assert_eq!(shm(4096).host, max_payload(4096));
        // An asked limit must fit the ring.
        let m = max_payload(1 << 20);
        assert!(Limits::new(Some(m), None, Some(m as u64 + 1), 0).is_err());
        assert_eq!(
            Limits::new(Some(m), None, Some(m as u64), 0).unwrap().host,
            m
        );
    }
}
