//! `GET /v1/model/files/{file}`: the service's model files, and a router's
//! balancer fetching them to run the same model.

mod common;

use std::sync::Arc;

use axum::http::StatusCode;
use scorer_balancer::follow::FollowConfig;
use scorer_balancer::model::{FetchError, fetch_model};
use scorer_core::clock::SystemClock;
use scorer_model::ModelHub;

use common::model_fixture::{app_with, config, fixture};
use common::{no_warmup, test_app};

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

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let router = app
        .router
        .clone()
        .into_make_service_with_connect_info::<std::net::SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, router).await });
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
