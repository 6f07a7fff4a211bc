//! The `[bus]` section: scorer replicas, routers and agents sharing one
//! view over NATS. Off by default (`nats_url` empty): one process holds
//! the whole picture, as before. With `nats_url` set, the replica
//! publishes what it accepts and applies what its peers publish (see
//! `docs/api.md`, "Bus"). Credentials go in their own keys, never in the
//! URL, and are redacted like the other secrets; the environment form is
//! `SCORER_BUS__<KEY>` (e.g. `SCORER_BUS__PASSWORD`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Default [`BusConfig::max_message_bytes`]: 1 MiB, NATS's own default
/// `max_payload`.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1024 * 1024;
/// Default [`BusConfig::telemetry_max_age_ms`]: ten minutes.
pub const DEFAULT_TELEMETRY_MAX_AGE_MS: u64 = 600_000;
/// Default [`BusConfig::outbox_capacity`].
pub const DEFAULT_OUTBOX_CAPACITY: usize = 4_096;
/// Default [`BusConfig::connect_timeout_ms`].
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 2_000;
/// Default [`BusConfig::stream_replicas`]: one copy, what a single
/// nats-server holds.
pub const DEFAULT_STREAM_REPLICAS: usize = 1;
/// Most [`BusConfig::stream_replicas`]: JetStream's own limit.
pub const MAX_STREAM_REPLICAS: usize = 5;
/// Default [`BusConfig::log_ack_wait_ms`]: how long a log writer may hold
/// a record batch unacknowledged before it goes to another writer.
pub const DEFAULT_LOG_ACK_WAIT_MS: u64 = 30_000;
/// Largest [`BusConfig::max_message_bytes`]: NATS's own ceiling, 64 MiB.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// `[bus]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BusConfig {
    /// NATS server URLs, comma-separated (`nats://host:4222` or
    /// `tls://host:4222`); empty: no bus. Default empty.
    pub nats_url: String,
    /// This replica's name on the bus, 1..=32 bytes of ASCII letters,
    /// digits, `-`, `_`, `.`; it must differ between replicas. Empty: the
    /// host name and the process id. Default empty.
    pub replica_id: String,
    /// NATS user, with `password`.
    pub user: Option<String>,
    /// NATS password, with `user` (secret).
    pub password: Option<String>,
    /// NATS token (secret), instead of `user`/`password`.
    pub token: Option<String>,
    /// NATS nkey seed (secret, starts with `SU`), instead of the others.
    /// With several kinds set, one is used: `nkey_seed`, else `token`, else
    /// `user`/`password` ([`BusConfig::credential`]).
    pub nkey_seed: Option<String>,
    /// PEM file of the CA that signs the NATS server's certificate; set, the
    /// connection must use TLS.
    pub tls_ca_path: Option<PathBuf>,
    /// Largest message accepted from the bus, bytes; a larger one is
    /// refused and counted. Default 1 MiB.
    pub max_message_bytes: usize,
    /// How long the telemetry stream keeps a worker's last report, ms.
    /// Default 600 000.
    pub telemetry_max_age_ms: u64,
    /// Messages waiting to be published; when it is full, a new one is
    /// dropped and counted (a request never waits for the bus). Default 4096.
    pub outbox_capacity: usize,
    /// How long one connection attempt may take, ms. Default 2000.
    pub connect_timeout_ms: u64,
    /// Copies the cluster keeps of the telemetry stream, the state bucket
    /// and the records stream, 1..=5 (JetStream's `num_replicas`); on a three-node cluster,
    /// 3 keeps them through the loss of a node. Applied when the replica
    /// that starts first creates them. Default 1.
    pub stream_replicas: usize,
    /// Whether this replica is one of the log writers: it takes record
    /// batches from the `SCORER_DECISIONS` stream (each batch goes to one
    /// writer) and writes them to its own `[log]` directory. Whatever the
    /// value, a replica on the bus publishes the records it accepts to the
    /// stream instead of writing them itself. Default true.
    pub log_writer: bool,
    /// How long a log writer may hold a batch without acknowledging it
    /// before the stream delivers it to another writer, ms; every writer
    /// should use the same value (the last one to start sets it). Default
    /// 30 000.
    pub log_ack_wait_ms: u64,
}

impl Default for BusConfig {
    fn default() -> Self {
        Self {
            nats_url: String::new(),
            replica_id: String::new(),
            user: None,
            password: None,
            token: None,
            nkey_seed: None,
            tls_ca_path: None,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            telemetry_max_age_ms: DEFAULT_TELEMETRY_MAX_AGE_MS,
            outbox_capacity: DEFAULT_OUTBOX_CAPACITY,
            connect_timeout_ms: DEFAULT_CONNECT_TIMEOUT_MS,
            stream_replicas: DEFAULT_STREAM_REPLICAS,
            log_writer: true,
            log_ack_wait_ms: DEFAULT_LOG_ACK_WAIT_MS,
        }
    }
}

/// The one credential the replica presents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BusCredential<'a> {
    /// None: the server must be open.
    None,
    /// `user` and `password`.
    UserPassword(&'a str, &'a str),
    /// `token`.
    Token(&'a str),
    /// `nkey_seed`.
    Nkey(&'a str),
}

impl BusConfig {
    /// The credential presented: `nkey_seed`, else `token`, else
    /// `user`/`password`; the count of kinds set is the second value (a
    /// replica warns when it is above 1).
    pub fn credential(&self) -> (BusCredential<'_>, usize) {
        let set = usize::from(self.nkey_seed.is_some())
            + usize::from(self.token.is_some())
            + usize::from(self.user.is_some());
        let c = match (&self.nkey_seed, &self.token, &self.user, &self.password) {
            (Some(seed), _, _, _) => BusCredential::Nkey(seed),
            (None, Some(t), _, _) => BusCredential::Token(t),
            (None, None, Some(u), Some(p)) => BusCredential::UserPassword(u, p),
            _ => BusCredential::None,
        };
        (c, set)
    }

    /// Whether the bus is on.
    pub fn enabled(&self) -> bool {
        !self.nats_url.trim().is_empty()
    }

    /// Check every value; `Err((key, reason))` names the first offending key.
    ///
    /// # Errors
    /// A URL that is not `nats://` or `tls://`, or carries credentials; a
    /// user without a password; a malformed replica id or nkey seed; a
    /// limit out of range.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        for url in self
            .nats_url
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
        {
            let Some(rest) = url
                .strip_prefix("nats://")
                .or_else(|| url.strip_prefix("tls://"))
            else {
                return Err((
                    "bus.nats_url",
                    format!("each URL must start with nats:// or tls://, got {url:?}"),
                ));
            };
            if rest.contains('@') {
                return Err((
                    "bus.nats_url",
                    "must not carry credentials: set bus.user/bus.password, bus.token or bus.nkey_seed"
                        .to_owned(),
                ));
            }
        }
        if !self.replica_id.is_empty() && !crate::view::is_valid_router_id(&self.replica_id) {
            return Err((
                "bus.replica_id",
                "must be 1..=32 bytes of ASCII letters, digits, `-`, `_` and `.`".to_owned(),
            ));
        }
        if self.user.is_some() != self.password.is_some() {
            return Err(("bus.user", "user and password go together".to_owned()));
        }
        if let Some(seed) = &self.nkey_seed
            && !(seed.starts_with("SU") && seed.len() == 58)
        {
            return Err((
                "bus.nkey_seed",
                "must be a user nkey seed: 58 characters starting with SU".to_owned(),
            ));
        }
        if !(1_024..=MAX_MESSAGE_BYTES).contains(&self.max_message_bytes) {
            return Err((
                "bus.max_message_bytes",
                format!(
                    "must be 1024..={MAX_MESSAGE_BYTES}, got {}",
                    self.max_message_bytes
                ),
            ));
        }
        if !(1_000..=86_400_000).contains(&self.telemetry_max_age_ms) {
            return Err((
                "bus.telemetry_max_age_ms",
                format!("must be 1000..=86400000, got {}", self.telemetry_max_age_ms),
            ));
        }
        if !(1..=1_000_000).contains(&self.outbox_capacity) {
            return Err((
                "bus.outbox_capacity",
                format!("must be 1..=1000000, got {}", self.outbox_capacity),
            ));
        }
        if !(100..=3_600_000).contains(&self.log_ack_wait_ms) {
            return Err((
                "bus.log_ack_wait_ms",
                format!("must be 100..=3600000, got {}", self.log_ack_wait_ms),
            ));
        }
        if !(1..=60_000).contains(&self.connect_timeout_ms) {
            return Err((
                "bus.connect_timeout_ms",
                format!("must be 1..=60000, got {}", self.connect_timeout_ms),
            ));
        }
        if !(1..=MAX_STREAM_REPLICAS).contains(&self.stream_replicas) {
            return Err((
                "bus.stream_replicas",
                format!(
                    "must be 1..={MAX_STREAM_REPLICAS}, got {}",
                    self.stream_replicas
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bus_is_off_by_default_and_valid() {
        let c = BusConfig::default();
        assert!(!c.enabled());
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn one_credential_is_presented_the_nkey_first() {
        let mut c = BusConfig {
            token: Some("t".into()),
            user: Some("u".into()),
            password: Some("p".into()),
            ..BusConfig::default()
        };
        assert_eq!(c.credential(), (BusCredential::Token("t"), 2));
        c.token = None;
        assert_eq!(c.credential(), (BusCredential::UserPassword("u", "p"), 1));
        c.password = None;
        assert_eq!(c.validate().unwrap_err().0, "bus.user");
    }

    #[test]
    fn credentials_in_the_url_or_a_bad_replica_id_are_refused() {
        let c = BusConfig {
            nats_url: "nats://u:p@127.0.0.1:4222".into(),
            ..BusConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().0, "bus.nats_url");
        let c = BusConfig {
            nats_url: "http://127.0.0.1:4222".into(),
            ..BusConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().0, "bus.nats_url");
        let c = BusConfig {
            nats_url: "nats://127.0.0.1:4222, tls://b:4222".into(),
            replica_id: "replica 1".into(),
            ..BusConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().0, "bus.replica_id");
    }
}
