//! A token goes around the ring of ranks; each rank adds its rank number.
//!
//! `kumi run -n 4 target/release/examples/ring [laps]`
use std::time::Instant;

fn main() -> Result<(), kumi::Error> {
    let laps: u64 = std::env::args()
        .nth(1)
        .map_or(1000, |a| a.parse().expect("laps: a number"));
    let universe = kumi::init()?;
    let world = universe.world();
    let (me, n) = (world.rank(), world.size());
    let next = ((me + 1) % n) as i32;
    let prev = ((me + n - 1) % n) as i32;
    let start = Instant::now();
    let mut token = [0u64; 1];
    for _ in 0..laps {
        if me == 0 {
            token[0] += 1;
            world.send(&token, next, 0)?;
            world.recv(&mut token, prev, 0)?;
        } else {
            world.recv(&mut token, prev, 0)?;
            token[0] += me as u64 + 1;
            world.send(&token, next, 0)?;
        }
    }
    if me == 0 {
        let per_lap: u64 = (n as u64 * (n as u64 + 1)) / 2;
        assert_eq!(token[0], laps * per_lap, "token arrived with the wrong sum");
        let t = start.elapsed();
        println!(
            "ring of {n} ranks: {laps} laps, token {} (correct), {:.2} us per hop",
            token[0],
            t.as_secs_f64() * 1e6 / (laps as f64 * n as f64)
        );
    }
    Ok(())
}
