//! Amdahl's law fitted to measured speed-ups, as the GAMMA paper reports its
//! serial fraction.
//!
//! S(N) = 1 / (a + (1 - a) / N). Written as 1/S - 1/N = a (1 - 1/N), it is linear
//! in a, so the least-squares a has a closed form over the measured points
//! (the residuals are in normalized time 1/S, which weights every N alike).
//! N = 1 carries no information about a and drops out by itself.

/// Least-squares serial fraction a from (N, speed-up) points; `None` if no point
/// has N > 1. The result is clamped to [0, 1].
pub fn amdahl_fit(points: &[(f64, f64)]) -> Option<f64> {
    let (mut num, mut den) = (0.0, 0.0);
    for &(n, s) in points {
        if n > 1.0 && s > 0.0 {
            let x = 1.0 - 1.0 / n;
            num += (1.0 / s - 1.0 / n) * x;
            den += x * x;
        }
    }
    (den > 0.0).then(|| (num / den).clamp(0.0, 1.0))
}

/// Amdahl's speed-up at N for serial fraction a.
pub fn amdahl(a: f64, n: f64) -> f64 {
    1.0 / (a + (1.0 - a) / n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amdahl_fit_recovers_a_from_synthetic_timings() {
        for a in [0.0, 0.1, 0.23, 0.5] {
            // Timings T(N) = T1 (a + (1-a)/N), speed-up T1/T(N).
            let t1 = 12.0;
            let pts: Vec<(f64, f64)> = (1..=8)
                .map(|n| {
                    let n = n as f64;
                    (n, t1 / (t1 * (a + (1.0 - a) / n)))
                })
                .collect();
            let fit = amdahl_fit(&pts).expect("has N > 1");
            assert!((fit - a).abs() < 1e-12, "a={a} fit={fit}");
        }
        // With +-2% noise the fit stays close.
        let a = 0.1;
        let noise = [1.02, 0.98, 1.01, 0.99, 1.0, 1.02, 0.985];
        let pts: Vec<(f64, f64)> = (2..=8)
            .zip(noise)
            .map(|(n, e)| (n as f64, amdahl(a, n as f64) * e))
            .collect();
        let fit = amdahl_fit(&pts).expect("fits");
        assert!((fit - a).abs() < 0.02, "fit={fit}");
        assert_eq!(amdahl_fit(&[(1.0, 1.0)]), None);
    }
}
