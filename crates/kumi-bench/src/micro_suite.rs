//! The micro-benchmark part of the suite: half-round-trip latency and bandwidth
//! from 0 B to 4 MiB (the crate's `pingpong` and `bandwidth`), Hockney's model
//! fitted to the latencies, S-3000's transfer patterns 1 and 2, and collective
//! latencies.
//!
//! Hockney: t(n) = t0 + n / r_inf, fitted by least squares to the half-round-trip
//! times; n_1/2 = t0 * r_inf is the message size that reaches half of r_inf.
//! Pattern 1 is one stream between ranks 0 and 1; pattern 2 is two concurrent
//! streams (0 -> 1 and 1 -> 0 at once), whose summed throughput shows how much
//! the path gains from concurrency (S-3000: nearly twice).

use crate::figure::{Failure, Figure, Outcome};
use crate::{bandwidth, pingpong, xfer, MicroOpts};
use kumi::{scope, Comm};
use std::time::Instant;

/// Least-squares fit of t = t0 + n / r_inf to (bytes, seconds) points; returns
/// (t0 seconds, r_inf bytes per second). `None` if the slope is not positive.
pub fn hockney_fit(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let k = points.len() as f64;
    if k < 2.0 {
        return None;
    }
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |a, p| (a.0 + p.0, a.1 + p.1));
    let (mx, my) = (sx / k, sy / k);
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx == 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    (slope > 0.0).then(|| (my - slope * mx, 1.0 / slope))
}

fn timed(
    w: &Comm,
    reps: usize,
    mut f: impl FnMut() -> Result<(), Failure>,
) -> Result<f64, Failure> {
    // Warm-up, then the median of `reps` runs of a calibrated count.
    f()?;
    let mut iters = 1usize;
    loop {
        w.barrier()?;
        let t = Instant::now();
        for _ in 0..iters {
            f()?;
        }
        let el = xfer::max(w, t.elapsed().as_secs_f64())?;
        if el > 0.01 || iters >= 1 << 20 {
            break;
        }
        iters *= 4;
    }
    let mut v = Vec::new();
    for _ in 0..reps.max(1) {
        w.barrier()?;
        let t = Instant::now();
        for _ in 0..iters {
            f()?;
        }
        v.push(xfer::max(w, t.elapsed().as_secs_f64())? / iters as f64);
    }
    v.sort_by(f64::total_cmp);
    Ok(v[v.len() / 2])
}

/// Two concurrent streams between ranks 0 and 1 (pattern 2) or one (pattern 1):
/// summed MB/s for `size`-byte messages, `window` in flight.
fn pattern(w: &Comm, size: usize, both: bool, reps: usize) -> Result<f64, Failure> {
    let me = w.rank();
    let window = 16;
    let sbuf = vec![7u8; size];
    let mut rbufs: Vec<Vec<u8>> = (0..window).map(|_| vec![0u8; size]).collect();
    let t = timed(w, reps, || {
        if me > 1 {
            return Ok(());
        }
        let peer = (1 - me) as i32;
        let sends = both || me == 0;
        let recvs = both || me == 1;
        scope(|s| -> Result<(), Failure> {
            let mut reqs = Vec::new();
            if recvs {
                for b in rbufs.iter_mut() {
                    reqs.push(w.irecv(s, b, peer, 51)?);
                }
            }
            if sends {
                for _ in 0..window {
                    reqs.push(w.isend(s, &sbuf, peer, 51)?);
                }
            }
            kumi::wait_all(reqs)?;
            Ok(())
        })?;
        // Close the window so the next one is not overlapped.
        w.sendrecv(&[0u8; 0], peer, 52, &mut [0u8; 0], peer, 52)?;
        Ok(())
    })?;
    let streams = if both { 2.0 } else { 1.0 };
    Ok(streams * (window * size) as f64 / t / 1e6)
}

/// Runs the micro suite; `max_size` bounds the message sizes.
pub fn run(
    w: &Comm,
    max_size: usize,
    reps: usize,
    rep_seconds: f64,
    progress: &dyn Fn(usize, usize, &str),
) -> Outcome {
    let np = w.size();
    if np < 2 {
        return Err(Failure::Usage("micro needs at least 2 ranks".into()));
    }
    let o = MicroOpts::powers_of_two(max_size, reps, rep_seconds);
    let steps = 5;
    progress(0, steps, "latency");
    let mut out: Vec<Figure> = pingpong(w, &o)?.into_iter().map(Figure::from).collect();
    let mut pts: Vec<(f64, f64)> = out
        .iter()
        .map(|f| (f.size as f64, f.value * 1e-6))
        .collect();
    pts.retain(|p| p.0 >= 1024.0 || p.0 == 0.0);
    progress(1, steps, "bandwidth");
    out.extend(bandwidth(w, &o, 64)?.into_iter().map(Figure::from));
    if w.rank() == 0 {
        if let Some((t0, r)) = hockney_fit(&pts) {
            out.push(
                Figure::new("hockney", np, 0, "r_inf_MBps", r / 1e6).with_num("t0_us", t0 * 1e6),
            );
            out.push(
                Figure::new("hockney", np, 0, "n_half_bytes", t0 * r).with_num("t0_us", t0 * 1e6),
            );
        }
    }
    progress(2, steps, "patterns 1 and 2");
    let mut size = 4096;
    while size <= max_size {
        let p1 = pattern(w, size, false, reps)?;
        let p2 = pattern(w, size, true, reps)?;
        out.push(Figure::new("pattern1", np, size, "bandwidth_MBps", p1));
        out.push(Figure::new("pattern2", np, size, "bandwidth_MBps", p2).with_num("gain", p2 / p1));
        size *= 4;
    }
    progress(3, steps, "collectives");
    let lat =
        |op: &str, t: f64| Figure::new("coll", np, 8, "latency_us", t * 1e6).with_str("op", op);
    let t = timed(w, reps, || Ok(w.barrier()?))?;
    out.push(Figure::new("coll", np, 0, "latency_us", t * 1e6).with_str("op", "barrier"));
    let mut x = [1.0f64];
    let t = timed(w, reps, || Ok(xfer::sum(w, &mut x)?))?;
    out.push(lat("allreduce", t));
    let mut y = [0u64];
    let t = timed(w, reps, || Ok(xfer::bcast(w, &mut y, 0)?))?;
    out.push(lat("bcast", t));
    // Correctness of the reduction: a sum of ones is the rank count.
    let mut one = [1.0f64];
    xfer::sum(w, &mut one)?;
    if one[0] != np as f64 {
        return Err(Failure::check(
            "allreduce sum",
            format!("sum of ones over {np} ranks is {}", one[0]),
        ));
    }
    progress(steps, steps, "done");
    Ok(if w.rank() == 0 { out } else { Vec::new() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hockney_fit_recovers_the_model() {
        let (t0, r) = (1.5e-6, 8e9);
        let pts: Vec<(f64, f64)> = (0..12)
            .map(|k| {
                let n = (1u64 << (2 * k)) as f64;
                (n, t0 + n / r)
            })
            .collect();
        let (ft0, fr) = hockney_fit(&pts).expect("fits");
        assert!(
            (ft0 - t0).abs() < 1e-9 && (fr / r - 1.0).abs() < 1e-6,
            "{ft0} {fr}"
        );
        assert!(hockney_fit(&[(1.0, 1.0)]).is_none());
    }
}
