//! One-sided windows through the Rust API (`kumi::win`), over every rank of
//! the job whichever host it is on:
//! - `atomics`: every rank fetch-adds into every rank's counter M times
//!   (the values each counter hands out must be exactly 0..n*M, and its end
//!   value n*M), adds into a shared array without fetching, and moves 1 MiB
//!   to its right neighbour and back with random offsets; an access outside
//!   a part fails with an error naming it, and the window still works;
//! - `serve`: rank 0 computes for `SERVE_MS` without calling kumi while every
//!   other rank runs K rounds of lock, get, put, unlock on rank 0's part and
//!   a fetch-add: ranks on other hosts are served by rank 0's progress
//!   engine meanwhile (or, with `KUMI_PROGRESS=off`, only once rank 0 calls
//!   kumi again). Rank 0 prints how long each rank's rounds took;
//! - `crossed` (3 ranks, rank 2 on another host than 0 and 1): rank 2 holds
//!   rank 0's lock and, before releasing it, reads rank 1's part while rank
//!   1 waits for that same lock: a rank waiting for a lock must answer
//!   requests for its own part meanwhile (run it with `KUMI_PROGRESS=off`,
//!   where no progress thread does it instead).
//!
//! Rank 0 prints `windows: <mode> passed on <n> ranks`.
//!
//! `kumi run -n 4 target/release/windows atomics|serve`

use kumi::win::{AccOp, Elem, Window};
use kumi::{Comm, Error};
use kumi_tests::Rng;
use std::time::{Duration, Instant};

type R = Result<(), Error>;

fn fail(m: String) -> Error {
    Error::Protocol(m)
}

fn check(ok: bool, m: impl FnOnce() -> String) -> R {
    if ok {
        Ok(())
    } else {
        Err(fail(m()))
    }
}

fn fetch_add(w: &Window, r: usize, at: u64, v: i64) -> Result<i64, Error> {
    let mut old = [0u8; 8];
    w.accumulate(
        r,
        at,
        (AccOp::Sum, Elem::I64),
        &v.to_le_bytes(),
        &[],
        Some(&mut old),
    )?;
    Ok(i64::from_le_bytes(old))
}

fn atomics(c: &Comm) -> R {
    const M: usize = 25;
    const BIG: usize = 1 << 20;
    let (n, me) = (c.size(), c.rank());
    // Part: n counters, a sum, a ticket counter, then BIG bytes.
    let (sum_at, ticket_at, big_at) = (8 * n as u64, 8 * n as u64 + 8, 8 * n as u64 + 16);
    let w = Window::allocate(c, big_at as usize + BIG, 1)?;
    w.fence()?;
    let mut rng = Rng(0xA11CE ^ me as u64);
    let mut got = vec![Vec::new(); n];
    for _ in 0..M {
        for (t, g) in got.iter_mut().enumerate() {
            g.push(fetch_add(&w, t, 8 * me as u64, 1)?);
            // And into rank t's sum, without fetching.
            w.accumulate(
                t,
                sum_at,
                (AccOp::Sum, Elem::I64),
                &2i64.to_le_bytes(),
                &[],
                None,
            )?;
        }
    }
    w.fence()?;
    // Each counter slot `s` of rank t was added to only by rank s, so its
    // values are 0..M in order; the sum slot holds 2*n*M.
    for (t, g) in got.iter().enumerate() {
        check(*g == (0..M as i64).collect::<Vec<_>>(), || {
            format!("rank {me}'s fetch-adds on rank {t} returned {g:?}")
        })?;
    }
    let mut sum = [0u8; 8];
    w.get(me, sum_at, &mut sum)?;
    check(i64::from_le_bytes(sum) == 2 * (n * M) as i64, || {
        format!("sum slot of rank {me}: {}", i64::from_le_bytes(sum))
    })?;
    // One counter everybody hits: distinct tickets, exactly 0..n*M.
    w.fence()?;
    let mut tickets = Vec::new();
    for _ in 0..M {
        tickets.push(fetch_add(&w, n - 1, ticket_at, 1)?);
        if rng.below(4) == 0 {
            std::thread::sleep(Duration::from_micros(rng.below(300)));
        }
    }
    let mut all = vec![0i64; n * M];
    c.allgather(&tickets, &mut all)?;
    all.sort_unstable();
    check(all == (0..(n * M) as i64).collect::<Vec<_>>(), || {
        format!("tickets of the shared counter: {all:?}")
    })?;
    // 1 MiB to the right neighbour at a random offset, then read back.
    let right = (me + 1) % n;
    let data: Vec<u8> = (0..BIG).map(|i| (i * 31 + me) as u8).collect();
    let off = big_at;
    w.put(right, off, &data)?;
    w.fence()?;
    let left = (me + n - 1) % n;
    let mut back = vec![0u8; BIG];
    w.get(me, off, &mut back)?;
    check(
        back.iter()
            .enumerate()
            .all(|(i, &b)| b == (i * 31 + left) as u8),
        || format!("rank {me}: the 1 MiB from rank {left} arrived wrong"),
    )?;
    let at = rng.below(BIG as u64 / 2);
    let mut piece = vec![0u8; BIG / 3];
    w.get(right, off + at, &mut piece)?;
    check(
        piece
            .iter()
            .enumerate()
            .all(|(i, &b)| b == ((at as usize + i) * 31 + me) as u8),
        || format!("rank {me}: a piece read from rank {right} is wrong"),
    )?;
    // Outside the part: refused by name, and the window goes on working.
    let e = w.get(right, off + BIG as u64 - 4, &mut [0u8; 8]);
    check(
        matches!(
            &e,
            Err(Error::InvalidArgument {
                arg: "target_disp",
                ..
            })
        ),
        || format!("an access beyond the part gave {e:?}"),
    )?;
    w.fence()?;
    check(fetch_add(&w, right, 0, 0).is_ok(), || {
        "window unusable after an error".into()
    })?;
    w.fence()?;
    Ok(())
}

fn serve(c: &Comm) -> R {
    const K: usize = 30;
    let ms: u64 = std::env::var("SERVE_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let (n, me) = (c.size(), c.rank());
    let w = Window::allocate(c, 16, 8)?;
    w.fence()?;
    let mut took = [0u64];
    if me == 0 {
        // Compute, never calling kumi.
        let end = Instant::now() + Duration::from_millis(ms);
        let mut x = 1u64;
        while Instant::now() < end {
            for _ in 0..1000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
        }
        std::hint::black_box(x);
    } else {
        let t0 = Instant::now();
        for _ in 0..K {
            w.lock(0, true)?;
            let mut v = [0u8; 8];
            w.get(0, 0, &mut v)?;
            let v = u64::from_le_bytes(v) + 1;
            w.put(0, 0, &v.to_le_bytes())?;
            w.unlock(0, true)?;
            fetch_add(&w, 0, 8, 1)?;
        }
        took[0] = t0.elapsed().as_millis() as u64;
    }
    let mut all = vec![0u64; n];
    c.gather(&took, &mut all, 0)?;
    w.fence()?;
    if me == 0 {
        let mut v = [0u8; 16];
        w.get(0, 0, &mut v)?;
        let (a, b) = (
            u64::from_le_bytes(v[..8].try_into().expect("8")),
            u64::from_le_bytes(v[8..].try_into().expect("8")),
        );
        let want = ((n - 1) * K) as u64;
        check(a == want && b == want, || {
            format!(
                "after {K} rounds of {} ranks: counter {a}, fetch-adds {b}, want {want}",
                n - 1
            )
        })?;
        for (r, t) in all.iter().enumerate().skip(1) {
            println!("windows: rank {r} took {t} ms");
        }
    }
    w.fence()?;
    Ok(())
}

fn crossed(c: &Comm) -> R {
    let me = c.rank();
    let w = Window::allocate(c, 8, 8)?;
    if me == 1 {
        w.put(1, 0, &41u64.to_le_bytes())?;
    }
    w.fence()?;
    if me == 2 {
        w.lock(0, true)?;
    }
    c.barrier()?;
    match me {
        1 => {
            w.lock(0, true)?;
            w.unlock(0, true)?;
        }
        2 => {
            // Let rank 1 start waiting for the lock.
            std::thread::sleep(Duration::from_millis(200));
            let mut v = [0u8; 8];
            w.get(1, 0, &mut v)?;
            check(u64::from_le_bytes(v) == 41, || {
                format!("read {v:?} from rank 1")
            })?;
            w.unlock(0, true)?;
        }
        _ => {}
    }
    w.fence()?;
    Ok(())
}

fn main() {
    let universe = kumi::init().expect("kumi init");
    let w = universe.world();
    let mode = std::env::args().nth(1).unwrap_or_else(|| "atomics".into());
    let r = match mode.as_str() {
        "atomics" => atomics(&w),
        "serve" => serve(&w),
        "crossed" => crossed(&w),
        m => universe.abort(
            2,
            &format!("windows: unknown mode {m} (atomics, serve, crossed)"),
        ),
    };
    if let Err(e) = r {
        universe.abort(1, &format!("windows {mode} on rank {}: {e}", w.rank()));
    }
    if w.rank() == 0 {
        println!("windows: {mode} passed on {} ranks", w.size());
    }
}
