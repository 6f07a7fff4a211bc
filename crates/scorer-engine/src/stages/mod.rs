//! The stages of a score decision, in order; each reads and extends one
//! `Decision`:
//!
//! 1. `rules`: look the candidates up, weigh each snapshot's age, and
//!    rule-score each on its signals (a stale one on signals pulled toward
//!    its fresh peers);
//! 2. `freshness`: a stale candidate never outranks the median fresh one,
//!    then pays for its age;
//! 3. `dynamics`: penalty states, outlier ejection and slow start; the
//!    selectable set, or panic mode when none is eligible;
//! 4. `cost`: each selectable candidate's routing cost and expected latency from the
//!    service's own evidence (skipped in panic mode);
//! 5. `model`: the 42-feature vectors, then the model's cost factor or
//!    its rule fallback, and the shadow model;
//! 6. `select`: the pick and every candidate's propensity under the
//!    request's policy;
//! 7. `log`: a sampled decision's record for the decision log, built from
//!    the decision itself;
//! 8. `record`: the pending pick and counters, then the answer: explained,
//!    or compact when nothing reads the explanation.
//!
//! The driver that runs them is [`crate::Engine::decide`] (`decide.rs`).

mod cost;
mod dynamics;
mod freshness;
mod log;
mod model;
mod record;
mod rules;
mod select;

pub(crate) use cost::cost;
pub(crate) use dynamics::dynamics;
pub(crate) use freshness::freshness;
pub use log::shadow_record;
pub(crate) use log::{Stamp, log};
pub(crate) use model::model;
pub(crate) use record::{answer, charge, compact, scores};
pub(crate) use rules::rules;
pub(crate) use select::select;

/// The stages' names, in order, as the per-stage metric labels them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecisionStage {
    /// Candidate lookup and rule scores.
    Rules,
    /// The stale cap and the stale-telemetry deduction.
    Freshness,
    /// Penalty states, ejection, slow start, eligibility and panic mode.
    Dynamics,
    /// The routing cost and expected latency.
    Cost,
    /// Features, the model or its fallback, and the shadow model.
    Model,
    /// The pick and the propensities.
    Select,
    /// The decision-log record, built and queued when the log samples the
    /// decision.
    Log,
    /// The pending pick, counters and the answer.
    Record,
}

impl DecisionStage {
    /// Every stage, in order.
    pub const ALL: [Self; 8] = [
        Self::Rules,
        Self::Freshness,
        Self::Dynamics,
        Self::Cost,
        Self::Model,
        Self::Select,
        Self::Log,
        Self::Record,
    ];

    /// Label value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Rules => "rules",
            Self::Freshness => "freshness",
            Self::Dynamics => "dynamics",
            Self::Cost => "cost",
            Self::Model => "model",
            Self::Select => "select",
            Self::Log => "log",
            Self::Record => "record",
        }
    }
}

/// Told when each stage of a decision ends (the service times them); a
/// decision without one pays nothing.
pub trait StageObserver {
    /// `stage` just ended.
    fn stage_done(&mut self, stage: DecisionStage);
}

/// Observes nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;

impl StageObserver for NoObserver {
    #[inline]
    fn stage_done(&mut self, _: DecisionStage) {}
}

#[cfg(test)]
mod cost_digest_tests;
#[cfg(test)]
mod log_tests;
#[cfg(test)]
pub(crate) mod test_support;
