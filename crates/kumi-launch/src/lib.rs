//! kumi-launch: running a kumi job on this machine.
//!
//! `kumi run -n N prog args` lands here. The crate creates the job's identity (id
//! and secret), starts the ranks, serves the control channel they bootstrap
//! through, forwards their output, and decides how the job ends. It also holds the
//! logic of `kumi clean`.
//!
//! May depend on: `kumi-core` (control protocol, call codes), `kumi-transport` (the
//! shared segment the launcher creates for the ranks), and system crates (`libc`,
//! `rustix`, `signal-hook`, `getrandom`). Never on the runtime `kumi`: the launcher
//! runs any executable, and a rank's runtime must be free to change without the
//! launcher noticing.
//!
//! # Decisions a newcomer would otherwise undo
//!
//! * **Two halves.** [`host`] is the per-host part: it spawns the local ranks,
//!   forwards their output line by line, and reaps them. [`server`] (control
//!   channel, key-value store, fences) and [`policy`] (who failed first, exit code)
//!   are job-wide. [`job`] wires one of each into a single-threaded event loop. When
//!   jobs span hosts ([`remote`], [`hosts`]), an [`agent`] per remote host runs
//!   the `host` half and relays its events over the remote shell's pipes; the
//!   job-wide half does not change.
//! * **Deciding is separate from printing.** [`policy::Supervisor`] is a pure state
//!   machine that turns events (a rank ended, a rank aborted, a signal arrived) into
//!   an [`Outcome`]; the caller prints. It is unit-tested without processes.
//!   Likewise [`supervise`] keeps the ranks' wait reports and runs the pure
//!   deadlock rule of `kumi_core::deadlock` with a grace period; a read-only
//!   monitor (`kumi top`) may connect without the secret, being of our uid.
//! * **Nothing to leave behind.** The control socket is a Linux *abstract* Unix
//!   socket and the shared segment a memfd: neither has a name in any file system,
//!   so no crash of the launcher or of a rank can leak a file. The abstract socket is
//!   reachable by any local user, which is why every connection must answer a
//!   challenge with an HMAC under the job secret (and come from our own uid) before
//!   the launcher reads anything else from it.
//! * **Ranks die with the launcher.** Every rank gets `PR_SET_PDEATHSIG(SIGKILL)`,
//!   and all ranks share one new process group, so a terminal's Ctrl-C reaches only
//!   the launcher, which then stops the ranks itself in a bounded time.

#![deny(missing_docs)]

pub mod agent;
pub mod checkpoint;
pub mod clean;
pub mod debug;
mod fds;
pub mod host;
pub mod hosts;
pub mod job;
pub mod output;
pub mod policy;
pub mod remote;
pub mod server;
pub mod signals;
pub mod slurm;
pub mod spec;
pub mod step;
pub mod supervise;

pub use job::{Job, JobIdentity};
pub use policy::{Loss, Outcome};
pub use spec::{JobSpec, SpecError, MAX_RANKS};
