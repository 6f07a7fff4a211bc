//! The records a log writer wrote lately, by key, so that a batch
//! delivered again (an acknowledgement lost, or `ack_wait` passed while the
//! writer was busy) is not written twice. Bounded: the oldest keys leave
//! first. Keys are 64-bit hashes of the record's identity: two different
//! records collide with odds of about n² / 2⁶⁵ (3·10⁻⁸ for a million).

use std::collections::{HashSet, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};

use arrow::array::{Array, AsArray, BooleanArray, RecordBatch};
use arrow::datatypes::TimestampMillisecondType;
use scorer_log::LogKind;

/// Default [`WrittenIds`] capacity: about 40 s of 25 000 records/s, and
/// 16 bytes a key.
pub const DEFAULT_WRITTEN_IDS: usize = 1 << 20;

/// The keys of the records written lately, at most `capacity`.
#[derive(Debug)]
pub struct WrittenIds {
    set: HashSet<u64>,
    order: VecDeque<u64>,
    capacity: usize,
}

impl WrittenIds {
    /// An empty window of `capacity` keys (at least one).
    pub fn new(capacity: usize) -> Self {
        Self {
            set: HashSet::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Keys held now.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The keys of `batch`'s records (a decision: its id and whether it is
    /// a shadow row, which shares its primary's id; an outcome: its
    /// decision, worker and time), and which of them are new: neither in
    /// the window nor earlier in the batch. `None` when the batch lacks the
    /// columns of its kind.
    pub fn fresh(&self, kind: LogKind, batch: &RecordBatch) -> Option<(Vec<u64>, BooleanArray)> {
        let keys = keys(kind, batch)?;
        let mut in_batch = HashSet::with_capacity(keys.len());
        let fresh: BooleanArray = keys
            .iter()
            .map(|k| Some(!self.set.contains(k) && in_batch.insert(*k)))
            .collect();
        Some((keys, fresh))
    }

    /// Remembers `keys` as written, forgetting the oldest beyond capacity.
    pub fn insert(&mut self, keys: impl IntoIterator<Item = u64>) {
        for k in keys {
            if self.set.insert(k) {
                self.order.push_back(k);
            }
            while self.order.len() > self.capacity {
                if let Some(old) = self.order.pop_front() {
                    self.set.remove(&old);
                }
            }
        }
    }
}

fn keys(kind: LogKind, batch: &RecordBatch) -> Option<Vec<u64>> {
    let ids = batch
        .column_by_name("decision_id")?
        .as_string_opt::<i32>()?;
    let mut out = Vec::with_capacity(batch.num_rows());
    match kind {
        LogKind::Decisions => {
            let arm = batch.column_by_name("arm")?.as_string_opt::<i32>()?;
            for i in 0..batch.num_rows() {
                let mut h = DefaultHasher::new();
                (
                    "d",
                    ids.value(i),
                    arm.is_valid(i) && arm.value(i) == scorer_log::SHADOW_ARM,
                )
                    .hash(&mut h);
                out.push(h.finish());
            }
        }
        LogKind::Outcomes => {
            let worker = batch.column_by_name("worker_id")?.as_string_opt::<i32>()?;
            let ts = batch
                .column_by_name("ts_ms")?
                .as_primitive_opt::<TimestampMillisecondType>()?;
            for i in 0..batch.num_rows() {
                let mut h = DefaultHasher::new();
                ("o", ids.value(i), worker.value(i), ts.value(i)).hash(&mut h);
                out.push(h.finish());
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use scorer_log::{OutcomeRecord, outcomes_batch};

    fn outcomes(ids: &[&str]) -> RecordBatch {
        let recs: Vec<OutcomeRecord> = ids
            .iter()
            .map(|id| OutcomeRecord {
                decision_id: (*id).to_owned(),
                worker_id: "w".into(),
                ts_ms: 1_700_000_000_000,
                latency_ms: 1.0,
                success: true,
                caller: None,
                cache_hit: None,
            })
            .collect();
        outcomes_batch(&recs).expect("batch")
    }

    #[test]
    fn a_record_written_once_is_not_fresh_again_until_it_leaves_the_window() {
        let mut w = WrittenIds::new(3);
        let (keys, fresh) = w
            .fresh(LogKind::Outcomes, &outcomes(&["a", "b", "a"]))
            .expect("keys");
        assert_eq!(fresh, BooleanArray::from(vec![true, true, false]));
        w.insert(keys);
        assert_eq!(w.len(), 2);
        let (keys, fresh) = w
            .fresh(LogKind::Outcomes, &outcomes(&["b", "c", "d"]))
            .expect("keys");
        assert_eq!(fresh, BooleanArray::from(vec![false, true, true]));
        w.insert(keys);
        // Capacity 3: "a", the oldest, left.
        assert_eq!(w.len(), 3);
        let (_, fresh) = w
            .fresh(LogKind::Outcomes, &outcomes(&["a", "d"]))
            .expect("keys");
        assert_eq!(fresh, BooleanArray::from(vec![true, false]));
    }
}
