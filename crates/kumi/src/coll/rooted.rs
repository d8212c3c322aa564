//! Rooted data movement: gather, scatter and their v-forms, blocking and
//! nonblocking, over element slices (the Rust API) and over byte segments
//! anywhere in memory (the C library, without a working buffer).
//!
//! Inside one host the blocking forms go through the collective area
//! (`shm.rs`) when the blocks fit; gatherv and scatterv decide member by
//! member, since there only the root knows every length: a block that fits
//! goes through the area, a longer one as a message in the same call.
//! Elsewhere: linear schedules from `kumi_core::coll`, straight between
//! the ranks' own buffers (each block one message, single copy where the
//! transport can).

use super::*;

impl Comm {
    /// Rank `root` gets every rank's `send` (same length everywhere), in rank
    /// order, in `recv` (`size() * send.len()` elements; unused elsewhere).
    #[track_caller]
    pub fn gather<T: Pod>(&self, send: &[T], recv: &mut [T], root: usize) -> Result<()> {
        self.check_root(root)?;
        let (p, me, n) = (self.size(), self.rank(), send.len());
        if me == root && recv.len() < p * n {
            return Err(bad(
                "recv",
                recv.len(),
                format!("at least size() * send.len() = {}", p * n),
            ));
        }
        let nb = std::mem::size_of_val(send);
        let send = (as_bytes(send).as_ptr(), nb);
        // SAFETY: at the root the first `p` blocks of `recv` (its length
        // checked above), borrowed exclusively for the call; `send` is
        // another borrow.
        unsafe { self.gather_blocks(send, (as_bytes_mut(recv).as_mut_ptr(), nb), root) }
    }

    /// [`Comm::gather`] over bytes anywhere in memory, for the C library:
    /// this rank's `send`, and at the root `size()` blocks of `recv.1`
    /// bytes (as many as its own `send`) one after the other from `recv.0`,
    /// rank j's the j-th (the root's own `send` may be its block itself, in
    /// place). Inside one host no list of the blocks is made.
    ///
    /// # Safety
    /// `send` must be readable and, at the root, the blocks writable until
    /// this returns, overlapping nothing but the root's `send` in place.
    #[doc(hidden)]
    #[track_caller]
    pub unsafe fn gather_blocks(
        &self,
        send: (*const u8, usize),
        recv: (*mut u8, usize),
        root: usize,
    ) -> Result<()> {
        let at = Location::caller();
        self.check_root(root)?;
        let (p, me) = (self.size(), self.rank());
        if me == root && recv.1 != send.1 {
            return Err(bad(
                "recv",
                recv.1,
                format!("blocks of {} bytes, as long as the root's own send", send.1),
            ));
        }
        let block = |j: usize| recv.0.wrapping_add(j * recv.1);
        let sent: &[u8] = if send.1 == 0 {
            &[]
        } else {
            // SAFETY: the caller's contract.
            unsafe { std::slice::from_raw_parts(send.0, send.1) }
        };
        // SAFETY: the caller's contract: block j is rank j's at the root.
        if unsafe { self.gather_area(sent, &block, root, at) }? {
            return Ok(());
        }
        let recv: Vec<(*mut u8, usize)> = if me == root {
            (0..p).map(|j| (block(j), recv.1)).collect()
        } else {
            Vec::new()
        };
        // SAFETY: the caller's contract.
        unsafe { self.gatherv_each(send, &recv, root, Exec::Now(at)) }.map(drop)
    }

    /// Rank i gets block i (of `recv.len()` elements) of `send` of rank `root`
    /// (`size() * recv.len()` elements; unused elsewhere).
    #[track_caller]
    pub fn scatter<T: Pod>(&self, send: &[T], recv: &mut [T], root: usize) -> Result<()> {
        self.check_root(root)?;
        let (p, me, n) = (self.size(), self.rank(), recv.len());
        if me == root && send.len() < p * n {
            return Err(bad(
                "send",
                send.len(),
                format!("at least size() * recv.len() = {}", p * n),
            ));
        }
        let rb = as_bytes_mut(recv);
        let recv = (rb.as_mut_ptr(), rb.len());
        // SAFETY: at the root the first `p` blocks of `send` (its length
        // checked above), borrowed for the call; `recv` is another borrow,
        // exclusive.
        unsafe { self.scatter_blocks((as_bytes(send).as_ptr(), recv.1), recv, root) }
    }

    /// [`Comm::scatter`] over bytes anywhere in memory, for the C library:
    /// at the root `size()` blocks of `send.1` bytes (as many as its own
    /// `recv`) one after the other from `send.0`, rank j's the j-th, and
    /// this rank's `recv` (at the root possibly its own block itself, in
    /// place). Inside one host no list of the blocks is made.
    ///
    /// # Safety
    /// At the root the blocks must be readable, and `recv` writable, until
    /// this returns; `recv` overlaps nothing but the root's own block.
    #[doc(hidden)]
    #[track_caller]
    pub unsafe fn scatter_blocks(
        &self,
        send: (*const u8, usize),
        recv: (*mut u8, usize),
        root: usize,
    ) -> Result<()> {
        let at = Location::caller();
        self.check_root(root)?;
        let (p, me) = (self.size(), self.rank());
        if me == root && send.1 != recv.1 {
            return Err(bad(
                "send",
                send.1,
                format!(
                    "blocks of {} bytes, as long as the root's own receive",
                    recv.1
                ),
            ));
        }
        let block = |j: usize| send.0.wrapping_add(j * send.1);
        // SAFETY: the caller's contract: block j is rank j's at the root.
        if unsafe { self.scatter_area(&block, recv, root, at) }? {
            return Ok(());
        }
        let send: Vec<(*const u8, usize)> = if me == root {
            (0..p).map(|j| (block(j), recv.1)).collect()
        } else {
            Vec::new()
        };
        // SAFETY: the caller's contract.
        unsafe { self.scatterv_each(&send, recv, root, Exec::Now(at)) }.map(drop)
    }

    /// Like [`Comm::gather`] with `counts[i]` elements from rank i, placed one
    /// after the other in `recv` of the root (linear: each rank sends once).
    #[track_caller]
    pub fn gatherv<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        root: usize,
    ) -> Result<()> {
        self.check_root(root)?;
        self.check_counts(counts)?;
        let me = self.rank();
        let total = || counts.iter().sum::<usize>();
        if send.len() != counts[me] || (me == root && recv.len() < total()) {
            return Err(bad(
                "send",
                send.len(),
                format!(
                    "counts[{me}] = {} elements (and recv at the root >= {})",
                    counts[me],
                    total()
                ),
            ));
        }
        let elem = std::mem::size_of::<T>();
        let recv = Consecutive::new(
            recv.as_mut_ptr().cast::<u8>(),
            counts,
            elem,
            <*mut u8>::wrapping_add,
        );
        let send = (send.as_ptr().cast::<u8>(), std::mem::size_of_val(send));
        // SAFETY: the segments split `recv` (counts checked against its
        // length at the root, where alone they are asked for), borrowed
        // exclusively for the call, and `send` is borrowed; the root's own
        // segment is as long as its `send` (checked above).
        unsafe { self.gatherv_at(send, &|j| recv.seg(j), root, Location::caller()) }
    }

    /// [`Comm::gatherv`] over byte segments anywhere in memory, for the C
    /// library (no copy through a working buffer): this rank's `send`, and
    /// at the root `recv[i]` for what rank i sends (the root's own `send`
    /// may be its `recv[root]`, in place).
    ///
    /// # Safety
    /// `send` must be readable and, at the root, each `recv` segment
    /// writable for its length until this returns; `recv` segments overlap
    /// nothing but the root's `send` in place.
    #[doc(hidden)]
    #[track_caller]
    pub unsafe fn gatherv_segments(
        &self,
        send: (*const u8, usize),
        recv: &[(*mut u8, usize)],
        root: usize,
    ) -> Result<()> {
        self.check_root(root)?;
        let (p, me) = (self.size(), self.rank());
        if me == root {
            own_segment("recv", recv, p, me, send.1)?;
        }
        // SAFETY: the caller's contract; `recv` has a segment per rank at
        // the root (checked).
        unsafe { self.gatherv_at(send, &|j| recv[j], root, Location::caller()) }
    }

    /// [`Comm::gatherv_segments`] with the root's segments given by
    /// `recv(j)` (rank j's: where, how many bytes), for the C library,
    /// which reads them from the program's arrays as it goes: inside one
    /// host no list of them is made.
    ///
    /// # Safety
    /// As for [`Comm::gatherv_segments`], `recv(j)` for `j < size()` being
    /// its segments (called at the root only).
    #[doc(hidden)]
    #[track_caller]
    pub unsafe fn gatherv_by(
        &self,
        send: (*const u8, usize),
        recv: &dyn Fn(usize) -> (*mut u8, usize),
        root: usize,
    ) -> Result<()> {
        self.check_root(root)?;
        let me = self.rank();
        let own = if me == root { recv(me).1 } else { send.1 };
        if own != send.1 {
            return Err(bad(
                "recv",
                own,
                format!("this rank's segment of {} bytes, as its send", send.1),
            ));
        }
        // SAFETY: the caller's contract.
        unsafe { self.gatherv_at(send, recv, root, Location::caller()) }
    }

    /// The gatherv of [`Comm::gatherv_by`], arguments checked.
    ///
    /// # Safety
    /// As for [`Comm::gatherv_by`].
    unsafe fn gatherv_at(
        &self,
        send: (*const u8, usize),
        recv: &dyn Fn(usize) -> (*mut u8, usize),
        root: usize,
        at: &'static Location<'static>,
    ) -> Result<()> {
        let (p, me) = (self.size(), self.rank());
        let list = || -> Vec<(*mut u8, usize)> {
            if me == root {
                (0..p).map(recv).collect()
            } else {
                Vec::new()
            }
        };
        // SAFETY: the caller's contract.
        let Some((rooted, tag)) = (unsafe { self.gatherv_area(send, recv, root, at) })? else {
            // SAFETY: the caller's contract.
            return unsafe { self.gatherv_each(send, &list(), root, Exec::Now(at)) }.map(drop);
        };
        // The blocks the area does not carry, as messages: each member
        // knows whether its own is one, the root knows them all.
        let long = |r: usize| {
            let n = if r == me { send.1 } else { recv(r).1 };
            n > 0 && !rooted.carries(n)
        };
        let blocks = if me == root {
            (0..p).any(|r| r != root && long(r)).then(list)
        } else {
            // Only ever read: the schedule sends from it.
            long(me).then(|| vec![(send.0 as *mut u8, send.1)])
        };
        self.run_rest(blocks, tag, at, |g| {
            sc::gather_linear_from(g, root, me, &long)
        })
    }

    /// A gather of `send` (as long on every rank) through the collective
    /// area, if the communicator is one host's and the blocks fit: `true`
    /// when done. Every rank decides alike (the size, and the group, which
    /// all share), so either all take this path or none does.
    ///
    /// # Safety
    /// At the root, `recv(j)` is where rank j's block goes, `send.len()`
    /// bytes writable for the call, overlapping nothing but `send` as the
    /// root's own block (in place); elsewhere it is not called.
    unsafe fn gather_area(
        &self,
        send: &[u8],
        recv: &dyn Fn(usize) -> *mut u8,
        root: usize,
        at: &'static Location<'static>,
    ) -> Result<bool> {
        let n = send.len();
        let info = self.info(Call::Collective, -2, -2, at);
        let done = self.shm_whole(at, false, |e, g| {
            (n == 0 || shm::Rooted::gather(e, g).carries(n)).then(|| {
                // SAFETY: rank j's block at the root (the caller's contract).
                let mut put = |j: usize, b: &[u8]| unsafe { copy_own(b.as_ptr(), recv(j), n) };
                shm::gather(e, g, send, &|_| n, true, &mut put, root, info)
            })
        })?;
        if done.is_some() && self.rank() == root {
            // SAFETY: the root's own block (the caller's contract); nothing
            // when in place.
            unsafe { copy_own(send.as_ptr(), recv(root), n) };
        }
        Ok(done.is_some())
    }

    /// The part of a gatherv inside one host that the collective area
    /// carries: every member whose block fits one payload half writes it
    /// there and the root copies it out (the root knows every length, a
    /// member its own, so they agree member by member). `Some((payload,
    /// tag))`: done, but for the blocks longer than `payload`, which are
    /// still to go as messages with the call's `tag` (taken here on every
    /// rank); `None`: the communicator has no area and nothing was done.
    ///
    /// # Safety
    /// As for [`Comm::gatherv_by`].
    unsafe fn gatherv_area(
        &self,
        send: (*const u8, usize),
        recv: &dyn Fn(usize) -> (*mut u8, usize),
        root: usize,
        at: &'static Location<'static>,
    ) -> Result<Option<(shm::Rooted, i32)>> {
        let me = self.rank();
        let info = self.info(Call::Collective, -2, -2, at);
        let sent: &[u8] = if send.1 == 0 {
            &[]
        } else {
            // SAFETY: the caller's contract.
            unsafe { std::slice::from_raw_parts(send.0, send.1) }
        };
        let done = self.shm_whole_tagged(at, false, true, |e, g| {
            let rooted = shm::Rooted::gather(e, g);
            // SAFETY: rank j's segment at the root (the caller's contract).
            let mut put = |j: usize, b: &[u8]| unsafe { copy_own(b.as_ptr(), recv(j).0, b.len()) };
            let len = |j: usize| recv(j).1;
            Some(shm::gather(e, g, sent, &len, false, &mut put, root, info).map(|()| rooted))
        })?;
        if done.is_some() && me == root {
            // SAFETY: the caller's contract; nothing in place.
            unsafe { copy_own(send.0, recv(me).0, send.1) };
        }
        Ok(done)
    }

    /// A scatter to `recv` (as long on every rank) through the collective
    /// area, if the communicator is one host's and all blocks fit one
    /// payload: `true` when done. Every rank decides alike.
    ///
    /// # Safety
    /// At the root, `send(j)` is rank j's block, `recv.1` bytes readable for
    /// the call; `recv` is writable and overlaps nothing but the root's own
    /// block (in place).
    unsafe fn scatter_area(
        &self,
        send: &dyn Fn(usize) -> *const u8,
        recv: (*mut u8, usize),
        root: usize,
        at: &'static Location<'static>,
    ) -> Result<bool> {
        let n = recv.1;
        let info = self.info(Call::Collective, -2, -2, at);
        let done = self.shm_whole(at, false, |e, g| {
            let (m, rooted) = (g.slots.len(), shm::Rooted::of(e, g).equal(root));
            rooted
                .spot(root, n, m)
                .is_some()
                .then(|| shm::scatter(e, g, &|j| (send(j), n), recv, rooted, root, info))
        })?;
        Ok(done.is_some())
    }

    /// The part of a scatterv inside one host that the collective area
    /// carries (as [`Comm::gatherv_area`]): the root writes every block that
    /// has a place in its contribution ([`shm::Rooted::spot`], which each
    /// member can tell of its own), the members copy theirs out. `Some((payload,
    /// tag))`: done, but for the blocks without a place, which are still to
    /// go as messages with `tag` (as [`Comm::gatherv_area`]); `None`: no
    /// area, nothing done.
    ///
    /// # Safety
    /// As for [`Comm::scatterv_by`].
    unsafe fn scatterv_area(
        &self,
        send: &dyn Fn(usize) -> (*const u8, usize),
        recv: (*mut u8, usize),
        root: usize,
        at: &'static Location<'static>,
    ) -> Result<Option<(shm::Rooted, i32)>> {
        let info = self.info(Call::Collective, -2, -2, at);
        self.shm_whole_tagged(at, false, true, |e, g| {
            let rooted = shm::Rooted::of(e, g);
            Some(shm::scatter(e, g, send, recv, rooted, root, info).map(|()| rooted))
        })
    }

    /// [`Comm::gatherv_segments`] started: the segments stay valid (and,
    /// but for `send`, untouched) until the request's `wait` returns.
    ///
    /// # Safety
    /// As for [`Comm::gatherv_segments`], until the request completes.
    #[doc(hidden)]
    pub unsafe fn igatherv_segments(
        &self,
        send: (*const u8, usize),
        recv: &[(*mut u8, usize)],
        root: usize,
    ) -> Result<CollRequest<u8>> {
        self.check_root(root)?;
        let (p, me) = (self.size(), self.rank());
        if me == root {
            own_segment("recv", recv, p, me, send.1)?;
        }
        // Inside one host, the blocks the area carries ([`shm::Rooted`]) in
        // one pass, the others as messages beside it (as
        // `gatherv_segments`).
        let pending = self.shm_whole(Location::caller(), true, |e, g| {
            let recv = if me == root {
                recv.to_vec()
            } else {
                Vec::new()
            };
            let rooted = shm::Rooted::gather(e, g);
            // SAFETY: the caller's contract.
            let pending = unsafe { shm::Pending::start_gatherv(e, g, root, send, recv, rooted) };
            Some(Ok((pending, rooted)))
        })?;
        let Some((pending, rooted)) = pending else {
            // SAFETY: the caller's contract.
            return unsafe { self.gatherv_each(send, recv, root, Exec::Start) }.map(started);
        };
        let long = |r: usize| {
            let n = if r == me { send.1 } else { recv[r].1 };
            n > 0 && !rooted.carries(n)
        };
        let blocks = if me == root {
            (0..p).any(|r| r != root && long(r)).then(|| recv.to_vec())
        } else {
            // Only ever read: the schedule sends from it.
            long(me).then(|| vec![(send.0 as *mut u8, send.1)])
        };
        let req = self.start_rest(pending, blocks, |g| {
            sc::gather_linear_from(g, root, me, &long)
        })?;
        if me == root {
            // SAFETY: the caller's contract; nothing in place. The
            // collective touches no byte of it.
            unsafe { copy_own(send.0, recv[me].0, send.1) };
        }
        Ok(req)
    }

    /// # Safety
    /// As for [`Comm::gatherv_segments`], until the collective completes.
    unsafe fn gatherv_each(
        &self,
        send: (*const u8, usize),
        recv: &[(*mut u8, usize)],
        root: usize,
        how: Exec,
    ) -> Result<Option<CollRequest<u8>>> {
        self.check_root(root)?;
        let (p, me) = (self.size(), self.rank());
        let blocks = if me == root {
            own_segment("recv", recv, p, me, send.1)?;
            // SAFETY: the caller's contract.
            unsafe { copy_own(send.0, recv[me].0, send.1) };
            recv.to_vec()
        } else {
            // Only ever read: the schedule sends from it.
            vec![(send.0 as *mut u8, send.1)]
        };
        self.exec_each(blocks, how, |g, me| sc::gather_linear(g, root, me))
    }

    /// Like [`Comm::scatter`] with `counts[i]` elements for rank i, taken one
    /// after the other from `send` of the root (linear).
    #[track_caller]
    pub fn scatterv<T: Pod>(
        &self,
        send: &[T],
        counts: &[usize],
        recv: &mut [T],
        root: usize,
    ) -> Result<()> {
        self.check_root(root)?;
        self.check_counts(counts)?;
        let me = self.rank();
        let total = || counts.iter().sum::<usize>();
        if recv.len() != counts[me] || (me == root && send.len() < total()) {
            return Err(bad(
                "recv",
                recv.len(),
                format!(
                    "counts[{me}] = {} elements (and send at the root >= {})",
                    counts[me],
                    total()
                ),
            ));
        }
        let elem = std::mem::size_of::<T>();
        let send = Consecutive::new(
            send.as_ptr().cast::<u8>(),
            counts,
            elem,
            <*const u8>::wrapping_add,
        );
        let recv = (recv.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(recv));
        // SAFETY: the segments split `send` (counts checked against its
        // length at the root, where alone they are asked for), borrowed for
        // the call, and `recv` is borrowed exclusively; the root's own
        // segment is as long as its `recv` (checked above).
        unsafe { self.scatterv_at(&|j| send.seg(j), recv, root, Location::caller()) }
    }

    /// [`Comm::scatterv`] over byte segments anywhere in memory, for the C
    /// library: at the root `send[i]` for rank i, and this rank's `recv`
    /// (the root's may be its `send[root]`, in place).
    ///
    /// # Safety
    /// At the root each `send` segment must be readable, and `recv` writable
    /// for its length until this returns; `recv` overlaps nothing but the
    /// root's `send[root]` in place.
    #[doc(hidden)]
    #[track_caller]
    pub unsafe fn scatterv_segments(
        &self,
        send: &[(*const u8, usize)],
        recv: (*mut u8, usize),
        root: usize,
    ) -> Result<()> {
        self.check_root(root)?;
        let (p, me) = (self.size(), self.rank());
        if me == root {
            own_segment("send", send, p, me, recv.1)?;
        }
        // SAFETY: the caller's contract; `send` has a segment per rank at
        // the root (checked).
        unsafe { self.scatterv_at(&|j| send[j], recv, root, Location::caller()) }
    }

    /// [`Comm::scatterv_segments`] with the root's segments given by
    /// `send(j)` (rank j's: where, how many bytes), as
    /// [`Comm::gatherv_by`].
    ///
    /// # Safety
    /// As for [`Comm::scatterv_segments`], `send(j)` for `j < size()` being
    /// its segments (called at the root only).
    #[doc(hidden)]
    #[track_caller]
    pub unsafe fn scatterv_by(
        &self,
        send: &dyn Fn(usize) -> (*const u8, usize),
        recv: (*mut u8, usize),
        root: usize,
    ) -> Result<()> {
        self.check_root(root)?;
        let me = self.rank();
        let own = if me == root { send(me).1 } else { recv.1 };
        if own != recv.1 {
            return Err(bad(
                "send",
                own,
                format!("this rank's segment of {} bytes, as its receive", recv.1),
            ));
        }
        // SAFETY: the caller's contract.
        unsafe { self.scatterv_at(send, recv, root, Location::caller()) }
    }

    /// The scatterv of [`Comm::scatterv_by`], arguments checked.
    ///
    /// # Safety
    /// As for [`Comm::scatterv_by`].
    unsafe fn scatterv_at(
        &self,
        send: &dyn Fn(usize) -> (*const u8, usize),
        recv: (*mut u8, usize),
        root: usize,
        at: &'static Location<'static>,
    ) -> Result<()> {
        let (p, me) = (self.size(), self.rank());
        let list = || -> Vec<(*const u8, usize)> {
            if me == root {
                (0..p).map(send).collect()
            } else {
                Vec::new()
            }
        };
        // SAFETY: the caller's contract.
        let Some((rooted, tag)) = (unsafe { self.scatterv_area(send, recv, root, at) })? else {
            // SAFETY: the caller's contract.
            return unsafe { self.scatterv_each(&list(), recv, root, Exec::Now(at)) }.map(drop);
        };
        // The blocks without a place in the area, as messages.
        let long = |r: usize| {
            let n = if r == me { recv.1 } else { send(r).1 };
            rooted.spot(r, n, p).is_none()
        };
        let blocks = if me == root {
            // Only ever read: the schedule sends from them.
            (0..p)
                .any(|r| r != root && long(r))
                .then(|| list().into_iter().map(|(b, n)| (b as *mut u8, n)).collect())
        } else {
            long(me).then(|| vec![recv])
        };
        self.run_rest(blocks, tag, at, |g| {
            sc::scatter_linear_to(g, root, me, &long)
        })
    }

    /// [`Comm::scatterv_segments`] started.
    ///
    /// # Safety
    /// As for [`Comm::scatterv_segments`], until the request completes.
    #[doc(hidden)]
    #[track_caller]
    pub unsafe fn iscatterv_segments(
        &self,
        send: &[(*const u8, usize)],
        recv: (*mut u8, usize),
        root: usize,
    ) -> Result<CollRequest<u8>> {
        // SAFETY: the caller's contract.
        unsafe { self.iscatter_by(send, recv, root, false) }
    }

    /// [`Comm::iscatterv_segments`] of a scatter: every block as long as
    /// every rank's `recv` (checked at the root), so that inside one host
    /// they lie as the blocking scatter's ([`shm::Rooted::equal`]).
    ///
    /// # Safety
    /// As for [`Comm::scatterv_segments`], until the request completes.
    #[doc(hidden)]
    #[track_caller]
    pub unsafe fn iscatter_segments(
        &self,
        send: &[(*const u8, usize)],
        recv: (*mut u8, usize),
        root: usize,
    ) -> Result<CollRequest<u8>> {
        if self.rank() == root {
            if let Some((j, &(_, n))) = send.iter().enumerate().find(|(_, b)| b.1 != recv.1) {
                return Err(bad(
                    "send",
                    n,
                    format!("block {j} as long as the receive ({} bytes)", recv.1),
                ));
            }
        }
        // SAFETY: the caller's contract.
        unsafe { self.iscatter_by(send, recv, root, true) }
    }

    /// # Safety
    /// As for [`Comm::scatterv_segments`], until the request completes;
    /// `equal` only where every block is as long as every rank's `recv`.
    #[track_caller]
    pub(super) unsafe fn iscatter_by(
        &self,
        send: &[(*const u8, usize)],
        recv: (*mut u8, usize),
        root: usize,
        equal: bool,
    ) -> Result<CollRequest<u8>> {
        self.check_root(root)?;
        let (p, me) = (self.size(), self.rank());
        if me == root {
            own_segment("send", send, p, me, recv.1)?;
        }
        // Inside one host, the blocks with a spot in the root's
        // contribution ([`shm::Rooted::spot`]) through the area in one
        // pass, the others as messages beside it (as `scatterv_segments`).
        let pending = self.shm_whole(Location::caller(), true, |e, g| {
            let send = if me == root {
                send.to_vec()
            } else {
                Vec::new()
            };
            let rooted = match equal {
                true => shm::Rooted::of(e, g).equal(root),
                false => shm::Rooted::of(e, g),
            };
            // SAFETY: the caller's contract.
            let pending = unsafe { shm::Pending::start_scatterv(e, g, root, send, recv, rooted) };
            Some(Ok((pending, rooted)))
        })?;
        let Some((pending, rooted)) = pending else {
            // SAFETY: the caller's contract.
            return unsafe { self.scatterv_each(send, recv, root, Exec::Start) }.map(started);
        };
        let long = |r: usize| {
            let n = if r == me { recv.1 } else { send[r].1 };
            rooted.spot(r, n, p).is_none()
        };
        let blocks = if me == root {
            // Only ever read: the schedule sends from them.
            (0..p)
                .any(|r| r != root && long(r))
                .then(|| send.iter().map(|&(b, n)| (b as *mut u8, n)).collect())
        } else {
            long(me).then(|| vec![recv])
        };
        let req = self.start_rest(pending, blocks, |g| {
            sc::scatter_linear_to(g, root, me, &long)
        })?;
        if me == root {
            // SAFETY: the caller's contract; nothing in place. The
            // collective touches no byte of it.
            unsafe { copy_own(send[me].0, recv.0, recv.1) };
        }
        Ok(req)
    }

    /// # Safety
    /// As for [`Comm::scatterv_segments`], until the collective completes.
    unsafe fn scatterv_each(
        &self,
        send: &[(*const u8, usize)],
        recv: (*mut u8, usize),
        root: usize,
        how: Exec,
    ) -> Result<Option<CollRequest<u8>>> {
        self.check_root(root)?;
        let (p, me) = (self.size(), self.rank());
        let blocks = if me == root {
            own_segment("send", send, p, me, recv.1)?;
            // SAFETY: the caller's contract.
            unsafe { copy_own(send[me].0, recv.0, recv.1) };
            // Only ever read: the schedule sends from them.
            send.iter().map(|&(b, n)| (b as *mut u8, n)).collect()
        } else {
            vec![recv]
        };
        self.exec_each(blocks, how, |g, me| sc::scatter_linear(g, root, me))
    }
}
