//! Neighbourhood exchanges: MPI's neighbourhood collectives on a topology,
//! as one round of explicit transfers (`kumi_core::coll::exchange`), over a
//! buffer the request owns or straight between the program's buffers.
//! Inside one host, one on the program's buffers goes through the
//! collective area but for its blocks too long for it: a blocking one
//! with a directory of its messages (`shm::neighbor`), a started one by
//! pairs of ranks, whose blocks both ends know (`shm::Pending::start_neighbor`).

use super::*;
use smallvec::SmallVec;

impl Comm {
    /// Starts a neighbourhood exchange (MPI's neighbourhood collectives on a
    /// topology): `send` is split into blocks of `send_counts` elements, and
    /// block `b` goes to `peer` for each `(peer, b)` of `sends`, in that
    /// order; the result, in blocks of `recv_counts`, gets block `b` from
    /// `peer` for each `(peer, b)` of `recvs`, in that order. Between two
    /// ranks the k-th block one sends is the k-th the other receives (list
    /// them so; a rank may be its own neighbour). Blocks no receive names are
    /// zero in what `wait` returns. One round: (number of neighbours)·α + nβ.
    #[track_caller]
    pub fn ineighbor_exchange<T: Pod>(
        &self,
        send: Vec<T>,
        send_counts: &[usize],
        sends: &[(usize, usize)],
        recv_counts: &[usize],
        recvs: &[(usize, usize)],
    ) -> Result<CollRequest<T>> {
        let st: usize = send_counts.iter().sum();
        if send.len() != st {
            return Err(bad(
                "send",
                send.len(),
                format!("the sum of send_counts ({st})"),
            ));
        }
        let elem = std::mem::size_of::<T>();
        let hold = AlignedBuf::of(&send);
        // Zeroed: blocks no receive names are left as they are.
        let mut out = AlignedBuf::zeroed(recv_counts.iter().sum::<usize>() * elem);
        let (sb, rb) = segments_of(
            (hold.as_ptr(), send_counts),
            (out.as_mut_ptr(), recv_counts),
            elem,
        );
        // SAFETY: the segments split `hold` and `out`, kept until the
        // collective completes (`keeping`), `out` then its result.
        let r = unsafe { self.ineighbor_exchange_segments(&sb, sends, &rb, recvs) }?;
        Ok(self.keeping(r, Owned::reading(hold, Some(out))))
    }

    /// [`Comm::ineighbor_exchange`], waited for, on the program's own
    /// buffers: the blocks received are written to `recv` (the sum of
    /// `recv_counts` elements); blocks no receive names are left as they
    /// were.
    #[track_caller]
    pub fn neighbor_exchange<T: Pod>(
        &self,
        send: &[T],
        send_counts: &[usize],
        sends: &[(usize, usize)],
        recv: &mut [T],
        recv_counts: &[usize],
        recvs: &[(usize, usize)],
    ) -> Result<()> {
        scoped::sum_of("send", send.len(), send_counts)?;
        scoped::sum_of("recv", recv.len(), recv_counts)?;
        let (sb, rb) = segments_of(
            (send.as_ptr().cast(), send_counts),
            (recv.as_mut_ptr().cast(), recv_counts),
            std::mem::size_of::<T>(),
        );
        // SAFETY: the segments split `send` (borrowed) and `recv` (borrowed
        // exclusively) for the call, their lengths checked above.
        unsafe { self.neighbor_exchange_segments(&sb, sends, &rb, recvs) }
    }

    /// [`Comm::neighbor_exchange`] over byte segments anywhere in memory,
    /// for the C library (see [`Comm::ineighbor_exchange_segments`]).
    ///
    /// # Safety
    /// As for [`Comm::neighbor_each`], for the call.
    #[doc(hidden)]
    #[track_caller]
    pub unsafe fn neighbor_exchange_segments(
        &self,
        send: &[(*const u8, usize)],
        sends: &[(usize, usize)],
        recv: &[(*mut u8, usize)],
        recvs: &[(usize, usize)],
    ) -> Result<()> {
        let at = Location::caller();
        // SAFETY: the caller's contract.
        unsafe { self.neighbor_each(send, sends, recv, recvs, Exec::Now(at)) }.map(drop)
    }

    /// [`Comm::ineighbor_exchange`] over byte segments anywhere in memory,
    /// for the C library: block b sent is `send[b]`, block b received goes
    /// to `recv[b]`. Each block received must be as long as the one sent
    /// (MPI requires it): inside one host a receiver that finds other
    /// lengths fails the request.
    ///
    /// # Safety
    /// As for [`Comm::neighbor_each`], until the request completes.
    #[doc(hidden)]
    #[track_caller]
    pub unsafe fn ineighbor_exchange_segments(
        &self,
        send: &[(*const u8, usize)],
        sends: &[(usize, usize)],
        recv: &[(*mut u8, usize)],
        recvs: &[(usize, usize)],
    ) -> Result<CollRequest<u8>> {
        // SAFETY: the caller's contract.
        let r = unsafe { self.neighbor_each(send, sends, recv, recvs, Exec::Start) }?;
        Ok(started(r))
    }

    /// A neighbourhood exchange straight between the program's buffers
    /// (see [`Comm::ineighbor_exchange`] for `sends` and `recvs`), run now
    /// or started. Refuses a receive block named twice (two messages would
    /// land on the same bytes).
    ///
    /// # Safety
    /// The `send` segments readable and the `recv` ones writable, until the
    /// exchange completes; the `recv` segments overlap nothing.
    unsafe fn neighbor_each(
        &self,
        send: &[(*const u8, usize)],
        sends: &[(usize, usize)],
        recv: &[(*mut u8, usize)],
        recvs: &[(usize, usize)],
        how: Exec,
    ) -> Result<Option<CollRequest<u8>>> {
        let ns = send.len();
        self.check_neighbors(sends, ns, recvs, recv.len())?;
        // Neighbourhoods are small: no allocation on this path for up to
        // 16 blocks (a call's own cost is most of a short exchange's).
        check_named(recvs, recv.len())?;
        if let Exec::Start = how {
            // SAFETY: the caller's contract.
            if let Some(r) = unsafe { self.ineighbor_area(send, sends, recv, recvs) }? {
                return Ok(Some(r));
            }
        }
        // Blocking, inside one host: through the collective area, but for
        // the blocks too long for it, which go as messages below.
        let mut left = None;
        if let Exec::Now(at) = how {
            let info = self.info(Call::Collective, -2, -2, at);
            let (to, from): (SmallVec<[_; 16]>, SmallVec<[_; 16]>) = (
                sends
                    .iter()
                    .map(|&(j, b)| (j, send[b].0, send[b].1))
                    .collect(),
                recvs
                    .iter()
                    .map(|&(j, b)| (j, recv[b].0, recv[b].1))
                    .collect(),
            );
            left = self.shm_whole(at, false, |e, g| {
                // SAFETY: the caller's contract, for the call.
                let r = unsafe { shm::neighbor(e, g, &to, &from, info) };
                Some(r.inspect(|(ls, lr)| {
                    if ls.is_empty() && lr.is_empty() {
                        // The call's tag, which every rank takes whether it
                        // moves messages (in `exec_each`) or not, so the
                        // tags of later collectives agree.
                        self.next_tag(e);
                    }
                }))
            })?;
        }
        let (sends, recvs): (Vec<_>, Vec<_>) = match left {
            Some((ls, lr)) if ls.is_empty() && lr.is_empty() => return Ok(None),
            Some((ls, lr)) => (
                ls.iter().map(|&k| sends[k]).collect(),
                lr.iter().map(|&k| recvs[k]).collect(),
            ),
            None => (sends.to_vec(), recvs.to_vec()),
        };
        // Only ever read: the schedule sends from them.
        let blocks = send
            .iter()
            .map(|&(b, n)| (b.cast_mut(), n))
            .chain(recv.iter().copied())
            .collect();
        let recvs: Vec<(usize, usize)> = recvs.iter().map(|&(peer, b)| (peer, ns + b)).collect();
        self.exec_each(blocks, how, |_, _| sc::exchange(&sends, &recvs))
    }

    /// [`Comm::neighbor_each`] started inside one host: each pair's blocks
    /// through the collective area in one round where they fit
    /// (`shm::Pending::start_neighbor`), the others as messages; `None`
    /// where the communicator has no area.
    ///
    /// # Safety
    /// As for [`Comm::neighbor_each`], until the request completes.
    unsafe fn ineighbor_area(
        &self,
        send: &[(*const u8, usize)],
        sends: &[(usize, usize)],
        recv: &[(*mut u8, usize)],
        recvs: &[(usize, usize)],
    ) -> Result<Option<CollRequest<u8>>> {
        let (m, me) = (self.size(), self.rank());
        // By peer, in the program's order within a peer (a stable sort):
        // the sends, then the receives.
        let mut blocks = Vec::with_capacity(sends.len() + recvs.len());
        blocks.extend(
            sends
                .iter()
                .map(|&(j, b)| (j, send[b].0.cast_mut(), send[b].1)),
        );
        blocks.extend(recvs.iter().map(|&(j, b)| (j, recv[b].0, recv[b].1)));
        let (to, from) = blocks.split_at_mut(sends.len());
        to.sort_by_key(|b| b.0);
        from.sort_by_key(|b| b.0);
        let started = self.shm_whole(Location::caller(), true, |e, g| {
            let (to, from) = blocks.split_at(sends.len());
            let rooted = shm::Rooted::of(e, g);
            let long_to = shm::neighbor_long(to, |j| j, m, rooted);
            let long_from = shm::neighbor_long(from, |_| me, m, rooted);
            // SAFETY: the caller's contract.
            let pending =
                unsafe { shm::Pending::start_neighbor(e, g, blocks, sends.len(), rooted) };
            if long_to.is_empty() && long_from.is_empty() {
                // All through the area: the call's tag (which every rank
                // takes, as `start_rest` does) and the list under this lock.
                self.next_tag(e);
                return Some(Ok(Ok(Self::push_active(e, Active::Shm(pending)))));
            }
            Some(Ok(Err((pending, long_to, long_from))))
        })?;
        let (pending, long_to, long_from) = match started {
            None => return Ok(None),
            Some(Ok(id)) => return Ok(Some(self.request(id))),
            Some(Err(long)) => long,
        };
        // The long pairs' blocks as messages, in the program's order.
        let ls: Vec<_> = sends
            .iter()
            .filter(|s| long_to.contains(&s.0))
            .copied()
            .collect();
        let ns = send.len();
        let lr: Vec<_> = recvs
            .iter()
            .filter(|r| long_from.contains(&r.0))
            .map(|&(j, b)| (j, ns + b))
            .collect();
        let blocks = send
            .iter()
            .map(|&(b, n)| (b.cast_mut(), n))
            .chain(recv.iter().copied())
            .collect();
        self.start_rest(pending, Some(blocks), |_| sc::exchange(&ls, &lr))
            .map(Some)
    }

    /// Checks a neighbourhood exchange's `(peer, block)` lists against the
    /// communicator's size and the numbers of blocks sent and received.
    fn check_neighbors(
        &self,
        sends: &[(usize, usize)],
        ns: usize,
        recvs: &[(usize, usize)],
        nr: usize,
    ) -> Result<()> {
        let p = self.size();
        for (what, list, nb) in [("sends", sends, ns), ("recvs", recvs, nr)] {
            if let Some(&(peer, b)) = list.iter().find(|&&(peer, b)| peer >= p || b >= nb) {
                return Err(bad(
                    what,
                    if peer >= p { peer } else { b },
                    format!("(peer, block) pairs with peer < {p} and block < {nb}"),
                ));
            }
        }
        Ok(())
    }
}

/// Refuses a receive block named twice (two messages would land on the same
/// bytes); `nr`: the number of receive blocks.
fn check_named(recvs: &[(usize, usize)], nr: usize) -> Result<()> {
    let mut named: SmallVec<[bool; 16]> = smallvec::smallvec![false; nr];
    for &(_, b) in recvs {
        if std::mem::replace(&mut named[b], true) {
            return Err(bad("recvs", b, "each receive block named once".into()));
        }
    }
    Ok(())
}

/// Byte segments of blocks of `counts` elements of `elem` bytes one after
/// the other from the send and receive buffers, on the stack
/// (neighbourhoods are small; two allocations were a fifth of a short
/// exchange's instructions).
pub(super) fn segments_of(
    (send, send_counts): (*const u8, &[usize]),
    (recv, recv_counts): (*mut u8, &[usize]),
    elem: usize,
) -> (Segments<*const u8>, Segments<*mut u8>) {
    (
        byte_segments(send, send_counts, elem, <*const u8>::wrapping_add),
        byte_segments(recv, recv_counts, elem, <*mut u8>::wrapping_add),
    )
}

/// A neighbourhood exchange's blocks as byte segments.
pub(super) type Segments<P> = SmallVec<[(P, usize); 8]>;
