//! Promoting a model directory and rolling back over the admin API, for a
//! service whose configuration source cannot change (environment variables).

mod common;

use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use common::model_fixture::{config, fixture};
use common::{TestApp, WALL};
use scorer_core::clock::{ManualClock, SystemClock};
use scorer_engine::Engine;
use scorer_engine::config::Config;
use scorer_model::ModelHub;
use serde_json::json;
use service::{AppState, app};

/// An app whose reload source is `source` (what the binary re-reads).
fn app_with_source(cfg: Config, source: Arc<Mutex<Config>>) -> TestApp {
    let clock = Arc::new(ManualClock::new(1_000, WALL));
    let hub = Arc::new(ModelHub::load(&cfg.model, Arc::new(SystemClock::new())));
    let state = AppState::new(Engine::new(cfg).with_models(hub), clock.clone())
        .with_config_source(Arc::new(move || Ok(source.lock().expect("lock").clone())));
    TestApp {
        router: app(state.clone()),
        clock,
        state,
    }
}

async fn served_version(t: &TestApp) -> String {
    let (s, b) = t.get("/v1/model").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    b["primary"]["card"]["model_version"]
        .as_str()
        .or_else(|| b["primary"]["model_version"].as_str())
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn promote_vets_switches_survives_a_reload_and_rolls_back() {
    let fx = fixture("promote");
    let (v1, v2) = (fx.dir.join("v1"), fx.dir.join("v2"));
    let cfg = config(&v1);
    let source = Arc::new(Mutex::new(cfg.clone()));
    let t = app_with_source(cfg, source.clone());
    let first = served_version(&t).await;
    assert!(!first.is_empty());

    // A directory the service would refuse changes nothing.
    let (s, b) = t
        .post_json(
            "/v1/admin/model/promote",
            &json!({"dir": fx.dir.join("absent")}),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
    assert_eq!(b["error"]["code"], "model_refused");
    assert_eq!(served_version(&t).await, first);
    let (s, b) = t.post("/v1/admin/model/rollback", "").await;
    assert_eq!(s, StatusCode::CONFLICT, "{b}");
    assert_eq!(b["error"]["code"], "no_previous_model");

    let (s, b) = t
        .post_json("/v1/admin/model/promote", &json!({"dir": v2}))
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        (b["applied"].clone(), b["dir"].clone()),
        (json!(true), json!(v2))
    );
    assert_eq!(b["previous_dir"], json!(v1));
    let second = served_version(&t).await;
    assert_ne!(second, first);
    assert_eq!(b["model_version"], json!(second));
    assert_eq!(
        t.get("/v1/admin/config").await.1["config"]["model"]["dir"],
        json!(v2)
    );

    // A config reload from the unchanged source keeps the promotion.
    let (s, b) = t.post("/v1/admin/reload", "").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(served_version(&t).await, second);

    let (s, b) = t.post("/v1/admin/model/rollback", "").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        (b["dir"].clone(), b["previous_dir"].clone()),
        (json!(v1), json!(v2))
    );
    assert_eq!(served_version(&t).await, first);

    // Once the source names another directory, the source wins.
    let (s, _) = t
        .post_json("/v1/admin/model/promote", &json!({"dir": v2}))
        .await;
    assert_eq!(s, StatusCode::OK);
    source.lock().expect("lock").model.dir = v1.clone();
    source.lock().expect("lock").scoring.warmup_ms = 1;
    let (s, b) = t.post("/v1/admin/reload", "").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        served_version(&t).await,
        second,
        "source unchanged in model.dir"
    );
    let copy = fx.dir.join("v1-copy");
    std::fs::create_dir_all(&copy).expect("mkdir");
    for f in std::fs::read_dir(&v1).expect("v1") {
        let f = f.expect("entry").path();
        std::fs::copy(&f, copy.join(f.file_name().expect("name"))).expect("copy");
    }
    source.lock().expect("lock").model.dir = copy;
    let (s, b) = t.post("/v1/admin/reload", "").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        served_version(&t).await,
        first,
        "the source names another dir"
    );

    let (s, b) = t
        .post_json("/v1/admin/model/promote", &json!({"dir": " "}))
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{b}");

    // Promoting what is served again keeps the rollback target.
    let (s, _) = t
        .post_json("/v1/admin/model/promote", &json!({"dir": v2}))
        .await;
    assert_eq!(s, StatusCode::OK);
    let (s, b) = t
        .post_json("/v1/admin/model/promote", &json!({"dir": v2}))
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let (s, b) = t.post("/v1/admin/model/rollback", "").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_ne!(b["dir"], json!(v2), "{b}");
    // A path longer than PATH_MAX is refused without echoing it.
    let long = "a".repeat(10_000);
    let (s, b) = t
        .post_json("/v1/admin/model/promote", &json!({"dir": long}))
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(b.to_string().len() < 1_000, "{}", b.to_string().len());
}

#[tokio::test]
async fn rolling_back_a_promotion_on_a_service_started_without_a_model_turns_it_off() {
    let fx = fixture("promote-off");
    let mut cfg = config(&fx.dir.join("v1"));
    cfg.model.enabled = false;
    let source = Arc::new(Mutex::new(cfg.clone()));
    let t = app_with_source(cfg, source);
    let (s, b) = t
        .post_json(
            "/v1/admin/model/promote",
            &json!({"dir": fx.dir.join("v2")}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        t.get("/v1/admin/config").await.1["config"]["model"]["enabled"],
        true
    );
    let (s, b) = t.post("/v1/admin/model/rollback", "").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["enabled"], false, "{b}");
    assert_eq!(
        t.get("/v1/admin/config").await.1["config"]["model"]["enabled"],
        false
    );
    // And a config reload keeps it off.
    let (s, b) = t.post("/v1/admin/reload", "").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        t.get("/v1/admin/config").await.1["config"]["model"]["enabled"],
        false
    );
}

#[tokio::test]
async fn a_pinned_model_refuses_promotions_and_rollbacks_until_unpinned() {
    let fx = fixture("promote-pin");
    let (v1, v2) = (fx.dir.join("v1"), fx.dir.join("v2"));
    let cfg = config(&v1);
    let t = app_with_source(cfg.clone(), Arc::new(Mutex::new(cfg)));
    let first = served_version(&t).await;
    let (s, b) = t
        .post_json("/v1/admin/model/promote", &json!({"dir": v2}))
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let second = served_version(&t).await;

    for bad in [
        json!({"reason": " "}),
        json!({"reason": "x".repeat(513)}),
        json!({}),
    ] {
        let (s, b) = t.post_json("/v1/admin/model/pin", &bad).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
    }
    let (s, b) = t
        .post_json("/v1/admin/model/pin", &json!({"reason": "release freeze"}))
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        (b["pinned"].clone(), b["model_version"].clone()),
        (json!("release freeze"), json!(second))
    );
    let (s, b) = t.post("/v1/admin/model/rollback", "").await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("model_pinned"))
    );
    let (s, b) = t
        .post_json("/v1/admin/model/promote", &json!({"dir": v1}))
        .await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("model_pinned"))
    );
    assert_eq!(served_version(&t).await, second, "nothing changed");
    let promotions = t.get("/v1/model").await.1["promotions"].clone();
    assert_eq!(
        promotions,
        json!({"pinned": "release freeze", "promotions": 1, "rollbacks": 0, "refused_pinned": 2})
    );
    let metrics = t.metrics().await;
    assert_eq!(
        common::metric_value(&metrics, "scorer_model_pinned"),
        Some(1.0)
    );
    assert_eq!(
        common::metric_value(&metrics, "scorer_model_switches_refused_pinned_total"),
        Some(2.0)
    );

    let unpin = axum::http::Request::delete("/v1/admin/model/pin")
        .body(axum::body::Body::empty())
        .expect("request");
    let (s, b) = t.send(unpin).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["was_pinned"], "release freeze");
    let (s, b) = t.post("/v1/admin/model/rollback", "").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(served_version(&t).await, first);
    let metrics = t.metrics().await;
    assert_eq!(
        common::metric_value(&metrics, "scorer_model_pinned"),
        Some(0.0)
    );
    assert_eq!(
        common::metric_value(&metrics, "scorer_model_rollbacks_total"),
        Some(1.0)
    );
}
