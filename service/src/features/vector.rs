//! Build one candidate's observation vector in [`FEATURES`] order.

use super::schema::{FEATURE_COUNT, FEATURES};
use crate::key::KeyFingerprint;
use crate::scoring::{RequestContext, RequestType};
use crate::state::WorkerView;

/// Everything one vector is built from.
#[derive(Debug, Clone, Copy)]
pub struct ObservationInputs<'a> {
    /// The parsed key.
    pub key: &'a KeyFingerprint<'a>,
    /// Estimated value size for the prefix, bytes.
    pub value_size_bytes: u64,
    /// Whether the prefix has its own size estimate.
    pub prefix_in_size_table: bool,
    /// Hotness level of the prefix, 0..=5.
    pub hotness_level: u8,
    /// The request context.
    pub ctx: &'a RequestContext,
    /// The worker's view, `None` for a worker that never reported.
    pub worker: Option<&'a WorkerView>,
    /// The worker's rule score, 0..=100.
    pub rule_score: f64,
    /// Distinct candidates in the request, >= 1.
    pub candidate_count: usize,
    /// This candidate's rank by rule score, 0 = best.
    pub rule_rank: usize,
    /// Best rule score among the candidates, 0..=100.
    pub best_rule_score: f64,
    /// Warm-up window, ms (0 = none).
    pub warmup_ms: u64,
    /// Server monotonic now, ms.
    pub now_ms: u64,
}

fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn bool01(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

/// The 42-feature vector for one candidate. Missing signals take the schema's
/// `impute` value; every value is finite and clamped into its [min, max].
pub fn observation(inp: &ObservationInputs<'_>) -> [f32; FEATURE_COUNT] {
    let mut v = [f64::NAN; FEATURE_COUNT];
    let k = inp.key;
    v[0] = (fnv1a(k.prefix) % 1024) as f64;
    v[1] = bool01(k.shard_id.is_some());
    v[2] = k.shard_id.map_or(f64::NAN, |s| (s % 1024) as f64);
    v[3] = k.len_bytes as f64;
    v[4] = k.segments as f64;
    v[5] = (inp.value_size_bytes.max(1) as f64).log2();
    v[6] = f64::from(inp.hotness_level);
    v[7] = bool01(inp.prefix_in_size_table);

    if let Some(w) = inp.worker {
        let s = &w.smoothed;
        v[8] = s.cpu_usage;
        v[9] = s.queue_depth;
        v[10] = s.rtt_ms_avg;
        v[11] = s.rtt_ms_p99;
        v[12] = s.error_rate;
        v[13] = bool01(w.compacting);
        v[14] = bool01(w.under_repair);
        v[15] = (w.version_lag as f64).ln_1p();
        v[16] = s.mem_available_ratio.unwrap_or(f64::NAN);
        v[17] = s.disk_io_await_ms.unwrap_or(f64::NAN);
        v[18] = s.net_loss_rate.unwrap_or(f64::NAN);
        v[19] = s.cache_hit_rate.unwrap_or(f64::NAN);
        v[20] = s.memtable_bytes.map_or(f64::NAN, |b| b / 1_073_741_824.0);
        v[21] = s.disk_free_ratio.unwrap_or(f64::NAN);
        v[22] = w.capacity;
        v[23] = w.age_ms(inp.now_ms) as f64;
        v[24] = if inp.warmup_ms == 0 {
            0.0
        } else {
            1.0 - (w.registered_for_ms(inp.now_ms) as f64 / inp.warmup_ms as f64).min(1.0)
        };
        v[25] = 1.0;
        v[27] = f64::from(s.missing_optional());
        v[38] = w.history.p99_slope_ms_per_s;
        v[39] = w.history.error_rate_stddev;
        v[40] = w.history.cache_hit_slope_per_s.unwrap_or(f64::NAN);
        v[41] = w.registered_for_ms(inp.now_ms) as f64 / 1000.0;
    }
    v[26] = inp.rule_score / 100.0;

    let rt = inp.ctx.request_type;
    v[28] = bool01(rt == Some(RequestType::Get));
    v[29] = bool01(rt == Some(RequestType::Put));
    v[30] = bool01(rt == Some(RequestType::Delete));
    v[31] = bool01(rt == Some(RequestType::Mget));
    v[32] = inp.ctx.timeout_ms.map_or(f64::NAN, |t| t as f64);
    v[33] = inp.ctx.batch_size.map_or(f64::NAN, f64::from);
    let worker_region = inp.worker.and_then(|w| w.region.as_deref());
    v[34] = match (inp.ctx.client_region.as_deref(), worker_region) {
        (Some(a), Some(b)) => bool01(a == b),
        _ => f64::NAN,
    };
    v[35] = inp.candidate_count as f64;
    v[36] = if inp.candidate_count > 1 {
        inp.rule_rank as f64 / (inp.candidate_count - 1) as f64
    } else {
        0.0
    };
    v[37] = (inp.best_rule_score - inp.rule_score).max(0.0) / 100.0;

    let mut out = [0f32; FEATURE_COUNT];
    for (i, spec) in FEATURES.iter().enumerate() {
        let x = if v[i].is_finite() {
            v[i] as f32
        } else {
            spec.impute
        };
        out[i] = x.clamp(spec.min, spec.max);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{KeyFingerprint, SecondSegmentSharding};
    use crate::state::{HistoryStats, Smoothed};
    use std::sync::Arc;

    fn view() -> WorkerView {
        WorkerView {
            worker_id: Arc::from("w1"),
            first_seen_ms: 1_000,
            last_receive_ms: 5_000,
            last_timestamp_ms: 1,
            reports: 3,
            smoothed: Smoothed {
                cpu_usage: 0.5,
                queue_depth: 5.0,
                rtt_ms_avg: 2.0,
                rtt_ms_p99: 12.5,
                error_rate: 0.01,
                cache_hit_rate: Some(0.9),
                ..Smoothed::default()
            },
            compacting: true,
            under_repair: false,
            version_lag: 0,
            region: Some(Arc::from("shanghai")),
            capacity: 2.0,
            cpu_clamped: false,
            history: HistoryStats::default(),
            penalty: crate::dynamics::PenaltyTracker::new(),
        }
    }

    fn inputs<'a>(
        key: &'a KeyFingerprint<'a>,
        ctx: &'a RequestContext,
        w: Option<&'a WorkerView>,
    ) -> ObservationInputs<'a> {
        ObservationInputs {
            key,
            value_size_bytes: 512,
            prefix_in_size_table: true,
            hotness_level: 2,
            ctx,
            worker: w,
            rule_score: 70.0,
            candidate_count: 3,
            rule_rank: 1,
            best_rule_score: 96.25,
            warmup_ms: 30_000,
            now_ms: 16_000,
        }
    }

    #[test]
    fn known_worker_values_land_in_documented_slots() {
        let key = KeyFingerprint::parse("user:12345:profile", &SecondSegmentSharding);
        let ctx = RequestContext {
            request_type: Some(RequestType::Put),
            client_region: Some("shanghai".into()),
            timeout_ms: Some(50),
            batch_size: None,
        };
        let w = view();
        let v = observation(&inputs(&key, &ctx, Some(&w)));
        assert_eq!(v[1], 1.0);
        assert_eq!(v[2], (12345 % 1024) as f32);
        assert_eq!(v[5], 9.0); // log2(512)
        assert_eq!(v[8], 0.5);
        assert_eq!(v[11], 12.5);
        assert_eq!(v[13], 1.0);
        assert_eq!(v[16], 0.15, "missing memory takes the imputed threshold");
        assert_eq!(v[19], 0.9);
        assert_eq!(v[22], 2.0);
        assert_eq!(v[23], 11_000.0);
        assert_eq!(v[24], 0.5); // 15 s of a 30 s warm-up remain
        assert_eq!(v[25], 1.0);
        assert_eq!(v[26], 0.7);
        assert_eq!(v[27], 5.0);
        assert_eq!(&v[28..32], &[0.0, 1.0, 0.0, 0.0]);
        assert_eq!(v[32], 50.0);
        assert_eq!(v[33], 1.0, "absent batch size imputes 1");
        assert_eq!(v[34], 1.0);
        assert_eq!(v[36], 0.5);
        assert!((v[37] - 0.2625).abs() < 1e-6);
        assert_eq!(v[40], 0.0, "one cache sample has no slope: imputed 0");
        assert_eq!(v[41], 15.0);
    }

    #[test]
    fn unknown_worker_is_imputed_pessimistically_never_nan() {
        let key = KeyFingerprint::parse("plain", &SecondSegmentSharding);
        let ctx = RequestContext::default();
        let v = observation(&inputs(&key, &ctx, None));
        assert!(v.iter().all(|x| x.is_finite()));
        assert_eq!(v[2], -1.0);
        assert_eq!(v[8], 0.70);
        assert_eq!(v[11], 10.0);
        assert_eq!(v[23], 10_000.0);
        assert_eq!(v[25], 0.0);
        assert_eq!(v[27], 6.0);
        assert_eq!(&v[28..32], &[0.0; 4]);
        assert_eq!(v[32], -1.0);
        assert_eq!(v[34], 0.5);
    }

    #[test]
    fn values_are_clamped_into_range() {
        let key = KeyFingerprint::parse("user:1", &SecondSegmentSharding);
        let ctx = RequestContext::default();
        let mut w = view();
        w.smoothed.rtt_ms_p99 = 1e12;
        let v = observation(&inputs(&key, &ctx, Some(&w)));
        assert_eq!(v[11], FEATURES[11].max);
    }
}
