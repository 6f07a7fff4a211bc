//! The log's queue gives the routers' records a budget of their own: a
//! router flood never takes a slot of the service's own records, and drops
//! are counted per source.

use super::*;

#[test]
fn a_router_flood_takes_only_the_routers_budget() {
    let tmp = TempDir::new("fair-queue");
    let c = clock();
    let config = LogConfig {
        channel_capacity: 8,
        router_queue_share: 0.5,
        ..cfg(tmp.path())
    };
    let log = start(config, &c);
    assert_eq!((log.room(), log.router_room()), (8, 4));
    let hold = log.hold_writer();
    // Twice the whole queue (8 + 4) of router records, interleaved with
    // the service's own 8.
    let (mut service, mut router) = (0, 0);
    for i in 0..24 {
        let rec = decision(100 + i, 2);
        router += usize::from(log.log_decision_from(Source::Router, rec));
        if i % 3 == 0 {
            service += usize::from(log.log_decision(decision(i / 3, 2)));
        }
    }
    assert_eq!((service, router), (8, 4));
    assert_eq!((log.room(), log.router_room()), (0, 0));
    let st = log.stats();
    assert_eq!(
        (st.dropped_service, st.dropped_router, st.dropped),
        (0, 20, 20)
    );
    // A full service budget drops the service's record, counted as such.
    assert!(!log.log_outcome(outcome(0, 0, 1.0)));
    assert_eq!(log.stats().dropped_service, 1);
    drop(hold);
    wait_until("drained", || log.room() == 8 && log.router_room() == 4);
    log.shutdown().unwrap();
    let d = read_dir(&tmp.path().join("decisions"), LogKind::Decisions).unwrap();
    assert_eq!(d.rows, (8 + 4) * 2);
}

#[test]
fn a_zero_share_refuses_every_router_record() {
    let tmp = TempDir::new("fair-queue-zero");
    let c = clock();
    let config = LogConfig {
        router_queue_share: 0.0,
        ..cfg(tmp.path())
    };
    let log = start(config, &c);
    assert_eq!(log.router_room(), 0);
    assert!(!log.log_outcome_from(Source::Router, outcome(1, 0, 1.0)));
    assert!(log.log_outcome(outcome(1, 0, 1.0)));
    let st = log.stats();
    assert_eq!((st.dropped_router, st.dropped_service), (1, 0));
    log.shutdown().unwrap();
}
