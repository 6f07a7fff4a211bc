//! `POST /v1/feedback`: the outcome of a pick. It releases the picked
//! worker's in-flight count early (issue #3) and is counted; the decision log
//! persists it (issue #4).
//!
//! Decisions are remembered in a bounded table (FIFO eviction, 16 shards so
//! the score path never contends on one lock) to match feedback to the
//! worker that was actually picked. Feedback for an id that is not
//! remembered (after a restart, or evicted) is accepted and counted.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use serde::{Deserialize, Serialize};

use super::Engine;
use crate::telemetry::validate::MAX_LATENCY_MS;

const SHARDS: usize = 16;

/// Body of `POST /v1/feedback`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Feedback {
    /// The `decision_id` of the score response, 1..=64 bytes.
    #[schema(min_length = 1, max_length = 64)]
    pub decision_id: String,
    /// The worker the request was sent to, 1..=128 bytes.
    #[schema(min_length = 1, max_length = 128)]
    pub worker_id: String,
    /// Observed latency, ms, finite and >= 0.
    #[schema(minimum = 0.0)]
    pub latency_ms: f64,
    /// Whether the request succeeded.
    pub success: bool,
}

/// What a feedback call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct FeedbackOutcome {
    /// The decision id was remembered.
    pub known_decision: bool,
    /// An in-flight pick of the worker was released.
    pub released: bool,
}

#[derive(Debug, Default)]
struct Shard {
    picks: HashMap<String, String>,
    order: VecDeque<String>,
}

/// Bounded map decision id → picked worker id.
#[derive(Debug)]
pub(super) struct RecentDecisions {
    shards: Vec<Mutex<Shard>>,
    per_shard: usize,
}

fn shard_of(id: &str) -> usize {
    id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }) as usize
        % SHARDS
}

impl RecentDecisions {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
        }
    }

    pub(super) fn remember(&self, decision_id: &str, worker_id: &str) {
        let mut s = self.shards[shard_of(decision_id)]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if s.picks
            .insert(decision_id.to_owned(), worker_id.to_owned())
            .is_none()
        {
            s.order.push_back(decision_id.to_owned());
        }
        // `order` may hold ids already taken; it bounds memory either way.
        while s.order.len() > self.per_shard {
            if let Some(old) = s.order.pop_front() {
                s.picks.remove(&old);
            }
        }
    }

    /// Look `decision_id` up; forget it only when its pick was `worker_id`, so
    /// a mistaken feedback does not consume the decision.
    pub(super) fn take_if_picked(&self, decision_id: &str, worker_id: &str) -> Lookup {
        let mut s = self.shards[shard_of(decision_id)]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match s.picks.get(decision_id) {
            None => Lookup::Unknown,
            Some(w) if w != worker_id => Lookup::OtherWorker,
            Some(_) => {
                s.picks.remove(decision_id);
                Lookup::Picked
            }
        }
    }
}

/// What the remembered decisions say about a feedback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lookup {
    /// Not remembered (restart, eviction, or already answered).
    Unknown,
    /// Remembered, but another worker was picked.
    OtherWorker,
    /// Remembered and this worker was picked; now forgotten.
    Picked,
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
        if !crate::telemetry::validate::is_valid_worker_id(&f.worker_id) {
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
        let lookup = self.decisions.take_if_picked(&f.decision_id, &f.worker_id);
        let known = lookup != Lookup::Unknown;
        if !known {
            self.counters
                .feedback_unknown_decision
                .fetch_add(1, Ordering::Relaxed);
        }
        let mut released = false;
        if lookup == Lookup::Picked
            && let Some(slot) = self.registry.get(&f.worker_id)
        {
            slot.inflight().release(now_ms);
            released = true;
        }
        Ok(FeedbackOutcome {
            known_decision: known,
            released,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_take_forgets() {
        let r = RecentDecisions::new(16); // one per shard
        for i in 0..1000 {
            r.remember(&format!("d{i}"), "w");
        }
        let kept = (0..1000)
            .filter(|i| r.take_if_picked(&format!("d{i}"), "w") == Lookup::Picked)
            .count();
        assert!(kept <= SHARDS, "{kept}");
        r.remember("x", "w1");
        assert_eq!(r.take_if_picked("x", "w2"), Lookup::OtherWorker);
        assert_eq!(r.take_if_picked("x", "w1"), Lookup::Picked);
        assert_eq!(r.take_if_picked("x", "w1"), Lookup::Unknown);
    }
}
