//! Scenarios from TOML files (`evaluate sim --scenario-file FILE.toml`), so
//! users can evaluate their own cluster's shape.
//!
//! The file has the shape of a preset ([`Scenario`]): top-level keys for the
//! load and the client, `[[workers]]` tables (one per worker) and
//! `[[faults]]` tables (`kind` = `slow`, `compaction`, `crash`, `zombie`,
//! `burst` or `memtable`, with that fault's keys). Times are in ms, speeds and factors are
//! multipliers, fractions lie in 0..=1. A key left out takes the
//! `homogeneous` preset's value; an unknown key is an error that names it
//! (with its path, e.g. `faults[0].form_ms`). After parsing, every value is
//! checked ([`validate`]). `evaluation/scenarios/example.toml` documents
//! every key with its unit.

use std::path::Path;

use crate::scenario::{
    CacheSpec, Fault, MAX_CACHE_KEYS, MAX_DURATION_S, MAX_ROUTERS, MAX_WORKERS, Scenario,
    WorkerSpec, validate_prefixes,
};

/// Most retries per request.
pub const MAX_RETRIES: u32 = 10;

/// Read and check the scenario in `path`.
///
/// # Errors
/// The file cannot be read, a key is unknown or has the wrong type (the
/// message names it), or a value is out of range.
pub fn load(path: &Path) -> Result<Scenario, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parse and check a scenario from TOML text.
///
/// # Errors
/// As [`load`].
pub fn parse(text: &str) -> Result<Scenario, String> {
    let de = toml::Deserializer::new(text);
    let sc: Scenario = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        // toml's own message carries the line and column; the path names
        // the key even inside `[[workers]]` / `[[faults]]` tables.
        let msg = inner.message().to_owned();
        let at = inner
            .span()
            .map(|s| {
                let line = text[..s.start.min(text.len())].matches('\n').count() + 1;
                format!(" (line {line})")
            })
            .unwrap_or_default();
        if path == "." {
            format!("{msg}{at}")
        } else {
            format!("`{path}`: {msg}{at}")
        }
    })?;
    validate(&sc)?;
    Ok(sc)
}

fn positive(key: &str, v: f64) -> Result<(), String> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(format!("`{key}` must be a finite number > 0, got {v}"))
    }
}

fn fraction(key: &str, v: f64) -> Result<(), String> {
    if (0.0..=1.0).contains(&v) {
        Ok(())
    } else {
        Err(format!("`{key}` must be a fraction in 0..=1, got {v}"))
    }
}

fn window(key: &str, from_ms: f64, to_ms: f64, duration_ms: f64) -> Result<(), String> {
    if from_ms.is_finite()
        && to_ms.is_finite()
        && 0.0 <= from_ms
        && from_ms < to_ms
        && to_ms <= duration_ms
    {
        Ok(())
    } else {
        Err(format!(
            "`{key}` must lie inside the run: need 0 <= from_ms ({from_ms}) < to_ms ({to_ms}) <= duration_ms ({duration_ms})"
        ))
    }
}

/// Most cores of the simulated scorer.
pub const MAX_SCORER_CORES: usize = 1_024;
/// Longest delay a scenario may model (scorer round trip, feedback flush,
/// telemetry transport), ms.
pub const MAX_DELAY_MS: f64 = 60_000.0;

fn delay(key: &str, v: f64, max: f64) -> Result<(), String> {
    if v.is_finite() && (0.0..=max).contains(&v) {
        Ok(())
    } else {
        Err(format!(
            "`{key}` must be a finite number in 0..={max}, got {v}"
        ))
    }
}

/// The decision's cost: scorer cores 1..=[`MAX_SCORER_CORES`], delays in
/// 0..=[`MAX_DELAY_MS`], a flush interval > 0, a batch of at least 1.
fn check_decision_cost(sc: &Scenario) -> Result<(), String> {
    if !(1..=MAX_SCORER_CORES).contains(&sc.scorer_cores) {
        return Err(format!(
            "`scorer_cores` must be in 1..={MAX_SCORER_CORES}, got {}",
            sc.scorer_cores
        ));
    }
    delay(
        "scorer_round_trip_us",
        sc.scorer_round_trip_us,
        MAX_DELAY_MS * 1000.0,
    )?;
    delay("scorer_service_scale", sc.scorer_service_scale, 1_000.0)?;
    positive("feedback_flush_ms", sc.feedback_flush_ms)?;
    delay("feedback_flush_ms", sc.feedback_flush_ms, MAX_DELAY_MS)?;
    if sc.feedback_batch_max == 0 {
        return Err("`feedback_batch_max` must be at least 1".to_owned());
    }
    delay("telemetry_delay_ms", sc.telemetry_delay_ms, MAX_DELAY_MS)?;
    positive("scorer_timeout_ms", sc.scorer_timeout_ms)?;
    delay("scorer_timeout_ms", sc.scorer_timeout_ms, MAX_DELAY_MS)?;
    if !(sc.load_interval_ms.is_finite()
        && (MIN_LOAD_INTERVAL_MS..=1_000.0).contains(&sc.load_interval_ms))
    {
        return Err(format!(
            "`load_interval_ms` must be a finite number in {MIN_LOAD_INTERVAL_MS}..=1000, got {}",
            sc.load_interval_ms
        ));
    }
    Ok(())
}

/// Shortest load relay interval a scenario may ask for, ms (one event per
/// router per interval).
pub const MIN_LOAD_INTERVAL_MS: f64 = 0.05;

/// Check every value of `sc`: at least 2 and at most
/// [`MAX_WORKERS`] workers with positive speeds and concurrency ≥ 1;
/// positive load, times and costs; fractions in 0..=1; a run of
/// 1..=[`MAX_DURATION_S`] s; routers 1..=[`MAX_ROUTERS`]; fault workers in
/// range, fault windows inside the run, at most one memtable per worker.
///
/// # Errors
/// The first bad value, named by its key.
pub fn validate(sc: &Scenario) -> Result<(), String> {
    let ok_name = !sc.name.is_empty()
        && !sc.name.starts_with('.')
        && sc
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !ok_name {
        return Err(format!(
            "`name` must be non-empty ASCII letters, digits, `-`, `_` or `.` (it names the output directories), got {:?}",
            sc.name
        ));
    }
    let n = sc.workers.len();
    if !(2..=MAX_WORKERS).contains(&n) {
        return Err(format!(
            "`workers` must list 2..={MAX_WORKERS} workers, got {n}"
        ));
    }
    for (i, w) in sc.workers.iter().enumerate() {
        positive(&format!("workers[{i}].speed"), w.speed)?;
        if w.concurrency == 0 {
            return Err(format!("`workers[{i}].concurrency` must be at least 1"));
        }
        check_worker_cache(i, w, sc)?;
    }
    let max_ms = MAX_DURATION_S * 1000.0;
    if !(sc.duration_ms.is_finite() && (1_000.0..=max_ms).contains(&sc.duration_ms)) {
        return Err(format!(
            "`duration_ms` must be in 1000..={max_ms} ms, got {}",
            sc.duration_ms
        ));
    }
    positive("load", sc.load)?;
    positive("report_interval_ms", sc.report_interval_ms)?;
    positive("get_cost_ms", sc.get_cost_ms)?;
    positive("put_cost_ms", sc.put_cost_ms)?;
    fraction("put_fraction", sc.put_fraction)?;
    fraction("large_fraction", sc.large_fraction)?;
    positive("large_factor", sc.large_factor)?;
    if !(sc.sigma.is_finite() && sc.sigma >= 0.0) {
        return Err(format!(
            "`sigma` must be a finite number >= 0, got {}",
            sc.sigma
        ));
    }
    positive("timeout_ms", sc.timeout_ms)?;
    if sc.max_retries > MAX_RETRIES {
        return Err(format!(
            "`max_retries` must be at most {MAX_RETRIES}, got {}",
            sc.max_retries
        ));
    }
    if sc.keys == 0 {
        return Err("`keys` must be at least 1".to_owned());
    }
    if !(sc.zipf_s.is_finite() && sc.zipf_s >= 0.0) {
        return Err(format!(
            "`zipf_s` must be a finite number >= 0, got {}",
            sc.zipf_s
        ));
    }
    validate_prefixes(sc.prefixes, sc.prefix_zipf_s, sc.keys)?;
    if let Some(c) = &sc.cache {
        c.validate()?;
        check_total_cache(sc, c)?;
    }
    if let Some(h) = &sc.hot_key {
        h.validate(sc.duration_ms)?;
    }
    positive("window_ms", sc.window_ms)?;
    if sc.window_ms > sc.duration_ms {
        return Err(format!(
            "`window_ms` ({}) must not exceed `duration_ms` ({})",
            sc.window_ms, sc.duration_ms
        ));
    }
    if !(1..=MAX_ROUTERS).contains(&sc.routers) {
        return Err(format!(
            "`routers` must be in 1..={MAX_ROUTERS}, got {}",
            sc.routers
        ));
    }
    check_decision_cost(sc)?;
    for (i, f) in sc.faults.iter().enumerate() {
        let key = format!("faults[{i}]");
        if f.worker() >= n {
            return Err(format!(
                "`{key}.worker` must be a worker index in 0..{n}, got {}",
                f.worker()
            ));
        }
        if let Fault::Lie { as_worker, .. } = f
            && *as_worker >= n
        {
            return Err(format!(
                "`{key}.as_worker` must be a worker index in 0..{n}, got {as_worker}"
            ));
        }
        check_fault(&key, f, sc.duration_ms)?;
        let twice =
            sc.faults[..i]
                .iter()
                .any(|g| match (g.memtable_window_ms(), f.memtable_window_ms()) {
                    (Some((a0, a1)), Some((b0, b1))) => {
                        g.worker() == f.worker() && a0 < b1 && b0 < a1
                    }
                    _ => false,
                });
        if twice {
            return Err(format!(
                "`{key}`: worker {} already has a memtable fault in that time (one per worker at a time)",
                f.worker()
            ));
        }
    }
    check_drains(sc)
}

/// A worker's own cache size is 1..=[`MAX_CACHE_KEYS`] and needs a
/// scenario cache; all caches together hold at most [`MAX_CACHE_KEYS`].
fn check_worker_cache(i: usize, w: &WorkerSpec, sc: &Scenario) -> Result<(), String> {
    let Some(keys) = w.cache_keys else {
        return Ok(());
    };
    let Some(c) = &sc.cache else {
        return Err(format!(
            "`workers[{i}].cache_keys` needs a `[cache]` table (the scenario has no caches)"
        ));
    };
    if !(1..=MAX_CACHE_KEYS).contains(&keys) {
        return Err(format!(
            "`workers[{i}].cache_keys` must be in 1..={MAX_CACHE_KEYS}, got {keys}"
        ));
    }
    check_total_cache(sc, c)
}

fn check_total_cache(sc: &Scenario, c: &CacheSpec) -> Result<(), String> {
    let total: usize = sc
        .workers
        .iter()
        .map(|w| w.cache_keys.unwrap_or(c.capacity_keys))
        .fold(0usize, usize::saturating_add);
    if total > MAX_CACHE_KEYS {
        return Err(format!(
            "the workers' caches hold {total} keys in all; at most {MAX_CACHE_KEYS} (`cache.capacity_keys`, `workers[].cache_keys`)"
        ));
    }
    Ok(())
}

/// A worker is drained by one fault at a time, and one worker at least is
/// never drained: an operator cannot drain the whole pool (a proxy would
/// fail every request; the service would have no worker to pick).
fn check_drains(sc: &Scenario) -> Result<(), String> {
    let drains: Vec<(usize, usize, f64, f64)> = sc
        .faults
        .iter()
        .enumerate()
        .filter_map(|(i, f)| match *f {
            Fault::Drain {
                worker,
                from_ms,
                to_ms,
            } => Some((i, worker, from_ms, to_ms)),
            _ => None,
        })
        .collect();
    for (k, &(i, w, from, to)) in drains.iter().enumerate() {
        if let Some(&(j, ..)) = drains[..k]
            .iter()
            .find(|&&(_, v, a, b)| v == w && a < to && from < b)
        {
            return Err(format!(
                "`faults[{i}]`: worker {w} is already drained at that time by `faults[{j}]` (one drain per worker at a time)"
            ));
        }
        let drained: std::collections::BTreeSet<usize> = drains
            .iter()
            .filter(|&&(_, _, a, b)| a <= from && from < b)
            .map(|&(_, v, ..)| v)
            .collect();
        if drained.len() >= sc.workers.len() {
            return Err(format!(
                "`faults[{i}]`: every worker would be drained at {from} ms; leave one at least in service"
            ));
        }
    }
    Ok(())
}

fn check_fault(key: &str, f: &Fault, duration_ms: f64) -> Result<(), String> {
    if let Some((from, to)) = f.window_ms() {
        window(key, from, to, duration_ms)?;
    }
    match f {
        Fault::Slow { factor, .. } => positive(&format!("{key}.factor"), *factor),
        Fault::Burst { load, .. } => positive(&format!("{key}.load"), *load),
        Fault::Compaction {
            first_ms,
            period_ms,
            duration_ms: len_ms,
            put_factor,
            get_factor,
            ..
        } => {
            if !(first_ms.is_finite() && *first_ms >= 0.0 && *first_ms < duration_ms) {
                return Err(format!(
                    "`{key}.first_ms` must lie inside the run (0 <= first_ms < {duration_ms}), got {first_ms}"
                ));
            }
            positive(&format!("{key}.period_ms"), *period_ms)?;
            positive(&format!("{key}.duration_ms"), *len_ms)?;
            if len_ms > period_ms {
                return Err(format!(
                    "`{key}.duration_ms` ({len_ms}) must not exceed `{key}.period_ms` ({period_ms})"
                ));
            }
            positive(&format!("{key}.put_factor"), *put_factor)?;
            positive(&format!("{key}.get_factor"), *get_factor)
        }
        Fault::Memtable {
            offset_ms,
            period_ms,
            peak_bytes,
            put_slowdown_per_gib,
            ..
        } => {
            positive(&format!("{key}.period_ms"), *period_ms)?;
            if !(offset_ms.is_finite() && *offset_ms >= 0.0 && offset_ms < period_ms) {
                return Err(format!(
                    "`{key}.offset_ms` must be in 0 <= offset_ms < period_ms ({period_ms}), got {offset_ms}"
                ));
            }
            if *peak_bytes == 0 {
                return Err(format!("`{key}.peak_bytes` must be at least 1"));
            }
            if !(put_slowdown_per_gib.is_finite() && *put_slowdown_per_gib >= 0.0) {
                return Err(format!(
                    "`{key}.put_slowdown_per_gib` must be a finite number >= 0, got {put_slowdown_per_gib}"
                ));
            }
            match f.memtable_window_ms() {
                Some((from, until)) if !(from >= 0.0 && from < until && !until.is_nan()) => {
                    Err(format!(
                        "`{key}`: from_ms must be >= 0 and below until_ms, got {from} and {until}"
                    ))
                }
                _ => Ok(()),
            }
        }
        Fault::Misreport {
            error_rate,
            cpu_usage,
            queue_depth,
            ..
        } => {
            if error_rate.is_none() && cpu_usage.is_none() && queue_depth.is_none() {
                return Err(format!(
                    "`{key}`: a misreport needs at least one of `error_rate`, `queue_depth`, `cpu_usage`"
                ));
            }
            for (name, v) in [("error_rate", error_rate), ("cpu_usage", cpu_usage)] {
                if let Some(v) = v
                    && !(0.0..=1.0).contains(v)
                {
                    return Err(format!("`{key}.{name}` must be in 0..=1, got {v}"));
                }
            }
            Ok(())
        }
        Fault::Crash { .. } | Fault::Zombie { .. } | Fault::Lie { .. } | Fault::Drain { .. } => {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::SCENARIOS;

    #[test]
    fn every_preset_round_trips_through_toml() {
        for name in SCENARIOS {
            let s = Scenario::preset(name, 12, 120.0).expect(name);
            let text = toml::to_string(&s).expect("serialise");
            let back = parse(&text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
            assert_eq!(back, s, "{name}");
        }
    }

    #[test]
    fn drains_overlapping_on_a_worker_or_of_the_whole_pool_and_empty_misreports_are_refused() {
        let drain = |w: usize, from: f64, to: f64| {
            format!(
                "[[faults]]\nkind = \"drain\"\nworker = {w}\nfrom_ms = {from:.1}\nto_ms = {to:.1}\n"
            )
        };
        let two = "[[workers]]\n[[workers]]\n";
        let ok = parse(&format!(
            "{two}{}{}",
            drain(0, 1e3, 2e3),
            drain(0, 2e3, 3e3)
        ));
        assert!(ok.is_ok(), "{ok:?}");
        let e = parse(&format!(
            "{two}{}{}",
            drain(0, 1e3, 3e3),
            drain(0, 2e3, 4e3)
        ))
        .unwrap_err();
        assert!(
            e.contains("faults[1]") && e.contains("already drained"),
            "{e}"
        );
        let e = parse(&format!(
            "{two}{}{}",
            drain(0, 1e3, 3e3),
            drain(1, 2e3, 4e3)
        ))
        .unwrap_err();
        assert!(
            e.contains("every worker would be drained at 2000 ms"),
            "{e}"
        );
        let e = parse("[[faults]]\nkind = \"misreport\"\nworker = 0\nfrom_ms = 1.0\nto_ms = 2.0\n")
            .unwrap_err();
        assert!(e.contains("at least one of"), "{e}");
    }

    #[test]
    fn missing_keys_take_the_homogeneous_values() {
        let s = parse("name = \"tiny\"\n").expect("parse");
        let mut h = Scenario::preset("homogeneous", 12, 120.0).expect("preset");
        h.name = "tiny".to_owned();
        h.description = s.description.clone();
        assert_eq!(s, h);
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = parse("lode = 0.5\n").unwrap_err();
        assert!(e.contains("lode"), "{e}");
        let e = parse("[[workers]]\nspeed = 1.0\nsped = 2.0\n[[workers]]\n").unwrap_err();
        assert!(e.contains("sped") && e.contains("workers[0]"), "{e}");
        let e = parse(
            "[[faults]]\nkind = \"slow\"\nworker = 0\nform_ms = 1.0\nto_ms = 2.0\nfactor = 2.0\n",
        )
        .unwrap_err();
        assert!(e.contains("form_ms"), "{e}");
        let e = parse("[[faults]]\nkind = \"meteor\"\nworker = 0\n").unwrap_err();
        assert!(e.contains("meteor"), "{e}");
        let e = parse("load = \"high\"\n").unwrap_err();
        assert!(e.contains("load"), "{e}");
    }

    #[test]
    fn bad_values_are_refused_by_key() {
        let cases = [
            ("load = 0.0\n", "`load`"),
            ("put_fraction = 1.5\n", "`put_fraction`"),
            ("large_fraction = -0.1\n", "`large_fraction`"),
            ("duration_ms = 10.0\n", "`duration_ms`"),
            ("timeout_ms = -1.0\n", "`timeout_ms`"),
            ("routers = 0\n", "`routers`"),
            ("scorer_cores = 0\n", "`scorer_cores`"),
            ("scorer_round_trip_us = -1.0\n", "`scorer_round_trip_us`"),
            ("scorer_service_scale = nan\n", "`scorer_service_scale`"),
            ("feedback_flush_ms = 0.0\n", "`feedback_flush_ms`"),
            ("scorer_timeout_ms = 0.0\n", "`scorer_timeout_ms`"),
            ("load_interval_ms = 0.0\n", "`load_interval_ms`"),
            ("feedback_batch_max = 0\n", "`feedback_batch_max`"),
            ("telemetry_delay_ms = inf\n", "`telemetry_delay_ms`"),
            ("window_ms = 999999.0\n", "`window_ms`"),
            ("name = \"../x\"\n", "`name`"),
            (
                "[[workers]]\nspeed = 0.0\n[[workers]]\n",
                "`workers[0].speed`",
            ),
            (
                "[[workers]]\nconcurrency = 0\n[[workers]]\n",
                "`workers[0].concurrency`",
            ),
            ("[[workers]]\n", "`workers`"),
            (
                "[[faults]]\nkind = \"crash\"\nworker = 12\nfrom_ms = 1.0\nto_ms = 2.0\n",
                "`faults[0].worker`",
            ),
            (
                "[[faults]]\nkind = \"zombie\"\nworker = 0\nfrom_ms = 1000.0\nto_ms = 200000.0\n",
                "`faults[0]` must lie inside the run",
            ),
            (
                "[[faults]]\nkind = \"slow\"\nworker = 0\nfrom_ms = 2.0\nto_ms = 1.0\nfactor = 2.0\n",
                "`faults[0]` must lie inside the run",
            ),
            (
                "[[faults]]\nkind = \"compaction\"\nworker = 0\nfirst_ms = 0.0\nperiod_ms = 10.0\nduration_ms = 20.0\nput_factor = 2.0\nget_factor = 1.0\n",
                "`faults[0].duration_ms`",
            ),
            (
                "[[faults]]\nkind = \"memtable\"\nworker = 0\noffset_ms = 10.0\nperiod_ms = 10.0\npeak_bytes = 1\nput_slowdown_per_gib = 1.0\n",
                "`faults[0].offset_ms`",
            ),
            (
                "[[faults]]\nkind = \"memtable\"\nworker = 0\noffset_ms = 0.0\nperiod_ms = 10.0\npeak_bytes = 0\nput_slowdown_per_gib = 1.0\n",
                "`faults[0].peak_bytes`",
            ),
            (
                "[[faults]]\nkind = \"memtable\"\nworker = 0\noffset_ms = 0.0\nperiod_ms = 10.0\npeak_bytes = 1\nput_slowdown_per_gib = -1.0\n",
                "`faults[0].put_slowdown_per_gib`",
            ),
            (
                "[[faults]]\nkind = \"memtable\"\nworker = 1\noffset_ms = 0.0\nperiod_ms = 10.0\npeak_bytes = 1\nput_slowdown_per_gib = 1.0\n[[faults]]\nkind = \"memtable\"\nworker = 1\noffset_ms = 0.0\nperiod_ms = 10.0\npeak_bytes = 1\nput_slowdown_per_gib = 1.0\n",
                "`faults[1]`: worker 1 already has a memtable",
            ),
        ];
        for (text, key) in cases {
            let e = parse(text).expect_err(text);
            assert!(e.contains(key), "{text:?}: {e}");
        }
    }
}
