//! The cost stage of a scoring: each selectable candidate's routing cost
//! and expected latency from the service's own evidence and its snapshot
//! ([`scorer_core::scoring::apply_cost`]), relative to the fastest candidate.

use crate::config::Config;
use crate::decision::{Decision, Scored};
use scorer_core::dynamics::{EvidenceSnapshot, median_in};
use scorer_core::features::CandidateEvidence;
use scorer_core::locality::{
    HeldDigest, LocalityEstimate, PairHash, PrefixHitRates, RoutingIndex, age_bucket, hash_str,
    key_hash, warm_with_digest,
};
use scorer_core::scoring::{CostInputs, Stage, apply_cost};

/// The service-time prior of candidates without outcomes, ms: the median
/// estimate of those with outcomes, else the median reported mean RTT,
/// else 1 ms (all candidates then share it, so only its ratio matters).
/// (`sample` is a buffer.)
fn prior_ms(scored: &[Scored], selectable: &[usize], sample: &mut Vec<f64>) -> f64 {
    sample.clear();
    sample.extend(
        selectable
            .iter()
            .filter_map(|&i| scored[i].evidence.service.last_ms()),
    );
    if let Some(m) = median_in(sample) {
        return m.max(1e-6);
    }
    sample.clear();
    sample.extend(
        selectable
            .iter()
            .filter_map(|&i| scored[i].view.as_ref().map(|v| v.smoothed.rtt_ms_avg))
            .filter(|r| *r > 0.0),
    );
    median_in(sample).unwrap_or(1.0).max(1e-6)
}

/// The median of one evidence figure over the selectable candidates, 0
/// without any (`sample` is a buffer).
fn median_of(
    scored: &[Scored],
    selectable: &[usize],
    sample: &mut Vec<f64>,
    figure: impl Fn(&EvidenceSnapshot) -> f64,
) -> f64 {
    sample.clear();
    sample.extend(selectable.iter().map(|&i| figure(&scored[i].evidence)));
    median_in(sample).unwrap_or(0.0)
}

/// The candidate's digest, when it has one no older than
/// `telemetry.dead_after_ms`.
fn fresh_digest<'s>(s: &'s Scored, cfg: &Config, now_ms: u64) -> Option<&'s HeldDigest> {
    let d = s.view.as_ref()?.digest.as_deref()?;
    d.is_fresh(now_ms, cfg.telemetry.dead_after_ms).then_some(d)
}

/// What the routing index, the worker's cache evidence and its fresh
/// digest (with the key's [`key_hash`]) say of the key on worker `id`.
fn locality(
    ix: &RoutingIndex,
    pair: PairHash,
    home: bool,
    evidence: &EvidenceSnapshot,
    digest: Option<(&HeldDigest, u64)>,
    cfg: &Config,
    now_ms: u64,
) -> LocalityEstimate {
    let cache = &evidence.cache;
    let routed_age_ms = cache.routing_age(ix.age_ms(pair, now_ms), now_ms);
    let bucket = age_bucket(routed_age_ms, home);
    let p_routing = cache.warm_probability(bucket);
    let present = digest.map(|(d, hash)| d.contains_hash(hash));
    let p_warm = match (digest, present) {
        (Some((d, _)), Some(present)) => {
            let routed_since = routed_age_ms.is_some_and(|a| a < d.age_ms(now_ms));
            warm_with_digest(p_routing, present, d.false_positive_rate, routed_since)
        }
        _ => p_routing,
    };
    LocalityEstimate {
        routed_age_ms,
        home,
        bucket,
        p_warm,
        p_routing,
        digest: present,
        hit_ms: cache.hit_ms,
        miss_ms: cache.miss_ms,
        priced: cache.is_learnt(cfg.locality.min_outcomes),
    }
}

/// Runs the cost stage on the selectable candidates of `d` (not in panic
/// mode, where penalties and evidence are ignored). With the routing index
/// each gets its [`LocalityEstimate`], and with the prefix hit rates its
/// prefix's (features of the model; the rates are not a term of the cost).
pub(crate) fn cost(
    d: &mut Decision<'_>,
    cfg: &Config,
    index: Option<&RoutingIndex>,
    rates: Option<&PrefixHitRates>,
) {
    if let Some(rates) = rates {
        let prefix = hash_str(d.key.prefix);
        for &i in &d.selectable {
            let pair = PairHash::new(prefix, hash_str(d.ids[i]));
            d.scored[i].prefix_hit_rate = rates.hit_rate(pair);
        }
    }
    let (scored, selectable) = (&mut d.scored, &d.selectable);
    let (context, now_ms) = (d.context, d.now_ms);
    let (service, sample) = (&mut d.scratch.figures, &mut d.scratch.sample);
    let ev = &cfg.evidence;
    let prior = prior_ms(scored, selectable, sample);
    service.clear();
    service.extend(selectable.iter().map(|&i| {
        scored[i]
            .evidence
            .service
            .value_at(now_ms, prior, ev.latency_decay_ms)
            .max(1e-6)
    }));
    if let Some(ix) = index {
        let pairs: Vec<PairHash> = selectable
            .iter()
            .map(|&i| PairHash::new(d.key_hash, hash_str(d.ids[i])))
            .collect();
        let home = pairs
            .iter()
            .enumerate()
            .max_by_key(|(_, p)| p.weight())
            .map(|(j, _)| j);
        // Hashed only when some candidate has a fresh digest.
        let mut digest_key = None;
        for (j, &i) in selectable.iter().enumerate() {
            let at_home = home == Some(j);
            let digest = fresh_digest(&scored[i], cfg, now_ms)
                .map(|dg| (dg, *digest_key.get_or_insert_with(|| key_hash(&d.req.key))));
            let l = locality(
                ix,
                pairs[j],
                at_home,
                &scored[i].evidence,
                digest,
                cfg,
                now_ms,
            );
            if l.priced {
                service[j] = l.expected_ms().max(1e-6);
            }
            scored[i].locality = Some(l);
        }
    }
    let fastest = service.iter().copied().fold(f64::INFINITY, f64::min);
    // The pool's typical unseen backlog (the median of the candidates'
    // last reports): an aged report's is pulled toward it.
    let decay = ev.unseen_backlog_decay_ms;
    let unseen_prior = median_of(scored, selectable, sample, |e| e.unseen_backlog);
    // The other routers' load is pulled toward its median over the
    // candidates as it ages, in about a service time (see
    // `EvidenceSnapshot::others_backlog_at`).
    let others_prior = median_of(scored, selectable, sample, |e| e.others_backlog);
    let others_tau_ms = ev.others_load_decay_service_times * prior;
    let penalty_ms = ev.penalty_ms(context.timeout_ms);
    // Slow start counts relative to the most ramped-up candidate: a pool
    // that is all new (or all back) together is not slowed against itself.
    let full = selectable
        .iter()
        .map(|&i| scored[i].ramp.min(1.0))
        .fold(f64::MIN_POSITIVE, f64::max);
    for (j, &i) in selectable.iter().enumerate() {
        let s = &mut scored[i];
        let Some(v) = s.view.as_deref() else {
            continue;
        };
        let inputs = CostInputs {
            service_ms: service[j],
            service_is_prior: s.evidence.service.samples() == 0,
            outcomes: s.evidence.outcomes,
            fastest_ms: fastest,
            outstanding: s.evidence.outstanding,
            unseen_backlog: s.evidence.unseen_backlog_at(now_ms, unseen_prior, decay)
                + s.evidence
                    .others_backlog_at(now_ms, others_prior, others_tau_ms),
            head_elapsed_ms: s.evidence.head_elapsed_ms(now_ms),
            reported_failure_rate: v.smoothed.error_rate,
            observed_failure_rate: s.evidence.failure_rate_at(now_ms, ev.failure_rate_decay_ms),
            trust: s.trust,
            compacting: v.compacting,
            cpu_usage: v.smoothed.cpu_usage,
            request_type: context.request_type,
            ramp: (s.ramp.min(1.0) / full).min(1.0),
            penalty_ms,
            locality: s.locality,
        };
        s.e.stage = Stage::Cost;
        let estimate = apply_cost(&mut s.e, &inputs, &cfg.cost);
        s.cost_evidence = Some(CandidateEvidence {
            outstanding: inputs.outstanding,
            service_time_ms: inputs.service_ms,
            outcomes: inputs.outcomes,
            unseen_backlog: inputs.unseen_backlog,
            observed_failure_rate: inputs.observed_failure_rate,
            cost: estimate.cost,
            expected_latency_ms: estimate.expected_latency_ms,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::test_support::{engine, report, request, through_dynamics};

    #[test]
    fn each_selectable_candidate_gets_an_expected_latency_and_the_busier_costs_more() {
        let e = engine();
        report(&e, "idle", 0.1, 0, 1_000);
        report(&e, "ghost_free", 0.1, 0, 1_000);
        let req = request(&["idle", "ghost_free", "ghost"]);
        let mut d = through_dynamics(&req, &e, 1_000);
        // Two picks outstanding on the second worker.
        for _ in 0..2 {
            d.scored[1].evidence.outstanding += 1;
        }
        cost(&mut d, &e.config(), None, None);
        let idle = d.scored[0].cost_evidence.expect("costed");
        let busy = d.scored[1].cost_evidence.expect("costed");
        assert_eq!((idle.outstanding, busy.outstanding), (0, 2));
        assert!(busy.cost > idle.cost);
        // Two ahead: three service times.
        assert!((busy.expected_latency_ms / idle.expected_latency_ms - 3.0).abs() < 1e-9);
        assert!(d.scored[0].e.score > d.scored[1].e.score);
        // Not selectable: not costed.
        assert!(d.scored[2].cost_evidence.is_none());
    }

    #[test]
    fn the_service_time_prior_is_the_median_reported_mean_rtt_without_outcomes() {
        let e = engine();
        report(&e, "a", 0.1, 0, 1_000);
        let req = request(&["a"]);
        let d = through_dynamics(&req, &e, 1_000);
        assert_eq!(prior_ms(&d.scored, &d.selectable, &mut Vec::new()), 1.0);
    }
}
