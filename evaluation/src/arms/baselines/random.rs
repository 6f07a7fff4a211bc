//! Uniform random choice, blind to load (Envoy's `RANDOM` policy).

use rand_chacha::ChaCha8Rng;

use super::Endpoints;
use crate::router::{Outcome, Pick, PickRequest, Router};

/// Uniform choice over `n` workers.
#[derive(Debug, Clone)]
pub struct Random {
    endpoints: Endpoints,
}

impl Random {
    /// Uniform over `n ≥ 1` workers.
    pub fn new(n: usize) -> Self {
        Self {
            endpoints: Endpoints::new(n),
        }
    }
}

impl Router for Random {
    fn pick(&mut self, _req: &PickRequest<'_>, rng: &mut ChaCha8Rng) -> Pick {
        Pick {
            worker: self.endpoints.uniform(rng),
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
    fn roughly_uniform() {
        let mut r = Random::new(4);
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let req = PickRequest {
            now_ms: 0.0,
            key: "k",
            op: Op::Get,
            timeout_ms: 1.0,
            router: 0,
        };
        let mut c = [0u32; 4];
        for _ in 0..40_000 {
            c[r.pick(&req, &mut rng).worker] += 1;
        }
        assert!(c.iter().all(|&x| (9_500..10_500).contains(&x)), "{c:?}");
    }
}
