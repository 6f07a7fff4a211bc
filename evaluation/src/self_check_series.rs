//! The service arm's self-check over a run: the engine's rank correlation
//! of the pick's expected against observed latency
//! ([`scorer_engine::self_check`]), sampled once a simulated second
//! ([`crate::arms::service::SELF_CHECK_EVERY_MS`]), and
//! when the documented alert would have fired on it (docs/operations.md:
//! below [`ALERT_BELOW`] for [`ALERT_SAMPLES`] samples in a row).

use std::fmt::Write as _;

use serde::Serialize;

/// The alert's threshold on the rank correlation: the scores predict
/// outcomes backwards.
pub const ALERT_BELOW: f64 = 0.0;
/// Samples in a row below the threshold before the alert fires (its `for`).
pub const ALERT_SAMPLES: usize = 3;

/// The rank correlation through a run, and the alert on it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SelfCheckSeries {
    /// `(time s, rho)`, once a second while the window holds enough outcomes.
    pub samples: Vec<(f64, f64)>,
    /// Lowest rho before the fault (over the whole run without one).
    pub min_before_fault: Option<f64>,
    /// Lowest rho from the fault's start on.
    pub min_from_fault: Option<f64>,
    /// When the alert first fired, s.
    pub fired_at_s: Option<f64>,
}

impl SelfCheckSeries {
    /// The series of `samples`, with a fault starting at `fault_start_s`.
    pub fn new(samples: Vec<(f64, f64)>, fault_start_s: Option<f64>) -> Self {
        let start = fault_start_s.unwrap_or(f64::INFINITY);
        let min = |keep: &dyn Fn(f64) -> bool| {
            samples
                .iter()
                .filter(|(t, _)| keep(*t))
                .map(|s| s.1)
                .min_by(f64::total_cmp)
        };
        let mut run = 0;
        let fired_at_s = samples.iter().find_map(|&(t, rho)| {
            run = if rho < ALERT_BELOW { run + 1 } else { 0 };
            (run >= ALERT_SAMPLES).then_some(t)
        });
        Self {
            min_before_fault: min(&|t| t < start),
            min_from_fault: fault_start_s.and_then(|_| min(&|t| t >= start)),
            fired_at_s,
            samples,
        }
    }

    /// One line for the report.
    pub fn describe(&self) -> String {
        let f = |v: Option<f64>| v.map_or_else(|| "–".to_owned(), |v| format!("{v:.2}"));
        format!(
            "self-check rank correlation (expected vs observed latency, latest 1024 outcomes): lowest {} before the fault, {} from it; alert (< {ALERT_BELOW} for {ALERT_SAMPLES} s) {}",
            f(self.min_before_fault),
            f(self.min_from_fault),
            self.fired_at_s.map_or_else(
                || "never fired".to_owned(),
                |t| format!("fired at {t:.0} s")
            ),
        )
    }
}

/// One line per service arm with a self-check series, for a report.
pub fn self_check_notes(policies: &[crate::run_summary::PolicyResult]) -> String {
    let mut s = String::new();
    for p in policies {
        if let Some(c) = &p.self_check {
            let _ = writeln!(s, "- `{}`: {}", p.name, c.describe());
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_alert_fires_on_the_third_low_sample_in_a_row() {
        let s = SelfCheckSeries::new(
            vec![
                (1.0, 0.8),
                (2.0, -0.1),
                (3.0, -0.1),
                (4.0, 0.5),
                (5.0, -0.1),
                (6.0, -0.2),
                (7.0, -0.05),
            ],
            Some(4.0),
        );
        assert_eq!(s.fired_at_s, Some(7.0));
        assert_eq!(
            (s.min_before_fault, s.min_from_fault),
            (Some(-0.1), Some(-0.2))
        );
        let quiet = SelfCheckSeries::new(vec![(1.0, 0.9)], None);
        assert_eq!((quiet.fired_at_s, quiet.min_from_fault), (None, None));
    }
}
