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

use std::path::PathBuf;

use scorer_core::features::FEATURE_COUNT;
use scorer_log::LogKind;
use scorer_log::stream::FileStream;
use serde::Serialize;

use crate::budget::{Budget, Command, Held, LABELLED_ROW_BYTES, hash_table_bytes, window_bytes};
use crate::dataset::{DroppedDecisions, Labelled, list_log_files, split_sizes};
use crate::error::{Result, TrainerError};
use crate::progress::Progress;
use crate::sample::{SAMPLE_METHOD, SampleReport, SampleSpec, Systematic};
use crate::scan::{
    Key, OutcomeMap, ScanCounts, count_row, labelled_bytes, open_all, push_row, read_outcomes,
    reserved, scan_decisions,
};
use crate::spill::{ParkWriter, Parked, SpillWriter, Spilled};
use crate::target::{TargetCounts, TargetRule};
use crate::window::{Window, keep_window};

/// How to stream.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamOptions {
    /// `--memory-budget`, bytes.
    pub memory_budget_bytes: u64,
    /// Share of the labelled rows, the latest, that validate; in (0, 1).
    pub valid_fraction: f64,
    /// `--sample`, if given.
    pub sample: Option<SampleSpec>,
    /// Where training rows go when they do not fit the budget
    /// ([`crate::spill`]); the system's temporary directory by default.
    pub spill_dir: Option<PathBuf>,
    /// Only the decisions of this window ([`crate::window`]); all without.
    pub window: Option<Window>,
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
    /// Training rows written to a spill file (0 when they fit in memory).
    pub spilled_rows: usize,
    /// Bytes on disk of the spill: the training rows, their weights and
    /// the parked validation rows.
    pub spilled_bytes: u64,
}

/// Labelled rows split by time, and the report.
#[derive(Debug)]
pub struct Streamed {
    /// Training rows (sampled with `--sample`); with a spill, only a
    /// time-stratified sample of at most [`TRAIN_METRICS_ROWS`] of them,
    /// for the training metrics.
    pub train: Labelled,
    /// The training rows on disk, when they did not fit the budget.
    pub spilled: Option<Spilled>,
    /// Validation rows: the latest `valid_fraction` of the labelled rows
    /// (empty while they are parked).
    pub valid: Labelled,
    /// With a spill, the validation rows parked on disk until LightGBM has
    /// trained ([`Parked::read`]).
    pub parked: Option<Parked>,
    /// What was read.
    pub report: StreamReport,
}

/// Training rows kept in memory beside a spill, for the training metrics.
pub const TRAIN_METRICS_ROWS: usize = 100_000;

/// How the decisions pass keeps rows.
enum Plan {
    /// Every labelled row in memory, split by time afterwards.
    All,
    /// Validation rows and a sample of the training rows in memory.
    Sample(SampleSpec, Cut, Systematic),
    /// A metrics sample in memory; training rows on disk for LightGBM,
    /// validation rows parked on disk until LightGBM is done.
    Spill(Cut, Systematic, Box<(SpillWriter, ParkWriter)>),
}

/// The logs listed, every file's layout and row groups checked, and the
/// outcomes read: where both readers start.
struct Opened {
    decision_files: Vec<PathBuf>,
    outcome_files: Vec<PathBuf>,
    /// Rows in the decisions files' footers (decisions, in nested files).
    decision_rows: usize,
    outcome_rows: usize,
    largest: u64,
}

fn open_logs(
    dirs: &[PathBuf],
    window: Option<&Window>,
    budget: &mut Budget,
    held: &mut Held,
    progress: Progress,
) -> Result<(Opened, OutcomeMap)> {
    let mut decision_files = list_log_files(dirs, LogKind::Decisions)?;
    let outcome_files = list_log_files(dirs, LogKind::Outcomes)?;
    let mut largest = 0;
    let (streams, mut decision_rows) = open_all(
        &decision_files,
        LogKind::Decisions,
        budget.limit,
        &mut largest,
    )?;
    if let Some(w) = window {
        let rows: Vec<usize> = streams.iter().map(FileStream::rows).collect();
        decision_files = w.files(decision_files, &rows);
        decision_rows = rows[rows.len() - decision_files.len()..].iter().sum();
    }
    drop(streams);
    if decision_rows == 0 {
        return Err(no_decisions(dirs, decision_files.len()));
    }
    let (o_streams, o_total) = open_all(
        &outcome_files,
        LogKind::Outcomes,
        budget.limit,
        &mut largest,
    )?;
    let (outcomes, outcome_rows) = read_outcomes(o_streams, o_total, budget, held, progress)?;
    budget.window = window_bytes(largest);
    Ok((
        Opened {
            decision_files,
            outcome_files,
            decision_rows,
            outcome_rows,
            largest,
        },
        outcomes,
    ))
}

impl Opened {
    fn report(
        self,
        scan: &ScanCounts,
        held: &Held,
        budget: &Budget,
        passes: usize,
    ) -> StreamReport {
        StreamReport {
            decision_files: self.decision_files,
            outcome_files: self.outcome_files,
            decision_rows: scan.rows_read,
            outcome_rows: self.outcome_rows,
            outcome_keys: held.outcome_keys as usize,
            shadow_rows_dropped: scan.shadow_rows,
            decisions_dropped: scan.dropped,
            decision_passes: passes,
            largest_row_group_bytes: self.largest,
            peak_counted_bytes: budget.peak,
            memory_budget_bytes: budget.limit,
            ..StreamReport::default()
        }
    }
}

/// Every count: the scan's, and the labelled rows' from `rows`.
fn total_counts(rows: TargetCounts, scan: &ScanCounts) -> TargetCounts {
    TargetCounts {
        rows: rows.rows,
        failures: rows.failures,
        slow: rows.slow,
        clipped_weights: rows.clipped_weights,
        ..scan.targets
    }
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
    if let Some(dir) = &opts.spill_dir
        && !dir.is_dir()
    {
        return Err(TrainerError::InvalidArgument(format!(
            "--spill-dir {} is not a directory",
            dir.display()
        )));
    }
    let mut budget = Budget::new(opts.memory_budget_bytes, Command::Train);
    let mut held = Held::default();
    let (opened, outcomes) =
        open_logs(dirs, opts.window.as_ref(), &mut budget, &mut held, progress)?;
    let (decision_rows, decision_files) = (opened.decision_rows, &opened.decision_files);
    let ids = hash_table_bytes(decision_rows, std::mem::size_of::<Key>());

    // At most one labelled row per decision, and per outcome key.
    let max_rows = decision_rows.min(held.outcome_keys as usize);
    let n_valid = ((max_rows as f64) * opts.valid_fraction).ceil() as usize;
    let train_max = max_rows.saturating_sub(n_valid);
    let mut in_memory = budget;
    let fits = opts.sample.is_none()
        && in_memory
            .project(&held, ids, (max_rows, train_max, train_max), true)
            .is_ok();
    if fits {
        budget = in_memory;
    }

    // A sample, or rows that must go to disk, need the time cut first (the
    // labelled rows' positions in a stable sort by time), from a first pass.
    let mut passes = 0;
    let cut = if !fits {
        let mut ts: Vec<i64> = Vec::new();
        let mut first = held;
        scan_decisions(
            decision_files,
            &outcomes,
            &mut budget,
            &mut first,
            "time cut",
            progress,
            &mut |_, r, h| {
                ts.push(r.ts_ms);
                h.labelled_bytes = (ts.capacity() * 8) as u64;
                Ok(())
            },
        )?;
        passes += 1;
        Some(time_cut(&ts, opts.valid_fraction, opts.window.as_ref())?)
    } else {
        None
    };

    // Room for every row up front: no reallocation (which would hold the
    // old and the new copy at once), and a refusal before the long read.
    let (mut plan, mut train, mut valid) = match (opts.sample, cut) {
        (Some(spec), Some(cut)) => {
            let (keep, of) = spec.ratio_of(cut.train_rows as u64);
            let kept = (cut.train_rows as u128 * u128::from(keep) / u128::from(of)) as usize;
            budget.project(
                &held,
                ids,
                (kept + cut.valid_rows, kept, cut.train_rows),
                false,
            )?;
            let sys = Systematic::new((keep, of));
            (
                Plan::Sample(spec, cut, sys),
                reserved(kept),
                reserved(cut.valid_rows),
            )
        }
        (None, Some(cut)) => {
            let metrics = cut.train_rows.min(TRAIN_METRICS_ROWS);
            budget.project_spill(&held, ids, (cut.valid_rows, metrics, cut.train_rows))?;
            let dir = opts.spill_dir.clone().unwrap_or_else(std::env::temp_dir);
            let sys = Systematic::new((metrics as u64, cut.train_rows.max(1) as u64));
            (
                Plan::Spill(
                    cut,
                    sys,
                    Box::new((SpillWriter::create(&dir)?, ParkWriter::create(&dir)?)),
                ),
                reserved(metrics),
                Labelled::default(),
            )
        }
        // Only when it fits (projected above).
        _ => (Plan::All, reserved(max_rows), Labelled::default()),
    };
    let mut row_counts = TargetCounts::default();
    let mut one = reserved(1);
    let scan = scan_decisions(
        decision_files,
        &outcomes,
        &mut budget,
        &mut held,
        "decisions",
        progress,
        &mut |j, r, h| {
            let in_window = match &plan {
                Plan::All => true,
                Plan::Sample(_, cut, _) | Plan::Spill(cut, ..) => cut.in_window(j, r.ts_ms),
            };
            if !in_window {
                return Ok(());
            }
            count_row(&mut row_counts, rule, &r);
            match &mut plan {
                Plan::All => push_row(&mut train, rule, &r),
                Plan::Sample(_, cut, sys) => {
                    if cut.is_valid(j, r.ts_ms) {
                        push_row(&mut valid, rule, &r);
                    } else if sys.keep_next() {
                        push_row(&mut train, rule, &r);
                    }
                }
                Plan::Spill(cut, sys, files) => {
                    let (w, park) = &mut **files;
                    if cut.is_valid(j, r.ts_ms) {
                        one.features.clear();
                        one.targets.clear();
                        one.weights.clear();
                        one.slow.clear();
                        one.latency_ms.clear();
                        one.ts_ms.clear();
                        one.rule_score.clear();
                        push_row(&mut one, rule, &r);
                        park.push(&one, 0)?;
                    } else {
                        let target = rule.target(r.features, r.latency_ms, r.success);
                        w.push(target, rule.weight(r.probability), r.features)?;
                        if sys.keep_next() {
                            push_row(&mut train, rule, &r);
                        }
                    }
                }
            }
            h.labelled_rows = (train.len() + valid.len()) as u64;
            h.labelled_bytes = labelled_bytes(&train) + labelled_bytes(&valid);
            h.training_rows = match plan {
                Plan::All => {
                    train.len() - ((train.len() as f64) * opts.valid_fraction).ceil() as usize
                }
                Plan::Sample(..) => train.len(),
                // Binned after the read, when the map and ids are gone.
                Plan::Spill(..) => 0,
            } as u64;
            Ok(())
        },
    )?;
    passes += 1;
    drop(outcomes);

    let counts = total_counts(row_counts, &scan);
    train.counts = counts;
    valid.counts = counts;
    let mut parked = None;
    let (train, valid, sample, spilled) = match plan {
        Plan::All => {
            if let Some(w) = &opts.window {
                train = keep_window(train, w);
            }
            let (t, v) = split_in_place(train, opts.valid_fraction)?;
            (t, v, None, None)
        }
        Plan::Sample(requested, cut, _) => {
            let report = SampleReport {
                requested,
                fraction: requested.fraction_of(cut.train_rows as u64),
                method: SAMPLE_METHOD,
                train_rows_before: cut.train_rows as u64,
                train_rows_kept: train.len() as u64,
            };
            (train, valid, Some(report), None)
        }
        Plan::Spill(_, _, files) => {
            let (w, park) = *files;
            parked = Some(park.finish()?);
            (train, valid, None, Some(w.finish()?))
        }
    };
    let report = StreamReport {
        sample,
        spilled_rows: spilled.as_ref().map_or(0, |s| s.rows),
        spilled_bytes: spilled.as_ref().map_or(0, |s| s.bytes)
            + parked
                .as_ref()
                .map_or(0, |p| p.rows() as u64 * LABELLED_ROW_BYTES),
        ..opened.report(&scan, &held, &budget, passes)
    };
    Ok(Streamed {
        train,
        spilled,
        valid,
        parked,
        report,
    })
}

/// Streams every labelled row of `dirs`, in load order and without a
/// split, to `on_chunk`, at most `chunk_rows` at a time (for `trainer
/// validate`: only the chunk, the outcome map and the ids are held, within
/// `memory_budget_bytes`). Returns the target counts and the report.
///
/// # Errors
/// As [`stream_labelled`]; `on_chunk`'s errors.
pub fn for_each_labelled(
    dirs: &[PathBuf],
    rule: &TargetRule,
    memory_budget_bytes: u64,
    chunk_rows: usize,
    progress: Progress,
    on_chunk: &mut dyn FnMut(&Labelled) -> Result<()>,
) -> Result<(TargetCounts, StreamReport)> {
    let mut budget = Budget::new(memory_budget_bytes, Command::Validate);
    let mut held = Held::default();
    let (opened, outcomes) = open_logs(dirs, None, &mut budget, &mut held, progress)?;
    let chunk_rows = chunk_rows.max(1);
    let mut chunk = reserved(chunk_rows);
    let mut row_counts = TargetCounts::default();
    let mut flush = |chunk: &mut Labelled| -> Result<()> {
        on_chunk(chunk)?;
        *chunk = Labelled {
            counts: chunk.counts,
            ..reserved(chunk_rows)
        };
        Ok(())
    };
    let scan = scan_decisions(
        &opened.decision_files,
        &outcomes,
        &mut budget,
        &mut held,
        "decisions",
        progress,
        &mut |_, r, h| {
            count_row(&mut row_counts, rule, &r);
            push_row(&mut chunk, rule, &r);
            if chunk.len() == chunk_rows {
                flush(&mut chunk)?;
            }
            h.labelled_bytes = labelled_bytes(&chunk);
            Ok(())
        },
    )?;
    if !chunk.is_empty() {
        flush(&mut chunk)?;
    }
    let counts = total_counts(row_counts, &scan);
    Ok((counts, opened.report(&scan, &held, &budget, 1)))
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

/// The training/validation boundary in a stable sort by time, and the
/// window's start.
#[derive(Debug, Clone, Copy)]
struct Cut {
    ts_ms: i64,
    index: usize,
    train_rows: usize,
    valid_rows: usize,
    /// The first `(ts_ms, index)` in the window.
    start: (i64, usize),
}

impl Cut {
    fn is_valid(&self, index: usize, ts_ms: i64) -> bool {
        (ts_ms, index) >= (self.ts_ms, self.index)
    }

    fn in_window(&self, index: usize, ts_ms: i64) -> bool {
        (ts_ms, index) >= self.start
    }
}

fn time_cut(ts: &[i64], valid_fraction: f64, window: Option<&Window>) -> Result<Cut> {
    let start = window.map_or((i64::MIN, 0), |w| w.start(ts));
    let mut order: Vec<usize> = (0..ts.len()).filter(|&i| (ts[i], i) >= start).collect();
    order.sort_by_key(|&i| ts[i]);
    let n = order.len();
    let n_valid = split_sizes(n, valid_fraction)?;
    let first_valid = order[n - n_valid];
    Ok(Cut {
        ts_ms: ts[first_valid],
        index: first_valid,
        train_rows: n - n_valid,
        valid_rows: n_valid,
        start,
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
