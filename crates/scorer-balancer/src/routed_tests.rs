//! Sharing where keys went: one balancer's routed keys, reported with its
//! load, reach another's routing index through the view.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use scorer_core::locality::{PairHash, hash_str};
use scorer_engine::api::ScoreRequest;
use scorer_engine::config::Config;
use scorer_engine::view::{RoutedKey, ViewKind};

use crate::test_views::{WALL, full_view};
use crate::{Balancer, BalancerConfig, ViewError};

fn balancer(id: &str) -> Balancer {
    let b = Balancer::new(Config::default(), BalancerConfig::new(id)).expect("valid");
    let view = full_view(&b.engine().config_hash(), 0, &[("w1", 0.1), ("w2", 0.1)]);
    b.apply_view(&view, 0, WALL).expect("applied");
    b
}

/// `b` sends `key` to `w1` at `now_ms` and is told a miss.
fn miss(b: &Balancer, key: &str, now_ms: u64) {
    let req = ScoreRequest::new(key, vec!["w1".into()]);
    let p = b
        .pick(&req, now_ms, &mut ChaCha8Rng::seed_from_u64(now_ms))
        .expect("a pick");
    b.outcome_with_cache_hit(&p.decision_id, "w1", 10.0, true, Some(false), now_ms)
        .expect("an outcome");
}

fn age_on_w1(b: &Balancer, key: &str, now_ms: u64) -> Option<u64> {
    let ix = b.engine().routing_index()?;
    ix.age_ms(PairHash::new(hash_str(key), hash_str("w1")), now_ms)
}

#[test]
fn a_key_one_router_routed_reaches_the_others_index_with_its_age() {
    let (r1, r2) = (balancer("r1"), balancer("r2"));
    miss(&r1, "prime", 16);
    miss(&r2, "prime", 16);
    // Nothing to report before the first hit or miss; then every pick.
    assert!(
        r1.routed().is_empty(),
        "nothing before the first hit or miss"
    );
    miss(&r1, "tenant:1:user:7", 32);
    let routed = r1.routed();
    assert_eq!(
        routed,
        [RoutedKey::new(hash_str("tenant:1:user:7"), "w1", 0)]
    );
    assert!(r1.routed().is_empty(), "each key is reported once");
    // The service relays it to r2 160 ms later.
    let mut view = full_view(&r2.engine().config_hash(), 1, &[]);
    view.kind = ViewKind::Delta;
    view.routed = Some(
        routed
            .into_iter()
            .map(|r| RoutedKey { age_ms: 160, ..r })
            .collect(),
    );
    assert_eq!(age_on_w1(&r2, "tenant:1:user:7", 192), None);
    r2.apply_view(&view, 192, WALL).expect("applied");
    assert_eq!(age_on_w1(&r2, "tenant:1:user:7", 192), Some(160));
}

#[test]
fn a_malformed_routed_key_refuses_the_view_whole() {
    let r2 = balancer("r2");
    miss(&r2, "prime", 16);
    let mut view = full_view(&r2.engine().config_hash(), 1, &[]);
    view.kind = ViewKind::Delta;
    let good = RoutedKey::new(hash_str("k"), "w1", 0);
    for bad in [
        RoutedKey {
            key_hash: "ABCDEF0123456789".into(),
            ..good.clone()
        },
        RoutedKey {
            key_hash: "123".into(),
            ..good.clone()
        },
        RoutedKey {
            worker_id: String::new(),
            ..good.clone()
        },
        RoutedKey {
            age_ms: u64::MAX,
            ..good.clone()
        },
    ] {
        view.routed = Some(vec![good.clone(), bad]);
        assert_eq!(r2.apply_view(&view, 32, WALL), Err(ViewError::BadRouted(1)));
        assert_eq!(age_on_w1(&r2, "k", 32), None, "nothing learnt");
    }
}
