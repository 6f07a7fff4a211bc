//! Applying a view: checked whole, then each report newer than what the
//! balancer has is replayed through the engine's ingest path with the
//! receive time the service gave it.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use scorer_core::telemetry::validate::{check_snapshot, is_valid_worker_id};
use scorer_engine::overrides::{OverrideMap, from_view};
use scorer_engine::view::{
    MAX_ROUTED_PER_VIEW, MAX_VIEW_AGE_MS, MAX_VIEW_WORKERS, View, ViewKind, WorkerLoad,
};

use crate::Balancer;
use crate::stats::Counters;

/// What applying a view did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ViewApplied {
    /// Reports replayed.
    pub applied: usize,
    /// Reports not newer than the balancer's (already applied).
    pub skipped: usize,
    /// The view's configuration hash is the balancer's.
    pub config_matches: bool,
}

/// Why a view was refused; nothing of it was applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ViewError {
    /// More workers than [`MAX_VIEW_WORKERS`].
    #[error("the view holds {0} reports, at most {MAX_VIEW_WORKERS} are allowed")]
    TooManyWorkers(usize),
    /// A report breaks the telemetry contract.
    #[error("report {index} (worker `{worker}`): `{field}`: {reason}")]
    InvalidReport {
        /// Position in `workers`.
        index: usize,
        /// Its worker id (truncated).
        worker: String,
        /// The field at fault.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A report's `age_ms` is beyond [`MAX_VIEW_AGE_MS`].
    #[error("report {index}: age_ms {age_ms} is beyond {MAX_VIEW_AGE_MS}")]
    Age {
        /// Position in `workers`.
        index: usize,
        /// The age.
        age_ms: u64,
    },
    /// A full view names a worker twice, or a delta repeats a worker
    /// without a later timestamp.
    #[error("report {index}: worker `{worker}` repeats without a later timestamp_ms")]
    Repeated {
        /// Position in `workers`.
        index: usize,
        /// Its worker id.
        worker: String,
    },
    /// A report is dated beyond the router's clock plus
    /// `telemetry.max_clock_skew_ms`.
    #[error("report {index}: timestamp_ms {timestamp_ms} is ahead of this router's clock")]
    Future {
        /// Position in `workers`.
        index: usize,
        /// Its timestamp.
        timestamp_ms: u64,
    },
    /// `load_age_ms` is beyond [`MAX_VIEW_AGE_MS`].
    #[error("load_age_ms {0} is beyond {MAX_VIEW_AGE_MS}")]
    LoadAge(u64),
    /// A `load` entry names an invalid worker id, or one named before.
    #[error("load entry {index}: worker `{worker}` is not a valid worker id or repeats")]
    BadLoad {
        /// Position in `load`.
        index: usize,
        /// Its worker id (truncated).
        worker: String,
    },
    /// The overrides are malformed or name a worker twice.
    #[error("overrides: {0}")]
    BadOverrides(String),
    /// More than [`MAX_ROUTED_PER_VIEW`] routed keys, or one whose hash,
    /// worker id or age is malformed.
    #[error(
        "routed entry {0}: more than {MAX_ROUTED_PER_VIEW} entries, or a key_hash that is not 16 lowercase hex digits, an invalid worker id or an age beyond {MAX_VIEW_AGE_MS}"
    )]
    BadRouted(usize),
    /// The view would take the balancer past `telemetry.max_workers`.
    #[error("the view brings {new} new workers beyond telemetry.max_workers = {limit}")]
    TooManyNew {
        /// New workers in the view.
        new: usize,
        /// The limit.
        limit: usize,
    },
}

impl Balancer {
    /// Apply `view` at monotonic `now_ms` and Unix `now_wall_ms`: it is
    /// checked whole first, and refused whole (with a warning and
    /// `views_refused`) if any part is malformed. Then each report newer
    /// than the balancer's copy of its worker is replayed through the
    /// engine's ingest, received `age_ms` before `now_ms`; the other
    /// routers' load and the operators' overrides replace the balancer's
    /// when the view carries them, and the view's age restarts at 0.
    ///
    /// # Errors
    /// [`ViewError`]; nothing was applied.
    pub fn apply_view(
        &self,
        view: &View,
        now_ms: u64,
        now_wall_ms: u64,
    ) -> Result<ViewApplied, ViewError> {
        let overrides = match self.check_view(view, now_ms, now_wall_ms) {
            Ok(overrides) => overrides,
            Err(e) => {
                Counters::bump(&self.counters.views_refused);
                tracing::warn!(seq = view.seq, error = %e, "view refused");
                return Err(e);
            }
        };
        let registry = self.engine.registry();
        self.saw(now_ms);
        let (mut applied, mut skipped) = (0, 0);
        for w in &view.workers {
            let s = &w.snapshot;
            let known = registry.get(&s.worker_id);
            if known.is_some_and(|slot| slot.view().last_timestamp_ms >= s.timestamp_ms) {
                skipped += 1;
                continue;
            }
            let received_ms = now_ms.saturating_sub(w.age_ms);
            match self
                .engine
                .ingest(std::slice::from_ref(s), received_ms, now_wall_ms)
            {
                Ok(_) => applied += 1,
                Err(e) => {
                    // Checked above; only a race with another applier lands here.
                    tracing::debug!(worker = %s.worker_id, error = %e, "view report not replayed");
                    skipped += 1;
                }
            }
        }
        if let Some(load) = &view.load {
            let age_ms = view.load_age_ms.unwrap_or(0).min(MAX_VIEW_AGE_MS);
            self.apply_load(load, now_ms.saturating_sub(age_ms));
            if let Some(others) = view.load_routers {
                self.engine.set_routers_sharing(others.saturating_add(1));
            }
        }
        for r in view.routed.iter().flatten() {
            if let Some(hash) = r.hash() {
                let at_ms = now_ms.saturating_sub(r.age_ms.min(MAX_VIEW_AGE_MS));
                self.engine.learn_routing(hash, &r.worker_id, at_ms);
            }
        }
        if let Some(table) = overrides {
            self.engine.replace_overrides(table);
        }
        let c = &self.counters;
        c.reports_applied
            .fetch_add(applied as u64, Ordering::Relaxed);
        c.reports_skipped
            .fetch_add(skipped as u64, Ordering::Relaxed);
        Counters::bump(&c.views_applied);
        let config_matches = *self.engine.config_hash() == *view.config_hash;
        if !config_matches {
            Counters::bump(&c.config_mismatches);
        }
        self.last_view_ms.store(now_ms + 1, Ordering::Release);
        {
            let mut model = self
                .view_model
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if model.as_deref() != view.model_version.as_deref() {
                *model = view.model_version.as_deref().map(std::sync::Arc::from);
            }
        }
        Ok(ViewApplied {
            applied,
            skipped,
            config_matches,
        })
    }

    /// Every known worker's backlog from the other routers, as it was at
    /// `at_ms`: what `load` names, 0 for the rest.
    fn apply_load(&self, load: &[WorkerLoad], at_ms: u64) {
        let others: HashMap<&str, u32> = load
            .iter()
            .map(|l| (l.worker_id.as_str(), l.outstanding))
            .collect();
        for slot in self.engine.registry().slots() {
            let n = others.get(&*slot.view().worker_id).copied().unwrap_or(0);
            slot.evidence().on_others(n, at_ms);
        }
    }

    /// Checks `view` whole; the overrides it carries come back built, to be
    /// installed once the rest is applied.
    fn check_view(
        &self,
        view: &View,
        now_ms: u64,
        now_wall_ms: u64,
    ) -> Result<Option<OverrideMap>, ViewError> {
        if view.workers.len() > MAX_VIEW_WORKERS {
            return Err(ViewError::TooManyWorkers(view.workers.len()));
        }
        let overrides = view
            .overrides
            .as_deref()
            .map(|o| from_view(o, now_ms))
            .transpose()
            .map_err(|e| ViewError::BadOverrides(e.to_string()))?;
        if let Some(age_ms) = view.load_age_ms
            && age_ms > MAX_VIEW_AGE_MS
        {
            return Err(ViewError::LoadAge(age_ms));
        }
        if let Some(routed) = &view.routed {
            if routed.len() > MAX_ROUTED_PER_VIEW {
                return Err(ViewError::BadRouted(MAX_ROUTED_PER_VIEW));
            }
            let bad = |r: &scorer_engine::view::RoutedKey| {
                r.hash().is_none()
                    || !is_valid_worker_id(&r.worker_id)
                    || r.age_ms > MAX_VIEW_AGE_MS
            };
            if let Some(index) = routed.iter().position(bad) {
                return Err(ViewError::BadRouted(index));
            }
        }
        if let Some(load) = &view.load {
            if load.len() > MAX_VIEW_WORKERS {
                return Err(ViewError::TooManyWorkers(load.len()));
            }
            let mut seen = std::collections::HashSet::with_capacity(load.len());
            for (index, l) in load.iter().enumerate() {
                if !is_valid_worker_id(&l.worker_id) || !seen.insert(l.worker_id.as_str()) {
                    let worker = l.worker_id.chars().take(128).collect();
                    return Err(ViewError::BadLoad { index, worker });
                }
            }
        }
        let cfg = self.engine.config();
        let latest_ms = now_wall_ms.saturating_add(cfg.telemetry.max_clock_skew_ms);
        let mut last_ts: HashMap<&str, u64> = HashMap::with_capacity(view.workers.len());
        for (index, w) in view.workers.iter().enumerate() {
            let s = &w.snapshot;
            if let Some(e) = check_snapshot(index, s).errors.into_iter().next() {
                return Err(ViewError::InvalidReport {
                    index,
                    worker: e.worker_id,
                    field: e.field,
                    reason: e.reason,
                });
            }
            if w.age_ms > MAX_VIEW_AGE_MS {
                let age_ms = w.age_ms;
                return Err(ViewError::Age { index, age_ms });
            }
            if s.timestamp_ms > latest_ms {
                let timestamp_ms = s.timestamp_ms;
                return Err(ViewError::Future {
                    index,
                    timestamp_ms,
                });
            }
            let prev = last_ts.insert(&s.worker_id, s.timestamp_ms);
            let repeated = match (view.kind, prev) {
                (_, None) => false,
                (ViewKind::Full, Some(_)) => true,
                (ViewKind::Delta, Some(t)) => t >= s.timestamp_ms,
            };
            if repeated {
                let worker = s.worker_id.clone();
                return Err(ViewError::Repeated { index, worker });
            }
        }
        let registry = self.engine.registry();
        let new = last_ts
            .keys()
            .filter(|id| registry.get(id).is_none())
            .count();
        let limit = cfg.telemetry.max_workers;
        if new > 0 && registry.len() + new > limit {
            return Err(ViewError::TooManyNew { new, limit });
        }
        Ok(overrides)
    }
}
