//! Init and finalize, environment queries, clocks.

use crate::consts::*;
use crate::state::{self, out, out_str, phase, st, State};
use crate::{err, R};
use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// The thread levels kumi provides: by default (`MPI_Init`, or asking for
/// less) calls come from the thread that initialized, checked with one
/// comparison per call; asking for `MPI_THREAD_SERIALIZED` gets it (a call
/// made while another thread is inside MPI fails, naming the level), and
/// asking for `MPI_THREAD_MULTIPLE` gets it: threads take turns inside, and
/// a waiting thread hands its turn on (see `state::Token`, `kumi::threads`).
const PROVIDED: c_int = MPI_THREAD_FUNNELED;

/// `MPI_Init` was called (what `MPI_Initialized` reports) / `MPI_Finalize`
/// was (`MPI_Finalized`). The runtime itself may run for sessions too: it
/// starts with the first of `MPI_Init` and `MPI_Session_init` and ends
/// with the last of `MPI_Finalize` and `MPI_Session_finalize` (`phase`).
static WORLD_INIT: AtomicBool = AtomicBool::new(false);
static WORLD_DONE: AtomicBool = AtomicBool::new(false);
/// Sessions open. Only the init thread changes it (a call from another
/// thread is refused by `st()` first, or, before the runtime runs, is the
/// init thread's first call).
static SESSIONS: AtomicU32 = AtomicU32::new(0);

fn init() -> R<()> {
    if WORLD_INIT.load(Ordering::Acquire) {
        return err(MPI_ERR_OTHER, "MPI_Init was called more than once");
    }
    join()?;
    WORLD_INIT.store(true, Ordering::Release);
    Ok(())
}

/// Starts the runtime, or, when a session (or `MPI_Init`) already has,
/// checks that this call comes from the thread that did.
fn join() -> R<()> {
    match phase().load(Ordering::Acquire) {
        0 => start(),
        1 => st().map(drop),
        _ => err(
            MPI_ERR_OTHER,
            "MPI was finalized: kumi cannot start it again",
        ),
    }
}

/// `MPI_Session_init`'s part here: starts the runtime if nothing has.
pub(crate) fn start_session() -> R<()> {
    join()?;
    SESSIONS.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// `MPI_Session_finalize`'s part here: ends the runtime with the last
/// session if the world model is not (or no longer) in use.
pub(crate) fn end_session() -> R<()> {
    let left = SESSIONS.fetch_sub(1, Ordering::Relaxed) - 1;
    let world_open = WORLD_INIT.load(Ordering::Acquire) && !WORLD_DONE.load(Ordering::Acquire);
    if left == 0 && !world_open {
        return shut_down();
    }
    Ok(())
}

/// Ends the runtime (collective over the job, as `kumi::Universe::finalize`).
fn shut_down() -> R<()> {
    kumi::raw::wait_orphans()?;
    state::clear_owner();
    let s = state::take();
    phase().store(2, Ordering::Release);
    if let Some(s) = s {
        s.universe.finalize()?;
    }
    Ok(())
}

fn start() -> R<()> {
    let universe = kumi::init()?;
    let world = universe.world();
    let me = world.rank() as u32;
    let selfc = world.split(Some(me), 0)?.ok_or_else(|| crate::MpiErr {
        class: MPI_ERR_INTERN,
        msg: "MPI_COMM_SELF could not be made".into(),
    })?;
    state::set_init_thread();
    state::install(State::new(universe, world, selfc));
    clock();
    // Release: pairs with the Acquire in `st()`; the state and INIT_THREAD are
    // published before any thread can see "running".
    phase().store(1, Ordering::Release);
    state::set_owner();
    Ok(())
}

fn clock() -> Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    *START.get_or_init(Instant::now)
}

mpi! {
    fn MPI_Init / PMPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) {
        init()
    }

    fn MPI_Init_thread / PMPI_Init_thread(
        _argc: *mut c_int,
        _argv: *mut *mut *mut c_char,
        required: c_int,
        provided: *mut c_int,
    ) {
        init()?;
        let level = if required >= MPI_THREAD_SERIALIZED { required.min(MPI_THREAD_MULTIPLE) } else { required.min(PROVIDED) };
        out(provided, "provided", level)?;
        if level >= MPI_THREAD_SERIALIZED {
            state::set_thread_level(level);
        }
        Ok(())
    }

    fn MPI_Initialized / PMPI_Initialized(flag: *mut c_int) {
        // Acquire: pairs with the Release in `init`.
        out(flag, "flag", WORLD_INIT.load(Ordering::Acquire) as c_int)
    }

    fn MPI_Finalized / PMPI_Finalized(flag: *mut c_int) {
        out(flag, "flag", WORLD_DONE.load(Ordering::Acquire) as c_int)
    }

    fn MPI_Query_thread / PMPI_Query_thread(provided: *mut c_int) {
        st()?;
        out(provided, "provided", state::thread_level())
    }

    fn MPI_Is_thread_main / PMPI_Is_thread_main(flag: *mut c_int) {
        if phase().load(Ordering::Acquire) == 0 {
            return err(MPI_ERR_OTHER, "MPI is not initialized");
        }
        // The thread that initialized (not whichever holds the token under
        // MPI_THREAD_SERIALIZED).
        let main = state::INIT_THREAD.get() == Some(&std::thread::current().id());
        out(flag, "flag", main as c_int)
    }

    fn MPI_Finalize / PMPI_Finalize() {
        st()?;
        if !WORLD_INIT.load(Ordering::Acquire) || WORLD_DONE.load(Ordering::Acquire) {
            return err(MPI_ERR_OTHER, "MPI_Finalize without MPI_Init (sessions end with MPI_Session_finalize)");
        }
        // MPI_Finalize begins as if MPI_COMM_SELF were freed (MPI 4.1,
        // "Allowing User Functions at Process Termination"): its
        // attributes' delete callbacks run, the last set first, with MPI still whole (MPI_Finalized is false there),
        // which libraries use as a finalize hook.
        crate::attr::delete_all_attrs(MPI_COMM_SELF, crate::attr::comm_attrs)?;
        WORLD_DONE.store(true, Ordering::Release);
        // Sessions still open keep the runtime; the last one ends it.
        if SESSIONS.load(Ordering::Relaxed) > 0 {
            return Ok(());
        }
        shut_down()
    }

    fn MPI_Abort / PMPI_Abort(comm: c_int, errorcode: c_int) {
        let s = st()?;
        let rank = s.universe.world().rank();
        let _ = comm;
        s.universe.abort(
            errorcode,
            &format!("MPI_Abort was called on rank {rank} with error code {errorcode}"),
        )
    }

    fn MPI_Get_processor_name / PMPI_Get_processor_name(name: *mut c_char, resultlen: *mut c_int) {
        out_str(name, MPI_MAX_PROCESSOR_NAME, resultlen, &kumi::hostname())
    }

    fn MPI_Get_version / PMPI_Get_version(version: *mut c_int, subversion: *mut c_int) {
        out(version, "version", 4)?;
        out(subversion, "subversion", 0)
    }

    fn MPI_Get_library_version / PMPI_Get_library_version(v: *mut c_char, resultlen: *mut c_int) {
        let s = format!(
            "kumi {} (MPICH ABI, libmpi.so.12)",
            env!("CARGO_PKG_VERSION")
        );
        out_str(v, MPI_MAX_LIBRARY_VERSION_STRING, resultlen, &s)
    }
}

/// `PMPI_Wtime`: seconds since an arbitrary time in the past (this process's
/// first call), from the monotonic clock.
#[no_mangle]
pub extern "C" fn PMPI_Wtime() -> f64 {
    clock().elapsed().as_secs_f64()
}

/// `MPI_Wtime`: calls `PMPI_Wtime`.
#[no_mangle]
pub extern "C" fn MPI_Wtime() -> f64 {
    PMPI_Wtime()
}

/// `PMPI_Wtick`: the clock's resolution (nanoseconds).
#[no_mangle]
pub extern "C" fn PMPI_Wtick() -> f64 {
    1e-9
}

/// `MPI_Wtick`: calls `PMPI_Wtick`.
#[no_mangle]
pub extern "C" fn MPI_Wtick() -> f64 {
    PMPI_Wtick()
}
