//! The evaluation suite through the real `kumi` binary: every kernel's own result
//! check at a tiny size on 1, 2 and 4 ranks (4 is oversubscribed on 2 cores),
//! then `kumi bench all --quick` into a directory and `kumi report` over it, with
//! every chart the HTML page references opened and checked to be an image.

use kumi_tests::{bin, text};
use std::path::Path;
use std::process::{Command, Output};

fn kumi(args: &[&str]) -> Output {
    Command::new(bin("kumi"))
        .args(args)
        .output()
        .expect("start kumi")
}

/// Runs `kumi bench <kernel> -n <np> --size tiny --json` and returns its lines.
fn tiny(kernel: &str, np: usize, extra: &[&str]) -> Vec<String> {
    let n = np.to_string();
    let mut args = vec!["bench", kernel, "-n", &n, "--size", "tiny", "--json"];
    args.extend_from_slice(extra);
    let o = kumi(&args);
    assert!(
        o.status.success(),
        "kumi bench {kernel} -n {np} failed\n{}",
        text(&o)
    );
    let lines: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(String::from)
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with('{') && l.contains(&format!("\"np\": {np}"))),
        "{kernel} -n {np}: no JSON figure\n{}",
        text(&o)
    );
    lines
}

#[test]
fn every_kernel_checks_its_own_result_at_np_1_2_and_4() {
    for np in [1, 2, 4] {
        for k in [
            "lu", "himeno", "cg", "is", "mg", "sor", "knights", "dct", "matpow",
        ] {
            let lines = tiny(k, np, &[]);
            let checked = lines
                .iter()
                .filter(|l| {
                    l.contains("\"check\": \"PASSED\"") || l.contains("\"check\": \"VERIFIED\"")
                })
                .count();
            assert!(checked > 0, "{k} -n {np}: no checked figure in {lines:?}");
            if matches!(k, "knights" | "dct") {
                // DSE's applications run on the DSM beside message passing,
                // each version checked on its own.
                for model in ["messages", "dsm", "dsm/messages"] {
                    let m = format!("\"model\": \"{model}\"");
                    assert!(
                        lines.iter().any(|l| l.contains(&m) && l.contains("PASSED")),
                        "{k} -n {np}: no checked {model} figure in {lines:?}"
                    );
                }
            }
        }
    }
}

/// `kumi bench lu` with `KUMI_BLAS=<blas>`.
fn lu_with(blas: &str, args: &[&str]) -> Output {
    Command::new(bin("kumi"))
        .args(["bench", "lu", "-n", "2", "--size", "tiny"])
        .args(args)
        .env("KUMI_BLAS", blas)
        .env_remove("OPENBLAS_CORETYPE")
        .output()
        .expect("start kumi")
}

#[test]
fn lu_reports_gflops_efficiency_n_half_and_its_dgemm_kernel() {
    // Both DGEMMs: faer (built in) and OpenBLAS (test.sh installs
    // libopenblas0-serial), each solving a system that passes HPL's check.
    for (blas, name) in [("faer", "faer"), ("openblas", "OpenBLAS")] {
        let o = lu_with(blas, &["--json"]);
        assert!(o.status.success(), "KUMI_BLAS={blas}\n{}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        for m in [
            "\"metric\": \"gflops\"",
            "\"metric\": \"efficiency\"",
            "\"metric\": \"n_half\"",
            "\"check\": \"PASSED\"",
            &format!("\"kernel\": \"{name}"),
        ] {
            assert!(out.contains(m), "KUMI_BLAS={blas}: missing {m} in {out}");
        }
        if blas == "openblas" && std::arch::is_x86_feature_detected!("avx512f") {
            // Debian's OpenBLAS does not know this CPU and would run its SSE3
            // kernel; kumi names the AVX-512 one for it.
            assert!(out.contains("kernel SkylakeX"), "{out}");
        }
    }
    // The human table names the kernel and prints S-3000's Table 1 columns.
    let o = lu_with("faer", &[]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains("DGEMM kernel: faer") && out.contains("N_1/2"),
        "{}",
        text(&o)
    );
    // A misspelt choice is refused by name.
    let o = lu_with("mkl", &[]);
    assert!(
        !o.status.success() && text(&o).contains("KUMI_BLAS=mkl"),
        "{}",
        text(&o)
    );
}

#[test]
fn micro_and_two_level_sor() {
    // (Hockney's fit is unit-tested: on a loaded machine tiny messages can give
    // a flat latency curve, and then no fit is reported.)
    for np in [2, 4] {
        let lines = tiny("micro", np, &[]);
        for m in [
            "\"bench\": \"pingpong\"",
            "\"bench\": \"bw\"",
            "\"bench\": \"pattern2\"",
            "\"op\": \"allreduce\"",
            "\"op\": \"barrier\"",
        ] {
            assert!(lines.iter().any(|l| l.contains(m)), "np {np}: missing {m}");
        }
    }
    tiny("sor", 2, &["--threads", "2"]);
    tiny("sor", 1, &["--threads", "3"]);
}

#[test]
fn bad_sizes_are_errors_that_name_the_choices() {
    let o = kumi(&["bench", "himeno", "-n", "1", "--size", "XXL"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("XS, S, M or L"),
        "{}",
        text(&o)
    );
    let o = kumi(&["bench", "cg", "-n", "1", "--size", "Q"]);
    assert!(
        !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("S, W or A"),
        "{}",
        text(&o)
    );
    let o = kumi(&["bench", "pingpong", "-n", "1"]);
    assert!(!o.status.success(), "pingpong needs two ranks");
}

/// Width and height of a PNG, from its IHDR chunk.
fn png_size(b: &[u8]) -> Option<(u32, u32)> {
    if b.len() < 24 || &b[..8] != b"\x89PNG\r\n\x1a\n" || &b[12..16] != b"IHDR" {
        return None;
    }
    let w = u32::from_be_bytes(b[16..20].try_into().ok()?);
    let h = u32::from_be_bytes(b[20..24].try_into().ok()?);
    (w > 0 && h > 0).then_some((w, h))
}

/// Width and height attributes of an SVG document's root element.
fn svg_size(s: &str) -> Option<(f64, f64)> {
    let body = s.trim_start();
    let body = if body.starts_with("<?xml") {
        &body[body.find("?>")? + 2..]
    } else {
        body
    }
    .trim_start();
    let root = body.strip_prefix("<svg")?;
    let tag = &root[..root.find('>')?];
    let attr = |name: &str| -> Option<f64> {
        let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        tag[at..at + tag[at..].find('"')?].parse().ok()
    };
    if !s.trim_end().ends_with("</svg>") {
        return None;
    }
    Some((attr("width")?, attr("height")?))
}

fn check_html(dir: &Path) {
    let html = std::fs::read_to_string(dir.join("report.html")).expect("report.html");
    let mut charts = 0;
    let mut rest = html.as_str();
    while let Some(i) = rest.find("src=\"") {
        let after = &rest[i + 5..];
        let end = after.find('"').expect("closing quote");
        let rel = &after[..end];
        let p = dir.join(rel);
        let bytes = std::fs::read(&p)
            .unwrap_or_else(|e| panic!("{} referenced by report.html: {e}", p.display()));
        if rel.ends_with(".png") {
            let (w, h) = png_size(&bytes).unwrap_or_else(|| panic!("{rel} is not a PNG"));
            assert!(w >= 100 && h >= 100, "{rel}: {w}x{h}");
        } else {
            assert!(rel.ends_with(".svg"), "{rel}: unexpected image type");
            let (w, h) = svg_size(&String::from_utf8_lossy(&bytes))
                .unwrap_or_else(|| panic!("{rel} is not an SVG document"));
            assert!(w >= 100.0 && h >= 100.0, "{rel}: {w}x{h}");
        }
        charts += 1;
        rest = &after[end..];
    }
    assert!(charts >= 4, "report.html references only {charts} charts");
    assert!(html.contains("LU decomposition") && html.contains("N_1/2"));
}

#[test]
fn bench_all_quick_writes_json_and_report_makes_pages_with_valid_charts() {
    let dir = std::env::temp_dir().join(format!("kumi-suite-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().expect("utf-8 temp dir");
    let o = kumi(&["bench", "all", "--quick", "--out", d, "--json"]);
    assert!(o.status.success(), "bench all --quick failed\n{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for b in [
        "pingpong", "lu", "himeno", "cg", "is", "mg", "sor", "knights", "dct", "matpow", "scaling",
    ] {
        assert!(
            out.contains(&format!("\"bench\": \"{b}\"")),
            "no {b} figure in the JSON output"
        );
    }
    let files = std::fs::read_dir(&dir).expect("out dir").count();
    assert!(files >= 10, "only {files} result files in {d}");

    let o = kumi(&["report", d]);
    assert!(o.status.success(), "kumi report failed\n{}", text(&o));
    let md = std::fs::read_to_string(dir.join("report.md")).expect("report.md");
    assert!(
        md.contains("| configuration | GFLOPS | N | N_1/2 | peak GFLOPS | efficiency |"),
        "{md}"
    );
    assert!(
        md.contains("Amdahl") || md.contains("serial fraction") || md.contains("Scaling of"),
        "{md}"
    );
    check_html(&dir);
    let _ = std::fs::remove_dir_all(&dir);

    // An empty directory is an error with a message, not an empty report.
    let empty = std::env::temp_dir().join(format!("kumi-suite-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).expect("mkdir");
    let o = kumi(&["report", empty.to_str().expect("utf-8")]);
    assert!(
        !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("no results"),
        "{}",
        text(&o)
    );
    let _ = std::fs::remove_dir_all(&empty);
}

#[test]
fn a_failed_check_ends_the_job_non_zero_and_names_the_check() {
    for (k, check) in [
        ("lu", "lu scaled residual"),
        ("cg", "npb cg zeta"),
        ("mg", "npb mg residual norm"),
    ] {
        let o = Command::new(bin("kumi"))
            .args(["bench", k, "-n", "2", "--size", "tiny", "--json"])
            .env("KUMI_BENCH_FAULT", k)
            .output()
            .expect("start kumi");
        assert!(
            !o.status.success(),
            "{k} with a spoiled result succeeded\n{}",
            text(&o)
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("VERIFICATION FAILED: {check}")),
            "{k}: {}",
            text(&o)
        );
    }
}

#[test]
fn coll_vs_mpich_reports_every_op_and_size_for_every_side() {
    let found = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("mpicc.mpich").exists()));
    if !found {
        eprintln!(
            "SKIPPED coll_vs_mpich_reports_every_op_and_size_for_every_side: \
             mpicc.mpich is not installed (apt-get install mpich libmpich-dev)"
        );
        return;
    }
    // A few operations (one the Rust API has no form of: alltoallw), up to
    // 1 MiB: the whole default run lasts minutes.
    let ops = [
        "--ops",
        "barrier,allreduce,bcast,alltoall,alltoallw,neighbor_alltoall",
        "--max-size",
        "1048576",
    ];
    let o = kumi(
        &[
            &[
                "bench", "coll", "--vs", "mpich", "-n", "2", "--rounds", "1", "--reps", "1",
                "--rep-ms", "5", "--json",
            ][..],
            &ops,
        ]
        .concat(),
    );
    assert!(
        o.status.success(),
        "bench coll --vs mpich failed\n{}",
        text(&o)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with('{')).collect();
    for (op, size) in [
        ("barrier", 0),
        ("allreduce", 8),
        ("allreduce", 1 << 20),
        ("bcast", 1 << 20),
        ("alltoall", 4096),
        ("alltoallw", 64),
        ("neighbor_alltoall", 1 << 20),
    ] {
        // kumi-c and kumi-c-static: the twin on kumi's shared and static
        // libraries, which the build puts beside kumi.
        for side in ["kumi", "mpich", "kumi-c", "kumi-c-static"] {
            if side == "kumi" && op == "alltoallw" {
                continue;
            }
            let hit = lines.iter().any(|l| {
                l.contains(&format!("\"op\": \"{op}\""))
                    && l.contains(&format!("\"size\": {size},"))
                    && l.contains(&format!("\"impl\": \"{side}\""))
                    && l.contains("\"np\": 2,")
            });
            assert!(hit, "no {side} figure for {op} {size} B\n{}", text(&o));
        }
    }
    // Each reference's figures carry the ratio kumi/reference of their
    // rounds where kumi has the figure (not alltoallw); kumi's own do not.
    for l in &lines {
        let no_ratio = l.contains("\"impl\": \"kumi\"") || l.contains("\"op\": \"alltoallw\"");
        let ratio = l.split("\"ratio\": ").nth(1).and_then(|r| {
            r.trim_end_matches('}')
                .split(',')
                .next()?
                .trim()
                .parse::<f64>()
                .ok()
        });
        match ratio {
            Some(r) => assert!(!no_ratio && r > 0.0, "bad ratio in {l}"),
            None => assert!(no_ratio, "no ratio in {l}"),
        }
    }
    // The table names the op of every row.
    let o = kumi(
        &[
            &[
                "bench", "coll", "--vs", "mpich", "-n", "2", "--rounds", "1", "--reps", "1",
                "--rep-ms", "5",
            ][..],
            &ops,
        ]
        .concat(),
    );
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && table.contains("kumi/mpich") && table.contains("alltoall"),
        "{}",
        text(&o)
    );
}

#[test]
fn bench_floor_shows_what_single_copy_auto_measures_and_chooses() {
    let o = Command::new(bin("kumi"))
        .args(["bench", "floor", "--quick"])
        .output()
        .expect("start kumi");
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{out}{err}");
    let row = out
        .lines()
        .find(|l| l.contains("single_copy_MBps"))
        .unwrap_or_else(|| panic!("no single-copy row: {out}"));
    let read: f64 = row
        .split_whitespace()
        .nth(2)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    assert!(
        read > 0.0 && row.contains("copy_MBps=") && row.contains("local_copy_MBps="),
        "{row}"
    );
    // The choice, and how many measurements made it.
    assert!(
        ["on", "off"]
            .iter()
            .any(|c| err.contains(&format!("KUMI_SINGLE_COPY=auto chooses {c} ("))),
        "{err}"
    );
}

#[test]
fn a_reader_that_goes_away_ends_bench_quietly() {
    // `kumi bench floor --json | head -1`: the output has nowhere to go (here
    // the reader is gone before the first line). The command must end, as
    // `ls` does, by SIGPIPE, not panic on the failed print.
    let mut child = Command::new(bin("kumi"))
        .args(["bench", "floor", "--quick", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start kumi");
    drop(child.stdout.take());
    let o = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        o.status.signal(),
        Some(libc::SIGPIPE),
        "{:?}: {err}",
        o.status
    );
}

/// The command lines of running processes that contain `what`.
fn running(what: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(what))
        .collect()
}

/// `kumi bench apps` over two real builds of one program (MPICH's wrapper
/// and kumi's) plus two MPICH-built programs that fail their own check and
/// never end: kumi runs its own build, MPICH the other, figures come only
/// from verified runs, a failed check and a hung run are named and make the
/// exit status 1, nothing of the hung run is left, and `kumi report` shows
/// the table. Then MPICH's build alone runs unchanged on kumi's library.
#[test]
fn apps_runs_each_build_on_its_stack_and_counts_only_verified_runs() {
    let found = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("mpicc.mpich").exists()));
    if !found {
        eprintln!(
            "SKIPPED apps_runs_each_build_on_its_stack_and_counts_only_verified_runs: \
             mpicc.mpich is not installed (apt-get install mpich libmpich-dev)"
        );
        return;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("apps/npb_like.c");
    let tmp = std::env::temp_dir().join(format!("kumi-apps-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let (mpich, own, out) = (tmp.join("mpich"), tmp.join("kumi"), tmp.join("out"));
    let cc = |compiler: &[&Path], flags: &[&str], exe: &Path| {
        std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
        let o = Command::new(compiler[0])
            .args(&compiler[1..])
            .args(["-O2", "-o"])
            .arg(exe)
            .args(flags)
            .arg(&src)
            .output()
            .expect("start the compiler");
        assert!(o.status.success(), "{compiler:?}: {}", text(&o));
    };
    let mpicc = [Path::new("mpicc.mpich")];
    cc(&mpicc, &[], &mpich.join("is.S.x"));
    cc(&mpicc, &["-DFAIL_CHECK"], &mpich.join("cg.S.x"));
    cc(&mpicc, &["-DHANG"], &mpich.join("ep.S.x"));
    let kumi_bin = bin("kumi");
    cc(&[&kumi_bin, Path::new("cc")], &[], &own.join("is.S.x"));

    let s = |p: &Path| p.to_str().unwrap().to_string();
    let (mpich_s, own_s, out_s) = (s(&mpich), s(&own), s(&out));
    let o = kumi(&[
        "bench",
        "apps",
        &mpich_s,
        &own_s,
        "--vs",
        "mpich",
        "-n",
        "2",
        "--rounds",
        "2",
        "--timeout",
        "5",
        "--json",
        "--out",
        &out_s,
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        err.contains(&format!("is.S on kumi: {own_s}/is.S.x\n")),
        "{err}"
    );
    assert!(
        err.contains(&format!("is.S on mpich: {mpich_s}/is.S.x\n")),
        "{err}"
    );
    assert!(
        err.lines()
            .any(|l| l.contains("cg.S at np=2 on") && l.contains("Verification = UNSUCCESSFUL")),
        "{err}"
    );
    assert!(
        err.lines()
            .any(|l| l.contains("ep.S at np=2 on") && l.contains("still running after 5 s")),
        "{err}"
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        2,
        "one figure per side, of is.S only:\n{stdout}"
    );
    for (l, side) in lines.iter().zip(["kumi", "mpich"]) {
        assert!(
            l.contains("\"bench\": \"apps\"")
                && l.contains("\"op\": \"is.S\"")
                && l.contains("\"metric\": \"mops\"")
                && l.contains("\"rounds\": 2")
                && l.contains(&format!("\"impl\": \"{side}\"")),
            "{l}"
        );
    }
    let ratio: f64 = lines[1]
        .split("\"ratio\": ")
        .nth(1)
        .and_then(|r| {
            r.trim_end_matches('}')
                .split(',')
                .next()?
                .trim()
                .parse()
                .ok()
        })
        .expect("mpich's figure has a ratio");
    assert!(ratio > 0.0 && ratio.is_finite(), "{}", lines[1]);
    // The hung program's ranks and launcher are gone.
    let left = running(&format!("{mpich_s}/ep.S.x"));
    assert!(left.is_empty(), "left behind: {left:?}");
    // The figures reach the report.
    assert!(out.join("apps-np2.jsonl").exists());
    let r = kumi(&["report", &out_s]);
    assert!(r.status.success(), "{}", text(&r));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("Public benchmarks on kumi and the references"),
        "{md}"
    );
    assert!(md.contains("is.S"), "{md}");

    // An interrupt ends the program running (in a process group of its
    // own, which the terminal's signal would not reach) and the runner.
    let child = Command::new(bin("kumi"))
        .args([
            "bench",
            "apps",
            &mpich_s,
            "--ops",
            "ep.S",
            "-n",
            "2",
            "--timeout",
            "60",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start kumi");
    std::thread::sleep(std::time::Duration::from_secs(2));
    // SAFETY: kill has no memory preconditions; the child is not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().expect("wait");
    assert_eq!(o.status.code(), Some(130), "{}", text(&o));
    std::thread::sleep(std::time::Duration::from_millis(500));
    let left = running(&format!("{mpich_s}/ep.S.x"));
    assert!(left.is_empty(), "left behind after the interrupt: {left:?}");

    // MPICH's build alone: kumi runs that very file on its own library (a
    // wrong library would start singletons, which the program refuses).
    // Named relative to where the runner starts (each program starts in its
    // own directory).
    let o = Command::new(bin("kumi"))
        .args([
            "bench", "apps", "mpich", "--ops", "is.S", "--vs", "mpich", "-n", "2", "--rounds", "1",
        ])
        .current_dir(&tmp)
        .output()
        .expect("start kumi");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        err.contains(&format!(
            "is.S on kumi: {mpich_s}/is.S.x (MPICH's build on kumi's library)"
        )),
        "{err}"
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("worst kumi/mpich"),
        "{}",
        text(&o)
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

/// `kumi bench startup` times the same program on kumi, MPICH and Open MPI
/// (test.sh installs both): for every side, launch to the first barrier and
/// launch to exit, the first no later than the second, and a paired ratio
/// for each reference; a side it cannot compare with is refused; a job past
/// `--timeout` is named and its round left out, with exit status 1.
#[test]
fn startup_times_every_stack_to_its_first_barrier_and_its_exit() {
    let o = kumi(&[
        "bench",
        "startup",
        "-n",
        "3",
        "--vs",
        "mpich,openmpi",
        "--rounds",
        "2",
        "--json",
    ]);
    assert!(o.status.success(), "bench startup failed\n{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<serde_json::Value> = out
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    for side in ["kumi", "mpich", "openmpi"] {
        let value = |op: &str| -> f64 {
            let l = lines
                .iter()
                .find(|l| l["impl"] == side && l["op"] == op)
                .unwrap_or_else(|| panic!("no {op} line for {side}:\n{out}"));
            assert_eq!(l["size"], 3, "{l}");
            assert_eq!(l["metric"], "seconds", "{l}");
            if side != "kumi" {
                assert!(l["ratio"].as_f64().is_some_and(|r| r > 0.0), "{l}");
            }
            l["value"].as_f64().expect("a value")
        };
        let (barrier, exit) = (value("to first barrier"), value("to exit"));
        assert!(
            barrier > 0.0 && barrier <= exit && exit < 120.0,
            "{side}: barrier {barrier} s, exit {exit} s"
        );
    }
    let o = kumi(&["bench", "startup", "-n", "2", "--vs", "kumi-c"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("startup compares kumi with mpich and openmpi"),
        "{err}"
    );
    // No job ends within 0 s: every job of every round is named, and no
    // round counts. (A job may still reach its barrier before the launcher
    // looks at the clock; it is named all the same, as counting to the
    // barrier only.)
    let o = kumi(&[
        "bench",
        "startup",
        "-n",
        "2",
        "--vs",
        "mpich",
        "--rounds",
        "2",
        "--timeout",
        "0",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success()
            && err.matches(" FAILED (").count() == 4
            && err.contains("no round finished on every side"),
        "{err}"
    );
}
