//! One hop over a real `nats-server` on loopback: what the simulator's
//! `service-replicas` arm delays each shared message by
//! (`evaluation::bus_calibration`).
//!
//! The bench starts `nats-server -a 127.0.0.1 -p PORT -js -sd DIR` (from
//! PATH), pinned to core 0 with `taskset` when there are two cores or
//! more, and pins itself to core 1. Two `async-nats` clients, each on its
//! own thread and connection as two replicas would be: the echo
//! republishes on `bench.pong` what it receives on `bench.ping`; the
//! timer publishes one message (a router load gauge of 6 busy workers,
//! about 300 bytes of JSON) and waits for its echo before the next, closed
//! loop. Half the round trip is one hop, publish to delivery. Rounds of
//! [`PER_ROUND`] round trips after a warm-up; it prints the median over
//! rounds of each round's one-way p50 and p99, µs.
//!
//! `cargo bench -p evaluation --bench nats_bus`; with `-- --calibrate
//! FILE` it also writes the calibration (relative to the repository root;
//! the shipped one is `evaluation/calibration/nats_bus.json`). Without
//! `nats-server` on PATH it says so and measures nothing.

#![allow(missing_docs)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use evaluation::bus_calibration::NatsBusCalibration;
use futures_util::StreamExt;

const ROUNDS: usize = 7;
const PER_ROUND: usize = 4_000;
const WORKERS: usize = 6;

struct Server {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn can_pin() -> bool {
    std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2
        && Command::new("taskset")
            .arg("-V")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

fn server_version() -> Option<String> {
    let out = Command::new("nats-server").arg("--version").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn start_server(pin: bool) -> Server {
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("nats-bus-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("store dir");
    let port_s = port.to_string();
    let store = dir.display().to_string();
    let args = ["-a", "127.0.0.1", "-p", &port_s, "-js", "-sd", &store];
    let mut cmd = if pin {
        let mut c = Command::new("taskset");
        c.args(["-c", "0", "nats-server"]).args(args);
        c
    } else {
        let mut c = Command::new("nats-server");
        c.args(args);
        c
    };
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start nats-server");
    Server { child, port, dir }
}

fn pin_self(pin: bool) {
    if pin {
        let pid = std::process::id().to_string();
        let _ = Command::new("taskset")
            .args(["-a", "-p", "-c", "1", &pid])
            .stdout(Stdio::null())
            .status();
    }
}

/// A load gauge as a replica would publish it.
fn gauge(seq: u64) -> Vec<u8> {
    let load: Vec<serde_json::Value> = (0..WORKERS)
        .map(|w| serde_json::json!({"worker_id": format!("w{w}"), "outstanding": (seq as usize + w) % 7}))
        .collect();
    serde_json::json!({"router": "replica-0", "seq": seq, "sent_ms": 1_750_000_000_000u64 + seq, "load": load})
        .to_string()
        .into_bytes()
}

async fn connect(port: u16) -> async_nats::Client {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match async_nats::connect(format!("127.0.0.1:{port}")).await {
            Ok(c) => return c,
            Err(e) if Instant::now() > deadline => panic!("nats-server on {port}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// The echo, on its own thread and connection, until the process ends.
fn spawn_echo(port: u16, ready: std::sync::mpsc::Sender<()>) {
    std::thread::spawn(move || {
        runtime().block_on(async move {
            let c = connect(port).await;
            let mut sub = c.subscribe("bench.ping").await.expect("subscribe");
            c.flush().await.expect("flush");
            let _ = ready.send(());
            while let Some(m) = sub.next().await {
                let _ = c.publish("bench.pong", m.payload).await;
                let _ = c.flush().await;
            }
        });
    });
}

/// `n` closed-loop round trips; the one-way times (half each), ns.
async fn round(c: &async_nats::Client, sub: &mut async_nats::Subscriber, n: usize) -> Vec<u64> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let body = gauge(i as u64).into();
        let t = Instant::now();
        c.publish("bench.ping", body).await.expect("publish");
        c.flush().await.expect("flush");
        if sub.next().await.is_none() {
            break;
        }
        out.push(t.elapsed().as_nanos() as u64 / 2);
    }
    out
}

fn quantile_us(sorted: &[u64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize] as f64 / 1_000.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    // `cargo test --all-targets` runs benches once in test mode: keep it quick.
    let quick = !std::env::args().any(|a| a == "--bench");
    let Some(version) = server_version() else {
        println!("nats_bus: no nats-server on PATH, nothing measured");
        return;
    };
    let pin = !quick && can_pin();
    let server = start_server(pin);
    pin_self(pin);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    spawn_echo(server.port, ready_tx);
    ready_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("echo ready");
    let (per_round, rounds) = if quick { (50, 1) } else { (PER_ROUND, ROUNDS) };
    let (rounds_p, all) = runtime().block_on(async {
        let c = connect(server.port).await;
        let mut sub = c.subscribe("bench.pong").await.expect("subscribe");
        c.flush().await.expect("flush");
        round(&c, &mut sub, per_round / 2).await;
        let (mut p, mut all) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let mut ns = round(&c, &mut sub, per_round).await;
            ns.sort_unstable();
            p.push((quantile_us(&ns, 0.5), quantile_us(&ns, 0.99)));
            all.extend(ns);
        }
        (p, all)
    });
    let p50 = median(rounds_p.iter().map(|r| r.0).collect());
    let p99 = median(rounds_p.iter().map(|r| r.1).collect());
    let bytes = gauge(0).len();
    println!(
        "{version}, {bytes}-byte message, one hop (half a round trip), median of {rounds} rounds of {per_round}: p50 {p50:.1} µs, p99 {p99:.1} µs ({})",
        if pin {
            "server on core 0, clients on core 1"
        } else {
            "unpinned"
        }
    );
    if let Some(path) = arg_after("--calibrate") {
        write_calibration(
            &Path::new("..").join(&path),
            &path,
            version,
            bytes,
            all.len(),
            (p50, p99),
            pin,
        );
    }
}

/// The argument after `flag`.
fn arg_after(flag: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == flag)?;
    args.get(i + 1).cloned()
}

fn command_output(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .current_dir("..")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

fn write_calibration(
    path: &Path,
    shown: &str,
    server: String,
    payload_bytes: usize,
    samples: usize,
    (p50, p99): (f64, f64),
    pin: bool,
) {
    let cpu = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model_name = cpu
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map_or("unknown CPU", |l| l.trim_start_matches([' ', '\t', ':']));
    let cores = cpu.lines().filter(|l| l.starts_with("processor")).count();
    // A shared host's other work shows in the tail: say how busy it was.
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load_1m = load.split_whitespace().next().unwrap_or("unknown");
    let status = ["status", "--porcelain", "--untracked-files=no", "--"];
    let dirty = !command_output("git", &[&status[..], &["evaluation/benches"]].concat()).is_empty();
    let cal = NatsBusCalibration {
        command: format!("cargo bench -p evaluation --bench nats_bus -- --calibrate {shown}"),
        date: command_output("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]),
        commit: format!(
            "{}{}",
            command_output("git", &["rev-parse", "HEAD"]),
            if dirty { "-dirty" } else { "" }
        ),
        host: format!(
            "{} {}, {model_name}, {cores} logical cores; {}; load average {load_1m} at the end",
            command_output("uname", &["-s", "-r"]),
            command_output("uname", &["-m"]),
            if pin {
                "nats-server on core 0, clients on core 1"
            } else {
                "unpinned"
            }
        ),
        server,
        payload_bytes,
        samples,
        one_way_p50_us: (p50 * 100.0).round() / 100.0,
        one_way_p99_us: (p99 * 100.0).round() / 100.0,
    };
    let text = serde_json::to_string_pretty(&cal).expect("serialise") + "\n";
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    println!("wrote {}", path.display());
}
