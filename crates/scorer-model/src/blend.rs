//! How a model's output and the deterministic rule action adjust the score.
//!
//! * The model predicts `r = ln(latency) − ln(E)` for a candidate, E the
//!   rules' routing cost ([`crate::card::MODEL_OUTPUT`]). Its
//!   **cost factor** is `f = clamp(exp(blend_model · (r − r̄)), factor_min,
//!   factor_max)` (defaults ×0.25 to ×4), `r̄` the mean prediction over the
//!   decision's candidates ([`mean_prediction`]): the routing cost
//!   becomes `E·f`, so the score (`100 × fastest / E`) is divided by `f`.
//!   Only the candidates' differences can change a pick (the score is
//!   relative to the fastest), and E is a cost rather than a calibrated
//!   latency (on the simulator presets the outcomes run about e^−1.5 of
//!   it), so without centering the common offset alone would pin every
//!   factor to a bound. The **model action** logged and compared by the
//!   shadow is `ln f`.
//! * Rule action `r` ([`rule_actions`]): for keys whose prefix starts with
//!   [`ORDER_PREFIX`] and whose client deadline is under
//!   [`RULE_TIMEOUT_BELOW_MS`], `+1` for each candidate whose EWMA disk IO
//!   await is under [`RULE_DISK_AWAIT_BELOW_MS`]; if no candidate is, `−1`
//!   for all of them (the router should rather retry); otherwise `0`.
//!   It reads the observation vector, so a missing disk await counts as its
//!   pessimistic imputed value (50 ms) and a missing deadline (`−1`) never
//!   triggers the rule. It is also what the service falls back to when the
//!   model cannot be used.
//! * Final score `clamp(s / f + scale · blend_rule · r · s / 100, 0, 100)`,
//!   `s` the score before the model stage ([`Blend::final_score`]); without
//!   a usable model `f = 1`. The rule's points scale with `s`, as every
//!   factor of the routing cost does.
//!
//! The trainer's offline comparison (`trainer compare`) uses these same
//! functions on logged decisions, so offline and online scores agree.

use scorer_core::features::schema::FEATURE_COUNT;

/// Key prefixes starting with this get the latency-sensitive rule.
pub const ORDER_PREFIX: &str = "order";
/// The rule applies when `0 <= timeout_ms < RULE_TIMEOUT_BELOW_MS`.
pub const RULE_TIMEOUT_BELOW_MS: f32 = 50.0;
/// Candidates with disk IO await below this get `r = +1`.
pub const RULE_DISK_AWAIT_BELOW_MS: f32 = 20.0;
/// Index of `disk_io_await_ms` in the observation vector.
pub const DISK_IO_AWAIT_FEATURE: usize = 17;
/// Index of `timeout_ms` in the observation vector.
pub const TIMEOUT_FEATURE: usize = 32;

/// Default weight of the model's prediction (an exponent on its factor).
pub const DEFAULT_BLEND_MODEL: f64 = 1.0;
/// Default lower bound of the model's cost factor.
pub const DEFAULT_FACTOR_MIN: f64 = 0.25;
/// Default upper bound of the model's cost factor.
pub const DEFAULT_FACTOR_MAX: f64 = 4.0;
/// Default weight of the rule action.
pub const DEFAULT_BLEND_RULE: f64 = 0.3;
/// Default score points per unit of blended action.
pub const DEFAULT_SCALE: f64 = 5.0;

/// Blend weights (`[model] blend_model`, `blend_rule`, `scale`,
/// `factor_min`, `factor_max`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Blend {
    /// Weight of the model's prediction `r` (the factor is `exp(blend_model · r)`).
    pub blend_model: f64,
    /// Weight of the rule action `r`.
    pub blend_rule: f64,
    /// Score points per unit of rule action.
    pub scale: f64,
    /// Lowest model cost factor, in (0, 1].
    pub factor_min: f64,
    /// Highest model cost factor, >= 1.
    pub factor_max: f64,
}

impl Default for Blend {
    fn default() -> Self {
        Self {
            blend_model: DEFAULT_BLEND_MODEL,
            blend_rule: DEFAULT_BLEND_RULE,
            scale: DEFAULT_SCALE,
            factor_min: DEFAULT_FACTOR_MIN,
            factor_max: DEFAULT_FACTOR_MAX,
        }
    }
}

/// The mean of the finite predictions of one decision's candidates (0 when
/// there is none): what [`Blend::model_factor`]'s argument is centred on.
pub fn mean_prediction(preds: &[f32]) -> f32 {
    let (sum, n) = preds
        .iter()
        .filter(|p| p.is_finite())
        .fold((0.0f64, 0usize), |(s, n), &p| (s + f64::from(p), n + 1));
    if n == 0 { 0.0 } else { (sum / n as f64) as f32 }
}

impl Blend {
    /// The model's cost factor for a centred prediction `r − r̄` (see the
    /// module docs); a non-finite value gives 1.
    pub fn model_factor(&self, r: f32) -> f64 {
        let x = self.blend_model * f64::from(r);
        if !x.is_finite() {
            return 1.0;
        }
        x.exp().clamp(self.factor_min, self.factor_max)
    }

    /// The model action, `ln` of [`Blend::model_factor`].
    pub fn model_action(&self, r: f32) -> f64 {
        self.model_factor(r).ln()
    }

    /// Score points contributed by a rule action `r`.
    pub fn rule_points(&self, r: f32) -> f64 {
        self.scale * self.blend_rule * f64::from(r)
    }

    /// The final score from `pre` (the score before the model stage), the
    /// model's prediction (`None`: no model) and the rule action `r`.
    pub fn final_score(&self, pre: f64, prediction: Option<f32>, r: f32) -> f64 {
        let f = prediction.map_or(1.0, |p| self.model_factor(p));
        (pre / f + self.rule_points(r) * pre.max(0.0) / 100.0).clamp(0.0, 100.0)
    }
}

/// Whether the rule applies to a request: order-prefixed key and a client
/// deadline present and below [`RULE_TIMEOUT_BELOW_MS`].
pub fn rule_applies(key_prefix: &str, timeout_ms: f32) -> bool {
    rule_may_apply(key_prefix) && (0.0..RULE_TIMEOUT_BELOW_MS).contains(&timeout_ms)
}

/// Whether the rule can apply to a key of this prefix, whatever the
/// deadline: when not, [`rule_actions`] are all 0 without reading the
/// observations.
pub fn rule_may_apply(key_prefix: &str) -> bool {
    key_prefix.starts_with(ORDER_PREFIX)
}

/// Rule actions for the eligible candidates of one request, written into
/// `out` (one per observation, in order).
///
/// `observations[i]` is candidate `i`'s 42-feature vector; the deadline is
/// read from the first one (it is the request's). An empty slice leaves
/// `out` empty.
pub fn rule_actions(key_prefix: &str, observations: &[[f32; FEATURE_COUNT]], out: &mut Vec<f32>) {
    out.clear();
    let Some(first) = observations.first() else {
        return;
    };
    if !rule_applies(key_prefix, first[TIMEOUT_FEATURE]) {
        out.resize(observations.len(), 0.0);
        return;
    }
    let fast = |o: &[f32; FEATURE_COUNT]| o[DISK_IO_AWAIT_FEATURE] < RULE_DISK_AWAIT_BELOW_MS;
    if observations.iter().any(fast) {
        out.extend(observations.iter().map(|o| if fast(o) { 1.0 } else { 0.0 }));
    } else {
        out.resize(observations.len(), -1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scorer_core::features::schema::FEATURES;

    fn obs(disk_ms: f32, timeout_ms: f32) -> [f32; FEATURE_COUNT] {
        let mut o = [0.0; FEATURE_COUNT];
        o[DISK_IO_AWAIT_FEATURE] = disk_ms;
        o[TIMEOUT_FEATURE] = timeout_ms;
        o
    }

    #[test]
    fn indices_match_the_schema() {
        assert_eq!(FEATURES[DISK_IO_AWAIT_FEATURE].name, "disk_io_await_ms");
        assert_eq!(FEATURES[TIMEOUT_FEATURE].name, "timeout_ms");
        assert!(FEATURES[DISK_IO_AWAIT_FEATURE].impute >= RULE_DISK_AWAIT_BELOW_MS);
        assert!(FEATURES[TIMEOUT_FEATURE].impute < 0.0);
    }

    #[test]
    fn rule_rewards_fast_disks_for_urgent_order_keys() {
        let mut r = Vec::new();
        rule_actions(
            "orders",
            &[obs(5.0, 30.0), obs(25.0, 30.0), obs(19.9, 30.0)],
            &mut r,
        );
        assert_eq!(r, [1.0, 0.0, 1.0]);
        rule_actions("order", &[obs(20.0, 49.0), obs(50.0, 49.0)], &mut r);
        assert_eq!(r, [-1.0, -1.0]);
    }

    #[test]
    fn rule_is_silent_otherwise() {
        let mut r = Vec::new();
        for (prefix, timeout) in [
            ("user", 30.0),
            ("order", 50.0),
            ("order", -1.0),
            ("xorder", 10.0),
        ] {
            rule_actions(prefix, &[obs(5.0, timeout), obs(90.0, timeout)], &mut r);
            assert_eq!(r, [0.0, 0.0], "{prefix} {timeout}");
        }
        rule_actions("order", &[], &mut r);
        assert!(r.is_empty());
    }

    #[test]
    fn final_score_divides_by_the_bounded_factor() {
        let b = Blend::default();
        // Predicted 2x slower than E: factor 2, score halves; + 60% of 1.5 points.
        let r = 2f32.ln();
        assert!((b.model_factor(r) - 2.0).abs() < 1e-6);
        assert!((b.final_score(60.0, Some(r), 1.0) - (30.0 + 0.9)).abs() < 1e-5);
        assert!((b.final_score(60.0, None, -1.0) - (60.0 - 0.9)).abs() < 1e-12);
        // The factor is bounded: ×0.25 at least, ×4 at most.
        assert_eq!(b.model_factor(-10.0), 0.25);
        assert_eq!(b.model_factor(10.0), 4.0);
        assert_eq!(b.model_factor(f32::NAN), 1.0);
        assert!((b.model_action(10.0) - 4f64.ln()).abs() < 1e-12);
        assert_eq!(b.final_score(90.0, Some(-10.0), 1.0), 100.0);
        // Centring: a common offset moves no factor.
        assert_eq!(mean_prediction(&[-1.0, -2.0, f32::NAN, -3.0]), -2.0);
        assert_eq!(mean_prediction(&[]), 0.0);
        // blend_model shrinks the prediction toward ×1.
        let half = Blend {
            blend_model: 0.5,
            ..b
        };
        assert!((half.model_factor(2.0 * r) - 2.0).abs() < 1e-5);
    }
}
