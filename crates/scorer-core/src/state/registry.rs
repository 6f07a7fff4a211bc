//! The worker table and atomic batch ingestion (see the module guide in `state`).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use super::history::{History, Sample};
use super::worker::{Derived, Smoothed, WorkerView};
use crate::dynamics::{LocalEvidence, PenaltyConfig, PenaltyTracker, Transition};
use crate::telemetry::Snapshot;
use crate::telemetry::TelemetryConfig;
use crate::telemetry::validate::{FieldError, Warning, check_snapshot, display_id};

/// One tracked worker: its published view and its write-side history.
#[derive(Debug)]
pub struct WorkerSlot {
    view: ArcSwap<WorkerView>,
    history: Mutex<History>,
    evidence: LocalEvidence,
    /// `f64` bits of the final score of the latest decision that included
    /// this worker; NaN until the first.
    last_final_bits: AtomicU64,
}

impl WorkerSlot {
    /// The current published view (lock-free).
    pub fn view(&self) -> arc_swap::Guard<Arc<WorkerView>> {
        self.view.load()
    }

    /// The service's own evidence of this worker: outstanding picks,
    /// outcomes, unseen backlog, outlier ejection.
    pub fn evidence(&self) -> &LocalEvidence {
        &self.evidence
    }

    /// The current published view as an owned `Arc` (one refcount increment).
    pub fn view_full(&self) -> Arc<WorkerView> {
        self.view.load_full()
    }

    /// Records `score` (points, 0..=100) as this worker's latest final score.
    pub fn record_final_score(&self, score: f64) {
        debug_assert!((0.0..=100.0).contains(&score), "final score {score}");
        self.last_final_bits
            .store(score.to_bits(), Ordering::Relaxed);
    }

    /// The final score (points) of the latest scoring that included this
    /// worker (`ScoreMode::Decide` only), if any.
    pub fn last_final_score(&self) -> Option<f64> {
        let v = f64::from_bits(self.last_final_bits.load(Ordering::Relaxed));
        (!v.is_nan()).then_some(v)
    }
}

/// Why a telemetry batch was rejected. Nothing in the batch was applied.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum IngestError {
    /// The batch as a whole is malformed (empty, too large).
    #[error("invalid telemetry batch: {0}")]
    Batch(String),
    /// One or more snapshots break the contract; every violation is listed.
    #[error("invalid telemetry: {} problem(s)", .0.len())]
    Invalid(Vec<FieldError>),
    /// Registering the batch's new workers would exceed `telemetry.max_workers`.
    #[error("worker limit {limit} reached: {new} new worker(s) rejected")]
    TooManyWorkers {
        /// The configured limit.
        limit: usize,
        /// New workers the batch would have added.
        new: usize,
    },
}

/// Most new worker ids an [`IngestOutcome`] names.
pub const NEW_WORKER_IDS_MAX: usize = 16;

/// What an accepted batch did.
#[derive(Debug, Clone, PartialEq)]
pub struct IngestOutcome {
    /// Snapshots applied (the whole batch).
    pub accepted: usize,
    /// Workers seen for the first time.
    pub registered: usize,
    /// The first [`NEW_WORKER_IDS_MAX`] of them, in batch order (for the log).
    pub new_worker_ids: Vec<Arc<str>>,
    /// Values accepted with a change (e.g. clamped CPU).
    pub warnings: Vec<Warning>,
    /// Penalty state changes the batch caused, per worker.
    pub transitions: Vec<(Arc<str>, Transition)>,
}

/// What ingestion needs from the rest of the service.
pub struct IngestConfig<'a> {
    /// Telemetry limits and smoothing.
    pub telemetry: &'a TelemetryConfig,
    /// Most snapshots in one batch (`server.max_batch`).
    pub max_batch: usize,
    /// Penalty state machine settings.
    pub penalty: &'a PenaltyConfig,
    /// The rule score of a freshly updated view, fed to the penalty state machine.
    pub rule_score: &'a dyn Fn(&WorkerView) -> f64,
    /// Derives the host's per-worker terms from a freshly updated view
    /// ([`WorkerView::derived`]), after its penalty state is evaluated.
    pub derive: Option<&'a dyn Fn(&WorkerView) -> Derived>,
}

/// Shards of the worker table; registering a worker copies one shard only.
pub const SHARDS: usize = 64;

/// Keyed with foldhash (seeded per process from address-space layout
/// randomisation; the crate's `std` seeding is left off so that the
/// dependency tree's own hashbrown/foldhash builds are shared): the
/// registry is read once per candidate of every score request, and
/// SipHash, std's default, cost a large share of the rules path's
/// instructions (callgrind, 16 candidates). The number of workers is
/// capped by `telemetry.max_workers`.
type Shard = HashMap<Arc<str>, Arc<WorkerSlot>, foldhash::fast::RandomState>;

/// The table of known workers.
#[derive(Debug)]
pub struct Registry {
    shards: Box<[ArcSwap<Shard>]>,
    ingest: Mutex<()>,
}

impl Default for Registry {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS)
                .map(|_| ArcSwap::from_pointee(Shard::default()))
                .collect(),
            ingest: Mutex::new(()),
        }
    }
}

fn shard_of(id: &str) -> usize {
    let h = id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (h % SHARDS as u64) as usize
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Look a worker up by id without locking or allocating.
    pub fn get(&self, worker_id: &str) -> Option<Arc<WorkerSlot>> {
        self.shards[shard_of(worker_id)]
            .load()
            .get(worker_id)
            .cloned()
    }

    /// Every tracked worker (one atomic load per shard), in no particular order.
    pub fn slots(&self) -> Vec<Arc<WorkerSlot>> {
        self.shards
            .iter()
            .flat_map(|sh| sh.load().values().cloned().collect::<Vec<_>>())
            .collect()
    }

    /// Number of tracked workers.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|sh| sh.load().len()).sum()
    }

    /// Forget workers whose last report is older than `forget_after_ms` at
    /// monotonic `now_ms`; returns their ids. Their history, penalty state
    /// and in-flight count go with them; a later report registers them anew.
    pub fn forget_silent(&self, now_ms: u64, forget_after_ms: u64) -> Vec<Arc<str>> {
        let _writer = self.ingest.lock().unwrap_or_else(|e| e.into_inner());
        self.forget_locked(now_ms, forget_after_ms)
    }

    fn forget_locked(&self, now_ms: u64, forget_after_ms: u64) -> Vec<Arc<str>> {
        let mut gone = Vec::new();
        for sh in self.shards.iter() {
            let cur = sh.load_full();
            let old = |slot: &Arc<WorkerSlot>| slot.view().age_ms(now_ms) > forget_after_ms;
            if !cur.values().any(old) {
                continue;
            }
            let mut next = (*cur).clone();
            next.retain(|id, slot| {
                let keep = !old(slot);
                if !keep {
                    gone.push(id.clone());
                }
                keep
            });
            sh.store(Arc::new(next));
        }
        gone
    }

    /// True when no worker is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Validate and apply a batch atomically: all snapshots or none.
    ///
    /// `now_mono_ms` is the server's monotonic receive time (freshness is
    /// measured on it); `now_wall_ms` (Unix ms) only bounds reporter clock skew.
    ///
    /// # Errors
    /// [`IngestError::Batch`] for an empty or oversized batch,
    /// [`IngestError::Invalid`] listing every field violation, duplicate id,
    /// stale (`<=` last accepted) or future (beyond `max_clock_skew_ms`)
    /// timestamp, [`IngestError::TooManyWorkers`] past `max_workers`.
    pub fn ingest(
        &self,
        batch: &[Snapshot],
        now_mono_ms: u64,
        now_wall_ms: u64,
        icfg: &IngestConfig<'_>,
    ) -> Result<IngestOutcome, IngestError> {
        let tcfg = icfg.telemetry;
        if batch.is_empty() {
            return Err(IngestError::Batch(
                "`snapshots` must hold at least one snapshot".into(),
            ));
        }
        if batch.len() > icfg.max_batch {
            return Err(IngestError::Batch(format!(
                "`snapshots` holds {} snapshots, at most {} are allowed per batch",
                batch.len(),
                icfg.max_batch
            )));
        }
        // A poisoned lock only means a previous writer panicked; the data it
        // guards is `()`, and views are replaced atomically, so continue.
        let _writer = self.ingest.lock().unwrap_or_else(|e| e.into_inner());

        let mut errors = Vec::new();
        let mut warnings = Vec::new();
        let mut clamped = Vec::with_capacity(batch.len());
        let mut seen: HashSet<&str> = HashSet::with_capacity(batch.len());
        let max_ts = now_wall_ms.saturating_add(tcfg.max_clock_skew_ms);
        for (i, s) in batch.iter().enumerate() {
            let checked = check_snapshot(i, s);
            errors.extend(checked.errors);
            clamped.push(checked.cpu_clamped);
            if checked.cpu_clamped {
                warnings.push(Warning {
                    index: i,
                    field: "cpu_usage",
                    reason: format!("cpu_usage {} was clamped to 1", s.cpu_usage),
                });
            }
            let mut err = |field, code, reason| {
                errors.push(FieldError {
                    index: i,
                    worker_id: display_id(&s.worker_id),
                    field,
                    reason,
                    code,
                })
            };
            if !seen.insert(s.worker_id.as_str()) {
                err(
                    "worker_id",
                    "duplicate_worker",
                    format!(
                        "worker_id `{}` appears more than once in the batch",
                        display_id(&s.worker_id)
                    ),
                );
            }
            if s.timestamp_ms > max_ts {
                err(
                    "timestamp_ms",
                    "future_timestamp",
                    format!(
                        "timestamp_ms {} is {} ms ahead of the server clock (at most {} ms allowed)",
                        s.timestamp_ms,
                        s.timestamp_ms - now_wall_ms,
                        tcfg.max_clock_skew_ms
                    ),
                );
            }
            if let Some(slot) = self.get(&s.worker_id) {
                let last = slot.view().last_timestamp_ms;
                if s.timestamp_ms <= last {
                    err(
                        "timestamp_ms",
                        "stale_timestamp",
                        format!(
                            "timestamp_ms {} is not after the last accepted report's {last}",
                            s.timestamp_ms
                        ),
                    );
                }
            }
        }
        if !errors.is_empty() {
            return Err(IngestError::Invalid(errors));
        }
        let new = batch
            .iter()
            .filter(|s| self.get(&s.worker_id).is_none())
            .count();
        if new > 0 && self.len() + new > tcfg.max_workers {
            // Make room from workers silent for longer than forget_after_ms first.
            self.forget_locked(now_mono_ms, tcfg.forget_after_ms);
            if self.len() + new > tcfg.max_workers {
                return Err(IngestError::TooManyWorkers {
                    limit: tcfg.max_workers,
                    new,
                });
            }
        }

        // Everything is valid: apply. New workers go into one copy per touched shard.
        let mut new_shards: HashMap<usize, Shard> = HashMap::new();
        let mut new_worker_ids = Vec::new();
        let mut transitions = Vec::new();
        let mut evaluate = |mut view: WorkerView| {
            let score = (icfg.rule_score)(&view);
            if let Some(t) = view.penalty.evaluate(score, now_mono_ms, icfg.penalty) {
                transitions.push((view.worker_id.clone(), t));
            }
            view.derived = icfg.derive.map(|derive| derive(&view));
            view
        };
        for (s, &was_clamped) in batch.iter().zip(&clamped) {
            let cpu = s.cpu_usage.min(1.0);
            let sample = Sample {
                receive_ms: now_mono_ms,
                rtt_ms_p99: s.rtt_ms_p99,
                error_rate: s.error_rate,
                cache_hit_rate: s.cache_hit_rate,
            };
            match self.get(&s.worker_id) {
                Some(slot) => {
                    let mut hist = slot.history.lock().unwrap_or_else(|e| e.into_inner());
                    hist.push(sample);
                    let prev = slot.view();
                    let view =
                        next_view(Some(&prev), s, cpu, was_clamped, &hist, now_mono_ms, tcfg);
                    if view.revived_ms == Some(now_mono_ms) {
                        slot.evidence.on_revival(now_mono_ms);
                    }
                    slot.view.store(Arc::new(evaluate(view)));
                    slot.evidence.on_snapshot(s.queue_depth, now_mono_ms);
                }
                None => {
                    let mut hist = History::default();
                    hist.push(sample);
                    let view = next_view(None, s, cpu, was_clamped, &hist, now_mono_ms, tcfg);
                    let slot = WorkerSlot {
                        view: ArcSwap::from_pointee(evaluate(view)),
                        history: Mutex::new(hist),
                        evidence: LocalEvidence::default(),
                        last_final_bits: AtomicU64::new(f64::NAN.to_bits()),
                    };
                    slot.evidence.on_snapshot(s.queue_depth, now_mono_ms);
                    let i = shard_of(&s.worker_id);
                    let id: Arc<str> = Arc::from(s.worker_id.as_str());
                    if new_worker_ids.len() < NEW_WORKER_IDS_MAX {
                        new_worker_ids.push(id.clone());
                    }
                    new_shards
                        .entry(i)
                        .or_insert_with(|| (*self.shards[i].load_full()).clone())
                        .insert(id, Arc::new(slot));
                }
            }
        }
        for (i, shard) in new_shards {
            self.shards[i].store(Arc::new(shard));
        }
        Ok(IngestOutcome {
            accepted: batch.len(),
            registered: new,
            new_worker_ids,
            warnings,
            transitions,
        })
    }
}

fn next_view(
    prev: Option<&WorkerView>,
    s: &Snapshot,
    cpu: f64,
    cpu_clamped: bool,
    hist: &History,
    now_mono_ms: u64,
    tcfg: &TelemetryConfig,
) -> WorkerView {
    WorkerView {
        worker_id: prev.map_or_else(|| Arc::from(s.worker_id.as_str()), |p| p.worker_id.clone()),
        first_seen_ms: prev.map_or(now_mono_ms, |p| p.first_seen_ms),
        revived_ms: match prev {
            Some(p) if p.age_ms(now_mono_ms) > tcfg.dead_after_ms => Some(now_mono_ms),
            Some(p) => p.revived_ms,
            None => None,
        },
        last_receive_ms: now_mono_ms,
        last_timestamp_ms: s.timestamp_ms,
        reports: prev.map_or(1, |p| p.reports + 1),
        smoothed: Smoothed::update(prev.map(|p| &p.smoothed), s, cpu, tcfg.ewma_alpha),
        compacting: s.compacting,
        under_repair: s.under_repair,
        version_lag: s.version_lag,
        region: s.region.as_deref().map(Arc::from),
        capacity: s.capacity.unwrap_or(1.0),
        cpu_clamped,
        history: hist.stats(),
        penalty: prev.map_or_else(PenaltyTracker::new, |p| p.penalty.clone()),
        digest: WorkerView::next_digest(prev, s, now_mono_ms),
        derived: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WALL: u64 = 1_700_000_000_000;
    const MAX_BATCH: usize = 10_000;

    fn snap(id: &str, ts: u64, cpu: f64) -> Snapshot {
        let mut s = Snapshot::new(id, ts);
        s.cpu_usage = cpu;
        s.rtt_ms_avg = 1.0;
        s.rtt_ms_p99 = 5.0;
        s
    }

    fn with_cfg(
        r: &Registry,
        b: &[Snapshot],
        mono: u64,
        tcfg: &TelemetryConfig,
        max_batch: usize,
    ) -> Result<IngestOutcome, IngestError> {
        let icfg = IngestConfig {
            telemetry: tcfg,
            max_batch,
            penalty: &PenaltyConfig::default(),
            rule_score: &|_| 100.0,
            derive: None,
        };
        r.ingest(b, mono, WALL, &icfg)
    }

    fn ingest(r: &Registry, b: &[Snapshot], mono: u64) -> Result<IngestOutcome, IngestError> {
        with_cfg(r, b, mono, &TelemetryConfig::default(), MAX_BATCH)
    }

    #[test]
    fn accepted_batch_registers_and_smooths() {
        let r = Registry::new();
        ingest(&r, &[snap("a", WALL, 0.4)], 100).unwrap();
        ingest(&r, &[snap("a", WALL + 1, 0.8)], 200).unwrap();
        let v = r.get("a").unwrap().view().clone();
        assert!((v.smoothed.cpu_usage - 0.6).abs() < 1e-12);
        assert_eq!(
            (v.first_seen_ms, v.last_receive_ms, v.reports),
            (100, 200, 2)
        );
        assert_eq!(v.history.samples, 2);
    }

    #[test]
    fn new_workers_are_named_up_to_the_bound() {
        let r = Registry::new();
        ingest(&r, &[snap("old", WALL, 0.1)], 1).unwrap();
        let mut batch = vec![snap("old", WALL + 1, 0.1)];
        batch.extend((0..20).map(|i| snap(&format!("w{i:02}"), WALL, 0.1)));
        let out = ingest(&r, &batch, 2).unwrap();
        let names: Vec<String> = out.new_worker_ids.iter().map(|id| id.to_string()).collect();
        let want: Vec<String> = (0..NEW_WORKER_IDS_MAX)
            .map(|i| format!("w{i:02}"))
            .collect();
        assert_eq!((out.registered, names), (20, want));
    }

    #[test]
    fn one_bad_snapshot_rejects_the_whole_batch() {
        let r = Registry::new();
        let mut bad = snap("b", WALL, 0.5);
        bad.error_rate = 2.0;
        let err = ingest(&r, &[snap("a", WALL, 0.5), bad], 10).unwrap_err();
        match err {
            IngestError::Invalid(d) => {
                assert_eq!(d.len(), 1);
                assert_eq!((d[0].index, d[0].field), (1, "error_rate"));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(r.is_empty(), "nothing may be applied from a rejected batch");
    }

    #[test]
    fn stale_and_equal_timestamps_are_rejected_and_not_applied() {
        let r = Registry::new();
        ingest(&r, &[snap("a", WALL, 0.5)], 10).unwrap();
        for ts in [WALL, WALL - 1] {
            let err = ingest(&r, &[snap("a", ts, 0.9)], 20).unwrap_err();
            assert!(matches!(&err, IngestError::Invalid(d) if d[0].code == "stale_timestamp"));
        }
        assert_eq!(r.get("a").unwrap().view().smoothed.cpu_usage, 0.5);
    }

    #[test]
    fn future_timestamp_beyond_skew_is_rejected() {
        let r = Registry::new();
        let ok = ingest(&r, &[snap("a", WALL + 5_000, 0.5)], 10);
        assert!(ok.is_ok());
        let err = ingest(&r, &[snap("b", WALL + 5_001, 0.5)], 10).unwrap_err();
        assert!(matches!(&err, IngestError::Invalid(d) if d[0].code == "future_timestamp"));
    }

    #[test]
    fn duplicate_worker_in_batch_is_rejected() {
        let r = Registry::new();
        let err = ingest(&r, &[snap("a", WALL, 0.5), snap("a", WALL + 1, 0.5)], 10).unwrap_err();
        assert!(
            matches!(&err, IngestError::Invalid(d) if d[0].code == "duplicate_worker" && d[0].index == 1)
        );
        assert!(r.is_empty());
    }

    #[test]
    fn worker_limit_rejects_new_ids() {
        let r = Registry::new();
        let tcfg = TelemetryConfig {
            max_workers: 1,
            ..TelemetryConfig::default()
        };
        with_cfg(&r, &[snap("a", WALL, 0.5)], 1, &tcfg, MAX_BATCH).unwrap();
        let err = with_cfg(&r, &[snap("b", WALL, 0.5)], 2, &tcfg, MAX_BATCH).unwrap_err();
        assert_eq!(err, IngestError::TooManyWorkers { limit: 1, new: 1 });
        // An existing worker still reports.
        assert!(with_cfg(&r, &[snap("a", WALL + 1, 0.5)], 3, &tcfg, MAX_BATCH).is_ok());
    }

    #[test]
    fn silent_workers_are_forgotten_and_make_room() {
        let r = Registry::new();
        let tcfg = TelemetryConfig {
            max_workers: 2,
            forget_after_ms: 1_000,
            ..TelemetryConfig::default()
        };
        with_cfg(
            &r,
            &[snap("a", WALL, 0.5), snap("b", WALL, 0.5)],
            0,
            &tcfg,
            MAX_BATCH,
        )
        .unwrap();
        with_cfg(&r, &[snap("b", WALL + 1, 0.5)], 900, &tcfg, MAX_BATCH).unwrap();
        // `a` has been silent 1001 ms: registering `c` forgets it.
        with_cfg(&r, &[snap("c", WALL + 2, 0.5)], 1_001, &tcfg, MAX_BATCH).unwrap();
        assert!(r.get("a").is_none() && r.get("b").is_some() && r.get("c").is_some());
        assert_eq!(r.forget_silent(2_000, 1_000), vec![Arc::<str>::from("b")]);
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn clamped_cpu_is_flagged() {
        let r = Registry::new();
        let out = ingest(&r, &[snap("a", WALL, 2.5)], 10).unwrap();
        assert_eq!(out.warnings.len(), 1);
        let v = r.get("a").unwrap().view().clone();
        assert!(v.cpu_clamped);
        assert_eq!(v.smoothed.cpu_usage, 1.0);
    }

    #[test]
    fn empty_and_oversized_batches_are_rejected() {
        let r = Registry::new();
        assert!(matches!(ingest(&r, &[], 1), Err(IngestError::Batch(_))));
        let err = with_cfg(
            &r,
            &[snap("a", WALL, 0.5), snap("b", WALL, 0.5)],
            1,
            &TelemetryConfig::default(),
            1,
        );
        assert!(matches!(err, Err(IngestError::Batch(_))));
    }
}
