//! The agent: the per-host half of a job on a host the launcher reaches through a
//! remote shell (`kumi agent`, started by `ssh host kumi agent` or `--rsh`).
//!
//! The agent talks to the launcher over the remote shell's own standard input
//! and output, framed like the control channel ([`ToAgent`] in, [`FromAgent`]
//! out). That channel is as private as the remote shell (ssh authenticates and
//! encrypts it), needs no listening port on either side, and tells each side at
//! once when the other is gone: end of file. So:
//!
//! * the launcher gone (stdin at end of file) → the agent kills its ranks and
//!   exits;
//! * the agent gone (its stdout at end of file before `Done`) → the launcher
//!   names the host and stops the job; the agent's ranks die with it
//!   (`PR_SET_PDEATHSIG`, see [`crate::host`]).
//!
//! Everything else is [`LocalHost`], the same code that runs the launcher's own
//! host. The ranks' standard input is `/dev/null` (the agent's own is the
//! channel).

use crate::host::{HostPlan, LocalHost, Reaped};
use crate::job::TICK;
use crate::policy::Termination;
use kumi_core::control::{self, FrameDecoder, FromAgent, ToAgent};
use rustix::event::{PollFd, PollFlags, Timespec};
use std::io::{self, ErrorKind, Read, Write};
use std::os::fd::AsFd;
use std::time::Instant;

fn send(msg: &FromAgent) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(&control::encode(msg))?;
    out.flush()
}

fn read_start() -> Result<ToAgent, String> {
    let mut dec = FrameDecoder::new();
    let mut buf = [0u8; 16 * 1024];
    let mut stdin = io::stdin().lock();
    loop {
        match dec.next_frame::<ToAgent>() {
            Ok(Some(m)) => return Ok(m),
            Ok(None) => {}
            Err(e) => return Err(e.to_string()),
        }
        match stdin.read(&mut buf) {
            Ok(0) => return Err("the launcher closed the channel before starting".into()),
            Ok(n) => dec.push(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("reading from the launcher: {e}")),
        }
    }
}

/// Runs the agent until its ranks have ended; returns the process exit code.
pub fn main() -> i32 {
    match run() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("kumi agent: {e}");
            1
        }
    }
}

fn run() -> Result<(), String> {
    let sigs_wanted = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGCHLD];
    let mut sigs = crate::signals::SignalPipes::new(&sigs_wanted)
        .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    let ToAgent::Start {
        job,
        host,
        node,
        apps,
        ranks,
        env,
        tag_output,
    } = read_start()?
    else {
        return Err("the launcher's first message was not Start".into());
    };
    let plan = HostPlan {
        job,
        host,
        node,
        apps,
        ranks,
        env,
        tag_output,
        forward_stdin: false,
        debug: None,
    };
    let mut host = match LocalHost::start(&plan) {
        Ok(h) => h,
        Err(e) => {
            let _ = send(&FromAgent::Failed {
                code: e.exit_code(),
                message: e.to_string(),
            });
            return Ok(());
        }
    };
    let lost = |e: io::Error| format!("lost the launcher: {e}");
    send(&FromAgent::Started { pids: host.pids() }).map_err(lost)?;
    let stdin = io::stdin();
    let stdin_fd = stdin.as_fd();
    rustix::io::ioctl_fionbio(stdin_fd, true).map_err(|e| format!("stdin: {e}"))?;
    let mut dec = FrameDecoder::new();
    let mut launcher_gone = false;
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut reaped = Vec::new();
    let mut all_reaped_at: Option<Instant> = None;
    loop {
        let now = Instant::now();
        let timeout = host
            .next_deadline()
            .map_or(TICK, |d| d.saturating_duration_since(now).min(TICK));
        let mut ready_pipes = Vec::new();
        let mut stdin_ready = false;
        {
            let pipes: Vec<_> = host.pipe_fds().collect();
            let sig_fds: Vec<_> = sigs.fds().collect();
            let mut fds = Vec::new();
            if !launcher_gone {
                fds.push(PollFd::new(&stdin_fd, PollFlags::IN));
            }
            for (_, fd) in &sig_fds {
                fds.push(PollFd::new(fd, PollFlags::IN));
            }
            for (_, fd) in &pipes {
                fds.push(PollFd::new(fd, PollFlags::IN));
            }
            let ts = Timespec {
                tv_sec: timeout.as_secs() as _,
                tv_nsec: timeout.subsec_nanos() as _,
            };
            let _ = rustix::event::poll(&mut fds, Some(&ts));
            let mut i = 0;
            if !launcher_gone {
                stdin_ready = !fds[0].revents().is_empty();
                i = 1;
            }
            i += sig_fds.len();
            for (k, (id, _)) in pipes.iter().enumerate() {
                if !fds[i + k].revents().is_empty() {
                    ready_pipes.push(*id);
                }
            }
        }
        let now = Instant::now();
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            if sigs.take(sig) {
                host.stop(now);
            }
        }
        sigs.take(libc::SIGCHLD);
        if stdin_ready {
            let mut buf = [0u8; 4096];
            loop {
                match rustix::io::read(stdin_fd, &mut buf) {
                    Ok(0) => {
                        launcher_gone = true;
                        host.kill_all_now();
                        break;
                    }
                    Ok(n) => dec.push(&buf[..n]),
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(rustix::io::Errno::AGAIN) => break,
                    Err(_) => {
                        launcher_gone = true;
                        host.kill_all_now();
                        break;
                    }
                }
            }
            loop {
                match dec.next_frame::<ToAgent>() {
                    Ok(Some(ToAgent::Stop)) => host.stop(now),
                    Ok(Some(ToAgent::Kill)) => host.kill_all_now(),
                    Ok(Some(ToAgent::Start { .. })) | Ok(None) => break,
                    Err(_) => {
                        launcher_gone = true;
                        host.kill_all_now();
                        break;
                    }
                }
            }
        }
        for id in ready_pipes {
            host.read_pipe(id, &mut out, &mut err);
        }
        flush_output(&mut out, &mut err, launcher_gone);
        host.reap(&mut reaped);
        for Reaped {
            rank,
            pid,
            how,
            call,
        } in reaped.drain(..)
        {
            let (code, signal) = match how {
                Termination::Exited(c) => (Some(c), None),
                Termination::Signaled(s) => (None, Some(s)),
            };
            if !launcher_gone {
                let _ = send(&FromAgent::Reaped {
                    rank,
                    pid,
                    code,
                    signal,
                    call: call as u32,
                });
            }
        }
        host.tick(now);
        if host.running() == 0 {
            let at = *all_reaped_at.get_or_insert(now);
            if host.pipes_closed() || now >= at + crate::job::PIPE_GRACE {
                host.close_pipes(&mut out, &mut err);
                flush_output(&mut out, &mut err, launcher_gone);
                if !launcher_gone {
                    let _ = send(&FromAgent::Done);
                }
                return Ok(());
            }
        }
    }
}

fn flush_output(out: &mut Vec<u8>, err: &mut Vec<u8>, launcher_gone: bool) {
    for (stderr, buf) in [(false, &mut *out), (true, &mut *err)] {
        if !launcher_gone {
            // Frames stay well under the channel's limit.
            for chunk in buf.chunks(control::MAX_FRAME / 2) {
                let _ = send(&FromAgent::Output {
                    stderr,
                    data: chunk.to_vec(),
                });
            }
        }
        buf.clear();
    }
}
