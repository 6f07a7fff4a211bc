//! Operations: `/v1/stats`, `/v1/log/stats`, `/v1/features`, `/healthz`,
//! `/readyz`, and the JSON 404 and 405 answers.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::IntoResponse;
use scorer_core::features::{FEATURE_COUNT, FEATURE_SCHEMA_VERSION, FEATURES, schema_hash};
use scorer_engine::CounterSnapshot;
use serde_json::json;

use crate::http::{ApiError, AppState};

/// `GET /v1/log/stats`: decision-log counters (all zero without a log).
#[utoipa::path(get, path = "/v1/log/stats", tag = "operations",
    responses((status = 200, description = "`{enabled, stats: {written, dropped, files, bytes, …}}`", body = Object)))]
pub(crate) async fn log_stats(State(st): State<AppState>) -> impl IntoResponse {
    let stats = st.decision_log().map(|l| l.stats()).unwrap_or_default();
    let enabled = st.decision_log().is_some();
    Json(json!({ "enabled": enabled, "stats": stats }))
}

/// `GET /v1/stats`: decision, panic-mode and feedback counters.
#[utoipa::path(get, path = "/v1/stats", tag = "operations",
    responses((status = 200, description = "Counters since start", body = CounterSnapshot)))]
pub(crate) async fn stats(State(st): State<AppState>) -> impl IntoResponse {
    Json(st.engine.counters())
}

/// `GET /v1/features`: the observation vector's schema.
#[utoipa::path(get, path = "/v1/features", tag = "scoring",
    responses((status = 200, description = "`{version, hash, count, features: [{index, name, unit, impute, ...}]}`", body = Object)))]
pub(crate) async fn features() -> impl IntoResponse {
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
pub(crate) async fn healthz() -> impl IntoResponse {
    Json(json!({ "status": "ok" }))
}

/// `GET /readyz`: 200 once at least one live worker is known, else 503.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "`{status: \"ready\", workers, decision_log?}`; `decision_log` (with the log on) is `{status: \"ok\"}` or `{status: \"writes_failing\", dropped, write_errors}` (scoring goes on either way)", body = Object),
        (status = 503, description = "`{status: \"not_ready\", workers, reason, decision_log?}`: no worker has reported within `telemetry.dead_after_ms`", body = Object),
    ))]
pub(crate) async fn readyz(State(st): State<AppState>) -> impl IntoResponse {
    let now = st.clock.monotonic_ms();
    let live = st.engine.has_live_worker(now);
    let workers = st.engine.registry().len();
    let mut body = if live {
        json!({ "status": "ready", "workers": workers })
    } else {
        json!({ "status": "not_ready", "workers": workers,
                "reason": "no worker has reported within telemetry.dead_after_ms" })
    };
    // Scoring does not depend on the log, so a failing log does not make the
    // service unready; it is said here for whoever watches readiness.
    if let Some(log) = st.decision_log() {
        let l = log.stats();
        body["decision_log"] = if l.writes_failing > 0 {
            json!({ "status": "writes_failing", "dropped": l.dropped, "write_errors": l.write_errors })
        } else {
            json!({ "status": "ok" })
        };
    }
    // A replica cut off from the bus still scores on what reaches it; it
    // says so, and since when it heard from a peer.
    if let Some(link) = &st.bus {
        let last = link.last_applied_ms();
        body["bus"] = json!({
            "status": if link.bus().connected() { "connected" } else { "disconnected" },
            "replica": link.bus().replica(),
            "last_peer_message_age_ms": (last > 0).then(|| now.saturating_sub(last)),
        });
    }
    let status = if live {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body))
}

/// Known route, wrong method: 405 with a JSON body.
pub(crate) async fn method_not_allowed(method: axum::http::Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{method} is not allowed on {}", uri.path()),
    )
}

/// Unknown routes: 404 with a JSON body.
pub(crate) async fn not_found(uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no route for {}", uri.path()),
    )
}
