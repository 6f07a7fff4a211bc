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
