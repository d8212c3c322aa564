//! kumi: the runtime a rank links.
//!
//! A program calls [`init`] once, gets a [`Universe`], and talks to other ranks
//! through communicators ([`Comm`]): MPI's point-to-point semantics (blocking
//! and nonblocking sends and receives, wildcards, probes, statuses, per-sender
//! order), node-aware collectives and the combining service ([`Combiner`]),
//! one-sided windows ([`win`]), distributed shared memory ([`dsm`]), parallel files ([`file`](mod@file)), inter-communicators
//! ([`inter`]) and process topologies ([`topo`]). [`raw`] is the untyped
//! interface the MPI library (`kumi-mpi`) maps onto. Started by `kumi run -n
//! N`, the program is one of N ranks; started by hand, it is a job of size 1.
//!
//! ```no_run
//! let universe = kumi::init()?;
//! let world = universe.world();
//! if world.rank() == 0 {
//!     world.send(&[1.5f64, 2.5], 1, 7)?;
//! } else if world.rank() == 1 {
//!     let mut buf = [0f64; 2];
//!     let status = world.recv(&mut buf, kumi::ANY_SOURCE, 7)?;
//!     assert_eq!((status.source, status.bytes), (0, 16));
//! }
//! # Ok::<(), kumi::Error>(())
//! ```
//!
//! May depend on: kumi-core (protocol logic, configuration) and kumi-transport
//! (moving frames). The launcher never links it; the CLI does, for the ranks
//! of `kumi bench` (`kumi bench-rank`), which are kumi programs like any other.
//!
//! Inside: the engine (`engine/`: transports, frames in and out, the
//! point-to-point protocol, requests, waiting) and the services beside it
//! (`services.rs`: collectives, one-sided access, contexts), which register
//! the frame kinds they handle; the configuration is read once, in [`init`],
//! and passed down.
//!
//! Design decisions a newcomer might otherwise undo:
//! - **Progress happens inside kumi calls**, on the calling thread: no thread
//!   hand-off on the small-message path, one uncontended lock per call. A
//!   progress thread beside the engine (`progress.rs`) steps in only while the
//!   application stays out of kumi with work outstanding, so a computing rank
//!   still forwards and combines for others (`KUMI_PROGRESS`).
//! - **Nonblocking operations borrow through a [`Scope`]**, which waits for them
//!   before it ends; that is what makes them sound even if a request is leaked.
//!   Sends and receives, and the collectives on the program's buffers
//!   ([`Comm::iallgather_into`], [`Comm::iallreduce_into`],
//!   [`Comm::ineighbor_exchange_into`]...), both; the owned-vector
//!   collectives ([`Comm::iallgather`]...) need no scope but allocate and
//!   copy.
//! - **Errors are values.** A receive buffer that is too small is an
//!   [`Error::Truncated`] naming both sizes, never a silent truncation.
#![deny(missing_docs)]

mod bind;
mod bootstrap;
pub mod checkpoint;
mod coll;
mod comm;
mod ctxs;
pub mod datatype;
pub mod dsm;
mod engine;
mod error;
pub mod file;
pub mod inter;
mod nbhd;
mod net;
mod pmi;
mod pmix;
mod progress;
pub mod raw;
mod report;
mod request;
mod rma;
mod services;
mod supervisor;
pub mod threads;
mod watch;
pub mod win;

#[cfg(target_arch = "x86_64")]
pub use coll::LongDouble;
pub use coll::{
    Arrival, Builtin, CollRequest, CombineOp, CombineValue, Combiner, Elem, Loc, LocInt, LocValue,
    Op, ScopedRequest, ALL_BUILTINS,
};
pub use comm::{Comm, Idup};
pub use error::{Error, Result};
pub use kumi_core::{topo, ANY_SOURCE, ANY_TAG, TAG_UB};
/// Complex numbers for reductions (`Op::<Complex<f64>>::sum()`): the
/// `num-complex` crate's type, laid out as C's `double _Complex`.
pub use num_complex::Complex;
pub use report::Counters;
pub use request::{scope, test_all, test_any, wait_all, wait_any, Request, Scope, Status};
pub use watch::AbiCall;

use bootstrap::{Control, Exchange, Identity};
use engine::{Engine, EngineSetup};
use kumi_core::call::Call;
use kumi_core::config::{self, Tuning};
use kumi_core::control::ToLauncher;
use kumi_core::rankenv::RankEnv;
use kumi_transport::shm::{Segment, ShmConfig, ShmTransport};
use kumi_transport::{cma, Capabilities};
use progress::{EngineRef, Shared};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

static INITIALIZED: AtomicBool = AtomicBool::new(false);

/// The running job, as seen from this rank. Dropping it finalizes kumi (a
/// barrier with every other rank, then a word to the launcher).
pub struct Universe {
    engine: EngineRef,
    world: Comm,
    control: Option<Arc<Mutex<Control>>>,
    /// The process manager that started this rank (`srun`), if not `kumi run`.
    pmi: Option<Mutex<pmi::Manager>>,
    id: Identity,
    finalized: bool,
    net_addr: Option<std::net::SocketAddr>,
    /// `KUMI_CKPT_*`, read with the rest of the configuration.
    checkpoint: Option<kumi_core::checkpoint::Settings>,
}

/// Starts kumi in this process. Call once, before any communication.
pub fn init() -> Result<Universe> {
    // Relaxed suffices: this only refuses a second init; it orders no other data.
    if INITIALIZED.swap(true, Ordering::Relaxed) {
        return Err(Error::Bootstrap(
            "kumi::init was called twice in one process".into(),
        ));
    }
    start().inspect_err(|e| {
        // Under a process manager, the other ranks would wait for this one
        // forever: end the job (under `kumi run` the launcher does).
        let rank = std::env::var("PMI_RANK").unwrap_or_else(|_| "?".into());
        pmi::end_job(&format!("rank {rank} could not start: {e}"));
    })
}

/// [`init`] itself, once.
fn start() -> Result<Universe> {
    // The environment is read here, once: the launcher's contract and every
    // tuning variable, checked; everything below takes values.
    let env = config::Env::from_os(std::env::vars_os());
    let contract = RankEnv::parse(&env).map_err(|e| Error::Bootstrap(e.to_string()))?;
    let tuning = Tuning::parse(&env).map_err(|e| Error::Bootstrap(e.to_string()))?;
    let checkpoint = kumi_core::checkpoint::Settings::parse(&env)
        .map_err(|e| Error::Bootstrap(e.to_string()))?;
    if contract.as_ref().is_none_or(|c| c.job.control.is_none()) {
        // Under a launcher, the launcher reported them, once for the job.
        for line in env.unknown() {
            eprintln!("kumi: {line}");
        }
    }
    if tuning.deny_cma {
        cma::deny_for_tests();
    }
    if env.get("KUMI_DEBUGGED") == Some("1") {
        // Under `kumi run --debug` this rank's parent is the debugger, not
        // the launcher: die with it, as every other rank dies with the
        // launcher (which set this for its own children).
        // SAFETY: prctl(PR_SET_PDEATHSIG) takes a signal number, no pointers.
        unsafe {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            )
        };
    }
    // Not started by `kumi run`: perhaps by a process manager (srun).
    let manager = match contract {
        Some(_) => None,
        None => pmi::Manager::connect()?,
    };
    let (id, mut pmi) = match manager {
        Some((m, id)) => (id, Some(m)),
        None => (Identity::new(contract), None),
    };
    let mut control = match id.control {
        Some(_) => Some(Control::connect(&id)?),
        None if id.size > 1 && pmi.is_none() => {
            return Err(Error::Bootstrap(
                "KUMI_SIZE > 1 but no KUMI_CONTROL: start the job with `kumi run`".into(),
            ))
        }
        None => None,
    };
    cma::allow_peer_access();

    // The ranks of this host, by local rank.
    let globals: Vec<u32> = net::host_ranks(&id)?;
    let route = net::routes(&id, &globals, &tuning.net.force);
    let mut link = net::start(&id, &route, &tuning.net)?;
    let cores = id
        .local_cores
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let oversubscribed = id.local_size as usize > cores;

    let segment = match (id.shm_fd, &mut control) {
        (Some(fd), _) => {
            // SAFETY: the launcher opened this descriptor for us and named it in
            // KUMI_SHM_FD; nothing else in this process owns it.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            Some(
                Segment::from_fd(fd, id.local_size as usize)
                    .map_err(|e| Error::Bootstrap(format!("shared segment: {e}")))?,
            )
        }
        _ if id.size > 1 => match exchange(&mut control, &mut pmi) {
            Some(ex) => named_segment(&id, ex, &tuning)?,
            None => None,
        },
        _ => None,
    };
    // The host's choice, made once by whoever created its segment; a rank
    // alone on its host has no peer to copy from.
    let single_copy = segment.as_ref().is_some_and(Segment::single_copy);
    // The transport attaches this rank to its block (pid, start time); after the
    // fence every local rank has, so their pids can be read for single copy.
    let shm = match segment {
        Some(seg) => {
            let mut t = ShmTransport::new(
                seg,
                id.local_rank as usize,
                globals.clone(),
                tuning.shm.membarrier,
            )?;
            if oversubscribed {
                t.use_full_fences();
            }
            // How far ahead a consumer asks for ring lines (see
            // `Consumer::set_prefetch`): 4 lines by measurement, 0 turns it off.
            t.set_prefetch(tuning.shm.prefetch);
            Some(t)
        }
        None => None,
    };
    // Under a process manager rank 0 starts the supervisor `kumi run` would
    // be, and publishes where it listens (empty: nowhere) with its card.
    let supervisor = match &pmi {
        Some(_) if id.size > 1 && id.rank == 0 => {
            let ip = link
                .as_ref()
                .map_or(std::net::Ipv4Addr::LOCALHOST.into(), |l| {
                    l.local_addr().ip()
                });
            Some(supervisor::start(&id, ip, &tuning).unwrap_or_default())
        }
        _ => None,
    };
    if let Some(ex) = exchange(&mut control, &mut pmi) {
        ex.put(id.rank, "card", net::card(&id, link.as_ref()).into_bytes())?;
        if let Some(addr) = supervisor {
            ex.put(0, supervisor::KEY, addr.into_bytes())?;
        }
        ex.fence()?;
    }
    let net_addr = link.as_ref().map(|t| t.local_addr());
    let sender = control.as_ref().map(Control::sender).transpose()?;
    let net: Option<Box<dyn kumi_transport::Transport + Send>> =
        match (link.take(), exchange(&mut control, &mut pmi)) {
            (Some(mut link), Some(ex)) => {
                let hosts = net::learn_peers(ex, &mut link, &route)?;
                Some(Box::new(net::Guarded {
                    link,
                    rank: id.rank,
                    hosts,
                    control: sender,
                }))
            }
            _ => None,
        };
    let mut pids = vec![0i32; id.size as usize];
    if let Some(shm) = &shm {
        for &g in &globals {
            pids[g as usize] = shm.single_copy_pid(g).unwrap_or(0);
        }
    }
    if let (None, Some(p)) = (&control, &mut pmi) {
        if id.size > 1 {
            let key = [(0, supervisor::KEY.to_string())];
            if let Some(addr) = p.get_many(&key)?.pop().flatten() {
                control = supervisor::join(&id, &String::from_utf8_lossy(&addr));
            }
        }
    }
    let control = control.map(|c| Arc::new(Mutex::new(c)));
    let watch = match &control {
        Some(c) => watch::Watch::new(
            c.clone(),
            id.host_name(),
            id.rank,
            id.size,
            std::time::Duration::from_millis(tuning.blocked_ms),
            std::time::Duration::from_millis(tuning.wait.sleep_ms),
        ),
        None => watch::Watch::disabled(),
    };
    // Before the progress thread starts, so that it is bound with its rank.
    let bound_cores = bind::apply(tuning.bind, id.local_rank as usize, oversubscribed)?;
    // Moving apart needs the other ranks' CPUs, which the segment carries.
    let spread = shm.as_ref().and_then(|_| {
        bind::Spread::new(
            tuning.bind,
            bound_cores.is_some(),
            oversubscribed,
            id.local_size as usize,
        )
    });
    let mut engine = Engine::new(EngineSetup {
        world_rank: id.rank,
        world_size: id.size,
        shm,
        net,
        route,
        pids,
        watch,
        my_local: id.local_rank as usize,
        oversubscribed,
        cores,
        bound_cores,
        tuning: &tuning,
        single_copy,
        spread,
        services: services::Services::new(coll::Config::new(
            &tuning.coll,
            single_copy && !tuning.deny_cma,
        )),
    })?;
    services::register(&mut engine)?;
    let engine = Shared::new(
        engine,
        std::time::Duration::from_micros(tuning.progress_us),
        tuning.shm.membarrier,
    );
    if id.size > 1 && tuning.progress {
        engine.start_thread()?;
    }
    let world = Comm::world(engine.clone());
    Ok(Universe {
        engine,
        world,
        control,
        pmi: pmi.map(Mutex::new),
        id,
        finalized: false,
        net_addr,
        checkpoint,
    })
}

/// The job's key-value exchange: the launcher's, or the process manager's.
fn exchange<'a>(
    control: &'a mut Option<Control>,
    pmi: &'a mut Option<pmi::Manager>,
) -> Option<&'a mut dyn Exchange> {
    match (control, pmi) {
        (Some(c), _) => Some(c),
        (None, Some(p)) => Some(p),
        (None, None) => None,
    }
}

/// A segment by name, for ranks whose starter passed no descriptor (a
/// process manager): local rank 0 creates it, the others map it, then it is
/// unlinked at once. Every rank of the job calls this (its fences are the
/// job's), a rank alone on its host too, which gets no segment.
fn named_segment(
    id: &Identity,
    ctl: &mut dyn Exchange,
    tuning: &Tuning,
) -> Result<Option<Segment>> {
    let n = id.local_size as usize;
    let shared = n > 1;
    // Named for the host too: test hosts (and containers) may share one
    // /dev/shm between what the job sees as several hosts.
    let name: String = format!("{}-{}", id.job, id.host)
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '/' {
                c
            } else {
                '-'
            }
        })
        .take(kumi_transport::shm::JOB_MAX)
        .collect();
    let shm = |e: std::io::Error| Error::Bootstrap(format!("shared segment: {e}"));
    let created = match shared && id.local_rank == 0 {
        true => {
            let cfg = ShmConfig::for_host(n, tuning.shm.ring_bytes, tuning.single_copy)
                .ok_or_else(|| Error::Bootstrap("KUMI_SHM_RING_BYTES: not a ring size".into()))?;
            Some(Segment::create_named(&name, n, &cfg).map_err(shm)?)
        }
        false => None,
    };
    ctl.fence()?;
    let seg = match (created, shared) {
        (Some(s), _) => Some(s),
        (None, true) => Some(Segment::open_named(&name, n).map_err(shm)?),
        (None, false) => None,
    };
    ctl.fence()?;
    if shared && id.local_rank == 0 {
        Segment::unlink_named(&name)
            .map_err(|e| Error::Bootstrap(format!("unlinking the shared segment: {e}")))?;
    }
    Ok(seg)
}

impl Universe {
    /// The communicator of every rank of the job.
    pub fn world(&self) -> Comm {
        self.world.clone()
    }

    /// The job id (`KUMI_JOB`).
    pub fn job(&self) -> &str {
        &self.id.job
    }

    /// This rank's index among the ranks of its host.
    pub fn local_rank(&self) -> usize {
        self.id.local_rank as usize
    }

    /// The address this rank takes network data on (TCP connections, or UDP
    /// datagrams with `KUMI_NET_TRANSPORT=udp`), if it has peers on other hosts
    /// (or the network transport was forced with `KUMI_FORCE_TCP`).
    pub fn data_address(&self) -> Option<std::net::SocketAddr> {
        self.net_addr
    }

    /// Which program of the job this rank runs: 0, or for a job of several
    /// programs (`kumi run -n 1 ./a : -n 3 ./b`) the index of its program.
    pub fn appnum(&self) -> u32 {
        self.id.appnum
    }

    /// Number of ranks on this host.
    pub fn local_size(&self) -> usize {
        self.id.local_size as usize
    }

    /// Messages and bytes this rank has sent and received so far.
    pub fn counters(&self) -> Counters {
        self.engine.borrow().counters.clone()
    }

    /// Ends the job everywhere: every rank is stopped and `kumi run` exits with
    /// `code` (0 is turned into 1), printing `message`. Does not return.
    pub fn abort(&self, code: i32, message: &str) -> ! {
        abort_with(
            self.control.as_deref(),
            self.pmi.as_ref(),
            self.id.rank,
            code,
            message,
        )
    }

    /// Finalizes explicitly, reporting errors (dropping the universe does the same
    /// and prints them).
    pub fn finalize(mut self) -> Result<()> {
        self.finalize_inner()
    }

    fn finalize_inner(&mut self) -> Result<()> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        self.engine.borrow().set_call(Call::Finalize);
        {
            let e = &mut *self.engine.borrow_mut();
            e.watch.final_report(&e.counters);
        }
        self.world.barrier()?;
        if let Some(shm) = self.engine.borrow().shm() {
            shm.segment()
                .rank_block(self.id.local_rank as usize)
                .set_finalized();
        }
        self.engine.borrow().set_call(Call::None);
        self.engine.stop_thread();
        if let Some(ctl) = &self.control {
            ctl.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .send(&ToLauncher::Finalize)?;
        }
        if let Some(p) = &self.pmi {
            p.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .finalize()?;
        }
        Ok(())
    }
}

impl Drop for Universe {
    fn drop(&mut self) {
        // Dropped while the program panics: the other ranks may be in a
        // collective this rank will never join, or waiting for a message
        // from it, so finalize's barrier could wait forever. The job ends
        // instead, as for an abort (101 is Rust's exit code for a panic).
        if std::thread::panicking() && !self.finalized {
            self.abort(101, "the program panicked (its message is above)");
        }
        if let Err(e) = self.finalize_inner() {
            eprintln!("kumi: rank {}: finalize failed: {e}", self.id.rank);
        }
    }
}

fn abort_with(
    control: Option<&Mutex<Control>>,
    pmi: Option<&Mutex<pmi::Manager>>,
    rank: u32,
    code: i32,
    message: &str,
) -> ! {
    let code = if code & 0xff == 0 { 1 } else { code & 0xff };
    // The launcher, or the supervisor of a job a process manager started
    // (whose channel's close that follows is then no loss to report).
    if let Some(c) = control {
        let _ = c
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .send(&ToLauncher::Abort {
                code,
                message: message.to_string(),
            });
    }
    if let Some(p) = pmi {
        // The process manager ends the job but prints no reason: say it.
        eprintln!("kumi: rank {rank} called abort with code {code}: {message}; ending the job");
        p.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .abort(&format!(
                "rank {rank} called abort with code {code}: {message}"
            ));
    } else if control.is_none() {
        eprintln!("kumi: rank {rank} aborted with code {code}: {message}");
    }
    std::process::exit(code & 0xff)
}

/// The name of the host this rank runs on.
pub fn hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}
