//! Many routers, one scorer: in `many-routers` the baselines keep one
//! independent state per router (as sidecars do) while the service arms
//! share one service. Simulated time, seeded RNG.

use evaluation::arms::service_ids::{WALL_EPOCH_MS, worker_id};
use evaluation::arms::{Arm, build};
use evaluation::router::{Op, PickRequest};
use evaluation::runner::{SimOptions, run_sim};
use evaluation::scenario::{MANY_ROUTERS, Scenario, WorkerSpec};
use evaluation::sim::worker::SimWorker;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use scorer_engine::config::Config;

fn req(router: usize) -> PickRequest<'static> {
    PickRequest {
        now_ms: 10.0,
        key: "user:1:profile",
        op: Op::Get,
        timeout_ms: 100.0,
        router,
    }
}

#[test]
fn the_service_arm_is_one_engine_for_every_router() {
    let n = 4;
    let Some(Arm::Remote(mut arm)) = build(
        "service-rules",
        n,
        MANY_ROUTERS,
        None,
        &Config::default(),
        None,
    ) else {
        panic!("service-rules is a remote scorer")
    };
    let batch: Vec<_> = (0..n)
        .filter_map(|i| {
            SimWorker::new(WorkerSpec::default()).snapshot(&worker_id(i), 0.0, WALL_EPOCH_MS, 2.0)
        })
        .collect();
    assert_eq!(batch.len(), n);
    arm.telemetry(&batch, 0.0);
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let ids: Vec<String> = (0..MANY_ROUTERS)
        .map(|r| {
            arm.pick(&req(r), &mut rng)
                .decision_id
                .expect("the service decided")
        })
        .collect();
    // One engine numbers every router's decisions in one sequence; one
    // engine per router would start each router at the same id.
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), MANY_ROUTERS, "{ids:?}");
    assert_eq!(arm.fallbacks(), 0);
}

#[test]
fn a_baseline_arm_is_one_instance_per_router() {
    // Two workers, P2C least-request: router 0's three outstanding picks
    // (2 on one worker, 1 on the other) are invisible to router 1, whose
    // picks are those of a fresh instance with the same random stream.
    let mut arm = build(
        "p2c-least-request",
        2,
        MANY_ROUTERS,
        None,
        &Config::default(),
        None,
    )
    .expect("baseline");
    let arm = arm.router();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for _ in 0..3 {
        arm.pick(&req(0), &mut rng);
    }
    let mut fresh =
        build("p2c-least-request", 2, 1, None, &Config::default(), None).expect("baseline");
    let fresh = fresh.router();
    let mut rng_fresh = rng.clone();
    for _ in 0..6 {
        assert_eq!(
            arm.pick(&req(1), &mut rng).worker,
            fresh.pick(&req(1), &mut rng_fresh).worker
        );
    }
}

fn short_many_routers(routers: usize) -> SimOptions {
    let mut sc = Scenario::preset("many-routers", 12, 20.0).expect("preset");
    sc.routers = routers;
    let mut o = SimOptions::new("many-routers");
    o.custom = Some(sc);
    o.policies = vec!["p2c-least-request".to_owned(), "service-rules".to_owned()];
    o
}

#[test]
fn many_routers_runs_and_independent_sidecars_balance_worse() {
    let r8 = run_sim(&short_many_routers(MANY_ROUTERS)).expect("8 routers");
    let r1 = run_sim(&short_many_routers(1)).expect("1 router");
    assert_eq!(r8.routers, MANY_ROUTERS);
    for p in r8.policies.iter().chain(&r1.policies) {
        assert_eq!(p.status, "ok", "{}: {:?}", p.name, p.skip_reason);
        assert!(p.requests.unwrap_or(0) > 10_000, "{}", p.name);
    }
    // Same workload; 8 sidecars that each see an eighth of the in-flight
    // requests balance worse than one router that sees them all.
    let (p99_8, p99_1) = (
        r8.policies[0].p99_ms.unwrap(),
        r1.policies[0].p99_ms.unwrap(),
    );
    assert!(
        p99_8 > 1.2 * p99_1,
        "8 routers {p99_8} ms vs 1 router {p99_1} ms"
    );
    // The preset is the homogeneous set-up with 8 routers.
    let mut h = Scenario::preset("homogeneous", 12, 20.0).expect("preset");
    let m = Scenario::preset("many-routers", 12, 20.0).expect("preset");
    (h.name, h.description, h.routers) = (m.name.clone(), m.description.clone(), MANY_ROUTERS);
    assert_eq!(h, m);
}
