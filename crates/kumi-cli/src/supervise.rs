//! `kumi supervise`: the supervisor of a job `srun` started, which rank 0
//! starts (see `kumi_launch::step`). It reads the job secret as one hex line
//! on stdin (not on the command line, where any user could read it), prints
//! the address the ranks connect to as one line on stdout, and reports on
//! stderr (the job's, through rank 0), as `kumi run` does.

use crate::run::SupervisionArgs;
use clap::Args;
use kumi_launch::step::StepSupervisor;
use std::io::{BufRead, Write};

/// The job's identity and supervision.
#[derive(Args, Debug)]
pub struct SuperviseArgs {
    /// The job id the ranks prove.
    #[arg(long)]
    job: String,
    /// Ranks in the job.
    #[arg(long)]
    size: u32,
    /// The address to listen on (rank 0's network address).
    #[arg(long)]
    ip: std::net::IpAddr,
    /// The program's name, for reports.
    #[arg(long, default_value = "")]
    program: String,
    #[command(flatten)]
    supervision: SupervisionArgs,
}

pub fn main(args: SuperviseArgs) -> i32 {
    let mut line = String::new();
    let secret = match std::io::stdin().lock().read_line(&mut line) {
        Ok(_) => kumi_core::control::from_hex(line.trim()),
        Err(_) => None,
    };
    let (Some(secret), Ok(supervision)) = (secret, args.supervision.config()) else {
        eprintln!(
            "kumi supervise: give the job secret as one hex line on stdin, and valid options"
        );
        return 2;
    };
    let sup = StepSupervisor {
        job: args.job,
        secret,
        size: args.size,
        program: args.program,
        supervision,
    };
    let listening = |addr: &str| {
        let mut out = std::io::stdout().lock();
        // Rank 0 reads this one line and closes the pipe.
        let _ = writeln!(out, "{addr}").and_then(|_| out.flush());
    };
    match sup.run(args.ip, listening, &mut |l| eprintln!("kumi: {l}")) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kumi supervise: {e}");
            1
        }
    }
}
