//! Operator overrides of single workers, as load balancers' runtime APIs
//! have them: HAProxy's `set server <b>/<s> state drain|maint` and `set
//! weight`, Envoy's drain and health-status overrides.
//!
//! - `drain`: no new picks; picks in flight finish and their outcomes count.
//!   A drained worker stays a last resort of panic mode, as a server in
//!   HAProxy's drain state still serves when nothing else can.
//! - `disable`: no picks at all, not even in panic mode (HAProxy's `maint`).
//! - `weight`: a fixed operator weight `w` in
//!   `[MIN_OVERRIDE_WEIGHT, MAX_OVERRIDE_WEIGHT]`: the routing cost is
//!   multiplied by `1 / w`, the final score by `w` (capped at 100) and the
//!   selection weight by `w`, so that every policy sends more to `w > 1`.
//!
//! Each override names why and who set it, and may expire after a time to
//! live. Overrides are held in memory beside the configuration: a reload
//! keeps them, a restart forgets them (as HAProxy's runtime API does
//! without a server-state file). The table is swapped whole, so a decision
//! reads it with one atomic load and never waits on an operator.

use std::collections::BTreeMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};

/// Overrides by worker id, as the engine holds them.
pub type OverrideMap = BTreeMap<Arc<str>, Override>;

/// Smallest operator weight.
pub const MIN_OVERRIDE_WEIGHT: f64 = 0.01;
/// Largest operator weight.
pub const MAX_OVERRIDE_WEIGHT: f64 = 100.0;
/// Longest time to live of an override, ms (7 days).
pub const MAX_OVERRIDE_TTL_MS: u64 = 7 * 24 * 3_600_000;
/// Longest reason or `set_by`, bytes.
pub const MAX_OVERRIDE_TEXT_BYTES: usize = 256;
/// Most overrides in force at once.
pub const MAX_OVERRIDES: usize = 10_000;

/// What an override does to its worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OverrideKind {
    /// No new picks; a last resort in panic mode.
    Drain,
    /// No picks at all.
    Disable,
    /// A fixed operator weight on cost, score and selection weight.
    Weight,
}

impl OverrideKind {
    /// The name in the API, the explanation and the candidate's reason.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Drain => "drain",
            Self::Disable => "disable",
            Self::Weight => "weight",
        }
    }
}

/// The body of `PUT /v1/admin/workers/{worker_id}/override`.
#[derive(Debug, Clone, PartialEq, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OverrideRequest {
    /// `drain`, `disable` or `weight`.
    pub kind: OverrideKind,
    /// The operator weight, 0.01..=100: required with `weight`, refused
    /// with the other kinds.
    #[serde(default)]
    pub weight: Option<f64>,
    /// Expire after this long, ms, 1..=604800000; absent: until cleared.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 604_800_000, format = "uint64")]
    pub ttl_ms: Option<u64>,
    /// Why, up to 256 bytes of printable text; shown wherever the override is.
    #[serde(default)]
    #[schema(max_length = 256)]
    pub reason: Option<String>,
}

/// An override in force, as `GET /v1/admin/overrides`, `GET /v1/workers` and
/// the view stream show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerOverride {
    /// The worker.
    pub worker_id: String,
    /// What it does.
    pub kind: OverrideKind,
    /// The operator weight of a `weight` override.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
    /// Why (empty when none was given).
    pub reason: String,
    /// The name of the credential that set it (`anonymous` without one).
    pub set_by: String,
    /// How long ago it was set, ms.
    #[schema(format = "uint64")]
    pub age_ms: u64,
    /// How long until it expires, ms; absent: until cleared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = "uint64")]
    pub remaining_ms: Option<u64>,
}

/// Why an override was refused; nothing changed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OverrideError {
    /// The worker has never reported telemetry, or was forgotten (404).
    #[error(
        "unknown worker `{0}`: it has never reported telemetry, or was forgotten after silence"
    )]
    UnknownWorker(String),
    /// A malformed field (422).
    #[error("{0}")]
    Invalid(String),
    /// [`MAX_OVERRIDES`] are in force (422).
    #[error("{MAX_OVERRIDES} overrides are in force; clear some first")]
    TooMany,
}

/// One override as stored: times are the engine's monotonic ms.
#[derive(Debug, Clone, PartialEq)]
pub struct Override {
    /// What it does.
    pub kind: OverrideKind,
    /// The operator weight (1 unless `kind` is `weight`).
    pub weight: f64,
    /// Why.
    pub reason: Arc<str>,
    /// Who.
    pub set_by: Arc<str>,
    /// When it was set.
    pub set_ms: u64,
    /// When it expires, if it does.
    pub expires_ms: Option<u64>,
}

impl Override {
    /// Whether it is still in force at `now_ms`.
    pub fn in_force(&self, now_ms: u64) -> bool {
        self.expires_ms.is_none_or(|t| now_ms < t)
    }

    /// As the API shows it at `now_ms`.
    pub fn shown(&self, worker_id: &str, now_ms: u64) -> WorkerOverride {
        WorkerOverride {
            worker_id: worker_id.to_owned(),
            kind: self.kind,
            weight: (self.kind == OverrideKind::Weight).then_some(self.weight),
            reason: self.reason.to_string(),
            set_by: self.set_by.to_string(),
            age_ms: now_ms.saturating_sub(self.set_ms),
            remaining_ms: self.expires_ms.map(|t| t.saturating_sub(now_ms)),
        }
    }
}

/// The overrides in force, swapped whole on each change.
#[derive(Debug, Default)]
pub struct OverrideTable {
    by_worker: OverrideMap,
    /// +1 on each change, so a stream can tell that it must resend.
    generation: u64,
}

impl OverrideTable {
    /// `worker_id`'s override in force at `now_ms`.
    pub fn get(&self, worker_id: &str, now_ms: u64) -> Option<&Override> {
        self.by_worker.get(worker_id).filter(|o| o.in_force(now_ms))
    }

    /// Whether no override was ever set (the decision path's fast case).
    pub fn is_empty(&self) -> bool {
        self.by_worker.is_empty()
    }

    /// Every override in force at `now_ms`, by worker id.
    pub fn list(&self, now_ms: u64) -> Vec<WorkerOverride> {
        self.by_worker
            .iter()
            .filter(|(_, o)| o.in_force(now_ms))
            .map(|(id, o)| o.shown(id, now_ms))
            .collect()
    }

    /// The change counter.
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

/// Checks `req` and builds the override it asks for at `now_ms`.
///
/// # Errors
/// [`OverrideError::Invalid`] naming the field.
pub fn checked(
    req: &OverrideRequest,
    set_by: &str,
    now_ms: u64,
) -> Result<Override, OverrideError> {
    let bad = |m: String| Err(OverrideError::Invalid(m));
    let weight = match (req.kind, req.weight) {
        (OverrideKind::Weight, None) => {
            return bad("`weight` is required with kind `weight`".into());
        }
        (OverrideKind::Weight, Some(w))
            if !(MIN_OVERRIDE_WEIGHT..=MAX_OVERRIDE_WEIGHT).contains(&w) =>
        {
            return bad(format!(
                "`weight` must be {MIN_OVERRIDE_WEIGHT}..={MAX_OVERRIDE_WEIGHT}, got {}",
                scorer_core::fmt::exact(w)
            ));
        }
        (OverrideKind::Weight, Some(w)) => w,
        (kind, Some(_)) => {
            return bad(format!(
                "`weight` is only taken with kind `weight`, not `{}`",
                kind.as_str()
            ));
        }
        (_, None) => 1.0,
    };
    if let Some(t) = req.ttl_ms
        && !(1..=MAX_OVERRIDE_TTL_MS).contains(&t)
    {
        return bad(format!(
            "`ttl_ms` must be 1..={MAX_OVERRIDE_TTL_MS}, got {t}"
        ));
    }
    let reason = req.reason.as_deref().unwrap_or("");
    check_text("reason", reason)?;
    check_text("set_by", set_by)?;
    Ok(Override {
        kind: req.kind,
        weight,
        reason: reason.into(),
        set_by: set_by.into(),
        set_ms: now_ms,
        expires_ms: req.ttl_ms.map(|t| now_ms.saturating_add(t)),
    })
}

fn check_text(field: &str, s: &str) -> Result<(), OverrideError> {
    if s.len() > MAX_OVERRIDE_TEXT_BYTES {
        return Err(OverrideError::Invalid(format!(
            "`{field}` must be at most {MAX_OVERRIDE_TEXT_BYTES} bytes, got {}",
            s.len()
        )));
    }
    if s.chars().any(char::is_control) {
        return Err(OverrideError::Invalid(format!(
            "`{field}` must not hold control characters"
        )));
    }
    Ok(())
}

/// The engine's overrides: read lock-free, changed one at a time.
#[derive(Debug, Default)]
pub struct Overrides {
    table: ArcSwap<OverrideTable>,
    write: std::sync::Mutex<()>,
}

impl Overrides {
    /// The table now (one atomic load).
    pub fn load(&self) -> Arc<OverrideTable> {
        self.table.load_full()
    }

    /// Sets `worker_id`'s override to `o`, replacing any; returns the one it replaced.
    ///
    /// # Errors
    /// [`OverrideError::TooMany`] when the table is full and `worker_id` has none.
    pub fn set(&self, worker_id: &str, o: Override) -> Result<Option<Override>, OverrideError> {
        self.change(|m| {
            if m.len() >= MAX_OVERRIDES && !m.contains_key(worker_id) {
                return Err(OverrideError::TooMany);
            }
            Ok(m.insert(worker_id.into(), o))
        })
    }

    /// Clears `worker_id`'s override; returns it.
    pub fn clear(&self, worker_id: &str) -> Option<Override> {
        self.change(|m| Ok(m.remove(worker_id))).unwrap_or(None)
    }

    /// Clears every override; returns them, by worker id.
    pub fn clear_all(&self) -> Vec<(Arc<str>, Override)> {
        self.change(|m| Ok(std::mem::take(m).into_iter().collect()))
            .unwrap_or_default()
    }

    /// Replaces the whole table by `all` (a balancer applying the service's view).
    pub fn replace(&self, all: OverrideMap) {
        let _ = self.change(|m| {
            if *m != all {
                *m = all;
            }
            Ok(())
        });
    }

    /// Drops the overrides expired at `now_ms`; returns them.
    pub fn expire(&self, now_ms: u64) -> Vec<(Arc<str>, Override)> {
        if self
            .table
            .load()
            .by_worker
            .values()
            .all(|o| o.in_force(now_ms))
        {
            return Vec::new();
        }
        self.change(|m| {
            let (gone, kept): (BTreeMap<_, _>, BTreeMap<_, _>) = std::mem::take(m)
                .into_iter()
                .partition(|(_, o)| !o.in_force(now_ms));
            *m = kept;
            Ok(gone.into_iter().collect())
        })
        .unwrap_or_default()
    }

    /// Applies `f` to a copy of the table and swaps it in when it changed.
    fn change<T>(
        &self,
        f: impl FnOnce(&mut OverrideMap) -> Result<T, OverrideError>,
    ) -> Result<T, OverrideError> {
        let _w = self.write.lock().unwrap_or_else(|e| e.into_inner());
        let old = self.table.load_full();
        let mut m = old.by_worker.clone();
        let out = f(&mut m)?;
        if m != old.by_worker {
            self.table.store(Arc::new(OverrideTable {
                by_worker: m,
                generation: old.generation + 1,
            }));
        }
        Ok(out)
    }
}

/// Builds the table a view's overrides describe, at the balancer's `now_ms`.
///
/// # Errors
/// [`OverrideError::Invalid`] for a malformed entry or a worker named twice.
pub fn from_view(all: &[WorkerOverride], now_ms: u64) -> Result<OverrideMap, OverrideError> {
    if all.len() > MAX_OVERRIDES {
        return Err(OverrideError::TooMany);
    }
    let mut m = BTreeMap::new();
    for w in all {
        if !scorer_core::telemetry::validate::is_valid_worker_id(&w.worker_id) {
            return Err(OverrideError::Invalid(
                "an override names an invalid worker id".into(),
            ));
        }
        let req = OverrideRequest {
            kind: w.kind,
            weight: w.weight,
            ttl_ms: w.remaining_ms.map(|t| t.max(1)),
            reason: Some(w.reason.clone()),
        };
        let mut o = checked(&req, &w.set_by, now_ms)?;
        o.set_ms = now_ms.saturating_sub(w.age_ms);
        if m.insert(Arc::from(w.worker_id.as_str()), o).is_some() {
            return Err(OverrideError::Invalid(format!(
                "worker `{}` has two overrides",
                w.worker_id
            )));
        }
    }
    Ok(m)
}
