//! `POST /v1/admin/model/promote` and `POST /v1/admin/model/rollback`:
//! switch the served model to another directory without touching the
//! configuration's source (a service configured by environment variables
//! cannot have them changed), and back.
//!
//! A promotion vets the directory exactly as start-up does
//! ([`scorer_model::load_model_dir`]: card, feature schema hash, golden
//! rows), then applies the running configuration with `[model] dir` (and
//! `enabled`) changed through the same all-or-nothing reload as
//! `POST /v1/admin/reload`; a refused directory changes nothing. The
//! directory served before is kept for one rollback. A promotion holds
//! across `POST /v1/admin/reload` and SIGHUP for as long as the
//! configuration source still names the `[model] dir` it named at the
//! promotion; once the source names another, the source wins. It does not
//! survive a restart: put the directory in the configuration for that.
//!
//! `POST /v1/admin/model/pin` freezes the served model: until
//! `DELETE /v1/admin/model/pin`, promotions and rollbacks (an operator's or
//! the retraining loop's) answer 409 `model_pinned` and change nothing.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::http::ApiJson;
use crate::http::error_body::{AdminErrors, ErrorBody, JsonBodyErrors};
use crate::http::{ApiError, AppState};
use scorer_engine::Engine;
use scorer_engine::config::Config;

/// What promotions remember.
#[derive(Debug, Default)]
pub struct Promotions {
    state: Mutex<PromotionState>,
}

/// A model setting: `[model] dir` and whether the model is on.
#[derive(Debug, Clone, PartialEq)]
struct Served {
    dir: PathBuf,
    enabled: bool,
}

#[derive(Debug, Default, Clone)]
struct PromotionState {
    /// What was served before the last switch (for rollback).
    previous: Option<Served>,
    /// What is served by promotion, and the `[model] dir` the configuration
    /// source named when it was promoted.
    promoted: Option<(Served, PathBuf)>,
    /// Why the served model is pinned, while it is.
    pinned: Option<String>,
    /// Switches applied since start: promotions, rollbacks.
    promotions: u64,
    rollbacks: u64,
    /// Switches refused because the model was pinned.
    refused_pinned: u64,
}

/// What promotions did since start, for `/metrics` and `GET /v1/model`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PromotionStats {
    /// Why the served model is pinned; `None` when it is not.
    pub pinned: Option<String>,
    /// Promotions applied.
    pub promotions: u64,
    /// Rollbacks applied.
    pub rollbacks: u64,
    /// Promotions and rollbacks refused because the model was pinned.
    pub refused_pinned: u64,
}

/// Longest pin reason, bytes.
pub const MAX_PIN_REASON_BYTES: usize = 512;

/// Longest `dir` a promotion accepts, bytes (Linux's `PATH_MAX`).
pub const MAX_DIR_BYTES: usize = 4096;

/// `dir` for a message: at most 200 characters.
fn shown(dir: &std::path::Path) -> String {
    let s = dir.display().to_string();
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

impl Promotions {
    fn get(&self) -> PromotionState {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set(&self, s: PromotionState) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = s;
    }

    /// What promotions did since start.
    pub fn stats(&self) -> PromotionStats {
        let s = self.get();
        PromotionStats {
            pinned: s.pinned,
            promotions: s.promotions,
            rollbacks: s.rollbacks,
            refused_pinned: s.refused_pinned,
        }
    }

    /// Pins the served model for `reason` (`None`: unpins); what it was.
    fn set_pin(&self, reason: Option<String>) -> Option<String> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::replace(&mut s.pinned, reason)
    }

    /// `Err(model_pinned)` while the model is pinned (counted).
    fn check_unpinned(&self, action: &str) -> Result<(), ApiError> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match &s.pinned {
            None => Ok(()),
            Some(reason) => {
                let message = format!(
                    "the served model is pinned ({reason}): no {action} until DELETE /v1/admin/model/pin"
                );
                s.refused_pinned += 1;
                Err(ApiError::new(StatusCode::CONFLICT, "model_pinned", message))
            }
        }
    }

    /// `cfg` (from the configuration source) with the promoted directory in
    /// force, while the source still names the directory it named at the
    /// promotion; otherwise `cfg` as it is, and the promotion is forgotten.
    pub fn apply(&self, mut cfg: Config) -> Config {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match &s.promoted {
            Some((served, source_dir)) if *source_dir == cfg.model.dir => {
                cfg.model.dir = served.dir.clone();
                cfg.model.enabled = served.enabled;
            }
            Some(_) => s.promoted = None,
            None => {}
        }
        cfg
    }
}

/// Body of `POST /v1/admin/model/promote`.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PromoteRequest {
    /// Model directory to serve (as `[model] dir`: relative to the service's
    /// working directory, or absolute).
    dir: String,
}

/// Vets `to`'s directory (unless it turns the model off) and applies `cfg`
/// with it, on a thread of its own (model files are read; see
/// [`super::reconfigure::reload_on_own_thread`]).
async fn switch_on_own_thread(
    engine: Arc<Engine>,
    mut cfg: Config,
    to: Served,
    now_wall_ms: u64,
) -> Result<Value, ApiError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("model-promote".into())
        .spawn(move || {
            cfg.model.dir = to.dir.clone();
            cfg.model.enabled = to.enabled;
            let vetted = if to.enabled {
                scorer_model::load_model_dir(&to.dir, &cfg.model, now_wall_ms)
                    .map(|m| Some(m.card.model_version.clone()))
                    .map_err(|e| {
                        ApiError::new(
                            StatusCode::UNPROCESSABLE_ENTITY,
                            "model_refused",
                            format!("model directory {} refused: {e}", shown(&to.dir)),
                        )
                    })
            } else {
                Ok(None)
            };
            let result = vetted.and_then(|version| {
                engine
                    .reload_config(cfg, false)
                    .map(|r| {
                        json!({"model_version": version, "enabled": to.enabled,
                               "generation": r.model.generation, "config_hash": r.new_hash})
                    })
                    .map_err(|e| {
                        ApiError::new(
                            StatusCode::UNPROCESSABLE_ENTITY,
                            "model_refused",
                            e.to_string(),
                        )
                    })
            });
            let _ = tx.send(result);
        })
        .map_err(|e| ApiError::internal(format!("cannot start the promote thread: {e}")))?;
    rx.await
        .map_err(|_| ApiError::internal("the promote thread stopped without an answer"))?
}

async fn switch(st: &AppState, to: Served, action: &'static str) -> Result<Json<Value>, ApiError> {
    st.promotions.check_unpinned(action).inspect_err(|e| {
        tracing::warn!(dir = ?shown(&to.dir), error = %e.message, "model {action} refused; nothing changed");
    })?;
    let cfg = (*st.engine.config()).clone();
    let from = Served {
        dir: cfg.model.dir.clone(),
        enabled: cfg.model.enabled,
    };
    let source_dir = (st.config_source)().map(|c| c.model.dir).ok();
    let mut body = switch_on_own_thread(st.engine.clone(), cfg, to.clone(), st.clock.wall_ms())
        .await
        .inspect_err(|e| {
            tracing::warn!(dir = ?shown(&to.dir), error = %e.message, "model {action} refused; nothing changed");
        })?;
    let before = st.promotions.get();
    st.promotions.set(PromotionState {
        // Serving again what is served (a retry, or a new model in the same
        // directory) keeps the rollback target.
        previous: if from == to {
            before.previous
        } else {
            Some(from.clone())
        },
        promoted: source_dir
            .or_else(|| before.promoted.clone().map(|(_, s)| s))
            .map(|s| (to.clone(), s)),
        promotions: before.promotions + u64::from(action == "promotion"),
        rollbacks: before.rollbacks + u64::from(action == "rollback"),
        ..before
    });
    tracing::info!(from = ?from.dir, to = ?to.dir, enabled = to.enabled,
        version = %body["model_version"], "model {action} applied");
    body["applied"] = Value::Bool(true);
    body["dir"] = json!(to.dir);
    body["previous_dir"] = json!(from.dir);
    Ok(Json(body))
}

/// Body of `POST /v1/admin/model/pin`.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PinRequest {
    /// Why (shown in `GET /v1/model` and in refusals), 1..=512 bytes.
    reason: String,
}

/// `POST /v1/admin/model/pin` with `{"reason": …}`: freezes the served
/// model; promotions and rollbacks answer 409 `model_pinned` until
/// `DELETE /v1/admin/model/pin`. 200 with `{pinned, model_version}`.
#[utoipa::path(post, path = "/v1/admin/model/pin", tag = "admin", request_body = PinRequest,
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "Pinned: `{pinned: reason, model_version}`", body = Object),
        JsonBodyErrors,
        AdminErrors,
    ))]
pub(crate) async fn pin(
    State(st): State<AppState>,
    body: Result<ApiJson<PinRequest>, ApiError>,
) -> Result<Json<Value>, ApiError> {
    let ApiJson(req) = body?;
    let reason = req.reason.trim();
    if reason.is_empty() || reason.len() > MAX_PIN_REASON_BYTES || reason.contains('\0') {
        return Err(ApiError::unprocessable(format!(
            "`reason`: must say why (1..={MAX_PIN_REASON_BYTES} bytes, no NUL)"
        )));
    }
    let version = served_version(&st);
    st.promotions.set_pin(Some(reason.to_owned()));
    tracing::info!(%reason, version = ?version, "model pinned");
    Ok(Json(json!({"pinned": reason, "model_version": version})))
}

/// `DELETE /v1/admin/model/pin`: promotions and rollbacks apply again.
/// 200 with `{pinned: null, was_pinned}`.
#[utoipa::path(delete, path = "/v1/admin/model/pin", tag = "admin",
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "Unpinned: `{pinned: null, was_pinned}`", body = Object),
        AdminErrors,
    ))]
pub(crate) async fn unpin(State(st): State<AppState>) -> Json<Value> {
    let was = st.promotions.set_pin(None);
    if was.is_some() {
        tracing::info!(version = ?served_version(&st), "model unpinned");
    }
    Json(json!({"pinned": null, "was_pinned": was}))
}

fn served_version(st: &AppState) -> Option<String> {
    let set = st.engine.models().current();
    set.primary.model().map(|m| m.card.model_version.clone())
}

/// `POST /v1/admin/model/promote` with `{"dir": …}`: vets the directory and
/// serves it (see the module docs). 200 with `{applied, dir, previous_dir,
/// model_version, enabled, generation, config_hash}`; 422 `model_refused` (nothing
/// changed), 409 `model_pinned` or the usual body errors.
#[utoipa::path(post, path = "/v1/admin/model/promote", tag = "admin", request_body = PromoteRequest,
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "Served: `{applied: true, dir, previous_dir, model_version, generation, config_hash}`", body = Object),
        JsonBodyErrors,
        AdminErrors,
        (status = 409, description = "The served model is pinned (`model_pinned`); nothing changed", body = ErrorBody),
    ))]
pub(crate) async fn promote(
    State(st): State<AppState>,
    body: Result<ApiJson<PromoteRequest>, ApiError>,
) -> Result<Json<Value>, ApiError> {
    let ApiJson(req) = body?;
    if req.dir.trim().is_empty() || req.dir.contains('\0') || req.dir.len() > MAX_DIR_BYTES {
        return Err(ApiError::unprocessable(format!(
            "`dir`: must name a model directory (1..={MAX_DIR_BYTES} bytes, no NUL)"
        )));
    }
    let to = Served {
        dir: PathBuf::from(req.dir),
        enabled: true,
    };
    switch(&st, to, "promotion").await
}

/// `POST /v1/admin/model/rollback`: serves again what was served before the
/// last promotion or rollback (its directory vetted anew, or the model off
/// if it was off). 200 as promote; 409
/// `no_previous_model` when nothing was promoted, or `model_pinned`; 422
/// `model_refused`.
#[utoipa::path(post, path = "/v1/admin/model/rollback", tag = "admin",
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "Served: `{applied: true, dir, previous_dir, model_version, generation, config_hash}`", body = Object),
        AdminErrors,
        (status = 409, description = "Nothing to roll back to (`no_previous_model`), or the model is pinned (`model_pinned`)", body = ErrorBody),
        (status = 422, description = "The previous directory is refused now (`model_refused`); nothing changed", body = ErrorBody),
    ))]
pub(crate) async fn rollback(State(st): State<AppState>) -> Result<Json<Value>, ApiError> {
    let Some(previous) = st.promotions.get().previous else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "no_previous_model",
            "no model was promoted since start-up: nothing to roll back to",
        ));
    };
    switch(&st, previous, "rollback").await
}
