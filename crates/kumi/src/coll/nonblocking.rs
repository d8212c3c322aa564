//! Nonblocking reductions and data movement: the forms over the program's
//! own memory (`*_raw` here and the `*_segments` forms beside their
//! blocking twins: the C library's, and the scoped Rust forms' in
//! `scoped.rs`), and the Rust API's owned forms (a vector in, a vector back
//! from `wait`), which are those same forms run over buffers of kumi's own
//! that the engine keeps until the collective completes
//! ([`Comm::keeping`]), so both go the same way: through the collective
//! area's [`shm::Pending`] inside one host, else the schedule of messages
//! their blocking twin runs (binomial trees, ring or recursive doubling,
//! pairwise exchange). The progress engine advances them whenever any kumi
//! call, or the progress thread, polls. Like MPI, every rank starts the
//! collectives of a communicator in the same order.

use super::*;

impl Comm {
    /// Starts an allreduce of `buf` (taken over; returned by `wait`).
    #[track_caller]
    pub fn iallreduce<T: Pod>(&self, buf: Vec<T>, op: &Op<T>) -> Result<CollRequest<T>> {
        let mut data = AlignedBuf::of(&buf);
        // SAFETY: `data`'s memory, kept until the collective completes
        // (`keeping`), and then its result.
        let r = unsafe { self.iallreduce_raw(data.as_mut_ptr::<T>(), buf.len(), op) }?;
        Ok(self.keeping(r, Owned::result(data)))
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
                    start_long(e, g, shm::Reduction::All(bytes, n), op, area)
                }));
            }
            // SAFETY: the caller's contract: `n` bytes at `buf`, reduced in
            // place.
            Some(Ok(unsafe {
                shm::Pending::start_allreduce(e, g, (bytes, n), op.bytes_fn())
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
        self.start_sched(
            sched,
            AlignedBuf::of(&buf),
            offsets,
            Some(op.bytes_fn()),
            None,
        )
    }

    /// Starts a [`Comm::reduce`] of `buf` to `root`; `wait` returns the
    /// combination at the root and an empty vector elsewhere.
    #[track_caller]
    pub fn ireduce<T: Pod>(&self, buf: Vec<T>, op: &Op<T>, root: usize) -> Result<CollRequest<T>> {
        let mut data = AlignedBuf::of(&buf);
        let at = data.as_mut_ptr::<T>();
        // SAFETY: `data`'s memory, kept until the collective completes
        // (`keeping`): the contribution, in place at the root.
        let r = unsafe { self.ireduce_raw(at, at, buf.len(), op, root) }?;
        Ok(self.keeping(
            r,
            match self.rank() == root {
                true => Owned::result(data),
                false => Owned::reading(data, None),
            },
        ))
    }

    /// [`Comm::ireduce`] from and into the program's memory: `send` holds
    /// this rank's `count` elements (at the root it may be `recv` itself:
    /// in place), the root's `recv` gets the result on completion. Inside
    /// one host, through the collective area as the blocking reduce goes
    /// (the others publish from `send` and are done; the root folds in
    /// `recv`), a longer one than a payload half in chunks where its
    /// operation commutes and single copy is not chosen
    /// ([`shm::ireduce_in_area`]); otherwise by messages: the root folds in
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
            let long = n > g.payload;
            if long && !shm::ireduce_in_area(e, g, op) {
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
                match long {
                    true => start_long(e, g, shm::Reduction::Root { buf, n, root }, op, true),
                    false => shm::Pending::start_reduce(
                        e,
                        g,
                        (buf, n),
                        (op.bytes_fn(), op.commutative),
                        root,
                    ),
                }
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
    /// data on every rank.
    /// On large blocks prefer [`Comm::ibcast_into`] in a [`crate::scope`]: it
    /// moves the data between the program's own buffers, where this form
    /// allocates and copies the result.
    #[track_caller]
    pub fn ibcast<T: Pod>(&self, buf: Vec<T>, root: usize) -> Result<CollRequest<T>> {
        let mut data = AlignedBuf::of(&buf);
        let at = (data.as_mut_ptr::<u8>(), data.bytes().len());
        // SAFETY: `data`'s memory, kept until the collective completes
        // (`keeping`), and then its result.
        let r = unsafe { self.ibcast_segment(at, root) }?;
        Ok(self.keeping(r, Owned::result(data)))
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
        let counts = vec![send.len(); self.size()];
        self.igatherv(send, &counts, root)
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
        let p = self.size();
        if self.rank() == root && send.len() != p * count {
            return Err(bad(
                "send",
                send.len(),
                format!("size() * count = {} elements at the root", p * count),
            ));
        }
        self.iscatter_counts(send, &vec![count; p], root, true)
    }

    /// Starts a [`Comm::alltoall`] of `send` (`size()` equal blocks, block j
    /// for rank j); `wait` returns the blocks received, block i from rank i.
    /// On large blocks prefer [`Comm::ialltoall_into`] in a [`crate::scope`]: it
    /// moves the data between the program's own buffers, where this form
    /// allocates and copies the result.
    #[track_caller]
    pub fn ialltoall<T: Pod>(&self, send: Vec<T>) -> Result<CollRequest<T>> {
        let p = self.size();
        if !send.len().is_multiple_of(p) {
            return Err(bad(
                "send",
                send.len(),
                format!("a multiple of size() = {p}"),
            ));
        }
        let hold = AlignedBuf::of(&send);
        let n = hold.bytes().len();
        let mut out = AlignedBuf::scratch(n);
        let sends = equal_segments(hold.bytes().as_ptr(), p, n / p, <*const u8>::wrapping_add);
        let recvs = equal_segments(out.as_mut_ptr::<u8>(), p, n / p, <*mut u8>::wrapping_add);
        // SAFETY: the segments split `hold` and `out`, kept until the
        // collective completes (`keeping`), `out` then its result.
        let r = unsafe { self.ialltoall_segments(&sends, &recvs) }?;
        Ok(self.keeping(r, Owned::reading(hold, Some(out))))
    }

    /// Starts a [`Comm::gatherv`]: `wait` returns, at the root, the
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
        let hold = AlignedBuf::of(&send);
        let mut out =
            (me == root).then(|| AlignedBuf::scratch(counts.iter().sum::<usize>() * elem));
        let recvs: Vec<_> = match &mut out {
            Some(o) => byte_segments(o.as_mut_ptr::<u8>(), counts, elem, <*mut u8>::wrapping_add),
            None => Vec::new(),
        };
        let own = (hold.bytes().as_ptr(), hold.bytes().len());
        // SAFETY: `own` is `hold`, the segments split `out`, both kept until
        // the collective completes (`keeping`), `out` then its result.
        let r = unsafe { self.igatherv_segments(own, &recvs, root) }?;
        Ok(self.keeping(r, Owned::reading(hold, out)))
    }

    /// Starts a [`Comm::scatterv`] of the root's `send` (the sum of
    /// `counts` elements; other ranks' `send` is not used): `wait` returns
    /// this rank's `counts[rank]` elements.
    #[track_caller]
    pub fn iscatterv<T: Pod>(
        &self,
        send: Vec<T>,
        counts: &[usize],
        root: usize,
    ) -> Result<CollRequest<T>> {
        self.iscatter_counts(send, counts, root, false)
    }

    /// [`Comm::iscatterv`]; `equal`: a scatter's, every count the same
    /// (`Comm::iscatter_by`).
    #[track_caller]
    fn iscatter_counts<T: Pod>(
        &self,
        send: Vec<T>,
        counts: &[usize],
        root: usize,
        equal: bool,
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
        let hold = AlignedBuf::of(if me == root { &send[..] } else { &[] });
        let sends: Vec<_> = match me == root {
            true => byte_segments(
                hold.bytes().as_ptr(),
                counts,
                elem,
                <*const u8>::wrapping_add,
            ),
            false => Vec::new(),
        };
        let mut out = AlignedBuf::scratch(counts[me] * elem);
        let mine = (out.as_mut_ptr::<u8>(), out.bytes().len());
        // SAFETY: the segments split `hold`, `mine` is `out`, both kept
        // until the collective completes (`keeping`), `out` then its result.
        let r = unsafe { self.iscatter_by(&sends, mine, root, equal) }?;
        Ok(self.keeping(r, Owned::reading(hold, Some(out))))
    }

    /// Starts a [`Comm::allgatherv`]: `wait` returns the `counts[i]`
    /// elements of each rank i one after the other.
    #[track_caller]
    pub fn iallgatherv<T: Pod>(&self, send: Vec<T>, counts: &[usize]) -> Result<CollRequest<T>> {
        let me = self.check_own_count(counts, send.len())?;
        let elem = std::mem::size_of::<T>();
        let mut out = AlignedBuf::scratch(counts.iter().sum::<usize>() * elem);
        let recvs: Vec<_> = byte_segments(
            out.as_mut_ptr::<u8>(),
            counts,
            elem,
            <*mut u8>::wrapping_add,
        );
        // This rank's block goes to its place in the result first, and is
        // sent from there (in place: no copy kept).
        let own = recvs[me];
        // SAFETY: `own` is `counts[me]` elements of `out`, as long as `send`.
        unsafe { copy_own(send.as_ptr().cast(), own.0, own.1) };
        // SAFETY: the segments split `out`, kept until the collective
        // completes (`keeping`), and then its result.
        let r = unsafe { self.iallgatherv_segments((own.0.cast_const(), own.1), recvs) }?;
        Ok(self.keeping(r, Owned::result(out)))
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
        scoped::sum_of("send", send.len(), send_counts)?;
        let elem = std::mem::size_of::<T>();
        let hold = AlignedBuf::of(&send);
        let mut out = AlignedBuf::scratch(recv_counts.iter().sum::<usize>() * elem);
        let sends: Vec<_> = byte_segments(
            hold.bytes().as_ptr(),
            send_counts,
            elem,
            <*const u8>::wrapping_add,
        );
        let recvs: Vec<_> = byte_segments(
            out.as_mut_ptr::<u8>(),
            recv_counts,
            elem,
            <*mut u8>::wrapping_add,
        );
        // SAFETY: the segments split `hold` and `out`, kept until the
        // collective completes (`keeping`), `out` then its result.
        let r = unsafe { self.ialltoallv_segments(&sends, &recvs) }?;
        Ok(self.keeping(r, Owned::reading(hold, Some(out))))
    }

    /// Starts a [`Comm::scan`] (inclusive, in rank order, along the ranks):
    /// `wait` returns the combination of ranks 0..=rank.
    #[track_caller]
    pub fn iscan<T: Pod>(&self, buf: Vec<T>, op: &Op<T>) -> Result<CollRequest<T>> {
        let mut data = AlignedBuf::of(&buf);
        let at = data.as_mut_ptr::<T>();
        // SAFETY: `data`'s memory, kept until the collective completes
        // (`keeping`), and then its result: in place.
        let r = unsafe { self.iscan_raw(at, at, buf.len(), op, false) }?;
        Ok(self.keeping(r, Owned::result(data)))
    }

    /// [`Comm::iscan`] (or, `exclusive`, [`Comm::iexscan`]) from and into
    /// the program's memory: `send` holds this rank's `count` elements
    /// (it may be `recv` itself: in place), `recv` gets the result on
    /// completion (rank 0's is left alone by an exclusive scan). Inside one
    /// host through the collective area as the blocking scan goes (each
    /// rank folds those before it out of the area, none waits for a later
    /// one), in chunks of a payload half, or a long one by single copy as
    /// the blocking one goes; otherwise by a chain of
    /// messages: an inclusive scan folds in `recv`, an exclusive one in a
    /// work copy of `send` on the ranks that both receive a prefix and
    /// pass one on, and sends straight from `send` elsewhere.
    ///
    /// # Safety
    /// `send` readable, and `recv` writable and not touched by the program,
    /// until the request completes.
    #[doc(hidden)]
    #[track_caller]
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
        if let Some(req) = self.shm_start(Location::caller(), |e, g| {
            if shm::scan_by_copy(e, n) {
                let (op, elem) = (op.bytes_fn(), op.unit_bytes());
                // SAFETY: the caller's contract.
                return Some(Ok(unsafe {
                    shm::Pending::start_scan_copy(e, g, s, (r, n), op, elem, !exclusive)
                }));
            }
            // Longer than a payload half: in chunks of whole elements (or
            // groups of a grouped operation).
            let chunk = (g.payload / op.unit_bytes()) * op.unit_bytes();
            if n > g.payload && chunk == 0 {
                return None;
            }
            if !exclusive {
                // SAFETY: the caller's contract: `n` bytes each, in place
                // or not overlapping.
                unsafe { copy_own(s, r, n) };
            }
            // SAFETY: the caller's contract.
            Some(Ok(unsafe {
                shm::Pending::start_scan(e, g, s, (r, n), op.bytes_fn(), chunk, exclusive)
            }))
        })? {
            return Ok(req);
        }
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
        let (hold, mut out) = (AlignedBuf::of(&buf), AlignedBuf::of(&buf));
        // SAFETY: `hold` and `out`, kept until the collective completes
        // (`keeping`), `out` then its result.
        let r = unsafe {
            self.iscan_raw(
                hold.as_ptr::<T>(),
                out.as_mut_ptr::<T>(),
                buf.len(),
                op,
                true,
            )
        }?;
        Ok(self.keeping(r, Owned::reading(hold, Some(out))))
    }

    /// Starts a [`Comm::reduce_scatter`]: `wait` returns this rank's
    /// `counts[rank]` elements of the combination.
    #[track_caller]
    pub fn ireduce_scatter<T: Pod>(
        &self,
        send: Vec<T>,
        counts: &[usize],
        op: &Op<T>,
    ) -> Result<CollRequest<T>> {
        self.check_reduce_scatter(counts, op)?;
        scoped::sum_of("send", send.len(), counts)?;
        let hold = AlignedBuf::of(&send);
        let mut out = AlignedBuf::scratch(counts[self.rank()] * std::mem::size_of::<T>());
        // SAFETY: `hold` and `out` as long as `counts` says, kept until the
        // collective completes (`keeping`), `out` then its result.
        let r = unsafe {
            self.ireduce_scatter_raw(hold.as_ptr::<T>(), out.as_mut_ptr::<T>(), counts, op)
        }?;
        Ok(self.keeping(r, Owned::reading(hold, Some(out))))
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
            Some(Ok(unsafe { start_long(e, g, what, op, area) }))
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
/// with `area` through the area in chunks, else by single copy).
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
) -> shm::Pending {
    let how = (op.unit_bytes(), op.commutative);
    let long = shm::Reducing::new(e, g, what, op.bytes_fn(), how, area);
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
