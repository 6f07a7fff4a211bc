//! `POST /v1/feedback`: the outcome of a pick. It releases the pick from the
//! worker's outstanding count, teaches the worker's service-time estimate
//! and failure rate, and feeds outlier ejection; the decision log persists
//! it.
//!
//! Picks wait in [`super::pending`] to match feedback to the worker that
//! was actually picked. Feedback for an id that is not remembered (after a
//! restart, an expiry or an eviction) is accepted and counted, and changes
//! nothing else; feedback naming another worker than the pick changes
//! nothing and says so.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde::{Deserialize, Serialize};

use super::Engine;
use super::pending::Lookup;
use scorer_core::dynamics::EjectionCause;
use scorer_core::locality::{PairHash, PrefixHitRates, RoutingIndex, hash_str, prefix};
use scorer_core::state::WorkerSlot;
use scorer_core::telemetry::validate::MAX_LATENCY_MS;

/// Body of `POST /v1/feedback`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Feedback {
    /// The `decision_id` of the score response: over HTTP a hyphenated
    /// UUID (36 characters; anything else is 422). In-process callers may
    /// use any 1..=64-byte id.
    #[schema(
        min_length = 36,
        max_length = 36,
        pattern = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
    )]
    pub decision_id: String,
    /// The worker the request was sent to, 1..=128 bytes.
    #[schema(min_length = 1, max_length = 128)]
    pub worker_id: String,
    /// Observed latency, ms, finite and >= 0.
    #[schema(minimum = 0.0)]
    pub latency_ms: f64,
    /// Whether the request succeeded.
    pub success: bool,
    /// Whether the worker served the request from its cache: `true` for a
    /// hit, `false` for a miss (in cache-aside, a GET that found nothing);
    /// absent when unknown or not a read. It teaches the worker's hit and
    /// miss service times and how likely a key is warm there (the cost's
    /// locality term).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_hit: Option<bool>,
}

/// What a feedback call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct FeedbackOutcome {
    /// The decision id was remembered.
    pub known_decision: bool,
    /// `false` when the decision is remembered but its pick was another
    /// worker than `worker_id`: nothing was released or learnt. Meaningful
    /// only with `known_decision`: for a decision the service does not
    /// remember it cannot tell, and answers `true`.
    pub worker_was_picked: bool,
    /// The pick was released from the worker's outstanding count and its
    /// outcome learnt.
    pub released: bool,
}

/// Why a feedback body was refused (422).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FeedbackError {
    /// A field is out of its range.
    #[error("`{field}`: {reason}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
}

impl Engine {
    /// Record an outcome at monotonic `now_ms`. A remembered decision whose
    /// picked worker matches `worker_id` releases one in-flight pick.
    ///
    /// # Errors
    /// [`FeedbackError::Invalid`] for an empty or oversized id, an id with a
    /// control character, or a latency outside 0..=[`MAX_LATENCY_MS`] (NaN
    /// included); nothing is recorded then.
    pub fn feedback(&self, f: &Feedback, now_ms: u64) -> Result<FeedbackOutcome, FeedbackError> {
        let bad = |field, reason: &str| {
            Err(FeedbackError::Invalid {
                field,
                reason: reason.to_owned(),
            })
        };
        let control = |s: &str| s.chars().any(char::is_control);
        if f.decision_id.is_empty() || f.decision_id.len() > 64 || control(&f.decision_id) {
            return bad(
                "decision_id",
                "must be 1..=64 bytes without control characters",
            );
        }
        if !scorer_core::telemetry::validate::is_valid_worker_id(&f.worker_id) {
            return bad(
                "worker_id",
                "must be 1..=128 bytes without control or invisible formatting characters or whitespace at either end",
            );
        }
        if !(0.0..=MAX_LATENCY_MS).contains(&f.latency_ms) {
            return bad(
                "latency_ms",
                "must be a number of ms within 0..=86400000 (one day)",
            );
        }
        self.counters.feedback.fetch_add(1, Ordering::Relaxed);
        let lookup = self.pending.take_if_picked(&f.decision_id, &f.worker_id);
        let known = !matches!(lookup, Lookup::Unknown);
        if !known {
            self.counters
                .feedback_unknown_decision
                .fetch_add(1, Ordering::Relaxed);
        }
        let worker_was_picked = !matches!(lookup, Lookup::OtherWorker);
        let mut released = false;
        if let Lookup::Picked(p) = lookup {
            self.self_check.on_outcome(p.expected_ms, f.latency_ms);
            if let (Some((generation, arm)), Some(c)) = (p.arm, self.canary.load().as_deref())
                && c.generation == generation
            {
                c.on_outcome(arm, f.latency_ms, f.success);
            }
            let cfg = self.config();
            if f.cache_hit.is_some() && cfg.locality.enabled {
                self.locality
                    .get_or_init(|| RoutingIndex::new(self.locality_entries));
                let rates = self
                    .prefix_rates
                    .get_or_init(|| PrefixHitRates::new(prefix::DEFAULT_ENTRIES));
                if let (Some(hit), Some(prefix_hash), true) =
                    (f.cache_hit, p.record.prefix_hash, f.success)
                {
                    rates.observe(PairHash::new(prefix_hash, hash_str(&p.worker_id)), hit);
                }
            }
            let eject = p.slot.evidence().complete_cached(
                &p.record,
                f.latency_ms,
                f.success,
                f.cache_hit,
                now_ms,
                &cfg.evidence,
                &cfg.outlier,
            );
            if eject {
                self.try_eject(&p.slot, now_ms, EjectionCause::ConsecutiveFailures);
            }
            released = true;
        }
        self.outlier_sweep(now_ms);
        Ok(FeedbackOutcome {
            known_decision: known,
            worker_was_picked,
            released,
        })
    }

    /// Ejects `slot`'s worker at `now_ms` unless `outlier.max_ejection_percent`
    /// of the pool is ejected already (at least one may always be).
    fn try_eject(&self, slot: &Arc<WorkerSlot>, now_ms: u64, cause: EjectionCause) {
        let cfg = self.config();
        let slots = self.registry.slots();
        let ejected = slots
            .iter()
            .filter(|s| s.evidence().snapshot().outlier.is_ejected(now_ms))
            .count();
        let id = slot.view().worker_id.clone();
        if ejected >= cfg.outlier.max_ejected(slots.len()) {
            tracing::info!(worker = %id, cause = cause.as_str(), ejected, "outlier ejection skipped: max_ejection_percent reached");
            return;
        }
        let len_ms = slot.evidence().eject(now_ms, cause, &cfg.outlier);
        tracing::info!(worker = %id, cause = cause.as_str(), ejection_ms = len_ms, "outlier ejected");
    }

    /// Every `outlier.interval_ms`: Envoy's success-rate ejection over the
    /// workers with enough outcomes, then a new interval for all.
    fn outlier_sweep(&self, now_ms: u64) {
        let cfg = self.config();
        let next = self.next_outlier_sweep_ms.load(Ordering::Relaxed);
        if now_ms < next
            || self
                .next_outlier_sweep_ms
                .compare_exchange(
                    next,
                    now_ms.saturating_add(cfg.outlier.interval_ms),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_err()
        {
            return;
        }
        if next == 0 {
            // The first feedback starts the first interval.
            return;
        }
        let slots = self.registry.slots();
        let rates: Vec<(usize, f64)> = slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let e = s.evidence().snapshot();
                (!e.outlier.is_ejected(now_ms))
                    .then_some(())
                    .and(
                        e.outlier
                            .window_success_rate(cfg.outlier.success_rate_request_volume),
                    )
                    .map(|r| (i, r))
            })
            .collect();
        for i in scorer_core::dynamics::outlier::success_rate_outliers(&rates, &cfg.outlier) {
            self.try_eject(&slots[i], now_ms, EjectionCause::SuccessRate);
        }
        for s in &slots {
            s.evidence().end_interval(now_ms);
        }
    }
}
