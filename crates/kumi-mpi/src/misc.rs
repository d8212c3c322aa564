//! Exported data objects of the MPICH ABI, and small functions whose whole
//! meaning is local.

use crate::fortran::{blocks, f08::objects};
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
/// `MPI_F_STATUS_IGNORE`: where `mpif.h`'s `MPI_STATUS_IGNORE` is (the third
/// variable of `MPIPRIV1`), so C code handed a Fortran status can tell.
#[no_mangle]
pub static MPI_F_STATUS_IGNORE: Ptr = Ptr((&raw const blocks::mpipriv1_)
    .cast::<c_int>()
    .wrapping_add(2)
    .cast());
/// `MPI_F_STATUSES_IGNORE`: `mpif.h`'s `MPI_STATUSES_IGNORE` (`MPIPRIV2`).
#[no_mangle]
pub static MPI_F_STATUSES_IGNORE: Ptr = Ptr((&raw const blocks::mpipriv2_).cast());
/// `MPI_F08_STATUS_IGNORE`: `mpi_f08`'s `MPI_STATUS_IGNORE`.
#[no_mangle]
pub static MPI_F08_STATUS_IGNORE: Ptr =
    Ptr((&raw const objects::MPIR_F08_MPI_STATUS_IGNORE_OBJ).cast());
/// `MPI_F08_STATUSES_IGNORE`: `mpi_f08`'s `MPI_STATUSES_IGNORE`.
#[no_mangle]
pub static MPI_F08_STATUSES_IGNORE: Ptr =
    Ptr((&raw const objects::MPIR_F08_MPI_STATUSES_IGNORE_OBJ).cast());
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
