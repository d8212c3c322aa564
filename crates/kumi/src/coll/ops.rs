//! Reduction operations: built-ins over every primitive numeric type, and
//! user-defined ones.
//!
//! An [`Op<T>`] is typed, so a mismatch between buffer and operation is a
//! compile error; what the type system cannot say (a bitwise operation on
//! floats, `MinLoc` on a plain number) is an [`Error::InvalidArgument`] from the
//! collective, the same on every rank, so no rank waits for one that gave up.
//! The convention is MPI's: an operation computes `inout = in ⊕ inout`, and the
//! collectives combine contributions in rank order, so a non-commutative
//! operation (declared with [`Op::user`]) gets `x0 ⊕ x1 ⊕ ... ⊕ x(p-1)`.

use crate::error::{Error, Result};
use bytemuck::{Pod, Zeroable};
use std::sync::Arc;

/// The built-in operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    /// Sum (wrapping for integers).
    Sum,
    /// Product (wrapping for integers).
    Prod,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
    /// Logical and (nonzero is true; the result is 0 or 1).
    Land,
    /// Logical or.
    Lor,
    /// Logical exclusive or.
    Lxor,
    /// Bitwise and (integers only).
    Band,
    /// Bitwise or (integers only).
    Bor,
    /// Bitwise exclusive or (integers only).
    Bxor,
    /// Smallest value and its index ([`Loc`] pairs only; ties: smallest index).
    MinLoc,
    /// Largest value and its index ([`Loc`] pairs only; ties: smallest index).
    MaxLoc,
}

/// A (value, index) pair for [`Builtin::MinLoc`] and [`Builtin::MaxLoc`]
/// (MPI's `2INT`, `2DOUBLE_PRECISION`...: the index has the value's type).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Loc<T> {
    /// The value compared.
    pub value: T,
    /// Where it came from (a rank, an array index...).
    pub index: T,
}

// SAFETY: `Loc<T>` is `repr(C)` with two fields of the same `Pod` type, so it
// has no padding (a type's size is a multiple of its alignment) and every bit
// pattern of its bytes is a valid pair of `T`s.
unsafe impl<T: Pod> Zeroable for Loc<T> {}
// SAFETY: as above; `T: Pod` is `Copy + 'static`, and so is the pair.
unsafe impl<T: Pod> Pod for Loc<T> {}

/// Element types the built-in operations are defined on.
pub trait Elem: Pod {
    /// The type's name, for error messages.
    const NAME: &'static str;
    /// Whether `op` is defined on this type.
    fn supports(op: Builtin) -> bool;
    /// `inout[i] = a[i] ⊕ inout[i]`; `op` is supported.
    fn apply(op: Builtin, a: &[Self], inout: &mut [Self]);
}

/// `b[i] = f(a[i], b[i])`, with `f` inlined into the loop, which the
/// compiler vectorizes: with the widest vectors this CPU has (AVX-512 or
/// AVX2, asked at run time) for buffers of a few vectors or more: built for
/// baseline x86-64 it ran SSE2's two doubles per instruction, a visible
/// part of a long allreduce (docs/BENCHMARKS.md, session 11).
#[inline(always)]
fn lanes<T: Copy>(a: &[T], b: &mut [T], f: impl Fn(T, T) -> T) {
    #[cfg(target_arch = "x86_64")]
    if std::mem::size_of_val(b) >= 256 {
        if avx512() {
            // SAFETY: the CPU has the AVX-512 subsets and AVX2 that the
            // function is compiled for (asked just above).
            return unsafe { lanes_avx512(a, b, f) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (asked just above).
            return unsafe { lanes_avx2(a, b, f) };
        }
    }
    lanes_plain(a, b, f)
}

/// Whether the CPU has x86-64-v4's AVX-512 subsets (F, VL, DQ, BW) and AVX2.
/// All four: with F alone, LLVM fails to compile the float min/max loops
/// (it cannot select the mask operations without VL/DQ).
#[cfg(target_arch = "x86_64")]
#[inline]
fn avx512() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("avx512dq")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx2")
}

#[inline(always)]
fn lanes_plain<T: Copy>(a: &[T], b: &mut [T], f: impl Fn(T, T) -> T) {
    for (y, &x) in b.iter_mut().zip(a) {
        *y = f(x, *y);
    }
}

/// [`lanes_plain`] compiled for AVX-512 (the closure is inlined into it).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,avx2")]
unsafe fn lanes_avx512<T: Copy>(a: &[T], b: &mut [T], f: impl Fn(T, T) -> T) {
    lanes_plain(a, b, f)
}

/// [`lanes_plain`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn lanes_avx2<T: Copy>(a: &[T], b: &mut [T], f: impl Fn(T, T) -> T) {
    lanes_plain(a, b, f)
}

macro_rules! int_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const NAME: &'static str = stringify!($t);
            fn supports(op: Builtin) -> bool {
                !matches!(op, Builtin::MinLoc | Builtin::MaxLoc)
            }
            #[inline]
            fn apply(op: Builtin, a: &[Self], b: &mut [Self]) {
                // One loop per operation, each with its operation inlined, so
                // the compiler vectorizes it (a function pointer or a match per
                // element ran a 512 KiB fold 5-10x slower).
                match op {
                    Builtin::Sum => lanes(a, b, |x: $t, y: $t| x.wrapping_add(y)),
                    Builtin::Prod => lanes(a, b, |x: $t, y: $t| x.wrapping_mul(y)),
                    Builtin::Min => lanes(a, b, |x: $t, y: $t| x.min(y)),
                    Builtin::Max => lanes(a, b, |x: $t, y: $t| x.max(y)),
                    Builtin::Land => lanes(a, b, |x: $t, y: $t| (x != 0 && y != 0) as $t),
                    Builtin::Lor => lanes(a, b, |x: $t, y: $t| (x != 0 || y != 0) as $t),
                    Builtin::Lxor => lanes(a, b, |x: $t, y: $t| ((x != 0) != (y != 0)) as $t),
                    Builtin::Band => lanes(a, b, |x: $t, y: $t| x & y),
                    Builtin::Bor => lanes(a, b, |x: $t, y: $t| x | y),
                    Builtin::Bxor => lanes(a, b, |x: $t, y: $t| x ^ y),
                    Builtin::MinLoc | Builtin::MaxLoc => {}
                }
            }
        }
    )*};
}

int_elem!(i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize);

macro_rules! float_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const NAME: &'static str = stringify!($t);
            fn supports(op: Builtin) -> bool {
                !matches!(
                    op,
                    Builtin::Band | Builtin::Bor | Builtin::Bxor | Builtin::MinLoc | Builtin::MaxLoc
                )
            }
            #[inline]
            fn apply(op: Builtin, a: &[Self], b: &mut [Self]) {
                // One vectorizable loop per operation (see the integers').
                let t = |c: bool| if c { 1.0 } else { 0.0 };
                match op {
                    Builtin::Sum => lanes(a, b, |x: $t, y: $t| x + y),
                    Builtin::Prod => lanes(a, b, |x: $t, y: $t| x * y),
                    Builtin::Min => lanes(a, b, |x: $t, y: $t| x.min(y)),
                    Builtin::Max => lanes(a, b, |x: $t, y: $t| x.max(y)),
                    Builtin::Land => lanes(a, b, |x: $t, y: $t| t(x != 0.0 && y != 0.0)),
                    Builtin::Lor => lanes(a, b, |x: $t, y: $t| t(x != 0.0 || y != 0.0)),
                    Builtin::Lxor => lanes(a, b, |x: $t, y: $t| t((x != 0.0) != (y != 0.0))),
                    _ => {}
                }
            }
        }
    )*};
}

float_elem!(f32, f64);

impl<T: Elem + PartialOrd> Elem for Loc<T> {
    const NAME: &'static str = "Loc";
    fn supports(op: Builtin) -> bool {
        matches!(op, Builtin::MinLoc | Builtin::MaxLoc)
    }
    fn apply(op: Builtin, a: &[Self], b: &mut [Self]) {
        fold_loc(op, a, b, |p| (p.value, p.index));
    }
}

/// A value with a C `int` index, laid out as C lays out
/// `struct { V value; int index; }` (padding made explicit): MPI's
/// `MPI_FLOAT_INT`, `MPI_DOUBLE_INT`, `MPI_LONG_INT`, `MPI_SHORT_INT` and
/// `MPI_LONG_DOUBLE_INT`, for [`Builtin::MinLoc`] and [`Builtin::MaxLoc`].
/// (Pairs whose index has the value's type are [`Loc`].)
///
/// ```
/// use kumi::{Builtin, LocInt, Op};
/// let max = Op::<LocInt<f64>>::builtin(Builtin::MaxLoc);
/// let mut acc = [LocInt::new(2.5, 1)];
/// max.apply(&[LocInt::new(7.0, 3)], &mut acc).unwrap();
/// assert_eq!((acc[0].value, acc[0].index), (7.0, 3));
/// ```
#[repr(C)]
pub struct LocInt<V: LocValue> {
    /// The value compared.
    pub value: V,
    gap: V::Gap,
    /// Where it came from.
    pub index: i32,
    pad: V::Pad,
}

/// Value types of [`LocInt`] (sealed): each says the padding C puts
/// between the value and the index (`Gap`) and after the index (`Pad`).
pub trait LocValue: Elem + PartialOrd + sealed::Sealed {
    /// Bytes between the value and the index.
    type Gap: Pod + Default;
    /// Bytes after the index.
    type Pad: Pod + Default;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! loc_value {
    ($($t:ty => $gap:literal, $pad:literal, $size:literal;)*) => {$(
        impl sealed::Sealed for $t {}
        impl LocValue for $t {
            type Gap = [u8; $gap];
            type Pad = [u8; $pad];
        }
        // The explicit padding leaves none implicit: the fields fill the
        // struct (what makes the `Pod` below sound), and the size is C's.
        const _: () = assert!(
            std::mem::size_of::<LocInt<$t>>() == $size
                && std::mem::size_of::<$t>() + $gap + 4 + $pad == $size
        );
    )*};
}
loc_value! {
    f32 => 0, 0, 8;
    f64 => 0, 4, 16;
    i64 => 0, 4, 16;
    i16 => 2, 0, 8;
}
#[cfg(target_arch = "x86_64")]
loc_value! {
    super::LongDouble => 0, 12, 32;
}

impl<V: LocValue> LocInt<V> {
    /// The pair (`value`, `index`), padding zeroed.
    pub fn new(value: V, index: i32) -> LocInt<V> {
        LocInt {
            value,
            gap: Default::default(),
            index,
            pad: Default::default(),
        }
    }
}

impl<V: LocValue> Clone for LocInt<V> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<V: LocValue> Copy for LocInt<V> {}

impl<V: LocValue + std::fmt::Debug> std::fmt::Debug for LocInt<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocInt")
            .field("value", &self.value)
            .field("index", &self.index)
            .finish()
    }
}

impl<V: LocValue> PartialEq for LocInt<V> {
    /// Value and index (padding ignored).
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value && self.index == other.index
    }
}

// SAFETY: `repr(C)` with fields that fill it exactly (asserted for every
// `LocValue` above, and `LocValue` is sealed), each `Pod`: no padding, and
// every bit pattern is a valid value of each field.
unsafe impl<V: LocValue> Zeroable for LocInt<V> {}
// SAFETY: as above.
unsafe impl<V: LocValue> Pod for LocInt<V> {}

/// MinLoc/MaxLoc on pairs: MPI's rule (the better value; on a tie, the
/// smaller index).
#[inline]
fn fold_loc<T: Copy, V: PartialOrd, I: PartialOrd>(
    op: Builtin,
    a: &[T],
    b: &mut [T],
    key: impl Fn(&T) -> (V, I),
) {
    for (y, x) in b.iter_mut().zip(a) {
        let ((xv, xi), (yv, yi)) = (key(x), key(y));
        let better = match op {
            Builtin::MinLoc => xv < yv,
            _ => xv > yv,
        };
        if better || (xv == yv && xi < yi) {
            *y = *x;
        }
    }
}

impl<V: LocValue> Elem for LocInt<V> {
    const NAME: &'static str = "LocInt";
    fn supports(op: Builtin) -> bool {
        matches!(op, Builtin::MinLoc | Builtin::MaxLoc)
    }
    fn apply(op: Builtin, a: &[Self], b: &mut [Self]) {
        fold_loc(op, a, b, |p| (p.value, p.index));
    }
}

/// Complex numbers: sum and product, the operations MPI defines on them.
macro_rules! complex_elem {
    ($($t:ty),*) => {$(
        impl Elem for num_complex::Complex<$t> {
            const NAME: &'static str = concat!("Complex<", stringify!($t), ">");
            fn supports(op: Builtin) -> bool {
                matches!(op, Builtin::Sum | Builtin::Prod)
            }
            #[inline]
            fn apply(op: Builtin, a: &[Self], b: &mut [Self]) {
                match op {
                    Builtin::Sum => lanes(a, b, |x: Self, y: Self| x + y),
                    // (a+bi)(c+di) = (ac-bd) + (ad+bc)i, as C computes it
                    // (the same in either order of the operands).
                    Builtin::Prod => lanes(a, b, |x: Self, y: Self| x * y),
                    _ => {}
                }
            }
        }
    )*};
}
complex_elem!(f32, f64);

#[cfg(target_arch = "x86_64")]
impl Elem for super::LongDouble {
    const NAME: &'static str = "LongDouble";
    fn supports(op: Builtin) -> bool {
        !matches!(
            op,
            Builtin::Band | Builtin::Bor | Builtin::Bxor | Builtin::MinLoc | Builtin::MaxLoc
        )
    }
    fn apply(op: Builtin, a: &[Self], b: &mut [Self]) {
        use super::LongDouble as L;
        let t = |c: bool| L::from_f64(if c { 1.0 } else { 0.0 });
        let f = |x: L, y: L| match op {
            Builtin::Sum => x + y,
            Builtin::Prod => x * y,
            Builtin::Min => x.min(y),
            Builtin::Max => x.max(y),
            Builtin::Land => t(!x.is_zero() && !y.is_zero()),
            Builtin::Lor => t(!x.is_zero() || !y.is_zero()),
            Builtin::Lxor => t(x.is_zero() != y.is_zero()),
            _ => y,
        };
        lanes_plain(a, b, f);
    }
}

#[cfg(target_arch = "x86_64")]
impl Elem for num_complex::Complex<super::LongDouble> {
    const NAME: &'static str = "Complex<LongDouble>";
    fn supports(op: Builtin) -> bool {
        matches!(op, Builtin::Sum | Builtin::Prod)
    }
    fn apply(op: Builtin, a: &[Self], b: &mut [Self]) {
        let f = |x: Self, y: Self| match op {
            Builtin::Sum => Self::new(x.re + y.re, x.im + y.im),
            Builtin::Prod => Self::new(x.re * y.re - x.im * y.im, x.re * y.im + x.im * y.re),
            _ => y,
        };
        lanes_plain(a, b, f);
    }
}

/// How an [`Op`] combines: a built-in one is a plain function (making an
/// `Op` then allocates nothing, which the C ABI does on every reduction); a
/// user's is a shared closure.
pub(crate) enum Func<T> {
    Builtin(fn(&[T], &mut [T])),
    User(UserFn<T>),
}

/// A user's operation (see [`Op::user`]).
type UserFn<T> = Arc<dyn Fn(&[T], &mut [T]) + Send + Sync>;

impl<T> Clone for Func<T> {
    fn clone(&self) -> Self {
        match self {
            Func::Builtin(f) => Func::Builtin(*f),
            Func::User(f) => Func::User(f.clone()),
        }
    }
}

impl<T> Func<T> {
    /// `inout = in ⊕ inout`.
    #[inline]
    pub(crate) fn call(&self, input: &[T], inout: &mut [T]) {
        match self {
            Func::Builtin(f) => f(input, inout),
            Func::User(f) => f(input, inout),
        }
    }
}

/// The plain function of built-in `op` on `T`.
#[inline]
fn builtin_fn<T: Elem>(op: Builtin) -> fn(&[T], &mut [T]) {
    macro_rules! each {
        ($($v:ident),*) => {
            match op {
                $(Builtin::$v => |a: &[T], b: &mut [T]| T::apply(Builtin::$v, a, b),)*
            }
        };
    }
    each!(Sum, Prod, Min, Max, Land, Lor, Lxor, Band, Bor, Bxor, MinLoc, MaxLoc)
}

/// A reduction operation on elements of type `T`.
#[derive(Clone)]
pub struct Op<T> {
    pub(crate) f: Func<T>,
    pub(crate) commutative: bool,
    /// Why this operation cannot be used on `T` (checked by every collective).
    invalid: Option<String>,
    /// How many `T`s make one element the operation combines (see
    /// [`Op::user_grouped`]); 1 for every other operation.
    group: usize,
    /// `f` on bytes ([`Op::bytes_fn`]), made once: the nonblocking and
    /// message collectives take it per call, and a fresh one cost an
    /// allocation each time.
    bytes: std::sync::OnceLock<super::exec::ByteOp>,
}

impl<T> std::fmt::Debug for Op<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Op")
            .field("commutative", &self.commutative)
            .finish()
    }
}

impl<T: Pod> Op<T> {
    /// A user-defined operation: `f(in, inout)` sets `inout[i] = in[i] ⊕ inout[i]`.
    /// It must be associative; if it is not `commutative`, the collectives
    /// combine in rank order.
    ///
    /// ```
    /// // 2x2 matrix product, row-major: not commutative.
    /// let matmul = kumi::Op::<[f64; 4]>::user(false, |a, b| {
    ///     for (x, y) in a.iter().zip(b.iter_mut()) {
    ///         *y = [x[0] * y[0] + x[1] * y[2], x[0] * y[1] + x[1] * y[3],
    ///               x[2] * y[0] + x[3] * y[2], x[2] * y[1] + x[3] * y[3]];
    ///     }
    /// });
    /// # let _ = matmul;
    /// ```
    pub fn user(commutative: bool, f: impl Fn(&[T], &mut [T]) + Send + Sync + 'static) -> Op<T> {
        Self::user_grouped(1, commutative, f)
    }

    /// A user-defined operation on elements of `group` consecutive `T`s
    /// (a C struct, a small vector), whose size is known only at run time:
    /// `f` always gets whole groups (slices whose length is a multiple of
    /// `group`), and the collectives never split one between ranks or
    /// chunks. Every buffer (and count) of a collective with it must hold
    /// whole groups. This is how the MPI ABI runs a program's operation on
    /// a datatype of any extent, as bytes (`T = u8`).
    ///
    /// ```
    /// // Elements of 3 bytes: each group is summed as one 24-bit number.
    /// let op = kumi::Op::<u8>::user_grouped(3, true, |a, b| {
    ///     for (x, y) in a.chunks_exact(3).zip(b.chunks_exact_mut(3)) {
    ///         let v = |c: &[u8]| u32::from_le_bytes([c[0], c[1], c[2], 0]);
    ///         let s = (v(x) + v(y)).to_le_bytes();
    ///         y.copy_from_slice(&s[..3]);
    ///     }
    /// });
    /// let mut acc = [0xff, 0, 0];
    /// op.apply(&[1, 0, 0], &mut acc).unwrap();
    /// assert_eq!(acc, [0, 1, 0]);
    /// assert!(op.apply(&[1, 0], &mut [0, 0]).is_err());
    /// ```
    pub fn user_grouped(
        group: usize,
        commutative: bool,
        f: impl Fn(&[T], &mut [T]) + Send + Sync + 'static,
    ) -> Op<T> {
        Op {
            f: Func::User(Arc::new(f)),
            commutative,
            invalid: (group == 0).then(|| "an operation on groups of at least one element".into()),
            group: group.max(1),
            bytes: Default::default(),
        }
    }

    pub(crate) fn check(&self) -> Result<()> {
        match &self.invalid {
            None => Ok(()),
            Some(m) => Err(Error::InvalidArgument {
                arg: "op",
                value: 0,
                allowed: m.clone(),
            }),
        }
    }

    /// [`Op::check`] for a buffer of `len` elements: whole groups.
    pub(crate) fn check_for(&self, len: usize) -> Result<()> {
        self.check()?;
        if !len.is_multiple_of(self.group) {
            return Err(Error::InvalidArgument {
                arg: "count",
                value: len as i64,
                allowed: format!(
                    "a multiple of the operation's group of {} elements",
                    self.group
                ),
            });
        }
        Ok(())
    }

    /// Bytes of one indivisible element: what a collective may not split.
    pub(crate) fn unit_bytes(&self) -> usize {
        self.group * std::mem::size_of::<T>().max(1)
    }

    /// Elements per indivisible element (1 but for [`Op::user_grouped`]).
    pub(crate) fn group(&self) -> usize {
        self.group
    }

    /// Applies the operation: `inout[i] = in[i] ⊕ inout[i]` (for serial
    /// evaluations; collectives do this themselves).
    pub fn apply(&self, input: &[T], inout: &mut [T]) -> Result<()> {
        self.check_for(input.len())?;
        if input.len() != inout.len() {
            return Err(Error::InvalidArgument {
                arg: "inout",
                value: inout.len() as i64,
                allowed: format!("the length of input ({})", input.len()),
            });
        }
        self.f.call(input, inout);
        Ok(())
    }

    /// Whether the operation may combine in any order.
    pub fn is_commutative(&self) -> bool {
        self.commutative
    }

    /// `inout = in ⊕ inout` over bytes that hold whole, aligned `T`s.
    pub(crate) fn bytes_fn(&self) -> super::exec::ByteOp {
        self.bytes
            .get_or_init(|| {
                let f = self.f.clone();
                Arc::new(move |a: &[u8], b: &mut [u8]| {
                    f.call(bytemuck::cast_slice(a), bytemuck::cast_slice_mut(b))
                })
            })
            .clone()
    }
}

impl<T: Elem> Op<T> {
    /// A built-in operation. Using it on a type it is not defined for (bitwise
    /// operations on floats, `MinLoc` on plain numbers) makes the collective
    /// return [`Error::InvalidArgument`].
    #[inline]
    pub fn builtin(op: Builtin) -> Op<T> {
        let invalid = (!T::supports(op)).then(|| {
            format!(
                "{op:?} is not defined on {}: bitwise operations need integers, MinLoc/MaxLoc need kumi::Loc or kumi::LocInt pairs, complex numbers take Sum and Prod only",
                T::NAME
            )
        });
        Op {
            f: Func::Builtin(builtin_fn::<T>(op)),
            commutative: true,
            invalid,
            group: 1,
            bytes: Default::default(),
        }
    }
    /// Sum.
    pub fn sum() -> Op<T> {
        Self::builtin(Builtin::Sum)
    }
    /// Product.
    pub fn prod() -> Op<T> {
        Self::builtin(Builtin::Prod)
    }
    /// Minimum.
    pub fn min() -> Op<T> {
        Self::builtin(Builtin::Min)
    }
    /// Maximum.
    pub fn max() -> Op<T> {
        Self::builtin(Builtin::Max)
    }
}

/// Every built-in operation, for tests and sweeps.
pub const ALL_BUILTINS: [Builtin; 12] = [
    Builtin::Sum,
    Builtin::Prod,
    Builtin::Min,
    Builtin::Max,
    Builtin::Land,
    Builtin::Lor,
    Builtin::Lxor,
    Builtin::Band,
    Builtin::Bor,
    Builtin::Bxor,
    Builtin::MinLoc,
    Builtin::MaxLoc,
];

#[cfg(test)]
mod tests {
    use super::*;

    fn run<T: Elem>(op: Builtin, a: &[T], b: &[T]) -> Vec<T> {
        let mut out = b.to_vec();
        Op::<T>::builtin(op).f.call(a, &mut out);
        out
    }

    #[test]
    fn integer_and_float_arithmetic() {
        assert_eq!(run(Builtin::Sum, &[250u8], &[10]), vec![4]);
        assert_eq!(run(Builtin::Prod, &[-3i64], &[7]), vec![-21]);
        assert_eq!(run(Builtin::Min, &[2.5f64], &[-1.0]), vec![-1.0]);
        assert_eq!(run(Builtin::Max, &[u128::MAX], &[3]), vec![u128::MAX]);
        assert_eq!(run(Builtin::Land, &[2i32, 0], &[5, 5]), vec![1, 0]);
        assert_eq!(run(Builtin::Lxor, &[1.0f32], &[1.0]), vec![0.0]);
        assert_eq!(run(Builtin::Bxor, &[0b1100u16], &[0b1010]), vec![0b0110]);
        assert_eq!(run(Builtin::Bor, &[1isize], &[4]), vec![5]);
    }

    /// The vector paths give exactly what the scalar loop gives, element by
    /// element, at every length around the switch and the vector widths
    /// (tails included), for wrapping integers and for floats with NaNs,
    /// infinities and signed zeros.
    #[test]
    fn wide_vector_folds_equal_the_scalar_loop() {
        fn check<T: Elem + PartialEq + std::fmt::Debug>(gen: impl Fn(usize) -> T) {
            for n in [0, 1, 7, 31, 32, 33, 63, 64, 65, 127, 129, 1000, 4099] {
                let a: Vec<T> = (0..n).map(&gen).collect();
                let b: Vec<T> = (0..n).map(|i| gen(i * 7 + 3)).collect();
                for op in [
                    Builtin::Sum,
                    Builtin::Prod,
                    Builtin::Min,
                    Builtin::Max,
                    Builtin::Lxor,
                ] {
                    if !T::supports(op) {
                        continue;
                    }
                    let got = run(op, &a, &b);
                    let mut want = b.clone();
                    match op {
                        Builtin::Sum
                        | Builtin::Prod
                        | Builtin::Min
                        | Builtin::Max
                        | Builtin::Lxor => {
                            // The scalar loop, one element at a time.
                            for (i, w) in want.iter_mut().enumerate() {
                                let mut one = [*w];
                                T::apply(op, &a[i..i + 1], &mut one);
                                *w = one[0];
                            }
                        }
                        _ => unreachable!(),
                    }
                    // Bit for bit, except where IEEE 754 leaves the bits
                    // open: the sign of min and max of two zeros, and which
                    // NaN an operation on two NaNs returns (x86 returns an
                    // operand's, and the compiler may swap the operands of
                    // a commutative operation).
                    #[allow(clippy::eq_op)]
                    let same = |(x, y): (&T, &T)| {
                        bytemuck::bytes_of(x) == bytemuck::bytes_of(y)
                            || (matches!(op, Builtin::Min | Builtin::Max) && x == y)
                            || (x != x && y != y)
                    };
                    assert!(
                        got.iter().zip(&want).all(same),
                        "{op:?} on {n} {}: {got:?} != {want:?}",
                        T::NAME
                    );
                }
            }
        }
        let special = [
            f64::NAN,
            -0.0,
            0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e308,
            -2.5,
        ];
        check(|i| special[i % special.len()] * if i % 3 == 0 { 1.0 } else { 1.5 });
        check(|i| (special[i % special.len()] as f32) * 0.75);
        check(|i| (i as u8).wrapping_mul(37));
        check(|i| (i as i16).wrapping_mul(-1201));
        check(|i| (i as i32).wrapping_mul(0x3f3f_3f3f));
        check(|i| (i as i64).wrapping_mul(-0x1234_5678_9abc));
    }

    #[test]
    fn minloc_prefers_smallest_index_on_ties() {
        let a = [
            Loc {
                value: 3i32,
                index: 5,
            },
            Loc { value: 1, index: 9 },
        ];
        let b = [Loc { value: 3, index: 2 }, Loc { value: 2, index: 0 }];
        assert_eq!(
            run(Builtin::MinLoc, &a, &b),
            vec![Loc { value: 3, index: 2 }, Loc { value: 1, index: 9 }]
        );
        assert_eq!(run(Builtin::MaxLoc, &a, &b)[1], Loc { value: 2, index: 0 });
    }

    /// The C-layout pairs: MPI's rule, and the layout C gives
    /// `struct { short v; int i; }` (the index at byte 4).
    #[test]
    fn int_indexed_pairs_follow_the_loc_rule_in_c_layout() {
        let a = [
            LocInt::new(3.0f64, 5),
            LocInt::new(1.0, 9),
            LocInt::new(4.0, 1),
        ];
        let b = [
            LocInt::new(3.0f64, 2),
            LocInt::new(2.0, 0),
            LocInt::new(4.0, 0),
        ];
        let min = run(Builtin::MinLoc, &a, &b);
        assert_eq!(
            min,
            vec![
                LocInt::new(3.0, 2),
                LocInt::new(1.0, 9),
                LocInt::new(4.0, 0)
            ]
        );
        let max = run(Builtin::MaxLoc, &a, &b);
        assert_eq!(
            max,
            vec![
                LocInt::new(3.0, 2),
                LocInt::new(2.0, 0),
                LocInt::new(4.0, 0)
            ]
        );
        let s = LocInt::new(-7i16, 0x0102_0304);
        assert_eq!(bytemuck::bytes_of(&s), [0xf9, 0xff, 0, 0, 4, 3, 2, 1]);
        assert_eq!(std::mem::size_of::<LocInt<i64>>(), 16);
        assert_eq!(std::mem::align_of::<LocInt<f32>>(), 4);
        assert_eq!(
            run(
                Builtin::MaxLoc,
                &[LocInt::new(-1i64, 3)],
                &[LocInt::new(-2i64, 1)]
            ),
            vec![LocInt::new(-1, 3)]
        );
    }

    #[test]
    fn complex_sum_and_product() {
        use num_complex::Complex;
        let a = [Complex::new(1.0f64, 2.0), Complex::new(0.5, -1.0)];
        let b = [Complex::new(3.0f64, -1.0), Complex::new(2.0, 4.0)];
        assert_eq!(
            run(Builtin::Sum, &a, &b),
            vec![Complex::new(4.0, 1.0), Complex::new(2.5, 3.0)]
        );
        // (1+2i)(3-i) = 5+5i; (0.5-i)(2+4i) = 5+0i.
        assert_eq!(
            run(Builtin::Prod, &a, &b),
            vec![Complex::new(5.0, 5.0), Complex::new(5.0, 0.0)]
        );
        let f = [Complex::new(1.5f32, 0.0)];
        assert_eq!(run(Builtin::Prod, &f, &f), vec![Complex::new(2.25f32, 0.0)]);
        assert!(Op::<Complex<f64>>::builtin(Builtin::Max).check().is_err());
        // Long enough for the vector path.
        let n = 100;
        let a: Vec<Complex<f64>> = (0..n).map(|i| Complex::new(i as f64, 1.0)).collect();
        let got = run(Builtin::Prod, &a, &a);
        for (i, z) in got.iter().enumerate() {
            let x = i as f64;
            assert_eq!(*z, Complex::new(x * x - 1.0, 2.0 * x), "{i}");
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn long_double_operations() {
        use super::super::LongDouble as L;
        use num_complex::Complex;
        let l = L::from_f64;
        let v = |xs: Vec<L>| xs.into_iter().map(L::to_f64).collect::<Vec<_>>();
        let a = [l(1.5), l(-2.0), l(0.0)];
        let b = [l(2.0), l(3.0), l(7.0)];
        assert_eq!(v(run(Builtin::Sum, &a, &b)), [3.5, 1.0, 7.0]);
        assert_eq!(v(run(Builtin::Prod, &a, &b)), [3.0, -6.0, 0.0]);
        assert_eq!(v(run(Builtin::Min, &a, &b)), [1.5, -2.0, 0.0]);
        assert_eq!(v(run(Builtin::Max, &a, &b)), [2.0, 3.0, 7.0]);
        assert_eq!(v(run(Builtin::Land, &a, &b)), [1.0, 1.0, 0.0]);
        assert_eq!(v(run(Builtin::Lxor, &a, &b)), [0.0, 0.0, 1.0]);
        // The sum is a long double's, not a double's: 2^60 + 1 survives.
        let s = run(Builtin::Sum, &[l(2f64.powi(60))], &[l(1.0)]);
        assert!(s[0] != l(2f64.powi(60)));
        assert!(Op::<L>::builtin(Builtin::Band).check().is_err());
        // Complex long double: (1+2i)(3-i) = 5+5i.
        let c = |re, im| Complex::new(l(re), l(im));
        let p = run(Builtin::Prod, &[c(1.0, 2.0)], &[c(3.0, -1.0)]);
        assert_eq!((p[0].re.to_f64(), p[0].im.to_f64()), (5.0, 5.0));
        let q = run(Builtin::Sum, &[c(1.0, 2.0)], &[c(3.0, -1.0)]);
        assert_eq!((q[0].re.to_f64(), q[0].im.to_f64()), (4.0, 1.0));
        let m = run(
            Builtin::MinLoc,
            &[LocInt::new(l(1.0), 4)],
            &[LocInt::new(l(1.0), 2)],
        );
        assert_eq!(m[0].index, 2);
        assert_eq!(std::mem::size_of::<LocInt<L>>(), 32);
    }

    #[test]
    fn undefined_combinations_are_clear_errors() {
        let e = Op::<f64>::builtin(Builtin::Band).check().unwrap_err();
        assert!(e.to_string().contains("Band is not defined on f64"), "{e}");
        assert!(Op::<i32>::builtin(Builtin::MinLoc).check().is_err());
        assert!(Op::<Loc<f32>>::builtin(Builtin::Sum).check().is_err());
        assert!(Op::<u8>::builtin(Builtin::Bxor).check().is_ok());
    }
}
