//! Which logged decisions the trainer admits: those the service could have
//! logged. A damaged or hand-edited file can hold rows no service run
//! writes — a NaN or ±∞ feature (the service imputes and clamps every
//! feature, `scorer_core::features`), a rule score outside 0..=100, a
//! propensity outside 0..=1, an outcome latency outside the feedback
//! endpoint's 0..=86 400 000 ms, several picks in one decision, or a
//! decision id already loaded (a copy of a file under another name). Such a
//! decision is dropped whole (its other rows would be a decision the service
//! never made) and counted in [`DroppedDecisions`]; the first copy of a
//! duplicated id stays.

use std::collections::HashSet;

use serde::Serialize;

/// Decisions dropped while loading because the service could not have
/// logged them (a damaged or hand-edited file): kept out of training,
/// validation and comparison, and counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DroppedDecisions {
    /// A row with a NaN or ±∞ feature (the service imputes and clamps every
    /// feature), a rule score outside 0..=100, a propensity outside 0..=1,
    /// or an outcome latency outside 0..=86 400 000 ms (the feedback
    /// endpoint's range).
    pub impossible_values: usize,
    /// More than one candidate marked picked.
    pub several_picks: usize,
    /// A decision id already loaded (a copy of a log file under another
    /// name); the first one loaded is kept.
    pub duplicate_ids: usize,
}

impl DroppedDecisions {
    /// All dropped decisions.
    pub fn total(&self) -> usize {
        self.impossible_values + self.several_picks + self.duplicate_ids
    }
}

impl std::fmt::Display for DroppedDecisions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} decisions dropped: {} with impossible values (non-finite feature, rule score outside 0..=100, propensity outside 0..=1, latency outside 0..=86400000 ms), {} with several picks, {} with a duplicate decision_id",
            self.total(),
            self.impossible_values,
            self.several_picks,
            self.duplicate_ids
        )
    }
}

/// Judges the `n` rows of a joined log, where a decision's rows are
/// consecutive (the service writes them together) and `shadow(i)` rows (a
/// shadow model's copies, dropped elsewhere) may sit among them. Returns,
/// per row, whether it belongs to an admitted decision, and the drop counts.
///
/// `id(i)`: the row's decision id; `row_ok(i)`: the row's values are
/// possible; `picked(i)`: the row was the pick.
pub(crate) fn admissible_rows<'a>(
    n: usize,
    shadow: impl Fn(usize) -> bool,
    id: impl Fn(usize) -> &'a str,
    row_ok: impl Fn(usize) -> bool,
    picked: impl Fn(usize) -> bool,
) -> (Vec<bool>, DroppedDecisions) {
    let mut keep = vec![false; n];
    let mut dropped = DroppedDecisions::default();
    let mut seen = HashSet::new();
    let mut i = 0;
    while i < n {
        if shadow(i) {
            i += 1;
            continue;
        }
        let this = id(i);
        let mut end = i;
        let (mut all_ok, mut picks) = (true, 0);
        while end < n && (shadow(end) || id(end) == this) {
            if !shadow(end) {
                all_ok &= row_ok(end);
                picks += usize::from(picked(end));
            }
            end += 1;
        }
        let count = if !seen.insert(this) {
            &mut dropped.duplicate_ids
        } else if !all_ok {
            &mut dropped.impossible_values
        } else if picks > 1 {
            &mut dropped.several_picks
        } else {
            keep[i..end].fill(true);
            i = end;
            continue;
        };
        *count += 1;
        i = end;
    }
    (keep, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::{TargetRule, load_logs};
    use scorer_log::LogKind;

    #[test]
    fn decisions_the_service_could_not_log_are_dropped_and_counted() {
        // Found by a fresh-eyes run: NaN/negative latencies, ±∞ features,
        // NaN rule scores, several picks and copied files all trained.
        use crate::synth::{Synth, SynthConfig, write_file};
        use scorer_log::batch::{decisions_batch, outcomes_batch};
        use scorer_log::naming::final_path;
        let mut synth = Synth::new(SynthConfig::default()).unwrap();
        let (mut ds, mut os) = (Vec::new(), Vec::new());
        while ds.len() < 40 {
            let (d, o) = synth.next_decision().unwrap();
            // Keep decisions with an outcome, so each one is labelled.
            if let Some(o) = o {
                ds.push(d);
                os.push(o);
            }
        }
        ds[1].candidates[0].features[3] = f32::INFINITY;
        ds[2].candidates[1].rule_score = f64::NAN;
        ds[3].candidates[0].probability = Some(1.5);
        os[4].latency_ms = -5.0;
        os[5].latency_ms = f64::NAN;
        for c in &mut ds[6].candidates {
            c.picked = true;
        }
        let mut copy = ds[7].clone();
        copy.ts_ms += 1;
        ds.push(copy);

        let dir = tempfile::tempdir().unwrap();
        let opened = u64::try_from(ds[0].ts_ms).unwrap();
        write_file(
            &final_path(dir.path(), LogKind::Decisions, opened, 1),
            vec![decisions_batch(&ds).unwrap()],
        )
        .unwrap();
        write_file(
            &final_path(dir.path(), LogKind::Outcomes, opened, 1),
            vec![outcomes_batch(&os).unwrap()],
        )
        .unwrap();
        let t = load_logs(&[dir.path().to_path_buf()], |_, _, _| {}).unwrap();
        assert_eq!(
            t.dropped,
            DroppedDecisions {
                impossible_values: 5,
                several_picks: 1,
                duplicate_ids: 1,
            }
        );
        assert_eq!(t.decisions.len(), 41 - 7);
        let kept: Vec<&str> = t.decisions.iter().map(|d| d.id.as_str()).collect();
        for bad in &ds[1..=6] {
            assert!(
                !kept.contains(&bad.decision_id.as_str()),
                "{}",
                bad.decision_id
            );
        }
        assert!(
            kept.contains(&ds[7].decision_id.as_str()),
            "the first copy stays"
        );
        let labelled = t.labelled(&TargetRule::default());
        assert_eq!(labelled.counts.picked_rows, 40 - 6);
        assert!(labelled.features.iter().all(|x| x.is_finite()));
    }
}
