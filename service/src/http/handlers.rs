//! Route handlers.

use crate::EngineLog;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::IntoResponse;
use serde::Serialize;
use serde_json::json;

use std::time::Instant;

use axum::Extension;

use super::answer;
use super::body_first::ReadStart;
use super::dispatch::Run;
use super::metrics::ScoreStage;
use super::openapi::{ErrorBody, JsonBodyErrors};
use super::{ApiError, ApiJson, AppState};
use rand::SeedableRng;
use scorer_core::state::IngestError;

use scorer_core::dynamics::PenaltyView;
use scorer_core::features::{FEATURE_COUNT, FEATURE_SCHEMA_VERSION, FEATURES, schema_hash};
use scorer_core::scoring::{RequestContext, RequestType};
use scorer_core::state::{HistoryStats, Smoothed};
use scorer_core::telemetry::TelemetryBatch;
use scorer_core::telemetry::validate::Warning;
use scorer_engine::CounterSnapshot;
use scorer_engine::api::{ScoreRequest, ScoreResponse};

/// Answer of `POST /v1/telemetry`.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Accepted {
    /// Snapshots applied (the whole batch).
    accepted: usize,
    /// Non-fatal notes, e.g. a cpu value in (1, 4] clamped to 1.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<Warning>,
}

/// `POST /v1/telemetry`: apply a batch of worker snapshots atomically (all
/// or none).
#[utoipa::path(post, path = "/v1/telemetry", tag = "telemetry", request_body = TelemetryBatch,
    responses(
        (status = 200, description = "Every snapshot applied", body = Accepted),
        JsonBodyErrors,
        (status = 429, description = "New worker ids beyond `telemetry.max_workers` (`too_many_workers`)", body = ErrorBody),
        (status = 503, description = "Overloaded (`overloaded`, with `Retry-After`) or slower than `server.request_timeout_ms` (`timeout`)", body = ErrorBody),
    ))]
pub(super) async fn telemetry(
    State(st): State<AppState>,
    body: Result<ApiJson<TelemetryBatch>, ApiError>,
) -> Result<Json<Accepted>, ApiError> {
    // Every refusal counts, the body's too (415, 413, 400, 422 `invalid_body`).
    let ApiJson(batch) = body.inspect_err(|e| {
        st.metrics.telemetry_rejected(e.code);
        warn_rejected(&st, None, e);
    })?;
    let out = st
        .engine
        .ingest(
            &batch.snapshots,
            st.clock.monotonic_ms(),
            st.clock.wall_ms(),
        )
        .map_err(|e| {
            let worker = match &e {
                IngestError::Invalid(d) => d.first().map(|d| d.worker_id.clone()),
                _ => None,
            };
            let e = ApiError::from(e);
            st.metrics.telemetry_rejected(e.code);
            warn_rejected(&st, worker.as_deref(), &e);
            e
        })?;
    st.metrics.snapshots_accepted(out.accepted);
    if out.registered > 0 {
        let ids: Vec<&str> = out.new_worker_ids.iter().map(|id| &**id).collect();
        let unnamed = out.registered - ids.len();
        tracing::info!(registered = out.registered, workers = %ids.join(","), unnamed, "new workers registered");
    }
    Ok(Json(Accepted {
        accepted: out.accepted,
        warnings: out.warnings,
    }))
}

/// A rejected telemetry batch at warn level, at most one line per
/// [`super::warn_limit::DEFAULT_WARN_INTERVAL_MS`]: the first problem and,
/// when one snapshot is at fault, its worker id.
fn warn_rejected(st: &AppState, worker: Option<&str>, e: &ApiError) {
    if let Some(held_back) = st.telemetry_warn.admit(st.clock.monotonic_ms()) {
        tracing::warn!(
            worker_id = worker.unwrap_or("-"),
            code = e.code,
            problem = %e.message,
            held_back,
            "telemetry rejected"
        );
    }
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, ApiError> {
    match h.get(name) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .map(Some)
            .map_err(|_| ApiError::unprocessable(format!("header {name} is not visible ASCII"))),
    }
}

/// The body's context with absent fields filled from `X-*` headers.
fn merged_context(body: Option<RequestContext>, h: &HeaderMap) -> Result<RequestContext, ApiError> {
    let mut ctx = body.unwrap_or_default();
    if ctx.request_type.is_none()
        && let Some(v) = header(h, "x-request-type")?
    {
        ctx.request_type = Some(RequestType::parse(v).ok_or_else(|| {
            ApiError::unprocessable(format!(
                "header X-Request-Type `{v}` is not one of GET, PUT, DELETE, MGET"
            ))
        })?);
    }
    if ctx.client_region.is_none()
        && let Some(v) = header(h, "x-client-region")?
    {
        if v.len() > 64 {
            return Err(ApiError::unprocessable(
                "header X-Client-Region is longer than 64 bytes",
            ));
        }
        ctx.client_region = Some(v.to_owned());
    }
    if ctx.timeout_ms.is_none()
        && let Some(v) = header(h, "x-timeout-ms")?
    {
        ctx.timeout_ms = Some(v.parse().map_err(|_| {
            ApiError::unprocessable(format!(
                "header X-Timeout-Ms `{v}` is not a whole number of ms"
            ))
        })?);
    }
    if ctx.batch_size.is_none()
        && let Some(v) = header(h, "x-batch-size")?
    {
        ctx.batch_size = Some(v.parse().map_err(|_| {
            ApiError::unprocessable(format!("header X-Batch-Size `{v}` is not a whole number"))
        })?);
    }
    if ctx
        .client_region
        .as_ref()
        .is_some_and(|r| r.len() > 64 || r.chars().any(char::is_control))
    {
        return Err(ApiError::unprocessable(
            "`context.client_region` must be at most 64 bytes without control characters",
        ));
    }
    if ctx.batch_size == Some(0) {
        return Err(ApiError::unprocessable(
            "`context.batch_size` must be at least 1",
        ));
    }
    if let Some(t) = ctx.timeout_ms.filter(|&t| t > MAX_TIMEOUT_MS) {
        return Err(ApiError::unprocessable(format!(
            "`context.timeout_ms` must be at most {MAX_TIMEOUT_MS} ms (one day), got {t}"
        )));
    }
    Ok(ctx)
}

/// Largest client deadline a score call may name, ms (one day, as feedback's
/// `latency_ms`): a deadline sets the failure penalty and the expiry of the
/// outstanding pick, so an absurd one would enter the worker's state.
pub const MAX_TIMEOUT_MS: u64 = 86_400_000;

/// `POST /v1/score`: score the candidates and pick one; explain each score
/// when `explain` asks.
///
/// A call computes inline or on the blocking pool as
/// `server.score_dispatch` says (see `http::dispatch`); each stage is timed
/// in `scorer_score_stage_seconds`.
#[utoipa::path(post, path = "/v1/score", tag = "scoring", request_body = ScoreRequest,
    params(
        ("X-Request-Type" = Option<String>, Header, description = "`GET`, `PUT`, `DELETE` or `MGET`, when `context.request_type` is absent"),
        ("X-Client-Region" = Option<String>, Header, description = "Client region (at most 64 bytes), when `context.client_region` is absent"),
        ("X-Timeout-Ms" = Option<u64>, Header, format = "uint64", description = "Client deadline, ms, when `context.timeout_ms` is absent"),
        ("X-Batch-Size" = Option<u32>, Header, format = "uint32", minimum = 1, description = "Keys in the request (>= 1), when `context.batch_size` is absent"),
    ),
    responses(
        (status = 200, description = "Scores, ranking, pick and its probability", body = ScoreResponse),
        JsonBodyErrors,
        (status = 503, description = "No candidate is alive (`no_eligible_workers`), overloaded (`overloaded`, with `Retry-After`) or too slow (`timeout`)", body = ErrorBody),
    ))]
pub(super) async fn score(
    State(st): State<AppState>,
    read_start: Option<Extension<ReadStart>>,
    headers: HeaderMap,
    ApiJson(req): ApiJson<ScoreRequest>,
) -> Result<impl IntoResponse, ApiError> {
    let entered = Instant::now();
    if let Some(Extension(ReadStart(t))) = read_start {
        st.metrics
            .observe_stage(ScoreStage::ReadParse, (entered - t).as_secs_f64());
    }
    let ctx = merged_context(req.context.clone(), &headers)?;
    let id = uuid::Uuid::now_v7().to_string();
    let (mono, wall) = (st.clock.monotonic_ms(), st.clock.wall_ms());
    let place = st.in_progress.enter();
    let run = Run::choose(st.engine.config().server.score_dispatch, &place);
    st.metrics.dispatched(run.as_str());
    let (engine, metrics, busy) = (
        st.engine.clone(),
        st.metrics.clone(),
        st.in_progress.clone(),
    );
    let work = move || -> Result<(Vec<u8>, Instant), ApiError> {
        let start = Instant::now();
        metrics.observe_stage(ScoreStage::Queue, (start - entered).as_secs_f64());
        let mut timer = metrics.decision_stage_timer(start);
        let resp = match req.seed {
            Some(seed) => {
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
                engine.score_observed(&req, &ctx, mono, id, &mut rng, &mut timer)
            }
            None => engine.score_observed(&req, &ctx, mono, id, &mut rand::rng(), &mut timer),
        }?;
        let scored = Instant::now();
        metrics.observe_score((scored - start).as_secs_f64());
        metrics.observe_stage(ScoreStage::Engine, (scored - start).as_secs_f64());
        engine.log_scored(&req, &ctx, &resp, wall);
        let logged = Instant::now();
        metrics.observe_stage(ScoreStage::Log, (logged - scored).as_secs_f64());
        let body =
            answer::render(&resp, req.explain).map_err(|e| ApiError::internal(e.to_string()))?;
        let done = Instant::now();
        metrics.observe_stage(ScoreStage::Serialise, (done - logged).as_secs_f64());
        busy.record_busy(done - start);
        Ok((body, done))
    };
    let (body, done) = match run {
        Run::Inline => work()?,
        Run::BlockInPlace => tokio::task::block_in_place(work)?,
        Run::Pool => tokio::task::spawn_blocking(work)
            .await
            .map_err(|e| ApiError::internal(e.to_string()))??,
    };
    drop(place);
    st.metrics
        .observe_stage(ScoreStage::Return, done.elapsed().as_secs_f64());
    Ok(([(header::CONTENT_TYPE, "application/json")], body))
}

/// `GET /v1/log/stats`: decision-log counters (all zero without a log).
#[utoipa::path(get, path = "/v1/log/stats", tag = "operations",
    responses((status = 200, description = "`{enabled, stats: {written, dropped, files, bytes, …}}`", body = Object)))]
pub(super) async fn log_stats(State(st): State<AppState>) -> impl IntoResponse {
    let stats = st
        .engine
        .decision_log()
        .map(|l| l.stats())
        .unwrap_or_default();
    let enabled = st.engine.decision_log().is_some();
    Json(json!({ "enabled": enabled, "stats": stats }))
}

/// `GET /v1/stats`: decision, panic-mode and feedback counters.
#[utoipa::path(get, path = "/v1/stats", tag = "operations",
    responses((status = 200, description = "Counters since start", body = CounterSnapshot)))]
pub(super) async fn stats(State(st): State<AppState>) -> impl IntoResponse {
    Json(st.engine.counters())
}

#[derive(Serialize)]
struct WorkerInfo {
    worker_id: String,
    last_report_age_ms: u64,
    alive: bool,
    reports: u64,
    warming_up: bool,
    warmup_remaining_ms: u64,
    smoothed: Smoothed,
    compacting: bool,
    under_repair: bool,
    version_lag: u64,
    region: Option<String>,
    capacity: f64,
    cpu_clamped: bool,
    history: HistoryView,
    penalty: PenaltyView,
    /// Selection weight a decision would give this worker now if it is live
    /// (`weight` in a score answer): capacity × the slow-start ramp,
    /// new-worker ramp included.
    weight: f64,
    /// Picks without feedback yet.
    outstanding: u32,
    /// Picks made since the worker was first seen (a counter: the status
    /// page's share of recent picks is its change between two reads).
    picks: u64,
    /// Peak-EWMA service time from outcomes, ms; absent before any outcome.
    service_time_ms: Option<f64>,
    /// Outcomes seen.
    outcomes: u64,
    /// Observed failure rate, fraction 0..=1.
    observed_failure_rate: f64,
    /// Ejected by outlier detection until this many ms from now (0: not ejected).
    outlier_ejected_for_ms: u64,
}

#[derive(Serialize)]
struct HistoryView {
    samples: usize,
    p99_slope_ms_per_s: f64,
    error_rate_stddev: f64,
    cache_hit_slope_per_s: Option<f64>,
}

impl From<HistoryStats> for HistoryView {
    fn from(h: HistoryStats) -> Self {
        Self {
            samples: h.samples,
            p99_slope_ms_per_s: h.p99_slope_ms_per_s,
            error_rate_stddev: h.error_rate_stddev,
            cache_hit_slope_per_s: h.cache_hit_slope_per_s,
        }
    }
}

/// Query of `GET /v1/workers`.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct WorkersQuery {
    /// Workers per page, 1..=10_000. Default 1000.
    #[param(format = "uint64")]
    limit: Option<usize>,
    /// Workers to skip (by id order). Default 0.
    #[param(format = "uint64")]
    offset: Option<usize>,
}

/// Largest `limit` of `GET /v1/workers`.
pub const MAX_WORKERS_PAGE: usize = 10_000;

/// `GET /v1/workers?limit=&offset=`: tracked workers sorted by id, one page.
#[utoipa::path(get, path = "/v1/workers", tag = "operations", params(WorkersQuery),
    responses(
        (status = 200, description = "`{total, offset, workers: [...]}`: smoothed telemetry, penalty state, in-flight picks per worker", body = Object),
        (status = 422, description = "Bad `limit` or `offset`", body = ErrorBody),
    ))]
pub(super) async fn workers(
    State(st): State<AppState>,
    q: Result<axum::extract::Query<WorkersQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let q = q.map_err(|e| ApiError::unprocessable(e.body_text()))?.0;
    let limit = q.limit.unwrap_or(1000);
    if !(1..=MAX_WORKERS_PAGE).contains(&limit) {
        return Err(ApiError::unprocessable(format!(
            "`limit` must be 1..={MAX_WORKERS_PAGE}, got {limit}"
        )));
    }
    let offset = q.offset.unwrap_or(0);
    let now = st.clock.monotonic_ms();
    let cfg = st.engine.config();
    let mut slots = st.engine.registry().slots();
    let total = slots.len();
    slots.sort_by(|a, b| a.view().worker_id.cmp(&b.view().worker_id));
    let out: Vec<WorkerInfo> = slots
        .iter()
        .skip(offset)
        .take(limit)
        .map(|slot| {
            let v = slot.view_full();
            let registered = v.registered_for_ms(now);
            let penalty = v.penalty.state_at(now, &cfg.penalty);
            let ev = slot.evidence().snapshot();
            let weight = scorer_engine::listed_weight(&v, &penalty, &ev, now, &cfg);
            WorkerInfo {
                worker_id: v.worker_id.to_string(),
                last_report_age_ms: v.age_ms(now),
                alive: v.age_ms(now) <= cfg.telemetry.dead_after_ms,
                reports: v.reports,
                warming_up: registered < cfg.scoring.warmup_ms,
                warmup_remaining_ms: cfg.scoring.warmup_ms.saturating_sub(registered),
                smoothed: v.smoothed,
                compacting: v.compacting,
                under_repair: v.under_repair,
                version_lag: v.version_lag,
                region: v.region.as_deref().map(str::to_owned),
                capacity: v.capacity,
                cpu_clamped: v.cpu_clamped,
                history: v.history.into(),
                penalty,
                weight,
                outstanding: ev.outstanding,
                picks: ev.picks,
                service_time_ms: ev.service.last_ms(),
                outcomes: ev.outcomes,
                observed_failure_rate: ev.failure_rate,
                outlier_ejected_for_ms: ev.outlier.ejected_until_ms.saturating_sub(now),
            }
        })
        .collect();
    Ok(Json(
        json!({ "total": total, "offset": offset, "workers": out }),
    ))
}

/// `GET /v1/features`: the observation vector's schema.
#[utoipa::path(get, path = "/v1/features", tag = "scoring",
    responses((status = 200, description = "`{version, hash, count, features: [{index, name, unit, impute, ...}]}`", body = Object)))]
pub(super) async fn features() -> impl IntoResponse {
    Json(json!({
        "version": FEATURE_SCHEMA_VERSION,
        "hash": schema_hash(),
        "count": FEATURE_COUNT,
        "imputation": "a missing signal takes the feature's `impute` value; the vector never holds NaN",
        "features": &FEATURES[..],
    }))
}

/// `GET /healthz`: the process is up.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "`{\"status\": \"ok\"}`", body = Object)))]
pub(super) async fn healthz() -> impl IntoResponse {
    Json(json!({ "status": "ok" }))
}

/// `GET /readyz`: 200 once at least one live worker is known, else 503.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "`{status: \"ready\", workers}`", body = Object),
        (status = 503, description = "`{status: \"not_ready\", workers, reason}`: no worker has reported within `telemetry.dead_after_ms`", body = Object),
    ))]
pub(super) async fn readyz(State(st): State<AppState>) -> impl IntoResponse {
    let now = st.clock.monotonic_ms();
    let live = st.engine.has_live_worker(now);
    let workers = st.engine.registry().len();
    if live {
        (
            StatusCode::OK,
            Json(json!({ "status": "ready", "workers": workers })),
        )
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "status": "not_ready", "workers": workers,
                         "reason": "no worker has reported within telemetry.dead_after_ms" })),
        )
    }
}

/// Known route, wrong method: 405 with a JSON body.
pub(super) async fn method_not_allowed(method: axum::http::Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{method} is not allowed on {}", uri.path()),
    )
}

/// Unknown routes: 404 with a JSON body.
pub(super) async fn not_found(uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no route for {}", uri.path()),
    )
}
