//! The model in the scoring path: cost factor and rule action, fallbacks,
//! breaker, reload under load, A/B and shadow, over HTTP with no socket
//! (loading and vetting model directories: `model_dir.rs`).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::TestApp;
use common::model_fixture::{TEST_BUDGET_US, app_with, config, fixture, refusal, report};
use scorer_core::clock::SystemClock;
use scorer_core::features::FEATURE_COUNT;
use scorer_model::export::LgbModel;
use scorer_model::fixture::{predict_f64, random_model, write_model_dir};
use scorer_model::{FallbackReason, ModelHub};
use serde_json::{Value, json};

fn adjustment<'a>(w: &'a Value, code: &str) -> Option<&'a Value> {
    w["adjustments"]
        .as_array()?
        .iter()
        .find(|a| a["code"] == code)
}

/// The model actions the service should serve for `scores` (every one a
/// selectable candidate): the model's predictions centred on their mean,
/// clamped to the default factor bounds, in log space.
fn expected_actions(model: &scorer_model::LgbModel, scores: &[serde_json::Value]) -> Vec<f64> {
    let preds: Vec<f64> = scores
        .iter()
        .map(|w| {
            let f: Vec<f32> = w["features"]
                .as_array()
                .expect("explain features")
                .iter()
                .map(|v| v.as_f64().map_or(f32::NAN, |x| x as f32))
                .collect();
            assert_eq!(f.len(), FEATURE_COUNT);
            predict_f64(model, &f)
        })
        .collect();
    let mean = preds.iter().sum::<f64>() / preds.len() as f64;
    preds
        .iter()
        .map(|p| (p - mean).clamp(0.25f64.ln(), 4f64.ln()))
        .collect()
}

#[tokio::test]
async fn model_factor_and_rule_action_adjust_the_final_score() {
    let fx = fixture("blend");
    let app = app_with(config(&fx.dir.join("v1")));
    report(&app, &[("w1", 5.0), ("w2", 40.0), ("w3", 10.0)]).await;
    let body = json!({"key": "orders:42", "explain": true, "candidates": ["w1", "w2", "w3"], "policy": "none",
                      "explain": "full", "context": {"timeout_ms": 30}});
    let (s, b) = app.post_json("/v1/score", &body).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["model"]["used"], true, "{}", b["model"]);
    assert_eq!(b["model"]["version"], "v1");
    assert!(b["model"]["inference_us"].as_f64().unwrap_or(-1.0) >= 0.0);
    let model = &fx.models[0].1;
    let scores = b["scores"].as_array().expect("scores");
    let expected = expected_actions(model, scores);
    assert!(
        expected.iter().any(|a| a.abs() > 1e-3),
        "the fixture separates the candidates: {expected:?}"
    );
    for (w, expect_a) in scores.iter().zip(expected) {
        let a = w["model_action"].as_f64().expect("model action");
        assert!((a - expect_a).abs() < 2e-5, "{a} vs {expect_a}");
        // Disk await below 20 ms on an urgent order key: r = +1, else 0.
        let fast = w["worker_id"] != "w2";
        assert_eq!(w["rule_action"], if fast { 1.0 } else { 0.0 });
        let ma = adjustment(w, "model").expect("model adjustment");
        let ra = adjustment(w, "rule_action").expect("rule_action adjustment");
        // The model divides the score before the stage by its factor e^a;
        // the rule adds 1.5 points at 100, scaled with that same score (the
        // final score is clamped afterwards, so read the score before the
        // stage from the rule's line).
        let model_impact = ma["impact"].as_f64().unwrap_or(f64::NAN);
        let rule_impact = ra["impact"].as_f64().unwrap_or(f64::NAN);
        assert!(
            model_impact * a <= 0.0,
            "a cost factor above 1 lowers the score: {w}"
        );
        if fast {
            let before = rule_impact / 1.5 * 100.0;
            assert!((0.0..=100.0).contains(&before), "{w}");
            assert!(
                (model_impact - before * ((-a).exp() - 1.0)).abs() < 1e-4,
                "{model_impact} vs {before} x (e^-{a} - 1)"
            );
        } else {
            assert_eq!(rule_impact, 0.0);
        }
    }
    // Same request, same state, policy none (no in-flight change): same scores.
    let (_, again) = app.post_json("/v1/score", &body).await;
    for (x, y) in b["scores"]
        .as_array()
        .into_iter()
        .flatten()
        .zip(again["scores"].as_array().into_iter().flatten())
    {
        assert_eq!(x["final_score"], y["final_score"]);
        assert_eq!(x["model_action"], y["model_action"]);
    }
}

#[tokio::test]
async fn no_fast_disk_on_an_urgent_order_key_means_minus_one_for_all() {
    let fx = fixture("rule");
    let mut cfg = config(&fx.dir.join("v1"));
    cfg.model.enabled = false;
    let app = app_with(cfg);
    report(&app, &[("w1", 25.0), ("w2", 90.0)]).await;
    let (_, b) = app
        .post_json(
            "/v1/score",
            &json!({"key": "order:1", "explain": true, "candidates": ["w1", "w2"],
            "policy": "none", "context": {"timeout_ms": 10}}),
        )
        .await;
    assert_eq!(b["model"]["used"], false);
    assert_eq!(b["model"]["fallback_reason"], "model_disabled");
    for w in b["scores"].as_array().expect("scores") {
        assert_eq!(w["rule_action"], -1.0);
        assert!(w.get("model_action").is_none());
        // −1.5 points at a score of 100, scaled by the score before the stage.
        let rule = adjustment(w, "rule_action").expect("rule");
        assert_eq!(rule["stage"], "model");
        let impact = rule["impact"].as_f64().unwrap_or(f64::NAN);
        let fin = w["final_score"].as_f64().unwrap_or(f64::NAN);
        let pre = fin - impact;
        assert!(pre > 0.0 && pre <= 100.0, "{w}");
        assert!((impact + 1.5 * pre / 100.0).abs() < 1e-6, "{w}");
    }
    // A non-order key: the rule is silent and shows no adjustment.
    let (_, b) = app
        .post_json(
            "/v1/score",
            &json!({"key": "user:1", "explain": true, "candidates": ["w1"], "policy": "none",
            "context": {"timeout_ms": 10}}),
        )
        .await;
    assert!(adjustment(&b["scores"][0], "rule_action").is_none());
    assert_eq!(b["scores"][0]["final_score"], b["scores"][0]["rule_score"]);
}

#[tokio::test]
async fn a_zero_budget_falls_back_and_opens_the_breaker() {
    let fx = fixture("budget");
    let mut cfg = config(&fx.dir.join("v1"));
    cfg.model.budget_us = 0;
    cfg.model.breaker_after = 3;
    cfg.model.breaker_open_ms = 5_000;
    let app = app_with(cfg);
    report(&app, &[("w1", 5.0), ("w2", 5.0)]).await;
    let body = r#"{"key":"user:1","explain":true,"candidates":["w1","w2"],"policy":"none"}"#;
    let mut reasons = Vec::new();
    for _ in 0..5 {
        let (_, b) = app.post("/v1/score", body).await;
        assert_eq!(b["model"]["used"], false);
        for w in b["scores"].as_array().expect("scores") {
            assert_eq!(w["final_score"], w["rule_score"], "rule-only score");
        }
        reasons.push(
            b["model"]["fallback_reason"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
        );
    }
    assert_eq!(
        reasons,
        [
            "budget_exceeded",
            "budget_exceeded",
            "budget_exceeded",
            "breaker_open",
            "breaker_open"
        ]
    );
    let (_, m) = app.get("/v1/model").await;
    assert_eq!(m["primary"]["breaker"], "open");
    // The bounds of the model's cost factor are shown with the blend.
    assert_eq!(m["config"]["factor_min"], 0.25);
    assert_eq!(m["config"]["factor_max"], 4.0);
    assert_eq!(m["stats"]["inferences"], 3);
    // After the open period the breaker is half-open: one more try, still over budget.
    app.clock.advance(5_000);
    let (_, b) = app.post("/v1/score", body).await;
    assert_eq!(b["model"]["fallback_reason"], "budget_exceeded");
    let (_, b) = app.post("/v1/score", body).await;
    assert_eq!(b["model"]["fallback_reason"], "breaker_open");
}

#[test]
fn the_breaker_closes_again_after_an_inference_inside_budget() {
    let fx = fixture("close");
    let mut cfg = config(&fx.dir.join("v1")).model;
    cfg.breaker_after = 2;
    cfg.breaker_open_ms = 100;
    let hub = ModelHub::load(&cfg, Arc::new(SystemClock::new()));
    let set = hub.current();
    let m = set.primary.model().expect("loaded");
    let rows = vec![0.5f32; FEATURE_COUNT * 4];
    let mut out = Vec::new();
    assert_eq!(
        hub.infer(m, &rows, 4, 0, 10, &mut out),
        Err(FallbackReason::BudgetExceeded)
    );
    assert_eq!(
        hub.infer(m, &rows, 4, 0, 11, &mut out),
        Err(FallbackReason::BudgetExceeded)
    );
    assert_eq!(
        hub.infer(m, &rows, 4, 1_000_000, 50, &mut out),
        Err(FallbackReason::BreakerOpen)
    );
    assert!(
        hub.infer(m, &rows, 4, 1_000_000, 111, &mut out).is_ok(),
        "half-open trial"
    );
    assert!(
        hub.infer(m, &rows, 4, 1_000_000, 112, &mut out).is_ok(),
        "closed again"
    );
    // Unrecorded (preview) misses fall back but never open the breaker.
    for now in 113..120 {
        assert_eq!(
            hub.infer_preview(m, &rows, 4, 0, now, &mut out),
            Err(FallbackReason::BudgetExceeded)
        );
    }
    assert!(
        hub.infer(m, &rows, 4, 1_000_000, 120, &mut out).is_ok(),
        "previews left the breaker closed"
    );
    assert_eq!(out.len(), 4);
    assert_eq!(
        hub.stats().fallbacks(FallbackReason::BreakerOpen),
        0,
        "hub.infer alone counts no fallback"
    );
}

#[test]
fn non_finite_model_outputs_are_discarded() {
    // Two trees whose leaves overflow f32 in opposite directions (+inf + -inf
    // = NaN), exported without the final Sigmoid (tract's sigmoid clamps its
    // input, which would hide the NaN) and its raw margin named `probability`.
    let mut m = random_model(2, 1, 3);
    m.trees[0].leaf_value = vec![1e39, 1e39];
    m.trees[1].leaf_value = vec![-1e39, -1e39];
    let mut proto = scorer_model::export::model_proto(&m, &Default::default()).expect("proto");
    let graph = proto.graph.as_mut().expect("graph");
    graph.node.truncate(1);
    graph.node[0].output = vec!["probability".into()];
    graph.output.truncate(1);
    graph.output[0].name = "probability".into();
    let bytes = prost::Message::encode_to_vec(&proto);
    let fx = fixture("nan");
    let dir = fx.dir.join("v1");
    let loaded = scorer_model::LoadedModel {
        dir: dir.clone(),
        card: scorer_model::read_card(&dir).expect("card"),
        onnx_sha256: String::new(),
        golden_rows: 0,
        golden_max_abs_diff: 0.0,
        loaded_at_ms: 0,
        runner: scorer_model::Runner::new(
            scorer_model::load_model(&bytes).expect("tract loads it"),
        ),
        breaker: scorer_model::Breaker::new(20, 5_000),
    };
    let hub = ModelHub::load(&config(&dir).model, Arc::new(SystemClock::new()));
    let mut out = Vec::new();
    let rows = vec![1.0f32; FEATURE_COUNT];
    assert_eq!(
        hub.infer(&loaded, &rows, 1, TEST_BUDGET_US, 0, &mut out),
        Err(FallbackReason::NonFiniteOutput)
    );
    assert!(out[0].is_nan());
    // With the Sigmoid, the vetting refuses it: its golden rows (f64 sums) expect 0.5.
    let sig = fx.dir.join("sig");
    write_model_dir(&sig, &m, "sig", 3, 1).expect("fixture");
    let (reason, msg) = refusal(&sig);
    assert_eq!(reason, "model_error", "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_under_load_never_errors_or_mixes_versions() {
    let fx = fixture("reload");
    let which = Arc::new(AtomicUsize::new(0));
    let cfg = config(&fx.dir.join("v1"));
    let app = app_with(cfg.clone());
    let (base, w) = (cfg.clone(), which.clone());
    let dirs = [fx.dir.join("v1"), fx.dir.join("v2")];
    let state = app.state.clone().with_config_source(Arc::new(move || {
        let mut c = base.clone();
        c.model.dir = dirs[w.load(Ordering::SeqCst) % 2].clone();
        Ok(c)
    }));
    let router = service::app(state);
    let app = TestApp {
        router,
        clock: app.clock.clone(),
        state: app.state.clone(),
    };
    report(&app, &[("w1", 5.0), ("w2", 30.0), ("w3", 8.0)]).await;
    let app = Arc::new(app);
    let models: Arc<Vec<(String, LgbModel)>> = Arc::new(fx.models.clone());
    let seen = Arc::new(Mutex::new(
        std::collections::BTreeMap::<String, usize>::new(),
    ));
    let mut clients = Vec::new();
    for c in 0..3 {
        let (app, models, seen) = (app.clone(), models.clone(), seen.clone());
        clients.push(tokio::spawn(async move {
            for i in 0..150 {
                let body = json!({"key": format!("user:{c}:{i}"), "explain": true, "candidates": ["w1", "w2", "w3"],
                                  "policy": "none", "explain": "full"});
                let (s, b) = app.post_json("/v1/score", &body).await;
                assert_eq!(s, 200, "{b}");
                assert_eq!(b["model"]["used"], true, "{}", b["model"]);
                let v = b["model"]["version"].as_str().expect("version").to_owned();
                let model = &models
                    .iter()
                    .find(|(n, _)| *n == v)
                    .expect("known version")
                    .1;
                let scores = b["scores"].as_array().expect("scores");
                for (w, want) in scores.iter().zip(expected_actions(model, scores)) {
                    let a = w["model_action"].as_f64().expect("action");
                    assert!(
                        (a - want).abs() < 2e-5,
                        "response labelled {v} carries another model's action"
                    );
                }
                *seen.lock().expect("lock").entry(v).or_default() += 1;
            }
        }));
    }
    for _ in 0..6 {
        which.fetch_add(1, Ordering::SeqCst);
        let (s, b) = app.post("/v1/admin/reload", "").await;
        assert_eq!(s, 200, "{b}");
        assert_eq!(b["applied"], true);
        tokio::task::yield_now().await;
    }
    for c in clients {
        c.await.expect("client");
    }
    let (_, m) = app.get("/v1/model").await;
    assert_eq!(m["generation"], 6);
    assert_eq!(m["primary"]["version"], "v1", "six reloads end on v1");
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen.values().sum::<usize>(), 450, "{seen:?}");
}

#[tokio::test]
async fn a_refused_reload_keeps_the_current_model() {
    let fx = fixture("keep");
    let cfg = config(&fx.dir.join("v1"));
    let app = app_with(cfg.clone());
    let bad = fx.dir.join("absent");
    let state = app.state.clone().with_config_source(Arc::new(move || {
        let mut c = cfg.clone();
        c.model.dir = bad.clone();
        Ok(c)
    }));
    let (s, b) = TestApp {
        router: service::app(state),
        clock: app.clock.clone(),
        state: app.state.clone(),
    }
    .post("/v1/admin/reload", "")
    .await;
    assert_eq!(s, 422, "{b}");
    assert_eq!(b["error"]["code"], "model_refused");
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("does not exist"),
        "{b}"
    );
    let (_, m) = app.get("/v1/model").await;
    assert_eq!(m["primary"]["version"], "v1");
    assert_eq!(m["generation"], 0);
}

#[tokio::test]
async fn ab_arms_follow_the_key_and_shadow_is_compared() {
    let fx = fixture("ab");
    let mut cfg = config(&fx.dir.join("v1"));
    cfg.model.ab.dir = Some(fx.dir.join("v2"));
    cfg.model.ab.fraction = 0.3;
    cfg.model.shadow.dir = Some(fx.dir.join("v2"));
    let app = app_with(cfg);
    report(&app, &[("w1", 5.0), ("w2", 30.0), ("w3", 8.0)]).await;
    let mut b_count = 0;
    for i in 0..200 {
        let key = format!("user:{i}");
        let body = json!({"key": key, "explain": true, "candidates": ["w1", "w2", "w3"], "policy": "none"});
        let (_, r1) = app.post_json("/v1/score", &body).await;
        let (_, r2) = app.post_json("/v1/score", &body).await;
        let arm = r1["model"]["arm"].as_str().expect("arm").to_owned();
        assert_eq!(r2["model"]["arm"], arm.as_str(), "stable per key");
        let expect = scorer_model::arm_for(&key, 0.3).as_str();
        assert_eq!(arm, expect);
        assert_eq!(r1["model"]["version"], if arm == "b" { "v2" } else { "v1" });
        b_count += usize::from(arm == "b");
    }
    assert!(
        (35..=85).contains(&b_count),
        "{b_count} of 200 in arm B at 30%"
    );
    let (_, sh) = app.get("/v1/shadow").await;
    let r = &sh["report"];
    assert_eq!(r["decisions_compared"], 400);
    let agree = r["top_pick_agreement"].as_f64().expect("agreement");
    assert!((0.0..=1.0).contains(&agree));
    // Arm-B decisions compare v2 with itself: zero Δ action there, so the mean is below the A-arm's.
    assert!(r["mean_abs_delta_action"].as_f64().expect("delta") >= 0.0);
}

#[tokio::test]
async fn debug_score_is_a_preview_that_changes_no_state() {
    let fx = fixture("preview");
    let mut cfg = config(&fx.dir.join("v1"));
    cfg.model.shadow.dir = Some(fx.dir.join("v2"));
    let app = app_with(cfg);
    report(&app, &[("w1", 5.0), ("w2", 40.0), ("w3", 10.0)]).await;
    let uri = "/v1/debug/score?key=orders:42&candidates=w1,w2,w3&timeout_ms=30&format=json";
    let mut previews = Vec::new();
    for _ in 0..20 {
        let (s, b) = app.get(uri).await;
        assert_eq!(s, 200, "{b}");
        assert_eq!(
            b["model"]["used"], true,
            "the preview shows the model's view"
        );
        assert!(b["shadow"].is_null(), "no shadow run in a preview");
        previews.push(b);
    }
    // Nothing counted, timed, compared or charged.
    let (_, m) = app.get("/v1/model").await;
    assert_eq!(m["stats"]["calls"], 0, "{}", m["stats"]);
    assert_eq!(m["stats"]["inferences"], 0, "{}", m["stats"]);
    let (_, sh) = app.get("/v1/shadow").await;
    assert_eq!(sh["report"]["decisions_compared"], 0, "{sh}");
    assert_eq!(app.state.engine.counters().decisions, 0);
    let metrics = {
        use http_body_util::BodyExt;
        use tower::ServiceExt;
        let req = axum::http::Request::get("/metrics")
            .body(axum::body::Body::empty())
            .expect("request");
        let resp = app.router.clone().oneshot(req).await.expect("infallible");
        let bytes = resp.into_body().collect().await.expect("body").to_bytes();
        String::from_utf8(bytes.to_vec()).expect("utf-8")
    };
    assert!(!metrics.contains("scorer_worker_final_score{"), "{metrics}");
    // Every preview saw the same state (the key's hotness was not bumped),
    // and a real decision right after sees it too.
    let body = json!({"key": "orders:42", "explain": true, "candidates": ["w1", "w2", "w3"], "policy": "none",
                      "explain": "full", "context": {"timeout_ms": 30}});
    let (s, real) = app.post_json("/v1/score", &body).await;
    assert_eq!(s, 200, "{real}");
    for p in &previews {
        assert_eq!(p["scores"], previews[0]["scores"]);
    }
    for (p, r) in previews[0]["scores"]
        .as_array()
        .into_iter()
        .flatten()
        .zip(real["scores"].as_array().into_iter().flatten())
    {
        assert_eq!(p["features"], r["features"], "{}", p["worker_id"]);
        assert_eq!(p["final_score"], r["final_score"], "{}", p["worker_id"]);
    }
    let (_, m) = app.get("/v1/model").await;
    assert_eq!(m["stats"]["calls"], 1, "the decision counts");
    let (_, sh) = app.get("/v1/shadow").await;
    assert_eq!(sh["report"]["decisions_compared"], 1, "{sh}");
}
