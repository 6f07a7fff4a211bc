//! A Bloom filter of the keys a worker holds: its cache digest, as Squid's
//! cache digests summarise a peer's cache (Hamilton, Rousskov and Wessels,
//! "Cache Digests", 1998), built by the worker (or its agent) and read by
//! the router.
//!
//! The layout is fixed so that an agent in any language builds the same
//! bits:
//!
//! * `size_bytes` bytes, a power of two within
//!   [`MIN_DIGEST_BYTES`]..=[`MAX_DIGEST_BYTES`]; `m = 8 × size_bytes` bits;
//!   bit `b` is bit `b mod 8` (least significant first) of byte `b / 8`.
//! * A key's hash is `h = XXH3-64(key's UTF-8 bytes, seed 0)`, then
//!   `h1 = h mod 2^32`, `h2 = (h div 2^32) | 1` (odd), and the key sets
//!   bits `(h1 + i × h2) mod m` for `i` in `0..hash_count` (Kirsch and
//!   Mitzenmacher's double hashing; an odd step over a power-of-two `m`
//!   never repeats a bit).
//!
//! A key that was inserted is always found; one that was not is found with
//! the filter's false-positive rate, `fill^hash_count`, where `fill` is the
//! share of bits set (measured, so a wrong key count cannot mislead it).

use xxhash_rust::xxh3::xxh3_64;

/// Smallest digest, bytes.
pub const MIN_DIGEST_BYTES: usize = 8;
/// Largest digest, bytes (1 MiB, 8 Mbit: about 870 000 keys at 1 % false
/// positives): what one worker's digest holds in the router's memory.
pub const MAX_DIGEST_BYTES: usize = 1 << 20;
/// Most hash functions (bits set per key).
pub const MAX_HASH_COUNT: u32 = 16;
/// Default bits per key of a digest a builder sizes: 10, with
/// [`DEFAULT_HASH_COUNT`] hashes about 0.8 % false positives.
pub const DEFAULT_BITS_PER_KEY: usize = 10;
/// Default hash count: the best for [`DEFAULT_BITS_PER_KEY`] is
/// `10 × ln 2 ≈ 7`.
pub const DEFAULT_HASH_COUNT: u32 = 7;

/// The hash of `key` the digest's bits derive from (XXH3-64, seed 0).
pub fn key_hash(key: &str) -> u64 {
    xxh3_64(key.as_bytes())
}

/// A Bloom filter in the digest layout (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bloom {
    words: Box<[u64]>,
    hash_count: u32,
}

/// Why bytes are not a digest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BloomError {
    /// The size is not a power of two within the bounds.
    #[error("size {0} bytes must be a power of two within {MIN_DIGEST_BYTES}..={MAX_DIGEST_BYTES}")]
    Size(usize),
    /// The hash count is out of bounds.
    #[error("hash_count {0} must be within 1..={MAX_HASH_COUNT}")]
    HashCount(u32),
}

fn check_shape(size_bytes: usize, hash_count: u32) -> Result<(), BloomError> {
    if !size_bytes.is_power_of_two() || !(MIN_DIGEST_BYTES..=MAX_DIGEST_BYTES).contains(&size_bytes)
    {
        return Err(BloomError::Size(size_bytes));
    }
    if !(1..=MAX_HASH_COUNT).contains(&hash_count) {
        return Err(BloomError::HashCount(hash_count));
    }
    Ok(())
}

impl Bloom {
    /// An empty filter of `size_bytes` bytes setting `hash_count` bits per key.
    pub fn new(size_bytes: usize, hash_count: u32) -> Result<Self, BloomError> {
        check_shape(size_bytes, hash_count)?;
        Ok(Self {
            words: vec![0; size_bytes / 8].into_boxed_slice(),
            hash_count,
        })
    }

    /// An empty filter for about `keys` keys at `bits_per_key` bits each
    /// (rounded up to a power of two, within the bounds), with
    /// [`DEFAULT_HASH_COUNT`] hashes.
    pub fn for_keys(keys: usize, bits_per_key: usize) -> Self {
        let bytes = keys
            .saturating_mul(bits_per_key.max(1))
            .div_ceil(8)
            .clamp(MIN_DIGEST_BYTES, MAX_DIGEST_BYTES)
            .next_power_of_two()
            .min(MAX_DIGEST_BYTES);
        Self {
            words: vec![0; bytes / 8].into_boxed_slice(),
            hash_count: DEFAULT_HASH_COUNT,
        }
    }

    /// The filter in `bytes` (the digest layout) setting `hash_count` bits
    /// per key.
    pub fn from_bytes(bytes: &[u8], hash_count: u32) -> Result<Self, BloomError> {
        check_shape(bytes.len(), hash_count)?;
        let words = bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect();
        Ok(Self { words, hash_count })
    }

    /// The filter's bytes, in the digest layout.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// Its size, bytes.
    pub fn size_bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// Bits set per key.
    pub fn hash_count(&self) -> u32 {
        self.hash_count
    }

    /// The bits of the key whose [`key_hash`] is `hash`, as `(word, mask)`.
    fn bits(&self, hash: u64) -> Bits {
        Bits {
            mask: (self.words.len() as u64 * 64) - 1,
            at: hash & 0xffff_ffff,
            step: (hash >> 32) | 1,
            left: self.hash_count,
        }
    }

    /// Adds the key whose [`key_hash`] is `hash`.
    pub fn insert_hash(&mut self, hash: u64) {
        for (w, bit) in self.bits(hash) {
            self.words[w] |= bit;
        }
    }

    /// Adds `key`.
    pub fn insert(&mut self, key: &str) {
        self.insert_hash(key_hash(key));
    }

    /// Whether the key whose [`key_hash`] is `hash` may be held: always
    /// when it was inserted, else with [`Bloom::false_positive_rate`].
    pub fn contains_hash(&self, hash: u64) -> bool {
        self.bits(hash).all(|(w, bit)| self.words[w] & bit != 0)
    }

    /// The share of bits set, 0..=1.
    pub fn fill(&self) -> f64 {
        let set: u64 = self.words.iter().map(|w| u64::from(w.count_ones())).sum();
        set as f64 / (self.words.len() as f64 * 64.0)
    }

    /// The chance a key never inserted is found, `fill^hash_count`.
    pub fn false_positive_rate(&self) -> f64 {
        self.fill().powi(self.hash_count as i32)
    }
}

/// A key's bits: `(h1 + i × h2) mod m` for `i` in `0..hash_count`.
struct Bits {
    mask: u64,
    at: u64,
    step: u64,
    left: u32,
}

impl Iterator for Bits {
    type Item = (usize, u64);

    fn next(&mut self) -> Option<(usize, u64)> {
        self.left = self.left.checked_sub(1)?;
        let b = self.at & self.mask;
        self.at = self.at.wrapping_add(self.step);
        Some(((b / 64) as usize, 1 << (b % 64)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_is_pinned_for_agents_in_other_languages() {
        // XXH3-64 of "" with seed 0, as every implementation gives it.
        assert_eq!(key_hash(""), 0x2d06_8005_38d3_94c2);
        let mut b = Bloom::new(8, 2).expect("shape");
        b.insert_hash(0x0000_0003_0000_0005);
        // h1 = 5, h2 = 3: bits 5 and 8 of 64.
        assert_eq!(b.to_bytes(), [0b0010_0000, 0b0000_0001, 0, 0, 0, 0, 0, 0]);
        assert_eq!(Bloom::from_bytes(&b.to_bytes(), 2), Ok(b));
    }

    #[test]
    fn inserted_keys_are_found_and_others_at_about_the_false_positive_rate() {
        let mut b = Bloom::for_keys(10_000, DEFAULT_BITS_PER_KEY);
        for i in 0..10_000 {
            b.insert(&format!("user:{i}"));
        }
        assert!((0..10_000).all(|i| b.contains_hash(key_hash(&format!("user:{i}")))));
        let fp = (0..100_000)
            .filter(|i| b.contains_hash(key_hash(&format!("other:{i}"))))
            .count() as f64
            / 100_000.0;
        let rate = b.false_positive_rate();
        assert!(rate < 0.02, "{rate}");
        assert!((fp - rate).abs() < 0.005, "{fp} vs {rate}");
    }

    #[test]
    fn shapes_out_of_bounds_are_refused() {
        assert_eq!(Bloom::new(12, 7), Err(BloomError::Size(12)));
        assert_eq!(Bloom::new(4, 7), Err(BloomError::Size(4)));
        assert!(Bloom::new(MAX_DIGEST_BYTES * 2, 7).is_err());
        assert_eq!(Bloom::new(64, 0), Err(BloomError::HashCount(0)));
        assert_eq!(Bloom::new(64, 17), Err(BloomError::HashCount(17)));
        assert_eq!(
            Bloom::for_keys(usize::MAX, 10).size_bytes(),
            MAX_DIGEST_BYTES
        );
        assert_eq!(Bloom::for_keys(0, 10).size_bytes(), MIN_DIGEST_BYTES);
    }
}
