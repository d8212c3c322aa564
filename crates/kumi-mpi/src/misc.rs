//! Exported data objects of the MPICH ABI, and small functions whose whole
//! meaning is local.

use crate::consts::*;
use crate::{err, R};
use std::ffi::{c_int, c_void};

/// A pointer-sized exported variable (C sees `T * const NAME`).
#[repr(transparent)]
pub struct Ptr(pub *const c_void);
// SAFETY: the pointers are never written after load and point to no Rust data.
unsafe impl Sync for Ptr {}

static UNWEIGHTED_SENTINEL: c_int = 0;
static WEIGHTS_EMPTY_SENTINEL: c_int = 0;

/// `MPI_UNWEIGHTED`: a sentinel address (graph topologies).
#[no_mangle]
pub static MPI_UNWEIGHTED: Ptr = Ptr(&UNWEIGHTED_SENTINEL as *const c_int as *const c_void);
/// `MPI_WEIGHTS_EMPTY`: a sentinel address (graph topologies).
#[no_mangle]
pub static MPI_WEIGHTS_EMPTY: Ptr = Ptr(&WEIGHTS_EMPTY_SENTINEL as *const c_int as *const c_void);
/// MPICH's internal name of the same sentinel.
#[no_mangle]
pub static MPIR_C_MPI_UNWEIGHTED: Ptr = Ptr(&UNWEIGHTED_SENTINEL as *const c_int as *const c_void);
/// MPICH's internal name of the same sentinel.
#[no_mangle]
pub static MPIR_C_MPI_WEIGHTS_EMPTY: Ptr =
    Ptr(&WEIGHTS_EMPTY_SENTINEL as *const c_int as *const c_void);
/// Fortran status-ignore sentinels (kumi has no Fortran binding; exported so
/// binaries that reference them load).
#[no_mangle]
pub static MPI_F_STATUS_IGNORE: Ptr = Ptr(std::ptr::null());
/// See [`MPI_F_STATUS_IGNORE`].
#[no_mangle]
pub static MPI_F_STATUSES_IGNORE: Ptr = Ptr(std::ptr::null());
/// See [`MPI_F_STATUS_IGNORE`].
#[no_mangle]
pub static MPI_F08_STATUS_IGNORE: Ptr = Ptr(std::ptr::null());
/// See [`MPI_F_STATUS_IGNORE`].
#[no_mangle]
pub static MPI_F08_STATUSES_IGNORE: Ptr = Ptr(std::ptr::null());
static ALL_HANDLES_SENTINEL: u8 = 0;
/// The tools interface's "all handles" sentinel for `MPI_T_pvar_start` and
/// the like: an address of its own, distinct from `MPI_T_PVAR_HANDLE_NULL`.
#[no_mangle]
pub static MPI_T_PVAR_ALL_HANDLES: Ptr = Ptr(&ALL_HANDLES_SENTINEL as *const u8 as *const c_void);

mpi! {
    fn MPI_Pcontrol / PMPI_Pcontrol(_level: c_int) {
        // No profiling library is attached; the standard makes this a no-op then.
        Ok(())
    }
}

// ----- generalized requests -------------------------------------------------------

/// `MPI_Grequest_query_function`.
type QueryFn = unsafe extern "C" fn(*mut c_void, *mut crate::MPI_Status) -> c_int;
/// `MPI_Grequest_free_function`.
type FreeFn = unsafe extern "C" fn(*mut c_void) -> c_int;
/// `MPI_Grequest_cancel_function`.
type CancelFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

/// A generalized request: the program completes it (`MPI_Grequest_complete`)
/// and says, through its callbacks, what the wait reports and how to free
/// and cancel it. The callbacks run inside the MPI call that needs them, so
/// MPI calls they make that need the library's state (most do not:
/// `MPI_Status_set_elements` of a predefined type, `MPI_Status_set_cancelled`)
/// fail naming the rule rather than racing.
struct Grequest {
    done: std::rc::Rc<std::cell::Cell<bool>>,
    query: Option<QueryFn>,
    free: Option<FreeFn>,
    cancel: Option<CancelFn>,
    extra: *mut c_void,
    freed: bool,
}

/// The error of a generalized request whose callback returned `rc`.
fn callback_error(rc: c_int) -> crate::MpiErr {
    crate::MpiErr {
        class: rc,
        msg: format!("a generalized request's callback returned {rc}"),
    }
}

impl Grequest {
    /// The status the program's query callback fills (empty without one),
    /// and what the callback returned.
    fn query_status(&self) -> (crate::MPI_Status, c_int) {
        let mut st = crate::state::empty_status();
        let rc = match self.query {
            // SAFETY: the program's MPI_Grequest_query_function: its extra
            // state and a status to fill.
            Some(q) => crate::state::lending(None, || unsafe { q(self.extra, &mut st) }),
            None => MPI_SUCCESS,
        };
        if rc != MPI_SUCCESS {
            st.MPI_ERROR = rc;
        }
        (st, rc)
    }

    fn call_free(&mut self) -> c_int {
        if std::mem::replace(&mut self.freed, true) {
            return MPI_SUCCESS;
        }
        match self.free {
            // SAFETY: the program's MPI_Grequest_free_function, with its own
            // extra state, called once.
            Some(f) => crate::state::lending(None, || unsafe { f(self.extra) }),
            None => MPI_SUCCESS,
        }
    }
}

impl crate::state::CollPending for Grequest {
    fn test(&mut self) -> kumi::Result<bool> {
        Ok(self.done.get())
    }

    fn finish(self: Box<Self>) -> R<()> {
        let (_, e) = self.complete();
        e.map_or(Ok(()), Err)
    }

    fn status(&mut self) -> R<Option<(crate::MPI_Status, Option<crate::MpiErr>)>> {
        if !self.done.get() {
            return Ok(None);
        }
        // The query callback may be called more than once (MPI 4.1, 13.2):
        // here, and again by the wait that completes the request.
        let (st, rc) = self.query_status();
        Ok(Some((st, (rc != MPI_SUCCESS).then(|| callback_error(rc)))))
    }

    fn complete(mut self: Box<Self>) -> (crate::MPI_Status, Option<crate::MpiErr>) {
        let mut st = crate::state::empty_status();
        if !self.done.get() {
            // Nothing else could complete it while this thread waits (the
            // thread levels kumi provides): an error, not a hang.
            let e = crate::MpiErr {
                class: MPI_ERR_REQUEST,
                msg: "waited for a generalized request that MPI_Grequest_complete has not \
                      completed (no other thread could complete it meanwhile: the program \
                      did not ask for MPI_THREAD_MULTIPLE)"
                    .into(),
            };
            st.MPI_ERROR = e.class;
            return (st, Some(e));
        }
        let (mut st, rc) = self.query_status();
        let frc = self.call_free();
        let rc = if rc != MPI_SUCCESS { rc } else { frc };
        if rc != MPI_SUCCESS {
            st.MPI_ERROR = rc;
            return (st, Some(callback_error(rc)));
        }
        (st, None)
    }

    fn cancel(&mut self) -> Option<R<()>> {
        let rc = match self.cancel {
            Some(f) => {
                let (extra, done) = (self.extra, self.done.get() as c_int);
                // SAFETY: the program's MPI_Grequest_cancel_function: its
                // extra state and whether the request has completed.
                crate::state::lending(None, || unsafe { f(extra, done) })
            }
            None => MPI_SUCCESS,
        };
        Some(if rc == MPI_SUCCESS {
            Ok(())
        } else {
            err(
                rc,
                format!("the generalized request's cancel callback returned {rc}"),
            )
        })
    }
}

impl Drop for Grequest {
    /// A request freed without a wait (`MPI_Request_free`) still frees the
    /// program's state.
    fn drop(&mut self) {
        let _ = self.call_free();
    }
}

mpi! {
    fn MPI_Grequest_start / PMPI_Grequest_start(query_fn: Option<QueryFn>, free_fn: Option<FreeFn>, cancel_fn: Option<CancelFn>, extra_state: *mut c_void, request: *mut c_int) {
        if request.is_null() {
            return err(MPI_ERR_ARG, "the output argument `request` is NULL");
        }
        if query_fn.is_none() || free_fn.is_none() || cancel_fn.is_none() {
            return err(MPI_ERR_ARG, "a callback of the generalized request (query_fn, free_fn or cancel_fn) is NULL");
        }
        let done = std::rc::Rc::new(std::cell::Cell::new(false));
        let g = Grequest { done: done.clone(), query: query_fn, free: free_fn, cancel: cancel_fn, extra: extra_state, freed: false };
        let mut s = crate::state::st()?;
        let h = s.new_request(crate::state::ReqEntry::Coll(Box::new(g)), MPI_COMM_WORLD);
        s.grequests.insert(h, done);
        drop(s);
        crate::state::out(request, "request", h)
    }

    fn MPI_Grequest_complete / PMPI_Grequest_complete(request: c_int) {
        match crate::state::st()?.grequests.remove(&request) {
            Some(d) => {
                d.set(true);
                Ok(())
            }
            None => err(MPI_ERR_REQUEST, format!("{request:#x} is not a generalized request that is still to complete")),
        }
    }
}
