//! The `loaded` testbed scenario: routing matters because every request
//! holds its worker for a real service time. Each GET/SET is pipelined
//! behind a `DEBUG SLEEP` of log-normal length (unit mean times the worker's
//! mean, shape [`SIGMA`]): the server's only thread is busy without burning
//! CPU, so the shared host's cores stay free for the router and the
//! service. Worker 0 is [`SLOW_FACTOR`]× slower than the rest for the whole
//! run, and the offered load is [`LOAD`] of the workers' total capacity
//! (`--rate` and the fault flags are not used). No transient fault.

/// Scenario name.
pub const NAME: &str = "loaded";
/// Mean service time of a normal worker, ms.
pub const MEAN_MS: f64 = 10.0;
/// Worker 0's service times are this many times longer.
pub const SLOW_FACTOR: f64 = 2.0;
/// Log-normal shape of the service times.
pub const SIGMA: f64 = 0.5;
/// Offered load, fraction of the workers' total capacity.
pub const LOAD: f64 = 0.7;

/// Each worker's mean service time, ms (worker 0 slow).
pub fn service_ms(workers: usize) -> Vec<f64> {
    (0..workers)
        .map(|i| {
            if i == 0 {
                MEAN_MS * SLOW_FACTOR
            } else {
                MEAN_MS
            }
        })
        .collect()
}

/// The workers' total capacity, requests/s.
pub fn capacity_per_s(workers: usize) -> f64 {
    service_ms(workers).iter().map(|ms| 1000.0 / ms).sum()
}

/// The offered rate, requests/s: [`LOAD`] × the total capacity.
pub fn rate(workers: usize) -> f64 {
    LOAD * capacity_per_s(workers)
}

/// One sentence for the report.
pub fn describe(workers: usize) -> String {
    format!(
        "every request holds its worker for a pipelined DEBUG SLEEP before the GET/SET: log-normal, \
         mean {MEAN_MS} ms (worker 0: {} ms, {SLOW_FACTOR}× slower), σ {SIGMA}; offered {:.0}% of the \
         workers' total capacity of {:.0} req/s, no transient fault",
        MEAN_MS * SLOW_FACTOR,
        LOAD * 100.0,
        capacity_per_s(workers),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offers_seventy_percent_of_a_pool_with_one_slow_worker() {
        // 5 × 100/s + 50/s = 550/s; 70% = 385/s.
        assert_eq!(service_ms(6), vec![20.0, 10.0, 10.0, 10.0, 10.0, 10.0]);
        assert!((capacity_per_s(6) - 550.0).abs() < 1e-9);
        assert!((rate(6) - 385.0).abs() < 1e-9);
    }
}
