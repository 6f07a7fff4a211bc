//! Training from a data file that LightGBM loads in two rounds.
//!
//! With `two_round = true` LightGBM reads the file once to sample rows and
//! find each feature's bin boundaries, and once more to put every row in
//! its bins; it never holds the file's text or a float matrix, only the
//! binned dataset (about one byte per feature per row below 256 bins).
//! The safe `lightgbm3` API builds a file dataset without parameters (so
//! without `two_round`, `header` or `label_column`), and
//! cannot hand such a dataset to its booster; this module does both
//! through [`crate::ffi`] and returns the model's text, which
//! `lightgbm3::Booster::from_string` loads for predictions.

use std::path::Path;

use serde_json::Value;

use crate::{Error, ffi};

/// LightGBM's parameter string (`key=value` separated by spaces) of a
/// JSON object of parameters.
///
/// # Errors
/// [`Error::Invalid`] if `params` is not an object or a value holds a space.
pub fn parameter_string(params: &Value) -> Result<String, Error> {
    let Some(map) = params.as_object() else {
        return Err(Error::Invalid(
            "LightGBM parameters must be an object".into(),
        ));
    };
    let mut out = Vec::with_capacity(map.len());
    for (k, v) in map {
        let v = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if v.contains(char::is_whitespace) || k.contains(char::is_whitespace) {
            return Err(Error::Invalid(format!("parameter {k}={v} holds a space")));
        }
        out.push(format!("{k}={v}"));
    }
    Ok(out.join(" "))
}

/// Trains `num_iterations` rounds (from `params`) on the CSV/TSV data file
/// at `path`, loaded with `dataset_params` (e.g. `two_round=true
/// header=false label_column=0`; weights, if any, in `<path>.weight`,
/// which LightGBM reads by itself), and returns the model
/// text (`model.txt`).
///
/// # Errors
/// [`Error::Invalid`] for parameters LightGBM cannot take as a string or a
/// path that is not UTF-8; [`Error::LightGbm`] if LightGBM refuses the
/// file, the parameters or a round.
pub fn train_from_file(
    path: &Path,
    dataset_params: &Value,
    params: &Value,
) -> Result<String, Error> {
    let Some(path) = path.to_str() else {
        return Err(Error::Invalid(format!(
            "{} is not a UTF-8 path",
            path.display()
        )));
    };
    let rounds = params
        .get("num_iterations")
        .and_then(Value::as_u64)
        .unwrap_or(100);
    // Dataset parameters go to the booster too: LightGBM checks that the
    // two agree.
    let mut all = params.clone();
    if let (Some(a), Some(d)) = (all.as_object_mut(), dataset_params.as_object()) {
        for (k, v) in d {
            a.insert(k.clone(), v.clone());
        }
    }
    let dataset = ffi::dataset_from_file(path, &parameter_string(dataset_params)?)?;
    let text = {
        let mut booster = ffi::booster_create(&dataset, &parameter_string(&all)?)?;
        for _ in 0..rounds {
            if ffi::booster_update_one_iter(&mut booster)? {
                break;
            }
        }
        ffi::booster_save_string(&booster)?
    };
    drop(dataset);
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parameters_become_lightgbms_string_and_spaces_are_refused() {
        let s = parameter_string(
            &json!({"objective": "regression", "num_leaves": 31, "deterministic": true}),
        )
        .unwrap();
        assert_eq!(s, "deterministic=true num_leaves=31 objective=regression");
        assert!(parameter_string(&json!({"a": "b c"})).is_err());
        assert!(parameter_string(&json!([1])).is_err());
    }

    #[test]
    fn a_model_trains_from_a_two_round_file_and_a_missing_file_is_lightgbms_error() {
        let dir = std::env::temp_dir().join(format!("lgbm-ext-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let data = dir.join("train.tsv");
        let mut text = String::new();
        for i in 0..400 {
            let x = f64::from(i % 20);
            let y = if x > 9.0 { 2.0 } else { -1.0 };
            text.push_str(&format!("{y}\t{x}\t{}\n", i % 3));
        }
        std::fs::write(&data, text).unwrap();
        let ds = json!({"two_round": true, "header": false, "label_column": 0, "verbosity": -1});
        let params = json!({"objective": "regression", "num_iterations": 5, "min_data_in_leaf": 5, "verbosity": -1, "num_threads": 1});
        let model = train_from_file(&data, &ds, &params).unwrap();
        assert!(model.contains("Tree=4"), "5 trees");
        assert!(model.contains("max_feature_idx=1"), "two features");
        assert!(
            model.contains("two_round: 1") || model.contains("[two_round: 1]"),
            "{}",
            &model[model.len().saturating_sub(2000)..]
        );
        let e = train_from_file(&dir.join("missing.tsv"), &ds, &params).unwrap_err();
        assert!(matches!(e, Error::LightGbm(_)), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
