//! Number formatting for explanation sentences.

/// `x` rounded to at most 3 decimals, printed without trailing zeros
/// (`12.5`, `7.2`, `10`).
pub fn num(x: f64) -> String {
    let r = (x * 1000.0).round() / 1000.0;
    if r == 0.0 {
        "0".to_owned()
    } else {
        format!("{r}")
    }
}

/// A fraction as a percentage with at most 2 decimals (`0.88` → `88%`).
pub fn pct(fraction: f64) -> String {
    let r = (fraction * 10_000.0).round() / 100.0;
    format!("{r}%")
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
    }
}
