//! Why a decision's final scores came from the rules alone (issue #6).

use serde::Serialize;

/// The reason the model's output was not used for a decision. Logged in the
/// decision log's `fallback_reason` column and counted in `GET /v1/model`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FallbackReason {
    /// The inference took longer than `[model] budget_us`.
    BudgetExceeded,
    /// tract returned an error.
    ModelError,
    /// The model returned NaN or an infinity for some row.
    NonFiniteOutput,
    /// No model is loaded (directory missing, unreadable or refused).
    ModelMissing,
    /// The model's feature schema hash differs from the service's.
    SchemaMismatch,
    /// The breaker is open after repeated budget misses.
    BreakerOpen,
    /// `[model] enabled = false`.
    Disabled,
    /// The decider shares its workers with other routers that decide on
    /// the same view (an embedded balancer whose view counts other
    /// routers), and `[model] many_deciders = false`: the model's
    /// correction, drawn from the same shared telemetry, would be the same
    /// in every router and move all their picks together.
    ManyDeciders,
}

impl FallbackReason {
    /// Every reason, in counter order.
    pub const ALL: [FallbackReason; 8] = [
        Self::BudgetExceeded,
        Self::ModelError,
        Self::NonFiniteOutput,
        Self::ModelMissing,
        Self::SchemaMismatch,
        Self::BreakerOpen,
        Self::Disabled,
        Self::ManyDeciders,
    ];

    /// The snake_case label used in responses, logs and counters.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BudgetExceeded => "budget_exceeded",
            Self::ModelError => "model_error",
            Self::NonFiniteOutput => "non_finite_output",
            Self::ModelMissing => "model_missing",
            Self::SchemaMismatch => "schema_mismatch",
            Self::BreakerOpen => "breaker_open",
            Self::Disabled => "model_disabled",
            Self::ManyDeciders => "many_deciders",
        }
    }

    /// Position in [`FallbackReason::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}
