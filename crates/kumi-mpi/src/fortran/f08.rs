//! What `use mpi_f08` adds to the Fortran binding: choice buffers that
//! arrive as array descriptors, its sentinel objects, and the comparison of
//! handles.
//!
//! The ABI, as gfortran and MPICH have it (`mpi_f08`'s procedures are not
//! `BIND(C)`, so a program built against MPICH's module calls the same
//! symbols with the same arguments as one built against kumi's):
//! - a procedure with a choice buffer is `mpi_x_f08ts_`, one without is
//!   `mpi_x_f08_` (profiling names `pmpir_x_f08ts_`/`pmpir_x_f08_`);
//! - every argument but the buffers is passed as `mpif.h`'s are (a handle
//!   type is `BIND(C)` around one `INTEGER`, `TYPE(MPI_Status)` is the five
//!   integers of the C struct, string lengths are appended), and an absent
//!   `OPTIONAL` `ierror` is a null pointer; so those procedures are the
//!   `mpif.h` wrappers under more names;
//! - a `TYPE(*), DIMENSION(..)` buffer is gfortran's own array descriptor
//!   ([`Desc`]), whose base address is the section's first element; an
//!   array section need not be contiguous (`MPI_SUBARRAYS_SUPPORTED` is
//!   true). A blocking call gets a contiguous copy of a section that is not
//!   ([`Copied`]), copied back after the call where the buffer is written; a
//!   nonblocking call, whose buffer is in use after it returns, gets the
//!   section described by a datatype instead ([`Section`]).

use super::Fint;
use crate::consts::{MPI_ERR_BUFFER, MPI_SUCCESS};
use std::ffi::{c_int, c_void};

/// One dimension of gfortran's array descriptor.
#[repr(C)]
struct Dim {
    /// Distance between elements, in units of [`Desc::span`] bytes.
    stride: isize,
    lbound: isize,
    ubound: isize,
}

/// gfortran's array descriptor (libgfortran's `GFC_ARRAY_DESCRIPTOR`, the
/// layout of GCC 8 and later: `libgfortran.so.5`), followed by `rank` [`Dim`]s.
#[repr(C)]
pub(crate) struct Desc {
    /// The first element of the array or section.
    base: *mut u8,
    offset: isize,
    elem_len: usize,
    version: c_int,
    rank: i8,
    kind: i8,
    attribute: i16,
    /// Bytes per unit of stride.
    span: isize,
}

/// Fortran 2008's largest rank.
const MAX_RANK: usize = 15;

/// A buffer's elements as they lie in memory.
struct Shape {
    base: *mut u8,
    elem: usize,
    rank: usize,
    /// (extent, byte stride) of each dimension, the fastest first.
    dims: [(usize, isize); MAX_RANK],
}

impl Shape {
    /// The shape `d` describes.
    ///
    /// # Safety
    /// `d` must be a descriptor gfortran passed, valid for the call.
    unsafe fn of(d: *const Desc) -> Shape {
        // SAFETY: the caller's contract; the dimensions follow the header.
        unsafe {
            let h = &*d;
            let rank = (h.rank.max(0) as usize).min(MAX_RANK);
            let dim = d.add(1).cast::<Dim>();
            let mut dims = [(0, 0); MAX_RANK];
            for (i, slot) in dims.iter_mut().enumerate().take(rank) {
                let x = &*dim.add(i);
                let extent = (x.ubound - x.lbound + 1).max(0) as usize;
                *slot = (extent, x.stride.wrapping_mul(h.span));
            }
            Shape {
                base: h.base,
                elem: h.elem_len,
                rank,
                dims,
            }
        }
    }

    fn dims(&self) -> &[(usize, isize)] {
        &self.dims[..self.rank]
    }

    fn elements(&self) -> usize {
        self.dims().iter().map(|d| d.0).product()
    }

    /// Whether the elements lie one after the other (a scalar, an empty
    /// array and a whole array always do).
    fn contiguous(&self) -> bool {
        if self.elements() == 0 {
            return true;
        }
        let mut next = self.elem as isize;
        for &(extent, stride) in self.dims() {
            if extent > 1 && stride != next {
                return false;
            }
            next = next.wrapping_mul(extent as isize);
        }
        true
    }

    /// Calls `f` with each element's address, in array element order.
    fn each(&self, mut f: impl FnMut(*mut u8)) {
        let n = self.elements();
        let mut index = [0usize; MAX_RANK];
        let mut p = self.base;
        for _ in 0..n {
            f(p);
            // Odometer: step the fastest dimension, carry into the next.
            for (i, &(extent, stride)) in self.dims().iter().enumerate() {
                index[i] += 1;
                p = p.wrapping_offset(stride);
                if index[i] < extent {
                    break;
                }
                index[i] = 0;
                p = p.wrapping_offset(-stride * extent as isize);
            }
        }
    }
}

/// The address of a buffer whose first element is all the call uses
/// (`MPI_Get_address`, a window's base, an attached buffer).
///
/// # Safety
/// `d` must be a descriptor gfortran passed, valid for the call.
#[inline]
pub(crate) unsafe fn first(d: *const Desc) -> *mut c_void {
    // SAFETY: the caller's contract.
    unsafe { (*d).base.cast() }
}

/// A blocking call's buffer: the section itself if contiguous, else a
/// contiguous copy of it (copied back by [`Copied::finish`] if `back`).
pub(crate) struct Copied {
    shape: Shape,
    copy: Option<Vec<u8>>,
    back: bool,
}

impl Copied {
    /// # Safety
    /// `d` must be a descriptor gfortran passed, valid for the call.
    #[inline]
    pub(crate) unsafe fn new(d: *const Desc, back: bool) -> Copied {
        // SAFETY: the caller's contract.
        let shape = unsafe { Shape::of(d) };
        let copy = (!shape.contiguous()).then(|| {
            // The elements in, written or not: a call that writes fewer
            // than all of them leaves the others as they were.
            let mut v = Vec::with_capacity(shape.elements() * shape.elem);
            shape.each(|p| {
                // SAFETY: `p` is an element of the section, `elem` bytes.
                v.extend_from_slice(unsafe { std::slice::from_raw_parts(p, shape.elem) })
            });
            v
        });
        Copied { shape, copy, back }
    }

    /// The address to give the C function.
    #[inline]
    pub(crate) fn addr(&mut self) -> *mut c_void {
        match &mut self.copy {
            Some(v) => v.as_mut_ptr().cast(),
            None => self.shape.base.cast(),
        }
    }

    /// After the call: a written section gets its elements back.
    #[inline]
    pub(crate) fn finish(self) {
        let (Some(v), true) = (&self.copy, self.back) else {
            return;
        };
        let mut src = v.chunks_exact(self.shape.elem);
        self.shape.each(|p| {
            if let Some(e) = src.next() {
                // SAFETY: `p` is an element of the section, `elem` bytes,
                // and `e` one element of the copy.
                unsafe { std::ptr::copy_nonoverlapping(e.as_ptr(), p, e.len()) };
            }
        });
    }
}

/// A nonblocking call's buffer with its own count and datatype: the section
/// itself, described by a datatype (freed on drop: MPI keeps a datatype in
/// use by a pending operation alive) where it is not contiguous.
pub(crate) struct Section {
    addr: *mut c_void,
    temp: Option<Fint>,
}

/// A count as a call takes it: `INTEGER`, or the large-count forms'
/// `INTEGER(KIND=MPI_COUNT_KIND)`.
pub(crate) trait Count: Copy {
    /// The count, widened.
    fn get(self) -> i64;
    /// One.
    const ONE: Self;
}

impl Count for Fint {
    fn get(self) -> i64 {
        i64::from(self)
    }
    const ONE: Self = 1;
}

impl Count for i64 {
    fn get(self) -> i64 {
        self
    }
    const ONE: Self = 1;
}

impl Section {
    /// The section `d` to be given as `*count` elements of `*datatype`;
    /// `count` and `datatype` are rewritten to describe it (1 of a new type)
    /// where it is not contiguous. `Err` holds the error code, already
    /// handed to the error handler.
    ///
    /// # Safety
    /// `d` must be a descriptor gfortran passed, `count` and `datatype`
    /// valid, for the call.
    pub(crate) unsafe fn new<C: Count>(
        name: &'static str,
        d: *const Desc,
        count: &mut C,
        datatype: &mut Fint,
    ) -> Result<Section, c_int> {
        // SAFETY: the caller's contract.
        let shape = unsafe { Shape::of(d) };
        let addr = shape.base.cast();
        if shape.contiguous() {
            return Ok(Section { addr, temp: None });
        }
        let mut size: c_int = 0;
        // SAFETY: `size` is a live local.
        let rc = unsafe { crate::types::PMPI_Type_size(*datatype, &mut size) };
        if rc != MPI_SUCCESS {
            return Err(rc);
        }
        let steps = match plan(shape.dims(), shape.elem, size, count.get()) {
            Ok(s) => s,
            Err(why) => return Err(fail(name, why)),
        };
        let mut t = *datatype;
        let mut temp = None;
        for (n, stride) in steps {
            let mut next: Fint = 0;
            // SAFETY: `next` is a live local; `t` a datatype (the caller's,
            // or the previous step's).
            let rc = unsafe {
                let rc =
                    crate::types::PMPI_Type_create_hvector_c(n, 1, stride as i64, t, &mut next);
                if rc == MPI_SUCCESS {
                    crate::types::PMPI_Type_commit(&mut next)
                } else {
                    rc
                }
            };
            if let Some(mut old) = temp.take() {
                // SAFETY: `old` is this function's own type.
                unsafe { crate::types::PMPI_Type_free(&mut old) };
            }
            if rc != MPI_SUCCESS {
                return Err(rc);
            }
            t = next;
            temp = Some(next);
        }
        *count = C::ONE;
        *datatype = t;
        Ok(Section { addr, temp })
    }

    /// A nonblocking call's buffer without a count and datatype of its own
    /// (shared with another buffer): the section, which must be contiguous.
    ///
    /// # Safety
    /// `d` must be a descriptor gfortran passed, valid for the call.
    pub(crate) unsafe fn contiguous(name: &'static str, d: *const Desc) -> Result<Section, c_int> {
        // SAFETY: the caller's contract.
        let shape = unsafe { Shape::of(d) };
        if !shape.contiguous() {
            return Err(fail(
                name,
                "a nonblocking call needs this buffer contiguous (its datatype describes \
                 another buffer too): pass a contiguous array, or a copy of the section"
                    .into(),
            ));
        }
        Ok(Section {
            addr: shape.base.cast(),
            temp: None,
        })
    }

    /// The address to give the C function.
    #[inline]
    pub(crate) fn addr(&self) -> *mut c_void {
        self.addr
    }
}

impl Drop for Section {
    fn drop(&mut self) {
        if let Some(mut t) = self.temp.take() {
            // SAFETY: `t` is this section's own type.
            unsafe { crate::types::PMPI_Type_free(&mut t) };
        }
    }
}

/// Hands error `why` of call `name` to the error handler; its code.
#[cold]
fn fail(name: &'static str, why: String) -> c_int {
    crate::guard_plain(name, || crate::err(MPI_ERR_BUFFER, why))
}

/// How `count` elements of a datatype of `size` bytes lie in a section of
/// elements of `elem` bytes with dimensions `dims`: nested `hvector`s of
/// (count, byte stride), innermost first. Each array element holds one
/// datatype element, and `count` is whole rows of the section's leading
/// dimensions (else the layout is no nest of vectors).
fn plan(
    dims: &[(usize, isize)],
    elem: usize,
    size: c_int,
    count: i64,
) -> Result<Vec<(i64, isize)>, String> {
    if usize::try_from(size).ok() != Some(elem) {
        return Err(format!(
            "a non-contiguous array section of {elem}-byte elements with a datatype of \
             {size} bytes: kumi describes a section only when each array element is one \
             datatype element; pass a contiguous array"
        ));
    }
    let count = usize::try_from(count).map_err(|_| format!("count {count} is negative"))?;
    let total: usize = dims.iter().map(|d| d.0).product();
    if count > total {
        return Err(format!(
            "count {count} is more than the {total} elements of the array section"
        ));
    }
    let mut steps = Vec::new();
    let mut whole = 1usize; // elements in one step of the nest so far
    for &(extent, stride) in dims {
        if count % whole != 0 {
            return Err(format!(
                "count {count} is not whole rows of the array section ({whole} elements \
                 each); pass a contiguous array"
            ));
        }
        let rows = count / whole;
        let n = rows.min(extent);
        steps.push((n as i64, stride));
        if rows <= extent {
            break;
        }
        whole *= extent;
    }
    Ok(steps)
}

/// The `mpi_f08` sentinels, under MPICH's names and sizes: a program built
/// against MPICH's module refers to these symbols; kumi's module binds its
/// constants to the same ones.
///
/// SAFETY (of `static mut`): nothing in kumi reads or writes these; only
/// their addresses are compared.
#[allow(non_upper_case_globals)]
pub(crate) mod objects {
    use super::super::{Fint, STATUS_SIZE};
    /// `MPI_BOTTOM`.
    #[no_mangle]
    pub static mut MPIR_F08_MPI_BOTTOM: Fint = 0;
    /// `MPI_IN_PLACE`.
    #[no_mangle]
    pub static mut MPIR_F08_MPI_IN_PLACE: Fint = 0;
    /// `MPI_STATUS_IGNORE`.
    #[no_mangle]
    pub static mut MPIR_F08_MPI_STATUS_IGNORE_OBJ: [Fint; STATUS_SIZE] = [0; STATUS_SIZE];
    /// `MPI_STATUSES_IGNORE` (one status long).
    #[no_mangle]
    pub static mut MPIR_F08_MPI_STATUSES_IGNORE_OBJ: [Fint; STATUS_SIZE] = [0; STATUS_SIZE];
    /// `MPI_UNWEIGHTED`.
    #[no_mangle]
    pub static mut __mpi_f08_link_constants_MOD_mpi_unweighted: [Fint; 1] = [0];
    /// `MPI_WEIGHTS_EMPTY`.
    #[no_mangle]
    pub static mut __mpi_f08_link_constants_MOD_mpi_weights_empty: [Fint; 1] = [0];
    /// `MPI_ERRCODES_IGNORE`.
    #[no_mangle]
    pub static mut __mpi_f08_link_constants_MOD_mpi_errcodes_ignore: [Fint; 1] = [0];
    /// `MPI_ARGV_NULL`.
    #[no_mangle]
    pub static mut __mpi_f08_link_constants_MOD_mpi_argv_null: [u8; 1] = [0];
    /// `MPI_ARGVS_NULL`.
    #[no_mangle]
    pub static mut __mpi_f08_link_constants_MOD_mpi_argvs_null: [u8; 1] = [0];
}

/// Whether `p` is the address of `mpi_f08`'s sentinel `obj`.
macro_rules! is {
    ($p:expr, $obj:ident) => {
        $p.cast::<u8>().cast_const()
            == (&raw const $crate::fortran::f08::objects::$obj).cast::<u8>()
    };
}
pub(crate) use is;

/// The handles' `==` (and `.EQ.`): the same integer. Every handle type's
/// (kumi's module declares one function per type; MPICH's module has these
/// names, and its mixed handle-and-integer forms, which compare the same).
///
/// # Safety
/// Both arguments valid for one integer.
unsafe extern "C" fn handle_eq(a: *const Fint, b: *const Fint) -> Fint {
    // SAFETY: the caller's contract.
    Fint::from(unsafe { *a == *b })
}

/// The handles' `/=`.
///
/// # Safety
/// Both arguments valid for one integer.
unsafe extern "C" fn handle_ne(a: *const Fint, b: *const Fint) -> Fint {
    // SAFETY: the caller's contract.
    Fint::from(unsafe { *a != *b })
}

/// The handles' `MPI_x_c2f`/`MPI_x_f2c` in `mpi_f08` (MPICH's module
/// procedures): the integer itself.
///
/// # Safety
/// The argument valid for one integer.
unsafe extern "C" fn handle_same(a: *const Fint) -> Fint {
    // SAFETY: the caller's contract.
    unsafe { *a }
}

/// Exports `$f` under each name.
macro_rules! names {
    ($f:ident $params:tt -> $r:ty; $($name:expr),*) => {$(
        super::fortran_entry!($name, $f, $params, $r);
    )*};
}

/// The comparisons of each handle type, under kumi's module's names and
/// MPICH's; and the conversions, under MPICH's (files have none: their C
/// handle is no integer).
macro_rules! handles {
    ($($t:literal $($conv:ident)?),*) => {$(
        names!(handle_eq(a: *const Fint, b: *const Fint) -> Fint;
            concat!("kumi_f08_", $t, "_eq_"),
            concat!("__mpi_f08_types_MOD_mpi_", $t, "_eq"),
            concat!("__mpi_f08_types_MOD_mpi_", $t, "_f08_eq_f"),
            concat!("__mpi_f08_types_MOD_mpi_", $t, "_f_eq_f08"));
        names!(handle_ne(a: *const Fint, b: *const Fint) -> Fint;
            concat!("kumi_f08_", $t, "_ne_"),
            concat!("__mpi_f08_types_MOD_mpi_", $t, "_neq"),
            concat!("__mpi_f08_types_MOD_mpi_", $t, "_f08_neq_f"),
            concat!("__mpi_f08_types_MOD_mpi_", $t, "_f_neq_f08"));
        $(
            handles!(@$conv $t);
        )?
    )*};
    (@conv $t:literal) => {
        names!(handle_same(a: *const Fint) -> Fint;
            concat!("__mpi_f08_types_MOD_mpi_", $t, "_c2f"),
            concat!("__mpi_f08_types_MOD_mpi_", $t, "_f2c"));
    };
}
handles!(
    "comm" conv, "datatype" conv, "errhandler" conv, "file", "group" conv, "info" conv,
    "message" conv, "op" conv, "request" conv, "session" conv, "win" conv
);

#[cfg(test)]
mod tests {
    use super::*;

    /// A shape over a buffer of `n` bytes at address 0x1000.
    fn shape(elem: usize, dims: &[(usize, isize)]) -> Shape {
        let mut d = [(0, 0); MAX_RANK];
        d[..dims.len()].copy_from_slice(dims);
        Shape {
            base: 0x1000 as *mut u8,
            elem,
            rank: dims.len(),
            dims: d,
        }
    }

    fn offsets(s: &Shape) -> Vec<isize> {
        let mut v = Vec::new();
        s.each(|p| v.push(p as isize - 0x1000));
        v
    }

    #[test]
    fn contiguity() {
        assert!(shape(8, &[]).contiguous(), "a scalar");
        assert!(shape(8, &[(10, 8), (4, 80)]).contiguous(), "a whole array");
        assert!(!shape(8, &[(1, 8), (4, 80)]).contiguous(), "a(1,:)");
        assert!(shape(8, &[(10, 8), (1, 999)]).contiguous(), "a(:,2:2)");
        assert!(shape(8, &[(0, 16)]).contiguous(), "an empty section");
        assert!(!shape(8, &[(5, 16)]).contiguous(), "a(1:10:2)");
        assert!(!shape(8, &[(3, -8)]).contiguous(), "a(3:1:-1)");
    }

    #[test]
    fn elements_in_array_order() {
        // a(3:8:2, 2:3) of real(8) a(10,4): (3,2) (5,2) (7,2) (3,3) ...
        let s = shape(8, &[(3, 16), (2, 80)]);
        assert_eq!(offsets(&s), vec![0, 16, 32, 80, 96, 112]);
        // a(3:1:-1): backwards.
        assert_eq!(offsets(&shape(4, &[(3, -4)])), vec![0, -4, -8]);
    }

    #[test]
    fn plans() {
        // a(1,:) of a(10,4), 4 elements: one vector of 4 with stride 80.
        assert_eq!(plan(&[(4, 80)], 8, 8, 4), Ok(vec![(4, 80)]));
        // Fewer than all: the first 3.
        assert_eq!(plan(&[(4, 80)], 8, 8, 3), Ok(vec![(3, 80)]));
        // a(1:10:2, :), all 20: rows of 5, then 4 rows 80 bytes apart.
        assert_eq!(
            plan(&[(5, 16), (4, 80)], 8, 8, 20),
            Ok(vec![(5, 16), (4, 80)])
        );
        // Two whole rows.
        assert_eq!(
            plan(&[(5, 16), (4, 80)], 8, 8, 10),
            Ok(vec![(5, 16), (2, 80)])
        );
        assert!(
            plan(&[(5, 16), (4, 80)], 8, 8, 7).is_err(),
            "not whole rows"
        );
        assert!(plan(&[(4, 80)], 8, 8, 5).is_err(), "more than the section");
        assert!(
            plan(&[(4, 80)], 8, 4, 4).is_err(),
            "element and datatype sizes differ"
        );
        assert!(plan(&[(4, 80)], 8, 8, -1).is_err(), "negative count");
        assert_eq!(plan(&[(4, 80)], 8, 8, 0), Ok(vec![(0, 80)]));
    }
}
