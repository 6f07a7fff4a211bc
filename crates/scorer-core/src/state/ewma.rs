//! Exponentially weighted moving average.
//!
//! `s_n = alpha * x_n + (1 - alpha) * s_{n-1}`, seeded with the first sample
//! (Roberts 1959; the same smoothing Finagle and Linkerd apply to latencies).

/// Smooth `value` into `prev` with weight `alpha` in (0, 1] on the new sample.
///
/// `prev = None` (first sample) returns `value`. Both inputs must be finite;
/// validation upstream guarantees it. A `-0.0` sample (accepted: it equals
/// 0) is stored as `+0.0`, so no negative zero reaches worker state.
pub fn ewma(prev: Option<f64>, value: f64, alpha: f64) -> f64 {
    debug_assert!(value.is_finite() && alpha > 0.0 && alpha <= 1.0);
    // IEEE 754: -0 + +0 = +0; every other value is unchanged.
    let value = value + 0.0;
    match prev {
        None => value,
        Some(p) => alpha * value + (1.0 - alpha) * p,
    }
}

#[cfg(test)]
mod tests {
    use super::ewma;

    #[test]
    fn first_sample_seeds_then_blends() {
        let s = ewma(None, 10.0, 0.5);
        assert_eq!(s, 10.0);
        let s = ewma(Some(s), 20.0, 0.5);
        assert_eq!(s, 15.0);
        let s = ewma(Some(s), 20.0, 0.25);
        assert_eq!(s, 16.25);
        assert_eq!(ewma(Some(3.0), 7.0, 1.0), 7.0);
    }

    #[test]
    fn negative_zero_is_stored_as_zero() {
        assert_eq!(ewma(None, -0.0, 0.3).to_bits(), 0.0f64.to_bits());
        assert_eq!(ewma(Some(0.0), -0.0, 0.3).to_bits(), 0.0f64.to_bits());
        assert_eq!(ewma(Some(-0.0), -0.0, 1.0).to_bits(), 0.0f64.to_bits());
    }
}
