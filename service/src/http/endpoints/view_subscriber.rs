//! One view stream's producer: a task that turns the hub's shared views
//! and the other routers' load into this stream's events, and queues them
//! within the stream's byte budget (`limits.view_stream_budget_bytes`).
//! A stream whose client does not take its bytes is cut off: its queue
//! is dropped, a last comment says why, its place among the open streams
//! is freed, and its connection is closed unless the client takes the
//! comment within [`CUT_GRACE_MS`].

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

use crate::http::AppState;
use crate::http::transport::stream_queue::{ConnectionCloser, Pushed, StreamQueue};
use crate::http::transport::streams::StreamPermit;
use crate::view_hub::wire::{self, SharedView};
use scorer_engine::view::load_board::OthersLoad;
use scorer_engine::view::routed_log::Cursor;
use scorer_engine::view::{LOAD_INTERVAL_MS, ViewKind, WorkerLoad};

/// How long a cut-off stream's client has to take its last comment before
/// its connection is closed, ms.
pub const CUT_GRACE_MS: u64 = 1_000;

/// One stream's state.
pub(crate) struct Subscriber {
    pub st: AppState,
    pub queue: Arc<StreamQueue>,
    pub views: broadcast::Receiver<Arc<SharedView>>,
    pub closed: watch::Receiver<bool>,
    pub left: Option<u64>,
    pub router_id: Option<String>,
    pub credential: Arc<str>,
    pub permit: StreamPermit,
    /// Closes the stream's connection (absent without one).
    pub closer: Option<ConnectionCloser>,
}

/// Why a stream stops producing.
enum Stop {
    /// Its client is gone, or it sent its last event.
    Done,
    /// Its client fell more than the budget behind.
    Cut(u64),
}

struct Sending {
    seq: u64,
    left: Option<u64>,
    /// The load last sent.
    last_load: Option<Vec<WorkerLoad>>,
    /// The override table's generation last sent.
    last_overrides: Option<u64>,
    /// Where the stream is in the routers' routed keys.
    routed: Cursor,
    router_id: Option<String>,
}

/// Produces `s`'s events until its client goes, it sent `max_events`, it
/// falls behind its budget, or the service shuts down.
pub(crate) async fn run(s: Subscriber) {
    let Subscriber {
        st,
        queue,
        mut views,
        mut closed,
        left,
        router_id,
        credential,
        permit,
        closer,
    } = s;
    let mut out = Sending {
        seq: 0,
        left,
        last_load: None,
        last_overrides: None,
        routed: st.load_board.routed().end(),
        router_id: router_id.clone(),
    };
    let others = |st: &AppState| st.load_board.others(router_id.as_deref(), now(st));
    let mut next_load = Instant::now() + Duration::from_millis(LOAD_INTERVAL_MS);
    let mut step = if *closed.borrow() {
        Ok(())
    } else {
        let full = st.view_hub.shared_full(&st.engine, now(&st));
        out.with_load(&st, &queue, &full, others(&st))
    };
    while step.is_ok() {
        step = tokio::select! {
            _ = closed.changed() => break,
            () = tokio::time::sleep_until(next_load) => {
                next_load = Instant::now() + Duration::from_millis(LOAD_INTERVAL_MS);
                if queue.reader_gone() {
                    Err(Stop::Done)
                } else {
                    let load = others(&st);
                    let generation = st.engine.override_table().generation();
                    if out.last_load.as_ref() != Some(&load.load)
                        || out.last_overrides != Some(generation)
                        || out.routed != st.load_board.routed().end()
                    {
                        let shared = st.view_hub.shared_load(&st.engine, now(&st));
                        out.with_load(&st, &queue, &shared, load)
                    } else {
                        Ok(())
                    }
                }
            }
            r = views.recv() => match r {
                Ok(v) if v.kind == ViewKind::Full => out.with_load(&st, &queue, &v, others(&st)),
                Ok(v) => out.send(&queue, &v, None),
                Err(RecvError::Lagged(_)) => {
                    let full = st.view_hub.shared_full(&st.engine, now(&st));
                    out.with_load(&st, &queue, &full, others(&st))
                }
                Err(RecvError::Closed) => Err(Stop::Done),
            },
        };
    }
    match step {
        Err(Stop::Cut(unsent_bytes)) => {
            let budget = st.engine.config().limits.view_stream_budget_bytes;
            st.view_streams.cut_off();
            if let Some(held_back) = st.view_streams.cut_warn.admit(now(&st)) {
                tracing::warn!(
                    credential = %credential,
                    unsent_bytes,
                    budget_bytes = budget,
                    held_back,
                    "view stream cut off: its client does not keep up"
                );
            }
            queue.cut(wire::comment(&format!(
                "cut off: {unsent_bytes} bytes unsent, over limits.view_stream_budget_bytes \
                 ({budget}); reconnect"
            )));
            drop(permit);
            let grace = Duration::from_millis(CUT_GRACE_MS);
            if let Some(closer) = closer
                && tokio::time::timeout(grace, queue.reader_dropped())
                    .await
                    .is_err()
            {
                closer.close();
            }
            return;
        }
        Err(Stop::Done) => queue.end(),
        // The service is shutting down: end at once, without what is queued.
        Ok(()) => queue.abort(),
    }
    drop(permit);
}

impl Sending {
    /// Queues `shared` as the next event, with `load`; `Err` when the
    /// stream is over.
    fn send(
        &mut self,
        queue: &StreamQueue,
        shared: &SharedView,
        load: Option<&Bytes>,
    ) -> Result<(), Stop> {
        match queue.push(wire::event(self.seq, shared, load)) {
            Pushed::Queued => {}
            Pushed::OverBudget { unsent_bytes } => return Err(Stop::Cut(unsent_bytes)),
            Pushed::Closed => return Err(Stop::Done),
        }
        self.seq += 1;
        self.left = self.left.map(|n| n.saturating_sub(1));
        if self.left == Some(0) {
            return Err(Stop::Done);
        }
        Ok(())
    }

    /// Queues `shared` with `others` as its load, remembering both the
    /// load and the override generation as sent.
    fn with_load(
        &mut self,
        st: &AppState,
        queue: &StreamQueue,
        shared: &SharedView,
        others: OthersLoad,
    ) -> Result<(), Stop> {
        let routed =
            st.load_board
                .routed()
                .since(self.router_id.as_deref(), &mut self.routed, now(st));
        let load = wire::load(&others, &routed);
        self.last_load = Some(others.load);
        self.last_overrides = Some(st.engine.override_table().generation());
        self.send(queue, shared, Some(&load))
    }
}

fn now(st: &AppState) -> u64 {
    st.clock.monotonic_ms()
}
