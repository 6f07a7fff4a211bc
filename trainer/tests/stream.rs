//! The streaming reader: the join across files, the memory budget, and the
//! sample's card fields.

mod common;

use common::{TempDir, largest_row_group, synth};
use scorer_log::naming::final_path;
use scorer_log::{LogKind, decisions_batch, outcomes_batch};
use scorer_model::read_card;
use trainer::TrainerError;
use trainer::budget::{DEFAULT_MEMORY_BUDGET_BYTES, RUNTIME_RESERVE_BYTES, window_bytes};
use trainer::dataset::{Labelled, TargetRule, load_logs};
use trainer::pipeline::{TrainOptions, run_train};
use trainer::progress::Progress;
use trainer::sample::SampleSpec;
use trainer::stream::{StreamOptions, stream_labelled};
use trainer::synth::{Synth, SynthConfig, write_file};
use trainer::train::TrainParams;

const T0: u64 = 1_764_000_000_000;

fn opts(budget: u64, sample: Option<SampleSpec>) -> StreamOptions {
    StreamOptions {
        memory_budget_bytes: budget,
        valid_fraction: 0.2,
        sample,
        spill_dir: None,
        window: None,
    }
}

fn same_rows(a: &Labelled, b: &Labelled) {
    assert_eq!(a.len(), b.len());
    assert_eq!(a.features, b.features);
    assert_eq!(a.targets, b.targets);
    assert_eq!(a.weights, b.weights);
    assert_eq!(a.slow, b.slow);
    assert_eq!(a.latency_ms, b.latency_ms);
    assert_eq!(a.ts_ms, b.ts_ms);
    assert_eq!(a.rule_score, b.rule_score);
}

#[test]
fn outcomes_in_a_later_file_than_their_decision_still_join_and_the_rows_are_the_in_memory_paths() {
    let mut synth = Synth::new(SynthConfig::default()).unwrap();
    let (mut ds, mut os) = (Vec::new(), Vec::new());
    for _ in 0..1_200 {
        let (d, o) = synth.next_decision().unwrap();
        ds.push(d);
        os.extend(o);
    }
    let tmp = TempDir::new("stream-join");
    let dir = tmp.path();
    // Two decisions files; the outcomes of the first file's last 300
    // decisions arrive in the second outcomes file, after the second
    // decisions file opened. One outcome is reported twice: the later wins.
    let (d1, d2) = ds.split_at(600);
    let late_from = d1[300].decision_id.clone();
    let split = os.iter().position(|o| o.decision_id == late_from).unwrap();
    let (o1, o2) = os.split_at(split);
    let mut o2 = o2.to_vec();
    let mut retry = o1[0].clone();
    retry.latency_ms *= 3.0;
    o2.push(retry.clone());
    // Another credential's failed day-long outcome under decision 1's id
    // joins nothing: an outcome joins only its own caller's decision.
    let mut forged = o1[1].clone();
    assert!(forged.caller.is_none());
    forged.caller = Some(std::sync::Arc::from("edge-2"));
    (forged.latency_ms, forged.success) = (86_400_000.0, false);
    o2.push(forged);
    let write =
        |kind, at: u64, batch| write_file(&final_path(dir, kind, at, 1), vec![batch]).unwrap();
    write(LogKind::Decisions, T0, decisions_batch(d1).unwrap());
    write(LogKind::Outcomes, T0, outcomes_batch(o1).unwrap());
    write(
        LogKind::Decisions,
        T0 + 60_000,
        decisions_batch(d2).unwrap(),
    );
    write(LogKind::Outcomes, T0 + 60_000, outcomes_batch(&o2).unwrap());

    let rule = TargetRule::default();
    let dirs = [dir.to_path_buf()];
    let s = stream_labelled(
        &dirs,
        &rule,
        &opts(DEFAULT_MEMORY_BUDGET_BYTES, None),
        Progress::hidden(),
    )
    .unwrap();
    let labelled = s.train.len() + s.valid.len();
    assert_eq!(labelled, os.len(), "every outcome joins, the late ones too");
    assert_eq!(s.report.outcome_rows, os.len() + 2);
    assert_eq!(s.report.outcome_keys, os.len() + 1);
    assert!(
        s.train
            .latency_ms
            .iter()
            .chain(&s.valid.latency_ms)
            .all(|&l| l < 86_400_000.0)
    );
    assert_eq!(s.report.decision_rows, 1_200 * 4);
    assert_eq!(s.report.decision_passes, 1);
    let retried = s
        .train
        .latency_ms
        .iter()
        .zip(&s.train.ts_ms)
        .find(|(_, ts)| **ts == ds[0].ts_ms)
        .map(|(l, _)| *l);
    let censored = rule.censored_latency_ms(
        &ds[0].candidates.iter().find(|c| c.picked).unwrap().features,
        retry.latency_ms,
        retry.success,
    );
    assert_eq!(
        retried,
        Some(censored),
        "the later report of an outcome wins"
    );

    // The in-memory path (the whole joined table) gives the same rows.
    let table = load_logs(&dirs, |_, _, _| {}).unwrap();
    let (train, valid) = table.labelled(&rule).split_by_time(0.2).unwrap();
    same_rows(&s.train, &train);
    same_rows(&s.valid, &valid);
    assert_eq!(s.train.counts, train.counts);
}

#[test]
fn a_budget_too_small_for_a_row_group_or_for_the_rows_is_refused_naming_both_sizes() {
    let tmp = TempDir::new("stream-budget");
    synth(tmp.path(), 3_000, 4);
    let dirs = [tmp.path().to_path_buf()];
    let largest = largest_row_group(&dirs);
    let rule = TargetRule::default();

    let reserve = window_bytes(largest) + RUNTIME_RESERVE_BYTES;
    let e =
        stream_labelled(&dirs, &rule, &opts(reserve - 1, None), Progress::hidden()).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, TrainerError::MemoryBudget(_)), "{msg}");
    assert!(
        msg.contains("too small to read even one row group"),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("{} bytes", reserve - 1)),
        "the budget: {msg}"
    );
    assert!(
        msg.contains(&format!("{largest} bytes")),
        "the row group: {msg}"
    );
    assert!(msg.contains("decisions-"), "the file: {msg}");

    // Room for the validation rows and the map, not for every row: the
    // training rows go to disk, and the rows are the in-memory path's.
    let table = load_logs(&dirs, |_, _, _| {}).unwrap();
    let (train, valid) = table.labelled(&rule).split_by_time(0.2).unwrap();
    let mut spilled = stream_labelled(
        &dirs,
        &rule,
        &opts(reserve + 1_000_000, None),
        Progress::hidden(),
    )
    .unwrap();
    let file = spilled
        .spilled
        .as_ref()
        .expect("the training rows went to disk");
    assert_eq!(file.rows, train.len());
    assert_eq!(spilled.report.spilled_rows, train.len());
    assert_eq!(
        spilled.report.decision_passes, 2,
        "a first pass finds the time cut"
    );
    let text = std::fs::read_to_string(&file.path).unwrap();
    let first: Vec<f64> = text
        .lines()
        .next()
        .unwrap()
        .split('\t')
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(first.len(), 1 + 42);
    assert_eq!(first[0], f64::from(train.targets[0]));
    assert_eq!(
        &first[1..],
        train
            .row(0)
            .iter()
            .map(|x| f64::from(*x))
            .collect::<Vec<_>>()
    );
    let weights = std::fs::read_to_string(&file.weights).unwrap();
    let w0: f64 = weights.lines().next().unwrap().parse().unwrap();
    assert_eq!(w0, f64::from(train.weights[0]));
    assert!(spilled.valid.is_empty(), "parked while LightGBM trains");
    let parked = spilled.parked.take().expect("validation rows parked");
    same_rows(&parked.read(valid.counts).unwrap(), &valid);
    same_rows(&spilled.train, &train);
    assert!(spilled.report.peak_counted_bytes <= reserve + 1_000_000);

    // Not even the validation rows beside the map: refused, saying what to do.
    let e = stream_labelled(
        &dirs,
        &rule,
        &opts(reserve + 300_000, None),
        Progress::hidden(),
    )
    .unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, TrainerError::MemoryBudget(_)), "{msg}");
    assert!(
        msg.contains("even with the") && msg.contains("--valid-fraction"),
        "{msg}"
    );

    // A sample too big for the budget: refused before the long read,
    // naming a sample that fits, which then does.
    let budget = reserve + 500_000;
    let e = stream_labelled(
        &dirs,
        &rule,
        &opts(budget, Some(SampleSpec::Fraction(1.0))),
        Progress::hidden(),
    )
    .unwrap_err();
    let msg = e.to_string();
    let fits: u64 = msg
        .split("--sample ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("names a sample that fits: {msg}"));
    let sampled = stream_labelled(
        &dirs,
        &rule,
        &opts(budget, Some(SampleSpec::Rows(fits))),
        Progress::hidden(),
    )
    .unwrap();
    assert_eq!(sampled.train.len() as u64, fits);
    assert!(sampled.report.peak_counted_bytes <= budget);

    let ok = stream_labelled(&dirs, &rule, &opts(128 << 20, None), Progress::hidden()).unwrap();
    assert!(ok.spilled.is_none());
    assert!(ok.report.peak_counted_bytes > ok.train.len() as u64 * 201);
}

#[test]
fn a_sample_keeps_the_share_of_training_rows_validates_on_the_whole_window_and_says_so_in_the_card()
{
    let tmp = TempDir::new("stream-sample");
    let logs = tmp.join("logs");
    synth(&logs, 5_000, 9);
    let train_opts = |out: &str, sample| TrainOptions {
        logs: vec![logs.clone()],
        out: tmp.join(out),
        params: TrainParams {
            num_trees: 10,
            ..TrainParams::default()
        },
        target: TargetRule::default(),
        valid_fraction: 0.2,
        memory_budget_bytes: DEFAULT_MEMORY_BUDGET_BYTES,
        sample,
        network: None,
        spill_dir: None,
    };
    let full = run_train(&train_opts("full", None), Progress::hidden()).unwrap();
    let half = run_train(
        &train_opts("half", Some(SampleSpec::Fraction(0.5))),
        Progress::hidden(),
    )
    .unwrap();
    assert_eq!(
        half.valid_rows, full.valid_rows,
        "validation is never sampled"
    );
    assert_eq!(half.train_rows, full.train_rows / 2);
    assert_eq!(
        half.counts, full.counts,
        "the counts are of everything read"
    );

    let card = read_card(&tmp.join("half")).unwrap();
    let s = &card.details["training_data"]["sample"];
    assert_eq!(s["requested"]["kind"], "fraction");
    assert_eq!(s["requested"]["value"], 0.5);
    assert_eq!(s["fraction"], 0.5);
    assert_eq!(s["train_rows_before"], full.train_rows);
    assert_eq!(s["train_rows_kept"], half.train_rows);
    assert!(s["method"].as_str().unwrap().contains("systematic"));
    assert_eq!(
        card.details["training_data"]["reader"]["decision_passes"],
        2
    );
    assert_eq!(
        card.details["training_data"]["validation_rows"],
        full.valid_rows
    );
    let full_card = read_card(&tmp.join("full")).unwrap();
    assert!(full_card.details["training_data"]["sample"].is_null());

    let capped = run_train(
        &train_opts("capped", Some(SampleSpec::Rows(1_000))),
        Progress::hidden(),
    )
    .unwrap();
    assert_eq!(capped.train_rows, 1_000);
    assert_eq!(capped.valid_rows, full.valid_rows);
}

#[test]
fn a_model_trains_from_the_spill_file_about_as_well_as_from_memory() {
    let tmp = TempDir::new("stream-spill-train");
    let logs = tmp.join("logs");
    synth(&logs, 3_000, 4);
    let budget = window_bytes(largest_row_group(std::slice::from_ref(&logs)))
        + RUNTIME_RESERVE_BYTES
        + 850_000;
    let train_opts = |out: &str, memory_budget_bytes| TrainOptions {
        logs: vec![logs.clone()],
        out: tmp.join(out),
        params: TrainParams {
            num_trees: 20,
            ..TrainParams::default()
        },
        target: TargetRule::default(),
        valid_fraction: 0.2,
        memory_budget_bytes,
        sample: None,
        network: None,
        spill_dir: Some(tmp.path().to_path_buf()),
    };
    let memory = run_train(
        &train_opts("memory", DEFAULT_MEMORY_BUDGET_BYTES),
        Progress::hidden(),
    )
    .unwrap();
    let disk = run_train(&train_opts("disk", budget), Progress::hidden()).unwrap();
    assert_eq!(disk.train_rows, memory.train_rows);
    assert_eq!(disk.valid_rows, memory.valid_rows);
    let card = read_card(&tmp.join("disk")).unwrap();
    let reader = &card.details["training_data"]["reader"];
    assert_eq!(reader["spilled_rows"], memory.train_rows);
    assert!(
        reader["lightgbm_dataset"]["from"]
            .as_str()
            .unwrap()
            .contains("two rounds")
    );
    assert_eq!(reader["lightgbm_dataset"]["params"]["two_round"], true);
    let r2 = |s: &trainer::pipeline::TrainSummary| s.metrics.model.r2.unwrap();
    assert!(r2(&memory) > 0.2, "{}", r2(&memory));
    assert!(
        (r2(&disk) - r2(&memory)).abs() < 0.02,
        "disk {} memory {}",
        r2(&disk),
        r2(&memory)
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("trainer-rows-"))
        .collect();
    assert!(left.is_empty(), "the spill file is deleted after training");
}

#[test]
fn a_window_keeps_the_same_rows_in_memory_and_through_the_time_cut() {
    use trainer::window::{Window, keep_window};
    let tmp = TempDir::new("stream-window");
    synth(tmp.path(), 10_000, 5);
    let dirs = [tmp.path().to_path_buf()];
    let rule = TargetRule::default();
    let all = load_logs(&dirs, |_, _, _| {}).unwrap().labelled(&rule);
    let since = all.ts_ms[all.len() / 2];
    for window in [Window::Latest(3_000), Window::Since { ts_ms: since }] {
        let (train, valid) = keep_window(all.clone(), &window)
            .split_by_time(0.2)
            .unwrap();
        // In memory, and through the time cut's first pass (a sample of
        // every training row).
        for sample in [None, Some("1".parse::<SampleSpec>().unwrap())] {
            let s = stream_labelled(
                &dirs,
                &rule,
                &StreamOptions {
                    window: Some(window),
                    ..opts(DEFAULT_MEMORY_BUDGET_BYTES, sample)
                },
                Progress::hidden(),
            )
            .unwrap();
            same_rows(&s.train, &train);
            same_rows(&s.valid, &valid);
            if let Window::Latest(n) = window {
                assert_eq!(s.train.len() + s.valid.len(), n);
                // 2 500 decisions a file: only the newest two are read.
                assert_eq!(s.report.decision_files.len(), 2, "{sample:?}");
            } else {
                assert_eq!(s.report.decision_files.len(), 4);
                assert!(s.train.ts_ms.iter().all(|&t| t >= since));
            }
        }
    }
}
