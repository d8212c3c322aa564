//! The hosts of a job as one: the launcher's own host (in process) and one agent
//! per other host (see [`crate::agent`]), behind the same calls the event loop
//! makes on a single [`LocalHost`].
//!
//! An agent's channel is one more "pipe" for the event loop: reading it yields
//! output lines and [`Reaped`] records exactly as a local host would. If the
//! channel ends before the agent said `Done`, the host is lost: its ranks are
//! counted as killed and [`Cluster::take_lost`] gives the one line that names
//! the host, which the loop reports as the job's cause.

use crate::host::{HostError, HostPlan, LocalHost, PipeId, Reaped};
use crate::hosts::{HostSlots, Placement};
use crate::policy::Termination;
use crate::server::ControlServer;
use kumi_core::call::Call;
use kumi_core::config::Scope;
use kumi_core::control::{self, FrameDecoder, FromAgent, ToAgent};
use kumi_core::rankenv::{HostVars, JobVars};
pub use kumi_transport::tcp::addr::{parse_cidr, NetChoice};
use rustix::process::{Pid, Signal};
use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// How long an agent has to end its ranks after `Stop` before the launcher
/// gives up on it (kills the remote shell and counts the host as lost).
pub const AGENT_GRACE: Duration = Duration::from_secs(3);

const AGENT_PIPE_BASE: PipeId = 1 << 40;
/// srun's own messages for agent `i` are pipe `AGENT_ERR_BASE + i`.
const AGENT_ERR_BASE: PipeId = 1 << 41;

/// How long the launcher waits before it asks srun again for a step Slurm
/// could not create yet; each ask itself waits up to a second (`--immediate`).
const STEP_RETRY: Duration = Duration::from_millis(250);
/// How many times a host's agent step is asked for before the launcher gives
/// up: about ten minutes of the launcher's running time (it is stopped with
/// the job while the job is suspended, so suspended time does not count).
const STEP_STARTS: u32 = 480;

/// Where and how to run a job on several hosts.
#[derive(Clone, Debug)]
pub struct RemoteSpec {
    /// Hosts and slots, in order.
    pub hosts: Vec<HostSlots>,
    /// How each host's agent is started.
    pub starter: Starter,
    /// The network the ranks use (`KUMI_NET`).
    pub net: NetChoice,
    /// The `kumi` executable on the hosts (default: this one's path).
    pub agent_program: Option<PathBuf>,
    /// How ranks are dealt to the hosts.
    pub map_by: crate::hosts::MapBy,
}

/// How the agent of a host is started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Starter {
    /// A remote shell and its leading arguments (`["ssh"]`), run as
    /// `RSH... host 'remote command line'`.
    Rsh(Vec<String>),
    /// `srun`, one step of one task on the host, inside the Slurm allocation
    /// this launcher runs in (`kumi run` in `sbatch`/`salloc`). The step
    /// takes the host's whole allocation (`--whole`), so the ranks the agent
    /// starts are not confined to one CPU, and shares it (`--overlap`) with
    /// whatever else the job runs there.
    ///
    /// Slurm refuses to create a step while the job is suspended (gang
    /// scheduling, `scontrol suspend`), and srun's own retry then waits for a
    /// word from the controller that a resume never sends: a minute or more
    /// per try, each try again likely to fall in a suspended slice. So srun
    /// asks once (`--immediate`), and the launcher asks again while srun's
    /// reason is one Slurm itself calls temporary (`step_not_yet`).
    Srun,
}

impl Starter {
    /// How a tool reaches `host` the way the agents were started.
    pub fn reach(&self, host: &str) -> kumi_core::debug::Reach {
        use kumi_core::debug::Reach;
        match self {
            _ if is_local(host) => Reach::Local,
            Starter::Rsh(rsh) => Reach::Rsh {
                rsh: rsh.clone(),
                host: host.to_string(),
            },
            Starter::Srun => Reach::Srun {
                host: host.to_string(),
            },
        }
    }
}

/// A host is the launcher's own if it is named `localhost` or like this machine.
pub fn is_local(name: &str) -> bool {
    name == "localhost" || name == crate_hostname()
}

fn crate_hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

struct Agent {
    host: String,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Option<File>,
    /// srun's own messages (the `Srun` starter; a remote shell's go straight
    /// to the launcher's stderr), relayed line by line.
    stderr: Option<File>,
    err_line: Vec<u8>,
    /// The agent has sent a message: its step exists and it runs.
    heard: bool,
    /// srun's last refusal, when Slurm called it temporary.
    not_yet: Option<String>,
    /// When to ask srun again for this host's step.
    retry_at: Option<Instant>,
    /// Starts so far (the first included).
    starts: u32,
    /// What the agent is told to start (sent again with each start).
    plan: HostPlan,
    decoder: FrameDecoder,
    pids: Vec<u32>,
    ended: Vec<bool>,
    done: bool,
    give_up_at: Option<Instant>,
}

impl Agent {
    fn tell(&mut self, msg: &ToAgent) {
        if let Some(s) = &mut self.stdin {
            if s.write_all(&control::encode(msg)).is_err() {
                self.stdin = None;
            }
        }
    }

    fn running(&self) -> usize {
        self.ended.iter().filter(|e| !**e).count()
    }

    /// Why its step was not created, as srun said, for a report.
    fn why_not(&self) -> String {
        match &self.not_yet {
            Some(r) => format!(
                ": Slurm did not create its step in {} tries ({r})",
                self.starts
            ),
            None => String::new(),
        }
    }
}

/// Every host of a job.
pub struct Cluster {
    local: Option<LocalHost>,
    spec: Option<RemoteSpec>,
    agents: Vec<Agent>,
    reaped: Vec<Reaped>,
    /// The first host lost: its name, and the line for the report.
    lost: Option<(String, String)>,
    stopping: bool,
}

/// Shell-quotes one word for the remote command line.
fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-=:,@+".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

impl Cluster {
    /// Only this host: the plan runs in process.
    pub fn local_only(plan: &HostPlan) -> Result<Cluster, HostError> {
        Ok(Cluster {
            local: Some(LocalHost::start(plan)?),
            spec: None,
            agents: Vec::new(),
            reaped: Vec::new(),
            lost: None,
            stopping: false,
        })
    }

    /// Starts every host of `placement`. `base` is the plan of the whole job
    /// (program, arguments, job-wide environment without `KUMI_CONTROL`);
    /// `local_control` and `remote_control` are the control addresses for ranks
    /// on the launcher's host and on the others.
    pub fn start(
        base: &HostPlan,
        spec: &RemoteSpec,
        placement: &Placement,
        local_control: &str,
        remote_control: &str,
    ) -> Result<Cluster, HostError> {
        let mut c = Cluster {
            local: None,
            spec: Some(spec.clone()),
            agents: Vec::new(),
            reaped: Vec::new(),
            lost: None,
            stopping: false,
        };
        for (node, (host, ranks)) in placement.hosts.iter().enumerate() {
            let local = is_local(host) && c.local.is_none();
            let mut env = base.env.clone();
            if !local {
                // A remote shell need not pass the environment on (ssh does not):
                // forward the user's kumi knobs, so every rank reads the same ones
                // (KUMI_FORCE_TCP must agree on both ends of a pair). The
                // contract's variables are the plan's own.
                env.extend(std::env::vars_os().filter_map(|(k, v)| {
                    let (k, v) = (k.into_string().ok()?, v.into_string().ok()?);
                    let forwarded = kumi_core::config::var(&k).is_some_and(|var| {
                        var.scope == Scope::Tuning || var.scope == Scope::Testing
                    });
                    forwarded.then_some((k, v))
                }));
            }
            let plan = HostPlan {
                job: JobVars {
                    control: Some(if local { local_control } else { remote_control }.to_string()),
                    ..base.job.clone()
                },
                host: HostVars {
                    host_ranks: Some(ranks.clone()),
                    host: host.clone(),
                    net: spec.net.to_env(),
                },
                node: node as u32,
                ranks: ranks.clone(),
                env,
                forward_stdin: base.forward_stdin && local,
                debug: base.debug.clone().filter(|_| local),
                ..base.clone()
            };
            if local {
                c.local = Some(LocalHost::start(&plan)?);
                continue;
            }
            let agent = spawn_agent(spec, host, plan).map_err(|e| {
                HostError::Setup(format!("cannot start the agent for host {host}: {e}"))
            })?;
            c.agents.push(agent);
        }
        Ok(c)
    }

    /// Ranks not yet reaped.
    pub fn running(&self) -> usize {
        self.local.as_ref().map_or(0, |h| h.running())
            + self.agents.iter().map(Agent::running).sum::<usize>()
    }

    /// Ranks that ended, from every host (never blocks).
    pub fn reap(&mut self, out: &mut Vec<Reaped>) {
        if let Some(h) = &mut self.local {
            h.reap(out);
        }
        out.append(&mut self.reaped);
    }

    /// The first host lost: its name, and one line for the report (taken once).
    pub fn take_lost(&mut self) -> Option<(String, String)> {
        self.lost.take()
    }

    /// Stops every rank on every host (SIGTERM, then SIGKILL).
    pub fn stop(&mut self, now: Instant) {
        if let Some(h) = &mut self.local {
            h.stop(now);
        }
        if self.stopping {
            return;
        }
        self.stopping = true;
        for i in 0..self.agents.len() {
            if !self.never_started(i) && !self.agents[i].done {
                self.agents[i].tell(&ToAgent::Stop);
                self.agents[i].give_up_at = Some(now + AGENT_GRACE);
            }
        }
    }

    /// Kills every rank now.
    pub fn kill_all_now(&mut self) {
        if let Some(h) = &mut self.local {
            h.kill_all_now();
        }
        for i in 0..self.agents.len() {
            if !self.never_started(i) && !self.agents[i].done {
                self.agents[i].tell(&ToAgent::Kill);
            }
        }
    }

    /// Escalations due at `now`: the local grace, agents that did not answer,
    /// agents whose step Slurm could not create yet.
    pub fn tick(&mut self, now: Instant) {
        if let Some(h) = &mut self.local {
            h.tick(now);
        }
        for i in 0..self.agents.len() {
            if matches!(self.agents[i].retry_at, Some(t) if t <= now) {
                self.start_again(i);
            }
            let a = &self.agents[i];
            if a.stdout.is_some() && matches!(a.give_up_at, Some(t) if t <= now) {
                let why = format!(
                    "host {}: its agent did not stop its ranks within {} s",
                    a.host,
                    AGENT_GRACE.as_secs()
                );
                self.lose(i, why);
            }
        }
    }

    /// When [`Cluster::tick`] must next run.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.local
            .as_ref()
            .and_then(LocalHost::next_deadline)
            .into_iter()
            .chain(
                self.agents
                    .iter()
                    .filter(|a| a.stdout.is_some())
                    .filter_map(|a| a.give_up_at),
            )
            .chain(self.agents.iter().filter_map(|a| a.retry_at))
            .min()
    }

    /// Output pipes and agent channels still open.
    pub fn pipe_fds(&self) -> impl Iterator<Item = (PipeId, BorrowedFd<'_>)> {
        let mut v: Vec<_> = self
            .local
            .as_ref()
            .map(|h| h.pipe_fds().collect())
            .unwrap_or_default();
        for (i, a) in self.agents.iter().enumerate() {
            if let Some(f) = &a.stdout {
                v.push((AGENT_PIPE_BASE + i, f.as_fd()));
            }
            if let Some(f) = &a.stderr {
                v.push((AGENT_ERR_BASE + i, f.as_fd()));
            }
        }
        v.into_iter()
    }

    /// True when every pipe and channel has reached end of file.
    pub fn pipes_closed(&self) -> bool {
        self.local.as_ref().is_none_or(|h| h.pipes_closed())
            && self
                .agents
                .iter()
                .all(|a| a.stdout.is_none() && a.stderr.is_none())
    }

    /// Reads a pipe or an agent's channel.
    pub fn read_pipe(&mut self, id: PipeId, stdout: &mut Vec<u8>, stderr: &mut Vec<u8>) {
        if id < AGENT_PIPE_BASE {
            if let Some(h) = &mut self.local {
                h.read_pipe(id, stdout, stderr);
            }
            return;
        }
        if id >= AGENT_ERR_BASE {
            self.read_srun_messages(id - AGENT_ERR_BASE, stderr);
            return;
        }
        let i = id - AGENT_PIPE_BASE;
        let mut buf = [0u8; 64 * 1024];
        for _ in 0..16 {
            let Some(a) = self.agents.get_mut(i) else {
                return;
            };
            let Some(f) = a.stdout.as_mut() else { return };
            match f.read(&mut buf) {
                Ok(0) => {
                    a.stdout = None;
                    // Before the agent spoke, srun's last words (if still
                    // to come) say whether Slurm only refused the step for now.
                    if !a.done && (a.heard || a.stderr.is_none()) {
                        self.settle(i);
                    }
                    return;
                }
                Ok(n) => a.decoder.push(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => {
                    let why = format!("host {}: its agent's channel failed: {e}", a.host);
                    self.lose(i, why);
                    return;
                }
            }
            loop {
                let a = &mut self.agents[i];
                match a.decoder.next_frame::<FromAgent>() {
                    Ok(None) => break,
                    Ok(Some(msg)) => self.on_agent(i, msg, stdout, stderr),
                    Err(e) => {
                        let why = format!("host {}: its agent sent a bad message: {e}", a.host);
                        self.lose(i, why);
                        return;
                    }
                }
            }
        }
    }

    /// srun's messages for agent `i`: a refusal Slurm calls temporary is
    /// kept (not shown); every other line goes to the launcher's stderr.
    fn read_srun_messages(&mut self, i: usize, stderr: &mut Vec<u8>) {
        let Some(a) = self.agents.get_mut(i) else {
            return;
        };
        let Some(f) = a.stderr.as_mut() else { return };
        let mut buf = [0u8; 16 * 1024];
        let eof = loop {
            match f.read(&mut buf) {
                Ok(0) => break true,
                Ok(n) => a.err_line.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break false,
                Err(_) => break true,
            }
        };
        let whole = if eof {
            a.err_line.len()
        } else {
            a.err_line
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |p| p + 1)
        };
        for line in a.err_line[..whole].split_inclusive(|&b| b == b'\n') {
            let text = String::from_utf8_lossy(line);
            match step_not_yet(&text) {
                Some(reason) if !a.heard => a.not_yet = Some(reason.to_string()),
                _ => stderr.extend_from_slice(line),
            }
        }
        a.err_line.drain(..whole);
        if eof {
            a.stderr = None;
            if a.stdout.is_none() && !a.done {
                self.settle(i);
            }
        }
    }

    /// Agent `i`'s srun or remote shell has closed its channel and its
    /// messages: start it again if Slurm only refused its step for now, else
    /// count the host as lost.
    fn settle(&mut self, i: usize) {
        let a = &mut self.agents[i];
        let status = match a.child.wait() {
            Ok(s) => format!(" ({s})"),
            Err(_) => String::new(),
        };
        if !a.heard && a.not_yet.is_some() && !self.stopping && a.starts < STEP_STARTS {
            a.retry_at = Some(Instant::now() + STEP_RETRY);
            return;
        }
        let why = if a.heard {
            format!(
                "host {}: lost its agent{status}; its ranks are gone",
                a.host
            )
        } else {
            format!(
                "host {}: its agent did not start{status}{}",
                a.host,
                a.why_not()
            )
        };
        self.lose(i, why);
    }

    /// Gives up on agent `i` if it waits to be asked for again (the job is
    /// ending): its ranks count as killed. True if it did.
    fn never_started(&mut self, i: usize) -> bool {
        if self.agents[i].retry_at.is_none() {
            return false;
        }
        let a = &self.agents[i];
        let why = format!("host {}: its agent never started{}", a.host, a.why_not());
        self.lose(i, why);
        true
    }

    /// Asks srun again for agent `i`'s step.
    fn start_again(&mut self, i: usize) {
        let Some(spec) = &self.spec else { return };
        let a = &mut self.agents[i];
        a.retry_at = None;
        match spawn_agent(spec, &a.host, a.plan.clone()) {
            Ok(mut fresh) => {
                fresh.starts = a.starts + 1;
                fresh.not_yet = a.not_yet.take();
                *a = fresh;
            }
            Err(e) => {
                let why = format!("host {}: cannot start its agent again: {e}", a.host);
                self.lose(i, why);
            }
        }
    }

    fn on_agent(&mut self, i: usize, msg: FromAgent, stdout: &mut Vec<u8>, stderr: &mut Vec<u8>) {
        let a = &mut self.agents[i];
        a.heard = true;
        match msg {
            FromAgent::Started { pids } => a.pids = pids,
            FromAgent::Output { stderr: e, data } => {
                if e { stderr } else { stdout }.extend_from_slice(&data)
            }
            FromAgent::Reaped {
                rank,
                pid,
                code,
                signal,
                call,
            } => {
                let Some(k) = a.plan.ranks.iter().position(|&r| r == rank) else {
                    return;
                };
                if a.ended[k] {
                    return;
                }
                a.ended[k] = true;
                self.reaped.push(Reaped {
                    rank,
                    pid,
                    how: match (code, signal) {
                        (Some(c), _) => Termination::Exited(c),
                        (None, Some(s)) => Termination::Signaled(s),
                        (None, None) => Termination::Exited(255),
                    },
                    call: Call::from_code(call),
                });
            }
            FromAgent::Failed { code, message } => {
                let why = format!("host {}: {message} (exit code {code})", a.host);
                self.lose(i, why);
            }
            FromAgent::Done => a.done = true,
        }
    }

    /// Counts host `i` as lost: its remaining ranks as killed, the remote shell
    /// killed, the first such line kept for the report.
    fn lose(&mut self, i: usize, why: String) {
        let a = &mut self.agents[i];
        a.stdout = None;
        a.stdin = None;
        a.done = true;
        a.retry_at = None;
        if let Some(pid) = Pid::from_raw(a.child.id() as i32) {
            if matches!(a.child.try_wait(), Ok(None)) {
                let _ = rustix::process::kill_process(pid, Signal::KILL);
            }
        }
        let _ = a.child.wait();
        for (k, &rank) in a.plan.ranks.iter().enumerate() {
            if !a.ended[k] {
                a.ended[k] = true;
                self.reaped.push(Reaped {
                    rank,
                    pid: a.pids.get(k).copied().unwrap_or(0),
                    how: Termination::Signaled(libc::SIGKILL),
                    call: Call::None,
                });
            }
        }
        if self.lost.is_none() && !self.stopping {
            self.lost = Some((self.agents[i].host.clone(), why));
        } else {
            eprintln!("kumi run: {why}");
        }
    }

    /// Gives up on pipes still open.
    pub fn close_pipes(&mut self, stdout: &mut Vec<u8>, stderr: &mut Vec<u8>) {
        if let Some(h) = &mut self.local {
            h.close_pipes(stdout, stderr);
        }
        for a in &mut self.agents {
            a.stdout = None;
            a.stderr = None;
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for a in &mut self.agents {
            a.stdin = None;
            if matches!(a.child.try_wait(), Ok(None)) {
                // An agent that said Done exits by itself; give it a moment.
                let deadline = Instant::now() + Duration::from_millis(500);
                while Instant::now() < deadline && matches!(a.child.try_wait(), Ok(None)) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                let _ = a.child.kill();
            }
            let _ = a.child.wait();
        }
    }
}

/// Starts the job's hosts: only this one when `remote` is `None`; else listens
/// for remote ranks' control connections on the chosen network and starts
/// every host of the placement.
pub fn start_hosts(
    plan: &HostPlan,
    remote: Option<&RemoteSpec>,
    server: &mut ControlServer,
    notices: &mut dyn FnMut(&str),
) -> Result<Cluster, HostError> {
    let Some(spec) = remote else {
        return Cluster::local_only(plan);
    };
    let placement = crate::hosts::place(plan.ranks.len() as u32, &spec.hosts, spec.map_by);
    if let Some(w) = &placement.warning {
        notices(&format!("warning: {w}"));
    }
    let all_local = placement.hosts.iter().all(|(h, _)| is_local(h));
    let remote_control = if all_local {
        String::new()
    } else {
        let ip = spec.net.resolve().map_err(|e| {
            HostError::Setup(format!("choosing the launcher's network address: {e}"))
        })?;
        server
            .listen_tcp(ip.into())
            .map_err(|e| HostError::Setup(format!("cannot listen for remote ranks on {ip}: {e}")))?
            .to_string()
    };
    let local_control = plan.job.control.clone().unwrap_or_default();
    Cluster::start(plan, spec, &placement, &local_control, &remote_control)
}

/// The reason in srun's line if it is srun's refusal to create a step for a
/// reason Slurm itself retries (`launch_common_step_retry_errno`: the job
/// is suspended, the nodes or ports are busy, the controller is slow, its
/// prolog still runs).
fn step_not_yet(line: &str) -> Option<&str> {
    const FOR_NOW: [&str; 5] = [
        "Requested operation is presently disabled",
        "Requested nodes are busy",
        "Resource temporarily unavailable",
        "Socket timed out on send/recv operation",
        "PrologSlurmctld is still running",
    ];
    let (_, reason) = line.split_once("Unable to create step for job ")?;
    let (_, reason) = reason.split_once(": ")?;
    let reason = reason.trim_end();
    FOR_NOW.contains(&reason).then_some(reason)
}

fn spawn_agent(spec: &RemoteSpec, host: &str, plan: HostPlan) -> std::io::Result<Agent> {
    let program = match &spec.agent_program {
        Some(p) => p.clone(),
        None => std::env::current_exe()?,
    };
    let mut cmd = match &spec.starter {
        Starter::Rsh(rsh) => {
            let remote = format!("exec {} agent", quote(&program.to_string_lossy()));
            let (rsh, rsh_args) = rsh
                .split_first()
                .ok_or_else(|| std::io::Error::other("the remote shell command is empty"))?;
            let mut c = Command::new(rsh);
            c.args(rsh_args).arg(host).arg(&remote);
            c
        }
        Starter::Srun => {
            let mut c = Command::new("srun");
            // --unbuffered: the agent's frames must pass as they are written.
            // --immediate: one ask for the step (see Starter::Srun).
            c.args([
                "--nodes=1",
                "--ntasks=1",
                "--overlap",
                "--whole",
                "--immediate=1",
                "--unbuffered",
                "--kill-on-bad-exit=1",
                "--quiet",
                "--mpi=none",
                "--nodelist",
            ])
            .arg(host)
            .arg(&program)
            .arg("agent");
            c
        }
    };
    let srun = spec.starter == Starter::Srun;
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(if srun {
            Stdio::piped()
        } else {
            Stdio::inherit()
        })
        // Its own group: a terminal's Ctrl-C reaches the launcher only, which
        // relays it as Stop.
        .process_group(0);
    let parent = rustix::process::getpid().as_raw_nonzero().get();
    // SAFETY: runs in the forked child before exec; calls only prctl and getppid
    // (async-signal-safe system calls), allocates nothing, takes no lock.
    unsafe {
        cmd.pre_exec(move || {
            // SAFETY: prctl(PR_SET_PDEATHSIG) takes a signal number, no pointers.
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    let stdout = child.stdout.take().map(OwnedFd::from).map(File::from);
    let stderr = child.stderr.take().map(OwnedFd::from).map(File::from);
    for f in stdout.iter().chain(&stderr) {
        rustix::io::ioctl_fionbio(f, true)?;
    }
    let start = ToAgent::Start {
        job: plan.job.clone(),
        host: plan.host.clone(),
        node: plan.node,
        apps: plan.apps.clone(),
        ranks: plan.ranks.clone(),
        env: plan.env.clone(),
        tag_output: plan.tag_output,
    };
    let mut agent = Agent {
        host: host.to_string(),
        stdin: child.stdin.take(),
        child,
        stdout,
        stderr,
        err_line: Vec::new(),
        heard: false,
        not_yet: None,
        retry_at: None,
        starts: 1,
        decoder: FrameDecoder::new(),
        pids: Vec::new(),
        ended: vec![false; plan.ranks.len()],
        done: false,
        give_up_at: None,
        plan,
    };
    agent.tell(&start);
    if agent.stdin.is_none() {
        let _ = agent.child.kill();
        let _ = agent.child.wait();
        return Err(std::io::Error::other(
            "the remote shell closed its input at once",
        ));
    }
    Ok(agent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn srun_refusals_for_now_are_told_from_failures() {
        let disabled = "srun: error: Unable to create step for job 2: \
                        Requested operation is presently disabled\n";
        assert_eq!(
            step_not_yet(disabled),
            Some("Requested operation is presently disabled")
        );
        assert_eq!(
            step_not_yet("srun: error: Unable to create step for job 7: Requested nodes are busy"),
            Some("Requested nodes are busy")
        );
        for failure in [
            "srun: error: Unable to create step for job 2: Invalid node name specified\n",
            "srun: error: Unable to create step for job 2: Job/step already completing or completed\n",
            "srun: error: n1: task 0: Exited with exit code 1\n",
            "Requested operation is presently disabled\n",
        ] {
            assert_eq!(step_not_yet(failure), None, "{failure}");
        }
    }

    #[test]
    fn quoting() {
        assert_eq!(quote("/usr/bin/kumi"), "/usr/bin/kumi");
        assert_eq!(quote("/a b/k'x"), r"'/a b/k'\''x'");
    }
}
