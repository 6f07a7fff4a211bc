//! Admin protection, load shedding and request timeouts (issue #8).

mod common;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::routing::post;
use common::{TestApp, test_app};
use service::clock::SystemClock;
use service::model::ModelHub;
use service::model::fixture::{random_model, write_model_dir};
use service::{AppState, Engine};
use tower::ServiceExt;

fn reload_from(peer: [u8; 4], token: Option<&str>) -> Request<Body> {
    let mut b = Request::post("/v1/admin/reload");
    if let Some(t) = token {
        b = b.header("authorization", format!("Bearer {t}"));
    }
    let mut req = b.body(Body::empty()).expect("request");
    req.extensions_mut()
        .insert(axum::extract::ConnectInfo(std::net::SocketAddr::from((
            peer, 5000,
        ))));
    req
}

async fn status(app: &TestApp, req: Request<Body>) -> StatusCode {
    app.router
        .clone()
        .oneshot(req)
        .await
        .expect("infallible")
        .status()
}

#[tokio::test]
async fn admin_without_a_token_answers_only_loopback() {
    let app = test_app(common::no_warmup());
    assert_eq!(
        status(&app, reload_from([127, 0, 0, 1], None)).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "loopback is served (the reload itself is refused: no model dir)"
    );
    assert_eq!(
        status(&app, reload_from([10, 1, 2, 3], None)).await,
        StatusCode::FORBIDDEN
    );
    let no_peer = Request::post("/v1/admin/reload")
        .body(Body::empty())
        .expect("request");
    assert_eq!(status(&app, no_peer).await, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn admin_with_a_token_needs_the_exact_bearer_token() {
    let mut cfg = common::no_warmup();
    cfg.admin.token = Some("s3cret-s3cret-s3cret".into());
    let app = test_app(cfg);
    assert_eq!(
        status(&app, reload_from([10, 1, 2, 3], None)).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        status(
            &app,
            reload_from([127, 0, 0, 1], Some("s3cret-s3cret-s3creT"))
        )
        .await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        status(&app, reload_from([127, 0, 0, 1], Some("s3cret"))).await,
        StatusCode::UNAUTHORIZED
    );
    // The right token works from anywhere.
    assert_eq!(
        status(
            &app,
            reload_from([10, 1, 2, 3], Some("s3cret-s3cret-s3cret"))
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    // Short tokens are refused at start-up.
    let mut bad = common::no_warmup();
    bad.admin.token = Some("short".into());
    let err = bad.validate().expect_err("short token");
    assert!(err.to_string().contains("admin.token"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_beyond_the_concurrency_limit_are_shed_with_retry_after() {
    let (release_tx, release_rx) = tokio::sync::watch::channel(false);
    let entered = Arc::new(tokio::sync::Semaphore::new(0));
    let e2 = entered.clone();
    let handler = move || {
        let mut rx = release_rx.clone();
        let entered = e2.clone();
        async move {
            entered.add_permits(1);
            let _ = rx.wait_for(|v| *v).await;
            "done"
        }
    };
    // `with_state` turns the handler into a route once, as `service::app`
    // does; without it axum re-applies the layer (a fresh limit) per request.
    let router: Router = Router::new()
        .route("/slow", post(handler).layer(service::http::shed_layer(2)))
        .with_state(());
    let call = |r: Router| async move {
        r.oneshot(Request::post("/slow").body(Body::empty()).expect("req"))
            .await
            .expect("infallible")
    };
    let a = tokio::spawn(call(router.clone()));
    let b = tokio::spawn(call(router.clone()));
    let two =
        tokio::time::timeout(std::time::Duration::from_secs(10), entered.acquire_many(2)).await;
    if two.is_err() {
        let (a, b) = (a.is_finished(), b.is_finished());
        panic!(
            "not both admitted; finished: a={a} b={b}, entered={}",
            entered.available_permits()
        );
    }
    let shed = call(router.clone()).await;
    assert_eq!(shed.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(shed.headers()["retry-after"], "1");
    release_tx.send(true).expect("release");
    assert_eq!(a.await.expect("a").status(), StatusCode::OK);
    assert_eq!(b.await.expect("b").status(), StatusCode::OK);
    assert_eq!(
        call(router).await.status(),
        StatusCode::OK,
        "capacity is back"
    );
}

#[tokio::test]
async fn a_request_slower_than_the_timeout_gets_503() {
    // Reloading a large model (vetting runs its golden rows) takes far longer than 1 ms.
    let dir = std::env::temp_dir().join(format!("scorer-timeout-{}", std::process::id()));
    write_model_dir(&dir, &random_model(400, 8, 1), "big", 200, 1).expect("fixture");
    let mut cfg = common::no_warmup();
    cfg.model.dir = dir.clone();
    cfg.server.request_timeout_ms = 1;
    let hub = Arc::new(ModelHub::unloaded(&cfg.model, Arc::new(SystemClock::new())));
    let state = AppState::new(
        Engine::new(cfg).with_models(hub),
        Arc::new(SystemClock::new()),
    );
    let app = TestApp {
        router: service::app(state.clone()),
        clock: Arc::new(service::clock::ManualClock::new(0, 0)),
        state,
    };
    let (s, b) = app.post("/v1/admin/reload", "").await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{b}");
    assert_eq!(b["error"]["code"], "timeout");
    let _ = std::fs::remove_dir_all(&dir);
}
