//! `evaluate`: compare routing policies in the simulator or on a real Redis
//! testbed and write results.json, a Markdown report and plots.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use evaluation::report;
use evaluation::runner::{SimOptions, run_sim};

#[derive(Parser, Debug)]
#[command(
    name = "evaluate",
    about = "Policy-against-policy evaluation of the scoring service"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run one scenario in the discrete-event simulator: a preset
    /// (`--scenario`) or your own (`--scenario-file`).
    Sim {
        /// Scenario preset name.
        #[arg(
            long,
            required_unless_present = "scenario_file",
            conflicts_with = "scenario_file",
            value_parser = clap::builder::PossibleValuesParser::new(evaluation::scenario::SCENARIOS)
        )]
        scenario: Option<String>,
        /// A scenario in a TOML file, in the shape of the presets (see
        /// evaluation/scenarios/example.toml); it sets its own workers and
        /// duration.
        #[arg(long, conflicts_with_all = ["workers", "duration_s"])]
        scenario_file: Option<PathBuf>,
        /// Comma-separated policy names (default: all).
        #[arg(long, value_delimiter = ',')]
        policies: Option<Vec<String>>,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Number of workers of a preset [default: 12].
        #[arg(long)]
        workers: Option<usize>,
        /// Simulated duration of a preset, s [default: 120].
        #[arg(long)]
        duration_s: Option<f64>,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
        /// Write the service arms' decision logs (Parquet) under this directory.
        #[arg(long)]
        log_dir: Option<PathBuf>,
        /// Diagnostic only: a service configuration file (TOML, as the
        /// service's `--config`) for the service arms instead of the defaults.
        #[arg(long)]
        service_config: Option<PathBuf>,
        /// Model directory of the `model` arm (default: the repository's
        /// `models/default`, found from any working directory).
        #[arg(long)]
        model_dir: Option<PathBuf>,
    },
    /// Run one scenario on real redis-server workers.
    Testbed(evaluation::testbed::TestbedArgs),
    /// Run every simulator scenario on the evaluation seeds and the testbed
    /// pause, kill-restart, drain, loaded, scorer-down and cache scenarios;
    /// write EVALUATION.md.
    All {
        /// Comma-separated policy names [default: every policy but the
        /// diagnostics service-embedded-rules, rules-max, rules-softmax,
        /// rules-p2c, rules-prequal, model and service-learning-shuffled].
        #[arg(long, value_delimiter = ',')]
        policies: Option<Vec<String>>,
        /// Output directory for per-scenario results and plots.
        #[arg(long, default_value = "evaluation/results")]
        out: PathBuf,
        /// Where to write EVALUATION.md.
        #[arg(long, default_value = "EVALUATION.md")]
        evaluation_md: PathBuf,
        /// Seeds every simulator scenario runs on, comma-separated; each
        /// row is the arm's median seed [default: the evaluation seeds
        /// 101,102,103, on which nothing was tuned].
        #[arg(long, value_delimiter = ',')]
        seeds: Option<Vec<u64>>,
        /// Simulated duration per scenario and seed, s.
        #[arg(long, default_value_t = evaluation::evaluate_all::ALL_DURATION_S)]
        duration_s: f64,
        /// Skip the real-Redis testbed.
        #[arg(long)]
        skip_testbed: bool,
        /// Write the service arms' decision logs (Parquet) under this directory.
        #[arg(long)]
        log_dir: Option<PathBuf>,
        /// Simulator scenarios run at once (results do not depend on it;
        /// the testbed always runs alone) [default: the machine's
        /// parallelism, at most 4].
        #[arg(long)]
        jobs: Option<usize>,
    },
}

fn command_line() -> String {
    let args: Vec<String> = std::env::args().skip(1).collect();
    format!("evaluate {}", args.join(" "))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Sim {
            scenario,
            scenario_file,
            policies,
            seed,
            workers,
            duration_s,
            out,
            log_dir,
            service_config,
            model_dir,
        } => {
            let mut opts = SimOptions::new(scenario.as_deref().unwrap_or("custom"));
            if let Some(path) = scenario_file {
                match evaluation::scenario_file::load(&path) {
                    Ok(sc) => opts.custom = Some(sc),
                    Err(e) => {
                        eprintln!("error: --scenario-file {e}");
                        return ExitCode::FAILURE;
                    }
                }
            }
            if let Some(p) = policies {
                opts.policies = p;
            }
            opts.seed = seed;
            if let Some(w) = workers {
                opts.workers = w;
            }
            if let Some(d) = duration_s {
                opts.duration_s = d;
            }
            opts.log_dir = log_dir;
            if let Some(dir) = model_dir {
                // Given explicitly, a model directory that is not there is an
                // error, not a silently skipped arm.
                // The service's own vetting: a directory it would refuse is
                // an error here, not an arm reported as skipped.
                if let Err(e) =
                    scorer_model::load_model_dir(&dir, &scorer_model::ModelConfig::default(), 0)
                {
                    eprintln!("error: --model-dir {}: {e}", dir.display());
                    return ExitCode::FAILURE;
                }
                opts.model_dir = dir;
            }
            if let Some(path) = service_config {
                match <scorer_engine::config::Config as service::config::LoadConfig>::load(Some(
                    &path,
                )) {
                    Ok(c) => opts.service_config = c,
                    Err(e) => {
                        eprintln!("error: {}: {e}", path.display());
                        return ExitCode::FAILURE;
                    }
                }
            }
            std::fs::create_dir_all(&out)
                .map_err(|e| format!("--out {}: {e}", out.display()))
                .and_then(|()| run_sim(&opts))
                .and_then(|r| {
                    let w = report::write_scenario(&out, &r, &command_line())?;
                    print!("{}", report::table(&r.policies));
                    println!("wrote {} and {}", w.json.display(), w.markdown.display());
                    Ok(())
                })
        }
        Cmd::Testbed(args) => evaluation::testbed::run_cli(&args, &command_line()),
        Cmd::All {
            policies,
            out,
            evaluation_md,
            seeds,
            duration_s,
            skip_testbed,
            log_dir,
            jobs,
        } => {
            let mut opts = evaluation::evaluate_all::AllOptions::new(&out, &evaluation_md);
            if let Some(p) = policies {
                opts.policies = p;
            }
            if let Some(seeds) = seeds {
                opts.seeds = seeds;
            }
            opts.duration_s = duration_s;
            opts.skip_testbed = skip_testbed;
            opts.log_dir = log_dir;
            if let Some(j) = jobs {
                opts.jobs = j;
            }
            evaluation::evaluate_all::run_all(&opts, &command_line())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
