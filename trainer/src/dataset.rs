//! Decision logs → a table of candidate rows → labelled training rows, and
//! the time-based train/validation split.
//!
//! * [`load_logs`] reads every final decisions and outcomes file under each
//!   `--logs` directory with the service's reader (recursively, in
//!   chronological file order), refuses files of another log or feature
//!   schema version, and left-joins outcomes onto decision rows with the
//!   service's [`join_outcomes`]. Shadow rows (`arm = "shadow"`, a shadow
//!   model's scores of the same candidates, issue #6) are dropped: they
//!   were not acted on and would duplicate the decision's candidates.
//!   Decisions the service could not have logged (a non-finite feature, a
//!   score, propensity or latency out of range, several picks, an id
//!   already loaded) are dropped and counted in [`DroppedDecisions`].
//! * [`LogTable::labelled`] keeps the picked candidate of each decision
//!   that has an outcome and gives it its target and weight
//!   ([`crate::target`]); nothing with an outcome is dropped.
//! * [`Labelled::split_by_time`]: rows sorted by decision time (stable);
//!   the last `valid_fraction` of them validate, so validation is always
//!   later traffic than training.

use std::ops::Range;
use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Float32Type, Float64Type, TimestampMillisecondType};
use scorer_core::features::FEATURE_COUNT;
use scorer_log::reader::list_files;
use scorer_log::{LoadedLog, LogKind, join_outcomes};

pub use crate::admissible::DroppedDecisions;
use crate::admissible::admissible_rows;
use crate::error::{Result, TrainerError};
pub(crate) use crate::read_kind::{read_kind, read_kind_where};
use crate::scan::{Row, count_row, push_row};
pub use crate::target::{Distribution, TargetCounts, TargetRule};

/// Largest outcome latency the service accepts, ms (one day).
pub use scorer_core::telemetry::validate::MAX_LATENCY_MS;

/// `arm` of the shadow rows the service logs next to a decision; the
/// trainer drops them.
pub use scorer_log::SHADOW_ARM;

/// Index of `req_put` in the feature vector.
pub const REQ_PUT_FEATURE: usize = 29;

/// One logged decision: its candidate rows are `rows` in [`LogTable`].
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Decision id.
    pub id: String,
    /// Decision time, Unix ms.
    pub ts_ms: i64,
    /// Routed key prefix.
    pub key_prefix: String,
    /// Candidate rows of this decision.
    pub rows: Range<usize>,
    /// Every candidate row carries its logged feature vector. When false
    /// (a decision outside the service's `candidate_features_rate`
    /// sample) only the picked row does, and the others hold zeros.
    pub all_features: bool,
    /// Experiment arm (`a`/`b` of a model A/B split, `stable`/`canary`
    /// of a config canary); `None` outside experiments.
    pub arm: Option<String>,
    /// Hash of the configuration that scored it.
    pub config_hash: String,
    /// Version of the model that scored it; `None` on the rules alone.
    pub model_version: Option<String>,
}

/// Every candidate row of the loaded logs, column by column, with the
/// joined outcome (present for picked candidates whose feedback arrived).
#[derive(Debug, Clone, Default)]
pub struct LogTable {
    /// Decisions in load order.
    pub decisions: Vec<Decision>,
    /// Per row: index into `decisions`.
    pub decision_of: Vec<usize>,
    /// Per row: passed eligibility filters.
    pub eligible: Vec<bool>,
    /// Per row: logged rule score, 0..=100.
    pub rule_score: Vec<f64>,
    /// Per row: logging policy's propensity for this candidate, 0..=1.
    pub probability: Vec<Option<f64>>,
    /// Per row: this candidate was picked.
    pub picked: Vec<bool>,
    /// Per row: observed latency, ms.
    pub latency_ms: Vec<Option<f64>>,
    /// Per row: request succeeded.
    pub success: Vec<Option<bool>>,
    /// Row-major features, `FEATURE_COUNT` per row; zeros on a row whose
    /// vector was not logged (see [`Decision::all_features`]).
    pub features: Vec<f32>,
    /// Decisions files loaded.
    pub decision_files: Vec<PathBuf>,
    /// Outcomes files loaded.
    pub outcome_files: Vec<PathBuf>,
    /// Rows read from the decisions files.
    pub decision_rows: usize,
    /// Rows read from the outcomes files.
    pub outcome_rows: usize,
    /// Shadow rows (`arm = "shadow"`) dropped.
    pub shadow_rows: usize,
    /// Decisions dropped because the service could not have logged them.
    pub dropped: DroppedDecisions,
}

impl LogTable {
    /// Number of candidate rows.
    pub fn len(&self) -> usize {
        self.eligible.len()
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.eligible.is_empty()
    }

    /// Features of row `i`.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.features[i * FEATURE_COUNT..(i + 1) * FEATURE_COUNT]
    }
}

/// The final files of `kind` under `dirs`, recursively, in chronological
/// order within each directory; a file reached twice (a directory given
/// twice, or nested in another) is listed once.
///
/// # Errors
/// [`TrainerError::MissingDir`] for a missing directory,
/// [`TrainerError::Read`] for one that cannot be listed.
pub fn list_log_files(dirs: &[PathBuf], kind: LogKind) -> Result<Vec<PathBuf>> {
    if dirs.is_empty() {
        return Err(TrainerError::InvalidArgument(
            "at least one --logs directory is needed".into(),
        ));
    }
    let mut files = Vec::new();
    for d in dirs {
        if !d.is_dir() {
            return Err(TrainerError::MissingDir(d.clone()));
        }
        files.extend(list_files(d, kind)?);
    }
    let mut seen = std::collections::HashSet::new();
    files.retain(|f| seen.insert(std::fs::canonicalize(f).unwrap_or_else(|_| f.clone())));
    Ok(files)
}

pub(crate) fn col<'a>(b: &'a RecordBatch, name: &str) -> Result<&'a dyn Array> {
    b.column_by_name(name)
        .map(|c| c.as_ref())
        .ok_or_else(|| TrainerError::NoData(format!("log batch has no column {name}")))
}

pub(crate) fn type_err(name: &str) -> TrainerError {
    TrainerError::NoData(format!("column {name} has an unexpected type"))
}

/// Loads and joins every decisions and outcomes file under `dirs` (see the
/// module docs). `on_file(path, i, n)` is called before file `i` of `n`
/// (decisions files first, then outcomes files).
///
/// # Errors
/// [`TrainerError::MissingDir`] for a missing directory,
/// [`TrainerError::Read`] for an unreadable file,
/// [`TrainerError::SchemaMismatch`] for a file of another schema version,
/// [`TrainerError::NoData`] when there is no decision row at all.
pub fn load_logs(
    dirs: &[PathBuf],
    mut on_file: impl FnMut(&Path, usize, usize),
) -> Result<LogTable> {
    if dirs.is_empty() {
        return Err(TrainerError::InvalidArgument(
            "at least one --logs directory is needed".into(),
        ));
    }
    let (d, o) = (LogKind::Decisions, LogKind::Outcomes);
    let decisions = read_kind(list_log_files(dirs, d)?, d, &mut on_file)?;
    let outcomes = read_kind(list_log_files(dirs, o)?, o, &mut on_file)?;
    if decisions.rows == 0 {
        let where_ = dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        return Err(TrainerError::NoData(format!(
            "no decision rows under {where_} ({} decisions files found; expected <dir>/dt=YYYY-MM-DD/decisions-*.parquet)",
            decisions.files.len()
        )));
    }
    joined_table(decisions, outcomes)
}

/// [`load_logs`] of the given files (decisions files in time order); no
/// decision row gives an empty table.
///
/// # Errors
/// As [`load_logs`], but for the lack of decisions.
pub fn load_log_files(
    decision_files: &[PathBuf],
    outcome_files: &[PathBuf],
    mut on_file: impl FnMut(&Path, usize, usize),
) -> Result<LogTable> {
    let decisions = read_kind(decision_files.to_vec(), LogKind::Decisions, &mut on_file)?;
    let outcomes = read_kind(outcome_files.to_vec(), LogKind::Outcomes, &mut on_file)?;
    joined_table(decisions, outcomes)
}

pub(crate) fn joined_table(decisions: LoadedLog, outcomes: LoadedLog) -> Result<LogTable> {
    let joined = join_outcomes(&decisions, &outcomes)?;
    let mut table = table_from_joined(&joined)?;
    table.decision_files = decisions.files;
    table.outcome_files = outcomes.files;
    table.decision_rows = decisions.rows;
    table.outcome_rows = outcomes.rows;
    Ok(table)
}

fn table_from_joined(b: &RecordBatch) -> Result<LogTable> {
    let n = b.num_rows();
    let ids = col(b, "decision_id")?
        .as_string_opt::<i32>()
        .ok_or_else(|| type_err("decision_id"))?;
    let ts = col(b, "ts_ms")?
        .as_primitive_opt::<TimestampMillisecondType>()
        .ok_or_else(|| type_err("ts_ms"))?;
    let prefix = col(b, "key_prefix")?
        .as_string_opt::<i32>()
        .ok_or_else(|| type_err("key_prefix"))?;
    let eligible = col(b, "eligible")?
        .as_boolean_opt()
        .ok_or_else(|| type_err("eligible"))?;
    let rule = col(b, "rule_score")?
        .as_primitive_opt::<Float64Type>()
        .ok_or_else(|| type_err("rule_score"))?;
    let prob = col(b, "probability")?
        .as_primitive_opt::<Float64Type>()
        .ok_or_else(|| type_err("probability"))?;
    let picked = col(b, "picked")?
        .as_boolean_opt()
        .ok_or_else(|| type_err("picked"))?;
    let lat = col(b, "latency_ms")?
        .as_primitive_opt::<Float64Type>()
        .ok_or_else(|| type_err("latency_ms"))?;
    let ok = col(b, "success")?
        .as_boolean_opt()
        .ok_or_else(|| type_err("success"))?;
    let feats = col(b, "features")?
        .as_fixed_size_list_opt()
        .ok_or_else(|| type_err("features"))?;
    if feats.value_length() as usize != FEATURE_COUNT {
        return Err(type_err("features"));
    }
    let values = feats
        .values()
        .as_primitive_opt::<Float32Type>()
        .ok_or_else(|| type_err("features"))?;
    let arm = col(b, "arm")?
        .as_string_opt::<i32>()
        .ok_or_else(|| type_err("arm"))?;
    let config_hash = col(b, "config_hash")?
        .as_string_opt::<i32>()
        .ok_or_else(|| type_err("config_hash"))?;
    let model_version = col(b, "model_version")?
        .as_string_opt::<i32>()
        .ok_or_else(|| type_err("model_version"))?;
    let all = values.values();

    let mut t = LogTable::default();
    let shadow = |i: usize| arm.is_valid(i) && arm.value(i) == SHADOW_ARM;
    let row_ok = |i: usize| {
        let start = feats.value_offset_at(i);
        (feats.is_null(i) && !picked.value(i)
            || all[start..start + FEATURE_COUNT]
                .iter()
                .all(|x| x.is_finite()))
            && (0.0..=100.0).contains(&rule.value(i))
            && (!prob.is_valid(i) || (0.0..=1.0).contains(&prob.value(i)))
            && (!lat.is_valid(i) || (0.0..=MAX_LATENCY_MS).contains(&lat.value(i)))
    };
    let keep;
    (keep, t.dropped) = admissible_rows(n, shadow, |i| ids.value(i), row_ok, |i| picked.value(i));

    t.decision_of.reserve(n);
    t.features.reserve(n * FEATURE_COUNT);
    for (i, kept) in keep.into_iter().enumerate() {
        if shadow(i) {
            t.shadow_rows += 1;
            continue;
        }
        if !kept {
            continue;
        }
        let id = ids.value(i);
        let start = feats.value_offset_at(i);
        let has_features = feats.is_valid(i);
        if has_features {
            t.features
                .extend_from_slice(&all[start..start + FEATURE_COUNT]);
        } else {
            t.features.extend_from_slice(&[0.0; FEATURE_COUNT]);
        }
        // Rows of one decision are written together, so consecutive.
        let same = t.decisions.last().is_some_and(|d| d.id == id);
        let row = t.eligible.len();
        if same {
            if let Some(d) = t.decisions.last_mut() {
                d.rows.end = row + 1;
                d.all_features &= has_features;
            }
        } else {
            t.decisions.push(Decision {
                id: id.to_string(),
                ts_ms: ts.value(i),
                key_prefix: prefix.value(i).to_string(),
                rows: row..row + 1,
                all_features: has_features,
                arm: arm.is_valid(i).then(|| arm.value(i).to_owned()),
                config_hash: config_hash.value(i).to_owned(),
                model_version: model_version
                    .is_valid(i)
                    .then(|| model_version.value(i).to_owned()),
            });
        }
        t.decision_of.push(t.decisions.len() - 1);
        t.eligible.push(eligible.value(i));
        t.rule_score.push(rule.value(i));
        t.probability.push(prob.is_valid(i).then(|| prob.value(i)));
        t.picked.push(picked.value(i));
        t.latency_ms.push(lat.is_valid(i).then(|| lat.value(i)));
        t.success.push(ok.is_valid(i).then(|| ok.value(i)));
    }
    Ok(t)
}

/// Validation rows of `n` split with `valid_fraction`: `ceil(f·n)`.
///
/// # Errors
/// [`TrainerError::NoData`] if either side would be empty.
pub(crate) fn split_sizes(n: usize, valid_fraction: f64) -> Result<usize> {
    let n_valid = ((n as f64) * valid_fraction).ceil() as usize;
    if n < 2 || n_valid == 0 || n_valid >= n {
        return Err(TrainerError::NoData(format!(
            "{n} rows with a target cannot be split into non-empty train and validation sets"
        )));
    }
    Ok(n_valid)
}

/// Rows with a target: picked candidates with an outcome.
#[derive(Debug, Clone, Default)]
pub struct Labelled {
    /// Row-major features, `FEATURE_COUNT` per row.
    pub features: Vec<f32>,
    /// Targets `ln(latency) − ln(E)` ([`TargetRule::target`]).
    pub targets: Vec<f32>,
    /// Clipped inverse-propensity weights ([`TargetRule::weight`]).
    pub weights: Vec<f32>,
    /// Slow outcomes ([`TargetRule::is_slow`]).
    pub slow: Vec<bool>,
    /// Censored outcome latency, ms.
    pub latency_ms: Vec<f64>,
    /// Decision time, Unix ms.
    pub ts_ms: Vec<i64>,
    /// Logged rule score, 0..=100.
    pub rule_score: Vec<f64>,
    /// Counts of the steps.
    pub counts: TargetCounts,
}

impl Labelled {
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.targets.len()
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }

    /// Features of row `i`.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.features[i * FEATURE_COUNT..(i + 1) * FEATURE_COUNT]
    }

    /// True when row `i` is a PUT request.
    pub fn is_put(&self, i: usize) -> bool {
        self.row(i)[REQ_PUT_FEATURE] == 1.0
    }

    fn push_from(&mut self, other: &Labelled, i: usize) {
        self.features.extend_from_slice(other.row(i));
        self.targets.push(other.targets[i]);
        self.weights.push(other.weights[i]);
        self.slow.push(other.slow[i]);
        self.latency_ms.push(other.latency_ms[i]);
        self.ts_ms.push(other.ts_ms[i]);
        self.rule_score.push(other.rule_score[i]);
    }

    /// Rows selected by `keep`, in order (counts are copied unchanged).
    pub fn filter(&self, keep: impl Fn(usize) -> bool) -> Labelled {
        let mut out = Labelled {
            counts: self.counts,
            ..Labelled::default()
        };
        for i in (0..self.len()).filter(|&i| keep(i)) {
            out.push_from(self, i);
        }
        out
    }

    /// Refuses data that cannot train: fewer than `min_rows` rows, or
    /// targets that do not vary (every outcome exactly as the rules
    /// expected: nothing to learn).
    ///
    /// # Errors
    /// [`TrainerError::NoData`] with the counts.
    pub fn check_trainable(&self, min_rows: usize) -> Result<()> {
        if self.len() < min_rows {
            return Err(TrainerError::NoData(format!(
                "{} row(s) with a target, at least {min_rows} are needed ({})",
                self.len(),
                self.counts
            )));
        }
        let d = Distribution::of(&self.targets);
        if d.std < 1e-6 {
            return Err(TrainerError::NoData(format!(
                "every target is {:.6} (std {:.2e}): the outcomes never differ from the rules' expectation, so there is nothing to learn ({})",
                d.mean, d.std, self.counts
            )));
        }
        Ok(())
    }

    /// Splits by time: rows sorted by `ts_ms` (stable), the last
    /// `ceil(valid_fraction · n)` rows validate. Returns `(train, valid)`.
    ///
    /// # Errors
    /// [`TrainerError::InvalidArgument`] unless `0 < valid_fraction < 1`;
    /// [`TrainerError::NoData`] if either side would be empty.
    pub fn split_by_time(&self, valid_fraction: f64) -> Result<(Labelled, Labelled)> {
        if !(valid_fraction > 0.0 && valid_fraction < 1.0) {
            return Err(TrainerError::InvalidArgument(format!(
                "--valid-fraction must be in (0, 1), got {valid_fraction}"
            )));
        }
        let n = self.len();
        let n_valid = split_sizes(n, valid_fraction)?;
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| self.ts_ms[i]);
        let mut train = Labelled {
            counts: self.counts,
            ..Labelled::default()
        };
        let mut valid = train.clone();
        for (k, &i) in order.iter().enumerate() {
            if k < n - n_valid {
                train.push_from(self, i);
            } else {
                valid.push_from(self, i);
            }
        }
        Ok((train, valid))
    }
}

impl LogTable {
    /// The picked rows with outcomes, with their targets and weights (see
    /// [`crate::target`]).
    pub fn labelled(&self, rule: &TargetRule) -> Labelled {
        let mut out = Labelled::default();
        let mut c = TargetCounts {
            decisions: self.decisions.len(),
            candidate_rows: self.len(),
            ..TargetCounts::default()
        };
        for i in 0..self.len() {
            if !self.picked[i] {
                continue;
            }
            c.picked_rows += 1;
            let (Some(lat), Some(ok)) = (self.latency_ms[i], self.success[i]) else {
                c.missing_outcome += 1;
                continue;
            };
            let r = Row {
                features: self.row(i),
                latency_ms: lat,
                success: ok,
                probability: self.probability[i],
                rule_score: self.rule_score[i],
                ts_ms: self.decisions[self.decision_of[i]].ts_ms,
            };
            count_row(&mut c, rule, &r);
            push_row(&mut out, rule, &r);
        }
        out.counts = c;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_counts_read_as_a_sentence_with_a_hint_for_missing_outcomes() {
        let c = TargetCounts {
            decisions: 5000,
            candidate_rows: 20000,
            picked_rows: 5000,
            missing_outcome: 5000,
            ..TargetCounts::default()
        };
        assert_eq!(
            c.to_string(),
            "5000 decisions, 5000 picked, 5000 without an outcome, 0 with a target (0 failures, 0 slow); no picked row has an outcome: give the outcomes directory too (--logs <dir>/outcomes)"
        );
        let some = TargetCounts {
            missing_outcome: 10,
            ..c
        };
        assert!(!some.to_string().contains("give the"), "{some}");
    }

    fn labelled(ts: &[i64], targets: &[f32]) -> Labelled {
        let mut l = Labelled::default();
        for (i, (t, y)) in ts.iter().zip(targets).enumerate() {
            l.features
                .extend(std::iter::repeat_n(i as f32, FEATURE_COUNT));
            l.targets.push(*y);
            l.weights.push(1.0);
            l.slow.push(false);
            l.latency_ms.push(1.0);
            l.ts_ms.push(*t);
            l.rule_score.push(0.0);
        }
        l
    }

    #[test]
    fn split_is_by_time() {
        let l = labelled(&[5, 1, 4, 2, 3], &[0.0, 1.0, 0.0, 1.0, 0.0]);
        let (train, valid) = l.split_by_time(0.4).unwrap();
        assert_eq!(train.ts_ms, [1, 2, 3]);
        assert_eq!(valid.ts_ms, [4, 5]);
        assert_eq!(valid.row(1)[0], 0.0, "row with ts 5 is row 0");
        assert!(l.split_by_time(1.0).is_err());
        assert!(l.split_by_time(0.0).is_err());
    }

    #[test]
    fn degenerate_data_is_refused() {
        let flat = labelled(&[1, 2, 3, 4], &[0.5; 4]);
        let e = flat.check_trainable(2).unwrap_err().to_string();
        assert!(e.contains("nothing to learn"), "{e}");
        let few = labelled(&[1, 2], &[0.0, 1.0]);
        let e = few.check_trainable(10).unwrap_err().to_string();
        assert!(e.contains("2 row(s) with a target"), "{e}");
        assert!(
            labelled(&[1, 2, 3], &[0.0, 1.0, 0.5])
                .check_trainable(3)
                .is_ok()
        );
    }
}
