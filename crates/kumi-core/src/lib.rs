//! kumi-core: the protocol logic of kumi with no I/O.
//!
//! Everything here is a pure function or a state machine: no sockets, no threads,
//! no clocks, no `unsafe`. The layers above feed it bytes and events and act on what
//! it returns. That is what lets the matching engine be checked against a naive
//! model with random interleavings, and the wire and control codecs be fuzzed,
//! without starting a single process.
//!
//! May depend on: serialization and hashing crates only. Never on another kumi crate.
//!
//! - [`header`]: the fixed 40-byte header every data-plane frame carries.
//! - [`matching`]: MPI matching (context, source or any, tag or any) with posted
//!   and unexpected queues, order-preserving per sender.
//! - [`p2p`]: the point-to-point protocol's decisions (eager or rendezvous,
//!   single, split or pushed copies) and the checks of every frame that names
//!   a request; the runtime's engine carries them out.
//! - [`config`]: every `KUMI_*` variable in one table, parsed once into a
//!   typed [`config::Tuning`]; [`rankenv`]: the launcher-to-rank contract.
//! - [`control`]: messages between a rank and its launcher, their framing, and the
//!   challenge-response that proves the job secret.
//! - [`coll`]: collective schedules (pure), checked against a serial evaluation.
//! - [`ctxsvc`]: contexts for communicators made without blocking
//!   (`MPI_Comm_idup`), handed out by one server.
//! - [`combine`]: the combining service's state machine (keys, levels, decombining).
//! - [`call`]: names of the runtime calls a rank can be blocked in, as reported to
//!   the launcher.
//! - [`deadlock`]: what ranks report about long waits, and the pure rule that
//!   decides from those reports that some ranks can never continue.
//! - [`dist`]: where the elements of a global array live (block, cyclic,
//!   owner-chosen), and ranges cut into runs per owner.
//! - [`dsm`]: page-based distributed shared memory: the coherence protocol
//!   (home-based release consistency, twins and diffs) and the lock service
//!   that DSM arrays use as well.
//! - [`rma`]: the active messages of one-sided access across hosts (put, get,
//!   accumulate, lock) and their checks.
//! - [`tasks`]: DSE's task queue: one FIFO every rank pushes to and pops
//!   from, which detects that the work is over.
//! - [`topo`]: process topologies (Cartesian grids, `MPI_Dims_create`, graphs).
//! - [`rudp`]: reliable delivery over datagrams (sequence numbers, selective
//!   acknowledgements, retransmission, credits), with `now` passed in.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod call;
pub mod checkpoint;
pub mod coll;
pub mod combine;
pub mod config;
pub mod control;
pub mod ctxsvc;
pub mod deadlock;
pub mod debug;
pub mod dist;
pub mod dsm;
pub mod header;
pub mod matching;
pub mod p2p;
pub mod pmi;
pub mod rankenv;
pub mod rma;
pub mod rudp;
pub mod tasks;
pub mod topo;

/// Largest tag a user may pass (inclusive). Tags above it are reserved for kumi.
pub const TAG_UB: i32 = (1 << 30) - 1;
/// Wildcard source in receives and probes.
pub const ANY_SOURCE: i32 = -1;
/// Wildcard tag in receives and probes.
pub const ANY_TAG: i32 = -1;
