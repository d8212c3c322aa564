//! Checkpoint and restart: a Jacobi solver in C (`jacobi_ckpt.c`, built with
//! `kumi cc`, state registered through `kumi.h`), in Fortran
//! (`jacobi_ckpt.f90`, `kumi fc`, the `kumi` module) and in Rust
//! (`ckpt_jacobi`, through `kumi::checkpoint`), run by the real `kumi run
//! --checkpoint-dir --max-restarts`, its ranks SIGKILLed from outside at
//! seeded random moments (computing, communicating, writing a checkpoint):
//! every run must end with exactly the result of an uninterrupted run.
//! Damaged and foreign checkpoints are refused or passed over with a
//! sentence naming the file; a lost namespace host is left out of the
//! restarted job.

use kumi_tests::netns::{self, cluster};
use kumi_tests::programs::{compile_all, lib_dir};
use kumi_tests::{alive, bin, Rng};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// `jacobi_ckpt.c` built with `kumi cc`.
fn c_solver() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let out = lib_dir().join("ckpt-tests/bin");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kumi-mpi/tests/c");
        let cc = [bin("kumi").display().to_string(), "cc".into()];
        compile_all(&cc, &["-O2", "-Wall"], &src, &["jacobi_ckpt.c"], &out);
        out.join("jacobi_ckpt")
    })
}

/// `jacobi_ckpt.f90` built with `kumi fc` (the `kumi` module).
fn fortran_solver() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let out = lib_dir().join("ckpt-tests/fortran");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("fortran");
        let fc = [bin("kumi").display().to_string(), "fc".into()];
        compile_all(&fc, &["-O2"], &src, &["jacobi_ckpt.f90"], &out);
        out.join("jacobi_ckpt")
    })
}

fn rust_solver() -> PathBuf {
    bin("ckpt_jacobi")
}

/// A fresh, empty directory for one test.
fn scratch(name: &str) -> PathBuf {
    let d = lib_dir().join("ckpt-tests").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The solver's result lines.
fn results(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|l| l.starts_with("result "))
        .collect()
}

fn kumi(n: usize, opts: &[&str], prog: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(bin("kumi"));
    c.arg("run")
        .arg("-n")
        .arg(n.to_string())
        .args(opts)
        .arg(prog)
        .args(args)
        .stdin(Stdio::null());
    c
}

/// The result of an uninterrupted run without checkpoints.
fn reference(n: usize, prog: &Path, args: &[&str]) -> String {
    let o = kumi(n, &[], prog, args).output().expect("kumi run");
    let (out, err) = text(&o);
    assert!(o.status.success(), "reference run failed:\n{err}");
    let r = results(&out);
    assert_eq!(r.len(), 1, "{out}");
    r[0].to_string()
}

fn wait(child: Child, limit: Duration) -> Output {
    let pid = child.id() as i32;
    let t = std::thread::spawn(move || child.wait_with_output());
    let start = Instant::now();
    while !t.is_finished() {
        if start.elapsed() > limit {
            // SAFETY: kill takes a pid and a signal number, no pointers.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("kumi run did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    t.join().expect("waiter").expect("wait for kumi run")
}

/// `kumi run -n 3 --checkpoint-dir DIR/ckpt OPTS PROG ARGS` started in a
/// fresh directory `name`, its ranks writing their pids to DIR/pids: the
/// child and the two directories.
fn start_solver(
    name: &str,
    prog: &Path,
    args: &[&str],
    opts: &[&str],
) -> (Child, PathBuf, PathBuf) {
    let dir = scratch(name);
    let pids = dir.join("pids");
    std::fs::create_dir_all(&pids).unwrap();
    let ck = dir.join("ckpt");
    let mut all = vec!["--checkpoint-dir", ck.to_str().unwrap()];
    all.extend_from_slice(opts);
    let child = kumi(3, &all, prog, args)
        .env("JACOBI_PIDS", &pids)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kumi run");
    (child, pids, ck)
}

fn pid_of(pids: &Path, rank: u64) -> Option<i32> {
    std::fs::read_to_string(pids.join(format!("pid-{rank}")))
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn sigkill(pid: i32) -> bool {
    // SAFETY: kill takes a pid and a signal number, no pointers.
    alive(pid) && unsafe { libc::kill(pid, libc::SIGKILL) } == 0
}

/// Seeded trials of `prog`: one to three ranks killed at random moments; each
/// run restarts as often as it takes and ends with the reference result.
fn seeded_kills(prog: &Path, name: &str, seeds: std::ops::Range<u64>) {
    // 1.6 MB of state per rank, a checkpoint every 10 of 300 sweeps of ~1 ms.
    let args = ["200000", "300", "10", "1000"];
    // The kills fall within the uninterrupted run's own time, whatever this
    // machine's speed (fixed delays of 100-500 ms missed a run that ended
    // sooner on a faster machine).
    let started = Instant::now();
    let want = reference(3, prog, &args);
    let run_ms = (started.elapsed().as_millis() as u64).max(100);
    let (mut trials, mut all_landed, mut all_restarts) = (0, 0, 0);
    for seed in seeds {
        trials += 1;
        let (child, pids, _) = start_solver(
            &format!("{name}-{seed}"),
            prog,
            &args,
            &["--max-restarts", "5"],
        );
        let mut rng = Rng(seed);
        let mut landed = 0;
        let mut seen = Vec::new();
        for _ in 0..1 + rng.below(3) {
            // 15-45 % of the run's time each: the first kill lands well
            // before the end, and a restarted run starts its time again.
            std::thread::sleep(Duration::from_millis(run_ms * (15 + rng.below(30)) / 100));
            if let Some(pid) = pid_of(&pids, rng.below(3)) {
                seen.push(pid);
                landed += usize::from(sigkill(pid));
            }
        }
        let o = wait(child, Duration::from_secs(120));
        let (out, err) = text(&o);
        assert!(o.status.success(), "seed {seed}: {:?}\n{err}", o.status);
        let r = results(&out);
        assert!(
            !r.is_empty() && r.iter().all(|l| *l == want),
            "seed {seed}: results {r:?}, uninterrupted {want}\n{err}"
        );
        let restarts = err.matches("kumi run: restart ").count();
        assert!(
            restarts >= landed.min(1) && restarts <= landed,
            "seed {seed}: {landed} kills landed, {restarts} restarts\n{err}"
        );
        for p in seen {
            assert!(!alive(p), "seed {seed}: rank process {p} is still there");
        }
        all_landed += landed;
        all_restarts += restarts;
    }
    eprintln!("{name}: {trials} trials, {all_landed} kills landed, {all_restarts} restarts");
    assert!(
        all_restarts >= trials,
        "too few kills landed to show anything: {all_restarts} restarts in {trials} trials"
    );
}

#[test]
fn seeded_kills_of_the_c_solver_end_with_the_uninterrupted_result() {
    seeded_kills(c_solver(), "c", 1..7);
}

#[test]
fn seeded_kills_of_the_fortran_solver_end_with_the_uninterrupted_result() {
    seeded_kills(fortran_solver(), "fortran", 201..204);
}

#[test]
fn seeded_kills_of_the_rust_solver_end_with_the_uninterrupted_result() {
    seeded_kills(&rust_solver(), "rust", 101..107);
}

/// A rank killed while it writes its part of checkpoint k (its `.tmp` file
/// is still there after it died, so it never voted): k never became
/// complete, and the job resumes from k - 1.
#[test]
fn a_kill_while_checkpoint_k_is_written_resumes_from_k_minus_1() {
    // 8 MB per rank: writing and flushing a part takes a while.
    let args = ["1000000", "60", "4"];
    let want = reference(3, c_solver(), &args);
    for attempt in 0..5 {
        let (child, pids, ck) = start_solver(
            &format!("during-write-{attempt}"),
            c_solver(),
            &args,
            &["--max-restarts", "1", "--checkpoint-keep", "3"],
        );
        // Watch for rank 1's part of an epoch >= 2 being written.
        let start = Instant::now();
        let mut killed_in = None;
        while killed_in.is_none() && start.elapsed() < Duration::from_secs(30) {
            for k in 2..20u64 {
                let tmp = ck.join(format!("ckpt-{k}/rank-1.tmp"));
                if tmp.exists() {
                    if let Some(pid) = pid_of(&pids, 1) {
                        if sigkill(pid) {
                            // Dead now: if the file is still there, the rank
                            // died before it renamed it and voted.
                            while alive(pid) {
                                std::thread::sleep(Duration::from_millis(1));
                            }
                            killed_in = Some((k, tmp.exists()));
                        }
                    }
                    break;
                }
            }
            std::thread::sleep(Duration::from_micros(300));
        }
        let o = wait(child, Duration::from_secs(120));
        let (out, err) = text(&o);
        let Some((k, before_rename)) = killed_in else {
            panic!("never saw a part being written\n{err}");
        };
        assert!(o.status.success(), "{:?}\n{err}", o.status);
        assert_eq!(results(&out).last().copied(), Some(want.as_str()), "{err}");
        if !before_rename {
            eprintln!("attempt {attempt}: rank 1 renamed its part before the kill landed; again");
            continue;
        }
        assert!(
            err.contains(&format!("from checkpoint {} in", k - 1)),
            "killed while writing checkpoint {k}; expected to resume from {}:\n{err}",
            k - 1
        );
        assert!(
            err.contains(&format!("jacobi: restored checkpoint {} ", k - 1)),
            "{err}"
        );
        return;
    }
    panic!("in 5 attempts the kill never landed before the rename");
}

/// A completed run's checkpoints (epochs 8, 9, 10 of 10), for the damage
/// tests to copy.
fn finished_checkpoints() -> &'static (PathBuf, String) {
    static D: OnceLock<(PathBuf, String)> = OnceLock::new();
    D.get_or_init(|| {
        let args = ["20000", "110", "10"];
        let want = reference(3, c_solver(), &args);
        let dir = scratch("finished");
        let ck = dir.join("ckpt");
        let o = kumi(
            3,
            &[
                "--checkpoint-dir",
                ck.to_str().unwrap(),
                "--checkpoint-keep",
                "3",
            ],
            c_solver(),
            &args,
        )
        .output()
        .expect("kumi run");
        assert!(o.status.success(), "{}", text(&o).1);
        let mut epochs: Vec<String> = std::fs::read_dir(&ck)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        epochs.sort();
        assert_eq!(
            epochs,
            ["ckpt-10", "ckpt-8", "ckpt-9"],
            "the last 3 are kept"
        );
        (ck, want)
    })
}

/// A copy of the finished checkpoints, damaged by `damage`, resumed with
/// `-n n` (and `prog`); the output.
fn resume_damaged(name: &str, n: usize, prog: &Path, damage: impl FnOnce(&Path)) -> Output {
    let (ck, _) = finished_checkpoints();
    let copy = scratch(name).join("ckpt");
    let ok = Command::new("cp")
        .arg("-r")
        .arg(ck)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(ok.success());
    damage(&copy);
    kumi(
        n,
        &["--restart", copy.to_str().unwrap()],
        prog,
        &["20000", "110", "10"],
    )
    .output()
    .expect("kumi run")
}

fn assert_resumed_from_9(o: &Output, why: &str) {
    let (out, err) = text(o);
    assert!(o.status.success(), "{:?}\n{err}", o.status);
    assert!(err.contains(why), "no {why:?} in:\n{err}");
    assert!(err.contains("restored checkpoint 9 at step 90"), "{err}");
    assert_eq!(results(&out), [finished_checkpoints().1.as_str()], "{err}");
}

#[test]
fn a_corrupted_part_is_found_by_its_checksum_and_the_previous_checkpoint_used() {
    let o = resume_damaged("corrupt", 3, c_solver(), |d| {
        let p = d.join("ckpt-10/rank-1");
        let mut b = std::fs::read(&p).unwrap();
        let mid = b.len() / 2;
        b[mid] ^= 0x10;
        std::fs::write(&p, b).unwrap();
    });
    assert_resumed_from_9(&o, "ckpt-10/rank-1: checksum mismatch");
}

#[test]
fn a_missing_or_truncated_part_or_a_torn_manifest_is_passed_over() {
    let o = resume_damaged("missing", 3, c_solver(), |d| {
        std::fs::remove_file(d.join("ckpt-10/rank-2")).unwrap();
    });
    assert_resumed_from_9(&o, "ckpt-10/rank-2: No such file");
    let o = resume_damaged("truncated", 3, c_solver(), |d| {
        let p = d.join("ckpt-10/rank-0");
        let len = std::fs::metadata(&p).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(len - 1)
            .unwrap();
    });
    assert_resumed_from_9(&o, "bytes where the manifest says");
    let o = resume_damaged("torn", 3, c_solver(), |d| {
        let p = d.join("ckpt-10/MANIFEST");
        let b = std::fs::read(&p).unwrap();
        std::fs::write(&p, &b[..b.len() / 2]).unwrap();
    });
    assert_resumed_from_9(&o, "ckpt-10/MANIFEST: incomplete");
}

#[test]
fn a_checkpoint_of_another_job_size_or_program_is_refused_with_a_reason() {
    let o = resume_damaged("size", 2, c_solver(), |_| {});
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cannot resume checkpoint 10")
            && err.contains("a job of 3 ranks; this job has 2"),
        "{err}"
    );
    let other = scratch("other-program").join("solver");
    std::fs::copy(c_solver(), &other).unwrap();
    let o = resume_damaged("program", 3, &other, |_| {});
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("taken by another program"), "{err}");
}

#[test]
fn when_no_checkpoint_verifies_the_job_fails_saying_so() {
    let o = resume_damaged("none-verifies", 3, c_solver(), |d| {
        for k in 8..=10 {
            let p = d.join(format!("ckpt-{k}/rank-0"));
            let mut b = std::fs::read(&p).unwrap();
            let last = b.len() - 1;
            b[last] ^= 1;
            std::fs::write(&p, b).unwrap();
        }
    });
    let (out, err) = text(&o);
    assert!(!o.status.success(), "{out}\n{err}");
    assert!(results(&out).is_empty(), "{out}");
    assert!(
        err.contains("no checkpoint in") && err.contains("verifies on every rank"),
        "{err}"
    );
}

/// Three namespace hosts; the job runs on the first two. Its second host is
/// lost whole (agent and ranks killed): the job restarts from its newest
/// checkpoint on the first and third, and ends with the uninterrupted result.
#[test]
fn losing_a_host_restarts_the_job_on_the_hosts_that_remain() {
    if netns::skip_unless_root("losing_a_host_restarts_the_job_on_the_hosts_that_remain") {
        return;
    }
    let args = ["100000", "400", "10", "3000"];
    let want = reference(4, &rust_solver(), &args);
    let c = cluster(3);
    let ck = scratch("hosts").join("ckpt");
    let prog = rust_solver();
    let child = c
        .kumi_command(
            4,
            &[(0, 2), (1, 2), (2, 2)],
            &[
                "--checkpoint-dir",
                ck.to_str().unwrap(),
                "--max-restarts",
                "2",
            ],
            &[prog.to_str().unwrap(), args[0], args[1], args[2], args[3]],
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kumi run");
    // Once a checkpoint is complete, host 1 goes: every process in it.
    let start = Instant::now();
    while !ck.join("ckpt-3/MANIFEST").exists() {
        assert!(start.elapsed() < Duration::from_secs(60), "no checkpoint 3");
        std::thread::sleep(Duration::from_millis(10));
    }
    let victims = c.pids(1);
    assert!(
        victims.len() >= 3,
        "agent and 2 ranks on host 1: {victims:?}"
    );
    for p in &victims {
        sigkill(*p);
    }
    let o = wait(child, Duration::from_secs(120));
    let (out, err) = text(&o);
    assert!(o.status.success(), "{:?}\n{err}", o.status);
    assert!(
        err.contains(&format!("without host {}", c.hosts[1])),
        "the restart does not say it leaves host {} out:\n{err}",
        c.hosts[1]
    );
    assert_eq!(results(&out), [want.as_str()], "{err}");
    assert!(
        c.pids(1).is_empty(),
        "processes in the lost host: {:?}",
        c.pids(1)
    );
    netns::assert_clean(&c);
}

/// A program that asks whether a checkpoint is due (EVERY = 0) gets one per
/// `--checkpoint-every` interval, by rank 0's clock, on every rank at once.
#[test]
fn the_interval_decides_when_a_checkpoint_is_due() {
    // Returns the checkpoints taken and the run's wall time, which bounds how
    // many intervals can have passed: a slow machine stretches the sweeps.
    let epochs = |every: &str| {
        let ck = scratch(&format!("due-{every}")).join("ckpt");
        let start = std::time::Instant::now();
        let o = kumi(
            3,
            &[
                "--checkpoint-dir",
                ck.to_str().unwrap(),
                "--checkpoint-every",
                every,
                "--checkpoint-keep",
                "100",
            ],
            c_solver(),
            // About 0.6 s of sweeps.
            &["1000", "300", "0", "2000"],
        )
        .output()
        .expect("kumi run");
        let wall = start.elapsed().as_secs_f64();
        assert!(o.status.success(), "{}", text(&o).1);
        (std::fs::read_dir(&ck).map_or(0, |d| d.count()), wall)
    };
    let (many, wall) = epochs("0.1");
    // At least 0.6 s of sweeps pass, so at least 5 intervals; never more
    // than the whole run's wall time holds.
    let most = (wall / 0.1) as usize + 1;
    assert!(
        (3..=most).contains(&many),
        "{many} checkpoints in a {wall:.2} s run at one per 0.1 s"
    );
    assert_eq!(
        epochs("1000").0,
        0,
        "a checkpoint before the interval passed"
    );
}
