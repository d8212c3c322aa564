//! `kumi stacks` and `kumi attach`: gdb beside a running job's ranks,
//! wherever they run. The job's launcher says where each rank is (its host,
//! its pid, and how its host is reached: directly, through the job's remote
//! shell, or through `srun`), read as a monitor like `kumi top` does.

use crate::top::{resolve, Monitor};
use clap::Args;
use kumi_core::deadlock::Snapshot;
use kumi_launch::debug::{self, Target};
use std::os::unix::process::CommandExt;
use std::time::Duration;

/// Options of `kumi stacks`.
#[derive(Args, Debug)]
#[command(after_help = "\
Each rank's process is stopped only while its gdb reads it (about a second).
Frames inside kumi and the language runtimes are folded into one line naming
where the program entered them; kumi's progress thread is one line. gdb must
be installed on every host (apt-get install gdb) and allowed to attach: as the
job's user with /proc/sys/kernel/yama/ptrace_scope at 0, or as root.")]
pub struct StacksArgs {
    /// Job id (as `kumi ps` lists it); optional when exactly one job runs.
    #[arg(value_name = "JOB")]
    pub job: Option<String>,

    /// Only these ranks (e.g. 0,3-5).
    #[arg(long, value_name = "RANKS")]
    pub ranks: Option<String>,

    /// At most this many lines per thread.
    #[arg(long, value_name = "N", default_value_t = 40)]
    pub frames: usize,
}

/// Options of `kumi attach`.
#[derive(Args, Debug)]
#[command(after_help = "\
EXAMPLES:
    kumi attach 3                    gdb on rank 3 of the only running job
    kumi attach j0123456789 3        ... of that job
    kumi attach 3 -- -batch -ex bt   gdb's own options after --

The rank stops while gdb holds it (its peers may wait for it; kumi does not
count a rank stopped outside a kumi call as blocked). On another host, gdb
runs there through the job's remote shell (ssh -t) or srun --pty.")]
pub struct AttachArgs {
    /// `[JOB] RANK`: the job (optional when exactly one runs) and the rank.
    #[arg(value_name = "JOB RANK", num_args = 1..=2, required = true)]
    pub target: Vec<String>,

    /// Options for gdb (after `--`).
    #[arg(last = true, value_name = "GDB OPTIONS")]
    pub gdb: Vec<String>,
}

/// The job's state, from its launcher.
fn snapshot(job: Option<&str>) -> Result<Snapshot, String> {
    let address = resolve(job)?;
    Monitor::connect(&address).and_then(|mut m| m.snapshot())
}

/// Ranks listed as `0,3-5`, each below `size`.
fn parse_ranks(list: &str, size: u32) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in list.split(',') {
        let bad = || format!("--ranks {list}: {part:?} is not a rank or a range like 3-5");
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (
                a.trim().parse().map_err(|_| bad())?,
                b.trim().parse().map_err(|_| bad())?,
            ),
            None => {
                let r: u32 = part.trim().parse().map_err(|_| bad())?;
                (r, r)
            }
        };
        if a > b || b >= size {
            return Err(format!(
                "--ranks {list}: the job has ranks 0 to {}",
                size - 1
            ));
        }
        out.extend(a..=b);
    }
    Ok(out)
}

fn target(s: &Snapshot, rank: u32) -> Result<Target, String> {
    let r = s
        .ranks
        .get(rank as usize)
        .ok_or_else(|| format!("job {} has ranks 0 to {}", s.job, s.size.saturating_sub(1)))?;
    if r.ended {
        return Err(format!("rank {rank} of job {} has ended", s.job));
    }
    if r.pid == 0 {
        return Err(format!(
            "rank {rank} of job {} has not connected yet",
            s.job
        ));
    }
    Ok(Target {
        rank,
        pid: r.pid,
        host: r.host.clone(),
        reach: s.reach_of(&r.host),
    })
}

/// `kumi stacks`.
pub fn stacks_main(args: StacksArgs) -> i32 {
    let run = || -> Result<String, String> {
        if debug::gdb().is_none() {
            return Err("gdb is not installed (apt-get install gdb)".into());
        }
        let s = snapshot(args.job.as_deref())?;
        let ranks = match &args.ranks {
            Some(l) => parse_ranks(l, s.size)?,
            None => (0..s.size).collect(),
        };
        let targets: Vec<Target> = ranks
            .into_iter()
            .filter_map(|r| target(&s, r).ok())
            .collect();
        if targets.is_empty() {
            return Err(format!("no running rank of job {} to read", s.job));
        }
        Ok(format!(
            "job {} ({}), {} of {} ranks:\n{}",
            s.job,
            s.program,
            targets.len(),
            s.size,
            debug::report(&targets, Duration::from_secs(60), args.frames.max(1))
        ))
    };
    match run() {
        Ok(text) => {
            print!("{text}");
            0
        }
        Err(e) => {
            eprintln!("kumi stacks: {e}");
            1
        }
    }
}

/// `kumi attach`: replaces this process with gdb attached to the rank.
pub fn attach_main(args: AttachArgs) -> i32 {
    let (job, rank) = match args.target.as_slice() {
        [r] => (None, r),
        [j, r] => (Some(j.as_str()), r),
        _ => unreachable!("clap takes 1 or 2"),
    };
    let run = || -> Result<std::io::Error, String> {
        let rank: u32 = rank
            .parse()
            .map_err(|_| format!("{rank:?} is not a rank number"))?;
        let s = snapshot(job)?;
        let t = target(&s, rank)?;
        if matches!(t.reach, kumi_core::debug::Reach::Local) && debug::gdb().is_none() {
            return Err("gdb is not installed (apt-get install gdb)".into());
        }
        let mut argv: Vec<String> = vec!["gdb".into(), "-p".into(), t.pid.to_string()];
        argv.extend(args.gdb.iter().cloned());
        let argv = t.reach.command(&argv, true);
        eprintln!(
            "kumi attach: rank {rank} of job {} (pid {} on {})",
            s.job, t.pid, t.host
        );
        Ok(std::process::Command::new(&argv[0]).args(&argv[1..]).exec())
    };
    match run() {
        Ok(e) => {
            eprintln!("kumi attach: cannot run gdb: {e}");
            127
        }
        Err(e) => {
            eprintln!("kumi attach: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_lists_are_checked_against_the_job() {
        assert_eq!(parse_ranks("0,3-5", 8).unwrap(), [0, 3, 4, 5]);
        assert!(parse_ranks("7-8", 8).unwrap_err().contains("ranks 0 to 7"));
        assert!(parse_ranks("x", 8).unwrap_err().contains("not a rank"));
        assert!(parse_ranks("5-3", 8).is_err());
    }
}
