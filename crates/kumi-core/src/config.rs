//! One configuration: every `KUMI_*` environment variable kumi knows, in one
//! table ([`VARS`]: name, default, accepted values, meaning, who reads it), and
//! the typed [`Tuning`] a rank (or the launcher) parses from it once, at start.
//!
//! The environment is read by the caller ([`Env::from_vars`] takes
//! `std::env::vars()`), so this module stays pure and its checks are tested
//! without a process. Everything below the parse takes values: no transport,
//! collective or policy reads the environment itself.
//!
//! Three rules hold for every variable:
//! - a value out of range is an error naming the variable, the value and
//!   what is accepted ([`ConfigError`]); it is never clamped in silence;
//! - a `KUMI_*` name that is not in the table is reported once per job
//!   ([`Env::unknown`], with the nearest known name): a typo must not silently
//!   do nothing;
//! - the README's tables are generated from [`VARS`] ([`markdown_section`])
//!   and a test compares the two, so documentation and code cannot drift.
//!
//! The launcher-to-rank contract (`KUMI_RANK`, `KUMI_CONTROL`, ...) is its own
//! type, [`crate::rankenv::RankEnv`], written by the launcher and read by the
//! rank's bootstrap; its names are in [`VARS`] too, as [`Scope::Contract`].

use std::collections::BTreeMap;
use std::fmt;

/// Who reads a variable, which decides where the README lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// A rank's runtime: parsed into [`Tuning`].
    Tuning,
    /// Set by the launcher for each rank ([`crate::rankenv`]); a user sets
    /// only `KUMI_LOCAL_CORES` by hand.
    Contract,
    /// A kumi tool: the compiler wrappers, `kumi run`, `kumi bench`.
    Tool,
    /// kumi's own test suite: fault injection and helpers.
    Testing,
}

/// One variable of the table.
#[derive(Clone, Copy, Debug)]
pub struct Var {
    /// The full name, `KUMI_...`.
    pub name: &'static str,
    /// The default, as the README states it.
    pub default: &'static str,
    /// What it means, and which values do what.
    pub meaning: &'static str,
    /// Who reads it.
    pub scope: Scope,
}

macro_rules! vars {
    ($($name:literal, $scope:ident, $default:literal, $meaning:literal;)*) => {
        /// Every `KUMI_*` variable kumi reads or sets, in the README's order.
        pub const VARS: &[Var] = &[$(Var {
            name: $name,
            default: $default,
            meaning: $meaning,
            scope: Scope::$scope,
        }),*];
    };
}

vars! {
    "KUMI_EAGER_LIMIT", Tuning,
    "shared memory: a quarter of the ring's largest record, as a power of two from 8 to 64 KiB (64 KiB up to 5 ranks on a host, 32 KiB up to 8, 16 KiB up to 11, 8 KiB from 12); network: 32 KiB",
    "largest message (bytes) sent eagerly in one frame; larger ones use rendezvous (single copy on shared memory; so do a collective's blocks inside a host from `KUMI_COLL_COPY_MIN` where single copy is on). Set, it applies to both and must fit every transport's largest frame";
    "KUMI_SHM_RING_BYTES", Tuning,
    "32 MiB / n² for n ranks on the host, a power of two from 64 KiB to 1 MiB (1 MiB up to 5 ranks, 512 KiB at 8, 128 KiB at 16)",
    "bytes of each shared-memory ring (power of two, 4096 .. 64 MiB)";
    "KUMI_SHM_PREFETCH", Tuning, "256",
    "bytes ahead of the record it consumes at which a receiving rank asks for the next ring line, so a stream of small messages overlaps its cache-line transfers (capped at half the ring); `0` turns it off";
    "KUMI_SINGLE_COPY", Tuning, "auto",
    "how ranks of one host move rendezvous messages and long collective blocks: `on` (`1`) straight from buffer to buffer with `process_vm_readv`/`writev`, `off` (`0`) through the rings and the collective area, `auto` as the host's measurement says (whoever creates the host's shared segment times, on two threads bound to two CPUs, a 256 KiB block one writes and the other copies out, the slower copy counting as a ring's, a copy within one core, and a `process_vm_readv` of the block just written, alternately, about 0.6 ms; single copy is on where the read takes less than three ring copies, with more ranks on the host than cores too (docs/BENCHMARKS.md, sessions 57 and 62); `kumi bench floor` shows the figures and the choice)";
    "KUMI_SPLIT_COPY_MIN", Tuning, "16384",
    "messages at least this long (bytes) are copied by both ranks at once: the receiver reads the first half while the sender writes the second (unless the receiver's own rendezvous message to the sender is still out: an exchange keeps both busy already); `off` disables";
    "KUMI_POLLS", Tuning, "128 (4 when oversubscribed)",
    "empty polls before a waiting rank first reads the clock (at least 1)";
    "KUMI_SPIN_US", Tuning, "200 (0 when oversubscribed)",
    "how long a waiting rank then polls (yielding now and then)";
    "KUMI_YIELD_US", Tuning, "2000 (50000 when oversubscribed)",
    "how long it then polls and yields on every pass before it sleeps on its doorbell";
    "KUMI_YIELD_EVERY", Tuning, "32 (shm only), 8 (shm + network), 1 (network only)",
    "empty polls per `sched_yield` before the clock is first read (ranks the scheduler put on one core must not starve each other; at least 1). With shared memory only and a core per rank, a waiting rank yields only while an awake local rank last ran on its CPU; setting this variable makes the yields unconditional";
    "KUMI_MATE_SPIN_US", Tuning, "50",
    "oversubscribed and bound: how long a waiting rank keeps its core, polling without yielding, when handing it over would be wasted: every other rank bound to that core waits in the same barrier, allreduce or alltoall (they wait for the same ranks of other cores), or this rank waits for a message of a local rank and is strictly nearer than the core's other awake ranks to a rank that may send (following who waits for whom; a rank nearer than this one is handed the core, and a rank handed over twice in one wait sleeps until a send to its source wakes it, which sets the core's turns in the order of the messages: a token ring of 8 ranks on 2 cores 2.4 -> 0.95 us a hop); `0` always yields (and never sleeps for it)";
    "KUMI_SLEEP_MS", Tuning, "100",
    "longest single sleep (a sender rings the doorbell to wake it sooner; at least 1)";
    "KUMI_SHM_MEMBARRIER", Tuning, "on",
    "`off`: a full fence after every shared-memory send instead of a `membarrier` by the rank about to sleep, and a full fence on every kumi call instead of a `membarrier` by the progress thread when it takes the engine (job-wide; also off when the kernel lacks it; the rings of a host with more ranks than cores always use full fences, since its ranks sleep often)";
    "KUMI_LOCAL_CORES", Contract, "the cores `kumi run` may use",
    "cores of the host as every rank sees them: more ranks than this and the host counts as oversubscribed (how ranks wait, bind and broadcast), more than twice as many and its scans go as a chain; set by the launcher, so all ranks of a host agree";
    "KUMI_BIND", Tuning, "auto",
    "`auto`: when a host runs more ranks than it has cores, bind local rank i (and its progress thread) to the i-th allowed core modulo their number, so ranks taking turns on a core do not migrate (a turn costs ~2.6x less); otherwise leave ranks free, but a waiting rank that finds a rank of a lower local rank on its core moves itself to a core no local rank runs on (and is free again there: the scheduler puts ranks woken together on one core and takes 100 ms or more to part them); `core`: always bind; `none`: never bind nor move";
    "KUMI_BLOCKED_MS", Tuning, "100",
    "a rank blocked this long in one kumi call, with nothing arriving for it meanwhile, reports the wait (call, communicator, peer, tag, call site) to `kumi run`, which declares a deadlock when the blocked ranks can never continue for `--deadlock-timeout` seconds: it moves when a deadlock is reported, not whether";
    "KUMI_SUPERVISOR", Tuning, "auto",
    "under `srun` (no `kumi run` beside the ranks): `auto` has rank 0 start kumi's supervisor, the `kumi` program beside kumi's library (`lib/../bin` of an install) or on `PATH`, which gives the job `kumi run`'s deadlock detection, statistics and end of the job when a rank is killed; `off`: none; or the path of the `kumi` program to use";
    "KUMI_SUPERVISE", Tuning, "(none)",
    "under `srun`: the supervisor's options, as `kumi run` spells them: `--stats`, `--stats-json FILE`, `--deadlock-timeout SECONDS`, `--on-deadlock report`";
    "KUMI_PROGRESS", Tuning, "on",
    "`off`: no progress thread; messages move only inside kumi calls (see below)";
    "KUMI_PROGRESS_US", Tuning, "500",
    "how long (microseconds, at least 1) a rank stuck in kumi waits before it rings the progress threads of its host's ranks that compute with work outstanding (and again every interval while stuck); also how often a rank with peers on other hosts, which cannot ring, has its thread look on its own while it computes with work outstanding";
    "KUMI_COLL_BCAST_LONG", Tuning, "65536",
    "broadcasts of at least this many bytes use scatter + ring allgather instead of a binomial tree";
    "KUMI_COLL_ALLREDUCE_LONG", Tuning, "16384",
    "allreduces of at least this many bytes use Rabenseifner (reduce-scatter + allgather) instead of recursive doubling";
    "KUMI_COLL_ALLREDUCE_RING", Tuning, "4194304",
    "commutative allreduces of at least this many bytes use the ring";
    "KUMI_COLL_ALLGATHER_LONG", Tuning, "32768",
    "allgathers of at least this many bytes (total) use the ring instead of recursive doubling";
    "KUMI_COLL_ALLGATHER_COPY_MIN", Tuning, "16384",
    "an allgather(v) inside a host with a block at least this long (bytes) has every rank read the others' blocks straight from their buffers (`process_vm_readv`) where single copy is on (`KUMI_SINGLE_COPY`) and the host runs no more ranks than cores; shorter ones, and all with more ranks than cores, go through the collective area";
    "KUMI_COLL_COPY_MIN", Tuning, "32768",
    "a block of a collective that moves data inside a host (broadcast, scatter(v), neighbourhood exchanges; a scan's or exscan's vector) at least this long (bytes) goes, where the host allows single copy (`KUMI_SINGLE_COPY`), not through the collective area but read straight out of the sender's buffer (`process_vm_readv`), or for scatter(v) and the neighbourhood exchanges as a point-to-point message by rendezvous, read the same way, even below the eager limit (`KUMI_EAGER_LIMIT`, which point-to-point messages keep; so does a gather(v)'s or a started alltoallv's block that goes as a message); an allgather's from `KUMI_COLL_ALLGATHER_COPY_MIN`, a gather's from `KUMI_COLL_GATHER_COPY_MIN`, an alltoall's from `KUMI_COLL_ALLTOALL_COPY_MIN`, a scan's or exscan's only with a core per rank, a broadcast's only where `KUMI_COLL_BCAST_COPY` allows it (`single`, or `auto` with a core per rank)";
    "KUMI_COLL_GATHER_COPY_MIN", Tuning, "65536",
    "as `KUMI_COLL_COPY_MIN` for a gather(v)'s blocks (blocking or started): from this length (bytes) as point-to-point messages by rendezvous where single copy is on, shorter ones through the collective area";
    "KUMI_COLL_ALLTOALL_COPY_MIN", Tuning, "16384",
    "as `KUMI_COLL_COPY_MIN` for an alltoall(v)'s blocks where the host runs no more ranks than cores (with more, from the larger of the two): from this length (bytes) read straight out of the sender's buffer where single copy is on (a started alltoallv's as point-to-point messages, as are its blocks longer than a rank's share of a payload half, which with more ranks than cores go by rendezvous and are read the same way even below `KUMI_EAGER_LIMIT`), shorter ones through the collective area";
    "KUMI_COLL_BCAST_COPY", Tuning, "auto",
    "a broadcast inside a host longer than the collective area's chunk: `single` (every rank copies from the root's buffer with `process_vm_readv`), `area` (pipelined through the area in chunks), `auto` (the area when the host runs more ranks than cores; otherwise each communicator times both, its first eight such broadcasts, alternately after one each untimed, and keeps the area only where the fastest of its three took at most half single copy's)";
    "KUMI_COLL_ALLREDUCE_COPY", Tuning, "auto",
    "a commutative allreduce or reduce inside a host longer than the collective area's payload half (or, where single copy is on, from `KUMI_COLL_COPY_MIN`): `single` (each rank folds its block from the others' buffers with `process_vm_readv` and writes it into theirs, for a reduce into the root's only), `area` (in chunks through the area: no system call, more copies), `auto` (each communicator times both, its first eight such calls of each kind, alternately after one each untimed, and keeps the area only where the fastest of its three took at most half single copy's; a reduce goes by the root's time). A reduce-scatter (any operation) longer than the payload half and a longer nonblocking allreduce go the way the communicator's allreduce trial chose, through the area until it has chosen; a shorter blocking reduce-scatter goes by single copy from `KUMI_COLL_COPY_MIN` where single copy is on";
    "KUMI_COLL_SHM", Tuning, "on",
    "`off`: collectives inside a host go by messages, not through the segment's collective areas";
    "KUMI_COLL_SHM_BCAST_MAX", Tuning, "no limit",
    "broadcasts inside a host longer than this many bytes do not go through the collective area: by single copy when they exceed the area and single copy is allowed, else by messages";
    "KUMI_COLL_PIECE", Tuning, "32768",
    "bytes (at least 1) a rank reads, folds and writes at a time in the single-copy allreduce, reduce and reduce-scatter inside a host (rounded down to whole elements)";
    "KUMI_COLL_HIERARCHICAL", Tuning, "on",
    "`off` turns off the two-level (inside a host, then among host leaders) collectives";
    "KUMI_COLL_HOSTS", Tuning, "0",
    "testing: pretend the ranks are spread in blocks over this many hosts (collective and combining trees); `0`: the real hosts";
    "KUMI_COMBINE_STORE", Tuning, "64",
    "entries a rank's combining store holds; when full, requests go up uncombined";
    "KUMI_NET_TRANSPORT", Tuning, "udp",
    "the transport between hosts: `udp` (kumi's reliable UDP) or `tcp`";
    "KUMI_FORCE_TCP", Tuning, "off",
    "`all` (or pairs of ranks like `0:1,2:3`) makes those pairs talk over the network transport even on one host (for tests)";
    "KUMI_UDP_SEGMENT", Tuning, "1472",
    "bytes per datagram of the reliable UDP transport";
    "KUMI_UDP_WINDOW", Tuning, "512",
    "datagrams in flight per peer of the reliable UDP transport";
    "KUMI_UDP_FAULTS", Testing, "none",
    "seeded fault injection on the reliable UDP transport, e.g. `drop=0.05,dup=0.02,reorder=0.05,delay=...,seed=7`";
    "KUMI_UDP_STATS", Tuning, "off",
    "`on`: each rank prints its reliable UDP counters (sent, retransmitted, acknowledged, duplicates) at exit";
    "KUMI_BLAS", Tool, "auto",
    "DGEMM of `kumi bench lu`: `openblas` (`libopenblas.so.0`; kumi names the AVX-512 or AVX2 kernel for it, which Debian's 0.3.21 does not detect on recent CPUs), `faer` (built in), `auto` (OpenBLAS if installed, else faer)";
    "KUMI_LU_NB", Tool, "by N",
    "block size of `kumi bench lu` (which runs each order once, or keeps the fastest of three when a run takes under 50 ms)";
    "KUMI_HOTSPOT_WAIT_US", Tool, "100",
    "how long a level-2 fetch-and-add of `kumi bench hotspot` waits for partners to combine with (microseconds)";
    "KUMI_CC", Tool, "cc",
    "the C compiler `kumi cc` (`mpicc`) runs";
    "KUMI_CXX", Tool, "c++",
    "the C++ compiler `kumi cxx` (`mpicxx`) runs";
    "KUMI_FC", Tool, "gfortran",
    "the Fortran compiler `kumi fc` (`mpifort`, `mpif90`, `mpif77`) runs, and the build compiles the `mpi` module with";
    "KUMI_CC_LINK", Tool, "shared",
    "`static` makes `kumi cc` link kumi's library into the program (as `-static-mpi`)";
    "KUMI_AGENT_PROGRAM", Tool, "this `kumi`",
    "the `kumi` executable `kumi run` starts as the agent on other hosts";
    "KUMI_JOB", Contract, "set by `kumi run`", "job id (j + 10 hex digits), the same for all ranks";
    "KUMI_RANK", Contract, "set by `kumi run`", "this rank, 0..N-1 (unset: the program is a job of one rank)";
    "KUMI_SIZE", Contract, "set by `kumi run`", "N, the number of ranks";
    "KUMI_LOCAL_RANK", Contract, "set by `kumi run`", "rank among the ranks on this machine";
    "KUMI_LOCAL_SIZE", Contract, "set by `kumi run`", "number of ranks on this machine";
    "KUMI_NODE", Contract, "set by `kumi run`", "index of this machine in the job";
    "KUMI_APPNUM", Contract, "set by `kumi run`", "which program of an MPMD job (`kumi run -n 1 ./a : -n 3 ./b`) this rank runs, from 0 (`MPI_APPNUM`)";
    "KUMI_CONTROL", Contract, "set by `kumi run`", "control socket of the launcher (`@name`: abstract Unix socket; `host:port`: TCP)";
    "KUMI_SECRET", Contract, "set by `kumi run`", "job secret (hex) that authenticates a rank on the control socket and to its peers";
    "KUMI_SHM_FD", Contract, "set by `kumi run`", "inherited file descriptor of the job's shared-memory segment";
    "KUMI_HOST_RANKS", Contract, "set by `kumi run`", "(multi-host jobs) the global ranks of this host, e.g. `0-3,8`";
    "KUMI_HOST", Contract, "set by `kumi run`", "(multi-host jobs) this host's name as given to `--hosts`";
    "KUMI_NET", Contract, "set by `kumi run`", "network the ranks use: `iface:NAME`, `net:A.B.C.D/P` or `auto`";
    "KUMI_CKPT_DIR", Contract, "set by `kumi run --checkpoint-dir` (or by hand)", "directory of the job's checkpoints (one `ckpt-<epoch>/` each; every host must see the same directory); unset: the job does not checkpoint (a save does nothing, no checkpoint is ever due)";
    "KUMI_CKPT_EVERY", Contract, "600 (`--checkpoint-every`)", "seconds between checkpoints: when the program asks whether one is due, rank 0 answers yes once this long has passed since the job started or last checkpointed";
    "KUMI_CKPT_KEEP", Contract, "2 (`--checkpoint-keep`)", "complete checkpoints kept; older ones are deleted once a newer one is complete";
    "KUMI_CKPT_RESTART", Contract, "set by `kumi run --restart` / `--max-restarts`", "the checkpoint epochs this run may resume, newest first (the ranks agree on the newest whose every part verifies)";
    "KUMI_CKPT_PROGRAM", Contract, "set by `kumi run`", "the program(s) the manifest names, so a restart can refuse another program's checkpoint";
    "KUMI_DEBUGGED", Contract, "set by `kumi run --debug`", "`1` for the rank started under a debugger: it dies with the debugger (its parent), as other ranks die with `kumi run`";
    "KUMI_TEST_DENY_CMA", Testing, "off",
    "`1`: every `process_vm_readv`/`writev` fails as on a kernel that refuses it, so the fallback can be tested";
    "KUMI_BENCH_FAULT", Testing, "none",
    "a `kumi bench` kernel (lu, cg, mg) whose result is spoiled before its check, so a test sees a failed check end the job";
    "KUMI_TEST_ROLE", Testing, "none", "what the test helper program of kumi's launcher tests plays";
    "KUMI_TEST_CREATE_SEGMENT", Testing, "none", "a job id whose segment the `kumi clean` test helper creates";
    "KUMI_MPI_PYTHON", Testing, "the suite's venv", "the Python interpreter (with mpi4py) the MPI tests use";
}

/// The entry of `name`, if kumi knows it.
pub fn var(name: &str) -> Option<&'static Var> {
    VARS.iter().find(|v| v.name == name)
}

/// The README's section on environment variables: a table per [`Scope`],
/// generated from [`VARS`] (a test compares the README with it, so the two
/// cannot drift).
pub fn markdown_section() -> String {
    let mut s = String::new();
    for (scope, title) in [
        (
            Scope::Tuning,
            "Tuning (read by every rank, checked by `kumi run` before any starts)",
        ),
        (Scope::Contract, "Set by `kumi run` for each rank"),
        (Scope::Tool, "Tools"),
        (Scope::Testing, "kumi's own tests"),
    ] {
        s.push_str(&format!(
            "\n#### {title}\n\n| variable | default | meaning |\n|---|---|---|\n"
        ));
        for v in VARS.iter().filter(|v| v.scope == scope) {
            s.push_str(&format!(
                "| `{}` | {} | {} |\n",
                v.name, v.default, v.meaning
            ));
        }
    }
    s
}

/// A value that kumi cannot accept: the variable, the value and what it
/// takes. Shown as `KUMI_POLLS=0 is not an integer from 1 to ...` (the value
/// quoted when it is empty or holds spaces), or `KUMI_JOB is not set ...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The variable.
    pub name: &'static str,
    /// Its value as set (`None`: unset, where it must be set).
    pub value: Option<String>,
    /// What is accepted.
    pub expected: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            None => write!(f, "{} is not set ({})", self.name, self.expected),
            Some(v) if v.is_empty() || !v.chars().all(|c| c.is_ascii_graphic()) => {
                write!(f, "{}={v:?} is not {}", self.name, self.expected)
            }
            Some(v) => write!(f, "{}={v} is not {}", self.name, self.expected),
        }
    }
}

impl std::error::Error for ConfigError {}

/// The `KUMI_*` variables of one environment, taken once.
#[derive(Clone, Debug, Default)]
pub struct Env {
    vars: BTreeMap<String, String>,
}

impl Env {
    /// The `KUMI_*` entries of `vars` (pass `std::env::vars_os()` mapped to
    /// lossy strings, or a test's list).
    pub fn from_vars<I, K, V>(vars: I) -> Env
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        Env {
            vars: vars
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .filter(|(k, _)| k.starts_with("KUMI_"))
                .collect(),
        }
    }

    /// [`Env::from_vars`] of `std::env::vars_os()` (a value that is not
    /// UTF-8 is taken lossily, and then fails its variable's check).
    pub fn from_os<I>(vars: I) -> Env
    where
        I: IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
    {
        Env::from_vars(vars.into_iter().map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        }))
    }

    /// Sets `vars` over what is here (the later value of a name wins).
    pub fn extend<I, K, V>(&mut self, vars: I)
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        self.vars.extend(Env::from_vars(vars).vars);
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        debug_assert!(var(name).is_some(), "{name} is not in config::VARS");
        self.vars.get(name).map(String::as_str)
    }

    /// One line for each `KUMI_*` variable set here that kumi does not know,
    /// with the nearest known name when one is close.
    pub fn unknown(&self) -> Vec<String> {
        self.vars
            .keys()
            .filter(|k| var(k).is_none())
            .map(|k| match nearest(k) {
                Some(n) => {
                    format!("{k} is not a kumi variable and does nothing (did you mean {n}?)")
                }
                None => format!("{k} is not a kumi variable and does nothing"),
            })
            .collect()
    }

    /// The error of `name`'s value (or absence), which is not `expected`.
    pub fn err(&self, name: &'static str, expected: impl Into<String>) -> ConfigError {
        ConfigError {
            name,
            value: self.vars.get(name).cloned(),
            expected: expected.into(),
        }
    }

    /// A non-negative integer in `lo..=hi`, or `None` if unset.
    pub fn num(&self, name: &'static str, lo: u64, hi: u64) -> Result<Option<u64>, ConfigError> {
        let Some(v) = self.get(name) else {
            return Ok(None);
        };
        match v.trim().parse::<u64>() {
            Ok(n) if (lo..=hi).contains(&n) => Ok(Some(n)),
            _ if hi == u64::MAX => Err(self.err(name, format!("an integer of at least {lo}"))),
            _ => Err(self.err(name, format!("an integer from {lo} to {hi}"))),
        }
    }

    /// A non-negative integer, `default` if unset.
    fn count(&self, name: &'static str, default: u64) -> Result<u64, ConfigError> {
        Ok(self.num(name, 0, u64::MAX)?.unwrap_or(default))
    }

    /// [`Env::count`] as a `usize` (values beyond it saturate: they mean
    /// "never" for every threshold that takes one).
    fn size(&self, name: &'static str, default: usize) -> Result<usize, ConfigError> {
        Ok(usize::try_from(self.count(name, default as u64)?).unwrap_or(usize::MAX))
    }

    /// One of `choices` (matched after trimming; the empty value is unset).
    fn choice<T: Copy>(
        &self,
        name: &'static str,
        default: T,
        choices: &[(&str, T)],
    ) -> Result<T, ConfigError> {
        let v = match self.get(name).map(str::trim) {
            None | Some("") => return Ok(default),
            Some(v) => v,
        };
        match choices.iter().find(|(k, _)| *k == v) {
            Some(&(_, t)) => Ok(t),
            None => {
                let names: Vec<&str> = choices.iter().map(|(k, _)| *k).collect();
                Err(self.err(name, one_of(&names)))
            }
        }
    }

    /// `on`/`off` (also `1`/`0`).
    fn switch(&self, name: &'static str, default: bool) -> Result<bool, ConfigError> {
        self.choice(
            name,
            default,
            &[("on", true), ("1", true), ("off", false), ("0", false)],
        )
    }
}

/// "a, b or c".
fn one_of(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// The known name nearest to `name`, if it is a likely typo of it (at most
/// two edits, or one for short names).
fn nearest(name: &str) -> Option<&'static str> {
    VARS.iter()
        .map(|v| (edit_distance(name, v.name), v.name))
        .filter(|&(d, n)| d <= if n.len() > 10 { 2 } else { 1 })
        .min()
        .map(|(_, n)| n)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// How a rank waits when nothing arrives (see the runtime's wait policy);
/// `None` fields take defaults that depend on whether the host is
/// oversubscribed or which transports the rank has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wait {
    /// `KUMI_POLLS`.
    pub polls: Option<u32>,
    /// `KUMI_SPIN_US`.
    pub spin_us: Option<u64>,
    /// `KUMI_YIELD_US`.
    pub yield_us: Option<u64>,
    /// `KUMI_YIELD_EVERY`.
    pub yield_every: Option<u32>,
    /// `KUMI_MATE_SPIN_US`.
    pub mate_spin_us: u64,
    /// `KUMI_SLEEP_MS`.
    pub sleep_ms: u64,
}

/// `KUMI_BIND`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bind {
    /// Bind when the host is oversubscribed.
    Auto,
    /// Always bind.
    Core,
    /// Never bind.
    None,
}

/// Whether ranks of one host copy long messages between their buffers
/// (`KUMI_SINGLE_COPY`). Whoever creates a host's shared segment resolves
/// it, once, for every rank of the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SingleCopy {
    /// As the host's measurement says.
    Auto,
    /// Single copy (`process_vm_readv`/`writev`).
    On,
    /// Through the rings and the collective area.
    Off,
}

/// How a long collective copies inside a host (`KUMI_COLL_*_COPY`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyMode {
    /// Timed per communicator, or by oversubscription.
    Auto,
    /// Single copy (`process_vm_readv`).
    Single,
    /// Pipelined through the collective area.
    Area,
}

/// The shared-memory transport's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shm {
    /// `KUMI_SHM_RING_BYTES` (a power of two in range), `None`: by ranks.
    pub ring_bytes: Option<usize>,
    /// `KUMI_SHM_PREFETCH`.
    pub prefetch: u64,
    /// `KUMI_SHM_MEMBARRIER`.
    pub membarrier: bool,
}

/// The collectives' thresholds and switches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Coll {
    /// `KUMI_COLL_BCAST_LONG`.
    pub bcast_long: usize,
    /// `KUMI_COLL_ALLREDUCE_LONG`.
    pub allreduce_long: usize,
    /// `KUMI_COLL_ALLREDUCE_RING`.
    pub allreduce_ring: usize,
    /// `KUMI_COLL_ALLGATHER_LONG`.
    pub allgather_long: usize,
    /// `KUMI_COLL_ALLGATHER_COPY_MIN`.
    pub allgather_copy_min: usize,
    /// `KUMI_COLL_COPY_MIN`.
    pub copy_min: usize,
    /// `KUMI_COLL_GATHER_COPY_MIN`.
    pub gather_copy_min: usize,
    /// `KUMI_COLL_ALLTOALL_COPY_MIN`.
    pub alltoall_copy_min: usize,
    /// `KUMI_COLL_BCAST_COPY`.
    pub bcast_copy: CopyMode,
    /// `KUMI_COLL_ALLREDUCE_COPY`.
    pub allreduce_copy: CopyMode,
    /// `KUMI_COLL_SHM`.
    pub shm: bool,
    /// `KUMI_COLL_SHM_BCAST_MAX`.
    pub shm_bcast_max: usize,
    /// `KUMI_COLL_PIECE` (at least 1).
    pub piece: usize,
    /// `KUMI_COLL_HIERARCHICAL`.
    pub hierarchical: bool,
    /// `KUMI_COLL_HOSTS` (`None`: the real hosts).
    pub fake_hosts: Option<usize>,
    /// `KUMI_COMBINE_STORE`.
    pub combine_store: usize,
}

/// `KUMI_FORCE_TCP`: which pairs of ranks must use the network even on one host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ForceTcp {
    /// None.
    None,
    /// Every pair.
    All,
    /// These pairs (either order).
    Pairs(Vec<(u32, u32)>),
}

impl ForceTcp {
    fn parse(v: &str) -> Option<ForceTcp> {
        match v.trim() {
            "" | "0" | "off" => return Some(ForceTcp::None),
            "1" | "all" | "on" => return Some(ForceTcp::All),
            _ => {}
        }
        let mut pairs = Vec::new();
        for p in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (a, b) = p.split_once(':')?;
            pairs.push((a.trim().parse().ok()?, b.trim().parse().ok()?));
        }
        Some(ForceTcp::Pairs(pairs))
    }

    /// Whether the pair of world ranks `a`, `b` must use the network.
    pub fn forces(&self, a: u32, b: u32) -> bool {
        match self {
            ForceTcp::None => false,
            ForceTcp::All => true,
            ForceTcp::Pairs(p) => p.iter().any(|&(x, y)| (x, y) == (a, b) || (x, y) == (b, a)),
        }
    }
}

/// The network transports' settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Net {
    /// `KUMI_NET_TRANSPORT`: reliable UDP (`true`) or TCP.
    pub udp: bool,
    /// `KUMI_FORCE_TCP`.
    pub force: ForceTcp,
    /// `KUMI_UDP_SEGMENT` (`None`: the transport's default).
    pub udp_segment: Option<usize>,
    /// `KUMI_UDP_WINDOW` (`None`: the transport's default).
    pub udp_window: Option<u64>,
    /// `KUMI_UDP_FAULTS`, as set (the UDP transport parses its fault spec).
    pub udp_faults: Option<String>,
    /// `KUMI_UDP_STATS`.
    pub udp_stats: bool,
}

/// Who supervises a job that a process manager started (`KUMI_SUPERVISOR`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Supervisor {
    /// The `kumi` program beside kumi's library, else on `PATH`.
    Auto,
    /// No supervisor.
    Off,
    /// This `kumi` program.
    Program(std::path::PathBuf),
}

/// Every tuning variable of a rank, parsed once at start and passed down.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tuning {
    /// The wait policy.
    pub wait: Wait,
    /// `KUMI_EAGER_LIMIT` (`None`: by transport).
    pub eager_limit: Option<u64>,
    /// `KUMI_SINGLE_COPY`.
    pub single_copy: SingleCopy,
    /// `KUMI_SPLIT_COPY_MIN` (`usize::MAX`: off).
    pub split_copy_min: usize,
    /// `KUMI_PROGRESS`.
    pub progress: bool,
    /// `KUMI_PROGRESS_US` (at least 1).
    pub progress_us: u64,
    /// `KUMI_BIND`.
    pub bind: Bind,
    /// `KUMI_BLOCKED_MS`.
    pub blocked_ms: u64,
    /// `KUMI_SUPERVISOR`: who supervises a job a process manager started.
    pub supervisor: Supervisor,
    /// `KUMI_SUPERVISE`: the supervisor's options, one word each.
    pub supervise: Vec<String>,
    /// Shared memory.
    pub shm: Shm,
    /// Collectives.
    pub coll: Coll,
    /// Network transports.
    pub net: Net,
    /// `KUMI_TEST_DENY_CMA`.
    pub deny_cma: bool,
}

/// The smallest and largest shared-memory ring (`KUMI_SHM_RING_BYTES`).
pub const RING_BYTES: (usize, usize) = (4096, 64 << 20);

impl Tuning {
    /// Parses every tuning variable of `env`; the first bad value is the error.
    pub fn parse(env: &Env) -> Result<Tuning, ConfigError> {
        let positive_u32 = |name| {
            env.num(name, 1, u64::from(u32::MAX))
                .map(|v| v.map(|v| v as u32))
        };
        let ring_bytes = match env.get("KUMI_SHM_RING_BYTES") {
            None => None,
            Some(_) => Some(
                env.num(
                    "KUMI_SHM_RING_BYTES",
                    RING_BYTES.0 as u64,
                    RING_BYTES.1 as u64,
                )
                .ok()
                .flatten()
                .filter(|n| n.is_power_of_two())
                .ok_or_else(|| {
                    env.err(
                        "KUMI_SHM_RING_BYTES",
                        format!(
                            "a power of two from {} to {} (64 MiB)",
                            RING_BYTES.0, RING_BYTES.1
                        ),
                    )
                })? as usize,
            ),
        };
        let split_copy_min = match env.get("KUMI_SPLIT_COPY_MIN").map(str::trim) {
            Some("off") => usize::MAX,
            _ => env
                .size("KUMI_SPLIT_COPY_MIN", 16 * 1024)
                .map_err(|e| ConfigError {
                    expected: format!("{} or off", e.expected),
                    ..e
                })?,
        };
        let copy = |name| {
            env.choice(
                name,
                CopyMode::Auto,
                &[
                    ("auto", CopyMode::Auto),
                    ("single", CopyMode::Single),
                    ("area", CopyMode::Area),
                ],
            )
        };
        let force = match env.get("KUMI_FORCE_TCP") {
            None => ForceTcp::None,
            Some(v) => ForceTcp::parse(v).ok_or_else(|| {
                env.err("KUMI_FORCE_TCP", "off, all, or pairs of ranks like 0:1,2:3")
            })?,
        };
        let fake_hosts = env.size("KUMI_COLL_HOSTS", 0)?;
        Ok(Tuning {
            wait: Wait {
                polls: positive_u32("KUMI_POLLS")?,
                spin_us: env.num("KUMI_SPIN_US", 0, u64::MAX)?,
                yield_us: env.num("KUMI_YIELD_US", 0, u64::MAX)?,
                yield_every: positive_u32("KUMI_YIELD_EVERY")?,
                mate_spin_us: env.count("KUMI_MATE_SPIN_US", 50)?,
                sleep_ms: env.num("KUMI_SLEEP_MS", 1, u64::MAX)?.unwrap_or(100),
            },
            eager_limit: env.num("KUMI_EAGER_LIMIT", 0, u64::MAX)?,
            single_copy: env.choice(
                "KUMI_SINGLE_COPY",
                SingleCopy::Auto,
                &[
                    ("auto", SingleCopy::Auto),
                    ("on", SingleCopy::On),
                    ("1", SingleCopy::On),
                    ("off", SingleCopy::Off),
                    ("0", SingleCopy::Off),
                ],
            )?,
            split_copy_min,
            progress: env.switch("KUMI_PROGRESS", true)?,
            progress_us: env.num("KUMI_PROGRESS_US", 1, u64::MAX)?.unwrap_or(500),
            bind: env.choice(
                "KUMI_BIND",
                Bind::Auto,
                &[
                    ("auto", Bind::Auto),
                    ("core", Bind::Core),
                    ("none", Bind::None),
                ],
            )?,
            blocked_ms: env.count("KUMI_BLOCKED_MS", 100)?,
            supervisor: match env.get("KUMI_SUPERVISOR").map(str::trim) {
                None | Some("auto") => Supervisor::Auto,
                Some("off") => Supervisor::Off,
                Some("") => return Err(env.err("KUMI_SUPERVISOR", "auto, off or a path")),
                Some(path) => Supervisor::Program(path.into()),
            },
            supervise: env
                .get("KUMI_SUPERVISE")
                .map(|v| v.split_whitespace().map(String::from).collect())
                .unwrap_or_default(),
            shm: Shm {
                ring_bytes,
                prefetch: env.count("KUMI_SHM_PREFETCH", 256)?,
                membarrier: env.switch("KUMI_SHM_MEMBARRIER", true)?,
            },
            coll: Coll {
                bcast_long: env.size("KUMI_COLL_BCAST_LONG", 64 << 10)?,
                allreduce_long: env.size("KUMI_COLL_ALLREDUCE_LONG", 16 << 10)?,
                allreduce_ring: env.size("KUMI_COLL_ALLREDUCE_RING", 4 << 20)?,
                allgather_long: env.size("KUMI_COLL_ALLGATHER_LONG", 32 << 10)?,
                allgather_copy_min: env.size("KUMI_COLL_ALLGATHER_COPY_MIN", 16 << 10)?,
                copy_min: env.size("KUMI_COLL_COPY_MIN", 32 << 10)?,
                // Measured: docs/BENCHMARKS.md, session 59.
                gather_copy_min: env.size("KUMI_COLL_GATHER_COPY_MIN", 64 << 10)?,
                alltoall_copy_min: env.size("KUMI_COLL_ALLTOALL_COPY_MIN", 16 << 10)?,
                bcast_copy: copy("KUMI_COLL_BCAST_COPY")?,
                allreduce_copy: copy("KUMI_COLL_ALLREDUCE_COPY")?,
                shm: env.switch("KUMI_COLL_SHM", true)?,
                shm_bcast_max: env.size("KUMI_COLL_SHM_BCAST_MAX", usize::MAX)?,
                piece: env
                    .num("KUMI_COLL_PIECE", 1, u64::MAX)?
                    // Measured: docs/BENCHMARKS.md, session 30.
                    .map_or(32 << 10, |v| usize::try_from(v).unwrap_or(usize::MAX)),
                hierarchical: env.switch("KUMI_COLL_HIERARCHICAL", true)?,
                fake_hosts: (fake_hosts > 0).then_some(fake_hosts),
                combine_store: env.size("KUMI_COMBINE_STORE", 64)?,
            },
            net: Net {
                udp: env.choice("KUMI_NET_TRANSPORT", true, &[("udp", true), ("tcp", false)])?,
                force,
                udp_segment: env
                    .num("KUMI_UDP_SEGMENT", 1, u64::MAX)?
                    .map(|v| usize::try_from(v).unwrap_or(usize::MAX)),
                udp_window: env.num("KUMI_UDP_WINDOW", 1, u64::MAX)?,
                udp_faults: env
                    .get("KUMI_UDP_FAULTS")
                    .filter(|v| !v.trim().is_empty())
                    .map(str::to_string),
                udp_stats: env.switch("KUMI_UDP_STATS", false)?,
            },
            deny_cma: env.switch("KUMI_TEST_DENY_CMA", false)?,
        })
    }

    /// The defaults (an empty environment).
    pub fn defaults() -> Tuning {
        Tuning::parse(&Env::default()).expect("the defaults parse")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> Env {
        Env::from_vars(vars.iter().map(|&(k, v)| (k, v)))
    }

    fn parse(vars: &[(&str, &str)]) -> Result<Tuning, ConfigError> {
        Tuning::parse(&env(vars))
    }

    #[test]
    fn every_default_is_the_documented_one() {
        let t = Tuning::defaults();
        let doc = |name: &str| var(name).unwrap().default;
        // The fixed numeric defaults: the value parsed from nothing is the
        // one the table states.
        for (name, v) in [
            ("KUMI_SHM_PREFETCH", t.shm.prefetch),
            ("KUMI_SPLIT_COPY_MIN", t.split_copy_min as u64),
            ("KUMI_MATE_SPIN_US", t.wait.mate_spin_us),
            ("KUMI_SLEEP_MS", t.wait.sleep_ms),
            ("KUMI_BLOCKED_MS", t.blocked_ms),
            ("KUMI_PROGRESS_US", t.progress_us),
            ("KUMI_COLL_BCAST_LONG", t.coll.bcast_long as u64),
            ("KUMI_COLL_ALLREDUCE_LONG", t.coll.allreduce_long as u64),
            ("KUMI_COLL_ALLREDUCE_RING", t.coll.allreduce_ring as u64),
            ("KUMI_COLL_ALLGATHER_LONG", t.coll.allgather_long as u64),
            (
                "KUMI_COLL_ALLGATHER_COPY_MIN",
                t.coll.allgather_copy_min as u64,
            ),
            ("KUMI_COLL_COPY_MIN", t.coll.copy_min as u64),
            ("KUMI_COLL_GATHER_COPY_MIN", t.coll.gather_copy_min as u64),
            (
                "KUMI_COLL_ALLTOALL_COPY_MIN",
                t.coll.alltoall_copy_min as u64,
            ),
            ("KUMI_COLL_PIECE", t.coll.piece as u64),
            ("KUMI_COMBINE_STORE", t.coll.combine_store as u64),
        ] {
            assert_eq!(doc(name), v.to_string(), "{name}");
        }
        // The switches and choices.
        for (name, on) in [
            ("KUMI_PROGRESS", t.progress),
            ("KUMI_SHM_MEMBARRIER", t.shm.membarrier),
            ("KUMI_COLL_SHM", t.coll.shm),
            ("KUMI_COLL_HIERARCHICAL", t.coll.hierarchical),
            ("KUMI_UDP_STATS", t.net.udp_stats),
            ("KUMI_TEST_DENY_CMA", t.deny_cma),
        ] {
            assert_eq!(doc(name), if on { "on" } else { "off" }, "{name}");
        }
        assert_eq!((doc("KUMI_BIND"), t.bind), ("auto", Bind::Auto));
        assert_eq!(
            (doc("KUMI_SINGLE_COPY"), t.single_copy),
            ("auto", SingleCopy::Auto)
        );
        assert_eq!(t.coll.bcast_copy, CopyMode::Auto);
        assert_eq!(t.coll.allreduce_copy, CopyMode::Auto);
        assert_eq!((doc("KUMI_NET_TRANSPORT"), t.net.udp), ("udp", true));
        assert_eq!(
            (doc("KUMI_FORCE_TCP"), &t.net.force),
            ("off", &ForceTcp::None)
        );
        assert_eq!((doc("KUMI_COLL_HOSTS"), t.coll.fake_hosts), ("0", None));
        assert_eq!(t.coll.shm_bcast_max, usize::MAX);
        // The defaults that depend on the host are left to the runtime.
        assert_eq!(t.wait.polls, None);
        assert_eq!(t.wait.spin_us, None);
        assert_eq!(t.wait.yield_us, None);
        assert_eq!(t.wait.yield_every, None);
        assert_eq!(t.eager_limit, None);
        assert_eq!(t.shm.ring_bytes, None);
    }

    #[test]
    fn set_values_are_taken() {
        let t = parse(&[
            ("KUMI_POLLS", "7"),
            ("KUMI_SPLIT_COPY_MIN", "off"),
            ("KUMI_SHM_RING_BYTES", "65536"),
            ("KUMI_COLL_BCAST_COPY", " area "),
            ("KUMI_BIND", "none"),
            ("KUMI_PROGRESS", "0"),
            ("KUMI_NET_TRANSPORT", "tcp"),
            ("KUMI_FORCE_TCP", "0:1, 3:2"),
            ("KUMI_COLL_HOSTS", "3"),
        ])
        .unwrap();
        assert_eq!(t.wait.polls, Some(7));
        assert_eq!(t.split_copy_min, usize::MAX);
        assert_eq!(t.shm.ring_bytes, Some(65536));
        assert_eq!(t.coll.bcast_copy, CopyMode::Area);
        assert_eq!(t.bind, Bind::None);
        assert!(!t.progress && !t.net.udp);
        assert!(t.net.force.forces(1, 0) && t.net.force.forces(2, 3) && !t.net.force.forces(0, 2));
        assert_eq!(t.coll.fake_hosts, Some(3));
    }

    #[test]
    fn a_value_out_of_range_is_an_error_naming_the_variable() {
        for (name, bad, says) in [
            ("KUMI_POLLS", "0", "from 1 to"),
            ("KUMI_POLLS", "many", "from 1 to"),
            ("KUMI_SLEEP_MS", "0", "at least 1"),
            ("KUMI_PROGRESS_US", "-3", "at least 1"),
            ("KUMI_SHM_RING_BYTES", "1000", "power of two from 4096"),
            ("KUMI_SHM_RING_BYTES", "134217728", "power of two from 4096"),
            ("KUMI_SPLIT_COPY_MIN", "big", "or off"),
            ("KUMI_SINGLE_COPY", "yes", "auto, on, 1, off or 0"),
            ("KUMI_BIND", "socket", "auto, core or none"),
            ("KUMI_COLL_ALLREDUCE_COPY", "both", "auto, single or area"),
            ("KUMI_NET_TRANSPORT", "ib", "udp or tcp"),
            ("KUMI_FORCE_TCP", "0-1", "pairs of ranks"),
            ("KUMI_COLL_PIECE", "0", "at least 1"),
            ("KUMI_UDP_WINDOW", "0", "at least 1"),
        ] {
            let e = parse(&[(name, bad)]).unwrap_err();
            assert_eq!((e.name, e.value.as_deref()), (name, Some(bad)));
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("{name}=")), "{msg}");
            assert!(msg.contains(says), "{name}={bad}: {msg}");
        }
    }

    #[test]
    fn an_unknown_kumi_variable_is_reported_with_the_nearest_name() {
        let e = env(&[
            ("KUMI_POLL", "4"),
            ("KUMI_EAGER_LIMTI", "9"),
            ("KUMI_NONSENSE_OF_ITS_OWN", "1"),
            ("KUMI_POLLS", "4"),
            ("PATH", "/bin"),
        ]);
        let u = e.unknown();
        assert_eq!(u.len(), 3, "{u:?}");
        assert!(u[0].starts_with("KUMI_EAGER_LIMTI ") && u[0].contains("KUMI_EAGER_LIMIT?"));
        assert!(u[1].contains("KUMI_NONSENSE_OF_ITS_OWN") && !u[1].contains("did you mean"));
        assert!(u[2].starts_with("KUMI_POLL ") && u[2].contains("KUMI_POLLS?"));
        assert!(env(&[("KUMI_RANK", "0"), ("KUMI_CC", "gcc")])
            .unknown()
            .is_empty());
    }

    /// The README's section between its markers is exactly
    /// [`markdown_section`]; on a change to [`VARS`], paste what this prints.
    #[test]
    fn the_readme_lists_every_variable_as_the_table_says() {
        let readme = include_str!("../../../README.md");
        let (begin, end) = (
            "<!-- BEGIN generated: config::markdown_section -->\n",
            "<!-- END generated -->",
        );
        let at = readme.find(begin).expect("the README's begin marker") + begin.len();
        let to = at + readme[at..].find(end).expect("the README's end marker");
        let want = markdown_section();
        assert!(
            readme[at..to] == want,
            "the README's variables differ from config::VARS; the section should read:\n{want}"
        );
    }

    /// Every `"KUMI_..."` string in kumi's sources (`src/` of each crate;
    /// tests may misspell on purpose) names a variable of the table: a
    /// variable read or set anywhere is documented and known.
    #[test]
    fn every_variable_the_sources_name_is_in_the_table() {
        fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        for c in std::fs::read_dir(&crates).unwrap().flatten() {
            if c.path().join("src").is_dir() {
                walk(&c.path().join("src"), &mut files);
            }
        }
        assert!(files.len() > 50, "found {} sources", files.len());
        let mut missing = Vec::new();
        for f in files
            .iter()
            .filter(|f| !f.ends_with("kumi-core/src/config.rs"))
        {
            let text = std::fs::read_to_string(f).unwrap();
            for (i, _) in text.match_indices("\"KUMI_") {
                let name: String = text[i + 1..]
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                let quoted = text[i + 1 + name.len()..].starts_with('"');
                if quoted && name != "KUMI_" && var(&name).is_none() {
                    missing.push(format!("{name} in {}", f.display()));
                }
            }
        }
        assert!(missing.is_empty(), "not in config::VARS: {missing:?}");
    }

    #[test]
    fn every_name_is_listed_once() {
        let mut names: Vec<&str> = VARS.iter().map(|v| v.name).collect();
        names.sort();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "a name is listed twice");
        assert!(VARS
            .iter()
            .all(|v| v.name.starts_with("KUMI_") && !v.meaning.is_empty()));
    }
}
