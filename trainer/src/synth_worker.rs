//! One simulated worker of `trainer synth` ([`crate::synth`] documents the
//! generative model): base levels drawn from the seed, an AR(1) step of
//! every signal, the telemetry view the service would hold, the stand-in
//! routing cost, and the mean latency of a request.

use std::sync::Arc;

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use scorer_core::dynamics::PenaltyTracker;
use scorer_core::features::CandidateEvidence;
use scorer_core::scoring::RequestType;
use scorer_core::state::{HistoryStats, Smoothed, WorkerView};

use crate::synth::{MONO_START_MS, REGIONS};

pub(crate) fn normal(rng: &mut ChaCha8Rng) -> f64 {
    // Box–Muller; 1 - u keeps the log argument in (0, 1].
    let u: f64 = rng.random();
    let v: f64 = rng.random();
    (-2.0 * (1.0 - u).ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

#[derive(Debug, Clone)]
pub(crate) struct Base {
    pub(crate) cpu: f64,
    pub(crate) queue: f64,
    pub(crate) disk: f64,
    pub(crate) cache: f64,
    p99: f64,
    pub(crate) err: f64,
    pub(crate) mem: f64,
}

#[derive(Debug, Clone)]
pub(crate) struct SimWorker {
    pub(crate) id: Arc<str>,
    pub(crate) region: Arc<str>,
    pub(crate) base: Base,
    pub(crate) now: Base,
    pub(crate) compacting: bool,
    pub(crate) reports_disk: bool,
    pub(crate) reports_mem: bool,
    pub(crate) first_seen_ms: u64,
}

impl SimWorker {
    pub(crate) fn new(i: usize, rng: &mut ChaCha8Rng) -> Self {
        let disk = if i % 8 == 5 {
            rng.random_range(45.0..90.0)
        } else {
            rng.random_range(1.0..45.0)
        };
        let base = Base {
            cpu: rng.random_range(0.2..0.85),
            queue: rng.random_range(0.0..30.0),
            disk,
            cache: rng.random_range(0.5..0.99),
            p99: rng.random_range(3.0..20.0),
            err: rng.random_range(0.0..0.01),
            mem: rng.random_range(0.05..0.6),
        };
        SimWorker {
            id: Arc::from(format!("w{i:02}")),
            region: Arc::from(REGIONS[i % REGIONS.len()]),
            now: base.clone(),
            base,
            compacting: false,
            reports_disk: i % 8 != 3,
            reports_mem: !i.is_multiple_of(5),
            first_seen_ms: rng.random_range(0..MONO_START_MS / 2),
        }
    }

    pub(crate) fn step(&mut self, rng: &mut ChaCha8Rng) {
        const PHI: f64 = 0.95;
        let mut ar = |x: f64, base: f64, sigma: f64, lo: f64, hi: f64| {
            (base + PHI * (x - base) + sigma * normal(rng)).clamp(lo, hi)
        };
        let (b, n) = (&self.base, &mut self.now);
        n.cpu = ar(n.cpu, b.cpu, 0.03, 0.01, 1.0);
        n.queue = ar(n.queue, b.queue, 2.0, 0.0, 200.0);
        n.disk = ar(n.disk, b.disk, 2.0, 0.2, 500.0);
        n.cache = ar(n.cache, b.cache, 0.02, 0.0, 1.0);
        n.p99 = ar(n.p99, b.p99, 1.0, 0.5, 500.0);
        n.err = ar(n.err, b.err, 0.001, 0.0, 1.0);
        n.mem = ar(n.mem, b.mem, 0.01, 0.0, 1.0);
        self.compacting = if self.compacting {
            !rng.random_bool(0.03)
        } else {
            rng.random_bool(0.003)
        };
    }

    pub(crate) fn view(&self, now_ms: u64, rng: &mut ChaCha8Rng) -> WorkerView {
        let n = &self.now;
        let age = rng.random_range(0..3_000u64);
        WorkerView {
            worker_id: self.id.clone(),
            first_seen_ms: self.first_seen_ms,
            revived_ms: None,
            last_receive_ms: now_ms.saturating_sub(age),
            last_timestamp_ms: now_ms.saturating_sub(age),
            reports: (now_ms - self.first_seen_ms) / 1_000,
            smoothed: Smoothed {
                cpu_usage: n.cpu,
                queue_depth: n.queue,
                rtt_ms_avg: n.p99 * 0.4,
                rtt_ms_p99: n.p99,
                error_rate: n.err,
                mem_available_ratio: self.reports_mem.then_some(n.mem),
                disk_io_await_ms: self.reports_disk.then_some(n.disk),
                net_loss_rate: Some(0.001),
                cache_hit_rate: Some(n.cache),
                memtable_bytes: Some(1.0e9),
                disk_free_ratio: Some(0.6),
            },
            compacting: self.compacting,
            under_repair: false,
            version_lag: 0,
            region: Some(self.region.clone()),
            capacity: 1.0,
            cpu_clamped: false,
            history: HistoryStats {
                p99_slope_ms_per_s: (n.p99 - self.base.p99) * 0.01,
                error_rate_stddev: n.err * 0.3,
                cache_hit_slope_per_s: Some((n.cache - self.base.cache) * 0.001),
                samples: 60,
            },
            penalty: PenaltyTracker::new(),
            digest: None,
            derived: None,
        }
    }
}

/// Mean latency (ms) of a request of type `rt` with `batch` keys on a
/// worker in state `s` (see the module docs; the PUT × disk term is the
/// hidden effect).
/// The evidence features of a synthetic candidate. There is no service
/// here, so no outstanding picks or outcomes; the rules' routing cost E
/// stands in as the reported mean RTT times `1 + queue depth / 8`, a cost
/// that knows neither the PUT × disk effect nor compaction, as the
/// service's rules do not weigh them that way.
pub(crate) fn stand_in_evidence(v: &WorkerView) -> CandidateEvidence {
    let s = &v.smoothed;
    CandidateEvidence {
        outstanding: 0,
        service_time_ms: s.rtt_ms_avg,
        outcomes: 0,
        unseen_backlog: s.queue_depth,
        observed_failure_rate: 0.0,
        cost: s.rtt_ms_avg.max(0.1) * (1.0 + s.queue_depth / 8.0),
        expected_latency_ms: s.rtt_ms_avg.max(0.1) * (1.0 + s.queue_depth),
    }
}

pub(crate) fn mean_latency_ms(s: &Base, compacting: bool, rt: RequestType, batch: u32) -> f64 {
    let mut m = 2.0
        + 60.0 * (s.cpu - 0.55).max(0.0)
        + 0.3 * s.queue
        + if compacting { 25.0 } else { 0.0 }
        + 0.3 * s.p99;
    if matches!(rt, RequestType::Get | RequestType::Mget) {
        m += 30.0 * (1.0 - s.cache);
    }
    if rt == RequestType::Mget {
        m += 0.5 * f64::from(batch);
    }
    if rt == RequestType::Put {
        m += 2.0 * s.disk;
    }
    m
}
