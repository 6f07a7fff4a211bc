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

    /// Queue one decision a router made (`POST /v1/router/decisions`),
    /// within the routers' own budget: never at the cost of the host's own
    /// records. By default as [`DecisionSink::log_decision`].
    fn log_router_decision(&self, rec: DecisionRecord) -> bool {
        self.log_decision(rec)
    }

    /// Queue one outcome a router reported, as
    /// [`DecisionSink::log_router_decision`].
    fn log_router_outcome(&self, rec: OutcomeRecord) -> bool {
        self.log_outcome(rec)
    }

    /// Routers' records the sink can take now without dropping, within
    /// their budget, as an estimate (by default [`DecisionSink::room`]).
    fn router_room(&self) -> usize {
        self.room()
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

    fn log_router_decision(&self, rec: DecisionRecord) -> bool {
        self.log_decision_from(crate::Source::Router, rec)
    }

    fn log_router_outcome(&self, rec: OutcomeRecord) -> bool {
        self.log_outcome_from(crate::Source::Router, rec)
    }

    fn router_room(&self) -> usize {
        crate::DecisionLog::router_room(self)
    }
}
