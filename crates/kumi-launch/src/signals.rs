//! Signals: naming them for reports, and turning their delivery into readable
//! file descriptors for the event loop.
//!
//! A signal handler may do almost nothing safely, so the handlers (installed by
//! `signal-hook`) only write a byte into a pipe; the event loop polls the read
//! ends next to its sockets and pipes. One pipe per signal tells which one came.

use signal_hook::low_level::pipe;
use signal_hook::SigId;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;

/// The name of a signal (`SIGSEGV`), or `signal N` for one without a name here.
pub fn name(sig: i32) -> String {
    match lookup(sig) {
        Some((n, _)) => n.to_string(),
        None => format!("signal {sig}"),
    }
}

/// Name and meaning of a signal: `SIGSEGV (segmentation fault)`.
pub fn describe(sig: i32) -> String {
    match lookup(sig) {
        Some((n, what)) => format!("{n} ({what})"),
        None => format!("signal {sig}"),
    }
}

fn lookup(sig: i32) -> Option<(&'static str, &'static str)> {
    Some(match sig {
        libc::SIGHUP => ("SIGHUP", "hangup"),
        libc::SIGINT => ("SIGINT", "interrupt"),
        libc::SIGQUIT => ("SIGQUIT", "quit"),
        libc::SIGILL => ("SIGILL", "illegal instruction"),
        libc::SIGTRAP => ("SIGTRAP", "trace/breakpoint trap"),
        libc::SIGABRT => ("SIGABRT", "aborted"),
        libc::SIGBUS => ("SIGBUS", "bus error"),
        libc::SIGFPE => ("SIGFPE", "floating-point exception"),
        libc::SIGKILL => ("SIGKILL", "killed"),
        libc::SIGUSR1 => ("SIGUSR1", "user signal 1"),
        libc::SIGSEGV => ("SIGSEGV", "segmentation fault"),
        libc::SIGUSR2 => ("SIGUSR2", "user signal 2"),
        libc::SIGPIPE => ("SIGPIPE", "broken pipe"),
        libc::SIGALRM => ("SIGALRM", "alarm clock"),
        libc::SIGTERM => ("SIGTERM", "terminated"),
        libc::SIGSTKFLT => ("SIGSTKFLT", "stack fault"),
        libc::SIGCHLD => ("SIGCHLD", "child status changed"),
        libc::SIGCONT => ("SIGCONT", "continued"),
        libc::SIGSTOP => ("SIGSTOP", "stopped"),
        libc::SIGTSTP => ("SIGTSTP", "stopped at terminal"),
        libc::SIGTTIN => ("SIGTTIN", "stopped on terminal input"),
        libc::SIGTTOU => ("SIGTTOU", "stopped on terminal output"),
        libc::SIGURG => ("SIGURG", "urgent I/O condition"),
        libc::SIGXCPU => ("SIGXCPU", "CPU time limit exceeded"),
        libc::SIGXFSZ => ("SIGXFSZ", "file size limit exceeded"),
        libc::SIGVTALRM => ("SIGVTALRM", "virtual timer expired"),
        libc::SIGPROF => ("SIGPROF", "profiling timer expired"),
        libc::SIGWINCH => ("SIGWINCH", "window changed"),
        libc::SIGIO => ("SIGIO", "I/O possible"),
        libc::SIGPWR => ("SIGPWR", "power failure"),
        libc::SIGSYS => ("SIGSYS", "bad system call"),
        _ => return None,
    })
}

/// Signals delivered as readable pipes. Dropping it unregisters the handlers'
/// actions (signal-hook keeps its handler installed, doing nothing).
pub struct SignalPipes {
    pipes: Vec<(i32, UnixStream, SigId)>,
}

impl SignalPipes {
    /// Starts catching `signals`.
    pub fn new(signals: &[i32]) -> io::Result<SignalPipes> {
        let mut pipes = Vec::with_capacity(signals.len());
        for &sig in signals {
            let (read, write) = UnixStream::pair()?;
            read.set_nonblocking(true)?;
            write.set_nonblocking(true)?;
            let id = pipe::register(sig, write)?;
            pipes.push((sig, read, id));
        }
        Ok(SignalPipes { pipes })
    }

    /// The read ends, with the signal each stands for.
    pub fn fds(&self) -> impl Iterator<Item = (i32, BorrowedFd<'_>)> {
        self.pipes.iter().map(|(sig, read, _)| (*sig, read.as_fd()))
    }

    /// Empties the pipe of `sig`; true if it had been delivered since last time.
    pub fn take(&mut self, sig: i32) -> bool {
        let mut seen = false;
        if let Some((_, read, _)) = self.pipes.iter_mut().find(|(s, _, _)| *s == sig) {
            let mut buf = [0u8; 64];
            while let Ok(n) = read.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen = true;
            }
        }
        seen
    }
}

impl Drop for SignalPipes {
    fn drop(&mut self) {
        for (_, _, id) in self.pipes.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_common_signals() {
        assert_eq!(describe(libc::SIGSEGV), "SIGSEGV (segmentation fault)");
        assert_eq!(name(libc::SIGINT), "SIGINT");
        assert_eq!(name(77), "signal 77");
    }
}
