//! Round robin: worker `i mod n` for the `i`-th pick, blind to load.

use rand_chacha::ChaCha8Rng;

use crate::router::{Outcome, Pick, PickRequest, Router};

/// Rotation over `n` workers, starting at worker 0.
#[derive(Debug, Clone)]
pub struct RoundRobin {
    n: usize,
    next: usize,
}

impl RoundRobin {
    /// A rotation over `n ≥ 1` workers.
    pub fn new(n: usize) -> Self {
        Self {
            n: n.max(1),
            next: 0,
        }
    }
}

impl Router for RoundRobin {
    fn pick(&mut self, _req: &PickRequest<'_>, _rng: &mut ChaCha8Rng) -> Pick {
        let worker = self.next;
        self.next = (self.next + 1) % self.n;
        Pick {
            worker,
            decision_id: None,
        }
    }

    fn outcome(&mut self, _o: &Outcome<'_>) {}
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
