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

#[test]
fn a_nil_get_is_a_miss_filled_from_the_origin_then_a_hit() {
    use evaluation::router::Op;
    use evaluation::testbed::cache_aside::CacheAside;
    use evaluation::testbed::conns::Conns;
    use evaluation::testbed::procs::{RedisProc, Scratch};
    use evaluation::testbed::request::{Backend, Ended, Reply, Work};

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let dir = Scratch::new("cache-hit");
        let mut worker = RedisProc::start(&dir.0.join("worker"))
            .await
            .expect("worker");
        let mut origin = RedisProc::start(&dir.0.join("origin"))
            .await
            .expect("origin");
        let cache = CacheAside::connect(origin.port, 1, std::time::Duration::ZERO, 16)
            .await
            .expect("origin");
        let conns = Conns::new(vec![worker.port], None).with_cache(cache);
        let work = |op| Work {
            op,
            key: "user:7:profile".to_owned(),
            cost: 1.0,
        };
        let reply = |cache_hit| Reply {
            ended: Ended::Ok,
            cache_hit,
        };
        assert_eq!(conns.send(0, &work(Op::Get)).await, reply(Some(false)));
        assert_eq!(conns.send(0, &work(Op::Get)).await, reply(Some(true)));
        assert_eq!(conns.send(0, &work(Op::Put)).await, reply(None));
        let counts = conns.cache_counts().expect("cache-aside");
        assert_eq!((counts.hits, counts.misses), (vec![1], vec![1]));
        assert_eq!(counts.origin_reads, 1);
        worker.stop();
        origin.stop();
    });
}
