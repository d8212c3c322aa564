//! C's `long double` on x86-64, for reductions of MPI's `MPI_LONG_DOUBLE`
//! and the types built on it (`MPI_C_LONG_DOUBLE_COMPLEX`,
//! `MPI_LONG_DOUBLE_INT`).
//!
//! Rust has no 80-bit float, so the value is kept as the 16 bytes C stores
//! (the x87 extended format in the first 10, padding in the other 6) and
//! every operation runs on the x87 unit itself, which is what C compiles
//! `long double` arithmetic to on this architecture: a sum computed here is
//! bit for bit the sum a C program computes, with the same rounding (the x87
//! precision control is left at Linux's default, 64-bit significands). A
//! software emulation would have to reproduce that rounding exactly; the
//! hardware does not have to be reproduced.
//!
//! Each operation loads its operands onto the x87 register stack, computes,
//! and stores the result, leaving the stack empty as the ABI requires
//! between functions (no Rust code on x86-64 uses the x87 registers).

use bytemuck::{Pod, Zeroable};
use std::arch::asm;
use std::cmp::Ordering;

/// A C `long double` (x86-64: 80-bit extended precision stored in 16 bytes).
///
/// Arithmetic and comparison run on the x87 unit, as in C. The padding bytes
/// of a result are zero; those of an operand are ignored.
///
/// ```
/// use kumi::LongDouble;
/// // 2^60 + 1 needs 61 significant bits: a double rounds the 1 away, a
/// // long double (64) keeps it.
/// let big = LongDouble::from_f64(2f64.powi(60));
/// let sum = big + LongDouble::from_f64(1.0);
/// assert_eq!((sum - big).to_f64(), 1.0);
/// assert_eq!(2f64.powi(60) + 1.0 - 2f64.powi(60), 0.0);
/// ```
#[repr(C, align(16))]
#[derive(Clone, Copy, Default, Pod, Zeroable)]
pub struct LongDouble([u8; 16]);

impl LongDouble {
    /// The value of `x` (exact: every double is a long double).
    pub fn from_f64(x: f64) -> LongDouble {
        let mut out = LongDouble::default();
        // SAFETY: reads 8 bytes at `&x` and writes 10 at `out`, both valid;
        // the value pushed onto the x87 stack is popped by `fstp`, so the
        // stack is empty again, and its registers are declared clobbered.
        unsafe {
            asm!(
                "fld qword ptr [{x}]",
                "fstp tbyte ptr [{o}]",
                x = in(reg) &x,
                o = in(reg) out.0.as_mut_ptr(),
                out("st(0)") _,
                options(nostack),
            )
        };
        out
    }

    /// The value rounded to the nearest double.
    pub fn to_f64(self) -> f64 {
        let mut out = 0f64;
        // SAFETY: as in `from_f64`, the other way round.
        unsafe {
            asm!(
                "fld tbyte ptr [{a}]",
                "fstp qword ptr [{o}]",
                a = in(reg) self.0.as_ptr(),
                o = in(reg) &mut out,
                out("st(0)") _,
                options(nostack),
            )
        };
        out
    }

    /// The 16 bytes as C stores them.
    pub fn to_bytes(self) -> [u8; 16] {
        self.0
    }

    /// The value whose C representation is `b` (padding bytes ignored).
    pub fn from_bytes(b: [u8; 16]) -> LongDouble {
        LongDouble(b)
    }

    /// Whether the value is a zero of either sign.
    pub fn is_zero(self) -> bool {
        // Exponent and significand all zero; bit 79 is the sign.
        self.0[..9].iter().all(|&b| b == 0) && self.0[9] & 0x7f == 0
    }

    /// Whether the value is not a number (by the x87's own comparison: a
    /// value unordered with itself).
    pub fn is_nan(self) -> bool {
        self.compare(self).is_none()
    }

    /// `self` ⊕ `other` by the x87 instruction `op` (`faddp`, `fmulp`...,
    /// each `st(1) = st(1) op st(0)` and a pop): `self` goes in `st(1)`.
    #[inline]
    fn arith(self, other: LongDouble, op: Arith) -> LongDouble {
        let mut out = LongDouble::default();
        let (a, b, o) = (self.0.as_ptr(), other.0.as_ptr(), out.0.as_mut_ptr());
        // One template per operation: the x87 instruction is part of it.
        macro_rules! x87 {
            ($insn:literal) => {
                asm!(
                    "fld tbyte ptr [{a}]", "fld tbyte ptr [{b}]",
                    concat!($insn, " st(1), st"), "fstp tbyte ptr [{o}]",
                    a = in(reg) a, b = in(reg) b, o = in(reg) o,
                    out("st(0)") _, out("st(1)") _, options(nostack),
                )
            };
        }
        // SAFETY: reads 10 bytes at `a` and `b`, writes 10 at `o`, all inside
        // live 16-byte values; two values are pushed, the operation pops one
        // and `fstp` the other, so the x87 stack ends empty; its registers
        // are declared clobbered.
        unsafe {
            match op {
                Arith::Add => x87!("faddp"),
                Arith::Sub => x87!("fsubp"),
                Arith::Mul => x87!("fmulp"),
                Arith::Div => x87!("fdivp"),
            }
        }
        out
    }

    /// How `self` compares with `other` (`None`: one is a NaN).
    fn compare(self, other: LongDouble) -> Option<Ordering> {
        let (below, equal, unordered): (u8, u8, u8);
        // SAFETY: reads 10 bytes at each operand; `fucomip` compares st(0)
        // (self) with st(1) (other) without faulting on quiet NaNs and pops
        // one, `fstp st(0)` pops the other: the stack ends empty. The flags
        // it sets are read at once by `setb`/`sete`/`setp`.
        unsafe {
            asm!(
                "fld tbyte ptr [{b}]",
                "fld tbyte ptr [{a}]",
                "fucomip st, st(1)",
                "fstp st(0)",
                "setb {lt}",
                "sete {eq}",
                "setp {un}",
                a = in(reg) self.0.as_ptr(),
                b = in(reg) other.0.as_ptr(),
                lt = out(reg_byte) below,
                eq = out(reg_byte) equal,
                un = out(reg_byte) unordered,
                out("st(0)") _,
                out("st(1)") _,
                options(nostack),
            )
        };
        // Unordered sets all three flags.
        match (unordered, below, equal) {
            (1, _, _) => None,
            (_, 1, _) => Some(Ordering::Less),
            (_, _, 1) => Some(Ordering::Equal),
            _ => Some(Ordering::Greater),
        }
    }

    /// The smaller value; a NaN loses to a number (as `f64::min`).
    pub fn min(self, other: LongDouble) -> LongDouble {
        match self.compare(other) {
            Some(Ordering::Greater) => other,
            None if self.is_nan() => other,
            _ => self,
        }
    }

    /// The larger value; a NaN loses to a number (as `f64::max`).
    pub fn max(self, other: LongDouble) -> LongDouble {
        match self.compare(other) {
            Some(Ordering::Less) => other,
            None if self.is_nan() => other,
            _ => self,
        }
    }
}

/// The x87 operations [`LongDouble::arith`] runs.
#[derive(Clone, Copy)]
enum Arith {
    Add,
    Sub,
    Mul,
    Div,
}

macro_rules! arith_op {
    ($($trait:ident $method:ident $op:ident),*) => {$(
        impl std::ops::$trait for LongDouble {
            type Output = LongDouble;
            fn $method(self, other: LongDouble) -> LongDouble {
                self.arith(other, Arith::$op)
            }
        }
    )*};
}
arith_op!(Add add Add, Sub sub Sub, Mul mul Mul, Div div Div);

impl std::ops::Neg for LongDouble {
    type Output = LongDouble;
    fn neg(mut self) -> LongDouble {
        self.0[9] ^= 0x80;
        self
    }
}

impl PartialEq for LongDouble {
    /// As C's `==`: a NaN equals nothing, and the two zeros are equal.
    fn eq(&self, other: &LongDouble) -> bool {
        self.compare(*other) == Some(Ordering::Equal)
    }
}

impl PartialOrd for LongDouble {
    fn partial_cmp(&self, other: &LongDouble) -> Option<Ordering> {
        self.compare(*other)
    }
}

impl std::fmt::Debug for LongDouble {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The nearest double, and the bytes that say the rest.
        write!(
            f,
            "LongDouble({:e} ~ {:02x?})",
            self.to_f64(),
            &self.0[..10]
        )
    }
}

impl From<f64> for LongDouble {
    fn from(x: f64) -> LongDouble {
        LongDouble::from_f64(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ld(x: f64) -> LongDouble {
        LongDouble::from_f64(x)
    }

    #[test]
    fn doubles_round_trip_exactly() {
        for x in [
            0.0,
            -0.0,
            1.0,
            -2.5,
            1e308,
            5e-324,
            f64::INFINITY,
            f64::MIN_POSITIVE,
        ] {
            assert_eq!(ld(x).to_f64().to_bits(), x.to_bits(), "{x}");
        }
        assert!(ld(f64::NAN).is_nan());
        assert!(!ld(1.0).is_nan());
        // 1.0 is significand 0x8000_0000_0000_0000, exponent 0x3fff.
        assert_eq!(
            ld(1.0).to_bytes()[..10],
            [0, 0, 0, 0, 0, 0, 0, 0x80, 0xff, 0x3f]
        );
    }

    /// The extra bits are really there: a sum that rounds away in a double
    /// survives in a long double (2^60 + 1 needs 61 significant bits).
    #[test]
    fn arithmetic_keeps_64_bit_significands() {
        let big = ld(2f64.powi(60));
        let sum = big + ld(1.0);
        assert!(sum != big);
        assert_eq!((sum - big).to_f64(), 1.0);
        assert_eq!((ld(3.0) * ld(-0.5)).to_f64(), -1.5);
        assert_eq!((ld(1.0) / ld(4.0)).to_f64(), 0.25);
        // 2^64 + 1 does not fit 64 bits: rounds to 2^64 here too.
        let b64 = ld(2f64.powi(64));
        assert!(b64 + ld(1.0) == b64);
    }

    #[test]
    fn comparisons_and_zeros() {
        assert!(ld(1.0) < ld(2.0));
        assert!(ld(-0.0) == ld(0.0));
        assert!(ld(-0.0).is_zero() && ld(0.0).is_zero() && !ld(1e-300).is_zero());
        assert_eq!(ld(1.0).max(ld(f64::NAN)).to_f64(), 1.0);
        assert_eq!(ld(f64::NAN).min(ld(-3.0)).to_f64(), -3.0);
        assert_eq!(ld(2.0).min(ld(-3.0)).to_f64(), -3.0);
        assert!(ld(f64::NAN).partial_cmp(&ld(0.0)).is_none());
        assert_eq!((-ld(2.0)).to_f64(), -2.0);
    }

    /// Padding bytes of an operand (whatever C left there) change nothing.
    #[test]
    fn padding_is_ignored() {
        let mut b = ld(1.5).to_bytes();
        b[10..].fill(0xa5);
        let x = LongDouble::from_bytes(b);
        assert!(x == ld(1.5));
        assert_eq!((x + x).to_bytes(), ld(3.0).to_bytes());
    }
}
