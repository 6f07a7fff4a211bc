use std::sync::Arc;

use axum::Router;
use axum::routing::post;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use scorer_engine::api::ScoreRequest;
use scorer_engine::config::Config;
use scorer_engine::view::RouterLoad;
use tokio::sync::mpsc;

use super::*;
use crate::BalancerConfig;

const WALL: u64 = 1_750_000_000_000;

#[tokio::test]
async fn a_change_is_reported_at_once_and_the_service_sees_the_routers_id() {
    let (tx, mut rx) = mpsc::unbounded_channel::<RouterLoad>();
    let app = Router::new().route(
        "/v1/router/load",
        post(move |axum::Json(load): axum::Json<RouterLoad>| {
            let _ = tx.send(load);
            async { "{\"routers\": 1}" }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let b = Arc::new(Balancer::new(Config::default(), BalancerConfig::new("edge-7")).unwrap());
    let view = crate::test_views::full_view(&b.engine().config_hash(), 0, &[("w1", 0.1)]);
    b.apply_view(&view, 0, WALL).unwrap();
    let req = ScoreRequest::new("user:1:a", vec!["w1".into()]);
    let pick = b.pick(&req, 0, &mut ChaCha8Rng::seed_from_u64(1)).unwrap();

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(report_load(
        b.clone(),
        reqwest::Client::new(),
        FollowConfig::new(base),
        async move {
            let _ = stop_rx.await;
        },
    ));
    let first = rx.recv().await.expect("a report");
    assert_eq!(first.router_id, "edge-7");
    let pairs: Vec<_> = first
        .outstanding
        .iter()
        .map(|l| (l.worker_id.as_str(), l.outstanding))
        .collect();
    assert_eq!(pairs, [("w1", 1)]);
    b.outcome(&pick.decision_id, "w1", 1.0, true, 1).unwrap();
    loop {
        let next = rx.recv().await.expect("a report");
        if next.outstanding.is_empty() {
            break;
        }
    }
    let _ = stop_tx.send(());
    task.await.unwrap();
    // The last report may still be in flight when the stop comes.
    let stats = b.stats(1);
    assert!(
        stats.load_reports >= 1 && stats.load_reports_failed == 0,
        "{stats:?}"
    );
}
