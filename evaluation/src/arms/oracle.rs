//! The `oracle` arm: the physical-limit anchor.
//!
//! It knows what no router can: every worker's true queue, in-service work,
//! speed, fault and memtable state at the instant of the pick (the
//! simulator computes each worker's expected delay for the request,
//! [`crate::sim::worker::SimWorker::expected_delay_ms`]) and sends the
//! request where that delay is shortest, ties at random: "shortest
//! expected delay" routing (Whitt, "Deciding which queue to join: some
//! counterexamples", Operations Research 34(1), 1986; Gupta et al.,
//! "Analysis of join-the-shortest-queue routing for web server farms",
//! Performance Evaluation 64, 2007). It pays nothing for its decision and
//! sees every outcome at once. It is greedy, not clairvoyant about future
//! arrivals or service-time draws, so it is a strong anchor rather than a
//! proven optimum; every arm's p99 is reported as a ratio to it.
//!
//! In the testbed there is no true state to read, so the arm exists only
//! in the simulator.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::router::{Outcome, Pick, PickRequest, Router};

/// An arm told the simulator's true state before each pick
/// ([`super::Arm::Oracle`]).
pub trait Omniscient: Router {
    /// The expected delay of the request about to be picked at each worker,
    /// from the simulator's true state: wait behind its work plus the
    /// request's own expected service time, ms (infinite when the worker
    /// is down or a black hole).
    fn truth(&mut self, expected_delay_ms: &[f64]);
}

/// Shortest expected delay from the simulator's true state.
#[derive(Debug, Clone)]
pub struct Oracle {
    expected_delay_ms: Vec<f64>,
    drained: Vec<bool>,
}

impl Oracle {
    /// Over `n ≥ 1` workers.
    pub fn new(n: usize) -> Self {
        Self {
            expected_delay_ms: vec![0.0; n.max(1)],
            drained: vec![false; n.max(1)],
        }
    }
}

impl Router for Oracle {
    fn pick(&mut self, _req: &PickRequest<'_>, rng: &mut ChaCha8Rng) -> Pick {
        let d = &self.expected_delay_ms;
        let best = d.iter().copied().fold(f64::INFINITY, f64::min);
        let tied: Vec<usize> = (0..d.len()).filter(|&i| d[i] == best).collect();
        // Every worker down: any (the request is refused and retried).
        let worker = if tied.is_empty() {
            rng.random_range(0..d.len())
        } else {
            tied[rng.random_range(0..tied.len())]
        };
        Pick {
            worker,
            decision_id: None,
        }
    }

    fn outcome(&mut self, _o: &Outcome<'_>) {}

    /// A drained worker is out of the oracle's choice as it is out of
    /// every other arm's.
    fn drain(&mut self, worker: usize, drained: bool, _now_ms: f64) {
        if let Some(d) = self.drained.get_mut(worker) {
            *d = drained;
        }
    }
}

impl Omniscient for Oracle {
    fn truth(&mut self, expected_delay_ms: &[f64]) {
        self.expected_delay_ms.clear();
        self.expected_delay_ms.extend_from_slice(expected_delay_ms);
        for (d, &out) in self.expected_delay_ms.iter_mut().zip(&self.drained) {
            if out {
                *d = f64::INFINITY;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn picks_the_shortest_expected_delay_ties_at_random() {
        let mut o = Oracle::new(4);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        o.truth(&[3.0, 1.5, f64::INFINITY, 2.0]);
        for _ in 0..50 {
            assert_eq!(o.pick(&PickRequest::test_get(0.0), &mut rng).worker, 1);
        }
        o.truth(&[1.0, 4.0, 1.0, f64::INFINITY]);
        let mut seen = [0u32; 4];
        for _ in 0..400 {
            seen[o.pick(&PickRequest::test_get(0.0), &mut rng).worker] += 1;
        }
        assert_eq!((seen[1], seen[3]), (0, 0));
        assert!(seen[0] > 150 && seen[2] > 150, "{seen:?}");
        // All down: still a pick in range.
        o.truth(&[f64::INFINITY; 4]);
        assert!(o.pick(&PickRequest::test_get(0.0), &mut rng).worker < 4);
    }
}
