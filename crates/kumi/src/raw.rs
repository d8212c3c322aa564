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
//! The common contiguous send or receive also exists as a [`Ticket`]: the
//! engine's request id alone, which the C ABI keeps in its request table and
//! completes there, without a request object.

use crate::comm::Comm;
use crate::datatype::Datatype;
use crate::engine::{Described, ReqId, WaitInfo};
use crate::error::{Error, Result};
use crate::request::Status;
use kumi_core::call::Call;
use kumi_core::matching::{Envelope, Pattern};
use kumi_core::{ANY_SOURCE, ANY_TAG, TAG_UB};
use std::panic::Location;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

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
    /// What a wait on this request is blocked in, for supervision reports:
    /// (call, peer, tag) with the communicator's ranks.
    what: (Call, i32, i32),
    /// What only some requests need, boxed: a request of a contiguous send or
    /// receive stays small (a quarter of the size with these inline), and it
    /// is moved several times on its way into the ABI's request table, which
    /// showed as memcpy in profiles of small-message rates.
    x: Option<Box<Extra>>,
}

#[derive(Default)]
struct Extra {
    /// Packed data of a non-contiguous (or buffered) send, or the landing area of
    /// a non-contiguous receive. Owned here so it lives as long as the operation.
    staging: Option<Vec<u8>>,
    unpack: Option<Unpack>,
    /// Set for a matched-probe message: the receive buffer's capacity in bytes,
    /// checked against the message when it is unpacked.
    cap: Option<usize>,
    /// The error of an operation completed by [`wait_all`], returned by the
    /// next [`RawRequest::wait`] or [`RawRequest::test`].
    failed: Option<Error>,
}

/// The boxed part of a request, if any of it is set.
#[inline(always)]
fn extra(staging: Option<Vec<u8>>, unpack: Option<Unpack>) -> Option<Box<Extra>> {
    (staging.is_some() || unpack.is_some()).then(|| {
        Box::new(Extra {
            staging,
            unpack,
            ..Extra::default()
        })
    })
}

impl std::fmt::Debug for RawRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawRequest")
            .field("id", &self.id)
            .field("done", &self.done)
            .finish()
    }
}

/// Requests the program freed while in flight; completed ones are reaped on
/// every later raw call. One list for the process, not one per thread:
/// under `MPI_THREAD_MULTIPLE` whichever thread calls next completes them,
/// and a thread that exits must not take with it the staging buffer of a
/// buffered send the receiver is still reading.
static ORPHANS: Mutex<Vec<Orphan>> = Mutex::new(Vec::new());

/// A freed request in [`ORPHANS`].
struct Orphan(RawRequest);

// SAFETY: a request (and the reference-counted communicator in it) is used
// by one thread at a time: the thread that uses the runtime, which is one
// thread, or under `MPI_THREAD_MULTIPLE` the thread whose turn it is (the C
// library's turns, handed on with Release and taken with Acquire: see
// `crate::threads`), so what one thread did to it happens before what the
// next does. The mutex orders the list itself.
unsafe impl Send for Orphan {}

/// The orphans, whoever panicked while holding them.
fn orphans() -> std::sync::MutexGuard<'static, Vec<Orphan>> {
    ORPHANS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How many requests wait in `ORPHANS`: lets [`reap`], which every raw call
/// makes, skip the lock when there are none, the usual case. Relaxed: it is
/// changed under the lock, and a stale count only costs (or saves) one look
/// at the list.
static ORPHAN_COUNT: AtomicUsize = AtomicUsize::new(0);

fn ctx(comm: &Comm) -> u32 {
    // The point-to-point context is the one below the collective context.
    comm.coll_ctx() - 1
}

/// Inlined, with the error out of line: see [`start_send`].
#[inline(always)]
fn check_tag(tag: i32) -> Result<()> {
    if !(0..=TAG_UB).contains(&tag) {
        return bad_tag(tag);
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn bad_tag(tag: i32) -> Result<()> {
    Err(Error::InvalidArgument {
        arg: "tag",
        value: tag as i64,
        allowed: format!("a tag from 0 to {TAG_UB}"),
    })
}

/// The matching pattern of a receive of the usual arguments (a rank of
/// `comm` or [`ANY_SOURCE`], a tag from 0 to [`TAG_UB`] or [`ANY_TAG`]) on
/// the point-to-point context, checked inline in the callers this module's
/// receives are inlined into (see [`start_recv`]); `None` for anything else,
/// errors included, which the caller hands to an out-of-line path through
/// [`Comm::pattern`].
///
/// Not a `Result` merged with `Comm::pattern`'s: the pattern then came
/// through memory, written in 4-byte fields and read in 8-byte words, which
/// the processor cannot forward from its store buffer (a third of the C
/// library's `MPI_Irecv` went waiting there: docs/BENCHMARKS.md, session 18).
#[inline(always)]
fn usual_pattern(comm: &Comm, source: i32, tag: i32) -> Option<Pattern> {
    let src = match source {
        ANY_SOURCE => None,
        s if s >= 0 && (s as usize) < comm.size() => Some(s as u32),
        _ => return None,
    };
    let tag = match tag {
        ANY_TAG => None,
        t if (0..=TAG_UB).contains(&t) => Some(t),
        _ => return None,
    };
    Some(Pattern {
        ctx: ctx(comm),
        src,
        tag,
    })
}

impl RawRequest {
    /// A request that is already complete with `status` (e.g. to `MPI_PROC_NULL`).
    #[inline]
    pub fn completed(status: Status) -> RawRequest {
        RawRequest {
            comm: None,
            id: None,
            done: Some(status),
            what: (Call::Wait, -2, -2),
            x: None,
        }
    }

    /// The request object of an operation held as a [`Ticket`] on `comm`
    /// (the operation's own communicator: a report of a wait names it).
    pub fn from_ticket(comm: &Comm, t: Ticket) -> RawRequest {
        let what = match comm.engine().described(t.id).map(|d| d.what()) {
            Some((call, _, peer, tag)) => (call, peer, tag),
            None => (Call::Wait, -2, -2),
        };
        RawRequest {
            comm: Some(comm.clone()),
            id: Some(t.id),
            done: None,
            what,
            x: None,
        }
    }

    /// The wait description of this request (its call, communicator, peer and
    /// tag), so a report can say "MPI_Recv from rank 1, tag 7".
    #[track_caller]
    fn wait_info(&self, comm: &Comm) -> WaitInfo {
        wait_info_of(std::iter::once(self.what_with(comm)))
    }

    /// What a wait on this request is: (call, context, peer, tag), on its
    /// own communicator (`comm` if it has none).
    #[inline(always)]
    fn what_with(&self, comm: &Comm) -> (Call, u32, i32, i32) {
        let (call, peer, tag) = self.what;
        (call, ctx(self.comm.as_ref().unwrap_or(comm)), peer, tag)
    }

    /// Records the outcome of the completed operation; unpacks a
    /// non-contiguous receive. Inline for the common request without extras
    /// (a contiguous send or receive), out of line otherwise.
    #[inline(always)]
    fn finish(&mut self, st: Result<Status>) -> Result<Status> {
        let st = st?;
        if self.x.is_none() {
            self.done = Some(st);
            return Ok(st);
        }
        self.finish_extra(st)
    }

    #[inline(never)]
    fn finish_extra(&mut self, st: Status) -> Result<Status> {
        let Some(x) = self.x.as_mut() else {
            self.done = Some(st);
            return Ok(st);
        };
        if let (Some(u), Some(data)) = (x.unpack.take(), x.staging.as_ref()) {
            if let Some(cap) = x.cap {
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
        x.staging = None;
        self.done = Some(st);
        Ok(st)
    }

    /// The outcome of the operation if it has completed, which stays for a
    /// wait or test to complete the request (`MPI_Request_get_status`);
    /// `None` while it is in flight. Makes no progress.
    pub fn peek(&self) -> Option<Result<Status>> {
        if let Some(e) = self.x.as_ref().and_then(|x| x.failed.as_ref()) {
            return Some(Err(e.clone()));
        }
        let st = match (self.id, &self.comm) {
            (Some(id), Some(c)) => c.engine().peek_result(id)?,
            _ => return Some(Ok(self.done.unwrap_or_else(Status::empty))),
        };
        // As `finish_extra` reports a message too long for a receive
        // through a staging buffer.
        let cap = self
            .x
            .as_ref()
            .filter(|x| x.unpack.is_some() && x.staging.is_some())
            .and_then(|x| x.cap);
        Some(st.and_then(|st| match cap {
            Some(cap) if st.bytes > cap => Err(Error::Truncated {
                message_bytes: st.bytes,
                buffer_bytes: cap,
                source: st.source,
                tag: st.tag,
            }),
            _ => Ok(st),
        }))
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
        if let Some(e) = self.x.as_mut().and_then(|x| x.failed.take()) {
            return Err(e);
        }
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
    #[inline]
    pub fn wait(&mut self) -> Result<Status> {
        // Complete, with nothing unpacked or failed (an eager send, or a
        // request `wait_all` completed): answered inline, in the caller.
        if self.id.is_none() && self.x.is_none() {
            // Field by field: a copy of the whole `Option<Status>` moved its
            // flag and padding bytes in overlapping pieces, which the
            // processor could not forward to the loads that followed.
            return Ok(match &self.done {
                Some(s) => Status {
                    source: s.source,
                    tag: s.tag,
                    bytes: s.bytes,
                    cancelled: s.cancelled,
                },
                None => Status::empty(),
            });
        }
        self.wait_slow()
    }

    #[track_caller]
    fn wait_slow(&mut self) -> Result<Status> {
        if let Some(e) = self.x.as_mut().and_then(|x| x.failed.take()) {
            return Err(e);
        }
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
            orphans().push(Orphan(self));
            // Relaxed: see ORPHAN_COUNT.
            ORPHAN_COUNT.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether the operation completed when it started, with nothing to wait
    /// for and no error (an eager send): the request can then be dropped.
    #[inline]
    pub fn completed_at_start(&self) -> bool {
        self.id.is_none() && self.x.as_ref().is_none_or(|x| x.failed.is_none())
    }

    /// The status of a completed request, if it has one (see
    /// [`RawRequest::completed_at_start`]).
    #[inline]
    pub fn done_status(&self) -> Option<Status> {
        self.done
    }
}

/// Completes the freed requests that have finished.
#[inline]
fn reap() {
    // Relaxed: see ORPHAN_COUNT.
    if ORPHAN_COUNT.load(Ordering::Relaxed) == 0 {
        return;
    }
    reap_slow();
}

#[cold]
fn reap_slow() {
    let done: Vec<Orphan> = {
        // Held by a caller up this thread's stack (a drop inside a reap):
        // the next call reaps.
        let Ok(mut o) = ORPHANS.try_lock() else {
            return;
        };
        let (done, pending): (Vec<_>, Vec<_>) = o.drain(..).partition(|r| r.0.is_done());
        *o = pending;
        // Relaxed: see ORPHAN_COUNT.
        ORPHAN_COUNT.fetch_sub(done.len(), Ordering::Relaxed);
        done
    };
    for Orphan(mut r) in done {
        if let Err(e) = r.wait() {
            eprintln!("kumi: a request the program freed failed: {e}");
        }
    }
}

/// Waits for every freed request and buffered send still in flight.
#[track_caller]
pub fn wait_orphans() -> Result<()> {
    let all: Vec<Orphan> = orphans().drain(..).collect();
    // Relaxed: see ORPHAN_COUNT.
    ORPHAN_COUNT.fetch_sub(all.len(), Ordering::Relaxed);
    let mut first = Ok(());
    for Orphan(mut r) in all {
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
    orphans()
        .iter()
        .map(|r| {
            r.0.x
                .as_ref()
                .and_then(|x| x.staging.as_ref())
                .map_or(0, |s| s.len())
        })
        .sum()
}

/// Which communicator an operation was on, as the engine knows it (its
/// point-to-point context): what a failed [`Ticket`] reports, for the
/// caller to find the communicator whose error handler handles it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Context(u32);

impl Context {
    /// The context of `comm`'s point-to-point operations.
    pub fn of(comm: &Comm) -> Context {
        Context(ctx(comm))
    }
}

/// The outcome of a [`Ticket`]'s operation: its status, or its error with
/// the [`Context`] of its communicator.
pub type TicketOutcome = std::result::Result<Status, (Error, Context)>;

/// A contiguous send or receive in flight, named by the engine's request
/// id alone: what the C ABI's `MPI_Isend`/`MPI_Irecv` hand out, packed
/// into the `MPI_Request` handle itself ([`Ticket::bits`]), so the library
/// keeps no table entry per message. What a report of a wait on it says
/// (its call, communicator, peer and tag) the engine keeps beside the
/// request. It completes where it lies: [`Ticket::test`] then
/// [`Ticket::finish`], [`Ticket::wait`], or [`wait_packed`] for many at
/// once; [`RawRequest::from_ticket`] makes it a request object. Every
/// method takes one of the rank's communicators to reach the engine (they
/// all share it): any one will do.
///
/// A ticket is spent by `finish`, `wait`, `free` or `from_ticket`. It is
/// `Copy` (a handle is); a spent copy finds its engine slot's generation
/// moved on: [`Ticket::from_bits`] refuses it, and the methods complete it
/// empty, never with another request's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    id: ReqId,
}

impl Ticket {
    /// The ticket in 26 bits, for a handle of 32 that keeps 6 for its kind
    /// (the C library's `MPI_Request`); `None` when it does not fit (the
    /// engine has more than 65536 requests): hold it as a [`RawRequest`]
    /// then ([`RawRequest::from_ticket`]).
    #[inline(always)]
    pub fn bits(self) -> Option<u32> {
        crate::engine::pack_id(self.id)
    }

    /// The ticket whose [`Ticket::bits`] are `bits`, if its operation is
    /// still held by the engine (in flight, or complete and not yet
    /// finished); `None` for bits that name none (a spent or made-up
    /// handle: caught unless its slot was reused a multiple of 1024 times
    /// since).
    #[inline]
    pub fn from_bits(comm: &Comm, bits: u32) -> Option<Ticket> {
        comm.engine().unpack_id(bits).map(|id| Ticket { id })
    }

    /// The wait description of this operation, as [`RawRequest::wait_info`].
    #[track_caller]
    fn wait_info(&self, e: &crate::engine::Engine) -> WaitInfo {
        wait_info_of(e.described(self.id).map(|d| d.what()).into_iter())
    }

    /// Whether the operation has completed (without making progress).
    #[inline]
    pub fn is_done(&self, comm: &Comm) -> bool {
        comm.engine().is_done(self.id)
    }

    /// The outcome of the operation if it has completed, which stays for a
    /// wait or test to spend the ticket (as [`RawRequest::peek`]); `None`
    /// while it is in flight.
    pub fn peek(&self, comm: &Comm) -> Option<TicketOutcome> {
        let mut e = comm.engine();
        let o = e.peek_result(self.id)?;
        let ctx = e.described(self.id).map_or(u32::MAX, |d| d.ctx);
        Some(o.map_err(|x| (x, Context(ctx))))
    }

    /// Makes progress once unless the operation has completed; whether it
    /// has (then [`Ticket::finish`] gives its outcome).
    #[inline]
    pub fn test(&self, comm: &Comm) -> Result<bool> {
        reap();
        let mut e = comm.engine();
        if !e.is_done(self.id) {
            e.progress()?;
        }
        Ok(e.is_done(self.id))
    }

    /// The outcome of the completed operation (see [`Ticket::is_done`]),
    /// which spends the ticket.
    #[inline]
    pub fn finish(self, comm: &Comm) -> TicketOutcome {
        outcome(comm.engine().take_outcome(self.id))
    }

    /// Blocks until the operation completes; its outcome (spends the ticket,
    /// unless the wait itself fails).
    #[track_caller]
    #[inline]
    pub fn wait(self, comm: &Comm) -> TicketOutcome {
        reap();
        let mut e = comm.engine();
        let info = self.wait_info(&e);
        if let Err(x) = e.wait_until(info, |e| e.is_done(self.id)) {
            return Err((x, Context(info.ctx)));
        }
        outcome(e.take_outcome(self.id))
    }

    /// Cancels a receive that has not matched; `true` if it was cancelled
    /// (it then completes, cancelled). A send is never cancelled.
    pub fn cancel(&self, comm: &Comm) -> bool {
        let mut e = comm.engine();
        e.described(self.id).is_some_and(|d| !d.send) && e.cancel_recv(self.id)
    }

    /// Lets go of the operation, which completes on its own (spends the
    /// ticket): as [`RawRequest::free`].
    pub fn free(self, comm: &Comm) {
        RawRequest::from_ticket(comm, self).free();
    }
}

/// Starts receiving into the `cap` bytes at `buf` from `source` with `tag`:
/// [`irecv_contig`], held as a [`Ticket`].
///
/// # Safety
/// As for [`irecv_contig`].
#[inline(always)]
pub unsafe fn irecv_ticket(
    comm: &Comm,
    buf: *mut u8,
    cap: usize,
    source: i32,
    tag: i32,
) -> Result<Ticket> {
    reap();
    let Some(pat) = usual_pattern(comm, source, tag) else {
        // SAFETY: the caller's contract.
        return unsafe { irecv_ticket_checked(comm, buf, cap, source, tag) };
    };
    // SAFETY: the caller's contract.
    unsafe { post_ticket(comm, pat, buf, cap, source, tag) }
}

/// [`irecv_ticket`] of unusual arguments, checked by [`Comm::pattern`].
///
/// # Safety
/// As for [`irecv_contig`].
#[cold]
#[inline(never)]
unsafe fn irecv_ticket_checked(
    comm: &Comm,
    buf: *mut u8,
    cap: usize,
    source: i32,
    tag: i32,
) -> Result<Ticket> {
    let pat = comm.pattern(ctx(comm), source, tag)?;
    // SAFETY: the caller's contract.
    unsafe { post_ticket(comm, pat, buf, cap, source, tag) }
}

/// Posts the receive of [`irecv_ticket`] with its pattern.
///
/// # Safety
/// As for [`irecv_contig`].
#[inline(always)]
unsafe fn post_ticket(
    comm: &Comm,
    pat: Pattern,
    buf: *mut u8,
    cap: usize,
    source: i32,
    tag: i32,
) -> Result<Ticket> {
    let what = Described {
        send: false,
        ctx: pat.ctx,
        peer: source,
        tag,
    };
    let id = comm.engine().post_recv_ticket(pat, buf, cap, what)?;
    Ok(Ticket { id })
}

/// Posts a receive into the `cap` bytes at `buf` from `source` with `tag`:
/// its request id.
///
/// # Safety
/// As for [`irecv_contig`].
#[inline(always)]
unsafe fn post_recv(comm: &Comm, buf: *mut u8, cap: usize, source: i32, tag: i32) -> Result<ReqId> {
    reap();
    let Some(pat) = usual_pattern(comm, source, tag) else {
        // SAFETY: the caller's contract.
        return unsafe { post_recv_checked(comm, buf, cap, source, tag) };
    };
    comm.engine().post_recv(pat, buf, cap)
}

/// [`post_recv`] of unusual arguments, checked by [`Comm::pattern`].
/// (The twin of [`irecv_ticket_checked`]: one helper for both, generic over
/// the posting or returning the pattern, lengthened both receives' usual
/// paths, counted with `scripts/count-instructions.sh --path rate`:
/// docs/BENCHMARKS.md, session 19.)
///
/// # Safety
/// As for [`irecv_contig`].
#[cold]
#[inline(never)]
unsafe fn post_recv_checked(
    comm: &Comm,
    buf: *mut u8,
    cap: usize,
    source: i32,
    tag: i32,
) -> Result<ReqId> {
    let pat = comm.pattern(ctx(comm), source, tag)?;
    comm.engine().post_recv(pat, buf, cap)
}

/// Starts sending the `len` bytes at `buf` to `dest` with `tag`
/// (synchronously if `sync`): [`isend_contig`] held as a [`Ticket`], or
/// `None` when the send completed as it started (an eager send).
///
/// # Safety
/// As for [`isend_contig`].
#[inline(always)]
pub unsafe fn isend_ticket(
    comm: &Comm,
    buf: *const u8,
    len: usize,
    dest: i32,
    tag: i32,
    sync: bool,
) -> Result<Option<Ticket>> {
    // SAFETY: the caller's contract.
    let Some((id, ctx)) = (unsafe { send_start(comm, buf, len, dest, tag, sync)? }) else {
        return Ok(None);
    };
    comm.engine().describe(
        id,
        Described {
            send: true,
            ctx,
            peer: dest,
            tag,
        },
    );
    Ok(Some(Ticket { id }))
}

/// Starts sending the `len` bytes at `buf` to `dest` with `tag`
/// (synchronously if `sync`): the send's request id and its
/// communicator's context, or `None` when the send completed as it started.
///
/// # Safety
/// As for [`isend_contig`].
#[inline(always)]
unsafe fn send_start(
    comm: &Comm,
    buf: *const u8,
    len: usize,
    dest: i32,
    tag: i32,
    sync: bool,
) -> Result<Option<(ReqId, u32)>> {
    reap();
    check_tag(tag)?;
    let peer = comm.check_dest(dest)?;
    let ctx = ctx(comm);
    let env = Envelope {
        ctx,
        src: comm.rank() as u32,
        tag,
    };
    let id = comm.engine().start_send(env, peer, buf, len, sync)?;
    Ok(id.map(|id| (id, ctx)))
}

/// An engine outcome with its context made a [`TicketOutcome`].
#[inline(always)]
fn outcome(o: std::result::Result<Status, (Error, u32)>) -> TicketOutcome {
    o.map_err(|(e, c)| (e, Context(c)))
}

/// Blocks until every ticket packed into `handles` has completed (`bits`
/// gives a handle's [`Ticket::bits`], or `None` for a handle that is no
/// ticket: skipped), then hands each outcome to `each` with the handle's
/// index, in order, and overwrites the handle with `spent`, all with one
/// hold of the engine ([`Packed::Spent`]), unless one of them names no
/// operation. If the wait itself fails (the engine, not an operation), none
/// is spent.
#[track_caller]
pub fn wait_packed<H: Copy>(
    comm: &Comm,
    handles: &mut [H],
    bits: impl Fn(H) -> Option<u32>,
    spent: H,
    mut each: impl FnMut(usize, TicketOutcome),
) -> Result<Packed> {
    use crate::engine::Engine;
    reap();
    let mut e = comm.engine();
    let mut next = {
        let handles = &*handles;
        // From `from`, past the handles known to be done (a done one stays
        // done): the first one not done, or `Err(i)` at a ticket that names
        // no operation (the checks that no ticket is stale, made as the
        // handles are looked at anyway).
        let pending = |e: &mut Engine, from: usize| -> std::result::Result<usize, usize> {
            let mut i = from;
            while let Some(&h) = handles.get(i) {
                if let Some(b) = bits(h) {
                    match e.unpack_ticket(b) {
                        None => return Err(i),
                        Some((_, false, _)) => return Ok(i),
                        Some(_) => {}
                    }
                }
                i += 1;
            }
            Ok(i)
        };
        let mut next = match pending(&mut e, 0) {
            Ok(n) => n,
            Err(i) => return Ok(Packed::NoOperation(i)),
        };
        if next < handles.len() {
            let info = tickets_wait_info(&e, &handles[next..], &bits);
            // A ticket that names no operation ends the wait (which spends
            // nothing) before it could hang on it.
            let mut stale = None;
            e.wait_until(info, |e| match pending(e, next) {
                Ok(n) => {
                    next = n;
                    n == handles.len()
                }
                Err(i) => {
                    stale = Some(i);
                    true
                }
            })?;
            if let Some(i) = stale {
                return Ok(Packed::NoOperation(i));
            }
        }
        next
    };
    debug_assert_eq!(next, handles.len());
    next = 0;
    let mut result = Packed::Spent;
    for h in handles.iter_mut() {
        if let Some(b) = bits(*h) {
            match e.unpack_id(b) {
                Some(id) => each(next, outcome(e.take_outcome(id))),
                None if result == Packed::Spent => result = Packed::Repeated(next),
                None => {}
            }
            *h = spent;
        }
        next += 1;
    }
    Ok(result)
}

/// What a wait on the tickets among `handles` is blocked in, by those not
/// done yet ([`wait_info_of`]); one lookup per ticket.
#[track_caller]
fn tickets_wait_info<H: Copy>(
    e: &crate::engine::Engine,
    handles: &[H],
    bits: impl Fn(H) -> Option<u32>,
) -> WaitInfo {
    wait_info_of(
        handles
            .iter()
            .filter_map(|&h| match e.unpack_ticket(bits(h)?)? {
                (_, false, d) => Some(d.what()),
                _ => None,
            }),
    )
}

/// What a wait on operations is blocked in, from what each of those not
/// done waits for (call, context, peer, tag): one operation's own ("MPI_Recv
/// from rank 1, tag 7"); for several, the peer they all have on one
/// communicator (whom the deadlock detector then knows the rank waits for);
/// else a plain wait.
#[track_caller]
#[inline(always)]
fn wait_info_of(mut open: impl Iterator<Item = (Call, u32, i32, i32)>) -> WaitInfo {
    let plain = WaitInfo::plain(Call::Wait);
    let Some((call, ctx, peer, tag)) = open.next() else {
        return plain;
    };
    let mut several = false;
    for (_, c, p, _) in open {
        if (c, p) != (ctx, peer) {
            return plain;
        }
        several = true;
    }
    match (several, peer >= 0) {
        (false, _) => WaitInfo {
            call,
            ctx,
            peer,
            tag,
            ..plain
        },
        (true, true) => WaitInfo { ctx, peer, ..plain },
        (true, false) => plain,
    }
}

/// How [`wait_packed`] went when the engine did not fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packed {
    /// Every ticket completed, and `each` had its outcome.
    Spent,
    /// Handle `i` is a ticket that names no operation (spent before, or made
    /// up): nothing was done.
    NoOperation(usize),
    /// Handle `i` repeats a ticket before it in the handles, which was
    /// spent there; the others were spent too.
    Repeated(usize),
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
    let len = dt.packed_size(count);
    if mode == SendMode::Buffered || !dt.is_contiguous() {
        let mut v = vec![0u8; len];
        // SAFETY: the caller's contract covers the layout's bytes.
        unsafe { dt.pack(buf, count, &mut v) };
        return start_send(comm, v.as_ptr(), len, Some(v), dest, tag, mode);
    }
    // SAFETY: contiguous: the data starts at the element's lower bound; the
    // caller's contract covers these `len` bytes until completion.
    unsafe { isend_contig(comm, buf.offset(dt.lb()), len, dest, tag, mode) }
}

/// Starts sending the `len` bytes at `buf` to `dest` with `tag`: [`isend`] for
/// a contiguous layout, without a datatype.
///
/// # Safety
/// `buf..buf + len` must be readable and stay unmodified until the request
/// completes (for [`SendMode::Buffered`], only until this call returns).
#[inline(always)]
pub unsafe fn isend_contig(
    comm: &Comm,
    buf: *const u8,
    len: usize,
    dest: i32,
    tag: i32,
    mode: SendMode,
) -> Result<RawRequest> {
    if mode == SendMode::Buffered {
        // SAFETY: the caller's contract: `len` readable bytes at `buf`.
        let v = unsafe { slice_or_empty(buf, len) }.to_vec();
        return start_send(comm, v.as_ptr(), len, Some(v), dest, tag, mode);
    }
    start_send(comm, buf, len, None, dest, tag, mode)
}

/// Starts a send of `len` bytes at `ptr` (which `staging` owns if it is set).
///
/// Inlined (with [`isend_contig`]) into its callers in other crates: the
/// request it makes is written field by field, and a caller that copied it
/// out of the returned value at once read it in wider words than it was
/// written in, which the processor cannot forward from its stores and waits
/// for (a fifth of the C ABI's `MPI_Isend`). Inlined, the request is built
/// where it goes.
#[inline(always)]
fn start_send(
    comm: &Comm,
    ptr: *const u8,
    len: usize,
    staging: Option<Vec<u8>>,
    dest: i32,
    tag: i32,
    mode: SendMode,
) -> Result<RawRequest> {
    // SAFETY: the callers' contracts: `ptr..ptr + len` readable until the
    // send completes (`staging` owns it when set).
    Ok(
        match unsafe { send_start(comm, ptr, len, dest, tag, mode == SendMode::Sync)? } {
            Some((id, _)) => RawRequest {
                comm: Some(comm.clone()),
                id: Some(id),
                done: None,
                what: (Call::Send, dest, tag),
                x: extra(staging, None),
            },
            // A send complete at start (eager) needs no communicator to wait on.
            None => RawRequest {
                comm: None,
                id: None,
                done: Some(Status::empty()),
                what: (Call::Send, dest, tag),
                x: None,
            },
        },
    )
}

/// Sends the `len` bytes at `buf` to `dest` with `tag` and returns when the
/// buffer may be reused: [`isend_contig`] and a wait, with one hold of the
/// engine (no request object).
///
/// # Safety
/// `buf..buf + len` must be readable for the duration of the call.
// Inlined: a thin layer between `MPI_Send` and `Comm::send_on`, whose
// call frame cost more than its body (scripts/count-instructions.sh).
#[track_caller]
#[inline(always)]
pub unsafe fn send_contig(
    comm: &Comm,
    buf: *const u8,
    len: usize,
    dest: i32,
    tag: i32,
    sync: bool,
) -> Result<()> {
    reap();
    check_tag(tag)?;
    // SAFETY: the caller's contract.
    let bytes = unsafe { slice_or_empty(buf, len) };
    comm.send_on(ctx(comm), bytes, dest, tag, sync, Location::caller())
}

/// Receives into the `cap` bytes at `buf` from `source` with `tag` (as
/// [`irecv`]) and returns when the message is there: a receive and a wait
/// with one hold of the engine (no request object).
///
/// # Safety
/// `buf..buf + cap` must be writable, and not otherwise accessed, for the
/// duration of the call.
// Inlined, as `send_contig`.
#[track_caller]
#[inline(always)]
pub unsafe fn recv_contig(
    comm: &Comm,
    buf: *mut u8,
    cap: usize,
    source: i32,
    tag: i32,
) -> Result<Status> {
    reap();
    let bytes: &mut [u8] = if cap == 0 {
        &mut []
    } else {
        // SAFETY: the caller's contract: `cap` writable bytes at `buf`.
        unsafe { std::slice::from_raw_parts_mut(buf, cap) }
    };
    comm.recv_on(
        ctx(comm),
        bytes,
        source,
        tag,
        Call::Recv,
        Location::caller(),
    )
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
    let cap = dt.packed_size(count);
    if dt.is_contiguous() {
        // SAFETY: contiguous: the data starts at the element's lower bound; the
        // caller's contract covers these `cap` bytes until completion.
        return unsafe { irecv_contig(comm, buf.offset(dt.lb()), cap, source, tag) };
    }
    let mut staging = vec![0u8; cap];
    let ptr = staging.as_mut_ptr();
    let unpack = Unpack {
        base: buf,
        count,
        dt: dt.clone(),
    };
    start_recv(comm, ptr, cap, Some(staging), Some(unpack), source, tag)
}

/// Starts receiving into the `cap` bytes at `buf`: [`irecv`] for a contiguous
/// layout, without a datatype.
///
/// # Safety
/// `buf..buf + cap` must be writable, and otherwise untouched, until the
/// request completes.
#[inline(always)]
pub unsafe fn irecv_contig(
    comm: &Comm,
    buf: *mut u8,
    cap: usize,
    source: i32,
    tag: i32,
) -> Result<RawRequest> {
    start_recv(comm, buf, cap, None, None, source, tag)
}

/// Posts a receive into the `cap` bytes at `ptr` (which `staging` owns if it
/// is set). Inlined into callers in other crates, for the reason
/// [`start_send`] is.
#[inline(always)]
fn start_recv(
    comm: &Comm,
    ptr: *mut u8,
    cap: usize,
    staging: Option<Vec<u8>>,
    unpack: Option<Unpack>,
    source: i32,
    tag: i32,
) -> Result<RawRequest> {
    // SAFETY: the callers' contracts: `ptr..ptr + cap` writable and
    // otherwise untouched until the receive completes (`staging` owns it
    // when set).
    let id = unsafe { post_recv(comm, ptr, cap, source, tag)? };
    Ok(RawRequest {
        comm: Some(comm.clone()),
        id: Some(id),
        done: None,
        what: (Call::Recv, source, tag),
        x: extra(staging, unpack),
    })
}

/// Blocks until every request of `reqs` has completed, holding the engine
/// once for all of them; each then answers [`RawRequest::wait`] at once with
/// its own status or error. Requests of one rank share its engine.
#[track_caller]
pub fn wait_all(reqs: &mut [&mut RawRequest]) -> Result<()> {
    reap();
    let Some(comm) = reqs.iter().find_map(|r| r.id.and(r.comm.clone())) else {
        return Ok(());
    };
    let info = wait_info_of(
        reqs.iter()
            .filter(|r| r.id.is_some())
            .map(|r| r.what_with(&comm)),
    );
    let mut e = comm.engine();
    // Requests before `next` are known to be done (a done request stays done).
    let mut next = 0;
    e.wait_until(info, |e| {
        while let Some(r) = reqs.get(next) {
            if r.id.is_some_and(|id| !e.is_done(id)) {
                return false;
            }
            next += 1;
        }
        true
    })?;
    for r in reqs.iter_mut() {
        if let Some(id) = r.id.take() {
            let res = e.take_result(id);
            if let Err(err) = r.finish(res) {
                r.x.get_or_insert_with(Box::default).failed = Some(err);
            }
        }
    }
    Ok(())
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

/// Makes progress once on `comm`'s engine (and completes freed requests).
pub fn progress(comm: &Comm) -> Result<()> {
    comm.engine().progress()?;
    reap();
    Ok(())
}

/// Blocks until at least one of `reqs` and `tickets` has completed (one
/// already complete counts), on the engine that `comm` (any communicator of
/// the rank) reaches. Does not consume any.
#[track_caller]
pub fn wait_any_done(reqs: &[&RawRequest], tickets: &[Ticket], comm: &Comm) -> Result<()> {
    if reqs.iter().any(|r| r.id.is_none()) {
        return Ok(());
    }
    let ids: Vec<ReqId> = reqs
        .iter()
        .filter_map(|r| r.id)
        .chain(tickets.iter().map(|t| t.id))
        .collect();
    if ids.is_empty() {
        return Ok(());
    }
    let mut e = comm.engine();
    let ticket_whats: Vec<_> = tickets
        .iter()
        .filter_map(|t| e.described(t.id).map(|d| d.what()))
        .collect();
    let info = wait_info_of(reqs.iter().map(|r| r.what_with(comm)).chain(ticket_whats));
    let r = e.wait_until(info, |e| ids.iter().any(|&id| e.is_done(id)));
    drop(e);
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
        let x = self.req.x.get_or_insert_with(Box::default);
        x.unpack = Some(Unpack {
            base: buf,
            count,
            dt: dt.clone(),
        });
        x.cap = Some(dt.packed_size(count));
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
        what: (Call::Recv, st.source, st.tag),
        x: extra(Some(staging), None),
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

/// An id of the calling thread, unique among the live threads of the
/// process: the thread pointer, read from its register (what `pthread_self`
/// returns, without the call). Used to tell the thread that initialized kumi
/// from others on every call.
#[inline]
pub fn thread_id() -> usize {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let tp: usize;
        // SAFETY: on x86-64 Linux %fs is the thread pointer, and the word at
        // %fs:0 is the thread pointer itself (TLS ABI, variant II); reading
        // it has no side effects.
        unsafe {
            std::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp,
                options(nostack, readonly, preserves_flags, pure))
        };
        tp
    }
    #[cfg(all(target_arch = "aarch64", target_os = "linux"))]
    {
        let tp: usize;
        // SAFETY: reads the thread pointer register; no side effects.
        unsafe {
            std::arch::asm!("mrs {}, tpidr_el0", out(reg) tp,
                options(nostack, nomem, preserves_flags, pure))
        };
        tp
    }
    #[cfg(not(all(
        any(target_arch = "x86_64", target_arch = "aarch64"),
        target_os = "linux"
    )))]
    {
        // SAFETY: pthread_self has no preconditions and cannot fail.
        unsafe { libc::pthread_self() as usize }
    }
}
