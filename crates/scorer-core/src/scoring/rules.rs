//! The rule scorer (issue #2, "Rule scorer"; design notes §2.2).
//!
//! Order: multiplicative health penalties (dead, compacting, under repair),
//! then capped deductions on smoothed signals (CPU, RTT p99, errors, queue,
//! then optional signals: memory, disk IO await, network loss, cache hit
//! rate, memtable), then the warm-up deduction, then a clamp to [0, 100].
//! A signal that was never reported deducts nothing.

use super::ScoringConfig;
use super::adjustment::Explained;
use super::context::RequestType;
use super::reason::{Reason, ReasonKind as K};
use crate::state::WorkerView;

/// What the rule scorer needs besides the worker's view.
#[derive(Debug, Clone, Copy)]
pub struct RuleInputs<'a> {
    /// Scoring thresholds.
    pub cfg: &'a ScoringConfig,
    /// Liveness limit, ms (`telemetry.dead_after_ms`).
    pub dead_after_ms: u64,
    /// Operation kind, when known (writes weigh disk IO more).
    pub request_type: Option<RequestType>,
    /// Server monotonic now, ms.
    pub now_ms: u64,
    /// Apply the warm-up deduction. Off when feeding the penalty state
    /// machine: a new worker's warm-up is not a health signal.
    pub warmup: bool,
}

fn r(kind: K, a: f64, b: f64, c: f64, d: f64, e: f64) -> Reason {
    Reason::new(kind, [a, b, c, d, e])
}

/// Score one known worker. Returns the explained score and whether the
/// worker is alive (a dead worker scores 0 and is not eligible).
pub fn rule_score(view: &WorkerView, inp: &RuleInputs<'_>) -> (Explained, bool) {
    rule_score_with(view, inp, true)
}

/// [`rule_score`], recording the adjustments only when `explain` (the same
/// score either way, bit for bit).
pub fn rule_score_with(
    view: &WorkerView,
    inp: &RuleInputs<'_>,
    explain: bool,
) -> (Explained, bool) {
    let c = inp.cfg;
    let mut e = Explained::with_explanation(explain);
    let age = view.age_ms(inp.now_ms);
    if age > inp.dead_after_ms {
        let (age_s, limit_s) = (age as f64 / 1000.0, inp.dead_after_ms as f64 / 1000.0);
        e.multiply(
            "heartbeat_dead",
            0.0,
            r(K::HeartbeatDead, age_s, limit_s, 0.0, 0.0, 0.0),
            Some(age as f64),
        );
        return (e, false);
    }
    if view.compacting {
        let f = c.compacting_factor;
        e.multiply(
            "compacting",
            f,
            r(K::Compacting, f, 0.0, 0.0, 0.0, 0.0),
            Some(1.0),
        );
    }
    if view.under_repair {
        let f = c.under_repair_factor;
        e.multiply(
            "under_repair",
            f,
            r(K::UnderRepair, f, 0.0, 0.0, 0.0, 0.0),
            Some(1.0),
        );
    }

    let s = &view.smoothed;
    if s.cpu_usage > c.cpu_high {
        let d =
            ((s.cpu_usage - c.cpu_high) / c.cpu_step * c.cpu_points_per_step).min(c.cpu_max_deduct);
        let why = r(
            K::CpuHigh,
            s.cpu_usage,
            c.cpu_high,
            c.cpu_points_per_step,
            c.cpu_step,
            c.cpu_max_deduct,
        );
        e.deduct("cpu_high", d, why, Some(s.cpu_usage));
    }
    let base = c.rtt_p99_baseline_ms;
    if s.rtt_ms_p99 > base {
        let ratio = (s.rtt_ms_p99 - base) / base;
        let d = (ratio * c.rtt_points_per_ratio).min(c.rtt_max_deduct);
        let why = r(K::RttHigh, s.rtt_ms_p99, ratio, base, 0.0, 0.0);
        e.deduct("rtt_p99_high", d, why, Some(s.rtt_ms_p99));
    }
    if s.error_rate >= c.error_rate_floor && s.error_rate > 0.0 {
        let d = (s.error_rate * c.error_points_per_rate).min(c.error_max_deduct);
        let why = r(
            K::Errors,
            s.error_rate,
            c.error_points_per_rate / 100.0,
            c.error_max_deduct,
            0.0,
            0.0,
        );
        e.deduct("errors", d, why, Some(s.error_rate));
    }
    if s.queue_depth > c.queue_high_watermark {
        let why = r(
            K::QueueHigh,
            s.queue_depth,
            c.queue_high_watermark,
            0.0,
            0.0,
            0.0,
        );
        e.deduct("queue_high", c.queue_deduct, why, Some(s.queue_depth));
    }
    optional_deductions(&mut e, view, inp);
    if inp.warmup {
        warmup(&mut e, view, inp);
    }
    e.clamp();
    (e, true)
}

fn optional_deductions(e: &mut Explained, view: &WorkerView, inp: &RuleInputs<'_>) {
    let c = inp.cfg;
    let s = &view.smoothed;
    if let Some(m) = s.mem_available_ratio
        && m < c.mem_available_low
        && c.mem_available_low > 0.0
    {
        let d = (c.mem_available_low - m) / c.mem_available_low * c.mem_max_deduct;
        e.deduct(
            "memory_low",
            d,
            r(K::MemoryLow, m, c.mem_available_low, 0.0, 0.0, 0.0),
            Some(m),
        );
    }
    if let Some(d_ms) = s.disk_io_await_ms
        && d_ms > c.disk_io_await_high_ms
    {
        let t = c.disk_io_await_high_ms;
        let write = inp.request_type.is_some_and(RequestType::is_write);
        let weight = if write { c.disk_io_write_weight } else { 1.0 };
        let d =
            ((d_ms - t) / t * c.disk_io_points_per_threshold * weight).min(c.disk_io_max_deduct);
        let shown_weight = if write { weight } else { 0.0 };
        e.deduct(
            "disk_io_slow",
            d,
            r(K::DiskSlow, d_ms, t, shown_weight, 0.0, 0.0),
            Some(d_ms),
        );
    }
    if let Some(l) = s.net_loss_rate
        && l > c.net_loss_high
    {
        let d = ((l - c.net_loss_high) * c.net_loss_points_per_rate).min(c.net_loss_max_deduct);
        e.deduct(
            "network_loss",
            d,
            r(K::NetworkLoss, l, c.net_loss_high, 0.0, 0.0, 0.0),
            Some(l),
        );
    }
    if let Some(h) = s.cache_hit_rate
        && h < c.cache_hit_low
    {
        let d = ((c.cache_hit_low - h) * c.cache_hit_points_per_rate).min(c.cache_hit_max_deduct);
        e.deduct(
            "cache_cold",
            d,
            r(K::CacheCold, h, c.cache_hit_low, 0.0, 0.0, 0.0),
            Some(h),
        );
    }
    if let Some(b) = s.memtable_bytes
        && b > c.memtable_high_bytes as f64
    {
        let mib = 1_048_576.0;
        let why = r(
            K::MemtableLarge,
            b / mib,
            c.memtable_high_bytes as f64 / mib,
            0.0,
            0.0,
            0.0,
        );
        e.deduct("memtable_large", c.memtable_deduct, why, Some(b));
    }
}

fn warmup(e: &mut Explained, view: &WorkerView, inp: &RuleInputs<'_>) {
    let c = inp.cfg;
    if c.warmup_ms == 0 {
        return;
    }
    let elapsed = view.registered_for_ms(inp.now_ms);
    if elapsed < c.warmup_ms {
        let remaining = 1.0 - elapsed as f64 / c.warmup_ms as f64;
        let why = r(
            K::WarmingUp,
            elapsed as f64 / 1000.0,
            c.warmup_ms as f64 / 1000.0,
            c.warmup_max_deduct,
            0.0,
            0.0,
        );
        e.deduct(
            "warming_up",
            c.warmup_max_deduct * remaining,
            why,
            Some(elapsed as f64),
        );
    }
}
