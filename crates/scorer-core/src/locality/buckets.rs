//! A set-associative table of `u64` entries read and written with relaxed
//! atomics: a hash picks one bucket of `WAYS` entries. The routing index
//! and the prefix hit rates keep their entries in one.

use std::sync::atomic::AtomicU64;

/// Buckets of `WAYS` atomic entries, a power of two of them.
#[derive(Debug)]
pub(crate) struct Buckets<const WAYS: usize> {
    entries: Box<[AtomicU64]>,
    mask: usize,
}

impl<const WAYS: usize> Buckets<WAYS> {
    /// At least `entries` entries (rounded up to a power of two buckets, at
    /// least one), all 0.
    pub(crate) fn new(entries: usize) -> Self {
        let buckets = entries.div_ceil(WAYS).max(1).next_power_of_two();
        Self {
            entries: (0..buckets * WAYS).map(|_| AtomicU64::new(0)).collect(),
            mask: buckets - 1,
        }
    }

    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The table's memory, bytes.
    pub(crate) fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.entries)
    }

    /// The bucket `hash` picks.
    pub(crate) fn bucket(&self, hash: u64) -> &[AtomicU64] {
        let b = (hash as usize) & self.mask;
        &self.entries[b * WAYS..(b + 1) * WAYS]
    }
}
