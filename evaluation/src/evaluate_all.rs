//! `evaluate all`: every simulator scenario, the testbed `pause`,
//! `kill-restart`, `drain`, `loaded`, `scorer-down`, `cache` and
//! `many-routers` scenarios, the targets ([`crate::targets`]) and
//! `EVALUATION.md`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use crate::arms::{ALL_POLICIES, SIM_ONLY};
use crate::report;
use crate::retrain_cache::RetrainCache;
use crate::runner::{ScenarioResults, SimOptions, run_sim};
use crate::scenario::SCENARIOS;
use crate::targets::{self, TargetCheck};

/// Default simulated duration per scenario and seed in `evaluate all`, s:
/// shorter than `evaluate sim`'s 120 s so that three seeds fit the time
/// budget (docs/evaluation.md, "Seeds", says how the ranking was checked).
pub const ALL_DURATION_S: f64 = 60.0;

/// The testbed agent's report interval, ms (its default).
const TESTBED_REPORT_INTERVAL_MS: f64 = agent::config::DEFAULT_INTERVAL_MS as f64;

/// The testbed scenarios `evaluate all` runs.
pub const TESTBED_SCENARIOS: [&str; 7] = [
    "pause",
    "kill-restart",
    "drain",
    "loaded",
    "scorer-down",
    "cache",
    crate::testbed::many_routers::NAME,
];

/// How long `scorer-down` keeps the service away in `evaluate all`, ms.
pub const SCORER_DOWN_MS: u64 = 5_000;

/// Options of `evaluate all`.
#[derive(Debug, Clone)]
pub struct AllOptions {
    /// Arms to run (default [`ALL_POLICIES`]).
    pub policies: Vec<String>,
    /// Output directory for per-scenario results and plots.
    pub out: PathBuf,
    /// Where to write EVALUATION.md.
    pub evaluation_md: PathBuf,
    /// Seeds every simulator scenario runs on (each row is the median
    /// seed's run, [`crate::seeds`]).
    pub seeds: Vec<u64>,
    /// Simulated duration per scenario, s.
    pub duration_s: f64,
    /// Skip the real-Redis testbed.
    pub skip_testbed: bool,
    /// Where the service arms write decision logs, if anywhere.
    pub log_dir: Option<PathBuf>,
    /// Simulator scenarios run at once (each on its own thread; a run is
    /// deterministic, so the results do not depend on it). The testbed
    /// always runs alone, after the simulator, so that its real latencies
    /// do not share the CPU with it.
    pub jobs: usize,
}

/// Default [`AllOptions::jobs`]: the machine's parallelism, at most 4.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
}

impl AllOptions {
    /// The defaults, writing to `out` and `evaluation_md`.
    pub fn new(out: &Path, evaluation_md: &Path) -> Self {
        Self {
            policies: ALL_POLICIES.iter().map(|s| (*s).to_owned()).collect(),
            out: out.to_path_buf(),
            evaluation_md: evaluation_md.to_path_buf(),
            seeds: crate::seeds::EVALUATION_SEEDS.to_vec(),
            duration_s: ALL_DURATION_S,
            skip_testbed: false,
            log_dir: None,
            jobs: default_jobs(),
        }
    }
}

/// One testbed scenario's outcome: results and files, or why it did not run.
pub type TestbedRun = (String, Result<(ScenarioResults, report::Written), String>);

/// Run everything and write `opts.evaluation_md`; prints each scenario's
/// wall time.
///
/// # Errors
/// A scenario that cannot run or a file that cannot be written.
pub fn run_all(opts: &AllOptions, command: &str) -> Result<(), String> {
    let (out, evaluation_md) = (&opts.out, &opts.evaluation_md);
    if opts.jobs == 0 {
        return Err("--jobs must be at least 1".to_owned());
    }
    crate::arms::check_names(&opts.policies)?;
    // Refuse unusable output paths before any scenario runs, not after.
    std::fs::create_dir_all(out).map_err(|e| format!("--out {}: {e}", out.display()))?;
    if evaluation_md.is_dir() {
        return Err(format!(
            "--evaluation-md {} is a directory",
            evaluation_md.display()
        ));
    }
    let all_started = Instant::now();
    let sims = run_sims(opts)?;
    let mut testbeds: Vec<TestbedRun> = Vec::new();
    if !opts.skip_testbed {
        for name in TESTBED_SCENARIOS {
            let started = Instant::now();
            let dir = out.join("testbed").join(name);
            let mut args = crate::testbed::TestbedArgs::defaults(name, &dir);
            args.policies = Some(testbed_policies(&opts.policies, name));
            if name == crate::testbed::faults::SCORER_DOWN {
                args.fault_ms = SCORER_DOWN_MS;
            }
            let run = match crate::testbed::run(&args) {
                Ok(r) => {
                    let w = report::write_scenario(
                        &dir,
                        &r,
                        &format!(
                            "evaluate testbed --scenario {name} --policies {} --out {}{}",
                            testbed_policies(&opts.policies, name).join(","),
                            dir.display(),
                            if name == crate::testbed::faults::SCORER_DOWN {
                                format!(" --fault-ms {SCORER_DOWN_MS}")
                            } else {
                                String::new()
                            }
                        ),
                    )?;
                    Ok((r, w))
                }
                Err(e) => Err(e),
            };
            eprintln!(
                "testbed {name}: {:.1} s wall time",
                started.elapsed().as_secs_f64()
            );
            testbeds.push((name.to_owned(), run));
        }
    }
    let md = evaluation_markdown(
        &sims,
        &testbeds,
        opts.skip_testbed,
        command,
        out,
        evaluation_md.parent().unwrap_or(Path::new(".")),
    );
    std::fs::write(evaluation_md, md).map_err(|e| format!("{}: {e}", evaluation_md.display()))?;
    eprintln!(
        "wrote {} ({:.1} s wall time in all)",
        evaluation_md.display(),
        all_started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Whether `name` is a locality baseline: `evaluate all` leaves them out
/// of the testbed scenarios whose Redis workers hold every key (they have
/// nothing to find there, and each arm costs the testbed about 13 s).
fn is_locality_baseline(name: &str) -> bool {
    crate::arms::spec(name).is_some_and(|a| a.class == crate::arms::Class::LocalityBaseline)
}

/// Arms `evaluate all` runs in the simulator only, to hold its run time:
/// `round-robin` and `random` (in no target; the simulator shows them on
/// every scenario) and `model-retrained` (in no testbed target; its
/// testbed run trains first and costs two arms' time). `evaluate testbed
/// --policies` still runs them.
pub const SIM_ONLY_IN_ALL: [&str; 3] = ["round-robin", "random", "model-retrained"];

/// The arms of `policies` that the testbed runs on `scenario` in
/// `evaluate all` (`many-routers`: only its own arms, the embedded
/// balancer and the baselines it is checked against).
fn testbed_policies(policies: &[String], scenario: &str) -> Vec<String> {
    let caches = scenario == crate::testbed::cache::NAME;
    let many = scenario == crate::testbed::many_routers::NAME;
    policies
        .iter()
        .filter(|p| {
            (!many || crate::testbed::many_routers::ARMS.contains(&p.as_str()))
                && !SIM_ONLY.contains(&p.as_str())
                && !SIM_ONLY_IN_ALL.contains(&p.as_str())
                && (caches || !is_locality_baseline(p))
        })
        .cloned()
        .collect()
}

/// One simulator scenario on one seed; prints its wall time.
fn run_one_sim(
    opts: &AllOptions,
    name: &str,
    seed: u64,
    retrained: &Arc<RetrainCache>,
) -> Result<ScenarioResults, String> {
    let started = Instant::now();
    let mut o = SimOptions::new(name);
    o.retrain_cache = Some(Arc::clone(retrained));
    o.policies.clone_from(&opts.policies);
    o.seed = seed;
    o.duration_s = opts.duration_s;
    o.log_dir.clone_from(&opts.log_dir);
    let r = run_sim(&o)?;
    eprintln!(
        "sim {name} seed {seed}: {:.1} s wall time",
        started.elapsed().as_secs_f64()
    );
    Ok(r)
}

/// Every simulator scenario on every seed, `opts.jobs` runs at a time;
/// each scenario's seeds become one result ([`crate::seeds::median_of_seeds`])
/// whose files are written, in [`SCENARIOS`] order.
fn run_sims(opts: &AllOptions) -> Result<Vec<(ScenarioResults, report::Written)>, String> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    if opts.seeds.is_empty() {
        return Err("at least one seed is needed".to_owned());
    }
    let work: Vec<(&str, u64)> = SCENARIOS
        .iter()
        .flat_map(|name| opts.seeds.iter().map(move |&seed| (*name, seed)))
        .collect();
    // Run seed by seed, so that a scenario's first run has trained the
    // shared `model-retrained` model before its other seeds ask for it.
    let n_seeds = opts.seeds.len();
    let order: Vec<usize> = (0..n_seeds)
        .flat_map(|s| (0..SCENARIOS.len()).map(move |c| c * n_seeds + s))
        .collect();
    let retrained = Arc::new(RetrainCache::new(
        opts.seeds[0].wrapping_add(crate::arms::model::RETRAIN_SEED_OFFSET),
    ));
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Result<ScenarioResults, String>>>> =
        work.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..opts.jobs.clamp(1, work.len()) {
            scope.spawn(|| {
                while let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let (name, seed) = work[i];
                    let r = run_one_sim(opts, name, seed, &retrained);
                    *slots[i]
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(r);
                }
            });
        }
    });
    let mut results = slots.into_iter().zip(&work).map(|(slot, (name, seed))| {
        slot.into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .unwrap_or_else(|| Err(format!("sim {name} seed {seed}: not run")))
    });
    let mut out = Vec::new();
    for name in SCENARIOS {
        let runs = results
            .by_ref()
            .take(opts.seeds.len())
            .collect::<Result<Vec<_>, String>>()?;
        let r = crate::seeds::median_of_seeds(&opts.seeds, runs)?;
        let dir = opts.out.join("sim").join(name);
        let seeds: Vec<String> = opts.seeds.iter().map(u64::to_string).collect();
        let w = report::write_scenario(
            &dir,
            &r,
            &format!(
                "evaluate sim --scenario {name} --policies {} --seed {{{}}} --duration-s {} (one run per seed; each row is the arm's median seed)",
                opts.policies.join(","),
                seeds.join(","),
                opts.duration_s,
            ),
        )?;
        out.push((r, w));
    }
    Ok(out)
}

fn rel(p: &Path, base: &Path) -> String {
    let base = if base.as_os_str().is_empty() {
        Path::new(".")
    } else {
        base
    };
    let p_abs = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let b_abs = std::fs::canonicalize(base).unwrap_or_else(|_| base.to_path_buf());
    p_abs
        .strip_prefix(&b_abs)
        .map_or_else(|_| p.display().to_string(), |r| r.display().to_string())
}

fn target_line(s: &mut String, t: &TargetCheck) {
    let _ = writeln!(
        s,
        "- **{}** — {}\n  - measured: {}",
        if t.met { "MET" } else { "MISSED" },
        t.target,
        t.measured
    );
}

/// The text of EVALUATION.md.
pub fn evaluation_markdown(
    sims: &[(ScenarioResults, report::Written)],
    testbeds: &[TestbedRun],
    skip_testbed: bool,
    command: &str,
    out: &Path,
    base: &Path,
) -> String {
    let mut s = String::from("# Evaluation: does scoring cut tail latency?\n\n");
    let cal = crate::calibration::HttpScoreCalibration::shipped();
    let emb = crate::embedded_calibration::EmbeddedPickCalibration::shipped();
    let sc = crate::scenario::Scenario::default();
    let seeds = sims
        .first()
        .map(|(r, _)| {
            if r.seeds.is_empty() {
                vec![r.seed]
            } else {
                r.seeds.clone()
            }
        })
        .unwrap_or_default();
    let seed_list: Vec<String> = seeds.iter().map(u64::to_string).collect();
    let tuned: Vec<String> = seeds
        .iter()
        .filter(|&&x| crate::seeds::is_tuning_or_training(x))
        .map(u64::to_string)
        .collect();
    let _ = writeln!(
        s,
        "Generated by `{command}` (release build: `cargo run --release -p evaluation --bin evaluate -- all` from the repository root, on the shared 2-core machine). Every number below comes from that one run; \
         per-scenario `results.json`, `report.md` and plots are under `{results}/`.\n\n\
         **What each arm pays and sees.** A baseline decides inside the router (as a sidecar does): its pick costs nothing and it learns each of its own outcomes at once. \
         A service arm pays for its decision as a router calling the service does. In the simulator each pick is a `POST /v1/score` to a simulated scorer \
         with {cores} cores and one FIFO queue shared by every router: a {rtt:.0} µs network round trip plus an in-service time drawn from the calibration \
         `{cal_path}` (measured {date} on {host}, commit {commit}, {samples} calls at one connection: score call p50 {p50:.0} µs, p99 {p99:.0} µs; \
         `/healthz` round trip {rtt:.0} µs; in-service p50 {is50:.0} µs, p99 {is99:.0} µs). The request reaches its worker only when the answer is back, and its latency \
         counts from its arrival at the router. Outcomes reach the service in batches every {flush} ms (or {batch} outcomes) plus half a round trip; \
         telemetry {tele} ms after the snapshot. Every one of these is a scenario key (docs/evaluation.md). \
         `service-embedded` makes no call: each router links the balancer library (`scorer-balancer`) and decides in-process, with the shipped configuration and model; \
         each pick holds its request for a time drawn from `{emb_path}` (measured {emb_date}, commit {emb_commit}, {emb_samples} picks of 16 candidates with the model: \
         p50 {emb50:.1} µs, p99 {emb99:.1} µs); its outcomes reach it at once; telemetry reaches it through the service's view stream \
         (the delay above, then a 5 ms coalescing window and half a round trip); with several routers each reports its outstanding picks every 5 ms \
         and its view stream carries the others' load every 5 ms when it changed, with its age and the number of routers counted, half a round trip after \
         it left the service; each router's two clocks run at their own random phase. On the testbed it follows the real service's `GET /v1/view`. In the testbed the service is a real server over HTTP on loopback, configured as off loopback: its agent, router and admin roles have fresh tokens each run, which the testbed's router and telemetry agent send.\n\n\
         **Seeds.** Each simulator scenario runs on seeds {seed_list}; each row is the arm's median-seed run by p99, with the lowest–highest p99 over the seeds in parentheses, and targets are judged on those rows. \
         The defaults were tuned on seeds 1–10 and the shipped model trained on seeds 12–21 (`model-retrained` trains once per scenario, on the first seed + {offset}, and its runs on every seed share that model); {tuned_note}\n\n\
         Policies: `round-robin`, `random`, `p2c-least-request` (Envoy's default), `p2c-peak-ewma` \
         (Linkerd/Finagle, decaying on every read as tower does), `least-request-all` (HAProxy `leastconn`, NGINX `least_conn`) and `envoy` \
         (P2C least-request with Envoy's outlier detection at its defaults), and the locality baselines `hash-bounded` (HAProxy `hash-type consistent` \
         with `hash-balance-factor 125`), `cache-aware` (SGLang's cache-aware router) and `kv-cost` (Dynamo's KV router cost, approximate mode) \
         are implemented in the harness from their published descriptions with \
         their published defaults; the testbed runs the locality baselines only where its workers cache. \
         `oracle` knows every worker's true queue, speed, fault state and cache contents, picks the shortest expected delay and pays nothing: \
         the physical-limit anchor (simulator only). `service` is the service exactly as users run it: \
         `scorer_engine::Engine` with the default configuration, no selection policy in the score \
         request (so the configured default, `{default_policy}`, selects) and the shipped default \
         model (`models/default`) in its scoring path; `service-rules` is the same with the model \
         off. `model-retrained` is the service as shipped with a \
         model retrained by the trainer library on this harness's own `{logging}` decision logs \
         (same scenario, held-out seed), so that `model-retrained` vs \
         `{logging}` is what a model trained on the service's own logs adds. In the simulator \
         the arms with a model run with an inference budget of {budget} µs so that wall-clock \
         inference time never changes a simulated run; the in-service time they pay is the calibrated one. \
         The testbed runs them over HTTP with the service's \
         default budget (real wall-clock misses fall back and are counted in `model.fallbacks`); \
         its `model-retrained` trains on a `{logging}` testbed run with a decision log on the \
         held-out seed. In the `many-routers` scenarios each baseline runs one independent instance per router \
         (as a sidecar does), the service arms share one scorer whose queue every router's calls wait in, \
         and `service-embedded` runs one balancer per router, which learns the others' load, with its age, \
         and, where workers cache, the keys they routed, from the view stream. \
         The testbed's `many-routers` runs {tb_routers} real load generators at once against the same Redis workers, \
         each with its own connections, random streams and router token: in `service-embedded` each embeds its own \
         balancer, which follows the real service's `GET /v1/view` and reports its outstanding picks (`POST /v1/router/load`); \
         each baseline router counts only its own requests. Herding there counts, per 5 ms from the common start, \
         the distinct routers whose picks went to the same worker.\n",
        default_policy = scorer_engine::config::Config::default()
            .selection
            .default_policy,
        logging = crate::arms::model::RETRAIN_LOGGING_ARM,
        tb_routers = crate::testbed::many_routers::DEFAULT_ROUTERS,
        offset = crate::arms::model::RETRAIN_SEED_OFFSET,
        budget = crate::arms::model::SIM_BUDGET_US,
        results = rel(out, base),
        cores = sc.scorer_cores,
        rtt = sc.scorer_round_trip_us,
        cal_path = crate::calibration::SHIPPED_PATH,
        emb_path = crate::embedded_calibration::SHIPPED_PATH,
        emb_date = emb.date,
        emb_commit = emb.commit,
        emb_samples = emb.samples,
        emb50 = emb.pick_at_us(0.5),
        emb99 = emb.pick_at_us(0.99),
        date = cal.date,
        host = cal.host,
        commit = cal.commit,
        samples = cal.samples,
        p50 = cal.score_p50_us,
        p99 = cal.score_p99_us,
        is50 = cal.quantile_us(0.5),
        is99 = cal.quantile_us(0.99),
        flush = sc.feedback_flush_ms,
        batch = sc.feedback_batch_max,
        tele = sc.telemetry_delay_ms,
        seed_list = seed_list.join(", "),
        tuned_note = if tuned.is_empty() {
            "none of the reported seeds was used for either.".to_owned()
        } else {
            format!(
                "**seeds {} of this run were used for tuning or training: not an evaluation.**",
                tuned.join(", ")
            )
        },
    );
    s.push_str("## Targets\n\n");
    s.push_str(
        "Each target compares arms of this run. \"The best of\" the baselines is the one with \
         the lowest p99; \"errors\" are requests failed after all retries; drain, peak share on \
         return and oscillations are defined under the tables.\n\n",
    );
    let sim_refs: Vec<&ScenarioResults> = sims.iter().map(|(r, _)| r).collect();
    for t in targets::sim_targets(&sim_refs) {
        target_line(&mut s, &t);
    }
    if let Some(anchor) = targets::oracle_anchor(&sim_refs) {
        let _ = writeln!(
            s,
            "- **ANCHOR** — every `service*` arm's p99 as a ratio to the `oracle`'s (reported, not judged)\n  - measured: {anchor}"
        );
    }
    if skip_testbed {
        s.push_str("- **NOT RUN** — testbed targets (skipped with --skip-testbed)\n");
    }
    for (name, run) in testbeds {
        match run {
            Ok((r, _)) => {
                // With several routers the check is the embedded arm's
                // (below); the central `service` arm is not among its arms.
                if r.routers <= 1 {
                    target_line(&mut s, &targets::testbed_service_target(r));
                }
                if name == "pause" {
                    target_line(&mut s, &targets::testbed_pause_target(r));
                }
                if r.policies.iter().any(|p| p.cache.is_some()) {
                    target_line(&mut s, &targets::testbed_cache_target(r));
                }
                if name == crate::testbed::drain::DRAIN {
                    target_line(
                        &mut s,
                        &targets::operator_drain_target(
                            r,
                            "drain (testbed)",
                            TESTBED_REPORT_INTERVAL_MS,
                        ),
                    );
                }
            }
            Err(e) => {
                let _ = writeln!(s, "- **NOT RUN** — testbed {name} targets: {e}");
            }
        }
    }
    let testbed_refs: Vec<&ScenarioResults> = testbeds
        .iter()
        .filter_map(|(_, run)| run.as_ref().ok().map(|(r, _)| r))
        .collect();
    for t in targets::embedded_targets(&sim_refs, &testbed_refs) {
        target_line(&mut s, &t);
    }
    s.push_str("\n## Simulator scenarios\n\n");
    for (r, w) in sims {
        let routers = if r.routers > 1 {
            format!(", {} independent routers", r.routers)
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "### {}\n\n{} ({} workers{routers}, {:.0} s, {}, load {:.0}%)\n",
            r.scenario,
            r.description,
            r.workers,
            r.duration_s,
            if r.seeds.is_empty() {
                format!("seed {}", r.seed)
            } else {
                let list: Vec<String> = r.seeds.iter().map(u64::to_string).collect();
                format!("median of seeds {}", list.join(", "))
            },
            r.load * 100.0
        );
        s.push_str(&report::table_with_columns(&r.policies));
        s.push('\n');
        let notes = report::model_notes(&r.policies)
            + &crate::self_check_series::self_check_notes(&r.policies);
        if !notes.is_empty() {
            s.push_str(&notes);
            s.push('\n');
        }
        for p in &w.plots {
            let _ = writeln!(s, "![{}]({})", rel(p, base), rel(p, base));
        }
        s.push('\n');
    }
    s.push_str(ANALYSIS);
    s.push_str("## Testbed\n\n");
    if skip_testbed {
        s.push_str("Skipped.\n");
    }
    for (name, run) in testbeds {
        let _ = writeln!(s, "### {name}\n");
        match run {
            Ok((r, w)) => {
                let _ = writeln!(s, "{}\n", r.description);
                s.push_str(&report::table_with_columns(&r.policies));
                s.push('\n');
                let notes = report::model_notes(&r.policies)
                    + &report::router_notes(&r.policies)
                    + &crate::testbed::cache::notes(&r.policies);
                if !notes.is_empty() {
                    s.push_str(&notes);
                    s.push('\n');
                }
                for p in &w.plots {
                    let _ = writeln!(s, "![{}]({})", rel(p, base), rel(p, base));
                }
                s.push('\n');
            }
            Err(e) => {
                let _ = writeln!(s, "Not run: {e}\n");
            }
        }
    }
    s
}

/// The diagnosis under the simulator tables, written from the evaluation
/// seeds' run and the cost-by-cost runs on a tuning seed.
const ANALYSIS: &str = include_str!("diagnosis.md");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_testbed_runs_the_locality_baselines_only_where_workers_cache() {
        let all: Vec<String> = ALL_POLICIES.iter().map(|s| (*s).to_owned()).collect();
        let pause = testbed_policies(&all, "pause");
        for name in [
            "oracle",
            "round-robin",
            "random",
            "model-retrained",
            "hash-bounded",
        ] {
            assert!(!pause.iter().any(|p| p == name), "{name} on pause");
        }
        assert!(pause.iter().any(|p| p == "service-embedded"));
        let cache = testbed_policies(&all, crate::testbed::cache::NAME);
        for name in [
            "hash-bounded",
            "cache-aware",
            "kv-cost",
            "least-request-all",
        ] {
            assert!(cache.iter().any(|p| p == name), "{name} on cache");
        }
        assert!(
            !cache
                .iter()
                .any(|p| p == "oracle" || p == "model-retrained")
        );
        let mut many = testbed_policies(&all, crate::testbed::many_routers::NAME);
        many.sort();
        let mut arms = crate::testbed::many_routers::ARMS.map(str::to_owned);
        arms.sort();
        assert_eq!(many, arms);
    }
}
