//! The routing cost of sending one request to one worker, the request's
//! expected latency there, and the score lines that explain the cost.
//!
//! ```text
//! E = (service_time × (1 + outstanding + unseen)^b + head_of_line)
//!       × snapshot factors / (health × slow_start^b)
//!       × (1 + p / (1 − p) × penalty / L)^b
//! ```
//!
//! where `L = service_time × (1 + outstanding + unseen) / (health ×
//! slow_start)` is the expected latency itself. At `b = 1`, `E` is the
//! expected latency of the request, failed attempts included; at the
//! default `b = 3` it is C3's cubic cost, which orders workers by latency
//! with queues weighing more, and is not a time (a worker with a 2 ms
//! service time and 5 requests ahead costs 432, for a 12 ms latency).
//! [`apply_cost`] returns both ([`CostEstimate`]): `cost`, `E` at the
//! configured `b`, which ranks, and `expected_latency_ms`, `E` at `b = 1`,
//! which is what a request can expect, in ms.
//!
//! * `service_time`: the worker's peak-EWMA service time from outcomes
//!   ([`crate::dynamics::evidence`]), or the pool's median without outcomes.
//!   For a key with locality evidence it is the key's expected service
//!   time there, `P(warm) × hit time + (1 − P(warm)) × miss time`
//!   ([`crate::locality`]): a warm worker wins until its queue costs more
//!   than a miss elsewhere.
//! * `head_of_line`: the time the request in service has run beyond one
//!   service time, added: a request running long is likely large, and the
//!   queue behind it waits for its remaining time.
//! * `outstanding`: the service's exact count of the worker's picks not yet
//!   answered; `unseen`: the reported queue beyond them (C3's concurrency
//!   compensation). With `b = 1` this is peak-EWMA's `rtt × (in_flight + 1)`
//!   (tower, Finagle) on a service time that excludes the wait, i.e. the
//!   expected completion time on a one-at-a-time worker. The default `b = 3`
//!   is C3's: it makes a queue cost more than a noisy speed estimate saves,
//!   which measured better in every simulator scenario (`docs/scoring.md`,
//!   "Routing cost", gives the figures).
//! * `failures`: with failure rate `p` a request takes `1 / (1 − p)`
//!   attempts, `p / (1 − p)` of them failed, each costing the penalty
//!   latency (the request's timeout), so a worker that fails fast is never
//!   cheap (gRPC ORCA's error-utilisation penalty, Envoy's success-rate
//!   ejection). The rate is the larger of the reported one (trusted as its
//!   snapshot is fresh) and the observed one.
//! * `snapshot factors`: compaction (writes suffer more than reads) and CPU
//!   saturation, bounded multipliers that fade with the snapshot's age.
//! * `health`: the rule score / 100, its deductions counted by the
//!   snapshot's trust `exp(−age / snapshot_trust_ms)`: fresh local evidence
//!   outweighs an old snapshot.
//!
//! The score is `100 × fastest_service_time / E`: the rule score, then one
//! multiplicative line per factor, so the lines replay exactly to the final
//! score and the final scores order the candidates exactly as `E` does.

use serde::{Deserialize, Serialize};

use super::adjustment::Explained;
use super::context::RequestType;
use super::reason::{Reason, ReasonKind as K};
use crate::locality::LocalityEstimate;

/// Default [`CostConfig::exponent`].
pub const DEFAULT_COST_EXPONENT: f64 = 3.0;
/// Default [`CostConfig::snapshot_trust_ms`], ms.
pub const DEFAULT_SNAPSHOT_TRUST_MS: u64 = 1_000;
/// Default [`CostConfig::compaction_write_factor`].
pub const DEFAULT_COMPACTION_WRITE_FACTOR: f64 = 1.5;
/// Default [`CostConfig::compaction_read_factor`].
pub const DEFAULT_COMPACTION_READ_FACTOR: f64 = 1.1;
/// Default [`CostConfig::cpu_saturated`], fraction.
pub const DEFAULT_CPU_SATURATED: f64 = 0.95;
/// Default [`CostConfig::cpu_saturated_factor`].
pub const DEFAULT_CPU_SATURATED_FACTOR: f64 = 1.2;
/// Default [`CostConfig::max_failure_rate`], fraction.
pub const DEFAULT_MAX_FAILURE_RATE: f64 = 0.95;

/// `[cost]`: the shape of the routing cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CostConfig {
    /// `b`, the power of the queue term, within 0.5..=4. Default 3 (C3's
    /// choice; measured best of 1, 2 and 3 in the simulator, see
    /// `docs/scoring.md`).
    pub exponent: f64,
    /// Time constant of a snapshot's influence, ms, `>= 1`: at age `t` its
    /// deductions and factors count `exp(−t / snapshot_trust_ms)`. Default 1 000.
    pub snapshot_trust_ms: u64,
    /// Cost factor of a write on a compacting worker, within 1..=10. Default 1.5.
    pub compaction_write_factor: f64,
    /// Cost factor of a read (or an untyped request) on a compacting
    /// worker, within 1..=10. Default 1.1.
    pub compaction_read_factor: f64,
    /// CPU at or above this is saturated, fraction 0..=1. Default 0.95.
    pub cpu_saturated: f64,
    /// Cost factor of a saturated CPU, within 1..=10. Default 1.2.
    pub cpu_saturated_factor: f64,
    /// Failure rates are capped here, fraction within 0..1, so the attempts
    /// factor stays finite (at most 20 with the default 0.95).
    pub max_failure_rate: f64,
}

impl Default for CostConfig {
    fn default() -> Self {
        Self {
            exponent: DEFAULT_COST_EXPONENT,
            snapshot_trust_ms: DEFAULT_SNAPSHOT_TRUST_MS,
            compaction_write_factor: DEFAULT_COMPACTION_WRITE_FACTOR,
            compaction_read_factor: DEFAULT_COMPACTION_READ_FACTOR,
            cpu_saturated: DEFAULT_CPU_SATURATED,
            cpu_saturated_factor: DEFAULT_CPU_SATURATED_FACTOR,
            max_failure_rate: DEFAULT_MAX_FAILURE_RATE,
        }
    }
}

impl CostConfig {
    /// Checks the fields; `Err` names the bad key.
    pub fn validate(&self) -> Result<(), String> {
        if !(0.5..=4.0).contains(&self.exponent) {
            return Err(format!(
                "exponent must be within 0.5..=4, got {}",
                self.exponent
            ));
        }
        if self.snapshot_trust_ms == 0 {
            return Err("snapshot_trust_ms must be >= 1, got 0".into());
        }
        for (k, v) in [
            ("compaction_write_factor", self.compaction_write_factor),
            ("compaction_read_factor", self.compaction_read_factor),
            ("cpu_saturated_factor", self.cpu_saturated_factor),
        ] {
            if !(1.0..=10.0).contains(&v) {
                return Err(format!("{k} must be within 1..=10, got {v}"));
            }
        }
        if !(0.0..=1.0).contains(&self.cpu_saturated) {
            return Err(format!(
                "cpu_saturated must be within 0..=1, got {}",
                self.cpu_saturated
            ));
        }
        if !(0.0..1.0).contains(&self.max_failure_rate) {
            return Err(format!(
                "max_failure_rate must be within 0..1, got {}",
                self.max_failure_rate
            ));
        }
        Ok(())
    }

    /// The trust in a snapshot `age_ms` old, fraction 0..=1.
    pub fn trust(&self, age_ms: u64) -> f64 {
        (-(age_ms as f64) / self.snapshot_trust_ms as f64).exp()
    }
}

/// What the cost of one candidate is made of.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostInputs {
    /// Service-time estimate, ms (> 0).
    pub service_ms: f64,
    /// Whether `service_ms` is the pool's prior (no outcomes yet).
    pub service_is_prior: bool,
    /// Outcomes behind the estimate.
    pub outcomes: u64,
    /// The fastest candidate's service time, ms (`<= service_ms`).
    pub fastest_ms: f64,
    /// Outstanding picks.
    pub outstanding: u32,
    /// Unseen backlog, requests (>= 0).
    pub unseen_backlog: f64,
    /// How long the request at the head of the worker's line has been in
    /// service, ms (0 without outstanding picks).
    pub head_elapsed_ms: f64,
    /// Reported error rate, fraction (already smoothed).
    pub reported_failure_rate: f64,
    /// Observed failure rate, fraction.
    pub observed_failure_rate: f64,
    /// Snapshot trust, fraction 0..=1.
    pub trust: f64,
    /// The snapshot says the worker is compacting.
    pub compacting: bool,
    /// Smoothed CPU, fraction.
    pub cpu_usage: f64,
    /// The request's type, when known.
    pub request_type: Option<RequestType>,
    /// Slow-start weight, fraction `(0, 1]`.
    pub ramp: f64,
    /// What a failed attempt costs, ms (the request's timeout, or
    /// `evidence.failure_penalty_ms`).
    pub penalty_ms: f64,
    /// The key's locality here, when it priced `service_ms`
    /// ([`crate::locality`]).
    pub locality: Option<LocalityEstimate>,
}

/// What the cost lines computed for one candidate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostEstimate {
    /// The routing cost that orders the candidates, lower first: `E` at the
    /// configured exponent `b` (C3's cubic cost at the default 3), unitless
    /// (ms only at `b = 1`).
    pub cost: f64,
    /// The request's expected latency on this worker, ms: `E` at `b = 1`,
    /// failed attempts included.
    pub expected_latency_ms: f64,
}

/// Apply the cost lines to `e` (whose score is the worker's health after
/// the dynamics stage); returns the routing cost `E` of the request on this
/// worker, as the lines compute it, and its expected latency.
pub fn apply_cost(e: &mut Explained, c: &CostInputs, cfg: &CostConfig) -> CostEstimate {
    let health = (e.score / 100.0).max(0.0);
    let b = cfg.exponent;
    let service = c.service_ms.max(f64::MIN_POSITIVE);
    let fastest = c.fastest_ms.clamp(f64::MIN_POSITIVE, service);
    let mut cost = service;
    // The same terms at b = 1: the expected latency.
    let mut latency = service;
    if let Some(l) = c.locality.filter(|l| l.priced) {
        let why = match l.digest {
            Some(present) => Reason::new(
                K::LocalityDigest,
                [
                    service,
                    fastest,
                    l.p_warm,
                    l.p_routing,
                    f64::from(u8::from(present)),
                ],
            ),
            None => Reason::new(
                K::LocalityWarm,
                [service, fastest, l.p_warm, l.hit_ms, l.miss_ms],
            ),
        };
        e.multiply("locality", fastest / service, why, Some(l.p_warm));
    } else if fastest < service {
        let why = if c.service_is_prior {
            Reason::new(K::ServiceTimePrior, [service, fastest, 0.0, 0.0, 0.0])
        } else {
            Reason::new(
                K::ServiceTime,
                [service, fastest, c.outcomes as f64, 0.0, 0.0],
            )
        };
        e.multiply("service_time", fastest / service, why, Some(service));
    }
    let n = f64::from(c.outstanding);
    if c.outstanding > 0 {
        let f = (1.0 + n).powf(b);
        cost *= f;
        latency *= 1.0 + n;
        let why = Reason::new(K::Outstanding, [n, b, 0.0, 0.0, 0.0]);
        e.multiply("outstanding", 1.0 / f, why, Some(n));
    }
    let u = c.unseen_backlog.max(0.0);
    if u > 1e-3 {
        let f = ((1.0 + n + u) / (1.0 + n)).powf(b);
        cost *= f;
        latency *= (1.0 + n + u) / (1.0 + n);
        let why = Reason::new(K::UnseenBacklog, [u, n, b, 0.0, 0.0]);
        e.multiply("unseen_backlog", 1.0 / f, why, Some(u));
    }
    // The head has been in service longer than a service time: a large
    // request most likely, whose remaining time grows with its age (a
    // heavy-tailed size's mean residual life), and everything behind waits.
    let extra = (c.head_elapsed_ms - service).max(0.0);
    if c.outstanding > 0 && extra > 1e-9 {
        let f = (cost + extra) / cost;
        cost += extra;
        latency += extra;
        let why = Reason::new(K::HeadOfLine, [c.head_elapsed_ms, service, 0.0, 0.0, 0.0]);
        e.multiply("head_of_line", 1.0 / f, why, Some(c.head_elapsed_ms));
    }
    if c.compacting {
        let write = c.request_type.is_some_and(RequestType::is_write);
        let base = if write {
            cfg.compaction_write_factor
        } else {
            cfg.compaction_read_factor
        };
        let f = 1.0 + (base - 1.0) * c.trust;
        if f > 1.0 {
            cost *= f;
            latency *= f;
            let why = Reason::new(
                K::CompactingRequest,
                [f, f64::from(u8::from(write)), 0.0, 0.0, 0.0],
            );
            e.multiply("compacting_cost", 1.0 / f, why, Some(1.0));
        }
    }
    if c.cpu_usage >= cfg.cpu_saturated {
        let f = 1.0 + (cfg.cpu_saturated_factor - 1.0) * c.trust;
        if f > 1.0 {
            cost *= f;
            latency *= f;
            let why = Reason::new(
                K::CpuSaturated,
                [c.cpu_usage, f, cfg.cpu_saturated, 0.0, 0.0],
            );
            e.multiply("cpu_saturated", 1.0 / f, why, Some(c.cpu_usage));
        }
    }
    // A worker at a fraction `ramp` of its weight serves as if it had that
    // fraction of its capacity: each request in its queue term takes
    // 1 / ramp as long, so the factor takes the queue's power too.
    let ramp = c.ramp.clamp(f64::MIN_POSITIVE, 1.0);
    // 1^b is 1 exactly: no `pow` call for a worker at full weight.
    let slow = if ramp < 1.0 { ramp.powf(b) } else { 1.0 };
    if ramp < 1.0 {
        let why = Reason::new(K::SlowStartRamp, [ramp, b, 0.0, 0.0, 0.0]);
        e.multiply("slow_start", slow, why, Some(ramp));
    }
    let success_cost = cost / (health * slow).max(f64::MIN_POSITIVE);
    let success_ms = latency / (health * ramp).max(f64::MIN_POSITIVE);
    let reported = (c.reported_failure_rate * c.trust).clamp(0.0, 1.0);
    let observed = c.observed_failure_rate.clamp(0.0, 1.0);
    let p = reported.max(observed).min(cfg.max_failure_rate);
    if p > 1e-6 {
        // Attempts until a success are geometric: p / (1 − p) failed ones
        // are expected, each costing the penalty latency.
        let failed = p / (1.0 - p);
        // The ratio of the expected latency with failures to without, on
        // the latency itself (the cost at b = 1); like the queue term it
        // then takes the power b.
        let linear_ms = service * (1.0 + n + u) / (health * ramp).max(f64::MIN_POSITIVE);
        let attempts = 1.0 + failed * c.penalty_ms.max(0.0) / linear_ms.max(f64::MIN_POSITIVE);
        let f = attempts.powf(b);
        let why = Reason::new(K::Failures, [p, failed, reported, observed, c.penalty_ms]);
        e.multiply("failures", 1.0 / f, why, Some(p));
        return CostEstimate {
            cost: success_cost * f,
            expected_latency_ms: success_ms * attempts,
        };
    }
    CostEstimate {
        cost: success_cost,
        expected_latency_ms: success_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scoring::BASE_SCORE;

    fn inputs() -> CostInputs {
        CostInputs {
            service_ms: 2.0,
            service_is_prior: false,
            outcomes: 50,
            fastest_ms: 1.0,
            outstanding: 3,
            unseen_backlog: 0.0,
            head_elapsed_ms: 0.0,
            reported_failure_rate: 0.0,
            observed_failure_rate: 0.0,
            trust: 1.0,
            compacting: false,
            cpu_usage: 0.5,
            request_type: Some(RequestType::Get),
            ramp: 1.0,
            penalty_ms: 100.0,
            locality: None,
        }
    }

    /// `b = 1`, so the arithmetic below reads as expected completion times.
    fn linear() -> CostConfig {
        CostConfig {
            exponent: 1.0,
            ..CostConfig::default()
        }
    }

    fn health(score: f64) -> Explained {
        let mut e = Explained::new();
        e.deduct("x", BASE_SCORE - score, String::new(), None);
        e
    }

    #[test]
    fn score_is_fastest_over_expected_latency_and_lines_replay() {
        let mut e = health(80.0);
        let cost = apply_cost(&mut e, &inputs(), &linear()).cost;
        // E = 2 ms × 4 / 0.8 = 10 ms; score = 100 × 1 ms / 10 ms.
        assert!((cost - 10.0).abs() < 1e-12, "{cost}");
        assert!((e.score - 10.0).abs() < 1e-9, "{}", e.score);
        let codes: Vec<_> = e.adjustments.iter().map(|a| a.code).collect();
        assert_eq!(codes, ["x", "service_time", "outstanding"]);
        assert!((Explained::replay(BASE_SCORE, &e.adjustments) - e.score).abs() < 1e-9);
        assert_eq!(
            e.adjustments[2].reason.to_string(),
            "3 outstanding: waits behind them, cost ×(1 + 3)^1"
        );
    }

    #[test]
    fn unseen_backlog_adds_to_the_queue() {
        let mut e = health(100.0);
        let c = CostInputs {
            unseen_backlog: 2.0,
            ..inputs()
        };
        let cost = apply_cost(&mut e, &c, &linear()).cost;
        assert!((cost - 2.0 * 6.0).abs() < 1e-12, "{cost}");
    }

    #[test]
    fn a_failing_fast_worker_costs_more_than_a_slow_healthy_one() {
        let cfg = linear();
        // The R1 case: 85 % errors at 1 ms against none at 40 ms; failures
        // cost the 1 000 ms default penalty.
        let failing = CostInputs {
            service_ms: 1.0,
            outstanding: 0,
            reported_failure_rate: 0.85,
            penalty_ms: 1_000.0,
            ..inputs()
        };
        let slow = CostInputs {
            service_ms: 40.0,
            outstanding: 0,
            ..failing
        };
        let slow = CostInputs {
            reported_failure_rate: 0.0,
            ..slow
        };
        let (mut a, mut b) = (health(88.0), health(78.0));
        let ca = apply_cost(&mut a, &failing, &cfg).cost;
        let cb = apply_cost(&mut b, &slow, &cfg).cost;
        let want = 1.0 / 0.88 + 0.85 / 0.15 * 1_000.0;
        assert!((ca - want).abs() < 1e-9, "{ca}");
        assert!(ca > cb, "{ca} vs {cb}");
        assert!(a.score < b.score, "{} vs {}", a.score, b.score);
        // Its reported rate fades with the snapshot; the observed rate
        // takes over.
        let observed = CostInputs {
            trust: 0.0,
            observed_failure_rate: 0.85,
            ..failing
        };
        let mut c = health(88.0);
        assert!((apply_cost(&mut c, &observed, &cfg).cost - want).abs() < 1e-9);
    }

    #[test]
    fn compaction_hurts_writes_more_and_fades_with_age() {
        let cfg = linear();
        let put = CostInputs {
            compacting: true,
            outstanding: 0,
            service_ms: 1.0,
            request_type: Some(RequestType::Put),
            ..inputs()
        };
        let get = CostInputs {
            request_type: Some(RequestType::Get),
            ..put
        };
        let old = CostInputs { trust: 0.5, ..put };
        let cost = |c: &CostInputs| apply_cost(&mut health(100.0), c, &cfg).cost;
        assert!((cost(&put) - 1.5).abs() < 1e-12);
        assert!((cost(&get) - 1.1).abs() < 1e-12);
        assert!((cost(&old) - 1.25).abs() < 1e-12);
    }

    #[test]
    fn a_long_running_head_adds_its_excess_age() {
        let mut e = health(100.0);
        // 3 outstanding at 2 ms, the head in service for 12 ms: 2 × 4 + 10.
        let c = CostInputs {
            head_elapsed_ms: 12.0,
            ..inputs()
        };
        let cost = apply_cost(&mut e, &c, &linear()).cost;
        assert!((cost - 18.0).abs() < 1e-12, "{cost}");
        assert!(e.adjustments.iter().any(|a| a.code == "head_of_line"));
        // A head younger than a service time adds nothing.
        let mut e = health(100.0);
        let young = CostInputs {
            head_elapsed_ms: 1.5,
            ..inputs()
        };
        assert!((apply_cost(&mut e, &young, &linear()).cost - 8.0).abs() < 1e-12);
    }

    #[test]
    fn the_default_queue_power_is_cubic() {
        let mut e = health(100.0);
        let c = CostInputs {
            service_ms: 1.0,
            ..inputs()
        };
        // 3 outstanding: 1 ms × 4^3.
        let cost = apply_cost(&mut e, &c, &CostConfig::default()).cost;
        assert!((cost - 64.0).abs() < 1e-9, "{cost}");
    }

    #[test]
    fn slow_start_scales_the_cost() {
        let c = CostInputs {
            ramp: 0.25,
            outstanding: 0,
            service_ms: 1.0,
            ..inputs()
        };
        let mut e = health(100.0);
        assert!((apply_cost(&mut e, &c, &linear()).cost - 4.0).abs() < 1e-12);
        assert!((e.score - 25.0).abs() < 1e-9);
        // With the default b = 3 a ramp of 0.25 is a quarter of the capacity
        // inside the cubic queue term: ×64.
        let mut e = health(100.0);
        assert!((apply_cost(&mut e, &c, &CostConfig::default()).cost - 64.0).abs() < 1e-9);
    }

    #[test]
    fn the_cubic_cost_is_not_a_latency_and_the_expected_latency_is() {
        let c = CostInputs {
            service_ms: 2.0,
            fastest_ms: 2.0,
            outstanding: 5,
            ..inputs()
        };
        let est = apply_cost(&mut health(100.0), &c, &CostConfig::default());
        // 2 ms × (1 + 5)^3 ranks; 2 ms × (1 + 5) is what the request waits.
        assert!((est.cost - 432.0).abs() < 1e-9, "{}", est.cost);
        assert!((est.expected_latency_ms - 12.0).abs() < 1e-12);
    }

    #[test]
    fn at_exponent_one_the_cost_is_the_expected_latency_with_every_factor() {
        let c = CostInputs {
            unseen_backlog: 1.5,
            head_elapsed_ms: 7.0,
            reported_failure_rate: 0.1,
            compacting: true,
            cpu_usage: 0.97,
            ramp: 0.5,
            request_type: Some(RequestType::Put),
            ..inputs()
        };
        let est = apply_cost(&mut health(80.0), &c, &linear());
        assert!((est.cost - est.expected_latency_ms).abs() < 1e-9, "{est:?}");
        let cubic = apply_cost(&mut health(80.0), &c, &CostConfig::default());
        assert!((cubic.expected_latency_ms - est.expected_latency_ms).abs() < 1e-9);
        assert!(cubic.cost > cubic.expected_latency_ms);
    }
}
