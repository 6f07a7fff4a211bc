//! `trainer`: see `trainer --help` and `docs/retraining.md`.

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use std::sync::atomic::{AtomicBool, Ordering};

use trainer::cli::{Cli, Command, LoopArgs};
use trainer::compare_arms::compare_arms;
use trainer::gate::GateConfig;
use trainer::pipeline::load_with_progress;
use trainer::progress::Progress;
use trainer::promote::AdminClient;
use trainer::retrain_loop::{self, LoopOptions, SystemClock, WindowSpec};
use trainer::synth::{SynthConfig, write_logs};
use trainer::{TrainerError, compare, pipeline, validate};

/// `println!` that never panics: the report goes to stdout, and a reader
/// that went away (`trainer … | head`) must not turn a finished command
/// into a panic; the artefacts are already on disk, so write errors on
/// stdout are ignored.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// The error and its causes, each cause printed once: a `TrainerError`'s
/// message often already contains its source's text, which anyhow's `{:#}`
/// would print again.
fn error_message(e: &anyhow::Error) -> String {
    let mut msg = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !msg.contains(&c) {
            msg.push_str(": ");
            msg.push_str(&c);
        }
    }
    msg
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let progress = if cli.quiet {
        Progress::hidden()
    } else {
        Progress::stderr()
    };
    match cli.command {
        Command::Train(args) => {
            let opts = pipeline::TrainOptions {
                logs: args.logs.clone(),
                out: args.out.clone(),
                params: args.params(),
                target: args.target.into(),
                valid_fraction: args.valid_fraction,
                memory_budget_bytes: args.memory_budget.0,
                sample: args.sample,
                network: match (&args.machines, args.rank) {
                    (Some(machines), Some(rank)) => Some(pipeline::NetworkOptions {
                        machines: machines.0.clone(),
                        rank,
                        timeout_minutes: args.network_timeout_minutes,
                    }),
                    _ => None,
                },
                spill_dir: args.spill_dir.clone(),
            };
            let s = pipeline::run_train(&opts, progress)?;
            let c = &s.counts;
            say!("targets: {c}");
            say!(
                "split by time: {} train rows, {} validation rows",
                s.train_rows,
                s.valid_rows
            );
            say!("validation:\n{}", s.metrics.table());
            for p in &s.parity {
                say!(
                    "parity {}: {} rows, max |served - lightgbm| = {:e} (<= {:e})",
                    p.set,
                    p.rows,
                    p.max_abs_diff,
                    p.tolerance
                );
            }
            let t = &s.timings;
            say!(
                "time: load {:.2} s, train {:.2} s, export {:.2} s, validate {:.2} s",
                t.load_s,
                t.train_s,
                t.export_s,
                t.validate_s
            );
            say!("model_version {}", s.card.model_version);
            for f in &s.files {
                say!("wrote {}", f.display());
            }
        }
        Command::Validate(args) => {
            let s = validate::run_validate_within(
                &args.model,
                &args.logs,
                args.memory_budget.0,
                progress,
            )?;
            say!("model_version {}", s.model_version);
            for p in &s.parity {
                say!(
                    "parity {}: {} rows, max |diff| = {:e} (<= {:e})",
                    p.set,
                    p.rows,
                    p.max_abs_diff,
                    p.tolerance
                );
            }
            if let (Some(m), Some(c)) = (&s.metrics, &s.counts) {
                say!("targets: {c}");
                say!("{}", m.table());
            }
            if let Some(path) = &args.json {
                let text = serde_json::to_string_pretty(&s)?;
                std::fs::write(path, text + "\n")
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            say!("parity OK");
        }
        Command::Compare(args) => {
            let (a, b) = match (&args.arms, &args.a, &args.b) {
                (Some(arms), _, _) => {
                    let [a, b] = arms_or_exit(arms);
                    let table = load_with_progress(&args.logs, progress)?;
                    let hash = args.arm_hash.as_deref();
                    let r = compare_arms(&table, [a, b], hash, args.bootstrap, args.seed)?;
                    print!("{}", r.table());
                    let json = serde_json::to_string_pretty(&r)?;
                    std::fs::write(&args.out, json + "\n")
                        .with_context(|| format!("writing {}", args.out.display()))?;
                    say!("wrote {}", args.out.display());
                    return Ok(());
                }
                (None, Some(a), Some(b)) => (a, b),
                _ => anyhow::bail!("give --a DIR and --b DIR, or --arms A,B"),
            };
            let r = compare::run_compare(
                a,
                b,
                &args.logs,
                &args.target.into(),
                &compare::CompareOptions {
                    clip: args.clip,
                    bootstrap: args.bootstrap,
                    seed: args.seed,
                },
                &args.out,
                progress,
            )?;
            print!("{}", r.table());
            say!("wrote {}", args.out.display());
        }
        Command::Loop(args) => run_loop(&args, progress)?,
        Command::Synth(args) => {
            let cfg = SynthConfig {
                decisions: args.rows,
                seed: args.seed,
                workers: args.workers,
                candidates: args.candidates,
                temperature: args.temperature,
                decisions_per_file: args.rows_per_file,
            };
            let pb = progress.bar(args.rows as u64, "synth", "decisions");
            let r = write_logs(&cfg, &args.out, |d| pb.set_position(d as u64))?;
            pb.finish_and_clear();
            say!(
                "wrote {} decisions ({} decision rows, {} outcome rows) in {} files under {}",
                r.decisions,
                r.decision_rows,
                r.outcome_rows,
                r.files.len(),
                args.out.display()
            );
        }
    }
    Ok(())
}

/// Set by the first stop request (Ctrl-C, SIGTERM) during `trainer loop`,
/// which then stops between steps; a second one exits at once.
static STOP: AtomicBool = AtomicBool::new(false);

fn run_loop(args: &LoopArgs, progress: Progress) -> anyhow::Result<()> {
    let admin = match &args.service_url {
        Some(url) => {
            let credentials =
                scorer_client::Credentials::from_args(&scorer_client::CredentialArgs {
                    token: args.admin_token.clone(),
                    ca_file: args.ca_file.clone(),
                    ..scorer_client::CredentialArgs::default()
                })?;
            Some(AdminClient::new(url, &credentials)?)
        }
        None => None,
    };
    let opts = LoopOptions {
        train: pipeline::TrainOptions {
            logs: args.logs.clone(),
            out: args.models_dir.clone(),
            params: args.params(),
            target: args.target.into(),
            valid_fraction: args.valid_fraction,
            memory_budget_bytes: args.memory_budget.0,
            sample: None,
            network: None,
            spill_dir: args.spill_dir.clone(),
        },
        models_dir: args.models_dir.clone(),
        current: args.current.clone(),
        previous: args.previous.clone(),
        window: match args.window_hours {
            Some(h) => WindowSpec::Hours(h),
            None => WindowSpec::Decisions(args.window_decisions),
        },
        gate: GateConfig {
            min_decisions: args.min_decisions,
            min_gain_ms: args.min_gain_ms,
        },
        compare: compare::CompareOptions {
            clip: args.clip,
            bootstrap: args.bootstrap,
            seed: args.bootstrap_seed,
        },
        forbid_promotion: args.forbid_promotion,
        max_rounds: args.max_rounds,
        every: std::time::Duration::from_secs(args.every_s),
        shuffle_targets_seed: None,
    };
    let mut clock = SystemClock { stop: &STOP };
    let rounds = retrain_loop::run_loop(
        &opts,
        admin.as_ref().map(|a| a as &dyn retrain_loop::Serve),
        &mut clock,
        &STOP,
        progress,
        &mut |r| say!("{}", r.line),
    )?;
    if STOP.load(Ordering::SeqCst) {
        let n = rounds.len();
        say!("stopped after {n} round{}", if n == 1 { "" } else { "s" });
    }
    Ok(())
}

/// The two arm names of `--arms`, or clap's usage error (exit 2).
fn arms_or_exit(arms: &[String]) -> [&str; 2] {
    use clap::CommandFactory as _;
    let why = match arms {
        [a, b] if a == b => format!("--arms names `{a}` twice; give two different arms"),
        [a, b] => match [a, b]
            .iter()
            .find(|n| n.is_empty() || n.trim() != n.as_str())
        {
            Some(n) => format!("--arms: arm name {n:?} is empty or has spaces around it"),
            None => return [a.as_str(), b.as_str()],
        },
        _ => format!(
            "--arms takes exactly two arm names, A,B (e.g. stable,canary), got {}",
            arms.len()
        ),
    };
    Cli::command()
        .error(clap::error::ErrorKind::ValueValidation, why)
        .exit()
}

fn main() -> ExitCode {
    use std::io::Write as _;
    let cli = Cli::parse();
    let in_loop = matches!(cli.command, Command::Loop(_));
    // A stop request (Ctrl-C, SIGTERM) runs no destructor: delete the spill
    // files here, or gigabytes of them would stay in the spill directory.
    // The loop stops between steps on the first request; its staging
    // directory is hidden and removed by the next start.
    let _ = ctrlc::set_handler(move || {
        if in_loop && !STOP.swap(true, Ordering::SeqCst) {
            return;
        }
        trainer::spill::delete_live_files();
        std::process::exit(130);
    });
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "error: {}", error_message(&e));
            let code = e
                .downcast_ref::<TrainerError>()
                .map_or(1, TrainerError::exit_code);
            ExitCode::from(u8::try_from(code).unwrap_or(1))
        }
    }
}
