//! Job supervision through the real launcher: deadlocks are found, named and
//! end the job with exit code 86; long computations and late senders are never
//! reported; `--stats-json` counts exactly what the program sent; `kumi top`
//! shows a running job in a terminal and leaves it running; `kumi ps` lists it.

use kumi_tests::bin;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The exit code `kumi run --help` documents for a deadlock.
const DEADLOCK_EXIT: i32 = 86;

struct Run {
    code: Option<i32>,
    stderr: String,
    /// When the first line of the deadlock report appeared, from the start.
    reported_after: Option<Duration>,
}

/// Runs `kumi run -n <n> <extra...> <prog> <args...>`; kills it after `limit`.
fn run(n: usize, extra: &[&str], prog: &str, args: &[&str], limit: Duration) -> Run {
    run_env(&[], n, extra, prog, args, limit)
}

/// [`run`] with environment variables `env` set for the job.
fn run_env(
    env: &[(&str, &str)],
    n: usize,
    extra: &[&str],
    prog: &str,
    args: &[&str],
    limit: Duration,
) -> Run {
    let t0 = Instant::now();
    let mut child = Command::new(bin("kumi"))
        .envs(env.iter().copied())
        .arg("run")
        .arg("-n")
        .arg(n.to_string())
        .args(extra)
        .arg(bin(prog))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kumi");
    let (tx, rx) = mpsc::channel();
    let err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send((t0.elapsed(), line));
        }
    });
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    reader.join().unwrap();
    let lines: Vec<(Duration, String)> = rx.try_iter().collect();
    Run {
        code,
        reported_after: lines
            .iter()
            .find(|(_, l)| l.contains("deadlock:"))
            .map(|(t, _)| *t),
        stderr: lines.into_iter().map(|(_, l)| l + "\n").collect::<String>(),
    }
}

/// Runs a deadlocking mode and checks the exit code, the time to the report
/// and that the report contains every `expect`ed piece.
fn deadlock(n: usize, mode: &str, within: Duration, expect: &[&str]) {
    let r = run(n, &[], "deadlock", &[mode], Duration::from_secs(30));
    assert_eq!(r.code, Some(DEADLOCK_EXIT), "{mode}: {}", r.stderr);
    let t = r.reported_after.expect("a report");
    assert!(t < within, "{mode}: reported after {t:?}\n{}", r.stderr);
    for e in expect {
        assert!(r.stderr.contains(e), "{mode}: no {e:?} in\n{}", r.stderr);
    }
    assert!(
        r.stderr.contains("src/bin/deadlock.rs:"),
        "{mode}: no location\n{}",
        r.stderr
    );
}

const SOON: Duration = Duration::from_secs(3);

#[test]
fn recv_cycle_of_two() {
    deadlock(
        2,
        "recv2",
        SOON,
        &[
            "rank 0 waits in kumi::recv on world from rank 1, tag 7",
            "rank 1 waits in kumi::recv on world from rank 0, tag 7",
            "cycle 0 -> 1 -> 0",
        ],
    );
}

#[test]
fn recv_cycle_of_five() {
    deadlock(
        5,
        "recv5",
        SOON,
        &[
            "rank 4 waits in kumi::recv on world from rank 0, tag 7",
            "rank 2 waits in kumi::recv on world from rank 3, tag 7",
            "0 -> 1 -> 2 -> 3 -> 4 -> 0",
        ],
    );
}

#[test]
fn all_in_barrier_but_one_in_recv() {
    deadlock(
        4,
        "barrier",
        SOON,
        &[
            "ranks 0-2 wait in kumi::barrier on world",
            "rank 3 waits in kumi::recv on world from rank 0, tag 7",
        ],
    );
}

#[test]
fn mismatched_collectives_barrier_on_different_communicators() {
    deadlock(
        4,
        "mismatch",
        SOON,
        &[
            "ranks 0, 1 wait in kumi::barrier on world",
            "ranks 2, 3 wait in kumi::barrier on comm #2",
            "every rank of the job is blocked",
        ],
    );
}

#[test]
fn mismatched_collectives_reduce_against_bcast() {
    deadlock(
        4,
        "bcastreduce",
        SOON,
        &[
            "rank 0 waits in kumi collective on world (at crates/kumi-tests/src/bin/deadlock.rs:",
            "ranks 1-3 wait in kumi collective on world",
        ],
    );
}

#[test]
fn wildcard_recv_that_nothing_matches() {
    deadlock(
        3,
        "wildcard",
        SOON,
        &[
            "rank 0 waits in kumi::recv on world from any source, tag 5",
            "ranks 1, 2 wait in kumi::barrier on world",
        ],
    );
}

#[test]
fn send_send_cycle_of_rendezvous_messages() {
    deadlock(
        2,
        "sendsend",
        SOON,
        &[
            "rank 0 waits in kumi::send on world to rank 1, tag 7",
            "rank 1 waits in kumi::send on world to rank 0, tag 7",
        ],
    );
}

#[test]
fn synchronous_send_cycle() {
    deadlock(
        2,
        "ssend",
        SOON,
        &[
            "rank 0 waits in kumi::send on world to rank 1, tag 7",
            "0 -> 1 -> 0",
        ],
    );
}

#[test]
fn wait_on_requests_that_never_match() {
    deadlock(
        2,
        "waitall",
        SOON,
        &[
            "ranks 0, 1 wait in kumi::wait",
            "every rank of the job is blocked",
        ],
    );
}

/// Ranks 2 and 3 compute for 2 s before they deadlock too; the deadlock of
/// ranks 0 and 1 on their split communicator is found while 2 and 3 still
/// compute (split communicators register their members with the watch, so
/// waits on them name world ranks).
#[test]
fn deadlock_on_split_communicator_while_others_compute() {
    deadlock(
        4,
        "split",
        SOON,
        &[
            "rank 0 waits in kumi::recv on comm #2 from rank 1, tag 7",
            "rank 1 waits in kumi::recv on comm #2 from rank 0, tag 7",
            "cycle 0 -> 1 -> 0",
        ],
    );
}

#[test]
fn report_mode_keeps_the_job_alive() {
    let r = run(
        2,
        &["--on-deadlock=report"],
        "deadlock",
        &["recv2"],
        Duration::from_secs(4),
    );
    assert_eq!(r.code, None, "the job ended by itself: {}", r.stderr);
    let t = r.reported_after.expect("a report");
    assert!(t < SOON, "reported after {t:?}");
    assert_eq!(
        r.stderr.matches("kumi run: deadlock:").count(),
        1,
        "{}",
        r.stderr
    );
}

/// A rank computing 1 s and then 10 s between messages (far longer than the
/// 1 s grace period: if computing counted as blocked, it would be reported
/// within the first 1.1 s) while its partner waits.
#[test]
fn no_false_alarm_for_long_computation() {
    let r = run(
        3,
        &[],
        "deadlock_free",
        &["compute"],
        Duration::from_secs(30),
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(!r.stderr.contains("deadlock"), "{}", r.stderr);
}

/// `KUMI_BLOCKED_MS` moves when a wait is first reported, never whether a
/// deadlock is found: at 2 s the report of a cycle comes after those 2 s (and
/// still comes); at 5 ms a rank that computes is still no deadlock.
#[test]
fn blocked_threshold_moves_the_report_not_the_verdict() {
    let r = run_env(
        &[("KUMI_BLOCKED_MS", "2000")],
        2,
        &[],
        "deadlock",
        &["recv2"],
        Duration::from_secs(30),
    );
    assert_eq!(r.code, Some(DEADLOCK_EXIT), "{}", r.stderr);
    let t = r.reported_after.expect("a report");
    assert!(
        t >= Duration::from_secs(2) && t < Duration::from_secs(6),
        "reported after {t:?}\n{}",
        r.stderr
    );
    assert!(r.stderr.contains("cycle 0 -> 1 -> 0"), "{}", r.stderr);
    let r = run_env(
        &[("KUMI_BLOCKED_MS", "5")],
        3,
        &[],
        "deadlock_free",
        &["compute"],
        Duration::from_secs(30),
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(!r.stderr.contains("deadlock"), "{}", r.stderr);
}

#[test]
fn no_false_alarm_for_a_rank_that_sleeps_before_sending() {
    let r = run(4, &[], "deadlock_free", &["sleep"], Duration::from_secs(30));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(!r.stderr.contains("deadlock"), "{}", r.stderr);
}

/// Two ranks moving long messages, in chunks through the rings or by single
/// copy, are never blocked, though each waits for the other with no message
/// in flight: waits reported after 1 ms and a grace period of 200 ms, four
/// messages of 1 GiB. (A wait was reported again on its first turn without a
/// frame, and the launcher, seeing both ends blocked between the chunks,
/// ended such a job as a deadlock; a sender was reported while it pushed.)
#[test]
fn no_false_alarm_for_long_messages() {
    for copy in ["off", "on"] {
        let r = run_env(
            &[("KUMI_BLOCKED_MS", "1"), ("KUMI_SINGLE_COPY", copy)],
            2,
            &["--deadlock-timeout", "0.2"],
            "deadlock_free",
            &["long", "1073741824", "4"],
            Duration::from_secs(120),
        );
        assert_eq!(r.code, Some(0), "single copy {copy}: {}", r.stderr);
        assert!(
            !r.stderr.contains("deadlock"),
            "single copy {copy}: {}",
            r.stderr
        );
    }
}

// ----- statistics -------------------------------------------------------------

/// Same as in src/bin/stats.rs.
fn expected_msgs(r: usize, q: usize) -> usize {
    1 + (r * 3 + q) % 4
}

fn size(r: usize, q: usize, i: usize) -> usize {
    match (r + q + i) % 3 {
        0 => 10 + r + q,
        1 => 0,
        _ => 100_000 + 8 * i,
    }
}

#[test]
fn stats_json_counts_exactly_what_the_program_sent() {
    let n = 3;
    let path = std::env::temp_dir().join(format!("kumi-stats-{}.json", std::process::id()));
    let p = path.to_str().unwrap();
    let r = run(
        n,
        &["--stats", "--stats-json", p],
        "stats",
        &[],
        Duration::from_secs(30),
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stderr.contains("communication fraction"), "{}", r.stderr);
    let text = std::fs::read_to_string(&path).expect("the JSON file");
    let _ = std::fs::remove_file(&path);
    let j: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(j["size"], n);
    let f = j["communication_fraction"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&f), "{f}");
    for r in 0..n {
        let rank = &j["ranks"][r];
        assert_eq!(rank["rank"], r);
        assert!(rank["wall_s"].as_f64().unwrap() > 0.0);
        let (mut mo, mut bo) = (0, 0);
        for q in 0..n {
            let peer = &rank["peers"][q];
            let sent: usize = (0..expected_msgs(r, q)).map(|i| size(r, q, i)).sum();
            let got: usize = (0..expected_msgs(q, r)).map(|i| size(q, r, i)).sum();
            assert_eq!(peer["peer"], q);
            assert_eq!(peer["msgs_out"], expected_msgs(r, q), "{r}->{q}: {text}");
            assert_eq!(peer["bytes_out"], sent, "{r}->{q}: {text}");
            assert_eq!(peer["msgs_in"], expected_msgs(q, r), "{q}->{r}: {text}");
            assert_eq!(peer["bytes_in"], got, "{q}->{r}: {text}");
            mo += expected_msgs(r, q);
            bo += sent;
        }
        assert_eq!(rank["msgs_out"], mo);
        assert_eq!(rank["bytes_out"], bo);
    }
}

// ----- kumi top and kumi ps ------------------------------------------------------

struct Tmux(String);

impl Tmux {
    fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.0)
            .args(args)
            .output()
            .expect("tmux")
    }

    fn capture(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "top"]).stdout).into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

struct Job(Child);

impl Drop for Job {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn top_shows_every_rank_and_quits_without_touching_the_job() {
    if Command::new("tmux").arg("-V").output().is_err() {
        panic!("tmux is not installed: test.sh installs it (apt-get install -y tmux)");
    }
    let go = std::env::temp_dir().join(format!("kumi-top-go-{}", std::process::id()));
    let _ = std::fs::remove_file(&go);
    let mut job = Job(Command::new(bin("kumi"))
        .args(["run", "-n", "4"])
        .arg(bin("stats_top"))
        .arg(&go)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap());
    let mut out = BufReader::new(job.0.stdout.take().unwrap());
    // Other ranks may print first; rank 0 prints the job id.
    let id = loop {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "no job id printed");
        if let Some(id) = line.trim().strip_prefix("job ") {
            break id.to_string();
        }
    };

    let ps = Command::new(bin("kumi")).arg("ps").output().unwrap();
    let ps = String::from_utf8_lossy(&ps.stdout);
    assert!(ps.contains(&id) && ps.contains("stats_top"), "{ps}");

    let tmux = Tmux(format!("kumi-test-{}", std::process::id()));
    let top = format!("{} top {id}", bin("kumi").display());
    let o = tmux.cmd(&[
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        "180",
        "-y",
        "30",
        &top,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The last rank waits in a receive; it reports after 100 ms and the view
    // refreshes twice a second.
    let t = Instant::now();
    let mut screen = tmux.capture();
    while !(screen.contains("blocked") && screen.contains("kumi::recv on world from rank 0")) {
        assert!(t.elapsed() < Duration::from_secs(10), "screen:\n{screen}");
        std::thread::sleep(Duration::from_millis(200));
        screen = tmux.capture();
    }
    assert!(screen.contains(&id), "{screen}");
    let rows: Vec<&str> = screen
        .lines()
        .filter(|l| l.contains("computing") || l.contains("blocked") || l.contains("ended"))
        .collect();
    assert_eq!(rows.len(), 4, "one row per rank:\n{screen}");
    assert!(
        rows.iter().any(|r| r.contains("computing")),
        "rank 0 computes:\n{screen}"
    );

    tmux.cmd(&["send-keys", "-t", "top", "q"]);
    let t = Instant::now();
    while tmux.cmd(&["has-session", "-t", "top"]).status.success() {
        assert!(t.elapsed() < Duration::from_secs(5), "top did not quit");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        job.0.try_wait().unwrap().is_none(),
        "the job ended when top quit"
    );

    std::fs::write(&go, b"").unwrap();
    let t = Instant::now();
    let status = loop {
        if let Some(s) = job.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the job did not finish"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = std::fs::remove_file(&go);
    assert_eq!(status.code(), Some(0));
}

/// `kumi run --monitor`: what ranks print while the view holds the terminal is
/// shown in its output pane and printed, all of it, when the view closes.
#[test]
fn monitor_keeps_rank_output_and_prints_it_when_the_view_closes() {
    if Command::new("tmux").arg("-V").output().is_err() {
        panic!("tmux is not installed: test.sh installs it (apt-get install -y tmux)");
    }
    let go = std::env::temp_dir().join(format!("kumi-monitor-go-{}", std::process::id()));
    let _ = std::fs::remove_file(&go);
    let tmux = Tmux(format!("kumi-monitor-{}", std::process::id()));
    let cmd = format!(
        "{} run --monitor -n 4 {} {}; echo EXIT=$?; sleep 60",
        bin("kumi").display(),
        bin("stats_top").display(),
        go.display()
    );
    let o = tmux.cmd(&[
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        "160",
        "-y",
        "40",
        "sh",
        "-c",
        &cmd,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // While the view is open, rank 0's "job ..." line and the early "rank N
    // done" lines of ranks 1 and 2 show in its output pane.
    let t = Instant::now();
    let mut screen = tmux.capture();
    while !(screen.contains("output (")
        && screen.contains("job j")
        && screen.contains("rank 1 done"))
    {
        assert!(t.elapsed() < Duration::from_secs(10), "screen:\n{screen}");
        std::thread::sleep(Duration::from_millis(200));
        screen = tmux.capture();
    }
    assert!(screen.contains("RANK"), "the view is open:\n{screen}");
    std::fs::write(&go, b"").unwrap();
    // The job ends, the view closes, and every line reaches the terminal.
    let t = Instant::now();
    while !screen.contains("EXIT=") {
        assert!(t.elapsed() < Duration::from_secs(15), "screen:\n{screen}");
        std::thread::sleep(Duration::from_millis(200));
        screen = tmux.capture();
    }
    let _ = std::fs::remove_file(&go);
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(!screen.contains("RANK"), "the view closed:\n{screen}");
    assert!(screen.contains("job j"), "{screen}");
    for r in 0..4 {
        assert!(
            screen.contains(&format!("rank {r} done")),
            "rank {r}:\n{screen}"
        );
    }
}

/// The benchmark suite at its quick size runs with deadlock detection on (the
/// default) and is never reported.
#[test]
fn no_false_alarm_in_the_quick_benchmark_suite() {
    let out = std::env::temp_dir().join(format!("kumi-supervision-{}", std::process::id()));
    let o = Command::new(bin("kumi"))
        .args(["bench", "all", "--quick", "--out"])
        .arg(&out)
        .output()
        .expect("start kumi bench");
    let _ = std::fs::remove_dir_all(&out);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("deadlock"), "{err}");
    assert_eq!(o.status.code(), Some(0), "{err}");
}

/// A receive-receive cycle between ranks on two test hosts (network
/// namespaces, see `kumi_tests::netns`): the reports travel over the network
/// control channel. Needs root; without it the test says SKIPPED loudly.
#[test]
fn deadlock_across_two_namespace_hosts() {
    use kumi_tests::netns::{self, Cluster};
    if netns::skip_unless_root("deadlock_across_two_namespace_hosts") {
        return;
    }
    let c = Cluster::create(2).unwrap_or_else(|e| panic!("cannot create 2 test hosts: {e}"));
    let prog = bin("deadlock");
    let t = Instant::now();
    let o = c.kumi_run(
        2,
        &[(0, 1), (1, 1)],
        &[],
        &[prog.to_str().unwrap(), "recv2"],
    );
    let took = t.elapsed();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(DEADLOCK_EXIT), "{err}");
    for e in [
        "rank 0 waits in kumi::recv on world from rank 1, tag 7",
        "rank 1 waits in kumi::recv on world from rank 0, tag 7",
        "cycle 0 -> 1 -> 0",
    ] {
        assert!(err.contains(e), "no {e:?} in\n{err}");
    }
    // Detection within 3 s, plus starting and stopping two hosts.
    assert!(took < Duration::from_secs(8), "took {took:?}\n{err}");
    assert!(
        c.all_pids().is_empty(),
        "processes left: {:?}",
        c.all_pids()
    );
}
