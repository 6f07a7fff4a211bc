//! `trainer train`: logs → targets ([`crate::target`]) → time split → LightGBM →
//! ONNX → parity (validation split and golden rows, through the service's
//! ONNX path) → `models/NAME/` (`model.onnx`, `model.txt`, `card.json`,
//! `golden.json`). Nothing is written when parity fails.

use std::path::{Path, PathBuf};
use std::time::Instant;

use lightgbm_ext::{Machine, Network};
use scorer_model::card::{CARD_FILE, GOLDEN_FILE, ONNX_FILE, TEXT_FILE};
use scorer_model::{GoldenFile, ModelCard, export_onnx, load_model};
use serde::Serialize;
use serde_json::json;

use crate::card::{build_card, sha256_hex};
use crate::dataset::{Labelled, LogTable, TargetCounts, TargetRule, load_logs};
use crate::error::{Result, TrainerError, io_err};
use crate::golden::build_golden;
use crate::parity::{ParityReport, check, served_probabilities};
use crate::progress::Progress;
use crate::regression_metrics::Metrics;
use crate::sample::SampleSpec;
use crate::spill::{self, Parked};
use crate::stream::{StreamOptions, Streamed, stream_labelled};
use crate::train::{DATASET_PARAMS_NOTE, TrainParams, Trained, predict, train, train_file};
use crate::window::Window;

/// Everything `trainer train` needs.
#[derive(Debug, Clone)]
pub struct TrainOptions {
    /// Log directories (decisions and outcomes files, searched recursively).
    pub logs: Vec<PathBuf>,
    /// Output model directory (`models/NAME/`); created if missing.
    pub out: PathBuf,
    /// LightGBM parameters.
    pub params: TrainParams,
    /// How outcomes become targets and weights.
    pub target: TargetRule,
    /// Share of the (latest) labelled rows used for validation, in (0, 1).
    pub valid_fraction: f64,
    /// What the streaming reader may hold, bytes ([`crate::budget`]).
    pub memory_budget_bytes: u64,
    /// A time-stratified sample of the training decisions ([`crate::sample`]).
    pub sample: Option<SampleSpec>,
    /// Data-parallel training with other processes, each on its own shard.
    pub network: Option<NetworkOptions>,
    /// Where training rows go when they do not fit the budget
    /// ([`crate::spill`]); the system's temporary directory by default.
    pub spill_dir: Option<PathBuf>,
}

/// This process's place in a data-parallel training.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkOptions {
    /// Every machine, as `host:port` (the port its trainer listens on).
    pub machines: Vec<Machine>,
    /// This process's index in `machines`.
    pub rank: usize,
    /// How long to wait for the others to connect, minutes.
    pub timeout_minutes: u32,
}

/// Wall time of each step, seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Timings {
    /// Reading and joining the logs.
    pub load_s: f64,
    /// LightGBM training.
    pub train_s: f64,
    /// Parsing the text model, ONNX export and loading it in tract.
    pub export_s: f64,
    /// Predictions, parity checks, golden rows and metrics.
    pub validate_s: f64,
}

/// What `trainer loop` adds to a training run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TrainExtras {
    /// Train and validate on this window of the logs only.
    pub window: Option<Window>,
    /// Tests only: shuffle the training rows' targets with this seed, so
    /// that the model can learn nothing (the rows must fit in memory).
    #[doc(hidden)]
    pub shuffle_targets_seed: Option<u64>,
}

/// What `trainer train` did.
#[derive(Debug, Clone)]
pub struct TrainSummary {
    /// The card written.
    pub card: ModelCard,
    /// Target counts.
    pub counts: TargetCounts,
    /// Training rows.
    pub train_rows: usize,
    /// Validation rows.
    pub valid_rows: usize,
    /// Validation metrics.
    pub metrics: Metrics,
    /// Parity on the validation split and on the golden rows.
    pub parity: Vec<ParityReport>,
    /// Step timings.
    pub timings: Timings,
    /// Files written.
    pub files: Vec<PathBuf>,
    /// Decisions files read.
    pub decision_files: Vec<PathBuf>,
    /// Earliest and latest decision time of the validation rows, Unix ms.
    pub valid_ts_ms: Option<(i64, i64)>,
}

/// Loads `dirs` with a progress bar over files; prints a `warning:` line on
/// stderr when decisions were dropped ([`crate::dataset::DroppedDecisions`]).
///
/// # Errors
/// As [`load_logs`].
pub fn load_with_progress(dirs: &[PathBuf], progress: Progress) -> Result<LogTable> {
    let pb = progress.bar(0, "loading", "files");
    let table = load_logs(dirs, |path, i, n| {
        let outcomes = path
            .file_name()
            .is_some_and(|f| f.to_string_lossy().starts_with("outcomes"));
        pb.set_message(if outcomes { "outcomes" } else { "decisions" });
        pb.set_length(n as u64);
        pb.set_position(i as u64);
    });
    pb.finish_and_clear();
    let table = table?;
    if table.dropped.total() > 0 {
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "warning: {}", table.dropped);
    }
    Ok(table)
}

/// Probabilities of `features` from LightGBM and from the service's ONNX
/// path, and the parity report of the two.
///
/// # Errors
/// [`TrainerError::Parity`] for the first row off by more than 1e-5;
/// LightGBM or tract failures.
pub fn parity_on(
    set: &str,
    booster: &lightgbm3::Booster,
    plan: &scorer_model::RunnablePlan,
    features: &[f32],
    progress: Progress,
) -> Result<(Vec<f64>, ParityReport)> {
    let n = features.len() / scorer_core::features::FEATURE_COUNT;
    let pb = progress.bar(n as u64, &format!("parity {set}"), "rows");
    let p_lgb = predict(booster, features)?;
    let p_served = served_probabilities(plan, features, |done| pb.set_position(done as u64))?;
    pb.finish_and_clear();
    let report = check(set, features, &p_lgb, &p_served, None)?;
    Ok((p_lgb, report))
}

/// Golden parity: the service's ONNX path against each row's stored
/// LightGBM probability.
///
/// # Errors
/// [`TrainerError::Parity`] naming the row and its kind.
pub fn golden_parity(
    plan: &scorer_model::RunnablePlan,
    golden: &GoldenFile,
) -> Result<ParityReport> {
    let flat: Vec<f32> = golden.rows.iter().flat_map(|r| r.values()).collect();
    let kinds: Vec<String> = golden.rows.iter().map(|r| r.kind.clone()).collect();
    let stored: Vec<f64> = golden.rows.iter().map(|r| r.prediction).collect();
    let served = served_probabilities(plan, &flat, |_| {})?;
    Ok(check("golden", &flat, &stored, &served, Some(&kinds))?)
}

/// Writes every `(path, bytes)` or none: each goes first to a hidden
/// temporary file beside it (`.NAME.tmp`, synced), and only when all are
/// written, and no target is a directory or other non-file, are they renamed
/// over their targets in order (a rename within a directory is atomic). A
/// failure removes the temporary files and leaves the targets as they were,
/// so a failed `train` into the live model directory leaves it loadable.
fn write_all_or_nothing(files: &[(PathBuf, Vec<u8>)]) -> Result<()> {
    use std::io::Write as _;
    let tmp_of = |path: &Path| {
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        path.with_file_name(format!(".{name}.tmp"))
    };
    let stage = || -> Result<()> {
        for (path, bytes) in files {
            if let Ok(meta) = std::fs::symlink_metadata(path)
                && !meta.is_file()
            {
                return Err(io_err(path)(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "exists and is not a regular file; nothing was written",
                )));
            }
            let tmp = tmp_of(path);
            let mut f = std::fs::File::create(&tmp).map_err(io_err(&tmp))?;
            f.write_all(bytes).map_err(io_err(&tmp))?;
            f.sync_all().map_err(io_err(&tmp))?;
        }
        Ok(())
    };
    if let Err(e) = stage() {
        for (path, _) in files {
            let _ = std::fs::remove_file(tmp_of(path));
        }
        return Err(e);
    }
    for (path, _) in files {
        std::fs::rename(tmp_of(path), path).map_err(io_err(path))?;
    }
    Ok(())
}

/// `golden.json` bytes: one row per line, so diffs stay readable.
///
/// # Errors
/// [`TrainerError::Json`] (not expected: every value is serialisable).
pub fn golden_json(golden: &GoldenFile) -> Result<Vec<u8>> {
    let mut out = b"{\"rows\": [\n".to_vec();
    for (i, r) in golden.rows.iter().enumerate() {
        out.extend_from_slice(b"  ");
        out.extend(serde_json::to_vec(r)?);
        out.extend_from_slice(if i + 1 < golden.rows.len() {
            b",\n"
        } else {
            b"\n"
        });
    }
    out.extend_from_slice(b"]}\n");
    Ok(out)
}

fn model_name(out: &Path) -> String {
    out.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "model".to_string())
}

/// Fewest validation rows `train` accepts.
pub const MIN_VALID_ROWS: usize = 10;

/// Fewest rows with a target `trainer train` accepts.
pub const MIN_ROWS: usize = 50;

/// [`Labelled::check_trainable`] over the training and validation rows.
fn check_trainable(train: &Labelled, valid: &Labelled, counts: TargetCounts) -> Result<()> {
    let both = Labelled {
        targets: [train.targets.as_slice(), valid.targets.as_slice()].concat(),
        counts,
        ..Labelled::default()
    };
    both.check_trainable(MIN_ROWS)
}

/// Runs `trainer train` (see the module docs).
///
/// # Errors
/// Any [`TrainerError`]; [`TrainerError::Parity`] when the exported model
/// disagrees with LightGBM (then nothing is written).
pub fn run_train(opts: &TrainOptions, progress: Progress) -> Result<TrainSummary> {
    run_train_with(opts, &TrainExtras::default(), progress)
}

/// [`run_train`] with what `trainer loop` adds.
///
/// # Errors
/// As [`run_train`]; [`TrainerError::InvalidArgument`] for shuffled targets
/// with rows that do not fit in memory.
pub fn run_train_with(
    opts: &TrainOptions,
    extras: &TrainExtras,
    progress: Progress,
) -> Result<TrainSummary> {
    opts.params.validate()?;
    opts.target.validate()?;
    if !(opts.valid_fraction > 0.0 && opts.valid_fraction < 1.0) {
        return Err(TrainerError::InvalidArgument(format!(
            "--valid-fraction must be in (0, 1), got {}",
            opts.valid_fraction
        )));
    }
    let mut timings = Timings::default();

    let t0 = Instant::now();
    let streamed = stream_labelled(
        &opts.logs,
        &opts.target,
        &StreamOptions {
            memory_budget_bytes: opts.memory_budget_bytes,
            valid_fraction: opts.valid_fraction,
            sample: opts.sample,
            spill_dir: opts.spill_dir.clone(),
            window: extras.window,
        },
        progress,
    )?;
    let Streamed {
        train: mut train_set,
        spilled,
        valid,
        parked,
        report,
    } = streamed;
    // With a spill, `train_set` is only the rows kept for the training
    // metrics, and the validation rows wait on disk until LightGBM is done.
    let train_rows = spilled.as_ref().map_or(train_set.len(), |s| s.rows);
    let valid_rows = parked.as_ref().map_or(valid.len(), Parked::rows);
    if report.decisions_dropped.total() > 0 {
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "warning: {}", report.decisions_dropped);
    }
    if let Some(seed) = extras.shuffle_targets_seed {
        if spilled.is_some() {
            return Err(TrainerError::InvalidArgument(
                "shuffled targets need the training rows in memory".into(),
            ));
        }
        use rand::SeedableRng as _;
        use rand::seq::SliceRandom as _;
        train_set
            .targets
            .shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed));
    }
    let counts = train_set.counts;
    check_trainable(&train_set, &valid, counts)?;
    if valid_rows < MIN_VALID_ROWS {
        return Err(TrainerError::NoData(format!(
            "the validation split has {valid_rows} rows, at least {MIN_VALID_ROWS} are needed for its metrics and parity check: raise --valid-fraction or give more logs"
        )));
    }
    if train_rows < 2 * opts.params.min_data_in_leaf {
        return Err(TrainerError::InvalidArgument(format!(
            "--min-data-in-leaf {} allows no split of {} training rows (every tree would be one leaf)",
            opts.params.min_data_in_leaf, train_rows
        )));
    }
    timings.load_s = t0.elapsed().as_secs_f64();

    let t1 = Instant::now();
    let sp = progress.spinner(&format!(
        "training {} trees on {} rows",
        opts.params.num_trees, train_rows
    ));
    let mut params = opts.params.clone();
    let trained = {
        // Joined after loading, so a slow reader does not hold the others'
        // sockets open; left as soon as the trees are grown.
        let _network = match &opts.network {
            Some(n) => {
                params.machines = n.machines.len();
                Some(Network::join(&n.machines, n.rank, n.timeout_minutes)?)
            }
            None => None,
        };
        match &spilled {
            Some(s) => train_file(&s.path, &params),
            None => train(
                &train_set.features,
                &train_set.targets,
                &train_set.weights,
                &params,
            ),
        }
    };
    let spill_dataset = spilled
        .as_ref()
        .map(|_| spill::dataset_params(params.machines));
    drop(spilled);
    sp.finish_and_clear();
    let Trained {
        booster,
        text,
        model,
    } = trained?;
    timings.train_s = t1.elapsed().as_secs_f64();

    let t2 = Instant::now();
    let onnx = export_onnx(&model)?;
    let plan = load_model(&onnx)?;
    timings.export_s = t2.elapsed().as_secs_f64();

    let t3 = Instant::now();
    let valid = match parked {
        Some(p) => p.read(counts)?,
        None => valid,
    };
    let (p_valid, valid_parity) =
        parity_on("validation", &booster, &plan, &valid.features, progress)?;
    let golden = build_golden(&booster, &model, &valid.features)?;
    let golden_report = golden_parity(&plan, &golden)?;
    let is_put = |s: &Labelled| (0..s.len()).map(|i| s.is_put(i)).collect::<Vec<_>>();
    let metrics = Metrics::compute(&p_valid, &valid.targets, &is_put(&valid));
    let p_train = predict(&booster, &train_set.features)?;
    let train_metrics = Metrics::compute(&p_train, &train_set.targets, &is_put(&train_set));
    timings.validate_s = t3.elapsed().as_secs_f64();

    let ts_range = |s: &Labelled| {
        json!([
            s.ts_ms.first().copied().unwrap_or_default(),
            s.ts_ms.last().copied().unwrap_or_default()
        ])
    };
    let parity = vec![valid_parity, golden_report];
    let paths = |v: &[PathBuf]| {
        v.iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
    };
    let details = json!({
        "training_data": {
            "log_dirs": paths(&opts.logs),
            "decision_files": paths(&report.decision_files),
            "outcome_files": paths(&report.outcome_files),
            "decision_rows": report.decision_rows,
            "outcome_rows": report.outcome_rows,
            "outcome_keys": report.outcome_keys,
            "shadow_rows_dropped": report.shadow_rows_dropped,
            "decisions_dropped": report.decisions_dropped,
            "target_counts": counts,
            "train_rows": train_rows,
            "validation_rows": valid.len(),
            "split": "by decision time: the latest rows validate",
            "valid_fraction": opts.valid_fraction,
            "train_ts_ms": ts_range(&train_set),
            "validation_ts_ms": ts_range(&valid),
            "sample": report.sample,
            "window": extras.window,
            "reader": {
                "method": "streamed a row group at a time: outcomes into a (decision, worker) map, then the decisions, keeping each decision's picked row",
                "decision_passes": report.decision_passes,
                "memory_budget_bytes": report.memory_budget_bytes,
                "peak_counted_bytes": report.peak_counted_bytes,
                "largest_row_group_bytes": report.largest_row_group_bytes,
                "spilled_rows": report.spilled_rows,
                "spilled_bytes": report.spilled_bytes,
                "lightgbm_dataset": match &spill_dataset {
                    Some(p) => json!({"from": "a spill file of the training rows, loaded in two rounds", "params": p}),
                    None => json!({"from": "the training rows in memory (Dataset::from_slice)"}),
                },
            },
        },
        "target": {
            "rule": opts.target,
            "definition": "ln(latency_ms) - expected_latency_ln_ms of the picked candidate; a failure counts as max(latency, timeout, failure_penalty_ms)",
            "weights": format!("min(1 / logged propensity, {}); 1 without a propensity", opts.target.max_weight),
            "objective": "LightGBM regression (L2), weighted",
            "dropped": "picked rows without an outcome",
            "distribution": crate::target::Distribution::of(
                &[train_set.targets.as_slice(), valid.targets.as_slice()].concat()
            ),
        },
        "seed": opts.params.seed,
        "train_params": params,
        "lightgbm_params": params.lightgbm_params(),
        "distributed": opts.network.as_ref().map(|n| json!({
            "machines": n.machines.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "rank": n.rank,
            "tree_learner": "data",
            "note": "each machine trained on its own shard of the logs; the trees are grown on the all-reduced histograms of every shard, the metrics here are on this rank's validation rows",
        })),
        "lightgbm": "LightGBM 4.7 via lightgbm3 1.0 (regression objective)",
        "dataset_params_note": DATASET_PARAMS_NOTE,
        "metrics": metrics,
        "metrics_rows": "validation split (the latest rows by decision time)",
        "train_metrics": train_metrics,
        "train_metrics_rows": if train_set.len() < train_rows {
            format!("{} of the {train_rows} training rows, chosen evenly over time", train_set.len())
        } else {
            "every training row".to_string()
        },
        "parity": parity,
        "onnx_sha256": sha256_hex(&onnx),
        "onnx_bytes": onnx.len(),
        "model_txt_sha256": sha256_hex(text.as_bytes()),
    });
    let serde_json::Value::Object(details) = details else {
        unreachable!("json! of an object literal is an object")
    };
    let name = model_name(&opts.out);
    let card = build_card(&name, &onnx, model.trees.len(), details);

    std::fs::create_dir_all(&opts.out).map_err(io_err(&opts.out))?;
    let files = vec![
        opts.out.join(ONNX_FILE),
        opts.out.join(TEXT_FILE),
        opts.out.join(GOLDEN_FILE),
        opts.out.join(CARD_FILE),
    ];
    let mut card_json = serde_json::to_vec_pretty(&card)?;
    card_json.push(b'\n');
    // The card last: it names the model the other three files make.
    write_all_or_nothing(&[
        (files[0].clone(), onnx),
        (files[1].clone(), text.into_bytes()),
        (files[2].clone(), golden_json(&golden)?),
        (files[3].clone(), card_json),
    ])?;

    Ok(TrainSummary {
        card,
        counts,
        train_rows,
        valid_rows: valid.len(),
        metrics,
        parity,
        timings,
        files,
        valid_ts_ms: valid
            .ts_ms
            .iter()
            .min()
            .zip(valid.ts_ms.iter().max())
            .map(|(a, b)| (*a, *b)),
        decision_files: report.decision_files,
    })
}
