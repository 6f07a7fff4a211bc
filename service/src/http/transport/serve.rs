//! Serving client connections with hyper's HTTP/1: a header-read timeout,
//! an idle (no traffic) timeout and a cap on open connections, so that slow
//! or silent clients cannot hold the process's sockets.
//!
//! hyper's header timer runs from the moment a connection opens, and on a
//! kept-alive connection from the end of the previous answer, until the
//! whole request head has arrived; so it also closes a kept-alive connection
//! that waits longer than that for its next request. With TLS on, the idle
//! timer counts encrypted bytes, and the handshake has the header timeout.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::ServiceExt;

use super::idle;
use super::parse_errors;
use super::stream_queue::ConnectionCloser;
use super::tls::{ClientCertificate, ServerTls};
use scorer_engine::config::ServerConfig;

/// Pause after a failed `accept` (e.g. out of file descriptors), so the loop
/// does not spin while the condition lasts.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// Connection-level limits, from `[server]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// `server.header_read_timeout_ms`.
    pub header_read_timeout: Duration,
    /// `server.idle_timeout_ms`.
    pub idle_timeout: Duration,
    /// `server.max_connections`.
    pub max_connections: usize,
}

impl ConnectionLimits {
    /// The limits `cfg` configures.
    pub fn from_config(cfg: &ServerConfig) -> Self {
        Self {
            header_read_timeout: Duration::from_millis(cfg.header_read_timeout_ms),
            idle_timeout: Duration::from_millis(cfg.idle_timeout_ms),
            max_connections: cfg.max_connections.max(1),
        }
    }
}

/// Serve `router` on `listener` until `shutdown` resolves, then stop
/// accepting and wait for the open connections to finish their requests.
///
/// Every request carries the peer's [`ConnectInfo<SocketAddr>`], the count
/// of bytes its connection has written ([`super::stream_queue::WrittenBytes`]),
/// a handle that closes its connection ([`ConnectionCloser`]), and over
/// TLS with a verified client certificate, its [`ClientCertificate`]. A
/// connection accepted while `max_connections` are open is closed at once.
/// With `tls`, every connection is TLS: the handshake must finish within
/// `header_read_timeout`, as a request head must.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    tls: Option<Arc<ServerTls>>,
    shutdown: impl Future<Output = ()>,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(ACCEPT_RETRY).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tracing::debug!(%peer, max = limits.max_connections, "connection refused: too many open");
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let conn = Connection {
            peer,
            router: router.clone(),
            http: http.clone(),
            watcher: graceful.watcher(),
            limits,
        };
        let acceptor = tls.as_ref().map(|t| t.acceptor());
        tokio::spawn(async move {
            let (io, watch) = idle::track(stream);
            match acceptor {
                None => conn.run(io, watch, None).await,
                Some(acceptor) => {
                    match tokio::time::timeout(limits.header_read_timeout, acceptor.accept(io))
                        .await
                    {
                        Ok(Ok(io)) => {
                            let cert = io
                                .get_ref()
                                .1
                                .peer_certificates()
                                .and_then(<[_]>::first)
                                .map(|c| ClientCertificate(Arc::new(c.clone())));
                            conn.run(io, watch, cert).await;
                        }
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        }
                        Err(_) => {
                            tracing::debug!(%peer, "TLS handshake not done within server.header_read_timeout_ms");
                        }
                    }
                }
            }
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// One accepted connection, ready to serve HTTP/1 over whatever stream it
/// ends up with.
struct Connection {
    peer: SocketAddr,
    router: Router,
    http: hyper::server::conn::http1::Builder,
    watcher: Watcher,
    limits: ConnectionLimits,
}

impl Connection {
    async fn run<I>(self, io: I, watch: idle::IdleWatch, cert: Option<ClientCertificate>)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let peer = self.peer;
        let written = watch.written();
        let closer = ConnectionCloser::default();
        let close = closer.clone();
        let service = self
            .router
            .map_request(move |mut req: axum::http::Request<Incoming>| {
                req.extensions_mut().insert(ConnectInfo(peer));
                req.extensions_mut().insert(written.clone());
                req.extensions_mut().insert(close.clone());
                if let Some(cert) = &cert {
                    req.extensions_mut().insert(cert.clone());
                }
                req
            });
        let io = parse_errors::JsonParseErrors::new(io);
        let conn = self.watcher.watch(
            self.http
                .serve_connection(TokioIo::new(io), TowerToHyperService::new(service)),
        );
        tokio::select! {
            done = conn => {
                if let Err(e) = done {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
            }
            () = watch.idle_for(self.limits.idle_timeout) => {
                tracing::debug!(%peer, "closing a connection idle for server.idle_timeout_ms");
            }
            () = closer.closed() => {
                tracing::debug!(%peer, "closing a connection its handler gave up on");
            }
        }
    }
}
