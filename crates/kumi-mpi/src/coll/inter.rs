//! Collectives on intercommunicators (MPI 4.1 section 6.2.2 and the
//! intercommunicator clause of each collective).
//!
//! Every collective on an intercommunicator moves data between the two
//! groups. The data movers (gather, scatter, allgather, all-to-all and their
//! v- and w-forms) are one exchange across ([`InterComm::iexchange`], run by
//! the runtime's engine, so the nonblocking forms progress as the others
//! do): each rank sends its blocks to the remote ranks that want them and
//! receives the blocks meant for it. The reductions reduce within the group
//! that contributes (the runtime's reduction on the local group, any
//! datatype and operation), then the group's leader (local rank 0) passes
//! the result across, and the receiving group takes it as a whole (reduce,
//! allreduce) or in pieces (reduce-scatter).
//!
//! Which arguments each call reads where:
//! - rooted calls: the root passes `MPI_ROOT` and reads only its root-side
//!   arguments (the receive ones of a gather, the send ones of a scatter,
//!   the receive buffer of a reduce); the other ranks of its group pass
//!   `MPI_PROC_NULL` and read nothing; the other group passes the root's
//!   rank and reads only its own side;
//! - the counts and displacements of a v- or w-form have one entry per rank
//!   of the *remote* group, which is where blocks go to or come from; those
//!   of a reduce-scatter one per rank of the *local* group, which receives;
//! - `MPI_IN_PLACE` is not an intercommunicator argument and is refused.

use super::*;
use kumi::inter::InterComm;
use std::rc::Rc;

/// An intercommunicator and the handle of its local group.
struct Across {
    ic: Rc<InterComm>,
    local: c_int,
}

/// The intercommunicator behind `comm`, or `e` (the intracommunicator
/// lookup's error) if it is not one.
fn across(comm: c_int, e: crate::MpiErr) -> R<Across> {
    let mut s = st()?;
    match s.comm_entry(comm) {
        Ok(x) if x.inter.is_some() => Ok(Across {
            ic: x.inter.clone().expect("checked"),
            local: x.inter_local,
        }),
        _ => Err(e),
    }
}

/// A rank's part in a rooted collective on an intercommunicator.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// `MPI_ROOT`: this rank is the root.
    Root,
    /// `MPI_PROC_NULL`: another rank of this group is.
    Idle,
    /// The root is this rank of the other group.
    Leaf(usize),
}

fn role(root: c_int, ic: &InterComm) -> R<Role> {
    match root {
        MPI_ROOT => Ok(Role::Root),
        MPI_PROC_NULL => Ok(Role::Idle),
        r if r >= 0 && (r as usize) < ic.remote_size() => Ok(Role::Leaf(r as usize)),
        r => err(
            MPI_ERR_ROOT,
            format!(
                "root {r} is neither MPI_ROOT, MPI_PROC_NULL nor a rank of the other group (of {})",
                ic.remote_size()
            ),
        ),
    }
}

fn no_in_place(buf: *const c_void, what: &str) -> R<()> {
    if in_place(buf) {
        return err(
            MPI_ERR_BUFFER,
            format!("MPI_IN_PLACE as {what} is not allowed on an intercommunicator"),
        );
    }
    Ok(())
}

/// The send and receive datatypes.
fn types(sendtype: c_int, recvtype: c_int) -> R<(Datatype, Datatype)> {
    let s = st()?;
    Ok((s.dtype(sendtype)?, s.dtype(recvtype)?))
}

/// Starts the exchange: `blocks[b]` goes to remote rank `r` for each
/// `(r, b)` of `to`; the block of remote rank `r` lands in segment `s` for
/// each `(r, s)` of `from`.
fn exchange(
    ic: &InterComm,
    blocks: &[Seg],
    to: &[(usize, usize)],
    from: Vec<(usize, Seg)>,
) -> R<NbBytes> {
    let data = pack_typed(blocks);
    let send_bytes: Vec<usize> = blocks.iter().map(|(_, n, d)| d.packed_size(*n)).collect();
    let recv_bytes: Vec<usize> = from
        .iter()
        .map(|(_, (_, n, d))| d.packed_size(*n))
        .collect();
    let recvs: Vec<(usize, usize)> = from.iter().enumerate().map(|(b, &(r, _))| (r, b)).collect();
    let req = ic.iexchange(data, &send_bytes, to, &recv_bytes, &recvs)?;
    Ok(NbBytes {
        req,
        out: from.into_iter().map(|(_, s)| s).collect(),
    })
}

/// Nothing to move at this rank (it still takes part, in order).
fn idle(ic: &InterComm) -> R<NbBytes> {
    exchange(ic, &[], &[], Vec::new())
}

/// A nonblocking collective: the started one, registered as request
/// `request`.
pub(super) fn start(started: R<NbBytes>, comm: c_int, request: *mut c_int) -> R<()> {
    need_request(request)?;
    nb_request(Box::new(started?), comm, request)
}

/// A blocking collective: the started one, waited for.
pub(super) fn wait(started: R<NbBytes>) -> R<()> {
    Box::new(started?).finish()
}

/// `(r, segs[r])` for every remote rank `r`.
fn from_each(segs: Vec<Seg>) -> Vec<(usize, Seg)> {
    segs.into_iter().enumerate().collect()
}

/// `(r, r)` for the first `n` ranks: block r to remote rank r.
fn each(n: usize) -> Vec<(usize, usize)> {
    (0..n).map(|r| (r, r)).collect()
}

/// One segment: `n` elements of `dt` at `buf`.
fn one<E: Entry>(buf: *const c_void, n: E, dt: c_int) -> R<Seg> {
    Ok((buf.cast_mut(), count_of(n)?, st()?.dtype(dt)?))
}

/// A gather across: the root receives `root_segs(remote size)`, one from
/// each remote rank; a leaf sends its one segment to the root.
fn gather_across<E: Entry>(
    ic: &InterComm,
    root: c_int,
    sendbuf: *const c_void,
    sendcount: E,
    sendtype: c_int,
    root_segs: impl FnOnce(usize) -> R<Vec<Seg>>,
) -> R<NbBytes> {
    match role(root, ic)? {
        Role::Root => exchange(ic, &[], &[], from_each(root_segs(ic.remote_size())?)),
        Role::Idle => idle(ic),
        Role::Leaf(r) => {
            no_in_place(sendbuf, "sendbuf")?;
            exchange(
                ic,
                &[one(sendbuf, sendcount, sendtype)?],
                &[(r, 0)],
                Vec::new(),
            )
        }
    }
}

/// A scatter across, the reverse of [`gather_across`].
fn scatter_across<E: Entry>(
    ic: &InterComm,
    root: c_int,
    recvbuf: *mut c_void,
    recvcount: E,
    recvtype: c_int,
    root_segs: impl FnOnce(usize) -> R<Vec<Seg>>,
) -> R<NbBytes> {
    match role(root, ic)? {
        Role::Root => {
            let n = ic.remote_size();
            exchange(ic, &root_segs(n)?, &each(n), Vec::new())
        }
        Role::Idle => idle(ic),
        Role::Leaf(r) => {
            no_in_place(recvbuf, "recvbuf")?;
            exchange(ic, &[], &[], vec![(r, one(recvbuf, recvcount, recvtype)?)])
        }
    }
}

/// `MPI_(I)gather` on an intercommunicator, started.
#[allow(clippy::too_many_arguments)]
pub(super) fn gather(
    e: crate::MpiErr,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    root: c_int,
    comm: c_int,
) -> R<NbBytes> {
    let ic = across(comm, e)?.ic;
    gather_across(&ic, root, sendbuf, sendcount, sendtype, |n| {
        let rd = st()?.dtype(recvtype)?;
        Ok(of_type(
            even_segments(recvbuf, n, count(recvcount)?, &rd),
            &rd,
        ))
    })
}

/// `MPI_(I)gatherv` on an intercommunicator, started.
#[allow(clippy::too_many_arguments)]
pub(super) fn gatherv<C: Entry, D: Entry>(
    e: crate::MpiErr,
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    displs: *const D,
    recvtype: c_int,
    root: c_int,
    comm: c_int,
) -> R<NbBytes> {
    let ic = across(comm, e)?.ic;
    gather_across(&ic, root, sendbuf, sendcount, sendtype, |n| {
        let rd = st()?.dtype(recvtype)?;
        v_typed(
            recvbuf,
            recvcounts,
            displs,
            &rd,
            n,
            ["recvcounts", "displs"],
        )
    })
}

/// `MPI_(I)scatter` on an intercommunicator, started.
#[allow(clippy::too_many_arguments)]
pub(super) fn scatter(
    e: crate::MpiErr,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    root: c_int,
    comm: c_int,
) -> R<NbBytes> {
    let ic = across(comm, e)?.ic;
    scatter_across(&ic, root, recvbuf, recvcount, recvtype, |n| {
        let sd = st()?.dtype(sendtype)?;
        Ok(of_type(
            even_segments(sendbuf, n, count(sendcount)?, &sd),
            &sd,
        ))
    })
}

/// `MPI_(I)scatterv` on an intercommunicator, started.
#[allow(clippy::too_many_arguments)]
pub(super) fn scatterv<C: Entry, D: Entry>(
    e: crate::MpiErr,
    sendbuf: *const c_void,
    sendcounts: *const C,
    displs: *const D,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: C,
    recvtype: c_int,
    root: c_int,
    comm: c_int,
) -> R<NbBytes> {
    let ic = across(comm, e)?.ic;
    scatter_across(&ic, root, recvbuf, recvcount, recvtype, |n| {
        let sd = st()?.dtype(sendtype)?;
        v_typed(
            sendbuf,
            sendcounts,
            displs,
            &sd,
            n,
            ["sendcounts", "displs"],
        )
    })
}

/// `MPI_(I)allgather` on an intercommunicator, started: this rank's block
/// goes to every remote rank, and every remote rank's comes here.
#[allow(clippy::too_many_arguments)]
pub(super) fn allgather(
    e: crate::MpiErr,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    comm: c_int,
) -> R<NbBytes> {
    let Across { ic, .. } = across(comm, e)?;
    no_in_place(sendbuf, "sendbuf")?;
    let n = ic.remote_size();
    let (sd, rd) = types(sendtype, recvtype)?;
    let mine = (sendbuf.cast_mut(), count_of(sendcount)?, sd);
    let recv = of_type(even_segments(recvbuf, n, count(recvcount)?, &rd), &rd);
    let to: Vec<(usize, usize)> = (0..n).map(|r| (r, 0)).collect();
    exchange(&ic, &[mine], &to, from_each(recv))
}

/// `MPI_(I)allgatherv` on an intercommunicator, started.
#[allow(clippy::too_many_arguments)]
pub(super) fn allgatherv<C: Entry, D: Entry>(
    e: crate::MpiErr,
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    displs: *const D,
    recvtype: c_int,
    comm: c_int,
) -> R<NbBytes> {
    let Across { ic, .. } = across(comm, e)?;
    no_in_place(sendbuf, "sendbuf")?;
    let n = ic.remote_size();
    let (sd, rd) = types(sendtype, recvtype)?;
    let mine = (sendbuf.cast_mut(), count_of(sendcount)?, sd);
    let recv = v_typed(
        recvbuf,
        recvcounts,
        displs,
        &rd,
        n,
        ["recvcounts", "displs"],
    )?;
    let to: Vec<(usize, usize)> = (0..n).map(|r| (r, 0)).collect();
    exchange(&ic, &[mine], &to, from_each(recv))
}

/// `MPI_(I)alltoall` on an intercommunicator, started: block r goes to
/// remote rank r, and remote rank r's block for this rank lands in block r.
#[allow(clippy::too_many_arguments)]
pub(super) fn alltoall(
    e: crate::MpiErr,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    comm: c_int,
) -> R<NbBytes> {
    let Across { ic, .. } = across(comm, e)?;
    no_in_place(sendbuf, "sendbuf")?;
    let n = ic.remote_size();
    let (sd, rd) = types(sendtype, recvtype)?;
    let send = of_type(even_segments(sendbuf, n, count(sendcount)?, &sd), &sd);
    let recv = of_type(even_segments(recvbuf, n, count(recvcount)?, &rd), &rd);
    exchange(&ic, &send, &each(n), from_each(recv))
}

/// `MPI_(I)alltoallv` on an intercommunicator, started.
#[allow(clippy::too_many_arguments)]
pub(super) fn alltoallv<C: Entry, D: Entry>(
    e: crate::MpiErr,
    sendbuf: *const c_void,
    sendcounts: *const C,
    sdispls: *const D,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    rdispls: *const D,
    recvtype: c_int,
    comm: c_int,
) -> R<NbBytes> {
    let Across { ic, .. } = across(comm, e)?;
    no_in_place(sendbuf, "sendbuf")?;
    let n = ic.remote_size();
    let (sd, rd) = types(sendtype, recvtype)?;
    let send = v_typed(
        sendbuf,
        sendcounts,
        sdispls,
        &sd,
        n,
        ["sendcounts", "sdispls"],
    )?;
    let recv = v_typed(
        recvbuf,
        recvcounts,
        rdispls,
        &rd,
        n,
        ["recvcounts", "rdispls"],
    )?;
    exchange(&ic, &send, &each(n), from_each(recv))
}

/// `MPI_(I)alltoallw` on an intercommunicator, started (byte displacements,
/// a type per remote rank).
#[allow(clippy::too_many_arguments)]
pub(super) fn alltoallw<C: Entry, D: Entry>(
    e: crate::MpiErr,
    sendbuf: *const c_void,
    sendcounts: *const C,
    sdispls: *const D,
    sendtypes: *const c_int,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    rdispls: *const D,
    recvtypes: *const c_int,
    comm: c_int,
) -> R<NbBytes> {
    let Across { ic, .. } = across(comm, e)?;
    no_in_place(sendbuf, "sendbuf")?;
    let n = ic.remote_size();
    let send = w_segments(
        sendbuf,
        sendcounts,
        sdispls,
        sendtypes,
        n,
        ["sendcounts", "sdispls", "sendtypes"],
    )?;
    let recv = w_segments(
        recvbuf,
        recvcounts,
        rdispls,
        recvtypes,
        n,
        ["recvcounts", "rdispls", "recvtypes"],
    )?;
    exchange(&ic, &send, &each(n), from_each(recv))
}

/// `MPI_Bcast` on an intercommunicator.
pub(super) fn bcast(
    e: crate::MpiErr,
    buf: *mut c_void,
    n: c_int,
    dt: c_int,
    root: c_int,
    comm: c_int,
) -> R<()> {
    let Across { ic, .. } = across(comm, e)?;
    let who = match role(root, &ic)? {
        Role::Root => kumi::inter::Root::Me,
        Role::Idle => return Ok(()),
        Role::Leaf(r) => kumi::inter::Root::Remote(r),
    };
    let d = st()?.dtype(dt)?;
    let n = count(n)?;
    let mut bytes = match who {
        kumi::inter::Root::Me => pack(buf, n, &d),
        _ => vec![0u8; d.packed_size(n)],
    };
    ic.bcast(&mut bytes, who)?;
    if who != kumi::inter::Root::Me {
        unpack(&bytes, buf, n, &d);
    }
    Ok(())
}

/// `MPI_Ibcast` on an intercommunicator, started: the root sends to each
/// rank of the other group.
pub(super) fn ibcast(
    e: crate::MpiErr,
    buf: *mut c_void,
    n: c_int,
    dt: c_int,
    root: c_int,
    comm: c_int,
) -> R<NbBytes> {
    let Across { ic, .. } = across(comm, e)?;
    match role(root, &ic)? {
        Role::Root => {
            let to: Vec<(usize, usize)> = (0..ic.remote_size()).map(|r| (r, 0)).collect();
            exchange(&ic, &[one(buf, n, dt)?], &to, Vec::new())
        }
        Role::Idle => idle(&ic),
        Role::Leaf(r) => exchange(&ic, &[], &[], vec![(r, one(buf, n, dt)?)]),
    }
}

/// `MPI_Barrier` on an intercommunicator.
pub(super) fn barrier(e: crate::MpiErr, comm: c_int) -> R<()> {
    Ok(across(comm, e)?.ic.barrier()?)
}

/// Room for `n` elements of `d` laid out as the type says (its lower
/// bound and gaps included), for a reduction's result.
struct Scratch {
    words: Vec<u128>,
    shift: isize,
}

impl Scratch {
    fn new(d: &Datatype, n: usize) -> R<Scratch> {
        if n == 0 {
            return Ok(Scratch {
                words: Vec::new(),
                shift: 0,
            });
        }
        let (extent, span) = (d.extent(), d.true_extent());
        if extent < 0 || span < 0 {
            return err(
                MPI_ERR_TYPE,
                "a reduction on an intercommunicator needs a datatype of non-negative extent",
            );
        }
        let bytes = (n - 1) * extent as usize + span as usize;
        Ok(Scratch {
            words: vec![0; bytes.div_ceil(16)],
            shift: -d.true_lb(),
        })
    }

    /// The buffer as the program's would be (element 0 at its start).
    fn ptr(&mut self) -> *mut c_void {
        self.words
            .as_mut_ptr()
            .cast::<u8>()
            .wrapping_offset(self.shift)
            .cast()
    }
}

/// Reduces this group's contributions (`n` elements of `dt` at `send`) to
/// its leader; the leader gets the packed result.
fn reduce_in_group(
    x: &Across,
    send: *const c_void,
    n: usize,
    dt: c_int,
    op: c_int,
) -> R<Option<Vec<u8>>> {
    no_in_place(send, "sendbuf")?;
    let d = st()?.dtype(dt)?;
    let mut tmp = Scratch::new(&d, n)?;
    reduction(
        "MPI_Reduce",
        Red::Reduce(0),
        send,
        tmp.ptr(),
        n,
        dt,
        op,
        x.local,
    )?;
    Ok((x.ic.local().rank() == 0).then(|| pack(tmp.ptr(), n, &d)))
}

/// The leaders swap their groups' results (`len` bytes each); every other
/// rank takes part with nothing. The leader gets the other group's.
fn leaders_swap(ic: &InterComm, mine: Option<Vec<u8>>, len: usize) -> R<Option<Vec<u8>>> {
    let leader = mine.is_some();
    let req = match mine {
        Some(m) => {
            let n = m.len();
            ic.iexchange(m, &[n], &[(0, 0)], &[len], &[(0, 0)])?
        }
        None => ic.iexchange(Vec::new(), &[], &[], &[], &[])?,
    };
    let got = req.wait()?;
    Ok(leader.then_some(got))
}

/// `MPI_Reduce` on an intercommunicator: the other group's contributions,
/// reduced there, arrive at the root.
#[allow(clippy::too_many_arguments)]
pub(super) fn reduce(
    e: crate::MpiErr,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    n: c_int,
    dt: c_int,
    op: c_int,
    root: c_int,
    comm: c_int,
) -> R<()> {
    let x = across(comm, e)?;
    let n = count(n)?;
    match role(root, &x.ic)? {
        Role::Root => {
            let seg = (recvbuf, n, st()?.dtype(dt)?);
            wait(exchange(&x.ic, &[], &[], vec![(0, seg)]))
        }
        Role::Idle => wait(idle(&x.ic)),
        Role::Leaf(r) => {
            let d = st()?.dtype(dt)?;
            let started = match reduce_in_group(&x, sendbuf, n, dt, op)? {
                Some(mine) => {
                    let req =
                        x.ic.iexchange(mine, &[d.packed_size(n)], &[(r, 0)], &[], &[])?;
                    NbBytes::none(req)
                }
                None => idle(&x.ic)?,
            };
            wait(Ok(started))
        }
    }
}

/// `MPI_Allreduce` on an intercommunicator: each group gets the reduction
/// of the other group's contributions.
pub(super) fn allreduce(
    e: crate::MpiErr,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    n: c_int,
    dt: c_int,
    op: c_int,
    comm: c_int,
) -> R<()> {
    let x = across(comm, e)?;
    let (n, d) = (count(n)?, st()?.dtype(dt)?);
    let len = d.packed_size(n);
    let mine = reduce_in_group(&x, sendbuf, n, dt, op)?;
    let mut theirs = leaders_swap(&x.ic, mine, len)?.unwrap_or_else(|| vec![0; len]);
    x.ic.local().bcast(&mut theirs, 0)?;
    unpack(&theirs, recvbuf, n, &d);
    Ok(())
}

/// `MPI_Reduce_scatter(_block)` on an intercommunicator: the reduction of
/// the other group's contributions, `counts[i]` elements to local rank i
/// (the sum of `counts` is the same in both groups).
pub(super) fn reduce_scatter(
    e: crate::MpiErr,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    counts: Counts,
    dt: c_int,
    op: c_int,
    comm: c_int,
) -> R<()> {
    let x = across(comm, e)?;
    let p = x.ic.local().size();
    let cs = match counts {
        Counts::Block(n) => vec![count(n)?; p],
        Counts::Each(a) => super::counts(a, p, "recvcounts")?,
    };
    let total: usize = cs.iter().sum();
    let d = st()?.dtype(dt)?;
    let mine = reduce_in_group(&x, sendbuf, total, dt, op)?;
    let theirs = leaders_swap(&x.ic, mine, d.packed_size(total))?.unwrap_or_default();
    let bytes: Vec<usize> = cs.iter().map(|&k| d.packed_size(k)).collect();
    let me = x.ic.local().rank();
    let mut part = vec![0u8; bytes[me]];
    x.ic.local().scatterv(&theirs, &bytes, &mut part, 0)?;
    unpack(&part, recvbuf, cs[me], &d);
    Ok(())
}

/// The receive counts of a reduce-scatter.
pub(super) enum Counts {
    /// `MPI_Reduce_scatter_block`'s one count for every rank.
    Block(c_int),
    /// `MPI_Reduce_scatter`'s array, one per local rank.
    Each(*const c_int),
}

/// The nonblocking reductions on an intercommunicator (`MPI_Iallreduce`,
/// `MPI_Ireduce`, `MPI_Ireduce_scatter(_block)`): `red`, as the
/// intracommunicator form names it (or [`reduce_role`] made it), turned into
/// its intercommunicator form and started through the typed reduction of
/// every datatype and operation: one schedule on the communicator of both
/// groups (`kumi::inter::InterComm::iallreduce`, `ireduce`), which takes
/// its place among the intercommunicator's collectives now and progresses
/// with the engine. The scattered form reduces the whole vector and keeps
/// this rank's counts. `MPI_IN_PLACE` (which the caller turned into `send
/// == recv`) is refused. `None` never: the caller registers the request.
#[allow(clippy::too_many_arguments)]
pub(super) fn nb_reduction(
    e: crate::MpiErr,
    name: &str,
    red: Red,
    send: *const c_void,
    recv: *mut c_void,
    n: usize,
    dt: c_int,
    op: c_int,
    comm: c_int,
) -> R<Option<Box<dyn CollPending>>> {
    let Across { ic, .. } = across(comm, e)?;
    let red = match red {
        Red::IAll => Red::IAllInter(ic.clone()),
        Red::IScatter(cs) => Red::IScatterInter(ic.clone(), cs),
        r @ Red::IReduceInter(..) => r,
        _ => {
            return err(
                MPI_ERR_INTERN,
                format!("{name}: not a nonblocking reduction"),
            )
        }
    };
    // The root's own buffer is not read (it receives); every other
    // contributor's is, and may not be the receive buffer.
    let contributes = !matches!(
        red,
        Red::IReduceInter(_, kumi::inter::Root::Me | kumi::inter::Root::None)
    );
    if contributes && n > 0 && std::ptr::eq(send, recv) {
        return err(
            MPI_ERR_BUFFER,
            "MPI_IN_PLACE as sendbuf is not allowed on an intercommunicator",
        );
    }
    let (dt, d) = reduction_type(&*st()?, dt)?;
    let send = if contributes {
        send
    } else {
        recv as *const c_void
    };
    reduce_typed(name, &red, send, recv, n, dt, op, ic.local(), d)
}

/// `MPI_Ireduce`'s part for this rank of an intercommunicator, by `root`
/// (`MPI_ROOT`, `MPI_PROC_NULL`, or a rank of the other group).
pub(super) fn reduce_role(e: crate::MpiErr, root: c_int, comm: c_int) -> R<Red> {
    let Across { ic, .. } = across(comm, e)?;
    let who = match role(root, &ic)? {
        Role::Root => kumi::inter::Root::Me,
        Role::Idle => kumi::inter::Root::None,
        Role::Leaf(r) => kumi::inter::Root::Remote(r),
    };
    Ok(Red::IReduceInter(ic, who))
}
