//! `POST /v1/telemetry`: worker reports.

use axum::Json;
use axum::extract::State;
use scorer_core::state::IngestError;
use scorer_core::telemetry::TelemetryBatch;
use scorer_core::telemetry::validate::Warning;
use serde::Serialize;

use crate::http::error_body::{ErrorBody, JsonBodyErrors};
use crate::http::{ApiError, ApiJson, AppState};

/// Answer of `POST /v1/telemetry`.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct Accepted {
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
pub(crate) async fn telemetry(
    State(st): State<AppState>,
    body: Result<ApiJson<TelemetryBatch>, ApiError>,
) -> Result<Json<Accepted>, ApiError> {
    // Every refusal counts, the body's too (415, 413, 400, 422 `invalid_body`).
    let ApiJson(batch) = body.inspect_err(|e| {
        st.metrics.telemetry_rejected(e.code);
        warn_rejected(&st, None, e);
    })?;
    let received_ms = st.clock.monotonic_ms();
    let out = st
        .engine
        .ingest(&batch.snapshots, received_ms, st.clock.wall_ms())
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
    st.view_hub.publish(&batch.snapshots, received_ms);
    if st.bus.is_some() {
        st.share(crate::bus::Outgoing::Telemetry(batch.snapshots.clone()));
    }
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
/// [`crate::http::warn_limit::DEFAULT_WARN_INTERVAL_MS`]: the first problem and,
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
