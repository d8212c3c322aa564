//! Collectives longer than a payload half inside one host: which way they
//! go (single copy or the area in chunks), the per-group trial that
//! decides it under `auto`, and the chunked area paths themselves.

use super::*;

/// Where a group's `LongCopy::Auto` trial stands.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Long {
    /// Long calls `0..TRIAL_CALLS` of the group: one each way untimed (they
    /// pay for first touches: scratch buffers, the area's payload pages),
    /// then the two ways alternately, timed. `best`: the fastest seconds per
    /// byte each way so far (single copy, area).
    Trial {
        call: u8,
        best: [f64; 2],
    },
    Single,
    Area,
}

/// Long calls a group's trial takes: two untimed, then [`TRIAL_TIMED`]
/// timed each way.
const TRIAL_CALLS: u8 = 2 + 2 * TRIAL_TIMED;

/// Timed calls each way in a trial. One was not enough: a single copy's
/// second call can still be warming up and lose to the area it later beats
/// (docs/BENCHMARKS.md, session 16). The fastest of three each way is past
/// the warm-up and the machine's hiccups.
const TRIAL_TIMED: u8 = 3;

impl Long {
    pub(super) const TRIAL: Long = Long::Trial {
        call: 0,
        best: [f64::INFINITY; 2],
    };
}

/// Whether [`allreduce_area`] can run on `g` with elements of `elem` bytes:
/// a chunk holds at least one element per member in a payload half.
pub(crate) fn area_fits(g: &Group, elem: usize) -> bool {
    elem > 0 && g.slots.len() * elem <= g.payload
}

/// A commutative allreduce longer than a payload half, by single copy or
/// through the area as `KUMI_COLL_ALLREDUCE_COPY` says (`auto`: [`tried`];
/// through the area whenever single copy is off). Why a trial: which is
/// faster depends on the machine, on how long its kernel takes to pin pages
/// against how fast its `memcpy` is (docs/BENCHMARKS.md, sessions 6 and 11).
pub(crate) fn allreduce_long(
    e: &mut Guard<'_>,
    g: &mut Group,
    buf: &mut [u8],
    elem: usize,
    op: &Combine<'_>,
    info: WaitInfo,
) -> Result<()> {
    let n = buf.len();
    let mut run = |e: &mut Guard<'_>, g: &mut Group, area: bool| {
        if area {
            allreduce_area(e, g, buf, elem, op, info)
        } else {
            allreduce_single_copy(e, g, buf, elem, op, true, info)
        }
    };
    let cfg = e.svc.coll.config();
    match (cfg.allreduce_copy, cfg.single_copy) {
        (LongCopy::Auto, true) => tried(e, g, |g| &mut g.long, n, Whose::Last, info, run),
        (LongCopy::Single, true) => run(e, g, false),
        _ => run(e, g, true),
    }
}

/// A reduce longer than a payload half (arguments as
/// [`reduce_single_copy`]): a commutative one by single copy or through the
/// area as `KUMI_COLL_ALLREDUCE_COPY` says (`auto`: [`tried`], apart from the
/// allreduce's trial), a rank-order one by single copy; `None` when neither
/// may run (single copy off, and not commutative): then it goes by messages.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reduce_long(
    e: &mut Guard<'_>,
    g: &mut Group,
    own: Option<&[u8]>,
    out: &mut [u8],
    elem: usize,
    op: &Combine<'_>,
    commutative: bool,
    root: usize,
    info: WaitInfo,
) -> Option<Result<()>> {
    let n = own.map_or(out.len(), <[u8]>::len);
    let cfg = e.svc.coll.config();
    let single = cfg.single_copy;
    if !commutative || elem > g.payload {
        return single
            .then(|| reduce_single_copy(e, g, own, out, elem, op, commutative, root, info));
    }
    let mut run = |e: &mut Guard<'_>, g: &mut Group, area: bool| {
        if area {
            reduce_area(e, g, own, out, elem, op, root, info)
        } else {
            reduce_single_copy(e, g, own, out, elem, op, true, root, info)
        }
    };
    Some(match (cfg.allreduce_copy, single) {
        (LongCopy::Auto, true) => tried(e, g, |g| &mut g.long_reduce, n, Whose::Root, info, run),
        (LongCopy::Single, true) => run(e, g, false),
        _ => run(e, g, true),
    })
}

/// Commutative reduce longer than a payload half through the area (arguments
/// as [`reduce_single_copy`]), a chunk of at most a payload half per
/// collective number: every member but the root copies its chunk into its
/// half, and the root folds them straight into its result buffer (holding
/// its own chunk), so the root folds chunk c while the others copy chunk
/// c + 1 into their other half. No system call and no page pinning; the
/// root does all the folding.
#[allow(clippy::too_many_arguments)]
fn reduce_area(
    e: &mut Guard<'_>,
    g: &mut Group,
    own: Option<&[u8]>,
    out: &mut [u8],
    elem: usize,
    op: &Combine<'_>,
    root: usize,
    info: WaitInfo,
) -> Result<()> {
    let n = own.map_or(out.len(), <[u8]>::len);
    let chunk = (g.payload / elem) * elem;
    g.kind = kind(K_REDUCE_AREA, root, n);
    let mut off = 0;
    while off < n {
        let len = chunk.min(n - off);
        let s = begin(e, g, 1, info)?;
        if g.me == root {
            let acc = &mut out[off..off + len];
            if let Some(own) = own {
                acc.copy_from_slice(&own[off..off + len]);
            }
            // Nothing to contribute: publishing `s` tells the others this
            // rank is done with the half of `s - 1`.
            publish_at(e, g, s);
            wait_all(e, g, s, info)?;
            let a = area(e, g.area);
            for j in (0..g.slots.len()).filter(|&j| j != root) {
                op(a.bytes(g.slots[j], s, len, 0, len), acc);
            }
        } else {
            let own = own.expect("a contribution off the root");
            contribute(e, g, s, &own[off..off + len], info)?;
        }
        g.finish(s);
        off += len;
    }
    Ok(())
}

/// A broadcast longer than a payload half with `KUMI_COLL_BCAST_COPY=auto`
/// and a core per member: the group times single copy and the chunked area
/// as [`allreduce_long`] does and keeps the faster (as there, the winner
/// depends on the machine: docs/BENCHMARKS.md, sessions 6 and 11).
pub(crate) fn bcast_long(
    e: &mut Guard<'_>,
    g: &mut Group,
    buf: &mut [u8],
    root: usize,
    info: WaitInfo,
) -> Result<()> {
    tried(
        e,
        g,
        |g| &mut g.long_bcast,
        buf.len(),
        Whose::Last,
        info,
        |e, g, area| {
            if area {
                bcast(e, g, buf, root, info)
            } else {
                bcast_single_copy(e, g, buf, root, info)
            }
        },
    )
}

/// Which member's time is a trial's: where every member waits for all the
/// others, the last to arrive (the shortest time: an earlier arrival's
/// counts its wait for the others); in a reduce, where only the root waits
/// for them and the others may leave as soon as their data is out, the
/// root's (the longest).
#[derive(Clone, Copy)]
enum Whose {
    Last,
    Root,
}

/// Runs one long collective of `n` bytes the way `state` says (`run(..,
/// true)`: through the area; `false`: by single copy), and moves a trial on
/// ([`Long::Trial`]): calls 0 (single copy) and 1 (area) untimed, then
/// single copy on even calls and the area on odd ones, each timed in
/// seconds per byte; after the last the members agree on each way's time
/// (see [`Whose`]) by an allreduce of their fastest, and keep the faster way.
fn tried(
    e: &mut Guard<'_>,
    g: &mut Group,
    state: fn(&mut Group) -> &mut Long,
    n: usize,
    whose: Whose,
    info: WaitInfo,
    mut run: impl FnMut(&mut Guard<'_>, &mut Group, bool) -> Result<()>,
) -> Result<()> {
    let (call, mut best) = match *state(g) {
        Long::Single => return run(e, g, false),
        Long::Area => return run(e, g, true),
        Long::Trial { call, best } => (call, best),
    };
    let area = call % 2 == 1;
    let t = Instant::now();
    run(e, g, area)?;
    if call >= 2 {
        let per_byte = t.elapsed().as_secs_f64() / n.max(1) as f64;
        let way = &mut best[usize::from(area)];
        *way = way.min(per_byte);
    }
    *state(g) = match call + 1 {
        TRIAL_CALLS => {
            let agree = match whose {
                Whose::Last => Op::<f64>::min(),
                Whose::Root => Op::<f64>::max(),
            };
            let f = |a: &[u8], b: &mut [u8]| {
                agree
                    .f
                    .call(bytemuck::cast_slice(a), bytemuck::cast_slice_mut(b))
            };
            allreduce(e, g, bytemuck::cast_slice_mut(&mut best), &f, info)?;
            if best[1] < best[0] {
                Long::Area
            } else {
                Long::Single
            }
        }
        next => Long::Trial { call: next, best },
    };
    Ok(())
}

/// Commutative allreduce of `buf` through the area, in chunks of at most a
/// payload half: each member copies into its half the blocks of the chunk
/// that the others fold, folds its own block from everyone's half into its
/// buffer, publishes that result in its other half, and copies the others'
/// results out. Two collective numbers per chunk; no system call and no
/// page pinning, for four copies of every byte where single copy makes two
/// (`area_fits` must hold).
fn allreduce_area(
    e: &mut Guard<'_>,
    g: &mut Group,
    buf: &mut [u8],
    elem: usize,
    op: &Combine<'_>,
    info: WaitInfo,
) -> Result<()> {
    let (n, m, me) = (buf.len(), g.slots.len(), g.me);
    // Whole elements, the same number of bytes per member (the last chunk
    // may be shorter), so a chunk fits a payload half.
    let chunk = (g.payload / (m * elem)) * m * elem;
    debug_assert!(chunk > 0, "area_fits");
    g.kind = kind(K_ALLREDUCE_AREA, 0, n);
    let mut off = 0;
    while off < n {
        let len = chunk.min(n - off);
        // Member j folds block j of the chunk.
        let block = |j: usize| block_of(len / elem, m, elem, j);
        let s = begin(e, g, 2, info)?;
        // The inputs are this chunk's contribution to `s`, the results its
        // contribution to `s + 1`.
        let (inputs, results) = (s, s + 1);
        wait_writable(e, g, s, len, info)?;
        {
            let a = area(e, g.area);
            for j in (0..m).filter(|&j| j != me) {
                let b = block(j);
                a.write(
                    g.my_slot(),
                    inputs,
                    len,
                    b.start,
                    &buf[off + b.start..off + b.end],
                );
            }
        }
        publish_at(e, g, s);
        wait_all(e, g, s, info)?;
        let mine = block(me);
        {
            let a = area(e, g.area);
            let dst = &mut buf[off + mine.start..off + mine.end];
            for k in 1..m {
                let j = (me + k) % m;
                op(
                    a.bytes(g.slots[j], inputs, len, mine.start, mine.len()),
                    dst,
                );
            }
            // The results' half is free: every member has entered `s`, so
            // all are done with collective `s - 1`, the last to use it.
            a.write(g.my_slot(), results, len, mine.start, dst);
        }
        publish_at(e, g, s + 1);
        wait_all(e, g, s + 1, info)?;
        {
            let a = area(e, g.area);
            for j in (0..m).filter(|&j| j != me) {
                let b = block(j);
                a.read(
                    g.slots[j],
                    results,
                    len,
                    b.start,
                    &mut buf[off + b.start..off + b.end],
                );
            }
        }
        g.finish(s + 1);
        off += len;
    }
    Ok(())
}
