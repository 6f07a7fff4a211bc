//! The operator's worker overrides (admin role): drain, disable or weight one
//! worker, list them, clear one or all. See [`scorer_engine::overrides`]
//! for what each does.

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::Serialize;

use crate::http::auth::Caller;
use crate::http::error_body::{AdminErrors, ErrorBody, JsonBodyErrors};
use crate::http::{ApiError, ApiJson, AppState};
use scorer_core::telemetry::validate::is_valid_worker_id;
use scorer_engine::overrides::{OverrideError, OverrideRequest, WorkerOverride};

/// The overrides in force.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct OverrideList {
    /// By worker id.
    overrides: Vec<WorkerOverride>,
}

/// What a clear removed.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct Cleared {
    /// The overrides that were in force, by worker id.
    cleared: Vec<WorkerOverride>,
}

fn worker_id(p: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    let id = p.map_err(|e| ApiError::unprocessable(e.body_text()))?.0;
    if !is_valid_worker_id(&id) {
        return Err(ApiError::unprocessable(
            "the worker id must be 1..=128 bytes with no control or invisible formatting characters and no whitespace at either end",
        ));
    }
    Ok(id)
}

fn refused(e: OverrideError) -> ApiError {
    match e {
        OverrideError::UnknownWorker(_) => {
            ApiError::new(StatusCode::NOT_FOUND, "unknown_worker", e.to_string())
        }
        OverrideError::Invalid(_) | OverrideError::TooMany => {
            ApiError::unprocessable(e.to_string())
        }
    }
}

/// `PUT /v1/admin/workers/{worker_id}/override`: drain, disable or weight a
/// worker the service knows, replacing its override if it had one. Logged
/// with the caller's credential name as `set_by`.
#[utoipa::path(put, path = "/v1/admin/workers/{worker_id}/override", tag = "admin",
    params(("worker_id" = String, Path, description = "A worker that has reported telemetry")),
    request_body = OverrideRequest,
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "Set", body = WorkerOverride),
        AdminErrors,
        (status = 404, description = "The worker never reported telemetry, or was forgotten (`unknown_worker`)", body = ErrorBody),
        JsonBodyErrors,
    ))]
pub(crate) async fn set_override(
    State(st): State<AppState>,
    caller: Option<Extension<Caller>>,
    id: Result<Path<String>, PathRejection>,
    ApiJson(req): ApiJson<OverrideRequest>,
) -> Result<Json<WorkerOverride>, ApiError> {
    let id = worker_id(id)?;
    let set_by = caller.map_or_else(|| "anonymous".into(), |Extension(Caller(name))| name);
    let now_ms = st.clock.monotonic_ms();
    let set = st
        .engine
        .set_override(&id, &req, &set_by, now_ms)
        .map_err(refused)?;
    st.share(crate::bus::Outgoing::Overrides);
    Ok(Json(set))
}

/// `DELETE /v1/admin/workers/{worker_id}/override`: clears the worker's
/// override; 404 `no_override` when it has none in force.
#[utoipa::path(delete, path = "/v1/admin/workers/{worker_id}/override", tag = "admin",
    params(("worker_id" = String, Path, description = "The worker")),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "Cleared: the override that was in force", body = Cleared),
        AdminErrors,
        (status = 404, description = "No override in force on the worker (`no_override`)", body = ErrorBody),
        (status = 422, description = "Not a valid worker id (`invalid_request`)", body = ErrorBody),
    ))]
pub(crate) async fn clear_override(
    State(st): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<Cleared>, ApiError> {
    let id = worker_id(id)?;
    let now_ms = st.clock.monotonic_ms();
    let Some(o) = st.engine.clear_override(&id, now_ms) else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "no_override",
            format!("worker `{id}` has no override in force"),
        ));
    };
    st.share(crate::bus::Outgoing::Overrides);
    Ok(Json(Cleared { cleared: vec![o] }))
}

/// `GET /v1/admin/overrides`: every override in force.
#[utoipa::path(get, path = "/v1/admin/overrides", tag = "admin",
    security((), ("bearer" = [])),
    responses((status = 200, description = "The overrides in force", body = OverrideList), AdminErrors))]
pub(crate) async fn list_overrides(State(st): State<AppState>) -> Json<OverrideList> {
    let now_ms = st.clock.monotonic_ms();
    Json(OverrideList {
        overrides: st.engine.overrides(now_ms),
    })
}

/// `DELETE /v1/admin/overrides`: clears every override in one call.
#[utoipa::path(delete, path = "/v1/admin/overrides", tag = "admin",
    security((), ("bearer" = [])),
    responses((status = 200, description = "Cleared: those that were in force", body = Cleared), AdminErrors))]
pub(crate) async fn clear_overrides(State(st): State<AppState>) -> Json<Cleared> {
    let now_ms = st.clock.monotonic_ms();
    let cleared = st.engine.clear_overrides(now_ms);
    st.share(crate::bus::Outgoing::Overrides);
    Json(Cleared { cleared })
}
