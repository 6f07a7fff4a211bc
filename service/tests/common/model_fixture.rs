//! Model directories for the model tests: two small random models in a
//! temp dir, a configuration that points at one, and an app serving it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use scorer_core::clock::{ManualClock, SystemClock};
use scorer_engine::Engine;
use scorer_engine::config::Config;
use scorer_model::ModelHub;
use scorer_model::export::LgbModel;
use scorer_model::fixture::{random_model, write_model_dir};
use serde_json::{Value, json};
use service::AppState;

use super::{TestApp, WALL};

pub struct Fixture {
    pub dir: PathBuf,
    pub models: Vec<(String, LgbModel)>,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Two small models, `v1` and `v2`, in a fresh temp dir.
pub fn fixture(name: &str) -> Fixture {
    let dir = std::env::temp_dir().join(format!("scorer-model-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut models = Vec::new();
    for (i, v) in ["v1", "v2"].iter().enumerate() {
        let m = random_model(20, 4, 7 + i as u64);
        write_model_dir(&dir.join(v), &m, v, 30, 100 + i as u64).expect("fixture");
        models.push(((*v).to_owned(), m));
    }
    Fixture { dir, models }
}

/// Tests run unoptimised builds on a shared machine: a budget no debug
/// inference misses, except where a test sets its own.
pub const TEST_BUDGET_US: u64 = 1_000_000;

pub fn config(model_dir: &Path) -> Config {
    let mut c = super::no_warmup();
    c.model.dir = model_dir.to_path_buf();
    c.model.budget_us = TEST_BUDGET_US;
    c
}

pub fn app_with(cfg: Config) -> TestApp {
    let clock = Arc::new(ManualClock::new(1_000, WALL));
    let hub = Arc::new(ModelHub::load(&cfg.model, Arc::new(SystemClock::new())));
    let state = AppState::new(Engine::new(cfg).with_models(hub), clock.clone());
    TestApp {
        router: service::app(state.clone()),
        clock,
        state,
    }
}

pub fn snap(id: &str, disk_ms: f64) -> Value {
    json!({"worker_id": id, "timestamp_ms": WALL, "cpu_usage": 0.3, "queue_depth": 0,
           "rtt_ms_avg": 1.0, "rtt_ms_p99": 4.0, "error_rate": 0.0, "disk_io_await_ms": disk_ms})
}

pub async fn report(app: &TestApp, workers: &[(&str, f64)]) {
    let snaps: Vec<Value> = workers.iter().map(|(id, d)| snap(id, *d)).collect();
    let (s, b) = app
        .post_json("/v1/telemetry", &json!({"snapshots": snaps}))
        .await;
    assert_eq!(s, 200, "{b}");
}

/// The reason code and message of the primary slot a hub refuses for `dir`.
pub fn refusal(dir: &Path) -> (String, String) {
    let cfg = config(dir);
    let hub = ModelHub::load(&cfg.model, Arc::new(SystemClock::new()));
    match &hub.current().primary {
        scorer_model::Slot::Refused {
            reason, message, ..
        } => (reason.as_str().to_owned(), message.clone()),
        scorer_model::Slot::Ready(_) => panic!("model in {} was accepted", dir.display()),
    }
}
