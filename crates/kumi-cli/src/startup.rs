//! `kumi bench startup`: how long a job takes to start on kumi and on the
//! references — from the launch command to the first `MPI_Barrier` passed,
//! and to the exit of a program that does nothing else — the same C source
//! (`crates/kumi-bench/c/startup.c`) built with each stack's wrapper, the
//! stacks alternating round by round (ANCHORS.md: this machine changes
//! speed for every program alike, so only same-round ratios mean much).
//! A round counts only where every side of it got there: a job that fails
//! or hangs past `--timeout` is named and ended; its round still counts to
//! the first barrier if every side passed it (the references across
//! namespace hosts often pass their barrier and then never exit), and the
//! runner goes on with the next round and exits with status 1 at the end.

use crate::apps::{
    interrupted, references_only, run_bounded, stdout_in, watch_interrupts, Scratch,
};
use crate::bench::{round_order, BenchArgs, Reference, Twin};
use crate::comparison::Comparison;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const SOURCE: &str = include_str!("../../kumi-bench/c/startup.c");

/// `kumi bench startup`.
pub fn main(a: &BenchArgs) -> i32 {
    match run(a) {
        _ if interrupted() => {
            eprintln!("\nkumi bench startup: interrupted; the job running was ended");
            130
        }
        Ok(0) => 0,
        Ok(failed) => {
            eprintln!("kumi bench startup: {failed} job(s) failed or hung (named above); their rounds count to the first barrier at most");
            1
        }
        Err(e) => {
            eprintln!("\nkumi bench startup: {e}");
            1
        }
    }
}

/// The rounds run; how many were left out because a job of them failed.
fn run(a: &BenchArgs) -> Result<usize, String> {
    references_only(a, "startup")?;
    watch_interrupts()?;
    // kumi's side is the same C program on kumi's library, under `kumi run`.
    let twins: Vec<Twin> = std::iter::once(Reference::KumiC)
        .chain(a.vs.iter().copied())
        .map(|r| {
            r.build_c("startup", SOURCE)
                .map_err(|e| format!("cannot build the program for {}: {e}", r.name()))
        })
        .collect::<Result<_, _>>()?;
    let labels = std::iter::once("kumi".to_string())
        .chain(a.vs.iter().map(|r| r.name().to_string()))
        .collect();
    let mut cmp = Comparison::new("startup", a.np, labels);
    cmp.size_label = |n| format!("{n} ranks");
    let limit = Duration::from_secs(a.timeout);
    let scratch = Scratch::new("startup")?;
    let mut failed = 0;
    for round in 0..a.rounds() {
        if !a.json {
            eprint!("\rkumi bench startup: round {}/{}", round + 1, a.rounds());
        }
        let mut this_round = Vec::with_capacity(twins.len());
        for side in round_order(twins.len(), round) {
            let t = once(&twins[side], a.np, limit, &scratch);
            if interrupted() {
                return Ok(failed);
            }
            if let Err(e) = &t.exit {
                eprintln!(
                    "\nkumi bench startup: round {} on {} FAILED ({}): {e}",
                    round + 1,
                    twins[side].reference.name(),
                    if t.barrier.is_some() {
                        "it passed the barrier; the round counts to it only"
                    } else {
                        "the round is left out"
                    }
                );
                failed += 1;
            }
            this_round.push((side, t));
        }
        if this_round.iter().all(|(_, t)| t.barrier.is_some()) {
            for (side, t) in &this_round {
                let b = t.barrier.unwrap_or_default();
                cmp.add(
                    *side,
                    ("to first barrier".into(), a.np as usize),
                    "seconds",
                    b,
                );
            }
        }
        if this_round.iter().all(|(_, t)| t.exit.is_ok()) {
            for (side, t) in &this_round {
                let x = *t.exit.as_ref().unwrap_or(&0.0);
                cmp.add(*side, ("to exit".into(), a.np as usize), "seconds", x);
            }
        }
    }
    if cmp.is_empty() {
        return Err("no round finished on every side".into());
    }
    if a.json {
        for l in cmp.json_lines() {
            println!("{l}");
        }
    } else {
        eprintln!();
        print!("{}", cmp.table("job start-up"));
    }
    Ok(failed)
}

/// What one job showed: when rank 0 passed its first barrier (if it did),
/// and when the launcher exited, or why it did not.
struct Times {
    barrier: Option<f64>,
    exit: Result<f64, String>,
}

/// One job of `np` ranks of `twin` on its stack: seconds from the launch to
/// the first barrier passed (as rank 0 saw it) and to the launcher's exit.
fn once(twin: &Twin, np: u32, limit: Duration, scratch: &Scratch) -> Times {
    let launcher = twin.reference.tools().1;
    let ran = || -> Result<(String, f64), String> {
        let mut c = twin.reference.launcher(np)?;
        // Both times count from this moment: rank 0's barrier by the wall
        // clock passed to it, the exit by the monotonic one.
        let (t0, i0) = (SystemTime::now(), Instant::now());
        let t0 = t0
            .duration_since(UNIX_EPOCH)
            .map_err(|e| format!("the clock is before 1970: {e}"))?;
        c.arg(&twin.exe).arg(t0.as_nanos().to_string());
        let (out, exited) = run_bounded(&mut c, launcher, limit, &scratch.0)?;
        Ok((out, (exited - i0).as_secs_f64()))
    };
    let exit = ran();
    // A job that failed or hung may still have passed its barrier: its
    // output so far is in the scratch file.
    let out = match &exit {
        Ok((out, _)) => out.clone(),
        Err(_) => std::fs::read_to_string(stdout_in(&scratch.0)).unwrap_or_default(),
    };
    let barrier = out
        .lines()
        .find_map(|l| l.strip_prefix("barrier_s "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0);
    let exit = match (exit, barrier) {
        (Ok(_), None) => Err(format!(
            "{launcher}: rank 0 printed no time of its first barrier:\n{out}"
        )),
        (x, _) => x.map(|(_, t)| t),
    };
    Times { barrier, exit }
}
