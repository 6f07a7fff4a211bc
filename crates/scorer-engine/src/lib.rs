//! Decisions as a library: the scoring engine, its state, and the
//! operations the service's HTTP layer, the simulator and (in-process) a
//! router invoke. Time and randomness are passed in; decisions and
//! outcomes go to a [`DecisionSink`] the host provides (the service plugs
//! in `scorer-log`'s Parquet writer). No HTTP server, figment or Parquet
//! writer is linked: `cargo tree -p scorer-engine -e normal | grep -E
//! 'axum|hyper|figment|parquet'` prints nothing.
//!
//! - [`config`]: the configuration, its ranges and hash;
//!   [`config_reload`]: what a hot reload may change;
//! - [`api`]: the request and answer types;
//! - [`view`]: what the service streams to the balancers in the routers.
//!
//! - [`Engine::ingest`] applies telemetry and steps each worker's penalty
//!   state machine.
//! - [`Engine::decide`] (the driver, `decide.rs`) decides a [`DecideCall`]
//!   (the request and its context, checked when the call is built):
//!   scores the candidates, applies dynamics, picks one with the requested
//!   policy, logs the decision when sampled and answers as the call's
//!   [`Output`] asks. The stages are `stages/`; the decision they share,
//!   its call, ids, answer and errors are `decision/`. A compact answer
//!   builds no explanation, takes each worker's request-independent terms
//!   from `worker_terms.rs`, and allocates nothing in the steady state
//!   (its buffers are reused, `scratch.rs`). [`Engine::score`] and
//!   [`Engine::preview`] are the explained decision and its preview.
//! - [`selection_weight`] (in `weight.rs`) is a worker's selection weight,
//!   shared by the score path and `GET /v1/workers`.
//! - [`Engine::feedback`] (in `feedback.rs`) records an outcome: releases
//!   the pick from the worker's outstanding count, learns its latency and
//!   failure, and may eject the worker (outlier detection).
//! - [`overrides`]: operators' drains, disables and weights of single
//!   workers ([`Engine::set_override`]).
//! - [`canary`]: a candidate configuration on a slice of the decisions
//!   ([`Engine::start_canary`]).

pub mod api;
pub mod canary;
mod canary_ops;
#[cfg(test)]
mod compact_tests;
pub mod config;
pub mod config_reload;
mod decide;
mod decision;
mod feedback;
#[cfg(test)]
mod locality_tests;
mod logging;
pub mod no_eligible;
mod override_ops;
pub mod overrides;
mod pending;
mod reconfigure;
pub mod routed_outbox;
pub mod router_records;
mod scratch;
pub mod self_check;
pub mod stages;
pub mod view;
mod weight;
mod worker_terms;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use arc_swap::{ArcSwap, ArcSwapOption};
use serde::Serialize;

pub use canary_ops::CanaryError;
pub use decision::{
    DecideCall, Decided, DecisionIds, MAX_CLIENT_REGION_BYTES, Output, RouterIds, ScoreError,
    ScoreMode, SequenceIds, UuidV7Ids,
};
pub use feedback::{Feedback, FeedbackError, FeedbackOutcome};
pub use no_eligible::NoEligible;
pub use reconfigure::ConfigReloadReport;
pub use scorer_log::SHADOW_ARM;
pub use stages::shadow_record;
pub use stages::{DecisionStage, NoObserver, StageObserver};
pub use weight::{listed_weight, selection_weight};

pub use scorer_log::DecisionSink;

use crate::config::Config;
use scorer_core::key::{SecondSegmentSharding, ShardingStrategy};
use scorer_core::scoring::{RuleInputs, rule_score};
use scorer_core::selection::Selector;
use scorer_core::state::{IngestConfig, IngestError, IngestOutcome, Registry};
use scorer_core::telemetry::Snapshot;

/// Counters exposed by `GET /v1/stats`.
#[derive(Debug, Default)]
pub struct Counters {
    /// Score requests answered.
    pub decisions: AtomicU64,
    /// Decisions made in panic mode (no eligible candidate).
    pub panic_decisions: AtomicU64,
    /// Score requests refused with `no_eligible_workers`.
    pub no_eligible: AtomicU64,
    /// Feedback calls accepted.
    pub feedback: AtomicU64,
    /// Feedback calls whose decision id was not (or no longer) remembered.
    pub feedback_unknown_decision: AtomicU64,
}

/// A point-in-time copy of [`Counters`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct CounterSnapshot {
    /// Score requests answered.
    pub decisions: u64,
    /// Decisions made in panic mode.
    pub panic_decisions: u64,
    /// Score requests refused with `no_eligible_workers`.
    pub no_eligible: u64,
    /// Feedback calls accepted.
    pub feedback: u64,
    /// Feedback calls for unknown decision ids.
    pub feedback_unknown_decision: u64,
}

/// The configuration in force and its hash, swapped together so that a
/// decision row always names the config that scored it.
#[derive(Debug)]
struct ActiveConfig {
    config: Arc<Config>,
    hash: Arc<str>,
}

impl ActiveConfig {
    fn new(config: Config) -> Self {
        Self {
            hash: config.hash().into(),
            config: Arc::new(config),
        }
    }
}

/// Scoring state shared by all requests.
#[derive(Debug)]
pub struct Engine {
    active: ArcSwap<ActiveConfig>,
    registry: Registry,
    sharding: Box<dyn ShardingStrategy>,
    selector: ArcSwap<Selector>,
    pending: pending::PendingPicks,
    /// When the next success-rate analysis is due, monotonic ms (0: not started).
    next_outlier_sweep_ms: AtomicU64,
    counters: Counters,
    log: Option<Arc<dyn DecisionSink>>,
    /// Where decision ids come from ([`Engine::with_ids`]).
    ids: Arc<dyn DecisionIds>,
    models: Arc<scorer_model::ModelHub>,
    /// Serialises hot reloads (each plans against the config it replaces)
    /// and holds the configuration the last applied change replaced, for
    /// [`Engine::previous_config`].
    reload_lock: std::sync::Mutex<Option<Arc<Config>>>,
    /// Operators' drains, disables and weights, kept across reloads.
    overrides: overrides::Overrides,
    /// Whether the scores still predict the outcomes.
    self_check: self_check::SelfCheck,
    /// The configuration canary in force, if any.
    canary: ArcSwapOption<canary::Canary>,
    /// Numbers each canary, so an outcome counts for the canary that made
    /// its pick.
    canary_generation: AtomicU64,
    /// Routers deciding on this pool, this engine's included: 1 for the
    /// service; an embedded balancer's view tells it
    /// ([`Engine::set_routers_sharing`]).
    routers_sharing: AtomicU32,
    /// Which key this engine routed to which worker, allocated at the
    /// first outcome that says hit or miss, with `index_entries` entries.
    locality: std::sync::OnceLock<scorer_core::locality::RoutingIndex>,
    locality_entries: usize,
    /// An embedded balancer's routed keys for its next load report.
    routed_outbox: Option<routed_outbox::RoutedOutbox>,
    /// Each key prefix's hit rate on each worker, allocated with the
    /// routing index ([`scorer_core::locality::prefix::DEFAULT_ENTRIES`]).
    prefix_rates: std::sync::OnceLock<scorer_core::locality::PrefixHitRates>,
}

impl Engine {
    /// An engine with an empty registry and the default sharding strategy.
    /// `config` must have passed [`Config::validate`].
    pub fn new(config: Config) -> Self {
        Self::with_sharding(config, Box::new(SecondSegmentSharding))
    }

    /// An engine using the router's own `sharding`.
    pub fn with_sharding(config: Config, sharding: Box<dyn ShardingStrategy>) -> Self {
        debug_assert!(config.validate().is_ok());
        // A validated config always builds a selector; fall back to defaults otherwise.
        let selector = Selector::new(config.selection.selector_config()).unwrap_or_default();
        let pending = pending::PendingPicks::new(config.selection.remembered_decisions);
        let models = Arc::new(scorer_model::ModelHub::unloaded(
            &config.model,
            Arc::new(scorer_core::clock::SystemClock::new()),
        ));
        let locality_entries = config.locality.index_entries;
        // A replica on the bus shares the keys it routed with its peers.
        let routed_outbox = config
            .bus
            .enabled()
            .then(routed_outbox::RoutedOutbox::default);
        Self {
            locality: std::sync::OnceLock::new(),
            locality_entries,
            routed_outbox,
            prefix_rates: std::sync::OnceLock::new(),
            active: ArcSwap::from_pointee(ActiveConfig::new(config)),
            registry: Registry::new(),
            sharding,
            selector: ArcSwap::from_pointee(selector),
            pending,
            next_outlier_sweep_ms: AtomicU64::new(0),
            counters: Counters::default(),
            log: None,
            ids: Arc::new(UuidV7Ids),
            models,
            reload_lock: std::sync::Mutex::new(None),
            overrides: overrides::Overrides::default(),
            self_check: self_check::SelfCheck::default(),
            canary: ArcSwapOption::empty(),
            canary_generation: AtomicU64::new(0),
            routers_sharing: AtomicU32::new(1),
        }
    }

    /// `routers` decide on this pool, this engine's included (at least 1):
    /// from `selection.many_routers_min` on, a request that names no
    /// policy is decided by `selection.many_routers_policy`.
    pub fn set_routers_sharing(&self, routers: u32) {
        self.routers_sharing
            .store(routers.max(1), Ordering::Relaxed);
    }

    /// The routing index, once an outcome said hit or miss (with
    /// `locality.enabled`).
    pub fn routing_index(&self) -> Option<&scorer_core::locality::RoutingIndex> {
        self.locality.get()
    }

    /// Keep the keys this engine routes (once it has a routing index) for
    /// [`Engine::take_routed`]: an embedded balancer reports them to the
    /// service with its load, and the others learn them.
    pub fn with_routed_outbox(mut self) -> Self {
        self.routed_outbox = Some(routed_outbox::RoutedOutbox::default());
        self
    }

    /// The keys routed since the last call, oldest first, with their ages
    /// at monotonic `now_ms` (none without [`Engine::with_routed_outbox`]).
    pub fn take_routed(&self, now_ms: u64) -> Vec<view::RoutedKey> {
        self.routed_outbox
            .as_ref()
            .map_or_else(Vec::new, |o| o.take(now_ms))
    }

    /// Another router routed the key of hash `key_hash`
    /// ([`scorer_core::locality::hash_str`]) to `worker_id` at monotonic
    /// `at_ms`: the routing index learns it as if this engine had, so that
    /// routers agree where a key is warm. Nothing without a routing index.
    pub fn learn_routing(&self, key_hash: u64, worker_id: &str, at_ms: u64) {
        if let Some(ix) = self.locality.get() {
            let pair = scorer_core::locality::PairHash::new(
                key_hash,
                scorer_core::locality::hash_str(worker_id),
            );
            ix.record(pair, at_ms);
        }
    }

    /// The `(key prefix, worker)` hit rates, once an outcome said hit or
    /// miss (with `locality.enabled`).
    pub fn prefix_hit_rates(&self) -> Option<&scorer_core::locality::PrefixHitRates> {
        self.prefix_rates.get()
    }

    /// Routers deciding on this pool, this engine's included.
    pub fn routers_sharing(&self) -> u32 {
        self.routers_sharing.load(Ordering::Relaxed)
    }

    /// Use `models` in the scoring path (issue #6). Without this call the
    /// engine scores on rules alone and reports `model_missing`.
    pub fn with_models(mut self, models: Arc<scorer_model::ModelHub>) -> Self {
        self.models = models;
        self
    }

    /// The self-check: score and latency distributions, and the rank
    /// correlation of expected against observed latency.
    pub fn self_check(&self) -> &self_check::SelfCheck {
        &self.self_check
    }

    /// The model hub in use.
    pub fn models(&self) -> &Arc<scorer_model::ModelHub> {
        &self.models
    }

    /// Draw decision ids from `ids` (UUID v7 by default).
    pub fn with_ids(mut self, ids: Arc<dyn DecisionIds>) -> Self {
        self.ids = ids;
        self
    }

    /// A new decision id from the engine's source, for a caller that
    /// needs it before deciding ([`DecideCall::with_id`]).
    pub fn next_decision_id(&self) -> String {
        self.ids.next_id()
    }

    /// Attach a decision log: [`Engine::decide`] queues its sampled
    /// decisions and [`Engine::feedback_and_log`] its outcomes.
    pub fn with_log(mut self, log: Arc<dyn DecisionSink>) -> Self {
        self.log = Some(log);
        self
    }

    /// The attached decision log, if any.
    pub fn decision_sink(&self) -> Option<&Arc<dyn DecisionSink>> {
        self.log.as_ref()
    }

    /// Hash of the configuration in force ([`Config::hash`]), written into
    /// every decision row.
    pub fn config_hash(&self) -> Arc<str> {
        self.active.load().hash.clone()
    }

    /// The configuration in force.
    pub fn config(&self) -> Arc<Config> {
        self.active.load().config.clone()
    }

    /// The worker registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Current counter values.
    pub fn counters(&self) -> CounterSnapshot {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CounterSnapshot {
            decisions: get(&c.decisions),
            panic_decisions: get(&c.panic_decisions),
            no_eligible: get(&c.no_eligible),
            feedback: get(&c.feedback),
            feedback_unknown_decision: get(&c.feedback_unknown_decision),
        }
    }

    /// Apply a telemetry batch atomically (see [`Registry::ingest`]) and step
    /// each reporting worker's penalty state machine with its new rule score
    /// (request-independent: no request type, fresh). Transitions are logged
    /// at info level with their reason.
    ///
    /// # Errors
    /// As [`Registry::ingest`].
    pub fn ingest(
        &self,
        batch: &[Snapshot],
        now_mono_ms: u64,
        now_wall_ms: u64,
    ) -> Result<IngestOutcome, IngestError> {
        let active = self.active.load();
        let cfg = &*active.config;
        let inputs = RuleInputs {
            cfg: &cfg.scoring,
            dead_after_ms: cfg.telemetry.dead_after_ms,
            request_type: None,
            now_ms: now_mono_ms,
            warmup: false,
        };
        let score = |v: &scorer_core::state::WorkerView| rule_score(v, &inputs).0.score;
        let derive = |v: &scorer_core::state::WorkerView| {
            worker_terms::WorkerTerms::derived(v, cfg, &active.hash)
        };
        let icfg = IngestConfig {
            telemetry: &cfg.telemetry,
            max_batch: cfg.server.max_batch,
            penalty: &cfg.penalty,
            rule_score: &score,
            derive: Some(&derive),
        };
        let out = self
            .registry
            .ingest(batch, now_mono_ms, now_wall_ms, &icfg)?;
        for (worker, t) in &out.transitions {
            tracing::info!(
                worker = %worker,
                from = t.from.as_str(),
                to = t.to.as_str(),
                reason = %t.reason,
                "penalty state change"
            );
        }
        Ok(out)
    }

    /// Forget workers silent for longer than `telemetry.forget_after_ms` at
    /// monotonic `now_ms` (the binary calls this every second); returns how
    /// many were forgotten. Each is logged at info level. Picks whose
    /// feedback is overdue stop counting as outstanding here too, and
    /// expired overrides are dropped (and logged).
    pub fn forget_silent(&self, now_ms: u64) -> usize {
        self.pending.retire_expired(now_ms);
        self.expire_overrides(now_ms);
        let after = self.config().telemetry.forget_after_ms;
        let gone = self.registry.forget_silent(now_ms, after);
        for id in &gone {
            tracing::info!(worker = %id, forget_after_ms = after, "worker forgotten after silence");
        }
        gone.len()
    }

    /// Whether at least one worker reported within `telemetry.dead_after_ms`.
    pub fn has_live_worker(&self, now_ms: u64) -> bool {
        let dead = self.config().telemetry.dead_after_ms;
        self.registry
            .slots()
            .iter()
            .any(|w| w.view().age_ms(now_ms) <= dead)
    }
}
