//! NPB CG: the smallest eigenvalue estimate of a sparse symmetric matrix by
//! inverse power iteration, each step a 25-iteration conjugate gradient solve.
//!
//! `makea`/`sprnvc`/`vecset`/`sparse` follow NPB 3.x exactly (every rank builds
//! the whole matrix, untimed, and keeps its block of rows). Rows are split into
//! contiguous blocks; each CG iteration allgathers the direction vector `p` for
//! the sparse product and reduces two dot products. Verification: zeta within
//! 1e-10 (relative) of the specification's value.

use super::{randlc, AMULT, SEED};
use crate::figure::{Failure, Figure, Outcome};
use crate::xfer;
use kumi::Comm;
use std::time::Instant;

/// (na, nonzer, niter, shift, zeta_verify) of a class.
pub fn params(class: char) -> Option<(usize, usize, usize, f64, f64)> {
    Some(match class {
        'S' => (1400, 7, 15, 10.0, 8.5971775078648),
        'W' => (7000, 8, 15, 12.0, 10.362595087124),
        'A' => (14000, 11, 15, 20.0, 17.130235054029),
        _ => return None,
    })
}

const RCOND: f64 = 0.1;

struct Gen {
    tran: f64,
}

impl Gen {
    fn sprnvc(&mut self, n: usize, nz: usize, nn1: usize, v: &mut Vec<f64>, iv: &mut Vec<usize>) {
        v.clear();
        iv.clear();
        while iv.len() < nz {
            let vecelt = randlc(&mut self.tran, AMULT);
            let vecloc = randlc(&mut self.tran, AMULT);
            let i = (nn1 as f64 * vecloc) as usize + 1;
            if i > n || iv.contains(&i) {
                continue;
            }
            v.push(vecelt);
            iv.push(i);
        }
    }
}

fn vecset(v: &mut Vec<f64>, iv: &mut Vec<usize>, i: usize, val: f64) {
    let mut set = false;
    for k in 0..iv.len() {
        if iv[k] == i {
            v[k] = val;
            set = true;
        }
    }
    if !set {
        v.push(val);
        iv.push(i);
    }
}

/// The matrix in CSR form (0-based columns), as NPB's makea builds it.
pub struct Csr {
    /// Row starts (n + 1).
    pub rowstr: Vec<usize>,
    /// Column of each entry.
    pub colidx: Vec<usize>,
    /// Value of each entry.
    pub a: Vec<f64>,
}

/// NPB's makea for order n (the generator state continues from `tran`).
pub fn makea(n: usize, nonzer: usize, shift: f64) -> Csr {
    let mut g = Gen { tran: SEED };
    randlc(&mut g.tran, AMULT); // main() draws zeta once before makea
    let mut nn1 = 1;
    while nn1 < n {
        nn1 *= 2;
    }
    let mut arow = vec![0usize; n];
    let mut acol = vec![Vec::new(); n];
    let mut aelt = vec![Vec::new(); n];
    let (mut v, mut iv) = (Vec::new(), Vec::new());
    for iouter in 0..n {
        g.sprnvc(n, nonzer, nn1, &mut v, &mut iv);
        vecset(&mut v, &mut iv, iouter + 1, 0.5);
        arow[iouter] = iv.len();
        acol[iouter] = iv.iter().map(|&i| i - 1).collect::<Vec<_>>();
        aelt[iouter] = v.clone();
    }
    // sparse()
    let nrows = n;
    let mut rowstr = vec![0usize; nrows + 1];
    for i in 0..n {
        for nza in 0..arow[i] {
            rowstr[acol[i][nza] + 1] += arow[i];
        }
    }
    for j in 1..=nrows {
        rowstr[j] += rowstr[j - 1];
    }
    let nz = rowstr[nrows];
    let mut a = vec![0.0f64; nz];
    let mut colidx = vec![-1i64; nz];
    let mut nzloc = vec![0usize; nrows];
    let mut size = 1.0;
    let ratio = RCOND.powf(1.0 / n as f64);
    for i in 0..n {
        for nza in 0..arow[i] {
            let j = acol[i][nza];
            let scale = size * aelt[i][nza];
            for nzrow in 0..arow[i] {
                let jcol = acol[i][nzrow] as i64;
                let mut va = aelt[i][nzrow] * scale;
                if jcol as usize == j && j == i {
                    va = va + RCOND - shift;
                }
                let mut found = None;
                for k in rowstr[j]..rowstr[j + 1] {
                    if colidx[k] > jcol {
                        let mut kk = rowstr[j + 1] as i64 - 2;
                        while kk >= k as i64 {
                            let u = kk as usize;
                            if colidx[u] > -1 {
                                a[u + 1] = a[u];
                                colidx[u + 1] = colidx[u];
                            }
                            kk -= 1;
                        }
                        colidx[k] = jcol;
                        a[k] = 0.0;
                        found = Some(k);
                        break;
                    } else if colidx[k] == -1 {
                        colidx[k] = jcol;
                        found = Some(k);
                        break;
                    } else if colidx[k] == jcol {
                        nzloc[j] += 1;
                        found = Some(k);
                        break;
                    }
                }
                let k = found.expect("NPB sparse(): every row has room for its entries");
                a[k] += va;
            }
        }
        size *= ratio;
    }
    for j in 1..nrows {
        nzloc[j] += nzloc[j - 1];
    }
    for j in 0..nrows {
        let j1 = if j > 0 { rowstr[j] - nzloc[j - 1] } else { 0 };
        let j2 = rowstr[j + 1] - nzloc[j];
        for (nza, k) in (rowstr[j]..).zip(j1..j2) {
            a[k] = a[nza];
            colidx[k] = colidx[nza];
        }
    }
    for j in 1..=nrows {
        rowstr[j] -= nzloc[j - 1];
    }
    let nnz = rowstr[nrows];
    a.truncate(nnz);
    colidx.truncate(nnz);
    Csr {
        rowstr,
        colidx: colidx.into_iter().map(|c| c as usize).collect(),
        a,
    }
}

/// A column index as stored: 16 bits when the order allows (every NPB class
/// up to A), else 32.
trait Col: Copy {
    fn from_usize(c: usize) -> Option<Self>;
    fn get(self) -> usize;
}

impl Col for u16 {
    fn from_usize(c: usize) -> Option<u16> {
        u16::try_from(c).ok()
    }
    #[inline(always)]
    fn get(self) -> usize {
        self as usize
    }
}

impl Col for u32 {
    fn from_usize(c: usize) -> Option<u32> {
        u32::try_from(c).ok()
    }
    #[inline(always)]
    fn get(self) -> usize {
        self as usize
    }
}

/// One rank's rows of the matrix, re-based to start at 0, with narrow column
/// indices (10 bytes per nonzero with u16 instead of 16: the sparse product
/// streams the matrix, so its size is the product's time).
struct Local<C> {
    rowstr: Vec<usize>,
    colidx: Vec<C>,
    a: Vec<f64>,
    /// Columns of the full vector (every colidx is below it).
    ncols: usize,
}

impl<C: Col> Local<C> {
    /// This rank's rows lo..hi of `m`, or `None` if a column does not fit in C.
    fn new(m: &Csr, lo: usize, hi: usize, ncols: usize) -> Option<Local<C>> {
        let (k0, k1) = (m.rowstr[lo], m.rowstr[hi]);
        let colidx = m.colidx[k0..k1]
            .iter()
            .map(|&c| {
                assert!(c < ncols, "NPB makea: column {c} outside 0..{ncols}");
                C::from_usize(c)
            })
            .collect::<Option<Vec<C>>>()?;
        Some(Local {
            rowstr: m.rowstr[lo..=hi].iter().map(|&k| k - k0).collect(),
            colidx,
            a: m.a[k0..k1].to_vec(),
            ncols,
        })
    }

    /// y = A x (this rank's rows; `x` is the full vector).
    fn matvec(&self, x: &[f64], y: &mut [f64]) {
        assert_eq!(x.len(), self.ncols);
        assert_eq!(y.len() + 1, self.rowstr.len());
        const L: usize = 4;
        let (col, a) = (&self.colidx[..], &self.a[..]);
        for (yr, rs) in y.iter_mut().zip(self.rowstr.windows(2)) {
            let (cs, vs) = (&col[rs[0]..rs[1]], &a[rs[0]..rs[1]]);
            // Four partial sums: four independent chains of dependent adds.
            let mut s = [0.0f64; L];
            let mut cl = cs.chunks_exact(L);
            let mut vl = vs.chunks_exact(L);
            for (c, v) in (&mut cl).zip(&mut vl) {
                for l in 0..L {
                    // SAFETY: Local::new checked every column index < ncols, and
                    // matvec asserted x.len() == ncols.
                    s[l] += v[l] * unsafe { *x.get_unchecked(c[l].get()) };
                }
            }
            let mut t = (s[0] + s[1]) + (s[2] + s[3]);
            for (&c, &v) in cl.remainder().iter().zip(vl.remainder()) {
                // SAFETY: as above, c < ncols == x.len().
                t += v * unsafe { *x.get_unchecked(c.get()) };
            }
            *yr = t;
        }
    }
}

/// The local matrix with the narrowest column index that holds its order.
enum Matrix {
    Narrow(Local<u16>),
    Wide(Local<u32>),
}

impl Matrix {
    fn new(m: &Csr, lo: usize, hi: usize, ncols: usize) -> Matrix {
        match Local::new(m, lo, hi, ncols) {
            Some(l) => Matrix::Narrow(l),
            None => Matrix::Wide(
                Local::new(m, lo, hi, ncols).expect("NPB orders fit in 32-bit indices"),
            ),
        }
    }

    fn matvec(&self, x: &[f64], y: &mut [f64]) {
        match self {
            Matrix::Narrow(l) => l.matvec(x, y),
            Matrix::Wide(l) => l.matvec(x, y),
        }
    }
}

fn dot(x: &[f64], y: &[f64]) -> f64 {
    let mut s = [0.0f64; 4];
    let (x4, y4) = (x.chunks_exact(4), y.chunks_exact(4));
    let tail = x4
        .remainder()
        .iter()
        .zip(y4.remainder())
        .map(|(a, b)| a * b)
        .sum::<f64>();
    for (a, b) in x4.zip(y4) {
        for l in 0..4 {
            s[l] += a[l] * b[l];
        }
    }
    (s[0] + s[1]) + (s[2] + s[3]) + tail
}

struct Dist<'a> {
    w: &'a Comm,
    m: Matrix,
    /// Rows of every rank (for the allgather).
    counts: Vec<usize>,
    /// The full vector the product reads (allgathered into, never reallocated).
    full: Vec<f64>,
    q: Vec<f64>,
    r: Vec<f64>,
    p: Vec<f64>,
}

impl Dist<'_> {
    fn sum(&self, v: f64) -> Result<f64, Failure> {
        let mut s = [v];
        xfer::sum(self.w, &mut s)?;
        Ok(s[0])
    }

    fn dot(&self, x: &[f64], y: &[f64]) -> Result<f64, Failure> {
        self.sum(dot(x, y))
    }

    /// `full` = every rank's `local`, in rank order.
    fn gather(w: &Comm, local: &[f64], full: &mut [f64], counts: &[usize]) -> Result<(), Failure> {
        w.allgatherv(local, full, counts)?;
        Ok(())
    }

    /// NPB's conj_grad: 25 CG iterations on A z = x; returns ||x - A z||.
    fn conj_grad(&mut self, x: &[f64], z: &mut [f64]) -> Result<f64, Failure> {
        let nl = x.len();
        z.fill(0.0);
        self.r.copy_from_slice(x);
        self.p.copy_from_slice(x);
        let mut rho = self.dot(&self.r, &self.r)?;
        for _ in 0..25 {
            Self::gather(self.w, &self.p, &mut self.full, &self.counts)?;
            self.m.matvec(&self.full, &mut self.q);
            let d = self.dot(&self.p, &self.q)?;
            let alpha = rho / d;
            let rho0 = rho;
            let (p, q, r) = (&self.p[..nl], &self.q[..nl], &mut self.r[..nl]);
            let z = &mut z[..nl];
            for j in 0..nl {
                z[j] += alpha * p[j];
                r[j] -= alpha * q[j];
            }
            rho = self.dot(&self.r, &self.r)?;
            let beta = rho / rho0;
            let (p, r) = (&mut self.p[..nl], &self.r[..nl]);
            for j in 0..nl {
                p[j] = r[j] + beta * p[j];
            }
        }
        Self::gather(self.w, z, &mut self.full, &self.counts)?;
        self.m.matvec(&self.full, &mut self.r);
        let s = x
            .iter()
            .zip(&self.r)
            .map(|(a, b)| (a - b) * (a - b))
            .sum::<f64>();
        Ok(self.sum(s)?.sqrt())
    }
}

/// Runs CG of `class`; fails unless zeta verifies (`fault` spoils zeta first,
/// for tests of the failure path).
pub fn run(w: &Comm, class: char, fault: bool, progress: &dyn Fn(usize, usize, &str)) -> Outcome {
    let (na, nonzer, niter, shift, zeta_verify) = params(class)
        .ok_or_else(|| Failure::Usage(format!("cg: unknown class {class}; use S, W or A")))?;
    let (me, p) = (w.rank(), w.size());
    if na < p {
        return Err(Failure::Usage(format!(
            "cg: {na} rows cannot be split over {p} ranks"
        )));
    }
    progress(0, niter + 1, "makea");
    let m = makea(na, nonzer, shift);
    let (lo, hi) = (na * me / p, na * (me + 1) / p);
    let nl = hi - lo;
    let counts: Vec<usize> = (0..p).map(|r| na * (r + 1) / p - na * r / p).collect();
    let mut d = Dist {
        w,
        m: Matrix::new(&m, lo, hi, na),
        counts,
        full: vec![0.0; na],
        q: vec![0.0; nl],
        r: vec![0.0; nl],
        p: vec![0.0; nl],
    };
    drop(m);
    let mut x = vec![1.0; nl];
    let mut z = vec![0.0; nl];
    // One untimed iteration, as NPB does (warms caches and code paths).
    d.conj_grad(&x, &mut z)?;
    let zz = d.dot(&z, &z)?;
    for j in 0..nl {
        x[j] = z[j] / zz.sqrt();
    }
    x.fill(1.0);
    w.barrier()?;
    let t = Instant::now();
    let mut zeta = 0.0;
    let mut rnorm = 0.0;
    for it in 1..=niter {
        rnorm = d.conj_grad(&x, &mut z)?;
        let t1 = d.dot(&x, &z)?;
        let t2 = 1.0 / d.dot(&z, &z)?.sqrt();
        zeta = shift + 1.0 / t1;
        for j in 0..nl {
            x[j] = t2 * z[j];
        }
        progress(it, niter + 1, &format!("iteration {it}"));
    }
    let secs = xfer::max(w, t.elapsed().as_secs_f64())?;
    if fault {
        zeta *= 1.0 + 1e-6;
    }
    let err = (zeta - zeta_verify).abs() / zeta_verify;
    if err.is_nan() || err > 1e-10 {
        return Err(Failure::check(
            "npb cg zeta",
            format!("class {class}: zeta = {zeta:.13e}, specification {zeta_verify:.13e} (relative error {err:.2e})"),
        ));
    }
    let nz = (nonzer * (nonzer + 1)) as f64;
    let mops = 2.0 * (niter * na) as f64 * (3.0 + nz + 25.0 * (5.0 + nz) + 3.0) / secs / 1e6;
    Ok(vec![Figure::new("cg", p, na, "mops", mops)
        .with_str("class", &class.to_string())
        .with_num("zeta", zeta)
        .with_num("rnorm", rnorm)
        .with_num("seconds", secs)
        .with_str("check", "VERIFIED")])
}
