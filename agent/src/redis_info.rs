//! Pure metric computation: parse `INFO`, turn two `INFO` samples into
//! rates and assemble a [`Snapshot`] (the probes' summary is in
//! [`crate::probe_window`]).
//!
//! Nothing here does I/O or reads a clock, so every rule is unit-tested with
//! literal values.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use scorer_core::telemetry::Snapshot;

pub use crate::probe_window::{ProbeOutcome, ProbeStats, ProbeWindow, percentile};

/// The `INFO` fields the agent uses; `None` when the server did not report
/// the field (older servers lack e.g. `clients_in_timeout_table`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InfoSample {
    /// `run_id`: changes when the server restarts (counters reset).
    pub run_id: Option<String>,
    /// `used_cpu_sys`: system CPU consumed since start, seconds.
    pub used_cpu_sys: Option<f64>,
    /// `used_cpu_user`: user CPU consumed since start, seconds.
    pub used_cpu_user: Option<f64>,
    /// `blocked_clients`: clients blocked in BLPOP & co, count.
    pub blocked_clients: Option<u64>,
    /// `clients_in_timeout_table`: clients waiting with a timeout, count.
    pub clients_in_timeout_table: Option<u64>,
    /// `keyspace_hits`: successful key lookups since start, count.
    pub keyspace_hits: Option<u64>,
    /// `keyspace_misses`: failed key lookups since start, count.
    pub keyspace_misses: Option<u64>,
    /// `used_memory`: bytes allocated by the server.
    pub used_memory: Option<u64>,
    /// `maxmemory`: configured memory limit, bytes; 0 means unlimited.
    pub maxmemory: Option<u64>,
    /// `evicted_keys`: keys evicted under `maxmemory` since start (or the
    /// last `CONFIG RESETSTAT`), count.
    pub evicted_keys: Option<u64>,
    /// `rdb_bgsave_in_progress:1`: an RDB snapshot is being written.
    pub rdb_bgsave_in_progress: bool,
    /// `aof_rewrite_in_progress:1`: the AOF is being rewritten.
    pub aof_rewrite_in_progress: bool,
    /// `loading:1`: the dataset is being loaded from disk.
    pub loading: bool,
}

impl InfoSample {
    /// Total CPU (system + user) consumed since start, seconds.
    pub fn cpu_seconds(&self) -> Option<f64> {
        Some(self.used_cpu_sys? + self.used_cpu_user?)
    }

    /// Pending/blocked clients: `blocked_clients + clients_in_timeout_table`
    /// (missing fields count as 0), saturated to `u32`.
    pub fn queue_depth(&self) -> u32 {
        let total = self
            .blocked_clients
            .unwrap_or(0)
            .saturating_add(self.clients_in_timeout_table.unwrap_or(0));
        u32::try_from(total).unwrap_or(u32::MAX)
    }
}

/// Parses the text of an `INFO` reply (`key:value` lines, `#` section
/// headers, CRLF or LF line ends). Unknown keys and unparsable values are
/// ignored; this never fails.
pub fn parse_info(text: &str) -> InfoSample {
    let mut s = InfoSample::default();
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        if line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        let flag = || value == "1";
        match key {
            "run_id" => s.run_id = Some(value.to_owned()),
            "used_cpu_sys" => s.used_cpu_sys = value.parse().ok().filter(|v: &f64| v.is_finite()),
            "used_cpu_user" => s.used_cpu_user = value.parse().ok().filter(|v: &f64| v.is_finite()),
            "blocked_clients" => s.blocked_clients = value.parse().ok(),
            "clients_in_timeout_table" => s.clients_in_timeout_table = value.parse().ok(),
            "keyspace_hits" => s.keyspace_hits = value.parse().ok(),
            "keyspace_misses" => s.keyspace_misses = value.parse().ok(),
            "used_memory" => s.used_memory = value.parse().ok(),
            "maxmemory" => s.maxmemory = value.parse().ok(),
            "evicted_keys" => s.evicted_keys = value.parse().ok(),
            "rdb_bgsave_in_progress" => s.rdb_bgsave_in_progress = flag(),
            "aof_rewrite_in_progress" => s.aof_rewrite_in_progress = flag(),
            "loading" => s.loading = flag(),
            _ => {}
        }
    }
    s
}

/// CPU utilisation as a fraction of one core, clamped to `[0, 1]`:
/// `(cur_cpu_s - prev_cpu_s) / wall`. `None` when `wall` is zero or the
/// counter went backwards (server restart).
pub fn cpu_usage(prev_cpu_s: f64, cur_cpu_s: f64, wall: Duration) -> Option<f64> {
    let wall_s = wall.as_secs_f64();
    let used = cur_cpu_s - prev_cpu_s;
    if wall_s <= 0.0 || !used.is_finite() || used < 0.0 {
        return None;
    }
    Some((used / wall_s).clamp(0.0, 1.0))
}

/// Cache hit rate over an interval from cumulative `(hits, misses)`
/// counters, fraction `0..=1`. `None` when there were no lookups in the
/// interval or a counter went backwards (server restart).
pub fn hit_rate(prev: (u64, u64), cur: (u64, u64)) -> Option<f64> {
    let hits = cur.0.checked_sub(prev.0)?;
    let misses = cur.1.checked_sub(prev.1)?;
    let lookups = hits.checked_add(misses)?;
    (lookups > 0).then(|| hits as f64 / lookups as f64)
}

/// Available memory as a fraction of `maxmemory`, `1 - used/max` clamped
/// to `[0, 1]`; `None` when no limit is configured (`maxmemory` 0/absent).
pub fn mem_available_ratio(used_memory: u64, maxmemory: u64) -> Option<f64> {
    (maxmemory > 0).then(|| (1.0 - used_memory as f64 / maxmemory as f64).clamp(0.0, 1.0))
}

/// Evictions per second over an interval from the cumulative `evicted_keys`
/// counter. `None` when `wall` is zero or the counter went backwards (a
/// restart or `CONFIG RESETSTAT`): a reset is never a negative rate, and
/// the next interval differences two samples after it, so it is no spike.
pub fn evicted_keys_per_s(prev: u64, cur: u64, wall: Duration) -> Option<f64> {
    let wall_s = wall.as_secs_f64();
    let evicted = cur.checked_sub(prev)?;
    (wall_s > 0.0).then(|| evicted as f64 / wall_s)
}

/// The memory limit as the snapshot carries it: `maxmemory` 0 (no limit)
/// is reported as an absent `maxmemory_bytes`.
pub fn memory_limit_bytes(maxmemory: u64) -> Option<u64> {
    (maxmemory > 0).then_some(maxmemory)
}

/// The `INFO`-derived part of a snapshot. Kept between intervals so a worker
/// whose `INFO` times out is reported with its last known values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InfoDerived {
    /// CPU utilisation over the last `INFO` interval, fraction of one core `0..=1`.
    pub cpu_usage: f64,
    /// Pending/blocked clients, count.
    pub queue_depth: u32,
    /// Cache hit rate over the last `INFO` interval, `0..=1`; `None` without lookups.
    pub cache_hit_rate: Option<f64>,
    /// `1 - used_memory/maxmemory`, `0..=1`; `None` without a memory limit.
    pub mem_available_ratio: Option<f64>,
    /// `used_memory`, bytes.
    pub used_memory_bytes: Option<u64>,
    /// `maxmemory`, bytes; `None` without a memory limit.
    pub maxmemory_bytes: Option<u64>,
    /// Evictions per second over the last `INFO` interval; `None` without
    /// two samples of the same counter run.
    pub evicted_keys_per_s: Option<f64>,
    /// An RDB save or AOF rewrite is in progress.
    pub compacting: bool,
    /// The server is loading its dataset.
    pub under_repair: bool,
}

/// Derives the snapshot fields from the current `INFO` sample, the previous
/// one (taken `wall` earlier) and the last derived values.
///
/// Rates need two samples of the same server process (same `run_id`); when
/// there is no usable previous sample the CPU figure of `last` is kept and
/// the hit and eviction rates are omitted.
pub fn derive(
    prev: Option<&InfoSample>,
    cur: &InfoSample,
    wall: Duration,
    last: &InfoDerived,
) -> InfoDerived {
    let prev = prev.filter(|p| p.run_id == cur.run_id);
    let cpu = prev
        .and_then(|p| cpu_usage(p.cpu_seconds()?, cur.cpu_seconds()?, wall))
        .unwrap_or(last.cpu_usage);
    let cache_hit_rate = prev.and_then(|p| {
        hit_rate(
            (p.keyspace_hits?, p.keyspace_misses?),
            (cur.keyspace_hits?, cur.keyspace_misses?),
        )
    });
    let mem = match (cur.used_memory, cur.maxmemory) {
        (Some(used), Some(max)) => mem_available_ratio(used, max),
        _ => None,
    };
    let evicted = prev.and_then(|p| evicted_keys_per_s(p.evicted_keys?, cur.evicted_keys?, wall));
    InfoDerived {
        cpu_usage: cpu,
        queue_depth: cur.queue_depth(),
        cache_hit_rate,
        mem_available_ratio: mem,
        used_memory_bytes: cur.used_memory,
        maxmemory_bytes: cur.maxmemory.and_then(memory_limit_bytes),
        evicted_keys_per_s: evicted,
        compacting: cur.rdb_bgsave_in_progress || cur.aof_rewrite_in_progress,
        under_repair: cur.loading,
    }
}

/// Assembles the snapshot for one interval.
pub fn build_snapshot(
    worker_id: &str,
    timestamp_ms: u64,
    info: &InfoDerived,
    probes: &ProbeStats,
) -> Snapshot {
    let mut s = Snapshot::new(worker_id, timestamp_ms);
    s.cpu_usage = info.cpu_usage;
    s.queue_depth = info.queue_depth;
    s.cache_hit_rate = info.cache_hit_rate;
    s.mem_available_ratio = info.mem_available_ratio;
    s.used_memory_bytes = info.used_memory_bytes;
    s.maxmemory_bytes = info.maxmemory_bytes;
    s.evicted_keys_per_s = info.evicted_keys_per_s;
    s.compacting = info.compacting;
    s.under_repair = info.under_repair;
    s.rtt_ms_avg = probes.rtt_ms_avg;
    s.rtt_ms_p99 = probes.rtt_ms_p99;
    s.error_rate = probes.error_rate;
    s
}

/// Strictly increasing per-worker timestamps from a wall clock that may
/// stall or step back.
#[derive(Debug, Clone, Default)]
pub struct MonotonicStamp {
    last: Option<u64>,
}

impl MonotonicStamp {
    /// `wall_ms` (Unix ms) if it is after the previous stamp, else previous + 1.
    pub fn next(&mut self, wall_ms: u64) -> u64 {
        let ts = match self.last {
            Some(last) if wall_ms <= last => last.saturating_add(1),
            _ => wall_ms,
        };
        self.last = Some(ts);
        ts
    }
}

/// The system wall clock, Unix ms (0 if the clock is before 1970).
pub fn unix_ms_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trimmed from a real `INFO` reply of redis-server 7.0.15.
    const INFO_A: &str = "# Server\r\nredis_version:7.0.15\r\nrun_id:4f1c0b2b1b2e8f0e9c1d2a3b4c5d6e7f80910111\r\nuptime_in_seconds:42\r\n\r\n# Clients\r\nconnected_clients:3\r\ncluster_connections:0\r\nmaxclients:10000\r\nclient_recent_max_input_buffer:20480\r\nclient_recent_max_output_buffer:0\r\nblocked_clients:2\r\ntracking_clients:0\r\nclients_in_timeout_table:1\r\n\r\n# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\nmaxmemory:4194304\r\nmaxmemory_human:4.00M\r\nmaxmemory_policy:noeviction\r\n\r\n# Persistence\r\nloading:0\r\nasync_loading:0\r\nrdb_bgsave_in_progress:0\r\nrdb_last_save_time:1700000000\r\naof_enabled:0\r\naof_rewrite_in_progress:0\r\n\r\n# Stats\r\nevicted_keys:7\r\nkeyspace_hits:100\r\nkeyspace_misses:50\r\n\r\n# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:2.500000\r\nused_cpu_sys_children:0.000000\r\nused_cpu_user_children:0.000000\r\n\r\n# Keyspace\r\ndb0:keys=3000,expires=0,avg_ttl=0\r\n";

    fn info_b() -> String {
        INFO_A
            .replace("used_cpu_sys:1.250000", "used_cpu_sys:1.350000")
            .replace("used_cpu_user:2.500000", "used_cpu_user:2.700000")
            .replace("keyspace_hits:100", "keyspace_hits:130")
            .replace("keyspace_misses:50", "keyspace_misses:60")
            .replace("evicted_keys:7", "evicted_keys:27")
            .replace("rdb_bgsave_in_progress:0", "rdb_bgsave_in_progress:1")
            .replace("blocked_clients:2", "blocked_clients:0")
    }

    #[test]
    fn parses_real_info() {
        let s = parse_info(INFO_A);
        assert_eq!(
            s.run_id.as_deref(),
            Some("4f1c0b2b1b2e8f0e9c1d2a3b4c5d6e7f80910111")
        );
        assert_eq!(s.used_cpu_sys, Some(1.25));
        assert_eq!(s.used_cpu_user, Some(2.5));
        assert_eq!(s.cpu_seconds(), Some(3.75));
        assert_eq!(s.blocked_clients, Some(2));
        assert_eq!(s.clients_in_timeout_table, Some(1));
        assert_eq!(s.queue_depth(), 3);
        assert_eq!(s.keyspace_hits, Some(100));
        assert_eq!(s.keyspace_misses, Some(50));
        assert_eq!(s.used_memory, Some(1_048_576));
        assert_eq!(s.maxmemory, Some(4_194_304));
        assert_eq!(s.evicted_keys, Some(7));
        assert!(!s.rdb_bgsave_in_progress && !s.aof_rewrite_in_progress && !s.loading);

        let b = parse_info(&info_b());
        assert!(b.rdb_bgsave_in_progress);
        let loading = parse_info("loading:1\naof_rewrite_in_progress:1\n");
        assert!(loading.loading && loading.aof_rewrite_in_progress);
    }

    #[test]
    fn parse_tolerates_garbage_and_missing_fields() {
        let s = parse_info(
            "garbage\r\n:\r\nused_cpu_sys:nan\r\nused_cpu_user:x\r\nblocked_clients:-1\r\n",
        );
        assert_eq!(s, InfoSample::default());
        assert_eq!(s.cpu_seconds(), None);
        assert_eq!(s.queue_depth(), 0);
        let huge = parse_info("blocked_clients:18446744073709551615\nclients_in_timeout_table:5\n");
        assert_eq!(huge.queue_depth(), u32::MAX);
    }

    #[test]
    fn cpu_delta_is_fraction_of_one_core() {
        // 0.3 s of CPU over 1.5 s of wall time.
        let v = cpu_usage(3.75, 4.05, Duration::from_millis(1500)).unwrap();
        assert!((v - 0.2).abs() < 1e-9, "{v}");
        // 2 s of CPU in 1 s (multi-threaded IO) clamps to one core.
        assert_eq!(cpu_usage(1.0, 3.0, Duration::from_secs(1)), Some(1.0));
        assert_eq!(cpu_usage(1.0, 1.0, Duration::from_secs(1)), Some(0.0));
        assert_eq!(cpu_usage(5.0, 1.0, Duration::from_secs(1)), None);
        assert_eq!(cpu_usage(1.0, 2.0, Duration::ZERO), None);
    }

    #[test]
    fn hit_rate_delta() {
        assert_eq!(hit_rate((100, 50), (130, 60)), Some(0.75));
        assert_eq!(hit_rate((100, 50), (100, 50)), None);
        assert_eq!(hit_rate((100, 50), (100, 52)), Some(0.0));
        assert_eq!(hit_rate((100, 50), (3, 1)), None);
    }

    #[test]
    fn memory_ratio() {
        assert_eq!(mem_available_ratio(1_048_576, 4_194_304), Some(0.75));
        assert_eq!(mem_available_ratio(5_000_000, 4_194_304), Some(0.0));
        assert_eq!(mem_available_ratio(1_048_576, 0), None);
    }

    #[test]
    fn eviction_rate_between_two_polls() {
        assert_eq!(
            evicted_keys_per_s(7, 27, Duration::from_secs(2)),
            Some(10.0)
        );
        assert_eq!(
            evicted_keys_per_s(27, 27, Duration::from_secs(1)),
            Some(0.0)
        );
        // A reset (restart, CONFIG RESETSTAT) is neither negative nor a spike.
        assert_eq!(
            evicted_keys_per_s(1_000_000, 3, Duration::from_secs(1)),
            None
        );
        assert_eq!(evicted_keys_per_s(7, 27, Duration::ZERO), None);
    }

    #[test]
    fn memory_limit_zero_is_no_limit() {
        assert_eq!(memory_limit_bytes(0), None);
        assert_eq!(memory_limit_bytes(4_194_304), Some(4_194_304));
    }

    #[test]
    fn evictions_across_a_counter_reset() {
        let a = parse_info(INFO_A);
        let b = parse_info(&info_b());
        let second = Duration::from_secs(1);
        let last = InfoDerived::default();
        let d = derive(Some(&a), &b, second, &last);
        assert_eq!(d.evicted_keys_per_s, Some(20.0));
        assert_eq!(d.used_memory_bytes, Some(1_048_576));
        assert_eq!(d.maxmemory_bytes, Some(4_194_304));

        // CONFIG RESETSTAT: same run_id, the counter back near zero.
        let reset = parse_info(&info_b().replace("evicted_keys:27", "evicted_keys:2"));
        assert_eq!(
            derive(Some(&b), &reset, second, &d).evicted_keys_per_s,
            None
        );
        // The next interval differences two samples after the reset.
        let after = parse_info(&info_b().replace("evicted_keys:27", "evicted_keys:5"));
        let e = derive(Some(&reset), &after, Duration::from_millis(1500), &d);
        assert_eq!(e.evicted_keys_per_s, Some(2.0));

        // A restart (new run_id) with a lower counter is not differenced.
        let restarted = parse_info(
            &info_b()
                .replace("run_id:4f1c", "run_id:9999")
                .replace("evicted_keys:27", "evicted_keys:0"),
        );
        assert_eq!(
            derive(Some(&b), &restarted, second, &d).evicted_keys_per_s,
            None
        );

        // No limit: used memory reported, the limit absent.
        let unlimited = parse_info(&info_b().replace("maxmemory:4194304", "maxmemory:0"));
        let u = derive(Some(&a), &unlimited, second, &last);
        assert_eq!(u.used_memory_bytes, Some(1_048_576));
        assert_eq!(u.maxmemory_bytes, None);
        let snap = build_snapshot(
            "w1",
            1_700_000_000_000,
            &u,
            &ProbeWindow::new().stats(second),
        );
        let json = serde_json::to_value(&snap).unwrap();
        assert_eq!(json["used_memory_bytes"], 1_048_576);
        assert!(json.get("maxmemory_bytes").is_none());
        assert_eq!(json["evicted_keys_per_s"], 20.0);
    }

    #[test]
    fn derive_from_two_samples() {
        let a = parse_info(INFO_A);
        let b = parse_info(&info_b());
        let d = derive(
            Some(&a),
            &b,
            Duration::from_secs(1),
            &InfoDerived::default(),
        );
        assert!((d.cpu_usage - 0.3).abs() < 1e-9, "{}", d.cpu_usage);
        assert_eq!(d.queue_depth, 1);
        assert_eq!(d.cache_hit_rate, Some(0.75));
        assert_eq!(d.mem_available_ratio, Some(0.75));
        assert!(d.compacting);
        assert!(!d.under_repair);

        // No previous sample: CPU keeps the last value, hit rate omitted.
        let last = InfoDerived {
            cpu_usage: 0.4,
            ..InfoDerived::default()
        };
        let first = derive(None, &a, Duration::from_secs(1), &last);
        assert_eq!(first.cpu_usage, 0.4);
        assert_eq!(first.cache_hit_rate, None);
        assert_eq!(first.queue_depth, 3);

        // A restart (new run_id) is not differenced.
        let mut restarted = b.clone();
        restarted.run_id = Some("other".into());
        let r = derive(Some(&a), &restarted, Duration::from_secs(1), &last);
        assert_eq!(r.cpu_usage, 0.4);
        assert_eq!(r.cache_hit_rate, None);

        // Unlimited memory omits the ratio.
        let mut unlimited = b;
        unlimited.maxmemory = Some(0);
        let u = derive(Some(&a), &unlimited, Duration::from_secs(1), &last);
        assert_eq!(u.mem_available_ratio, None);
    }

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn snapshot_for_paused_worker_uses_last_info_and_timeouts() {
        // INFO timed out: the last derived values are reused as-is.
        let last = InfoDerived {
            cpu_usage: 0.12,
            queue_depth: 4,
            cache_hit_rate: Some(0.9),
            mem_available_ratio: Some(0.5),
            used_memory_bytes: Some(2_097_152),
            maxmemory_bytes: Some(4_194_304),
            evicted_keys_per_s: Some(12.5),
            compacting: true,
            under_repair: false,
        };
        let mut w = ProbeWindow::new();
        w.record(ProbeOutcome::Ok(ms(2)));
        for _ in 0..3 {
            w.record(ProbeOutcome::TimedOut);
        }
        let s = build_snapshot("w3", 1_700_000_000_123, &last, &w.stats(ms(250)));
        assert_eq!(s.worker_id, "w3");
        assert_eq!(s.timestamp_ms, 1_700_000_000_123);
        assert_eq!(s.cpu_usage, 0.12);
        assert_eq!(s.queue_depth, 4);
        assert_eq!(s.cache_hit_rate, Some(0.9));
        assert_eq!(s.mem_available_ratio, Some(0.5));
        assert_eq!(s.used_memory_bytes, Some(2_097_152));
        assert_eq!(s.maxmemory_bytes, Some(4_194_304));
        assert_eq!(s.evicted_keys_per_s, Some(12.5));
        assert!(s.compacting && !s.under_repair);
        assert_eq!(s.error_rate, 0.75);
        assert_eq!(s.rtt_ms_p99, 250.0);
        assert!((s.rtt_ms_avg - 188.0).abs() < 1e-9);
        assert_eq!(s.version_lag, 0);
        assert_eq!(s.region, None);
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["rtt_ms_p99"], 250.0);
        assert!(json.get("disk_free_ratio").is_none());
    }

    #[test]
    fn timestamps_strictly_increase() {
        let mut c = MonotonicStamp::default();
        assert_eq!(c.next(1000), 1000);
        assert_eq!(c.next(1000), 1001);
        assert_eq!(c.next(999), 1002);
        assert_eq!(c.next(2000), 2000);
        let mut top = MonotonicStamp::default();
        assert_eq!(top.next(u64::MAX), u64::MAX);
        assert_eq!(top.next(u64::MAX), u64::MAX);
        assert!(unix_ms_now() > 1_600_000_000_000);
    }
}
