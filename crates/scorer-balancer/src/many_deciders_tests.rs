//! Many routers deciding on the same stale view of each other's load: the
//! balancer interprets the load's age instead of chasing its minimum.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use scorer_engine::api::ScoreRequest;
use scorer_engine::config::Config;
use scorer_engine::view::WorkerLoad;

use crate::test_views::{WALL, full_view};
use crate::{Balancer, BalancerConfig, ViewError};

const WORKERS: [&str; 4] = ["w0", "w1", "w2", "w3"];

/// Router `id`, told at monotonic 1 000 that the others have nothing on
/// `w0` and 2 picks on each other worker, as of `load_age_ms` before.
fn router(id: &str, load_age_ms: u64) -> Balancer {
    router_among(id, load_age_ms, 7)
}

/// [`router`], the view counting `others` other routers.
fn router_among(id: &str, load_age_ms: u64, others: u32) -> Balancer {
    let mut cfg = Config::default();
    cfg.scoring.warmup_ms = 0;
    let b = Balancer::new(cfg, BalancerConfig::new(id)).expect("valid");
    let workers: Vec<(&str, f64)> = WORKERS.iter().map(|&w| (w, 0.2)).collect();
    let mut v = full_view(b.engine().config_hash().as_ref(), 1_000, &workers);
    v.load = Some(
        WORKERS[1..]
            .iter()
            .map(|&w| WorkerLoad {
                worker_id: w.into(),
                outstanding: 2,
            })
            .collect(),
    );
    v.load_age_ms = Some(load_age_ms);
    v.load_routers = Some(others);
    b.apply_view(&v, 1_000, WALL + 1_000).expect("valid view");
    assert_eq!(b.engine().routers_sharing(), others + 1);
    b
}

/// Three picks in a row of each of four routers holding the same view, no
/// outcome between them: per router, how many land on `w0`, the view's
/// minimum, and on how many distinct workers its picks land.
fn picks(load_age_ms: u64) -> Vec<(usize, usize)> {
    let req = ScoreRequest::new(
        "user:1:profile",
        WORKERS.iter().map(|&w| w.into()).collect(),
    );
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    (0..4)
        .map(|r| {
            let b = router(&format!("router-{r}"), load_age_ms);
            let mut got: Vec<String> = (0..3)
                .map(|_| b.pick(&req, 1_000, &mut rng).expect("a pick").worker)
                .collect();
            let on_w0 = got.iter().filter(|w| *w == "w0").count();
            got.sort();
            got.dedup();
            (on_w0, got.len())
        })
        .collect()
}

#[test]
fn routers_herd_on_a_fresh_looking_minimum_and_spread_once_its_age_is_read() {
    // Taken as fresh (argmin over the view's counts), the view's idle
    // worker takes at least two of every router's first three picks: eight
    // or more requests land together where the view said nothing was.
    let fresh = picks(0);
    assert!(fresh.iter().all(|&(on_w0, _)| on_w0 >= 2), "{fresh:?}");
    // 10 ms old (many service times): the others' counts are pulled to the
    // pool's median, each router's own exact count decides, and its three
    // picks go to three different workers, at most one of them w0.
    let aged = picks(10);
    assert!(
        aged.iter()
            .all(|&(on_w0, distinct)| on_w0 <= 1 && distinct == 3),
        "{aged:?}"
    );
}

/// The first pick of each of 32 routers holding the same fresh view among
/// `others` other routers: how many land on `w0`, the view's minimum.
fn first_picks_on_the_minimum(others: u32) -> usize {
    let req = ScoreRequest::new(
        "user:1:profile",
        WORKERS.iter().map(|&w| w.into()).collect(),
    );
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    (0..32)
        .filter(|r| {
            let b = router_among(&format!("router-{r}"), 0, others);
            b.pick(&req, 1_000, &mut rng).expect("a pick").worker == "w0"
        })
        .count()
}

#[test]
fn from_many_routers_on_the_pick_is_randomized_and_the_first_picks_spread() {
    // 8 routers: the lowest cost, the same worker for every router.
    assert_eq!(first_picks_on_the_minimum(7), 32);
    // 64 routers: `p2c` over the cost; w0 wins only the draws that hold
    // it (1 in 2 with 4 workers).
    let spread = first_picks_on_the_minimum(63);
    assert!((8..=24).contains(&spread), "{spread}");
}

#[test]
fn a_load_older_than_a_day_is_refused() {
    let b = router("router-0", 0);
    let mut v = full_view(b.engine().config_hash().as_ref(), 2_000, &[("w0", 0.2)]);
    v.load = Some(Vec::new());
    v.load_age_ms = Some(scorer_engine::view::MAX_VIEW_AGE_MS + 1);
    let err = b.apply_view(&v, 2_000, WALL + 2_000).unwrap_err();
    assert!(matches!(err, ViewError::LoadAge(_)), "{err}");
}

#[test]
fn bad_many_router_keys_are_refused_with_their_names() {
    let refused = |edit: fn(&mut Config)| {
        let mut cfg = Config::default();
        edit(&mut cfg);
        Balancer::new(cfg, BalancerConfig::new("router-0"))
            .expect_err("refused")
            .to_string()
    };
    let none = refused(|c| c.selection.many_routers_policy = "none".into());
    assert!(none.contains("selection.many_routers_policy"), "{none}");
    let unknown = refused(|c| c.selection.many_routers_policy = "fastest".into());
    assert!(
        unknown.contains("selection.many_routers_policy"),
        "{unknown}"
    );
    let one = refused(|c| c.selection.many_routers_min = 1);
    assert!(one.contains("selection.many_routers_min"), "{one}");
    for bad in [0.0, f64::NAN, f64::INFINITY, 1e9] {
        let mut cfg = Config::default();
        cfg.evidence.others_load_decay_service_times = bad;
        let err = Balancer::new(cfg, BalancerConfig::new("router-0")).expect_err("refused");
        assert!(
            err.to_string().contains("others_load_decay_service_times"),
            "{bad}: {err}"
        );
    }
}

/// Whether router `b`'s decision over the four workers ran the model, and
/// why not when it did not.
fn model_used(b: &Balancer) -> (bool, Option<&'static str>) {
    let req = ScoreRequest::new(
        "user:1:profile",
        WORKERS.iter().map(|&w| w.into()).collect(),
    );
    let ctx = scorer_core::scoring::RequestContext::default();
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let resp = b
        .engine()
        .preview(&req, &ctx, 1_000, &mut rng)
        .expect("a decision");
    (resp.model.used, resp.model.fallback_reason)
}

#[test]
fn among_other_routers_the_model_is_held_unless_many_deciders_is_set() {
    let dir = std::env::temp_dir().join(format!("balancer-many-deciders-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let model = scorer_model::fixture::random_model(5, 3, 7);
    scorer_model::fixture::write_model_dir(&dir, &model, "t1", 10, 1).expect("a model");
    let with = |many_deciders: bool, others: u32| {
        let mut cfg = Config::default();
        cfg.scoring.warmup_ms = 0;
        cfg.model.dir.clone_from(&dir);
        cfg.model.budget_us = 1_000_000;
        cfg.model.many_deciders = many_deciders;
        let clock = std::sync::Arc::new(scorer_core::clock::SystemClock::new());
        let hub = std::sync::Arc::new(scorer_model::ModelHub::load(&cfg.model, clock));
        let b = Balancer::new(cfg, BalancerConfig::new("router-0"))
            .expect("valid")
            .with_models(hub);
        let workers: Vec<(&str, f64)> = WORKERS.iter().map(|&w| (w, 0.2)).collect();
        let mut v = full_view(b.engine().config_hash().as_ref(), 1_000, &workers);
        v.load = Some(Vec::new());
        v.load_routers = Some(others);
        b.apply_view(&v, 1_000, WALL + 1_000).expect("valid view");
        model_used(&b)
    };
    // Alone (the view counts no other router), the model decides.
    assert_eq!(with(false, 0), (true, None));
    // Among 7 others, the rules decide, and say why.
    assert_eq!(with(false, 7), (false, Some("many_deciders")));
    // Unless the configuration asks for the model there too.
    assert_eq!(with(true, 7), (true, None));
    let _ = std::fs::remove_dir_all(&dir);
}
