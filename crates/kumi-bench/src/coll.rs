//! `kumi bench coll`: latency of the collectives the issue names — barrier,
//! allreduce of 8 B and 1 MiB, bcast of 1 MiB, alltoall of 4 KiB per pair — on
//! all ranks of the job. Each figure is the median over repetitions of the
//! slowest rank's mean time per call (a collective is as slow as its last rank).
//! Records carry an extra `"op"` field ([`Labeled`]).

use crate::Record;
use kumi::{Comm, Error, Op};
use std::time::Instant;

/// A [`Record`] with one extra string field (`"op"` for `coll`, `"mode"` for
/// `hotspot`), printed as the last field of the same JSON object.
#[derive(Clone, Debug, PartialEq)]
pub struct Labeled {
    /// The figure.
    pub record: Record,
    /// Name of the extra field.
    pub key: &'static str,
    /// Its value.
    pub label: String,
}

impl Labeled {
    /// One JSON object: the record's fields, then `"key": "label"`.
    pub fn to_json(&self) -> String {
        let base = self.record.to_json();
        let body = base.strip_suffix('}').unwrap_or(&base);
        format!("{body}, \"{}\": \"{}\"}}", self.key, self.label)
    }
}

/// Times `f` over `iters` calls on every rank; returns the slowest rank's mean.
fn time(w: &Comm, iters: usize, f: &mut dyn FnMut() -> Result<(), Error>) -> Result<f64, Error> {
    w.barrier()?;
    let t = Instant::now();
    for _ in 0..iters {
        f()?;
    }
    let mut s = [t.elapsed().as_secs_f64() / iters as f64];
    w.allreduce_in_place(&mut s, &Op::max())?;
    Ok(s[0])
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Runs the kernel; `reps` repetitions of about `rep_seconds` each.
pub fn run(w: &Comm, reps: usize, rep_seconds: f64) -> Result<Vec<Labeled>, Error> {
    let p = w.size();
    let mut out = Vec::new();
    let mut a8 = [1.0f64];
    let mut big = vec![1.0f64; 1 << 17]; // 1 MiB
    let mut bc = vec![7u8; 1 << 20];
    let send = vec![3u8; 4096 * p];
    let mut recv = vec![0u8; 4096 * p];
    type Case<'a> = (
        &'static str,
        usize,
        Box<dyn FnMut() -> Result<(), Error> + 'a>,
    );
    let cases: Vec<Case> = vec![
        ("barrier", 0, Box::new(|| w.barrier())),
        (
            "allreduce",
            8,
            Box::new(|| w.allreduce_in_place(&mut a8, &Op::sum())),
        ),
        (
            "allreduce",
            1 << 20,
            Box::new(|| w.allreduce_in_place(&mut big, &Op::sum())),
        ),
        ("bcast", 1 << 20, Box::new(|| w.bcast(&mut bc, 0))),
        ("alltoall", 4096, Box::new(|| w.alltoall(&send, &mut recv))),
    ];
    for (op, size, mut f) in cases {
        // Calibrate: grow the count until one run takes a tenth of a repetition.
        let mut iters = 1usize;
        loop {
            let t = time(w, iters, &mut *f)? * iters as f64;
            if t > rep_seconds / 10.0 || iters >= 1 << 20 {
                iters = ((rep_seconds / (t / iters as f64).max(1e-9)) as usize).clamp(1, 1 << 22);
                break;
            }
            iters *= 4;
        }
        let mut times = Vec::new();
        for _ in 0..reps.max(1) {
            times.push(time(w, iters, &mut *f)?);
        }
        out.push(Labeled {
            record: Record {
                bench: "coll".into(),
                np: p,
                size,
                metric: "latency_us".into(),
                value: median(times) * 1e6,
            },
            key: "op",
            label: op.into(),
        });
    }
    Ok(out)
}
