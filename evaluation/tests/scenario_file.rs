//! `evaluate sim --scenario-file`: the documented example parses, documents
//! every key, and runs; a file's errors name the bad key.

use std::path::Path;

use evaluation::runner::{SimOptions, run_sim};
use evaluation::scenario::Scenario;
use evaluation::scenario_file::{load, parse};

fn example_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/example.toml")
}

#[test]
fn the_example_parses_with_its_values() {
    let s = load(&example_path()).expect("example.toml");
    assert_eq!(s.name, "example-six-workers");
    assert_eq!(s.workers.len(), 6);
    assert_eq!((s.workers[2].concurrency, s.workers[3].speed), (2, 2.0));
    assert_eq!(s.routers, 2);
    assert_eq!(s.faults.len(), 2);
    assert_eq!(s.faults[0].window_ms(), Some((20_000.0, 40_000.0)));
    assert_eq!(s.duration_ms, 60_000.0);
}

#[test]
fn the_example_sets_and_documents_every_key() {
    let text = std::fs::read_to_string(example_path()).expect("read");
    let value = toml::Value::try_from(Scenario::default()).expect("to toml");
    for key in value.as_table().expect("table").keys() {
        let set = text
            .lines()
            .any(|l| l.starts_with(&format!("{key} =")) || l == format!("[[{key}]]"));
        assert!(set, "example.toml does not set `{key}`");
    }
    for kind in ["slow", "compaction", "crash", "zombie", "burst", "memtable"] {
        assert!(
            text.contains(&format!("#   {kind}:")),
            "fault kind {kind} undocumented"
        );
    }
}

#[test]
fn the_example_runs() {
    let mut sc = load(&example_path()).expect("example.toml");
    // Shortened (simulated time), faults scaled into the run.
    sc.duration_ms = 6_000.0;
    sc.faults.clear();
    let mut o = SimOptions::new("ignored");
    o.custom = Some(sc);
    o.policies = vec!["round-robin".to_owned(), "p2c-peak-ewma".to_owned()];
    let r = run_sim(&o).expect("run");
    assert_eq!(r.scenario, "example-six-workers");
    assert_eq!((r.workers, r.routers), (6, 2));
    assert!(r.policies.iter().all(|p| p.status == "ok"));
}

#[test]
fn the_lying_telemetry_scenario_runs_and_its_self_check_is_sampled() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/lying-telemetry.toml");
    let mut sc = load(&path).expect("lying-telemetry.toml");
    assert_eq!((sc.workers.len(), sc.faults.len()), (12, 12));
    // Shortened: the lie from 4 s to 8 s of 12.
    sc.duration_ms = 12_000.0;
    for f in &mut sc.faults {
        if let evaluation::scenario::Fault::Lie { from_ms, to_ms, .. } = f {
            (*from_ms, *to_ms) = (4_000.0, 8_000.0);
        }
    }
    let mut o = SimOptions::new("ignored");
    o.custom = Some(sc);
    o.policies = vec!["service-rules".to_owned()];
    let r = run_sim(&o).expect("run");
    let check = r.policies[0]
        .self_check
        .as_ref()
        .expect("a service arm's self-check");
    assert!(!check.samples.is_empty());
    assert!(
        check.min_from_fault.is_some() && check.min_before_fault.is_some(),
        "{check:?}"
    );
}

#[test]
fn errors_name_the_bad_key() {
    let e = parse("name = \"x\"\nreport_interval = 2000.0\n").unwrap_err();
    assert!(e.contains("report_interval"), "{e}");
    let e = parse("[[workers]]\nspeed = -1.0\n[[workers]]\n").unwrap_err();
    assert!(e.contains("workers[0].speed"), "{e}");
    // A bad custom scenario handed to the runner is refused there too.
    let mut o = SimOptions::new("ignored");
    o.custom = Some(Scenario {
        put_fraction: 2.0,
        ..Scenario::default()
    });
    assert!(run_sim(&o).unwrap_err().contains("put_fraction"));
}

#[test]
fn the_cache_example_sets_every_cache_key_and_runs_with_hit_rates() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/cache.toml");
    let text = std::fs::read_to_string(&path).expect("read");
    let cache = toml::Value::try_from(evaluation::scenario::CacheSpec::default()).expect("toml");
    for key in cache.as_table().expect("table").keys() {
        assert!(
            text.contains(&format!("\n{key} =")),
            "cache.toml does not set `{key}`"
        );
    }
    let mut sc = load(&path).expect("cache.toml");
    assert_eq!(sc.workers[5].cache_keys, Some(1_000));
    sc.duration_ms = 3_000.0;
    sc.hot_key = None;
    let mut o = SimOptions::new("ignored");
    o.custom = Some(sc);
    o.policies = vec!["round-robin".to_owned(), "oracle".to_owned()];
    let r = run_sim(&o).expect("run");
    for p in &r.policies {
        let c = p.cache.as_ref().expect("hit rates");
        let h = c.hit_rate.expect("GETs reached the caches");
        assert!(h > 0.0 && h < 1.0, "{}: {h}", p.name);
        assert_eq!(c.hit_rate_per_worker.len(), 6);
        assert!(c.origin_bytes >= c.origin_reads * 4_096);
    }
}

#[test]
fn a_bad_cache_key_is_named() {
    let base = "[[workers]]\n[[workers]]\n";
    for (text, key) in [
        (
            format!("{base}[cache]\nmiss_cost_ms = -1.0\n"),
            "cache.miss_cost_ms",
        ),
        (format!("{base}[cache]\npolicy = \"lfu\"\n"), "policy"),
        (format!("{base}[cache]\ncapacity = 5\n"), "capacity"),
        (
            format!("{base}[cache]\ncapacity_keys = 0\n"),
            "cache.capacity_keys",
        ),
        (
            "[[workers]]\ncache_keys = 5\n[[workers]]\n".to_owned(),
            "needs a `[cache]`",
        ),
        (format!("prefixes = 200000\n{base}"), "`prefixes`"),
        (
            format!("{base}[hot_key]\nfrom_ms = 1.0\nshare = 2.0\nsize_factor = 1.0\n"),
            "hot_key.share",
        ),
    ] {
        let e = parse(&text).unwrap_err();
        assert!(e.contains(key), "{text}: {e}");
    }
}
