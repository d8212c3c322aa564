//! NAS Parallel Benchmark kernels CG, IS and MG, as the NPB specification
//! defines them: the same pseudo-random generator, problem classes (S, W, A)
//! and the specification's verification values, so a run that says VERIFIED
//! computed what NPB computes. The parallel decompositions are kumi's own (rows
//! for CG, key ranges for IS, planes for MG).

pub mod cg;
pub mod is;
pub mod mg;

/// NPB's generator: x_{k+1} = 5^13 x_k mod 2^46, returning x_{k+1} / 2^46.
/// Integer arithmetic gives exactly the values of NPB's double-precision
/// `randlc`, which emulates this product in 23-bit halves.
pub fn randlc(x: &mut f64, a: f64) -> f64 {
    const M: u128 = 1 << 46;
    let r = (*x as u128 * a as u128) % M;
    *x = r as f64;
    r as f64 / M as f64
}

/// 5^13, NPB's multiplier.
pub const AMULT: f64 = 1_220_703_125.0;
/// NPB's initial seed.
pub const SEED: f64 = 314_159_265.0;

/// a^k mod 2^46: the multiplier that skips k steps of [`randlc`].
pub fn skip(a: f64, mut k: u64) -> f64 {
    const M: u128 = 1 << 46;
    let (mut base, mut acc) = (a as u128 % M, 1u128);
    while k > 0 {
        if k & 1 == 1 {
            acc = acc * base % M;
        }
        base = base * base % M;
        k >>= 1;
    }
    acc as f64
}

/// The class letter, upper case, if it is one of S, W, A.
pub fn class(s: &str) -> Option<char> {
    match s.to_ascii_uppercase().as_str() {
        "S" => Some('S'),
        "W" => Some('W'),
        "A" => Some('A'),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skip_ahead_matches_stepping() {
        let mut x = SEED;
        for _ in 0..1000 {
            randlc(&mut x, AMULT);
        }
        let mut y = SEED;
        randlc(&mut y, skip(AMULT, 1000));
        assert_eq!(x, y);
    }
}
