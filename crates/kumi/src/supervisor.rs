//! A rank's side of the supervisor of a job that a process manager started
//! (`srun`), where no `kumi run` sits beside the ranks (the supervisor
//! itself is `kumi supervise`, in kumi-launch's `step` module).
//!
//! Rank 0 starts it before the job's first fence and publishes its address
//! with its card; after the fence every rank connects to it as to `kumi
//! run`'s control channel (the job secret's proof first), so the rank's
//! reports, counters and `Finalize` reach it unchanged. A listener thread
//! waits for its one order, [`ToRank::End`]: the job is being ended (a
//! deadlock, a rank killed), and the rank exits with the code at once.

use crate::bootstrap::{Control, Identity, Stream};
use kumi_core::config::{Supervisor, Tuning};
use kumi_core::control::{self, FrameDecoder, ToRank};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The key under which rank 0 publishes the supervisor's address.
pub(crate) const KEY: &str = "supervisor";

/// Rank 0: starts the supervisor listening at `ip`; its address, or `None`
/// (said on stderr) when there is none.
pub(crate) fn start(id: &Identity, ip: std::net::IpAddr, tuning: &Tuning) -> Option<String> {
    let program = match &tuning.supervisor {
        Supervisor::Off => return None,
        Supervisor::Program(p) => Some(p.clone()),
        Supervisor::Auto => beside_library(),
    };
    let Some(program) = program else {
        eprintln!(
            "kumi: no `kumi` program beside kumi's library or on PATH: this job has no supervisor (no deadlock detection, no statistics, no end of the job when a rank is killed); set KUMI_SUPERVISOR to its path, or to off"
        );
        return None;
    };
    let name = std::env::args_os()
        .next()
        .map(|a| {
            Path::new(&a)
                .file_name()
                .unwrap_or(&a)
                .to_string_lossy()
                .into_owned()
        })
        .unwrap_or_default();
    let mut cmd = Command::new(&program);
    cmd.arg("supervise")
        .args(["--job", &id.job, "--size", &id.size.to_string()])
        .args(["--ip", &ip.to_string(), "--program", &name])
        .args(&tuning.supervise)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    // SAFETY: runs in the forked child before exec and only makes one
    // system call (async-signal-safe, no allocation, no lock).
    unsafe {
        cmd.pre_exec(|| {
            // Not the process manager's descriptors (PMI_FD): the job's
            // end must not wait for the supervisor to let go of them. Its
            // stdio is set up by now.
            // SAFETY: close_range takes two numbers and a flag, no pointers.
            libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
            Ok(())
        });
    }
    let started = cmd.spawn().and_then(|mut child| {
        let mut stdin = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("no stdin"))?;
        writeln!(stdin, "{}", control::to_hex(&id.secret))?;
        drop(stdin);
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        // The supervisor outlives this handle; the job's end reaps it.
        std::mem::forget(child);
        match line.trim() {
            "" => Err(std::io::Error::other("it ended before it listened")),
            addr => Ok(addr.to_string()),
        }
    });
    match started {
        Ok(addr) => Some(addr),
        Err(e) => {
            eprintln!(
                "kumi: cannot start the supervisor {}: {e}; this job has none (no deadlock detection, no statistics)",
                program.display()
            );
            None
        }
    }
}

/// Every rank: connects to the supervisor at `addr` (empty: there is none)
/// and starts the thread that obeys its [`ToRank::End`]. A rank that cannot
/// says so and runs unsupervised: the supervisor is a service to the job,
/// not a condition of it.
pub(crate) fn join(id: &Identity, addr: &str) -> Option<Control> {
    if addr.is_empty() {
        return None;
    }
    let at = Identity {
        control: Some(addr.to_string()),
        ..id.clone()
    };
    let joined = Control::connect(&at).and_then(|c| {
        let reader = c.sender()?;
        std::thread::Builder::new()
            .name("kumi-supervisor".into())
            .spawn(move || obey(reader))
            .map_err(|e| crate::error::Error::Bootstrap(format!("cannot start a thread: {e}")))?;
        Ok(c)
    });
    joined
        .inspect_err(|e| {
            eprintln!(
                "kumi: rank {}: cannot join the job's supervisor at {addr}: {e}; this rank runs unsupervised",
                id.rank
            )
        })
        .ok()
}

/// Waits for the supervisor's order to end; returns if it goes away.
fn obey(mut stream: Stream) {
    let mut decoder = FrameDecoder::new();
    let mut buf = [0u8; 1024];
    loop {
        match decoder.next_frame::<ToRank>() {
            Ok(Some(ToRank::End { code })) => {
                // SAFETY: _exit ends the process at once, running no
                // destructor or atexit handler (which would report an exit
                // without finalize to the process manager); it touches no
                // memory of this program.
                unsafe { libc::_exit(code) }
            }
            Ok(Some(_)) => continue,
            Ok(None) => {}
            Err(_) => return,
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => decoder.push(&buf[..n]),
        }
    }
}

/// The `kumi` program beside the object this code was loaded from
/// (`libmpi.so` in a build tree, `lib/` of an install, or a Rust program),
/// else on `PATH`.
fn beside_library() -> Option<PathBuf> {
    // SAFETY: Dl_info is a C struct of pointers and an address, for which
    // all zeroes is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr reads the address of a function of this object and
    // fills `info`, whose string it points at the loader's own copy (valid
    // while the object stays loaded, which it does while this code runs).
    let found = unsafe { libc::dladdr(beside_library as *const libc::c_void, &mut info) } != 0
        && !info.dli_fname.is_null();
    let mut candidates = Vec::new();
    if found {
        // SAFETY: dli_fname is a NUL-terminated string (checked non-null above).
        let object = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
        let object = Path::new(std::ffi::OsStr::from_bytes(object.to_bytes()));
        if let Some(dir) = std::fs::canonicalize(object)
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
        {
            candidates.extend([
                dir.join("kumi"),
                dir.join("../bin/kumi"),
                dir.join("../kumi"),
            ]);
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join("kumi")));
    }
    candidates.into_iter().find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
