//! Run one scenario over a list of policies (simulator) and collect the
//! results; with a log directory the service arms write the service's
//! decision log (Parquet, the trainer's input).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use scorer_core::clock::SystemClock;
use scorer_engine::config::Config;
use scorer_log::{DecisionLog, LogConfig};
use serde::Serialize;

use crate::arms::registry::{self, POLICIES};
use crate::arms::{Arm, Model, model};
use crate::run_summary::PolicyResult;
use crate::scenario::Scenario;
use crate::sim::{RunRecord, simulate};

/// Options of `evaluate sim`.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// Scenario preset name (ignored when `custom` is set).
    pub scenario: String,
    /// A scenario read from a file (`--scenario-file`), run instead of the
    /// preset; `workers` and `duration_s` are then the file's.
    pub custom: Option<Scenario>,
    /// Policies to compare, by name.
    pub policies: Vec<String>,
    /// Seed.
    pub seed: u64,
    /// Workers.
    pub workers: usize,
    /// Simulated duration, s.
    pub duration_s: f64,
    /// Where the service arms write decision logs (one subdirectory per
    /// scenario and policy), if anywhere.
    pub log_dir: Option<PathBuf>,
    /// Configuration of the service arms: the shipped defaults unless a
    /// diagnostic run loads another (`--service-config`).
    pub service_config: Config,
    /// Model of the `model` arm (default: the shipped `models/default`).
    pub model_dir: PathBuf,
    /// Where `model-retrained` shares one model per scenario across runs
    /// (`evaluate all`); `None`: each run trains on its own seed + the
    /// offset.
    pub retrain_cache: Option<Arc<crate::retrain_cache::RetrainCache>>,
}

impl SimOptions {
    /// Defaults for `scenario`: every policy, seed 1, 12 workers, 120 s.
    pub fn new(scenario: &str) -> Self {
        Self {
            scenario: scenario.to_owned(),
            custom: None,
            policies: POLICIES.iter().map(|s| (*s).to_owned()).collect(),
            seed: 1,
            workers: crate::scenario::DEFAULT_WORKERS,
            duration_s: crate::scenario::DEFAULT_DURATION_S,
            log_dir: None,
            service_config: Config::default(),
            model_dir: model::default_model_dir(),
            retrain_cache: None,
        }
    }
}

/// A scenario's results: what results.json holds.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResults {
    /// `sim` or `testbed`.
    pub mode: String,
    /// Scenario name.
    pub scenario: String,
    /// What it models.
    pub description: String,
    /// Seed (the first of [`Self::seeds`] when there are several).
    pub seed: u64,
    /// The seeds each row is the median of ([`crate::seeds`]); empty for a
    /// run on one seed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub seeds: Vec<u64>,
    /// Workers.
    pub workers: usize,
    /// Run length, s.
    pub duration_s: f64,
    /// Offered load, fraction of healthy capacity.
    pub load: f64,
    /// Independent routers sending to the workers.
    pub routers: usize,
    /// Index of the impaired worker, if the scenario has one.
    pub impaired_worker: Option<usize>,
    /// The full scenario parameters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Scenario>,
    /// Whether the service arms ran with the shipped default configuration
    /// (`false` only for diagnostic runs with `--service-config`).
    pub service_config_default: bool,
    /// One entry per requested policy, in request order.
    pub policies: Vec<PolicyResult>,
    /// Per policy (same order, skipped ones excluded): per-window shares
    /// for the plots; not serialised.
    #[serde(skip)]
    pub runs: Vec<(String, RunRecord)>,
}

/// Run `opts`.
///
/// # Errors
/// Unknown scenario or policy names, or a decision log that cannot start.
pub fn run_sim(opts: &SimOptions) -> Result<ScenarioResults, String> {
    let sc = match &opts.custom {
        Some(sc) => {
            crate::scenario_file::validate(sc)?;
            sc.clone()
        }
        None => Scenario::preset(&opts.scenario, opts.workers, opts.duration_s)?,
    };
    registry::check_names(&opts.policies)?;
    let fault = sc
        .faults
        .iter()
        .find_map(|f| f.window_ms().map(|(a, b)| (f.worker(), a, b)));
    let mut out = ScenarioResults {
        mode: "sim".to_owned(),
        scenario: sc.name.clone(),
        description: sc.description.clone(),
        seed: opts.seed,
        seeds: Vec::new(),
        workers: sc.workers.len(),
        duration_s: sc.duration_ms / 1000.0,
        load: sc.load,
        routers: sc.routers,
        impaired_worker: sc.faults.first().map(crate::scenario::Fault::worker),
        parameters: Some(sc.clone()),
        service_config_default: opts.service_config == Config::default(),
        policies: Vec::new(),
        runs: Vec::new(),
    };
    for name in &opts.policies {
        let spec = registry::spec(name).ok_or_else(|| format!("unknown policy `{name}`"))?;
        // The arms with a model: a hub with the default or a freshly
        // trained model.
        let (hub, retrained) = match spec.model {
            Model::Shipped => {
                match model::load_hub(&opts.model_dir, model::SIM_BUDGET_US, &opts.service_config) {
                    Ok(h) => (Some(h), None),
                    Err(e) => {
                        out.policies
                            .push(PolicyResult::skipped(name, &format!("skipped: {e}")));
                        continue;
                    }
                }
            }
            Model::Retrained => {
                let r = shared_retrain(opts, &sc).and_then(|r| {
                    let h =
                        model::load_hub(&r.model_dir, model::SIM_BUDGET_US, &opts.service_config)?;
                    Ok((h, r))
                });
                match r {
                    Ok((h, r)) => (Some(h), Some(r)),
                    Err(e) => {
                        out.policies
                            .push(PolicyResult::skipped(name, &format!("skipped: {e}")));
                        continue;
                    }
                }
            }
            Model::None | Model::Learning | Model::LearningShuffled => (None, None),
        };
        let log = match &opts.log_dir {
            Some(dir) if spec.is_service_arm() => Some(start_log(
                &dir.join(&sc.name).join(name),
                &opts.service_config.log,
            )?),
            _ => None,
        };
        let Some(mut arm) = registry::build(
            name,
            sc.workers.len(),
            sc.routers,
            log.clone(),
            &opts.service_config,
            hub.clone(),
        ) else {
            out.policies
                .push(PolicyResult::skipped(name, "not runnable"));
            continue;
        };
        if log.is_some() {
            let prefix = format!("{}-s{}-{name}-d", sc.name, opts.seed);
            match &mut arm {
                Arm::Remote(r) => r.set_decision_id_prefix(&prefix),
                Arm::Embedded(e) => e.set_decision_id_prefix(&format!("{prefix}-")),
                _ => {}
            }
        }
        let rec = simulate(&sc, &mut arm, opts.seed);
        if let Arm::Embedded(e) = &arm {
            e.flush_log();
        }
        let (spread, self_check, learning) = match &arm {
            Arm::Remote(r) => (r.model_spread(), r.self_check_samples(), r.learning()),
            _ => (None, None, None),
        };
        drop(arm);
        if let Some(log) = log {
            log.shutdown().map_err(|e| format!("decision log: {e}"))?;
        }
        let mut result = PolicyResult::from_record(name, &rec, fault);
        result.learning = learning;
        result.self_check = self_check.map(|s| {
            crate::self_check_series::SelfCheckSeries::new(s, fault.map(|f| f.1 / 1_000.0))
        });
        if let Some(hub) = &hub {
            let info = retrained.as_ref().map(|r| r.info.clone());
            let selection = registry::selection_policy(name, &opts.service_config);
            result.model = Some(model::ModelArmInfo::from_hub(hub, &selection, spread, info));
        }
        out.policies.push(result);
        out.runs.push((name.clone(), rec));
    }
    Ok(out)
}

/// `model-retrained`'s model: trained for this run, or shared through
/// [`SimOptions::retrain_cache`].
fn shared_retrain(opts: &SimOptions, sc: &Scenario) -> Result<Arc<model::Retrained>, String> {
    match &opts.retrain_cache {
        Some(cache) => cache.get_or_train(&sc.name, || retrain(opts, sc, cache.logging_seed)),
        None => retrain(opts, sc, opts.seed.wrapping_add(model::RETRAIN_SEED_OFFSET)).map(Arc::new),
    }
}

/// `model-retrained`'s model: the scenario's [`model::RETRAIN_LOGGING_ARM`]
/// run on the held-out `seed` with a decision log, then the trainer library
/// on those logs (see [`model`]).
fn retrain(opts: &SimOptions, sc: &Scenario, seed: u64) -> Result<model::Retrained, String> {
    let (work, keep) = model::retrain_dir(opts.log_dir.as_deref(), &sc.name);
    // A kept directory from an earlier run must not mix old logs in.
    let _ = std::fs::remove_dir_all(&work);
    let logs = work.join("logs");
    let run = || -> Result<(), String> {
        let log = start_log(&logs, &opts.service_config.log)?;
        let mut arm = registry::build(
            model::RETRAIN_LOGGING_ARM,
            sc.workers.len(),
            sc.routers,
            Some(log.clone()),
            &opts.service_config,
            None,
        )
        .ok_or("no logging arm")?;
        simulate(sc, &mut arm, seed);
        drop(arm);
        log.shutdown().map_err(|e| format!("decision log: {e}"))
    };
    if let Err(e) = run() {
        if !keep {
            let _ = std::fs::remove_dir_all(&work);
        }
        return Err(e);
    }
    model::train_on_logs(&logs, &work, keep, seed)
}

/// A decision log under `root` (`decisions/`, `outcomes/`), sampled as the
/// service arms' configuration says (`service`'s `[log]` rates).
pub(crate) fn start_log(root: &Path, service: &LogConfig) -> Result<Arc<DecisionLog>, String> {
    let cfg = LogConfig {
        dir: root.join("decisions"),
        outcomes_dir: Some(root.join("outcomes")),
        // The simulator produces decisions far faster than real time: a
        // deep channel keeps the writer from dropping them.
        channel_capacity: 1 << 20,
        sample_rate: service.sample_rate,
        candidate_features_rate: service.candidate_features_rate,
        ..LogConfig::default()
    };
    DecisionLog::start(cfg, Arc::new(SystemClock::new()))
        .map(Arc::new)
        .map_err(|e| format!("decision log in {}: {e}", root.display()))
}
