//! Nonblocking reductions and data movement over buffers the request owns
//! (the Rust API's owned forms: a vector in, a vector back from `wait`),
//! and the reductions' forms over the program's own memory (`*_raw`: the C
//! library's, and the scoped Rust forms' in `scoped.rs`).
//!
//! Each starts the schedule its blocking twin runs over messages (binomial
//! trees, ring or recursive doubling, pairwise exchange), or the collective
//! area's [`shm::Pending`] inside one host; the progress engine advances it
//! whenever any kumi call, or the progress thread, polls. Like MPI, every
//! rank starts the collectives of a communicator in the same order.

use super::*;

impl Comm {
    /// Starts an allreduce of `buf` (taken over; returned by `wait`).
    #[track_caller]
    pub fn iallreduce<T: Pod>(&self, buf: Vec<T>, op: &Op<T>) -> Result<CollRequest<T>> {
        op.check_for(buf.len())?;
        let at = Location::caller();
        let n = std::mem::size_of_val(buf.as_slice());
        if let Some(r) = self.shm_start(at, |e, g| {
            // Longer than a payload half: through the area in chunks or by
            // single copy (`?`: neither, by messages).
            let long = match n > g.payload {
                true => Some(shm::iallreduce_way(e, g, op)?),
                false => None,
            };
            let mut data = AlignedBuf::from_bytes(as_bytes(&buf));
            let Some(area) = long else {
                let at = (data.bytes_mut().as_mut_ptr(), n);
                // SAFETY: `data`, kept by the request until it completes (its
                // memory does not move), and then its result.
                return Some(Ok(unsafe {
                    shm::Pending::start_allreduce(e, g, at, op.bytes_fn(), Some(data))
                }));
            };
            let what = shm::Reduction::All(data.bytes_mut().as_mut_ptr(), n);
            // SAFETY: `data`, kept by the request until it completes (its
            // memory does not move), and then its result.
            let mut p = unsafe { start_long(e, g, what, op, area, None) };
            p.kept = Some(data);
            Some(Ok(p))
        })? {
            return Ok(r);
        }
        let hosts = self.host_groups(at)?;
        let (cfg, wire) = self.wire()?;
        let (count, elem) = (buf.len() / op.group(), op.unit_bytes());
        let (sched, offsets) = self.allreduce_plan(&cfg, hosts, count, elem, op.commutative);
        Ok(self.start_owning(sched, wire, &buf, offsets, op))
    }

    /// [`Comm::iallreduce`] over the program's own memory: `buf` holds this
    /// rank's `count` elements and gets the result on completion. Long
    /// vectors are reduced there (no copy into a buffer of kumi's and out
    /// again), inside a host through the collective area in chunks or by
    /// single copy, elsewhere by the message schedule; short ones go
    /// through the collective area, as `iallreduce`'s do.
    ///
    /// # Safety
    /// `buf` valid for `count` elements of `T`, not touched by the program
    /// until the request completes.
    #[doc(hidden)]
    #[track_caller]
    pub unsafe fn iallreduce_raw<T: Pod>(
        &self,
        buf: *mut T,
        count: usize,
        op: &Op<T>,
    ) -> Result<CollRequest<u8>> {
        op.check_for(count)?;
        let at = Location::caller();
        let n = count * std::mem::size_of::<T>();
        let bytes = buf.cast::<u8>();
        if let Some(r) = self.shm_start(at, |e, g| {
            if n > g.payload {
                let area = shm::iallreduce_way(e, g, op)?;
                // SAFETY: the caller's contract: `n` bytes at `buf`.
                return Some(Ok(unsafe {
                    start_long(e, g, shm::Reduction::All(bytes, n), op, area, None)
                }));
            }
            // SAFETY: the caller's contract: `n` bytes at `buf`, reduced in
            // place.
            Some(Ok(unsafe {
                shm::Pending::start_allreduce(e, g, (bytes, n), op.bytes_fn(), None)
            }))
        })? {
            return Ok(r);
        }
        let hosts = self.host_groups(at)?;
        let (cfg, wire) = self.wire()?;
        let (units, elem) = (count / op.group(), op.unit_bytes());
        let (sched, offsets) = self.allreduce_plan(&cfg, hosts, units, elem, op.commutative);
        let blocks = Blocks::Split {
            base: bytes,
            offsets,
        };
        let run = Run::new(sched, wire, blocks, Some(op.bytes_fn()));
        Ok(self.start(Active::Sched(run)))
    }

    /// Starts `sched` on `wire` over a work buffer of its own holding `buf`,
    /// in blocks at byte `offsets`, reducing with `op`.
    fn start_owning<T: Pod>(
        &self,
        sched: Schedule,
        wire: Wire,
        buf: &[T],
        offsets: Vec<usize>,
        op: &Op<T>,
    ) -> CollRequest<T> {
        let data = AlignedBuf::from_bytes(as_bytes(buf));
        self.start(Active::Sched(Run::owning(
            sched,
            wire,
            data,
            offsets,
            Some(op.bytes_fn()),
        )))
    }

    /// Starts the reduction schedule `sched` with `op` on a work buffer
    /// holding `buf` then `extra` zeroed elements, in blocks of `buf.len()`
    /// elements (an intercommunicator's reductions run theirs on the
    /// communicator of both groups: `crate::inter`). `wait` returns the
    /// work buffer.
    pub(crate) fn start_reduction<T: Pod>(
        &self,
        mut buf: Vec<T>,
        extra: usize,
        op: &Op<T>,
        sched: Schedule,
    ) -> Result<CollRequest<T>> {
        op.check_for(buf.len())?;
        // `extra` is a whole number of blocks (0 or one more).
        let (block, blocks) = (
            std::mem::size_of_val(buf.as_slice()),
            1 + extra / buf.len().max(1),
        );
        buf.resize(buf.len() + extra, T::zeroed());
        let offsets = (0..=blocks).map(|b| b * block).collect();
        let (_, wire) = self.wire()?;
        Ok(self.start_owning(sched, wire, &buf, offsets, op))
    }

    /// Starts a [`Comm::reduce`] of `buf` to `root`; `wait` returns the
    /// combination at the root and an empty vector elsewhere.
    #[track_caller]
    pub fn ireduce<T: Pod>(&self, buf: Vec<T>, op: &Op<T>, root: usize) -> Result<CollRequest<T>> {
        op.check_for(buf.len())?;
        self.check_root(root)?;
        let (p, me) = (self.size(), self.rank());
        let n = std::mem::size_of_val(buf.as_slice());
        if let Some(r) = self.shm_start(Location::caller(), |e, g| {
            if n > g.payload {
                return None;
            }
            let mut data = AlignedBuf::from_bytes(as_bytes(&buf));
            let at = (data.bytes_mut().as_mut_ptr(), n);
            // SAFETY: `data`, kept by the request until it completes (its
            // memory does not move), and then the root's result.
            Some(Ok(unsafe {
                shm::Pending::start_reduce(e, g, at, op.bytes_fn(), root, Some(data))
            }))
        })? {
            return Ok(r);
        }
        let sched = sc::reduce_binomial(&self.group(), root, me, 1, op.commutative);
        let finish: Option<Finish> =
            (me != root && p > 1).then(|| -> Finish { Box::new(|_| AlignedBuf::zeroed(0)) });
        self.start_sched(
            sched,
            AlignedBuf::from_bytes(as_bytes(&buf)),
            vec![0, n],
            Some(op.bytes_fn()),
            finish,
        )
    }

    /// [`Comm::ireduce`] from and into the program's memory: `send` holds
    /// this rank's `count` elements (at the root it may be `recv` itself:
    /// in place), the root's `recv` gets the result on completion. Inside
    /// one host, up to a payload half, through the collective area as the
    /// blocking reduce goes (the others publish from `send` and are done;
    /// the root folds in `recv`); otherwise by messages: the root folds in
    /// `recv`, a rank that only passes its part on sends it straight from
    /// `send`, and one that also folds others' works in a copy.
    ///
    /// # Safety
    /// `send` readable, and at the root `recv` writable and not touched by
    /// the program, until the request completes.
    #[doc(hidden)]
    #[track_caller]
    pub unsafe fn ireduce_raw<T: Pod>(
        &self,
        send: *const T,
        recv: *mut T,
        count: usize,
        op: &Op<T>,
        root: usize,
    ) -> Result<CollRequest<u8>> {
        op.check_for(count)?;
        self.check_root(root)?;
        let me = self.rank();
        let n = count * std::mem::size_of::<T>();
        let s = send.cast::<u8>();
        if let Some(r) = self.shm_start(Location::caller(), |e, g| {
            if n > g.payload {
                return None;
            }
            let buf = if me == root {
                let r = recv.cast::<u8>();
                // SAFETY: the caller's contract: `n` bytes each, in place
                // or not overlapping.
                unsafe { copy_own(s, r, n) };
                r
            } else {
                // Only ever read (`start_reduce`).
                s.cast_mut()
            };
            // SAFETY: the caller's contract: `n` bytes at `buf`, written at
            // the root only.
            Some(Ok(unsafe {
                shm::Pending::start_reduce(e, g, (buf, n), op.bytes_fn(), root, None)
            }))
        })? {
            return Ok(r);
        }
        let sched = sc::reduce_binomial(&self.group(), root, me, 1, op.commutative);
        let folds = sched.rounds.iter().any(|r| !r.recvs.is_empty());
        let mut work = None;
        let base = if me == root {
            let r = recv.cast::<u8>();
            // SAFETY: the caller's contract: `n` bytes each, in place or
            // not overlapping.
            unsafe { copy_own(s, r, n) };
            r
        } else if folds {
            // SAFETY: the caller's contract: `n` bytes at `send`.
            let w = work.insert(AlignedBuf::from_bytes(unsafe {
                std::slice::from_raw_parts(s, n)
            }));
            w.bytes_mut().as_mut_ptr()
        } else {
            // Only ever read: the schedule sends from it.
            s.cast_mut()
        };
        let (_, wire) = self.wire()?;
        let blocks = Blocks::Split {
            base,
            offsets: vec![0, n],
        };
        let mut run = Run::new(sched, wire, blocks, Some(op.bytes_fn()));
        if work.is_some() {
            run.owned = work;
            run.finish = Some(Box::new(|_| AlignedBuf::zeroed(0)));
        }
        Ok(self.start(Active::Sched(run)))
    }

    /// Starts a [`Comm::bcast`]: every rank passes a buffer of the same
    /// length (only the root's contents are sent); `wait` returns the root's
    /// data on every rank. Inside one host it goes through the collective
    /// area, as [`Comm::ibcast_into`] does.
    /// On large blocks prefer [`Comm::ibcast_into`] in a [`crate::scope`]: it
    /// moves the data between the program's own buffers, where this form
    /// allocates and copies the result.
    #[track_caller]
    pub fn ibcast<T: Pod>(&self, buf: Vec<T>, root: usize) -> Result<CollRequest<T>> {
        self.check_root(root)?;
        let n = std::mem::size_of_val(buf.as_slice());
        if let Some(r) = self.shm_start(Location::caller(), |e, g| {
            let mut data = AlignedBuf::from_bytes(as_bytes(&buf));
            let at = (data.bytes_mut().as_mut_ptr(), n);
            // SAFETY: `data`, kept by the request until it completes (its
            // memory does not move), and then every rank's result.
            let mut p = unsafe { shm::Pending::start_bcast(e, g, root, at) };
            p.kept = Some(data);
            Some(Ok(p))
        })? {
            return Ok(r);
        }
        let sched = sc::bcast_binomial(&self.group(), root, self.rank(), 1);
        self.start_sched(
            sched,
            AlignedBuf::from_bytes(as_bytes(&buf)),
            vec![0, n],
            None,
            None,
        )
    }

    /// Starts a [`Comm::allgather`] of `send` (the same length everywhere);
    /// `wait` returns every rank's contribution in rank order.
    /// On large blocks prefer [`Comm::iallgather_into`] in a [`crate::scope`]: it
    /// moves the data between the program's own buffers, where this form
    /// allocates and copies the result.
    #[track_caller]
    pub fn iallgather<T: Pod>(&self, send: Vec<T>) -> Result<CollRequest<T>> {
        let counts = vec![send.len(); self.size()];
        self.iallgatherv(send, &counts)
    }

    /// Starts a [`Comm::gather`] to `root` of `send` (the same length
    /// everywhere); `wait` returns every rank's contribution in rank order at
    /// the root and an empty vector elsewhere.
    /// On large blocks prefer [`Comm::igather_into`] in a [`crate::scope`]: it
    /// moves the data between the program's own buffers, where this form
    /// allocates and copies the result.
    #[track_caller]
    pub fn igather<T: Pod>(&self, send: Vec<T>, root: usize) -> Result<CollRequest<T>> {
        self.check_root(root)?;
        let (p, me) = (self.size(), self.rank());
        let b = std::mem::size_of_val(send.as_slice());
        // Blocks by virtual rank (root first), put in rank order at the end.
        let v = (me + p - root) % p;
        let mut work = AlignedBuf::zeroed(p * b);
        copy_slice(&mut work.bytes_mut()[v * b..(v + 1) * b], as_bytes(&send));
        let sched = sc::gather_binomial(&self.group(), root, me);
        let finish: Finish = if me == root {
            Box::new(move |w| {
                let mut out = AlignedBuf::zeroed(p * b);
                for v in 0..p {
                    let r = (v + root) % p;
                    copy_slice(
                        &mut out.bytes_mut()[r * b..(r + 1) * b],
                        &w.bytes()[v * b..(v + 1) * b],
                    );
                }
                out
            })
        } else {
            Box::new(|_| AlignedBuf::zeroed(0))
        };
        self.start_sched(sched, work, even_offsets(p * b, p, 1), None, Some(finish))
    }

    /// Starts a [`Comm::scatter`] of `count` elements to each rank from the
    /// root's `send` (`size() * count` elements; other ranks' `send` is not
    /// used); `wait` returns this rank's block.
    /// On large blocks prefer [`Comm::iscatter_into`] in a [`crate::scope`]: it
    /// moves the data between the program's own buffers, where this form
    /// allocates and copies the result.
    #[track_caller]
    pub fn iscatter<T: Pod>(
        &self,
        send: Vec<T>,
        count: usize,
        root: usize,
    ) -> Result<CollRequest<T>> {
        self.check_root(root)?;
        let (p, me) = (self.size(), self.rank());
        if me == root && send.len() != p * count {
            return Err(bad(
                "send",
                send.len(),
                format!("size() * count = {} elements at the root", p * count),
            ));
        }
        let b = count * std::mem::size_of::<T>();
        let mut work = AlignedBuf::zeroed(p * b);
        if me == root {
            let src = as_bytes(&send);
            for v in 0..p {
                let r = (v + root) % p;
                copy_slice(
                    &mut work.bytes_mut()[v * b..(v + 1) * b],
                    &src[r * b..(r + 1) * b],
                );
            }
        }
        let v = (me + p - root) % p;
        let sched = sc::scatter_binomial(&self.group(), root, me);
        let finish: Finish =
            Box::new(move |w| AlignedBuf::from_bytes(&w.bytes()[v * b..(v + 1) * b]));
        self.start_sched(sched, work, even_offsets(p * b, p, 1), None, Some(finish))
    }

    /// Starts a [`Comm::alltoall`] of `send` (`size()` equal blocks, block j
    /// for rank j); `wait` returns the blocks received, block i from rank i.
    /// On large blocks prefer [`Comm::ialltoall_into`] in a [`crate::scope`]: it
    /// moves the data between the program's own buffers, where this form
    /// allocates and copies the result.
    #[track_caller]
    pub fn ialltoall<T: Pod>(&self, send: Vec<T>) -> Result<CollRequest<T>> {
        let (p, me) = (self.size(), self.rank());
        if !send.len().is_multiple_of(p) {
            return Err(bad(
                "send",
                send.len(),
                format!("a multiple of size() = {p}"),
            ));
        }
        let b = std::mem::size_of_val(send.as_slice()) / p;
        // Outgoing blocks, then incoming ones; this rank's own goes across now.
        let mut work = AlignedBuf::zeroed(2 * p * b);
        let w = work.bytes_mut();
        copy_slice(&mut w[..p * b], as_bytes(&send));
        w.copy_within(me * b..(me + 1) * b, (p + me) * b);
        let sched = sc::alltoall_pairwise(&self.group(), me);
        let finish: Finish = Box::new(move |w| AlignedBuf::from_bytes(&w.bytes()[p * b..]));
        self.start_sched(
            sched,
            work,
            even_offsets(2 * p * b, 2 * p, 1),
            None,
            Some(finish),
        )
    }

    /// Starts a [`Comm::gatherv`] (linear): `wait` returns, at the root, the
    /// `counts[i]` elements of each rank i one after the other, and an empty
    /// vector elsewhere.
    #[track_caller]
    pub fn igatherv<T: Pod>(
        &self,
        send: Vec<T>,
        counts: &[usize],
        root: usize,
    ) -> Result<CollRequest<T>> {
        self.check_root(root)?;
        let me = self.check_own_count(counts, send.len())?;
        let elem = std::mem::size_of::<T>();
        let sched = sc::gather_linear(&self.group(), root, me);
        if me != root {
            let n = send.len() * elem;
            let finish: Finish = Box::new(|_| AlignedBuf::zeroed(0));
            return self.start_sched(
                sched,
                AlignedBuf::from_bytes(as_bytes(&send)),
                vec![0, n],
                None,
                Some(finish),
            );
        }
        let offsets = count_offsets(counts, elem);
        let mut work = AlignedBuf::zeroed(offsets[counts.len()]);
        copy_slice(
            &mut work.bytes_mut()[offsets[me]..offsets[me + 1]],
            as_bytes(&send),
        );
        self.start_sched(sched, work, offsets, None, None)
    }

    /// Starts a [`Comm::scatterv`] (linear) of the root's `send` (the sum of
    /// `counts` elements; other ranks' `send` is not used): `wait` returns
    /// this rank's `counts[rank]` elements.
    #[track_caller]
    pub fn iscatterv<T: Pod>(
        &self,
        send: Vec<T>,
        counts: &[usize],
        root: usize,
    ) -> Result<CollRequest<T>> {
        self.check_root(root)?;
        self.check_counts(counts)?;
        let me = self.rank();
        let total: usize = counts.iter().sum();
        if me == root && send.len() != total {
            return Err(bad(
                "send",
                send.len(),
                format!("the sum of counts ({total}) at the root"),
            ));
        }
        let elem = std::mem::size_of::<T>();
        let sched = sc::scatter_linear(&self.group(), root, me);
        if me != root {
            let n = counts[me] * elem;
            return self.start_sched(sched, AlignedBuf::zeroed(n), vec![0, n], None, None);
        }
        let offsets = count_offsets(counts, elem);
        let (a, b) = (offsets[me], offsets[me + 1]);
        let finish: Finish = Box::new(move |w| AlignedBuf::from_bytes(&w.bytes()[a..b]));
        self.start_sched(
            sched,
            AlignedBuf::from_bytes(as_bytes(&send)),
            offsets,
            None,
            Some(finish),
        )
    }

    /// Starts a [`Comm::allgatherv`] (ring): `wait` returns the `counts[i]`
    /// elements of each rank i one after the other.
    #[track_caller]
    pub fn iallgatherv<T: Pod>(&self, send: Vec<T>, counts: &[usize]) -> Result<CollRequest<T>> {
        let me = self.check_own_count(counts, send.len())?;
        let offsets = count_offsets(counts, std::mem::size_of::<T>());
        let mut work = AlignedBuf::zeroed(offsets[counts.len()]);
        copy_slice(
            &mut work.bytes_mut()[offsets[me]..offsets[me + 1]],
            as_bytes(&send),
        );
        let work = match self.iallgather_in_area(work, &offsets)? {
            Ok(started) => return Ok(started),
            Err(work) => work,
        };
        let sched = sc::allgather_ring(&self.group(), me);
        self.start_sched(sched, work, offsets, None, None)
    }

    /// Starts an allgather(v) in `work` (block j at `offsets[j]..offsets[j
    /// + 1]`, this rank's own already there) through the collective area
    /// when the communicator is one host's; else gives `work` back.
    #[track_caller]
    fn iallgather_in_area<T: Pod>(
        &self,
        work: AlignedBuf,
        offsets: &[usize],
    ) -> Result<std::result::Result<CollRequest<T>, AlignedBuf>> {
        let me = self.rank();
        let mut work = Some(work);
        let area = self.shm_start(Location::caller(), |e, g| {
            let mut w = work.take()?;
            let base = w.bytes_mut().as_mut_ptr();
            let recv: Vec<_> = offsets
                .windows(2)
                .map(|o| (base.wrapping_add(o[0]), o[1] - o[0]))
                .collect();
            let send = (recv[me].0.cast_const(), recv[me].1);
            // SAFETY: the segments split `w`'s heap memory, which the
            // Pending keeps (a move of the buffer does not move it) and
            // nothing else touches until the collective completes; this
            // rank's own block is its send.
            let mut p = unsafe { shm::Pending::start_gather(e, g, send, recv, None) };
            p.kept = Some(w);
            Some(Ok(p))
        })?;
        Ok(match (area, work) {
            (Some(r), _) => Ok(r),
            (None, Some(w)) => Err(w),
            (None, None) => {
                return Err(Error::Protocol(
                    "the collective area took a buffer and started nothing".into(),
                ))
            }
        })
    }

    /// Starts a [`Comm::alltoallv`]: `send` holds `send_counts[j]` elements for
    /// each rank j one after the other; `wait` returns the `recv_counts[i]`
    /// elements from each rank i one after the other.
    #[track_caller]
    pub fn ialltoallv<T: Pod>(
        &self,
        send: Vec<T>,
        send_counts: &[usize],
        recv_counts: &[usize],
    ) -> Result<CollRequest<T>> {
        self.check_counts(send_counts)?;
        self.check_counts(recv_counts)?;
        let (p, me) = (self.size(), self.rank());
        let st: usize = send_counts.iter().sum();
        if send.len() != st || send_counts[me] != recv_counts[me] {
            return Err(bad(
                "send",
                send.len(),
                format!(
                    "the sum of send_counts ({st}), with send_counts[{me}] == recv_counts[{me}]"
                ),
            ));
        }
        let counts: Vec<usize> = send_counts.iter().chain(recv_counts).copied().collect();
        let offsets = count_offsets(&counts, std::mem::size_of::<T>());
        let mut work = AlignedBuf::zeroed(offsets[2 * p]);
        let w = work.bytes_mut();
        copy_slice(&mut w[..offsets[p]], as_bytes(&send));
        w.copy_within(offsets[me]..offsets[me + 1], offsets[p + me]);
        let start = offsets[p];
        let sched = sc::alltoall_pairwise(&self.group(), me);
        let finish: Finish = Box::new(move |w| AlignedBuf::from_bytes(&w.bytes()[start..]));
        self.start_sched(sched, work, offsets, None, Some(finish))
    }

    /// Starts a [`Comm::scan`] (inclusive, in rank order, along the ranks):
    /// `wait` returns the combination of ranks 0..=rank.
    #[track_caller]
    pub fn iscan<T: Pod>(&self, buf: Vec<T>, op: &Op<T>) -> Result<CollRequest<T>> {
        op.check_for(buf.len())?;
        let n = std::mem::size_of_val(buf.as_slice());
        let sched = sc::scan_linear(&self.group(), self.rank(), false);
        let work = AlignedBuf::from_bytes(as_bytes(&buf));
        self.start_sched(sched, work, vec![0, n], Some(op.bytes_fn()), None)
    }

    /// [`Comm::iscan`] (or, `exclusive`, [`Comm::iexscan`]) from and into
    /// the program's memory: `send` holds this rank's `count` elements
    /// (it may be `recv` itself: in place), `recv` gets the result on
    /// completion (rank 0's is left alone by an exclusive scan). An
    /// inclusive scan folds in `recv`; an exclusive one in a work copy of
    /// `send` on the ranks that both receive a prefix and pass one on, and
    /// sends straight from `send` elsewhere.
    ///
    /// # Safety
    /// `send` readable, and `recv` writable and not touched by the program,
    /// until the request completes.
    #[doc(hidden)]
    pub unsafe fn iscan_raw<T: Pod>(
        &self,
        send: *const T,
        recv: *mut T,
        count: usize,
        op: &Op<T>,
        exclusive: bool,
    ) -> Result<CollRequest<u8>> {
        op.check_for(count)?;
        let (p, me) = (self.size(), self.rank());
        let n = count * std::mem::size_of::<T>();
        let (s, r) = (send.cast::<u8>(), recv.cast::<u8>());
        let sched = sc::scan_linear(&self.group(), me, exclusive);
        let (_, wire) = self.wire()?;
        let op = Some(op.bytes_fn());
        let run = if !exclusive {
            // SAFETY: the caller's contract: `n` bytes each, in place or
            // not overlapping.
            unsafe { copy_own(s, r, n) };
            let blocks = Blocks::Split {
                base: r,
                offsets: vec![0, n],
            };
            Run::new(sched, wire, blocks, op)
        } else {
            // Block 0 is this rank's part: only sent by rank 0, untouched by
            // the last rank (`scan_linear`), folded and passed on between
            // them. Block 1 is the result, which rank 0 never touches.
            let mut work = (me > 0 && me + 1 < p).then(|| {
                // SAFETY: the caller's contract: `n` bytes at `send`.
                AlignedBuf::from_bytes(unsafe { std::slice::from_raw_parts(s, n) })
            });
            let own = match &mut work {
                Some(w) => w.bytes_mut().as_mut_ptr(),
                None => s.cast_mut(),
            };
            let mut run = Run::new(sched, wire, Blocks::Each(vec![(own, n), (r, n)]), op);
            run.owned = work;
            run.finish = Some(Box::new(|_| AlignedBuf::zeroed(0)));
            run
        };
        Ok(self.start(Active::Sched(run)))
    }

    /// Starts an exclusive scan: `wait` returns the combination of ranks
    /// 0..rank, and on rank 0 its own `buf` (as [`Comm::exscan_in_place`]
    /// leaves it).
    #[track_caller]
    pub fn iexscan<T: Pod>(&self, buf: Vec<T>, op: &Op<T>) -> Result<CollRequest<T>> {
        op.check_for(buf.len())?;
        let me = self.rank();
        let n = std::mem::size_of_val(buf.as_slice());
        let mut work = AlignedBuf::zeroed(2 * n);
        copy_slice(&mut work.bytes_mut()[..n], as_bytes(&buf));
        let sched = sc::scan_linear(&self.group(), me, true);
        let keep = if me == 0 { 0..n } else { n..2 * n };
        let finish: Finish = Box::new(move |w| AlignedBuf::from_bytes(&w.bytes()[keep]));
        self.start_sched(
            sched,
            work,
            vec![0, n, 2 * n],
            Some(op.bytes_fn()),
            Some(finish),
        )
    }

    /// Starts a [`Comm::reduce_scatter`]: `wait` returns this rank's
    /// `counts[rank]` elements of the combination. Inside one host it goes
    /// through the collective area in rounds, or, longer than a payload
    /// half, by single copy where the blocking form would; otherwise by
    /// messages (`reduce_scatter_plan`).
    #[track_caller]
    pub fn ireduce_scatter<T: Pod>(
        &self,
        send: Vec<T>,
        counts: &[usize],
        op: &Op<T>,
    ) -> Result<CollRequest<T>> {
        self.check_reduce_scatter(counts, op)?;
        let (p, me) = (self.size(), self.rank());
        let total: usize = counts.iter().sum();
        if send.len() != total {
            return Err(bad(
                "send",
                send.len(),
                format!("the sum of counts ({total})"),
            ));
        }
        let offsets = count_offsets(counts, std::mem::size_of::<T>());
        let (a, b) = (offsets[me], offsets[me + 1]);
        let at = Location::caller();
        let mut work = Some(AlignedBuf::from_bytes(as_bytes(&send)));
        if let Some(r) = self.shm_start(at, |e, g| {
            let area = shm::ireduce_scatter_way(e, g, offsets[p], op)?;
            let send = work.take().expect("taken once");
            let mut out = AlignedBuf::zeroed(b - a);
            let what = shm::Reduction::Scatter {
                send: send.bytes().as_ptr(),
                offsets: offsets.clone(),
                recv: out.bytes_mut().as_mut_ptr(),
            };
            // SAFETY: `send` and `out`, kept by the request until it
            // completes (their memory does not move), `out` then its result.
            let mut p = unsafe { start_long(e, g, what, op, area, Some(send)) };
            p.kept = Some(out);
            Some(Ok(p))
        })? {
            return Ok(r);
        }
        let work = work.expect("not taken but for the area");
        let finish: Finish = Box::new(move |w| AlignedBuf::from_bytes(&w.bytes()[a..b]));
        let sched = reduce_scatter_plan(p, me, op.commutative);
        self.start_sched(sched, work, offsets, Some(op.bytes_fn()), Some(finish))
    }

    /// [`Comm::ireduce_scatter`] from and into the program's memory: `send`
    /// holds the sum of `counts` elements, `recv` this rank's `counts[rank]`.
    /// Inside one host it folds into `recv` through the collective area,
    /// or by single copy as [`Comm::ireduce_scatter`] says. Otherwise, by
    /// messages: a commutative operation folds in `recv`
    /// and in a work copy of the blocks the ring passes on, and sends its
    /// first block straight from `send`; any other folds a work copy of
    /// `send` and writes this rank's block into `recv` on completion.
    ///
    /// # Safety
    /// `send` readable, and `recv` writable and not touched by the program,
    /// until the request completes.
    #[doc(hidden)]
    #[track_caller]
    pub unsafe fn ireduce_scatter_raw<T: Pod>(
        &self,
        send: *const T,
        recv: *mut T,
        counts: &[usize],
        op: &Op<T>,
    ) -> Result<CollRequest<u8>> {
        self.check_reduce_scatter(counts, op)?;
        let (p, me) = (self.size(), self.rank());
        let offsets = count_offsets(counts, std::mem::size_of::<T>());
        if let Some(r) = self.shm_start(Location::caller(), |e, g| {
            let area = shm::ireduce_scatter_way(e, g, offsets[p], op)?;
            let what = shm::Reduction::Scatter {
                send: send.cast(),
                offsets: offsets.clone(),
                recv: recv.cast(),
            };
            // SAFETY: the caller's contract: `send` readable for the sum of
            // `counts`, `recv` writable for `counts[me]` elements.
            Some(Ok(unsafe { start_long(e, g, what, op, area, None) }))
        })? {
            return Ok(r);
        }
        // SAFETY: the caller's contract: the sum of `counts` elements.
        let mine = unsafe { std::slice::from_raw_parts(send.cast::<u8>(), offsets[p]) };
        let block = |j: usize| &mine[offsets[j]..offsets[j + 1]];
        if op.commutative {
            // The ring (`reduce_scatter_plan`) first sends block me - 1,
            // which it never folds into, and folds into block me last,
            // never sending it; every other block it folds into, then
            // passes on. So: block me in `recv`, starting as this rank's
            // part; block me - 1 straight from `send`; the others in a
            // work copy.
            let left = (me + p - 1) % p;
            let passed = |j: usize| j != me && j != left;
            let room = (0..p).filter(|&j| passed(j)).map(|j| block(j).len()).sum();
            let mut work = AlignedBuf::scratch(room);
            let mut at = 0;
            let mut place = vec![0; p];
            for j in (0..p).filter(|&j| passed(j)) {
                let b = block(j);
                copy_slice(&mut work.bytes_mut()[at..at + b.len()], b);
                place[j] = at;
                at += b.len();
            }
            let own = block(me);
            // SAFETY: the caller's contract: `recv` holds this rank's block,
            // as long as `send`'s, and overlaps nothing of it.
            unsafe { copy_own(own.as_ptr(), recv.cast::<u8>(), own.len()) };
            let base = work.bytes_mut().as_mut_ptr();
            let blocks = (0..p)
                .map(|j| {
                    let n = block(j).len();
                    if j == me {
                        (recv.cast::<u8>(), n)
                    } else if j == left {
                        // Only ever read: the ring sends from it.
                        (block(j).as_ptr().cast_mut(), n)
                    } else {
                        (base.wrapping_add(place[j]), n)
                    }
                })
                .collect();
            let (_, wire) = self.wire()?;
            let sched = reduce_scatter_plan(p, me, true);
            let mut run = Run::new(sched, wire, Blocks::Each(blocks), Some(op.bytes_fn()));
            // The work copy lives as long as the run; the result is in `recv`.
            run.owned = Some(work);
            run.finish = Some(Box::new(|_| AlignedBuf::zeroed(0)));
            return Ok(self.start(Active::Sched(run)));
        }
        let work = AlignedBuf::from_bytes(mine);
        let (a, b) = (offsets[me], offsets[me + 1]);
        // The address travels as a number: the closure runs in the engine's
        // progress, on whichever thread polls.
        let out = recv as usize;
        let finish: Finish = Box::new(move |w| {
            let block = &w.bytes()[a..b];
            // SAFETY: the caller's contract: `recv` holds `counts[me]`
            // elements, untouched until the request completes (now).
            unsafe { std::ptr::copy_nonoverlapping(block.as_ptr(), out as *mut u8, b - a) };
            AlignedBuf::zeroed(0)
        });
        let sched = reduce_scatter_plan(p, me, op.commutative);
        self.start_sched::<u8>(sched, work, offsets, Some(op.bytes_fn()), Some(finish))
    }

    /// A reduce-scatter's counts (one per rank) and operation, checked.
    fn check_reduce_scatter<T: Pod>(&self, counts: &[usize], op: &Op<T>) -> Result<()> {
        op.check()?;
        for &c in counts {
            op.check_for(c)?;
        }
        self.check_counts(counts)
    }
}

/// Starts a reduction of `what` by `op` in `g`'s area ([`shm::Reducing`];
/// with `area` through the area in chunks, else by single copy), keeping
/// `owned` (a buffer of kumi's that `what` points into) until it completes.
///
/// # Safety
/// The buffers of `what` valid as [`shm::Reduction`] says until the
/// collective completes.
unsafe fn start_long<T: Pod>(
    e: &mut Engine,
    g: &mut shm::Group,
    what: shm::Reduction,
    op: &Op<T>,
    area: bool,
    owned: Option<AlignedBuf>,
) -> shm::Pending {
    let how = (op.unit_bytes(), op.commutative);
    let mut long = shm::Reducing::new(e, g, what, op.bytes_fn(), how, area);
    long.owned = owned;
    // SAFETY: the caller's contract.
    unsafe { shm::Pending::start_long(e, g, long) }
}

/// The message schedule of a nonblocking reduce-scatter of blocks `0..p`
/// that leaves block `me` at rank `me`: a ring for a commutative operation
/// (each rank sends and folds (p-1)/p of the data, all at once), else a
/// reduction to rank 0 in rank order and a scatter.
fn reduce_scatter_plan(p: usize, me: usize, commutative: bool) -> Schedule {
    if commutative {
        // The ring leaves block (i + 1) % p at the member of index i: in
        // this order, member `me` is at index me - 1 and gets block `me`.
        let g: Vec<usize> = (1..p).chain([0]).collect();
        return sc::reduce_scatter_ring(&g, me);
    }
    let g: Vec<usize> = (0..p).collect();
    sc::reduce_binomial(&g, 0, me, p, false).then(sc::scatter_binomial(&g, 0, me))
}
