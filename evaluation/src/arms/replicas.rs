//! `service-replicas`: the service run as N replicas sharing one view over
//! a message bus, each replica the in-process [`Engine`] of the `service`
//! arm ([`ServiceRouter`]).
//!
//! - Router `r` calls replica `r % N`, and pays what a `service` call
//!   pays: the round trip, queueing at its replica's own `scorer_cores`
//!   cores, the calibrated in-service time ([`crate::sim::remote`]).
//! - Every replica gets every worker's report: the agents publish on the
//!   bus, so a report arrives `telemetry_delay_ms` plus one bus hop after
//!   the snapshot.
//! - Every `load_interval_ms` each replica publishes its outstanding picks
//!   per worker as a gauge ([`super::load_gauges`]); one bus hop later the
//!   others apply the sum of the gauges they heard as the other deciders'
//!   load, as of when those were sent, as an embedded balancer applies
//!   its view's load (the service's replicas publish theirs on
//!   `scorer.replica_load.<replica>`, on change and every 250 ms).
//! - With [`ReplicaSet::sharing_routed_keys`] each gauge also carries the
//!   keys its replica routed since its last, which the others' routing
//!   indexes learn, as the routers' do from the service's view stream.
//! - Nothing else is shared: each replica learns only its own routers'
//!   outcomes, and decides with its own pending picks.
//! - An operator's drain reaches every replica at once.
//!
//! One bus hop is the median of the calibration
//! ([`crate::bus_calibration`]). With one replica there is no bus: the arm
//! is the `service` arm.

use rand_chacha::ChaCha8Rng;
use scorer_core::telemetry::Snapshot;
use scorer_engine::Engine;

use super::load_gauges::LoadGauges;
use super::service::{ModelSpread, Remote, ServiceRouter};
use super::service_ids::{mono, parse_worker};
use crate::router::{Outcome, Pick, PickRequest, Router};

/// Replicas of the `service-replicas` arm.
pub const DEFAULT_REPLICAS: usize = 3;

/// The `service-replicas` arm.
pub struct ReplicaSet {
    replicas: Vec<ServiceRouter>,
    gauges: LoadGauges,
    workers: usize,
    bus_one_way_ms: f64,
    routed_keys: bool,
    count_deciders: bool,
}

impl std::fmt::Debug for ReplicaSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaSet")
            .field("replicas", &self.replicas.len())
            .field("bus_one_way_ms", &self.bus_one_way_ms)
            .finish()
    }
}

impl ReplicaSet {
    /// `replicas` over `workers` workers, sharing over a bus whose hop
    /// takes `bus_one_way_ms`; `None` without a replica.
    pub fn new(replicas: Vec<ServiceRouter>, workers: usize, bus_one_way_ms: f64) -> Option<Self> {
        if replicas.is_empty() {
            return None;
        }
        Some(Self {
            gauges: LoadGauges::new(replicas.len(), bus_one_way_ms),
            replicas,
            workers,
            bus_one_way_ms,
            routed_keys: false,
            count_deciders: false,
        })
    }

    /// Each gauge also carries the keys its replica routed since its last
    /// (each replica built [`ServiceRouter::with_routed_outbox`]), and the
    /// others' routing indexes learn them, as the routers' do from the
    /// view stream: every replica knows where every key went.
    #[must_use]
    pub fn sharing_routed_keys(mut self) -> Self {
        self.routed_keys = true;
        self
    }

    /// Each replica counts the peers whose gauges it hears as deciders on
    /// the pool ([`Engine::set_routers_sharing`]), as an embedded balancer
    /// counts the routers its view names: the model's correction, common
    /// to every replica, is then held back, as for many deciders.
    #[must_use]
    pub fn counting_deciders(mut self) -> Self {
        self.count_deciders = true;
        self
    }

    /// Replica `k`'s engine (for inspection in tests).
    pub fn engine(&self, k: usize) -> &Engine {
        self.replicas[k.min(self.replicas.len() - 1)].engine()
    }

    fn replica(&mut self, router: usize) -> &mut ServiceRouter {
        let n = self.replicas.len();
        &mut self.replicas[router % n]
    }

    /// Every gauge that reached its peers by `now_ms` is applied: each
    /// replica that heard one takes the others' load per worker, as of
    /// when it was sent.
    fn hear(&mut self, now_ms: f64) {
        let (heard, routed) = self.gauges.deliver(now_ms);
        for (from, keys) in routed {
            let peers = self.replicas.iter().enumerate().filter(|(k, _)| *k != from);
            for (_, r) in peers {
                for (hash, worker, at_ms) in &keys {
                    r.engine().learn_routing(*hash, worker, mono(*at_ms));
                }
            }
        }
        for k in heard {
            let Some((load, sent_ms, counted)) = self.gauges.others(k, now_ms, self.workers) else {
                continue;
            };
            let engine = self.replicas[k].engine();
            for slot in engine.registry().slots() {
                let w = parse_worker(&slot.view().worker_id);
                let n = w.and_then(|w| load.get(w)).copied().unwrap_or(0);
                slot.evidence().on_others(n, mono(sent_ms));
            }
            if self.count_deciders {
                engine.set_routers_sharing(counted.saturating_add(1));
            }
        }
    }

    /// Replica `k`'s outstanding picks per worker.
    fn outstanding(&self, k: usize) -> Vec<u32> {
        let mut load = vec![0u32; self.workers];
        for slot in self.replicas[k].engine().registry().slots() {
            if let Some(n) = parse_worker(&slot.view().worker_id).and_then(|w| load.get_mut(w)) {
                *n = slot.evidence().snapshot().outstanding;
            }
        }
        load
    }
}

impl Router for ReplicaSet {
    fn pick(&mut self, req: &PickRequest<'_>, rng: &mut ChaCha8Rng) -> Pick {
        self.hear(req.now_ms);
        self.replica(req.router).pick(req, rng)
    }

    fn outcome(&mut self, o: &Outcome<'_>) {
        self.hear(o.now_ms);
        self.replica(o.router).outcome(o);
    }

    fn drain(&mut self, worker: usize, drained: bool, now_ms: f64) {
        self.hear(now_ms);
        for r in &mut self.replicas {
            r.drain(worker, drained, now_ms);
        }
    }
}

impl Remote for ReplicaSet {
    fn telemetry(&mut self, batch: &[Snapshot], now_ms: f64) {
        self.hear(now_ms);
        for r in &mut self.replicas {
            r.telemetry(batch, now_ms);
        }
    }

    fn fallbacks(&self) -> u64 {
        self.replicas.iter().map(Remote::fallbacks).sum()
    }

    fn set_decision_id_prefix(&mut self, prefix: &str) {
        if let [one] = self.replicas.as_mut_slice() {
            one.set_decision_id_prefix(prefix);
            return;
        }
        for (k, r) in self.replicas.iter_mut().enumerate() {
            r.set_decision_id_prefix(&format!("{prefix}{k}-"));
        }
    }

    fn model_spread(&self) -> Option<ModelSpread> {
        let mut all = ModelSpread::default();
        for s in self.replicas.iter().filter_map(Remote::model_spread) {
            let decisions = all.decisions + s.decisions;
            all.mean_ratio = (all.mean_ratio * all.decisions as f64
                + s.mean_ratio * s.decisions as f64)
                / decisions as f64;
            all.max_ratio = all.max_ratio.max(s.max_ratio);
            all.decisions = decisions;
        }
        (all.decisions > 0).then_some(all)
    }

    /// Replica 0's: every replica scores on the same reports.
    fn self_check_samples(&self) -> Option<Vec<(f64, f64)>> {
        self.replicas[0].self_check_samples()
    }

    fn replicas(&self) -> usize {
        self.replicas.len()
    }

    fn bus_one_way_ms(&self) -> f64 {
        self.bus_one_way_ms
    }

    fn publish_load(&mut self, replica: usize, now_ms: f64) {
        if replica >= self.replicas.len() {
            return;
        }
        self.hear(now_ms);
        let load = self.outstanding(replica);
        let routed = if self.routed_keys {
            let now = mono(now_ms);
            let engine = self.replicas[replica].engine();
            let keys = engine.take_routed(now).into_iter();
            keys.filter_map(|r| Some((r.hash()?, r.worker_id, now_ms - r.age_ms as f64)))
                .collect()
        } else {
            Vec::new()
        };
        self.gauges.publish(replica, load, routed, now_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arms::Arm;
    use crate::router::Op;
    use crate::scenario::Scenario;
    use rand::SeedableRng;
    use scorer_engine::config::Config;

    /// In-service time multiplier that saturates one scorer core.
    const SLOW_SCORING: f64 = 10.0;

    fn service(workers: usize) -> ServiceRouter {
        ServiceRouter::shipped(workers, None, Config::default())
    }

    fn set(replicas: usize, workers: usize, bus_ms: f64) -> ReplicaSet {
        let all = (0..replicas).map(|_| service(workers)).collect();
        ReplicaSet::new(all, workers, bus_ms).expect("replicas")
    }

    fn others(s: &ReplicaSet, k: usize, worker: usize) -> (f64, u64) {
        let slot = s.engine(k).registry().get(&format!("w{worker}"));
        let e = slot.expect("known").evidence().snapshot();
        (e.others_backlog, e.others_at_ms)
    }

    #[test]
    fn a_replica_sees_anothers_load_only_one_bus_hop_after_it_was_published() {
        let mut s = set(2, 2, 0.5);
        let snaps: Vec<Snapshot> = (0..2)
            .map(|i| {
                let mut s = Snapshot::new(format!("w{i}"), crate::arms::service_ids::WALL_EPOCH_MS);
                s.cpu_usage = 0.1;
                s
            })
            .collect();
        s.telemetry(&snaps, 0.0);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let ask = PickRequest {
            now_ms: 1.0,
            key: "user:1:profile",
            op: Op::Get,
            timeout_ms: 100.0,
            router: 0,
        };
        let picked = s.pick(&ask, &mut rng).worker;
        assert_eq!(s.outstanding(0)[picked], 1);
        // Router 0's replica publishes at 2 ms; replica 1 has not heard it
        // at 2.4 ms, and has at 2.5 ms, as of 2 ms.
        s.publish_load(0, 2.0);
        s.hear(2.4);
        assert_eq!(others(&s, 1, picked).0, 0.0);
        s.hear(2.5);
        assert_eq!(others(&s, 1, picked), (1.0, mono(2.0)));
        // The publisher is not told its own load, and nothing else moved:
        // replica 1 has no pick of its own outstanding.
        assert_eq!(others(&s, 0, picked).0, 0.0);
        assert_eq!(s.outstanding(1), [0, 0]);
    }

    #[test]
    fn one_replica_is_the_service_arm() {
        let mut sc = Scenario::preset("many-routers", 6, 1.5).expect("a preset");
        sc.routers = 4;
        let run = |arm: Box<dyn Remote + Send>| {
            let mut arm = Arm::Remote(arm);
            crate::sim::simulate(&sc, &mut arm, 3)
        };
        let one = run(Box::new(set(1, 6, 0.5)));
        let svc = run(Box::new(service(6)));
        assert!(svc.latencies_ms.len() > 1_000, "{}", svc.latencies_ms.len());
        assert_eq!(one.window_picks, svc.window_picks);
        assert_eq!(one.latencies_ms, svc.latencies_ms);
        assert_eq!(one.decision_ms, svc.decision_ms);
    }

    #[test]
    fn three_replicas_queue_at_three_times_the_cores() {
        // One scorer core, scoring made slow enough that one replica's
        // core is the bottleneck: three replicas, each with a core of its
        // own, answer far sooner.
        let mut sc = Scenario::preset("many-routers", 6, 1.5).expect("a preset");
        sc.routers = 6;
        sc.scorer_cores = 1;
        sc.scorer_service_scale = SLOW_SCORING;
        let mean_decision_ms = |replicas: usize| {
            let mut arm = Arm::Remote(Box::new(set(replicas, 6, 0.05)));
            let rec = crate::sim::simulate(&sc, &mut arm, 3);
            assert!(rec.latencies_ms.len() > 1_000);
            rec.decision_ms.iter().sum::<f64>() / rec.decision_ms.len() as f64
        };
        let (one, three) = (mean_decision_ms(1), mean_decision_ms(3));
        assert!(three < 0.5 * one, "one replica {one} ms, three {three} ms");
    }
}
