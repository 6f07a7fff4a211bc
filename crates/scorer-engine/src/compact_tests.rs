//! A compact decision ([`Output::Pick`]) is the explained one
//! ([`Engine::score`], [`Output::Explained`]) without its explanation: two engines fed the same
//! telemetry, overrides, outcomes and random draws make the same picks with
//! the same propensities and leave every candidate's final score, bit for
//! bit, through warm-up, stale and dead workers, drains, weights, rule
//! actions and the model.

use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::Feedback;
use crate::api::ScoreRequest;
use crate::config::Config;
use crate::overrides::{OverrideKind, OverrideRequest};
use crate::{DecideCall, Decided, Engine, NoObserver, Output};
use scorer_core::clock::SystemClock;
use scorer_core::scoring::{RequestContext, RequestType};
use scorer_core::telemetry::Snapshot;
use scorer_model::ModelHub;
use scorer_model::fixture::{random_model, write_model_dir};

const WALL: u64 = 1_750_000_000_000;
const WORKERS: usize = 12;

fn config(model_dir: Option<&std::path::Path>) -> Config {
    let mut cfg = Config::default();
    cfg.scoring.warmup_ms = 3_000;
    cfg.model.budget_us = 1_000_000;
    if let Some(dir) = model_dir {
        cfg.model.dir = dir.to_path_buf();
    }
    cfg
}

fn engine(model_dir: Option<&std::path::Path>) -> Engine {
    let cfg = config(model_dir);
    let e = Engine::new(cfg.clone());
    match model_dir {
        Some(_) => e.with_models(Arc::new(ModelHub::load(
            &cfg.model,
            Arc::new(SystemClock::new()),
        ))),
        None => e,
    }
}

/// Worker `w`'s report at monotonic `at_ms`, its signals moving with `round`.
fn snapshot(w: usize, round: u64, at_ms: u64) -> Snapshot {
    let mut s = Snapshot::new(format!("w{w}"), WALL + at_ms);
    let x = (w as u64 * 7 + round * 3) % 11;
    s.cpu_usage = x as f64 / 10.5;
    s.rtt_ms_avg = 1.0 + (w % 4) as f64;
    s.rtt_ms_p99 = 4.0 + x as f64 * 9.0;
    s.queue_depth = (x * 5) as u32;
    s.error_rate = if x > 8 { 0.05 } else { 0.0 };
    s.disk_io_await_ms = Some(((w * 13 + round as usize) % 9) as f64 * 8.0);
    s.compacting = x == 3;
    s
}

fn run(model_dir: Option<&std::path::Path>) {
    let (explained, compact) = (engine(model_dir), engine(model_dir));
    let both = [&explained, &compact];
    let policies = ["p2c", "softmax", "max", "hash", "prequal", "swrr"];
    let mut rng_e = ChaCha8Rng::seed_from_u64(3);
    let mut rng_c = ChaCha8Rng::seed_from_u64(3);
    let mut picks = 0;
    for round in 0..400u64 {
        let now = 1_000 + round * 40;
        if round % 10 == 0 {
            // The last worker goes silent after round 60: stale, then dead.
            let reporting = if round > 60 { WORKERS - 1 } else { WORKERS };
            let batch: Vec<Snapshot> = (0..reporting).map(|w| snapshot(w, round, now)).collect();
            for e in both {
                e.ingest(&batch, now, WALL + now).expect("valid batch");
            }
        }
        if round == 20 {
            for e in both {
                let weight = OverrideRequest {
                    kind: OverrideKind::Weight,
                    weight: Some(0.5),
                    ttl_ms: None,
                    reason: None,
                };
                e.set_override("w2", &weight, "test", now).expect("set");
                let drain = OverrideRequest {
                    kind: OverrideKind::Drain,
                    weight: None,
                    ttl_ms: None,
                    reason: Some("maintenance".into()),
                };
                e.set_override("w5", &drain, "test", now).expect("set");
            }
        }
        let mut candidates: Vec<String> = (0..WORKERS).map(|w| format!("w{w}")).collect();
        candidates.push("ghost".into());
        let key = if round % 3 == 0 {
            format!("order:{}:x", round % 17)
        } else {
            format!("user:{}:profile", round % 23)
        };
        let mut req = ScoreRequest::new(key, candidates);
        req.policy = Some(policies[round as usize % policies.len()].into());
        let context = RequestContext {
            request_type: Some(if round % 4 == 0 {
                RequestType::Put
            } else {
                RequestType::Get
            }),
            timeout_ms: Some(20 + round % 60),
            ..RequestContext::default()
        };
        let id = format!("d-{round}");
        let full = explained.score(&req, &context, now, id.clone(), &mut rng_e);
        let short = DecideCall::new(&req, &context, now)
            .map(|call| call.output(Output::Pick).with_id(id.clone()))
            .and_then(|call| compact.decide(call, &mut rng_c, &mut NoObserver))
            .map(|d| match d {
                Decided::Pick(p) => p,
                other => panic!("a pick answer, got {other:?}"),
            });
        let (full, short) = match (full, short) {
            (Ok(f), Ok(s)) => (f, s),
            (Err(a), Err(b)) => {
                assert_eq!(a, b, "round {round}");
                continue;
            }
            other => panic!("round {round}: {other:?}"),
        };
        assert_eq!(full.pick.as_deref(), short.pick, "round {round}");
        assert_eq!(full.probability, short.probability, "round {round}");
        assert_eq!((full.policy, full.panic), (short.policy, short.panic));
        assert_eq!(full.model.used, short.model_used, "round {round}");
        let picked = full
            .scores
            .iter()
            .find(|s| Some(&s.worker_id) == full.pick.as_ref());
        assert_eq!(picked.map(|s| s.final_score), short.final_score);
        for s in &full.scores {
            let slot = compact.registry().get(&s.worker_id);
            let last = slot.as_ref().and_then(|slot| slot.last_final_score());
            assert_eq!(
                last.map(f64::to_bits),
                slot.map(|_| s.final_score.to_bits()),
                "round {round}, {}",
                s.worker_id
            );
        }
        if let Some(worker) = full.pick {
            picks += 1;
            let f = Feedback {
                decision_id: id,
                worker_id: worker,
                latency_ms: 1.0 + (round % 7) as f64 * 3.0,
                success: round % 13 != 0,
                cache_hit: None,
            };
            for e in both {
                e.feedback(&f, now + 5).expect("valid feedback");
            }
        }
    }
    assert!(picks > 300, "{picks} picks");
    assert_eq!(explained.counters(), compact.counters());
}

#[test]
fn a_compact_pick_is_the_explained_answer_without_its_explanation() {
    run(None);
}

#[test]
fn with_the_model_too() {
    let dir = std::env::temp_dir().join(format!("compact-pick-model-{}", std::process::id()));
    write_model_dir(&dir, &random_model(30, 5, 42), "compact", 20, 1).expect("fixture");
    let hub = ModelHub::load(&config(Some(&dir)).model, Arc::new(SystemClock::new()));
    assert!(
        matches!(hub.current().primary, scorer_model::Slot::Ready(_)),
        "the fixture model loads"
    );
    run(Some(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}
