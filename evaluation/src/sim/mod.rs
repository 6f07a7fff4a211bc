//! Discrete-event simulator of a KV cluster, driving one policy per run.
//!
//! - Clients: Poisson arrivals at `load` × healthy capacity
//!   ([`Scenario::arrival_rate_per_ms`]); each request is a GET or a PUT
//!   (PUTs cost more), small or large, on a Zipf-popular key.
//! - Each attempt is routed by the policy, queued FIFO at the worker, and
//!   served with a log-normal service time (see [`worker`]). The client
//!   gives up after `timeout_ms` and retries at most `max_retries` times on
//!   a fresh pick; a crashed worker refuses at once (also retried).
//! - Every `report_interval_ms` each live worker's snapshot, derived from
//!   its simulated state, goes to the policy (the service arms ingest it).
//! - Faults start and stop as scheduled events; a memtable
//!   ([`Fault::Memtable`]) is a function of time, read when a PUT starts
//!   and when a snapshot is taken.
//! - With `routers` > 1, each request is issued by one router drawn
//!   uniformly from the workload stream (so every policy sees the same
//!   assignment); its retries and outcomes belong to the same router.
//!
//! - A service arm ([`Arm::Remote`]) pays for its decision as a router
//!   does: the request reaches its worker only after the score call's
//!   network round trip, queueing at the simulated scorer's cores and
//!   in-service time ([`remote::RemoteScorer`]); its outcomes reach the
//!   service in batches ([`remote::Outbox`]) half a round trip later, its
//!   telemetry `telemetry_delay_ms` after the snapshot. A baseline decides
//!   inside the router at no cost and learns its outcomes at once. A
//!   request's latency always counts from its arrival at the router.
//! - With several service replicas ([`crate::arms::replicas`]), router
//!   `r` calls replica `r % replicas`, which has cores and a queue of its
//!   own; telemetry reaches every replica one bus hop later than a single
//!   service, and each replica publishes its load gauge on the bus every
//!   `load_interval_ms`, at its own phase.
//! - An embedded arm ([`Arm::Embedded`]) decides inside the router and
//!   learns its outcomes at once, but holds each request for a pick time
//!   drawn from its calibration, and sees telemetry through the service's
//!   view stream: `telemetry_delay_ms` to the service, the stream's
//!   coalescing window and one network crossing later.
//! - The `oracle` ([`Arm::Oracle`]) is told every worker's true
//!   expected delay before each pick.
//!
//! Four RNG streams from one seed: the workload (arrivals, ops, keys,
//! sizes — identical for every policy), service times, the policy's own
//! choices and the scorer's in-service times. Time is simulated: nothing sleeps, a run is a pure function of
//! (scenario, policy, seed).

mod arrivals;
pub mod cache;
#[cfg(test)]
mod cache_tests;
mod calls;
#[cfg(test)]
mod cost_tests;
pub mod dist;
pub mod event;
mod faults;
pub mod herding;
mod outcome;
mod record;
pub mod remote;
mod request_cost;
pub mod worker;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::arms::Arm;
use crate::arms::service_ids::{WALL_EPOCH_MS, worker_id};
use crate::calibration::HttpScoreCalibration;
use crate::embedded_calibration::EmbeddedPickCalibration;
use crate::router::{Op, PickRequest};
use crate::scenario::{Fault, Scenario};
use cache::{Key, KeySpace, WorkerCache};
use dist::{exponential, lognormal_unit_mean};
use event::{Event, EventQueue};
use herding::Herding;
pub use record::{CacheRecord, RunRecord};
use remote::{InFlight, Outbox, PendingOutcome, RemoteScorer};
use worker::{BACKGROUND_BASE, Job, SimWorker};

#[derive(Debug, Clone)]
struct Request {
    start_ms: f64,
    /// When the latest attempt asked for its pick, ms.
    asked_ms: f64,
    attempts: u32,
    op: Op,
    key: Key,
    large: bool,
    router: usize,
    /// The attempt whose score answer the router is waiting for.
    awaiting: Option<u32>,
}

#[derive(Debug, Clone)]
struct Attempt {
    req: usize,
    worker: usize,
    start_ms: f64,
    decision_id: Option<String>,
    done: bool,
    router: usize,
    /// Whether the worker's cache held the key (a GET with caches).
    cache_hit: Option<bool>,
}

/// One simulation run of `arm` on `scenario` with `seed`.
pub struct Sim<'a> {
    sc: &'a Scenario,
    arm: &'a mut Arm,
    q: EventQueue,
    workers: Vec<SimWorker>,
    ids: Vec<String>,
    reqs: Vec<Request>,
    attempts: Vec<Attempt>,
    workload_rng: ChaCha8Rng,
    service_rng: ChaCha8Rng,
    policy_rng: ChaCha8Rng,
    keys: KeySpace,
    mean_cost_ms: f64,
    next_background: usize,
    rec: RunRecord,
    remote: bool,
    embedded: Option<&'static EmbeddedPickCalibration>,
    pick_rng: ChaCha8Rng,
    scorer: RemoteScorer,
    outbox: Outbox,
    feedback_in_transit: Vec<Option<Vec<PendingOutcome>>>,
    telemetry_in_transit: Vec<Option<Vec<scorer_core::telemetry::Snapshot>>>,
    truth: Vec<f64>,
    herding: Herding,
    in_flight: InFlight,
    /// Each router's load-report and view-stream phases within the load
    /// interval, ms: real routers' clocks are not in step.
    load_phases: Vec<(f64, f64)>,
    /// Service replicas the routers' calls spread over (1: one service).
    replicas: usize,
    /// With several replicas: one hop on the bus they share over, ms.
    bus_one_way_ms: f64,
    /// With several replicas: each one's load-gauge phase within the load
    /// interval, ms.
    bus_phases: Vec<f64>,
}

impl<'a> Sim<'a> {
    /// A run ready to start.
    pub fn new(sc: &'a Scenario, arm: &'a mut Arm, seed: u64) -> Self {
        let n = sc.workers.len();
        let windows = (sc.duration_ms / sc.window_ms).ceil().max(1.0) as usize;
        let remote = matches!(arm, Arm::Remote(_));
        let (replicas, bus_one_way_ms) = match &*arm {
            Arm::Remote(r) => (r.replicas().max(1), r.bus_one_way_ms()),
            _ => (1, 0.0),
        };
        let embedded = match &*arm {
            Arm::Embedded(e) => Some(e.calibration()),
            _ => None,
        };
        let keys = KeySpace::new(sc);
        let mut workers = faults::workers(sc);
        let cache = sc.cache.as_ref().map(|c| {
            let capacity = |w: &SimWorker| w.spec.cache_keys.unwrap_or(c.capacity_keys);
            let top = keys.most_popular(workers.iter().map(capacity).max().unwrap_or(0));
            for w in &mut workers {
                let cap = capacity(w);
                let mut cache = WorkerCache::new(cap, c.policy);
                cache.prefill(&top[..cap.min(top.len())]);
                w.cache = Some(cache);
            }
            CacheRecord::new(n)
        });
        Self {
            sc,
            arm,
            q: EventQueue::new(),
            workers,
            ids: (0..n).map(worker_id).collect(),
            reqs: Vec::new(),
            attempts: Vec::new(),
            workload_rng: ChaCha8Rng::seed_from_u64(seed),
            service_rng: ChaCha8Rng::seed_from_u64(seed ^ 0x5e41_1ce0),
            policy_rng: ChaCha8Rng::seed_from_u64(seed ^ 0x0b0c_1e5a),
            keys,
            mean_cost_ms: sc.mean_cost_ms(),
            next_background: BACKGROUND_BASE,
            rec: RunRecord {
                window_picks: vec![vec![0; n]; windows],
                window_ms: sc.window_ms,
                duration_ms: sc.duration_ms,
                cache,
                ..RunRecord::default()
            },
            remote,
            embedded,
            pick_rng: ChaCha8Rng::seed_from_u64(seed ^ 0xe3be_dded),
            scorer: RemoteScorer::new(sc, HttpScoreCalibration::shipped(), seed ^ 0x5c0_4e11)
                .with_replicas(replicas),
            outbox: Outbox::new(sc),
            feedback_in_transit: Vec::new(),
            telemetry_in_transit: Vec::new(),
            truth: vec![0.0; n],
            herding: Herding::default(),
            in_flight: InFlight::new(sc.routers, n),
            load_phases: {
                let mut r = ChaCha8Rng::seed_from_u64(seed ^ 0x10ad_9a5e);
                let interval = sc.load_interval_ms;
                (0..sc.routers)
                    .map(|_| {
                        let report = r.random::<f64>() * interval;
                        (report, r.random::<f64>() * interval)
                    })
                    .collect()
            },
            replicas,
            bus_one_way_ms,
            bus_phases: if replicas > 1 {
                let mut r = ChaCha8Rng::seed_from_u64(seed ^ 0xb05_9a5e);
                (0..replicas)
                    .map(|_| r.random::<f64>() * sc.load_interval_ms)
                    .collect()
            } else {
                Vec::new()
            },
        }
    }

    /// Run to completion: arrivals stop at `duration_ms`, then every
    /// outstanding attempt finishes or times out.
    pub fn run(mut self) -> RunRecord {
        self.q.push(0.0, Event::Telemetry);
        if self.embedded.is_some() && self.sc.routers > 1 {
            for (router, &(report, view)) in self.load_phases.iter().enumerate() {
                self.q.push(report, Event::LoadReport { router });
                self.q.push(view, Event::LoadView { router });
            }
        }
        for (replica, &phase) in self.bus_phases.iter().enumerate() {
            self.q.push(phase, Event::BusPublish { replica });
        }
        let first = exponential(&mut self.workload_rng, 1.0 / self.sc.arrival_rate_per_ms());
        self.q.push(first, Event::Arrival);
        faults::schedule(self.sc, &mut self.q);
        while let Some((t, ev)) = self.q.pop() {
            self.handle(t, ev);
        }
        self.rec.fallbacks = self.arm.fallbacks() + self.rec.scorer_errors;
        self.rec.herding = std::mem::take(&mut self.herding).mean_routers();
        self.rec
    }

    fn handle(&mut self, t: f64, ev: Event) {
        match ev {
            Event::Arrival => {
                if t >= self.sc.duration_ms {
                    return;
                }
                let r = &mut self.workload_rng;
                let op = if r.random::<f64>() < self.sc.put_fraction {
                    Op::Put
                } else {
                    Op::Get
                };
                let large = r.random::<f64>() < self.sc.large_fraction;
                let key = self.keys.draw(r, t);
                // Drawn only with several routers, so one-router runs keep
                // their workload stream.
                let router = if self.sc.routers > 1 {
                    r.random_range(0..self.sc.routers)
                } else {
                    0
                };
                let next = t + exponential(r, 1.0 / self.sc.arrival_rate_per_ms());
                self.q.push(next, Event::Arrival);
                self.reqs.push(Request {
                    start_ms: t,
                    asked_ms: t,
                    attempts: 0,
                    op,
                    key,
                    large,
                    router,
                    awaiting: None,
                });
                self.dispatch(self.reqs.len() - 1, t);
            }
            Event::Retry { req } => self.dispatch(req, t),
            Event::ScoreCall { .. }
            | Event::Decide { .. }
            | Event::ScoreTimeout { .. }
            | Event::Answer { .. } => self.on_call(t, ev),
            Event::FeedbackFlush { router } => {
                let batch = self.outbox.tick(router);
                self.send_feedback(batch, t);
            }
            Event::FeedbackArrive { .. } | Event::TelemetryArrive { .. } => self.on_arrival(t, ev),
            Event::JobDone { worker, attempt } => {
                let (was, next) = self.workers[worker].finish(attempt, t);
                if !was {
                    return;
                }
                if let Some((id, service)) = next {
                    self.q.push(
                        t + service,
                        Event::JobDone {
                            worker,
                            attempt: id,
                        },
                    );
                }
                if attempt < BACKGROUND_BASE && !self.attempts[attempt].done {
                    self.complete(attempt, t, true);
                }
            }
            Event::Refused { attempt } => {
                if !self.attempts[attempt].done {
                    self.rec.refused += 1;
                    self.complete(attempt, t, false);
                }
            }
            Event::Timeout { attempt } => {
                if !self.attempts[attempt].done {
                    self.rec.timeouts += 1;
                    self.complete(attempt, t, false);
                }
            }
            Event::LoadReport { router } => {
                if let Arm::Embedded(e) = &mut *self.arm {
                    e.load_report(router, t, self.scorer.one_way_ms());
                }
                self.next_load_event(t, Event::LoadReport { router });
            }
            Event::BusPublish { replica } => {
                if let Arm::Remote(r) = &mut *self.arm {
                    r.publish_load(replica, t);
                }
                self.next_load_event(t, Event::BusPublish { replica });
            }
            Event::LoadView { router } => {
                if let Arm::Embedded(e) = &mut *self.arm {
                    e.load_view(router, t, self.scorer.one_way_ms());
                }
                self.next_load_event(t, Event::LoadView { router });
            }
            Event::Telemetry => {
                let wall = WALL_EPOCH_MS + t as u64;
                let bits = self.sc.cache.as_ref().map_or(0, |c| c.digest_bits_per_key);
                let batch: Vec<_> = (0..self.workers.len())
                    .filter_map(|i| {
                        let w = &mut self.workers[i];
                        let mut s = w.snapshot(&self.ids[i], t, wall, self.mean_cost_ms)?;
                        s.cache_digest = w
                            .cache
                            .as_ref()
                            .filter(|_| bits > 0)
                            .map(|c| c.digest(&self.keys, bits));
                        Some(s)
                    })
                    .collect();
                let batch = faults::lie(self.sc, batch, t);
                if !batch.is_empty() {
                    if self.embedded.is_some() {
                        self.telemetry_in_transit.push(Some(batch));
                        self.q.push(
                            t + self.sc.telemetry_delay_ms + self.view_stream_ms(),
                            Event::TelemetryArrive {
                                batch: self.telemetry_in_transit.len() - 1,
                            },
                        );
                    } else if self.replicas > 1 {
                        // The agents publish on the bus: one hop more.
                        self.telemetry_in_transit.push(Some(batch));
                        self.q.push(
                            t + self.sc.telemetry_delay_ms + self.bus_one_way_ms,
                            Event::TelemetryArrive {
                                batch: self.telemetry_in_transit.len() - 1,
                            },
                        );
                    } else if self.remote && self.sc.telemetry_delay_ms > 0.0 {
                        self.telemetry_in_transit.push(Some(batch));
                        self.q.push(
                            t + self.sc.telemetry_delay_ms,
                            Event::TelemetryArrive {
                                batch: self.telemetry_in_transit.len() - 1,
                            },
                        );
                    } else if let Arm::Remote(r) = &mut *self.arm {
                        r.telemetry(&batch, t);
                    }
                }
                let next = t + self.sc.report_interval_ms;
                if next < self.sc.duration_ms {
                    self.q.push(next, Event::Telemetry);
                }
            }
            Event::Fault { fault, start } => self.fault(fault, start, t),
            Event::Compaction { fault, start } => {
                if let Fault::Compaction {
                    worker,
                    put_factor,
                    get_factor,
                    ..
                } = self.sc.faults[fault]
                {
                    self.workers[worker].compaction = start.then_some((put_factor, get_factor));
                }
            }
            Event::Background { fault } => {
                if let Fault::Burst {
                    worker,
                    to_ms,
                    load,
                    ..
                } = self.sc.faults[fault]
                {
                    if t >= to_ms {
                        return;
                    }
                    let base = self.mean_cost_ms
                        * lognormal_unit_mean(&mut self.service_rng, self.sc.sigma);
                    self.next_background += 1;
                    let job = Job {
                        id: self.next_background,
                        enqueued_ms: t,
                        base_cost_ms: base,
                        op: Op::Get,
                    };
                    if let Some((id, service)) = self.workers[worker].enqueue(job, t) {
                        self.q.push(
                            t + service,
                            Event::JobDone {
                                worker,
                                attempt: id,
                            },
                        );
                    }
                    let rate = load * self.sc.capacity_per_ms(worker);
                    let next = t + exponential(&mut self.service_rng, 1.0 / rate);
                    self.q.push(next, Event::Background { fault });
                }
            }
        }
    }

    fn dispatch(&mut self, req: usize, t: f64) {
        let r = &mut self.reqs[req];
        r.attempts += 1;
        r.asked_ms = t;
        if r.attempts > 1 {
            self.rec.retries += 1;
        }
        if self.remote {
            // The score call crosses to the scorer; the pick comes back
            // later, or the router stops waiting for it.
            let call = r.attempts;
            r.awaiting = Some(call);
            let timeout_ms = self.sc.scorer_timeout_ms;
            self.q
                .push(t + self.scorer.one_way_ms(), Event::ScoreCall { req, call });
            self.q
                .push(t + timeout_ms, Event::ScoreTimeout { req, call });
            return;
        }
        let pick = self.decide(req, t);
        if let Some(cal) = self.embedded {
            // The request leaves once the pick is made.
            let cost_ms = cal.pick_at_us(self.pick_rng.random::<f64>()) / 1_000.0;
            let (worker, decision_id) = (pick.worker, pick.decision_id);
            let answer = Event::Answer {
                req,
                call: self.reqs[req].attempts,
                worker,
                decision_id,
            };
            self.q.push(t + cost_ms, answer);
            return;
        }
        self.send(req, pick.worker, pick.decision_id, t);
    }

    /// The next tick of a router's load clock, one load interval after `t`.
    fn next_load_event(&mut self, t: f64, ev: Event) {
        let next = t + self.sc.load_interval_ms;
        if next < self.sc.duration_ms {
            self.q.push(next, ev);
        }
    }

    /// From the service accepting a report to the view reaching a router:
    /// the stream's coalescing window and one network crossing, ms.
    fn view_stream_ms(&self) -> f64 {
        scorer_engine::view::DEFAULT_COALESCE_MS as f64 + self.scorer.one_way_ms()
    }

    /// The policy picks a worker for `req` at `t`.
    fn decide(&mut self, req: usize, t: f64) -> crate::router::Pick {
        let r = &self.reqs[req];
        let (op, large, key_id, router) = (r.op, r.large, r.key, r.router);
        let key = self.keys.name(key_id);
        if matches!(self.arm, Arm::Oracle(_)) {
            // The oracle knows what each worker's cache holds.
            for (i, w) in self.workers.iter().enumerate() {
                let hit = w.cache.as_ref().map(|c| c.contains(key_id.id));
                let job = Job {
                    id: usize::MAX,
                    enqueued_ms: t,
                    base_cost_ms: self.mean_job_cost_ms(op, large, key_id.hot, hit),
                    op,
                };
                self.truth[i] = w.expected_delay_ms(&job, t);
            }
            if let Arm::Oracle(o) = &mut *self.arm {
                o.truth(&self.truth);
            }
        }
        let mut pick = self.arm.router().pick(
            &PickRequest {
                now_ms: t,
                key: &key,
                op,
                timeout_ms: self.sc.timeout_ms,
                router,
            },
            &mut self.policy_rng,
        );
        pick.worker = pick.worker.min(self.workers.len() - 1);
        let window = ((t / self.sc.window_ms) as usize).min(self.rec.window_picks.len() - 1);
        self.rec.window_picks[window][pick.worker] += 1;
        if self.sc.routers > 1 {
            self.herding.record(t, pick.worker, router);
        }
        pick
    }

    /// The router sends `req` to `worker` at `t`: a new attempt.
    fn send(&mut self, req: usize, worker: usize, decision_id: Option<String>, t: f64) {
        let (op, large, router, key) = {
            let r = &self.reqs[req];
            (r.op, r.large, r.router, r.key)
        };
        self.rec.attempts += 1;
        self.in_flight.sent(router, worker);
        let attempt = self.attempts.len();
        self.attempts.push(Attempt {
            req,
            worker,
            start_ms: t,
            decision_id,
            done: false,
            router,
            cache_hit: None,
        });
        self.q
            .push(t + self.sc.timeout_ms, Event::Timeout { attempt });
        if self.workers[worker].down {
            // Connection refused after a loopback round trip.
            self.q.push(t + 0.1, Event::Refused { attempt });
            return;
        }
        let hit = self.touch_cache(worker, op, key, large);
        if let (Some(h), Some(c)) = (hit, self.rec.cache.as_mut()) {
            c.record_window((t / self.sc.window_ms) as usize, worker, h);
        }
        self.attempts[attempt].cache_hit = hit;
        let base = self.mean_job_cost_ms(op, large, key.hot, hit)
            * lognormal_unit_mean(&mut self.service_rng, self.sc.sigma);
        let job = Job {
            id: attempt,
            enqueued_ms: t,
            base_cost_ms: base,
            op,
        };
        if let Some((id, service)) = self.workers[worker].enqueue(job, t) {
            self.q.push(
                t + service,
                Event::JobDone {
                    worker,
                    attempt: id,
                },
            );
        }
    }
}

/// Run `arm` on `scenario` with `seed`.
pub fn simulate(scenario: &Scenario, arm: &mut Arm, seed: u64) -> RunRecord {
    Sim::new(scenario, arm, seed).run()
}
