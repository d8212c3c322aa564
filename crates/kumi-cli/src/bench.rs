//! `kumi bench`: measure this machine the way the papers did.
//!
//! `kumi bench pingpong|bw|rate|ring` starts a kumi job whose ranks are this same
//! `kumi` executable in its hidden `bench-rank` role; rank 0 prints one JSON record
//! per figure, which this command collects and shows as a table (or passes on with
//! `--json`). `kumi bench floor` measures the hardware's own limits in-process.
//!
//! `--vs mpich,openmpi` builds the repository's C twin of the micro-benchmarks
//! (`crates/kumi-bench/c/micro.c`, embedded in this binary) with each reference's
//! own compiler wrapper and runs kumi and the references alternately, several
//! rounds, in one invocation: only same-run ratios mean anything on a shared,
//! noisy machine.

use crate::comparison::{human_size, median, Comparison};
use clap::{Args, ValueEnum};
use kumi_bench::figure::Figure;
use kumi_bench::{floor, MicroOpts, Record};
use kumi_transport::cma;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const EXAMPLES: &str = "\
EXAMPLES:
    kumi bench pingpong                 latency 0 B .. 4 MiB between 2 ranks, as a table
    kumi bench bw --json                streaming bandwidth, one JSON object per line
    kumi bench rate                     8-byte message rate, 64 messages in flight
    kumi bench floor                    cache-line round trip and memcpy bandwidth
    kumi bench pingpong --quick         a fast, rougher pass
    kumi bench ring -n 8                token around 8 ranks (oversubscribed on 2 cores)
    kumi bench pingpong --vs mpich,openmpi
                                        kumi beside MPICH and Open MPI, alternating

OUTPUT:
    Each figure is the median of --reps timed repetitions of about --rep-ms
    milliseconds each. latency_us is half of one round trip; bandwidth_MBps is
    10^6 bytes per second; msg_rate_Mps is millions of messages per second.
    With --json every line is {\"bench\", \"np\", \"size\", \"metric\", \"value\"}.

    With --vs, every side runs --rounds times, alternating (kumi, refs, kumi, ...),
    and the table shows the median of the rounds for each side and the ratio
    kumi/reference: the median of the rounds' own ratios, each taken between
    two runs of the same round, seconds apart (a machine whose speed changes
    between rounds moves both sides of a round alike). For latency_us a ratio
    below 1 means kumi is faster; for bandwidth_MBps and msg_rate_Mps a ratio
    above 1 means kumi is faster. With --json, each reference's lines also
    carry that \"ratio\". A note under the table says when some side's rounds
    of one figure differ by more than 2x (the machine changed speed, or that
    side is erratic there). The references run the C twin built with
    mpicc.mpich / mpicc.openmpi (apt-get install mpich libmpich-dev
    openmpi-bin libopenmpi-dev).

APPS:
    kumi bench apps -n 2 ~/npb-mpich/bin ~/npb-openmpi/bin
    kumi bench apps -n 4 --ops is.A,cg.A --rounds 5 --out results DIR...

    Runs the programs of public benchmarks' builds it finds in the BUILD_DIRs
    (NPB's <code>.<class>.x, Himeno's bmt, HPL's xhpl with its HPL.dat, OSU's
    osu_*), never downloading or building anything. Which stack runs which
    file is read from the file: a program linked to MPICH's libraries runs
    on MPICH (mpiexec.mpich) and, unchanged, on kumi (kumi run, kumi's
    library first on the library path) unless a build made with kumi's
    wrappers is given too; one linked to Open MPI's runs on Open MPI. Each
    round runs every side once, the order flipped every round; a run counts
    only if it passed the program's own check (NPB's Verification =
    SUCCESSFUL, HPL's residual checks, a finite Himeno residual), and a
    failed or timed-out run (--timeout) is reported and makes the exit
    status 1. --ops picks programs by name (is.A, hpl, osu_allreduce);
    --vs limits the references; --out DIR writes apps-np<N>.jsonl for
    `kumi report`.

STARTUP:
    kumi bench startup -n 256 --vs mpich,openmpi --rounds 3
    scripts/bench-hosts.sh kumi bench startup -n 16 --vs mpich,openmpi

    Builds a C program that calls MPI_Init, MPI_Barrier and MPI_Finalize with
    kumi's wrapper and each reference's, and times each stack's launcher
    (kumi run, mpiexec.mpich, mpiexec.openmpi) from its start to the first
    barrier passed (rank 0's clock, the same machine's) and to its exit, in
    seconds, rounds alternating. With --hosts (scripts/bench-hosts.sh gives
    namespace hosts) the ranks are spread over them. A run that fails or
    goes past --timeout (1800 s) is ended and named; its round still counts
    to the first barrier if every side passed it (the ratios pair the sides
    round by round), the other rounds go on, and the exit status is 1.";

/// Which benchmark to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Kernel {
    /// Half round-trip latency between two ranks, 0 B to --max-size.
    Pingpong,
    /// Streaming bandwidth from rank 0 to rank 1 (windows of 64 messages).
    Bw,
    /// Small-message rate (8 B, 64 in flight).
    Rate,
    /// An 8-byte token around all ranks: time per hop (try -n 8 on 2 cores).
    Ring,
    /// CPU share of a rank blocked in a receive for --rep-ms milliseconds.
    Idle,
    /// The hardware floor: cache-line handoff between two cores, memcpy bandwidth.
    Floor,
    /// Suite: latency/bandwidth 0 B..4 MiB, Hockney fit, S-3000 patterns 1 and 2,
    /// collective latencies.
    Micro,
    /// Suite: LU with partial pivoting (block-cyclic, lookahead, fast DGEMM):
    /// GFLOPS, efficiency vs the same-run DGEMM peak, N_1/2 (--size N1,N2,...).
    Lu,
    /// Suite: Himeno benchmark (--size XS, S, M, L), MFLOPS, gosa checked.
    Himeno,
    /// Suite: NPB CG (--size S, W, A), Mop/s, zeta verified.
    Cg,
    /// Suite: NPB IS (--size S, W, A), Mop/s, full verification.
    Is,
    /// Suite: red/black SOR, ranks x --threads (--size grid side).
    Sor,
    /// Suite: knight's tour counting from a task pool, by messages and on the DSM's task queue (--size board side; 6 is DSE's 6x6 from a corner).
    Knights,
    /// Suite: 2-D DCT in 8x8/16x16/32x32 blocks (--size image side), speed-up, by messages and on a page-shared DSM segment.
    Dct,
    /// Suite: 64x64 matrix to the 32nd power with a barrier per step.
    Matpow,
    /// Suite: the NPB kernels (cg, is, mg) at --size class.
    Npb,
    /// Suite: --kernel K at 1..-n ranks, speed-up and Amdahl's serial fraction.
    Scaling,
    /// The whole suite into --out DIR (default kumi-results); see `kumi report`.
    All,
    /// Collectives: every one (--ops to choose), 8 B to --max-size per rank, through
    /// the Rust API (and the C ABI with --vs); records carry an "op" field.
    Coll,
    /// fetch_add on one hot counter, combining modes none/level1/level2
    /// (records carry a "mode" field).
    Hotspot,
    /// Suite: NPB MG (--size S, W, A), Mop/s, residual norm verified.
    Mg,
    /// Distributed shared memory between ranks 0 and 1 beside kumi's own
    /// ping-pong, same run: 8-byte read and write_sync against an 8-byte
    /// round trip, a remote page fault against a 4 KiB round trip, and
    /// in-host access against plain memory (records carry an "op" field).
    Dsm,
    /// Public benchmarks' own binaries (NPB, Himeno, HPL, OSU) found in the
    /// BUILD_DIRs, on kumi and on MPICH and Open MPI, alternating, each run's
    /// verification checked (see "APPS" below).
    Apps,
    /// Coordinated checkpoints: seconds and GB/s per checkpoint, 1 MiB to
    /// --max-size (1 GiB) per rank, beside dd conv=fsync on the same disk
    /// (--dir), and the time from a rank's death to the restarted job
    /// computing again.
    Checkpoint,
    /// Job start-up: from the launch command to the first MPI_Barrier passed
    /// and to the exit of a program that does nothing else, at -n ranks, on
    /// kumi and (--vs) MPICH and Open MPI, alternating (see "STARTUP" below).
    Startup,
}

/// Arguments of `kumi bench`.
#[derive(Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct BenchArgs {
    /// The benchmark.
    #[arg(value_enum)]
    pub kernel: Kernel,
    /// apps: the directories of the benchmarks' builds (searched a few
    /// levels deep).
    #[arg(value_name = "BUILD_DIR")]
    pub builds: Vec<std::path::PathBuf>,
    /// Number of ranks (the figures are between ranks 0 and 1; others idle).
    #[arg(short = 'n', long = "np", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub np: u32,
    /// Print one JSON object per line instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Fewer sizes, repetitions and shorter runs: a rough figure in seconds.
    #[arg(long)]
    pub quick: bool,
    /// Largest message size in bytes (pingpong, bw, coll) [default: 4194304;
    /// coll: 8388608].
    #[arg(long)]
    pub max_size: Option<usize>,
    /// Timed repetitions per size; the median is reported [default: 5; coll: 3].
    #[arg(long)]
    pub reps: Option<usize>,
    /// Target length of one repetition, in milliseconds [default: 60; coll: 10].
    #[arg(long)]
    pub rep_ms: Option<u64>,
    /// coll: only these operations (comma-separated; default: all of them:
    /// barrier, bcast, reduce, allreduce, reduce_scatter_block, reduce_scatter,
    /// scan, exscan, gather(v), scatter(v), allgather(v), alltoall(v/w),
    /// neighbor_allgather, neighbor_alltoall, and the nonblocking forms of
    /// each: ibarrier, ibcast, ireduce, iallreduce, ireduce_scatter_block,
    /// ireduce_scatter, iscan, iexscan, igather(v), iscatter(v),
    /// iallgather(v), ialltoall(v/w), ineighbor_allgather, ineighbor_alltoall;
    /// the neighbourhood collectives on a periodic ring of every rank;
    /// alltoallw and ialltoallw only through the C twin, the Rust API having
    /// no form of them).
    #[arg(long, value_delimiter = ',')]
    pub ops: Vec<String>,
    /// Also run the C twin on these reference MPI stacks, alternating with kumi
    /// (pingpong, bw, rate, ring, coll). Each result is checked; a collective
    /// a reference gets wrong (Open MPI 4.1's ineighbor_alltoall at np=2) is
    /// left out of its column from that size on, with a note, and the run
    /// goes on.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub vs: Vec<Reference>,
    /// Run the job across these hosts (as `kumi run --hosts`, e.g. h1:1,h2:1);
    /// with --vs the references get the same hosts.
    #[arg(long)]
    pub hosts: Option<String>,
    /// Remote shell for --hosts (as `kumi run --rsh`; references use it too).
    #[arg(long)]
    pub rsh: Option<String>,
    /// With --vs and apps: how many alternating rounds per side (medians are
    /// reported) [default: 5; apps: 3].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: Option<u32>,
    /// apps, startup: end a run that takes longer than this many seconds
    /// (it counts as failed).
    #[arg(long, value_name = "SECS", default_value_t = 1800)]
    pub timeout: u64,
    /// checkpoint: a directory on the disk to measure [default: ./kumi-ckpt-bench].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
    /// Options of the suite kernels.
    #[command(flatten)]
    pub suite: crate::suite::SuiteOpts,
}

impl BenchArgs {
    /// `--max-size`, or the kernel's default.
    pub fn max_size(&self) -> usize {
        self.max_size.unwrap_or(if self.kernel == Kernel::Coll {
            8 << 20
        } else {
            4 << 20
        })
    }

    /// `--reps`, or the kernel's default (at least 1).
    pub fn reps(&self) -> usize {
        self.reps
            .unwrap_or(if self.kernel == Kernel::Coll { 3 } else { 5 })
            .max(1)
    }

    /// `--rounds`, or the kernel's default.
    pub fn rounds(&self) -> u32 {
        self.rounds
            .unwrap_or(if self.kernel == Kernel::Apps { 3 } else { 5 })
    }

    /// `--rep-ms`, or the kernel's default (at least 1): `coll` measures
    /// hundreds of figures, so each gets less time.
    pub fn rep_ms(&self) -> u64 {
        self.rep_ms
            .unwrap_or(if self.kernel == Kernel::Coll { 10 } else { 60 })
            .max(1)
    }
}

/// How each figure of a job is measured.
#[derive(Clone, Debug)]
struct Plan {
    max_size: usize,
    reps: usize,
    rep_ms: u64,
    /// coll's operations (empty: all).
    ops: Vec<String>,
}

/// A reference MPI stack to compare with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Reference {
    /// Debian's MPICH (mpicc.mpich, mpiexec.mpich).
    Mpich,
    /// Debian's Open MPI (mpicc.openmpi, mpiexec.openmpi).
    Openmpi,
    /// The same C twin on kumi itself, through kumi's libmpi.so.12 (`kumi cc`,
    /// `kumi run`); added automatically to every --vs run when the library is
    /// installed beside this kumi.
    KumiC,
    /// The same on kumi with its library linked into the program (`kumi cc
    /// -static-mpi`); added automatically when `libmpi.a` is beside this kumi.
    KumiCStatic,
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
    #[arg(long, value_delimiter = ',')]
    ops: Vec<String>,
    /// checkpoint: the restart probe, with this file for the time of death.
    #[arg(long)]
    probe: Option<std::path::PathBuf>,
    #[command(flatten)]
    suite: crate::suite::RankOpts,
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
    if let Some(name) = crate::suite::name(a.kernel) {
        return crate::suite::rank(name, &a.suite, a.reps, a.rep_ms, a.max_size);
    }
    let run = || -> Result<Vec<Record>, kumi::Error> {
        let universe = kumi::init()?;
        let w = universe.world();
        let o = opts(a.kernel, a.max_size, a.reps, a.rep_ms);
        match a.kernel {
            Kernel::Pingpong => kumi_bench::pingpong(&w, &o),
            Kernel::Bw => kumi_bench::bandwidth(&w, &o, 64),
            Kernel::Rate => kumi_bench::rate(&w, &o, 64),
            Kernel::Ring => kumi_bench::ring(&w, &o),
            Kernel::Idle => kumi_bench::idle(&w, a.rep_ms as f64 / 1000.0),
            Kernel::Floor => Ok(Vec::new()),
            Kernel::Checkpoint => match &a.probe {
                Some(died) => kumi_bench::checkpoint::restart_probe(&universe, &w, died),
                None => kumi_bench::checkpoint::cost(&universe, &w, a.max_size, a.reps),
            },
            Kernel::Coll | Kernel::Hotspot | Kernel::Dsm => {
                let rep_s = a.rep_ms as f64 / 1000.0;
                let labeled = match a.kernel {
                    Kernel::Coll => kumi_bench::coll::run(&w, a.max_size, a.reps, rep_s, &a.ops)?,
                    Kernel::Dsm => kumi_bench::dsm::run(&w, a.reps, rep_s)?,
                    _ => kumi_bench::hotspot::run(&w, (a.rep_ms as usize * 20).max(50))?,
                };
                if w.rank() == 0 {
                    for l in labeled {
                        println!("{}", l.to_json());
                    }
                }
                Ok(Vec::new())
            }
            // Handled by crate::suite above.
            Kernel::Micro
            | Kernel::Lu
            | Kernel::Himeno
            | Kernel::Cg
            | Kernel::Is
            | Kernel::Sor
            | Kernel::Knights
            | Kernel::Dct
            | Kernel::Matpow
            | Kernel::Npb
            | Kernel::Scaling
            | Kernel::All
            | Kernel::Mg => Ok(Vec::new()),
            // Runs other programs, never as a rank.
            Kernel::Apps | Kernel::Startup => Ok(Vec::new()),
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

/// Where benchmark jobs run (`--hosts`, `--rsh`), for kumi and the references.
#[derive(Debug, Default)]
struct Placement {
    hosts: Option<String>,
    rsh: Option<String>,
}

static PLACEMENT: std::sync::OnceLock<Placement> = std::sync::OnceLock::new();

fn placement() -> &'static Placement {
    PLACEMENT.get_or_init(Placement::default)
}

/// `kumi bench ...`
pub fn main(a: BenchArgs) -> i32 {
    let _ = PLACEMENT.set(Placement {
        hosts: a.hosts.clone(),
        rsh: a.rsh.clone(),
    });
    if a.kernel == Kernel::Checkpoint {
        return crate::ckbench::main(&a);
    }
    if a.kernel == Kernel::Apps {
        return crate::apps::main(&a);
    }
    if a.kernel == Kernel::Startup {
        return crate::startup::main(&a);
    }
    if !a.builds.is_empty() {
        eprintln!("kumi bench: build directories are for apps only");
        return 2;
    }
    if crate::suite::name(a.kernel).is_some() && a.vs.is_empty() {
        return crate::suite::main(&a);
    }
    if a.np < 2 && a.kernel != Kernel::Floor {
        eprintln!("kumi bench: this benchmark needs at least 2 ranks (-n 2)");
        return 2;
    }
    if let Some(bad) = a
        .ops
        .iter()
        .find(|o| !kumi_bench::coll::OPS.contains(&o.as_str()))
    {
        eprintln!(
            "kumi bench: --ops: no operation {bad:?}; the operations are {}",
            kumi_bench::coll::OPS.join(", ")
        );
        return 2;
    }
    if !a.vs.is_empty() && a.kernel == Kernel::Dsm {
        eprintln!(
            "kumi bench: dsm compares kumi's shared memory with kumi's own messages in one \
             run; --vs does not apply (the references have no DSM)"
        );
        return 2;
    }
    if !a.ops.is_empty() && a.kernel != Kernel::Coll {
        eprintln!("kumi bench: --ops applies to coll only");
        return 2;
    }
    let plan = Plan {
        max_size: if a.quick {
            a.max_size().min(1 << 20)
        } else {
            a.max_size()
        },
        reps: if a.quick { 3 } else { a.reps() },
        rep_ms: if a.quick {
            a.rep_ms().min(15)
        } else {
            a.rep_ms()
        },
        ops: a.ops.clone(),
    };
    if !a.vs.is_empty() {
        return compare(&a, &plan);
    }
    let records = match a.kernel {
        Kernel::Floor => floor_records(a.quick),
        k => match run_job(k, a.np, &plan) {
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

/// The C twin, built with one reference's compiler wrapper in a private
/// temporary directory that is removed when this value is dropped.
pub(crate) struct Twin {
    dir: std::path::PathBuf,
    pub(crate) exe: std::path::PathBuf,
    pub(crate) reference: Reference,
}

impl Drop for Twin {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const TWIN_SOURCE: &str = include_str!("../../kumi-bench/c/micro.c");

impl Reference {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Reference::Mpich => "mpich",
            Reference::Openmpi => "openmpi",
            Reference::KumiC => "kumi-c",
            Reference::KumiCStatic => "kumi-c-static",
        }
    }

    /// The compiler command (program and leading arguments).
    fn compiler(self) -> Vec<std::ffi::OsString> {
        match self {
            Reference::KumiC | Reference::KumiCStatic => {
                let me = std::env::current_exe().unwrap_or_else(|_| "kumi".into());
                let mut v = vec![me.into_os_string(), "cc".into()];
                if self == Reference::KumiCStatic {
                    v.push("-static-mpi".into());
                }
                v
            }
            r => vec![r.tools().0.into()],
        }
    }

    pub(crate) fn tools(self) -> (&'static str, &'static str) {
        match self {
            Reference::Mpich => ("mpicc.mpich", "mpiexec.mpich"),
            Reference::Openmpi => ("mpicc.openmpi", "mpiexec.openmpi"),
            Reference::KumiC => ("kumi cc", "kumi run"),
            Reference::KumiCStatic => ("kumi cc -static-mpi", "kumi run"),
        }
    }

    fn build(self) -> Result<Twin, String> {
        self.build_c("micro", TWIN_SOURCE)
    }

    /// C program `name` (its source `source`) built with this stack's
    /// compiler wrapper into a private directory.
    pub(crate) fn build_c(self, name: &str, source: &str) -> Result<Twin, String> {
        let cc_cmd = self.compiler();
        let cc = self.tools().0;
        let dir = std::env::temp_dir().join(format!(
            "kumi-bench-{}-{}-{name}",
            std::process::id(),
            self.name()
        ));
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let twin = Twin {
            exe: dir.join(name),
            dir,
            reference: self,
        };
        let src = twin.dir.join(format!("{name}.c"));
        std::fs::write(&src, source).map_err(|e| format!("cannot write {}: {e}", src.display()))?;
        let out = Command::new(&cc_cmd[0])
            .args(&cc_cmd[1..])
            .args(["-O2", "-Wno-stringop-overflow", "-o"])
            .arg(&twin.exe)
            .arg(&src)
            .output()
            .map_err(|e| {
                format!("cannot run {cc} ({e}); install the reference: apt-get install mpich libmpich-dev openmpi-bin libopenmpi-dev")
            })?;
        if !out.status.success() {
            return Err(format!(
                "{cc} failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(twin)
    }
}

impl Reference {
    /// The command that starts `np` ranks of a program on this stack, on the
    /// `--hosts` of this run: `kumi run`, `mpiexec.mpich` or `mpiexec.openmpi`
    /// with what each needs here; the program and its arguments follow. A
    /// reference sees none of kumi's variables nor kumi's libraries.
    pub(crate) fn launcher(self, np: u32) -> Result<Command, String> {
        let (_, mpiexec) = self.tools();
        let mut c = match self {
            Reference::KumiC | Reference::KumiCStatic => {
                let mut c = Command::new(
                    std::env::current_exe().map_err(|e| format!("cannot find kumi: {e}"))?,
                );
                c.arg("run");
                if let Some(h) = &placement().hosts {
                    c.args(["--hosts", h]);
                }
                if let Some(r) = &placement().rsh {
                    c.args(["--rsh", r]);
                }
                c
            }
            _ => Command::new(mpiexec),
        };
        if self == Reference::Openmpi {
            // SAFETY: getuid has no preconditions and cannot fail.
            if unsafe { libc::getuid() } == 0 {
                c.arg("--allow-run-as-root");
            }
            c.arg("--oversubscribe");
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            // Oversubscribed, or "hosts" that are namespaces sharing this
            // machine's cores (Open MPI would bind every one to core 0, see
            // ANCHORS.md): do not bind.
            if np as usize > cores || placement().hosts.is_some() {
                c.args(["--bind-to", "none"]);
            }
        }
        if let Some(hosts) = &placement().hosts {
            // The "hosts" may be namespaces of one machine, which still share
            // /dev/shm: left alone, MPICH's UCX finds out and talks through
            // shared memory (0.9 us "across hosts"). Pin both references to
            // TCP, which is what kumi is compared with here.
            match self {
                Reference::Mpich => {
                    c.args(["-genv", "UCX_TLS", "tcp,self"]);
                    c.args(["-hosts", hosts]);
                    if let Some(rsh) = &placement().rsh {
                        c.args(["-launcher", "ssh", "-launcher-exec", rsh]);
                    }
                }
                Reference::KumiC | Reference::KumiCStatic => {}
                Reference::Openmpi => {
                    c.args(["--mca", "pml", "ob1", "--mca", "btl", "tcp,self"]);
                    c.args(["--host", hosts]);
                    if let Some(rsh) = &placement().rsh {
                        c.args(["--mca", "plm_rsh_agent", rsh]);
                    }
                }
            }
        }
        c.args(["-n", &np.to_string()]);
        // A reference must not see this process's kumi variables (kumi-c keeps
        // them, as kumi's Rust side does).
        if !matches!(self, Reference::KumiC | Reference::KumiCStatic) {
            for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("KUMI_")) {
                c.env_remove(k);
            }
            // Nor kumi's own libmpi.so.12/libmpich.so.12 (same sonames as
            // MPICH's) through LD_LIBRARY_PATH, as under `cargo test`, which
            // puts kumi's build directory there: the MPICH twin would load
            // kumi's library and run as singletons.
            if let (Some(lp), Some(home)) = (
                std::env::var_os("LD_LIBRARY_PATH"),
                std::env::current_exe()
                    .ok()
                    .and_then(|e| e.parent().and_then(|d| d.canonicalize().ok())),
            ) {
                let keep: Vec<_> = std::env::split_paths(&lp)
                    .filter(|d| !d.canonicalize().is_ok_and(|d| d.starts_with(&home)))
                    .collect();
                match std::env::join_paths(keep) {
                    Ok(v) if !v.is_empty() => c.env("LD_LIBRARY_PATH", v),
                    _ => c.env_remove("LD_LIBRARY_PATH"),
                };
            }
        }
        Ok(c)
    }
}

impl Twin {
    /// One run of the twin: its figures, and what it left out and why (a
    /// reference stack's wrong result for one collective costs only that
    /// collective's figures; kumi's own C library's fails the run).
    fn run(
        &self,
        kernel: &str,
        np: u32,
        plan: &Plan,
    ) -> Result<(Vec<Figure>, Vec<String>), String> {
        let (_, mpiexec) = self.reference.tools();
        let mut c = self.reference.launcher(np)?;
        c.arg(&self.exe).arg(kernel);
        c.args([
            plan.max_size.to_string(),
            plan.reps.to_string(),
            plan.rep_ms.to_string(),
        ]);
        if kernel == "coll" {
            c.arg(if plan.ops.is_empty() {
                "all".into()
            } else {
                plan.ops.join(",")
            });
            if !matches!(self.reference, Reference::KumiC | Reference::KumiCStatic) {
                c.arg("leave-out-wrong");
            }
        }
        let out = c
            .output()
            .map_err(|e| format!("cannot run {mpiexec}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{mpiexec} failed ({}):\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        // Figures keep the twin's own fields ("op" for coll).
        let figures = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(Figure::from_json)
            .collect();
        let left_out = String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| l.starts_with("micro coll:"))
            .map(String::from)
            .collect();
        Ok((figures, left_out))
    }
}

/// `--vs`: kumi and the references, alternating, `rounds` times each.
fn compare(a: &BenchArgs, plan: &Plan) -> i32 {
    if !matches!(
        a.kernel,
        Kernel::Pingpong | Kernel::Bw | Kernel::Rate | Kernel::Ring | Kernel::Coll
    ) {
        eprintln!("kumi bench: --vs applies to pingpong, bw, rate, ring and coll");
        return 2;
    }
    let name = a
        .kernel
        .to_possible_value()
        .expect("named")
        .get_name()
        .to_string();
    let mut twins = Vec::new();
    let mut refs = a.vs.clone();
    let beside = |f: &str| {
        std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(|d| d.join(f)))
            .is_some_and(|l| l.exists())
    };
    for (r, lib) in [
        (Reference::KumiC, "libmpi.so.12"),
        (Reference::KumiCStatic, "libmpi.a"),
    ] {
        if !refs.contains(&r) && beside(lib) {
            refs.push(r);
        }
    }
    for &r in &refs {
        match r.build() {
            Ok(t) => twins.push(t),
            Err(e) => {
                eprintln!("kumi bench: cannot build the C twin for {}: {e}", r.name());
                return 1;
            }
        }
    }
    let labels = std::iter::once("kumi")
        .chain(twins.iter().map(|t| t.reference.name()))
        .map(String::from)
        .collect();
    let mut cmp = Comparison::new(&name, a.np, labels);
    let mut left_out = std::collections::BTreeSet::new();
    for round in 0..a.rounds() {
        if !a.json {
            eprint!("\rkumi bench: round {}/{}", round + 1, a.rounds());
        }
        for side in round_order(cmp.labels.len(), round) {
            let recs = if side == 0 {
                run_job(a.kernel, a.np, plan).map_err(|code| format!("kumi job failed ({code})"))
            } else {
                twins[side - 1].run(&name, a.np, plan).map(|(recs, why)| {
                    let label = &cmp.labels[side];
                    left_out.extend(why.into_iter().map(|w| format!("{label}: {w}")));
                    recs
                })
            };
            match recs {
                Ok(recs) => {
                    for r in recs {
                        let key = (r.get("op").unwrap_or_default(), r.size);
                        cmp.add(side, key, &r.metric, r.value);
                    }
                }
                Err(e) => {
                    eprintln!("\nkumi bench: {e}");
                    return 1;
                }
            }
        }
    }
    if a.json {
        for l in cmp.json_lines() {
            println!("{l}");
        }
    } else {
        eprintln!();
        print!("{}", cmp.table(&name));
    }
    for w in &left_out {
        eprintln!("kumi bench: {w}");
    }
    0
}

/// The order of the sides in one round: who goes first alternates, so drift
/// in the machine's speed is shared.
pub(crate) fn round_order(sides: usize, round: u32) -> Vec<usize> {
    let mut order: Vec<usize> = (0..sides).collect();
    if round % 2 == 1 {
        order.reverse();
    }
    order
}

fn floor_records(quick: bool) -> Vec<Figure> {
    let scale = if quick { 1 } else { 5 };
    let rec = |size: usize, metric: &str, value: f64| Figure {
        extra: Vec::new(),
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
    let mut out = vec![
        rec(64, "latency_us", median(lat)),
        rec(1 << 20, "bandwidth_MBps", median(bw1)),
        rec(64 << 20, "bandwidth_MBps", median(bw64)),
    ];
    // What `KUMI_SINGLE_COPY=auto` measures when a job starts, the median
    // of a few such measurements (`cma::Probe`), and what it chooses.
    let probes: Vec<cma::Probe> = (0..5 * scale)
        .filter_map(|_| cma::Probe::measure().ok())
        .collect();
    let mbps = |d: std::time::Duration| cma::Probe::gbps(d) * 1e3;
    match probes.len() {
        0 => eprintln!(
            "kumi bench floor: process_vm_readv is refused here: KUMI_SINGLE_COPY=auto chooses off"
        ),
        n => {
            let of = |f: fn(&cma::Probe) -> std::time::Duration| {
                median(probes.iter().map(|p| mbps(f(p))).collect())
            };
            let (copy, local, read) = (of(|p| p.copy), of(|p| p.local), of(|p| p.read));
            let mut r = rec(cma::PROBE_BYTES, "single_copy_MBps", read);
            r.extra.push(("copy_MBps".into(), format!("{copy:.0}")));
            r.extra
                .push(("local_copy_MBps".into(), format!("{local:.0}")));
            out.push(r);
            let pays = probes.iter().filter(|p| p.single_copy_pays()).count();
            eprintln!(
                "kumi bench floor: {} KiB blocks: a ring's copies across cores {:.1} GB/s, \
                 within a core {:.1} GB/s, a process_vm_readv of a block another core wrote \
                 {:.1} GB/s. KUMI_SINGLE_COPY=auto chooses {} ({pays} of {n} measurements \
                 said on: on where a read takes less than three of the copies across cores)",
                cma::PROBE_BYTES >> 10,
                copy / 1e3,
                local / 1e3,
                read / 1e3,
                if 2 * pays > n { "on" } else { "off" },
            );
        }
    }
    out
}

fn run_job(kernel: Kernel, np: u32, plan: &Plan) -> Result<Vec<Figure>, i32> {
    let me = std::env::current_exe().map_err(|e| {
        eprintln!("kumi bench: cannot find the kumi executable: {e}");
        1
    })?;
    let name = kernel
        .to_possible_value()
        .expect("named")
        .get_name()
        .to_string();
    let mut run = Command::new(&me);
    run.args(["run", "-n", &np.to_string()]);
    if let Some(h) = &placement().hosts {
        run.args(["--hosts", h]);
    }
    if let Some(r) = &placement().rsh {
        run.args(["--rsh", r]);
    }
    let mut child = run
        .arg("--")
        .arg(&me)
        .args([
            "bench-rank",
            &name,
            "--max-size",
            &plan.max_size.to_string(),
            "--reps",
            &plan.reps.to_string(),
        ])
        .args(["--rep-ms", &plan.rep_ms.to_string()])
        .args(if plan.ops.is_empty() {
            Vec::new()
        } else {
            vec!["--ops".to_string(), plan.ops.join(",")]
        })
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
        // Figures keep the kernel's own fields (e.g. "op", "mode").
        match Figure::from_json(&line) {
            Some(r) => records.push(r),
            None => println!("{line}"),
        }
    }
    finish_job(&mut child, "benchmark")?;
    Ok(records)
}

/// Waits for a benchmark job; a failed job becomes its exit code (at least 1).
pub(crate) fn finish_job(child: &mut std::process::Child, what: &str) -> Result<(), i32> {
    let status = child.wait().map_err(|e| {
        eprintln!("kumi bench: {e}");
        1
    })?;
    if !status.success() {
        eprintln!("kumi bench: the {what} job failed ({status})");
        return Err(status.code().unwrap_or(1).max(1));
    }
    Ok(())
}

fn print_table(records: &[Figure]) {
    let Some(first) = records.first() else {
        println!("(no results)");
        return;
    };
    println!("{} (np={})", first.bench, first.np);
    println!("{:>10}  {:>16}  metric", "size", "value");
    for r in records {
        let extra: Vec<String> = r
            .extra
            .iter()
            .map(|(k, v)| format!("{k}={}", v.trim_matches('"')))
            .collect();
        println!(
            "{:>10}  {:>16.3}  {}  {}",
            human_size(r.size),
            r.value,
            r.metric,
            extra.join(" ")
        );
    }
}
