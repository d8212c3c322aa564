//! `kumi run`: parse the job, run it with kumi-launch, report how it ended.

use clap::Args;
use kumi_core::control::App;
use kumi_launch::hosts::MapBy;
use kumi_launch::policy::TIMEOUT_EXIT;
use kumi_launch::spec::app;
use kumi_launch::supervise::{OnDeadlock, SupervisionConfig, DEADLOCK_EXIT};
use kumi_launch::{checkpoint, Job, JobSpec, Loss, MAX_RANKS};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

const RUN_HELP: &str = "\
EXAMPLES:
    kumi run -n 4 ./my_prog arg
    kumi run -n 8 --tag-output -- ./prog --flag

    kumi run -n 1 ./server : -n 3 -x ROLE=worker ./client   (MPMD, see below)
    kumi run --hosts a:4,b:4 --map-by node -x OMP_NUM_THREADS=2 ./prog

    Everything after the program name is passed to the program, options included:
    `kumi run -n 2 prog --prog-flag` gives --prog-flag to prog. `--` before the
    program also works.

    mpirun and mpiexec (links to kumi) take the options job scripts give MPICH's
    and Open MPI's launchers and run `kumi run`; see `mpirun --help`.

SEVERAL PROGRAMS (MPMD):
    `PROG1 ARGS : -n N2 [-x VAR=VALUE]... [--wdir DIR] PROG2 ARGS : ...` starts N
    ranks of PROG1 (-n), then N2 of PROG2, and so on, as one job: MPI_COMM_WORLD
    spans them all, ranked in that order, and each rank's MPI_APPNUM attribute
    (KUMI_APPNUM) is its program's index from 0. -x and --wdir after a ':' are for
    that program's ranks; before the first program, for all of them. A command
    that starts with ':' (`kumi run -- : -n 1 ./a : -n 3 ./b`) gives the first
    program its own options too.

ENVIRONMENT OF EACH RANK:
    The user's environment passes through, plus:
    KUMI_JOB          job id (j + 10 hex digits), the same for all ranks
    KUMI_RANK         this rank, 0..N-1
    KUMI_SIZE         N
    KUMI_LOCAL_RANK   rank among the ranks on this machine
    KUMI_LOCAL_SIZE   number of ranks on this machine
    KUMI_LOCAL_CORES  cores the launcher may use on this machine (more ranks
                      than this: oversubscribed, which changes how ranks wait,
                      bind and broadcast)
    KUMI_NODE         index of this machine in the job (0)
    KUMI_CONTROL      control socket of the launcher (@name: abstract Unix socket)
    KUMI_SECRET       job secret (hex) to authenticate on the control socket
    KUMI_SHM_FD       inherited file descriptor of the job's shared-memory segment
    KUMI_HOST_RANKS   (multi-host jobs) the global ranks of this host, e.g. 0-3,8
    KUMI_HOST         (multi-host jobs) this host's name as given to --hosts
    KUMI_NET          network the ranks use: iface:NAME, net:A.B.C.D/P or auto

    Read by the ranks: KUMI_NET_TRANSPORT=udp|tcp picks the network transport
    between hosts (default udp, kumi's reliable UDP); KUMI_FORCE_TCP=all (or
    pairs like 0:1,2:3) makes those pairs of ranks talk over the network
    transport even on one host (for tests).

INPUT AND OUTPUT:
    Rank 0 reads kumi's standard input; the other ranks read /dev/null. Output of
    all ranks is forwarded line by line (lines of different ranks never mix; a line
    without a final newline gets one; a line longer than 64 KiB is cut in pieces).

EXIT STATUS:
    0        every rank exited 0
    C        the first rank to fail exited with code C (or called abort with code
             C, clamped to 1..255); the other ranks are stopped (SIGTERM, then
             SIGKILL 300 ms later) and kumi prints one line naming the rank
    128+S    the first rank to fail was killed by signal S (139 for SIGSEGV), or
             kumi itself got SIGINT/SIGTERM/SIGHUP (130/143/129)
    1        a rank opened the control channel and exited 0 without finalizing
    86       kumi found a deadlock and ended the job (see SUPERVISION)
    124      the job ran longer than --timeout and was stopped
    126      the program cannot be executed
    127      the program was not found
    2        usage error

SUPERVISION:
    A rank blocked in a kumi call for more than KUMI_BLOCKED_MS (default 100)
    tells kumi in which call, on which communicator, with which peer and tag, and
    where in the program; it reports its message counters about every second
    while it waits. When blocked ranks can never continue (every rank a wait
    depends on is blocked too, and no message that could end a wait is in flight
    or queued) for --deadlock-timeout seconds, kumi prints which ranks wait in
    what and why, and ends the job with exit code 86 (or, with
    --on-deadlock=report, lets it go on). A rank computing outside kumi is never
    blocked, so a long computation is never reported.

    --stats prints, per rank, the wall time, the time blocked in kumi calls and
    the messages and bytes sent to and arrived from each peer (counted up to
    finalize; the internal messages of collectives are counted apart), then:
      communication fraction = total time blocked / total wall time, all ranks
      serial fraction a = time blocked / wall time, averaged over the ranks: the
        Amdahl-style serial fraction the GAMMA papers report, with the speedup
        Amdahl's law gives for it on N ranks, 1 / (a + (1 - a) / N). Both are
        estimates: time blocked is taken as time not spent in parallel work.

CHECKPOINT AND RESTART:
    kumi run -n 8 --checkpoint-dir ckpt --max-restarts 3 ./solver
    kumi run -n 8 --restart ckpt ./solver

    A program saves its state with kumi's checkpoint calls (C: kumi.h,
    kumi_ckpt_register + kumi_ckpt_save, or kumi_ckpt_due to let kumi keep the
    interval; Rust: kumi::checkpoint). A checkpoint is complete when every
    rank's part is written, flushed and checksummed (CRC-32C) and its manifest
    is committed, atomically, in DIR/ckpt-<epoch>/; the newest --checkpoint-keep
    complete ones stay (every host must see DIR: a shared file system). While
    the job runs, the newest checkpoint retired waits in DIR/spare/ for the
    next one to overwrite its files (cheaper than deleting them and writing
    new ones); the job removes it when it ends.
    --restart DIR resumes the newest complete one, refusing one of another
    program, job size or kumi version with a sentence (exit code 2); a damaged
    or missing part or manifest is named and passed over for an older one.
    --max-restarts N: when a rank dies, fails or aborts, or a host is lost,
    kumi runs the job again from the newest complete checkpoint (from the
    beginning if none is complete yet), leaving lost hosts out, and says so in
    one line; a deadlock, --timeout or Ctrl-C ends the job as without it. The
    exit code is the last run's.

DEBUGGING:
    kumi run -n 4 --debug ./prog          rank 0 under gdb in this terminal
    kumi run -n 4 --debug=2 --debugger 'gdb -q -ex run --args' ./prog
    kumi stacks [JOB]                     every rank's stack, the job goes on
    kumi attach [JOB] RANK [-- GDB OPTIONS]   gdb on a running rank, on its host

    With --debug the debugged rank owns the terminal (Ctrl-C reaches the
    debugger, not kumi) and the other ranks' output is still forwarded; type
    `run` in gdb to start it. A deadlock report carries the stacks of the
    deadlocked ranks when gdb is installed.

MULTIPLE HOSTS:
    kumi run -n 4 --hosts node1:2,node2:2 ./prog
    kumi run -n 16 --hostfile hosts.txt --iface eth1 ./prog
    kumi run -n 4 --hosts a:2,b:2 --rsh 'ip netns exec' ./prog   (see below)

    A host file has one host per line: `node1 slots=4` or `node1:4` (a host
    alone has 1 slot); `#` starts a comment. Ranks fill the hosts' slots in
    order; ranks beyond the slots are dealt round-robin (with a warning). kumi
    starts one agent per host with `RSH HOST 'kumi agent'` (RSH is `ssh` unless
    --rsh says otherwise; the same kumi path must exist on every host) and talks
    to it over the remote shell's input and output. A host named `localhost` (or
    like this machine) runs its ranks directly. Ranks of one host talk through
    shared memory, ranks of different hosts over reliable UDP or TCP
    (KUMI_NET_TRANSPORT; both authenticated with the job secret). If an agent
    or host is lost, the job ends everywhere and kumi names the host. Rank 0's
    standard input is /dev/null unless it runs here.

INSIDE A SLURM ALLOCATION (sbatch, salloc):
    kumi run ./prog    (no options needed)

    Without --hosts or --hostfile, kumi run takes the hosts and their slots from
    the allocation (SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE; node lists such as
    n[1-4,7], counts such as 2(x3),1), -n from SLURM_NTASKS, and starts each
    host's agent with srun (one step of one task per host, sharing the
    allocation) instead of a remote shell (--rsh still chooses one). Programs
    can also be started by srun itself: `srun --mpi=pmi2 ./prog` (see README).

MONITORING:
    kumi top [JOB]    live view of a running job (q quits, the job goes on)
    kumi ps           running jobs of this user
    kumi run --monitor ...   runs the job with `kumi top` in this terminal;
                             the ranks' output shows in a pane of the view
                             and is printed, all of it and in order, when the
                             view closes (q, or the job ended)";

/// Options of `kumi run`.
#[derive(Args, Debug)]
#[command(after_help = RUN_HELP)]
pub struct RunArgs {
    /// Number of ranks to start (default: every slot of --hosts/--hostfile,
    /// or --ppn per host).
    #[arg(short = 'n', long = "np", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=MAX_RANKS as i64))]
    pub size: Option<u32>,

    /// Ranks per host: every host of --hosts/--hostfile gets N slots.
    #[arg(long, alias = "npernode", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=MAX_RANKS as i64))]
    pub ppn: Option<u32>,

    /// Deal ranks to hosts by `slot` (fill each host in turn; also `core`)
    /// or `node` (one rank per host in turn).
    #[arg(long, value_name = "WHAT", default_value = "slot")]
    pub map_by: MapBy,

    /// Bind each rank to a core (`core`), never (`none`), or when a host
    /// has more ranks than cores (`auto`): sets KUMI_BIND for the ranks.
    #[arg(long, value_name = "WHAT", value_parser = ["core", "hwthread", "none", "auto"])]
    pub bind_to: Option<String>,

    /// Set VAR for every rank on every host (VAR alone: this shell's value).
    /// Repeatable.
    #[arg(short = 'x', long = "env", value_name = "VAR[=VALUE]")]
    pub env: Vec<String>,

    /// Working directory of the ranks (default: this one, or the agent's on
    /// another host).
    #[arg(long, alias = "wd", value_name = "DIR")]
    pub wdir: Option<PathBuf>,

    /// End the job (exit code 124) if it runs longer than this.
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,

    /// Prefix every line a rank writes with "[<rank>] ".
    #[arg(long)]
    pub tag_output: bool,

    #[command(flatten)]
    pub supervision: SupervisionArgs,

    /// Show the live monitor (`kumi top`) while the job runs.
    #[arg(long)]
    pub monitor: bool,

    /// Directory of the job's checkpoints (see CHECKPOINT AND RESTART).
    #[arg(long, value_name = "DIR")]
    pub checkpoint_dir: Option<PathBuf>,

    /// Seconds between checkpoints, when the program asks whether one is
    /// due [default: 600].
    #[arg(long, value_name = "SECONDS")]
    pub checkpoint_every: Option<f64>,

    /// Complete checkpoints to keep [default: 2].
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..))]
    pub checkpoint_keep: Option<u32>,

    /// Resume the newest complete checkpoint in DIR (and checkpoint there).
    #[arg(long, value_name = "DIR")]
    pub restart: Option<PathBuf>,

    /// When a rank or a host dies, run the job again from its newest
    /// complete checkpoint, up to N times.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_restarts: u32,

    /// Start rank RANK (default 0) under a debugger in this terminal (see
    /// DEBUGGING).
    #[arg(long, value_name = "RANK", num_args = 0..=1, default_missing_value = "0")]
    pub debug: Option<u32>,

    /// The debugger --debug runs, before the program and its arguments.
    #[arg(
        long,
        value_name = "CMD",
        default_value = "gdb -q --args",
        requires = "debug"
    )]
    pub debugger: String,

    /// Run on these hosts: HOST[:SLOTS],... (see MULTIPLE HOSTS below).
    #[arg(long, value_name = "HOSTS", conflicts_with = "hostfile")]
    pub hosts: Option<String>,

    /// Read the hosts from FILE (`host slots=N` or `host:N` lines).
    #[arg(long, value_name = "FILE")]
    pub hostfile: Option<PathBuf>,

    /// Remote shell that starts the agents: run as `CMD HOST COMMAND-LINE`
    /// [default: ssh; srun inside a Slurm allocation].
    #[arg(long, value_name = "CMD")]
    pub rsh: Option<String>,

    /// Network interface whose address the ranks and kumi use between hosts.
    #[arg(long, value_name = "NAME", conflicts_with = "bind")]
    pub iface: Option<String>,

    /// Network (A.B.C.D/P) or address whose interface the ranks and kumi use.
    #[arg(long, value_name = "NET")]
    pub bind: Option<String>,

    /// The program to run in every rank, then its arguments; `: -n N
    /// [-x VAR[=VALUE]] PROGRAM [ARGS]` adds another program (MPMD).
    #[arg(
        value_name = "PROGRAM [ARGS]",
        required = true,
        num_args = 1..,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub command: Vec<OsString>,
}

/// Deadlock detection and statistics: `kumi run`'s, and the supervisor's of a
/// job `srun` started (`kumi supervise`).
#[derive(Args, Debug, Clone)]
pub struct SupervisionArgs {
    /// Report a deadlock once it has lasted this many seconds (0: never look).
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    pub deadlock_timeout: f64,

    /// On a deadlock: `abort` ends the job with exit code 86; `report` only
    /// prints the report.
    #[arg(long, value_name = "WHAT", default_value = "abort", value_parser = ["abort", "report"])]
    pub on_deadlock: String,

    /// Print per-rank statistics at the end (see SUPERVISION below).
    #[arg(long)]
    pub stats: bool,

    /// Write the statistics as JSON to FILE at the end.
    #[arg(long, value_name = "FILE")]
    pub stats_json: Option<PathBuf>,
}

impl SupervisionArgs {
    /// The launcher's configuration, or why the arguments are wrong.
    pub fn config(&self) -> Result<SupervisionConfig, String> {
        let deadlock = seconds("--deadlock-timeout", self.deadlock_timeout)?;
        Ok(SupervisionConfig {
            deadlock_timeout: (!deadlock.is_zero()).then_some(deadlock),
            on_deadlock: if self.on_deadlock == "report" {
                OnDeadlock::Report
            } else {
                OnDeadlock::Abort
            },
            stats: self.stats,
            stats_json: self.stats_json.clone(),
        })
    }
}

/// `t` seconds of option `what`, checked.
fn seconds(what: &str, t: f64) -> Result<Duration, String> {
    if t.is_finite() && (0.0..=1e6).contains(&t) {
        Ok(Duration::from_secs_f64(t))
    } else {
        Err(format!(
            "{what} {t}: give a number of seconds from 0 to 1000000"
        ))
    }
}

/// Runs the job (again from its newest checkpoint after a failure, as
/// `--max-restarts` allows); returns the exit code.
pub fn main(mut args: RunArgs) -> i32 {
    let usage = |e: String| {
        eprintln!("kumi run: {e}");
        2
    };
    let plan = match checkpoint_plan(&args) {
        Ok(p) => p,
        Err(e) => return usage(e),
    };
    let mut attempt = Attempt::default();
    let mut restarts = 0;
    loop {
        let mut prepared = match job(&args, &attempt) {
            Ok(p) => p,
            Err(e) => return usage(e),
        };
        // A restart runs as many ranks as the first run, wherever they land.
        args.size = args.size.or(prepared.size);
        if let Some(plan) = &plan {
            let start = restarts > 0 || args.restart.is_some();
            let resume = match start {
                true => match checkpoint::resume(&plan.dir, &prepared.identity) {
                    Ok(r) => r,
                    Err(e) if restarts == 0 => return usage(format!("--restart: {e}")),
                    Err(e) => {
                        eprintln!("kumi run: not restarting: {e}");
                        return attempt.last_exit;
                    }
                },
                false => checkpoint::Resume {
                    epochs: Vec::new(),
                    passed: Vec::new(),
                },
            };
            for line in &resume.passed {
                eprintln!("kumi run: passing over checkpoint {line}");
            }
            let from = match resume.epochs.first() {
                Some(e) => format!(
                    "from checkpoint {e} in {}",
                    plan.dir
                        .join(kumi_core::checkpoint::epoch_dir(*e))
                        .display()
                ),
                None => "from the beginning (no complete checkpoint yet)".to_string(),
            };
            match restarts {
                0 if args.restart.is_some() => eprintln!("kumi run: resuming {from}"),
                0 => {}
                n => eprintln!(
                    "kumi run: restart {n} of {}: running the job again {from}{}",
                    args.max_restarts,
                    attempt.where_now()
                ),
            }
            let env = checkpoint::env(plan, &resume, &prepared.identity.program);
            prepared.job = prepared.job.more_env(env);
        } else if restarts > 0 {
            eprintln!(
                "kumi run: restart {restarts} of {}: running the job again from the beginning (no --checkpoint-dir){}",
                args.max_restarts,
                attempt.where_now()
            );
        }
        let outcome = run(prepared);
        attempt.last_exit = outcome.exit_code;
        if outcome.exit_code == 0 || restarts >= args.max_restarts {
            return outcome.exit_code;
        }
        match outcome.loss {
            Loss::None => return outcome.exit_code,
            Loss::Rank => {}
            Loss::Host(h) => attempt.lost.push(h),
        }
        restarts += 1;
    }
}

/// What changes from one run of a job to the next.
#[derive(Default)]
struct Attempt {
    /// Hosts lost by earlier runs, left out of this one.
    lost: Vec<String>,
    /// The exit code of the last run.
    last_exit: i32,
}

impl Attempt {
    fn where_now(&self) -> String {
        match self.lost.as_slice() {
            [] => String::new(),
            l => format!(" without host {}", l.join(", ")),
        }
    }
}

/// The checkpoint options, checked: `None` when the job does not checkpoint.
fn checkpoint_plan(args: &RunArgs) -> Result<Option<checkpoint::Plan>, String> {
    let dir = match (&args.checkpoint_dir, &args.restart) {
        (Some(c), Some(r)) if c != r => {
            return Err(format!(
                "--restart {} and --checkpoint-dir {} differ: a restarted job checkpoints where it resumes from (give one of them)",
                r.display(),
                c.display()
            ))
        }
        (Some(d), _) | (None, Some(d)) => d,
        (None, None) if args.checkpoint_every.is_some() || args.checkpoint_keep.is_some() => {
            return Err(
                "--checkpoint-every and --checkpoint-keep need --checkpoint-dir (or --restart)".into(),
            )
        }
        (None, None) => return Ok(None),
    };
    let every_s = match args.checkpoint_every {
        Some(t) if !(t.is_finite() && (0.0..=1e9).contains(&t)) => {
            return Err(format!(
                "--checkpoint-every {t}: give a number of seconds from 0 to 1e9"
            ))
        }
        t => t,
    };
    let dir = std::path::absolute(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if args.restart.is_some() && !dir.is_dir() {
        return Err(format!("--restart {}: no such directory", dir.display()));
    }
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("--checkpoint-dir {}: {e}", dir.display()))?;
    Ok(Some(checkpoint::Plan {
        dir,
        every_s,
        keep: args.checkpoint_keep,
    }))
}

/// A job ready to run, and whether it shows the monitor.
pub struct Prepared {
    job: Job,
    monitor: bool,
    /// The number of ranks, when the command line or the hosts decided it.
    size: Option<u32>,
    /// What its checkpoints are checked against.
    identity: kumi_core::checkpoint::JobIdentity,
}

/// The job the command line describes, checked (an error is a usage error).
fn job(args: &RunArgs, attempt: &Attempt) -> Result<Prepared, String> {
    let (remote, ntasks) = match remote_spec(args, &attempt.lost)? {
        Some((r, n)) => (Some(r), n),
        None => (None, None),
    };
    let slots: Option<u64> = remote
        .as_ref()
        .map(|r| r.hosts.iter().map(|h| u64::from(h.slots)).sum());
    let explicit = args.command.first().is_some_and(|a| a == ":");
    let size = match (args.size, slots, args.ppn) {
        (Some(n), _, _) => Some(n),
        _ if explicit => None,
        (None, _, None) if ntasks.is_some() => ntasks,
        (None, Some(total), _) => Some(
            u32::try_from(total)
                .ok()
                .filter(|&n| n <= MAX_RANKS)
                .ok_or_else(|| format!("the hosts have {total} slots; give -n"))?,
        ),
        (None, None, p) => p,
    };
    let mut apps = apps(size, &args.command)?;
    for a in apps.iter_mut().filter(|a| a.wdir.is_none()) {
        a.wdir = args
            .wdir
            .as_ref()
            .map(|d| d.as_os_str().as_bytes().to_vec());
    }
    let mut env = Vec::new();
    for x in &args.env {
        env.push(env_entry(x)?);
    }
    if let Some(b) = &args.bind_to {
        let b = if b == "hwthread" { "core" } else { b };
        env.push(("KUMI_BIND".into(), b.into()));
    }
    let cwd = std::env::current_dir().unwrap_or_default();
    let identity = kumi_core::checkpoint::JobIdentity {
        program: checkpoint::program_identity(&apps, &cwd),
        args: apps[0]
            .args
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
        size: apps.iter().map(|a| a.ranks).sum(),
    };
    let spec = JobSpec::new(apps, args.tag_output)
        .and_then(|s| s.with_env(env))
        .map_err(|e| e.to_string())?;
    // The ranks' configuration, checked once for the job before any rank
    // starts: a bad value stops here with one line, not one per rank, and an
    // unknown `KUMI_*` name (a typo) is reported once.
    let mut env = kumi_core::config::Env::from_os(std::env::vars_os());
    env.extend(spec.env.iter().cloned());
    kumi_core::config::Tuning::parse(&env).map_err(|e| e.to_string())?;
    for line in env.unknown() {
        eprintln!("kumi run: warning: {line}");
    }
    let supervision = args.supervision.config()?;
    debug_assert_eq!(DEADLOCK_EXIT, 86, "documented in RUN_HELP");
    debug_assert_eq!(TIMEOUT_EXIT, 124, "documented in RUN_HELP");
    let mut job = Job::new(spec).supervision(supervision);
    if let Some(t) = args.timeout {
        job = job.time_limit(seconds("--timeout", t)?);
    }
    if let Some(rank) = args.debug {
        if remote.is_some() {
            return Err("--debug starts a rank of this machine under the debugger: use it without hosts, or `kumi attach JOB RANK` for a rank of a multi-host job".into());
        }
        if rank >= identity.size {
            return Err(format!(
                "--debug {rank}: the job has ranks 0 to {}",
                identity.size - 1
            ));
        }
        let command: Vec<String> = args.debugger.split_whitespace().map(String::from).collect();
        if command.is_empty() {
            return Err("--debugger: an empty command".into());
        }
        job = job.debug(kumi_launch::host::Debug { rank, command });
    }
    if let Some(r) = remote {
        job = job.remote(r);
    }
    if args.monitor {
        // The view holds the terminal: output and notices wait in the top
        // module's log and are printed, in order, when the view closes.
        crate::top::hold_output();
        job = job
            .on_listen(Box::new(|address: &str| crate::top::spawn_monitor(address)))
            .with_output(Box::new(crate::top::output))
            .with_notices(Box::new(|line: &str| {
                crate::top::output(true, format!("kumi run: {line}\n").as_bytes())
            }));
    }
    Ok(Prepared {
        job,
        monitor: args.monitor,
        size,
        identity,
    })
}

/// Runs a prepared job; returns how it ended (the cause printed).
fn run(p: Prepared) -> kumi_launch::Outcome {
    let outcome = p.job.run();
    if p.monitor {
        crate::top::stop_monitor();
        crate::top::release_output();
    }
    if let Some(cause) = &outcome.cause {
        eprintln!("kumi run: {cause}");
    }
    outcome
}

/// The programs of the command line. The first runs on `first` ranks (`-n`);
/// each further one follows a `:` with its own `-n N`, `-x VAR[=VALUE]`s and
/// `--wdir DIR`. A command that starts with `:` gives every program that
/// way (then `first` is `None`).
fn apps(first: Option<u32>, command: &[OsString]) -> Result<Vec<App>, String> {
    let mut sections = command.split(|a| a == ":");
    let mut out = Vec::new();
    if command.first().is_some_and(|a| a == ":") {
        if first.is_some() {
            return Err(
                "a command starting with ':' gives each program its own -n; drop the -n before it"
                    .into(),
            );
        }
        sections.next();
    } else {
        let head = sections.next().unwrap_or_default();
        let Some((program, args)) = head.split_first() else {
            return Err("no program given".into());
        };
        let Some(n) = first else {
            return Err("give the number of ranks with -n".into());
        };
        out.push(app(n, program.clone(), args.to_vec()));
    }
    for section in sections {
        out.push(section_app(out.len() + 1, section)?);
    }
    if out.is_empty() {
        return Err("no program given".into());
    }
    Ok(out)
}

/// One `-n N [-x VAR[=VALUE]]... [--wdir DIR] PROGRAM ARGS` section, the
/// `nth` program of the job.
fn section_app(nth: usize, section: &[OsString]) -> Result<App, String> {
    let what = format!("program {nth}");
    let (mut ranks, mut env, mut wdir) = (None, Vec::new(), None);
    let mut rest = section;
    while let Some(flag) = rest.first().and_then(|f| f.to_str()) {
        if !flag.starts_with('-') {
            break;
        }
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v)),
            _ => (flag, None),
        };
        let value = match inline {
            Some(v) => v.to_string(),
            None => rest
                .get(1)
                .and_then(|v| v.to_str())
                .map(str::to_string)
                .ok_or_else(|| format!("{what}: {name} needs a value"))?,
        };
        match name {
            "-n" | "--np" => {
                ranks = Some(
                    value
                        .parse::<u32>()
                        .ok()
                        .filter(|&n| (1..=MAX_RANKS).contains(&n))
                        .ok_or_else(|| format!("{what}: -n {value}: not a number of ranks"))?,
                );
            }
            "-x" | "--env" => env.push(env_entry(&value).map_err(|e| format!("{what}: {e}"))?),
            "--wdir" => wdir = Some(value.into_bytes()),
            f => {
                return Err(format!(
                    "{what}: option {f} cannot follow ':' (-n, -x and --wdir can; the others are for the whole job)"
                ))
            }
        }
        rest = &rest[if inline.is_some() { 1 } else { 2 }..];
    }
    let ranks = ranks.ok_or_else(|| format!("{what} (after a ':') needs its own -n"))?;
    let (program, args) = rest
        .split_first()
        .ok_or_else(|| format!("{what}: no program after its options"))?;
    let mut a = app(ranks, program.clone(), args.to_vec());
    a.env = env;
    a.wdir = wdir;
    Ok(a)
}

/// `VAR=VALUE`, or `VAR` with this shell's value.
fn env_entry(x: &str) -> Result<(String, String), String> {
    Ok(match x.split_once('=') {
        Some((k, v)) => (k.to_string(), v.to_string()),
        None => (
            x.to_string(),
            std::env::var(x)
                .map_err(|_| format!("-x {x}: {x} is not set here; give -x {x}=VALUE"))?,
        ),
    })
}

/// The multi-host part of the command line (or of the Slurm allocation
/// kumi runs in), if any, and the allocation's task count.
fn remote_spec(
    args: &RunArgs,
    lost: &[String],
) -> Result<Option<(kumi_launch::remote::RemoteSpec, Option<u32>)>, String> {
    let (hosts, hostfile, iface, bind) = (&args.hosts, &args.hostfile, &args.iface, &args.bind);
    use kumi_launch::hosts::{parse_hostfile, parse_hosts};
    use kumi_launch::remote::{parse_cidr, NetChoice, Starter};
    let allocation = match (hosts, hostfile) {
        (None, None) => kumi_launch::slurm::Allocation::from_env(|v| std::env::var(v).ok())
            .map_err(|e| format!("the Slurm allocation: {e}"))?,
        _ => None,
    };
    let ntasks = allocation.as_ref().and_then(|a| a.ntasks);
    let list = match (hosts, hostfile, allocation) {
        (None, None, Some(a)) => a.hosts,
        (Some(h), _, _) => parse_hosts(h).map_err(|e| format!("--hosts {h}: {e}"))?,
        (None, Some(f), _) => {
            let text = std::fs::read_to_string(f)
                .map_err(|e| format!("--hostfile {}: {e}", f.display()))?;
            parse_hostfile(&text).map_err(|e| format!("--hostfile {}: {e}", f.display()))?
        }
        (None, None, None) => {
            if iface.is_some() || bind.is_some() {
                return Err("--iface and --bind need --hosts or --hostfile".into());
            }
            return Ok(None);
        }
    };
    let net = match (iface, bind) {
        (Some(i), _) => NetChoice::Iface(i.clone()),
        (None, Some(b)) if b.contains('/') => parse_cidr(b).map_err(|e| format!("--bind: {e}"))?,
        (None, Some(b)) => NetChoice::Addr(
            b.parse()
                .map_err(|_| format!("--bind {b}: not an IPv4 address or network A.B.C.D/P"))?,
        ),
        (None, None) => NetChoice::Auto,
    };
    let list: Vec<_> = list
        .into_iter()
        .filter(|h| !lost.contains(&h.name))
        .collect();
    if list.is_empty() {
        return Err("every host of the job is lost".into());
    }
    let list = match args.ppn {
        Some(p) => list
            .into_iter()
            .map(|h| kumi_launch::hosts::HostSlots { slots: p, ..h })
            .collect(),
        None => list,
    };
    let from_allocation = hosts.is_none() && hostfile.is_none();
    let starter = match (&args.rsh, from_allocation) {
        (Some(r), _) => {
            let rsh: Vec<String> = r.split_whitespace().map(String::from).collect();
            if rsh.is_empty() {
                return Err("--rsh: an empty command".into());
            }
            Starter::Rsh(rsh)
        }
        (None, true) => Starter::Srun,
        (None, false) => Starter::Rsh(vec!["ssh".into()]),
    };
    Ok(Some((
        kumi_launch::remote::RemoteSpec {
            hosts: list,
            starter,
            net,
            agent_program: std::env::var_os("KUMI_AGENT_PROGRAM").map(PathBuf::from),
            map_by: args.map_by,
        },
        ntasks,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn programs_after_a_colon_carry_their_own_ranks_variables_and_directory() {
        let a = apps(
            Some(2),
            &os(&[
                "./a",
                "-n",
                "9",
                ":",
                "-n",
                "3",
                "-x",
                "R=w",
                "--wdir=/t",
                "./b",
                "x",
                ":",
                "--np",
                "1",
                "./c",
            ]),
        )
        .unwrap();
        assert_eq!(a.len(), 3);
        assert_eq!(
            (a[0].ranks, a[0].args.len()),
            (2, 2),
            "the first's -n 9 is its argument"
        );
        assert_eq!(
            (a[1].ranks, &a[1].env, a[1].wdir.as_deref()),
            (
                3,
                &vec![("R".to_string(), "w".to_string())],
                Some(&b"/t"[..])
            )
        );
        assert_eq!((a[2].ranks, a[2].program.as_slice()), (1, &b"./c"[..]));
        let all = apps(None, &os(&[":", "-n", "1", "./a", ":", "-n", "2", "./b"])).unwrap();
        assert_eq!(all.iter().map(|a| a.ranks).collect::<Vec<_>>(), [1, 2]);
    }

    #[test]
    fn a_malformed_program_list_says_what_is_wrong() {
        let err = |n, v: &[&str]| apps(n, &os(v)).unwrap_err();
        assert!(
            err(Some(1), &["./a", ":", "./b"]).contains("program 2 (after a ':') needs its own -n")
        );
        assert!(err(Some(1), &["./a", ":", "-n", "0", "./b"]).contains("not a number of ranks"));
        assert!(err(Some(1), &["./a", ":", "-n", "1"]).contains("no program after its options"));
        assert!(err(Some(1), &["./a", ":", "-n", "1", "--stats", "./b"]).contains("--stats"));
        assert!(err(Some(1), &[":", "-n", "1", "./a"]).contains("drop the -n"));
        assert!(err(None, &["./a"]).contains("-n"));
        assert!(err(Some(1), &["./a", ":", "-x", "1A", "./b"]).contains("1A"));
    }
}
