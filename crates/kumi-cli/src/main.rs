//! `kumi`: the command-line front door of the kumi cluster-computing system.
//!
//! Each subcommand lives in its own module with its own `Args` struct and a
//! `main(args) -> i32` that returns the process exit code; this file only parses
//! and dispatches. Adding a subcommand is one variant of [`Command`] and one arm in
//! [`main`].

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod apps;
mod bench;
mod cc;
mod ckbench;
mod clean;
mod comparison;
mod debug;
mod install;
mod mpirun;
mod ps;
mod run;
mod startup;
mod suite;
mod supervise;
mod top;

const EXAMPLES: &str = "\
EXAMPLES:
    kumi run -n 4 ./my_prog arg            start 4 ranks of ./my_prog
    kumi run -n 8 --tag-output -- ./prog --flag
                                           8 ranks, each output line tagged [rank]
    kumi bench pingpong                    latency between two ranks, 0 B .. 4 MiB
    kumi clean --dry-run                   list leftovers of dead jobs
    kumi clean                             remove them
    kumi install --prefix /opt/kumi        install for a cluster's users";

/// kumi runs parallel programs: it starts N processes ("ranks") of one program,
/// connects them to each other through shared memory and a control channel, and
/// supervises them as one job — if one rank dies or aborts, every other rank is
/// stopped within a second and kumi says which rank died, how, and in which call.
#[derive(Parser, Debug)]
#[command(name = "kumi", version, after_help = EXAMPLES, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Start N ranks of a program on this machine and supervise them as one job.
    Run(run::RunArgs),
    /// Remove leftovers (shared-memory segments) of kumi jobs whose processes are
    /// all gone.
    Clean(clean::CleanArgs),
    /// Measure this machine: latency, bandwidth, message rate, hardware floor.
    Bench(bench::BenchArgs),
    /// (internal) What each rank of a `kumi bench` job runs.
    #[command(hide = true)]
    BenchRank(bench::RankArgs),
    /// Live view of a running job: a row per rank with its state, CPU and
    /// traffic (q quits; the job goes on).
    Top(top::TopArgs),
    /// List the running jobs of this user.
    Ps(ps::PsArgs),
    /// Print every rank's stack (all threads, with source lines), read with
    /// gdb wherever the rank runs; the job goes on.
    Stacks(debug::StacksArgs),
    /// Start gdb attached to one rank of a running job, on its host.
    Attach(debug::AttachArgs),
    /// (internal) The per-host agent of a multi-host job, started by `kumi run`
    /// through the remote shell.
    #[command(hide = true)]
    Agent,
    /// (internal) The supervisor of a job `srun` started, started by its rank 0.
    #[command(hide = true)]
    Supervise(supervise::SuperviseArgs),
    /// Compile and link a C MPI program against kumi's libmpi (`--showme`
    /// prints the compiler command; `-static-mpi` links the library into the
    /// program). Also available as `mpicc`.
    Cc(cc::CcArgs),
    /// Compile and link a C++ MPI program against kumi's libmpi. Also `mpicxx`.
    Cxx(cc::CcArgs),
    /// Compile and link a Fortran MPI program (`include 'mpif.h'` or `use
    /// mpi`) against kumi's libmpi, with gfortran or `$KUMI_FC`. Also
    /// `mpifort`, `mpif90`, `mpif77`.
    Fc(cc::CcArgs),
    /// Turn `kumi bench ... --out DIR` results into report.md, report.html and charts.
    Report(suite::ReportArgs),
    /// Install kumi into a prefix (bin, lib, include, pkg-config, a
    /// modulefile, docs) that can be moved or shared.
    Install(install::InstallArgs),
    // New subcommands: one variant here, one arm in `main` below.
}

fn main() -> ExitCode {
    // Started as mpicc, mpicxx, mpirun or mpiexec (symlinks to this binary).
    if let Some(code) = cc::multicall() {
        return ExitCode::from(code.clamp(0, 255) as u8);
    }
    let cli = Cli::parse();
    if matches!(
        cli.command,
        Command::Bench(_) | Command::Ps(_) | Command::Report(_)
    ) {
        // Commands that only print results end quietly when their reader
        // goes away (`kumi bench floor --json | head -1`), as `ls` would,
        // instead of panicking on the failed print. (Not `run`: the
        // launcher must outlive a closed stdout to stop its ranks.)
        // SAFETY: restoring the default disposition of one signal, before
        // any thread exists; no handler is installed.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    let code = match cli.command {
        Command::Run(args) => run::main(args),
        Command::Clean(args) => clean::main(args),
        Command::Bench(args) => bench::main(args),
        Command::BenchRank(args) => bench::rank_main(args),
        Command::Agent => kumi_launch::agent::main(),
        Command::Supervise(args) => supervise::main(args),
        Command::Top(args) => top::main(args),
        Command::Ps(args) => ps::main(args),
        Command::Stacks(args) => debug::stacks_main(args),
        Command::Attach(args) => debug::attach_main(args),
        Command::Report(args) => suite::report_main(args),
        Command::Cc(args) => cc::main(cc::Lang::C, args),
        Command::Cxx(args) => cc::main(cc::Lang::Cxx, args),
        Command::Fc(args) => cc::main(cc::Lang::Fortran, args),
        Command::Install(args) => install::main(args),
    };
    ExitCode::from(code.clamp(0, 255) as u8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn program_flags_go_to_the_program() {
        let cli = Cli::try_parse_from(["kumi", "run", "-n", "2", "prog", "--prog-flag", "-n", "5"])
            .unwrap();
        let Command::Run(a) = cli.command else {
            panic!("not run")
        };
        assert_eq!(a.size, Some(2));
        assert_eq!(a.command, ["prog", "--prog-flag", "-n", "5"]);
        let cli = Cli::try_parse_from([
            "kumi",
            "run",
            "-n",
            "8",
            "--tag-output",
            "--",
            "./prog",
            "--flag",
        ])
        .unwrap();
        let Command::Run(a) = cli.command else {
            panic!("not run")
        };
        assert!(a.tag_output);
        assert_eq!(a.command, ["./prog", "--flag"]);
    }

    #[test]
    fn bad_rank_counts_are_usage_errors() {
        for n in ["0", "-1", "two", ""] {
            assert!(
                Cli::try_parse_from(["kumi", "run", "-n", n, "prog"]).is_err(),
                "-n {n:?}"
            );
        }
        assert!(
            Cli::try_parse_from(["kumi", "run", "-n", "2"]).is_err(),
            "no program"
        );
    }
}
