//! MPI-1 functions that MPI-3 removed, so the standard's API description
//! (which the generator reads) no longer has them, but MPICH's Fortran
//! library still exports and old Fortran codes still call. Their Fortran
//! forms take default `INTEGER` addresses, extents and displacements where
//! their successors take `INTEGER(KIND=MPI_ADDRESS_KIND)`: each widens what
//! it is given, and narrows what it returns only when the value fits
//! (`MPI_ERR_ARG` naming the function and the successor to use otherwise).

use super::{buf, fortran_entry, fortran_names, Fint};
use crate::consts::{MPI_ERR_ARG, MPI_SUCCESS};
use std::ffi::{c_int, c_void};

/// `v` as a default `INTEGER` into `out`, or (for a value that does not
/// fit) the error code, raised on `MPI_COMM_WORLD` as every error of a
/// call without an object is.
///
/// # Safety
/// `out` valid for one integer.
unsafe fn narrow(name: &'static str, successor: &str, v: isize, out: *mut Fint) -> c_int {
    match Fint::try_from(v) {
        Ok(x) => {
            // SAFETY: the caller's contract.
            unsafe { *out = x };
            MPI_SUCCESS
        }
        Err(_) => crate::guard_plain(name, || {
            crate::err(
                MPI_ERR_ARG,
                format!("{v} does not fit a default INTEGER (MPI-1's form); use {successor}"),
            )
        }),
    }
}

/// `n` default `INTEGER`s at `p` widened to `MPI_Aint`s (none for a
/// negative `n`: the C function refuses the count).
///
/// # Safety
/// `p` valid for `n` integers when `n > 0`.
unsafe fn widen(p: *const Fint, n: Fint) -> Vec<isize> {
    let n = usize::try_from(n).unwrap_or(0);
    if n == 0 || p.is_null() {
        return Vec::new();
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts(p, n) }
        .iter()
        .map(|&x| x as isize)
        .collect()
}

/// `MPI_ADDRESS(LOCATION, ADDRESS, IERROR)`: as MPICH's, the address
/// relative to `MPI_BOTTOM`'s common block, which fits a default `INTEGER`
/// for the program's static data (`COMMON`, `SAVE`): the differences of
/// such addresses, which MPI-1 codes give `MPI_TYPE_STRUCT` as
/// displacements, are the true ones. (Not an address to use with
/// `MPI_BOTTOM`: `MPI_GET_ADDRESS` gives those.)
///
/// # Safety
/// Fortran's: every argument by reference.
unsafe extern "C" fn mpi_address(location: *mut c_void, address: *mut Fint, ierror: *mut Fint) {
    let mut a: isize = 0;
    let bottom = (&raw const super::blocks::mpipriv1_) as isize;
    // SAFETY: the caller's contract; `a` is a live local.
    unsafe {
        let rc = crate::types::PMPI_Get_address(buf(location), &mut a);
        *ierror = if rc == MPI_SUCCESS {
            narrow(
                "MPI_ADDRESS",
                "MPI_GET_ADDRESS",
                a.wrapping_sub(bottom),
                address,
            )
        } else {
            rc
        };
    }
}
fortran_names!(mpi_address(location: *mut c_void, address: *mut Fint, ierror: *mut Fint); "mpi_address" "mpi_address_" "mpi_address__" "MPI_ADDRESS" "pmpi_address" "pmpi_address_" "pmpi_address__" "PMPI_ADDRESS");

/// `MPI_TYPE_EXTENT`, `MPI_TYPE_LB`, `MPI_TYPE_UB`: `(DATATYPE, VALUE, IERROR)`.
macro_rules! type_bound {
    ($f:ident, $c:path, $name:literal, $succ:literal; $($n:literal)*) => {
        /// See the module doc.
        ///
        /// # Safety
        /// Fortran's: every argument by reference.
        unsafe extern "C" fn $f(datatype: *const Fint, value: *mut Fint, ierror: *mut Fint) {
            let mut v: isize = 0;
            // SAFETY: the caller's contract; `v` is a live local.
            unsafe {
                let rc = $c(*datatype, &mut v);
                *ierror = if rc == MPI_SUCCESS { narrow($name, $succ, v, value) } else { rc };
            }
        }
        fortran_names!($f(datatype: *const Fint, value: *mut Fint, ierror: *mut Fint); $($n)*);
    };
}
type_bound!(mpi_type_extent, crate::types::PMPI_Type_extent, "MPI_TYPE_EXTENT", "MPI_TYPE_GET_EXTENT"; "mpi_type_extent" "mpi_type_extent_" "mpi_type_extent__" "MPI_TYPE_EXTENT" "pmpi_type_extent" "pmpi_type_extent_" "pmpi_type_extent__" "PMPI_TYPE_EXTENT");
type_bound!(mpi_type_lb, crate::types::PMPI_Type_lb, "MPI_TYPE_LB", "MPI_TYPE_GET_EXTENT"; "mpi_type_lb" "mpi_type_lb_" "mpi_type_lb__" "MPI_TYPE_LB" "pmpi_type_lb" "pmpi_type_lb_" "pmpi_type_lb__" "PMPI_TYPE_LB");
type_bound!(mpi_type_ub, crate::types::PMPI_Type_ub, "MPI_TYPE_UB", "MPI_TYPE_GET_EXTENT"; "mpi_type_ub" "mpi_type_ub_" "mpi_type_ub__" "MPI_TYPE_UB" "pmpi_type_ub" "pmpi_type_ub_" "pmpi_type_ub__" "PMPI_TYPE_UB");

/// `MPI_TYPE_HVECTOR(COUNT, BLOCKLENGTH, STRIDE, OLDTYPE, NEWTYPE, IERROR)`.
///
/// # Safety
/// Fortran's: every argument by reference.
unsafe extern "C" fn mpi_type_hvector(
    count: *const Fint,
    blocklength: *const Fint,
    stride: *const Fint,
    oldtype: *const Fint,
    newtype: *mut Fint,
    ierror: *mut Fint,
) {
    // SAFETY: the caller's contract.
    unsafe {
        *ierror = crate::types::PMPI_Type_create_hvector(
            *count,
            *blocklength,
            *stride as isize,
            *oldtype,
            newtype,
        );
    }
}
fortran_names!(mpi_type_hvector(count: *const Fint, blocklength: *const Fint, stride: *const Fint, oldtype: *const Fint, newtype: *mut Fint, ierror: *mut Fint); "mpi_type_hvector" "mpi_type_hvector_" "mpi_type_hvector__" "MPI_TYPE_HVECTOR" "pmpi_type_hvector" "pmpi_type_hvector_" "pmpi_type_hvector__" "PMPI_TYPE_HVECTOR");

/// `MPI_TYPE_HINDEXED(COUNT, BLOCKLENS, DISPLS, OLDTYPE, NEWTYPE, IERROR)`.
///
/// # Safety
/// Fortran's: every argument by reference, the arrays of `COUNT`.
unsafe extern "C" fn mpi_type_hindexed(
    count: *const Fint,
    blocklens: *const Fint,
    displs: *const Fint,
    oldtype: *const Fint,
    newtype: *mut Fint,
    ierror: *mut Fint,
) {
    // SAFETY: the caller's contract.
    unsafe {
        let d = widen(displs, *count);
        *ierror = crate::types::PMPI_Type_create_hindexed(
            *count,
            blocklens,
            d.as_ptr(),
            *oldtype,
            newtype,
        );
    }
}
fortran_names!(mpi_type_hindexed(count: *const Fint, blocklens: *const Fint, displs: *const Fint, oldtype: *const Fint, newtype: *mut Fint, ierror: *mut Fint); "mpi_type_hindexed" "mpi_type_hindexed_" "mpi_type_hindexed__" "MPI_TYPE_HINDEXED" "pmpi_type_hindexed" "pmpi_type_hindexed_" "pmpi_type_hindexed__" "PMPI_TYPE_HINDEXED");

/// `MPI_TYPE_STRUCT(COUNT, BLOCKLENS, DISPLS, TYPES, NEWTYPE, IERROR)`.
///
/// # Safety
/// Fortran's: every argument by reference, the arrays of `COUNT`.
unsafe extern "C" fn mpi_type_struct(
    count: *const Fint,
    blocklens: *const Fint,
    displs: *const Fint,
    types: *const Fint,
    newtype: *mut Fint,
    ierror: *mut Fint,
) {
    // SAFETY: the caller's contract.
    unsafe {
        let d = widen(displs, *count);
        *ierror =
            crate::types::PMPI_Type_create_struct(*count, blocklens, d.as_ptr(), types, newtype);
    }
}
fortran_names!(mpi_type_struct(count: *const Fint, blocklens: *const Fint, displs: *const Fint, types: *const Fint, newtype: *mut Fint, ierror: *mut Fint); "mpi_type_struct" "mpi_type_struct_" "mpi_type_struct__" "MPI_TYPE_STRUCT" "pmpi_type_struct" "pmpi_type_struct_" "pmpi_type_struct__" "PMPI_TYPE_STRUCT");

/// `MPI_ERRHANDLER_CREATE(FUNCTION, ERRHANDLER, IERROR)`: a communicator
/// error handler; a Fortran handler's convention is C's with every argument
/// by reference, so the procedure is given as it is.
///
/// # Safety
/// Fortran's: every argument by reference, `function` a Fortran handler.
unsafe extern "C" fn mpi_errhandler_create(
    function: *const c_void,
    errhandler: *mut Fint,
    ierror: *mut Fint,
) {
    // SAFETY: the caller's contract; a procedure's address as the function
    // pointer of its convention (null is `None`).
    unsafe {
        *ierror = crate::comm::PMPI_Comm_create_errhandler(
            std::mem::transmute::<*const c_void, Option<crate::state::ErrFn>>(function),
            errhandler,
        );
    }
}
fortran_names!(mpi_errhandler_create(function: *const c_void, errhandler: *mut Fint, ierror: *mut Fint); "mpi_errhandler_create" "mpi_errhandler_create_" "mpi_errhandler_create__" "MPI_ERRHANDLER_CREATE" "pmpi_errhandler_create" "pmpi_errhandler_create_" "pmpi_errhandler_create__" "PMPI_ERRHANDLER_CREATE");

/// `MPI_ERRHANDLER_SET(COMM, ERRHANDLER, IERROR)`.
///
/// # Safety
/// Fortran's: every argument by reference.
unsafe extern "C" fn mpi_errhandler_set(
    comm: *const Fint,
    errhandler: *const Fint,
    ierror: *mut Fint,
) {
    // SAFETY: the caller's contract.
    unsafe { *ierror = crate::comm::PMPI_Comm_set_errhandler(*comm, *errhandler) };
}
fortran_names!(mpi_errhandler_set(comm: *const Fint, errhandler: *const Fint, ierror: *mut Fint); "mpi_errhandler_set" "mpi_errhandler_set_" "mpi_errhandler_set__" "MPI_ERRHANDLER_SET" "pmpi_errhandler_set" "pmpi_errhandler_set_" "pmpi_errhandler_set__" "PMPI_ERRHANDLER_SET");

/// `MPI_ERRHANDLER_GET(COMM, ERRHANDLER, IERROR)`.
///
/// # Safety
/// Fortran's: every argument by reference.
unsafe extern "C" fn mpi_errhandler_get(
    comm: *const Fint,
    errhandler: *mut Fint,
    ierror: *mut Fint,
) {
    // SAFETY: the caller's contract.
    unsafe { *ierror = crate::comm::PMPI_Comm_get_errhandler(*comm, errhandler) };
}
fortran_names!(mpi_errhandler_get(comm: *const Fint, errhandler: *mut Fint, ierror: *mut Fint); "mpi_errhandler_get" "mpi_errhandler_get_" "mpi_errhandler_get__" "MPI_ERRHANDLER_GET" "pmpi_errhandler_get" "pmpi_errhandler_get_" "pmpi_errhandler_get__" "PMPI_ERRHANDLER_GET");

/// `MPI_CONVERSION_FN_NULL`: the null data conversion of
/// `MPI_REGISTER_DATAREP` (which kumi does not implement: nothing calls it).
unsafe extern "C" fn mpi_conversion_fn_null() {}
fortran_names!(mpi_conversion_fn_null(); "mpi_conversion_fn_null" "mpi_conversion_fn_null_" "mpi_conversion_fn_null__" "MPI_CONVERSION_FN_NULL" "pmpi_conversion_fn_null" "pmpi_conversion_fn_null_" "pmpi_conversion_fn_null__" "PMPI_CONVERSION_FN_NULL");
