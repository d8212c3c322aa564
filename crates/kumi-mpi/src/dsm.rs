//! `kumi.h`'s distributed shared memory for C programs, with or without MPI:
//! DSE's global arrays (`kumi_array_*`), SCASH's page-shared segments
//! (`kumi_shared_*`) and DSE's task queue (`kumi_tasks_*`), each a thin
//! mapping onto `kumi::dsm` (nothing of the protocols is here). A program
//! that does not use MPI starts with `kumi_init` and ends with
//! `kumi_finalize`, and passes `KUMI_WORLD` where a communicator is asked
//! for; one that does passes any intra-communicator.
//!
//! Objects are opaque pointers to boxes this library made; `kumi_*_free`
//! takes them back (collectively) and sets the program's pointer to NULL.
//! Errors go through `MPI_COMM_WORLD`'s error handler, as the checkpoint
//! calls' do.

use crate::consts::*;
use crate::init::{MPI_Finalize, MPI_Init, MPI_Initialized};
use crate::state::st;
use crate::{err, guard, R};
use kumi::dsm::{Array, Dist, RawTaskQueue, Shared};
use kumi::win::AccOp;
use kumi::Comm;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

/// `kumi_init` started MPI (so `kumi_finalize` ends it). Relaxed: both run
/// on the thread that initialized.
static STARTED_MPI: AtomicBool = AtomicBool::new(false);

/// Element types (`enum kumi_type`).
const KUMI_INT32: c_int = 1;
const KUMI_UINT32: c_int = 2;
const KUMI_INT64: c_int = 3;
const KUMI_UINT64: c_int = 4;
const KUMI_FLOAT: c_int = 5;
const KUMI_DOUBLE: c_int = 6;

/// Distributions (`enum kumi_dist`).
const KUMI_BLOCK: c_int = 1;
const KUMI_CYCLIC: c_int = 2;
const KUMI_OWNED: c_int = 3;

/// An array of one of the element types.
pub enum AnyArray {
    I32(Array<i32>),
    U32(Array<u32>),
    I64(Array<i64>),
    U64(Array<u64>),
    F32(Array<f32>),
    F64(Array<f64>),
}

/// Runs `$e` with `$a` bound to the typed array and `$t` to its type.
macro_rules! each {
    ($any:expr, |$a:ident : $t:ident| $e:expr) => {
        match $any {
            AnyArray::I32($a) => {
                #[allow(dead_code)]
                type $t = i32;
                $e
            }
            AnyArray::U32($a) => {
                #[allow(dead_code)]
                type $t = u32;
                $e
            }
            AnyArray::I64($a) => {
                #[allow(dead_code)]
                type $t = i64;
                $e
            }
            AnyArray::U64($a) => {
                #[allow(dead_code)]
                type $t = u64;
                $e
            }
            AnyArray::F32($a) => {
                #[allow(dead_code)]
                type $t = f32;
                $e
            }
            AnyArray::F64($a) => {
                #[allow(dead_code)]
                type $t = f64;
                $e
            }
        }
    };
}

fn comm(h: c_int) -> R<Comm> {
    st()?.comm(h)
}

fn need<T>(p: *const T, f: &str, what: &str) -> R<()> {
    if p.is_null() {
        return err(MPI_ERR_ARG, format!("{f}: {what} is NULL"));
    }
    Ok(())
}

/// The object behind a handle the program passed.
fn obj<'a, T>(p: *mut T, f: &str) -> R<&'a T> {
    // SAFETY: a non-null handle is one this library made (`kumi.h`'s
    // contract) and has not freed.
    unsafe { p.as_ref() }.ok_or_else(|| crate::MpiErr {
        class: MPI_ERR_ARG,
        msg: format!("{f}: the handle is NULL (freed, or never made)"),
    })
}

/// Takes back the object `*h` and sets `*h` to NULL.
fn take<T>(h: *mut *mut T, f: &str) -> R<Box<T>> {
    need(h, f, "the handle's address")?;
    // SAFETY: checked non-null; the program's handle variable.
    let p = unsafe { std::ptr::replace(h, std::ptr::null_mut()) };
    obj(p, f)?;
    // SAFETY: made by `Box::into_raw` in this library, taken back once (the
    // program's handle is NULL from now on).
    Ok(unsafe { Box::from_raw(p) })
}

fn put<T>(out: *mut *mut T, v: T, f: &str) -> R<()> {
    need(out, f, "the output handle")?;
    // SAFETY: checked non-null; the program's handle variable.
    unsafe { *out = Box::into_raw(Box::new(v)) };
    Ok(())
}

fn acc_op(op: c_int) -> R<AccOp> {
    Ok(match op {
        1 => AccOp::Sum,
        2 => AccOp::Prod,
        3 => AccOp::Min,
        4 => AccOp::Max,
        5 => AccOp::Band,
        6 => AccOp::Bor,
        7 => AccOp::Bxor,
        8 => AccOp::Replace,
        9 => AccOp::NoOp,
        _ => {
            return err(
                MPI_ERR_OP,
                format!("kumi_array_fetch_op: op {op} is not a KUMI_OP_*"),
            )
        }
    })
}

/// `kumi_init`: `MPI_Init` unless MPI runs already.
#[no_mangle]
pub unsafe extern "C" fn kumi_init(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int {
    let mut flag = 0;
    // SAFETY: a valid pointer to our int.
    unsafe { MPI_Initialized(&mut flag) };
    if flag != 0 {
        return MPI_SUCCESS;
    }
    // SAFETY: the program's arguments, passed on as MPI_Init wants them.
    let r = unsafe { MPI_Init(argc, argv) };
    if r == MPI_SUCCESS {
        STARTED_MPI.store(true, Ordering::Relaxed);
    }
    r
}

/// `kumi_finalize`: `MPI_Finalize` if `kumi_init` started MPI.
#[no_mangle]
pub unsafe extern "C" fn kumi_finalize() -> c_int {
    if STARTED_MPI.swap(false, Ordering::Relaxed) {
        // SAFETY: no arguments.
        return unsafe { MPI_Finalize() };
    }
    MPI_SUCCESS
}

/// `kumi_rank`.
#[no_mangle]
pub unsafe extern "C" fn kumi_rank(rank: *mut c_int) -> c_int {
    guard(&"kumi_rank", || {
        need(rank, "kumi_rank", "rank")?;
        let r = st()?.universe.world().rank() as c_int;
        // SAFETY: checked non-null.
        unsafe { *rank = r };
        Ok(())
    })
}

/// `kumi_size`.
#[no_mangle]
pub unsafe extern "C" fn kumi_size(size: *mut c_int) -> c_int {
    guard(&"kumi_size", || {
        need(size, "kumi_size", "size")?;
        let n = st()?.universe.world().size() as c_int;
        // SAFETY: checked non-null.
        unsafe { *size = n };
        Ok(())
    })
}

/// `kumi_array_alloc`.
#[no_mangle]
pub unsafe extern "C" fn kumi_array_alloc(
    comm_h: c_int,
    len: usize,
    ty: c_int,
    dist: c_int,
    block: usize,
    out: *mut *mut AnyArray,
) -> c_int {
    guard(&"kumi_array_alloc", || {
        const F: &str = "kumi_array_alloc";
        need(out, F, "the output handle")?;
        let c = comm(comm_h)?;
        let d = match dist {
            KUMI_BLOCK => Some(Dist::Block),
            KUMI_CYCLIC => Some(Dist::Cyclic(block)),
            KUMI_OWNED => None,
            _ => {
                return err(
                    MPI_ERR_ARG,
                    format!("{F}: dist {dist} is not a KUMI_BLOCK, KUMI_CYCLIC or KUMI_OWNED"),
                )
            }
        };
        macro_rules! make {
            ($t:ty, $v:ident) => {
                AnyArray::$v(match &d {
                    Some(d) => Array::<$t>::new(&c, len, d.clone())?,
                    None => Array::<$t>::owned(&c, len)?,
                })
            };
        }
        let a = match ty {
            KUMI_INT32 => make!(i32, I32),
            KUMI_UINT32 => make!(u32, U32),
            KUMI_INT64 => make!(i64, I64),
            KUMI_UINT64 => make!(u64, U64),
            KUMI_FLOAT => make!(f32, F32),
            KUMI_DOUBLE => make!(f64, F64),
            _ => {
                return err(
                    MPI_ERR_TYPE,
                    format!("{F}: type {ty} is not a KUMI_* element type"),
                )
            }
        };
        put(out, a, F)
    })
}

/// `kumi_array_free`.
#[no_mangle]
pub unsafe extern "C" fn kumi_array_free(a: *mut *mut AnyArray) -> c_int {
    guard(&"kumi_array_free", || {
        let a = take(a, "kumi_array_free")?;
        each!(&*a, |x: T| x.barrier())?;
        Ok(())
    })
}

/// `kumi_array_len`.
#[no_mangle]
pub unsafe extern "C" fn kumi_array_len(a: *mut AnyArray, len: *mut usize) -> c_int {
    guard(&"kumi_array_len", || {
        let a = obj(a, "kumi_array_len")?;
        need(len, "kumi_array_len", "len")?;
        // SAFETY: checked non-null.
        unsafe { *len = each!(a, |x: T| x.len()) };
        Ok(())
    })
}

/// The program's `count` elements of `T` at `p`.
///
/// # Safety
/// `p` points to `count` elements (checked non-null when `count > 0`).
unsafe fn elems<'a, T>(p: *const c_void, count: usize, f: &str) -> R<&'a [T]> {
    if count == 0 {
        return Ok(&[]);
    }
    need(p, f, "the buffer")?;
    // SAFETY: the caller's promise.
    Ok(unsafe { std::slice::from_raw_parts(p.cast(), count) })
}

/// As [`elems`], writable.
///
/// # Safety
/// As [`elems`], and writable.
unsafe fn elems_mut<'a, T>(p: *mut c_void, count: usize, f: &str) -> R<&'a mut [T]> {
    if count == 0 {
        return Ok(&mut []);
    }
    need(p, f, "the buffer")?;
    // SAFETY: the caller's promise.
    Ok(unsafe { std::slice::from_raw_parts_mut(p.cast(), count) })
}

/// `kumi_array_read`.
#[no_mangle]
pub unsafe extern "C" fn kumi_array_read(
    a: *mut AnyArray,
    start: usize,
    count: usize,
    out: *mut c_void,
) -> c_int {
    guard(&"kumi_array_read", || {
        const F: &str = "kumi_array_read";
        let a = obj(a, F)?;
        // SAFETY: `out` holds `count` elements of the array's type (kumi.h).
        each!(a, |x: T| x
            .read(start, unsafe { elems_mut::<T>(out, count, F)? }))?;
        Ok(())
    })
}

/// `kumi_array_write` (and `kumi_array_write_sync` with `sync`).
unsafe fn write(
    a: *mut AnyArray,
    start: usize,
    count: usize,
    data: *const c_void,
    sync: bool,
) -> R<()> {
    const F: &str = "kumi_array_write";
    let a = obj(a, F)?;
    each!(a, |x: T| {
        // SAFETY: `data` holds `count` elements of the array's type (kumi.h).
        let d = unsafe { elems::<T>(data, count, F)? };
        if sync {
            x.write_sync(start, d)
        } else {
            x.write(start, d)
        }
    })?;
    Ok(())
}

/// `kumi_array_write`.
#[no_mangle]
pub unsafe extern "C" fn kumi_array_write(
    a: *mut AnyArray,
    start: usize,
    count: usize,
    data: *const c_void,
) -> c_int {
    // SAFETY: forwarded.
    guard(&"kumi_array_write", || unsafe {
        write(a, start, count, data, false)
    })
}

/// `kumi_array_write_sync`.
#[no_mangle]
pub unsafe extern "C" fn kumi_array_write_sync(
    a: *mut AnyArray,
    start: usize,
    count: usize,
    data: *const c_void,
) -> c_int {
    // SAFETY: forwarded.
    guard(&"kumi_array_write_sync", || unsafe {
        write(a, start, count, data, true)
    })
}

/// `kumi_array_fetch_op`.
#[no_mangle]
pub unsafe extern "C" fn kumi_array_fetch_op(
    a: *mut AnyArray,
    i: usize,
    op: c_int,
    value: *const c_void,
    old: *mut c_void,
) -> c_int {
    guard(&"kumi_array_fetch_op", || {
        const F: &str = "kumi_array_fetch_op";
        let a = obj(a, F)?;
        let op = acc_op(op)?;
        need(value, F, "value")?;
        each!(a, |x: T| {
            // SAFETY: `value` points to one element of the array's type.
            let v = unsafe { value.cast::<T>().read_unaligned() };
            let was = x.fetch_op(i, op, v)?;
            if !old.is_null() {
                // SAFETY: `old`, when given, points to one element.
                unsafe { old.cast::<T>().write_unaligned(was) };
            }
        });
        Ok(())
    })
}

/// `kumi_array_cas`.
#[no_mangle]
pub unsafe extern "C" fn kumi_array_cas(
    a: *mut AnyArray,
    i: usize,
    expected: *const c_void,
    desired: *const c_void,
    old: *mut c_void,
) -> c_int {
    guard(&"kumi_array_cas", || {
        const F: &str = "kumi_array_cas";
        let a = obj(a, F)?;
        need(expected, F, "expected")?;
        need(desired, F, "desired")?;
        need(old, F, "old")?;
        each!(a, |x: T| {
            // SAFETY: each points to one element of the array's type.
            let (e, d) = unsafe {
                (
                    expected.cast::<T>().read_unaligned(),
                    desired.cast::<T>().read_unaligned(),
                )
            };
            let was = x.compare_and_swap(i, e, d)?;
            // SAFETY: as above.
            unsafe { old.cast::<T>().write_unaligned(was) };
        });
        Ok(())
    })
}

/// The array calls with no argument but the array.
macro_rules! array_calls {
    ($($name:ident => $method:ident),*) => {$(
        #[doc = concat!("`", stringify!($name), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name(a: *mut AnyArray) -> c_int {
            guard(&stringify!($name), || {
                let a = obj(a, stringify!($name))?;
                each!(a, |x: T| x.$method())?;
                Ok(())
            })
        }
    )*};
}
array_calls!(kumi_array_fence => fence, kumi_array_barrier => barrier);

/// `kumi_array_lock`.
#[no_mangle]
pub unsafe extern "C" fn kumi_array_lock(a: *mut AnyArray, lock: c_uint) -> c_int {
    guard(&"kumi_array_lock", || {
        let a = obj(a, "kumi_array_lock")?;
        each!(a, |x: T| x.lock(lock))?;
        Ok(())
    })
}

/// `kumi_array_unlock`.
#[no_mangle]
pub unsafe extern "C" fn kumi_array_unlock(a: *mut AnyArray, lock: c_uint) -> c_int {
    guard(&"kumi_array_unlock", || {
        let a = obj(a, "kumi_array_unlock")?;
        each!(a, |x: T| x.unlock(lock))?;
        Ok(())
    })
}

/// `kumi_array_local`.
#[no_mangle]
pub unsafe extern "C" fn kumi_array_local(
    a: *mut AnyArray,
    base: *mut *mut c_void,
    count: *mut usize,
) -> c_int {
    guard(&"kumi_array_local", || {
        const F: &str = "kumi_array_local";
        let a = obj(a, F)?;
        need(base, F, "base")?;
        need(count, F, "count")?;
        let (p, n) = each!(a, |x: T| {
            let (p, n) = x.local();
            (p.cast::<c_void>(), n)
        });
        // SAFETY: both checked non-null.
        unsafe {
            *base = p;
            *count = n;
        }
        Ok(())
    })
}

/// `kumi_array_global`.
#[no_mangle]
pub unsafe extern "C" fn kumi_array_global(
    a: *mut AnyArray,
    local: usize,
    global: *mut usize,
) -> c_int {
    guard(&"kumi_array_global", || {
        const F: &str = "kumi_array_global";
        let a = obj(a, F)?;
        need(global, F, "global")?;
        let g = each!(a, |x: T| {
            let me = x.comm().rank();
            if local >= x.layout().local_len(me) {
                return err(
                    MPI_ERR_ARG,
                    format!(
                        "{F}: local index {local} beyond this rank's {} elements",
                        x.layout().local_len(me)
                    ),
                );
            }
            x.layout().global(me, local)
        });
        // SAFETY: checked non-null.
        unsafe { *global = g };
        Ok(())
    })
}

/// `kumi_shared_alloc`.
#[no_mangle]
pub unsafe extern "C" fn kumi_shared_alloc(
    comm_h: c_int,
    bytes: usize,
    out: *mut *mut Shared<u8>,
    base: *mut *mut c_void,
) -> c_int {
    guard(&"kumi_shared_alloc", || {
        const F: &str = "kumi_shared_alloc";
        need(out, F, "the output handle")?;
        need(base, F, "base")?;
        let s = Shared::<u8>::new(&comm(comm_h)?, bytes)?;
        // SAFETY: checked non-null.
        unsafe { *base = s.as_ptr().cast() };
        put(out, s, F)
    })
}

/// `kumi_shared_free`.
#[no_mangle]
pub unsafe extern "C" fn kumi_shared_free(s: *mut *mut Shared<u8>) -> c_int {
    guard(&"kumi_shared_free", || {
        Ok(take(s, "kumi_shared_free")?.free()?)
    })
}

/// `kumi_shared_lock`.
#[no_mangle]
pub unsafe extern "C" fn kumi_shared_lock(s: *mut Shared<u8>, lock: c_uint) -> c_int {
    guard(&"kumi_shared_lock", || {
        Ok(obj(s, "kumi_shared_lock")?.lock(lock)?)
    })
}

/// `kumi_shared_unlock`.
#[no_mangle]
pub unsafe extern "C" fn kumi_shared_unlock(s: *mut Shared<u8>, lock: c_uint) -> c_int {
    guard(&"kumi_shared_unlock", || {
        Ok(obj(s, "kumi_shared_unlock")?.unlock(lock)?)
    })
}

/// `kumi_shared_barrier`.
#[no_mangle]
pub unsafe extern "C" fn kumi_shared_barrier(s: *mut Shared<u8>) -> c_int {
    guard(&"kumi_shared_barrier", || {
        Ok(obj(s, "kumi_shared_barrier")?.barrier()?)
    })
}

/// `kumi_tasks_create`.
#[no_mangle]
pub unsafe extern "C" fn kumi_tasks_create(
    comm_h: c_int,
    item_bytes: usize,
    out: *mut *mut RawTaskQueue,
) -> c_int {
    guard(&"kumi_tasks_create", || {
        let q = RawTaskQueue::new(&comm(comm_h)?, item_bytes)?;
        put(out, q, "kumi_tasks_create")
    })
}

/// `kumi_tasks_push`.
#[no_mangle]
pub unsafe extern "C" fn kumi_tasks_push(q: *mut RawTaskQueue, item: *const c_void) -> c_int {
    guard(&"kumi_tasks_push", || {
        const F: &str = "kumi_tasks_push";
        let q = obj(q, F)?;
        // SAFETY: `item` holds one item of the queue's size (kumi.h).
        let item = unsafe { elems::<u8>(item, q.item_bytes(), F)? };
        Ok(q.push(item)?)
    })
}

/// `kumi_tasks_pop`.
#[no_mangle]
pub unsafe extern "C" fn kumi_tasks_pop(
    q: *mut RawTaskQueue,
    item: *mut c_void,
    got: *mut c_int,
) -> c_int {
    guard(&"kumi_tasks_pop", || {
        const F: &str = "kumi_tasks_pop";
        let q = obj(q, F)?;
        need(got, F, "got")?;
        // SAFETY: `item` has room for one item of the queue's size (kumi.h).
        let item = unsafe { elems_mut::<u8>(item, q.item_bytes(), F)? };
        let g = q.pop(item)?;
        // SAFETY: checked non-null.
        unsafe { *got = c_int::from(g) };
        Ok(())
    })
}

/// `kumi_tasks_free`.
#[no_mangle]
pub unsafe extern "C" fn kumi_tasks_free(q: *mut *mut RawTaskQueue) -> c_int {
    guard(&"kumi_tasks_free", || {
        let q = take(q, "kumi_tasks_free")?;
        q.comm().barrier()?;
        Ok(())
    })
}
