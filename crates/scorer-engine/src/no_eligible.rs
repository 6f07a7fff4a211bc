//! [`NoEligible`]: why a score call found no candidate to pick, as the 503
//! `no_eligible_workers` says it — naming the candidates an operator took
//! out, so a disable or drain is not mistaken for dead workers.

use std::fmt;

use crate::overrides::OverrideKind;

/// Most candidates an answer names.
pub const MAX_NAMED: usize = 4;

/// A candidate an operator override took out of a decision that found none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overridden {
    /// The worker id.
    pub worker_id: String,
    /// `Drain` or `Disable`.
    pub kind: OverrideKind,
    /// Whether the worker had a live report (a drained one without one
    /// would have been refused anyway).
    pub live: bool,
}

/// Why no candidate was selectable.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NoEligible {
    /// The candidates drained or disabled by an operator, in request order,
    /// at most [`MAX_NAMED`].
    pub overridden: Vec<Overridden>,
    /// Candidates drained or disabled beyond those named.
    pub more_overridden: usize,
    /// The other candidates: dead, never reported, or unhealthy.
    pub others: usize,
}

impl NoEligible {
    /// Counts one candidate an operator took out.
    pub fn push_overridden(&mut self, worker_id: &str, kind: OverrideKind, live: bool) {
        if self.overridden.len() < MAX_NAMED {
            self.overridden.push(Overridden {
                worker_id: worker_id.to_owned(),
                kind,
                live,
            });
        } else {
            self.more_overridden += 1;
        }
    }
}

impl fmt::Display for NoEligible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.overridden.is_empty() {
            return f.write_str("every candidate is dead or has never reported");
        }
        for (i, o) in self.overridden.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            let done = match o.kind {
                OverrideKind::Drain => "drained",
                OverrideKind::Disable => "disabled",
                OverrideKind::Weight => "weighted",
            };
            write!(
                f,
                "worker `{}` is {done} by an operator override",
                o.worker_id
            )?;
            if !o.live {
                f.write_str(" and has no live report")?;
            }
        }
        if self.more_overridden > 0 {
            write!(
                f,
                "; {} more drained or disabled by operator overrides",
                self.more_overridden
            )?;
        }
        match self.others {
            0 => Ok(()),
            1 => f.write_str("; the other candidate is dead, unhealthy or has never reported"),
            n => write!(
                f,
                "; the other {n} candidates are dead, unhealthy or have never reported"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_operators_overrides_and_counts_the_rest() {
        assert_eq!(
            NoEligible::default().to_string(),
            "every candidate is dead or has never reported"
        );
        let mut n = NoEligible::default();
        n.push_overridden("w1", OverrideKind::Disable, true);
        assert_eq!(
            n.to_string(),
            "worker `w1` is disabled by an operator override"
        );
        n.push_overridden("w2", OverrideKind::Drain, false);
        n.others = 2;
        assert_eq!(
            n.to_string(),
            "worker `w1` is disabled by an operator override; worker `w2` is drained by an \
             operator override and has no live report; the other 2 candidates are dead, \
             unhealthy or have never reported"
        );
        for i in 0..5 {
            n.push_overridden(&format!("x{i}"), OverrideKind::Disable, true);
        }
        assert_eq!((n.overridden.len(), n.more_overridden), (MAX_NAMED, 3));
        assert!(n.to_string().contains("; 3 more drained or disabled"));
    }
}
