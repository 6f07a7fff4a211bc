//! `POST /v1/admin/reload` and `GET /v1/admin/config` (issues #6 and #8).

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::http::error_body::{AdminErrors, ErrorBody};
use crate::http::transport::tls::{self, ServerTls};
use crate::http::{ApiError, AppState};
use scorer_engine::config::Config;
use scorer_engine::config_reload::{ReloadError, redact_secrets};
use scorer_engine::{ConfigReloadReport, Engine};

/// Query of `POST /v1/admin/reload`.
#[derive(Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct ReloadQuery {
    /// Waive the `[reload] max_weight_step` limit. Default false.
    force: Option<bool>,
}

/// Applies `cfg` (with the promoted model, if any) on a thread of its own
/// and awaits it, all or nothing: the TLS files are read first (a reload
/// whose files do not load is refused as `invalid_config`), then
/// [`scorer_engine::Engine::reload_config`] runs, and only when it applies
/// does the new certificate serve new connections.
///
/// Not on tokio's blocking pool: the score path runs there with one thread
/// per core (`service/src/main.rs`), and a reload reads and parses model
/// files, which a slow disk can stretch without bound; on the pool, two
/// such reloads took every scoring thread (found by a fresh-eyes run: every
/// `/v1/score` then timed out).
///
/// # Errors
/// The thread could not be started, or it panicked: the message.
pub async fn reload_on_own_thread(
    st: &AppState,
    cfg: Config,
    force: bool,
) -> Result<Result<ConfigReloadReport, ReloadError>, String> {
    let cfg = st.promotions.apply(cfg);
    let (engine, tls) = (st.engine.clone(), st.tls.clone());
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("config-reload".into())
        .spawn(move || {
            let _ = tx.send(reload_with_tls(&engine, tls.as_deref(), cfg, force));
        })
        .map_err(|e| format!("cannot start the reload thread: {e}"))?;
    rx.await
        .map_err(|_| "the reload thread stopped without an answer".to_owned())
}

fn reload_with_tls(
    engine: &Engine,
    tls: Option<&ServerTls>,
    cfg: Config,
    force: bool,
) -> Result<ConfigReloadReport, ReloadError> {
    // Without TLS now, a config that turns it on is refused by the engine
    // (restart_required); its files need not be read.
    let acceptor = match tls {
        Some(_) => tls::build(&cfg.server.tls).map_err(|e| ReloadError::Invalid(e.into()))?,
        None => None,
    };
    let report = engine.reload_config(cfg, force)?;
    if let (Some(tls), Some(acceptor)) = (tls, acceptor) {
        tls.install(acceptor);
        tracing::info!("TLS certificate and key re-read; new connections use them");
    }
    Ok(report)
}

pub(crate) fn refused(e: &ReloadError) -> ApiError {
    let code = match e {
        ReloadError::Invalid(_) => "invalid_config",
        ReloadError::RestartRequired { .. } => "restart_required",
        ReloadError::StepTooLarge { .. } => "weight_step_too_large",
        ReloadError::Model(_) => "model_refused",
    };
    let mut err = ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, code, e.to_string());
    if let ReloadError::RestartRequired { keys } = e {
        err.details = Some(json!({ "keys": keys }));
    }
    err
}

/// `POST /v1/admin/reload[?force=true]`: re-reads the configuration through
/// the state's config source and applies it with
/// [`scorer_engine::Engine::reload_config`] (models included). 200 with
/// `{"applied": true, old_hash, new_hash, changes, forced, model}`; 422 with
/// the error body (`invalid_config`, `restart_required`,
/// `weight_step_too_large`, `model_refused`) when refused, nothing changed.
#[utoipa::path(post, path = "/v1/admin/reload", tag = "admin", params(ReloadQuery),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "Applied: `{applied: true, old_hash, new_hash, changes: [{key, old, new}], forced, model}`", body = Object),
        AdminErrors,
        (status = 422, description = "Refused, nothing changed: `invalid_config`, `restart_required`, `weight_step_too_large`, `model_refused`", body = ErrorBody),
    ))]
pub(crate) async fn reload(
    State(st): State<AppState>,
    q: Result<Query<ReloadQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let force = q
        .map_err(|e| ApiError::unprocessable(e.body_text()))?
        .0
        .force
        .unwrap_or(false);
    let cfg = (st.config_source)().map_err(|e| {
        let e = ReloadError::Invalid(e);
        tracing::warn!(error = %e, "reload refused; nothing changed");
        refused(&e)
    })?;
    let report = reload_on_own_thread(&st, cfg, force)
        .await
        .map_err(|e| ApiError::internal(format!("reload failed: {e}")))?
        .map_err(|e| {
            tracing::warn!(error = %e, "reload refused; nothing changed");
            refused(&e)
        })?;
    let mut body = serde_json::to_value(report).unwrap_or(Value::Null);
    body["applied"] = Value::Bool(true);
    Ok(Json(body))
}

/// `POST /v1/admin/config/rollback`: puts back the configuration the last
/// applied change replaced, through the same all-or-nothing path as a
/// reload (models and TLS files re-read; the weight step limit waived, as
/// the way back is a configuration that was in force). Rolling back twice
/// returns to where it started. The config file is not touched: fix it
/// before the next reload or SIGHUP, which would apply it again.
#[utoipa::path(post, path = "/v1/admin/config/rollback", tag = "admin",
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "Applied: `{applied: true, rolled_back: true, old_hash, new_hash, changes, forced: true, model}`", body = Object),
        AdminErrors,
        (status = 409, description = "No change has been applied since start (`no_previous_config`)", body = ErrorBody),
        (status = 422, description = "Refused, nothing changed: `invalid_config` (e.g. a TLS file gone), `restart_required`, `model_refused`", body = ErrorBody),
    ))]
pub(crate) async fn config_rollback(State(st): State<AppState>) -> Result<Json<Value>, ApiError> {
    let Some(previous) = st.engine.previous_config() else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "no_previous_config",
            "no configuration change has been applied since the service started",
        ));
    };
    let report = reload_on_own_thread(&st, (*previous).clone(), true)
        .await
        .map_err(|e| ApiError::internal(format!("rollback failed: {e}")))?
        .map_err(|e| {
            tracing::warn!(error = %e, "config rollback refused; nothing changed");
            refused(&e)
        })?;
    tracing::warn!(new_hash = %report.new_hash, old_hash = %report.old_hash,
        "configuration rolled back; the config file still holds the newer one");
    let mut body = serde_json::to_value(report).unwrap_or(Value::Null);
    body["applied"] = Value::Bool(true);
    body["rolled_back"] = Value::Bool(true);
    Ok(Json(body))
}

/// `GET /v1/admin/config`: the configuration in force and its hash, secrets
/// shown as `"<redacted>"`.
#[utoipa::path(get, path = "/v1/admin/config", tag = "admin",
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "`{hash, config}`", body = Object),
        AdminErrors,
    ))]
pub(crate) async fn config_view(State(st): State<AppState>) -> Json<Value> {
    let mut config = serde_json::to_value(&*st.engine.config()).unwrap_or(Value::Null);
    redact_secrets(&mut config);
    Json(json!({ "hash": &*st.engine.config_hash(), "config": config }))
}
