//! The load generator acting as the router: open-loop Poisson arrivals at
//! `rate` requests/s; each request is served by [`request::serve`] (pick,
//! GET or SET under the per-attempt timeout, outcome, one retry on a fresh
//! pick after a refusal or a timeout), from its scheduled arrival instant to
//! its final reply. A service arm's outcomes are batched by
//! [`picker::flush_feedback`]. Bounded in time and in outstanding requests.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::picker::{self, Feedback};
use super::request::{self, Backend, Ctx, Route, RouterState, Sample, Wall, Work};
use crate::router::Op;
use crate::sim::dist::{Zipf, exponential, lognormal_unit_mean};

/// Load parameters.
#[derive(Debug, Clone)]
pub struct Load {
    /// Requests per second.
    pub rate: f64,
    /// How long to send, s.
    pub duration: Duration,
    /// Per-attempt timeout.
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
    /// Log-normal shape of the requests' service-time factors (unit mean;
    /// used by a backend with service times).
    pub cost_sigma: f64,
}

/// What a load run saw.
#[derive(Debug, Default)]
pub struct Run {
    /// Every finished request.
    pub samples: Vec<Sample>,
    /// Arrivals not sent: too many outstanding (or a request task that
    /// panicked), so none is lost from the counts.
    pub dropped: u64,
    /// Scorer calls that failed or timed out.
    pub scorer_errors: u64,
    /// Picks made by the router's own fallback.
    pub fallbacks: u64,
}

/// Seed offset of the service-time stream (independent of the arrivals,
/// ops and keys, identical for every arm).
const COST_STREAM: u64 = 0x5e41ce;
/// Seed offset of the router's own fallback choices.
const FALLBACK_STREAM: u64 = 0xfa11;

/// The key of Zipf rank `rank` (1-based).
pub fn key(rank: usize) -> String {
    format!("user:{rank}:profile")
}

/// Run the load against `n` workers, timed from now.
pub async fn run<R: Route, B: Backend>(route: R, backend: B, n: usize, load: &Load) -> Run {
    run_from(route, backend, n, load, Instant::now()).await
}

/// Run the load against `n` workers, its arrivals and every time it
/// records counted from `start` (several routers share one start).
pub async fn run_from<R: Route, B: Backend>(
    route: R,
    backend: B,
    n: usize,
    load: &Load,
    start: Instant,
) -> Run {
    let mut rng = ChaCha8Rng::seed_from_u64(load.seed);
    let mut cost_rng = ChaCha8Rng::seed_from_u64(load.seed ^ COST_STREAM);
    let zipf = Zipf::new(load.keys, 0.99);
    let (feedback, flusher) = match route.service() {
        Some((http, base)) if load.feedback_flush_ms > 0 => {
            let (tx, rx) = mpsc::unbounded_channel();
            let every = Duration::from_millis(load.feedback_flush_ms);
            let flusher = tokio::spawn(picker::flush_feedback(
                http.clone(),
                base.to_owned(),
                rx,
                every,
            ));
            (Feedback::Batched(tx), Some(flusher))
        }
        _ => (Feedback::PerOutcome, None),
    };
    let ctx = Arc::new(Ctx {
        route,
        backend,
        state: RouterState::new(n, load.seed ^ FALLBACK_STREAM),
        feedback,
        n,
        timeout: load.timeout,
    });
    let clock = Wall(start);
    let mut tasks = JoinSet::new();
    let mut out = Run::default();
    let mut next = 0.0f64;
    while next < load.duration.as_secs_f64() * 1000.0 {
        let wait = Duration::from_secs_f64(next / 1000.0).saturating_sub(clock.0.elapsed());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        while let Some(r) = tasks.try_join_next() {
            match r {
                Ok(s) => out.samples.push(s),
                Err(_) => out.dropped += 1,
            }
        }
        let op = if rng.random::<f64>() < load.put_fraction {
            Op::Put
        } else {
            Op::Get
        };
        let work = Work {
            op,
            key: key(zipf.sample(&mut rng)),
            cost: lognormal_unit_mean(&mut cost_rng, load.cost_sigma),
        };
        let arrival_ms = next;
        next += exponential(&mut rng, 1000.0 / load.rate);
        if tasks.len() >= load.max_outstanding {
            out.dropped += 1;
            continue;
        }
        let ctx = ctx.clone();
        tasks.spawn(async move { request::serve(&ctx, &clock, arrival_ms, &work).await });
    }
    while let Some(r) = tasks.join_next().await {
        match r {
            Ok(s) => out.samples.push(s),
            Err(_) => out.dropped += 1,
        }
    }
    out.scorer_errors = ctx.state.scorer_errors();
    out.fallbacks = ctx.state.fallbacks();
    // The last sender of the feedback channel goes with the context.
    drop(ctx);
    if let Some(flusher) = flusher {
        let _ = flusher.await;
    }
    out.samples.sort_by(|a, b| a.at_ms.total_cmp(&b.at_ms));
    out
}
