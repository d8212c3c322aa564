//! `kumi run`: parse the job, run it with kumi-launch, report how it ended.

use clap::Args;
use kumi_launch::supervise::{OnDeadlock, SupervisionConfig, DEADLOCK_EXIT};
use kumi_launch::{Job, JobSpec, MAX_RANKS};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

const RUN_HELP: &str = "\
EXAMPLES:
    kumi run -n 4 ./my_prog arg
    kumi run -n 8 --tag-output -- ./prog --flag

    Everything after the program name is passed to the program, options included:
    `kumi run -n 2 prog --prog-flag` gives --prog-flag to prog. `--` before the
    program also works.

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
    /// Number of ranks to start (1 to 4096).
    #[arg(short = 'n', long = "np", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=MAX_RANKS as i64))]
    pub size: u32,

    /// Prefix every line a rank writes with "[<rank>] ".
    #[arg(long)]
    pub tag_output: bool,

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

    /// Show the live monitor (`kumi top`) while the job runs.
    #[arg(long)]
    pub monitor: bool,

    /// Run on these hosts: HOST[:SLOTS],... (see MULTIPLE HOSTS below).
    #[arg(long, value_name = "HOSTS", conflicts_with = "hostfile")]
    pub hosts: Option<String>,

    /// Read the hosts from FILE (`host slots=N` or `host:N` lines).
    #[arg(long, value_name = "FILE")]
    pub hostfile: Option<PathBuf>,

    /// Remote shell that starts the agents: run as `CMD HOST COMMAND-LINE`.
    #[arg(long, value_name = "CMD", default_value = "ssh")]
    pub rsh: String,

    /// Network interface whose address the ranks and kumi use between hosts.
    #[arg(long, value_name = "NAME", conflicts_with = "bind")]
    pub iface: Option<String>,

    /// Network (A.B.C.D/P) or address whose interface the ranks and kumi use.
    #[arg(long, value_name = "NET")]
    pub bind: Option<String>,

    /// The program to run in every rank, then its arguments.
    #[arg(
        value_name = "PROGRAM [ARGS]",
        required = true,
        num_args = 1..,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub command: Vec<OsString>,
}

/// Runs the job; returns the exit code.
pub fn main(args: RunArgs) -> i32 {
    let mut command = args.command.into_iter();
    let Some(program) = command.next() else {
        eprintln!("kumi run: no program given");
        return 2;
    };
    let spec = match JobSpec::new(args.size, program, command.collect(), args.tag_output) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("kumi run: -n {}: {e}", args.size);
            return 2;
        }
    };
    // The ranks' configuration, checked once for the job before any rank
    // starts: a bad value stops here with one line, not one per rank, and an
    // unknown `KUMI_*` name (a typo) is reported once.
    let env = kumi_core::config::Env::from_os(std::env::vars_os());
    if let Err(e) = kumi_core::config::Tuning::parse(&env) {
        eprintln!("kumi run: {e}");
        return 2;
    }
    for line in env.unknown() {
        eprintln!("kumi run: warning: {line}");
    }
    if !(args.deadlock_timeout.is_finite() && (0.0..=1e6).contains(&args.deadlock_timeout)) {
        eprintln!(
            "kumi run: --deadlock-timeout {}: give a number of seconds from 0 to 1000000",
            args.deadlock_timeout
        );
        return 2;
    }
    let supervision = SupervisionConfig {
        deadlock_timeout: (args.deadlock_timeout > 0.0)
            .then(|| Duration::from_secs_f64(args.deadlock_timeout)),
        on_deadlock: if args.on_deadlock == "report" {
            OnDeadlock::Report
        } else {
            OnDeadlock::Abort
        },
        stats: args.stats,
        stats_json: args.stats_json,
    };
    debug_assert_eq!(DEADLOCK_EXIT, 86, "documented in RUN_HELP");
    let mut job = Job::new(spec).supervision(supervision);
    match remote_spec(
        &args.hosts,
        &args.hostfile,
        &args.rsh,
        &args.iface,
        &args.bind,
    ) {
        Ok(Some(r)) => job = job.remote(r),
        Ok(None) => {}
        Err(e) => {
            eprintln!("kumi run: {e}");
            return 2;
        }
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
    let outcome = job.run();
    if args.monitor {
        crate::top::stop_monitor();
        crate::top::release_output();
    }
    if let Some(cause) = &outcome.cause {
        eprintln!("kumi run: {cause}");
    }
    outcome.exit_code
}

/// The multi-host part of the command line, if any.
fn remote_spec(
    hosts: &Option<String>,
    hostfile: &Option<PathBuf>,
    rsh: &str,
    iface: &Option<String>,
    bind: &Option<String>,
) -> Result<Option<kumi_launch::remote::RemoteSpec>, String> {
    use kumi_launch::hosts::{parse_hostfile, parse_hosts};
    use kumi_launch::remote::{parse_cidr, NetChoice};
    let list = match (hosts, hostfile) {
        (Some(h), _) => parse_hosts(h).map_err(|e| format!("--hosts {h}: {e}"))?,
        (None, Some(f)) => {
            let text = std::fs::read_to_string(f)
                .map_err(|e| format!("--hostfile {}: {e}", f.display()))?;
            parse_hostfile(&text).map_err(|e| format!("--hostfile {}: {e}", f.display()))?
        }
        (None, None) => {
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
    let rsh: Vec<String> = rsh.split_whitespace().map(String::from).collect();
    if rsh.is_empty() {
        return Err("--rsh: an empty command".into());
    }
    Ok(Some(kumi_launch::remote::RemoteSpec {
        hosts: list,
        rsh,
        net,
        agent_program: std::env::var_os("KUMI_AGENT_PROGRAM").map(PathBuf::from),
    }))
}
