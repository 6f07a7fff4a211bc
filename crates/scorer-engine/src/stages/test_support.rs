//! Builders for the stages' unit tests: an engine fed with snapshots, a
//! request, and a decision run up to a stage.

use crate::Engine;
use crate::api::ScoreRequest;
use crate::config::Config;
use crate::decision::Decision;
use crate::decision::ScoreMode;
use scorer_core::key::SecondSegmentSharding;
use scorer_core::scoring::RequestContext;
use scorer_core::telemetry::Snapshot;

/// Unix ms at monotonic 0.
pub(crate) const WALL: u64 = 1_750_000_000_000;

/// An engine over the default config without the warm-up ramp.
pub(crate) fn engine() -> Engine {
    let mut cfg = Config::default();
    cfg.scoring.warmup_ms = 0;
    Engine::new(cfg)
}

/// `id` reports `cpu` and `queue` at monotonic `at_ms`.
pub(crate) fn report(engine: &Engine, id: &str, cpu: f64, queue: u32, at_ms: u64) {
    let mut s = Snapshot::new(id.to_owned(), WALL + at_ms);
    s.cpu_usage = cpu;
    s.queue_depth = queue;
    s.rtt_ms_avg = 1.0;
    s.rtt_ms_p99 = 2.0;
    engine
        .ingest(&[s], at_ms, WALL + at_ms)
        .expect("valid snapshot");
}

/// A request for `ids` with the `max` policy.
pub(crate) fn request(ids: &[&str]) -> ScoreRequest {
    let mut req = ScoreRequest::new(
        "user:1:profile",
        ids.iter().map(|&s| s.to_owned()).collect(),
    );
    req.policy = Some("max".into());
    req
}

/// A checked decision on `req` at `now_ms`.
pub(crate) fn decision<'r>(req: &'r ScoreRequest, engine: &Engine, now_ms: u64) -> Decision<'r> {
    let ctx: &'static RequestContext = Box::leak(Box::default());
    Decision::new(
        ScoreMode::Decide,
        req,
        ctx,
        now_ms,
        "d-1".into(),
        &engine.config(),
        &SecondSegmentSharding,
        engine.routers_sharing(),
        engine.override_table(),
    )
    .expect("a valid request")
}

/// [`decision`] run through the rules, freshness and dynamics stages.
pub(crate) fn through_dynamics<'r>(
    req: &'r ScoreRequest,
    engine: &Engine,
    now_ms: u64,
) -> Decision<'r> {
    let cfg = engine.config();
    let mut d = decision(req, engine, now_ms);
    super::rules(&mut d, engine.registry(), &cfg);
    super::freshness(&mut d, &cfg);
    super::dynamics(&mut d, &cfg).expect("an eligible candidate");
    d
}
