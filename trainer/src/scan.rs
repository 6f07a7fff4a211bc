//! The reader's passes: the outcome map, and the decision scan that turns
//! each admitted decision's picked row into a labelled row (see
//! [`crate::stream`] for the whole).

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Float32Type, Float64Type, TimestampMillisecondType};
use scorer_core::features::{FEATURE_COUNT, FEATURE_SCHEMA_VERSION};
use scorer_log::LogKind;
use scorer_log::stream::{FileStream, Opened};

use crate::budget::{Budget, Bytes, Held, RUNTIME_RESERVE_BYTES, hash_table_bytes, window_bytes};
use crate::dataset::{DroppedDecisions, Labelled, MAX_LATENCY_MS, SHADOW_ARM, col, type_err};
use crate::error::{Result, TrainerError};
use crate::progress::Progress;
use crate::target::{TargetCounts, TargetRule};

/// A 64-bit hash (SipHash) of a key's parts. Of `n` distinct keys, two
/// share a hash with probability about `n² / 2⁶⁵`: 3·10⁻⁶ for 10 M
/// decisions, 3·10⁻⁴ for 100 M; such a pair would join one outcome to the
/// other's candidate, or drop a decision as a repeated id.
pub(crate) type Key = u64;

pub(crate) fn key_hash(parts: &[&str]) -> Key {
    let mut h = DefaultHasher::new();
    for p in parts {
        p.hash(&mut h);
    }
    h.finish()
}

macro_rules! typed {
    ($b:expr, $name:literal, $as:ident $(::<$t:ty>)?) => {
        col($b, $name)?.$as$(::<$t>)?().ok_or_else(|| type_err($name))?
    };
}

/// Opens every file of `kind`, refusing a row group the budget cannot
/// window; returns the streams and their total rows.
pub(crate) fn open_all(
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
            if window_bytes(g.uncompressed_bytes) + RUNTIME_RESERVE_BYTES > budget {
                return Err(TrainerError::MemoryBudget(format!(
                    "--memory-budget {} is too small to read even one row group: row group {i} of {} is {} uncompressed ({} rows), which takes {} while it is decoded, beside the 64 MiB counted for the process itself",
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
pub(crate) type Outcome = (Option<f64>, Option<bool>);

/// An [`Outcome`] in 16 bytes: the latency (any f64, NaN included, as
/// logged) and flags for presence and success.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stored {
    latency_ms: f64,
    flags: u8,
}

const HAS_LATENCY: u8 = 1;
const HAS_SUCCESS: u8 = 2;
const SUCCESS: u8 = 4;

impl Stored {
    fn new((latency, success): Outcome) -> Self {
        let mut flags = 0;
        if latency.is_some() {
            flags |= HAS_LATENCY;
        }
        match success {
            Some(true) => flags |= HAS_SUCCESS | SUCCESS,
            Some(false) => flags |= HAS_SUCCESS,
            None => {}
        }
        Stored {
            latency_ms: latency.unwrap_or(0.0),
            flags,
        }
    }

    fn get(self) -> Outcome {
        (
            (self.flags & HAS_LATENCY != 0).then_some(self.latency_ms),
            (self.flags & HAS_SUCCESS != 0).then_some(self.flags & SUCCESS != 0),
        )
    }
}

/// Outcomes keyed by decision, worker and caller: an outcome joins only a
/// decision of the same caller, as in [`scorer_log::join_outcomes`].
pub(crate) type OutcomeMap = HashMap<Key, Stored>;

/// Row `i`'s caller as a key part: `""` when null (a credential's name is
/// never empty).
fn caller(column: &arrow::array::StringArray, i: usize) -> &str {
    if column.is_valid(i) {
        column.value(i)
    } else {
        ""
    }
}

/// Bytes of `map` as allocated.
pub(crate) fn map_bytes(map: &OutcomeMap) -> u64 {
    hash_table_bytes(map.capacity(), std::mem::size_of::<(Key, Stored)>())
}

/// Bytes of `seen` as allocated.
pub(crate) fn set_bytes(seen: &HashSet<Key>) -> u64 {
    hash_table_bytes(seen.capacity(), std::mem::size_of::<Key>())
}

/// Bytes of `l`'s columns as allocated.
pub(crate) fn labelled_bytes(l: &Labelled) -> u64 {
    (l.features.capacity() * 4
        + l.targets.capacity() * 4
        + l.weights.capacity() * 4
        + l.slow.capacity()
        + l.latency_ms.capacity() * 8
        + l.ts_ms.capacity() * 8
        + l.rule_score.capacity() * 8) as u64
}

/// `l` with room for `rows` rows.
pub(crate) fn reserved(rows: usize) -> Labelled {
    Labelled {
        features: Vec::with_capacity(rows * FEATURE_COUNT),
        targets: Vec::with_capacity(rows),
        weights: Vec::with_capacity(rows),
        slow: Vec::with_capacity(rows),
        latency_ms: Vec::with_capacity(rows),
        ts_ms: Vec::with_capacity(rows),
        rule_score: Vec::with_capacity(rows),
        counts: TargetCounts::default(),
    }
}

pub(crate) fn read_outcomes(
    streams: Vec<FileStream>,
    total: usize,
    budget: &mut Budget,
    held: &mut Held,
    progress: Progress,
) -> Result<(OutcomeMap, usize)> {
    let pb = progress.bar(total as u64, "outcomes", "rows");
    // Sized up front: growing would hold the old and the new table at once.
    let mut map = OutcomeMap::with_capacity(total);
    let mut rows = 0;
    for s in streams {
        let largest = s.row_groups().iter().map(|g| g.uncompressed_bytes).max();
        let window = window_bytes(largest.unwrap_or(0));
        for batch in s {
            let b = batch?;
            let dec = typed!(&b, "decision_id", as_string_opt::<i32>);
            let wrk = typed!(&b, "worker_id", as_string_opt::<i32>);
            let who = typed!(&b, "caller", as_string_opt::<i32>);
            let lat = typed!(&b, "latency_ms", as_primitive_opt::<Float64Type>);
            let ok = typed!(&b, "success", as_boolean_opt);
            for i in 0..b.num_rows() {
                map.insert(
                    key_hash(&[dec.value(i), wrk.value(i), caller(who, i)]),
                    Stored::new((
                        lat.is_valid(i).then(|| lat.value(i)),
                        ok.is_valid(i).then(|| ok.value(i)),
                    )),
                );
            }
            rows += b.num_rows();
            held.outcome_keys = map.len() as u64;
            held.outcome_map_bytes = map_bytes(&map);
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
pub(crate) struct Row<'a> {
    pub(crate) features: &'a [f32],
    pub(crate) latency_ms: f64,
    pub(crate) success: bool,
    pub(crate) probability: Option<f64>,
    pub(crate) rule_score: f64,
    pub(crate) ts_ms: i64,
}

/// What a decision scan counted.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ScanCounts {
    pub(crate) dropped: DroppedDecisions,
    pub(crate) shadow_rows: usize,
    pub(crate) rows_read: usize,
    /// Every count but the row-level ones, which the caller keeps.
    pub(crate) targets: TargetCounts,
}

/// The decision scan shared by both passes: `on_row` gets each labelled
/// row in load order.
struct Scan<'m> {
    outcomes: &'m OutcomeMap,
    seen: HashSet<Key>,
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
        let who = typed!(b, "caller", as_string_opt::<i32>);
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
            }
            let outcome = self
                .outcomes
                .get(&key_hash(&[id, workers.value(i), caller(who, i)]))
                .map(|s| s.get());
            let start = feats.value_offset_at(i);
            let row = &values[start..start + FEATURE_COUNT];
            let is_picked = picked.value(i);
            let lat = outcome.and_then(|o| o.0);
            let row_ok = (feats.is_null(i) && !is_picked || row.iter().all(|x| x.is_finite()))
                && (0.0..=100.0).contains(&rule.value(i))
                && (!prob.is_valid(i) || (0.0..=1.0).contains(&prob.value(i)))
                && lat.is_none_or(|l| (0.0..=MAX_LATENCY_MS).contains(&l));
            let c = self.cur.get_or_insert_with(|| Current {
                id: id.to_owned(),
                ts_ms: ts.value(i),
                all_ok: true,
                ..Current::default()
            });
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
pub(crate) fn count_row(c: &mut TargetCounts, rule: &TargetRule, r: &Row<'_>) {
    c.rows += 1;
    c.failures += usize::from(!r.success);
    c.slow += usize::from(rule.is_slow(r.features, r.latency_ms, r.success));
    let w = rule.weight(r.probability);
    c.clipped_weights += usize::from(f64::from(w) >= rule.max_weight && rule.max_weight > 1.0);
}

/// Appends row `r` with its target and weight.
pub(crate) fn push_row(out: &mut Labelled, rule: &TargetRule, r: &Row<'_>) {
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
pub(crate) fn scan_decisions(
    files: &[PathBuf],
    outcomes: &OutcomeMap,
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
        seen: HashSet::with_capacity(total),
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
            held.seen_ids_bytes = set_bytes(&scan.seen);
            budget.check(held, window, "the labelled rows")?;
        }
        done += rows;
        pb.set_position(done as u64);
    }
    scan.finish(&mut |r| sink(r, held))?;
    pb.finish_and_clear();
    Ok(scan.counts)
}
