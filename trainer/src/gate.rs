//! The promotion gate of `trainer loop`: whether a candidate model replaces
//! the served one, and whether a promoted model is rolled back. Pure
//! functions of the evidence; the evidence itself is `trainer compare`'s
//! doubly robust (DR) estimate and its paired bootstrap interval
//! ([`crate::compare`]).
//!
//! **Promotion.** On the window's held-out decisions (the newest, which the
//! candidate did not train on), the gain is the served model's DR mean
//! latency minus the candidate's, in ms: positive when the candidate would
//! have been faster. The candidate is promoted only when
//!
//! 1. at least `min_decisions` held-out decisions are usable (a picked
//!    candidate with an outcome and a propensity, every candidate's
//!    features logged), and
//! 2. the gain exceeds `min_gain_ms`, and
//! 3. the whole 95 % interval of the gain lies above 0.
//!
//! Otherwise the served model is held, and [`Hold`] says why.
//!
//! **Rollback.** After a promotion, on the decisions the promoted model
//! served (the log's `model_version`), the gain of going back is the
//! promoted model's DR mean latency minus the previous one's. The promoted
//! model is rolled back when at least `min_decisions` such decisions are
//! usable and the whole interval of that gain lies above 0: the previous
//! model is better, beyond the noise of which decisions were logged.

use std::fmt;

use crate::compare::Interval;

/// The gate's thresholds (`--min-decisions`, `--min-gain-ms`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GateConfig {
    /// Fewest usable decisions an estimate may rest on.
    pub min_decisions: usize,
    /// Smallest DR gain that promotes, ms (>= 0).
    pub min_gain_ms: f64,
}

/// `trainer loop --min-decisions`'s default.
pub const DEFAULT_MIN_DECISIONS: usize = 1_000;

/// `trainer loop --min-gain-ms`'s default, ms.
pub const DEFAULT_MIN_GAIN_MS: f64 = 0.05;

impl Default for GateConfig {
    fn default() -> Self {
        Self {
            min_decisions: DEFAULT_MIN_DECISIONS,
            min_gain_ms: DEFAULT_MIN_GAIN_MS,
        }
    }
}

/// What a comparison measured: the gain of the challenger over the
/// incumbent (incumbent's DR mean latency minus the challenger's, ms;
/// positive when the challenger is faster) and its 95 % interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Evidence {
    /// Usable decisions behind the estimate.
    pub decisions: usize,
    /// The DR gain, ms; `None` without an estimate.
    pub gain_ms: Option<f64>,
    /// Its 95 % bootstrap interval, ms; `None` without the bootstrap.
    pub gain_ci_ms: Option<Interval>,
}

impl Evidence {
    /// The same evidence for the other side: the gain and its interval
    /// negated.
    pub fn negated(self) -> Self {
        Evidence {
            gain_ms: self.gain_ms.map(|g| -g),
            gain_ci_ms: self.gain_ci_ms.map(|c| Interval {
                low: -c.high,
                high: -c.low,
            }),
            ..self
        }
    }
}

/// Why a candidate was not promoted (or a promoted model was kept).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Hold {
    /// Fewer usable decisions than `min_decisions`.
    TooFewDecisions,
    /// No DR estimate or no interval.
    NoEstimate,
    /// The interval reaches 0 or below: the gain may be nothing, or a loss.
    IntervalNotAbove0,
    /// The interval is above 0 but the gain is at most `min_gain_ms`.
    GainBelowMinimum,
}

/// The gate's answer on a candidate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Promotion {
    /// Promote the candidate.
    Promote,
    /// Keep the served model.
    Hold(Hold),
}

/// The gate's answer on a promoted model, judged against the previous one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rollback {
    /// The previous model is better: serve it again.
    RollBack,
    /// Keep the promoted model.
    Keep(Hold),
}

/// Whether `candidate` (evidence of the candidate against the served model)
/// is promoted (see the module docs).
pub fn decide_promotion(cfg: &GateConfig, candidate: &Evidence) -> Promotion {
    match judge(cfg, candidate) {
        Err(h) => Promotion::Hold(h),
        Ok(gain_ms) if gain_ms > cfg.min_gain_ms => Promotion::Promote,
        Ok(_) => Promotion::Hold(Hold::GainBelowMinimum),
    }
}

/// Whether the promoted model is rolled back, from `previous`: evidence of
/// the previous model (challenger) against the promoted one (incumbent) on
/// the decisions the promoted one served (see the module docs).
pub fn decide_rollback(cfg: &GateConfig, previous: &Evidence) -> Rollback {
    match judge(cfg, previous) {
        Err(h) => Rollback::Keep(h),
        Ok(_) => Rollback::RollBack,
    }
}

/// The gain, when there are enough decisions and its whole interval is
/// above 0.
fn judge(cfg: &GateConfig, e: &Evidence) -> Result<f64, Hold> {
    if e.decisions < cfg.min_decisions {
        return Err(Hold::TooFewDecisions);
    }
    let (Some(gain_ms), Some(ci)) = (e.gain_ms, e.gain_ci_ms) else {
        return Err(Hold::NoEstimate);
    };
    if ci.low.is_nan() || ci.low <= 0.0 {
        return Err(Hold::IntervalNotAbove0);
    }
    Ok(gain_ms)
}

/// `n` with a space between groups of three digits (`8 412`).
pub fn grouped(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

impl Hold {
    /// Why, in words, with the evidence's figures.
    pub fn explain(&self, cfg: &GateConfig, e: &Evidence) -> String {
        let n = grouped(e.decisions);
        let figures = || {
            let gain = e.gain_ms.unwrap_or(f64::NAN);
            let ci = e.gain_ci_ms.map_or("n/a".to_string(), |c| {
                format!("{:.3}..{:.3} ms", c.low, c.high)
            });
            (gain, ci)
        };
        match self {
            Hold::TooFewDecisions => format!(
                "{n} usable decisions, fewer than min-decisions {}",
                grouped(cfg.min_decisions)
            ),
            Hold::NoEstimate => {
                format!("no DR estimate with an interval ({n} decisions)")
            }
            Hold::IntervalNotAbove0 => {
                let (gain, ci) = figures();
                let side = match e.gain_ci_ms {
                    Some(c) if c.high < 0.0 => "is below 0",
                    _ => "straddles 0",
                };
                format!(
                    "DR gain {gain:.3} ms, 95% CI {ci} {side} (min-gain {:.3} ms, {n} decisions)",
                    cfg.min_gain_ms
                )
            }
            Hold::GainBelowMinimum => {
                let (gain, ci) = figures();
                format!(
                    "DR gain {gain:.3} ms, 95% CI {ci}, not above min-gain {:.3} ms ({n} decisions)",
                    cfg.min_gain_ms
                )
            }
        }
    }
}

impl fmt::Display for Evidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.gain_ms, self.gain_ci_ms) {
            (Some(g), Some(c)) => write!(
                f,
                "DR gain {g:.3} ms, 95% CI {:.3}..{:.3} ms ({} decisions)",
                c.low,
                c.high,
                grouped(self.decisions)
            ),
            (Some(g), None) => write!(
                f,
                "DR gain {g:.3} ms, no interval ({} decisions)",
                grouped(self.decisions)
            ),
            _ => write!(f, "no DR estimate ({} decisions)", grouped(self.decisions)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: GateConfig = GateConfig {
        min_decisions: 1_000,
        min_gain_ms: 0.05,
    };

    fn evidence(decisions: usize, gain_ms: f64, low: f64, high: f64) -> Evidence {
        Evidence {
            decisions,
            gain_ms: Some(gain_ms),
            gain_ci_ms: Some(Interval { low, high }),
        }
    }

    #[test]
    fn a_gain_above_the_minimum_with_its_interval_above_0_promotes() {
        let e = evidence(8_412, 0.30, 0.12, 0.48);
        assert_eq!(decide_promotion(&CFG, &e), Promotion::Promote);
    }

    #[test]
    fn too_few_decisions_hold_however_large_the_gain() {
        let e = evidence(999, 5.0, 4.0, 6.0);
        assert_eq!(
            decide_promotion(&CFG, &e),
            Promotion::Hold(Hold::TooFewDecisions)
        );
        assert_eq!(
            Hold::TooFewDecisions.explain(&CFG, &e),
            "999 usable decisions, fewer than min-decisions 1 000"
        );
        // One more decision is enough.
        let e = Evidence {
            decisions: 1_000,
            ..e
        };
        assert_eq!(decide_promotion(&CFG, &e), Promotion::Promote);
    }

    #[test]
    fn an_interval_straddling_0_holds() {
        let e = evidence(8_412, 0.04, -0.02, 0.10);
        assert_eq!(
            decide_promotion(&CFG, &e),
            Promotion::Hold(Hold::IntervalNotAbove0)
        );
        assert_eq!(
            Hold::IntervalNotAbove0.explain(&CFG, &e),
            "DR gain 0.040 ms, 95% CI -0.020..0.100 ms straddles 0 (min-gain 0.050 ms, 8 412 decisions)"
        );
        // A large point gain does not promote while the interval reaches 0.
        let e = evidence(8_412, 0.40, 0.0, 0.80);
        assert_eq!(
            decide_promotion(&CFG, &e),
            Promotion::Hold(Hold::IntervalNotAbove0)
        );
    }

    #[test]
    fn a_loss_holds() {
        let e = evidence(8_412, -0.30, -0.45, -0.15);
        assert_eq!(
            decide_promotion(&CFG, &e),
            Promotion::Hold(Hold::IntervalNotAbove0)
        );
        assert!(
            Hold::IntervalNotAbove0
                .explain(&CFG, &e)
                .contains("is below 0")
        );
    }

    #[test]
    fn a_sure_gain_under_the_minimum_holds() {
        let e = evidence(8_412, 0.05, 0.01, 0.09);
        assert_eq!(
            decide_promotion(&CFG, &e),
            Promotion::Hold(Hold::GainBelowMinimum)
        );
    }

    #[test]
    fn no_interval_holds() {
        let e = Evidence {
            decisions: 8_412,
            gain_ms: Some(1.0),
            gain_ci_ms: None,
        };
        assert_eq!(
            decide_promotion(&CFG, &e),
            Promotion::Hold(Hold::NoEstimate)
        );
        let e = Evidence { gain_ms: None, ..e };
        assert_eq!(
            decide_promotion(&CFG, &e),
            Promotion::Hold(Hold::NoEstimate)
        );
    }

    #[test]
    fn the_promoted_model_is_rolled_back_when_the_comparison_turns() {
        // Right after the promotion the previous model is no better.
        let before = evidence(5_000, -0.20, -0.35, -0.05);
        assert_eq!(
            decide_rollback(&CFG, &before),
            Rollback::Keep(Hold::IntervalNotAbove0)
        );
        let unclear = evidence(5_000, 0.02, -0.03, 0.07);
        assert_eq!(
            decide_rollback(&CFG, &unclear),
            Rollback::Keep(Hold::IntervalNotAbove0)
        );
        // The promoted model's worker behaviour changed: the previous one
        // is now faster, with its whole interval on that side.
        let turned = evidence(5_000, 0.25, 0.10, 0.40);
        assert_eq!(decide_rollback(&CFG, &turned), Rollback::RollBack);
        // No minimum gain for a rollback, but the minimum of decisions.
        let small = evidence(5_000, 0.01, 0.001, 0.02);
        assert_eq!(decide_rollback(&CFG, &small), Rollback::RollBack);
        let few = evidence(10, 0.25, 0.10, 0.40);
        assert_eq!(
            decide_rollback(&CFG, &few),
            Rollback::Keep(Hold::TooFewDecisions)
        );
    }

    #[test]
    fn counts_are_grouped_by_thousands() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(8_412), "8 412");
        assert_eq!(grouped(1_234_567), "1 234 567");
    }
}
