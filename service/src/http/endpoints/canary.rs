//! The configuration canary (admin role): start one from the config file on
//! a slice of the decisions, read its arms, promote it to every decision or
//! abort it. See [`scorer_engine::canary`].

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde_json::{Value, json};

use super::reconfigure::{refused, reload_on_own_thread};
use crate::http::auth::Caller;
use crate::http::error_body::{AdminErrors, ErrorBody, JsonBodyErrors};
use crate::http::{ApiError, ApiJson, AppState};
use scorer_engine::CanaryError;
use scorer_engine::canary::{CanaryRequest, CanaryStatus};
use scorer_engine::config_reload::ReloadError;

/// Query of `POST /v1/admin/config/canary`.
#[derive(Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct CanaryQuery {
    /// Waive the `[reload] max_weight_step` limit. Default false.
    force: Option<bool>,
}

fn canary_refused(e: &CanaryError) -> ApiError {
    let (status, code) = match e {
        CanaryError::Reload(r) => return refused(r),
        CanaryError::Invalid(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_canary"),
        CanaryError::NotCanaryable(_) => (StatusCode::UNPROCESSABLE_ENTITY, "not_canaryable"),
        CanaryError::NoChange(_) => (StatusCode::UNPROCESSABLE_ENTITY, "no_change"),
        CanaryError::Running(_) => (StatusCode::CONFLICT, "canary_running"),
        CanaryError::ModelAb => (StatusCode::CONFLICT, "experiment_running"),
        CanaryError::NoCanary => (StatusCode::CONFLICT, "no_canary"),
    };
    let mut err = ApiError::new(status, code, e.to_string());
    if let CanaryError::NotCanaryable(keys) = e {
        err.details = Some(json!({ "keys": keys }));
    }
    err
}

/// `POST /v1/admin/config/canary[?force=true]`: re-reads the configuration
/// as a reload does and, instead of applying it to every decision, runs it
/// as a canary on the slice the body names (a fraction of keys by hash, or
/// a key prefix), beside the configuration in force. Same checks as a
/// reload; only the keys read per decision may differ.
#[utoipa::path(post, path = "/v1/admin/config/canary", tag = "admin", params(CanaryQuery),
    request_body = CanaryRequest,
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "Started", body = CanaryStatus),
        AdminErrors,
        (status = 409, description = "A canary runs already (`canary_running`), or a model A/B split does (`experiment_running`)", body = ErrorBody),
        JsonBodyErrors,
        (status = 422, description = "Refused, nothing changed: `invalid_canary` (the split or reason), `no_change`, `not_canaryable` (details.keys), or as a reload: `invalid_config`, `restart_required`, `weight_step_too_large`", body = ErrorBody),
    ))]
pub(crate) async fn start(
    State(st): State<AppState>,
    caller: Option<Extension<Caller>>,
    q: Result<Query<CanaryQuery>, QueryRejection>,
    ApiJson(req): ApiJson<CanaryRequest>,
) -> Result<Json<CanaryStatus>, ApiError> {
    let force = q
        .map_err(|e| ApiError::unprocessable(e.body_text()))?
        .0
        .force
        .unwrap_or(false);
    let set_by = caller.map_or_else(|| "anonymous".into(), |Extension(Caller(name))| name);
    let cfg = (st.config_source)().map_err(|e| refused(&ReloadError::Invalid(e)))?;
    let cfg = st.promotions.apply(cfg);
    let now_ms = st.clock.monotonic_ms();
    st.engine
        .start_canary(cfg, &req, &set_by, force, now_ms)
        .map(Json)
        .map_err(|e| {
            tracing::warn!(error = %e, "config canary refused; nothing changed");
            canary_refused(&e)
        })
}

/// `GET /v1/config/canary` (reader role, for the status page): the canary
/// in force, with both arms' decisions, outcomes, error rate and p50/p99
/// latency.
#[utoipa::path(get, path = "/v1/config/canary", tag = "operations",
    responses(
        (status = 200, description = "The canary and its arms", body = CanaryStatus),
        (status = 404, description = "No canary runs (`no_canary`)", body = ErrorBody),
    ))]
pub(crate) async fn status(State(st): State<AppState>) -> Result<Json<CanaryStatus>, ApiError> {
    st.engine.canary().map(Json).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "no_canary",
            "no config canary is running",
        )
    })
}

/// `POST /v1/admin/config/canary/abort`: every decision scores with the
/// configuration in force again; answers the canary's last counts.
#[utoipa::path(post, path = "/v1/admin/config/canary/abort", tag = "admin",
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "Aborted: its last status", body = CanaryStatus),
        AdminErrors,
        (status = 409, description = "No canary runs (`no_canary`)", body = ErrorBody),
    ))]
pub(crate) async fn abort(State(st): State<AppState>) -> Result<Json<CanaryStatus>, ApiError> {
    st.engine.abort_canary().map(Json).map_err(|e| {
        tracing::info!(error = %e, "config canary abort refused");
        canary_refused(&e)
    })
}

/// `POST /v1/admin/config/canary/promote`: applies the candidate to every
/// decision through the reload's all-or-nothing path (models and TLS files
/// re-read; the weight step was checked when the canary started), which
/// ends the canary. `POST /v1/admin/config/rollback` then returns to the
/// configuration it replaced. The config file is not touched: it holds the
/// candidate already.
#[utoipa::path(post, path = "/v1/admin/config/canary/promote", tag = "admin",
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "Applied: `{applied: true, promoted: true, old_hash, new_hash, changes, forced: true, model, canary_ended}`", body = Object),
        AdminErrors,
        (status = 409, description = "No canary runs (`no_canary`)", body = ErrorBody),
        (status = 422, description = "Refused as a reload, nothing changed: `invalid_config`, `restart_required`, `model_refused`", body = ErrorBody),
    ))]
pub(crate) async fn promote(State(st): State<AppState>) -> Result<Json<Value>, ApiError> {
    let candidate = st
        .engine
        .canary_candidate()
        .ok_or_else(|| canary_refused(&CanaryError::NoCanary))?;
    let report = reload_on_own_thread(&st, candidate, true)
        .await
        .map_err(|e| ApiError::internal(format!("promotion failed: {e}")))?
        .map_err(|e| {
            tracing::warn!(error = %e, "config canary promotion refused; nothing changed");
            refused(&e)
        })?;
    tracing::warn!(new_hash = %report.new_hash, old_hash = %report.old_hash,
        "config canary promoted to every decision");
    let mut body = serde_json::to_value(report).unwrap_or(Value::Null);
    body["applied"] = Value::Bool(true);
    body["promoted"] = Value::Bool(true);
    Ok(Json(body))
}
