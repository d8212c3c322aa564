//! The Himeno benchmark: Jacobi iteration for the 3-D Poisson equation, with
//! Himeno's 19-point-style stencil, coefficient arrays, initialization,
//! single-precision data and flop count (34 per point per iteration).
//!
//! Grid sizes are those of Himeno's static C version (array extents
//! mimax x mjmax x mkmax; XS 33x33x65, S 65x65x129, M 129x129x257, L 257x257x513),
//! interior points 1..imax-1 with imax = mimax-1, as the original loops run.
//! The array extents are kept, coefficient arrays included, because Himeno is a
//! memory-bandwidth benchmark: storing `a`, `b`, `c`, `bnd` and `wrk1` is its
//! traffic, not waste.
//!
//! Decomposition: slabs of `i` planes (the outermost index), one ghost plane on
//! each side, exchanged with both neighbours every iteration. Each point's
//! arithmetic does not depend on the decomposition, so `p` is bit-identical to a
//! serial run and only `gosa`'s summation order differs: the check compares gosa
//! after a few iterations with a serial run on rank 0 (relative 1e-9; gosa is
//! summed in double precision).

use crate::figure::{Failure, Figure, Outcome};
use crate::xfer;
use kumi::{scope, Comm};
use std::time::Instant;

/// Array extents (mimax, mjmax, mkmax) of a Himeno size name.
pub fn extents(size: &str) -> Option<(usize, usize, usize)> {
    Some(match size.to_ascii_uppercase().as_str() {
        "TINY" => (9, 9, 17),
        "XS" => (33, 33, 65),
        "S" => (65, 65, 129),
        "M" => (129, 129, 257),
        "L" => (257, 257, 513),
        _ => return None,
    })
}

const OMEGA: f32 = 0.8;

/// One rank's slab: global interior planes `i0..i1` of the `imax` planes plus
/// one ghost plane each side.
struct Slab {
    mj: usize,
    mk: usize,
    jmax: usize,
    kmax: usize,
    planes: usize,
    p: Vec<f32>,
    a: [Vec<f32>; 4],
    b: [Vec<f32>; 3],
    c: [Vec<f32>; 3],
    bnd: Vec<f32>,
    wrk1: Vec<f32>,
    wrk2: Vec<f32>,
}

impl Slab {
    /// Local plane l (0 = lower ghost) holds global plane i0 - 1 + l.
    fn new(ext: (usize, usize, usize), i0: usize, i1: usize) -> Slab {
        let (mi, mj, mk) = ext;
        let (imax, jmax, kmax) = (mi - 1, mj - 1, mk - 1);
        let planes = i1 - i0 + 2;
        let len = planes * mj * mk;
        let mut s = Slab {
            mj,
            mk,
            jmax,
            kmax,
            planes,
            p: vec![0.0; len],
            a: std::array::from_fn(|_| vec![0.0; len]),
            b: std::array::from_fn(|_| vec![0.0; len]),
            c: std::array::from_fn(|_| vec![0.0; len]),
            bnd: vec![0.0; len],
            wrk1: vec![0.0; len],
            wrk2: vec![0.0; len],
        };
        // initmt: the inner box 0..imax x 0..jmax x 0..kmax.
        for l in 0..planes {
            let gi = (i0 + l) as isize - 1;
            if gi < 0 || gi as usize >= imax {
                continue;
            }
            let gi = gi as usize;
            let pv = (gi * gi) as f32 / ((imax - 1) * (imax - 1)) as f32;
            for j in 0..jmax {
                for k in 0..kmax {
                    let x = (l * mj + j) * mk + k;
                    for q in 0..3 {
                        s.a[q][x] = 1.0;
                        s.c[q][x] = 1.0;
                    }
                    s.a[3][x] = 1.0 / 6.0;
                    s.p[x] = pv;
                    s.bnd[x] = 1.0;
                }
            }
        }
        s
    }

    /// One Jacobi sweep over the slab's interior planes; returns its part of gosa.
    fn jacobi(&mut self) -> f64 {
        let (mj, mk) = (self.mj, self.mk);
        let plane = mj * mk;
        let mut gosa = 0.0f64;
        let p = &self.p;
        for l in 1..self.planes - 1 {
            for j in 1..self.jmax - 1 {
                let row = (l * mj + j) * mk;
                let mut acc = 0.0f32;
                for k in 1..self.kmax - 1 {
                    let x = row + k;
                    let s0 = self.a[0][x] * p[x + plane]
                        + self.a[1][x] * p[x + mk]
                        + self.a[2][x] * p[x + 1]
                        + self.b[0][x]
                            * (p[x + plane + mk] - p[x + plane - mk] - p[x - plane + mk]
                                + p[x - plane - mk])
                        + self.b[1][x]
                            * (p[x + mk + 1] - p[x - mk + 1] - p[x + mk - 1] + p[x - mk - 1])
                        + self.b[2][x]
                            * (p[x + plane + 1] - p[x - plane + 1] - p[x + plane - 1]
                                + p[x - plane - 1])
                        + self.c[0][x] * p[x - plane]
                        + self.c[1][x] * p[x - mk]
                        + self.c[2][x] * p[x - 1]
                        + self.wrk1[x];
                    let ss = (s0 * self.a[3][x] - p[x]) * self.bnd[x];
                    acc += ss * ss;
                    self.wrk2[x] = p[x] + OMEGA * ss;
                }
                gosa += acc as f64;
            }
        }
        for l in 1..self.planes - 1 {
            for j in 1..self.jmax - 1 {
                let row = (l * mj + j) * mk;
                self.p[row + 1..row + self.kmax - 1]
                    .copy_from_slice(&self.wrk2[row + 1..row + self.kmax - 1]);
            }
        }
        gosa
    }

    /// Exchanges ghost planes with the neighbouring slabs.
    fn halo(&mut self, w: &Comm) -> Result<(), Failure> {
        let (me, p) = (w.rank(), w.size());
        let plane = self.mj * self.mk;
        let last = self.planes - 2;
        let (lo, rest) = self.p.split_at_mut(plane);
        let (mid, hi) = rest.split_at_mut((self.planes - 2) * plane);
        let first_own = &mid[..plane];
        let last_own = &mid[(last - 1) * plane..];
        scope(|s| -> Result<(), Failure> {
            let mut reqs = Vec::new();
            if me > 0 {
                reqs.push(w.irecv(s, lo, (me - 1) as i32, 11)?);
                reqs.push(w.isend(s, first_own, (me - 1) as i32, 12)?);
            }
            if me + 1 < p {
                reqs.push(w.irecv(s, hi, (me + 1) as i32, 12)?);
                reqs.push(w.isend(s, last_own, (me + 1) as i32, 11)?);
            }
            kumi::wait_all(reqs)?;
            Ok(())
        })
    }
}

/// Splits global interior planes 1..imax-1 over ranks; rank r gets i0..i1.
fn my_planes(imax: usize, p: usize, r: usize) -> (usize, usize) {
    let n = imax - 2;
    let lo = 1 + n * r / p;
    let hi = 1 + n * (r + 1) / p;
    (lo, hi)
}

fn distributed(
    w: &Comm,
    ext: (usize, usize, usize),
    iters: usize,
) -> Result<(Slab, f64, f64), Failure> {
    let (i0, i1) = my_planes(ext.0 - 1, w.size(), w.rank());
    let mut s = Slab::new(ext, i0, i1);
    w.barrier()?;
    let t = Instant::now();
    let mut gosa = 0.0;
    for _ in 0..iters {
        s.halo(w)?;
        let mut g = [s.jacobi()];
        xfer::sum(w, &mut g)?;
        gosa = g[0];
    }
    let secs = xfer::max(w, t.elapsed().as_secs_f64())?;
    Ok((s, gosa, secs))
}

/// Runs Himeno at `size` for `iters` iterations (or, if `None`, as many as fill
/// about `seconds`), checking gosa against a serial run first.
pub fn run(
    w: &Comm,
    size: &str,
    iters: Option<usize>,
    seconds: f64,
    progress: &dyn Fn(usize, usize, &str),
) -> Outcome {
    let ext = extents(size).ok_or_else(|| {
        Failure::Usage(format!(
            "himeno: unknown size {size:?}; use XS, S, M or L (or tiny)"
        ))
    })?;
    let (imax, jmax, kmax) = (ext.0 - 1, ext.1 - 1, ext.2 - 1);
    if imax - 2 < w.size() {
        return Err(Failure::Usage(format!(
            "himeno: size {size} has {} interior planes, fewer than {} ranks",
            imax - 2,
            w.size()
        )));
    }
    progress(0, 3, "check vs serial");
    const CHECK_ITERS: usize = 3;
    let (_, gosa, _) = distributed(w, ext, CHECK_ITERS)?;
    if w.rank() == 0 {
        let mut serial = Slab::new(ext, 1, imax - 1);
        let mut g = 0.0;
        for _ in 0..CHECK_ITERS {
            g = serial.jacobi();
        }
        let rel = (gosa - g).abs() / g.abs().max(f64::MIN_POSITIVE);
        if rel.is_nan() || rel > 1e-9 {
            return Err(Failure::check(
                "himeno gosa vs serial",
                format!("after {CHECK_ITERS} iterations gosa = {gosa:.12e}, serial {g:.12e} (relative {rel:.2e})"),
            ));
        }
    }
    w.barrier()?;
    let nflop = ((kmax - 2) * (jmax - 2) * (imax - 2) * 34) as f64;
    let nn = match iters {
        Some(n) => n.max(1),
        None => {
            progress(1, 3, "calibrate");
            let (_, _, t) = distributed(w, ext, 3)?;
            ((seconds / (t / 3.0)).ceil() as usize).clamp(3, 100_000)
        }
    };
    progress(2, 3, &format!("{nn} iterations"));
    let (_, gosa, secs) = distributed(w, ext, nn)?;
    progress(3, 3, "done");
    let mflops = nflop * nn as f64 / secs / 1e6;
    let points = (imax - 2) * (jmax - 2) * (kmax - 2);
    Ok(vec![Figure::new(
        "himeno",
        w.size(),
        points,
        "mflops",
        mflops,
    )
    .with_str("grid", &format!("{}x{}x{}", ext.0, ext.1, ext.2))
    .with_str("class", &size.to_ascii_uppercase())
    .with_num("iterations", nn as f64)
    .with_num("seconds", secs)
    .with_num("gosa", gosa)
    .with_str("check", "PASSED")])
}
