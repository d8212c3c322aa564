//! The rank side of `kumi bench checkpoint`: what a coordinated checkpoint
//! costs against the size of each rank's state, and how long a job takes
//! from a rank's death to computing again after `kumi run --max-restarts`
//! restarted it. (The comparison with `dd` is the command's: see
//! `kumi-cli/src/ckbench.rs`.)

use crate::Record;
use kumi::{Comm, Universe};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The state sizes measured: 1 MiB, then by fours up to `max` bytes.
pub fn sizes(max: usize) -> Vec<usize> {
    std::iter::successors(Some(1usize << 20), |s| s.checked_mul(4))
        .take_while(|&s| s <= max.max(1 << 20))
        .collect()
}

/// Seconds per checkpoint (median of `reps`, from a barrier before to a
/// barrier after) for each size of [`sizes`]`(max)`; records from rank 0.
pub fn cost(universe: &Universe, w: &Comm, max: usize, reps: usize) -> kumi::Result<Vec<Record>> {
    let mut ckpt = universe.checkpoints();
    if !ckpt.enabled() {
        return Err(kumi::Error::Checkpoint(
            "kumi bench checkpoint: run the ranks with --checkpoint-dir".into(),
        ));
    }
    let mut out = Vec::new();
    for size in sizes(max) {
        let state = noise(size, w.rank() as u64);
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps.max(1) {
            w.barrier()?;
            let t = Instant::now();
            ckpt.save(|wr| wr.write(&state))?;
            w.barrier()?;
            times.push(t.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        if w.rank() == 0 {
            out.push(Record {
                bench: "checkpoint".into(),
                np: w.size(),
                size,
                metric: "seconds".into(),
                value: times[times.len() / 2],
            });
        }
    }
    Ok(out)
}

/// `len` bytes no disk can store specially (a virtual disk may write zeros
/// faster, or not at all): splitmix64 from `seed`.
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// The restart probe: a first run checkpoints 1 MiB per rank, then rank 1
/// writes the time to `died` and kills itself; the run `kumi run
/// --max-restarts` starts again restores, passes a barrier, and rank 0
/// gives the seconds from the death to there.
pub fn restart_probe(
    universe: &Universe,
    w: &Comm,
    died: &std::path::Path,
) -> kumi::Result<Vec<Record>> {
    let mut ckpt = universe.checkpoints();
    let mut state = vec![w.rank() as u8; 1 << 20];
    if ckpt.restarting() {
        ckpt.restore(|r| r.read(&mut state))?;
        w.barrier()?;
        let t = now_ns();
        if w.rank() == 0 {
            let text = std::fs::read_to_string(died)?;
            let then: u128 = text
                .trim()
                .parse()
                .map_err(|_| kumi::Error::Checkpoint(format!("{}: not a time", died.display())))?;
            return Ok(vec![Record {
                bench: "checkpoint".into(),
                np: w.size(),
                size: state.len(),
                metric: "restart_s".into(),
                value: t.saturating_sub(then) as f64 / 1e9,
            }]);
        }
        return Ok(Vec::new());
    }
    ckpt.save(|wr| wr.write(&state))?;
    w.barrier()?;
    if w.rank() == 1 {
        std::fs::write(died, now_ns().to_string())?;
        // SAFETY: raise takes a signal number, no pointers.
        unsafe { libc::raise(libc::SIGKILL) };
    }
    // The others wait for a message that never comes; the launcher stops them.
    let mut b = [0u8];
    w.recv(&mut b, 1, 0)?;
    Ok(Vec::new())
}
