//! One simulated worker: a FIFO queue in front of `concurrency` servers,
//! per-request service times `cost × lognormal / speed × impairment`, and
//! the counters its telemetry snapshot is derived from.

use std::collections::VecDeque;

use scorer_core::telemetry::Snapshot;

use super::cache::WorkerCache;
use crate::router::Op;
use crate::scenario::WorkerSpec;

/// A job waiting for or in service.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Job {
    /// Attempt index, or a background job id (≥ [`BACKGROUND_BASE`]).
    pub id: usize,
    /// When it reached the worker, ms.
    pub enqueued_ms: f64,
    /// Nominal cost at speed 1 before impairments, ms (includes the
    /// log-normal draw and size).
    pub base_cost_ms: f64,
    /// Operation.
    pub op: Op,
}

/// A memtable's sawtooth (see [`crate::scenario::Fault::Memtable`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Memtable {
    /// When it starts to hold, ms.
    pub from_ms: f64,
    /// When it stops holding, ms (infinite: never).
    pub until_ms: f64,
    /// Phase at time 0, ms.
    pub offset_ms: f64,
    /// Flush period, ms.
    pub period_ms: f64,
    /// Size just before a flush, bytes.
    pub peak_bytes: f64,
    /// PUT service-time increase per GiB held.
    pub put_slowdown_per_gib: f64,
}

impl Memtable {
    /// Whether it holds at `now_ms`.
    pub fn holds_at(&self, now_ms: f64) -> bool {
        self.from_ms <= now_ms && now_ms < self.until_ms
    }

    /// Bytes held at `now_ms`.
    pub fn bytes(&self, now_ms: f64) -> f64 {
        let phase = (now_ms + self.offset_ms).rem_euclid(self.period_ms);
        self.peak_bytes * phase / self.period_ms
    }

    /// PUT service-time multiplier at `now_ms`.
    pub fn put_factor(&self, now_ms: f64) -> f64 {
        1.0 + self.put_slowdown_per_gib * self.bytes(now_ms) / 1_073_741_824.0
    }
}

/// Background jobs have ids from here up, so they never match an attempt.
pub const BACKGROUND_BASE: usize = usize::MAX / 2;

/// Worker state during a run.
#[derive(Debug)]
pub struct SimWorker {
    /// Static description.
    pub spec: WorkerSpec,
    queue: VecDeque<Job>,
    /// (job id, enqueued at ms, ends at ms) of jobs in service.
    in_service: Vec<(usize, f64, f64)>,
    /// Service-time multiplier of a slow-down fault (1 = healthy).
    pub slow_factor: f64,
    /// Compaction in progress: (PUT factor, GET factor).
    pub compaction: Option<(f64, f64)>,
    /// Crashed: connections refused, no telemetry.
    pub down: bool,
    /// Black hole: accepts and never answers; telemetry looks healthy.
    pub zombie: bool,
    /// Memtables whose size slows PUTs, reported in snapshots, each in
    /// force in its own window.
    pub memtables: Vec<Memtable>,
    /// What it holds warm, with a scenario cache.
    pub cache: Option<WorkerCache>,
    busy_integral_ms: f64,
    last_change_ms: f64,
    interval_start_ms: f64,
    interval_latencies_ms: Vec<f64>,
}

impl SimWorker {
    /// An idle, healthy worker.
    pub fn new(spec: WorkerSpec) -> Self {
        Self {
            spec,
            queue: VecDeque::new(),
            in_service: Vec::new(),
            slow_factor: 1.0,
            compaction: None,
            down: false,
            zombie: false,
            memtables: Vec::new(),
            cache: None,
            busy_integral_ms: 0.0,
            last_change_ms: 0.0,
            interval_start_ms: 0.0,
            interval_latencies_ms: Vec::new(),
        }
    }

    fn account(&mut self, now_ms: f64) {
        self.busy_integral_ms += self.in_service.len() as f64 * (now_ms - self.last_change_ms);
        self.last_change_ms = now_ms;
    }

    /// The memtable in force at `now_ms`, if any.
    pub fn memtable(&self, now_ms: f64) -> Option<Memtable> {
        self.memtables.iter().copied().find(|m| m.holds_at(now_ms))
    }

    /// Service time of `job` if it starts at `now_ms`, ms.
    pub fn service_ms(&self, job: &Job, now_ms: f64) -> f64 {
        let compaction = match (self.compaction, job.op) {
            (Some((put, _)), Op::Put) => put,
            (Some((_, get)), Op::Get) => get,
            (None, _) => 1.0,
        };
        let memtable = match (self.memtable(now_ms), job.op) {
            (Some(m), Op::Put) => m.put_factor(now_ms),
            _ => 1.0,
        };
        job.base_cost_ms / self.spec.speed * self.slow_factor * compaction * memtable
    }

    /// Accept `job` at `now_ms`. Returns the job to start now (a free server)
    /// with its service time, if any. A zombie drops it silently.
    pub fn enqueue(&mut self, job: Job, now_ms: f64) -> Option<(usize, f64)> {
        if self.zombie || self.down {
            return None;
        }
        self.queue.push_back(job);
        self.start_next(now_ms)
    }

    fn start_next(&mut self, now_ms: f64) -> Option<(usize, f64)> {
        if self.in_service.len() >= self.spec.concurrency {
            return None;
        }
        let job = self.queue.pop_front()?;
        self.account(now_ms);
        let service = self.service_ms(&job, now_ms);
        // Latency as the worker measures it: enqueue to completion.
        self.in_service
            .push((job.id, job.enqueued_ms, now_ms + service));
        Some((job.id, service))
    }

    /// Job `id` finished at `now_ms`. Returns `false` if it was not in
    /// service (lost in a crash), else `true` and the next job to start.
    pub fn finish(&mut self, id: usize, now_ms: f64) -> (bool, Option<(usize, f64)>) {
        let Some(pos) = self.in_service.iter().position(|&(j, ..)| j == id) else {
            return (false, None);
        };
        self.account(now_ms);
        let (_, enqueued_ms, _) = self.in_service.swap_remove(pos);
        self.interval_latencies_ms.push(now_ms - enqueued_ms);
        (true, self.start_next(now_ms))
    }

    /// Crash at `now_ms`: every queued and in-service job is lost and the
    /// cache emptied; returns the jobs' ids (the clients see their
    /// connections reset).
    pub fn crash(&mut self, now_ms: f64) -> Vec<usize> {
        self.account(now_ms);
        self.down = true;
        if let Some(c) = &mut self.cache {
            c.clear();
        }
        let mut lost: Vec<usize> = self.in_service.drain(..).map(|(j, ..)| j).collect();
        lost.extend(self.queue.drain(..).map(|j| j.id));
        lost
    }

    /// Mean service time of a request of mean cost `mean_cost_ms` at
    /// `now_ms`, ms (a PUT factor and a GET factor count half each).
    fn current_mean_ms(&self, mean_cost_ms: f64, now_ms: f64) -> f64 {
        let c = self.compaction.map_or(1.0, |(p, g)| (p + g) / 2.0);
        let m = self
            .memtable(now_ms)
            .map_or(1.0, |m| (m.put_factor(now_ms) + 1.0) / 2.0);
        mean_cost_ms / self.spec.speed * self.slow_factor * c * m
    }

    /// The telemetry snapshot at `now_ms` over the interval since the last
    /// one, then a new interval starts. `None` while down (silent).
    ///
    /// Derived from simulated state: `cpu_usage` = busy server-time over the
    /// interval / (interval × concurrency); `queue_depth` = jobs waiting now;
    /// `rtt_ms_avg` / `rtt_ms_p99` = enqueue-to-completion times of jobs
    /// finished in the interval, or, when none finished, what a probe would
    /// see (the backlog ahead of it plus one mean service time);
    /// `error_rate` = 0 (the modelled failures are seen by clients, not by
    /// the worker); `compacting` while a compaction runs; `memtable_bytes`
    /// the memtable's size now, for a worker that has one. A zombie reports
    /// an idle, healthy worker.
    pub fn snapshot(
        &mut self,
        id: &str,
        now_ms: f64,
        wall_ms: u64,
        mean_cost_ms: f64,
    ) -> Option<Snapshot> {
        self.account(now_ms);
        let span = (now_ms - self.interval_start_ms).max(1e-9);
        let cpu = (self.busy_integral_ms / (span * self.spec.concurrency as f64)).clamp(0.0, 1.0);
        let mut lat = std::mem::take(&mut self.interval_latencies_ms);
        self.busy_integral_ms = 0.0;
        self.interval_start_ms = now_ms;
        if self.down {
            return None;
        }
        let mut s = Snapshot::new(id, wall_ms);
        let nominal = mean_cost_ms / self.spec.speed;
        if self.zombie {
            s.cpu_usage = 0.05;
            s.rtt_ms_avg = nominal;
            s.rtt_ms_p99 = nominal * 2.0;
            return Some(s);
        }
        s.cpu_usage = cpu;
        s.queue_depth = u32::try_from(self.queue.len()).unwrap_or(u32::MAX);
        if lat.is_empty() {
            let probe = (self.queue.len() as f64 / self.spec.concurrency as f64 + 1.0)
                * self.current_mean_ms(mean_cost_ms, now_ms);
            s.rtt_ms_avg = probe;
            s.rtt_ms_p99 = probe;
        } else {
            lat.sort_by(f64::total_cmp);
            s.rtt_ms_avg = lat.iter().sum::<f64>() / lat.len() as f64;
            s.rtt_ms_p99 = crate::run_summary::percentile_sorted(&lat, 0.99);
        }
        s.compacting = self.compaction.is_some();
        s.memtable_bytes = self.memtable(now_ms).map(|m| m.bytes(now_ms) as u64);
        Some(s)
    }

    /// What an oracle knows: how long `job`, sent now, would take to
    /// finish here, ms: the work left in service and queued ahead of it
    /// spread over the worker's concurrency, plus its own service time at
    /// the worker's speed, faults and memtable now. Infinite while the
    /// worker is down or a black hole.
    pub fn expected_delay_ms(&self, job: &Job, now_ms: f64) -> f64 {
        if self.down || self.zombie {
            return f64::INFINITY;
        }
        let left: f64 = self
            .in_service
            .iter()
            .map(|&(.., ends_ms)| (ends_ms - now_ms).max(0.0))
            .sum();
        let queued: f64 = self.queue.iter().map(|j| self.service_ms(j, now_ms)).sum();
        let wait = if self.in_service.len() < self.spec.concurrency {
            0.0
        } else {
            (left + queued) / self.spec.concurrency as f64
        };
        wait + self.service_ms(job, now_ms)
    }

    /// Jobs waiting (not in service).
    pub fn queued(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: f64 = 1_073_741_824.0;

    fn memtable(offset_ms: f64) -> Memtable {
        Memtable {
            from_ms: 0.0,
            until_ms: f64::INFINITY,
            offset_ms,
            period_ms: 20_000.0,
            peak_bytes: 4.0 * GIB,
            put_slowdown_per_gib: 0.75,
        }
    }

    #[test]
    fn the_expected_delay_is_the_work_ahead_plus_the_own_service() {
        let job = |id, cost| Job {
            id,
            enqueued_ms: 0.0,
            base_cost_ms: cost,
            op: Op::Get,
        };
        let mut w = SimWorker::new(WorkerSpec {
            speed: 2.0,
            concurrency: 1,
            ..WorkerSpec::default()
        });
        // Idle: only its own 4 ms at speed 2.
        assert_eq!(w.expected_delay_ms(&job(9, 4.0), 0.0), 2.0);
        assert_eq!(w.enqueue(job(1, 10.0), 0.0), Some((1, 5.0)));
        assert_eq!(w.enqueue(job(2, 6.0), 0.0), None);
        // At 1 ms: 4 ms left of job 1, 3 ms queued, 2 ms its own.
        assert_eq!(w.expected_delay_ms(&job(9, 4.0), 1.0), 9.0);
        w.slow_factor = 2.0;
        assert_eq!(w.expected_delay_ms(&job(9, 4.0), 1.0), 4.0 + 6.0 + 4.0);
        w.zombie = true;
        assert_eq!(w.expected_delay_ms(&job(9, 4.0), 1.0), f64::INFINITY);
        // Two servers, one free: no wait.
        let mut two = SimWorker::new(WorkerSpec {
            speed: 1.0,
            concurrency: 2,
            ..WorkerSpec::default()
        });
        two.enqueue(job(1, 10.0), 0.0);
        assert_eq!(two.expected_delay_ms(&job(9, 3.0), 0.0), 3.0);
    }

    #[test]
    fn the_memtable_fills_flushes_and_slows_puts_only() {
        let m = memtable(0.0);
        assert_eq!(m.bytes(0.0), 0.0);
        assert!((m.bytes(10_000.0) - 2.0 * GIB).abs() < 1.0);
        assert_eq!(m.bytes(20_000.0), 0.0, "flushed");
        assert!((m.put_factor(19_999.999) - 4.0).abs() < 1e-3);
        // Out of phase: half a period ahead.
        assert!((memtable(10_000.0).bytes(0.0) - 2.0 * GIB).abs() < 1.0);
        let mut w = SimWorker::new(WorkerSpec::default());
        w.memtables = vec![m];
        let job = |op| Job {
            id: 0,
            enqueued_ms: 0.0,
            base_cost_ms: 4.0,
            op,
        };
        assert!((w.service_ms(&job(Op::Put), 15_000.0) - 4.0 * 3.25).abs() < 1e-9);
        assert_eq!(w.service_ms(&job(Op::Get), 15_000.0), 4.0);
        let s = w.snapshot("w0", 10_000.0, 0, 2.6).expect("live");
        assert_eq!(s.memtable_bytes, Some(2 << 30));
        let plain = SimWorker::new(WorkerSpec::default()).snapshot("w1", 10_000.0, 0, 2.6);
        assert_eq!(plain.and_then(|s| s.memtable_bytes), None);
    }

    #[test]
    fn a_worker_changes_memtable_at_the_boundary_of_their_windows() {
        let mut w = SimWorker::new(WorkerSpec::default());
        let small = Memtable {
            until_ms: 30_000.0,
            peak_bytes: 0.25 * GIB,
            period_ms: 5_000.0,
            ..memtable(0.0)
        };
        let big = Memtable {
            from_ms: 30_000.0,
            ..memtable(0.0)
        };
        w.memtables = vec![small, big];
        let put = Job {
            id: 0,
            enqueued_ms: 0.0,
            base_cost_ms: 4.0,
            op: Op::Put,
        };
        // 2.5 s into a 5 s fill of 256 MiB: 128 MiB, x1.09375.
        assert!((w.service_ms(&put, 27_500.0) - 4.0 * 1.093_75).abs() < 1e-9);
        // 15 s into the 20 s fill of 4 GiB from then on: 3 GiB, x3.25.
        assert!((w.service_ms(&put, 35_000.0) - 4.0 * 3.25).abs() < 1e-9);
        let s = w.snapshot("w0", 35_000.0, 0, 2.6).expect("live");
        assert_eq!(s.memtable_bytes, Some(3 << 30));
    }
}
