//! Datatypes: handles onto [`kumi::datatype::Datatype`], plus pack/unpack and
//! the address helpers.

use crate::coll::{count_of, Entry};
use crate::consts::*;
use crate::external32;
use crate::state::{
    self, in_str, out, out_str, read, slice, slice_mut, st, CopyFn, DeleteFn, State, TypeArg,
    TypeCtor,
};
use crate::{err, R};
use kumi::datatype::Datatype;
use std::ffi::{c_char, c_int, c_void};
use std::rc::Rc;

/// Registers derived datatype `d`, made by `combiner` from these arguments
/// (kept for `MPI_Type_get_contents`), as `*newtype`.
fn new_type(
    d: Datatype,
    combiner: c_int,
    ints: Vec<c_int>,
    aints: Vec<isize>,
    olds: &[c_int],
    newtype: *mut c_int,
) -> R<()> {
    register(d, combiner, (ints, aints, vec![]), olds, newtype)
}

/// [`new_type`] with the integer, address and large-count arguments.
fn register(
    d: Datatype,
    combiner: c_int,
    args: (Vec<c_int>, Vec<isize>, Vec<i64>),
    olds: &[c_int],
    newtype: *mut c_int,
) -> R<()> {
    let mut s = st()?;
    let mut types = Vec::with_capacity(olds.len());
    for &o in olds {
        types.push(if is_builtin(o) {
            TypeArg::Named(o)
        } else {
            TypeArg::Derived(s.dtype(o)?, s.type_ctors.get(&o).cloned())
        });
    }
    let h = record(&mut s, d, combiner, args, types);
    drop(s);
    out(newtype, "newtype", h)
}

/// Registers datatype `d` made by a large-count (`_c`) constructor, which
/// MPI 4 records with its counts and displacements as large counts.
fn new_type_large(
    d: Datatype,
    combiner: c_int,
    ints: Vec<c_int>,
    large: Vec<i64>,
    olds: &[c_int],
    newtype: *mut c_int,
) -> R<()> {
    register(d, combiner, (ints, vec![], large), olds, newtype)
}

/// A count of a large-count constructor.
fn big(v: i64, what: &str) -> R<usize> {
    usize::try_from(v).or_else(|_| err(MPI_ERR_COUNT, format!("`{what}` is negative ({v})")))
}

/// An array of `n` entries of a large-count constructor.
fn big_slice<'a, T>(p: *const T, n: i64, what: &str) -> R<&'a [T]> {
    let n = c_int::try_from(n).or_else(|_| {
        err(
            MPI_ERR_COUNT,
            format!("`{what}` would hold {n} entries; kumi takes at most 2^31-1"),
        )
    })?;
    slice(p, n, what)
}

/// A new datatype handle for `d`, made by `combiner` from these arguments.
fn record(
    s: &mut State,
    d: Datatype,
    combiner: c_int,
    (ints, aints, large): (Vec<c_int>, Vec<isize>, Vec<i64>),
    types: Vec<TypeArg>,
) -> c_int {
    let h = s.fresh(NEW_TYPE);
    s.types.insert(h, (d, String::new()));
    s.type_ctors.insert(
        h,
        Rc::new(TypeCtor {
            combiner,
            ints,
            aints,
            large,
            types,
        }),
    );
    h
}

/// The `int` arguments of a constructor, as given.
fn given(p: *const c_int, n: c_int, what: &str) -> R<Vec<c_int>> {
    Ok(slice(p, n, what)?.to_vec())
}

/// How derived datatype `h` was made.
fn ctor_of(h: c_int) -> R<Rc<TypeCtor>> {
    let s = st()?;
    s.dtype(h)?;
    match s.type_ctors.get(&h) {
        Some(c) => Ok(c.clone()),
        None => err(
            MPI_ERR_INTERN,
            format!("no record of how datatype {h:#x} was made"),
        ),
    }
}

/// A datatype's attributes (a table made on first use).
fn type_attrs(s: &mut State, h: c_int) -> R<&mut crate::state::Attrs> {
    s.dtype(h)?;
    Ok(s.type_attrs.entry(h).or_default())
}

fn old(h: c_int) -> R<Datatype> {
    // Also for a query from inside a callback of another call.
    crate::state::dtype_or_lent(h)
}

fn ints(p: *const c_int, n: c_int, what: &str) -> R<Vec<i64>> {
    Ok(slice(p, n, what)?.iter().map(|&x| x as i64).collect())
}

fn aints(p: *const isize, n: c_int, what: &str) -> R<Vec<i64>> {
    Ok(slice(p, n, what)?.iter().map(|&x| x as i64).collect())
}

/// `MPI_Type_create_struct(_c)`: the structure of the parts, where a part
/// of type `MPI_LB` or `MPI_UB` (MPI-1's bound markers, removed in MPI 3 but
/// still in MPICH's ABI) is no data but sets the lower or upper bound at its
/// displacement, whatever its block length; the last marker of a kind counts.
fn structure(blocklens: &[i64], displs: &[i64], types: &[c_int]) -> R<Datatype> {
    let (mut lb, mut ub) = (None, None);
    let (mut b, mut d, mut v) = (vec![], vec![], vec![]);
    let s = st()?;
    for ((&n, &at), &t) in blocklens.iter().zip(displs).zip(types) {
        let at_addr = || match isize::try_from(at) {
            Ok(a) => Ok(Some(a)),
            Err(_) => err(
                MPI_ERR_ARG,
                format!("displacement {at} is beyond the address space"),
            ),
        };
        match t {
            MPI_LB => lb = at_addr()?,
            MPI_UB => ub = at_addr()?,
            _ => {
                b.push(n);
                d.push(at);
                v.push(s.dtype(t)?);
            }
        }
    }
    Ok(Datatype::create_struct(&b, &d, &v)?.with_bounds(lb, ub))
}

/// `MPI_Type_create_darray(_c)`, with the global sizes as read (`large`:
/// from the `_c` form, recorded as large counts).
#[allow(clippy::too_many_arguments)]
fn darray(
    size: c_int,
    rank: c_int,
    ndims: c_int,
    gsizes: &[i64],
    distribs: *const c_int,
    dargs: *const c_int,
    psizes: *const c_int,
    order: c_int,
    oldtype: c_int,
    newtype: *mut c_int,
    large: bool,
) -> R<()> {
    use kumi::datatype::Distribution;
    let c_order = order_of(order)?;
    let ds = slice(distribs, ndims, "distribs")?;
    let da = slice(dargs, ndims, "dargs")?;
    let mut dist = Vec::with_capacity(ds.len());
    for (d, (&k, &a)) in ds.iter().zip(da).enumerate() {
        let arg = match a {
            MPI_DISTRIBUTE_DFLT_DARG => None,
            a if a > 0 => Some(a as usize),
            a => {
                return err(
                    MPI_ERR_ARG,
                    format!(
                    "darg {a} of dimension {d} is neither positive nor MPI_DISTRIBUTE_DFLT_DARG"
                ),
                )
            }
        };
        dist.push(match k {
            MPI_DISTRIBUTE_BLOCK => Distribution::Block(arg),
            MPI_DISTRIBUTE_CYCLIC => Distribution::Cyclic(arg),
            MPI_DISTRIBUTE_NONE => Distribution::None,
            k => return err(MPI_ERR_ARG, format!("distribution {k} of dimension {d} is none of MPI_DISTRIBUTE_BLOCK, _CYCLIC, _NONE")),
        });
    }
    if size <= 0 || rank < 0 {
        return err(
            MPI_ERR_ARG,
            format!("size {size} and rank {rank} must be positive and non-negative"),
        );
    }
    let ps = ints(psizes, ndims, "psizes")?;
    let d = old(oldtype)?.darray(size as usize, rank as usize, gsizes, &dist, &ps, c_order)?;
    // The global sizes are integers, or large counts from the `_c` form.
    let mut args = vec![size, rank, ndims];
    if !large {
        args.extend(gsizes.iter().map(|&g| g as c_int));
    }
    args.extend_from_slice(ds);
    args.extend_from_slice(da);
    args.extend(given(psizes, ndims, "psizes")?);
    args.push(order);
    let big = if large { gsizes.to_vec() } else { vec![] };
    register(
        d,
        MPI_COMBINER_DARRAY,
        (args, vec![], big),
        &[oldtype],
        newtype,
    )
}

/// MPICH's REAL4 / REAL8 / REAL16 for precision `p` and range `r`
/// (`MPI_UNDEFINED` leaves one free).
fn f90_real(p: c_int, r: c_int) -> R<c_int> {
    let p = if p == MPI_UNDEFINED { 0 } else { p };
    let r = if r == MPI_UNDEFINED { 0 } else { r };
    Ok(match (p, r) {
        (..=6, ..=37) => 0x4c000427,
        (..=15, ..=307) => 0x4c000829,
        (..=33, ..=4931) => 0x4c00102b,
        _ => {
            return err(
                MPI_ERR_ARG,
                format!("no real type has precision {p} and range {r}"),
            )
        }
    })
}

/// The parameterized Fortran 90 type `combiner(ints)`: the layout of the
/// predefined type `base`, an envelope that gives back the arguments as
/// given (`MPI_UNDEFINED` included) with no datatypes, and the same handle
/// for the same arguments every time. The standard counts these types as
/// predefined: `MPI_Type_free` refuses them, and reductions compute in
/// `base`.
fn f90_type(combiner: c_int, ints: Vec<c_int>, base: c_int, newtype: *mut c_int) -> R<()> {
    let key = (combiner, ints[0], ints.get(1).copied().unwrap_or(0));
    let mut s = st()?;
    let h = match s.f90_types.get(&key) {
        Some(&h) => h,
        None => {
            let d = s.dtype(base)?;
            let h = record(&mut s, d, combiner, (ints, vec![], vec![]), vec![]);
            s.f90_types.insert(key, h);
            s.f90_base.insert(h, base);
            h
        }
    };
    drop(s);
    out(newtype, "newtype", h)
}

fn check_datarep(datarep: *const c_char) -> R<()> {
    let rep = in_str(datarep, "datarep")?;
    if rep != "external32" {
        return err(
            MPI_ERR_UNSUPPORTED_DATAREP,
            format!("data representation {rep:?}: MPI_Pack_external takes \"external32\""),
        );
    }
    Ok(())
}

fn pack_external(
    datarep: *const c_char,
    inbuf: *const c_void,
    incount: i64,
    dt: c_int,
    outbuf: *mut c_void,
    outsize: isize,
    position: *mut isize,
) -> R<()> {
    check_datarep(datarep)?;
    let d = old(dt)?;
    let x = external32::of_type(&d)?;
    let n = usize::try_from(incount)
        .or_else(|_| err(MPI_ERR_COUNT, format!("count {incount} is negative")))?;
    let pos = read(position, "position")?;
    let native = d.packed_size(n);
    let need = x.size(native);
    if pos < 0 || outsize < 0 || pos as usize + need > outsize as usize {
        return err(MPI_ERR_TRUNCATE, format!("packing {need} bytes at position {pos} overruns the output buffer of {outsize} bytes"));
    }
    let o = state::slice_mut(
        outbuf as *mut u8,
        c_int::try_from(outsize).unwrap_or(c_int::MAX),
        "outbuf",
    )?;
    let dst = &mut o[pos as usize..pos as usize + need];
    let mut packed = vec![0u8; native];
    // SAFETY: the caller passes `incount` elements of `datatype` at `inbuf`.
    unsafe { d.pack(inbuf as *const u8, n, &mut packed) };
    if let Err(why) = x.encode(&packed, dst) {
        return err(MPI_ERR_CONVERSION, format!("MPI_Pack_external: {why}"));
    }
    out(position, "position", pos + need as isize)
}

fn unpack_external(
    datarep: *const c_char,
    inbuf: *const c_void,
    insize: isize,
    position: *mut isize,
    outbuf: *mut c_void,
    outcount: i64,
    dt: c_int,
) -> R<()> {
    check_datarep(datarep)?;
    let d = old(dt)?;
    let x = external32::of_type(&d)?;
    let n = usize::try_from(outcount)
        .or_else(|_| err(MPI_ERR_COUNT, format!("count {outcount} is negative")))?;
    let pos = read(position, "position")?;
    let native = d.packed_size(n);
    let need = x.size(native);
    if pos < 0 || insize < 0 || pos as usize + need > insize as usize {
        return err(
            MPI_ERR_TRUNCATE,
            format!(
                "unpacking {need} bytes at position {pos} reads past the input of {insize} bytes"
            ),
        );
    }
    let i = slice(
        inbuf as *const u8,
        c_int::try_from(insize).unwrap_or(c_int::MAX),
        "inbuf",
    )?;
    let mut packed = vec![0u8; native];
    x.decode(&i[pos as usize..pos as usize + need], &mut packed);
    // SAFETY: the caller passes room for `outcount` elements of `datatype`.
    unsafe { d.unpack(&packed, outbuf as *mut u8, n) };
    out(position, "position", pos + need as isize)
}

fn order_of(order: c_int) -> R<bool> {
    match order {
        MPI_ORDER_C => Ok(true),
        MPI_ORDER_FORTRAN => Ok(false),
        o => err(
            MPI_ERR_ARG,
            format!("order {o} is neither MPI_ORDER_C nor MPI_ORDER_FORTRAN"),
        ),
    }
}

fn is_builtin(h: c_int) -> bool {
    state::builtin_type(h).is_some()
}

mpi! {
    fn MPI_Type_contiguous / PMPI_Type_contiguous(count: c_int, oldtype: c_int, newtype: *mut c_int) {
        let d = old(oldtype)?.contiguous(state::count(count)?)?;
        new_type(d, MPI_COMBINER_CONTIGUOUS, vec![count], vec![], &[oldtype], newtype)
    }

    fn MPI_Type_vector / PMPI_Type_vector(count: c_int, blocklength: c_int, stride: c_int, oldtype: c_int, newtype: *mut c_int) {
        let d = old(oldtype)?.vector(state::count(count)?, state::count(blocklength)?, stride as isize)?;
        new_type(d, MPI_COMBINER_VECTOR, vec![count, blocklength, stride], vec![], &[oldtype], newtype)
    }

    fn MPI_Type_create_hvector / PMPI_Type_create_hvector(count: c_int, blocklength: c_int, stride: isize, oldtype: c_int, newtype: *mut c_int) {
        let d = old(oldtype)?.hvector(state::count(count)?, state::count(blocklength)?, stride)?;
        new_type(d, MPI_COMBINER_HVECTOR, vec![count, blocklength], vec![stride], &[oldtype], newtype)
    }

    fn MPI_Type_hvector / PMPI_Type_hvector(count: c_int, blocklength: c_int, stride: isize, oldtype: c_int, newtype: *mut c_int) {
        let d = old(oldtype)?.hvector(state::count(count)?, state::count(blocklength)?, stride)?;
        new_type(d, MPI_COMBINER_HVECTOR, vec![count, blocklength], vec![stride], &[oldtype], newtype)
    }

    fn MPI_Type_indexed / PMPI_Type_indexed(count: c_int, blocklens: *const c_int, displs: *const c_int, oldtype: c_int, newtype: *mut c_int) {
        let d = old(oldtype)?.indexed(&ints(blocklens, count, "array_of_blocklengths")?, &ints(displs, count, "array_of_displacements")?)?;
        let mut args = vec![count];
        args.extend(given(blocklens, count, "array_of_blocklengths")?);
        args.extend(given(displs, count, "array_of_displacements")?);
        new_type(d, MPI_COMBINER_INDEXED, args, vec![], &[oldtype], newtype)
    }

    fn MPI_Type_create_indexed_block / PMPI_Type_create_indexed_block(count: c_int, blocklength: c_int, displs: *const c_int, oldtype: c_int, newtype: *mut c_int) {
        let b = vec![blocklength as i64; state::count(count)?];
        let d = old(oldtype)?.indexed(&b, &ints(displs, count, "array_of_displacements")?)?;
        let mut args = vec![count, blocklength];
        args.extend(given(displs, count, "array_of_displacements")?);
        new_type(d, MPI_COMBINER_INDEXED_BLOCK, args, vec![], &[oldtype], newtype)
    }

    fn MPI_Type_create_hindexed / PMPI_Type_create_hindexed(count: c_int, blocklens: *const c_int, displs: *const isize, oldtype: c_int, newtype: *mut c_int) {
        let d = old(oldtype)?.hindexed(&ints(blocklens, count, "array_of_blocklengths")?, &aints(displs, count, "array_of_displacements")?)?;
        let mut args = vec![count];
        args.extend(given(blocklens, count, "array_of_blocklengths")?);
        let addrs = slice(displs, count, "array_of_displacements")?.to_vec();
        new_type(d, MPI_COMBINER_HINDEXED, args, addrs, &[oldtype], newtype)
    }

    fn MPI_Type_hindexed / PMPI_Type_hindexed(count: c_int, blocklens: *const c_int, displs: *const isize, oldtype: c_int, newtype: *mut c_int) {
        let d = old(oldtype)?.hindexed(&ints(blocklens, count, "array_of_blocklengths")?, &aints(displs, count, "array_of_displacements")?)?;
        let mut args = vec![count];
        args.extend(given(blocklens, count, "array_of_blocklengths")?);
        let addrs = slice(displs, count, "array_of_displacements")?.to_vec();
        new_type(d, MPI_COMBINER_HINDEXED, args, addrs, &[oldtype], newtype)
    }

    fn MPI_Type_create_hindexed_block / PMPI_Type_create_hindexed_block(count: c_int, blocklength: c_int, displs: *const isize, oldtype: c_int, newtype: *mut c_int) {
        let b = vec![blocklength as i64; state::count(count)?];
        let d = old(oldtype)?.hindexed(&b, &aints(displs, count, "array_of_displacements")?)?;
        let addrs = slice(displs, count, "array_of_displacements")?.to_vec();
        new_type(d, MPI_COMBINER_HINDEXED_BLOCK, vec![count, blocklength], addrs, &[oldtype], newtype)
    }

    fn MPI_Type_create_struct / PMPI_Type_create_struct(count: c_int, blocklens: *const c_int, displs: *const isize, types: *const c_int, newtype: *mut c_int) {
        let ts = slice(types, count, "array_of_types")?;
        let d = structure(&ints(blocklens, count, "array_of_blocklengths")?, &aints(displs, count, "array_of_displacements")?, ts)?;
        let mut args = vec![count];
        args.extend(given(blocklens, count, "array_of_blocklengths")?);
        let addrs = slice(displs, count, "array_of_displacements")?.to_vec();
        new_type(d, MPI_COMBINER_STRUCT, args, addrs, ts, newtype)
    }

    fn MPI_Type_struct / PMPI_Type_struct(count: c_int, blocklens: *const c_int, displs: *const isize, types: *const c_int, newtype: *mut c_int) {
        // SAFETY: same arguments as MPI_Type_create_struct.
        let rc = unsafe { PMPI_Type_create_struct(count, blocklens, displs, types, newtype) };
        if rc == MPI_SUCCESS { Ok(()) } else { err(rc, "MPI_Type_create_struct failed") }
    }

    fn MPI_Type_create_resized / PMPI_Type_create_resized(oldtype: c_int, lb: isize, extent: isize, newtype: *mut c_int) {
        let d = old(oldtype)?.resized(lb, extent);
        new_type(d, MPI_COMBINER_RESIZED, vec![], vec![lb, extent], &[oldtype], newtype)
    }

    // The Fortran 90 parameterized types: the predefined type of at least
    // the asked precision and range (MPICH's REALn / COMPLEXn / INTEGERn),
    // under a handle of their own (`f90_type`).
    fn MPI_Type_create_f90_real / PMPI_Type_create_f90_real(p: c_int, r: c_int, newtype: *mut c_int) {
        let base = f90_real(p, r)?;
        f90_type(MPI_COMBINER_F90_REAL, vec![p, r], base, newtype)
    }

    fn MPI_Type_create_f90_complex / PMPI_Type_create_f90_complex(p: c_int, r: c_int, newtype: *mut c_int) {
        let base = match f90_real(p, r)? {
            0x4c000427 => 0x4c000828, // COMPLEX8
            0x4c000829 => 0x4c00102a, // COMPLEX16
            _ => 0x4c00202c,          // COMPLEX32
        };
        f90_type(MPI_COMBINER_F90_COMPLEX, vec![p, r], base, newtype)
    }

    fn MPI_Type_create_f90_integer / PMPI_Type_create_f90_integer(r: c_int, newtype: *mut c_int) {
        let base = match r {
            i32::MIN..=2 => 0x4c00012d,  // INTEGER1
            3..=4 => 0x4c00022f,         // INTEGER2
            5..=9 => 0x4c000430,         // INTEGER4
            10..=18 => 0x4c000831,       // INTEGER8
            _ => return err(MPI_ERR_ARG, format!("no integer type has a decimal range of {r}")),
        };
        f90_type(MPI_COMBINER_F90_INTEGER, vec![r], base, newtype)
    }

    fn MPI_Type_create_darray / PMPI_Type_create_darray(size: c_int, rank: c_int, ndims: c_int, gsizes: *const c_int, distribs: *const c_int, dargs: *const c_int, psizes: *const c_int, order: c_int, oldtype: c_int, newtype: *mut c_int) {
        darray(size, rank, ndims, &ints(gsizes, ndims, "gsizes")?, distribs, dargs, psizes, order, oldtype, newtype, false)
    }

    // The large-count constructors (MPI 4.1 section 5.1.2): counts, block
    // lengths and displacements are MPI_Count; recorded as large counts.
    fn MPI_Type_contiguous_c / PMPI_Type_contiguous_c(count: i64, oldtype: c_int, newtype: *mut c_int) {
        let d = old(oldtype)?.contiguous(big(count, "count")?)?;
        new_type_large(d, MPI_COMBINER_CONTIGUOUS, vec![], vec![count], &[oldtype], newtype)
    }

    fn MPI_Type_vector_c / PMPI_Type_vector_c(count: i64, blocklength: i64, stride: i64, oldtype: c_int, newtype: *mut c_int) {
        let d = old(oldtype)?.vector(big(count, "count")?, big(blocklength, "blocklength")?, stride as isize)?;
        new_type_large(d, MPI_COMBINER_VECTOR, vec![], vec![count, blocklength, stride], &[oldtype], newtype)
    }

    fn MPI_Type_create_hvector_c / PMPI_Type_create_hvector_c(count: i64, blocklength: i64, stride: i64, oldtype: c_int, newtype: *mut c_int) {
        let d = old(oldtype)?.hvector(big(count, "count")?, big(blocklength, "blocklength")?, stride as isize)?;
        new_type_large(d, MPI_COMBINER_HVECTOR, vec![], vec![count, blocklength, stride], &[oldtype], newtype)
    }

    fn MPI_Type_indexed_c / PMPI_Type_indexed_c(count: i64, blocklens: *const i64, displs: *const i64, oldtype: c_int, newtype: *mut c_int) {
        let (b, ds) = (big_slice(blocklens, count, "array_of_blocklengths")?, big_slice(displs, count, "array_of_displacements")?);
        let d = old(oldtype)?.indexed(b, ds)?;
        let large = [&[count][..], b, ds].concat();
        new_type_large(d, MPI_COMBINER_INDEXED, vec![], large, &[oldtype], newtype)
    }

    fn MPI_Type_create_hindexed_c / PMPI_Type_create_hindexed_c(count: i64, blocklens: *const i64, displs: *const i64, oldtype: c_int, newtype: *mut c_int) {
        let (b, ds) = (big_slice(blocklens, count, "array_of_blocklengths")?, big_slice(displs, count, "array_of_displacements")?);
        let d = old(oldtype)?.hindexed(b, ds)?;
        let large = [&[count][..], b, ds].concat();
        new_type_large(d, MPI_COMBINER_HINDEXED, vec![], large, &[oldtype], newtype)
    }

    fn MPI_Type_create_indexed_block_c / PMPI_Type_create_indexed_block_c(count: i64, blocklength: i64, displs: *const i64, oldtype: c_int, newtype: *mut c_int) {
        let ds = big_slice(displs, count, "array_of_displacements")?;
        let d = old(oldtype)?.indexed(&vec![blocklength; ds.len()], ds)?;
        let large = [&[count, blocklength][..], ds].concat();
        new_type_large(d, MPI_COMBINER_INDEXED_BLOCK, vec![], large, &[oldtype], newtype)
    }

    fn MPI_Type_create_hindexed_block_c / PMPI_Type_create_hindexed_block_c(count: i64, blocklength: i64, displs: *const i64, oldtype: c_int, newtype: *mut c_int) {
        let ds = big_slice(displs, count, "array_of_displacements")?;
        let d = old(oldtype)?.hindexed(&vec![blocklength; ds.len()], ds)?;
        let large = [&[count, blocklength][..], ds].concat();
        new_type_large(d, MPI_COMBINER_HINDEXED_BLOCK, vec![], large, &[oldtype], newtype)
    }

    fn MPI_Type_create_struct_c / PMPI_Type_create_struct_c(count: i64, blocklens: *const i64, displs: *const i64, types: *const c_int, newtype: *mut c_int) {
        let ts = big_slice(types, count, "array_of_types")?;
        let (b, ds) = (big_slice(blocklens, count, "array_of_blocklengths")?, big_slice(displs, count, "array_of_displacements")?);
        let d = structure(b, ds, ts)?;
        let large = [&[count][..], b, ds].concat();
        new_type_large(d, MPI_COMBINER_STRUCT, vec![], large, ts, newtype)
    }

    fn MPI_Type_create_resized_c / PMPI_Type_create_resized_c(oldtype: c_int, lb: i64, extent: i64, newtype: *mut c_int) {
        let d = old(oldtype)?.resized(lb as isize, extent as isize);
        new_type_large(d, MPI_COMBINER_RESIZED, vec![], vec![lb, extent], &[oldtype], newtype)
    }

    fn MPI_Type_create_subarray_c / PMPI_Type_create_subarray_c(ndims: c_int, sizes: *const i64, subsizes: *const i64, starts: *const i64, order: c_int, oldtype: c_int, newtype: *mut c_int) {
        let c_order = order_of(order)?;
        let (a, b, c) = (slice(sizes, ndims, "sizes")?, slice(subsizes, ndims, "subsizes")?, slice(starts, ndims, "starts")?);
        let d = old(oldtype)?.subarray(a, b, c, c_order)?;
        new_type_large(d, MPI_COMBINER_SUBARRAY, vec![ndims, order], [a, b, c].concat(), &[oldtype], newtype)
    }

    fn MPI_Type_create_darray_c / PMPI_Type_create_darray_c(size: c_int, rank: c_int, ndims: c_int, gsizes: *const i64, distribs: *const c_int, dargs: *const c_int, psizes: *const c_int, order: c_int, oldtype: c_int, newtype: *mut c_int) {
        darray(size, rank, ndims, slice(gsizes, ndims, "gsizes")?, distribs, dargs, psizes, order, oldtype, newtype, true)
    }

    fn MPI_Type_create_subarray / PMPI_Type_create_subarray(ndims: c_int, sizes: *const c_int, subsizes: *const c_int, starts: *const c_int, order: c_int, oldtype: c_int, newtype: *mut c_int) {
        let c_order = order_of(order)?;
        let d = old(oldtype)?.subarray(&ints(sizes, ndims, "sizes")?, &ints(subsizes, ndims, "subsizes")?, &ints(starts, ndims, "starts")?, c_order)?;
        let mut args = vec![ndims];
        args.extend(given(sizes, ndims, "sizes")?);
        args.extend(given(subsizes, ndims, "subsizes")?);
        args.extend(given(starts, ndims, "starts")?);
        args.push(order);
        new_type(d, MPI_COMBINER_SUBARRAY, args, vec![], &[oldtype], newtype)
    }

    fn MPI_Type_dup / PMPI_Type_dup(oldtype: c_int, newtype: *mut c_int) {
        let d = old(oldtype)?;
        new_type(d, MPI_COMBINER_DUP, vec![], vec![], &[oldtype], newtype)?;
        // Attributes go to the copy through their copy callbacks.
        let attrs: Vec<(c_int, *mut c_void)> = st()?.type_attrs.get(&oldtype).map(|a| a.iter().map(|(&k, &v)| (k, v)).collect()).unwrap_or_default();
        let h = read(newtype, "newtype")?;
        let copied = match crate::attr::copied_attrs(oldtype, attrs) {
            Ok(c) => c,
            Err(e) => {
                // A copy callback failed: so does the dup, leaving nothing.
                let mut s = st()?;
                s.types.remove(&h);
                s.type_ctors.remove(&h);
                drop(s);
                out(newtype, "newtype", MPI_DATATYPE_NULL)?;
                return Err(e);
            }
        };
        if !copied.is_empty() {
            let mut s = st()?;
            let t = s.type_attrs.entry(h).or_default();
            for (k, v) in copied {
                t.insert(k, v);
            }
        }
        Ok(())
    }

    fn MPI_Type_get_envelope / PMPI_Type_get_envelope(datatype: c_int, num_integers: *mut c_int, num_addresses: *mut c_int, num_datatypes: *mut c_int, combiner: *mut c_int) {
        let (ni, na, nd, comb) = if is_builtin(datatype) {
            (0, 0, 0, MPI_COMBINER_NAMED)
        } else {
            let c = ctor_of(datatype)?;
            if !c.large.is_empty() {
                return large_made();
            }
            (c.ints.len(), c.aints.len(), c.types.len(), c.combiner)
        };
        out(num_integers, "num_integers", ni as c_int)?;
        out(num_addresses, "num_addresses", na as c_int)?;
        out(num_datatypes, "num_datatypes", nd as c_int)?;
        out(combiner, "combiner", comb)
    }

    fn MPI_Type_get_contents / PMPI_Type_get_contents(datatype: c_int, max_integers: c_int, max_addresses: c_int, max_datatypes: c_int, array_of_integers: *mut c_int, array_of_addresses: *mut isize, array_of_datatypes: *mut c_int) {
        if is_builtin(datatype) {
            return err(MPI_ERR_TYPE, "a predefined datatype has no contents (its combiner is MPI_COMBINER_NAMED)");
        }
        let c = ctor_of(datatype)?;
        if !c.large.is_empty() {
            return large_made();
        }
        contents(&c, [max_integers as i64, max_addresses as i64, 0, max_datatypes as i64], array_of_integers, array_of_addresses, std::ptr::null_mut(), array_of_datatypes)
    }

    fn MPI_Type_get_envelope_c / PMPI_Type_get_envelope_c(datatype: c_int, num_integers: *mut i64, num_addresses: *mut i64, num_large_counts: *mut i64, num_datatypes: *mut i64, combiner: *mut c_int) {
        let (ni, na, nl, nd, comb) = if is_builtin(datatype) {
            (0, 0, 0, 0, MPI_COMBINER_NAMED)
        } else {
            let c = ctor_of(datatype)?;
            (c.ints.len(), c.aints.len(), c.large.len(), c.types.len(), c.combiner)
        };
        out(num_integers, "num_integers", ni as i64)?;
        out(num_addresses, "num_addresses", na as i64)?;
        out(num_large_counts, "num_large_counts", nl as i64)?;
        out(num_datatypes, "num_datatypes", nd as i64)?;
        out(combiner, "combiner", comb)
    }

    fn MPI_Type_get_contents_c / PMPI_Type_get_contents_c(datatype: c_int, max_integers: i64, max_addresses: i64, max_large_counts: i64, max_datatypes: i64, array_of_integers: *mut c_int, array_of_addresses: *mut isize, array_of_large_counts: *mut i64, array_of_datatypes: *mut c_int) {
        if is_builtin(datatype) {
            return err(MPI_ERR_TYPE, "a predefined datatype has no contents (its combiner is MPI_COMBINER_NAMED)");
        }
        let c = ctor_of(datatype)?;
        contents(&c, [max_integers, max_addresses, max_large_counts, max_datatypes], array_of_integers, array_of_addresses, array_of_large_counts, array_of_datatypes)
    }
}

/// A datatype made by a large-count constructor, asked for with the int forms.
fn large_made() -> R<()> {
    err(MPI_ERR_TYPE, "the datatype was made by a large-count (_c) constructor: use MPI_Type_get_envelope_c / MPI_Type_get_contents_c")
}

/// Writes what `MPI_Type_get_contents(_c)` returns, checking the room given.
fn contents(
    c: &TypeCtor,
    max: [i64; 4],
    ints_out: *mut c_int,
    addrs_out: *mut isize,
    large_out: *mut i64,
    types_out: *mut c_int,
) -> R<()> {
    let (ni, na, nl, nd) = (c.ints.len(), c.aints.len(), c.large.len(), c.types.len());
    if max[0] < ni as i64 || max[1] < na as i64 || max[2] < nl as i64 || max[3] < nd as i64 {
        return err(MPI_ERR_ARG, format!("the arrays hold {}, {}, {} and {} entries; the datatype has {ni} integers, {na} addresses, {nl} large counts and {nd} datatypes (see MPI_Type_get_envelope)", max[0], max[1], max[2], max[3]));
    }
    slice_mut(ints_out, ni as c_int, "array_of_integers")?.copy_from_slice(&c.ints);
    slice_mut(addrs_out, na as c_int, "array_of_addresses")?.copy_from_slice(&c.aints);
    slice_mut(large_out, nl as c_int, "array_of_large_counts")?.copy_from_slice(&c.large);
    {
        let out_types = slice_mut(types_out, nd as c_int, "array_of_datatypes")?;
        let mut s = st()?;
        for (o, t) in out_types.iter_mut().zip(&c.types) {
            *o = match t {
                TypeArg::Named(h) => *h,
                // A derived one comes back as a new handle (the program frees it).
                TypeArg::Derived(d, ctor) => {
                    let h = s.fresh(NEW_TYPE);
                    s.types.insert(h, (d.clone(), String::new()));
                    if let Some(ctor) = ctor {
                        s.type_ctors.insert(h, ctor.clone());
                    }
                    h
                }
            };
        }
        Ok(())
    }
}

mpi! {
    fn MPI_Type_commit / PMPI_Type_commit(datatype: *mut c_int) {
        let h = read(datatype, "datatype")?;
        old(h)?;
        Ok(())
    }

    fn MPI_Type_free / PMPI_Type_free(datatype: *mut c_int) {
        let h = read(datatype, "datatype")?;
        if is_builtin(h) {
            return err(MPI_ERR_TYPE, "a predefined datatype cannot be freed");
        }
        {
            let s = st()?;
            if !s.types.contains_key(&h) {
                return err(MPI_ERR_TYPE, format!("{h:#x} is not a datatype the program created"));
            }
            if s.f90_base.contains_key(&h) {
                return err(MPI_ERR_TYPE, "a parameterized Fortran 90 datatype (MPI_Type_create_f90_*) is predefined and cannot be freed");
            }
        }
        // The delete callbacks first (they may look at the type).
        crate::attr::delete_all_attrs(h, type_attrs)?;
        let mut s = st()?;
        s.type_attrs.remove(&h);
        s.type_ctors.remove(&h);
        s.types.remove(&h);
        drop(s);
        out(datatype, "datatype", MPI_DATATYPE_NULL)
    }

    fn MPI_Type_create_keyval / PMPI_Type_create_keyval(copy_fn: Option<CopyFn>, delete_fn: Option<DeleteFn>, keyval: *mut c_int, extra_state: *mut c_void) {
        crate::attr::create_keyval(crate::state::KeyvalFns::C(copy_fn, delete_fn), keyval, extra_state)
    }

    fn MPI_Type_free_keyval / PMPI_Type_free_keyval(keyval: *mut c_int) {
        crate::attr::free_keyval(keyval)
    }

    fn MPI_Type_set_attr / PMPI_Type_set_attr(datatype: c_int, keyval: c_int, attribute_val: *mut c_void) {
        crate::attr::known_keyval(keyval)?;
        crate::attr::replace_attr(datatype, keyval, Some(attribute_val), type_attrs, "datatype")
    }

    fn MPI_Type_get_attr / PMPI_Type_get_attr(datatype: c_int, keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) {
        let v = {
            let s = st()?;
            s.dtype(datatype)?;
            if !s.keyvals.contains_key(&keyval) {
                return err(MPI_ERR_KEYVAL, format!("{keyval:#x} is not a keyval"));
            }
            s.type_attrs.get(&datatype).and_then(|a| a.get(&keyval)).copied()
        };
        match v {
            Some(v) => {
                out(attribute_val as *mut *mut c_void, "attribute_val", v)?;
                out(flag, "flag", 1)
            }
            None => out(flag, "flag", 0),
        }
    }

    fn MPI_Type_delete_attr / PMPI_Type_delete_attr(datatype: c_int, keyval: c_int) {
        crate::attr::replace_attr(datatype, keyval, None, type_attrs, "datatype")
    }

    fn MPI_Type_match_size / PMPI_Type_match_size(typeclass: c_int, size: c_int, datatype: *mut c_int) {
        // The Fortran-named sized types (MPICH's handles carry the size in
        // bits 8-15): REAL4/8/16, INTEGER1/2/4/8, COMPLEX8/16/32.
        let candidates: &[c_int] = match typeclass {
            1 => &[0x4c000427, 0x4c000829, 0x4c00102b],
            2 => &[0x4c00012d, 0x4c00022f, 0x4c000430, 0x4c000831],
            3 => &[0x4c000828, 0x4c00102a, 0x4c00202c],
            t => {
                return err(
                    MPI_ERR_ARG,
                    format!("typeclass {t} is not MPI_TYPECLASS_REAL, _INTEGER or _COMPLEX"),
                )
            }
        };
        let found = candidates
            .iter()
            .copied()
            .find(|&h| size >= 0 && old(h).is_ok_and(|d| d.size() == size as usize));
        match found {
            Some(h) => out(datatype, "datatype", h),
            None => err(
                MPI_ERR_ARG,
                format!("no predefined type of typeclass {typeclass} has {size} bytes"),
            ),
        }
    }

    fn MPI_Type_size_x / PMPI_Type_size_x(datatype: c_int, size: *mut i64) {
        out(size, "size", old(datatype)?.size() as i64)
    }

    // The MPI-1 names (deprecated, removed in MPI-3), which old binaries call.
    fn MPI_Type_lb / PMPI_Type_lb(datatype: c_int, displacement: *mut isize) {
        out(displacement, "displacement", old(datatype)?.lb())
    }

    fn MPI_Type_ub / PMPI_Type_ub(datatype: c_int, displacement: *mut isize) {
        let d = old(datatype)?;
        out(displacement, "displacement", d.lb() + d.extent())
    }

    fn MPI_Type_get_extent_x / PMPI_Type_get_extent_x(datatype: c_int, lb: *mut i64, extent: *mut i64) {
        let d = old(datatype)?;
        out(lb, "lb", d.lb() as i64)?;
        out(extent, "extent", d.extent() as i64)
    }

    fn MPI_Type_extent / PMPI_Type_extent(datatype: c_int, extent: *mut isize) {
        out(extent, "extent", old(datatype)?.extent())
    }

    fn MPI_Type_get_true_extent_x / PMPI_Type_get_true_extent_x(datatype: c_int, true_lb: *mut i64, true_extent: *mut i64) {
        let d = old(datatype)?;
        out(true_lb, "true_lb", d.true_lb() as i64)?;
        out(true_extent, "true_extent", d.true_extent() as i64)
    }

    fn MPI_Type_set_name / PMPI_Type_set_name(datatype: c_int, type_name: *const c_char) {
        let n = in_str(type_name, "type_name")?;
        if let Some(e) = st()?.types.get_mut(&datatype) {
            e.1 = n;
        }
        Ok(())
    }

    fn MPI_Type_get_name / PMPI_Type_get_name(datatype: c_int, type_name: *mut c_char, resultlen: *mut c_int) {
        let set = st()?.types.get(&datatype).map(|e| e.1.clone()).filter(|n| !n.is_empty());
        let n = set.unwrap_or_else(|| {
            PREDEFINED_NAMES.iter().find(|p| p.0 == datatype).map_or(String::new(), |p| p.1.to_string())
        });
        out_str(type_name, MPI_MAX_OBJECT_NAME, resultlen, &n)
    }

    fn MPI_Pack_size / PMPI_Pack_size(incount: c_int, datatype: c_int, comm: c_int, size: *mut c_int) {
        pack_size(incount, datatype, comm, size)
    }

    fn MPI_Pack_size_c / PMPI_Pack_size_c(incount: i64, datatype: c_int, comm: c_int, size: *mut i64) {
        pack_size(incount, datatype, comm, size)
    }

    fn MPI_Pack / PMPI_Pack(inbuf: *const c_void, incount: c_int, datatype: c_int, outbuf: *mut c_void, outsize: c_int, position: *mut c_int, comm: c_int) {
        pack(inbuf, incount, datatype, outbuf, outsize, position, comm)
    }

    fn MPI_Pack_c / PMPI_Pack_c(inbuf: *const c_void, incount: i64, datatype: c_int, outbuf: *mut c_void, outsize: i64, position: *mut i64, comm: c_int) {
        pack(inbuf, incount, datatype, outbuf, outsize, position, comm)
    }

    fn MPI_Unpack / PMPI_Unpack(inbuf: *const c_void, insize: c_int, position: *mut c_int, outbuf: *mut c_void, outcount: c_int, datatype: c_int, comm: c_int) {
        unpack(inbuf, insize, position, outbuf, outcount, datatype, comm)
    }

    fn MPI_Unpack_c / PMPI_Unpack_c(inbuf: *const c_void, insize: i64, position: *mut i64, outbuf: *mut c_void, outcount: i64, datatype: c_int, comm: c_int) {
        unpack(inbuf, insize, position, outbuf, outcount, datatype, comm)
    }

    fn MPI_Pack_external / PMPI_Pack_external(datarep: *const c_char, inbuf: *const c_void, incount: c_int, datatype: c_int, outbuf: *mut c_void, outsize: isize, position: *mut isize) {
        pack_external(datarep, inbuf, incount as i64, datatype, outbuf, outsize, position)
    }

    fn MPI_Pack_external_c / PMPI_Pack_external_c(datarep: *const c_char, inbuf: *const c_void, incount: i64, datatype: c_int, outbuf: *mut c_void, outsize: isize, position: *mut isize) {
        pack_external(datarep, inbuf, incount, datatype, outbuf, outsize, position)
    }

    fn MPI_Unpack_external / PMPI_Unpack_external(datarep: *const c_char, inbuf: *const c_void, insize: isize, position: *mut isize, outbuf: *mut c_void, outcount: c_int, datatype: c_int) {
        unpack_external(datarep, inbuf, insize, position, outbuf, outcount as i64, datatype)
    }

    fn MPI_Unpack_external_c / PMPI_Unpack_external_c(datarep: *const c_char, inbuf: *const c_void, insize: isize, position: *mut isize, outbuf: *mut c_void, outcount: i64, datatype: c_int) {
        unpack_external(datarep, inbuf, insize, position, outbuf, outcount, datatype)
    }

    fn MPI_Pack_external_size / PMPI_Pack_external_size(datarep: *const c_char, incount: c_int, datatype: c_int, size: *mut isize) {
        check_datarep(datarep)?;
        let d = old(datatype)?;
        let x = external32::of_type(&d)?;
        out(size, "size", x.size(d.packed_size(state::count(incount)?)) as isize)
    }

    fn MPI_Pack_external_size_c / PMPI_Pack_external_size_c(datarep: *const c_char, incount: i64, datatype: c_int, size: *mut i64) {
        check_datarep(datarep)?;
        let d = old(datatype)?;
        let x = external32::of_type(&d)?;
        let n = usize::try_from(incount).or_else(|_| err(MPI_ERR_COUNT, format!("count {incount} is negative")))?;
        out(size, "size", x.size(d.packed_size(n)) as i64)
    }

    fn MPI_Get_address / PMPI_Get_address(location: *const c_void, address: *mut isize) {
        out(address, "address", location as isize)
    }

    fn MPI_Address / PMPI_Address(location: *const c_void, address: *mut isize) {
        out(address, "address", location as isize)
    }

    fn MPI_Alloc_mem / PMPI_Alloc_mem(size: isize, _info: c_int, baseptr: *mut c_void) {
        if size < 0 {
            return err(MPI_ERR_ARG, format!("size {size} is negative"));
        }
        // SAFETY: plain allocation; freed by MPI_Free_mem.
        let p = unsafe { libc::malloc(size.max(1) as usize) };
        if p.is_null() {
            return err(MPI_ERR_NO_MEM, format!("could not allocate {size} bytes"));
        }
        out(baseptr as *mut *mut c_void, "baseptr", p)
    }

    fn MPI_Free_mem / PMPI_Free_mem(base: *mut c_void) {
        // SAFETY: `base` came from MPI_Alloc_mem (malloc), as the standard requires.
        unsafe { libc::free(base) };
        Ok(())
    }
}

/// `PMPI_Aint_add`: `base + disp`.
#[no_mangle]
pub extern "C" fn PMPI_Aint_add(base: isize, disp: isize) -> isize {
    base.wrapping_add(disp)
}

/// `MPI_Aint_add`: calls `PMPI_Aint_add`.
#[no_mangle]
pub extern "C" fn MPI_Aint_add(base: isize, disp: isize) -> isize {
    PMPI_Aint_add(base, disp)
}

/// `PMPI_Aint_diff`: `addr1 - addr2`.
#[no_mangle]
pub extern "C" fn PMPI_Aint_diff(addr1: isize, addr2: isize) -> isize {
    addr1.wrapping_sub(addr2)
}

/// `MPI_Aint_diff`: calls `PMPI_Aint_diff`.
#[no_mangle]
pub extern "C" fn MPI_Aint_diff(addr1: isize, addr2: isize) -> isize {
    PMPI_Aint_diff(addr1, addr2)
}

/// The names of the predefined datatypes (`MPI_Type_get_name` of one the
/// program has not renamed), by handle; an alias has the name MPICH gives
/// it (`MPI_C_FLOAT_COMPLEX` is `MPI_C_COMPLEX`).
const PREDEFINED_NAMES: &[(c_int, &str)] = &[
    (0x0c000000, "MPI_DATATYPE_NULL"),
    (0x4c000246u32 as c_int, "MPIX_C_FLOAT16"),
    (0x4c000101u32 as c_int, "MPI_CHAR"),
    (0x4c000118u32 as c_int, "MPI_SIGNED_CHAR"),
    (0x4c000102u32 as c_int, "MPI_UNSIGNED_CHAR"),
    (0x4c00010du32 as c_int, "MPI_BYTE"),
    (0x4c00040eu32 as c_int, "MPI_WCHAR"),
    (0x4c000203u32 as c_int, "MPI_SHORT"),
    (0x4c000204u32 as c_int, "MPI_UNSIGNED_SHORT"),
    (0x4c000405u32 as c_int, "MPI_INT"),
    (0x4c000406u32 as c_int, "MPI_UNSIGNED"),
    (0x4c000807u32 as c_int, "MPI_LONG"),
    (0x4c000808u32 as c_int, "MPI_UNSIGNED_LONG"),
    (0x4c000809u32 as c_int, "MPI_LONG_LONG_INT"),
    (0x4c000819u32 as c_int, "MPI_UNSIGNED_LONG_LONG"),
    (0x4c00040au32 as c_int, "MPI_FLOAT"),
    (0x4c00080bu32 as c_int, "MPI_DOUBLE"),
    (0x4c00100cu32 as c_int, "MPI_LONG_DOUBLE"),
    (0x4c00010fu32 as c_int, "MPI_PACKED"),
    (0x4c000010u32 as c_int, "MPI_LB"),
    (0x4c000011u32 as c_int, "MPI_UB"),
    (0x4c00013fu32 as c_int, "MPI_C_BOOL"),
    (0x4c000137u32 as c_int, "MPI_INT8_T"),
    (0x4c000238u32 as c_int, "MPI_INT16_T"),
    (0x4c000439u32 as c_int, "MPI_INT32_T"),
    (0x4c00083au32 as c_int, "MPI_INT64_T"),
    (0x4c00013bu32 as c_int, "MPI_UINT8_T"),
    (0x4c00023cu32 as c_int, "MPI_UINT16_T"),
    (0x4c00043du32 as c_int, "MPI_UINT32_T"),
    (0x4c00083eu32 as c_int, "MPI_UINT64_T"),
    (0x4c000840u32 as c_int, "MPI_C_COMPLEX"),
    (0x4c001041u32 as c_int, "MPI_C_DOUBLE_COMPLEX"),
    (0x4c002042u32 as c_int, "MPI_C_LONG_DOUBLE_COMPLEX"),
    (0x4c000843u32 as c_int, "MPI_AINT"),
    (0x4c000844u32 as c_int, "MPI_OFFSET"),
    (0x4c000845u32 as c_int, "MPI_COUNT"),
    (0x4c000133u32 as c_int, "MPI_CXX_BOOL"),
    (0x4c000834u32 as c_int, "MPI_CXX_FLOAT_COMPLEX"),
    (0x4c001035u32 as c_int, "MPI_CXX_DOUBLE_COMPLEX"),
    (0x4c002036u32 as c_int, "MPI_CXX_LONG_DOUBLE_COMPLEX"),
    (0x8c000000u32 as c_int, "MPI_FLOAT_INT"),
    (0x8c000001u32 as c_int, "MPI_DOUBLE_INT"),
    (0x8c000002u32 as c_int, "MPI_LONG_INT"),
    (0x8c000003u32 as c_int, "MPI_SHORT_INT"),
    (0x4c000816u32 as c_int, "MPI_2INT"),
    (0x8c000004u32 as c_int, "MPI_LONG_DOUBLE_INT"),
    (0x4c00081eu32 as c_int, "MPI_COMPLEX"),
    (0x4c001022u32 as c_int, "MPI_DOUBLE_COMPLEX"),
    (0x4c00041du32 as c_int, "MPI_LOGICAL"),
    (0x4c00041cu32 as c_int, "MPI_REAL"),
    (0x4c00081fu32 as c_int, "MPI_DOUBLE_PRECISION"),
    (0x4c00041bu32 as c_int, "MPI_INTEGER"),
    (0x4c000820u32 as c_int, "MPI_2INTEGER"),
    (0x4c000821u32 as c_int, "MPI_2REAL"),
    (0x4c001023u32 as c_int, "MPI_2DOUBLE_PRECISION"),
    (0x4c00011au32 as c_int, "MPI_CHARACTER"),
    (0x4c000427u32 as c_int, "MPI_REAL4"),
    (0x4c000829u32 as c_int, "MPI_REAL8"),
    (0x4c00102bu32 as c_int, "MPI_REAL16"),
    (0x4c000828u32 as c_int, "MPI_COMPLEX8"),
    (0x4c00102au32 as c_int, "MPI_COMPLEX16"),
    (0x4c00202cu32 as c_int, "MPI_COMPLEX32"),
    (0x4c00012du32 as c_int, "MPI_INTEGER1"),
    (0x4c00022fu32 as c_int, "MPI_INTEGER2"),
    (0x4c000430u32 as c_int, "MPI_INTEGER4"),
    (0x4c000831u32 as c_int, "MPI_INTEGER8"),
];

/// `MPI_Pack_size(_c)`: an upper bound of the packed size (exact here); a
/// size an `int` cannot hold is `MPI_UNDEFINED` in the classic form.
fn pack_size<E: Entry>(incount: E, datatype: c_int, comm: c_int, size: *mut E) -> R<()> {
    let n = count_of(incount)?;
    st()?.comm_entry(comm)?;
    let b = old(datatype)?.packed_size(n);
    let undefined = E::narrow(i64::from(MPI_UNDEFINED)).expect("MPI_UNDEFINED is an int");
    out(size, "size", E::narrow(b as i64).unwrap_or(undefined))
}

/// The bytes `[pos, pos + need)` of a pack buffer of `size` bytes, and the
/// position after them, or `MPI_ERR_TRUNCATE` naming what overran.
fn packed_range<E: Entry>(pos: E, need: usize, size: E, what: &str) -> R<(usize, E)> {
    let (p, size) = (pos.wide(), size.wide().max(0));
    let end = p.checked_add(need as i64).filter(|&e| p >= 0 && e <= size);
    match end.and_then(E::narrow) {
        Some(e) => Ok((p as usize, e)),
        None => err(
            MPI_ERR_TRUNCATE,
            format!("{need} bytes at position {p} {what} of {size} bytes"),
        ),
    }
}

/// `MPI_Pack(_c)`.
fn pack<E: Entry>(
    inbuf: *const c_void,
    incount: E,
    datatype: c_int,
    outbuf: *mut c_void,
    outsize: E,
    position: *mut E,
    comm: c_int,
) -> R<()> {
    st()?.comm_entry(comm)?;
    let d = old(datatype)?;
    let n = count_of(incount)?;
    let need = d.packed_size(n);
    let (at, end) = packed_range(
        read(position, "position")?,
        need,
        outsize,
        "overrun the output buffer",
    )?;
    if need > 0 {
        if outbuf.is_null() {
            return err(MPI_ERR_BUFFER, "`outbuf` is NULL");
        }
        // SAFETY: the caller passes `outsize` writable bytes at `outbuf`, of
        // which `[at, at + need)` lies inside (checked above), and
        // `incount` elements of `datatype` at `inbuf`.
        unsafe {
            let o = std::slice::from_raw_parts_mut((outbuf as *mut u8).add(at), need);
            d.pack(inbuf as *const u8, n, o);
        }
    }
    out(position, "position", end)
}

/// `MPI_Unpack(_c)`.
fn unpack<E: Entry>(
    inbuf: *const c_void,
    insize: E,
    position: *mut E,
    outbuf: *mut c_void,
    outcount: E,
    datatype: c_int,
    comm: c_int,
) -> R<()> {
    st()?.comm_entry(comm)?;
    let d = old(datatype)?;
    let n = count_of(outcount)?;
    let need = d.packed_size(n);
    let (at, end) = packed_range(
        read(position, "position")?,
        need,
        insize,
        "read past the input",
    )?;
    if need > 0 {
        if inbuf.is_null() {
            return err(MPI_ERR_BUFFER, "`inbuf` is NULL");
        }
        // SAFETY: the caller passes `insize` readable bytes at `inbuf`, of
        // which `[at, at + need)` lies inside (checked above), and room for
        // `outcount` elements of `datatype` at `outbuf`.
        unsafe {
            let i = std::slice::from_raw_parts((inbuf as *const u8).add(at), need);
            d.unpack(i, outbuf as *mut u8, n);
        }
    }
    out(position, "position", end)
}

// The queries programs make element by element (test suites' data
// checkers): without the label that names a blocking call in wait reports.
mpi_nb! {
    fn MPI_Type_size / PMPI_Type_size(datatype: c_int, size: *mut c_int) {
        if let Some(n) = crate::state::basic_size(datatype) {
            return out(size, "size", n as c_int);
        }
        let n = old(datatype)?.size();
        out(size, "size", c_int::try_from(n).unwrap_or(MPI_UNDEFINED))
    }

    fn MPI_Type_get_extent / PMPI_Type_get_extent(datatype: c_int, lb: *mut isize, extent: *mut isize) {
        if let Some(n) = crate::state::basic_size(datatype) {
            out(lb, "lb", 0)?;
            return out(extent, "extent", n as isize);
        }
        let d = old(datatype)?;
        out(lb, "lb", d.lb())?;
        out(extent, "extent", d.extent())
    }

    fn MPI_Type_get_true_extent / PMPI_Type_get_true_extent(datatype: c_int, true_lb: *mut isize, true_extent: *mut isize) {
        let d = old(datatype)?;
        out(true_lb, "true_lb", d.true_lb())?;
        out(true_extent, "true_extent", d.true_extent())
    }
}
