//! Red/black SOR for Laplace's equation on an n x n grid, two-level as in
//! S-3000's Figure 7: rows split into slabs over ranks (ghost rows exchanged by
//! messages), each slab's rows split again over threads inside the rank.
//!
//! A red point depends only on black points and vice versa, so within one colour
//! sweep the order of updates does not matter: the result is bit-identical for
//! any number of ranks and threads, and the check compares the gathered grid
//! with a serial run exactly. Threads get disjoint row ranges; the one row above
//! and below each range (another thread's) is copied first — only its
//! other-colour points are read, and those do not change in this sweep.

use crate::figure::{Failure, Figure, Outcome};
use crate::xfer;
use kumi::{scope, Comm};
use std::time::Instant;

const OMEGA: f64 = 1.5;

/// A slab of rows (with one ghost row each side) of a grid of width n + 2.
struct Slab {
    width: usize,
    /// Global index of local row 0 (the lower ghost row).
    g0: usize,
    rows: usize,
    u: Vec<f64>,
}

impl Slab {
    fn new(n: usize, r0: usize, r1: usize) -> Slab {
        let width = n + 2;
        let rows = r1 - r0 + 2;
        let mut u = vec![0.0; rows * width];
        // Boundary: the top row (global 0) is 1, the rest 0.
        if r0 == 1 {
            u[..width].fill(1.0);
        }
        Slab {
            width,
            g0: r0 - 1,
            rows,
            u,
        }
    }

    /// Updates the interior points of colour `color` ((i + j) % 2) with `threads` threads.
    fn sweep(&mut self, color: usize, threads: usize) {
        let (wd, g0) = (self.width, self.g0);
        let inner = self.rows - 2;
        let t = threads.clamp(1, inner.max(1));
        // Row ranges [lo, hi) in local interior rows 1..=inner.
        let bounds: Vec<(usize, usize)> = (0..t)
            .map(|k| (1 + inner * k / t, 1 + inner * (k + 1) / t))
            .collect();
        let halos: Vec<(Vec<f64>, Vec<f64>)> = bounds
            .iter()
            .map(|&(lo, hi)| {
                (
                    self.u[(lo - 1) * wd..lo * wd].to_vec(),
                    self.u[hi * wd..(hi + 1) * wd].to_vec(),
                )
            })
            .collect();
        let body = &mut self.u[wd..(inner + 1) * wd];
        let mut chunks = Vec::with_capacity(t);
        let mut rest = body;
        for &(lo, hi) in &bounds {
            let (c, r) = rest.split_at_mut((hi - lo) * wd);
            chunks.push((lo, c));
            rest = r;
        }
        std::thread::scope(|s| {
            for ((lo, chunk), (above, below)) in chunks.into_iter().zip(halos.iter()) {
                s.spawn(move || {
                    let nrows = chunk.len() / wd;
                    for r in 0..nrows {
                        let gi = g0 + lo + r;
                        let start = 1 + (gi + color + 1) % 2;
                        for j in (start..wd - 1).step_by(2) {
                            let up = if r == 0 {
                                above[j]
                            } else {
                                chunk[(r - 1) * wd + j]
                            };
                            let down = if r + 1 == nrows {
                                below[j]
                            } else {
                                chunk[(r + 1) * wd + j]
                            };
                            let x = r * wd + j;
                            let nb = up + down + chunk[x - 1] + chunk[x + 1];
                            chunk[x] = (1.0 - OMEGA) * chunk[x] + OMEGA * 0.25 * nb;
                        }
                    }
                });
            }
        });
    }

    fn halo(&mut self, w: &Comm) -> Result<(), Failure> {
        let (me, p, wd) = (w.rank(), w.size(), self.width);
        let rows = self.rows;
        let (lo, rest) = self.u.split_at_mut(wd);
        let (mid, hi) = rest.split_at_mut((rows - 2) * wd);
        let first = &mid[..wd];
        let last = &mid[(rows - 3) * wd..];
        scope(|s| -> Result<(), Failure> {
            let mut reqs = Vec::new();
            if me > 0 {
                reqs.push(w.irecv(s, lo, (me - 1) as i32, 31)?);
                reqs.push(w.isend(s, first, (me - 1) as i32, 32)?);
            }
            if me + 1 < p {
                reqs.push(w.irecv(s, hi, (me + 1) as i32, 32)?);
                reqs.push(w.isend(s, last, (me + 1) as i32, 31)?);
            }
            kumi::wait_all(reqs)?;
            Ok(())
        })
    }

    fn iterate(&mut self, w: Option<&Comm>, threads: usize) -> Result<(), Failure> {
        for color in 0..2 {
            if let Some(w) = w {
                self.halo(w)?;
            }
            self.sweep(color, threads);
        }
        Ok(())
    }
}

fn rows_of(n: usize, p: usize, r: usize) -> (usize, usize) {
    (1 + n * r / p, 1 + n * (r + 1) / p)
}

/// Runs SOR on an n x n interior grid: a check of `check_iters` iterations
/// against a serial run, then `iters` timed iterations.
pub fn run(
    w: &Comm,
    n: usize,
    iters: usize,
    threads: usize,
    progress: &dyn Fn(usize, usize, &str),
) -> Outcome {
    let (me, p) = (w.rank(), w.size());
    if n < 2 * p || n < 2 {
        return Err(Failure::Usage(format!(
            "sor: grid {n} too small for {p} ranks"
        )));
    }
    let threads = threads.max(1);
    let (r0, r1) = rows_of(n, p, me);
    progress(0, 2, "check vs serial");
    let check_iters = 4;
    let mut s = Slab::new(n, r0, r1);
    for _ in 0..check_iters {
        s.iterate(Some(w), threads)?;
    }
    let mine = s.u[s.width..(s.rows - 1) * s.width].to_vec();
    let all = xfer::gatherv(w, &mine, 0)?;
    if me == 0 {
        let mut serial = Slab::new(n, 1, n + 1);
        for _ in 0..check_iters {
            serial.iterate(None, 1)?;
        }
        let got: Vec<f64> = all.concat();
        let want = &serial.u[serial.width..(serial.rows - 1) * serial.width];
        if let Some(i) = (0..want.len()).find(|&i| got.get(i) != Some(&want[i])) {
            return Err(Failure::check(
                "sor grid vs serial",
                format!(
                    "point ({}, {}) is {:?}, serial {}",
                    1 + i / serial.width,
                    i % serial.width,
                    got.get(i),
                    want[i]
                ),
            ));
        }
    }
    progress(1, 2, &format!("{iters} iterations"));
    let mut s = Slab::new(n, r0, r1);
    w.barrier()?;
    let t = Instant::now();
    for _ in 0..iters {
        s.iterate(Some(w), threads)?;
    }
    let secs = xfer::max(w, t.elapsed().as_secs_f64())?;
    progress(2, 2, "done");
    let updates = (n * n) as f64 * iters as f64;
    Ok(vec![Figure::new(
        "sor",
        p,
        n,
        "mflops",
        6.0 * updates / secs / 1e6,
    )
    .with_num("threads", threads as f64)
    .with_num("iterations", iters as f64)
    .with_num("seconds", secs)
    .with_str("check", "PASSED")])
}
