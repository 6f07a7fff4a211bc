//! `redis-server` child processes on 127.0.0.1 free ports, stopped by pid
//! (SIGTERM, then SIGKILL) when dropped — only processes this harness
//! started. The same approach as the integration test `tests/tests/redis_workers.rs`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One redis-server child.
#[derive(Debug)]
pub struct RedisProc {
    child: Option<Child>,
    /// Its port on 127.0.0.1.
    pub port: u16,
    dir: PathBuf,
}

/// A port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_or(0, |a| a.port())
}

fn spawn(port: u16, dir: &Path) -> std::io::Result<Child> {
    Command::new("redis-server")
        .args(["--port", &port.to_string()])
        .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        // DEBUG (SLEEP, POPULATE) from loopback connections only.
        .args(["--enable-debug-command", "local"])
        .arg("--dir")
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
}

/// Whether something answers PING on `port` within 200 ms.
pub async fn answers(port: u16) -> bool {
    let fut = async {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
        let mut c = client.get_multiplexed_async_connection().await.ok()?;
        redis::cmd("PING").query_async::<String>(&mut c).await.ok()
    };
    matches!(
        tokio::time::timeout(Duration::from_millis(200), fut).await,
        Ok(Some(_))
    )
}

impl RedisProc {
    /// Start a server in `dir` (created) and wait (bounded, 10 s) until it
    /// answers; retries on a fresh port if it exits at once.
    ///
    /// # Errors
    /// redis-server missing or never answering.
    pub async fn start(dir: &Path) -> Result<Self, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for _ in 0..5 {
            let port = free_port();
            let mut p = Self {
                child: None,
                port,
                dir: dir.to_path_buf(),
            };
            if p.restart().await.is_ok() {
                return Ok(p);
            }
        }
        Err(
            "could not start redis-server (is it installed? scripts/test.sh installs it)"
                .to_owned(),
        )
    }

    /// (Re)start the server on its port, waiting until it answers (≤ 10 s).
    ///
    /// # Errors
    /// The process could not start or never answered.
    pub async fn restart(&mut self) -> Result<(), String> {
        self.stop();
        // Owned by `self` from the moment it exists: if this future is
        // dropped while waiting (SIGTERM early in a run), `Drop` stops it
        // (found by a fresh-eyes run: a server spawned during the wait
        // outlived an interrupted `evaluate`).
        self.child = Some(spawn(self.port, &self.dir).map_err(|e| format!("redis-server: {e}"))?);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                self.child = None;
                return Err(format!(
                    "redis-server on port {} exited: {status}",
                    self.port
                ));
            }
            if answers(self.port).await {
                return Ok(());
            }
            if Instant::now() >= deadline {
                self.kill();
                return Err(format!(
                    "redis-server on port {} did not answer within 10 s",
                    self.port
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kill the server at once (SIGKILL by pid), as a crash.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stop the server: SIGTERM by pid, SIGKILL after 3 s.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .stderr(Stdio::null())
                .status();
            let deadline = Instant::now() + Duration::from_secs(3);
            while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for RedisProc {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A scratch directory removed when dropped.
#[derive(Debug)]
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// A fresh directory under the system temp dir.
    pub fn new(tag: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Self(std::env::temp_dir().join(format!("evaluate-{tag}-{}-{nanos}", std::process::id())))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
