//! Model endpoints (issue #6): `GET /v1/model`, `GET /v1/shadow`.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::http::AppState;
use scorer_model::{ModelSet, Slot};

fn slot_json(slot: &Slot, now_ms: u64) -> Value {
    match slot {
        Slot::Ready(m) => {
            let c = &m.card;
            json!({
                "status": "loaded",
                "dir": m.dir.display().to_string(),
                "version": c.model_version,
                "loaded_at_ms": m.loaded_at_ms,
                "onnx_sha256_16": m.onnx_sha256,
                "golden_rows": m.golden_rows,
                "golden_max_abs_diff": m.golden_max_abs_diff,
                "breaker": m.breaker.state(now_ms),
                "breaker_opened": m.breaker.times_opened(),
                "breaker_consecutive_misses": m.breaker.consecutive_misses(),
                "card": {
                    "model_version": c.model_version,
                    "created_at": c.created_at,
                    "trainer_version": c.trainer_version,
                    "feature_schema_version": c.feature_schema_version,
                    "feature_schema_hash": c.feature_schema_hash,
                    "num_trees": c.num_trees,
                    "metrics": c.details.get("metrics"),
                    "parity": c.details.get("parity"),
                },
            })
        }
        Slot::Refused {
            dir,
            reason,
            message,
        } => json!({
            "status": "refused",
            "dir": dir.display().to_string(),
            "reason": reason.as_str(),
            "message": message,
        }),
    }
}

fn set_json(set: &ModelSet, now_ms: u64) -> Value {
    let c = &set.cfg;
    json!({
        "used": c.enabled && set.primary.model().is_some(),
        "generation": set.generation,
        "primary": slot_json(&set.primary, now_ms),
        "ab": set.ab.as_ref().map(|s| json!({"fraction": c.ab.fraction, "model": slot_json(s, now_ms)})),
        "shadow": set.shadow.as_ref().map(|s| slot_json(s, now_ms)),
        "config": {
            "enabled": c.enabled,
            "budget_us": c.budget_us,
            "breaker_after": c.breaker_after,
            "breaker_open_ms": c.breaker_open_ms,
            "blend_model": c.blend_model,
            "blend_rule": c.blend_rule,
            "scale": c.scale,
            "factor_min": c.factor_min,
            "factor_max": c.factor_max,
        },
    })
}

/// `GET /v1/model`: the models in use, their cards, breaker states, and
/// since-start counters with inference latency percentiles (µs).
#[utoipa::path(get, path = "/v1/model", tag = "model",
    responses((status = 200, description = "`{used, generation, primary, ab, shadow, config, stats, promotions: {pinned, promotions, rollbacks, refused_pinned}}`", body = Object)))]
pub(crate) async fn model(State(st): State<AppState>) -> Json<Value> {
    let hub = st.engine.models();
    let mut v = set_json(&hub.current(), st.clock.monotonic_ms());
    v["stats"] = serde_json::to_value(hub.stats().snapshot()).unwrap_or(Value::Null);
    v["promotions"] = serde_json::to_value(st.promotions.stats()).unwrap_or(Value::Null);
    Json(v)
}

/// `GET /v1/shadow`: shadow comparison since start.
#[utoipa::path(get, path = "/v1/shadow", tag = "model",
    responses((status = 200, description = "`{shadow, report: {decisions, top_pick_agreement, spearman_mean, …}}`", body = Object)))]
pub(crate) async fn shadow(State(st): State<AppState>) -> Json<Value> {
    let hub = st.engine.models();
    let set = hub.current();
    Json(json!({
        "shadow": set.shadow.as_ref().map(|s| slot_json(s, st.clock.monotonic_ms())),
        "report": hub.shadow_stats().report(),
    }))
}
