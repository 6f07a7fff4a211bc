//! The service arms that call a scorer: [`ServiceRouter`], the in-process
//! [`Engine`] with one selection policy, which the simulator treats as a
//! remote scorer ([`Remote`]).
//!
//! It calls the engine exactly as the HTTP handlers do: telemetry batches
//! go to [`Engine::ingest`], each request to [`Engine::decide`] (explained)
//! with all workers as candidates, each outcome to [`Engine::feedback`]. The engine
//! runs with the configuration it is given (the shipped defaults,
//! [`Config::default`], unless a diagnostic run passes another); simulated
//! time is its clock ([`super::service_ids`]).

use std::sync::Arc;

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use scorer_core::scoring::{RequestContext, RequestType};
use scorer_core::telemetry::Snapshot;
use scorer_engine::Feedback;
use scorer_engine::api::ScoreRequest;
use scorer_engine::config::Config;
use scorer_engine::overrides::{OverrideKind, OverrideRequest};
use scorer_engine::{DecideCall, Decided, DecisionIds, Engine, NoObserver, Output};
use scorer_log::DecisionLog;
use scorer_model::ModelHub;

use super::service_ids::{mono, parse_worker, wall, worker_id};
use crate::router::{Op, Outcome, Pick, PickRequest, Router};

/// Simulated time between samples of the self-check's rank correlation, ms.
pub const SELF_CHECK_EVERY_MS: f64 = 1_000.0;

/// What the arm's decision ids start with: `d1`, `d2`, ….
pub const DECISION_ID_PREFIX: &str = "d";

/// A scorer across the network ([`super::Arm::Remote`]): what the
/// simulator and the runner give and ask a service arm beyond [`Router`].
pub trait Remote: Router {
    /// Take a telemetry batch reaching the scorer at `now_ms`.
    fn telemetry(&mut self, batch: &[Snapshot], now_ms: f64);
    /// Picks that fell back to a uniform choice because the scorer
    /// answered no eligible worker.
    fn fallbacks(&self) -> u64 {
        0
    }
    /// Prefix of the decision ids it logs, so that logs of different runs
    /// can be trained on together.
    fn set_decision_id_prefix(&mut self, _prefix: &str) {}
    /// With a model: how much the model separated a decision's candidates.
    fn model_spread(&self) -> Option<ModelSpread> {
        None
    }
    /// Its self-check's rank correlation through the run, `(time s, rho)`.
    fn self_check_samples(&self) -> Option<Vec<(f64, f64)>> {
        None
    }
    /// With a retraining loop beside it: what the loop did.
    fn learning(&self) -> Option<super::learning::LearningInfo> {
        None
    }
    /// Service replicas the routers' calls spread over: router `r` calls
    /// replica `r % replicas()`, which has cores of its own. 1: one service.
    fn replicas(&self) -> usize {
        1
    }
    /// With several replicas: one hop on the bus they share over, ms.
    fn bus_one_way_ms(&self) -> f64 {
        0.0
    }
    /// With several replicas: replica `replica`'s load-gauge clock ticks
    /// at `now_ms`.
    fn publish_load(&mut self, _replica: usize, _now_ms: f64) {}
}

/// A service arm: the in-process [`Engine`] with one selection policy.
pub struct ServiceRouter {
    engine: Engine,
    req: ScoreRequest,
    ids: Arc<ArmIds>,
    fallbacks: u64,
    logging: bool,
    spread: ModelSpread,
    self_check: Vec<(f64, f64)>,
    next_sample_ms: f64,
}

/// The arm's decision ids, `<prefix><n>` with `n` counting up from 1 across
/// prefix changes (a replica takes its own prefix,
/// [`Remote::set_decision_id_prefix`]).
#[derive(Debug)]
struct ArmIds {
    prefix: std::sync::Mutex<String>,
    next: std::sync::atomic::AtomicU64,
}

impl ArmIds {
    fn new(prefix: &str) -> Self {
        Self {
            prefix: std::sync::Mutex::new(prefix.to_owned()),
            next: std::sync::atomic::AtomicU64::new(1),
        }
    }

    fn set_prefix(&self, prefix: &str) {
        let mut p = self
            .prefix
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        prefix.clone_into(&mut p);
    }
}

impl DecisionIds for ArmIds {
    fn next_id(&self) -> String {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = self
            .prefix
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        format!("{p}{n}")
    }
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

impl ServiceRouter {
    /// An engine with configuration `config` (validated) over workers
    /// `w0..w{n-1}`, picking with service policy `policy` (`max`, `softmax`, …).
    pub fn new(n: usize, policy: &str, log: Option<Arc<DecisionLog>>, config: Config) -> Self {
        let ids = Arc::new(ArmIds::new(DECISION_ID_PREFIX));
        let mut engine = Engine::new(config).with_ids(ids.clone());
        let logging = log.is_some();
        if let Some(log) = log {
            engine = engine.with_log(log);
        }
        let mut req = ScoreRequest::new("k", (0..n).map(worker_id).collect());
        req.policy = Some(policy.to_owned());
        Self {
            engine,
            req,
            ids,
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

    /// Write decisions and outcomes to `sink` instead of a decision log.
    #[must_use]
    pub fn with_sink(mut self, sink: Arc<dyn scorer_log::DecisionSink>) -> Self {
        self.engine = self.engine.with_log(sink);
        self.logging = true;
        self
    }

    /// Put `models` in the engine's scoring path ([`Engine::with_models`]).
    #[must_use]
    pub fn with_models(mut self, models: Arc<ModelHub>) -> Self {
        self.engine = self.engine.with_models(models);
        self
    }

    /// Keep the keys it routes for [`Engine::take_routed`]: a replica's
    /// gauges carry them to the other replicas
    /// ([`super::replicas::ReplicaSet`]).
    #[must_use]
    pub fn with_routed_outbox(mut self) -> Self {
        self.engine = self.engine.with_routed_outbox();
        self
    }

    /// The engine (for inspection in tests).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
}

impl Router for ServiceRouter {
    fn pick(&mut self, req: &PickRequest<'_>, rng: &mut ChaCha8Rng) -> Pick {
        req.key.clone_into(&mut self.req.key);
        let ctx = RequestContext {
            request_type: Some(match req.op {
                Op::Get => RequestType::Get,
                Op::Put => RequestType::Put,
            }),
            timeout_ms: Some(req.timeout_ms as u64),
            ..RequestContext::default()
        };
        let answer = DecideCall::new(&self.req, &ctx, mono(req.now_ms))
            .map(|call| {
                call.output(Output::Explained)
                    .logged_at(wall(req.now_ms), None)
            })
            .and_then(|call| self.engine.decide(call, rng, &mut NoObserver))
            .ok()
            .and_then(Decided::explained);
        if let Some(resp) = &answer
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
            Some(resp) => match resp.pick.as_deref().and_then(parse_worker) {
                Some(worker) => Pick {
                    worker,
                    decision_id: Some(resp.decision_id),
                },
                None => self.fallback(rng),
            },
            None => self.fallback(rng),
        }
    }

    fn outcome(&mut self, o: &Outcome<'_>) {
        let Some(id) = o.decision_id else { return };
        let f = Feedback {
            decision_id: id.to_owned(),
            worker_id: worker_id(o.worker),
            latency_ms: o.latency_ms,
            success: o.success,
            cache_hit: o.cache_hit,
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
}

impl Remote for ServiceRouter {
    fn telemetry(&mut self, batch: &[Snapshot], now_ms: f64) {
        // A rejected batch (never expected: the simulator builds valid
        // snapshots) leaves the state as it was, as over HTTP.
        let _ = self.engine.ingest(batch, mono(now_ms), wall(now_ms));
        if now_ms >= self.next_sample_ms {
            self.next_sample_ms = now_ms + SELF_CHECK_EVERY_MS;
            if let Some(rho) = self.engine.self_check().snapshot().rank_correlation {
                self.self_check.push((now_ms / 1_000.0, rho));
            }
        }
    }

    fn fallbacks(&self) -> u64 {
        self.fallbacks
    }

    fn set_decision_id_prefix(&mut self, prefix: &str) {
        self.ids.set_prefix(prefix);
    }

    fn self_check_samples(&self) -> Option<Vec<(f64, f64)>> {
        Some(self.self_check.clone())
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
