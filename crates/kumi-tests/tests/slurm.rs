//! kumi under a real Slurm (`kumi_tests::slurm`: slurmctld and one slurmd
//! per test host, each host a network namespace of this machine): `srun
//! --mpi=pmi2` starting C, Fortran and Rust programs linked to kumi across
//! nodes, and the job ending cleanly, with one line naming the rank, when a
//! rank aborts, crashes or exits without finalizing.
//!
//! Needs root (the loud SKIPPED otherwise) and Debian's `slurm-wlm` and
//! `munge` (`test.sh` installs them; as root their absence fails).

use kumi_tests::programs::{compile_all, lib_dir, outputs};
use kumi_tests::slurm::{self, Slurm};
use kumi_tests::{bin, text};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The C programs of these tests, built with `kumi cc` once per test
/// binary (the tests run in parallel: a second build would rewrite a
/// program another test is starting).
fn c_built() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let files = [
            "jobinfo.c",
            "p2p.c",
            "coll.c",
            "abort.c",
            "crash.c",
            "ticks.c",
            "deadlock.c",
        ];
        build(
            "cc",
            "../kumi-mpi/tests/c",
            &["-O1", "-g", "-pthread"],
            &files,
        )
    })
    .clone()
}

fn fortran_built() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| build("fc", "fortran", &["-O1"], &["p2p.f"]))
        .clone()
}

/// `files` of `dir` (from this crate) built with `kumi <wrapper>` into
/// `slurm-tests/<wrapper>`.
fn build(wrapper: &str, dir: &str, flags: &[&str], files: &[&str]) -> PathBuf {
    let out = lib_dir().join("slurm-tests").join(wrapper);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    compile_all(
        &[bin("kumi").display().to_string(), wrapper.into()],
        flags,
        &src,
        files,
        &out,
    );
    out
}

fn ok(o: &Output, what: &str) -> String {
    let (out, err) = outputs(o);
    assert!(
        o.status.success(),
        "{what} failed ({}):\n{out}\n{err}",
        o.status
    );
    out
}

/// Programs of four languages (C, Fortran, Rust, Python with mpi4py), started by `srun --mpi=pmi2` across three
/// nodes with ranks unevenly spread (2, 2, 1) and cyclically: every rank
/// learns the same job of five, its peers on its node through shared
/// memory and the others through the network, and the programs' own checks
/// pass; through both of Slurm's MPI plugins (PMI-2 and PMIx).
#[test]
fn srun_starts_c_fortran_and_rust_programs_across_nodes() {
    if slurm::skip_unless_root("srun_starts_c_fortran_and_rust_programs_across_nodes") {
        return;
    }
    let (c, f) = (c_built(), fortran_built());
    let s = Slurm::start(3, 2);
    for mpi in ["--mpi=pmi2", "--mpi=pmix"] {
        let jobinfo = c.join("jobinfo");
        let o = s.srun(&["-N", "3", "-n", "5", mpi, jobinfo.to_str().unwrap()]);
        let out = ok(&o, &format!("jobinfo {mpi}"));
        for r in 0..5 {
            let line = format!("rank={r} size=5 app=0 ");
            assert!(
                out.lines()
                    .any(|l| l.starts_with(&line) && l.ends_with(" sum=10")),
                "{mpi}: rank {r} missing or wrong:\n{out}"
            );
        }
        let rust_p2p = format!(
            "p2p: all {} checks passed on 5 ranks",
            kumi_tests::P2P_CHECKS
        );
        for (dist, prog, says) in [
            ("block", c.join("p2p"), "PASS p2p"),
            ("cyclic", c.join("coll"), "PASS coll"),
            ("block", f.join("p2p"), "p2p ok"),
            ("cyclic", bin("p2p"), rust_p2p.as_str()),
        ] {
            let o = s.srun(&[
                "-N",
                "3",
                "-n",
                "5",
                "-m",
                dist,
                mpi,
                prog.to_str().unwrap(),
            ]);
            let out = ok(&o, &format!("{} ({dist}, {mpi})", prog.display()));
            assert!(out.contains(says), "{} {mpi}: {}", prog.display(), text(&o));
        }
        // mpi4py's PyPI wheel (MPICH ABI) on kumi's library.
        let py = lib_dir().join("../py/bin/python");
        assert!(
            py.exists(),
            "{} is missing (test.sh makes it)",
            py.display()
        );
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../kumi-mpi/tests/py/mpi4py_check.py");
        let o = s
            .on(0, "srun")
            .args(["-N", "3", "-n", "5", mpi])
            .arg(&py)
            .arg(&script)
            .env("MPI4PY_MPIABI", "mpich")
            .env("LD_LIBRARY_PATH", lib_dir())
            .output()
            .expect("srun python");
        let out = ok(&o, &format!("mpi4py {mpi}"));
        assert!(out.contains("PASS mpi4py"), "mpi4py {mpi}: {}", text(&o));
    }
}

/// A rank that calls MPI_Abort, dies of a signal, exits without finalizing
/// or is killed with SIGKILL ends the whole step at once (srun alone would
/// let the other ranks wait forever), with one line naming the rank and the
/// cause (for SIGKILL, which no handler sees, the supervisor's).
#[test]
fn a_failing_rank_ends_the_srun_job_with_one_line_naming_it() {
    if slurm::skip_unless_root("a_failing_rank_ends_the_srun_job_with_one_line_naming_it") {
        return;
    }
    let c = c_built();
    let s = Slurm::start(2, 2);
    // (A fatal signal under PMIx is not turned into an abort: its client
    // library cannot be called from a signal handler; see the README.)
    for (mpi, prog, arg, says) in [
        (
            "--mpi=pmi2",
            "abort",
            "",
            "kumi: rank 2 called abort with code 7",
        ),
        (
            "--mpi=pmi2",
            "crash",
            "segv",
            "kumi: rank 1 was killed by signal SIGSEGV; ending the job",
        ),
        (
            "--mpi=pmi2",
            "crash",
            "exit",
            "kumi: rank 1 exited without finalizing kumi; ending the job",
        ),
        (
            "--mpi=pmi2",
            "crash",
            "kill",
            "kumi: rank 1 ended without finalizing kumi",
        ),
        (
            "--mpi=pmix",
            "abort",
            "",
            "kumi: rank 2 called abort with code 7",
        ),
        // (Slurm's PMIx plugin ends the step itself when a task is killed,
        // often before the supervisor's grace is over.)
        (
            "--mpi=pmix",
            "crash",
            "kill",
            "srun: error: n0: task 1: Killed",
        ),
        (
            "--mpi=pmix",
            "crash",
            "exit",
            "kumi: rank 1 exited without finalizing kumi; ending the job",
        ),
    ] {
        let t0 = Instant::now();
        let p = c.join(prog);
        let mut args = vec!["-N", "2", "-n", "3", mpi, p.to_str().unwrap()];
        if !arg.is_empty() {
            args.push(arg);
        }
        let o = s.srun(&args);
        let (out, err) = outputs(&o);
        assert!(!o.status.success(), "{prog} {arg}: {out}{err}");
        assert_eq!(err.matches(says).count(), 1, "{prog} {arg}: {err}");
        // The supervisor reports a loss only when nobody else said why.
        assert!(
            arg == "kill" || !err.contains("ended without finalizing"),
            "{prog} {arg}: {err}"
        );
        assert!(
            !out.contains("passed the barrier"),
            "{prog} {arg}: a rank went on: {out}"
        );
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "{prog} {arg} took {:?}",
            t0.elapsed()
        );
        no_supervisor_left();
    }
}

/// Under `srun` (both plugins) rank 0's supervisor stands in for `kumi
/// run`: a deadlock across two nodes is reported with each rank's call and
/// source line and ends the step with exit code 86; `KUMI_SUPERVISE=--stats`
/// prints the statistics table; `KUMI_SUPERVISOR=off` has none, and the
/// job still runs.
#[test]
fn srun_jobs_get_deadlock_detection_and_statistics() {
    if slurm::skip_unless_root("srun_jobs_get_deadlock_detection_and_statistics") {
        return;
    }
    let c = c_built();
    let s = Slurm::start(2, 2);
    let (deadlock, p2p) = (c.join("deadlock"), c.join("p2p"));
    for mpi in ["--mpi=pmi2", "--mpi=pmix"] {
        let t0 = Instant::now();
        let o = s.srun(&[
            "-N",
            "2",
            "-n",
            "3",
            mpi,
            deadlock.to_str().unwrap(),
            "recv2",
        ]);
        let (out, err) = outputs(&o);
        assert_eq!(o.status.code(), Some(86), "{mpi}: {out}\n{err}");
        for e in [
            "rank 0 waits in MPI_Recv on MPI_COMM_WORLD from rank 1, tag 7 (at ",
            "rank 1 waits in MPI_Recv on MPI_COMM_WORLD from rank 0, tag 7 (at ",
            "deadlock.c:38 in main)",
            "ending every rank (exit code 86)",
        ] {
            assert!(err.contains(e), "{mpi}: no {e:?} in\n{err}");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "{mpi}: took {:?}",
            t0.elapsed()
        );
        no_supervisor_left();
        let o = s
            .on(0, "srun")
            .args(["-N", "2", "-n", "3", mpi, p2p.to_str().unwrap()])
            .env("KUMI_SUPERVISE", "--stats")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("srun");
        let out = ok(&o, "p2p with --stats");
        let (_, err) = outputs(&o);
        assert!(
            err.contains("communication fraction") && !err.contains("deadlock"),
            "{mpi}: {out}{err}"
        );
        no_supervisor_left();
    }
    let o = s
        .on(0, "srun")
        .args(["-N", "2", "-n", "3", "--mpi=pmi2", p2p.to_str().unwrap()])
        .env("KUMI_SUPERVISOR", "off")
        .env("KUMI_SUPERVISE", "--stats")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("srun");
    ok(&o, "p2p without a supervisor");
    assert!(!outputs(&o).1.contains("communication fraction"));
}

/// Every supervisor has ended (within a few seconds of its job).
fn no_supervisor_left() {
    let t0 = Instant::now();
    loop {
        let o = std::process::Command::new("pgrep")
            .args(["-f", "kumi supervise --job"])
            .output()
            .expect("pgrep");
        if o.stdout.is_empty() {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "supervisors left: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An `sbatch` script that says only `kumi run ./prog`: kumi takes the
/// allocation's nodes, slots and task count, starts its agents with srun,
/// and places the ranks as Slurm placed the tasks (2, 2, 1); `--map-by node`
/// deals them one per node in turn.
#[test]
fn kumi_run_in_an_sbatch_script_uses_the_allocation() {
    if slurm::skip_unless_root("kumi_run_in_an_sbatch_script_uses_the_allocation") {
        return;
    }
    let c = c_built();
    let s = Slurm::start(3, 2);
    let script = s.dir().join("job.sh");
    let out = s.dir().join("job.out");
    let (kumi, prog) = (bin("kumi"), c.join("jobinfo"));
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n{k} run {p}\necho \"first exited $?\"\n{k} run --map-by node -n 3 {p}\necho \"second exited $?\"\n",
            k = kumi.display(),
            p = prog.display()
        ),
    )
    .expect("write the job script");
    let o = s
        .on(0, "sbatch")
        .args(["-N", "3", "-n", "5", "--wait", "-o"])
        .arg(&out)
        .arg(&script)
        .output()
        .expect("sbatch");
    let log = std::fs::read_to_string(&out).unwrap_or_default();
    assert!(o.status.success(), "sbatch: {}\n{log}", text(&o));
    let hosts = |size: u32| -> Vec<(u32, String)> {
        let mut v: Vec<(u32, String)> = log
            .lines()
            .filter(|l| l.contains(&format!(" size={size} ")))
            .map(|l| {
                let field = |k: &str| {
                    l.split(' ')
                        .find_map(|f| f.strip_prefix(k))
                        .unwrap_or_default()
                        .to_string()
                };
                (field("rank=").parse().unwrap_or(99), field("host="))
            })
            .collect();
        v.sort();
        v
    };
    let want = |v: &[(u32, &str)]| -> Vec<(u32, String)> {
        v.iter().map(|(r, h)| (*r, h.to_string())).collect()
    };
    assert!(
        log.contains("first exited 0") && log.contains("second exited 0"),
        "{log}"
    );
    assert_eq!(
        hosts(5),
        want(&[(0, "n0"), (1, "n0"), (2, "n1"), (3, "n1"), (4, "n2")]),
        "{log}"
    );
    assert_eq!(hosts(3), want(&[(0, "n0"), (1, "n1"), (2, "n2")]), "{log}");
}

/// `sbatch` a script and return its job id.
fn submit(s: &Slurm, name: &str, args: &[&str], body: &str) -> (String, PathBuf) {
    let script = s.dir().join(format!("{name}.sh"));
    let out = s.dir().join(format!("{name}.out"));
    std::fs::write(&script, format!("#!/bin/sh\n{body}")).expect("write the job script");
    let o = s
        .on(0, "sbatch")
        .arg("--parsable")
        .args(args)
        .arg("-o")
        .arg(&out)
        .arg(&script)
        .output()
        .expect("sbatch");
    assert!(o.status.success(), "sbatch: {}", text(&o));
    (String::from_utf8_lossy(&o.stdout).trim().to_string(), out)
}

/// The state letters squeue shows for `job` (empty once it has ended).
fn state(s: &Slurm, job: &str) -> String {
    let o = s
        .on(0, "squeue")
        .args(["-h", "-o", "%t", "-j", job])
        .output()
        .expect("squeue");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// A multi-host job under `kumi run`, stopped as a whole with `scontrol
/// suspend` for 30 s and resumed, finishes with the right sums: no false
/// deadlock, no peer declared lost, and the time stopped not counted as
/// time blocked.
#[test]
fn a_suspended_job_finishes_right() {
    if slurm::skip_unless_root("a_suspended_job_finishes_right") {
        return;
    }
    let c = c_built();
    let s = Slurm::start(3, 2);
    let (kumi, ticks) = (bin("kumi"), c.join("ticks"));
    let (job, out) = submit(
        &s,
        "suspend",
        &["-N", "3", "-n", "3"],
        &format!(
            "{} run --stats {} 600\necho \"kumi run exited $?\"\n",
            kumi.display(),
            ticks.display()
        ),
    );
    let t0 = Instant::now();
    while !std::fs::read_to_string(&out)
        .unwrap_or_default()
        .contains("step 100")
    {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the job did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let scontrol = |what: &str| {
        let o = s
            .on(0, "scontrol")
            .args([what, &job])
            .output()
            .expect("scontrol");
        assert!(o.status.success(), "scontrol {what}: {}", text(&o));
    };
    scontrol("suspend");
    std::thread::sleep(Duration::from_secs(30));
    assert_eq!(state(&s, &job), "S");
    scontrol("resume");
    let t1 = Instant::now();
    while !state(&s, &job).is_empty() {
        assert!(
            t1.elapsed() < Duration::from_secs(60),
            "the job did not end"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = std::fs::read_to_string(&out).unwrap_or_default();
    assert!(
        log.contains("ticks ok") && log.contains("kumi run exited 0"),
        "{log}"
    );
    assert!(!log.contains("deadlock") && !log.contains("lost"), "{log}");
    // Each rank's wall time holds the 30 s stopped; its blocked time not.
    let rows: Vec<(f64, f64)> = log
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 10 && f[0].parse::<u32>().is_ok())
                .then(|| (f[1].parse().unwrap_or(0.0), f[2].parse().unwrap_or(99.0)))
        })
        .collect();
    assert_eq!(rows.len(), 3, "{log}");
    for (wall, blocked) in rows {
        assert!(
            wall > 30.0 && blocked < 5.0,
            "wall {wall} s, blocked {blocked} s:\n{log}"
        );
    }
}

/// Two multi-host jobs under `kumi run` on the same nodes, time-shared by
/// Slurm's gang scheduler (`PreemptMode=GANG`, 5 s slices, each node's CPUs
/// oversubscribed twice): both run side by side (each has started before
/// either ends: a step Slurm refuses while its job is suspended is asked
/// for again, not left to srun's minute-long wait) and both finish with the
/// right sums, without a deadlock report or a lost peer.
#[test]
fn two_jobs_under_the_gang_scheduler_both_finish() {
    if slurm::skip_unless_root("two_jobs_under_the_gang_scheduler_both_finish") {
        return;
    }
    let c = c_built();
    let s = Slurm::start(3, 2);
    let (kumi, ticks) = (bin("kumi"), c.join("ticks"));
    let jobs: Vec<(String, PathBuf)> = ["gang-a", "gang-b"]
        .iter()
        .map(|name| {
            submit(
                &s,
                name,
                &["-N", "3", "-n", "6", "--oversubscribe"],
                &format!(
                    "{} run {} 1500\necho \"kumi run exited $?\"\n",
                    kumi.display(),
                    ticks.display()
                ),
            )
        })
        .collect();
    let logs = || -> Vec<String> {
        jobs.iter()
            .map(|(_, o)| std::fs::read_to_string(o).unwrap_or_default())
            .collect()
    };
    let t0 = Instant::now();
    let (mut started, mut ended) = ([None; 2], [None; 2]);
    let mut suspended = false;
    while ended.iter().any(Option::is_none) {
        let t = t0.elapsed();
        for (k, (job, out)) in jobs.iter().enumerate() {
            let st = state(&s, job);
            suspended |= st == "S";
            if started[k].is_none()
                && std::fs::read_to_string(out).is_ok_and(|l| l.contains("step 0"))
            {
                started[k] = Some(t);
            }
            if ended[k].is_none() && st.is_empty() {
                ended[k] = Some(t);
            }
        }
        assert!(
            t < Duration::from_secs(240),
            "the jobs did not end:\n{}",
            logs().join("\n---\n")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let all = logs().join("\n---\n");
    assert!(
        suspended,
        "the gang scheduler never suspended a job:\n{all}"
    );
    for log in logs() {
        assert!(
            log.contains("ticks ok") && log.contains("kumi run exited 0"),
            "{all}"
        );
        assert!(!log.contains("deadlock") && !log.contains("lost"), "{all}");
    }
    let last_start = started.iter().flatten().max().copied();
    let first_end = ended.iter().flatten().min().copied();
    assert!(
        matches!((last_start, first_end), (Some(s), Some(e)) if s < e),
        "the jobs did not run side by side (started {started:?}, ended {ended:?}):\n{all}"
    );
}
