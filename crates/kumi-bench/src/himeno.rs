//! The Himeno benchmark: Jacobi iteration for the 3-D Poisson equation, with
//! Himeno's 19-point-style stencil, coefficient arrays, initialization,
//! single-precision data and flop count (34 per point per iteration).
//!
//! Grid sizes are those of Himeno's static C version (array extents
//! mimax x mjmax x mkmax; XS 33x33x65, S 65x65x129, M 129x129x257, L 257x257x513),
//! interior points 1..imax-1 with imax = mimax-1, as the original loops run.
//! The array extents are kept, coefficient arrays included, because Himeno is a
//! memory-bandwidth benchmark: storing `a`, `b`, `c`, `bnd` and `wrk1` is its
//! traffic, not waste. Only `wrk2` (the next `p`) is kept as two planes, whose
//! copy into `p` follows one plane behind the stencil (same values, same copy,
//! without a second pass over memory).
//!
//! The kernel runs each row of k in vectors (AVX-512 or AVX2 picked at run time,
//! no fused multiply-add, so every build computes the same bits), with gosa's
//! squares summed in 16 lanes per row and the rows in double precision.
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
/// Partial sums of gosa per row (one AVX-512 vector of f32).
const LANES: usize = 16;

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
    /// Himeno's `wrk2` (the new `p`), two planes of it: plane l is written to
    /// slot l % 2 and copied into `p` once plane l + 1 is done, so the whole
    /// array never exists; the values and the copy are Himeno's.
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
            wrk2: vec![0.0; 2 * mj * mk],
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
    ///
    /// Himeno's two loops (the stencil into `wrk2`, then `p = wrk2`), with the
    /// copy of plane l-1 done right after plane l is computed: by then nothing
    /// reads plane l-1's old values any more, and both planes are in cache.
    fn jacobi(&mut self) -> f64 {
        let mut gosa = 0.0f64;
        let plane = self.mj * self.mk;
        for l in 1..self.planes - 1 {
            gosa += self.plane(l);
            if l > 1 {
                self.copy_back(l - 1, plane);
            }
        }
        self.copy_back(self.planes - 2, plane);
        gosa
    }

    /// p = wrk2 over the interior points of plane l.
    fn copy_back(&mut self, l: usize, plane: usize) {
        let (mk, kmax) = (self.mk, self.kmax);
        let slot = (l % 2) * plane;
        let (p, w) = (
            &mut self.p[l * plane..(l + 1) * plane],
            &self.wrk2[slot..slot + plane],
        );
        for j in 1..self.jmax - 1 {
            let row = j * mk;
            p[row + 1..row + kmax - 1].copy_from_slice(&w[row + 1..row + kmax - 1]);
        }
    }

    /// The stencil over the interior rows of plane l into `wrk2`; returns the
    /// plane's part of gosa. Picks the widest vector unit the CPU has; the
    /// arithmetic (no fused multiply-add, same order) is the same in every build,
    /// so `p` does not depend on which one ran.
    fn plane(&mut self, l: usize) -> f64 {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU has AVX-512F (checked just above), all that
                // the target features of plane_avx512 require.
                return unsafe { self.plane_avx512(l) };
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2 (checked just above).
                return unsafe { self.plane_avx2(l) };
            }
        }
        self.plane_any(l)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vl,avx2")]
    unsafe fn plane_avx512(&mut self, l: usize) -> f64 {
        self.plane_any(l)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn plane_avx2(&mut self, l: usize) -> f64 {
        self.plane_any(l)
    }

    #[inline(always)]
    fn plane_any(&mut self, l: usize) -> f64 {
        let (mj, mk) = (self.mj, self.mk);
        let plane = mj * mk;
        assert!(l >= 1 && l + 1 < self.planes && self.jmax >= 2 && self.kmax >= 2);
        let n = self.kmax - 2; // interior points of a row: k = 1..kmax-1
        let mut gosa = 0.0f64;
        for j in 1..self.jmax - 1 {
            let row = (l * mj + j) * mk;
            // Rows of p around (l, j), each from k = 0 (n + 2 values).
            let pr = |r: usize| &self.p[r..r + n + 2];
            let (pc, pip, pim) = (pr(row), pr(row + plane), pr(row - plane));
            let (pjp, pjm) = (pr(row + mk), pr(row - mk));
            let (ppp, ppm) = (pr(row + plane + mk), pr(row + plane - mk));
            let (pmp, pmm) = (pr(row - plane + mk), pr(row - plane - mk));
            // Coefficient rows, each from k = 1 (n values).
            let cr = |v: &'_ [f32]| -> *const f32 { v[row + 1..row + 1 + n].as_ptr() };
            let (a0, a1, a2, a3) = (
                cr(&self.a[0]),
                cr(&self.a[1]),
                cr(&self.a[2]),
                cr(&self.a[3]),
            );
            let (b0, b1, b2) = (cr(&self.b[0]), cr(&self.b[1]), cr(&self.b[2]));
            let (c0, c1, c2) = (cr(&self.c[0]), cr(&self.c[1]), cr(&self.c[2]));
            let (bnd, wrk1) = (cr(&self.bnd), cr(&self.wrk1));
            let wrow = (l % 2) * plane + j * mk;
            let out = self.wrk2[wrow + 1..wrow + 1 + n].as_mut_ptr();
            let (pc, pip, pim) = (pc.as_ptr(), pip.as_ptr(), pim.as_ptr());
            let (pjp, pjm) = (pjp.as_ptr(), pjm.as_ptr());
            let (ppp, ppm, pmp, pmm) = (ppp.as_ptr(), ppm.as_ptr(), pmp.as_ptr(), pmm.as_ptr());
            // 16 partial sums of ss^2 (one vector of f32): the row's sum in a
            // fixed order that every build and every decomposition shares.
            let mut acc = [0.0f32; LANES];
            let point = |k: usize| -> f32 {
                // SAFETY: k < n; every p row above was sliced with n + 2
                // values and is read at k, k + 1 and k + 2; every coefficient
                // row and `out` with n values, read or written at k. `out`
                // (in wrk2) overlaps none of the rows read.
                unsafe {
                    let g = |q: *const f32, o: usize| *q.add(k + o);
                    let s0 = g(a0, 0) * g(pip, 1)
                        + g(a1, 0) * g(pjp, 1)
                        + g(a2, 0) * g(pc, 2)
                        + g(b0, 0) * (g(ppp, 1) - g(ppm, 1) - g(pmp, 1) + g(pmm, 1))
                        + g(b1, 0) * (g(pjp, 2) - g(pjm, 2) - g(pjp, 0) + g(pjm, 0))
                        + g(b2, 0) * (g(pip, 2) - g(pim, 2) - g(pip, 0) + g(pim, 0))
                        + g(c0, 0) * g(pim, 1)
                        + g(c1, 0) * g(pjm, 1)
                        + g(c2, 0) * g(pc, 0)
                        + g(wrk1, 0);
                    let ss = (s0 * g(a3, 0) - g(pc, 1)) * g(bnd, 0);
                    *out.add(k) = g(pc, 1) + OMEGA * ss;
                    ss
                }
            };
            let full = n / LANES * LANES;
            for k0 in (0..full).step_by(LANES) {
                for (i, a) in acc.iter_mut().enumerate() {
                    let ss = point(k0 + i);
                    *a += ss * ss;
                }
            }
            for k in full..n {
                let ss = point(k);
                acc[k - full] += ss * ss;
            }
            gosa += acc.iter().map(|&v| v as f64).sum::<f64>();
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The vectorized sweep against Himeno's loop written out point by point,
    /// with every coefficient array random (so each of the 19 terms counts) and
    /// rows long enough for whole vectors plus a remainder.
    #[test]
    fn sweep_matches_himenos_loop() {
        let ext = (7, 6, 41);
        let (imax, jmax, kmax) = (ext.0 - 1, ext.1 - 1, ext.2 - 1);
        let mut s = Slab::new(ext, 1, imax - 1);
        let mut z = 12345u64;
        let mut rnd = || {
            z = z
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (z >> 40) as f32 / (1u64 << 24) as f32
        };
        let arrays: Vec<&mut Vec<f32>> =
            s.a.iter_mut()
                .chain(s.b.iter_mut())
                .chain(s.c.iter_mut())
                .chain([&mut s.bnd, &mut s.wrk1, &mut s.p])
                .collect();
        for v in arrays {
            for x in v.iter_mut() {
                *x = rnd();
            }
        }
        let (mj, mk) = (s.mj, s.mk);
        let at = |i: usize, j: usize, k: usize| (i * mj + j) * mk + k;
        let p0 = s.p.clone();
        let mut want = p0.clone();
        let mut want_gosa = 0.0f64;
        for i in 1..imax - 1 {
            for j in 1..jmax - 1 {
                for k in 1..kmax - 1 {
                    let x = at(i, j, k);
                    let p = |di: isize, dj: isize, dk: isize| {
                        p0[at(
                            (i as isize + di) as usize,
                            (j as isize + dj) as usize,
                            (k as isize + dk) as usize,
                        )]
                    };
                    let s0 = s.a[0][x] * p(1, 0, 0)
                        + s.a[1][x] * p(0, 1, 0)
                        + s.a[2][x] * p(0, 0, 1)
                        + s.b[0][x] * (p(1, 1, 0) - p(1, -1, 0) - p(-1, 1, 0) + p(-1, -1, 0))
                        + s.b[1][x] * (p(0, 1, 1) - p(0, -1, 1) - p(0, 1, -1) + p(0, -1, -1))
                        + s.b[2][x] * (p(1, 0, 1) - p(-1, 0, 1) - p(1, 0, -1) + p(-1, 0, -1))
                        + s.c[0][x] * p(-1, 0, 0)
                        + s.c[1][x] * p(0, -1, 0)
                        + s.c[2][x] * p(0, 0, -1)
                        + s.wrk1[x];
                    let ss = (s0 * s.a[3][x] - p(0, 0, 0)) * s.bnd[x];
                    want_gosa += (ss * ss) as f64;
                    want[x] = p(0, 0, 0) + OMEGA * ss;
                }
            }
        }
        let gosa = s.jacobi();
        assert!(s.p == want, "p after one sweep differs from Himeno's loop");
        let rel = (gosa - want_gosa).abs() / want_gosa;
        assert!(
            rel < 1e-5,
            "gosa {gosa} vs {want_gosa} (relative {rel:.2e})"
        );
    }
}
