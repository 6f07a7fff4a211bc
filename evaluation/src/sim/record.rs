//! What a run records.

/// Everything a run records; [`crate::run_summary`] summarises it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunRecord {
    /// Client-observed latency of every finished request (success or final
    /// failure), first attempt to answer, ms.
    pub latencies_ms: Vec<f64>,
    /// Requests that failed after all retries.
    pub failed: u64,
    /// Attempts sent.
    pub attempts: u64,
    /// Attempts that hit the client timeout.
    pub timeouts: u64,
    /// Attempts refused by a down worker.
    pub refused: u64,
    /// Retries sent.
    pub retries: u64,
    /// Picks per window per worker (`window_ms` windows).
    pub window_picks: Vec<Vec<u32>>,
    /// Window length, ms.
    pub window_ms: f64,
    /// Picks for which the policy fell back to a uniform choice.
    pub fallbacks: u64,
    /// Per attempt of a service arm: from sending the score call to having
    /// the answer, ms (empty for an arm that decides in the router).
    pub decision_ms: Vec<f64>,
    /// Score calls a service arm's router stopped waiting for
    /// (`Scenario::scorer_timeout_ms`) and picked by itself instead.
    pub scorer_errors: u64,
    /// With several routers: the mean number of routers that picked the
    /// same worker within one view interval ([`super::herding`]).
    pub herding: Option<f64>,
}
