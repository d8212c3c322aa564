//! Point-to-point: blocking, nonblocking, persistent, buffered, probes, matched
//! probes, and the wait/test family, mapped onto [`kumi::raw`].
//!
//! The wait/test family also completes nonblocking collectives
//! ([`ReqEntry::Coll`]): a single wait blocks in the runtime's own wait; a
//! wait for any/some of a set that holds a collective polls (each test makes
//! progress), since the runtime's wait-for-any only knows point-to-point
//! requests.

use crate::consts::*;
use crate::state::{
    self, builtin_type, count, empty_status, out, put_status, put_status_one, read, slice_mut, st,
    st_ref, status_bytes, status_of, ticket_bits, wants, CollPending, CommEntry, ReqEntry, Slab,
    State,
};
use crate::{err, set_err_comm, MPI_Status, MpiErr, R};
use kumi::datatype::Datatype;
use kumi::raw::{self, Context, RawPersistent, RawRequest, SendMode, TicketOutcome};
use kumi::{Comm, Status};
use std::cell::RefMut;
use std::ffi::{c_int, c_void};

/// A peer argument: `None` for `MPI_PROC_NULL`, `kumi::ANY_SOURCE` for
/// `MPI_ANY_SOURCE` (receives only).
///
/// This and the other checks every call makes are inlined, with their
/// errors out of line (see `state::st` for why).
#[inline(always)]
fn peer(c: &Comm, r: c_int, any_ok: bool) -> R<Option<i32>> {
    match r {
        MPI_PROC_NULL => Ok(None),
        MPI_ANY_SOURCE if any_ok => Ok(Some(kumi::ANY_SOURCE)),
        r if r >= 0 && (r as usize) < c.size() => Ok(Some(r)),
        r => no_peer(c, r, any_ok),
    }
}

#[cold]
#[inline(never)]
fn no_peer(c: &Comm, r: c_int, any_ok: bool) -> R<Option<i32>> {
    err(
        MPI_ERR_RANK,
        format!(
            "rank {r} does not exist in this communicator of {} ranks (valid: 0 to {}{})",
            c.size(),
            c.size() - 1,
            if any_ok {
                ", MPI_ANY_SOURCE or MPI_PROC_NULL"
            } else {
                " or MPI_PROC_NULL"
            }
        ),
    )
}

/// Whether `tag` may be a send's (0 to `MPI_TAG_UB`).
#[inline(always)]
fn send_tag_ok(tag: c_int) -> bool {
    (0..=kumi::TAG_UB).contains(&tag)
}

/// Whether `tag` may be a receive's (a send's, or `MPI_ANY_TAG`).
#[inline(always)]
fn recv_tag_ok(tag: c_int) -> bool {
    tag == MPI_ANY_TAG || send_tag_ok(tag)
}

#[inline(always)]
fn send_tag(tag: c_int) -> R<()> {
    if !send_tag_ok(tag) {
        return bad_tag(tag, false);
    }
    Ok(())
}

#[inline(always)]
fn recv_tag(tag: c_int) -> R<()> {
    if !recv_tag_ok(tag) {
        return bad_tag(tag, true);
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn bad_tag(tag: c_int, recv: bool) -> R<()> {
    if recv {
        err(
            MPI_ERR_TAG,
            format!(
                "tag {tag} is out of range: 0 to MPI_TAG_UB ({}) or MPI_ANY_TAG",
                kumi::TAG_UB
            ),
        )
    } else {
        err(
            MPI_ERR_TAG,
            format!(
                "tag {tag} is out of range: a send's tag goes from 0 to MPI_TAG_UB ({})",
                kumi::TAG_UB
            ),
        )
    }
}

/// Refuses a NULL buffer for data, unless the datatype's addresses are
/// absolute (NULL is `MPI_BOTTOM`).
pub(crate) fn check_buf(buf: *const c_void, n: usize, d: &Datatype) -> R<()> {
    if buf.is_null() && n > 0 && d.size() > 0 && d.true_lb() == 0 {
        return err(
            MPI_ERR_BUFFER,
            format!("the buffer is NULL but the count is {n}"),
        );
    }
    Ok(())
}

/// The status of an operation with `MPI_PROC_NULL`.
/// Why a nonblocking collective cannot be cancelled.
const NO_COLL_CANCEL: &str = "a nonblocking collective (or MPI_Isendrecv) cannot be cancelled in kumi (the standard makes MPI_Cancel on a collective erroneous); complete it with MPI_Wait or MPI_Test";

fn proc_null() -> Status {
    Status {
        source: MPI_PROC_NULL,
        tag: MPI_ANY_TAG,
        bytes: 0,
        cancelled: false,
    }
}

/// Looks up a communicator and datatype, releasing the state afterwards.
fn lookup(comm: c_int, dt: c_int) -> R<(Comm, Datatype)> {
    let mut s = st()?;
    let c = s.comm(comm)?;
    Ok((c, s.dtype(dt)?))
}

/// The bytes of `n` elements of `dt` if it is a predefined type: its layout is
/// contiguous and MPICH's handle says its size (`0x4c00SSII`, size in bits
/// 8-15; see `state::builtin_type`, which builds the same layout), so the
/// buffer goes to the runtime as bytes, without a datatype object. `None` for
/// any other type (checked through its datatype).
#[inline(always)]
pub(crate) fn contig_bytes(buf: *const c_void, n: usize, dt: c_int) -> R<Option<usize>> {
    let Some(size) = predefined_size(dt) else {
        return Ok(None);
    };
    match n.checked_mul(size) {
        Some(len) if !buf.is_null() || len == 0 => Ok(Some(len)),
        _ => bad_contig(n, size),
    }
}

/// The size of an element of `dt` if it is a predefined type (see
/// [`contig_bytes`]), from its handle alone.
#[inline(always)]
pub(crate) fn predefined_size(dt: c_int) -> Option<usize> {
    let u = dt as u32;
    (u & 0xff00_0000 == 0x4c00_0000).then_some(((u >> 8) & 0xff) as usize)
}

#[cold]
#[inline(never)]
fn bad_contig(n: usize, size: usize) -> R<Option<usize>> {
    if n.checked_mul(size).is_none() {
        return err(
            MPI_ERR_COUNT,
            format!("{n} elements of {size} bytes do not fit in memory"),
        );
    }
    err(
        MPI_ERR_BUFFER,
        format!("the buffer is NULL but the count is {n}"),
    )
}

/// Starts a send; a completed request for `MPI_PROC_NULL`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn start_send(
    s: &State,
    buf: *const c_void,
    cnt: c_int,
    dt: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
    mode: SendMode,
) -> R<RawRequest> {
    let c = s.comm_ref(comm)?;
    let n = count(cnt)?;
    send_tag(tag)?;
    let Some(dest) = peer(c, dest, false)? else {
        return Ok(RawRequest::completed(proc_null()));
    };
    if mode != SendMode::Buffered {
        if let Some(len) = contig_bytes(buf, n, dt)? {
            // SAFETY: the MPI standard makes the caller keep `buf` valid until
            // the send completes (for a blocking send, until its caller returns).
            return Ok(unsafe { raw::isend_contig(c, buf as *const u8, len, dest, tag, mode)? });
        }
    }
    let d = s.dtype(dt)?;
    check_buf(buf, n, &d)?;
    if mode == SendMode::Buffered {
        let attached = s.bsend.map_or(0, |b| b.1 as usize);
        let need = d.packed_size(n) + MPI_BSEND_OVERHEAD as usize;
        let used = raw::orphan_bytes();
        if used + need > attached {
            return err(
                MPI_ERR_BUFFER,
                format!(
                    "a buffered send of {need} bytes (with MPI_BSEND_OVERHEAD) does not fit the attached \
                     buffer: {attached} bytes attached, {used} in use (attach one with MPI_Buffer_attach)"
                ),
            );
        }
    }
    // SAFETY: as above.
    Ok(unsafe { raw::isend(c, buf as *const u8, n, &d, dest, tag, mode)? })
}

#[inline(always)]
fn start_recv(
    s: &State,
    buf: *mut c_void,
    cnt: c_int,
    dt: c_int,
    source: c_int,
    tag: c_int,
    comm: c_int,
) -> R<RawRequest> {
    let c = s.comm_ref(comm)?;
    let n = count(cnt)?;
    recv_tag(tag)?;
    let Some(src) = peer(c, source, true)? else {
        return Ok(RawRequest::completed(proc_null()));
    };
    if let Some(cap) = contig_bytes(buf, n, dt)? {
        // SAFETY: the caller keeps `buf` valid and untouched until the receive
        // completes, as the standard requires.
        return Ok(unsafe { raw::irecv_contig(c, buf as *mut u8, cap, src, tag)? });
    }
    let d = s.dtype(dt)?;
    check_buf(buf, n, &d)?;
    // SAFETY: as above.
    Ok(unsafe { raw::irecv(c, buf as *mut u8, n, &d, src, tag)? })
}

/// The arguments of a send or receive on the fast path, if they are those
/// of the usual case (a predefined type, a non-negative count, a buffer,
/// a rank of the communicator, or `MPI_ANY_SOURCE` if `any_ok` (a
/// receive), a valid tag): the communicator, the peer and the buffer's
/// bytes. `None` for anything else, errors and `MPI_PROC_NULL` included:
/// the general path ([`start_send`], [`start_recv`], the blocking calls'
/// own) checks each argument in turn and says what was wrong. Sets the
/// communicator whose handler takes the call's errors.
///
/// Each test is one comparison, none with an error of its own to build
/// (the fast path of `MPI_Send` and `MPI_Recv`, scripts/count-instructions.sh):
/// a NULL buffer (of zero elements, or an error) takes the general path;
/// the length cannot overflow (a `c_int` count of at most 255-byte elements).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn contig_args(
    s: &State,
    buf: *const c_void,
    cnt: c_int,
    dt: c_int,
    rank: c_int,
    any_ok: bool,
    tag_ok: bool,
    comm: c_int,
) -> Option<(&Comm, i32, usize)> {
    let u = dt as u32;
    if u & 0xff00_0000 != 0x4c00_0000 || cnt < 0 || !tag_ok || buf.is_null() {
        return None;
    }
    let c = &s.comms.get(&comm)?.comm;
    let p = if (rank as u32 as usize) < c.size() {
        rank
    } else if any_ok && rank == MPI_ANY_SOURCE {
        kumi::ANY_SOURCE
    } else {
        return None;
    };
    set_err_comm(comm);
    Some((c, p, cnt as usize * ((u >> 8) & 0xff) as usize))
}

/// [`contig_args`] of a nonblocking call (a request to write), on the
/// state read through [`st_ref`] (no `RefCell` flag to take and give back:
/// two stores a call fewer, which a stream of calls feels). `None` for any
/// other call, and when the caller may not use the state now (the general
/// path's `st` says why).
///
/// # Safety
/// As for [`st_ref`]: the caller borrows the state (`st`) only after its
/// last use of the communicator returned.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn nb_args(
    buf: *const c_void,
    cnt: c_int,
    dt: c_int,
    rank: c_int,
    any_ok: bool,
    tag_ok: bool,
    comm: c_int,
    request: *mut c_int,
) -> Option<(&'static Comm, i32, usize)> {
    if request.is_null() {
        return None;
    }
    // SAFETY: the caller's contract.
    let s = unsafe { st_ref() }?;
    contig_args(s, buf, cnt, dt, rank, any_ok, tag_ok, comm)
}

/// `MPI_Irecv` of a predefined type from a rank (the usual case): the
/// receive's handle is its [`raw::Ticket`] (no table entry). `false` for
/// any other receive, left to [`start_recv`], which also reports errors.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn irecv_in_table(
    buf: *mut c_void,
    cnt: c_int,
    dt: c_int,
    source: c_int,
    tag: c_int,
    comm: c_int,
    request: *mut c_int,
) -> R<bool> {
    // SAFETY: the state is borrowed only by `ticket_handle`, after the last
    // use of `c`: the runtime's receive calls back into nothing of this
    // library.
    let args = unsafe { nb_args(buf, cnt, dt, source, true, recv_tag_ok(tag), comm, request) };
    let Some((c, src, cap)) = args else {
        return Ok(false);
    };
    // SAFETY: the caller keeps `buf` valid and untouched until the receive
    // completes, as the standard requires.
    let t = unsafe { raw::irecv_ticket(c, buf as *mut u8, cap, src, tag)? };
    out(request, "request", ticket_handle(t, comm)?)?;
    Ok(true)
}

/// `MPI_Isend` (or `MPI_Issend` if `sync`) of a predefined type to a rank
/// (the usual case): a send complete as it started is [`DONE_SEND`], one in
/// flight is its [`raw::Ticket`] (no table entry). `false` for any
/// other send, left to [`start_send`], which also reports errors.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn isend_in_table(
    buf: *const c_void,
    cnt: c_int,
    dt: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
    request: *mut c_int,
    sync: bool,
) -> R<bool> {
    // SAFETY: as in `irecv_in_table` (the runtime's send calls back into
    // nothing of this library either).
    let args = unsafe { nb_args(buf, cnt, dt, dest, false, send_tag_ok(tag), comm, request) };
    let Some((c, to, len)) = args else {
        return Ok(false);
    };
    // SAFETY: the MPI standard makes the caller keep `buf` valid and
    // unmodified until the send completes.
    let h = match unsafe { raw::isend_ticket(c, buf as *const u8, len, to, tag, sync)? } {
        None => DONE_SEND,
        Some(t) => ticket_handle(t, comm)?,
    };
    out(request, "request", h)?;
    Ok(true)
}

/// The handle of ticket `t` on communicator `comm`: the ticket itself, or,
/// rarely, a table entry (for which the state is borrowed).
#[inline(always)]
fn ticket_handle(t: raw::Ticket, comm: c_int) -> R<c_int> {
    match t.bits() {
        Some(b) => Ok(TICKET_REQUEST | b as c_int),
        None => st()?.ticket_entry(t, comm),
    }
}

/// `one_or_threads!(fn name => f(args))` makes `name(args)`, which calls
/// `f::<false>` for the owner thread of `MPI_THREAD_FUNNELED` and, out of
/// line, `f::<THREADS>` for the other thread levels: the first form then
/// holds no trace of threads (the test for the owner is the one every call
/// makes; both forms laid out in one function cost the first 15
/// instructions per call: docs/BENCHMARKS.md, session 27).
macro_rules! one_or_threads {
    ($(#[$m:meta])* fn $name:ident => $f:ident($($a:ident: $t:ty),* $(,)?)) => {
        $(#[$m])*
        #[allow(clippy::too_many_arguments)]
        #[inline(always)]
        fn $name($($a: $t),*) -> R<()> {
            #[cold]
            #[inline(never)]
            #[allow(clippy::too_many_arguments)]
            fn threads($($a: $t),*) -> R<()> {
                let s = st()?;
                if state::multiple() {
                    $f::<true>(s, $($a),*)
                } else {
                    $f::<false>(s, $($a),*)
                }
            }
            match state::owner() {
                Some(o) => $f::<false>(o.st()?, $($a),*),
                None => threads($($a),*),
            }
        }
    };
}

one_or_threads! {
    /// [`send_blocking`] for the calling thread's level.
    fn send_one_or_threads => send_blocking(
        buf: *const c_void, cnt: c_int, dt: c_int, dest: c_int, tag: c_int, comm: c_int, mode: SendMode,
    )
}

one_or_threads! {
    /// [`recv_blocking`] for the calling thread's level.
    fn recv_one_or_threads => recv_blocking(
        buf: *mut c_void, cnt: c_int, dt: c_int, source: c_int, tag: c_int, comm: c_int, status: *mut MPI_Status,
    )
}

/// `MPI_Send` and its modes: a predefined type goes to the runtime's blocking
/// send directly; the state is released before the call can block.
/// `THREADS`: whether several threads may call.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn send_blocking<const THREADS: bool>(
    s: RefMut<'static, State>,
    buf: *const c_void,
    cnt: c_int,
    dt: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
    mode: SendMode,
) -> R<()> {
    let tag_ok = send_tag_ok(tag);
    if let Some((c, to, len)) = contig_args(&s, buf, cnt, dt, dest, false, tag_ok, comm) {
        // SAFETY: the caller keeps `buf` valid until this call returns.
        blocking_on!(if THREADS, s, c, unsafe {
            raw::send_contig(c, buf as *const u8, len, to, tag, mode == SendMode::Sync)
        })?;
        return Ok(());
    }
    let r = start_send(&s, buf, cnt, dt, dest, tag, comm, mode)?;
    drop(s);
    blocking(r, std::ptr::null_mut())
}

/// `MPI_Recv`: a predefined type goes to the runtime's blocking receive
/// directly; the state is released before the call blocks. `THREADS` as
/// for [`send_blocking`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn recv_blocking<const THREADS: bool>(
    s: RefMut<'static, State>,
    buf: *mut c_void,
    cnt: c_int,
    dt: c_int,
    source: c_int,
    tag: c_int,
    comm: c_int,
    status: *mut MPI_Status,
) -> R<()> {
    let tag_ok = recv_tag_ok(tag);
    if let Some((c, src, cap)) = contig_args(&s, buf, cnt, dt, source, true, tag_ok, comm) {
        // SAFETY: the caller keeps `buf` valid until this call returns.
        let r = blocking_on!(if THREADS, s, c, unsafe {
            raw::recv_contig(c, buf as *mut u8, cap, src, tag)
        });
        return match r {
            // Nothing to write (MPI_STATUS_IGNORE): no status conversion.
            Ok(_) if !wants(status) => Ok(()),
            r => {
                let (stt, e) = outcome(r);
                put_status_one(status, stt);
                e.map_or(Ok(()), Err)
            }
        };
    }
    let r = start_recv(&s, buf, cnt, dt, source, tag, comm)?;
    drop(s);
    blocking(r, status)
}

/// Turns the outcome of a completed operation into a status and an error.
#[inline(always)]
fn outcome(r: kumi::Result<Status>) -> (MPI_Status, Option<MpiErr>) {
    match r {
        Ok(s) => (status_of(&s, MPI_SUCCESS), None),
        Err(e) => {
            let mut st = empty_status();
            if let kumi::Error::Truncated {
                buffer_bytes,
                source,
                tag,
                ..
            } = &e
            {
                st = status_of(
                    &Status {
                        source: *source,
                        tag: *tag,
                        bytes: *buffer_bytes,
                        cancelled: false,
                    },
                    MPI_ERR_TRUNCATE,
                );
            }
            let e = MpiErr::from(e);
            st.MPI_ERROR = e.class;
            (st, Some(e))
        }
    }
}

fn blocking(mut r: RawRequest, status: *mut MPI_Status) -> R<()> {
    let (s, e) = outcome(r.wait());
    put_status_one(status, s);
    e.map_or(Ok(()), Err)
}

/// The handle of every nonblocking send that completed when it started (an
/// eager send, the common case for small messages): such a request needs no
/// table entry, so `MPI_Isend` + `MPI_Wait` cost no insertion and removal.
/// It lies in MPICH's built-in request range, where no created request goes.
pub(crate) const DONE_SEND: c_int = MPI_REQUEST_NULL | 1;

/// The status a [`DONE_SEND`] request reports (that of any completed send).
fn done_send_status() -> MPI_Status {
    status_of(&SEND_DONE, MPI_SUCCESS)
}

const SEND_DONE: Status = Status {
    source: -1,
    tag: -1,
    bytes: 0,
    cancelled: false,
};

/// Registers a nonblocking send; one complete at start with a send's status
/// (not `MPI_PROC_NULL`'s) becomes [`DONE_SEND`], with no table entry.
#[inline(always)]
fn register_send(s: &mut State, r: RawRequest, comm: c_int, request: *mut c_int) -> R<()> {
    if r.completed_at_start() && r.done_status() == Some(SEND_DONE) {
        return out(request, "request", DONE_SEND);
    }
    register(s, r, comm, request)
}

#[inline(always)]
fn register(s: &mut State, r: RawRequest, comm: c_int, request: *mut c_int) -> R<()> {
    if request.is_null() {
        return err(MPI_ERR_ARG, "the output argument `request` is NULL");
    }
    let h = s.new_request(ReqEntry::Active(r), comm);
    out(request, "request", h)
}

/// `MPI_Waitall` when every request is a ticket, a send completed at its
/// start or null (the usual case): one wait in the engine for all of them.
/// `None` when another kind of request is among them (nothing is done
/// then).
fn wait_all_tickets(
    s: &mut State,
    hs: &mut [c_int],
    statuses: *mut MPI_Status,
) -> R<Option<R<()>>> {
    let (mut tickets, mut others) = (false, false);
    for &h in hs.iter() {
        if ticket_bits(h).is_some() {
            tickets = true;
        } else if h == MPI_REQUEST_NULL || h == DONE_SEND {
            others = true;
        } else {
            return Ok(None);
        }
    }
    if others && wants(statuses) {
        // Their statuses (output only: written even if the wait fails).
        for (i, &h) in hs.iter().enumerate() {
            match h {
                MPI_REQUEST_NULL => put_status(status_at(statuses, i), empty_status()),
                DONE_SEND => put_status(status_at(statuses, i), done_send_status()),
                _ => {}
            }
        }
    }
    let mut first = None;
    let comms = &s.comms;
    let waited = if !tickets {
        // Sends complete at their start (and nulls): nothing to wait for.
        Ok(raw::Packed::Spent)
    } else {
        raw::wait_packed(
            s.engine_comm()?,
            hs,
            ticket_bits,
            MPI_REQUEST_NULL,
            |i, res| match res {
                // Nothing to write: no status conversion.
                Ok(_) if !wants(statuses) => {}
                res => {
                    let (stt, e) = ticket_outcome(comms, res);
                    if e.is_some() && first.is_none() {
                        first = e;
                    }
                    put_status(status_at(statuses, i), stt);
                }
            },
        )
    };
    let repeated = match waited {
        // The engine failed, not a request: the error of the call.
        Err(e) => {
            set_err_comm(MPI_COMM_WORLD);
            return Err(e.into());
        }
        Ok(raw::Packed::NoOperation(i)) => {
            set_err_comm(MPI_COMM_WORLD);
            return err(
                MPI_ERR_REQUEST,
                format!(
                    "{:#x} is not a request (or it was completed already)",
                    hs[i]
                ),
            );
        }
        Ok(raw::Packed::Repeated(i)) => Some(i),
        Ok(raw::Packed::Spent) => None,
    };
    if others {
        // Sends complete at their start are done with too (the tickets are
        // null now, as they were not before).
        for h in hs.iter_mut().filter(|h| **h == DONE_SEND) {
            *h = MPI_REQUEST_NULL;
        }
    }
    if let Some(i) = repeated {
        // The same handle twice in the array (erroneous).
        set_err_comm(MPI_COMM_WORLD);
        return err(
            MPI_ERR_REQUEST,
            format!("request {i} of the array repeats one before it: each completes once"),
        );
    }
    Ok(Some(in_status(first, statuses)))
}

/// A ticket's outcome as a status and an error; a failed operation makes
/// its communicator (found among `comms` by its context; world if it was
/// freed since) the one whose error handler handles it.
#[inline(always)]
fn ticket_outcome(comms: &Slab<CommEntry>, res: TicketOutcome) -> (MPI_Status, Option<MpiErr>) {
    match res {
        Ok(st) => outcome(Ok(st)),
        Err((e, ctx)) => {
            let c = comms
                .iter()
                .find(|(_, c)| Context::of(&c.comm) == ctx)
                .map_or(MPI_COMM_WORLD, |(h, _)| h);
            set_err_comm(c);
            outcome(Err(e))
        }
    }
}

/// `MPI_Waitall` under `MPI_THREAD_MULTIPLE`: one request at a time, each
/// by tests (see `state::wait_by_tests`). Out of line: the one-thread path
/// stays as short as before threads came.
#[cold]
#[inline(never)]
fn wait_all_by_tests(hs: &mut [c_int], statuses: *mut MPI_Status) -> R<()> {
    let mut first = None;
    for (i, h) in hs.iter_mut().enumerate() {
        let (stt, e) = state::wait_by_tests(|| complete(&mut *st()?, h, false))?;
        put_status(status_at(statuses, i), stt);
        first = first.or(e);
    }
    in_status(first, statuses)
}

/// Completes every point-to-point request among `hs` with one wait in the
/// runtime (one hold of the engine for all, instead of one per request); the
/// per-request completion that follows then finds them done. Left to that
/// per-request completion when a nonblocking collective is among them, which
/// completes by its own path, in array order.
fn wait_all_p2p(s: &mut State, hs: &[c_int]) -> R<()> {
    let mut any = false;
    for h in hs {
        match s.reqs.get(h) {
            Some((ReqEntry::Coll(_), _))
            | Some((
                ReqEntry::PersistentColl {
                    active: Some(_), ..
                },
                _,
            )) => return Ok(()),
            Some((ReqEntry::PersistentColl { active: None, .. }, _)) => {}
            Some(_) => any = true,
            None => {}
        }
    }
    if !any {
        return Ok(());
    }
    fn in_flight(e: &mut (ReqEntry, c_int)) -> Option<&mut RawRequest> {
        match &mut e.0 {
            ReqEntry::Active(r) => Some(r),
            ReqEntry::Persistent {
                active: Some(r), ..
            } => Some(r),
            _ => None,
        }
    }
    let mut raws = s.reqs.pick_many_mut(hs, in_flight);
    raw::wait_all(&mut raws)?;
    Ok(())
}

/// Completes request `h` if it is done (or waits for it if `block`). Returns
/// `None` if it is still in flight, else its status and error. A completed
/// nonpersistent request is freed and `*slot` set to `MPI_REQUEST_NULL`.
#[inline(always)]
fn complete(
    s: &mut State,
    slot: &mut c_int,
    block: bool,
) -> R<Option<(MPI_Status, Option<MpiErr>)>> {
    let h = *slot;
    if h == MPI_REQUEST_NULL {
        return Ok(Some((empty_status(), None)));
    }
    if h == DONE_SEND {
        *slot = MPI_REQUEST_NULL;
        return Ok(Some((done_send_status(), None)));
    }
    if let Some(t) = s.ticket(h) {
        let t = t?;
        let c = s.engine_comm()?;
        let res = if block {
            t.wait(c)
        } else {
            match t.test(c) {
                Ok(false) => return Ok(None),
                Ok(true) => t.finish(c),
                Err(e) => Err((e, Context::of(c))),
            }
        };
        *slot = MPI_REQUEST_NULL;
        return Ok(Some(ticket_outcome(&s.comms, res)));
    }
    let Some((entry, comm)) = s.reqs.get_mut(&h) else {
        return err(
            MPI_ERR_REQUEST,
            format!("{h:#x} is not a request (or it was freed)"),
        );
    };
    set_err_comm(*comm);
    let (r, persistent) = match entry {
        ReqEntry::Coll(c) => {
            // A failed test is reported by the wait in `finish`.
            if !block && matches!(c.test(), Ok(false)) {
                return Ok(None);
            }
            let Some((ReqEntry::Coll(c), _)) = s.take_request(h) else {
                return err(MPI_ERR_INTERN, "a collective request vanished");
            };
            *slot = MPI_REQUEST_NULL;
            return Ok(Some(c.complete_in(s)));
        }
        ReqEntry::PersistentColl { active, .. } => {
            let Some(c) = active else {
                return Ok(Some((empty_status(), None)));
            };
            if !block && matches!(c.test(), Ok(false)) {
                return Ok(None);
            }
            // Completed, the request stays, inactive, for the next start.
            let c = active.take().expect("active");
            return Ok(Some(c.complete()));
        }
        ReqEntry::Active(r) => (r, false),
        ReqEntry::Persistent { active: None, .. } => return Ok(Some((empty_status(), None))),
        ReqEntry::Persistent {
            active: Some(r), ..
        } => (r, true),
    };
    let res = if block {
        r.wait()
    } else {
        match r.test() {
            Ok(None) => return Ok(None),
            Ok(Some(st)) => Ok(st),
            Err(e) => Err(e),
        }
    };
    let o = outcome(res);
    if persistent {
        if let Some((ReqEntry::Persistent { active, .. }, _)) = s.reqs.get_mut(&h) {
            *active = None;
        }
    } else {
        s.free_request(h);
        *slot = MPI_REQUEST_NULL;
    }
    Ok(Some(o))
}

/// `MPI_Request_get_status` of request `h`: its status and error if it
/// has completed (left for a wait or test to complete it), `None` while it
/// is in flight.
fn peek_request(s: &mut State, h: c_int) -> R<Option<(MPI_Status, Option<MpiErr>)>> {
    if let Some(t) = s.ticket(h) {
        let t = t?;
        return Ok(t
            .peek(s.engine_comm()?)
            .map(|o| ticket_outcome(&s.comms, o)));
    }
    let entry = match s.reqs.get_mut(&h) {
        None if h == MPI_REQUEST_NULL => return Ok(Some((empty_status(), None))),
        None if h == DONE_SEND => return Ok(Some((done_send_status(), None))),
        None => return err(MPI_ERR_REQUEST, format!("{h:#x} is not a request")),
        Some(e) => e,
    };
    set_err_comm(entry.1);
    Ok(match &mut entry.0 {
        ReqEntry::Coll(c)
        | ReqEntry::PersistentColl {
            active: Some(c), ..
        } => c.status()?,
        ReqEntry::PersistentColl { active: None, .. }
        | ReqEntry::Persistent { active: None, .. } => Some((empty_status(), None)),
        ReqEntry::Active(r)
        | ReqEntry::Persistent {
            active: Some(r), ..
        } => r.peek().map(outcome),
    })
}

/// Whether request `h` is in flight (not null, not an inactive persistent one).
fn is_active(s: &State, h: c_int) -> bool {
    if h == DONE_SEND || ticket_bits(h).is_some() {
        // A spent ticket is reported when completed.
        return true;
    }
    match s.reqs.get(&h) {
        Some((ReqEntry::Active(_), _)) | Some((ReqEntry::Coll(_), _)) => true,
        Some((ReqEntry::Persistent { active, .. }, _)) => active.is_some(),
        Some((ReqEntry::PersistentColl { active, .. }, _)) => active.is_some(),
        None => false,
    }
}

/// The wait of `MPI_Waitany` and `MPI_Waitsome` between two rounds of
/// tests: [`wait_some_done`] with the state held; under
/// `MPI_THREAD_MULTIPLE`, the state let go and the turn handed on (see
/// `state::wait_by_tests`; `idle` counts the rounds), and taken again.
fn await_some(
    mut s: RefMut<'static, State>,
    hs: &[c_int],
    idle: &mut u32,
) -> R<RefMut<'static, State>> {
    if !state::multiple() {
        wait_some_done(&mut s, hs)?;
        return Ok(s);
    }
    drop(s);
    *idle = idle.saturating_add(1);
    state::hand_over(*idle);
    st()
}

/// Blocks until one of the active requests among `hs` is done — or, when a
/// collective is among them, yields once (the caller's tests make progress).
fn wait_some_done(s: &mut State, hs: &[c_int]) -> R<()> {
    if hs.iter().any(|h| {
        matches!(
            s.reqs.get(h),
            Some((ReqEntry::Coll(_), _))
                | Some((
                    ReqEntry::PersistentColl {
                        active: Some(_),
                        ..
                    },
                    _
                ))
        )
    }) {
        std::thread::yield_now();
        return Ok(());
    }
    let mut tickets = Vec::new();
    for &h in hs {
        if let Some(t) = s.ticket(h) {
            tickets.push(t?);
        }
    }
    let reqs: Vec<&RawRequest> = hs
        .iter()
        .filter_map(|h| match s.reqs.get(h) {
            Some((ReqEntry::Active(r), _)) => Some(r),
            Some((
                ReqEntry::Persistent {
                    active: Some(r), ..
                },
                _,
            )) => Some(r),
            _ => None,
        })
        .collect();
    raw::wait_any_done(&reqs, &tickets, s.engine_comm()?)?;
    Ok(())
}

fn status_at(statuses: *mut MPI_Status, i: usize) -> *mut MPI_Status {
    if wants(statuses) {
        // SAFETY: the caller passed an array of `count` statuses; `i < count`.
        unsafe { statuses.add(i) }
    } else {
        statuses
    }
}

/// The multiple-completion calls report per-request errors as
/// MPI_ERR_IN_STATUS (when statuses are asked for).
fn in_status(first: Option<MpiErr>, statuses: *mut MPI_Status) -> R<()> {
    match first {
        None => Ok(()),
        Some(e) if wants(statuses) => {
            err(MPI_ERR_IN_STATUS, format!("a request failed: {}", e.msg))
        }
        Some(e) => Err(e),
    }
}

fn any_index(
    n: c_int,
    reqs: *mut c_int,
    index: *mut c_int,
    flag: Option<*mut c_int>,
    status: *mut MPI_Status,
    block: bool,
) -> R<()> {
    let hs = slice_mut(reqs, n, "array_of_requests")?;
    let mut s = st()?;
    let mut idle = 0u32;
    loop {
        let mut active = 0;
        for (i, h) in hs.iter_mut().enumerate() {
            if !is_active(&s, *h) {
                continue;
            }
            active += 1;
            if let Some((stt, e)) = complete(&mut s, h, false)? {
                out(index, "index", i as c_int)?;
                if let Some(f) = flag {
                    out(f, "flag", 1)?;
                }
                put_status_one(status, stt);
                return e.map_or(Ok(()), Err);
            }
        }
        if active == 0 {
            out(index, "index", MPI_UNDEFINED)?;
            if let Some(f) = flag {
                out(f, "flag", 1)?;
            }
            put_status_one(status, empty_status());
            return Ok(());
        }
        if !block {
            out(index, "index", MPI_UNDEFINED)?;
            if let Some(f) = flag {
                out(f, "flag", 0)?;
            }
            return Ok(());
        }
        s = await_some(s, hs, &mut idle)?;
    }
}

fn some_indices(
    n: c_int,
    reqs: *mut c_int,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
    block: bool,
) -> R<()> {
    let hs = slice_mut(reqs, n, "array_of_requests")?;
    let mut s = st()?;
    let mut idle = 0u32;
    loop {
        let mut active = 0;
        let mut done = 0usize;
        let mut first = None;
        for (i, h) in hs.iter_mut().enumerate() {
            if !is_active(&s, *h) {
                continue;
            }
            active += 1;
            if let Some((stt, e)) = complete(&mut s, h, false)? {
                let idx = slice_mut(indices, n, "array_of_indices")?;
                idx[done] = i as c_int;
                put_status(status_at(statuses, done), stt);
                done += 1;
                if first.is_none() {
                    first = e;
                }
            }
        }
        if active == 0 {
            return out(outcount, "outcount", MPI_UNDEFINED);
        }
        if done > 0 || !block {
            out(outcount, "outcount", done as c_int)?;
            return in_status(first, statuses);
        }
        s = await_some(s, hs, &mut idle)?;
    }
}

fn persistent(p: Option<RawPersistent>, comm: c_int, request: *mut c_int) -> R<()> {
    let h = st()?.new_request(
        ReqEntry::Persistent {
            p: p.map(Box::new),
            active: None,
        },
        comm,
    );
    out(request, "request", h)
}

#[allow(clippy::too_many_arguments)]
fn send_init(
    buf: *const c_void,
    cnt: c_int,
    dt: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
    request: *mut c_int,
    mode: SendMode,
) -> R<()> {
    let (c, d) = lookup(comm, dt)?;
    let n = count(cnt)?;
    send_tag(tag)?;
    match peer(&c, dest, false)? {
        // A persistent operation with MPI_PROC_NULL: every start completes at once.
        None => persistent(None, comm, request),
        Some(dest) => persistent(
            Some(RawPersistent::send(
                &c,
                buf as *const u8,
                n,
                &d,
                dest,
                tag,
                mode,
            )),
            comm,
            request,
        ),
    }
}

fn start(h: c_int) -> R<()> {
    let starter = {
        let mut s = st()?;
        match s.reqs.get_mut(&h) {
            Some((ReqEntry::Persistent { p, active }, comm)) => {
                set_err_comm(*comm);
                if active.is_some() {
                    return err(MPI_ERR_REQUEST, "the persistent request is already active");
                }
                *active = Some(match p {
                    // SAFETY: the standard makes the caller keep the buffer given at
                    // creation valid from the start until the operation completes.
                    Some(p) => unsafe { p.start()? },
                    None => RawRequest::completed(proc_null()),
                });
                return Ok(());
            }
            Some((ReqEntry::PersistentColl { start, active }, comm)) => {
                set_err_comm(*comm);
                if active.is_some() {
                    return err(
                        MPI_ERR_REQUEST,
                        "the persistent collective is already active",
                    );
                }
                start.clone()
            }
            _ => {
                return err(
                    MPI_ERR_REQUEST,
                    format!("{h:#x} is not a persistent request"),
                )
            }
        }
    };
    // The starter makes MPI calls of its own: not under this borrow.
    let run = starter()?;
    match st()?.reqs.get_mut(&h) {
        Some((ReqEntry::PersistentColl { active, .. }, _)) => {
            *active = Some(run);
            Ok(())
        }
        _ => err(
            MPI_ERR_INTERN,
            "a persistent collective request vanished while starting",
        ),
    }
}

mpi! {
    fn MPI_Send / PMPI_Send(buf: *const c_void, count: c_int, datatype: c_int, dest: c_int, tag: c_int, comm: c_int) {
        send_one_or_threads(buf, count, datatype, dest, tag, comm, SendMode::Standard)
    }

    fn MPI_Rsend / PMPI_Rsend(buf: *const c_void, count: c_int, datatype: c_int, dest: c_int, tag: c_int, comm: c_int) {
        send_one_or_threads(buf, count, datatype, dest, tag, comm, SendMode::Standard)
    }

    fn MPI_Ssend / PMPI_Ssend(buf: *const c_void, count: c_int, datatype: c_int, dest: c_int, tag: c_int, comm: c_int) {
        send_one_or_threads(buf, count, datatype, dest, tag, comm, SendMode::Sync)
    }

    fn MPI_Bsend / PMPI_Bsend(buf: *const c_void, count: c_int, datatype: c_int, dest: c_int, tag: c_int, comm: c_int) {
        let r = start_send(&*st()?, buf, count, datatype, dest, tag, comm, SendMode::Buffered)?;
        r.free();
        Ok(())
    }

    fn MPI_Buffer_attach / PMPI_Buffer_attach(buffer: *mut c_void, size: c_int) {
        let mut s = st()?;
        if s.bsend.is_some() {
            return err(MPI_ERR_BUFFER, "a buffer is already attached: detach it first");
        }
        if size < 0 {
            return err(MPI_ERR_ARG, format!("buffer size {size} is negative"));
        }
        s.bsend = Some((buffer, size));
        Ok(())
    }

    fn MPI_Buffer_detach / PMPI_Buffer_detach(buffer_addr: *mut c_void, size: *mut c_int) {
        st()?;
        raw::wait_orphans()?;
        let b = st()?.bsend.take();
        let (p, n) = b.unwrap_or((std::ptr::null_mut(), 0));
        out(buffer_addr as *mut *mut c_void, "buffer_addr", p)?;
        out(size, "size", n)
    }

    fn MPI_Recv / PMPI_Recv(buf: *mut c_void, count: c_int, datatype: c_int, source: c_int, tag: c_int, comm: c_int, status: *mut MPI_Status) {
        recv_one_or_threads(buf, count, datatype, source, tag, comm, status)
    }
}

/// The nonblocking sends of every mode: the table path first where the
/// mode allows it (not buffered: a buffered send copies into the attached
/// buffer), then the general one. Inlined into each, with `mode` a constant.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn isend(
    buf: *const c_void,
    count: c_int,
    datatype: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
    request: *mut c_int,
    mode: SendMode,
) -> R<()> {
    let sync = matches!(mode, SendMode::Sync);
    if !matches!(mode, SendMode::Buffered)
        && isend_in_table(buf, count, datatype, dest, tag, comm, request, sync)?
    {
        return Ok(());
    }
    let mut s = st()?;
    // Checked before the send starts: it must not go out unrequested.
    crate::coll::need_request(request)?;
    let r = start_send(&s, buf, count, datatype, dest, tag, comm, mode)?;
    register_send(&mut s, r, comm, request)
}

mpi_nb! {
    fn MPI_Isend / PMPI_Isend(buf: *const c_void, count: c_int, datatype: c_int, dest: c_int, tag: c_int, comm: c_int, request: *mut c_int) {
        isend(buf, count, datatype, dest, tag, comm, request, SendMode::Standard)
    }

    // A ready send is a standard one here: it may assume a posted receive,
    // and needs none.
    fn MPI_Irsend / PMPI_Irsend(buf: *const c_void, count: c_int, datatype: c_int, dest: c_int, tag: c_int, comm: c_int, request: *mut c_int) {
        isend(buf, count, datatype, dest, tag, comm, request, SendMode::Standard)
    }

    fn MPI_Issend / PMPI_Issend(buf: *const c_void, count: c_int, datatype: c_int, dest: c_int, tag: c_int, comm: c_int, request: *mut c_int) {
        isend(buf, count, datatype, dest, tag, comm, request, SendMode::Sync)
    }

    fn MPI_Ibsend / PMPI_Ibsend(buf: *const c_void, count: c_int, datatype: c_int, dest: c_int, tag: c_int, comm: c_int, request: *mut c_int) {
        isend(buf, count, datatype, dest, tag, comm, request, SendMode::Buffered)
    }

    fn MPI_Irecv / PMPI_Irecv(buf: *mut c_void, count: c_int, datatype: c_int, source: c_int, tag: c_int, comm: c_int, request: *mut c_int) {
        if irecv_in_table(buf, count, datatype, source, tag, comm, request)? {
            return Ok(());
        }
        let mut s = st()?;
        // Checked before the receive is posted: it must not take a message
        // nobody can wait for.
        crate::coll::need_request(request)?;
        let r = start_recv(&s, buf, count, datatype, source, tag, comm)?;
        register(&mut s, r, comm, request)
    }
}

/// How many whole elements of `datatype` the status says arrived (`None`:
/// not a whole number), for `MPI_Get_count` and `MPI_Get_count_c`.
pub(crate) fn count_of(status: *const MPI_Status, datatype: c_int) -> R<Option<i64>> {
    let s = read(status, "status")?;
    let d = dtype_any(datatype)?;
    let bytes = status_bytes(&s);
    Ok(match d.size() as u64 {
        0 => Some(0),
        size if bytes.is_multiple_of(size) => i64::try_from(bytes / size).ok(),
        _ => None,
    })
}

/// `MPI_Status_set_elements(_x)`: `count` elements of `datatype` received.
fn set_elements(status: *mut MPI_Status, datatype: c_int, count: i64) -> R<()> {
    let d = dtype_any(datatype)?;
    if count < 0 {
        return err(MPI_ERR_COUNT, format!("count {count} is negative"));
    }
    let bytes = (count as u64)
        .checked_mul(d.size() as u64)
        // A status holds 63 bits of bytes (count_lo, and 31 bits of
        // count_hi_and_cancelled beside the cancelled flag), as MPICH's.
        .filter(|&b| b <= i64::MAX as u64)
        .ok_or_else(|| MpiErr {
            class: MPI_ERR_COUNT,
            msg: format!("{count} elements of {} bytes do not fit a status", d.size()),
        })?;
    let mut s = read(status as *const MPI_Status, "status")?;
    s.count_lo = bytes as u32 as c_int;
    s.count_hi_and_cancelled = (((bytes >> 32) as c_int) << 1) | (s.count_hi_and_cancelled & 1);
    out(status, "status", s)
}

/// Starts the halves of `MPI_(I)sendrecv_replace`: the send first, as a
/// buffered one (the data is copied into storage the request owns before the
/// receive may overwrite the buffer), then the receive into the buffer.
#[allow(clippy::too_many_arguments)]
fn start_replace(
    buf: *mut c_void,
    count: c_int,
    datatype: c_int,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: c_int,
) -> R<(RawRequest, RawRequest)> {
    let s = st()?;
    let c = s.comm_ref(comm)?;
    let d = s.dtype(datatype)?;
    let n = state::count(count)?;
    check_buf(buf, n, &d)?;
    send_tag(sendtag)?;
    let send = match peer(c, dest, false)? {
        None => RawRequest::completed(proc_null()),
        // SAFETY: the caller passes `count` elements of `datatype` at `buf`;
        // a buffered send copies them before it returns.
        Some(dest) => unsafe {
            raw::isend(
                c,
                buf as *const u8,
                n,
                &d,
                dest,
                sendtag,
                SendMode::Buffered,
            )?
        },
    };
    let recv = start_recv(&s, buf, count, datatype, source, recvtag, comm)?;
    Ok((send, recv))
}

/// A nonblocking sendrecv in flight (`MPI_Isendrecv`): done when both halves
/// are; its status is the receive's.
struct NbSendrecv {
    send: RawRequest,
    recv: RawRequest,
}

impl Drop for NbSendrecv {
    /// Freed before completion (`MPI_Request_free`): both halves finish in
    /// the background, keeping what they use (a dropped request would not).
    fn drop(&mut self) {
        for r in [&mut self.send, &mut self.recv] {
            std::mem::replace(r, RawRequest::completed(proc_null())).free();
        }
    }
}

impl CollPending for NbSendrecv {
    fn test(&mut self) -> kumi::Result<bool> {
        // `test` answers again with the status once an operation is done.
        Ok(self.send.test()?.is_some() & self.recv.test()?.is_some())
    }

    fn finish(self: Box<Self>) -> R<()> {
        self.complete().1.map_or(Ok(()), Err)
    }

    fn complete(mut self: Box<Self>) -> (MPI_Status, Option<MpiErr>) {
        let (_, send_err) = outcome(self.send.wait());
        let (st, recv_err) = outcome(self.recv.wait());
        (st, recv_err.or(send_err))
    }

    fn status(&mut self) -> R<Option<(MPI_Status, Option<MpiErr>)>> {
        if !self.test()? {
            return Ok(None);
        }
        let send_err = self.send.peek().and_then(|o| outcome(o).1);
        Ok(self.recv.peek().map(|o| {
            let (st, recv_err) = outcome(o);
            (st, recv_err.or(send_err))
        }))
    }
}

mpi! {

    fn MPI_Sendrecv / PMPI_Sendrecv(
        sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, dest: c_int, sendtag: c_int,
        recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, source: c_int, recvtag: c_int,
        comm: c_int, status: *mut MPI_Status
    ) {
        let (r, w) = {
            let s = st()?;
            let r = start_recv(&s, recvbuf, recvcount, recvtype, source, recvtag, comm)?;
            (r, start_send(&s, sendbuf, sendcount, sendtype, dest, sendtag, comm, SendMode::Standard)?)
        };
        blocking(w, std::ptr::null_mut())?;
        blocking(r, status)
    }

    fn MPI_Sendrecv_replace / PMPI_Sendrecv_replace(
        buf: *mut c_void, count: c_int, datatype: c_int, dest: c_int, sendtag: c_int,
        source: c_int, recvtag: c_int, comm: c_int, status: *mut MPI_Status
    ) {
        let (w, r) = start_replace(buf, count, datatype, dest, sendtag, source, recvtag, comm)?;
        blocking(w, std::ptr::null_mut())?;
        blocking(r, status)
    }

    fn MPI_Isendrecv / PMPI_Isendrecv(
        sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, dest: c_int, sendtag: c_int,
        recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, source: c_int, recvtag: c_int,
        comm: c_int, request: *mut c_int
    ) {
        if request.is_null() {
            return err(MPI_ERR_ARG, "the output argument `request` is NULL");
        }
        let mut s = st()?;
        let recv = start_recv(&s, recvbuf, recvcount, recvtype, source, recvtag, comm)?;
        let send = start_send(&s, sendbuf, sendcount, sendtype, dest, sendtag, comm, SendMode::Standard)?;
        let h = s.new_request(ReqEntry::Coll(Box::new(NbSendrecv { send, recv })), comm);
        drop(s);
        out(request, "request", h)
    }

    fn MPI_Isendrecv_replace / PMPI_Isendrecv_replace(
        buf: *mut c_void, count: c_int, datatype: c_int, dest: c_int, sendtag: c_int,
        source: c_int, recvtag: c_int, comm: c_int, request: *mut c_int
    ) {
        if request.is_null() {
            return err(MPI_ERR_ARG, "the output argument `request` is NULL");
        }
        let (send, recv) = start_replace(buf, count, datatype, dest, sendtag, source, recvtag, comm)?;
        let h = st()?.new_request(ReqEntry::Coll(Box::new(NbSendrecv { send, recv })), comm);
        out(request, "request", h)
    }

    fn MPI_Send_init / PMPI_Send_init(buf: *const c_void, count: c_int, datatype: c_int, dest: c_int, tag: c_int, comm: c_int, request: *mut c_int) {
        send_init(buf, count, datatype, dest, tag, comm, request, SendMode::Standard)
    }

    fn MPI_Ssend_init / PMPI_Ssend_init(buf: *const c_void, count: c_int, datatype: c_int, dest: c_int, tag: c_int, comm: c_int, request: *mut c_int) {
        send_init(buf, count, datatype, dest, tag, comm, request, SendMode::Sync)
    }

    fn MPI_Rsend_init / PMPI_Rsend_init(buf: *const c_void, count: c_int, datatype: c_int, dest: c_int, tag: c_int, comm: c_int, request: *mut c_int) {
        send_init(buf, count, datatype, dest, tag, comm, request, SendMode::Standard)
    }

    fn MPI_Bsend_init / PMPI_Bsend_init(buf: *const c_void, count: c_int, datatype: c_int, dest: c_int, tag: c_int, comm: c_int, request: *mut c_int) {
        send_init(buf, count, datatype, dest, tag, comm, request, SendMode::Buffered)
    }

    fn MPI_Recv_init / PMPI_Recv_init(buf: *mut c_void, count: c_int, datatype: c_int, source: c_int, tag: c_int, comm: c_int, request: *mut c_int) {
        let (c, d) = lookup(comm, datatype)?;
        let n = state::count(count)?;
        recv_tag(tag)?;
        match peer(&c, source, true)? {
            None => persistent(None, comm, request),
            Some(src) => persistent(Some(RawPersistent::recv(&c, buf as *mut u8, n, &d, src, tag)), comm, request),
        }
    }

    fn MPI_Start / PMPI_Start(request: *mut c_int) {
        let h = read(request, "request")?;
        start(h)
    }

    fn MPI_Startall / PMPI_Startall(count: c_int, array_of_requests: *mut c_int) {
        let hs = slice_mut(array_of_requests, count, "array_of_requests")?;
        for &h in hs.iter() {
            start(h)?;
        }
        Ok(())
    }

    fn MPI_Wait / PMPI_Wait(request: *mut c_int, status: *mut MPI_Status) {
        let mut h = read(request, "request")?;
        let (stt, e) = if state::multiple() {
            state::wait_by_tests(|| complete(&mut *st()?, &mut h, false))?
        } else {
            let mut s = st()?;
            complete(&mut s, &mut h, true)?.unwrap_or((empty_status(), None))
        };
        out(request, "request", h)?;
        put_status_one(status, stt);
        e.map_or(Ok(()), Err)
    }

    fn MPI_Test / PMPI_Test(request: *mut c_int, flag: *mut c_int, status: *mut MPI_Status) {
        let mut h = read(request, "request")?;
        let mut s = st()?;
        let r = complete(&mut s, &mut h, false)?;
        drop(s);
        out(request, "request", h)?;
        match r {
            None => out(flag, "flag", 0),
            Some((stt, e)) => {
                out(flag, "flag", 1)?;
                put_status_one(status, stt);
                e.map_or(Ok(()), Err)
            }
        }
    }

    fn MPI_Request_get_status / PMPI_Request_get_status(request: c_int, flag: *mut c_int, status: *mut MPI_Status) {
        let got = peek_request(&mut *st()?, request)?;
        let Some((stt, e)) = got else {
            if let Ok(c) = st()?.comm(MPI_COMM_WORLD) {
                raw::progress(&c)?;
            }
            return out(flag, "flag", 0);
        };
        out(flag, "flag", 1)?;
        put_status_one(status, stt);
        e.map_or(Ok(()), Err)
    }

    fn MPI_Waitall / PMPI_Waitall(count: c_int, array_of_requests: *mut c_int, array_of_statuses: *mut MPI_Status) {
        let hs = slice_mut(array_of_requests, count, "array_of_requests")?;
        if state::multiple() {
            return wait_all_by_tests(hs, array_of_statuses);
        }
        let mut s = st()?;
        if let Some(r) = wait_all_tickets(&mut s, hs, array_of_statuses)? {
            return r;
        }
        wait_all_p2p(&mut s, hs)?;
        let mut first = None;
        for (i, h) in hs.iter_mut().enumerate() {
            let (stt, e) = complete(&mut s, h, true)?.unwrap_or((empty_status(), None));
            put_status(status_at(array_of_statuses, i), stt);
            if first.is_none() {
                first = e;
            }
        }
        in_status(first, array_of_statuses)
    }

    fn MPI_Testall / PMPI_Testall(count: c_int, array_of_requests: *mut c_int, flag: *mut c_int, array_of_statuses: *mut MPI_Status) {
        let hs = slice_mut(array_of_requests, count, "array_of_requests")?;
        let mut s = st()?;
        // All or nothing: complete only if every request is done.
        if let Ok(c) = s.comm(MPI_COMM_WORLD) {
            raw::progress(&c)?;
        }
        let mut all = true;
        for h in hs.iter() {
            if let Some(t) = s.ticket(*h) {
                all &= t?.is_done(s.engine_comm()?);
                continue;
            }
            all &= match s.reqs.get_mut(h) {
                Some((ReqEntry::Coll(c), _))
                | Some((ReqEntry::PersistentColl { active: Some(c), .. }, _)) => c.test()?,
                Some((ReqEntry::PersistentColl { active: None, .. }, _)) => true,
                Some((ReqEntry::Active(r), _)) => r.is_done(),
                Some((ReqEntry::Persistent { active, .. }, _)) => active.as_ref().is_none_or(|r| r.is_done()),
                None => true,
            };
        }
        if !all {
            return out(flag, "flag", 0);
        }
        let mut first = None;
        for (i, h) in hs.iter_mut().enumerate() {
            let (stt, e) = complete(&mut s, h, true)?.unwrap_or((empty_status(), None));
            put_status(status_at(array_of_statuses, i), stt);
            if first.is_none() {
                first = e;
            }
        }
        out(flag, "flag", 1)?;
        in_status(first, array_of_statuses)
    }

    fn MPI_Waitany / PMPI_Waitany(count: c_int, array_of_requests: *mut c_int, index: *mut c_int, status: *mut MPI_Status) {
        any_index(count, array_of_requests, index, None, status, true)
    }

    fn MPI_Testany / PMPI_Testany(count: c_int, array_of_requests: *mut c_int, index: *mut c_int, flag: *mut c_int, status: *mut MPI_Status) {
        any_index(count, array_of_requests, index, Some(flag), status, false)
    }

    fn MPI_Waitsome / PMPI_Waitsome(incount: c_int, array_of_requests: *mut c_int, outcount: *mut c_int, array_of_indices: *mut c_int, array_of_statuses: *mut MPI_Status) {
        some_indices(incount, array_of_requests, outcount, array_of_indices, array_of_statuses, true)
    }

    fn MPI_Testsome / PMPI_Testsome(incount: c_int, array_of_requests: *mut c_int, outcount: *mut c_int, array_of_indices: *mut c_int, array_of_statuses: *mut MPI_Status) {
        some_indices(incount, array_of_requests, outcount, array_of_indices, array_of_statuses, false)
    }

    fn MPI_Cancel / PMPI_Cancel(request: *mut c_int) {
        let h = read(request, "request")?;
        if h == DONE_SEND {
            // A completed send: the cancel does not succeed.
            return Ok(());
        }
        let mut s = st()?;
        if let Some(t) = s.ticket(h) {
            // As for a request object below.
            t?.cancel(s.engine_comm()?);
            return Ok(());
        }
        match s.reqs.get_mut(&h) {
            Some((ReqEntry::Active(r), _)) | Some((ReqEntry::Persistent { active: Some(r), .. }, _)) => {
                // A send cannot be cancelled in kumi; the standard allows a cancel
                // that does not succeed (MPI_Test_cancelled then says false).
                r.cancel();
                Ok(())
            }
            Some((ReqEntry::Coll(c), comm)) => {
                set_err_comm(*comm);
                // A generalized request: its cancel callback says how it went.
                c.cancel().unwrap_or_else(|| err(MPI_ERR_REQUEST, NO_COLL_CANCEL))
            }
            Some((ReqEntry::PersistentColl { active: Some(_), .. }, comm)) => {
                set_err_comm(*comm);
                err(MPI_ERR_REQUEST, NO_COLL_CANCEL)
            }
            Some(_) => Ok(()),
            None => err(MPI_ERR_REQUEST, format!("{h:#x} is not a request")),
        }
    }

    fn MPI_Test_cancelled / PMPI_Test_cancelled(status: *const MPI_Status, flag: *mut c_int) {
        let s = read(status, "status")?;
        out(flag, "flag", s.count_hi_and_cancelled & 1)
    }

    fn MPI_Request_free / PMPI_Request_free(request: *mut c_int) {
        let h = read(request, "request")?;
        if h == DONE_SEND {
            return out(request, "request", MPI_REQUEST_NULL);
        }
        let mut s = st()?;
        if let Some(t) = s.ticket(h) {
            t?.free(s.engine_comm()?);
            drop(s);
            return out(request, "request", MPI_REQUEST_NULL);
        }
        match s.reqs.remove(&h) {
            Some((ReqEntry::Active(r), _)) | Some((ReqEntry::Persistent { active: Some(r), .. }, _)) => r.free(),
            // The collective still completes on its own (other ranks are not
            // left waiting); its result is discarded, as nothing can wait for it.
            Some((ReqEntry::Coll(c), _)) => drop(c),
            Some((ReqEntry::PersistentColl { active, .. }, _)) => drop(active),
            Some(_) => {}
            None => return err(MPI_ERR_REQUEST, format!("{h:#x} is not a request")),
        }
        drop(s);
        out(request, "request", MPI_REQUEST_NULL)
    }

    fn MPI_Probe / PMPI_Probe(source: c_int, tag: c_int, comm: c_int, status: *mut MPI_Status) {
        let c = st()?.comm(comm)?;
        recv_tag(tag)?;
        let Some(src) = peer(&c, source, true)? else {
            put_status_one(status, status_of(&proc_null(), 0));
            return Ok(());
        };
        let found = raw::probe(&c, src, tag)?;
        put_status_one(status, status_of(&found, 0));
        Ok(())
    }

    fn MPI_Iprobe / PMPI_Iprobe(source: c_int, tag: c_int, comm: c_int, flag: *mut c_int, status: *mut MPI_Status) {
        let c = st()?.comm(comm)?;
        recv_tag(tag)?;
        let Some(src) = peer(&c, source, true)? else {
            out(flag, "flag", 1)?;
            put_status_one(status, status_of(&proc_null(), 0));
            return Ok(());
        };
        match raw::iprobe(&c, src, tag)? {
            Some(found) => {
                out(flag, "flag", 1)?;
                put_status_one(status, status_of(&found, 0));
                Ok(())
            }
            None => out(flag, "flag", 0),
        }
    }

    fn MPI_Mprobe / PMPI_Mprobe(source: c_int, tag: c_int, comm: c_int, message: *mut c_int, status: *mut MPI_Status) {
        let c = st()?.comm(comm)?;
        recv_tag(tag)?;
        let Some(src) = peer(&c, source, true)? else {
            out(message, "message", MPI_MESSAGE_NO_PROC)?;
            put_status_one(status, status_of(&proc_null(), 0));
            return Ok(());
        };
        let m = raw::mprobe(&c, src, tag)?;
        put_status_one(status, status_of(&m.status(), 0));
        let mut s = st()?;
        let h = s.fresh(NEW_REQUEST);
        s.msgs.insert(h, m);
        drop(s);
        out(message, "message", h)
    }

    fn MPI_Improbe / PMPI_Improbe(source: c_int, tag: c_int, comm: c_int, flag: *mut c_int, message: *mut c_int, status: *mut MPI_Status) {
        let c = st()?.comm(comm)?;
        recv_tag(tag)?;
        let Some(src) = peer(&c, source, true)? else {
            out(flag, "flag", 1)?;
            out(message, "message", MPI_MESSAGE_NO_PROC)?;
            put_status_one(status, status_of(&proc_null(), 0));
            return Ok(());
        };
        match raw::improbe(&c, src, tag)? {
            None => out(flag, "flag", 0),
            Some(m) => {
                put_status_one(status, status_of(&m.status(), 0));
                let mut s = st()?;
                let h = s.fresh(NEW_REQUEST);
                s.msgs.insert(h, m);
                drop(s);
                out(flag, "flag", 1)?;
                out(message, "message", h)
            }
        }
    }

    fn MPI_Mrecv / PMPI_Mrecv(buf: *mut c_void, count: c_int, datatype: c_int, message: *mut c_int, status: *mut MPI_Status) {
        let h = read(message, "message")?;
        if h == MPI_MESSAGE_NO_PROC {
            put_status_one(status, status_of(&proc_null(), 0));
            return out(message, "message", MPI_MESSAGE_NULL);
        }
        let (m, d) = {
            let mut s = st()?;
            let d = s.dtype(datatype)?;
            let Some(m) = s.msgs.remove(&h) else {
                return err(MPI_ERR_REQUEST, format!("{h:#x} is not a message from MPI_Mprobe"));
            };
            (m, d)
        };
        let n = state::count(count)?;
        out(message, "message", MPI_MESSAGE_NULL)?;
        // SAFETY: the caller passes a buffer of `count` elements of `datatype`.
        let r = unsafe { m.irecv(buf as *mut u8, n, &d) };
        blocking(r, status)
    }

    fn MPI_Imrecv / PMPI_Imrecv(buf: *mut c_void, count: c_int, datatype: c_int, message: *mut c_int, request: *mut c_int) {
        let h = read(message, "message")?;
        if h == MPI_MESSAGE_NO_PROC {
            out(message, "message", MPI_MESSAGE_NULL)?;
            let h = st()?.new_request(ReqEntry::Active(RawRequest::completed(proc_null())), MPI_COMM_WORLD);
            return out(request, "request", h);
        }
        let mut s = st()?;
        let d = s.dtype(datatype)?;
        let Some(m) = s.msgs.remove(&h) else {
            return err(MPI_ERR_REQUEST, format!("{h:#x} is not a message from MPI_Mprobe"));
        };
        let n = state::count(count)?;
        // SAFETY: the caller keeps `buf` valid until the request completes.
        let r = unsafe { m.irecv(buf as *mut u8, n, &d) };
        let rh = s.new_request(ReqEntry::Active(r), MPI_COMM_WORLD);
        drop(s);
        out(message, "message", MPI_MESSAGE_NULL)?;
        out(request, "request", rh)
    }

    fn MPI_Get_count / PMPI_Get_count(status: *const MPI_Status, datatype: c_int, count: *mut c_int) {
        let n = count_of(status, datatype)?.and_then(|n| c_int::try_from(n).ok());
        out(count, "count", n.unwrap_or(MPI_UNDEFINED))
    }

    fn MPI_Get_elements / PMPI_Get_elements(status: *const MPI_Status, datatype: c_int, count: *mut c_int) {
        let s = read(status, "status")?;
        let d = dtype_any(datatype)?;
        let n = d.elements_in(status_bytes(&s) as usize).and_then(|n| c_int::try_from(n).ok());
        out(count, "count", n.unwrap_or(MPI_UNDEFINED))
    }

    fn MPI_Get_elements_x / PMPI_Get_elements_x(status: *const MPI_Status, datatype: c_int, count: *mut i64) {
        let s = read(status, "status")?;
        let d = dtype_any(datatype)?;
        let n = d.elements_in(status_bytes(&s) as usize).map(|n| n as i64);
        out(count, "count", n.unwrap_or(MPI_UNDEFINED as i64))
    }

    fn MPI_Status_set_elements / PMPI_Status_set_elements(status: *mut MPI_Status, datatype: c_int, count: c_int) {
        set_elements(status, datatype, i64::from(count))
    }

    fn MPI_Status_set_elements_x / PMPI_Status_set_elements_x(status: *mut MPI_Status, datatype: c_int, count: i64) {
        set_elements(status, datatype, count)
    }

    // A Fortran status is the C one's five ints, in order (MPICH's layout).
    fn MPI_Status_c2f / PMPI_Status_c2f(c_status: *const MPI_Status, f_status: *mut c_int) {
        let st = read(c_status, "c_status")?;
        let f = crate::state::slice_mut(f_status, 5, "f_status")?;
        f.copy_from_slice(&[st.count_lo, st.count_hi_and_cancelled, st.MPI_SOURCE, st.MPI_TAG, st.MPI_ERROR]);
        Ok(())
    }

    fn MPI_Status_f2c / PMPI_Status_f2c(f_status: *const c_int, c_status: *mut MPI_Status) {
        let f = crate::state::slice(f_status, 5, "f_status")?;
        out(c_status, "c_status", MPI_Status { count_lo: f[0], count_hi_and_cancelled: f[1], MPI_SOURCE: f[2], MPI_TAG: f[3], MPI_ERROR: f[4] })
    }

    fn MPI_Status_set_cancelled / PMPI_Status_set_cancelled(status: *mut MPI_Status, flag: c_int) {
        let mut s = read(status as *const MPI_Status, "status")?;
        s.count_hi_and_cancelled = (s.count_hi_and_cancelled & !1) | (flag != 0) as c_int;
        out(status, "status", s)
    }
}

/// A datatype, looked up without requiring the state for built-in ones (status
/// queries may come after finalize in some programs).
fn dtype_any(h: c_int) -> R<Datatype> {
    match builtin_type(h) {
        Some(d) => Ok(d),
        // Also a query callback's (`state::lent`).
        None => crate::state::dtype_or_lent(h),
    }
}
