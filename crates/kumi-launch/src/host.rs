//! The per-host half of a job: spawn this host's ranks, forward their output,
//! reap them, stop them.
//!
//! Nothing here knows about the control channel or about failure policy; the
//! job-wide half reads [`Reaped`] records and calls [`LocalHost::stop`]. A remote
//! agent will run this same code on its host and relay those records.
//!
//! Each rank is started with:
//! * its own process group shared by all ranks of the host (the first rank's pid),
//!   so the terminal's Ctrl-C goes to the launcher only, and the launcher can signal
//!   the whole group, grandchildren included;
//! * `PR_SET_PDEATHSIG(SIGKILL)`, so a SIGKILL of the launcher takes the ranks with
//!   it. The death signal follows the *thread* that forked, so ranks must be spawned
//!   from the thread that lives as long as the job (the caller's);
//! * the segment's memfd inherited (its close-on-exec flag cleared in the child
//!   only) and named in `KUMI_SHM_FD`;
//! * stdout and stderr as pipes to the launcher; stdin a pipe fed from the
//!   launcher's stdin for global rank 0, `/dev/null` for the others.

use crate::output::{format_line, LineSplitter};
use crate::policy::Termination;
use kumi_core::call::Call;
use kumi_core::config::{ConfigError, Env, Tuning};
use kumi_core::control::{app_of, App};
use kumi_core::rankenv::{self, HostVars, JobVars, RankVars};
use kumi_transport::shm::{Segment, ShmConfig, MAX_LOCAL_SIZE};
use rustix::process::{Pid, Signal};
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs::File;
use std::io::{self, ErrorKind, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Time ranks get between SIGTERM and SIGKILL when the job is stopped. Long enough
/// for a rank to flush its output, short enough that "every rank is gone within a
/// second" holds with room to spare.
pub const KILL_GRACE: Duration = Duration::from_millis(300);

/// What this host must start.
#[derive(Clone, Debug)]
pub struct HostPlan {
    /// What every rank of the job is told (job id, size, control address, secret).
    pub job: JobVars,
    /// What every rank of this host is told (its ranks, name, network).
    pub host: HostVars,
    /// Index of this host in the job (`KUMI_NODE`).
    pub node: u32,
    /// The job's programs, in rank order ([`kumi_core::control::app_of`]).
    pub apps: Vec<App>,
    /// Global ranks that run here, in local-rank order.
    pub ranks: Vec<u32>,
    /// Further environment every rank of the host gets: the job's (`-x`), and
    /// on a host reached by a remote shell the user's `KUMI_*` variables.
    pub env: Vec<(String, String)>,
    /// Prefix output lines with `[<rank>] `.
    pub tag_output: bool,
    /// Feed the launcher's stdin to global rank 0 (if it runs here).
    pub forward_stdin: bool,
    /// A rank started under a debugger (`kumi run --debug`), if it runs here.
    pub debug: Option<Debug>,
}

/// A rank started under a debugger, in the launcher's terminal.
#[derive(Clone, Debug)]
pub struct Debug {
    /// Global rank.
    pub rank: u32,
    /// The debugger's command, to which the program and its arguments are
    /// appended (`gdb -q --args`).
    pub command: Vec<String>,
}

/// Why the ranks of a host could not be started. Nothing is left running.
#[derive(Debug)]
pub enum HostError {
    /// The job's resources could not be set up (segment, configuration).
    Setup(String),
    /// The program could not be executed.
    Spawn {
        /// The program as given.
        program: OsString,
        /// The OS error.
        error: io::Error,
    },
}

impl HostError {
    /// The launcher's exit code: 127 for a program not found, 126 for one that
    /// cannot be executed, 1 for a setup failure.
    pub fn exit_code(&self) -> i32 {
        match self {
            HostError::Setup(_) => 1,
            HostError::Spawn { error, .. } if error.kind() == ErrorKind::NotFound => 127,
            HostError::Spawn { .. } => 126,
        }
    }
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostError::Setup(e) => f.write_str(e),
            HostError::Spawn { program, error } => write!(f, "cannot start {program:?}: {error}"),
        }
    }
}

/// A rank that ended, as the host saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reaped {
    /// Global rank.
    pub rank: u32,
    /// Process id.
    pub pid: u32,
    /// How it ended.
    pub how: Termination,
    /// The kumi call its segment block named at the time.
    pub call: Call,
}

struct LocalRank {
    rank: u32,
    child: Child,
    ended: bool,
}

struct OutPipe {
    rank: u32,
    stderr: bool,
    file: Option<File>,
    lines: LineSplitter,
}

/// What the ranks of this host will read of the configuration: this
/// process's environment with the plan's forwarded variables over it.
fn host_env(plan: &HostPlan) -> Env {
    let mut env = Env::from_os(std::env::vars_os());
    env.extend(plan.env.iter().cloned());
    env
}

/// Identifies an output pipe to the event loop.
pub type PipeId = usize;

/// The running ranks of this host.
pub struct LocalHost {
    ranks: Vec<LocalRank>,
    pipes: Vec<OutPipe>,
    pgid: Option<Pid>,
    segment: Segment,
    tag_output: bool,
    kill_at: Option<Instant>,
    /// `KUMI_LOCAL_CORES` of every rank.
    local_cores: usize,
    /// The terminal handed to a debugger's process group, to take back.
    terminal: Option<Terminal>,
}

/// The launcher's terminal while a debugged rank holds it: the debugger's
/// process group is the terminal's foreground group (so it reads the
/// keyboard and Ctrl-C reaches it, not kumi), until the rank ends.
struct Terminal {
    /// The debugger's pid (its process group's id).
    debugger: u32,
    /// The launcher's own process group, to give the terminal back to.
    ours: Pid,
}

impl Terminal {
    /// Hands the terminal on standard input to `debugger`'s group, if
    /// standard input is a terminal.
    fn hand_over(debugger: u32) -> Option<Terminal> {
        let stdin = io::stdin();
        if !rustix::termios::isatty(&stdin) {
            return None;
        }
        // A background group that sets the foreground group gets SIGTTOU
        // (which stops it) unless it ignores it: the launcher takes the
        // terminal back from the background.
        // SAFETY: setting a signal's disposition to SIG_IGN installs no handler.
        unsafe { libc::signal(libc::SIGTTOU, libc::SIG_IGN) };
        let pgid = Pid::from_raw(debugger as i32)?;
        rustix::termios::tcsetpgrp(&stdin, pgid).ok()?;
        Some(Terminal {
            debugger,
            ours: rustix::process::getpgrp(),
        })
    }

    fn take_back(&self) {
        let _ = rustix::termios::tcsetpgrp(io::stdin(), self.ours);
    }
}

impl LocalHost {
    /// Creates the segment and starts every rank of `plan`. On error, ranks already
    /// started are killed and reaped before returning.
    pub fn start(plan: &HostPlan) -> Result<LocalHost, HostError> {
        if plan.ranks.len() > MAX_LOCAL_SIZE {
            return Err(HostError::Setup(format!(
                "{} ranks on one host: kumi runs at most {MAX_LOCAL_SIZE} ranks per host (its shared-memory segment's limit); spread them over more hosts (--hosts, --hostfile)",
                plan.ranks.len()
            )));
        }
        crate::fds::for_ranks(plan.ranks.len()).map_err(HostError::Setup)?;
        let env = host_env(plan);
        let setup = |e: ConfigError| HostError::Setup(e.to_string());
        // Checked here, so that a missing directory is not reported as a
        // missing program (both are ENOENT from the spawn).
        for dir in plan.apps.iter().filter_map(|a| a.wdir.as_deref()) {
            let dir = Path::new(OsStr::from_bytes(dir));
            let why = match std::fs::metadata(dir) {
                Ok(m) if m.is_dir() => continue,
                Ok(_) => "not a directory".to_string(),
                Err(e) => e.to_string(),
            };
            return Err(HostError::Setup(format!(
                "working directory {}: {why}",
                dir.display()
            )));
        }
        let tuning = Tuning::parse(&env).map_err(setup)?;
        // `KUMI_LOCAL_CORES` for the ranks: the user's value if set, else the
        // cores this process may run on. Every rank of the host gets the same
        // value, so they agree on whether the host is oversubscribed (choices
        // of collective algorithms depend on it) even if some are started
        // with a narrower affinity.
        let local_cores = rankenv::local_cores(&env)
            .map_err(setup)?
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        // The host's single-copy choice is made here, once for its ranks.
        let cfg = ShmConfig::for_host(plan.ranks.len(), tuning.shm.ring_bytes, tuning.single_copy)
            .ok_or_else(|| HostError::Setup("KUMI_SHM_RING_BYTES: not a ring size".into()))?;
        let (segment, shm_fd) = Segment::create_memfd(&plan.job.id, plan.ranks.len(), &cfg)
            .map_err(|e| HostError::Setup(format!("cannot create the shared segment: {e}")))?;
        let mut host = LocalHost {
            ranks: Vec::with_capacity(plan.ranks.len()),
            pipes: Vec::with_capacity(2 * plan.ranks.len()),
            pgid: None,
            segment,
            tag_output: plan.tag_output,
            kill_at: None,
            local_cores,
            terminal: None,
        };
        for (local, &rank) in plan.ranks.iter().enumerate() {
            let Some((appnum, app)) = app_of(&plan.apps, rank) else {
                host.kill_all_now();
                host.wait_all();
                return Err(HostError::Setup(format!("rank {rank} runs no program")));
            };
            if let Err(error) = host.spawn_one(plan, app, appnum, local, rank, &shm_fd) {
                host.kill_all_now();
                host.wait_all();
                return Err(HostError::Spawn {
                    program: OsString::from_vec(app.program.clone()),
                    error,
                });
            }
        }
        Ok(host)
    }

    fn spawn_one(
        &mut self,
        plan: &HostPlan,
        app: &App,
        appnum: u32,
        local: usize,
        rank: u32,
        shm_fd: &OwnedFd,
    ) -> io::Result<()> {
        let debugger = plan.debug.as_ref().filter(|d| d.rank == rank);
        let mut cmd = match debugger {
            Some(d) => {
                let mut c = Command::new(&d.command[0]);
                c.args(&d.command[1..]).arg(OsStr::from_bytes(&app.program));
                c
            }
            None => Command::new(OsStr::from_bytes(&app.program)),
        };
        cmd.args(app.args.iter().map(|a| OsStr::from_bytes(a)))
            .envs(plan.env.iter().map(|(k, v)| (k, v)))
            .envs(app.env.iter().map(|(k, v)| (k, v)))
            .envs(plan.job.vars())
            .envs(plan.host.vars())
            .envs(
                RankVars {
                    rank,
                    local_rank: local as u32,
                    local_size: plan.ranks.len() as u32,
                    local_cores: Some(self.local_cores),
                    node: plan.node,
                    shm_fd: Some(shm_fd.as_raw_fd()),
                    appnum,
                }
                .vars(),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(if rank == 0 && plan.forward_stdin {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .process_group(self.pgid.map_or(0, |p| p.as_raw_nonzero().get()));
        if let Some(dir) = &app.wdir {
            cmd.current_dir(OsStr::from_bytes(dir));
        }
        if debugger.is_some() {
            // The debugger talks to the user in this terminal, in a process
            // group of its own; the rank it starts dies with it.
            cmd.stdin(Stdio::inherit())
                .stdout(Stdio::inherit())
                .stderr(Stdio::inherit())
                .process_group(0)
                .env("KUMI_DEBUGGED", "1");
        }
        let fd: RawFd = shm_fd.as_raw_fd();
        let parent = rustix::process::getpid().as_raw_nonzero().get();
        let in_child = move || {
            // SAFETY: prctl with PR_SET_PDEATHSIG takes a signal number and no
            // pointers.
            if unsafe {
                libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                )
            } != 0
            {
                return Err(io::Error::last_os_error());
            }
            // The launcher may have died between fork and prctl; then the death
            // signal will never come, so give up now.
            // SAFETY: getppid has no arguments and cannot fail.
            if unsafe { libc::getppid() } != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            // SAFETY: fcntl on an fd number we own (the memfd, open in the
            // child as in the parent); F_GETFD/F_SETFD take an int argument.
            let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
            // SAFETY: as above.
            if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) } < 0
            {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        };
        // SAFETY: the closure runs in the forked child before exec, where only
        // async-signal-safe functions may be called. It calls prctl, getppid and
        // fcntl (all async-signal-safe system calls), allocates nothing, takes no
        // lock, and builds errors with `from_raw_os_error`/`last_os_error`, which do
        // not allocate.
        unsafe {
            cmd.pre_exec(in_child);
        }
        let mut child = cmd.spawn()?;
        let pid = child.id();
        if debugger.is_some() {
            self.terminal = Terminal::hand_over(pid);
        } else if self.pgid.is_none() {
            self.pgid = Pid::from_raw(pid as i32);
        }
        for (stderr, fd) in [
            (false, child.stdout.take().map(OwnedFd::from)),
            (true, child.stderr.take().map(OwnedFd::from)),
        ] {
            let Some(fd) = fd else { continue };
            rustix::io::ioctl_fionbio(&fd, true)?;
            self.pipes.push(OutPipe {
                rank,
                stderr,
                file: Some(File::from(fd)),
                lines: LineSplitter::new(),
            });
        }
        if let Some(mut stdin) = child.stdin.take() {
            // The forwarder ends at EOF of our stdin (dropping `stdin` closes rank
            // 0's) or when rank 0 closes its end (write fails with EPIPE).
            std::thread::Builder::new()
                .name("kumi-stdin".into())
                .spawn(move || {
                    let _ = io::copy(&mut io::stdin().lock(), &mut stdin);
                })?;
        }
        self.ranks.push(LocalRank {
            rank,
            child,
            ended: false,
        });
        Ok(())
    }

    /// Process ids of the ranks, in local order.
    pub fn pids(&self) -> Vec<u32> {
        self.ranks.iter().map(|r| r.child.id()).collect()
    }

    /// Ranks not yet reaped.
    pub fn running(&self) -> usize {
        self.ranks.iter().filter(|r| !r.ended).count()
    }

    /// Reaps every rank that has ended (never blocks).
    pub fn reap(&mut self, out: &mut Vec<Reaped>) {
        for (local, r) in self.ranks.iter_mut().enumerate() {
            if r.ended {
                continue;
            }
            let status = match r.child.try_wait() {
                Ok(Some(status)) => status,
                Ok(None) => continue,
                // ECHILD: someone else reaped it; we can no longer know how it ended.
                Err(_) => std::process::ExitStatus::from_raw(0xff00),
            };
            r.ended = true;
            if let Some(t) = self.terminal.take_if(|t| t.debugger == r.child.id()) {
                t.take_back();
            }
            let how = match (status.code(), status.signal()) {
                (Some(c), _) => Termination::Exited(c),
                (None, Some(s)) => Termination::Signaled(s),
                (None, None) => Termination::Exited(255),
            };
            let call = self.segment.rank_block(local).call();
            out.push(Reaped {
                rank: r.rank,
                pid: r.child.id(),
                how,
                call,
            });
        }
    }

    /// Stops every remaining rank: SIGTERM now, SIGKILL after [`KILL_GRACE`] (see
    /// [`LocalHost::tick`]).
    pub fn stop(&mut self, now: Instant) {
        if self.kill_at.is_some() {
            return;
        }
        self.signal_each(Signal::TERM);
        self.kill_at = Some(now + KILL_GRACE);
    }

    /// Kills every remaining rank (and anything left in their process group) now.
    pub fn kill_all_now(&mut self) {
        self.signal_each(Signal::KILL);
        // The group exists as long as one of our children is unreaped (a zombie
        // keeps its group), so its id cannot have been reused by a stranger.
        if let Some(pgid) = self.pgid {
            if self.running() > 0 {
                let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
            }
        }
        self.kill_at = None;
    }

    fn signal_each(&self, sig: Signal) {
        for r in self.ranks.iter().filter(|r| !r.ended) {
            if let Some(pid) = Pid::from_raw(r.child.id() as i32) {
                let _ = rustix::process::kill_process(pid, sig);
            }
        }
    }

    /// Escalates a stop to SIGKILL once the grace period has passed.
    pub fn tick(&mut self, now: Instant) {
        if matches!(self.kill_at, Some(at) if at <= now) {
            self.kill_all_now();
        }
    }

    /// When [`LocalHost::tick`] must next run.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.kill_at
    }

    /// Blocks until every rank is reaped (used only after SIGKILL).
    fn wait_all(&mut self) {
        for r in self.ranks.iter_mut().filter(|r| !r.ended) {
            let _ = r.child.wait();
            r.ended = true;
        }
    }

    /// Output pipes still open.
    pub fn pipe_fds(&self) -> impl Iterator<Item = (PipeId, BorrowedFd<'_>)> {
        self.pipes
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.file.as_ref().map(|f| (i, f.as_fd())))
    }

    /// True when every output pipe has reached end of file.
    pub fn pipes_closed(&self) -> bool {
        self.pipes.iter().all(|p| p.file.is_none())
    }

    /// Reads what a pipe holds and appends whole lines to `stdout` or `stderr`.
    pub fn read_pipe(&mut self, id: PipeId, stdout: &mut Vec<u8>, stderr: &mut Vec<u8>) {
        let tag_output = self.tag_output;
        let Some(p) = self.pipes.get_mut(id) else {
            return;
        };
        let tag = tag_output.then_some(p.rank);
        let out = if p.stderr { stderr } else { stdout };
        let mut buf = [0u8; 64 * 1024];
        // Bounded per call, so a rank that writes without pause cannot starve the
        // other ranks or the control channel.
        for _ in 0..4 {
            let Some(file) = p.file.as_mut() else { return };
            match file.read(&mut buf) {
                Ok(0) => {
                    p.lines.finish(&mut |l| format_line(out, tag, l));
                    p.file = None;
                    return;
                }
                Ok(n) => p.lines.push(&buf[..n], &mut |l| format_line(out, tag, l)),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(_) => {
                    p.lines.finish(&mut |l| format_line(out, tag, l));
                    p.file = None;
                    return;
                }
            }
        }
    }

    /// Gives up on pipes still open (a grandchild holds them): flushes what is
    /// buffered and closes them.
    pub fn close_pipes(&mut self, stdout: &mut Vec<u8>, stderr: &mut Vec<u8>) {
        for p in self.pipes.iter_mut() {
            let tag = self.tag_output.then_some(p.rank);
            let out = if p.stderr { &mut *stderr } else { &mut *stdout };
            p.lines.finish(&mut |l| format_line(out, tag, l));
            p.file = None;
        }
    }
}

impl Drop for LocalHost {
    /// A host dropped with ranks still running (a bug or a panic above) must not
    /// leave them behind.
    fn drop(&mut self) {
        if self.running() > 0 {
            self.kill_all_now();
            self.wait_all();
        }
        if let Some(t) = self.terminal.take() {
            t.take_back();
        }
    }
}
