//! `config/example.toml` is the configuration reference operators copy: it
//! must load to exactly the defaults and name every key, so that a key
//! added to `Config` without an example entry fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use figment::providers::Env;
use scorer_engine::config::{Config, ENV_PREFIX};
use service::config::LoadConfig;

fn example_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/example.toml")
}

fn example_text() -> String {
    let path = example_path();
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Dotted paths of every leaf of `v`, with its value (`null` for unset options).
fn leaves(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, serde_json::Value>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, child) in map {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(&path, child, out);
            }
        }
        leaf => {
            out.insert(prefix.to_owned(), leaf.clone());
        }
    }
}

fn default_leaves() -> BTreeMap<String, serde_json::Value> {
    let mut out = BTreeMap::new();
    leaves(
        "",
        &serde_json::to_value(Config::default()).unwrap(),
        &mut out,
    );
    out
}

/// The keys set in the file.
fn live_keys(text: &str) -> BTreeSet<String> {
    let table: toml::Table = toml::from_str(text).unwrap();
    let mut out = BTreeMap::new();
    leaves("", &serde_json::to_value(table).unwrap(), &mut out);
    out.into_keys().collect()
}

/// A commented-out `# key = value` line.
struct Example {
    /// Line index in the file.
    line: usize,
    /// Dotted key under its `[section]`.
    key: String,
    /// The line without its `#`.
    uncommented: String,
}

fn commented_keys(text: &str) -> Vec<Example> {
    let mut section = String::new();
    let mut out = Vec::new();
    for (line, t) in text.lines().map(str::trim).enumerate() {
        if let Some(name) = t.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.trim().to_owned();
        } else if let Some(rest) = t.strip_prefix('#').map(str::trim) {
            let Some((key, _)) = rest.split_once('=') else {
                continue;
            };
            let key = key.trim();
            let is_key = !key.is_empty()
                && key
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if is_key {
                out.push(Example {
                    line,
                    key: format!("{section}.{key}"),
                    uncommented: rest.to_owned(),
                });
            }
        }
    }
    out
}

#[test]
fn example_loads_to_exactly_the_defaults() {
    // `Config::load`'s providers, blind to this process's SCORER_* variables.
    let env = Env::prefixed(ENV_PREFIX).split("__").filter(|_| false);
    let loaded = Config::load_from(Some(&example_path()), env)
        .unwrap_or_else(|e| panic!("config/example.toml does not load: {e}"));
    let mut got = BTreeMap::new();
    leaves("", &serde_json::to_value(&loaded).unwrap(), &mut got);
    let want = default_leaves();
    let differ: Vec<String> = want
        .iter()
        .filter(|(k, v)| got.get(*k) != Some(v))
        .map(|(k, v)| format!("{k}: default {v}, example {}", got[k]))
        .collect();
    assert!(
        differ.is_empty(),
        "config/example.toml differs from the defaults:\n{}",
        differ.join("\n")
    );
    assert_eq!(loaded, Config::default());
}

#[test]
fn example_names_every_key() {
    let text = example_text();
    let live = live_keys(&text);
    let commented: BTreeSet<String> = commented_keys(&text).into_iter().map(|e| e.key).collect();
    let defaults = default_leaves();
    let missing: Vec<&String> = defaults
        .keys()
        .filter(|k| !live.contains(*k) && !commented.contains(*k))
        .collect();
    assert!(
        missing.is_empty(),
        "config/example.toml lacks these keys (add each with its default, or commented out with an example when unset by default): {missing:?}"
    );
    let unknown: Vec<&String> = commented
        .iter()
        .filter(|k| !defaults.contains_key(*k))
        .collect();
    assert!(
        unknown.is_empty(),
        "config/example.toml comments out keys Config does not have: {unknown:?}"
    );
}

#[test]
fn commented_out_examples_are_valid_values() {
    let text = example_text();
    let commented = commented_keys(&text);
    assert!(!commented.is_empty());
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    for e in &commented {
        lines[e.line] = e.uncommented.clone();
    }
    let uncommented = lines.join("\n");
    let c = Config::from_toml_str(&uncommented)
        .unwrap_or_else(|e| panic!("an uncommented example is refused: {e}"));
    assert_eq!(c.admin.token.as_deref(), Some("change-me-to-a-long-secret"));
    assert_eq!(
        c.model.shadow.dir.as_deref(),
        Some(Path::new("models/candidate"))
    );
}
