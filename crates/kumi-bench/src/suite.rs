//! The evaluation suite's rank side: one entry point that runs a kernel by name
//! with its problem size, so `kumi bench-rank` needs one arm for all of them.
//!
//! Sizes: each kernel reads `size` its own way (a Himeno size, an NPB class, a
//! list of LU orders, a grid side, a board side); `tiny` is understood by every
//! kernel and is what the tests use; `quick` picks sizes that keep
//! `kumi bench all --quick` under two minutes on a 2-core machine; the default
//! is the papers' size where the machine allows.

use crate::figure::{Failure, Outcome};
use crate::{dct, himeno, knights, lu, matpow, micro_suite, npb, sor};
use kumi::Comm;
use std::io::Write;

/// Kernels [`run`] knows, in the order `kumi bench all` runs them.
pub const KERNELS: &[&str] = &[
    "micro", "lu", "himeno", "cg", "is", "mg", "sor", "knights", "dct", "matpow",
];

/// Options of one run.
#[derive(Clone, Debug, Default)]
pub struct Params {
    /// Problem size (meaning per kernel), `tiny`, or `None` for the default.
    pub size: Option<String>,
    /// Quick sizes and fewer repetitions.
    pub quick: bool,
    /// Timed repetitions where a kernel repeats.
    pub reps: usize,
    /// Threads per rank (sor).
    pub threads: usize,
    /// Iterations, where a kernel takes a count (himeno, sor).
    pub iters: Option<usize>,
    /// Tree depth for knights.
    pub depth: Option<usize>,
    /// Largest message for micro.
    pub max_size: usize,
    /// Length of one micro repetition, seconds.
    pub rep_seconds: f64,
}

/// Environment variable naming a kernel whose result is deliberately spoiled
/// before its check (lu, cg, mg), so tests can see a failed check end the
/// job loudly. Never set in normal use.
pub const FAULT_ENV: &str = "KUMI_BENCH_FAULT";

fn fault(name: &str) -> bool {
    std::env::var(FAULT_ENV).is_ok_and(|v| v == name)
}

impl Params {
    fn tiny(&self) -> bool {
        self.size.as_deref() == Some("tiny")
    }
    fn pick<'a>(&'a self, tiny: &'a str, quick: &'a str, full: &'a str) -> &'a str {
        let s = match self.size.as_deref() {
            Some(s) => s,
            None if self.quick => quick,
            None => full,
        };
        if s == "tiny" {
            tiny
        } else {
            s
        }
    }
}

/// Prints a progress line on rank 0 (`#progress done total label`), which
/// `kumi bench` turns into a progress bar.
pub fn progress(w: &Comm) -> impl Fn(usize, usize, &str) + '_ {
    move |done, total, label| {
        if w.rank() == 0 {
            let mut o = std::io::stdout().lock();
            let _ = writeln!(o, "#progress {done} {total} {label}");
            let _ = o.flush();
        }
    }
}

fn num(s: &str, what: &str) -> Result<usize, Failure> {
    s.trim()
        .parse()
        .map_err(|_| Failure::Usage(format!("{what}: size {s:?} is not a whole number")))
}

/// Runs kernel `name` on `w`. Figures are meant to be printed by rank 0.
pub fn run(name: &str, w: &Comm, o: &Params) -> Outcome {
    let prog = progress(w);
    let reps = if o.reps == 0 { 5 } else { o.reps };
    match name {
        "micro" => {
            let max = if o.tiny() {
                65536
            } else if o.quick {
                o.max_size.min(1 << 20)
            } else {
                o.max_size
            };
            let (reps, secs) = if o.tiny() {
                (1, o.rep_seconds.min(0.005))
            } else {
                (reps, o.rep_seconds)
            };
            micro_suite::run(w, max, reps, secs, &prog)
        }
        "lu" => {
            // Small orders too, so the curve crosses half its peak and N_1/2 exists.
            let s = o.pick(
                "40,150",
                "250,500,1000,2000",
                "250,500,1000,2000,4000,8000,12000,20000",
            );
            let sizes = s
                .split(',')
                .map(|x| num(x, "lu"))
                .collect::<Result<Vec<_>, _>>()?;
            let (dim, secs) = if o.tiny() {
                (64, 0.01)
            } else if o.quick {
                (512, 0.3)
            } else {
                (1024, 2.0)
            };
            lu::run(w, &sizes, dim, secs, fault("lu"), &prog)
        }
        "himeno" => {
            let s = o.pick("tiny", "S", "M");
            let secs = if o.quick { 1.0 } else { 10.0 };
            himeno::run(w, s, if o.tiny() { Some(2) } else { o.iters }, secs, &prog)
        }
        "cg" | "is" | "mg" => {
            let s = o.pick("S", "S", "A");
            let c = npb::class(s).ok_or_else(|| {
                Failure::Usage(format!("{name}: unknown class {s:?}; use S, W or A"))
            })?;
            match name {
                "cg" => npb::cg::run(w, c, fault("cg"), &prog),
                "mg" => npb::mg::run(w, c, fault("mg"), &prog),
                _ => npb::is::run(w, c, &prog),
            }
        }
        "sor" => {
            let n = num(o.pick("32", "512", "2048"), "sor")?;
            let iters = o.iters.unwrap_or(if o.tiny() {
                3
            } else if o.quick {
                50
            } else {
                200
            });
            sor::run(w, n, iters, o.threads.max(1), &prog)
        }
        "knights" => {
            let n = num(o.pick("5", "5", "5"), "knights")?;
            let depth = o.depth.unwrap_or(if n >= 6 { 8 } else { 6 });
            knights::run(w, n, depth, if o.tiny() { 1 } else { reps }, &prog)
        }
        "dct" => {
            let n = num(o.pick("64", "1024", "1024"), "dct")?;
            dct::run(w, n, &[8, 16, 32], if o.tiny() { 1 } else { reps }, &prog)
        }
        "matpow" => {
            let m = num(o.pick("64", "64", "64"), "matpow")?;
            let reps = if o.tiny() {
                2
            } else if o.quick {
                5
            } else {
                20
            };
            let comb = w.combiner()?;
            let plain = || -> Result<(), Failure> { Ok(w.barrier()?) };
            let combining = || -> Result<(), Failure> { Ok(comb.barrier()?) };
            let kinds = [
                matpow::BarrierKind {
                    name: "plain",
                    wait: &plain,
                },
                matpow::BarrierKind {
                    name: "combining",
                    wait: &combining,
                },
            ];
            matpow::run(w, m, 32, reps, &kinds, &prog)
        }
        other => Err(Failure::Usage(format!("unknown suite kernel {other:?}"))),
    }
}
