//! The engine's self-check in `/metrics`: the final-score histogram, the
//! pick's expected and observed latency histograms (seconds, Prometheus's
//! base unit) and the rolling rank correlation between them; and, while a
//! config canary runs, each arm's decisions, outcomes, failures and
//! outcome latency.

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use scorer_engine::Engine;
use scorer_engine::self_check::HistogramSnapshot;

/// A histogram read from the engine at scrape time.
#[derive(Debug)]
struct ConstHistogram(HistogramSnapshot);

impl ConstHistogram {
    /// `h` with its bounds and sum divided by `div` (ms to seconds: 1 000).
    fn scaled(h: HistogramSnapshot, div: f64) -> Self {
        Self(HistogramSnapshot {
            sum: h.sum / div,
            count: h.count,
            buckets: h.buckets.into_iter().map(|(b, c)| (b / div, c)).collect(),
        })
    }
}

impl EncodeMetric for ConstHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_histogram::<NoLabelSet>(self.0.sum, self.0.count, &self.0.buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// Registers the self-check's metrics of `engine` in `r`.
pub(super) fn register(r: &mut Registry, engine: &Engine) {
    let s = engine.self_check().snapshot();
    r.register(
        "scorer_final_score",
        "Every candidate's final score, per decision made, points 0..=100",
        ConstHistogram(s.final_scores),
    );
    r.register(
        "scorer_pick_expected_latency_seconds",
        "The pick's expected latency (the cost model's), per outcome of a remembered pick",
        ConstHistogram::scaled(s.expected_latency_ms, 1_000.0),
    );
    r.register(
        "scorer_pick_observed_latency_seconds",
        "The observed latency of the same outcomes",
        ConstHistogram::scaled(s.observed_latency_ms, 1_000.0),
    );
    let pairs: Gauge = Gauge::default();
    pairs.set(i64::try_from(s.window_pairs).unwrap_or(i64::MAX));
    r.register(
        "scorer_self_check_window_outcomes",
        "Outcomes in the rank-correlation window (the latest 1024)",
        pairs,
    );
    if let Some(rho) = s.rank_correlation {
        let g: Gauge<f64, std::sync::atomic::AtomicU64> = Gauge::default();
        g.set(rho);
        r.register(
            "scorer_self_check_rank_correlation",
            "Spearman's rank correlation of the pick's expected against observed latency over the window, -1..=1; absent below 64 outcomes",
            g,
        );
    }
}

/// The labels of a config canary's arm.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ArmLabels {
    arm: String,
    config_hash: String,
}

/// Each arm's outcome-latency histogram, labelled.
#[derive(Debug)]
struct ArmHistograms(Vec<(ArmLabels, HistogramSnapshot)>);

impl EncodeMetric for ArmHistograms {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (labels, h) in &self.0 {
            let e = encoder.encode_family(labels)?;
            ConstHistogram::scaled(h.clone(), 1_000.0).encode(e)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// Registers the config canary's per-arm metrics of `engine` in `r`, while
/// one runs.
pub(super) fn register_canary(r: &mut Registry, engine: &Engine) {
    let Some(c) = engine.canary() else {
        return;
    };
    let decisions: Family<ArmLabels, Counter> = Family::default();
    let outcomes: Family<ArmLabels, Counter> = Family::default();
    let failures: Family<ArmLabels, Counter> = Family::default();
    let mut latency = Vec::with_capacity(c.arms.len());
    for a in c.arms {
        let labels = ArmLabels {
            arm: a.arm.as_str().to_owned(),
            config_hash: a.config_hash,
        };
        decisions.get_or_create(&labels).inc_by(a.decisions);
        outcomes.get_or_create(&labels).inc_by(a.outcomes);
        failures.get_or_create(&labels).inc_by(a.failures);
        latency.push((labels, a.latency_ms));
    }
    r.register(
        "scorer_config_arm_decisions",
        "Decisions made by each arm of the running config canary",
        decisions,
    );
    r.register(
        "scorer_config_arm_outcomes",
        "Outcomes of each arm's remembered picks",
        outcomes,
    );
    r.register(
        "scorer_config_arm_failures",
        "Of which failures (success: false)",
        failures,
    );
    r.register(
        "scorer_config_arm_latency_seconds",
        "Outcome latency of each arm's remembered picks",
        ArmHistograms(latency),
    );
}
