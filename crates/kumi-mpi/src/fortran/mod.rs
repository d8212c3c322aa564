//! The Fortran binding of `mpif.h` and the `mpi` module (MPICH's Fortran
//! ABI, so programs built with `mpif90.mpich` run on kumi unchanged).
//!
//! The wrappers themselves are generated (`gen.rs`, by
//! `scripts/gen-fortran.py` from the MPI Forum's API description, for every
//! function kumi implements in C); this module holds what they share: the
//! sentinel objects, and the conversions of statuses, strings and logicals.
//!
//! The ABI, as gfortran and MPICH have it:
//! - every argument by reference; `INTEGER` is a C `int` and handles are
//!   MPICH's integer handles, the same values as the C library's, so a
//!   handle passes through unchanged (`MPI_Comm_f2c` is the identity), but
//!   for files, whose C handle is a pointer (`MPI_File_f2c`);
//! - `CHARACTER*(*)` arguments have their lengths appended after the last
//!   argument, as `size_t`, in the order of the strings; Fortran strings are
//!   blank-padded, not terminated;
//! - `LOGICAL` is an `int`, `.TRUE.` 1, and any value but 0 is taken as true;
//! - `MPI_BOTTOM`, `MPI_IN_PLACE`, `MPI_STATUS_IGNORE`,
//!   `MPI_STATUSES_IGNORE`, `MPI_ERRCODES_IGNORE`, `MPI_UNWEIGHTED` and
//!   `MPI_WEIGHTS_EMPTY` are variables in common blocks (`MPIPRIV1`,
//!   `MPIPRIV2`, `MPIFCMB5`, `MPIFCMB9`) that the library recognises by
//!   address. The library defines the blocks; a program that declares them
//!   (through `mpif.h`) has the linker put one copy in the executable, which
//!   every reference, the library's included, then uses.
//! - each function is exported under the eight names MPICH's Fortran library
//!   gives it (`mpi_send`, `mpi_send_`, `mpi_send__`, `MPI_SEND`, and the
//!   `pmpi` forms), so every Fortran compiler's mangling finds it.
//!
//! A Fortran call to a function kumi does not implement, or one whose
//! Fortran form is not bound yet, fails naming it, as in C.

use crate::MPI_Status;
use std::ffi::{c_char, c_int, c_void, CString};

pub(crate) mod f08;
// Generated: formatted as the generator writes it (which `--check` compares).
#[rustfmt::skip]
mod gen;
mod removed;

/// Fortran's default `INTEGER`.
pub(crate) type Fint = c_int;

/// `MPI_STATUS_SIZE`: a status is five integers, laid out as the C struct.
pub(crate) const STATUS_SIZE: usize = 5;

/// The common blocks of `mpif.h` whose variables are sentinels, with the
/// layout MPICH's `mpif.h` gives them (the program's copy is the one used).
///
/// SAFETY (of `static mut`): nothing in kumi reads or writes these; only
/// their addresses are compared.
#[allow(non_upper_case_globals)]
pub(crate) mod blocks {
    use super::{Fint, STATUS_SIZE};
    /// `COMMON /MPIPRIV1/ MPI_BOTTOM, MPI_IN_PLACE, MPI_STATUS_IGNORE(5)`.
    #[no_mangle]
    pub static mut mpipriv1_: [Fint; 2 + STATUS_SIZE] = [0; 2 + STATUS_SIZE];
    /// `COMMON /MPIPRIV2/ MPI_STATUSES_IGNORE(5,1), MPI_ERRCODES_IGNORE(1)`.
    #[no_mangle]
    pub static mut mpipriv2_: [Fint; STATUS_SIZE + 1] = [0; STATUS_SIZE + 1];
    /// `COMMON /MPIPRIVC/ MPI_ARGVS_NULL(1,1), MPI_ARGV_NULL(1)` (characters).
    #[no_mangle]
    pub static mut mpiprivc_: [u8; 2] = [0; 2];
    /// `COMMON /MPIFCMB5/ MPI_UNWEIGHTED`.
    #[no_mangle]
    pub static mut mpifcmb5_: Fint = 0;
    /// `COMMON /MPIFCMB9/ MPI_WEIGHTS_EMPTY`.
    #[no_mangle]
    pub static mut mpifcmb9_: Fint = 0;
}

/// The address of sentinel `i` (in integers) of common block `block`.
#[inline]
fn at(block: *const Fint, i: usize) -> *const c_void {
    block.wrapping_add(i).cast()
}

/// A choice buffer: `MPI_BOTTOM` and `MPI_IN_PLACE` (`mpif.h`'s or
/// `mpi_f08`'s) become the C library's.
#[inline]
pub(crate) fn buf(p: *mut c_void) -> *mut c_void {
    let b = (&raw const blocks::mpipriv1_).cast::<Fint>();
    if p.cast_const() == at(b, 0) || f08::is!(p, MPIR_F08_MPI_BOTTOM) {
        std::ptr::null_mut()
    } else if p.cast_const() == at(b, 1) || f08::is!(p, MPIR_F08_MPI_IN_PLACE) {
        crate::consts::IN_PLACE as *mut c_void
    } else {
        p
    }
}

/// A status to fill: `MPI_STATUS_IGNORE` becomes the C library's.
#[inline]
pub(crate) fn status(p: *mut Fint) -> *mut MPI_Status {
    let b = (&raw const blocks::mpipriv1_).cast::<Fint>();
    if p.cast_const().cast() == at(b, 2) || f08::is!(p, MPIR_F08_MPI_STATUS_IGNORE_OBJ) {
        crate::consts::STATUS_IGNORE as *mut MPI_Status
    } else {
        p.cast()
    }
}

/// An array of statuses to fill: `MPI_STATUSES_IGNORE` becomes the C
/// library's.
#[inline]
pub(crate) fn statuses(p: *mut Fint) -> *mut MPI_Status {
    let b = (&raw const blocks::mpipriv2_).cast::<Fint>();
    if p.cast_const().cast() == at(b, 0) || f08::is!(p, MPIR_F08_MPI_STATUSES_IGNORE_OBJ) {
        crate::consts::STATUS_IGNORE as *mut MPI_Status
    } else {
        p.cast()
    }
}

/// Graph weights: `MPI_UNWEIGHTED` and `MPI_WEIGHTS_EMPTY` become the C
/// library's.
#[inline]
pub(crate) fn weights(p: *mut Fint) -> *mut c_int {
    if p.cast_const() == (&raw const blocks::mpifcmb5_).cast()
        || f08::is!(p, __mpi_f08_link_constants_MOD_mpi_unweighted)
    {
        crate::misc::MPI_UNWEIGHTED.0 as *mut c_int
    } else if p.cast_const() == (&raw const blocks::mpifcmb9_).cast()
        || f08::is!(p, __mpi_f08_link_constants_MOD_mpi_weights_empty)
    {
        crate::misc::MPI_WEIGHTS_EMPTY.0 as *mut c_int
    } else {
        p
    }
}

/// A Fortran string argument as C's: trailing blanks dropped, terminated.
/// A string with a NUL inside ends there, as C would read it.
///
/// # Safety
/// `p` must be valid for `len` bytes of reads (Fortran's hidden length).
pub(crate) unsafe fn str_in(p: *const c_char, len: usize) -> CString {
    let bytes: &[u8] = if p.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(p.cast(), len) }
    };
    let end = bytes.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
    let s = &bytes[..end];
    let s = s.split(|&b| b == 0).next().unwrap_or(&[]);
    CString::new(s).unwrap_or_default()
}

/// A C buffer large enough for any string the C library writes back (the
/// largest, `MPI_MAX_LIBRARY_VERSION_STRING`) and for a Fortran string of
/// `len` characters, terminated.
pub(crate) fn str_buf(len: usize) -> Vec<c_char> {
    vec![0; len.max(crate::consts::MPI_MAX_LIBRARY_VERSION_STRING) + 1]
}

/// Copies C string `c` into the Fortran string of `len` characters at `p`,
/// blank-padded; a longer string is cut at `len` (the C library already
/// bounds every string by the length the caller gave).
///
/// # Safety
/// `p` must be valid for `len` bytes of writes.
pub(crate) unsafe fn str_out(p: *mut c_char, len: usize, c: &[c_char]) {
    if p.is_null() || len == 0 {
        return;
    }
    let n = c.iter().position(|&b| b == 0).unwrap_or(c.len()).min(len);
    // SAFETY: the caller's contract; `n <= len`, and `c` holds `n` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(c.as_ptr(), p, n);
        std::ptr::write_bytes(p.add(n), b' ', len - n);
    }
}

/// A `LOGICAL` argument as C's `int`.
#[inline]
pub(crate) fn logical_in(v: Fint) -> c_int {
    c_int::from(v != 0)
}

/// C's truth value as Fortran's `LOGICAL`.
#[inline]
pub(crate) fn logical_out(v: c_int) -> Fint {
    Fint::from(v != 0)
}

/// `n` Fortran `LOGICAL`s at `p` as C's (a negative or absurd `n` gives
/// none: the C function then refuses its count).
///
/// # Safety
/// `p` must be valid for `n` integers of reads when `n > 0`.
pub(crate) unsafe fn logicals_in(p: *const Fint, n: c_int) -> Vec<c_int> {
    let n = usize::try_from(n).unwrap_or(0);
    if p.is_null() || n == 0 {
        return Vec::new();
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts(p, n) }
        .iter()
        .map(|&v| logical_in(v))
        .collect()
}

/// Writes C truth values `v` back as Fortran `LOGICAL`s at `p`.
///
/// # Safety
/// `p` must be valid for `v.len()` integers of writes.
pub(crate) unsafe fn logicals_out(p: *mut Fint, v: &[c_int]) {
    for (i, &x) in v.iter().enumerate() {
        // SAFETY: the caller's contract.
        unsafe { *p.add(i) = logical_out(x) };
    }
}

/// An index returned by `MPI_Waitany`/`MPI_Testany` as Fortran's (from 1),
/// `MPI_UNDEFINED` unchanged.
///
/// # Safety
/// `p` must be valid for one integer.
pub(crate) unsafe fn index_out(p: *mut Fint) {
    // SAFETY: the caller's contract.
    unsafe {
        if *p >= 0 {
            *p += 1;
        }
    }
}

/// The first `*n` indices at `p` (`MPI_Waitsome`, `MPI_Testsome`) as
/// Fortran's (from 1); nothing if `*n` is `MPI_UNDEFINED`.
///
/// # Safety
/// `n` must be valid for one integer and `p` for `*n`.
pub(crate) unsafe fn indices_out(n: *const Fint, p: *mut Fint) {
    // SAFETY: the caller's contract.
    let n = usize::try_from(unsafe { *n }).unwrap_or(0);
    for i in 0..n {
        // SAFETY: the caller's contract.
        unsafe { *p.add(i) += 1 };
    }
}

/// Stores error code `rc` in `ierror`, which `mpi_f08` leaves out (null)
/// when the program does.
///
/// # Safety
/// `ierror` must be null or valid for one integer.
#[inline]
pub(crate) unsafe fn ierror(ierror: *mut Fint, rc: c_int) {
    if !ierror.is_null() {
        // SAFETY: the caller's contract.
        unsafe { *ierror = rc };
    }
}

/// A Fortran call to a function that kumi has in C but whose Fortran form
/// is not bound yet: fails naming it, with `MPI_ERR_UNSUPPORTED_OPERATION`
/// in `ierror`.
///
/// # Safety
/// `ierror` must be null or valid for one integer.
pub(crate) unsafe fn unbound(name: &'static str, ierror: *mut Fint) {
    // SAFETY: the caller's contract.
    unsafe { self::ierror(ierror, crate::unsupported(name)) };
}

/// `MPI_COMM_CREATE_KEYVAL` (and the datatype's and window's) for Fortran:
/// the callbacks are Fortran procedures, called by Fortran's convention
/// ([`crate::state::KeyvalFns::Fortran`]), and the extra state an integer.
/// Hand-written: the generator has no rule for a Fortran callback.
///
/// # Safety
/// Fortran's: every argument by reference; `copy`/`delete` Fortran
/// procedures of the standard's interfaces.
unsafe extern "C" fn mpi_comm_create_keyval(
    copy: *const c_void,
    delete: *const c_void,
    keyval: *mut Fint,
    extra_state: *mut i64,
    ierror_: *mut Fint,
) {
    // SAFETY: the caller's contract; a procedure's address as the function
    // pointer of its convention (`Option` of a function pointer: null is None).
    unsafe {
        let fns = crate::state::KeyvalFns::Fortran(
            std::mem::transmute::<*const c_void, Option<crate::state::FortranCopyFn>>(copy),
            std::mem::transmute::<*const c_void, Option<crate::state::FortranDeleteFn>>(delete),
        );
        let rc = create_keyval("MPI_COMM_CREATE_KEYVAL", fns, keyval, *extra_state as usize);
        ierror(ierror_, rc);
    }
}
fortran_names!(mpi_comm_create_keyval(copy: *const c_void, delete: *const c_void, keyval: *mut Fint, extra_state: *mut i64, ierror_: *mut Fint); "mpi_comm_create_keyval" "mpi_comm_create_keyval_" "mpi_comm_create_keyval__" "MPI_COMM_CREATE_KEYVAL" "pmpi_comm_create_keyval" "pmpi_comm_create_keyval_" "pmpi_comm_create_keyval__" "PMPI_COMM_CREATE_KEYVAL" "mpi_type_create_keyval" "mpi_type_create_keyval_" "mpi_type_create_keyval__" "MPI_TYPE_CREATE_KEYVAL" "pmpi_type_create_keyval" "pmpi_type_create_keyval_" "pmpi_type_create_keyval__" "PMPI_TYPE_CREATE_KEYVAL" "mpi_win_create_keyval" "mpi_win_create_keyval_" "mpi_win_create_keyval__" "MPI_WIN_CREATE_KEYVAL" "pmpi_win_create_keyval" "pmpi_win_create_keyval_" "pmpi_win_create_keyval__" "PMPI_WIN_CREATE_KEYVAL" "mpi_comm_create_keyval_f08_" "pmpir_comm_create_keyval_f08_" "mpi_type_create_keyval_f08_" "pmpir_type_create_keyval_f08_" "mpi_win_create_keyval_f08_" "pmpir_win_create_keyval_f08_");

/// `MPI_KEYVAL_CREATE` for Fortran (MPI-1's: default `INTEGER` values and
/// extra state).
///
/// # Safety
/// As for [`mpi_comm_create_keyval`].
unsafe extern "C" fn mpi_keyval_create(
    copy: *const c_void,
    delete: *const c_void,
    keyval: *mut Fint,
    extra_state: *mut Fint,
    ierror: *mut Fint,
) {
    // SAFETY: as in `mpi_comm_create_keyval`.
    unsafe {
        let fns = crate::state::KeyvalFns::Fortran1(
            std::mem::transmute::<*const c_void, Option<crate::state::Fortran1CopyFn>>(copy),
            std::mem::transmute::<*const c_void, Option<crate::state::Fortran1DeleteFn>>(delete),
        );
        *ierror = create_keyval(
            "MPI_KEYVAL_CREATE",
            fns,
            keyval,
            *extra_state as isize as usize,
        );
    }
}
fortran_names!(mpi_keyval_create(copy: *const c_void, delete: *const c_void, keyval: *mut Fint, extra_state: *mut Fint, ierror: *mut Fint); "mpi_keyval_create" "mpi_keyval_create_" "mpi_keyval_create__" "MPI_KEYVAL_CREATE" "pmpi_keyval_create" "pmpi_keyval_create_" "pmpi_keyval_create__" "PMPI_KEYVAL_CREATE");

/// A keyval with callbacks `fns` and extra state `extra` (an integer from
/// Fortran, kept as C's `void*`) into `keyval`; the error code.
fn create_keyval(
    name: &'static str,
    fns: crate::state::KeyvalFns,
    keyval: *mut Fint,
    extra: usize,
) -> c_int {
    crate::guard_plain(name, || {
        crate::attr::create_keyval(fns, keyval, extra as *mut c_void)
    })
}

/// `MPI_GREQUEST_START` for Fortran (`mpif.h`, `use mpi` and `mpi_f08`,
/// whose callback interfaces pass the same arguments): the callbacks are
/// Fortran procedures, called by Fortran's convention
/// ([`crate::grequest::Callbacks::Fortran`]), and the extra state an
/// integer. Hand-written: the generator has no rule for a Fortran callback.
///
/// # Safety
/// Fortran's: every argument by reference; the callbacks Fortran procedures
/// of the standard's interfaces.
unsafe extern "C" fn mpi_grequest_start(
    query: *const c_void,
    free: *const c_void,
    cancel: *const c_void,
    extra_state: *mut i64,
    request: *mut Fint,
    ierror_: *mut Fint,
) {
    use crate::grequest::{Callbacks, FortranCancelFn, FortranFreeFn, FortranQueryFn};
    // SAFETY: the caller's contract; a procedure's address as the function
    // pointer of its convention (`Option` of a function pointer: null is
    // None); `extra_state` is read once, here.
    unsafe {
        let fns = (
            std::mem::transmute::<*const c_void, Option<FortranQueryFn>>(query),
            std::mem::transmute::<*const c_void, Option<FortranFreeFn>>(free),
            std::mem::transmute::<*const c_void, Option<FortranCancelFn>>(cancel),
            extra_state.as_ref().copied(),
        );
        let rc = crate::guard_plain("MPI_GREQUEST_START", || match fns {
            (Some(query), Some(free), Some(cancel), Some(extra)) => crate::grequest::start(
                Callbacks::Fortran {
                    query,
                    free,
                    cancel,
                    extra,
                },
                request,
            ),
            (.., None) => crate::err(
                crate::consts::MPI_ERR_ARG,
                "EXTRA_STATE is not an integer (a null reference)",
            ),
            _ => crate::grequest::missing_callback(),
        });
        ierror(ierror_, rc);
    }
}
fortran_names!(mpi_grequest_start(query: *const c_void, free: *const c_void, cancel: *const c_void, extra_state: *mut i64, request: *mut Fint, ierror_: *mut Fint); "mpi_grequest_start" "mpi_grequest_start_" "mpi_grequest_start__" "MPI_GREQUEST_START" "pmpi_grequest_start" "pmpi_grequest_start_" "pmpi_grequest_start__" "PMPI_GREQUEST_START" "mpi_grequest_start_f08_" "pmpir_grequest_start_f08_");

/// `MPI_COMM_NULL_COPY_FN` (and the datatype's and window's): copies nothing.
///
/// # Safety
/// Fortran's copy callback convention.
unsafe extern "C" fn null_copy_fn(
    _obj: *const Fint,
    _keyval: *const Fint,
    _extra: *const i64,
    _val_in: *const i64,
    _val_out: *mut i64,
    flag: *mut Fint,
    ierror: *mut Fint,
) {
    // SAFETY: the caller's contract.
    unsafe {
        *flag = 0;
        *ierror = 0;
    }
}
fortran_names!(null_copy_fn(obj: *const Fint, keyval: *const Fint, extra: *const i64, val_in: *const i64, val_out: *mut i64, flag: *mut Fint, ierror: *mut Fint); "mpi_comm_null_copy_fn" "mpi_comm_null_copy_fn_" "mpi_comm_null_copy_fn__" "MPI_COMM_NULL_COPY_FN" "pmpi_comm_null_copy_fn" "pmpi_comm_null_copy_fn_" "pmpi_comm_null_copy_fn__" "PMPI_COMM_NULL_COPY_FN" "mpi_type_null_copy_fn" "mpi_type_null_copy_fn_" "mpi_type_null_copy_fn__" "MPI_TYPE_NULL_COPY_FN" "pmpi_type_null_copy_fn" "pmpi_type_null_copy_fn_" "pmpi_type_null_copy_fn__" "PMPI_TYPE_NULL_COPY_FN" "mpi_win_null_copy_fn" "mpi_win_null_copy_fn_" "mpi_win_null_copy_fn__" "MPI_WIN_NULL_COPY_FN" "pmpi_win_null_copy_fn" "pmpi_win_null_copy_fn_" "pmpi_win_null_copy_fn__" "PMPI_WIN_NULL_COPY_FN" "__mpi_f08_callbacks_MOD_mpi_comm_null_copy_fn" "__mpi_f08_callbacks_MOD_mpi_type_null_copy_fn" "__mpi_f08_callbacks_MOD_mpi_win_null_copy_fn");

/// `MPI_COMM_DUP_FN` (and the datatype's and window's): copies the value.
///
/// # Safety
/// Fortran's copy callback convention.
unsafe extern "C" fn dup_fn(
    _obj: *const Fint,
    _keyval: *const Fint,
    _extra: *const i64,
    val_in: *const i64,
    val_out: *mut i64,
    flag: *mut Fint,
    ierror: *mut Fint,
) {
    // SAFETY: the caller's contract.
    unsafe {
        *val_out = *val_in;
        *flag = 1;
        *ierror = 0;
    }
}
fortran_names!(dup_fn(obj: *const Fint, keyval: *const Fint, extra: *const i64, val_in: *const i64, val_out: *mut i64, flag: *mut Fint, ierror: *mut Fint); "mpi_comm_dup_fn" "mpi_comm_dup_fn_" "mpi_comm_dup_fn__" "MPI_COMM_DUP_FN" "pmpi_comm_dup_fn" "pmpi_comm_dup_fn_" "pmpi_comm_dup_fn__" "PMPI_COMM_DUP_FN" "mpi_type_dup_fn" "mpi_type_dup_fn_" "mpi_type_dup_fn__" "MPI_TYPE_DUP_FN" "pmpi_type_dup_fn" "pmpi_type_dup_fn_" "pmpi_type_dup_fn__" "PMPI_TYPE_DUP_FN" "mpi_win_dup_fn" "mpi_win_dup_fn_" "mpi_win_dup_fn__" "MPI_WIN_DUP_FN" "pmpi_win_dup_fn" "pmpi_win_dup_fn_" "pmpi_win_dup_fn__" "PMPI_WIN_DUP_FN" "__mpi_f08_callbacks_MOD_mpi_comm_dup_fn" "__mpi_f08_callbacks_MOD_mpi_type_dup_fn" "__mpi_f08_callbacks_MOD_mpi_win_dup_fn");

/// `MPI_COMM_NULL_DELETE_FN` (and the datatype's and window's, and MPI-1's
/// `MPI_NULL_DELETE_FN`): does nothing.
///
/// # Safety
/// Fortran's delete callback convention.
unsafe extern "C" fn null_delete_fn(
    _obj: *const Fint,
    _keyval: *const Fint,
    _val: *const c_void,
    _extra: *const c_void,
    ierror: *mut Fint,
) {
    // SAFETY: the caller's contract.
    unsafe { *ierror = 0 };
}
fortran_names!(null_delete_fn(obj: *const Fint, keyval: *const Fint, val: *const c_void, extra: *const c_void, ierror: *mut Fint); "mpi_comm_null_delete_fn" "mpi_comm_null_delete_fn_" "mpi_comm_null_delete_fn__" "MPI_COMM_NULL_DELETE_FN" "pmpi_comm_null_delete_fn" "pmpi_comm_null_delete_fn_" "pmpi_comm_null_delete_fn__" "PMPI_COMM_NULL_DELETE_FN" "mpi_type_null_delete_fn" "mpi_type_null_delete_fn_" "mpi_type_null_delete_fn__" "MPI_TYPE_NULL_DELETE_FN" "pmpi_type_null_delete_fn" "pmpi_type_null_delete_fn_" "pmpi_type_null_delete_fn__" "PMPI_TYPE_NULL_DELETE_FN" "mpi_win_null_delete_fn" "mpi_win_null_delete_fn_" "mpi_win_null_delete_fn__" "MPI_WIN_NULL_DELETE_FN" "pmpi_win_null_delete_fn" "pmpi_win_null_delete_fn_" "pmpi_win_null_delete_fn__" "PMPI_WIN_NULL_DELETE_FN" "mpi_null_delete_fn" "mpi_null_delete_fn_" "mpi_null_delete_fn__" "MPI_NULL_DELETE_FN" "pmpi_null_delete_fn" "pmpi_null_delete_fn_" "pmpi_null_delete_fn__" "PMPI_NULL_DELETE_FN" "__mpi_f08_callbacks_MOD_mpi_comm_null_delete_fn" "__mpi_f08_callbacks_MOD_mpi_type_null_delete_fn" "__mpi_f08_callbacks_MOD_mpi_win_null_delete_fn");

/// MPI-1's `MPI_NULL_COPY_FN` (default `INTEGER` values).
///
/// # Safety
/// MPI-1 Fortran's copy callback convention.
unsafe extern "C" fn null_copy_fn1(
    _obj: *const Fint,
    _keyval: *const Fint,
    _extra: *const Fint,
    _val_in: *const Fint,
    _val_out: *mut Fint,
    flag: *mut Fint,
    ierror: *mut Fint,
) {
    // SAFETY: the caller's contract.
    unsafe {
        *flag = 0;
        *ierror = 0;
    }
}
fortran_names!(null_copy_fn1(obj: *const Fint, keyval: *const Fint, extra: *const Fint, val_in: *const Fint, val_out: *mut Fint, flag: *mut Fint, ierror: *mut Fint); "mpi_null_copy_fn" "mpi_null_copy_fn_" "mpi_null_copy_fn__" "MPI_NULL_COPY_FN" "pmpi_null_copy_fn" "pmpi_null_copy_fn_" "pmpi_null_copy_fn__" "PMPI_NULL_COPY_FN");

/// MPI-1's `MPI_DUP_FN` (default `INTEGER` values).
///
/// # Safety
/// MPI-1 Fortran's copy callback convention.
unsafe extern "C" fn dup_fn1(
    _obj: *const Fint,
    _keyval: *const Fint,
    _extra: *const Fint,
    val_in: *const Fint,
    val_out: *mut Fint,
    flag: *mut Fint,
    ierror: *mut Fint,
) {
    // SAFETY: the caller's contract.
    unsafe {
        *val_out = *val_in;
        *flag = 1;
        *ierror = 0;
    }
}
fortran_names!(dup_fn1(obj: *const Fint, keyval: *const Fint, extra: *const Fint, val_in: *const Fint, val_out: *mut Fint, flag: *mut Fint, ierror: *mut Fint); "mpi_dup_fn" "mpi_dup_fn_" "mpi_dup_fn__" "MPI_DUP_FN" "pmpi_dup_fn" "pmpi_dup_fn_" "pmpi_dup_fn__" "PMPI_DUP_FN");

/// Exports a wrapper under each of its Fortran names (MPICH's eight).
macro_rules! fortran_names {
    ($f:ident $params:tt ; $($name:literal)*) => {
        fortran_names!($f $params -> (); $($name)*);
    };
    ($f:ident $params:tt -> $r:ty ; $($name:literal)*) => {$(
        fortran_entry!($name, $f, $params, $r);
    )*};
}

/// One of [`fortran_names`]'s entries: a jump to the wrapper.
macro_rules! fortran_entry {
    ($name:expr, $f:ident, ($($a:ident : $t:ty),*), $r:ty) => {
        const _: () = {
            #[export_name = $name]
            unsafe extern "C" fn entry($($a: $t),*) -> $r {
                // SAFETY: the same contract, forwarded unchanged.
                unsafe { $f($($a),*) }
            }
        };
    };
}
pub(crate) use {fortran_entry, fortran_names};

/// The C keyvals of the predefined attributes (communicators', then
/// windows'), whose values C gives as pointers.
const PREDEFINED_KEYVALS: [c_int; 12] = [
    crate::consts::MPI_TAG_UB,
    crate::consts::MPI_HOST,
    crate::consts::MPI_IO,
    crate::consts::MPI_WTIME_IS_GLOBAL,
    crate::consts::MPI_UNIVERSE_SIZE,
    crate::consts::MPI_LASTUSEDCODE,
    crate::consts::MPI_APPNUM,
    WIN_BASE,
    WIN_SIZE,
    0x6600_0005, // MPI_WIN_DISP_UNIT
    0x6600_0007, // MPI_WIN_CREATE_FLAVOR
    0x6600_0009, // MPI_WIN_MODEL
];
const WIN_BASE: c_int = 0x6600_0001;
const WIN_SIZE: c_int = 0x6600_0003;

/// A keyval from Fortran as C's: `mpif.h` names each predefined attribute
/// by its C keyval plus one (MPICH's values), so a C library can tell a
/// Fortran caller, which gets the value itself rather than a pointer to it.
#[inline]
pub(crate) fn keyval(k: Fint) -> c_int {
    if PREDEFINED_KEYVALS.contains(&(k.wrapping_sub(1))) {
        k - 1
    } else {
        k
    }
}

/// After a `*_GET_ATTR` found attribute `keyval` (C's): the C call wrote
/// the attribute's `void*` into the Fortran integer at `val`. For an
/// attribute set from Fortran that is its integer already; a predefined
/// one, which C gives as a pointer to its value, becomes the value (but the
/// window's base, which is an address).
///
/// # Safety
/// `val` must be valid for one `i64`, written by the C call when `flag`.
pub(crate) unsafe fn attr_out(keyval: c_int, val: *mut i64, flag: c_int) {
    if flag == 0 || keyval == WIN_BASE || !PREDEFINED_KEYVALS.contains(&keyval) {
        return;
    }
    // SAFETY: the caller's contract; the predefined attributes' pointers
    // point to values the library keeps for as long as the object lives.
    unsafe {
        let p = *val as usize;
        *val = if keyval == WIN_SIZE {
            *(p as *const isize) as i64
        } else {
            i64::from(*(p as *const c_int))
        };
    }
}

/// `MPI_WTIME` for Fortran (a function returning `DOUBLE PRECISION`).
unsafe extern "C" fn mpi_wtime() -> f64 {
    crate::init::PMPI_Wtime()
}
fortran_names!(mpi_wtime() -> f64; "mpi_wtime" "mpi_wtime_" "mpi_wtime__" "MPI_WTIME" "pmpi_wtime" "pmpi_wtime_" "pmpi_wtime__" "PMPI_WTIME" "mpi_wtime_f08_" "pmpir_wtime_f08_");

/// `MPI_WTICK` for Fortran.
unsafe extern "C" fn mpi_wtick() -> f64 {
    crate::init::MPI_Wtick()
}
fortran_names!(mpi_wtick() -> f64; "mpi_wtick" "mpi_wtick_" "mpi_wtick__" "MPI_WTICK" "pmpi_wtick" "pmpi_wtick_" "pmpi_wtick__" "PMPI_WTICK" "mpi_wtick_f08_" "pmpir_wtick_f08_");

/// `MPI_AINT_ADD` for Fortran (`INTEGER(KIND=MPI_ADDRESS_KIND)` result).
///
/// # Safety
/// Both arguments valid for one `i64` each.
unsafe extern "C" fn mpi_aint_add(base: *const i64, disp: *const i64) -> i64 {
    // SAFETY: the caller's contract.
    unsafe { crate::types::PMPI_Aint_add(*base as isize, *disp as isize) as i64 }
}
fortran_names!(mpi_aint_add(base: *const i64, disp: *const i64) -> i64; "mpi_aint_add" "mpi_aint_add_" "mpi_aint_add__" "MPI_AINT_ADD" "pmpi_aint_add" "pmpi_aint_add_" "pmpi_aint_add__" "PMPI_AINT_ADD" "mpi_aint_add_f08_" "pmpir_aint_add_f08_");

/// `MPI_AINT_DIFF` for Fortran.
///
/// # Safety
/// Both arguments valid for one `i64` each.
unsafe extern "C" fn mpi_aint_diff(addr1: *const i64, addr2: *const i64) -> i64 {
    // SAFETY: the caller's contract.
    unsafe { crate::types::MPI_Aint_diff(*addr1 as isize, *addr2 as isize) as i64 }
}
fortran_names!(mpi_aint_diff(addr1: *const i64, addr2: *const i64) -> i64; "mpi_aint_diff" "mpi_aint_diff_" "mpi_aint_diff__" "MPI_AINT_DIFF" "pmpi_aint_diff" "pmpi_aint_diff_" "pmpi_aint_diff__" "PMPI_AINT_DIFF" "mpi_aint_diff_f08_" "pmpir_aint_diff_f08_");

/// The number of dimensions of Cartesian communicator `comm` (the length of
/// `MPI_CART_SUB`'s `remain_dims`); 0 if it is none (the C call then says why).
pub(crate) fn cartdim(comm: Fint) -> c_int {
    let mut n: c_int = 0;
    // SAFETY: `n` is a live local.
    let rc = unsafe { crate::comm::PMPI_Cartdim_get(comm, &mut n) };
    if rc == crate::consts::MPI_SUCCESS {
        n
    } else {
        0
    }
}

/// `MPI_PCONTROL` for Fortran: one argument, no `IERROR`.
///
/// # Safety
/// `level` valid for one integer.
unsafe extern "C" fn mpi_pcontrol(level: *const Fint) {
    // SAFETY: the caller's contract.
    unsafe { crate::misc::PMPI_Pcontrol(*level) };
}
fortran_names!(mpi_pcontrol(level: *const Fint); "mpi_pcontrol" "mpi_pcontrol_" "mpi_pcontrol__" "MPI_PCONTROL" "pmpi_pcontrol" "pmpi_pcontrol_" "pmpi_pcontrol__" "PMPI_PCONTROL" "mpi_pcontrol_f08_" "pmpir_pcontrol_f08_");
