//! The endpoints a baseline balances over: every worker but those the
//! operator has taken out. A proxy learns of a drain as an endpoint update
//! (Envoy's EDS drops the host or marks it `DRAINING`, which its load
//! balancers exclude; HAProxy's `set server … state drain` gives it weight
//! 0) and balances over the rest; requests already sent finish.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::two_distinct;

/// The live endpoints, in worker order.
#[derive(Debug, Clone)]
pub(crate) struct Endpoints {
    n: usize,
    live: Vec<usize>,
}

impl Endpoints {
    /// All of `0..n` (`n ≥ 1`) live.
    pub(crate) fn new(n: usize) -> Self {
        let n = n.max(1);
        Self {
            n,
            live: (0..n).collect(),
        }
    }

    /// The live endpoints, ascending.
    pub(crate) fn live(&self) -> &[usize] {
        &self.live
    }

    /// Whether worker `w` is live.
    pub(crate) fn is_live(&self, w: usize) -> bool {
        self.live.binary_search(&w).is_ok()
    }

    /// Takes worker `w` out (`drained`) or puts it back. The last live
    /// endpoint stays (a proxy with none fails every request; the
    /// simulator's routers must pick), as does an index out of range.
    pub(crate) fn set_drained(&mut self, w: usize, drained: bool) {
        match (self.live.binary_search(&w), drained) {
            (Ok(i), true) if self.live.len() > 1 => {
                self.live.remove(i);
            }
            (Err(i), false) if w < self.n => self.live.insert(i, w),
            _ => {}
        }
    }

    /// One live endpoint uniformly at random (with every endpoint live,
    /// the same draw as `0..n`).
    pub(crate) fn uniform(&self, rng: &mut ChaCha8Rng) -> usize {
        self.live[rng.random_range(0..self.live.len())]
    }

    /// Two distinct live endpoints uniformly at random (one when a single
    /// endpoint is live); with every endpoint live, the same draws as
    /// [`two_distinct`] over `0..n`.
    pub(crate) fn two_distinct(&self, rng: &mut ChaCha8Rng) -> (usize, usize) {
        let (a, b) = two_distinct(self.live.len(), rng);
        (self.live[a], self.live[b])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn a_drained_endpoint_is_never_drawn_and_returns_in_order() {
        let mut e = Endpoints::new(4);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        e.set_drained(2, true);
        assert_eq!(e.live(), &[0, 1, 3]);
        for _ in 0..1_000 {
            let (a, b) = e.two_distinct(&mut rng);
            assert!(a != 2 && b != 2 && a != b);
            assert_ne!(e.uniform(&mut rng), 2);
        }
        e.set_drained(2, false);
        e.set_drained(2, false);
        assert_eq!(e.live(), &[0, 1, 2, 3]);
    }

    #[test]
    fn the_last_endpoint_and_unknown_indices_stay_as_they_are() {
        let mut e = Endpoints::new(2);
        e.set_drained(0, true);
        e.set_drained(1, true);
        assert_eq!(e.live(), &[1]);
        e.set_drained(9, false);
        assert_eq!(e.live(), &[1]);
        assert!(e.is_live(1) && !e.is_live(0));
    }

    #[test]
    fn with_every_endpoint_live_the_draws_are_the_plain_ones() {
        let e = Endpoints::new(5);
        let (mut r1, mut r2) = (ChaCha8Rng::seed_from_u64(4), ChaCha8Rng::seed_from_u64(4));
        for _ in 0..100 {
            assert_eq!(e.two_distinct(&mut r1), two_distinct(5, &mut r2));
            assert_eq!(e.uniform(&mut r1), r2.random_range(0..5));
        }
    }
}
