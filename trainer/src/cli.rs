//! The command line (clap): `trainer train | validate | compare | synth | loop`.
//! Every flag's help states its unit and default.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use lightgbm_ext::MachineList;

use crate::budget::Bytes;
use crate::compare::{DEFAULT_BOOTSTRAP, DEFAULT_BOOTSTRAP_SEED, DEFAULT_CLIP};
use crate::sample::SampleSpec;
use crate::target::TargetRule;
use crate::train::TrainParams;

/// Trains the scoring service's model from its decision logs: LightGBM,
/// regression of ln(latency / E), E the rules' routing cost, exported to ONNX, checked
/// to give the same predictions when served by tract (|Δ| ≤ 1e-5 on every
/// row), compared offline against another model.
///
/// Exit status: 0 success, 1 error, 2 parity failure (the model must not ship).
#[derive(Debug, Parser)]
#[command(name = "trainer", version, about, long_about = None)]
pub struct Cli {
    /// Hide progress bars (they are drawn on stderr only when it is a terminal).
    #[arg(long, global = true)]
    pub quiet: bool,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Train a model from decision logs and write models/NAME/ (model.onnx,
    /// model.txt, card.json, golden.json). Fails, writing nothing, when the
    /// exported model disagrees with LightGBM by more than 1e-5.
    Train(TrainArgs),
    /// Re-check a model directory: golden-row parity, and parity plus R²,
    /// MAE and quantile calibration (beside the rules' baseline) on the
    /// given logs. Exits 2 on a parity failure or a model the service would refuse
    /// (1 for a card of another feature schema, as for any unreadable input).
    Validate(ValidateArgs),
    /// Offline shadow comparison of two models on logged decisions; prints a
    /// table and writes compare.json.
    Compare(CompareArgs),
    /// Write synthetic decision and outcome logs (the service's Parquet
    /// schema) from a documented generative model of worker behaviour.
    Synth(SynthArgs),
    /// The retraining loop: every --every-s seconds, train a candidate on
    /// the latest decisions, validate it, compare it with the served model
    /// on the newest held-out decisions, and promote it only when its gain
    /// clears --min-gain-ms with its whole 95% interval above 0; roll a
    /// promoted model back when the one before it does better on the
    /// decisions it served. One line per round says what it decided and why.
    Loop(LoopArgs),
}

/// How outcomes become targets, shared by the commands.
#[derive(Debug, Clone, Copy, Args)]
pub struct TargetArgs {
    /// A failed outcome counts as at least this latency (and its timeout),
    /// in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = TargetRule::default().failure_penalty_ms)]
    pub failure_penalty_ms: f64,
    /// An outcome slower than this many times the rules' routing cost is
    /// slow (dimensionless, >= 1).
    #[arg(long, value_name = "FACTOR", default_value_t = TargetRule::default().slow_factor)]
    pub slow_factor: f64,
    /// Cap on a row's inverse-propensity weight (dimensionless, >= 1).
    #[arg(long, value_name = "WEIGHT", default_value_t = TargetRule::default().max_weight)]
    pub max_weight: f64,
}

impl From<TargetArgs> for TargetRule {
    fn from(a: TargetArgs) -> Self {
        TargetRule {
            failure_penalty_ms: a.failure_penalty_ms,
            slow_factor: a.slow_factor,
            max_weight: a.max_weight,
        }
    }
}

/// `trainer train`.
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Log directory holding decisions-*.parquet and outcomes-*.parquet
    /// files (searched recursively, e.g. the service's `dt=YYYY-MM-DD/`
    /// partitions). Repeat for several directories.
    #[arg(long, value_name = "DIR", required = true)]
    pub logs: Vec<PathBuf>,
    /// Output model directory, e.g. models/NAME/ (created; files inside are
    /// overwritten). NAME becomes the prefix of the model version.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Seed of every LightGBM random choice (the output is a pure function of seed, data and flags).
    #[arg(long, value_name = "N", default_value_t = TrainParams::default().seed)]
    pub seed: u64,
    /// Number of boosting rounds = trees.
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub num_trees: usize,
    /// Maximum tree depth, in levels.
    #[arg(long, value_name = "N", default_value_t = 6)]
    pub max_depth: usize,
    /// Maximum leaves per tree [default: min(31, 2^max-depth)].
    #[arg(long, value_name = "N")]
    pub num_leaves: Option<usize>,
    /// Shrinkage applied to each tree, dimensionless in (0, 1].
    #[arg(long, value_name = "RATE", default_value_t = 0.1)]
    pub learning_rate: f64,
    /// Minimum training rows per leaf.
    #[arg(long, value_name = "ROWS", default_value_t = 20)]
    pub min_data_in_leaf: usize,
    /// Share of the rows with a target, the latest by decision time, held out for
    /// validation; a fraction in (0, 1).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.2)]
    pub valid_fraction: f64,
    /// LightGBM threads. Deterministic mode gives the same trees for any
    /// count (model.txt then differs only in its `[num_threads: N]` line).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub threads: usize,
    /// What the log reader may hold at once, in bytes or with a binary unit
    /// (KiB, MiB, GiB): the outcome map, the labelled rows and one row group
    /// being read. Data that would not fit is refused with what to do.
    #[arg(long, value_name = "SIZE", default_value = "1GiB")]
    pub memory_budget: Bytes,
    /// Train on a time-stratified sample of the training decisions: a
    /// fraction in (0, 1] (e.g. 0.25; 1 keeps all) or a row cap of 2 or
    /// more (e.g. 2000000).
    /// Validation always uses the whole validation window.
    #[arg(long, value_name = "FRACTION|ROWS")]
    pub sample: Option<SampleSpec>,
    /// Directory for the training rows when they do not fit
    /// --memory-budget (a LightGBM data file, deleted after training,
    /// about 0.5 KB per row, and 201 bytes per validation row) [default: the
    /// system's temporary directory].
    #[arg(long, value_name = "DIR")]
    pub spill_dir: Option<PathBuf>,
    /// Train data-parallel with LightGBM's own network: every machine of
    /// the list (host:port, the port its trainer listens on) runs `trainer
    /// train` with the same flags on its own shard of the log files, and
    /// each writes the same model.
    #[arg(long, value_name = "HOST:PORT,...", requires = "rank")]
    pub machines: Option<MachineList>,
    /// This process's place in --machines, from 0.
    #[arg(long, value_name = "N", requires = "machines")]
    pub rank: Option<usize>,
    /// How long to wait for the other machines to connect, in minutes
    /// (1..=1440).
    #[arg(long, value_name = "MINUTES", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1440))]
    pub network_timeout_minutes: u32,
    /// Targets.
    #[command(flatten)]
    pub target: TargetArgs,
}

impl TrainArgs {
    /// The LightGBM parameters of these flags.
    pub fn params(&self) -> TrainParams {
        TrainParams {
            num_trees: self.num_trees,
            max_depth: self.max_depth,
            num_leaves: self.num_leaves,
            learning_rate: self.learning_rate,
            min_data_in_leaf: self.min_data_in_leaf,
            seed: self.seed,
            threads: self.threads,
            machines: self.machines.as_ref().map_or(1, |m| m.0.len()),
        }
    }
}

/// `trainer validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Model directory (models/NAME/) with model.onnx, model.txt, card.json, golden.json.
    #[arg(long, value_name = "DIR")]
    pub model: PathBuf,
    /// Log directory to recompute metrics and parity on (repeatable). Without
    /// it only the golden rows are checked.
    #[arg(long, value_name = "DIR")]
    pub logs: Vec<PathBuf>,
    /// Also write the summary as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// What the log reader may hold at once (bytes, or KiB/MiB/GiB): the
    /// outcome map and one chunk of rows; the predictions of every row
    /// take 13 bytes each beside it.
    #[arg(long, value_name = "SIZE", default_value = "1GiB")]
    pub memory_budget: Bytes,
}

/// `trainer compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Model A directory (e.g. the current model).
    #[arg(long, value_name = "DIR", required_unless_present = "arms")]
    pub a: Option<PathBuf>,
    /// Model B directory (e.g. the candidate).
    #[arg(long, value_name = "DIR", required_unless_present = "arms")]
    pub b: Option<PathBuf>,
    /// Instead of two models, compare two arms that ran live, by the
    /// decision log's `arm` column: `stable,canary` for a config canary,
    /// `a,b` for a model A/B split. Reports each arm's outcomes and the
    /// on-policy difference B - A with bootstrap intervals.
    #[arg(long, value_name = "A,B", value_delimiter = ',', num_args = 1, conflicts_with_all = ["a", "b"])]
    pub arms: Option<Vec<String>>,
    /// With --arms: arm B's config hash, when the logs hold several
    /// experiments (arm B's decisions of that hash, arm A's made meanwhile).
    #[arg(long, value_name = "HASH", requires = "arms", conflicts_with_all = ["a", "b"])]
    pub arm_hash: Option<String>,
    /// Log directory with logged decisions and outcomes (repeatable).
    #[arg(long, value_name = "DIR", required = true)]
    pub logs: Vec<PathBuf>,
    /// Cap on inverse-propensity weights (dimensionless, >= 1); not with --arms.
    #[arg(long, value_name = "WEIGHT", default_value_t = DEFAULT_CLIP, conflicts_with = "arms")]
    pub clip: f64,
    /// Bootstrap resamples (a count) of the usable decisions behind the 95%
    /// confidence intervals of SNIPS and DR mean latency (ms) for A, B and
    /// B - A, and the verdict; 0 turns the intervals off.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_BOOTSTRAP)]
    pub bootstrap: usize,
    /// Seed of the bootstrap's resampling: the same seed, logs and flags give
    /// the same intervals.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_BOOTSTRAP_SEED)]
    pub seed: u64,
    /// Where to write the JSON report.
    #[arg(long, value_name = "FILE", default_value = "compare.json")]
    pub out: PathBuf,
    /// Censoring and the slow threshold of the estimates.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// `trainer synth`.
#[derive(Debug, Args)]
pub struct SynthArgs {
    /// Output log directory (dt=YYYY-MM-DD/ partitions are created inside).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Number of decisions to generate (each has --candidates rows in the
    /// decisions log and at most one outcome row).
    #[arg(long, value_name = "N")]
    pub rows: usize,
    /// RNG seed; the files' contents are a pure function of the flags.
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// Workers in the simulated pool.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub workers: usize,
    /// Candidate workers per decision.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub candidates: usize,
    /// Temperature of the logging softmax policy over rule scores
    /// (dimensionless, > 0; higher explores more).
    #[arg(long, value_name = "T", default_value_t = 0.5)]
    pub temperature: f64,
    /// Decisions per Parquet file pair.
    #[arg(long, value_name = "N", default_value_t = 50_000)]
    pub rows_per_file: usize,
}

/// `trainer loop`.
#[derive(Debug, Args)]
pub struct LoopArgs {
    /// The service's decision-log directory (decisions-*.parquet and
    /// outcomes-*.parquet, searched recursively). Repeat for several.
    #[arg(long, value_name = "DIR", required = true)]
    pub logs: Vec<PathBuf>,
    /// Where promoted models are written, one directory per model version
    /// (created; each appears whole, by a rename).
    #[arg(long, value_name = "DIR")]
    pub models_dir: PathBuf,
    /// The model directory the service serves now [default: none, the
    /// rules alone].
    #[arg(long, value_name = "DIR")]
    pub current: Option<PathBuf>,
    /// The model directory the service served before --current (what its
    /// POST /v1/admin/model/rollback returns to), so that the loop may roll
    /// back to it [default: none: only models the loop promoted are rolled
    /// back].
    #[arg(long, value_name = "DIR", requires = "current")]
    pub previous: Option<PathBuf>,
    /// Seconds between the starts of two rounds.
    #[arg(long, value_name = "S", default_value_t = 300)]
    pub every_s: u64,
    /// Stop after this many rounds [default: run until stopped].
    #[arg(long, value_name = "N")]
    pub max_rounds: Option<u64>,
    /// Train and judge on the latest N decisions with an outcome.
    #[arg(
        long,
        value_name = "N",
        default_value_t = crate::retrain_loop::DEFAULT_WINDOW_DECISIONS,
        conflicts_with = "window_hours"
    )]
    pub window_decisions: usize,
    /// Instead: on the decisions of the last H hours (a number of hours, > 0).
    #[arg(long, value_name = "H")]
    pub window_hours: Option<f64>,
    /// Fewest held-out decisions (usable: outcome, propensity, every
    /// candidate's features) the gate decides on.
    #[arg(long, value_name = "N", default_value_t = crate::gate::DEFAULT_MIN_DECISIONS)]
    pub min_decisions: usize,
    /// Smallest doubly robust gain (served minus candidate mean latency, in
    /// milliseconds) that promotes; its 95% interval must also be above 0.
    #[arg(long, value_name = "MS", default_value_t = crate::gate::DEFAULT_MIN_GAIN_MS)]
    pub min_gain_ms: f64,
    /// Decide and report, but never promote nor roll back (a dry run).
    #[arg(long)]
    pub forbid_promotion: bool,
    /// The running service (http://host:port): promotions and rollbacks are
    /// applied through its POST /v1/admin/model/promote and
    /// /v1/admin/model/rollback. Without it, promoted models are only
    /// written to --models-dir.
    #[arg(long, value_name = "URL")]
    pub service_url: Option<String>,
    /// The service's admin bearer token. Better set as SCORER_ADMIN__TOKEN
    /// (as the service reads it), out of the process list.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "SCORER_ADMIN__TOKEN",
        hide_env_values = true
    )]
    pub admin_token: Option<String>,
    /// PEM CA certificate(s) that signed the service's certificate, for an
    /// https:// --service-url.
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// Share of the window's decisions, the latest, held out: for the
    /// validation metrics and the gate's comparison; a fraction in (0, 1).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.2)]
    pub valid_fraction: f64,
    /// What the log reader may hold at once (bytes, or KiB/MiB/GiB), as for
    /// `trainer train`.
    #[arg(long, value_name = "SIZE", default_value = "1GiB")]
    pub memory_budget: Bytes,
    /// Directory for training rows that do not fit --memory-budget
    /// [default: the system's temporary directory].
    #[arg(long, value_name = "DIR")]
    pub spill_dir: Option<PathBuf>,
    /// Seed of every LightGBM random choice.
    #[arg(long, value_name = "N", default_value_t = TrainParams::default().seed)]
    pub seed: u64,
    /// Number of boosting rounds = trees.
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub num_trees: usize,
    /// Maximum tree depth, in levels.
    #[arg(long, value_name = "N", default_value_t = 6)]
    pub max_depth: usize,
    /// Shrinkage applied to each tree, dimensionless in (0, 1].
    #[arg(long, value_name = "RATE", default_value_t = 0.1)]
    pub learning_rate: f64,
    /// Minimum training rows per leaf.
    #[arg(long, value_name = "ROWS", default_value_t = 20)]
    pub min_data_in_leaf: usize,
    /// LightGBM threads.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub threads: usize,
    /// Cap on inverse-propensity weights in the comparison (dimensionless, >= 1).
    #[arg(long, value_name = "WEIGHT", default_value_t = DEFAULT_CLIP)]
    pub clip: f64,
    /// Bootstrap resamples (a count, >= 1) behind the gate's 95% interval.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_BOOTSTRAP)]
    pub bootstrap: usize,
    /// Seed of the bootstrap's resampling.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_BOOTSTRAP_SEED)]
    pub bootstrap_seed: u64,
    /// Targets.
    #[command(flatten)]
    pub target: TargetArgs,
}

impl LoopArgs {
    /// The LightGBM parameters of these flags.
    pub fn params(&self) -> TrainParams {
        TrainParams {
            num_trees: self.num_trees,
            max_depth: self.max_depth,
            num_leaves: None,
            learning_rate: self.learning_rate,
            min_data_in_leaf: self.min_data_in_leaf,
            seed: self.seed,
            threads: self.threads,
            machines: 1,
        }
    }
}
