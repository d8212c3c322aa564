//! `kumi run`: parse the job, run it with kumi-launch, report how it ended.

use clap::Args;
use kumi_launch::{Job, JobSpec, MAX_RANKS};
use std::ffi::OsString;

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
    KUMI_NODE         index of this machine in the job (0)
    KUMI_CONTROL      control socket of the launcher (@name: abstract Unix socket)
    KUMI_SECRET       job secret (hex) to authenticate on the control socket
    KUMI_SHM_FD       inherited file descriptor of the job's shared-memory segment

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
    126      the program cannot be executed
    127      the program was not found
    2        usage error";

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
    let outcome = Job::new(spec).run();
    if let Some(cause) = &outcome.cause {
        eprintln!("kumi run: {cause}");
    }
    outcome.exit_code
}
