//! The keys the routers routed (`POST /v1/router/load`'s `routed`), held
//! for the view stream: each stream sends its router the others' keys
//! since its last event (`GET /v1/view`'s `routed`), so that every
//! balancer's routing index learns where a key went whichever router sent
//! it (as Dynamo's KV router replicas share their routing events).
//!
//! A ring of the latest [`MAX_ROUTED_HELD`] entries: a stream that falls
//! further behind skips the oldest, which only makes its index forget a
//! little sooner.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use super::{MAX_ROUTED_PER_VIEW, MAX_VIEW_AGE_MS, RoutedKey};

/// Most routed keys held for the streams.
pub const MAX_ROUTED_HELD: usize = 65_536;

#[derive(Debug)]
struct Entry {
    seq: u64,
    router: Arc<str>,
    key_hash: u64,
    worker: Arc<str>,
    at_ms: u64,
}

#[derive(Debug, Default)]
struct Ring {
    entries: VecDeque<Entry>,
    next_seq: u64,
}

/// The routed keys of every router.
#[derive(Debug, Default)]
pub struct RoutedLog {
    ring: Mutex<Ring>,
}

/// Where a stream is in the log: the next entry it has not seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cursor(u64);

impl RoutedLog {
    /// `router` routed `keys` (checked: a valid hash, an age within
    /// [`MAX_VIEW_AGE_MS`]), as reported at monotonic `now_ms`.
    pub fn push(&self, router: &str, keys: &[(u64, &str, u64)], now_ms: u64) {
        if keys.is_empty() {
            return;
        }
        let router: Arc<str> = Arc::from(router);
        let mut ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        for &(key_hash, worker, age_ms) in keys {
            let seq = ring.next_seq;
            ring.next_seq += 1;
            ring.entries.push_back(Entry {
                seq,
                router: router.clone(),
                key_hash,
                worker: Arc::from(worker),
                at_ms: now_ms.saturating_sub(age_ms.min(MAX_VIEW_AGE_MS)),
            });
            if ring.entries.len() > MAX_ROUTED_HELD {
                ring.entries.pop_front();
            }
        }
    }

    /// A cursor at the end: a new stream starts with what comes next.
    pub fn end(&self) -> Cursor {
        Cursor(self.ring.lock().unwrap_or_else(|e| e.into_inner()).next_seq)
    }

    /// The keys routed by every router but `except` after `cursor`, at
    /// most [`MAX_ROUTED_PER_VIEW`], with their ages at monotonic
    /// `now_ms`; `cursor` moves past them.
    pub fn since(&self, except: Option<&str>, cursor: &mut Cursor, now_ms: u64) -> Vec<RoutedKey> {
        let ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        let first = ring.entries.front().map_or(ring.next_seq, |e| e.seq);
        let skip = usize::try_from(cursor.0.saturating_sub(first)).unwrap_or(usize::MAX);
        let mut out = Vec::new();
        let mut next = cursor.0.max(first);
        for e in ring.entries.iter().skip(skip) {
            if out.len() == MAX_ROUTED_PER_VIEW {
                break;
            }
            next = e.seq + 1;
            if Some(&*e.router) != except {
                out.push(RoutedKey::new(
                    e.key_hash,
                    &*e.worker,
                    now_ms.saturating_sub(e.at_ms),
                ));
            }
        }
        *cursor = Cursor(next.max(cursor.0));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_gets_the_other_routers_keys_once_with_their_age() {
        let log = RoutedLog::default();
        let mut c = log.end();
        log.push("r1", &[(1, "w1", 2), (2, "w2", 0)], 100);
        log.push("r2", &[(3, "w1", 0)], 110);
        let got = log.since(Some("r2"), &mut c, 120);
        assert_eq!(
            got,
            [RoutedKey::new(1, "w1", 22), RoutedKey::new(2, "w2", 20)]
        );
        assert!(log.since(Some("r2"), &mut c, 130).is_empty());
        log.push("r1", &[(4, "w3", 0)], 140);
        assert_eq!(log.since(None, &mut c, 140), [RoutedKey::new(4, "w3", 0)]);
    }

    #[test]
    fn a_stream_that_falls_behind_skips_the_oldest_and_an_event_is_bounded() {
        let log = RoutedLog::default();
        let mut c = log.end();
        let keys: Vec<(u64, &str, u64)> = (0..MAX_ROUTED_HELD as u64 + 10)
            .map(|k| (k, "w", 0))
            .collect();
        log.push("r1", &keys, 0);
        let first = log.since(None, &mut c, 0);
        assert_eq!(first.len(), MAX_ROUTED_PER_VIEW);
        // The ten oldest were dropped from the ring.
        assert_eq!(first[0].hash(), Some(10));
        let mut total = first.len();
        loop {
            let more = log.since(None, &mut c, 0);
            if more.is_empty() {
                break;
            }
            total += more.len();
        }
        assert_eq!(total, MAX_ROUTED_HELD);
    }
}
