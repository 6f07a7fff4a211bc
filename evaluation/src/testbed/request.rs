//! One request as the router serves it, the same for every arm: pick a
//! worker ([`Route`]), send the GET/SET to it ([`Backend`]) under the
//! per-attempt timeout, report the outcome, and retry once on a fresh pick
//! when the attempt was refused or timed out ([`MAX_ATTEMPTS`]).
//!
//! A request's latency runs from its arrival at the router (the scheduled
//! Poisson instant, so a late start counts too) to the final reply, the
//! picks (scorer calls) and a retry included: what the user sees. Each
//! attempt's Redis operation alone (`op_ms`) is what the arm is told in its
//! outcome, as a router would tell it, with whether the worker's cache
//! held the key when the router can tell (a cache-aside GET, [`Reply`]).
//! Time comes from a [`Clock`], so a test can charge a pick an exact cost
//! without sleeping.

use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::picker::Feedback;
use crate::router::Op;

/// Attempts per request: the first and one retry on a fresh pick.
pub const MAX_ATTEMPTS: usize = 2;

/// Time since the load started, ms.
pub trait Clock: Send + Sync {
    /// Now, ms since the load started.
    fn now_ms(&self) -> f64;
}

/// The wall clock, from the load's start.
#[derive(Debug, Clone, Copy)]
pub struct Wall(pub Instant);

impl Clock for Wall {
    fn now_ms(&self) -> f64 {
        self.0.elapsed().as_secs_f64() * 1000.0
    }
}

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Answered without error.
    Ok,
    /// The worker could not be reached: the connection was refused, or
    /// dropped by the worker (a killed server). Retried.
    Refused,
    /// No answer within the per-attempt timeout. Retried.
    TimedOut,
    /// The worker answered with an error. Not retried.
    Error,
}

impl Ended {
    /// Whether the router retries after this (refused or timed out).
    pub fn retryable(self) -> bool {
        matches!(self, Self::Refused | Self::TimedOut)
    }
}

/// A worker's answer to one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    /// How the attempt ended.
    pub ended: Ended,
    /// For a GET served cache-aside (the `cache` scenario), whether the
    /// worker's cache held the key: `Some(false)` for a nil GET, a miss
    /// then filled from the origin. `None` for a PUT or without caches.
    pub cache_hit: Option<bool>,
}

impl From<Ended> for Reply {
    /// Ended so, the cache unknown.
    fn from(ended: Ended) -> Self {
        Self {
            ended,
            cache_hit: None,
        }
    }
}

/// What a request asks of a worker.
#[derive(Debug, Clone)]
pub struct Work {
    /// GET or SET.
    pub op: Op,
    /// The key.
    pub key: String,
    /// Unit-mean service-time factor (the `loaded` scenario's sleep is the
    /// worker's mean times this; ignored elsewhere).
    pub cost: f64,
}

/// The workers as the router reaches them.
pub trait Backend: Send + Sync + 'static {
    /// Send `work` to `worker` and wait for the answer (the caller applies
    /// the timeout).
    fn send(&self, worker: usize, work: &Work) -> impl Future<Output = Reply> + Send;
}

impl<B: Backend> Backend for std::sync::Arc<B> {
    fn send(&self, worker: usize, work: &Work) -> impl Future<Output = Reply> + Send {
        (**self).send(worker, work)
    }
}

/// What the router knows when it picks.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    /// The request.
    pub work: &'a Work,
    /// The per-attempt timeout, ms.
    pub timeout_ms: f64,
    /// Now, ms since the load started.
    pub now_ms: f64,
}

/// The router's choice for one attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// The worker.
    pub worker: usize,
    /// The service's decision id, sent back with the outcome.
    pub decision: Option<String>,
    /// Made by the router's own fallback (the scorer call failed).
    pub fallback: bool,
}

/// One attempt's outcome, as the arm is told it.
#[derive(Debug, Clone, PartialEq)]
pub struct Done {
    /// The worker.
    pub worker: usize,
    /// The pick's decision id.
    pub decision: Option<String>,
    /// The Redis operation's latency, ms (the timeout when it timed out).
    pub op_ms: f64,
    /// Answered without error.
    pub success: bool,
    /// Now, ms since the load started.
    pub now_ms: f64,
    /// Whether the worker served a GET from its cache, when the router can
    /// tell (cache-aside: a nil GET is a miss); `None` for a PUT, without
    /// caches, or for an attempt that failed.
    pub cache_hit: Option<bool>,
}

/// How an arm picks and learns.
pub trait Route: Send + Sync + 'static {
    /// Pick a worker for one attempt; on a failed scorer call, count it in
    /// `router` and take the router's own fallback.
    fn pick(&self, ask: &Ask<'_>, router: &RouterState) -> impl Future<Output = Choice> + Send;
    /// Tell the arm an attempt's outcome (the service through `feedback`).
    fn report(&self, feedback: &Feedback, done: Done) -> impl Future<Output = ()> + Send;
    /// The service's client and base URL, for the arms that call it.
    fn service(&self) -> Option<(&reqwest::Client, &str)> {
        None
    }
}

impl<R: Route> Route for std::sync::Arc<R> {
    fn pick(&self, ask: &Ask<'_>, router: &RouterState) -> impl Future<Output = Choice> + Send {
        (**self).pick(ask, router)
    }
    fn report(&self, feedback: &Feedback, done: Done) -> impl Future<Output = ()> + Send {
        (**self).report(feedback, done)
    }
    fn service(&self) -> Option<(&reqwest::Client, &str)> {
        (**self).service()
    }
}

/// What the router itself keeps: its outstanding requests per worker, the
/// random source of its fallback, and its counters.
#[derive(Debug)]
pub struct RouterState {
    outstanding: Vec<AtomicU32>,
    rng: Mutex<ChaCha8Rng>,
    scorer_errors: AtomicU64,
    fallbacks: AtomicU64,
}

impl RouterState {
    /// Over `n ≥ 1` workers, none outstanding.
    pub fn new(n: usize, seed: u64) -> Self {
        Self {
            outstanding: (0..n.max(1)).map(|_| AtomicU32::new(0)).collect(),
            rng: Mutex::new(ChaCha8Rng::seed_from_u64(seed)),
            scorer_errors: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
        }
    }

    /// A scorer call failed or timed out.
    pub fn scorer_failed(&self) {
        self.scorer_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// The router's own choice: P2C least-request over its outstanding
    /// counts (of two distinct random workers, the one with fewer requests
    /// in flight; ties: the first). Counted.
    pub fn fallback_pick(&self) -> usize {
        self.fallbacks.fetch_add(1, Ordering::Relaxed);
        let (a, b) = {
            let mut rng = self
                .rng
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            crate::arms::baselines::two_distinct(self.outstanding.len(), &mut rng)
        };
        if self.outstanding(b) < self.outstanding(a) {
            b
        } else {
            a
        }
    }

    /// Workers.
    pub fn workers(&self) -> usize {
        self.outstanding.len()
    }

    /// Requests in flight at `worker`.
    pub fn outstanding(&self, worker: usize) -> u32 {
        self.outstanding[worker].load(Ordering::Relaxed)
    }

    /// Scorer calls that failed or timed out.
    pub fn scorer_errors(&self) -> u64 {
        self.scorer_errors.load(Ordering::Relaxed)
    }

    /// Picks made by the router's own fallback.
    pub fn fallbacks(&self) -> u64 {
        self.fallbacks.load(Ordering::Relaxed)
    }

    fn sent(&self, worker: usize) {
        self.outstanding[worker].fetch_add(1, Ordering::Relaxed);
    }

    fn answered(&self, worker: usize) {
        let _ = self.outstanding[worker].fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
            Some(c.saturating_sub(1))
        });
    }
}

/// One arm's router: how it picks, the workers, its own state.
pub struct Ctx<R, B> {
    /// How the arm picks and learns.
    pub route: R,
    /// The workers.
    pub backend: B,
    /// The router's own state.
    pub state: RouterState,
    /// Where the service's outcomes go.
    pub feedback: Feedback,
    /// Workers.
    pub n: usize,
    /// Per-attempt timeout.
    pub timeout: Duration,
}

/// One attempt of a request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Attempt {
    /// The picked worker.
    pub worker: usize,
    /// When the pick began, ms since the load started.
    pub picked_ms: f64,
    /// The pick (the scorer call, or the baseline's in-process pick), µs.
    pub pick_us: f64,
    /// The Redis operation, ms (the timeout when it timed out).
    pub op_ms: f64,
    /// How it ended.
    pub ended: Ended,
    /// Picked by the router's fallback.
    pub fallback: bool,
}

/// One finished request.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Its scheduled arrival at the router, ms since the load started.
    pub at_ms: f64,
    /// From arrival to the final reply, picks and retry included, ms.
    pub latency_ms: f64,
    /// The final attempt answered without error.
    pub success: bool,
    /// Its attempts, in order (1 or 2).
    pub attempts: Vec<Attempt>,
}

impl Sample {
    /// The worker of the final attempt.
    pub fn worker(&self) -> usize {
        self.attempts.last().map_or(0, |a| a.worker)
    }
}

/// Serve one request that arrived at `arrival_ms`: pick, send, report,
/// and retry once on a fresh pick after a refusal or a timeout.
pub async fn serve<R: Route, B: Backend>(
    ctx: &Ctx<R, B>,
    clock: &dyn Clock,
    arrival_ms: f64,
    work: &Work,
) -> Sample {
    let timeout_ms = ctx.timeout.as_secs_f64() * 1000.0;
    let mut attempts = Vec::with_capacity(MAX_ATTEMPTS);
    loop {
        let t0 = clock.now_ms();
        let ask = Ask {
            work,
            timeout_ms,
            now_ms: t0,
        };
        let choice = ctx.route.pick(&ask, &ctx.state).await;
        let t1 = clock.now_ms();
        let worker = choice.worker.min(ctx.n - 1);
        ctx.state.sent(worker);
        let reply = tokio::time::timeout(ctx.timeout, ctx.backend.send(worker, work))
            .await
            .unwrap_or(Reply::from(Ended::TimedOut));
        let ended = reply.ended;
        let t2 = clock.now_ms();
        ctx.state.answered(worker);
        let op_ms = if ended == Ended::TimedOut {
            timeout_ms
        } else {
            t2 - t1
        };
        let done = Done {
            worker,
            decision: choice.decision,
            op_ms,
            success: ended == Ended::Ok,
            now_ms: t2,
            cache_hit: reply.cache_hit.filter(|_| ended == Ended::Ok),
        };
        ctx.route.report(&ctx.feedback, done).await;
        attempts.push(Attempt {
            worker,
            picked_ms: t0,
            pick_us: (t1 - t0) * 1000.0,
            op_ms,
            ended,
            fallback: choice.fallback,
        });
        if !(ended.retryable() && attempts.len() < MAX_ATTEMPTS) {
            return Sample {
                at_ms: arrival_ms,
                latency_ms: t2 - arrival_ms,
                success: ended == Ended::Ok,
                attempts,
            };
        }
    }
}

#[cfg(test)]
mod tests;
