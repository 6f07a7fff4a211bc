//! Unit tests of `config.rs`.
#![allow(clippy::result_large_err)] // figment::Jail's closure signature
use super::*;

fn env() -> Env {
    Env::prefixed(ENV_PREFIX).split("__")
}

#[test]
fn defaults_are_valid_and_listen_on_loopback_8080() {
    let c = Config::default();
    assert!(c.validate().is_ok());
    assert_eq!(c.server.listen, "127.0.0.1:8080");
    assert_eq!(c.server.max_body_bytes, 8 * 1024 * 1024);
    assert_eq!(c.scoring.warmup_ms, 30_000);
}

#[test]
fn file_then_environment_overrides() {
    figment::Jail::expect_with(|jail| {
        jail.create_file(
            "s.toml",
            "[scoring]\nwarmup_ms = 5\nrtt_p99_baseline_ms = 20.0\n",
        )?;
        jail.set_env("SCORER_SCORING__WARMUP_MS", "0");
        jail.set_env("SCORER_SERVER__LISTEN", "127.0.0.1:9000");
        let c = Config::load_from(Some(Path::new("s.toml")), env()).map_err(|e| e.to_string())?;
        assert_eq!(c.scoring.warmup_ms, 0);
        assert_eq!(c.scoring.rtt_p99_baseline_ms, 20.0);
        assert_eq!(c.server.listen, "127.0.0.1:9000");
        Ok(())
    });
}

#[test]
fn unknown_keys_are_named() {
    let e = Config::from_toml_str("[scoring]\nwarmup = 1\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("warmup"), "{e}");
    let e = Config::from_toml_str("[scorring]\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("scorring"), "{e}");
    figment::Jail::expect_with(|jail| {
        jail.set_env("SCORER_TELEMETRY__BOGUS_KEY", "1");
        let e = Config::load_from(None, env()).unwrap_err().to_string();
        assert!(e.contains("bogus_key"), "{e}");
        Ok(())
    });
}

#[test]
fn an_unknown_key_is_named_by_its_dotted_path_and_source() {
    let e = Config::from_toml_str(
        "[model]
typo_key = 1
",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with(
            "unknown key `model.typo_key` in TOML source string; expected one of: dir, enabled,"
        ),
        "{e}"
    );
    assert!(!e.contains("``") && !e.contains("default."), "{e}");
    figment::Jail::expect_with(|jail| {
        jail.set_env("SCORER_MODEL__TYPO_KEY", "1");
        let e = Config::load_from(None, env()).unwrap_err().to_string();
        assert!(
            e.starts_with("unknown key `model.typo_key` in `SCORER_` environment variable(s)"),
            "{e}"
        );
        jail.create_file(
            "scorer.toml",
            "[log]
max_rows = \"many\"\n",
        )?;
        let e = Config::load_from(Some(std::path::Path::new("scorer.toml")), env())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("key `log.max_rows` in TOML file "), "{e}");
        assert!(
            e.contains("scorer.toml") && e.contains("invalid type"),
            "{e}"
        );
        Ok(())
    });
}

#[test]
fn out_of_range_values_are_named() {
    for (toml, key) in [
        ("[telemetry]\newma_alpha = 1.5", "telemetry.ewma_alpha"),
        ("[telemetry]\newma_alpha = 0.0", "telemetry.ewma_alpha"),
        (
            "[scoring]\ncompacting_factor = 2.0",
            "scoring.compacting_factor",
        ),
        (
            "[scoring]\nrtt_p99_baseline_ms = 0.0",
            "scoring.rtt_p99_baseline_ms",
        ),
        (
            "[scoring]\ncpu_max_deduct = 101.0",
            "scoring.cpu_max_deduct",
        ),
        ("[server]\nlisten = \"nowhere\"", "server.listen"),
        ("[server]\nmax_body_bytes = 0", "server.max_body_bytes"),
        // A fraction for arm B without arm B's model (found by a fresh-eyes
        // run: it started with the fraction silently ignored).
        ("[model.ab]\nfraction = 0.5", "model.ab.fraction"),
        ("[selection]\ntemperature = -1.0", "selection.temperature"),
        (
            "[selection]\nhash_load_factor = 0.5",
            "selection.hash_load_factor",
        ),
        (
            "[selection]\nprequal_probes = 0",
            "selection.prequal_probes",
        ),
        // Long enough but unsendable: a header value cannot carry it.
        ("[admin]\ntoken = \"                    \"", "admin.token"),
        (
            "[admin]\ntoken = \"correct horse battery staple\"",
            "admin.token",
        ),
        ("[admin]\ntoken = \"================\"", "admin.token"),
    ] {
        let e = Config::from_toml_str(toml).unwrap_err().to_string();
        assert!(e.contains(key), "{toml}: {e}");
    }
    let e = Config::from_toml_str("[model.ab]\nfraction = 0.5")
        .unwrap_err()
        .to_string();
    assert!(e.contains("ab.dir is unset"), "{e}");
    assert!(Config::from_toml_str("[model.ab]\nfraction = 0.0").is_ok());
    for token in [
        "0123456789abcdef",
        "dG9rZW4tZm9yLWFkbWluLW9ubHk=",
        "a-b.c_d~e+f/g0123==",
    ] {
        let toml = format!("[admin]\ntoken = \"{token}\"");
        assert!(
            Config::from_toml_str(&toml).is_ok(),
            "{token} is a valid bearer token"
        );
    }
    let e = Config::from_toml_str("[telemetry]\ndead_after_ms = -1")
        .unwrap_err()
        .to_string();
    assert!(e.contains("dead_after_ms"), "{e}");
}

#[test]
fn hash_changes_with_any_value() {
    let a = Config::default();
    let mut b = Config::default();
    b.scoring.queue_deduct = 11.0;
    assert_eq!(a.hash(), Config::default().hash());
    assert_ne!(a.hash(), b.hash());
    assert_eq!(a.hash().len(), 16);
}
