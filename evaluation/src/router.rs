//! The interface every compared policy implements, in the simulator and in
//! the testbed: pick a worker for a request, learn from outcomes, and (for
//! the service arms) take telemetry.

use rand_chacha::ChaCha8Rng;
use scorer_core::telemetry::Snapshot;

/// Kind of a KV request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Point read.
    Get,
    /// Write.
    Put,
}

/// What the router knows when it picks.
#[derive(Debug, Clone, Copy)]
pub struct PickRequest<'a> {
    /// Now, ms (simulated or since the testbed start).
    pub now_ms: f64,
    /// The request's key.
    pub key: &'a str,
    /// Operation.
    pub op: Op,
    /// The client's timeout for this attempt, ms.
    pub timeout_ms: f64,
    /// Index of the router that issues the request (0 with a single
    /// router; see [`crate::per_router`]).
    pub router: usize,
}

#[cfg(test)]
impl PickRequest<'static> {
    /// A test's GET of key `k` from router 0 at `now_ms`, 100 ms timeout.
    pub(crate) fn test_get(now_ms: f64) -> Self {
        Self {
            now_ms,
            key: "k",
            op: Op::Get,
            timeout_ms: 100.0,
            router: 0,
        }
    }
}

/// A router's choice.
#[derive(Debug, Clone, PartialEq)]
pub struct Pick {
    /// Index of the picked worker.
    pub worker: usize,
    /// The service's decision id, to send back with the outcome.
    pub decision_id: Option<String>,
}

/// The outcome of one attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome<'a> {
    /// The worker the attempt went to.
    pub worker: usize,
    /// The pick's decision id, if the router made one.
    pub decision_id: Option<&'a str>,
    /// Observed latency of the attempt, ms (the timeout when it timed out).
    pub latency_ms: f64,
    /// Whether it succeeded.
    pub success: bool,
    /// Now, ms.
    pub now_ms: f64,
    /// Index of the router that made the pick (as in [`PickRequest::router`]).
    pub router: usize,
}

/// A load-balancing policy.
pub trait Router {
    /// Pick a worker among `0..n` (n fixed at construction).
    fn pick(&mut self, req: &PickRequest<'_>, rng: &mut ChaCha8Rng) -> Pick;
    /// Learn from the outcome of a pick (release in-flight, update estimates).
    fn outcome(&mut self, o: &Outcome<'_>);
    /// The operator drains worker `worker` (`drained`) or returns it at
    /// `now_ms`. A service arm sets (clears) a drain override on its
    /// service; a baseline removes the endpoint from (restores it to) the
    /// set it balances over, as a proxy does on a service-discovery update
    /// (Envoy EDS, HAProxy `set server … state drain`). No arm may ignore it.
    fn drain(&mut self, worker: usize, drained: bool, now_ms: f64);
    /// Take a telemetry batch taken at `now_ms` (only the service arms use it).
    fn telemetry(&mut self, _batch: &[Snapshot], _now_ms: f64) {}
    /// Prefix of the decision ids this router logs (service arms), so logs
    /// of different runs can be trained on together.
    fn set_decision_id_prefix(&mut self, _prefix: &str) {}
    /// Picks that fell back to a uniform choice because the router could not
    /// decide (the service answered no eligible worker).
    fn fallbacks(&self) -> u64 {
        0
    }
    /// Whether a pick is a call to a remote scorer (the service arms): the
    /// simulator then charges the call's network round trip and queueing,
    /// batches the outcomes and delays the telemetry. A baseline decides
    /// inside the router: free, with its own outcomes at once.
    fn remote(&self) -> bool {
        false
    }
    /// Whether the policy reads the workers' true state (the `oracle`):
    /// the simulator then calls [`Router::truth`] before every pick.
    fn wants_truth(&self) -> bool {
        false
    }
    /// The expected delay of the request about to be picked at each worker,
    /// from the simulator's true state: wait behind its work plus the
    /// request's own expected service time, ms (infinite when the worker
    /// is down or a black hole).
    fn truth(&mut self, _expected_delay_ms: &[f64]) {}
    /// For an arm that decides inside the router with the embedded
    /// balancer (`service-embedded`): what a pick costs. The simulator then
    /// holds each request for a drawn pick time before it leaves, and
    /// delivers telemetry through [`Router::view`] as the service's view
    /// stream would. `None` for every other arm.
    fn embedded(&self) -> Option<&'static crate::embedded_calibration::EmbeddedPickCalibration> {
        None
    }
    /// An embedded arm's view of a telemetry batch, reaching the router at
    /// `now_ms`, `age_ms` after the service accepted it.
    fn view(&mut self, _batch: &[Snapshot], _now_ms: f64, _age_ms: f64) {}
    /// An embedded arm at `now_ms`: `router` reports its outstanding picks
    /// to the service, arriving `one_way_ms` later.
    fn load_report(&mut self, _router: usize, _now_ms: f64, _one_way_ms: f64) {}
    /// An embedded arm at `now_ms`: the service's view of the other
    /// routers' load, which left it `one_way_ms` ago, reaches `router`.
    fn load_view(&mut self, _router: usize, _now_ms: f64, _one_way_ms: f64) {}
    /// For a service arm with a model: how much the model separated the
    /// candidates of a decision.
    fn model_spread(&self) -> Option<crate::policies::ModelSpread> {
        None
    }
    /// For a service arm: its self-check's rank correlation through the
    /// run, `(time s, rho)`.
    fn self_check_samples(&self) -> Option<Vec<(f64, f64)>> {
        None
    }
}
