//! Power of two choices on outstanding requests.
//!
//! Draw two distinct workers uniformly at random and send to the one with
//! fewer requests in flight (ties: the first drawn). Mitzenmacher, "The Power
//! of Two Choices in Randomized Load Balancing" (IEEE TPDS, 2001) shows the
//! maximum load drops from `Θ(log n / log log n)` to `Θ(log log n)`. It is
//! Envoy's default `LEAST_REQUEST` behaviour for equal weights
//! (`choice_count` 2):
//! <https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/load_balancing/load_balancers#weighted-least-request>.
//! In-flight counts are the router's own: `+1` at pick, `−1` at the outcome
//! (success, error or the client's timeout).

use rand_chacha::ChaCha8Rng;

use super::Endpoints;
use crate::router::{Outcome, Pick, PickRequest, Router};

/// P2C least-request over `n` workers.
#[derive(Debug, Clone)]
pub struct P2cLeastRequest {
    in_flight: Vec<u32>,
    endpoints: Endpoints,
}

impl P2cLeastRequest {
    /// Over `n ≥ 1` workers, all idle.
    pub fn new(n: usize) -> Self {
        Self {
            in_flight: vec![0; n.max(1)],
            endpoints: Endpoints::new(n),
        }
    }

    /// Requests in flight at worker `i`.
    pub fn in_flight(&self, i: usize) -> u32 {
        self.in_flight[i]
    }
}

impl Router for P2cLeastRequest {
    fn pick(&mut self, _req: &PickRequest<'_>, rng: &mut ChaCha8Rng) -> Pick {
        let (a, b) = self.endpoints.two_distinct(rng);
        let worker = if self.in_flight[b] < self.in_flight[a] {
            b
        } else {
            a
        };
        self.in_flight[worker] += 1;
        Pick {
            worker,
            decision_id: None,
        }
    }

    fn outcome(&mut self, o: &Outcome<'_>) {
        let c = &mut self.in_flight[o.worker];
        *c = c.saturating_sub(1);
    }

    fn drain(&mut self, worker: usize, drained: bool, _now_ms: f64) {
        self.endpoints.set_drained(worker, drained);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn two_workers_always_the_less_loaded() {
        let mut p = P2cLeastRequest::new(2);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        // Worker 0 gets the first pick (tie → first drawn, either); then the other.
        let first = p.pick(&PickRequest::test_get(0.0), &mut rng).worker;
        let second = p.pick(&PickRequest::test_get(0.0), &mut rng).worker;
        assert_ne!(first, second);
        // Load worker `first` with two more; the next picks go to `second`
        // until counts are equal.
        p.in_flight[first] = 3;
        assert_eq!(p.pick(&PickRequest::test_get(0.0), &mut rng).worker, second); // 3 vs 1 → second (now 2)
        assert_eq!(p.pick(&PickRequest::test_get(0.0), &mut rng).worker, second); // 3 vs 2 → second (now 3)
        p.outcome(&Outcome {
            worker: first,
            decision_id: None,
            latency_ms: 1.0,
            success: true,
            now_ms: 1.0,
            router: 0,
            cache_hit: None,
        });
        assert_eq!(p.in_flight(first), 2);
        assert_eq!(p.pick(&PickRequest::test_get(0.0), &mut rng).worker, first);
    }

    #[test]
    fn a_stuck_worker_is_avoided_unless_paired_with_itself() {
        let mut p = P2cLeastRequest::new(3);
        p.in_flight[0] = 100;
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        for _ in 0..300 {
            let w = p.pick(&PickRequest::test_get(0.0), &mut rng).worker;
            assert_ne!(w, 0);
            p.outcome(&Outcome {
                worker: w,
                decision_id: None,
                latency_ms: 1.0,
                success: true,
                now_ms: 1.0,
                router: 0,
                cache_hit: None,
            });
        }
    }
}
