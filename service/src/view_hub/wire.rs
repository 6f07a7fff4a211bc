//! One view event on the wire, from pieces serialised once and shared.
//!
//! A `View`'s JSON is its fields in declaration order: `kind`, `seq`,
//! `config_hash`, `model_version`, `workers`, `load`, `load_age_ms`,
//! `load_routers`, `routed`, `overrides`. Everything but `seq` and the load is the
//! same for every subscriber of a tick, so it is serialised once
//! ([`SharedView`]) and each stream splices in its own `seq` and load
//! ([`event`]); the bytes are those `serde_json` writes for the whole
//! `View`, in an SSE event as `axum`'s `Event::json_data` frames it.

use axum::body::Bytes;
use scorer_engine::overrides::WorkerOverride;
use scorer_engine::view::{RoutedKey, ViewKind, ViewWorker};

use scorer_engine::view::load_board::OthersLoad;

/// The end of every event: the `View`'s closing brace and the blank line.
const EVENT_END: &[u8] = b"}\n\n";

/// Events smaller than this are copied into one buffer (one write, one
/// frame); larger ones go out as their shared pieces.
pub const COPY_BELOW_BYTES: usize = 16 * 1024;

/// The part of a view event every subscriber shares.
#[derive(Debug, Clone)]
pub struct SharedView {
    /// Full or delta.
    pub kind: ViewKind,
    /// `,"config_hash":…` (with `,"model_version":…` when there is one)
    /// `,"workers":[…]`.
    pub body: Bytes,
    /// `,"overrides":[…]`, when the event carries them.
    pub overrides: Option<Bytes>,
}

impl SharedView {
    /// Serialises the common part of a view of `workers`.
    pub fn new(
        kind: ViewKind,
        config_hash: &str,
        model_version: Option<&str>,
        workers: &[ViewWorker],
    ) -> Self {
        let mut body = Vec::with_capacity(64 + workers.len() * 256);
        body.extend_from_slice(b",\"config_hash\":");
        push_json(&mut body, config_hash);
        if let Some(v) = model_version {
            body.extend_from_slice(b",\"model_version\":");
            push_json(&mut body, v);
        }
        body.extend_from_slice(b",\"workers\":");
        push_json(&mut body, workers);
        Self {
            kind,
            body: Bytes::from(body),
            overrides: None,
        }
    }

    /// Bytes of an event of this view without its `seq` and load.
    pub fn len(&self) -> usize {
        self.body.len() + self.overrides.as_ref().map_or(0, Bytes::len)
    }

    /// Whether [`Self::len`] is 0 (never: the body names the config).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `,"overrides":[…]`.
pub fn overrides(list: &[WorkerOverride]) -> Bytes {
    let mut out = Vec::with_capacity(16 + list.len() * 128);
    out.extend_from_slice(b",\"overrides\":");
    push_json(&mut out, list);
    Bytes::from(out)
}

/// `,"load":[…],"load_age_ms":…,"load_routers":…` and, with any,
/// `,"routed":[…]`: one subscriber's part.
pub fn load(others: &OthersLoad, routed: &[RoutedKey]) -> Bytes {
    let mut out = Vec::with_capacity(64 + others.load.len() * 48 + routed.len() * 64);
    out.extend_from_slice(b",\"load\":");
    push_json(&mut out, &others.load);
    out.extend_from_slice(format!(",\"load_age_ms\":{}", others.age_ms).as_bytes());
    out.extend_from_slice(format!(",\"load_routers\":{}", others.routers).as_bytes());
    if !routed.is_empty() {
        out.extend_from_slice(b",\"routed\":");
        push_json(&mut out, routed);
    }
    Bytes::from(out)
}

/// The SSE event `seq` of `shared`, with `load` when it carries one: its
/// pieces in order, or one buffer when small.
pub fn event(seq: u64, shared: &SharedView, load: Option<&Bytes>) -> Vec<Bytes> {
    let kind = match shared.kind {
        ViewKind::Full => "full",
        ViewKind::Delta => "delta",
    };
    let head = Bytes::from(format!(
        "event: view\nid: {seq}\ndata: {{\"kind\":\"{kind}\",\"seq\":{seq}"
    ));
    let mut pieces = Vec::with_capacity(5);
    pieces.push(head);
    pieces.push(shared.body.clone());
    pieces.extend(load.cloned());
    pieces.extend(shared.overrides.clone());
    pieces.push(Bytes::from_static(EVENT_END));
    let total: usize = pieces.iter().map(Bytes::len).sum();
    if total < COPY_BELOW_BYTES {
        let mut one = Vec::with_capacity(total);
        for p in &pieces {
            one.extend_from_slice(p);
        }
        return vec![Bytes::from(one)];
    }
    pieces
}

/// A comment line ending the stream, telling the client why.
pub fn comment(text: &str) -> Bytes {
    let line: String = text.chars().filter(|c| !matches!(c, '\n' | '\r')).collect();
    Bytes::from(format!(": {line}\n\n"))
}

fn push_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    // Serialising these types into memory cannot fail: no map has
    // non-string keys and every float is finite (checked at ingest).
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.extend_from_slice(b"null");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scorer_core::telemetry::Snapshot;
    use scorer_engine::overrides::OverrideKind;
    use scorer_engine::view::{View, WorkerLoad};

    fn worker(id: &str) -> ViewWorker {
        let snapshot: Snapshot = serde_json::from_value(serde_json::json!({
            "worker_id": id, "timestamp_ms": 1_750_000_000_000_u64, "cpu_usage": 0.25,
            "queue_depth": 3, "rtt_ms_avg": 1.5, "rtt_ms_p99": 9.0, "error_rate": 0.0,
            "compacting": true,
        }))
        .unwrap();
        ViewWorker {
            snapshot,
            age_ms: 12,
        }
    }

    fn data(pieces: &[Bytes]) -> Vec<u8> {
        let all: Vec<u8> = pieces.iter().flat_map(|p| p.iter().copied()).collect();
        let text = String::from_utf8(all).unwrap();
        let data = text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
        data.as_bytes().to_vec()
    }

    #[test]
    fn spliced_events_are_the_bytes_serde_writes_for_the_whole_view() {
        let workers: Vec<ViewWorker> = (0..200).map(|i| worker(&format!("w{i}"))).collect();
        let others = OthersLoad {
            load: vec![WorkerLoad {
                worker_id: "w1".into(),
                outstanding: 4,
            }],
            age_ms: 7,
            routers: 2,
        };
        let routed = vec![
            RoutedKey::new(0xabc, "w3", 9),
            RoutedKey::new(u64::MAX, "w1", 0),
        ];
        let listed = vec![WorkerOverride {
            worker_id: "w2".into(),
            kind: OverrideKind::Drain,
            weight: None,
            reason: "disk \"swap\"".into(),
            set_by: "ops".into(),
            age_ms: 5,
            remaining_ms: Some(100),
        }];
        for (kind, version, with_load, with_overrides, n) in [
            (ViewKind::Full, Some("m-1"), true, true, 200),
            (ViewKind::Full, None, true, false, 1),
            (ViewKind::Delta, None, false, false, 3),
            (ViewKind::Delta, Some("m-1"), true, true, 0),
        ] {
            let old = View {
                kind,
                seq: 41,
                config_hash: "9c1f00aa12345678".into(),
                model_version: version.map(str::to_owned),
                workers: workers[..n].to_vec(),
                load: with_load.then(|| others.load.clone()),
                load_age_ms: with_load.then_some(others.age_ms),
                load_routers: with_load.then_some(others.routers),
                routed: (with_load && n == 200).then(|| routed.clone()),
                overrides: with_overrides.then(|| listed.clone()),
            };
            let mut shared = SharedView::new(kind, "9c1f00aa12345678", version, &workers[..n]);
            shared.overrides = with_overrides.then(|| overrides(&listed));
            let sent: &[RoutedKey] = if n == 200 { &routed } else { &[] };
            let load_part = with_load.then(|| load(&others, sent));
            let pieces = event(41, &shared, load_part.as_ref());
            assert_eq!(
                String::from_utf8(data(&pieces)).unwrap(),
                serde_json::to_string(&old).unwrap()
            );
            let all: Vec<u8> = pieces.iter().flat_map(|p| p.iter().copied()).collect();
            assert!(all.starts_with(b"event: view\nid: 41\ndata: {"));
            assert!(all.ends_with(b"}\n\n"));
            assert_eq!(pieces.len() == 1, all.len() < COPY_BELOW_BYTES);
        }
    }
}
