//! `kumi bench`: measure this machine the way the papers did.
//!
//! `kumi bench pingpong|bw|rate` starts a kumi job whose ranks are this same
//! `kumi` executable in its hidden `bench-rank` role; rank 0 prints one JSON record
//! per figure, which this command collects and shows as a table (or passes on with
//! `--json`). `kumi bench floor` measures the hardware's own limits in-process.

use clap::{Args, ValueEnum};
use kumi_bench::{floor, MicroOpts, Record};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const EXAMPLES: &str = "\
EXAMPLES:
    kumi bench pingpong                 latency 0 B .. 4 MiB between 2 ranks, as a table
    kumi bench bw --json                streaming bandwidth, one JSON object per line
    kumi bench rate                     8-byte message rate, 64 messages in flight
    kumi bench floor                    cache-line round trip and memcpy bandwidth
    kumi bench pingpong --quick         a fast, rougher pass

OUTPUT:
    Each figure is the median of --reps timed repetitions of about --rep-ms
    milliseconds each. latency_us is half of one round trip; bandwidth_MBps is
    10^6 bytes per second; msg_rate_Mps is millions of messages per second.
    With --json every line is {\"bench\", \"np\", \"size\", \"metric\", \"value\"}.";

/// Which benchmark to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Kernel {
    /// Half round-trip latency between two ranks, 0 B to --max-size.
    Pingpong,
    /// Streaming bandwidth from rank 0 to rank 1 (windows of 64 messages).
    Bw,
    /// Small-message rate (8 B, 64 in flight).
    Rate,
    /// The hardware floor: cache-line handoff between two cores, memcpy bandwidth.
    Floor,
}

/// Arguments of `kumi bench`.
#[derive(Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct BenchArgs {
    /// The benchmark.
    #[arg(value_enum)]
    pub kernel: Kernel,
    /// Number of ranks (the figures are between ranks 0 and 1; others idle).
    #[arg(short = 'n', long = "np", default_value_t = 2, value_parser = clap::value_parser!(u32).range(2..=4096))]
    pub np: u32,
    /// Print one JSON object per line instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Fewer sizes, repetitions and shorter runs: a rough figure in seconds.
    #[arg(long)]
    pub quick: bool,
    /// Largest message size in bytes (pingpong and bw).
    #[arg(long, default_value_t = 4 << 20)]
    pub max_size: usize,
    /// Timed repetitions per size; the median is reported.
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Target length of one repetition, in milliseconds.
    #[arg(long, default_value_t = 60)]
    pub rep_ms: u64,
}

/// Arguments of the hidden `bench-rank` role (what each rank of the job runs).
#[derive(Args, Debug)]
pub struct RankArgs {
    #[arg(value_enum)]
    kernel: Kernel,
    #[arg(long)]
    max_size: usize,
    #[arg(long)]
    reps: usize,
    #[arg(long)]
    rep_ms: u64,
}

fn opts(kernel: Kernel, max_size: usize, reps: usize, rep_ms: u64) -> MicroOpts {
    let secs = rep_ms as f64 / 1000.0;
    match kernel {
        Kernel::Rate => MicroOpts {
            sizes: vec![8],
            reps,
            rep_seconds: secs,
        },
        _ => MicroOpts::powers_of_two(max_size, reps, secs),
    }
}

/// The rank side: run the kernel, print records on rank 0.
pub fn rank_main(a: RankArgs) -> i32 {
    let run = || -> Result<Vec<Record>, kumi::Error> {
        let universe = kumi::init()?;
        let w = universe.world();
        let o = opts(a.kernel, a.max_size, a.reps, a.rep_ms);
        match a.kernel {
            Kernel::Pingpong => kumi_bench::pingpong(&w, &o),
            Kernel::Bw => kumi_bench::bandwidth(&w, &o, 64),
            Kernel::Rate => kumi_bench::rate(&w, &o, 64),
            Kernel::Floor => Ok(Vec::new()),
        }
    };
    match run() {
        Ok(records) => {
            for r in records {
                println!("{}", r.to_json());
            }
            0
        }
        Err(e) => {
            eprintln!("kumi bench: {e}");
            1
        }
    }
}

/// `kumi bench ...`
pub fn main(a: BenchArgs) -> i32 {
    let (reps, rep_ms, max_size) = if a.quick {
        (3, 15, a.max_size.min(1 << 20))
    } else {
        (a.reps.max(1), a.rep_ms.max(1), a.max_size)
    };
    let records = match a.kernel {
        Kernel::Floor => floor_records(a.quick),
        k => match run_job(k, a.np, max_size, reps, rep_ms) {
            Ok(r) => r,
            Err(code) => return code,
        },
    };
    if a.json {
        for r in &records {
            println!("{}", r.to_json());
        }
    } else {
        print_table(&records);
    }
    0
}

fn floor_records(quick: bool) -> Vec<Record> {
    let scale = if quick { 1 } else { 5 };
    let rec = |size: usize, metric: &str, value: f64| Record {
        bench: "floor".into(),
        np: 1,
        size,
        metric: metric.into(),
        value,
    };
    let lat: Vec<f64> = (0..5)
        .map(|_| floor::cacheline_half_rtt_us(200_000 * scale))
        .collect();
    let bw1: Vec<f64> = (0..5)
        .map(|_| floor::memcpy_mbps(1 << 20, 500 * scale as usize))
        .collect();
    let bw64: Vec<f64> = (0..5)
        .map(|_| floor::memcpy_mbps(64 << 20, 4 * scale as usize))
        .collect();
    vec![
        rec(64, "latency_us", median(lat)),
        rec(1 << 20, "bandwidth_MBps", median(bw1)),
        rec(64 << 20, "bandwidth_MBps", median(bw64)),
    ]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn run_job(
    kernel: Kernel,
    np: u32,
    max_size: usize,
    reps: usize,
    rep_ms: u64,
) -> Result<Vec<Record>, i32> {
    let me = std::env::current_exe().map_err(|e| {
        eprintln!("kumi bench: cannot find the kumi executable: {e}");
        1
    })?;
    let name = kernel
        .to_possible_value()
        .expect("named")
        .get_name()
        .to_string();
    let mut child = Command::new(&me)
        .args(["run", "-n", &np.to_string(), "--"])
        .arg(&me)
        .args([
            "bench-rank",
            &name,
            "--max-size",
            &max_size.to_string(),
            "--reps",
            &reps.to_string(),
        ])
        .args(["--rep-ms", &rep_ms.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| {
            eprintln!("kumi bench: cannot start the benchmark job: {e}");
            1
        })?;
    let mut records = Vec::new();
    let out = BufReader::new(child.stdout.take().expect("piped"));
    for line in out.lines().map_while(Result::ok) {
        match Record::from_json(&line) {
            Some(r) => records.push(r),
            None => println!("{line}"),
        }
    }
    let status = child.wait().map_err(|e| {
        eprintln!("kumi bench: {e}");
        1
    })?;
    if !status.success() {
        eprintln!("kumi bench: the benchmark job failed ({status})");
        return Err(status.code().unwrap_or(1).max(1));
    }
    Ok(records)
}

fn human_size(b: usize) -> String {
    match b {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

fn print_table(records: &[Record]) {
    let Some(first) = records.first() else {
        println!("(no results)");
        return;
    };
    println!("{} (np={})", first.bench, first.np);
    println!("{:>10}  {:>16}  metric", "size", "value");
    for r in records {
        println!(
            "{:>10}  {:>16.3}  {}",
            human_size(r.size),
            r.value,
            r.metric
        );
    }
}
