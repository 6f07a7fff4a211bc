//! Talking to one redis-server: a dedicated connection, timed `PING`s and
//! `INFO`, every call bounded by the probe timeout.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, ConnectionAddr, IntoConnectionInfo};
use tokio::time::{Instant, timeout};

use crate::config::WorkerSpec;
use crate::redis_info::{InfoSample, ProbeOutcome, parse_info};

/// Why a call to the server did not produce an answer.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// No answer within the probe timeout.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// There is no connection and none could be made.
    #[error("not connected")]
    NotConnected,
    /// The server or the connection reported an error.
    #[error(transparent)]
    Redis(#[from] redis::RedisError),
}

/// One worker's dedicated connection. Calls take at most the probe timeout;
/// a broken connection is dropped and re-made by [`Probe::connect`].
pub struct Probe {
    client: Client,
    conn: Option<MultiplexedConnection>,
    timeout: Duration,
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe")
            .field("addr", self.client.get_connection_info().addr())
            .field("connected", &self.conn.is_some())
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Probe {
    /// A disconnected probe for `worker`; `timeout` bounds every call.
    pub fn new(worker: &WorkerSpec, timeout: Duration) -> Result<Self, ProbeError> {
        let info = ConnectionAddr::Tcp(worker.host.clone(), worker.port).into_connection_info()?;
        // No `CLIENT SETINFO` on connect: the handshake must not need a
        // command round trip, so reconnecting works while the server is paused.
        let redis = info.redis_settings().clone().set_skip_set_lib_name();
        let client = Client::open(info.set_redis_settings(redis))?;
        Ok(Self {
            client,
            conn: None,
            timeout,
        })
    }

    /// Whether a connection is currently held.
    pub fn is_connected(&self) -> bool {
        self.conn.is_some()
    }

    /// Connects if not connected, within the probe timeout.
    pub async fn connect(&mut self) -> Result<(), ProbeError> {
        if self.conn.is_some() {
            return Ok(());
        }
        // Timeouts are enforced here, per call, rather than by redis-rs.
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(None);
        let fut = self
            .client
            .get_multiplexed_async_connection_with_config(&config);
        let conn = timeout(self.timeout, fut)
            .await
            .map_err(|_| ProbeError::Timeout(self.timeout))??;
        self.conn = Some(conn);
        Ok(())
    }

    /// Drops the connection; the next [`Probe::connect`] makes a new one.
    pub fn disconnect(&mut self) {
        self.conn = None;
    }

    /// One timed `PING` on the current connection. A time-out leaves the
    /// connection in place (a paused server answers later); a broken
    /// connection is dropped.
    pub async fn ping(&mut self) -> ProbeOutcome {
        let start = Instant::now();
        match self.call::<redis::Value>(redis::cmd("PING")).await {
            Ok(_) => ProbeOutcome::Ok(start.elapsed()),
            Err(ProbeError::Timeout(_)) => ProbeOutcome::TimedOut,
            Err(ProbeError::NotConnected) => ProbeOutcome::Failed {
                elapsed: start.elapsed(),
                reached: false,
            },
            Err(ProbeError::Redis(_)) => ProbeOutcome::Failed {
                elapsed: start.elapsed(),
                reached: true,
            },
        }
    }

    /// `INFO` (default sections), parsed.
    pub async fn info(&mut self) -> Result<InfoSample, ProbeError> {
        let text: String = self.call(redis::cmd("INFO")).await?;
        Ok(parse_info(&text))
    }

    /// One `SCAN cursor COUNT count`: the next cursor and the keys.
    pub async fn scan(
        &mut self,
        cursor: u64,
        count: u32,
    ) -> Result<(u64, Vec<Vec<u8>>), ProbeError> {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor).arg("COUNT").arg(count);
        self.call(cmd).await
    }

    async fn call<T: redis::FromRedisValue>(&mut self, cmd: redis::Cmd) -> Result<T, ProbeError> {
        let conn = self.conn.as_mut().ok_or(ProbeError::NotConnected)?;
        match timeout(self.timeout, cmd.query_async::<T>(conn)).await {
            Err(_) => Err(ProbeError::Timeout(self.timeout)),
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                if e.is_unrecoverable_error() || e.is_io_error() || e.is_connection_dropped() {
                    self.conn = None;
                }
                Err(ProbeError::Redis(e))
            }
        }
    }
}
