use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::post;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use scorer_core::clock::ManualClock;
use scorer_engine::api::ScoreRequest;
use scorer_engine::config::Config;
use tokio::sync::mpsc;

use super::*;
use crate::BalancerConfig;
use crate::records::RecordBuffer;

const WALL: u64 = 1_750_000_000_000;

fn logging_balancer(capacity: usize) -> Arc<Balancer> {
    let mut cfg = Config::default();
    cfg.scoring.warmup_ms = 0;
    cfg.log.enabled = true;
    cfg.log.sample_rate = 1.0;
    cfg.log.candidate_features_rate = 0.0;
    let clock = Arc::new(ManualClock::new(0, WALL));
    let records = Arc::new(RecordBuffer::new(capacity, &cfg.log, clock));
    let mut bc = BalancerConfig::new("edge-7");
    bc.first_decision_seq = 0xa0;
    let b = Balancer::new(cfg, bc).unwrap().with_records(records);
    let view = crate::test_views::full_view(&b.engine().config_hash(), 0, &[("w1", 0.1)]);
    b.apply_view(&view, 0, WALL).unwrap();
    Arc::new(b)
}

fn pick(b: &Balancer, rng: &mut ChaCha8Rng) -> crate::Pick {
    let req = ScoreRequest::new("user:1:a", vec!["w1".into(), "w2".into()]);
    b.pick(&req, 0, rng).unwrap()
}

#[test]
fn a_full_buffer_drops_and_counts_and_never_fails_a_pick() {
    let b = logging_balancer(4);
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let picks: Vec<_> = (0..10).map(|_| pick(&b, &mut rng)).collect();
    assert_eq!(picks[0].decision_id, "edge-7-00000000000000a0");
    let stats = b.stats(0).records.expect("a buffer");
    assert_eq!((stats.queued, stats.dropped, stats.waiting), (4, 6, 4));
    let records = b.records().unwrap();
    let batch = records.drain("edge-7", 3).expect("records");
    let ids: Vec<_> = batch
        .decisions
        .iter()
        .map(|d| d.decision_id.as_str())
        .collect();
    assert_eq!(
        ids,
        [
            &picks[0].decision_id,
            &picks[1].decision_id,
            &picks[2].decision_id
        ]
    );
    let d = &batch.decisions[0];
    assert_eq!(d.ts_ms, i64::try_from(WALL).unwrap());
    // Outside the candidate-features sample only the pick carries features.
    for c in &d.candidates {
        assert_eq!(c.features.is_some(), c.picked, "{c:?}");
    }
    // Outcomes go in behind them; the fourth record fills the buffer again
    // and the next outcome is dropped.
    for p in &picks[..4] {
        b.outcome(&p.decision_id, &p.worker, 2.0, true, 1).unwrap();
    }
    let stats = b.stats(1).records.unwrap();
    assert_eq!((stats.queued, stats.dropped, stats.waiting), (7, 7, 4));
    let rest = records.drain("edge-7", 100).unwrap();
    assert_eq!((rest.decisions.len(), rest.outcomes.len()), (1, 3));
    assert_eq!(rest.outcomes[0].decision_id, picks[0].decision_id);
    assert_eq!(rest.outcomes[0].latency_ms, 2.0);
    assert!(records.drain("edge-7", 100).is_none());
}

#[tokio::test]
async fn a_failed_batch_is_sent_again_and_a_refused_one_is_counted_not_resent() {
    let (tx, mut rx) = mpsc::unbounded_channel::<RouterRecords>();
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let app = Router::new().route(
        "/v1/router/decisions",
        post(move |axum::Json(batch): axum::Json<RouterRecords>| {
            let n = seen.fetch_add(1, Ordering::SeqCst);
            let _ = tx.send(batch);
            async move {
                match n {
                    0 => (StatusCode::SERVICE_UNAVAILABLE, String::new()),
                    1 => (
                        StatusCode::OK,
                        r#"{"decisions": {"refused": 1}, "outcomes": {"refused": 0}}"#.into(),
                    ),
                    _ => (StatusCode::UNPROCESSABLE_ENTITY, String::new()),
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let b = logging_balancer(64);
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let first = pick(&b, &mut rng);
    pick(&b, &mut rng);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(report_records(
        b.clone(),
        reqwest::Client::new(),
        FollowConfig::new(base),
        async move {
            let _ = stop_rx.await;
        },
    ));
    let failed = rx.recv().await.unwrap();
    let again = rx.recv().await.unwrap();
    assert_eq!(failed, again, "the failed batch is sent again, whole");
    assert_eq!(again.router_id, "edge-7");
    assert_eq!(again.decisions[0].decision_id, first.decision_id);
    assert_eq!(again.decisions.len(), 2);
    // A batch refused whole with a 422 is counted and not sent again.
    pick(&b, &mut rng);
    let third = rx.recv().await.unwrap();
    assert_eq!(third.decisions.len(), 1);
    let stats = loop {
        let s = b.stats(0).records.unwrap();
        if s.refused == 2 {
            break s;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    };
    assert_eq!((stats.sent, stats.posts_failed, stats.waiting), (1, 1, 0));
    let _ = stop_tx.send(());
    task.await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[test]
fn a_reported_hit_or_miss_travels_in_the_outcome_record() {
    let b = logging_balancer(16);
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let picks: Vec<_> = (0..3).map(|_| pick(&b, &mut rng)).collect();
    let hits = [Some(true), Some(false), None];
    for (p, hit) in picks.iter().zip(hits) {
        b.outcome_with_cache_hit(&p.decision_id, &p.worker, 2.0, true, hit, 1)
            .unwrap();
    }
    let batch = b.records().unwrap().drain("edge-7", 100).unwrap();
    let sent: Vec<_> = batch.outcomes.iter().map(|o| o.cache_hit).collect();
    assert_eq!(sent, hits);
    let json = serde_json::to_value(&batch.outcomes).unwrap();
    assert_eq!(json[0]["cache_hit"], true);
    assert_eq!(json[1]["cache_hit"], false);
    assert!(json[2].get("cache_hit").is_none(), "absent when unknown");
}
