//! Explanation sentences, formatted only when a response is serialised.
//!
//! Scoring records a [`Reason`] — a sentence template and its numbers — on
//! the hot path; the text is produced by `Display` (and by `Serialize`, which
//! uses it), so the decision path pays no float formatting or allocation for
//! explanations that a caller may never read.

use std::fmt;

use serde::{Serialize, Serializer};

use crate::dynamics::PenaltyReason;
use crate::fmt::{num, pct};

/// Which sentence an adjustment explains itself with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasonKind {
    /// `[age_s, limit_s]`
    HeartbeatDead,
    /// `[factor]`
    Compacting,
    /// `[factor]`
    UnderRepair,
    /// `[cpu, threshold, points_per_step, step, max]`
    CpuHigh,
    /// `[p99_ms, ratio, baseline_ms]`
    RttHigh,
    /// `[rate, points_per_percent, max]`
    Errors,
    /// `[depth, watermark]`
    QueueHigh,
    /// `[available, threshold]`
    MemoryLow,
    /// `[await_ms, threshold_ms, write_weight (0 for reads)]`
    DiskSlow,
    /// `[loss, threshold]`
    NetworkLoss,
    /// `[hit_rate, threshold]`
    CacheCold,
    /// `[memtable_mib, threshold_mib]`
    MemtableLarge,
    /// `[elapsed_s, warmup_s, max_points]`
    WarmingUp,
    /// `[score_before]`
    Clamp,
    /// `[age_s, fresh_s, dead_s, freshness]`
    StaleTelemetry,
    /// `[cap]`
    StaleCap,
    /// `[age_s, trust]`
    SnapshotAge,
    /// `[estimate_ms, fastest_ms, outcomes]`
    ServiceTime,
    /// `[prior_ms, fastest_ms]`
    ServiceTimePrior,
    /// `[expected_ms, fastest_ms, p_warm, hit_ms, miss_ms]`
    LocalityWarm,
    /// `[expected_ms, fastest_ms, p_warm, p_routing, digest_present (1/0)]`
    LocalityDigest,
    /// `[outstanding, exponent]`
    Outstanding,
    /// `[unseen, outstanding, exponent]`
    UnseenBacklog,
    /// `[elapsed_ms, service_ms]`
    HeadOfLine,
    /// `[failure_rate, failed_attempts, reported, observed, penalty_ms]`
    Failures,
    /// `[factor, is_put (1/0)]`
    CompactingRequest,
    /// `[cpu, factor, threshold]`
    CpuSaturated,
    /// `[fraction, exponent]`
    SlowStartRamp,
    /// `[factor, predicted_ms, cost, predicted_ms / cost]`
    ModelAction,
    /// `[action, blend_rule, scale]` (issue #6)
    RuleAction,
}

/// An explanation: a template with its numbers, or free text for rare cases.
#[derive(Debug, Clone, PartialEq)]
pub enum Reason {
    /// A templated sentence; unused trailing numbers are zero.
    Template(ReasonKind, [f64; 5]),
    /// A sentence built by the caller (unknown workers).
    Text(String),
    /// A penalty state's explanation (issue #3).
    Penalty(PenaltyReason),
    /// A recovering worker's explanation and its slow-start weight fraction
    /// (0..=1).
    SlowStart(PenaltyReason, f64),
}

impl Reason {
    /// A templated reason.
    pub fn new(kind: ReasonKind, args: [f64; 5]) -> Self {
        Self::Template(kind, args)
    }
}

impl From<PenaltyReason> for Reason {
    fn from(p: PenaltyReason) -> Self {
        Self::Penalty(p)
    }
}

impl From<String> for Reason {
    fn from(s: String) -> Self {
        Self::Text(s)
    }
}

impl From<&str> for Reason {
    fn from(s: &str) -> Self {
        Self::Text(s.to_owned())
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ReasonKind as K;
        let (kind, a) = match self {
            Self::Text(s) => return f.write_str(s),
            Self::Penalty(p) => return p.fmt(f),
            Self::SlowStart(p, fraction) => {
                return write!(f, "{p}: selection weight ×{}", num(*fraction));
            }
            Self::Template(k, a) => (*k, a),
        };
        match kind {
            K::HeartbeatDead => write!(
                f,
                "last report {} s ago is older than the {} s liveness limit",
                num(a[0]),
                num(a[1])
            ),
            K::Compacting => write!(f, "worker is compacting: score ×{}", num(a[0])),
            K::UnderRepair => write!(f, "worker is under repair: score ×{}", num(a[0])),
            K::CpuHigh => write!(
                f,
                "CPU {} is above {}: {} points per {} over, at most {}",
                pct(a[0]),
                pct(a[1]),
                num(a[2]),
                pct(a[3]),
                num(a[4])
            ),
            K::RttHigh => write!(
                f,
                "RTT p99 {} ms is {} above the {} ms baseline",
                num(a[0]),
                pct(a[1]),
                num(a[2])
            ),
            K::Errors => write!(
                f,
                "error rate {} costs {} points per 1%, at most {}",
                pct(a[0]),
                num(a[1]),
                num(a[2])
            ),
            K::QueueHigh => write!(
                f,
                "queue depth {} is above the high watermark {}",
                num(a[0]),
                num(a[1])
            ),
            K::MemoryLow => write!(f, "available memory {} is below {}", pct(a[0]), pct(a[1])),
            K::DiskSlow => {
                write!(
                    f,
                    "disk IO await {} ms is above {} ms",
                    num(a[0]),
                    num(a[1])
                )?;
                if a[2] > 0.0 {
                    write!(f, " (weighted ×{} for a write)", num(a[2]))?;
                }
                Ok(())
            }
            K::NetworkLoss => write!(f, "network loss {} is above {}", pct(a[0]), pct(a[1])),
            K::CacheCold => write!(f, "cache hit rate {} is below {}", pct(a[0]), pct(a[1])),
            K::MemtableLarge => write!(
                f,
                "memtable {} MiB is above {} MiB (a flush is due)",
                num(a[0]),
                num(a[1])
            ),
            K::WarmingUp => write!(
                f,
                "registered {} s ago, within the {} s warm-up: {} points falling to 0",
                num(a[0]),
                num(a[1]),
                num(a[2])
            ),
            K::Clamp => write!(f, "score {} brought back into the 0..=100 range", num(a[0])),
            K::StaleTelemetry => write!(
                f,
                "last report {} s old (fresh up to {} s, dead at {} s): freshness {}, signals pulled toward the pool median or thresholds",
                num(a[0]),
                num(a[1]),
                num(a[2]),
                num(a[3])
            ),
            K::StaleCap => write!(
                f,
                "a stale report cannot outrank the fresh candidates' median score {}",
                num(a[0])
            ),
            K::SnapshotAge => write!(
                f,
                "snapshot {} s old: its deductions count {}",
                num(a[0]),
                pct(a[1])
            ),
            K::ServiceTime => write!(
                f,
                "service time {} ms (peak-EWMA of {} outcomes) vs {} ms for the fastest candidate",
                num(a[0]),
                num(a[2]),
                num(a[1])
            ),
            K::LocalityWarm => write!(
                f,
                "key warm here with P = {} (hit {} ms, miss {} ms): expected service {} ms vs {} ms for the fastest candidate",
                pct(a[2]),
                num(a[3]),
                num(a[4]),
                num(a[0]),
                num(a[1])
            ),
            K::LocalityDigest => write!(
                f,
                "key warm here with P = {} (own routing {}, the worker's digest: {}): expected service {} ms vs {} ms for the fastest candidate",
                pct(a[2]),
                pct(a[3]),
                if a[4] > 0.0 { "present" } else { "absent" },
                num(a[0]),
                num(a[1])
            ),
            K::ServiceTimePrior => write!(
                f,
                "no recent outcomes: the pool's median service time {} ms vs {} ms for the fastest candidate",
                num(a[0]),
                num(a[1])
            ),
            K::Outstanding => write!(
                f,
                "{} outstanding: waits behind them, cost ×(1 + {})^{}",
                num(a[0]),
                num(a[0]),
                num(a[1])
            ),
            K::UnseenBacklog => write!(
                f,
                "{} queued requests the reported queue holds beyond our {} outstanding, discounted by the snapshot's age",
                num(a[0]),
                num(a[1])
            ),
            K::Failures => write!(
                f,
                "failure rate {} (reported {}, observed {}): {} failed attempts expected per success, {} ms each",
                pct(a[0]),
                pct(a[2]),
                pct(a[3]),
                num(a[1]),
                num(a[4])
            ),
            K::HeadOfLine => write!(
                f,
                "the request in service has run {} ms against a {} ms service time: likely a large one, the queue waits for the rest",
                num(a[0]),
                num(a[1])
            ),
            K::CompactingRequest => write!(
                f,
                "compacting, {} cost ×{}",
                if a[1] > 0.0 { "a write" } else { "a read" },
                num(a[0])
            ),
            K::CpuSaturated => write!(
                f,
                "CPU {} at or above {}: cost ×{}",
                pct(a[0]),
                pct(a[2]),
                num(a[1])
            ),
            K::SlowStartRamp => write!(
                f,
                "slow start: {} of its capacity, cost ×(1/{})^{}",
                pct(a[0]),
                num(a[0]),
                num(a[1])
            ),
            K::ModelAction => write!(
                f,
                "model ×{} on the cost (predicts {} ms, {}× the routing cost {}, against the other candidates' predictions)",
                num(a[0]),
                num(a[1]),
                num(a[3]),
                num(a[2])
            ),
            K::RuleAction => write!(
                f,
                "fallback rule for urgent order keys: action {} × weight {} × {} points",
                num(a[0]),
                num(a[1]),
                num(a[2])
            ),
        }
    }
}

impl Reason {
    /// A compact label for one-line explanations (`GET /v1/debug/score`),
    /// e.g. `CPU 88% > 70%`; `None` for free-text and penalty reasons (callers then
    /// show the adjustment code).
    pub fn short(&self) -> Option<String> {
        use ReasonKind as K;
        let Self::Template(kind, a) = self else {
            return None;
        };
        Some(match kind {
            K::HeartbeatDead => format!("dead: last report {} s ago", num(a[0])),
            K::Compacting => format!("compacting ×{}", num(a[0])),
            K::UnderRepair => format!("under repair ×{}", num(a[0])),
            K::CpuHigh => format!("CPU {} > {}", pct(a[0]), pct(a[1])),
            K::RttHigh => format!("RTT p99 {} ms vs {} ms", num(a[0]), num(a[2])),
            K::Errors => format!("errors {}", pct(a[0])),
            K::QueueHigh => format!("queue {} > {}", num(a[0]), num(a[1])),
            K::MemoryLow => format!("memory {} < {}", pct(a[0]), pct(a[1])),
            K::DiskSlow => format!("disk await {} ms > {} ms", num(a[0]), num(a[1])),
            K::NetworkLoss => format!("net loss {} > {}", pct(a[0]), pct(a[1])),
            K::CacheCold => format!("cache hits {} < {}", pct(a[0]), pct(a[1])),
            K::MemtableLarge => format!("memtable {} MiB > {} MiB", num(a[0]), num(a[1])),
            K::WarmingUp => format!("warming up {} of {} s", num(a[0]), num(a[1])),
            K::Clamp => "clamp".to_owned(),
            K::StaleTelemetry => format!("report {} s old", num(a[0])),
            K::StaleCap => format!("stale cap {}", num(a[0])),
            K::SnapshotAge => format!("snapshot {} s old", num(a[0])),
            K::ServiceTime => format!("service {} ms", num(a[0])),
            K::ServiceTimePrior => format!("service {} ms (pool)", num(a[0])),
            K::LocalityWarm => format!("warm {} → {} ms", pct(a[2]), num(a[0])),
            K::LocalityDigest => format!(
                "warm {} (digest: {}) → {} ms",
                pct(a[2]),
                if a[4] > 0.0 { "present" } else { "absent" },
                num(a[0])
            ),
            K::Outstanding => format!("{} outstanding", num(a[0])),
            K::UnseenBacklog => format!("{} unseen queued", num(a[0])),
            K::Failures => format!("failures {}", pct(a[0])),
            K::HeadOfLine => format!("head in service {} ms", num(a[0])),
            K::CompactingRequest => format!("compacting ×{}", num(a[0])),
            K::CpuSaturated => format!("CPU {} saturated", pct(a[0])),
            K::SlowStartRamp => format!("slow start {}", pct(a[0])),
            K::ModelAction => format!("model ×{}", num(a[0])),
            K::RuleAction => format!("order rule {}", num(a[0])),
        })
    }
}

impl Serialize for Reason {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_render_with_clean_numbers() {
        let r = Reason::new(ReasonKind::RttHigh, [12.5, 0.25, 10.0, 0.0, 0.0]);
        assert_eq!(
            r.to_string(),
            "RTT p99 12.5 ms is 25% above the 10 ms baseline"
        );
        let r = Reason::new(ReasonKind::DiskSlow, [100.0, 50.0, 2.0, 0.0, 0.0]);
        assert_eq!(
            r.to_string(),
            "disk IO await 100 ms is above 50 ms (weighted ×2 for a write)"
        );
        assert_eq!(
            serde_json::to_string(&Reason::from("x")).ok().as_deref(),
            Some("\"x\"")
        );
    }
}
