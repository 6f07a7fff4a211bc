//! Reading vectors written under an older feature schema.
//!
//! A vector of schema version 2 is one of version 3 but for the two
//! locality slots ([`WARM_PROBABILITY_FEATURE`], [`PREFIX_HIT_RATE_FEATURE`]),
//! which held `req_mget` and `candidate_count`: [`upgrade`] gives them
//! their imputed value, as for a decision made before any outcome said hit
//! or miss, which is what version 2 knew. Version 1 (key-shape features in
//! the evidence slots) differs in most slots and is not read.

use super::schema::{
    FEATURE_COUNT, FEATURE_SCHEMA_VERSION, FEATURES, PREFIX_HIT_RATE_FEATURE,
    WARM_PROBABILITY_FEATURE,
};

/// Feature schema versions whose vectors read as the current one, the
/// current first.
pub const READABLE_SCHEMA_VERSIONS: [&str; 2] = [FEATURE_SCHEMA_VERSION, "2"];

/// A vector of another schema version than the readable ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "feature schema version {found:?} does not read as version {FEATURE_SCHEMA_VERSION:?} (readable: {readable})",
    readable = READABLE_SCHEMA_VERSIONS.join(", ")
)]
pub struct UnreadableSchema {
    /// The version found.
    pub found: String,
}

/// Whether vectors of schema `version` read as the current schema's.
pub fn is_readable(version: &str) -> bool {
    READABLE_SCHEMA_VERSIONS.contains(&version)
}

/// The slots a vector of schema `version` lacks, which [`upgrade`] imputes.
///
/// # Errors
/// [`UnreadableSchema`] for a version not in [`READABLE_SCHEMA_VERSIONS`].
pub fn imputed_slots(version: &str) -> Result<&'static [usize], UnreadableSchema> {
    match version {
        v if v == FEATURE_SCHEMA_VERSION => Ok(&[]),
        "2" => Ok(&[WARM_PROBABILITY_FEATURE, PREFIX_HIT_RATE_FEATURE]),
        v => Err(UnreadableSchema {
            found: v.to_owned(),
        }),
    }
}

/// `row`, a vector of schema `version`, in the current schema.
///
/// # Errors
/// [`UnreadableSchema`] for a version not in [`READABLE_SCHEMA_VERSIONS`];
/// `row` is unchanged then.
pub fn upgrade(version: &str, row: &mut [f32; FEATURE_COUNT]) -> Result<(), UnreadableSchema> {
    for &i in imputed_slots(version)? {
        row[i] = FEATURES[i].impute;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_2_vector_reads_with_the_locality_imputed_and_the_rest_kept() {
        let mut row = [0.5f32; FEATURE_COUNT];
        // Version 2: an MGET among 3 candidates.
        row[31] = 1.0;
        row[35] = 3.0;
        upgrade("2", &mut row).expect("readable");
        assert_eq!(row[WARM_PROBABILITY_FEATURE], -1.0);
        assert_eq!(row[PREFIX_HIT_RATE_FEATURE], -1.0);
        let kept = (0..FEATURE_COUNT).filter(|i| ![31, 35].contains(i));
        assert!(kept.map(|i| row[i]).all(|x| x == 0.5));
    }

    #[test]
    fn the_current_version_is_unchanged_and_version_1_is_refused() {
        let mut row = [0.25f32; FEATURE_COUNT];
        upgrade(FEATURE_SCHEMA_VERSION, &mut row).expect("current");
        assert_eq!(row, [0.25; FEATURE_COUNT]);
        let err = upgrade("1", &mut row).expect_err("version 1");
        assert_eq!(row, [0.25; FEATURE_COUNT]);
        assert!(err.to_string().contains("\"1\""), "{err}");
        assert!(is_readable("2") && is_readable("3") && !is_readable("1"));
    }
}
