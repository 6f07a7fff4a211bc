//! Number formatting for explanation sentences.

/// `x` rounded to at most 3 decimals, printed without trailing zeros
/// (`12.5`, `7.2`, `10`); magnitudes from 1e9 in scientific notation.
pub fn num(x: f64) -> String {
    if x.is_finite() && x.abs() >= 1e9 {
        return format!("{x:.3e}");
    }
    let r = (x * 1000.0).round() / 1000.0;
    if r == 0.0 {
        "0".to_owned()
    } else {
        format!("{r}")
    }
}

/// `x` exactly as received (shortest round-trip digits), in scientific
/// notation from 1e15 or below 1e-6 in magnitude, for error messages that
/// echo an input (`1.7e308`, not 309 digits).
pub fn exact(x: f64) -> String {
    let a = x.abs();
    if x.is_finite() && (a >= 1e15 || (a != 0.0 && a < 1e-6)) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// A fraction as a percentage with at most 3 decimals (`0.88` → `88%`).
pub fn pct(fraction: f64) -> String {
    format!("{}%", num(fraction * 100.0))
}

/// Score points rounded to 1e-12, what answers show: removes the binary
/// float noise of adding 1e-6-rounded deductions (`100 − 3.75 − 9.994667`
/// is `86.25533300000001` in f64, shown `86.255333`) and keeps every real
/// digit (a factor's product has at most ~10 decimals here). Explanations
/// still add up: each shown value moves by at most 5e-13. Non-finite
/// values pass unchanged. The decision log keeps the exact values.
pub fn points(x: f64) -> f64 {
    if x.is_finite() && x.abs() < 1e6 {
        (x * 1e12).round() / 1e12
    } else {
        x
    }
}

/// Serde `serialize_with` for a score in points, through [`points`].
///
/// # Errors
/// The serializer's.
pub fn serialize_points<S: serde::Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(points(*x))
}

#[cfg(test)]
mod tests {
    #[test]
    fn points_drop_float_noise_and_keep_real_digits() {
        let noisy = 100.0 - 3.75 - 9.994667;
        assert_ne!(noisy, 86.255333, "the f64 sum carries noise");
        assert_eq!(super::points(noisy), 86.255333);
        assert_eq!(super::points(86.255333 * 0.85), 73.31703305);
        for exact in [0.0, 100.0, 96.25, -3.75, 47.8, 0.000001] {
            assert_eq!(super::points(exact).to_bits(), exact.to_bits(), "{exact}");
        }
        assert!(super::points(f64::NAN).is_nan());
        assert_eq!(super::points(1e300), 1e300);
    }

    #[test]
    fn formats_cleanly() {
        assert_eq!(super::num(12.5), "12.5");
        assert_eq!(super::num(7.200000000000001), "7.2");
        assert_eq!(super::num(-0.0), "0");
        assert_eq!(super::pct(0.88), "88%");
        assert_eq!(super::pct(0.015), "1.5%");
        assert_eq!(super::num(1.7e308), "1.700e308");
        assert_eq!(super::pct(1e305), "1.000e307%");
        assert_eq!(super::exact(1.7e308), "1.7e308");
        assert_eq!(super::exact(1.0000001), "1.0000001");
        assert_eq!(super::exact(5e-324), "5e-324");
        assert_eq!(super::exact(-0.5), "-0.5");
        assert_eq!(super::exact(f64::NAN), "NaN");
    }
}
