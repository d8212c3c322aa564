//! The MPI-4 large-count (`_c`) variants: `MPI_Count` counts and `MPI_Aint`
//! displacements, forwarded to the `int` functions.
//!
//! kumi's ABI functions take `int` counts. A (buffer, count, datatype)
//! triple whose count exceeds an `int` becomes one element of a type made
//! for the call ([`wide`]: point-to-point, broadcast, the gathers,
//! scatters and all-to-alls with one count per side); the reductions start
//! with the count as read ([`crate::coll::start_reduction`]); the type
//! constructors are their own functions (`crate::types`), and the v- and
//! w-collectives share their bodies with the `int` ones (`coll/v.rs`).
//! Elsewhere (one-sided calls, pack sizes) a count that does not fit an
//! `int` is refused with `MPI_ERR_COUNT` (through the error handler) rather
//! than truncated. mpi4py calls these variants whenever they exist.

use crate::coll::{reduce_local, start_reduction, Reduction};
use crate::consts::*;
use crate::state::{self, out};
use crate::{coll::*, p2p::*, types::*, win::*};
use crate::{err, guard_plain as guard, MPI_Status, R};
use std::ffi::{c_int, c_void};

/// `MPI_X`, the name programs call: the same function as `PMPI_X` (which a
/// profiling library may wrap).
macro_rules! mpi_alias {
    ($mpi:ident => $pmpi:ident ( $($a:ident : $t:ty),* )) => {
        #[doc = concat!("`", stringify!($mpi), "`: calls `", stringify!($pmpi), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $mpi($($a: $t),*) -> c_int {
            // SAFETY: forwarded unchanged.
            unsafe { $pmpi($($a),*) }
        }
    };
}

/// Narrows a count; on overflow, reports through the error handler.
fn narrow(name: &'static str, v: i64) -> Result<c_int, c_int> {
    c_int::try_from(v).map_err(|_| {
        guard(name, || {
            err(
                MPI_ERR_COUNT,
                format!("count {v} exceeds 2^31-1, which kumi does not support yet"),
            )
        })
    })
}

/// Scalar-count wrappers: arguments marked `=> n` are narrowed.
macro_rules! large {
    ($( $mpi:ident / $pmpi:ident => $target:ident ( $($a:ident : $t:ty $(=> $conv:ident)?),* ) )*) => {$(
        #[doc = concat!("`", stringify!($pmpi), "`: large-count `", stringify!($target), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $pmpi($($a: $t),*) -> c_int {
            // Under MPI_THREAD_SERIALIZED this thread holds the library for
            // the whole call (the lookups here read its state).
            let _token = crate::state::Token::enter();
            $( $( let $a = match $conv(stringify!($mpi), $a) { Ok(v) => v, Err(rc) => return rc }; )? )*
            // SAFETY: same contract as the int-count function.
            unsafe { $target($($a),*) }
        }
        mpi_alias!($mpi => $pmpi ($($a: $t),*));
    )*};
}

fn n(name: &'static str, v: i64) -> Result<c_int, c_int> {
    narrow(name, v)
}

/// A buffer's count and datatype for the `int` function: a count beyond an
/// `int` becomes one element of a contiguous type of that many, made for
/// the call. Its handle goes when the call returns; an operation it started
/// keeps the layout itself (as after `MPI_Type_free`), and the status
/// counts bytes, so `MPI_Get_count_c` with the program's type is right.
struct Wide {
    count: c_int,
    dt: c_int,
    made: bool,
}

impl Drop for Wide {
    fn drop(&mut self) {
        if self.made {
            if let Ok(mut s) = state::st() {
                s.types.remove(&self.dt);
            }
        }
    }
}

fn wide(name: &'static str, v: i64, dt: c_int) -> Result<Wide, c_int> {
    if let Ok(count) = c_int::try_from(v) {
        return Ok(Wide {
            count,
            dt,
            made: false,
        });
    }
    let made = || -> R<c_int> {
        let n = usize::try_from(v).map_err(|_| crate::MpiErr {
            class: MPI_ERR_COUNT,
            msg: format!("count {v} is negative"),
        })?;
        let mut s = state::st()?;
        let big = s.dtype(dt)?.contiguous(n)?;
        let h = s.fresh(NEW_TYPE);
        s.types.insert(h, (big, String::new()));
        Ok(h)
    };
    match made() {
        Ok(h) => Ok(Wide {
            count: 1,
            dt: h,
            made: true,
        }),
        Err(e) => Err(guard(name, || Err(e))),
    }
}

/// Wrappers of calls on one buffer (`buf, count, datatype, ...`) whose
/// count may exceed an `int` ([`wide`]).
macro_rules! large_buf {
    ($( $mpi:ident / $pmpi:ident => $target:ident ( $buf:ident : $bt:ty, $($a:ident : $t:ty),* ) )*) => {$(
        #[doc = concat!("`", stringify!($pmpi), "`: large-count `", stringify!($target), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $pmpi($buf: $bt, count: i64, dt: c_int, $($a: $t),*) -> c_int {
            // Under MPI_THREAD_SERIALIZED this thread holds the library for
            // the whole call (the lookups here read its state).
            let _token = crate::state::Token::enter();
            let w = match wide(stringify!($mpi), count, dt) { Ok(w) => w, Err(rc) => return rc };
            // SAFETY: same contract as the int-count function: `count`
            // elements of `dt` at the buffer are one element of `w.dt`.
            unsafe { $target($buf, w.count, w.dt, $($a),*) }
        }
        mpi_alias!($mpi => $pmpi ($buf: $bt, count: i64, dt: c_int, $($a: $t),*));
    )*};
}

type V = *const c_void;
type M = *mut c_void;
type St = *mut MPI_Status;

large_buf! {
    MPI_Send_c / PMPI_Send_c => PMPI_Send(buf: V, dest: c_int, tag: c_int, comm: c_int)
    MPI_Ssend_c / PMPI_Ssend_c => PMPI_Ssend(buf: V, dest: c_int, tag: c_int, comm: c_int)
    MPI_Rsend_c / PMPI_Rsend_c => PMPI_Rsend(buf: V, dest: c_int, tag: c_int, comm: c_int)
    MPI_Bsend_c / PMPI_Bsend_c => PMPI_Bsend(buf: V, dest: c_int, tag: c_int, comm: c_int)
    MPI_Isend_c / PMPI_Isend_c => PMPI_Isend(buf: V, dest: c_int, tag: c_int, comm: c_int, req: *mut c_int)
    MPI_Issend_c / PMPI_Issend_c => PMPI_Issend(buf: V, dest: c_int, tag: c_int, comm: c_int, req: *mut c_int)
    MPI_Irsend_c / PMPI_Irsend_c => PMPI_Irsend(buf: V, dest: c_int, tag: c_int, comm: c_int, req: *mut c_int)
    MPI_Ibsend_c / PMPI_Ibsend_c => PMPI_Ibsend(buf: V, dest: c_int, tag: c_int, comm: c_int, req: *mut c_int)
    MPI_Send_init_c / PMPI_Send_init_c => PMPI_Send_init(buf: V, dest: c_int, tag: c_int, comm: c_int, req: *mut c_int)
    MPI_Ssend_init_c / PMPI_Ssend_init_c => PMPI_Ssend_init(buf: V, dest: c_int, tag: c_int, comm: c_int, req: *mut c_int)
    MPI_Rsend_init_c / PMPI_Rsend_init_c => PMPI_Rsend_init(buf: V, dest: c_int, tag: c_int, comm: c_int, req: *mut c_int)
    MPI_Bsend_init_c / PMPI_Bsend_init_c => PMPI_Bsend_init(buf: V, dest: c_int, tag: c_int, comm: c_int, req: *mut c_int)
    MPI_Recv_c / PMPI_Recv_c => PMPI_Recv(buf: M, src: c_int, tag: c_int, comm: c_int, st: St)
    MPI_Irecv_c / PMPI_Irecv_c => PMPI_Irecv(buf: M, src: c_int, tag: c_int, comm: c_int, req: *mut c_int)
    MPI_Recv_init_c / PMPI_Recv_init_c => PMPI_Recv_init(buf: M, src: c_int, tag: c_int, comm: c_int, req: *mut c_int)
    MPI_Mrecv_c / PMPI_Mrecv_c => PMPI_Mrecv(buf: M, msg: *mut c_int, st: St)
    MPI_Imrecv_c / PMPI_Imrecv_c => PMPI_Imrecv(buf: M, msg: *mut c_int, req: *mut c_int)
    MPI_Bcast_c / PMPI_Bcast_c => PMPI_Bcast(b: M, root: c_int, comm: c_int)
    MPI_Ibcast_c / PMPI_Ibcast_c => PMPI_Ibcast(b: M, root: c_int, comm: c_int, req: *mut c_int)
}

large! {
    MPI_Buffer_attach_c / PMPI_Buffer_attach_c => PMPI_Buffer_attach(b: M, size: i64 => n)
}

/// Whether this rank is the root of a rooted collective (`MPI_ROOT` on an
/// intercommunicator), the one rank that reads the root-side arguments;
/// elsewhere MPI does not read them (they may be anything).
fn is_root(comm: c_int, root: c_int) -> bool {
    let Ok(mut s) = state::st() else { return false };
    let inter = s.inter(comm).ok().flatten().is_some();
    let Ok(c) = s.comm(comm) else { return false };
    match root {
        MPI_ROOT => inter,
        r => !inter && r >= 0 && r as usize == c.rank(),
    }
}

/// The reductions with a count beyond an int: the nonblocking forms start
/// with the count as read ([`start_reduction`]); a blocking form calls its
/// `int` twin when the count fits (its own algorithms), else its
/// nonblocking `_c` twin and waits.
macro_rules! large_red {
    ($( $impi:ident / $ipmpi:ident, $mpi:ident / $pmpi:ident => $int:ident ( $($root:ident)? ) as $kind:expr; )*) => {$(
        #[doc = concat!("`", stringify!($ipmpi), "`: with an `MPI_Count`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $ipmpi(s: V, r: M, c: i64, t: c_int, op: c_int, $($root: c_int,)? comm: c_int, request: *mut c_int) -> c_int {
            // Under MPI_THREAD_SERIALIZED this thread holds the library for
            // the whole call (the lookups here read its state).
            let _token = crate::state::Token::enter();
            guard(stringify!($impi), || {
                let n = usize::try_from(c).or_else(|_| err(MPI_ERR_COUNT, format!("count {c} is negative")))?;
                start_reduction(stringify!($impi), $kind, s, r, n, t, op, comm, request)
            })
        }
        mpi_alias!($impi => $ipmpi (s: V, r: M, c: i64, t: c_int, op: c_int, $($root: c_int,)? comm: c_int, request: *mut c_int));
        #[doc = concat!("`", stringify!($pmpi), "`: with an `MPI_Count`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $pmpi(s: V, r: M, c: i64, t: c_int, op: c_int, $($root: c_int,)? comm: c_int) -> c_int {
            let _token = crate::state::Token::enter();
            if let Ok(n) = c_int::try_from(c) {
                // SAFETY: the int function's contract, the count unchanged.
                return unsafe { $int(s, r, n, t, op, $($root,)? comm) };
            }
            let mut q = MPI_REQUEST_NULL;
            // SAFETY: the same contract; `q` is a request to write.
            match unsafe { $ipmpi(s, r, c, t, op, $($root,)? comm, &mut q) } {
                // SAFETY: `q` was just started; the status is ignored.
                MPI_SUCCESS => unsafe { crate::p2p::PMPI_Wait(&mut q, STATUS_IGNORE as *mut MPI_Status) },
                rc => rc,
            }
        }
        mpi_alias!($mpi => $pmpi (s: V, r: M, c: i64, t: c_int, op: c_int, $($root: c_int,)? comm: c_int));
    )*};
}

large_red! {
    MPI_Iallreduce_c / PMPI_Iallreduce_c, MPI_Allreduce_c / PMPI_Allreduce_c => PMPI_Allreduce() as Reduction::All;
    MPI_Ireduce_c / PMPI_Ireduce_c, MPI_Reduce_c / PMPI_Reduce_c => PMPI_Reduce(root) as Reduction::Reduce(root);
    MPI_Iscan_c / PMPI_Iscan_c, MPI_Scan_c / PMPI_Scan_c => PMPI_Scan() as Reduction::Scan;
    MPI_Iexscan_c / PMPI_Iexscan_c, MPI_Exscan_c / PMPI_Exscan_c => PMPI_Exscan() as Reduction::Exscan;
    MPI_Ireduce_scatter_block_c / PMPI_Ireduce_scatter_block_c, MPI_Reduce_scatter_block_c / PMPI_Reduce_scatter_block_c => PMPI_Reduce_scatter_block() as Reduction::ScatterBlock;
}

/// `PMPI_Reduce_local_c`: `MPI_Reduce_local` with an `MPI_Count`.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Reduce_local_c(i: V, io: M, c: i64, t: c_int, op: c_int) -> c_int {
    // See the macros above: hold the library for the whole call.
    let _token = crate::state::Token::enter();
    guard("MPI_Reduce_local_c", || {
        let n =
            usize::try_from(c).or_else(|_| err(MPI_ERR_COUNT, format!("count {c} is negative")))?;
        reduce_local(i, io, n, t, op)
    })
}

mpi_alias!(MPI_Reduce_local_c => PMPI_Reduce_local_c (i: V, io: M, c: i64, t: c_int, op: c_int));

/// `PMPI_Ireduce_scatter_c`: `MPI_Ireduce_scatter` with `MPI_Count` counts.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Ireduce_scatter_c(
    s: V,
    r: M,
    rc: *const i64,
    t: c_int,
    op: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    // See the macros above: hold the library for the whole call.
    let _token = crate::state::Token::enter();
    guard("MPI_Ireduce_scatter_c", || {
        let cs = counts(rc, crate::coll::local_size(comm)?, "recvcounts")?;
        start_reduction(
            "MPI_Ireduce_scatter_c",
            Reduction::Scatter(cs),
            s,
            r,
            0,
            t,
            op,
            comm,
            request,
        )
    })
}

mpi_alias!(MPI_Ireduce_scatter_c => PMPI_Ireduce_scatter_c (s: V, r: M, rc: *const i64, t: c_int, op: c_int, comm: c_int, request: *mut c_int));

/// `PMPI_Reduce_scatter_c`: the nonblocking form, waited for.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Reduce_scatter_c(
    s: V,
    r: M,
    rc: *const i64,
    t: c_int,
    op: c_int,
    comm: c_int,
) -> c_int {
    let mut q = MPI_REQUEST_NULL;
    // SAFETY: the same contract; `q` is a request to write.
    match unsafe { PMPI_Ireduce_scatter_c(s, r, rc, t, op, comm, &mut q) } {
        // SAFETY: `q` was just started; the status is ignored.
        MPI_SUCCESS => unsafe { crate::p2p::PMPI_Wait(&mut q, STATUS_IGNORE as *mut MPI_Status) },
        rc => rc,
    }
}

mpi_alias!(MPI_Reduce_scatter_c => PMPI_Reduce_scatter_c (s: V, r: M, rc: *const i64, t: c_int, op: c_int, comm: c_int));

/// Calls with one or two (buffer, count, datatype) triples whose counts
/// may exceed an `int`: each such count and its type become one element of
/// a type made for the call ([`wide`]), where the triple is significant.
/// `pair(ty)` is read on every rank; `send(ty, buf)` unless `buf` is
/// `MPI_IN_PLACE`; `at_root(ty, root, comm)` at the root only (MPI 4.1
/// section 6.5). A triple that is not read passes a zero count.
macro_rules! large_pairs {
    ($( $mpi:ident / $pmpi:ident => $target:ident ( $($a:ident : $t:ty $(=> $how:ident ( $($x:ident),* ))?),* ) )*) => {$(
        #[doc = concat!("`", stringify!($pmpi), "`: large-count `", stringify!($target), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $pmpi($($a: $t),*) -> c_int {
            // Under MPI_THREAD_SERIALIZED this thread holds the library for
            // the whole call (the lookups here read its state).
            let _token = crate::state::Token::enter();
            // Each made type lives until the call returns (`_kept`).
            $( $( let ($a, _kept) = match $how(stringify!($mpi), $a, $($x),*) { Ok(w) => (w.count, w), Err(rc) => return rc }; let large_pairs!(@ty $($x),*) = _kept.dt; )? )*
            // SAFETY: same contract as the int-count function: `count`
            // elements of a type are one element of the type made for them.
            unsafe { $target($($a),*) }
        }
        mpi_alias!($mpi => $pmpi ($($a: $t),*));
    )*};
    (@ty $ty:ident $(, $rest:ident)*) => { $ty };
}

/// A triple read on every rank.
fn pair(name: &'static str, count: i64, dt: c_int) -> Result<Wide, c_int> {
    wide(name, count, dt)
}

/// A send triple, unless the buffer is `MPI_IN_PLACE`.
fn send(name: &'static str, count: i64, dt: c_int, buf: *const c_void) -> Result<Wide, c_int> {
    if buf as usize == IN_PLACE {
        return Ok(Wide {
            count: 0,
            dt,
            made: false,
        });
    }
    wide(name, count, dt)
}

/// A triple read at the root only.
fn at_root(
    name: &'static str,
    count: i64,
    dt: c_int,
    root: c_int,
    comm: c_int,
) -> Result<Wide, c_int> {
    if !is_root(comm, root) {
        return Ok(Wide {
            count: 0,
            dt,
            made: false,
        });
    }
    wide(name, count, dt)
}

large_pairs! {
    MPI_Gather_c / PMPI_Gather_c => PMPI_Gather(s: V, sc: i64 => send(st, s), st: c_int, r: M, rc: i64 => at_root(rt, root, comm), rt: c_int, root: c_int, comm: c_int)
    MPI_Igather_c / PMPI_Igather_c => PMPI_Igather(s: V, sc: i64 => send(st, s), st: c_int, r: M, rc: i64 => at_root(rt, root, comm), rt: c_int, root: c_int, comm: c_int, req: *mut c_int)
    MPI_Scatter_c / PMPI_Scatter_c => PMPI_Scatter(s: V, sc: i64 => at_root(st, root, comm), st: c_int, r: M, rc: i64 => send(rt, r), rt: c_int, root: c_int, comm: c_int)
    MPI_Iscatter_c / PMPI_Iscatter_c => PMPI_Iscatter(s: V, sc: i64 => at_root(st, root, comm), st: c_int, r: M, rc: i64 => send(rt, r), rt: c_int, root: c_int, comm: c_int, req: *mut c_int)
    MPI_Allgather_c / PMPI_Allgather_c => PMPI_Allgather(s: V, sc: i64 => send(st, s), st: c_int, r: M, rc: i64 => pair(rt), rt: c_int, comm: c_int)
    MPI_Iallgather_c / PMPI_Iallgather_c => PMPI_Iallgather(s: V, sc: i64 => send(st, s), st: c_int, r: M, rc: i64 => pair(rt), rt: c_int, comm: c_int, req: *mut c_int)
    MPI_Alltoall_c / PMPI_Alltoall_c => PMPI_Alltoall(s: V, sc: i64 => send(st, s), st: c_int, r: M, rc: i64 => pair(rt), rt: c_int, comm: c_int)
    MPI_Ialltoall_c / PMPI_Ialltoall_c => PMPI_Ialltoall(s: V, sc: i64 => send(st, s), st: c_int, r: M, rc: i64 => pair(rt), rt: c_int, comm: c_int, req: *mut c_int)
    MPI_Neighbor_allgather_c / PMPI_Neighbor_allgather_c => PMPI_Neighbor_allgather(s: V, sc: i64 => pair(st), st: c_int, r: M, rc: i64 => pair(rt), rt: c_int, comm: c_int)
    MPI_Ineighbor_allgather_c / PMPI_Ineighbor_allgather_c => PMPI_Ineighbor_allgather(s: V, sc: i64 => pair(st), st: c_int, r: M, rc: i64 => pair(rt), rt: c_int, comm: c_int, req: *mut c_int)
    MPI_Neighbor_alltoall_c / PMPI_Neighbor_alltoall_c => PMPI_Neighbor_alltoall(s: V, sc: i64 => pair(st), st: c_int, r: M, rc: i64 => pair(rt), rt: c_int, comm: c_int)
    MPI_Ineighbor_alltoall_c / PMPI_Ineighbor_alltoall_c => PMPI_Ineighbor_alltoall(s: V, sc: i64 => pair(st), st: c_int, r: M, rc: i64 => pair(rt), rt: c_int, comm: c_int, req: *mut c_int)
    MPI_Sendrecv_c / PMPI_Sendrecv_c => PMPI_Sendrecv(sb: V, sc: i64 => pair(st), st: c_int, dest: c_int, stag: c_int, rb: M, rc: i64 => pair(rt), rt: c_int, src: c_int, rtag: c_int, comm: c_int, status: St)
    MPI_Isendrecv_c / PMPI_Isendrecv_c => PMPI_Isendrecv(sb: V, sc: i64 => pair(st), st: c_int, dest: c_int, stag: c_int, rb: M, rc: i64 => pair(rt), rt: c_int, src: c_int, rtag: c_int, comm: c_int, req: *mut c_int)
    MPI_Sendrecv_replace_c / PMPI_Sendrecv_replace_c => PMPI_Sendrecv_replace(b: M, c: i64 => pair(t), t: c_int, dest: c_int, stag: c_int, src: c_int, rtag: c_int, comm: c_int, status: St)
    MPI_Isendrecv_replace_c / PMPI_Isendrecv_replace_c => PMPI_Isendrecv_replace(b: M, c: i64 => pair(t), t: c_int, dest: c_int, stag: c_int, src: c_int, rtag: c_int, comm: c_int, req: *mut c_int)
}

fn widen(name: &'static str, rc: c_int, v: c_int, outp: *mut i64) -> c_int {
    if rc != MPI_SUCCESS {
        return rc;
    }
    let w = if v == MPI_UNDEFINED {
        MPI_UNDEFINED as i64
    } else {
        v as i64
    };
    guard(name, || -> R<()> { out(outp, "count", w) })
}

/// `PMPI_Get_count_c`: `MPI_Get_count` with an `MPI_Count` result.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Get_count_c(
    st: *const MPI_Status,
    t: c_int,
    count: *mut i64,
) -> c_int {
    // See the macros above: hold the library for the whole call.
    let _token = crate::state::Token::enter();
    guard("MPI_Get_count_c", || -> R<()> {
        let n = crate::p2p::count_of(st, t)?;
        out(count, "count", n.unwrap_or(MPI_UNDEFINED as i64))
    })
}

mpi_alias!(MPI_Get_count_c => PMPI_Get_count_c (st: *const MPI_Status, t: c_int, count: *mut i64));

/// `PMPI_Get_elements_c`: `MPI_Get_elements_x` under its MPI-4 name.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Get_elements_c(
    st: *const MPI_Status,
    t: c_int,
    count: *mut i64,
) -> c_int {
    // See the macros above: hold the library for the whole call.
    let _token = crate::state::Token::enter();
    // SAFETY: forwarded unchanged.
    unsafe { PMPI_Get_elements_x(st, t, count) }
}

mpi_alias!(MPI_Get_elements_c => PMPI_Get_elements_c (st: *const MPI_Status, t: c_int, count: *mut i64));

/// `PMPI_Type_size_c`: `MPI_Type_size_x` under its MPI-4 name.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_size_c(t: c_int, size: *mut i64) -> c_int {
    // See the macros above: hold the library for the whole call.
    let _token = crate::state::Token::enter();
    // SAFETY: forwarded unchanged.
    unsafe { PMPI_Type_size_x(t, size) }
}

mpi_alias!(MPI_Type_size_c => PMPI_Type_size_c (t: c_int, size: *mut i64));

/// `PMPI_Type_get_extent_c`: `MPI_Type_get_extent_x` under its MPI-4 name.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_extent_c(t: c_int, lb: *mut i64, ext: *mut i64) -> c_int {
    // See the macros above: hold the library for the whole call.
    let _token = crate::state::Token::enter();
    // SAFETY: forwarded unchanged.
    unsafe { PMPI_Type_get_extent_x(t, lb, ext) }
}

mpi_alias!(MPI_Type_get_extent_c => PMPI_Type_get_extent_c (t: c_int, lb: *mut i64, ext: *mut i64));

/// `PMPI_Type_get_true_extent_c`: `MPI_Type_get_true_extent_x` under its MPI-4 name.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_true_extent_c(
    t: c_int,
    lb: *mut i64,
    ext: *mut i64,
) -> c_int {
    // See the macros above: hold the library for the whole call.
    let _token = crate::state::Token::enter();
    // SAFETY: forwarded unchanged.
    unsafe { PMPI_Type_get_true_extent_x(t, lb, ext) }
}

mpi_alias!(MPI_Type_get_true_extent_c => PMPI_Type_get_true_extent_c (t: c_int, lb: *mut i64, ext: *mut i64));

/// `PMPI_Buffer_detach_c`: `MPI_Buffer_detach` with an `MPI_Count` size.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Buffer_detach_c(buffer_addr: M, size: *mut i64) -> c_int {
    // See the macros above: hold the library for the whole call.
    let _token = crate::state::Token::enter();
    let mut s: c_int = 0;
    // SAFETY: forwarded; `s` is a valid int.
    let rc = unsafe { PMPI_Buffer_detach(buffer_addr, &mut s) };
    widen("MPI_Buffer_detach_c", rc, s, size)
}

mpi_alias!(MPI_Buffer_detach_c => PMPI_Buffer_detach_c (buffer_addr: M, size: *mut i64));

fn na(name: &'static str, v: isize) -> Result<c_int, c_int> {
    narrow(name, v as i64)
}

large! {
    MPI_Win_create_c / PMPI_Win_create_c => PMPI_Win_create(base: M, size: isize, du: isize => na, info: c_int, comm: c_int, win: *mut c_int)
    MPI_Win_allocate_c / PMPI_Win_allocate_c => PMPI_Win_allocate(size: isize, du: isize => na, info: c_int, comm: c_int, base: M, win: *mut c_int)
    MPI_Win_allocate_shared_c / PMPI_Win_allocate_shared_c => PMPI_Win_allocate_shared(size: isize, du: isize => na, info: c_int, comm: c_int, base: M, win: *mut c_int)
}

/// `PMPI_Win_shared_query_c`: `MPI_Win_shared_query` with an `MPI_Aint` unit.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_shared_query_c(
    win: c_int,
    rank: c_int,
    size: *mut isize,
    disp_unit: *mut isize,
    baseptr: M,
) -> c_int {
    // See the macros above: hold the library for the whole call.
    let _token = crate::state::Token::enter();
    let mut u: c_int = 0;
    // SAFETY: forwarded; `u` is a valid int.
    let rc = unsafe { PMPI_Win_shared_query(win, rank, size, &mut u, baseptr) };
    if rc != MPI_SUCCESS {
        return rc;
    }
    guard("MPI_Win_shared_query_c", || {
        out(disp_unit, "disp_unit", u as isize)
    })
}

mpi_alias!(MPI_Win_shared_query_c => PMPI_Win_shared_query_c (win: c_int, rank: c_int, size: *mut isize, disp_unit: *mut isize, baseptr: M));
