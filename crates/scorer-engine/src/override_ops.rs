//! The engine's operator controls: set, list, clear and expire the
//! overrides of [`crate::overrides`]. Every change is logged at warn level
//! with who made it and why, as it moves traffic.

use std::sync::Arc;

use crate::Engine;
use crate::overrides::{
    Override, OverrideError, OverrideMap, OverrideRequest, OverrideTable, WorkerOverride, checked,
};

impl Engine {
    /// Sets `worker_id`'s override as `req` asks, replacing any, on behalf
    /// of `set_by` at monotonic `now_ms`.
    ///
    /// # Errors
    /// [`OverrideError::UnknownWorker`] when the engine has no slot for the
    /// worker; [`OverrideError::Invalid`] for a malformed field; nothing
    /// changes.
    pub fn set_override(
        &self,
        worker_id: &str,
        req: &OverrideRequest,
        set_by: &str,
        now_ms: u64,
    ) -> Result<WorkerOverride, OverrideError> {
        if self.registry.get(worker_id).is_none() {
            return Err(OverrideError::UnknownWorker(worker_id.to_owned()));
        }
        let o = checked(req, set_by, now_ms)?;
        let replaced = self.overrides.set(worker_id, o)?;
        let shown = self
            .overrides
            .load()
            .list(now_ms)
            .into_iter()
            .find(|w| w.worker_id == worker_id)
            .ok_or_else(|| OverrideError::Invalid("the override expired as it was set".into()))?;
        tracing::warn!(
            worker = ?worker_id,
            kind = shown.kind.as_str(),
            weight = shown.weight,
            ttl_ms = req.ttl_ms,
            reason = ?shown.reason,
            set_by = ?shown.set_by,
            replaced = replaced.map(|r| r.kind.as_str()),
            "worker override set"
        );
        Ok(shown)
    }

    /// Clears `worker_id`'s override at `now_ms`; returns it, or `None`
    /// when it had none in force.
    pub fn clear_override(&self, worker_id: &str, now_ms: u64) -> Option<WorkerOverride> {
        let o = self.overrides.clear(worker_id)?;
        let shown = shown(worker_id, &o, now_ms)?;
        tracing::warn!(worker = ?worker_id, kind = o.kind.as_str(), "worker override cleared");
        Some(shown)
    }

    /// Clears every override at `now_ms`; returns those that were in force.
    pub fn clear_overrides(&self, now_ms: u64) -> Vec<WorkerOverride> {
        let gone: Vec<WorkerOverride> = self
            .overrides
            .clear_all()
            .iter()
            .filter_map(|(id, o)| shown(id, o, now_ms))
            .collect();
        if !gone.is_empty() {
            tracing::warn!(count = gone.len(), "every worker override cleared");
        }
        gone
    }

    /// The overrides in force at `now_ms`, by worker id.
    pub fn overrides(&self, now_ms: u64) -> Vec<WorkerOverride> {
        self.overrides.load().list(now_ms)
    }

    /// The override table (its generation moves on each change).
    pub fn override_table(&self) -> Arc<OverrideTable> {
        self.overrides.load()
    }

    /// Replaces every override by `table` (a balancer applying the
    /// service's view, built by [`from_view`]).
    ///
    /// [`from_view`]: crate::overrides::from_view
    pub fn replace_overrides(&self, table: OverrideMap) {
        self.overrides.replace(table);
    }

    /// Drops the overrides expired at `now_ms`, logging each.
    pub(crate) fn expire_overrides(&self, now_ms: u64) {
        for (id, o) in self.overrides.expire(now_ms) {
            tracing::warn!(worker = ?id, kind = o.kind.as_str(), reason = ?o.reason,
                set_by = ?o.set_by, "worker override expired");
        }
    }
}

fn shown(worker_id: &str, o: &Override, now_ms: u64) -> Option<WorkerOverride> {
    o.in_force(now_ms).then(|| o.shown(worker_id, now_ms))
}

#[cfg(test)]
mod tests {
    use crate::ScoreError;
    use crate::api::ScoreResponse;
    use crate::overrides::{OverrideError, OverrideKind, OverrideRequest, from_view};
    use crate::stages::test_support::{engine, report, request};
    use rand::SeedableRng;

    fn score(
        e: &crate::Engine,
        ids: &[&str],
        policy: &str,
        now_ms: u64,
    ) -> Result<ScoreResponse, ScoreError> {
        let mut req = request(ids);
        req.policy = Some(policy.into());
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        e.score(&req, &Default::default(), now_ms, "d".into(), &mut rng)
    }

    fn req(kind: OverrideKind, weight: Option<f64>, ttl_ms: Option<u64>) -> OverrideRequest {
        OverrideRequest {
            kind,
            weight,
            ttl_ms,
            reason: Some("kernel upgrade".into()),
        }
    }

    #[test]
    fn an_override_is_set_listed_and_expires_after_its_ttl() {
        let e = engine();
        report(&e, "w1", 0.1, 0, 1_000);
        let set = e
            .set_override(
                "w1",
                &req(OverrideKind::Drain, None, Some(5_000)),
                "ops",
                1_000,
            )
            .unwrap();
        assert_eq!(
            (
                set.kind,
                set.remaining_ms,
                set.set_by.as_str(),
                set.reason.as_str()
            ),
            (OverrideKind::Drain, Some(5_000), "ops", "kernel upgrade")
        );
        let listed = e.overrides(3_000);
        assert_eq!(listed.len(), 1);
        assert_eq!(
            (listed[0].age_ms, listed[0].remaining_ms),
            (2_000, Some(3_000))
        );
        assert!(e.overrides(6_000).is_empty());
        let generation = e.override_table().generation();
        e.expire_overrides(6_000);
        assert!(e.override_table().is_empty());
        assert_eq!(e.override_table().generation(), generation + 1);
    }

    #[test]
    fn an_unknown_worker_or_a_bad_field_is_refused_and_changes_nothing() {
        let e = engine();
        report(&e, "w1", 0.1, 0, 1_000);
        assert_eq!(
            e.set_override("ghost", &req(OverrideKind::Drain, None, None), "ops", 1_000),
            Err(OverrideError::UnknownWorker("ghost".into()))
        );
        for bad in [
            req(OverrideKind::Weight, None, None),
            req(OverrideKind::Weight, Some(0.0), None),
            req(OverrideKind::Weight, Some(f64::NAN), None),
            req(OverrideKind::Weight, Some(101.0), None),
            req(OverrideKind::Drain, Some(2.0), None),
            req(OverrideKind::Disable, None, Some(0)),
            OverrideRequest {
                reason: Some("a\nb".into()),
                ..req(OverrideKind::Drain, None, None)
            },
            OverrideRequest {
                reason: Some("x".repeat(257)),
                ..req(OverrideKind::Drain, None, None)
            },
        ] {
            assert!(
                matches!(
                    e.set_override("w1", &bad, "ops", 1_000),
                    Err(OverrideError::Invalid(_))
                ),
                "{bad:?}"
            );
        }
        assert!(e.override_table().is_empty());
        assert_eq!(e.override_table().generation(), 0);
    }

    #[test]
    fn clearing_one_or_all_returns_what_was_in_force() {
        let e = engine();
        report(&e, "w1", 0.1, 0, 1_000);
        report(&e, "w2", 0.1, 0, 1_000);
        e.set_override("w1", &req(OverrideKind::Disable, None, None), "ops", 1_000)
            .unwrap();
        e.set_override(
            "w2",
            &req(OverrideKind::Weight, Some(2.0), None),
            "ops",
            1_000,
        )
        .unwrap();
        assert_eq!(
            e.clear_override("w1", 1_500).map(|o| o.kind),
            Some(OverrideKind::Disable)
        );
        assert_eq!(e.clear_override("w1", 1_500), None);
        let all = e.clear_overrides(2_000);
        assert_eq!(all.len(), 1);
        assert_eq!(
            (all[0].worker_id.as_str(), all[0].weight),
            ("w2", Some(2.0))
        );
        assert!(e.overrides(2_000).is_empty());
    }

    #[test]
    fn a_view_replaces_the_table_with_its_times_read_on_the_local_clock() {
        let service = engine();
        report(&service, "w1", 0.1, 0, 1_000);
        service
            .set_override(
                "w1",
                &req(OverrideKind::Drain, None, Some(10_000)),
                "ops",
                1_000,
            )
            .unwrap();
        let sent = service.overrides(4_000);
        let router = engine();
        router.replace_overrides(from_view(&sent, 50_000).unwrap());
        let got = router.overrides(50_000);
        assert_eq!(got, sent);
        assert!(router.overrides(57_000).is_empty());
        let mut twice = sent.clone();
        twice.extend(sent.clone());
        assert!(from_view(&twice, 50_000).is_err());
        router.replace_overrides(from_view(&[], 50_000).unwrap());
        assert!(router.override_table().is_empty());
    }

    #[test]
    fn a_drained_worker_gets_no_pick_but_stays_a_last_resort_of_panic_mode() {
        let e = engine();
        report(&e, "w1", 0.1, 0, 1_000);
        report(&e, "w2", 0.1, 0, 1_000);
        e.set_override("w1", &req(OverrideKind::Drain, None, None), "ops", 1_000)
            .unwrap();
        for _ in 0..20 {
            let r = score(&e, &["w1", "w2"], "softmax", 1_000).unwrap();
            assert_eq!(r.pick.as_deref(), Some("w2"));
            let w1 = &r.scores[r.scores.iter().position(|s| s.worker_id == "w1").unwrap()];
            assert_eq!(
                (
                    w1.eligible,
                    w1.reason,
                    w1.operator_override,
                    w1.probability,
                    w1.final_score
                ),
                (
                    false,
                    Some("drained"),
                    Some(OverrideKind::Drain),
                    Some(0.0),
                    0.0
                )
            );
        }
        // w2 goes silent and dies; w1 keeps reporting: panic mode picks the drained one.
        report(&e, "w1", 0.1, 0, 20_000);
        let r = score(&e, &["w1", "w2"], "max", 20_000).unwrap();
        assert_eq!((r.pick.as_deref(), r.panic), (Some("w1"), true));
    }

    #[test]
    fn a_disabled_worker_is_never_picked_not_even_in_panic_mode() {
        let e = engine();
        report(&e, "w1", 0.1, 0, 1_000);
        report(&e, "w2", 0.1, 0, 1_000);
        e.set_override("w1", &req(OverrideKind::Disable, None, None), "ops", 1_000)
            .unwrap();
        let r = score(&e, &["w1", "w2"], "max", 1_000).unwrap();
        assert_eq!(r.pick.as_deref(), Some("w2"));
        report(&e, "w1", 0.1, 0, 20_000);
        let err = score(&e, &["w1", "w2"], "max", 20_000).unwrap_err();
        assert!(matches!(err, ScoreError::NoEligibleWorkers(_)), "{err}");
        assert_eq!(
            err.to_string(),
            "no eligible workers: worker `w1` is disabled by an operator override; \
             the other candidate is dead, unhealthy or has never reported"
        );
        // Cleared, it is picked again.
        e.clear_override("w1", 20_000);
        let r = score(&e, &["w1", "w2"], "max", 20_000).unwrap();
        assert_eq!(r.pick.as_deref(), Some("w1"));
    }

    #[test]
    fn the_refusal_names_the_operators_disable_or_drain_not_dead_workers() {
        let e = engine();
        report(&e, "w1", 0.1, 0, 1_000);
        e.set_override("w1", &req(OverrideKind::Disable, None, None), "ops", 1_000)
            .unwrap();
        let err = score(&e, &["w1"], "max", 1_000).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no eligible workers: worker `w1` is disabled by an operator override"
        );
        // A drain is a last resort in panic mode: refused only once w1 is dead too.
        e.set_override("w1", &req(OverrideKind::Drain, None, None), "ops", 1_000)
            .unwrap();
        assert_eq!(
            score(&e, &["w1"], "max", 1_000).unwrap().pick.as_deref(),
            Some("w1")
        );
        let err = score(&e, &["w1", "ghost"], "max", 20_000).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no eligible workers: worker `w1` is drained by an operator override and has \
             no live report; the other candidate is dead, unhealthy or has never reported"
        );
        e.clear_override("w1", 20_000);
        let err = score(&e, &["w1"], "max", 20_000).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no eligible workers: every candidate is dead or has never reported"
        );
    }

    /// A softmax preview: the same answer as a decision, no pick charged.
    fn preview(e: &crate::Engine, ids: &[&str], now_ms: u64) -> Result<ScoreResponse, ScoreError> {
        let mut req = request(ids);
        req.policy = Some("softmax".into());
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        e.preview(&req, &Default::default(), now_ms, &mut rng)
    }

    #[test]
    fn a_weight_divides_the_cost_and_moves_the_share_until_it_expires() {
        let e = engine();
        report(&e, "w1", 0.1, 0, 1_000);
        report(&e, "w2", 0.1, 0, 1_000);
        let even = preview(&e, &["w1", "w2"], 1_000).unwrap();
        e.set_override(
            "w1",
            &req(OverrideKind::Weight, Some(0.25), Some(1_000)),
            "ops",
            1_000,
        )
        .unwrap();
        let r = preview(&e, &["w1", "w2"], 1_500).unwrap();
        let of = |r: &ScoreResponse, id: &str| {
            r.scores
                .iter()
                .find(|s| s.worker_id == id)
                .cloned()
                .unwrap()
        };
        let (w1, w2) = (of(&r, "w1"), of(&r, "w2"));
        assert_eq!(w1.operator_override, Some(OverrideKind::Weight));
        assert!((w1.cost.unwrap() / w2.cost.unwrap() - 4.0).abs() < 1e-9);
        assert!((w1.final_score - 0.25 * w2.final_score).abs() < 1e-6);
        assert!(w1.probability.unwrap() < of(&even, "w1").probability.unwrap() / 2.0);
        assert!(w1.adjustments.iter().any(|a| a.code == "operator_weight"));
        // Past its time to live the weight no longer counts.
        let r = preview(&e, &["w1", "w2"], 2_000).unwrap();
        assert_eq!(of(&r, "w1").operator_override, None);
        assert_eq!(of(&r, "w1").cost, of(&r, "w2").cost);
    }
}
