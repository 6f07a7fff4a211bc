//! What one hop over the message bus costs, measured on a real
//! `nats-server`: the simulator delays what the `service-replicas` arm's
//! replicas share by it ([`crate::arms::replicas`]), as it charges the
//! HTTP arms with [`crate::calibration`].
//!
//! The committed file `evaluation/calibration/nats_bus.json` is written by
//! the `nats_bus` bench:
//!
//! ```sh
//! cargo bench -p evaluation --bench nats_bus -- --calibrate evaluation/calibration/nats_bus.json
//! ```
//!
//! It starts a local `nats-server` (JetStream on, as the bus runs it),
//! connects two clients with `async-nats`, one echoing on a second
//! subject what it receives on the first, and times one small JSON
//! message (the size of a worker report or a load gauge) at a time from
//! publish to the echo's delivery back. Half a round trip is one hop,
//! publish to delivery: `one_way_p50_us` and `one_way_p99_us`.
//!
//! The simulator reads the file only; it needs no NATS to run.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The calibration shipped with the repository.
pub const SHIPPED_JSON: &str = include_str!("../calibration/nats_bus.json");

/// Where the shipped calibration lives, from the repository root.
pub const SHIPPED_PATH: &str = "evaluation/calibration/nats_bus.json";

/// A measured cost of one hop over the bus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatsBusCalibration {
    /// The command that wrote the file.
    pub command: String,
    /// When it was measured, UTC (RFC 3339).
    pub date: String,
    /// Commit of the measuring code (`-dirty` with uncommitted changes).
    pub commit: String,
    /// The measuring host: OS, CPU model, logical cores and pinning.
    pub host: String,
    /// The server measured (`nats-server --version`).
    pub server: String,
    /// Size of the message, bytes.
    pub payload_bytes: usize,
    /// Round trips measured.
    pub samples: usize,
    /// Median one-way latency (half the round trip), µs.
    pub one_way_p50_us: f64,
    /// 99th percentile of the one-way latency, µs.
    pub one_way_p99_us: f64,
}

impl NatsBusCalibration {
    /// The shipped calibration (checked when first read).
    ///
    /// # Panics
    /// If the committed file is invalid (a test checks it is not).
    pub fn shipped() -> &'static Self {
        static SHIPPED: OnceLock<NatsBusCalibration> = OnceLock::new();
        SHIPPED.get_or_init(|| {
            Self::parse(SHIPPED_JSON).unwrap_or_else(|e| panic!("{SHIPPED_PATH}: {e}"))
        })
    }

    /// Parse and check a calibration.
    ///
    /// # Errors
    /// Not JSON of this shape, no samples, or latencies that are not
    /// finite, positive and ordered (p50 ≤ p99).
    pub fn parse(text: &str) -> Result<Self, String> {
        let c: Self = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if c.samples == 0 || c.payload_bytes == 0 {
            return Err("samples and payload_bytes must be at least 1".to_owned());
        }
        let ok = |v: f64| v.is_finite() && v > 0.0;
        if !(ok(c.one_way_p50_us) && ok(c.one_way_p99_us) && c.one_way_p50_us <= c.one_way_p99_us) {
            return Err(format!(
                "one_way_p50_us {} and one_way_p99_us {} must be finite, > 0 and ordered",
                c.one_way_p50_us, c.one_way_p99_us
            ));
        }
        Ok(c)
    }

    /// The delay the simulator gives one hop: the median, ms.
    pub fn one_way_ms(&self) -> f64 {
        self.one_way_p50_us / 1_000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_calibration_is_valid_and_plausible() {
        let c = NatsBusCalibration::shipped();
        assert!(c.samples >= 1_000, "{} samples", c.samples);
        assert!(c.command.contains("--calibrate"), "{}", c.command);
        assert!(c.server.contains("nats-server"), "{}", c.server);
        // A loopback hop through a broker is µs to tens of µs, not ms.
        assert!((1.0..1_000.0).contains(&c.one_way_p50_us), "{c:?}");
        assert!((0.001..1.0).contains(&c.one_way_ms()));
    }

    #[test]
    fn a_bad_file_is_refused_with_its_reason() {
        let mut bad = NatsBusCalibration::shipped().clone();
        bad.one_way_p99_us = bad.one_way_p50_us / 2.0;
        let e = NatsBusCalibration::parse(&serde_json::to_string(&bad).unwrap()).unwrap_err();
        assert!(e.contains("ordered"), "{e}");
        bad.one_way_p99_us = f64::NAN;
        assert!(NatsBusCalibration::parse(&serde_json::to_string(&bad).unwrap()).is_err());
        assert!(NatsBusCalibration::parse("{\"command\": 1}").is_err());
    }
}
