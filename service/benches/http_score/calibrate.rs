//! `http_score --calibrate FILE`: the simulator's calibration of a score
//! call (docs/evaluation.md, "The calibration").

use std::process::Command;

use serde_json::json;

use super::{CANDIDATES, Call, Service, env_or, round, setup};

/// `--calibrate FILE`, relative to the repository root.
pub(super) fn calibrate_path() -> Option<std::path::PathBuf> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == "--calibrate")?;
    let file = args.get(i + 1)?;
    Some(std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join(file))
}

fn command_output(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// OS, CPU model and logical cores of this host.
fn host() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|l| l.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    format!(
        "{} {}, {cpu}, {} logical cores",
        command_output("uname", &["-s", "-r"]),
        std::env::consts::ARCH,
        // Counted from /proc/cpuinfo: the pinned bench's own affinity would say 1.
        std::fs::read_to_string("/proc/cpuinfo").map_or(0, |c| c
            .lines()
            .filter(|l| l.starts_with("processor"))
            .count())
    )
}

/// The commit of the service's code, `-dirty` when `service/` has
/// uncommitted changes.
fn commit() -> String {
    let head = command_output("git", &["rev-parse", "HEAD"]);
    let dirty = !command_output(
        "git",
        &[
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
            "service",
        ],
    )
    .is_empty();
    format!("{head}{}", if dirty { "-dirty" } else { "" })
}

/// Probabilities of the in-service quantile points: every percent, then
/// the far tail.
fn calibration_points() -> Vec<f64> {
    let mut p: Vec<f64> = (0..100).map(|i| f64::from(i) / 100.0).collect();
    p.extend([0.995, 0.999, 1.0]);
    p
}

/// Writes the simulator's calibration of a score call to `path`.
pub(super) async fn calibrate(svc: &Service, path: &std::path::Path, pin: bool, quick: bool) {
    let port = svc.port;
    let (score, _) = setup(port).await;
    let secs: f64 = if quick {
        0.2
    } else {
        env_or("HTTP_SCORE_SECS", 2.0)
    };
    let rounds: usize = env_or("HTTP_SCORE_ROUNDS", 5).max(1);
    round(port, 8, &score, secs).await;
    let (mut healthz, mut calls) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        healthz.extend(round(port, 1, &Call::Healthz, secs).await.latencies_us);
        calls.extend(round(port, 1, &score, secs).await.latencies_us);
    }
    healthz.sort_by(f64::total_cmp);
    calls.sort_by(f64::total_cmp);
    let q = |v: &[f64], p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    let round_trip_us = q(&healthz, 0.5);
    let in_service: Vec<f64> = calls
        .iter()
        .map(|us| (us - round_trip_us).max(0.0))
        .collect();
    let points: Vec<[f64; 2]> = calibration_points()
        .into_iter()
        .map(|p| [p, (q(&in_service, p) * 10.0).round() / 10.0])
        .collect();
    let round1 = |x: f64| (x * 10.0).round() / 10.0;
    let value = json!({
        "command": format!(
            "cargo bench -p service --bench http_score -- --calibrate {}",
            std::env::args()
                .skip_while(|a| a != "--calibrate")
                .nth(1)
                .unwrap_or_default()
        ),
        "date": command_output("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]),
        "commit": commit(),
        "host": format!(
            "{}; {}",
            host(),
            if pin { "service on core 0, client on core 1" } else { "unpinned" }
        ),
        "connections": 1,
        "candidates": CANDIDATES,
        "samples": calls.len(),
        "round_trip_us": round1(round_trip_us),
        "score_p50_us": round1(q(&calls, 0.5)),
        "score_p99_us": round1(q(&calls, 0.99)),
        "in_service_us": points,
    });
    let text = serde_json::to_string_pretty(&value).expect("json") + "\n";
    if quick {
        println!(
            "http_score --calibrate: smoke run ok ({} calls)",
            calls.len()
        );
        return;
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    println!(
        "wrote {}: round trip {:.0} µs, score p50 {:.0} µs, p99 {:.0} µs, {} calls",
        path.display(),
        round_trip_us,
        q(&calls, 0.5),
        q(&calls, 0.99),
        calls.len()
    );
}
