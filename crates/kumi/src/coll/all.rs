//! The allgather and alltoall families (and their v- and w-forms): through
//! the collective area inside one host, else message schedules.

use super::*;

impl Comm {
    /// Every rank gets every rank's `send` (same length everywhere) in rank
    /// order in `recv` (`size() * send.len()` elements).
    #[track_caller]
    pub fn allgather<T: Pod>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        let (p, n) = (self.size(), send.len());
        if recv.len() != p * n {
            return Err(bad(
                "recv",
                recv.len(),
                format!("size() * send.len() = {}", p * n),
            ));
        }
        self.allgather_at(recv, Some(send), Location::caller())
    }

    /// [`Comm::allgather`] in place: rank i's contribution is already at block i
    /// of `buf` (`size()` equal blocks).
    #[track_caller]
    pub fn allgather_in_place<T: Pod>(&self, buf: &mut [T]) -> Result<()> {
        if !buf.len().is_multiple_of(self.size()) {
            return Err(bad(
                "buf",
                buf.len(),
                format!("a multiple of size() = {}", self.size()),
            ));
        }
        self.allgather_at(buf, None, Location::caller())
    }

    /// An allgather into `buf` of `send` (a block's length), or in place.
    /// The others read `send` where there is one, not my block of `buf`,
    /// which I would have just written: a single copy of lines another core
    /// wrote costs its cache a hand-over (docs/BENCHMARKS.md, session 54).
    fn allgather_at<T: Pod>(
        &self,
        buf: &mut [T],
        send: Option<&[T]>,
        at: &'static Location<'static>,
    ) -> Result<()> {
        let (p, me) = (self.size(), self.rank());
        let k = buf.len() / p;
        let own = |buf: &mut [T]| {
            if let Some(s) = send {
                copy_slice(&mut buf[me * k..(me + 1) * k], s);
            }
        };
        if p == 1 {
            own(buf);
            return Ok(());
        }
        let n = std::mem::size_of_val(buf) / p;
        let base = as_bytes_mut(buf).as_mut_ptr();
        let segs: Vec<(*mut u8, usize)> = (0..p).map(|j| (base.wrapping_add(j * n), n)).collect();
        let mine = send.map_or(segs[me].0.cast_const(), |s| s.as_ptr().cast());
        // SAFETY: the segments split `buf`, borrowed exclusively for the
        // call; `send` is borrowed, or this rank's segment is its
        // contribution, in place.
        if unsafe { self.allgather_area((mine, n), &segs, at) }? {
            return Ok(());
        }
        own(buf);
        self.allgather_messages(buf, at)
    }

    /// [`Comm::allgather_at`] by messages alone, on no view of the hosts
    /// (which `host_labels` learns through it).
    pub(super) fn allgather_messages<T: Pod>(
        &self,
        buf: &mut [T],
        at: &'static Location<'static>,
    ) -> Result<()> {
        let (p, me) = (self.size(), self.rank());
        let (cfg, wire) = self.wire()?;
        let g = self.group();
        let bytes = as_bytes_mut(buf);
        let sched = if p.is_power_of_two() && bytes.len() < cfg.allgather_long {
            sc::allgather_rd(&g, me)
        } else {
            sc::allgather_ring(&g, me)
        };
        let offsets = even_offsets(buf.len(), p, std::mem::size_of::<T>());
        self.run(
            sched,
            wire,
            as_bytes_mut(buf),
            offsets,
            None,
            Call::Collective,
            at,
        )
    }

    /// Like [`Comm::allgather`] with `counts[i]` elements from rank i (ring).
    #[track_caller]
    pub fn allgatherv<T: Pod>(&self, send: &[T], recv: &mut [T], counts: &[usize]) -> Result<()> {
        self.check_counts(counts)?;
        let me = self.rank();
        let total: usize = counts.iter().sum();
        if send.len() != counts[me] || recv.len() != total {
            return Err(bad(
                "recv",
                recv.len(),
                format!(
                    "the sum of counts ({total}), with send of counts[{me}] = {}",
                    counts[me]
                ),
            ));
        }
        let recv: Vec<_> = byte_segments(
            recv.as_mut_ptr().cast::<u8>(),
            counts,
            std::mem::size_of::<T>(),
            <*mut u8>::wrapping_add,
        );
        let send = (send.as_ptr().cast::<u8>(), std::mem::size_of_val(send));
        // SAFETY: the segments split `recv` (counts checked against its
        // length), borrowed exclusively for the call, and `send` is borrowed.
        unsafe { self.allgatherv_segments(send, &recv) }
    }

    /// [`Comm::allgatherv`] over byte segments anywhere in memory, for the C
    /// library: this rank's `send`, and `recv[i]` for rank i's (this rank's
    /// own `send` may be its `recv` segment, in place).
    ///
    /// # Safety
    /// `send` must be readable and each `recv` segment writable for its
    /// length until this returns; `recv` segments overlap nothing but this
    /// rank's `send` in place.
    #[doc(hidden)]
    #[track_caller]
    pub unsafe fn allgatherv_segments(
        &self,
        send: (*const u8, usize),
        recv: &[(*mut u8, usize)],
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe { self.allgatherv_segments_at(send, recv, Location::caller()) }
    }

    /// Every rank's `mine`, in rank order, whatever their lengths: an
    /// allgather of the lengths, then an allgatherv of the bytes (two
    /// collectives of logarithmic depth or through the area, not a ring of
    /// p-1 steps, whose every step waits for a hand-over).
    pub(crate) fn allgather_bytes(
        &self,
        mine: &[u8],
        at: &'static Location<'static>,
    ) -> Result<Vec<Vec<u8>>> {
        let (p, me) = (self.size(), self.rank());
        let mut lens = vec![0u64; p];
        lens[me] = mine.len() as u64;
        self.allgather_at(&mut lens, None, at)?;
        let lens = lens
            .iter()
            .enumerate()
            .map(|(r, &l)| {
                usize::try_from(l)
                    .ok()
                    .filter(|&l| l <= u32::MAX as usize)
                    .ok_or_else(|| Error::Protocol(format!("rank {r} gathers {l} bytes")))
            })
            .collect::<Result<Vec<usize>>>()?;
        let mut all: Vec<Vec<u8>> = lens.iter().map(|&l| vec![0u8; l]).collect();
        all[me].copy_from_slice(mine);
        let segs: Vec<(*mut u8, usize)> =
            all.iter_mut().map(|v| (v.as_mut_ptr(), v.len())).collect();
        let send = (segs[me].0.cast_const(), mine.len());
        // SAFETY: each segment is its own vector, alive and not otherwise
        // borrowed until this returns; this rank's own is its send, in place.
        unsafe { self.allgatherv_segments_at(send, &segs, at) }?;
        Ok(all)
    }

    /// [`Comm::allgatherv_segments`] for a call made at `at`.
    ///
    /// # Safety
    /// As for [`Comm::allgatherv_segments`].
    unsafe fn allgatherv_segments_at(
        &self,
        send: (*const u8, usize),
        recv: &[(*mut u8, usize)],
        at: &'static Location<'static>,
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        if unsafe { self.allgather_area(send, recv, at) }? {
            return Ok(());
        }
        // SAFETY: the caller's contract.
        unsafe { self.allgatherv_each(send, recv, Exec::Now(at)) }.map(drop)
    }

    /// An allgather(v) through the collective area, if the communicator is
    /// one host's, long blocks in rounds (`shm::allgather_rounds`, for the
    /// same reason as `alltoallv_segments`), or by single copy where the
    /// host allows it and a block is at least `KUMI_COLL_ALLGATHER_COPY_MIN`
    /// long (measured: docs/BENCHMARKS.md, session 54): `true` when done.
    ///
    /// # Safety
    /// As for [`Comm::allgatherv_segments`].
    unsafe fn allgather_area(
        &self,
        send: (*const u8, usize),
        recv: &[(*mut u8, usize)],
        at: &'static Location<'static>,
    ) -> Result<bool> {
        let (p, me) = (self.size(), self.rank());
        own_segment("recv", recv, p, me, send.1)?;
        let info = self.info(Call::Collective, -2, -2, at);
        let done = self.shm_whole(at, false, |e, g| {
            // SAFETY: the caller's contract: `send` is readable, and the own
            // segment is written only if it is not `send`.
            let mine = unsafe { std::slice::from_raw_parts(send.0, send.1) };
            // SAFETY: as above.
            unsafe { copy_own(send.0, recv[me].0, send.1) };
            let longest = recv.iter().map(|r| r.1).max().unwrap_or(0);
            if shm::allgather_by_copy(e, longest) {
                // SAFETY: the caller's contract, and the own segment is done.
                return Some(unsafe { shm::allgather_single_copy(e, g, mine, recv, info) });
            }
            // SAFETY: the caller's contract, and the own segment is done.
            Some(unsafe { shm::allgather_rounds(e, g, mine, recv, info) })
        })?;
        Ok(done.is_some())
    }

    /// [`Comm::allgatherv_segments`] started.
    ///
    /// # Safety
    /// As for [`Comm::allgatherv_segments`], until the request completes.
    #[doc(hidden)]
    pub unsafe fn iallgatherv_segments(
        &self,
        send: (*const u8, usize),
        recv: Vec<(*mut u8, usize)>,
    ) -> Result<CollRequest<u8>> {
        let (p, me) = (self.size(), self.rank());
        own_segment("recv", &recv, p, me, send.1)?;
        let own = recv[me].0;
        // Inside one host, through the area, long blocks in rounds, or by
        // single copy as the blocking form goes (every rank knows every
        // length, so all take the same way and count the same rounds).
        let mut recv = Some(recv);
        let area = self.shm_start(Location::caller(), |e, g| {
            let recv = recv.take()?;
            let longest = recv.iter().map(|r| r.1).max().unwrap_or(0);
            // SAFETY: the caller's contract.
            Some(Ok(unsafe {
                match shm::allgather_by_copy(e, longest) {
                    true => {
                        let of = shm::Copied::Each(shm::Directory::Own);
                        shm::Pending::start_copy(e, g, &[send], recv, of)
                    }
                    false => shm::Pending::start_gather(e, g, send, recv, None),
                }
            }))
        })?;
        if let Some(r) = area {
            // SAFETY: the caller's contract.
            unsafe { copy_own(send.0, own, send.1) };
            return Ok(r);
        }
        let recv = recv.expect("taken only to start through the area");
        // SAFETY: the caller's contract.
        unsafe { self.allgatherv_each(send, &recv, Exec::Start) }.map(started)
    }

    /// # Safety
    /// As for [`Comm::allgatherv_segments`], until the collective completes.
    unsafe fn allgatherv_each(
        &self,
        send: (*const u8, usize),
        recv: &[(*mut u8, usize)],
        how: Exec,
    ) -> Result<Option<CollRequest<u8>>> {
        let (p, me) = (self.size(), self.rank());
        own_segment("recv", recv, p, me, send.1)?;
        // SAFETY: the caller's contract.
        unsafe { copy_own(send.0, recv[me].0, send.1) };
        self.exec_each(recv.to_vec(), how, sc::allgather_ring)
    }

    /// Rank i sends block j of its `send` to rank j, which stores it as block i
    /// of its `recv` (`size()` equal blocks each; pairwise exchange).
    #[track_caller]
    pub fn alltoall<T: Pod>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        let p = self.size();
        if !send.len().is_multiple_of(p) || recv.len() != send.len() {
            return Err(bad(
                "send",
                send.len(),
                format!("a multiple of size() = {p}, with recv of the same length"),
            ));
        }
        let n = send.len() / p;
        let at = Location::caller();
        if p > 1 {
            let info = self.info(Call::Collective, -2, -2, at);
            let (sb, rb) = (as_bytes(send), as_bytes_mut(recv));
            let block = sb.len() / p;
            let done = self.shm_whole(at, false, |e, g| {
                // Every member's blocks are `block` bytes (MPI's alltoall),
                // so every member takes the same way.
                if shm::alltoall_by_copy(e, g, block) {
                    let me = g.me;
                    rb[me * block..(me + 1) * block]
                        .copy_from_slice(&sb[me * block..(me + 1) * block]);
                    let base = rb.as_mut_ptr();
                    let send: Vec<(*const u8, usize)> =
                        sb.chunks(block).map(|b| (b.as_ptr(), block)).collect();
                    let recv: Vec<(*mut u8, usize)> = (0..p)
                        .map(|j| (base.wrapping_add(j * block), block))
                        .collect();
                    // SAFETY: the segments split `sb` and `rb`, borrowed
                    // shared and exclusive for the call.
                    return Some(unsafe { shm::alltoall_single_copy(e, g, &send, &recv, info) });
                }
                (sb.len() <= g.payload).then(|| shm::alltoall(e, g, sb, rb, block, info))
            })?;
            if let Some(()) = done {
                return Ok(());
            }
        }
        self.alltoallv(send, &vec![n; p], recv, &vec![n; p])
    }

    /// Like [`Comm::alltoall`] with `send_counts[j]` elements to rank j and
    /// `recv_counts[i]` from rank i, blocks one after the other.
    #[track_caller]
    pub fn alltoallv<T: Pod>(
        &self,
        send: &[T],
        send_counts: &[usize],
        recv: &mut [T],
        recv_counts: &[usize],
    ) -> Result<()> {
        self.check_counts(send_counts)?;
        self.check_counts(recv_counts)?;
        let me = self.rank();
        let (st, rt): (usize, usize) = (send_counts.iter().sum(), recv_counts.iter().sum());
        if send.len() != st || recv.len() != rt || send_counts[me] != recv_counts[me] {
            return Err(bad(
                "send",
                send.len(),
                format!(
                    "the sum of send_counts ({st}), with recv of the sum of recv_counts ({rt}) and \
                     send_counts[{me}] == recv_counts[{me}]"
                ),
            ));
        }
        let elem = std::mem::size_of::<T>();
        let send: Vec<_> = byte_segments(
            send.as_ptr().cast::<u8>(),
            send_counts,
            elem,
            <*const u8>::wrapping_add,
        );
        let recv: Vec<_> = byte_segments(
            recv.as_mut_ptr().cast::<u8>(),
            recv_counts,
            elem,
            <*mut u8>::wrapping_add,
        );
        // SAFETY: the segments split `send` and `recv` (counts checked against
        // their lengths), borrowed shared and exclusive for the call.
        unsafe { self.alltoallv_segments(&send, &recv) }
    }

    /// [`Comm::alltoallv`] over byte segments anywhere in memory, for the C
    /// library (no copy into a working buffer and out again): `send[j]` goes
    /// to rank j, `recv[i]` receives what rank i sends to this rank (its
    /// length must be what rank i sends).
    ///
    /// # Safety
    /// Each `send` segment must be readable and each `recv` segment
    /// writable for its length until this returns, and no `recv` segment may
    /// overlap another segment.
    #[doc(hidden)]
    #[track_caller]
    pub unsafe fn alltoallv_segments(
        &self,
        send: &[(*const u8, usize)],
        recv: &[(*mut u8, usize)],
    ) -> Result<()> {
        let at = Location::caller();
        let (p, me) = (self.size(), self.rank());
        own_segment("send", send, p, me, recv.get(me).map_or(0, |r| r.1))?;
        own_segment("recv", recv, p, me, send[me].1)?;
        // Inside one host, through the collective area, long blocks in
        // rounds or, where the host allows single copy, the longest ones
        // by it (`shm::alltoallv_rounds`); otherwise by messages. The
        // area's two copies through the cache beat the messages' rendezvous
        // (docs/BENCHMARKS.md, session 37); a single-copy read of a
        // published address beats both where the host chose single copy
        // (session 55).
        let info = self.info(Call::Collective, -2, -2, at);
        // SAFETY: the caller's contract.
        let done = self.shm_whole(at, false, |e, g| unsafe {
            shm::alltoallv_rounds(e, g, send, recv, info)
        })?;
        if done.is_none() {
            // SAFETY: the caller's contract.
            return unsafe { self.alltoallv_each(send, recv, Exec::Now(at)) }.map(drop);
        }
        // SAFETY: the caller's contract.
        unsafe { copy_own(send[me].0, recv[me].0, send[me].1) };
        Ok(())
    }

    /// [`Comm::alltoallv_segments`] started.
    ///
    /// # Safety
    /// As for [`Comm::alltoallv_segments`], until the request completes.
    #[doc(hidden)]
    pub unsafe fn ialltoallv_segments(
        &self,
        send: &[(*const u8, usize)],
        recv: &[(*mut u8, usize)],
    ) -> Result<CollRequest<u8>> {
        let (p, me) = (self.size(), self.rank());
        own_segment("send", send, p, me, recv.get(me).map_or(0, |r| r.1))?;
        own_segment("recv", recv, p, me, send[me].1)?;
        // Inside one host, the blocks of at most `alltoallv_longest` through
        // the area in one pass, the longer ones by messages: both ends of a
        // block know its length, so they agree on its way without a word.
        // With more ranks than cores and single copy on, the longer ones
        // are read straight out of the sender's buffer even below the eager
        // limit: eager messages through the rings wait on ranks that share
        // a core, and one read each does not; with a core per rank the
        // eager send was the faster (measured: docs/BENCHMARKS.md,
        // session 63).
        let pending = self.shm_whole(Location::caller(), true, |e, g| {
            let longest = shm::alltoallv_longest(e, g);
            let single = e.svc.coll.config().single_copy && e.oversubscribed();
            (longest > 0).then(|| {
                // SAFETY: the caller's contract.
                let pending = unsafe {
                    shm::Pending::start_alltoallv(e, g, send.to_vec(), recv.to_vec(), longest)
                };
                Ok((pending, longest, if single { longest } else { usize::MAX }))
            })
        })?;
        let Some((pending, longest, eager_max)) = pending else {
            // SAFETY: the caller's contract.
            return unsafe { self.alltoallv_each(send, recv, Exec::Start) }.map(started);
        };
        let long = |from: usize, to: usize| match from == me {
            true => send[to].1 > longest,
            false => recv[from].1 > longest,
        };
        let blocks = (0..p)
            .any(|j| j != me && (long(me, j) || long(j, me)))
            .then(|| alltoall_blocks(send, recv));
        let plan = |g: &[usize]| sc::alltoall_linear_some(g, me, &long);
        let req = self.start_rest_upto(pending, blocks, plan, eager_max)?;
        // The own block after the messages' first round went out, so that
        // the peers' copies run beside this one. The collective touches no
        // byte of it.
        // SAFETY: the caller's contract.
        unsafe { copy_own(send[me].0, recv[me].0, send[me].1) };
        Ok(req)
    }

    /// [`Comm::ialltoallv_segments`] for `MPI_Ialltoall`: where every block
    /// is `send[0].1` bytes long and `send` is one span of memory, inside
    /// one host, through the area (in rounds for long blocks).
    ///
    /// # Safety
    /// As for [`Comm::alltoallv_segments`], until the request completes.
    #[doc(hidden)]
    pub unsafe fn ialltoall_segments(
        &self,
        send: &[(*const u8, usize)],
        recv: &[(*mut u8, usize)],
    ) -> Result<CollRequest<u8>> {
        let (p, me) = (self.size(), self.rank());
        let block = send.first().map_or(0, |s| s.1);
        let one_span = send
            .iter()
            .enumerate()
            .all(|(j, &(at, n))| n == block && at == send[0].0.wrapping_add(j * block));
        if send.len() != p || recv.len() != p || !one_span || recv.iter().any(|r| r.1 != block) {
            // SAFETY: the caller's contract.
            return unsafe { self.ialltoallv_segments(send, recv) };
        }
        // By single copy as the blocking form goes, or through the area in
        // rounds (every member needs a share of a payload half of at least
        // a byte).
        let area = self.shm_start(Location::caller(), |e, g| {
            if shm::alltoall_by_copy(e, g, block) {
                let of = shm::Copied::Each(shm::Directory::ToEach);
                // SAFETY: the caller's contract.
                return Some(Ok(unsafe {
                    shm::Pending::start_copy(e, g, send, recv.to_vec(), of)
                }));
            }
            (g.payload >= p).then(|| {
                // SAFETY: the caller's contract.
                Ok(unsafe {
                    shm::Pending::start_gather(
                        e,
                        g,
                        (send[0].0, p * block),
                        recv.to_vec(),
                        Some(block),
                    )
                })
            })
        })?;
        match area {
            Some(r) => {
                // SAFETY: the caller's contract.
                unsafe { copy_own(send[me].0, recv[me].0, block) };
                Ok(r)
            }
            // SAFETY: the caller's contract.
            None => unsafe { self.ialltoallv_segments(send, recv) },
        }
    }

    /// # Safety
    /// As for [`Comm::alltoallv_segments`], until the collective completes.
    unsafe fn alltoallv_each(
        &self,
        send: &[(*const u8, usize)],
        recv: &[(*mut u8, usize)],
        how: Exec,
    ) -> Result<Option<CollRequest<u8>>> {
        let (p, me) = (self.size(), self.rank());
        own_segment("send", send, p, me, recv.get(me).map_or(0, |r| r.1))?;
        own_segment("recv", recv, p, me, send[me].1)?;
        // SAFETY: the caller's contract.
        unsafe { copy_own(send[me].0, recv[me].0, send[me].1) };
        self.exec_each(alltoall_blocks(send, recv), how, sc::alltoall_pairwise)
    }

    /// A broadcast of the `len` bytes at `buf` from `root`, started
    /// (binomial tree, the message straight between the ranks' buffers).
    ///
    /// # Safety
    /// `buf` readable (at the root) or writable (elsewhere) for `len` bytes
    /// and otherwise untouched until the request's `wait` returns.
    #[doc(hidden)]
    pub unsafe fn ibcast_segment(
        &self,
        buf: (*mut u8, usize),
        root: usize,
    ) -> Result<CollRequest<u8>> {
        self.check_root(root)?;
        // Inside one host, through the collective area in rounds, or by
        // single copy.
        if let Some(r) = self.shm_start(Location::caller(), |e, g| {
            // SAFETY: the caller's contract.
            Some(Ok(unsafe {
                match shm::ibcast_by_copy(e, g, buf.1) {
                    true => {
                        let block = (buf.0.cast_const(), buf.1);
                        let of = shm::Copied::Bcast(root);
                        shm::Pending::start_copy(e, g, &[block], vec![buf], of)
                    }
                    false => shm::Pending::start_bcast(e, g, root, buf),
                }
            }))
        })? {
            return Ok(r);
        }
        self.exec_each(vec![buf], Exec::Start, |g, me| {
            sc::bcast_binomial(g, root, me, 1)
        })
        .map(started)
    }
}
