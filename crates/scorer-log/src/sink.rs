//! Where a decision engine hands its records: the Parquet [`DecisionLog`]
//! (feature `parquet`), or whatever a host that embeds the engine provides.
//!
//! [`DecisionLog`]: crate::DecisionLog

use crate::record::{DecisionRecord, OutcomeRecord};

/// A destination for decision and outcome records, called on the request
/// path: every method must return at once (queue, never write inline) and
/// never fail the request.
pub trait DecisionSink: std::any::Any + Send + Sync + std::fmt::Debug {
    /// Whether the decision `decision_id` is logged (sampling is by id, so a
    /// decision and its outcomes are kept or dropped together).
    fn sampled(&self, decision_id: &str) -> bool;

    /// Queue one decision; `false` when it was not sampled or was dropped.
    fn log_decision(&self, rec: DecisionRecord) -> bool;

    /// Queue one outcome; `false` when it was not sampled or was dropped.
    fn log_outcome(&self, rec: OutcomeRecord) -> bool;

    /// Records the sink can take now without dropping, as an estimate
    /// (unbounded by default).
    fn room(&self) -> usize {
        usize::MAX
    }
}

#[cfg(feature = "parquet")]
impl DecisionSink for crate::DecisionLog {
    fn sampled(&self, decision_id: &str) -> bool {
        crate::DecisionLog::sampled(self, decision_id)
    }

    fn log_decision(&self, rec: DecisionRecord) -> bool {
        crate::DecisionLog::log_decision(self, rec)
    }

    fn log_outcome(&self, rec: OutcomeRecord) -> bool {
        crate::DecisionLog::log_outcome(self, rec)
    }

    fn room(&self) -> usize {
        crate::DecisionLog::room(self)
    }
}
