//! Supervision hooks: what a rank tells its launcher about long waits.
//!
//! The engine calls [`Watch::waiting`] from its wait loop once the wait has gone
//! on for more than 128 empty polls (never on the fast path), and
//! [`Watch::wait_ended`] when any wait ends. This module decides when a wait is
//! long enough to report and what to send; reporting costs nothing until then.
//!
//! What is sent, on the control channel (see `kumi_core::deadlock`):
//! - `Blocked` once nothing has moved in a wait for [`Watch::threshold`]
//!   (`KUMI_BLOCKED_MS`, default 100 ms), again whenever messages arrived during the wait (at most
//!   every [`RECHECK`]: the launcher compares sent and arrived counts, and a
//!   stale count would hide a deadlock), and every [`PERIOD`] while it lasts;
//! - `Unblocked` when a reported wait ends, or starts to move a message
//!   itself ([`Watch::moving`]);
//! - `Counters` every [`PERIOD`] while the rank is in any wait loop;
//! - `Final` counters at finalize, before its barrier.
//!
//! A write to the control socket costs a system call; none happens unless the
//! rank already waits, and then at most one per [`RECHECK`].
//!
//! Waits of C programs: kumi's MPI library labels each of its calls with the
//! MPI function's name ([`AbiCall`]: one thread-local store on entry and one
//! on return), so the report says "MPI_Recv on MPI_COMM_WORLD". Where the
//! program called it is found only when a wait is first reported: the current
//! stack is walked (the `backtrace` crate), the frames of the object that holds
//! kumi (libmpi.so) are skipped, and the first frame outside it, the user's
//! call site, is symbolized from the program's debug information ("in main at
//! ring.c:17"), or named by object and offset when there is none. The walk
//! costs microseconds, once per reported wait, never on the fast path; the
//! symbolization, milliseconds, once per call site (cached by return
//! address): with many more ranks than cores most waits get reported, and a
//! `dladdr` per frame (a scan of libmpi.so's symbols) showed in the whole
//! job's profile (docs/BENCHMARKS.md, session 32).

use crate::bootstrap::Control;
use crate::report::{Counters, WaitInfo};
use kumi_core::call::Call;
use kumi_core::control::ToLauncher;
use kumi_core::deadlock::{RankCounters, Report, Wait};
use std::collections::HashMap;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Interval of counter reports while a rank waits.
pub const PERIOD: Duration = Duration::from_secs(1);
/// How often a blocked rank looks whether messages arrived since its report.
pub const RECHECK: Duration = Duration::from_millis(50);

/// Per-rank supervision state.
pub(crate) struct Watch {
    control: Option<Arc<Mutex<Control>>>,
    rank: u32,
    size: u32,
    /// A wait is reported once it has lasted this long.
    threshold: Duration,
    /// Members (world ranks) of communicators other than world, by p2p context.
    comms: HashMap<u32, Vec<u32>>,
    born: Instant,
    /// Start of the current wait, once the engine has read the clock for it.
    current: Option<Instant>,
    /// The current wait was reported as blocked.
    reported: bool,
    last_sent: Option<Instant>,
    last_check: Option<Instant>,
    /// Messages arrived (all peers) at the last `Blocked` report.
    last_arrived: u64,
    /// `Counters::frames_in`, `area_rounds` and `chunks_out` when last
    /// looked at.
    last_moved: u64,
    /// When a wait last saw them change.
    moved_at: Instant,
    blocked: Duration,
    /// The last turn of the current wait loop.
    turn: Option<Instant>,
    /// Time of the current wait the rank did not run (see [`Watch::stall`]).
    paused: Duration,
    /// A gap longer than this between two turns of a wait loop, which sleeps
    /// at most `KUMI_SLEEP_MS` at a time, is time the rank was not running:
    /// the job stopped (Slurm's suspend, gang scheduling, SIGSTOP) or the
    /// machine starved it. It is not counted as blocked, nor as part of the
    /// wait a report names.
    stall: Duration,
    /// The C caller of the current wait, once found: (location, function).
    site: Option<(String, Option<String>)>,
    /// Call sites symbolized so far, by return address.
    sites: HashMap<usize, (String, Option<String>)>,
}

// The MPI function the application is in: a pointer to a `&'static str`
// (null when none, or not a C program). One process-wide word, not a
// thread-local: a thread-local in a shared library (libmpi.so) costs a call
// into the dynamic linker on every access, twice per MPI call. One word, so
// that a reader on any thread sees a whole label, never the pointer of one
// and the length of another; only one thread at a time is inside MPI (kumi
// provides at most MPI_THREAD_SERIALIZED), so each store is the label of the
// call in progress. Relaxed suffices: nothing else is published through it,
// and what it points to is static.
static LABEL: AtomicPtr<&'static str> = AtomicPtr::new(std::ptr::null_mut());

/// The current label (see `LABEL`).
fn abi_call() -> &'static str {
    let p = LABEL.load(Ordering::Relaxed);
    if p.is_null() {
        return "";
    }
    // SAFETY: every non-null value stored in LABEL comes from a
    // `&'static &'static str` (`AbiCall::enter`, or its drop putting back
    // an earlier one), which is valid for the whole program.
    unsafe { *p }
}

/// Labels the waits of the application with the MPI function it is in,
/// until dropped (kumi's MPI library sets it on entry to every function that
/// may wait). Costs a load and two stores.
pub struct AbiCall {
    prev: *mut &'static str,
}

impl AbiCall {
    /// The application is in MPI function `name` (e.g. "MPI_Recv") until
    /// the returned label is dropped.
    #[inline(always)]
    pub fn enter(name: &'static &'static str) -> AbiCall {
        // A load and a store, not an atomic swap: one thread at a time is
        // inside MPI (see `LABEL`).
        let prev = LABEL.load(Ordering::Relaxed);
        LABEL.store(
            name as *const &'static str as *mut &'static str,
            Ordering::Relaxed,
        );
        AbiCall { prev }
    }
}

impl Drop for AbiCall {
    #[inline(always)]
    fn drop(&mut self) {
        LABEL.store(self.prev, Ordering::Relaxed);
    }
}

impl Watch {
    /// A watch that reports nothing (singletons, tests); it still measures time
    /// blocked.
    pub fn disabled() -> Watch {
        Watch {
            control: None,
            rank: 0,
            size: 1,
            threshold: Duration::from_millis(100),
            comms: HashMap::new(),
            born: Instant::now(),
            current: None,
            reported: false,
            last_sent: None,
            last_check: None,
            last_arrived: 0,
            last_moved: 0,
            moved_at: Instant::now(),
            blocked: Duration::ZERO,
            turn: None,
            paused: Duration::ZERO,
            stall: Duration::from_millis(1100),
            site: None,
            sites: HashMap::new(),
        }
    }

    /// A watch reporting on `control` for a rank of `host` (as the job
    /// names it); `longest_sleep` is the longest sleep of a wait loop
    /// (`KUMI_SLEEP_MS`).
    pub fn new(
        control: Arc<Mutex<Control>>,
        host: String,
        rank: u32,
        size: u32,
        threshold: Duration,
        longest_sleep: Duration,
    ) -> Watch {
        let w = Watch {
            control: Some(control),
            rank,
            size,
            threshold,
            stall: longest_sleep.saturating_add(Duration::from_secs(1)),
            ..Watch::disabled()
        };
        w.send(&Report::Started { host });
        w
    }

    /// Records the members of a communicator, so waits on it name world ranks.
    pub fn comm_created(&mut self, ctx: u32, members: &[u32]) {
        self.comms.insert(ctx & !1, members.to_vec());
    }

    /// The rank has waited in `info` since `start`; `now` is the current time.
    #[inline]
    pub fn waiting(&mut self, info: &WaitInfo, start: Instant, now: Instant, counters: &Counters) {
        self.current = Some(start);
        self.stalled_since_turn(now);
        self.turn = Some(now);
        if self.control.is_none() {
            return;
        }
        // Frames still arriving (the chunks of a long transfer, its replies),
        // chunks still leaving, or rounds of a collective through the area
        // completing: the wait is moving, whatever the message counters say
        // (a long transfer or a nonblocking allreduce of gigabytes sends no
        // message while it moves), so a report already made is withdrawn,
        // and the wait is reported as blocked only once nothing has moved
        // for the threshold: reported again on its first still turn, a wait
        // in a stream of chunks would be reported in every gap between two,
        // and the launcher would mostly see both ends blocked.
        let moved = counters.frames_in + counters.area_rounds + counters.chunks_out;
        if moved != self.last_moved {
            self.last_moved = moved;
            self.moved_at = now;
            self.moving();
        }
        let for_ = now
            .saturating_duration_since(start)
            .saturating_sub(self.paused);
        let still = now
            .saturating_duration_since(start.max(self.moved_at))
            .saturating_sub(self.paused);
        if still < self.threshold {
            if self.last_sent.is_none_or(|t| now - t >= PERIOD) {
                self.last_sent = Some(now);
                let c = self.counters(counters, now);
                self.send(&Report::Counters(c));
            }
            return;
        }
        let due = if !self.reported {
            true
        } else if self.last_check.is_none_or(|t| now - t >= RECHECK) {
            self.last_check = Some(now);
            arrived(counters) != self.last_arrived
                || self.last_sent.is_none_or(|t| now - t >= PERIOD)
        } else {
            false
        };
        if due {
            self.reported = true;
            self.last_sent = Some(now);
            self.last_check = Some(now);
            self.last_arrived = arrived(counters);
            let wait = self.describe(info, for_, abi_call());
            let counters = self.counters(counters, now);
            self.send(&Report::Blocked { wait, counters });
        }
    }

    /// The wait moves: a report of it is withdrawn. Called by the wait
    /// loop's turns (above) and, before it is handled, for every frame but
    /// a short message: a rendezvous's request or reply starts a single or
    /// split copy in the same progress pass, one system call for the whole
    /// message (seconds for gigabytes on a slow or busy host), and the wait
    /// loop gets no turn until the copy ends; meanwhile the launcher would
    /// see this rank and its peer, waiting for the copy, both blocked with
    /// nothing in flight.
    #[inline]
    pub fn moving(&mut self) {
        if self.reported {
            self.reported = false;
            self.send(&Report::Unblocked);
        }
    }

    /// Counts a gap since the last turn longer than a sleep (plus a second)
    /// as time the rank was not running.
    fn stalled_since_turn(&mut self, now: Instant) {
        if let Some(gap) = self.turn.map(|t| now.saturating_duration_since(t)) {
            if gap > self.stall {
                self.paused += gap - self.stall;
            }
        }
    }

    /// The current wait ended. Only a wait that went on long enough to be
    /// timed has anything to do: the check is inlined into every wait, the
    /// work is not.
    #[inline(always)]
    pub fn wait_ended(&mut self) {
        if self.current.is_some() {
            self.end_timed_wait();
        }
    }

    #[inline(never)]
    fn end_timed_wait(&mut self) {
        self.end_timed_wait_at(Instant::now());
    }

    fn end_timed_wait_at(&mut self, now: Instant) {
        if let Some(start) = self.current.take() {
            // The last stretch too: a rank stopped after its last turn finds
            // its message there when it runs again and ends the wait without
            // another turn.
            self.stalled_since_turn(now);
            self.blocked += now
                .saturating_duration_since(start)
                .saturating_sub(self.paused);
            self.paused = Duration::ZERO;
            self.turn = None;
            self.site = None;
            if self.reported {
                self.reported = false;
                self.send(&Report::Unblocked);
            }
        }
    }

    /// Sends the final counters (at finalize, before its barrier).
    pub fn final_report(&mut self, counters: &Counters) {
        let c = self.counters(counters, Instant::now());
        self.send(&Report::Final(c));
    }

    fn counters(&self, c: &Counters, now: Instant) -> RankCounters {
        RankCounters {
            peers: RankCounters::sparse(&c.peers),
            blocked_us: (self.blocked
                + self.current.map_or(Duration::ZERO, |s| {
                    now.saturating_duration_since(s).saturating_sub(self.paused)
                }))
            .as_micros() as u64,
            wall_us: now.saturating_duration_since(self.born).as_micros() as u64,
        }
    }

    fn describe(&mut self, info: &WaitInfo, for_: Duration, abi: &'static str) -> Wait {
        let pctx = info.ctx & !1;
        let members: Option<Vec<u32>> = if info.ctx == u32::MAX {
            None
        } else if pctx == 0 {
            Some((0..self.size).collect())
        } else {
            self.comms.get(&pctx).cloned()
        };
        // A collective without a named peer may need any member: it stays
        // stuck only while all of them are stuck, which is what listing them
        // all means to the detector (stricter than the truth, never looser).
        let waits_on = match (info.peer, members) {
            (p, Some(m)) if p >= 0 => m.get(p as usize).map(|&w| vec![w]),
            (-1 | -2, Some(m)) if info.peer == -1 || is_collective(info.call) => {
                Some(m.into_iter().filter(|&w| w != self.rank).collect())
            }
            _ => None,
        };
        let c_program = !abi.is_empty();
        let comm = match info.ctx {
            // A wait on requests, which may be on several communicators.
            u32::MAX => String::new(),
            c if c & !1 == 0 && c_program => "MPI_COMM_WORLD".to_string(),
            c if c & !1 == 0 => "world".to_string(),
            c => format!("comm #{}", c & !1),
        };
        let call = match info.call {
            Call::None => Call::Wait,
            c => c,
        };
        let (location, function) = if c_program {
            let sites = &mut self.sites;
            self.site.get_or_insert_with(|| c_caller(sites)).clone()
        } else {
            (
                format!("{}:{}:{}", info.at.file(), info.at.line(), info.at.column()),
                None,
            )
        };
        Wait {
            call: kumi_core::call::with_mpi(call, abi),
            comm,
            peer: info.peer,
            tag: info.tag,
            waits_on,
            location,
            function,
            blocked_ms: for_.as_millis() as u64,
        }
    }

    fn send(&self, report: &Report) {
        let Some(ctl) = &self.control else { return };
        // The channel is borrowed only for single sends elsewhere; if it is busy,
        // this report is skipped and the next one says the same thing.
        if let Ok(mut c) = ctl.try_lock() {
            let _ = c.send(&ToLauncher::Report(report.clone()));
        }
    }
}

/// Start address of the loaded object (program or shared library) that holds
/// `addr`, and its path; `None` if no object holds it.
fn object_of(addr: *const std::ffi::c_void) -> Option<(usize, String)> {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr only reads the loader's tables and writes `info`, which is
    // valid for writes; a zeroed Dl_info is a valid value to start from.
    let found = unsafe { libc::dladdr(addr, info.as_mut_ptr()) };
    if found == 0 {
        return None;
    }
    // SAFETY: dladdr returned non-zero, so it filled `info` (and it was zeroed
    // before, so every field is initialized either way).
    let info = unsafe { info.assume_init() };
    let path = if info.dli_fname.is_null() {
        String::new()
    } else {
        // SAFETY: a non-null dli_fname is a NUL-terminated string owned by the
        // loader, valid while the object stays loaded (it holds `addr`).
        unsafe { std::ffi::CStr::from_ptr(info.dli_fname) }
            .to_string_lossy()
            .into_owned()
    };
    Some((info.dli_fbase as usize, path))
}

/// The address ranges of the object that holds kumi (libmpi.so, or the
/// program itself when linked statically), read once from
/// `/proc/self/maps`: every mapping of the file that maps this function.
fn our_ranges() -> &'static [(usize, usize)] {
    static RANGES: OnceLock<Vec<(usize, usize)>> = OnceLock::new();
    RANGES.get_or_init(|| {
        let here = our_ranges as *const () as usize;
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
        // "start-end perms offset dev inode path"
        let rows: Vec<(usize, usize, &str)> = maps
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let (a, b) = f.next()?.split_once('-')?;
                let path = f.nth(4).unwrap_or("");
                Some((
                    usize::from_str_radix(a, 16).ok()?,
                    usize::from_str_radix(b, 16).ok()?,
                    path,
                ))
            })
            .collect();
        let Some(&(_, _, ours)) = rows.iter().find(|&&(a, b, _)| (a..b).contains(&here)) else {
            return Vec::new();
        };
        rows.iter()
            .filter(|&&(_, _, p)| p == ours && !p.is_empty())
            .map(|&(a, b, _)| (a, b))
            .collect()
    })
}

/// Where the C program called into kumi's MPI library: the first frame of the
/// current stack outside the object holding kumi, as (file:line, function)
/// from its debug information, or ("PROGRAM+0xOFFSET", symbol) without it;
/// `sites` keeps the answers by return address.
fn c_caller(sites: &mut HashMap<usize, (String, Option<String>)>) -> (String, Option<String>) {
    let ours = our_ranges();
    if ours.is_empty() {
        return ("unknown (no loaded object holds kumi)".into(), None);
    }
    let in_ours = |ip: usize| ours.iter().any(|&(a, b)| (a..b).contains(&ip));
    let mut seen_ours = false;
    let mut caller: Option<usize> = None;
    backtrace::trace(|frame| {
        let ip = frame.ip() as usize;
        if in_ours(ip) {
            seen_ours = true;
            true
        } else if seen_ours {
            caller = Some(ip);
            false
        } else {
            true
        }
    });
    let Some(ip) = caller else {
        return ("unknown (caller not found on the stack)".into(), None);
    };
    sites.entry(ip).or_insert_with(|| symbolize(ip)).clone()
}

/// (file:line, function) of the call before return address `ip`, from the
/// debug information of the object that holds it, or ("OBJECT+0xOFFSET",
/// symbol) without it.
fn symbolize(ip: usize) -> (String, Option<String>) {
    let Some((base, path)) = object_of(ip as *const std::ffi::c_void) else {
        return (format!("{ip:#x} (in no loaded object)"), None);
    };
    let mut function = None;
    let mut location = None;
    // `resolve` looks up the byte before the return address: the call itself.
    backtrace::resolve(ip as *mut std::ffi::c_void, |sym| {
        if function.is_none() {
            function = sym.name().map(|n| n.to_string());
        }
        if location.is_none() {
            if let (Some(file), Some(line)) = (sym.filename(), sym.lineno()) {
                location = Some(format!("{}:{line}", file.display()));
            }
        }
    });
    let program = std::path::Path::new(&path)
        .file_name()
        .map_or(path.clone(), |f| f.to_string_lossy().into_owned());
    let location = location.unwrap_or_else(|| {
        format!(
            "{program}+{:#x} (no debug information)",
            ip.wrapping_sub(base + 1)
        )
    });
    (location, function)
}

fn is_collective(c: Call) -> bool {
    matches!(
        c,
        Call::Barrier | Call::Collective | Call::Split | Call::Dup | Call::Finalize
    )
}

fn arrived(c: &Counters) -> u64 {
    c.peers.iter().map(|p| p.msgs_in + p.coll_msgs_in).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job stopped for 30 s (Slurm's suspend) while a rank waited: the
    /// gap between two turns of its wait loop is not time blocked; a wait
    /// that turns regularly counts whole.
    #[test]
    fn time_the_rank_was_stopped_is_not_blocked() {
        let info = WaitInfo::plain(Call::Barrier);
        let c = Counters::default();
        let mut w = Watch::disabled();
        let start = Instant::now()
            .checked_sub(Duration::from_secs(40))
            .expect("a clock 40 s old");
        w.waiting(&info, start, start + Duration::from_millis(500), &c);
        w.waiting(&info, start, start + Duration::from_millis(1000), &c);
        // Stopped from 1 s to 35 s.
        w.waiting(&info, start, start + Duration::from_secs(35), &c);
        w.end_timed_wait_at(start + Duration::from_millis(35_050));
        let blocked = w.blocked.as_secs_f64();
        // 35.05 s of wall time, 34 s of it stopped, less the 1.1 s allowed
        // for one sleep: about 2.15 s blocked.
        assert!((1.9..2.5).contains(&blocked), "{blocked}");
        let mut w = Watch::disabled();
        let start = Instant::now()
            .checked_sub(Duration::from_secs(3))
            .expect("a clock 3 s old");
        for ms in (0..3000).step_by(100) {
            w.waiting(&info, start, start + Duration::from_millis(ms), &c);
        }
        w.wait_ended();
        assert!(w.blocked >= Duration::from_secs(3), "{:?}", w.blocked);
    }

    /// Regression (a Slurm suspend test counted 30 s as blocked): a rank
    /// stopped after the last turn of its wait, whose message was there when
    /// it ran again, ended the wait without another turn, and the whole stop
    /// counted as blocked.
    #[test]
    fn a_stop_after_the_last_turn_of_a_wait_is_not_blocked() {
        let info = WaitInfo::plain(Call::Recv);
        let c = Counters::default();
        let mut w = Watch::disabled();
        let start = Instant::now()
            .checked_sub(Duration::from_secs(40))
            .expect("a clock 40 s old");
        w.waiting(&info, start, start + Duration::from_millis(200), &c);
        // Stopped from 0.2 s to 30.2 s; the wait ends as it runs again.
        w.end_timed_wait_at(start + Duration::from_millis(30_300));
        let blocked = w.blocked.as_secs_f64();
        // 30.3 s of wall time, 30 s stopped, less the 1.1 s allowed: 1.4 s.
        assert!((1.0..2.0).contains(&blocked), "{blocked}");
    }
}
