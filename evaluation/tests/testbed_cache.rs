//! One short run of the real testbed's `cache` scenario: six redis-server
//! workers made LRU caches, an origin redis-server holding every key, the
//! agent and the service over HTTP. Two arms, a baseline and the embedded
//! balancer, both reading cache-aside through the one request path. Each
//! arm's hit rate must come from the workers' INFO counters, lie in [0, 1]
//! and agree with the router's own count; misses read the origin. Every
//! process is stopped by pid.

use evaluation::testbed::{TestbedArgs, cache, run};

#[test]
fn every_arm_reads_cache_aside_and_its_hit_rate_comes_from_redis() {
    let out = std::env::temp_dir().join(format!("eval-testbed-cache-{}", std::process::id()));
    let mut args = TestbedArgs::defaults(cache::NAME, &out);
    args.policies = Some(vec![
        "least-request-all".to_owned(),
        "service-embedded".to_owned(),
    ]);
    args.duration_s = cache::WARMUP_S + 2.0;
    args.fault_at_s = 0.0;
    args.fault_ms = 1;
    args.rate = 300.0;
    let r = run(&args).expect("testbed runs (redis-server installed by scripts/test.sh)");
    let _ = std::fs::remove_dir_all(&out);
    assert_eq!(r.policies.len(), 2);
    assert!(
        (r.duration_s - 2.0).abs() < 1e-9,
        "measured after the warm-up"
    );
    for p in &r.policies {
        assert_eq!(p.status, "ok", "{}: {:?}", p.name, p.skip_reason);
        let c = p.redis_cache.as_ref().expect("cache figures");
        let summary = p.cache.as_ref().expect("the common cache summary");
        assert_eq!(
            summary.hit_rate,
            c.hit_rate_redis.map(|h| (h * 1e4).round() / 1e4)
        );
        let redis = c.hit_rate_redis.expect("lookups counted by the workers");
        let router = c.hit_rate_router.expect("GETs counted by the router");
        assert!((0.0..=1.0).contains(&redis), "{}: {redis}", p.name);
        assert!(c.redis_hits + c.redis_misses > 100, "{}: {c:?}", p.name);
        assert_eq!(c.hit_rate_redis_per_worker.len(), 6);
        assert!(c.origin_reads > 0, "{}: misses read the origin", p.name);
        assert!(
            (redis - router).abs() <= 0.03,
            "{}: Redis {redis} vs router {router}",
            p.name
        );
        assert!(
            c.redis_misses.abs_diff(c.origin_reads) <= c.redis_misses / 20 + 5,
            "{}: every miss reads the origin: {c:?}",
            p.name
        );
    }
}
