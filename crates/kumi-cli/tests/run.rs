//! `kumi run` end to end: real launcher, real rank processes, no mocks.
//!
//! Ranks are shell scripts, or this test executable itself re-run as a rank
//! (`rank_helper`, driven by `KUMI_TEST_ROLE`), which speaks the control protocol
//! through kumi-core the way the runtime will.

use kumi_core::control::{encode, from_hex, prove, FrameDecoder, ToLauncher, ToRank};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const KUMI: &str = env!("CARGO_BIN_EXE_kumi");

fn kumi(args: &[&str]) -> Command {
    let mut c = Command::new(KUMI);
    c.args(args).env("RUST_BACKTRACE", "0");
    c
}

struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
    took: Duration,
}

/// Runs kumi to completion (killed after 60 s so a bug cannot hang the suite).
fn run(args: &[&str], stdin: &[u8]) -> Ran {
    let start = Instant::now();
    let mut child = kumi(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = wait_output(child, Duration::from_secs(60));
    Ran {
        took: start.elapsed(),
        ..out
    }
}

fn wait_output(mut child: Child, limit: Duration) -> Ran {
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = so.read_to_string(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("kumi did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    Ran {
        code,
        stdout: t_out.join().unwrap(),
        stderr: t_err.join().unwrap(),
        took: start.elapsed(),
    }
}

/// A process exists and is not a zombie.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            stat.rsplit(')')
                .next()
                .and_then(|s| s.split_whitespace().next())
                != Some("Z")
        }
        Err(_) => false,
    }
}

fn wait_gone(pids: &[u32], within: Duration) {
    let start = Instant::now();
    while pids.iter().any(|&p| alive(p)) {
        assert!(
            start.elapsed() < within,
            "ranks {pids:?} still alive after {within:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn pids_in(text: &str) -> Vec<u32> {
    text.lines()
        .filter_map(|l| {
            l.split_whitespace()
                .skip_while(|w| *w != "pid")
                .nth(1)?
                .parse()
                .ok()
        })
        .collect()
}

/// Nothing of job `job` in /dev/shm (the design leaves no file at all).
fn nothing_left(job: &str) {
    for e in std::fs::read_dir("/dev/shm").unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(!name.contains(job), "left behind: /dev/shm/{name}");
    }
}

/// Starts a job whose ranks print `pid <pid>` and then wait; returns once all
/// `n` ranks have printed.
fn start_waiting_job(
    n: usize,
    extra: &[&str],
) -> (Child, Vec<u32>, BufReader<std::process::ChildStdout>) {
    let mut args = vec!["run", "-n"];
    let ns = n.to_string();
    args.push(&ns);
    args.extend_from_slice(extra);
    args.extend_from_slice(&["sh", "-c", "echo pid $$ job $KUMI_JOB; exec sleep 30"]);
    let mut child = kumi(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut pids = Vec::new();
    while pids.len() < n {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "kumi ended early");
        pids.extend(pids_in(&line));
    }
    (child, pids, out)
}

// ---- a rank that speaks the control protocol ----

struct Client {
    stream: UnixStream,
    decoder: FrameDecoder,
}

impl Client {
    fn connect(control: &str) -> Client {
        let name = control.strip_prefix('@').expect("abstract address");
        let stream =
            UnixStream::connect_addr(&SocketAddr::from_abstract_name(name).unwrap()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Client {
            stream,
            decoder: FrameDecoder::new(),
        }
    }

    fn send(&mut self, m: &ToLauncher) {
        self.stream.write_all(&encode(m)).unwrap();
    }

    /// The next frame, or None at end of stream.
    fn recv(&mut self) -> Option<ToRank> {
        loop {
            if let Some(m) = self.decoder.next_frame::<ToRank>().unwrap() {
                return Some(m);
            }
            let mut buf = [0u8; 4096];
            let n = self.stream.read(&mut buf).unwrap();
            if n == 0 {
                return None;
            }
            self.decoder.push(&buf[..n]);
        }
    }

    fn nonce(&mut self) -> Vec<u8> {
        match self.recv() {
            Some(ToRank::Challenge { nonce }) => nonce,
            other => panic!("expected a challenge, got {other:?}"),
        }
    }

    /// Connects and authenticates as the rank of this process's environment.
    fn from_env() -> (Client, u32) {
        let var = |k: &str| std::env::var(k).unwrap();
        let rank: u32 = var("KUMI_RANK").parse().unwrap();
        let job = var("KUMI_JOB");
        let secret = from_hex(&var("KUMI_SECRET")).unwrap();
        let mut c = Client::connect(&var("KUMI_CONTROL"));
        let nonce = c.nonce();
        let mac = prove(&secret, &nonce, &job, rank);
        c.send(&ToLauncher::Hello {
            job,
            rank,
            pid: std::process::id(),
            mac,
        });
        assert_eq!(c.recv(), Some(ToRank::Welcome));
        (c, rank)
    }
}

/// Not a test of its own: the body of a rank when this executable is run by kumi.
#[test]
fn rank_helper() {
    let Ok(role) = std::env::var("KUMI_TEST_ROLE") else {
        return;
    };
    let size: u32 = std::env::var("KUMI_SIZE").unwrap().parse().unwrap();
    if role == "segv-in-recv" {
        use std::os::fd::FromRawFd;
        let fd: i32 = std::env::var("KUMI_SHM_FD").unwrap().parse().unwrap();
        let local: usize = std::env::var("KUMI_LOCAL_RANK").unwrap().parse().unwrap();
        // SAFETY: kumi passed this descriptor to us and nothing else owns it.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let seg = kumi_transport::shm::Segment::from_fd(fd, size as usize).unwrap();
        seg.rank_block(local).set_call(kumi_core::call::Call::Recv);
        // SAFETY: restoring the default action and raising a signal have no
        // memory-safety preconditions. (Rust's own SIGSEGV handler would return
        // from a raised, non-fault signal.)
        unsafe {
            libc::signal(libc::SIGSEGV, libc::SIG_DFL);
            libc::raise(libc::SIGSEGV);
        }
    }
    let (mut c, rank) = Client::from_env();
    match role.as_str() {
        "fence" => {
            for generation in 0..3u8 {
                c.send(&ToLauncher::Put {
                    key: format!("card/{rank}/{generation}"),
                    value: vec![rank as u8, generation],
                });
                c.send(&ToLauncher::Fence);
                assert_eq!(c.recv(), Some(ToRank::FenceDone));
                for peer in 0..size {
                    let key = format!("card/{peer}/{generation}");
                    c.send(&ToLauncher::Get { key: key.clone() });
                    assert_eq!(
                        c.recv(),
                        Some(ToRank::Value {
                            key,
                            value: Some(vec![peer as u8, generation])
                        })
                    );
                }
            }
            c.send(&ToLauncher::Get {
                key: "nobody".into(),
            });
            assert_eq!(
                c.recv(),
                Some(ToRank::Value {
                    key: "nobody".into(),
                    value: None
                })
            );
            c.send(&ToLauncher::Finalize);
            println!("fence ok rank {rank}");
        }
        "abort" => {
            println!("pid {}", std::process::id());
            if rank == 1 {
                c.send(&ToLauncher::Abort {
                    code: 7,
                    message: "boom".into(),
                });
            }
            std::thread::sleep(Duration::from_secs(30));
        }
        "no-finalize" => {}
        other => panic!("unknown role {other}"),
    }
}

fn helper_args(n: &str) -> Vec<&str> {
    let exe: &'static str = Box::leak(
        std::env::current_exe()
            .unwrap()
            .into_os_string()
            .into_string()
            .unwrap()
            .into(),
    );
    vec![
        "run",
        "-n",
        n,
        exe,
        "rank_helper",
        "--exact",
        "--nocapture",
        "--quiet",
    ]
}

fn run_helper(role: &str, n: &str) -> Ran {
    let start = Instant::now();
    let child = kumi(&helper_args(n))
        .env("KUMI_TEST_ROLE", role)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Ran {
        took: start.elapsed(),
        ..wait_output(child, Duration::from_secs(60))
    }
}

// ---- the tests ----

#[test]
fn every_rank_gets_its_environment() {
    let r = run(
        &["run", "-n", "4", "sh", "-c", "echo $KUMI_RANK $KUMI_SIZE $KUMI_LOCAL_RANK $KUMI_LOCAL_SIZE $KUMI_NODE $KUMI_JOB ${#KUMI_SECRET} $KUMI_CONTROL $KUMI_SHM_FD"],
        b"",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let _ = &r.took;
    let mut rows: Vec<Vec<&str>> = r.stdout.lines().map(|l| l.split(' ').collect()).collect();
    rows.sort();
    assert_eq!(rows.len(), 4, "{}", r.stdout);
    let job = rows[0][5];
    assert!(
        job.starts_with('j') && job.len() == 11 && job[1..].chars().all(|c| c.is_ascii_hexdigit()),
        "{job}"
    );
    for (i, row) in rows.iter().enumerate() {
        let i = i.to_string();
        assert_eq!(row[..6], [&i, "4", &i, "4", "0", job]);
        assert_eq!(row[6], "64", "secret is 32 bytes in hex");
        assert!(
            row[7].starts_with("@kumi-") && row[7].ends_with(job),
            "{}",
            row[7]
        );
        assert!(row[8].parse::<u32>().unwrap() > 2);
    }
    nothing_left(job);
}

#[test]
fn user_environment_passes_through() {
    let out = kumi(&["run", "-n", "2", "sh", "-c", "echo $USER_VARIABLE"])
        .env("USER_VARIABLE", "yes")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "yes\nyes\n");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A misspelt knob is reported once for the job (not once per rank), with
/// the name it was probably meant to be, and the job runs.
#[test]
fn an_unknown_kumi_variable_is_reported_once() {
    let out = kumi(&["run", "-n", "3", "true"])
        .env("KUMI_SPIN_MS", "5")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("KUMI_SPIN_MS").count(), 1, "{err}");
    assert!(err.contains("did you mean KUMI_SPIN_US?"), "{err}");
}

/// A value out of range stops `kumi run` before any rank starts, with one
/// line naming the variable.
#[test]
fn a_bad_value_stops_the_job_before_it_starts() {
    let out = kumi(&["run", "-n", "3", "sh", "-c", "echo started"])
        .env("KUMI_SHM_RING_BYTES", "5000")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "a rank started");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("KUMI_SHM_RING_BYTES=5000 is not a power of two"),
        "{err}"
    );
}

#[test]
fn tagged_output_of_four_busy_ranks_keeps_lines_whole() {
    // `yes` writes in large blocks that cut lines anywhere: the launcher must
    // reassemble them.
    let script =
        "yes \"$KUMI_RANK-$(printf '%0300d' 0)\" | head -n 20000; printf \"last-$KUMI_RANK\"";
    let r = run(&["run", "-n", "4", "--tag-output", "sh", "-c", script], b"");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mut counts = [0usize; 4];
    for line in r.stdout.lines() {
        let (tag, body) = line.split_once(' ').unwrap();
        let rank: usize = tag
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .unwrap();
        if body == format!("last-{rank}") {
            continue;
        }
        assert_eq!(
            body,
            format!("{rank}-{:0300}", 0),
            "mixed or cut line: {line:.80}"
        );
        counts[rank] += 1;
    }
    assert_eq!(counts, [20000; 4]);
    for rank in 0..4 {
        assert!(
            r.stdout.contains(&format!("[{rank}] last-{rank}\n")),
            "unterminated last line is flushed"
        );
    }
}

#[test]
fn untagged_stderr_is_forwarded() {
    let r = run(
        &["run", "-n", "2", "sh", "-c", "echo err $KUMI_RANK >&2"],
        b"",
    );
    assert_eq!(r.code, 0);
    let mut lines: Vec<&str> = r.stderr.lines().collect();
    lines.sort();
    assert_eq!(lines, ["err 0", "err 1"]);
}

#[test]
fn stdin_reaches_rank_0_only() {
    let r = run(
        &[
            "run",
            "-n",
            "3",
            "sh",
            "-c",
            "while read x; do echo \"$KUMI_RANK got $x\"; done; echo \"$KUMI_RANK eof\"",
        ],
        b"hello\nworld\n",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mut lines: Vec<&str> = r.stdout.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        ["0 eof", "0 got hello", "0 got world", "1 eof", "2 eof"]
    );
}

#[test]
fn failing_rank_sets_exit_code_and_stops_the_others_within_a_second() {
    let script = "echo pid $$; if [ $KUMI_RANK = 1 ]; then sleep 0.5; exit 3; fi; exec sleep 30";
    let r = run(&["run", "-n", "4", "sh", "-c", script], b"");
    assert_eq!(r.code, 3, "{}", r.stderr);
    let pids = pids_in(&r.stdout);
    assert_eq!(pids.len(), 4);
    assert!(
        r.stderr.contains("kumi run: rank 1 (pid ")
            && r.stderr
                .contains("exited with code 3; stopping 3 other ranks"),
        "{}",
        r.stderr
    );
    assert_eq!(
        r.stderr
            .lines()
            .filter(|l| l.starts_with("kumi run:"))
            .count(),
        1,
        "one line: {}",
        r.stderr
    );
    assert!(r.took < Duration::from_millis(2500), "took {:?}", r.took);
    for p in pids {
        assert!(!alive(p), "rank pid {p} survived");
    }
}

#[test]
fn segfaulting_rank_exits_139_naming_the_signal() {
    let script = "echo pid $$; if [ $KUMI_RANK = 0 ]; then kill -SEGV $$; fi; exec sleep 30";
    let r = run(&["run", "-n", "2", "sh", "-c", script], b"");
    assert_eq!(r.code, 139, "{}", r.stderr);
    assert!(
        r.stderr.contains("rank 0 (pid")
            && r.stderr
                .contains("killed by signal SIGSEGV (segmentation fault)"),
        "{}",
        r.stderr
    );
    for p in pids_in(&r.stdout) {
        assert!(!alive(p));
    }
}

fn signal_launcher(sig: i32, expect_code: i32, name: &str) {
    let (child, pids, _out) = start_waiting_job(3, &[]);
    // SAFETY: kill with a pid of our own child and a valid signal number.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
    let start = Instant::now();
    let r = wait_output_rest(child);
    assert_eq!(r.code, expect_code, "{}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("kumi run: interrupted by {name}; stopped 3 ranks")),
        "{}",
        r.stderr
    );
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "took {:?}",
        start.elapsed()
    );
    for p in pids {
        assert!(!alive(p), "rank pid {p} survived");
    }
}

fn wait_output_rest(mut child: Child) -> Ran {
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    Ran {
        code: status.code().unwrap_or(-1),
        stdout: String::new(),
        stderr: err,
        took: Duration::ZERO,
    }
}

#[test]
fn sigterm_to_launcher_stops_ranks_exit_143() {
    signal_launcher(libc::SIGTERM, 143, "SIGTERM");
}

#[test]
fn sigint_to_launcher_stops_ranks_exit_130() {
    signal_launcher(libc::SIGINT, 130, "SIGINT");
}

#[test]
fn sigkill_of_launcher_takes_every_rank_within_a_second() {
    let (mut child, pids, _out) = start_waiting_job(4, &[]);
    child.kill().unwrap();
    child.wait().unwrap();
    wait_gone(&pids, Duration::from_secs(1));
}

#[test]
fn wrong_secret_is_refused_and_the_job_goes_on() {
    let mut child = kumi(&[
        "run",
        "-n",
        "1",
        "sh",
        "-c",
        "echo $KUMI_CONTROL $KUMI_JOB; read x; echo done",
    ])
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let (control, job) = line.trim().split_once(' ').unwrap();

    let mut c = Client::connect(control);
    let _nonce = c.nonce();
    c.send(&ToLauncher::Hello {
        job: job.into(),
        rank: 0,
        pid: 1,
        mac: vec![0; 32],
    });
    match c.recv() {
        Some(ToRank::Refused { reason }) => assert!(reason.contains("bad proof"), "{reason}"),
        other => panic!("expected Refused, got {other:?}"),
    }
    assert_eq!(c.recv(), None, "closed after refusal");

    // A peer that announces a huge frame is refused before anything is allocated.
    let mut c = Client::connect(control);
    let _ = c.nonce();
    c.stream.write_all(&u32::MAX.to_le_bytes()).unwrap();
    assert!(matches!(c.recv(), Some(ToRank::Refused { .. })));

    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let r = wait_output_rest(child);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(rest, "done\n");
    let refusals: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(refusals.len(), 2, "{}", r.stderr);
    assert!(
        refusals[0].starts_with("kumi run: refused a control connection: bad proof"),
        "{}",
        refusals[0]
    );
    nothing_left(job);
}

#[test]
fn fence_across_three_authenticated_ranks_completes() {
    let r = run_helper("fence", "3");
    assert_eq!(r.code, 0, "stdout: {}\nstderr: {}", r.stdout, r.stderr);
    for rank in 0..3 {
        assert!(
            r.stdout.contains(&format!("fence ok rank {rank}")),
            "{}",
            r.stdout
        );
    }
}

#[test]
fn abort_with_code_7_exits_7_naming_the_rank() {
    let r = run_helper("abort", "3");
    assert_eq!(r.code, 7, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("kumi run: rank 1 called abort with code 7: boom; stopping 2 other ranks"),
        "{}",
        r.stderr
    );
    assert!(r.took < Duration::from_secs(5), "took {:?}", r.took);
    for p in pids_in(&r.stdout) {
        assert!(!alive(p));
    }
}

#[test]
fn connected_rank_exiting_without_finalize_fails_the_job() {
    let r = run_helper("no-finalize", "2");
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("exited without finalizing kumi"),
        "{}",
        r.stderr
    );
}

#[test]
fn death_report_names_the_kumi_call_from_the_segment() {
    let r = run_helper("segv-in-recv", "1");
    assert_eq!(r.code, 139, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("was killed by signal SIGSEGV (segmentation fault) in kumi::recv"),
        "{}",
        r.stderr
    );
}

#[test]
fn missing_program_exits_127_naming_it() {
    let r = run(&["run", "-n", "2", "./no-such-program-here"], b"");
    assert_eq!(r.code, 127);
    assert!(
        r.stderr.contains(
            "kumi run: cannot start \"./no-such-program-here\": No such file or directory"
        ),
        "{}",
        r.stderr
    );
}

#[test]
fn non_executable_program_exits_126() {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::temp_dir().join(format!("kumi-test-noexec-{}", std::process::id()));
    std::fs::write(&path, "echo should not run\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let p = path.to_str().unwrap();
    let r = run(&["run", "-n", "2", p], b"");
    std::fs::remove_file(&path).unwrap();
    assert_eq!(r.code, 126, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "kumi run: cannot start \"{p}\": Permission denied"
        )),
        "{}",
        r.stderr
    );
}

#[test]
fn bad_rank_counts_are_usage_errors() {
    for n in ["0", "-3", "many", "1048577"] {
        let r = run(&["run", "-n", n, "true"], b"");
        assert_eq!(r.code, 2, "-n {n}: {}", r.stderr);
        assert!(r.stderr.contains("error"), "{}", r.stderr);
    }
}

#[test]
fn more_ranks_than_one_host_takes_fail_naming_the_limit_and_starting_nothing() {
    let r = run(&["run", "-n", "4097", "true"], b"");
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("4097 ranks on one host: kumi runs at most 4096 ranks per host"),
        "{}",
        r.stderr
    );
}

#[test]
fn program_options_reach_the_program() {
    let r = run(
        &[
            "run",
            "-n",
            "1",
            "sh",
            "-c",
            "echo \"$@\"",
            "sh",
            "--flag",
            "-n",
            "9",
        ],
        b"",
    );
    assert_eq!(r.stdout, "--flag -n 9\n");
    let r = run(&["run", "-n", "1", "--", "echo", "--x"], b"");
    assert_eq!(r.stdout, "--x\n");
}

#[test]
fn help_explains_the_commands() {
    let top = run(&["--help"], b"");
    assert!(
        top.stdout.contains("EXAMPLES")
            && top.stdout.contains("run")
            && top.stdout.contains("clean")
    );
    let r = run(&["run", "--help"], b"");
    for needle in [
        "--tag-output",
        "KUMI_RANK",
        "KUMI_SHM_FD",
        "EXIT STATUS",
        "kumi run -n 4 ./my_prog arg",
    ] {
        assert!(r.stdout.contains(needle), "missing {needle}");
    }
    assert!(run(&["clean", "--help"], b"").stdout.contains("--dry-run"));
}
