//! `[scoring]`: the rule scorer's thresholds and deductions, with their
//! documented defaults.

use serde::{Deserialize, Serialize};

/// `[scoring]` section: the rule scorer (issue #2, "Rule scorer").
///
/// Deductions are in score points out of 100.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScoringConfig {
    /// Multiplier while `compacting`, in [0, 1]. Default 0.7.
    pub compacting_factor: f64,
    /// Multiplier while `under_repair`, in [0, 1]. Default 0.5.
    pub under_repair_factor: f64,
    /// CPU fraction above which points are deducted. Default 0.70.
    pub cpu_high: f64,
    /// Points deducted per `cpu_step` above `cpu_high`. Default 2.
    pub cpu_points_per_step: f64,
    /// CPU step, fraction. Default 0.05.
    pub cpu_step: f64,
    /// Cap on the CPU deduction, points. Default 30.
    pub cpu_max_deduct: f64,
    /// RTT p99 baseline, ms; above it points are deducted. Default 10.
    pub rtt_p99_baseline_ms: f64,
    /// Points per unit of `(p99 − baseline)/baseline`. Default 15.
    pub rtt_points_per_ratio: f64,
    /// Cap on the RTT deduction, points. Default 25.
    pub rtt_max_deduct: f64,
    /// Smoothed error rates below this are noise and deduct nothing, fraction. Default 0.001.
    pub error_rate_floor: f64,
    /// Points per unit of error rate (fraction). Default 500.
    pub error_points_per_rate: f64,
    /// Cap on the error deduction, points. Default 15.
    pub error_max_deduct: f64,
    /// Queue depth above which `queue_deduct` applies, requests. Default 20.
    pub queue_high_watermark: f64,
    /// Flat deduction above the queue watermark, points. Default 10.
    pub queue_deduct: f64,
    /// Available-memory fraction below which points are deducted. Default 0.15.
    pub mem_available_low: f64,
    /// Cap on the memory deduction (reached at 0 available), points. Default 10.
    pub mem_max_deduct: f64,
    /// Disk IO await above which points are deducted, ms. Default 50.
    pub disk_io_await_high_ms: f64,
    /// Points per `disk_io_await_high_ms` above the threshold, for reads. Default 5.
    pub disk_io_points_per_threshold: f64,
    /// Multiplier of the disk deduction for writes (PUT, DELETE). Default 2.
    pub disk_io_write_weight: f64,
    /// Cap on the disk deduction, points. Default 15.
    pub disk_io_max_deduct: f64,
    /// Network loss fraction above which points are deducted. Default 0.01.
    pub net_loss_high: f64,
    /// Points per unit of loss fraction above the threshold. Default 200.
    pub net_loss_points_per_rate: f64,
    /// Cap on the network deduction, points. Default 10.
    pub net_loss_max_deduct: f64,
    /// Cache hit fraction below which points are deducted. Default 0.70.
    pub cache_hit_low: f64,
    /// Points per unit of hit fraction below the threshold. Default 20.
    pub cache_hit_points_per_rate: f64,
    /// Cap on the cache deduction, points. Default 10.
    pub cache_hit_max_deduct: f64,
    /// Memtable size above which `memtable_deduct` applies, bytes. Default 2 GiB.
    pub memtable_high_bytes: u64,
    /// Flat deduction above the memtable threshold, points. Default 5.
    pub memtable_deduct: f64,
    /// Warm-up window after a worker's first registration, ms. Default 30_000.
    pub warmup_ms: u64,
    /// Warm-up deduction at registration, points; falls linearly to 0 over `warmup_ms`. Default 10.
    pub warmup_max_deduct: f64,
}

impl Default for ScoringConfig {
    fn default() -> Self {
        Self {
            compacting_factor: 0.7,
            under_repair_factor: 0.5,
            cpu_high: 0.70,
            cpu_points_per_step: 2.0,
            cpu_step: 0.05,
            cpu_max_deduct: 30.0,
            rtt_p99_baseline_ms: 10.0,
            rtt_points_per_ratio: 15.0,
            rtt_max_deduct: 25.0,
            error_rate_floor: 0.001,
            error_points_per_rate: 500.0,
            error_max_deduct: 15.0,
            queue_high_watermark: 20.0,
            queue_deduct: 10.0,
            mem_available_low: 0.15,
            mem_max_deduct: 10.0,
            disk_io_await_high_ms: 50.0,
            disk_io_points_per_threshold: 5.0,
            disk_io_write_weight: 2.0,
            disk_io_max_deduct: 15.0,
            net_loss_high: 0.01,
            net_loss_points_per_rate: 200.0,
            net_loss_max_deduct: 10.0,
            cache_hit_low: 0.70,
            cache_hit_points_per_rate: 20.0,
            cache_hit_max_deduct: 10.0,
            memtable_high_bytes: 2 * 1024 * 1024 * 1024,
            memtable_deduct: 5.0,
            warmup_ms: 30_000,
            warmup_max_deduct: 10.0,
        }
    }
}
