//! The cache presets: workers that hold some keys warm
//! ([`super::CacheSpec`]), where routing a key to where it is warm costs a
//! tenth of routing it anywhere, and pinning it by hash can melt a worker.
//!
//! The world (`cache-affinity`): 12 workers, 10 000 keys under 100 tenant
//! prefixes of 100 keys each, each worker's cache holding 2 000 keys (the
//! key space is 5× one cache and under the sum of all twelve), hits 1 ms,
//! misses 10 ms, 10 % PUTs, 70 % load at a 45 % hit rate (about what a
//! locality-blind router reaches here).
//!
//! Popularity: Zipf 0.6 over prefixes and over the keys of a prefix, at the
//! flat end of the 0.64–0.83 Breslau et al. measured on web caches ("Web
//! Caching and Zipf-like Distributions", INFOCOM 1999). Not the YCSB 0.99:
//! with 0.99 a cache of a quarter of the keys holds so much of the traffic
//! that a locality-blind router already hits about 83 % of the time and
//! hashing can add only about 11 points. Tried on seed 1 (tuning), the gap
//! between `hash-bounded` and `least-request-all`: 24 points at
//! 0.65/0.7 with 2 500-key caches (58.8 % against 83.0 %: at this
//! pool's few requests in flight, the 1.25 bound spills often), 30 at
//! 0.65/0.65 with 2 000, 33 at 0.6/0.6 with 2 000 (45 % against 78 %).

use super::{CacheSpec, Fault, HotKey, Scenario, WorkerSpec};

/// The presets, in report order.
pub const CACHE_SCENARIOS: [&str; 5] = [
    "cache-affinity",
    "hot-key",
    "cold-restart",
    "cache-many-routers",
    "cache-heterogeneous",
];

const KEYS: usize = 10_000;
const PREFIXES: usize = 100;
const KEY_ZIPF_S: f64 = 0.6;
const PREFIX_ZIPF_S: f64 = 0.6;

/// Share of requests the `hot-key` preset's key takes.
pub const HOT_KEY_SHARE: f64 = 0.2;
/// Its requests' cost multiplier: 20 % of requests as plain 1 ms hits are
/// about a third of one worker, which no policy needs to spread; at 5× the
/// key is about 1.4 workers' work, which melts the one worker a hash pins
/// it to.
pub const HOT_KEY_SIZE_FACTOR: f64 = 5.0;

const WORLD: &str = "Workers cache keys in front of an origin (2 000 of 10 000 keys each unless stated; 100 tenant prefixes; Zipf 0.6 over tenants and within); hits 1 ms, misses 10 ms (the origin fetch), LRU";

/// The preset `name` on `n` workers for `d` ms, `at` scaling a time laid
/// out on a 120 s run; `None` for another name.
pub(super) fn cache_preset(
    name: &str,
    n: usize,
    d: f64,
    at: impl Fn(f64) -> f64,
) -> Option<Scenario> {
    let world = |what: &str| {
        let mut s = Scenario::base(name, &format!("{WORLD}; {what}"), n, d);
        s.keys = KEYS;
        s.zipf_s = KEY_ZIPF_S;
        s.prefixes = PREFIXES;
        s.prefix_zipf_s = PREFIX_ZIPF_S;
        s.cache = Some(CacheSpec::default());
        s
    };
    Some(match name {
        "cache-affinity" => world("70% load at a 45% hit rate."),
        "hot-key" => {
            let mut s =
                world("from a third of the run, one key (a 5x value) takes 20% of the requests.");
            s.hot_key = Some(HotKey {
                from_ms: at(40_000.0),
                share: HOT_KEY_SHARE,
                size_factor: HOT_KEY_SIZE_FACTOR,
            });
            s
        }
        "cold-restart" => {
            let mut s = world(
                "worker 0 is down from a third to half of the run and returns with an empty cache.",
            );
            s.faults.push(Fault::Crash {
                worker: 0,
                from_ms: at(40_000.0),
                to_ms: at(60_000.0),
            });
            s
        }
        "cache-many-routers" => {
            let mut s = world("8 independent routers, each request from one at random.");
            s.routers = super::MANY_ROUTERS;
            s
        }
        "cache-heterogeneous" => {
            let mut s = world(
                "worker speeds spread 4x (0.5 to 2.0) and cache sizes 4x the other way (4 000 to 1 000 keys).",
            );
            let last = (n - 1).max(1) as f64;
            for (i, w) in s.workers.iter_mut().enumerate() {
                let x = i as f64 / last;
                *w = WorkerSpec {
                    speed: 0.5 * 4f64.powf(x),
                    concurrency: 1,
                    cache_keys: Some((4_000.0 * 0.25f64.powf(x)).round() as usize),
                };
            }
            s
        }
        _ => return None,
    })
}
