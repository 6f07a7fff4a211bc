//! What a request costs where it goes: its kind and size, and with caches
//! whether the worker it reaches holds its key.

use super::Sim;
use super::cache::Key;
use crate::router::Op;

impl Sim<'_> {
    /// Mean service time at speed 1 of a request of this kind, ms: with
    /// a cache, a GET's `hit` or miss decides it.
    pub(super) fn mean_job_cost_ms(
        &self,
        op: Op,
        large: bool,
        hot: bool,
        hit: Option<bool>,
    ) -> f64 {
        let kind = match (op, hit, &self.sc.cache) {
            (Op::Get, Some(true), Some(c)) => c.hit_cost_ms,
            (Op::Get, Some(false), Some(c)) => c.miss_cost_ms,
            (Op::Get, ..) => self.sc.get_cost_ms,
            (Op::Put, ..) => self.sc.put_cost_ms,
        };
        kind * self.size_factor(large, hot)
    }

    fn size_factor(&self, large: bool, hot: bool) -> f64 {
        let hot = match (&self.sc.hot_key, hot) {
            (Some(h), true) => h.size_factor,
            _ => 1.0,
        };
        hot * if large { self.sc.large_factor } else { 1.0 }
    }

    /// The request reaches `worker`'s cache: a GET hits or misses (a miss
    /// fetches from the origin and admits the key), a PUT writes through.
    /// `None` without a cache, for a PUT, or at a worker that will not
    /// serve it.
    pub(super) fn touch_cache(
        &mut self,
        worker: usize,
        op: Op,
        key: Key,
        large: bool,
    ) -> Option<bool> {
        let size = self.size_factor(large, key.hot);
        let w = &mut self.workers[worker];
        if w.down || w.zombie {
            return None;
        }
        let spec = self.sc.cache.as_ref()?;
        let cache = w.cache.as_mut()?;
        let rec = self.rec.cache.as_mut()?;
        match op {
            Op::Get => {
                let hit = cache.get(key.id);
                if hit {
                    rec.hits[worker] += 1;
                } else {
                    rec.misses[worker] += 1;
                    rec.origin_bytes += (spec.value_bytes as f64 * size) as u64;
                }
                Some(hit)
            }
            Op::Put => {
                cache.put(key.id);
                if spec.invalidate_on_put {
                    for (i, other) in self.workers.iter_mut().enumerate() {
                        if i != worker
                            && let Some(c) = other.cache.as_mut()
                        {
                            c.invalidate(key.id);
                        }
                    }
                }
                None
            }
        }
    }
}
