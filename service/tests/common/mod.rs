//! Shared helpers for the HTTP tests: an app over a manual clock, and
//! one-shot requests with no socket.
#![allow(dead_code)]

pub mod model_fixture;
pub mod nats;
pub mod replicas;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use scorer_core::clock::ManualClock;
use scorer_engine::Engine;
use scorer_engine::config::Config;
use serde_json::Value;
use service::{AppState, app};
use tower::ServiceExt;

/// Wall clock used by tests, Unix ms.
pub const WALL: u64 = 1_750_000_000_000;

pub struct TestApp {
    pub router: Router,
    pub clock: Arc<ManualClock>,
    pub state: AppState,
}

pub fn test_app(config: Config) -> TestApp {
    let clock = Arc::new(ManualClock::new(1_000, WALL));
    let state = AppState::new(Engine::new(config), clock.clone());
    TestApp {
        router: app(state.clone()),
        clock,
        state,
    }
}

/// `test_app(config)` served over a real socket on 127.0.0.1 (with the
/// binary's connection limits), and its address.
pub async fn serve_on_socket(config: Config) -> (std::net::SocketAddr, TestApp) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let limits = service::http::ConnectionLimits::from_config(&config.server);
    let t = test_app(config);
    tokio::spawn(service::http::serve(
        listener,
        t.router.clone(),
        limits,
        None,
        std::future::pending(),
    ));
    (addr, t)
}

/// An app whose reload source returns whatever the test last put in
/// `next` (the second value), with `log` attached.
pub fn reloadable(
    cfg: Config,
    log: Option<scorer_log::DecisionLog>,
) -> (TestApp, Arc<std::sync::Mutex<Config>>) {
    let clock = Arc::new(ManualClock::new(1_000, WALL));
    let mut engine = Engine::new(cfg.clone());
    if let Some(log) = log {
        engine = engine.with_log(Arc::new(log));
    }
    let next = Arc::new(std::sync::Mutex::new(cfg));
    let source = next.clone();
    let state = AppState::new(engine, clock.clone())
        .with_config_source(Arc::new(move || Ok(source.lock().expect("lock").clone())));
    (
        TestApp {
            router: app(state.clone()),
            clock,
            state,
        },
        next,
    )
}

/// [`no_warmup`] without a model: the reload tests' base.
pub fn rules_only() -> Config {
    let mut c = no_warmup();
    c.model.enabled = false;
    c
}

/// Reports worker `w1` at 95% CPU.
pub async fn report_busy_w1(t: &TestApp) {
    let snap = serde_json::json!({"snapshots": [{"worker_id": "w1", "timestamp_ms": WALL, "cpu_usage": 0.95,
        "queue_depth": 0, "rtt_ms_avg": 1.0, "rtt_ms_p99": 2.0, "error_rate": 0.0}]});
    assert_eq!(t.post_json("/v1/telemetry", &snap).await.0, StatusCode::OK);
}

/// A fresh directory for test `name` (under the temp dir, named with the
/// process id), `cfg` logging decisions into its `decisions/`, and that
/// decision log started on a manual clock.
pub fn logging(
    name: &str,
    mut cfg: Config,
) -> (std::path::PathBuf, Config, scorer_log::DecisionLog) {
    let dir = std::env::temp_dir().join(format!("scorer-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    cfg.log.dir = dir.join("decisions");
    let clock = Arc::new(ManualClock::new(1_000, WALL));
    let log = scorer_log::DecisionLog::start(cfg.log.clone(), clock).expect("log");
    (dir, cfg, log)
}

pub fn no_warmup() -> Config {
    let mut c = Config::default();
    c.scoring.warmup_ms = 0;
    c
}

impl TestApp {
    /// Sends `req` as if from a loopback peer (as the binary records it).
    pub async fn send(&self, mut req: Request<Body>) -> (StatusCode, Value) {
        req.extensions_mut()
            .insert(axum::extract::ConnectInfo(std::net::SocketAddr::from((
                [127, 0, 0, 1],
                40000,
            ))));
        let resp = self.router.clone().oneshot(req).await.expect("infallible");
        let status = resp.status();
        let bytes = resp.into_body().collect().await.expect("body").to_bytes();
        let v = serde_json::from_slice(&bytes).unwrap_or_else(|_| {
            panic!(
                "non-JSON body for {status}: {:?}",
                String::from_utf8_lossy(&bytes)
            )
        });
        (status, v)
    }

    pub async fn post(&self, path: &str, body: &str) -> (StatusCode, Value) {
        self.send(
            Request::post(path)
                .header("content-type", "application/json")
                .body(Body::from(body.to_owned()))
                .expect("request"),
        )
        .await
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.send(Request::get(path).body(Body::empty()).expect("request"))
            .await
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        self.post(path, &body.to_string()).await
    }

    /// The `/metrics` exposition text.
    pub async fn metrics(&self) -> String {
        let resp = self
            .router
            .clone()
            .oneshot(Request::get("/metrics").body(Body::empty()).expect("req"))
            .await
            .expect("infallible");
        assert_eq!(resp.status(), StatusCode::OK);
        assert!(
            resp.headers()["content-type"]
                .to_str()
                .unwrap_or("")
                .starts_with("application/openmetrics-text")
        );
        let bytes = resp.into_body().collect().await.expect("body").to_bytes();
        String::from_utf8(bytes.to_vec()).expect("utf-8")
    }
}

/// The value of the unlabelled sample `name` in exposition `text`.
pub fn metric_value(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Log lines captured from a [`capture_logs`] subscriber.
#[derive(Clone, Default)]
pub struct LogBuf(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogBuf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().map_or(Ok(0), |mut v| {
            v.extend_from_slice(b);
            Ok(b.len())
        })
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl LogBuf {
    /// What was written so far.
    #[allow(dead_code)] // not every test binary reads logs
    pub fn text(&self) -> String {
        let bytes = self.0.lock().map(|v| v.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// Captures this thread's logs at `level` and above, as the service's fmt
/// subscriber writes them (no colours), until the guard drops. A
/// current-thread tokio test runs its handlers on this thread.
#[allow(dead_code)] // not every test binary reads logs
pub fn capture_logs(level: tracing::Level) -> (tracing::subscriber::DefaultGuard, LogBuf) {
    let buf = LogBuf::default();
    let out = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(false)
        .with_writer(move || out.clone())
        .finish();
    (tracing::subscriber::set_default(subscriber), buf)
}

/// What `f` logs at `level` and above (see [`capture_logs`]).
#[allow(dead_code)] // not every test binary reads logs
pub fn logs_of(level: tracing::Level, f: impl FnOnce()) -> String {
    let (guard, buf) = capture_logs(level);
    f();
    drop(guard);
    buf.text()
}

/// The `data` of each SSE event in `text`, parsed, after checking its
/// `event` and `id` lines.
pub fn view_events(text: &str) -> Vec<scorer_engine::view::View> {
    text.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let field = |name: &str| {
                e.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(|v| v.strip_prefix(' ').unwrap_or(v).to_owned())
                    .unwrap_or_else(|| panic!("no {name} in {e:?}"))
            };
            assert_eq!(field("event:"), "view");
            let v: scorer_engine::view::View =
                serde_json::from_str(&field("data:")).expect("a View");
            assert_eq!(field("id:"), v.seq.to_string());
            v
        })
        .collect()
}
