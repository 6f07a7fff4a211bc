//! `GET /v1/view`: a full view on connect, accepted telemetry as deltas, a
//! full view every second; bounded by `max_events`; a balancer fed from it
//! decides as the service does.

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use scorer_balancer::{Balancer, BalancerConfig, PickSource};
use scorer_core::clock::Clock;
use scorer_engine::api::ScoreRequest;
use scorer_engine::view::{View, ViewKind};
use serde_json::json;
use tower::ServiceExt;

use common::{TestApp, no_warmup, test_app, view_events};

async fn report(app: &TestApp, id: &str, cpu: f64, queue: u32) {
    let now = app.clock.wall_ms();
    let body = json!({"snapshots": [{
        "worker_id": id, "timestamp_ms": now, "cpu_usage": cpu, "queue_depth": queue,
        "rtt_ms_avg": 1.0, "rtt_ms_p99": 2.0, "error_rate": 0.0,
        "compacting": false, "under_repair": false, "version_lag": 0,
    }]});
    let (status, answer) = app.post_json("/v1/telemetry", &body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}

#[tokio::test(start_paused = true)]
async fn the_stream_sends_a_full_view_then_deltas_then_the_full_view_again() {
    let app = test_app(no_warmup());
    report(&app, "w1", 0.1, 0).await;
    app.clock.advance(250);
    let req = Request::get("/v1/view?max_events=3")
        .extension(axum::extract::ConnectInfo(std::net::SocketAddr::from((
            [127, 0, 0, 1],
            40000,
        ))))
        .body(Body::empty())
        .unwrap();
    let resp = app.router.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut body = resp.into_body();
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    let full = &view_events(std::str::from_utf8(&first).unwrap())[0];
    assert_eq!(
        (full.kind, full.seq, full.workers.len()),
        (ViewKind::Full, 0, 1)
    );
    assert_eq!(full.workers[0].age_ms, 250);
    assert_eq!(full.config_hash, *app.state.engine.config_hash());
    // A report accepted now comes as a delta.
    report(&app, "w2", 0.9, 40).await;
    let rest = body.collect().await.unwrap().to_bytes();
    let rest = view_events(std::str::from_utf8(&rest).unwrap());
    assert_eq!(rest.len(), 2, "max_events ends the stream");
    assert_eq!((rest[0].kind, rest[0].seq), (ViewKind::Delta, 1));
    let ids: Vec<_> = rest[0]
        .workers
        .iter()
        .map(|w| &w.snapshot.worker_id[..])
        .collect();
    assert_eq!(ids, ["w2"]);
    assert_eq!(rest[0].workers[0].age_ms, 0);
    assert_eq!((rest[1].kind, rest[1].seq), (ViewKind::Full, 2));
    assert_eq!(rest[1].workers.len(), 2);

    // A balancer fed from the stream replays both reports and decides as
    // the service does: the idle worker over the busy one.
    let b = Balancer::new(no_warmup(), BalancerConfig::new("r1")).unwrap();
    let now = app.clock.monotonic_ms();
    for v in std::iter::once(full).chain(&rest) {
        b.apply_view(v, now, app.clock.wall_ms()).unwrap();
    }
    let mut req = ScoreRequest::new("user:1:a", vec!["w2".into(), "w1".into()]);
    req.policy = Some("max".into());
    let pick = b
        .pick(&req, now, &mut ChaCha8Rng::seed_from_u64(1))
        .unwrap();
    assert_eq!(
        (pick.worker.as_str(), pick.source),
        ("w1", PickSource::View)
    );
    let (_, service) = app
        .post_json(
            "/v1/score",
            &json!({"key": "user:1:a", "candidates": ["w2", "w1"], "policy": "max"}),
        )
        .await;
    assert_eq!(service["pick"], "w1");
}

#[tokio::test]
async fn a_bad_query_is_refused() {
    let app = test_app(no_warmup());
    for q in [
        "max_events=0",
        "max_events=1000001",
        "max_events=x",
        "other=1",
    ] {
        let (status, body) = app.get(&format!("/v1/view?{q}")).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{q}: {body}");
    }
}

#[tokio::test(start_paused = true)]
async fn closing_the_hub_ends_every_stream() {
    let app = test_app(no_warmup());
    let resp = app
        .router
        .clone()
        .oneshot(Request::get("/v1/view").body(Body::empty()).unwrap())
        .await
        .unwrap();
    let mut body = resp.into_body();
    assert!(body.frame().await.is_some(), "the first full view");
    app.state.view_hub.close();
    let rest = body.collect().await.unwrap().to_bytes();
    assert!(rest.is_empty(), "{rest:?}");
}

async fn open(app: &TestApp, query: &str) -> axum::body::Body {
    let req = Request::get(format!("/v1/view?{query}"))
        .body(Body::empty())
        .unwrap();
    let resp = app.router.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    resp.into_body()
}

#[tokio::test(start_paused = true)]
async fn each_router_is_streamed_the_other_routers_load_without_its_own() {
    let app = test_app(no_warmup());
    report(&app, "w1", 0.1, 0).await;
    let load =
        |n: u32| json!({"router_id": "r2", "outstanding": [{"worker_id": "w1", "outstanding": n}]});
    let (status, body) = app.post_json("/v1/router/load", &load(4)).await;
    assert_eq!((status, &body["routers"]), (StatusCode::OK, &json!(1)));
    let mut r1 = open(&app, "router_id=r1&max_events=2").await;
    let first = r1.frame().await.unwrap().unwrap().into_data().unwrap();
    let full = &view_events(std::str::from_utf8(&first).unwrap())[0];
    let pairs = |v: &View| -> Vec<(String, u32)> {
        let load = v.load.as_ref().expect("load in the event");
        load.iter()
            .map(|l| (l.worker_id.clone(), l.outstanding))
            .collect()
    };
    assert_eq!(pairs(full), [("w1".to_owned(), 4)]);
    // r2's next report reaches r1 as a load delta.
    app.post_json("/v1/router/load", &load(1)).await;
    let rest = r1.collect().await.unwrap().to_bytes();
    let rest = view_events(std::str::from_utf8(&rest).unwrap());
    assert_eq!((rest[0].kind, rest[0].workers.len()), (ViewKind::Delta, 0));
    assert_eq!(pairs(&rest[0]), [("w1".to_owned(), 1)]);
    // r2 is not told its own load.
    let own = open(&app, "router_id=r2&max_events=1").await;
    let own = own.collect().await.unwrap().to_bytes();
    assert!(pairs(&view_events(std::str::from_utf8(&own).unwrap())[0]).is_empty());
    // Bad reports are refused and change nothing.
    for bad in [
        json!({"router_id": "r 2", "outstanding": []}),
        json!({"router_id": "r2", "outstanding": [{"worker_id": "w1", "outstanding": 1}, {"worker_id": "w1", "outstanding": 2}]}),
        json!({"router_id": "r2", "outstanding": [{"worker_id": "w1", "outstanding": -1}]}),
        json!({"router_id": "r2"}),
    ] {
        let (status, body) = app.post_json("/v1/router/load", &bad).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {body}");
    }
    let others = app
        .state
        .load_board
        .others(Some("r1"), app.clock.monotonic_ms());
    assert_eq!(others.load[0].outstanding, 1);
    let (status, _) = app.get("/v1/view?router_id=has%20space").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
}

/// The frames of the next event on `body` (an event ends with a blank
/// line; a large one comes as several frames).
async fn next_event_frames(body: &mut Body) -> Vec<axum::body::Bytes> {
    let mut frames = Vec::new();
    loop {
        let f = body.frame().await.unwrap().unwrap().into_data().unwrap();
        let ends = f.ends_with(b"\n\n");
        frames.push(f);
        if ends {
            return frames;
        }
    }
}

async fn report_many(app: &TestApp, n: usize) {
    let now = app.clock.wall_ms();
    let snapshots: Vec<_> = (0..n)
        .map(|i| {
            json!({"worker_id": format!("worker-{i:04}"), "timestamp_ms": now, "cpu_usage": 0.5,
                   "queue_depth": 3, "rtt_ms_avg": 1.0, "rtt_ms_p99": 2.0, "error_rate": 0.0})
        })
        .collect();
    let (status, answer) = app
        .post_json("/v1/telemetry", &json!({ "snapshots": snapshots }))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}

#[tokio::test(start_paused = true)]
async fn every_stream_sends_the_same_serialised_view_bytes() {
    let app = test_app(no_warmup());
    report_many(&app, 100).await;
    let mut a = open(&app, "router_id=a").await;
    let mut b = open(&app, "router_id=b").await;
    // Each stream's first full view is its own; the next, the hub's.
    let (a0, b0) = (
        next_event_frames(&mut a).await,
        next_event_frames(&mut b).await,
    );
    let (a1, b1) = (
        next_event_frames(&mut a).await,
        next_event_frames(&mut b).await,
    );
    let text = |frames: &[axum::body::Bytes]| {
        String::from_utf8(frames.iter().flat_map(|f| f.to_vec()).collect()).unwrap()
    };
    let (va, vb) = (&view_events(&text(&a1))[0], &view_events(&text(&b1))[0]);
    assert_eq!(
        (va.kind, va.seq, va.workers.len()),
        (ViewKind::Full, 1, 100)
    );
    assert_eq!(va.workers, vb.workers);
    // The workers' bytes are one buffer, shared by both streams.
    let workers = |frames: &[axum::body::Bytes]| {
        frames
            .iter()
            .find(|f| f.starts_with(b",\"config_hash\""))
            .cloned()
            .expect("the workers as their own frame")
    };
    assert_eq!(workers(&a1).as_ptr(), workers(&b1).as_ptr());
    assert_ne!(workers(&a0).as_ptr(), workers(&b0).as_ptr());
}

#[tokio::test(start_paused = true)]
async fn streamed_events_are_the_bytes_the_whole_view_serialises_to() {
    let app = test_app(no_warmup());
    report_many(&app, 3).await;
    let (status, body) = app
        .send(
            Request::put("/v1/admin/workers/worker-0001/override")
                .header("content-type", "application/json")
                .body(Body::from(
                    r#"{"kind":"drain","ttl_ms":60000,"reason":"disk \"a\""}"#,
                ))
                .unwrap(),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let load =
        json!({"router_id": "r2", "outstanding": [{"worker_id": "worker-0002", "outstanding": 3}]});
    assert_eq!(
        app.post_json("/v1/router/load", &load).await.0,
        StatusCode::OK
    );
    app.clock.advance(40);
    let stream = open(&app, "router_id=r1&max_events=1").await;
    let text = stream.collect().await.unwrap().to_bytes();
    let text = std::str::from_utf8(&text).unwrap();
    let data = text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();

    // What the stream wrote before, one View serialised per subscriber.
    let (engine, now) = (&app.state.engine, app.clock.monotonic_ms());
    let mut old = app.state.view_hub.full(engine, now, 0);
    let others = app.state.load_board.others(Some("r1"), now);
    old.load = Some(others.load);
    old.load_age_ms = Some(others.age_ms);
    old.load_routers = Some(others.routers);
    old.overrides = Some(engine.override_table().list(now));
    assert_eq!(data, serde_json::to_string(&old).unwrap());
    let parsed: View = serde_json::from_str(data).unwrap();
    assert_eq!(parsed, old);
    assert_eq!(parsed.overrides.as_ref().unwrap().len(), 1);
    assert_eq!(parsed.load.as_ref().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_subscriber_that_never_reads_is_cut_off_past_its_byte_budget() {
    let mut cfg = no_warmup();
    cfg.limits.view_stream_budget_bytes = 1;
    let app = test_app(cfg);
    report(&app, "w1", 0.1, 0).await;
    let stalled = open(&app, "").await;
    // A reader that takes each event stays.
    let mut reading = open(&app, "").await;
    let first = next_event_frames(&mut reading).await;
    assert!(first[0].starts_with(b"event: view\nid: 0\n"));
    let mut open_now = app.state.view_streams.watch_open();
    report(&app, "w2", 0.9, 40).await;
    // The stalled stream's second event finds its first unsent, past the
    // budget: it is cut off and its place freed.
    let cut = open_now.wait_for(|&n| n == 1);
    tokio::time::timeout(std::time::Duration::from_secs(10), cut)
        .await
        .expect("cut off within 10 s of the service's time")
        .unwrap();
    let m = app.metrics().await;
    assert_eq!(
        common::metric_value(&m, "scorer_view_stream_cutoffs_total"),
        Some(1.0)
    );
    assert_eq!(common::metric_value(&m, "scorer_view_streams"), Some(1.0));
    let delta = next_event_frames(&mut reading).await;
    let delta = &view_events(std::str::from_utf8(&delta[0]).unwrap())[0];
    assert_eq!((delta.kind, delta.seq), (ViewKind::Delta, 1));
    // What the stalled stream had queued is gone: only the reason is left.
    assert_eq!(
        common::metric_value(&app.metrics().await, "scorer_view_stream_queued_bytes"),
        Some(0.0)
    );
    let rest = stalled.collect().await.unwrap().to_bytes();
    let rest = std::str::from_utf8(&rest).unwrap();
    assert!(rest.starts_with(": cut off: "), "{rest}");
    assert!(
        rest.contains("limits.view_stream_budget_bytes (1); reconnect"),
        "{rest}"
    );
    assert!(!rest.contains("event: view"), "{rest}");
}
