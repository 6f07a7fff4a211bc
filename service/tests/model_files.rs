//! `GET /v1/model/files/{file}`: the service's model files, and a router's
//! balancer fetching them to run the same model.

mod common;

use std::sync::Arc;

use axum::http::StatusCode;
use scorer_balancer::follow::{FollowConfig, FollowEvent, follow_view};
use scorer_balancer::model::{FetchError, fetch_model};
use scorer_balancer::model_sync::{ModelSync, sync_model};
use scorer_balancer::{Balancer, BalancerConfig};
use scorer_core::clock::{ManualClock, SystemClock};
use scorer_model::ModelHub;
use serde_json::json;

use common::model_fixture::{app_with, config, fixture};
use common::{no_warmup, test_app};

/// `app` served on a socket on 127.0.0.1; its base URL.
async fn serve(app: &common::TestApp) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let router = app
        .router
        .clone()
        .into_make_service_with_connect_info::<std::net::SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, router).await });
    base
}

#[tokio::test]
async fn a_balancer_fetches_and_loads_the_model_the_service_runs() {
    let fx = fixture("files");
    let app = app_with(config(&fx.dir.join("v1")));
    // The files as they are on disk, with the version and hash in headers.
    let (status, body) = app.get("/v1/model/files/card.json").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["model_version"], "v1");
    for (file, code, want) in [
        ("model.txt", "unknown_model_file", StatusCode::NOT_FOUND),
        (
            "..%2Fcard.json",
            "unknown_model_file",
            StatusCode::NOT_FOUND,
        ),
    ] {
        let (status, body) = app.get(&format!("/v1/model/files/{file}")).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (want, Some(code)),
            "{file}"
        );
    }

    let base = serve(&app).await;
    let dest = fx.dir.join("router-copy");
    let got = fetch_model(&reqwest::Client::new(), &FollowConfig::new(&base), &dest)
        .await
        .expect("fetched");
    assert_eq!(got.version, "v1");
    let served = app.state.engine.models().current();
    let served = served.primary.model().expect("loaded");
    assert_eq!(got.onnx_sha256_16, served.onnx_sha256);
    // The copy loads and passes its golden rows, as the service's did.
    let mut cfg = config(&dest).model;
    cfg.dir = dest.clone();
    let hub = ModelHub::load(&cfg, Arc::new(SystemClock::new()));
    let copy = hub.current();
    let copy = copy.primary.model().expect("the copy loads");
    assert_eq!(
        (copy.card.model_version.as_str(), copy.onnx_sha256.as_str()),
        ("v1", served.onnx_sha256.as_str())
    );

    // The directory changed under the service: refused, the copy unchanged.
    std::fs::copy(fx.dir.join("v2/model.onnx"), fx.dir.join("v1/model.onnx")).unwrap();
    let (status, body) = app.get("/v1/model/files/model.onnx").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("model_changed"))
    );
    let err = fetch_model(&reqwest::Client::new(), &FollowConfig::new(&base), &dest)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            FetchError::Http {
                file: "model.onnx",
                ..
            }
        ),
        "{err}"
    );
    assert!(dest.join("model.onnx").is_file(), "the earlier copy stays");
    let leftovers = std::fs::read_dir(&fx.dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains("incoming")
        })
        .count();
    assert_eq!(leftovers, 0, "the partial download is removed");
}

#[tokio::test]
async fn without_a_model_there_is_nothing_to_fetch() {
    let app = test_app(no_warmup());
    let (status, body) = app.get("/v1/model/files/model.onnx").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("no_model"))
    );
}

/// The first view event the service sends `balancer`'s stream, applied.
async fn apply_one_view(balancer: &Arc<Balancer>, base: &str) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let follower = tokio::spawn(follow_view(
        balancer.clone(),
        reqwest::Client::new(),
        FollowConfig::new(base),
        Arc::new(ManualClock::new(1_000, common::WALL)),
        move |e| {
            let _ = tx.send(e);
        },
        async move {
            let _ = stopped.await;
        },
    ));
    loop {
        let event = tokio::time::timeout(std::time::Duration::from_secs(30), rx.recv()).await;
        match event {
            Ok(Some(FollowEvent::Applied(_))) => break,
            Ok(Some(_)) => {}
            other => panic!("no view applied: {other:?}"),
        }
    }
    let _ = stop.send(());
    follower.await.expect("the follower stops");
}

#[tokio::test]
async fn a_promotion_and_a_rollback_reach_two_routers() {
    let fx = fixture("follow");
    let (v1, v2) = (fx.dir.join("v1"), fx.dir.join("v2"));
    let cfg = config(&v1);
    let app = app_with(cfg.clone());
    let base = serve(&app).await;
    let http = reqwest::Client::new();
    let follow = FollowConfig::new(&base);
    let routers: Vec<(Arc<Balancer>, Arc<ModelHub>, std::path::PathBuf)> = (0..2)
        .map(|r| {
            let dest = fx.dir.join(format!("router-{r}"));
            let mut model_cfg = cfg.model.clone();
            model_cfg.dir = dest.clone();
            let hub = Arc::new(ModelHub::unloaded(&model_cfg, Arc::new(SystemClock::new())));
            let b = Balancer::new(cfg.clone(), BalancerConfig::new(format!("edge-{r}")))
                .expect("valid")
                .with_models(hub.clone());
            (Arc::new(b), hub, dest)
        })
        .collect();
    let serving = |hub: &ModelHub| {
        hub.current()
            .primary
            .model()
            .map(|m| m.card.model_version.clone())
    };

    for (step, want) in [("start", "v1"), ("promote", "v2"), ("rollback", "v1")] {
        match step {
            "promote" => {
                let (s, b) = app
                    .post_json("/v1/admin/model/promote", &json!({"dir": v2}))
                    .await;
                assert_eq!(s, StatusCode::OK, "{b}");
            }
            "rollback" => {
                let (s, b) = app.post("/v1/admin/model/rollback", "").await;
                assert_eq!(s, StatusCode::OK, "{b}");
            }
            _ => {}
        }
        for (balancer, hub, dest) in &routers {
            apply_one_view(balancer, &base).await;
            assert_eq!(
                balancer.view_model_version().as_deref(),
                Some(want),
                "{step}"
            );
            let synced = sync_model(balancer, hub, &cfg.model, &http, &follow, dest)
                .await
                .expect("fetched");
            assert!(
                matches!(&synced, ModelSync::Loaded(f) if f.version == want),
                "{step}: {synced:?}"
            );
            assert_eq!(serving(hub).as_deref(), Some(want), "{step}");
            // In step now: a second call fetches nothing.
            let again = sync_model(balancer, hub, &cfg.model, &http, &follow, dest).await;
            assert_eq!(again.expect("in step"), ModelSync::InStep, "{step}");
        }
    }
}
