//! Many independent routers in front of the same workers.
//!
//! A mesh of sidecars (Envoy, Linkerd) balances per client: each sidecar
//! keeps its own in-flight counts and latency estimates from its own picks
//! and outcomes and never sees another sidecar's. [`PerRouter`] models that
//! for a baseline: one independent instance per router, each request and
//! each outcome going to the instance of the router that issued it
//! ([`PickRequest::router`], [`Outcome::router`]). The service arms are not
//! wrapped: one service (one [`scorer_engine::Engine`]) takes every router's
//! picks and outcomes, which is the point of a central scorer (see
//! [`super::registry::build`]).

use rand_chacha::ChaCha8Rng;

use crate::router::{Outcome, Pick, PickRequest, Router};

/// One independent policy instance per router.
pub struct PerRouter {
    instances: Vec<Box<dyn Router + Send>>,
}

impl std::fmt::Debug for PerRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerRouter")
            .field("routers", &self.instances.len())
            .finish()
    }
}

impl PerRouter {
    /// Routers `0..instances.len()`, router `i` served by `instances[i]`.
    ///
    /// # Panics
    /// With no instance (a scenario has at least one router).
    pub fn new(instances: Vec<Box<dyn Router + Send>>) -> Self {
        assert!(!instances.is_empty(), "at least one router");
        Self { instances }
    }

    /// Number of routers.
    pub fn routers(&self) -> usize {
        self.instances.len()
    }

    fn instance(&mut self, router: usize) -> &mut (dyn Router + Send) {
        // Out-of-range indices (never produced by the simulator) go to the
        // last router rather than panicking in the middle of a run.
        let i = router.min(self.instances.len() - 1);
        self.instances[i].as_mut()
    }
}

impl Router for PerRouter {
    fn pick(&mut self, req: &PickRequest<'_>, rng: &mut ChaCha8Rng) -> Pick {
        self.instance(req.router).pick(req, rng)
    }

    fn outcome(&mut self, o: &Outcome<'_>) {
        self.instance(o.router).outcome(o);
    }

    fn drain(&mut self, worker: usize, drained: bool, now_ms: f64) {
        for r in &mut self.instances {
            r.drain(worker, drained, now_ms);
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::arms::baselines::p2c_least_request::P2cLeastRequest;
    use crate::router::Op;

    fn req(router: usize) -> PickRequest<'static> {
        PickRequest {
            now_ms: 0.0,
            key: "k",
            op: Op::Get,
            timeout_ms: 100.0,
            router,
        }
    }

    fn p2c_routers(k: usize, n: usize) -> PerRouter {
        PerRouter::new(
            (0..k)
                .map(|_| Box::new(P2cLeastRequest::new(n)) as Box<dyn Router + Send>)
                .collect(),
        )
    }

    #[test]
    fn one_routers_in_flight_is_invisible_to_another() {
        // Two workers: P2C least-request always compares both, so a table
        // that holds router A's 2-vs-1 outstanding picks sends the next
        // request to the lighter worker; router B's own table is empty, so
        // its pick is a fresh instance's (ties go to the first drawn).
        let mut b_took_the_heavier = 0;
        for seed in 0..32 {
            let mut mesh = p2c_routers(2, 2);
            let mut shared = P2cLeastRequest::new(2);
            let mut rng_mesh = ChaCha8Rng::seed_from_u64(seed);
            let mut rng_shared = ChaCha8Rng::seed_from_u64(seed);
            let mut a_counts = [0u32; 2];
            for _ in 0..3 {
                let w = mesh.pick(&req(0), &mut rng_mesh).worker;
                assert_eq!(w, shared.pick(&req(0), &mut rng_shared).worker);
                a_counts[w] += 1;
            }
            let (heavier, lighter) = if a_counts[0] > a_counts[1] {
                (0, 1)
            } else {
                (1, 0)
            };
            assert_eq!(a_counts[heavier], 2, "{a_counts:?}");
            let mut rng_fresh = rng_mesh.clone();
            let b = mesh.pick(&req(1), &mut rng_mesh).worker;
            let fresh = P2cLeastRequest::new(2).pick(&req(1), &mut rng_fresh).worker;
            assert_eq!(b, fresh, "seed {seed}: router B acts as a fresh instance");
            let s = shared.pick(&req(1), &mut rng_shared).worker;
            assert_eq!(s, lighter, "seed {seed}: one shared table sees A's picks");
            b_took_the_heavier += u32::from(b == heavier);
        }
        // About half the ties go to the worker A has loaded.
        assert!(
            (8..=24).contains(&b_took_the_heavier),
            "{b_took_the_heavier}"
        );
    }

    #[test]
    fn outcomes_go_to_the_router_that_picked() {
        // Router B's outcome for worker 0 must not release router A's pick.
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut mesh = p2c_routers(2, 2);
        let w = mesh.pick(&req(0), &mut rng).worker;
        mesh.outcome(&Outcome {
            worker: w,
            decision_id: None,
            latency_ms: 1.0,
            success: true,
            now_ms: 1.0,
            router: 1,
            cache_hit: None,
        });
        // A still has `w` outstanding: its next pick is the other worker.
        assert_eq!(mesh.pick(&req(0), &mut rng).worker, 1 - w);
        assert_eq!(mesh.routers(), 2);
    }
}
