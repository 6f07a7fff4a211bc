//! Round robin: worker `i mod n` for the `i`-th pick, blind to load; over
//! the live endpoints when the operator has drained some.

use rand_chacha::ChaCha8Rng;

use super::Endpoints;
use crate::router::{Outcome, Pick, PickRequest, Router};

/// Rotation over `n` workers, starting at worker 0.
#[derive(Debug, Clone)]
pub struct RoundRobin {
    endpoints: Endpoints,
    next: usize,
}

impl RoundRobin {
    /// A rotation over `n ≥ 1` workers.
    pub fn new(n: usize) -> Self {
        Self {
            endpoints: Endpoints::new(n),
            next: 0,
        }
    }
}

impl Router for RoundRobin {
    fn pick(&mut self, _req: &PickRequest<'_>, _rng: &mut ChaCha8Rng) -> Pick {
        let live = self.endpoints.live();
        let at = self.next % live.len();
        let worker = live[at];
        self.next = (at + 1) % live.len();
        Pick {
            worker,
            decision_id: None,
        }
    }

    fn outcome(&mut self, _o: &Outcome<'_>) {}

    fn drain(&mut self, worker: usize, drained: bool, _now_ms: f64) {
        self.endpoints.set_drained(worker, drained);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::Op;
    use rand::SeedableRng;

    #[test]
    fn rotates_in_order() {
        let mut rr = RoundRobin::new(3);
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let req = PickRequest {
            now_ms: 0.0,
            key: "k",
            op: Op::Get,
            timeout_ms: 1.0,
            router: 0,
        };
        let picks: Vec<usize> = (0..7).map(|_| rr.pick(&req, &mut rng).worker).collect();
        assert_eq!(picks, vec![0, 1, 2, 0, 1, 2, 0]);
    }
}
