//! NPB MG: V-cycle multigrid for the discrete Poisson problem on a periodic 3-D
//! grid, as NPB 3.x defines it: the right-hand side is zero except +1 at the ten
//! largest and -1 at the ten smallest of `randlc`'s values laid over the grid,
//! the residual operator A and the smoother S use the specification's
//! coefficients (S(a), for classes S, W and A), the restriction P is trilinear
//! finite-element projection and the prolongation Q trilinear interpolation.
//! After one untimed iteration the grid is reset, and `nit` timed iterations of
//! `u = u + M^k r; r = v - A u` follow; the L2 norm of the final residual is
//! checked against the specification's value (1e-8 relative). Mop/s uses NPB's
//! own count: 58 * nit * n^3 operations.
//!
//! Every kernel (`resid`, `psinv`, `rprj3`, `interp`, `norm2u3`, `zran3`) is the
//! reference's loop nest with the same evaluation order, so each grid value is
//! what the serial reference computes; only the norm's sum is associated
//! differently across ranks.
//!
//! Decomposition: 1-D slabs of whole z-planes. Level k (side n_k = n / 2^(lt-k))
//! is *distributed* when k >= kg, where kg is the coarsest level at which every
//! rank still holds at least two planes (n_kg >= 2p; or the finest level when
//! even that is too thin, as long as every rank has a plane). Plane boundaries
//! are fixed at level kg (rank r owns planes (n_kg r / p, n_kg (r+1) / p]) and
//! doubled per finer level, so every finer slab starts and ends on an even plane
//! and restriction and interpolation need nothing beyond one ghost plane on each
//! side, exchanged with the neighbouring slabs after every `resid`, `psinv` and
//! `rprj3` (NPB's `comm3`; the x and y wraps stay inside a rank). Any rank count
//! up to n works, not only powers of two. Levels coarser than kg are
//! *replicated*: the restriction out of level kg allgathers its residual (at most
//! (2p)^3 values), every rank then runs the coarse part of the V-cycle on the
//! whole coarse grids, identically, without messages, and interpolation back into
//! level kg takes each rank's own slice. At the coarse levels that costs little
//! arithmetic and saves a message latency per step.

use super::{randlc, skip, AMULT, SEED};
use crate::figure::{Failure, Figure, Outcome};
use crate::xfer;
use kumi::{scope, Comm};
use std::time::Instant;

/// (grid side n, iterations nit, verification L2 norm) of a class.
pub fn params(class: char) -> Option<(usize, usize, f64)> {
    Some(match class {
        'S' => (32, 4, 0.5307707005734e-04),
        'W' => (128, 4, 0.6467329375339e-05),
        'A' => (256, 4, 0.2433365309069e-05),
        _ => return None,
    })
}

/// The residual operator's coefficients (a(1) = 0 is assumed, as NPB does).
const A: [f64; 4] = [-8.0 / 3.0, 0.0, 1.0 / 6.0, 1.0 / 12.0];
/// The S(a) smoother's coefficients (classes S, W, A; c(3) = 0 is assumed).
const C: [f64; 4] = [-3.0 / 8.0, 1.0 / 32.0, -1.0 / 64.0, 0.0];

/// The relative tolerance of the verification.
const EPSILON: f64 = 1e-8;

/// Tag of a plane sent to the rank above (it becomes that rank's lower ghost).
const T_UP: i32 = 41;
/// Tag of a plane sent to the rank below (its upper ghost).
const T_DOWN: i32 = 42;

/// One level's grid as this rank holds it: planes 0..=l+1 of (n+2)^2 values,
/// local plane i standing for global plane a + i (planes 1..=n are the grid,
/// 0 and n+1 its periodic ghosts).
#[derive(Clone, Copy, Debug)]
struct Level {
    n: usize,
    a: usize,
    l: usize,
    dist: bool,
}

impl Level {
    fn m(&self) -> usize {
        self.n + 2
    }
    fn plane(&self) -> usize {
        self.m() * self.m()
    }
    fn len(&self) -> usize {
        (self.l + 2) * self.plane()
    }
    /// The same level held whole.
    fn whole(&self) -> Level {
        Level {
            n: self.n,
            a: 0,
            l: self.n,
            dist: false,
        }
    }
}

/// Per-row scratch of the stencils (NPB's r1/r2, u1/u2, x1/y1, z1/z2/z3).
struct Rows {
    b1: Vec<f64>,
    b2: Vec<f64>,
    b3: Vec<f64>,
    v: Vec<f64>,
}

impl Rows {
    fn new(m: usize) -> Rows {
        Rows {
            b1: vec![0.0; m],
            b2: vec![0.0; m],
            b3: vec![0.0; m],
            v: vec![0.0; m],
        }
    }
}

/// r = v - A u on the held planes (`v = None`: r = r - A u, as NPB's in-place
/// call on the coarse levels).
fn resid(u: &[f64], v: Option<&[f64]>, r: &mut [f64], lv: &Level, s: &mut Rows) {
    let (n, m) = (lv.n, lv.m());
    let (u1, u2, vrow) = (&mut s.b1[..m], &mut s.b2[..m], &mut s.v[..m]);
    for i3 in 1..=lv.l {
        for i2 in 1..=n {
            let at = |d3: usize, d2: usize| ((i3 + d3 - 1) * m + i2 + d2 - 1) * m;
            let (c, ym, yp) = (at(1, 1), at(1, 0), at(1, 2));
            let (zm, zp) = (at(0, 1), at(2, 1));
            let (zmym, zmyp, zpym, zpyp) = (at(0, 0), at(0, 2), at(2, 0), at(2, 2));
            for i1 in 0..m {
                u1[i1] = u[ym + i1] + u[yp + i1] + u[zm + i1] + u[zp + i1];
                u2[i1] = u[zmym + i1] + u[zmyp + i1] + u[zpym + i1] + u[zpyp + i1];
            }
            match v {
                Some(v) => vrow.copy_from_slice(&v[c..c + m]),
                None => vrow.copy_from_slice(&r[c..c + m]),
            }
            let ur = &u[c..c + m];
            let rr = &mut r[c..c + m];
            for i1 in 1..=n {
                rr[i1] = vrow[i1]
                    - A[0] * ur[i1]
                    - A[2] * (u2[i1] + u1[i1 - 1] + u1[i1 + 1])
                    - A[3] * (u2[i1 - 1] + u2[i1 + 1]);
            }
        }
    }
}

/// u = u + S r on the held planes (the smoother).
fn psinv(r: &[f64], u: &mut [f64], lv: &Level, s: &mut Rows) {
    let (n, m) = (lv.n, lv.m());
    let (r1, r2) = (&mut s.b1[..m], &mut s.b2[..m]);
    for i3 in 1..=lv.l {
        for i2 in 1..=n {
            let at = |d3: usize, d2: usize| ((i3 + d3 - 1) * m + i2 + d2 - 1) * m;
            let (c, ym, yp) = (at(1, 1), at(1, 0), at(1, 2));
            let (zm, zp) = (at(0, 1), at(2, 1));
            let (zmym, zmyp, zpym, zpyp) = (at(0, 0), at(0, 2), at(2, 0), at(2, 2));
            for i1 in 0..m {
                r1[i1] = r[ym + i1] + r[yp + i1] + r[zm + i1] + r[zp + i1];
                r2[i1] = r[zmym + i1] + r[zmyp + i1] + r[zpym + i1] + r[zpyp + i1];
            }
            let rr = &r[c..c + m];
            let ur = &mut u[c..c + m];
            for i1 in 1..=n {
                ur[i1] = ur[i1]
                    + C[0] * rr[i1]
                    + C[1] * (rr[i1 - 1] + rr[i1 + 1] + r1[i1])
                    + C[2] * (r2[i1] + r1[i1 - 1] + r1[i1 + 1]);
            }
        }
    }
}

/// s (coarse level `cl`) = P r (fine level `fl`) on the coarse held planes.
fn rprj3(r: &[f64], fl: &Level, s: &mut [f64], cl: &Level, w: &mut Rows) {
    let (mk, mj, nj) = (fl.m(), cl.m(), cl.n);
    let (x1, y1) = (&mut w.b1[..mk], &mut w.b2[..mk]);
    let at = |i3: usize, i2: usize| (i3 * mk + i2) * mk;
    for j3 in 1..=cl.l {
        let i3 = 2 * j3 - 1;
        for j2 in 1..=nj {
            let i2 = 2 * j2 - 1;
            let (p00, p02, p20, p22) = (
                at(i3, i2),
                at(i3, i2 + 2),
                at(i3 + 2, i2),
                at(i3 + 2, i2 + 2),
            );
            let (p10, p12, p01, p21) = (
                at(i3 + 1, i2),
                at(i3 + 1, i2 + 2),
                at(i3, i2 + 1),
                at(i3 + 2, i2 + 1),
            );
            let p11 = at(i3 + 1, i2 + 1);
            for j1 in 1..mj {
                let i1 = 2 * j1 - 1;
                x1[i1] = r[p10 + i1] + r[p12 + i1] + r[p01 + i1] + r[p21 + i1];
                y1[i1] = r[p00 + i1] + r[p20 + i1] + r[p02 + i1] + r[p22 + i1];
            }
            let out = (j3 * mj + j2) * mj;
            for j1 in 1..=nj {
                let i1 = 2 * j1 - 1;
                let y2 = r[p00 + i1 + 1] + r[p20 + i1 + 1] + r[p02 + i1 + 1] + r[p22 + i1 + 1];
                let x2 = r[p10 + i1 + 1] + r[p12 + i1 + 1] + r[p01 + i1 + 1] + r[p21 + i1 + 1];
                s[out + j1] = 0.5 * r[p11 + i1 + 1]
                    + 0.25 * (r[p11 + i1] + r[p11 + i1 + 2] + x2)
                    + 0.125 * (x1[i1] + x1[i1 + 2] + y2)
                    + 0.0625 * (y1[i1] + y1[i1 + 2]);
            }
        }
    }
}

/// u (fine level `fl`) += Q z (coarse level `cl`), ghost planes included.
fn interp(z: &[f64], cl: &Level, u: &mut [f64], fl: &Level, w: &mut Rows) {
    let (mm, n) = (cl.m(), fl.m());
    let (z1, z2, z3) = (&mut w.b1[..mm], &mut w.b2[..mm], &mut w.b3[..mm]);
    let zat = |i3: usize, i2: usize| (i3 * mm + i2) * mm;
    let uat = |i3: usize, i2: usize| (i3 * n + i2) * n;
    for i3 in 0..=cl.l {
        for i2 in 0..mm - 1 {
            let (z00, z01, z10, z11) = (
                zat(i3, i2),
                zat(i3, i2 + 1),
                zat(i3 + 1, i2),
                zat(i3 + 1, i2 + 1),
            );
            for i1 in 0..mm {
                z1[i1] = z[z01 + i1] + z[z00 + i1];
                z2[i1] = z[z10 + i1] + z[z00 + i1];
                z3[i1] = z[z11 + i1] + z[z10 + i1] + z1[i1];
            }
            let (u00, u01) = (uat(2 * i3, 2 * i2), uat(2 * i3, 2 * i2 + 1));
            let (u10, u11) = (uat(2 * i3 + 1, 2 * i2), uat(2 * i3 + 1, 2 * i2 + 1));
            for i1 in 0..mm - 1 {
                u[u00 + 2 * i1] += z[z00 + i1];
                u[u00 + 2 * i1 + 1] += 0.5 * (z[z00 + i1 + 1] + z[z00 + i1]);
                u[u01 + 2 * i1] += 0.5 * z1[i1];
                u[u01 + 2 * i1 + 1] += 0.25 * (z1[i1] + z1[i1 + 1]);
                u[u10 + 2 * i1] += 0.5 * z2[i1];
                u[u10 + 2 * i1 + 1] += 0.25 * (z2[i1] + z2[i1 + 1]);
                u[u11 + 2 * i1] += 0.25 * z3[i1];
                u[u11 + 2 * i1 + 1] += 0.125 * (z3[i1] + z3[i1 + 1]);
            }
        }
    }
}

/// The solver's state: levels 1..=lt (index 0 unused), u and r per level, v.
struct Mg<'a> {
    w: &'a Comm,
    lt: usize,
    kg: usize,
    lv: Vec<Level>,
    u: Vec<Vec<f64>>,
    r: Vec<Vec<f64>>,
    v: Vec<f64>,
    rows: Rows,
}

impl Mg<'_> {
    /// NPB's comm3: x and y wraps inside each held plane, then the ghost planes
    /// (from the neighbouring slabs, or a local wrap when the level is whole).
    fn halo(w: &Comm, x: &mut [f64], lv: &Level) -> Result<(), Failure> {
        let (n, m, pl, l) = (lv.n, lv.m(), lv.plane(), lv.l);
        for i3 in 1..=l {
            let p = &mut x[i3 * pl..(i3 + 1) * pl];
            for i2 in 1..=n {
                let row = &mut p[i2 * m..(i2 + 1) * m];
                row[0] = row[n];
                row[n + 1] = row[1];
            }
            p.copy_within(n * m..(n + 1) * m, 0);
            p.copy_within(m..2 * m, (n + 1) * m);
        }
        let p = w.size();
        if !lv.dist || p == 1 {
            x.copy_within(l * pl..(l + 1) * pl, 0);
            x.copy_within(pl..2 * pl, (l + 1) * pl);
            return Ok(());
        }
        let me = w.rank();
        let (up, down) = (((me + 1) % p) as i32, ((me + p - 1) % p) as i32);
        let (lo, rest) = x.split_at_mut(pl);
        let (mid, hi) = rest.split_at_mut(l * pl);
        let (first, last) = (&mid[..pl], &mid[(l - 1) * pl..]);
        scope(|s| -> Result<(), Failure> {
            let reqs = vec![
                w.irecv(s, lo, down, T_UP)?,
                w.irecv(s, hi, up, T_DOWN)?,
                w.isend(s, last, up, T_UP)?,
                w.isend(s, first, down, T_DOWN)?,
            ];
            kumi::wait_all(reqs)?;
            Ok(())
        })
    }

    /// r[j] = P r[j + 1], then comm3.
    fn restrict(&mut self, j: usize) -> Result<(), Failure> {
        let (fl, cl) = (self.lv[j + 1], self.lv[j]);
        let (coarse, fine) = self.r.split_at_mut(j + 1);
        if fl.dist && !cl.dist {
            let whole = gather(self.w, &fine[0], &fl)?;
            rprj3(&whole, &fl.whole(), &mut coarse[j], &cl, &mut self.rows);
        } else {
            rprj3(&fine[0], &fl, &mut coarse[j], &cl, &mut self.rows);
        }
        Mg::halo(self.w, &mut coarse[j], &cl)
    }

    /// u[k] += Q u[k - 1].
    fn prolong(&mut self, k: usize) {
        let (cl, fl) = (self.lv[k - 1], self.lv[k]);
        let (coarse, fine) = self.u.split_at_mut(k);
        if fl.dist && !cl.dist {
            let whole = fl.whole();
            let mut t = vec![0.0; whole.len()];
            interp(&coarse[k - 1], &cl, &mut t, &whole, &mut self.rows);
            let off = fl.a * fl.plane();
            for (x, y) in fine[0].iter_mut().zip(&t[off..off + fl.len()]) {
                *x += y;
            }
        } else {
            interp(&coarse[k - 1], &cl, &mut fine[0], &fl, &mut self.rows);
        }
    }

    fn resid_at(&mut self, k: usize) -> Result<(), Failure> {
        let lv = self.lv[k];
        if k == self.lt {
            resid(
                &self.u[k],
                Some(&self.v),
                &mut self.r[k],
                &lv,
                &mut self.rows,
            );
        } else {
            resid(&self.u[k], None, &mut self.r[k], &lv, &mut self.rows);
        }
        Mg::halo(self.w, &mut self.r[k], &lv)
    }

    fn psinv_at(&mut self, k: usize) -> Result<(), Failure> {
        let lv = self.lv[k];
        psinv(&self.r[k], &mut self.u[k], &lv, &mut self.rows);
        Mg::halo(self.w, &mut self.u[k], &lv)
    }

    /// NPB's mg3P: one V-cycle.
    fn v_cycle(&mut self) -> Result<(), Failure> {
        for j in (1..self.lt).rev() {
            self.restrict(j)?;
        }
        self.u[1].fill(0.0);
        self.psinv_at(1)?;
        for k in 2..self.lt {
            self.u[k].fill(0.0);
            self.prolong(k);
            self.resid_at(k)?;
            self.psinv_at(k)?;
        }
        self.prolong(self.lt);
        self.resid_at(self.lt)?;
        self.psinv_at(self.lt)
    }

    /// NPB's norm2u3 on the finest level: (L2 norm, max norm).
    fn norm(&self) -> Result<(f64, f64), Failure> {
        let lv = self.lv[self.lt];
        let (n, m, pl) = (lv.n, lv.m(), lv.plane());
        let (mut s, mut mx) = (0.0f64, 0.0f64);
        for i3 in 1..=lv.l {
            for i2 in 1..=n {
                let row = &self.r[self.lt][i3 * pl + i2 * m..][..m];
                for &x in &row[1..=n] {
                    s += x * x;
                    mx = mx.max(x.abs());
                }
            }
        }
        let mut b = [s];
        xfer::sum(self.w, &mut b)?;
        let mx = xfer::max(self.w, mx)?;
        Ok(((b[0] / (n * n * n) as f64).sqrt(), mx))
    }

    /// NPB's zran3: v = +1 at the ten largest and -1 at the ten smallest of the
    /// generator's values laid over the grid in x-fastest order, 0 elsewhere.
    fn zran3(&mut self) -> Result<(), Failure> {
        let lv = self.lv[self.lt];
        let (n, m, pl) = (lv.n, lv.m(), lv.plane());
        let mut x = SEED;
        randlc(&mut x, skip(AMULT, (n * n * lv.a) as u64));
        // (value, global linear index) of my ten largest and ten smallest.
        let mut big: Vec<(f64, usize)> = Vec::with_capacity(11);
        let mut small: Vec<(f64, usize)> = Vec::with_capacity(11);
        for i3 in 0..lv.l {
            for i2 in 0..n {
                for i1 in 0..n {
                    let val = randlc(&mut x, AMULT);
                    let g = ((lv.a + i3) * n + i2) * n + i1;
                    keep(&mut big, (val, g), |a, b| a > b);
                    keep(&mut small, (val, g), |a, b| a < b);
                }
            }
        }
        let flat = |v: &[(f64, usize)]| -> Vec<f64> {
            v.iter().flat_map(|&(a, g)| [a, g as f64]).collect()
        };
        let mut all_big = Vec::new();
        for part in xfer::allgatherv(self.w, &flat(&big))? {
            for c in part.chunks_exact(2) {
                keep(&mut all_big, (c[0], c[1] as usize), |a, b| a > b);
            }
        }
        let mut all_small = Vec::new();
        for part in xfer::allgatherv(self.w, &flat(&small))? {
            for c in part.chunks_exact(2) {
                keep(&mut all_small, (c[0], c[1] as usize), |a, b| a < b);
            }
        }
        self.v.fill(0.0);
        for (list, val) in [(&all_small, -1.0), (&all_big, 1.0)] {
            for &(_, g) in list.iter() {
                let (i1, i2, i3) = (g % n, (g / n) % n, g / (n * n));
                if (lv.a..lv.a + lv.l).contains(&i3) {
                    self.v[(i3 - lv.a + 1) * pl + (i2 + 1) * m + i1 + 1] = val;
                }
            }
        }
        Mg::halo(self.w, &mut self.v, &lv)
    }
}

/// The whole of a distributed level's grid on every rank, ghosts included.
fn gather(w: &Comm, x: &[f64], lv: &Level) -> Result<Vec<f64>, Failure> {
    let (n, pl) = (lv.n, lv.plane());
    let parts = xfer::allgatherv(w, &x[pl..(lv.l + 1) * pl])?;
    let len = lv.whole().len();
    let mut out = Vec::with_capacity(len);
    out.resize(pl, 0.0);
    for part in parts {
        out.extend_from_slice(&part);
    }
    if out.len() + pl != len {
        return Err(Failure::Usage(format!(
            "mg: gathered {} values for a level of {len}",
            out.len() + pl
        )));
    }
    out.resize(len, 0.0);
    out.copy_within(n * pl..(n + 1) * pl, 0);
    out.copy_within(pl..2 * pl, (n + 1) * pl);
    Ok(out)
}

/// Keeps the ten best of `list` by `better` (values are distinct: the
/// generator does not repeat within a grid).
fn keep(list: &mut Vec<(f64, usize)>, x: (f64, usize), better: impl Fn(f64, f64) -> bool) {
    if list.len() == 10 && !better(x.0, list[9].0) {
        return;
    }
    let at = list
        .iter()
        .position(|y| better(x.0, y.0))
        .unwrap_or(list.len());
    list.insert(at, x);
    list.truncate(10);
}

/// The levels for side `n` over `p` ranks, as the module docs describe:
/// (levels indexed 1..=lt, lt, kg).
fn levels(n: usize, p: usize, me: usize) -> (Vec<Level>, usize, usize) {
    let lt = n.trailing_zeros() as usize;
    let side = |k: usize| n >> (lt - k);
    let kg = (1..=lt).find(|&k| side(k) >= 2 * p).unwrap_or(lt);
    let (b0, b1) = (side(kg) * me / p, side(kg) * (me + 1) / p);
    let mut lv = vec![
        Level {
            n: 0,
            a: 0,
            l: 0,
            dist: false
        };
        lt + 1
    ];
    for (k, slot) in lv.iter_mut().enumerate().skip(1) {
        let n = side(k);
        *slot = if k >= kg {
            let sh = k - kg;
            Level {
                n,
                a: b0 << sh,
                l: (b1 - b0) << sh,
                dist: true,
            }
        } else {
            Level {
                n,
                a: 0,
                l: n,
                dist: false,
            }
        };
    }
    (lv, lt, kg)
}

/// Runs MG of `class`; fails unless the final residual norm verifies (`fault`
/// spoils the norm first, for tests of the failure path).
pub fn run(w: &Comm, class: char, fault: bool, progress: &dyn Fn(usize, usize, &str)) -> Outcome {
    let (n, nit, verify) = params(class)
        .ok_or_else(|| Failure::Usage(format!("mg: unknown class {class}; use S, W or A")))?;
    let (me, p) = (w.rank(), w.size());
    if p > n {
        return Err(Failure::Usage(format!(
            "mg: class {class} has {n} planes, too few for {p} ranks (at most {n})"
        )));
    }
    progress(0, nit + 1, "setup");
    let (lv, lt, kg) = levels(n, p, me);
    let mut mg = Mg {
        w,
        lt,
        kg,
        u: lv.iter().map(|l| vec![0.0; l.len()]).collect(),
        r: lv.iter().map(|l| vec![0.0; l.len()]).collect(),
        v: vec![0.0; lv[lt].len()],
        rows: Rows::new(n + 2),
        lv,
    };
    debug_assert!(mg.kg >= 1 && mg.kg <= mg.lt);
    mg.zran3()?;
    // One untimed iteration, as NPB does; then start again from u = 0.
    mg.resid_at(lt)?;
    mg.v_cycle()?;
    mg.resid_at(lt)?;
    mg.u[lt].fill(0.0);
    w.barrier()?;
    let t = Instant::now();
    mg.resid_at(lt)?;
    mg.norm()?;
    for it in 1..=nit {
        mg.v_cycle()?;
        mg.resid_at(lt)?;
        progress(it, nit + 1, &format!("iteration {it}"));
    }
    let (mut rnm2, rnmu) = mg.norm()?;
    let secs = xfer::max(w, t.elapsed().as_secs_f64())?;
    if fault {
        rnm2 *= 1.0 + 1e-6;
    }
    let err = (rnm2 - verify).abs() / verify;
    if err.is_nan() || err > EPSILON {
        return Err(Failure::check(
            "npb mg residual norm",
            format!("class {class}: L2 norm = {rnm2:.13e}, specification {verify:.13e} (relative error {err:.2e}, tolerance {EPSILON:.0e})"),
        ));
    }
    let mops = 58.0 * nit as f64 * (n * n * n) as f64 * 1e-6 / secs;
    Ok(vec![Figure::new("mg", p, n, "mops", mops)
        .with_str("class", &class.to_string())
        .with_num("rnm2", rnm2)
        .with_num("rnmu", rnmu)
        .with_num("seconds", secs)
        .with_num("replicated_levels", (mg.kg - 1) as f64)
        .with_str("check", "VERIFIED")])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slabs_cover_every_level_and_stay_even_above_the_gather_level() {
        for p in 1..=32 {
            let (lv0, _, kg) = levels(32, p, 0);
            for (k, whole) in lv0.iter().enumerate().skip(1) {
                let mut covered = 0;
                for me in 0..p {
                    let l = levels(32, p, me).0[k];
                    if l.dist {
                        assert_eq!(l.a, covered, "p {p} level {k}");
                        assert!(l.l >= 1);
                        covered += l.l;
                        if k > kg {
                            assert!(l.a.is_multiple_of(2) && l.l.is_multiple_of(2));
                        }
                    } else {
                        assert!(k < kg && l.l == l.n);
                        covered = l.n;
                    }
                }
                assert_eq!(covered, whole.n);
            }
        }
    }

    #[test]
    fn keep_holds_the_ten_extremes_in_order() {
        let mut big = Vec::new();
        for i in 0..100usize {
            keep(&mut big, (((i * 37) % 100) as f64, i), |a, b| a > b);
        }
        let vals: Vec<f64> = big.iter().map(|x| x.0).collect();
        assert_eq!(vals, (90..100).rev().map(|v| v as f64).collect::<Vec<_>>());
    }
}
