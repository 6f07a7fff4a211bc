//! An embedded balancer's routed keys, waiting for its next load report
//! (`POST /v1/router/load`'s `routed`), so that the other routers learn
//! where it sent each key. Bounded: beyond [`MAX_ROUTED_PER_REPORT`] the
//! oldest are dropped and counted (the others' indexes then miss them).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::view::{MAX_ROUTED_PER_REPORT, RoutedKey};

/// Routed keys waiting for the next report.
#[derive(Debug, Default)]
pub struct RoutedOutbox {
    keys: Mutex<VecDeque<(u64, Arc<str>, u64)>>,
    dropped: AtomicU64,
}

impl RoutedOutbox {
    /// The key of hash `key_hash` went to `worker` at monotonic `at_ms`.
    pub fn push(&self, key_hash: u64, worker: Arc<str>, at_ms: u64) {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        if keys.len() == MAX_ROUTED_PER_REPORT {
            keys.pop_front();
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        keys.push_back((key_hash, worker, at_ms));
    }

    /// Every waiting key, oldest first, with its age at monotonic `now_ms`.
    pub fn take(&self, now_ms: u64) -> Vec<RoutedKey> {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.drain(..)
            .map(|(h, w, at)| RoutedKey::new(h, &*w, now_ms.saturating_sub(at)))
            .collect()
    }

    /// Keys dropped unreported because the outbox was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_leave_once_oldest_first_and_a_full_outbox_drops_the_oldest() {
        let o = RoutedOutbox::default();
        o.push(1, Arc::from("w1"), 10);
        o.push(2, Arc::from("w2"), 15);
        assert_eq!(
            o.take(20),
            [RoutedKey::new(1, "w1", 10), RoutedKey::new(2, "w2", 5)]
        );
        assert!(o.take(20).is_empty());
        for k in 0..=MAX_ROUTED_PER_REPORT as u64 {
            o.push(k, Arc::from("w"), 0);
        }
        let all = o.take(0);
        assert_eq!(all.len(), MAX_ROUTED_PER_REPORT);
        assert_eq!(all[0].hash(), Some(1));
        assert_eq!(o.dropped(), 1);
    }
}
