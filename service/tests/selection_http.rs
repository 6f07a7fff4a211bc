//! Selection through HTTP: policies, temperatures, seeds, feedback, stats.

mod common;

use axum::http::StatusCode;
use common::{WALL, no_warmup, test_app};
use serde_json::{Value, json};

fn snap(id: &str, ts: u64, cpu: f64) -> Value {
    json!({"worker_id": id, "timestamp_ms": ts, "cpu_usage": cpu, "queue_depth": 0,
           "rtt_ms_avg": 1.0, "rtt_ms_p99": 4.0, "error_rate": 0.0})
}

async fn three_workers() -> common::TestApp {
    let app = test_app(no_warmup());
    let batch =
        json!({"snapshots": [snap("a", WALL, 0.2), snap("b", WALL, 0.8), snap("c", WALL, 0.95)]});
    assert_eq!(
        app.post_json("/v1/telemetry", &batch).await.0,
        StatusCode::OK
    );
    app
}

fn probabilities(b: &Value) -> Vec<f64> {
    b["scores"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| s["probability"].as_f64().unwrap_or(f64::NAN))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn softmax_temperatures_behave_as_specified() {
    for t in [0.0, 1e-12, 0.01, 1.0, 1e308] {
        // A fresh app each time: a pick adds an in-flight deduction.
        let app = three_workers().await;
        let body = json!({"key": "k", "explain": true, "candidates": ["a", "b", "c"], "policy": "softmax", "temperature": t});
        let (s, b) = app.post_json("/v1/score", &body).await;
        assert_eq!(s, StatusCode::OK, "T={t}: {b}");
        let p = probabilities(&b);
        assert!(
            p.iter().all(|x| x.is_finite() && (0.0..=1.0).contains(x)),
            "T={t}: {p:?}"
        );
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-9, "T={t}: {p:?}");
        match t {
            x if x < 1e-6 => assert_eq!(p, [1.0, 0.0, 0.0], "T={t} is max"),
            x if x > 1e300 => {
                assert!(
                    p.iter().all(|x| (x - 1.0 / 3.0).abs() < 1e-9),
                    "T={t} is uniform: {p:?}"
                )
            }
            _ => assert!(p[0] > p[1] && p[1] > p[2], "T={t}: {p:?}"),
        }
        assert_eq!(b["policy"], "softmax");
    }
    let app = three_workers().await;
    let (s, b) = app
        .post_json(
            "/v1/score",
            &json!({"key": "k", "explain": true, "candidates": ["a"], "temperature": -1.0}),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("temperature")
    );
    let (s, b) = app
        .post_json(
            "/v1/score",
            &json!({"key": "k", "explain": true, "candidates": ["a"], "temperature": -1.7e308}),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
    assert_eq!(
        b["error"]["message"],
        "`temperature` must be finite and >= 0, got -1.7e308"
    );
    let (s, _) = app
        .post(
            "/v1/score",
            r#"{"key":"k","explain":true,"candidates":["a"],"temperature":NaN}"#,
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn every_policy_answers_with_a_pick_and_propensities() {
    let app = three_workers().await;
    for policy in ["max", "softmax", "p2c", "swrr", "hash", "prequal"] {
        let body = json!({"key": "user:9", "explain": true, "candidates": ["a", "b", "c"], "policy": policy, "seed": 1});
        let (s, b) = app.post_json("/v1/score", &body).await;
        assert_eq!(s, StatusCode::OK, "{policy}: {b}");
        assert_eq!(b["policy"], policy);
        let pick = b["pick"].as_str().expect("pick");
        let p = probabilities(&b);
        assert!(
            (p.iter().sum::<f64>() - 1.0).abs() < 1e-9,
            "{policy}: {p:?}"
        );
        let picked = b["scores"]
            .as_array()
            .and_then(|a| a.iter().find(|s| s["worker_id"] == pick))
            .expect("picked worker scored");
        assert!(
            picked["probability"].as_f64().unwrap_or(0.0) > 0.0,
            "{policy}"
        );
    }
    let (s, b) = app
        .post_json(
            "/v1/score",
            &json!({"key": "k", "explain": true, "candidates": ["a"], "policy": "none"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        b.get("pick").is_none() && b["scores"][0].get("probability").is_none(),
        "{b}"
    );
    let (s, b) = app
        .post_json(
            "/v1/score",
            &json!({"key": "k", "explain": true, "candidates": ["a"], "policy": "fastest"}),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("fastest")
    );
}

#[tokio::test]
async fn same_seed_same_pick_through_http() {
    let picks = |seed: u64| async move {
        let app = three_workers().await;
        let mut out = Vec::new();
        for _ in 0..20 {
            let body = json!({"key": "k", "explain": true, "candidates": ["a", "b", "c"], "policy": "softmax",
                              "temperature": 5.0, "seed": seed});
            out.push(app.post_json("/v1/score", &body).await.1["pick"].clone());
        }
        out
    };
    assert_eq!(picks(3).await, picks(3).await);
}

#[tokio::test]
async fn feedback_is_validated_counted_and_releases_picks() {
    let app = three_workers().await;
    let (_, b) = app
        .post_json(
            "/v1/score",
            &json!({"key": "k", "explain": true, "candidates": ["a", "b", "c"], "policy": "max"}),
        )
        .await;
    let id = b["decision_id"].as_str().expect("id").to_owned();
    assert_eq!(b["pick"], "a");
    // Outstanding picks are exact: one on the pick, none elsewhere, and no
    // outcome learnt yet.
    let (_, w) = app.get("/v1/workers").await;
    let outstanding = |w: &Value| -> Vec<Value> {
        w["workers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|x| x["outstanding"].clone())
            .collect()
    };
    assert_eq!(outstanding(&w), [json!(1), json!(0), json!(0)], "{w}");
    assert_eq!(w["workers"][0]["outcomes"], 0, "{w}");
    assert_eq!(w["workers"][0]["service_time_ms"], Value::Null, "{w}");
    // A feedback naming another worker than the pick releases nothing.
    let (s, f) = app
        .post_json(
            "/v1/feedback",
            &json!({"decision_id": id, "worker_id": "b", "latency_ms": 4.5, "success": true}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{f}");
    assert_eq!(
        f,
        json!({"known_decision": true, "worker_was_picked": false, "released": false})
    );
    let (_, w) = app.get("/v1/workers").await;
    assert_eq!(outstanding(&w), [json!(1), json!(0), json!(0)], "{w}");
    let (s, f) = app
        .post_json(
            "/v1/feedback",
            &json!({"decision_id": id, "worker_id": "a", "latency_ms": 4.5, "success": true}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{f}");
    assert_eq!(
        f,
        json!({"known_decision": true, "worker_was_picked": true, "released": true})
    );
    let (_, w) = app.get("/v1/workers").await;
    assert_eq!(outstanding(&w), [json!(0), json!(0), json!(0)], "{w}");
    assert_eq!(w["workers"][0]["outcomes"], 1, "{w}");
    assert_eq!(w["workers"][0]["service_time_ms"], 4.5, "{w}");
    assert_eq!(w["workers"][0]["observed_failure_rate"], 0.0, "{w}");
    // Answered: a second feedback for the decision is unknown.
    let (_, f) = app
        .post_json(
            "/v1/feedback",
            &json!({"decision_id": id, "worker_id": "a", "latency_ms": 4.5, "success": true}),
        )
        .await;
    assert_eq!(
        f,
        json!({"known_decision": false, "worker_was_picked": true, "released": false})
    );

    let (s, f) = app
        .post_json("/v1/feedback", &json!({"decision_id": "019ad1c4-5e2a-7c3d-9f10-2b3c4d5e6f70", "worker_id": "a", "latency_ms": 86_400_000, "success": false}))
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(f["known_decision"], false);
    for bad in [
        json!({"decision_id": "", "worker_id": "a", "latency_ms": 1, "success": true}),
        json!({"decision_id": "019ad1c4-5e2a-7c3d-9f10-2b3c4d5e6f70", "worker_id": "a", "latency_ms": -1, "success": true}),
        json!({"decision_id": "019ad1c4-5e2a-7c3d-9f10-2b3c4d5e6f70", "worker_id": "a", "latency_ms": 86_400_001, "success": true}),
        json!({"decision_id": "019ad1c4-5e2a-7c3d-9f10-2b3c4d5e6f70", "worker_id": "a", "latency_ms": 1.7e308, "success": true}),
        json!({"decision_id": "019ad1c4-5e2a-7c3d-9f10-2b3c4d5e6f70", "worker_id": "a", "latency_ms": 1}),
        json!({"decision_id": "019ad1c4-5e2a-7c3d-9f10-2b3c4d5e6f70", "worker_id": "a", "latency_ms": 1, "success": true, "extra": 0}),
        json!({"decision_id": "x\u{0}", "worker_id": "a", "latency_ms": 1, "success": true}),
        // Not decision ids: the README's placeholder, a bare word, a UUID
        // without hyphens.
        json!({"decision_id": "019ad1c4-…", "worker_id": "a", "latency_ms": 1, "success": true}),
        json!({"decision_id": "d1", "worker_id": "a", "latency_ms": 1, "success": true}),
        json!({"decision_id": "019ad1c45e2a7c3d9f102b3c4d5e6f70", "worker_id": "a", "latency_ms": 1, "success": true}),
        json!({"decision_id": "019ad1c4-5e2a-7c3d-9f10-2b3c4d5e6f70", "worker_id": "\u{1}", "latency_ms": 1, "success": true}),
        json!({"decision_id": "019ad1c4-5e2a-7c3d-9f10-2b3c4d5e6f70", "worker_id": "a\u{200b}", "latency_ms": 1, "success": true}),
        json!({"decision_id": "019ad1c4-5e2a-7c3d-9f10-2b3c4d5e6f70", "worker_id": " a", "latency_ms": 1, "success": true}),
    ] {
        let (s, b) = app.post_json("/v1/feedback", &bad).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{bad} → {b}");
    }
    let (_, st) = app.get("/v1/stats").await;
    assert_eq!(st["feedback"], 4);
    assert_eq!(st["feedback_unknown_decision"], 2);
    assert_eq!(st["decisions"], 1);
}

#[tokio::test]
async fn penalty_state_is_visible_in_workers_and_adjustments() {
    let app = test_app(no_warmup());
    let mut bad = snap("w", WALL, 0.2);
    bad["compacting"] = json!(true);
    bad["under_repair"] = json!(true);
    app.post_json(
        "/v1/telemetry",
        &json!({"snapshots": [bad, snap("ok", WALL, 0.2)]}),
    )
    .await;
    let (_, w) = app.get("/v1/workers").await;
    let state = &w["workers"][1]["penalty"];
    assert_eq!(w["workers"][1]["worker_id"], "w");
    assert_eq!(state["state"], "observation", "{w}");
    assert!(
        state["reason"].as_str().unwrap_or("").contains("40"),
        "{state}"
    );
    let (_, b) = app
        .post_json(
            "/v1/score",
            &json!({"key": "k", "explain": true, "candidates": ["w", "ok"], "policy": "none"}),
        )
        .await;
    let adj = &b["scores"][0]["adjustments"];
    let obs = adj
        .as_array()
        .and_then(|a| a.iter().find(|x| x["code"] == "observation"))
        .expect("observation adjustment");
    assert_eq!(obs["factor"], 0.85);
    assert_eq!(obs["stage"], "dynamics");
    assert_eq!(b["scores"][0]["penalty_state"], "observation");
    assert_eq!(b["scores"][0]["rule_score"], 35.0);
    // The cost stage: a compacting worker costs ×1.1 for an untyped request
    // (the read factor) on a fresh snapshot; nothing else differs from "ok".
    let compacting = adj
        .as_array()
        .and_then(|a| a.iter().find(|x| x["code"] == "compacting_cost"))
        .expect("compacting_cost adjustment");
    assert_eq!(compacting["stage"], "cost");
    let factor = compacting["factor"].as_f64().unwrap_or(f64::NAN);
    assert!((factor - 1.0 / 1.1).abs() < 1e-12, "{compacting}");
    let codes: Vec<&str> = adj
        .as_array()
        .into_iter()
        .flatten()
        .filter(|x| x["stage"] != "rule")
        .filter_map(|x| x["code"].as_str())
        .collect();
    assert_eq!(codes, ["observation", "compacting_cost"], "{adj}");
    let fin = b["scores"][0]["final_score"].as_f64().unwrap_or(f64::NAN);
    assert!((fin - 35.0 * 0.85 / 1.1).abs() < 1e-9, "{fin}");
    assert_eq!(b["scores"][1]["final_score"], 100.0);
}

#[tokio::test]
async fn workers_show_the_selection_weight_a_decision_uses() {
    // Default config: new workers ramp up (slow start) and warm up.
    let app = test_app(scorer_engine::config::Config::default());
    let batch = json!({"snapshots": [snap("a", WALL, 0.2), snap("b", WALL, 0.3)]});
    assert_eq!(
        app.post_json("/v1/telemetry", &batch).await.0,
        StatusCode::OK
    );
    app.clock.advance(9_000);
    let batch = json!({"snapshots": [snap("a", WALL + 9_000, 0.2), snap("b", WALL + 9_000, 0.3)]});
    assert_eq!(
        app.post_json("/v1/telemetry", &batch).await.0,
        StatusCode::OK
    );
    let (s, r) = app
        .post_json(
            "/v1/score",
            &json!({"key": "k", "explain": true, "candidates": ["a", "b"]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let (_, w) = app.get("/v1/workers").await;
    // 9 s of the 30 s ramp: max(0.2, 9/30) = 0.3 for both.
    for (i, id) in ["a", "b"].iter().enumerate() {
        let listed = &w["workers"][i];
        assert_eq!(listed["worker_id"], *id);
        let score = r["scores"]
            .as_array()
            .and_then(|a| a.iter().find(|s| s["worker_id"] == *id))
            .cloned()
            .unwrap_or_default();
        assert_eq!(listed["weight"], score["weight"], "{listed} vs {score}");
        assert!(
            (listed["weight"].as_f64().unwrap_or(0.0) - 0.3).abs() < 1e-12,
            "{listed}"
        );
        assert_eq!(
            listed["penalty"]["slow_start_fraction"], 1.0,
            "no cooldown ramp"
        );
    }
}

#[tokio::test]
async fn a_dead_worker_is_listed_with_weight_zero_as_a_decision_sees_it() {
    let app = test_app(scorer_engine::config::Config::default());
    let batch = json!({"snapshots": [snap("a", WALL, 0.2), snap("b", WALL, 0.3)]});
    assert_eq!(
        app.post_json("/v1/telemetry", &batch).await.0,
        StatusCode::OK
    );
    // `b` falls silent past `telemetry.dead_after_ms` (10 s); `a` keeps reporting.
    app.clock.advance(11_000);
    let batch = json!({"snapshots": [snap("a", WALL + 11_000, 0.2)]});
    assert_eq!(
        app.post_json("/v1/telemetry", &batch).await.0,
        StatusCode::OK
    );
    let (s, r) = app
        .post_json(
            "/v1/score",
            &json!({"key": "k", "explain": true, "candidates": ["a", "b"]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["scores"][1]["worker_id"], "b", "{r}");
    assert_eq!(r["scores"][1]["eligible"], false, "{r}");
    assert_eq!(r["scores"][1]["weight"], 0.0, "{r}");
    let (_, w) = app.get("/v1/workers").await;
    let b = &w["workers"][1];
    assert_eq!(b["worker_id"], "b", "{w}");
    assert_eq!(b["alive"], false, "{b}");
    assert_eq!(b["weight"], 0.0, "a dead worker cannot be picked: {b}");
    assert!(
        w["workers"][0]["weight"].as_f64().unwrap_or(0.0) > 0.0,
        "{w}"
    );
}
