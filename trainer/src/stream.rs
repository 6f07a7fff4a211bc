//! The streaming reader: decision and outcome logs → labelled training and
//! validation rows, a row group at a time, within `--memory-budget`
//! ([`crate::budget`]).
//!
//! 1. **Outcomes.** Every outcomes file is read, a row group at a time, into
//!    a map from a 128-bit hash of `(decision_id, worker_id)` to the latency
//!    and success; a later row overwrites an earlier one, as in
//!    [`scorer_log::join_outcomes`] (the latest observation wins). An
//!    outcome in a later file than its decision therefore still joins.
//! 2. **Time cut** (only with `--sample`). A pass over the decisions finds
//!    the labelled rows' times, hence the cut between training and
//!    validation, so that only training rows are sampled.
//! 3. **Decisions.** Every decisions file is read a row group at a time.
//!    A decision's rows are judged as [`crate::admissible`] does (shadow
//!    rows dropped, impossible values, several picks and repeated ids
//!    dropped and counted); its picked row, joined to its outcome, becomes
//!    a labelled row ([`crate::target`]), exactly as
//!    [`crate::dataset::LogTable::labelled`] makes it from the whole table.
//!
//! Only the picked row of each decision is kept, so the memory is the map,
//! the ids and the labelled rows, not the candidate table. The rows and
//! the time split are the in-memory path's, row for row.

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Float32Type, Float64Type, TimestampMillisecondType};
use scorer_core::features::{FEATURE_COUNT, FEATURE_SCHEMA_VERSION};
use scorer_log::LogKind;
use scorer_log::stream::{FileStream, Opened};
use serde::Serialize;

use crate::budget::{Bytes, Held, window_bytes};
use crate::dataset::{DroppedDecisions, Labelled, MAX_LATENCY_MS, SHADOW_ARM, list_log_files};
use crate::error::{Result, TrainerError};
use crate::progress::Progress;
use crate::sample::{SAMPLE_METHOD, SampleReport, SampleSpec, Systematic};
use crate::target::{TargetCounts, TargetRule};

/// How to stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StreamOptions {
    /// `--memory-budget`, bytes.
    pub memory_budget_bytes: u64,
    /// Share of the labelled rows, the latest, that validate; in (0, 1).
    pub valid_fraction: f64,
    /// `--sample`, if given.
    pub sample: Option<SampleSpec>,
}

/// What the reader read, joined, sampled and used (recorded in the card).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StreamReport {
    /// Decisions files read.
    pub decision_files: Vec<PathBuf>,
    /// Outcomes files read.
    pub outcome_files: Vec<PathBuf>,
    /// Candidate rows read from the decisions files (every pass reads them
    /// all; counted once).
    pub decision_rows: usize,
    /// Outcome rows read.
    pub outcome_rows: usize,
    /// Distinct (decision, worker) keys in the outcome map.
    pub outcome_keys: usize,
    /// Shadow rows dropped.
    pub shadow_rows_dropped: usize,
    /// Decisions dropped (see [`DroppedDecisions`]).
    pub decisions_dropped: DroppedDecisions,
    /// Passes over the decisions files (2 with `--sample`, else 1).
    pub decision_passes: usize,
    /// Largest row group read, uncompressed bytes.
    pub largest_row_group_bytes: u64,
    /// Peak of what the reader counted against the budget, bytes.
    pub peak_counted_bytes: u64,
    /// The budget, bytes.
    pub memory_budget_bytes: u64,
    /// The sample, if any.
    pub sample: Option<SampleReport>,
}

/// Labelled rows split by time, and the report.
#[derive(Debug, Clone)]
pub struct Streamed {
    /// Training rows (sampled with `--sample`).
    pub train: Labelled,
    /// Validation rows: the latest `valid_fraction` of the labelled rows.
    pub valid: Labelled,
    /// What was read.
    pub report: StreamReport,
}

fn key_hash(parts: &[&str]) -> u128 {
    let half = |salt: u8| {
        let mut h = DefaultHasher::new();
        salt.hash(&mut h);
        for p in parts {
            p.hash(&mut h);
        }
        h.finish()
    };
    (u128::from(half(0)) << 64) | u128::from(half(1))
}

fn col<'a>(b: &'a RecordBatch, name: &str) -> Result<&'a dyn Array> {
    b.column_by_name(name)
        .map(|c| c.as_ref())
        .ok_or_else(|| TrainerError::NoData(format!("log batch has no column {name}")))
}

fn type_err(name: &str) -> TrainerError {
    TrainerError::NoData(format!("column {name} has an unexpected type"))
}

macro_rules! typed {
    ($b:expr, $name:literal, $as:ident $(::<$t:ty>)?) => {
        col($b, $name)?.$as$(::<$t>)?().ok_or_else(|| type_err($name))?
    };
}

struct Budget {
    limit: u64,
    peak: u64,
}

impl Budget {
    fn check(&mut self, held: &Held, window: u64, what: &str) -> Result<()> {
        let counted = held.bytes() + window;
        self.peak = self.peak.max(counted);
        if counted > self.limit {
            return Err(TrainerError::MemoryBudget(format!(
                "{what} would hold {} (outcome map {} keys, {} decision ids, {} labelled rows, plus a {} row-group window), more than --memory-budget {}: train on a time-stratified sample (--sample 0.5, or --sample ROWS), raise --memory-budget, or split the log files across machines (--machines)",
                Bytes(counted),
                held.outcome_keys,
                held.seen_ids,
                held.labelled_rows,
                Bytes(window),
                Bytes(self.limit)
            )));
        }
        Ok(())
    }
}

/// Opens every file of `kind`, refusing a row group the budget cannot
/// window; returns the streams and their total rows.
fn open_all(
    files: &[PathBuf],
    kind: LogKind,
    budget: u64,
    largest: &mut u64,
) -> Result<(Vec<FileStream>, usize)> {
    let mut out = Vec::with_capacity(files.len());
    let mut rows = 0;
    for f in files {
        let s = match FileStream::open(f, kind)? {
            Opened::Stream(s) => s,
            Opened::Mismatch(reason) => {
                return Err(TrainerError::SchemaMismatch {
                    path: f.clone(),
                    reason,
                    expected: FEATURE_SCHEMA_VERSION,
                });
            }
        };
        for (i, g) in s.row_groups().iter().enumerate() {
            *largest = (*largest).max(g.uncompressed_bytes);
            if window_bytes(g.uncompressed_bytes) > budget {
                return Err(TrainerError::MemoryBudget(format!(
                    "--memory-budget {} is too small to read even one row group: row group {i} of {} is {} uncompressed ({} rows), which takes {} while it is decoded",
                    Bytes(budget),
                    f.display(),
                    Bytes(g.uncompressed_bytes),
                    g.rows,
                    Bytes(window_bytes(g.uncompressed_bytes))
                )));
            }
        }
        rows += s.rows();
        out.push(s);
    }
    Ok((out, rows))
}

/// Latency (ms) and success of an outcome; either may be null.
type Outcome = (Option<f64>, Option<bool>);

fn read_outcomes(
    streams: Vec<FileStream>,
    total: usize,
    budget: &mut Budget,
    held: &mut Held,
    progress: Progress,
) -> Result<(HashMap<u128, Outcome>, usize)> {
    let pb = progress.bar(total as u64, "outcomes", "rows");
    let mut map: HashMap<u128, Outcome> = HashMap::new();
    let mut rows = 0;
    for s in streams {
        let largest = s.row_groups().iter().map(|g| g.uncompressed_bytes).max();
        let window = window_bytes(largest.unwrap_or(0));
        for batch in s {
            let b = batch?;
            let dec = typed!(&b, "decision_id", as_string_opt::<i32>);
            let wrk = typed!(&b, "worker_id", as_string_opt::<i32>);
            let lat = typed!(&b, "latency_ms", as_primitive_opt::<Float64Type>);
            let ok = typed!(&b, "success", as_boolean_opt);
            for i in 0..b.num_rows() {
                map.insert(
                    key_hash(&[dec.value(i), wrk.value(i)]),
                    (
                        lat.is_valid(i).then(|| lat.value(i)),
                        ok.is_valid(i).then(|| ok.value(i)),
                    ),
                );
            }
            rows += b.num_rows();
            held.outcome_keys = map.len() as u64;
            budget.check(held, window, "the outcome map")?;
            pb.set_position(rows as u64);
        }
    }
    pb.finish_and_clear();
    Ok((map, rows))
}

/// The decision being read: its rows are consecutive.
#[derive(Default)]
struct Current {
    id: String,
    ts_ms: i64,
    rows: usize,
    all_ok: bool,
    picks: usize,
    picked: Option<Picked>,
}

struct Picked {
    features: [f32; FEATURE_COUNT],
    rule_score: f64,
    probability: Option<f64>,
    outcome: Option<Outcome>,
}

/// A labelled row as the scan hands it over.
struct Row<'a> {
    features: &'a [f32],
    latency_ms: f64,
    success: bool,
    probability: Option<f64>,
    rule_score: f64,
    ts_ms: i64,
}

/// What a decision scan counted.
#[derive(Debug, Clone, Copy, Default)]
struct ScanCounts {
    dropped: DroppedDecisions,
    shadow_rows: usize,
    rows_read: usize,
    /// Every count but the row-level ones, which the caller keeps.
    targets: TargetCounts,
}

/// The decision scan shared by both passes: `on_row` gets each labelled
/// row in load order.
struct Scan<'m> {
    outcomes: &'m HashMap<u128, Outcome>,
    seen: HashSet<u128>,
    cur: Option<Current>,
    counts: ScanCounts,
}

impl Scan<'_> {
    fn finish(&mut self, on_row: &mut dyn FnMut(Row<'_>) -> Result<()>) -> Result<()> {
        let Some(c) = self.cur.take() else {
            return Ok(());
        };
        let counts = &mut self.counts;
        let dropped = if !self.seen.insert(key_hash(&[&c.id])) {
            &mut counts.dropped.duplicate_ids
        } else if !c.all_ok {
            &mut counts.dropped.impossible_values
        } else if c.picks > 1 {
            &mut counts.dropped.several_picks
        } else {
            let t = &mut counts.targets;
            t.decisions += 1;
            t.candidate_rows += c.rows;
            if let Some(p) = c.picked {
                t.picked_rows += 1;
                match p.outcome {
                    Some((Some(latency_ms), Some(success))) => on_row(Row {
                        features: &p.features,
                        latency_ms,
                        success,
                        probability: p.probability,
                        rule_score: p.rule_score,
                        ts_ms: c.ts_ms,
                    })?,
                    _ => t.missing_outcome += 1,
                }
            }
            return Ok(());
        };
        *dropped += 1;
        Ok(())
    }

    fn batch(
        &mut self,
        b: &RecordBatch,
        on_row: &mut dyn FnMut(Row<'_>) -> Result<()>,
    ) -> Result<()> {
        let ids = typed!(b, "decision_id", as_string_opt::<i32>);
        let workers = typed!(b, "worker_id", as_string_opt::<i32>);
        let ts = typed!(b, "ts_ms", as_primitive_opt::<TimestampMillisecondType>);
        let rule = typed!(b, "rule_score", as_primitive_opt::<Float64Type>);
        let prob = typed!(b, "probability", as_primitive_opt::<Float64Type>);
        let picked = typed!(b, "picked", as_boolean_opt);
        let arm = typed!(b, "arm", as_string_opt::<i32>);
        let feats = typed!(b, "features", as_fixed_size_list_opt);
        if feats.value_length() as usize != FEATURE_COUNT {
            return Err(type_err("features"));
        }
        let values = feats
            .values()
            .as_primitive_opt::<Float32Type>()
            .ok_or_else(|| type_err("features"))?
            .values();
        self.counts.rows_read += b.num_rows();
        for i in 0..b.num_rows() {
            if arm.is_valid(i) && arm.value(i) == SHADOW_ARM {
                self.counts.shadow_rows += 1;
                continue;
            }
            let id = ids.value(i);
            if self.cur.as_ref().is_none_or(|c| c.id != id) {
                self.finish(on_row)?;
                self.cur = Some(Current {
                    id: id.to_owned(),
                    ts_ms: ts.value(i),
                    all_ok: true,
                    ..Current::default()
                });
            }
            let outcome = self
                .outcomes
                .get(&key_hash(&[id, workers.value(i)]))
                .copied();
            let start = feats.value_offset_at(i);
            let row = &values[start..start + FEATURE_COUNT];
            let is_picked = picked.value(i);
            let lat = outcome.and_then(|o| o.0);
            let row_ok = (feats.is_null(i) && !is_picked || row.iter().all(|x| x.is_finite()))
                && (0.0..=100.0).contains(&rule.value(i))
                && (!prob.is_valid(i) || (0.0..=1.0).contains(&prob.value(i)))
                && lat.is_none_or(|l| (0.0..=MAX_LATENCY_MS).contains(&l));
            let Some(c) = self.cur.as_mut() else {
                unreachable!("a decision was just started")
            };
            c.rows += 1;
            c.all_ok &= row_ok;
            if is_picked {
                c.picks += 1;
                let mut features = [0.0; FEATURE_COUNT];
                if feats.is_valid(i) {
                    features.copy_from_slice(row);
                }
                c.picked = Some(Picked {
                    features,
                    rule_score: rule.value(i),
                    probability: prob.is_valid(i).then(|| prob.value(i)),
                    outcome,
                });
            }
        }
        Ok(())
    }
}

/// Counts row `r` in `c` (rows, failures, slow, clipped weights).
fn count_row(c: &mut TargetCounts, rule: &TargetRule, r: &Row<'_>) {
    c.rows += 1;
    c.failures += usize::from(!r.success);
    c.slow += usize::from(rule.is_slow(r.features, r.latency_ms, r.success));
    let w = rule.weight(r.probability);
    c.clipped_weights += usize::from(f64::from(w) >= rule.max_weight && rule.max_weight > 1.0);
}

/// Appends row `r` with its target and weight.
fn push_row(out: &mut Labelled, rule: &TargetRule, r: &Row<'_>) {
    out.features.extend_from_slice(r.features);
    out.targets
        .push(rule.target(r.features, r.latency_ms, r.success));
    out.weights.push(rule.weight(r.probability));
    out.slow
        .push(rule.is_slow(r.features, r.latency_ms, r.success));
    out.latency_ms
        .push(rule.censored_latency_ms(r.features, r.latency_ms, r.success));
    out.ts_ms.push(r.ts_ms);
    out.rule_score.push(r.rule_score);
}

/// Reads the decisions once; `on_row` gets each labelled row with its
/// index in load order, and updates what is held.
#[allow(clippy::too_many_arguments)]
fn scan_decisions(
    files: &[PathBuf],
    outcomes: &HashMap<u128, Outcome>,
    budget: &mut Budget,
    held: &mut Held,
    msg: &str,
    progress: Progress,
    on_row: &mut dyn FnMut(usize, Row<'_>, &mut Held) -> Result<()>,
) -> Result<ScanCounts> {
    let mut largest = 0;
    let (streams, total) = open_all(files, LogKind::Decisions, budget.limit, &mut largest)?;
    let pb = progress.bar(total as u64, msg, "decisions");
    let mut scan = Scan {
        outcomes,
        seen: HashSet::new(),
        cur: None,
        counts: ScanCounts::default(),
    };
    let mut n = 0;
    let mut done = 0;
    let mut sink = |r: Row<'_>, held: &mut Held| {
        on_row(n, r, held)?;
        n += 1;
        Ok(())
    };
    for s in streams {
        let window = window_bytes(
            s.row_groups()
                .iter()
                .map(|g| g.uncompressed_bytes)
                .max()
                .unwrap_or(0),
        );
        let rows = s.rows();
        for batch in s {
            let b = batch?;
            scan.batch(&b, &mut |r| sink(r, held))?;
            held.seen_ids = scan.seen.len() as u64;
            budget.check(held, window, "the labelled rows")?;
        }
        done += rows;
        pb.set_position(done as u64);
    }
    scan.finish(&mut |r| sink(r, held))?;
    pb.finish_and_clear();
    Ok(scan.counts)
}

/// Streams `dirs` into labelled training and validation rows (see the
/// module docs).
///
/// # Errors
/// [`TrainerError::MemoryBudget`] when a row group, or the map and rows,
/// would not fit; [`TrainerError::MissingDir`], [`TrainerError::Read`],
/// [`TrainerError::SchemaMismatch`] as [`crate::dataset::load_logs`];
/// [`TrainerError::NoData`] without decision rows, or when the labelled
/// rows cannot be split.
pub fn stream_labelled(
    dirs: &[PathBuf],
    rule: &TargetRule,
    opts: &StreamOptions,
    progress: Progress,
) -> Result<Streamed> {
    if !(opts.valid_fraction > 0.0 && opts.valid_fraction < 1.0) {
        return Err(TrainerError::InvalidArgument(format!(
            "--valid-fraction must be in (0, 1), got {}",
            opts.valid_fraction
        )));
    }
    let decision_files = list_log_files(dirs, LogKind::Decisions)?;
    let outcome_files = list_log_files(dirs, LogKind::Outcomes)?;
    let mut budget = Budget {
        limit: opts.memory_budget_bytes,
        peak: 0,
    };
    let mut held = Held::default();
    let mut largest = 0;
    // Every file's layout and row groups are checked before any is read.
    let (_, decision_rows) = open_all(
        &decision_files,
        LogKind::Decisions,
        budget.limit,
        &mut largest,
    )?;
    if decision_rows == 0 {
        return Err(no_decisions(dirs, decision_files.len()));
    }
    let (o_streams, o_total) = open_all(
        &outcome_files,
        LogKind::Outcomes,
        budget.limit,
        &mut largest,
    )?;
    let (outcomes, outcome_rows) =
        read_outcomes(o_streams, o_total, &mut budget, &mut held, progress)?;

    // With a sample, a first pass finds the time cut (the labelled rows'
    // positions in a stable sort by time), so only training rows are sampled.
    let mut passes = 0;
    let sampler = match opts.sample {
        None => None,
        Some(spec) => {
            let mut ts: Vec<i64> = Vec::new();
            let mut first = held;
            scan_decisions(
                &decision_files,
                &outcomes,
                &mut budget,
                &mut first,
                "time cut",
                progress,
                &mut |_, r, h| {
                    ts.push(r.ts_ms);
                    // 8 bytes a time: a twenty-fifth of a labelled row.
                    h.labelled_rows = ts.len() as u64 / 25;
                    Ok(())
                },
            )?;
            passes += 1;
            let cut = time_cut(&ts, opts.valid_fraction)?;
            let ratio = spec.ratio_of(cut.train_rows as u64);
            Some((spec, ratio, cut))
        }
    };

    let mut row_counts = TargetCounts::default();
    let (mut train, mut valid) = (Labelled::default(), Labelled::default());
    let mut systematic = sampler.map(|(_, ratio, _)| Systematic::new(ratio));
    let scan = scan_decisions(
        &decision_files,
        &outcomes,
        &mut budget,
        &mut held,
        "decisions",
        progress,
        &mut |j, r, h| {
            count_row(&mut row_counts, rule, &r);
            match (&sampler, &mut systematic) {
                (Some((_, _, cut)), Some(s)) => {
                    if cut.is_valid(j, r.ts_ms) {
                        push_row(&mut valid, rule, &r);
                    } else if s.keep_next() {
                        push_row(&mut train, rule, &r);
                    }
                }
                _ => push_row(&mut train, rule, &r),
            }
            h.labelled_rows = (train.len() + valid.len()) as u64;
            h.training_rows = train.len() as u64;
            Ok(())
        },
    )?;
    passes += 1;
    drop(outcomes);

    let counts = TargetCounts {
        rows: row_counts.rows,
        failures: row_counts.failures,
        slow: row_counts.slow,
        clipped_weights: row_counts.clipped_weights,
        ..scan.targets
    };
    train.counts = counts;
    valid.counts = counts;
    let (train, valid, sample) = match sampler {
        None => {
            let (t, v) = split_in_place(train, opts.valid_fraction)?;
            (t, v, None)
        }
        Some((requested, _, cut)) => {
            let report = SampleReport {
                requested,
                fraction: requested.fraction_of(cut.train_rows as u64),
                method: SAMPLE_METHOD,
                train_rows_before: cut.train_rows as u64,
                train_rows_kept: train.len() as u64,
            };
            (train, valid, Some(report))
        }
    };
    let report = StreamReport {
        decision_files,
        outcome_files,
        decision_rows: scan.rows_read,
        outcome_rows,
        outcome_keys: held.outcome_keys as usize,
        shadow_rows_dropped: scan.shadow_rows,
        decisions_dropped: scan.dropped,
        decision_passes: passes,
        largest_row_group_bytes: largest,
        peak_counted_bytes: budget.peak,
        memory_budget_bytes: opts.memory_budget_bytes,
        sample,
    };
    Ok(Streamed {
        train,
        valid,
        report,
    })
}

fn no_decisions(dirs: &[PathBuf], files: usize) -> TrainerError {
    let where_ = dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    TrainerError::NoData(format!(
        "no decision rows under {where_} ({files} decisions files found; expected <dir>/dt=YYYY-MM-DD/decisions-*.parquet)"
    ))
}

/// The training/validation boundary in a stable sort by time.
#[derive(Debug, Clone, Copy)]
struct Cut {
    ts_ms: i64,
    index: usize,
    train_rows: usize,
}

impl Cut {
    fn is_valid(&self, index: usize, ts_ms: i64) -> bool {
        (ts_ms, index) >= (self.ts_ms, self.index)
    }
}

fn split_sizes(n: usize, valid_fraction: f64) -> Result<usize> {
    let n_valid = ((n as f64) * valid_fraction).ceil() as usize;
    if n < 2 || n_valid == 0 || n_valid >= n {
        return Err(TrainerError::NoData(format!(
            "{n} rows with a target cannot be split into non-empty train and validation sets"
        )));
    }
    Ok(n_valid)
}

fn time_cut(ts: &[i64], valid_fraction: f64) -> Result<Cut> {
    let n_valid = split_sizes(ts.len(), valid_fraction)?;
    let mut order: Vec<usize> = (0..ts.len()).collect();
    order.sort_by_key(|&i| ts[i]);
    let first_valid = order[ts.len() - n_valid];
    Ok(Cut {
        ts_ms: ts[first_valid],
        index: first_valid,
        train_rows: ts.len() - n_valid,
    })
}

/// [`Labelled::split_by_time`] without a second copy when the rows are
/// already in time order (the usual case: logs are written in order).
fn split_in_place(mut all: Labelled, valid_fraction: f64) -> Result<(Labelled, Labelled)> {
    if !all.ts_ms.is_sorted() {
        return all.split_by_time(valid_fraction);
    }
    let n = all.len();
    let k = n - split_sizes(n, valid_fraction)?;
    let valid = Labelled {
        features: all.features.split_off(k * FEATURE_COUNT),
        targets: all.targets.split_off(k),
        weights: all.weights.split_off(k),
        slow: all.slow.split_off(k),
        latency_ms: all.latency_ms.split_off(k),
        ts_ms: all.ts_ms.split_off(k),
        rule_score: all.rule_score.split_off(k),
        counts: all.counts,
    };
    Ok((all, valid))
}
