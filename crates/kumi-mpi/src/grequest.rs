//! Generalized requests (MPI 4.1, 13.2): requests the program completes
//! itself (`MPI_Grequest_complete`), saying through its callbacks what a wait
//! reports and how to free and cancel them. The callbacks are C functions or
//! Fortran procedures ([`Callbacks`]); everything else is one path.

use crate::consts::*;
use crate::fortran::Fint;
use crate::{err, R};
use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::rc::Rc;

/// `MPI_Grequest_query_function`.
type QueryFn = unsafe extern "C" fn(*mut c_void, *mut crate::MPI_Status) -> c_int;
/// `MPI_Grequest_free_function`.
type FreeFn = unsafe extern "C" fn(*mut c_void) -> c_int;
/// `MPI_Grequest_cancel_function`.
type CancelFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;
/// Fortran's `MPI_GREQUEST_QUERY_FUNCTION(EXTRA_STATE, STATUS, IERROR)`:
/// every argument by reference, the status in the C layout (as `mpif.h`'s
/// and `mpi_f08`'s are).
pub(crate) type FortranQueryFn = unsafe extern "C" fn(*mut i64, *mut Fint, *mut Fint);
/// Fortran's `MPI_GREQUEST_FREE_FUNCTION(EXTRA_STATE, IERROR)`.
pub(crate) type FortranFreeFn = unsafe extern "C" fn(*mut i64, *mut Fint);
/// Fortran's `MPI_GREQUEST_CANCEL_FUNCTION(EXTRA_STATE, COMPLETE, IERROR)`,
/// `COMPLETE` a `LOGICAL`.
pub(crate) type FortranCancelFn = unsafe extern "C" fn(*mut i64, *mut Fint, *mut Fint);

/// A generalized request's callbacks and extra state, by the language that
/// gave them.
pub(crate) enum Callbacks {
    /// C's: the extra state a pointer, each result the return value.
    C {
        query: QueryFn,
        free: FreeFn,
        cancel: CancelFn,
        extra: *mut c_void,
    },
    /// Fortran's: the extra state an address-sized integer kept here (the
    /// callbacks get it by reference and may change it), each result in
    /// `IERROR`.
    Fortran {
        query: FortranQueryFn,
        free: FortranFreeFn,
        cancel: FortranCancelFn,
        extra: i64,
    },
}

impl Callbacks {
    /// The program's query callback, filling `st`; what it returned.
    fn query(&mut self, st: &mut crate::MPI_Status) -> c_int {
        crate::state::lending(None, || match self {
            // SAFETY: the program's MPI_Grequest_query_function: its extra
            // state and a status to fill.
            Callbacks::C { query, extra, .. } => unsafe { query(*extra, st) },
            Callbacks::Fortran { query, extra, .. } => {
                let mut ierror = MPI_SUCCESS;
                // SAFETY: the program's Fortran query procedure: its extra
                // state, a status (five integers, the C layout) and IERROR,
                // each valid for the call.
                unsafe { query(extra, (st as *mut crate::MPI_Status).cast(), &mut ierror) };
                ierror
            }
        })
    }

    /// The program's free callback; what it returned.
    fn free(&mut self) -> c_int {
        crate::state::lending(None, || match self {
            // SAFETY: the program's MPI_Grequest_free_function with its own
            // extra state (the caller calls it once).
            Callbacks::C { free, extra, .. } => unsafe { free(*extra) },
            Callbacks::Fortran { free, extra, .. } => {
                let mut ierror = MPI_SUCCESS;
                // SAFETY: the program's Fortran free procedure: its extra
                // state and IERROR, valid for the call.
                unsafe { free(extra, &mut ierror) };
                ierror
            }
        })
    }

    /// The program's cancel callback, told whether the request has
    /// completed; what it returned.
    fn cancel(&mut self, complete: bool) -> c_int {
        crate::state::lending(None, || match self {
            // SAFETY: the program's MPI_Grequest_cancel_function: its extra
            // state and whether the request has completed.
            Callbacks::C { cancel, extra, .. } => unsafe { cancel(*extra, complete as c_int) },
            Callbacks::Fortran { cancel, extra, .. } => {
                let (mut ierror, mut complete) =
                    (MPI_SUCCESS, crate::fortran::logical_out(complete as c_int));
                // SAFETY: the program's Fortran cancel procedure: its extra
                // state, a LOGICAL and IERROR, valid for the call.
                unsafe { cancel(extra, &mut complete, &mut ierror) };
                ierror
            }
        })
    }
}

/// A generalized request. The callbacks run inside the MPI call that needs
/// them, so MPI calls they make that need the library's state (most do not:
/// `MPI_Status_set_elements` of a predefined type, `MPI_Status_set_cancelled`)
/// fail naming the rule rather than racing.
struct Grequest {
    done: Rc<Cell<bool>>,
    fns: Callbacks,
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
    /// The status the program's query callback fills, and what the callback
    /// returned.
    fn query_status(&mut self) -> (crate::MPI_Status, c_int) {
        let mut st = crate::state::empty_status();
        let rc = self.fns.query(&mut st);
        if rc != MPI_SUCCESS {
            st.MPI_ERROR = rc;
        }
        (st, rc)
    }

    /// The program's free callback, once.
    fn call_free(&mut self) -> c_int {
        if std::mem::replace(&mut self.freed, true) {
            return MPI_SUCCESS;
        }
        self.fns.free()
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
        let rc = self.fns.cancel(self.done.get());
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

/// A new generalized request with callbacks `fns`, its handle into `request`
/// (`MPI_Grequest_start`, in C or Fortran).
pub(crate) fn start(fns: Callbacks, request: *mut c_int) -> R<()> {
    if request.is_null() {
        return err(MPI_ERR_ARG, "the output argument `request` is NULL");
    }
    let done = Rc::new(Cell::new(false));
    let g = Grequest {
        done: done.clone(),
        fns,
        freed: false,
    };
    let mut s = crate::state::st()?;
    let h = s.new_request(crate::state::ReqEntry::Coll(Box::new(g)), MPI_COMM_WORLD);
    s.grequests.insert(h, done);
    drop(s);
    crate::state::out(request, "request", h)
}

/// The error of a generalized request started without one of its callbacks.
pub(crate) fn missing_callback<T>() -> R<T> {
    err(
        MPI_ERR_ARG,
        "a callback of the generalized request (query_fn, free_fn or cancel_fn) is NULL",
    )
}

mpi! {
    fn MPI_Grequest_start / PMPI_Grequest_start(query_fn: Option<QueryFn>, free_fn: Option<FreeFn>, cancel_fn: Option<CancelFn>, extra_state: *mut c_void, request: *mut c_int) {
        let (Some(query), Some(free), Some(cancel)) = (query_fn, free_fn, cancel_fn) else {
            return missing_callback();
        };
        start(Callbacks::C { query, free, cancel, extra: extra_state }, request)
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
