//! The balancer: picks from local state with the service's own engine, and
//! outcomes that update the router's evidence at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rand::{Rng, RngCore};
use scorer_engine::api::ScoreRequest;
use scorer_engine::config::Config;
use scorer_engine::view::WorkerLoad;
use scorer_engine::{
    DecideCall, Engine, Feedback, FeedbackError, FeedbackOutcome, NoObserver, Output, RouterIds,
    ScoreError,
};

use crate::records::RecordBuffer;
use crate::stats::{BalancerStats, Counters};

/// Default [`BalancerConfig::view_ttl_ms`], ms: ten of the view's 1 s full
/// refreshes (gRFC A58's `weighted_round_robin` has a 10 s
/// `blackout_period` by default, and drops weights after a 3 min
/// `weight_expiration_period`).
pub const DEFAULT_VIEW_TTL_MS: u64 = 10_000;

/// How often a router reports its outstanding picks to the service, and
/// the service streams the others' load, ms.
pub const DEFAULT_LOAD_REPORT_MS: u64 = scorer_engine::view::LOAD_INTERVAL_MS;

/// Longest router id, bytes (it prefixes every decision id).
pub const MAX_ROUTER_ID_BYTES: usize = 32;

/// How a balancer runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BalancerConfig {
    /// This router's id, 1..=[`MAX_ROUTER_ID_BYTES`] bytes of ASCII
    /// letters, digits, `-`, `_` and `.`; it prefixes every decision id and
    /// tags the router's decisions in the service's log.
    pub router_id: String,
    /// After this long without a view, ms, picks rest on local evidence
    /// alone. Default [`DEFAULT_VIEW_TTL_MS`]; at least 1.
    pub view_ttl_ms: u64,
    /// Sequence number of the first decision id (`<router_id>-<16 hex
    /// digits>` counts up from it). Random by default, so that a router
    /// restarted under the same id does not reuse ids in the log.
    pub first_decision_seq: u64,
}

impl BalancerConfig {
    /// The defaults for router `router_id`.
    pub fn new(router_id: impl Into<String>) -> Self {
        Self {
            router_id: router_id.into(),
            view_ttl_ms: DEFAULT_VIEW_TTL_MS,
            first_decision_seq: rand::random(),
        }
    }

    fn validate(&self) -> Result<(), BalancerConfigError> {
        if !scorer_engine::view::is_valid_router_id(&self.router_id) {
            return Err(BalancerConfigError::RouterId(self.router_id.clone()));
        }
        if self.view_ttl_ms == 0 {
            return Err(BalancerConfigError::ViewTtl);
        }
        Ok(())
    }
}

/// Why a balancer could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BalancerConfigError {
    /// The router id is empty, too long or has another character.
    #[error(
        "router_id {0:?} must be 1..={MAX_ROUTER_ID_BYTES} bytes of ASCII letters, digits, `-`, `_` and `.`"
    )]
    RouterId(String),
    /// `view_ttl_ms` is 0.
    #[error("view_ttl_ms must be >= 1, got 0")]
    ViewTtl,
    /// The engine's configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
}

/// What a pick rested on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PickSource {
    /// The view and local evidence: the service's full decision.
    View,
    /// Local evidence alone: no view within `view_ttl_ms`.
    Blackout,
    /// Uniform over the candidates: none was known or selectable.
    Uniform,
}

impl PickSource {
    /// The name, as serialised.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::View => "view",
            Self::Blackout => "blackout",
            Self::Uniform => "uniform",
        }
    }
}

/// A pick.
#[derive(Debug, Clone, PartialEq)]
pub struct Pick {
    /// The picked worker.
    pub worker: String,
    /// The probability the pick had (its propensity), fraction 0..=1.
    pub probability: f64,
    /// This decision's id: `<router_id>-<16 hex digits>`. Pass it to
    /// [`Balancer::outcome`].
    pub decision_id: String,
    /// What the pick rested on.
    pub source: PickSource,
}

/// Why a pick was refused: the request itself is wrong (the router's bug,
/// never the service's absence).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PickError {
    /// A field of the request is invalid.
    #[error(transparent)]
    Invalid(ScoreError),
    /// Policy `none` makes no pick.
    #[error("policy `none` makes no pick; a balancer needs a picking policy")]
    NoPickPolicy,
}

/// A router's balancer: thread-safe, shared by reference (or `Arc`)
/// between the router's request tasks.
#[derive(Debug)]
pub struct Balancer {
    pub(crate) engine: Engine,
    cfg: BalancerConfig,
    /// Monotonic ms of the last applied view, plus one; 0 before the first.
    pub(crate) last_view_ms: AtomicU64,
    pub(crate) counters: Counters,
    pub(crate) records: Option<Arc<RecordBuffer>>,
    /// The latest monotonic ms a pick, outcome or view was given.
    latest_ms: AtomicU64,
    /// The model version the last applied view said the service runs.
    pub(crate) view_model: std::sync::Mutex<Option<Arc<str>>>,
}

impl Balancer {
    /// A balancer deciding with `config` (the service's configuration: its
    /// `config_hash` is checked against every view).
    ///
    /// # Errors
    /// [`BalancerConfigError`] for a bad router id, `view_ttl_ms` or config.
    pub fn new(config: Config, cfg: BalancerConfig) -> Result<Self, BalancerConfigError> {
        cfg.validate()?;
        config
            .validate()
            .map_err(|e| BalancerConfigError::Config(e.to_string()))?;
        Ok(Self {
            engine: Engine::new(config)
                .with_routed_outbox()
                .with_ids(Arc::new(RouterIds::new(
                    cfg.router_id.clone(),
                    cfg.first_decision_seq,
                ))),
            cfg,
            last_view_ms: AtomicU64::new(0),
            counters: Counters::default(),
            records: None,
            latest_ms: AtomicU64::new(0),
            view_model: std::sync::Mutex::new(None),
        })
    }

    /// Use `models` for the model stage, as the service does.
    pub fn with_models(mut self, models: std::sync::Arc<scorer_model::ModelHub>) -> Self {
        self.engine = self.engine.with_models(models);
        self
    }

    /// Send the decisions and outcomes to the service's decision log
    /// through `records` (sampled as the service's `log` section says; a
    /// full buffer drops and counts). Uniform picks, made without the
    /// engine, are not logged.
    pub fn with_records(mut self, records: Arc<RecordBuffer>) -> Self {
        self.engine = self.engine.with_log(records.clone());
        self.records = Some(records);
        self
    }

    /// The decision-log buffer, when [`Balancer::with_records`] set one.
    pub fn records(&self) -> Option<&Arc<RecordBuffer>> {
        self.records.as_ref()
    }

    /// The engine the balancer decides with.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The balancer's settings.
    pub fn config(&self) -> &BalancerConfig {
        &self.cfg
    }

    /// The model version the last applied view said the service runs;
    /// `None` before a view, or when the service runs no model.
    pub fn view_model_version(&self) -> Option<Arc<str>> {
        self.view_model
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Age of the last applied view at monotonic `now_ms`; `None` before
    /// the first.
    pub fn view_age_ms(&self, now_ms: u64) -> Option<u64> {
        match self.last_view_ms.load(Ordering::Acquire) {
            0 => None,
            at => Some(now_ms.saturating_sub(at - 1)),
        }
    }

    /// Whether picks at `now_ms` rest on local evidence alone.
    pub fn in_blackout(&self, now_ms: u64) -> bool {
        self.view_age_ms(now_ms)
            .is_none_or(|age| age > self.cfg.view_ttl_ms)
    }

    /// Counters and the view's age at `now_ms`.
    pub fn stats(&self, now_ms: u64) -> BalancerStats {
        let mut stats = self.counters.snapshot(self.view_age_ms(now_ms));
        stats.records = self.records.as_ref().map(|r| r.stats());
        stats
    }

    /// Pick one of `req.candidates` at monotonic `now_ms`, from local state
    /// alone: no I/O, never waiting on the service. The router keeps one
    /// request per pool and changes its key, so a pick allocates only its
    /// answer and the engine's working set.
    ///
    /// # Errors
    /// [`PickError`] when the request is invalid (empty or too many
    /// candidates, a bad key, policy or temperature, a context out of its
    /// bounds, as the service refuses them); never for the service's
    /// absence or the workers' state.
    pub fn pick(
        &self,
        req: &ScoreRequest,
        now_ms: u64,
        rng: &mut dyn RngCore,
    ) -> Result<Pick, PickError> {
        if req.policy.as_deref() == Some("none") {
            return Err(PickError::NoPickPolicy);
        }
        Counters::bump(&self.counters.picks);
        self.saw(now_ms);
        let engine = &self.engine;
        let decision_id = engine.next_decision_id();
        let blackout = self.in_blackout(now_ms);
        let wall_ms = self.records.as_ref().map_or(0, |r| r.wall_ms());
        let call = DecideCall::of_request(req, now_ms)
            .map_err(PickError::Invalid)?
            .output(Output::Pick)
            .blackout(blackout)
            .with_id(decision_id.clone())
            .logged_at(wall_ms, None);
        let scored = engine
            .decide(call, rng, &mut NoObserver)
            .map(|d| d.picked().and_then(|(w, p)| Some(w.to_owned()).zip(p)));
        match scored {
            Ok(picked) => {
                let Some((worker, probability)) = picked else {
                    return Ok(self.uniform(req, decision_id, rng));
                };
                let source = if blackout {
                    Counters::bump(&self.counters.blackout_picks);
                    PickSource::Blackout
                } else {
                    PickSource::View
                };
                Ok(Pick {
                    worker,
                    probability,
                    decision_id,
                    source,
                })
            }
            Err(ScoreError::NoEligibleWorkers(_) | ScoreError::Selection(_)) => {
                Ok(self.uniform(req, decision_id, rng))
            }
            Err(e) => Err(PickError::Invalid(e)),
        }
    }

    /// A uniform pick over the distinct candidates (already checked).
    fn uniform(&self, req: &ScoreRequest, decision_id: String, rng: &mut dyn RngCore) -> Pick {
        Counters::bump(&self.counters.uniform_picks);
        let c = &req.candidates;
        let distinct = |i: &usize| !c[..*i].contains(&c[*i]);
        let n = (0..c.len()).filter(distinct).count().max(1);
        let k = rng.random_range(0..n);
        let i = (0..c.len()).filter(distinct).nth(k).unwrap_or(0);
        Pick {
            worker: c[i].clone(),
            probability: 1.0 / n as f64,
            decision_id,
            source: PickSource::Uniform,
        }
    }

    /// Record the outcome of pick `decision_id` on `worker` at monotonic
    /// `now_ms`: it leaves the worker's outstanding count, and its latency
    /// and success feed the peak-EWMA service time, the failure rate and
    /// outlier ejection, before the next pick.
    ///
    /// # Errors
    /// [`FeedbackError`] for a latency that is negative, NaN, infinite or
    /// too large, or a bad decision id; nothing changes.
    pub fn outcome(
        &self,
        decision_id: &str,
        worker: &str,
        latency_ms: f64,
        success: bool,
        now_ms: u64,
    ) -> Result<FeedbackOutcome, FeedbackError> {
        self.outcome_with_cache_hit(decision_id, worker, latency_ms, success, None, now_ms)
    }

    /// [`Balancer::outcome`], saying whether the worker served the request
    /// from its cache (`Some(false)`: a miss, e.g. a cache-aside GET that
    /// found nothing). Hits and misses teach the locality term of the
    /// cost: the worker's hit and miss service times and how likely a key
    /// routed there is still warm.
    ///
    /// # Errors
    /// As [`Balancer::outcome`].
    pub fn outcome_with_cache_hit(
        &self,
        decision_id: &str,
        worker: &str,
        latency_ms: f64,
        success: bool,
        cache_hit: Option<bool>,
        now_ms: u64,
    ) -> Result<FeedbackOutcome, FeedbackError> {
        let f = Feedback {
            decision_id: decision_id.to_owned(),
            worker_id: worker.to_owned(),
            latency_ms,
            success,
            cache_hit,
        };
        self.saw(now_ms);
        let out = match &self.records {
            Some(records) => self
                .engine
                .feedback_and_log(&f, now_ms, records.wall_ms(), None)?,
            None => self.engine.feedback(&f, now_ms)?,
        };
        Counters::bump(&self.counters.outcomes);
        if !out.known_decision {
            Counters::bump(&self.counters.outcomes_unknown);
        }
        Ok(out)
    }

    pub(crate) fn saw(&self, now_ms: u64) {
        self.latest_ms.fetch_max(now_ms, Ordering::Relaxed);
    }

    /// The keys this router routed since the last call, oldest first, for
    /// its next load report (`POST /v1/router/load`'s `routed`): only once
    /// outcomes have said hit or miss. Ages count to the latest time the
    /// balancer was given (its last pick, outcome or view).
    pub fn routed(&self) -> Vec<scorer_engine::view::RoutedKey> {
        self.engine
            .take_routed(self.latest_ms.load(Ordering::Relaxed))
    }

    /// This router's outstanding picks per worker (the workers with any),
    /// sorted by id: what it reports to the service, so that the other
    /// routers see its load (`POST /v1/router/load`).
    pub fn outstanding(&self) -> Vec<WorkerLoad> {
        scorer_engine::view::peer_load::outstanding_of(self.engine.registry())
    }

    /// Housekeeping at monotonic `now_ms`, about once a second: picks whose
    /// outcome is overdue stop counting as outstanding, and workers silent
    /// for `telemetry.forget_after_ms` are forgotten, as in the service.
    pub fn tick(&self, now_ms: u64) {
        self.engine.forget_silent(now_ms);
    }
}
