//! `kumi bench coll`: latency of every collective ([`OPS`]) at every power of
//! two from 8 B to the largest size, on all ranks of the job, through the
//! Rust API (the C twin, `crates/kumi-bench/c/micro.c`, measures the same
//! through the C ABI, on kumi and on the reference stacks). Each figure is
//! the median over repetitions of the slowest rank's mean time per call (a
//! collective is as slow as its last rank). Records carry an extra `"op"`
//! field ([`Labeled`]).

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

/// The operations `kumi bench coll` measures, in the C twin's order and with
/// its names (`crates/kumi-bench/c/micro.c`). Sizes are bytes per rank: the
/// whole buffer of bcast and of the reductions (`f64`, summed), each rank's
/// block of the gathers and scatters, each pair's block of the all-to-alls;
/// the v forms with the plain ones' counts; the neighbourhood collectives
/// on a periodic ring of every rank (each rank's block to both neighbours,
/// or a block to each). The C twin alone has `alltoallw`, which the Rust
/// API expresses differently.
pub const OPS: &[&str] = &[
    "barrier",
    "bcast",
    "reduce",
    "allreduce",
    "reduce_scatter_block",
    "reduce_scatter",
    "scan",
    "exscan",
    "gather",
    "gatherv",
    "scatter",
    "scatterv",
    "allgather",
    "allgatherv",
    "alltoall",
    "alltoallv",
    "alltoallw",
    "neighbor_allgather",
    "neighbor_alltoall",
    "ibarrier",
    "ibcast",
    "ireduce",
    "iallreduce",
    "igather",
    "iscatter",
    "iallgather",
    "ialltoall",
    "ireduce_scatter_block",
    "ireduce_scatter",
    "iscan",
    "iexscan",
    "igatherv",
    "iscatterv",
    "iallgatherv",
    "ialltoallv",
    "ialltoallw",
    "ineighbor_allgather",
    "ineighbor_alltoall",
];

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

/// Buffers of one size: bytes for the data movers, `f64`s for reductions.
struct Bufs {
    s: Vec<u8>,
    r: Vec<u8>,
    sd: Vec<f64>,
    rd: Vec<f64>,
    counts: Vec<usize>,
    dcounts: Vec<usize>,
}

/// The neighbourhood exchanges of a periodic ring of every rank, in MPI's
/// order: the left neighbour's block first; to each side what arrives at
/// the other's opposite side (the listing order pairs them where one rank
/// is both neighbours).
struct Ring {
    /// An allgather's sends: the one block to both sides.
    allgather: [(usize, usize); 2],
    /// An all-to-all's sends: block 1 to the right, block 0 to the left.
    alltoall: [(usize, usize); 2],
    /// Slot 0 from the left, slot 1 from the right.
    recvs: [(usize, usize); 2],
}

impl Ring {
    fn of(w: &Comm) -> Ring {
        let p = w.size();
        let (left, right) = ((w.rank() + p - 1) % p, (w.rank() + 1) % p);
        Ring {
            allgather: [(right, 0), (left, 0)],
            alltoall: [(right, 1), (left, 0)],
            recvs: [(left, 0), (right, 1)],
        }
    }
}

/// One call of `op` at `size` bytes per rank; `false` if the Rust API has
/// no form of it.
fn call(w: &Comm, op: &str, size: usize, b: &mut Bufs) -> Result<bool, Error> {
    let p = w.size();
    let ring = Ring::of(w);
    let n = (size / 8).max(1);
    let (s, r) = (&b.s[..size], &mut b.r[..size * p.max(2)]);
    let (sd, rd) = (&b.sd[..n], &mut b.rd[..n * p]);
    let sum = Op::sum();
    match op {
        "barrier" => w.barrier()?,
        "bcast" => w.bcast(&mut r[..size], 0)?,
        "reduce" => w.reduce(sd, &mut rd[..n], &sum, 0)?,
        "allreduce" => w.allreduce(sd, &mut rd[..n], &sum)?,
        "reduce_scatter_block" => w.reduce_scatter_block(&b.sd[..n * p], &mut rd[..n], &sum)?,
        "reduce_scatter" => w.reduce_scatter(&b.sd[..n * p], &mut rd[..n], &b.dcounts, &sum)?,
        "scan" => w.scan(sd, &mut rd[..n], &sum)?,
        "exscan" => w.exscan(sd, &mut rd[..n], &sum)?,
        "gather" => w.gather(s, r, 0)?,
        "gatherv" => w.gatherv(s, r, &b.counts, 0)?,
        "scatter" => w.scatter(&b.s[..size * p], &mut r[..size], 0)?,
        "scatterv" => w.scatterv(&b.s[..size * p], &b.counts, &mut r[..size], 0)?,
        "allgather" => w.allgather(s, r)?,
        "allgatherv" => w.allgatherv(s, r, &b.counts)?,
        "alltoall" => w.alltoall(&b.s[..size * p], r)?,
        "alltoallv" => w.alltoallv(&b.s[..size * p], &b.counts, r, &b.counts)?,
        // A periodic ring, as MPI's neighbourhood collectives see it (`Ring`).
        "neighbor_allgather" => w.neighbor_exchange(
            s,
            &[size],
            &ring.allgather,
            &mut r[..2 * size],
            &[size, size],
            &ring.recvs,
        )?,
        "neighbor_alltoall" => w.neighbor_exchange(
            &b.s[..2 * size],
            &[size, size],
            &ring.alltoall,
            &mut r[..2 * size],
            &[size, size],
            &ring.recvs,
        )?,
        "ibarrier" => w.ibarrier()?.wait().map(drop)?,
        // The data movers on borrowed buffers (`kumi::scope`), as a program
        // that cares about speed writes them; the owned forms
        // (`w.iallgather(vec)`) add an allocation and a copy per call
        // (docs/BENCHMARKS.md, session 39).
        "ibcast" => kumi::scope(|sc| w.ibcast_into(sc, &mut r[..size], 0)?.wait())?,
        "ireduce" => kumi::scope(|sc| w.ireduce_into(sc, sd, &mut rd[..n], &sum, 0)?.wait())?,
        "iallreduce" => kumi::scope(|sc| w.iallreduce_into(sc, sd, &mut rd[..n], &sum)?.wait())?,
        "igather" => kumi::scope(|sc| w.igather_into(sc, s, r, 0)?.wait())?,
        "iscatter" => kumi::scope(|sc| {
            w.iscatter_into(sc, &b.s[..size * p], &mut r[..size], 0)?
                .wait()
        })?,
        "iallgather" => kumi::scope(|sc| w.iallgather_into(sc, s, r)?.wait())?,
        "ialltoall" => kumi::scope(|sc| w.ialltoall_into(sc, &b.s[..size * p], r)?.wait())?,
        // No block form in the Rust API: the general one with equal counts.
        "ireduce_scatter_block" | "ireduce_scatter" => kumi::scope(|sc| {
            w.ireduce_scatter_into(sc, &b.sd[..n * p], &mut rd[..n], &b.dcounts, &sum)?
                .wait()
        })?,
        "iscan" => kumi::scope(|sc| w.iscan_into(sc, sd, &mut rd[..n], &sum)?.wait())?,
        "iexscan" => kumi::scope(|sc| w.iexscan_into(sc, sd, &mut rd[..n], &sum)?.wait())?,
        "igatherv" => kumi::scope(|sc| w.igatherv_into(sc, s, r, &b.counts, 0)?.wait())?,
        "iscatterv" => kumi::scope(|sc| {
            w.iscatterv_into(sc, &b.s[..size * p], &b.counts, &mut r[..size], 0)?
                .wait()
        })?,
        "iallgatherv" => kumi::scope(|sc| w.iallgatherv_into(sc, s, r, &b.counts)?.wait())?,
        "ialltoallv" => kumi::scope(|sc| {
            w.ialltoallv_into(sc, &b.s[..size * p], &b.counts, r, &b.counts)?
                .wait()
        })?,
        "ineighbor_allgather" => kumi::scope(|sc| {
            w.ineighbor_exchange_into(
                sc,
                s,
                &[size],
                &ring.allgather,
                &mut r[..2 * size],
                &[size, size],
                &ring.recvs,
            )?
            .wait()
        })?,
        "ineighbor_alltoall" => kumi::scope(|sc| {
            w.ineighbor_exchange_into(
                sc,
                &b.s[..2 * size],
                &[size, size],
                &ring.alltoall,
                &mut r[..2 * size],
                &[size, size],
                &ring.recvs,
            )?
            .wait()
        })?,
        _ => return Ok(false),
    }
    Ok(true)
}

/// Runs the operations of `only` (empty: all) at every power of two from 8 B
/// to `max_size` (barriers once, with no data); `reps` repetitions of about
/// `rep_seconds` each.
pub fn run(
    w: &Comm,
    max_size: usize,
    reps: usize,
    rep_seconds: f64,
    only: &[String],
) -> Result<Vec<Labeled>, Error> {
    let p = w.size();
    let top = max_size.max(8);
    let mut b = Bufs {
        // A block per rank, and at least two (a ring's two neighbours).
        s: vec![3u8; top * p.max(2)],
        r: vec![0u8; top * p.max(2)],
        sd: vec![1.0; (top / 8).max(1) * p],
        rd: vec![0.0; (top / 8).max(1) * p],
        counts: Vec::new(),
        dcounts: Vec::new(),
    };
    let mut out = Vec::new();
    for &op in OPS {
        if !only.is_empty() && !only.iter().any(|o| o == op) {
            continue;
        }
        let sizeless = op.ends_with("barrier");
        let sizes: Vec<usize> = if sizeless {
            vec![0]
        } else {
            std::iter::successors(Some(8usize), |s| Some(s * 2))
                .take_while(|&s| s <= max_size)
                .collect()
        };
        for size in sizes {
            b.counts = vec![size; p];
            b.dcounts = vec![(size / 8).max(1); p];
            if !call(w, op, size, &mut b)? {
                break;
            }
            let mut f = || call(w, op, size, &mut b).map(drop);
            // Calibrate: grow the count until one run takes a tenth of a repetition.
            let mut iters = 1usize;
            loop {
                let t = time(w, iters, &mut f)? * iters as f64;
                if t > rep_seconds / 10.0 || iters >= 1 << 20 {
                    iters =
                        ((rep_seconds / (t / iters as f64).max(1e-9)) as usize).clamp(1, 1 << 22);
                    break;
                }
                iters *= 4;
            }
            let mut times = Vec::new();
            for _ in 0..reps.max(1) {
                times.push(time(w, iters, &mut f)?);
            }
            out.push(Labeled {
                record: Record {
                    bench: "coll".into(),
                    np: p,
                    size,
                    metric: "latency_us".into(),
                    value: crate::median(times) * 1e6,
                },
                key: "op",
                label: op.into(),
            });
        }
    }
    Ok(out)
}
