//! Back-to-back collectives with random delays, every result checked: the
//! stress test of the shared-memory collective areas (and of the message
//! algorithms, with `KUMI_COLL_SHM=off`). Every rank draws the same sequence
//! of operations, communicators, roots and sizes (a common seed) and its own
//! delays; sizes straddle the area's storage (entry, piece, payload half)
//! and the chunked broadcast; nonblocking collectives stay in flight while blocking ones
//! start. A barrier is checked by a message sent just before it: after
//! the barrier the receiver must find it with `iprobe` (the barrier orders it).
//! Rank 0 prints `coll_stress: all checks passed on <n> ranks`.
//!
//! `kumi run -n 8 target/release/coll_stress [iterations] [delays]`

use kumi::{Comm, Error, Op};
use kumi_tests::Rng;
use std::time::{Duration, Instant};

type R = Result<(), Error>;

fn fail(m: String) -> Error {
    Error::Protocol(m)
}

fn mat(r: usize, it: u64) -> [i64; 4] {
    [(r as i64 % 3) + 1, 1, (it % 2) as i64, 1]
}

fn val(r: usize, it: u64, i: usize) -> u64 {
    (r as u64 + 1) * 1_000_003 + it * 7919 + i as u64
}

/// Element `i` of rank `r`'s block in the rooted cases of iteration `it`.
fn blk(r: usize, i: usize, it: u64) -> u64 {
    (r * 7_919 + i) as u64 ^ it
}

/// The rooted cases' blocks: a length drawn from `n`, this rank's block,
/// and every rank's in rank order.
fn blocks(p: usize, me: usize, it: u64, n: usize) -> (usize, Vec<u64>, Vec<u64>) {
    let block = [1usize, 3, 64, 700, 5000][n % 5];
    let own = (0..block).map(|i| blk(me, i, it)).collect();
    let all = (0..p)
        .flat_map(|r| (0..block).map(move |i| blk(r, i, it)))
        .collect();
    (block, own, all)
}

/// The element-wise sum of the `block`-long blocks of `all`.
fn sum_of_blocks(all: &[u64], block: usize) -> Vec<u64> {
    let mut sum = vec![0u64; block];
    for b in all.chunks(block) {
        for (s, x) in sum.iter_mut().zip(b) {
            *s = s.wrapping_add(*x);
        }
    }
    sum
}

fn delay(rng: &mut Rng, on: bool) {
    if !on {
        return;
    }
    match rng.below(64) {
        // Long enough for waiting ranks to go to sleep (after ~2 ms).
        0 => std::thread::sleep(Duration::from_millis(3)),
        1..=8 => std::thread::sleep(Duration::from_micros(rng.below(300))),
        _ => {
            let t = Instant::now();
            let d = Duration::from_micros(rng.below(20));
            while t.elapsed() < d {
                std::hint::spin_loop();
            }
        }
    }
}

fn one(c: &Comm, it: u64, common: &mut Rng, mine: &mut Rng, delays: bool) -> R {
    let (p, me) = (c.size(), c.rank());
    let root = common.below(p as u64) as usize;
    let op = common.below(12);
    // 20 000 elements: beyond a payload half, so that long allreduces run
    // (by single copy, through the area, or the trial between them).
    let sizes = [0usize, 1, 2, 3, 17, 600, 8191, 9000, 20_000];
    let n = sizes[common.below(sizes.len() as u64) as usize];
    delay(mine, delays);
    match op {
        0 => {
            // A message to the next rank, then the barrier: afterwards the
            // next rank must see it without waiting.
            let next = ((me + 1) % p) as i32;
            let prev = ((me + p - 1) % p) as i32;
            c.send(&[it], next, 5)?;
            c.barrier()?;
            if c.iprobe(prev, 5)?.is_none() {
                return Err(fail(format!(
                    "iteration {it}: rank {me} left the barrier before rank {prev}'s message sent before it arrived"
                )));
            }
            let mut got = [0u64];
            c.recv(&mut got, prev, 5)?;
            if got[0] != it {
                return Err(fail(format!(
                    "iteration {it}: stale barrier message {got:?}"
                )));
            }
        }
        1 => {
            let mut buf: Vec<u64> = (0..n).map(|i| val(me, it, i)).collect();
            c.allreduce_in_place(&mut buf, &Op::sum())?;
            for (i, &v) in buf.iter().enumerate() {
                let want: u64 = (0..p).map(|r| val(r, it, i)).sum();
                if v != want {
                    return Err(fail(format!(
                        "iteration {it}: allreduce of {n} on rank {me}: element {i} is {v}, want {want}"
                    )));
                }
            }
        }
        2 => {
            let m = n % 300 + 1;
            let o = kumi_tests::matmul();
            let mut want = [mat(0, it)];
            for r in 1..p {
                let mut next = [mat(r, it)];
                o.apply(&want, &mut next)?;
                want = next;
            }
            let mut out = vec![[0i64; 4]; m];
            c.allreduce(&vec![mat(me, it); m], &mut out, &o)?;
            if out.iter().any(|x| *x != want[0]) {
                return Err(fail(format!(
                    "iteration {it}: matrix allreduce on rank {me}: {:?}, want {want:?}",
                    out[0]
                )));
            }
            let mut out = vec![[0i64; 4]; m];
            c.reduce(&vec![mat(me, it); m], &mut out, &o, root)?;
            if me == root && out.iter().any(|x| *x != want[0]) {
                return Err(fail(format!(
                    "iteration {it}: matrix reduce at {root}: {:?}, want {want:?}",
                    out[0]
                )));
            }
            // Scans of the same product: the prefix up to each rank, in
            // and out of place, inclusive and exclusive.
            let upto = |k: usize| -> Result<[i64; 4], Error> {
                let mut acc = [mat(0, it)];
                for r in 1..k {
                    let mut next = [mat(r, it)];
                    o.apply(&acc, &mut next)?;
                    acc = next;
                }
                Ok(acc[0])
            };
            let mut out = vec![[0i64; 4]; m];
            c.scan(&vec![mat(me, it); m], &mut out, &o)?;
            let mut ex = vec![mat(me, it); m];
            c.exscan_in_place(&mut ex, &o)?;
            let (inc, exc) = (upto(me + 1)?, if me > 0 { upto(me)? } else { mat(me, it) });
            if out.iter().any(|x| *x != inc) || ex.iter().any(|x| *x != exc) {
                return Err(fail(format!(
                    "iteration {it}: matrix scan on rank {me}: {:?} / {:?}, want {inc:?} / {exc:?}",
                    out[0], ex[0]
                )));
            }
        }
        3 => {
            // Either side of an entry's inline bytes (48) and of a piece
            // (4 KiB up to 8 ranks), then chunked.
            let len = [0usize, 5, 48, 49, 4096, 4097, 70_000, 200_003][n % 8];
            let mut buf = vec![0u8; len];
            if me == root {
                kumi_tests::fill(&mut buf, root, it);
            }
            c.bcast(&mut buf, root)?;
            let mut want = vec![0u8; len];
            kumi_tests::fill(&mut want, root, it);
            if buf != want {
                let at = buf.iter().zip(&want).position(|(a, b)| a != b);
                return Err(fail(format!(
                    "iteration {it}: bcast of {len} from {root} wrong on rank {me} at byte {at:?}"
                )));
            }
        }
        4 => {
            let block = [1usize, 8, 512, 3000][n % 4];
            let send: Vec<u32> = (0..p * block)
                .map(|i| (me * 1_000_000 + (i / block) * 1000 + i % block) as u32 ^ it as u32)
                .collect();
            let mut recv = vec![0u32; p * block];
            c.alltoall(&send, &mut recv)?;
            for r in 0..p {
                for i in 0..block {
                    let want = (r * 1_000_000 + me * 1000 + i) as u32 ^ it as u32;
                    if recv[r * block + i] != want {
                        return Err(fail(format!(
                            "iteration {it}: alltoall block {block} on rank {me} from {r}, element {i}: {} want {want}",
                            recv[r * block + i]
                        )));
                    }
                }
            }
        }
        8 => {
            // Alltoallv of blocks of every kind at once inside a host: none,
            // a few bytes (the area's control line), kilobytes (its payload),
            // more than a place there (in rounds through it).
            let len = |f: usize, t: usize| [0usize, 1, 3, 700, 40_000][(f * 3 + t + n) % 5];
            let sc: Vec<usize> = (0..p).map(|t| len(me, t)).collect();
            let rc: Vec<usize> = (0..p).map(|f| len(f, me)).collect();
            let v =
                |f: usize, t: usize, i: usize| ((f * 1_000 + t) * 100_003 + i) as u32 ^ it as u32;
            let send: Vec<u32> = (0..p)
                .flat_map(|t| (0..sc[t]).map(move |i| v(me, t, i)))
                .collect();
            let want: Vec<u32> = (0..p)
                .flat_map(|f| (0..rc[f]).map(move |i| v(f, me, i)))
                .collect();
            let mut got = vec![0u32; want.len()];
            c.alltoallv(&send, &sc, &mut got, &rc)?;
            if got != want {
                let at = got.iter().zip(&want).position(|(a, b)| a != b);
                return Err(fail(format!(
                    "iteration {it}: alltoallv of {rc:?} on rank {me} wrong at element {at:?}"
                )));
            }
        }
        5 => {
            // Rooted movement and a non-commutative reduce-scatter, small
            // (through the area) and beyond a payload (messages).
            let (block, mine, all) = blocks(p, me, it, n);
            let v = |r: usize, i: usize| blk(r, i, it);
            let mut got = vec![0u64; if me == root { p * block } else { 0 }];
            c.gather(&mine, &mut got, root)?;
            if me == root && got != all {
                return Err(fail(format!(
                    "iteration {it}: gather of {block} at {root} wrong"
                )));
            }
            let mut part = vec![0u64; block];
            c.scatter(if me == root { &all[..] } else { &[] }, &mut part, root)?;
            if part != mine {
                return Err(fail(format!(
                    "iteration {it}: scatter of {block} from {root} wrong on rank {me}"
                )));
            }
            // Blocks of uneven length, some beyond a payload when long.
            let counts: Vec<usize> = (0..p).map(|r| (block * (r % 3)) / 2 + r % 2).collect();
            let want: Vec<u64> = (0..p)
                .flat_map(|r| (0..counts[r]).map(move |i| v(r, i)))
                .collect();
            let own: Vec<u64> = (0..counts[me]).map(|i| v(me, i)).collect();
            let mut got = vec![0u64; want.len()];
            c.allgatherv(&own, &mut got, &counts)?;
            if got != want {
                return Err(fail(format!(
                    "iteration {it}: allgatherv of {counts:?} wrong on rank {me}"
                )));
            }
            // Gatherv and scatterv of those blocks, one of them beyond a
            // payload half when long: through the area and as messages in
            // one call.
            let vc: Vec<usize> = (0..p)
                .map(|r| {
                    if block == 5000 && r == p / 2 {
                        20_000
                    } else {
                        counts[r]
                    }
                })
                .collect();
            let want: Vec<u64> = (0..p)
                .flat_map(|r| (0..vc[r]).map(move |i| v(r, i)))
                .collect();
            let own: Vec<u64> = (0..vc[me]).map(|i| v(me, i)).collect();
            let mut got = vec![0u64; if me == root { want.len() } else { 0 }];
            c.gatherv(&own, &mut got, &vc, root)?;
            if me == root && got != want {
                return Err(fail(format!(
                    "iteration {it}: gatherv of {vc:?} at {root} wrong"
                )));
            }
            let mut part = vec![0u64; vc[me]];
            c.scatterv(
                if me == root { &want[..] } else { &[] },
                &vc,
                &mut part,
                root,
            )?;
            if part != own {
                return Err(fail(format!(
                    "iteration {it}: scatterv of {vc:?} from {root} wrong on rank {me}"
                )));
            }
            let m = block % 40 + 1;
            let o = kumi_tests::matmul();
            let send: Vec<[i64; 4]> = (0..p * m).map(|k| mat(me + k, it)).collect();
            let mut out = vec![[0i64; 4]; m];
            c.reduce_scatter_block(&send, &mut out, &o)?;
            for (k, x) in out.iter().enumerate() {
                let at = me * m + k;
                let mut want = [mat(at, it)];
                for r in 1..p {
                    let mut next = [mat(r + at, it)];
                    o.apply(&want, &mut next)?;
                    want = next;
                }
                if *x != want[0] {
                    return Err(fail(format!(
                        "iteration {it}: reduce_scatter_block element {k} on rank {me}: {x:?}, want {want:?}"
                    )));
                }
            }
        }
        7 => {
            // Reduce-scatter of uneven blocks, beyond a payload half when
            // long (single copy out of the others' buffers inside a host):
            // non-commutative (matrices, in rank order) and commutative.
            let o = kumi_tests::matmul();
            let big = n.is_multiple_of(2);
            let rc: Vec<usize> = (0..p)
                .map(|r| if big { 4000 + 500 * (r % 3) } else { r % 3 + 1 })
                .collect();
            let total: usize = rc.iter().sum();
            let start: usize = rc[..me].iter().sum();
            let send: Vec<[i64; 4]> = (0..total).map(|k| mat(me + k, it)).collect();
            let mut out = vec![[0i64; 4]; rc[me]];
            c.reduce_scatter(&send, &mut out, &rc, &o)?;
            for (k, x) in out.iter().enumerate() {
                let at = start + k;
                let mut want = [mat(at, it)];
                for r in 1..p {
                    let mut next = [mat(r + at, it)];
                    o.apply(&want, &mut next)?;
                    want = next;
                }
                if *x != want[0] {
                    return Err(fail(format!(
                        "iteration {it}: reduce_scatter of {rc:?} element {k} on rank {me}: {x:?}, want {want:?}"
                    )));
                }
            }
            let v = |r: usize, k: usize| ((r as u64 + 1) * 1_000_003 + k as u64) ^ it;
            let send: Vec<u64> = (0..total).map(|k| v(me, k)).collect();
            let mut out = vec![0u64; rc[me]];
            c.reduce_scatter(&send, &mut out, &rc, &Op::sum())?;
            for (k, x) in out.iter().enumerate() {
                let want = (0..p).fold(0u64, |a, r| a.wrapping_add(v(r, start + k)));
                if *x != want {
                    return Err(fail(format!(
                        "iteration {it}: summed reduce_scatter of {rc:?} element {k} on rank {me}: {x}, want {want}"
                    )));
                }
            }
        }
        6 => {
            // Nonblocking ones in flight while blocking ones start; waited
            // for in a drawn order.
            let m = n % 40 + 1;
            let a = c.iallreduce((0..m).map(|i| val(me, it, i)).collect(), &Op::sum())?;
            let b = c.ibarrier()?;
            let mut x = [me as u64];
            c.allreduce_in_place(&mut x, &Op::sum())?;
            let (v, _) = if root.is_multiple_of(2) {
                let v = a.wait()?;
                (v, b.wait()?)
            } else {
                let w = b.wait()?;
                (a.wait()?, w)
            };
            let want: Vec<u64> = (0..m)
                .map(|i| (0..p).map(|r| val(r, it, i)).sum())
                .collect();
            if v != want || x[0] != (p * (p - 1) / 2) as u64 {
                return Err(fail(format!(
                    "iteration {it}: iallreduce/allreduce on rank {me}: {v:?} {x:?}"
                )));
            }
        }
        9 => {
            // Nonblocking data movers, a reduce and scans, several in
            // flight at once and a blocking broadcast among them, waited for in a
            // drawn order: short ones (whose root, or senders, run up to the
            // area's depth ahead of the readers) and long ones (in rounds).
            let len = [0usize, 5, 48, 49, 4096, 4097, 70_000][n % 7];
            let (block, own, all) = blocks(p, me, it, n);
            let other = (root + 1) % p;
            let (mut b1, mut b2) = (vec![0u8; len], vec![0u8; len % 100]);
            if me == root {
                kumi_tests::fill(&mut b1, root, it);
            }
            if me == other {
                kumi_tests::fill(&mut b2, other, it);
            }
            let mut gathered = vec![0u64; if me == root { p * block } else { 0 }];
            let (mut part, mut every) = (vec![0u64; block], vec![0u64; p * block]);
            let mut reduced = vec![0u64; if me == root { block } else { 0 }];
            let (mut scanned, mut exscanned) = (vec![0u64; block], vec![7u64; block]);
            // Not commutative: the exclusive prefix is rank 0's block.
            let left = Op::user(false, |a: &[u64], b: &mut [u64]| b.copy_from_slice(a));
            let backwards = common.below(2) == 1;
            kumi::scope(|sc| -> R {
                let a = c.ibcast_into(sc, &mut b1, root)?;
                delay(mine, delays);
                let b = c.igather_into(sc, &own, &mut gathered, root)?;
                let d =
                    c.iscatter_into(sc, if me == root { &all[..] } else { &[] }, &mut part, root)?;
                let e = c.iallgather_into(sc, &own, &mut every)?;
                let f = c.ireduce_into(sc, &own, &mut reduced, &Op::sum(), root)?;
                let g = c.iscan_into(sc, &own, &mut scanned, &Op::sum())?;
                let h = c.iexscan_into(sc, &own, &mut exscanned, &left)?;
                c.bcast(&mut b2, other)?;
                if backwards {
                    for r in [h, g, f, e, d, b, a] {
                        r.wait()?;
                    }
                } else {
                    for r in [a, b, d, e, f, g, h] {
                        r.wait()?;
                    }
                }
                Ok(())
            })?;
            let (mut w1, mut w2) = (vec![0u8; len], vec![0u8; len % 100]);
            kumi_tests::fill(&mut w1, root, it);
            kumi_tests::fill(&mut w2, other, it);
            let wrong = [
                ("ibcast", b1 != w1),
                ("bcast among them", b2 != w2),
                ("igather", me == root && gathered != all),
                ("iscatter", part != own),
                ("iallgather", every != all),
                (
                    "ireduce",
                    me == root && reduced != sum_of_blocks(&all, block),
                ),
                (
                    "iscan",
                    scanned != sum_of_blocks(&all[..(me + 1) * block], block),
                ),
                (
                    "iexscan",
                    exscanned
                        != if me == 0 {
                            vec![7; block]
                        } else {
                            all[..block].to_vec()
                        },
                ),
            ];
            if let Some((what, _)) = wrong.iter().find(|w| w.1) {
                return Err(fail(format!(
                    "iteration {it}: {what} (broadcast of {len}, blocks of {block}, root {root}) wrong on rank {me}"
                )));
            }
        }
        10 => {
            // Neighbourhood exchanges around the ring, two in flight and a
            // blocking one among them; each direction's blocks of a length
            // of their own, so that one call moves some pairs through the
            // area and sends others too long for it as messages. With one
            // or two ranks one rank is both neighbours: the listing order
            // pairs the blocks.
            let (l, r) = ((me + p - 1) % p, (me + 1) % p);
            let len = |from: usize, right: bool| {
                sizes[((from as u64 * 7 + it * 3 + u64::from(right)) % sizes.len() as u64) as usize]
            };
            let block = |from: usize, right: bool| -> Vec<u64> {
                (0..len(from, right))
                    .map(|i| val(from, it, i) ^ u64::from(right))
                    .collect()
            };
            let send = [block(me, false), block(me, true)].concat();
            let counts = [len(me, false), len(me, true)];
            let rcounts = [len(l, true), len(r, false)];
            let (sends, recvs) = ([(r, 1), (l, 0)], [(l, 0), (r, 1)]);
            let want = [block(l, true), block(r, false)].concat();
            let mut got = [want.len(); 3].map(|k| vec![0u64; k]);
            let [g1, g2, g3] = &mut got;
            kumi::scope(|sc| -> R {
                let a =
                    c.ineighbor_exchange_into(sc, &send, &counts, &sends, g1, &rcounts, &recvs)?;
                delay(mine, delays);
                c.neighbor_exchange(&send, &counts, &sends, g3, &rcounts, &recvs)?;
                let b =
                    c.ineighbor_exchange_into(sc, &send, &counts, &sends, g2, &rcounts, &recvs)?;
                // The owned form, started among them.
                let d = c.ineighbor_exchange(send.clone(), &counts, &sends, &rcounts, &recvs)?;
                b.wait()?;
                if d.wait()? != want {
                    return Err(fail(format!(
                        "iteration {it}: owned neighbourhood exchange (blocks of {counts:?} out, {rcounts:?} in) wrong on rank {me}"
                    )));
                }
                a.wait()
            })?;
            if let Some(k) = got.iter().position(|g| *g != want) {
                return Err(fail(format!(
                    "iteration {it}: neighbourhood exchange {k} (blocks of {counts:?} out, {rcounts:?} in) wrong on rank {me}"
                )));
            }
        }
        _ => {
            let mut buf: Vec<u64> = (0..n).map(|i| val(me, it, i)).collect();
            c.reduce_in_place(&mut buf, &Op::max(), root)?;
            if me == root {
                for (i, &v) in buf.iter().enumerate() {
                    if v != val(p - 1, it, i) {
                        return Err(fail(format!(
                            "iteration {it}: reduce max at {root}: element {i} is {v}"
                        )));
                    }
                }
            } else if let Some(i) = (0..n).find(|&i| buf[i] != val(me, it, i)) {
                return Err(fail(format!(
                    "iteration {it}: reduce max at {root} changed rank {me}'s element {i}"
                )));
            }
        }
    }
    Ok(())
}

fn main() {
    let universe = kumi::init().expect("init");
    let w = universe.world();
    let (p, me) = (w.size(), w.rank());
    let args: Vec<String> = std::env::args().collect();
    let iters: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let delays = args.iter().any(|a| a == "delays");
    let run = || -> R {
        let dup = w.dup()?;
        let half = w
            .split(Some((me % 2) as u32), -(me as i32))?
            .expect("member");
        // Lengths that disagree (an erroneous program): inside one host,
        // where a neighbourhood exchange goes through the area, every
        // receiver reports it, and the collectives after it go on.
        let area = p > 1
            && std::env::var("KUMI_COLL_SHM").as_deref() != Ok("off")
            && std::env::var_os("KUMI_COLL_HOSTS").is_none();
        if area {
            let (l, r) = ((me + p - 1) % p, (me + 1) % p);
            let mut got = [0u64; 3];
            let r = kumi::scope(|sc| {
                w.ineighbor_exchange_into(
                    sc,
                    &[1u64, 2],
                    &[2],
                    &[(r, 0)],
                    &mut got,
                    &[3],
                    &[(l, 0)],
                )?
                .wait()
            });
            match r {
                Err(e) if e.to_string().contains("blocks of other lengths") => {}
                other => {
                    return Err(fail(format!(
                        "a neighbourhood exchange of 2 elements into 3 on rank {me}: {other:?}"
                    )))
                }
            }
        }
        let comms = [&w, &dup, &half];
        let mut common = Rng(0x5EED_C011);
        let mut mine = Rng(0xDE1A7 ^ (me as u64) << 20);
        for it in 0..iters {
            let c = comms[common.below(comms.len() as u64) as usize];
            one(c, it, &mut common, &mut mine, delays)?;
        }
        w.barrier()
    };
    if let Err(e) = run() {
        panic!("rank {me}: {e}");
    }
    if me == 0 {
        println!("coll_stress: all checks passed on {p} ranks");
    }
}
