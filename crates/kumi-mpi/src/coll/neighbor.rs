//! Neighbourhood collectives with one count per block
//! (`MPI_(I)neighbor_allgather`, `MPI_(I)neighbor_alltoall`): the blocks of
//! a Cartesian or graph topology paired in the order MPI-4.1 section 8.6
//! fixes, straight between the program's buffers when every type is
//! contiguous. The v- and w-forms are in [`super::v`].

use super::*;
use crate::comm::Neighbors;

/// The communicator, neighbours and datatypes of a neighbourhood collective.
pub(super) fn neighbor_args(
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
pub(super) fn neighbor_start(
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

// Each pair: the blocking function waits for what the starter begins; the
// nonblocking one hands it to the program as a request.
mpi_coll_pair! {
    MPI_Neighbor_allgather / PMPI_Neighbor_allgather,
    MPI_Ineighbor_allgather / PMPI_Ineighbor_allgather => neighbor_allgather(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) on comm
    MPI_Neighbor_alltoall / PMPI_Neighbor_alltoall,
    MPI_Ineighbor_alltoall / PMPI_Ineighbor_alltoall => neighbor_alltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) on comm
}
