//! [`PenaltyReason`]: why a worker is in its penalty state, kept as numbers
//! and turned into a sentence only when displayed.
//!
//! [`PenaltyTracker::state_at`](super::PenaltyTracker::state_at) runs for
//! every candidate of every decision; formatting its explanation there cost
//! an allocation and several float formats per candidate that most callers
//! never read (the same choice as [`crate::scoring::Reason`]).

use std::fmt;

use serde::{Serialize, Serializer};

/// The numbers behind a penalty state's explanation. `Display` gives the
/// sentence; `Serialize` writes that sentence as a JSON string.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PenaltyReason {
    /// No recent low rule scores.
    Healthy {
        /// Cooldowns entered since the last backoff reset.
        backoff_level: u32,
        /// `backoff_reset_after_ms` of the config, ms.
        reset_after_ms: u64,
        /// Time continuously healthy so far, ms.
        healthy_ms: u64,
    },
    /// Counting low scores toward an ejection.
    Observation {
        /// Consecutive low rule scores so far.
        low_streak: u32,
        /// `cooldown_after_consecutive_low` of the config.
        needed_low: u32,
        /// `low_score_threshold` of the config (rule score, 0..=100).
        low_threshold: f64,
        /// Consecutive good rule scores so far.
        good_streak: u32,
        /// `recover_consecutive` of the config.
        needed_good: u32,
        /// `recover_score_threshold` of the config (rule score, 0..=100).
        good_threshold: f64,
    },
    /// Ejected until `until_ms`.
    Cooldown {
        /// Length of the current cooldown, ms.
        cooldown_ms: u64,
        /// `cooldown_after_consecutive_low` of the config.
        needed_low: u32,
        /// `low_score_threshold` of the config (rule score, 0..=100).
        low_threshold: f64,
        /// End of the cooldown, monotonic ms.
        until_ms: u64,
        /// Backoff level after this ejection.
        backoff_level: u32,
    },
    /// Back from a cooldown, ramping up its weight (slow start).
    Recovering {
        /// Time since the cooldown ended, ms.
        elapsed_ms: u64,
        /// `slow_start_ms` of the config.
        slow_start_ms: u64,
        /// Current weight fraction of the ramp, 0..=1.
        fraction: f64,
        /// Consecutive good rule scores so far.
        good_streak: u32,
        /// `recover_consecutive` of the config.
        needed_good: u32,
        /// `recover_score_threshold` of the config (rule score, 0..=100).
        good_threshold: f64,
    },
}

impl fmt::Display for PenaltyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Healthy {
                backoff_level,
                reset_after_ms,
                healthy_ms,
            } => {
                f.write_str("Healthy: no recent low rule scores.")?;
                if backoff_level > 0 {
                    write!(
                        f,
                        " Backoff level {backoff_level} resets after {reset_after_ms} ms \
                         continuously healthy ({healthy_ms} ms so far)."
                    )?;
                }
                Ok(())
            }
            Self::Observation {
                low_streak,
                needed_low,
                low_threshold,
                good_streak,
                needed_good,
                good_threshold,
            } => write!(
                f,
                "Under observation: {low_streak} of {needed_low} consecutive rule scores below \
                 {low_threshold} needed for ejection; {good_streak} of {needed_good} consecutive \
                 scores above {good_threshold} needed to clear."
            ),
            Self::Cooldown {
                cooldown_ms,
                needed_low,
                low_threshold,
                until_ms,
                backoff_level,
            } => write!(
                f,
                "Ejected for {cooldown_ms} ms after {needed_low} consecutive rule scores below \
                 {low_threshold}; cooldown ends at {until_ms} ms (backoff level now \
                 {backoff_level})."
            ),
            Self::Recovering {
                elapsed_ms,
                slow_start_ms,
                fraction,
                good_streak,
                needed_good,
                good_threshold,
            } => {
                f.write_str("Recovering after cooldown: ")?;
                if elapsed_ms >= slow_start_ms {
                    f.write_str("slow start finished")?;
                } else {
                    write!(
                        f,
                        "slow start at {:.0}% of weight ({elapsed_ms} of {slow_start_ms} ms)",
                        fraction * 100.0
                    )?;
                }
                write!(
                    f,
                    "; {good_streak} of {needed_good} consecutive scores above {good_threshold} \
                     needed to become healthy."
                )
            }
        }
    }
}

impl Serialize for PenaltyReason {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dynamics::{PenaltyConfig, PenaltyTracker};

    #[test]
    fn sentences_carry_every_number() {
        let healthy = PenaltyReason::Healthy {
            backoff_level: 2,
            reset_after_ms: 60_000,
            healthy_ms: 1_500,
        };
        assert_eq!(
            healthy.to_string(),
            "Healthy: no recent low rule scores. Backoff level 2 resets after 60000 ms \
             continuously healthy (1500 ms so far)."
        );
        let fresh = PenaltyReason::Healthy {
            backoff_level: 0,
            reset_after_ms: 60_000,
            healthy_ms: 0,
        };
        assert_eq!(fresh.to_string(), "Healthy: no recent low rule scores.");
        let obs = PenaltyReason::Observation {
            low_streak: 1,
            needed_low: 3,
            low_threshold: 30.0,
            good_streak: 0,
            needed_good: 5,
            good_threshold: 60.5,
        };
        assert_eq!(
            obs.to_string(),
            "Under observation: 1 of 3 consecutive rule scores below 30 needed for ejection; \
             0 of 5 consecutive scores above 60.5 needed to clear."
        );
        let cooldown = PenaltyReason::Cooldown {
            cooldown_ms: 2_000,
            needed_low: 3,
            low_threshold: 30.0,
            until_ms: 12_000,
            backoff_level: 2,
        };
        assert_eq!(
            cooldown.to_string(),
            "Ejected for 2000 ms after 3 consecutive rule scores below 30; cooldown ends at \
             12000 ms (backoff level now 2)."
        );
        let ramp = PenaltyReason::Recovering {
            elapsed_ms: 2_500,
            slow_start_ms: 10_000,
            fraction: 0.25,
            good_streak: 1,
            needed_good: 5,
            good_threshold: 60.0,
        };
        assert_eq!(
            ramp.to_string(),
            "Recovering after cooldown: slow start at 25% of weight (2500 of 10000 ms); \
             1 of 5 consecutive scores above 60 needed to become healthy."
        );
        let done = PenaltyReason::Recovering {
            elapsed_ms: 10_000,
            slow_start_ms: 10_000,
            fraction: 1.0,
            good_streak: 1,
            needed_good: 5,
            good_threshold: 60.0,
        };
        assert!(
            done.to_string()
                .starts_with("Recovering after cooldown: slow start finished; 1 of 5"),
            "{done}"
        );
        assert_eq!(
            serde_json::to_string(&cooldown).ok(),
            Some(format!("\"{cooldown}\""))
        );
    }

    #[test]
    fn state_at_reports_the_tracker_numbers() {
        let cfg = PenaltyConfig::default();
        let t = PenaltyTracker::new();
        let v = t.state_at(5_000, &cfg);
        assert_eq!(
            v.reason,
            PenaltyReason::Healthy {
                backoff_level: 0,
                reset_after_ms: cfg.backoff_reset_after_ms,
                healthy_ms: 0,
            }
        );
    }
}
