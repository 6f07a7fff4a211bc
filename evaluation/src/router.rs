//! The interface every compared policy implements, in the simulator and in
//! the testbed: pick a worker for a request, learn from outcomes, follow
//! the operator's drains. What some arms take beyond it (telemetry, the
//! true state, the view stream) is their kind's: see [`crate::arms::Arm`].

use rand_chacha::ChaCha8Rng;

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
    /// router; see [`crate::arms::per_router`]).
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
    /// Whether the worker served a GET from its cache, when the router can
    /// tell (a cache-aside GET that found nothing is a miss); `None`
    /// without caches, for a PUT, or for an attempt that failed.
    pub cache_hit: Option<bool>,
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
}
