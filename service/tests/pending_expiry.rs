//! A pick without feedback stops counting as outstanding at its own expiry,
//! whatever picks with longer timeouts were made before it. Time is passed
//! in; randomness is seeded.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use scorer_core::scoring::RequestContext;
use scorer_core::telemetry::Snapshot;
use scorer_engine::Engine;
use scorer_engine::api::ScoreRequest;
use scorer_engine::config::Config;

const WALL: u64 = 1_750_000_000_000;

fn engine() -> Engine {
    let mut c = Config::default();
    c.scoring.warmup_ms = 0;
    let e = Engine::new(c);
    report(&e, 0);
    e
}

/// Both workers report at monotonic `now_ms`.
fn report(e: &Engine, now_ms: u64) {
    let snaps: Vec<Snapshot> = ["slowA", "fastB"]
        .iter()
        .map(|id| {
            let mut s = Snapshot::new(*id, WALL + now_ms);
            (s.cpu_usage, s.rtt_ms_avg, s.rtt_ms_p99) = (0.3, 1.0, 4.0);
            s
        })
        .collect();
    e.ingest(&snaps, now_ms, WALL + now_ms)
        .expect("valid telemetry");
}

/// Scores `worker` alone at `now_ms` with the client's `timeout_ms`; the
/// pick is remembered and no feedback follows. Returns the worker's
/// outstanding picks before this one.
fn pick(e: &Engine, worker: &str, timeout_ms: u64, now_ms: u64, n: &mut u64) -> u32 {
    *n += 1;
    let req = ScoreRequest::new("user:1:x", vec![worker.to_owned()]);
    let context = RequestContext {
        timeout_ms: Some(timeout_ms),
        ..RequestContext::default()
    };
    let mut rng = ChaCha8Rng::seed_from_u64(*n);
    let r = e
        .score(&req, &context, now_ms, format!("d{n}"), &mut rng)
        .expect("scored");
    r.scores[0].outstanding.expect("known worker")
}

#[test]
fn short_picks_expire_on_time_behind_long_ones() {
    let e = engine();
    let mut n = 0;
    // 64 long picks first (30 s timeout: expiry 60 s), spread over the shards.
    for _ in 0..64 {
        pick(&e, "slowA", 30_000, 1, &mut n);
    }
    // Then 100 short ones (20 ms timeout: expiry 40 ms).
    for _ in 0..100 {
        pick(&e, "fastB", 20, 2, &mut n);
    }
    assert_eq!(pick(&e, "fastB", 20, 3, &mut n), 100);
    // The once-a-second sweep, well past the short expiry: every short
    // pick has stopped counting, every long one still counts.
    report(&e, 1_500);
    e.forget_silent(1_500);
    assert_eq!(pick(&e, "fastB", 20, 1_500, &mut n), 0);
    assert_eq!(pick(&e, "slowA", 30_000, 1_500, &mut n), 64);
    // At their own expiry (60 s, `evidence.max_expiry_ms`) the long ones
    // stop too; the probe made at 1.5 s still counts until 61.5 s.
    report(&e, 60_001);
    e.forget_silent(60_001);
    assert_eq!(pick(&e, "slowA", 30_000, 60_001, &mut n), 1);
}
