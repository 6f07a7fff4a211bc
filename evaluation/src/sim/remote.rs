//! What a decision made by a remote scorer costs, in simulated time.
//!
//! - [`RemoteScorer`]: the HTTP scorer as a server in the simulation,
//!   `scorer_cores` cores and one FIFO queue shared by every router. A call
//!   crosses half the round trip, waits for a core, is handled for a time
//!   drawn from the calibration ([`crate::calibration`]) and crosses back.
//!   With several service replicas each has `scorer_cores` cores and a
//!   queue of its own.
//! - [`Outbox`]: each router's buffered outcomes, sent as one batch at the
//!   next tick of its `feedback_flush_ms` clock or as soon as
//!   `feedback_batch_max` are waiting, arriving half a round trip later.
//! - [`InFlight`]: each router's own requests in flight per worker, from
//!   which it picks by itself when the scorer does not answer in time.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::calibration::HttpScoreCalibration;
use crate::scenario::Scenario;

/// The simulated scorer's cores and queue (per replica).
#[derive(Debug, Clone)]
pub struct RemoteScorer {
    /// Per replica: when each of its cores is next free, ms.
    free_at_ms: Vec<Vec<f64>>,
    one_way_ms: f64,
    scale: f64,
    calibration: &'static HttpScoreCalibration,
    rng: ChaCha8Rng,
}

impl RemoteScorer {
    /// The scorer of `sc`, drawing in-service times from `calibration` with
    /// its own random stream `seed`.
    pub fn new(sc: &Scenario, calibration: &'static HttpScoreCalibration, seed: u64) -> Self {
        Self {
            free_at_ms: vec![vec![0.0; sc.scorer_cores.max(1)]],
            one_way_ms: sc.scorer_round_trip_us / 2_000.0,
            scale: sc.scorer_service_scale,
            calibration,
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// `replicas` service replicas (at least one), each with the
    /// scenario's `scorer_cores` cores and its own queue. The in-service
    /// times come from the one random stream, in admission order.
    #[must_use]
    pub fn with_replicas(mut self, replicas: usize) -> Self {
        let cores = self.free_at_ms[0].len();
        self.free_at_ms = vec![vec![0.0; cores]; replicas.max(1)];
        self
    }

    /// One network crossing between a router and the scorer, ms.
    pub fn one_way_ms(&self) -> f64 {
        self.one_way_ms
    }

    /// A call that reaches replica `replica` (0 with one) at `arrive_ms`:
    /// when one of its cores starts on it (the earliest free core, so calls
    /// are served in arrival order when admitted in arrival order) and how
    /// long it holds the core, ms.
    pub fn admit(&mut self, replica: usize, arrive_ms: f64) -> (f64, f64) {
        let service_ms =
            self.calibration.in_service_at_us(self.rng.random::<f64>()) * self.scale / 1_000.0;
        let last = self.free_at_ms.len() - 1;
        let free = &mut self.free_at_ms[replica.min(last)];
        let core = (0..free.len())
            .min_by(|&a, &b| free[a].total_cmp(&free[b]))
            .unwrap_or(0);
        let start_ms = arrive_ms.max(free[core]);
        free[core] = start_ms + service_ms;
        (start_ms, service_ms)
    }
}

/// Each router's own requests in flight, per worker.
#[derive(Debug, Clone)]
pub struct InFlight {
    counts: Vec<Vec<u32>>,
}

impl InFlight {
    /// `routers` routers over `workers` workers, nothing in flight.
    pub fn new(routers: usize, workers: usize) -> Self {
        Self {
            counts: vec![vec![0; workers]; routers.max(1)],
        }
    }

    /// `router` sent a request to `worker`.
    pub fn sent(&mut self, router: usize, worker: usize) {
        if let Some(n) = self.slot(router, worker) {
            *n += 1;
        }
    }

    /// A request of `router` to `worker` ended.
    pub fn done(&mut self, router: usize, worker: usize) {
        if let Some(n) = self.slot(router, worker) {
            *n = n.saturating_sub(1);
        }
    }

    /// The router's own pick without the scorer, as the testbed's router
    /// makes it: P2C least-request over its in-flight requests (of two
    /// distinct random workers, the one with fewer; ties: the first).
    pub fn fallback_pick(&self, router: usize, rng: &mut ChaCha8Rng) -> usize {
        let counts = &self.counts[router.min(self.counts.len() - 1)];
        let (a, b) = crate::arms::baselines::two_distinct(counts.len(), rng);
        if counts.get(b) < counts.get(a) { b } else { a }
    }

    fn slot(&mut self, router: usize, worker: usize) -> Option<&mut u32> {
        self.counts.get_mut(router)?.get_mut(worker)
    }
}

/// An outcome waiting in a router's feedback buffer.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingOutcome {
    /// The worker the attempt went to.
    pub worker: usize,
    /// The pick's decision id.
    pub decision_id: Option<String>,
    /// The attempt's latency as the router measured it, ms.
    pub latency_ms: f64,
    /// Whether it succeeded.
    pub success: bool,
    /// The router that made the pick.
    pub router: usize,
    /// Whether the worker served it from its cache, when known.
    pub cache_hit: Option<bool>,
}

/// Every router's feedback buffer.
#[derive(Debug, Clone)]
pub struct Outbox {
    buffers: Vec<Vec<PendingOutcome>>,
    tick_scheduled: Vec<bool>,
    flush_ms: f64,
    batch_max: usize,
}

/// What the simulator does after [`Outbox::push`].
#[derive(Debug, Clone, PartialEq)]
pub enum Buffered {
    /// Send this batch now (the buffer reached `feedback_batch_max`).
    SendNow(Vec<PendingOutcome>),
    /// Schedule the router's next flush tick at this time, ms.
    TickAt(f64),
    /// Nothing: a tick is already scheduled.
    Wait,
}

impl Outbox {
    /// Empty buffers for `routers` routers.
    pub fn new(sc: &Scenario) -> Self {
        let n = sc.routers.max(1);
        Self {
            buffers: vec![Vec::new(); n],
            tick_scheduled: vec![false; n],
            flush_ms: sc.feedback_flush_ms,
            batch_max: sc.feedback_batch_max.max(1),
        }
    }

    /// Buffer `o` at `now_ms`.
    pub fn push(&mut self, o: PendingOutcome, now_ms: f64) -> Buffered {
        let r = o.router.min(self.buffers.len() - 1);
        self.buffers[r].push(o);
        if self.buffers[r].len() >= self.batch_max {
            return Buffered::SendNow(std::mem::take(&mut self.buffers[r]));
        }
        if self.tick_scheduled[r] {
            return Buffered::Wait;
        }
        self.tick_scheduled[r] = true;
        // The router's flush clock ticks at every multiple of the interval.
        let tick = ((now_ms / self.flush_ms).floor() + 1.0) * self.flush_ms;
        Buffered::TickAt(tick)
    }

    /// Router `router`'s flush tick: what its buffer holds (maybe nothing).
    pub fn tick(&mut self, router: usize) -> Vec<PendingOutcome> {
        let r = router.min(self.buffers.len() - 1);
        self.tick_scheduled[r] = false;
        std::mem::take(&mut self.buffers[r])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cal() -> &'static HttpScoreCalibration {
        Box::leak(Box::new(HttpScoreCalibration {
            command: "--calibrate".into(),
            date: String::new(),
            commit: "abcdef0".into(),
            host: String::new(),
            connections: 1,
            candidates: 16,
            samples: 1,
            round_trip_us: 40.0,
            score_p50_us: 100.0,
            score_p99_us: 100.0,
            // Every call is handled in exactly 60 µs.
            in_service_us: vec![[0.0, 60.0], [1.0, 60.0]],
        }))
    }

    #[test]
    fn calls_queue_for_the_scorers_cores_in_arrival_order() {
        let mut sc = Scenario {
            scorer_cores: 2,
            scorer_round_trip_us: 40.0,
            ..Scenario::default()
        };
        let mut s = RemoteScorer::new(&sc, cal(), 1);
        assert_eq!(s.one_way_ms(), 0.02);
        // Three calls at once: two cores start at once, the third waits
        // for the first free core.
        let a = s.admit(0, 1.0);
        let b = s.admit(0, 1.0);
        let c = s.admit(0, 1.0);
        assert!((a.0 - 1.0).abs() < 1e-12 && (b.0 - 1.0).abs() < 1e-12);
        assert!((a.1 - 0.06).abs() < 1e-12);
        assert!((c.0 - 1.06).abs() < 1e-12, "queued: {c:?}");
        // A call after both cores are free does not wait.
        assert_eq!(s.admit(0, 5.0).0, 5.0);
        // One core: every call waits for the one before.
        sc.scorer_cores = 1;
        let mut one = RemoteScorer::new(&sc, cal(), 1);
        let starts: Vec<f64> = (0..4).map(|_| one.admit(0, 0.0).0).collect();
        for (i, s) in starts.iter().enumerate() {
            assert!((s - 0.06 * i as f64).abs() < 1e-12, "{starts:?}");
        }
    }

    #[test]
    fn replicas_queue_each_at_their_own_cores() {
        let sc = Scenario {
            scorer_cores: 1,
            scorer_round_trip_us: 40.0,
            ..Scenario::default()
        };
        let mut s = RemoteScorer::new(&sc, cal(), 1).with_replicas(3);
        // One call to each replica at once: each has its own free core.
        for r in 0..3 {
            assert_eq!(s.admit(r, 1.0).0, 1.0, "replica {r}");
        }
        // A second call to replica 1 waits for replica 1's core, though
        // the others' would be as busy: no core is shared.
        let again = s.admit(1, 1.0).0;
        assert!((again - 1.06).abs() < 1e-12, "{again}");
        // Replica 2's queue is not replica 1's: its next call waits for
        // its own first call only.
        assert!((s.admit(2, 1.03).0 - 1.06).abs() < 1e-12);
        assert!((s.admit(1, 1.0).0 - 1.12).abs() < 1e-12);
        // Three replicas are not three cores in one pool: with one pool a
        // fourth call at once would wait 60 µs, here replica 0 still has
        // one call queued at most.
        let mut pooled = RemoteScorer::new(
            &Scenario {
                scorer_cores: 3,
                ..sc.clone()
            },
            cal(),
            1,
        );
        let pool: Vec<f64> = (0..4).map(|_| pooled.admit(0, 0.0).0).collect();
        let mut split = RemoteScorer::new(&sc, cal(), 1).with_replicas(3);
        let own: Vec<f64> = [0, 0, 1, 2]
            .iter()
            .map(|&r| split.admit(r, 0.0).0)
            .collect();
        assert_eq!(pool, [0.0, 0.0, 0.0, 0.06]);
        assert_eq!(own, [0.0, 0.06, 0.0, 0.0]);
    }

    #[test]
    fn a_free_scorer_costs_only_the_round_trip() {
        let sc = Scenario {
            scorer_service_scale: 0.0,
            scorer_round_trip_us: 0.0,
            ..Scenario::default()
        };
        let mut s = RemoteScorer::new(&sc, cal(), 1);
        assert_eq!(s.admit(0, 3.0), (3.0, 0.0));
        assert_eq!(s.one_way_ms(), 0.0);
    }

    fn out(router: usize) -> PendingOutcome {
        PendingOutcome {
            worker: 0,
            decision_id: Some("d".into()),
            latency_ms: 1.0,
            success: true,
            router,
            cache_hit: None,
        }
    }

    #[test]
    fn outcomes_wait_for_the_flush_tick_or_a_full_batch() {
        let sc = Scenario {
            routers: 2,
            feedback_flush_ms: 2.0,
            feedback_batch_max: 3,
            ..Scenario::default()
        };
        let mut o = Outbox::new(&sc);
        // The first outcome schedules the next tick of the 2 ms clock.
        assert_eq!(o.push(out(0), 4.5), Buffered::TickAt(6.0));
        assert_eq!(o.push(out(0), 5.0), Buffered::Wait);
        // Another router has its own buffer and clock.
        assert_eq!(o.push(out(1), 5.0), Buffered::TickAt(6.0));
        assert_eq!(o.tick(0).len(), 2);
        assert!(o.tick(0).is_empty());
        // A full batch goes at once.
        assert_eq!(o.push(out(0), 7.0), Buffered::TickAt(8.0));
        assert_eq!(o.push(out(0), 7.1), Buffered::Wait);
        match o.push(out(0), 7.2) {
            Buffered::SendNow(b) => assert_eq!(b.len(), 3),
            other => panic!("{other:?}"),
        }
    }
}
