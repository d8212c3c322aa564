//! One-sided communication (`MPI_Win_*`, `MPI_Put`, `MPI_Get`,
//! `MPI_Accumulate`...) on shared-memory windows: handles onto
//! [`kumi::win::Window`].
//!
//! What kumi has so far: windows on a communicator of one host (the unified
//! memory model), in memory every rank maps (`MPI_Win_allocate_shared`,
//! `MPI_Win_allocate`) or over each rank's own memory (`MPI_Win_create`,
//! reached by cross-memory attach); fences, passive-target locks, flushes,
//! `MPI_Win_sync`, general active-target synchronization (post, start,
//! complete, wait, test); puts, gets, accumulates with the predefined
//! operations on the predefined numeric types, fetch-and-op and
//! compare-and-swap. Dynamic windows and windows across hosts are not
//! there yet (they fail naming themselves). A window's errors go to its handler, `MPI_ERRORS_ARE_FATAL`
//! unless set otherwise.

use crate::coll::{builtin, count_of, Entry};
use crate::consts::*;
use crate::state::{out, out_str, read, st, ReqEntry, State, TypeArg};
use crate::{err, set_err_comm, MpiErr, R};
use kumi::datatype::{Datatype, MAX_RUNS};
use kumi::raw::RawRequest;
use kumi::win::{AccOp, Elem, Window};
use kumi::{Builtin, Status};
use std::ffi::{c_char, c_int, c_void};
use std::ops::ControlFlow;
use std::rc::Rc;

/// Handles of windows: MPICH's window kind, indirect, plus an index.
const NEW_WIN: c_int = 0xa000_0000u32 as c_int;
const MPI_WIN_BASE: c_int = 0x6600_0001;
const MPI_WIN_SIZE: c_int = 0x6600_0003;
const MPI_WIN_DISP_UNIT: c_int = 0x6600_0005;
const MPI_WIN_CREATE_FLAVOR: c_int = 0x6600_0007;
const MPI_WIN_MODEL: c_int = 0x6600_0009;
const MPI_WIN_FLAVOR_CREATE: c_int = 1;
const MPI_WIN_FLAVOR_ALLOCATE: c_int = 2;
const MPI_WIN_FLAVOR_DYNAMIC: c_int = 3;
const MPI_WIN_FLAVOR_SHARED: c_int = 4;
const MPI_WIN_UNIFIED: c_int = 2;
const MPI_LOCK_EXCLUSIVE: c_int = 234;
const MPI_LOCK_SHARED: c_int = 235;
const MPI_ERR_WIN: c_int = 45;
const MPI_ERR_RMA_SYNC: c_int = 50;
const MPI_ERR_LOCKTYPE: c_int = 47;
const TAG_POST: i32 = 1;
const TAG_DONE: i32 = 2;

/// A window in the state's table.
pub(crate) struct WinEntry {
    win: Rc<Window>,
    pub errh: c_int,
    name: String,
    /// The attribute values, where `MPI_Win_get_attr` points.
    size: Box<isize>,
    disp_unit: Box<c_int>,
    flavor: Box<c_int>,
    model: Box<c_int>,
    /// The program's attributes (`MPI_Win_set_attr`).
    pub(crate) attrs: crate::state::Attrs,
    /// Passive-target locks this rank holds: (rank, exclusive).
    locks: Vec<(usize, bool)>,
    /// Ranks (of the window) of the current exposure and access epochs.
    posted: Option<Vec<usize>>,
    started: Option<Vec<usize>>,
}

/// The window index an error target names (see `crate::set_err_comm`).
pub(crate) fn err_target(target: c_int) -> bool {
    target & !0x03ff_ffff == NEW_WIN
}

/// A window's attributes.
fn win_attrs(s: &mut State, h: c_int) -> R<&mut crate::state::Attrs> {
    Ok(&mut entry(s, h)?.attrs)
}

fn entry(s: &mut State, h: c_int) -> R<&mut WinEntry> {
    if s.wins.contains_key(&h) {
        set_err_comm(h);
        return Ok(s.wins.get_mut(&h).expect("checked"));
    }
    match h {
        MPI_WIN_NULL => err(MPI_ERR_WIN, "the window is MPI_WIN_NULL"),
        _ => err(
            MPI_ERR_WIN,
            format!("{h:#x} is not a window (or it was freed)"),
        ),
    }
}

fn win(h: c_int) -> R<Rc<Window>> {
    Ok(entry(&mut *st()?, h)?.win.clone())
}

/// `MPI_Win_sync` and the flushes: accesses within a host are complete at
/// return, so ordering memory is what is left; those to other hosts are
/// complete once acknowledged, which this waits for.
fn sync(h: c_int) -> R<()> {
    Ok(win(h)?.sync()?)
}

const MPI_WIN_NULL: c_int = 0x2000_0000;

/// `MPI_Win_allocate(_shared)`: the window, its handle, its base.
fn allocate(
    size: isize,
    disp_unit: c_int,
    info: c_int,
    comm: c_int,
    baseptr: *mut c_void,
    win_out: *mut c_int,
    flavor: c_int,
) -> R<()> {
    let c = {
        let mut s = st()?;
        crate::info::check(info)?;
        s.intra(comm)?
    };
    if size < 0 {
        return err(MPI_ERR_ARG, format!("size {size} is negative"));
    }
    if disp_unit <= 0 {
        return err(
            MPI_ERR_ARG,
            format!("disp_unit {disp_unit} is not positive"),
        );
    }
    if baseptr.is_null() || win_out.is_null() {
        return err(MPI_ERR_ARG, "baseptr or win is NULL");
    }
    let w = if flavor == MPI_WIN_FLAVOR_SHARED {
        Window::allocate_shared(&c, size as usize, disp_unit as usize).map_err(one_host_err)?
    } else {
        Window::allocate(&c, size as usize, disp_unit as usize)?
    };
    register(w, c.rank(), size, disp_unit, flavor, baseptr, win_out)
}

/// A window's creation refused because its ranks are not on one host.
fn one_host_err(e: kumi::Error) -> MpiErr {
    match e {
        kumi::Error::InvalidArgument { arg: "comm", .. } => MpiErr {
            class: 57, // MPI_ERR_RMA_SHARED
            msg: format!("{e} (a shared-memory window needs every rank on one host; MPI_Win_allocate and MPI_Win_create work across hosts)"),
        },
        e => e.into(),
    }
}

/// `MPI_Win_attach`/`detach` on a window that is not dynamic is
/// `MPI_ERR_RMA_FLAVOR`; a region that cannot be attached (or detached),
/// `MPI_ERR_RMA_ATTACH`.
fn dynamic_err(e: kumi::Error) -> MpiErr {
    let class = match e {
        kumi::Error::InvalidArgument { arg: "win", .. } => 58, // MPI_ERR_RMA_FLAVOR
        kumi::Error::InvalidArgument { arg: "base", .. } => 56, // MPI_ERR_RMA_ATTACH
        e => return e.into(),
    };
    MpiErr {
        class,
        msg: e.to_string(),
    }
}

/// Enters a new window in the table; its base (this rank's part) to `baseptr`
/// if given.
fn register(
    w: Window,
    me: usize,
    size: isize,
    disp_unit: c_int,
    flavor: c_int,
    baseptr: *mut c_void,
    win_out: *mut c_int,
) -> R<()> {
    let base = w.part(me).expect("own part").0;
    let mut s = st()?;
    let h = s.fresh(NEW_WIN);
    s.wins.insert(
        h,
        WinEntry {
            win: Rc::new(w),
            errh: MPI_ERRORS_ARE_FATAL,
            name: String::new(),
            size: Box::new(size),
            disp_unit: Box::new(disp_unit),
            flavor: Box::new(flavor),
            model: Box::new(MPI_WIN_UNIFIED),
            attrs: Default::default(),
            locks: Vec::new(),
            posted: None,
            started: None,
        },
    );
    drop(s);
    if !baseptr.is_null() {
        out(baseptr as *mut *mut c_void, "baseptr", base as *mut c_void)?;
    }
    out(win_out, "win", h)
}

/// The origin buffer as bytes: `n` elements of `dt` at `buf`, packed.
fn origin_bytes<E: Entry>(buf: *const c_void, n: E, dt: c_int) -> R<(Vec<u8>, Datatype)> {
    let d = st()?.dtype(dt)?;
    let n = count_of(n)?;
    // NULL is MPI_BOTTOM, fine with a type of absolute addresses.
    crate::p2p::check_buf(buf, n, &d)?;
    let mut v = vec![0u8; d.packed_size(n)];
    if !v.is_empty() {
        // SAFETY: the program passes `n` elements of `dt` at `buf`.
        unsafe { d.pack(buf as *const u8, n, &mut v) };
    }
    Ok((v, d))
}

/// The target side of an access: the byte extents (offset in the target's
/// part, length) that `n` elements of `dt` at displacement `disp` cover.
fn target_extents<E: Entry>(
    w: &Window,
    rank: c_int,
    disp: isize,
    n: E,
    dt: c_int,
) -> R<(usize, Vec<(u64, usize)>)> {
    let r = usize::try_from(rank)
        .or_else(|_| err(MPI_ERR_RANK, format!("target rank {rank} is not a rank")))?;
    let base = w.offset(r, disp as i64)?;
    let d = st()?.dtype(dt)?;
    let n = count_of(n)?;
    let mut out: Vec<(u64, usize)> = Vec::new();
    let mut below = false;
    let walked = d.walk(n, |o, l| {
        let off = base as i64 + o as i64;
        below = off < 0;
        // Runs that touch make one access (a count of a contiguous type
        // is one copy, or one frame to another host, not one per element).
        if below {
            return ControlFlow::Break(());
        }
        let full = out.len() == MAX_RUNS;
        match out.last_mut() {
            Some((o, len)) if *o + *len as u64 == off as u64 => *len += l,
            _ if full => return ControlFlow::Break(()),
            _ => out.push((off as u64, l)),
        }
        ControlFlow::Continue(())
    });
    if below {
        return err(
            MPI_ERR_ARG,
            "the target datatype reaches below the target's window",
        );
    }
    if walked.is_break() {
        return err(
            MPI_ERR_TYPE,
            format!(
                "{n} elements of the target datatype are more than {MAX_RUNS} separate accesses"
            ),
        );
    }
    Ok((r, out))
}

#[allow(clippy::too_many_arguments)]
fn put_op<E: Entry>(
    o: *const c_void,
    on: E,
    odt: c_int,
    rank: c_int,
    disp: isize,
    tn: E,
    tdt: c_int,
    h: c_int,
) -> R<()> {
    let w = win(h)?;
    if rank == MPI_PROC_NULL {
        // The standard: an access to MPI_PROC_NULL does nothing.
        return Ok(());
    }
    let (data, _) = origin_bytes(o, on, odt)?;
    let (r, ext) = target_extents(&w, rank, disp, tn, tdt)?;
    same_length(data.len(), &ext)?;
    Ok(w.put_scattered(r, &ext, &data)?)
}

#[allow(clippy::too_many_arguments)]
fn get_op<E: Entry>(
    o: *mut c_void,
    on: E,
    odt: c_int,
    rank: c_int,
    disp: isize,
    tn: E,
    tdt: c_int,
    h: c_int,
) -> R<()> {
    let w = win(h)?;
    if rank == MPI_PROC_NULL {
        return Ok(());
    }
    let d = st()?.dtype(odt)?;
    let n = count_of(on)?;
    let (r, ext) = target_extents(&w, rank, disp, tn, tdt)?;
    crate::p2p::check_buf(o, n, &d)?;
    let mut data = vec![0u8; d.packed_size(n)];
    same_length(data.len(), &ext)?;
    w.get_scattered(r, &ext, &mut data)?;
    if !data.is_empty() {
        // SAFETY: the program passes room for `on` elements of `odt` at `o`.
        unsafe { d.unpack(&data, o as *mut u8, n) };
    }
    Ok(())
}

/// Checks that the origin's `origin` packed bytes fill the target extents.
fn same_length(origin: usize, ext: &[(u64, usize)]) -> R<()> {
    let t: usize = ext.iter().map(|e| e.1).sum();
    if t != origin {
        return err(
            MPI_ERR_TYPE,
            format!("the origin holds {origin} bytes but the target layout {t}"),
        );
    }
    Ok(())
}

/// The predefined type `dt` is made of: itself, or a derived type's one
/// basic type.
fn basic_of(dt: c_int) -> R<c_int> {
    if crate::state::builtin_type(dt).is_some() {
        return Ok(dt);
    }
    match st()?.dtype(dt)?.basic_element() {
        Some(b) => Ok(b.tag as c_int),
        None => err(
            MPI_ERR_TYPE,
            format!("one-sided accumulates need a datatype of one predefined type; {dt:#x} mixes several"),
        ),
    }
}

/// The runtime's accumulate operation and element kind for MPI's `op` on
/// elements of `dt` (`MPI_REPLACE` and `MPI_NO_OP` take any type, as bytes).
fn acc_op(op: c_int, dt: c_int) -> R<(AccOp, Elem)> {
    let elem = match dt {
        MPI_CHAR | MPI_SIGNED_CHAR | MPI_INT8_T | MPI_INTEGER1 => Some(Elem::I8),
        MPI_UNSIGNED_CHAR | MPI_BYTE | MPI_UINT8_T | MPI_C_BOOL | MPI_CXX_BOOL => Some(Elem::U8),
        MPI_SHORT | MPI_INT16_T | MPI_INTEGER2 => Some(Elem::I16),
        MPI_UNSIGNED_SHORT | MPI_UINT16_T => Some(Elem::U16),
        MPI_INT | MPI_INT32_T | MPI_INTEGER | MPI_INTEGER4 | MPI_WCHAR | MPI_LOGICAL => {
            Some(Elem::I32)
        }
        MPI_UNSIGNED | MPI_UINT32_T => Some(Elem::U32),
        MPI_LONG | MPI_LONG_LONG | MPI_INT64_T | MPI_AINT | MPI_OFFSET | MPI_COUNT
        | MPI_INTEGER8 => Some(Elem::I64),
        MPI_UNSIGNED_LONG | MPI_UNSIGNED_LONG_LONG | MPI_UINT64_T => Some(Elem::U64),
        MPI_FLOAT | MPI_REAL | MPI_REAL4 => Some(Elem::F32),
        MPI_DOUBLE | MPI_DOUBLE_PRECISION | MPI_REAL8 => Some(Elem::F64),
        MPI_LONG_DOUBLE => Some(Elem::LongDouble),
        MPI_C_FLOAT_COMPLEX | MPI_CXX_FLOAT_COMPLEX | MPI_COMPLEX | MPI_COMPLEX8 => Some(Elem::C32),
        MPI_C_DOUBLE_COMPLEX | MPI_CXX_DOUBLE_COMPLEX | MPI_DOUBLE_COMPLEX | MPI_COMPLEX16 => {
            Some(Elem::C64)
        }
        MPI_C_LONG_DOUBLE_COMPLEX | MPI_CXX_LONG_DOUBLE_COMPLEX => Some(Elem::CLongDouble),
        MPI_2INT | MPI_2INTEGER => Some(Elem::Pair32),
        MPI_2REAL => Some(Elem::PairF32),
        MPI_2DOUBLE_PRECISION => Some(Elem::PairF64),
        MPI_FLOAT_INT => Some(Elem::F32Int),
        MPI_DOUBLE_INT => Some(Elem::F64Int),
        MPI_LONG_INT => Some(Elem::I64Int),
        MPI_SHORT_INT => Some(Elem::I16Int),
        MPI_LONG_DOUBLE_INT => Some(Elem::LongDoubleInt),
        _ => None,
    };
    let op = match op {
        MPI_REPLACE => return Ok((AccOp::Replace, elem.unwrap_or(Elem::U8))),
        MPI_NO_OP => return Ok((AccOp::NoOp, elem.unwrap_or(Elem::U8))),
        _ => match builtin(op) {
            Some(Builtin::Sum) => AccOp::Sum,
            Some(Builtin::Prod) => AccOp::Prod,
            Some(Builtin::Min) => AccOp::Min,
            Some(Builtin::Max) => AccOp::Max,
            Some(Builtin::Land) => AccOp::Land,
            Some(Builtin::Lor) => AccOp::Lor,
            Some(Builtin::Lxor) => AccOp::Lxor,
            Some(Builtin::Band) => AccOp::Band,
            Some(Builtin::Bor) => AccOp::Bor,
            Some(Builtin::Bxor) => AccOp::Bxor,
            Some(Builtin::MinLoc) => AccOp::MinLoc,
            Some(Builtin::MaxLoc) => AccOp::MaxLoc,
            _ => {
                return err(
                    MPI_ERR_OP,
                    format!(
                        "{op:#x} is not a predefined operation that one-sided accumulates take"
                    ),
                )
            }
        },
    };
    match elem {
        Some(e) if op.takes(e) => Ok((op, e)),
        Some(e) => err(MPI_ERR_OP, format!("{op:?} is not defined on {e:?} elements")),
        None => err(MPI_ERR_TYPE, format!("one-sided accumulates on datatype {dt:#x} are not supported by kumi yet (predefined numeric types are)")),
    }
}

/// `MPI_Accumulate` and `MPI_Get_accumulate`: each contiguous run of the
/// target layout atomically; the old bytes to `result` if given.
#[allow(clippy::too_many_arguments)]
fn accumulate_op<E: Entry>(
    o: *const c_void,
    on: E,
    odt: c_int,
    result: Option<(*mut c_void, E, c_int)>,
    rank: c_int,
    disp: isize,
    tn: E,
    tdt: c_int,
    op: c_int,
    h: c_int,
) -> R<()> {
    let w = win(h)?;
    if rank == MPI_PROC_NULL {
        // Nothing happens, and nothing is fetched.
        return Ok(());
    }
    if let Some(pair) = pair_of(tdt).or_else(|| pair_of(odt)) {
        return accumulate_pairs(&w, pair, o, on, odt, result, rank, disp, tn, tdt, op);
    }
    let (r, ext) = target_extents(&w, rank, disp, tn, tdt)?;
    let total: usize = ext.iter().map(|e| e.1).sum();
    let data = if op == MPI_NO_OP {
        vec![0u8; total]
    } else {
        origin_bytes(o, on, odt)?.0
    };
    // The target's basic element type decides how bytes combine (a derived
    // type's, which MPI requires to be of one predefined type).
    let how = acc_op(op, basic_of(tdt).or_else(|_| basic_of(odt))?)?;
    let mut old = vec![0u8; total];
    same_length(data.len(), &ext)?;
    let fetch = result.is_some().then_some(&mut old[..]);
    w.accumulate_scattered(r, &ext, how, &data, &[], fetch)?;
    if let Some(res) = result {
        unpack_result(res, &old)?;
    }
    Ok(())
}

/// Unpacks the bytes an accumulate fetched into its result buffer (`rn`
/// elements of `rdt` at `rb`), which must hold as many.
fn unpack_result<E: Entry>((rb, rn, rdt): (*mut c_void, E, c_int), bytes: &[u8]) -> R<()> {
    let d = st()?.dtype(rdt)?;
    let n = count_of(rn)?;
    if d.packed_size(n) != bytes.len() {
        return err(
            MPI_ERR_TYPE,
            format!(
                "the result buffer holds {} bytes, the target layout {}",
                d.packed_size(n),
                bytes.len()
            ),
        );
    }
    if !bytes.is_empty() {
        crate::p2p::check_buf(rb, n, &d)?;
        // SAFETY: the program passes room for `rn` elements of `rdt` at `rb`.
        unsafe { d.unpack(bytes, rb as *mut u8, n) };
    }
    Ok(())
}

/// Whether `dt` is one of the value-index pairs whose C layout has padding
/// (`MPI_DOUBLE_INT`: 12 bytes of data in 16): its packed form (12 bytes)
/// is not the runtime's element (the whole C struct).
fn padded_pair(dt: c_int) -> bool {
    matches!(
        dt,
        MPI_DOUBLE_INT | MPI_LONG_INT | MPI_SHORT_INT | MPI_LONG_DOUBLE_INT
    )
}

/// The padded pair type that `dt` is made of, if it is one or a type
/// derived from one alone (a vector of `MPI_DOUBLE_INT`).
fn pair_of(dt: c_int) -> Option<c_int> {
    fn leaves(types: &[TypeArg], out: &mut Vec<c_int>) {
        for t in types {
            match t {
                TypeArg::Named(h) => out.push(*h),
                TypeArg::Derived(_, Some(c)) => leaves(&c.types, out),
                // Made before its constructor was recorded: unknown.
                TypeArg::Derived(_, None) => out.push(MPI_DATATYPE_NULL),
            }
        }
    }
    if padded_pair(dt) {
        return Some(dt);
    }
    let ctor = st().ok()?.type_ctors.get(&dt).cloned()?;
    let mut found = Vec::new();
    leaves(&ctor.types, &mut found);
    match found[..] {
        [first, ..] if padded_pair(first) && found.iter().all(|&t| t == first) => Some(first),
        _ => None,
    }
}

/// The window offsets of the data bytes `k * step + at` (`k < n`), given
/// the target extents in data order (which cover at least `n * step` bytes).
fn data_offsets(ext: &[(u64, usize)], step: usize, at: usize, n: usize) -> Vec<u64> {
    let mut out = Vec::with_capacity(n);
    let (mut i, mut start) = (0, 0);
    for k in 0..n {
        let p = k * step + at;
        while start + ext[i].1 <= p {
            start += ext[i].1;
            i += 1;
        }
        out.push(ext[i].0 + (p - start) as u64);
    }
    out
}

/// [`accumulate_op`] on pairs of a padded pair type `pair` (origin, target
/// and result of that type or of types derived from it alone): the runtime
/// combines whole C structs, so each pair's packed value and index are laid
/// out as one at its target offset; pairs one struct apart go in one access.
/// A winning origin pair rewrites the target's padding bytes, which no
/// program reads.
#[allow(clippy::too_many_arguments)]
fn accumulate_pairs<E: Entry>(
    w: &Window,
    pair: c_int,
    o: *const c_void,
    on: E,
    odt: c_int,
    result: Option<(*mut c_void, E, c_int)>,
    rank: c_int,
    disp: isize,
    tn: E,
    tdt: c_int,
    op: c_int,
) -> R<()> {
    let how = acc_op(op, pair)?;
    let Some(p) = crate::state::builtin_type(pair) else {
        return err(
            MPI_ERR_TYPE,
            format!("{pair:#x} is not a predefined pair type"),
        );
    };
    // The value's bytes, then the index (a C int) at `io`: the C struct.
    let runs: Vec<(u64, usize)> = p.flat_runs()?.iter().map(|&(o, l)| (o as u64, l)).collect();
    let (pdata, ssize) = (p.size(), how.1.size());
    let vs = pdata - std::mem::size_of::<c_int>();
    let io = data_offsets(&runs, pdata, vs, 1)[0] as usize;
    let (r, ext) = target_extents(w, rank, disp, tn, tdt)?;
    let total: usize = ext.iter().map(|e| e.1).sum();
    if !total.is_multiple_of(pdata) {
        return err(
            MPI_ERR_TYPE,
            format!(
                "the target datatype {tdt:#x} holds {total} bytes, not whole pairs of {pair:#x}"
            ),
        );
    }
    let n = total / pdata;
    let at = data_offsets(&ext, pdata, 0, n);
    let index_at = data_offsets(&ext, pdata, vs, n);
    let apart = at.windows(2).all(|x| x[0].abs_diff(x[1]) >= ssize as u64);
    if !apart || at.iter().zip(&index_at).any(|(&v, &i)| v + io as u64 != i) {
        return err(
            MPI_ERR_TYPE,
            format!(
                "the target datatype {tdt:#x} does not lay out whole, separate {pair:#x} pairs"
            ),
        );
    }
    let packed = if op == MPI_NO_OP {
        vec![0u8; total]
    } else {
        let (v, _) = origin_bytes(o, on, odt)?;
        same_length(v.len(), &ext)?;
        v
    };
    // Packed (value, index) -> C structs, and back.
    let mut structs = vec![0u8; n * ssize];
    for (k, s) in structs.chunks_exact_mut(ssize).enumerate() {
        let d = &packed[k * pdata..(k + 1) * pdata];
        s[..vs].copy_from_slice(&d[..vs]);
        s[io..io + pdata - vs].copy_from_slice(&d[vs..]);
    }
    // The pairs' structs as target ranges, those one struct apart as one.
    let mut ranges: Vec<(u64, usize)> = Vec::new();
    for &a in &at {
        match ranges.last_mut() {
            Some((o, l)) if *o + *l as u64 == a => *l += ssize,
            _ => ranges.push((a, ssize)),
        }
    }
    let mut old = vec![0u8; n * ssize];
    let fetch = result.is_some().then_some(&mut old[..]);
    w.accumulate_scattered(r, &ranges, how, &structs, &[], fetch)?;
    if let Some(res) = result {
        let mut back = vec![0u8; total];
        for (k, s) in old.chunks_exact(ssize).enumerate() {
            let d = &mut back[k * pdata..(k + 1) * pdata];
            d[..vs].copy_from_slice(&s[..vs]);
            d[vs..].copy_from_slice(&s[io..io + pdata - vs]);
        }
        unpack_result(res, &back)?;
    }
    Ok(())
}

fn done_request(request: *mut c_int) -> R<()> {
    if request.is_null() {
        return err(MPI_ERR_ARG, "the output argument `request` is NULL");
    }
    let r = RawRequest::completed(Status {
        source: MPI_ANY_SOURCE,
        tag: MPI_ANY_TAG,
        bytes: 0,
        cancelled: false,
    });
    let h = st()?.new_request(ReqEntry::Active(r), MPI_COMM_WORLD);
    out(request, "request", h)
}

/// The window ranks of group `g` (world ranks).
fn group_ranks(w: &Window, g: c_int) -> R<Vec<usize>> {
    let members = st()?.group(g)?.clone();
    let c = w.comm();
    members
        .iter()
        .map(|&m| {
            (0..c.size())
                .find(|&r| c.world_rank(r) == Some(m as usize))
                .ok_or_else(|| MpiErr {
                    class: MPI_ERR_GROUP,
                    msg: format!("world rank {m} of the group is not in the window"),
                })
        })
        .collect()
}

fn lock_kind(t: c_int) -> R<bool> {
    match t {
        MPI_LOCK_EXCLUSIVE => Ok(true),
        MPI_LOCK_SHARED => Ok(false),
        t => err(
            MPI_ERR_LOCKTYPE,
            format!("lock type {t} is neither MPI_LOCK_EXCLUSIVE nor MPI_LOCK_SHARED"),
        ),
    }
}

mpi! {
    fn MPI_Win_create / PMPI_Win_create(base: *mut c_void, size: isize, disp_unit: c_int, info: c_int, comm: c_int, win_out: *mut c_int) {
        let c = {
            let mut s = st()?;
            crate::info::check(info)?;
            s.intra(comm)?
        };
        if size < 0 || disp_unit <= 0 {
            return err(MPI_ERR_ARG, format!("size {size} must not be negative and disp_unit {disp_unit} must be positive"));
        }
        if base.is_null() && size > 0 {
            return err(MPI_ERR_ARG, "the window's base is NULL");
        }
        if win_out.is_null() {
            return err(MPI_ERR_ARG, "the output argument `win` is NULL");
        }
        // SAFETY: MPI makes the program keep the memory valid, and use it as
        // the window rules say, until MPI_Win_free.
        let w = unsafe { Window::create(&c, base as *mut u8, size as usize, disp_unit as usize) }?;
        register(w, c.rank(), size, disp_unit, MPI_WIN_FLAVOR_CREATE, std::ptr::null_mut(), win_out)
    }

    fn MPI_Win_create_dynamic / PMPI_Win_create_dynamic(info: c_int, comm: c_int, win_out: *mut c_int) {
        let c = {
            let mut s = st()?;
            crate::info::check(info)?;
            s.intra(comm)?
        };
        if win_out.is_null() {
            return err(MPI_ERR_ARG, "the output argument `win` is NULL");
        }
        let w = Window::create_dynamic(&c)?;
        register(w, c.rank(), 0, 1, MPI_WIN_FLAVOR_DYNAMIC, std::ptr::null_mut(), win_out)
    }

    fn MPI_Win_attach / PMPI_Win_attach(win_h: c_int, base: *mut c_void, size: isize) {
        let w = win(win_h)?;
        let Ok(size) = usize::try_from(size) else {
            return err(MPI_ERR_ARG, format!("size {size} is negative"));
        };
        if base.is_null() && size > 0 {
            return err(MPI_ERR_ARG, "the region's base is NULL");
        }
        // SAFETY: MPI makes the program keep the region valid, and use it as
        // the window rules say, until MPI_Win_detach or MPI_Win_free.
        unsafe { w.attach(base as *mut u8, size) }.map_err(dynamic_err)
    }

    fn MPI_Win_detach / PMPI_Win_detach(win_h: c_int, base: *const c_void) {
        win(win_h)?.detach(base as *const u8).map_err(dynamic_err)
    }

    fn MPI_Win_allocate_shared / PMPI_Win_allocate_shared(size: isize, disp_unit: c_int, info: c_int, comm: c_int, baseptr: *mut c_void, win: *mut c_int) {
        allocate(size, disp_unit, info, comm, baseptr, win, MPI_WIN_FLAVOR_SHARED)
    }

    // On one host kumi allocates every window in shared memory; across
    // hosts, in each rank's own memory.
    fn MPI_Win_allocate / PMPI_Win_allocate(size: isize, disp_unit: c_int, info: c_int, comm: c_int, baseptr: *mut c_void, win: *mut c_int) {
        allocate(size, disp_unit, info, comm, baseptr, win, MPI_WIN_FLAVOR_ALLOCATE)
    }

    fn MPI_Win_shared_query / PMPI_Win_shared_query(win_h: c_int, rank: c_int, size: *mut isize, disp_unit: *mut c_int, baseptr: *mut c_void) {
        let w = win(win_h)?;
        if !w.is_shared() {
            return err(58, "MPI_Win_shared_query needs a window in shared memory (MPI_Win_allocate_shared or MPI_Win_allocate); this one is over the ranks' own memory (MPI_ERR_RMA_FLAVOR)");
        }
        // MPI_PROC_NULL: the first rank with a non-empty part.
        let r = if rank == MPI_PROC_NULL {
            (0..w.comm().size()).find(|&r| w.part(r).is_some_and(|p| p.1 > 0)).unwrap_or(0)
        } else {
            usize::try_from(rank).ok().filter(|&r| r < w.comm().size()).ok_or_else(|| MpiErr { class: MPI_ERR_RANK, msg: format!("rank {rank} is not a rank of the window") })?
        };
        let (p, s, u) = w.part(r).expect("checked");
        out(size, "size", s as isize)?;
        out(disp_unit, "disp_unit", u as c_int)?;
        out(baseptr as *mut *mut c_void, "baseptr", p as *mut c_void)
    }

    fn MPI_Win_free / PMPI_Win_free(win_p: *mut c_int) {
        let h = read(win_p, "win")?;
        let w = win(h)?;
        // Collective: nobody unmaps while another rank still accesses.
        w.fence()?;
        crate::attr::delete_all_attrs(h, win_attrs)?;
        st()?.wins.remove(&h);
        out(win_p, "win", MPI_WIN_NULL)
    }

    fn MPI_Win_fence / PMPI_Win_fence(_assert: c_int, win_h: c_int) {
        win(win_h)?.fence()?;
        Ok(())
    }

    fn MPI_Win_sync / PMPI_Win_sync(win_h: c_int) {
        sync(win_h)
    }

    fn MPI_Win_flush / PMPI_Win_flush(_rank: c_int, win_h: c_int) {
        sync(win_h)
    }

    fn MPI_Win_flush_all / PMPI_Win_flush_all(win_h: c_int) {
        sync(win_h)
    }

    fn MPI_Win_flush_local / PMPI_Win_flush_local(_rank: c_int, win_h: c_int) {
        sync(win_h)
    }

    fn MPI_Win_flush_local_all / PMPI_Win_flush_local_all(win_h: c_int) {
        sync(win_h)
    }

    // A lock on MPI_PROC_NULL, and its unlock, do nothing (MPI 4.1
    // section 12.5.3: MPI_PROC_NULL is a valid target rank everywhere).
    fn MPI_Win_lock / PMPI_Win_lock(lock_type: c_int, rank: c_int, _assert: c_int, win_h: c_int) {
        let x = lock_kind(lock_type)?;
        let w = win(win_h)?;
        if rank == MPI_PROC_NULL {
            return Ok(());
        }
        let r = usize::try_from(rank).or_else(|_| err(MPI_ERR_RANK, format!("rank {rank} is not a rank")))?;
        if entry(&mut *st()?, win_h)?.locks.iter().any(|l| l.0 == r) {
            return err(MPI_ERR_RMA_SYNC, format!("this rank already holds a lock on rank {r} of the window"));
        }
        w.lock(r, x)?;
        entry(&mut *st()?, win_h)?.locks.push((r, x));
        Ok(())
    }

    fn MPI_Win_unlock / PMPI_Win_unlock(rank: c_int, win_h: c_int) {
        let w = win(win_h)?;
        if rank == MPI_PROC_NULL {
            return Ok(());
        }
        let held = {
            let mut s = st()?;
            let e = entry(&mut s, win_h)?;
            let i = e.locks.iter().position(|l| l.0 as c_int == rank);
            i.map(|i| e.locks.remove(i))
        };
        let Some((r, x)) = held else {
            return err(MPI_ERR_RMA_SYNC, format!("this rank holds no lock on rank {rank} of the window"));
        };
        w.sync()?;
        w.unlock(r, x)?;
        Ok(())
    }

    fn MPI_Win_lock_all / PMPI_Win_lock_all(_assert: c_int, win_h: c_int) {
        let w = win(win_h)?;
        if !entry(&mut *st()?, win_h)?.locks.is_empty() {
            return err(MPI_ERR_RMA_SYNC, "this rank already holds locks on the window");
        }
        let n = w.comm().size();
        for r in 0..n {
            w.lock(r, false)?;
        }
        entry(&mut *st()?, win_h)?.locks = (0..n).map(|r| (r, false)).collect();
        Ok(())
    }

    fn MPI_Win_unlock_all / PMPI_Win_unlock_all(win_h: c_int) {
        let w = win(win_h)?;
        let held = std::mem::take(&mut entry(&mut *st()?, win_h)?.locks);
        if held.len() != w.comm().size() || held.iter().any(|l| l.1) {
            entry(&mut *st()?, win_h)?.locks = held;
            return err(MPI_ERR_RMA_SYNC, "MPI_Win_unlock_all without MPI_Win_lock_all");
        }
        w.sync()?;
        for (r, _) in held {
            w.unlock(r, false)?;
        }
        Ok(())
    }

    fn MPI_Put / PMPI_Put(origin_addr: *const c_void, origin_count: c_int, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: c_int, target_datatype: c_int, win_h: c_int) {
        put_op(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, win_h)
    }

    fn MPI_Get / PMPI_Get(origin_addr: *mut c_void, origin_count: c_int, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: c_int, target_datatype: c_int, win_h: c_int) {
        get_op(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, win_h)
    }

    fn MPI_Accumulate / PMPI_Accumulate(origin_addr: *const c_void, origin_count: c_int, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: c_int, target_datatype: c_int, op: c_int, win_h: c_int) {
        accumulate_op(origin_addr, origin_count, origin_datatype, None, target_rank, target_disp, target_count, target_datatype, op, win_h)
    }

    fn MPI_Get_accumulate / PMPI_Get_accumulate(origin_addr: *const c_void, origin_count: c_int, origin_datatype: c_int, result_addr: *mut c_void, result_count: c_int, result_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: c_int, target_datatype: c_int, op: c_int, win_h: c_int) {
        accumulate_op(origin_addr, origin_count, origin_datatype, Some((result_addr, result_count, result_datatype)), target_rank, target_disp, target_count, target_datatype, op, win_h)
    }

    fn MPI_Fetch_and_op / PMPI_Fetch_and_op(origin_addr: *const c_void, result_addr: *mut c_void, datatype: c_int, target_rank: c_int, target_disp: isize, op: c_int, win_h: c_int) {
        accumulate_op(origin_addr, 1, datatype, Some((result_addr, 1, datatype)), target_rank, target_disp, 1, datatype, op, win_h)
    }

    fn MPI_Compare_and_swap / PMPI_Compare_and_swap(origin_addr: *const c_void, compare_addr: *const c_void, result_addr: *mut c_void, datatype: c_int, target_rank: c_int, target_disp: isize, win_h: c_int) {
        let w = win(win_h)?;
        if target_rank == MPI_PROC_NULL {
            return Ok(());
        }
        let (data, d) = origin_bytes(origin_addr, 1, datatype)?;
        let (cmp, _) = origin_bytes(compare_addr, 1, datatype)?;
        let (r, ext) = target_extents(&w, target_rank, target_disp, 1, datatype)?;
        if ext.len() != 1 || !d.is_contiguous() {
            return err(MPI_ERR_TYPE, "MPI_Compare_and_swap takes one element of a predefined type");
        }
        let (_, elem) = acc_op(MPI_REPLACE, datatype)?;
        if elem.size() != data.len() {
            return err(MPI_ERR_TYPE, "MPI_Compare_and_swap takes one element of a predefined type");
        }
        let mut old = vec![0u8; data.len()];
        w.accumulate(r, ext[0].0, (AccOp::Cas, elem), &data, &cmp, Some(&mut old))?;
        // SAFETY: the program passes room for one element at `result_addr`.
        unsafe { d.unpack(&old, result_addr as *mut u8, 1) };
        Ok(())
    }

    fn MPI_Rput / PMPI_Rput(origin_addr: *const c_void, origin_count: c_int, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: c_int, target_datatype: c_int, win_h: c_int, request: *mut c_int) {
        put_op(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, win_h)?;
        done_request(request)
    }

    fn MPI_Rget / PMPI_Rget(origin_addr: *mut c_void, origin_count: c_int, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: c_int, target_datatype: c_int, win_h: c_int, request: *mut c_int) {
        get_op(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, win_h)?;
        done_request(request)
    }

    fn MPI_Raccumulate / PMPI_Raccumulate(origin_addr: *const c_void, origin_count: c_int, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: c_int, target_datatype: c_int, op: c_int, win_h: c_int, request: *mut c_int) {
        accumulate_op(origin_addr, origin_count, origin_datatype, None, target_rank, target_disp, target_count, target_datatype, op, win_h)?;
        done_request(request)
    }

    fn MPI_Rget_accumulate / PMPI_Rget_accumulate(origin_addr: *const c_void, origin_count: c_int, origin_datatype: c_int, result_addr: *mut c_void, result_count: c_int, result_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: c_int, target_datatype: c_int, op: c_int, win_h: c_int, request: *mut c_int) {
        accumulate_op(origin_addr, origin_count, origin_datatype, Some((result_addr, result_count, result_datatype)), target_rank, target_disp, target_count, target_datatype, op, win_h)?;
        done_request(request)
    }

    // The large-count forms: the same bodies, with `MPI_Count` counts.
    fn MPI_Put_c / PMPI_Put_c(origin_addr: *const c_void, origin_count: i64, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: i64, target_datatype: c_int, win_h: c_int) {
        put_op(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, win_h)
    }

    fn MPI_Get_c / PMPI_Get_c(origin_addr: *mut c_void, origin_count: i64, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: i64, target_datatype: c_int, win_h: c_int) {
        get_op(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, win_h)
    }

    fn MPI_Accumulate_c / PMPI_Accumulate_c(origin_addr: *const c_void, origin_count: i64, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: i64, target_datatype: c_int, op: c_int, win_h: c_int) {
        accumulate_op(origin_addr, origin_count, origin_datatype, None, target_rank, target_disp, target_count, target_datatype, op, win_h)
    }

    fn MPI_Get_accumulate_c / PMPI_Get_accumulate_c(origin_addr: *const c_void, origin_count: i64, origin_datatype: c_int, result_addr: *mut c_void, result_count: i64, result_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: i64, target_datatype: c_int, op: c_int, win_h: c_int) {
        accumulate_op(origin_addr, origin_count, origin_datatype, Some((result_addr, result_count, result_datatype)), target_rank, target_disp, target_count, target_datatype, op, win_h)
    }

    fn MPI_Rput_c / PMPI_Rput_c(origin_addr: *const c_void, origin_count: i64, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: i64, target_datatype: c_int, win_h: c_int, request: *mut c_int) {
        put_op(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, win_h)?;
        done_request(request)
    }

    fn MPI_Rget_c / PMPI_Rget_c(origin_addr: *mut c_void, origin_count: i64, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: i64, target_datatype: c_int, win_h: c_int, request: *mut c_int) {
        get_op(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, win_h)?;
        done_request(request)
    }

    fn MPI_Raccumulate_c / PMPI_Raccumulate_c(origin_addr: *const c_void, origin_count: i64, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: i64, target_datatype: c_int, op: c_int, win_h: c_int, request: *mut c_int) {
        accumulate_op(origin_addr, origin_count, origin_datatype, None, target_rank, target_disp, target_count, target_datatype, op, win_h)?;
        done_request(request)
    }

    fn MPI_Rget_accumulate_c / PMPI_Rget_accumulate_c(origin_addr: *const c_void, origin_count: i64, origin_datatype: c_int, result_addr: *mut c_void, result_count: i64, result_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: i64, target_datatype: c_int, op: c_int, win_h: c_int, request: *mut c_int) {
        accumulate_op(origin_addr, origin_count, origin_datatype, Some((result_addr, result_count, result_datatype)), target_rank, target_disp, target_count, target_datatype, op, win_h)?;
        done_request(request)
    }

    // General active-target synchronization, by messages on the window's
    // own communicator: post notifies the origins, start waits for them;
    // complete notifies the targets, wait (or test) waits for that.
    fn MPI_Win_post / PMPI_Win_post(group: c_int, _assert: c_int, win_h: c_int) {
        let w = win(win_h)?;
        let ranks = group_ranks(&w, group)?;
        w.sync()?;
        for &r in &ranks {
            w.comm().send(&[0u8; 0], r as i32, TAG_POST)?;
        }
        entry(&mut *st()?, win_h)?.posted = Some(ranks);
        Ok(())
    }

    fn MPI_Win_start / PMPI_Win_start(group: c_int, _assert: c_int, win_h: c_int) {
        let w = win(win_h)?;
        let ranks = group_ranks(&w, group)?;
        for &r in &ranks {
            w.comm().recv(&mut [0u8; 0], r as i32, TAG_POST)?;
        }
        w.sync()?;
        entry(&mut *st()?, win_h)?.started = Some(ranks);
        Ok(())
    }

    fn MPI_Win_complete / PMPI_Win_complete(win_h: c_int) {
        let w = win(win_h)?;
        let Some(ranks) = entry(&mut *st()?, win_h)?.started.take() else {
            return err(MPI_ERR_RMA_SYNC, "MPI_Win_complete without MPI_Win_start");
        };
        w.sync()?;
        for r in ranks {
            w.comm().send(&[0u8; 0], r as i32, TAG_DONE)?;
        }
        Ok(())
    }

    fn MPI_Win_wait / PMPI_Win_wait(win_h: c_int) {
        let w = win(win_h)?;
        let Some(ranks) = entry(&mut *st()?, win_h)?.posted.take() else {
            return err(MPI_ERR_RMA_SYNC, "MPI_Win_wait without MPI_Win_post");
        };
        for r in ranks {
            w.comm().recv(&mut [0u8; 0], r as i32, TAG_DONE)?;
        }
        w.sync()?;
        Ok(())
    }

    fn MPI_Win_test / PMPI_Win_test(win_h: c_int, flag: *mut c_int) {
        let w = win(win_h)?;
        let Some(ranks) = entry(&mut *st()?, win_h)?.posted.clone() else {
            return err(MPI_ERR_RMA_SYNC, "MPI_Win_test without MPI_Win_post");
        };
        for &r in &ranks {
            if w.comm().iprobe(r as i32, TAG_DONE)?.is_none() {
                return out(flag, "flag", 0);
            }
        }
        for r in ranks {
            w.comm().recv(&mut [0u8; 0], r as i32, TAG_DONE)?;
        }
        w.sync()?;
        entry(&mut *st()?, win_h)?.posted = None;
        out(flag, "flag", 1)
    }

    fn MPI_Win_get_group / PMPI_Win_get_group(win_h: c_int, group: *mut c_int) {
        let w = win(win_h)?;
        let ranks = crate::comm::world_ranks(w.comm());
        let g = st()?.new_group(ranks);
        out(group, "group", g)
    }

    fn MPI_Win_get_attr / PMPI_Win_get_attr(win_h: c_int, keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) {
        let mut s = st()?;
        let me = entry(&mut s, win_h)?.win.comm().rank();
        let e = entry(&mut s, win_h)?;
        let v: Option<*mut c_void> = match keyval {
            MPI_WIN_BASE => Some(e.win.part(me).expect("own part").0 as *mut c_void),
            MPI_WIN_SIZE => Some(&mut *e.size as *mut isize as *mut c_void),
            MPI_WIN_DISP_UNIT => Some(&mut *e.disp_unit as *mut c_int as *mut c_void),
            MPI_WIN_CREATE_FLAVOR => Some(&mut *e.flavor as *mut c_int as *mut c_void),
            MPI_WIN_MODEL => Some(&mut *e.model as *mut c_int as *mut c_void),
            k => e.attrs.get(&k).copied(),
        };
        let known = v.is_some() || s.keyvals.contains_key(&keyval);
        drop(s);
        match v {
            Some(v) => {
                out(attribute_val as *mut *mut c_void, "attribute_val", v)?;
                out(flag, "flag", 1)
            }
            None if known => out(flag, "flag", 0),
            None => err(MPI_ERR_KEYVAL, format!("{keyval:#x} is not a keyval")),
        }
    }

    fn MPI_Win_create_keyval / PMPI_Win_create_keyval(copy_fn: Option<crate::state::CopyFn>, delete_fn: Option<crate::state::DeleteFn>, keyval: *mut c_int, extra_state: *mut c_void) {
        crate::attr::create_keyval(crate::state::KeyvalFns::C(copy_fn, delete_fn), keyval, extra_state)
    }

    fn MPI_Win_free_keyval / PMPI_Win_free_keyval(keyval: *mut c_int) {
        crate::attr::free_keyval(keyval)
    }

    fn MPI_Win_set_attr / PMPI_Win_set_attr(win_h: c_int, keyval: c_int, attribute_val: *mut c_void) {
        crate::attr::known_keyval(keyval)?;
        crate::attr::replace_attr(win_h, keyval, Some(attribute_val), win_attrs, "window")
    }

    fn MPI_Win_delete_attr / PMPI_Win_delete_attr(win_h: c_int, keyval: c_int) {
        crate::attr::replace_attr(win_h, keyval, None, win_attrs, "window")
    }

    fn MPI_Win_set_name / PMPI_Win_set_name(win_h: c_int, win_name: *const c_char) {
        let n = crate::state::in_str(win_name, "win_name")?;
        entry(&mut *st()?, win_h)?.name = n;
        Ok(())
    }

    fn MPI_Win_get_name / PMPI_Win_get_name(win_h: c_int, win_name: *mut c_char, resultlen: *mut c_int) {
        let n = entry(&mut *st()?, win_h)?.name.clone();
        out_str(win_name, MPI_MAX_OBJECT_NAME, resultlen, &n)
    }

    // A window's handler has a communicator's shape (a handle and a code).
    fn MPI_Win_create_errhandler / PMPI_Win_create_errhandler(function: Option<crate::state::ErrFn>, errhandler: *mut c_int) {
        let h = st()?.new_errhandler(function, |s| &mut s.errhs)?;
        out(errhandler, "errhandler", h)
    }

    fn MPI_Win_set_errhandler / PMPI_Win_set_errhandler(win_h: c_int, errhandler: c_int) {
        let mut s = st()?;
        let known = matches!(errhandler, MPI_ERRORS_ARE_FATAL | MPI_ERRORS_RETURN | MPI_ERRORS_ABORT) || s.errhs.contains_key(&errhandler);
        entry(&mut s, win_h)?;
        if !known {
            return err(MPI_ERR_ARG, format!("{errhandler:#x} is not an error handler"));
        }
        entry(&mut s, win_h)?.errh = errhandler;
        Ok(())
    }

    fn MPI_Win_get_errhandler / PMPI_Win_get_errhandler(win_h: c_int, errhandler: *mut c_int) {
        let e = {
            let mut s = st()?;
            let e = entry(&mut s, win_h)?.errh;
            s.errhandler_out(e)
        };
        out(errhandler, "errhandler", e)
    }

    fn MPI_Win_call_errhandler / PMPI_Win_call_errhandler(win_h: c_int, errorcode: c_int) {
        entry(&mut *st()?, win_h)?;
        let e = MpiErr { class: errorcode, msg: format!("MPI_Win_call_errhandler raised error code {errorcode}") };
        crate::state::handle_error("MPI_Win_call_errhandler", win_h, e);
        Ok(())
    }

    // kumi acts on no window hints: checked and ignored; MPI_Win_get_info
    // returns an empty info object.
    fn MPI_Win_set_info / PMPI_Win_set_info(win_h: c_int, info: c_int) {
        let mut s = st()?;
        entry(&mut s, win_h)?;
        crate::info::check(info)
    }

    fn MPI_Win_get_info / PMPI_Win_get_info(win_h: c_int, info_used: *mut c_int) {
        let mut s = st()?;
        entry(&mut s, win_h)?;
        let h = crate::info::create(Vec::new());
        drop(s);
        out(info_used, "info_used", h)
    }
}
