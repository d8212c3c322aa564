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
//!
//! This file holds the shared argument handling and the regular data
//! movement; the reductions are in [`reduce`], the v- and w-forms in [`v`],
//! the neighbourhood collectives in [`neighbor`] (their v- and w-forms in
//! [`v`]), the persistent ones in [`persistent`] and the
//! intercommunicator forms in [`inter`].

use crate::consts::*;
use crate::large::*;
use crate::state::{count, out, read, slice, st, CollPending, ReqEntry};
use crate::{err, R};
use kumi::datatype::Datatype;
use kumi::{CollRequest, Comm};
use std::ffi::{c_int, c_void};

mod inter;
pub(crate) mod neighbor;
pub(crate) mod persistent;
pub(crate) mod reduce;
pub(crate) mod v;

pub(crate) use neighbor::*;
pub(crate) use persistent::*;
pub(crate) use reduce::*;
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

/// One side of a rooted collective as the program gave it: buffer, count,
/// datatype.
type Side = (*const c_void, c_int, c_int);

/// A rooted collective's buffers as bytes when their types are predefined:
/// the root's side (`MPI_Gather`'s receive, `MPI_Scatter`'s send: where
/// its `size()` blocks start and how long each is, read at the root only)
/// and this rank's own side (at the root in place, `MPI_IN_PLACE` as its
/// buffer, its block of the root's side). No datatype objects (a lookup
/// and a count taken and given back each) and no list of blocks. `None`:
/// another type; the general path packs where it must.
fn rooted_direct(
    root: bool,
    me: usize,
    root_side: Side,
    own: Side,
) -> R<Option<[(*mut u8, usize); 2]>> {
    let bytes = |(buf, n, dt): Side| -> R<Option<(*mut u8, usize)>> {
        Ok(crate::p2p::contig_bytes(buf, count(n)?, dt)?
            .map(|len| (buf.cast::<u8>().cast_mut(), len)))
    };
    let blocks = if root {
        match bytes(root_side)? {
            Some(b) => b,
            None => return Ok(None),
        }
    } else {
        (std::ptr::null_mut(), 0)
    };
    let own = if root && in_place(own.0) {
        (blocks.0.wrapping_add(me * blocks.1), blocks.1)
    } else {
        match bytes(own)? {
            Some(b) => b,
            None => return Ok(None),
        }
    };
    Ok(Some([blocks, own]))
}

/// `p` blocks of `block.1` bytes each, one after the other from `block.0`:
/// the root's side of a rooted collective from [`rooted_direct`].
fn even_blocks(block: (*mut u8, usize), p: usize) -> Vec<(*mut u8, usize)> {
    (0..p)
        .map(|j| (block.0.wrapping_add(j * block.1), block.1))
        .collect()
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

// ----- data movement ----------------------------------------------------------------

fn bcast(buf: *mut c_void, n: c_int, dt: c_int, root: c_int, comm: c_int) -> R<()> {
    // A predefined type: the user's buffer itself, no packed copy (the
    // runtime's shared-memory broadcast then copies straight between the
    // ranks' buffers), and no datatype object or communicator taken.
    {
        let s = st()?;
        if let Ok(c) = s.intra_ref(comm) {
            let root = check_root(c, root)?;
            if let Some(len) = crate::p2p::contig_bytes(buf, count(n)?, dt)? {
                let bytes: &mut [u8] = if len == 0 {
                    &mut []
                } else {
                    // SAFETY: the standard makes the caller pass `n` elements
                    // of the predefined type `dt` (`len` bytes) at `buf`,
                    // writable (received into on every rank but the root)
                    // and untouched during the call.
                    unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, len) }
                };
                // The broadcast calls back into nothing of this library.
                return Ok(blocking_on!(s, c, c.bcast(bytes, root))?);
            }
        }
    }
    let (c, d) = match lookup(comm, dt) {
        Ok(x) => x,
        Err(e) => return inter::bcast(e, buf, n, dt, root, comm),
    };
    let root = check_root(&c, root)?;
    let n = count(n)?;
    let mut bytes = pack(buf, n, &d);
    c.bcast(&mut bytes, root)?;
    if c.rank() != root {
        unpack(&bytes, buf, n, &d);
    }
    Ok(())
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
            let req = unsafe { c.iallgatherv_segments(send, recv) }?;
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
        if let Some([recv, send]) = rooted_direct(me == r, me, (recvbuf, recvcount, recvtype), (sendbuf, sendcount, sendtype))? {
            let recv = if me == r { even_blocks(recv, p) } else { Vec::new() };
            // SAFETY: MPI's contract (see `v::igatherv`); in place, the
            // root's send is its own receive block.
            let req = unsafe { c.igatherv_segments((send.0.cast_const(), send.1), &recv, r) }?;
            return nb_request(Box::new(NbBytes::none(req)), comm, request);
        }
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
        let direct = rooted_direct(me == r, me, (sendbuf, sendcount, sendtype), (recvbuf, recvcount, recvtype))?;
        let (send, recv, packed) = match direct {
            Some([blocks, recv]) => {
                let send = if me == r { even_blocks(blocks, p) } else { Vec::new() };
                (read_only(send), recv, Packed::default())
            }
            None => scatter_args(me == r, sendcount, sendtype, recvbuf, recvcount, recvtype)?.segments(sendbuf, recvbuf, p, me),
        };
        if me == r && send.iter().any(|s| s.1 != recv.1) {
            return err(
                MPI_ERR_TRUNCATE,
                format!("the root sends {} bytes to each rank but receives {} itself", send[me].1, recv.1),
            );
        }
        // SAFETY: MPI's contract (see `v::igatherv`); in place, the root's
        // receive is its own send block; packed copies live in `packed`
        // with the request.
        let req = unsafe { c.iscatter_segments(&send, recv, r) }?;
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

    fn MPI_Bcast / PMPI_Bcast(buffer: *mut c_void, count: c_int, datatype: c_int, root: c_int, comm: c_int) {
        bcast(buffer, count, datatype, root, comm)
    }

    // The rooted collectives read the receive (gather) or send (scatter)
    // arguments at the root only, as MPI 4.1 section 6.5 says: elsewhere they
    // may be anything, MPI_DATATYPE_NULL and null counts included.
    fn MPI_Gather / PMPI_Gather(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int) {
        {
            let s = st()?;
            if let Ok(c) = s.intra_ref(comm) {
                let r = check_root(c, root)?;
                let me = c.rank();
                if let Some([recv, send]) = rooted_direct(me == r, me, (recvbuf, recvcount, recvtype), (sendbuf, sendcount, sendtype))? {
                    // SAFETY: MPI's contract for MPI_Gather's buffers (in
                    // place, the root's send is its own receive block). The
                    // gather calls back into nothing of this library.
                    return Ok(blocking_on!(s, c, unsafe { c.gather_blocks((send.0.cast_const(), send.1), recv, r) })?);
                }
            }
        }
        let c = st()?.intra(comm);
        let c = match c {
            Ok(x) => x,
            Err(e) => return inter::wait(inter::gather(e, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm)),
        };
        let r = check_root(&c, root)?;
        let (p, me) = (c.size(), c.rank());
        let a = gather_args(me == r, me, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype)?;
        let (send, recv, packed) = a.segments(recvbuf, p);
        // The blocks follow each other evenly (`Gather::segments`): the
        // first says where all are.
        let blocks = recv.first().copied().unwrap_or((std::ptr::null_mut(), 0));
        // SAFETY: MPI's contract for MPI_Gather's buffers (in place, the
        // root's send is its own receive block); packed copies live in
        // `packed` until it is finished.
        unsafe { c.gather_blocks(send, blocks, r) }?;
        packed.finish();
        Ok(())
    }

    fn MPI_Scatter / PMPI_Scatter(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int) {
        {
            let s = st()?;
            if let Ok(c) = s.intra_ref(comm) {
                let r = check_root(c, root)?;
                let me = c.rank();
                if let Some([send, recv]) = rooted_direct(me == r, me, (sendbuf, sendcount, sendtype), (recvbuf, recvcount, recvtype))? {
                    // SAFETY: MPI's contract for MPI_Scatter's buffers (in
                    // place, the root's receive is its own send block). The
                    // scatter calls back into nothing of this library.
                    return Ok(blocking_on!(s, c, unsafe { c.scatter_blocks((send.0.cast_const(), send.1), recv, r) })?);
                }
            }
        }
        let c = st()?.intra(comm);
        let c = match c {
            Ok(x) => x,
            Err(e) => return inter::wait(inter::scatter(e, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm)),
        };
        let r = check_root(&c, root)?;
        let (p, me) = (c.size(), c.rank());
        let a = scatter_args(me == r, sendcount, sendtype, recvbuf, recvcount, recvtype)?;
        let (send, recv, packed) = a.segments(sendbuf, recvbuf, p, me);
        // The blocks follow each other evenly (`Scatter::segments`): the
        // first says where all are.
        let blocks = send.first().copied().unwrap_or((std::ptr::null(), 0));
        // SAFETY: MPI's contract for MPI_Scatter's buffers (in place, the
        // root's receive is its own send block); packed copies live in
        // `packed` until it is finished.
        unsafe { c.scatter_blocks(blocks, recv, r) }?;
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
}
