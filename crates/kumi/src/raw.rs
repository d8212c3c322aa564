//! The raw request API: pointers instead of borrows, for foreign callers.
//!
//! [`crate::scope`] makes nonblocking operations sound in safe Rust by borrowing
//! buffers for a lexical region. A C program has no such region: `MPI_Irecv`
//! returns, and the buffer is the program's promise until `MPI_Wait`. This module
//! is that contract spelled out — every function that takes a raw buffer is
//! `unsafe`, and its safety section says how long the memory must stay valid.
//!
//! It adds to the engine only what the C ABI needs and Rust callers do not:
//! derived datatypes (a non-contiguous layout is packed into a staging buffer the
//! request owns, and unpacked into the user's memory when a receive completes),
//! persistent requests, matched probes, buffered sends, and requests the program
//! let go of (`MPI_Request_free`), which stay alive here until they complete.

use crate::comm::Comm;
use crate::datatype::Datatype;
use crate::engine::{ReqId, WaitInfo};
use crate::error::{Error, Result};
use crate::request::Status;
use kumi_core::call::Call;
use kumi_core::matching::Envelope;
use kumi_core::TAG_UB;
use std::cell::RefCell;

/// How a send completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendMode {
    /// May complete before the receiver matched (eager) or after (rendezvous).
    Standard,
    /// Completes only once the receiver has matched the message.
    Sync,
    /// Copies the data at once: the user's buffer is free when the call returns.
    Buffered,
}

/// Where a completed receive unpacks its staging buffer.
struct Unpack {
    base: *mut u8,
    count: usize,
    dt: Datatype,
}

/// A nonblocking operation started through raw pointers.
pub struct RawRequest {
    comm: Option<Comm>,
    /// `None`: complete (the status is in `done`).
    id: Option<ReqId>,
    done: Option<Status>,
    /// Packed data of a non-contiguous (or buffered) send, or the landing area of
    /// a non-contiguous receive. Owned here so it lives as long as the operation.
    staging: Option<Vec<u8>>,
    unpack: Option<Unpack>,
    /// Set for a matched-probe message: the receive buffer's capacity in bytes,
    /// checked against the message when it is unpacked.
    cap: Option<usize>,
    /// What a wait on this request is blocked in, for supervision reports:
    /// (call, peer, tag) with the communicator's ranks.
    what: (Call, i32, i32),
}

impl std::fmt::Debug for RawRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawRequest")
            .field("id", &self.id)
            .field("done", &self.done)
            .finish()
    }
}

thread_local! {
    /// Requests the program freed while in flight; completed ones are reaped on
    /// every later raw call.
    static ORPHANS: RefCell<Vec<RawRequest>> = const { RefCell::new(Vec::new()) };
}

fn ctx(comm: &Comm) -> u32 {
    // The point-to-point context is the one below the collective context.
    comm.coll_ctx() - 1
}

fn check_tag(tag: i32) -> Result<()> {
    if !(0..=TAG_UB).contains(&tag) {
        return Err(Error::InvalidArgument {
            arg: "tag",
            value: tag as i64,
            allowed: format!("a tag from 0 to {TAG_UB}"),
        });
    }
    Ok(())
}

impl RawRequest {
    /// A request that is already complete with `status` (e.g. to `MPI_PROC_NULL`).
    pub fn completed(status: Status) -> RawRequest {
        RawRequest {
            comm: None,
            id: None,
            done: Some(status),
            staging: None,
            unpack: None,
            cap: None,
            what: (Call::Wait, -2, -2),
        }
    }

    /// The wait description of this request (its call, communicator, peer and
    /// tag), so a report can say "MPI_Recv from rank 1, tag 7".
    #[track_caller]
    fn wait_info(&self, comm: &Comm) -> WaitInfo {
        let (call, peer, tag) = self.what;
        WaitInfo {
            call,
            ctx: ctx(comm),
            peer,
            tag,
            at: std::panic::Location::caller(),
        }
    }

    fn finish(&mut self, st: Result<Status>) -> Result<Status> {
        let st = st?;
        if let (Some(u), Some(data)) = (self.unpack.take(), self.staging.as_ref()) {
            if let Some(cap) = self.cap {
                if st.bytes > cap {
                    return Err(Error::Truncated {
                        message_bytes: st.bytes,
                        buffer_bytes: cap,
                        source: st.source,
                        tag: st.tag,
                    });
                }
            }
            let n = st.bytes.min(data.len());
            // SAFETY: the caller of `irecv`/`RawMessage::irecv` promised the
            // layout's bytes at `base` stay writable until the request completes,
            // which is now.
            unsafe { u.dt.unpack(&data[..n], u.base, u.count) };
        }
        self.staging = None;
        self.done = Some(st);
        Ok(st)
    }

    /// Whether the operation has completed (without making progress).
    pub fn is_done(&self) -> bool {
        match (self.id, &self.comm) {
            (Some(id), Some(c)) => c.engine().is_done(id),
            _ => true,
        }
    }

    /// Makes progress once; the status if the operation has completed (the
    /// request is then spent).
    pub fn test(&mut self) -> Result<Option<Status>> {
        reap();
        let (Some(id), Some(comm)) = (self.id, self.comm.clone()) else {
            return Ok(self.done);
        };
        let r = {
            let mut e = comm.engine();
            if !e.is_done(id) {
                e.progress()?;
            }
            if !e.is_done(id) {
                return Ok(None);
            }
            e.take_result(id)
        };
        self.id = None;
        self.finish(r).map(Some)
    }

    /// Blocks until the operation completes; returns its status.
    #[track_caller]
    pub fn wait(&mut self) -> Result<Status> {
        let (Some(id), Some(comm)) = (self.id, self.comm.clone()) else {
            return Ok(self.done.unwrap_or(Status::empty()));
        };
        let info = self.wait_info(&comm);
        let r = comm.engine().wait(info, id);
        self.id = None;
        self.finish(r)
    }

    /// Cancels a receive that has not matched; `true` if it was cancelled.
    pub fn cancel(&mut self) -> bool {
        match (self.id, &self.comm) {
            (Some(id), Some(c)) => c.engine().cancel_recv(id),
            _ => false,
        }
    }

    /// Lets go of the request: it completes in the background (a receive still
    /// fills its buffer, whose memory must stay valid until then).
    pub fn free(self) {
        if self.id.is_some() {
            ORPHANS.with(|o| o.borrow_mut().push(self));
        }
    }
}

/// Completes the freed requests that have finished.
fn reap() {
    let done: Vec<RawRequest> = ORPHANS.with(|o| {
        let Ok(mut o) = o.try_borrow_mut() else {
            return Vec::new();
        };
        let (done, pending): (Vec<_>, Vec<_>) = o.drain(..).partition(|r| r.is_done());
        *o = pending;
        done
    });
    for mut r in done {
        if let Err(e) = r.wait() {
            eprintln!("kumi: a request the program freed failed: {e}");
        }
    }
}

/// Waits for every freed request and buffered send still in flight.
#[track_caller]
pub fn wait_orphans() -> Result<()> {
    let all: Vec<RawRequest> = ORPHANS.with(|o| o.borrow_mut().drain(..).collect());
    let mut first = Ok(());
    for mut r in all {
        if let Err(e) = r.wait() {
            if first.is_ok() {
                first = Err(e);
            }
        }
    }
    first
}

/// Bytes that freed requests and buffered sends still hold.
pub fn orphan_bytes() -> usize {
    reap();
    ORPHANS.with(|o| {
        o.borrow()
            .iter()
            .map(|r| r.staging.as_ref().map_or(0, |s| s.len()))
            .sum()
    })
}

/// Starts sending `count` elements of `dt` at `buf` to `dest` with `tag`.
///
/// # Safety
/// The bytes `dt` covers for `count` elements at `buf` must be readable and stay
/// unmodified until the request completes (for [`SendMode::Buffered`] and for
/// non-contiguous types, only until this call returns: they are copied).
pub unsafe fn isend(
    comm: &Comm,
    buf: *const u8,
    count: usize,
    dt: &Datatype,
    dest: i32,
    tag: i32,
    mode: SendMode,
) -> Result<RawRequest> {
    reap();
    check_tag(tag)?;
    let peer = comm.check_dest(dest)?;
    let len = dt.packed_size(count);
    let staging = if mode == SendMode::Buffered || !dt.is_contiguous() {
        let mut v = vec![0u8; len];
        // SAFETY: the caller's contract covers the layout's bytes.
        unsafe { dt.pack(buf, count, &mut v) };
        Some(v)
    } else {
        None
    };
    let ptr = match &staging {
        Some(v) => v.as_ptr(),
        // SAFETY: contiguous: the data starts at the element's lower bound.
        None => unsafe { buf.offset(dt.lb()) },
    };
    let env = Envelope {
        ctx: ctx(comm),
        src: comm.rank() as u32,
        tag,
    };
    let id = comm
        .engine()
        .start_send(env, peer, ptr, len, mode == SendMode::Sync)?;
    Ok(RawRequest {
        comm: Some(comm.clone()),
        id,
        done: id.is_none().then_some(Status::empty()),
        staging: if id.is_some() { staging } else { None },
        unpack: None,
        cap: None,
        what: (Call::Send, dest, tag),
    })
}

/// Starts receiving up to `count` elements of `dt` into `buf` from `source`
/// (`kumi::ANY_SOURCE` for any) with `tag` (`kumi::ANY_TAG` for any).
///
/// # Safety
/// The bytes `dt` covers for `count` elements at `buf` must be writable, and
/// otherwise untouched, until the request completes.
pub unsafe fn irecv(
    comm: &Comm,
    buf: *mut u8,
    count: usize,
    dt: &Datatype,
    source: i32,
    tag: i32,
) -> Result<RawRequest> {
    reap();
    let pat = comm.pattern(ctx(comm), source, tag)?;
    let cap = dt.packed_size(count);
    let (mut staging, unpack) = if dt.is_contiguous() {
        (None, None)
    } else {
        (
            Some(vec![0u8; cap]),
            Some(Unpack {
                base: buf,
                count,
                dt: dt.clone(),
            }),
        )
    };
    let ptr = match &mut staging {
        Some(v) => v.as_mut_ptr(),
        // SAFETY: contiguous: the data starts at the element's lower bound.
        None => unsafe { buf.offset(dt.lb()) },
    };
    let id = comm.engine().post_recv(pat, ptr, cap)?;
    Ok(RawRequest {
        comm: Some(comm.clone()),
        id: Some(id),
        done: None,
        staging,
        unpack,
        cap: None,
        what: (Call::Recv, source, tag),
    })
}

/// Makes progress once on `comm`'s engine (and completes freed requests).
pub fn progress(comm: &Comm) -> Result<()> {
    comm.engine().progress()?;
    reap();
    Ok(())
}

/// Blocks until at least one of `reqs` has completed (a request already
/// complete counts). Does not consume any.
#[track_caller]
pub fn wait_any_done(reqs: &[&RawRequest]) -> Result<()> {
    let Some(comm) = reqs.iter().find_map(|r| r.id.and(r.comm.clone())) else {
        return Ok(());
    };
    if reqs.iter().any(|r| r.id.is_none()) {
        return Ok(());
    }
    let ids: Vec<ReqId> = reqs.iter().filter_map(|r| r.id).collect();
    // One request pending: the report can name its peer and tag.
    let info = match reqs.iter().filter(|r| r.id.is_some()).collect::<Vec<_>>()[..] {
        [one] => one.wait_info(&comm),
        _ => WaitInfo::plain(Call::Wait),
    };
    let r = comm
        .engine()
        .wait_until(info, |e| ids.iter().any(|&id| e.is_done(id)));
    reap();
    r
}

/// The status of the earliest message matching `source` and `tag`, without
/// receiving it; `None` if there is none yet.
pub fn iprobe(comm: &Comm, source: i32, tag: i32) -> Result<Option<Status>> {
    reap();
    let pat = comm.pattern(ctx(comm), source, tag)?;
    comm.engine().iprobe(&pat)
}

/// Blocks until a message matching `source` and `tag` is there; its status.
#[track_caller]
pub fn probe(comm: &Comm, source: i32, tag: i32) -> Result<Status> {
    let pat = comm.pattern(ctx(comm), source, tag)?;
    let mut found = None;
    let info = comm.info(Call::Probe, source, tag, std::panic::Location::caller());
    comm.engine().wait_until(info, |e| {
        found = e.iprobe(&pat).ok().flatten();
        found.is_some()
    })?;
    found.ok_or_else(|| Error::Protocol("probe returned without a message".into()))
}

/// A message taken out of matching by a matched probe: no other receive can
/// get it; [`RawMessage::irecv`] delivers it.
#[derive(Debug)]
pub struct RawMessage {
    req: RawRequest,
    status: Status,
}

impl RawMessage {
    /// The message's status (source, tag, size).
    pub fn status(&self) -> Status {
        self.status
    }

    /// Receives the message into `count` elements of `dt` at `buf`.
    ///
    /// # Safety
    /// As for [`irecv`].
    pub unsafe fn irecv(mut self, buf: *mut u8, count: usize, dt: &Datatype) -> RawRequest {
        self.req.unpack = Some(Unpack {
            base: buf,
            count,
            dt: dt.clone(),
        });
        self.req.cap = Some(dt.packed_size(count));
        if let Some(st) = self.req.done.take() {
            // Already complete (e.g. matched and pulled at probe time): unpack now.
            let _ = self.req.finish(Ok(st));
        }
        self.req
    }
}

/// Matched probe: takes the earliest message matching `source` and `tag` out of
/// matching, if there is one.
pub fn improbe(comm: &Comm, source: i32, tag: i32) -> Result<Option<RawMessage>> {
    let Some(st) = iprobe(comm, source, tag)? else {
        return Ok(None);
    };
    // The earliest message from that exact source with that exact tag is the one
    // probed: any earlier one would have matched the probe first.
    let pat = comm.pattern(ctx(comm), st.source, st.tag)?;
    let mut staging = vec![0u8; st.bytes];
    let id = comm
        .engine()
        .post_recv(pat, staging.as_mut_ptr(), staging.len())?;
    let mut req = RawRequest {
        comm: Some(comm.clone()),
        id: Some(id),
        done: None,
        staging: Some(staging),
        unpack: None,
        cap: None,
        what: (Call::Recv, st.source, st.tag),
    };
    // Keep the result for `irecv` if it completed at once.
    if req.is_done() {
        let r = comm.engine().take_result(id);
        req.id = None;
        req.done = Some(r?);
    }
    Ok(Some(RawMessage { req, status: st }))
}

/// Blocking matched probe.
#[track_caller]
pub fn mprobe(comm: &Comm, source: i32, tag: i32) -> Result<RawMessage> {
    probe(comm, source, tag)?;
    improbe(comm, source, tag)?
        .ok_or_else(|| Error::Protocol("a probed message vanished before it was taken".into()))
}

/// The arguments of a persistent operation (`MPI_Send_init`, `MPI_Recv_init`);
/// each [`RawPersistent::start`] starts one operation with them.
#[derive(Clone, Debug)]
pub struct RawPersistent {
    comm: Comm,
    buf: *mut u8,
    count: usize,
    dt: Datatype,
    peer: i32,
    tag: i32,
    /// `None` for a receive.
    send: Option<SendMode>,
}

impl RawPersistent {
    /// A persistent send. See [`isend`] for the buffer's contract, which holds
    /// from each start to the completion of that operation.
    pub fn send(
        comm: &Comm,
        buf: *const u8,
        count: usize,
        dt: &Datatype,
        dest: i32,
        tag: i32,
        mode: SendMode,
    ) -> RawPersistent {
        RawPersistent {
            comm: comm.clone(),
            buf: buf as *mut u8,
            count,
            dt: dt.clone(),
            peer: dest,
            tag,
            send: Some(mode),
        }
    }

    /// A persistent receive. See [`irecv`] for the buffer's contract.
    pub fn recv(
        comm: &Comm,
        buf: *mut u8,
        count: usize,
        dt: &Datatype,
        source: i32,
        tag: i32,
    ) -> RawPersistent {
        RawPersistent {
            comm: comm.clone(),
            buf,
            count,
            dt: dt.clone(),
            peer: source,
            tag,
            send: None,
        }
    }

    /// Starts one operation.
    ///
    /// # Safety
    /// The buffer given at creation must satisfy [`isend`]'s or [`irecv`]'s
    /// contract from now until the operation completes.
    pub unsafe fn start(&self) -> Result<RawRequest> {
        // SAFETY: forwarded from the caller.
        unsafe {
            match self.send {
                Some(mode) => isend(
                    &self.comm, self.buf, self.count, &self.dt, self.peer, self.tag, mode,
                ),
                None => irecv(
                    &self.comm, self.buf, self.count, &self.dt, self.peer, self.tag,
                ),
            }
        }
    }
}
