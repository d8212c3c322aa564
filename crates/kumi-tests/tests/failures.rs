//! How a job of real kumi ranks ends when one of them fails, and that nothing of
//! it is left behind.

use kumi_tests::{alive, bin, kumi_shm_files};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Starts `kumi run -n 4 fail <mode> <victim>`, collects the rank pids it prints,
/// waits for the end, and returns (exit code, stderr, pids).
fn run_fail(mode: &str, victim: usize) -> (Option<i32>, String, Vec<i32>, Duration) {
    let mut child = Command::new(bin("kumi"))
        .args([
            "run",
            "-n",
            "4",
            bin("fail").to_str().unwrap(),
            mode,
            &victim.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let out = BufReader::new(child.stdout.take().unwrap());
    let mut pids = Vec::new();
    for line in out.lines().map_while(Result::ok) {
        if let Some(rest) = line.strip_prefix("pid ") {
            let pid: i32 = rest.split_whitespace().nth(1).unwrap().parse().unwrap();
            pids.push(pid);
        }
    }
    let o = child.wait_with_output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        pids,
        t.elapsed(),
    )
}

fn assert_all_gone(pids: &[i32]) {
    let t = Instant::now();
    while pids.iter().any(|&p| alive(p)) {
        assert!(
            t.elapsed() < Duration::from_secs(1),
            "ranks still alive after 1 s: {pids:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        kumi_shm_files().is_empty(),
        "files left in /dev/shm: {:?}",
        kumi_shm_files()
    );
}

#[test]
fn segfaulting_rank_ends_the_job_with_139_and_names_it() {
    let (code, err, pids, took) = run_fail("segv", 2);
    assert_eq!(code, Some(139), "{err}");
    assert!(err.contains("rank 2") && err.contains("SIGSEGV"), "{err}");
    assert_eq!(pids.len(), 4);
    assert_all_gone(&pids);
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
fn rank_exiting_with_3_ends_the_job_with_3() {
    let (code, err, pids, _) = run_fail("exit3", 1);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("rank 1") && err.contains("code 3"), "{err}");
    assert_all_gone(&pids);
}

#[test]
fn panicking_rank_ends_the_job_with_101_and_names_the_panic() {
    let (code, err, pids, took) = run_fail("panic", 1);
    assert_eq!(code, Some(101), "{err}");
    assert!(
        err.contains("the test panics on purpose")
            && err.contains("rank 1")
            && err.contains("panicked"),
        "{err}"
    );
    assert_all_gone(&pids);
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
fn abort_ends_the_job_with_its_code_and_message() {
    let (code, err, pids, _) = run_fail("abort", 3);
    assert_eq!(code, Some(7), "{err}");
    assert!(err.contains("rank 3") && err.contains("abort"), "{err}");
    assert!(err.contains("the test asked for it"), "{err}");
    assert_all_gone(&pids);
}

/// Starts `kumi run -n <n> fail hang 99` (every rank waits forever) and reads
/// the `pid <rank> <pid>` line of every rank: returns the launcher and the
/// (rank, pid) pairs.
fn start_hanging_job(n: usize, stderr: Stdio) -> (std::process::Child, Vec<(i32, i32)>) {
    let mut child = Command::new(bin("kumi"))
        .args([
            "run",
            "-n",
            &n.to_string(),
            bin("fail").to_str().unwrap(),
            "hang",
            "99",
        ])
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut pids = Vec::new();
    let mut line = String::new();
    while pids.len() < n {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "job ended early");
        if let Some(rest) = line.trim().strip_prefix("pid ") {
            let mut f = rest.split_whitespace().map(|x| x.parse::<i32>().unwrap());
            pids.push((f.next().unwrap(), f.next().unwrap()));
        }
    }
    (child, pids)
}

#[test]
fn rank_killed_while_blocked_is_reported_with_its_kumi_call() {
    let (child, pids) = start_hanging_job(3, Stdio::piped());
    // Let every rank reach its receive, then kill rank 1 from outside.
    std::thread::sleep(Duration::from_millis(500));
    let victim = pids
        .iter()
        .find(|(r, _)| *r == 1)
        .expect("rank 1 printed its pid")
        .1;
    let pids: Vec<i32> = pids.iter().map(|&(_, p)| p).collect();
    // SAFETY: sending SIGKILL to a process this test started through kumi.
    unsafe { libc::kill(victim, libc::SIGKILL) };
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(128 + 9), "{err}");
    assert!(
        err.contains("rank 1") && err.contains("SIGKILL") && err.contains("kumi::recv"),
        "{err}"
    );
    assert_all_gone(&pids);
}

#[test]
fn sigkill_of_the_launcher_leaves_no_rank_and_no_file() {
    let (mut child, pids) = start_hanging_job(4, Stdio::null());
    child.kill().unwrap();
    child.wait().unwrap();
    let pids: Vec<i32> = pids.iter().map(|&(_, p)| p).collect();
    assert_all_gone(&pids);
}
