//! What a run records.

/// Everything a run records; [`crate::run_summary`] summarises it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunRecord {
    /// Client-observed latency of every finished request (success or final
    /// failure), first attempt to answer, ms.
    pub latencies_ms: Vec<f64>,
    /// When each of [`Self::latencies_ms`] finished, ms from the start
    /// (empty where not recorded).
    pub finished_at_ms: Vec<f64>,
    /// The run's length, ms (0 where not recorded).
    pub duration_ms: f64,
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
    /// With caches: hits, misses and origin traffic.
    pub cache: Option<CacheRecord>,
}

/// What the workers' caches saw in a run (GETs only: a PUT writes through).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CacheRecord {
    /// GETs that found their key, per worker.
    pub hits: Vec<u64>,
    /// GETs that fetched their key from the origin, per worker.
    pub misses: Vec<u64>,
    /// Bytes fetched from the origin.
    pub origin_bytes: u64,
    /// Per window (`RunRecord::window_ms`) per worker: GETs that hit, and
    /// all GETs.
    pub window_hits: Vec<Vec<u32>>,
    /// See [`Self::window_hits`].
    pub window_gets: Vec<Vec<u32>>,
}

impl CacheRecord {
    /// Nothing yet, over `n` workers.
    pub fn new(n: usize) -> Self {
        Self {
            hits: vec![0; n],
            misses: vec![0; n],
            origin_bytes: 0,
            window_hits: Vec::new(),
            window_gets: Vec::new(),
        }
    }

    /// A GET at `worker` in window `window` that hit or not.
    pub fn record_window(&mut self, window: usize, worker: usize, hit: bool) {
        let n = self.hits.len();
        if window >= self.window_gets.len() {
            self.window_gets.resize(window + 1, vec![0; n]);
            self.window_hits.resize(window + 1, vec![0; n]);
        }
        if let (Some(g), Some(h)) = (
            self.window_gets[window].get_mut(worker),
            self.window_hits[window].get_mut(worker),
        ) {
            *g += 1;
            *h += u32::from(hit);
        }
    }
}
