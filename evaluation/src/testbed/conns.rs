//! The router's connections to the `redis-server` workers: one multiplexed
//! connection per worker, re-established after an error. An attempt that
//! cannot connect, or whose connection the worker drops (a killed server),
//! ends [`Ended::Refused`]; an error reply ends [`Ended::Error`]. With
//! service times (the `loaded` scenario), each GET/SET is pipelined behind
//! a `DEBUG SLEEP` of the worker's mean times the request's cost, so the
//! request holds the server's only thread for a real service time without
//! burning CPU. In the `cache` scenario every request goes cache-aside
//! ([`CacheAside`]) instead, and a GET's reply says whether it was a hit.

use std::time::Duration;

use tokio::sync::RwLock;

use super::cache_aside::{CacheAside, Failed, RouterCounts};
use super::request::{Backend, Ended, Reply, Work};
use crate::router::Op;

/// Connections to the workers.
pub struct Conns {
    ports: Vec<u16>,
    conns: Vec<RwLock<Option<redis::aio::MultiplexedConnection>>>,
    /// Mean service time per worker, ms (`None`: no sleep).
    service_ms: Option<Vec<f64>>,
    cache: Option<CacheAside>,
}

impl Conns {
    /// For workers on `ports`; `service_ms`, if given, is each worker's mean
    /// `DEBUG SLEEP` per request, ms.
    pub fn new(ports: Vec<u16>, service_ms: Option<Vec<f64>>) -> Self {
        let conns = ports.iter().map(|_| RwLock::new(None)).collect();
        Self {
            ports,
            conns,
            service_ms,
            cache: None,
        }
    }

    /// Serve every request cache-aside through `cache`.
    #[must_use]
    pub fn with_cache(mut self, cache: CacheAside) -> Self {
        self.cache = Some(cache);
        self
    }

    /// The router's cache counts so far (`cache` scenario).
    pub fn cache_counts(&self) -> Option<RouterCounts> {
        self.cache.as_ref().map(CacheAside::counts)
    }

    /// How an attempt whose worker failed with `e` ended; the connection
    /// is re-established on the next attempt.
    async fn failed(&self, worker: usize, e: &redis::RedisError) -> Ended {
        self.reset(worker).await;
        if e.is_io_error() || e.is_connection_refusal() || e.is_connection_dropped() {
            Ended::Refused
        } else {
            Ended::Error
        }
    }

    async fn get(&self, i: usize) -> Option<redis::aio::MultiplexedConnection> {
        if let Some(c) = self.conns[i].read().await.clone() {
            return Some(c);
        }
        let mut w = self.conns[i].write().await;
        if w.is_none() {
            let client =
                redis::Client::open(format!("redis://127.0.0.1:{}/", self.ports[i])).ok()?;
            // No response timeout in the client (redis-rs defaults to
            // 500 ms): the per-request `--timeout-ms` alone decides, so a
            // slow reply counts as a timeout, not as an error, and a timeout
            // above 500 ms takes effect (found by a fresh-eyes run).
            let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
            let c = tokio::time::timeout(
                Duration::from_millis(300),
                client.get_multiplexed_async_connection_with_config(&config),
            )
            .await
            .ok()?
            .ok()?;
            *w = Some(c);
        }
        w.clone()
    }

    async fn reset(&self, i: usize) {
        *self.conns[i].write().await = None;
    }

    /// Wait (at most `limit`) until every worker has answered what was sent
    /// to it: a PING on each open connection queues behind its backlog, so
    /// the next arm does not inherit the queues of timed-out requests.
    pub async fn drain(&self, limit: Duration) {
        let all = async {
            for conn in &self.conns {
                let Some(mut c) = conn.read().await.clone() else {
                    continue;
                };
                let _ = redis::cmd("PING").query_async::<String>(&mut c).await;
            }
        };
        let _ = tokio::time::timeout(limit, all).await;
    }
}

impl Backend for Conns {
    async fn send(&self, worker: usize, work: &Work) -> Reply {
        let Some(mut c) = self.get(worker).await else {
            return Ended::Refused.into();
        };
        if let Some(cache) = &self.cache {
            return match cache.serve(worker, &mut c, work).await {
                Ok(cache_hit) => Reply {
                    ended: Ended::Ok,
                    cache_hit,
                },
                Err(Failed::Origin) => Ended::Error.into(),
                Err(Failed::Worker(e)) => self.failed(worker, &e).await.into(),
            };
        }
        let mut cmd = match work.op {
            Op::Get => redis::cmd("GET"),
            Op::Put => redis::cmd("SET"),
        };
        cmd.arg(&work.key);
        if work.op == Op::Put {
            cmd.arg("v");
        }
        let r = match &self.service_ms {
            Some(means) => {
                let secs = means[worker] * work.cost / 1000.0;
                redis::pipe()
                    .cmd("DEBUG")
                    .arg("SLEEP")
                    .arg(secs)
                    .ignore()
                    .add_command(cmd)
                    .ignore()
                    .query_async::<()>(&mut c)
                    .await
            }
            None => cmd.query_async::<redis::Value>(&mut c).await.map(drop),
        };
        match r {
            Ok(()) => Ended::Ok.into(),
            Err(e) => self.failed(worker, &e).await.into(),
        }
    }
}
