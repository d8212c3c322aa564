//! A 64x64 matrix to the 32nd power with a barrier per step (OCHANOMIZU-5's
//! third measurement of combining).
//!
//! X_{t+1} = A X_t: each rank computes its rows, the rows are gathered so every
//! rank holds X_{t+1}, and a barrier closes the step, as the paper's
//! shared-memory program did. At this size the step is small and the barrier's
//! cost shows; the figure is the time per power, with each barrier variant.
//! Check: X_32 against a serial product on rank 0 (same arithmetic per element,
//! so exactly equal).

use crate::figure::{Failure, Figure, Outcome};
use crate::xfer;
use kumi::Comm;
use std::time::Instant;

/// A barrier implementation to compare.
pub struct BarrierKind<'a> {
    /// Its name in the results (`plain`, `combining`).
    pub name: &'a str,
    /// The barrier itself.
    pub wait: &'a dyn Fn() -> Result<(), Failure>,
}

fn matrix(m: usize) -> Vec<f64> {
    // Row-stochastic, so powers stay bounded.
    let mut a = vec![0.0; m * m];
    for i in 0..m {
        let mut s = 0.0;
        for j in 0..m {
            let v = 1.0 + ((i * 31 + j * 17) % 23) as f64;
            a[i * m + j] = v;
            s += v;
        }
        for j in 0..m {
            a[i * m + j] /= s;
        }
    }
    a
}

fn rows_times(a: &[f64], x: &[f64], m: usize, r0: usize, r1: usize, out: &mut Vec<f64>) {
    out.clear();
    out.resize((r1 - r0) * m, 0.0);
    for i in r0..r1 {
        let row = &mut out[(i - r0) * m..(i - r0 + 1) * m];
        for k in 0..m {
            let aik = a[i * m + k];
            for (o, xv) in row.iter_mut().zip(&x[k * m..(k + 1) * m]) {
                *o += aik * xv;
            }
        }
    }
}

/// A^power by `power - 1` distributed steps; `reps` timed repetitions per barrier.
pub fn run(
    w: &Comm,
    m: usize,
    power: usize,
    reps: usize,
    barriers: &[BarrierKind<'_>],
    progress: &dyn Fn(usize, usize, &str),
) -> Outcome {
    let (me, p) = (w.rank(), w.size());
    if m < p {
        return Err(Failure::Usage(format!(
            "matpow: {m} rows cannot be split over {p} ranks"
        )));
    }
    let a = matrix(m);
    let (r0, r1) = (m * me / p, m * (me + 1) / p);
    let mut out = Vec::new();
    for (bi, b) in barriers.iter().enumerate() {
        progress(bi, barriers.len(), b.name);
        let mut times = Vec::new();
        let mut x = a.clone();
        for _ in 0..reps.max(1) {
            x = a.clone();
            let mut mine = Vec::new();
            (b.wait)()?;
            let t = Instant::now();
            for _ in 1..power {
                rows_times(&a, &x, m, r0, r1, &mut mine);
                x = xfer::allgatherv(w, &mine)?.concat();
                (b.wait)()?;
            }
            times.push(xfer::max(w, t.elapsed().as_secs_f64())?);
        }
        if me == 0 {
            let mut s = a.clone();
            let mut tmp = Vec::new();
            for _ in 1..power {
                rows_times(&a, &s, m, 0, m, &mut tmp);
                std::mem::swap(&mut s, &mut tmp);
            }
            if let Some(i) = (0..m * m).find(|&i| s[i] != x[i]) {
                return Err(Failure::check(
                    "matpow vs serial product",
                    format!(
                        "element ({}, {}) of A^{power} is {}, serial {}",
                        i / m,
                        i % m,
                        x[i],
                        s[i]
                    ),
                ));
            }
        }
        times.sort_by(f64::total_cmp);
        let med = times[times.len() / 2];
        out.push(
            Figure::new("matpow", p, m, "seconds", med)
                .with_str("barrier", b.name)
                .with_num("power", power as f64)
                .with_num("step_us", med / (power - 1).max(1) as f64 * 1e6)
                .with_str("check", "PASSED"),
        );
    }
    progress(barriers.len(), barriers.len(), "done");
    Ok(out)
}
