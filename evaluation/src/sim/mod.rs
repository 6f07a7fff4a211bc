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
//! Three RNG streams from one seed: the workload (arrivals, ops, keys,
//! sizes — identical for every policy), service times, and the policy's own
//! choices. Time is simulated: nothing sleeps, a run is a pure function of
//! (scenario, policy, seed).

pub mod dist;
pub mod event;
pub mod worker;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::policies::{WALL_EPOCH_MS, worker_id};
use crate::router::{Op, Outcome, PickRequest, Router};
use crate::scenario::{Fault, Scenario};
use dist::{Zipf, exponential, lognormal_unit_mean};
use event::{Event, EventQueue};
use worker::{BACKGROUND_BASE, Job, Memtable, SimWorker};

/// Everything a run records; [`crate::metrics`] summarises it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunRecord {
    /// Client-observed latency of every finished request (success or final
    /// failure), first attempt to answer, ms.
    pub latencies_ms: Vec<f64>,
    /// Requests that failed after all retries.
    pub failed: u64,
    /// Attempts sent.
    pub attempts: u64,
    /// Attempts that hit the client timeout.
    pub timeouts: u64,
    /// Attempts refused by a down worker.
    pub refused: u64,
    /// Retries sent.
    pub retries: u64,
    /// Picks per window per worker (`window_ms` windows).
    pub window_picks: Vec<Vec<u32>>,
    /// Window length, ms.
    pub window_ms: f64,
    /// Picks for which the policy fell back to a uniform choice.
    pub fallbacks: u64,
}

#[derive(Debug, Clone)]
struct Request {
    start_ms: f64,
    attempts: u32,
    op: Op,
    key_rank: usize,
    large: bool,
    router: usize,
}

#[derive(Debug, Clone)]
struct Attempt {
    req: usize,
    worker: usize,
    start_ms: f64,
    decision_id: Option<String>,
    done: bool,
    router: usize,
}

/// One simulation run of `router` on `scenario` with `seed`.
pub struct Sim<'a> {
    sc: &'a Scenario,
    router: &'a mut dyn Router,
    q: EventQueue,
    workers: Vec<SimWorker>,
    ids: Vec<String>,
    reqs: Vec<Request>,
    attempts: Vec<Attempt>,
    workload_rng: ChaCha8Rng,
    service_rng: ChaCha8Rng,
    policy_rng: ChaCha8Rng,
    zipf: Zipf,
    mean_cost_ms: f64,
    next_background: usize,
    rec: RunRecord,
}

impl<'a> Sim<'a> {
    /// A run ready to start.
    pub fn new(sc: &'a Scenario, router: &'a mut dyn Router, seed: u64) -> Self {
        let n = sc.workers.len();
        let windows = (sc.duration_ms / sc.window_ms).ceil().max(1.0) as usize;
        Self {
            sc,
            router,
            q: EventQueue::new(),
            workers: workers(sc),
            ids: (0..n).map(worker_id).collect(),
            reqs: Vec::new(),
            attempts: Vec::new(),
            workload_rng: ChaCha8Rng::seed_from_u64(seed),
            service_rng: ChaCha8Rng::seed_from_u64(seed ^ 0x5e41_1ce0),
            policy_rng: ChaCha8Rng::seed_from_u64(seed ^ 0x0b0c_1e5a),
            zipf: Zipf::new(sc.keys, sc.zipf_s),
            mean_cost_ms: sc.mean_cost_ms(),
            next_background: BACKGROUND_BASE,
            rec: RunRecord {
                window_picks: vec![vec![0; n]; windows],
                window_ms: sc.window_ms,
                ..RunRecord::default()
            },
        }
    }

    /// Run to completion: arrivals stop at `duration_ms`, then every
    /// outstanding attempt finishes or times out.
    pub fn run(mut self) -> RunRecord {
        self.q.push(0.0, Event::Telemetry);
        let first = exponential(&mut self.workload_rng, 1.0 / self.sc.arrival_rate_per_ms());
        self.q.push(first, Event::Arrival);
        for (i, f) in self.sc.faults.iter().enumerate() {
            match f {
                Fault::Compaction {
                    first_ms,
                    period_ms,
                    duration_ms,
                    ..
                } => {
                    let mut t = *first_ms;
                    while t < self.sc.duration_ms && *period_ms > 0.0 {
                        self.q.push(
                            t,
                            Event::Compaction {
                                fault: i,
                                start: true,
                            },
                        );
                        self.q.push(
                            t + duration_ms,
                            Event::Compaction {
                                fault: i,
                                start: false,
                            },
                        );
                        t += period_ms;
                    }
                }
                _ => {
                    if let Some((from, to)) = f.window_ms() {
                        self.q.push(
                            from,
                            Event::Fault {
                                fault: i,
                                start: true,
                            },
                        );
                        self.q.push(
                            to,
                            Event::Fault {
                                fault: i,
                                start: false,
                            },
                        );
                    }
                }
            }
        }
        while let Some((t, ev)) = self.q.pop() {
            self.handle(t, ev);
        }
        self.rec.fallbacks = self.router.fallbacks();
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
                let key_rank = self.zipf.sample(r);
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
                    attempts: 0,
                    op,
                    key_rank,
                    large,
                    router,
                });
                self.dispatch(self.reqs.len() - 1, t);
            }
            Event::Retry { req } => self.dispatch(req, t),
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
            Event::Telemetry => {
                let wall = WALL_EPOCH_MS + t as u64;
                let batch: Vec<_> = (0..self.workers.len())
                    .filter_map(|i| {
                        self.workers[i].snapshot(&self.ids[i], t, wall, self.mean_cost_ms)
                    })
                    .collect();
                if !batch.is_empty() {
                    self.router.telemetry(&batch, t);
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

    fn fault(&mut self, fault: usize, start: bool, t: f64) {
        match self.sc.faults[fault] {
            Fault::Slow { worker, factor, .. } => {
                self.workers[worker].slow_factor = if start { factor } else { 1.0 };
            }
            Fault::Crash { worker, .. } => {
                if start {
                    for id in self.workers[worker].crash(t) {
                        if id < BACKGROUND_BASE {
                            self.q.push(t, Event::Refused { attempt: id });
                        }
                    }
                } else {
                    self.workers[worker].down = false;
                }
            }
            Fault::Zombie { worker, .. } => self.workers[worker].zombie = start,
            Fault::Burst { .. } => {
                if start {
                    self.q.push(t, Event::Background { fault });
                }
            }
            Fault::Compaction { .. } | Fault::Memtable { .. } => {}
        }
    }

    fn dispatch(&mut self, req: usize, t: f64) {
        let r = &mut self.reqs[req];
        r.attempts += 1;
        if r.attempts > 1 {
            self.rec.retries += 1;
        }
        let (op, large, rank, router) = (r.op, r.large, r.key_rank, r.router);
        let key = format!("user:{rank}:profile");
        let pick = self.router.pick(
            &PickRequest {
                now_ms: t,
                key: &key,
                op,
                timeout_ms: self.sc.timeout_ms,
                router,
            },
            &mut self.policy_rng,
        );
        let worker = pick.worker.min(self.workers.len() - 1);
        let window = ((t / self.sc.window_ms) as usize).min(self.rec.window_picks.len() - 1);
        self.rec.window_picks[window][worker] += 1;
        self.rec.attempts += 1;
        let attempt = self.attempts.len();
        self.attempts.push(Attempt {
            req,
            worker,
            start_ms: t,
            decision_id: pick.decision_id,
            done: false,
            router,
        });
        self.q
            .push(t + self.sc.timeout_ms, Event::Timeout { attempt });
        if self.workers[worker].down {
            // Connection refused after a loopback round trip.
            self.q.push(t + 0.1, Event::Refused { attempt });
            return;
        }
        let kind = match op {
            Op::Get => self.sc.get_cost_ms,
            Op::Put => self.sc.put_cost_ms,
        };
        let size = if large { self.sc.large_factor } else { 1.0 };
        let base = kind * size * lognormal_unit_mean(&mut self.service_rng, self.sc.sigma);
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

    /// Attempt `attempt` ended at `t` (success, timeout or refusal).
    fn complete(&mut self, attempt: usize, t: f64, success: bool) {
        let a = &mut self.attempts[attempt];
        a.done = true;
        let (req, worker, router) = (a.req, a.worker, a.router);
        let latency = t - a.start_ms;
        let id = a.decision_id.take();
        self.router.outcome(&Outcome {
            worker,
            decision_id: id.as_deref(),
            latency_ms: latency,
            success,
            now_ms: t,
            router,
        });
        let r = &self.reqs[req];
        if success {
            self.rec.latencies_ms.push(t - r.start_ms);
        } else if r.attempts <= self.sc.max_retries {
            self.q.push(t, Event::Retry { req });
        } else {
            self.rec.failed += 1;
            self.rec.latencies_ms.push(t - r.start_ms);
        }
    }
}

/// The scenario's workers, idle, with their memtables (a
/// [`Fault::Memtable`] is a property of its worker from the start: no event
/// turns it on or off).
fn workers(sc: &Scenario) -> Vec<SimWorker> {
    let mut ws: Vec<SimWorker> = sc.workers.iter().cloned().map(SimWorker::new).collect();
    for f in &sc.faults {
        if let Fault::Memtable {
            worker,
            offset_ms,
            period_ms,
            peak_bytes,
            put_slowdown_per_gib,
        } = *f
            && let Some(w) = ws.get_mut(worker)
        {
            w.memtable = Some(Memtable {
                offset_ms,
                period_ms,
                peak_bytes: peak_bytes as f64,
                put_slowdown_per_gib,
            });
        }
    }
    ws
}

/// Run `router` on `scenario` with `seed`.
pub fn simulate(scenario: &Scenario, router: &mut dyn Router, seed: u64) -> RunRecord {
    Sim::new(scenario, router, seed).run()
}
