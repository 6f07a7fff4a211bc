//! Named scenario presets for the simulator.
//!
//! Each preset is a classic load-balancing situation from the literature and
//! field reports:
//!
//! | name | what happens | why it matters |
//! |---|---|---|
//! | `homogeneous` | identical workers, steady Poisson load | the baseline: a policy must not hurt when nothing is wrong |
//! | `heterogeneous` | worker speeds spread 4× (0.5 … 2.0) | capacity-blind policies overload the slow half (Envoy/NGINX weighted LB docs) |
//! | `mixed-sizes` | 5% of requests cost 10× | head-of-line blocking behind large values (Dean & Barroso, "The Tail at Scale") |
//! | `slow-worker` | worker 0 is 5× slower for 60 s | a "limping" node / gray failure (Huang et al., "Gray Failure", HotOS 2017) |
//! | `compaction` | worker 0 compacts 10 s of every 30 s: PUTs 4× slower, GETs 1.5× | LSM compaction stalls (RocksDB/Cassandra operations guides) |
//! | `crash-recovery` | worker 0 down for 30 s (connections refused), then back | recovery without flooding the cold node (Envoy slow start) |
//! | `zombie` | worker 0 accepts requests and never answers while its telemetry looks healthy | the black hole that health checks miss (gray failure) |
//! | `stale-burst` | 10 s report interval; a burst of unrouted load saturates worker 0 for 15 s | stale metrics make a busy worker look idle (Mitzenmacher, "How Useful Is Old Information?", 2000) |
//! | `many-routers` | 8 independent routers send to the same identical workers | sidecar meshes balance on partial, per-client information; a central scorer sees every router's load |
//! | `many-routers-32`, `many-routers-128` | 32 routers at 70% load; 128 routers at 80% | the more routers decide at once on the same stale picture, the more they herd onto its apparent minimum |
//! | `many-routers-heterogeneous` | 8 routers, worker speeds spread 4× | herding and capacity-blindness together |
//! | `many-routers-fault` | 8 routers; worker 0 5× slower for 60 s, worker 1 down for 30 s | retries of many routers piling onto whichever worker looks idle |
//! | `hidden-signal` | a quarter of the workers (3 of 12) hold a memtable that fills to 4 GiB over 20 s and flushes; their PUTs cost up to 4× as it fills, GETs nothing | a slowdown only one telemetry signal (`memtable_bytes`) and the request type explain: the room a learned model has over rules and latency-only balancers |
//! | `drain` | the operator drains worker 0 for 30 s, then returns it; the worker stays healthy | maintenance: its share must fall below 1% of picks within one report interval (HAProxy `set server … state drain`, Envoy EDS `DRAINING`) |
//! | `cache-affinity` | each worker caches a quarter of the keys; a miss costs 10× a hit | data locality against stability, the core of a KV-aware score ([`cache_presets`]) |
//! | `hot-key`, `cold-restart`, `cache-many-routers`, `cache-heterogeneous` | a hot large key; a worker back with an empty cache; 8 routers; speeds and cache sizes spread 4× | locality that must not melt a worker, flood a cold one, herd, or ignore speed |
//!
//! Units: times in ms, speeds and factors are multipliers, load is a fraction
//! of the healthy cluster's capacity.
//!
//! The same shape is read from TOML files (`evaluate sim --scenario-file`,
//! [`crate::scenario_file`]): a key left out takes the value of the
//! `homogeneous` preset ([`Scenario::default`]), an unknown key is refused.

use serde::{Deserialize, Serialize};

mod cache;
mod cache_presets;
mod fault;
mod hidden_signal;
mod many_routers;
pub use cache::{
    CacheSpec, EvictionPolicy, HotKey, MAX_CACHE_KEYS, MAX_PREFIXES, validate_prefixes,
};
pub use cache_presets::CACHE_SCENARIOS;
pub use fault::Fault;
pub use hidden_signal::{
    HEALTHY_MEMTABLE_PEAK_BYTES, HIDDEN_SIGNAL_PERIOD_MS, HIDDEN_SIGNAL_PUT_SLOWDOWN_PER_GIB,
    MEMTABLE_PEAK_BYTES, hidden_signal_affected,
};
use hidden_signal::{hidden_signal, hidden_signal_mid_run};
use many_routers::many_routers;
pub use many_routers::{MANY_ROUTERS, MANY_ROUTERS_SCENARIOS};

/// One worker's static description.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkerSpec {
    /// Relative speed; service times are divided by it (1.0 = nominal).
    pub speed: f64,
    /// Requests served at once; more wait in a FIFO queue.
    pub concurrency: usize,
    /// Keys its cache holds, if not the scenario's
    /// [`CacheSpec::capacity_keys`] (with a cache only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_keys: Option<usize>,
}

impl Default for WorkerSpec {
    /// A nominal worker: speed 1, one request at a time.
    fn default() -> Self {
        Self {
            speed: 1.0,
            concurrency: 1,
            cache_keys: None,
        }
    }
}

/// A complete simulator set-up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Scenario {
    /// Preset name.
    pub name: String,
    /// One sentence on what it models.
    pub description: String,
    /// The workers.
    pub workers: Vec<WorkerSpec>,
    /// Offered load as a fraction of the healthy cluster's capacity.
    pub load: f64,
    /// Simulated run length, ms.
    pub duration_ms: f64,
    /// Telemetry report interval, ms.
    pub report_interval_ms: f64,
    /// Mean GET service time at speed 1, ms.
    pub get_cost_ms: f64,
    /// Mean PUT service time at speed 1, ms.
    pub put_cost_ms: f64,
    /// Fraction of requests that are PUTs.
    pub put_fraction: f64,
    /// Fraction of requests that are large.
    pub large_fraction: f64,
    /// Cost multiplier of a large request.
    pub large_factor: f64,
    /// Log-normal shape of the per-request service-time factor.
    pub sigma: f64,
    /// Client timeout per attempt, ms.
    pub timeout_ms: f64,
    /// Retries after a timeout or a refused connection (attempts = 1 + retries).
    pub max_retries: u32,
    /// Distinct keys.
    pub keys: usize,
    /// Zipf exponent of key popularity (within a prefix, with prefixes).
    pub zipf_s: f64,
    /// Key prefixes (`tenant:{t}:…`), each with `keys / prefixes` keys; 0 =
    /// none (keys `user:{rank}:profile`).
    #[serde(skip_serializing_if = "is_zero")]
    pub prefixes: usize,
    /// Zipf exponent of prefix popularity.
    pub prefix_zipf_s: f64,
    /// The workers' caches ([`CacheSpec`]); none = every request costs
    /// the same wherever it goes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheSpec>,
    /// A key that turns hot mid-run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hot_key: Option<HotKey>,
    /// Injected faults.
    pub faults: Vec<Fault>,
    /// Window for shares, oscillation and plots, ms.
    pub window_ms: f64,
    /// Independent routers sending to the workers (1 = one router). Each
    /// request is issued by one of them, uniformly at random; a baseline
    /// runs one independent instance per router, the service arms share one
    /// service (see [`crate::arms::per_router`]).
    pub routers: usize,
    /// Cores of the simulated HTTP scorer that the service arms call: a
    /// call is handled by a free core, or waits in its FIFO queue.
    pub scorer_cores: usize,
    /// Network round trip between a router and the scorer, µs: a score call
    /// pays it (half each way) and a feedback batch half of it. Default:
    /// the calibration's loopback round trip ([`crate::calibration`]).
    pub scorer_round_trip_us: f64,
    /// Multiplier of the calibrated in-service time of a score call (1: as
    /// measured; 0: scoring itself is free).
    pub scorer_service_scale: f64,
    /// A service arm's router sends its buffered outcomes every this many
    /// ms (the API docs advise 2–5 ms), ms.
    pub feedback_flush_ms: f64,
    /// … or as soon as this many are buffered (the API docs' 64).
    pub feedback_batch_max: usize,
    /// Telemetry reaches the service this long after the snapshot, ms.
    pub telemetry_delay_ms: f64,
    /// A service arm's router waits this long for a score answer, ms, then
    /// picks by itself (P2C least-request over its own in-flight requests,
    /// as the testbed's router does) and counts a scorer error; a later
    /// answer is dropped.
    pub scorer_timeout_ms: f64,
    /// With several routers, an embedded arm's load relay interval, ms:
    /// each router reports its outstanding picks, and its view stream
    /// carries the others' load, every this many ms, each clock at its own
    /// phase. Default: the balancer's and the service's 5 ms; shorter is a
    /// diagnostic of what fresher sharing (a faster bus) would buy.
    pub load_interval_ms: f64,
}

/// Default [`Scenario::scorer_cores`].
pub const DEFAULT_SCORER_CORES: usize = 2;
/// Default [`Scenario::feedback_flush_ms`]: the low end of the API docs'
/// 2–5 ms, as the testbed's router does.
pub const DEFAULT_FEEDBACK_FLUSH_MS: f64 = 2.0;
/// Default [`Scenario::feedback_batch_max`].
pub const DEFAULT_FEEDBACK_BATCH_MAX: usize = 64;
/// Default [`Scenario::scorer_timeout_ms`]: the testbed router's
/// `--scorer-timeout-ms`.
pub const DEFAULT_SCORER_TIMEOUT_MS: f64 = 50.0;
/// Default [`Scenario::telemetry_delay_ms`].
pub const DEFAULT_TELEMETRY_DELAY_MS: f64 = 1.0;

/// Default [`Scenario::prefix_zipf_s`].
pub const DEFAULT_PREFIX_ZIPF_S: f64 = 0.8;

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Most routers in one scenario (one baseline instance each).
pub const MAX_ROUTERS: usize = 1_000;

impl Default for Scenario {
    /// The `homogeneous` preset's set-up under the name `custom`: what a
    /// scenario file's missing keys default to.
    fn default() -> Self {
        Self::base(
            "custom",
            "A scenario read from a file.",
            DEFAULT_WORKERS,
            DEFAULT_DURATION_S * 1000.0,
        )
    }
}

/// Every preset name, in report order.
pub const SCENARIOS: [&str; 21] = [
    "homogeneous",
    "heterogeneous",
    "mixed-sizes",
    "slow-worker",
    "compaction",
    "crash-recovery",
    "zombie",
    "stale-burst",
    "many-routers",
    "hidden-signal",
    "drain",
    "many-routers-32",
    "many-routers-128",
    "many-routers-heterogeneous",
    "many-routers-fault",
    "cache-affinity",
    "hot-key",
    "cold-restart",
    "cache-many-routers",
    "cache-heterogeneous",
    "hidden-signal-mid-run",
];

/// Defaults: 12 workers, 120 s, 2 s reports, 70% load.
pub const DEFAULT_WORKERS: usize = 12;
/// Default run length, s.
pub const DEFAULT_DURATION_S: f64 = 120.0;
/// Largest simulated pool (the simulator holds per-worker queues and the
/// selectors' tables in memory).
pub const MAX_WORKERS: usize = 1_000;
/// Longest simulated run, s (events are held per request in memory).
pub const MAX_DURATION_S: f64 = 3_600.0;

impl Scenario {
    fn base(name: &str, description: &str, n: usize, duration_ms: f64) -> Self {
        Self {
            name: name.to_owned(),
            description: description.to_owned(),
            workers: vec![WorkerSpec::default(); n],
            load: 0.7,
            duration_ms,
            report_interval_ms: 2_000.0,
            get_cost_ms: 2.0,
            put_cost_ms: 4.0,
            put_fraction: 0.1,
            large_fraction: 0.0,
            large_factor: 1.0,
            sigma: 0.5,
            timeout_ms: 100.0,
            max_retries: 2,
            keys: 100_000,
            zipf_s: 0.99,
            prefixes: 0,
            prefix_zipf_s: DEFAULT_PREFIX_ZIPF_S,
            cache: None,
            hot_key: None,
            faults: Vec::new(),
            window_ms: 1_000.0,
            routers: 1,
            scorer_cores: DEFAULT_SCORER_CORES,
            scorer_round_trip_us: crate::calibration::HttpScoreCalibration::shipped().round_trip_us,
            scorer_service_scale: 1.0,
            feedback_flush_ms: DEFAULT_FEEDBACK_FLUSH_MS,
            feedback_batch_max: DEFAULT_FEEDBACK_BATCH_MAX,
            telemetry_delay_ms: DEFAULT_TELEMETRY_DELAY_MS,
            scorer_timeout_ms: DEFAULT_SCORER_TIMEOUT_MS,
            load_interval_ms: scorer_engine::view::LOAD_INTERVAL_MS as f64,
        }
    }

    /// The preset `name` for `workers` workers
    /// (2..=[`MAX_WORKERS`]) over `duration_s` seconds
    /// (1..=[`MAX_DURATION_S`]); fault times scale with the duration (the
    /// nominal layout is for 120 s).
    ///
    /// # Errors
    /// An unknown name; `workers` or `duration_s` out of range (never
    /// silently changed: results record the run's real parameters).
    pub fn preset(name: &str, workers: usize, duration_s: f64) -> Result<Self, String> {
        if !(2..=MAX_WORKERS).contains(&workers) {
            return Err(format!(
                "--workers must be in 2..={MAX_WORKERS}, got {workers}"
            ));
        }
        if !(duration_s.is_finite() && (1.0..=MAX_DURATION_S).contains(&duration_s)) {
            return Err(format!(
                "--duration-s must be in 1..={MAX_DURATION_S} s, got {duration_s}"
            ));
        }
        let n = workers;
        let d = duration_s * 1000.0;
        // Fault times are laid out on a 120 s run and scaled.
        let at = |ms: f64| ms * d / 120_000.0;
        let mut s = match name {
            "homogeneous" => Self::base(
                name,
                "Identical workers under steady Poisson load at 70% of capacity.",
                n,
                d,
            ),
            "heterogeneous" => {
                let mut s = Self::base(
                    name,
                    "Worker speeds spread 4x (0.5 to 2.0), 70% of total capacity.",
                    n,
                    d,
                );
                for (i, w) in s.workers.iter_mut().enumerate() {
                    w.speed = 0.5 * 4f64.powf(i as f64 / (n - 1) as f64);
                }
                s
            }
            "mixed-sizes" => {
                let mut s = Self::base(
                    name,
                    "5% of requests are large values costing 10x; 70% load.",
                    n,
                    d,
                );
                s.large_fraction = 0.05;
                s.large_factor = 10.0;
                s
            }
            "slow-worker" => {
                let mut s = Self::base(
                    name,
                    "Worker 0 is 5x slower for 60 s (of 120 s) at 70% load.",
                    n,
                    d,
                );
                s.faults.push(Fault::Slow {
                    worker: 0,
                    from_ms: at(30_000.0),
                    to_ms: at(90_000.0),
                    factor: 5.0,
                });
                s
            }
            "compaction" => {
                let mut s = Self::base(
                    name,
                    "Worker 0 compacts 10 s of every 30 s: PUTs 4x slower, GETs 1.5x; 30% PUTs.",
                    n,
                    d,
                );
                s.put_fraction = 0.3;
                s.faults.push(Fault::Compaction {
                    worker: 0,
                    first_ms: at(10_000.0),
                    period_ms: at(30_000.0),
                    duration_ms: at(10_000.0),
                    put_factor: 4.0,
                    get_factor: 1.5,
                });
                s
            }
            "crash-recovery" => {
                let mut s = Self::base(
                    name,
                    "Worker 0 is down (connections refused, silent) for 30 s, then returns cold and empty.",
                    n,
                    d,
                );
                s.faults.push(Fault::Crash {
                    worker: 0,
                    from_ms: at(40_000.0),
                    to_ms: at(70_000.0),
                });
                s
            }
            "zombie" => {
                let mut s = Self::base(
                    name,
                    "Worker 0 accepts requests and never answers for 40 s while its telemetry looks healthy.",
                    n,
                    d,
                );
                s.faults.push(Fault::Zombie {
                    worker: 0,
                    from_ms: at(40_000.0),
                    to_ms: at(80_000.0),
                });
                s
            }
            "drain" => {
                let mut s = Self::base(
                    name,
                    "The operator drains worker 0 for 30 s (maintenance), then returns it; the worker itself stays healthy.",
                    n,
                    d,
                );
                s.faults.push(Fault::Drain {
                    worker: 0,
                    from_ms: at(40_000.0),
                    to_ms: at(70_000.0),
                });
                s
            }
            "stale-burst" => {
                let mut s = Self::base(
                    name,
                    "10 s report interval; unrouted background load of 1.2x capacity hits worker 0 for 15 s, starting mid-interval.",
                    n,
                    d,
                );
                s.report_interval_ms = 10_000.0;
                s.faults.push(Fault::Burst {
                    worker: 0,
                    from_ms: at(45_000.0),
                    to_ms: at(60_000.0),
                    load: 1.2,
                });
                s
            }
            "hidden-signal" => hidden_signal(n, d),
            "hidden-signal-mid-run" => hidden_signal_mid_run(n, d),
            other => match many_routers(other, n, d, at)
                .or_else(|| cache_presets::cache_preset(other, n, d, at))
            {
                Some(s) => s,
                None => {
                    return Err(format!(
                        "unknown scenario `{other}`: expected one of {}",
                        SCENARIOS.join(", ")
                    ));
                }
            },
        };
        s.name = name.to_owned();
        if s.duration_ms < 30_000.0 {
            s.window_ms = (s.duration_ms / 30.0).max(100.0);
        }
        Ok(s)
    }

    /// Mean service time of one request at speed 1, ms (mix of GET/PUT and sizes).
    /// With a cache, a GET costs its blend at [`CacheSpec::load_hit_rate`].
    pub fn mean_cost_ms(&self) -> f64 {
        let get = self
            .cache
            .as_ref()
            .map_or(self.get_cost_ms, |c| c.get_cost_at_ms(c.load_hit_rate));
        let kind = (1.0 - self.put_fraction) * get + self.put_fraction * self.put_cost_ms;
        kind * (1.0 - self.large_fraction + self.large_fraction * self.large_factor)
    }

    /// Healthy capacity of worker `i`, requests/ms.
    pub fn capacity_per_ms(&self, i: usize) -> f64 {
        let w = &self.workers[i];
        w.concurrency as f64 * w.speed / self.mean_cost_ms()
    }

    /// Client arrival rate, requests/ms: `load` × total healthy capacity.
    pub fn arrival_rate_per_ms(&self) -> f64 {
        self.load
            * (0..self.workers.len())
                .map(|i| self.capacity_per_ms(i))
                .sum::<f64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_builds_and_unknown_is_refused() {
        for name in SCENARIOS {
            let s = Scenario::preset(name, 12, 120.0).expect(name);
            assert_eq!(s.workers.len(), 12);
            assert!(s.arrival_rate_per_ms() > 0.0);
        }
        assert!(Scenario::preset("nope", 12, 1.0).is_err());
    }

    #[test]
    fn sizes_out_of_range_are_refused_not_changed() {
        // Found by a fresh-eyes run: 0/NaN s ran 1 s, 0 or 1 worker ran 2,
        // inf s panicked, 1e12 s aborted on allocation.
        for (workers, duration_s) in [
            (0, 10.0),
            (1, 10.0),
            (MAX_WORKERS + 1, 10.0),
            (12, 0.0),
            (12, f64::NAN),
            (12, f64::INFINITY),
            (12, 1e12),
        ] {
            let e = Scenario::preset("homogeneous", workers, duration_s).unwrap_err();
            assert!(e.contains("--workers") || e.contains("--duration-s"), "{e}");
        }
        let s = Scenario::preset("homogeneous", 2, 1.0).expect("smallest");
        assert_eq!((s.workers.len(), s.duration_ms), (2, 1_000.0));
    }

    #[test]
    fn policy_lists_are_checked() {
        let names = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(crate::arms::check_names(&names(&["random", "rules-max"])).is_ok());
        for bad in [&[][..], &["random", "random"][..], &["nope"][..]] {
            assert!(crate::arms::check_names(&names(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn testbed_flags_are_checked() {
        let ok = crate::testbed::TestbedArgs::defaults("pause", std::path::Path::new("o"));
        assert!(ok.validate().is_ok());
        let mut long_fault = ok.clone();
        (
            long_fault.duration_s,
            long_fault.fault_at_s,
            long_fault.fault_ms,
        ) = (3.0, 1.0, 20_000);
        assert!(
            long_fault
                .validate()
                .unwrap_err()
                .contains("inside the run")
        );
        let mut nan = ok.clone();
        nan.fault_at_s = f64::NAN;
        assert!(nan.validate().is_err());
        let mut no_fault = ok.clone();
        no_fault.fault_ms = 0;
        assert!(no_fault.validate().unwrap_err().contains("--fault-ms"));
        let mut no_rate = ok.clone();
        no_rate.rate = 0.0;
        assert!(no_rate.validate().unwrap_err().contains("--rate"));
        let mut one = ok.clone();
        one.workers = 1;
        assert!(one.validate().unwrap_err().contains("--workers"));
        let mut forever = ok;
        forever.duration_s = f64::INFINITY;
        assert!(forever.validate().unwrap_err().contains("--duration-s"));
    }

    #[test]
    fn heterogeneous_spread_is_four_times() {
        let s = Scenario::preset("heterogeneous", 12, 120.0).expect("preset");
        let (lo, hi) = (s.workers[0].speed, s.workers[11].speed);
        assert!((hi / lo - 4.0).abs() < 1e-9);
    }
}
