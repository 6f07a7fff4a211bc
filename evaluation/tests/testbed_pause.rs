//! One short run of the real testbed (≤ 60 s): six redis-server workers,
//! the agent and the service over HTTP; a 3 s `CLIENT PAUSE` on one worker.
//! The service policy must beat round robin on p99, and the `model` arm
//! (the shipped model in the scoring path, real budget) must run end to end.
//! Waits on real processes only with bounded polling; every process is
//! stopped by pid.

use evaluation::testbed::{TestbedArgs, run};

#[test]
fn service_beats_round_robin_on_p99_under_a_client_pause() {
    let started = std::time::Instant::now();
    let out = std::env::temp_dir().join(format!("eval-testbed-{}", std::process::id()));
    let mut args = TestbedArgs::defaults("pause", &out);
    args.policies = Some(vec![
        "round-robin".to_owned(),
        "rules-max".to_owned(),
        "model".to_owned(),
    ]);
    args.duration_s = 9.0;
    args.fault_at_s = 3.0;
    args.fault_ms = 3000;
    args.rate = 300.0;
    let r = run(&args).expect("testbed runs (redis-server installed by scripts/test.sh)");
    let p99 = |name: &str| {
        r.policies
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.p99_ms)
            .expect("p99")
    };
    let (rr, svc) = (p99("round-robin"), p99("rules-max"));
    eprintln!(
        "p99 round-robin {rr} ms, rules-max {svc} ms, {:?}",
        started.elapsed()
    );
    assert!(
        svc < rr,
        "rules-max p99 {svc} ms is not below round-robin's {rr} ms"
    );
    // Every decision of the model arm asked the model; each either used it
    // or fell back for a counted reason (a debug build misses the 100 µs
    // budget often; a release build rarely).
    let model = r
        .policies
        .iter()
        .find(|p| p.name == "model")
        .expect("model arm");
    let info = model.model.as_ref().expect("model info");
    assert!(info.version.starts_with("default-"), "{}", info.version);
    assert!(info.decisions > 0);
    let fell_back: u64 = info.fallbacks.iter().map(|(_, n)| n).sum();
    assert_eq!(info.used + fell_back, info.decisions, "{info:?}");
    assert!(
        p99("model") < rr,
        "model p99 {} ms is not below round-robin's {rr} ms",
        p99("model")
    );
    assert!(
        started.elapsed().as_secs() <= 60,
        "took {:?}",
        started.elapsed()
    );
}
