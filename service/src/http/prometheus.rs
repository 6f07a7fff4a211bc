//! `GET /metrics`: Prometheus text exposition (issue #8) through the
//! `prometheus-client` crate (the Prometheus project's Rust client).
//!
//! Request counters and latency histograms live for the process; everything
//! read from the engine (decision, model, decision-log and per-worker
//! values) is encoded from a registry built at scrape time, so a worker
//! forgotten after `telemetry.forget_after_ms` stops exporting at once and
//! per-worker series stay bounded by the tracked workers. Names follow the
//! Prometheus conventions: base units (`_seconds`), `_total` for counters.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use scorer_core::dynamics::{FreshnessConfig, freshness_factor};
use scorer_core::scoring::{RuleInputs, rule_score};
use scorer_engine::{DecisionStage, StageObserver};
use scorer_model::{BreakerState, FallbackReason, Slot};

use super::AppState;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: String,
    method: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusalLabels {
    route: String,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabels {
    stage: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DispatchLabels {
    dispatch: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorkerLabels {
    worker: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorkerStateLabels {
    worker: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SlotLabels {
    slot: String,
    version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QuantileLabels {
    quantile: String,
}

type HistFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 10 µs .. ~5 s in ×2 steps.
    Histogram::new(exponential_buckets(1e-5, 2.0, 20))
}

fn stage_histogram() -> Histogram {
    // 1 µs .. ~0.5 s in ×2 steps.
    Histogram::new(exponential_buckets(1e-6, 2.0, 20))
}

/// The stages of a `POST /v1/score` call that `scorer_score_stage_seconds`
/// times, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScoreStage {
    /// From the middleware that buffers the body to the handler: reading
    /// the body, the concurrency limit and the JSON parse.
    ReadParse,
    /// From the handler to the start of scoring: the wait for a blocking-pool
    /// thread (about 0 inline).
    Queue,
    /// Scoring: rules, dynamics, cost, features, model, pick.
    Engine,
    /// Building the decision-log record and queueing it.
    Log,
    /// Rendering the answer's JSON at its `explain` level.
    Serialise,
    /// From the end of serialisation back to the runtime worker: the
    /// blocking pool's hand-off back (about 0 inline).
    Return,
}

impl ScoreStage {
    /// Every stage, in order.
    pub const ALL: [Self; 6] = [
        Self::ReadParse,
        Self::Queue,
        Self::Engine,
        Self::Log,
        Self::Serialise,
        Self::Return,
    ];

    /// Label value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ReadParse => "read_parse",
            Self::Queue => "queue",
            Self::Engine => "engine",
            Self::Log => "log",
            Self::Serialise => "serialise",
            Self::Return => "return",
        }
    }
}

/// Process-lifetime HTTP metrics, shared by the middleware and the scrape.
#[derive(Clone)]
pub struct HttpMetrics {
    requests: Family<RequestLabels, Counter>,
    duration: HistFamily<RouteLabels>,
    score_duration: Histogram,
    score_stages: HistFamily<StageLabels>,
    decision_stages: HistFamily<StageLabels>,
    score_dispatch: Family<DispatchLabels, Counter>,
    snapshots_accepted: Counter,
    telemetry_rejected: Family<ReasonLabels, Counter>,
    auth_refusals: Family<RefusalLabels, Counter>,
}

/// Every code a refused `POST /v1/telemetry` can carry, exported at 0 from
/// the start so that a rate query has a series before the first refusal.
const TELEMETRY_REJECTION_CODES: [&str; 7] = [
    "malformed_json",
    "invalid_body",
    "unsupported_media_type",
    "body_too_large",
    "bad_body",
    "invalid_telemetry",
    "too_many_workers",
];

impl Default for HttpMetrics {
    fn default() -> Self {
        let telemetry_rejected: Family<ReasonLabels, Counter> = Family::default();
        for code in TELEMETRY_REJECTION_CODES {
            // Creates the series at 0; the guard is dropped at once.
            drop(telemetry_rejected.get_or_create(&ReasonLabels {
                reason: code.to_owned(),
            }));
        }
        let score_dispatch: Family<DispatchLabels, Counter> = Family::default();
        for dispatch in ["inline", "pool", "block_in_place"] {
            drop(score_dispatch.get_or_create(&DispatchLabels { dispatch }));
        }
        Self {
            requests: Family::default(),
            duration: Family::new_with_constructor(latency_histogram),
            score_duration: latency_histogram(),
            score_stages: Family::new_with_constructor(stage_histogram),
            decision_stages: Family::new_with_constructor(stage_histogram),
            score_dispatch,
            snapshots_accepted: Counter::default(),
            telemetry_rejected,
            auth_refusals: Family::default(),
        }
    }
}

impl std::fmt::Debug for HttpMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpMetrics").finish_non_exhaustive()
    }
}

impl HttpMetrics {
    /// Records one in-process scoring call, seconds.
    pub fn observe_score(&self, seconds: f64) {
        self.score_duration.observe(seconds);
    }

    /// Records one stage of a score call, seconds.
    pub fn observe_stage(&self, stage: ScoreStage, seconds: f64) {
        self.score_stages
            .get_or_create(&StageLabels {
                stage: stage.as_str(),
            })
            .observe(seconds);
    }

    /// A timer of the engine's stages from `start` on, for
    /// [`scorer_engine::Engine::decide`].
    pub(super) fn decision_stage_timer(&self, start: Instant) -> StageTimer<'_> {
        StageTimer {
            metrics: self,
            last: start,
            log_secs: 0.0,
        }
    }

    /// Counts a score call by where it computed.
    pub(super) fn dispatched(&self, how: &'static str) {
        self.score_dispatch
            .get_or_create(&DispatchLabels { dispatch: how })
            .inc();
    }

    /// Counts accepted telemetry snapshots.
    pub fn snapshots_accepted(&self, n: usize) {
        self.snapshots_accepted.inc_by(n as u64);
    }

    /// Counts a request refused by `http::auth` on `route` for `reason`.
    pub fn auth_refused(&self, route: &str, reason: &'static str) {
        self.auth_refusals
            .get_or_create(&RefusalLabels {
                route: route.to_owned(),
                reason,
            })
            .inc();
    }

    /// Counts a rejected telemetry batch by its error code.
    pub fn telemetry_rejected(&self, code: &str) {
        self.telemetry_rejected
            .get_or_create(&ReasonLabels {
                reason: code.to_owned(),
            })
            .inc();
    }
}

/// Middleware: counts every request by route template, method and status,
/// and times it by route.
pub(super) async fn track(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let method = req.method().as_str().to_owned();
    let start = Instant::now();
    let resp = next.run(req).await;
    let m = &st.metrics;
    let status = resp.status().as_u16().to_string();
    m.duration
        .get_or_create(&RouteLabels {
            route: route.clone(),
            status: status.clone(),
        })
        .observe(start.elapsed().as_secs_f64());
    m.requests
        .get_or_create(&RequestLabels {
            route,
            method,
            status,
        })
        .inc();
    resp
}

pub(super) fn counter(r: &mut Registry, name: &str, help: &str, v: u64) {
    r.register(name, help, ConstCounter::new(v));
}

/// Builds the scrape registry from the live state.
fn registry(st: &AppState) -> Registry {
    let mut r = Registry::default();
    let m = &st.metrics;
    r.register(
        "http_requests",
        "HTTP requests by route template, method and status",
        m.requests.clone(),
    );
    r.register(
        "http_request_duration_seconds",
        "HTTP request latency by route template and status",
        m.duration.clone(),
    );
    r.register(
        "scorer_score_duration_seconds",
        "In-process scoring time of POST /v1/score (rules, dynamics, features, model, pick)",
        m.score_duration.clone(),
    );
    r.register(
        "scorer_score_stage_seconds",
        "Time of each stage of POST /v1/score: read_parse, queue, engine, log, serialise, return",
        m.score_stages.clone(),
    );
    r.register(
        "scorer_decision_stage_seconds",
        "Time of each stage of a score decision in the engine: rules, freshness, dynamics, cost, model, select, record",
        m.decision_stages.clone(),
    );
    r.register(
        "scorer_score_dispatch",
        "Score calls by where they computed: inline, pool, block_in_place",
        m.score_dispatch.clone(),
    );
    r.register(
        "scorer_telemetry_snapshots_accepted",
        "Telemetry snapshots accepted",
        m.snapshots_accepted.clone(),
    );
    r.register(
        "scorer_telemetry_batches_rejected",
        "Telemetry batches rejected, by error code",
        m.telemetry_rejected.clone(),
    );
    r.register(
        "scorer_auth_refusals",
        "Requests refused for their credentials, by route and reason: missing_token, unknown_token, wrong_role, not_loopback",
        m.auth_refusals.clone(),
    );
    st.view_streams.register(&mut r);

    let e = &st.engine;
    let c = e.counters();
    counter(
        &mut r,
        "scorer_decisions",
        "Score requests answered",
        c.decisions,
    );
    counter(
        &mut r,
        "scorer_panic_decisions",
        "Decisions made in panic mode",
        c.panic_decisions,
    );
    counter(
        &mut r,
        "scorer_no_eligible",
        "Score requests refused: no eligible worker",
        c.no_eligible,
    );
    counter(
        &mut r,
        "scorer_feedback",
        "Feedback calls accepted",
        c.feedback,
    );

    let hub = e.models();
    let s = hub.stats().snapshot();
    counter(
        &mut r,
        "scorer_model_calls",
        "Decisions that reached the model stage",
        s.calls,
    );
    counter(
        &mut r,
        "scorer_model_used",
        "Decisions whose final scores used the model",
        s.used,
    );
    let fb: Family<ReasonLabels, Counter> = Family::default();
    for reason in FallbackReason::ALL {
        fb.get_or_create(&ReasonLabels {
            reason: reason.as_str().to_owned(),
        })
        .inc_by(hub.stats().fallbacks(reason));
    }
    r.register(
        "scorer_model_fallbacks",
        "Decisions scored on rules alone, by reason",
        fb,
    );
    let q: Family<QuantileLabels, Gauge<f64, std::sync::atomic::AtomicU64>> = Family::default();
    for (label, v) in [
        ("0.5", s.latency_us.p50),
        ("0.9", s.latency_us.p90),
        ("0.99", s.latency_us.p99),
        ("0.999", s.latency_us.p999),
    ] {
        q.get_or_create(&QuantileLabels {
            quantile: label.to_owned(),
        })
        .set(v / 1e6);
    }
    r.register(
        "scorer_model_inference_seconds",
        "Model inference latency quantiles since start (HdrHistogram)",
        q,
    );
    r.register(
        "scorer_model_inference_duration_seconds",
        "Model inference latency, 1 µs .. 0.5 s buckets",
        hub.stats().prometheus_histogram(),
    );
    let now = st.clock.monotonic_ms();
    let set = hub.current();
    let open: Family<SlotLabels, Gauge> = Family::default();
    for (slot, s) in [
        ("primary", Some(&set.primary)),
        ("ab", set.ab.as_ref()),
        ("shadow", set.shadow.as_ref()),
    ] {
        if let Some(Slot::Ready(m)) = s {
            open.get_or_create(&SlotLabels {
                slot: slot.to_owned(),
                version: m.card.model_version.clone(),
            })
            .set(i64::from(m.breaker.state(now) != BreakerState::Closed));
        }
    }
    r.register(
        "scorer_model_breaker_open",
        "1 while a loaded model's budget breaker is open or half-open",
        open,
    );
    let p = st.promotions.stats();
    counter(
        &mut r,
        "scorer_model_promotions",
        "Model promotions applied since start (POST /v1/admin/model/promote)",
        p.promotions,
    );
    counter(
        &mut r,
        "scorer_model_rollbacks",
        "Model rollbacks applied since start (POST /v1/admin/model/rollback)",
        p.rollbacks,
    );
    counter(
        &mut r,
        "scorer_model_switches_refused_pinned",
        "Promotions and rollbacks refused because the served model is pinned",
        p.refused_pinned,
    );
    let pinned: Gauge = Gauge::default();
    pinned.set(i64::from(p.pinned.is_some()));
    r.register(
        "scorer_model_pinned",
        "1 while the served model is pinned (POST /v1/admin/model/pin)",
        pinned,
    );

    if let Some(log) = st.decision_log() {
        super::log_metrics::register(&mut r, &log.stats());
    }

    let cfg = e.config();
    let inputs = RuleInputs {
        cfg: &cfg.scoring,
        dead_after_ms: cfg.telemetry.dead_after_ms,
        request_type: None,
        now_ms: now,
        // As the score path applies it; only the penalty state machine
        // leaves it out.
        warmup: true,
    };
    let fresh_cfg = FreshnessConfig {
        fresh_ms: cfg.freshness.fresh_ms,
        dead_after_ms: cfg.telemetry.dead_after_ms,
    };
    let rule: Family<WorkerLabels, Gauge<f64, std::sync::atomic::AtomicU64>> = Family::default();
    let last_final: Family<WorkerLabels, Gauge<f64, std::sync::atomic::AtomicU64>> =
        Family::default();
    let fresh: Family<WorkerLabels, Gauge<f64, std::sync::atomic::AtomicU64>> = Family::default();
    let state: Family<WorkerStateLabels, Gauge> = Family::default();
    for slot in e.registry().slots() {
        let v = slot.view();
        let worker = v.worker_id.to_string();
        let labels = WorkerLabels {
            worker: worker.clone(),
        };
        // Rounded as answers show them (`fmt::points`).
        rule.get_or_create(&labels)
            .set(scorer_core::fmt::points(rule_score(&v, &inputs).0.score));
        if let Some(f) = slot.last_final_score() {
            last_final
                .get_or_create(&labels)
                .set(scorer_core::fmt::points(f));
        }
        fresh
            .get_or_create(&labels)
            .set(freshness_factor(v.age_ms(now), &fresh_cfg));
        state
            .get_or_create(&WorkerStateLabels {
                worker,
                state: v
                    .penalty
                    .state_at(now, &cfg.penalty)
                    .state
                    .as_str()
                    .to_owned(),
            })
            .set(1);
    }
    r.register(
        "scorer_worker_rule_score",
        "Request-independent rule score (warm-up deduction included), points 0..=100",
        rule,
    );
    r.register(
        "scorer_worker_final_score",
        "Final score of the latest decision that included the worker (previews excluded), points 0..=100",
        last_final,
    );
    r.register(
        "scorer_worker_freshness",
        "Trust in the worker's last report, 0..=1",
        fresh,
    );
    r.register(
        "scorer_worker_penalty_state",
        "1 for the worker's current penalty state",
        state,
    );
    super::self_check_metrics::register(&mut r, e);
    super::self_check_metrics::register_canary(&mut r, e);
    if let Some(link) = &st.bus {
        super::bus_metrics::register(&mut r, link);
    }
    r
}

/// `GET /metrics`: Prometheus (OpenMetrics text) exposition.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "OpenMetrics text format 1.0.0", content_type = "application/openmetrics-text", body = String)))]
pub(super) async fn metrics(State(st): State<AppState>) -> Response {
    let st2 = st.clone();
    let body = tokio::task::spawn_blocking(move || {
        let mut out = String::new();
        encode(&mut out, &registry(&st2)).map(|()| out)
    })
    .await;
    match body {
        Ok(Ok(text)) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        _ => super::ApiError::internal("metrics encoding failed").into_response(),
    }
}

/// Times each stage of a decision since the previous one ended.
pub(super) struct StageTimer<'a> {
    metrics: &'a HttpMetrics,
    last: Instant,
    log_secs: f64,
}

impl StageTimer<'_> {
    /// How long the decision's log stage took, s (0 before it ran).
    pub(super) fn log_secs(&self) -> f64 {
        self.log_secs
    }
}

impl StageObserver for StageTimer<'_> {
    fn stage_done(&mut self, stage: DecisionStage) {
        let now = Instant::now();
        let secs = (now - self.last).as_secs_f64();
        self.metrics
            .decision_stages
            .get_or_create(&StageLabels {
                stage: stage.as_str(),
            })
            .observe(secs);
        if stage == DecisionStage::Log {
            self.log_secs = secs;
        }
        self.last = now;
    }
}
