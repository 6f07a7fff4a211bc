//! The working buffers of a decision, reused on each thread: a compact
//! decision hands them back ([`crate::decision::Decision::recycle`]) and
//! the next one on the thread takes them, so once they have grown to the
//! pool a pick allocates none. An explained decision moves its buffers into
//! the answer and leaves the next decision to allocate its own.
//!
//! Buffers of borrowed candidate ids are kept empty under a `'static`
//! label and relabelled to a decision's lifetime by an in-place collect
//! over no element, which reuses the allocation.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::decision::Scored;
use scorer_core::selection::Candidate;

/// One decision's reusable buffers, beyond those in its fields.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    /// Hash of a candidate id → its index among the distinct ids.
    pub seen: HashMap<u64, u32, foldhash::fast::RandomState>,
    /// Hashes the ids for `seen`.
    pub ids_hasher: foldhash::fast::RandomState,
    /// Per selectable candidate figures of the cost stage.
    pub figures: Vec<f64>,
    /// The values a median is taken of.
    pub sample: Vec<f64>,
    /// The selector's input.
    pub candidates: Vec<Candidate<'static>>,
}

/// Everything a decision takes from its thread's pool.
#[derive(Debug, Default)]
pub(crate) struct Buffers {
    pub ids: Vec<&'static str>,
    pub scored: Vec<Scored>,
    pub selectable: Vec<usize>,
    pub probability: Vec<Option<f64>>,
    pub scratch: Scratch,
}

thread_local! {
    static POOL: RefCell<Option<Buffers>> = const { RefCell::new(None) };
}

/// The thread's buffers (empty ones when another decision holds them).
pub(crate) fn take() -> Buffers {
    POOL.try_with(|p| p.try_borrow_mut().ok().and_then(|mut p| p.take()))
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Gives `b` back to the thread's pool.
pub(crate) fn give(b: Buffers) {
    let _ = POOL.try_with(|p| {
        if let Ok(mut p) = p.try_borrow_mut() {
            *p = Some(b);
        }
    });
}

/// `v` emptied, under another lifetime, its allocation kept.
#[allow(clippy::unnecessary_filter_map)] // `filter` cannot change the lifetime
pub(crate) fn relabel<'b>(mut v: Vec<&str>) -> Vec<&'b str> {
    v.clear();
    v.into_iter().filter_map(|_| None).collect()
}

/// `v` emptied, under another lifetime, its allocation kept.
#[allow(clippy::unnecessary_filter_map)] // `filter` cannot change the lifetime
pub(crate) fn relabel_candidates<'b>(mut v: Vec<Candidate<'_>>) -> Vec<Candidate<'b>> {
    v.clear();
    v.into_iter().filter_map(|_| None).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relabelling_keeps_the_allocation() {
        let mut v: Vec<&str> = Vec::with_capacity(64);
        v.push("a");
        let ptr = v.as_ptr() as usize;
        let w: Vec<&'static str> = relabel(v);
        assert_eq!((w.len(), w.capacity(), w.as_ptr() as usize), (0, 64, ptr));
    }
}
