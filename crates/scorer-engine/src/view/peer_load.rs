//! One decider's outstanding picks as the others hear them: what a router
//! or a service replica reports ([`outstanding_of`]), when it reports it
//! ([`LoadSchedule`]), and how a replica adds up its peers' reports into
//! the backlog it did not send ([`PeerLoads`]).
//!
//! A report is an absolute gauge, never an increment, sent every
//! [`LOAD_INTERVAL_MS`](super::LOAD_INTERVAL_MS) while it changes and every [`LOAD_HEARTBEAT_MS`]
//! regardless; a decider silent for [`ROUTER_LOAD_TTL_MS`] no longer
//! counts. NVIDIA Dynamo's router replicas share their in-flight requests
//! the same way, so that each one's active-load term sees the others'.

use std::collections::HashMap;

use scorer_core::state::Registry;

use super::{ROUTER_LOAD_TTL_MS, RoutedKey, WorkerLoad};
use crate::Engine;

/// The longest an unchanged load goes unreported, ms: a decider's load
/// keeps counting while its reports come at least this often.
pub const LOAD_HEARTBEAT_MS: u64 = 250;

/// The outstanding picks per worker of the engine holding `registry`
/// (the workers with any), sorted by id: what it reports.
pub fn outstanding_of(registry: &Registry) -> Vec<WorkerLoad> {
    let mut out: Vec<WorkerLoad> = registry
        .slots()
        .iter()
        .filter_map(|slot| {
            let outstanding = slot.evidence().snapshot().outstanding;
            (outstanding > 0).then(|| WorkerLoad {
                worker_id: slot.view().worker_id.to_string(),
                outstanding,
            })
        })
        .collect();
    out.sort_by(|a, b| a.worker_id.cmp(&b.worker_id));
    out
}

/// When a decider reports its load: checked every [`LOAD_INTERVAL_MS`](super::LOAD_INTERVAL_MS),
/// sent when it changed, when keys were routed since, or after
/// [`LOAD_HEARTBEAT_MS`] of the same.
#[derive(Debug, Default)]
pub struct LoadSchedule {
    last: Option<(Vec<WorkerLoad>, u64)>,
}

impl LoadSchedule {
    /// Whether `outstanding` (with `routed` keys since the last report)
    /// is due at monotonic `now_ms`.
    pub fn due(&self, outstanding: &[WorkerLoad], routed: &[RoutedKey], now_ms: u64) -> bool {
        match &self.last {
            None => true,
            Some((sent, at_ms)) => {
                sent.as_slice() != outstanding
                    || !routed.is_empty()
                    || now_ms.saturating_sub(*at_ms) >= LOAD_HEARTBEAT_MS
            }
        }
    }

    /// `outstanding` was reported at monotonic `now_ms`.
    pub fn sent(&mut self, outstanding: Vec<WorkerLoad>, now_ms: u64) {
        self.last = Some((outstanding, now_ms));
    }
}

/// The latest load each peer replica reported, each as of when it was
/// heard.
#[derive(Debug, Default)]
pub struct PeerLoads {
    peers: HashMap<String, (Vec<WorkerLoad>, u64)>,
}

impl PeerLoads {
    /// Peer `replica` reported `outstanding`, heard at monotonic `now_ms`
    /// (it replaces the peer's last).
    pub fn hear(&mut self, replica: &str, outstanding: Vec<WorkerLoad>, now_ms: u64) {
        self.peers.insert(replica.to_owned(), (outstanding, now_ms));
    }

    /// Forgets the peers silent for [`ROUTER_LOAD_TTL_MS`] at `now_ms`;
    /// whether any was.
    pub fn expire(&mut self, now_ms: u64) -> bool {
        let before = self.peers.len();
        self.peers
            .retain(|_, (_, at_ms)| now_ms.saturating_sub(*at_ms) < ROUTER_LOAD_TTL_MS);
        self.peers.len() != before
    }

    /// The peers that count.
    pub fn peers(&self) -> usize {
        self.peers.len()
    }

    /// The peers' outstanding picks on `worker_id`, summed.
    pub fn on(&self, worker_id: &str) -> u32 {
        self.peers
            .values()
            .flat_map(|(load, _)| load.iter())
            .filter(|l| l.worker_id == worker_id)
            .fold(0u32, |sum, l| sum.saturating_add(l.outstanding))
    }

    /// Gives `engine` its peers' load as of `now_ms`: every known worker's
    /// backlog from the other replicas (0 where none names it), and the
    /// peers as deciders on the pool beside it
    /// ([`Engine::set_routers_sharing`]).
    pub fn apply(&self, engine: &Engine, now_ms: u64) {
        let mut sums: HashMap<&str, u32> = HashMap::new();
        for l in self.peers.values().flat_map(|(load, _)| load.iter()) {
            let n = sums.entry(l.worker_id.as_str()).or_insert(0);
            *n = n.saturating_add(l.outstanding);
        }
        for slot in engine.registry().slots() {
            let n = sums.get(&*slot.view().worker_id).copied().unwrap_or(0);
            slot.evidence().on_others(n, now_ms);
        }
        let deciders = u32::try_from(self.peers.len()).unwrap_or(u32::MAX);
        engine.set_routers_sharing(deciders.saturating_add(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(pairs: &[(&str, u32)]) -> Vec<WorkerLoad> {
        pairs
            .iter()
            .map(|(w, n)| WorkerLoad {
                worker_id: (*w).to_owned(),
                outstanding: *n,
            })
            .collect()
    }

    #[test]
    fn a_load_is_due_when_it_changes_when_keys_were_routed_and_after_the_heartbeat() {
        let mut s = LoadSchedule::default();
        let a = load(&[("w1", 1)]);
        assert!(s.due(&a, &[], 0), "the first report");
        s.sent(a.clone(), 0);
        assert!(!s.due(&a, &[], LOAD_HEARTBEAT_MS - 1));
        assert!(s.due(&a, &[], LOAD_HEARTBEAT_MS));
        assert!(s.due(&load(&[("w1", 2)]), &[], 1));
        assert!(s.due(&[], &[], 1), "a load that fell to nothing");
        let routed = RoutedKey {
            key_hash: "00000000000000ff".into(),
            worker_id: "w1".into(),
            age_ms: 0,
        };
        assert!(s.due(&a, &[routed], 1));
    }

    #[test]
    fn peers_add_up_replace_their_own_last_and_stop_counting_after_the_ttl() {
        let mut p = PeerLoads::default();
        p.hear("a", load(&[("w1", 2), ("w2", 1)]), 0);
        p.hear("b", load(&[("w1", 3)]), 10);
        assert_eq!((p.on("w1"), p.on("w2"), p.peers()), (5, 1, 2));
        p.hear("a", load(&[("w2", 4)]), 20);
        assert_eq!((p.on("w1"), p.on("w2")), (3, 4));
        assert!(!p.expire(ROUTER_LOAD_TTL_MS + 9));
        assert!(p.expire(ROUTER_LOAD_TTL_MS + 10), "b, heard at 10");
        assert_eq!((p.on("w1"), p.on("w2"), p.peers()), (0, 4, 1));
    }
}
