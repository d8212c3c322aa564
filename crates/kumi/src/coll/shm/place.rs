//! Where a rooted collective's or a neighbourhood exchange's blocks lie in
//! a member's contribution to the collective area ([`Rooted`]): the rule
//! both ends of a block apply to the length each knows, so that they agree
//! on its way without a word, and a scatterv root's packed section
//! ([`Packed`]), whose card tells each member where its block lies.

use super::*;

/// Which blocks of a gather(v), scatter(v) or neighbourhood exchange go
/// through a group's area: those that fit (a payload half; a scatter's, a
/// place in the root's contribution, [`Rooted::spot`]; an exchange's,
/// [`neighbor_place`]) and, where the host chose
/// single copy, are shorter than `KUMI_COLL_COPY_MIN` (a gather's:
/// `KUMI_COLL_GATHER_COPY_MIN`). The others go as messages, from
/// `KUMI_COLL_COPY_MIN` by rendezvous and single copy where the host
/// chose it (`kumi_core::p2p::Limits::with_coll_copy`), which from there
/// were faster than the area (docs/BENCHMARKS.md, sessions 55 and 56).
/// Both ends of a block know its length, so they agree on its way.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rooted {
    pub(super) payload: usize,
    /// The longest block through the area.
    max: usize,
    /// A scatter's blocks all have one length, which every member knows,
    /// from this root ([`Rooted::equal`]).
    pub(super) equal: Option<usize>,
}

impl Rooted {
    /// The rule in `g` on this host for a scatter(v)'s or a neighbourhood
    /// exchange's blocks (single copy from `KUMI_COLL_COPY_MIN`).
    pub(crate) fn of(e: &Engine, g: &Group) -> Rooted {
        Rooted::with_copy_min(e, g, e.svc.coll.config().copy_min)
    }

    /// The rule for a gather(v)'s blocks (from
    /// `KUMI_COLL_GATHER_COPY_MIN`): the root reads each block once out of
    /// the area, and up to 64 KiB that was faster than single copy where
    /// the scatters' and exchanges' blocks were not (docs/BENCHMARKS.md,
    /// sessions 58 and 59).
    pub(crate) fn gather(e: &Engine, g: &Group) -> Rooted {
        Rooted::with_copy_min(e, g, e.svc.coll.config().gather_copy_min)
    }

    fn with_copy_min(e: &Engine, g: &Group, copy_min: usize) -> Rooted {
        let max = match e.svc.coll.config().single_copy {
            true => g.payload.min(copy_min.saturating_sub(1)),
            false => g.payload,
        };
        Rooted {
            payload: g.payload,
            max,
            equal: None,
        }
    }

    /// The rule for a scatter from member `root` whose blocks all have one
    /// length, which every member knows: they lie as the blocking
    /// scatter's ([`scatter_place`]), in a section of the halves
    /// (`coll_area::section`), so that a root runs ahead of its readers as
    /// there, not one collective.
    pub(crate) fn equal(self, root: usize) -> Rooted {
        Rooted {
            equal: Some(root),
            ..self
        }
    }

    /// The longest block through the area.
    pub(crate) fn longest(self) -> usize {
        self.max
    }

    /// Whether a gather's block of `n` bytes goes through the area (an
    /// empty one goes nowhere).
    pub(crate) fn carries(self, n: usize) -> bool {
        (1..=self.max).contains(&n)
    }

    /// Where a block of `n` bytes for member `j` of `m` goes in a
    /// contribution of one of each, if through the area ([`scatterv_place`],
    /// or [`scatter_place`] for a scatter's equal blocks): a neighbourhood
    /// exchange's ([`neighbor_place`]); a scatter(v) asks [`Rooted::spot`].
    pub(crate) fn place(self, j: usize, n: usize, m: usize) -> Option<(usize, usize)> {
        if n > self.max {
            return None;
        }
        match self.equal {
            Some(root) => scatter_place(j, n, m, root).filter(|&(total, _)| total <= self.payload),
            None => scatterv_place(j, n, m, self.payload),
        }
    }
}

/// Where a scatter(v)'s block lies in the root's contribution
/// ([`Rooted::spot`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Spot {
    /// At `(total, offset)`, as the area's `write`/`read` take them.
    At(usize, usize),
    /// In a scatterv's packed section ([`Packed`]), where the root's card
    /// there says.
    Packed,
}

impl Rooted {
    /// Where a scatter(v)'s block of `n` bytes for member `j` (of `m`) goes
    /// in the root's contribution, `None`: as a message. An equal scatter's
    /// as [`scatter_place`]; a scatterv's in the entry or a piece split
    /// evenly where it fits there ([`scatterv_place`]), else packed with the
    /// other long ones where it fits a member's share of the section
    /// ([`Packed`]): each member knows only its own length, so the root says
    /// where each block lies. The section is only as long as the blocks, so
    /// a root runs ahead of the readers of its last scatterv as it does of
    /// a scatter's (a whole half a call would wait for all of them).
    pub(crate) fn spot(self, j: usize, n: usize, m: usize) -> Option<Spot> {
        if n > self.max {
            return None;
        }
        match self.equal {
            Some(_) => self.place(j, n, m).map(|(total, off)| Spot::At(total, off)),
            None if n <= coll_area::piece_bytes(self.payload) / m => {
                scatterv_place(j, n, m, self.payload).map(|(total, off)| Spot::At(total, off))
            }
            None => Packed::fits(n, m, self.payload).then_some(Spot::Packed),
        }
    }
}

/// A scatterv's long blocks in one section of the root's halves: first the
/// card, a word per member (`offset | length << 32`, the root's own zero),
/// then the blocks side by side in member order, each from a line; the
/// section's length goes in the low bits of the root's kind
/// ([`coll_area::KIND_OWN`]), which a member reads once the root has
/// published. A lone block goes without a card, its length in the kind
/// with [`Packed::LONE`] (a line more would double the section of a block
/// of a power of two, as at two members). A block fits when a member's
/// share of a half, less the card, holds it, so that all of them together
/// fit one.
pub(crate) struct Packed {
    /// The section's bytes.
    pub(crate) total: usize,
    /// What the root's kind carries ([`Packed::find`]).
    pub(crate) number: u64,
    card: Vec<u8>,
}

impl Packed {
    /// The kind's number of a section that holds one block and no card.
    const LONE: u64 = 1 << 39;

    /// Bytes of the card of `m` members (whole lines).
    fn card_bytes(m: usize) -> usize {
        (8 * m).next_multiple_of(64)
    }

    fn fits(n: usize, m: usize, payload: usize) -> bool {
        n.next_multiple_of(64) <= payload.saturating_sub(Self::card_bytes(m)) / m
    }

    /// The shortest section: past a piece, so that the area places it in a
    /// half, not in the piece that holds the shorter blocks
    /// ([`coll_area::placement`]).
    fn least(payload: usize) -> usize {
        coll_area::piece_bytes(payload) + 64
    }

    /// The root's layout of the packed `blocks` (member, bytes; at least
    /// one) of `m` members in halves of `payload` bytes.
    pub(crate) fn layout(blocks: &[(usize, *const u8, usize)], m: usize, payload: usize) -> Packed {
        if let [(_, _, n)] = *blocks {
            return Packed {
                total: n.max(Self::least(payload)),
                number: Self::LONE | n as u64,
                card: Vec::new(),
            };
        }
        let mut card = vec![0u8; Self::card_bytes(m)];
        let mut at = card.len();
        for &(j, _, n) in blocks {
            let word = at as u64 | (n as u64) << 32;
            card[8 * j..8 * j + 8].copy_from_slice(&word.to_le_bytes());
            at += n.next_multiple_of(64);
        }
        let total = at.max(Self::least(payload));
        Packed {
            total,
            number: total as u64,
            card,
        }
    }

    /// Writes the packed `blocks` (and their card) as the root's
    /// contribution, laid out as `self`.
    pub(crate) fn write<F: FnMut(usize, usize, &[u8]) + ?Sized>(
        &self,
        put: &mut F,
        blocks: &[(usize, *const u8, usize)],
    ) {
        if !self.card.is_empty() {
            put(self.total, 0, &self.card);
        }
        let mut at = self.card.len();
        for &(_, p, n) in blocks {
            // SAFETY: the caller vouches for `n` readable bytes at `p`.
            put(self.total, at, unsafe { std::slice::from_raw_parts(p, n) });
            at += n.next_multiple_of(64);
        }
    }

    /// Where member `me`'s block of `n` bytes lies in the packed section
    /// of the root (of `slot`) for collective `s`, which it has published:
    /// `(total, offset)`; an error where the root's kind or card says
    /// another length (the program's counts disagree) or a place outside
    /// the section.
    pub(crate) fn find(
        a: &CollArea<'_>,
        slot: usize,
        s: u64,
        (me, m, n): (usize, usize, usize),
        payload: usize,
    ) -> Result<(usize, usize)> {
        let number = coll_area::own_number(a, slot, s);
        let sane = |total: usize| (Self::least(payload)..=payload).contains(&total);
        let (total, off, len) = if number & Self::LONE != 0 {
            let len = (number & !Self::LONE) as usize;
            (len.max(Self::least(payload)), 0, len)
        } else {
            let total = number as usize;
            let mut w = [0u8; 8];
            if sane(total) {
                a.read(slot, s, total, 8 * me, &mut w);
            }
            let word = u64::from_le_bytes(w);
            let off = (word & 0xffff_ffff) as usize;
            (total, off, (word >> 32) as usize)
        };
        let inside = off >= Self::card_bytes(m) || number & Self::LONE != 0;
        if len != n || !sane(total) || !inside || off + n > total {
            return Err(Error::Protocol(format!(
                "scatterv: the root sends {len} bytes through the collective area where \
                 this rank receives {n} (the counts at the root and here disagree)"
            )));
        }
        Ok((total, off))
    }
}

/// Where member `j`'s block of `n` bytes goes in the contribution of a
/// scatter's root `root` (of `m` members, every block as long): side by
/// side in member order, but for the root's own, which it keeps; `None`
/// where that overflows. As `(total, offset)` for the area's
/// `write`/`read`. Leaving the root's out halves the section at 2 members
/// (docs/BENCHMARKS.md, session 59).
fn scatter_place(j: usize, n: usize, m: usize, root: usize) -> Option<(usize, usize)> {
    let total = n.checked_mul(m.saturating_sub(1))?;
    Some((total, others_at(j, root, n)))
}

/// Where member `to`'s block of `n` bytes lies in a contribution of member
/// `from` that holds a block for every member but itself, side by side in
/// member order (a scatter's root's, an alltoall's member's).
pub(super) fn others_at(to: usize, from: usize, n: usize) -> usize {
    (to - usize::from(to > from)) * n
}

/// Where member `j`'s block of `n` bytes goes in the root's contribution to
/// a scatterv, whose members know only their own lengths: the entry's inline
/// bytes split evenly among the `m` members when it fits there, else a
/// piece split evenly, else the payload half (of `payload` bytes) split
/// evenly, else nowhere (it goes as a message). As `(total, offset)` for the
/// area's `write`/`read`, which place the contribution by `total`. Not in
/// the halves' smaller sections: those of one collective overlap
/// (`coll_area::section`), and blocks of several lengths would too (a
/// scatterv's root says where its long blocks lie instead, [`Packed`]).
pub(crate) fn scatterv_place(
    j: usize,
    n: usize,
    m: usize,
    payload: usize,
) -> Option<(usize, usize)> {
    // Each at most the storage it names (`payload` may be a little less
    // than a half, `Comm::alltoallv`'s room), and more than the one before.
    [coll_area::INLINE, coll_area::piece_bytes(payload), payload]
        .into_iter()
        .find(|&total| n <= total / m)
        .map(|total| (total, j * (total / m)))
}

/// Where a nonblocking neighbourhood exchange's blocks from one member to
/// member `j`, `sum` bytes together, travel in the writer's contribution:
/// side by side behind an 8-byte [`pair_word`], in the place
/// [`Rooted::place`] finds for them among `m` members; `None`: too long,
/// they go as messages. Both ends know every length (MPI requires them to
/// agree), so both find the same place, or both none.
pub(crate) fn neighbor_place(
    j: usize,
    sum: usize,
    m: usize,
    rooted: Rooted,
) -> Option<(usize, usize)> {
    rooted.place(j, PAIR_WORD + sum, m)
}

/// Bytes of a [`pair_word`].
const PAIR_WORD: usize = 8;

/// The word in front of a nonblocking neighbourhood exchange's blocks to
/// member `j` in collective `s` (see [`neighbor_place`]): the collective's
/// number and a hash of `j` and the blocks' lengths, so that a reader that
/// expects other lengths, or finds what an earlier collective left there,
/// reports it instead of taking those bytes for its blocks.
pub(crate) fn pair_word(s: u64, j: usize, lens: impl Iterator<Item = usize>) -> u64 {
    // FNV-1a over the words.
    let h = std::iter::once(j).chain(lens).fold(0x811c_9dc5u32, |h, x| {
        (h ^ x as u32).wrapping_mul(0x0100_0193)
    });
    (s << 32) | u64::from(h)
}

/// The peers of `pairs` (blocks `(peer, _, bytes)` sorted by peer) whose
/// blocks together have no place in the area ([`neighbor_place`]), `dest`
/// giving the member they go to (the peer for sends, this member for
/// receives).
pub(crate) fn neighbor_long<P: Copy>(
    pairs: &[(usize, P, usize)],
    dest: impl Fn(usize) -> usize,
    m: usize,
    rooted: Rooted,
) -> Vec<usize> {
    pairs
        .chunk_by(|x, y| x.0 == y.0)
        .filter(|pair| {
            let sum = pair.iter().map(|b| b.2).sum();
            neighbor_place(dest(pair[0].0), sum, m, rooted).is_none()
        })
        .map(|pair| pair[0].0)
        .collect()
}
