//! Picks waiting for their feedback: decision id → picked worker, with what
//! the feedback needs to learn from the outcome, and an expiry.
//!
//! A bounded table (16 shards so the score path never contends on one
//! lock). Each shard indexes its picks twice: by deadline, so that every
//! pick stops counting as outstanding for its worker
//! ([`scorer_core::dynamics::LocalEvidence::expire`]) at its own `expires_ms`
//! however long the picks made before it wait, and by age, so that when
//! `remembered_decisions` newer picks fill the table the oldest goes first.
//! Inserting retires the shard's expired picks; the binary retires every
//! shard's once a second.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex};

use hashbrown::HashTable;
use scorer_core::dynamics::PickRecord;
use scorer_core::state::WorkerSlot;

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
    /// The pick's expected latency, ms (NaN when the cost had none).
    pub expected_ms: f64,
    /// The config canary's generation and the arm that made the pick,
    /// while a canary runs.
    pub arm: Option<(u64, crate::canary::ConfigArm)>,
}

/// A pick in its shard, under its decision id, with the keys of its two
/// indexes.
#[derive(Debug)]
struct Entry {
    id: String,
    hash: u64,
    pick: PendingPick,
    seq: u64,
}

/// One shard. Its table owns the decision ids (moved in, never copied);
/// the indexes name entries by `(hash, seq)` and keep the names of entries
/// already gone until they reach the front or a compaction, so that every
/// structure only grows to the shard's working set: once there, a pick
/// allocates nothing.
#[derive(Debug, Default)]
struct Shard {
    picks: HashTable<Entry>,
    hasher: foldhash::fast::RandomState,
    /// (expires_ms, seq, hash), the next to expire first.
    by_deadline: BinaryHeap<Reverse<(u64, u64, u64)>>,
    /// (seq, hash), the oldest first.
    by_age: VecDeque<(u64, u64)>,
    next_seq: u64,
}

impl Shard {
    fn hash(&self, id: &str) -> u64 {
        self.hasher.hash_one(id)
    }

    fn insert(&mut self, id: String, pick: PendingPick) -> Option<PendingPick> {
        let hash = self.hash(&id);
        let old = self.remove(&id);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.by_deadline.push(Reverse((pick.expires_ms, seq, hash)));
        self.by_age.push_back((seq, hash));
        let entry = Entry {
            id,
            hash,
            pick,
            seq,
        };
        self.picks.insert_unique(hash, entry, |e| e.hash);
        self.compact();
        old
    }

    fn get(&self, id: &str) -> Option<&PendingPick> {
        let hash = self.hash(id);
        self.picks.find(hash, |e| e.id == id).map(|e| &e.pick)
    }

    fn remove(&mut self, id: &str) -> Option<PendingPick> {
        let hash = self.hash(id);
        let found = self.picks.find_entry(hash, |e| e.id == id).ok()?;
        Some(found.remove().0.pick)
    }

    /// Removes the entry an index names, if it is still there.
    fn remove_seq(&mut self, hash: u64, seq: u64) -> Option<PendingPick> {
        let found = self.picks.find_entry(hash, |e| e.seq == seq).ok()?;
        Some(found.remove().0.pick)
    }

    fn live(&self, hash: u64, seq: u64) -> bool {
        self.picks.find(hash, |e| e.seq == seq).is_some()
    }

    /// Drops the names of removed entries once they outnumber the live
    /// ones (in place: amortised O(1) a pick).
    fn compact(&mut self) {
        let limit = 2 * self.picks.len() + 64;
        if self.by_deadline.len() > limit {
            let mut heap = std::mem::take(&mut self.by_deadline);
            heap.retain(|Reverse((_, seq, hash))| self.live(*hash, *seq));
            self.by_deadline = heap;
        }
        if self.by_age.len() > limit {
            let mut ages = std::mem::take(&mut self.by_age);
            ages.retain(|&(seq, hash)| self.live(hash, seq));
            self.by_age = ages;
        }
    }
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
    pub(super) fn remember(&self, decision_id: String, pick: PendingPick, now_ms: u64) {
        let mut s = self.shard(&decision_id);
        retire(&mut s, now_ms, self.per_shard.saturating_sub(1));
        if let Some(old) = s.insert(decision_id, pick) {
            // A repeated id: the earlier pick no longer waits for anything.
            old.slot.evidence().expire();
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
        match s.get(decision_id) {
            None => Lookup::Unknown,
            Some(p) if &*p.worker_id != worker_id => Lookup::OtherWorker,
            Some(_) => s
                .remove(decision_id)
                .map_or(Lookup::Unknown, |p| Lookup::Picked(Box::new(p))),
        }
    }
}

/// Retires from `s` every pick expired at `now_ms`, whatever its place,
/// then the oldest beyond `keep`; each retired pick stops counting.
fn retire(s: &mut Shard, now_ms: u64, keep: usize) {
    while let Some(&Reverse((expires_ms, seq, hash))) = s.by_deadline.peek()
        && expires_ms <= now_ms
    {
        s.by_deadline.pop();
        if let Some(p) = s.remove_seq(hash, seq) {
            p.slot.evidence().expire();
        }
    }
    while s.picks.len() > keep
        && let Some((seq, hash)) = s.by_age.pop_front()
    {
        if let Some(p) = s.remove_seq(hash, seq) {
            p.slot.evidence().expire();
        }
    }
}
