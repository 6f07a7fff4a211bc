//! Key fingerprint: what the scorer and the observation vector know about a
//! request's key, parsed without allocating (issue #2).
//!
//! Keys follow the common `prefix:segment:…` convention (`user:12345:profile`).
//! The prefix is the text before the first `:`; the shard id comes from a
//! pluggable [`ShardingStrategy`] so a router's own sharding can be used.

/// Maps a key to the shard it lives on, when the key says.
pub trait ShardingStrategy: Send + Sync + std::fmt::Debug {
    /// The shard id of `key`, or `None` when the key carries none.
    fn shard_id(&self, key: &str) -> Option<u64>;
}

/// The default strategy: the second `:`-separated segment when it is a
/// decimal number (`user:12345:profile` → 12345).
#[derive(Debug, Default, Clone, Copy)]
pub struct SecondSegmentSharding;

impl ShardingStrategy for SecondSegmentSharding {
    fn shard_id(&self, key: &str) -> Option<u64> {
        let seg = key.split(':').nth(1)?;
        if seg.is_empty() || !seg.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        seg.parse().ok()
    }
}

/// The parsed key, borrowing from the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyFingerprint<'a> {
    /// Text before the first `:` (the whole key when there is none).
    pub prefix: &'a str,
    /// Shard id from the [`ShardingStrategy`].
    pub shard_id: Option<u64>,
    /// Key length, bytes.
    pub len_bytes: usize,
    /// Number of `:`-separated segments, >= 1.
    pub segments: usize,
}

impl<'a> KeyFingerprint<'a> {
    /// Parse `key` with `sharding`; never allocates.
    pub fn parse(key: &'a str, sharding: &dyn ShardingStrategy) -> Self {
        let prefix = key.split(':').next().unwrap_or(key);
        Self {
            prefix,
            shard_id: sharding.shard_id(key),
            len_bytes: key.len(),
            segments: key.bytes().filter(|&b| b == b':').count() + 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_prefix_shard_and_segments() {
        let f = KeyFingerprint::parse("user:12345:profile", &SecondSegmentSharding);
        assert_eq!(f.prefix, "user");
        assert_eq!(f.shard_id, Some(12345));
        assert_eq!((f.len_bytes, f.segments), (18, 3));
    }

    #[test]
    fn non_numeric_or_missing_second_segment_has_no_shard() {
        for key in [
            "user:abc:x",
            "plain",
            "user::x",
            "user:-1",
            "user:99999999999999999999999",
        ] {
            assert_eq!(
                KeyFingerprint::parse(key, &SecondSegmentSharding).shard_id,
                None,
                "{key}"
            );
        }
        assert_eq!(
            KeyFingerprint::parse("plain", &SecondSegmentSharding).prefix,
            "plain"
        );
    }
}
