//! `--sample`: training on a share of the decisions, chosen so that every
//! stretch of time keeps the same share.
//!
//! The sample is systematic in log order, which is decision-time order
//! (files in chronological name order, rows in write order): with a
//! fraction `f`, the `t`-th training decision (0-based) is kept when
//! `floor((t + 1)·f) > floor(t·f)` (in integers: `f` is
//! a ratio), so any run of `k` consecutive decisions
//! keeps `floor(k·f)` or `ceil(k·f)` of them: a sample stratified by time
//! with one draw per stratum of `1/f` decisions, and no randomness. A row
//! cap `N` is the fraction `N / n` of the `n` training decisions, counted
//! by a first pass. Only training rows are sampled: validation always uses
//! the whole validation window.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// What `--sample` asked for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum SampleSpec {
    /// A share of the training decisions, in (0, 1].
    Fraction(f64),
    /// At most this many training decisions.
    Rows(u64),
}

impl FromStr for SampleSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        if let Ok(n) = t.parse::<u64>() {
            return match n {
                0 => Err(
                    "--sample 0 keeps nothing: give a fraction in (0, 1] or a row cap >= 2".into(),
                ),
                // "1" reads as the whole, as the fraction 1.
                1 => Ok(SampleSpec::Fraction(1.0)),
                n => Ok(SampleSpec::Rows(n)),
            };
        }
        match t.parse::<f64>() {
            Ok(f) if f > 0.0 && f <= 1.0 => Ok(SampleSpec::Fraction(f)),
            Ok(f) if f > 1.0 && f.is_finite() && f.fract() == 0.0 => Err(format!(
                "--sample {s:?}: write a row cap as a whole number ({f})"
            )),
            Ok(f) => Err(format!(
                "--sample {f} is out of range: a fraction must be in (0, 1], a row cap a whole number >= 2"
            )),
            Err(_) => Err(format!(
                "--sample {s:?} is neither a fraction in (0, 1] nor a row count"
            )),
        }
    }
}

impl fmt::Display for SampleSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SampleSpec::Fraction(x) => write!(f, "{x}"),
            SampleSpec::Rows(n) => write!(f, "{n}"),
        }
    }
}

/// Denominator of a fraction's ratio: 2^32, so a fraction is kept to 1e-9.
const FRACTION_DENOMINATOR: u64 = 1 << 32;

impl SampleSpec {
    /// The share kept of `n` training decisions, as a ratio `(keep, of)`.
    pub fn ratio_of(&self, n: u64) -> (u64, u64) {
        match *self {
            SampleSpec::Fraction(f) => (
                (f * FRACTION_DENOMINATOR as f64).round() as u64,
                FRACTION_DENOMINATOR,
            ),
            SampleSpec::Rows(cap) if n == 0 || cap >= n => (1, 1),
            SampleSpec::Rows(cap) => (cap, n),
        }
    }

    /// The fraction kept of `n` training decisions.
    pub fn fraction_of(&self, n: u64) -> f64 {
        if let SampleSpec::Fraction(f) = *self {
            return f;
        }
        let (keep, of) = self.ratio_of(n);
        keep as f64 / of as f64
    }
}

/// Keeps the `t`-th training decision or not (see the module docs), in
/// exact integer arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Systematic {
    keep: u128,
    of: u128,
    seen: u128,
}

impl Systematic {
    /// A sampler keeping `keep` of every `of` (`0 < keep <= of`).
    pub fn new((keep, of): (u64, u64)) -> Self {
        Self {
            keep: u128::from(keep),
            of: u128::from(of.max(1)),
            seen: 0,
        }
    }

    /// Whether the next decision is kept.
    pub fn keep_next(&mut self) -> bool {
        let t = self.seen;
        self.seen += 1;
        (t + 1) * self.keep / self.of > t * self.keep / self.of
    }
}

/// What the card records about the sample.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SampleReport {
    /// `--sample` as given.
    pub requested: SampleSpec,
    /// The fraction applied.
    pub fraction: f64,
    /// How it was drawn.
    pub method: &'static str,
    /// Training decisions before sampling.
    pub train_rows_before: u64,
    /// Training decisions kept.
    pub train_rows_kept: u64,
}

/// [`SampleReport::method`].
pub const SAMPLE_METHOD: &str = "systematic in decision-time (log) order: training decision t is kept when floor((t+1)f) > floor(tf), so every stretch of time keeps the share f; validation rows are never sampled";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_is_a_fraction_or_a_row_cap_and_nonsense_is_refused() {
        assert_eq!("0.25".parse(), Ok(SampleSpec::Fraction(0.25)));
        assert_eq!("1.0".parse(), Ok(SampleSpec::Fraction(1.0)));
        assert_eq!("200000".parse(), Ok(SampleSpec::Rows(200_000)));
        assert_eq!(
            "1".parse(),
            Ok(SampleSpec::Fraction(1.0)),
            "1 is all, not one row"
        );
        assert_eq!("2".parse(), Ok(SampleSpec::Rows(2)));
        let e = "1e3".parse::<SampleSpec>().unwrap_err();
        assert!(e.contains("whole number (1000)"), "{e}");
        assert_eq!(SampleSpec::Fraction(0.33).fraction_of(1000), 0.33);
        for bad in ["0", "0.0", "1.5", "-0.1", "NaN", "inf", "half", ""] {
            assert!(bad.parse::<SampleSpec>().is_err(), "{bad:?}");
        }
        assert_eq!(SampleSpec::Rows(250).fraction_of(1000), 0.25);
        assert_eq!(SampleSpec::Rows(2000).fraction_of(1000), 1.0);
    }

    #[test]
    fn systematic_sampling_keeps_the_share_in_every_stretch() {
        let mut s = Systematic::new(SampleSpec::Fraction(0.3).ratio_of(1000));
        let kept: Vec<bool> = (0..1000).map(|_| s.keep_next()).collect();
        assert_eq!(kept.iter().filter(|k| **k).count(), 300);
        for w in kept.windows(10) {
            let n = w.iter().filter(|k| **k).count();
            assert!(n == 3, "every 10 consecutive decisions keep 3, got {n}");
        }
        let mut all = Systematic::new(SampleSpec::Fraction(1.0).ratio_of(100));
        assert!((0..100).all(|_| all.keep_next()));
        let mut cap = Systematic::new(SampleSpec::Rows(1_000).ratio_of(3_001));
        assert_eq!((0..3_001).filter(|_| cap.keep_next()).count(), 1_000);
    }
}
