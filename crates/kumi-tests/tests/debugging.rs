//! Debugging a job with gdb, through the real launcher: `kumi stacks` on a
//! running job (one host and across namespace hosts), `kumi attach` running
//! gdb commands against a chosen rank, the stacks in a deadlock report, and
//! `kumi run --debug` starting one rank under the debugger.
//!
//! Needs gdb (`test.sh` installs it); the rank programs are `fail` and
//! `deadlock` (Rust) and `crash.c`/`jacobi_ckpt.c` (C, built with `kumi cc -g`).

use kumi_tests::netns::{self, cluster};
use kumi_tests::programs::{compile_all, lib_dir};
use kumi_tests::{alive, bin};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;

fn gdb_installed() {
    let ok = Command::new("gdb")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(ok, "gdb is missing: apt-get install gdb (test.sh does)");
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A job of `n` ranks of `fail hang` (each waits forever in a receive; the
/// deadlock detector is off), seen running: the child, its job id and the
/// ranks' pids.
struct Hanging {
    child: Child,
    job: String,
    pids: Vec<i32>,
}

impl Hanging {
    fn start(mut cmd: Command, n: usize) -> Hanging {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kumi run");
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut pids = vec![0; n];
        for _ in 0..n {
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            let f: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(f.first(), Some(&"pid"), "{line}");
            pids[f[1].parse::<usize>().unwrap()] = f[2].parse().unwrap();
        }
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        // The job id, from a rank's environment.
        let environ = std::fs::read(format!("/proc/{}/environ", pids[0])).unwrap();
        let job = environ
            .split(|b| *b == 0)
            .find_map(|v| v.strip_prefix(b"KUMI_JOB="))
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .expect("KUMI_JOB in the rank's environment");
        Hanging { child, job, pids }
    }

    fn local(n: usize) -> Hanging {
        let mut c = Command::new(bin("kumi"));
        c.args(["run", "-n", &n.to_string(), "--deadlock-timeout", "0"])
            .arg(bin("fail"))
            .args(["hang", "99"]);
        Hanging::start(c, n)
    }
}

impl Drop for Hanging {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The sections of a `kumi stacks` report, by rank.
fn sections(report: &str) -> Vec<(u32, String)> {
    let mut out: Vec<(u32, String)> = Vec::new();
    for line in report.lines() {
        if let Some(rest) = line.strip_prefix("rank ") {
            let r = rest.split(' ').next().unwrap().parse().unwrap();
            out.push((r, String::new()));
        } else if let Some((_, s)) = out.last_mut() {
            s.push_str(line);
            s.push('\n');
        }
    }
    out
}

/// `kumi stacks JOB` run by `kumi` (a command naming the binary, perhaps
/// inside a test host): its report, and the report's sections.
fn stacks(mut kumi: Command, job: &str) -> (String, Vec<(u32, String)>) {
    let o = kumi.args(["stacks", job]).output().unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let s = sections(&out);
    (out, s)
}

#[test]
fn kumi_stacks_names_each_ranks_current_function() {
    gdb_installed();
    let job = Hanging::local(3);
    let (out, s) = stacks(Command::new(bin("kumi")), &job.job);
    assert_eq!(
        s.iter().map(|(r, _)| *r).collect::<Vec<_>>(),
        [0, 1, 2],
        "{out}"
    );
    for (r, text) in &s {
        assert!(
            text.contains("entered at kumi::comm::Comm::recv")
                && text.contains("fail::main at crates/kumi-tests/src/bin/fail.rs:"),
            "rank {r}'s stack does not show where it waits:\n{text}"
        );
        assert!(
            text.contains("\"kumi-progress\": kumi's progress thread"),
            "{text}"
        );
    }
    // The job goes on.
    for p in &job.pids {
        assert!(alive(*p), "rank process {p} is gone after kumi stacks");
    }
    // Only some ranks; a rank that is not there.
    let o = Command::new(bin("kumi"))
        .args(["stacks", &job.job, "--ranks", "2"])
        .output()
        .unwrap();
    assert_eq!(sections(&text(&o).0).len(), 1, "{}", text(&o).0);
    let o = Command::new(bin("kumi"))
        .args(["stacks", &job.job, "--ranks", "3"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(text(&o).1.contains("ranks 0 to 2"), "{}", text(&o).1);
}

#[test]
fn kumi_attach_runs_gdb_against_the_chosen_rank() {
    gdb_installed();
    let job = Hanging::local(3);
    let o = Command::new(bin("kumi"))
        .args([
            "attach",
            &job.job,
            "2",
            "--",
            "-batch",
            "-ex",
            "info threads",
        ])
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!("rank 2 of job {} (pid {}", job.job, job.pids[2])),
        "{err}"
    );
    assert!(
        out.contains(&format!("(LWP {}) \"fail\"", job.pids[2]))
            && out.contains("\"kumi-progress\""),
        "gdb did not list rank 2's threads:\n{out}"
    );
    let o = Command::new(bin("kumi"))
        .args(["attach", &job.job, "7"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(text(&o).1.contains("has ranks 0 to 2"), "{}", text(&o).1);
    assert!(
        alive(job.pids[2]),
        "rank 2 did not survive being attached to"
    );
}

#[test]
fn a_deadlock_report_carries_each_deadlocked_ranks_stack() {
    gdb_installed();
    let o = Command::new(bin("kumi"))
        .args(["run", "-n", "3"])
        .arg(bin("deadlock"))
        .arg("barrier")
        .output()
        .unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(86), "{err}");
    let at = err
        .find("stacks of the deadlocked ranks")
        .unwrap_or_else(|| panic!("no stacks in the report:\n{err}"));
    let s = sections(&err[at..]);
    assert_eq!(s.len(), 3, "{err}");
    for (r, text) in s {
        let (call, line) = if r < 2 {
            ("barrier", 45)
        } else {
            ("recv<u8>", 43)
        };
        assert!(
            text.contains(&format!("entered at kumi::comm::Comm::{call}"))
                && text.contains(&format!(
                    "deadlock::main at crates/kumi-tests/src/bin/deadlock.rs:{line}"
                )),
            "rank {r}:\n{text}"
        );
    }
}

fn c_programs() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let out = lib_dir().join("debug-tests");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kumi-mpi/tests/c");
        let cc = [bin("kumi").display().to_string(), "cc".into()];
        compile_all(
            &cc,
            &["-g", "-O0"],
            &src,
            &["crash.c", "jacobi_ckpt.c"],
            &out,
        );
        out
    })
}

#[test]
fn kumi_run_debug_starts_the_chosen_rank_under_the_debugger() {
    gdb_installed();
    let dir = c_programs();
    // A rank that crashes: the debugger stops it at the fault and prints
    // where it is.
    let o = Command::new(bin("kumi"))
        .args([
            "run",
            "-n",
            "3",
            "--debug=1",
            "--debugger",
            "gdb -q -batch -ex run -ex bt --args",
        ])
        .arg(dir.join("crash"))
        .arg("segv")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (out, err) = text(&o);
    let all = format!("{out}{err}");
    assert!(!o.status.success(), "{all}");
    assert!(all.contains("received signal SIGSEGV"), "{all}");
    assert!(
        all.contains("main (argc=") && all.contains("crash.c:"),
        "no backtrace:\n{all}"
    );
    assert!(!out.contains("passed the barrier"), "{out}");
    // A rank that runs through: the job ends as without the debugger.
    let o = Command::new(bin("kumi"))
        .args([
            "run",
            "-n",
            "3",
            "--debug",
            "--debugger",
            "gdb -q -batch -ex run --args",
        ])
        .arg(dir.join("jacobi_ckpt"))
        .args(["1000", "50", "0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(
        out.contains("exited normally") && out.contains("result steps=50"),
        "{out}"
    );
    let o = Command::new(bin("kumi"))
        .args(["run", "-n", "3", "--debug=3"])
        .arg(dir.join("crash"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("ranks 0 to 2"), "{}", text(&o).1);
}

/// A job across two namespace hosts: `kumi stacks`, run beside the
/// launcher, reaches the ranks of the other host through the job's remote
/// shell.
#[test]
fn kumi_stacks_reaches_ranks_on_other_hosts() {
    if netns::skip_unless_root("kumi_stacks_reaches_ranks_on_other_hosts") {
        return;
    }
    gdb_installed();
    let c = cluster(2);
    let mut cmd = c.kumi_command(
        4,
        &[(0, 2), (1, 2)],
        &["--deadlock-timeout", "0"],
        &[bin("fail").to_str().unwrap(), "hang", "99"],
    );
    cmd.stdin(Stdio::null());
    let job = Hanging::start(cmd, 4);
    let (out, s) = stacks(c.command_on(0, &bin("kumi")), &job.job);
    assert_eq!(s.len(), 4, "{out}");
    for (r, text) in &s {
        assert!(text.contains("fail::main at"), "rank {r}:\n{text}");
    }
    assert!(out.contains(&format!("on {}):", c.hosts[1])), "{out}");
    drop(job);
    netns::wait_all_gone(&c, std::time::Duration::from_secs(5));
    netns::assert_clean(&c);
}
