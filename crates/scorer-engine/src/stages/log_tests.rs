//! The log stage's record is the one the decision's explained answer
//! used to be turned into, field for field, whether the decision was
//! explained or compact.

use std::sync::{Arc, Mutex};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::api::ScoreResponse;
use crate::config::Config;
use crate::{DecideCall, Decided, Engine, NoObserver, Output};
use scorer_core::clock::SystemClock;
use scorer_core::key::{KeyFingerprint, SecondSegmentSharding};
use scorer_core::scoring::{RequestContext, RequestType};
use scorer_core::telemetry::Snapshot;
use scorer_log::{CandidateRow, DecisionRecord, DecisionSink, OutcomeRecord};
use scorer_model::ModelHub;
use scorer_model::fixture::{random_model, write_model_dir};

const WALL: u64 = 1_750_000_000_000;

/// Keeps every decision record.
#[derive(Debug, Default)]
struct Kept(Mutex<Vec<DecisionRecord>>);

impl DecisionSink for Kept {
    fn sampled(&self, _: &str) -> bool {
        true
    }
    fn log_decision(&self, rec: DecisionRecord) -> bool {
        self.0.lock().expect("not poisoned").push(rec);
        true
    }
    fn log_outcome(&self, _: OutcomeRecord) -> bool {
        true
    }
}

impl Kept {
    fn take(&self) -> Vec<DecisionRecord> {
        std::mem::take(&mut *self.0.lock().expect("not poisoned"))
    }
}

/// The record the engine built from a decision's explained answer before
/// the log stage: the key parsed a second time, the rows from the answer.
fn from_answer(
    req: &crate::api::ScoreRequest,
    context: &RequestContext,
    resp: &ScoreResponse,
    now_wall_ms: u64,
) -> DecisionRecord {
    let key = KeyFingerprint::parse(&req.key, &SecondSegmentSharding);
    DecisionRecord {
        decision_id: resp.decision_id.clone(),
        ts_ms: i64::try_from(now_wall_ms).unwrap_or(i64::MAX),
        key_prefix: key.prefix.to_owned(),
        shard_id: key.shard_id,
        request_type: context.request_type.map(|t| t.as_str()),
        client_region: context.client_region.clone(),
        timeout_ms: context.timeout_ms,
        batch_size: context.batch_size,
        policy: resp.policy,
        panic: resp.panic,
        model_version: resp.model.version.clone(),
        arm: resp.model.arm.or(resp.config_arm).map(str::to_owned),
        config_hash: resp.config_hash.to_string(),
        caller: None,
        candidates: resp
            .scores
            .iter()
            .map(|s| CandidateRow {
                worker_id: s.worker_id.clone(),
                eligible: s.eligible,
                rule_score: s.rule_score,
                model_action: s.model_action,
                final_score: s.final_score,
                probability: s.probability,
                picked: resp.pick.as_deref() == Some(s.worker_id.as_str()),
                penalty_state: s.penalty_state,
                fallback_reason: resp.model.fallback_reason,
                features: s.observation,
                operator_override: s
                    .operator_override
                    .map(crate::overrides::OverrideKind::as_str),
            })
            .collect(),
    }
}

fn engine(model_dir: Option<&std::path::Path>, sink: Arc<Kept>) -> Engine {
    let mut cfg = Config::default();
    cfg.scoring.warmup_ms = 3_000;
    cfg.model.budget_us = 1_000_000;
    if let Some(dir) = model_dir {
        cfg.model.dir = dir.to_path_buf();
    }
    let models = ModelHub::load(&cfg.model, Arc::new(SystemClock::new()));
    Engine::new(cfg)
        .with_models(Arc::new(models))
        .with_log(sink)
}

fn run(model_dir: Option<&std::path::Path>) {
    let (kept_e, kept_c) = (Arc::new(Kept::default()), Arc::new(Kept::default()));
    let explained = engine(model_dir, kept_e.clone());
    let compact = engine(model_dir, kept_c.clone());
    let (mut rng_e, mut rng_c) = (ChaCha8Rng::seed_from_u64(5), ChaCha8Rng::seed_from_u64(5));
    let policies = ["p2c", "softmax", "max", "none"];
    let mut compared = 0;
    for round in 0..120u64 {
        let now = 1_000 + round * 50;
        if round % 8 == 0 {
            let batch: Vec<Snapshot> = (0..6)
                .map(|w| {
                    let mut s = Snapshot::new(format!("w{w}"), WALL + now);
                    let x = (w * 5 + round * 3) % 11;
                    s.cpu_usage = x as f64 / 11.0;
                    s.queue_depth = (x * 4) as u32;
                    s.rtt_ms_p99 = 4.0 + x as f64 * 7.0;
                    s
                })
                .collect();
            for e in [&explained, &compact] {
                e.ingest(&batch, now, WALL + now).expect("valid batch");
            }
        }
        let candidates = ["w0", "w1", "w2", "w3", "w4", "w5", "ghost"];
        let key = format!("user:{}:profile", round % 9);
        let mut req = crate::api::ScoreRequest::new(
            key,
            candidates.iter().map(|c| (*c).to_owned()).collect(),
        );
        req.policy = Some(policies[round as usize % policies.len()].into());
        let context = RequestContext {
            request_type: Some(RequestType::Get),
            client_region: Some("eu".into()),
            timeout_ms: Some(40 + round % 30),
            batch_size: Some(1),
        };
        let id = format!("d-{round}");
        let wall = WALL + now;
        let call = |output| {
            DecideCall::new(&req, &context, now)
                .map(|c| c.output(output).with_id(id.clone()).logged_at(wall, None))
        };
        let full = call(Output::Explained)
            .and_then(|c| explained.decide(c, &mut rng_e, &mut NoObserver))
            .map(|d| d.explained().expect("explained"));
        let short =
            call(Output::Scores).and_then(|c| compact.decide(c, &mut rng_c, &mut NoObserver));
        let (Ok(full), Ok(Decided::Scores(_))) = (full, short) else {
            continue;
        };
        let old = from_answer(&req, &context, &full, wall);
        assert_eq!(kept_e.take(), std::slice::from_ref(&old), "round {round}");
        assert_eq!(kept_c.take(), [old], "round {round}, compact");
        compared += 1;
    }
    assert!(compared > 100, "{compared} decisions compared");
}

#[test]
fn the_log_stage_records_what_the_answer_was_turned_into() {
    run(None);
}

#[test]
fn with_the_model_too() {
    let dir = std::env::temp_dir().join(format!("log-stage-model-{}", std::process::id()));
    write_model_dir(&dir, &random_model(30, 5, 42), "log-stage", 20, 1).expect("fixture");
    run(Some(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}
