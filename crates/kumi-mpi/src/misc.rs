//! Exported data objects of the MPICH ABI, and small functions whose whole
//! meaning is local.

use std::ffi::{c_int, c_void};

/// A pointer-sized exported variable (C sees `T * const NAME`).
#[repr(transparent)]
pub struct Ptr(pub *const c_void);
// SAFETY: the pointers are never written after load and point to no Rust data.
unsafe impl Sync for Ptr {}

/// A byte area of a fixed size, exported with that size (executables built
/// against MPICH may copy-relocate it).
#[repr(C, align(8))]
pub struct Area<const N: usize>(pub [u8; N]);

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
/// Fortran 2008 sentinels, exported with MPICH's sizes.
#[no_mangle]
pub static MPIR_F08_MPI_BOTTOM: Area<4> = Area([0; 4]);
/// See [`MPIR_F08_MPI_BOTTOM`].
#[no_mangle]
pub static MPIR_F08_MPI_IN_PLACE: Area<4> = Area([0; 4]);
/// See [`MPIR_F08_MPI_BOTTOM`].
#[no_mangle]
pub static MPIR_F08_MPI_STATUS_IGNORE_OBJ: Area<20> = Area([0; 20]);
/// See [`MPIR_F08_MPI_BOTTOM`].
#[no_mangle]
pub static MPIR_F08_MPI_STATUSES_IGNORE_OBJ: Area<20> = Area([0; 20]);

mpi! {
    fn MPI_Pcontrol / PMPI_Pcontrol(_level: c_int) {
        // No profiling library is attached; the standard makes this a no-op then.
        Ok(())
    }
}
