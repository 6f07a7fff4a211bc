//! The faults and disturbances a scenario injects, each into one worker.

use serde::{Deserialize, Serialize};

/// A fault or disturbance injected into one worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Fault {
    /// Service times × `factor` in `[from_ms, to_ms)`.
    Slow {
        /// Worker index.
        worker: usize,
        /// Start, ms.
        from_ms: f64,
        /// End, ms.
        to_ms: f64,
        /// Service-time multiplier (5.0 = five times slower).
        factor: f64,
    },
    /// Periodic compaction: every `period_ms`, for `duration_ms`, PUTs cost
    /// × `put_factor` and GETs × `get_factor`; the `compacting` flag is reported.
    Compaction {
        /// Worker index.
        worker: usize,
        /// First compaction start, ms.
        first_ms: f64,
        /// Period, ms.
        period_ms: f64,
        /// Length of one compaction, ms.
        duration_ms: f64,
        /// PUT service-time multiplier while compacting.
        put_factor: f64,
        /// GET service-time multiplier while compacting.
        get_factor: f64,
    },
    /// The worker is down (connections refused, no telemetry) in `[from_ms, to_ms)`;
    /// queued work is lost. It comes back empty.
    Crash {
        /// Worker index.
        worker: usize,
        /// Crash time, ms.
        from_ms: f64,
        /// Restart time, ms.
        to_ms: f64,
    },
    /// The worker accepts requests and never answers in `[from_ms, to_ms)`;
    /// its telemetry stays healthy-looking (heartbeats fine).
    Zombie {
        /// Worker index.
        worker: usize,
        /// Start, ms.
        from_ms: f64,
        /// End, ms.
        to_ms: f64,
    },
    /// The worker's telemetry lies in `[from_ms, to_ms)`: each report
    /// carries worker `as_worker`'s numbers (CPU, queue, RTTs, compaction,
    /// memtable) under its own id, while it serves at its own speed.
    Lie {
        /// Worker index.
        worker: usize,
        /// Whose numbers it reports.
        as_worker: usize,
        /// Start, ms.
        from_ms: f64,
        /// End, ms.
        to_ms: f64,
    },
    /// The worker's exporter misreports in `[from_ms, to_ms)`: each field
    /// given replaces the measured one in every report (an exporter that
    /// counts a GET's miss as an error, a queue gauge in the wrong unit),
    /// while the worker serves at its own speed.
    Misreport {
        /// Worker index.
        worker: usize,
        /// Start, ms.
        from_ms: f64,
        /// End, ms.
        to_ms: f64,
        /// Reported `error_rate` instead of the true 0, 0..=1.
        #[serde(default)]
        error_rate: Option<f64>,
        /// Reported `queue_depth` instead of the jobs waiting.
        #[serde(default)]
        queue_depth: Option<u32>,
        /// Reported `cpu_usage` instead of the measured one, 0..=1.
        #[serde(default)]
        cpu_usage: Option<f64>,
    },
    /// The operator drains the worker in `[from_ms, to_ms)` and returns it
    /// at `to_ms`; the worker itself is healthy throughout. A service arm
    /// gets a drain override (`PUT /v1/admin/workers/{id}/override`); a
    /// baseline loses the endpoint from its set, as a proxy does when
    /// service discovery removes it (Envoy EDS, HAProxy
    /// `set server … state drain`).
    Drain {
        /// Worker index.
        worker: usize,
        /// Drain start, ms.
        from_ms: f64,
        /// Return, ms.
        to_ms: f64,
    },
    /// A memtable that fills and flushes in a sawtooth: it holds
    /// `peak_bytes × ((t + offset_ms) mod period_ms) / period_ms` bytes at
    /// time `t` (0 right after a flush, `peak_bytes` just before the next),
    /// reported as `memtable_bytes` in every snapshot. A PUT that starts
    /// when it holds `m` bytes costs × (1 + `put_slowdown_per_gib` × m /
    /// GiB); GETs are unaffected. Nothing else in the telemetry shows it.
    /// It holds in `[from_ms, until_ms)` (the whole run by default), so a
    /// worker may change sawtooth mid-run, with one memtable per moment.
    Memtable {
        /// Worker index.
        worker: usize,
        /// Start of the sawtooth, ms (default: the run's start).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_ms: Option<f64>,
        /// End of the sawtooth, ms (default: the run's end).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until_ms: Option<f64>,
        /// Phase: at time 0 the memtable has been filling for this long, ms
        /// (`0 <= offset_ms < period_ms`).
        offset_ms: f64,
        /// Time from one flush to the next, ms.
        period_ms: f64,
        /// Size just before a flush, bytes.
        peak_bytes: u64,
        /// PUT service-time increase per GiB held (0.75 = 4× at 4 GiB).
        put_slowdown_per_gib: f64,
    },
    /// Unrouted background load arrives at the worker (Poisson) in `[from_ms, to_ms)`.
    Burst {
        /// Worker index.
        worker: usize,
        /// Start, ms.
        from_ms: f64,
        /// End, ms.
        to_ms: f64,
        /// Background load as a fraction of the worker's capacity (1.2 saturates it).
        load: f64,
    },
}

impl Fault {
    /// The affected worker.
    pub fn worker(&self) -> usize {
        match self {
            Fault::Slow { worker, .. }
            | Fault::Compaction { worker, .. }
            | Fault::Crash { worker, .. }
            | Fault::Zombie { worker, .. }
            | Fault::Lie { worker, .. }
            | Fault::Misreport { worker, .. }
            | Fault::Drain { worker, .. }
            | Fault::Memtable { worker, .. }
            | Fault::Burst { worker, .. } => *worker,
        }
    }

    /// For a memtable, the window in which it holds, ms (`from_ms` or 0,
    /// `until_ms` or infinity); `None` for every other fault.
    pub fn memtable_window_ms(&self) -> Option<(f64, f64)> {
        match self {
            Fault::Memtable {
                from_ms, until_ms, ..
            } => Some((from_ms.unwrap_or(0.0), until_ms.unwrap_or(f64::INFINITY))),
            _ => None,
        }
    }

    /// The window in which the worker is impaired, ms, for drain/recovery
    /// metrics; `None` for periodic disturbances.
    pub fn window_ms(&self) -> Option<(f64, f64)> {
        match self {
            Fault::Slow { from_ms, to_ms, .. }
            | Fault::Crash { from_ms, to_ms, .. }
            | Fault::Zombie { from_ms, to_ms, .. }
            | Fault::Lie { from_ms, to_ms, .. }
            | Fault::Misreport { from_ms, to_ms, .. }
            | Fault::Drain { from_ms, to_ms, .. }
            | Fault::Burst { from_ms, to_ms, .. } => Some((*from_ms, *to_ms)),
            Fault::Compaction { .. } | Fault::Memtable { .. } => None,
        }
    }
}
