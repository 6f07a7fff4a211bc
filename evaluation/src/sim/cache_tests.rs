//! The simulator's caches: what a hit and a miss cost, write-through with
//! and without invalidation, a crash that empties a cache, and the
//! oracle's knowledge of every cache.

use super::cache::Key;
use super::{Request, Sim};
use crate::arms::Arm;
use crate::arms::baselines::round_robin::RoundRobin;
use crate::arms::oracle::Oracle;
use crate::router::Op;
use crate::scenario::Scenario;

fn world(workers: usize) -> Scenario {
    Scenario::preset("cache-affinity", workers, 10.0).expect("preset")
}

/// A key no cache starts with (the least popular).
const COLD: Key = Key {
    id: 9_999,
    hot: false,
};

fn request(sim: &mut Sim<'_>, op: Op, key: Key) -> usize {
    sim.reqs.push(Request {
        start_ms: 0.0,
        asked_ms: 0.0,
        attempts: 0,
        op,
        key,
        large: false,
        router: 0,
        awaiting: None,
    });
    sim.reqs.len() - 1
}

#[test]
fn a_get_that_hits_costs_the_hit_time_and_a_miss_the_miss_time_and_admits() {
    let sc = world(2);
    let mut rr = Arm::Local(Box::new(RoundRobin::new(2)));
    let mut sim = Sim::new(&sc, &mut rr, 1);
    assert!(
        !sim.workers[0]
            .cache
            .as_ref()
            .expect("cache")
            .contains(COLD.id)
    );
    assert_eq!(sim.touch_cache(0, Op::Get, COLD, false), Some(false));
    assert_eq!(
        sim.touch_cache(0, Op::Get, COLD, false),
        Some(true),
        "admitted"
    );
    assert_eq!(sim.mean_job_cost_ms(Op::Get, false, false, Some(true)), 1.0);
    assert_eq!(
        sim.mean_job_cost_ms(Op::Get, false, false, Some(false)),
        10.0
    );
    assert_eq!(sim.mean_job_cost_ms(Op::Put, false, false, None), 4.0);
    let rec = sim.rec.cache.as_ref().expect("record");
    assert_eq!((rec.hits[0], rec.misses[0], rec.misses[1]), (1, 1, 0));
    assert_eq!(rec.origin_bytes, 4_096);
}

#[test]
fn a_put_writes_through_and_invalidates_other_copies_only_when_asked() {
    for invalidate in [false, true] {
        let mut sc = world(2);
        sc.cache.as_mut().expect("cache").invalidate_on_put = invalidate;
        let mut rr = Arm::Local(Box::new(RoundRobin::new(2)));
        let mut sim = Sim::new(&sc, &mut rr, 1);
        sim.touch_cache(1, Op::Get, COLD, false);
        assert_eq!(sim.touch_cache(0, Op::Put, COLD, false), None);
        assert!(
            sim.workers[0]
                .cache
                .as_ref()
                .expect("cache")
                .contains(COLD.id)
        );
        let other = sim.workers[1]
            .cache
            .as_ref()
            .expect("cache")
            .contains(COLD.id);
        assert_eq!(other, !invalidate, "invalidate_on_put = {invalidate}");
    }
}

#[test]
fn a_crash_empties_the_cache_and_a_down_worker_serves_nothing() {
    let sc = world(2);
    let mut rr = Arm::Local(Box::new(RoundRobin::new(2)));
    let mut sim = Sim::new(&sc, &mut rr, 1);
    assert_eq!(sim.workers[0].cache.as_ref().map(|c| c.len()), Some(2_000));
    sim.workers[0].crash(1.0);
    assert!(sim.workers[0].cache.as_ref().expect("cache").is_empty());
    assert_eq!(sim.touch_cache(0, Op::Get, COLD, false), None, "down");
    sim.workers[0].down = false;
    assert_eq!(
        sim.touch_cache(0, Op::Get, Key { id: 0, hot: false }, false),
        Some(false),
        "cold"
    );
}

#[test]
fn caches_start_with_the_most_popular_keys() {
    let sc = world(3);
    let mut rr = Arm::Local(Box::new(RoundRobin::new(3)));
    let sim = Sim::new(&sc, &mut rr, 1);
    let top = sim.keys.most_popular(1);
    for w in &sim.workers {
        let c = w.cache.as_ref().expect("cache");
        assert!(c.contains(top[0]) && !c.contains(COLD.id));
    }
}

#[test]
fn the_oracle_sends_a_key_where_it_is_warm() {
    let sc = world(3);
    let mut oracle = Arm::Oracle(Box::new(Oracle::new(3)));
    let mut sim = Sim::new(&sc, &mut oracle, 1);
    sim.touch_cache(2, Op::Get, COLD, false);
    let req = request(&mut sim, Op::Get, COLD);
    assert_eq!(sim.decide(req, 0.0).worker, 2);
    // 1 ms at worker 2 against 10 ms elsewhere.
    assert_eq!(sim.truth[2], 1.0);
    assert_eq!(sim.truth[0], 10.0);
}

#[test]
fn without_a_cache_nothing_is_recorded_and_every_get_costs_the_same() {
    let sc = Scenario::preset("homogeneous", 2, 10.0).expect("preset");
    let mut rr = Arm::Local(Box::new(RoundRobin::new(2)));
    let mut sim = Sim::new(&sc, &mut rr, 1);
    assert!(sim.rec.cache.is_none() && sim.workers[0].cache.is_none());
    assert_eq!(sim.touch_cache(0, Op::Get, COLD, false), None);
    assert_eq!(sim.mean_job_cost_ms(Op::Get, false, false, None), 2.0);
}
