//! What a callback of the program may ask about while the call that runs it
//! holds the state.
//!
//! MPI lets the program's code that an MPI call runs — a reduction's
//! function, a generalized request's callbacks — make the local query calls
//! (MPI 4.1, 6.9.5: a user function may ask about the datatype it is
//! given). The call running it holds the library's state (and the engine
//! may run a reduction's step inside any call, or on the progress thread),
//! so those queries cannot borrow it: the callback runs *lending* what it
//! may ask about ([`lending`]), and the datatype queries look there when the
//! state is out of reach ([`dtype_in_callback`]): the type it was given, and
//! the predefined types. Anything else asked from inside a callback still
//! fails, naming the call ("MPI called from inside a callback of another
//! MPI call").

use super::{builtin_type, st};
use crate::R;
use kumi::datatype::Datatype;
use std::cell::RefCell;
use std::ffi::c_int;

thread_local! {
    /// The callbacks running on this thread, innermost last, each with the
    /// datatype lent to it if any. A thread-local: a reduction may run on
    /// the progress thread while the program's thread is inside another call.
    static LENT: RefCell<Vec<Option<(c_int, Datatype)>>> = const { RefCell::new(Vec::new()) };
}

/// Runs the program's callback `f`, lending it `lent` (a datatype handle
/// and its type) and the predefined types for its queries.
pub(crate) fn lending<T>(lent: Option<(c_int, &Datatype)>, f: impl FnOnce() -> T) -> T {
    struct Pop;
    impl Drop for Pop {
        fn drop(&mut self) {
            LENT.with(|l| l.borrow_mut().pop());
        }
    }
    LENT.with(|l| l.borrow_mut().push(lent.map(|(h, d)| (h, d.clone()))));
    let _pop = Pop;
    f()
}

/// Whether a callback of the program runs on this thread (inside another
/// call, or on the progress thread).
pub(crate) fn in_callback() -> bool {
    LENT.with(|l| !l.borrow().is_empty())
}

/// Datatype `h` for a query made from inside a callback: the type lent to a
/// callback running on this thread, or a predefined type; `None` outside
/// callbacks, and for any other type.
pub(crate) fn dtype_in_callback(h: c_int) -> Option<Datatype> {
    LENT.with(|l| {
        let l = l.borrow();
        if l.is_empty() {
            return None;
        }
        l.iter()
            .rev()
            .flatten()
            .find(|(x, _)| *x == h)
            .map(|(_, d)| d.clone())
    })
    .or_else(|| in_callback().then(|| builtin_type(h)).flatten())
}

/// Datatype `h` from the state, or, from inside a callback, as
/// [`dtype_in_callback`] finds it.
pub(crate) fn dtype_or_lent(h: c_int) -> R<Datatype> {
    match st() {
        Ok(s) => s.dtype(h),
        Err(e) => dtype_in_callback(h).ok_or(e),
    }
}
