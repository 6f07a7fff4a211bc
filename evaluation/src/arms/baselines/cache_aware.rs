//! SGLang's cache-aware routing policy (the SGLang router, now the SGLang
//! Model Gateway, SMG).
//!
//! Sources: sgl-project/sglang `sgl-router/src/policies/cache_aware.rs`
//! (`CacheAwarePolicy::select_worker`), `sgl-router/src/tree.rs` (the
//! approximate tree), the router's defaults in
//! `sgl-router/py_src/sglang_router/router_args.py`, and
//! lightseekorg/smg `docs/concepts/routing/cache-aware.md`.
//!
//! Every pick:
//!
//! 1. Loads are the router's own requests in flight per worker (`+1` at
//!    the pick, `−1` at the outcome). If `max − min > balance_abs_threshold`
//!    **and** `max > balance_rel_threshold × min`, the load is imbalanced:
//!    the request goes to the shortest queue (the first of the least
//!    loaded, as `min_by_key` returns).
//! 2. Otherwise the key is matched against each worker's tree of the keys
//!    routed there; the match rate is the longest matched prefix over the
//!    key's length, in characters. If it is **above** `cache_threshold`
//!    (SGLang compares `match_rate > cache_threshold`; the SMG docs say the
//!    same) the request goes to the worker with the longest match,
//!    otherwise to the worker whose tree is smallest ("least-used cache").
//!    Ties, which SGLang leaves to a hash map's iteration order, are broken
//!    at random.
//! 3. The key is inserted into the chosen worker's tree, in both modes.
//!
//! Defaults (the router's, `router_args.py`; the SMG docs give the same):
//! `cache_threshold` 0.3, `balance_rel_threshold` 1.5,
//! `eviction_interval_secs` 120, `max_tree_size` 2^26 characters per
//! worker. `balance_abs_threshold` is 64 there and **1** here.
//!
//! **Scaling the absolute threshold.** SGLang's 64 is in requests in
//! flight on an LLM worker, which holds a continuous batch of hundreds
//! (SGLang's tuning guide shows `#running-req: 233` and `#queue-req: 317`
//! on a loaded worker; mini-sglang's `--max-running-requests` defaults to
//! 256). A worker here serves one request at a time and holds
//! `ρ / (1 − ρ)` ≈ 2.3 on average at 70 % load (single digits). Scaling 64
//! by the ratio of the two loads — 64 × 2.3 / ~180 (a 256-request batch at
//! 70 %) ≈ 0.8 — and rounding up gives 1; scaling by a quarter of the
//! batch (64 / 256) gives 0.25. Both are below 1, and 0 would make any
//! difference count, so the threshold is 1: the queues must differ by at
//! least 2 (and by half the shorter one) before load wins over locality.
//! With so small a threshold the policy runs shortest-queue much of the
//! time; that is what SGLang's rule does with queues this short.
//!
//! **The tree.** SGLang keeps one radix tree over raw text whose nodes
//! record which workers ("tenants") routed through them, with a last
//! access time per tenant, and counts each tenant's characters. Here each
//! worker has a sorted set of the keys routed to it, which answers the
//! same questions exactly: the longest prefix of a key shared with any key
//! in the set is its longest common prefix with its neighbour before or
//! after in sorted order, and the tree's size — the characters of the
//! radix tree, one per distinct prefix — is `Σ |kᵢ| − lcp(kᵢ, kᵢ₋₁)` over
//! the sorted keys, kept up to date at each insertion and removal.
//! Eviction follows `Tree::evict_tenant_by_size`: every 120 s each worker
//! whose tree exceeds `max_tree_size` loses its least recently routed keys
//! until it fits. SGLang evicts leaves, so a key that is a prefix of
//! another outlives it there; here it may go first, which changes neither
//! matches nor size until the longer key goes too. SGLang also refreshes
//! the matched worker's path when it matches; here only a routed key is
//! refreshed.
//!
//! **What text matching means for these keys.** SGLang matches characters,
//! not keys: a cache here holds whole keys (a GET hits only on its exact
//! key), but the policy credits any shared prefix. With
//! `tenant:{t}:user:{rank}` keys, `tenant:` alone is 7 of ~18 characters,
//! above 0.3, so after its first keys every request goes to a "best
//! match", whichever worker has seen the longest prefix — the exact key if
//! it was routed there, else the tenant's prefix plus the rank's leading
//! digits: the policy groups each tenant's keys on the workers that first
//! saw them. With `user:{rank}:profile`, `user:` is 5 of ~17, below 0.3,
//! so a key never seen goes to the smallest tree unless a worker holds a
//! rank with the same leading digits.
//!
//! A drain removes the worker as SGLang's `remove_worker` does (its tree
//! is dropped); it returns with an empty tree.
//!
//! Memory: each worker's keys, at most `max_tree_size` (2^26) distinct
//! prefixes — so at most that many keys — after each eviction, plus the
//! keys routed to it in one 120 s interval. In these scenarios the key
//! space (100 000 keys) is far below either.

use std::collections::BTreeMap;
use std::ops::Bound;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::Endpoints;
use crate::router::{Outcome, Pick, PickRequest, Router};

/// `cache_threshold`: the match rate above which the best match wins.
pub const CACHE_THRESHOLD: f64 = 0.3;

/// SGLang's `balance_abs_threshold`, in LLM requests in flight.
pub const SGLANG_BALANCE_ABS_THRESHOLD: u32 = 64;

/// `balance_abs_threshold` scaled to this harness's queues (module docs).
pub const BALANCE_ABS_THRESHOLD: u32 = 1;

/// `balance_rel_threshold`.
pub const BALANCE_REL_THRESHOLD: f64 = 1.5;

/// `eviction_interval_secs`, in ms.
pub const EVICTION_INTERVAL_MS: f64 = 120_000.0;

/// `max_tree_size`, characters per worker.
pub const MAX_TREE_SIZE: usize = 1 << 26;

/// Characters `a` and `b` share at their start.
fn lcp(a: &str, b: &str) -> usize {
    a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count()
}

/// One worker's routed keys with their last routing time, and the size of
/// the radix tree they make, in characters.
#[derive(Debug, Clone, Default)]
struct Tree {
    keys: BTreeMap<String, f64>,
    chars: usize,
}

impl Tree {
    fn before<'a>(&'a self, key: &str) -> Option<&'a str> {
        let below = (Bound::Unbounded, Bound::Excluded(key));
        self.keys
            .range::<str, _>(below)
            .next_back()
            .map(|(k, _)| k.as_str())
    }

    fn after<'a>(&'a self, key: &str) -> Option<&'a str> {
        let above = (Bound::Excluded(key), Bound::Unbounded);
        self.keys
            .range::<str, _>(above)
            .next()
            .map(|(k, _)| k.as_str())
    }

    /// The longest prefix of `key` shared with a key of the tree, in
    /// characters.
    fn longest_match(&self, key: &str) -> usize {
        if self.keys.contains_key(key) {
            return key.chars().count();
        }
        let b = self.before(key).map_or(0, |p| lcp(p, key));
        let a = self.after(key).map_or(0, |q| lcp(q, key));
        b.max(a)
    }

    /// The characters `key` adds to (or, removed, takes from) the tree
    /// between its neighbours.
    fn own_chars(&self, key: &str) -> usize {
        let p = self.before(key);
        let q = self.after(key);
        let lp = p.map_or(0, |p| lcp(p, key));
        let lq = q.map_or(0, |q| lcp(q, key));
        let lpq = match (p, q) {
            (Some(p), Some(q)) => lcp(p, q),
            _ => 0,
        };
        key.chars().count() + lpq - lp - lq
    }

    fn insert(&mut self, key: &str, now_ms: f64) {
        if let Some(t) = self.keys.get_mut(key) {
            *t = now_ms;
            return;
        }
        self.chars += self.own_chars(key);
        self.keys.insert(key.to_owned(), now_ms);
    }

    fn remove(&mut self, key: &str) {
        if self.keys.remove(key).is_some() {
            self.chars -= self.own_chars(key);
        }
    }

    /// Drops the least recently routed keys until at most `max` characters
    /// remain.
    fn evict_to(&mut self, max: usize) {
        if self.chars <= max {
            return;
        }
        let mut by_age: Vec<(f64, String)> =
            self.keys.iter().map(|(k, &t)| (t, k.clone())).collect();
        by_age.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        for (_, key) in by_age {
            if self.chars <= max {
                break;
            }
            self.remove(&key);
        }
    }
}

/// SGLang's cache-aware policy over `n` workers.
#[derive(Debug, Clone)]
pub struct CacheAware {
    in_flight: Vec<u32>,
    endpoints: Endpoints,
    trees: Vec<Tree>,
    max_tree_size: usize,
    next_eviction_ms: f64,
}

impl CacheAware {
    /// Over `n ≥ 1` workers, all idle, with empty trees.
    pub fn new(n: usize) -> Self {
        let n = n.max(1);
        Self {
            in_flight: vec![0; n],
            endpoints: Endpoints::new(n),
            trees: vec![Tree::default(); n],
            max_tree_size: MAX_TREE_SIZE,
            next_eviction_ms: EVICTION_INTERVAL_MS,
        }
    }

    /// Requests in flight at worker `i`.
    pub fn in_flight(&self, i: usize) -> u32 {
        self.in_flight[i]
    }

    /// Characters of worker `i`'s tree.
    pub fn tree_size(&self, i: usize) -> usize {
        self.trees[i].chars
    }

    /// Whether the live workers' loads are imbalanced.
    fn imbalanced(&self) -> bool {
        let loads = self.endpoints.live().iter().map(|&w| self.in_flight[w]);
        let (min, max) = loads.fold((u32::MAX, 0), |(lo, hi), l| (lo.min(l), hi.max(l)));
        max.saturating_sub(min) > BALANCE_ABS_THRESHOLD
            && f64::from(max) > f64::from(min) * BALANCE_REL_THRESHOLD
    }

    /// A live worker minimising `f`, ties at random.
    fn argmin_at_random(&self, f: impl Fn(usize) -> usize, rng: &mut ChaCha8Rng) -> usize {
        let live = self.endpoints.live();
        let best = live.iter().map(|&w| f(w)).min().unwrap_or(0);
        let tied = live.iter().filter(|&&w| f(w) == best).count();
        let nth = rng.random_range(0..tied.max(1));
        live.iter()
            .copied()
            .filter(|&w| f(w) == best)
            .nth(nth)
            .unwrap_or(0)
    }

    fn choose(&self, key: &str, rng: &mut ChaCha8Rng) -> usize {
        let live = self.endpoints.live();
        if self.imbalanced() {
            let shortest = live.iter().copied().min_by_key(|&w| self.in_flight[w]);
            return shortest.unwrap_or(0);
        }
        let len = key.chars().count();
        let matched = |w: usize| self.trees[w].longest_match(key);
        let best = live.iter().map(|&w| matched(w)).max().unwrap_or(0);
        let rate = if len == 0 {
            0.0
        } else {
            best as f64 / len as f64
        };
        if rate > CACHE_THRESHOLD {
            self.argmin_at_random(|w| best - matched(w), rng)
        } else {
            self.argmin_at_random(|w| self.trees[w].chars, rng)
        }
    }

    fn evict_if_due(&mut self, now_ms: f64) {
        if now_ms < self.next_eviction_ms {
            return;
        }
        for t in &mut self.trees {
            t.evict_to(self.max_tree_size);
        }
        while self.next_eviction_ms <= now_ms {
            self.next_eviction_ms += EVICTION_INTERVAL_MS;
        }
    }
}

impl Router for CacheAware {
    fn pick(&mut self, req: &PickRequest<'_>, rng: &mut ChaCha8Rng) -> Pick {
        self.evict_if_due(req.now_ms);
        let worker = self.choose(req.key, rng);
        self.trees[worker].insert(req.key, req.now_ms);
        self.in_flight[worker] += 1;
        Pick {
            worker,
            decision_id: None,
        }
    }

    fn outcome(&mut self, o: &Outcome<'_>) {
        if let Some(c) = self.in_flight.get_mut(o.worker) {
            *c = c.saturating_sub(1);
        }
    }

    fn drain(&mut self, worker: usize, drained: bool, _now_ms: f64) {
        self.endpoints.set_drained(worker, drained);
        if drained
            && !self.endpoints.is_live(worker)
            && let Some(t) = self.trees.get_mut(worker)
        {
            *t = Tree::default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::Op;
    use rand::SeedableRng;

    fn get(key: &str, now_ms: f64) -> PickRequest<'_> {
        PickRequest {
            now_ms,
            key,
            op: Op::Get,
            timeout_ms: 100.0,
            router: 0,
        }
    }

    fn routed(p: &mut CacheAware, worker: usize, keys: &[&str]) {
        for k in keys {
            p.trees[worker].insert(k, 0.0);
        }
    }

    #[test]
    fn the_tree_counts_distinct_prefix_characters_and_matches_prefixes() {
        let mut t = Tree::default();
        t.insert("abc", 0.0);
        assert_eq!(t.chars, 3);
        t.insert("abd", 0.0); // a, ab, abc, abd
        assert_eq!(t.chars, 4);
        t.insert("ab", 0.0); // a prefix already there
        assert_eq!(t.chars, 4);
        t.insert("b", 0.0);
        assert_eq!(t.chars, 5);
        assert_eq!(t.longest_match("abx"), 2);
        assert_eq!(t.longest_match("abdz"), 3);
        assert_eq!(t.longest_match("abd"), 3);
        assert_eq!(t.longest_match("c"), 0);
        t.remove("abc");
        assert_eq!(t.chars, 4); // a, ab, abd, b
        t.remove("ab");
        assert_eq!(t.chars, 4);
        t.remove("abd");
        assert_eq!(t.chars, 1);
    }

    #[test]
    fn eviction_drops_the_least_recently_routed_keys_down_to_the_max() {
        let mut t = Tree::default();
        t.insert("a1", 1.0);
        t.insert("b2", 2.0);
        t.insert("c3", 3.0);
        t.insert("a1", 4.0); // routed again: now the most recent
        t.evict_to(4);
        assert_eq!(t.chars, 4);
        assert!(!t.keys.contains_key("b2"));
        assert!(t.keys.contains_key("a1") && t.keys.contains_key("c3"));
    }

    #[test]
    fn eviction_runs_every_interval_on_the_picks_clock() {
        let mut p = CacheAware::new(1);
        p.max_tree_size = 2;
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        p.pick(&get("k1", 0.0), &mut rng);
        p.pick(&get("k2", 1.0), &mut rng);
        p.pick(&get("k3", 2.0), &mut rng);
        assert_eq!(p.tree_size(0), 4); // k, k1, k2, k3
        p.pick(&get("k4", EVICTION_INTERVAL_MS - 1.0), &mut rng);
        assert_eq!(p.tree_size(0), 5);
        // Due: evicts k1, k2, k3 (k4 alone is 2 characters), then routes k5.
        p.pick(&get("k5", EVICTION_INTERVAL_MS), &mut rng);
        assert_eq!(p.trees[0].keys.keys().collect::<Vec<_>>(), ["k4", "k5"]);
    }

    #[test]
    fn imbalanced_load_goes_to_the_shortest_queue() {
        let mut p = CacheAware::new(3);
        routed(&mut p, 0, &["user:42:profile"]);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        // 3 − 1 = 2 > 1 and 3 > 1.5 × 1: the exact match on 0 is ignored.
        p.in_flight = vec![3, 1, 2];
        assert!(p.imbalanced());
        assert_eq!(p.choose("user:42:profile", &mut rng), 1);
        // The key is still recorded on the worker it went to.
        p.pick(&get("user:42:profile", 0.0), &mut rng);
        assert_eq!(p.trees[1].longest_match("user:42:profile"), 15);
    }

    #[test]
    fn both_thresholds_must_be_passed_to_be_imbalanced() {
        let mut p = CacheAware::new(3);
        // A difference of 1 is not above the absolute threshold.
        p.in_flight = vec![1, 0, 0];
        assert!(!p.imbalanced());
        // 9 − 7 = 2 > 1 but 9 ≤ 1.5 × 7.
        p.in_flight = vec![9, 7, 7];
        assert!(!p.imbalanced());
        p.in_flight = vec![11, 7, 7];
        assert!(p.imbalanced());
        // A drained worker's load is not compared.
        p.in_flight = vec![5, 1, 1];
        p.drain(0, true, 0.0);
        assert!(!p.imbalanced());
    }

    #[test]
    fn balanced_and_a_match_above_the_threshold_goes_to_the_best_match() {
        let mut p = CacheAware::new(3);
        routed(&mut p, 0, &["a", "b", "c", "d", "e", "f", "g", "h"]);
        routed(&mut p, 1, &["user:4299:profile"]); // shares "user:42"
        routed(&mut p, 2, &["user:42:profile"]);
        p.in_flight = vec![1, 2, 2];
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        assert!(!p.imbalanced());
        assert_eq!(p.choose("user:42:profile", &mut rng), 2);
        // 8 of 17 characters ("user:429") with worker 1, 7 with worker 2.
        assert_eq!(p.choose("user:4298:profile", &mut rng), 1);
    }

    #[test]
    fn balanced_and_a_match_below_the_threshold_goes_to_the_smallest_tree() {
        let mut p = CacheAware::new(3);
        routed(&mut p, 0, &["aaaa", "bbbb"]);
        routed(&mut p, 1, &["user:1:profile"]);
        routed(&mut p, 2, &["xyz"]);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        // "user:" is 5 of 19 characters (0.26) with worker 1: the smallest
        // tree (worker 2, 3 characters) takes it.
        assert_eq!(p.choose("user:777777:profile", &mut rng), 2);
        // 0.3 exactly is not above the threshold: "abc" on 0 is 3 of 10.
        routed(&mut p, 0, &["abc"]);
        assert_eq!(p.choose("abcZZZZZZZ", &mut rng), 2);
    }

    #[test]
    fn a_drained_worker_loses_its_tree_and_is_never_picked() {
        let mut p = CacheAware::new(2);
        routed(&mut p, 0, &["user:1:profile"]);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        p.drain(0, true, 0.0);
        assert_eq!(p.tree_size(0), 0);
        for _ in 0..20 {
            assert_eq!(p.pick(&get("user:1:profile", 0.0), &mut rng).worker, 1);
        }
        p.drain(0, false, 0.0);
        p.in_flight = vec![0, 0];
        assert_eq!(p.choose("zzz", &mut rng), 0); // its empty tree is smallest
    }

    #[test]
    fn ties_among_smallest_trees_are_spread() {
        let p = CacheAware::new(4);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut seen = [0u32; 4];
        for _ in 0..4_000 {
            seen[p.choose("qqqq", &mut rng)] += 1;
        }
        assert!(seen.iter().all(|&c| c > 800), "{seen:?}");
    }
}
