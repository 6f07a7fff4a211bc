//! The view the service streams to the balancers in the routers
//! (`GET /v1/view`): the latest accepted report of every worker, and each
//! accepted batch as it comes.
//!
//! The telemetry endpoint publishes every accepted batch here after the
//! engine applied it. Each stream starts with a full view, sends the
//! batches as deltas coalesced over [`DEFAULT_COALESCE_MS`], a full view
//! again every [`DEFAULT_FULL_INTERVAL_MS`] and at once when it fell behind
//! (the broadcast buffers hold [`BUFFERED_BATCHES`] and
//! [`BUFFERED_VIEWS`]), and ends when the service shuts down.
//!
//! One task, started with the first stream ([`ViewHub::follow`]), builds
//! the deltas and the periodic full views and serialises each once
//! ([`wire::SharedView`]); every stream splices the same bytes into its
//! events, adding only its own `seq` and load (as delta xDS builds one
//! snapshot for all its subscribers).

pub mod wire;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use scorer_core::clock::Clock;
use scorer_core::telemetry::Snapshot;
use scorer_engine::Engine;
use scorer_engine::view::reports::{Published, Reports};
use scorer_engine::view::{
    BUFFERED_BATCHES, BUFFERED_VIEWS, DEFAULT_COALESCE_MS, DEFAULT_FULL_INTERVAL_MS, View,
};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

use wire::SharedView;

/// The latest reports and the live feed of accepted batches.
#[derive(Debug)]
pub struct ViewHub {
    reports: Reports,
    feed: broadcast::Sender<Published>,
    closed: watch::Sender<bool>,
    /// The serialised views every stream sends, built once each.
    views: broadcast::Sender<Arc<SharedView>>,
    /// Whether the task building them runs.
    started: AtomicBool,
    /// The overrides last serialised: the table's generation, the
    /// monotonic ms they were listed at, and the bytes.
    overrides: Mutex<Option<(u64, u64, Bytes)>>,
}

impl Default for ViewHub {
    fn default() -> Self {
        Self {
            reports: Reports::default(),
            feed: broadcast::channel(BUFFERED_BATCHES).0,
            closed: watch::channel(false).0,
            views: broadcast::channel(BUFFERED_VIEWS).0,
            started: AtomicBool::new(false),
            overrides: Mutex::default(),
        }
    }
}

impl ViewHub {
    /// Record `batch`, which the engine accepted at monotonic
    /// `received_ms`, and pass it to the open streams.
    pub fn publish(&self, batch: &[Snapshot], received_ms: u64) {
        self.reports.record(batch, received_ms);
        // Only while a stream follows: the hub's task keeps a receiver for
        // good, and a stream's first full view holds what came before it.
        if self.views.receiver_count() > 0 {
            let items: Published = batch.iter().map(|s| (s.clone(), received_ms)).collect();
            // No receiver between the check and the send is not an error.
            let _ = self.feed.send(items);
        }
    }

    /// The full view at monotonic `now_ms` (see [`Reports::full`]).
    pub fn full(&self, engine: &Engine, now_ms: u64, seq: u64) -> View {
        self.reports.full(engine, now_ms, seq)
    }

    /// A delta of `batches` at monotonic `now_ms`.
    pub fn delta(engine: &Engine, batches: &[Published], now_ms: u64, seq: u64) -> View {
        Reports::delta(engine, batches, now_ms, seq)
    }

    /// The live feed of accepted batches.
    pub fn subscribe(&self) -> broadcast::Receiver<Published> {
        self.feed.subscribe()
    }

    /// The shared views, for one stream; starts the task that builds them
    /// from `engine` at `clock`'s time on the first call.
    pub fn follow(
        self: &Arc<Self>,
        engine: &Arc<Engine>,
        clock: &Arc<dyn Clock>,
    ) -> broadcast::Receiver<Arc<SharedView>> {
        let views = self.views.subscribe();
        if !self.started.swap(true, Ordering::AcqRel) {
            // Subscribed here, so that no batch published from now on is
            // missed while the task starts.
            let feed = self.feed.subscribe();
            tokio::spawn(build_views(
                self.clone(),
                feed,
                engine.clone(),
                clock.clone(),
            ));
        }
        views
    }

    /// The full view at monotonic `now_ms`, serialised, with the overrides.
    pub fn shared_full(&self, engine: &Engine, now_ms: u64) -> SharedView {
        let v = self.full(engine, now_ms, 0);
        let mut shared = shared(&v);
        shared.overrides = Some(self.overrides_bytes(engine, now_ms));
        shared
    }

    /// A delta of `batches` at monotonic `now_ms`, serialised.
    pub fn shared_delta(engine: &Engine, batches: &[Published], now_ms: u64) -> SharedView {
        shared(&Self::delta(engine, batches, now_ms, 0))
    }

    /// An event with no workers that carries the overrides (a stream adds
    /// its load).
    pub fn shared_load(&self, engine: &Engine, now_ms: u64) -> SharedView {
        let mut shared = Self::shared_delta(engine, &[], now_ms);
        shared.overrides = Some(self.overrides_bytes(engine, now_ms));
        shared
    }

    /// The overrides in force at `now_ms`, serialised once per table
    /// generation and millisecond (they carry their ages).
    pub fn overrides_bytes(&self, engine: &Engine, now_ms: u64) -> Bytes {
        let table = engine.override_table();
        let generation = table.generation();
        let mut memo = self.overrides.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((g, at, bytes)) = &*memo
            && (*g, *at) == (generation, now_ms)
        {
            return bytes.clone();
        }
        let bytes = wire::overrides(&table.list(now_ms));
        *memo = Some((generation, now_ms, bytes.clone()));
        bytes
    }

    /// Resolves when the service shuts down.
    pub fn closed(&self) -> watch::Receiver<bool> {
        self.closed.subscribe()
    }

    /// Ends every stream (the service is shutting down: a stream that never
    /// ends would hold the graceful shutdown open).
    pub fn close(&self) {
        self.closed.send_replace(true);
    }
}

/// The task behind [`ViewHub::follow`]: the deltas of `feed` coalesced
/// over [`DEFAULT_COALESCE_MS`] and a full view every
/// [`DEFAULT_FULL_INTERVAL_MS`], each serialised once, while a stream
/// follows; it ends when the hub closes.
async fn build_views(
    hub: Arc<ViewHub>,
    mut feed: broadcast::Receiver<Published>,
    engine: Arc<Engine>,
    clock: Arc<dyn Clock>,
) {
    let mut closed = hub.closed();
    let interval = Duration::from_millis(DEFAULT_FULL_INTERVAL_MS);
    let mut next_full = Instant::now() + interval;
    loop {
        if *closed.borrow() {
            return;
        }
        let full = tokio::select! {
            _ = closed.changed() => return,
            () = tokio::time::sleep_until(next_full) => {
                next_full = Instant::now() + interval;
                true
            }
            r = feed.recv() => match r {
                Ok(first) => match coalesce(&mut feed, first).await {
                    Some(_) if hub.views.receiver_count() == 0 => false,
                    Some(batches) => {
                        let v = ViewHub::shared_delta(&engine, &batches, clock.monotonic_ms());
                        // No stream between the check and the send is not an error.
                        let _ = hub.views.send(Arc::new(v));
                        false
                    }
                    None => true,
                },
                Err(RecvError::Lagged(_)) => true,
                Err(RecvError::Closed) => return,
            },
        };
        if full && hub.views.receiver_count() > 0 {
            let v = hub.shared_full(&engine, clock.monotonic_ms());
            let _ = hub.views.send(Arc::new(v));
        }
    }
}

/// `first` and whatever arrives within the coalescing window; `None` when
/// the feed fell behind meanwhile (a full view is due).
async fn coalesce(
    rx: &mut broadcast::Receiver<Published>,
    first: Published,
) -> Option<Vec<Published>> {
    tokio::time::sleep(Duration::from_millis(DEFAULT_COALESCE_MS)).await;
    let mut batches = vec![first];
    loop {
        match rx.try_recv() {
            Ok(b) => batches.push(b),
            Err(TryRecvError::Lagged(_)) => return None,
            Err(TryRecvError::Empty | TryRecvError::Closed) => return Some(batches),
        }
    }
}

fn shared(v: &View) -> SharedView {
    SharedView::new(
        v.kind,
        &v.config_hash,
        v.model_version.as_deref(),
        &v.workers,
    )
}
