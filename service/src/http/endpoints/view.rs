//! `GET /v1/view`: the view stream for the balancers in the routers, as
//! server-sent events (one `view` event per [`View`], its `id` the event's
//! `seq`). See [`crate::view_hub`] for what each event holds and when.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Extension;
use axum::extract::rejection::QueryRejection;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::http::auth::{Caller, CallerRole};
use crate::http::error_body::ErrorBody;
use crate::http::router_identity::{RouterCredential, check_router_id};
use crate::http::transport::stream_queue::{self, ConnectionCloser, StreamQueue, WrittenBytes};
use crate::http::transport::streams::{
    ANONYMOUS, STREAM_RETRY_AFTER_S, StreamLimit, StreamOwner, StreamPermit,
};
use crate::http::{ApiError, AppState};
use scorer_engine::view::{View, is_valid_router_id};

#[path = "view_subscriber.rs"]
mod view_subscriber;
pub use view_subscriber::CUT_GRACE_MS;
use view_subscriber::Subscriber;

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
/// full view at once after falling behind; a stream with more unsent bytes
/// than `limits.view_stream_budget_bytes` is cut off. Router role.
#[utoipa::path(get, path = "/v1/view", tag = "scoring", params(ViewQuery),
    responses(
        (status = 200, description = "`text/event-stream`: `event: view`, `id: <seq>`, `data: <View as JSON>` per event; \
            a stream cut off for not keeping up ends with the comment `: cut off: …; reconnect`",
            content((View = "text/event-stream"))),
        (status = 403, description = "`router_id` is not the router credential's (`router_id_not_yours`; see `auth.router_ids`), or another role's credential (`forbidden`)", body = ErrorBody),
        (status = 422, description = "A bad query parameter (`invalid_request`)", body = ErrorBody),
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
    written: Option<Extension<WrittenBytes>>,
    closer: Option<Extension<ConnectionCloser>>,
    q: Result<Query<ViewQuery>, QueryRejection>,
) -> Response {
    let q = match q {
        Ok(Query(q)) => q,
        Err(e) => return ApiError::unprocessable(e.body_text()).into_response(),
    };
    let (router_id, max_events) = match checked(q) {
        Ok(checked) => checked,
        Err(e) => return e.into_response(),
    };
    if let Some(id) = &router_id {
        let cred = RouterCredential::of(caller.as_deref(), role.as_deref());
        if let Err(e) = check_router_id(cred, st.engine.config().auth.router_ids, id) {
            return e.into_response();
        }
    }
    let credential = caller
        .as_ref()
        .map_or_else(|| Arc::from(ANONYMOUS), |Extension(c)| c.0.clone());
    let permit = match admit(&st, caller, peer) {
        Ok(permit) => permit,
        Err(limit) => return too_many_streams(&st, limit),
    };
    let queue = Arc::new(StreamQueue::new(
        st.engine.config().limits.view_stream_budget_bytes,
        written.map(|Extension(w)| w),
        st.view_streams.queued_gauge(),
    ));
    let subscriber = Subscriber {
        views: st.view_hub.follow(&st.engine, &st.clock),
        closed: st.view_hub.closed(),
        queue: queue.clone(),
        left: max_events,
        router_id,
        credential,
        permit,
        closer: closer.map(|Extension(c)| c),
        st,
    };
    tokio::spawn(view_subscriber::run(subscriber));
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        stream_queue::body(queue),
    )
        .into_response()
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
