//! A worker's cache ([`crate::scenario::CacheSpec`]) and the key space the
//! requests draw from: Zipf-popular keys, optionally under Zipf-popular
//! prefixes (`tenant:{t}:user:{r}`), and a key that turns hot.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::num::NonZeroUsize;

use lru::LruCache;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use scorer_core::locality::Bloom;
use scorer_core::telemetry::CacheDigest;

use super::dist::Zipf;
use crate::scenario::{EvictionPolicy, Scenario};

/// One worker's cache: keys by id, evicted by the scenario's policy.
#[derive(Debug)]
pub struct WorkerCache {
    keys: LruCache<u64, ()>,
    policy: EvictionPolicy,
}

impl WorkerCache {
    /// An empty cache of `capacity` keys (at least one).
    pub fn new(capacity: usize, policy: EvictionPolicy) -> Self {
        let cap = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        Self {
            keys: LruCache::new(cap),
            policy,
        }
    }

    /// Whether `key` is held, without touching it (what an oracle reads).
    pub fn contains(&self, key: u64) -> bool {
        self.keys.contains(&key)
    }

    /// A GET of `key`: `true` on a hit (refreshed under LRU); a miss admits
    /// the key, evicting one if full.
    pub fn get(&mut self, key: u64) -> bool {
        let hit = match self.policy {
            EvictionPolicy::Lru => self.keys.get(&key).is_some(),
            EvictionPolicy::Fifo => self.keys.peek(&key).is_some(),
        };
        if !hit {
            self.keys.put(key, ());
        }
        hit
    }

    /// A PUT of `key` writes through and admits it (refreshed under LRU).
    pub fn put(&mut self, key: u64) {
        if self.policy == EvictionPolicy::Fifo && self.keys.contains(&key) {
            return;
        }
        self.keys.put(key, ());
    }

    /// The cache digest an agent would publish now: every key held, named
    /// as the router sees it, in a Bloom filter of `bits_per_key` bits per
    /// key (of the cache's capacity, as an agent sizes it for its limit).
    pub fn digest(&self, keys: &KeySpace, bits_per_key: usize) -> CacheDigest {
        let cap = self.keys.cap().get();
        let mut bloom = Bloom::for_keys(cap, bits_per_key);
        for (&k, ()) in &self.keys {
            bloom.insert(&keys.name_of(k));
        }
        CacheDigest::from_bloom(&bloom, self.keys.len() as u64)
    }

    /// Drop `key` (another worker's PUT invalidated it).
    pub fn invalidate(&mut self, key: u64) {
        self.keys.pop(&key);
    }

    /// Empty it (the worker crashed: it returns cold).
    pub fn clear(&mut self) {
        self.keys.clear();
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Fill with `keys`, the most popular first, so the most popular end up
    /// the most recently used.
    pub fn prefill(&mut self, keys: &[u64]) {
        for &k in keys.iter().rev() {
            self.keys.put(k, ());
        }
    }
}

/// The requests' keys.
#[derive(Debug, Clone)]
pub struct KeySpace {
    ranks: Zipf,
    prefixes: Option<Zipf>,
    per_prefix: usize,
    hot: Option<(f64, f64)>,
}

/// A drawn key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    /// Its id, the cache's handle (the hot key is `u64::MAX`).
    pub id: u64,
    /// Whether it is the hot key.
    pub hot: bool,
}

impl Key {
    const HOT_ID: u64 = u64::MAX;
}

impl KeySpace {
    /// The key space of `sc`.
    pub fn new(sc: &Scenario) -> Self {
        let (prefixes, per_prefix) = if sc.prefixes > 0 {
            (
                Some(Zipf::new(sc.prefixes, sc.prefix_zipf_s)),
                (sc.keys / sc.prefixes).max(1),
            )
        } else {
            (None, sc.keys)
        };
        Self {
            ranks: Zipf::new(per_prefix, sc.zipf_s),
            prefixes,
            per_prefix,
            hot: sc.hot_key.as_ref().map(|h| (h.from_ms, h.share)),
        }
    }

    /// The key of a request arriving at `now_ms`. Without prefixes or a hot
    /// key this draws exactly what the simulator always drew (one rank).
    pub fn draw(&self, rng: &mut ChaCha8Rng, now_ms: f64) -> Key {
        if let Some((from_ms, share)) = self.hot
            && now_ms >= from_ms
            && rng.random::<f64>() < share
        {
            return Key {
                id: Key::HOT_ID,
                hot: true,
            };
        }
        let prefix = self.prefixes.as_ref().map_or(1, |p| p.sample(rng));
        let rank = self.ranks.sample(rng);
        Key {
            id: ((prefix - 1) * self.per_prefix + rank - 1) as u64,
            hot: false,
        }
    }

    /// The key's name as the router sees it.
    pub fn name(&self, key: Key) -> String {
        if key.hot {
            return "user:hot:timeline".to_owned();
        }
        let rank = key.id as usize % self.per_prefix + 1;
        match self.prefixes {
            Some(_) => format!(
                "tenant:{}:user:{rank}",
                key.id as usize / self.per_prefix + 1
            ),
            None => format!("user:{rank}:profile"),
        }
    }

    /// The name of the key whose cache handle is `id`.
    pub fn name_of(&self, id: u64) -> String {
        self.name(Key {
            id,
            hot: id == Key::HOT_ID,
        })
    }

    /// The `n` most popular keys, most popular first (ties by id).
    pub fn most_popular(&self, n: usize) -> Vec<u64> {
        let Some(prefixes) = &self.prefixes else {
            return (0..n.min(self.per_prefix) as u64).collect();
        };
        // The largest products p(prefix) × p(rank), merged from each
        // prefix's ranks in order.
        let weight = |z: &Zipf, i: usize| z.probability(i + 1);
        let mut heap: BinaryHeap<Cand> = (0..prefixes.len().min(n))
            .map(|t| Cand {
                w: weight(prefixes, t) * weight(&self.ranks, 0),
                t,
                r: 0,
            })
            .collect();
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let Some(c) = heap.pop() else { break };
            out.push((c.t * self.per_prefix + c.r) as u64);
            if c.r + 1 < self.per_prefix {
                heap.push(Cand {
                    w: weight(prefixes, c.t) * weight(&self.ranks, c.r + 1),
                    t: c.t,
                    r: c.r + 1,
                });
            }
        }
        out
    }
}

#[derive(Debug, Clone, Copy)]
struct Cand {
    w: f64,
    t: usize,
    r: usize,
}

impl PartialEq for Cand {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Cand {}
impl PartialOrd for Cand {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Cand {
    fn cmp(&self, o: &Self) -> Ordering {
        self.w
            .total_cmp(&o.w)
            .then_with(|| (o.t, o.r).cmp(&(self.t, self.r)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn an_lru_hit_refreshes_and_a_miss_admits_and_evicts_the_oldest() {
        let mut c = WorkerCache::new(2, EvictionPolicy::Lru);
        assert!(!c.get(1), "cold: a miss");
        assert!(c.get(1), "admitted by the miss");
        assert!(!c.get(2));
        assert!(c.get(1), "refreshes 1, so 2 is now the oldest");
        assert!(!c.get(3), "evicts 2");
        assert!(c.contains(1) && c.contains(3) && !c.contains(2));
    }

    #[test]
    fn fifo_evicts_the_first_admitted_even_if_read() {
        let mut c = WorkerCache::new(2, EvictionPolicy::Fifo);
        c.get(1);
        c.get(2);
        assert!(c.get(1), "a hit, not refreshed");
        c.get(3);
        assert!(!c.contains(1) && c.contains(2) && c.contains(3));
    }

    #[test]
    fn put_admits_invalidate_and_clear_drop() {
        let mut c = WorkerCache::new(4, EvictionPolicy::Lru);
        c.put(7);
        assert!(c.get(7), "written through: a later GET hits");
        c.invalidate(7);
        assert!(!c.contains(7));
        c.prefill(&[1, 2, 3]);
        assert_eq!(c.len(), 3);
        c.clear();
        assert!(c.is_empty());
    }

    #[test]
    fn prefixed_keys_are_named_by_tenant_and_the_hot_key_turns_hot() {
        let sc = Scenario {
            keys: 1_000,
            prefixes: 10,
            hot_key: Some(crate::scenario::HotKey {
                from_ms: 5.0,
                share: 0.5,
                size_factor: 2.0,
            }),
            ..Scenario::default()
        };
        let ks = KeySpace::new(&sc);
        assert_eq!(ks.name(Key { id: 0, hot: false }), "tenant:1:user:1");
        assert_eq!(
            ks.name(Key {
                id: 234,
                hot: false
            }),
            "tenant:3:user:35"
        );
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        assert!((0..1_000).all(|_| !ks.draw(&mut rng, 4.0).hot));
        let hot = (0..10_000).filter(|_| ks.draw(&mut rng, 5.0).hot).count();
        assert!((4_700..5_300).contains(&hot), "{hot}");
        // The most popular keys: tenant 1's head, then the products.
        let top = ks.most_popular(3);
        assert_eq!(top[0], 0);
        assert_eq!(top.len(), 3);
        assert!(top.iter().all(|&k| k < 1_000));
    }

    #[test]
    fn without_prefixes_keys_are_todays_ranks() {
        let ks = KeySpace::new(&Scenario::default());
        assert_eq!(ks.name(Key { id: 41, hot: false }), "user:42:profile");
        assert_eq!(ks.most_popular(3), vec![0, 1, 2]);
    }
}
