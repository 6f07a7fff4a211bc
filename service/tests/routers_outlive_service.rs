//! Two routers that embed the balancer follow the real service binary; the
//! service is killed and the routers go on routing on what they know; it
//! comes back empty on the same port, the routers reconnect, and their
//! load reports rebuild the cross-router load it lost.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use scorer_balancer::follow::{FollowConfig, follow_view};
use scorer_balancer::report::report_load;
use scorer_balancer::{Balancer, BalancerConfig, BalancerStats, PickSource};
use scorer_core::clock::{Clock, SystemClock};
use scorer_engine::api::ScoreRequest;
use scorer_engine::config::Config;
use scorer_engine::view::View;
use serde_json::json;

struct Service(Child);

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(port: u16) -> Service {
    let child = Command::new(env!("CARGO_BIN_EXE_service"))
        .env("SCORER_SERVER__LISTEN", format!("127.0.0.1:{port}"))
        .env("SCORER_LOG__ENABLED", "false")
        .env("SCORER_SCORING__WARMUP_MS", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("service starts");
    Service(child)
}

/// Polls `done` every 20 ms until it holds, for at most 20 s.
async fn until(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn healthy(http: &reqwest::Client, base: &str) -> bool {
    http.get(format!("{base}/healthz"))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
}

async fn report_workers(http: &reqwest::Client, base: &str, clock: &SystemClock) {
    let snap = |id: &str, cpu: f64| {
        json!({"worker_id": id, "timestamp_ms": clock.wall_ms(), "cpu_usage": cpu,
               "queue_depth": 0, "rtt_ms_avg": 1.0, "rtt_ms_p99": 2.0, "error_rate": 0.0})
    };
    let r = http
        .post(format!("{base}/v1/telemetry"))
        .json(&json!({"snapshots": [snap("w1", 0.1), snap("w2", 0.3)]}))
        .send()
        .await
        .expect("telemetry");
    assert!(r.status().is_success());
}

/// What the service's view tells `router_id` of the other routers' load on
/// `w1`.
async fn others_load_on_w1(http: &reqwest::Client, base: &str, router_id: &str) -> u32 {
    let Ok(r) = http
        .get(format!("{base}/v1/view?router_id={router_id}&max_events=1"))
        .send()
        .await
    else {
        return 0;
    };
    let text = r.text().await.unwrap_or_default();
    let Some(data) = text.lines().find_map(|l| l.strip_prefix("data:")) else {
        return 0;
    };
    let view: View = serde_json::from_str(data.trim()).expect("a view");
    view.load
        .unwrap_or_default()
        .iter()
        .find(|l| l.worker_id == "w1")
        .map_or(0, |l| l.outstanding)
}

struct Router {
    balancer: Arc<Balancer>,
}

impl Router {
    fn start(id: &str, base: &str, stop: &tokio::sync::watch::Receiver<bool>) -> Self {
        let mut cfg = Config::default();
        cfg.scoring.warmup_ms = 0;
        let balancer = Arc::new(Balancer::new(cfg, BalancerConfig::new(id)).expect("valid"));
        let mut follow = FollowConfig::new(base);
        follow.backoff_base_ms = 20;
        follow.backoff_max_ms = 200;
        let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
        let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        let http = reqwest::Client::new();
        tokio::spawn(follow_view(
            balancer.clone(),
            http.clone(),
            follow.clone(),
            clock,
            |_| {},
            stopped(stop.clone()),
        ));
        tokio::spawn(report_load(
            balancer.clone(),
            http,
            follow,
            stopped(stop.clone()),
        ));
        Self { balancer }
    }

    fn stats(&self) -> BalancerStats {
        self.balancer.stats(0)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routers_route_through_a_service_crash_and_resync_when_it_returns() {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let clock = SystemClock::new();
    let mut service = start(port);
    until("the service", async || healthy(&http, &base).await).await;
    report_workers(&http, &base, &clock).await;

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let r1 = Router::start("r1", &base, &stop_rx);
    let r2 = Router::start("r2", &base, &stop_rx);
    until("both routers to know both workers", async || {
        [&r1, &r2]
            .iter()
            .all(|r| r.balancer.engine().registry().len() == 2)
    })
    .await;

    // r1 holds five picks open on w1; the service passes them on to r2.
    let req = ScoreRequest::new("user:1:a", vec!["w1".into()]);
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mono = SystemClock::new();
    for _ in 0..5 {
        let p = r1
            .balancer
            .pick(&req, mono.monotonic_ms(), &mut rng)
            .unwrap();
        assert_eq!((p.worker.as_str(), p.source), ("w1", PickSource::View));
    }
    until("r2 to be told r1's load", async || {
        others_load_on_w1(&http, &base, "r2").await == 5
    })
    .await;

    // The service dies: both routers go on routing on the last view and
    // their own evidence, every pick answered.
    let _ = service.0.kill();
    let _ = service.0.wait();
    until("both streams to notice", async || {
        [&r1, &r2].iter().all(|r| r.stats().stream_disconnects >= 1)
    })
    .await;
    let both = ScoreRequest::new("user:2:b", vec!["w1".into(), "w2".into()]);
    for r in [&r1, &r2] {
        for _ in 0..100 {
            let p = r
                .balancer
                .pick(&both, mono.monotonic_ms(), &mut rng)
                .unwrap();
            assert_eq!(
                p.source,
                PickSource::View,
                "the last view is within view_ttl_ms"
            );
            r.balancer
                .outcome(&p.decision_id, &p.worker, 0.5, true, mono.monotonic_ms())
                .unwrap();
        }
    }
    let connects = [r1.stats().stream_connects, r2.stats().stream_connects];

    // It comes back empty on the same port: the routers reconnect and
    // r1's next load reports rebuild what r2 is told.
    service = start(port);
    until("the service again", async || healthy(&http, &base).await).await;
    report_workers(&http, &base, &clock).await;
    until("both routers to reconnect", async || {
        r1.stats().stream_connects > connects[0] && r2.stats().stream_connects > connects[1]
    })
    .await;
    until("r1's load rebuilt for r2", async || {
        others_load_on_w1(&http, &base, "r2").await == 5
    })
    .await;
    let applied = r2.stats().views_applied;
    until("a view applied after the restart", async || {
        r2.stats().views_applied > applied
    })
    .await;
    let _ = stop_tx.send(true);
    drop(service);
}
