//! `mpi!` defines an exported MPI function under both of its names.
//!
//! `PMPI_X` holds the body (run under [`crate::guard`]); `MPI_X` calls it, so a
//! profiling library that defines `MPI_X` and calls `PMPI_X` works as with
//! MPICH, where the `MPI_` names are weak aliases.

macro_rules! mpi {
    ($( fn $mpi:ident / $pmpi:ident ( $($a:ident : $t:ty),* $(,)? ) $body:block )*) => {$(
        #[doc = concat!("`", stringify!($pmpi), "`: see the MPI standard for `", stringify!($mpi), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $pmpi($($a: $t),*) -> std::ffi::c_int {
            crate::guard(stringify!($mpi), move || -> crate::R<()> { $body })
        }
        #[doc = concat!("`", stringify!($mpi), "`: calls `", stringify!($pmpi), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $mpi($($a: $t),*) -> std::ffi::c_int {
            // SAFETY: the same contract, forwarded unchanged.
            unsafe { $pmpi($($a),*) }
        }
    )*};
}

/// `mpi_nb!` is [`mpi!`] for calls that never block: their bodies run under
/// [`crate::guard_nb`], without the label that names a call in wait reports.
macro_rules! mpi_nb {
    ($( fn $mpi:ident / $pmpi:ident ( $($a:ident : $t:ty),* $(,)? ) $body:block )*) => {$(
        #[doc = concat!("`", stringify!($pmpi), "`: see the MPI standard for `", stringify!($mpi), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $pmpi($($a: $t),*) -> std::ffi::c_int {
            crate::guard_nb(stringify!($mpi), move || -> crate::R<()> { $body })
        }
        #[doc = concat!("`", stringify!($mpi), "`: calls `", stringify!($pmpi), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $mpi($($a: $t),*) -> std::ffi::c_int {
            // SAFETY: the same contract, forwarded unchanged.
            unsafe { $pmpi($($a),*) }
        }
    )*};
}
