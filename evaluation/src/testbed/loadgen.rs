//! The load generator acting as the router: open-loop Poisson arrivals at
//! `rate` requests/s; for each request it picks a worker (the service over
//! HTTP, `POST /v1/score`, or a baseline in-process), sends a GET or SET to
//! that redis-server with a timeout, records the latency, and reports the
//! outcome (`POST /v1/feedback`, off the request's path, or the baseline's
//! `outcome`). Latency is the Redis operation's (the pick's own cost is
//! measured separately). Bounded in time and in outstanding requests.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use tokio::sync::RwLock;
use tokio::task::JoinSet;

use crate::router::{Op, Outcome, PickRequest, Router};
use crate::sim::dist::{Zipf, exponential};

/// How a pick is made.
pub enum Picker {
    /// The service over HTTP with this selection policy.
    Service {
        /// HTTP client.
        http: reqwest::Client,
        /// Service base URL.
        base: String,
        /// The selection policy named in each score request (`max`,
        /// `softmax`, …); `None` names none, so the service's configured
        /// default selects.
        policy: Option<String>,
    },
    /// A baseline in-process.
    Baseline(Box<Mutex<(Box<dyn Router + Send>, ChaCha8Rng)>>),
}

/// One finished request.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// When it was sent, ms since the load started.
    pub at_ms: f64,
    /// The picked worker.
    pub worker: usize,
    /// Redis operation latency, ms (the timeout when it timed out).
    pub latency_ms: f64,
    /// Answered in time without error.
    pub success: bool,
    /// Timed out.
    pub timed_out: bool,
    /// The pick itself, ms.
    pub pick_ms: f64,
}

/// Load parameters.
#[derive(Debug, Clone)]
pub struct Load {
    /// Requests per second.
    pub rate: f64,
    /// How long to send, s.
    pub duration: Duration,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Fraction of SETs.
    pub put_fraction: f64,
    /// Distinct keys.
    pub keys: usize,
    /// Seed.
    pub seed: u64,
    /// Most requests outstanding at once; arrivals beyond it are dropped and counted.
    pub max_outstanding: usize,
}

/// Connections to the workers, re-established after errors.
pub struct Conns {
    ports: Vec<u16>,
    conns: Vec<RwLock<Option<redis::aio::MultiplexedConnection>>>,
}

impl Conns {
    /// For workers on `ports`.
    pub fn new(ports: Vec<u16>) -> Self {
        let conns = ports.iter().map(|_| RwLock::new(None)).collect();
        Self { ports, conns }
    }

    async fn get(&self, i: usize) -> Option<redis::aio::MultiplexedConnection> {
        if let Some(c) = self.conns[i].read().await.clone() {
            return Some(c);
        }
        let mut w = self.conns[i].write().await;
        if w.is_none() {
            let client =
                redis::Client::open(format!("redis://127.0.0.1:{}/", self.ports[i])).ok()?;
            // No response timeout in the client (redis-rs defaults to
            // 500 ms): the per-request `--timeout-ms` alone decides, so a
            // slow reply counts as a timeout, not as an error, and a timeout
            // above 500 ms takes effect (found by a fresh-eyes run).
            let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
            let c = tokio::time::timeout(
                Duration::from_millis(300),
                client.get_multiplexed_async_connection_with_config(&config),
            )
            .await
            .ok()?
            .ok()?;
            *w = Some(c);
        }
        w.clone()
    }

    async fn reset(&self, i: usize) {
        *self.conns[i].write().await = None;
    }
}

async fn pick(
    picker: &Picker,
    n: usize,
    key: &str,
    op: Op,
    timeout_ms: f64,
    now_ms: f64,
) -> Option<(usize, Option<String>)> {
    match picker {
        Picker::Service { http, base, policy } => {
            let mut body = json!({
                "key": key,
                "candidates": (0..n).map(crate::policies::worker_id).collect::<Vec<_>>(),
                "context": {"request_type": if op == Op::Put { "PUT" } else { "GET" }, "timeout_ms": timeout_ms as u64},
            });
            if let Some(policy) = policy {
                body["policy"] = json!(policy);
            }
            let resp = http
                .post(format!("{base}/v1/score"))
                .json(&body)
                .send()
                .await
                .ok()?;
            let v: Value = resp.json().await.ok()?;
            let w = v["pick"].as_str()?.strip_prefix('w')?.parse().ok()?;
            Some((w, v["decision_id"].as_str().map(str::to_owned)))
        }
        Picker::Baseline(m) => {
            let mut g = m.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let (router, rng) = &mut *g;
            let p = router.pick(
                &PickRequest {
                    now_ms,
                    key,
                    op,
                    timeout_ms,
                    router: 0,
                },
                rng,
            );
            Some((p.worker, None))
        }
    }
}

async fn report(
    picker: &Picker,
    worker: usize,
    decision: Option<String>,
    latency_ms: f64,
    success: bool,
    now_ms: f64,
) {
    match picker {
        Picker::Service { http, base, .. } => {
            if let Some(id) = decision {
                let body = json!({"decision_id": id, "worker_id": crate::policies::worker_id(worker), "latency_ms": latency_ms, "success": success});
                let _ = http
                    .post(format!("{base}/v1/feedback"))
                    .json(&body)
                    .send()
                    .await;
            }
        }
        Picker::Baseline(m) => {
            let mut g = m.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            g.0.outcome(&Outcome {
                worker,
                decision_id: None,
                latency_ms,
                success,
                now_ms,
                router: 0,
            });
        }
    }
}

/// Run the load; returns every finished request and how many arrivals were
/// dropped: too many outstanding, or no pick (the service's `/v1/score`
/// failed or timed out), so none is lost from the counts.
pub async fn run(
    picker: Arc<Picker>,
    conns: Arc<Conns>,
    n: usize,
    load: &Load,
) -> (Vec<Sample>, u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(load.seed);
    let zipf = Zipf::new(load.keys, 0.99);
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    let mut samples = Vec::new();
    let mut dropped = 0;
    let mut next = 0.0f64;
    let timeout = load.timeout;
    let timeout_ms = timeout.as_secs_f64() * 1000.0;
    while next < load.duration.as_secs_f64() * 1000.0 {
        let wait = Duration::from_secs_f64(next / 1000.0).saturating_sub(start.elapsed());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        while let Some(r) = tasks.try_join_next() {
            match r {
                Ok(Some(s)) => samples.push(s),
                // No pick (the service call failed): counted, not lost.
                _ => dropped += 1,
            }
        }
        let op = if rng.random::<f64>() < load.put_fraction {
            Op::Put
        } else {
            Op::Get
        };
        let key = format!("user:{}:profile", zipf.sample(&mut rng));
        next += exponential(&mut rng, 1000.0 / load.rate);
        if tasks.len() >= load.max_outstanding {
            dropped += 1;
            continue;
        }
        let (picker, conns) = (picker.clone(), conns.clone());
        tasks.spawn(async move {
            let at = start.elapsed().as_secs_f64() * 1000.0;
            let t0 = Instant::now();
            let (worker, decision) = pick(&picker, n, &key, op, timeout_ms, at).await?;
            let pick_ms = t0.elapsed().as_secs_f64() * 1000.0;
            let worker = worker.min(n - 1);
            let t1 = Instant::now();
            let result = tokio::time::timeout(timeout, async {
                let mut c = conns.get(worker).await.ok_or(())?;
                let r = match op {
                    Op::Get => redis::cmd("GET")
                        .arg(&key)
                        .query_async::<Option<String>>(&mut c)
                        .await
                        .map(|_| ()),
                    Op::Put => {
                        redis::cmd("SET")
                            .arg(&key)
                            .arg("v")
                            .query_async::<()>(&mut c)
                            .await
                    }
                };
                if r.is_err() {
                    conns.reset(worker).await;
                }
                r.map_err(|_| ())
            })
            .await;
            let (latency_ms, success, timed_out) = match result {
                Ok(Ok(())) => (t1.elapsed().as_secs_f64() * 1000.0, true, false),
                Ok(Err(())) => (t1.elapsed().as_secs_f64() * 1000.0, false, false),
                Err(_) => (timeout_ms, false, true),
            };
            let now = start.elapsed().as_secs_f64() * 1000.0;
            report(&picker, worker, decision, latency_ms, success, now).await;
            Some(Sample {
                at_ms: at,
                worker,
                latency_ms,
                success,
                timed_out,
                pick_ms,
            })
        });
    }
    while let Some(r) = tasks.join_next().await {
        match r {
            Ok(Some(s)) => samples.push(s),
            _ => dropped += 1,
        }
    }
    (samples, dropped)
}
