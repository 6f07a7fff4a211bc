//! The connection: credentials and TLS from `[bus]`, the telemetry stream
//! and the state bucket set up, and the checks every inbound message goes
//! through.

use std::sync::Arc;
use std::time::Duration;

use async_nats::connection::State;
use async_nats::jetstream::{self, kv, stream};
use async_nats::{Client, ConnectOptions, HeaderMap};
use scorer_engine::config::bus::{BusConfig, BusCredential};

use crate::counters::{BusCounters, Refusal};
use crate::subject::{ORIGIN_HEADER, STATE_BUCKET, TELEMETRY_PREFIX, TELEMETRY_STREAM};

/// Why the bus could not be used.
#[derive(Debug, thiserror::Error)]
pub enum BusError {
    /// No connection to any of the URLs, or the credentials were refused.
    #[error("cannot connect to NATS at {url}: {reason}")]
    Connect {
        /// `bus.nats_url`.
        url: String,
        /// NATS's answer.
        reason: String,
    },
    /// A stream, bucket or subscription could not be set up.
    #[error("cannot set up {what} on NATS: {reason}")]
    Setup {
        /// What.
        what: &'static str,
        /// NATS's answer.
        reason: String,
    },
}

/// A connection to the bus, cheap to clone.
#[derive(Debug, Clone)]
pub struct Bus {
    pub(crate) client: Client,
    pub(crate) js: jetstream::Context,
    pub(crate) replica: Arc<str>,
    /// `<replica>/<instance>`: what this process writes as its origin. A
    /// replica restarted under the same name is another instance, so it
    /// applies what its previous life published (the overrides it took).
    pub(crate) origin: Arc<str>,
    pub(crate) max_message_bytes: usize,
    /// `bus.stream_replicas`: copies of each stream this replica creates.
    pub(crate) stream_replicas: usize,
    pub(crate) counters: Arc<BusCounters>,
}

impl Bus {
    /// Connects as `replica` with `cfg`'s URLs, credentials and TLS, and
    /// creates the telemetry stream, the state bucket and the records
    /// stream when they are missing. The client reconnects by itself
    /// afterwards, with backoff.
    ///
    /// # Errors
    /// [`BusError::Connect`] when no server answers within
    /// `bus.connect_timeout_ms` or the credentials are refused;
    /// [`BusError::Setup`] when JetStream is off on the server.
    pub async fn connect(cfg: &BusConfig, replica: &str) -> Result<Self, BusError> {
        Self::connect_counting(cfg, replica, Arc::default()).await
    }

    /// [`Bus::connect`], counting into `counters` (shared with what counts
    /// before the connection exists, such as a records outbox).
    ///
    /// # Errors
    /// As [`Bus::connect`].
    pub async fn connect_counting(
        cfg: &BusConfig,
        replica: &str,
        counters: Arc<BusCounters>,
    ) -> Result<Self, BusError> {
        let bus = Self::open(cfg, replica, counters).await?;
        bus.js
            .get_or_create_stream(stream::Config {
                name: TELEMETRY_STREAM.to_owned(),
                description: Some("every worker's latest report".to_owned()),
                subjects: vec![format!("{TELEMETRY_PREFIX}.>")],
                max_messages_per_subject: 1,
                max_age: Duration::from_millis(cfg.telemetry_max_age_ms),
                max_message_size: i32::try_from(cfg.max_message_bytes).unwrap_or(i32::MAX),
                num_replicas: cfg.stream_replicas,
                ..stream::Config::default()
            })
            .await
            .map_err(|e| BusError::Setup {
                what: "the telemetry stream",
                reason: e.to_string(),
            })?;
        bus.js
            .create_or_update_key_value(kv::Config {
                bucket: STATE_BUCKET.to_owned(),
                description: "the operators' overrides".to_owned(),
                history: 1,
                max_value_size: i32::try_from(cfg.max_message_bytes).unwrap_or(i32::MAX),
                num_replicas: cfg.stream_replicas,
                ..kv::Config::default()
            })
            .await
            .map_err(|e| BusError::Setup {
                what: "the state bucket",
                reason: e.to_string(),
            })?;
        bus.ensure_records_stream().await?;
        Ok(bus)
    }

    /// Connects as `name` with `cfg`'s URLs, credentials and TLS, and sets
    /// nothing up: what a peer that only publishes (an agent) needs, with
    /// no JetStream permission. Its core-NATS publishes on the telemetry
    /// subjects are kept by the stream the replicas created.
    ///
    /// # Errors
    /// [`BusError::Connect`] when no server answers within
    /// `bus.connect_timeout_ms` or the credentials are refused.
    pub async fn connect_publisher(cfg: &BusConfig, name: &str) -> Result<Self, BusError> {
        Self::open(cfg, name, Arc::default()).await
    }

    async fn open(
        cfg: &BusConfig,
        name: &str,
        counters: Arc<BusCounters>,
    ) -> Result<Self, BusError> {
        let mut opts = ConnectOptions::new()
            .name(format!("scorer-{name}"))
            .connection_timeout(Duration::from_millis(cfg.connect_timeout_ms));
        let (credential, kinds) = cfg.credential();
        if kinds > 1 {
            tracing::warn!(
                "several bus credentials are set; presenting one (nkey_seed, else token, else user/password)"
            );
        }
        opts = match credential {
            BusCredential::None => opts,
            BusCredential::UserPassword(u, p) => opts.user_and_password(u.into(), p.into()),
            BusCredential::Token(t) => opts.token(t.into()),
            BusCredential::Nkey(seed) => opts.nkey(seed.into()),
        };
        if let Some(ca) = &cfg.tls_ca_path {
            opts = opts.add_root_certificates(ca.clone()).require_tls(true);
        }
        let urls: Vec<&str> = cfg
            .nats_url
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .collect();
        let addrs: Vec<async_nats::ServerAddr> = urls
            .iter()
            .map(|u| u.parse())
            .collect::<Result<_, _>>()
            .map_err(|e: std::io::Error| BusError::Connect {
                url: cfg.nats_url.clone(),
                reason: e.to_string(),
            })?;
        let client = opts
            .connect(addrs.as_slice())
            .await
            .map_err(|e| BusError::Connect {
                url: cfg.nats_url.clone(),
                reason: e.to_string(),
            })?;
        let js = jetstream::new(client.clone());
        Ok(Self {
            client,
            js,
            replica: Arc::from(name),
            origin: Arc::from(format!("{name}/{}", instance()).as_str()),
            max_message_bytes: cfg.max_message_bytes,
            stream_replicas: cfg.stream_replicas,
            counters,
        })
    }

    /// This replica's name on the bus.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// What this process writes as its origin: `<replica>/<instance>`.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// What the bus refused, published, dropped and applied.
    pub fn counters(&self) -> &Arc<BusCounters> {
        &self.counters
    }

    /// Whether the connection is up now.
    pub fn connected(&self) -> bool {
        self.client.connection_state() == State::Connected
    }

    /// The client, to publish on a subject of one's own.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Waits until what was published so far reached the server.
    ///
    /// # Errors
    /// The connection is down.
    pub async fn flush(&self) -> Result<(), async_nats::Error> {
        self.client.flush().await.map_err(Into::into)
    }

    /// Publishes `value` as JSON on `subject` with this replica's origin;
    /// what cannot be serialised or handed to the connection is counted as
    /// dropped. Whether it was handed to the connection.
    pub(crate) async fn publish_json<T: serde::Serialize>(
        &self,
        kind: &str,
        subject: String,
        value: &T,
    ) -> bool {
        let Ok(body) = serde_json::to_vec(value) else {
            self.counters.dropped(kind);
            return false;
        };
        let mut headers = HeaderMap::new();
        headers.insert(ORIGIN_HEADER, &*self.origin);
        match self
            .client
            .publish_with_headers(subject, headers, body.into())
            .await
        {
            Ok(()) => {
                self.counters.published(kind);
                true
            }
            Err(_) => {
                self.counters.dropped(kind);
                false
            }
        }
    }

    /// The message's origin, or `None` when it is this replica's own.
    pub(crate) fn peer_origin(&self, headers: Option<&HeaderMap>) -> Option<Arc<str>> {
        let origin = headers
            .and_then(|h| h.get(ORIGIN_HEADER))
            .map_or("", |v| v.as_str());
        (origin != &*self.origin).then(|| Arc::from(origin))
    }

    /// Whether `len` bytes fit `bus.max_message_bytes` (counted when not).
    pub(crate) fn fits(&self, kind: &str, len: usize) -> bool {
        let fits = len <= self.max_message_bytes;
        if !fits {
            self.counters.refused(kind, Refusal::Oversized);
        }
        fits
    }

    /// `payload` as JSON of `T` (counted when not).
    pub(crate) fn parse<T: serde::de::DeserializeOwned>(
        &self,
        kind: &str,
        payload: &[u8],
    ) -> Option<T> {
        let parsed = serde_json::from_slice(payload).ok();
        if parsed.is_none() {
            self.counters.refused(kind, Refusal::Malformed);
        }
        parsed
    }
}

/// This process's instance: its start time and id, in hex.
fn instance() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{:x}{:x}", nanos & 0xffff_ffff_ffff, std::process::id())
}
