//! The `external32` data representation (`MPI_Pack_external`): every
//! predefined type big endian, at the fixed sizes of the standard's table.
//! Most types here have their external size and only change byte order;
//! `long` and `unsigned long` (8 bytes here, 4 there) and `wchar_t` (4 here,
//! 2 there) narrow, a value that does not fit being an error rather than a
//! silent truncation; x86's 80-bit `long double` (in 16 bytes) becomes IEEE
//! binary128. Pure conversions of packed bytes, tested without MPI.

use std::ffi::c_int;

use crate::consts::*;
use crate::{err, R};
use kumi::datatype::Datatype;

/// How the elements of one predefined type go to and from `external32`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Ext32 {
    /// The same size; every `unit` bytes reversed (a complex number or a
    /// pair of one kind: each half).
    Swap(usize),
    /// A native integer of `native` bytes as `ext` bytes.
    Narrow {
        native: usize,
        ext: usize,
        signed: bool,
    },
    /// x86's 80-bit extended precision (16 bytes each) as binary128.
    Quad,
}

/// How the elements of `d` go to and from `external32`: a type of one
/// predefined kind that kumi can convert, or an error.
pub(crate) fn of_type(d: &Datatype) -> R<Ext32> {
    let Some(b) = d.basic_element() else {
        return err(
            MPI_ERR_TYPE,
            "external32 of a datatype that mixes element kinds is not supported by kumi yet",
        );
    };
    match of(b.tag as c_int, b.size) {
        Some(x) => Ok(x),
        None => err(
            MPI_ERR_CONVERSION,
            format!(
                "converting datatype {:#x} to external32 is not supported by kumi yet",
                b.tag
            ),
        ),
    }
}

/// The conversion for predefined type `tag` of `size` bytes, if kumi knows
/// one.
pub(crate) fn of(tag: c_int, size: usize) -> Option<Ext32> {
    Some(match tag {
        MPI_CHAR
        | MPI_SIGNED_CHAR
        | MPI_UNSIGNED_CHAR
        | MPI_BYTE
        | MPI_PACKED
        | MPI_C_BOOL
        | MPI_CXX_BOOL
        | MPI_INT8_T
        | MPI_UINT8_T
        | MPI_SHORT
        | MPI_UNSIGNED_SHORT
        | MPI_INT16_T
        | MPI_UINT16_T
        | MPI_INT
        | MPI_UNSIGNED
        | MPI_INT32_T
        | MPI_UINT32_T
        | MPI_FLOAT
        | MPI_LONG_LONG
        | MPI_UNSIGNED_LONG_LONG
        | MPI_INT64_T
        | MPI_UINT64_T
        | MPI_DOUBLE
        | MPI_AINT
        | MPI_OFFSET
        | MPI_COUNT
        | MPI_CHARACTER
        | MPI_LOGICAL
        | MPI_INTEGER
        | MPI_INTEGER1
        | MPI_INTEGER2
        | MPI_INTEGER4
        | MPI_INTEGER8
        | MPI_REAL
        | MPI_REAL4
        | MPI_REAL8
        | MPI_DOUBLE_PRECISION => Ext32::Swap(size),
        // gfortran's REAL*16 is binary128 already.
        MPI_REAL16 => Ext32::Swap(16),
        MPI_COMPLEX32 => Ext32::Swap(16),
        MPI_C_FLOAT_COMPLEX
        | MPI_CXX_FLOAT_COMPLEX
        | MPI_C_DOUBLE_COMPLEX
        | MPI_CXX_DOUBLE_COMPLEX
        | MPI_COMPLEX
        | MPI_COMPLEX8
        | MPI_COMPLEX16
        | MPI_DOUBLE_COMPLEX
        | MPI_2INT
        | MPI_2INTEGER
        | MPI_2REAL
        | MPI_2DOUBLE_PRECISION => Ext32::Swap(size / 2),
        MPI_LONG | MPI_UNSIGNED_LONG if size == 8 => Ext32::Narrow {
            native: 8,
            ext: 4,
            signed: tag == MPI_LONG,
        },
        MPI_WCHAR if size == 4 => Ext32::Narrow {
            native: 4,
            ext: 2,
            signed: false,
        },
        #[cfg(target_arch = "x86_64")]
        MPI_LONG_DOUBLE | MPI_C_LONG_DOUBLE_COMPLEX | MPI_CXX_LONG_DOUBLE_COMPLEX => Ext32::Quad,
        _ => return None,
    })
}

impl Ext32 {
    /// Bytes in `external32` of `native` bytes of packed native elements.
    pub(crate) fn size(self, native: usize) -> usize {
        match self {
            Ext32::Narrow { native: n, ext, .. } => native / n * ext,
            Ext32::Swap(_) | Ext32::Quad => native,
        }
    }

    /// Native packed `src` into `external32` `dst` (`self.size(src.len())`
    /// bytes). `Err` names the first value that does not fit.
    pub(crate) fn encode(self, src: &[u8], dst: &mut [u8]) -> Result<(), String> {
        debug_assert_eq!(dst.len(), self.size(src.len()));
        match self {
            Ext32::Swap(unit) => swap(unit, src, dst),
            Ext32::Narrow {
                native,
                ext,
                signed,
            } => {
                for (i, (s, d)) in src
                    .chunks_exact(native)
                    .zip(dst.chunks_exact_mut(ext))
                    .enumerate()
                {
                    let v = native_int(s, signed);
                    let bits = 8 * ext as u32;
                    let fits = if signed {
                        v >= -(1i128 << (bits - 1)) && v < 1i128 << (bits - 1)
                    } else {
                        (0..1i128 << bits).contains(&v)
                    };
                    if !fits {
                        return Err(format!(
                            "element {i} ({v}) does not fit the {ext} bytes external32 gives its type"
                        ));
                    }
                    d.copy_from_slice(&v.to_be_bytes()[16 - ext..]);
                }
            }
            Ext32::Quad => {
                for (s, d) in src.chunks_exact(16).zip(dst.chunks_exact_mut(16)) {
                    let mant = u64::from_le_bytes(s[..8].try_into().expect("8 bytes"));
                    let se = u16::from_le_bytes([s[8], s[9]]);
                    d.copy_from_slice(&x87_to_quad(mant, se).to_be_bytes());
                }
            }
        }
        Ok(())
    }

    /// `external32` `src` (`self.size(dst.len())` bytes) into native packed
    /// `dst`.
    pub(crate) fn decode(self, src: &[u8], dst: &mut [u8]) {
        debug_assert_eq!(src.len(), self.size(dst.len()));
        match self {
            Ext32::Swap(unit) => swap(unit, src, dst),
            Ext32::Narrow {
                native,
                ext,
                signed,
            } => {
                for (s, d) in src.chunks_exact(ext).zip(dst.chunks_exact_mut(native)) {
                    let mut be = [0u8; 16];
                    be[16 - ext..].copy_from_slice(s);
                    let mut v = i128::from_be_bytes(be);
                    if signed && s[0] & 0x80 != 0 {
                        v -= 1i128 << (8 * ext);
                    }
                    d.copy_from_slice(&v.to_le_bytes()[..native]);
                }
            }
            Ext32::Quad => {
                for (s, d) in src.chunks_exact(16).zip(dst.chunks_exact_mut(16)) {
                    let q = u128::from_be_bytes(s.try_into().expect("16 bytes"));
                    let (mant, se) = quad_to_x87(q);
                    d[..8].copy_from_slice(&mant.to_le_bytes());
                    d[8..10].copy_from_slice(&se.to_le_bytes());
                    d[10..].fill(0);
                }
            }
        }
    }
}

/// `src` into `dst` with every `unit` bytes reversed (the byte order is
/// the only difference, either way).
fn swap(unit: usize, src: &[u8], dst: &mut [u8]) {
    dst.copy_from_slice(src);
    if unit > 1 {
        dst.chunks_exact_mut(unit).for_each(<[u8]>::reverse);
    }
}

/// A little-endian integer of 1 to 8 bytes.
fn native_int(s: &[u8], signed: bool) -> i128 {
    let mut le = [0u8; 16];
    le[..s.len()].copy_from_slice(s);
    let v = i128::from_le_bytes(le);
    if signed && s[s.len() - 1] & 0x80 != 0 {
        v - (1i128 << (8 * s.len()))
    } else {
        v
    }
}

/// Fraction bits binary128 has beyond x87's 63 (x87 also stores the
/// integer bit, which binary128 leaves implicit).
const SHIFT: u32 = 112 - 63;

/// x87 extended precision (`mant` with its explicit integer bit, `se` sign
/// and 15-bit exponent) as binary128 bits. The exponents share their bias
/// (16383), so the value is exact: zeros, denormals (exponent 0 in both),
/// infinities and NaNs (exponent all ones) keep their class.
fn x87_to_quad(mant: u64, se: u16) -> u128 {
    let frac = u128::from(mant & !(1 << 63)) << SHIFT;
    (u128::from(se) << 112) | frac
}

/// Binary128 bits as x87 extended precision, rounded to nearest (ties to
/// even) in the 49 fraction bits x87 lacks; a carry out of the fraction
/// moves to the next exponent (infinity past the largest).
fn quad_to_x87(q: u128) -> (u64, u16) {
    let se = (q >> 112) as u16;
    let (sign, exp) = (se & 0x8000, se & 0x7fff);
    let frac = q & ((1u128 << 112) - 1);
    if exp == 0x7fff {
        // Infinity, or a NaN (kept a NaN: quiet if its payload was all in
        // the dropped bits).
        let mut m = (frac >> SHIFT) as u64;
        if frac != 0 && m == 0 {
            m = 1 << 62;
        }
        return (m | 1 << 63, se);
    }
    let mut m = (frac >> SHIFT) as u64;
    let low = frac & ((1u128 << SHIFT) - 1);
    let half = 1u128 << (SHIFT - 1);
    if low > half || (low == half && m & 1 == 1) {
        m += 1;
    }
    let mut exp = exp;
    if m == 1 << 63 {
        // The fraction overflowed into the integer bit's place: the next
        // power of two (from a denormal, the smallest normal).
        m = 0;
        exp += 1;
    }
    if exp == 0x7fff {
        return (1 << 63, sign | exp);
    }
    let integer = if exp == 0 { 0 } else { 1 << 63 };
    (m | integer, sign | exp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x87(v: f64) -> (u64, u16) {
        // f64 -> x87 by hand: exact for every finite double.
        let b = v.to_bits();
        let sign = ((b >> 63) as u16) << 15;
        let exp = ((b >> 52) & 0x7ff) as i32;
        let frac = b & ((1 << 52) - 1);
        if exp == 0 && frac == 0 {
            return (0, sign);
        }
        if exp == 0x7ff {
            return ((1 << 63) | (frac << 11), sign | 0x7fff);
        }
        assert!(exp != 0, "no double denormals here");
        ((1 << 63) | (frac << 11), sign | (exp - 1023 + 16383) as u16)
    }

    #[test]
    fn doubles_go_to_binary128_exactly_and_back() {
        for v in [
            1.0,
            -2.5,
            0.1,
            1e300,
            -1e-300,
            f64::MAX,
            f64::MIN_POSITIVE,
            0.0,
            -0.0,
        ] {
            let (m, se) = x87(v);
            let q = x87_to_quad(m, se);
            // binary128 of a double: same sign, exponent rebiased, fraction
            // left-aligned.
            let b = v.to_bits();
            let e = ((b >> 52) & 0x7ff) as u128;
            let want = if v == 0.0 {
                u128::from(b >> 63) << 127
            } else {
                (u128::from(b >> 63) << 127)
                    | ((e + 16383 - 1023) << 112)
                    | (u128::from(b & ((1 << 52) - 1)) << 60)
            };
            assert_eq!(q, want, "{v}");
            assert_eq!(quad_to_x87(q), (m, se), "{v}");
        }
    }

    #[test]
    fn classes_survive_and_rounding_is_to_nearest_even() {
        let inf = x87(f64::INFINITY);
        assert_eq!(quad_to_x87(x87_to_quad(inf.0, inf.1)), inf);
        let nan = x87(f64::NAN);
        let (m, se) = quad_to_x87(x87_to_quad(nan.0, nan.1));
        assert!(se & 0x7fff == 0x7fff && m << 1 != 0, "still a NaN");
        // A NaN whose payload is only in the bits x87 drops stays a NaN.
        let (m, se) = quad_to_x87((0x7fffu128 << 112) | 1);
        assert!(se == 0x7fff && m << 1 != 0);
        // Denormal x87 (exponent 0, no integer bit) round trips.
        assert_eq!(quad_to_x87(x87_to_quad(5, 0)), (5, 0));
        // Below half of x87's last place: down; above: up; a tie: to even.
        let one = x87_to_quad(1 << 63, 0x3fff);
        assert_eq!(quad_to_x87(one | 1).0, 1 << 63);
        assert_eq!(quad_to_x87(one | ((1 << SHIFT) - 1)).0, (1 << 63) | 1);
        assert_eq!(quad_to_x87(one | (1 << (SHIFT - 1))).0, 1 << 63);
        assert_eq!(
            quad_to_x87(one | (1 << SHIFT) | (1 << (SHIFT - 1))).0,
            (1 << 63) | 2
        );
        // All ones in the fraction carry into the exponent: 2.0.
        let all = one | ((1u128 << 112) - 1);
        assert_eq!(quad_to_x87(all), (1 << 63, 0x4000));
        // The largest finite binary128 rounds past x87's largest: infinity.
        let max = (0x7ffeu128 << 112) | ((1u128 << 112) - 1);
        assert_eq!(quad_to_x87(max), (1 << 63, 0x7fff));
    }

    #[test]
    fn long_narrows_with_its_sign_and_refuses_what_does_not_fit() {
        let long = of(MPI_LONG, 8).unwrap();
        let ulong = of(MPI_UNSIGNED_LONG, 8).unwrap();
        let vals: Vec<u8> = [-5i64, 7, i32::MIN as i64, i32::MAX as i64]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let mut ext = vec![0u8; long.size(vals.len())];
        assert_eq!(ext.len(), 16);
        long.encode(&vals, &mut ext).unwrap();
        assert_eq!(&ext[..8], &[0xff, 0xff, 0xff, 0xfb, 0, 0, 0, 7]);
        let mut back = vec![0u8; vals.len()];
        long.decode(&ext, &mut back);
        assert_eq!(back, vals);
        let big = (1i64 << 31).to_le_bytes();
        let e = long.encode(&big, &mut [0u8; 4]).unwrap_err();
        assert!(e.contains("2147483648") && e.contains("4 bytes"), "{e}");
        // Unsigned: up to 2^32 - 1, zero-extended back.
        let u = u64::from(u32::MAX).to_le_bytes();
        let mut ext = [0u8; 4];
        ulong.encode(&u, &mut ext).unwrap();
        let mut back = [0u8; 8];
        ulong.decode(&ext, &mut back);
        assert_eq!(back, u);
        assert!(ulong
            .encode(&(1u64 << 32).to_le_bytes(), &mut [0u8; 4])
            .is_err());
        let w = of(MPI_WCHAR, 4).unwrap();
        assert!(w.encode(&0x1_0000u32.to_le_bytes(), &mut [0u8; 2]).is_err());
        let mut two = [0u8; 2];
        w.encode(&0x263au32.to_le_bytes(), &mut two).unwrap();
        assert_eq!(two, [0x26, 0x3a]);
    }

    #[test]
    fn complex_halves_swap_each() {
        let c = of(MPI_C_FLOAT_COMPLEX, 8).unwrap();
        let src: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let mut ext = vec![0u8; 8];
        c.encode(&src, &mut ext).unwrap();
        let want: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect();
        assert_eq!(ext, want);
    }
}
