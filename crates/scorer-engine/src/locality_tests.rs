//! The locality term end to end: outcomes that say hit or miss teach each
//! worker's hit and miss times and how often a key routed there stays
//! warm; a key is then priced where it is likely warm.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::api::{Explain, ScoreRequest};
use crate::stages::test_support::{engine, report, request};
use crate::{Engine, Feedback};

/// Scores `key` over `ids` at `now_ms` with the `max` policy.
fn pick(e: &Engine, key: &str, ids: &[&str], now_ms: u64) -> crate::api::ScoreResponse {
    let mut req: ScoreRequest = request(ids);
    req.key = key.to_owned();
    req.explain = Explain::Itemised;
    let mut rng = ChaCha8Rng::seed_from_u64(now_ms);
    e.score(
        &req,
        &Default::default(),
        now_ms,
        format!("d-{key}-{now_ms}"),
        &mut rng,
    )
    .expect("scored")
}

fn outcome(e: &Engine, id: &str, worker: &str, latency_ms: f64, hit: Option<bool>, now_ms: u64) {
    let f = Feedback {
        decision_id: id.to_owned(),
        worker_id: worker.to_owned(),
        latency_ms,
        success: true,
        cache_hit: hit,
    };
    assert!(e.feedback(&f, now_ms).expect("valid").released);
}

/// Teaches `w`: 12 new keys miss at 10 ms, then the same keys, routed
/// again at once, hit at 1 ms.
fn teach(e: &Engine, w: &str, t: &mut u64) {
    for i in 0..12 {
        for (latency, hit) in [(10.0, false), (1.0, true)] {
            *t += 1;
            let r = pick(e, &format!("{w}:{i}"), &[w], *t);
            outcome(e, &r.decision_id, w, latency, Some(hit), *t);
        }
    }
}

#[test]
fn a_warm_worker_wins_until_its_queue_outweighs_a_miss_elsewhere() {
    let e = engine();
    report(&e, "w0", 0.1, 0, 0);
    report(&e, "w1", 0.1, 0, 0);
    // The first outcome that says hit or miss starts the routing index.
    let r = pick(&e, "prime", &["w0"], 10);
    outcome(&e, &r.decision_id, "w0", 10.0, Some(false), 10);
    let mut t = 10;
    teach(&e, "w0", &mut t);
    teach(&e, "w1", &mut t);
    // The key is routed to w0: a miss fills it, and it hits there.
    for (latency, hit) in [(10.0, false), (1.0, true)] {
        t += 1;
        let r = pick(&e, "hot", &["w0"], t);
        outcome(&e, &r.decision_id, "w0", latency, Some(hit), t);
    }
    // Idle: w0, where the key is warm, wins, and says why.
    t += 1;
    let r = pick(&e, "hot", &["w0", "w1"], t);
    outcome(&e, &r.decision_id, "w0", 1.0, Some(true), t);
    assert_eq!(r.pick.as_deref(), Some("w0"));
    let w0 = r.scores.iter().find(|s| s.worker_id == "w0").expect("w0");
    let line = w0
        .adjustments
        .iter()
        .find(|a| a.code == "locality")
        .expect("a locality line");
    assert!(
        line.reason.to_string().contains("key warm here with P = 8"),
        "{}",
        line.reason
    );
    // One request outstanding on w0: about 2.1 ms × 2³ = 17 against a
    // likely miss on w1, 8.9 ms: w1 wins.
    t += 1;
    let _busy = pick(&e, "other", &["w0"], t);
    let r = pick(&e, "hot", &["w0", "w1"], t);
    assert_eq!(r.pick.as_deref(), Some("w1"));
}

#[test]
fn without_hit_or_miss_outcomes_nothing_is_allocated_or_priced() {
    let e = engine();
    report(&e, "w0", 0.1, 0, 0);
    let r = pick(&e, "k", &["w0"], 10);
    outcome(&e, &r.decision_id, "w0", 1.0, None, 10);
    assert!(e.routing_index().is_none());
    let r = pick(&e, "k", &["w0"], 11);
    assert!(r.scores[0].adjustments.iter().all(|a| a.code != "locality"));
    outcome(&e, &r.decision_id, "w0", 1.0, Some(true), 11);
    assert!(e.routing_index().is_some());
}

#[test]
fn a_routing_learnt_from_another_router_counts_as_this_ones() {
    let e = engine();
    report(&e, "w0", 0.1, 0, 0);
    // Before any hit or miss there is no index: nothing is learnt.
    e.learn_routing(scorer_core::locality::hash_str("k"), "w0", 5);
    assert!(e.routing_index().is_none());
    let r = pick(&e, "prime", &["w0"], 10);
    outcome(&e, &r.decision_id, "w0", 10.0, Some(false), 10);
    e.learn_routing(scorer_core::locality::hash_str("k"), "w0", 16);
    let pair = scorer_core::locality::PairHash::new(
        scorer_core::locality::hash_str("k"),
        scorer_core::locality::hash_str("w0"),
    );
    let ix = e.routing_index().expect("an index");
    assert_eq!(ix.age_ms(pair, 1_616), Some(1_600));
}

#[test]
fn the_vector_carries_the_keys_warmth_and_its_prefixs_hit_rate_here() {
    use scorer_core::features::schema::{PREFIX_HIT_RATE_FEATURE, WARM_PROBABILITY_FEATURE};
    use scorer_core::locality::{PairHash, age_bucket, hash_str};
    let (warm, prefix) = (WARM_PROBABILITY_FEATURE, PREFIX_HIT_RATE_FEATURE);
    let e = engine();
    report(&e, "w0", 0.1, 0, 0);
    report(&e, "w1", 0.1, 0, 0);
    let obs = |r: &crate::api::ScoreResponse, w: &str| {
        r.scores
            .iter()
            .find(|s| s.worker_id == w)
            .expect("scored")
            .observation
    };
    // Before any outcome said hit or miss: both imputed.
    let r = pick(&e, "user:0", &["w0", "w1"], 10);
    assert_eq!((obs(&r, "w0")[warm], obs(&r, "w0")[prefix]), (-1.0, -1.0));
    outcome(&e, &r.decision_id, &r.pick.expect("picked"), 5.0, None, 10);
    // `user` keys hit on w0 and miss on w1; a failure teaches nothing.
    let mut t = 10;
    for i in 1..=20 {
        for (w, hit) in [("w0", true), ("w1", false)] {
            t += 1;
            let r = pick(&e, &format!("user:{i}"), &[w], t);
            outcome(&e, &r.decision_id, w, 2.0, Some(hit), t);
        }
    }
    t += 1;
    let r = pick(&e, "user:x", &["w1"], t);
    let failed = Feedback {
        decision_id: r.decision_id.clone(),
        worker_id: "w1".into(),
        latency_ms: 2.0,
        success: false,
        cache_hit: Some(true),
    };
    assert!(e.feedback(&failed, t).expect("valid").released);
    let rates = e.prefix_hit_rates().expect("allocated");
    let pair = |p: &str, w: &str| PairHash::new(hash_str(p), hash_str(w));
    assert_eq!(rates.hit_rate(pair("user", "w0")), Some(1.0));
    assert_eq!(rates.hit_rate(pair("user", "w1")), Some(0.0));
    // A new `user` key: its prefix's rate on each worker, and the cost's
    // chance that it is warm there (never routed: its home's bucket or
    // the never bucket).
    t += 1;
    let key = "user:new";
    let r = pick(&e, key, &["w0", "w1"], t);
    let home = ["w0", "w1"]
        .into_iter()
        .max_by_key(|w| PairHash::new(hash_str(key), hash_str(w)).weight())
        .expect("a home");
    for (w, rate) in [("w0", 1.0), ("w1", 0.0)] {
        let v = obs(&r, w);
        assert_eq!(v[prefix], rate, "{w}");
        let cache = e
            .registry()
            .get(w)
            .expect("known")
            .evidence()
            .snapshot()
            .cache;
        let p = cache.warm_probability(age_bucket(None, w == home));
        assert_eq!(v[warm], p as f32, "{w}");
    }
    assert!(obs(&r, "w0")[warm] > obs(&r, "w1")[warm]);
    // Another prefix has no outcomes on either worker: imputed.
    let r = pick(&e, "session:1", &["w0", "w1"], t + 1);
    assert_eq!(obs(&r, "w0")[prefix], -1.0);
    assert!(obs(&r, "w0")[warm] >= 0.0, "the worker's warmth is known");
}
