//! The router's cache-aside rule in the `cache` scenario, the same for
//! every arm (it runs inside [`super::conns::Conns`]'s send, the one
//! request path all arms share):
//!
//! - GET: read the picked worker; on a nil, read the origin, wait the miss
//!   penalty, and SET the value on the picked worker (the worker's
//!   `allkeys-lru` makes room);
//! - PUT: SET the origin, then the picked worker.
//!
//! The miss penalty is a sleep on the router side, not `DEBUG SLEEP` on the
//! origin: the origin stands for a database with ample concurrency, so a
//! miss costs a fixed delay however many misses overlap. A `DEBUG SLEEP`
//! would hold the origin's only thread, queue every arm's misses behind
//! each other, and measure the origin's queue rather than the routing.
//!
//! The router counts its own hits and misses per worker as each GET's
//! answer arrives, to check against the workers' `INFO` counters.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::MultiplexedConnection;

use super::request::Work;
use crate::router::Op;

/// Why a cache-aside request failed.
#[derive(Debug)]
pub enum Failed {
    /// The worker failed (refused, dropped, error reply).
    Worker(redis::RedisError),
    /// The origin failed: an error, not retried on another worker.
    Origin,
}

/// The router's own cache counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouterCounts {
    /// GETs answered with a value, per worker.
    pub hits: Vec<u64>,
    /// GETs answered nil, per worker.
    pub misses: Vec<u64>,
    /// Reads of the origin (one per miss).
    pub origin_reads: u64,
}

impl RouterCounts {
    /// The counts since `earlier` (per worker and in total).
    pub fn since(&self, earlier: &Self) -> Self {
        let sub = |a: &[u64], b: &[u64]| -> Vec<u64> {
            a.iter()
                .enumerate()
                .map(|(i, v)| v.saturating_sub(b.get(i).copied().unwrap_or(0)))
                .collect()
        };
        Self {
            hits: sub(&self.hits, &earlier.hits),
            misses: sub(&self.misses, &earlier.misses),
            origin_reads: self.origin_reads.saturating_sub(earlier.origin_reads),
        }
    }
}

/// The origin and the router's counters.
pub struct CacheAside {
    origin: MultiplexedConnection,
    miss_penalty: Duration,
    /// What a PUT writes.
    value: Vec<u8>,
    hits: Vec<AtomicU64>,
    misses: Vec<AtomicU64>,
    origin_reads: AtomicU64,
}

impl CacheAside {
    /// Connect to the origin on 127.0.0.1:`origin_port`, for `n` workers;
    /// PUTs write `value_bytes` bytes.
    ///
    /// # Errors
    /// The origin cannot be reached.
    pub async fn connect(
        origin_port: u16,
        n: usize,
        miss_penalty: Duration,
        value_bytes: usize,
    ) -> Result<Self, String> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{origin_port}/"))
            .map_err(|e| format!("origin: {e}"))?;
        let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
        let origin = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| format!("origin on port {origin_port}: {e}"))?;
        Ok(Self {
            origin,
            miss_penalty,
            value: vec![b'v'; value_bytes],
            hits: (0..n).map(|_| AtomicU64::new(0)).collect(),
            misses: (0..n).map(|_| AtomicU64::new(0)).collect(),
            origin_reads: AtomicU64::new(0),
        })
    }

    /// The counts so far.
    pub fn counts(&self) -> RouterCounts {
        let load = |v: &[AtomicU64]| v.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        RouterCounts {
            hits: load(&self.hits),
            misses: load(&self.misses),
            origin_reads: self.origin_reads.load(Ordering::Relaxed),
        }
    }

    /// Serve `work` on `worker` over `conn`, cache-aside: for a GET,
    /// whether the worker's cache held the key (`Some(false)`: a nil GET,
    /// a miss filled from the origin); `None` for a PUT.
    ///
    /// # Errors
    /// The worker's or the origin's failure.
    pub async fn serve(
        &self,
        worker: usize,
        conn: &mut MultiplexedConnection,
        work: &Work,
    ) -> Result<Option<bool>, Failed> {
        match work.op {
            Op::Put => {
                let mut origin = self.origin.clone();
                set(&mut origin, &work.key, &self.value)
                    .await
                    .map_err(|_| Failed::Origin)?;
                set(conn, &work.key, &self.value)
                    .await
                    .map_err(Failed::Worker)?;
                Ok(None)
            }
            Op::Get => {
                let cached: Option<Vec<u8>> = redis::cmd("GET")
                    .arg(&work.key)
                    .query_async(conn)
                    .await
                    .map_err(Failed::Worker)?;
                if cached.is_some() {
                    bump(&self.hits, worker);
                    return Ok(Some(true));
                }
                bump(&self.misses, worker);
                let mut origin = self.origin.clone();
                let stored: Option<Vec<u8>> = redis::cmd("GET")
                    .arg(&work.key)
                    .query_async(&mut origin)
                    .await
                    .map_err(|_| Failed::Origin)?;
                self.origin_reads.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(self.miss_penalty).await;
                let value = stored.as_deref().unwrap_or(&self.value);
                set(conn, &work.key, value).await.map_err(Failed::Worker)?;
                Ok(Some(false))
            }
        }
    }
}

fn bump(counters: &[AtomicU64], worker: usize) {
    if let Some(c) = counters.get(worker) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

async fn set(conn: &mut MultiplexedConnection, key: &str, value: &[u8]) -> redis::RedisResult<()> {
    redis::cmd("SET")
        .arg(key)
        .arg(value)
        .query_async(conn)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_since_a_snapshot_are_per_worker_deltas() {
        let before = RouterCounts {
            hits: vec![10, 5],
            misses: vec![2, 1],
            origin_reads: 3,
        };
        let after = RouterCounts {
            hits: vec![25, 5],
            misses: vec![4, 9],
            origin_reads: 13,
        };
        assert_eq!(
            after.since(&before),
            RouterCounts {
                hits: vec![15, 0],
                misses: vec![2, 8],
                origin_reads: 10,
            }
        );
    }
}
