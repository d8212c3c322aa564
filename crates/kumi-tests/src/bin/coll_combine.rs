//! The combining service through real ranks: `fetch_add` on one counter at
//! every arrival level (N ranks x M calls: the previous values must be exactly
//! 0..N*M-1, the final value N*M), with random delays between calls when run
//! with `delays`; test-and-set as a lock; keyed reductions; the level-3 barrier.
//! Rank 0 prints `coll_combine: all checks passed on <n> ranks`.
//!
//! `kumi run -n 6 target/release/coll_combine [M] [delays]`

use kumi::{Arrival, CombineOp, Comm, Error, Op};
use kumi_tests::Rng;
use std::time::Duration;

type R = Result<(), Error>;

fn fail(m: String) -> Error {
    Error::Protocol(m)
}

fn fetch_add_levels(w: &Comm, m: usize, delays: bool) -> R {
    let (p, me) = (w.size(), w.rank());
    let c = w.combiner()?;
    let mut rng = Rng(0xC0FFEE ^ me as u64);
    for (name, arrival) in [
        ("level0", Arrival::Never),
        ("level1", Arrival::Attach),
        ("level2", Arrival::Wait(Duration::from_micros(200))),
        ("level3", Arrival::All),
    ] {
        let mut got = Vec::with_capacity(m);
        for _ in 0..m {
            if delays {
                std::thread::sleep(Duration::from_micros(rng.below(300)));
            }
            got.push(c.fetch_add(name, 1, arrival)?);
        }
        let mut all = vec![0i64; p * m];
        w.gather(&got, &mut all, 0)?;
        c.barrier()?;
        let fin = c.read(name)?;
        if fin != (p * m) as i64 {
            return Err(fail(format!("{name}: final value {fin}, want {}", p * m)));
        }
        if me == 0 {
            all.sort();
            if all != (0..(p * m) as i64).collect::<Vec<_>>() {
                return Err(fail(format!(
                    "{name}: previous values are not 0..{}: {all:?}",
                    p * m
                )));
            }
            println!("ok: fetch_add at {name} ({p} x {m})");
        }
    }
    Ok(())
}

fn lock_and_reductions(w: &Comm) -> R {
    let (p, me) = (w.size(), w.rank());
    let c = w.combiner()?;
    // test_and_set as a lock: nobody else is inside while we are.
    for _ in 0..3 {
        while c.test_and_set("lock")? {
            std::thread::yield_now();
        }
        let inside = c.fetch_add("inside", 1, Arrival::Never)?;
        if inside != 0 {
            return Err(fail(format!(
                "rank {me} entered the lock with {inside} others inside"
            )));
        }
        c.fetch_add("inside", -1, Arrival::Never)?;
        c.reset("lock")?;
    }
    c.barrier()?;
    let s = c.reduce("sum", &[me as i64, 1], CombineOp::Sum)?;
    let want = (p * (p - 1) / 2) as i64;
    if s != [want, p as i64] {
        return Err(fail(format!("keyed sum {s:?}, want [{want}, {p}]")));
    }
    let mx = c.reduce("max", &[me as f64 * 0.5], CombineOp::Max)?;
    if mx != [(p - 1) as f64 * 0.5] {
        return Err(fail(format!("keyed max {mx:?}")));
    }
    // A user operation (registered everywhere first): lane-wise max as bytes.
    c.register_op(2000, |a, b| {
        a.iter().zip(b).map(|(x, y)| *x.max(y)).collect()
    })?;
    c.barrier()?;
    let v = c.reduce("user", &[me as u64], CombineOp::User(2000))?;
    if v != [(p - 1) as u64] {
        return Err(fail(format!("user-op reduction {v:?}")));
    }
    // Combining frames are served while this rank is inside another call.
    let mut x = [1u32];
    w.allreduce_in_place(&mut x, &Op::sum())?;
    if me == 0 {
        println!("ok: lock, keyed reductions, barrier");
    }
    Ok(())
}

fn main() {
    let universe = kumi::init().expect("init");
    let w = universe.world();
    let args: Vec<String> = std::env::args().collect();
    let m = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(20);
    let delays = args.iter().any(|a| a == "delays");
    let run = || -> R {
        fetch_add_levels(&w, m, delays)?;
        lock_and_reductions(&w)?;
        w.barrier()
    };
    if let Err(e) = run() {
        panic!("rank {}: {e}", w.rank());
    }
    if w.rank() == 0 {
        println!("coll_combine: all checks passed on {} ranks", w.size());
    }
}
