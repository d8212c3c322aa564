//! `kumi bench dsm`: distributed shared memory beside kumi's own messages,
//! between ranks 0 and 1, in one run (the goals of the DSM issue):
//! - `read8` and `write_sync8`: one 8-byte element of rank 1's part of a
//!   global array, read or written synchronously by rank 0, against an
//!   8-byte ping-pong round trip (`pingpong8`);
//! - `fault4k`: rank 1's first touch of a page homed at rank 0 (a fault, the
//!   page fetched), against a 4 KiB ping-pong round trip (`pingpong4k`);
//! - `plain`, `array_local`, `shared_local`: summing 8 MiB of doubles in
//!   plain memory, in this rank's part of a global array, and in a
//!   page-shared segment after its pages are mapped: nanoseconds per value.
//!
//! Across hosts (`--hosts`) every access of rank 0 to rank 1 is remote; on
//! one host the array's accesses are loads and stores (run with
//! `KUMI_COLL_HOSTS=2` to make the two ranks pretend hosts that talk through
//! their engines). Rank 1 waits in a kumi call meanwhile, so its engine
//! answers at once (a rank that computes answers through its progress
//! thread, within about `KUMI_PROGRESS_US` of a request). Records carry an `"op"` field; each
//! ratio is its own record (metric `ratio`, op `read8/pingpong8`...): the
//! median of per-repetition ratios, taken seconds apart on a noisy machine.

use crate::coll::Labeled;
use crate::Record;
use kumi::dsm::{Array, Dist, Shared};
use kumi::{Comm, Error};
use std::time::Instant;

/// Which version of a program a figure measures, where a program runs on
/// the DSM beside its message-passing version (knights, dct).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Model {
    Messages,
    Dsm,
}

impl Model {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Model::Messages => "messages",
            Model::Dsm => "dsm",
        }
    }

    /// The two versions in round `rep`'s order: which goes first flips
    /// every round, so a drift of the machine's speed hits both alike.
    pub(crate) fn order(rep: usize) -> [Model; 2] {
        if rep.is_multiple_of(2) {
            [Model::Messages, Model::Dsm]
        } else {
            [Model::Dsm, Model::Messages]
        }
    }
}

/// Values summed by the in-host figures (8 MiB of doubles).
const SUM_LEN: usize = 1 << 20;
/// Pages rank 1 faults in per repetition of `fault4k`.
const FAULT_PAGES: usize = 256;

/// Seconds per call of `f` on rank 0, over a repetition of about `rep_s`
/// (the count is found once, then kept for every repetition).
fn per_call(
    rep_s: f64,
    calls: &mut usize,
    mut f: impl FnMut() -> Result<(), Error>,
) -> Result<f64, Error> {
    if *calls == 0 {
        let t = Instant::now();
        let mut n = 0;
        while t.elapsed().as_secs_f64() < rep_s / 4.0 || n < 10 {
            f()?;
            n += 1;
        }
        *calls = ((n as f64 * 4.0) as usize).max(10);
    }
    let t = Instant::now();
    for _ in 0..*calls {
        f()?;
    }
    Ok(t.elapsed().as_secs_f64() / *calls as f64)
}

/// Round trips of `bytes` between ranks 0 and 1, seconds each (rank 1
/// echoes `calls`, told by rank 0 first).
fn pingpong(w: &Comm, bytes: usize, rep_s: f64, calls: &mut usize) -> Result<f64, Error> {
    let mut buf = vec![0u8; bytes];
    match w.rank() {
        0 => {
            let t = per_call(rep_s, calls, || {
                w.send(&buf, 1, 1)?;
                w.recv(&mut buf, 1, 1)?;
                Ok(())
            });
            // Tell rank 1 the echoes are over.
            w.send(&[0u8; 0], 1, 2)?;
            t
        }
        1 => loop {
            let st = w.recv(&mut buf, 0, kumi::ANY_TAG)?;
            if st.tag == 2 {
                return Ok(0.0);
            }
            w.send(&buf, 0, 1)?;
        },
        _ => Ok(0.0),
    }
}

/// Sum of `len` values at `p` (read as plain loads).
fn sum(p: *const f64, len: usize) -> f64 {
    // SAFETY: the callers pass `len` values of memory they own for the call.
    let s = unsafe { std::slice::from_raw_parts(p, len) };
    s.iter().sum()
}

/// Runs the figures: `reps` repetitions of about `rep_s` seconds each.
pub fn run(w: &Comm, reps: usize, rep_s: f64) -> Result<Vec<Labeled>, Error> {
    if w.size() < 2 {
        return Err(Error::Protocol(
            "kumi bench dsm needs 2 ranks or more".into(),
        ));
    }
    let me = w.rank();
    // Element 1 lives at rank 1 (cyclic by one).
    let a: Array<u64> = Array::new(w, w.size(), Dist::Cyclic(1))?;
    let mut cols: [Vec<f64>; 5] = Default::default(); // pp8, read8, wsync8, pp4k, fault4k
    let mut calls = [0usize; 4];
    for _ in 0..reps {
        w.barrier()?;
        cols[0].push(pingpong(w, 8, rep_s, &mut calls[0])?);
        w.barrier()?;
        let mut v = 0u64;
        if me == 0 {
            cols[1].push(per_call(rep_s, &mut calls[1], || {
                v = v.wrapping_add(a.get(1)?);
                Ok(())
            })?);
            cols[2].push(per_call(rep_s, &mut calls[2], || a.write_sync(1, &[v]))?);
        }
        w.barrier()?;
        cols[3].push(pingpong(w, 4096, rep_s, &mut calls[3])?);
        // Page faults: a fresh segment each time; its first pages are homed
        // at rank 0, which initializes them (as a program's home would: its
        // first touch costs the kernel's allocation, not the protocol's),
        // and rank 1 touches one byte of each.
        let s: Shared<u8> = Shared::new(w, 2 * FAULT_PAGES * 4096)?;
        if me == 0 {
            let p = s.as_ptr();
            for k in 0..FAULT_PAGES {
                // SAFETY: within the segment: rank 0 writes its home pages
                // before the barrier, and nobody reads them before it.
                unsafe { p.add(k * 4096).write(1) };
            }
        }
        s.barrier()?;
        if me == 1 {
            let p = s.as_ptr();
            let t = Instant::now();
            let mut x = 0u8;
            for k in 0..FAULT_PAGES {
                // SAFETY: within the segment; nobody writes it.
                x = x.wrapping_add(unsafe { p.add(k * 4096).read_volatile() });
            }
            let el = t.elapsed().as_secs_f64() / FAULT_PAGES as f64;
            std::hint::black_box(x);
            w.send(&[el], 0, 3)?;
        } else if me == 0 {
            let mut el = [0f64];
            w.recv(&mut el, 1, 3)?;
            cols[4].push(el[0]);
        }
        s.free()?;
    }
    // In-host access: the same sum over plain memory, this rank's part of
    // an array, and a page-shared segment whose pages are mapped.
    let plain: Vec<f64> = (0..SUM_LEN).map(|i| i as f64).collect();
    let arr: Array<f64> = Array::owned(w, SUM_LEN)?;
    let (ap, alen) = arr.local();
    // SAFETY: this rank's part, which only it touches here.
    unsafe { std::slice::from_raw_parts_mut(ap, alen) }.copy_from_slice(&plain);
    let sh: Shared<f64> = Shared::new(w, SUM_LEN * w.size())?;
    let mine = me * SUM_LEN;
    // SAFETY: each rank writes its own block (pages homed at itself, as
    // blocks of pages are dealt in rank order), nobody reads it until the
    // barrier.
    unsafe { &mut sh.as_mut_slice()[mine..mine + SUM_LEN] }.copy_from_slice(&plain);
    sh.barrier()?;
    // SAFETY: after the barrier, reads only.
    let shp = unsafe { sh.as_mut_slice()[mine..].as_ptr() };
    let mut local: [Vec<f64>; 3] = Default::default();
    let mut c3 = [0usize; 3];
    for _ in 0..reps {
        for (k, p) in [plain.as_ptr(), ap as *const f64, shp]
            .into_iter()
            .enumerate()
        {
            local[k].push(
                per_call(rep_s, &mut c3[k], || {
                    std::hint::black_box(sum(p, SUM_LEN));
                    Ok(())
                })? / SUM_LEN as f64,
            );
        }
    }
    sh.free()?;
    w.barrier()?;
    if me != 0 {
        return Ok(Vec::new());
    }
    let np = w.size();
    let rec = |op: &str, size: usize, metric: &str, value: f64| Labeled {
        record: Record {
            bench: "dsm".into(),
            np,
            size,
            metric: metric.into(),
            value,
        },
        key: "op",
        label: op.into(),
    };
    let ratio = |a: &[f64], b: &[f64]| crate::median(a.iter().zip(b).map(|(x, y)| x / y).collect());
    let mut out = Vec::new();
    for (k, (op, size)) in [
        ("pingpong8", 8),
        ("read8", 8),
        ("write_sync8", 8),
        ("pingpong4k", 4096),
        ("fault4k", 4096),
    ]
    .into_iter()
    .enumerate()
    {
        out.push(rec(
            op,
            size,
            "roundtrip_us",
            crate::median(cols[k].clone()) * 1e6,
        ));
    }
    out.push(rec(
        "read8/pingpong8",
        8,
        "ratio",
        ratio(&cols[1], &cols[0]),
    ));
    out.push(rec(
        "write_sync8/pingpong8",
        8,
        "ratio",
        ratio(&cols[2], &cols[0]),
    ));
    out.push(rec(
        "fault4k/pingpong4k",
        4096,
        "ratio",
        ratio(&cols[4], &cols[3]),
    ));
    for (k, op) in ["plain", "array_local", "shared_local"]
        .into_iter()
        .enumerate()
    {
        out.push(rec(
            op,
            8,
            "ns_per_value",
            crate::median(local[k].clone()) * 1e9,
        ));
    }
    out.push(rec(
        "array_local/plain",
        8,
        "ratio",
        ratio(&local[1], &local[0]),
    ));
    out.push(rec(
        "shared_local/plain",
        8,
        "ratio",
        ratio(&local[2], &local[0]),
    ));
    Ok(out)
}
