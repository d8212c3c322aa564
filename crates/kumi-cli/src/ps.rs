//! `kumi ps`: the running jobs of this user.
//!
//! Every job's launcher listens on the abstract Unix socket `@kumi-<uid>-<job>`;
//! the kernel lists abstract sockets in /proc/net/unix, so finding the jobs
//! needs no file of our own (none could be left behind by a crash). Each one is
//! then asked for a snapshot as a read-only monitor (see `top.rs`).

use crate::top::{running_jobs, Monitor};
use clap::Args;

/// Options of `kumi ps`.
#[derive(Args, Debug)]
pub struct PsArgs {}

/// `kumi ps`.
pub fn main(_args: PsArgs) -> i32 {
    let jobs = running_jobs();
    if jobs.is_empty() {
        println!("no kumi job of this user is running");
        return 0;
    }
    println!(
        "{:<12} {:>5} {:>9} {:>8} {:>8}  PROGRAM",
        "JOB", "RANKS", "ELAPSED", "BLOCKED", "ENDED"
    );
    for (job, address) in jobs {
        match Monitor::connect(&address).and_then(|mut m| m.snapshot()) {
            Ok(s) => {
                let blocked = s.ranks.iter().filter(|r| r.blocked.is_some()).count();
                let ended = s.ranks.iter().filter(|r| r.ended).count();
                println!(
                    "{:<12} {:>5} {:>8.0}s {:>8} {:>8}  {}",
                    s.job,
                    s.size,
                    s.elapsed_ms as f64 / 1000.0,
                    blocked,
                    ended,
                    s.program
                );
            }
            Err(e) => println!("{job:<12} (not answering: {e})"),
        }
    }
    0
}
