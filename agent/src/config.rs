//! Agent configuration: which service to report to, which workers to poll,
//! and the probing cadence.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Default scoring-service base URL.
pub const DEFAULT_SERVICE_URL: &str = "http://127.0.0.1:8080";
/// Default report interval per worker, milliseconds.
pub const DEFAULT_INTERVAL_MS: u64 = 1000;
/// Default timeout of one probe (PING, INFO or connect), milliseconds.
pub const DEFAULT_PROBE_TIMEOUT_MS: u64 = 250;
/// Default number of timed PINGs per worker per report interval.
pub const DEFAULT_PINGS_PER_INTERVAL: u32 = 10;

/// Longest accepted report interval, milliseconds (one hour).
pub const MAX_INTERVAL_MS: u64 = 3_600_000;
/// Most timed PINGs accepted per interval.
pub const MAX_PINGS_PER_INTERVAL: u32 = 10_000;
/// Longest accepted worker id, bytes (the service's limit).
pub const MAX_WORKER_ID_BYTES: usize = 128;

/// A configuration value that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A `--worker` value is not of the form `id=host:port`.
    #[error("invalid worker spec {spec:?}: {reason}")]
    InvalidWorker {
        /// The offending value as given.
        spec: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The same worker id was given twice.
    #[error("duplicate worker id {0:?}")]
    DuplicateWorker(String),
    /// No worker was configured.
    #[error("at least one worker is required")]
    NoWorkers,
    /// The service URL does not parse as an absolute http(s) URL.
    #[error("invalid service URL {url:?}: {reason}")]
    InvalidServiceUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The timing parameters are inconsistent.
    #[error("invalid timing: {0}")]
    InvalidTiming(&'static str),
    /// A cache digest setting is out of bounds.
    #[error("invalid digest setting: {0}")]
    InvalidDigest(&'static str),
    /// A bus setting cannot be used.
    #[error("invalid {key}: {reason}")]
    InvalidBus {
        /// The setting, as the service's configuration names it.
        key: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

/// One redis-server worker to poll, parsed from `id=host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerSpec {
    /// Worker id as reported to the service (1..=128 bytes, no `=`, and the
    /// service's character rule:
    /// [`scorer_core::telemetry::validate::worker_id_chars_problem`]).
    pub id: String,
    /// Host name or IP address of the redis-server (IPv6 without brackets).
    pub host: String,
    /// TCP port of the redis-server.
    pub port: u16,
}

impl FromStr for WorkerSpec {
    type Err = ConfigError;

    /// Parses `id=host:port`; an IPv6 host is written in brackets,
    /// e.g. `w1=[::1]:6379`.
    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let bad = |reason| ConfigError::InvalidWorker {
            spec: spec.to_owned(),
            reason,
        };
        let (id, addr) = spec.split_once('=').ok_or(bad("expected id=host:port"))?;
        if id.is_empty() || id.len() > MAX_WORKER_ID_BYTES {
            return Err(bad("worker id must be 1..=128 bytes"));
        }
        // The service's own rule (no control or invisible formatting
        // characters, no whitespace at either end): an id it would refuse
        // with 422 every interval is refused here, at start.
        if let Some(problem) = scorer_core::telemetry::validate::worker_id_chars_problem(id) {
            return Err(bad(problem));
        }
        let (host, port) = addr.rsplit_once(':').ok_or(bad("expected host:port"))?;
        let host = match host.strip_prefix('[') {
            Some(rest) => rest.strip_suffix(']').ok_or(bad("unclosed '[' in host"))?,
            None if host.contains(':') => return Err(bad("IPv6 hosts must be in brackets")),
            None => host,
        };
        if host.is_empty() {
            return Err(bad("empty host"));
        }
        let port: u16 = port.parse().map_err(|_| bad("port must be 1..=65535"))?;
        if port == 0 {
            return Err(bad("port must be 1..=65535"));
        }
        Ok(Self {
            id: id.to_owned(),
            host: host.to_owned(),
            port,
        })
    }
}

impl fmt::Display for WorkerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "{}=[{}]:{}", self.id, self.host, self.port)
        } else {
            write!(f, "{}={}:{}", self.id, self.host, self.port)
        }
    }
}

/// Everything [`crate::run`] needs.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Base URL of the scoring service; snapshots go to `{service_url}/v1/telemetry`.
    pub service_url: String,
    /// The workers to poll, each independently; ids must be distinct.
    pub workers: Vec<WorkerSpec>,
    /// Report interval per worker, milliseconds
    /// (`2 * probe_timeout_ms ..= 3_600_000`).
    pub interval_ms: u64,
    /// Timeout of one probe (PING, INFO or connect attempt), milliseconds
    /// (`1 ..= interval_ms / 2`). A timed-out PING counts as an error and as
    /// an RTT sample of exactly this many milliseconds.
    pub probe_timeout_ms: u64,
    /// Timed PINGs per worker per interval (`1..=10_000`), started evenly
    /// over the first `interval_ms - 2 * probe_timeout_ms` of the interval;
    /// the last `probe_timeout_ms` are reserved for `INFO`. While the server
    /// is stalled, PINGs that would overrun into the `INFO` slot are skipped.
    pub pings_per_interval: u32,
    /// The token, CA and client certificate the reports carry.
    pub credentials: scorer_client::Credentials,
    /// Each worker's cache digest (off by default).
    pub digest: crate::digest::DigestConfig,
    /// The bus to publish on instead of posting to the service: its
    /// `nats_url`, credentials and TLS, as the service's `[bus]` section
    /// names them. Off (`nats_url` empty) by default.
    pub bus: scorer_engine::config::bus::BusConfig,
}

impl AgentConfig {
    /// A configuration with default timing for the given service and workers.
    pub fn new(service_url: impl Into<String>, workers: Vec<WorkerSpec>) -> Self {
        Self {
            service_url: service_url.into(),
            workers,
            interval_ms: DEFAULT_INTERVAL_MS,
            probe_timeout_ms: DEFAULT_PROBE_TIMEOUT_MS,
            pings_per_interval: DEFAULT_PINGS_PER_INTERVAL,
            credentials: scorer_client::Credentials::none(),
            digest: crate::digest::DigestConfig::default(),
            bus: scorer_engine::config::bus::BusConfig::default(),
        }
    }

    /// Checks the configuration and returns the telemetry endpoint URL
    /// (`{service_url}/v1/telemetry`).
    pub fn validate(&self) -> Result<reqwest::Url, ConfigError> {
        if self.workers.is_empty() {
            return Err(ConfigError::NoWorkers);
        }
        let mut ids: Vec<&str> = self.workers.iter().map(|w| w.id.as_str()).collect();
        ids.sort_unstable();
        if let Some(pair) = ids.windows(2).find(|p| p[0] == p[1]) {
            return Err(ConfigError::DuplicateWorker(pair[0].to_owned()));
        }
        if self.probe_timeout_ms == 0 {
            return Err(ConfigError::InvalidTiming("probe timeout must be >= 1 ms"));
        }
        if self.interval_ms > MAX_INTERVAL_MS {
            return Err(ConfigError::InvalidTiming("interval must be <= 3600000 ms"));
        }
        if self.probe_timeout_ms.saturating_mul(2) > self.interval_ms {
            return Err(ConfigError::InvalidTiming(
                "probe timeout must be at most half the interval",
            ));
        }
        if !(1..=MAX_PINGS_PER_INTERVAL).contains(&self.pings_per_interval) {
            return Err(ConfigError::InvalidTiming(
                "pings per interval must be 1..=10000",
            ));
        }
        self.digest.validate().map_err(ConfigError::InvalidDigest)?;
        self.bus
            .validate()
            .map_err(|(key, reason)| ConfigError::InvalidBus { key, reason })?;
        self.credentials.check_url(&self.service_url).map_err(|e| {
            ConfigError::InvalidServiceUrl {
                url: redact(&self.service_url),
                reason: e.to_string(),
            }
        })?;
        telemetry_url(&self.service_url)
    }

    /// The report interval.
    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms)
    }

    /// The probe timeout.
    pub fn probe_timeout(&self) -> Duration {
        Duration::from_millis(self.probe_timeout_ms)
    }
}

/// `{base}/v1/telemetry`, tolerating a trailing `/` on `base`. `base` is
/// the service's base URL: scheme, host, port and at most a path prefix (a
/// service behind a reverse proxy); a query, a fragment, credentials or a
/// base that already ends in `/v1/telemetry` are refused, since the
/// telemetry path would be appended after them.
fn telemetry_url(base: &str) -> Result<reqwest::Url, ConfigError> {
    let bad = |reason: String| ConfigError::InvalidServiceUrl {
        url: redact(base),
        reason,
    };
    let parsed = reqwest::Url::parse(base).map_err(|e| bad(e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("scheme must be http or https".to_owned()));
    }
    if parsed.host_str().is_none() {
        return Err(bad("missing host".to_owned()));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad(
            "credentials in the URL are not supported (the telemetry endpoint takes none)"
                .to_owned(),
        ));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(bad(
            "give the service's base URL without a query or fragment".to_owned(),
        ));
    }
    let prefix = parsed.path().trim_end_matches('/');
    if prefix.ends_with("/v1/telemetry") {
        return Err(bad(
            "give the service's base URL (e.g. http://127.0.0.1:8080); /v1/telemetry is appended"
                .to_owned(),
        ));
    }
    let mut url = parsed.clone();
    url.set_path(&format!("{prefix}/v1/telemetry"));
    Ok(url)
}

/// `url` with any credentials hidden, for messages and logs: everything of
/// the authority (after `scheme://`, or from the start) before its last `@`
/// becomes `***`, whether or not the URL parses (found by a fresh-eyes run:
/// a bad port printed the password).
fn redact(url: &str) -> String {
    let (prefix, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{prefix}***{}", &rest[at..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(spec: &str) -> WorkerSpec {
        spec.parse().unwrap()
    }

    #[test]
    fn parses_worker_specs() {
        assert_eq!(
            w("w1=127.0.0.1:16379"),
            WorkerSpec {
                id: "w1".into(),
                host: "127.0.0.1".into(),
                port: 16379
            }
        );
        let v6 = w("w2=[::1]:6379");
        assert_eq!((v6.host.as_str(), v6.port), ("::1", 6379));
        assert_eq!(v6.to_string(), "w2=[::1]:6379");
        assert_eq!(w("a=redis.local:1").to_string(), "a=redis.local:1");
    }

    #[test]
    fn rejects_bad_worker_specs() {
        for bad in [
            "",
            "w1",
            "=h:1",
            "w1=h",
            "w1=:1",
            "w1=h:0",
            "w1=h:65536",
            "w1=h:x",
            "w1=::1:6379",
            "w1=[::1:6379",
            "w\u{7}=h:1",
            // The service's id rule (found by a fresh-eyes run: these were
            // accepted, then refused by the service every second).
            "w3 =h:1",
            " w3=h:1",
            "w\u{202e}3=h:1",
            "\u{feff}w3=h:1",
        ] {
            assert!(bad.parse::<WorkerSpec>().is_err(), "{bad:?} accepted");
        }
        let long = format!("{}=h:1", "x".repeat(129));
        assert!(long.parse::<WorkerSpec>().is_err());
    }

    #[test]
    fn validates_config() {
        let cfg = AgentConfig::new("http://127.0.0.1:8080/", vec![w("a=h:1"), w("b=h:2")]);
        assert_eq!(
            cfg.validate().unwrap().as_str(),
            "http://127.0.0.1:8080/v1/telemetry"
        );

        let dup = AgentConfig::new("http://x", vec![w("a=h:1"), w("a=h:2")]);
        assert_eq!(
            dup.validate(),
            Err(ConfigError::DuplicateWorker("a".into()))
        );
        assert_eq!(
            AgentConfig::new("http://x", vec![]).validate(),
            Err(ConfigError::NoWorkers)
        );
        assert!(
            AgentConfig::new("ftp://x", vec![w("a=h:1")])
                .validate()
                .is_err()
        );
        assert!(
            AgentConfig::new("not a url", vec![w("a=h:1")])
                .validate()
                .is_err()
        );

        // A path prefix is kept (a service behind a proxy); query, fragment,
        // credentials and a full telemetry URL are refused, the password
        // never echoed.
        assert_eq!(
            AgentConfig::new("http://h:1/scorer/", vec![w("a=h:1")])
                .validate()
                .unwrap()
                .as_str(),
            "http://h:1/scorer/v1/telemetry"
        );
        for url in [
            "http://h:1/?x=1",
            "http://h:1/#f",
            "http://h:1/v1/telemetry",
            "http://user:pw@h:1/",
        ] {
            let e = AgentConfig::new(url, vec![w("a=h:1")]).validate();
            assert!(
                matches!(e, Err(ConfigError::InvalidServiceUrl { .. })),
                "{url}: {e:?}"
            );
        }
        let e = AgentConfig::new("http://user:s3cret@h:1/", vec![w("a=h:1")])
            .validate()
            .unwrap_err()
            .to_string();
        assert!(!e.contains("s3cret") && e.contains("***"), "{e}");
        // Nor when the URL does not parse at all.
        for url in [
            "http://admin:s3cret@127.0.0.1:99999/",
            "http://admin:s3cret@",
            "admin:s3cret@127.0.0.1:18499",
        ] {
            let e = AgentConfig::new(url, vec![w("a=h:1")])
                .validate()
                .unwrap_err()
                .to_string();
            assert!(!e.contains("s3cret") && e.contains("***"), "{e}");
        }

        let mut slow = AgentConfig::new("http://x", vec![w("a=h:1")]);
        slow.probe_timeout_ms = 500;
        assert!(slow.validate().is_ok());
        slow.probe_timeout_ms = 501;
        assert!(slow.validate().is_err());
        slow.probe_timeout_ms = u64::MAX;
        assert!(slow.validate().is_err());
        slow.probe_timeout_ms = 0;
        assert!(slow.validate().is_err());
        let mut none = AgentConfig::new("http://x", vec![w("a=h:1")]);
        none.pings_per_interval = 0;
        assert!(none.validate().is_err());
        none.pings_per_interval = 10_001;
        assert!(none.validate().is_err());
        let mut long = AgentConfig::new("http://x", vec![w("a=h:1")]);
        long.interval_ms = u64::MAX;
        assert!(long.validate().is_err());
    }

    #[test]
    fn a_bus_url_with_credentials_or_another_scheme_is_refused_naming_the_key() {
        let mut c = AgentConfig::new("http://x", vec![w("a=h:1")]);
        c.bus.nats_url = "nats://127.0.0.1:4222".into();
        assert!(c.validate().is_ok());
        for bad in [
            "http://127.0.0.1:4222",
            "nats://agent:s3cret@127.0.0.1:4222",
        ] {
            c.bus.nats_url = bad.into();
            let e = c.validate().expect_err(bad).to_string();
            assert!(e.starts_with("invalid bus.nats_url"), "{e}");
            assert!(!e.contains("s3cret"), "{e}");
        }
        c.bus.nats_url = "nats://127.0.0.1:4222".into();
        c.bus.user = Some("agent".into());
        let e = c.validate().expect_err("user without password").to_string();
        assert!(e.contains("bus.user"), "{e}");
    }
}
