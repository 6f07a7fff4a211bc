//! `service-embedded`: the service's decision made inside each router by
//! the embedded balancer (`scorer-balancer`), fed by the service's view.
//!
//! - Every router links its own [`Balancer`], with the service's
//!   configuration and the shipped model: with `routers` > 1 there is one
//!   balancer per router, which knows its own picks and outcomes at once.
//! - The routers share their load through the service: every
//!   `DEFAULT_LOAD_REPORT_MS` each reports its outstanding picks (reaching
//!   the service one network crossing later), and the service's view of
//!   the others' outstanding picks reaches each router one crossing after
//!   it left ([`Router::load_tick`]).
//! - A pick is `Balancer::pick` with every worker as a candidate and the
//!   request's type and timeout; the simulator charges its measured time
//!   ([`crate::embedded_calibration`]).
//! - Outcomes reach the router's balancer at once.
//! - A drain (the operator's override on the service) reaches every
//!   balancer as the view's override table, at once (the service's view
//!   stream checks for changed overrides every 5 ms).
//! - Telemetry reaches every balancer as a view delta
//!   ([`scorer_engine::view::View`]), after the simulator's view-stream
//!   delay, carrying its age since the service accepted it.
//!
//! Simulated time is the balancers' monotonic clock, as for the other
//! service arms.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use rand_chacha::ChaCha8Rng;
use scorer_balancer::{Balancer, BalancerConfig, PickSource};
use scorer_core::scoring::{RequestContext, RequestType};
use scorer_core::telemetry::Snapshot;
use scorer_engine::api::ScoreRequest;
use scorer_engine::config::Config;
use scorer_engine::overrides::{OverrideKind, WorkerOverride};
use scorer_engine::view::{View, ViewKind, ViewWorker, WorkerLoad};
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
    /// Per router: its load reports in flight to the service (arrival
    /// time, outstanding picks), oldest first.
    in_flight: Vec<VecDeque<(f64, Vec<WorkerLoad>)>>,
    /// Per router: its latest report the service has.
    board: Vec<Vec<WorkerLoad>>,
    /// The workers the operator has drained on the service.
    drained: std::collections::BTreeSet<usize>,
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
                // Ids from 0: a simulated run is reproducible to the id.
                let mut bc = BalancerConfig::new(format!("router-{r}"));
                bc.first_decision_seq = 0;
                Balancer::new(config.clone(), bc)
                    .map(|b| b.with_models(models.clone()))
                    .map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<_>, _>>()?;
        let routers = balancers.len();
        Ok(Self {
            balancers,
            req: ScoreRequest::new("k", (0..n).map(worker_id).collect()),
            seq: 0,
            in_flight: vec![VecDeque::new(); routers],
            board: vec![Vec::new(); routers],
            drained: std::collections::BTreeSet::new(),
        })
    }

    fn balancer(&self, router: usize) -> &Balancer {
        &self.balancers[router.min(self.balancers.len() - 1)]
    }
}

/// An empty view delta `seq` for balancer `b`, in its configuration.
fn delta(b: &Balancer, seq: u64) -> View {
    View {
        kind: ViewKind::Delta,
        seq,
        config_hash: b.engine().config_hash().to_string(),
        model_version: None,
        workers: Vec::new(),
        load: None,
        overrides: None,
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

    fn drain(&mut self, worker: usize, drained: bool, now_ms: f64) {
        if drained {
            self.drained.insert(worker);
        } else {
            self.drained.remove(&worker);
        }
        let table: Vec<WorkerOverride> = self
            .drained
            .iter()
            .map(|&w| WorkerOverride {
                worker_id: worker_id(w),
                kind: OverrideKind::Drain,
                weight: None,
                reason: "evaluation: drain fault".to_owned(),
                set_by: "operator".to_owned(),
                age_ms: 0,
                remaining_ms: None,
            })
            .collect();
        for b in &self.balancers {
            let mut view = delta(b, self.seq);
            view.overrides = Some(table.clone());
            let _ = b.apply_view(&view, mono(now_ms), wall(now_ms));
        }
        self.seq += 1;
    }

    fn view(&mut self, batch: &[Snapshot], now_ms: f64, age_ms: f64) {
        let age_ms = age_ms.max(0.0).round() as u64;
        for b in &self.balancers {
            let mut view = delta(b, self.seq);
            view.workers = batch
                .iter()
                .map(|s| ViewWorker {
                    snapshot: s.clone(),
                    age_ms,
                })
                .collect();
            // The simulator's snapshots are valid; a refusal is counted.
            let _ = b.apply_view(&view, mono(now_ms), wall(now_ms));
            b.tick(mono(now_ms));
        }
        self.seq += 1;
    }

    fn load_tick(&mut self, now_ms: f64, one_way_ms: f64) {
        if self.balancers.len() < 2 {
            return;
        }
        // The view leaving the service now reaches the routers one crossing
        // later: it holds the reports that had arrived by then.
        let sent_ms = now_ms - one_way_ms;
        for (r, b) in self.balancers.iter().enumerate() {
            self.in_flight[r].push_back((now_ms + one_way_ms, b.outstanding()));
            while self.in_flight[r]
                .front()
                .is_some_and(|(at, _)| *at <= sent_ms)
            {
                if let Some((_, report)) = self.in_flight[r].pop_front() {
                    self.board[r] = report;
                }
            }
        }
        for (r, b) in self.balancers.iter().enumerate() {
            let mut others: BTreeMap<&str, u32> = BTreeMap::new();
            for (_, report) in self.board.iter().enumerate().filter(|(o, _)| *o != r) {
                for l in report {
                    *others.entry(&l.worker_id).or_default() += l.outstanding;
                }
            }
            let load = others
                .into_iter()
                .map(|(w, outstanding)| WorkerLoad {
                    worker_id: w.to_owned(),
                    outstanding,
                })
                .collect();
            let mut view = delta(b, self.seq);
            view.load = Some(load);
            let _ = b.apply_view(&view, mono(now_ms), wall(now_ms));
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
    fn a_routers_picks_reach_the_others_as_backlog_two_crossings_later() {
        use rand::SeedableRng;
        let cfg = Config::default();
        let hub = Arc::new(ModelHub::unloaded(&cfg.model, Arc::new(SystemClock::new())));
        let mut arm = EmbeddedRouter::new(2, 2, &cfg, &hub).expect("valid");
        let snaps: Vec<Snapshot> = (0..2)
            .map(|i| {
                let mut s = Snapshot::new(worker_id(i), crate::policies::WALL_EPOCH_MS);
                s.cpu_usage = 0.1;
                s
            })
            .collect();
        arm.view(&snaps, 0.0, 0.0);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let ask = PickRequest {
            now_ms: 1.0,
            key: "user:1:profile",
            op: Op::Get,
            timeout_ms: 100.0,
            router: 0,
        };
        let picked = arm.pick(&ask, &mut rng).worker;
        let backlog = |arm: &EmbeddedRouter| {
            let slot = arm.balancers[1].engine().registry().get(&worker_id(picked));
            slot.expect("known").evidence().snapshot().unseen_backlog
        };
        // Reported at 2 ms, at the service at 3 ms: the view reaching the
        // routers at 3 ms left the service at 2 ms, without it; the one
        // reaching them at 4 ms left at 3 ms, with it.
        arm.load_tick(2.0, 1.0);
        arm.load_tick(3.0, 1.0);
        assert_eq!(backlog(&arm), 0.0);
        arm.load_tick(4.0, 1.0);
        assert_eq!(backlog(&arm), 1.0);
        // Router 0 is not told its own load.
        let own = arm.balancers[0].engine().registry().get(&worker_id(picked));
        assert_eq!(
            own.expect("known").evidence().snapshot().unseen_backlog,
            0.0
        );
    }

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
