//! A job on this machine, run to completion by one event loop.
//!
//! # The loop
//!
//! One thread (the caller's: ranks must be spawned from a thread that outlives
//! them, see [`crate::host`]) polls, with a timeout of at most [`TICK`]:
//! the signal pipes, the control listener and connections, and the ranks' output
//! pipes. Each turn it reaps ended ranks (on SIGCHLD, and every turn as a safety
//! net against a lost wake-up), feeds what happened to the [`Supervisor`], and
//! stops the remaining ranks as soon as the supervisor names a cause.
//!
//! # Ending
//!
//! The job ends when every rank is reaped and every output pipe has reached end of
//! file, or [`PIPE_GRACE`] after the last rank was reaped if some descendant still
//! holds a pipe open. Then the outcome is the supervisor's.

use crate::host::{HostPlan, PipeId, Reaped};
use crate::policy::{Loss, Outcome, RankEnd, Supervisor};
use crate::remote::{Cluster, RemoteSpec};
use crate::server::{ConnId, ControlEvent, ControlServer};
use crate::spec::JobSpec;
use crate::supervise::{Supervision, SupervisionConfig, DEADLOCK_EXIT};
use kumi_core::control::to_hex;
use kumi_core::rankenv::{HostVars, JobVars};
use rustix::event::{PollFd, PollFlags, Timespec};
use std::io::{self, Write};
use std::time::{Duration, Instant};

/// Longest poll timeout: the reaping safety net and the timer granularity.
pub const TICK: Duration = Duration::from_millis(100);
/// How long output pipes may stay open after the last rank was reaped.
pub const PIPE_GRACE: Duration = Duration::from_millis(500);

/// A job's identity: a short random id and a 32-byte random secret.
#[derive(Clone)]
pub struct JobIdentity {
    /// `j` followed by 10 hex digits.
    pub id: String,
    /// The secret ranks prove on the control channel.
    pub secret: [u8; 32],
}

impl std::fmt::Debug for JobIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobIdentity")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl JobIdentity {
    /// A fresh identity from the OS's random source.
    pub fn random() -> io::Result<JobIdentity> {
        let mut id = [0u8; 5];
        let mut secret = [0u8; 32];
        getrandom::fill(&mut id).map_err(io::Error::other)?;
        getrandom::fill(&mut secret).map_err(io::Error::other)?;
        Ok(JobIdentity {
            id: format!("j{}", to_hex(&id)),
            secret,
        })
    }
}

/// What the loop reports while it runs (lines without the `kumi run: ` prefix):
/// refused connections, dropped ranks. The outcome itself is returned, not
/// reported.
pub type Notices = Box<dyn FnMut(&str)>;

/// Called once with the control socket's address (see [`Job::on_listen`]).
pub type OnListen = Box<dyn FnOnce(&str)>;

/// Takes the ranks' output instead of stdout and stderr (see
/// [`Job::with_output`]): whole lines, and `true` for stderr.
pub type OnOutput = Box<dyn FnMut(bool, &[u8])>;

/// A job ready to run.
pub struct Job {
    spec: JobSpec,
    notices: Notices,
    forward_stdin: bool,
    supervision: SupervisionConfig,
    on_listen: Option<OnListen>,
    remote: Option<RemoteSpec>,
    output: Option<OnOutput>,
    time_limit: Option<Duration>,
    debug: Option<crate::host::Debug>,
}

#[derive(Clone, Copy)]
enum Source {
    Signal(i32),
    Listener,
    Conn(ConnId),
    Pipe(PipeId),
    TcpListener,
}

impl Job {
    /// A job that reports notices on stderr and feeds stdin to rank 0.
    pub fn new(spec: JobSpec) -> Job {
        Job {
            spec,
            notices: Box::new(|line| eprintln!("kumi run: {line}")),
            forward_stdin: true,
            supervision: SupervisionConfig::default(),
            on_listen: None,
            remote: None,
            output: None,
            time_limit: None,
            debug: None,
        }
    }

    /// Starts one rank under a debugger in this terminal (`kumi run --debug`).
    pub fn debug(mut self, debug: crate::host::Debug) -> Job {
        self.debug = Some(debug);
        self
    }

    /// Sets more variables for every rank (names kumi makes, such as the
    /// checkpoint variables `kumi run` derives for each run of a job).
    pub fn more_env(mut self, env: impl IntoIterator<Item = (String, String)>) -> Job {
        self.spec.env.extend(env);
        self
    }

    /// Ends the job (exit code [`crate::policy::TIMEOUT_EXIT`]) if it still
    /// runs after `limit` (`--timeout`).
    pub fn time_limit(mut self, limit: Duration) -> Job {
        self.time_limit = Some(limit);
        self
    }

    /// Runs the job on several hosts (`--hosts`, `--hostfile`).
    pub fn remote(mut self, spec: RemoteSpec) -> Job {
        self.remote = Some(spec);
        self
    }

    /// Deadlock detection and statistics (see [`crate::supervise`]).
    pub fn supervision(mut self, cfg: SupervisionConfig) -> Job {
        self.supervision = cfg;
        self
    }

    /// Called with the control socket's address once it listens (before any
    /// rank starts): `kumi run --monitor` attaches its monitor there.
    pub fn on_listen(mut self, f: OnListen) -> Job {
        self.on_listen = Some(f);
        self
    }

    /// Sends the ranks' output (whole lines, in the order they were read)
    /// elsewhere: `kumi run --monitor` keeps it while its view holds the terminal.
    pub fn with_output(mut self, output: OnOutput) -> Job {
        self.output = Some(output);
        self
    }

    /// Sends notices elsewhere.
    pub fn with_notices(mut self, notices: Notices) -> Job {
        self.notices = notices;
        self
    }

    /// Whether rank 0 reads the launcher's stdin (else `/dev/null`).
    pub fn forward_stdin(mut self, on: bool) -> Job {
        self.forward_stdin = on;
        self
    }

    /// Runs the job to its end. Must be called from a thread that lives as long as
    /// the job (the main thread in `kumi run`).
    pub fn run(mut self) -> Outcome {
        let signals = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGCHLD];
        // Catch signals before the first spawn, so no SIGCHLD and no Ctrl-C is lost.
        let mut sigs = match crate::signals::SignalPipes::new(&signals) {
            Ok(s) => s,
            Err(e) => return Outcome::failed(1, format!("cannot install signal handlers: {e}")),
        };
        let ident = match JobIdentity::random() {
            Ok(i) => i,
            Err(e) => {
                return Outcome::failed(1, format!("no randomness for the job id and secret: {e}"))
            }
        };
        // A control connection per rank (this host's ranks' pipes are
        // reserved where they are spawned).
        if let Err(e) = crate::fds::for_control(self.spec.size() as usize) {
            return Outcome::failed(1, e);
        }
        let mut server = match ControlServer::bind(&ident.id, &ident.secret, self.spec.size()) {
            Ok(s) => s,
            Err(e) => {
                return Outcome::failed(1, format!("cannot listen on the control socket: {e}"))
            }
        };
        if let Some(f) = self.on_listen.take() {
            f(server.address());
        }
        let mut watch = Supervision::new(
            self.supervision.clone(),
            &ident.id,
            &self.spec.name(),
            self.spec.size(),
            Instant::now(),
        );
        let mut deadlocked: Option<Outcome> = None;
        let plan = HostPlan {
            job: JobVars {
                id: ident.id.clone(),
                size: self.spec.size(),
                control: Some(server.address().to_string()),
                secret: ident.secret.to_vec(),
            },
            host: HostVars::default(),
            node: 0,
            apps: self.spec.apps.clone(),
            ranks: (0..self.spec.size()).collect(),
            env: self.spec.env.clone(),
            tag_output: self.spec.tag_output,
            forward_stdin: self.forward_stdin,
            debug: self.debug.clone(),
        };
        let started = crate::remote::start_hosts(
            &plan,
            self.remote.as_ref(),
            &mut server,
            &mut *self.notices,
        );
        let mut host = match started {
            Ok(h) => h,
            Err(e) => return Outcome::failed(e.exit_code(), e.to_string()),
        };
        if let Some(r) = &self.remote {
            watch.set_reach(
                r.hosts
                    .iter()
                    .map(|h| (h.name.clone(), r.starter.reach(&h.name)))
                    .collect(),
            );
        }
        let mut sup = Supervisor::new(self.spec.size());
        let ends_at = self.time_limit.map(|t| Instant::now() + t);
        let mut events = Vec::new();
        let mut reaped = Vec::new();
        let mut stdout_buf = Vec::new();
        let mut stderr_buf = Vec::new();
        let mut all_reaped_at: Option<Instant> = None;
        let mut lost: Option<Outcome> = None;

        loop {
            let now = Instant::now();
            let deadline = [
                server.next_deadline(),
                host.next_deadline(),
                all_reaped_at.map(|t| t + PIPE_GRACE),
                ends_at.filter(|_| !sup.stopping()),
            ]
            .into_iter()
            .flatten()
            .min();
            let timeout = deadline.map_or(TICK, |d| d.saturating_duration_since(now).min(TICK));

            // Gather the ready sources (the PollFds borrow the sources, so handle
            // them after this block).
            let mut ready: Vec<(Source, PollFlags)> = Vec::new();
            let mut poll_failed = None;
            {
                let mut sources = Vec::new();
                let mut fds = Vec::new();
                let sig_fds: Vec<_> = sigs.fds().collect();
                let conn_fds: Vec<_> = server.conn_fds().collect();
                let pipe_fds: Vec<_> = host.pipe_fds().collect();
                let listener = server.listener_fd();
                for (sig, fd) in &sig_fds {
                    sources.push(Source::Signal(*sig));
                    fds.push(PollFd::new(fd, PollFlags::IN));
                }
                // While MAX_PENDING strangers are mid-handshake, new
                // connections wait in the backlog (polling would spin).
                let accepting = server.accepting();
                if accepting {
                    sources.push(Source::Listener);
                    fds.push(PollFd::new(&listener, PollFlags::IN));
                }
                let tcp_listener = server.tcp_listener_fd().filter(|_| accepting);
                if let Some(l) = &tcp_listener {
                    sources.push(Source::TcpListener);
                    fds.push(PollFd::new(l, PollFlags::IN));
                }
                for (id, fd, want_write) in &conn_fds {
                    sources.push(Source::Conn(*id));
                    let flags = if *want_write {
                        PollFlags::IN | PollFlags::OUT
                    } else {
                        PollFlags::IN
                    };
                    fds.push(PollFd::new(fd, flags));
                }
                for (id, fd) in &pipe_fds {
                    sources.push(Source::Pipe(*id));
                    fds.push(PollFd::new(fd, PollFlags::IN));
                }
                let ts = Timespec {
                    tv_sec: timeout.as_secs() as _,
                    tv_nsec: timeout.subsec_nanos() as _,
                };
                match rustix::event::poll(&mut fds, Some(&ts)) {
                    Ok(_) | Err(rustix::io::Errno::INTR) => {}
                    Err(e) => poll_failed = Some(e),
                }
                for (src, fd) in sources.iter().zip(&fds) {
                    let r = fd.revents();
                    if !r.is_empty() {
                        ready.push((*src, r));
                    }
                }
            }

            let now = Instant::now();
            if let Some(e) = poll_failed {
                // Cannot happen with valid descriptors; never spin or hang on it.
                (self.notices)(&format!("poll failed: {e}; killing the ranks"));
                if sup.interrupted(libc::SIGKILL) {
                    host.kill_all_now();
                }
                std::thread::sleep(TICK);
            }
            for (src, flags) in ready {
                let readable = flags.intersects(PollFlags::IN | PollFlags::HUP | PollFlags::ERR);
                match src {
                    Source::Signal(sig) => {
                        if !sigs.take(sig) || sig == libc::SIGCHLD {
                            continue;
                        }
                        if sup.interrupted(sig) {
                            host.stop(now);
                        } else {
                            // A second signal while stopping: do not wait for the grace.
                            host.kill_all_now();
                        }
                    }
                    Source::Listener => server.accept(now, &mut events),
                    Source::TcpListener => server.accept_tcp(now, &mut events),
                    Source::Conn(id) => {
                        server.ready(id, readable, flags.contains(PollFlags::OUT), &mut events)
                    }
                    Source::Pipe(id) => host.read_pipe(id, &mut stdout_buf, &mut stderr_buf),
                }
            }
            sigs.take(libc::SIGCHLD);
            server.expire(now, &mut events);
            if let (Some(at), Some(limit)) = (ends_at, self.time_limit) {
                if now >= at && sup.timed_out(limit) {
                    host.stop(now);
                }
            }

            self.supervise(&mut events, &mut watch, &mut server, now);
            self.handle_events(&mut events, &mut sup, &mut host, now);
            // Once the job is being stopped for another cause, ranks waiting on
            // the failed one are no news.
            let found = (!sup.stopping() && deadlocked.is_none())
                .then(|| watch.check(now))
                .flatten();
            if let Some(found) = found {
                (self.notices)(&found.text);
                if let Some(text) = deadlock_stacks(&watch.snapshot(now), &found.ranks) {
                    (self.notices)(&text);
                }
                if found.abort {
                    deadlocked = Some(Outcome::failed(
                        DEADLOCK_EXIT,
                        format!(
                            "the job deadlocked (see above); stopped every rank (exit code {DEADLOCK_EXIT})"
                        ),
                    ));
                    host.stop(now);
                }
            }

            write_out(&mut self.output, &mut stdout_buf, &mut stderr_buf);

            host.reap(&mut reaped);
            if let Some((name, why)) = host.take_lost() {
                if lost.is_none() && !sup.stopping() {
                    lost = Some(Outcome {
                        loss: Loss::Host(name),
                        ..Outcome::failed(1, why)
                    });
                } else {
                    (self.notices)(&why);
                }
                host.stop(now);
            }
            // A rank's last frames (Finalize, Abort) were written before it
            // exited but may not have been read yet: read them before judging how
            // it ended.
            for r in &reaped {
                server.settle(r.rank, &mut events);
            }
            self.supervise(&mut events, &mut watch, &mut server, now);
            self.handle_events(&mut events, &mut sup, &mut host, now);
            for r in &reaped {
                watch.rank_ended(r.rank);
            }
            for Reaped {
                rank,
                pid,
                how,
                call,
            } in reaped.drain(..)
            {
                let end = RankEnd {
                    rank,
                    pid,
                    how,
                    call,
                    connected: server.connected(rank),
                    finalized: server.finalized(rank),
                };
                if sup.rank_ended(&end) {
                    host.stop(now);
                }
            }
            host.tick(now);

            if host.running() == 0 {
                let at = *all_reaped_at.get_or_insert(now);
                if host.pipes_closed() || now >= at + PIPE_GRACE {
                    host.close_pipes(&mut stdout_buf, &mut stderr_buf);
                    write_out(&mut self.output, &mut stdout_buf, &mut stderr_buf);
                    break;
                }
            }
        }
        watch.finish(&mut *self.notices);
        lost.or(deadlocked).unwrap_or_else(|| sup.outcome())
    }
}

impl Job {
    /// Hands the supervision events to [`Supervision`]; answers monitors.
    fn supervise(
        &mut self,
        events: &mut Vec<ControlEvent>,
        watch: &mut Supervision,
        server: &mut ControlServer,
        now: Instant,
    ) {
        events.retain(|ev| match ev {
            ControlEvent::Connected { rank, pid } => {
                watch.connected(*rank, *pid);
                false
            }
            ControlEvent::Report { rank, report } => {
                watch.report(*rank, report.clone(), now);
                false
            }
            ControlEvent::SnapshotWanted(id) => {
                let snapshot = kumi_core::control::ToRank::Snapshot(watch.snapshot(now));
                server.reply(*id, &snapshot);
                false
            }
            _ => true,
        });
    }

    fn handle_events(
        &mut self,
        events: &mut Vec<ControlEvent>,
        sup: &mut Supervisor,
        host: &mut Cluster,
        now: Instant,
    ) {
        for ev in events.drain(..) {
            match ev {
                ControlEvent::Refused(reason) => {
                    (self.notices)(&format!("refused a control connection: {reason}"));
                }
                ControlEvent::Dropped { rank, reason } => {
                    (self.notices)(&format!(
                        "dropped the control connection of rank {rank}: {reason}"
                    ));
                }
                ControlEvent::Abort {
                    rank,
                    code,
                    message,
                } => {
                    if sup.aborted(rank, code, &message) {
                        host.stop(now);
                    }
                }
                ControlEvent::Connected { .. }
                | ControlEvent::Report { .. }
                | ControlEvent::SnapshotWanted(_) => {}
            }
        }
    }
}

/// Writes the gathered whole lines. Errors (a closed stdout) are ignored: the job
/// goes on, and its outcome is still reported on stderr and in the exit code.
fn write_out(sink: &mut Option<OnOutput>, stdout: &mut Vec<u8>, stderr: &mut Vec<u8>) {
    if let Some(f) = sink {
        for (err, buf) in [(false, &mut *stdout), (true, &mut *stderr)] {
            if !buf.is_empty() {
                f(err, buf);
                buf.clear();
            }
        }
        return;
    }
    if !stdout.is_empty() {
        let mut out = io::stdout().lock();
        let _ = out.write_all(stdout);
        let _ = out.flush();
        stdout.clear();
    }
    if !stderr.is_empty() {
        let _ = io::stderr().lock().write_all(stderr);
        stderr.clear();
    }
}

/// The stacks of the ranks a deadlock holds (the first few), read with gdb
/// where it is installed: where in the program each one waits.
fn deadlock_stacks(snapshot: &kumi_core::deadlock::Snapshot, ranks: &[u32]) -> Option<String> {
    const MAX: usize = 8;
    crate::debug::gdb()?;
    let targets: Vec<crate::debug::Target> = ranks
        .iter()
        .take(MAX)
        .filter_map(|&r| {
            let st = snapshot.ranks.get(r as usize)?;
            (st.pid != 0 && !st.ended).then(|| crate::debug::Target {
                rank: r,
                pid: st.pid,
                host: st.host.clone(),
                reach: snapshot.reach_of(&st.host),
            })
        })
        .collect();
    let which = match ranks.len() {
        n if n > MAX => format!(" (the first {MAX} of {n})"),
        _ => String::new(),
    };
    Some(format!(
        "stacks of the deadlocked ranks{which}, read with gdb:\n{}",
        crate::debug::report(&targets, Duration::from_secs(20), 16).trim_end()
    ))
}
