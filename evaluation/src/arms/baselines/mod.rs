//! Baseline policies, implemented from their published descriptions (not
//! through the service), so that the service is compared with what a router
//! would use instead:
//!
//! - [`round_robin::RoundRobin`]: the classic rotation (NGINX/Envoy `ROUND_ROBIN`).
//! - [`random::Random`]: uniform random choice (Envoy `RANDOM`).
//! - [`p2c_least_request::P2cLeastRequest`]: power of two choices on
//!   outstanding requests — Mitzenmacher, "The Power of Two Choices in
//!   Randomized Load Balancing", IEEE TPDS 12(10), 2001; Envoy's default
//!   `LEAST_REQUEST` load balancer with `choice_count = 2`
//!   (<https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/load_balancing/load_balancers>).
//! - [`p2c_peak_ewma::P2cPeakEwma`]: power of two choices on
//!   `peak-EWMA RTT × (in-flight + 1)`, the estimate decaying on every read
//!   — Linkerd2-proxy's `tower::load::PeakEwma` with Linkerd's defaults
//!   (<https://linkerd.io/2021/05/27/linkerd-load-balancing/>), after
//!   Finagle's `Balancers.p2cPeakEwma`
//!   (<https://twitter.github.io/finagle/guide/Clients.html#power-of-two-choices-p2c-peak-ewma>).
//! - [`least_request_all::LeastRequestAll`]: the fewest in flight over all
//!   workers, ties at random — HAProxy `balance leastconn`
//!   (`src/lb_fwlc.c`), NGINX `least_conn`.
//! - [`envoy::Envoy`]: Envoy as deployed — `LEAST_REQUEST` P2C (draws with
//!   replacement) with outlier detection at its default settings
//!   (consecutive 5xx, success rate, ejection backoff, `max_ejection_percent`)
//!   and the 50 % healthy-panic threshold.
//!
//! The locality baselines (class `LocalityBaseline` in
//! [`super::registry::ARMS`]) route by the request's key:
//!
//! - [`hash_bounded::HashBounded`]: consistent hashing with bounded loads
//!   (Mirrokni, Thorup, Zadimoghaddam, SODA 2018) as HAProxy runs it with
//!   `hash-type consistent` and `hash-balance-factor 125`.
//! - [`cache_aware::CacheAware`]: SGLang's cache-aware policy (approximate
//!   prefix tree per worker, shortest queue when imbalanced).
//! - [`kv_cost::KvCost`]: NVIDIA Dynamo's KV-router cost in approximate
//!   mode (keys routed to a worker within a TTL count as cached).
//!
//! All keep their own in-flight counts from picks and outcomes, as a proxy
//! does; none sees worker telemetry. Their parameters are the published
//! defaults, never tuned for these scenarios. Each module's docs cite the
//! source functions it follows.

mod endpoints;
pub(crate) use endpoints::Endpoints;
pub mod cache_aware;
pub mod envoy;
pub mod hash_bounded;
pub mod kv_cost;
pub mod least_request_all;
pub mod p2c_least_request;
pub mod p2c_peak_ewma;
pub mod random;
pub mod round_robin;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Two distinct indices in `0..n` drawn uniformly (one when `n == 1`).
pub(crate) fn two_distinct(n: usize, rng: &mut ChaCha8Rng) -> (usize, usize) {
    if n < 2 {
        return (0, 0);
    }
    let a = rng.random_range(0..n);
    let mut b = rng.random_range(0..n - 1);
    if b >= a {
        b += 1;
    }
    (a, b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn two_distinct_never_equal_and_covers_all() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut seen = [0u32; 5];
        for _ in 0..10_000 {
            let (a, b) = two_distinct(5, &mut rng);
            assert_ne!(a, b);
            seen[a] += 1;
            seen[b] += 1;
        }
        assert!(seen.iter().all(|&c| c > 3_500), "{seen:?}");
    }
}
