//! Reductions: the built-in and program-defined operations, and the
//! dispatch of every reducing collective (reduce, allreduce, scans,
//! reduce-scatters, `MPI_Reduce_local`, blocking and nonblocking) onto the
//! runtime's typed reductions.
//!
//! An MPI basic type becomes its Rust element type (`MPI_DOUBLE` is `f64`,
//! `MPI_2INT` is `Loc<i32>`); a built-in operation is borrowed from a table
//! made once per element type; the program's `MPI_User_function` becomes an
//! `Op::user` (on blocks of the type's extent for contiguous derived types,
//! through a packed copy for the others).

use super::*;
use crate::state::{State, UserFn, UserFnC, UserOp};
use bytemuck::Pod;
use kumi::inter::InterComm;
#[cfg(target_arch = "x86_64")]
use kumi::LongDouble;
use kumi::{Builtin, Complex, Elem, Loc, LocInt, Op};
use std::ops::ControlFlow;
use std::rc::Rc;
use std::sync::OnceLock;

fn op_create(f: Option<UserOp>, commute: c_int, op: *mut c_int) -> R<()> {
    let Some(f) = f else {
        return err(MPI_ERR_ARG, "the user function is NULL");
    };
    let mut s = st()?;
    let h = s.fresh(NEW_OP);
    s.ops.insert(h, (f, commute != 0));
    drop(s);
    out(op, "op", h)
}

#[inline(never)]
fn user_op<T: bytemuck::Pod>(op: c_int, dt: c_int) -> R<Op<T>> {
    user_op_grouped(op, dt, 1, 0)
}

/// The program's operation `op` on elements of `dt` that are `group`
/// consecutive `T`s each (1: a `T` is an element), whose data sits `lb`
/// bytes into each (the pointers the program gets are shifted back by it,
/// so its function finds the type's fields at their displacements).
fn user_op_grouped<T: bytemuck::Pod>(op: c_int, dt: c_int, group: usize, lb: isize) -> R<Op<T>> {
    let s = st()?;
    let Some(&(f, commute)) = s.ops.get(&op) else {
        return err(MPI_ERR_OP, format!("{op:#x} is not a reduction operation"));
    };
    // Lent to each call of the function, which may ask about it (`state::lent`).
    let d = s.dtype(dt)?;
    drop(s);
    Ok(Op::user_grouped(
        group,
        commute,
        move |a: &[T], b: &mut [T]| {
            let mut t = dt;
            let len = a.len() / group;
            // Wrapping: with a positive lower bound the pointer is before the
            // buffer, and only the program's accesses at its displacements (all
            // at least `lb`) land inside it.
            let x = (a.as_ptr() as *mut u8).wrapping_offset(-lb) as *mut c_void;
            let y = (b.as_mut_ptr() as *mut u8).wrapping_offset(-lb) as *mut c_void;
            crate::state::lending(Some((dt, &d)), || match f {
                // SAFETY: `f` is the program's MPI_User_function; it reads `len`
                // elements of `t` at the first pointer and updates those at the
                // second, which is what the two buffers hold.
                UserOp::Int(f) => unsafe { f(x, y, &mut (len as c_int), &mut t) },
                // SAFETY: the same, for an MPI_User_function_c.
                UserOp::Big(f) => unsafe { f(x, y, &mut (len as i64), &mut t) },
            })
        },
    ))
}

/// The built-in operations in the order of their MPICH handles
/// (`MPI_MAX = 0x58000001` to `MPI_MAXLOC = 0x5800000c`).
const BUILTINS: [Builtin; 12] = [
    Builtin::Max,
    Builtin::Min,
    Builtin::Sum,
    Builtin::Prod,
    Builtin::Land,
    Builtin::Band,
    Builtin::Lor,
    Builtin::Bor,
    Builtin::Lxor,
    Builtin::Bxor,
    Builtin::MinLoc,
    Builtin::MaxLoc,
];

/// The index of a built-in operation in [`BUILTINS`].
fn builtin_index(op: c_int) -> Option<usize> {
    let i = op.wrapping_sub(MPI_MAX) as u32 as usize;
    (i < BUILTINS.len()).then_some(i)
}

pub(crate) fn builtin(op: c_int) -> Option<Builtin> {
    builtin_index(op).map(|i| BUILTINS[i])
}

/// The built-in operations on one element type, made once per process: a
/// reduction borrows its operation from here instead of making one per call
/// (made out of line, the value came back through memory and was loaded
/// back in wider words than it was stored in, which stalls the processor;
/// with the calls around it, half of the ABI's cost of an `MPI_Allreduce`
/// of 8 bytes).
trait BuiltinOps: Elem {
    fn ops() -> &'static [Op<Self>; 12];
}

macro_rules! builtin_ops {
    ($($t:ty),*) => {$(
        impl BuiltinOps for $t {
            fn ops() -> &'static [Op<$t>; 12] {
                static OPS: OnceLock<[Op<$t>; 12]> = OnceLock::new();
                OPS.get_or_init(|| BUILTINS.map(Op::builtin))
            }
        }
    )*};
}
builtin_ops!(
    i8,
    u8,
    i16,
    u16,
    i32,
    u32,
    i64,
    u64,
    f32,
    f64,
    Loc<i32>,
    Loc<f32>,
    Loc<f64>,
    LocInt<f32>,
    LocInt<f64>,
    LocInt<i64>,
    LocInt<i16>,
    Complex<f32>,
    Complex<f64>
);
#[cfg(target_arch = "x86_64")]
builtin_ops!(LongDouble, Complex<LongDouble>, LocInt<LongDouble>);

/// Runs reduction `red` with operation `op` on elements of type `T`: a
/// built-in operation from [`BuiltinOps`], else the program's.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn reduce_elem<T: BuiltinOps>(
    c: &Comm,
    red: &Red,
    op: c_int,
    dt: c_int,
    send: *const c_void,
    recv: *mut c_void,
    n: usize,
) -> R<Option<Box<dyn CollPending>>> {
    match builtin_index(op) {
        Some(i) => reduce_as(c, red, &T::ops()[i], send, recv, n),
        None => reduce_as(c, red, &user_op::<T>(op, dt)?, send, recv, n),
    }
}

/// What a reduction computes.
#[derive(Clone)]
pub(super) enum Red {
    Reduce(usize),
    All,
    /// Nonblocking allreduce: started, completed later by a wait or test.
    IAll,
    /// Nonblocking reduce to this root.
    IReduce(usize),
    /// Nonblocking scan, exclusive scan, reduce-scatter.
    IScan,
    IExscan,
    IScatter(Vec<usize>),
    Scan,
    Exscan,
    /// Reduce-scatter with these counts per rank.
    Scatter(Vec<usize>),
    /// `MPI_Reduce_local`: `recv = send ⊕ recv` on this rank alone.
    Local,
    /// The nonblocking reductions on an intercommunicator (`inter`): to
    /// every rank, to a root, scattered with these counts per local rank;
    /// each the combination of the other group's contributions.
    IAllInter(Rc<InterComm>),
    IReduceInter(Rc<InterComm>, kumi::inter::Root),
    IScatterInter(Rc<InterComm>, Vec<usize>),
}

/// A nonblocking reduction in flight: the result goes to `recv` (`n`
/// elements; none when `n` is 0) when it completes.
struct NbReduce<T: Pod> {
    req: CollRequest<T>,
    recv: *mut c_void,
    /// Elements of the result before this rank's.
    skip: usize,
    n: usize,
}

impl<T: Pod> CollPending for NbReduce<T> {
    fn test(&mut self) -> kumi::Result<bool> {
        self.req.test()
    }

    fn finish(self: Box<Self>) -> R<()> {
        let NbReduce { req, recv, skip, n } = *self;
        let result = req.wait()?;
        if n == 0 {
            // Nothing for this rank to write (not the root of a reduce; rank
            // 0 of an exclusive scan).
            return Ok(());
        }
        let Some(mine) = result.get(skip..skip + n) else {
            return err(
                MPI_ERR_INTERN,
                format!(
                    "the reduction returned {} elements, not {skip} and this rank's {n}",
                    result.len()
                ),
            );
        };
        if n > 0 {
            // SAFETY: `recv` is the receive buffer of `n` elements the program
            // passed to MPI_Iallreduce, which it keeps valid until completion.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    mine.as_ptr() as *const u8,
                    recv as *mut u8,
                    n * std::mem::size_of::<T>(),
                )
            };
        }
        Ok(())
    }
}

/// Starts nonblocking reduction `red` (see [`reduction_any`]) and registers
/// it as request `request`.
#[allow(clippy::too_many_arguments)]
pub(super) fn nb_reduction(
    name: &str,
    red: Red,
    send: *const c_void,
    recv: *mut c_void,
    n: usize,
    dt: c_int,
    op: c_int,
    comm: c_int,
    request: *mut c_int,
) -> R<()> {
    let started = match reduction_any(name, &red, send, recv, n, dt, op, comm) {
        Err(e) if e.class == MPI_ERR_COMM => {
            inter::nb_reduction(e, name, red, send, recv, n, dt, op, comm)?
        }
        r => r?,
    };
    match started {
        Some(p) => nb_request(p, comm, request),
        None => err(
            MPI_ERR_INTERN,
            format!("{name}: the reduction did not start"),
        ),
    }
}

/// `MPI_Reduce_local(_c)` of `n` elements. No communication: MPI_COMM_SELF
/// stands in for the communicator the dispatch wants.
pub(crate) fn reduce_local(
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    n: usize,
    datatype: c_int,
    op: c_int,
) -> R<()> {
    reduction(
        "MPI_Reduce_local",
        Red::Local,
        inbuf,
        inoutbuf,
        n,
        datatype,
        op,
        MPI_COMM_SELF,
    )
}

/// A nonblocking reduction, as its MPI function names it.
pub(crate) enum Reduction {
    All,
    /// To the root given (`MPI_ROOT`/`MPI_PROC_NULL` on an intercommunicator).
    Reduce(c_int),
    Scan,
    Exscan,
    /// `n` elements to each rank.
    ScatterBlock,
    /// The counts to each rank.
    Scatter(Vec<usize>),
}

/// Starts nonblocking reduction `kind` of `n` elements (`MPI_Iallreduce`
/// and its kin), with the count as read: the `int` functions and the
/// large-count (`_c`) ones call this.
#[allow(clippy::too_many_arguments)]
pub(crate) fn start_reduction(
    name: &str,
    kind: Reduction,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    n: usize,
    datatype: c_int,
    op: c_int,
    comm: c_int,
    request: *mut c_int,
) -> R<()> {
    need_request(request)?;
    let send = if in_place(sendbuf) {
        recvbuf as *const c_void
    } else {
        sendbuf
    };
    let (red, send, n) = match kind {
        Reduction::All => (Red::IAll, send, n),
        Reduction::Scan => (Red::IScan, send, n),
        Reduction::Exscan => (Red::IExscan, send, n),
        Reduction::ScatterBlock => {
            let p = local_size(comm)?;
            let total = n.checked_mul(p).ok_or_else(|| count_overflow(name))?;
            (Red::IScatter(vec![n; p]), send, total)
        }
        Reduction::Scatter(cs) => {
            let total = cs
                .iter()
                .try_fold(0usize, |a, &c| a.checked_add(c))
                .ok_or_else(|| count_overflow(name))?;
            (Red::IScatter(cs), send, total)
        }
        Reduction::Reduce(root) => {
            // The state is not held past this line: the intercommunicator
            // path looks it up again.
            let intra = st()?.intra(comm);
            match intra {
                Ok(c) => {
                    let r = check_root(&c, root)?;
                    // In place only at the root; elsewhere the send buffer is read.
                    let send = if in_place(sendbuf) && c.rank() == r {
                        recvbuf as *const c_void
                    } else {
                        sendbuf
                    };
                    (Red::IReduce(r), send, n)
                }
                Err(e) => (inter::reduce_role(e, root, comm)?, sendbuf, n),
            }
        }
    };
    nb_reduction(name, red, send, recvbuf, n, datatype, op, comm, request)
}

fn count_overflow(name: &str) -> crate::MpiErr {
    crate::MpiErr {
        class: MPI_ERR_COUNT,
        msg: format!("{name}: the counts add up beyond the address space"),
    }
}

/// Runs reduction `red` on `T` elements: `input` is the contribution (read
/// from `send`), the result goes to `recv` — now, or for a nonblocking one
/// (returned) when it completes.
///
/// Inlined into each element type's arm of the dispatch, so that a blocking
/// allreduce (the common call) reaches the runtime without the calls and
/// returned values of the general path (`reduce_general`): a fifth of the
/// library's own cost of an 8-byte `MPI_Allreduce`.
#[inline(always)]
fn reduce_as<T: Pod>(
    c: &Comm,
    red: &Red,
    op: &Op<T>,
    send: *const c_void,
    recv: *mut c_void,
    n: usize,
) -> R<Option<Box<dyn CollPending>>> {
    let elem = std::mem::size_of::<T>();
    if matches!(red, Red::All) && n > 0 && (recv as usize).is_multiple_of(std::mem::align_of::<T>())
    {
        // The result goes to `recv` on every rank: reduce there, with no
        // work vector (an allocation and a copy, a tenth of an 8-byte
        // allreduce).
        // In place (MPI_IN_PLACE), the contribution is already there.
        if !std::ptr::eq(send, recv) {
            let len = n * elem;
            if len == 8 {
                // One double or long: a move, not a call into the C
                // library's `memmove` (a tenth of the library's own cost).
                // SAFETY: as below, for 8 bytes; no alignment needed.
                unsafe {
                    let v = std::ptr::read_unaligned(send as *const u64);
                    std::ptr::write_unaligned(recv as *mut u64, v);
                }
            } else {
                // SAFETY: `send` holds `n` elements and `recv` room for `n`
                // (the standard's contract); the standard forbids them to
                // overlap unless they are the same, hence a move, not a copy.
                unsafe { std::ptr::copy(send as *const u8, recv as *mut u8, len) };
            }
        }
        // SAFETY: `recv` is aligned for `T`, not null (checked by the caller
        // for n > 0), and holds `n` elements, which any bytes make valid (Pod);
        // nothing else refers to it during the call.
        let out = unsafe { std::slice::from_raw_parts_mut(recv as *mut T, n) };
        c.allreduce_in_place(out, op)?;
        return Ok(None);
    }
    if matches!(red, Red::IAll)
        && n > 0
        && (recv as usize).is_multiple_of(std::mem::align_of::<T>())
    {
        // Reduced in `recv` itself (in place, the contribution is there):
        // a work vector and the request's result cost three more passes
        // over the data and fresh pages each call.
        if !std::ptr::eq(send, recv) {
            // SAFETY: `send` holds `n` elements and `recv` room for `n` (the
            // standard's contract), which it forbids to overlap unless they
            // are the same (handled).
            unsafe { std::ptr::copy_nonoverlapping(send as *const u8, recv as *mut u8, n * elem) };
        }
        // SAFETY: `recv` aligned (checked), `n` elements, which the program
        // leaves alone until the request completes (the standard's contract).
        let req = unsafe { c.iallreduce_raw(recv as *mut T, n, op) }?;
        return Ok(Some(Box::new(NbBytes::none(req))));
    }
    if let Red::IReduce(root) = *red {
        let aligned = |p: *const c_void| (p as usize).is_multiple_of(std::mem::align_of::<T>());
        if n > 0 && aligned(send) && (c.rank() != root || aligned(recv)) {
            // Folded in the root's `recv`, sent straight from `send` where
            // a rank only passes its part on: no work vector, nor the
            // request's copy of the result.
            // SAFETY: `send` holds `n` elements, readable, and the root's
            // `recv` room for them, left alone by the program, until the
            // request completes (the standard's contract, which forbids
            // overlap but in place); aligned (checked).
            let req = unsafe { c.ireduce_raw(send as *const T, recv as *mut T, n, op, root) }?;
            return Ok(Some(Box::new(NbBytes::none(req))));
        }
    }
    if let Red::IScan | Red::IExscan = red {
        let aligned = |p: *const c_void| (p as usize).is_multiple_of(std::mem::align_of::<T>());
        if n > 0 && aligned(send) && aligned(recv) {
            // Straight between the program's buffers (in place, `send` is
            // `recv`): no work vector, nor the request's copy of the result.
            let exclusive = matches!(red, Red::IExscan);
            // SAFETY: `send` holds `n` elements and `recv` room for them,
            // aligned (checked), the one readable and the other left alone
            // by the program until the request completes (the standard's
            // contract, which forbids overlap but in place).
            let req = unsafe { c.iscan_raw(send as *const T, recv as *mut T, n, op, exclusive) }?;
            return Ok(Some(Box::new(NbBytes::none(req))));
        }
    }
    if let Red::IScatter(cs) = red {
        let aligned = |p: *const c_void| (p as usize).is_multiple_of(std::mem::align_of::<T>());
        if n > 0 && !std::ptr::eq(send, recv) && aligned(send) && aligned(recv) {
            // From `send` into one work buffer of the runtime's, and this
            // rank's block into `recv` on completion: no work vector of the
            // library's, nor the request's own copy of the result.
            // SAFETY: `send` holds `n` elements (the sum of `cs`), read now;
            // `recv` this rank's `cs[rank]`, left alone by the program until
            // the request completes (the standard's contract); both aligned.
            let req = unsafe { c.ireduce_scatter_raw(send as *const T, recv as *mut T, cs, op) }?;
            return Ok(Some(Box::new(NbBytes::none(req))));
        }
    }
    if let Red::Reduce(root) = *red {
        let aligned = |p: *const c_void| (p as usize).is_multiple_of(std::mem::align_of::<T>());
        let me_root = c.rank() == root;
        if n > 0 && aligned(send) && (!me_root || aligned(recv)) {
            // Straight from the program's buffers: the root reduces in its
            // receive buffer (no work vector to fill and copy back: fresh
            // pages of one cost more than the reduction from 256 KiB).
            if me_root && std::ptr::eq(send, recv) {
                // SAFETY: as for the allreduce above: `recv` aligned, `n`
                // elements, nothing else refers to it during the call.
                let out = unsafe { std::slice::from_raw_parts_mut(recv as *mut T, n) };
                c.reduce_in_place(out, op, root)?;
                return Ok(None);
            }
            // SAFETY: `send` aligned (checked) and holding `n` elements,
            // only read; at the root `recv` as above, which the standard
            // forbids to overlap `send` unless they are the same (handled).
            let mine = unsafe { std::slice::from_raw_parts(send as *const T, n) };
            let out: &mut [T] = if me_root {
                // SAFETY: see above.
                unsafe { std::slice::from_raw_parts_mut(recv as *mut T, n) }
            } else {
                &mut []
            };
            c.reduce(mine, out, op, root)?;
            return Ok(None);
        }
    }
    if let Red::Scatter(cs) = red {
        let aligned = |p: *const c_void| (p as usize).is_multiple_of(std::mem::align_of::<T>());
        let k = cs[c.rank()];
        if n > 0 && !std::ptr::eq(send, recv) && aligned(send) && (k == 0 || aligned(recv)) {
            // Straight from the program's buffers: a work vector of the
            // whole send side cost more (fresh pages, a copy) than the
            // reduction itself from a few hundred KiB.
            // SAFETY: `send` aligned (checked) and holding `n` elements,
            // only read; `recv` holds this rank's `k` (the standard's
            // contract), which the standard forbids to overlap `send` when
            // not in place (handled by the general path).
            let mine = unsafe { std::slice::from_raw_parts(send as *const T, n) };
            let out: &mut [T] = if k == 0 {
                &mut []
            } else {
                // SAFETY: see above.
                unsafe { std::slice::from_raw_parts_mut(recv as *mut T, k) }
            };
            c.reduce_scatter(mine, out, cs, op)?;
            return Ok(None);
        }
    }
    if let Red::Scan | Red::Exscan = red {
        let aligned = |p: *const c_void| (p as usize).is_multiple_of(std::mem::align_of::<T>());
        if n > 0 && aligned(send) && aligned(recv) {
            // Straight between the program's buffers: a work vector cost a
            // copy in, a copy out and fresh pages, more than the chain
            // itself at large sizes.
            // SAFETY: `recv` aligned (checked) and holding `n` elements (the
            // standard's contract), nothing else refers to it during the call.
            let out = unsafe { std::slice::from_raw_parts_mut(recv as *mut T, n) };
            let exclusive = matches!(red, Red::Exscan);
            if std::ptr::eq(send, recv) {
                if exclusive {
                    c.exscan_in_place(out, op)?;
                } else {
                    c.scan_in_place(out, op)?;
                }
                return Ok(None);
            }
            // SAFETY: `send` aligned (checked), `n` elements, only read; the
            // standard forbids it to overlap `recv` unless they are the same
            // (handled above).
            let mine = unsafe { std::slice::from_raw_parts(send as *const T, n) };
            if exclusive {
                c.exscan(mine, out, op)?;
            } else {
                c.scan(mine, out, op)?;
            }
            return Ok(None);
        }
    }
    reduce_general(c, red, op, send, recv, n)
}

/// [`reduce_as`] for every other reduction (and an allreduce into a buffer
/// not aligned for its type): through a work vector.
#[inline(never)]
/// `n` zeroed elements of scratch; a size the memory cannot give fails the
/// call with `MPI_ERR_NO_MEM` (counts beyond an int make that reachable)
/// rather than ending the process.
fn scratch<T: Pod>(n: usize) -> R<Vec<T>> {
    let mut v = Vec::new();
    if v.try_reserve_exact(n).is_err() {
        return err(
            MPI_ERR_NO_MEM,
            format!(
                "cannot allocate {} bytes of scratch for {n} elements",
                n.saturating_mul(std::mem::size_of::<T>())
            ),
        );
    }
    v.resize(n, T::zeroed());
    Ok(v)
}

fn reduce_general<T: Pod>(
    c: &Comm,
    red: &Red,
    op: &Op<T>,
    send: *const c_void,
    recv: *mut c_void,
    n: usize,
) -> R<Option<Box<dyn CollPending>>> {
    let elem = std::mem::size_of::<T>();
    let mut work: Vec<T> = scratch(n)?;
    // SAFETY: `send` holds `n` elements of the type (`elem` bytes each); the
    // copy goes into an aligned vector of the same size.
    unsafe {
        std::ptr::copy_nonoverlapping(send as *const u8, work.as_mut_ptr() as *mut u8, n * elem)
    };
    let (result, write): (Vec<T>, bool) = match red {
        Red::Reduce(root) => {
            c.reduce_in_place(&mut work, op, *root)?;
            (work, c.rank() == *root)
        }
        Red::All => {
            c.allreduce_in_place(&mut work, op)?;
            (work, true)
        }
        Red::IAll => {
            let req = c.iallreduce(work, op)?;
            return Ok(Some(Box::new(NbReduce {
                req,
                recv,
                skip: 0,
                n,
            })));
        }
        Red::IReduce(root) => {
            // The result (at the root only) goes to `recv` on completion.
            let n = if c.rank() == *root { n } else { 0 };
            let req = c.ireduce(work, op, *root)?;
            return Ok(Some(Box::new(NbReduce {
                req,
                recv,
                skip: 0,
                n,
            })));
        }
        Red::IScan => {
            let req = c.iscan(work, op)?;
            return Ok(Some(Box::new(NbReduce {
                req,
                recv,
                skip: 0,
                n,
            })));
        }
        Red::IExscan => {
            // Rank 0's result is undefined (MPI): its buffer is left alone, as
            // by MPI_Exscan.
            let n = if c.rank() == 0 { 0 } else { n };
            let req = c.iexscan(work, op)?;
            return Ok(Some(Box::new(NbReduce {
                req,
                recv,
                skip: 0,
                n,
            })));
        }
        Red::IScatter(cs) => {
            let req = c.ireduce_scatter(work, cs, op)?;
            let n = cs[c.rank()];
            return Ok(Some(Box::new(NbReduce {
                req,
                recv,
                skip: 0,
                n,
            })));
        }
        Red::IAllInter(ic) => {
            // After this rank's own contribution, the other group's result.
            let req = ic.iallreduce(work, op)?;
            return Ok(Some(Box::new(NbReduce {
                req,
                recv,
                skip: n,
                n,
            })));
        }
        Red::IReduceInter(ic, root) => {
            let req = ic.ireduce(work, op, *root)?;
            let n = if *root == kumi::inter::Root::Me { n } else { 0 };
            return Ok(Some(Box::new(NbReduce {
                req,
                recv,
                skip: 0,
                n,
            })));
        }
        Red::IScatterInter(ic, cs) => {
            let me = ic.local().rank();
            let skip = n + cs[..me].iter().sum::<usize>();
            let req = ic.iallreduce(work, op)?;
            return Ok(Some(Box::new(NbReduce {
                req,
                recv,
                skip,
                n: cs[me],
            })));
        }
        Red::Local => {
            let mut acc = vec![T::zeroed(); n];
            // SAFETY: `recv` holds `n` elements (the standard's contract); the
            // copy goes into an aligned vector of the same size.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    recv as *const u8,
                    acc.as_mut_ptr() as *mut u8,
                    n * elem,
                )
            };
            op.apply(&work, &mut acc)?;
            (acc, true)
        }
        Red::Scan => {
            c.scan_in_place(&mut work, op)?;
            (work, true)
        }
        Red::Exscan => {
            c.exscan_in_place(&mut work, op)?;
            (work, c.rank() != 0)
        }
        Red::Scatter(cs) => {
            let mut mine = vec![T::zeroed(); cs[c.rank()]];
            c.reduce_scatter(&work, &mut mine, cs, op)?;
            (mine, true)
        }
    };
    if write && !result.is_empty() {
        // SAFETY: `recv` holds room for the result (the standard's contract).
        unsafe {
            std::ptr::copy_nonoverlapping(
                result.as_ptr() as *const u8,
                recv as *mut u8,
                result.len() * elem,
            )
        };
    }
    Ok(None)
}

/// A blocking reduction.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) fn reduction(
    name: &str,
    red: Red,
    send: *const c_void,
    recv: *mut c_void,
    n: usize,
    dt: c_int,
    op: c_int,
    comm: c_int,
) -> R<()> {
    reduction_any(name, &red, send, recv, n, dt, op, comm).map(|_| ())
}

/// `MPI_Allreduce` (`root` `None`) or `MPI_Reduce` (to `root`) in the
/// usual case, inlined into it: a built-in operation on elements of
/// `double`, `int`, `long` (or `long long`) or `float` on an
/// intracommunicator, buffers given (`send` already `recv` for an
/// allreduce in place; a reduce's root in place is resolved here). `None`
/// for anything else, errors included (a root out of range too), which
/// [`reduction`] then checks and reports; the same reduction as there,
/// without its dispatch on every type (a call, a jump table, the `Red`
/// value: a third of the C library's own cost of an 8-byte allreduce,
/// scripts/count-instructions.sh allreduce).
#[inline(always)]
fn reduction_usual(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: c_int,
    op: c_int,
    comm: c_int,
    root: Option<c_int>,
) -> Option<R<()>> {
    builtin_index(op)?;
    if count <= 0 || send.is_null() {
        return None;
    }
    let s = st().ok()?;
    let e = s.comms.get(&comm)?;
    if e.inter.is_some() {
        return None;
    }
    let c = &e.comm;
    let (red, send) = match root {
        None if recv.is_null() => return None,
        None => (Red::All, send),
        Some(root) => {
            let r = usize::try_from(root).ok().filter(|&r| r < c.size())?;
            match c.rank() == r {
                true if recv.is_null() => return None,
                true if in_place(send) => (Red::Reduce(r), recv.cast_const()),
                _ => (Red::Reduce(r), send),
            }
        }
    };
    crate::set_err_comm(comm);
    let n = count as usize;
    macro_rules! go {
        ($t:ty) => {
            blocking_on!(
                s,
                c,
                reduce_elem::<$t>(c, &red, op, dt, send, recv, n).map(|_| ())
            )
        };
    }
    Some(match dt {
        MPI_DOUBLE => go!(f64),
        MPI_INT => go!(i32),
        MPI_LONG | MPI_LONG_LONG => go!(i64),
        MPI_FLOAT => go!(f32),
        _ => return None,
    })
}

/// Dispatches a reduction on the MPI datatype to a Rust element type; a
/// nonblocking one returns its pending request.
#[allow(clippy::too_many_arguments)]
fn reduction_any(
    name: &str,
    red: &Red,
    send: *const c_void,
    recv: *mut c_void,
    n: usize,
    dt: c_int,
    op: c_int,
    comm: c_int,
) -> R<Option<Box<dyn CollPending>>> {
    // A predefined type needs no datatype object here (the match below maps
    // its handle to a Rust type); any other is looked up now, so an invalid
    // one is reported before the other arguments are checked.
    let s = st()?;
    let (dt, d) = reduction_type(&s, dt)?;
    if builtin_index(op).is_some() {
        // A built-in operation calls nothing of this library.
        let c = s.intra_ref(comm)?;
        return blocking_on!(s, c, reduce_typed(name, red, send, recv, n, dt, op, c, d));
    }
    // A user's operation is the program's code, which may call MPI: the
    // state is released first.
    let c = s.intra_ref(comm)?.clone();
    drop(s);
    reduce_typed(name, red, send, recv, n, dt, op, &c, d)
}

/// [`reduction_any`] once the communicator `c` and the datatype object `d`
/// (none for a predefined type) are found.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) fn reduce_typed(
    name: &str,
    red: &Red,
    send: *const c_void,
    recv: *mut c_void,
    n: usize,
    dt: c_int,
    op: c_int,
    c: &Comm,
    d: Option<Datatype>,
) -> R<Option<Box<dyn CollPending>>> {
    if op == MPI_OP_NULL {
        return err(MPI_ERR_OP, "the operation is MPI_OP_NULL");
    }
    if n > 0 && (recv.is_null() || send.is_null()) {
        let root_only = matches!(red, Red::Reduce(r) | Red::IReduce(r) if *r != c.rank());
        if !root_only || send.is_null() {
            return err(MPI_ERR_BUFFER, "a buffer is NULL");
        }
    }
    macro_rules! go {
        ($t:ty) => {
            reduce_elem::<$t>(c, red, op, dt, send, recv, n)
        };
    }
    match dt {
        MPI_CHAR | MPI_SIGNED_CHAR | MPI_INT8_T | MPI_INTEGER1 => go!(i8),
        MPI_UNSIGNED_CHAR | MPI_BYTE | MPI_UINT8_T | MPI_C_BOOL | MPI_CXX_BOOL => go!(u8),
        MPI_SHORT | MPI_INT16_T | MPI_INTEGER2 => go!(i16),
        MPI_UNSIGNED_SHORT | MPI_UINT16_T => go!(u16),
        MPI_INT | MPI_INT32_T | MPI_INTEGER | MPI_INTEGER4 | MPI_WCHAR | MPI_LOGICAL => go!(i32),
        MPI_UNSIGNED | MPI_UINT32_T => go!(u32),
        MPI_LONG | MPI_LONG_LONG | MPI_INT64_T | MPI_AINT | MPI_OFFSET | MPI_COUNT
        | MPI_INTEGER8 => go!(i64),
        MPI_UNSIGNED_LONG | MPI_UNSIGNED_LONG_LONG | MPI_UINT64_T => go!(u64),
        MPI_FLOAT | MPI_REAL | MPI_REAL4 => go!(f32),
        MPI_DOUBLE | MPI_DOUBLE_PRECISION | MPI_REAL8 => go!(f64),
        MPI_2INT | MPI_2INTEGER => go!(Loc<i32>),
        MPI_2REAL => go!(Loc<f32>),
        MPI_2DOUBLE_PRECISION => go!(Loc<f64>),
        MPI_FLOAT_INT => go!(LocInt<f32>),
        MPI_DOUBLE_INT => go!(LocInt<f64>),
        MPI_LONG_INT => go!(LocInt<i64>),
        MPI_SHORT_INT => go!(LocInt<i16>),
        MPI_C_FLOAT_COMPLEX | MPI_CXX_FLOAT_COMPLEX | MPI_COMPLEX | MPI_COMPLEX8 => {
            go!(Complex<f32>)
        }
        MPI_C_DOUBLE_COMPLEX | MPI_CXX_DOUBLE_COMPLEX | MPI_DOUBLE_COMPLEX | MPI_COMPLEX16 => {
            go!(Complex<f64>)
        }
        #[cfg(target_arch = "x86_64")]
        MPI_LONG_DOUBLE => go!(LongDouble),
        #[cfg(target_arch = "x86_64")]
        MPI_C_LONG_DOUBLE_COMPLEX | MPI_CXX_LONG_DOUBLE_COMPLEX => go!(Complex<LongDouble>),
        #[cfg(target_arch = "x86_64")]
        MPI_LONG_DOUBLE_INT => go!(LocInt<LongDouble>),
        // Fortran's REAL*16 is IEEE quadruple precision (gfortran), which
        // neither C's long double nor anything here computes in.
        MPI_REAL16 | MPI_COMPLEX32 if builtin(op).is_some() => err(
            MPI_ERR_TYPE,
            format!("{name}: built-in operations on quadruple precision (MPI_REAL16, MPI_COMPLEX32) are not supported by kumi yet"),
        ),
        _ if builtin(op).is_some() => err(
            MPI_ERR_OP,
            format!("{name}: the built-in operation {op:#x} on datatype {dt:#x} is not supported by kumi yet"),
        ),
        _ => {
            let d = match d {
                Some(d) => d,
                None => st()?.dtype(dt)?,
            };
            reduce_derived(name, c, red, op, dt, &d, send, recv, n)
        }
    }
}

/// How many elements of a reduction's result this rank's `recv` gets
/// (none: the buffer is not written).
fn result_count(red: &Red, c: &Comm, n: usize) -> Option<usize> {
    match red {
        Red::All | Red::IAll | Red::Scan | Red::IScan | Red::Local => Some(n),
        Red::Reduce(r) | Red::IReduce(r) => (c.rank() == *r).then_some(n),
        Red::Exscan | Red::IExscan => (c.rank() != 0).then_some(n),
        Red::Scatter(cs) | Red::IScatter(cs) => Some(cs[c.rank()]),
        Red::IAllInter(_) => Some(n),
        Red::IReduceInter(_, root) => (*root == kumi::inter::Root::Me).then_some(n),
        Red::IScatterInter(ic, cs) => Some(cs[ic.local().rank()]),
    }
}

/// `red` with its counts in units `k` times smaller (its per-rank counts
/// times `k`).
fn scaled(red: &Red, k: usize) -> Red {
    match red {
        Red::Scatter(cs) => Red::Scatter(cs.iter().map(|&x| x * k).collect()),
        Red::IScatter(cs) => Red::IScatter(cs.iter().map(|&x| x * k).collect()),
        Red::IScatterInter(ic, cs) => {
            Red::IScatterInter(ic.clone(), cs.iter().map(|&x| x * k).collect())
        }
        r => r.clone(),
    }
}

/// Writes a staged result to the program's buffer.
type WriteBack = Box<dyn FnOnce(&[u8])>;

/// A reduction whose result sits in a staging buffer: written to the
/// program's buffer (by `write`) once the reduction there completes.
struct Staged {
    inner: Box<dyn CollPending>,
    stage: Vec<u8>,
    write: WriteBack,
}

impl CollPending for Staged {
    fn test(&mut self) -> kumi::Result<bool> {
        self.inner.test()
    }

    fn finish(self: Box<Self>) -> R<()> {
        let Staged {
            inner,
            stage,
            write,
        } = *self;
        inner.finish()?;
        write(&stage);
        Ok(())
    }
}

/// A reduction with the program's operation on a datatype with no Rust
/// element type of its own (a derived type, or a predefined one not named
/// above): each element as its memory image (its extent, zeros between the
/// type's runs), reduced as bytes in whole images (`Op::user_grouped`) so
/// that the program's function finds each field at its displacement, then
/// only the type's bytes copied to `recv` (a gap between them may hold the
/// program's data); without staging when the type covers its extent.
#[allow(clippy::too_many_arguments)]
fn reduce_derived(
    name: &str,
    c: &Comm,
    red: &Red,
    op: c_int,
    dt: c_int,
    d: &Datatype,
    send: *const c_void,
    recv: *mut c_void,
    n: usize,
) -> R<Option<Box<dyn CollPending>>> {
    if builtin(op).is_some() {
        // As MPICH: MPI defines the built-in operations on the predefined
        // types (and their pairs) only.
        return err(
            MPI_ERR_OP,
            format!("{name}: the built-in operation {op:#x} is not defined on datatype {dt:#x} (built-in operations take predefined types; a derived type needs an operation of the program's)"),
        );
    }
    let local = matches!(red, Red::Local);
    let writes = result_count(red, c, n);
    let (lb, ext) = (d.lb(), d.extent());
    if ext <= 0 || d.true_lb() < lb || d.true_lb() + d.true_extent() > lb + ext {
        return err(
            MPI_ERR_TYPE,
            format!("{name} with a user operation on datatype {dt:#x}, whose data reaches outside its extent, is not supported by kumi yet"),
        );
    }
    let e = ext as usize;
    let o = user_op_grouped::<u8>(op, dt, e, lb)?;
    if d.is_contiguous() {
        // The elements are their images: reduce in place.
        return reduce_as::<u8>(c, &scaled(red, e), &o, send, recv, n * e);
    }
    // Image byte `o - lb` holds the type's byte at offset `o` from the
    // buffer (the runs of element i lie in [i * ext + lb, (i + 1) * ext + lb)).
    let image = |p: *const c_void| {
        let mut v = vec![0u8; n * e];
        let _ = d.walk(n, |off, len| {
            // SAFETY: the program passes `n` elements of `d` at `p`, so each
            // run of each element is readable; `off - lb + len` stays inside
            // the image (the runs lie within the extent).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    (p as *const u8).offset(off),
                    v.as_mut_ptr().add((off - lb) as usize),
                    len,
                )
            };
            ControlFlow::Continue(())
        });
        v
    };
    let sb = image(send);
    let mut rb = if local { image(recv) } else { vec![0u8; n * e] };
    let rp = rb.as_mut_ptr() as *mut c_void;
    let r = reduce_as::<u8>(
        c,
        &scaled(red, e),
        &o,
        sb.as_ptr() as *const c_void,
        rp,
        n * e,
    )?;
    let d = d.clone();
    let write = move |out: &[u8]| {
        let _ = d.walk(writes.unwrap_or(0), |off, len| {
            // SAFETY: `recv` holds room for the result's elements of the
            // type (the standard's contract): each run of each is writable.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    out.as_ptr().add((off - lb) as usize),
                    (recv as *mut u8).offset(off),
                    len,
                )
            };
            ControlFlow::Continue(())
        });
    };
    Ok(staged(r, rb, write))
}

/// The result of a staged reduction: written now if it is complete (a
/// blocking one), else when the pending one completes.
fn staged(
    r: Option<Box<dyn CollPending>>,
    stage: Vec<u8>,
    write: impl FnOnce(&[u8]) + 'static,
) -> Option<Box<dyn CollPending>> {
    match r {
        None => {
            write(&stage);
            None
        }
        Some(inner) => Some(Box::new(Staged {
            inner,
            stage,
            write: Box::new(write),
        })),
    }
}

/// Whether `dt` is one of MPICH's predefined basic types (`0x4c00SSII`),
/// whose handle alone says its layout.
fn is_predefined(dt: c_int) -> bool {
    dt as u32 & 0xff00_0000 == 0x4c00_0000
}

/// The datatype a reduction computes in: a predefined one as it is (no
/// object needed: its handle names the Rust type), a parameterized Fortran
/// 90 one as its predefined type, any other with its object (looked up now,
/// so an invalid one is reported before the other arguments are checked).
pub(crate) fn reduction_type(s: &State, dt: c_int) -> R<(c_int, Option<Datatype>)> {
    if is_predefined(dt) {
        return Ok((dt, None));
    }
    if let Some(&base) = s.f90_base.get(&dt) {
        return Ok((base, None));
    }
    Ok((dt, Some(s.dtype(dt)?)))
}

mpi! {
    fn MPI_Iallreduce / PMPI_Iallreduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, comm: c_int, request: *mut c_int) {
        start_reduction("MPI_Iallreduce", Reduction::All, sendbuf, recvbuf, crate::state::count(count)?, datatype, op, comm, request)
    }

    fn MPI_Ireduce / PMPI_Ireduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, root: c_int, comm: c_int, request: *mut c_int) {
        start_reduction("MPI_Ireduce", Reduction::Reduce(root), sendbuf, recvbuf, crate::state::count(count)?, datatype, op, comm, request)
    }

    fn MPI_Iscan / PMPI_Iscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, comm: c_int, request: *mut c_int) {
        start_reduction("MPI_Iscan", Reduction::Scan, sendbuf, recvbuf, crate::state::count(count)?, datatype, op, comm, request)
    }

    fn MPI_Iexscan / PMPI_Iexscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, comm: c_int, request: *mut c_int) {
        start_reduction("MPI_Iexscan", Reduction::Exscan, sendbuf, recvbuf, crate::state::count(count)?, datatype, op, comm, request)
    }

    fn MPI_Ireduce_scatter_block / PMPI_Ireduce_scatter_block(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: c_int, op: c_int, comm: c_int, request: *mut c_int) {
        start_reduction("MPI_Ireduce_scatter_block", Reduction::ScatterBlock, sendbuf, recvbuf, crate::state::count(recvcount)?, datatype, op, comm, request)
    }

    fn MPI_Ireduce_scatter / PMPI_Ireduce_scatter(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: c_int, op: c_int, comm: c_int, request: *mut c_int) {
        let cs = counts(recvcounts, local_size(comm)?, "recvcounts")?;
        start_reduction("MPI_Ireduce_scatter", Reduction::Scatter(cs), sendbuf, recvbuf, 0, datatype, op, comm, request)
    }

    fn MPI_Reduce / PMPI_Reduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, root: c_int, comm: c_int) {
        if let Some(done) = reduction_usual(sendbuf, recvbuf, count, datatype, op, comm, Some(root)) {
            return done;
        }
        let c = st()?.intra(comm);
        let c = match c {
            Ok(c) => c,
            Err(e) => return inter::reduce(e, sendbuf, recvbuf, count, datatype, op, root, comm),
        };
        let r = check_root(&c, root)?;
        let send = if in_place(sendbuf) && c.rank() == r { recvbuf as *const c_void } else { sendbuf };
        reduction("MPI_Reduce", Red::Reduce(r), send, recvbuf, crate::state::count(count)?, datatype, op, comm)
    }

    fn MPI_Allreduce / PMPI_Allreduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, comm: c_int) {
        let send = if in_place(sendbuf) { recvbuf as *const c_void } else { sendbuf };
        if let Some(done) = reduction_usual(send, recvbuf, count, datatype, op, comm, None) {
            return done;
        }
        match reduction("MPI_Allreduce", Red::All, send, recvbuf, crate::state::count(count)?, datatype, op, comm) {
            Err(e) if e.class == MPI_ERR_COMM => inter::allreduce(e, sendbuf, recvbuf, count, datatype, op, comm),
            r => r,
        }
    }

    fn MPI_Reduce_local / PMPI_Reduce_local(inbuf: *const c_void, inoutbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int) {
        // No communication: MPI_COMM_SELF stands in for the communicator the
        // dispatch wants.
        reduce_local(inbuf, inoutbuf, crate::state::count(count)?, datatype, op)
    }

    fn MPI_Scan / PMPI_Scan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, comm: c_int) {
        let send = if in_place(sendbuf) { recvbuf as *const c_void } else { sendbuf };
        reduction("MPI_Scan", Red::Scan, send, recvbuf, crate::state::count(count)?, datatype, op, comm)
    }

    fn MPI_Exscan / PMPI_Exscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, comm: c_int) {
        let send = if in_place(sendbuf) { recvbuf as *const c_void } else { sendbuf };
        reduction("MPI_Exscan", Red::Exscan, send, recvbuf, crate::state::count(count)?, datatype, op, comm)
    }

    fn MPI_Reduce_scatter_block / PMPI_Reduce_scatter_block(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: c_int, op: c_int, comm: c_int) {
        let c = st()?.intra(comm);
        let p = match c {
            Ok(c) => c.size(),
            Err(e) => return inter::reduce_scatter(e, sendbuf, recvbuf, inter::Counts::Block(recvcount), datatype, op, comm),
        };
        let n = crate::state::count(recvcount)?;
        let send = if in_place(sendbuf) { recvbuf as *const c_void } else { sendbuf };
        reduction("MPI_Reduce_scatter_block", Red::Scatter(vec![n; p]), send, recvbuf, n * p, datatype, op, comm)
    }

    fn MPI_Reduce_scatter / PMPI_Reduce_scatter(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: c_int, op: c_int, comm: c_int) {
        let c = st()?.intra(comm);
        let p = match c {
            Ok(c) => c.size(),
            Err(e) => return inter::reduce_scatter(e, sendbuf, recvbuf, inter::Counts::Each(recvcounts), datatype, op, comm),
        };
        let cs = counts(recvcounts, p, "recvcounts")?;
        let total = cs.iter().sum();
        let send = if in_place(sendbuf) { recvbuf as *const c_void } else { sendbuf };
        reduction("MPI_Reduce_scatter", Red::Scatter(cs), send, recvbuf, total, datatype, op, comm)
    }

    fn MPI_Op_create / PMPI_Op_create(user_fn: Option<UserFn>, commute: c_int, op: *mut c_int) {
        op_create(user_fn.map(UserOp::Int), commute, op)
    }

    fn MPI_Op_create_c / PMPI_Op_create_c(user_fn: Option<UserFnC>, commute: c_int, op: *mut c_int) {
        op_create(user_fn.map(UserOp::Big), commute, op)
    }

    fn MPI_Op_free / PMPI_Op_free(op: *mut c_int) {
        let h = read(op, "op")?;
        if st()?.ops.remove(&h).is_none() {
            return err(MPI_ERR_OP, format!("{h:#x} is not an operation the program created"));
        }
        out(op, "op", MPI_OP_NULL)
    }

    fn MPI_Op_commutative / PMPI_Op_commutative(op: c_int, commute: *mut c_int) {
        let c = match op {
            MPI_MAX..=MPI_MAXLOC => true,
            // Neither replacing nor doing nothing is commutative.
            MPI_REPLACE | MPI_NO_OP => false,
            h => match st()?.ops.get(&h) {
                Some(&(_, c)) => c,
                None => return err(MPI_ERR_OP, format!("{h:#x} is not an operation")),
            },
        };
        out(commute, "commute", c as c_int)
    }
}
