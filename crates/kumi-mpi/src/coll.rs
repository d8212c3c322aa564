//! Collectives, mapped onto the runtime's collectives on [`kumi::Comm`].
//!
//! The runtime's collectives are typed (`&[T]`, `Op<T>`); this module maps an
//! MPI call onto them:
//! - data movement (bcast, gather, scatter, allgather, alltoall and their
//!   v-variants) runs on the packed bytes of the datatype (`T = u8`); a
//!   non-contiguous layout, or displacements, are packed before and unpacked
//!   after by [`kumi::datatype`];
//! - reductions run on the Rust type of the MPI basic type (`MPI_DOUBLE` is
//!   `f64`, `MPI_2INT` is `Loc<i32>`) with the runtime's built-in operation, or
//!   with the program's `MPI_User_function` wrapped as an `Op::user` (on blocks
//!   of the type's extent for contiguous derived types).
//!
//! Nonblocking collectives (`MPI_Ibarrier`, `MPI_Iallreduce`) go through the
//! same dispatch: the runtime's `CollRequest` is stored in the request table
//! behind [`CollPending`] (as an opaque value) together with the receive
//! buffer, and the reduced vector is copied there when a wait or test
//! completes the request. The contribution is copied when the call starts,
//! which the standard allows (the buffer must not change until completion).
//!
//! What the runtime does not provide fails naming the function; nothing here
//! runs an algorithm of its own.

use crate::comm::Neighbors;
use crate::consts::*;
use crate::large::*;
use crate::state::{
    count, out, read, slice, st, CollPending, ReqEntry, State, UserFn, UserFnC, UserOp,
};
use crate::{err, R};
use bytemuck::Pod;
use kumi::datatype::Datatype;
use kumi::inter::InterComm;
#[cfg(target_arch = "x86_64")]
use kumi::LongDouble;
use kumi::{Builtin, CollRequest, Comm, Complex, Elem, Loc, LocInt, Op};
use std::ffi::{c_int, c_void};
use std::ops::ControlFlow;
use std::rc::Rc;
use std::sync::OnceLock;

mod inter;
pub(crate) mod v;

pub(crate) use v::*;

fn in_place(p: *const c_void) -> bool {
    p as usize == IN_PLACE
}

fn lookup(comm: c_int, dt: c_int) -> R<(Comm, Datatype)> {
    let mut s = st()?;
    let c = s.intra(comm)?;
    Ok((c, s.dtype(dt)?))
}

fn check_root(c: &Comm, root: c_int) -> R<usize> {
    if root < 0 || root as usize >= c.size() {
        return err(
            MPI_ERR_ROOT,
            format!(
                "root {root} is not a rank of this communicator of {} ranks",
                c.size()
            ),
        );
    }
    Ok(root as usize)
}

/// The packed bytes of `n` elements of `d` at `buf`.
fn pack(buf: *const c_void, n: usize, d: &Datatype) -> Vec<u8> {
    let mut v = vec![0u8; d.packed_size(n)];
    if !v.is_empty() {
        // SAFETY: the standard makes the caller pass `n` elements of `d` at `buf`.
        unsafe { d.pack(buf as *const u8, n, &mut v) };
    }
    v
}

/// The user's send and receive buffers themselves, as bytes, when both types
/// are predefined (so the bytes are the elements) and the buffers do not
/// overlap (MPI forbids that outside `MPI_IN_PLACE`; a program that does it
/// anyway takes the packing path, which copies first). `None`: pack.
///
/// # Safety
/// The caller passes what MPI requires: `sn` elements of `st` readable at
/// `sendbuf` and `rn` of `rt` writable at `recvbuf`, untouched by the program
/// during the call.
unsafe fn direct_pair<'a>(
    sendbuf: *const c_void,
    sn: usize,
    st: c_int,
    recvbuf: *mut c_void,
    rn: usize,
    rt: c_int,
) -> R<Option<(&'a [u8], &'a mut [u8])>> {
    let (Some(sl), Some(rl)) = (
        crate::p2p::contig_bytes(sendbuf, sn, st)?,
        crate::p2p::contig_bytes(recvbuf, rn, rt)?,
    ) else {
        return Ok(None);
    };
    if sl == 0 || rl == 0 {
        return Ok(None);
    }
    let (s0, r0) = (sendbuf as usize, recvbuf as usize);
    if s0 < r0 + rl && r0 < s0 + sl {
        return Ok(None);
    }
    // SAFETY: the caller's contract; the two ranges are disjoint (checked).
    Ok(Some(unsafe {
        (
            std::slice::from_raw_parts(sendbuf as *const u8, sl),
            std::slice::from_raw_parts_mut(recvbuf as *mut u8, rl),
        )
    }))
}

/// Writes packed bytes into `n` elements of `d` at `buf`.
fn unpack(bytes: &[u8], buf: *mut c_void, n: usize, d: &Datatype) {
    if !bytes.is_empty() {
        // SAFETY: the standard makes the caller pass room for `n` elements.
        unsafe { d.unpack(bytes, buf as *mut u8, n) };
    }
}

/// `buf` displaced by `i` extents of `d`.
fn at(buf: *const c_void, i: usize, d: &Datatype) -> *mut c_void {
    (buf as *mut u8).wrapping_offset(i as isize * d.extent()) as *mut c_void
}

/// Checks the request argument before a nonblocking collective starts (once
/// started, it could not be handed back).
pub(crate) fn need_request(p: *mut c_int) -> R<()> {
    if p.is_null() {
        return err(MPI_ERR_ARG, "the output argument `request` is NULL");
    }
    Ok(())
}

// ----- reductions ------------------------------------------------------------------

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
enum Red {
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

/// A nonblocking collective on packed bytes in flight: on completion its
/// result is unpacked, in order, into the segments of `out` (buffer, element
/// count, datatype); nothing when `out` is empty.
struct NbBytes {
    req: CollRequest<u8>,
    out: Vec<(*mut c_void, usize, Datatype)>,
}

impl NbBytes {
    /// The result goes to `n` elements of `d` at `buf`.
    fn one(req: CollRequest<u8>, buf: *mut c_void, n: usize, d: Datatype) -> NbBytes {
        NbBytes {
            req,
            out: vec![(buf, n, d)],
        }
    }

    /// The result goes to the segments (buffer, element count), all of `d`.
    fn typed(req: CollRequest<u8>, segs: Vec<(*mut c_void, usize)>, d: &Datatype) -> NbBytes {
        NbBytes {
            req,
            out: of_type(segs, d),
        }
    }

    /// This rank receives nothing.
    fn none(req: CollRequest<u8>) -> NbBytes {
        NbBytes {
            req,
            out: Vec::new(),
        }
    }
}

impl CollPending for NbBytes {
    fn test(&mut self) -> kumi::Result<bool> {
        self.req.test()
    }

    fn finish(self: Box<Self>) -> R<()> {
        let NbBytes { req, out } = *self;
        let result = req.wait()?;
        if out.is_empty() {
            return Ok(());
        }
        let want: usize = out.iter().map(|(_, n, d)| d.packed_size(*n)).sum();
        if result.len() != want {
            return err(
                MPI_ERR_TRUNCATE,
                format!(
                    "{} bytes arrived for receive buffers of {want} (count and type \
                     signatures differ between ranks)",
                    result.len()
                ),
            );
        }
        let mut off = 0;
        for (buf, n, d) in &out {
            let len = d.packed_size(*n);
            unpack(&result[off..off + len], *buf, *n, d);
            off += len;
        }
        Ok(())
    }
}

/// A collective that went one way or the other ([`mpi_coll_pair`]).
enum Begun {
    /// Started (as a request).
    Started(NbBytes),
    /// Done already (a blocking call that took a way of its own).
    Done,
}

impl Begun {
    /// For the blocking call: waits for what was started.
    fn finish(self) -> R<()> {
        match self {
            Begun::Started(nb) => crate::state::CollPending::finish(Box::new(nb)),
            Begun::Done => Ok(()),
        }
    }

    /// For the nonblocking call, which never takes the blocking way.
    fn started(self) -> R<NbBytes> {
        match self {
            Begun::Started(nb) => Ok(nb),
            Begun::Done => err(
                MPI_ERR_INTERN,
                "a nonblocking collective ran as a blocking one",
            ),
        }
    }
}

/// A segment of a program's buffer: where, how many elements, of which type.
type Seg = (*mut c_void, usize, Datatype);

/// The segments (buffer, element count), all of type `d`.
fn of_type(segs: Vec<(*mut c_void, usize)>, d: &Datatype) -> Vec<Seg> {
    segs.into_iter().map(|(b, n)| (b, n, d.clone())).collect()
}

/// The packed bytes of typed segments, one after the other.
fn pack_typed(segs: &[Seg]) -> Vec<u8> {
    let mut v = Vec::with_capacity(segs.iter().map(|(_, n, d)| d.packed_size(*n)).sum());
    for (buf, n, d) in segs {
        v.extend_from_slice(&pack(*buf, *n, d));
    }
    v
}

/// Typed segments as (start, bytes), if every type is contiguous: the
/// program's own bytes are then the packed ones.
fn contiguous_bytes(segs: &[Seg]) -> Option<Vec<(*mut u8, usize)>> {
    segs.iter()
        .map(|(b, n, d)| {
            d.is_contiguous()
                .then(|| (b.cast::<u8>(), d.packed_size(*n)))
        })
        .collect()
}

/// Segments of elements of `d` as (start, bytes).
fn in_bytes(v: Vec<(*mut c_void, usize)>, d: &Datatype) -> Vec<(*mut u8, usize)> {
    v.into_iter()
        .map(|(b, n)| (b.cast::<u8>(), d.packed_size(n)))
        .collect()
}

/// Segments only read.
fn read_only(v: Vec<(*mut u8, usize)>) -> Vec<(*const u8, usize)> {
    v.into_iter().map(|(b, n)| (b.cast_const(), n)).collect()
}

/// MPI_Gather's and MPI_Igather's arguments as the runtime takes them: the
/// receive ones read at the root only (MPI 4.1 section 6.5), the send ones
/// the root's own block in place.
struct Gather {
    recv: Option<(Datatype, usize)>,
    sd: Datatype,
    sbuf: *const c_void,
    sn: usize,
}

#[allow(clippy::too_many_arguments)]
fn gather_args(
    root: bool,
    me: usize,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
) -> R<Gather> {
    let recv = if root {
        Some((st()?.dtype(recvtype)?, crate::state::count(recvcount)?))
    } else {
        None
    };
    let (sd, sbuf, sn) = match &recv {
        Some((rd, rn)) if in_place(sendbuf) => {
            (rd.clone(), at(recvbuf, me * rn, rd).cast_const(), *rn)
        }
        _ => (
            st()?.dtype(sendtype)?,
            sendbuf,
            crate::state::count(sendcount)?,
        ),
    };
    Ok(Gather { recv, sd, sbuf, sn })
}

impl Gather {
    /// This rank's send and (at the root) the receive blocks as segments,
    /// for the runtime's collective over segments: the program's buffers
    /// where the types are contiguous, packed copies where not
    /// ([`Packed`]). Every rank takes this one path whatever its layouts
    /// (which MPI lets differ between ranks), so all run one algorithm.
    #[allow(clippy::type_complexity)]
    fn segments(
        &self,
        recvbuf: *mut c_void,
        p: usize,
    ) -> ((*const u8, usize), Vec<(*mut u8, usize)>, Packed) {
        let mut packed = Packed::default();
        let send = if self.sd.is_contiguous() {
            (self.sbuf.cast::<u8>(), self.sd.packed_size(self.sn))
        } else {
            packed.send = pack(self.sbuf, self.sn, &self.sd);
            (packed.send.as_ptr(), packed.send.len())
        };
        let recv = match &self.recv {
            None => Vec::new(),
            Some((rd, rn)) if rd.is_contiguous() => {
                in_bytes(even_segments(recvbuf, p, *rn, rd), rd)
            }
            Some((rd, rn)) => packed.receive(recvbuf, *rn * p, rd, p),
        };
        (send, recv, packed)
    }
}

/// MPI_Scatter's and MPI_Iscatter's arguments as the runtime takes them:
/// the send ones read at the root only, the receive ones the root's own
/// block in place.
struct Scatter {
    send: Option<(Datatype, usize)>,
    in_place: bool,
    rd: Datatype,
    rn: usize,
}

fn scatter_args(
    root: bool,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
) -> R<Scatter> {
    let send = if root {
        Some((st()?.dtype(sendtype)?, crate::state::count(sendcount)?))
    } else {
        None
    };
    let in_place = in_place(recvbuf) && root;
    let (rd, rn) = match &send {
        Some(s) if in_place => s.clone(),
        _ => (st()?.dtype(recvtype)?, crate::state::count(recvcount)?),
    };
    Ok(Scatter {
        send,
        in_place,
        rd,
        rn,
    })
}

impl Scatter {
    /// (At the root) the send blocks and this rank's receive as segments,
    /// the program's buffers or packed copies, as [`Gather::segments`].
    #[allow(clippy::type_complexity)]
    fn segments(
        &self,
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        p: usize,
        me: usize,
    ) -> (Vec<(*const u8, usize)>, (*mut u8, usize), Packed) {
        let mut packed = Packed::default();
        let send = match &self.send {
            None => Vec::new(),
            Some((sd, sn)) if sd.is_contiguous() => {
                read_only(in_bytes(even_segments(sendbuf, p, *sn, sd), sd))
            }
            Some((sd, sn)) => {
                packed.send = pack(sendbuf, sn * p, sd);
                let block = sd.packed_size(*sn);
                let base = packed.send.as_ptr();
                (0..p)
                    .map(|j| (base.wrapping_add(j * block), block))
                    .collect()
            }
        };
        let recv = if self.in_place {
            // The root's block stays where it is (a packed copy's is
            // left alone too: nothing to unpack).
            (send[me].0.cast_mut(), send[me].1)
        } else if self.rd.is_contiguous() {
            (recvbuf.cast::<u8>(), self.rd.packed_size(self.rn))
        } else {
            packed.receive(recvbuf, self.rn, &self.rd, 1)[0]
        };
        (send, recv, packed)
    }
}

/// Packed copies standing in for a collective's buffers whose datatypes
/// are not contiguous: what this rank sends, and the bytes it receives with
/// the buffer they are unpacked into when the collective is done. The
/// vectors' heap storage does not move with this value, so the segments
/// made over them stay valid while it lives.
#[derive(Default)]
struct Packed {
    send: Vec<u8>,
    recv: Option<(Vec<u8>, *mut c_void, usize, Datatype)>,
}

impl Packed {
    /// Room for the packed form of `n` elements of `d`, unpacked into
    /// `buf` by [`Packed::finish`], as `k` equal segments.
    fn receive(
        &mut self,
        buf: *mut c_void,
        n: usize,
        d: &Datatype,
        k: usize,
    ) -> Vec<(*mut u8, usize)> {
        let len = d.packed_size(n);
        let mut bytes = vec![0u8; len];
        let (base, block) = (bytes.as_mut_ptr(), len / k.max(1));
        self.recv = Some((bytes, buf, n, d.clone()));
        (0..k)
            .map(|j| (base.wrapping_add(j * block), block))
            .collect()
    }

    /// Unpacks what arrived into the program's buffer.
    fn finish(self) {
        if let Some((bytes, buf, n, d)) = self.recv {
            unpack(&bytes, buf, n, &d);
        }
    }
}

/// A nonblocking collective over [`Packed`] copies: unpacked when it
/// completes.
struct NbPacked(CollRequest<u8>, Packed);

impl CollPending for NbPacked {
    fn test(&mut self) -> kumi::Result<bool> {
        self.0.test()
    }

    fn finish(self: Box<Self>) -> R<()> {
        let NbPacked(req, packed) = *self;
        req.wait()?;
        packed.finish();
        Ok(())
    }
}

/// The communicator, neighbours and datatypes of a neighbourhood collective.
fn neighbor_args(
    comm: c_int,
    sendtype: c_int,
    recvtype: c_int,
) -> R<(Comm, Neighbors, Datatype, Datatype)> {
    let mut s = st()?;
    let (c, nb) = crate::comm::neighbors(&mut s, comm)?;
    Ok((c, nb, s.dtype(sendtype)?, s.dtype(recvtype)?))
}

/// `MPI_(I)neighbor_allgather`, started (done at once when `blocking`
/// and the types are contiguous).
#[allow(clippy::too_many_arguments)]
fn neighbor_allgather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    comm: c_int,
    blocking: bool,
) -> R<Begun> {
    let (c, nb, sd, rd) = neighbor_args(comm, sendtype, recvtype)?;
    let send = [(sendbuf as *mut c_void, count(sendcount)?, sd)];
    let recv = of_type(
        even_segments(recvbuf, nb.indegree(), count(recvcount)?, &rd),
        &rd,
    );
    neighbor_start(&c, &nb, &send, true, recv, blocking)
}

/// `MPI_(I)neighbor_alltoall`, started (done at once when `blocking`
/// and the types are contiguous).
#[allow(clippy::too_many_arguments)]
fn neighbor_alltoall(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    comm: c_int,
    blocking: bool,
) -> R<Begun> {
    let (c, nb, sd, rd) = neighbor_args(comm, sendtype, recvtype)?;
    let send = even_segments(sendbuf, nb.outdegree(), count(sendcount)?, &sd);
    let recv = even_segments(recvbuf, nb.indegree(), count(recvcount)?, &rd);
    neighbor_start(
        &c,
        &nb,
        &of_type(send, &sd),
        false,
        of_type(recv, &rd),
        blocking,
    )
}

/// Starts a neighbourhood collective with neighbours `nb`: `send` holds one
/// segment sent to every out-neighbour (`shared`, the allgathers) or one
/// per out-neighbour (the all-to-alls); `recv` one segment per in-neighbour.
/// Nothing is sent to or received from an `MPI_PROC_NULL` neighbour of a
/// Cartesian grid, and its receive segment is left alone.
fn neighbor_start(
    c: &Comm,
    nb: &Neighbors,
    send: &[Seg],
    shared: bool,
    mut recv: Vec<Seg>,
    blocking: bool,
) -> R<Begun> {
    let block = |j: usize| if shared { 0 } else { j };
    let (mut sends, mut recvs) = (
        smallvec::SmallVec::<[_; 16]>::new(),
        smallvec::SmallVec::<[_; 16]>::new(),
    );
    match nb {
        Neighbors::Cart(nb) => {
            for (seg, n) in recv.iter_mut().zip(nb) {
                if n.is_none() {
                    seg.1 = 0;
                }
            }
            for d in 0..nb.len() / 2 {
                let (src, dst) = (nb[2 * d], nb[2 * d + 1]);
                // What goes to the dest side arrives at that rank's source
                // side, which it receives first: list it first, so that a
                // rank that is both neighbours (a periodic dimension of 2, or
                // of 1) pairs them right (kumi_core::coll::exchange pairs
                // messages in order): block s of the sender lands in block
                // s^1 of the receiver in every dimension, as MPI-4.1 section
                // 8.6 requires.
                sends.extend(dst.map(|t| (t, block(2 * d + 1))));
                sends.extend(src.map(|t| (t, block(2 * d))));
                recvs.extend(src.map(|f| (f, 2 * d)));
                recvs.extend(dst.map(|f| (f, 2 * d + 1)));
            }
        }
        Neighbors::Graph { sources, dests } => {
            // The k-th edge from a rank to another pairs with the k-th edge
            // into the other from it (MPI-4.1 section 8.6): both lists in
            // their order.
            sends.extend(dests.iter().enumerate().map(|(j, &t)| (t, block(j))));
            recvs.extend(sources.iter().enumerate().map(|(i, &f)| (f, i)));
        }
    }
    // Every type contiguous: straight between the program's buffers.
    if let (Some(sb), Some(rb)) = (contiguous_bytes(send), contiguous_bytes(&recv)) {
        let sb = read_only(sb);
        if blocking {
            // SAFETY: MPI's contract: the send buffers readable and the
            // receive ones writable for the call; receive blocks overlap
            // nothing (each is named once above).
            unsafe { c.neighbor_exchange_segments(&sb, &sends, &rb, &recvs) }?;
            return Ok(Begun::Done);
        }
        // SAFETY: as above, until the request completes.
        let req = unsafe { c.ineighbor_exchange_segments(&sb, &sends, &rb, &recvs) }?;
        return Ok(Begun::Started(NbBytes::none(req)));
    }
    let send_bytes: Vec<usize> = send.iter().map(|(_, n, d)| d.packed_size(*n)).collect();
    let recv_bytes: Vec<usize> = recv.iter().map(|(_, n, d)| d.packed_size(*n)).collect();
    let req = c.ineighbor_exchange(pack_typed(send), &send_bytes, &sends, &recv_bytes, &recvs)?;
    Ok(Begun::Started(NbBytes { req, out: recv }))
}

/// The segments of a neighbourhood allgather or all-to-all with one count
/// per block: block `i` at `i * count` extents of `d`.
fn even_segments(
    buf: *const c_void,
    k: usize,
    count: usize,
    d: &Datatype,
) -> Vec<(*mut c_void, usize)> {
    (0..k).map(|i| (at(buf, i * count, d), count)).collect()
}

/// Starts nonblocking reduction `red` (see [`reduction_any`]) and registers
/// it as request `request`.
#[allow(clippy::too_many_arguments)]
fn nb_reduction(
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

/// The size of the group of `comm` this rank is in (the local group of an
/// intercommunicator).
pub(crate) fn local_size(comm: c_int) -> R<usize> {
    let mut s = st()?;
    match s.intra(comm) {
        Ok(c) => Ok(c.size()),
        Err(e) => match s.inter(comm) {
            Ok(Some(ic)) => Ok(ic.local().size()),
            _ => Err(e),
        },
    }
}

/// A persistent collective: the communicator and `info` are checked now;
/// each `MPI_Start` then calls `begin`, which starts the nonblocking twin
/// through its own entry point (so argument errors are reported at the start,
/// by that function's name), and takes the run it registered.
/// How many entries each array argument of a persistent collective has,
/// by its name: the group's size for the regular collectives (only at the
/// root of a rooted one, where only the root reads them; none on the send
/// side of an `MPI_IN_PLACE` one, which ignores them), the in- and
/// out-degree for the neighbourhood ones.
pub(crate) struct ArrayLens {
    /// Entries of a send-side array (`sendcounts`, `sdispls`, `sendtypes`).
    send: Option<usize>,
    /// Entries of a receive-side array (`recvcounts`, `displs`...).
    recv: Option<usize>,
}

impl ArrayLens {
    /// `args`: the collective's arguments by name, as [`Keep::as_word`]s.
    pub(crate) fn new(name: &str, comm: c_int, args: &[(&str, Option<i64>)]) -> R<ArrayLens> {
        let arg = |n: &str| args.iter().find(|a| a.0 == n).and_then(|a| a.1);
        let root = arg("root").map(|r| r as c_int);
        let in_place = arg("sendbuf") == Some(IN_PLACE as i64);
        let mut s = st()?;
        if name.contains("Neighbor") {
            let (_, nb) = crate::comm::neighbors(&mut s, comm)?;
            return Ok(ArrayLens {
                send: (!in_place).then_some(nb.outdegree()),
                recv: Some(nb.indegree()),
            });
        }
        let c = s.intra(comm)?;
        let (size, me) = (c.size(), c.rank() as c_int);
        // Gatherv reads its receive arrays, Scatterv its send arrays, only
        // at the root.
        let at_root = root.is_none_or(|r| r == me);
        Ok(ArrayLens {
            send: ((at_root || !name.contains("Scatterv")) && !in_place).then_some(size),
            recv: (at_root || !name.contains("Gatherv")).then_some(size),
        })
    }

    fn of(&self, arg: &str) -> Option<usize> {
        if arg.starts_with("send") || arg.starts_with("sdispl") {
            self.send
        } else {
            self.recv
        }
    }
}

/// A persistent collective's argument as kept until each start: scalars
/// and buffers as given, arrays copied.
pub(crate) trait Keep: Sized {
    type Kept: 'static;
    fn keep(self, arg: &str, lens: &ArrayLens) -> R<Self::Kept>;
    fn view(k: &Self::Kept) -> Self;
    /// The value as a word, if it is an integer or an address (`root`,
    /// `sendbuf`), to decide which arrays are read.
    fn as_word(&self) -> Option<i64> {
        None
    }
}

/// Scalars and buffers are kept as given; `word` says which of them count
/// for [`Keep::as_word`] (`root`, `sendbuf`).
macro_rules! keep_as_is {
    ($($t:ty => $word:expr),*) => {$(
        impl Keep for $t {
            type Kept = $t;
            fn keep(self, _: &str, _: &ArrayLens) -> R<$t> {
                Ok(self)
            }
            fn view(k: &$t) -> $t {
                *k
            }
            fn as_word(&self) -> Option<i64> {
                let word: fn($t) -> Option<i64> = $word;
                word(*self)
            }
        }
    )*};
}
keep_as_is!(
    i64 => |_| None,
    *mut c_void => |_| None,
    *const c_void => |p| Some(p as i64),
    c_int => |v| Some(i64::from(v))
);

/// A copied array (null stays null; an array the call does not read at
/// this rank stays the program's pointer, never read).
pub(crate) enum KeptArray<T> {
    Copy(Vec<T>),
    Raw(*const T),
}

macro_rules! keep_array {
    ($($t:ty),*) => {$(
        impl Keep for *const $t {
            type Kept = KeptArray<$t>;
            fn keep(self, arg: &str, lens: &ArrayLens) -> R<KeptArray<$t>> {
                match lens.of(arg) {
                    Some(n) if !self.is_null() => {
                        // SAFETY: the standard makes the argument an array
                        // of `n` entries at this rank (the group's size, or
                        // the neighbourhood's degree).
                        let v = unsafe { std::slice::from_raw_parts(self, n) }.to_vec();
                        Ok(KeptArray::Copy(v))
                    }
                    _ => Ok(KeptArray::Raw(self)),
                }
            }
            fn view(k: &KeptArray<$t>) -> *const $t {
                match k {
                    KeptArray::Copy(v) => v.as_ptr(),
                    KeptArray::Raw(p) => *p,
                }
            }
        }
    )*};
}
keep_array!(c_int, i64, isize);

fn persistent_coll(
    comm: c_int,
    info: c_int,
    request: *mut c_int,
    begin: impl Fn(*mut c_int) -> c_int + 'static,
) -> R<()> {
    need_request(request)?;
    {
        let mut s = st()?;
        s.intra(comm)?;
        crate::info::check(info)?;
    }
    let start = std::rc::Rc::new(move || -> R<Box<dyn CollPending>> {
        let mut h = MPI_REQUEST_NULL;
        let rc = begin(&mut h);
        if rc != MPI_SUCCESS {
            return err(
                rc,
                "the persistent collective could not start (its own error is reported above, or returned)",
            );
        }
        match st()?.take_request(h) {
            Some((ReqEntry::Coll(c), _)) => Ok(c),
            _ => err(MPI_ERR_INTERN, "the started collective left no request"),
        }
    });
    let h = st()?.new_request(
        ReqEntry::PersistentColl {
            start,
            active: None,
        },
        comm,
    );
    out(request, "request", h)
}

/// Registers a started nonblocking collective as request `request`.
fn nb_request(p: Box<dyn CollPending>, comm: c_int, request: *mut c_int) -> R<()> {
    let h = st()?.new_request(ReqEntry::Coll(p), comm);
    out(request, "request", h)
}

/// A nonblocking barrier in flight.
struct NbBarrier(CollRequest<()>);

impl CollPending for NbBarrier {
    fn test(&mut self) -> kumi::Result<bool> {
        self.0.test()
    }

    fn finish(self: Box<Self>) -> R<()> {
        self.0.wait()?;
        Ok(())
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
fn reduction(
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

/// `MPI_Allreduce` in the usual case, inlined into it: a built-in operation
/// on elements of `double`, `int`, `long` (or `long long`) or `float` on an
/// intracommunicator, buffers given. `None` for anything else, errors
/// included, which [`reduction`] then checks and reports; the same
/// reduction as there, without its dispatch on every type (a call, a
/// jump table, the `Red` value: a third of the C library's own cost of an
/// 8-byte allreduce, scripts/count-instructions.sh allreduce).
#[inline(always)]
fn allreduce_usual(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: c_int,
    op: c_int,
    comm: c_int,
) -> Option<R<()>> {
    builtin_index(op)?;
    if count <= 0 || send.is_null() || recv.is_null() {
        return None;
    }
    let s = st().ok()?;
    let e = s.comms.get(&comm)?;
    if e.inter.is_some() {
        return None;
    }
    crate::set_err_comm(comm);
    let (c, n) = (&e.comm, count as usize);
    macro_rules! go {
        ($t:ty) => {
            blocking_on!(
                s,
                c,
                reduce_elem::<$t>(c, &Red::All, op, dt, send, recv, n).map(|_| ())
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
fn reduce_typed(
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

// ----- data movement ----------------------------------------------------------------

fn bcast(buf: *mut c_void, n: c_int, dt: c_int, root: c_int, comm: c_int) -> R<()> {
    let (c, d) = match lookup(comm, dt) {
        Ok(x) => x,
        Err(e) => return inter::bcast(e, buf, n, dt, root, comm),
    };
    let root = check_root(&c, root)?;
    let n = count(n)?;
    // A predefined type: the user's buffer itself, no packed copy (the
    // runtime's shared-memory broadcast then copies straight between the
    // ranks' buffers).
    if let Some(len) = crate::p2p::contig_bytes(buf, n, dt)? {
        let bytes: &mut [u8] = if len == 0 {
            &mut []
        } else {
            // SAFETY: the standard makes the caller pass `n` elements of the
            // predefined type `dt` (`len` bytes) at `buf`, writable (received
            // into on every rank but the root) and untouched during the call.
            unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, len) }
        };
        c.bcast(bytes, root)?;
        return Ok(());
    }
    let mut bytes = pack(buf, n, &d);
    c.bcast(&mut bytes, root)?;
    if c.rank() != root {
        unpack(&bytes, buf, n, &d);
    }
    Ok(())
}

// Persistent collectives (MPI 4): each start runs the nonblocking twin.
mpi_persistent_colls! {
    MPI_Barrier_init / PMPI_Barrier_init => PMPI_Ibarrier(comm: c_int) on comm
    MPI_Bcast_init / PMPI_Bcast_init => PMPI_Ibcast(buffer: *mut c_void, count: c_int, datatype: c_int, root: c_int, comm: c_int) on comm
    MPI_Reduce_init / PMPI_Reduce_init => PMPI_Ireduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, root: c_int, comm: c_int) on comm
    MPI_Allreduce_init / PMPI_Allreduce_init => PMPI_Iallreduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, comm: c_int) on comm
    MPI_Gather_init / PMPI_Gather_init => PMPI_Igather(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int) on comm
    MPI_Gatherv_init / PMPI_Gatherv_init => PMPI_Igatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: c_int, root: c_int, comm: c_int) on comm
    MPI_Scatter_init / PMPI_Scatter_init => PMPI_Iscatter(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int) on comm
    MPI_Scatterv_init / PMPI_Scatterv_init => PMPI_Iscatterv(sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int) on comm
    MPI_Allgather_init / PMPI_Allgather_init => PMPI_Iallgather(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) on comm
    MPI_Allgatherv_init / PMPI_Allgatherv_init => PMPI_Iallgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: c_int, comm: c_int) on comm
    MPI_Alltoall_init / PMPI_Alltoall_init => PMPI_Ialltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) on comm
    MPI_Alltoallv_init / PMPI_Alltoallv_init => PMPI_Ialltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: c_int, comm: c_int) on comm
    MPI_Alltoallw_init / PMPI_Alltoallw_init => PMPI_Ialltoallw(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const c_int, comm: c_int) on comm
    MPI_Reduce_scatter_block_init / PMPI_Reduce_scatter_block_init => PMPI_Ireduce_scatter_block(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: c_int, op: c_int, comm: c_int) on comm
    MPI_Reduce_scatter_init / PMPI_Reduce_scatter_init => PMPI_Ireduce_scatter(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: c_int, op: c_int, comm: c_int) on comm
    MPI_Scan_init / PMPI_Scan_init => PMPI_Iscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, comm: c_int) on comm
    MPI_Exscan_init / PMPI_Exscan_init => PMPI_Iexscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, comm: c_int) on comm
    MPI_Neighbor_allgather_init / PMPI_Neighbor_allgather_init => PMPI_Ineighbor_allgather(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) on comm
    MPI_Neighbor_allgatherv_init / PMPI_Neighbor_allgatherv_init => PMPI_Ineighbor_allgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: c_int, comm: c_int) on comm
    MPI_Neighbor_alltoall_init / PMPI_Neighbor_alltoall_init => PMPI_Ineighbor_alltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) on comm
    MPI_Neighbor_alltoallv_init / PMPI_Neighbor_alltoallv_init => PMPI_Ineighbor_alltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: c_int, comm: c_int) on comm
    MPI_Neighbor_alltoallw_init / PMPI_Neighbor_alltoallw_init => PMPI_Ineighbor_alltoallw(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const isize, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const isize, recvtypes: *const c_int, comm: c_int) on comm
}

// The large-count persistent collectives: each start runs the nonblocking
// large-count twin (which converts the copied counts afresh).
mpi_persistent_colls! {
    MPI_Bcast_init_c / PMPI_Bcast_init_c => PMPI_Ibcast_c(buffer: *mut c_void, count: i64, datatype: c_int, root: c_int, comm: c_int) on comm
    MPI_Reduce_init_c / PMPI_Reduce_init_c => PMPI_Ireduce_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: i64, datatype: c_int, op: c_int, root: c_int, comm: c_int) on comm
    MPI_Allreduce_init_c / PMPI_Allreduce_init_c => PMPI_Iallreduce_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: i64, datatype: c_int, op: c_int, comm: c_int) on comm
    MPI_Gather_init_c / PMPI_Gather_init_c => PMPI_Igather_c(sendbuf: *const c_void, sendcount: i64, sendtype: c_int, recvbuf: *mut c_void, recvcount: i64, recvtype: c_int, root: c_int, comm: c_int) on comm
    MPI_Gatherv_init_c / PMPI_Gatherv_init_c => PMPI_Igatherv_c(sendbuf: *const c_void, sendcount: i64, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const i64, displs: *const isize, recvtype: c_int, root: c_int, comm: c_int) on comm
    MPI_Scatter_init_c / PMPI_Scatter_init_c => PMPI_Iscatter_c(sendbuf: *const c_void, sendcount: i64, sendtype: c_int, recvbuf: *mut c_void, recvcount: i64, recvtype: c_int, root: c_int, comm: c_int) on comm
    MPI_Scatterv_init_c / PMPI_Scatterv_init_c => PMPI_Iscatterv_c(sendbuf: *const c_void, sendcounts: *const i64, displs: *const isize, sendtype: c_int, recvbuf: *mut c_void, recvcount: i64, recvtype: c_int, root: c_int, comm: c_int) on comm
    MPI_Allgather_init_c / PMPI_Allgather_init_c => PMPI_Iallgather_c(sendbuf: *const c_void, sendcount: i64, sendtype: c_int, recvbuf: *mut c_void, recvcount: i64, recvtype: c_int, comm: c_int) on comm
    MPI_Allgatherv_init_c / PMPI_Allgatherv_init_c => PMPI_Iallgatherv_c(sendbuf: *const c_void, sendcount: i64, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const i64, displs: *const isize, recvtype: c_int, comm: c_int) on comm
    MPI_Alltoall_init_c / PMPI_Alltoall_init_c => PMPI_Ialltoall_c(sendbuf: *const c_void, sendcount: i64, sendtype: c_int, recvbuf: *mut c_void, recvcount: i64, recvtype: c_int, comm: c_int) on comm
    MPI_Alltoallv_init_c / PMPI_Alltoallv_init_c => PMPI_Ialltoallv_c(sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const isize, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const isize, recvtype: c_int, comm: c_int) on comm
    MPI_Alltoallw_init_c / PMPI_Alltoallw_init_c => PMPI_Ialltoallw_c(sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const isize, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const isize, recvtypes: *const c_int, comm: c_int) on comm
    MPI_Reduce_scatter_block_init_c / PMPI_Reduce_scatter_block_init_c => PMPI_Ireduce_scatter_block_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: i64, datatype: c_int, op: c_int, comm: c_int) on comm
    MPI_Reduce_scatter_init_c / PMPI_Reduce_scatter_init_c => PMPI_Ireduce_scatter_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const i64, datatype: c_int, op: c_int, comm: c_int) on comm
    MPI_Scan_init_c / PMPI_Scan_init_c => PMPI_Iscan_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: i64, datatype: c_int, op: c_int, comm: c_int) on comm
    MPI_Exscan_init_c / PMPI_Exscan_init_c => PMPI_Iexscan_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: i64, datatype: c_int, op: c_int, comm: c_int) on comm
    MPI_Neighbor_allgather_init_c / PMPI_Neighbor_allgather_init_c => PMPI_Ineighbor_allgather_c(sendbuf: *const c_void, sendcount: i64, sendtype: c_int, recvbuf: *mut c_void, recvcount: i64, recvtype: c_int, comm: c_int) on comm
    MPI_Neighbor_allgatherv_init_c / PMPI_Neighbor_allgatherv_init_c => PMPI_Ineighbor_allgatherv_c(sendbuf: *const c_void, sendcount: i64, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const i64, displs: *const isize, recvtype: c_int, comm: c_int) on comm
    MPI_Neighbor_alltoall_init_c / PMPI_Neighbor_alltoall_init_c => PMPI_Ineighbor_alltoall_c(sendbuf: *const c_void, sendcount: i64, sendtype: c_int, recvbuf: *mut c_void, recvcount: i64, recvtype: c_int, comm: c_int) on comm
    MPI_Neighbor_alltoallv_init_c / PMPI_Neighbor_alltoallv_init_c => PMPI_Ineighbor_alltoallv_c(sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const isize, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const isize, recvtype: c_int, comm: c_int) on comm
    MPI_Neighbor_alltoallw_init_c / PMPI_Neighbor_alltoallw_init_c => PMPI_Ineighbor_alltoallw_c(sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const isize, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const isize, recvtypes: *const c_int, comm: c_int) on comm
}

// Each pair: the blocking function waits for what the starter begins; the
// nonblocking one hands it to the program as a request.
mpi_coll_pair! {
    MPI_Neighbor_allgather / PMPI_Neighbor_allgather,
    MPI_Ineighbor_allgather / PMPI_Ineighbor_allgather => neighbor_allgather(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) on comm
    MPI_Neighbor_alltoall / PMPI_Neighbor_alltoall,
    MPI_Ineighbor_alltoall / PMPI_Ineighbor_alltoall => neighbor_alltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) on comm
}

mpi! {
    fn MPI_Barrier / PMPI_Barrier(comm: c_int) {
        let s = st()?;
        match s.intra_ref(comm) {
            // The barrier calls back into nothing of this library.
            Ok(c) => Ok(blocking_on!(s, c, c.barrier())?),
            Err(e) => {
                drop(s);
                inter::barrier(e, comm)
            }
        }
    }

    fn MPI_Ibarrier / PMPI_Ibarrier(comm: c_int, request: *mut c_int) {
        let (c, ic) = {
            let mut s = st()?;
            (s.intra(comm), s.inter(comm).ok().flatten())
        };
        need_request(request)?;
        let r = match (c, ic) {
            (_, Some(ic)) => ic.ibarrier()?,
            (c, None) => c?.ibarrier()?,
        };
        let h = st()?.new_request(ReqEntry::Coll(Box::new(NbBarrier(r))), comm);
        out(request, "request", h)
    }

    fn MPI_Iallreduce / PMPI_Iallreduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, comm: c_int, request: *mut c_int) {
        start_reduction("MPI_Iallreduce", Reduction::All, sendbuf, recvbuf, crate::state::count(count)?, datatype, op, comm, request)
    }

    fn MPI_Ibcast / PMPI_Ibcast(buffer: *mut c_void, count: c_int, datatype: c_int, root: c_int, comm: c_int, request: *mut c_int) {
        let (c, d) = match lookup(comm, datatype) {
            Ok(x) => x,
            Err(e) => return inter::start(inter::ibcast(e, buffer, count, datatype, root, comm), comm, request),
        };
        need_request(request)?;
        let r = check_root(&c, root)?;
        let n = crate::state::count(count)?;
        if d.is_contiguous() {
            let seg = in_bytes(even_segments(buffer, 1, n, &d), &d)[0];
            // SAFETY: MPI's contract (see `v::igatherv`).
            let req = unsafe { c.ibcast_segment(seg, r) }?;
            return nb_request(Box::new(NbBytes::none(req)), comm, request);
        }
        let root_here = c.rank() == r;
        let data = if root_here { pack(buffer, n, &d) } else { vec![0u8; d.packed_size(n)] };
        let req = c.ibcast(data, r)?;
        let nb = if root_here { NbBytes::none(req) } else { NbBytes::one(req, buffer, n, d) };
        nb_request(Box::new(nb), comm, request)
    }

    fn MPI_Ireduce / PMPI_Ireduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, root: c_int, comm: c_int, request: *mut c_int) {
        start_reduction("MPI_Ireduce", Reduction::Reduce(root), sendbuf, recvbuf, crate::state::count(count)?, datatype, op, comm, request)
    }

    fn MPI_Iallgather / PMPI_Iallgather(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int, request: *mut c_int) {
        let (c, rd) = match lookup(comm, recvtype) {
            Ok(x) => x,
            Err(e) => return inter::start(inter::allgather(e, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm), comm, request),
        };
        need_request(request)?;
        let (p, me) = (c.size(), c.rank());
        let rn = crate::state::count(recvcount)?;
        let recv = in_bytes(even_segments(recvbuf, p, rn, &rd), &rd);
        let send = if in_place(sendbuf) {
            Some((recv[me].0.cast_const(), recv[me].1))
        } else {
            let sd = st()?.dtype(sendtype)?;
            let sn = crate::state::count(sendcount)?;
            sd.is_contiguous().then(|| (sendbuf.cast::<u8>(), sd.packed_size(sn)))
        };
        if let (Some(send), true) = (send, rd.is_contiguous()) {
            // SAFETY: MPI's contract (see `v::igatherv`); in place, this
            // rank's send is its own receive block.
            let req = unsafe { c.iallgatherv_segments(send, &recv) }?;
            return nb_request(Box::new(NbBytes::none(req)), comm, request);
        }
        let mine = if in_place(sendbuf) {
            pack(at(recvbuf, me * rn, &rd), rn, &rd)
        } else {
            let sd = st()?.dtype(sendtype)?;
            pack(sendbuf, crate::state::count(sendcount)?, &sd)
        };
        let req = c.iallgather(mine)?;
        nb_request(Box::new(NbBytes::one(req, recvbuf, rn * p, rd)), comm, request)
    }

    fn MPI_Igather / PMPI_Igather(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int, request: *mut c_int) {
        let c = st()?.intra(comm);
        let c = match c {
            Ok(x) => x,
            Err(e) => return inter::start(inter::gather(e, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm), comm, request),
        };
        need_request(request)?;
        let r = check_root(&c, root)?;
        let (p, me) = (c.size(), c.rank());
        let a = gather_args(me == r, me, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype)?;
        let (send, recv, packed) = a.segments(recvbuf, p);
        // SAFETY: MPI's contract (see `v::igatherv`); in place, the root's
        // send is its own receive block; packed copies live in `packed`
        // with the request.
        let req = unsafe { c.igatherv_segments(send, &recv, r) }?;
        nb_request(Box::new(NbPacked(req, packed)), comm, request)
    }

    fn MPI_Iscatter / PMPI_Iscatter(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int, request: *mut c_int) {
        let c = st()?.intra(comm);
        let c = match c {
            Ok(x) => x,
            Err(e) => return inter::start(inter::scatter(e, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm), comm, request),
        };
        need_request(request)?;
        let r = check_root(&c, root)?;
        let (p, me) = (c.size(), c.rank());
        let a = scatter_args(me == r, sendcount, sendtype, recvbuf, recvcount, recvtype)?;
        let (send, recv, packed) = a.segments(sendbuf, recvbuf, p, me);
        if me == r && send.iter().any(|s| s.1 != recv.1) {
            return err(
                MPI_ERR_TRUNCATE,
                format!("the root sends {} bytes to each rank but receives {} itself", send[me].1, recv.1),
            );
        }
        // SAFETY: MPI's contract (see `v::igatherv`); in place, the root's
        // receive is its own send block; packed copies live in `packed`
        // with the request.
        let req = unsafe { c.iscatterv_segments(&send, recv, r) }?;
        nb_request(Box::new(NbPacked(req, packed)), comm, request)
    }

    fn MPI_Ialltoall / PMPI_Ialltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int, request: *mut c_int) {
        let (c, rd) = match lookup(comm, recvtype) {
            Ok(x) => x,
            Err(e) => return inter::start(inter::alltoall(e, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm), comm, request),
        };
        need_request(request)?;
        let p = c.size();
        let rn = crate::state::count(recvcount)?;
        if !in_place(sendbuf) {
            let sd = st()?.dtype(sendtype)?;
            if sd.is_contiguous() && rd.is_contiguous() {
                let send = read_only(in_bytes(even_segments(sendbuf, p, crate::state::count(sendcount)?, &sd), &sd));
                let recv = in_bytes(even_segments(recvbuf, p, rn, &rd), &rd);
                // SAFETY: MPI's contract (see `v::igatherv`); the blocks
                // are even and `send` one span (`even_segments`).
                let req = unsafe { c.ialltoall_segments(&send, &recv) }?;
                return nb_request(Box::new(NbBytes::none(req)), comm, request);
            }
        }
        let mine = if in_place(sendbuf) {
            pack(recvbuf, rn * p, &rd)
        } else {
            let sd = st()?.dtype(sendtype)?;
            pack(sendbuf, crate::state::count(sendcount)? * p, &sd)
        };
        let req = c.ialltoall(mine)?;
        nb_request(Box::new(NbBytes::one(req, recvbuf, rn * p, rd)), comm, request)
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

    fn MPI_Bcast / PMPI_Bcast(buffer: *mut c_void, count: c_int, datatype: c_int, root: c_int, comm: c_int) {
        bcast(buffer, count, datatype, root, comm)
    }

    fn MPI_Reduce / PMPI_Reduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, root: c_int, comm: c_int) {
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
        if let Some(done) = allreduce_usual(send, recvbuf, count, datatype, op, comm) {
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

    // The rooted collectives read the receive (gather) or send (scatter)
    // arguments at the root only, as MPI 4.1 section 6.5 says: elsewhere they
    // may be anything, MPI_DATATYPE_NULL and null counts included.
    fn MPI_Gather / PMPI_Gather(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int) {
        let c = st()?.intra(comm);
        let c = match c {
            Ok(x) => x,
            Err(e) => return inter::wait(inter::gather(e, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm)),
        };
        let r = check_root(&c, root)?;
        let (p, me) = (c.size(), c.rank());
        let a = gather_args(me == r, me, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype)?;
        let (send, recv, packed) = a.segments(recvbuf, p);
        // SAFETY: MPI's contract for MPI_Gather's buffers (in place, the
        // root's send is its own receive block); packed copies live in
        // `packed` until it is finished.
        unsafe { c.gather_segments(send, &recv, r) }?;
        packed.finish();
        Ok(())
    }

    fn MPI_Scatter / PMPI_Scatter(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int) {
        let c = st()?.intra(comm);
        let c = match c {
            Ok(x) => x,
            Err(e) => return inter::wait(inter::scatter(e, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm)),
        };
        let r = check_root(&c, root)?;
        let (p, me) = (c.size(), c.rank());
        let a = scatter_args(me == r, sendcount, sendtype, recvbuf, recvcount, recvtype)?;
        let (send, recv, packed) = a.segments(sendbuf, recvbuf, p, me);
        // SAFETY: MPI's contract for MPI_Scatter's buffers (in place, the
        // root's receive is its own send block); packed copies live in
        // `packed` until it is finished.
        unsafe { c.scatter_segments(&send, recv, r) }?;
        packed.finish();
        Ok(())
    }

    fn MPI_Allgather / PMPI_Allgather(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) {
        let (c, rd) = match lookup(comm, recvtype) {
            Ok(x) => x,
            Err(e) => return inter::wait(inter::allgather(e, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm)),
        };
        let (p, me) = (c.size(), c.rank());
        let rn = crate::state::count(recvcount)?;
        if !in_place(sendbuf) {
            let sn = crate::state::count(sendcount)?;
            // SAFETY: MPI's contract for MPI_Allgather's buffers.
            if let Some((send, recv)) = unsafe { direct_pair(sendbuf, sn, sendtype, recvbuf, rn * p, recvtype)? } {
                c.allgather(send, recv)?;
                return Ok(());
            }
        }
        let mine = if in_place(sendbuf) {
            pack(at(recvbuf, me * rn, &rd), rn, &rd)
        } else {
            let sd = st()?.dtype(sendtype)?;
            pack(sendbuf, crate::state::count(sendcount)?, &sd)
        };
        let mut all = vec![0u8; mine.len() * p];
        c.allgather(&mine, &mut all)?;
        unpack(&all, recvbuf, rn * p, &rd);
        Ok(())
    }

    fn MPI_Alltoall / PMPI_Alltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) {
        let (c, rd) = match lookup(comm, recvtype) {
            Ok(x) => x,
            Err(e) => return inter::wait(inter::alltoall(e, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm)),
        };
        let p = c.size();
        let rn = crate::state::count(recvcount)?;
        if !in_place(sendbuf) {
            let sn = crate::state::count(sendcount)? * p;
            // SAFETY: MPI's contract for MPI_Alltoall's buffers.
            if let Some((send, recv)) = unsafe { direct_pair(sendbuf, sn, sendtype, recvbuf, rn * p, recvtype)? } {
                c.alltoall(send, recv)?;
                return Ok(());
            }
        }
        let send = if in_place(sendbuf) {
            pack(recvbuf, rn * p, &rd)
        } else {
            let sd = st()?.dtype(sendtype)?;
            pack(sendbuf, crate::state::count(sendcount)? * p, &sd)
        };
        let mut all = vec![0u8; rd.packed_size(rn * p)];
        c.alltoall(&send, &mut all)?;
        unpack(&all, recvbuf, rn * p, &rd);
        Ok(())
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
