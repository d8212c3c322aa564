//! kumi-bench: benchmark kernels that run as the ranks of a kumi job, and the
//! records they print.
//!
//! May depend on: the public `kumi` API only — never on kumi's internals, so a
//! benchmark measures what a user's program would get.
//!
//! Every kernel prints its results on rank 0 as one JSON object per line
//! ([`Record`]): `{"bench", "np", "size", "metric", "value"}`. The `kumi bench`
//! command starts the job, reads those lines, and prints a table or the JSON.
//! Timing rule: each figure is the median of several timed repetitions, each
//! repetition long enough (tens of milliseconds) that the clock's resolution and
//! one-off hiccups do not dominate. Correctness is checked on the side (the
//! received bytes are verified once per size); a wrong byte aborts the job.
#![deny(missing_docs)]

pub mod apps;
pub mod blas;
pub mod checkpoint;
pub mod coll;
pub mod dct;
pub mod dsm;
pub mod figure;
pub mod floor;
pub mod himeno;
pub mod hotspot;
pub mod knights;
pub mod lu;
pub mod matpow;
pub mod micro_suite;
pub mod npb;
pub mod report;
pub mod scaling;
pub mod sor;
pub mod suite;
pub mod xfer;

use kumi::{raw, scope, Comm, Error};
use std::time::Instant;

/// One measured figure.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// Benchmark name (`pingpong`, `bw`, `rate`).
    pub bench: String,
    /// Number of ranks in the job.
    pub np: usize,
    /// Message size in bytes.
    pub size: usize,
    /// `latency_us`, `bandwidth_MBps` or `msg_rate_Mps`.
    pub metric: String,
    /// The figure.
    pub value: f64,
}

impl Record {
    /// The record as one JSON object.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"bench\": \"{}\", \"np\": {}, \"size\": {}, \"metric\": \"{}\", \"value\": {:.6}}}",
            self.bench, self.np, self.size, self.metric, self.value
        )
    }

    /// Parses a line printed by [`Record::to_json`]; `None` for any other line.
    pub fn from_json(line: &str) -> Option<Record> {
        let body = line.trim().strip_prefix('{')?.strip_suffix('}')?;
        let mut r = Record {
            bench: String::new(),
            np: 0,
            size: 0,
            metric: String::new(),
            value: f64::NAN,
        };
        for field in body.split(", ") {
            let (k, v) = field.split_once(": ")?;
            let s = v.trim_matches('"');
            match k.trim_matches('"') {
                "bench" => r.bench = s.to_string(),
                "np" => r.np = s.parse().ok()?,
                "size" => r.size = s.parse().ok()?,
                "metric" => r.metric = s.to_string(),
                "value" => r.value = s.parse().ok()?,
                _ => {}
            }
        }
        (!r.bench.is_empty() && r.value.is_finite()).then_some(r)
    }
}

/// Options shared by the micro-benchmarks.
#[derive(Clone, Debug)]
pub struct MicroOpts {
    /// Message sizes to measure.
    pub sizes: Vec<usize>,
    /// Timed repetitions per size (the median is reported).
    pub reps: usize,
    /// Target duration of one repetition, in seconds.
    pub rep_seconds: f64,
}

impl MicroOpts {
    /// 0 B, then powers of two from 1 B to `max` bytes.
    pub fn powers_of_two(max: usize, reps: usize, rep_seconds: f64) -> MicroOpts {
        let mut sizes = vec![0];
        let mut s = 1;
        while s <= max {
            sizes.push(s);
            s *= 2;
        }
        MicroOpts {
            sizes,
            reps,
            rep_seconds,
        }
    }
}

/// The median of timings or ratios (the mean of the middle two of an even
/// count).
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn pattern(buf: &mut [u8], seed: u8) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(31).wrapping_add(seed);
    }
}

fn verify(buf: &[u8], seed: u8, what: &str) -> Result<(), Error> {
    for (i, &b) in buf.iter().enumerate() {
        if b != (i as u8).wrapping_mul(31).wrapping_add(seed) {
            return Err(Error::Protocol(format!(
                "{what}: wrong byte at offset {i} of {}",
                buf.len()
            )));
        }
    }
    Ok(())
}

/// Picks an iteration count so one repetition lasts about `seconds`, from a
/// short calibration run of `f(iters)` (which returns elapsed seconds). Rank 0
/// decides and tells ranks `1..participants`, so all loop the same number of times.
fn calibrate(
    w: &Comm,
    participants: usize,
    seconds: f64,
    mut f: impl FnMut(usize) -> Result<f64, Error>,
) -> Result<usize, Error> {
    let mut iters = 1usize;
    loop {
        let t = f(iters)?;
        let mut decision = [0u64; 2];
        if w.rank() == 0 {
            let done = t > seconds / 10.0 || iters >= 1 << 24;
            let next = if done {
                ((seconds / t.max(1e-9)) * iters as f64).clamp(1.0, 1e8) as u64
            } else {
                iters as u64 * 4
            };
            decision = [done as u64, next];
            for r in 1..participants {
                w.send(&decision, r as i32, 901)?;
            }
        } else {
            w.recv(&mut decision, 0, 901)?;
        }
        if decision[0] == 1 {
            return Ok(decision[1] as usize);
        }
        iters = decision[1] as usize;
    }
}

/// Half round-trip latency between ranks 0 and 1 (other ranks idle).
pub fn pingpong(w: &Comm, o: &MicroOpts) -> Result<Vec<Record>, Error> {
    let me = w.rank();
    let mut out = Vec::new();
    for &size in &o.sizes {
        let mut buf = vec![0u8; size];
        if me < 2 {
            // Check correctness once per size.
            if me == 0 {
                pattern(&mut buf, 7);
                w.send(&buf, 1, 1)?;
                w.recv(&mut buf, 1, 1)?;
                verify(&buf, 8, "pingpong echo")?;
            } else {
                w.recv(&mut buf, 0, 1)?;
                verify(&buf, 7, "pingpong")?;
                pattern(&mut buf, 8);
                w.send(&buf, 0, 1)?;
            }
            let mut run = |iters: usize| -> Result<f64, Error> {
                let t = Instant::now();
                for _ in 0..iters {
                    if me == 0 {
                        w.send(&buf, 1, 2)?;
                        w.recv(&mut buf, 1, 2)?;
                    } else {
                        w.recv(&mut buf, 0, 2)?;
                        w.send(&buf, 0, 2)?;
                    }
                }
                Ok(t.elapsed().as_secs_f64())
            };
            let iters = calibrate(w, 2, o.rep_seconds, &mut run)?;
            let mut times = Vec::new();
            for _ in 0..o.reps {
                times.push(run(iters)? / (2.0 * iters as f64));
            }
            if me == 0 {
                out.push(Record {
                    bench: "pingpong".into(),
                    np: w.size(),
                    size,
                    metric: "latency_us".into(),
                    value: median(times) * 1e6,
                });
            }
        }
        w.barrier()?;
    }
    Ok(out)
}

/// Streaming bandwidth from rank 0 to rank 1: windows of `window` nonblocking
/// sends of one buffer, received by as many nonblocking receives posted before
/// any is waited for, each window acknowledged by a zero-byte reply (as OSU's
/// osu_bw does).
pub fn bandwidth(w: &Comm, o: &MicroOpts, window: usize) -> Result<Vec<Record>, Error> {
    stream(w, o, window, "bw")
}

/// Small-message rate from rank 0 to rank 1 with `window` messages in flight:
/// `window` nonblocking sends then a wait for all on one side, `window`
/// nonblocking receives then a wait for all on the other (as OSU's
/// osu_mbw_mr does), each window acknowledged by a zero-byte reply.
pub fn rate(w: &Comm, o: &MicroOpts, window: usize) -> Result<Vec<Record>, Error> {
    stream(w, o, window, "rate")
}

fn stream(w: &Comm, o: &MicroOpts, window: usize, bench: &str) -> Result<Vec<Record>, Error> {
    let me = w.rank();
    let mut out = Vec::new();
    // One buffer of the largest size on each side, used from its start for
    // every size, as the C twin does: a fresh vector per size (pages the
    // kernel maps anew, without the large pages a long-lived buffer may
    // get) streamed large messages slower than the C twin on the same
    // library (docs/BENCHMARKS.md, session 17).
    let max = o.sizes.iter().copied().max().unwrap_or(0);
    let mut sbig = vec![0u8; if me == 0 { max } else { 0 }];
    let mut rbig = vec![0u8; if me == 1 { max } else { 0 }];
    for &size in &o.sizes {
        if me < 2 {
            let buf = &mut sbig[..if me == 0 { size } else { 0 }];
            if me == 0 {
                pattern(buf, 3);
            }
            // Correctness once per size: the timed windows below all land in
            // one buffer, so their contents are not checked there.
            if me == 0 {
                w.send(buf, 1, 7)?;
            } else {
                let mut chk = vec![0u8; size];
                w.recv(&mut chk, 0, 7)?;
                verify(&chk, 3, bench)?;
            }
            // The receiver posts a window of receives, all into one buffer,
            // and then waits for all of them, as the sender does with its sends
            // (exactly what the C twin and OSU's osu_bw / osu_mbw_mr do, so the
            // figures compare like for like: one buffer stays in cache). Rust's
            // borrows cannot express several receives into one buffer, hence
            // the raw API here.
            let rbuf = &mut rbig[..if me == 1 { size } else { 0 }];
            let mut run = |iters: usize| -> Result<f64, Error> {
                let t = Instant::now();
                for _ in 0..iters {
                    if me == 0 {
                        scope(|s| -> Result<(), Error> {
                            let mut reqs = Vec::with_capacity(window);
                            for _ in 0..window {
                                reqs.push(w.isend(s, buf, 1, 3)?);
                            }
                            kumi::wait_all(reqs)?;
                            Ok(())
                        })?;
                        w.recv(&mut [0u8; 0], 1, 4)?;
                    } else {
                        let ptr = rbuf.as_mut_ptr();
                        let mut reqs = Vec::with_capacity(window);
                        for _ in 0..window {
                            // SAFETY: `rbuf` outlives the requests, which all
                            // complete (wait_all, then wait) before it is
                            // touched again; no Rust reference to it exists
                            // meanwhile. Several messages may write its bytes
                            // at once: the contents are never read (as in OSU).
                            reqs.push(unsafe { raw::irecv_contig(w, ptr, size, 0, 3)? });
                        }
                        {
                            let mut all: Vec<&mut raw::RawRequest> = reqs.iter_mut().collect();
                            raw::wait_all(&mut all)?;
                        }
                        for mut r in reqs {
                            r.wait()?;
                        }
                        w.send(&[0u8; 0], 0, 4)?;
                    }
                }
                Ok(t.elapsed().as_secs_f64())
            };
            let iters = calibrate(w, 2, o.rep_seconds, &mut run)?;
            let mut times = Vec::new();
            for _ in 0..o.reps {
                times.push(run(iters)?);
            }
            if me == 0 {
                let t = median(times);
                let msgs = (iters * window) as f64;
                let (metric, value) = if bench == "rate" {
                    ("msg_rate_Mps", msgs / t / 1e6)
                } else {
                    ("bandwidth_MBps", msgs * size as f64 / t / 1e6)
                };
                out.push(Record {
                    bench: bench.into(),
                    np: w.size(),
                    size,
                    metric: metric.into(),
                    value,
                });
            }
        }
        w.barrier()?;
    }
    Ok(out)
}

/// An 8-byte token passed around every rank; the figure is the time per hop.
/// Oversubscribed (more ranks than cores), it measures how well waiting ranks
/// give their core to the one that holds the token.
pub fn ring(w: &Comm, o: &MicroOpts) -> Result<Vec<Record>, Error> {
    let (me, n) = (w.rank(), w.size());
    let next = ((me + 1) % n) as i32;
    let prev = ((me + n - 1) % n) as i32;
    // Correctness: one lap counting hops.
    let mut tok = [0u64];
    if me == 0 {
        w.send(&tok, next, 6)?;
        w.recv(&mut tok, prev, 6)?;
        if tok[0] != n as u64 - 1 {
            return Err(Error::Protocol(format!(
                "ring token {} after one lap of {n}",
                tok[0]
            )));
        }
    } else {
        w.recv(&mut tok, prev, 6)?;
        tok[0] += 1;
        w.send(&tok, next, 6)?;
    }
    let mut buf = [0u8; 8];
    let mut run = |iters: usize| -> Result<f64, Error> {
        let t = Instant::now();
        for _ in 0..iters {
            if me == 0 {
                w.send(&buf, next, 5)?;
                w.recv(&mut buf, prev, 5)?;
            } else {
                w.recv(&mut buf, prev, 5)?;
                w.send(&buf, next, 5)?;
            }
        }
        Ok(t.elapsed().as_secs_f64())
    };
    let iters = calibrate(w, n, o.rep_seconds, &mut run)?;
    let mut times = Vec::new();
    for _ in 0..o.reps {
        times.push(run(iters)? / (iters * n) as f64);
    }
    let mut out = Vec::new();
    if me == 0 {
        out.push(Record {
            bench: "ring".into(),
            np: n,
            size: 8,
            metric: "latency_us".into(),
            value: median(times) * 1e6,
        });
    }
    Ok(out)
}

/// CPU time of a rank blocked in a receive: rank 1 waits `seconds` for a
/// message that rank 0 sends only after sleeping that long. Reports the share
/// of one core rank 1 used while it waited (`cpu_fraction`).
pub fn idle(w: &Comm, seconds: f64) -> Result<Vec<Record>, Error> {
    let me = w.rank();
    let mut out = Vec::new();
    w.barrier()?;
    if me == 0 {
        std::thread::sleep(std::time::Duration::from_secs_f64(seconds));
        w.send(&[1u8], 1, 7)?;
        let mut frac = [0f64];
        w.recv(&mut frac, 1, 8)?;
        out.push(Record {
            bench: "idle".into(),
            np: w.size(),
            size: 0,
            metric: "cpu_fraction".into(),
            value: frac[0],
        });
    } else if me == 1 {
        let cpu0 = cpu_seconds();
        let t = Instant::now();
        w.recv(&mut [0u8], 0, 7)?;
        let frac = (cpu_seconds() - cpu0) / t.elapsed().as_secs_f64();
        w.send(&[frac], 0, 8)?;
    }
    Ok(out)
}

/// User + system CPU time of this process, in seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we pass and nothing else.
    let u = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(u.ru_utime) + t(u.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_json_round_trip() {
        let r = Record {
            bench: "pingpong".into(),
            np: 2,
            size: 8,
            metric: "latency_us".into(),
            value: 0.25,
        };
        assert_eq!(Record::from_json(&r.to_json()), Some(r));
        assert_eq!(Record::from_json("ok: not json"), None);
    }

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
