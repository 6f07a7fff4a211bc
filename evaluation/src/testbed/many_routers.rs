//! The `many-routers` testbed scenario: several independent routers (load
//! generators, each its own task with its own Redis connections, its own
//! random streams, its own HTTP client and router token, and, in the
//! embedded arm, its own balancer following the service's view stream and
//! reporting its outstanding picks) send to the same real workers at once.
//! They share only what real routers share: the workers and the service.
//! A baseline runs one instance per router, counting only that router's
//! requests, as a sidecar does.
//!
//! Every request holds its worker for a real service time (a pipelined
//! `DEBUG SLEEP`, as in [`super::loaded`]), on identical workers, at
//! [`LOAD`] of their total capacity, split evenly over the routers: each
//! router's arrivals are Poisson at the total rate over the number of
//! routers, so together they are Poisson at the total rate. No fault.

use std::time::Duration;

use super::loaded::{MEAN_MS, SIGMA};
use super::loadgen::{Load, Run};
use crate::arms::model::ModelArmInfo;
use crate::sim::herding::Herding;

/// Scenario name.
pub const NAME: &str = "many-routers";
/// Routers by default (`--routers`).
pub const DEFAULT_ROUTERS: usize = 4;
/// Most routers (each holds a connection per worker and an HTTP client).
pub const MAX_ROUTERS: usize = 32;
/// Offered load, fraction of the workers' total capacity.
pub const LOAD: f64 = 0.7;
/// The arms the scenario runs by default: the embedded balancer and the
/// baselines users run one instance of per router.
pub const ARMS: [&str; 3] = ["service-embedded", "least-request-all", "p2c-least-request"];

/// Each worker's mean service time, ms: all identical.
pub fn service_ms(workers: usize) -> Vec<f64> {
    vec![MEAN_MS; workers]
}

/// The total offered rate, requests/s: [`LOAD`] × the workers' capacity.
pub fn rate(workers: usize) -> f64 {
    LOAD * service_ms(workers)
        .iter()
        .map(|ms| 1000.0 / ms)
        .sum::<f64>()
}

/// Router `i`'s id, also its token's name in the service's `[auth.router]`.
pub fn router_id(i: usize) -> String {
    format!("{}-{i}", super::credentials::ROUTER_NAME)
}

/// Router `i`'s seed: its own streams (arrivals, keys, service times, its
/// baseline's or balancer's choices), the same for every arm.
pub fn router_seed(seed: u64, i: usize) -> u64 {
    seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// `load` split over `routers` (≥ 1): each router offers its share of the
/// rate on its own seed, for the same time.
pub fn split(load: &Load, routers: usize) -> Vec<Load> {
    let routers = routers.max(1);
    (0..routers)
        .map(|i| Load {
            rate: load.rate / routers as f64,
            seed: router_seed(load.seed, i),
            ..load.clone()
        })
        .collect()
}

/// Several routers' runs as one.
#[derive(Debug, Default)]
pub struct Merged {
    /// Every router's requests (by arrival) and the summed counters.
    pub run: Run,
    /// The mean number of distinct routers that picked the same worker
    /// within one view interval ([`Herding`]); `None` without picks.
    pub herding: Option<f64>,
}

/// Merge `runs`, router `i`'s run at index `i`, all timed from one start.
pub fn merge(runs: Vec<Run>) -> Merged {
    let mut herding = Herding::default();
    let mut out = Run::default();
    for (router, run) in runs.into_iter().enumerate() {
        for a in run.samples.iter().flat_map(|s| &s.attempts) {
            herding.record(a.picked_ms, a.worker, router);
        }
        out.samples.extend(run.samples);
        out.dropped += run.dropped;
        out.scorer_errors += run.scorer_errors;
        out.fallbacks += run.fallbacks;
    }
    out.samples.sort_by(|a, b| a.at_ms.total_cmp(&b.at_ms));
    Merged {
        run: out,
        herding: herding.mean_routers(),
    }
}

/// The model figures of every router's balancer as one arm's: the first
/// one's model and configuration, every router's decisions, uses and
/// fallbacks summed; `None` without any.
pub fn merge_model_infos(infos: Vec<ModelArmInfo>) -> Option<ModelArmInfo> {
    let mut infos = infos.into_iter();
    let mut all = infos.next()?;
    for info in infos {
        all.decisions += info.decisions;
        all.used += info.used;
        for (reason, count) in info.fallbacks {
            match all.fallbacks.iter_mut().find(|(r, _)| *r == reason) {
                Some((_, c)) => *c += count,
                None => all.fallbacks.push((reason, count)),
            }
        }
    }
    Some(all)
}

/// One sentence for the report.
pub fn describe(workers: usize, routers: usize, duration: Duration) -> String {
    format!(
        "{routers} independent routers (load generators, each with its own connections, random \
         streams, router token and, in `service-embedded`, its own balancer following the \
         service's view stream and reporting its outstanding picks every 5 ms) send at once to the \
         same identical workers; each baseline runs one instance per router, counting only that \
         router's requests. Every request holds its worker for a pipelined DEBUG SLEEP before the \
         GET/SET: log-normal, mean {MEAN_MS} ms, σ {SIGMA}; offered {:.0}% of the workers' total \
         capacity, {:.0} req/s in all, each router a Poisson stream of {:.1} req/s, for {:.0} s; \
         no fault",
        LOAD * 100.0,
        rate(workers),
        rate(workers) / routers.max(1) as f64,
        duration.as_secs_f64(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::request::{Attempt, Ended, Sample};

    fn load() -> Load {
        Load {
            rate: 420.0,
            duration: Duration::from_secs(12),
            timeout: Duration::from_millis(500),
            put_fraction: 0.1,
            keys: 1000,
            seed: 7,
            max_outstanding: 4096,
            feedback_flush_ms: 2,
            cost_sigma: SIGMA,
        }
    }

    #[test]
    fn the_offered_load_is_split_evenly_on_distinct_seeds() {
        assert!((rate(6) - 420.0).abs() < 1e-9);
        let parts = split(&load(), 4);
        assert_eq!(parts.len(), 4);
        let total: f64 = parts.iter().map(|l| l.rate).sum();
        assert!((total - 420.0).abs() < 1e-9);
        assert!(parts.iter().all(|l| (l.rate - 105.0).abs() < 1e-9));
        assert!(parts.iter().all(|l| l.duration == Duration::from_secs(12)));
        let mut seeds: Vec<u64> = parts.iter().map(|l| l.seed).collect();
        seeds.dedup();
        assert_eq!(seeds.len(), 4);
        assert!(!seeds.contains(&7));
        // The same seed gives every arm the same streams.
        let again: Vec<u64> = split(&load(), 4).iter().map(|l| l.seed).collect();
        assert_eq!(seeds, again);
        assert_eq!(split(&load(), 0).len(), 1);
    }

    fn sample(at_ms: f64, picks: &[(usize, f64)]) -> Sample {
        Sample {
            at_ms,
            latency_ms: 1.0,
            success: true,
            attempts: picks
                .iter()
                .map(|&(worker, picked_ms)| Attempt {
                    worker,
                    picked_ms,
                    pick_us: 1.0,
                    op_ms: 1.0,
                    ended: Ended::Ok,
                    fallback: false,
                })
                .collect(),
        }
    }

    #[test]
    fn merging_keeps_every_request_sums_the_counters_and_measures_herding() {
        let a = Run {
            samples: vec![sample(1.0, &[(2, 1.0)]), sample(9.0, &[(0, 9.0)])],
            dropped: 1,
            scorer_errors: 2,
            fallbacks: 3,
        };
        // Router 1 picks worker 2 in the same 5 ms interval as router 0,
        // then retries on worker 1 in the next one.
        let b = Run {
            samples: vec![sample(2.0, &[(2, 2.0), (1, 6.0)])],
            dropped: 0,
            scorer_errors: 1,
            fallbacks: 1,
        };
        let m = merge(vec![a, b]);
        let at: Vec<f64> = m.run.samples.iter().map(|s| s.at_ms).collect();
        assert_eq!(at, vec![1.0, 2.0, 9.0]);
        assert_eq!(
            (m.run.dropped, m.run.scorer_errors, m.run.fallbacks),
            (1, 3, 4)
        );
        // Pairs (interval 0, w2): routers 0 and 1; (1, w0): 0; (1, w1): 1.
        assert_eq!(m.herding, Some(4.0 / 3.0));
        assert_eq!(merge(Vec::new()).herding, None);
    }

    #[test]
    fn every_balancers_model_counts_are_summed() {
        let info = |decisions, used, fallbacks: &[(&str, u64)]| ModelArmInfo {
            version: "default-1".to_owned(),
            selection_policy: "max".to_owned(),
            budget_us: 100,
            decisions,
            used,
            fallbacks: fallbacks
                .iter()
                .map(|(r, n)| ((*r).to_owned(), *n))
                .collect(),
            factor_spread_mean: None,
            factor_spread_max: None,
            retrain: None,
        };
        let all = merge_model_infos(vec![
            info(10, 8, &[("budget", 2)]),
            info(5, 3, &[("budget", 1), ("stale", 1)]),
        ])
        .expect("merged");
        assert_eq!((all.decisions, all.used), (15, 11));
        assert_eq!(
            all.fallbacks,
            vec![("budget".to_owned(), 3), ("stale".to_owned(), 1)]
        );
        assert_eq!(merge_model_infos(Vec::new()), None);
    }

    #[test]
    fn the_number_of_routers_is_checked() {
        let mut args = crate::testbed::TestbedArgs::defaults(NAME, std::path::Path::new("o"));
        assert_eq!(args.routers, DEFAULT_ROUTERS);
        assert!(args.validate().is_ok());
        for bad in [0, MAX_ROUTERS + 1] {
            args.routers = bad;
            let e = args.validate().expect_err("out of range");
            assert!(e.contains("--routers"), "{e}");
        }
    }

    #[test]
    fn each_router_has_its_own_id_under_the_router_token_name() {
        assert_eq!(router_id(3), "testbed-router-3");
        assert!(scorer_engine::view::is_valid_router_id(&router_id(31)));
    }
}
