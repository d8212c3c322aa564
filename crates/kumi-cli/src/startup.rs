//! `kumi bench startup`: how long a job takes to start on kumi and on the
//! references — from the launch command to the first `MPI_Barrier` passed,
//! and to the exit of a program that does nothing else — the same C source
//! (`crates/kumi-bench/c/startup.c`) built with each stack's wrapper, the
//! stacks alternating round by round (ANCHORS.md: this machine changes
//! speed for every program alike, so only same-round ratios mean much).
//! A round counts only when every side of it finished: a job that fails or
//! hangs past `--timeout` (the references across namespace hosts sometimes
//! never exit after their barrier) is named and its round left out, and the
//! runner goes on with the next round and exits with status 1 at the end.

use crate::apps::{interrupted, references_only, run_bounded, watch_interrupts, Scratch};
use crate::bench::{round_order, BenchArgs, Reference, Twin};
use crate::comparison::Comparison;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
            eprintln!("kumi bench startup: {failed} round(s) left out: a job failed or hung");
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
    'rounds: for round in 0..a.rounds() {
        if !a.json {
            eprint!("\rkumi bench startup: round {}/{}", round + 1, a.rounds());
        }
        let mut this_round = Vec::with_capacity(twins.len());
        for side in round_order(twins.len(), round) {
            match once(&twins[side], a.np, limit, &scratch) {
                Ok(t) => this_round.push((side, t)),
                Err(_) if interrupted() => return Ok(failed),
                Err(e) => {
                    eprintln!(
                        "\nkumi bench startup: round {} on {} FAILED (the round is left out): {e}",
                        round + 1,
                        twins[side].reference.name()
                    );
                    failed += 1;
                    continue 'rounds;
                }
            }
        }
        for (side, (barrier, exit)) in this_round {
            cmp.add(
                side,
                ("to first barrier".into(), a.np as usize),
                "seconds",
                barrier,
            );
            cmp.add(side, ("to exit".into(), a.np as usize), "seconds", exit);
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

/// One job of `np` ranks of `twin` on its stack: seconds from the launch to
/// the first barrier passed (as rank 0 saw it) and to the launcher's exit.
fn once(twin: &Twin, np: u32, limit: Duration, scratch: &Scratch) -> Result<(f64, f64), String> {
    let launcher = twin.reference.tools().1;
    let mut c = twin.reference.launcher(np)?;
    let t0 = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| format!("the clock is before 1970: {e}"))?;
    c.arg(&twin.exe).arg(t0.as_nanos().to_string());
    let (out, ran) = run_bounded(&mut c, launcher, limit, &scratch.0)?;
    let barrier = out
        .lines()
        .find_map(|l| l.strip_prefix("barrier_s "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| {
            format!("{launcher}: rank 0 printed no time of its first barrier:\n{out}")
        })?;
    Ok((barrier, ran.as_secs_f64()))
}
