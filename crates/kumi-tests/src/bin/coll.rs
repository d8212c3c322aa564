//! The collectives suite: every collective, every built-in operation on every
//! primitive type, in-place variants, nonblocking ones and a non-commutative
//! user operation, each checked against a serial evaluation. Runs at any size;
//! rank 0 prints `coll: all checks passed on <n> ranks`.
//!
//! `kumi run -n 5 target/release/coll`

use kumi::{Builtin, Comm, Elem, Error, Loc, Op, ALL_BUILTINS};
use std::fmt::Debug;

type R = Result<(), Error>;

trait Gen: Elem + PartialEq + Debug {
    fn from_u(x: u64) -> Self;
}

macro_rules! gen {
    ($($t:ty),*) => {$(impl Gen for $t { fn from_u(x: u64) -> Self { x as $t } })*};
}
gen!(i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize, f32, f64);

impl<T: Gen + PartialOrd> Gen for Loc<T> {
    fn from_u(x: u64) -> Self {
        Loc {
            value: T::from_u(x % 5),
            index: T::from_u(x / 5),
        }
    }
}

fn fail(what: String) -> Error {
    Error::Protocol(what)
}

/// `got == want`, else an error showing both, or for long ones their
/// lengths and the first element that differs.
fn eq<T: PartialEq + Debug>(got: &[T], want: &[T], what: &str, me: usize) -> R {
    if got == want {
        return Ok(());
    }
    if got.len().max(want.len()) <= 16 {
        return Err(fail(format!(
            "{what} on rank {me}: got {got:?}, want {want:?}"
        )));
    }
    let i = got.iter().zip(want).take_while(|(a, b)| a == b).count();
    Err(fail(format!(
        "{what} on rank {me}: got {} elements, want {}; first difference at {i}: got {:?}, want {:?}",
        got.len(),
        want.len(),
        got.get(i),
        want.get(i)
    )))
}

/// Rank r's contribution, element i (small values: exact in every type).
fn val<T: Gen>(op: Builtin, r: usize, i: usize) -> T {
    match op {
        Builtin::Prod => T::from_u(((r + i) % 2 + 1) as u64),
        Builtin::MinLoc | Builtin::MaxLoc => T::from_u(((r * 7 + i * 3) % 5 + 5 * r) as u64),
        _ => T::from_u(((r * 7 + i * 3) % 11) as u64),
    }
}

fn vals<T: Gen>(op: Builtin, r: usize, n: usize) -> Vec<T> {
    (0..n).map(|i| val(op, r, i)).collect()
}

/// Serial fold in rank order over ranks `0..upto`.
fn serial<T: Gen>(o: &Op<T>, op: Builtin, upto: usize, n: usize) -> Vec<T> {
    let mut acc = vals::<T>(op, 0, n);
    for r in 1..upto {
        let mut next = vals::<T>(op, r, n);
        o.apply(&acc, &mut next).expect("valid op");
        acc = next;
    }
    acc
}

fn reductions<T: Gen>(w: &Comm) -> R {
    let (p, me) = (w.size(), w.rank());
    for op in ALL_BUILTINS {
        let o = Op::<T>::builtin(op);
        let n = 3;
        let mine = vals::<T>(op, me, n);
        let mut out = vec![T::from_u(0); n];
        if !T::supports(op) {
            match w.allreduce(&mine, &mut out, &o) {
                Err(Error::InvalidArgument { .. }) => continue,
                other => return Err(fail(format!("{op:?} on {}: {other:?}", T::NAME))),
            }
        }
        let what = |c: &str| format!("{c} {op:?} on {}", T::NAME);
        let all = serial(&o, op, p, n);
        w.allreduce(&mine, &mut out, &o)?;
        eq(&out, &all, &what("allreduce"), me)?;
        let mut buf = mine.clone();
        w.allreduce_in_place(&mut buf, &o)?;
        eq(&buf, &all, &what("allreduce_in_place"), me)?;
        let root = p - 1;
        let mut out = vec![T::from_u(0); n];
        w.reduce(&mine, &mut out, &o, root)?;
        if me == root {
            eq(&out, &all, &what("reduce"), me)?;
        }
        let mut buf = mine.clone();
        w.reduce_in_place(&mut buf, &o, 0)?;
        eq(
            &buf,
            if me == 0 { &all } else { &mine },
            &what("reduce_in_place"),
            me,
        )?;
        w.scan(&mine, &mut out, &o)?;
        eq(&out, &serial(&o, op, me + 1, n), &what("scan"), me)?;
        let mut buf = mine.clone();
        w.scan_in_place(&mut buf, &o)?;
        eq(&buf, &serial(&o, op, me + 1, n), &what("scan_in_place"), me)?;
        let mut buf = mine.clone();
        w.exscan_in_place(&mut buf, &o)?;
        if me > 0 {
            eq(&buf, &serial(&o, op, me, n), &what("exscan"), me)?;
        } else {
            eq(&buf, &mine, &what("exscan rank 0"), me)?;
        }
        // reduce_scatter_block: p blocks of 2.
        let mine = vals::<T>(op, me, 2 * p);
        let all = serial(&o, op, p, 2 * p);
        let mut out = vec![T::from_u(0); 2];
        w.reduce_scatter_block(&mine, &mut out, &o)?;
        eq(
            &out,
            &all[2 * me..2 * me + 2],
            &what("reduce_scatter_block"),
            me,
        )?;
        let iv = w.iallreduce(vals::<T>(op, me, n), &o)?.wait()?;
        eq(&iv, &serial(&o, op, p, n), &what("iallreduce"), me)?;
    }
    Ok(())
}

/// Fresh communicators whose first collective is each one that may go
/// through a host's collective area: the ranks must agree how to find out
/// (a rank alone on its host has no area, and its hosts' labels come from
/// an exchange every rank makes). A hang here is the failure.
fn first_collectives(w: &Comm) -> R {
    let (p, me) = (w.size(), w.rank());
    let mine = [me as u64 + 1, 7];
    let all: Vec<u64> = (0..p).flat_map(|r| [r as u64 + 1, 7]).collect();
    let c = w.dup()?;
    let mut got = vec![0u64; 2 * p];
    c.allgather(&mine, &mut got)?;
    eq(&got, &all, "allgather first on a fresh communicator", me)?;
    let c = w.dup()?;
    let mut got = vec![0u64; if me == 0 { 2 * p } else { 0 }];
    c.gather(&mine, &mut got, 0)?;
    if me == 0 {
        eq(&got, &all, "gather first on a fresh communicator", me)?;
    }
    let c = w.dup()?;
    let mut part = [0u64; 2];
    c.scatter(if me == p - 1 { &all[..] } else { &[] }, &mut part, p - 1)?;
    eq(&part, &mine, "scatter first on a fresh communicator", me)?;
    let c = w.dup()?;
    let mut out = [0u64; 2];
    c.reduce_scatter_block(&all, &mut out, &Op::sum())?;
    let want = [(me as u64 + 1) * p as u64, 7 * p as u64];
    eq(
        &out,
        &want,
        "reduce_scatter_block first on a fresh communicator",
        me,
    )?;
    Ok(())
}

fn movement<T: Gen + Copy>(w: &Comm, n: usize) -> R {
    let (p, me) = (w.size(), w.rank());
    let v = |r: usize, i: usize| T::from_u(((r * 31 + i) % 97) as u64);
    let block = |r: usize, n: usize| (0..n).map(|i| v(r, i)).collect::<Vec<T>>();
    for root in [0, p / 2, p - 1] {
        let mut buf = if me == root {
            block(root, n)
        } else {
            vec![T::from_u(0); n]
        };
        w.bcast(&mut buf, root)?;
        eq(&buf, &block(root, n), "bcast", me)?;
        let mut all = vec![T::from_u(0); p * n];
        w.gather(&block(me, n), &mut all, root)?;
        let want: Vec<T> = (0..p).flat_map(|r| block(r, n)).collect();
        if me == root {
            eq(&all, &want, "gather", me)?;
        }
        let mut mine = vec![T::from_u(0); n];
        w.scatter(&want, &mut mine, root)?;
        eq(&mine, &block(me, n), "scatter", me)?;
        let counts: Vec<usize> = (0..p).map(|r| r % 3 + 1).collect();
        let wantv: Vec<T> = (0..p).flat_map(|r| block(r, counts[r])).collect();
        let mut allv = vec![T::from_u(0); wantv.len()];
        w.gatherv(&block(me, counts[me]), &mut allv, &counts, root)?;
        if me == root {
            eq(&allv, &wantv, "gatherv", me)?;
        }
        let mut minev = vec![T::from_u(0); counts[me]];
        w.scatterv(&wantv, &counts, &mut minev, root)?;
        eq(&minev, &block(me, counts[me]), "scatterv", me)?;
    }
    let want: Vec<T> = (0..p).flat_map(|r| block(r, n)).collect();
    let mut all = vec![T::from_u(0); p * n];
    w.allgather(&block(me, n), &mut all)?;
    eq(&all, &want, "allgather", me)?;
    let mut all2 = vec![T::from_u(0); p * n];
    all2[me * n..(me + 1) * n].copy_from_slice(&block(me, n));
    w.allgather_in_place(&mut all2)?;
    eq(&all2, &want, "allgather_in_place", me)?;
    let counts: Vec<usize> = (0..p).map(|r| (r + 1) % 3).collect();
    let wantv: Vec<T> = (0..p).flat_map(|r| block(r, counts[r])).collect();
    let mut allv = vec![T::from_u(0); wantv.len()];
    w.allgatherv(&block(me, counts[me]), &mut allv, &counts)?;
    eq(&allv, &wantv, "allgatherv", me)?;
    // alltoall: element (from r to s, i) = v(r * p + s, i).
    let send: Vec<T> = (0..p).flat_map(|s| block(me * p + s, n)).collect();
    let want: Vec<T> = (0..p).flat_map(|r| block(r * p + me, n)).collect();
    let mut recv = vec![T::from_u(0); p * n];
    w.alltoall(&send, &mut recv)?;
    eq(&recv, &want, "alltoall", me)?;
    // alltoallv: (r -> s) carries (r + s) % 3 elements.
    let c = |r: usize, s: usize| (r + s) % 3;
    let sc: Vec<usize> = (0..p).map(|s| c(me, s)).collect();
    let rc: Vec<usize> = (0..p).map(|r| c(r, me)).collect();
    let send: Vec<T> = (0..p).flat_map(|s| block(me * p + s, c(me, s))).collect();
    let want: Vec<T> = (0..p).flat_map(|r| block(r * p + me, c(r, me))).collect();
    let mut recv = vec![T::from_u(0); want.len()];
    w.alltoallv(&send, &sc, &mut recv, &rc)?;
    eq(&recv, &want, "alltoallv", me)?;
    Ok(())
}

fn non_commutative(w: &Comm) -> R {
    let (p, me) = (w.size(), w.rank());
    let m = |r: usize| [(r % 3 + 1) as i64, 1, 1, 0];
    let o = kumi_tests::matmul();
    let mut want = m(0);
    for r in 1..p {
        let mut next = [m(r)];
        o.apply(&[want], &mut next)?;
        want = next[0];
    }
    let mut out = [[0i64; 4]];
    w.allreduce(&[m(me)], &mut out, &o)?;
    eq(&out, &[want], "matrix allreduce (rank order)", me)?;
    w.reduce(&[m(me)], &mut out, &o, p - 1)?;
    if me == p - 1 {
        eq(&out, &[want], "matrix reduce", me)?;
    }
    // Long enough for Rabenseifner (1024 matrices), and beyond a collective
    // area's payload half so that ranks of one host reduce by single copy
    // (4096 matrices, 128 KiB).
    for count in [1024, 4096] {
        let mine = vec![m(me); count];
        let mut out = vec![[0i64; 4]; count];
        w.allreduce(&mine, &mut out, &o)?;
        for i in [0, count / 2, count - 1] {
            eq(&out[i..i + 1], &[want], "matrix allreduce, long", me)?;
        }
        // Reduce (single copy inside a host beyond the area), at every
        // root: only the root's buffer holds the result.
        for root in [0, p / 2, p - 1] {
            let mut out = vec![[0i64; 4]; count];
            w.reduce(&mine, &mut out, &o, root)?;
            if me == root {
                for i in [0, count / 2, count - 1] {
                    eq(&out[i..i + 1], &[want], "matrix reduce, long", me)?;
                }
            }
            // In place: the root's contribution is where the result forms
            // (a rank-order fold must keep it aside); others' stay intact.
            let mut buf = mine.clone();
            w.reduce_in_place(&mut buf, &o, root)?;
            for i in [0, count / 2, count - 1] {
                let expect = if me == root { want } else { m(me) };
                eq(
                    &buf[i..i + 1],
                    &[expect],
                    "matrix reduce in place, long",
                    me,
                )?;
            }
        }
    }
    Ok(())
}

fn long_messages(w: &Comm) -> R {
    let (p, me) = (w.size(), w.rank());
    let n = 40_000; // 320 KB of f64: Rabenseifner or ring allreduce, long bcast
    let mine: Vec<f64> = (0..n).map(|i| ((me * 3 + i) % 7) as f64).collect();
    let want: Vec<f64> = (0..n)
        .map(|i| (0..p).map(|r| ((r * 3 + i) % 7) as f64).sum())
        .collect();
    let mut out = vec![0.0; n];
    w.allreduce(&mine, &mut out, &Op::sum())?;
    if out != want {
        return Err(fail(format!("long allreduce wrong on rank {me}")));
    }
    // Long scans (the linear chain, in place with one scratch buffer), two
    // in a row so the scratch is reused.
    for _ in 0..2 {
        let upto = |k: usize| -> Vec<f64> {
            (0..n)
                .map(|i| (0..k).map(|r| ((r * 3 + i) % 7) as f64).sum())
                .collect()
        };
        let mut out = vec![-1.0; n];
        w.scan(&mine, &mut out, &Op::sum())?;
        if out != upto(me + 1) {
            return Err(fail(format!("long scan wrong on rank {me}")));
        }
        let mut out = vec![-1.0; n];
        w.exscan(&mine, &mut out, &Op::sum())?;
        if (me == 0 && out.iter().any(|&x| x != -1.0)) || (me > 0 && out != upto(me)) {
            return Err(fail(format!("long exscan wrong on rank {me}")));
        }
        let mut buf = mine.clone();
        w.exscan_in_place(&mut buf, &Op::sum())?;
        if (me == 0 && buf != mine) || (me > 0 && buf != upto(me)) {
            return Err(fail(format!("long exscan_in_place wrong on rank {me}")));
        }
    }
    for root in [0, p - 1] {
        let mut out = vec![-1.0; n];
        w.reduce(&mine, &mut out, &Op::sum(), root)?;
        if me == root && out != want {
            return Err(fail(format!("long reduce to {root} wrong on rank {me}")));
        }
        let mut buf = mine.clone();
        w.reduce_in_place(&mut buf, &Op::sum(), root)?;
        if (me == root && buf != want) || (me != root && buf != mine) {
            return Err(fail(format!(
                "long reduce_in_place to {root} wrong on rank {me}"
            )));
        }
    }
    let mut buf: Vec<u32> = if me == 1 % p {
        (0..n as u32).collect()
    } else {
        vec![0; n]
    };
    w.bcast(&mut buf, 1 % p)?;
    if buf != (0..n as u32).collect::<Vec<_>>() {
        return Err(fail(format!("long bcast wrong on rank {me}")));
    }
    let mut all = vec![0u8; p * 20_000];
    w.allgather(&vec![me as u8; 20_000], &mut all)?;
    if (0..p).any(|r| {
        all[r * 20_000..(r + 1) * 20_000]
            .iter()
            .any(|&b| b != r as u8)
    }) {
        return Err(fail(format!("long allgather wrong on rank {me}")));
    }
    // Blocks longer than an area's payload half (128 KiB at most), which
    // go through it in rounds; odd lengths, so the last round is short.
    let v = |r: usize, s: usize, i: usize| (r * 131 + s * 17 + i * 7 + i / 251) as u8;
    let n = 150_001;
    let mut all = vec![0u8; p * n];
    let mine: Vec<u8> = (0..n).map(|i| v(me, 0, i)).collect();
    w.allgather(&mine, &mut all)?;
    if (0..p).any(|r| (0..n).any(|i| all[r * n + i] != v(r, 0, i))) {
        return Err(fail(format!("allgather of long blocks wrong on rank {me}")));
    }
    // Uneven: none, short, and several payload halves.
    let counts: Vec<usize> = (0..p).map(|r| [0, 5, 300_007][r % 3]).collect();
    let mut allv = vec![0u8; counts.iter().sum()];
    let mine: Vec<u8> = (0..counts[me]).map(|i| v(me, 1, i)).collect();
    w.allgatherv(&mine, &mut allv, &counts)?;
    let mut at = 0;
    for (r, &k) in counts.iter().enumerate() {
        if (0..k).any(|i| allv[at + i] != v(r, 1, i)) {
            return Err(fail(format!(
                "allgatherv of long blocks wrong on rank {me}"
            )));
        }
        at += k;
    }
    let n = 70_001;
    let send: Vec<u8> = (0..p)
        .flat_map(|s| (0..n).map(move |i| v(me, s, i)))
        .collect();
    let mut recv = vec![0u8; p * n];
    w.alltoall(&send, &mut recv)?;
    if (0..p).any(|r| (0..n).any(|i| recv[r * n + i] != v(r, me, i))) {
        return Err(fail(format!("alltoall of long blocks wrong on rank {me}")));
    }
    // Uneven, pair by pair: nothing, short, one round and several.
    let c = |r: usize, s: usize| [0, 7, 90_001, 200_003][(r + 2 * s) % 4];
    let sc: Vec<usize> = (0..p).map(|s| c(me, s)).collect();
    let rc: Vec<usize> = (0..p).map(|r| c(r, me)).collect();
    let send: Vec<u8> = (0..p)
        .flat_map(|s| (0..c(me, s)).map(move |i| v(me, s, i)))
        .collect();
    let mut recv = vec![0u8; rc.iter().sum()];
    w.alltoallv(&send, &sc, &mut recv, &rc)?;
    let mut at = 0;
    for (r, &k) in rc.iter().enumerate() {
        if (0..k).any(|i| recv[at + i] != v(r, me, i)) {
            return Err(fail(format!("alltoallv of long blocks wrong on rank {me}")));
        }
        at += k;
    }
    Ok(())
}

/// Reductions beyond a collective area's payload half (128 KiB at most),
/// which ranks of one host do by single copy between their buffers,
/// blocking and nonblocking, on owned and borrowed buffers, in flight
/// together: a commutative sum, a rank-order product of matrices, and an
/// operation on groups of three elements whose pieces must not split a
/// group. Reduce-scatter blocks are uneven, one empty from three ranks on.
fn long_reductions(w: &Comm) -> R {
    let (p, me) = (w.size(), w.rank());
    let what = |s: &str| format!("{s}, long, p={p}");
    // Sum: 40,000 doubles (320 KB).
    let n = 40_000;
    let v = |r: usize, i: usize| ((r * 3 + i) % 7) as f64;
    let mine: Vec<f64> = (0..n).map(|i| v(me, i)).collect();
    let sum = |i: usize| (0..p).map(|r| v(r, i)).sum::<f64>();
    let want: Vec<f64> = (0..n).map(sum).collect();
    // Blocks of 12,000, 24,000 and none, round the ranks.
    let cnt: Vec<usize> = (0..p).map(|r| ((r + 1) % 3) * 12_000).collect();
    let total: usize = cnt.iter().sum();
    let start: usize = cnt[..me].iter().sum();
    let send: Vec<f64> = (0..total).map(|i| v(me, i)).collect();
    let block: Vec<f64> = (start..start + cnt[me]).map(sum).collect();
    let owned = w.iallreduce(mine.clone(), &Op::sum())?;
    let owned_rs = w.ireduce_scatter(send.clone(), &cnt, &Op::sum())?;
    let mut into = mine.clone();
    let mut into_rs = vec![-1.0; cnt[me]];
    kumi::scope(|s| -> R {
        let a = w.iallreduce_into(s, &mine, &mut into, &Op::sum())?;
        let b = w.ireduce_scatter_into(s, &send, &mut into_rs, &cnt, &Op::sum())?;
        // A blocking one of the same group while they are in flight.
        let mut out = vec![0.0; n];
        w.allreduce(&mine, &mut out, &Op::sum())?;
        eq(&out, &want, &what("allreduce among nonblocking ones"), me)?;
        b.wait()?;
        a.wait()
    })?;
    eq(&into, &want, &what("iallreduce_into"), me)?;
    eq(&into_rs, &block, &what("ireduce_scatter_into"), me)?;
    // Reduces longer than a payload half, two roots in flight at once (in
    // place at the root of the owned form), and one on borrowed buffers.
    let (r0, r1) = (0, p - 1);
    let first = w.ireduce(mine.clone(), &Op::sum(), r0)?;
    let last = w.ireduce(mine.clone(), &Op::sum(), r1)?;
    let mut into_r = match me == p / 2 {
        true => vec![-1.0; n],
        false => Vec::new(),
    };
    kumi::scope(|s| {
        w.ireduce_into(s, &mine, &mut into_r, &Op::sum(), p / 2)?
            .wait()
    })?;
    for (root, got, form) in [
        (r1, last.wait()?, "ireduce"),
        (r0, first.wait()?, "ireduce"),
        (p / 2, into_r, "ireduce_into"),
    ] {
        match me == root {
            true => eq(&got, &want, &what(&format!("{form} to {root}")), me)?,
            false => eq(&got, &[], &what(&format!("{form} off the root")), me)?,
        }
    }
    eq(&owned_rs.wait()?, &block, &what("ireduce_scatter"), me)?;
    eq(&owned.wait()?, &want, &what("iallreduce"), me)?;
    // Rank order: 4,200 matrices of 2x2 (134 KB), multiplied left to right.
    let m = |r: usize, i: usize| [((r + i) % 3 + 1) as i64, 1, (i % 2) as i64, 1];
    let o = kumi_tests::matmul();
    let count = 4_200;
    let product = |i: usize, ranks: std::ops::Range<usize>| {
        let mut acc = [m(ranks.start, i)];
        for r in ranks.start + 1..ranks.end {
            let mut next = [m(r, i)];
            o.apply(&acc, &mut next).expect("a valid operation");
            acc = next;
        }
        acc[0]
    };
    let all: Vec<[i64; 4]> = (0..count).map(|i| product(i, 0..p)).collect();
    let mats: Vec<[i64; 4]> = (0..count).map(|i| m(me, i)).collect();
    let got = w.iallreduce(mats.clone(), &o)?.wait()?;
    eq(&got, &all, &what("iallreduce, rank order"), me)?;
    // Scans shorter than a payload half (as a chain with more than two
    // ranks a core) and longer (a chain with four), in place (the owned
    // forms) and not.
    for count in [300, count] {
        let mats: Vec<[i64; 4]> = (0..count).map(|i| m(me, i)).collect();
        let what = |s: &str| what(&format!("{s} of {count}"));
        let upto: Vec<[i64; 4]> = (0..count).map(|i| product(i, 0..me + 1)).collect();
        let before: Vec<[i64; 4]> = match me {
            0 => mats.clone(),
            _ => (0..count).map(|i| product(i, 0..me)).collect(),
        };
        let inc = w.iscan(mats.clone(), &o)?;
        let exc = w.iexscan(mats.clone(), &o)?;
        let mut into = vec![[0i64; 4]; count];
        kumi::scope(|s| w.iscan_into(s, &mats, &mut into, &o)?.wait())?;
        eq(&exc.wait()?, &before, &what("iexscan, rank order"), me)?;
        eq(&inc.wait()?, &upto, &what("iscan, rank order"), me)?;
        eq(&into, &upto, &what("iscan_into, rank order"), me)?;
        // The blocking ones too.
        let mut out = vec![[0i64; 4]; count];
        w.scan(&mats, &mut out, &o)?;
        eq(&out, &upto, &what("scan, rank order"), me)?;
        let mut out = mats.clone();
        w.exscan(&mats, &mut out, &o)?;
        eq(&out, &before, &what("exscan, rank order"), me)?;
        let mut buf = mats.clone();
        w.scan_in_place(&mut buf, &o)?;
        eq(&buf, &upto, &what("scan_in_place, rank order"), me)?;
        let mut buf = mats.clone();
        w.exscan_in_place(&mut buf, &o)?;
        eq(&buf, &before, &what("exscan_in_place, rank order"), me)?;
    }
    let mut out = vec![[0i64; 4]; count];
    w.allreduce(&mats, &mut out, &o)?;
    eq(&out, &all, &what("allreduce, rank order"), me)?;
    let cnt: Vec<usize> = (0..p).map(|r| ((r + 1) % 3) * 1_400).collect();
    let total: usize = cnt.iter().sum();
    let start: usize = cnt[..me].iter().sum();
    let mats: Vec<[i64; 4]> = (0..total).map(|i| m(me, i)).collect();
    let block: Vec<[i64; 4]> = (start..start + cnt[me]).map(|i| product(i, 0..p)).collect();
    let got = w.ireduce_scatter(mats.clone(), &cnt, &o)?.wait()?;
    eq(&got, &block, &what("ireduce_scatter, rank order"), me)?;
    let mut out = vec![[0i64; 4]; cnt[me]];
    w.reduce_scatter(&mats, &mut out, &cnt, &o)?;
    eq(&out, &block, &what("reduce_scatter, rank order"), me)?;
    // Groups of three u64 (24 bytes), each position its own operation: a
    // piece that split a group would shift the positions after it.
    let triple = Op::user_grouped(3, true, |a: &[u64], b: &mut [u64]| {
        for (x, y) in a.chunks_exact(3).zip(b.chunks_exact_mut(3)) {
            y[0] += x[0];
            y[1] = y[1].max(x[1]);
            y[2] ^= x[2];
        }
    });
    let t = |r: usize, i: usize| ((r * 5 + i) % 13) as u64;
    let fold = |i: usize| match i % 3 {
        0 => (0..p).map(|r| t(r, i)).sum(),
        1 => (0..p).map(|r| t(r, i)).max().unwrap_or(0),
        _ => (0..p).fold(0, |acc, r| acc ^ t(r, i)),
    };
    let cnt: Vec<usize> = (0..p).map(|r| ((r + 1) % 3) * 6_000).collect();
    let total: usize = cnt.iter().sum();
    let start: usize = cnt[..me].iter().sum();
    let send: Vec<u64> = (0..total).map(|i| t(me, i)).collect();
    let block: Vec<u64> = (start..start + cnt[me]).map(fold).collect();
    let mut out = vec![0u64; cnt[me]];
    w.reduce_scatter(&send, &mut out, &cnt, &triple)?;
    eq(&out, &block, &what("reduce_scatter in groups of three"), me)?;
    let got = w.ireduce_scatter(send.clone(), &cnt, &triple)?.wait()?;
    eq(
        &got,
        &block,
        &what("ireduce_scatter in groups of three"),
        me,
    )?;
    let got = w.iallreduce(send.clone(), &triple)?.wait()?;
    let all: Vec<u64> = (0..total).map(fold).collect();
    eq(&got, &all, &what("iallreduce in groups of three"), me)?;
    let got = w.iexscan(send.clone(), &triple)?.wait()?;
    let prefix = |upto: usize, i: usize| match i % 3 {
        0 => (0..upto).map(|r| t(r, i)).sum(),
        1 => (0..upto).map(|r| t(r, i)).max().unwrap_or(0),
        _ => (0..upto).fold(0, |acc, r| acc ^ t(r, i)),
    };
    let want: Vec<u64> = match me {
        0 => send.clone(),
        _ => (0..total).map(|i| prefix(me, i)).collect(),
    };
    eq(&got, &want, &what("iexscan in groups of three"), me)?;
    let got = w.ireduce(send.clone(), &triple, p - 1)?.wait()?;
    let want = if me == p - 1 { &all[..] } else { &[] };
    eq(&got, want, &what("ireduce in groups of three"), me)
}

fn nonblocking(w: &Comm) -> R {
    let me = w.rank();
    let mut b = w.ibarrier()?;
    let r = w.iallreduce(vec![me as u64 + 1; 4], &Op::sum())?;
    // Other kumi calls progress both.
    let mut x = [me as i32];
    w.allreduce_in_place(&mut x, &Op::max())?;
    while !b.test()? {}
    b.wait()?;
    let v = r.wait()?;
    let p = w.size() as u64;
    eq(&v, &[p * (p + 1) / 2; 4], "iallreduce", me)?;
    nonblocking_movement(w)?;
    scoped_movement(w, 3)?;
    // Blocks of 20-40 KB: a scatter's in a section of the halves; up to 8
    // ranks, alltoallv's of 40 KB inside a member's share but from single
    // copy's first length (as messages where the host chose single copy).
    scoped_movement(w, 2_501)?;
    // Blocks beyond a collective area's half: in rounds, or as messages.
    scoped_movement(w, 40_009)
}

/// The nonblocking data movers on borrowed buffers (`kumi::scope`), all in
/// flight at once, blocks of `n` values; requests waited for, tested, and
/// dropped, which the scope's end still completes.
fn scoped_movement(w: &Comm, n: usize) -> R {
    let (p, me) = (w.size(), w.rank());
    let val = |r: usize, i: usize| (r * 1_000_003 + i) as u64;
    let root = p / 2;
    let mine: Vec<u64> = (0..n).map(|i| val(me, i)).collect();
    let table: Vec<u64> = (0..p * n).map(|i| val(me, i)).collect();
    let mut all = vec![0u64; p * n];
    let mut a2a = vec![0u64; p * n];
    let mut bc: Vec<u64> = if me == root {
        table.clone()
    } else {
        vec![0; p * n]
    };
    let mut gat = vec![0u64; if me == root { p * n } else { 0 }];
    let mut sc = vec![0u64; n];
    kumi::scope(|s| -> R {
        let ag = w.iallgather_into(s, &mine, &mut all)?;
        let aa = w.ialltoall_into(s, &table, &mut a2a)?;
        let g = w.igather_into(s, &mine, &mut gat, root)?;
        let mut c = w.iscatter_into(s, if me == root { &table } else { &[] }, &mut sc, root)?;
        while !c.test()? {}
        c.wait()?;
        ag.wait()?;
        drop(aa);
        g.wait()
    })?;
    // Dropped at once (leaking it would be the same: the scope holds the
    // collective): only the scope's end completes it.
    kumi::scope(|s| -> R {
        drop(w.ibcast_into(s, &mut bc, root)?);
        Ok(())
    })?;
    let what = |s: &str| format!("{s}, blocks of {n} on {p} ranks");
    let blocks = |f: &dyn Fn(usize, usize) -> u64| -> Vec<u64> {
        (0..p * n).map(|i| f(i / n, i % n)).collect()
    };
    eq(&all, &blocks(&val), &what("iallgather_into"), me)?;
    eq(
        &a2a,
        &blocks(&|r, i| val(r, me * n + i)),
        &what("ialltoall_into (dropped)"),
        me,
    )?;
    eq(
        &bc,
        &(0..p * n).map(|i| val(root, i)).collect::<Vec<_>>(),
        &what("ibcast_into (dropped at once)"),
        me,
    )?;
    if me == root {
        eq(&gat, &blocks(&val), &what("igather_into"), me)?;
    }
    eq(
        &sc,
        &(0..n).map(|i| val(root, me * n + i)).collect::<Vec<_>>(),
        &what("iscatter_into"),
        me,
    )?;
    // The v-forms, uneven: rank r has (r % 3) * n values (some none),
    // alltoallv's block from r to d (r + d) % 3 * n.
    let cnt: Vec<usize> = (0..p).map(|r| (r % 3) * n).collect();
    let off = |r: usize| cnt[..r].iter().sum::<usize>();
    let total: usize = cnt.iter().sum();
    let minev: Vec<u64> = (0..cnt[me]).map(|i| val(me, i)).collect();
    let concat: Vec<u64> = (0..p)
        .flat_map(|r| (0..cnt[r]).map(move |i| val(r, i)))
        .collect();
    let a2c = |from: usize, to: usize| (from + to) % 3 * n;
    let scnt: Vec<usize> = (0..p).map(|d| a2c(me, d)).collect();
    let rcnt: Vec<usize> = (0..p).map(|r| a2c(r, me)).collect();
    let a2s: Vec<u64> = (0..scnt.iter().sum()).map(|i| val(me, i)).collect();
    let mut agv = vec![0u64; total];
    let mut gv = vec![0u64; if me == root { total } else { 0 }];
    let mut sv = vec![0u64; cnt[me]];
    let mut a2r = vec![0u64; rcnt.iter().sum()];
    let svsrc: &[u64] = if me == root { &concat } else { &[] };
    kumi::scope(|s| -> R {
        let a = w.iallgatherv_into(s, &minev, &mut agv, &cnt)?;
        let g = w.igatherv_into(s, &minev, &mut gv, &cnt, root)?;
        let c = w.iscatterv_into(s, svsrc, &cnt, &mut sv, root)?;
        let t = w.ialltoallv_into(s, &a2s, &scnt, &mut a2r, &rcnt)?;
        t.wait()?;
        c.wait()?;
        g.wait()?;
        a.wait()
    })?;
    eq(&agv, &concat, &what("iallgatherv_into"), me)?;
    if me == root {
        eq(&gv, &concat, &what("igatherv_into"), me)?;
    }
    eq(
        &sv,
        &concat[off(me)..off(me) + cnt[me]],
        &what("iscatterv_into"),
        me,
    )?;
    // Rank r's block for me starts where its blocks for 0..me end.
    let want: Vec<u64> = (0..p)
        .flat_map(|r| {
            let from: usize = (0..me).map(|d| a2c(r, d)).sum();
            (0..a2c(r, me)).map(move |i| val(r, from + i))
        })
        .collect();
    eq(&a2r, &want, &what("ialltoallv_into"), me)?;
    // Around a ring, on the program's buffers: block 0 to the left, block 1
    // to the right; slot 0 from the left, slot 1 from the right, slot 2
    // named by no receive (it keeps what it held). With 1 or 2 ranks one
    // rank is both neighbours: the listing order pairs the blocks. Then the
    // blocking form, the other way round.
    let (l, r) = ((me + p - 1) % p, (me + 1) % p);
    let out: Vec<u64> = (0..2 * n).map(|i| val(me, i)).collect();
    let mut got = vec![7u64; 3 * n];
    kumi::scope(|s| -> R {
        w.ineighbor_exchange_into(
            s,
            &out,
            &[n, n],
            &[(r, 1), (l, 0)],
            &mut got,
            &[n, n, n],
            &[(l, 0), (r, 1)],
        )?
        .wait()
    })?;
    let ring = |a: usize, b: usize| -> Vec<u64> {
        (0..n)
            .map(|i| val(a, n + i))
            .chain((0..n).map(|i| val(b, i)))
            .chain(std::iter::repeat_n(7, n))
            .collect()
    };
    eq(&got, &ring(l, r), &what("ineighbor_exchange_into"), me)?;
    let mut back = vec![7u64; 3 * n];
    w.neighbor_exchange(
        &out,
        &[n, n],
        &[(l, 1), (r, 0)],
        &mut back,
        &[n, n, n],
        &[(r, 0), (l, 1)],
    )?;
    let want: Vec<u64> = (0..n)
        .map(|i| val(r, n + i))
        .chain((0..n).map(|i| val(l, i)))
        .chain(std::iter::repeat_n(7, n))
        .collect();
    eq(&back, &want, &what("neighbor_exchange"), me)?;
    // Reductions on the program's buffers: an allreduce, and a
    // reduce-scatter of uneven blocks (some empty) with a commutative and a
    // non-commutative operation (x ⊕ y = x keeps rank 0's values).
    let first = Op::user(false, |x: &[u64], y: &mut [u64]| y.copy_from_slice(x));
    let red: Vec<u64> = (0..total).map(|i| val(me, i)).collect();
    let mut sum = vec![0u64; total];
    let mut block = vec![0u64; cnt[me]];
    let mut kept = vec![0u64; cnt[me]];
    kumi::scope(|s| -> R {
        let a = w.iallreduce_into(s, &red, &mut sum, &Op::sum())?;
        let b = w.ireduce_scatter_into(s, &red, &mut block, &cnt, &Op::sum())?;
        let c = w.ireduce_scatter_into(s, &red, &mut kept, &cnt, &first)?;
        c.wait()?;
        b.wait()?;
        a.wait()
    })?;
    let all_sum = |i: usize| (0..p).map(|r| val(r, i)).sum::<u64>();
    eq(
        &sum,
        &(0..total).map(all_sum).collect::<Vec<_>>(),
        &what("iallreduce_into"),
        me,
    )?;
    let own = off(me)..off(me) + cnt[me];
    eq(
        &block,
        &own.clone().map(all_sum).collect::<Vec<_>>(),
        &what("ireduce_scatter_into"),
        me,
    )?;
    eq(
        &kept,
        &own.map(|i| val(0, i)).collect::<Vec<_>>(),
        &what("ireduce_scatter_into, non-commutative"),
        me,
    )?;
    // Scans on the program's buffers: inclusive and exclusive, with sum and
    // with the non-commutative `first` (every prefix is rank 0's part);
    // rank 0's exclusive result is left as it was.
    let part: Vec<u64> = (0..n).map(|i| val(me, i)).collect();
    let (mut inc, mut exc, mut inc1, mut exc1) =
        (vec![7u64; n], vec![7u64; n], vec![7u64; n], vec![7u64; n]);
    kumi::scope(|s| -> R {
        let a = w.iscan_into(s, &part, &mut inc, &Op::sum())?;
        let b = w.iexscan_into(s, &part, &mut exc, &Op::sum())?;
        let c = w.iscan_into(s, &part, &mut inc1, &first)?;
        let d = w.iexscan_into(s, &part, &mut exc1, &first)?;
        d.wait()?;
        b.wait()?;
        c.wait()?;
        a.wait()
    })?;
    let (mut rsum, mut rfirst) = if me == root {
        (vec![7u64; n], vec![7u64; n])
    } else {
        (Vec::new(), Vec::new())
    };
    kumi::scope(|s| -> R {
        let a = w.ireduce_into(s, &part, &mut rsum, &Op::sum(), root)?;
        let b = w.ireduce_into(s, &part, &mut rfirst, &first, root)?;
        b.wait()?;
        a.wait()
    })?;
    let prefix =
        |upto: usize| -> Vec<u64> { (0..n).map(|i| (0..upto).map(|r| val(r, i)).sum()).collect() };
    let zeroth: Vec<u64> = (0..n).map(|i| val(0, i)).collect();
    if me == root {
        eq(&rsum, &prefix(p), &what("ireduce_into"), me)?;
        eq(&rfirst, &zeroth, &what("ireduce_into, non-commutative"), me)?;
    }
    eq(&inc, &prefix(me + 1), &what("iscan_into"), me)?;
    eq(&inc1, &zeroth, &what("iscan_into, non-commutative"), me)?;
    let (want, want1) = if me == 0 {
        (vec![7; n], vec![7; n])
    } else {
        (prefix(me), zeroth.clone())
    };
    eq(&exc, &want, &what("iexscan_into"), me)?;
    eq(&exc1, &want1, &what("iexscan_into, non-commutative"), me)?;
    // A receive block named twice would take two messages on its bytes.
    let twice = w.neighbor_exchange(&out, &[n, n], &[], &mut back, &[n, n, n], &[(l, 0), (r, 0)]);
    if !matches!(&twice, Err(e) if e.to_string().contains("recvs")) {
        return Err(fail(format!(
            "a receive block named twice on rank {me}: {twice:?}"
        )));
    }
    // A mismatched length is refused, naming the argument.
    let refused = kumi::scope(|s| w.iallgather_into(s, &mine, &mut all[..1]).map(drop));
    match refused {
        Err(e) if p * n != 1 && e.to_string().contains("recv") => Ok(()),
        Ok(()) if p * n == 1 => Ok(()),
        other => Err(fail(format!(
            "iallgather_into of a short recv on rank {me}: {other:?}"
        ))),
    }
}

/// Every nonblocking reduce and data-movement collective, several in flight at
/// once on one communicator, waited for in the reverse order of their starts.
fn nonblocking_movement(w: &Comm) -> R {
    let (p, me) = (w.size(), w.rank());
    let val = |r: usize, i: usize| (r * 1000 + i) as u64;
    // A broadcast longer than a payload half: in rounds through the area.
    let long = 300_001;
    let byte = |i: usize| (i % 251) as u8;
    let data = match me == p - 1 {
        true => (0..long).map(byte).collect(),
        false => vec![0u8; long],
    };
    let got = w.ibcast(data, p - 1)?.wait()?;
    if got.len() != long || got.iter().enumerate().any(|(i, &b)| b != byte(i)) {
        return Err(fail(format!("ibcast of {long} bytes wrong on rank {me}")));
    }
    for root in [0, p / 2, p - 1] {
        let n = 3;
        let bc = w.ibcast(
            if me == root {
                (0..n).map(|i| val(root, i)).collect()
            } else {
                vec![0; n]
            },
            root,
        )?;
        let rd = w.ireduce((0..n).map(|i| val(me, i)).collect(), &Op::sum(), root)?;
        let ag = w.iallgather((0..n).map(|i| val(me, i)).collect())?;
        let ga = w.igather((0..n).map(|i| val(me, i)).collect(), root)?;
        let sc = w.iscatter(
            if me == root {
                (0..p * n).map(|i| val(i / n, i % n) + 7).collect()
            } else {
                Vec::new()
            },
            n,
            root,
        )?;
        let aa = w.ialltoall((0..p * n).map(|i| val(me, i)).collect())?;
        // An ordinary collective meanwhile progresses them too.
        w.barrier()?;
        let what = |s: &str| format!("{s} p={p} root={root}");
        let blocks = |f: &dyn Fn(usize, usize) -> u64| -> Vec<u64> {
            (0..p * n).map(|i| f(i / n, i % n)).collect()
        };
        eq(
            &aa.wait()?,
            &blocks(&|r, i| val(r, me * n + i)),
            &what("ialltoall"),
            me,
        )?;
        eq(
            &sc.wait()?,
            &(0..n).map(|i| val(me, i) + 7).collect::<Vec<_>>(),
            &what("iscatter"),
            me,
        )?;
        let g = ga.wait()?;
        if me == root {
            eq(&g, &blocks(&val), &what("igather"), me)?;
        } else {
            eq(&g, &[], &what("igather off the root"), me)?;
        }
        eq(&ag.wait()?, &blocks(&val), &what("iallgather"), me)?;
        let r = rd.wait()?;
        if me == root {
            let sum: Vec<u64> = (0..n).map(|i| (0..p).map(|q| val(q, i)).sum()).collect();
            eq(&r, &sum, &what("ireduce"), me)?;
        } else {
            eq(&r, &[], &what("ireduce off the root"), me)?;
        }
        eq(
            &bc.wait()?,
            &(0..n).map(|i| val(root, i)).collect::<Vec<_>>(),
            &what("ibcast"),
            me,
        )?;
    }
    // The v-variants with uneven counts (some zero), scans and reduce-scatter,
    // again all in flight at once.
    let counts: Vec<usize> = (0..p).map(|r| r % 3).collect();
    let total: usize = counts.iter().sum();
    let start = |r: usize| counts[..r].iter().sum::<usize>();
    let concat: Vec<u64> = (0..p)
        .flat_map(|r| (0..counts[r]).map(move |i| val(r, i)))
        .collect();
    let root = p / 2;
    let gv = w.igatherv((0..counts[me]).map(|i| val(me, i)).collect(), &counts, root)?;
    let sv = w.iscatterv(
        if me == root {
            concat.clone()
        } else {
            Vec::new()
        },
        &counts,
        root,
    )?;
    let agv = w.iallgatherv((0..counts[me]).map(|i| val(me, i)).collect(), &counts)?;
    // Rank me sends (me + j) % 3 elements to rank j, so it receives (i + me) % 3 from rank i.
    let sc: Vec<usize> = (0..p).map(|j| (me + j) % 3).collect();
    let rc: Vec<usize> = (0..p).map(|i| (i + me) % 3).collect();
    let a2v_send: Vec<u64> = (0..p)
        .flat_map(|j| (0..sc[j]).map(move |i| val(me, j * 10 + i)))
        .collect();
    let a2v = w.ialltoallv(a2v_send, &sc, &rc)?;
    let isc = w.iscan(vec![me as u64 + 1, 2], &Op::sum())?;
    let iex = w.iexscan(vec![me as u64 + 1, 2], &Op::sum())?;
    // "Keep the left operand": not commutative, so rank order shows.
    let left = Op::user(false, |a: &[u64], b: &mut [u64]| b.copy_from_slice(a));
    let iscl = w.iscan(vec![me as u64 + 5], &left)?;
    let rs = w.ireduce_scatter(
        (0..total).map(|i| (me + i) as u64).collect(),
        &counts,
        &Op::sum(),
    )?;
    let rsl = w.ireduce_scatter(
        (0..total).map(|i| (me * 100 + i) as u64).collect(),
        &counts,
        &left,
    )?;

    let what = |s: &str| format!("{s} p={p}");
    let mut rsl_want = Vec::new();
    for i in start(me)..start(me) + counts[me] {
        rsl_want.push(i as u64); // rank 0's element
    }
    eq(
        &rsl.wait()?,
        &rsl_want,
        &what("ireduce_scatter, non-commutative"),
        me,
    )?;
    let rs_want: Vec<u64> = (start(me)..start(me) + counts[me])
        .map(|i| (0..p).map(|r| (r + i) as u64).sum())
        .collect();
    eq(&rs.wait()?, &rs_want, &what("ireduce_scatter"), me)?;
    // Nothing at all to reduce.
    let none = w.ireduce_scatter(Vec::<u64>::new(), &vec![0; p], &Op::sum())?;
    eq(&none.wait()?, &[], &what("ireduce_scatter of nothing"), me)?;
    eq(&iscl.wait()?, &[5], &what("iscan, non-commutative"), me)?;
    let pre = |k: usize| (k * (k + 1) / 2) as u64;
    let ex = iex.wait()?;
    if me > 0 {
        eq(&ex, &[pre(me), 2 * me as u64], &what("iexscan"), me)?;
    } else {
        eq(&ex, &[1, 2], &what("iexscan on rank 0"), me)?;
    }
    eq(
        &isc.wait()?,
        &[pre(me + 1), 2 * (me as u64 + 1)],
        &what("iscan"),
        me,
    )?;
    let a2v_want: Vec<u64> = (0..p)
        .flat_map(|i| (0..rc[i]).map(move |k| val(i, me * 10 + k)))
        .collect();
    eq(&a2v.wait()?, &a2v_want, &what("ialltoallv"), me)?;
    eq(&agv.wait()?, &concat, &what("iallgatherv"), me)?;
    eq(
        &sv.wait()?,
        &concat[start(me)..start(me) + counts[me]],
        &what("iscatterv"),
        me,
    )?;
    let g = gv.wait()?;
    eq(
        &g,
        if me == root { &concat[..] } else { &[] },
        &what("igatherv"),
        me,
    )?;

    // A neighbourhood exchange around a ring: block 0 to the left, block 1
    // to the right; slot 0 from the left, slot 1 from the right (with 1 or 2
    // ranks the same rank is both neighbours: the listing order pairs them).
    let (l, r) = ((me + p - 1) % p, (me + 1) % p);
    let sends = [(r, 1), (l, 0)];
    let recvs = [(l, 0), (r, 1)];
    let got = w
        .ineighbor_exchange(
            vec![me as u64 * 10, me as u64 * 10 + 1],
            &[1, 1],
            &sends,
            &[1, 1],
            &recvs,
        )?
        .wait()?;
    eq(
        &got,
        &[l as u64 * 10 + 1, r as u64 * 10],
        &what("ineighbor_exchange"),
        me,
    )?;
    // Only from the right now: slot 0 keeps what it held.
    let mut slots = [7u64, 7];
    w.neighbor_exchange(
        &[me as u64],
        &[1],
        &[(l, 0)],
        &mut slots,
        &[1, 1],
        &[(r, 1)],
    )?;
    eq(&slots, &[7, r as u64], &what("neighbor_exchange"), me)?;
    if w.ineighbor_exchange(vec![0u8], &[1], &[(p, 0)], &[], &[])
        .is_ok()
    {
        return Err(fail(format!(
            "a neighbour exchange to rank {p} of {p} accepted"
        )));
    }

    // A request dropped unwaited does not disturb the next collectives.
    drop(w.ibcast(vec![me as u8; 5], 0)?);
    let mut x = [1u32];
    w.allreduce_in_place(&mut x, &Op::sum())?;
    eq(&x, &[p as u32], "allreduce after a dropped ibcast", me)?;
    // An owned collective dropped unwaited keeps its buffers until it is
    // over: this allgather's result (36 MiB, which the allocator maps
    // apart and unmaps when freed) is written round by round after the
    // drop, while the allreduce below waits for it to complete.
    let long = (36 << 20) / 8 / p;
    drop(w.iallgather(vec![me as u64; long])?);
    drop(w.iexscan(vec![me as u64; long], &Op::sum())?);
    w.allreduce_in_place(&mut x, &Op::sum())?;
    eq(
        &x,
        &[(p * p) as u32],
        "allreduce after dropped long ones",
        me,
    )?;
    // Wrong lengths are refused before anything starts.
    if w.ialltoall(vec![0u8; p + 1]).is_ok() && p > 1 {
        return Err(fail(format!(
            "ialltoall of {} elements on {p} ranks accepted",
            p + 1
        )));
    }
    Ok(())
}

/// A scatterv whose root sends rank 1 more than rank 1 receives fails on
/// rank 1, naming the length sent (through the collective area, where the
/// root's card says it, or as a truncated message), instead of filling the
/// receive with part of the block; the other ranks get theirs, and the
/// communicator goes on.
fn mismatched_scatterv(w: &Comm) -> R {
    let (p, me) = (w.size(), w.rank());
    if p < 2 {
        return Ok(());
    }
    // The counts disagree on rank 1's block (the Rust API checks a rank's
    // receive against its own counts, so rank 1 says 300 there). Both
    // lengths go packed through the area at every size of job here
    // (`shm::Packed`: beyond a piece's share, within a half's): each end
    // picks a block's way by the length it knows, so a disagreement across
    // ways is the program's error that nothing can see.
    let ones = if me == 1 { 300 } else { 400 };
    let counts: Vec<usize> = (0..p).map(|r| if r == 1 { ones } else { 700 }).collect();
    let send: Vec<u64> = match me {
        0 => (0..counts.iter().sum::<usize>() as u64).collect(),
        _ => Vec::new(),
    };
    let mut recv = vec![0u64; if me == 1 { 300 } else { 700 }];
    match (me, w.scatterv(&send, &counts, &mut recv, 0)) {
        (1, Err(e)) if e.to_string().contains("3200") => {}
        (1, r) => {
            return Err(fail(format!(
                "a scatterv of 400 elements into 300 on rank 1: {r:?}"
            )))
        }
        (_, r) => {
            r?;
            let from = 700 * me as u64 - if me > 1 { 300 } else { 0 };
            let want: Vec<u64> = (from..from + 700).collect();
            eq(&recv, &want, "scatterv beside a mismatched one", me)?;
        }
    }
    // Started, the same.
    let send: Vec<u64> = send.iter().map(|x| x + 1).collect();
    let r = w.iscatterv(send, &counts, 0).and_then(|r| r.wait());
    match (me, r) {
        (1, Err(e)) if e.to_string().contains("3200") => {}
        (1, r) => {
            return Err(fail(format!(
                "a started scatterv of 400 elements into 300 on rank 1: {:?}",
                r.map(|v| v.len())
            )))
        }
        (_, r) => {
            let recv = r?;
            let from = 700 * me as u64 - if me > 1 { 300 } else { 0 } + 1;
            let want: Vec<u64> = (from..from + 700).collect();
            eq(&recv, &want, "iscatterv beside a mismatched one", me)?;
        }
    }
    w.barrier()
}

fn main() {
    let universe = kumi::init().expect("init");
    let w = universe.world();
    let (p, me) = (w.size(), w.rank());
    let run = || -> R {
        w.barrier()?;
        reductions::<i8>(&w)?;
        reductions::<i16>(&w)?;
        reductions::<i32>(&w)?;
        reductions::<i64>(&w)?;
        reductions::<i128>(&w)?;
        reductions::<isize>(&w)?;
        reductions::<u8>(&w)?;
        reductions::<u16>(&w)?;
        reductions::<u32>(&w)?;
        reductions::<u64>(&w)?;
        reductions::<u128>(&w)?;
        reductions::<usize>(&w)?;
        reductions::<f32>(&w)?;
        reductions::<f64>(&w)?;
        reductions::<Loc<i32>>(&w)?;
        reductions::<Loc<f64>>(&w)?;
        movement::<u8>(&w, 3)?;
        movement::<u128>(&w, 2)?;
        movement::<f64>(&w, 5)?;
        non_commutative(&w)?;
        long_messages(&w)?;
        long_reductions(&w)?;
        nonblocking(&w)?;
        first_collectives(&w)?;
        mismatched_scatterv(&w)?;
        // A split communicator runs collectives of its own.
        let half = w.split(Some((me % 2) as u32), 0)?.expect("member");
        reductions::<u16>(&half)?;
        movement::<i32>(&half, 2)?;
        w.barrier()
    };
    if let Err(e) = run() {
        panic!("rank {me}: {e}");
    }
    if me == 0 {
        println!("coll: all checks passed on {p} ranks");
    }
}
