//! Neighbourhood collectives with one count per block
//! (`MPI_(I)neighbor_allgather`, `MPI_(I)neighbor_alltoall`): the blocks of
//! a Cartesian or graph topology paired in the order MPI-4.1 section 8.6
//! fixes, straight between the program's buffers when every type is
//! contiguous. The v- and w-forms are in [`super::v`].

use super::*;
use crate::p2p::predefined_size;
use crate::state::State;
use smallvec::SmallVec;
use std::rc::Rc;

/// Byte segments of a neighbourhood collective, as many as its neighbours.
type Bytes<P> = SmallVec<[(P, usize); 8]>;

/// A rank's neighbours for the neighbourhood collectives.
pub(crate) enum Neighbors {
    /// Cartesian, in MPI's order: for each dimension the source side
    /// (coordinate - 1), then the destination side (+ 1); `None` off a
    /// non-periodic edge (`MPI_PROC_NULL`).
    Cart(Vec<Option<usize>>),
    /// A distributed graph: in-neighbours, out-neighbours, in their order.
    Graph {
        sources: Vec<usize>,
        dests: Vec<usize>,
    },
}

impl Neighbors {
    pub(crate) fn indegree(&self) -> usize {
        match self {
            Neighbors::Cart(nb) => nb.len(),
            Neighbors::Graph { sources, .. } => sources.len(),
        }
    }

    pub(crate) fn outdegree(&self) -> usize {
        match self {
            Neighbors::Cart(nb) => nb.len(),
            Neighbors::Graph { dests, .. } => dests.len(),
        }
    }
}

/// `(peer, block)` pairs of a neighbourhood collective, one per neighbour.
pub(crate) type Pairs = SmallVec<[(usize, usize); 8]>;

/// A rank's neighbours on its communicator's topology and the pairs of
/// its neighbourhood collectives, worked out on the first such call and
/// kept in the communicator's entry (a topology never changes): a call
/// then neither recomputes coordinates nor allocates.
pub(crate) struct Neighborhood {
    pub nb: Neighbors,
    /// The sends of the allgathers (one block to every out-neighbour) and
    /// of the all-to-alls (block j to out-neighbour j).
    sends_shared: Pairs,
    sends_each: Pairs,
    /// The receives: block i from in-neighbour i.
    recvs: Pairs,
    /// The receive blocks from `MPI_PROC_NULL` (off a non-periodic edge of
    /// a Cartesian grid): nothing arrives there, and the block is left
    /// alone.
    pub proc_null: SmallVec<[usize; 8]>,
}

impl Neighborhood {
    fn new(nb: Neighbors) -> Neighborhood {
        let (sends_shared, recvs) = pairs(&nb, true);
        let (sends_each, _) = pairs(&nb, false);
        let proc_null = match &nb {
            Neighbors::Cart(c) => c
                .iter()
                .enumerate()
                .filter(|(_, n)| n.is_none())
                .map(|(i, _)| i)
                .collect(),
            Neighbors::Graph { .. } => SmallVec::new(),
        };
        Neighborhood {
            nb,
            sends_shared,
            sends_each,
            recvs,
            proc_null,
        }
    }

    pub(crate) fn indegree(&self) -> usize {
        self.nb.indegree()
    }

    pub(crate) fn outdegree(&self) -> usize {
        self.nb.outdegree()
    }

    /// The `(peer, block)` sends and receives: one send block to every
    /// out-neighbour (`shared`, the allgathers) or one per out-neighbour
    /// (the all-to-alls), one receive block per in-neighbour; none to or
    /// from an `MPI_PROC_NULL` neighbour of a Cartesian grid.
    pub(crate) fn pairs(&self, shared: bool) -> (&Pairs, &Pairs) {
        let sends = if shared {
            &self.sends_shared
        } else {
            &self.sends_each
        };
        (sends, &self.recvs)
    }
}

/// See [`Neighborhood::pairs`].
fn pairs(nb: &Neighbors, shared: bool) -> (Pairs, Pairs) {
    let block = |j: usize| if shared { 0 } else { j };
    let (mut sends, mut recvs) = (SmallVec::new(), SmallVec::new());
    match nb {
        Neighbors::Cart(nb) => {
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
    (sends, recvs)
}

/// The communicator and this rank's neighbours on its topology.
pub(crate) fn neighbors(s: &mut State, comm: c_int) -> R<(Comm, Rc<Neighborhood>)> {
    let e = s.comm_entry(comm)?;
    if let Some(n) = &e.neighborhood {
        return Ok((e.comm.clone(), n.clone()));
    }
    let nb = if let Some(g) = &e.graph {
        Neighbors::Graph {
            sources: g.sources.clone(),
            dests: g.dests.clone(),
        }
    } else if let Some(cart) = &e.cart {
        Neighbors::Cart(cart.neighbors(e.comm.rank()))
    } else {
        return err(
            MPI_ERR_TOPOLOGY,
            "neighbourhood collectives need a communicator with a Cartesian or distributed graph \
             topology",
        );
    };
    let n = Rc::new(Neighborhood::new(nb));
    e.neighborhood = Some(n.clone());
    Ok((e.comm.clone(), n))
}

/// The fast path of the forms with one count per block, for predefined
/// types (contiguous, extent = size, known from the handle): no datatype
/// object taken, the segments on the stack. `None` where it does not apply
/// (the general path then checks everything and says what is wrong).
#[allow(clippy::too_many_arguments)]
fn neighbor_predefined(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    comm: c_int,
    shared: bool,
    blocking: bool,
) -> Option<R<Begun>> {
    let sn = predefined_size(sendtype)?.checked_mul(usize::try_from(sendcount).ok()?)?;
    let rn = predefined_size(recvtype)?.checked_mul(usize::try_from(recvcount).ok()?)?;
    let (c, nb) = match st().and_then(|mut s| neighbors(&mut s, comm)) {
        Ok(x) => x,
        Err(x) => return Some(Err(x)),
    };
    let blocks =
        |base: *mut u8, k: usize, n: usize| (0..k).map(move |i| (base.wrapping_add(i * n), n));
    let send: Bytes<*const u8> = if shared {
        smallvec::smallvec![(sendbuf.cast::<u8>(), sn)]
    } else {
        blocks(sendbuf.cast_mut().cast(), nb.outdegree(), sn)
            .map(|(b, n)| (b.cast_const(), n))
            .collect()
    };
    let recv = blocks(recvbuf.cast(), nb.indegree(), rn).collect();
    Some(neighbor_bytes(&c, &nb, &send, shared, recv, blocking))
}

/// The communicator, neighbours and datatypes of a neighbourhood collective.
pub(super) fn neighbor_args(
    comm: c_int,
    sendtype: c_int,
    recvtype: c_int,
) -> R<(Comm, Rc<Neighborhood>, Datatype, Datatype)> {
    let mut s = st()?;
    let (c, nb) = neighbors(&mut s, comm)?;
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
    let fast = neighbor_predefined(
        sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, true, blocking,
    );
    if let Some(r) = fast {
        return r;
    }
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
    let fast = neighbor_predefined(
        sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, false, blocking,
    );
    if let Some(r) = fast {
        return r;
    }
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
pub(super) fn neighbor_start(
    c: &Comm,
    nb: &Neighborhood,
    send: &[Seg],
    shared: bool,
    recv: Vec<Seg>,
    blocking: bool,
) -> R<Begun> {
    // Every type contiguous: straight between the program's buffers.
    if let (Some(sb), Some(rb)) = (contiguous_bytes(send), contiguous_bytes(&recv)) {
        let sb = sb.into_iter().map(|(b, n)| (b.cast_const(), n)).collect();
        return neighbor_bytes(c, nb, &sb, shared, rb.into_iter().collect(), blocking);
    }
    let (sends, recvs) = nb.pairs(shared);
    let mut recv = recv;
    for &i in &nb.proc_null {
        recv[i].1 = 0;
    }
    let send_bytes: Vec<usize> = send.iter().map(|(_, n, d)| d.packed_size(*n)).collect();
    let recv_bytes: Vec<usize> = recv.iter().map(|(_, n, d)| d.packed_size(*n)).collect();
    let req = c.ineighbor_exchange(pack_typed(send), &send_bytes, sends, &recv_bytes, recvs)?;
    Ok(Begun::Started(NbBytes { req, out: recv }))
}

/// [`neighbor_start`] straight between the program's buffers, as bytes.
fn neighbor_bytes(
    c: &Comm,
    nb: &Neighborhood,
    send: &Bytes<*const u8>,
    shared: bool,
    mut recv: Bytes<*mut u8>,
    blocking: bool,
) -> R<Begun> {
    let (sends, recvs) = nb.pairs(shared);
    for &i in &nb.proc_null {
        recv[i].1 = 0;
    }
    if blocking {
        // SAFETY: MPI's contract: the send buffers readable and the
        // receive ones writable for the call; receive blocks overlap
        // nothing (each is named once by `pairs`).
        unsafe { c.neighbor_exchange_segments(send, sends, &recv, recvs) }?;
        return Ok(Begun::Done);
    }
    // SAFETY: as above, until the request completes.
    let req = unsafe { c.ineighbor_exchange_segments(send, sends, &recv, recvs) }?;
    Ok(Begun::Started(NbBytes::none(req)))
}

// Each pair: the blocking function waits for what the starter begins; the
// nonblocking one hands it to the program as a request.
mpi_coll_pair! {
    MPI_Neighbor_allgather / PMPI_Neighbor_allgather,
    MPI_Ineighbor_allgather / PMPI_Ineighbor_allgather => neighbor_allgather(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) on comm
    MPI_Neighbor_alltoall / PMPI_Neighbor_alltoall,
    MPI_Ineighbor_alltoall / PMPI_Ineighbor_alltoall => neighbor_alltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) on comm
}
