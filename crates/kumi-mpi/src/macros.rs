//! `mpi!` defines an exported MPI function under both of its names.
//!
//! The body lives once, in a private function (in a module named after the
//! MPI function, `MPI_X::body`), and `MPI_X` and `PMPI_X` both jump to it.
//! So a profiling library that defines `MPI_X` and calls `PMPI_X` works as
//! with MPICH, where the `MPI_` names are weak aliases of the `PMPI_` ones;
//! and, as there, a call to `MPI_X` does not go through `PMPI_X`'s entry in
//! the global offset table: an exported function called by name inside a
//! shared library is reached through that table, one more cache line (and an
//! indirect jump) on every call, which a call after the application evicted
//! the cache pays as a miss (docs/BENCHMARKS.md, session 6).

macro_rules! mpi {
    ($($fns:tt)*) => { mpi_fns!(crate::guard; $($fns)*); };
}

/// `mpi_nb!` is [`mpi!`] for calls that never block: their bodies run under
/// [`crate::guard_nb`], without the label that names a call in wait reports.
macro_rules! mpi_nb {
    ($($fns:tt)*) => { mpi_fns!(crate::guard_nb; $($fns)*); };
}

/// What [`mpi!`] and [`mpi_nb!`] expand to, with the guard that runs the body.
macro_rules! mpi_fns {
    ($guard:path; $( fn $mpi:ident / $pmpi:ident ( $($a:ident : $t:ty),* $(,)? ) $body:block )*) => {$(
        #[allow(non_snake_case)]
        mod $mpi {
            #[allow(unused_imports)]
            use super::*;
            /// The body of the MPI function this module is named after.
            /// `extern "C"`, so that it cannot unwind (a panic escaping it
            /// would abort; `guard` catches every one first): the exported
            /// functions then jump to it, with no frame of their own to
            /// abort an unwinding call from (three instructions and a
            /// call's return address per call).
            #[inline(never)]
            #[allow(clippy::too_many_arguments)]
            pub(super) unsafe extern "C" fn body($($a: $t),*) -> std::ffi::c_int {
                $guard(&stringify!($mpi), move || -> crate::R<()> { $body })
            }
        }
        #[doc = concat!("`", stringify!($pmpi), "`: see the MPI standard for `", stringify!($mpi), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $pmpi($($a: $t),*) -> std::ffi::c_int {
            // SAFETY: the same contract, forwarded unchanged.
            unsafe { $mpi::body($($a),*) }
        }
        #[doc = concat!("`", stringify!($mpi), "`: the same function as `", stringify!($pmpi), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $mpi($($a: $t),*) -> std::ffi::c_int {
            // SAFETY: the same contract, forwarded unchanged.
            unsafe { $mpi::body($($a),*) }
        }
    )*};
}

/// A blocking MPI collective and its nonblocking twin, from one function
/// that takes their common arguments and `blocking`, and returns a
/// `crate::coll::Begun`: done already (a blocking call that could take a
/// way of its own) or started. The blocking one waits for what was
/// started, the nonblocking one (the same arguments and `request`)
/// registers it as a request on communicator `$comm`.
macro_rules! mpi_coll_pair {
    ($( $mpi:ident / $pmpi:ident, $impi:ident / $ipmpi:ident => $start:ident ( $($a:ident : $t:ty),* $(,)? ) on $comm:ident )*) => {
        mpi! {$(
            fn $mpi / $pmpi ($($a: $t),*) {
                $start($($a,)* true)?.finish()
            }

            fn $impi / $ipmpi ($($a: $t,)* request: *mut c_int) {
                need_request(request)?;
                let nb = $start($($a,)* false)?.started()?;
                nb_request(Box::new(nb), $comm, request)
            }
        )*}
    };
}

/// Persistent collectives (`MPI_Bcast_init`...): each takes the arguments of
/// its nonblocking twin plus `info` and `request`, and every `MPI_Start` of
/// the request calls that twin (`$start`, its `PMPI_` entry point) with the
/// arguments given at creation. `$comm` names the communicator argument.
macro_rules! mpi_persistent_colls {
    ($( $mpi:ident / $pmpi:ident => $start:ident ( $($a:ident : $t:ty),* $(,)? ) on $comm:ident )*) => {
        mpi! {$(
            fn $mpi / $pmpi ($($a: $t,)* info: c_int, request: *mut c_int) {
                // The count, displacement and type arrays are copied now
                // (buffers are not): MPICH reads them at creation, and
                // programs (mpi4py) free them after it.
                let lens = crate::coll::ArrayLens::new(
                    stringify!($mpi),
                    $comm,
                    &[$((stringify!($a), crate::coll::Keep::as_word(&$a))),*],
                )?;
                $(let $a = crate::coll::Keep::keep($a, stringify!($a), &lens)?;)*
                persistent_coll($comm, info, request, move |r| {
                    // SAFETY: the arguments given at creation (the arrays
                    // copied), whose buffers the standard makes the program
                    // keep valid until it frees the request.
                    unsafe { $start($(crate::coll::Keep::view(&$a),)* r) }
                })
            }
        )*}
    };
}

/// `blocking_on!(s, c, body)`: runs `body`, which may block, on communicator
/// `c` borrowed from the state `s`: with the state held through it when one
/// thread at a time may call (no count of the communicator taken and given
/// back: two atomic updates per call), and let go first under
/// `MPI_THREAD_MULTIPLE`, where a thread waiting in `body` hands its turn to
/// others, who must find the state free (`state::token::hand_over`). The
/// second case runs `body` out of line. `blocking_on!(if THREADS, s, c,
/// body)` decides by a constant instead (see `p2p::send_one_or_threads`).
macro_rules! blocking_on {
    (if $threads:expr, $s:ident, $c:ident, $body:expr) => {
        if $threads {
            let owned = $c.clone();
            drop($s);
            let $c = &owned;
            $body
        } else {
            $body
        }
    };
    ($s:ident, $c:ident, $body:expr) => {
        if crate::state::multiple() {
            let owned = $c.clone();
            drop($s);
            crate::state::out_of_line(|| {
                let $c: &kumi::Comm = &owned;
                $body
            })
        } else {
            $body
        }
    };
}
