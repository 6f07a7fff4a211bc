use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::response::sse::{Event, Sse};
use axum::routing::get;
use scorer_core::clock::ManualClock;
use scorer_engine::config::Config;
use scorer_engine::view::View;
use tokio::sync::mpsc;

use super::*;
use crate::BalancerConfig;

const WALL: u64 = 1_750_000_000_000;

#[test]
fn the_backoff_doubles_to_its_cap_and_is_fully_jittered() {
    assert_eq!(backoff_ms(0, 100, 5_000, 0.999_999), 99);
    assert_eq!(backoff_ms(3, 100, 5_000, 0.5), 400);
    assert_eq!(backoff_ms(10, 100, 5_000, 0.5), 2_500);
    assert_eq!(backoff_ms(u32::MAX, 100, 5_000, 1.0), 5_000);
    assert_eq!(backoff_ms(4, 100, 5_000, 0.0), 0);
}

fn view(seq: u64, hash: &str) -> View {
    crate::test_views::full_view(hash, seq, &[("w1", 0.2)])
}

/// A service whose first connection sends a view, a garbage event and a
/// view, then ends; the next connections send one view and end.
async fn serve(hash: String) -> String {
    let connections = Arc::new(AtomicUsize::new(0));
    let app = Router::new().route(
        "/v1/view",
        get(move || {
            let n = connections.fetch_add(1, Ordering::SeqCst) as u64;
            let hash = hash.clone();
            async move {
                let mut events = vec![
                    Event::default()
                        .event("view")
                        .json_data(view(10 * n, &hash)),
                ];
                if n == 0 {
                    events.push(Ok(Event::default().event("view").data("{not json")));
                    events.push(Event::default().event("view").json_data(view(1, &hash)));
                }
                let events: Vec<Result<Event, Infallible>> =
                    events.into_iter().map(|e| Ok(e.expect("event"))).collect();
                Sse::new(futures_util::stream::iter(events))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

type Following = (
    mpsc::UnboundedReceiver<FollowEvent>,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
);

/// Follows `base` into `balancer` at `clock`'s time, retrying after at most
/// 1 ms: the events, the stop and the task.
fn follow(balancer: &Arc<Balancer>, base: String, clock: ManualClock) -> Following {
    let mut cfg = FollowConfig::new(base);
    cfg.backoff_base_ms = 1;
    let (tx, rx) = mpsc::unbounded_channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(follow_view(
        balancer.clone(),
        reqwest::Client::new(),
        cfg,
        Arc::new(clock),
        move |e| {
            let _ = tx.send(e);
        },
        async move {
            let _ = stop_rx.await;
        },
    ));
    (rx, stop_tx, task)
}

#[tokio::test]
async fn views_are_applied_garbage_is_refused_and_a_dropped_stream_reconnects() {
    let balancer = Arc::new(Balancer::new(Config::default(), BalancerConfig::new("r")).unwrap());
    let base = serve(balancer.engine().config_hash().to_string()).await;
    let (mut rx, stop_tx, task) = follow(&balancer, base, ManualClock::new(5_000, WALL + 100));
    let mut seen = Vec::new();
    while seen
        .iter()
        .filter(|e| **e == FollowEvent::Connected)
        .count()
        < 2
    {
        seen.push(rx.recv().await.expect("an event"));
    }
    seen.push(rx.recv().await.expect("the second connection's view"));
    let _ = stop_tx.send(());
    task.await.unwrap();
    assert_eq!(seen[..2], [FollowEvent::Connected, FollowEvent::Applied(0)]);
    assert!(matches!(&seen[2], FollowEvent::Refused(why) if why.starts_with("not a view")));
    assert_eq!(seen[3], FollowEvent::Applied(1));
    assert!(matches!(&seen[4], FollowEvent::Disconnected { retry_in_ms, .. } if *retry_in_ms <= 1));
    assert_eq!(
        seen[5..],
        [FollowEvent::Connected, FollowEvent::Applied(10)]
    );
    let stats = balancer.stats(5_000);
    assert_eq!((stats.views_applied, stats.views_refused), (3, 1));
    assert_eq!(stats.stream_connects, 2);
    // The second stream may have ended before the stop.
    assert!((1..=2).contains(&stats.stream_disconnects));
    assert_eq!(stats.view_age_ms, Some(0));
}

#[tokio::test]
async fn a_service_that_is_not_there_is_retried_until_stopped() {
    let balancer = Arc::new(Balancer::new(Config::default(), BalancerConfig::new("r")).unwrap());
    // A port nothing listens on.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let (mut rx, stop_tx, task) = follow(&balancer, base, ManualClock::new(0, WALL));
    for _ in 0..3 {
        let e = rx.recv().await.expect("an event");
        assert!(
            matches!(&e, FollowEvent::Disconnected { reason, .. } if reason.starts_with("connect")),
            "{e:?}"
        );
    }
    let _ = stop_tx.send(());
    task.await.unwrap();
    assert_eq!(balancer.stats(0).stream_connects, 0);
}
