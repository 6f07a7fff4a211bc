//! The cost stage with workers' cache digests: a fresh digest moves the
//! key's chance of being warm and the explanation names it; a stale one,
//! or none, leaves the routing estimate as it was.

use super::cost;
use super::test_support::{WALL, engine, request, through_dynamics};
use crate::Engine;
use scorer_core::locality::warmth::NEVER_BUCKET;
use scorer_core::locality::{Bloom, CacheEvidence, LocalityEstimate, RoutingIndex};
use scorer_core::telemetry::{CacheDigest, Snapshot};

/// The request's key ([`request`]).
const KEY: &str = "user:1:profile";

fn snapshot(id: &str, at_ms: u64, digest: Option<&[&str]>) -> Snapshot {
    let mut s = Snapshot::new(id.to_owned(), WALL + at_ms);
    s.cpu_usage = 0.1;
    s.rtt_ms_avg = 1.0;
    s.rtt_ms_p99 = 2.0;
    s.cache_digest = digest.map(|keys| {
        let mut b = Bloom::new(1_024, 7).expect("shape");
        keys.iter().for_each(|k| b.insert(k));
        CacheDigest::from_bloom(&b, keys.len() as u64)
    });
    s
}

fn send(e: &Engine, id: &str, at_ms: u64, digest: Option<&[&str]>) {
    e.ingest(&[snapshot(id, at_ms, digest)], at_ms, WALL + at_ms)
        .expect("valid snapshot");
}

/// Learnt hit (1 ms) and miss (10 ms) times; a key never routed to the
/// worker is warm half the time.
fn learnt() -> CacheEvidence {
    let mut c = CacheEvidence::default();
    for i in 0..64 {
        c.observe(
            Some(NEVER_BUCKET),
            if i % 2 == 0 { 1.0 } else { 10.0 },
            i % 2 == 0,
        );
    }
    c
}

/// The locality of each candidate of a pick of [`KEY`] at `now_ms`, and
/// the locality lines' reasons.
fn localities(e: &Engine, ids: &[&str], now_ms: u64) -> Vec<(LocalityEstimate, String)> {
    let req = request(ids);
    let mut d = through_dynamics(&req, e, now_ms);
    for s in &mut d.scored {
        s.evidence.cache = learnt();
    }
    let ix = RoutingIndex::new(1 << 10);
    cost(&mut d, &e.config(), Some(&ix), None);
    d.scored
        .iter()
        .map(|s| {
            let reason =
                s.e.adjustments
                    .iter()
                    .find(|a| a.code == "locality")
                    .map(|a| a.reason.to_string())
                    .unwrap_or_default();
            (s.locality.expect("a locality estimate"), reason)
        })
        .collect()
}

#[test]
fn a_fresh_digest_moves_p_warm_and_the_explanation_names_it() {
    let e = engine();
    send(&e, "held", 1_000, Some(&[KEY]));
    send(&e, "not_held", 1_000, Some(&["user:2:profile"]));
    let l = localities(&e, &["held", "not_held"], 1_500);
    let (held, why_held) = &l[0];
    let (not_held, why_not) = &l[1];
    assert_eq!((held.digest, not_held.digest), (Some(true), Some(false)));
    assert!(
        held.p_warm > 0.95 && held.p_warm > held.p_routing,
        "{held:?}"
    );
    assert!(
        not_held.p_warm < 0.05 && not_held.p_warm < not_held.p_routing,
        "{not_held:?}"
    );
    assert!(why_held.contains("digest: present"), "{why_held}");
    assert!(why_not.contains("digest: absent"), "{why_not}");
    assert!(why_held.contains("own routing"), "{why_held}");
}

#[test]
fn a_digest_older_than_the_telemetry_lifetime_is_ignored() {
    let e = engine();
    let ttl_ms = e.config().telemetry.dead_after_ms;
    send(&e, "w", 1_000, Some(&["user:2:profile"]));
    // Later reports without a digest keep the worker alive, not the digest.
    send(&e, "w", 1_000 + ttl_ms, None);
    let fresh = &localities(&e, &["w"], 1_000 + ttl_ms)[0].0;
    assert_eq!(fresh.digest, Some(false));
    send(&e, "w", 1_001 + ttl_ms, None);
    let (stale, why) = &localities(&e, &["w"], 1_001 + ttl_ms)[0];
    assert_eq!(stale.digest, None);
    assert_eq!(stale.p_warm, stale.p_routing);
    assert!(!why.contains("digest"), "{why}");
}

#[test]
fn without_a_digest_the_estimate_and_the_cost_are_the_routing_ones() {
    let e = engine();
    send(&e, "w", 1_000, None);
    let (l, why) = &localities(&e, &["w"], 1_500)[0];
    let bucket_p = learnt().warm_probability(l.bucket);
    assert_eq!(
        (l.digest, l.p_warm, l.p_routing),
        (None, bucket_p, bucket_p)
    );
    assert!(why.starts_with("key warm here with P = 4"), "{why}");
    assert!(!why.contains("digest"), "{why}");
}

#[test]
fn a_malformed_digest_refuses_the_whole_batch_and_changes_nothing() {
    let e = engine();
    send(&e, "w", 1_000, Some(&[KEY]));
    let good = snapshot("other", 2_000, None);
    let mut bad = snapshot("w", 2_000, Some(&[]));
    if let Some(d) = bad.cache_digest.as_mut() {
        d.bloom_b64.truncate(10);
    }
    let err = e
        .ingest(&[good, bad], 2_000, WALL + 2_000)
        .expect_err("refused");
    let text = format!("{err:?}");
    assert!(text.contains("cache_digest"), "{text}");
    assert!(
        e.registry().get("other").is_none(),
        "nothing of the batch applied"
    );
    let l = &localities(&e, &["w"], 2_000)[0].0;
    assert_eq!(l.digest, Some(true), "the held digest is the old one");
}
