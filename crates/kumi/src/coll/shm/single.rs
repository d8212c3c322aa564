//! Single-copy collectives inside one host: the area carries only buffer
//! addresses and the data moves once, straight between the ranks' own
//! buffers (`process_vm_readv`/`writev`); the parent module's doc says how
//! each collective divides the work.

use super::*;

thread_local! {
    /// Two pieces of scratch for `allreduce_single_copy`, kept between calls.
    static SCRATCH: std::cell::RefCell<[AlignedBuf; 2]> = Default::default();
}

/// Publishes my buffer's address and length for collective `s`.
fn publish_addr(
    e: &mut Guard<'_>,
    g: &Group,
    s: u64,
    addr: usize,
    len: usize,
    info: WaitInfo,
) -> Result<()> {
    publish_card(e, g, s, [addr as u64, len as u64], info)
}

/// Publishes `N` words (addresses, lengths) for collective `s`, in its entry
/// (`coll_area::INLINE` bytes).
fn publish_card<const N: usize>(
    e: &mut Guard<'_>,
    g: &Group,
    s: u64,
    words: [u64; N],
    info: WaitInfo,
) -> Result<()> {
    contribute(e, g, s, &card(words)[..8 * N], info)
}

/// `N` words (addresses, lengths) as a member publishes them in its entry
/// (the first `8 * N` bytes).
pub(super) fn card<const N: usize>(words: [u64; N]) -> [u8; 64] {
    let mut card = [0u8; 64];
    for (i, w) in words.iter().enumerate() {
        card[8 * i..8 * i + 8].copy_from_slice(&w.to_le_bytes());
    }
    card
}

/// Member `k`'s pid and the `N` words it published for collective `s`.
fn peer_card<const N: usize>(
    a: &CollArea<'_>,
    e: &Engine,
    g: &Group,
    k: usize,
    s: u64,
) -> (i32, [u64; N]) {
    card_of(a, e.shm().expect("shared memory"), g.slots[k], s)
}

/// The pid of the rank of `slot` and the `N` words it published for
/// collective `s`, as its whole contribution.
fn card_of<const N: usize>(
    a: &CollArea<'_>,
    shm: &ShmTransport,
    slot: usize,
    s: u64,
) -> (i32, [u64; N]) {
    card_at(a, shm, slot, s, (8 * N, 0))
}

/// The pid of the rank of `slot` and the `N` words ([`card`]) it wrote at
/// `(total, off)` of its contribution to collective `s` (as
/// [`CollArea::read`] places them).
fn card_at<const N: usize>(
    a: &CollArea<'_>,
    shm: &ShmTransport,
    slot: usize,
    s: u64,
    (total, off): (usize, usize),
) -> (i32, [u64; N]) {
    let mut card = [0u8; 64];
    a.read(slot, s, total, off, &mut card[..8 * N]);
    let pid = shm.segment().rank_block(slot).pid() as i32;
    let words = std::array::from_fn(|i| {
        u64::from_le_bytes(card[8 * i..8 * i + 8].try_into().expect("8 bytes"))
    });
    (pid, words)
}

/// The pid of member `j` (of `slot`) and the address it published for
/// collective `s`, after checking that the length it published beside it
/// is `n` (`what` names the collective in the error).
fn sized_card(
    a: &CollArea<'_>,
    shm: &ShmTransport,
    (slot, j): (usize, usize),
    s: u64,
    n: usize,
    what: &str,
) -> Result<(i32, u64)> {
    let (pid, [addr, len]) = card_of(a, shm, slot, s);
    if len != n as u64 {
        return Err(Error::Protocol(format!(
            "{what} of {n} bytes met one of {len} (member {j})"
        )));
    }
    Ok((pid, addr))
}

/// Publishes `buf`'s address for collective `s`, waits for every member's,
/// and returns them, after checking that every length is `buf`'s (`what`
/// names the collective in the error).
fn exchange_bufs(
    e: &mut Guard<'_>,
    g: &Group,
    s: u64,
    buf: &[u8],
    what: &str,
    info: WaitInfo,
) -> Result<Peers> {
    publish_addr(e, g, s, buf.as_ptr() as usize, buf.len(), info)?;
    wait_all(e, g, s, info)?;
    let shm = e.shm().expect("shared memory");
    Peers::published(
        shm,
        &shm.segment().coll_area(g.area),
        &g.slots,
        g.me,
        s,
        buf.len(),
        what,
    )
}

fn copy_error(what: &str, n: usize, peer: usize, err: std::io::Error) -> Error {
    Error::Io(std::io::Error::new(
        err.kind(),
        format!(
            "collective single copy ({what} {n} bytes, local rank {peer}): {err}; \
             set KUMI_SINGLE_COPY=off if the kernel refuses process_vm_readv"
        ),
    ))
}

/// Every member's buffer of a single-copy collective, as each published it
/// (pid and address, in group order; every one as long), with the members' slots (which
/// errors name) and my index: what reads and writes between the buffers
/// need, from a blocking collective or a nonblocking one ([`Pending`]).
pub(super) struct Peers {
    bufs: Vec<(i32, u64)>,
    slots: Arc<[usize]>,
    me: usize,
}

impl Peers {
    /// The buffers the members of `slots` published for collective `s`
    /// (every one has), after checking that each is `n` bytes long (`what`
    /// names the collective in the error).
    pub(super) fn published(
        shm: &ShmTransport,
        a: &CollArea<'_>,
        slots: &Arc<[usize]>,
        me: usize,
        s: u64,
        n: usize,
        what: &str,
    ) -> Result<Peers> {
        let bufs = slots
            .iter()
            .enumerate()
            .map(|(j, &slot)| sized_card(a, shm, (slot, j), s, n, what))
            .collect::<Result<_>>()?;
        Ok(Peers {
            bufs,
            slots: slots.clone(),
            me,
        })
    }

    fn members(&self) -> usize {
        self.bufs.len()
    }

    /// Reads `into.len()` bytes at byte `at` of member `j`'s buffer.
    fn read(&self, j: usize, at: usize, into: &mut [u8]) -> Result<()> {
        let (pid, addr) = self.bufs[j];
        cma::read_from(pid, addr + at as u64, into)
            .map_err(|x| copy_error("reading", into.len(), self.slots[j], x))
    }

    /// Writes `from` at byte `at` of member `j`'s buffer.
    fn write(&self, j: usize, at: usize, from: &[u8]) -> Result<()> {
        let (pid, addr) = self.bufs[j];
        cma::write_to(pid, addr + at as u64, from)
            .map_err(|x| copy_error("writing", from.len(), self.slots[j], x))
    }

    /// The other members, each starting after me (see [`fold_piece`]).
    fn others(&self) -> impl Iterator<Item = usize> + '_ {
        let m = self.members();
        (1..m).map(move |d| (self.me + d) % m)
    }
}

/// Broadcast of `buf` from member `root` by single copy out of the root's
/// buffer (see the module doc).
///
/// The copying is shared evenly: of m members, each reader copies all but
/// one m-th block of the message out of the root's buffer, and the root
/// writes that block into each reader's buffer meanwhile, so every member
/// copies (m-1)/m of the message. (With every reader copying it all, the
/// root idled and the readers sharing a core with another reader took twice
/// as long: oversubscribed, the cores go round the members, and the busiest
/// core sets the time.)
pub(crate) fn bcast_single_copy(
    e: &mut Guard<'_>,
    g: &mut Group,
    buf: &mut [u8],
    root: usize,
    info: WaitInfo,
) -> Result<()> {
    let n = buf.len();
    let s = begin(e, g, 2, info)?;
    g.kind = kind(K_BCAST_COPY, root, n);
    let (k, m) = (g.area, g.slots.len());
    publish_addr(e, g, s, buf.as_ptr() as usize, n, info)?;
    if g.me == root {
        // Write each reader's block as soon as its buffer is known.
        let mut left: Vec<usize> = (0..m).filter(|&j| j != root).collect();
        while !left.is_empty() {
            wait(e, info, k, |a| {
                left.iter().any(|&j| reached_as(a, g.slots[j], s, g.kind))
            })?;
            let a = area(e, k);
            let ready: Vec<usize> = left
                .iter()
                .copied()
                .filter(|&j| reached_as(&a, g.slots[j], s, g.kind))
                .collect();
            let shm = e.shm().expect("shared memory");
            for &j in &ready {
                bcast_write_block(&a, shm, (g.slots[j], j, m), s, buf)?;
            }
            left.retain(|j| !ready.contains(j));
        }
        publish_at(e, g, s + 1);
        // Our buffer must stay as it is until every reader is done.
        wait_all(e, g, s + 1, info)?;
        g.finish(s + 1);
        return Ok(());
    }
    wait(e, info, k, |a| reached_as(a, g.slots[root], s, g.kind))?;
    {
        let shm = e.shm().expect("shared memory");
        bcast_read(&area(e, k), shm, (g.slots[root], g.me, m), s, buf)?;
    }
    publish_at(e, g, s + 1);
    // The root writes my block; done when it publishes.
    wait(e, info, k, |a| reached_as(a, g.slots[root], s + 1, g.kind))?;
    g.finish(s + 1);
    Ok(())
}

/// The block of a single-copy broadcast of `n` bytes among `m` members
/// that the root writes into member j's buffer: the j-th of m, cache-line
/// aligned (the last one takes the rest; the root's own is empty of use).
fn bcast_block(n: usize, m: usize, j: usize) -> std::ops::Range<usize> {
    let b = (n / m) & !63;
    let start = (j * b).min(n);
    start..if j + 1 == m { n } else { (start + b).min(n) }
}

/// The root's half of a single-copy broadcast of `buf` for one reader:
/// writes the reader's block ([`bcast_block`]) into the buffer it
/// published for collective `s`; `(slot, j, m)`: the reader's slot, its
/// index and the members' count.
pub(super) fn bcast_write_block(
    a: &CollArea<'_>,
    shm: &ShmTransport,
    (slot, j, m): (usize, usize, usize),
    s: u64,
    buf: &[u8],
) -> Result<()> {
    let n = buf.len();
    let (pid, addr) = sized_card(a, shm, (slot, j), s, n, "bcast")?;
    let b = bcast_block(n, m, j);
    if !b.is_empty() {
        cma::write_to(pid, addr + b.start as u64, &buf[b.clone()])
            .map_err(|x| copy_error("writing", b.len(), slot, x))?;
    }
    Ok(())
}

/// A reader's half of a single-copy broadcast into `buf`: reads all but
/// its own block ([`bcast_block`], which the root writes) out of the
/// buffer the root (`slot`) published for collective `s`; `me` is the
/// reader's index, `m` the members' count.
pub(super) fn bcast_read(
    a: &CollArea<'_>,
    shm: &ShmTransport,
    (slot, me, m): (usize, usize, usize),
    s: u64,
    buf: &mut [u8],
) -> Result<()> {
    let n = buf.len();
    let (pid, addr) = sized_card(a, shm, (slot, me), s, n, "bcast")?;
    let mine = bcast_block(n, m, me);
    for part in [0..mine.start, mine.end..n] {
        if !part.is_empty() {
            let len = part.len();
            cma::read_from(pid, addr + part.start as u64, &mut buf[part])
                .map_err(|x| copy_error("reading", len, slot, x))?;
        }
    }
    Ok(())
}

/// An allgather(v) by single copy: every member publishes its block's
/// address, then reads every other member's block straight into its own
/// `recv` segment ([`read_blocks`]). The own segment is left to the caller.
///
/// # Safety
/// Each `recv` segment but this member's writable for its length during the
/// call, overlapping nothing.
pub(crate) unsafe fn allgather_single_copy(
    e: &mut Guard<'_>,
    g: &mut Group,
    mine: &[u8],
    recv: &[(*mut u8, usize)],
    info: WaitInfo,
) -> Result<()> {
    let s = begin(e, g, 2, info)?;
    g.kind = kind(K_ALLGATHER_COPY, 0, recv.iter().map(|r| r.1).sum());
    publish_addr(e, g, s, mine.as_ptr() as usize, mine.len(), info)?;
    // SAFETY: the caller's contract.
    unsafe { read_blocks(e, g, s, recv, Directory::Own, info) }
}

/// An alltoall by single copy: every member publishes where its block for
/// each member lies (address and length, 16 bytes a member: the caller
/// checks that they fit a payload half), then reads the block each other
/// member has for it straight into its `recv` segment ([`read_blocks`]).
/// The own block is left to the caller. (Every member must come here or
/// none: the caller decides by what all know alike.)
///
/// # Safety
/// Each `send` segment readable and each `recv` segment but this member's
/// writable for its length during the call, the latter overlapping nothing.
pub(crate) unsafe fn alltoall_single_copy(
    e: &mut Guard<'_>,
    g: &mut Group,
    send: &[(*const u8, usize)],
    recv: &[(*mut u8, usize)],
    info: WaitInfo,
) -> Result<()> {
    let s = begin(e, g, 2, info)?;
    g.kind = kind(K_ALLTOALL_COPY, 0, recv.iter().map(|r| r.1).sum());
    contribute(e, g, s, &directory(send), info)?;
    // SAFETY: the caller's contract.
    unsafe { read_blocks(e, g, s, recv, Directory::ToEach, info) }
}

/// What a member of a single-copy allgather or alltoall publishes: where
/// each of its blocks lies, (address, length) as a [`card`] holds them, one
/// pair a block (an allgather's one, an alltoall's one per member).
pub(super) fn directory(blocks: &[(*const u8, usize)]) -> Vec<u8> {
    blocks
        .iter()
        .flat_map(|&(at, n)| [at as u64, n as u64])
        .flat_map(u64::to_le_bytes)
        .collect()
}

/// Which block of a member's [`directory`] another member reads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Directory {
    /// Its one block (an allgather).
    Own,
    /// The one at the reader's index (an alltoall).
    ToEach,
}

impl Directory {
    /// The pid of the member of `slot` (of `m`) and where its block for
    /// member `me` lies, as it published for collective `s`.
    fn entry(
        self,
        a: &CollArea<'_>,
        shm: &ShmTransport,
        slot: usize,
        s: u64,
        (m, me): (usize, usize),
    ) -> (i32, u64, usize) {
        let (entries, at) = match self {
            Directory::Own => (1, 0),
            Directory::ToEach => (m, me),
        };
        let (pid, [addr, len]) = card_at(a, shm, slot, s, (16 * entries, 16 * at));
        (pid, addr, len as usize)
    }

    /// The copying of a single-copy allgather or alltoall, once every
    /// member has published its [`directory`] for collective `s`: reads
    /// into each `recv` segment but this member's (`me` of `slots`) the
    /// block member j has for it (the length must be the segment's),
    /// members in turn from the one after itself (members that all began
    /// with member 0 would queue on its page-table lock, see
    /// [`fold_piece`]).
    ///
    /// # Safety
    /// Each `recv` segment but this member's writable for its length,
    /// overlapping nothing.
    pub(super) unsafe fn read_each(
        self,
        a: &CollArea<'_>,
        shm: &ShmTransport,
        (slots, me): (&[usize], usize),
        s: u64,
        recv: &[(*mut u8, usize)],
    ) -> Result<()> {
        let m = slots.len();
        for j in (1..m).map(|d| (me + d) % m) {
            let slot = slots[j];
            let (pid, addr, len) = self.entry(a, shm, slot, s, (m, me));
            let (at, room) = recv[j];
            if len != room {
                let what = match self {
                    Directory::Own => "allgather",
                    Directory::ToEach => "alltoall",
                };
                return Err(Error::Protocol(format!(
                    "{what}: member {j} has {len} bytes for member {me}, which expects {room}"
                )));
            }
            if len > 0 {
                // SAFETY: the caller vouches for segment j: writable for its
                // length, overlapping nothing, not this member's own.
                let into = unsafe { std::slice::from_raw_parts_mut(at, room) };
                cma::read_from(pid, addr, into).map_err(|x| copy_error("reading", len, slot, x))?;
            }
        }
        Ok(())
    }
}

/// The reading half of a blocking single-copy allgather or alltoall, once
/// this member has published for collective `s`: waits for every member's
/// [`directory`], copies ([`Directory::read_each`]), then publishes `s + 1`
/// and waits until every member has (each one's blocks must stay as they
/// are until all have read).
///
/// # Safety
/// As for [`Directory::read_each`].
unsafe fn read_blocks(
    e: &mut Guard<'_>,
    g: &mut Group,
    s: u64,
    recv: &[(*mut u8, usize)],
    dir: Directory,
    info: WaitInfo,
) -> Result<()> {
    wait_all(e, g, s, info)?;
    {
        let shm = e.shm().expect("shared memory");
        let a = shm.segment().coll_area(g.area);
        // SAFETY: the caller's contract.
        unsafe { dir.read_each(&a, shm, (&g.slots, g.me), s, recv) }?;
    }
    publish_at(e, g, s + 1);
    wait_all(e, g, s + 1, info)?;
    g.finish(s + 1);
    Ok(())
}

/// Reads into `into` the block whose [`card`] (address, length) the member
/// of `slot` wrote at `(total, off)` of its contribution to collective `s`
/// (an alltoallv's blocks by single copy, [`super::alltoallv`]), after
/// checking that the length is `into`'s.
pub(super) fn read_carded(
    a: &CollArea<'_>,
    shm: &ShmTransport,
    slot: usize,
    s: u64,
    (total, off): (usize, usize),
    into: &mut [u8],
) -> Result<()> {
    let (pid, [addr, len]) = card_at(a, shm, slot, s, (total, off));
    let len = len as usize;
    if len != into.len() {
        return Err(Error::Protocol(format!(
            "alltoallv: local rank {slot} sends a block of {len} bytes where {} are expected",
            into.len()
        )));
    }
    cma::read_from(pid, addr, into).map_err(|x| copy_error("reading", len, slot, x))
}

/// Folds one piece of every member's buffer into `acc`: `read(j, into)`
/// reads member j's (of `m`; I am `me`); `mine` is my own (`None`: it is in
/// `acc` already, which only a commutative operation allows); `t` is
/// scratch of the piece's length. In rank order right to left as [`fold`]
/// does (`d0 ⊕ (d1 ⊕ (...))`), or, for a commutative operation, the others'
/// first (the first straight into `acc` when it does not hold mine), each
/// member starting after itself: the kernel locks a process's page table
/// for every page it copies, and members that all began with member 0
/// queued on that lock (docs/BENCHMARKS.md, session 7).
#[allow(clippy::too_many_arguments)]
fn fold_piece(
    (m, me): (usize, usize),
    acc: &mut [u8],
    mine: Option<&[u8]>,
    t: &mut [u8],
    op: &Combine<'_>,
    commutative: bool,
    mut read: impl FnMut(usize, &mut [u8]) -> Result<()>,
) -> Result<()> {
    if commutative {
        let mut others = (1..m).map(|d| (me + d) % m);
        if mine.is_some() {
            read(others.next().expect("two members at least"), acc)?;
        }
        for j in others {
            read(j, t)?;
            op(t, acc);
        }
        if let Some(p) = mine {
            op(p, acc);
        }
        return Ok(());
    }
    let mine = mine.expect("a rank-order fold keeps my piece apart");
    for j in (0..m).rev() {
        match (j == m - 1, j == me) {
            (true, true) => acc.copy_from_slice(mine),
            (true, false) => read(j, acc)?,
            (false, true) => op(mine, acc),
            (false, false) => {
                read(j, t)?;
                op(t, acc);
            }
        }
    }
    Ok(())
}

/// Runs `f` with the two pieces of scratch, each at least `len` bytes.
fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [u8], &mut [u8]) -> R) -> R {
    SCRATCH.with_borrow_mut(|[r, t]| {
        for b in [&mut *r, &mut *t] {
            if b.bytes().len() < len {
                *b = AlignedBuf::zeroed(len);
            }
        }
        f(&mut r.bytes_mut()[..len], &mut t.bytes_mut()[..len])
    })
}

/// The piece a single-copy reduction folds at a time, in whole elements:
/// small enough to stay in cache (`KUMI_COLL_PIECE`).
pub(super) fn piece_of(e: &Engine, elem: usize) -> usize {
    (e.svc.coll.config().allreduce_piece / elem).max(1) * elem
}

/// The piece a single-copy scan folds at a time, in whole elements: it
/// folds one member's vector at a time, not every member's as an
/// allreduce does, so a piece eight times as long still stays in cache,
/// and a system call a quarter MiB is cheaper than one per 32 KiB
/// (measured: docs/BENCHMARKS.md, session 63).
pub(super) fn scan_piece(elem: usize) -> usize {
    ((256 << 10) / elem).max(1) * elem
}

/// Block j of an allreduce of `n` bytes of `elem`-byte elements among `m`
/// members (whole elements, as even as possible): member j's to reduce.
fn allreduce_block(n: usize, elem: usize, m: usize, j: usize) -> std::ops::Range<usize> {
    block_of(n / elem, m, elem, j)
}

/// How many rounds of publishing a single-copy allreduce takes: a
/// commutative one ends once every member has written its folded block
/// into every buffer (write-through); a rank-order one needs a round more,
/// in which everyone reads the folded blocks.
pub(super) fn allreduce_rounds(commutative: bool) -> u64 {
    if commutative {
        2
    } else {
        3
    }
}

/// An allreduce's first phase, once every member's `buf` is known: this
/// member folds its block of every buffer, in pieces read into scratch
/// kept from call to call (a fresh pair would cost zeroing and page faults
/// every time). Commutative: every other member's piece folds straight
/// into mine, and the reduced piece, while in this core's cache, is
/// written into every other member's buffer (write-through, module doc).
/// Rank order: into scratch (my piece is folded after the others'), then
/// into place, for [`allreduce_read_blocks`] to fetch.
pub(super) fn allreduce_fold(
    peers: &Peers,
    buf: &mut [u8],
    elem: usize,
    op: &Combine<'_>,
    commutative: bool,
    piece: usize,
) -> Result<()> {
    let (m, me) = (peers.members(), peers.me);
    let mine = allreduce_block(buf.len(), elem, m, me);
    with_scratch(piece.min(mine.len()), |r, t| {
        let mut off = mine.start;
        while off < mine.end {
            let len = piece.min(mine.end - off);
            let (r, t) = (&mut r[..len], &mut t[..len]);
            let read = |j: usize, into: &mut [u8]| peers.read(j, off, into);
            if commutative {
                fold_piece((m, me), &mut buf[off..off + len], None, t, op, true, read)?;
                for j in peers.others() {
                    peers.write(j, off, &buf[off..off + len])?;
                }
            } else {
                fold_piece((m, me), r, Some(&buf[off..off + len]), t, op, false, read)?;
                buf[off..off + len].copy_from_slice(r);
            }
            off += len;
        }
        Ok(())
    })
}

/// A rank-order allreduce's second phase, once every member has folded its
/// block: reads the others' finished blocks into `buf`.
pub(super) fn allreduce_read_blocks(peers: &Peers, buf: &mut [u8], elem: usize) -> Result<()> {
    let (n, m) = (buf.len(), peers.members());
    for j in peers.others() {
        let b = allreduce_block(n, elem, m, j);
        if !b.is_empty() {
            let at = b.start;
            peers.read(j, at, &mut buf[b])?;
        }
    }
    Ok(())
}

/// Allreduce of `buf` (`elem`-byte elements) by single copy between the
/// members' buffers: reduce-scatter, then allgather (see the module doc).
// The collective's arguments, as the other entry points take them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn allreduce_single_copy(
    e: &mut Guard<'_>,
    g: &mut Group,
    buf: &mut [u8],
    elem: usize,
    op: &Combine<'_>,
    commutative: bool,
    info: WaitInfo,
) -> Result<()> {
    let n = buf.len();
    let rounds = allreduce_rounds(commutative);
    let s = begin(e, g, rounds, info)?;
    g.kind = kind(K_ALLREDUCE_COPY, 0, n);
    let peers = exchange_bufs(e, g, s, buf, "allreduce", info)?;
    allreduce_fold(&peers, buf, elem, op, commutative, piece_of(e, elem))?;
    publish_at(e, g, s + 1);
    wait_all(e, g, s + 1, info)?;
    if !commutative {
        allreduce_read_blocks(&peers, buf, elem)?;
        publish_at(e, g, s + 2);
        // Others may still read my block until they publish.
        wait_all(e, g, s + 2, info)?;
    }
    g.finish(s + rounds - 1);
    Ok(())
}

/// A reduce-scatter's fold, once every member's `send` is known: this
/// member reads bytes `mine` (its block) of every other member's, a piece
/// at a time through scratch, and folds them into `recv` in rank order as
/// [`fold`] does (in any order for a commutative operation).
#[allow(clippy::too_many_arguments)]
pub(super) fn reduce_scatter_fold(
    peers: &Peers,
    send: &[u8],
    mine: std::ops::Range<usize>,
    recv: &mut [u8],
    op: &Combine<'_>,
    commutative: bool,
    piece: usize,
) -> Result<()> {
    let who = (peers.members(), peers.me);
    let out = &mut recv[..mine.len()];
    with_scratch(piece.min(out.len()), |_, t| {
        let mut off = 0;
        while off < out.len() {
            let len = piece.min(out.len() - off);
            let at = mine.start + off;
            let (acc, t) = (&mut out[off..off + len], &mut t[..len]);
            let read = |j: usize, into: &mut [u8]| peers.read(j, at, into);
            fold_piece(
                who,
                acc,
                Some(&send[at..at + len]),
                t,
                op,
                commutative,
                read,
            )?;
            off += len;
        }
        Ok(())
    })
}

/// Reduce-scatter by single copy, for contributions longer than a payload
/// half: every member publishes its `send` buffer, member i reads bytes
/// `mine` (its block) of every other member's and folds them into `recv`
/// ([`reduce_scatter_fold`]); a second round tells every member that
/// nobody reads its buffer any more. Each member reads (m-1)/m of its
/// block's bytes from others and no byte goes through the area or the
/// rings.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reduce_scatter_single_copy(
    e: &mut Guard<'_>,
    g: &mut Group,
    send: &[u8],
    mine: std::ops::Range<usize>,
    recv: &mut [u8],
    elem: usize,
    op: &Combine<'_>,
    commutative: bool,
    info: WaitInfo,
) -> Result<()> {
    let n = send.len();
    let s = begin(e, g, 2, info)?;
    g.kind = kind(K_REDUCE_SCATTER_COPY, 0, n);
    let peers = exchange_bufs(e, g, s, send, "reduce-scatter", info)?;
    let piece = piece_of(e, elem);
    reduce_scatter_fold(&peers, send, mine, recv, op, commutative, piece)?;
    publish_at(e, g, s + 1);
    // Others may still read my buffer until they publish.
    wait_all(e, g, s + 1, info)?;
    g.finish(s + 1);
    Ok(())
}

/// Reduce by single copy, for contributions of `n` bytes longer than a
/// payload half: every member publishes where its contribution is (`own`;
/// at the root, `None` when it is already in `out`, in place) and the root
/// also where the result goes (`out`, empty elsewhere). Member i folds block
/// i of every contribution, a piece at a time (into the root's `out`
/// directly at the root, through scratch elsewhere), in rank order as
/// [`fold`] does (any order for a commutative operation), and writes each
/// finished piece into the root's `out` while it is in cache. Block i of
/// the root's buffers is only touched by member i, so in place is safe. No
/// member copies its whole contribution, and no byte goes through the area
/// or the rings; a second round tells the root its result is complete and
/// every member that nobody reads its contribution any more.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reduce_single_copy(
    e: &mut Guard<'_>,
    g: &mut Group,
    own: Option<&[u8]>,
    out: &mut [u8],
    elem: usize,
    op: &Combine<'_>,
    commutative: bool,
    root: usize,
    info: WaitInfo,
) -> Result<()> {
    let n = own.map_or(out.len(), <[u8]>::len);
    let s = begin(e, g, 2, info)?;
    g.kind = kind(K_REDUCE_COPY, root, n);
    let (k, m, me) = (g.area, g.slots.len(), g.me);
    let from = own.map_or(out.as_ptr(), <[u8]>::as_ptr) as u64;
    let to = if me == root { out.as_ptr() as u64 } else { 0 };
    publish_card(e, g, s, [from, n as u64, to], info)?;
    wait_all(e, g, s, info)?;
    let peers: Vec<(i32, [u64; 3])> = {
        let a = area(e, k);
        (0..m).map(|j| peer_card(&a, e, g, j, s)).collect()
    };
    if let Some(j) = peers.iter().position(|p| p.1[1] != n as u64) {
        return Err(Error::Protocol(format!(
            "reduce of {n} bytes met one of {} (member {j})",
            peers[j].1[1]
        )));
    }
    let (root_pid, result) = (peers[root].0, peers[root].1[2]);
    let mine = block_of(n / elem, m, elem, me);
    let piece = piece_of(e, elem);
    with_scratch(piece.min(mine.len()), |r, t| -> Result<()> {
        let mut at = mine.start;
        while at < mine.end {
            let len = piece.min(mine.end - at);
            let read = |j: usize, into: &mut [u8]| {
                let (pid, [addr, ..]) = peers[j];
                cma::read_from(pid, addr + at as u64, into)
                    .map_err(|x| copy_error("reading", len, g.slots[j], x))
            };
            let t = &mut t[..len];
            // Where the result piece forms (at the root its own result
            // buffer, elsewhere scratch) and my contribution's piece: `None`
            // when it is already there (in place at the root). A rank-order
            // fold needs my piece after the others', so it keeps a copy.
            let (acc, mine_piece): (&mut [u8], Option<&[u8]>) = match own {
                Some(own) if me == root => (&mut out[at..at + len], Some(&own[at..at + len])),
                Some(own) => (&mut r[..len], Some(&own[at..at + len])),
                None if commutative => (&mut out[at..at + len], None),
                None => {
                    let r = &mut r[..len];
                    r.copy_from_slice(&out[at..at + len]);
                    (&mut out[at..at + len], Some(&*r))
                }
            };
            fold_piece((m, me), acc, mine_piece, t, op, commutative, read)?;
            if me != root {
                cma::write_to(root_pid, result + at as u64, acc)
                    .map_err(|x| copy_error("writing", len, g.slots[root], x))?;
            }
            at += len;
        }
        Ok(())
    })?;
    publish_at(e, g, s + 1);
    wait_all(e, g, s + 1, info)?;
    g.finish(s + 1);
    Ok(())
}

/// The reading half of a scan by single copy into `out`, once the members
/// before this one (`me` of `slots`) have published where their
/// contributions lie for collective `s` (each `out.len()` bytes, checked),
/// folding right to left (`d0 ⊕ (d1 ⊕ (...))`), `piece` bytes at a time
/// through scratch. An exscan (`inclusive` false) reads the left
/// neighbour's straight into `out` and folds the others into it; an
/// inclusive scan finds this member's own contribution in `out` already
/// and folds every one before it in, so no vector-long prefix is formed
/// and folded once more.
pub(super) fn scan_fold(
    a: &CollArea<'_>,
    shm: &ShmTransport,
    (slots, me): (&[usize], usize),
    s: u64,
    out: &mut [u8],
    (piece, inclusive): (usize, bool),
    op: &Combine<'_>,
) -> Result<()> {
    let n = out.len();
    let peers = slots[..me]
        .iter()
        .enumerate()
        .map(|(j, &slot)| sized_card(a, shm, (slot, j), s, n, "exscan"))
        .collect::<Result<Vec<_>>>()?;
    let read = |j: usize, at: usize, into: &mut [u8]| {
        let (pid, addr) = peers[j];
        cma::read_from(pid, addr + at as u64, into)
            .map_err(|x| copy_error("reading", into.len(), slots[j], x))
    };
    // The rightmost operand: an exscan's is the left neighbour's, read
    // whole; the others fold into it.
    let folded = match inclusive {
        true => me,
        false if me > 0 => {
            read(me - 1, 0, out)?;
            me - 1
        }
        false => 0,
    };
    if folded > 0 {
        with_scratch(piece.min(n), |_, t| -> Result<()> {
            let mut at = 0;
            while at < n {
                let len = piece.min(n - at);
                let t = &mut t[..len];
                for j in (0..folded).rev() {
                    read(j, at, t)?;
                    op(t, &mut out[at..at + len]);
                }
                at += len;
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// An exscan (or, `inclusive`, a scan) of `out.len()` bytes of
/// `elem`-byte elements by single copy: every member publishes where its
/// contribution lies (`own`; in place, `out` itself, or a copy of it where
/// the member writes `out` while a later member may still read it), an
/// inclusive scan's member copies its own into `out`, then each waits for
/// the members before it only and folds theirs into `out`
/// ([`scan_fold`]), in the order the area's scan folds. A second round
/// tells each member that nobody reads its contribution any more. Where
/// the host chose single copy, this beats the area's two copies across
/// cores from `KUMI_COLL_COPY_MIN` (docs/BENCHMARKS.md, session 55).
pub(crate) fn scan_single_copy(
    e: &mut Guard<'_>,
    g: &mut Group,
    (own, out): (Option<&[u8]>, &mut [u8]),
    (elem, inclusive): (usize, bool),
    op: &Combine<'_>,
    info: WaitInfo,
) -> Result<()> {
    let n = out.len();
    let (m, me) = (g.slots.len(), g.me);
    let s = begin(e, g, 2, info)?;
    g.kind = kind(K_EXSCAN_COPY, 0, n);
    // In place, the first member never writes `out` and nobody reads the
    // last one's; a member between them keeps its contribution apart.
    let kept = (own.is_none() && me > 0 && me + 1 < m).then(|| AlignedBuf::from_bytes(out));
    let from = match (&kept, own) {
        (Some(k), _) => k.bytes().as_ptr(),
        (None, Some(o)) => o.as_ptr(),
        (None, None) => out.as_ptr(),
    };
    publish_card(e, g, s, [from as u64, n as u64], info)?;
    if let (true, Some(own)) = (inclusive, own) {
        out.copy_from_slice(own);
    }
    wait(e, info, g.area, |a| {
        g.slots[..me].iter().all(|&j| reached_as(a, j, s, g.kind))
    })?;
    {
        let shm = e.shm().expect("shared memory");
        let a = shm.segment().coll_area(g.area);
        let how = (scan_piece(elem), inclusive);
        scan_fold(&a, shm, (&g.slots, me), s, out, how, op)?;
    }
    publish_at(e, g, s + 1);
    // Later members may read my contribution until they publish.
    wait_all(e, g, s + 1, info)?;
    g.finish(s + 1);
    Ok(())
}
