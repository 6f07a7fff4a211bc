//! A/B arm assignment by a stable hash of the key (issue #6).
//!
//! FNV-1a 64 (Fowler, Noll, Vo) of the key's bytes, top 53 bits as a
//! fraction in `[0, 1)`: below `fraction` → arm B. The hash is fixed by this
//! code, not seeded per process, so a key keeps its arm across restarts and
//! across replicas.

use serde::Serialize;

/// The experiment arm of a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Arm {
    /// The primary model (`[model] dir`).
    #[serde(rename = "a")]
    A,
    /// The `[model.ab] dir` model.
    #[serde(rename = "b")]
    B,
}

impl Arm {
    /// `"a"` or `"b"`, as logged in the decision log's `arm` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Arm::A => "a",
            Arm::B => "b",
        }
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// FNV-1a 64 of `bytes`.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(FNV_PRIME)
    })
}

/// The key's position in `[0, 1)`.
pub fn key_unit(key: &str) -> f64 {
    // A final avalanche (splitmix64) so that keys differing in one trailing
    // byte spread over the whole range.
    let mut z = fnv1a64(key.as_bytes());
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// Arm B iff `key_unit(key) < fraction` (`fraction` in `0..=1`).
pub fn arm_for(key: &str, fraction: f64) -> Arm {
    if key_unit(key) < fraction {
        Arm::B
    } else {
        Arm::A
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_the_reference_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn split_is_stable_and_close_to_the_fraction() {
        let keys: Vec<String> = (0..10_000).map(|i| format!("user:{i}:profile")).collect();
        let b = keys.iter().filter(|k| arm_for(k, 0.1) == Arm::B).count();
        assert!((900..=1_100).contains(&b), "{b} of 10000 in arm B");
        for k in &keys[..100] {
            assert_eq!(arm_for(k, 0.1), arm_for(k, 0.1));
        }
        assert_eq!(arm_for("order:1", 0.0), Arm::A);
        assert_eq!(arm_for("order:1", 1.0), Arm::B);
        // Growing the fraction only moves keys from A to B.
        let b10: Vec<bool> = keys.iter().map(|k| arm_for(k, 0.1) == Arm::B).collect();
        let b20: Vec<bool> = keys.iter().map(|k| arm_for(k, 0.2) == Arm::B).collect();
        assert!(b10.iter().zip(&b20).all(|(x, y)| !x || *y));
    }
}
