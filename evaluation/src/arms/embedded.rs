//! `service-embedded`: the service's decision made inside each router by
//! the embedded balancer (`scorer-balancer`), fed by the service's view.
//!
//! - Every router links its own [`Balancer`], with the service's
//!   configuration and the shipped model: with `routers` > 1 there is one
//!   balancer per router, which knows its own picks and outcomes at once.
//! - The routers share their load through the service: every
//!   `DEFAULT_LOAD_REPORT_MS` each reports its outstanding picks (reaching
//!   the service one network crossing later, [`EmbeddedRouter::load_report`]), and
//!   every `LOAD_INTERVAL_MS` its view stream carries the others' load,
//!   with its age at the service, when it changed, one crossing after it
//!   left ([`EmbeddedRouter::load_view`]). Once outcomes say hit or miss,
//!   each report also carries the keys the router routed since its last,
//!   and each view the keys the others routed since the last view. Each router's two clocks run at their
//!   own phases, as real routers' do.
//! - A pick is `Balancer::pick` with every worker as a candidate and the
//!   request's type and timeout; the simulator charges its measured time
//!   ([`crate::embedded_calibration`]).
//! - Outcomes reach the router's balancer at once.
//! - With a decision log, each router's decisions and outcomes reach it
//!   as a deployed router's do ([`super::embedded_log`]).
//! - A drain (the operator's override on the service) reaches every
//!   balancer as the view's override table, at once (the service's view
//!   stream checks for changed overrides every 5 ms).
//! - Telemetry reaches every balancer as a view delta
//!   ([`scorer_engine::view::View`]), after the simulator's view-stream
//!   delay, carrying its age since the service accepted it.
//!
//! Simulated time is the balancers' monotonic clock, as for the other
//! service arms.

use std::collections::VecDeque;
use std::sync::Arc;

use rand_chacha::ChaCha8Rng;
use scorer_balancer::{Balancer, BalancerConfig, PickSource};
use scorer_core::scoring::{RequestContext, RequestType};
use scorer_core::telemetry::Snapshot;
use scorer_engine::api::ScoreRequest;
use scorer_engine::config::Config;
use scorer_engine::overrides::{OverrideKind, WorkerOverride};
use scorer_engine::view::{RoutedKey, View, ViewKind, ViewWorker, WorkerLoad};
use scorer_log::DecisionLog;
use scorer_model::ModelHub;

use super::embedded_log::EmbeddedLog;
use super::service_ids::{mono, parse_worker, wall, worker_id};
use crate::embedded_calibration::EmbeddedPickCalibration;
use crate::router::{Op, Outcome, Pick, PickRequest, Router};

/// The `service-embedded` arm.
#[derive(Debug)]
pub struct EmbeddedRouter {
    balancers: Vec<Balancer>,
    req: ScoreRequest,
    seq: u64,
    workers: usize,
    /// Per router: its load reports in flight to the service, oldest first.
    in_flight: Vec<VecDeque<LoadReport>>,
    /// The service's load board.
    board: LoadBoard,
    /// Per router: the load last sent on its view stream.
    last_sent: Vec<Option<Vec<u32>>>,
    /// The workers the operator has drained on the service.
    drained: std::collections::BTreeSet<usize>,
    /// The routers' decision-log records, when the run keeps a log.
    log: Option<EmbeddedLog>,
}

impl EmbeddedRouter {
    /// `routers` balancers over workers `w0..w{n-1}`, each deciding with
    /// `config` (validated) and, when given, `models` (else on the rules
    /// alone), sending their decisions and outcomes to `log` when given.
    ///
    /// # Errors
    /// A configuration the balancer refuses.
    pub fn new(
        n: usize,
        routers: usize,
        config: &Config,
        models: Option<&Arc<ModelHub>>,
        log: Option<Arc<DecisionLog>>,
    ) -> Result<Self, String> {
        let log = log.map(|l| EmbeddedLog::new(l, routers, config));
        let balancers = (0..routers.max(1))
            .map(|r| {
                // Ids from 0: a simulated run is reproducible to the id.
                let mut bc = BalancerConfig::new(format!("router-{r}"));
                bc.first_decision_seq = 0;
                let mut b = Balancer::new(config.clone(), bc).map_err(|e| e.to_string())?;
                if let Some(m) = models {
                    b = b.with_models(m.clone());
                }
                if let Some(l) = &log {
                    b = b.with_records(l.buffer(r));
                }
                Ok(b)
            })
            .collect::<Result<Vec<_>, String>>()?;
        let routers = balancers.len();
        Ok(Self {
            balancers,
            req: ScoreRequest::new("k", (0..n).map(worker_id).collect()),
            seq: 0,
            workers: n,
            in_flight: vec![VecDeque::new(); routers],
            board: LoadBoard::new(routers, n),
            last_sent: vec![None; routers],
            drained: std::collections::BTreeSet::new(),
            log,
        })
    }

    /// Prefixes the decision ids this arm logs with `prefix` (the run's).
    pub fn set_decision_id_prefix(&mut self, prefix: &str) {
        if let Some(l) = &mut self.log {
            l.set_prefix(prefix);
        }
    }

    /// Hands every router's waiting records to the decision log (at the
    /// end of a run, before the log shuts down).
    pub fn flush_log(&self) {
        if let Some(l) = &self.log {
            for (r, b) in self.balancers.iter().enumerate() {
                l.flush(r, &b.config().router_id);
            }
        }
    }

    /// Before router `router` acts at `now_ms`: its records carry that
    /// time, and a full buffer goes on to the log.
    fn log_at(&self, router: usize, now_ms: f64) {
        if let Some(l) = &self.log {
            l.at(now_ms);
            let r = router.min(self.balancers.len() - 1);
            l.flush_full(r, &self.balancers[r].config().router_id);
        }
    }

    fn balancer(&self, router: usize) -> &Balancer {
        &self.balancers[router.min(self.balancers.len() - 1)]
    }

    /// A telemetry batch reaches every router's view at `now_ms`, `age_ms`
    /// after the service accepted it.
    pub fn view(&mut self, batch: &[Snapshot], now_ms: f64, age_ms: f64) {
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

    /// At `now_ms`, `router` reports its outstanding picks to the service,
    /// arriving `one_way_ms` later.
    pub fn load_report(&mut self, router: usize, now_ms: f64, one_way_ms: f64) {
        let Some(b) = self.balancers.get(router) else {
            return;
        };
        let mut load = vec![0u32; self.workers];
        for l in b.outstanding() {
            if let Some(w) = parse_worker(&l.worker_id).filter(|w| *w < self.workers) {
                load[w] = l.outstanding;
            }
        }
        let routed = b
            .routed()
            .into_iter()
            .filter_map(|r| Some((r.hash()?, r.worker_id, now_ms - r.age_ms as f64)))
            .collect();
        self.in_flight[router].push_back(LoadReport {
            arrive_ms: now_ms + one_way_ms,
            load,
            routed,
        });
    }

    /// At `now_ms`, the service's view of the other routers' load, which
    /// left it `one_way_ms` ago, reaches `router`.
    pub fn load_view(&mut self, router: usize, now_ms: f64, one_way_ms: f64) {
        if router >= self.balancers.len() || self.balancers.len() < 2 {
            return;
        }
        // The event reaching the router now left the service one crossing
        // ago, with the reports that had arrived by then (as the service's
        // view stream sends it: only when the load changed).
        let sent_ms = now_ms - one_way_ms;
        self.board.settle(&mut self.in_flight, sent_ms);
        let routed = self.board.routed_since(router, sent_ms);
        let Some((load, age_ms, counted)) = self.board.others(router, sent_ms) else {
            return;
        };
        if self.last_sent[router].as_ref() == Some(&load) && routed.is_empty() {
            return;
        }
        let b = &self.balancers[router];
        let mut view = delta(b, self.seq);
        view.load = Some(
            load.iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(w, &outstanding)| WorkerLoad {
                    worker_id: worker_id(w),
                    outstanding,
                })
                .collect(),
        );
        view.load_age_ms = Some(age_ms.max(0.0).round() as u64);
        view.load_routers = Some(counted);
        view.routed = (!routed.is_empty()).then_some(routed);
        let _ = b.apply_view(&view, mono(now_ms), wall(now_ms));
        self.last_sent[router] = Some(load);
        self.seq += 1;
    }

    /// Picks that went uniform (no view yet), over every router.
    pub fn fallbacks(&self) -> u64 {
        let uniform = |b: &Balancer| b.stats(0).uniform_picks;
        self.balancers.iter().map(uniform).sum()
    }

    /// What a pick costs: the simulator holds each request for a time
    /// drawn from it before the request leaves.
    pub fn calibration(&self) -> &'static EmbeddedPickCalibration {
        EmbeddedPickCalibration::shipped()
    }
}

/// A router's load report on its way to the service.
#[derive(Debug, Clone)]
struct LoadReport {
    arrive_ms: f64,
    /// Outstanding picks per worker.
    load: Vec<u32>,
    /// The keys routed since the previous report: hash, worker, when.
    routed: Vec<(u64, String, f64)>,
}

/// The simulated service's load board: every router's latest report that
/// has arrived, with its arrival time, and their sum per worker; and the
/// keys every router routed, each view stream's place in them.
#[derive(Debug)]
struct LoadBoard {
    reports: Vec<Option<(f64, Vec<u32>)>>,
    total: Vec<u32>,
    /// Router, key hash, worker, when routed.
    routed: Vec<(usize, u64, String, f64)>,
    cursors: Vec<usize>,
}

impl LoadBoard {
    fn new(routers: usize, workers: usize) -> Self {
        Self {
            reports: vec![None; routers],
            total: vec![0; workers],
            routed: Vec::new(),
            cursors: vec![0; routers],
        }
    }

    /// Takes in every report that has arrived by `by_ms`.
    fn settle(&mut self, in_flight: &mut [VecDeque<LoadReport>], by_ms: f64) {
        for (r, queue) in in_flight.iter_mut().enumerate() {
            while queue.front().is_some_and(|rep| rep.arrive_ms <= by_ms) {
                let Some(report) = queue.pop_front() else {
                    break;
                };
                if let Some((_, old)) = &self.reports[r] {
                    for (t, o) in self.total.iter_mut().zip(old) {
                        *t -= o;
                    }
                }
                for (t, n) in self.total.iter_mut().zip(&report.load) {
                    *t += n;
                }
                self.routed
                    .extend(report.routed.into_iter().map(|(h, w, at)| (r, h, w, at)));
                self.reports[r] = Some((report.arrive_ms, report.load));
            }
        }
    }

    /// The keys the other routers routed since `router`'s last view, with
    /// their ages at `now_ms` (as the service's view stream sends them).
    fn routed_since(&mut self, router: usize, now_ms: f64) -> Vec<RoutedKey> {
        let from = self.cursors[router];
        self.cursors[router] = self.routed.len();
        self.routed[from..]
            .iter()
            .filter(|(r, ..)| *r != router)
            .take(scorer_engine::view::MAX_ROUTED_PER_VIEW)
            .map(|(_, h, w, at)| {
                RoutedKey::new(*h, w.clone(), (now_ms - at).max(0.0).round() as u64)
            })
            .collect()
    }

    /// Every router's load but `router`'s at `now_ms`, its age as the
    /// service states it (the mean time since each counted report
    /// arrived, ms) and the reports counted; `None` before any other router
    /// has reported.
    fn others(&self, router: usize, now_ms: f64) -> Option<(Vec<u32>, f64, u32)> {
        let (mut counted, mut age_sum) = (0usize, 0.0);
        for (r, report) in self.reports.iter().enumerate() {
            if let Some((at, _)) = report
                && r != router
            {
                counted += 1;
                age_sum += now_ms - at;
            }
        }
        if counted == 0 {
            return None;
        }
        let mut load = self.total.clone();
        if let Some((_, own)) = &self.reports[router] {
            for (t, o) in load.iter_mut().zip(own) {
                *t -= o;
            }
        }
        Some((load, age_sum / counted as f64, counted as u32))
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
        load_age_ms: None,
        load_routers: None,
        routed: None,
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
        self.log_at(req.router, req.now_ms);
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
        self.log_at(o.router, o.now_ms);
        let b = self.balancer(o.router);
        let _ = b.outcome_with_cache_hit(
            id,
            &worker_id(o.worker),
            o.latency_ms,
            o.success,
            o.cache_hit,
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
        let mut arm = EmbeddedRouter::new(2, 2, &cfg, Some(&hub), None).expect("valid");
        let snaps: Vec<Snapshot> = (0..2)
            .map(|i| {
                let mut s = Snapshot::new(worker_id(i), crate::arms::service_ids::WALL_EPOCH_MS);
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
        let others = |arm: &EmbeddedRouter, r: usize| {
            let slot = arm.balancers[r].engine().registry().get(&worker_id(picked));
            let e = slot.expect("known").evidence().snapshot();
            (e.others_backlog, e.others_at_ms)
        };
        // Reported at 2 ms, at the service at 3 ms: the view reaching router
        // 1 at 3 ms left the service at 2 ms, without it; the one reaching
        // it at 6 ms left at 5 ms, with it, 2 ms after it arrived.
        arm.load_report(0, 2.0, 1.0);
        arm.load_view(1, 3.0, 1.0);
        assert_eq!(others(&arm, 1).0, 0.0);
        arm.load_report(1, 4.0, 1.0);
        arm.load_view(1, 6.0, 1.0);
        assert_eq!(others(&arm, 1), (1.0, mono(6.0) - 2));
        // Router 0 is not told its own load.
        arm.load_view(0, 6.0, 1.0);
        assert_eq!(others(&arm, 0).0, 0.0);
    }

    #[test]
    fn each_router_decides_on_the_view_and_every_pick_pays_its_measured_time() {
        let mut sc = Scenario::preset("homogeneous", 8, 5.0).expect("a preset");
        sc.routers = 3;
        let cfg = Config::default();
        let hub = Arc::new(ModelHub::unloaded(&cfg.model, Arc::new(SystemClock::new())));
        let arm = EmbeddedRouter::new(8, sc.routers, &cfg, Some(&hub), None).expect("valid");
        let mut arm = crate::arms::Arm::Embedded(Box::new(arm));
        let rec = crate::sim::simulate(&sc, &mut arm, 7);
        let crate::arms::Arm::Embedded(arm) = arm else {
            unreachable!("an embedded arm")
        };
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
