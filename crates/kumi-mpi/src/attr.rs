//! Attribute caching (MPI 4.1 section 7.7): keyvals, and the attributes
//! of communicators, windows and datatypes, with one mechanism for all
//! three ([`AttrTable`] finds an object's table). Callbacks run outside the
//! state's borrow (they may call MPI); a delete callback that fails leaves
//! its attribute in place, and a keyval the program frees goes only when
//! no object holds an attribute of it any more ([`collect_keyval`]).
//! The communicator calls are here; the window and datatype ones sit with
//! their objects (`win.rs`, `types.rs`) and call the same functions.

use crate::consts::*;
use crate::state::{out, read, st, Attrs, CopyFn, DeleteFn, Keyval, KeyvalFns, State};
use crate::{err, R};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicI32, Ordering};

/// Finds an object's attribute table in the state: a communicator's
/// ([`comm_attrs`]), a window's or a datatype's.
pub(crate) type AttrTable = fn(&mut State, c_int) -> R<&mut Attrs>;

/// A communicator's attributes.
pub(crate) fn comm_attrs(s: &mut State, h: c_int) -> R<&mut Attrs> {
    Ok(&mut s.comm_entry(h)?.attrs)
}

/// Sets (`new`: `Some`) or deletes (`None`) the attribute of `keyval` on
/// object `h` (a `what`, for errors). The old value's delete callback runs
/// first, outside the state (it may call MPI); if it fails, the old value
/// stays, nothing changes and the call fails with the callback's code (MPI
/// makes such a call erroneous; MPICH keeps the attribute, and programs
/// test that it does).
pub(crate) fn replace_attr(
    h: c_int,
    keyval: c_int,
    new: Option<*mut c_void>,
    table: AttrTable,
    what: &str,
) -> R<()> {
    let old = table(&mut *st()?, h)?.remove(&keyval);
    match old {
        Some(o) => {
            if let Err(e) = call_delete(h, keyval, o) {
                table(&mut *st()?, h)?.insert(keyval, o);
                return Err(e);
            }
        }
        None if new.is_none() => {
            return err(
                MPI_ERR_KEYVAL,
                format!("no attribute with keyval {keyval:#x} on this {what}"),
            )
        }
        None => {}
    }
    if let Some(v) = new {
        table(&mut *st()?, h)?.insert(keyval, v);
    }
    Ok(())
}

/// Runs the delete callbacks of every attribute of object `h`, which is
/// being freed (outside the state borrow: a callback may call MPI), the
/// last set first. If one fails, it and those not yet deleted stay, and
/// the free fails with its code.
pub(crate) fn delete_all_attrs(h: c_int, table: AttrTable) -> R<()> {
    let attrs = table(&mut *st()?, h)?.take_all();
    for (i, &(k, v)) in attrs.iter().enumerate() {
        if let Err(e) = call_delete(h, k, v) {
            let mut s = st()?;
            let t = table(&mut s, h)?;
            // Back in the order they were set.
            for &(k, v) in attrs[i..].iter().rev() {
                t.insert(k, v);
            }
            return Err(e);
        }
    }
    Ok(())
}

/// Runs the delete callback of an attribute of `keyval` (already removed
/// from object `comm`) with its value; a freed keyval may go with it.
pub(crate) fn call_delete(comm: c_int, keyval: c_int, val: *mut c_void) -> R<()> {
    let Some((fns, extra)) = st()?.keyvals.get(&keyval).map(|k| (k.fns, k.extra)) else {
        return Ok(());
    };
    // SAFETY: the program registered the callbacks as what `fns` says.
    let done = unsafe { fns.delete(comm, keyval, extra, val) };
    if let Err(rc) = done {
        // The caller puts the attribute back: the keyval stays in use.
        return err(
            rc,
            format!("the attribute delete callback of keyval {keyval:#x} returned {rc}"),
        );
    }
    collect_keyval(&mut *st()?, keyval);
    Ok(())
}

/// Copies the attributes of `from` onto `to` through their copy callbacks.
pub(crate) fn copy_attrs(from: c_int, to: c_int) -> R<()> {
    let list: Vec<(c_int, *mut c_void)> = st()?
        .comm_entry(from)?
        .attrs
        .iter()
        .map(|(&k, &v)| (k, v))
        .collect();
    for (k, v) in copied_attrs(from, list)? {
        st()?.comm_entry(to)?.attrs.insert(k, v);
    }
    Ok(())
}

/// What the copy callbacks of `attrs` (attributes of object `from`, a
/// communicator or a datatype: the callbacks have the same shape) give the
/// object's copy; callbacks run outside the state borrow (they may call MPI).
pub(crate) fn copied_attrs(
    from: c_int,
    attrs: Vec<(c_int, *mut c_void)>,
) -> R<Vec<(c_int, *mut c_void)>> {
    let attrs: Vec<(c_int, *mut c_void, Option<Keyval>)> = {
        let s = st()?;
        attrs
            .into_iter()
            .map(|(k, v)| (k, v, s.keyvals.get(&k).copied()))
            .collect()
    };
    let mut out = Vec::new();
    for (k, v, kv) in attrs {
        let Some(kv) = kv else { continue };
        // SAFETY: the program registered the callbacks as what `kv.fns`
        // says (a communicator's and a datatype's have the same shape).
        match unsafe { kv.fns.copy(from, k, kv.extra, v) } {
            Ok(Some(new)) => out.push((k, new)),
            Ok(None) => {}
            Err(rc) => {
                // The copy fails as a whole: the values already copied go to
                // their delete callbacks (with the object they were copied
                // from: the copy has none yet).
                for (k, v) in out {
                    let _ = call_delete(from, k, v);
                }
                return err(
                    rc,
                    format!("the attribute copy callback of keyval {k:#x} returned {rc}"),
                );
            }
        }
    }
    Ok(out)
}

/// Values of the predefined attributes; the C binding returns pointers to them.
/// Written once at each `MPI_Comm_get_attr` before the pointer is handed out;
/// only the init thread reads them (Relaxed: no other data is published).
static TAG_UB_V: AtomicI32 = AtomicI32::new(kumi::TAG_UB);
static HOST_V: AtomicI32 = AtomicI32::new(MPI_PROC_NULL);
static IO_V: AtomicI32 = AtomicI32::new(MPI_ANY_SOURCE);
static WTIME_GLOBAL_V: AtomicI32 = AtomicI32::new(0);
static UNIVERSE_V: AtomicI32 = AtomicI32::new(1);
static APPNUM_V: AtomicI32 = AtomicI32::new(0);
/// `MPI_LASTUSEDCODE`: the standard makes it at least `MPI_ERR_LASTCODE`,
/// so the program's classes and codes come after that (as MPICH's, whose
/// dynamic codes have bit 30 set).
pub(crate) static LASTCODE_V: AtomicI32 = AtomicI32::new(MPI_ERR_LASTCODE);

fn get_attr(comm: c_int, keyval: c_int, val: *mut c_void, flag: *mut c_int) -> R<()> {
    let mut s = st()?;
    let size = s.comm(MPI_COMM_WORLD)?.size() as i32;
    let appnum = s.universe.appnum() as i32;
    let e = s.comm_entry(comm)?;
    let builtin: Option<&AtomicI32> = match keyval {
        MPI_TAG_UB => Some(&TAG_UB_V),
        MPI_HOST => Some(&HOST_V),
        MPI_IO => Some(&IO_V),
        MPI_WTIME_IS_GLOBAL => Some(&WTIME_GLOBAL_V),
        MPI_UNIVERSE_SIZE => {
            UNIVERSE_V.store(size, Ordering::Relaxed);
            Some(&UNIVERSE_V)
        }
        MPI_APPNUM => {
            APPNUM_V.store(appnum, Ordering::Relaxed);
            Some(&APPNUM_V)
        }
        MPI_LASTUSEDCODE => Some(&LASTCODE_V),
        _ => None,
    };
    let v = match builtin {
        // AtomicI32 has the layout of an int: C reads it through the pointer.
        Some(a) => Some(a.as_ptr() as *mut c_void),
        None => e.attrs.get(&keyval).copied(),
    };
    if builtin.is_none() && !s.keyvals.contains_key(&keyval) {
        return err(MPI_ERR_KEYVAL, format!("{keyval:#x} is not a keyval"));
    }
    drop(s);
    match v {
        Some(v) => {
            out(val as *mut *mut c_void, "attribute_val", v)?;
            out(flag, "flag", 1)
        }
        None => out(flag, "flag", 0),
    }
}

fn set_attr(comm: c_int, keyval: c_int, val: *mut c_void) -> R<()> {
    known_keyval(keyval)?;
    replace_attr(comm, keyval, Some(val), comm_attrs, "communicator")
}

/// Checks that the program created keyval `k` (and it is still in use).
pub(crate) fn known_keyval(k: c_int) -> R<()> {
    if !st()?.keyvals.contains_key(&k) {
        return err(
            MPI_ERR_KEYVAL,
            format!("{k:#x} is not a keyval the program created"),
        );
    }
    Ok(())
}

fn delete_attr(comm: c_int, keyval: c_int) -> R<()> {
    replace_attr(comm, keyval, None, comm_attrs, "communicator")
}

pub(crate) fn create_keyval(fns: KeyvalFns, keyval: *mut c_int, extra: *mut c_void) -> R<()> {
    let mut s = st()?;
    let h = s.fresh(NEW_KEYVAL);
    s.keyvals.insert(
        h,
        Keyval {
            fns,
            extra,
            freed: false,
        },
    );
    drop(s);
    out(keyval, "keyval", h)
}

/// `MPI_*_free_keyval`: the program gives the keyval up; it goes once no
/// attribute uses it ([`collect_keyval`]).
pub(crate) fn free_keyval(keyval: *mut c_int) -> R<()> {
    let k = read(keyval, "keyval")?;
    {
        let mut s = st()?;
        match s.keyvals.get_mut(&k) {
            // Freed again while attributes still use it (a delete callback
            // that frees its keyval, then the program): the keyval is
            // already on its way out, as MPICH takes it.
            Some(kv) => kv.freed = true,
            None => {
                return err(
                    MPI_ERR_KEYVAL,
                    format!("{k:#x} is not a keyval the program created (or it was freed)"),
                )
            }
        }
        collect_keyval(&mut s, k);
    }
    out(keyval, "keyval", MPI_KEYVAL_INVALID)
}

/// Drops keyval `k` if the program freed it and no communicator, window or
/// datatype holds an attribute of it any more.
fn collect_keyval(s: &mut State, k: c_int) {
    if !s.keyvals.get(&k).is_some_and(|kv| kv.freed) {
        return;
    }
    let used = s.comms.iter().any(|(_, c)| c.attrs.contains_key(&k))
        || s.wins.values().any(|w| w.attrs.contains_key(&k))
        || s.type_attrs.values().any(|a| a.contains_key(&k));
    if !used {
        s.keyvals.remove(&k);
    }
}

/// `MPIR_Dup_fn` (behind `MPI_COMM_DUP_FN`): copies the attribute value.
#[no_mangle]
pub unsafe extern "C" fn MPIR_Dup_fn(
    _oldcomm: c_int,
    _keyval: c_int,
    _extra: *mut c_void,
    attr_in: *mut c_void,
    attr_out: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    if attr_out.is_null() || flag.is_null() {
        return MPI_ERR_ARG;
    }
    // SAFETY: the runtime calls copy callbacks with attr_out pointing to a void*
    // and flag to an int (see `copy_attrs`), as does the standard.
    unsafe {
        *(attr_out as *mut *mut c_void) = attr_in;
        *flag = 1;
    }
    MPI_SUCCESS
}

mpi! {
    fn MPI_Comm_create_keyval / PMPI_Comm_create_keyval(copy_fn: Option<CopyFn>, delete_fn: Option<DeleteFn>, keyval: *mut c_int, extra_state: *mut c_void) {
        create_keyval(KeyvalFns::C(copy_fn, delete_fn), keyval, extra_state)
    }

    fn MPI_Keyval_create / PMPI_Keyval_create(copy_fn: Option<CopyFn>, delete_fn: Option<DeleteFn>, keyval: *mut c_int, extra_state: *mut c_void) {
        create_keyval(KeyvalFns::C(copy_fn, delete_fn), keyval, extra_state)
    }

    fn MPI_Comm_free_keyval / PMPI_Comm_free_keyval(keyval: *mut c_int) {
        free_keyval(keyval)
    }

    fn MPI_Keyval_free / PMPI_Keyval_free(keyval: *mut c_int) {
        free_keyval(keyval)
    }

    fn MPI_Comm_get_attr / PMPI_Comm_get_attr(comm: c_int, keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) {
        get_attr(comm, keyval, attribute_val, flag)
    }

    fn MPI_Attr_get / PMPI_Attr_get(comm: c_int, keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) {
        get_attr(comm, keyval, attribute_val, flag)
    }

    fn MPI_Comm_set_attr / PMPI_Comm_set_attr(comm: c_int, keyval: c_int, attribute_val: *mut c_void) {
        set_attr(comm, keyval, attribute_val)
    }

    fn MPI_Attr_put / PMPI_Attr_put(comm: c_int, keyval: c_int, attribute_val: *mut c_void) {
        set_attr(comm, keyval, attribute_val)
    }

    fn MPI_Comm_delete_attr / PMPI_Comm_delete_attr(comm: c_int, keyval: c_int) {
        delete_attr(comm, keyval)
    }

    fn MPI_Attr_delete / PMPI_Attr_delete(comm: c_int, keyval: c_int) {
        delete_attr(comm, keyval)
    }
}
