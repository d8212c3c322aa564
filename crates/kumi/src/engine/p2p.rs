//! The point-to-point protocol: eager messages, rendezvous (request to send,
//! then single copy, split copy or pushed chunks, then finish), the direct
//! receive slot, probes and cancellation.
//!
//! Protocols, chosen per message:
//! - **eager** (`len <= eager_limit`): the whole message in one frame. A plain
//!   send completes when the transport accepts the frame; a synchronous send
//!   completes when the receiver's `Ack` comes back.
//! - **rendezvous** (larger): `Rts` carries the sender's buffer address. The
//!   receiver, once matched, reads the message straight out of the sender's
//!   memory with `process_vm_readv` (one copy) and answers `Fin`; from
//!   `KUMI_SPLIT_COPY_MIN` on it asks the sender to write the second half at
//!   the same time (`Split`, `Wrote`). If the kernel refuses single copy, the
//!   engine says so once and from then on answers `Cts`, and the sender
//!   pushes the message in `Data` chunks through the ring (pipelined copy).
//!
//! Matching is one mechanism, `kumi_core::matching`; a blocking receive with
//! nothing posted before it and nothing unexpected for it waits in the direct
//! slot, which an arriving message meets before the posted queue: exactly
//! the message the matcher would have given it (see [`Engine::recv`]).

use super::slab::{Described, Op, Req, ReqId, SendPhase};
use super::{log, pick, Counters, Engine, FrameHandler, Route, WaitInfo};
use crate::error::{Error, Result};
use crate::request::Status;
use kumi_core::header::{Header, Kind, FLAG_SYNC};
use kumi_core::matching::{Envelope, Pattern};
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

/// An unexpected message, kept until a receive matches it.
pub(super) enum Unexpected {
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

/// Eager limit on the network when `KUMI_EAGER_LIMIT` is unset: up to it,
/// eager beats the rendezvous over TCP at ping-pong and streaming; at 64 KiB
/// eager streamed slower than the pipelined rendezvous (measured:
/// docs/BENCHMARKS.md, session 11).
pub(super) const EAGER_NET: usize = 32 * 1024;

/// The eager limits `(shared memory, network)`: the largest message sent in
/// one frame, above which a send is a rendezvous (single copy on shared
/// memory). `shm_max`/`net_max`: the largest frame each transport present
/// carries; `asked`: `KUMI_EAGER_LIMIT`, which sets both and must fit both.
///
/// Unset, the shared-memory limit follows the ring: a quarter of the largest
/// record rounded down to a power of two, between 8 and 32 KiB (32 KiB with
/// the rings of up to 8 ranks on a host, 16 KiB up to 11, 8 KiB from 12),
/// so an eager record never takes more than a sixteenth of its ring. The
/// cap: eager 64 KiB streamed erratically where the rendezvous is steady;
/// the floor and the scaling: eager messages of a sixteenth of a ring or
/// more filled it and streamed slower than the rendezvous (measured:
/// docs/BENCHMARKS.md, session 11). On the network: [`EAGER_NET`].
pub(super) fn eager_limits(
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

/// A receiver's half of a two-sided single copy, waiting to be read.
pub(super) struct PendingRead {
    pub(super) id: ReqId,
    pub(super) from: u32,
    pub(super) addr: u64,
    pub(super) sender_req: u64,
}

/// Where a two-sided copy splits a message of `len` bytes: the receiver reads
/// `[0, split)`, the sender writes `[split, len)`. Cache-line aligned.
pub(super) fn split_point(len: usize) -> usize {
    (len / 2) & !63
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
    pub(super) fn eager_to(&self, peer: u32, len: usize) -> bool {
        match self.route.get(peer as usize) {
            Some(Route::Net) => len <= self.eager_net,
            _ => len <= self.eager_limit,
        }
    }

    pub(super) fn new_send(&mut self, peer: u32, buf: *const u8, len: usize) -> ReqId {
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

    /// A rendezvous message matched receive `id`: pull it, or ask for it.
    pub(super) fn start_pull(
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
        self.matcher.push_unexpected(
            env,
            Unexpected::Eager {
                from,
                data: p.to_vec(),
                sync_id,
            },
        );
    }

    /// Every point-to-point frame but a well-formed eager one (which
    /// [`Engine::on_frame`] hands to [`Engine::on_eager`] directly).
    pub(super) fn on_p2p_frame(&mut self, from: u32, h: &Header, p: &[u8]) -> Result<()> {
        match h.kind {
            Kind::Combine | Kind::Rma | Kind::Ctx => {
                return Err(Error::Protocol(format!(
                    "a {:?} frame reached point-to-point",
                    h.kind
                )))
            }
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
                let posted = match self.matcher.take_posted(&env) {
                    Some(DIRECT) => self.direct_promote(),
                    other => other,
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

    /// The receiver's half of each two-sided copy whose `Split` frame is out.
    pub(super) fn read_first_halves(&mut self) -> Result<usize> {
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

    pub(super) fn stream_data(&mut self) -> Result<usize> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use kumi_transport::shm::max_payload;

    #[test]
    pub(super) fn eager_limits_follow_the_ring_and_are_32k_on_the_network() {
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
    pub(super) fn an_asked_eager_limit_sets_both_and_must_fit_every_transport() {
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
