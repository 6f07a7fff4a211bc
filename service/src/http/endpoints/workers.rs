//! `GET /v1/workers`: every tracked worker's state, one page at a time.

use axum::Json;
use axum::extract::State;
use axum::response::IntoResponse;
use scorer_core::dynamics::PenaltyView;
use scorer_core::state::{HistoryStats, Smoothed};
use serde::Serialize;
use serde_json::json;

use crate::http::error_body::ErrorBody;
use crate::http::{ApiError, AppState};

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
    /// The operator's override in force (drain, disable, weight), if any.
    #[serde(rename = "override", skip_serializing_if = "Option::is_none")]
    operator_override: Option<scorer_engine::overrides::WorkerOverride>,
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
pub(crate) struct WorkersQuery {
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
pub(crate) async fn workers(
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
    let overrides = st.engine.override_table();
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
                operator_override: overrides
                    .get(&v.worker_id, now)
                    .map(|o| o.shown(&v.worker_id, now)),
            }
        })
        .collect();
    Ok(Json(
        json!({ "total": total, "offset": offset, "workers": out }),
    ))
}
