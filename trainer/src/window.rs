//! The sliding window of `trainer loop`: which logged decisions a round
//! trains and judges on. Either the latest `N` decisions with a target, or
//! those logged since a time.
//!
//! For the latest `N`, only the newest decisions files whose footers hold
//! at least `N` decisions are read (files are in time order), and of their
//! labelled rows the latest `N` by decision time are kept (a file of the
//! older flat layout counts candidate rows in its footer, so a window over
//! such files may hold fewer than `N`); the outcomes
//! files are all read, since an outcome may be written long after its
//! decision. For a time, every decisions file is read and the rows before
//! it are dropped.

use std::path::PathBuf;

use arrow::array::{Array, AsArray, BooleanArray, RecordBatch};
use arrow::datatypes::TimestampMillisecondType;
use scorer_core::features::FEATURE_COUNT;
use scorer_log::LogKind;

use crate::dataset::{Decision, Labelled, LogTable, joined_table, read_kind, read_kind_where};
use crate::error::{Result, TrainerError};

/// The decisions of `decision_files` a round judges, joined to
/// `outcome_files`: those logged at or after `from_ts_ms`, and those the
/// model `version` scored. Rows are dropped file by file as they are read,
/// so a round holds what it judges, not its whole window.
///
/// # Errors
/// Unreadable files, or files without the `ts_ms` and `model_version`
/// columns.
pub fn load_judged(
    decision_files: &[PathBuf],
    outcome_files: &[PathBuf],
    from_ts_ms: i64,
    version: Option<&str>,
) -> Result<LogTable> {
    let keep = |b: &RecordBatch| -> Result<BooleanArray> {
        let missing =
            |c: &str| TrainerError::NoData(format!("no `{c}` column in a decisions file"));
        let ts = b
            .column_by_name("ts_ms")
            .and_then(|c| c.as_primitive_opt::<TimestampMillisecondType>())
            .ok_or_else(|| missing("ts_ms"))?;
        let mv = b
            .column_by_name("model_version")
            .and_then(|c| c.as_string_opt::<i32>())
            .ok_or_else(|| missing("model_version"))?;
        Ok((0..b.num_rows())
            .map(|i| {
                Some(
                    (ts.is_valid(i) && ts.value(i) >= from_ts_ms)
                        || version.is_some_and(|v| mv.is_valid(i) && mv.value(i) == v),
                )
            })
            .collect())
    };
    let mut none = |_: &std::path::Path, _: usize, _: usize| {};
    let decisions = read_kind_where(
        decision_files.to_vec(),
        LogKind::Decisions,
        Some(&keep),
        &mut none,
    )?;
    let outcomes = read_kind(outcome_files.to_vec(), LogKind::Outcomes, &mut none)?;
    joined_table(decisions, outcomes)
}

/// Which decisions a round uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Window {
    /// The latest this many decisions with a target (>= 1).
    Latest(usize),
    /// Decisions logged at or after this time, Unix ms.
    Since {
        /// The window's start, Unix ms.
        ts_ms: i64,
    },
}

impl Window {
    /// Of `files` (in time order) with `rows` decisions each, the newest
    /// that hold the window: for [`Window::Latest`] the shortest suffix
    /// with at least `N` rows (all when they hold fewer), else all.
    pub fn files(&self, files: Vec<PathBuf>, rows: &[usize]) -> Vec<PathBuf> {
        let Window::Latest(n) = *self else {
            return files;
        };
        let mut sum = 0usize;
        let mut first = files.len();
        while first > 0 && sum < n {
            first -= 1;
            sum += rows.get(first).copied().unwrap_or(0);
        }
        files.into_iter().skip(first).collect()
    }

    /// The first `(ts_ms, index)` in the window, of labelled rows with
    /// times `ts` (index = load order): rows at or after it, in
    /// `(ts_ms, index)` order, are in the window.
    pub(crate) fn start(&self, ts: &[i64]) -> (i64, usize) {
        match *self {
            Window::Since { ts_ms } => (ts_ms, 0),
            Window::Latest(n) if n >= ts.len() => (i64::MIN, 0),
            Window::Latest(n) => {
                let mut order: Vec<(i64, usize)> = ts
                    .iter()
                    .copied()
                    .enumerate()
                    .map(|(i, t)| (t, i))
                    .collect();
                order.sort_unstable();
                order[ts.len() - n]
            }
        }
    }
}

/// `rows` restricted to the window, in their order (a time window drops
/// the rows before it; the latest `N` keep the `N` latest by time, the
/// earliest in load order first among equal times).
pub fn keep_window(rows: Labelled, window: &Window) -> Labelled {
    let start = window.start(&rows.ts_ms);
    let keep = |i: usize| (rows.ts_ms[i], i) >= start;
    if (0..rows.len()).all(keep) {
        return rows;
    }
    if rows.ts_ms.is_sorted() {
        // The window is a suffix: split it off without a copy of the rest.
        let k = (0..rows.len()).find(|&i| keep(i)).unwrap_or(rows.len());
        let mut rows = rows;
        return Labelled {
            features: rows.features.split_off(k * FEATURE_COUNT),
            targets: rows.targets.split_off(k),
            weights: rows.weights.split_off(k),
            slow: rows.slow.split_off(k),
            latency_ms: rows.latency_ms.split_off(k),
            ts_ms: rows.ts_ms.split_off(k),
            rule_score: rows.rule_score.split_off(k),
            counts: rows.counts,
        };
    }
    rows.filter(keep)
}

/// The decisions of `table` that `keep` selects, with their candidate
/// rows, in order.
pub fn select_decisions(table: &LogTable, keep: impl Fn(&Decision) -> bool) -> LogTable {
    let mut out = LogTable {
        decision_files: table.decision_files.clone(),
        outcome_files: table.outcome_files.clone(),
        ..LogTable::default()
    };
    for d in table.decisions.iter().filter(|d| keep(d)) {
        let start = out.len();
        for i in d.rows.clone() {
            out.decision_of.push(out.decisions.len());
            out.eligible.push(table.eligible[i]);
            out.rule_score.push(table.rule_score[i]);
            out.probability.push(table.probability[i]);
            out.picked.push(table.picked[i]);
            out.latency_ms.push(table.latency_ms[i]);
            out.success.push(table.success[i]);
            out.features.extend_from_slice(table.row(i));
        }
        out.decisions.push(Decision {
            rows: start..out.len(),
            ..d.clone()
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(ts: &[i64]) -> Labelled {
        let mut l = Labelled::default();
        for (i, &t) in ts.iter().enumerate() {
            l.features.extend([i as f32; FEATURE_COUNT]);
            l.targets.push(i as f32);
            l.weights.push(1.0);
            l.slow.push(false);
            l.latency_ms.push(1.0);
            l.ts_ms.push(t);
            l.rule_score.push(50.0);
        }
        l
    }

    #[test]
    fn the_latest_n_files_cover_n_decisions() {
        let files: Vec<PathBuf> = ["a", "b", "c"].iter().map(PathBuf::from).collect();
        let rows = [100, 50, 30];
        let w = |n| Window::Latest(n).files(files.clone(), &rows);
        assert_eq!(w(30), vec![PathBuf::from("c")]);
        assert_eq!(w(31), vec![PathBuf::from("b"), PathBuf::from("c")]);
        assert_eq!(w(1_000).len(), 3);
        let since = Window::Since { ts_ms: 0 };
        assert_eq!(since.files(files.clone(), &rows).len(), 3);
    }

    #[test]
    fn the_latest_n_rows_are_kept_by_time() {
        let kept = keep_window(rows(&[10, 20, 30, 40, 50]), &Window::Latest(2));
        assert_eq!(kept.ts_ms, vec![40, 50]);
        assert_eq!(kept.targets, vec![3.0, 4.0]);
        assert_eq!(kept.features.len(), 2 * FEATURE_COUNT);
        // Out of order: the latest by time, in load order.
        let kept = keep_window(rows(&[50, 10, 40, 20, 30]), &Window::Latest(3));
        assert_eq!(kept.ts_ms, vec![50, 40, 30]);
        assert_eq!(kept.targets, vec![0.0, 2.0, 4.0]);
        let all = keep_window(rows(&[1, 2]), &Window::Latest(5));
        assert_eq!(all.len(), 2);
    }

    #[test]
    fn a_time_window_drops_the_rows_before_it() {
        let kept = keep_window(rows(&[10, 20, 30, 40]), &Window::Since { ts_ms: 25 });
        assert_eq!(kept.ts_ms, vec![30, 40]);
        assert_eq!(Window::Since { ts_ms: 25 }.start(&[]), (25, 0));
    }
}
