//! 2-D DCT (type II, orthonormal) of an image in B x B blocks, each rank
//! taking a band of consecutive blocks (DSE's benchmark; 1024x1024 in 8x8,
//! 16x16, 32x32).
//!
//! Each block is transformed separably (rows, then columns) with a cosine table,
//! O(B^3) per block, so bigger blocks mean more work per block and relatively
//! less communication: DSE's point that bigger blocks speed up better, and that
//! too few blocks starve many ranks.
//!
//! Two versions run in one job, alternating, so their times pair up:
//! - **messages**: each rank transforms its blocks into a buffer of its own,
//!   and the coefficients are gathered on rank 0;
//! - **dsm**: the coefficients live in a page-shared segment ([`Shared`],
//!   block after block); each rank stores its blocks' coefficients into it
//!   with plain stores, and a barrier makes them everyone's. A rank's band
//!   is about the pages the segment homes at it (owner computes), and the
//!   pages where two bands meet have two writers. Dealt round-robin instead,
//!   every page would have several writers and each store to a page homed
//!   elsewhere would wait for a computing home to send it: see
//!   docs/BENCHMARKS.md, "DSE's applications on the DSM".
//!
//! The time ends when the coefficients are where the program can use them:
//! on rank 0, or in the shared segment for every rank. Rank 0 then compares
//! them (read through the segment, in the dsm version) with a serial
//! transform (same arithmetic, so exactly equal); the serial time also gives
//! the speed-up.

use crate::dsm::Model;
use crate::figure::{Failure, Figure, Outcome};
use crate::xfer;
use kumi::dsm::Shared;
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

/// Transforms block (bi, bj) of the image into `out`'s B*B coefficients.
fn block(b: usize, bi: usize, bj: usize, t: &[f64], out: &mut [f64]) {
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
            out[u * b + v] = s;
        }
    }
}

/// One block size over the whole image.
struct Grid {
    n: usize,
    b: usize,
    table: Vec<f64>,
}

impl Grid {
    fn blocks(&self) -> usize {
        (self.n / self.b).pow(2)
    }

    /// Block `id`'s coefficients into `out` (B*B values).
    fn transform(&self, id: usize, out: &mut [f64]) {
        let per_side = self.n / self.b;
        block(self.b, id / per_side, id % per_side, &self.table, out);
    }

    /// The band of blocks rank `r` of `p` transforms.
    fn band(&self, r: usize, p: usize) -> std::ops::Range<usize> {
        r * self.blocks() / p..(r + 1) * self.blocks() / p
    }

    /// The messages version: every block's coefficients, block after
    /// block, on rank 0 (empty elsewhere).
    fn by_messages(&self, w: &Comm) -> Result<Vec<f64>, Failure> {
        let bb = self.b * self.b;
        let band = self.band(w.rank(), w.size());
        let mut mine = vec![0.0; band.len() * bb];
        for (id, c) in band.zip(mine.chunks_exact_mut(bb)) {
            self.transform(id, c);
        }
        // Bands are in rank order, so the parts end to end are the image.
        Ok(xfer::gatherv(w, &mine, 0)?.concat())
    }

    /// The dsm version: every rank stores its blocks into `seg`; after the
    /// barrier all of them are there for every rank.
    fn by_dsm(&self, w: &Comm, seg: &Shared<f64>) -> Result<(), Failure> {
        let bb = self.b * self.b;
        // SAFETY: race-free: between two barriers each block is stored by
        // the one rank it was dealt to and read by none; this thread made
        // the segment and touches it outside kumi calls.
        let coef = unsafe { seg.as_mut_slice() };
        for id in self.band(w.rank(), w.size()) {
            self.transform(id, &mut coef[id * bb..(id + 1) * bb]);
        }
        Ok(seg.barrier()?)
    }
}

/// Runs the DCT at each block size over an n x n image, by both versions,
/// `reps` times each, alternating which goes first.
pub fn run(
    w: &Comm,
    n: usize,
    blocks: &[usize],
    reps: usize,
    progress: &dyn Fn(usize, usize, &str),
) -> Outcome {
    let (me, p) = (w.rank(), w.size());
    let reps = reps.max(1);
    let seg: Shared<f64> = Shared::new(w, n * n)?;
    let mut out = Vec::new();
    for (k, &b) in blocks.iter().enumerate() {
        progress(k, blocks.len(), &format!("{b}x{b} blocks"));
        if b == 0 || !n.is_multiple_of(b) {
            return Err(Failure::Usage(format!(
                "dct: block {b} does not divide the image side {n}"
            )));
        }
        let g = Grid {
            n,
            b,
            table: table(b),
        };
        // Rank 0's serial transform, timed in every round like the two
        // versions (the machine's speed drifts), kept for the checks.
        let mut serial = Vec::new();
        let mut serial_secs = Vec::new();
        let mut secs = [Vec::new(), Vec::new()];
        for rep in 0..reps {
            if me == 0 {
                let t = Instant::now();
                serial = vec![0.0; n * n];
                for (id, c) in serial.chunks_exact_mut(b * b).enumerate() {
                    g.transform(id, c);
                }
                serial_secs.push(t.elapsed().as_secs_f64());
            }
            let order = Model::order(rep);
            for model in order {
                w.barrier()?;
                let t0 = Instant::now();
                let got = match model {
                    Model::Messages => g.by_messages(w)?,
                    Model::Dsm => {
                        g.by_dsm(w, &seg)?;
                        Vec::new()
                    }
                };
                secs[model as usize].push(xfer::max(w, t0.elapsed().as_secs_f64())?);
                if me == 0 {
                    let got = match model {
                        Model::Messages => &got[..],
                        // SAFETY: after the barrier no rank stores into the
                        // segment until the next one (below).
                        Model::Dsm => unsafe { &*seg.as_mut_slice() },
                    };
                    g.check(&serial, got, model)?;
                }
                if model == Model::Dsm {
                    // Rank 0's reads end before the next stores begin.
                    seg.barrier()?;
                }
            }
        }
        let mut s = [if me == 0 {
            crate::median(serial_secs)
        } else {
            f64::NAN
        }];
        xfer::bcast(w, &mut s, 0)?;
        for model in [Model::Messages, Model::Dsm] {
            let t = crate::median(secs[model as usize].clone());
            out.push(
                Figure::new("dct", p, n, "speedup", s[0] / t)
                    .with_str("model", model.name())
                    .with_num("block", b as f64)
                    .with_num("blocks", g.blocks() as f64)
                    .with_num("seconds", t)
                    .with_str("check", "PASSED"),
            );
        }
        let ratios: Vec<f64> = secs[1].iter().zip(&secs[0]).map(|(d, m)| d / m).collect();
        out.push(
            Figure::new("dct", p, n, "ratio", crate::median(ratios))
                .with_str("model", "dsm/messages")
                .with_num("block", b as f64)
                .with_num("reps", reps as f64)
                .with_str("check", "PASSED"),
        );
    }
    seg.free()?;
    progress(blocks.len(), blocks.len(), "done");
    Ok(out)
}

impl Grid {
    /// Rank 0's check of one version's coefficients against the serial
    /// transform's.
    fn check(&self, serial: &[f64], got: &[f64], model: Model) -> Result<(), Failure> {
        let bb = self.b * self.b;
        for id in 0..self.blocks() {
            if got.get(id * bb..(id + 1) * bb) != Some(&serial[id * bb..(id + 1) * bb]) {
                return Err(Failure::check(
                    "dct coefficients vs serial",
                    format!(
                        "block {id} ({b}x{b}, {}) differs from the serial transform",
                        model.name(),
                        b = self.b
                    ),
                ));
            }
        }
        Ok(())
    }
}
