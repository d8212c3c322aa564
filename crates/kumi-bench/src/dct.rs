//! 2-D DCT (type II, orthonormal) of an image in B x B blocks, blocks dealt
//! round-robin to ranks (DSE's benchmark; 1024x1024 in 8x8, 16x16, 32x32).
//!
//! Each block is transformed separably (rows, then columns) with a cosine table,
//! O(B^3) per block, so bigger blocks mean more work per block and relatively
//! less communication: DSE's point that bigger blocks speed up better, and that
//! too few blocks starve many ranks. The coefficients are gathered on rank 0 and
//! compared with a serial transform there (same arithmetic, so exactly equal);
//! the serial time also gives the speed-up.

use crate::figure::{Failure, Figure, Outcome};
use crate::xfer;
use kumi::Comm;
use std::time::Instant;

fn pixel(i: usize, j: usize) -> f64 {
    // A smooth picture with some texture.
    let (x, y) = (i as f64, j as f64);
    128.0 + 60.0 * (x / 37.0).sin() * (y / 53.0).cos() + ((i * 7 + j * 13) % 17) as f64
}

fn table(b: usize) -> Vec<f64> {
    let mut t = vec![0.0; b * b];
    for u in 0..b {
        let s = if u == 0 {
            (1.0 / b as f64).sqrt()
        } else {
            (2.0 / b as f64).sqrt()
        };
        for x in 0..b {
            t[u * b + x] =
                s * (std::f64::consts::PI * (2 * x + 1) as f64 * u as f64 / (2 * b) as f64).cos();
        }
    }
    t
}

/// Transforms block (bi, bj) of the image; returns B*B coefficients.
fn block(b: usize, bi: usize, bj: usize, t: &[f64], out: &mut Vec<f64>) {
    let mut tmp = vec![0.0; b * b];
    // Rows: tmp[x][v] = sum_y pix[x][y] t[v][y]
    for x in 0..b {
        for v in 0..b {
            let mut s = 0.0;
            for y in 0..b {
                s += pixel(bi * b + x, bj * b + y) * t[v * b + y];
            }
            tmp[x * b + v] = s;
        }
    }
    for u in 0..b {
        for v in 0..b {
            let mut s = 0.0;
            for x in 0..b {
                s += t[u * b + x] * tmp[x * b + v];
            }
            out.push(s);
        }
    }
}

/// Runs the DCT at each block size over an n x n image.
pub fn run(w: &Comm, n: usize, blocks: &[usize], progress: &dyn Fn(usize, usize, &str)) -> Outcome {
    let (me, p) = (w.rank(), w.size());
    let mut out = Vec::new();
    for (k, &b) in blocks.iter().enumerate() {
        progress(k, blocks.len(), &format!("{b}x{b} blocks"));
        if b == 0 || !n.is_multiple_of(b) {
            return Err(Failure::Usage(format!(
                "dct: block {b} does not divide the image side {n}"
            )));
        }
        let t = table(b);
        let per_side = n / b;
        let nblocks = per_side * per_side;
        w.barrier()?;
        let t0 = Instant::now();
        let mut mine = Vec::new();
        for id in (me..nblocks).step_by(p) {
            block(b, id / per_side, id % per_side, &t, &mut mine);
        }
        let all = xfer::gatherv(w, &mine, 0)?;
        let secs = xfer::max(w, t0.elapsed().as_secs_f64())?;
        let mut speedup = f64::NAN;
        if me == 0 {
            let ts = Instant::now();
            let mut serial = Vec::with_capacity(n * n);
            for id in 0..nblocks {
                block(b, id / per_side, id % per_side, &t, &mut serial);
            }
            let serial_secs = ts.elapsed().as_secs_f64();
            speedup = serial_secs / secs;
            let bb = b * b;
            for id in 0..nblocks {
                let (r, slot) = (id % p, id / p);
                let got = all[r].get(slot * bb..(slot + 1) * bb);
                if got != Some(&serial[id * bb..(id + 1) * bb]) {
                    return Err(Failure::check(
                        "dct coefficients vs serial",
                        format!(
                            "block {id} ({b}x{b}) from rank {r} differs from the serial transform"
                        ),
                    ));
                }
            }
        }
        let mut s = [speedup];
        xfer::bcast(w, &mut s, 0)?;
        out.push(
            Figure::new("dct", p, n, "speedup", s[0])
                .with_num("block", b as f64)
                .with_num("blocks", nblocks as f64)
                .with_num("seconds", secs)
                .with_str("check", "PASSED"),
        );
    }
    progress(blocks.len(), blocks.len(), "done");
    Ok(out)
}
