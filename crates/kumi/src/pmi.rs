//! A rank started by a process manager that speaks PMI-2 (`srun
//! --mpi=pmi2`): its identity and its key-value exchange come from the
//! process manager instead of `kumi run` ([`kumi_core::pmi`] holds the
//! protocol; this module owns the socket).
//!
//! What the process manager does not give, kumi derives the same way on
//! every rank: the job id from PMI's (so the ranks of a host name one shared
//! segment), the job secret from rank 0 (published before anything else),
//! the host's ranks from `PMI_process_mapping`. An abort is PMI's `abort`,
//! which makes the process manager end every rank of the job.

use crate::bootstrap::{flat_key, Exchange, Identity};
use crate::error::{Error, Result};
use kumi_core::control::{from_hex, to_hex};
use kumi_core::pmi::{self, Decoder, PmiEnv, PmiError, Reply};
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::OnceLock;

/// The PMI-2 socket, for the last words of a rank that fails outside
/// kumi's control (a fatal signal, an exit without finalize): -1 when the
/// rank was not started over PMI-2. Set once at init, before any handler
/// that reads it is installed; SeqCst is more than enough for a value
/// written once.
static LAST_WORDS_FD: AtomicI32 = AtomicI32::new(-1);
/// Set when the rank finalized (or aborted by itself): an exit is then
/// expected and says nothing.
static DONE: AtomicBool = AtomicBool::new(false);
/// A signal, its abort frame and its line for stderr.
type Words = (i32, Vec<u8>, Vec<u8>);
/// Per fatal signal, built at init so that the handler only writes
/// (async-signal-safe).
static LAST_WORDS: OnceLock<Vec<Words>> = OnceLock::new();
/// The abort frame for an exit without finalize.
static EXIT_WORDS: OnceLock<(Vec<u8>, Vec<u8>)> = OnceLock::new();

/// The signals after which a rank cannot go on; each ends the job.
const FATAL: [(i32, &str); 5] = [
    (libc::SIGSEGV, "SIGSEGV"),
    (libc::SIGBUS, "SIGBUS"),
    (libc::SIGFPE, "SIGFPE"),
    (libc::SIGILL, "SIGILL"),
    (libc::SIGABRT, "SIGABRT"),
];

fn abort_frame(message: &str) -> Vec<u8> {
    let msg: String = message
        .chars()
        .map(|c| {
            if matches!(c, ';' | '=' | '\n') {
                ' '
            } else {
                c
            }
        })
        .take(pmi::MAX_VALUE)
        .collect();
    pmi::command("abort", &[("isworld", "TRUE"), ("msg", &msg)]).unwrap_or_default()
}

/// Writes `bytes` to `fd` with no allocation and no lock (from a signal
/// handler or an exit handler).
fn write_all_raw(fd: i32, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: write(2) on a descriptor number with a valid buffer and
        // length; a closed or wrong descriptor only makes it fail.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n <= 0 {
            return;
        }
        bytes = &bytes[n as usize..];
    }
}

extern "C" fn on_fatal_signal(sig: libc::c_int) {
    let fd = LAST_WORDS_FD.load(Ordering::SeqCst);
    if let Some(words) = LAST_WORDS.get() {
        if let Some((_, frame, line)) = words.iter().find(|(s, _, _)| *s == sig) {
            write_all_raw(2, line);
            if fd >= 0 && !DONE.swap(true, Ordering::SeqCst) {
                write_all_raw(fd, frame);
            }
        }
    }
    // SA_RESETHAND restored the default action: die of the signal as if
    // kumi had not been there.
    // SAFETY: raise(3) is async-signal-safe.
    unsafe { libc::raise(sig) };
}

extern "C" fn on_exit() {
    let fd = LAST_WORDS_FD.load(Ordering::SeqCst);
    if fd < 0 {
        // A PMIx server's rank: its client library ends the job (this runs
        // in exit(), not in a signal handler, so the library may be called).
        if let Some(rank) = EXIT_RANK.get() {
            end_job(&format!("rank {rank} exited without finalizing kumi"));
        }
        return;
    }
    if DONE.swap(true, Ordering::SeqCst) {
        return;
    }
    if let Some((frame, line)) = EXIT_WORDS.get() {
        write_all_raw(2, line);
        write_all_raw(fd, frame);
    }
}

/// The rank of a PMIx server's rank, for its exit words.
static EXIT_RANK: OnceLock<u32> = OnceLock::new();

/// Makes an exit without finalize of a rank that a PMIx server started end
/// the job (fatal signals are not handled there: its client library cannot
/// be called from a signal handler).
pub(crate) fn arm_exit_words(rank: u32) {
    if EXIT_RANK.set(rank).is_ok() {
        // SAFETY: registers a plain extern "C" fn with no arguments.
        unsafe { libc::atexit(on_exit) };
    }
}

/// Makes a failure of this rank outside kumi's calls end the job, as `kumi
/// run` would: a fatal signal, or an exit without finalizing, sends PMI's
/// `abort` (the process manager alone would let the others wait forever).
/// A signal the program already handles is left to it.
fn arm_last_words(fd: i32, rank: u32) {
    let _ = LAST_WORDS.set(
        FATAL
            .iter()
            .map(|&(sig, name)| {
                let why = format!("rank {rank} was killed by signal {name}");
                (
                    sig,
                    abort_frame(&why),
                    format!("kumi: {why}; ending the job\n").into_bytes(),
                )
            })
            .collect(),
    );
    let why = format!("rank {rank} exited without finalizing kumi");
    let _ = EXIT_WORDS.set((
        abort_frame(&why),
        format!("kumi: {why}; ending the job\n").into_bytes(),
    ));
    LAST_WORDS_FD.store(fd, Ordering::SeqCst);
    for (sig, _) in FATAL {
        // SAFETY: sigaction with a zeroed struct to read the current action,
        // then with our handler (an extern "C" fn of the right type) and
        // SA_RESETHAND; no other thread changes these signals' actions here.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                || old.sa_sigaction != libc::SIG_DFL
            {
                continue;
            }
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_fatal_signal as *const () as libc::sighandler_t;
            act.sa_flags = libc::SA_RESETHAND | libc::SA_ONSTACK;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
    }
    // SAFETY: registers a plain extern "C" fn with no arguments.
    unsafe { libc::atexit(on_exit) };
}

/// Ends the job through the process manager from anywhere (a failed init,
/// a lost peer): the message goes to stderr and to the process manager.
/// Nothing happens for a rank not started by a process manager.
pub(crate) fn end_job(message: &str) {
    let fd = LAST_WORDS_FD.load(Ordering::SeqCst);
    if DONE.swap(true, Ordering::SeqCst) {
        return;
    }
    if fd >= 0 {
        eprintln!("kumi: {message}; ending the job");
        write_all_raw(fd, &abort_frame(message));
    } else if crate::pmix::end_job(message) {
        eprintln!("kumi: {message}; ending the job");
    }
}

/// The PMI-2 client of a rank.
pub(crate) struct Pmi2 {
    stream: UnixStream,
    decoder: Decoder,
    jobid: String,
}

fn err(e: PmiError) -> Error {
    Error::Bootstrap(e.to_string())
}

fn io(e: std::io::Error) -> Error {
    Error::Bootstrap(format!("lost the process manager's PMI-2 socket: {e}"))
}

impl Pmi2 {
    /// Opens the exchange on `env.fd` and learns who this rank is.
    pub fn connect(env: &PmiEnv) -> Result<(Pmi2, Identity)> {
        // SAFETY: the process manager opened PMI_FD for this process and
        // named it in the environment; nothing else in the process uses it
        // (kumi reads the environment once, at init, and init runs once).
        let stream = unsafe { UnixStream::from_raw_fd(env.fd) };
        let mut p = Pmi2 {
            stream,
            decoder: Decoder::default(),
            jobid: String::new(),
        };
        p.stream.write_all(pmi::INIT_LINE.as_bytes()).map_err(io)?;
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        while line.last() != Some(&b'\n') {
            if line.len() > 4096 || p.stream.read(&mut byte).map_err(io)? == 0 {
                return Err(Error::Bootstrap(
                    "the process manager closed the PMI-2 socket during init".into(),
                ));
            }
            line.push(byte[0]);
        }
        pmi::check_init_reply(&String::from_utf8_lossy(&line)).map_err(err)?;
        arm_last_words(env.fd, env.rank);
        let rank = env.rank.to_string();
        let mut args = vec![("pmirank", rank.as_str()), ("threaded", "FALSE")];
        if let Some(j) = &env.jobid {
            args.insert(0, ("pmijobid", j.as_str()));
        }
        let r = p.call("fullinit", &args)?;
        let (rank, size): (u32, u32) = (
            r.number("rank").map_err(err)?,
            r.number("size").map_err(err)?,
        );
        if rank != env.rank || size != env.size {
            return Err(Error::Bootstrap(format!(
                "PMI-2 says rank {rank} of {size}, the environment {} of {}",
                env.rank, env.size
            )));
        }
        // Slurm answers -1 when the job has one program.
        let appnum = r
            .number::<i64>("appnum")
            .map_or(0, |a| u32::try_from(a).unwrap_or(0));
        p.jobid = p
            .call("job-getid", &[])?
            .need("jobid")
            .map_err(err)?
            .to_string();
        let mapping = p.call("info-getjobattr", &[("key", "PMI_process_mapping")])?;
        let nodes = match mapping.found().map_err(err)? {
            Some(m) => pmi::process_mapping(m, size).map_err(err)?,
            // No mapping: every rank on a host of its own.
            None => (0..size).collect(),
        };
        let place = pmi::placement(&nodes, rank).ok_or_else(|| {
            Error::Bootstrap(format!("rank {rank} is not in the process mapping"))
        })?;
        let job = job_id("pmi", &p.jobid);
        let secret = share_secret(&mut p, rank)?;
        let host = std::env::var("SLURMD_NODENAME")
            .ok()
            .filter(|h| !h.is_empty() && !h.contains(char::is_whitespace))
            .unwrap_or_else(|| format!("node{}", place.node));
        let id = Identity {
            job,
            rank,
            size,
            local_rank: place.local_rank,
            local_size: place.host_ranks.len() as u32,
            control: None,
            secret,
            shm_fd: None,
            host_ranks: Some(place.host_ranks),
            host,
            net: String::new(),
            local_cores: None,
            appnum,
        };
        Ok((p, id))
    }

    fn call(&mut self, cmd: &str, args: &[(&str, &str)]) -> Result<Reply> {
        let frame = pmi::command(cmd, args).map_err(err)?;
        self.stream.write_all(&frame).map_err(io)?;
        let mut buf = [0u8; 4096];
        loop {
            if let Some(body) = self.decoder.next_frame().map_err(err)? {
                return Reply::parse(&body, cmd).map_err(err);
            }
            let n = self.stream.read(&mut buf).map_err(io)?;
            if n == 0 {
                return Err(Error::Bootstrap(
                    "the process manager closed the PMI-2 socket".into(),
                ));
            }
            self.decoder.push(&buf[..n]);
        }
    }

    /// Asks the process manager to end every rank of the job (it does not
    /// answer). `message` is reduced to what the wire can carry.
    pub fn abort(&mut self, message: &str) {
        if !DONE.swap(true, Ordering::SeqCst) {
            let _ = self.stream.write_all(&abort_frame(message));
        }
    }

    /// Ends the exchange (the process manager then expects this rank to
    /// exit).
    pub fn finalize(&mut self) -> Result<()> {
        DONE.store(true, Ordering::SeqCst);
        self.call("finalize", &[]).map(drop)
    }
}

impl Exchange for Pmi2 {
    fn put(&mut self, rank: u32, key: &str, value: Vec<u8>) -> Result<()> {
        let key = &flat_key(rank, key);
        let hex = to_hex(&value);
        if hex.len() > pmi::MAX_VALUE {
            return Err(Error::Bootstrap(format!(
                "a {}-byte value for {key} is more than PMI-2 carries",
                value.len()
            )));
        }
        self.call("kvs-put", &[("key", key), ("value", &hex)])
            .map(drop)
    }

    fn fence(&mut self) -> Result<()> {
        self.call("kvs-fence", &[]).map(drop)
    }

    fn get_many(&mut self, keys: &[(u32, String)]) -> Result<Vec<Option<Vec<u8>>>> {
        let jobid = self.jobid.clone();
        keys.iter()
            .map(|(rank, k)| {
                let k = &flat_key(*rank, k);
                let r = self.call("kvs-get", &[("jobid", &jobid), ("srcid", "-1"), ("key", k)])?;
                match r.found().map_err(err)? {
                    None => Ok(None),
                    Some(v) => from_hex(v).map(Some).ok_or_else(|| {
                        Error::Bootstrap(format!("the value of {k} is not what kumi published"))
                    }),
                }
            })
            .collect()
    }
}

/// kumi's job id for a process manager's (`kind-id`, in the characters a
/// segment name takes): the same on every rank of the job.
pub(crate) fn job_id(kind: &str, id: &str) -> String {
    format!("{kind}-{id}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// The job secret, for a job whose starter gave none: rank 0's random
/// bytes, published and read back by every rank before any address (the
/// transports prove it to each other). One fence.
pub(crate) fn share_secret(ex: &mut dyn Exchange, rank: u32) -> Result<Vec<u8>> {
    const KEY: &str = "kumi-secret";
    if rank == 0 {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret)
            .map_err(|e| Error::Bootstrap(format!("no randomness for the job secret: {e}")))?;
        ex.put(0, KEY, secret.to_vec())?;
    }
    ex.fence()?;
    ex.get_many(&[(0, KEY.to_string())])?
        .pop()
        .flatten()
        .ok_or_else(|| Error::Bootstrap("rank 0 published no job secret".into()))
}

/// The process manager that started this rank, when it was not `kumi run`.
pub(crate) enum Manager {
    /// A PMI-2 one (`srun --mpi=pmi2`).
    Pmi2(Pmi2),
    /// A PMIx server (`srun --mpi=pmix`). Boxed: its client holds the
    /// rank's 260-byte PMIx name.
    Pmix(Box<crate::pmix::Pmix>),
}

impl Manager {
    /// The manager named by the environment, connected, and this rank's
    /// identity; `None` when none started this process.
    pub fn connect() -> Result<Option<(Manager, Identity)>> {
        if let Some(env) = PmiEnv::parse(|n| std::env::var(n).ok()).map_err(err)? {
            let (p, id) = Pmi2::connect(&env)?;
            return Ok(Some((Manager::Pmi2(p), id)));
        }
        if std::env::var_os("PMIX_RANK").is_some() {
            let (p, id) = crate::pmix::Pmix::connect()?;
            return Ok(Some((Manager::Pmix(Box::new(p)), id)));
        }
        Ok(None)
    }

    /// Asks the manager to end every rank of the job.
    pub fn abort(&mut self, message: &str) {
        match self {
            Manager::Pmi2(p) => p.abort(message),
            Manager::Pmix(p) => p.abort(message),
        }
    }

    /// Ends the exchange at finalize.
    pub fn finalize(&mut self) -> Result<()> {
        match self {
            Manager::Pmi2(p) => p.finalize(),
            Manager::Pmix(p) => p.finalize(),
        }
    }

    fn exchange(&mut self) -> &mut dyn Exchange {
        match self {
            Manager::Pmi2(p) => p,
            Manager::Pmix(p) => &mut **p,
        }
    }
}

impl Exchange for Manager {
    fn put(&mut self, rank: u32, key: &str, value: Vec<u8>) -> Result<()> {
        self.exchange().put(rank, key, value)
    }
    fn fence(&mut self) -> Result<()> {
        self.exchange().fence()
    }
    fn get_many(&mut self, keys: &[(u32, String)]) -> Result<Vec<Option<Vec<u8>>>> {
        self.exchange().get_many(keys)
    }
}
