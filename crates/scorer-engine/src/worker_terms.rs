//! A worker's request-independent terms, computed when its telemetry is
//! published instead of on every pick, the way gRPC's weighted round robin
//! recomputes endpoint weights off the pick path and Pingora's selection
//! builds its tables once per backend update.
//!
//! [`WorkerTerms`] holds the worker's rule score for a read and for a write
//! (the request type is the only request input of the rule score), derived
//! under one configuration. It rides on the [`WorkerView`] it was derived
//! from, so each event that changes the inputs replaces it:
//!
//! - a telemetry delta publishes a new view, derived afresh at ingest;
//! - a configuration change (hot reload, or a canary's candidate
//!   configuration on its slice) leaves the old terms in place but stale:
//!   they name the configuration hash they were derived under, and a pick
//!   under another computes the rule score itself until the next report;
//! - time: the terms hold only while the report is fresh (no stale pull
//!   toward the peers, no freshness deduction), the worker live and past
//!   its warm-up (no warm-up deduction); outside those a pick computes the
//!   rule score itself.
//!
//! Outcomes, outstanding picks and operators' overrides change none of
//! these: the dynamics, cost and override terms read them at the pick,
//! together with the time-decayed evidence (penalty state, snapshot trust,
//! slow start, service-time estimate), which would cost as much to
//! revalidate as to compute.
//!
//! A pick that uses the terms gets the score [`rule_score_with`] would
//! compute at that instant, bit for bit: the same function on the same
//! inputs, evaluated earlier.

use std::sync::Arc;

use crate::config::Config;
use scorer_core::scoring::{RequestType, RuleInputs, rule_score_with};
use scorer_core::state::WorkerView;

/// The request-independent terms of one published view.
#[derive(Debug)]
pub(crate) struct WorkerTerms {
    /// The configuration hash they were derived under.
    config_hash: Arc<str>,
    /// The rule score of a request that is not a write, and of a write.
    read: f64,
    write: f64,
    /// Whether the warm-up deduction is configured at all.
    warmup_ms: u64,
    /// The last monotonic ms at which the view is fresh and live.
    fresh_until_ms: u64,
}

impl WorkerTerms {
    /// The terms of `view`, just published, under `cfg` (hash `config_hash`).
    pub(crate) fn derive(view: &WorkerView, cfg: &Config, config_hash: &Arc<str>) -> Self {
        let score = |request_type| {
            let inputs = RuleInputs {
                cfg: &cfg.scoring,
                dead_after_ms: cfg.telemetry.dead_after_ms,
                request_type,
                now_ms: view.last_receive_ms,
                warmup: false,
            };
            rule_score_with(view, &inputs, false).0.score
        };
        let fresh_ms = cfg.freshness.fresh_ms.min(cfg.telemetry.dead_after_ms);
        Self {
            config_hash: config_hash.clone(),
            read: score(None),
            write: score(Some(RequestType::Put)),
            warmup_ms: cfg.scoring.warmup_ms,
            fresh_until_ms: view.last_receive_ms.saturating_add(fresh_ms),
        }
    }

    /// [`WorkerTerms::derive`] as the registry stores it.
    pub(crate) fn derived(
        view: &WorkerView,
        cfg: &Config,
        config_hash: &Arc<str>,
    ) -> scorer_core::state::Derived {
        Arc::new(Self::derive(view, cfg, config_hash))
    }

    /// The rule score of `view` for a request of `request_type` at
    /// monotonic `now_ms` under the configuration of hash `config_hash`,
    /// when its terms hold then; the worker is then live and fresh.
    pub(crate) fn rule_score(
        view: &WorkerView,
        config_hash: &Arc<str>,
        request_type: Option<RequestType>,
        now_ms: u64,
    ) -> Option<f64> {
        let t = view.derived.as_deref()?.downcast_ref::<Self>()?;
        let holds = Arc::ptr_eq(&t.config_hash, config_hash)
            && now_ms >= view.last_receive_ms
            && now_ms <= t.fresh_until_ms
            && (t.warmup_ms == 0 || view.registered_for_ms(now_ms) >= t.warmup_ms);
        holds.then(|| {
            if request_type.is_some_and(RequestType::is_write) {
                t.write
            } else {
                t.read
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scorer_core::scoring::rule_score;
    use scorer_core::state::{IngestConfig, Registry};
    use scorer_core::telemetry::Snapshot;

    const WALL: u64 = 1_750_000_000_000;

    fn published(cfg: &Config, hash: &Arc<str>, disk_ms: f64, at_ms: u64) -> Arc<WorkerView> {
        let r = Registry::new();
        let mut s = Snapshot::new("w", WALL);
        s.cpu_usage = 0.93;
        s.rtt_ms_p99 = 40.0;
        s.disk_io_await_ms = Some(disk_ms);
        let derive = |v: &WorkerView| WorkerTerms::derived(v, cfg, hash);
        let icfg = IngestConfig {
            telemetry: &cfg.telemetry,
            max_batch: 16,
            penalty: &cfg.penalty,
            rule_score: &|_| 100.0,
            derive: Some(&derive),
        };
        r.ingest(&[s], at_ms, WALL, &icfg).expect("valid");
        r.get("w").expect("registered").view_full()
    }

    #[test]
    fn the_terms_give_the_rule_score_of_the_pick_while_they_hold() {
        let mut cfg = Config::default();
        cfg.scoring.warmup_ms = 500;
        let hash: Arc<str> = cfg.hash().into();
        let v = published(&cfg, &hash, 90.0, 1_000);
        let at = |now_ms, request_type| {
            let inputs = RuleInputs {
                cfg: &cfg.scoring,
                dead_after_ms: cfg.telemetry.dead_after_ms,
                request_type,
                now_ms,
                warmup: true,
            };
            rule_score(&v, &inputs).0.score
        };
        let (read, write) = (Some(RequestType::Get), Some(RequestType::Put));
        let now = 1_000 + cfg.scoring.warmup_ms;
        let cached = |now, t| WorkerTerms::rule_score(&v, &hash, t, now);
        assert_eq!(cached(now, read), Some(at(now, read)));
        assert_eq!(cached(now, write), Some(at(now, write)));
        // A slow disk weighs more on a write.
        assert!(at(now, write) < at(now, read));
        // Warming up, stale, or under another configuration: not held.
        assert_eq!(cached(now - 1, read), None);
        assert_eq!(cached(1_000 + cfg.freshness.fresh_ms + 1, read), None);
        let other: Arc<str> = cfg.hash().into();
        assert_eq!(WorkerTerms::rule_score(&v, &other, read, now), None);
    }
}
