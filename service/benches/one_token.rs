//! What one router credential can do to the service, measured against the
//! real service binary: `/v1/score` at one connection while view streams
//! are opened past their limits, while many routers follow the view, and
//! while subscribers stop reading.
//!
//! The bench starts `target/<profile>/service` (or `ONE_TOKEN_SERVICE_BIN`)
//! with a token for every role (router tokens `r-0` … `r-31`), reports
//! `ONE_TOKEN_WORKERS` workers (2 000) once a second, and runs, in turn:
//!
//! 1. `none`: score p50/p99 with no stream open;
//! 2. `flood`: `ONE_TOKEN_ATTEMPTS` (5 000) view-stream attempts with one
//!    router token, counting what was accepted and refused; score p99 while
//!    the accepted streams stay open and read;
//! 3. `readers`: `ONE_TOKEN_READERS` (200) streams that read, spread over
//!    the router tokens; score p99, and the service's CPU for the fan-out
//!    per subscriber (its CPU in the phase minus `none`'s, per stream);
//! 4. `stalled`: `ONE_TOKEN_STALLED` (300) streams that never read, held
//!    `ONE_TOKEN_STALL_SECS` (20 s); the service's RSS above `none`'s, and
//!    how many streams the service cut off.
//!
//! Each phase scores for `ONE_TOKEN_SECS` (5 s). Figures are one run on a
//! shared host: compare them with each other, not across runs.
//!
//! `cargo bench -p service --bench one_token`.

#![allow(missing_docs)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

const ROUTER_TOKENS: usize = 32;
const AGENT: &str = "agent-token-3f9c1a7e5b2d8604c";
const ADMIN: &str = "admin-token-8e2a6c4f0b9d1735e";

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn router_token(i: usize) -> String {
    format!("router-token-{i:02}-7d1e9b3a5c0f2468")
}

struct Service {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_service() -> Service {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port");
    let routers: String = (0..ROUTER_TOKENS)
        .map(|i| format!("r-{i} = \"{}\"\n", router_token(i)))
        .collect();
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:{port}\"\n\n\
         [scoring]\nwarmup_ms = 0\n\n\
         [telemetry]\ndead_after_ms = 3600000\nforget_after_ms = 3600000\n\n\
         [log]\nenabled = false\n\n\
         [auth.agent]\nbench = \"{AGENT}\"\n\n\
         [auth.router]\n{routers}\n\
         [auth.admin]\nops = \"{ADMIN}\"\n"
    );
    let path = dir.path().join("config.toml");
    std::fs::write(&path, config).expect("config");
    let bin = std::env::var("ONE_TOKEN_SERVICE_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_service").to_owned());
    let child = Command::new(bin)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .arg("--config")
        .arg(&path)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the service binary");
    Service {
        child,
        port,
        _dir: dir,
    }
}

/// One HTTP/1.1 request on a fresh connection; the status and body.
fn request(port: u16, method: &str, path: &str, token: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).expect("write");
    s.write_all(body.as_bytes()).expect("write");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
    (status, body)
}

fn wait_ready(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "service did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn report_workers(port: u16, n: usize) {
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64;
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let snapshots: Vec<_> = chunk
            .iter()
            .map(|i| {
                json!({"worker_id": format!("w{i}"), "timestamp_ms": wall, "cpu_usage": 0.2,
                    "queue_depth": i % 5, "rtt_ms_avg": 1.0, "rtt_ms_p99": 2.0, "error_rate": 0.0})
            })
            .collect();
        let body = json!({ "snapshots": snapshots }).to_string();
        let (status, answer) = request(port, "POST", "/v1/telemetry", AGENT, &body);
        assert_eq!(status, 200, "{answer}");
    }
}

/// A view stream on its own connection: the status of its answer, and,
/// with `read`, a thread that reads it until `stop`, counting the bytes there.
fn open_stream(
    port: u16,
    token: &str,
    read: Option<&Arc<AtomicUsize>>,
    stop: &Arc<AtomicBool>,
) -> Option<(u16, TcpStream)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    let head = format!(
        "GET /v1/view HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {token}\r\n\r\n"
    );
    s.write_all(head.as_bytes()).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut first = [0u8; 12];
    s.read_exact(&mut first).ok()?;
    let status = std::str::from_utf8(&first[9..12]).ok()?.parse().ok()?;
    if let Some(bytes) = read.filter(|_| status == 200) {
        let (mut r, stop, bytes) = (s.try_clone().ok()?, stop.clone(), bytes.clone());
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            while !stop.load(Ordering::Relaxed) {
                match r.read(&mut buf) {
                    Ok(n) if n > 0 => bytes.fetch_add(n, Ordering::Relaxed),
                    _ => break,
                };
            }
        });
    }
    Some((status, s))
}

/// Score p50 and p99 at one connection for `secs`, µs.
fn score_round(port: u16, workers: usize, secs: f64) -> (f64, f64) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_nodelay(true).expect("nodelay");
    let token = router_token(0);
    let mut lat = Vec::new();
    let stop = Instant::now() + Duration::from_secs_f64(secs);
    let mut buf = vec![0u8; 64 * 1024];
    let mut i = 0usize;
    while Instant::now() < stop {
        let candidates: Vec<String> = (0..16)
            .map(|k| format!("w{}", (i * 16 + k) % workers))
            .collect();
        i += 1;
        let body = json!({"key": format!("user:{i}:a"), "candidates": candidates}).to_string();
        let head = format!(
            "POST /v1/score HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {token}\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        let t = Instant::now();
        s.write_all(head.as_bytes()).expect("write");
        s.write_all(body.as_bytes()).expect("write");
        read_one_answer(&mut s, &mut buf);
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    lat.sort_by(f64::total_cmp);
    let q = |p: f64| lat[((lat.len() - 1) as f64 * p).round() as usize];
    (q(0.5), q(0.99))
}

/// Reads one keep-alive answer (headers with `content-length`, then the body).
fn read_one_answer(s: &mut TcpStream, buf: &mut [u8]) {
    let mut got = Vec::new();
    loop {
        let n = s.read(buf).expect("read");
        assert!(n > 0, "connection closed");
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().to_owned())
                })
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            if body.len() >= len {
                assert!(head.starts_with("HTTP/1.1 200"), "{head}");
                return;
            }
        }
    }
}

fn proc_field(pid: u32, file: &str, key: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/{file}"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(f64::NAN)
}

/// The service's CPU time so far, s (user + system, from `/proc/<pid>/stat`).
fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = after
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    // Fields 14 and 15 (utime, stime), counted from after the command name.
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / 100.0
}

fn rss_mib(pid: u32) -> f64 {
    proc_field(pid, "status", "VmRSS:") / 1024.0
}

/// Reports every worker once a second until `stop`, so that deltas flow.
fn keep_reporting(port: u16, workers: usize, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            report_workers(port, workers);
            std::thread::sleep(Duration::from_secs(1));
        }
    })
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    // `cargo test --all-targets` runs benches once in test mode: keep that quick.
    let quick =
        std::env::args().any(|a| a == "--test") || !std::env::args().any(|a| a == "--bench");
    let pick = |full, small| if quick { small } else { full };
    let workers: usize = env_or("ONE_TOKEN_WORKERS", pick(2_000, 50));
    let secs: f64 = env_or("ONE_TOKEN_SECS", if quick { 0.3 } else { 5.0 });
    let attempts: usize = env_or("ONE_TOKEN_ATTEMPTS", pick(5_000, 40));
    let readers: usize = env_or("ONE_TOKEN_READERS", pick(200, 10));
    let stalled: usize = env_or("ONE_TOKEN_STALLED", pick(300, 10));
    let stall_secs: u64 = env_or("ONE_TOKEN_STALL_SECS", pick(20, 1) as u64);
    let svc = start_service();
    let (port, pid) = (svc.port, svc.child.id());
    wait_ready(port);
    let stop_reporting = Arc::new(AtomicBool::new(false));
    let reporter = keep_reporting(port, workers, stop_reporting.clone());
    std::thread::sleep(Duration::from_secs(2));
    println!("one_token: {workers} workers, {secs} s per phase, service pid {pid}");

    let (cpu0, t0) = (cpu_s(pid), Instant::now());
    let (p50, p99) = score_round(port, workers, secs);
    let idle_cpu = (cpu_s(pid) - cpu0) / t0.elapsed().as_secs_f64();
    let idle_rss = rss_mib(pid);
    println!(
        "none     score p50 {p50:8.0} µs  p99 {p99:8.0} µs  service cpu {idle_cpu:.2} cores  rss {idle_rss:.0} MiB"
    );
    let base_p99 = p99;

    // 2. One token opens streams until refused.
    let stop = Arc::new(AtomicBool::new(false));
    let read_bytes = Arc::new(AtomicUsize::new(0));
    let (mut held, refused, failed) = (Vec::new(), AtomicUsize::new(0), AtomicUsize::new(0));
    let token = router_token(1);
    for _ in 0..attempts {
        match open_stream(port, &token, Some(&read_bytes), &stop) {
            Some((200, s)) => held.push(s),
            Some((429, _)) => {
                refused.fetch_add(1, Ordering::Relaxed);
            }
            _ => {
                failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    let (p50, p99) = score_round(port, workers, secs);
    println!(
        "flood    score p50 {p50:8.0} µs  p99 {p99:8.0} µs  ({:.2}× none)  of {attempts} attempts: {} open, {} refused 429, {} failed",
        p99 / base_p99,
        held.len(),
        refused.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed)
    );
    stop.store(true, Ordering::Relaxed);
    drop(held);
    std::thread::sleep(Duration::from_secs(2));

    // 3. Many routers follow the view.
    let stop = Arc::new(AtomicBool::new(false));
    let read_bytes = Arc::new(AtomicUsize::new(0));
    let mut held = Vec::new();
    for i in 0..readers {
        let token = router_token(i % ROUTER_TOKENS);
        if let Some((200, s)) = open_stream(port, &token, Some(&read_bytes), &stop) {
            held.push(s);
        }
    }
    std::thread::sleep(Duration::from_secs(1));
    let (cpu0, t0, bytes0) = (
        cpu_s(pid),
        Instant::now(),
        read_bytes.load(Ordering::Relaxed),
    );
    let (p50, p99) = score_round(port, workers, secs);
    let wall = t0.elapsed().as_secs_f64();
    let cpu = (cpu_s(pid) - cpu0) / wall;
    let mib_s = (read_bytes.load(Ordering::Relaxed) - bytes0) as f64 / wall / 1_048_576.0;
    let per_sub_ms = (cpu - idle_cpu).max(0.0) * 1e3 / held.len().max(1) as f64;
    println!(
        "readers  score p50 {p50:8.0} µs  p99 {p99:8.0} µs  ({:.2}× none)  {} streams reading {mib_s:.1} MiB/s in all; service cpu {cpu:.2} cores ({idle_cpu:.2} in none): fan-out {per_sub_ms:.2} ms of cpu per s per subscriber",
        p99 / base_p99,
        held.len()
    );
    stop.store(true, Ordering::Relaxed);
    drop(held);
    std::thread::sleep(Duration::from_secs(2));

    // 4. Subscribers that never read.
    let stop = Arc::new(AtomicBool::new(false));
    let mut held = Vec::new();
    for i in 0..stalled {
        if let Some((200, s)) = open_stream(port, &router_token(i % ROUTER_TOKENS), None, &stop) {
            held.push(s);
        }
    }
    let opened = held.len();
    let mut peak = idle_rss;
    for _ in 0..stall_secs {
        std::thread::sleep(Duration::from_secs(1));
        peak = peak.max(rss_mib(pid));
    }
    let (p50, p99) = score_round(port, workers, secs);
    let (_, metrics) = request(port, "GET", "/metrics", ADMIN, "");
    let cutoffs = metrics
        .lines()
        .find_map(|l| l.strip_prefix("scorer_view_stream_cutoffs_total "))
        .unwrap_or("-")
        .to_owned();
    println!(
        "stalled  score p50 {p50:8.0} µs  p99 {p99:8.0} µs  ({:.2}× none)  {opened} streams never read for {stall_secs} s: peak rss {peak:.0} MiB ({:+.0} MiB over none), {cutoffs} cut off",
        p99 / base_p99,
        peak - idle_rss
    );
    drop(held);
    stop_reporting.store(true, Ordering::Relaxed);
    let _ = reporter.join();
}
