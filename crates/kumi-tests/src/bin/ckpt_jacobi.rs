//! A 1-D Jacobi solver that checkpoints through `kumi::checkpoint`, for the
//! checkpoint and restart tests (the Rust twin of `jacobi_ckpt.c`, with the
//! same arguments, environment and result line):
//!
//! `ckpt_jacobi N STEPS EVERY [SLEEP_US]`: N points per rank, STEPS sweeps,
//! a checkpoint every EVERY sweeps (0: when kumi says one is due). With
//! `JACOBI_PIDS=DIR`, each rank writes its pid to `DIR/pid-<rank>`.

use std::time::Duration;

fn main() -> Result<(), kumi::Error> {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("N STEPS EVERY [SLEEP_US]: numbers"))
        .collect();
    let [n, steps, every, ..] = args[..] else {
        panic!("usage: ckpt_jacobi N STEPS EVERY [SLEEP_US]");
    };
    let sleep = Duration::from_micros(args.get(3).copied().unwrap_or(0));
    let universe = kumi::init()?;
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    if let Some(dir) = std::env::var_os("JACOBI_PIDS") {
        let path = std::path::Path::new(&dir).join(format!("pid-{rank}"));
        std::fs::write(path, format!("{}\n", std::process::id())).expect("pid file");
    }
    let n = n as usize;
    // u[0] and u[n + 1] are halos; the global ends are held at 1 and 0.
    let mut u: Vec<f64> = (0..n + 2)
        .map(|i| ((rank * n + i) % 7) as f64 / 7.0)
        .collect();
    let mut v = vec![0.0f64; n + 2];
    let mut step = [0u64];
    let mut ckpt = universe.checkpoints();
    if let Some(epoch) = ckpt.restore(|r| {
        r.get(&mut u[1..=n])?;
        r.get(&mut step)
    })? {
        if rank == 0 {
            eprintln!("jacobi: restored checkpoint {epoch} at step {}", step[0]);
        }
    }
    let (left, right) = (rank.checked_sub(1), (rank + 1 < size).then_some(rank + 1));
    while step[0] < steps {
        let (mut from_right, mut from_left) = ([0.0f64], [0.0f64]);
        if let Some(l) = left {
            world.send(&u[1..2], l as i32, 0)?;
        }
        if let Some(r) = right {
            world.recv(&mut from_right, r as i32, 0)?;
            world.send(&u[n..n + 1], r as i32, 1)?;
        }
        if let Some(l) = left {
            world.recv(&mut from_left, l as i32, 1)?;
        }
        u[0] = if left.is_some() { from_left[0] } else { 1.0 };
        u[n + 1] = if right.is_some() { from_right[0] } else { 0.0 };
        for i in 1..=n {
            v[i] = 0.5 * (u[i - 1] + u[i + 1]);
        }
        u[1..=n].copy_from_slice(&v[1..=n]);
        std::thread::sleep(sleep);
        step[0] += 1;
        let due = match every {
            0 => ckpt.due()?,
            e => step[0].is_multiple_of(e),
        };
        if due && step[0] < steps {
            ckpt.save(|w| {
                w.put(&u[1..=n])?;
                w.put(&step)
            })?;
        }
    }
    let mut bits = 0u64;
    let mut local = 0.0f64;
    for (i, x) in u[1..=n].iter().enumerate() {
        bits ^= x.to_bits().wrapping_mul((rank * n + i + 2) as u64);
        local += x;
    }
    let mut sums = vec![0.0f64; size];
    let mut all_bits = vec![0u64; size];
    world.gather(&[local], &mut sums, 0)?;
    world.gather(&[bits], &mut all_bits, 0)?;
    if rank == 0 {
        let sum: f64 = sums.iter().sum();
        let bits = all_bits.iter().fold(0, |a, b| a ^ b);
        println!("result steps={} sum={sum:.17e} bits={bits:016x}", step[0]);
    }
    universe.finalize()
}
