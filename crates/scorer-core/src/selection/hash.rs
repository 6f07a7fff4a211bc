//! `hash`: consistent hashing with bounded loads.
//!
//! # Algorithm
//!
//! Consistent hashing (Karger, Lehman, Leighton, Panigrahy, Levine, Lewin,
//! "Consistent Hashing and Random Trees", STOC 1997) with the bounded-load
//! refinement of Mirrokni, Thorup, Zadimoghaddam, "Consistent Hashing with
//! Bounded Loads", SODA 2018.
//!
//! * **Ring.** Each worker gets `v` virtual nodes at positions
//!   `stable_hash64("{worker_id}#{i}")` for `i in 0..v` (`v` =
//!   `virtual_nodes`, reduced to `max(1, HASH_MAX_RING_NODES / n)` for huge
//!   candidate lists). Nodes are sorted by `(position, worker)`.
//! * **Lookup.** The request key is hashed the same way
//!   (`stable_hash64(key)`); walk clockwise from the first node at or after
//!   that position (wrapping around).
//! * **Bounded loads.** With `n` candidates, `L = Σ in_flight` and load
//!   factor `c >= 1`, a worker is *skipped* when
//!   `in_flight + 1 > ceil(c × (L + 1) / n)`; the walk continues to the next
//!   node. If every worker is skipped, the worker of the first node visited
//!   is taken. With all `in_flight = 0` nothing is ever skipped, so the
//!   mapping is plain consistent hashing: removing one of `N` workers moves
//!   only that worker's ≈`1/N` share of keys.
//!
//! The ring depends only on the *set* of worker ids (it is built from the
//! sorted ids), so the pick does not depend on candidate order. Worker ids
//! must be unique ([`SelectionError::DuplicateWorker`]). `score` and
//! `weight` are ignored; the rng is unused.
//!
//! # Stable hash
//!
//! `std`'s `DefaultHasher` is explicitly not stable across Rust releases, so
//! positions use a fixed function: 64-bit FNV-1a (offset basis
//! `0xcbf29ce484222325`, prime `0x100000001b3`) followed by the MurmurHash3
//! `fmix64` finaliser (FNV alone has weak avalanche on short, similar
//! strings such as `w#1`, `w#2`). See [`stable_hash64`].
//!
//! # Ring cache
//!
//! Built rings are cached behind a `Mutex` keyed by an order-independent
//! 64-bit hash of the candidate id set; a hit is verified against the
//! ring's sorted id list (a collision just rebuilds). At most
//! [`HASH_MAX_CACHED_RINGS`] rings and [`HASH_MAX_CACHED_NODES`] nodes are
//! kept, evicting least-recently-used. The lock is held only to look up or
//! insert an `Arc`; rings are built outside it. A cache hit allocates
//! nothing except the returned probabilities `Vec`, which is first used as
//! staging space for the ring-slot → candidate-index map.
//!
//! # Propensities
//!
//! Deterministic: 1.0 on the pick, 0 elsewhere (degenerate; not usable for
//! inverse-propensity weighting). The min-share floor does not apply.

use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::selection::support::validate;
use crate::selection::{Candidate, Policy, Selection, SelectionError};

/// Upper bound (4096) on virtual nodes per worker accepted by
/// [`ConsistentHash::new`] and `SelectorConfig::hash_virtual_nodes`.
pub const MAX_VIRTUAL_NODES: u32 = 4096;

/// Largest ring built (4 194 304 nodes ≈ 64 MiB); for `n` workers the
/// virtual-node count is reduced to `max(1, HASH_MAX_RING_NODES / n)` if
/// needed.
pub const HASH_MAX_RING_NODES: usize = 1 << 22;

/// Most rings kept in the cache (64), least-recently-used evicted.
pub const HASH_MAX_CACHED_RINGS: usize = 64;

/// Most ring nodes kept in the cache across all rings (8 388 608 ≈
/// 128 MiB); the most recent ring is always kept.
pub const HASH_MAX_CACHED_NODES: usize = 1 << 23;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv1a64(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// MurmurHash3 64-bit finaliser (bijective avalanche mix).
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

/// The stable 64-bit hash used for ring positions and keys:
/// `fmix64(fnv1a64(bytes))`. Fixed forever (golden-tested), independent of
/// platform, Rust version and process.
pub fn stable_hash64(bytes: &[u8]) -> u64 {
    fmix64(fnv1a64(FNV_OFFSET, bytes))
}

/// `stable_hash64("{id}#{i}")` without allocating.
fn vnode_hash(id: &str, i: u32) -> u64 {
    let mut digits = [0u8; 10];
    let mut len = 0;
    let mut x = i;
    loop {
        // ok: a u32 has at most 10 decimal digits, so len < 10 here.
        digits[len] = b'0' + (x % 10) as u8;
        len += 1;
        x /= 10;
        if x == 0 {
            break;
        }
    }
    let mut h = fnv1a64(FNV_OFFSET, id.as_bytes());
    h = fnv1a64(h, b"#");
    for &d in digits[..len].iter().rev() {
        h = fnv1a64(h, &[d]);
    }
    fmix64(h)
}

/// Order-independent hash of the id multiset (cache key only).
fn set_hash(candidates: &[Candidate<'_>]) -> u64 {
    let (sum, xor) = candidates.iter().fold((0u64, 0u64), |(s, x), c| {
        let h = stable_hash64(c.worker_id.as_bytes());
        (s.wrapping_add(h), x ^ fmix64(h ^ 0x9e37_79b9_7f4a_7c15))
    });
    fmix64(sum ^ xor.rotate_left(32) ^ candidates.len() as u64)
}

#[derive(Debug)]
struct Ring {
    /// Sorted, unique worker ids; a node's `u32` indexes this.
    ids: Vec<Box<str>>,
    /// `(position, worker slot)`, sorted.
    nodes: Vec<(u64, u32)>,
}

#[derive(Debug)]
struct CacheEntry {
    set_hash: u64,
    ring: Arc<Ring>,
    last_used: u64,
}

#[derive(Debug, Default)]
struct RingCache {
    entries: Vec<CacheEntry>,
    tick: u64,
}

/// The `hash` policy: consistent hashing with bounded loads and a bounded
/// ring cache. `Send + Sync`.
#[derive(Debug)]
pub struct ConsistentHash {
    virtual_nodes: u32,
    load_factor: f64,
    cache: Mutex<RingCache>,
    builds: AtomicU64,
}

/// Sentinel for "slot not yet mapped" in the staging buffer.
const UNMAPPED: f64 = -1.0;

impl ConsistentHash {
    /// A policy with `virtual_nodes` nodes per worker (`1..=`
    /// [`MAX_VIRTUAL_NODES`]) and bounded-load factor `load_factor`
    /// (finite, `>= 1`; `1.25` is the usual choice).
    ///
    /// # Errors
    /// [`SelectionError::InvalidConfig`] if either is out of range.
    pub fn new(virtual_nodes: u32, load_factor: f64) -> Result<Self, SelectionError> {
        if virtual_nodes == 0 || virtual_nodes > MAX_VIRTUAL_NODES {
            return Err(SelectionError::InvalidConfig {
                field: "hash_virtual_nodes",
                reason: "must be in 1..=4096",
            });
        }
        if !(load_factor.is_finite() && load_factor >= 1.0) {
            return Err(SelectionError::InvalidConfig {
                field: "hash_load_factor",
                reason: "must be finite and >= 1",
            });
        }
        Ok(Self::new_unchecked(virtual_nodes, load_factor))
    }

    /// Constructor without range checks, for known-good constants. Out-of-range
    /// values would still not panic: 0 virtual nodes is raised to 1 in
    /// `build`, and a load factor < 1 only makes skipping more eager.
    pub(crate) fn new_unchecked(virtual_nodes: u32, load_factor: f64) -> Self {
        Self {
            virtual_nodes,
            load_factor,
            cache: Mutex::new(RingCache::default()),
            builds: AtomicU64::new(0),
        }
    }

    /// Virtual nodes per worker.
    pub fn virtual_nodes(&self) -> u32 {
        self.virtual_nodes
    }

    /// Bounded-load factor `c` (`>= 1`).
    pub fn load_factor(&self) -> f64 {
        self.load_factor
    }

    /// Number of rings built so far (cache misses), for observability.
    pub fn ring_builds(&self) -> u64 {
        self.builds.load(AtomicOrdering::Relaxed)
    }

    /// Number of rings currently cached (`<=` [`HASH_MAX_CACHED_RINGS`]).
    pub fn cached_rings(&self) -> usize {
        self.lock_cache().entries.len()
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, RingCache> {
        // The cache holds only immutable Arcs; a poisoned lock is still
        // consistent.
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn cache_get(&self, key: u64) -> Option<Arc<Ring>> {
        let mut cache = self.lock_cache();
        cache.tick = cache.tick.wrapping_add(1);
        let tick = cache.tick;
        cache
            .entries
            .iter_mut()
            .find(|e| e.set_hash == key)
            .map(|e| {
                e.last_used = tick;
                Arc::clone(&e.ring)
            })
    }

    fn cache_put(&self, key: u64, ring: Arc<Ring>) {
        let mut cache = self.lock_cache();
        cache.tick = cache.tick.wrapping_add(1);
        let tick = cache.tick;
        cache.entries.retain(|e| e.set_hash != key);
        cache.entries.push(CacheEntry {
            set_hash: key,
            ring,
            last_used: tick,
        });
        loop {
            let nodes: usize = cache.entries.iter().map(|e| e.ring.nodes.len()).sum();
            let over = cache.entries.len() > HASH_MAX_CACHED_RINGS
                || (nodes > HASH_MAX_CACHED_NODES && cache.entries.len() > 1);
            if !over {
                break;
            }
            let oldest = cache
                .entries
                .iter()
                .enumerate()
                .filter(|(_, e)| e.last_used != tick)
                .min_by_key(|(_, e)| e.last_used)
                .map(|(i, _)| i);
            match oldest {
                Some(i) => {
                    cache.entries.swap_remove(i);
                }
                None => break,
            }
        }
    }

    /// Builds the ring for validated candidates and fills `staging[slot] =
    /// candidate index`.
    fn build(
        &self,
        candidates: &[Candidate<'_>],
        staging: &mut [f64],
    ) -> Result<Ring, SelectionError> {
        let n = candidates.len();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_unstable_by(|&a, &b| candidates[a].worker_id.cmp(candidates[b].worker_id));
        // ok: `order` is a permutation of 0..n, so indexing `candidates` is in bounds.
        for pair in order.windows(2) {
            if let [a, b] = *pair
                && candidates[a].worker_id == candidates[b].worker_id
            {
                return Err(SelectionError::DuplicateWorker(
                    candidates[a].worker_id.to_owned(),
                ));
            }
        }
        let per_worker = u32::try_from((HASH_MAX_RING_NODES / n.max(1)).max(1))
            .unwrap_or(u32::MAX)
            .min(self.virtual_nodes)
            .max(1);
        let mut nodes = Vec::with_capacity(n.saturating_mul(per_worker as usize));
        let mut ids = Vec::with_capacity(n);
        for (slot, &ci) in order.iter().enumerate() {
            let id = candidates[ci].worker_id;
            // n <= MAX_CANDIDATES (65 536), so the slot always fits in u32;
            // try_from keeps this panic-free regardless.
            let slot32 = u32::try_from(slot).unwrap_or(u32::MAX);
            for v in 0..per_worker {
                nodes.push((vnode_hash(id, v), slot32));
            }
            ids.push(Box::<str>::from(id));
            if let Some(s) = staging.get_mut(slot) {
                *s = ci as f64;
            }
        }
        nodes.sort_unstable();
        self.builds.fetch_add(1, AtomicOrdering::Relaxed);
        Ok(Ring { ids, nodes })
    }
}

/// Maps candidates onto a cached ring's slots. `Ok(false)`: the ring is for
/// a different id set (cache-key collision). Leaves `staging[slot] =
/// candidate index` on success.
fn map_onto(
    ring: &Ring,
    candidates: &[Candidate<'_>],
    staging: &mut [f64],
) -> Result<bool, SelectionError> {
    if ring.ids.len() != candidates.len() {
        return Ok(false);
    }
    staging.iter_mut().for_each(|s| *s = UNMAPPED);
    for (ci, c) in candidates.iter().enumerate() {
        let Ok(slot) = ring.ids.binary_search_by(|id| (**id).cmp(c.worker_id)) else {
            return Ok(false);
        };
        match staging.get_mut(slot) {
            Some(s) if *s == UNMAPPED => *s = ci as f64,
            Some(_) => return Err(SelectionError::DuplicateWorker(c.worker_id.to_owned())),
            None => return Ok(false),
        }
    }
    Ok(true)
}

impl Policy for ConsistentHash {
    /// Errors: input validation errors and
    /// [`SelectionError::DuplicateWorker`]. The rng is unused.
    fn select<R: rand::Rng + ?Sized>(
        &self,
        candidates: &[Candidate<'_>],
        key: &str,
        _rng: &mut R,
    ) -> Result<Selection, SelectionError> {
        validate(candidates)?;
        let n = candidates.len();
        let cache_key = set_hash(candidates);
        // Staging first (slot -> candidate index), probabilities afterwards.
        let mut buf = vec![UNMAPPED; n];

        let ring = match self.cache_get(cache_key) {
            Some(ring) if map_onto(&ring, candidates, &mut buf)? => ring,
            _ => {
                let ring = Arc::new(self.build(candidates, &mut buf)?);
                self.cache_put(cache_key, Arc::clone(&ring));
                ring
            }
        };

        let total_in_flight: f64 = candidates.iter().map(|c| c.in_flight).sum();
        let cap = (self.load_factor * (total_in_flight + 1.0) / n as f64).ceil();
        let key_pos = stable_hash64(key.as_bytes());
        let len = ring.nodes.len();
        let start = ring.nodes.partition_point(|&(pos, _)| pos < key_pos);

        let mut first = None;
        let mut chosen = None;
        for k in 0..len {
            let Some(&(_, slot)) = ring.nodes.get((start + k) % len) else {
                continue;
            };
            let Some(&ci) = buf.get(slot as usize) else {
                continue;
            };
            let ci = ci as usize;
            let Some(c) = candidates.get(ci) else {
                continue;
            };
            first.get_or_insert(ci);
            if c.in_flight + 1.0 <= cap {
                chosen = Some(ci);
                break;
            }
        }
        // `first` is always set (the ring has >= n >= 1 nodes, all mapped);
        // 0 is a panic-free fallback for the impossible case.
        let pick = chosen.or(first).unwrap_or(0);

        buf.iter_mut().for_each(|p| *p = 0.0);
        if let Some(p) = buf.get_mut(pick) {
            *p = 1.0;
        }
        Ok(Selection {
            pick,
            probabilities: buf,
        })
    }
}

#[cfg(test)]
mod golden {
    use super::{FNV_OFFSET, fnv1a64, stable_hash64, vnode_hash};

    #[test]
    fn fnv1a64_matches_reference_vectors() {
        // From the FNV reference test suite (isthe.com/chongo/tech/comp/fnv).
        assert_eq!(fnv1a64(FNV_OFFSET, b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(FNV_OFFSET, b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(FNV_OFFSET, b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn vnode_hash_equals_hash_of_formatted_string() {
        for i in [0, 1, 9, 10, 159, 4095, u32::MAX] {
            assert_eq!(
                vnode_hash("worker-7", i),
                stable_hash64(format!("worker-7#{i}").as_bytes())
            );
        }
    }

    #[test]
    fn stable_hash64_golden_values() {
        // Pinned: changing these silently remaps every key in production.
        // Cross-checked against an independent Python implementation.
        assert_eq!(stable_hash64(b""), 0xefd0_1f60_ba99_2926);
        assert_eq!(stable_hash64(b"worker-0#0"), 0x020f_07d3_b8a2_dd42);
        assert_eq!(stable_hash64(b"user-42"), 0xa395_32c7_ab05_1e8d);
    }
}
