//! Rule scoring: a 0..=100 score per worker with an itemised explanation.
//!
//! The algorithm (issue #2; design notes §2.2 "multiplicative penalties plus
//! additive deductions") starts at 100, applies multiplicative health
//! penalties, then capped additive deductions on smoothed signals, then
//! clamps to [0, 100]. Every step is an [`Adjustment`]; applying them in
//! order to 100 reproduces the score exactly.

mod adjustment;
mod config;
mod context;
mod cost;
mod reason;
mod rules;

pub use adjustment::{Adjustment, AdjustmentKind, BASE_SCORE, Explained, Stage};
pub use config::ScoringConfig;
pub use context::{RequestContext, RequestType};
pub use cost::{CostConfig, CostEstimate, CostInputs, apply_cost};
pub use reason::{Reason, ReasonKind};
pub use rules::{RuleInputs, rule_score, rule_score_with};
