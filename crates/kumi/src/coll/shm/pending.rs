//! Nonblocking collectives through the area ([`Pending`]): barrier,
//! allreduce of at most one payload half, the data movers (allgather(v),
//! alltoall(v), gather(v), scatter(v), broadcast, neighbourhood
//! exchanges), and the longer
//! allreduce and reduce-scatter ([`Reducing`]), published
//! when every earlier collective of the group has completed here and
//! advanced by the engine's progress.

use super::*;

mod reducing;
pub(crate) use reducing::{Reducing, Reduction};

/// A nonblocking collective through the area (barrier, allreduce, and the
/// data movers of [`Gather`]), advanced by the engine's `progress` (so the
/// progress thread serves it while the application computes). It publishes
/// only once every earlier collective of the group has completed here (see
/// `begin`), then completes when every member it reads from has published
/// (every member, but for the rooted forms: [`Gather::arrived`]).
pub(crate) struct Pending {
    area: usize,
    slots: Arc<[usize]>,
    me: usize,
    /// The collective's sequence number (of the round under way).
    s: u64,
    /// The last round's (`s` when there is one round).
    last: u64,
    completed: Arc<AtomicU64>,
    /// The group's `storage`.
    storage: Arc<Storage>,
    /// The group's `mates`: the other members bound to this rank's core.
    mates: Option<Arc<[usize]>>,
    published: bool,
    done: bool,
    /// The collective's kind (the same as its blocking twin's).
    kind: u64,
    /// A reduction of at most a payload half: where the result goes (`n`
    /// bytes at the pointer, holding this member's contribution but for an
    /// exclusive scan's), and the operation.
    data: Option<(*mut u8, usize, crate::coll::exec::ByteOp)>,
    /// Bytes of `data` per round, whole elements (a scan longer than a
    /// payload half, in chunks as the blocking one goes); 0: all at once.
    chunk: usize,
    /// Whose contributions `data`'s reduction folds.
    folds: Folds,
    /// A data mover: what this member publishes, and where every member's
    /// block for it goes.
    gather: Option<Gather>,
    /// A reduction longer than a payload half (boxed, as `failed`: a
    /// `Pending` moves a few times per call, and a short one carries
    /// neither).
    long: Option<Box<Reducing>>,
    /// Why it ended early (a copy the kernel refused, members that
    /// disagree on a length): the request's error.
    pub failed: Option<Box<Error>>,
}

/// Whose contributions a reduction through the area folds, where.
#[derive(Clone, Copy)]
enum Folds {
    /// Every member's, on every member: an allreduce (and a barrier, which
    /// folds nothing).
    All,
    /// Every member's, on member `root` only; the others' `data` is only
    /// read, and they are done once it is out: a reduce. With a
    /// `commutative` operation the root publishes nothing and folds the
    /// others' straight into its own, in its `data` ([`Folds::into_own`]).
    Root { root: usize, commutative: bool },
    /// Those of the members before this one, and, unless `exclusive`, its
    /// own, which it publishes from `own` (the last member, whose
    /// contribution nobody reads, publishes none): a scan. Nobody waits
    /// for a member after it. As a `chain` ([`super::scan_chains`]) a
    /// member after the first folds only the prefix the one before it
    /// published, and publishes its own prefix ([`Pending::poll_link`]).
    Prefix {
        own: *const u8,
        exclusive: bool,
        chain: bool,
    },
}

impl Folds {
    /// The members member `me` of `m` folds (`..upto`), and whether the
    /// rightmost operand is in the result's buffer already.
    fn range(self, me: usize, m: usize) -> (usize, bool) {
        match self {
            Folds::All => (m, me + 1 == m),
            Folds::Root { root, .. } => (if root == me { m } else { 0 }, me + 1 == m),
            Folds::Prefix {
                exclusive: false, ..
            } => (me + 1, true),
            Folds::Prefix {
                exclusive: true, ..
            } => (me, false),
        }
    }

    /// Whether member `me` folds every other member's contribution straight
    /// into its own, in any order, and publishes none itself: a reduce's
    /// root with a commutative operation, whose contribution nobody reads.
    fn into_own(self, me: usize) -> bool {
        matches!(self, Folds::Root { root, commutative: true } if root == me)
    }
}

/// The buffers of a nonblocking data mover ([`Sends`]: allgather(v),
/// alltoall(v), gather(v), scatter(v), broadcast; the program's, valid
/// until the request completes: the caller's contract), moved in rounds of
/// at most `piece` bytes of each block, one collective sequence number
/// each, as the blocking forms do.
struct Gather {
    send: Sends,
    recv: Vec<(*mut u8, usize)>,
    /// Bytes of a block per round: a payload half (allgather), a member's
    /// share of one (alltoall).
    piece: usize,
    /// The round under way.
    round: usize,
}

/// What a [`Gather`]'s member publishes.
enum Sends {
    /// Allgather: its own block, whose piece fills its half.
    Own(*const u8, usize),
    /// Alltoall: one block of `.1` bytes per member from `.0`, in group
    /// order; each member publishes its pieces of all of them side by side
    /// and this one reads the piece at its own index.
    Blocks(*const u8, usize),
    /// Alltoallv, one round: block j for member j where it is no longer
    /// than `.1` (at most a member's share, [`alltoallv_longest`]) in its
    /// place ([`scatterv_place`]), as the blocking form's first pass; the
    /// longer ones are the caller's to move (both ends know which).
    Each(Vec<(*const u8, usize)>, usize),
    /// Gatherv to member `root`, one round: a block the area carries
    /// ([`Rooted`]), as the blocking form ([`gather`]); `recv` is the
    /// root's segments (empty elsewhere). The others are the caller's.
    ToRoot(usize, (*const u8, usize), Rooted),
    /// Scatterv from member `root`, one round: the blocks with a place in
    /// the root's half ([`Rooted::place`]), as the blocking form
    /// ([`scatter`]); the root's `send` (empty elsewhere), and `recv` this
    /// member's one segment. The others are the caller's.
    FromRoot(usize, Vec<(*const u8, usize)>, Rooted),
    /// Broadcast from member `root` of `recv[0]` (its buffer there, which
    /// it only reads), in rounds of a payload half, as the blocking form
    /// ([`bcast`]): every member knows the length, so all count the same
    /// rounds.
    Bcast(usize),
    /// Neighbourhood exchange, one round: `blocks`, this member's blocks
    /// to each peer (the first `sends`, only read) and then its segments
    /// for the blocks from each, each part sorted by peer, in the
    /// program's order within a peer (one list: one allocation a call). A
    /// pair's blocks travel together where [`neighbor_place`] finds them
    /// room; the others are the caller's to move. A member waits only for
    /// the peers it reads from.
    Neighbors {
        blocks: Vec<(usize, *mut u8, usize)>,
        sends: usize,
        rooted: Rooted,
    },
    /// By single copy, in two rounds, as the blocking twin goes: in the
    /// first every member publishes `dir` ([`single::directory`]: where its
    /// blocks lie) and, once those it copies with have published, copies
    /// straight between the buffers; the second tells the members whose
    /// buffers it read or wrote that it is done with them.
    Copy { dir: Vec<u8>, of: Copied },
}

/// What a [`Sends::Copy`] moves.
pub(crate) enum Copied {
    /// Blocks read from every member's directory ([`single::Directory`]):
    /// an allgather(v)'s (its one block) or an alltoall's (the reader's).
    Each(single::Directory),
    /// A broadcast from member `.0` of `recv[0]`: the readers read it out
    /// of the root's buffer, but for a block of each, which the root writes
    /// ([`single::bcast_read`], [`single::bcast_write_block`]).
    Bcast(usize),
    /// An exscan (or, `inclusive`, a scan) into `recv[0]`: the prefix read
    /// straight out of the contributions of the members before this one
    /// and folded by `op`, `piece` bytes at a time
    /// ([`single::scan_fold`]; an inclusive scan's `recv[0]` holds this
    /// member's own contribution from the start); `_kept`: this member's
    /// contribution kept apart where it is the result's buffer (in place)
    /// and a later member may read it meanwhile (only held, for them to
    /// read).
    Scan {
        op: crate::coll::exec::ByteOp,
        piece: usize,
        _kept: Option<AlignedBuf>,
        inclusive: bool,
    },
}

/// The slots a neighbourhood exchange's member `me` reads from: those of
/// the peers of `from` (its receive blocks, sorted by peer) whose blocks
/// travel through the area.
fn neighbor_sources<'s, P: Copy>(
    from: &'s [(usize, P, usize)],
    slots: &'s [usize],
    me: usize,
    rooted: Rooted,
) -> impl Iterator<Item = usize> + 's {
    by_peer(from)
        .filter(move |&(_, sum)| neighbor_place(me, sum, slots.len(), rooted).is_some())
        .map(|(pair, _)| slots[pair[0].0])
}

/// The blocks of `pairs` (sorted by peer), one peer's at a time, with their
/// sum.
fn by_peer<P: Copy>(
    pairs: &[(usize, P, usize)],
) -> impl Iterator<Item = (&[(usize, P, usize)], usize)> {
    pairs
        .chunk_by(|x, y| x.0 == y.0)
        .map(|pair| (pair, pair.iter().map(|b| b.2).sum()))
}

impl Gather {
    /// Bytes of a block of `n` in the round under way.
    fn part(&self, n: usize) -> std::ops::Range<usize> {
        let at = (self.round * self.piece).min(n);
        at..at + (n - at).min(self.piece)
    }

    /// Writes this member's pieces of the round under way into its slot
    /// for collective `s`, and returns the round's kind.
    fn write_own(&self, a: &CollArea<'_>, slot: usize, s: u64, me: usize, m: usize) -> u64 {
        self.pieces(a, s, me, m, &mut |total, off, b| {
            a.write(slot, s, total, off, b)
        })
    }

    /// The longest contribution (the `total` that places it) of this
    /// member's writes in the round under way, `None` if it writes nothing:
    /// the storage whose earlier readers must be done ([`writable_seen`]).
    /// A short block goes in an entry or a piece, so the root of short
    /// broadcasts (or a member of short gathers) runs up to a depth ahead,
    /// as in the blocking forms, where a payload half's rule kept it in
    /// lock-step.
    fn longest_write(&self, a: &CollArea<'_>, s: u64, me: usize, m: usize) -> Option<usize> {
        let mut longest = None;
        self.pieces(a, s, me, m, &mut |total, _, _| {
            longest = longest.max(Some(total));
        });
        longest
    }

    /// Hands each of this member's writes of the round under way (of
    /// collective `s`) to `put` (`total`, offset and bytes, as
    /// [`CollArea::write`] takes them), and returns the round's kind.
    fn pieces(
        &self,
        a: &CollArea<'_>,
        s: u64,
        me: usize,
        m: usize,
        put: &mut dyn FnMut(usize, usize, &[u8]),
    ) -> u64 {
        match self.send {
            Sends::Own(at, n) => {
                // SAFETY: `send` is readable until completion (the caller's
                // contract).
                let send = unsafe { std::slice::from_raw_parts(at, n) };
                let b = &send[self.part(send.len())];
                put(b.len(), 0, b);
                let total = self.recv.iter().map(|&(_, n)| self.part(n).len()).sum();
                kind(K_ALLGATHER, 0, total)
            }
            Sends::Blocks(at, block) => {
                // SAFETY: as above, `m` blocks.
                let send = unsafe { std::slice::from_raw_parts(at, m * block) };
                let r = self.part(block);
                let total = m * r.len();
                // Not my own block: nobody reads it here (it is the
                // caller's to copy).
                for j in (0..m).filter(|&j| j != me) {
                    let b = &send[j * block + r.start..j * block + r.end];
                    put(total, j * r.len(), b);
                }
                kind(K_ALLTOALL, 0, total)
            }
            Sends::Each(ref send, longest) => {
                let ours = |&(j, &(_, n)): &(usize, &(*const u8, usize))| {
                    j != me && (1..=longest).contains(&n)
                };
                for (j, &(p, n)) in send.iter().enumerate().filter(ours) {
                    if let Some((total, off)) = scatterv_place(j, n, m, a_room(a)) {
                        // SAFETY: as above, `n` bytes at `p`.
                        put(total, off, unsafe { std::slice::from_raw_parts(p, n) });
                    }
                }
                // The blocking form's kind, saying no rounds follow.
                kind(K_ALLTOALLV, 0, 0) | coll_area::KIND_OWN
            }
            Sends::ToRoot(root, (p, n), rooted) => {
                if me != root && rooted.carries(n) {
                    // SAFETY: as above, `n` bytes at `p`.
                    put(n, 0, unsafe { std::slice::from_raw_parts(p, n) });
                }
                // Its own length: the root waits for the one it expects.
                kind(K_GATHERV, root, n)
            }
            Sends::FromRoot(root, ref send, rooted) => {
                // As the blocking scatter ([`scatter`]); `send` is the
                // root's only.
                let number = match me == root {
                    // SAFETY: as above, `send`'s blocks.
                    true => unsafe { scatter_writes(&|j| send[j], rooted, root, m, put) },
                    false => 0,
                };
                scatter_kind(rooted, root, self.recv[0].1 * m, number)
            }
            Sends::Bcast(root) => {
                let (p, n) = self.recv[0];
                let r = self.part(n);
                if me == root {
                    // SAFETY: as above: the root's buffer, `n` bytes.
                    let b = unsafe { std::slice::from_raw_parts(p.cast_const(), n) };
                    put(r.len(), 0, &b[r]);
                }
                kind(K_BCAST, root, n)
            }
            Sends::Neighbors {
                ref blocks,
                sends,
                rooted,
            } => {
                for (pair, sum) in by_peer(&blocks[..sends]) {
                    let j = pair[0].0;
                    let Some((total, mut at)) = neighbor_place(j, sum, m, rooted) else {
                        continue;
                    };
                    let word = pair_word(s, j, pair.iter().map(|b| b.2));
                    put(total, at, &word.to_ne_bytes());
                    at += 8;
                    for &(_, p, n) in pair.iter().filter(|b| b.2 > 0) {
                        // SAFETY: as above, `n` bytes at `p`.
                        put(total, at, unsafe {
                            std::slice::from_raw_parts(p.cast_const(), n)
                        });
                        at += n;
                    }
                }
                kind(K_INEIGHBOR, 0, 0)
            }
            Sends::Copy { ref dir, ref of } => {
                if self.round == 0 {
                    put(dir.len(), 0, dir);
                }
                let total = self.recv.iter().map(|r| r.1).sum();
                match *of {
                    Copied::Each(single::Directory::Own) => kind(K_ALLGATHER_COPY, 0, total),
                    Copied::Each(single::Directory::ToEach) => kind(K_ALLTOALL_COPY, 0, total),
                    Copied::Bcast(root) => kind(K_BCAST_COPY, root, total),
                    Copied::Scan { .. } => kind(K_EXSCAN_COPY, 0, total),
                }
            }
        }
    }

    /// Whether every member waits for every member ([`Gather::arrived`]).
    fn waits_for_all(&self) -> bool {
        matches!(
            self.send,
            Sends::Own(..)
                | Sends::Blocks(..)
                | Sends::Each(..)
                | Sends::Copy {
                    of: Copied::Each(_),
                    ..
                }
        )
    }

    /// Whether a member whose core's other members have all entered the
    /// round waits only for members of other cores ([`Pending::mates_wait`]):
    /// where every member waits for every member, and in a neighbourhood
    /// exchange, whose one round a member has published all it sends when
    /// it enters (the rooted forms' root may still need its core for the
    /// others: kept as measured).
    fn mates_may_keep(&self) -> bool {
        self.waits_for_all() || matches!(self.send, Sends::Neighbors { .. })
    }

    /// Whether the round under way is complete for this member, which
    /// published `kind`: every member has published it, or for the rooted
    /// forms, whoever this member reads from (the root waits for each member
    /// with the length it expects; a member that reads nothing waits for
    /// nobody).
    fn arrived(&self, a: &CollArea<'_>, slots: &[usize], s: u64, kind_: u64, me: usize) -> bool {
        match self.send {
            Sends::ToRoot(root, ..) => {
                me != root
                    || slots.iter().enumerate().all(|(j, &slot)| {
                        reached_as(a, slot, s, kind(K_GATHERV, root, self.recv[j].1))
                    })
            }
            Sends::FromRoot(root, _, rooted) => {
                let n = self.recv[0].1;
                me == root
                    || n == 0
                    || rooted.spot(me, n, slots.len()).is_none()
                    || reached_as(a, slots[root], s, kind_)
            }
            Sends::Bcast(root) => me == root || reached_as(a, slots[root], s, kind_),
            // The root waits for every reader, a reader for the root.
            Sends::Copy {
                of: Copied::Bcast(root),
                ..
            } if me != root => reached_as(a, slots[root], s, kind_),
            // An exscan member reads those before it.
            Sends::Copy {
                of: Copied::Scan { .. },
                ..
            } if self.round == 0 => all_reached_as(a, &slots[..me], s, kind_),
            Sends::Neighbors {
                ref blocks,
                sends,
                rooted,
            } => neighbor_sources(&blocks[sends..], slots, me, rooted)
                .all(|j| reached_as(a, j, s, kind_)),
            _ => all_reached_as(a, slots, s, kind_),
        }
    }

    /// Copies the round's pieces for this member out of the others' halves;
    /// fails where a neighbour's blocks are not the ones this member
    /// expects from it ([`pair_word`]).
    fn read_others(
        &self,
        shm: &ShmTransport,
        a: &CollArea<'_>,
        slots: &[usize],
        s: u64,
        me: usize,
    ) -> Result<()> {
        let m = slots.len();
        let put = |b: &[u8], to: *mut u8| {
            // SAFETY: `to` is a `recv` segment, writable for at least the
            // piece's length until completion and overlapping nothing (the
            // caller's contract).
            unsafe { kumi_transport::copy_bytes(b.as_ptr(), to, b.len()) };
        };
        match self.send {
            Sends::ToRoot(root, _, rooted) if me == root => {
                for (j, &slot) in slots.iter().enumerate().filter(|&(j, _)| j != root) {
                    let (to, n) = self.recv[j];
                    if rooted.carries(n) {
                        put(a.bytes(slot, s, n, 0, n), to);
                    }
                }
                return Ok(());
            }
            Sends::FromRoot(root, _, rooted) if me != root => {
                let (to, n) = self.recv[0];
                let (total, off) = match (rooted.spot(me, n, m), n) {
                    (Some(Spot::At(total, off)), 1..) => (total, off),
                    (Some(Spot::Packed), _) => {
                        Packed::find(a, slots[root], s, (me, m, n), a.payload())?
                    }
                    _ => return Ok(()),
                };
                put(a.bytes(slots[root], s, total, off, n), to);
                return Ok(());
            }
            Sends::Bcast(root) if me != root => {
                let (to, n) = self.recv[0];
                let r = self.part(n);
                put(
                    a.bytes(slots[root], s, r.len(), 0, r.len()),
                    to.wrapping_add(r.start),
                );
                return Ok(());
            }
            Sends::Neighbors {
                ref blocks,
                sends,
                rooted,
            } => {
                for (pair, sum) in by_peer(&blocks[sends..]) {
                    let i = pair[0].0;
                    let Some((total, mut at)) = neighbor_place(me, sum, m, rooted) else {
                        continue;
                    };
                    let mut word = [0u8; 8];
                    word.copy_from_slice(a.bytes(slots[i], s, total, at, 8));
                    if u64::from_ne_bytes(word) != pair_word(s, me, pair.iter().map(|b| b.2)) {
                        return Err(Error::Protocol(format!(
                            "neighbourhood exchange: rank {i} sends rank {me} blocks of other lengths than rank {me} receives from it ({} blocks, {sum} bytes)",
                            pair.len()
                        )));
                    }
                    at += 8;
                    for &(_, to, n) in pair.iter().filter(|b| b.2 > 0) {
                        put(a.bytes(slots[i], s, total, at, n), to);
                        at += n;
                    }
                }
                return Ok(());
            }
            // The second round only says the copies are done.
            Sends::Copy { .. } if self.round > 0 => return Ok(()),
            Sends::Copy {
                of: Copied::Each(dir),
                ..
            } => {
                // SAFETY: the `recv` segments are writable for their length
                // until completion and overlap nothing (the caller's
                // contract).
                return unsafe { dir.read_each(a, shm, (slots, me), s, &self.recv) };
            }
            Sends::Copy {
                of:
                    Copied::Scan {
                        ref op,
                        piece,
                        inclusive,
                        ..
                    },
                ..
            } => {
                let (p, n) = self.recv[0];
                // SAFETY: the result's `n` bytes, writable until completion
                // and touched by nobody else (the caller's contract).
                let out = unsafe { std::slice::from_raw_parts_mut(p, n) };
                let how = (piece, inclusive);
                return single::scan_fold(a, shm, (slots, me), s, out, how, &**op);
            }
            Sends::Copy {
                of: Copied::Bcast(root),
                ..
            } => {
                let (p, n) = self.recv[0];
                if me == root {
                    // SAFETY: the root's buffer, `n` bytes readable until
                    // completion (the caller's contract).
                    let buf = unsafe { std::slice::from_raw_parts(p.cast_const(), n) };
                    for j in (0..m).filter(|&j| j != root) {
                        single::bcast_write_block(a, shm, (slots[j], j, m), s, buf)?;
                    }
                } else {
                    // SAFETY: a reader's buffer, `n` bytes writable until
                    // completion and touched by nobody else but the root's
                    // write of its own block (the caller's contract).
                    let buf = unsafe { std::slice::from_raw_parts_mut(p, n) };
                    single::bcast_read(a, shm, (slots[root], me, m), s, buf)?;
                }
                return Ok(());
            }
            Sends::ToRoot(..) | Sends::FromRoot(..) | Sends::Bcast(_) => return Ok(()),
            _ => {}
        }
        for (j, &slot) in slots.iter().enumerate().filter(|&(j, _)| j != me) {
            let (to, n) = self.recv[j];
            let (b, at) = match self.send {
                Sends::Own(..) => {
                    let r = self.part(n);
                    (a.bytes(slot, s, r.len(), 0, r.len()), r.start)
                }
                Sends::Blocks(_, block) => {
                    let piece = self.part(block).len();
                    let b = a.bytes(slot, s, m * piece, me * piece, piece);
                    (b, self.part(n).start)
                }
                Sends::Each(_, longest) => match (scatterv_place(me, n, m, a_room(a)), n) {
                    (Some((total, off)), 1..) if n <= longest => {
                        (a.bytes(slot, s, total, off, n), 0)
                    }
                    _ => continue,
                },
                Sends::ToRoot(..)
                | Sends::FromRoot(..)
                | Sends::Bcast(_)
                | Sends::Neighbors { .. }
                | Sends::Copy { .. } => {
                    unreachable!("handled above")
                }
            };
            // SAFETY: recv[j] is writable for n bytes until completion and
            // overlaps nothing (the caller's contract); the piece is in it.
            unsafe { kumi_transport::copy_bytes(b.as_ptr(), to.add(at), b.len()) };
        }
        Ok(())
    }

    /// Rounds every member makes: the longest block in pieces.
    fn rounds(&self) -> usize {
        let longest = match self.send {
            Sends::Blocks(_, block) => block,
            Sends::Own(..) => self.recv.iter().map(|&(_, n)| n).max().unwrap_or(0),
            Sends::Bcast(_) => self.recv[0].1,
            Sends::Each(..) | Sends::ToRoot(..) | Sends::FromRoot(..) | Sends::Neighbors { .. } => {
                return 1
            }
            Sends::Copy { .. } => return 2,
        };
        longest.div_ceil(self.piece.max(1)).max(1)
    }
}

/// The bytes of a payload half an alltoallv shares among its members (the
/// last 8 hold the blocking form's count of rounds).
fn a_room(a: &CollArea<'_>) -> usize {
    a.payload() - 8
}

impl Pending {
    /// Starts the next collective of `g`: a barrier.
    pub fn start(e: &mut Engine, g: &mut Group) -> Pending {
        let mut p = Pending::start_unpublished(g);
        // Publish at once if possible: the others may be waiting for it.
        p.poll(e);
        p
    }

    /// Starts an allreduce of `g` in place, of the `n` bytes at `buf` (at
    /// most one payload half), by `op`.
    ///
    /// # Safety
    /// `buf` readable and writable for `n` bytes, and touched by nobody
    /// else, until the collective completes.
    pub unsafe fn start_allreduce(
        e: &mut Engine,
        g: &mut Group,
        (buf, n): (*mut u8, usize),
        op: crate::coll::exec::ByteOp,
    ) -> Pending {
        let mut p = Pending::start_unpublished(g);
        p.kind = kind(K_ALLREDUCE, 0, n);
        p.data = Some((buf, n, op));
        p.poll(e);
        p
    }

    /// Starts a reduce of `g` to member `root`: `n` bytes at `buf` are this
    /// member's contribution, and at the root they become the result. A
    /// member other than the root is done once it has published, as in the
    /// blocking reduce, so back-to-back reduces run ahead of the root up to
    /// the area's depth.
    ///
    /// # Safety
    /// `buf` readable for `n` bytes, and at the root writable and touched
    /// by nobody else, until the collective completes.
    pub unsafe fn start_reduce(
        e: &mut Engine,
        g: &mut Group,
        (buf, n): (*mut u8, usize),
        (op, commutative): (crate::coll::exec::ByteOp, bool),
        root: usize,
    ) -> Pending {
        let mut p = Pending::start_unpublished(g);
        p.kind = kind(K_REDUCE, root, n);
        p.data = Some((buf, n, op));
        p.folds = Folds::Root { root, commutative };
        p.poll(e);
        p
    }

    /// Starts a scan of `g` (`exclusive`: an exscan): `own` is this
    /// member's contribution of `n` bytes, and `buf` gets the result (an
    /// inclusive scan's holding `own` already, or being it; the first
    /// member's of an exclusive one untouched), folded as the blocking scan
    /// does ([`super::scan`]): in one round up to a payload half, else in
    /// rounds of `chunk` bytes (whole elements, at most a payload half),
    /// one scan of that part each.
    ///
    /// # Safety
    /// `own` readable, and `buf` writable and touched by nobody else, for
    /// `n` bytes until the collective completes.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn start_scan(
        e: &mut Engine,
        g: &mut Group,
        own: *const u8,
        (buf, n): (*mut u8, usize),
        op: crate::coll::exec::ByteOp,
        chunk: usize,
        exclusive: bool,
    ) -> Pending {
        debug_assert!(n <= g.payload || (1..=g.payload).contains(&chunk));
        let mut p = Pending::start_unpublished(g);
        if n > g.payload {
            let rounds = n.div_ceil(chunk) as u64;
            g.take(rounds - 1);
            p.last = p.s + rounds - 1;
            p.chunk = chunk;
        }
        let chain = super::scan_chains(e, g, n);
        p.kind = super::scan_kind(exclusive, chain, n);
        p.data = Some((buf, n, op));
        p.folds = Folds::Prefix {
            own,
            exclusive,
            chain,
        };
        p.poll(e);
        p
    }

    /// The bytes of `data` the round under way moves: `(offset, length)`.
    fn data_part(&self, n: usize) -> (usize, usize) {
        if self.chunk == 0 {
            return (0, n);
        }
        let rounds = n.div_ceil(self.chunk) as u64;
        let at = (rounds - 1 - (self.last - self.s)) as usize * self.chunk;
        (at, self.chunk.min(n - at))
    }

    /// Starts an allgather(v) of `g` (`block` `None`: member j's block
    /// lands in `recv[j]`, in rounds of a payload half) or an alltoall
    /// (`Some(block)`: `send` is one block of that length per member in
    /// group order, and member j's block for this member lands in
    /// `recv[j]`, in rounds of a member's share of a payload half). This
    /// member's own block is the caller's to copy.
    ///
    /// # Safety
    /// `send` readable and every `recv` segment but this member's writable
    /// for its length until the collective completes; `recv` segments
    /// overlap nothing.
    pub unsafe fn start_gather(
        e: &mut Engine,
        g: &mut Group,
        send: (*const u8, usize),
        recv: Vec<(*mut u8, usize)>,
        block: Option<usize>,
    ) -> Pending {
        let (send, piece) = match block {
            None => (Sends::Own(send.0, send.1), g.payload),
            Some(block) => (Sends::Blocks(send.0, block), g.payload / g.slots.len()),
        };
        Pending::start_rounds(e, g, send, recv, piece)
    }

    /// Starts an alltoallv of `g`'s blocks of up to `longest` bytes (at
    /// most [`alltoallv_longest`]; `send[j]` to member j, `recv[j]` from
    /// it), in one round; the longer blocks, and this member's own, are the
    /// caller's to move.
    ///
    /// # Safety
    /// As for [`Pending::start_gather`], every `send` segment readable.
    pub unsafe fn start_alltoallv(
        e: &mut Engine,
        g: &mut Group,
        send: Vec<(*const u8, usize)>,
        recv: Vec<(*mut u8, usize)>,
        longest: usize,
    ) -> Pending {
        debug_assert!(longest <= alltoallv_longest(e, g));
        Pending::start_rounds(e, g, Sends::Each(send, longest), recv, 0)
    }

    /// Starts a gatherv of `g` to member `root` of the blocks the area
    /// carries by `rooted` (this member's `send`; at the root, member j's
    /// lands in `recv[j]`), in one round; the others, and the root's own,
    /// are the caller's to move.
    ///
    /// # Safety
    /// As for [`Pending::start_gather`].
    pub unsafe fn start_gatherv(
        e: &mut Engine,
        g: &mut Group,
        root: usize,
        send: (*const u8, usize),
        recv: Vec<(*mut u8, usize)>,
        rooted: Rooted,
    ) -> Pending {
        Pending::start_rounds(e, g, Sends::ToRoot(root, send, rooted), recv, 0)
    }

    /// Starts a scatterv of `g` from member `root` of the blocks with a
    /// place in its half by `rooted` ([`Rooted::place`]; the root's `send[j]` for
    /// member j, which receives into `recv`), in one round; the other
    /// blocks, and the root's own, are the caller's to move.
    ///
    /// # Safety
    /// As for [`Pending::start_gather`].
    pub unsafe fn start_scatterv(
        e: &mut Engine,
        g: &mut Group,
        root: usize,
        send: Vec<(*const u8, usize)>,
        recv: (*mut u8, usize),
        rooted: Rooted,
    ) -> Pending {
        Pending::start_rounds(e, g, Sends::FromRoot(root, send, rooted), vec![recv], 0)
    }

    /// Starts a neighbourhood exchange of `g` in one round: `blocks`,
    /// `(peer, start, bytes)`, the first `sends` this member's blocks to
    /// each peer, the rest its segments for the blocks from each peer, each
    /// part sorted by peer (keeping the program's order within a peer); the
    /// blocks of a pair with no place in the area ([`neighbor_long`]) are
    /// the caller's to move.
    ///
    /// # Safety
    /// The first `sends` blocks readable and the others writable for their
    /// length until the collective completes; the others overlap nothing.
    pub unsafe fn start_neighbor(
        e: &mut Engine,
        g: &mut Group,
        blocks: Vec<(usize, *mut u8, usize)>,
        sends: usize,
        rooted: Rooted,
    ) -> Pending {
        let send = Sends::Neighbors {
            blocks,
            sends,
            rooted,
        };
        Pending::start_rounds(e, g, send, Vec::new(), 0)
    }

    /// Starts a broadcast of `g` from member `root` of `buf` (read at the
    /// root, written elsewhere), in rounds of a payload half.
    ///
    /// # Safety
    /// `buf` readable at the root, writable elsewhere, for its length until
    /// the collective completes.
    pub unsafe fn start_bcast(
        e: &mut Engine,
        g: &mut Group,
        root: usize,
        buf: (*mut u8, usize),
    ) -> Pending {
        let piece = g.payload;
        Pending::start_rounds(e, g, Sends::Bcast(root), vec![buf], piece)
    }

    /// Starts a data mover of `g` by single copy ([`Sends::Copy`]): an
    /// allgather(v) (`blocks` this member's one block; member j's lands in
    /// `recv[j]`), an alltoall (`blocks` one per member in group order;
    /// member j's block for this member lands in `recv[j]`), this member's
    /// own block the caller's to copy; or a broadcast from member `root`
    /// of `recv[0]` (`blocks` the same), read at the root, written
    /// elsewhere. Every member must come here or none.
    ///
    /// # Safety
    /// `blocks` readable and every `recv` segment but this member's
    /// writable for its length (a broadcast's root only reads its own)
    /// until the collective completes; `recv` segments overlap nothing.
    pub unsafe fn start_copy(
        e: &mut Engine,
        g: &mut Group,
        blocks: &[(*const u8, usize)],
        recv: Vec<(*mut u8, usize)>,
        of: Copied,
    ) -> Pending {
        let send = Sends::Copy {
            dir: single::directory(blocks),
            of,
        };
        Pending::start_rounds(e, g, send, recv, 0)
    }

    /// Starts an exscan of `g` by single copy ([`Copied::Scan`]), or
    /// (`inclusive`) a scan: `own` is this member's contribution
    /// of `n` bytes (it may be `out` itself: in place), `out` gets the
    /// result, folded by `op` on `elem`-byte elements.
    ///
    /// # Safety
    /// `own` readable, and `out` writable and touched by nobody else, for
    /// `n` bytes until the collective completes.
    pub unsafe fn start_scan_copy(
        e: &mut Engine,
        g: &mut Group,
        own: *const u8,
        (out, n): (*mut u8, usize),
        op: crate::coll::exec::ByteOp,
        elem: usize,
        inclusive: bool,
    ) -> Pending {
        let (m, me) = (g.slots.len(), g.me);
        // As the blocking twin: in place, only a member between the first
        // and the last writes what a later member reads.
        let kept = (own == out.cast_const() && me > 0 && me + 1 < m).then(|| {
            // SAFETY: the caller's contract: `n` readable bytes at `own`.
            AlignedBuf::from_bytes(unsafe { std::slice::from_raw_parts(own, n) })
        });
        let from = kept.as_ref().map_or(own, |k| k.bytes().as_ptr());
        let dir = single::directory(&[(from, n)]);
        let piece = single::scan_piece(elem);
        if inclusive {
            // SAFETY: the caller's contract: `n` bytes each, in place or
            // apart. Later members read the kept copy, if any, or `own`.
            unsafe { crate::coll::copy_own(own, out, n) };
        }
        let of = Copied::Scan {
            op,
            piece,
            _kept: kept,
            inclusive,
        };
        Pending::start_rounds(e, g, Sends::Copy { dir, of }, vec![(out, n)], 0)
    }

    /// Starts a reduction of `g` longer than a payload half ([`Reducing`]).
    ///
    /// # Safety
    /// The buffers of `long` valid as [`Reduction`] says until the
    /// collective completes.
    pub unsafe fn start_long(e: &mut Engine, g: &mut Group, mut long: Reducing) -> Pending {
        let mut p = Pending::start_unpublished(g);
        let rounds = long.rounds();
        g.take(rounds - 1);
        p.last = p.s + rounds - 1;
        p.kind = long.kind();
        if let Reduction::Root { root, .. } = long.what {
            // Only the root reads: the others go on once their chunks are
            // out, as in the blocking reduce (whose chunks `long` folds).
            p.folds = Folds::Root {
                root,
                commutative: true,
            };
        }
        long.first = p.s;
        p.long = Some(Box::new(long));
        p.poll(e);
        p
    }

    fn start_rounds(
        e: &mut Engine,
        g: &mut Group,
        send: Sends,
        recv: Vec<(*mut u8, usize)>,
        piece: usize,
    ) -> Pending {
        let gather = Gather {
            send,
            recv,
            piece,
            round: 0,
        };
        let rounds = gather.rounds() as u64;
        let mut p = Pending::start_unpublished(g);
        // The rounds' sequence numbers, the first taken above.
        g.take(rounds - 1);
        p.last = p.s + rounds - 1;
        p.gather = Some(gather);
        p.poll(e);
        p
    }

    fn start_unpublished(g: &mut Group) -> Pending {
        Pending {
            area: g.area,
            slots: g.slots.clone(),
            me: g.me,
            s: g.take(1),
            last: 0,
            completed: g.completed.clone(),
            storage: g.storage.clone(),
            mates: g.mates.clone(),
            published: false,
            done: false,
            kind: kind(K_BARRIER, 0, 0),
            data: None,
            chunk: 0,
            folds: Folds::All,
            gather: None,
            long: None,
            failed: None,
        }
    }

    /// Whether every other member bound to this rank's core has entered
    /// the round under way, one that every member waits through or a
    /// neighbourhood exchange's ([`Gather::mates_may_keep`]; not a rooted
    /// form's nor a long reduction's, whose rounds wait for some members
    /// only), and waits in kumi: then a
    /// rank waiting for this collective keeps its core rather than hand it
    /// to them
    /// ([`Engine::wait_until_with_mates`]). Unlike a blocking collective's
    /// members (`wait_all_reached`), a nonblocking one's may be computing
    /// after the start, so their published waits are looked at too.
    pub fn mates_wait(&self, e: &Engine) -> bool {
        let Some(mates) = &self.mates else {
            return false;
        };
        if !self.published
            || self.long.is_some()
            || !matches!(self.folds, Folds::All)
            || self.gather.as_ref().is_some_and(|g| !g.mates_may_keep())
        {
            return false;
        }
        let Some(shm) = e.shm() else { return false };
        let seg = shm.segment();
        all_reached_as(&seg.coll_area(self.area), mates, self.s, self.kind)
            && mates
                .iter()
                .all(|&j| seg.rank_block(j).awaits() != kumi_transport::shm::AWAITS_NOTHING)
    }

    /// Whether it is over (complete, or failed), as `poll` last found.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Advances; `true` once complete (or failed: `failed` says why).
    pub fn poll(&mut self, e: &mut Engine) -> bool {
        while !self.done {
            if !self.poll_round(e) {
                return false;
            }
        }
        true
    }

    /// Advances the round under way; `true` once it is complete.
    fn poll_round(&mut self, e: &mut Engine) -> bool {
        if let Folds::Prefix {
            own,
            exclusive,
            chain: true,
        } = self.folds
        {
            if self.me > 0 {
                return self.poll_link(e, own, exclusive);
            }
        }
        let s = self.s;
        let shm = e.shm().expect("shared memory");
        let a = shm.segment().coll_area(self.area);
        let mine = self.slots[self.me];
        if !self.published {
            if self.completed.load(Ordering::Relaxed) + 1 < s {
                return false;
            }
            let long = self
                .long
                .as_ref()
                .and_then(|l| l.contribution(s, self.me, self.slots.len()));
            // The storage this member writes, if any: a reduction's by its
            // length (a scan's last member's: none), a long reduction's by
            // its round's, a data mover's by its longest write.
            let from = match self.folds {
                Folds::Prefix { .. } if self.me + 1 == self.slots.len() => None,
                Folds::Prefix { own, .. } => Some(own),
                f if f.into_own(self.me) => None,
                _ => self.data.as_ref().map(|d| d.0.cast_const()),
            };
            let part = self.data.as_ref().map(|d| self.data_part(d.1));
            let written = match (part, long, &self.gather) {
                (Some((_, len)), _, _) => from.map(|_| len),
                (_, Some(n), _) => Some(n),
                (_, _, Some(g)) => g.longest_write(&a, s, self.me, self.slots.len()),
                _ => None,
            };
            if written.is_some_and(|n| !writable_seen(&a, &self.slots, s, n, &self.storage)) {
                return false;
            }
            if let (Some(l), Some(_)) = (&mut self.long, long) {
                l.write(&a, &self.slots, self.me, s);
            }
            if let (Some((at, len)), Some(from)) = (part, from) {
                // SAFETY: `data`'s length in bytes at `from` until
                // completion (the contracts of `start_allreduce`,
                // `start_reduce` and `start_scan`), this round's part of
                // them; only read here.
                let b = unsafe { std::slice::from_raw_parts(from.add(at), len) };
                a.write(mine, s, len, 0, b);
            }
            if let Some(g) = &self.gather {
                self.kind = g.write_own(&a, mine, s, self.me, self.slots.len());
            }
            let full = full_fence(shm, &self.slots);
            publish(&a, &self.slots, mine, s, self.kind, full, |j| shm.wake(j));
            self.published = true;
        }
        // The members a reduction folds (a reduce's member other than the
        // root, or an exclusive scan's first, reads nothing).
        let (upto, in_place) = self.folds.range(self.me, self.slots.len());
        let arrived = match &self.gather {
            Some(g) => g.arrived(&a, &self.slots, s, self.kind, self.me),
            None => all_reached_as(&a, &self.slots[..upto], s, self.kind),
        };
        if !arrived {
            return false;
        }
        let waited_all = match self.folds {
            Folds::All => self.gather.as_ref().is_none_or(Gather::waits_for_all),
            Folds::Root { root, .. } => root == self.me,
            Folds::Prefix { .. } => false,
        };
        if waited_all {
            saw_all(&self.storage.seen_all, s);
        }
        if let Some((buf, n, op)) = self.data.as_ref().filter(|_| upto > 0) {
            let (at, n) = self.data_part(*n);
            // SAFETY: as above; the contribution is in the area now, and
            // the result replaces what `buf` holds (this round's part).
            let b = unsafe { std::slice::from_raw_parts_mut(buf.add(at), n) };
            if self.folds.into_own(self.me) {
                fold_into_own(&a, &self.slots, self.me, s, b, &**op);
            } else {
                // `b = d0 ⊕ (d1 ⊕ (... ⊕ d_(upto-1)))`: the rightmost
                // operand is this member's own, in place, or copied first.
                let last = upto - 1;
                if !in_place {
                    b.copy_from_slice(a.bytes(self.slots[last], s, n, 0, n));
                }
                for k in (0..last).rev() {
                    op(a.bytes(self.slots[k], s, n, 0, n), b);
                }
            }
        }
        if let Some(g) = &mut self.gather {
            if let Err(x) = g.read_others(shm, &a, &self.slots, s, self.me) {
                // Its contribution is out and it reads no more of this
                // round, so the group's later collectives go on.
                self.completed.store(s, Ordering::Relaxed);
                self.failed = Some(Box::new(x));
                self.done = true;
                return true;
            }
            g.round += 1;
        }
        if let Some(l) = &mut self.long {
            if let Err(x) = l.arrived(shm, &a, &self.slots, self.me, s) {
                // The others wait for this member's next round until the
                // program ends or the deadlock detector reports them, as
                // after the blocking twin's error.
                self.failed = Some(Box::new(x));
                self.done = true;
                return true;
            }
        }
        self.round_complete(e);
        true
    }

    /// Notes the round under way complete here, and moves to the next.
    fn round_complete(&mut self, e: &mut Engine) {
        self.completed.store(self.s, Ordering::Relaxed);
        e.counters.area_rounds += 1;
        if self.s >= self.last {
            self.done = true;
        } else {
            self.s += 1;
            self.published = false;
        }
    }

    /// A round of a scan as a chain on a member after the first: once its
    /// storage is free and the member before it has published its
    /// inclusive prefix of this round's part, folds that prefix into its
    /// own part and publishes the result (the last member publishes
    /// none), then keeps the prefix itself when `exclusive`. `true` once
    /// the round is complete.
    fn poll_link(&mut self, e: &mut Engine, own: *const u8, exclusive: bool) -> bool {
        let s = self.s;
        if self.completed.load(Ordering::Relaxed) + 1 < s {
            return false;
        }
        let shm = e.shm().expect("shared memory");
        let a = shm.segment().coll_area(self.area);
        let (mine, left) = (self.slots[self.me], self.slots[self.me - 1]);
        let last = self.me + 1 == self.slots.len();
        let (buf, n, op) = self.data.as_ref().expect("a scan carries its vector");
        let (at, len) = self.data_part(*n);
        if !last && !writable_seen(&a, &self.slots, s, len, &self.storage) {
            return false;
        }
        if !reached_as(&a, left, s, self.kind) {
            return false;
        }
        let prefix = a.bytes(left, s, len, 0, len);
        // My inclusive prefix `P_(me-1) ⊕ d_me`, which the next member
        // folds: in `buf` when inclusive (it holds my own part already, and
        // the prefix is the result), else in my storage, where my own part
        // is written first (`own` may be `buf`: in place, so it is read
        // before `buf` is borrowed).
        if exclusive && !last {
            // SAFETY: `own` is readable for `n` bytes until completion
            // (`start_scan`'s contract); this round's part of them.
            let own = unsafe { std::slice::from_raw_parts(own.add(at), len) };
            a.write(mine, s, len, 0, own);
            // SAFETY: my own storage, writable (seen above) and not yet
            // published; no other slice of it lives.
            op(prefix, unsafe { a.bytes_mut(mine, s, len, 0, len) });
        }
        // SAFETY: `buf` is writable and touched by nobody else for `n`
        // bytes until completion (the contract; no slice of `own` lives
        // now); this round's part of it.
        let b = || unsafe { std::slice::from_raw_parts_mut(buf.add(at), len) };
        if !exclusive {
            let b = b();
            op(prefix, b);
            if !last {
                a.write(mine, s, len, 0, b);
            }
        }
        // Published before an exclusive result is copied, which the next
        // member need not wait for (`prefix` stays as it is until every
        // member has entered a later collective).
        let full = full_fence(shm, &self.slots);
        publish(&a, &self.slots, mine, s, self.kind, full, |j| shm.wake(j));
        if exclusive {
            b().copy_from_slice(prefix);
        }
        self.round_complete(e);
        true
    }
}
