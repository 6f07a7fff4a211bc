//! A testbed run's summary: the run record (latencies end to end, every
//! attempt's pick, timeout and retry), the results.json row with the
//! router's counters, the host's cores, and the description.

use super::request::Ended;
use super::{TestbedArgs, faults, loaded, loadgen, many_routers, picker};
use crate::run_summary::PolicyResult;
use crate::sim::RunRecord;

/// Window of the picks-per-worker shares, ms.
pub(super) const WINDOW_MS: f64 = 500.0;

/// The cores every process of the testbed shares (the redis-servers, the
/// service, the agent and the load generator all run on this host).
pub(super) fn shared_cores() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

/// Window picks, latencies and attempt counts of a load run. Every attempt
/// counts as a pick in its request's arrival window; its pick time goes to
/// `decision_ms` (a baseline's in-process pick too).
pub(super) fn record(run: &loadgen::Run, n: usize, duration_ms: f64, window_ms: f64) -> RunRecord {
    let windows = (duration_ms / window_ms).ceil().max(1.0) as usize;
    let mut rec = RunRecord {
        window_picks: vec![vec![0; n]; windows],
        window_ms,
        fallbacks: run.fallbacks,
        ..RunRecord::default()
    };
    for s in &run.samples {
        let w = ((s.at_ms / window_ms) as usize).min(windows - 1);
        for a in &s.attempts {
            rec.window_picks[w][a.worker] += 1;
            rec.attempts += 1;
            rec.decision_ms.push(a.pick_us / 1000.0);
            match a.ended {
                Ended::TimedOut => rec.timeouts += 1,
                Ended::Refused => rec.refused += 1,
                Ended::Ok | Ended::Error => {}
            }
        }
        rec.retries += s.attempts.len().saturating_sub(1) as u64;
        rec.latencies_ms.push(s.latency_ms);
        if !s.success {
            rec.failed += 1;
        }
    }
    rec
}

/// The results.json row of arm `name`: [`PolicyResult::from_record`] plus
/// the router's counters and the shared cores.
pub(super) fn policy_result(
    name: &str,
    rec: &RunRecord,
    run: &loadgen::Run,
    fault: Option<(usize, f64, f64)>,
    cores: usize,
) -> PolicyResult {
    let mut p = PolicyResult::from_record(name, rec, fault);
    p.scorer_errors = Some(run.scorer_errors);
    p.dropped = Some(run.dropped);
    p.cores = Some(cores);
    p
}

/// The scenario's description for results.json and the report;
/// `cache_note` describes the `cache` scenario's caches.
pub(super) fn describe(args: &TestbedArgs, cores: usize, cache_note: &str) -> String {
    let n = args.workers;
    let load = if args.scenario == super::cache::NAME {
        format!(
            "open-loop Poisson load {:.0} req/s for {:.0} s per policy ({:.0} s measured), 10% SET; {cache_note}",
            args.rate,
            args.duration_s,
            super::measured_s(args),
        )
    } else if args.scenario == many_routers::NAME {
        many_routers::describe(
            n,
            args.routers,
            std::time::Duration::from_secs_f64(args.duration_s),
        )
    } else if args.scenario == loaded::NAME {
        format!(
            "open-loop Poisson load {:.0} req/s for {:.0} s per policy, 10% SET; {}",
            loaded::rate(n),
            args.duration_s,
            loaded::describe(n)
        )
    } else {
        let on = if args.scenario == faults::SCORER_DOWN {
            "on the service"
        } else {
            "on w0"
        };
        format!(
            "open-loop Poisson load {:.0} req/s for {:.0} s per policy, 10% SET; fault `{}` {on} at {:.1} s for {} ms ({})",
            args.rate,
            args.duration_s,
            args.scenario,
            args.fault_at_s,
            args.fault_ms,
            faults::describe(&args.scenario),
        )
    };
    format!(
        "{n} real redis-server workers on 127.0.0.1, agent every 1 s, service over HTTP (default config); \
         {load}. All processes (redis-servers, service, agent, load generator) shared {cores} cores. \
         Every arm: timeout {} ms per attempt, one retry on a refused connection or a timeout, on a fresh pick; \
         the scorer call gets {} ms, after which (or on an error) the router counts a scorer error and \
         picks by itself (P2C least-request over its own outstanding requests) and serves the request. \
         Latency runs from the request's scheduled arrival at the router to the final reply, the pick \
         (scorer call) and the retry included; each arm is told each attempt's Redis operation latency. \
         The service arms' outcomes go back {}.{}",
        args.timeout_ms,
        args.scorer_timeout_ms,
        if args.feedback_flush_ms == 0 {
            "in one feedback call each".to_owned()
        } else {
            format!(
                "in feedback batches every {} ms or {} outcomes",
                args.feedback_flush_ms,
                picker::FEEDBACK_BATCH_MAX
            )
        },
        if args.baselines_call_service {
            " Diagnostic run: the baselines also call the service for a score and send it the \
             outcome on every request, and route by their own pick."
        } else {
            ""
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::request::{Attempt, Sample};

    fn attempt(worker: usize, pick_us: f64, ended: Ended) -> Attempt {
        Attempt {
            worker,
            picked_ms: 0.0,
            pick_us,
            op_ms: 1.0,
            ended,
            fallback: false,
        }
    }

    #[test]
    fn every_attempt_is_a_pick_and_the_latency_is_the_requests() {
        let run = loadgen::Run {
            samples: vec![
                Sample {
                    at_ms: 100.0,
                    latency_ms: 3.0,
                    success: true,
                    attempts: vec![attempt(1, 200.0, Ended::Ok)],
                },
                Sample {
                    at_ms: 700.0,
                    latency_ms: 512.0,
                    success: true,
                    attempts: vec![
                        attempt(0, 300.0, Ended::TimedOut),
                        attempt(1, 400.0, Ended::Ok),
                    ],
                },
                Sample {
                    at_ms: 800.0,
                    latency_ms: 2.0,
                    success: false,
                    attempts: vec![
                        attempt(0, 100.0, Ended::Refused),
                        attempt(0, 100.0, Ended::Refused),
                    ],
                },
            ],
            dropped: 2,
            scorer_errors: 1,
            fallbacks: 1,
        };
        let rec = record(&run, 2, 1000.0, 500.0);
        assert_eq!(rec.window_picks, vec![vec![0, 1], vec![3, 1]]);
        assert_eq!(
            (
                rec.attempts,
                rec.retries,
                rec.timeouts,
                rec.refused,
                rec.failed
            ),
            (5, 2, 1, 2, 1)
        );
        assert_eq!(rec.latencies_ms, vec![3.0, 512.0, 2.0]);
        let p = policy_result("x", &rec, &run, None, 2);
        // Picks of 100, 100, 200, 300, 400 µs: p50 200, p99 400.
        assert_eq!((p.pick_us_p50, p.pick_us_p99), (Some(200.0), Some(400.0)));
        assert_eq!(p.p99_ms, Some(512.0));
        assert_eq!(
            (p.scorer_errors, p.fallbacks, p.dropped, p.cores, p.retries),
            (Some(1), Some(1), Some(2), Some(2), Some(2))
        );
        let json = serde_json::to_value(&p).expect("json");
        for field in [
            "pick_us_p50",
            "pick_us_p99",
            "scorer_errors",
            "dropped",
            "cores",
        ] {
            assert!(json.get(field).is_some(), "{field} missing from {json}");
        }
    }

    #[test]
    fn the_description_states_the_cores_and_the_end_to_end_latency() {
        let args = TestbedArgs::defaults("pause", std::path::Path::new("o"));
        let d = describe(&args, 3, "");
        assert!(d.contains("shared 3 cores"), "{d}");
        assert!(d.contains("scheduled arrival"), "{d}");
        assert!(
            d.contains("one retry on a refused connection or a timeout"),
            "{d}"
        );
        let d = describe(
            &TestbedArgs::defaults("loaded", std::path::Path::new("o")),
            2,
            "",
        );
        assert!(d.contains("385 req/s") && d.contains("DEBUG SLEEP"), "{d}");
        let d = describe(
            &TestbedArgs::defaults("many-routers", std::path::Path::new("o")),
            2,
            "",
        );
        assert!(
            d.contains("4 independent routers") && d.contains("420 req/s in all"),
            "{d}"
        );
    }
}
