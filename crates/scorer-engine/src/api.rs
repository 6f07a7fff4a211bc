//! Wire types of the v1 HTTP contract that in-process callers (the
//! simulator, benches) use too.

use serde::{Deserialize, Serialize};

use scorer_core::features::FEATURE_COUNT;
use scorer_core::scoring::{Adjustment, RequestContext};

/// Longest accepted key, bytes.
pub const MAX_KEY_BYTES: usize = 1024;
/// Longest client deadline a request may state, ms (one day).
pub const MAX_TIMEOUT_MS: u64 = 86_400_000;

/// Body of `POST /v1/score`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScoreRequest {
    /// The request's key, 1..=1024 bytes.
    #[schema(min_length = 1, max_length = 1024)]
    pub key: String,
    /// Request facts; absent fields may come from `X-*` headers.
    #[serde(default)]
    pub context: Option<RequestContext>,
    /// Candidate worker ids, 1..=`server.max_candidates` after collapsing duplicates.
    #[schema(min_items = 1)]
    pub candidates: Vec<String>,
    /// How much the answer explains (levels ASCII case-insensitive; `null`
    /// is absent): `"none"` or `false` (the default: the
    /// pick, its probability and each candidate's id, eligibility and final
    /// score), `"itemised"` or `true` (every field below, with each score's
    /// itemised adjustments), `"full"` (itemised plus each candidate's
    /// 42-feature vector).
    #[serde(default)]
    #[schema(schema_with = explain_schema)]
    pub explain: Explain,
    /// Selection policy: `max`, `softmax`, `p2c`, `swrr`, `hash`, `prequal`
    /// or `none`;
    /// `selection.default_policy` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// Softmax temperature, finite and >= 0 (below 1e-6 means `max`);
    /// `selection.temperature` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0.0)]
    pub temperature: Option<f64>,
    /// Seed for this decision's random choices, for reproducible picks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = "uint64")]
    pub seed: Option<u64>,
}

impl ScoreRequest {
    /// A request for `candidates` with every option at its default.
    pub fn new(key: impl Into<String>, candidates: Vec<String>) -> Self {
        Self {
            key: key.into(),
            context: None,
            candidates,
            explain: Explain::None,
            policy: None,
            temperature: None,
            seed: None,
        }
    }
}

/// How much a score answer explains.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Explain {
    /// The compact answer a router needs: pick, its probability, decision
    /// id, and per candidate the id, eligibility and final score.
    #[default]
    None,
    /// Every field of [`ScoreResponse`], with the itemised adjustments.
    Itemised,
    /// Itemised plus each candidate's observation vector.
    Full,
}

impl Explain {
    /// The level's name on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Itemised => "itemised",
            Self::Full => "full",
        }
    }
}

impl Serialize for Explain {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Explain {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Level;
        impl serde::de::Visitor<'_> for Level {
            type Value = Explain;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("`false`, `true`, \"none\", \"itemised\" or \"full\"")
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Explain, E> {
                Ok(if v { Explain::Itemised } else { Explain::None })
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Explain, E> {
                match v.to_ascii_lowercase().as_str() {
                    "none" => Ok(Explain::None),
                    "itemised" => Ok(Explain::Itemised),
                    "full" => Ok(Explain::Full),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Str(v), &self)),
                }
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Explain, E> {
                Ok(Explain::None)
            }
        }
        d.deserialize_any(Level)
    }
}

fn explain_schema() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
    OneOfBuilder::new()
        .item(ObjectBuilder::new().schema_type(Type::Boolean))
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .item(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(["none", "itemised", "full"])),
        )
        .description(Some(
            "`none`/`false` (default): compact; `itemised`/`true`: adjustments and details; `full`: plus features",
        ))
        .build()
        .into()
}

/// One candidate's score in a [`ScoreResponse`].
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct WorkerScore {
    /// Worker id.
    pub worker_id: String,
    /// Whether the worker may be picked.
    pub eligible: bool,
    /// Machine reason when not eligible (`unknown_worker`, `heartbeat_dead`,
    /// `cooldown`, `outlier_ejected`, and the operator's `drained` or `disabled`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    /// Penalty state: `healthy`, `observation`, `cooldown`, `recovering`
    /// (`unknown` for a worker that never reported).
    #[schema(required = false)]
    pub penalty_state: &'static str,
    /// Rule score, 0..=100: 100 plus the `rule`-stage adjustments (shown
    /// rounded to 1e-12 to drop binary float noise, e.g. `86.255333`).
    #[serde(serialize_with = "scorer_core::fmt::serialize_points")]
    #[schema(required = false)]
    pub rule_score: f64,
    /// Final score, 0..=100: 100 plus every adjustment (rule, dynamics,
    /// model; shown rounded to 1e-12).
    #[serde(serialize_with = "scorer_core::fmt::serialize_points")]
    pub final_score: f64,
    /// Effective selection weight: capacity × slow-start ramp (> 0), or 0 when not selectable.
    #[schema(required = false)]
    pub weight: f64,
    /// Probability that this decision's policy picks this worker (the
    /// propensity); absent under policy `none`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probability: Option<f64>,
    /// The steps from 100 to `final_score`, in order.
    #[schema(required = false)]
    pub adjustments: Vec<Adjustment>,
    /// The observation vector (42 values in `GET /v1/features` order),
    /// present when `explain` is `"full"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub features: Option<Vec<f32>>,
    /// The observation vector, always kept for logging.
    #[serde(skip)]
    pub observation: [f32; FEATURE_COUNT],
    /// Model action: ln of the model's cost factor for this candidate,
    /// within `[ln factor_min, ln factor_max]`, when the model's output was
    /// used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_action: Option<f64>,
    /// Deterministic rule action in `{−1, 0, 1}` (issue #6); absent for
    /// candidates outside the selectable set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_action: Option<f64>,
    /// The service's outstanding picks of this worker (picks without
    /// feedback yet) when it was scored; absent for unknown workers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outstanding: Option<u32>,
    /// Expected latency of this request on this worker, ms: its service
    /// time × (1 + the requests ahead of it), plus the head of line, × the
    /// snapshot factors, / (health × slow start), × the failed attempts'
    /// cost (absent when the worker was not selectable, or in panic mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_latency_ms: Option<f64>,
    /// The routing cost that ranks the candidates, unitless, lower first:
    /// the same terms with the queue, slow start and failures raised to
    /// `cost.exponent` (C3's cubic cost by default); before the model stage
    /// the score is `100 × fastest service time / cost` (the `model` line
    /// then divides it by the model's factor, and `rule_action` adds
    /// points). Absent with `expected_latency_ms`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// The operator's override in force on the worker (`drain`, `disable`,
    /// `weight`), if any.
    #[serde(rename = "override", skip_serializing_if = "Option::is_none")]
    pub operator_override: Option<crate::overrides::OverrideKind>,
}

/// Answer of `POST /v1/score`. With `explain` absent or `"none"` only
/// `decision_id`, `pick`, `probability`, `policy`, `panic` and, per
/// candidate, `worker_id`, `eligible`, `reason` and `final_score` are
/// present; the other fields come with `"itemised"` (or `true`) and
/// `"full"`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ScoreResponse {
    /// Unique id of this decision (UUID v7, time-ordered).
    pub decision_id: String,
    /// One entry per distinct candidate, in request order.
    pub scores: Vec<WorkerScore>,
    /// Worker ids by final score, highest first: selectable workers, then the
    /// rest; ties broken by worker id.
    #[schema(required = false)]
    pub ranking: Vec<String>,
    /// The policy that made the pick.
    pub policy: &'static str,
    /// The picked worker; absent under policy `none`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pick: Option<String>,
    /// Probability that the policy picked `pick` (its propensity,
    /// fraction 0..=1); absent under policy `none`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probability: Option<f64>,
    /// No candidate was eligible: live candidates were ranked ignoring
    /// penalty states (panic mode).
    pub panic: bool,
    /// What the model stage did for this decision (issue #6).
    #[schema(required = false)]
    pub model: ModelDecision,
    /// The shadow model's view of this decision, for the decision log; never
    /// serialized and never affects the response.
    #[serde(skip)]
    pub shadow: Option<ShadowDecision>,
    /// Hash of the configuration that made this decision (`config_hash` in
    /// the decision log); not serialized.
    #[serde(skip)]
    pub config_hash: std::sync::Arc<str>,
    /// The config canary's arm that made this decision (`stable`,
    /// `canary`) while one runs (`arm` in the decision log); not serialized.
    #[serde(skip)]
    pub config_arm: Option<&'static str>,
}

/// The model stage of one decision.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ModelDecision {
    /// Whether the model's output went into the final scores.
    pub used: bool,
    /// `model_version` of the model consulted (from its card), if one was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// A/B arm (`"a"` or `"b"`), when `[model.ab]` is configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arm: Option<&'static str>,
    /// Why the rules alone decided, when they did: `budget_exceeded`,
    /// `model_error`, `non_finite_output`, `model_missing`, `schema_mismatch`,
    /// `breaker_open`, `model_disabled`. Absent in panic mode (no model stage).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_reason: Option<&'static str>,
    /// Inference wall time, µs, when the model ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inference_us: Option<f64>,
}

/// The shadow model's output for one decision (issue #6).
#[derive(Debug, Clone, PartialEq)]
pub struct ShadowDecision {
    /// The shadow's `model_version`.
    pub version: String,
    /// Per candidate (same order as `scores`): the shadow's action and the
    /// final score it would have given, `None` outside the selectable set.
    pub rows: Vec<Option<(f64, f64)>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use scorer_core::scoring::Explained;

    #[test]
    fn scores_are_shown_without_float_noise_and_still_add_up() {
        let mut e = Explained::new();
        e.deduct("rtt_p99_high", 3.75, String::new(), None);
        e.deduct("warming_up", 9.994667, String::new(), None);
        assert_eq!(e.score, 86.25533300000001, "f64 noise in the running score");
        let w = WorkerScore {
            worker_id: "w1".into(),
            eligible: true,
            reason: None,
            penalty_state: "healthy",
            rule_score: e.score,
            final_score: e.score,
            weight: 1.0,
            probability: Some(1.0),
            adjustments: e.adjustments,
            features: None,
            observation: [0.0; FEATURE_COUNT],
            model_action: None,
            rule_action: None,
            outstanding: None,
            expected_latency_ms: None,
            cost: None,
            operator_override: None,
        };
        let text = serde_json::to_string(&w).expect("serialises");
        assert!(text.contains(r#""final_score":86.255333,"#), "{text}");
        assert!(text.contains(r#""rule_score":86.255333,"#), "{text}");
        let v: serde_json::Value = serde_json::from_str(&text).expect("json");
        let sum: f64 = 100.0
            + v["adjustments"]
                .as_array()
                .expect("adjustments")
                .iter()
                .filter_map(|a| a["impact"].as_f64())
                .sum::<f64>();
        assert!((sum - 86.255333).abs() < 1e-9, "{sum}");
    }
}

/// A decision's compact answer ([`crate::Output::Pick`]): what a router
/// reads to route, built without explanations, feature vectors or a
/// ranking; the same pick, propensity and scores as the explained
/// [`ScoreResponse`] of the same decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactPick<'r> {
    /// The picked candidate, as the request names it (`None` under policy
    /// `none`).
    pub pick: Option<&'r str>,
    /// Its propensity.
    pub probability: Option<f64>,
    /// Its final score, points.
    pub final_score: Option<f64>,
    /// The policy that picked.
    pub policy: &'static str,
    /// No candidate was eligible: picked among the live ones on rule scores.
    pub panic: bool,
    /// The model's prediction entered the scores.
    pub model_used: bool,
    /// The configuration arm, while a configuration canary runs.
    pub config_arm: Option<&'static str>,
}

/// A decision's compact answer with every candidate's score
/// ([`crate::Output::Scores`]): the compact `POST /v1/score` answer, built
/// without explanations, feature vectors or a ranking.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactScores<'r> {
    /// The decision's id.
    pub decision_id: String,
    /// The picked candidate (`None` under policy `none`).
    pub pick: Option<&'r str>,
    /// Its propensity.
    pub probability: Option<f64>,
    /// The policy that picked.
    pub policy: &'static str,
    /// No candidate was eligible: picked among the live ones on rule scores.
    pub panic: bool,
    /// One per distinct candidate, in request order.
    pub scores: Vec<CompactScore<'r>>,
}

/// One candidate of a [`CompactScores`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactScore<'r> {
    /// Worker id, as the request names it.
    pub worker_id: &'r str,
    /// Why it may not be picked (as [`WorkerScore::reason`]); `None`:
    /// eligible.
    pub reason: Option<&'static str>,
    /// Final score, points.
    pub final_score: f64,
}
