//! What a `POST /v1/score` call costs a router, measured on a real service
//! binary: the simulator charges the service arms with it
//! ([`crate::sim`]).
//!
//! The committed file `evaluation/calibration/http_score.json` is written
//! by the `http_score` bench:
//!
//! ```sh
//! cargo bench -p service --bench http_score -- --calibrate evaluation/calibration/http_score.json
//! ```
//!
//! It runs the release service binary with 16 workers reporting and the
//! default model, one client connection, one call in flight, and records
//! - `round_trip_us`: the median `GET /healthz` round trip on the same
//!   connection: the loopback network plus the HTTP floor, which every
//!   call pays whatever it asks;
//! - `in_service_us`: the distribution of (score call latency −
//!   `round_trip_us`), floored at 0, as `[probability, µs]` quantile
//!   points: what scoring itself adds, the time a scorer core is busy.
//!
//! A simulated call takes `round_trip_us` (half each way) plus a draw from
//! `in_service_us` (inverse CDF, linear between points) on one of the
//! simulated scorer's cores.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The calibration shipped with the repository.
pub const SHIPPED_JSON: &str = include_str!("../calibration/http_score.json");

/// Where the shipped calibration lives, from the repository root.
pub const SHIPPED_PATH: &str = "evaluation/calibration/http_score.json";

/// A measured cost of the HTTP score call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpScoreCalibration {
    /// The command that wrote the file.
    pub command: String,
    /// When it was measured, UTC (RFC 3339).
    pub date: String,
    /// Commit of the measured binary (`git rev-parse HEAD`, `-dirty` when
    /// the tree had changes).
    pub commit: String,
    /// The measuring host: OS, CPU model and logical cores.
    pub host: String,
    /// Client connections (one call in flight each).
    pub connections: usize,
    /// Candidates per score request.
    pub candidates: usize,
    /// Score calls measured.
    pub samples: usize,
    /// Median `GET /healthz` round trip, µs.
    pub round_trip_us: f64,
    /// Score call latency, p50, µs.
    pub score_p50_us: f64,
    /// Score call latency, p99, µs.
    pub score_p99_us: f64,
    /// Quantile points `[probability, µs]` of the in-service time, from
    /// probability 0 to 1, both non-decreasing.
    pub in_service_us: Vec<[f64; 2]>,
}

impl HttpScoreCalibration {
    /// The shipped calibration (checked when first read).
    ///
    /// # Panics
    /// If the committed file is invalid (a test checks it is not).
    pub fn shipped() -> &'static Self {
        static SHIPPED: OnceLock<HttpScoreCalibration> = OnceLock::new();
        SHIPPED.get_or_init(|| {
            Self::parse(SHIPPED_JSON).unwrap_or_else(|e| panic!("{SHIPPED_PATH}: {e}"))
        })
    }

    /// Parse and check a calibration.
    ///
    /// # Errors
    /// Not JSON of this shape, or [`Self::validate`] fails.
    pub fn parse(text: &str) -> Result<Self, String> {
        let c: Self = serde_json::from_str(text).map_err(|e| e.to_string())?;
        c.validate()?;
        Ok(c)
    }

    /// At least two quantile points, probabilities from exactly 0 to
    /// exactly 1, both columns finite, ≥ 0 and non-decreasing
    /// (probabilities strictly increasing); a positive round trip and
    /// sample count.
    ///
    /// # Errors
    /// The first violation.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.round_trip_us.is_finite() && self.round_trip_us > 0.0) {
            return Err(format!(
                "round_trip_us must be finite and > 0, got {}",
                self.round_trip_us
            ));
        }
        if self.samples == 0 || self.connections == 0 {
            return Err("samples and connections must be at least 1".to_owned());
        }
        check_quantiles("in_service_us", &self.in_service_us)
    }

    /// The in-service time at probability `u` in `[0, 1]` (inverse CDF,
    /// linear between points), µs.
    pub fn in_service_at_us(&self, u: f64) -> f64 {
        quantile_at(&self.in_service_us, u)
    }

    /// Mean in-service time, µs (the trapezoid over the quantile points).
    pub fn mean_in_service_us(&self) -> f64 {
        self.in_service_us
            .windows(2)
            .map(|w| (w[1][0] - w[0][0]) * (w[0][1] + w[1][1]) / 2.0)
            .sum()
    }

    /// The in-service time at probability `p`, µs.
    pub fn quantile_us(&self, p: f64) -> f64 {
        self.in_service_at_us(p)
    }
}

/// Checks quantile points `[probability, µs]` named `name`: at least two,
/// probabilities from exactly 0 to exactly 1 and strictly increasing,
/// values finite, ≥ 0 and non-decreasing.
///
/// # Errors
/// The first violation.
pub fn check_quantiles(name: &str, q: &[[f64; 2]]) -> Result<(), String> {
    if q.len() < 2 {
        return Err(format!("{name} needs at least two points"));
    }
    if q[0][0] != 0.0 || q[q.len() - 1][0] != 1.0 {
        return Err(format!("{name} must run from probability 0 to 1"));
    }
    for (i, [p, us]) in q.iter().enumerate() {
        if !(p.is_finite() && us.is_finite() && *us >= 0.0) {
            return Err(format!("{name}[{i}] = [{p}, {us}] is not finite and >= 0"));
        }
        if i > 0 && (*p <= q[i - 1][0] || *us < q[i - 1][1]) {
            return Err(format!(
                "{name}[{i}] = [{p}, {us}] does not increase from [{}, {}]",
                q[i - 1][0],
                q[i - 1][1]
            ));
        }
    }
    Ok(())
}

/// The value at probability `u` in `[0, 1]` of checked quantile points
/// (inverse CDF, linear between points).
pub fn quantile_at(q: &[[f64; 2]], u: f64) -> f64 {
    let u = u.clamp(0.0, 1.0);
    let i = q.partition_point(|pt| pt[0] < u).clamp(1, q.len() - 1);
    let ([p0, v0], [p1, v1]) = (q[i - 1], q[i]);
    v0 + (v1 - v0) * ((u - p0) / (p1 - p0)).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_calibration_is_valid_and_plausible() {
        let c = HttpScoreCalibration::shipped();
        assert!(c.samples >= 1_000, "{} samples", c.samples);
        assert!(c.command.contains("--calibrate"), "{}", c.command);
        assert!(c.commit.len() >= 7, "{}", c.commit);
        // A loopback HTTP round trip is tens of µs, a score call under 10 ms.
        assert!(
            (1.0..1_000.0).contains(&c.round_trip_us),
            "{}",
            c.round_trip_us
        );
        assert!(c.score_p50_us > c.round_trip_us * 0.5);
        assert!(c.quantile_us(0.99) < 10_000.0);
        assert!(c.quantile_us(0.5) <= c.quantile_us(0.99));
    }

    fn cal(points: Vec<[f64; 2]>) -> HttpScoreCalibration {
        HttpScoreCalibration {
            command: "x --calibrate".into(),
            date: "2026-12-04T00:00:00Z".into(),
            commit: "abcdef0".into(),
            host: "test".into(),
            connections: 1,
            candidates: 16,
            samples: 10,
            round_trip_us: 30.0,
            score_p50_us: 80.0,
            score_p99_us: 600.0,
            in_service_us: points,
        }
    }

    #[test]
    fn inverse_cdf_is_linear_between_points() {
        let c = cal(vec![[0.0, 10.0], [0.5, 50.0], [1.0, 250.0]]);
        assert_eq!(c.in_service_at_us(0.0), 10.0);
        assert_eq!(c.in_service_at_us(0.25), 30.0);
        assert_eq!(c.in_service_at_us(0.5), 50.0);
        assert_eq!(c.in_service_at_us(0.75), 150.0);
        assert_eq!(c.in_service_at_us(1.0), 250.0);
        assert_eq!(c.in_service_at_us(7.0), 250.0);
        // Trapezoids: 0.5 × 30 + 0.5 × 150.
        assert_eq!(c.mean_in_service_us(), 90.0);
    }

    #[test]
    fn a_bad_shape_is_refused_with_its_reason() {
        let bad = [
            (vec![[0.0, 1.0]], "two points"),
            (vec![[0.1, 1.0], [1.0, 2.0]], "probability 0 to 1"),
            (
                vec![[0.0, 5.0], [0.5, 4.0], [1.0, 6.0]],
                "does not increase",
            ),
            (
                vec![[0.0, 1.0], [0.0, 2.0], [1.0, 3.0]],
                "does not increase",
            ),
            (vec![[0.0, -1.0], [1.0, 2.0]], "finite and >= 0"),
            (vec![[0.0, f64::NAN], [1.0, 2.0]], "finite and >= 0"),
        ];
        for (points, why) in bad {
            let e = cal(points.clone()).validate().unwrap_err();
            assert!(e.contains(why), "{points:?}: {e}");
        }
        let mut c = cal(vec![[0.0, 1.0], [1.0, 2.0]]);
        assert!(c.validate().is_ok());
        c.round_trip_us = 0.0;
        assert!(c.validate().unwrap_err().contains("round_trip_us"));
        assert!(HttpScoreCalibration::parse("{\"command\": 1}").is_err());
    }
}
