//! `service-embedded` on the testbed: the load generator links the
//! balancer (`scorer-balancer`), follows the real service's view stream
//! (`GET /v1/view`, over HTTP with the router token) on its own task, and
//! picks in-process. Outcomes go to the balancer at once (with the
//! cache-aside GET's hit or miss, `outcome_with_cache_hit`), and its
//! outstanding picks to the service every 5 ms (`POST /v1/router/load`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand_chacha::ChaCha8Rng;
use scorer_balancer::follow::{FollowConfig, follow_view};
use scorer_balancer::report::report_load;
use scorer_balancer::{Balancer, PickSource};
use scorer_core::clock::{Clock, SystemClock};
use scorer_core::scoring::{RequestContext, RequestType};
use scorer_engine::api::ScoreRequest;

use super::request::{Ask, Choice, Done};
use crate::arms::service_ids::{parse_worker, worker_id};
use crate::router::Op;

/// A balancer in the load generator, fed by the service's stream.
pub struct EmbeddedPicker {
    balancer: Arc<Balancer>,
    candidates: Vec<String>,
    rng: Mutex<ChaCha8Rng>,
    clock: Arc<dyn Clock>,
    tasks: [tokio::task::JoinHandle<()>; 2],
}

impl Drop for EmbeddedPicker {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl EmbeddedPicker {
    /// Follows the service at `base` with `http` (which carries the
    /// router's credentials) into `balancer`, on the current runtime.
    pub fn start(
        balancer: Balancer,
        n: usize,
        http: reqwest::Client,
        base: &str,
        rng: ChaCha8Rng,
    ) -> Self {
        let balancer = Arc::new(balancer);
        let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
        let follower = tokio::spawn(follow_view(
            balancer.clone(),
            http.clone(),
            FollowConfig::new(base),
            clock.clone(),
            |_| {},
            std::future::pending(),
        ));
        let reporter = tokio::spawn(report_load(
            balancer.clone(),
            http,
            FollowConfig::new(base),
            std::future::pending(),
        ));
        Self {
            balancer,
            candidates: (0..n).map(worker_id).collect(),
            rng: Mutex::new(rng),
            clock,
            tasks: [follower, reporter],
        }
    }

    /// Waits (bounded) until the balancer's view holds every candidate.
    pub async fn wait_for_view(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let n = self.candidates.len();
        while Instant::now() < deadline {
            if self.balancer.engine().registry().len() >= n {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    /// One pick, in-process.
    pub fn pick(&self, ask: &Ask<'_>) -> Choice {
        let mut req = ScoreRequest::new(ask.work.key.clone(), self.candidates.clone());
        req.context = Some(RequestContext {
            request_type: Some(match ask.work.op {
                Op::Get => RequestType::Get,
                Op::Put => RequestType::Put,
            }),
            timeout_ms: Some(ask.timeout_ms as u64),
            ..RequestContext::default()
        });
        let now_ms = self.clock.monotonic_ms();
        let mut rng = self
            .rng
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match self.balancer.pick(&req, now_ms, &mut *rng) {
            Ok(p) => Choice {
                worker: parse_worker(&p.worker).unwrap_or(0),
                decision: Some(p.decision_id),
                fallback: p.source == PickSource::Uniform,
            },
            Err(_) => Choice {
                worker: 0,
                decision: None,
                fallback: true,
            },
        }
    }

    /// The outcome of a pick, to the balancer, with its cache hit or miss
    /// when known.
    pub fn report(&self, done: &Done) {
        if let Some(id) = &done.decision {
            let worker = worker_id(done.worker);
            let now_ms = self.clock.monotonic_ms();
            let _ = self.balancer.outcome_with_cache_hit(
                id,
                &worker,
                done.op_ms,
                done.success,
                done.cache_hit,
                now_ms,
            );
        }
    }
}
