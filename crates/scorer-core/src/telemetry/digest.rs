//! The wire shape of a worker's cache digest (`Snapshot::cache_digest`): a
//! Bloom filter of the keys it holds, in the layout of
//! [`crate::locality::bloom`], base64-encoded.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

use crate::locality::bloom::{Bloom, MAX_DIGEST_BYTES, MAX_HASH_COUNT, MIN_DIGEST_BYTES};

/// Longest accepted `bloom_b64`, characters: [`MAX_DIGEST_BYTES`] encoded
/// with padding. Longer is refused before any decoding.
pub const MAX_DIGEST_B64_CHARS: usize = MAX_DIGEST_BYTES.div_ceil(3) * 4;

/// A Bloom filter of the keys a worker holds (see
/// [`crate::locality::bloom`] for the exact bits).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CacheDigest {
    /// The filter's `size_bytes` bytes, standard base64 with padding
    /// (RFC 4648 section 4). Bit `b` is bit `b mod 8` of byte `b / 8`; a key
    /// sets bits `(h1 + i × h2) mod (8 × size_bytes)` for `i` in
    /// `0..hash_count`, where `h = XXH3-64(key, seed 0)`,
    /// `h1 = h mod 2^32` and `h2 = (h div 2^32) | 1`.
    #[schema(max_length = 1_398_104)]
    pub bloom_b64: String,
    /// Size of the decoded filter, bytes: a power of two within
    /// 8..=1 048 576 (1 MiB), equal to the decoded length.
    #[schema(format = "uint64", minimum = 8.0, maximum = 1_048_576.0)]
    pub size_bytes: u64,
    /// Bits set per key, 1..=16.
    #[schema(minimum = 1, maximum = 16)]
    pub hash_count: u32,
    /// Keys inserted. Reported, not trusted: the false-positive rate is
    /// measured from the bits set.
    #[schema(format = "uint64")]
    pub key_count: u64,
}

/// Why a digest is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DigestError {
    /// `bloom_b64` is longer than any digest.
    #[error(
        "cache_digest.bloom_b64 is {0} characters, at most {MAX_DIGEST_B64_CHARS} (a {MAX_DIGEST_BYTES}-byte digest) are allowed"
    )]
    TooLarge(usize),
    /// `bloom_b64` is not standard padded base64.
    #[error("cache_digest.bloom_b64 is not standard base64 with padding: {0}")]
    Base64(String),
    /// `size_bytes` is not the decoded length.
    #[error("cache_digest.size_bytes {declared} is not the decoded length {decoded}")]
    SizeMismatch {
        /// `size_bytes` as sent.
        declared: u64,
        /// Bytes `bloom_b64` decodes to.
        decoded: usize,
    },
    /// The size or hash count is out of bounds.
    #[error("cache_digest: {0}")]
    Shape(String),
}

impl DigestError {
    /// The stable machine code of a 422 detail.
    pub fn code(&self) -> &'static str {
        match self {
            Self::TooLarge(_) => "digest_too_large",
            _ => "invalid_digest",
        }
    }
}

impl CacheDigest {
    /// The wire form of `bloom`, holding `key_count` keys.
    pub fn from_bloom(bloom: &Bloom, key_count: u64) -> Self {
        Self {
            bloom_b64: STANDARD.encode(bloom.to_bytes()),
            size_bytes: bloom.size_bytes() as u64,
            hash_count: bloom.hash_count(),
            key_count,
        }
    }

    /// The filter, or why it is refused. Bounded work: an oversized
    /// `bloom_b64` is refused by its length alone.
    pub fn decode(&self) -> Result<Bloom, DigestError> {
        let n = self.bloom_b64.len();
        if n > MAX_DIGEST_B64_CHARS {
            return Err(DigestError::TooLarge(n));
        }
        let size_ok = usize::try_from(self.size_bytes).is_ok_and(|s| {
            s.is_power_of_two() && (MIN_DIGEST_BYTES..=MAX_DIGEST_BYTES).contains(&s)
        });
        if !size_ok {
            return Err(DigestError::Shape(format!(
                "size_bytes {} must be a power of two within {MIN_DIGEST_BYTES}..={MAX_DIGEST_BYTES}",
                self.size_bytes
            )));
        }
        if !(1..=MAX_HASH_COUNT).contains(&self.hash_count) {
            return Err(DigestError::Shape(format!(
                "hash_count {} must be within 1..={MAX_HASH_COUNT}",
                self.hash_count
            )));
        }
        let bytes = STANDARD
            .decode(&self.bloom_b64)
            .map_err(|e| DigestError::Base64(e.to_string()))?;
        if bytes.len() as u64 != self.size_bytes {
            return Err(DigestError::SizeMismatch {
                declared: self.size_bytes,
                decoded: bytes.len(),
            });
        }
        Bloom::from_bytes(&bytes, self.hash_count).map_err(|e| DigestError::Shape(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest() -> CacheDigest {
        let mut b = Bloom::new(64, 3).expect("shape");
        b.insert("user:1");
        CacheDigest::from_bloom(&b, 1)
    }

    #[test]
    fn a_digest_round_trips() {
        let d = digest();
        assert_eq!(d.size_bytes, 64);
        assert!(
            d.decode()
                .expect("valid")
                .contains_hash(crate::locality::bloom::key_hash("user:1"))
        );
    }

    #[test]
    fn each_malformation_is_refused_with_its_reason() {
        let bad = |f: fn(&mut CacheDigest)| {
            let mut d = digest();
            f(&mut d);
            d.decode().expect_err("refused")
        };
        assert!(matches!(
            bad(|d| d.bloom_b64.push('!')),
            DigestError::Base64(_)
        ));
        assert!(matches!(
            bad(|d| d.size_bytes = 32),
            DigestError::SizeMismatch { .. }
        ));
        assert!(matches!(bad(|d| d.size_bytes = 48), DigestError::Shape(_)));
        assert!(matches!(bad(|d| d.hash_count = 0), DigestError::Shape(_)));
        assert!(matches!(bad(|d| d.hash_count = 17), DigestError::Shape(_)));
        let short = bad(|d| d.bloom_b64 = STANDARD.encode([0_u8; 32]));
        assert_eq!(
            short,
            DigestError::SizeMismatch {
                declared: 64,
                decoded: 32
            }
        );
        let huge = bad(|d| d.bloom_b64 = "A".repeat(MAX_DIGEST_B64_CHARS + 4));
        assert_eq!(huge.code(), "digest_too_large");
        assert!(huge.to_string().contains("at most"));
    }

    #[test]
    fn the_schema_states_the_bounds_and_the_snapshot_the_optional_field() {
        use utoipa::PartialSchema;
        let d = serde_json::to_string(&CacheDigest::schema()).expect("json");
        assert!(d.contains("1398104") && d.contains("1048576"), "{d}");
        let snap = serde_json::to_value(crate::telemetry::Snapshot::schema()).expect("json");
        assert!(snap["properties"]["cache_digest"].is_object(), "{snap}");
        assert!(
            !snap["required"].to_string().contains("cache_digest"),
            "{snap}"
        );
    }
}
