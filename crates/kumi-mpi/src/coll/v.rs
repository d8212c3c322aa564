//! The collectives with one count (and displacement, and for the w-forms
//! one datatype) per rank: gather(v), scatter(v), allgather(v),
//! alltoall(v/w) and the neighbourhood v- and w-forms, blocking and
//! nonblocking.
//!
//! Each body is generic over the entries of its count and displacement
//! arrays ([`Entry`]): `int` in the classic functions, `MPI_Count` and
//! `MPI_Aint` in the MPI-4 `_c` ones, so the two are the same code and a
//! count beyond 2^31 travels as it is. Displacements are signed (MPI lets
//! a segment lie before the buffer's address).

use super::inter;
use super::*;
use smallvec::SmallVec;

/// A count, displacement or size argument: `int` in the classic functions,
/// `MPI_Count` or `MPI_Aint` in the large-count ones.
pub(crate) trait Entry: Copy {
    /// The value, widened.
    fn wide(self) -> i64;
    /// `v` as this type, if it fits (a result written back: a position, a size).
    fn narrow(v: i64) -> Option<Self>;
}

impl Entry for c_int {
    fn wide(self) -> i64 {
        i64::from(self)
    }
    fn narrow(v: i64) -> Option<c_int> {
        c_int::try_from(v).ok()
    }
}

impl Entry for i64 {
    fn wide(self) -> i64 {
        self
    }
    fn narrow(v: i64) -> Option<i64> {
        Some(v)
    }
}

impl Entry for isize {
    fn wide(self) -> i64 {
        self as i64
    }
    fn narrow(v: i64) -> Option<isize> {
        isize::try_from(v).ok()
    }
}

/// A count argument as a length (negative: `MPI_ERR_COUNT`).
pub(crate) fn count_of<E: Entry>(n: E) -> R<usize> {
    let n = n.wide();
    usize::try_from(n).or_else(|_| err(MPI_ERR_COUNT, format!("count {n} is negative")))
}

/// The `n` entries of count array `p` (its name `what` for errors).
pub(crate) fn counts<E: Entry>(p: *const E, n: usize, what: &str) -> R<Vec<usize>> {
    slice(p, n as c_int, what)?
        .iter()
        .map(|&c| count_entry(c, what))
        .collect()
}

/// The `n` entries of displacement array `p`.
fn displs<E: Entry>(p: *const E, n: usize, what: &str) -> R<Vec<isize>> {
    Ok(slice(p, n as c_int, what)?
        .iter()
        .map(|&d| d.wide() as isize)
        .collect())
}

/// Segments (start, element count): `counts[i]` elements of `d` at
/// `displs[i]` extents from `buf`.
type Segs = Vec<(*mut c_void, usize)>;

/// The segments of a v-form: counts `cs` and displacements `ds` (in
/// extents of `d`), `n` of each, read from the program's arrays.
fn v_segments<C: Entry, D: Entry>(
    buf: *const c_void,
    cs: *const C,
    ds: *const D,
    d: &Datatype,
    n: usize,
    what: [&str; 2],
) -> R<Segs> {
    let mut v = Vec::with_capacity(n);
    v_each(buf, cs, ds, d, n, what, |at, k| v.push((at.cast(), k)))?;
    Ok(v)
}

/// Calls `seg(start, count)` for each segment of a v-form (as
/// [`v_segments`]), straight from the program's arrays: no vectors of
/// counts and displacements on the way (a small v-collective's time is
/// mostly its own call's).
#[allow(clippy::too_many_arguments)]
fn v_each<C: Entry, D: Entry>(
    buf: *const c_void,
    cs: *const C,
    ds: *const D,
    d: &Datatype,
    n: usize,
    what: [&str; 2],
    mut seg: impl FnMut(*mut u8, usize),
) -> R<()> {
    let cs = slice(cs, n as c_int, what[0])?;
    let ds = slice(ds, n as c_int, what[1])?;
    let ext = d.extent();
    for (&k, &i) in cs.iter().zip(ds) {
        let k = count_entry(k, what[0])?;
        seg((buf as *mut u8).wrapping_offset(i.wide() as isize * ext), k);
    }
    Ok(())
}

/// Entry `k` of counts array `what`, which must not be negative.
fn count_entry<E: Entry>(k: E, what: &str) -> R<usize> {
    let k = k.wide();
    usize::try_from(k).or_else(|_| {
        err(
            MPI_ERR_COUNT,
            format!("`{what}` holds a negative count ({k})"),
        )
    })
}

/// The segments of a v-form of predefined type `dt` (counts `cs` and
/// displacements `ds`, `n` of each) read from the program's arrays where
/// they lie, no list made: every count is checked first, then `seg(j)` is
/// rank j's (start, bytes). `None`: `dt` is not a predefined type.
fn v_direct<'a, C: Entry + 'a, D: Entry + 'a>(
    buf: *const c_void,
    cs: *const C,
    ds: *const D,
    dt: c_int,
    n: usize,
    what: [&str; 2],
) -> R<Option<impl Fn(usize) -> (*mut u8, usize) + 'a>> {
    let Some(size) = crate::p2p::predefined_size(dt) else {
        return Ok(None);
    };
    let cs: &'a [C] = slice(cs, n as c_int, what[0])?;
    let ds: &'a [D] = slice(ds, n as c_int, what[1])?;
    for &k in cs {
        if count_entry(k, what[0])?.checked_mul(size).is_none() {
            return err(
                MPI_ERR_COUNT,
                format!(
                    "`{}` holds a count whose bytes exceed the address space",
                    what[0]
                ),
            );
        }
    }
    let size_i = size as isize;
    Ok(Some(move |j: usize| {
        (
            (buf as *mut u8).wrapping_offset((ds[j].wide() as isize).wrapping_mul(size_i)),
            cs[j].wide() as usize * size,
        )
    }))
}

/// A rooted v-form's buffers as bytes when their types are predefined, as
/// [`super::rooted_direct`]: at the root its side's segments read where the
/// program keeps them ([`v_direct`]; `None` elsewhere), and this rank's
/// own side (at the root in place, its segment of the root's side). `None`:
/// another type, for the general path.
#[allow(clippy::type_complexity)]
fn v_rooted_direct<'a, C: Entry + 'a, D: Entry + 'a>(
    root: bool,
    me: usize,
    p: usize,
    (buf, cs, ds, dt, what): (*const c_void, *const C, *const D, c_int, [&str; 2]),
    (own, n, own_dt): (*const c_void, C, c_int),
) -> R<
    Option<(
        Option<impl Fn(usize) -> (*mut u8, usize) + 'a>,
        (*mut u8, usize),
    )>,
> {
    let seg = if root {
        match v_direct(buf, cs, ds, dt, p, what)? {
            Some(seg) => Some(seg),
            None => return Ok(None),
        }
    } else {
        None
    };
    let own = match &seg {
        Some(seg) if in_place(own) => seg(me),
        _ => match crate::p2p::contig_bytes(own, count_of(n)?, own_dt)? {
            Some(len) => (own.cast::<u8>().cast_mut(), len),
            None => return Ok(None),
        },
    };
    Ok(Some((seg, own)))
}

/// MPI_Gatherv with predefined types: the program's buffers and arrays
/// used where they lie (no datatype objects, no list of segments).
/// `None`: another type, for the general path.
#[allow(clippy::too_many_arguments)]
fn gatherv_direct<C: Entry, D: Entry>(
    c: &Comm,
    root: usize,
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    displs: *const D,
    recvtype: c_int,
) -> R<Option<()>> {
    let Some((seg, send)) = v_rooted_direct(
        c.rank() == root,
        c.rank(),
        c.size(),
        (
            recvbuf,
            recvcounts,
            displs,
            recvtype,
            ["recvcounts", "displs"],
        ),
        (sendbuf, sendcount, sendtype),
    )?
    else {
        return Ok(None);
    };
    let none = |_| (std::ptr::null_mut(), 0);
    let recv: &dyn Fn(usize) -> (*mut u8, usize) = match &seg {
        Some(seg) => seg,
        None => &none,
    };
    // SAFETY: MPI's contract for MPI_Gatherv's buffers (in place, the root's
    // send is its own receive segment); the segments are asked for at the
    // root only.
    unsafe { c.gatherv_by((send.0.cast_const(), send.1), recv, root) }?;
    Ok(Some(()))
}

/// MPI_Scatterv with predefined types, as [`gatherv_direct`].
#[allow(clippy::too_many_arguments)]
fn scatterv_direct<C: Entry, D: Entry>(
    c: &Comm,
    root: usize,
    sendbuf: *const c_void,
    sendcounts: *const C,
    displs: *const D,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: C,
    recvtype: c_int,
) -> R<Option<()>> {
    let Some((seg, recv)) = v_rooted_direct(
        c.rank() == root,
        c.rank(),
        c.size(),
        (
            sendbuf,
            sendcounts,
            displs,
            sendtype,
            ["sendcounts", "displs"],
        ),
        (recvbuf, recvcount, recvtype),
    )?
    else {
        return Ok(None);
    };
    let send = |j: usize| match &seg {
        Some(seg) => {
            let (b, n) = seg(j);
            (b.cast_const(), n)
        }
        None => (std::ptr::null(), 0),
    };
    // SAFETY: MPI's contract for MPI_Scatterv's buffers (in place, the
    // root's receive is its own send segment); the segments are asked for
    // at the root only.
    unsafe { c.scatterv_by(&send, recv, root) }?;
    Ok(Some(()))
}

/// The same segments typed, for an intercommunicator's exchange.
pub(super) fn v_typed<C: Entry, D: Entry>(
    buf: *const c_void,
    cs: *const C,
    ds: *const D,
    d: &Datatype,
    n: usize,
    what: [&str; 2],
) -> R<Vec<Seg>> {
    Ok(of_type(v_segments(buf, cs, ds, d, n, what)?, d))
}

/// The segments of a w-form: `counts[i]` elements of `types[i]` at byte
/// displacement `displs[i]` of `buf`, `n` of each.
pub(super) fn w_segments<C: Entry, D: Entry>(
    buf: *const c_void,
    cs: *const C,
    ds: *const D,
    types: *const c_int,
    n: usize,
    what: [&str; 3],
) -> R<Vec<Seg>> {
    let cs = counts(cs, n, what[0])?;
    let ds = displs(ds, n, what[1])?;
    let ts = slice(types, n as c_int, what[2])?;
    let s = st()?;
    let mut out = Vec::with_capacity(n);
    for ((&k, &disp), &t) in cs.iter().zip(&ds).zip(ts) {
        out.push((
            (buf as *mut u8).wrapping_offset(disp).cast(),
            k,
            s.dtype(t)?,
        ));
    }
    Ok(out)
}

/// The packed bytes of the segments of `d`, one after the other.
fn pack_segments(segs: &[(*mut c_void, usize)], d: &Datatype) -> Vec<u8> {
    let mut v = Vec::with_capacity(segs.iter().map(|&(_, n)| d.packed_size(n)).sum());
    for &(buf, n) in segs {
        v.extend_from_slice(&pack(buf, n, d));
    }
    v
}

/// Writes `bytes` (segments packed one after the other) into the segments.
fn unpack_segments(bytes: &[u8], segs: &[(*mut c_void, usize)], d: &Datatype) {
    let mut off = 0;
    for &(buf, n) in segs {
        let len = d.packed_size(n);
        unpack(&bytes[off..off + len], buf, n, d);
        off += len;
    }
}

/// Each segment's packed size.
fn sizes(segs: &[(*mut c_void, usize)], d: &Datatype) -> Vec<usize> {
    segs.iter().map(|&(_, n)| d.packed_size(n)).collect()
}

/// The (root's) receive segments and this rank's send of a gatherv: the
/// receive arguments are read at the root only (MPI 4.1 section 6.5), and
/// in place the root's send is its own receive segment.
struct GatherV {
    recv: Option<(Datatype, Segs)>,
    sd: Datatype,
    sbuf: *const c_void,
    sn: usize,
}

#[allow(clippy::too_many_arguments)]
fn gatherv_args<C: Entry, D: Entry>(
    c: &Comm,
    root: usize,
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    displs: *const D,
    recvtype: c_int,
) -> R<GatherV> {
    let (p, me) = (c.size(), c.rank());
    let recv = if me == root {
        let rd = st()?.dtype(recvtype)?;
        let segs = v_segments(
            recvbuf,
            recvcounts,
            displs,
            &rd,
            p,
            ["recvcounts", "displs"],
        )?;
        Some((rd, segs))
    } else {
        None
    };
    let (sd, sbuf, sn) = match &recv {
        Some((rd, segs)) if in_place(sendbuf) => (rd.clone(), segs[me].0.cast_const(), segs[me].1),
        _ => (st()?.dtype(sendtype)?, sendbuf, count_of(sendcount)?),
    };
    Ok(GatherV { recv, sd, sbuf, sn })
}

impl GatherV {
    /// With contiguous types: this rank's send and (at the root) the
    /// receive segments in bytes, for the runtime's collective over segments.
    /// Otherwise itself back, for the packed path (taken by value: the
    /// segments become bytes in place, without a copy of the vector).
    #[allow(clippy::type_complexity)]
    fn direct(self) -> Result<((*const u8, usize), Vec<(*mut u8, usize)>), GatherV> {
        if !self.sd.is_contiguous()
            || self
                .recv
                .as_ref()
                .is_some_and(|(rd, _)| !rd.is_contiguous())
        {
            return Err(self);
        }
        let send = (self.sbuf.cast::<u8>(), self.sd.packed_size(self.sn));
        let recv = match self.recv {
            Some((rd, segs)) => in_bytes(segs, &rd),
            None => Vec::new(),
        };
        Ok((send, recv))
    }

    /// The packed send and the bytes expected of every rank (elsewhere
    /// than at the root only this rank's own entry, which the runtime
    /// checks against what it sends).
    fn packed(&self, p: usize, me: usize) -> (Vec<u8>, Vec<usize>) {
        let mine = pack(self.sbuf, self.sn, &self.sd);
        let mut bytes = match &self.recv {
            Some((rd, segs)) => sizes(segs, rd),
            None => vec![0; p],
        };
        if self.recv.is_none() {
            bytes[me] = mine.len();
        }
        (mine, bytes)
    }
}

#[allow(clippy::too_many_arguments)]
fn gatherv<C: Entry, D: Entry>(
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    displs: *const D,
    recvtype: c_int,
    root: c_int,
    comm: c_int,
) -> R<()> {
    // The state is let go before the intercommunicator path looks again.
    let c = st()?.intra(comm);
    let c = match c {
        Ok(x) => x,
        Err(e) => {
            return inter::wait(inter::gatherv(
                e, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm,
            ))
        }
    };
    let r = check_root(&c, root)?;
    if let Some(done) = gatherv_direct(
        &c, r, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
    )? {
        return Ok(done);
    }
    let a = gatherv_args(
        &c, r, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
    )?;
    let a = match a.direct() {
        // SAFETY: MPI's contract for MPI_Gatherv's buffers (in place, the
        // root's send is its own receive segment).
        Ok((send, recv)) => return Ok(unsafe { c.gatherv_segments(send, &recv, r) }?),
        Err(a) => a,
    };
    let (mine, bytes) = a.packed(c.size(), c.rank());
    let mut all = vec![
        0u8;
        if a.recv.is_some() {
            bytes.iter().sum()
        } else {
            0
        }
    ];
    c.gatherv(&mine, &mut all, &bytes, r)?;
    if let Some((rd, segs)) = &a.recv {
        unpack_segments(&all, segs, rd);
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn igatherv<C: Entry, D: Entry>(
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    displs: *const D,
    recvtype: c_int,
    root: c_int,
    comm: c_int,
    request: *mut c_int,
) -> R<()> {
    // The state is let go before the intercommunicator path looks again.
    let c = st()?.intra(comm);
    let c = match c {
        Ok(x) => x,
        Err(e) => {
            let started = inter::gatherv(
                e, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm,
            );
            return inter::start(started, comm, request);
        }
    };
    need_request(request)?;
    let r = check_root(&c, root)?;
    let (p, me) = (c.size(), c.rank());
    // Predefined types: the buffers as bytes, as `gatherv_direct`.
    if let Some((seg, send)) = v_rooted_direct(
        me == r,
        me,
        p,
        (
            recvbuf,
            recvcounts,
            displs,
            recvtype,
            ["recvcounts", "displs"],
        ),
        (sendbuf, sendcount, sendtype),
    )? {
        let recv: Vec<_> = seg.map(|seg| (0..p).map(seg).collect()).unwrap_or_default();
        // SAFETY: MPI's contract for a nonblocking collective's buffers:
        // valid, and the receive ones untouched, until it completes; in
        // place, the root's send is its own receive segment.
        let req = unsafe { c.igatherv_segments((send.0.cast_const(), send.1), &recv, r) }?;
        return nb_request(Box::new(NbBytes::none(req)), comm, request);
    }
    let a = gatherv_args(
        &c, r, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
    )?;
    let a = match a.direct() {
        Ok((send, recv)) => {
            // SAFETY: MPI's contract for a nonblocking collective's buffers:
            // valid, and the receive ones untouched, until it completes.
            let req = unsafe { c.igatherv_segments(send, &recv, r) }?;
            return nb_request(Box::new(NbBytes::none(req)), comm, request);
        }
        Err(a) => a,
    };
    let (mine, bytes) = a.packed(c.size(), c.rank());
    let req = c.igatherv(mine, &bytes, r)?;
    let nb = match a.recv {
        Some((rd, segs)) => NbBytes::typed(req, segs, &rd),
        None => NbBytes::none(req),
    };
    nb_request(Box::new(nb), comm, request)
}

/// The (root's) send segments and this rank's receive of a scatterv, the
/// reverse of [`GatherV`].
struct ScatterV {
    send: Option<(Datatype, Segs)>,
    in_place: bool,
    rd: Datatype,
    rn: usize,
}

#[allow(clippy::too_many_arguments)]
fn scatterv_args<C: Entry, D: Entry>(
    c: &Comm,
    root: usize,
    sendbuf: *const c_void,
    sendcounts: *const C,
    displs: *const D,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: C,
    recvtype: c_int,
) -> R<ScatterV> {
    let (p, me) = (c.size(), c.rank());
    let send = if me == root {
        let sd = st()?.dtype(sendtype)?;
        let segs = v_segments(
            sendbuf,
            sendcounts,
            displs,
            &sd,
            p,
            ["sendcounts", "displs"],
        )?;
        Some((sd, segs))
    } else {
        None
    };
    let in_place = in_place(recvbuf) && send.is_some();
    let (rd, rn) = match &send {
        Some((sd, segs)) if in_place => (sd.clone(), segs[me].1),
        _ => (st()?.dtype(recvtype)?, count_of(recvcount)?),
    };
    Ok(ScatterV {
        send,
        in_place,
        rd,
        rn,
    })
}

impl ScatterV {
    /// With contiguous types: (at the root) the send segments and this
    /// rank's receive, in bytes.
    /// Otherwise itself back, for the packed path (as `GatherV::direct`).
    #[allow(clippy::type_complexity)]
    fn direct(
        self,
        recvbuf: *mut c_void,
        me: usize,
    ) -> Result<(Vec<(*const u8, usize)>, (*mut u8, usize)), ScatterV> {
        if !self.rd.is_contiguous()
            || self
                .send
                .as_ref()
                .is_some_and(|(sd, _)| !sd.is_contiguous())
        {
            return Err(self);
        }
        let mine = self.rd.packed_size(self.rn);
        let send = match self.send {
            Some((sd, segs)) => read_only(in_bytes(segs, &sd)),
            None => Vec::new(),
        };
        let rbuf = if self.in_place {
            send[me].0.cast_mut()
        } else {
            recvbuf.cast::<u8>()
        };
        Ok((send, (rbuf, mine)))
    }

    /// The packed sends (at the root) and the bytes each rank receives
    /// (elsewhere only this rank's own entry).
    fn packed(&self, p: usize, me: usize) -> R<(Vec<u8>, Vec<usize>)> {
        let mine = self.rd.packed_size(self.rn);
        let Some((sd, segs)) = &self.send else {
            let mut bytes = vec![0; p];
            bytes[me] = mine;
            return Ok((Vec::new(), bytes));
        };
        let bytes = sizes(segs, sd);
        if bytes[me] != mine {
            return err(
                MPI_ERR_TRUNCATE,
                format!(
                    "the root sends itself {} bytes but receives {mine}",
                    bytes[me]
                ),
            );
        }
        Ok((pack_segments(segs, sd), bytes))
    }
}

#[allow(clippy::too_many_arguments)]
fn scatterv<C: Entry, D: Entry>(
    sendbuf: *const c_void,
    sendcounts: *const C,
    displs: *const D,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: C,
    recvtype: c_int,
    root: c_int,
    comm: c_int,
) -> R<()> {
    // The state is let go before the intercommunicator path looks again.
    let c = st()?.intra(comm);
    let c = match c {
        Ok(x) => x,
        Err(e) => {
            return inter::wait(inter::scatterv(
                e, sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm,
            ))
        }
    };
    let r = check_root(&c, root)?;
    let me = c.rank();
    if let Some(done) = scatterv_direct(
        &c, r, sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype,
    )? {
        return Ok(done);
    }
    let a = scatterv_args(
        &c, r, sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype,
    )?;
    let a = match a.direct(recvbuf, me) {
        // SAFETY: MPI's contract for MPI_Scatterv's buffers (in place, the
        // root's receive is its own send segment).
        Ok((send, recv)) => return Ok(unsafe { c.scatterv_segments(&send, recv, r) }?),
        Err(a) => a,
    };
    let (all, bytes) = a.packed(c.size(), me)?;
    let mut mine = vec![0u8; bytes[me]];
    c.scatterv(&all, &bytes, &mut mine, r)?;
    if !a.in_place {
        unpack(&mine, recvbuf, a.rn, &a.rd);
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn iscatterv<C: Entry, D: Entry>(
    sendbuf: *const c_void,
    sendcounts: *const C,
    displs: *const D,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: C,
    recvtype: c_int,
    root: c_int,
    comm: c_int,
    request: *mut c_int,
) -> R<()> {
    // The state is let go before the intercommunicator path looks again.
    let c = st()?.intra(comm);
    let c = match c {
        Ok(x) => x,
        Err(e) => {
            let started = inter::scatterv(
                e, sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm,
            );
            return inter::start(started, comm, request);
        }
    };
    need_request(request)?;
    let r = check_root(&c, root)?;
    let (p, me) = (c.size(), c.rank());
    // Predefined types: the buffers as bytes, as `scatterv_direct`.
    if let Some((seg, recv)) = v_rooted_direct(
        me == r,
        me,
        p,
        (
            sendbuf,
            sendcounts,
            displs,
            sendtype,
            ["sendcounts", "displs"],
        ),
        (recvbuf, recvcount, recvtype),
    )? {
        let send: Vec<_> = seg
            .map(|seg| (0..p).map(seg).map(|(b, n)| (b.cast_const(), n)).collect())
            .unwrap_or_default();
        // SAFETY: MPI's contract for a nonblocking collective's buffers (see
        // `igatherv`); in place, the root's receive is its own send segment.
        let req = unsafe { c.iscatterv_segments(&send, recv, r) }?;
        return nb_request(Box::new(NbBytes::none(req)), comm, request);
    }
    let a = scatterv_args(
        &c, r, sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype,
    )?;
    let a = match a.direct(recvbuf, me) {
        Ok((send, recv)) => {
            // SAFETY: MPI's contract for a nonblocking collective's buffers
            // (see `igatherv`); in place, the root's receive is its own send
            // segment.
            let req = unsafe { c.iscatterv_segments(&send, recv, r) }?;
            return nb_request(Box::new(NbBytes::none(req)), comm, request);
        }
        Err(a) => a,
    };
    let (all, bytes) = a.packed(c.size(), me)?;
    let req = c.iscatterv(all, &bytes, r)?;
    let nb = if a.in_place {
        NbBytes::none(req)
    } else {
        NbBytes::one(req, recvbuf, a.rn, a.rd)
    };
    nb_request(Box::new(nb), comm, request)
}

/// An allgatherv's receive segments and this rank's send (in place, its
/// own receive segment).
struct AllgatherV {
    rd: Datatype,
    segs: Segs,
    sd: Datatype,
    sbuf: *const c_void,
    sn: usize,
}

#[allow(clippy::too_many_arguments)]
fn allgatherv_args<C: Entry, D: Entry>(
    c: &Comm,
    rd: Datatype,
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    displs: *const D,
) -> R<AllgatherV> {
    let segs = v_segments(
        recvbuf,
        recvcounts,
        displs,
        &rd,
        c.size(),
        ["recvcounts", "displs"],
    )?;
    let (sd, sbuf, sn) = if in_place(sendbuf) {
        let mine = segs[c.rank()];
        (rd.clone(), mine.0.cast_const(), mine.1)
    } else {
        (st()?.dtype(sendtype)?, sendbuf, count_of(sendcount)?)
    };
    Ok(AllgatherV {
        rd,
        segs,
        sd,
        sbuf,
        sn,
    })
}

impl AllgatherV {
    fn send(&self) -> (*const u8, usize) {
        (self.sbuf.cast::<u8>(), self.sd.packed_size(self.sn))
    }

    fn contiguous(&self) -> bool {
        self.sd.is_contiguous() && self.rd.is_contiguous()
    }
}

/// With contiguous types, fills `recv` with an allgatherv's receive
/// segments in bytes straight from the program's arrays, in place (as
/// [`A2av::direct`], for the same reason), and returns this rank's send in
/// bytes; `None`: it goes through packed copies.
#[allow(clippy::too_many_arguments)]
fn allgatherv_direct<C: Entry, D: Entry>(
    recv: &mut SmallVec<[(*mut u8, usize); 16]>,
    c: &Comm,
    rd: &Datatype,
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    displs: *const D,
    recvtype: c_int,
) -> R<Option<(*const u8, usize)>> {
    let mine = if in_place(sendbuf) {
        None
    } else {
        let n = count_of(sendcount)?;
        let size = if sendtype == recvtype {
            rd.packed_size(n)
        } else {
            let sd = st()?.dtype(sendtype)?;
            if !sd.is_contiguous() {
                return Ok(None);
            }
            sd.packed_size(n)
        };
        Some((sendbuf.cast::<u8>(), size))
    };
    if !rd.is_contiguous() {
        return Ok(None);
    }
    v_each(
        recvbuf,
        recvcounts,
        displs,
        rd,
        c.size(),
        ["recvcounts", "displs"],
        |at, k| recv.push((at, rd.packed_size(k))),
    )?;
    Ok(Some(mine.unwrap_or_else(|| {
        let (at, n) = recv[c.rank()];
        (at.cast_const(), n)
    })))
}

#[allow(clippy::too_many_arguments)]
fn allgatherv<C: Entry, D: Entry>(
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    displs: *const D,
    recvtype: c_int,
    comm: c_int,
) -> R<()> {
    let (c, rd) = match lookup(comm, recvtype) {
        Ok(x) => x,
        Err(e) => {
            return inter::wait(inter::allgatherv(
                e, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
            ))
        }
    };
    let mut recv = SmallVec::<[(*mut u8, usize); 16]>::new();
    if let Some(send) = allgatherv_direct(
        &mut recv, &c, &rd, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
    )? {
        // Straight between the program's buffers: no packing, no copy.
        // SAFETY: MPI's contract for MPI_Allgatherv's buffers (in place,
        // this rank's send is its own receive segment).
        return Ok(unsafe { c.allgatherv_segments(send, &recv) }?);
    }
    let a = allgatherv_args(
        &c, rd, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
    )?;
    let mine = pack(a.sbuf, a.sn, &a.sd);
    let bytes = sizes(&a.segs, &a.rd);
    let mut all = vec![0u8; bytes.iter().sum()];
    c.allgatherv(&mine, &mut all, &bytes)?;
    unpack_segments(&all, &a.segs, &a.rd);
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn iallgatherv<C: Entry, D: Entry>(
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    displs: *const D,
    recvtype: c_int,
    comm: c_int,
    request: *mut c_int,
) -> R<()> {
    let (c, rd) = match lookup(comm, recvtype) {
        Ok(x) => x,
        Err(e) => {
            let started = inter::allgatherv(
                e, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
            );
            return inter::start(started, comm, request);
        }
    };
    need_request(request)?;
    let a = allgatherv_args(
        &c, rd, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
    )?;
    if a.contiguous() {
        // SAFETY: MPI's contract (see `igatherv`); in place, this rank's
        // send is its own receive segment.
        let req = unsafe { c.iallgatherv_segments(a.send(), in_bytes(a.segs, &a.rd)) }?;
        return nb_request(Box::new(NbBytes::none(req)), comm, request);
    }
    let mine = pack(a.sbuf, a.sn, &a.sd);
    let req = c.iallgatherv(mine, &sizes(&a.segs, &a.rd))?;
    nb_request(Box::new(NbBytes::typed(req, a.segs, &a.rd)), comm, request)
}

/// An alltoallv's arguments as the program gave them, read once by each of
/// the two ways it goes ([`A2av::direct`], [`A2av::typed`]).
struct A2av<C, D> {
    sendbuf: *const c_void,
    sendcounts: *const C,
    sdispls: *const D,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    rdispls: *const D,
    recvtype: c_int,
}

/// An alltoallv's send and receive segments (in place, the receive ones
/// are sent from too).
struct AlltoallV {
    sd: Datatype,
    send: Segs,
    rd: Datatype,
    recv: Segs,
}

/// An alltoallv's segments in bytes, send and receive, on the stack for up
/// to 16 ranks.
#[derive(Default)]
struct ByteSegs {
    send: SmallVec<[(*const u8, usize); 16]>,
    recv: SmallVec<[(*mut u8, usize); 16]>,
}

impl<C: Entry, D: Entry> A2av<C, D> {
    /// The segments of `p` ranks, typed (`rd`: the receive type).
    fn typed(&self, p: usize, rd: Datatype) -> R<AlltoallV> {
        let recv = v_segments(
            self.recvbuf,
            self.recvcounts,
            self.rdispls,
            &rd,
            p,
            ["recvcounts", "rdispls"],
        )?;
        let (sd, send) = if in_place(self.sendbuf) {
            (rd.clone(), recv.clone())
        } else {
            let sd = st()?.dtype(self.sendtype)?;
            let send = v_segments(
                self.sendbuf,
                self.sendcounts,
                self.sdispls,
                &sd,
                p,
                ["sendcounts", "sdispls"],
            )?;
            (sd, send)
        };
        Ok(AlltoallV { sd, send, rd, recv })
    }

    /// Fills `out` with the segments of `p` ranks straight between the
    /// program's buffers (both types contiguous, not in place), made in bytes
    /// from its arrays at once, in place: a small alltoallv's time is mostly
    /// its own call's, and moving two vectors of 16 entries is a copy of
    /// half a kilobyte. `false`: it goes through packed copies.
    fn direct(&self, out: &mut ByteSegs, p: usize, rd: &Datatype) -> R<bool> {
        if in_place(self.sendbuf) || !rd.is_contiguous() {
            return Ok(false);
        }
        let other;
        let sd = if self.sendtype == self.recvtype {
            rd
        } else {
            other = st()?.dtype(self.sendtype)?;
            &other
        };
        if !sd.is_contiguous() {
            return Ok(false);
        }
        v_each(
            self.sendbuf,
            self.sendcounts,
            self.sdispls,
            sd,
            p,
            ["sendcounts", "sdispls"],
            |at, k| out.send.push((at.cast_const(), sd.packed_size(k))),
        )?;
        v_each(
            self.recvbuf,
            self.recvcounts,
            self.rdispls,
            rd,
            p,
            ["recvcounts", "rdispls"],
            |at, k| out.recv.push((at, rd.packed_size(k))),
        )?;
        Ok(true)
    }

    /// The intercommunicator's alltoallv of these arguments, started.
    fn across(&self, e: crate::MpiErr, comm: c_int) -> R<NbBytes> {
        inter::alltoallv(
            e,
            self.sendbuf,
            self.sendcounts,
            self.sdispls,
            self.sendtype,
            self.recvbuf,
            self.recvcounts,
            self.rdispls,
            self.recvtype,
            comm,
        )
    }
}

fn alltoallv<C: Entry, D: Entry>(a: A2av<C, D>, comm: c_int) -> R<()> {
    let (c, rd) = match lookup(comm, a.recvtype) {
        Ok(x) => x,
        Err(e) => return inter::wait(a.across(e, comm)),
    };
    let mut segs = ByteSegs::default();
    if a.direct(&mut segs, c.size(), &rd)? {
        // SAFETY: MPI's contract for MPI_Alltoallv's buffers: each segment
        // holds its counts of elements, the receive ones overlap nothing.
        return Ok(unsafe { c.alltoallv_segments(&segs.send, &segs.recv) }?);
    }
    let t = a.typed(c.size(), rd)?;
    let send = pack_segments(&t.send, &t.sd);
    let rb = sizes(&t.recv, &t.rd);
    let mut all = vec![0u8; rb.iter().sum()];
    c.alltoallv(&send, &sizes(&t.send, &t.sd), &mut all, &rb)?;
    unpack_segments(&all, &t.recv, &t.rd);
    Ok(())
}

// The nonblocking data movers with contiguous types run straight between
// the program's buffers, which MPI keeps valid and the receive ones
// untouched until the request completes: no copies through owned buffers
// (measured: docs/BENCHMARKS.md, session 22).
fn ialltoallv<C: Entry, D: Entry>(a: A2av<C, D>, comm: c_int, request: *mut c_int) -> R<()> {
    let (c, rd) = match lookup(comm, a.recvtype) {
        Ok(x) => x,
        Err(e) => return inter::start(a.across(e, comm), comm, request),
    };
    need_request(request)?;
    let mut segs = ByteSegs::default();
    if a.direct(&mut segs, c.size(), &rd)? {
        // SAFETY: MPI's contract (above).
        let req = unsafe { c.ialltoallv_segments(&segs.send, &segs.recv) }?;
        return nb_request(Box::new(NbBytes::none(req)), comm, request);
    }
    let t = a.typed(c.size(), rd)?;
    let req = c.ialltoallv(
        pack_segments(&t.send, &t.sd),
        &sizes(&t.send, &t.sd),
        &sizes(&t.recv, &t.rd),
    )?;
    nb_request(Box::new(NbBytes::typed(req, t.recv, &t.rd)), comm, request)
}

/// `MPI_(I)alltoallw` (displacements in bytes, a type per rank): done at
/// once when `blocking` and every type is contiguous, else started.
#[allow(clippy::too_many_arguments)]
fn alltoallw<C: Entry, D: Entry>(
    sendbuf: *const c_void,
    sendcounts: *const C,
    sdispls: *const D,
    sendtypes: *const c_int,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    rdispls: *const D,
    recvtypes: *const c_int,
    comm: c_int,
    blocking: bool,
) -> R<Begun> {
    // The state is let go before the intercommunicator path looks again.
    let c = st()?.intra(comm);
    let c = match c {
        Ok(c) => c,
        Err(e) => {
            return inter::alltoallw(
                e, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                recvtypes, comm,
            )
            .map(Begun::Started)
        }
    };
    let p = c.size();
    let recv = w_segments(
        recvbuf,
        recvcounts,
        rdispls,
        recvtypes,
        p,
        ["recvcounts", "rdispls", "recvtypes"],
    )?;
    let send = if in_place(sendbuf) {
        recv.clone()
    } else {
        w_segments(
            sendbuf,
            sendcounts,
            sdispls,
            sendtypes,
            p,
            ["sendcounts", "sdispls", "sendtypes"],
        )?
    };
    // Every type contiguous and not in place: an alltoallv over the
    // program's own bytes (no packing, no copy out).
    if !in_place(sendbuf) {
        if let (Some(sb), Some(rb)) = (contiguous_bytes(&send), contiguous_bytes(&recv)) {
            let sb = read_only(sb);
            if blocking {
                // SAFETY: MPI's contract: the segments are valid, the send
                // ones readable and the receive ones writable, for the call.
                unsafe { c.alltoallv_segments(&sb, &rb) }?;
                return Ok(Begun::Done);
            }
            // SAFETY: as above, until completion.
            let req = unsafe { c.ialltoallv_segments(&sb, &rb) }?;
            return Ok(Begun::Started(NbBytes::none(req)));
        }
    }
    let sb: Vec<usize> = send.iter().map(|(_, n, d)| d.packed_size(*n)).collect();
    let rb: Vec<usize> = recv.iter().map(|(_, n, d)| d.packed_size(*n)).collect();
    let req = c.ialltoallv(pack_typed(&send), &sb, &rb)?;
    Ok(Begun::Started(NbBytes { req, out: recv }))
}

/// `MPI_(I)neighbor_allgatherv`, started.
#[allow(clippy::too_many_arguments)]
fn neighbor_allgatherv<C: Entry, D: Entry>(
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    displs: *const D,
    recvtype: c_int,
    comm: c_int,
    blocking: bool,
) -> R<Begun> {
    let (c, nb, sd, rd) = neighbor_args(comm, sendtype, recvtype)?;
    let send = [(sendbuf as *mut c_void, count_of(sendcount)?, sd)];
    let recv = v_typed(
        recvbuf,
        recvcounts,
        displs,
        &rd,
        nb.indegree(),
        ["recvcounts", "displs"],
    )?;
    neighbor_start(&c, &nb, &send, true, recv, blocking)
}

/// `MPI_(I)neighbor_alltoallv`, started.
#[allow(clippy::too_many_arguments)]
fn neighbor_alltoallv<C: Entry, D: Entry>(
    sendbuf: *const c_void,
    sendcounts: *const C,
    sdispls: *const D,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    rdispls: *const D,
    recvtype: c_int,
    comm: c_int,
    blocking: bool,
) -> R<Begun> {
    let (c, nb, sd, rd) = neighbor_args(comm, sendtype, recvtype)?;
    let send = v_typed(
        sendbuf,
        sendcounts,
        sdispls,
        &sd,
        nb.outdegree(),
        ["sendcounts", "sdispls"],
    )?;
    let recv = v_typed(
        recvbuf,
        recvcounts,
        rdispls,
        &rd,
        nb.indegree(),
        ["recvcounts", "rdispls"],
    )?;
    neighbor_start(&c, &nb, &send, false, recv, blocking)
}

/// `MPI_(I)neighbor_alltoallw`, started (`MPI_Aint` byte displacements).
#[allow(clippy::too_many_arguments)]
fn neighbor_alltoallw<C: Entry>(
    sendbuf: *const c_void,
    sendcounts: *const C,
    sdispls: *const isize,
    sendtypes: *const c_int,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    rdispls: *const isize,
    recvtypes: *const c_int,
    comm: c_int,
    blocking: bool,
) -> R<Begun> {
    let (c, nb) = crate::coll::neighbor::neighbors(&mut *st()?, comm)?;
    let (ki, ko) = (nb.indegree(), nb.outdegree());
    let send = w_segments(
        sendbuf,
        sendcounts,
        sdispls,
        sendtypes,
        ko,
        ["sendcounts", "sdispls", "sendtypes"],
    )?;
    let recv = w_segments(
        recvbuf,
        recvcounts,
        rdispls,
        recvtypes,
        ki,
        ["recvcounts", "rdispls", "recvtypes"],
    )?;
    neighbor_start(&c, &nb, &send, false, recv, blocking)
}

mpi! {
    fn MPI_Gatherv / PMPI_Gatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: c_int, root: c_int, comm: c_int) {
        gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm)
    }
    fn MPI_Gatherv_c / PMPI_Gatherv_c(sendbuf: *const c_void, sendcount: i64, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const i64, displs: *const isize, recvtype: c_int, root: c_int, comm: c_int) {
        gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm)
    }
    fn MPI_Igatherv / PMPI_Igatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: c_int, root: c_int, comm: c_int, request: *mut c_int) {
        igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, request)
    }
    fn MPI_Igatherv_c / PMPI_Igatherv_c(sendbuf: *const c_void, sendcount: i64, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const i64, displs: *const isize, recvtype: c_int, root: c_int, comm: c_int, request: *mut c_int) {
        igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, request)
    }
    fn MPI_Scatterv / PMPI_Scatterv(sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int) {
        scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm)
    }
    fn MPI_Scatterv_c / PMPI_Scatterv_c(sendbuf: *const c_void, sendcounts: *const i64, displs: *const isize, sendtype: c_int, recvbuf: *mut c_void, recvcount: i64, recvtype: c_int, root: c_int, comm: c_int) {
        scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm)
    }
    fn MPI_Iscatterv / PMPI_Iscatterv(sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int, request: *mut c_int) {
        iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, request)
    }
    fn MPI_Iscatterv_c / PMPI_Iscatterv_c(sendbuf: *const c_void, sendcounts: *const i64, displs: *const isize, sendtype: c_int, recvbuf: *mut c_void, recvcount: i64, recvtype: c_int, root: c_int, comm: c_int, request: *mut c_int) {
        iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, request)
    }
    fn MPI_Allgatherv / PMPI_Allgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: c_int, comm: c_int) {
        allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm)
    }
    fn MPI_Allgatherv_c / PMPI_Allgatherv_c(sendbuf: *const c_void, sendcount: i64, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const i64, displs: *const isize, recvtype: c_int, comm: c_int) {
        allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm)
    }
    fn MPI_Iallgatherv / PMPI_Iallgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: c_int, comm: c_int, request: *mut c_int) {
        iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, request)
    }
    fn MPI_Iallgatherv_c / PMPI_Iallgatherv_c(sendbuf: *const c_void, sendcount: i64, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const i64, displs: *const isize, recvtype: c_int, comm: c_int, request: *mut c_int) {
        iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, request)
    }
    fn MPI_Alltoallv / PMPI_Alltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: c_int, comm: c_int) {
        alltoallv(A2av { sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype }, comm)
    }
    fn MPI_Alltoallv_c / PMPI_Alltoallv_c(sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const isize, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const isize, recvtype: c_int, comm: c_int) {
        alltoallv(A2av { sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype }, comm)
    }
    fn MPI_Ialltoallv / PMPI_Ialltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: c_int, comm: c_int, request: *mut c_int) {
        ialltoallv(A2av { sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype }, comm, request)
    }
    fn MPI_Ialltoallv_c / PMPI_Ialltoallv_c(sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const isize, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const isize, recvtype: c_int, comm: c_int, request: *mut c_int) {
        ialltoallv(A2av { sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype }, comm, request)
    }
}

// Each pair: the blocking function waits for what the starter begins; the
// nonblocking one hands it to the program as a request.
mpi_coll_pair! {
    MPI_Alltoallw / PMPI_Alltoallw,
    MPI_Ialltoallw / PMPI_Ialltoallw => alltoallw(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const c_int, comm: c_int) on comm
    MPI_Alltoallw_c / PMPI_Alltoallw_c,
    MPI_Ialltoallw_c / PMPI_Ialltoallw_c => alltoallw(sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const isize, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const isize, recvtypes: *const c_int, comm: c_int) on comm
    MPI_Neighbor_allgatherv / PMPI_Neighbor_allgatherv,
    MPI_Ineighbor_allgatherv / PMPI_Ineighbor_allgatherv => neighbor_allgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: c_int, comm: c_int) on comm
    MPI_Neighbor_allgatherv_c / PMPI_Neighbor_allgatherv_c,
    MPI_Ineighbor_allgatherv_c / PMPI_Ineighbor_allgatherv_c => neighbor_allgatherv(sendbuf: *const c_void, sendcount: i64, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const i64, displs: *const isize, recvtype: c_int, comm: c_int) on comm
    MPI_Neighbor_alltoallv / PMPI_Neighbor_alltoallv,
    MPI_Ineighbor_alltoallv / PMPI_Ineighbor_alltoallv => neighbor_alltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: c_int, comm: c_int) on comm
    MPI_Neighbor_alltoallv_c / PMPI_Neighbor_alltoallv_c,
    MPI_Ineighbor_alltoallv_c / PMPI_Ineighbor_alltoallv_c => neighbor_alltoallv(sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const isize, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const isize, recvtype: c_int, comm: c_int) on comm
    MPI_Neighbor_alltoallw / PMPI_Neighbor_alltoallw,
    MPI_Ineighbor_alltoallw / PMPI_Ineighbor_alltoallw => neighbor_alltoallw(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const isize, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const isize, recvtypes: *const c_int, comm: c_int) on comm
    MPI_Neighbor_alltoallw_c / PMPI_Neighbor_alltoallw_c,
    MPI_Ineighbor_alltoallw_c / PMPI_Ineighbor_alltoallw_c => neighbor_alltoallw(sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const isize, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const isize, recvtypes: *const c_int, comm: c_int) on comm
}
