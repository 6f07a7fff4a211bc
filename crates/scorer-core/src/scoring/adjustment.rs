//! One line of a score's explanation, and the builder that keeps the
//! "base plus adjustments equals score" invariant by construction.

use serde::Serialize;

use super::reason::{Reason, ReasonKind};

/// Every rule score starts here.
pub const BASE_SCORE: f64 = 100.0;

/// How an adjustment changes the running score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AdjustmentKind {
    /// Score multiplied by `factor`.
    Multiply,
    /// Points subtracted.
    Deduct,
    /// Points added (model or rule actions in later stages).
    Add,
    /// Score brought back into [0, 100].
    Clamp,
}

/// Which stage of the pipeline produced an adjustment. Replaying the `rule`
/// adjustments from 100 gives `rule_score`; replaying all gives `final_score`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// The stateless rule scorer (issue #2), including stale-telemetry handling.
    #[default]
    Rule,
    /// Per-worker dynamics: penalty states and the snapshot's age.
    Dynamics,
    /// The routing cost: service time, outstanding picks, unseen
    /// backlog, failures, snapshot factors, slow start.
    Cost,
    /// Model and fallback-rule actions (issue #6).
    Model,
}

/// One explained step of a score.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Adjustment {
    /// Stable machine name, e.g. `rtt_p99_high`.
    pub code: &'static str,
    /// Pipeline stage.
    pub stage: Stage,
    /// How it applies.
    pub kind: AdjustmentKind,
    /// Signed change of the score, points (negative lowers it; shown
    /// rounded to 1e-12 to drop binary float noise, e.g. `86.255333`).
    #[serde(serialize_with = "crate::fmt::serialize_points")]
    pub impact: f64,
    /// The multiplier, for [`AdjustmentKind::Multiply`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub factor: Option<f64>,
    /// Plain sentence with the numbers and thresholds (rendered when serialised).
    #[schema(value_type = String)]
    pub reason: Reason,
    /// The signal value that triggered it, in the signal's unit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_value: Option<f64>,
}

/// Adjustments an [`Explained`] makes room for at its first one: a
/// candidate typically collects a few rule deductions, a dynamics step and
/// the two model-stage actions, and growing the vector one doubling at a
/// time cost two reallocations and copies per candidate on the score path.
pub const ADJUSTMENTS_CAPACITY: usize = 8;

/// A score and the adjustments that produced it from [`BASE_SCORE`].
///
/// A quiet one ([`Explained::quiet`]) computes the same score with the
/// same floating-point operations in the same order, but records no
/// adjustment: a compact decision reads the score alone.
#[derive(Debug, Clone, PartialEq)]
pub struct Explained {
    /// Current score.
    pub score: f64,
    /// Steps applied so far, in order (none when quiet).
    pub adjustments: Vec<Adjustment>,
    /// Stage stamped on the next adjustments.
    pub stage: Stage,
    explains: bool,
}

impl Default for Explained {
    fn default() -> Self {
        Self {
            score: 0.0,
            adjustments: Vec::new(),
            stage: Stage::Rule,
            explains: true,
        }
    }
}

/// Round a deduction to 1e-6 points so explanations print cleanly
/// (`7.2`, not `7.200000000000001`); the score is computed from the rounded
/// value, so the sum invariant stays exact.
fn round_points(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

impl Explained {
    /// Start at [`BASE_SCORE`].
    pub fn new() -> Self {
        Self::starting_at(BASE_SCORE)
    }

    /// Start at `score` (used by later stages that adjust a rule score).
    pub fn starting_at(score: f64) -> Self {
        Self {
            score,
            adjustments: Vec::new(),
            stage: Stage::Rule,
            explains: true,
        }
    }

    /// At [`BASE_SCORE`], recording nothing: the score alone, never an
    /// allocation.
    pub fn quiet() -> Self {
        Self {
            explains: false,
            ..Self::new()
        }
    }

    /// [`Explained::new`] when `explain`, else [`Explained::quiet`].
    pub fn with_explanation(explain: bool) -> Self {
        if explain { Self::new() } else { Self::quiet() }
    }

    /// Whether adjustments are recorded (callers skip building a reason
    /// that costs an allocation when not).
    pub fn explains(&self) -> bool {
        self.explains
    }

    /// Appends `a`, reserving [`ADJUSTMENTS_CAPACITY`] on the first one (a
    /// candidate with nothing to explain allocates nothing).
    fn push(&mut self, a: Adjustment) {
        if !self.explains {
            return;
        }
        if self.adjustments.capacity() == 0 {
            self.adjustments.reserve_exact(ADJUSTMENTS_CAPACITY);
        }
        self.adjustments.push(a);
    }

    /// Multiply the score by `factor` in [0, 1].
    pub fn multiply(
        &mut self,
        code: &'static str,
        factor: f64,
        reason: impl Into<Reason>,
        source: Option<f64>,
    ) {
        debug_assert!((0.0..=1.0).contains(&factor));
        let before = self.score;
        self.score = before * factor;
        self.push(Adjustment {
            code,
            stage: self.stage,
            kind: AdjustmentKind::Multiply,
            impact: self.score - before,
            factor: Some(factor),
            reason: reason.into(),
            source_value: source,
        });
    }

    /// Subtract `points` (>= 0; rounded to 1e-6). Zero deductions are not recorded.
    pub fn deduct(
        &mut self,
        code: &'static str,
        points: f64,
        reason: impl Into<Reason>,
        source: Option<f64>,
    ) {
        debug_assert!(points.is_finite() && points >= 0.0);
        let points = round_points(points);
        if points <= 0.0 {
            return;
        }
        self.score -= points;
        self.push(Adjustment {
            code,
            stage: self.stage,
            kind: AdjustmentKind::Deduct,
            impact: -points,
            factor: None,
            reason: reason.into(),
            source_value: source,
        });
    }

    /// Add `points` (any sign, finite; rounded to 1e-6). Zero changes are still
    /// recorded so a reader sees the stage ran.
    pub fn add(
        &mut self,
        code: &'static str,
        points: f64,
        reason: impl Into<Reason>,
        source: Option<f64>,
    ) {
        debug_assert!(points.is_finite());
        let points = round_points(points);
        self.score += points;
        self.push(Adjustment {
            code,
            stage: self.stage,
            kind: AdjustmentKind::Add,
            impact: points,
            factor: None,
            reason: reason.into(),
            source_value: source,
        });
    }

    /// Clamp into [0, 100], recording the step only when it changes the score.
    pub fn clamp(&mut self) {
        let before = self.score;
        let after = before.clamp(0.0, BASE_SCORE);
        if after != before {
            self.score = after;
            self.push(Adjustment {
                code: "clamp",
                stage: self.stage,
                kind: AdjustmentKind::Clamp,
                impact: after - before,
                factor: None,
                reason: Reason::new(ReasonKind::Clamp, [before, 0.0, 0.0, 0.0, 0.0]),
                source_value: None,
            });
        }
    }

    /// Replay the adjustments from `start`: multiply by factors, add impacts, clamp.
    /// Used by tests to check the invariant.
    pub fn replay(start: f64, adjustments: &[Adjustment]) -> f64 {
        adjustments.iter().fold(start, |s, a| match a.kind {
            AdjustmentKind::Multiply => s * a.factor.unwrap_or(1.0),
            AdjustmentKind::Clamp => s.clamp(0.0, BASE_SCORE),
            AdjustmentKind::Deduct | AdjustmentKind::Add => s + a.impact,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_matches_running_score() {
        let mut e = Explained::new();
        e.multiply("compacting", 0.7, String::new(), None);
        e.deduct("cpu_high", 7.200000000000001, String::new(), Some(0.88));
        e.deduct("rtt", 80.0, String::new(), None);
        e.clamp();
        assert_eq!(e.adjustments[1].impact, -7.2);
        assert_eq!(e.score, 0.0);
        assert!((Explained::replay(BASE_SCORE, &e.adjustments) - e.score).abs() < 1e-9);
        let sum: f64 = BASE_SCORE + e.adjustments.iter().map(|a| a.impact).sum::<f64>();
        assert!((sum - e.score).abs() < 1e-9);
    }

    #[test]
    fn zero_deductions_are_not_recorded() {
        let mut e = Explained::new();
        e.deduct("x", 0.0, String::new(), None);
        assert!(e.adjustments.is_empty());
    }
}
