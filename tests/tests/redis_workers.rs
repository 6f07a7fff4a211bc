//! End-to-end: three real `redis-server` workers, the telemetry agent and the
//! scoring service over HTTP, as `scripts/demo.sh` does by hand.
//!
//! w2 runs a slow `BGSAVE` (compacting) and w3 is under `CLIENT PAUSE`
//! (its probes time out); both must rank below the idle w1, and their
//! adjustments must name why in plain sentences with numbers.

use std::net::TcpListener as StdTcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agent::{AgentConfig, WorkerSpec};
use scorer_core::clock::SystemClock;
use scorer_engine::Engine;
use scorer_engine::config::Config;
use serde_json::{Value, json};
use service::AppState;
use tokio::sync::oneshot;

/// How often the test polls (redis readiness, the score endpoint).
const POLL: Duration = Duration::from_millis(150);
/// Keys written to every worker.
const KEYS: usize = 2000;
/// Per-key delay of w2's `BGSAVE`, µs: `KEYS` × 3 ms = a 6 s save.
const SAVE_DELAY_US: u64 = 3000;
/// How long w3 stays paused, ms.
const PAUSE_MS: u64 = 3000;

/// One `redis-server` child process.
struct RedisServer {
    child: Child,
    port: u16,
}

/// The three workers and their scratch directory; stops every server by pid
/// and removes the directory when dropped, also when the test panics.
struct Workers {
    servers: Vec<RedisServer>,
    dir: PathBuf,
}

impl Workers {
    /// Starts `n` redis-servers on free loopback ports and waits until each
    /// answers `PING` (at most 10 s each).
    async fn start(n: usize) -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("scorer-e2e-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the redis scratch directory");
        let mut workers = Self {
            servers: Vec::with_capacity(n),
            dir,
        };
        for i in 0..n {
            let server = start_redis(&workers.dir.join(format!("w{}", i + 1))).await;
            workers.servers.push(server);
        }
        workers
    }

    fn port(&self, i: usize) -> u16 {
        self.servers[i].port
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        // SIGTERM first: redis-server then also stops its BGSAVE child.
        for s in &self.servers {
            let _ = Command::new("kill")
                .args(["-TERM", &s.child.id().to_string()])
                .stderr(Stdio::null())
                .status();
        }
        let deadline = Instant::now() + Duration::from_secs(3);
        for s in &mut self.servers {
            while matches!(s.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if matches!(s.child.try_wait(), Ok(None)) {
                let _ = s.child.kill();
            }
            let _ = s.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A port that was free a moment ago on 127.0.0.1.
fn free_port() -> u16 {
    let listener = StdTcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local address").port()
}

/// Starts one redis-server in `dir` and waits until it answers. Retries on a
/// fresh port if the server exits at once (the port was taken meanwhile).
async fn start_redis(dir: &Path) -> RedisServer {
    std::fs::create_dir_all(dir).expect("create the redis directory");
    let mut last_error = String::new();
    for _attempt in 0..5 {
        let port = free_port();
        let mut child = Command::new("redis-server")
            .args(["--port", &port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server (is it installed? scripts/test.sh installs it)");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                last_error = format!("redis-server on port {port} exited: {status}");
                break;
            }
            if let Ok(mut conn) = connect(port).await
                && redis::cmd("PING")
                    .query_async::<String>(&mut conn)
                    .await
                    .is_ok()
            {
                return RedisServer { child, port };
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("redis-server on port {port} did not answer PING within 10 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    panic!("could not start redis-server: {last_error}");
}

/// A fresh connection to the redis-server on `port`, bounded to 2 s.
async fn connect(port: u16) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_response_timeout(Some(Duration::from_secs(2)));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

/// Writes `KEYS` keys `user:{i}:profile` in one pipeline.
async fn fill(port: u16) {
    let mut conn = connect(port).await.expect("connect to fill keys");
    let mut pipe = redis::pipe();
    for i in 1..=KEYS {
        pipe.cmd("SET")
            .arg(format!("user:{i}:profile"))
            .arg(format!("value-{i}"))
            .ignore();
    }
    pipe.query_async::<()>(&mut conn).await.expect("fill keys");
}

/// `POST /v1/score` for w1..w3 under policy `none`; returns the status and
/// the body (503 `no_eligible_workers` until some worker has reported).
async fn score(http: &reqwest::Client, base: &str) -> (u16, Value) {
    let resp = http
        .post(format!("{base}/v1/score"))
        .json(&json!({
            "key": "user:1:profile",
            "candidates": ["w1", "w2", "w3"],
            "policy": "none",
            "explain": true
        }))
        .send()
        .await
        .expect("POST /v1/score");
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.expect("score answer is JSON");
    (status, body)
}

/// The score entry of `worker` in a score answer.
fn entry<'a>(body: &'a Value, worker: &str) -> Option<&'a Value> {
    body["scores"]
        .as_array()?
        .iter()
        .find(|s| s["worker_id"] == worker)
}

/// The adjustment codes of `worker`.
fn codes(body: &Value, worker: &str) -> Vec<String> {
    entry(body, worker)
        .and_then(|s| s["adjustments"].as_array())
        .map(|a| {
            a.iter()
                .filter_map(|a| a["code"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Position of `worker` in the ranking.
fn rank(body: &Value, worker: &str) -> Option<usize> {
    body["ranking"].as_array()?.iter().position(|w| w == worker)
}

/// Every worker reported and is eligible (none unknown).
fn all_known(body: &Value) -> bool {
    ["w1", "w2", "w3"]
        .iter()
        .all(|w| entry(body, w).is_some_and(|s| s["eligible"] == true))
}

/// w1 first, w2 compacting, w3 erroring (its probes time out), both below
/// w1. `errors` rather than `rtt_p99_high` alone: on a busy machine an RTT
/// spike can deduct before the pause is seen.
fn degraded_as_expected(body: &Value) -> bool {
    let w2 = codes(body, "w2");
    let w3 = codes(body, "w3");
    rank(body, "w1") == Some(0)
        && rank(body, "w2").is_some_and(|r| r > 0)
        && rank(body, "w3").is_some_and(|r| r > 0)
        && w2.iter().any(|c| c == "compacting")
        && w3.iter().any(|c| c == "errors")
}

/// A reason a person can read: words, spaces and at least one number; no
/// debug output or non-finite values.
fn assert_plain_sentence(worker: &str, adjustment: &Value, body: &Value) {
    let reason = adjustment["reason"].as_str().unwrap_or_default();
    let words: Vec<&str> = reason
        .split(|c: char| c.is_whitespace() || ",:;()".contains(c))
        .filter(|w| !w.is_empty())
        .collect();
    let non_finite = ["NaN", "inf", "-inf", "Infinity"];
    let debug = ["Some(", "None", "{", "}", "\"", "\n"];
    assert!(
        words.len() >= 3
            && reason.chars().any(|c| c.is_ascii_digit())
            && reason.chars().any(|c| c.is_ascii_alphabetic())
            && !words.iter().any(|w| non_finite.contains(w))
            && !debug.iter().any(|d| reason.contains(d)),
        "{worker}'s `{}` reason {reason:?} is not a plain sentence with numbers; answer: {body}",
        adjustment["code"]
    );
}

/// Polls the score endpoint every `POLL` until it answers 200 with a body
/// for which `done` holds, or `limit` passes; returns the last answer
/// (`HTTP {status}: {body}` when not 200) and whether `done` held.
async fn poll_score(
    http: &reqwest::Client,
    base: &str,
    limit: Duration,
    done: impl Fn(&Value) -> bool,
) -> (Value, bool) {
    let deadline = Instant::now() + limit;
    loop {
        let (status, body) = score(http, base).await;
        let done = status == 200 && done(&body);
        if done || Instant::now() + POLL > deadline {
            let body = if status == 200 {
                body
            } else {
                Value::String(format!("HTTP {status}: {body}"))
            };
            return (body, done);
        }
        tokio::time::sleep(POLL).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn paused_and_saving_workers_rank_below_the_idle_one() {
    let started = Instant::now();
    let workers = Workers::start(3).await;

    // The service, in-process, on a free loopback port.
    let mut cfg = Config::default();
    cfg.scoring.warmup_ms = 0;
    let state = AppState::new(Engine::new(cfg), Arc::new(SystemClock::new()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the service");
    let base = format!("http://{}", listener.local_addr().expect("service address"));
    let (stop_server, server_stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, service::app(state))
            .with_graceful_shutdown(async {
                let _ = server_stopped.await;
            })
            .await
    });

    // The agent, polling the three workers.
    let specs = (0..3)
        .map(|i| WorkerSpec {
            id: format!("w{}", i + 1),
            host: "127.0.0.1".to_owned(),
            port: workers.port(i),
        })
        .collect();
    let mut agent_cfg = AgentConfig::new(base.clone(), specs);
    agent_cfg.interval_ms = 300;
    agent_cfg.probe_timeout_ms = 100;
    let (stop_agent, agent_stopped) = oneshot::channel::<()>();
    let agent = tokio::spawn(agent::run(agent_cfg, async {
        let _ = agent_stopped.await;
    }));

    for i in 0..3 {
        fill(workers.port(i)).await;
    }

    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .expect("HTTP client");

    // Every worker reports before anything is degraded.
    let (body, ok) = poll_score(&http, &base, Duration::from_secs(10), all_known).await;
    assert!(
        ok,
        "not every worker became eligible within 10 s; last answer: {body}"
    );

    // w2: a slow BGSAVE (compacting).
    let mut w2 = connect(workers.port(1)).await.expect("connect to w2");
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("rdb-key-save-delay")
        .arg(SAVE_DELAY_US)
        .query_async::<()>(&mut w2)
        .await
        .expect("CONFIG SET rdb-key-save-delay on w2");
    let reply: String = redis::cmd("BGSAVE")
        .query_async(&mut w2)
        .await
        .expect("BGSAVE on w2");
    assert!(reply.contains("started"), "BGSAVE answered {reply:?}");

    // w3: every client paused, from a connection of its own.
    let mut w3 = connect(workers.port(2)).await.expect("connect to w3");
    redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(PAUSE_MS)
        .query_async::<()>(&mut w3)
        .await
        .expect("CLIENT PAUSE on w3");
    drop(w3);
    let degraded_at = Instant::now();

    let (body, ok) = poll_score(&http, &base, Duration::from_secs(15), degraded_as_expected).await;
    assert!(
        ok,
        "within 15 s of BGSAVE on w2 and CLIENT PAUSE on w3, expected w1 ranked \
         first, w2 with `compacting` and w3 with `errors` (timed-out probes), both \
         below w1; last answer: {body}"
    );
    let noticed_after = degraded_at.elapsed();

    // The save was still running when it was noticed (the setup is sound).
    let persistence: String = redis::cmd("INFO")
        .arg("persistence")
        .query_async(&mut w2)
        .await
        .expect("INFO persistence on w2");
    assert!(
        persistence.contains("rdb_bgsave_in_progress:1"),
        "w2's BGSAVE had already finished; raise KEYS or SAVE_DELAY_US"
    );

    for (worker, wanted) in [
        ("w2", &["compacting"][..]),
        // A timed-out probe is an error and an RTT sample of the timeout.
        ("w3", &["rtt_p99_high", "errors"][..]),
    ] {
        let s = entry(&body, worker).expect("worker in scores");
        let adjustments = s["adjustments"].as_array().expect("adjustments");
        let named: Vec<&Value> = adjustments
            .iter()
            .filter(|a| wanted.iter().any(|w| a["code"] == *w))
            .collect();
        assert!(!named.is_empty(), "{worker} lacks {wanted:?}: {body}");
        for a in &named {
            assert_plain_sentence(worker, a, &body);
            assert!(
                a["impact"].as_f64().is_some_and(|i| i < 0.0),
                "{worker}'s `{}` costs nothing: {body}",
                a["code"]
            );
        }
        let score = |w: &str| entry(&body, w).and_then(|s| s["final_score"].as_f64());
        assert!(
            score(worker) < score("w1"),
            "{worker} does not score below w1: {body}"
        );
    }
    assert!(
        body.get("pick").is_none(),
        "policy none picks nothing: {body}"
    );

    // Stop the agent, then the server.
    let _ = stop_agent.send(());
    tokio::time::timeout(Duration::from_secs(5), agent)
        .await
        .expect("agent stops within 5 s")
        .expect("agent task")
        .expect("agent ran");
    let _ = stop_server.send(());
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("server stops within 5 s")
        .expect("server task")
        .expect("server ran");
    drop(workers);
    eprintln!("last answer: {body}");
    eprintln!(
        "degradation noticed {:.1} s after BGSAVE/CLIENT PAUSE; test took {:.1} s",
        noticed_after.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}
