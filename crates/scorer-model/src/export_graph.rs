//! The ONNX graph of an exported model ([`crate::export`]): the
//! `TreeEnsembleRegressor` node from its attributes, then, for a binary
//! objective, the `Sigmoid`; encoded as a `ModelProto` with tract's own
//! protobuf types.

use prost::Message;
use tract_onnx::pb;
use tract_onnx::pb::attribute_proto::AttributeType;

use crate::ensemble::TreeEnsembleAttributes;
use crate::export::{
    ExportError, ExportOptions, INPUT_NAME, IR_VERSION, LgbModel, MARGIN_OUTPUT, ML_OPSET,
    ONNX_OPSET, PREDICTION_OUTPUT, PROBABILITY_OUTPUT, ensemble_attributes, is_regression,
};
use crate::op::ML_DOMAIN;

fn attr_ints(name: &str, v: &[i64]) -> pb::AttributeProto {
    pb::AttributeProto {
        name: name.into(),
        r#type: AttributeType::Ints as i32,
        ints: v.to_vec(),
        ..Default::default()
    }
}
fn attr_floats(name: &str, v: &[f32]) -> pb::AttributeProto {
    pb::AttributeProto {
        name: name.into(),
        r#type: AttributeType::Floats as i32,
        floats: v.to_vec(),
        ..Default::default()
    }
}
fn attr_int(name: &str, v: i64) -> pb::AttributeProto {
    pb::AttributeProto {
        name: name.into(),
        r#type: AttributeType::Int as i32,
        i: v,
        ..Default::default()
    }
}
fn attr_string(name: &str, v: &str) -> pb::AttributeProto {
    pb::AttributeProto {
        name: name.into(),
        r#type: AttributeType::String as i32,
        s: v.as_bytes().to_vec(),
        ..Default::default()
    }
}
fn attr_strings(name: &str, v: &[String]) -> pb::AttributeProto {
    pb::AttributeProto {
        name: name.into(),
        r#type: AttributeType::Strings as i32,
        strings: v.iter().map(|s| s.as_bytes().to_vec()).collect(),
        ..Default::default()
    }
}

/// The ONNX node for `attrs` (domain `ai.onnx.ml`, input `input`, output `output`).
pub fn tree_ensemble_node(
    attrs: &TreeEnsembleAttributes,
    input: &str,
    output: &str,
) -> pb::NodeProto {
    let mut attribute = vec![
        attr_ints("nodes_treeids", &attrs.nodes_treeids),
        attr_ints("nodes_nodeids", &attrs.nodes_nodeids),
        attr_ints("nodes_featureids", &attrs.nodes_featureids),
        attr_floats("nodes_values", &attrs.nodes_values),
        attr_strings("nodes_modes", &attrs.nodes_modes),
        attr_ints("nodes_truenodeids", &attrs.nodes_truenodeids),
        attr_ints("nodes_falsenodeids", &attrs.nodes_falsenodeids),
        attr_ints(
            "nodes_missing_value_tracks_true",
            &attrs.nodes_missing_value_tracks_true,
        ),
        attr_ints("target_treeids", &attrs.target_treeids),
        attr_ints("target_nodeids", &attrs.target_nodeids),
        attr_ints("target_ids", &attrs.target_ids),
        attr_floats("target_weights", &attrs.target_weights),
        attr_int("n_targets", attrs.n_targets),
    ];
    if let Some(agg) = &attrs.aggregate_function {
        attribute.push(attr_string("aggregate_function", agg));
    }
    if let Some(pt) = &attrs.post_transform {
        attribute.push(attr_string("post_transform", pt));
    }
    if !attrs.base_values.is_empty() {
        attribute.push(attr_floats("base_values", &attrs.base_values));
    }
    pb::NodeProto {
        input: vec![input.into()],
        output: vec![output.into()],
        name: "tree_ensemble".into(),
        op_type: crate::op::OP_TYPE.into(),
        domain: ML_DOMAIN.into(),
        attribute,
        ..Default::default()
    }
}

fn tensor_info(name: &str, width: i64) -> pb::ValueInfoProto {
    use pb::tensor_shape_proto::{Dimension, dimension::Value};
    let dim = |v: Value| Dimension {
        value: Some(v),
        ..Default::default()
    };
    pb::ValueInfoProto {
        name: name.into(),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: pb::tensor_proto::DataType::Float as i32,
                shape: Some(pb::TensorShapeProto {
                    dim: vec![
                        dim(Value::DimParam("N".into())),
                        dim(Value::DimValue(width)),
                    ],
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Builds the ONNX model (see module docs) for `model`.
///
/// # Errors
/// As [`ensemble_attributes`].
pub fn model_proto(model: &LgbModel, opts: &ExportOptions) -> Result<pb::ModelProto, ExportError> {
    let attrs = ensemble_attributes(model, opts)?;
    let width = model.max_feature_idx as i64 + 1;
    let graph = if is_regression(&model.objective) {
        pb::GraphProto {
            node: vec![tree_ensemble_node(&attrs, INPUT_NAME, PREDICTION_OUTPUT)],
            name: "lightgbm_regression".into(),
            input: vec![tensor_info(INPUT_NAME, width)],
            output: vec![tensor_info(PREDICTION_OUTPUT, 1)],
            ..Default::default()
        }
    } else {
        let sigmoid = pb::NodeProto {
            input: vec![MARGIN_OUTPUT.into()],
            output: vec![PROBABILITY_OUTPUT.into()],
            name: "sigmoid".into(),
            op_type: "Sigmoid".into(),
            ..Default::default()
        };
        pb::GraphProto {
            node: vec![
                tree_ensemble_node(&attrs, INPUT_NAME, MARGIN_OUTPUT),
                sigmoid,
            ],
            name: "lightgbm_binary".into(),
            input: vec![tensor_info(INPUT_NAME, width)],
            output: vec![
                tensor_info(MARGIN_OUTPUT, 1),
                tensor_info(PROBABILITY_OUTPUT, 1),
            ],
            ..Default::default()
        }
    };
    Ok(pb::ModelProto {
        ir_version: IR_VERSION,
        opset_import: vec![
            pb::OperatorSetIdProto {
                domain: String::new(),
                version: ONNX_OPSET,
            },
            pb::OperatorSetIdProto {
                domain: ML_DOMAIN.into(),
                version: ML_OPSET,
            },
        ],
        producer_name: "modelcore".into(),
        producer_version: env!("CARGO_PKG_VERSION").into(),
        doc_string: format!(
            "LightGBM {} model, {} trees",
            model.objective,
            model.trees.len()
        ),
        graph: Some(graph),
        ..Default::default()
    })
}

/// Exports `model` with thresholds rounded down and encodes it (protobuf bytes of a `.onnx` file).
///
/// # Errors
/// As [`ensemble_attributes`].
pub fn export_onnx(model: &LgbModel) -> Result<Vec<u8>, ExportError> {
    export_onnx_with(model, &ExportOptions::default())
}

/// [`export_onnx`] with explicit options.
///
/// # Errors
/// As [`ensemble_attributes`].
pub fn export_onnx_with(model: &LgbModel, opts: &ExportOptions) -> Result<Vec<u8>, ExportError> {
    Ok(model_proto(model, opts)?.encode_to_vec())
}
