//! What a pick with the embedded balancer costs a router, measured: the
//! simulator charges the `service-embedded` arm with it ([`crate::sim`]),
//! as it charges the HTTP arms with [`crate::calibration`].
//!
//! The committed file `evaluation/calibration/embedded_pick.json` is
//! written by the `embedded_pick` bench:
//!
//! ```sh
//! cargo bench -p evaluation --bench embedded_pick -- --calibrate evaluation/calibration/embedded_pick.json
//! ```
//!
//! `pick_us` is the distribution of `Balancer::pick` for 16 candidates with
//! the shipped model, as `[probability, µs]` quantile points. A simulated
//! pick holds the request for a draw from it (inverse CDF, linear between
//! points) before it leaves the router.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::calibration::{check_quantiles, quantile_at};

/// The calibration shipped with the repository.
pub const SHIPPED_JSON: &str = include_str!("../calibration/embedded_pick.json");

/// Where the shipped calibration lives, from the repository root.
pub const SHIPPED_PATH: &str = "evaluation/calibration/embedded_pick.json";

/// A measured cost of the embedded pick.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddedPickCalibration {
    /// The command that wrote the file.
    pub command: String,
    /// When it was measured, UTC (RFC 3339).
    pub date: String,
    /// Commit of the measured code (`-dirty` with uncommitted changes).
    pub commit: String,
    /// The measuring host: OS, CPU model and logical cores.
    pub host: String,
    /// Candidates per pick.
    pub candidates: usize,
    /// Picks measured.
    pub samples: usize,
    /// The model the picks ran (its version).
    pub model: String,
    /// Quantile points `[probability, µs]` of one pick, from probability 0
    /// to 1, both non-decreasing.
    pub pick_us: Vec<[f64; 2]>,
}

impl EmbeddedPickCalibration {
    /// The shipped calibration (checked when first read).
    ///
    /// # Panics
    /// If the committed file is invalid (a test checks it is not).
    pub fn shipped() -> &'static Self {
        static SHIPPED: OnceLock<EmbeddedPickCalibration> = OnceLock::new();
        SHIPPED.get_or_init(|| {
            Self::parse(SHIPPED_JSON).unwrap_or_else(|e| panic!("{SHIPPED_PATH}: {e}"))
        })
    }

    /// Parse and check a calibration.
    ///
    /// # Errors
    /// Not JSON of this shape, no samples, or bad quantile points.
    pub fn parse(text: &str) -> Result<Self, String> {
        let c: Self = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if c.samples == 0 || c.candidates == 0 {
            return Err("samples and candidates must be at least 1".to_owned());
        }
        check_quantiles("pick_us", &c.pick_us)?;
        Ok(c)
    }

    /// The pick time at probability `u` in `[0, 1]`, µs.
    pub fn pick_at_us(&self, u: f64) -> f64 {
        quantile_at(&self.pick_us, u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_calibration_is_valid_and_plausible() {
        let c = EmbeddedPickCalibration::shipped();
        assert!(c.samples >= 10_000, "{} samples", c.samples);
        assert!(c.command.contains("--calibrate"), "{}", c.command);
        assert_eq!(c.candidates, 16);
        // An in-process pick is µs, not the HTTP call's tens to hundreds.
        let (p50, p99) = (c.pick_at_us(0.5), c.pick_at_us(0.99));
        assert!((0.5..100.0).contains(&p50) && p50 <= p99, "{p50} {p99}");
    }

    #[test]
    fn a_bad_file_is_refused_with_its_reason() {
        let good = EmbeddedPickCalibration::shipped();
        let mut bad = good.clone();
        bad.pick_us = vec![[0.0, 2.0], [1.0, 1.0]];
        let text = serde_json::to_string(&bad).unwrap();
        let e = EmbeddedPickCalibration::parse(&text).unwrap_err();
        assert!(e.contains("does not increase"), "{e}");
        bad.pick_us.clone_from(&good.pick_us);
        bad.samples = 0;
        let text = serde_json::to_string(&bad).unwrap();
        assert!(EmbeddedPickCalibration::parse(&text).is_err());
    }
}
