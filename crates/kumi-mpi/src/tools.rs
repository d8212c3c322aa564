//! The tools information interface (`MPI_T_*`). kumi exposes no control or
//! performance variables, categories, event types or sources yet: the counts
//! are zero, every index or name is refused with the interface's own error
//! code (`MPI_T_ERR_INVALID_INDEX`, `_NAME`, `_HANDLE`), and performance
//! variable sessions can be made and freed. So a tool that looks for what it
//! can measure finds nothing, rather than failing on a missing function.
//!
//! The standard makes `MPI_T` usable before `MPI_Init` and after
//! `MPI_Finalize`, from any thread, and its calls return their errors
//! directly (no error handler): nothing here touches the MPI state; the
//! interface's own state is a counter of initializations and the sessions.

use crate::consts::{MPI_SUCCESS, MPI_THREAD_MULTIPLE, MPI_THREAD_SINGLE};
use std::collections::HashSet;
use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

const MPI_T_ERR_NOT_INITIALIZED: c_int = 60;
const MPI_T_ERR_INVALID_INDEX: c_int = 62;
const MPI_T_ERR_INVALID_HANDLE: c_int = 64;
const MPI_T_ERR_INVALID_SESSION: c_int = 67;
const MPI_T_ERR_INVALID_NAME: c_int = 73;
const MPI_T_ERR_INVALID: c_int = 74;

/// `MPI_T_init_thread` calls not yet matched by `MPI_T_finalize`. SeqCst:
/// a handful of calls per program; no ordering argument to get wrong.
static INITS: AtomicUsize = AtomicUsize::new(0);

/// Live performance-variable sessions (their handles' addresses).
static SESSIONS: Mutex<Option<HashSet<usize>>> = Mutex::new(None);

/// Runs an `MPI_T` body: `MPI_T_ERR_NOT_INITIALIZED` before
/// `MPI_T_init_thread`, and no panic crosses into C.
fn run(body: impl FnOnce() -> c_int) -> c_int {
    if INITS.load(Ordering::SeqCst) == 0 {
        return MPI_T_ERR_NOT_INITIALIZED;
    }
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(MPI_T_ERR_INVALID)
}

/// Writes `v` through an output pointer; `MPI_T_ERR_INVALID` if it is NULL.
fn put<T>(p: *mut T, v: T) -> c_int {
    if p.is_null() {
        return MPI_T_ERR_INVALID;
    }
    // SAFETY: the standard makes the caller pass a writable location.
    unsafe { p.write(v) };
    MPI_SUCCESS
}

/// `code` for a live session (nothing in it matches), else
/// `MPI_T_ERR_INVALID_SESSION`.
fn in_session(session: *mut c_void, code: c_int) -> c_int {
    if session_known(session) {
        code
    } else {
        MPI_T_ERR_INVALID_SESSION
    }
}

fn session_known(h: *mut c_void) -> bool {
    let s = SESSIONS.lock().unwrap_or_else(|e| e.into_inner());
    s.as_ref().is_some_and(|set| set.contains(&(h as usize)))
}

/// Defines `MPI_T_x` and its profiling name `PMPI_T_x` (the `MPI_` one calls
/// the `PMPI_` one, as with [`mpi!`]).
macro_rules! mpi_t {
    ($( fn $mpi:ident / $pmpi:ident ( $($a:ident : $t:ty),* $(,)? ) $body:block )*) => {$(
        #[doc = concat!("`", stringify!($pmpi), "`: see the MPI standard for `", stringify!($mpi), "`.")]
        #[no_mangle]
        #[allow(unused_variables)]
        pub unsafe extern "C" fn $pmpi($($a: $t),*) -> c_int $body
        #[doc = concat!("`", stringify!($mpi), "`: the same function as `", stringify!($pmpi), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $mpi($($a: $t),*) -> c_int {
            // SAFETY: the same contract, forwarded unchanged.
            unsafe { $pmpi($($a),*) }
        }
    )*};
}

mpi_t! {
    fn MPI_T_init_thread / PMPI_T_init_thread(required: c_int, provided: *mut c_int) {
        if !(MPI_THREAD_SINGLE..=MPI_THREAD_MULTIPLE).contains(&required) {
            return MPI_T_ERR_INVALID;
        }
        // Nothing here is thread-bound: any level the program asks for.
        let rc = put(provided, required);
        if rc == MPI_SUCCESS {
            INITS.fetch_add(1, Ordering::SeqCst);
        }
        rc
    }

    fn MPI_T_finalize / PMPI_T_finalize() {
        match INITS.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)) {
            Ok(_) => MPI_SUCCESS,
            Err(_) => MPI_T_ERR_NOT_INITIALIZED,
        }
    }

    fn MPI_T_cvar_get_num / PMPI_T_cvar_get_num(num: *mut c_int) { run(|| put(num, 0)) }
    fn MPI_T_pvar_get_num / PMPI_T_pvar_get_num(num: *mut c_int) { run(|| put(num, 0)) }
    fn MPI_T_category_get_num / PMPI_T_category_get_num(num: *mut c_int) { run(|| put(num, 0)) }
    fn MPI_T_source_get_num / PMPI_T_source_get_num(num: *mut c_int) { run(|| put(num, 0)) }
    fn MPI_T_event_get_num / PMPI_T_event_get_num(num: *mut c_int) { run(|| put(num, 0)) }
    fn MPI_T_category_changed / PMPI_T_category_changed(update_number: *mut c_int) { run(|| put(update_number, 0)) }

    // Lookups by name: no variable, category or event has one.
    fn MPI_T_cvar_get_index / PMPI_T_cvar_get_index(name: *const c_void, index: *mut c_int) { run(|| MPI_T_ERR_INVALID_NAME) }
    fn MPI_T_pvar_get_index / PMPI_T_pvar_get_index(name: *const c_void, var_class: c_int, index: *mut c_int) { run(|| MPI_T_ERR_INVALID_NAME) }
    fn MPI_T_category_get_index / PMPI_T_category_get_index(name: *const c_void, index: *mut c_int) { run(|| MPI_T_ERR_INVALID_NAME) }
    fn MPI_T_event_get_index / PMPI_T_event_get_index(name: *const c_void, index: *mut c_int) { run(|| MPI_T_ERR_INVALID_NAME) }

    // Queries by index: there is no valid index.
    fn MPI_T_cvar_get_info / PMPI_T_cvar_get_info(index: c_int) { run(|| MPI_T_ERR_INVALID_INDEX) }
    fn MPI_T_pvar_get_info / PMPI_T_pvar_get_info(index: c_int) { run(|| MPI_T_ERR_INVALID_INDEX) }
    fn MPI_T_category_get_info / PMPI_T_category_get_info(index: c_int) { run(|| MPI_T_ERR_INVALID_INDEX) }
    fn MPI_T_category_get_cvars / PMPI_T_category_get_cvars(index: c_int) { run(|| MPI_T_ERR_INVALID_INDEX) }
    fn MPI_T_category_get_pvars / PMPI_T_category_get_pvars(index: c_int) { run(|| MPI_T_ERR_INVALID_INDEX) }
    fn MPI_T_category_get_categories / PMPI_T_category_get_categories(index: c_int) { run(|| MPI_T_ERR_INVALID_INDEX) }
    fn MPI_T_category_get_events / PMPI_T_category_get_events(index: c_int) { run(|| MPI_T_ERR_INVALID_INDEX) }
    fn MPI_T_category_get_num_events / PMPI_T_category_get_num_events(index: c_int) { run(|| MPI_T_ERR_INVALID_INDEX) }
    fn MPI_T_source_get_info / PMPI_T_source_get_info(index: c_int) { run(|| MPI_T_ERR_INVALID_INDEX) }
    fn MPI_T_source_get_timestamp / PMPI_T_source_get_timestamp(index: c_int) { run(|| MPI_T_ERR_INVALID_INDEX) }
    fn MPI_T_event_get_info / PMPI_T_event_get_info(index: c_int) { run(|| MPI_T_ERR_INVALID_INDEX) }
    fn MPI_T_cvar_handle_alloc / PMPI_T_cvar_handle_alloc(index: c_int) { run(|| MPI_T_ERR_INVALID_INDEX) }
    fn MPI_T_event_handle_alloc / PMPI_T_event_handle_alloc(index: c_int) { run(|| MPI_T_ERR_INVALID_INDEX) }

    // Handles: none can exist (enumerations come only from variables).
    fn MPI_T_enum_get_info / PMPI_T_enum_get_info(enumtype: *mut c_void) { run(|| MPI_T_ERR_INVALID_HANDLE) }
    fn MPI_T_enum_get_item / PMPI_T_enum_get_item(enumtype: *mut c_void) { run(|| MPI_T_ERR_INVALID_HANDLE) }
    fn MPI_T_cvar_handle_free / PMPI_T_cvar_handle_free(handle: *mut c_void) { run(|| MPI_T_ERR_INVALID_HANDLE) }
    fn MPI_T_cvar_read / PMPI_T_cvar_read(handle: *mut c_void) { run(|| MPI_T_ERR_INVALID_HANDLE) }
    fn MPI_T_cvar_write / PMPI_T_cvar_write(handle: *mut c_void) { run(|| MPI_T_ERR_INVALID_HANDLE) }
    fn MPI_T_event_handle_free / PMPI_T_event_handle_free(handle: *mut c_void) { run(|| MPI_T_ERR_INVALID_HANDLE) }
    fn MPI_T_event_handle_get_info / PMPI_T_event_handle_get_info(handle: *mut c_void) { run(|| MPI_T_ERR_INVALID_HANDLE) }
    fn MPI_T_event_handle_set_info / PMPI_T_event_handle_set_info(handle: *mut c_void) { run(|| MPI_T_ERR_INVALID_HANDLE) }
    fn MPI_T_event_register_callback / PMPI_T_event_register_callback(handle: *mut c_void) { run(|| MPI_T_ERR_INVALID_HANDLE) }
    fn MPI_T_event_callback_get_info / PMPI_T_event_callback_get_info(handle: *mut c_void) { run(|| MPI_T_ERR_INVALID_HANDLE) }
    fn MPI_T_event_callback_set_info / PMPI_T_event_callback_set_info(handle: *mut c_void) { run(|| MPI_T_ERR_INVALID_HANDLE) }
    fn MPI_T_event_set_dropped_handler / PMPI_T_event_set_dropped_handler(handle: *mut c_void) { run(|| MPI_T_ERR_INVALID_HANDLE) }
    fn MPI_T_event_read / PMPI_T_event_read(instance: *mut c_void) { run(|| MPI_T_ERR_INVALID_HANDLE) }
    fn MPI_T_event_copy / PMPI_T_event_copy(instance: *mut c_void) { run(|| MPI_T_ERR_INVALID_HANDLE) }
    fn MPI_T_event_get_timestamp / PMPI_T_event_get_timestamp(instance: *mut c_void) { run(|| MPI_T_ERR_INVALID_HANDLE) }
    fn MPI_T_event_get_source / PMPI_T_event_get_source(instance: *mut c_void) { run(|| MPI_T_ERR_INVALID_HANDLE) }

    // Performance-variable sessions: real, but empty.
    fn MPI_T_pvar_session_create / PMPI_T_pvar_session_create(session: *mut *mut c_void) {
        run(|| {
            if session.is_null() {
                return MPI_T_ERR_INVALID;
            }
            let h = Box::into_raw(Box::new(0u8)) as *mut c_void;
            let mut s = SESSIONS.lock().unwrap_or_else(|e| e.into_inner());
            s.get_or_insert_with(HashSet::new).insert(h as usize);
            put(session, h)
        })
    }

    fn MPI_T_pvar_session_free / PMPI_T_pvar_session_free(session: *mut *mut c_void) {
        run(|| {
            if session.is_null() {
                return MPI_T_ERR_INVALID;
            }
            // SAFETY: a readable handle location (checked non-null above).
            let h = unsafe { session.read() };
            let mut s = SESSIONS.lock().unwrap_or_else(|e| e.into_inner());
            if !s.as_mut().is_some_and(|set| set.remove(&(h as usize))) {
                return MPI_T_ERR_INVALID_SESSION;
            }
            // SAFETY: `h` came from Box::into_raw in MPI_T_pvar_session_create
            // and was in the live set, so it is freed exactly once.
            drop(unsafe { Box::from_raw(h as *mut u8) });
            put(session, std::ptr::null_mut())
        })
    }

    fn MPI_T_pvar_handle_alloc / PMPI_T_pvar_handle_alloc(session: *mut c_void, index: c_int) {
        run(|| in_session(session, MPI_T_ERR_INVALID_INDEX))
    }

    fn MPI_T_pvar_handle_free / PMPI_T_pvar_handle_free(session: *mut c_void, handle: *mut c_void) {
        run(|| in_session(session, MPI_T_ERR_INVALID_HANDLE))
    }

    // On MPI_T_PVAR_ALL_HANDLES of a live session these act on no variable:
    // done. On any other handle: there is none.
    fn MPI_T_pvar_start / PMPI_T_pvar_start(session: *mut c_void, handle: *mut c_void) { run(|| all_handles(session, handle)) }
    fn MPI_T_pvar_stop / PMPI_T_pvar_stop(session: *mut c_void, handle: *mut c_void) { run(|| all_handles(session, handle)) }
    fn MPI_T_pvar_reset / PMPI_T_pvar_reset(session: *mut c_void, handle: *mut c_void) { run(|| all_handles(session, handle)) }

    fn MPI_T_pvar_read / PMPI_T_pvar_read(session: *mut c_void, handle: *mut c_void) {
        run(|| in_session(session, MPI_T_ERR_INVALID_HANDLE))
    }
    fn MPI_T_pvar_write / PMPI_T_pvar_write(session: *mut c_void, handle: *mut c_void) {
        run(|| in_session(session, MPI_T_ERR_INVALID_HANDLE))
    }
    fn MPI_T_pvar_readreset / PMPI_T_pvar_readreset(session: *mut c_void, handle: *mut c_void) {
        run(|| in_session(session, MPI_T_ERR_INVALID_HANDLE))
    }
}

/// `MPI_T_pvar_start/stop/reset`: success on `MPI_T_PVAR_ALL_HANDLES` of a
/// live session (there are no variables to act on).
fn all_handles(session: *mut c_void, handle: *mut c_void) -> c_int {
    if !session_known(session) {
        return MPI_T_ERR_INVALID_SESSION;
    }
    if std::ptr::eq(handle, crate::misc::MPI_T_PVAR_ALL_HANDLES.0) {
        MPI_SUCCESS
    } else {
        MPI_T_ERR_INVALID_HANDLE
    }
}
