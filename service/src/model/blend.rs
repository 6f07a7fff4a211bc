//! How a model's output and the deterministic rule action adjust the rule
//! score (issue #6 "Scoring with a model").
//!
//! * Model action `a = 2p − 1` in `[−1, 1]`, `p` the model's probability of
//!   a good outcome.
//! * Rule action `r` ([`rule_actions`]): for keys whose prefix starts with
//!   [`ORDER_PREFIX`] and whose client deadline is under
//!   [`RULE_TIMEOUT_BELOW_MS`], `+1` for each candidate whose EWMA disk IO
//!   await is under [`RULE_DISK_AWAIT_BELOW_MS`]; if no candidate is, `−1`
//!   for all of them (the router should rather retry); otherwise `0`.
//!   It reads the observation vector, so a missing disk await counts as its
//!   pessimistic imputed value (50 ms) and a missing deadline (`−1`) never
//!   triggers the rule. It is also what the service falls back to when the
//!   model cannot be used.
//! * Final score `clamp(rule + scale · (blend_model · a + blend_rule · r), 0, 100)`
//!   ([`Blend::final_score`]); without a usable model the `a` term is 0.
//!
//! The trainer's offline comparison (`trainer compare`) uses these same
//! functions on logged decisions, so offline and online scores agree.

use crate::features::schema::FEATURE_COUNT;

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

/// Default weight of the model action.
pub const DEFAULT_BLEND_MODEL: f64 = 0.7;
/// Default weight of the rule action.
pub const DEFAULT_BLEND_RULE: f64 = 0.3;
/// Default score points per unit of blended action.
pub const DEFAULT_SCALE: f64 = 5.0;

/// Blend weights (`[model] blend_model`, `blend_rule`, `scale`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Blend {
    /// Weight of the model action `a`.
    pub blend_model: f64,
    /// Weight of the rule action `r`.
    pub blend_rule: f64,
    /// Score points per unit of blended action.
    pub scale: f64,
}

impl Default for Blend {
    fn default() -> Self {
        Self {
            blend_model: DEFAULT_BLEND_MODEL,
            blend_rule: DEFAULT_BLEND_RULE,
            scale: DEFAULT_SCALE,
        }
    }
}

/// The model action `2p − 1` for a probability `p` in `0..=1`.
pub fn model_action(p: f32) -> f32 {
    2.0 * p - 1.0
}

impl Blend {
    /// Score points contributed by a model action `a` (0 when `None`).
    pub fn model_points(&self, a: Option<f32>) -> f64 {
        a.map_or(0.0, |a| self.scale * self.blend_model * f64::from(a))
    }

    /// Score points contributed by a rule action `r`.
    pub fn rule_points(&self, r: f32) -> f64 {
        self.scale * self.blend_rule * f64::from(r)
    }

    /// `clamp(rule_score + model_points(a) + rule_points(r), 0, 100)`.
    pub fn final_score(&self, rule_score: f64, a: Option<f32>, r: f32) -> f64 {
        (rule_score + self.model_points(a) + self.rule_points(r)).clamp(0.0, 100.0)
    }
}

/// Whether the rule applies to a request: order-prefixed key and a client
/// deadline present and below [`RULE_TIMEOUT_BELOW_MS`].
pub fn rule_applies(key_prefix: &str, timeout_ms: f32) -> bool {
    key_prefix.starts_with(ORDER_PREFIX) && (0.0..RULE_TIMEOUT_BELOW_MS).contains(&timeout_ms)
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
    use crate::features::schema::FEATURES;

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
    fn final_score_blends_and_clamps() {
        let b = Blend::default();
        assert_eq!(model_action(0.75), 0.5);
        // 60 + 5 * (0.7 * 0.5 + 0.3 * 1) = 63.25
        assert!((b.final_score(60.0, Some(0.5), 1.0) - 63.25).abs() < 1e-12);
        assert!((b.final_score(60.0, None, -1.0) - 58.5).abs() < 1e-12);
        assert_eq!(b.final_score(99.0, Some(1.0), 1.0), 100.0);
        assert_eq!(b.final_score(1.0, Some(-1.0), -1.0), 0.0);
    }
}
