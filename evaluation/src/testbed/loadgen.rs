//! The load generator acting as the router: open-loop Poisson arrivals at
//! `rate` requests/s; for each request it picks a worker (the service over
//! HTTP, `POST /v1/score`, or a baseline in-process), sends a GET or SET to
//! that redis-server with a timeout, records the latency, and reports the
//! outcome (`POST /v1/feedback`, off the request's path, or the baseline's
//! `outcome`). Outcomes to the service are buffered and sent as one batch
//! every `feedback_flush_ms` or [`FEEDBACK_BATCH_MAX`] outcomes, whichever
//! comes first, as the API docs tell a router to (0 sends one call per
//! outcome). Latency is the Redis operation's (the pick's own cost is
//! measured separately). Bounded in time and in outstanding requests.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use tokio::sync::{RwLock, mpsc};
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
    Baseline {
        /// The baseline and its random source.
        router: Box<Mutex<(Box<dyn Router + Send>, ChaCha8Rng)>>,
        /// Diagnostic (`--baselines-call-service`): the service's client and
        /// base URL. Each request also asks the service for a score and
        /// sends it the outcome, as a service arm does, and routes by the
        /// baseline's pick: what the scorer call costs the Redis operations
        /// on a shared host, without the scorer's routing.
        score_call: Option<(reqwest::Client, String)>,
    },
}

impl Picker {
    /// The service client, for the arms that call the service.
    fn service(&self) -> Option<(&reqwest::Client, &str)> {
        match self {
            Self::Service { http, base, .. } => Some((http, base)),
            Self::Baseline {
                score_call: Some((http, base)),
                ..
            } => Some((http, base)),
            Self::Baseline { .. } => None,
        }
    }
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
    /// A service arm's outcomes are sent in batches at least this often,
    /// ms; 0 sends one `POST /v1/feedback` per outcome.
    pub feedback_flush_ms: u64,
}

/// Most outcomes in one feedback batch (the API docs' "every 64 outcomes").
pub const FEEDBACK_BATCH_MAX: usize = 64;

/// Where a service arm's outcomes go.
#[derive(Clone)]
enum Feedback {
    /// One `POST /v1/feedback` per outcome.
    PerOutcome,
    /// Buffered by [`flush_feedback`].
    Batched(mpsc::UnboundedSender<Value>),
}

/// Send the buffered outcomes as `{"outcomes": [...]}` every `every`, or as
/// soon as [`FEEDBACK_BATCH_MAX`] are waiting; flushes the rest and returns
/// once every sender is gone.
async fn flush_feedback(
    http: reqwest::Client,
    base: String,
    mut rx: mpsc::UnboundedReceiver<Value>,
    every: Duration,
) {
    let url = format!("{base}/v1/feedback");
    let mut buf = Vec::with_capacity(FEEDBACK_BATCH_MAX);
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let done = tokio::select! {
            item = rx.recv() => match item {
                Some(v) => {
                    buf.push(v);
                    if buf.len() < FEEDBACK_BATCH_MAX {
                        continue;
                    }
                    false
                }
                None => true,
            },
            _ = tick.tick() => false,
        };
        if !buf.is_empty() {
            let body = json!({ "outcomes": std::mem::take(&mut buf) });
            let _ = http.post(&url).json(&body).send().await;
        }
        if done {
            return;
        }
    }
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

/// `POST /v1/score` for all `n` workers; the pick and the decision id.
async fn score(
    http: &reqwest::Client,
    base: &str,
    policy: Option<&str>,
    n: usize,
    key: &str,
    op: Op,
    timeout_ms: f64,
) -> Option<(usize, Option<String>)> {
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
            score(http, base, policy.as_deref(), n, key, op, timeout_ms).await
        }
        Picker::Baseline { router, score_call } => {
            let decision = match score_call {
                Some((http, base)) => score(http, base, None, n, key, op, timeout_ms).await?.1,
                None => None,
            };
            let mut g = router
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
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
            Some((p.worker, decision))
        }
    }
}

async fn report(
    picker: &Picker,
    feedback: &Feedback,
    worker: usize,
    decision: Option<String>,
    latency_ms: f64,
    success: bool,
    now_ms: f64,
) {
    if let (Some((http, base)), Some(id)) = (picker.service(), decision) {
        let body = json!({"decision_id": id, "worker_id": crate::policies::worker_id(worker), "latency_ms": latency_ms, "success": success});
        match feedback {
            Feedback::Batched(tx) => {
                let _ = tx.send(body);
            }
            Feedback::PerOutcome => {
                let _ = http
                    .post(format!("{base}/v1/feedback"))
                    .json(&body)
                    .send()
                    .await;
            }
        }
    }
    if let Picker::Baseline { router, .. } = picker {
        let mut g = router
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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
    let (feedback, flusher) = match picker.service() {
        Some((http, base)) if load.feedback_flush_ms > 0 => {
            let (tx, rx) = mpsc::unbounded_channel();
            let every = Duration::from_millis(load.feedback_flush_ms);
            let flusher = tokio::spawn(flush_feedback(http.clone(), base.to_owned(), rx, every));
            (Feedback::Batched(tx), Some(flusher))
        }
        _ => (Feedback::PerOutcome, None),
    };
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
        let (picker, conns, feedback) = (picker.clone(), conns.clone(), feedback.clone());
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
            report(
                &picker, &feedback, worker, decision, latency_ms, success, now,
            )
            .await;
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
    drop(feedback);
    if let Some(flusher) = flusher {
        let _ = flusher.await;
    }
    (samples, dropped)
}
