//! Random variates the simulator draws, all from one seeded RNG.
//!
//! - Exponential inter-arrival times give a Poisson arrival process
//!   (inverse-CDF: `-ln(U)/λ`).
//! - Log-normal service-time factors with mean 1: `exp(μ + σZ)` with
//!   `μ = −σ²/2`, `Z` standard normal by the Box–Muller transform. Service
//!   times in storage systems are right-skewed; the log-normal is the usual
//!   model (e.g. Dean & Barroso, "The Tail at Scale", CACM 2013, discuss the
//!   heavy right tail these distributions produce).
//! - Zipf key ranks (`P(k) ∝ 1/k^s`) from a precomputed CDF and a binary
//!   search; key popularity in caches and KV stores is Zipf-like (Breslau et
//!   al., "Web Caching and Zipf-like Distributions", INFOCOM 1999; Atikoglu
//!   et al., "Workload Analysis of a Large-Scale Key-Value Store",
//!   SIGMETRICS 2012).

use rand::Rng;

/// A uniform draw in `(0, 1]` (never 0, so `ln` is finite).
fn open_unit(rng: &mut impl Rng) -> f64 {
    1.0 - rng.random::<f64>()
}

/// An exponential variate with mean `mean` (same unit as `mean`).
pub fn exponential(rng: &mut impl Rng, mean: f64) -> f64 {
    -open_unit(rng).ln() * mean
}

/// A standard normal variate (Box–Muller).
pub fn standard_normal(rng: &mut impl Rng) -> f64 {
    let u1 = open_unit(rng);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// A log-normal factor with mean 1 and shape `sigma` (≥ 0).
pub fn lognormal_unit_mean(rng: &mut impl Rng, sigma: f64) -> f64 {
    let mu = -sigma * sigma / 2.0;
    (mu + sigma * standard_normal(rng)).exp()
}

/// Zipf distribution over ranks `1..=n` with exponent `s`.
#[derive(Debug, Clone)]
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    /// The distribution over `n ≥ 1` ranks with exponent `s ≥ 0`.
    pub fn new(n: usize, s: f64) -> Self {
        let n = n.max(1);
        let mut cdf = Vec::with_capacity(n);
        let mut acc = 0.0;
        for k in 1..=n {
            acc += 1.0 / (k as f64).powf(s);
            cdf.push(acc);
        }
        for c in &mut cdf {
            *c /= acc;
        }
        Self { cdf }
    }

    /// A rank in `1..=n`.
    pub fn sample(&self, rng: &mut impl Rng) -> usize {
        let u: f64 = rng.random();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1) + 1
    }

    /// Ranks, `n`.
    pub fn len(&self) -> usize {
        self.cdf.len()
    }

    /// Whether it has no ranks (never: `n ≥ 1`).
    pub fn is_empty(&self) -> bool {
        self.cdf.is_empty()
    }

    /// `P(rank)` for a rank in `1..=n` (0 outside).
    pub fn probability(&self, rank: usize) -> f64 {
        match rank {
            0 => 0.0,
            1 => self.cdf.first().copied().unwrap_or(0.0),
            r => match (self.cdf.get(r - 1), self.cdf.get(r - 2)) {
                (Some(a), Some(b)) => a - b,
                _ => 0.0,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn lognormal_has_mean_one_and_exponential_its_mean() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let n = 200_000;
        let m: f64 = (0..n)
            .map(|_| lognormal_unit_mean(&mut rng, 0.5))
            .sum::<f64>()
            / n as f64;
        assert!((m - 1.0).abs() < 0.01, "{m}");
        let e: f64 = (0..n).map(|_| exponential(&mut rng, 3.0)).sum::<f64>() / n as f64;
        assert!((e - 3.0).abs() < 0.05, "{e}");
    }

    #[test]
    fn zipf_rank_one_is_most_popular() {
        let z = Zipf::new(100, 1.0);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut counts = [0u32; 101];
        for _ in 0..100_000 {
            counts[z.sample(&mut rng)] += 1;
        }
        // P(1) = 1/H_100 ≈ 0.193; P(2) ≈ 0.0964.
        assert!((f64::from(counts[1]) / 1e5 - 0.193).abs() < 0.01);
        assert!(counts[1] > counts[2] && counts[2] > counts[10]);
        assert_eq!(counts[0], 0);
    }
}
