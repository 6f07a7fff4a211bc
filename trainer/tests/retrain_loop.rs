//! `trainer loop` end to end on synthetic logs: a candidate trained on
//! shuffled targets is never promoted; a candidate trained on logs with a
//! learnable signal is promoted over a weak served model, published whole
//! and served through the admin API (a local HTTP server stands in for the
//! service); and the admin calls themselves.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::Duration;

use common::{TempDir, synth};
use scorer_client::Credentials;
use trainer::compare::CompareOptions;
use trainer::gate::GateConfig;
use trainer::pipeline::{TrainExtras, TrainOptions, run_train_with};
use trainer::progress::Progress;
use trainer::promote::{AdminClient, MODEL_FILES, STAGING_PREFIX};
use trainer::retrain_loop::{Action, Clock, LoopOptions, Round, Serve, WindowSpec, run_loop};
use trainer::train::TrainParams;

/// A clock that never waits: every round starts at once.
struct Immediate {
    waits: usize,
}

impl Clock for Immediate {
    fn now_ms(&self) -> i64 {
        trainer::synth::SYNTH_START_MS + 3_600_000
    }

    fn wait(&mut self, _: Duration) -> bool {
        self.waits += 1;
        true
    }
}

fn train_options(logs: &Path) -> TrainOptions {
    TrainOptions {
        logs: vec![logs.to_path_buf()],
        out: PathBuf::new(),
        params: TrainParams {
            num_trees: 40,
            ..TrainParams::default()
        },
        target: Default::default(),
        valid_fraction: 0.3,
        memory_budget_bytes: 1 << 30,
        sample: None,
        network: None,
        spill_dir: None,
    }
}

fn loop_options(logs: &Path, models: &Path, current: Option<PathBuf>) -> LoopOptions {
    LoopOptions {
        train: train_options(logs),
        models_dir: models.to_path_buf(),
        current,
        previous: None,
        window: WindowSpec::Decisions(8_000),
        gate: GateConfig {
            min_decisions: 1_000,
            min_gain_ms: 0.05,
        },
        compare: CompareOptions {
            bootstrap: 300,
            ..CompareOptions::default()
        },
        forbid_promotion: false,
        max_rounds: Some(2),
        every: Duration::from_secs(300),
        shuffle_targets_seed: None,
    }
}

fn run(opts: &LoopOptions, admin: Option<&AdminClient>) -> Vec<Round> {
    let stop = AtomicBool::new(false);
    let mut clock = Immediate { waits: 0 };
    let rounds = run_loop(
        opts,
        admin.map(|a| a as &dyn Serve),
        &mut clock,
        &stop,
        Progress::hidden(),
        &mut |r| println!("{}", r.line),
    )
    .unwrap();
    assert_eq!(
        clock.waits,
        rounds.len() - 1,
        "no wait after the last round"
    );
    rounds
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_candidate_trained_on_shuffled_targets_is_never_promoted() {
    let tmp = TempDir::new("loop-shuffled");
    let logs = tmp.join("logs");
    synth(&logs, 10_000, 7);
    let models = tmp.join("models");
    let opts = LoopOptions {
        shuffle_targets_seed: Some(3),
        ..loop_options(&logs, &models, None)
    };
    let rounds = run(&opts, None);
    assert_eq!(rounds.len(), 2);
    for r in &rounds {
        assert_eq!(r.action, Action::Held, "{}", r.line);
        assert!(r.line.contains("held rules against loop-"), "{}", r.line);
    }
    // Nothing published, no staging left.
    assert_eq!(entries(&models), Vec::<String>::new());
}

/// A one-connection-at-a-time HTTP server on 127.0.0.1: answers each
/// request with `status` and `{"applied": true}`, and sends the request
/// line, the authorization header and the body to the test.
fn admin_server(
    status: &'static str,
    requests: usize,
) -> (String, mpsc::Receiver<(String, String, String)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(requests) {
            let mut stream = stream.unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let (mut auth, mut length) = (String::new(), 0usize);
            loop {
                let mut h = String::new();
                reader.read_line(&mut h).unwrap();
                let h = h.trim_end();
                if h.is_empty() {
                    break;
                }
                let (name, value) = h.split_once(':').unwrap();
                match name.to_ascii_lowercase().as_str() {
                    "authorization" => auth = value.trim().to_string(),
                    "content-length" => length = value.trim().parse().unwrap(),
                    _ => {}
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let answer = r#"{"applied": true}"#;
            write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                answer.len()
            )
            .unwrap();
            tx.send((
                line.trim_end().to_string(),
                auth,
                String::from_utf8(body).unwrap(),
            ))
            .unwrap();
        }
    });
    (url, rx)
}

fn admin(url: &str) -> AdminClient {
    let credentials = Credentials::none()
        .with_token("0123456789abcdef-loop")
        .unwrap();
    AdminClient::new(url, &credentials).unwrap()
}

#[test]
fn a_candidate_with_a_learnable_signal_is_promoted_over_a_weak_model() {
    let tmp = TempDir::new("loop-good");
    let logs = tmp.join("logs");
    synth(&logs, 10_000, 7);
    // The weak served model: trained on the same logs, on shuffled targets.
    let weak = tmp.join("weak");
    run_train_with(
        &TrainOptions {
            out: weak.clone(),
            ..train_options(&logs)
        },
        &TrainExtras {
            shuffle_targets_seed: Some(3),
            ..TrainExtras::default()
        },
        Progress::hidden(),
    )
    .unwrap();
    let models = tmp.join("models");
    let (url, requests) = admin_server("200 OK", 1);
    let client = admin(&url);
    let rounds = run(&loop_options(&logs, &models, Some(weak)), Some(&client));

    let Action::Promoted { dir, version } = &rounds[0].action else {
        panic!("not promoted: {}", rounds[0].line);
    };
    assert!(
        rounds[0]
            .line
            .starts_with(&format!("round 1: promoted {version} over weak-")),
        "{}",
        rounds[0].line
    );
    // Published whole, under its version, and nothing else in the directory.
    assert_eq!(dir, &std::fs::canonicalize(models.join(version)).unwrap());
    for f in MODEL_FILES {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let card = scorer_model::read_card(dir).unwrap();
    assert_eq!(&card.model_version, version);
    trainer::validate::vet_as_service(dir).unwrap();
    assert_eq!(entries(&models), vec![version.clone()]);
    assert!(
        !entries(&models)
            .iter()
            .any(|e| e.starts_with(STAGING_PREFIX))
    );

    // The service was told to serve it.
    let (line, auth, body) = requests.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(line, "POST /v1/admin/model/promote HTTP/1.1");
    assert_eq!(auth, "Bearer 0123456789abcdef-loop");
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body, serde_json::json!({"dir": dir.to_str().unwrap()}));

    // The next round serves the promoted model: the same logs retrain the
    // same model, which gains nothing over itself.
    assert_eq!(rounds[1].action, Action::Held, "{}", rounds[1].line);
    assert!(
        rounds[1]
            .line
            .starts_with(&format!("round 2: held {version} against {version}")),
        "{}",
        rounds[1].line
    );
    // The weak model stays the rollback target, with nothing to judge on:
    // these logs hold no decision the promoted model scored.
    let weak_version = scorer_model::read_card(&tmp.join("weak"))
        .unwrap()
        .model_version;
    assert!(
        rounds[1].line.ends_with(&format!(
            "; {version} kept over {weak_version}: no DR estimate (0 decisions) for going back, too few decisions to judge"
        )),
        "{}",
        rounds[1].line
    );
}

#[test]
fn forbidden_promotion_decides_but_writes_nothing() {
    let tmp = TempDir::new("loop-forbidden");
    let logs = tmp.join("logs");
    synth(&logs, 10_000, 7);
    let models = tmp.join("models");
    let opts = LoopOptions {
        forbid_promotion: true,
        max_rounds: Some(1),
        ..loop_options(&logs, &models, None)
    };
    let rounds = run(&opts, None);
    assert_eq!(rounds[0].action, Action::WouldPromote, "{}", rounds[0].line);
    assert!(
        rounds[0].line.contains("(promotion forbidden)"),
        "{}",
        rounds[0].line
    );
    assert_eq!(entries(&models), Vec::<String>::new());
}

#[test]
fn the_admin_calls_carry_the_token_and_the_directory() {
    let (url, requests) = admin_server("200 OK", 2);
    let client = admin(&url);
    let answer = client
        .promote(Path::new("/srv/models/loop-0123abcd"))
        .unwrap();
    assert_eq!(answer, serde_json::json!({"applied": true}));
    let (line, auth, body) = requests.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(line, "POST /v1/admin/model/promote HTTP/1.1");
    assert_eq!(auth, "Bearer 0123456789abcdef-loop");
    assert_eq!(body, r#"{"dir":"/srv/models/loop-0123abcd"}"#);

    client.rollback().unwrap();
    let (line, auth, body) = requests.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(line, "POST /v1/admin/model/rollback HTTP/1.1");
    assert_eq!(auth, "Bearer 0123456789abcdef-loop");
    assert_eq!(body, "");
}

#[test]
fn a_refusal_by_the_service_is_an_error_with_its_answer() {
    let (url, _requests) = admin_server("422 Unprocessable Entity", 1);
    let e = admin(&url).rollback().unwrap_err().to_string();
    assert!(e.contains("422"), "{e}");
    assert!(e.contains(r#"{"applied": true}"#), "{e}");
    let e = AdminClient::new("localhost:8080", &Credentials::none()).unwrap_err();
    assert!(e.to_string().contains("http://host:port"), "{e}");
}

#[test]
fn a_promoted_model_that_does_worse_than_the_one_before_is_rolled_back() {
    use trainer::gate::{Hold, Rollback, decide_rollback};
    use trainer::retrain_loop::{Served, rollback_evidence};
    let tmp = TempDir::new("loop-rollback");
    let logs = tmp.join("logs");
    synth(&logs, 10_000, 7);
    let train = |name: &str, shuffle: Option<u64>| {
        let out = tmp.join(name);
        run_train_with(
            &TrainOptions {
                out: out.clone(),
                ..train_options(&logs)
            },
            &TrainExtras {
                shuffle_targets_seed: shuffle,
                ..TrainExtras::default()
            },
            Progress::hidden(),
        )
        .unwrap();
        Served::of(Some(&out)).unwrap()
    };
    let good = train("good", None);
    let bad = train("bad", Some(3));
    let opts = loop_options(&logs, &tmp.join("models"), None);
    let gate = &opts.gate;
    let rule = &opts.train.target;
    let mut table = trainer::dataset::load_logs(std::slice::from_ref(&logs), |_, _, _| {}).unwrap();
    let newest = table.decisions.len() - 3_000;

    // No decision was scored by the promoted model yet: nothing to judge.
    let e = rollback_evidence(&table, &bad, &good, rule, &opts.compare).unwrap();
    assert_eq!(e.decisions, 0);
    assert_eq!(
        decide_rollback(gate, &e),
        Rollback::Keep(Hold::TooFewDecisions)
    );

    // The newest 3 000 decisions were scored by `bad`, promoted over
    // `good`: `good` is faster on them, beyond the interval.
    for d in &mut table.decisions[newest..] {
        d.model_version = Some(bad.version.clone());
    }
    let e = rollback_evidence(&table, &bad, &good, rule, &opts.compare).unwrap();
    assert!(e.decisions > 2_500, "{e}");
    assert_eq!(decide_rollback(gate, &e), Rollback::RollBack, "{e}");

    // The other way round, `good` promoted over `bad` and serving well:
    // kept.
    for d in &mut table.decisions[newest..] {
        d.model_version = Some(good.version.clone());
    }
    let e = rollback_evidence(&table, &good, &bad, rule, &opts.compare).unwrap();
    assert!(
        matches!(decide_rollback(gate, &e), Rollback::Keep(_)),
        "{e}"
    );
}

#[test]
fn the_loop_rolls_back_through_the_service_when_the_model_before_does_better() {
    use scorer_log::naming::final_path;
    use scorer_log::{LogKind, decisions_batch, outcomes_batch};
    use trainer::synth::{Synth, SynthConfig, write_file};
    let tmp = TempDir::new("loop-rolls-back");
    let first = tmp.join("first");
    synth(&first, 10_000, 7);
    let train = |name: &str, shuffle: Option<u64>| {
        let out = tmp.join(name);
        let s = run_train_with(
            &TrainOptions {
                out: out.clone(),
                ..train_options(&first)
            },
            &TrainExtras {
                shuffle_targets_seed: shuffle,
                ..TrainExtras::default()
            },
            Progress::hidden(),
        )
        .unwrap();
        (out, s.card.model_version)
    };
    let (good, good_version) = train("good", None);
    let (bad, bad_version) = train("bad", Some(3));

    // Later logs, every decision under `bad`'s version: `bad` was
    // promoted over `good` and has served since.
    let logs = tmp.join("logs");
    let mut synth = Synth::new(SynthConfig {
        seed: 8,
        ..SynthConfig::default()
    })
    .unwrap();
    for file in 0..4u64 {
        let (mut ds, mut os) = (Vec::new(), Vec::new());
        for _ in 0..2_500 {
            let (mut d, o) = synth.next_decision().unwrap();
            d.model_version = Some(bad_version.clone());
            ds.push(d);
            os.extend(o);
        }
        let at = 1_793_491_200_000 + file * 60_000;
        let path = |kind| final_path(&logs, kind, at, 1);
        write_file(
            &path(LogKind::Decisions),
            vec![decisions_batch(&ds).unwrap()],
        )
        .unwrap();
        write_file(&path(LogKind::Outcomes), vec![outcomes_batch(&os).unwrap()]).unwrap();
    }

    let models = tmp.join("models");
    let (url, requests) = admin_server("200 OK", 1);
    let client = admin(&url);
    let opts = LoopOptions {
        previous: Some(good),
        max_rounds: Some(1),
        ..loop_options(&logs, &models, Some(bad))
    };
    let rounds = run(&opts, Some(&client));
    assert_eq!(rounds[0].action, Action::RolledBack, "{}", rounds[0].line);
    assert!(
        rounds[0].line.starts_with(&format!(
            "round 1: rolled back {bad_version} to {good_version}: DR gain "
        )),
        "{}",
        rounds[0].line
    );
    let (line, auth, body) = requests.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(line, "POST /v1/admin/model/rollback HTTP/1.1");
    assert_eq!(auth, "Bearer 0123456789abcdef-loop");
    assert_eq!(body, "");
    // Nothing promoted, nothing left behind.
    assert_eq!(entries(&models), Vec::<String>::new());

    // Without the model before, there is nothing to roll back to: the
    // round judges a candidate instead.
    let rounds = run(
        &LoopOptions {
            previous: None,
            ..opts
        },
        None,
    );
    assert_ne!(rounds[0].action, Action::RolledBack, "{}", rounds[0].line);
}

#[test]
fn a_promotion_the_service_refuses_is_reported_and_the_loop_goes_on() {
    let tmp = TempDir::new("loop-refused");
    let logs = tmp.join("logs");
    synth(&logs, 10_000, 7);
    let models = tmp.join("models");
    let (url, requests) = admin_server("422 Unprocessable Entity", 2);
    let client = admin(&url);
    let rounds = run(&loop_options(&logs, &models, None), Some(&client));
    // The rules stay served: both rounds try the same promotion again.
    for r in &rounds {
        assert_eq!(r.action, Action::Skipped, "{}", r.line);
        assert!(r.line.contains("422 Unprocessable Entity"), "{}", r.line);
        assert!(
            r.line.contains("but the service did not serve it"),
            "{}",
            r.line
        );
        let (line, _, _) = requests.recv_timeout(Duration::from_secs(30)).unwrap();
        assert_eq!(line, "POST /v1/admin/model/promote HTTP/1.1");
    }
    assert_eq!(rounds.len(), 2);
    let names = entries(&models);
    assert_eq!(names.len(), 1, "{names:?}");
}

#[test]
fn a_window_of_hours_counts_back_from_the_clock() {
    let tmp = TempDir::new("loop-hours");
    let logs = tmp.join("logs");
    synth(&logs, 10_000, 7);
    let models = tmp.join("models");
    let clock = Immediate { waits: 0 };
    // The synthetic decisions span about 205 s from SYNTH_START_MS; the
    // clock reads an hour after it, so a window of (3600 - 50) s starts
    // 50 s in: about three quarters of them.
    let hours = 3_550.0 / 3_600.0;
    let since_ms = clock.now_ms() - (hours * 3_600_000.0) as i64;
    assert_eq!(since_ms, trainer::synth::SYNTH_START_MS + 50_000);
    let opts = LoopOptions {
        window: WindowSpec::Hours(hours),
        max_rounds: Some(1),
        ..loop_options(&logs, &models, None)
    };
    let rounds = run(&opts, None);
    let Action::Promoted { dir, .. } = &rounds[0].action else {
        panic!("not promoted: {}", rounds[0].line);
    };
    let card = scorer_model::read_card(dir).unwrap();
    let data = &card.details["training_data"];
    assert_eq!(
        data["window"],
        serde_json::json!({"since": {"ts_ms": since_ms}})
    );
    let first_ts = data["train_ts_ms"][0].as_i64().unwrap();
    assert!(first_ts >= since_ms, "{first_ts} < {since_ms}");
    let rows = data["train_rows"].as_u64().unwrap() + data["validation_rows"].as_u64().unwrap();
    assert!((6_000..9_000).contains(&rows), "{rows} rows in the window");
}

#[test]
fn a_round_loads_only_the_decisions_it_judges() {
    use scorer_log::LogKind;
    use trainer::dataset::list_log_files;
    use trainer::window::{load_judged, select_decisions};
    let tmp = TempDir::new("loop-judged");
    let logs = tmp.join("logs");
    synth(&logs, 10_000, 7);
    let dirs = [logs.clone()];
    let full = trainer::dataset::load_logs(&dirs, |_, _, _| {}).unwrap();
    let mut ts: Vec<i64> = full.decisions.iter().map(|d| d.ts_ms).collect();
    ts.sort_unstable();
    let from = ts[ts.len() * 4 / 5];
    let judged = load_judged(
        &list_log_files(&dirs, LogKind::Decisions).unwrap(),
        &list_log_files(&dirs, LogKind::Outcomes).unwrap(),
        from,
        None,
    )
    .unwrap();
    let expected = select_decisions(&full, |d| d.ts_ms >= from);
    assert_eq!(judged.decisions.len(), expected.decisions.len());
    assert!(
        judged.decisions.len() <= full.decisions.len() / 4,
        "{} of {}",
        judged.decisions.len(),
        full.decisions.len()
    );
    assert_eq!(judged.features, expected.features);
    assert_eq!(judged.latency_ms, expected.latency_ms);
    assert_eq!(judged.probability, expected.probability);
}
