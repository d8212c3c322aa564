//! `mpirun` and `mpiexec` as job scripts call them, and jobs of several
//! programs (MPMD): real jobs of a real C program (`jobinfo.c`, which prints
//! what each rank was started with), built with `kumi cc`, started through
//! kumi's `mpirun`/`mpiexec` and `kumi run`. A line in MPICH's dialect is
//! also given to MPICH's own `mpiexec.mpich` with the same source built by
//! `mpicc.mpich`: both must start the same ranks the same way.
//!
//! Needs the workspace built and Debian's `libmpich-dev` (`test.sh`); the
//! test across namespace hosts needs root and says SKIPPED loudly without.

use kumi_tests::netns::{self, assert_clean, cluster};
use kumi_tests::programs::{compile_all, lib_dir, outputs};
use kumi_tests::{bin, text};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// `jobinfo` built with `compiler` into `lib_dir()/launch-tests/<name>`,
/// twice (`jobinfo` and `jobinfo_b`), so an MPMD job has two programs.
fn build(name: &str, compiler: &[String]) -> PathBuf {
    let out = lib_dir().join("launch-tests").join(name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kumi-mpi/tests/c");
    compile_all(compiler, &["-O1", "-Wall"], &src, &["jobinfo.c"], &out);
    std::fs::copy(out.join("jobinfo"), out.join("jobinfo_b")).expect("copy jobinfo");
    out
}

fn kumi_built() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| build("kumi", &[bin("kumi").display().to_string(), "cc".into()]))
}

fn mpich_built() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let ok = Command::new("mpicc.mpich")
            .arg("-v")
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            ok,
            "mpicc.mpich is missing: install Debian's MPICH (apt-get install libmpich-dev; test.sh does)"
        );
        build("mpich", &["mpicc.mpich".into()])
    })
}

/// A scratch directory for `-wdir`.
fn workdir() -> PathBuf {
    let d = lib_dir().join("launch-tests/wd");
    std::fs::create_dir_all(&d).expect("work dir");
    d.canonicalize().expect("work dir path")
}

/// The ranks' lines, sorted, each with `drop` fields (`key=`) removed.
fn lines(o: &Output, drop: &[&str]) -> BTreeSet<String> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            l.split(' ')
                .filter(|f| !drop.iter().any(|d| f.starts_with(d)))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// No process whose command line holds `pattern` is left.
fn assert_none_running(pattern: &str) {
    let left = Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .expect("pgrep");
    assert!(
        left.stdout.is_empty(),
        "ranks left running: {}",
        String::from_utf8_lossy(&left.stdout)
    );
}

fn set(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// An MPMD line in Hydra's dialect: `-genv` for every rank, `-env` and
/// `-wdir` for their program only, `-l` labels. Kumi's `mpiexec` starts
/// exactly the ranks MPICH's starts, with the same environment, working
/// directories and MPI_APPNUM, in one MPI_COMM_WORLD.
#[test]
fn an_mpmd_line_in_hydras_dialect_runs_as_on_mpich() {
    let wd = workdir();
    let line = |dir: &Path| -> Vec<String> {
        [
            "-np",
            "1",
            "-genv",
            "ROLE",
            "all",
            "-wdir",
            wd.to_str().unwrap(),
            "-l",
            dir.join("jobinfo").to_str().unwrap(),
            ":",
            "-np",
            "3",
            "-env",
            "ROLE",
            "worker",
            dir.join("jobinfo_b").to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let kumi = Command::new(lib_dir().join("mpiexec"))
        .args(line(kumi_built()))
        .current_dir("/")
        .output()
        .expect("kumi's mpiexec");
    assert!(kumi.status.success(), "{}", text(&kumi));
    let w = wd.display();
    // Where the ranks share the cores, kumi binds them (KUMI_BIND=auto) and
    // MPICH does not: the core count is not compared.
    let want = set(&[
        &format!("[0] rank=0 size=4 app=0 prog=jobinfo role=all cwd={w} host=- sum=6"),
        "[1] rank=1 size=4 app=1 prog=jobinfo_b role=worker cwd=/ host=- sum=6",
        "[2] rank=2 size=4 app=1 prog=jobinfo_b role=worker cwd=/ host=- sum=6",
        "[3] rank=3 size=4 app=1 prog=jobinfo_b role=worker cwd=/ host=- sum=6",
    ]);
    assert_eq!(lines(&kumi, &["cores="]), want, "{}", text(&kumi));
    // Without the test's LD_LIBRARY_PATH (cargo's, which holds kumi's
    // libmpi.so.12): MPICH's programs on MPICH's library.
    let mpich = Command::new("mpiexec.mpich")
        .args(line(mpich_built()))
        .env_remove("LD_LIBRARY_PATH")
        .current_dir("/")
        .output()
        .expect("mpiexec.mpich");
    assert!(mpich.status.success(), "{}", text(&mpich));
    assert_eq!(
        lines(&mpich, &["cores="]),
        want,
        "MPICH reads the line otherwise"
    );
}

/// The options Open MPI's users write: ranks per host, mapping by node,
/// binding, `-x`, `--tag-output`, and the ones kumi accepts as they are.
#[test]
fn an_open_mpi_line_with_binding_mapping_and_exports() {
    let prog = kumi_built().join("jobinfo");
    let o = Command::new(lib_dir().join("mpirun"))
        .args([
            "--allow-run-as-root",
            "--oversubscribe",
            "-N",
            "2",
            "-H",
            "localhost:4",
            "--map-by",
            "node",
            "--bind-to",
            "core",
            "-x",
            "ROLE=o",
            "--tag-output",
        ])
        .arg(&prog)
        .output()
        .expect("kumi's mpirun");
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        lines(&o, &["cwd=", "host="]),
        set(&[
            "[0] rank=0 size=2 app=0 prog=jobinfo role=o cores=1 sum=1",
            "[1] rank=1 size=2 app=0 prog=jobinfo role=o cores=1 sum=1",
        ]),
        "-N 2 makes two ranks, each bound to one core: {}",
        text(&o)
    );
    // --bind-to none: even three ranks on this machine's cores stay unbound.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let o = Command::new(lib_dir().join("mpirun"))
        .args(["-np", "3", "--bind-to", "none"])
        .arg(&prog)
        .output()
        .expect("kumi's mpirun");
    assert!(o.status.success(), "{}", text(&o));
    let unbound = lines(&o, &[])
        .iter()
        .filter(|l| l.contains(&format!(" cores={cores} ")))
        .count();
    assert_eq!(unbound, 3, "{}", text(&o));
}

/// `--timeout` (and Hydra's `MPIEXEC_TIMEOUT`) stop a job that runs too long
/// with exit code 124 and one line saying so, leaving nothing running.
#[test]
fn a_job_past_its_timeout_is_stopped_with_124() {
    let marker = format!("kumi-timeout-{}", std::process::id());
    for (args, env) in [(vec!["--timeout", "1"], None), (vec![], Some("1"))] {
        let started = Instant::now();
        let mut c = Command::new(lib_dir().join("mpirun"));
        c.args(&args)
            .args(["-n", "2", "sh", "-c", &format!("exec sleep 30 # {marker}")]);
        if let Some(t) = env {
            c.env("MPIEXEC_TIMEOUT", t);
        }
        let o = c.output().expect("kumi's mpirun");
        let (_, err) = outputs(&o);
        assert_eq!(o.status.code(), Some(124), "{err}");
        assert!(
            err.contains("ran longer than its time limit of 1 s (--timeout); stopped 2 ranks"),
            "{err}"
        );
        assert!(started.elapsed() < Duration::from_secs(10));
    }
    assert_none_running(&marker);
}

/// A thousand and twenty-four ranks on one host, far more than its cores,
/// start, pass a barrier and an allreduce, and end with nothing left
/// running (issue 30; how long it takes is `docs/BENCHMARKS.md`'s).
#[test]
fn a_thousand_ranks_on_one_host_start_and_end_cleanly() {
    const N: usize = 1024;
    // Its own name, so that the look for leftovers sees only this job.
    let prog = kumi_built().join("jobinfo_thousand");
    std::fs::copy(kumi_built().join("jobinfo"), &prog).expect("copy jobinfo");
    let o = Command::new(bin("kumi"))
        .args(["run", "--timeout", "300", "-n", &N.to_string()])
        .arg(&prog)
        .output()
        .expect("kumi run");
    let (out, err) = outputs(&o);
    assert!(o.status.success(), "{}\n{err}", o.status);
    let sum = N * (N - 1) / 2;
    let mut ranks: Vec<usize> = out
        .lines()
        .map(|l| {
            let field = |k: &str| l.split(' ').find_map(|f| f.strip_prefix(k));
            assert_eq!(field("size="), Some(N.to_string().as_str()), "{l}");
            assert_eq!(field("sum="), Some(sum.to_string().as_str()), "{l}");
            field("rank=").and_then(|r| r.parse().ok()).expect("a rank")
        })
        .collect();
    ranks.sort_unstable();
    assert_eq!(ranks, (0..N).collect::<Vec<_>>(), "one line per rank");
    assert_none_running(prog.to_str().unwrap());
}

/// An option kumi does not take is refused naming it (exit 2, nothing
/// started); `--help` lists the dialects' options; `--version` answers.
#[test]
fn unknown_options_are_refused_by_name_and_help_and_version_answer() {
    for (name, args, says) in [
        (
            "mpirun",
            vec!["--mca", "btl", "self", "true"],
            "option --mca",
        ),
        (
            "mpiexec",
            vec!["-launcher", "ssh", "true"],
            "option -launcher",
        ),
        (
            "mpirun",
            vec!["-n", "1", "true", ":", "-bind-to", "core", "true"],
            "after ':'",
        ),
        (
            "mpirun",
            vec!["-n", "1", "true", ":", "true"],
            "needs its own -n",
        ),
    ] {
        let o = Command::new(lib_dir().join(name))
            .args(&args)
            .output()
            .expect("kumi's mpirun");
        let (out, err) = outputs(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?} started something: {out}");
    }
    let o = Command::new(lib_dir().join("mpiexec"))
        .arg("--help")
        .output()
        .expect("mpiexec --help");
    let (out, _) = outputs(&o);
    assert!(o.status.success());
    for opt in [
        "-genv",
        "-ppn",
        "--map-by",
        "--bind-to",
        "-wdir",
        "--timeout",
        "MPMD",
    ] {
        assert!(out.contains(opt), "--help does not mention {opt}:\n{out}");
    }
    let o = Command::new(lib_dir().join("mpirun"))
        .arg("--version")
        .output()
        .expect("mpirun --version");
    assert!(o.status.success() && outputs(&o).0.contains("kumi"));
}

/// Across hosts: an MPMD job whose ranks are dealt one per host in turn,
/// with the job's and each program's variables and working directories
/// reaching the ranks that an agent starts on another host.
#[test]
fn mpmd_mapping_and_exports_reach_ranks_on_other_hosts() {
    if netns::skip_unless_root("mpmd_mapping_and_exports_reach_ranks_on_other_hosts") {
        return;
    }
    let c = cluster(2);
    let dir = kumi_built();
    let (a, b) = (dir.join("jobinfo"), dir.join("jobinfo_b"));
    let o = c
        .kumi_command(
            1,
            &[(0, 1), (1, 2)],
            &["--map-by", "node", "-x", "ROLE=job", "--wdir", "/tmp"],
            &[
                a.to_str().unwrap(),
                ":",
                "-n",
                "2",
                "-x",
                "ROLE=b",
                "--wdir",
                "/",
                b.to_str().unwrap(),
            ],
        )
        .output()
        .expect("kumi run in the test host");
    assert!(o.status.success(), "{}", text(&o));
    let (h0, h1) = (&c.hosts[0], &c.hosts[1]);
    assert_eq!(
        lines(&o, &["cores="]),
        set(&[
            &format!("rank=0 size=3 app=0 prog=jobinfo role=job cwd=/tmp host={h0} sum=3"),
            &format!("rank=1 size=3 app=1 prog=jobinfo_b role=b cwd=/ host={h1} sum=3"),
            &format!("rank=2 size=3 app=1 prog=jobinfo_b role=b cwd=/ host={h1} sum=3"),
        ]),
        "{}",
        text(&o)
    );
    assert_clean(&c);
}
