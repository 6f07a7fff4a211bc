//! `GET /v1/view`: the view stream for the balancers in the routers, as
//! server-sent events (one `view` event per [`View`], its `id` the event's
//! `seq`). See [`crate::view_hub`] for what each event holds and when.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::extract::rejection::QueryRejection;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde::Deserialize;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

use crate::http::auth::{Caller, CallerRole};
use crate::http::error_body::ErrorBody;
use crate::http::router_identity::{RouterCredential, check_router_id};
use crate::http::transport::streams::{
    ANONYMOUS, STREAM_RETRY_AFTER_S, StreamLimit, StreamOwner, StreamPermit,
};
use crate::http::{ApiError, AppState};
use crate::load_board::OthersLoad;
use crate::view_hub::{DEFAULT_COALESCE_MS, DEFAULT_FULL_INTERVAL_MS, Published, ViewHub};
use scorer_engine::view::{LOAD_INTERVAL_MS, View, WorkerLoad, is_valid_router_id};

/// Longest bounded stream, events.
const MAX_EVENTS: u64 = 1_000_000;

/// Query string of `GET /v1/view`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct ViewQuery {
    /// End the stream after this many events, 1..=1000000; absent: the
    /// stream lasts until the client or the service goes away.
    #[param(minimum = 1, maximum = 1_000_000, format = "uint64")]
    max_events: Option<u64>,
    /// The subscribing router's id (as in its `POST /v1/router/load`): its
    /// own load is left out of the events' `load`.
    #[param(min_length = 1, max_length = 32, pattern = "^[A-Za-z0-9._-]{1,32}$")]
    router_id: Option<String>,
}

/// `GET /v1/view`: a full view on connect and every second, the accepted
/// telemetry as deltas coalesced over 5 ms, the other routers' load and the
/// operators' overrides when either changed (checked every 5 ms), and a
/// full view at once after falling behind. Router role.
#[utoipa::path(get, path = "/v1/view", tag = "scoring", params(ViewQuery),
    responses(
        (status = 200, description = "`text/event-stream`: `event: view`, `id: <seq>`, `data: <View as JSON>` per event",
            content((View = "text/event-stream"))),
        (status = 403, description = "`router_id` is not the router credential's (`router_id_not_yours`; see `auth.router_ids`), or another role's credential (`forbidden`)", body = ErrorBody),
        (status = 422, description = "A bad query parameter (`invalid_query`)", body = ErrorBody),
        (status = 429, description = "Too many view streams open (`too_many_streams`): for this credential \
            (`limits.view_streams_per_credential`), in all (`limits.view_streams_max`), or the streams' share \
            of the connections (`limits.reserved_connections_share`); retry after `Retry-After` seconds",
            body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying"))),
    ))]
pub(crate) async fn view(
    State(st): State<AppState>,
    caller: Option<Extension<Caller>>,
    role: Option<Extension<CallerRole>>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    q: Result<Query<ViewQuery>, QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Response> {
    let q = q
        .map_err(|e| ApiError::unprocessable(e.body_text()).into_response())?
        .0;
    let (router_id, max_events) = checked(q).map_err(IntoResponse::into_response)?;
    if let Some(id) = &router_id {
        let cred = RouterCredential::of(caller.as_deref(), role.as_deref());
        check_router_id(cred, st.engine.config().auth.router_ids, id)
            .map_err(IntoResponse::into_response)?;
    }
    let permit = admit(&st, caller, peer).map_err(|limit| too_many_streams(&st, limit))?;
    let s = Streaming {
        rx: st.view_hub.subscribe(),
        closed: st.view_hub.closed(),
        st,
        seq: 0,
        next_full: Instant::now(),
        next_load: Instant::now(),
        left: max_events,
        router_id,
        last_load: None,
        last_overrides: None,
        _permit: permit,
    };
    Ok(Sse::new(futures_util::stream::unfold(s, next_event)))
}

/// The query's router id and event bound, when both are in range.
fn checked(q: ViewQuery) -> Result<(Option<String>, Option<u64>), ApiError> {
    if let Some(n) = q.max_events
        && !(1..=MAX_EVENTS).contains(&n)
    {
        return Err(ApiError::unprocessable(format!(
            "`max_events` must be 1..={MAX_EVENTS}, got {n}"
        )));
    }
    if let Some(id) = &q.router_id
        && !is_valid_router_id(id)
    {
        return Err(ApiError::unprocessable(
            "`router_id` must be 1..=32 bytes of ASCII letters, digits, `-`, `_` and `.`",
        ));
    }
    Ok((q.router_id, q.max_events))
}

/// A place among the open streams for the caller (by credential name, or
/// by peer address when the router role is open), or the limit refusing
/// it (counted, and logged at a limited rate).
fn admit(
    st: &AppState,
    caller: Option<Extension<Caller>>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
) -> Result<StreamPermit, StreamLimit> {
    let owner = match caller {
        Some(Extension(c)) => StreamOwner {
            key: c.0.clone(),
            label: c.0,
            role: "router",
        },
        None => StreamOwner {
            key: peer.map_or_else(
                || Arc::from(ANONYMOUS),
                |Extension(ConnectInfo(a))| Arc::from(a.ip().to_string()),
            ),
            label: Arc::from(ANONYMOUS),
            role: "router",
        },
    };
    let cfg = st.engine.config();
    let limit = match st
        .view_streams
        .try_open(&owner, &cfg.limits, cfg.server.max_connections)
    {
        Ok(permit) => return Ok(permit),
        Err(limit) => limit,
    };
    if let Some(held_back) = st.view_streams.warn.admit(st.clock.monotonic_ms()) {
        tracing::warn!(
            credential = %owner.label,
            limit = limit.as_str(),
            held_back,
            "view stream refused: too many streams open"
        );
    }
    Err(limit)
}

/// The 429 answer to a stream refused by `limit`.
fn too_many_streams(st: &AppState, limit: StreamLimit) -> Response {
    let cfg = st.engine.config();
    let why = match limit {
        StreamLimit::PerCredential => format!(
            "this credential holds limits.view_streams_per_credential ({}) view streams already",
            cfg.limits.view_streams_per_credential
        ),
        StreamLimit::Total => format!(
            "limits.view_streams_max ({}) view streams are open already",
            cfg.limits.view_streams_max
        ),
        StreamLimit::ReservedConnections => format!(
            "streams hold their share of server.max_connections already ({} of {}; \
             limits.reserved_connections_share is kept for other requests)",
            cfg.limits
                .long_lived_connections(cfg.server.max_connections),
            cfg.server.max_connections
        ),
    };
    let mut r = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "too_many_streams",
        format!("{why}; retry after the Retry-After delay"),
    )
    .into_response();
    let h = r.headers_mut();
    h.insert(header::RETRY_AFTER, HeaderValue::from(STREAM_RETRY_AFTER_S));
    // A refused client must not keep the connection it asked on either.
    h.insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

struct Streaming {
    st: AppState,
    rx: broadcast::Receiver<Published>,
    closed: watch::Receiver<bool>,
    seq: u64,
    next_full: Instant,
    next_load: Instant,
    left: Option<u64>,
    router_id: Option<String>,
    /// The load last sent.
    last_load: Option<Vec<WorkerLoad>>,
    /// The override table's generation last sent.
    last_overrides: Option<u64>,
    /// Its place among the open streams.
    _permit: StreamPermit,
}

/// What the next event is.
enum Next {
    Full,
    Delta(Vec<Published>),
    Load(OthersLoad),
}

async fn next_event(mut s: Streaming) -> Option<(Result<Event, Infallible>, Streaming)> {
    if s.left == Some(0) || *s.closed.borrow() {
        return None;
    }
    let next = if s.seq == 0 {
        Next::Full
    } else {
        loop {
            tokio::select! {
                _ = s.closed.changed() => return None,
                () = tokio::time::sleep_until(s.next_full) => break Next::Full,
                () = tokio::time::sleep_until(s.next_load) => {
                    s.next_load = Instant::now() + Duration::from_millis(LOAD_INTERVAL_MS);
                    let others = others(&s);
                    let generation = s.st.engine.override_table().generation();
                    if s.last_load.as_ref() != Some(&others.load) || s.last_overrides != Some(generation) {
                        break Next::Load(others);
                    }
                }
                r = s.rx.recv() => break match r {
                    Ok(first) => coalesce(&mut s.rx, first).await,
                    Err(RecvError::Lagged(_)) => Next::Full,
                    Err(RecvError::Closed) => return None,
                },
            }
        }
    };
    let (engine, now_ms) = (&s.st.engine, s.st.clock.monotonic_ms());
    let carries_overrides = !matches!(next, Next::Delta(_));
    let mut view = match next {
        Next::Full => {
            s.next_full = Instant::now() + Duration::from_millis(DEFAULT_FULL_INTERVAL_MS);
            let mut v = s.st.view_hub.full(engine, now_ms, s.seq);
            let others = others(&s);
            s.last_load = Some(with_load(&mut v, others));
            v
        }
        Next::Delta(batches) => ViewHub::delta(engine, &batches, now_ms, s.seq),
        Next::Load(others) => {
            let mut v = ViewHub::delta(engine, &[], now_ms, s.seq);
            s.last_load = Some(with_load(&mut v, others));
            v
        }
    };
    if carries_overrides {
        let table = engine.override_table();
        view.overrides = Some(table.list(now_ms));
        s.last_overrides = Some(table.generation());
    }
    let event = Event::default()
        .event("view")
        .id(s.seq.to_string())
        .json_data(&view)
        .unwrap_or_else(|e| Event::default().comment(format!("view not serialised: {e}")));
    s.seq += 1;
    s.left = s.left.map(|n| n - 1);
    Some((Ok(event), s))
}

/// `view` carries `others`; returns the load, for the stream to remember
/// as last sent.
fn with_load(view: &mut View, others: OthersLoad) -> Vec<WorkerLoad> {
    view.load = Some(others.load.clone());
    view.load_age_ms = Some(others.age_ms);
    view.load_routers = Some(others.routers);
    others.load
}

/// The other routers' load now.
fn others(s: &Streaming) -> OthersLoad {
    let now_ms = s.st.clock.monotonic_ms();
    s.st.load_board.others(s.router_id.as_deref(), now_ms)
}

/// `first` and whatever arrives within the coalescing window; a full view
/// instead when the stream fell behind meanwhile.
async fn coalesce(rx: &mut broadcast::Receiver<Published>, first: Published) -> Next {
    tokio::time::sleep(Duration::from_millis(DEFAULT_COALESCE_MS)).await;
    let mut batches = vec![first];
    loop {
        match rx.try_recv() {
            Ok(b) => batches.push(b),
            Err(TryRecvError::Lagged(_)) => return Next::Full,
            Err(TryRecvError::Empty | TryRecvError::Closed) => return Next::Delta(batches),
        }
    }
}
