//! One short run of the real testbed's `many-routers` scenario (≤ 60 s):
//! four load generators at once against six redis-server workers, each
//! embedding its own balancer that follows the service's view stream, then
//! four independent `least-request-all` routers. Checks that every router's
//! requests are counted, that herding is measured over the routers, and
//! that every balancer's model decisions reach the arm's figures. Waits on
//! real processes only with bounded polling; every process is stopped by pid.

use evaluation::testbed::{TestbedArgs, many_routers, run};

#[test]
fn four_routers_each_with_its_own_balancer_run_against_real_workers() {
    let started = std::time::Instant::now();
    let out = std::env::temp_dir().join(format!("eval-testbed-routers-{}", std::process::id()));
    let mut args = TestbedArgs::defaults(many_routers::NAME, &out);
    args.policies = Some(vec![
        "service-embedded".to_owned(),
        "least-request-all".to_owned(),
    ]);
    args.duration_s = 4.0;
    args.fault_at_s = 1.0;
    args.fault_ms = 1000;
    let r = run(&args).expect("testbed runs (redis-server installed by scripts/test.sh)");
    assert_eq!(r.routers, 4);
    let offered = many_routers::rate(args.workers) * args.duration_s;
    for name in ["service-embedded", "least-request-all"] {
        let p = r
            .policies
            .iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("{name} missing"));
        let requests = p.requests.expect("requests") as f64;
        eprintln!(
            "{name}: {requests} requests, p99 {:?} ms, errors {:?}, herding {:?}",
            p.p99_ms, p.error_rate, p.herding
        );
        // Poisson: the four streams together offer about rate × duration.
        assert!(
            (0.7 * offered..1.3 * offered).contains(&requests),
            "{name}: {requests} requests for {offered} offered"
        );
        let herding = p.herding.expect("herding with several routers");
        assert!((1.0..=4.0).contains(&herding), "{name}: herding {herding}");
    }
    let embedded = r
        .policies
        .iter()
        .find(|p| p.name == "service-embedded")
        .and_then(|p| p.model.as_ref())
        .expect("the embedded arm's model figures");
    assert!(embedded.decisions > 0, "{embedded:?}");
    assert!(
        started.elapsed().as_secs() <= 60,
        "took {:?}",
        started.elapsed()
    );
}
