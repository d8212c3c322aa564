//! The demo job of the README: a small parallel computation with a readable result.
//!
//! Each rank integrates its share of 4/(1+x^2) over [0,1] (which is pi), the
//! shares are collected at rank 0, then a token circles the ring and rank 0 and
//! rank 1 measure their message latency and bandwidth.
//!
//! `kumi run -n 4 target/release/examples/demo`
use std::time::Instant;

fn main() -> Result<(), kumi::Error> {
    let universe = kumi::init()?;
    let world = universe.world();
    let (me, n) = (world.rank(), world.size());

    // 1. pi by the midpoint rule, 50 million intervals split across ranks.
    let steps = 50_000_000u64;
    let h = 1.0 / steps as f64;
    let t0 = Instant::now();
    let part: f64 = (me as u64..steps)
        .step_by(n)
        .map(|i| {
            let x = (i as f64 + 0.5) * h;
            4.0 / (1.0 + x * x)
        })
        .sum::<f64>()
        * h;
    let compute = t0.elapsed();
    if me == 0 {
        let mut pi = part;
        for src in 1..n {
            let mut other = [0f64];
            world.recv(&mut other, src as i32, 1)?;
            pi += other[0];
        }
        println!("kumi demo: {n} ranks on {}", kumi::hostname());
        println!(
            "  pi ~ {pi:.12} (error {:.1e}), {steps} intervals, {:.0} ms of compute per rank",
            (pi - std::f64::consts::PI).abs(),
            compute.as_secs_f64() * 1e3
        );
    } else {
        world.send(&[part], 0, 1)?;
    }

    // 2. A token around the ring, 1000 laps.
    world.barrier()?;
    let laps = 1000u64;
    let next = ((me + 1) % n) as i32;
    let prev = ((me + n - 1) % n) as i32;
    let t0 = Instant::now();
    let mut token = [0u64];
    for _ in 0..laps {
        if n == 1 {
            token[0] += 1;
            continue;
        }
        if me == 0 {
            token[0] += 1;
            world.send(&token, next, 2)?;
            world.recv(&mut token, prev, 2)?;
        } else {
            world.recv(&mut token, prev, 2)?;
            token[0] += 1;
            world.send(&token, next, 2)?;
        }
    }
    if me == 0 {
        let hops = laps * n as u64;
        assert_eq!(token[0], hops, "token lost a hop");
        println!(
            "  ring: {laps} laps x {n} hops, token = {} (correct), {:.2} us per hop",
            token[0],
            t0.elapsed().as_secs_f64() * 1e6 / hops as f64
        );
    }

    // 3. Latency and bandwidth between rank 0 and rank 1.
    if n >= 2 {
        for &bytes in &[8usize, 1 << 20] {
            let iters = if bytes < 1024 { 20_000 } else { 200 };
            let mut buf = vec![me as u8; bytes];
            world.barrier()?;
            let t0 = Instant::now();
            for _ in 0..iters {
                if me == 0 {
                    world.send(&buf, 1, 3)?;
                    world.recv(&mut buf, 1, 3)?;
                } else if me == 1 {
                    world.recv(&mut buf, 0, 3)?;
                    world.send(&buf, 0, 3)?;
                }
            }
            if me == 0 {
                let half = t0.elapsed().as_secs_f64() / (2 * iters) as f64;
                println!(
                    "  ping-pong rank 0 <-> 1, {bytes:>7} bytes: {:8.3} us half round trip, {:8.1} MB/s",
                    half * 1e6,
                    bytes as f64 / half / 1e6
                );
            }
        }
    }
    Ok(())
}
