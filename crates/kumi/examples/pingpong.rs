//! Rank 0 and rank 1 bounce a message; prints the half round-trip time.
//!
//! `kumi run -n 2 target/release/examples/pingpong [bytes] [iterations]`
use std::time::Instant;

fn main() -> Result<(), kumi::Error> {
    let mut args = std::env::args().skip(1);
    let bytes: usize = args
        .next()
        .map_or(8, |a| a.parse().expect("bytes: a number"));
    let iters: usize = args
        .next()
        .map_or(10_000, |a| a.parse().expect("iterations: a number"));
    let universe = kumi::init()?;
    let world = universe.world();
    if world.size() < 2 {
        eprintln!(
            "pingpong needs 2 ranks: kumi run -n 2 {}",
            std::env::args().next().unwrap_or_default()
        );
        universe.abort(2, "not enough ranks");
    }
    let mut buf = vec![0u8; bytes];
    let me = world.rank();
    world.barrier()?;
    let start = Instant::now();
    for i in 0..iters {
        if me == 0 {
            buf.iter_mut().take(1).for_each(|b| *b = i as u8);
            world.send(&buf, 1, 0)?;
            world.recv(&mut buf, 1, 0)?;
        } else if me == 1 {
            world.recv(&mut buf, 0, 0)?;
            world.send(&buf, 0, 0)?;
        }
    }
    if me == 0 {
        let half = start.elapsed().as_secs_f64() / (2.0 * iters as f64);
        println!(
            "{bytes} bytes: {:.3} us half round trip, {:.1} MB/s",
            half * 1e6,
            bytes as f64 / half / 1e6
        );
    }
    Ok(())
}
