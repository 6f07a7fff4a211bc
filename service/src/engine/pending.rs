//! Picks waiting for their feedback: decision id → picked worker, with what
//! the feedback needs to learn from the outcome, and an expiry.
//!
//! A bounded table (16 shards so the score path never contends on one
//! lock). Each shard keeps its ids in insertion order; inserting into a
//! shard first retires, from the front, the picks that expired or that the
//! capacity no longer holds: each stops counting as outstanding for its
//! worker ([`crate::dynamics::LocalEvidence::expire`]). A pick therefore
//! stops counting at most `max_expiry_ms` after it was made, or when
//! `remembered_decisions` newer picks pushed it out.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::dynamics::PickRecord;
use crate::state::WorkerSlot;

const SHARDS: usize = 16;

/// One pick waiting for feedback.
#[derive(Debug, Clone)]
pub(super) struct PendingPick {
    /// The picked worker's id.
    pub worker_id: Arc<str>,
    /// Its slot (its evidence is updated even if the registry forgot it).
    pub slot: Arc<WorkerSlot>,
    /// What the outcome is judged against.
    pub record: PickRecord,
    /// When the pick stops counting without feedback, monotonic ms.
    pub expires_ms: u64,
}

#[derive(Debug, Default)]
struct Shard {
    picks: HashMap<String, PendingPick>,
    order: VecDeque<String>,
}

/// Bounded map decision id → pending pick.
#[derive(Debug)]
pub(super) struct PendingPicks {
    shards: Vec<Mutex<Shard>>,
    per_shard: usize,
}

fn shard_of(id: &str) -> usize {
    id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }) as usize
        % SHARDS
}

/// What the pending picks say about a feedback.
#[derive(Debug)]
pub(super) enum Lookup {
    /// Not remembered (restart, expiry, eviction, or already answered).
    Unknown,
    /// Remembered, but the feedback names another worker than the pick.
    OtherWorker,
    /// Remembered and this worker was picked; now forgotten.
    Picked(Box<PendingPick>),
}

impl PendingPicks {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
        }
    }

    fn shard(&self, id: &str) -> std::sync::MutexGuard<'_, Shard> {
        self.shards[shard_of(id)]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Remembers `pick` under `decision_id` at `now_ms`, first retiring the
    /// shard's expired and over-capacity picks.
    pub(super) fn remember(&self, decision_id: &str, pick: PendingPick, now_ms: u64) {
        let mut s = self.shard(decision_id);
        retire(&mut s, now_ms, self.per_shard.saturating_sub(1));
        if let Some(old) = s.picks.insert(decision_id.to_owned(), pick) {
            // A repeated id: the earlier pick no longer waits for anything.
            old.slot.evidence().expire();
        } else {
            s.order.push_back(decision_id.to_owned());
        }
    }

    /// Retires every shard's expired picks at `now_ms` (the binary calls
    /// this periodically, so a quiet service does not keep stale picks).
    pub(super) fn retire_expired(&self, now_ms: u64) {
        for sh in &self.shards {
            let mut s = sh.lock().unwrap_or_else(|e| e.into_inner());
            retire(&mut s, now_ms, self.per_shard);
        }
    }

    /// Looks `decision_id` up; forgets it only when its pick was
    /// `worker_id`, so a mistaken feedback does not consume the decision.
    pub(super) fn take_if_picked(&self, decision_id: &str, worker_id: &str) -> Lookup {
        let mut s = self.shard(decision_id);
        match s.picks.get(decision_id) {
            None => Lookup::Unknown,
            Some(p) if &*p.worker_id != worker_id => Lookup::OtherWorker,
            Some(_) => match s.picks.remove(decision_id) {
                Some(p) => Lookup::Picked(Box::new(p)),
                None => Lookup::Unknown,
            },
        }
    }
}

/// Pops from the front of `s` the ids already answered, the picks expired
/// at `now_ms`, and any beyond `keep`; each retired pick stops counting.
fn retire(s: &mut Shard, now_ms: u64, keep: usize) {
    while let Some(front) = s.order.front() {
        let expired = match s.picks.get(front) {
            None => {
                s.order.pop_front();
                continue;
            }
            Some(p) => p.expires_ms <= now_ms || s.picks.len() > keep,
        };
        if !expired {
            break;
        }
        if let Some(id) = s.order.pop_front()
            && let Some(p) = s.picks.remove(&id)
        {
            p.slot.evidence().expire();
        }
    }
}
