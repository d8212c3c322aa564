//! The MPI-4 large-count (`_c`) variants: `MPI_Count` counts and `MPI_Aint`
//! displacements, forwarded to the `int` functions.
//!
//! kumi's ABI functions take `int` counts. A (buffer, count, datatype)
//! triple whose count exceeds an `int` becomes one element of a type made
//! for the call ([`wide`]: point-to-point, broadcast, the gathers,
//! scatters and all-to-alls with one count per side); the reductions start
//! with the count as read ([`crate::coll::start_reduction`]); the type
//! constructors are their own functions (`crate::types`). Elsewhere (the
//! arrays of the v- and w-collectives, one-sided calls, pack sizes) a count
//! that does not fit an `int` is refused with `MPI_ERR_COUNT` (through the
//! error handler) rather than truncated. mpi4py calls these variants
//! whenever they exist.

use crate::coll::{reduce_local, start_reduction, Reduction};
use crate::consts::*;
use crate::state::{self, out, slice};
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

fn narrow_all(name: &'static str, p: *const i64, n: usize) -> Result<Vec<c_int>, c_int> {
    let v = slice(p, n as c_int, "counts").map_err(|e| guard(name, || Err(e)))?;
    v.iter().map(|&x| narrow(name, x)).collect()
}

fn size_of(comm: c_int) -> usize {
    state::st()
        .ok()
        .and_then(|mut s| s.comm(comm).ok())
        .map_or(0, |c| c.size())
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
    MPI_Pack_size_c / PMPI_Pack_size_c => pack_size_c_inner(c: i64 => n, t: c_int, comm: c_int, size: *mut i64)
}

/// Helper behind `MPI_Pack_size_c`: the size is written as an `MPI_Count`.
unsafe fn pack_size_c_inner(c: c_int, t: c_int, comm: c_int, size: *mut i64) -> c_int {
    let mut s: c_int = 0;
    // SAFETY: `s` is a valid int to write.
    let rc = unsafe { PMPI_Pack_size(c, t, comm, &mut s) };
    if rc == MPI_SUCCESS {
        let _ = guard("MPI_Pack_size_c", || out(size, "size", s as i64));
    }
    rc
}

/// Vector wrappers: counts (`MPI_Count[]`) and displacements (`MPI_Aint[]`)
/// of one entry per rank of the communicator (`[comm at root]`: read at the
/// root only, see [`size_at_root`]).
macro_rules! large_v {
    ($( $mpi:ident / $pmpi:ident => $target:ident [$comm:ident $(at $root:ident)?] ( $($a:ident : $t:ty $(=> $conv:ident)?),* ) )*) => {$(
        #[doc = concat!("`", stringify!($pmpi), "`: large-count `", stringify!($target), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $pmpi($($a: $t),*) -> c_int {
            // Under MPI_THREAD_SERIALIZED this thread holds the library for
            // the whole call (the lookups here read its state).
            let _token = crate::state::Token::enter();
            let p = large_v!(@size $comm $(, $root)?);
            $( $( let $a = match $conv(stringify!($mpi), $a, p) { Ok(v) => v, Err(rc) => return rc }; )? )*
            // SAFETY: same contract as the int-count function; the converted
            // arrays live until the call returns.
            unsafe { $target($(large_v!(@arg $a $(, $conv)?)),*) }
        }
        mpi_alias!($mpi => $pmpi ($($a: $t),*));
    )*};
    (@arg $a:ident, $conv:ident) => { Arg::arg(&$a) };
    (@arg $a:ident) => { $a };
    (@size $comm:ident) => { size_of($comm) };
    (@size $comm:ident, $root:ident) => { size_at_root($comm, $root) };
}

/// How many entries the arrays of a rooted v-collective have at this rank:
/// the group's (the remote group's on an intercommunicator) at the root,
/// none elsewhere, where MPI does not read them (they may be anything).
fn size_at_root(comm: c_int, root: c_int) -> usize {
    let Ok(mut s) = state::st() else { return 0 };
    let inter = s.inter(comm).ok().flatten().is_some();
    let Ok(c) = s.comm(comm) else { return 0 };
    let at_root = match root {
        MPI_ROOT => inter,
        r => !inter && r >= 0 && r as usize == c.rank(),
    };
    if at_root {
        c.size()
    } else {
        0
    }
}

/// A converted argument as the int function takes it.
trait Arg {
    type Out;
    fn arg(&self) -> Self::Out;
}

impl Arg for c_int {
    type Out = c_int;
    fn arg(&self) -> c_int {
        *self
    }
}

impl Arg for Vec<c_int> {
    type Out = *const c_int;
    fn arg(&self) -> *const c_int {
        self.as_ptr()
    }
}

fn cs(name: &'static str, p: *const i64, n: usize) -> Result<Vec<c_int>, c_int> {
    if p.is_null() {
        return Ok(vec![0; n]);
    }
    narrow_all(name, p, n)
}

fn ds(name: &'static str, p: *const isize, n: usize) -> Result<Vec<c_int>, c_int> {
    cs(name, p as *const i64, n)
}

large_v! {
    MPI_Gatherv_c / PMPI_Gatherv_c => PMPI_Gatherv [comm at root] (s: V, sc: i64 => nn, st: c_int, r: M, rc: *const i64 => cs, d: *const isize => ds, rt: c_int, root: c_int, comm: c_int)
    MPI_Scatterv_c / PMPI_Scatterv_c => PMPI_Scatterv [comm at root] (s: V, sc: *const i64 => cs, d: *const isize => ds, st: c_int, r: M, rc: i64 => nn, rt: c_int, root: c_int, comm: c_int)
    MPI_Allgatherv_c / PMPI_Allgatherv_c => PMPI_Allgatherv [comm] (s: V, sc: i64 => nn, st: c_int, r: M, rc: *const i64 => cs, d: *const isize => ds, rt: c_int, comm: c_int)
    MPI_Alltoallv_c / PMPI_Alltoallv_c => PMPI_Alltoallv [comm] (s: V, sc: *const i64 => cs, sd: *const isize => ds, st: c_int, r: M, rc: *const i64 => cs, rd: *const isize => ds, rt: c_int, comm: c_int)
    MPI_Igatherv_c / PMPI_Igatherv_c => PMPI_Igatherv [comm at root] (s: V, sc: i64 => nn, st: c_int, r: M, rc: *const i64 => cs, d: *const isize => ds, rt: c_int, root: c_int, comm: c_int, req: *mut c_int)
    MPI_Iscatterv_c / PMPI_Iscatterv_c => PMPI_Iscatterv [comm at root] (s: V, sc: *const i64 => cs, d: *const isize => ds, st: c_int, r: M, rc: i64 => nn, rt: c_int, root: c_int, comm: c_int, req: *mut c_int)
    MPI_Iallgatherv_c / PMPI_Iallgatherv_c => PMPI_Iallgatherv [comm] (s: V, sc: i64 => nn, st: c_int, r: M, rc: *const i64 => cs, d: *const isize => ds, rt: c_int, comm: c_int, req: *mut c_int)
    MPI_Ialltoallv_c / PMPI_Ialltoallv_c => PMPI_Ialltoallv [comm] (s: V, sc: *const i64 => cs, sd: *const isize => ds, st: c_int, r: M, rc: *const i64 => cs, rd: *const isize => ds, rt: c_int, comm: c_int, req: *mut c_int)
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

/// The reduce-scatters' counts, beyond an int too: one per rank of the
/// (local) group.
fn scatter_counts(p: *const i64, comm: c_int) -> R<Vec<usize>> {
    let n = crate::coll::local_size(comm)?;
    slice(p, n as c_int, "recvcounts")?
        .iter()
        .map(|&c| {
            usize::try_from(c).or_else(|_| err(MPI_ERR_COUNT, format!("count {c} is negative")))
        })
        .collect()
}

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
        let cs = scatter_counts(rc, comm)?;
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
    if size_at_root(comm, root) == 0 {
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

fn nn(name: &'static str, v: i64, _p: usize) -> Result<c_int, c_int> {
    narrow(name, v)
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

/// Wrappers whose arrays are as long as other arguments say (a type
/// constructor's `count`, a neighbourhood's degrees): `let`s computed from the
/// arguments first, then each converted argument with its length.
macro_rules! large_n {
    ($( $mpi:ident / $pmpi:ident => $target:ident [ $(let $l:pat = $le:expr;)* ] ( $($a:ident : $t:ty $(=> $conv:ident ( $len:expr ))?),* ) )*) => {$(
        #[doc = concat!("`", stringify!($pmpi), "`: large-count `", stringify!($target), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $pmpi($($a: $t),*) -> c_int {
            // Under MPI_THREAD_SERIALIZED this thread holds the library for
            // the whole call (the lookups here read its state).
            let _token = crate::state::Token::enter();
            $( let $l = $le; )*
            $( $( let $a = match $conv(stringify!($mpi), $a, $len) { Ok(v) => v, Err(rc) => return rc }; )? )*
            // SAFETY: same contract as the int-count function; the converted
            // arrays live until the call returns.
            unsafe { $target($(large_v!(@arg $a $(, $conv)?)),*) }
        }
        mpi_alias!($mpi => $pmpi ($($a: $t),*));
    )*};
}

/// The in- and out-degree of a communicator's topology ((0, 0) without one:
/// the int function then reports that).
fn degrees(comm: c_int) -> (usize, usize) {
    state::st()
        .ok()
        .and_then(|mut s| crate::comm::neighbors(&mut s, comm).ok())
        .map_or((0, 0), |(_, nb)| (nb.indegree(), nb.outdegree()))
}

fn nl(name: &'static str, v: i64, _n: usize) -> Result<c_int, c_int> {
    narrow(name, v)
}

large_n! {
    MPI_Neighbor_allgatherv_c / PMPI_Neighbor_allgatherv_c => PMPI_Neighbor_allgatherv [let ind = degrees(comm).0;] (s: V, sc: i64 => nl(0), st: c_int, r: M, rc: *const i64 => cs(ind), d: *const isize => ds(ind), rt: c_int, comm: c_int)
    MPI_Ineighbor_allgatherv_c / PMPI_Ineighbor_allgatherv_c => PMPI_Ineighbor_allgatherv [let ind = degrees(comm).0;] (s: V, sc: i64 => nl(0), st: c_int, r: M, rc: *const i64 => cs(ind), d: *const isize => ds(ind), rt: c_int, comm: c_int, req: *mut c_int)
    MPI_Neighbor_alltoallv_c / PMPI_Neighbor_alltoallv_c => PMPI_Neighbor_alltoallv [let (ind, outd) = degrees(comm);] (s: V, sc: *const i64 => cs(outd), sd: *const isize => ds(outd), st: c_int, r: M, rc: *const i64 => cs(ind), rd: *const isize => ds(ind), rt: c_int, comm: c_int)
    MPI_Ineighbor_alltoallv_c / PMPI_Ineighbor_alltoallv_c => PMPI_Ineighbor_alltoallv [let (ind, outd) = degrees(comm);] (s: V, sc: *const i64 => cs(outd), sd: *const isize => ds(outd), st: c_int, r: M, rc: *const i64 => cs(ind), rd: *const isize => ds(ind), rt: c_int, comm: c_int, req: *mut c_int)
    MPI_Neighbor_alltoallw_c / PMPI_Neighbor_alltoallw_c => PMPI_Neighbor_alltoallw [let (ind, outd) = degrees(comm);] (s: V, sc: *const i64 => cs(outd), sd: *const isize, st: *const c_int, r: M, rc: *const i64 => cs(ind), rd: *const isize, rt: *const c_int, comm: c_int)
    MPI_Ineighbor_alltoallw_c / PMPI_Ineighbor_alltoallw_c => PMPI_Ineighbor_alltoallw [let (ind, outd) = degrees(comm);] (s: V, sc: *const i64 => cs(outd), sd: *const isize, st: *const c_int, r: M, rc: *const i64 => cs(ind), rd: *const isize, rt: *const c_int, comm: c_int, req: *mut c_int)
}

large_v! {
    MPI_Alltoallw_c / PMPI_Alltoallw_c => PMPI_Alltoallw [comm] (s: V, sc: *const i64 => cs, sd: *const isize => ds, st: *const c_int, r: M, rc: *const i64 => cs, rd: *const isize => ds, rt: *const c_int, comm: c_int)
    MPI_Ialltoallw_c / PMPI_Ialltoallw_c => PMPI_Ialltoallw [comm] (s: V, sc: *const i64 => cs, sd: *const isize => ds, st: *const c_int, r: M, rc: *const i64 => cs, rd: *const isize => ds, rt: *const c_int, comm: c_int, req: *mut c_int)
}

/// Two counts narrowed (see [`narrow`]).
fn narrow2(name: &'static str, a: i64, b: i64) -> Result<(c_int, c_int), c_int> {
    Ok((narrow(name, a)?, narrow(name, b)?))
}

/// Runs an int-position pack or unpack with an `MPI_Count` position.
fn with_position(
    name: &'static str,
    position: *mut i64,
    f: impl FnOnce(*mut c_int) -> c_int,
) -> c_int {
    let pos = match guard(name, || state::read(position, "position").map(|_| ())) {
        MPI_SUCCESS => {
            // SAFETY: checked non-null just above; the caller passes an MPI_Count.
            unsafe { position.read() }
        }
        rc => return rc,
    };
    let mut p = match narrow(name, pos) {
        Ok(p) => p,
        Err(rc) => return rc,
    };
    let rc = f(&mut p);
    if rc == MPI_SUCCESS {
        // SAFETY: as above.
        unsafe { position.write(p as i64) };
    }
    rc
}

/// `PMPI_Pack_c`: `MPI_Pack` with `MPI_Count` sizes and position.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Pack_c(
    inbuf: V,
    incount: i64,
    t: c_int,
    outbuf: M,
    outsize: i64,
    position: *mut i64,
    comm: c_int,
) -> c_int {
    // See the macros above: hold the library for the whole call.
    let _token = crate::state::Token::enter();
    let (c, o) = match narrow2("MPI_Pack_c", incount, outsize) {
        Ok(x) => x,
        Err(rc) => return rc,
    };
    // SAFETY: forwarded; `p` is a valid int.
    with_position("MPI_Pack_c", position, |p| unsafe {
        PMPI_Pack(inbuf, c, t, outbuf, o, p, comm)
    })
}

mpi_alias!(MPI_Pack_c => PMPI_Pack_c (inbuf: V, incount: i64, t: c_int, outbuf: M, outsize: i64, position: *mut i64, comm: c_int));

/// `PMPI_Unpack_c`: `MPI_Unpack` with `MPI_Count` sizes and position.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Unpack_c(
    inbuf: V,
    insize: i64,
    position: *mut i64,
    outbuf: M,
    outcount: i64,
    t: c_int,
    comm: c_int,
) -> c_int {
    // See the macros above: hold the library for the whole call.
    let _token = crate::state::Token::enter();
    let (i, c) = match narrow2("MPI_Unpack_c", insize, outcount) {
        Ok(x) => x,
        Err(rc) => return rc,
    };
    // SAFETY: forwarded; `p` is a valid int.
    with_position("MPI_Unpack_c", position, |p| unsafe {
        PMPI_Unpack(inbuf, i, p, outbuf, c, t, comm)
    })
}

mpi_alias!(MPI_Unpack_c => PMPI_Unpack_c (inbuf: V, insize: i64, position: *mut i64, outbuf: M, outcount: i64, t: c_int, comm: c_int));

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
    MPI_Put_c / PMPI_Put_c => PMPI_Put(o: V, on: i64 => n, ot: c_int, tr: c_int, td: isize, tn: i64 => n, tt: c_int, win: c_int)
    MPI_Get_c / PMPI_Get_c => PMPI_Get(o: M, on: i64 => n, ot: c_int, tr: c_int, td: isize, tn: i64 => n, tt: c_int, win: c_int)
    MPI_Accumulate_c / PMPI_Accumulate_c => PMPI_Accumulate(o: V, on: i64 => n, ot: c_int, tr: c_int, td: isize, tn: i64 => n, tt: c_int, op: c_int, win: c_int)
    MPI_Get_accumulate_c / PMPI_Get_accumulate_c => PMPI_Get_accumulate(o: V, on: i64 => n, ot: c_int, r: M, rn: i64 => n, rt: c_int, tr: c_int, td: isize, tn: i64 => n, tt: c_int, op: c_int, win: c_int)
    MPI_Rput_c / PMPI_Rput_c => PMPI_Rput(o: V, on: i64 => n, ot: c_int, tr: c_int, td: isize, tn: i64 => n, tt: c_int, win: c_int, req: *mut c_int)
    MPI_Rget_c / PMPI_Rget_c => PMPI_Rget(o: M, on: i64 => n, ot: c_int, tr: c_int, td: isize, tn: i64 => n, tt: c_int, win: c_int, req: *mut c_int)
    MPI_Raccumulate_c / PMPI_Raccumulate_c => PMPI_Raccumulate(o: V, on: i64 => n, ot: c_int, tr: c_int, td: isize, tn: i64 => n, tt: c_int, op: c_int, win: c_int, req: *mut c_int)
    MPI_Rget_accumulate_c / PMPI_Rget_accumulate_c => PMPI_Rget_accumulate(o: V, on: i64 => n, ot: c_int, r: M, rn: i64 => n, rt: c_int, tr: c_int, td: isize, tn: i64 => n, tt: c_int, op: c_int, win: c_int, req: *mut c_int)
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
