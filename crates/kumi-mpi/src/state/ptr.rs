//! Arguments from C: output pointers, input slices and strings (each null
//! or negative length an error naming the argument), statuses and counts.

use super::*;

/// Writes `v` to the output argument `p`.
#[inline(always)]
pub(crate) fn out<T>(p: *mut T, what: &str, v: T) -> R<()> {
    if p.is_null() {
        return null_out(what);
    }
    // SAFETY: not null; the MPI standard makes the caller pass a pointer to a
    // writable object of this type.
    unsafe { p.write(v) };
    Ok(())
}

#[cold]
#[inline(never)]
pub(super) fn null_out(what: &str) -> R<()> {
    err(MPI_ERR_ARG, format!("the output argument `{what}` is NULL"))
}

/// Reads the input argument `p`.
#[inline(always)]
pub(crate) fn read<T: Copy>(p: *const T, what: &str) -> R<T> {
    if p.is_null() {
        return err(MPI_ERR_ARG, format!("the argument `{what}` is NULL"));
    }
    // SAFETY: not null; the caller passes a pointer to a readable object.
    Ok(unsafe { p.read() })
}

/// An input array of `n` elements.
pub(crate) fn slice<'a, T>(p: *const T, n: c_int, what: &str) -> R<&'a [T]> {
    if n < 0 {
        return err(
            MPI_ERR_COUNT,
            format!("the length of `{what}` is negative ({n})"),
        );
    }
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return err(MPI_ERR_ARG, format!("the array `{what}` is NULL"));
    }
    // SAFETY: the standard makes the caller pass an array of `n` elements.
    Ok(unsafe { std::slice::from_raw_parts(p, n as usize) })
}

/// An output array of `n` elements.
pub(crate) fn slice_mut<'a, T>(p: *mut T, n: c_int, what: &str) -> R<&'a mut [T]> {
    if n < 0 {
        return err(
            MPI_ERR_COUNT,
            format!("the length of `{what}` is negative ({n})"),
        );
    }
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return err(MPI_ERR_ARG, format!("the array `{what}` is NULL"));
    }
    // SAFETY: the standard makes the caller pass an array of `n` writable elements.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n as usize) })
}

/// Copies `s` into the C string buffer `p` of `cap` bytes (NUL-terminated);
/// writes its length to `len`.
pub(crate) fn out_str(p: *mut std::ffi::c_char, cap: usize, len: *mut c_int, s: &str) -> R<()> {
    if p.is_null() {
        return err(MPI_ERR_ARG, "the string buffer is NULL");
    }
    let n = s.len().min(cap.saturating_sub(1));
    // SAFETY: the standard makes the caller pass a buffer of at least `cap`
    // bytes; we write `n + 1 <= cap`.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), p as *mut u8, n);
        *p.add(n) = 0;
    }
    if !len.is_null() {
        out(len, "resultlen", n as c_int)?;
    }
    Ok(())
}

/// Reads a C string argument.
pub(crate) fn in_str(p: *const std::ffi::c_char, what: &str) -> R<String> {
    if p.is_null() {
        return err(MPI_ERR_ARG, format!("the string `{what}` is NULL"));
    }
    // SAFETY: the standard makes the caller pass a NUL-terminated string.
    Ok(unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned())
}

/// Whether a status pointer asks for the status (not NULL or MPI_STATUS_IGNORE).
#[inline(always)]
pub(crate) fn wants(p: *mut MPI_Status) -> bool {
    !p.is_null() && p as usize != STATUS_IGNORE
}

#[inline(always)]
pub(crate) fn status_of(s: &Status, error: c_int) -> MPI_Status {
    let bytes = s.bytes as u64;
    MPI_Status {
        count_lo: bytes as u32 as c_int,
        count_hi_and_cancelled: (((bytes >> 32) as c_int) << 1) | s.cancelled as c_int,
        MPI_SOURCE: s.source,
        MPI_TAG: s.tag,
        MPI_ERROR: error,
    }
}

/// The status of a completed operation with no message (a send, `MPI_PROC_NULL`,
/// a null request): source `MPI_ANY_SOURCE`, tag `MPI_ANY_TAG`, count 0.
#[inline(always)]
pub(crate) fn empty_status() -> MPI_Status {
    MPI_Status {
        count_lo: 0,
        count_hi_and_cancelled: 0,
        MPI_SOURCE: MPI_ANY_SOURCE,
        MPI_TAG: MPI_ANY_TAG,
        MPI_ERROR: MPI_SUCCESS,
    }
}

#[inline(always)]
pub(crate) fn put_status(p: *mut MPI_Status, s: MPI_Status) {
    if wants(p) {
        // SAFETY: not null or MPI_STATUS_IGNORE: the caller passed a status.
        unsafe { p.write(s) };
    }
}

/// [`put_status`] for a call that completes one operation (`MPI_Recv`,
/// `MPI_Wait`, `MPI_Test`, `MPI_Waitany`...): its `MPI_ERROR` field is left
/// as the program had it, as MPI says (only the calls that can return
/// `MPI_ERR_IN_STATUS` set it) and MPICH does.
#[inline(always)]
pub(crate) fn put_status_one(p: *mut MPI_Status, s: MPI_Status) {
    if wants(p) {
        // SAFETY: not null or MPI_STATUS_IGNORE: the caller passed a status.
        unsafe {
            let error = (*p).MPI_ERROR;
            p.write(MPI_Status {
                MPI_ERROR: error,
                ..s
            })
        };
    }
}

/// Size in bytes recorded in a status.
pub(crate) fn status_bytes(s: &MPI_Status) -> u64 {
    (s.count_lo as u32 as u64) | (((s.count_hi_and_cancelled as u32 as u64) >> 1) << 32)
}

/// Checks a count argument.
#[inline(always)]
pub(crate) fn count(n: c_int) -> R<usize> {
    if n < 0 {
        return negative_count(n);
    }
    Ok(n as usize)
}

#[cold]
#[inline(never)]
pub(super) fn negative_count(n: c_int) -> R<usize> {
    err(MPI_ERR_COUNT, format!("count {n} is negative"))
}
