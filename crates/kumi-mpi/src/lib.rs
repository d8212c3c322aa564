//! `libmpi.so.12`: the MPI C ABI, MPICH-compatible, on top of the kumi runtime.
//!
//! A program compiled against MPICH's `mpi.h` (or kumi's own, which has the same
//! values) calls `MPI_Send(buf, 4, MPI_INT, 1, 0, MPI_COMM_WORLD)`; this crate
//! turns the integer handles into runtime objects and calls the runtime. It has
//! no messaging logic of its own: point-to-point goes through [`kumi::raw`],
//! layouts through [`kumi::datatype`], communicators through [`kumi::Comm`],
//! process topologies through [`kumi::topo`]. What it does hold is MPI's own
//! object model: handles, attributes and keyvals, error handlers and classes,
//! and the argument checks each function's C signature needs.
//!
//! Design decisions a newcomer might otherwise undo:
//! - **MPICH's ABI, not a new one.** Handles are `int` with MPICH's values
//!   (`MPI_COMM_WORLD = 0x44000000`, `MPI_INT = 0x4c000405` whose byte 1 is the
//!   size), `MPI_Status` has MPICH's five fields, and every symbol MPICH exports
//!   is exported here, so binaries built against MPICH load and run unchanged.
//!   Objects a program creates get handles in MPICH's "indirect" range
//!   (`0x8?000000 | index`), so they never collide with a predefined one.
//! - **One global state, owned by the thread that initialized.** The runtime is
//!   single-threaded per process, so `MPI_Init_thread` provides
//!   `MPI_THREAD_FUNNELED` (or, asked for more, `MPI_THREAD_SERIALIZED`, one
//!   thread at a time holding a token), and a call from another thread (or
//!   of a second thread at once) is refused with an error rather than
//!   racing. One word (`state::Global::owner`)
//!   says "running, and this is its thread" in one comparison per call.
//! - **A fast path per hot call, with the errors on the general one.** The
//!   blocking send and receive of a predefined type, and `MPI_Allreduce` of
//!   a few common types, test their arguments with one comparison each and
//!   otherwise fall through to the general path, which checks each argument
//!   in turn and says what was wrong: the C library's calls stay within a
//!   few percent of the Rust API's (docs/BENCHMARKS.md, session 17).
//! - **No panic crosses the ABI.** Every exported function runs its body under
//!   `catch_unwind` (`guard`); a panic becomes `MPI_ERR_INTERN` and goes to the
//!   error handler like any other error.
//! - **Errors go to the communicator's handler.** `MPI_ERRORS_ARE_FATAL` (the
//!   default) prints the function, the rank and what was wrong, then aborts the
//!   job through kumi's abort path; `MPI_ERRORS_RETURN` returns the class.
//! - **Unsupported is loud.** Functions kumi does not implement yet are exported
//!   (so binaries load) and fail naming themselves; none fakes a success.
#![allow(non_snake_case, non_camel_case_types, non_upper_case_globals)]
// Every exported function's safety contract is the MPI standard's: pointer
// arguments point to what the standard says they point to.
#![allow(clippy::missing_safety_doc)]

#[macro_use]
mod macros;
mod attr;
mod checkpoint;
mod coll;
mod comm;
pub mod consts;
mod dsm;
mod external32;
mod file;
mod fortran;
mod grequest;
mod info;
mod init;
mod large;
mod misc;
mod p2p;
mod part;
mod session;
mod state;
mod stubs;
mod tools;
mod types;
pub(crate) mod win;

use consts::*;
use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;

/// `MPI_Status`, laid out as MPICH lays it out.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MPI_Status {
    /// Low 32 bits of the message size in bytes.
    pub count_lo: c_int,
    /// High bits of the size, shifted left by one; bit 0 is "cancelled".
    pub count_hi_and_cancelled: c_int,
    /// Sender's rank.
    pub MPI_SOURCE: c_int,
    /// Message tag.
    pub MPI_TAG: c_int,
    /// Error class, for the multiple-completion calls.
    pub MPI_ERROR: c_int,
}

/// An MPI error: its class and a sentence saying what was wrong.
#[derive(Debug)]
pub(crate) struct MpiErr {
    pub class: c_int,
    pub msg: String,
}

pub(crate) type R<T> = Result<T, MpiErr>;

pub(crate) fn err<T>(class: c_int, msg: impl Into<String>) -> R<T> {
    Err(MpiErr {
        class,
        msg: msg.into(),
    })
}

impl From<kumi::Error> for MpiErr {
    fn from(e: kumi::Error) -> Self {
        let class = match &e {
            kumi::Error::Truncated { .. } => MPI_ERR_TRUNCATE,
            kumi::Error::InvalidArgument { arg, .. } => match *arg {
                "dest" | "source" => MPI_ERR_RANK,
                "tag" => MPI_ERR_TAG,
                "op" => MPI_ERR_OP,
                "root" => MPI_ERR_ROOT,
                "counts" | "send_counts" | "recv_counts" | "recv" | "send" => MPI_ERR_COUNT,
                "datatype" | "blocklength" | "subsizes" | "ndims" => MPI_ERR_TYPE,
                _ => MPI_ERR_ARG,
            },
            kumi::Error::Bootstrap(_) | kumi::Error::Checkpoint(_) => MPI_ERR_OTHER,
            kumi::Error::Protocol(_) => MPI_ERR_INTERN,
            kumi::Error::Io(_) => MPI_ERR_OTHER,
            kumi::Error::File { fault, .. } => file::class_of(*fault),
        };
        MpiErr {
            class,
            msg: e.to_string(),
        }
    }
}

/// The communicator whose error handler an error in the current call goes
/// to: set when a call looks up its communicator (or request, window...).
/// Process-wide rather than thread-local (a thread-local costs a call into the
/// dynamic linker per access in a shared library): only the thread that
/// initialized MPI may make calls (`state::st` refuses others, and the error
/// of a refused call aborts the job, see `state::handle_error`), so only it
/// sets this in a running program. Relaxed: written and read by that thread.
///
/// Stored only when it changes (a program's calls are mostly on one
/// communicator): a store waits in the processor's store buffer for every
/// store before it, and the small-message paths fill that buffer with the
/// message's stores into the ring (docs/BENCHMARKS.md, session 18), where a
/// load and a comparison cost nothing.
#[inline(always)]
pub(crate) fn set_err_comm(c: c_int) {
    let e = state::err_comm();
    // Relaxed: see above.
    if e.load(Ordering::Relaxed) != c {
        e.store(c, Ordering::Relaxed);
    }
}

/// Runs the body of MPI function `name`: catches panics, and hands an error to
/// the error handler of the communicator the call was about.
/// The call is labelled with `name` for the deadlock reports ([`kumi::AbiCall`]).
///
/// Inlined into each exported function, with the body: passed to a function
/// of its own, the body's captured arguments went through memory, stored as
/// 4-byte integers and loaded as 8-byte words, which the processor cannot
/// forward from the stores and makes wait for them (a tenth of an
/// `MPI_Allreduce` of 8 bytes). The error paths stay out of line.
#[inline(always)]
pub(crate) fn guard(name: &'static &'static str, f: impl FnOnce() -> R<()>) -> c_int {
    let Ok(_token) = state::Token::enter() else {
        return failed(name, concurrent());
    };
    let _label = kumi::AbiCall::enter(name);
    set_err_comm(MPI_COMM_WORLD);
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => MPI_SUCCESS,
        Ok(Err(e)) => failed(name, e),
        Err(p) => panicked(name, p),
    }
}

/// [`guard`] for a call that never blocks (`MPI_Isend`, `MPI_Irecv`,
/// `MPI_Test`...): without the [`kumi::AbiCall`] label, which only names the
/// call in reports of long waits.
#[inline(always)]
pub(crate) fn guard_nb(name: &'static &'static str, f: impl FnOnce() -> R<()>) -> c_int {
    guard_plain(name, f)
}

/// [`guard_nb`] for a name that is not a literal (the large-count variants'
/// argument errors, unsupported functions).
#[inline(always)]
pub(crate) fn guard_plain(name: &'static str, f: impl FnOnce() -> R<()>) -> c_int {
    let Ok(_token) = state::Token::enter() else {
        return failed(name, concurrent());
    };
    set_err_comm(MPI_COMM_WORLD);
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => MPI_SUCCESS,
        Ok(Err(e)) => failed(name, e),
        Err(p) => panicked(name, p),
    }
}

/// The error of a call made while another thread is inside MPI.
#[cold]
#[inline(never)]
fn concurrent() -> MpiErr {
    MpiErr {
        class: MPI_ERR_OTHER,
        msg: state::SERIALIZED_RULE.into(),
    }
}

/// Hands the error of call `name` to the error handler (see [`guard`]).
#[cold]
#[inline(never)]
fn failed(name: &'static str, e: MpiErr) -> c_int {
    state::handle_error(name, state::err_comm().load(Ordering::Relaxed), e)
}

/// A panic in call `name` becomes `MPI_ERR_INTERN` (see [`guard`]).
#[cold]
#[inline(never)]
fn panicked(name: &'static str, p: Box<dyn std::any::Any + Send>) -> c_int {
    let what = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown".into());
    let e = MpiErr {
        class: MPI_ERR_INTERN,
        msg: format!("internal error in kumi ({what})"),
    };
    failed(name, e)
}

/// The predefined error classes (MPICH's numbers): name and sentence.
const CLASSES: &[(c_int, &str, &str)] = &[
    (0, "MPI_SUCCESS", "no error"),
    (1, "MPI_ERR_BUFFER", "invalid buffer pointer"),
    (2, "MPI_ERR_COUNT", "invalid count argument"),
    (3, "MPI_ERR_TYPE", "invalid datatype"),
    (4, "MPI_ERR_TAG", "invalid tag"),
    (5, "MPI_ERR_COMM", "invalid communicator"),
    (6, "MPI_ERR_RANK", "invalid rank"),
    (7, "MPI_ERR_ROOT", "invalid root"),
    (8, "MPI_ERR_GROUP", "invalid group"),
    (9, "MPI_ERR_OP", "invalid reduction operation"),
    (10, "MPI_ERR_TOPOLOGY", "invalid topology"),
    (11, "MPI_ERR_DIMS", "invalid dimension argument"),
    (12, "MPI_ERR_ARG", "invalid argument"),
    (13, "MPI_ERR_UNKNOWN", "unknown error"),
    (14, "MPI_ERR_TRUNCATE", "message truncated"),
    (15, "MPI_ERR_OTHER", "other error"),
    (16, "MPI_ERR_INTERN", "internal error"),
    (17, "MPI_ERR_IN_STATUS", "error code is in status"),
    (18, "MPI_ERR_PENDING", "pending request"),
    (19, "MPI_ERR_REQUEST", "invalid request"),
    (20, "MPI_ERR_ACCESS", "permission denied"),
    (21, "MPI_ERR_AMODE", "invalid file access mode"),
    (22, "MPI_ERR_BAD_FILE", "invalid file name"),
    (23, "MPI_ERR_CONVERSION", "data conversion failed"),
    (
        24,
        "MPI_ERR_DUP_DATAREP",
        "data representation already defined",
    ),
    (25, "MPI_ERR_FILE_EXISTS", "file exists"),
    (26, "MPI_ERR_FILE_IN_USE", "file in use"),
    (27, "MPI_ERR_FILE", "invalid file handle"),
    (28, "MPI_ERR_INFO", "invalid info object"),
    (29, "MPI_ERR_INFO_KEY", "invalid info key"),
    (30, "MPI_ERR_INFO_VALUE", "invalid info value"),
    (31, "MPI_ERR_INFO_NOKEY", "info key not defined"),
    (32, "MPI_ERR_IO", "input/output error"),
    (33, "MPI_ERR_NAME", "invalid service name"),
    (34, "MPI_ERR_NO_MEM", "out of memory"),
    (35, "MPI_ERR_NOT_SAME", "arguments differ between processes"),
    (36, "MPI_ERR_NO_SPACE", "no space left on device"),
    (37, "MPI_ERR_NO_SUCH_FILE", "no such file"),
    (38, "MPI_ERR_PORT", "invalid port name"),
    (39, "MPI_ERR_QUOTA", "quota exceeded"),
    (40, "MPI_ERR_READ_ONLY", "read-only file or file system"),
    (41, "MPI_ERR_SERVICE", "invalid service"),
    (42, "MPI_ERR_SPAWN", "could not spawn processes"),
    (
        43,
        "MPI_ERR_UNSUPPORTED_DATAREP",
        "data representation not supported",
    ),
    (
        44,
        "MPI_ERR_UNSUPPORTED_OPERATION",
        "operation not supported by kumi yet",
    ),
    (45, "MPI_ERR_WIN", "invalid window"),
    (46, "MPI_ERR_BASE", "invalid base address"),
    (47, "MPI_ERR_LOCKTYPE", "invalid lock type"),
    (48, "MPI_ERR_KEYVAL", "invalid attribute key"),
    (
        49,
        "MPI_ERR_RMA_CONFLICT",
        "conflicting accesses to a window",
    ),
    (
        50,
        "MPI_ERR_RMA_SYNC",
        "wrong synchronization of one-sided calls",
    ),
    (51, "MPI_ERR_SIZE", "invalid size"),
    (52, "MPI_ERR_DISP", "invalid displacement"),
    (53, "MPI_ERR_ASSERT", "invalid assertion"),
    (55, "MPI_ERR_RMA_RANGE", "target memory outside the window"),
    (56, "MPI_ERR_RMA_ATTACH", "memory cannot be attached"),
    (57, "MPI_ERR_RMA_SHARED", "memory cannot be shared"),
    (58, "MPI_ERR_RMA_FLAVOR", "wrong window flavor"),
    (75, "MPI_ERR_SESSION", "invalid session"),
    (76, "MPI_ERR_PROC_ABORTED", "a process aborted"),
    (77, "MPI_ERR_VALUE_TOO_LARGE", "value too large"),
    (80, "MPI_ERR_ERRHANDLER", "invalid error handler"),
];

fn class_entry(class: c_int) -> Option<&'static (c_int, &'static str, &'static str)> {
    CLASSES.iter().find(|e| e.0 == class)
}

/// Name of an error class, for messages.
pub(crate) fn class_name(class: c_int) -> &'static str {
    class_entry(class).map_or("unknown error class", |e| e.1)
}

/// What an error class means, in a few words (`MPI_Error_string`).
pub(crate) fn class_text(class: c_int) -> &'static str {
    class_entry(class).map_or("unknown error", |e| e.2)
}

/// What every function kumi does not implement yet does: says so, naming the
/// function, and fails with `MPI_ERR_UNSUPPORTED_OPERATION` through the error
/// handler (before `MPI_Init`, or under `MPI_ERRORS_RETURN`, it returns that).
pub(crate) fn unsupported(name: &'static str) -> c_int {
    let msg = format!("{name} is not supported by kumi yet");
    // Acquire: see `state::st`.
    if state::phase().load(std::sync::atomic::Ordering::Acquire) != 1 {
        eprintln!("kumi: {msg}");
        return MPI_ERR_UNSUPPORTED_OPERATION;
    }
    let rc = guard_plain(name, || err(MPI_ERR_UNSUPPORTED_OPERATION, msg.clone()));
    eprintln!("kumi: {msg}");
    rc
}
