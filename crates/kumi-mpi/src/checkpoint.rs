//! `kumi.h`'s checkpoint calls: the registered state of a C program, saved
//! and read back through `kumi::checkpoint` (which does the coordination,
//! storage and verification; nothing of it is here).
//!
//! The registry is taken out of the state for the length of a save or a
//! restore, so the library's state is not borrowed while the program's
//! callbacks run (a callback must still not call MPI: the call in progress
//! holds the library).

use crate::consts::*;
use crate::state::st;
use crate::{err, guard, R};
use kumi::checkpoint::{Checkpoints, Reader, Writer};
use std::ffi::{c_int, c_void};
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A callback of `kumi_ckpt_register_io`.
type StreamFn = unsafe extern "C" fn(*mut Stream, *mut c_void) -> c_int;

enum Item {
    /// Bytes at an address the program keeps valid.
    Region(*mut u8, usize),
    /// Write and read callbacks, with their argument.
    Io(StreamFn, StreamFn, *mut c_void),
}

/// The program's registered state and the job's checkpoints.
pub(crate) struct Registry {
    items: Vec<Item>,
    ckpt: Checkpoints,
    epoch: u64,
}

/// `kumi_ckpt_stream`: the part a callback writes into or reads from, and
/// the first error it met (reported with the callback's failure).
pub struct Stream<'a> {
    writer: Option<&'a mut Writer>,
    reader: Option<&'a mut Reader>,
    error: Option<io::Error>,
}

/// Runs `f` on the registry, created on first use, out of the state.
fn with_registry<T>(f: impl FnOnce(&mut Registry) -> R<T>) -> R<T> {
    let mut reg = {
        let mut s = st()?;
        match s.ckpt.take() {
            Some(r) => r,
            None => Box::new(Registry {
                items: Vec::new(),
                ckpt: s.universe.checkpoints(),
                epoch: 0,
            }),
        }
    };
    let out = f(&mut reg);
    st()?.ckpt = Some(reg);
    out
}

fn run_callback(f: StreamFn, arg: *mut c_void, mut stream: Stream, what: &str) -> io::Result<()> {
    // SAFETY: `f` is the program's callback, registered with this argument
    // for this purpose; the stream outlives the call.
    let rc = unsafe { f(&mut stream, arg) };
    match (rc, stream.error) {
        (0, None) => Ok(()),
        (_, Some(e)) => Err(e),
        (rc, None) => Err(io::Error::other(format!(
            "the program's {what} callback returned {rc}"
        ))),
    }
}

/// `kumi_ckpt_register`.
#[no_mangle]
pub unsafe extern "C" fn kumi_ckpt_register(base: *mut c_void, bytes: usize) -> c_int {
    guard(&"kumi_ckpt_register", || {
        if base.is_null() && bytes > 0 {
            return err(MPI_ERR_BUFFER, "kumi_ckpt_register: base is NULL");
        }
        with_registry(|r| {
            r.items.push(Item::Region(base.cast(), bytes));
            Ok(())
        })
    })
}

/// `kumi_ckpt_register_io`.
#[no_mangle]
pub unsafe extern "C" fn kumi_ckpt_register_io(
    write: Option<StreamFn>,
    read: Option<StreamFn>,
    arg: *mut c_void,
) -> c_int {
    guard(&"kumi_ckpt_register_io", || {
        let (Some(w), Some(rd)) = (write, read) else {
            return err(
                MPI_ERR_ARG,
                "kumi_ckpt_register_io: both callbacks are needed",
            );
        };
        with_registry(|r| {
            r.items.push(Item::Io(w, rd, arg));
            Ok(())
        })
    })
}

/// Runs `f` on a stream pointer from a callback, with no access to the
/// library's state (the callback runs inside a kumi call).
unsafe fn on_stream(s: *mut Stream, f: impl FnOnce(&mut Stream) -> io::Result<()>) -> c_int {
    if s.is_null() {
        return MPI_ERR_ARG;
    }
    // SAFETY: a non-null stream is the one kumi passed to the callback that
    // calls this, alive for the callback's length (the C contract).
    let s = unsafe { &mut *s };
    match catch_unwind(AssertUnwindSafe(|| f(s))) {
        Ok(Ok(())) => MPI_SUCCESS,
        Ok(Err(e)) => {
            s.error.get_or_insert(e);
            MPI_ERR_OTHER
        }
        Err(_) => MPI_ERR_INTERN,
    }
}

/// `kumi_ckpt_write`.
#[no_mangle]
pub unsafe extern "C" fn kumi_ckpt_write(
    s: *mut Stream,
    data: *const c_void,
    bytes: usize,
) -> c_int {
    // SAFETY: forwarded contract; `data` holds `bytes` bytes (the caller's promise).
    unsafe {
        on_stream(s, |s| match (&mut s.writer, data.is_null() && bytes > 0) {
            (Some(w), false) => w.write(bytes_of(data.cast(), bytes)),
            (None, _) => Err(io::Error::other("kumi_ckpt_write from a read callback")),
            (_, true) => Err(io::Error::other("kumi_ckpt_write: data is NULL")),
        })
    }
}

/// `kumi_ckpt_read`.
#[no_mangle]
pub unsafe extern "C" fn kumi_ckpt_read(s: *mut Stream, data: *mut c_void, bytes: usize) -> c_int {
    // SAFETY: forwarded contract; `data` has room for `bytes` bytes.
    unsafe {
        on_stream(s, |s| match (&mut s.reader, data.is_null() && bytes > 0) {
            (Some(r), false) => r.read(bytes_of_mut(data.cast(), bytes)),
            (None, _) => Err(io::Error::other("kumi_ckpt_read from a write callback")),
            (_, true) => Err(io::Error::other("kumi_ckpt_read: data is NULL")),
        })
    }
}

/// # Safety
/// `p` points to `n` readable bytes (or `n` is 0).
unsafe fn bytes_of<'a>(p: *const u8, n: usize) -> &'a [u8] {
    if n == 0 {
        return &[];
    }
    // SAFETY: the caller's promise.
    unsafe { std::slice::from_raw_parts(p, n) }
}

/// # Safety
/// `p` points to `n` writable bytes no one else uses now (or `n` is 0).
unsafe fn bytes_of_mut<'a>(p: *mut u8, n: usize) -> &'a mut [u8] {
    if n == 0 {
        return &mut [];
    }
    // SAFETY: the caller's promise.
    unsafe { std::slice::from_raw_parts_mut(p, n) }
}

/// `kumi_ckpt_due`.
#[no_mangle]
pub unsafe extern "C" fn kumi_ckpt_due(flag: *mut c_int) -> c_int {
    guard(&"kumi_ckpt_due", || {
        if flag.is_null() {
            return err(MPI_ERR_ARG, "kumi_ckpt_due: flag is NULL");
        }
        let due = with_registry(|r| Ok(r.ckpt.due()?))?;
        // SAFETY: checked non-null; the program's int.
        unsafe { *flag = c_int::from(due) };
        Ok(())
    })
}

/// `kumi_ckpt_save`.
#[no_mangle]
pub unsafe extern "C" fn kumi_ckpt_save() -> c_int {
    guard(&"kumi_ckpt_save", || {
        with_registry(|r| {
            let Registry { items, ckpt, epoch } = r;
            let saved = ckpt.save(|w| {
                for item in items.iter() {
                    match *item {
                        // SAFETY: registered by the program, which keeps it valid.
                        Item::Region(p, n) => w.write(unsafe { bytes_of(p, n) })?,
                        Item::Io(f, _, arg) => {
                            let s = Stream {
                                writer: Some(&mut *w),
                                reader: None,
                                error: None,
                            };
                            run_callback(f, arg, s, "write")?
                        }
                    }
                }
                Ok(())
            })?;
            *epoch = saved.unwrap_or(*epoch);
            Ok(())
        })
    })
}

/// `kumi_ckpt_restarting`.
#[no_mangle]
pub unsafe extern "C" fn kumi_ckpt_restarting(flag: *mut c_int) -> c_int {
    guard(&"kumi_ckpt_restarting", || {
        if flag.is_null() {
            return err(MPI_ERR_ARG, "kumi_ckpt_restarting: flag is NULL");
        }
        let yes = with_registry(|r| Ok(r.ckpt.restarting()))?;
        // SAFETY: checked non-null; the program's int.
        unsafe { *flag = c_int::from(yes) };
        Ok(())
    })
}

/// `kumi_ckpt_restore`.
#[no_mangle]
pub unsafe extern "C" fn kumi_ckpt_restore(restored: *mut c_int) -> c_int {
    guard(&"kumi_ckpt_restore", || {
        let got = with_registry(|r| {
            let Registry { items, ckpt, epoch } = r;
            let got = ckpt.restore(|rd| {
                for item in items.iter() {
                    match *item {
                        // SAFETY: registered by the program, which keeps it
                        // valid and does not touch it during the call.
                        Item::Region(p, n) => rd.read(unsafe { bytes_of_mut(p, n) })?,
                        Item::Io(_, f, arg) => {
                            let s = Stream {
                                writer: None,
                                reader: Some(&mut *rd),
                                error: None,
                            };
                            run_callback(f, arg, s, "read")?
                        }
                    }
                }
                Ok(())
            })?;
            if let Some(e) = got {
                *epoch = e;
            }
            Ok(got.is_some())
        })?;
        if !restored.is_null() {
            // SAFETY: checked non-null; the program's int.
            unsafe { *restored = c_int::from(got) };
        }
        Ok(())
    })
}

/// `kumi_ckpt_epoch`.
#[no_mangle]
pub unsafe extern "C" fn kumi_ckpt_epoch(epoch: *mut i64) -> c_int {
    guard(&"kumi_ckpt_epoch", || {
        if epoch.is_null() {
            return err(MPI_ERR_ARG, "kumi_ckpt_epoch: epoch is NULL");
        }
        let e = with_registry(|r| Ok(r.epoch))?;
        // SAFETY: checked non-null; the program's long long.
        unsafe { *epoch = e as i64 };
        Ok(())
    })
}
