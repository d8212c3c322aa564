//! Running gdb beside a job's ranks: every thread's stack of a set of ranks,
//! read in parallel, each process stopped only while its gdb reads it.
//! (What is run and how gdb's answer is read: `kumi_core::debug`.)

use kumi_core::debug::{self, Reach};
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A rank whose stack is wanted.
#[derive(Clone, Debug)]
pub struct Target {
    /// Global rank.
    pub rank: u32,
    /// Its process id on its host.
    pub pid: u32,
    /// Its host's name.
    pub host: String,
    /// How to get there.
    pub reach: Reach,
}

/// gdb on this machine's `PATH`, if installed.
pub fn gdb() -> Option<PathBuf> {
    crate::spec::find_in_path("gdb".as_ref())
}

/// Each target's stacks (formatted, see [`debug::format_stacks`]) or one
/// sentence saying why not, in the targets' order. Every gdb runs at once;
/// one still running after `limit` is killed (its process is detached by
/// the kernel: gdb's death ends the trace).
pub fn stacks(
    targets: &[Target],
    limit: Duration,
    max_frames: usize,
) -> Vec<Result<String, String>> {
    let started: Vec<Result<std::process::Child, String>> = targets
        .iter()
        .map(|t| {
            let argv = t.reach.command(&debug::stack_command(t.pid), false);
            Command::new(&argv[0])
                .args(&argv[1..])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot run {}: {e}", argv[0]))
        })
        .collect();
    // Read each one's output on its own thread (a full pipe would stall gdb).
    let readers: Vec<_> = started
        .into_iter()
        .map(|c| {
            c.map(|mut child| {
                let mut out = child.stdout.take().expect("piped");
                let mut err = child.stderr.take().expect("piped");
                let t = std::thread::spawn(move || {
                    let mut text = String::new();
                    let _ = out.read_to_string(&mut text);
                    let mut e = String::new();
                    let _ = err.read_to_string(&mut e);
                    text.push_str(&e);
                    text
                });
                (child, t)
            })
        })
        .collect();
    let deadline = Instant::now() + limit;
    readers
        .into_iter()
        .map(|r| {
            let (mut child, reader) = r?;
            loop {
                match child.try_wait() {
                    Ok(Some(_)) => break,
                    Ok(None) if Instant::now() >= deadline => {
                        let _ = child.kill();
                        let _ = child.wait();
                        return Err(format!("gdb took longer than {} s", limit.as_secs()));
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                    Err(e) => return Err(format!("waiting for gdb: {e}")),
                }
            }
            let text = reader.join().unwrap_or_default();
            let threads = debug::parse_stacks(&text);
            if threads.is_empty() {
                Err(debug::gdb_failure(&text))
            } else {
                Ok(debug::format_stacks(&threads, "    ", max_frames))
            }
        })
        .collect()
}

/// The report of [`stacks`] for `targets`: a header line per rank
/// (`rank R (pid P on HOST):`), then its stacks or why there are none.
pub fn report(targets: &[Target], limit: Duration, max_frames: usize) -> String {
    let mut s = String::new();
    for (t, r) in targets.iter().zip(stacks(targets, limit, max_frames)) {
        s.push_str(&format!("rank {} (pid {} on {}):\n", t.rank, t.pid, t.host));
        match r {
            Ok(text) => s.push_str(&text),
            Err(why) => s.push_str(&format!("    no stack: {why}\n")),
        }
    }
    s
}
