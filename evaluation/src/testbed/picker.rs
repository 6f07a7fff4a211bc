//! How each arm picks: the service over HTTP (`POST /v1/score`, bounded by
//! the scorer timeout; a failed or late call is counted and the router
//! falls back to its own P2C least-request, see
//! [`RouterState::fallback_pick`]) or a baseline in-process. Outcomes go
//! back to the service off the request's path: buffered and sent as one
//! batch every `feedback_flush_ms` or [`FEEDBACK_BATCH_MAX`] outcomes,
//! whichever comes first, as the API docs tell a router to (0 sends one
//! call per outcome); a baseline learns its outcome in-process. Each
//! outcome carries the cache-aside GET's hit or miss when known
//! (`cache_hit`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::request::{Ask, Choice, Done, Route, RouterState};
use crate::router::{Op, Outcome, PickRequest, Router};

/// Default scorer timeout, ms: a router gives the scorer this long before
/// it picks by itself (`--scorer-timeout-ms`).
pub const SCORER_TIMEOUT_MS: u64 = 50;

/// Most outcomes in one feedback batch (the API docs' "every 64 outcomes").
pub const FEEDBACK_BATCH_MAX: usize = 64;

/// A baseline and its random source, shared by the load generator's picks
/// and the operator's drain.
pub type SharedBaseline = Arc<Mutex<(Box<dyn Router + Send>, ChaCha8Rng)>>;

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
        /// How long the router waits for the score (connect, answer, body).
        scorer_timeout: Duration,
    },
    /// A baseline in-process.
    Baseline {
        /// The baseline and its random source.
        router: SharedBaseline,
        /// Diagnostic (`--baselines-call-service`): the service's client,
        /// base URL and scorer timeout. Each request also asks the service
        /// for a score and sends it the outcome, as a service arm does, and
        /// routes by the baseline's pick: what the scorer call costs the
        /// Redis operations on a shared host, without the scorer's routing.
        score_call: Option<(reqwest::Client, String, Duration)>,
    },
    /// The embedded balancer, fed by the service's view stream.
    Embedded(Box<super::embedded::EmbeddedPicker>),
}

/// Where a service arm's outcomes go.
#[derive(Clone, Debug)]
pub enum Feedback {
    /// One `POST /v1/feedback` per outcome, sent off the request's path.
    PerOutcome,
    /// Buffered by [`flush_feedback`].
    Batched(mpsc::UnboundedSender<Value>),
}

/// Send the buffered outcomes as `{"outcomes": [...]}` every `every`, or as
/// soon as [`FEEDBACK_BATCH_MAX`] are waiting; flushes the rest and returns
/// once every sender is gone.
pub async fn flush_feedback(
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

/// `POST /v1/score` for all `n` workers within `limit`; the pick and the
/// decision id, or `None` when the call failed, timed out or named no
/// worker in `0..n`.
async fn score(
    http: &reqwest::Client,
    base: &str,
    policy: Option<&str>,
    n: usize,
    ask: &Ask<'_>,
    limit: Duration,
) -> Option<(usize, Option<String>)> {
    let op = ask.work.op;
    let mut body = json!({
        "key": ask.work.key,
        "candidates": (0..n).map(crate::arms::service_ids::worker_id).collect::<Vec<_>>(),
        "context": {"request_type": if op == Op::Put { "PUT" } else { "GET" }, "timeout_ms": ask.timeout_ms as u64},
    });
    if let Some(policy) = policy {
        body["policy"] = json!(policy);
    }
    let call = async {
        let resp = http
            .post(format!("{base}/v1/score"))
            .json(&body)
            .send()
            .await
            .ok()?;
        resp.json::<Value>().await.ok()
    };
    let v = tokio::time::timeout(limit, call).await.ok()??;
    let w: usize = v["pick"].as_str()?.strip_prefix('w')?.parse().ok()?;
    (w < n).then(|| (w, v["decision_id"].as_str().map(str::to_owned)))
}

/// The `POST /v1/feedback` outcome of `done` under decision `id`, with
/// `cache_hit` when the router knows it.
fn feedback_body(id: &str, done: &Done) -> Value {
    let mut body = json!({"decision_id": id, "worker_id": crate::arms::service_ids::worker_id(done.worker), "latency_ms": done.op_ms, "success": done.success});
    if let Some(hit) = done.cache_hit {
        body["cache_hit"] = json!(hit);
    }
    body
}

impl Picker {
    /// The baseline, for the operator's drain (`None` for a service arm).
    pub fn baseline(&self) -> Option<SharedBaseline> {
        match self {
            Self::Baseline { router, .. } => Some(router.clone()),
            Self::Service { .. } | Self::Embedded(_) => None,
        }
    }
}

impl Route for Picker {
    async fn pick(&self, ask: &Ask<'_>, router: &RouterState) -> Choice {
        let n = router.workers();
        match self {
            Self::Service {
                http,
                base,
                policy,
                scorer_timeout,
            } => match score(http, base, policy.as_deref(), n, ask, *scorer_timeout).await {
                Some((worker, decision)) => Choice {
                    worker,
                    decision,
                    fallback: false,
                },
                None => {
                    router.scorer_failed();
                    Choice {
                        worker: router.fallback_pick(),
                        decision: None,
                        fallback: true,
                    }
                }
            },
            Self::Embedded(e) => {
                let choice = e.pick(ask);
                if choice.fallback {
                    router.scorer_failed();
                }
                choice
            }
            Self::Baseline {
                router: baseline,
                score_call,
            } => {
                let decision = match score_call {
                    Some((http, base, limit)) => {
                        match score(http, base, None, n, ask, *limit).await {
                            Some((_, decision)) => decision,
                            None => {
                                router.scorer_failed();
                                None
                            }
                        }
                    }
                    None => None,
                };
                let mut g = baseline
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let (b, rng) = &mut *g;
                let p = b.pick(
                    &PickRequest {
                        now_ms: ask.now_ms,
                        key: &ask.work.key,
                        op: ask.work.op,
                        timeout_ms: ask.timeout_ms,
                        router: 0,
                    },
                    rng,
                );
                Choice {
                    worker: p.worker,
                    decision,
                    fallback: false,
                }
            }
        }
    }

    async fn report(&self, feedback: &Feedback, done: Done) {
        if let (Some((http, base)), Some(id)) = (self.service(), &done.decision) {
            let body = feedback_body(id, &done);
            match feedback {
                Feedback::Batched(tx) => {
                    let _ = tx.send(body);
                }
                Feedback::PerOutcome => {
                    let (http, url) = (http.clone(), format!("{base}/v1/feedback"));
                    tokio::spawn(async move {
                        let _ = http.post(url).json(&body).send().await;
                    });
                }
            }
        }
        if let Self::Embedded(e) = self {
            e.report(&done);
        }
        if let Self::Baseline { router, .. } = self {
            let mut g = router
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            g.0.outcome(&Outcome {
                worker: done.worker,
                decision_id: None,
                latency_ms: done.op_ms,
                success: done.success,
                now_ms: done.now_ms,
                router: 0,
                cache_hit: done.cache_hit,
            });
        }
    }

    fn service(&self) -> Option<(&reqwest::Client, &str)> {
        match self {
            Self::Service { http, base, .. } => Some((http, base)),
            Self::Baseline {
                score_call: Some((http, base, _)),
                ..
            } => Some((http, base)),
            Self::Baseline { .. } | Self::Embedded(_) => None,
        }
    }
}

#[cfg(test)]
mod tests;
