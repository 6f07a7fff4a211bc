//! End to end against a real `redis-server`: the agent polls it and posts to a
//! tiny hyper receiver; a `CLIENT PAUSE` must show up as errors and timeout-
//! sized RTTs, and an unreachable worker must never be reported.

use std::net::TcpListener as StdListener;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent::redis_info::unix_ms_now;
use agent::{AgentConfig, WorkerSpec};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use scorer_core::telemetry::{Snapshot, TelemetryBatch};
use tokio::time::{Instant, sleep, timeout};

const PROBE_TIMEOUT_MS: u64 = 100;

/// A `redis-server` child process, killed by pid when dropped.
struct RedisServer {
    child: Child,
    port: u16,
}

impl RedisServer {
    fn start() -> Self {
        Self::start_on(free_port())
    }

    fn start_on(port: u16) -> Self {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (apt-get install redis-server)");
        Self { child, port }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port that was free a moment ago (bind to :0, read it, release it).
fn free_port() -> u16 {
    let l = StdListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local addr").port()
}

type Received = Arc<Mutex<Vec<Snapshot>>>;

/// `POST /v1/telemetry`: keeps the batch's snapshots, answers `accepted`.
async fn collect(
    rx: Received,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, hyper::Error> {
    if req.uri().path() != "/v1/telemetry" {
        let mut not_found = Response::new(Full::new(Bytes::new()));
        *not_found.status_mut() = hyper::StatusCode::NOT_FOUND;
        return Ok(not_found);
    }
    let body = req.into_body().collect().await?.to_bytes();
    let batch: TelemetryBatch = serde_json::from_slice(&body).expect("a telemetry batch");
    let n = batch.snapshots.len();
    rx.lock().unwrap().extend(batch.snapshots);
    let answer = serde_json::json!({ "accepted": n }).to_string();
    Ok(Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(answer)))
        .expect("a response"))
}

/// Starts the receiver; returns its base URL and the collected snapshots.
async fn start_receiver() -> (String, Received) {
    let received = Received::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let rx = received.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let rx = rx.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| collect(rx.clone(), req));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (format!("http://{addr}"), received)
}

/// Polls `received` until a snapshot satisfies `pred`, or panics at `within`.
async fn wait_for(
    received: &Received,
    within: Duration,
    what: &str,
    pred: impl Fn(&Snapshot) -> bool,
) -> Snapshot {
    let deadline = Instant::now() + within;
    loop {
        if let Some(s) = received.lock().unwrap().iter().find(|s| pred(s)) {
            return s.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no snapshot {what} within {within:?}; got {:#?}",
            received.lock().unwrap()
        );
        sleep(Duration::from_millis(20)).await;
    }
}

async fn connect_control(port: u16) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Ok(mut c)) = timeout(
            Duration::from_secs(1),
            client.get_multiplexed_async_connection(),
        )
        .await
            && redis::cmd("PING")
                .query_async::<String>(&mut c)
                .await
                .is_ok()
        {
            return c;
        }
        assert!(Instant::now() < deadline, "redis-server did not start");
        sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_real_redis_and_paused_redis() {
    let redis = RedisServer::start();
    let mut ctl = connect_control(redis.port).await;
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "maxmemory", "104857600"])
        .query_async(&mut ctl)
        .await
        .unwrap();

    let (base, received) = start_receiver().await;
    let ghost_port = free_port(); // nothing listens here
    let mut cfg = AgentConfig::new(
        base,
        vec![
            WorkerSpec {
                id: "r".into(),
                host: "127.0.0.1".into(),
                port: redis.port,
            },
            WorkerSpec {
                id: "ghost".into(),
                host: "127.0.0.1".into(),
                port: ghost_port,
            },
        ],
    );
    cfg.interval_ms = 400;
    cfg.probe_timeout_ms = PROBE_TIMEOUT_MS;
    cfg.pings_per_interval = 4;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let agent = tokio::spawn(agent::run(cfg, async {
        let _ = stop_rx.await;
    }));

    // A healthy snapshot with plausible values.
    let started_ms = unix_ms_now();
    let healthy = wait_for(&received, Duration::from_secs(5), "from r", |s| {
        s.worker_id == "r"
    })
    .await;
    assert!((0.0..=1.0).contains(&healthy.cpu_usage), "{healthy:?}");
    assert!(healthy.rtt_ms_avg > 0.0 && healthy.rtt_ms_avg < PROBE_TIMEOUT_MS as f64);
    assert!(healthy.rtt_ms_p99 >= healthy.rtt_ms_avg);
    assert!(healthy.rtt_ms_p99 < PROBE_TIMEOUT_MS as f64, "{healthy:?}");
    assert_eq!(healthy.error_rate, 0.0);
    assert_eq!(healthy.queue_depth, 0);
    assert!(!healthy.compacting && !healthy.under_repair);
    let mem = healthy.mem_available_ratio.expect("maxmemory is set");
    assert!(mem > 0.9 && mem < 1.0, "{mem}");
    assert!(healthy.timestamp_ms + 5_000 > started_ms && healthy.timestamp_ms <= unix_ms_now());

    // One hit and one miss in the same MULTI: some interval sees exactly 0.5.
    let _: () = redis::cmd("SET")
        .arg(&["k", "v"])
        .query_async(&mut ctl)
        .await
        .unwrap();
    let _: (Option<String>, Option<String>) = redis::pipe()
        .atomic()
        .get("k")
        .get("missing")
        .query_async(&mut ctl)
        .await
        .unwrap();
    wait_for(
        &received,
        Duration::from_secs(5),
        "with hit rate 0.5",
        |s| s.worker_id == "r" && s.cache_hit_rate == Some(0.5),
    )
    .await;

    // Pause every client for 2 s: probes time out, INFO times out.
    let paused_at = unix_ms_now();
    let _: () = redis::cmd("CLIENT")
        .arg(&["PAUSE", "2000"])
        .query_async(&mut ctl)
        .await
        .unwrap();
    let paused = wait_for(
        &received,
        Duration::from_secs(5),
        "showing the pause",
        |s| s.worker_id == "r" && s.timestamp_ms > paused_at && s.error_rate > 0.0,
    )
    .await;
    assert!(
        paused.rtt_ms_p99 >= PROBE_TIMEOUT_MS as f64,
        "timed-out probes must count as RTT samples: {paused:?}"
    );
    assert!(paused.error_rate <= 1.0);
    eprintln!("healthy: {healthy:?}\npaused: {paused:?}");
    // Last known INFO values are still reported.
    assert!(paused.mem_available_ratio.is_some());

    // The same connection recovers once the pause ends.
    wait_for(&received, Duration::from_secs(6), "after the pause", |s| {
        s.worker_id == "r" && s.timestamp_ms > paused_at + 2_500 && s.error_rate == 0.0
    })
    .await;

    stop_tx.send(()).unwrap();
    let result = timeout(Duration::from_secs(5), agent)
        .await
        .expect("agent stops on shutdown")
        .expect("agent task did not panic");
    assert!(result.is_ok(), "{result:?}");

    let got = received.lock().unwrap().clone();
    assert!(
        got.iter().all(|s| s.worker_id != "ghost"),
        "an unreachable worker must not be reported"
    );
    let stamps: Vec<u64> = got
        .iter()
        .filter(|s| s.worker_id == "r")
        .map(|s| s.timestamp_ms)
        .collect();
    assert!(
        stamps.windows(2).all(|w| w[0] < w[1]),
        "timestamps must strictly increase: {stamps:?}"
    );
    drop(redis);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_until_reachable_and_stops_reporting_when_gone() {
    let (base, received) = start_receiver().await;
    let port = free_port();
    let mut cfg = AgentConfig::new(
        base,
        vec![WorkerSpec {
            id: "late".into(),
            host: "127.0.0.1".into(),
            port,
        }],
    );
    cfg.interval_ms = 300;
    cfg.probe_timeout_ms = PROBE_TIMEOUT_MS;
    cfg.pings_per_interval = 3;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let agent = tokio::spawn(agent::run(cfg, async {
        let _ = stop_rx.await;
    }));

    // Nothing listens yet: several intervals pass without a report.
    sleep(Duration::from_millis(700)).await;
    assert!(received.lock().unwrap().is_empty());

    let redis = RedisServer::start_on(port);
    connect_control(port).await;
    wait_for(&received, Duration::from_secs(5), "once reachable", |s| {
        s.worker_id == "late" && s.error_rate == 0.0
    })
    .await;

    // Gone again: reports stop (at most the interval in flight still arrives).
    drop(redis);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last_len = received.lock().unwrap().len();
    let mut quiet_since = Instant::now();
    while quiet_since.elapsed() < Duration::from_millis(1_000) {
        assert!(Instant::now() < deadline, "reports did not stop");
        sleep(Duration::from_millis(50)).await;
        let len = received.lock().unwrap().len();
        if len != last_len {
            last_len = len;
            quiet_since = Instant::now();
        }
    }
    assert!(!agent.is_finished(), "the agent keeps running");

    stop_tx.send(()).unwrap();
    let result = timeout(Duration::from_secs(5), agent)
        .await
        .expect("agent stops on shutdown")
        .expect("agent task did not panic");
    assert!(result.is_ok(), "{result:?}");
}
