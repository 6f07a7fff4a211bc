//! Tests of the feature schema.

use super::*;

#[test]
fn indices_are_positions_and_names_unique() {
    let mut names = std::collections::HashSet::new();
    for (i, s) in FEATURES.iter().enumerate() {
        assert_eq!(s.index, i);
        assert!(names.insert(s.name), "duplicate {}", s.name);
        assert!(
            s.min <= s.impute && s.impute <= s.max,
            "{} impute out of range",
            s.name
        );
    }
}

#[test]
fn group_sizes_are_3_7_20_8_4() {
    let count = |g| FEATURES.iter().filter(|s| s.group == g).count();
    assert_eq!(
        [count(K), count(E), count(W), count(C), count(H)],
        [3, 7, 20, 8, 4]
    );
}

#[test]
fn the_locality_indices_name_their_features_and_impute_out_of_range() {
    assert_eq!(FEATURES[WARM_PROBABILITY_FEATURE].name, "warm_probability");
    assert_eq!(FEATURES[PREFIX_HIT_RATE_FEATURE].name, "prefix_hit_rate");
    for i in [WARM_PROBABILITY_FEATURE, PREFIX_HIT_RATE_FEATURE] {
        assert!(FEATURES[i].impute < 0.0, "missing is never a real rate");
    }
}

#[test]
fn the_expected_latency_index_names_its_feature() {
    assert_eq!(
        FEATURES[EXPECTED_LATENCY_FEATURE].name,
        "expected_latency_ln_ms"
    );
}

#[test]
fn hash_is_stable_hex() {
    assert_eq!(schema_hash().len(), 16);
    assert_eq!(schema_hash(), schema_hash());
}
