//! The compared policies by name, and the service arms.
//!
//! Names (used in results.json): `round-robin`, `random`,
//! `p2c-least-request`, `p2c-peak-ewma`, `least-request-all`, `envoy`,
//! and the locality baselines `hash-bounded`, `cache-aware`, `kv-cost`
//! (baselines, see [`crate::baselines`]), `oracle` (the physical-limit
//! anchor, simulator only: [`crate::oracle`]),
//! `service` (the service exactly as shipped: default configuration, the
//! configured default selection policy — the score request names no
//! policy — and the shipped default model `models/default`),
//! `service-rules` (the same with the model off), `service-embedded` (the
//! service's decision inside each router with the embedded balancer, fed by
//! the view stream: [`crate::embedded_arm`]), and diagnostics:
//! `rules-max` and `rules-softmax` (the service's rule scorer with its
//! dynamics, selection policy `max` or `softmax` at the configured
//! temperature), `rules-p2c` (an extra arm beyond issue #7's list: the same
//! scorer with the service's own `p2c` selection, one of its shipped
//! policies), `rules-prequal` (the same with the service's `prequal`
//! hot-cold lexicographic selection), and `model`, `model-retrained` (the
//! shipped configuration with a learned model in the scoring path, issue
//! #6: the configured default selection policy picks; `model` has the
//! shipped default model, `model-retrained` one retrained on
//! `service-rules` logs, see [`crate::model_arms`]). The testbed runs both over HTTP with the
//! service's real budget; its `model-retrained` trains on a testbed logging
//! run.
//!
//! The service arms call [`scorer_engine::Engine`] in-process, exactly as the HTTP
//! handlers do: telemetry batches go to [`Engine::ingest`], each request to
//! [`Engine::score`] with all workers as candidates, each outcome to
//! [`Engine::feedback`]. The engine runs with the shipped default
//! configuration ([`Config::default`]); simulated time is its monotonic
//! clock and `WALL_EPOCH_MS + now` its wall clock.

use std::sync::Arc;

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use scorer_core::scoring::{RequestContext, RequestType};
use scorer_core::telemetry::Snapshot;
use scorer_engine::Engine;
use scorer_engine::Feedback;
use scorer_engine::api::ScoreRequest;
use scorer_engine::config::Config;
use scorer_engine::overrides::{OverrideKind, OverrideRequest};
use scorer_log::DecisionLog;
use scorer_model::ModelHub;

use crate::baselines::{
    cache_aware::CacheAware, envoy::Envoy, hash_bounded::HashBounded, kv_cost::KvCost,
    least_request_all::LeastRequestAll, p2c_least_request::P2cLeastRequest,
    p2c_peak_ewma::P2cPeakEwma, random::Random, round_robin::RoundRobin,
};
use crate::router::{Op, Outcome, Pick, PickRequest, Router};

/// Every policy name, in report order: the baselines, what users run
/// (`service`, `service-rules`), then the diagnostic arms.
pub const POLICIES: [&str; 19] = [
    "round-robin",
    "random",
    "p2c-least-request",
    "p2c-peak-ewma",
    "least-request-all",
    "envoy",
    "hash-bounded",
    "cache-aware",
    "kv-cost",
    "oracle",
    "service",
    "service-rules",
    "service-embedded",
    "rules-max",
    "rules-softmax",
    "rules-p2c",
    "rules-prequal",
    "model",
    "model-retrained",
];

/// Simulated wall clock origin, Unix ms (2025-06-15).
pub const WALL_EPOCH_MS: u64 = 1_750_000_000_000;

/// Monotonic origin offset, ms, so simulated time 0 is not monotonic 0.
const MONO_OFFSET_MS: u64 = 1_000;

/// Whether `name` is a known policy.
pub fn is_known(name: &str) -> bool {
    POLICIES.contains(&name)
}

/// Checks a `--policies` list: at least one name, every name known, none
/// twice (a repeated arm would be run and reported twice).
///
/// # Errors
/// The first unknown or repeated name, or an empty list.
pub fn check_names(names: &[String]) -> Result<(), String> {
    if names.is_empty() {
        return Err("--policies must name at least one policy".to_owned());
    }
    for (i, p) in names.iter().enumerate() {
        if !is_known(p) {
            return Err(format!(
                "unknown policy `{p}`: expected one of {}",
                POLICIES.join(", ")
            ));
        }
        if names[..i].contains(p) {
            return Err(format!("policy `{p}` is given twice"));
        }
    }
    Ok(())
}

/// Whether `name` is a model arm (`model`, `model-retrained`).
pub fn is_model_arm(name: &str) -> bool {
    matches!(name, "model" | "model-retrained")
}

/// Whether `name` runs the shipped model (`service`, `service-embedded`,
/// `model`, `model-retrained`): its arm needs a model hub.
pub fn needs_models(name: &str) -> bool {
    matches!(name, "service" | "service-embedded") || is_model_arm(name)
}

/// Whether `name` is the service as shipped (`service`, `service-rules`):
/// the score request names no policy, so the configured default selects.
pub fn is_shipped_arm(name: &str) -> bool {
    matches!(name, "service" | "service-rules")
}

/// Whether `name` is served by the scoring service (every arm but the
/// baselines).
pub fn is_service_arm(name: &str) -> bool {
    is_shipped_arm(name)
        || name.starts_with("rules-")
        || is_model_arm(name)
        || name == "service-embedded"
}

/// The arm `name` for `routers` independent routers (see
/// [`crate::per_router`]): a baseline gets one independent instance per
/// router (each knows only its own picks and outcomes, as sidecars do);
/// a service arm is one shared service that sees every router's picks and
/// outcomes. With one router this is [`build`].
pub fn build_arm(
    name: &str,
    n: usize,
    routers: usize,
    log: Option<Arc<DecisionLog>>,
    service_config: &Config,
    models: Option<Arc<ModelHub>>,
) -> Option<Box<dyn Router + Send>> {
    if name == "service-embedded" {
        let arm = crate::embedded_arm::EmbeddedRouter::new(n, routers, service_config, &models?);
        return Some(Box::new(arm.ok()?));
    }
    // The oracle reads the true state, which no router's view limits.
    if routers <= 1 || is_service_arm(name) || name == "oracle" {
        return build(name, n, log, service_config, models);
    }
    let instances = (0..routers)
        .map(|_| build(name, n, None, service_config, None))
        .collect::<Option<Vec<_>>>()?;
    Some(Box::new(crate::per_router::PerRouter::new(instances)))
}

/// Worker id of index `i` as the service sees it.
pub fn worker_id(i: usize) -> String {
    format!("w{i}")
}

/// A router for policy `name` over `n` workers; `log` is attached to the
/// service arms' engine. `None` for an unknown name, or for a model arm
/// without `models`. The service arms run with `service_config` (the
/// shipped defaults unless a diagnostic run passes `--service-config`); the
/// model arms add `models` (see [`crate::model_arms`]).
pub fn build(
    name: &str,
    n: usize,
    log: Option<Arc<DecisionLog>>,
    service_config: &Config,
    models: Option<Arc<ModelHub>>,
) -> Option<Box<dyn Router + Send>> {
    Some(match name {
        "round-robin" => Box::new(RoundRobin::new(n)),
        "random" => Box::new(Random::new(n)),
        "p2c-least-request" => Box::new(P2cLeastRequest::new(n)),
        "p2c-peak-ewma" => Box::new(P2cPeakEwma::new(n)),
        "least-request-all" => Box::new(LeastRequestAll::new(n)),
        "envoy" => Box::new(Envoy::new(n)),
        "hash-bounded" => Box::new(HashBounded::new(n)),
        "cache-aware" => Box::new(CacheAware::new(n)),
        "kv-cost" => Box::new(KvCost::new(n)),
        "oracle" => Box::new(crate::oracle::Oracle::new(n)),
        "service" => {
            Box::new(ServiceRouter::shipped(n, log, service_config.clone()).with_models(models?))
        }
        "service-rules" => Box::new(ServiceRouter::shipped(n, log, service_config.clone())),
        "service-embedded" => {
            let arm = crate::embedded_arm::EmbeddedRouter::new(n, 1, service_config, &models?);
            Box::new(arm.ok()?)
        }
        "rules-max" => Box::new(ServiceRouter::new(n, "max", log, service_config.clone())),
        "rules-softmax" => Box::new(ServiceRouter::new(
            n,
            "softmax",
            log,
            service_config.clone(),
        )),
        "rules-p2c" => Box::new(ServiceRouter::new(n, "p2c", log, service_config.clone())),
        "rules-prequal" => Box::new(ServiceRouter::new(
            n,
            "prequal",
            log,
            service_config.clone(),
        )),
        // As shipped (the configured default policy selects), with a model.
        "model" | "model-retrained" => {
            Box::new(ServiceRouter::shipped(n, log, service_config.clone()).with_models(models?))
        }
        _ => return None,
    })
}

/// A service arm: the in-process [`Engine`] with one selection policy.
pub struct ServiceRouter {
    engine: Engine,
    req: ScoreRequest,
    next_id: u64,
    id_prefix: String,
    fallbacks: u64,
    logging: bool,
    spread: ModelSpread,
    self_check: Vec<(f64, f64)>,
    next_sample_ms: f64,
}

/// How much the model separates the candidates of one decision: the ratio
/// of the largest to the smallest of its cost factors, over the decisions
/// that used the model.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ModelSpread {
    /// Decisions that used the model.
    pub decisions: u64,
    /// Mean ratio.
    pub mean_ratio: f64,
    /// Largest ratio.
    pub max_ratio: f64,
}

impl std::fmt::Debug for ServiceRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceRouter")
            .field("policy", &self.req.policy)
            .finish()
    }
}

pub(crate) fn mono(now_ms: f64) -> u64 {
    MONO_OFFSET_MS + now_ms.max(0.0) as u64
}

pub(crate) fn wall(now_ms: f64) -> u64 {
    WALL_EPOCH_MS + now_ms.max(0.0) as u64
}

impl ServiceRouter {
    /// An engine with configuration `config` (validated) over workers
    /// `w0..w{n-1}`, picking with service policy `policy` (`max`, `softmax`, …).
    pub fn new(n: usize, policy: &str, log: Option<Arc<DecisionLog>>, config: Config) -> Self {
        let mut engine = Engine::new(config);
        let logging = log.is_some();
        if let Some(log) = log {
            engine = engine.with_log(log);
        }
        let mut req = ScoreRequest::new("k", (0..n).map(worker_id).collect());
        req.policy = Some(policy.to_owned());
        Self {
            engine,
            req,
            next_id: 0,
            id_prefix: "d".to_owned(),
            fallbacks: 0,
            logging,
            spread: ModelSpread::default(),
            self_check: Vec::new(),
            next_sample_ms: 0.0,
        }
    }

    /// The service as shipped: no policy in the score request, so the
    /// configuration's `selection.default_policy` picks.
    pub fn shipped(n: usize, log: Option<Arc<DecisionLog>>, config: Config) -> Self {
        let mut r = Self::new(n, "none", log, config);
        r.req.policy = None;
        r
    }

    /// Put `models` in the engine's scoring path ([`Engine::with_models`]).
    #[must_use]
    pub fn with_models(mut self, models: Arc<ModelHub>) -> Self {
        self.engine = self.engine.with_models(models);
        self
    }

    /// The engine (for inspection in tests).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
}

pub(crate) fn parse_worker(id: &str) -> Option<usize> {
    id.strip_prefix('w')?.parse().ok()
}

impl Router for ServiceRouter {
    fn set_decision_id_prefix(&mut self, prefix: &str) {
        prefix.clone_into(&mut self.id_prefix);
    }

    fn pick(&mut self, req: &PickRequest<'_>, rng: &mut ChaCha8Rng) -> Pick {
        self.next_id += 1;
        let id = format!("{}{}", self.id_prefix, self.next_id);
        req.key.clone_into(&mut self.req.key);
        let ctx = RequestContext {
            request_type: Some(match req.op {
                Op::Get => RequestType::Get,
                Op::Put => RequestType::Put,
            }),
            timeout_ms: Some(req.timeout_ms as u64),
            ..RequestContext::default()
        };
        let answer = if self.logging {
            self.engine
                .score_and_log(&self.req, &ctx, mono(req.now_ms), wall(req.now_ms), id, rng)
        } else {
            self.engine
                .score(&self.req, &ctx, mono(req.now_ms), id, rng)
        };
        if let Ok(resp) = &answer
            && resp.model.used
        {
            let (lo, hi) = resp
                .scores
                .iter()
                .filter_map(|s| s.model_action)
                .fold((f64::MAX, f64::MIN), |(lo, hi), a| (lo.min(a), hi.max(a)));
            if lo <= hi {
                let pts = (hi - lo).exp();
                let sp = &mut self.spread;
                sp.decisions += 1;
                sp.mean_ratio += (pts - sp.mean_ratio) / sp.decisions as f64;
                sp.max_ratio = sp.max_ratio.max(pts);
            }
        }
        match answer {
            Ok(resp) => match resp.pick.as_deref().and_then(parse_worker) {
                Some(worker) => Pick {
                    worker,
                    decision_id: Some(resp.decision_id),
                },
                None => self.fallback(rng),
            },
            Err(_) => self.fallback(rng),
        }
    }

    fn outcome(&mut self, o: &Outcome<'_>) {
        let Some(id) = o.decision_id else { return };
        let f = Feedback {
            decision_id: id.to_owned(),
            worker_id: worker_id(o.worker),
            latency_ms: o.latency_ms,
            success: o.success,
        };
        let _ = if self.logging {
            self.engine
                .feedback_and_log(&f, mono(o.now_ms), wall(o.now_ms), None)
        } else {
            self.engine.feedback(&f, mono(o.now_ms))
        };
    }

    /// `PUT` (or `DELETE`) `/v1/admin/workers/{id}/override` with a drain,
    /// in-process. A refusal (a worker that never reported) leaves the
    /// worker in, and shows as a drain that never happened.
    fn drain(&mut self, worker: usize, drained: bool, now_ms: f64) {
        let id = worker_id(worker);
        if drained {
            let req = OverrideRequest {
                kind: OverrideKind::Drain,
                weight: None,
                ttl_ms: None,
                reason: Some("evaluation: drain fault".to_owned()),
            };
            let _ = self
                .engine
                .set_override(&id, &req, "operator", mono(now_ms));
        } else {
            self.engine.clear_override(&id, mono(now_ms));
        }
    }

    fn telemetry(&mut self, batch: &[Snapshot], now_ms: f64) {
        // A rejected batch (never expected: the simulator builds valid
        // snapshots) leaves the state as it was, as over HTTP.
        let _ = self.engine.ingest(batch, mono(now_ms), wall(now_ms));
        if now_ms >= self.next_sample_ms {
            self.next_sample_ms = now_ms + crate::self_check_series::SAMPLE_EVERY_MS;
            if let Some(rho) = self.engine.self_check().snapshot().rank_correlation {
                self.self_check.push((now_ms / 1_000.0, rho));
            }
        }
    }

    fn self_check_samples(&self) -> Option<Vec<(f64, f64)>> {
        Some(self.self_check.clone())
    }

    fn fallbacks(&self) -> u64 {
        self.fallbacks
    }

    fn remote(&self) -> bool {
        true
    }

    fn model_spread(&self) -> Option<ModelSpread> {
        (self.spread.decisions > 0).then_some(self.spread)
    }
}

impl ServiceRouter {
    /// No pick from the service (no eligible worker): a router would fall
    /// back to a uniform choice; counted.
    fn fallback(&mut self, rng: &mut ChaCha8Rng) -> Pick {
        self.fallbacks += 1;
        Pick {
            worker: rng.random_range(0..self.req.candidates.len()),
            decision_id: None,
        }
    }
}
