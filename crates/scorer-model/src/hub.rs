//! The models a running service holds, swapped atomically on reload
//! (issue #6): the primary (`[model] dir`), an optional A/B arm
//! (`[model.ab]`) and an optional shadow (`[model.shadow]`).
//!
//! Readers take an `Arc<ModelSet>` snapshot per request through `ArcSwap`
//! (lock-free), so a request started before a reload finishes on the models
//! it started with. Loading never fails the service: a refused model becomes
//! a [`Slot::Refused`] with its reason, and decisions fall back to the rules.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use serde::Serialize;

use super::breaker::BreakerState;
use super::config::ModelConfig;
use super::fallback::FallbackReason;
use super::loaded::{LoadedModel, load_model_dir};
use super::shadow::ShadowStats;
use super::stats::ModelStats;
use scorer_core::clock::Clock;

/// One configured model directory: loaded, or refused with the reason.
#[derive(Debug, Clone)]
pub enum Slot {
    /// Vetted and ready.
    Ready(Arc<LoadedModel>),
    /// Refused at load.
    Refused {
        /// The directory.
        dir: PathBuf,
        /// What decisions report while it stands.
        reason: FallbackReason,
        /// The load error, for `GET /v1/model` and the log.
        message: String,
    },
}

impl Slot {
    fn load(dir: &Path, cfg: &ModelConfig, now_wall_ms: u64) -> Slot {
        match load_model_dir(dir, cfg, now_wall_ms) {
            Ok(m) => {
                tracing::info!(dir = ?dir, version = ?m.card.model_version,
                    golden_rows = m.golden_rows, golden_max_abs_diff = m.golden_max_abs_diff,
                    "model loaded");
                Slot::Ready(Arc::new(m))
            }
            Err(e) => Slot::Refused {
                dir: dir.to_path_buf(),
                reason: e.fallback_reason(),
                message: e.to_string(),
            },
        }
    }

    /// The loaded model, if any.
    pub fn model(&self) -> Option<&Arc<LoadedModel>> {
        match self {
            Slot::Ready(m) => Some(m),
            Slot::Refused { .. } => None,
        }
    }
}

/// The models in use at one instant.
#[derive(Debug)]
pub struct ModelSet {
    /// The `[model]` config they were loaded with.
    pub cfg: ModelConfig,
    /// Arm A (or the only model).
    pub primary: Slot,
    /// Arm B, when `[model.ab] dir` is set.
    pub ab: Option<Slot>,
    /// The shadow, when `[model.shadow] dir` is set.
    pub shadow: Option<Slot>,
    /// Increments on every applied reload (0 at start-up).
    pub generation: u64,
}

impl ModelSet {
    /// Each configured slot with its role: `primary`, `ab`, `shadow`.
    fn slots(&self) -> Vec<(&'static str, &Slot)> {
        let mut out = vec![("primary", &self.primary)];
        out.extend(self.ab.iter().map(|s| ("ab", s)));
        out.extend(self.shadow.iter().map(|s| ("shadow", s)));
        out
    }
}

/// Result of a reload.
#[derive(Debug, Clone, Serialize)]
pub struct ReloadReport {
    /// Whether the new set was applied.
    pub applied: bool,
    /// Generation now in use.
    pub generation: u64,
    /// Why it was not applied (the first refused model), if it was not.
    pub error: Option<String>,
}

/// A successful inference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timed {
    /// Inference wall time, ns.
    pub elapsed_ns: u64,
}

/// Models plus their since-start counters.
pub struct ModelHub {
    set: ArcSwap<ModelSet>,
    stats: ModelStats,
    shadow: ShadowStats,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for ModelHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelHub")
            .field("set", &self.set)
            .finish_non_exhaustive()
    }
}

impl ModelHub {
    /// Loads every configured model (never fails; see [`Slot`]).
    /// `clock` times inferences (`monotonic_ns`) and stamps loads (`wall_ms`).
    pub fn load(cfg: &ModelConfig, clock: Arc<dyn Clock>) -> Self {
        let set = Self::build(cfg, clock.as_ref(), 0);
        for (role, slot) in set.slots() {
            if let Slot::Refused {
                dir,
                reason,
                message,
            } = slot
                && *reason != FallbackReason::Disabled
            {
                let consequence = match role {
                    "primary" => "scoring on rules alone",
                    "ab" => "arm B's keys score on rules alone",
                    _ => "no shadow scores are computed",
                };
                tracing::warn!(dir = ?dir, role, error = %message, "model refused; {consequence}");
            }
        }
        Self::with_set(set, clock)
    }

    /// A hub with no model (decisions report `model_missing`), for engines
    /// built without one (tests, the simulator's rule-only arms).
    pub fn unloaded(cfg: &ModelConfig, clock: Arc<dyn Clock>) -> Self {
        let set = ModelSet {
            primary: Slot::Refused {
                dir: cfg.dir.clone(),
                reason: FallbackReason::ModelMissing,
                message: "no model loaded".to_owned(),
            },
            ab: None,
            shadow: None,
            cfg: cfg.clone(),
            generation: 0,
        };
        Self::with_set(set, clock)
    }

    fn with_set(set: ModelSet, clock: Arc<dyn Clock>) -> Self {
        Self {
            set: ArcSwap::from_pointee(set),
            stats: ModelStats::default(),
            shadow: ShadowStats::default(),
            clock,
        }
    }

    fn build(cfg: &ModelConfig, clock: &dyn Clock, generation: u64) -> ModelSet {
        let now = clock.wall_ms();
        let load = |dir: &Path| Slot::load(dir, cfg, now);
        let disabled = || Slot::Refused {
            dir: cfg.dir.clone(),
            reason: FallbackReason::Disabled,
            message: "[model] enabled = false".to_owned(),
        };
        ModelSet {
            primary: if cfg.enabled {
                load(&cfg.dir)
            } else {
                disabled()
            },
            ab: cfg.ab.dir.as_deref().filter(|_| cfg.enabled).map(load),
            shadow: cfg.shadow.dir.as_deref().filter(|_| cfg.enabled).map(load),
            cfg: cfg.clone(),
            generation,
        }
    }

    /// Loads `cfg`'s models and swaps them in atomically, unless a model that
    /// is configured and enabled is refused: then the current set stays and
    /// the report says why. Requests in flight finish on the old set.
    pub fn reload(&self, cfg: &ModelConfig) -> ReloadReport {
        // Concurrent reloads race; the last swap wins (both are vetted sets).
        let current = self.set.load().generation;
        let next_gen = current + 1;
        let set = Self::build(cfg, self.clock.as_ref(), next_gen);
        let refused = set.slots().into_iter().find_map(|(role, s)| match s {
            Slot::Refused {
                dir,
                reason,
                message,
            } if *reason != FallbackReason::Disabled => Some((role, dir.clone(), message.clone())),
            _ => None,
        });
        if let Some((role, dir, error)) = refused {
            tracing::warn!(dir = ?dir, role, %error, "model reload refused; keeping the current models");
            return ReloadReport {
                applied: false,
                generation: current,
                error: Some(error),
            };
        }
        self.set.store(Arc::new(set));
        tracing::info!(generation = next_gen, "models reloaded");
        ReloadReport {
            applied: true,
            generation: next_gen,
            error: None,
        }
    }

    /// The models in use now.
    pub fn current(&self) -> Arc<ModelSet> {
        self.set.load_full()
    }

    /// Since-start counters.
    pub fn stats(&self) -> &ModelStats {
        &self.stats
    }

    /// Since-start shadow comparison.
    pub fn shadow_stats(&self) -> &ShadowStats {
        &self.shadow
    }

    /// Runs `model` on `n` rows under `budget_us`, writing probabilities into
    /// `out`. Consults and updates the model's breaker at monotonic
    /// `now_ms`, records the latency, and checks every output is finite.
    ///
    /// # Errors
    /// The [`FallbackReason`] when the output must not be used:
    /// `BreakerOpen`, `ModelError`, `BudgetExceeded`, `NonFiniteOutput`.
    pub fn infer(
        &self,
        model: &LoadedModel,
        rows: &[f32],
        n: usize,
        budget_us: u64,
        now_ms: u64,
        out: &mut Vec<f32>,
    ) -> Result<Timed, FallbackReason> {
        self.infer_with(model, rows, n, budget_us, now_ms, out, true)
    }

    /// [`ModelHub::infer`] for a preview: the same checks and fallbacks, but
    /// the breaker is only consulted, never updated, and no latency is
    /// recorded, so previews never change what later decisions see.
    ///
    /// # Errors
    /// As [`ModelHub::infer`].
    pub fn infer_preview(
        &self,
        model: &LoadedModel,
        rows: &[f32],
        n: usize,
        budget_us: u64,
        now_ms: u64,
        out: &mut Vec<f32>,
    ) -> Result<Timed, FallbackReason> {
        self.infer_with(model, rows, n, budget_us, now_ms, out, false)
    }

    #[allow(clippy::too_many_arguments)]
    fn infer_with(
        &self,
        model: &LoadedModel,
        rows: &[f32],
        n: usize,
        budget_us: u64,
        now_ms: u64,
        out: &mut Vec<f32>,
        record: bool,
    ) -> Result<Timed, FallbackReason> {
        if model.breaker.state(now_ms) == BreakerState::Open {
            return Err(FallbackReason::BreakerOpen);
        }
        if let Err(e) = model.runner.warm() {
            tracing::warn!(error = %e, version = %model.card.model_version, "model state creation failed");
            return Err(FallbackReason::ModelError);
        }
        let t0 = self.clock.monotonic_ns();
        super::warmth::before_inference(t0);
        let res = model.runner.predict(rows, n, out);
        let t1 = self.clock.monotonic_ns();
        super::warmth::after_inference(t1);
        let elapsed_ns = t1.saturating_sub(t0);
        if record {
            self.stats.record_latency_ns(elapsed_ns);
        }
        if let Err(e) = res {
            tracing::warn!(error = %e, version = %model.card.model_version, "model inference failed");
            return Err(FallbackReason::ModelError);
        }
        // A budget of 0 µs rejects every output (documented for testing the fallback).
        if budget_us == 0 || elapsed_ns > budget_us.saturating_mul(1_000) {
            if record && model.breaker.on_miss(now_ms) {
                tracing::warn!(version = %model.card.model_version, "model breaker opened after budget misses");
            }
            return Err(FallbackReason::BudgetExceeded);
        }
        if record {
            model.breaker.on_success();
        }
        if out.iter().any(|p| !p.is_finite()) {
            return Err(FallbackReason::NonFiniteOutput);
        }
        Ok(Timed { elapsed_ns })
    }
}
