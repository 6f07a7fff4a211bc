//! Build one candidate's observation vector in [`FEATURES`] order.

use super::schema::{FEATURE_COUNT, FEATURES, PREFIX_HIT_RATE_FEATURE, WARM_PROBABILITY_FEATURE};
use crate::locality::LocalityEstimate;
use crate::scoring::{RequestContext, RequestType};
use crate::state::WorkerView;

/// The service's own evidence and cost for one candidate at decision time
/// (features 0..=4 and 7), as the cost stage used them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CandidateEvidence {
    /// Outstanding picks.
    pub outstanding: u32,
    /// Service-time estimate the cost used, ms (the pool's prior without outcomes).
    pub service_time_ms: f64,
    /// Outcomes seen.
    pub outcomes: u64,
    /// Unseen backlog, requests.
    pub unseen_backlog: f64,
    /// Observed failure rate, fraction 0..=1.
    pub observed_failure_rate: f64,
    /// The rules' routing cost E (feature 7 is its ln; the model's target
    /// is the outcome's latency relative to it).
    pub cost: f64,
    /// The request's expected latency, ms (not a feature).
    pub expected_latency_ms: f64,
}

/// Everything one vector is built from.
#[derive(Debug, Clone, Copy)]
pub struct ObservationInputs<'a> {
    /// Estimated value size for the prefix, bytes.
    pub value_size_bytes: u64,
    /// The request context.
    pub ctx: &'a RequestContext,
    /// The worker's view, `None` for a worker that never reported.
    pub worker: Option<&'a WorkerView>,
    /// The service's evidence and cost for the worker, `None` when the cost
    /// did not run (unknown worker, panic mode).
    pub evidence: Option<CandidateEvidence>,
    /// What the cost's locality term knew of the key on the worker
    /// (feature `warm_probability`), `None` without it.
    pub locality: Option<LocalityEstimate>,
    /// The decayed hit rate of the key's prefix on the worker, fraction
    /// (feature `prefix_hit_rate`), `None` without outcomes that said hit
    /// or miss.
    pub prefix_hit_rate: Option<f64>,
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

fn bool01(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

/// The per-candidate inputs of a vector; the rest is request-level (see
/// [`RequestFeatures`]).
#[derive(Debug, Clone, Copy)]
pub struct CandidateInputs<'a> {
    /// The worker's view, `None` for a worker that never reported.
    pub worker: Option<&'a WorkerView>,
    /// The service's evidence and cost for the worker (see [`ObservationInputs::evidence`]).
    pub evidence: Option<CandidateEvidence>,
    /// The key's locality on the worker (see [`ObservationInputs::locality`]).
    pub locality: Option<LocalityEstimate>,
    /// The prefix's hit rate on the worker (see [`ObservationInputs::prefix_hit_rate`]).
    pub prefix_hit_rate: Option<f64>,
    /// The worker's rule score, 0..=100.
    pub rule_score: f64,
    /// This candidate's rank by rule score, 0 = best.
    pub rule_rank: usize,
    /// Best rule score among the candidates, 0..=100.
    pub best_rule_score: f64,
}

/// Feature `i`'s final value: `x` as f32 if finite, else the schema's
/// `impute`, clamped into [min, max].
#[inline(always)]
fn finish(i: usize, x: f64) -> f32 {
    let spec = &FEATURES[i];
    let x = if x.is_finite() { x as f32 } else { spec.impute };
    // `f32::clamp` without its `min <= max` assertion (a tested invariant of
    // the schema): same result bit for bit, no panic path.
    let x = if x < spec.min { spec.min } else { x };
    if x > spec.max { spec.max } else { x }
}

/// The request-level features of a decision (value size, request context:
/// indices 5, 28..=30, 32 and 33), imputed and clamped once,
/// then completed per candidate by [`RequestFeatures::observation`].
/// Building one per decision instead of recomputing them for every
/// candidate halves the vector's cost.
#[derive(Debug, Clone, Copy)]
pub struct RequestFeatures<'a> {
    base: [f32; FEATURE_COUNT],
    client_region: Option<&'a str>,
    is_put: bool,
    candidate_count: usize,
    warmup_ms: u64,
    now_ms: u64,
}

impl<'a> RequestFeatures<'a> {
    /// The request-level part of `inp`; its per-candidate fields (`worker`,
    /// `evidence`, `locality`, `prefix_hit_rate`, `rule_score`, `rule_rank`,
    /// `best_rule_score`) are not read.
    pub fn new(inp: &ObservationInputs<'a>) -> Self {
        let mut base = [0f32; FEATURE_COUNT];
        base[5] = finish(5, (inp.value_size_bytes.max(1) as f64).log2());
        let rt = inp.ctx.request_type;
        base[28] = finish(28, bool01(rt == Some(RequestType::Get)));
        base[29] = finish(29, bool01(rt == Some(RequestType::Put)));
        base[30] = finish(30, bool01(rt == Some(RequestType::Delete)));
        base[32] = finish(32, inp.ctx.timeout_ms.map_or(f64::NAN, |t| t as f64));
        base[33] = finish(33, inp.ctx.batch_size.map_or(f64::NAN, f64::from));
        RequestFeatures {
            base,
            client_region: inp.ctx.client_region.as_deref(),
            is_put: rt == Some(RequestType::Put),
            candidate_count: inp.candidate_count,
            warmup_ms: inp.warmup_ms,
            now_ms: inp.now_ms,
        }
    }

    /// One candidate's full vector: the request-level values plus the
    /// worker's (0..=4, 6..=27, 31, 34..=41). Every value is finite and clamped.
    pub fn observation(&self, c: &CandidateInputs<'_>) -> [f32; FEATURE_COUNT] {
        let mut v = self.base;
        let now_ms = self.now_ms;
        match c.evidence {
            Some(ev) => {
                v[0] = finish(0, f64::from(ev.outstanding));
                v[1] = finish(1, ev.service_time_ms);
                v[2] = finish(2, (ev.outcomes as f64).ln_1p());
                v[3] = finish(3, ev.unseen_backlog);
                v[4] = finish(4, ev.observed_failure_rate);
                v[7] = finish(7, ev.cost.ln());
            }
            None => {
                for i in [0, 1, 2, 3, 4, 7] {
                    v[i] = finish(i, f64::NAN);
                }
            }
        }
        match c.worker {
            Some(w) => {
                let s = &w.smoothed;
                v[6] = finish(6, bool01(self.is_put && w.compacting));
                v[8] = finish(8, s.cpu_usage);
                v[9] = finish(9, s.queue_depth);
                v[10] = finish(10, s.rtt_ms_avg);
                v[11] = finish(11, s.rtt_ms_p99);
                v[12] = finish(12, s.error_rate);
                v[13] = finish(13, bool01(w.compacting));
                v[14] = finish(14, bool01(w.under_repair));
                v[15] = finish(15, (w.version_lag as f64).ln_1p());
                v[16] = finish(16, s.mem_available_ratio.unwrap_or(f64::NAN));
                v[17] = finish(17, s.disk_io_await_ms.unwrap_or(f64::NAN));
                v[18] = finish(18, s.net_loss_rate.unwrap_or(f64::NAN));
                v[19] = finish(19, s.cache_hit_rate.unwrap_or(f64::NAN));
                v[20] = finish(
                    20,
                    s.memtable_bytes.map_or(f64::NAN, |b| b / 1_073_741_824.0),
                );
                v[21] = finish(21, s.disk_free_ratio.unwrap_or(f64::NAN));
                v[22] = finish(22, w.capacity);
                v[23] = finish(23, w.age_ms(now_ms) as f64);
                let warmup_left = if self.warmup_ms == 0 {
                    0.0
                } else {
                    1.0 - (w.registered_for_ms(now_ms) as f64 / self.warmup_ms as f64).min(1.0)
                };
                v[24] = finish(24, warmup_left);
                v[25] = finish(25, 1.0);
                v[27] = finish(27, f64::from(s.missing_optional()));
                v[38] = finish(38, w.history.p99_slope_ms_per_s);
                v[39] = finish(39, w.history.error_rate_stddev);
                v[40] = finish(40, w.history.cache_hit_slope_per_s.unwrap_or(f64::NAN));
                v[41] = finish(41, w.registered_for_ms(now_ms) as f64 / 1000.0);
            }
            None => {
                for i in (6..=25).chain([27, 38, 39, 40, 41]) {
                    v[i] = finish(i, f64::NAN);
                }
            }
        }
        v[26] = finish(26, c.rule_score / 100.0);
        let (warm, prefix) = (WARM_PROBABILITY_FEATURE, PREFIX_HIT_RATE_FEATURE);
        v[warm] = finish(warm, c.locality.map_or(f64::NAN, |l| l.p_warm));
        v[prefix] = finish(prefix, c.prefix_hit_rate.unwrap_or(f64::NAN));
        let worker_region = c.worker.and_then(|w| w.region.as_deref());
        v[34] = finish(
            34,
            match (self.client_region, worker_region) {
                (Some(a), Some(b)) => bool01(a == b),
                _ => f64::NAN,
            },
        );
        let rank = if self.candidate_count > 1 {
            c.rule_rank as f64 / (self.candidate_count - 1) as f64
        } else {
            0.0
        };
        v[36] = finish(36, rank);
        v[37] = finish(37, (c.best_rule_score - c.rule_score).max(0.0) / 100.0);
        v
    }
}

/// The 42-feature vector for one candidate. Missing signals take the schema's
/// `impute` value; every value is finite and clamped into its [min, max].
/// Scoring many candidates of one request, build a [`RequestFeatures`] once
/// and call its [`observation`](RequestFeatures::observation) per candidate
/// (same values).
pub fn observation(inp: &ObservationInputs<'_>) -> [f32; FEATURE_COUNT] {
    RequestFeatures::new(inp).observation(&CandidateInputs {
        worker: inp.worker,
        evidence: inp.evidence,
        locality: inp.locality,
        prefix_hit_rate: inp.prefix_hit_rate,
        rule_score: inp.rule_score,
        rule_rank: inp.rule_rank,
        best_rule_score: inp.best_rule_score,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{HistoryStats, Smoothed};
    use std::sync::Arc;

    fn view() -> WorkerView {
        WorkerView {
            worker_id: Arc::from("w1"),
            first_seen_ms: 1_000,
            revived_ms: None,
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
            digest: None,
            derived: None,
        }
    }

    fn evidence() -> CandidateEvidence {
        CandidateEvidence {
            outstanding: 4,
            service_time_ms: 2.5,
            outcomes: 99,
            unseen_backlog: 1.5,
            observed_failure_rate: 0.25,
            cost: std::f64::consts::E * 10.0,
            expected_latency_ms: 12.0,
        }
    }

    fn locality() -> LocalityEstimate {
        LocalityEstimate {
            routed_age_ms: Some(500),
            home: false,
            bucket: 0,
            p_warm: 0.8125,
            p_routing: 0.8125,
            digest: None,
            hit_ms: 1.0,
            miss_ms: 10.0,
            priced: true,
        }
    }

    fn inputs<'a>(ctx: &'a RequestContext, w: Option<&'a WorkerView>) -> ObservationInputs<'a> {
        ObservationInputs {
            value_size_bytes: 512,
            ctx,
            worker: w,
            evidence: w.map(|_| evidence()),
            locality: w.map(|_| locality()),
            prefix_hit_rate: w.map(|_| 0.375),
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
        let ctx = RequestContext {
            request_type: Some(RequestType::Put),
            client_region: Some("shanghai".into()),
            timeout_ms: Some(50),
            batch_size: None,
        };
        let w = view();
        let v = observation(&inputs(&ctx, Some(&w)));
        assert_eq!(&v[0..5], &[4.0, 2.5, 100f32.ln(), 1.5, 0.25]);
        assert_eq!(v[5], 9.0); // log2(512)
        assert_eq!(v[6], 1.0, "a PUT to a compacting worker");
        assert!((v[7] - (1.0 + 10f32.ln())).abs() < 1e-6, "ln of E");
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
        assert_eq!(&v[28..31], &[0.0, 1.0, 0.0]);
        assert_eq!(v[31], 0.8125, "the cost's P(warm) of the key here");
        assert_eq!(v[32], 50.0);
        assert_eq!(v[33], 1.0, "absent batch size imputes 1");
        assert_eq!(v[34], 1.0);
        assert_eq!(v[35], 0.375, "the prefix's hit rate here");
        assert_eq!(v[36], 0.5);
        assert!((v[37] - 0.2625).abs() < 1e-6);
        assert_eq!(v[40], 0.0, "one cache sample has no slope: imputed 0");
        assert_eq!(v[41], 15.0);
    }

    #[test]
    fn unknown_worker_is_imputed_pessimistically_never_nan() {
        let ctx = RequestContext::default();
        let v = observation(&inputs(&ctx, None));
        assert!(v.iter().all(|x| x.is_finite()));
        assert_eq!(&v[0..5], &[0.0, 10.0, 0.0, 0.0, 0.0]);
        assert_eq!(v[6], 0.0);
        assert_eq!(v[7], FEATURES[7].impute);
        assert!((v[7] - 10f32.ln()).abs() < 1e-6, "no cost: E imputes 10 ms");
        assert_eq!(v[8], 0.70);
        assert_eq!(v[11], 10.0);
        assert_eq!(v[23], 10_000.0);
        assert_eq!(v[25], 0.0);
        assert_eq!(v[27], 6.0);
        assert_eq!(&v[28..31], &[0.0; 3]);
        assert_eq!(v[32], -1.0);
        assert_eq!(v[34], 0.5);
        assert_eq!((v[31], v[35]), (-1.0, -1.0), "no locality: -1");
    }

    #[test]
    fn a_known_worker_without_locality_imputes_it_apart_from_a_cold_key() {
        let ctx = RequestContext::default();
        let w = view();
        let mut inp = inputs(&ctx, Some(&w));
        inp.locality = None;
        inp.prefix_hit_rate = None;
        let missing = observation(&inp);
        assert_eq!((missing[31], missing[35]), (-1.0, -1.0));
        inp.locality = Some(LocalityEstimate {
            p_warm: 0.0,
            ..locality()
        });
        inp.prefix_hit_rate = Some(0.0);
        let cold = observation(&inp);
        assert_eq!((cold[31], cold[35]), (0.0, 0.0), "cold is not missing");
        // Out-of-range estimates are clamped into the fraction's range.
        inp.prefix_hit_rate = Some(1.5);
        assert_eq!(observation(&inp)[35], 1.0);
    }

    #[test]
    fn values_are_clamped_into_range() {
        let ctx = RequestContext::default();
        let mut w = view();
        w.smoothed.rtt_ms_p99 = 1e12;
        let mut inp = inputs(&ctx, Some(&w));
        inp.evidence = Some(CandidateEvidence {
            cost: 0.0,
            ..evidence()
        });
        let v = observation(&inp);
        assert_eq!(v[11], FEATURES[11].max);
        assert_eq!(v[7], FEATURES[7].impute, "ln 0 is not finite: imputed");
    }

    #[test]
    fn one_request_part_serves_every_candidate() {
        let ctx = RequestContext {
            request_type: Some(RequestType::Get),
            client_region: Some("shanghai".into()),
            timeout_ms: Some(20),
            batch_size: Some(4),
        };
        let w1 = view();
        let mut w2 = view();
        w2.smoothed.cpu_usage = 0.95;
        w2.region = Some(Arc::from("beijing"));
        w2.smoothed.cache_hit_rate = None;
        let req = RequestFeatures::new(&inputs(&ctx, None));
        // Known, unknown, other known: nothing carries over between candidates.
        for (w, score, rank) in [(Some(&w1), 70.0, 0), (None, 0.0, 2), (Some(&w2), 40.0, 1)] {
            let mut one = inputs(&ctx, w);
            one.rule_score = score;
            one.rule_rank = rank;
            let reused = req.observation(&CandidateInputs {
                worker: w,
                evidence: one.evidence,
                locality: one.locality,
                prefix_hit_rate: one.prefix_hit_rate,
                rule_score: score,
                rule_rank: rank,
                best_rule_score: one.best_rule_score,
            });
            let fresh = observation(&one);
            assert_eq!(reused.map(f32::to_bits), fresh.map(f32::to_bits));
        }
        let v2 = req.observation(&CandidateInputs {
            worker: Some(&w2),
            evidence: None,
            locality: None,
            prefix_hit_rate: None,
            rule_score: 40.0,
            rule_rank: 1,
            best_rule_score: 96.25,
        });
        assert_eq!(v2[8], 0.95);
        assert_eq!(v2[19], FEATURES[19].impute);
        assert_eq!(v2[34], 0.0, "different region");
        assert_eq!(v2[28], 1.0, "request type is request-level");
        assert_eq!(v2[6], 0.0, "a GET is never put_x_compacting");
    }
}
