//! `kumi bench <suite kernel>`, `kumi bench all`, `kumi bench scaling` and
//! `kumi report`: the evaluation suite's command side.
//!
//! Each kernel runs as a kumi job of `kumi bench-rank <name>` ranks (through
//! `kumi run`, with `--hosts` passed on); rank 0 prints one JSON figure per line
//! and `#progress` lines, which become a progress bar on a terminal. Results go
//! to stdout as a table (or JSON with `--json`) and, with `--out DIR`, to
//! `DIR/<kernel>-np<N>.jsonl`, which `kumi report DIR` turns into pages.

use crate::bench::{BenchArgs, Kernel};
use clap::Args;
use kumi_bench::figure::Figure;
use kumi_bench::scaling::amdahl_fit;
use kumi_bench::suite::Params;
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// Options of the suite kernels (flattened into `kumi bench`).
#[derive(Args, Debug, Default, Clone)]
pub struct SuiteOpts {
    /// Problem size: lu orders (e.g. 2000,4000), himeno XS/S/M/L, npb class
    /// S/W/A (also as --class), sor/dct grid side, knights board side; `tiny`
    /// for a smoke test.
    #[arg(long, alias = "class")]
    pub size: Option<String>,
    /// Threads per rank (sor's two-level mode).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Iterations (himeno, sor); default: as the kernel decides.
    #[arg(long)]
    pub iters: Option<usize>,
    /// Depth of the serial expansion (knights).
    #[arg(long)]
    pub depth: Option<usize>,
    /// Also write the results as JSON lines into this directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The kernel `scaling` measures (himeno, lu, cg, is, mg, sor, knights).
    #[arg(long = "kernel", value_name = "NAME", default_value = "himeno")]
    pub scale_kernel: String,
}

/// Options of a suite kernel on the rank side (flattened into `bench-rank`).
#[derive(Args, Debug, Default, Clone)]
pub struct RankOpts {
    #[arg(long)]
    size: Option<String>,
    #[arg(long)]
    quick: bool,
    #[arg(long, default_value_t = 1)]
    threads: usize,
    #[arg(long)]
    iters: Option<usize>,
    #[arg(long)]
    depth: Option<usize>,
}

/// The suite name of a kernel, if it is one of the suite's.
pub fn name(k: Kernel) -> Option<&'static str> {
    Some(match k {
        Kernel::Micro => "micro",
        Kernel::Lu => "lu",
        Kernel::Himeno => "himeno",
        Kernel::Cg => "cg",
        Kernel::Is => "is",
        Kernel::Mg => "mg",
        Kernel::Sor => "sor",
        Kernel::Knights => "knights",
        Kernel::Dct => "dct",
        Kernel::Matpow => "matpow",
        Kernel::Npb => "npb",
        Kernel::Scaling => "scaling",
        Kernel::All => "all",
        _ => return None,
    })
}

/// Rank side: runs the kernel, prints figures on rank 0; a failed check prints
/// the check's name and exits non-zero (the launcher then ends the job).
pub fn rank(name: &str, o: &RankOpts, reps: usize, rep_ms: u64, max_size: usize) -> i32 {
    // Before kumi::init starts the progress thread: the environment may only
    // change while this process has one thread.
    kumi_bench::blas::prepare_env();
    let universe = match kumi::init() {
        Ok(u) => u,
        Err(e) => {
            eprintln!("kumi bench: {e}");
            return 1;
        }
    };
    let w = universe.world();
    let p = Params {
        size: o.size.clone(),
        quick: o.quick,
        reps,
        threads: o.threads,
        iters: o.iters,
        depth: o.depth,
        max_size,
        rep_seconds: rep_ms as f64 / 1000.0,
    };
    match kumi_bench::suite::run(name, &w, &p) {
        Ok(figs) => {
            if w.rank() == 0 {
                let mut out = std::io::stdout().lock();
                for f in figs {
                    let _ = writeln!(out, "{}", f.to_json());
                }
                let _ = out.flush();
            }
            0
        }
        Err(e) => {
            eprintln!("kumi bench {name} (rank {}): {e}", w.rank());
            // Do not wait in finalize for ranks that may be waiting on this one.
            let _ = std::io::stderr().flush();
            std::process::exit(if matches!(e, kumi_bench::figure::Failure::Check { .. }) {
                3
            } else {
                1
            });
        }
    }
}

struct Bar {
    on: bool,
    label: String,
}

impl Bar {
    fn new(label: &str, on: bool) -> Bar {
        Bar {
            on: on && std::io::stderr().is_terminal(),
            label: label.into(),
        }
    }
    fn show(&self, done: usize, total: usize, what: &str) {
        if !self.on || total == 0 {
            return;
        }
        let width = 30;
        let filled = (done.min(total) * width) / total;
        eprint!(
            "\r\x1b[2K{} [{}{}] {done}/{total} {what}",
            self.label,
            "#".repeat(filled),
            ".".repeat(width - filled)
        );
        let _ = std::io::stderr().flush();
    }
    fn end(&self) {
        if self.on {
            eprint!("\r\x1b[2K");
        }
    }
}

/// Runs one suite kernel as a job and returns its figures.
fn job(
    name: &str,
    np: u32,
    a: &BenchArgs,
    quick: bool,
    progress: bool,
    threads: usize,
) -> Result<Vec<Figure>, i32> {
    let me = std::env::current_exe().map_err(|e| {
        eprintln!("kumi bench: cannot find the kumi executable: {e}");
        1
    })?;
    let s = &a.suite;
    let mut c = Command::new(&me);
    c.args(["run", "-n", &np.to_string()]);
    if let Some(h) = &a.hosts {
        c.args(["--hosts", h]);
    }
    if let Some(r) = &a.rsh {
        c.args(["--rsh", r]);
    }
    c.arg("--").arg(&me).args(["bench-rank", name]);
    let (reps, rep_ms) = if quick {
        (3, 15)
    } else {
        (a.reps(), a.rep_ms())
    };
    let max_size = if quick {
        a.max_size().min(1 << 20)
    } else {
        a.max_size()
    };
    c.args([
        "--max-size",
        &max_size.to_string(),
        "--reps",
        &reps.to_string(),
        "--rep-ms",
        &rep_ms.to_string(),
    ]);
    if let Some(v) = &s.size {
        c.args(["--size", v]);
    }
    if quick {
        c.arg("--quick");
    }
    c.args(["--threads", &threads.max(1).to_string()]);
    if let Some(v) = s.iters {
        c.args(["--iters", &v.to_string()]);
    }
    if let Some(v) = s.depth {
        c.args(["--depth", &v.to_string()]);
    }
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| {
            eprintln!("kumi bench: cannot start the benchmark job: {e}");
            1
        })?;
    let bar = Bar::new(&format!("{name} np={np}"), progress);
    let mut figs = Vec::new();
    for line in BufReader::new(child.stdout.take().expect("piped"))
        .lines()
        .map_while(Result::ok)
    {
        if let Some(rest) = line.strip_prefix("#progress ") {
            let mut it = rest.splitn(3, ' ');
            let done = it.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            let total = it.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            bar.show(done, total, it.next().unwrap_or(""));
        } else if let Some(f) = Figure::from_json(&line) {
            figs.push(f);
        } else {
            bar.end();
            println!("{line}");
        }
    }
    bar.end();
    crate::bench::finish_job(&mut child, name)?;
    Ok(figs)
}

fn save(dir: &Path, file: &str, figs: &[Figure]) -> Result<(), i32> {
    std::fs::create_dir_all(dir).map_err(|e| {
        eprintln!("kumi bench: cannot create {}: {e}", dir.display());
        1
    })?;
    let p = dir.join(file);
    let text: String = figs.iter().map(|f| f.to_json() + "\n").collect();
    std::fs::write(&p, text).map_err(|e| {
        eprintln!("kumi bench: cannot write {}: {e}", p.display());
        1
    })
}

/// A detail value for the table: numbers with a fraction to 4 significant
/// digits (the JSON keeps them whole), anything else as it is.
fn short_num(v: &str) -> String {
    match v.parse::<f64>() {
        Ok(x) if x.is_finite() && x.fract() != 0.0 => {
            let digits = 3 - (x.abs().log10().floor() as i32).clamp(-6, 3);
            format!("{x:.*}", digits.max(0) as usize)
        }
        _ => v.to_string(),
    }
}

fn print_table(figs: &[Figure]) {
    if figs.is_empty() {
        println!("(no results)");
        return;
    }
    if let Some(k) = figs
        .iter()
        .find_map(|f| (f.bench == "lu").then(|| f.get("kernel")).flatten())
    {
        println!("DGEMM kernel: {k}");
    }
    println!(
        "{:>10} {:>4} {:>10} {:>20} {:>14}  details",
        "bench", "np", "size", "metric", "value"
    );
    for f in figs {
        let details: Vec<String> = f
            .extra
            .iter()
            // The kernel is named once, above the table.
            .filter(|(k, _)| !(f.bench == "lu" && k.as_str() == "kernel"))
            .map(|(k, v)| format!("{k}={}", short_num(v.trim_matches('"'))))
            .collect();
        println!(
            "{:>10} {:>4} {:>10} {:>20} {:>14.4}  {}",
            f.bench,
            f.np,
            f.size,
            f.metric,
            f.value,
            details.join(" ")
        );
    }
    // S-3000's Table 1 for lu.
    let gf: Vec<&Figure> = figs
        .iter()
        .filter(|f| f.bench == "lu" && f.metric == "gflops")
        .collect();
    if !gf.is_empty() {
        println!(
            "\n{:>14} {:>9} {:>7} {:>8} {:>9} {:>11}",
            "configuration", "GFLOPS", "N", "N_1/2", "peak", "efficiency"
        );
        let mut nps: Vec<usize> = gf.iter().map(|f| f.np).collect();
        nps.dedup();
        for np in nps {
            let best = gf
                .iter()
                .filter(|f| f.np == np)
                .max_by(|a, b| a.value.total_cmp(&b.value))
                .expect("one");
            let nh = figs
                .iter()
                .find(|f| f.bench == "lu" && f.metric == "n_half" && f.np == np)
                .map_or(f64::NAN, |f| f.value);
            let peak = best.num("peak_gflops").unwrap_or(f64::NAN);
            println!(
                "{:>14} {:>9.2} {:>7} {:>8.0} {:>9.2} {:>10.1}%",
                format!("{np} rank(s)"),
                best.value,
                best.size,
                nh,
                peak,
                100.0 * best.value / peak
            );
        }
    }
}

fn emit(a: &BenchArgs, figs: &[Figure]) {
    if a.json {
        for f in figs {
            println!("{}", f.to_json());
        }
    } else {
        print_table(figs);
    }
}

/// The primary rate of a kernel's figures (higher is better) for scaling.
fn rate(kernel: &str, figs: &[Figure]) -> Option<f64> {
    let want = match kernel {
        "lu" => "gflops",
        "himeno" | "sor" => "mflops",
        "cg" | "is" | "mg" => "mops",
        "knights" => "seconds",
        _ => return None,
    };
    // Kernels with a DSM version scale by their message-passing one.
    let v = figs
        .iter()
        .filter(|f| f.metric == want && f.get("model").is_none_or(|m| m == "messages"))
        .map(|f| f.value)
        .fold(f64::NAN, f64::max);
    Some(if want == "seconds" { 1.0 / v } else { v })
}

fn scaling(a: &BenchArgs, max_np: u32, quick: bool, progress: bool) -> Result<Vec<Figure>, i32> {
    let k = a.suite.scale_kernel.as_str();
    if rate(k, &[]).is_none() {
        eprintln!("kumi bench scaling: --kernel must be one of himeno, lu, cg, is, mg, sor, knights (not {k:?})");
        return Err(2);
    }
    let mut base = f64::NAN;
    let mut out = Vec::new();
    let mut pts = Vec::new();
    for np in 1..=max_np.max(1) {
        let figs = job(k, np, a, quick, progress, a.suite.threads)?;
        let r = rate(k, &figs).unwrap_or(f64::NAN);
        if np == 1 {
            base = r;
        }
        let s = r / base;
        pts.push((np as f64, s));
        let size = figs.first().map_or(0, |f| f.size);
        out.push(
            Figure::new("scaling", np as usize, size, "speedup", s)
                .with_str("kernel", k)
                .with_num("rate", r),
        );
    }
    if let Some(af) = amdahl_fit(&pts) {
        out.push(
            Figure::new("scaling", max_np as usize, 0, "serial_fraction", af).with_str("kernel", k),
        );
    }
    Ok(out)
}

/// `kumi bench <suite kernel | npb | scaling | all>`.
pub fn main(a: &BenchArgs) -> i32 {
    let Some(n) = name(a.kernel) else { return 2 };
    let quick = a.quick;
    let progress = !a.json;
    let run = |file: &str,
               figs: Result<Vec<Figure>, i32>,
               dir: Option<&Path>|
     -> Result<Vec<Figure>, i32> {
        let figs = figs?;
        if let Some(d) = dir {
            save(d, file, &figs)?;
        }
        Ok(figs)
    };
    let dir = a.suite.out.as_deref();
    let result = match n {
        "all" => {
            let dir = dir
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from("kumi-results"));
            let t0 = Instant::now();
            let cores = std::thread::available_parallelism().map_or(2, |c| c.get()) as u32;
            let np = if a.np < 2 { 2 } else { a.np };
            let mut all = Vec::new();
            let mut plan: Vec<(&str, u32)> = vec![("micro", 2), ("lu", 1), ("lu", np)];
            plan.extend(["himeno", "cg", "is", "mg", "sor", "knights"].map(|k| (k, np)));
            plan.extend([("dct", 1), ("dct", np), ("matpow", np)]);
            for (k, p) in plan {
                match run(
                    &format!("{k}-np{p}.jsonl"),
                    job(k, p, a, quick, progress, a.suite.threads),
                    Some(&dir),
                ) {
                    Ok(f) => all.extend(f),
                    Err(c) => return c,
                }
            }
            // Two-level SOR: one rank with all cores as threads.
            match run(
                &format!("sor-np1-t{cores}.jsonl"),
                job("sor", 1, a, quick, progress, cores as usize),
                Some(&dir),
            ) {
                Ok(f) => all.extend(f),
                Err(c) => return c,
            }
            match run("scaling.jsonl", scaling(a, np, quick, progress), Some(&dir)) {
                Ok(f) => all.extend(f),
                Err(c) => return c,
            }
            if !a.json {
                eprintln!(
                    "kumi bench all: {} figures in {:.0} s, written to {}",
                    all.len(),
                    t0.elapsed().as_secs_f64(),
                    dir.display()
                );
            }
            Ok(all)
        }
        "npb" => {
            let mut all = Vec::new();
            for k in ["cg", "is", "mg"] {
                match run(
                    &format!("{k}-np{}.jsonl", a.np),
                    job(k, a.np, a, quick, progress, a.suite.threads),
                    dir,
                ) {
                    Ok(f) => all.extend(f),
                    Err(c) => return c,
                }
            }
            Ok(all)
        }
        "scaling" => run(
            &format!("scaling-{}.jsonl", a.suite.scale_kernel),
            scaling(a, a.np, quick, progress),
            dir,
        ),
        k => run(
            &format!("{k}-np{}.jsonl", a.np),
            job(k, a.np, a, quick, progress, a.suite.threads),
            dir,
        ),
    };
    match result {
        Ok(figs) => {
            emit(a, &figs);
            0
        }
        Err(c) => c,
    }
}

/// Arguments of `kumi report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// The directory `kumi bench ... --out DIR` wrote.
    pub dir: PathBuf,
}

/// `kumi report DIR`.
pub fn report_main(a: ReportArgs) -> i32 {
    match kumi_bench::report::write(&a.dir) {
        Ok(paths) => {
            for p in paths {
                println!("{}", p.display());
            }
            0
        }
        Err(e) => {
            eprintln!("kumi report: {e}");
            1
        }
    }
}
