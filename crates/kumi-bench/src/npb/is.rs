//! NPB IS: ranking (bucket sort) of integer keys, 10 iterations.
//!
//! Keys are NPB's (each the scaled sum of four `randlc` draws); each rank
//! generates its contiguous share of the global sequence by skipping the
//! generator ahead, so the key set is the specification's for any rank count.
//! Ranking: keys are sent to the rank owning their value range (all-to-all),
//! counted there, and the ranges' totals give global ranks. Verification as the
//! specification: the partial test (five keys' ranks per iteration, against the
//! class's tables) and the full test (the sorted sequence is non-decreasing),
//! 5 x 10 + 1 passes in all.

use super::{randlc, skip, AMULT, SEED};
use crate::figure::{Failure, Figure, Outcome};
use crate::xfer;
use kumi::Comm;
use std::time::Instant;

const MAX_ITERATIONS: usize = 10;

struct Class {
    total_keys_log2: u32,
    max_key_log2: u32,
    test_index: [usize; 5],
    test_rank: [i64; 5],
}

fn class_params(c: char) -> Option<Class> {
    Some(match c {
        'S' => Class {
            total_keys_log2: 16,
            max_key_log2: 11,
            test_index: [48427, 17148, 23627, 62548, 4431],
            test_rank: [0, 18, 346, 64917, 65463],
        },
        'W' => Class {
            total_keys_log2: 20,
            max_key_log2: 16,
            test_index: [357773, 934767, 875723, 898999, 404505],
            test_rank: [1249, 11698, 1039987, 1043896, 1048018],
        },
        'A' => Class {
            total_keys_log2: 23,
            max_key_log2: 19,
            test_index: [2112377, 662041, 5336171, 3642833, 4250760],
            test_rank: [104, 17523, 123928, 8288932, 8388264],
        },
        _ => return None,
    })
}

/// The expected rank of test key i at `iteration`, per the specification.
fn expected(class: char, i: usize, base: i64, iteration: i64) -> i64 {
    match class {
        'S' => {
            if i <= 2 {
                base + iteration
            } else {
                base - iteration
            }
        }
        'W' => {
            if i < 2 {
                base + (iteration - 2)
            } else {
                base - iteration
            }
        }
        _ => {
            if i <= 2 {
                base + (iteration - 1)
            } else {
                base - (iteration - 1)
            }
        }
    }
}

/// Runs IS of `class`; fails unless every verification passes.
pub fn run(w: &Comm, class: char, progress: &dyn Fn(usize, usize, &str)) -> Outcome {
    let c = class_params(class)
        .ok_or_else(|| Failure::Usage(format!("is: unknown class {class}; use S, W or A")))?;
    let (me, p) = (w.rank(), w.size());
    let num_keys = 1usize << c.total_keys_log2;
    let max_key = 1usize << c.max_key_log2;
    let (lo, hi) = (num_keys * me / p, num_keys * (me + 1) / p);
    // create_seq, my share: skip 4 draws per earlier key.
    let mut seed = SEED;
    randlc(&mut seed, skip(AMULT, 4 * lo as u64));
    let k4 = (max_key / 4) as f64;
    let mut keys: Vec<u32> = (lo..hi)
        .map(|_| {
            let mut x = randlc(&mut seed, AMULT);
            x += randlc(&mut seed, AMULT);
            x += randlc(&mut seed, AMULT);
            x += randlc(&mut seed, AMULT);
            (k4 * x) as u32
        })
        .collect();
    // Value ranges: rank r owns keys in [r*max_key/p, (r+1)*max_key/p).
    let owner = |k: u32| ((k as usize * p) / max_key).min(p - 1);
    let vlo = max_key * me / p;
    let vhi = max_key * (me + 1) / p;

    // One ranking; returns (my keys received, my cumulative counts, offset).
    let rank_once = |keys: &mut Vec<u32>,
                     iteration: usize|
     -> Result<(Vec<u32>, Vec<u64>, u64, u32), Failure> {
        for (g, v) in [
            (iteration, iteration as u32),
            (iteration + MAX_ITERATIONS, (max_key - iteration) as u32),
        ] {
            if (lo..hi).contains(&g) {
                keys[g - lo] = v;
            }
        }
        let mut probe = [0u64; 5];
        for (i, &g) in c.test_index.iter().enumerate() {
            if (lo..hi).contains(&g) {
                probe[i] = keys[g - lo] as u64;
            }
        }
        xfer::allreduce(w, &mut probe, |a, b| a + b)?;
        let mut out = vec![Vec::new(); p];
        for &k in keys.iter() {
            out[owner(k)].push(k);
        }
        let mine: Vec<u32> = xfer::alltoallv(w, out)?.concat();
        let mut counts = vec![0u64; vhi - vlo];
        for &k in &mine {
            counts[k as usize - vlo] += 1;
        }
        for i in 1..counts.len() {
            counts[i] += counts[i - 1];
        }
        let totals = xfer::allgatherv(w, &[mine.len() as u64])?;
        let offset: u64 = totals[..me].iter().map(|v| v[0]).sum();
        // Partial verification: the owner of key k-1 looks up its rank.
        let mut passed = 0u32;
        for (i, &k) in probe.iter().enumerate() {
            let k = k as usize;
            if 0 < k && k < num_keys && (vlo..vhi).contains(&(k - 1)) {
                let key_rank = (offset + counts[k - 1 - vlo]) as i64;
                if key_rank == expected(class, i, c.test_rank[i], iteration as i64) {
                    passed += 1;
                }
            }
        }
        Ok((mine, counts, offset, passed))
    };

    progress(0, MAX_ITERATIONS + 1, "untimed ranking");
    rank_once(&mut keys, 1)?;
    w.barrier()?;
    let t = Instant::now();
    let mut passed = 0u32;
    let mut last = None;
    for it in 1..=MAX_ITERATIONS {
        let (mine, counts, offset, ok) = rank_once(&mut keys, it)?;
        passed += ok;
        last = Some((mine, counts, offset));
        progress(it, MAX_ITERATIONS + 1, &format!("iteration {it}"));
    }
    let secs = xfer::max(w, t.elapsed().as_secs_f64())?;
    // Full verification: sort my range by its counts; check order and totals.
    let (mine, counts, _) = last.expect("at least one iteration");
    let mut sorted = vec![0u32; mine.len()];
    let mut pos = counts.clone();
    for &k in mine.iter().rev() {
        let slot = &mut pos[k as usize - vlo];
        *slot -= 1;
        sorted[*slot as usize] = k;
    }
    let mut bad = sorted.windows(2).filter(|w| w[0] > w[1]).count() as u64;
    let ends = xfer::allgatherv(
        w,
        &[
            sorted.first().copied().unwrap_or(u32::MAX),
            sorted.last().copied().unwrap_or(0),
            sorted.len() as u32,
        ],
    )?;
    let mut total = 0u64;
    let mut prev_max: Option<u32> = None;
    for e in &ends {
        total += e[2] as u64;
        if e[2] > 0 {
            if prev_max.is_some_and(|m| m > e[0]) {
                bad += 1;
            }
            prev_max = Some(e[1]);
        }
    }
    let mut pv = [passed as u64, bad];
    xfer::allreduce(w, &mut pv, |a, b| a + b)?;
    let full_ok = pv[1] == 0 && total == num_keys as u64;
    let passes = pv[0] + full_ok as u64;
    let want = 5 * MAX_ITERATIONS as u64 + 1;
    if passes != want {
        return Err(Failure::check(
            "npb is verification",
            format!(
                "class {class}: {passes} of {want} checks passed (partial {} of 50, full sort {})",
                pv[0],
                if full_ok { "ok" } else { "FAILED" }
            ),
        ));
    }
    let mops = (MAX_ITERATIONS * num_keys) as f64 / secs / 1e6;
    Ok(vec![Figure::new("is", p, num_keys, "mops", mops)
        .with_str("class", &class.to_string())
        .with_num("seconds", secs)
        .with_str("check", "VERIFIED")])
}
