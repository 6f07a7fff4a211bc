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

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

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

/// A pick in its shard, with the keys of its two indexes.
#[derive(Debug)]
struct Entry {
    pick: PendingPick,
    seq: u64,
}

#[derive(Debug, Default)]
struct Shard {
    picks: HashMap<Arc<str>, Entry>,
    /// (expires_ms, seq) → id: the next pick to expire first.
    by_deadline: BTreeMap<(u64, u64), Arc<str>>,
    /// seq → id: the oldest pick first.
    by_age: BTreeMap<u64, Arc<str>>,
    next_seq: u64,
}

impl Shard {
    fn insert(&mut self, id: &str, pick: PendingPick) -> Option<PendingPick> {
        let old = self.remove(id);
        let seq = self.next_seq;
        self.next_seq += 1;
        let id: Arc<str> = Arc::from(id);
        self.by_deadline.insert((pick.expires_ms, seq), id.clone());
        self.by_age.insert(seq, id.clone());
        self.picks.insert(id, Entry { pick, seq });
        old
    }

    fn remove(&mut self, id: &str) -> Option<PendingPick> {
        let e = self.picks.remove(id)?;
        self.by_deadline.remove(&(e.pick.expires_ms, e.seq));
        self.by_age.remove(&e.seq);
        Some(e.pick)
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
    pub(super) fn remember(&self, decision_id: &str, pick: PendingPick, now_ms: u64) {
        let mut s = self.shard(decision_id);
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
        match s.picks.get(decision_id) {
            None => Lookup::Unknown,
            Some(e) if &*e.pick.worker_id != worker_id => Lookup::OtherWorker,
            Some(_) => s
                .remove(decision_id)
                .map_or(Lookup::Unknown, |p| Lookup::Picked(Box::new(p))),
        }
    }
}

/// Retires from `s` every pick expired at `now_ms`, whatever its place,
/// then the oldest beyond `keep`; each retired pick stops counting.
fn retire(s: &mut Shard, now_ms: u64, keep: usize) {
    while let Some(next) = s.by_deadline.first_entry()
        && next.key().0 <= now_ms
    {
        let id = next.remove();
        if let Some(e) = s.picks.remove(&id) {
            s.by_age.remove(&e.seq);
            e.pick.slot.evidence().expire();
        }
    }
    while s.picks.len() > keep
        && let Some((_, id)) = s.by_age.pop_first()
    {
        if let Some(e) = s.picks.remove(&id) {
            s.by_deadline.remove(&(e.pick.expires_ms, e.seq));
            e.pick.slot.evidence().expire();
        }
    }
}
