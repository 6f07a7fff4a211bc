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
    }
}
