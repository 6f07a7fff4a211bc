//! `service-embedded`: the service's decision made inside each router by
//! the embedded balancer (`scorer-balancer`), fed by the service's view.
//!
//! - Every router links its own [`Balancer`], with the service's
//!   configuration and the shipped model: with `routers` > 1 there is one
//!   balancer per router, and each knows only its own picks and outcomes
//!   (routers do not report back to the service yet, so they do not share
//!   their load).
//! - A pick is `Balancer::pick` with every worker as a candidate and the
//!   request's type and timeout; the simulator charges its measured time
//!   ([`crate::embedded_calibration`]).
//! - Outcomes reach the router's balancer at once.
//! - Telemetry reaches every balancer as a view delta
//!   ([`scorer_engine::view::View`]), after the simulator's view-stream
//!   delay, carrying its age since the service accepted it.
//!
//! Simulated time is the balancers' monotonic clock, as for the other
//! service arms.

use std::sync::Arc;

use rand_chacha::ChaCha8Rng;
use scorer_balancer::{Balancer, BalancerConfig, PickSource};
use scorer_core::scoring::{RequestContext, RequestType};
use scorer_core::telemetry::Snapshot;
use scorer_engine::api::ScoreRequest;
use scorer_engine::config::Config;
use scorer_engine::view::{View, ViewKind, ViewWorker};
use scorer_model::ModelHub;

use crate::embedded_calibration::EmbeddedPickCalibration;
use crate::policies::{mono, parse_worker, wall, worker_id};
use crate::router::{Op, Outcome, Pick, PickRequest, Router};

/// The `service-embedded` arm.
#[derive(Debug)]
pub struct EmbeddedRouter {
    balancers: Vec<Balancer>,
    req: ScoreRequest,
    seq: u64,
}

impl EmbeddedRouter {
    /// `routers` balancers over workers `w0..w{n-1}`, each deciding with
    /// `config` (validated) and `models`.
    ///
    /// # Errors
    /// A configuration the balancer refuses.
    pub fn new(
        n: usize,
        routers: usize,
        config: &Config,
        models: &Arc<ModelHub>,
    ) -> Result<Self, String> {
        let balancers = (0..routers.max(1))
            .map(|r| {
                Balancer::new(config.clone(), BalancerConfig::new(format!("router-{r}")))
                    .map(|b| b.with_models(models.clone()))
                    .map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            balancers,
            req: ScoreRequest::new("k", (0..n).map(worker_id).collect()),
            seq: 0,
        })
    }

    fn balancer(&self, router: usize) -> &Balancer {
        &self.balancers[router.min(self.balancers.len() - 1)]
    }
}

impl Router for EmbeddedRouter {
    fn pick(&mut self, req: &PickRequest<'_>, rng: &mut ChaCha8Rng) -> Pick {
        req.key.clone_into(&mut self.req.key);
        self.req.context = Some(RequestContext {
            request_type: Some(match req.op {
                Op::Get => RequestType::Get,
                Op::Put => RequestType::Put,
            }),
            timeout_ms: Some(req.timeout_ms as u64),
            ..RequestContext::default()
        });
        let b = self.balancer(req.router);
        match b.pick(&self.req, mono(req.now_ms), rng) {
            Ok(p) => Pick {
                worker: parse_worker(&p.worker).unwrap_or(0),
                decision_id: Some(p.decision_id),
            },
            // Never for this fixed, valid request; a router would go uniform.
            Err(_) => Pick {
                worker: 0,
                decision_id: None,
            },
        }
    }

    fn outcome(&mut self, o: &Outcome<'_>) {
        let Some(id) = o.decision_id else { return };
        let b = self.balancer(o.router);
        let _ = b.outcome(
            id,
            &worker_id(o.worker),
            o.latency_ms,
            o.success,
            mono(o.now_ms),
        );
    }

    fn view(&mut self, batch: &[Snapshot], now_ms: f64, age_ms: f64) {
        let age_ms = age_ms.max(0.0).round() as u64;
        for b in &self.balancers {
            let view = View {
                kind: ViewKind::Delta,
                seq: self.seq,
                config_hash: b.engine().config_hash().to_string(),
                model_version: None,
                workers: batch
                    .iter()
                    .map(|s| ViewWorker {
                        snapshot: s.clone(),
                        age_ms,
                    })
                    .collect(),
            };
            // The simulator's snapshots are valid; a refusal is counted.
            let _ = b.apply_view(&view, mono(now_ms), wall(now_ms));
            b.tick(mono(now_ms));
        }
        self.seq += 1;
    }

    fn fallbacks(&self) -> u64 {
        let uniform = |b: &Balancer| b.stats(0).uniform_picks;
        self.balancers.iter().map(uniform).sum()
    }

    fn embedded(&self) -> Option<&'static EmbeddedPickCalibration> {
        Some(EmbeddedPickCalibration::shipped())
    }
}

/// Picks that rested on each source, summed over the routers (for tests).
pub fn picks_by_source(r: &EmbeddedRouter) -> [(PickSource, u64); 3] {
    let sum = |f: fn(&scorer_balancer::BalancerStats) -> u64| {
        r.balancers.iter().map(|b| f(&b.stats(0))).sum::<u64>()
    };
    let blackout = sum(|s| s.blackout_picks);
    let uniform = sum(|s| s.uniform_picks);
    let view = sum(|s| s.picks) - blackout - uniform;
    [
        (PickSource::View, view),
        (PickSource::Blackout, blackout),
        (PickSource::Uniform, uniform),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;
    use scorer_core::clock::SystemClock;

    #[test]
    fn each_router_decides_on_the_view_and_every_pick_pays_its_measured_time() {
        let mut sc = Scenario::preset("homogeneous", 8, 5.0).expect("a preset");
        sc.routers = 3;
        let cfg = Config::default();
        let hub = Arc::new(ModelHub::unloaded(&cfg.model, Arc::new(SystemClock::new())));
        let mut arm = EmbeddedRouter::new(8, sc.routers, &cfg, &hub).expect("valid");
        let rec = crate::sim::simulate(&sc, &mut arm, 7);
        let [(_, view), (_, blackout), (_, uniform)] = picks_by_source(&arm);
        assert_eq!(blackout, 0);
        // Uniform only until the first view arrives, then every pick rests on it.
        assert!(view > 0 && uniform * 100 < view, "{view} {uniform}");
        for b in &arm.balancers {
            assert!(
                b.stats(0).picks > 0,
                "every router picks with its own balancer"
            );
        }
        let cal = EmbeddedPickCalibration::shipped();
        let (lo, hi) = (cal.pick_at_us(0.0) / 1e3, cal.pick_at_us(1.0) / 1e3);
        assert_eq!(rec.decision_ms.len() as u64, view + uniform);
        assert!(
            rec.decision_ms
                .iter()
                .all(|d| (lo - 1e-9..=hi + 1e-9).contains(d)),
            "{lo}..{hi}"
        );
    }
}
