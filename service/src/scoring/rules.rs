//! The rule scorer (issue #2, "Rule scorer"; design notes §2.2).
//!
//! Order: multiplicative health penalties (dead, compacting, under repair),
//! then capped deductions on smoothed signals (CPU, RTT p99, errors, queue,
//! then optional signals: memory, disk IO await, network loss, cache hit
//! rate, memtable), then the warm-up deduction, then a clamp to [0, 100].
//! A signal that was never reported deducts nothing.

use super::adjustment::Explained;
use super::context::RequestType;
use crate::config::ScoringConfig;
use crate::fmt::{num, pct};
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
}

/// Score one known worker. Returns the explained score and whether the
/// worker is alive (a dead worker scores 0 and is not eligible).
pub fn rule_score(view: &WorkerView, inp: &RuleInputs<'_>) -> (Explained, bool) {
    let c = inp.cfg;
    let mut e = Explained::new();
    let age = view.age_ms(inp.now_ms);
    if age > inp.dead_after_ms {
        e.multiply(
            "heartbeat_dead",
            0.0,
            format!(
                "last report {} s ago is older than the {} s liveness limit",
                num(age as f64 / 1000.0),
                num(inp.dead_after_ms as f64 / 1000.0)
            ),
            Some(age as f64),
        );
        return (e, false);
    }
    if view.compacting {
        e.multiply(
            "compacting",
            c.compacting_factor,
            format!("worker is compacting: score ×{}", num(c.compacting_factor)),
            Some(1.0),
        );
    }
    if view.under_repair {
        e.multiply(
            "under_repair",
            c.under_repair_factor,
            format!(
                "worker is under repair: score ×{}",
                num(c.under_repair_factor)
            ),
            Some(1.0),
        );
    }

    let s = &view.smoothed;
    if s.cpu_usage > c.cpu_high {
        let d =
            ((s.cpu_usage - c.cpu_high) / c.cpu_step * c.cpu_points_per_step).min(c.cpu_max_deduct);
        e.deduct(
            "cpu_high",
            d,
            format!(
                "CPU {} is above {}: {} points per {} over, at most {}",
                pct(s.cpu_usage),
                pct(c.cpu_high),
                num(c.cpu_points_per_step),
                pct(c.cpu_step),
                num(c.cpu_max_deduct)
            ),
            Some(s.cpu_usage),
        );
    }
    let base = c.rtt_p99_baseline_ms;
    if s.rtt_ms_p99 > base {
        let ratio = (s.rtt_ms_p99 - base) / base;
        let d = (ratio * c.rtt_points_per_ratio).min(c.rtt_max_deduct);
        e.deduct(
            "rtt_p99_high",
            d,
            format!(
                "RTT p99 {} ms is {} above the {} ms baseline",
                num(s.rtt_ms_p99),
                pct(ratio),
                num(base)
            ),
            Some(s.rtt_ms_p99),
        );
    }
    if s.error_rate >= c.error_rate_floor && s.error_rate > 0.0 {
        let d = (s.error_rate * c.error_points_per_rate).min(c.error_max_deduct);
        e.deduct(
            "errors",
            d,
            format!(
                "error rate {} costs {} points per 1%, at most {}",
                pct(s.error_rate),
                num(c.error_points_per_rate / 100.0),
                num(c.error_max_deduct)
            ),
            Some(s.error_rate),
        );
    }
    if s.queue_depth > c.queue_high_watermark {
        e.deduct(
            "queue_high",
            c.queue_deduct,
            format!(
                "queue depth {} is above the high watermark {}",
                num(s.queue_depth),
                num(c.queue_high_watermark)
            ),
            Some(s.queue_depth),
        );
    }
    optional_deductions(&mut e, view, inp);
    warmup(&mut e, view, inp);
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
            format!(
                "available memory {} is below {}",
                pct(m),
                pct(c.mem_available_low)
            ),
            Some(m),
        );
    }
    if let Some(d_ms) = s.disk_io_await_ms {
        let t = c.disk_io_await_high_ms;
        if d_ms > t {
            let write = inp.request_type.is_some_and(RequestType::is_write);
            let weight = if write { c.disk_io_write_weight } else { 1.0 };
            let d = ((d_ms - t) / t * c.disk_io_points_per_threshold * weight)
                .min(c.disk_io_max_deduct);
            e.deduct(
                "disk_io_slow",
                d,
                format!(
                    "disk IO await {} ms is above {} ms{}",
                    num(d_ms),
                    num(t),
                    if write {
                        format!(" (weighted ×{} for a write)", num(weight))
                    } else {
                        String::new()
                    }
                ),
                Some(d_ms),
            );
        }
    }
    if let Some(l) = s.net_loss_rate
        && l > c.net_loss_high
    {
        let d = ((l - c.net_loss_high) * c.net_loss_points_per_rate).min(c.net_loss_max_deduct);
        e.deduct(
            "network_loss",
            d,
            format!("network loss {} is above {}", pct(l), pct(c.net_loss_high)),
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
            format!(
                "cache hit rate {} is below {}",
                pct(h),
                pct(c.cache_hit_low)
            ),
            Some(h),
        );
    }
    if let Some(b) = s.memtable_bytes
        && b > c.memtable_high_bytes as f64
    {
        e.deduct(
            "memtable_large",
            c.memtable_deduct,
            format!(
                "memtable {} MiB is above {} MiB (a flush is due)",
                num(b / 1_048_576.0),
                num(c.memtable_high_bytes as f64 / 1_048_576.0)
            ),
            Some(b),
        );
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
        e.deduct(
            "warming_up",
            c.warmup_max_deduct * remaining,
            format!(
                "registered {} s ago, within the {} s warm-up: {} points falling to 0",
                num(elapsed as f64 / 1000.0),
                num(c.warmup_ms as f64 / 1000.0),
                num(c.warmup_max_deduct)
            ),
            Some(elapsed as f64),
        );
    }
}
