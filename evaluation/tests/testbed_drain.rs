//! One short run of the real testbed's `drain` scenario: six redis-server
//! workers, the agent and the service over HTTP; 3 s into the load the
//! operator drains worker 0 for 3 s (a drain override with a 3 s TTL on
//! the service, with the admin token; the endpoint out of the baseline's
//! set). The drained worker must fall below 1% of the picks within one
//! report interval (1 s) on both arms, and get picks again afterwards (the
//! service's TTL expired by itself). Every process is stopped by pid.

use evaluation::testbed::{TestbedArgs, run};

#[test]
fn a_drain_over_the_admin_api_takes_the_worker_out_within_a_report_interval() {
    let out = std::env::temp_dir().join(format!("eval-testbed-drain-{}", std::process::id()));
    let mut args = TestbedArgs::defaults("drain", &out);
    args.policies = Some(vec!["p2c-least-request".to_owned(), "rules-max".to_owned()]);
    args.duration_s = 9.0;
    args.fault_at_s = 3.0;
    args.fault_ms = 3000;
    args.rate = 300.0;
    let r = run(&args).expect("testbed runs (redis-server installed by scripts/test.sh)");
    let _ = std::fs::remove_dir_all(&out);
    for p in &r.policies {
        assert_eq!(p.status, "ok", "{}: {:?}", p.name, p.skip_reason);
        assert!(
            p.time_to_drain_ms.is_some_and(|t| t <= 1_000.0),
            "{}: drain {:?} ms",
            p.name,
            p.time_to_drain_ms
        );
        assert!(
            p.recovery_ms.is_some(),
            "{}: worker 0 gets picks again after the drain",
            p.name
        );
    }
}
