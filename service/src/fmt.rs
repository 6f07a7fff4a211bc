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

#[cfg(test)]
mod tests {
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
