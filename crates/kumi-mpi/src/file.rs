//! MPI-IO (`MPI_File_*`): handles onto [`kumi::file::File`].
//!
//! An `MPI_File` is a pointer in MPICH's ABI (`struct ADIOI_FileD *`); kumi's
//! handles are never dereferenced: they encode an index into the state's file
//! table above a fixed base, so a stale or foreign pointer is refused with
//! `MPI_ERR_FILE` instead of being followed. Errors of a file call go to the
//! file's error handler (`MPI_ERRORS_RETURN` unless the program says
//! otherwise, as the standard wants), those of `MPI_File_open` and
//! `MPI_File_delete` to `MPI_FILE_NULL`'s.
//!
//! The operations themselves (views, file pointers, the shared pointer,
//! atomic mode) are the runtime's; this module converts buffers and
//! datatypes to bytes and handles to objects. Nonblocking and split
//! collective calls do their I/O when they start and complete at once.

use crate::consts::*;
use crate::external32::{self, Ext32};
use crate::state::{
    empty_status, in_str, out, out_str, put_status, read, st, FileErrFn, ReqEntry, State, TypeArg,
    TypeCtor,
};
use crate::{err, set_err_comm, MPI_Status, MpiErr, R};
use kumi::datatype::Datatype;
use kumi::file::{Access, Fault, File, OpenMode, Whence};
use kumi::raw::RawRequest;
use kumi::Status;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void};
use std::rc::Rc;

/// `MPI_File`.
type Fh = *mut c_void;
type V = *const c_void;
type M = *mut c_void;
type St = *mut MPI_Status;
type Rq = *mut c_int;
type Off = i64;

/// File handles are this base plus the file's index (1, 2, ...).
const FILE_BASE: usize = 0x6b75_6d69_0000;
/// Error targets of file calls (see `crate::set_err_comm`): this kind of
/// handle, which names no communicator, plus the file's index (0 for
/// `MPI_FILE_NULL`).
const FILE_ERR: c_int = 0xbc00_0000u32 as c_int;

const MPI_MODE_CREATE: c_int = 1;
const MPI_MODE_RDONLY: c_int = 2;
const MPI_MODE_WRONLY: c_int = 4;
const MPI_MODE_RDWR: c_int = 8;
const MPI_MODE_DELETE_ON_CLOSE: c_int = 16;
const MPI_MODE_UNIQUE_OPEN: c_int = 32;
const MPI_MODE_EXCL: c_int = 64;
const MPI_MODE_APPEND: c_int = 128;
const MPI_MODE_SEQUENTIAL: c_int = 256;
const MPI_SEEK_SET: c_int = 600;
const MPI_SEEK_CUR: c_int = 602;
const MPI_SEEK_END: c_int = 604;
const MPI_DISPLACEMENT_CURRENT: Off = -54278278;
const MPI_MAX_DATAREP_STRING: usize = 128;
const MPI_COMBINER_DUP: c_int = 2;

/// An open file in the state's table.
pub(crate) struct FileEntry {
    file: Rc<RefCell<File>>,
    pub errh: c_int,
    amode: c_int,
    /// The view's types as the program gave them: the handle, and for a
    /// derived one its layout and how it was made (the program may free the
    /// handle meanwhile; `MPI_File_get_view` returns a new one).
    etype: (c_int, Option<TypeArg>),
    filetype: (c_int, Option<TypeArg>),
    /// The status of the split collective begun and not yet ended.
    split: Option<MPI_Status>,
    /// The view's data representation is `external32` (else native).
    external32: bool,
}

/// The `MPI_File` of file index `i`.
pub(crate) fn handle(i: usize) -> Fh {
    (FILE_BASE + i) as Fh
}

/// The file index an error target names, if it names a file (see
/// [`FILE_ERR`]); `Some(0)` for `MPI_FILE_NULL`.
pub(crate) fn err_target(target: c_int) -> Option<usize> {
    (target & !0x03ff_ffff == FILE_ERR).then_some((target & 0x03ff_ffff) as usize)
}

/// The MPI error class of a runtime file fault.
pub(crate) fn class_of(f: Fault) -> c_int {
    match f {
        Fault::NoSuchFile => MPI_ERR_NO_SUCH_FILE,
        Fault::Exists => MPI_ERR_FILE_EXISTS,
        Fault::Access => MPI_ERR_ACCESS,
        Fault::NoSpace => MPI_ERR_NO_SPACE,
        Fault::Quota => MPI_ERR_QUOTA,
        Fault::ReadOnly => MPI_ERR_READ_ONLY,
        Fault::Amode => MPI_ERR_AMODE,
        Fault::BadName => MPI_ERR_BAD_FILE,
        Fault::Unsupported => MPI_ERR_UNSUPPORTED_OPERATION,
        Fault::Argument => MPI_ERR_ARG,
        Fault::NotSame => MPI_ERR_NOT_SAME,
        Fault::Io => MPI_ERR_IO,
    }
}

/// Sends this call's errors to `MPI_FILE_NULL`'s handler.
fn to_file_null() {
    set_err_comm(FILE_ERR);
}

fn index_of(fh: Fh) -> Option<usize> {
    let v = (fh as usize).checked_sub(FILE_BASE)?;
    (1..=0x03ff_ffff).contains(&v).then_some(v)
}

/// The entry of an open file; its errors go to its handler from now on.
fn entry(s: &mut State, fh: Fh) -> R<&mut FileEntry> {
    match index_of(fh).filter(|i| s.files.contains_key(i)) {
        Some(i) => {
            set_err_comm(FILE_ERR | i as c_int);
            Ok(s.files.get_mut(&i).expect("checked"))
        }
        None => {
            to_file_null();
            match fh.is_null() {
                true => err(MPI_ERR_FILE, "the file is MPI_FILE_NULL"),
                false => err(
                    MPI_ERR_FILE,
                    format!("{fh:p} is not an open file (or it was closed)"),
                ),
            }
        }
    }
}

fn file(fh: Fh) -> R<Rc<RefCell<File>>> {
    Ok(entry(&mut *st()?, fh)?.file.clone())
}

/// A datatype argument as kept for `MPI_File_get_view`.
fn type_arg(s: &State, h: c_int) -> R<(Datatype, Option<TypeArg>)> {
    let d = s.dtype(h)?;
    let arg = match crate::state::builtin_type(h) {
        Some(_) => None,
        None => Some(TypeArg::Derived(d.clone(), s.type_ctors.get(&h).cloned())),
    };
    Ok((d, arg))
}

fn amode_of(amode: c_int) -> R<OpenMode> {
    let known = MPI_MODE_CREATE
        | MPI_MODE_RDONLY
        | MPI_MODE_WRONLY
        | MPI_MODE_RDWR
        | MPI_MODE_DELETE_ON_CLOSE
        | MPI_MODE_UNIQUE_OPEN
        | MPI_MODE_EXCL
        | MPI_MODE_APPEND
        | MPI_MODE_SEQUENTIAL;
    if amode & !known != 0 {
        return err(
            MPI_ERR_AMODE,
            format!("amode {amode:#x} has bits that are no MPI_MODE_ flag"),
        );
    }
    let access = match amode & (MPI_MODE_RDONLY | MPI_MODE_WRONLY | MPI_MODE_RDWR) {
        MPI_MODE_RDONLY => Access::ReadOnly,
        MPI_MODE_WRONLY => Access::WriteOnly,
        MPI_MODE_RDWR => Access::ReadWrite,
        _ => {
            return err(
                MPI_ERR_AMODE,
                format!("amode {amode:#x} must have exactly one of MPI_MODE_RDONLY, MPI_MODE_WRONLY and MPI_MODE_RDWR"),
            )
        }
    };
    Ok(OpenMode {
        access,
        create: amode & MPI_MODE_CREATE != 0,
        exclusive: amode & MPI_MODE_EXCL != 0,
        delete_on_close: amode & MPI_MODE_DELETE_ON_CLOSE != 0,
        unique_open: amode & MPI_MODE_UNIQUE_OPEN != 0,
        append: amode & MPI_MODE_APPEND != 0,
        sequential: amode & MPI_MODE_SEQUENTIAL != 0,
    })
}

fn whence_of(w: c_int) -> R<Whence> {
    match w {
        MPI_SEEK_SET => Ok(Whence::Set),
        MPI_SEEK_CUR => Ok(Whence::Current),
        MPI_SEEK_END => Ok(Whence::End),
        _ => err(
            MPI_ERR_ARG,
            format!("whence {w} is none of MPI_SEEK_SET, MPI_SEEK_CUR, MPI_SEEK_END"),
        ),
    }
}

fn offset_of(o: Off, what: &str) -> R<u64> {
    u64::try_from(o).or_else(|_| err(MPI_ERR_ARG, format!("{what} {o} is negative")))
}

/// A collective call's own argument check, agreed with the other ranks first
/// (see [`File::all_ok`]): every rank fails if one does.
fn agreed<T>(f: &File, local: R<T>) -> R<T> {
    let all = f.all_ok(local.is_ok())?;
    match local {
        Err(e) => Err(e),
        Ok(_) if !all => err(
            MPI_ERR_ARG,
            "the call failed on another rank (see its error)",
        ),
        Ok(v) => Ok(v),
    }
}

/// Where a data access happens.
#[derive(Clone, Copy)]
enum At {
    /// An explicit offset (in elementary types of the view).
    Offset(Off),
    /// The individual file pointer.
    Own,
    /// The shared file pointer.
    Shared,
    /// The shared file pointer, collectively in rank order.
    Ordered,
}

/// The memory side of an access: `count` elements of `dt` at `buf`, and
/// how they convert to the file's representation (`None`: native).
struct Mem {
    d: Datatype,
    n: usize,
    bytes: usize,
    external32: Option<Ext32>,
}

/// The `external32` conversion of `d`, which must keep each element's size
/// (every type but `long`, `unsigned long` and `wchar_t`, which narrow there
/// and would move the data of a file view).
fn same_size_external32(d: &Datatype) -> R<Ext32> {
    match external32::of_type(d)? {
        Ext32::Narrow { native, ext, .. } => err(
            MPI_ERR_CONVERSION,
            format!("kumi's external32 files take types of the same size in both representations; this one's elements are {native} bytes here and {ext} in external32"),
        ),
        x => Ok(x),
    }
}

fn mem(s: &State, buf: *const c_void, count: i64, dt: c_int) -> R<Mem> {
    let d = s.dtype(dt)?;
    let n = usize::try_from(count)
        .or_else(|_| err(MPI_ERR_COUNT, format!("count {count} is negative")))?;
    let bytes = d
        .size()
        .checked_mul(n)
        .filter(|&b| b <= isize::MAX as usize)
        .map_or_else(
            || {
                err(
                    MPI_ERR_COUNT,
                    format!("{n} elements of {} bytes do not fit in memory", d.size()),
                )
            },
            Ok,
        )?;
    if buf.is_null() && bytes > 0 {
        return err(MPI_ERR_BUFFER, "the buffer is NULL");
    }
    Ok(Mem {
        d,
        n,
        bytes,
        external32: None,
    })
}

/// Looks up the file and the memory layout; a collective ordered access
/// agrees on the checks first.
fn prepare(
    fh: Fh,
    at: At,
    buf: *const c_void,
    count: i64,
    dt: c_int,
) -> R<(Rc<RefCell<File>>, Mem)> {
    let (f, external32) = {
        let mut s = st()?;
        let e = entry(&mut s, fh)?;
        (e.file.clone(), e.external32)
    };
    let m = mem(&*st()?, buf, count, dt).and_then(|mut m| {
        if external32 && m.bytes > 0 {
            m.external32 = Some(same_size_external32(&m.d)?);
        }
        Ok(m)
    });
    let m = match at {
        At::Ordered => agreed(&f.borrow(), m)?,
        _ => m?,
    };
    Ok((f, m))
}

fn done(bytes: usize) -> MPI_Status {
    let mut st = empty_status();
    st.count_lo = bytes as u32 as c_int;
    st.count_hi_and_cancelled = ((bytes as u64 >> 32) as c_int) << 1;
    st
}

fn read_op(fh: Fh, at: At, buf: M, count: i64, dt: c_int) -> R<MPI_Status> {
    let (f, m) = prepare(fh, at, buf, count, dt)?;
    let mut f = f.borrow_mut();
    let mut go = |b: &mut [u8]| -> kumi::Result<usize> {
        match at {
            At::Offset(o) => f.read_at(o as u64, b),
            At::Own => f.read(b),
            At::Shared => f.read_shared(b),
            At::Ordered => f.read_ordered(b),
        }
    };
    if let At::Offset(o) = at {
        offset_of(o, "offset")?;
    }
    let got = if let Some(x) = m.external32 {
        let mut file_bytes = vec![0u8; m.bytes];
        let got = go(&mut file_bytes)?;
        let mut native = vec![0u8; got];
        x.decode(&file_bytes[..got], &mut native);
        // SAFETY: the standard makes the caller pass room for `count`
        // elements at `buf`; `unpack` writes only the typemap's bytes, and
        // only as many as were read.
        unsafe { m.d.unpack(&native, buf as *mut u8, m.n) };
        got
    } else if m.d.is_contiguous() || m.bytes == 0 {
        // SAFETY: the standard makes the caller pass room for `count`
        // elements at `buf`; a contiguous layout is `bytes` bytes from it.
        let b = unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, m.bytes) };
        go(b)?
    } else {
        let mut tmp = vec![0u8; m.bytes];
        let got = go(&mut tmp)?;
        // SAFETY: as above; `unpack` writes only the typemap's bytes, and
        // only as many as were read.
        unsafe { m.d.unpack(&tmp[..got], buf as *mut u8, m.n) };
        got
    };
    Ok(done(got))
}

fn write_op(fh: Fh, at: At, buf: V, count: i64, dt: c_int) -> R<MPI_Status> {
    let (f, m) = prepare(fh, at, buf, count, dt)?;
    let mut f = f.borrow_mut();
    if let At::Offset(o) = at {
        offset_of(o, "offset")?;
    }
    let packed;
    let data: &[u8] = if let Some(x) = m.external32 {
        let mut native = vec![0u8; m.bytes];
        // SAFETY: the standard makes the caller pass `count` elements at
        // `buf`, whose typemap's bytes are readable.
        unsafe { m.d.pack(buf as *const u8, m.n, &mut native) };
        let mut v = vec![0u8; x.size(m.bytes)];
        x.encode(&native, &mut v)
            .or_else(|e| err(MPI_ERR_CONVERSION, e))?;
        packed = v;
        &packed
    } else if m.d.is_contiguous() || m.bytes == 0 {
        // SAFETY: the standard makes the caller pass `count` elements at
        // `buf`; a contiguous layout is `bytes` bytes from it.
        unsafe { std::slice::from_raw_parts(buf as *const u8, m.bytes) }
    } else {
        let mut v = vec![0u8; m.bytes];
        // SAFETY: as above, the typemap's bytes are readable.
        unsafe { m.d.pack(buf as *const u8, m.n, &mut v) };
        packed = v;
        &packed
    };
    let n = match at {
        At::Offset(o) => f.write_at(o as u64, data)?,
        At::Own => f.write(data)?,
        At::Shared => f.write_shared(data)?,
        At::Ordered => f.write_ordered(data)?,
    };
    Ok(done(n))
}

/// A nonblocking access: done now, returned as a completed request.
fn nonblocking(done: MPI_Status, request: Rq) -> R<()> {
    if request.is_null() {
        return err(MPI_ERR_ARG, "the output argument `request` is NULL");
    }
    let r = RawRequest::completed(Status {
        source: MPI_ANY_SOURCE,
        tag: MPI_ANY_TAG,
        bytes: crate::state::status_bytes(&done) as usize,
        cancelled: false,
    });
    let h = st()?.new_request(ReqEntry::Active(r), MPI_COMM_WORLD);
    out(request, "request", h)
}

/// The first half of a split collective: the access now, its status kept.
fn begin(fh: Fh, access: impl FnOnce() -> R<MPI_Status>) -> R<()> {
    let mut s = st()?;
    let e = entry(&mut s, fh)?;
    if e.split.is_some() {
        return err(
            MPI_ERR_OTHER,
            "a split collective is already active on this file: end it first",
        );
    }
    drop(s);
    let status = access()?;
    entry(&mut *st()?, fh)?.split = Some(status);
    Ok(())
}

fn end(fh: Fh, status: St) -> R<()> {
    match entry(&mut *st()?, fh)?.split.take() {
        Some(s) => {
            put_status(status, s);
            Ok(())
        }
        None => err(MPI_ERR_OTHER, "no split collective is active on this file"),
    }
}

fn put(status: St, r: R<MPI_Status>) -> R<()> {
    put_status(status, r?);
    Ok(())
}

/// The int-count and large-count (`_c`) forms of the data-access calls,
/// from one body; `count` is an `i64` in it.
macro_rules! count_ty {
    (int COUNT) => {
        c_int
    };
    (big COUNT) => {
        i64
    };
    ($w:ident $t:ident) => {
        $t
    };
}

macro_rules! file_data {
    ($( $mpi:ident / $pmpi:ident, $mpic:ident / $pmpic:ident ( $($a:ident : $t:ident),* ) [$c:ident] $body:block )*) => {
        mpi! {$(
            fn $mpi / $pmpi($($a: count_ty!(int $t)),*) {
                let $c = i64::from($c);
                $body
            }
            fn $mpic / $pmpic($($a: count_ty!(big $t)),*) $body
        )*}
    };
}

file_data! {
    MPI_File_read_at / PMPI_File_read_at, MPI_File_read_at_c / PMPI_File_read_at_c
        (fh: Fh, offset: Off, buf: M, count: COUNT, datatype: c_int, status: St) [count] {
        put(status, read_op(fh, At::Offset(offset), buf, count, datatype))
    }
    MPI_File_read_at_all / PMPI_File_read_at_all, MPI_File_read_at_all_c / PMPI_File_read_at_all_c
        (fh: Fh, offset: Off, buf: M, count: COUNT, datatype: c_int, status: St) [count] {
        put(status, read_op(fh, At::Offset(offset), buf, count, datatype))
    }
    MPI_File_write_at / PMPI_File_write_at, MPI_File_write_at_c / PMPI_File_write_at_c
        (fh: Fh, offset: Off, buf: V, count: COUNT, datatype: c_int, status: St) [count] {
        put(status, write_op(fh, At::Offset(offset), buf, count, datatype))
    }
    MPI_File_write_at_all / PMPI_File_write_at_all, MPI_File_write_at_all_c / PMPI_File_write_at_all_c
        (fh: Fh, offset: Off, buf: V, count: COUNT, datatype: c_int, status: St) [count] {
        put(status, write_op(fh, At::Offset(offset), buf, count, datatype))
    }
    MPI_File_iread_at / PMPI_File_iread_at, MPI_File_iread_at_c / PMPI_File_iread_at_c
        (fh: Fh, offset: Off, buf: M, count: COUNT, datatype: c_int, request: Rq) [count] {
        nonblocking(read_op(fh, At::Offset(offset), buf, count, datatype)?, request)
    }
    MPI_File_iread_at_all / PMPI_File_iread_at_all, MPI_File_iread_at_all_c / PMPI_File_iread_at_all_c
        (fh: Fh, offset: Off, buf: M, count: COUNT, datatype: c_int, request: Rq) [count] {
        nonblocking(read_op(fh, At::Offset(offset), buf, count, datatype)?, request)
    }
    MPI_File_iwrite_at / PMPI_File_iwrite_at, MPI_File_iwrite_at_c / PMPI_File_iwrite_at_c
        (fh: Fh, offset: Off, buf: V, count: COUNT, datatype: c_int, request: Rq) [count] {
        nonblocking(write_op(fh, At::Offset(offset), buf, count, datatype)?, request)
    }
    MPI_File_iwrite_at_all / PMPI_File_iwrite_at_all, MPI_File_iwrite_at_all_c / PMPI_File_iwrite_at_all_c
        (fh: Fh, offset: Off, buf: V, count: COUNT, datatype: c_int, request: Rq) [count] {
        nonblocking(write_op(fh, At::Offset(offset), buf, count, datatype)?, request)
    }
    MPI_File_read / PMPI_File_read, MPI_File_read_c / PMPI_File_read_c
        (fh: Fh, buf: M, count: COUNT, datatype: c_int, status: St) [count] {
        put(status, read_op(fh, At::Own, buf, count, datatype))
    }
    MPI_File_read_all / PMPI_File_read_all, MPI_File_read_all_c / PMPI_File_read_all_c
        (fh: Fh, buf: M, count: COUNT, datatype: c_int, status: St) [count] {
        put(status, read_op(fh, At::Own, buf, count, datatype))
    }
    MPI_File_write / PMPI_File_write, MPI_File_write_c / PMPI_File_write_c
        (fh: Fh, buf: V, count: COUNT, datatype: c_int, status: St) [count] {
        put(status, write_op(fh, At::Own, buf, count, datatype))
    }
    MPI_File_write_all / PMPI_File_write_all, MPI_File_write_all_c / PMPI_File_write_all_c
        (fh: Fh, buf: V, count: COUNT, datatype: c_int, status: St) [count] {
        put(status, write_op(fh, At::Own, buf, count, datatype))
    }
    MPI_File_iread / PMPI_File_iread, MPI_File_iread_c / PMPI_File_iread_c
        (fh: Fh, buf: M, count: COUNT, datatype: c_int, request: Rq) [count] {
        nonblocking(read_op(fh, At::Own, buf, count, datatype)?, request)
    }
    MPI_File_iread_all / PMPI_File_iread_all, MPI_File_iread_all_c / PMPI_File_iread_all_c
        (fh: Fh, buf: M, count: COUNT, datatype: c_int, request: Rq) [count] {
        nonblocking(read_op(fh, At::Own, buf, count, datatype)?, request)
    }
    MPI_File_iwrite / PMPI_File_iwrite, MPI_File_iwrite_c / PMPI_File_iwrite_c
        (fh: Fh, buf: V, count: COUNT, datatype: c_int, request: Rq) [count] {
        nonblocking(write_op(fh, At::Own, buf, count, datatype)?, request)
    }
    MPI_File_iwrite_all / PMPI_File_iwrite_all, MPI_File_iwrite_all_c / PMPI_File_iwrite_all_c
        (fh: Fh, buf: V, count: COUNT, datatype: c_int, request: Rq) [count] {
        nonblocking(write_op(fh, At::Own, buf, count, datatype)?, request)
    }
    MPI_File_read_shared / PMPI_File_read_shared, MPI_File_read_shared_c / PMPI_File_read_shared_c
        (fh: Fh, buf: M, count: COUNT, datatype: c_int, status: St) [count] {
        put(status, read_op(fh, At::Shared, buf, count, datatype))
    }
    MPI_File_write_shared / PMPI_File_write_shared, MPI_File_write_shared_c / PMPI_File_write_shared_c
        (fh: Fh, buf: V, count: COUNT, datatype: c_int, status: St) [count] {
        put(status, write_op(fh, At::Shared, buf, count, datatype))
    }
    MPI_File_iread_shared / PMPI_File_iread_shared, MPI_File_iread_shared_c / PMPI_File_iread_shared_c
        (fh: Fh, buf: M, count: COUNT, datatype: c_int, request: Rq) [count] {
        nonblocking(read_op(fh, At::Shared, buf, count, datatype)?, request)
    }
    MPI_File_iwrite_shared / PMPI_File_iwrite_shared, MPI_File_iwrite_shared_c / PMPI_File_iwrite_shared_c
        (fh: Fh, buf: V, count: COUNT, datatype: c_int, request: Rq) [count] {
        nonblocking(write_op(fh, At::Shared, buf, count, datatype)?, request)
    }
    MPI_File_read_ordered / PMPI_File_read_ordered, MPI_File_read_ordered_c / PMPI_File_read_ordered_c
        (fh: Fh, buf: M, count: COUNT, datatype: c_int, status: St) [count] {
        put(status, read_op(fh, At::Ordered, buf, count, datatype))
    }
    MPI_File_write_ordered / PMPI_File_write_ordered, MPI_File_write_ordered_c / PMPI_File_write_ordered_c
        (fh: Fh, buf: V, count: COUNT, datatype: c_int, status: St) [count] {
        put(status, write_op(fh, At::Ordered, buf, count, datatype))
    }
    MPI_File_read_at_all_begin / PMPI_File_read_at_all_begin, MPI_File_read_at_all_begin_c / PMPI_File_read_at_all_begin_c
        (fh: Fh, offset: Off, buf: M, count: COUNT, datatype: c_int) [count] {
        begin(fh, || read_op(fh, At::Offset(offset), buf, count, datatype))
    }
    MPI_File_write_at_all_begin / PMPI_File_write_at_all_begin, MPI_File_write_at_all_begin_c / PMPI_File_write_at_all_begin_c
        (fh: Fh, offset: Off, buf: V, count: COUNT, datatype: c_int) [count] {
        begin(fh, || write_op(fh, At::Offset(offset), buf, count, datatype))
    }
    MPI_File_read_all_begin / PMPI_File_read_all_begin, MPI_File_read_all_begin_c / PMPI_File_read_all_begin_c
        (fh: Fh, buf: M, count: COUNT, datatype: c_int) [count] {
        begin(fh, || read_op(fh, At::Own, buf, count, datatype))
    }
    MPI_File_write_all_begin / PMPI_File_write_all_begin, MPI_File_write_all_begin_c / PMPI_File_write_all_begin_c
        (fh: Fh, buf: V, count: COUNT, datatype: c_int) [count] {
        begin(fh, || write_op(fh, At::Own, buf, count, datatype))
    }
    MPI_File_read_ordered_begin / PMPI_File_read_ordered_begin, MPI_File_read_ordered_begin_c / PMPI_File_read_ordered_begin_c
        (fh: Fh, buf: M, count: COUNT, datatype: c_int) [count] {
        begin(fh, || read_op(fh, At::Ordered, buf, count, datatype))
    }
    MPI_File_write_ordered_begin / PMPI_File_write_ordered_begin, MPI_File_write_ordered_begin_c / PMPI_File_write_ordered_begin_c
        (fh: Fh, buf: V, count: COUNT, datatype: c_int) [count] {
        begin(fh, || write_op(fh, At::Ordered, buf, count, datatype))
    }
}

mpi! {
    fn MPI_File_open / PMPI_File_open(comm: c_int, filename: *const c_char, amode: c_int, info: c_int, fh: *mut Fh) {
        to_file_null();
        let (c, mode, name) = {
            let mut s = st()?;
            let c = s.comm(comm)?;
            to_file_null();
            crate::info::check(info)?;
            (c, amode_of(amode)?, in_str(filename, "filename")?)
        };
        if fh.is_null() {
            return err(MPI_ERR_ARG, "the output argument `fh` is NULL");
        }
        let f = File::open(&c, &name, mode)?;
        let mut s = st()?;
        s.next_file += 1;
        let i = s.next_file;
        if i > 0x03ff_ffff {
            return err(MPI_ERR_NO_MEM, "too many files were opened in this run");
        }
        let byte = (MPI_BYTE, None);
        let errh = s.file_null_errh;
        s.files.insert(i, FileEntry {
            file: Rc::new(RefCell::new(f)),
            errh,
            amode,
            etype: byte,
            filetype: (MPI_BYTE, None),
            split: None,
            external32: false,
        });
        drop(s);
        out(fh, "fh", handle(i))
    }

    fn MPI_File_close / PMPI_File_close(fh: *mut Fh) {
        to_file_null();
        let h = read(fh, "fh")?;
        let e = {
            let mut s = st()?;
            entry(&mut s, h)?;
            s.files.remove(&index_of(h).expect("an open file")).expect("an open file")
        };
        let f = Rc::try_unwrap(e.file).map_err(|_| MpiErr { class: MPI_ERR_FILE_IN_USE, msg: "the file is in use by another call".into() })?;
        out(fh, "fh", std::ptr::null_mut())?;
        f.into_inner().close()?;
        Ok(())
    }

    fn MPI_File_delete / PMPI_File_delete(filename: *const c_char, info: c_int) {
        to_file_null();
        crate::info::check(info)?;
        let name = in_str(filename, "filename")?;
        File::delete(&name)?;
        Ok(())
    }

    fn MPI_File_set_size / PMPI_File_set_size(fh: Fh, size: Off) {
        let f = file(fh)?;
        let f = f.borrow();
        let n = agreed(&f, offset_of(size, "size"))?;
        f.set_size(n)?;
        Ok(())
    }

    fn MPI_File_preallocate / PMPI_File_preallocate(fh: Fh, size: Off) {
        let f = file(fh)?;
        let f = f.borrow();
        let n = agreed(&f, offset_of(size, "size"))?;
        f.preallocate(n)?;
        Ok(())
    }

    fn MPI_File_get_size / PMPI_File_get_size(fh: Fh, size: *mut Off) {
        let n = file(fh)?.borrow().size()?;
        out(size, "size", n as Off)
    }

    fn MPI_File_get_group / PMPI_File_get_group(fh: Fh, group: *mut c_int) {
        let f = file(fh)?;
        let ranks = crate::comm::world_ranks(f.borrow().comm());
        let g = st()?.new_group(ranks);
        out(group, "group", g)
    }

    fn MPI_File_get_amode / PMPI_File_get_amode(fh: Fh, amode: *mut c_int) {
        let a = entry(&mut *st()?, fh)?.amode;
        out(amode, "amode", a)
    }

    // kumi acts on no file hints: they are checked and ignored, and
    // MPI_File_get_info returns an empty info object (the standard asks for
    // the hints in use).
    fn MPI_File_set_info / PMPI_File_set_info(fh: Fh, info: c_int) {
        let mut s = st()?;
        entry(&mut s, fh)?;
        crate::info::check(info)
    }

    fn MPI_File_get_info / PMPI_File_get_info(fh: Fh, info_used: *mut c_int) {
        let mut s = st()?;
        entry(&mut s, fh)?;
        let h = crate::info::create(Vec::new());
        drop(s);
        out(info_used, "info_used", h)
    }

    fn MPI_File_set_view / PMPI_File_set_view(fh: Fh, disp: Off, etype: c_int, filetype: c_int, datarep: *const c_char, info: c_int) {
        let f = file(fh)?;
        let local = (|| {
            let s = st()?;
            crate::info::check(info)?;
            let rep = in_str(datarep, "datarep")?;
            let external32 = match rep.to_ascii_lowercase().as_str() {
                "native" | "internal" => false,
                "external32" => true,
                _ => return err(MPI_ERR_UNSUPPORTED_DATAREP, format!("data representation {rep:?} is not supported by kumi (only \"native\", \"internal\", which is native, and \"external32\")")),
            };
            let d = match disp {
                MPI_DISPLACEMENT_CURRENT => None,
                d => Some(offset_of(d, "disp")?),
            };
            let (et, ft) = (type_arg(&s, etype)?, type_arg(&s, filetype)?);
            if external32 {
                // The file holds the types' data at their external32
                // sizes; kumi lays them out where those are the native ones.
                for t in [&et.0, &ft.0] {
                    same_size_external32(t)?;
                }
            }
            Ok((d, et, ft, external32))
        })();
        let (d, (et, eta), (ft, fta), external32) = agreed(&f.borrow(), local)?;
        f.borrow_mut().set_view(d, et, ft)?;
        let mut s = st()?;
        let e = entry(&mut s, fh)?;
        e.etype = (etype, eta);
        e.filetype = (filetype, fta);
        e.external32 = external32;
        Ok(())
    }

    fn MPI_File_get_view / PMPI_File_get_view(fh: Fh, disp: *mut Off, etype: *mut c_int, filetype: *mut c_int, datarep: *mut c_char) {
        let mut s = st()?;
        let e = entry(&mut s, fh)?;
        let d = e.file.borrow().view().disp();
        let (eh, ea) = (e.etype.0, e.etype.1.clone());
        let (fh_, fa) = (e.filetype.0, e.filetype.1.clone());
        let et = returned_type(&mut s, eh, ea);
        let ft = returned_type(&mut s, fh_, fa);
        let rep = if entry(&mut s, fh)?.external32 { "external32" } else { "native" };
        drop(s);
        out(disp, "disp", d as Off)?;
        out(etype, "etype", et)?;
        out(filetype, "filetype", ft)?;
        out_str(datarep, MPI_MAX_DATAREP_STRING, std::ptr::null_mut(), rep)
    }

    fn MPI_File_seek / PMPI_File_seek(fh: Fh, offset: Off, whence: c_int) {
        let w = whence_of(whence);
        let f = file(fh)?;
        f.borrow_mut().seek(offset, w?)?;
        Ok(())
    }

    fn MPI_File_get_position / PMPI_File_get_position(fh: Fh, offset: *mut Off) {
        let p = file(fh)?.borrow().position();
        out(offset, "offset", p as Off)
    }

    fn MPI_File_seek_shared / PMPI_File_seek_shared(fh: Fh, offset: Off, whence: c_int) {
        let f = file(fh)?;
        let f = f.borrow();
        let w = agreed(&f, whence_of(whence))?;
        f.seek_shared(offset, w)?;
        Ok(())
    }

    fn MPI_File_get_position_shared / PMPI_File_get_position_shared(fh: Fh, offset: *mut Off) {
        let p = file(fh)?.borrow().position_shared()?;
        out(offset, "offset", p as Off)
    }

    fn MPI_File_get_byte_offset / PMPI_File_get_byte_offset(fh: Fh, offset: Off, disp: *mut Off) {
        let f = file(fh)?;
        let b = f.borrow().byte_offset(offset_of(offset, "offset")?)?;
        out(disp, "disp", b as Off)
    }

    fn MPI_File_get_type_extent / PMPI_File_get_type_extent(fh: Fh, datatype: c_int, extent: *mut isize) {
        let mut s = st()?;
        entry(&mut s, fh)?;
        let x = s.dtype(datatype)?.extent();
        drop(s);
        out(extent, "extent", x)
    }

    fn MPI_File_get_type_extent_c / PMPI_File_get_type_extent_c(fh: Fh, datatype: c_int, extent: *mut i64) {
        let mut s = st()?;
        entry(&mut s, fh)?;
        let x = s.dtype(datatype)?.extent();
        drop(s);
        out(extent, "extent", x as i64)
    }

    fn MPI_File_set_atomicity / PMPI_File_set_atomicity(fh: Fh, flag: c_int) {
        let f = file(fh)?;
        f.borrow_mut().set_atomicity(flag != 0)?;
        Ok(())
    }

    fn MPI_File_get_atomicity / PMPI_File_get_atomicity(fh: Fh, flag: *mut c_int) {
        let a = file(fh)?.borrow().atomicity();
        out(flag, "flag", a as c_int)
    }

    fn MPI_File_sync / PMPI_File_sync(fh: Fh) {
        file(fh)?.borrow().sync()?;
        Ok(())
    }

    fn MPI_File_read_at_all_end / PMPI_File_read_at_all_end(fh: Fh, _buf: M, status: St) {
        end(fh, status)
    }

    fn MPI_File_write_at_all_end / PMPI_File_write_at_all_end(fh: Fh, _buf: V, status: St) {
        end(fh, status)
    }

    fn MPI_File_read_all_end / PMPI_File_read_all_end(fh: Fh, _buf: M, status: St) {
        end(fh, status)
    }

    fn MPI_File_write_all_end / PMPI_File_write_all_end(fh: Fh, _buf: V, status: St) {
        end(fh, status)
    }

    fn MPI_File_read_ordered_end / PMPI_File_read_ordered_end(fh: Fh, _buf: M, status: St) {
        end(fh, status)
    }

    fn MPI_File_write_ordered_end / PMPI_File_write_ordered_end(fh: Fh, _buf: V, status: St) {
        end(fh, status)
    }

    fn MPI_File_create_errhandler / PMPI_File_create_errhandler(function: Option<FileErrFn>, errhandler: *mut c_int) {
        let h = st()?.new_errhandler(function, |s| &mut s.file_errhs)?;
        out(errhandler, "errhandler", h)
    }

    fn MPI_File_set_errhandler / PMPI_File_set_errhandler(fh: Fh, errhandler: c_int) {
        let mut s = st()?;
        let known = matches!(errhandler, MPI_ERRORS_ARE_FATAL | MPI_ERRORS_RETURN | MPI_ERRORS_ABORT)
            || s.file_errhs.contains_key(&errhandler);
        if fh.is_null() {
            to_file_null();
        } else {
            entry(&mut s, fh)?;
        }
        if !known {
            return err(MPI_ERR_ARG, format!("{errhandler:#x} is not an error handler for files"));
        }
        match fh.is_null() {
            true => s.file_null_errh = errhandler,
            false => entry(&mut s, fh)?.errh = errhandler,
        }
        Ok(())
    }

    fn MPI_File_get_errhandler / PMPI_File_get_errhandler(fh: Fh, errhandler: *mut c_int) {
        let mut s = st()?;
        let e = match fh.is_null() {
            true => s.file_null_errh,
            false => entry(&mut s, fh)?.errh,
        };
        let e = s.errhandler_out(e);
        drop(s);
        out(errhandler, "errhandler", e)
    }

    // As MPI_Comm_call_errhandler: MPI_SUCCESS once the handler returns.
    fn MPI_File_call_errhandler / PMPI_File_call_errhandler(fh: Fh, errorcode: c_int) {
        let target = match index_of(fh) {
            None if fh.is_null() => FILE_ERR,
            _ => {
                entry(&mut *st()?, fh)?;
                FILE_ERR | index_of(fh).expect("an open file") as c_int
            }
        };
        let e = MpiErr { class: errorcode, msg: format!("MPI_File_call_errhandler raised error code {errorcode}") };
        crate::state::handle_error("MPI_File_call_errhandler", target, e);
        Ok(())
    }
}

/// A view type for `MPI_File_get_view`: a predefined one as it is, a derived
/// one as a new handle (a duplicate the program frees).
fn returned_type(s: &mut State, h: c_int, arg: Option<TypeArg>) -> c_int {
    let Some(TypeArg::Derived(d, ctor)) = arg else {
        return h;
    };
    let n = s.fresh(NEW_TYPE);
    s.types.insert(n, (d.clone(), String::new()));
    s.type_ctors.insert(
        n,
        Rc::new(TypeCtor {
            combiner: MPI_COMBINER_DUP,
            ints: vec![],
            aints: vec![],
            large: vec![],
            types: vec![TypeArg::Derived(d, ctor)],
        }),
    );
    n
}

/// `MPI_File_c2f`: the Fortran handle of a file (its index; 0 for
/// `MPI_FILE_NULL` or anything that is not an open file).
#[no_mangle]
pub extern "C" fn PMPI_File_c2f(fh: Fh) -> c_int {
    index_of(fh).map_or(0, |i| i as c_int)
}

/// `MPI_File_c2f`: see `PMPI_File_c2f`.
#[no_mangle]
pub extern "C" fn MPI_File_c2f(fh: Fh) -> c_int {
    PMPI_File_c2f(fh)
}

/// `MPI_File_f2c`: the C handle of a Fortran file handle (`MPI_FILE_NULL`
/// for 0 or a negative one).
#[no_mangle]
pub extern "C" fn PMPI_File_f2c(f: c_int) -> Fh {
    if f <= 0 {
        return std::ptr::null_mut();
    }
    handle(f as usize)
}

/// `MPI_File_f2c`: see `PMPI_File_f2c`.
#[no_mangle]
pub extern "C" fn MPI_File_f2c(f: c_int) -> Fh {
    PMPI_File_f2c(f)
}
