//! ONNX-ML `TreeEnsembleRegressor` as a custom tract op, plus model loading and running.
//!
//! tract-onnx 0.23.9 ships no `TreeEnsembleRegressor` (only the classifier).
//! Its public op registry is [`tract_onnx::model::OnnxOpRegister`], a map from
//! the ONNX `op_type` string (the node's domain is **not** part of the key) to a
//! builder `fn(&ParsingContext, &NodeProto) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)>`,
//! reachable as the public field `Onnx::op_register`. [`onnx_with_tree_ensemble`]
//! inserts our builder there. The builder checks the node's domain itself.
//!
//! The op is an inference-time `Expansion` (shape rules) that wires one typed
//! op, [`TreeEnsembleRegressorOp`], evaluated by
//! [`FlatEnsemble::eval_batch`](crate::ensemble::FlatEnsemble::eval_batch).
//! Shapes: input `[N, F]` f32 with `F >= ensemble.n_features()`, output `[N, 1]` f32
//! (raw sum of leaf weights, spec
//! <https://onnx.ai/onnx/operators/onnx_aionnxml_TreeEnsembleRegressor.html>).

use std::path::Path;
use std::sync::Arc;

use prost::Message;
use tract_onnx::model::ParsingContext;
use tract_onnx::pb::{self, NodeProto};
use tract_onnx::prelude::*;
use tract_onnx::tract_hir::internal::*;

use crate::card::{MAX_ONNX_BYTES, read_capped};
use crate::ensemble::{EnsembleError, FlatEnsemble, TreeEnsembleAttributes};

/// ONNX op type handled by this module.
pub const OP_TYPE: &str = "TreeEnsembleRegressor";
/// ONNX domain of [`OP_TYPE`].
pub const ML_DOMAIN: &str = "ai.onnx.ml";
/// Output name preferred by [`run`] (the exporter's sigmoid output).
pub const PROBABILITY_OUTPUT: &str = "probability";

/// Errors from loading or running a model.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The model file could not be read.
    #[error("reading model file {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not an ONNX `ModelProto`.
    #[error("decoding ONNX protobuf: {0}")]
    Decode(#[from] prost::DecodeError),
    /// The graph's input is not a single `[N, F]` float tensor with a known `F`.
    #[error("unsupported model input: {0}")]
    Input(String),
    /// The `TreeEnsembleRegressor` attributes are invalid or unsupported.
    #[error("tree ensemble: {0}")]
    Ensemble(#[from] EnsembleError),
    /// tract refused the model or failed while running it.
    #[error("tract while {stage}: {message}")]
    Tract {
        /// What was being done (`parsing`, `optimizing`, `running`, …).
        stage: &'static str,
        /// tract's full error chain.
        message: String,
    },
    /// `run` was called with rows that do not match `n × n_features`.
    #[error("rows: got {got} values for {n} rows of {n_features} features")]
    Shape {
        /// Values passed.
        got: usize,
        /// Rows announced.
        n: usize,
        /// Features per row expected by the model.
        n_features: usize,
    },
}

fn tract_err(stage: &'static str) -> impl FnOnce(TractError) -> ModelError {
    move |e| ModelError::Tract {
        stage,
        message: format!("{e:#}"),
    }
}

/// Reads the `TreeEnsembleRegressor` attributes of an ONNX node.
///
/// # Errors
/// [`ModelError::Tract`] if an attribute has the wrong protobuf type;
/// [`ModelError::Ensemble`] for the `*_as_tensor` (double precision) variants,
/// which are refused.
pub fn attributes_from_node(node: &NodeProto) -> Result<TreeEnsembleAttributes, ModelError> {
    for attr in [
        "nodes_values_as_tensor",
        "target_weights_as_tensor",
        "base_values_as_tensor",
    ] {
        if node.attribute.iter().any(|a| a.name == attr) {
            return Err(EnsembleError::Unsupported {
                attr: "*_as_tensor",
                value: attr.to_string(),
                reason: "double-precision tensors are not supported; use the float lists",
            }
            .into());
        }
    }
    let get = || -> TractResult<TreeEnsembleAttributes> {
        let ints = |name: &str| -> TractResult<Vec<i64>> {
            Ok(node
                .get_attr_opt_slice::<i64>(name)?
                .map(<[i64]>::to_vec)
                .unwrap_or_default())
        };
        let floats = |name: &str| -> TractResult<Vec<f32>> {
            Ok(node
                .get_attr_opt_slice::<f32>(name)?
                .map(<[f32]>::to_vec)
                .unwrap_or_default())
        };
        Ok(TreeEnsembleAttributes {
            nodes_treeids: ints("nodes_treeids")?,
            nodes_nodeids: ints("nodes_nodeids")?,
            nodes_featureids: ints("nodes_featureids")?,
            nodes_values: floats("nodes_values")?,
            nodes_modes: node
                .get_attr_opt_vec::<String>("nodes_modes")?
                .unwrap_or_default(),
            nodes_truenodeids: ints("nodes_truenodeids")?,
            nodes_falsenodeids: ints("nodes_falsenodeids")?,
            nodes_missing_value_tracks_true: ints("nodes_missing_value_tracks_true")?,
            target_treeids: ints("target_treeids")?,
            target_nodeids: ints("target_nodeids")?,
            target_ids: ints("target_ids")?,
            target_weights: floats("target_weights")?,
            n_targets: node.get_attr_opt::<i64>("n_targets")?.unwrap_or(1),
            aggregate_function: node.get_attr_opt::<String>("aggregate_function")?,
            post_transform: node.get_attr_opt::<String>("post_transform")?,
            base_values: floats("base_values")?,
        })
    };
    get().map_err(tract_err("reading TreeEnsembleRegressor attributes"))
}

/// The typed (runtime) op: `[N, F]` f32 → `[N, 1]` f32 raw scores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEnsembleRegressorOp {
    /// The validated ensemble, shared between clones of the op.
    pub ensemble: Arc<FlatEnsemble>,
}

impl Op for TreeEnsembleRegressorOp {
    fn name(&self) -> StaticName {
        OP_TYPE.into()
    }

    fn info(&self) -> TractResult<Vec<String>> {
        Ok(vec![format!(
            "{} trees, {} nodes, needs {} features",
            self.ensemble.n_trees(),
            self.ensemble.nodes().len(),
            self.ensemble.n_features()
        )])
    }

    op_as_typed_op!();
}

impl EvalOp for TreeEnsembleRegressorOp {
    op_out_of_plan!();

    fn eval(&self, _ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let input = args_1!(inputs);
        let shape = input.shape();
        ensure!(
            shape.len() == 2,
            "TreeEnsembleRegressor expects a rank-2 input, got {shape:?}"
        );
        let (n, f) = (shape[0], shape[1]);
        ensure!(
            f >= self.ensemble.n_features(),
            "TreeEnsembleRegressor input has {f} columns, the ensemble reads {}",
            self.ensemble.n_features()
        );
        let plain = input.try_as_plain_ram()?;
        let rows = plain.as_slice::<f32>()?;
        // Written in place: one allocation per call, no copy.
        let mut out = Tensor::zero::<f32>(&[n, 1])?;
        if f > 0 {
            let mut plain = out.try_as_plain_ram_mut()?;
            self.ensemble.eval_batch(rows, plain.as_slice_mut::<f32>()?);
        }
        Ok(tvec!(out.into_tvalue()))
    }
}

impl TypedOp for TreeEnsembleRegressorOp {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        ensure!(inputs.len() == 1, "TreeEnsembleRegressor takes one input");
        let x = inputs[0];
        ensure!(
            x.datum_type == f32::datum_type(),
            "TreeEnsembleRegressor input must be f32"
        );
        ensure!(x.rank() == 2, "TreeEnsembleRegressor input must be [N, F]");
        if let Ok(f) = x.shape[1].to_usize() {
            ensure!(
                f >= self.ensemble.n_features(),
                "TreeEnsembleRegressor input has {f} columns, the ensemble reads {}",
                self.ensemble.n_features()
            );
        }
        Ok(tvec!(f32::fact([x.shape[0].clone(), 1.to_dim()])))
    }

    as_op!();
}

/// Inference-time wrapper: shape/type rules, then wires [`TreeEnsembleRegressorOp`].
#[derive(Debug, Clone)]
struct TreeEnsembleRegressorExpansion {
    ensemble: Arc<FlatEnsemble>,
}

impl Expansion for TreeEnsembleRegressorExpansion {
    fn name(&self) -> StaticName {
        OP_TYPE.into()
    }

    fn rules<'r, 'p: 'r, 's: 'r>(
        &'s self,
        s: &mut Solver<'r>,
        inputs: &'p [TensorProxy],
        outputs: &'p [TensorProxy],
    ) -> InferenceResult {
        check_input_arity(inputs, 1)?;
        check_output_arity(outputs, 1)?;
        s.equals(&inputs[0].datum_type, f32::datum_type())?;
        s.equals(&inputs[0].rank, 2)?;
        s.equals(&outputs[0].datum_type, f32::datum_type())?;
        s.equals(&outputs[0].rank, 2)?;
        s.equals(&outputs[0].shape[0], &inputs[0].shape[0])?;
        s.equals(&outputs[0].shape[1], 1.to_dim())?;
        Ok(())
    }

    fn wire(
        &self,
        prefix: &str,
        model: &mut TypedModel,
        inputs: &[OutletId],
    ) -> TractResult<TVec<OutletId>> {
        model.wire_node(
            prefix,
            TreeEnsembleRegressorOp {
                ensemble: self.ensemble.clone(),
            },
            inputs,
        )
    }
}

fn build_tree_ensemble_regressor(
    _ctx: &ParsingContext,
    node: &NodeProto,
) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    ensure!(
        node.domain == ML_DOMAIN,
        "TreeEnsembleRegressor must be in domain `{ML_DOMAIN}`, found `{}`",
        node.domain
    );
    let attrs = attributes_from_node(node).map_err(|e| anyhow!("{e}"))?;
    let ensemble = Arc::new(FlatEnsemble::from_attributes(&attrs)?);
    Ok((expand(TreeEnsembleRegressorExpansion { ensemble }), vec![]))
}

/// tract's ONNX framework with every stock op plus our `TreeEnsembleRegressor`.
///
/// Equivalent to `tract_onnx::onnx()` followed by
/// `op_register.insert("TreeEnsembleRegressor", …)` (tract 0.23.9 has no
/// `with_ops` builder; the register is a public field).
pub fn onnx_with_tree_ensemble() -> tract_onnx::Onnx {
    let mut onnx = tract_onnx::onnx();
    onnx.op_register
        .insert(OP_TYPE, build_tree_ensemble_regressor);
    onnx
}

/// Where to load a model from.
#[derive(Debug, Clone, Copy)]
pub enum ModelSource<'a> {
    /// Serialized ONNX `ModelProto` bytes.
    Bytes(&'a [u8]),
    /// A `.onnx` file.
    Path(&'a Path),
}

impl<'a> From<&'a [u8]> for ModelSource<'a> {
    fn from(b: &'a [u8]) -> Self {
        ModelSource::Bytes(b)
    }
}
impl<'a> From<&'a Vec<u8>> for ModelSource<'a> {
    fn from(b: &'a Vec<u8>) -> Self {
        ModelSource::Bytes(b)
    }
}
impl<'a> From<&'a Path> for ModelSource<'a> {
    fn from(p: &'a Path) -> Self {
        ModelSource::Path(p)
    }
}

/// A loaded, optimized, runnable model with a symbolic batch dimension.
#[derive(Debug, Clone)]
pub struct RunnablePlan {
    plan: Arc<TypedRunnableModel>,
    n_features: usize,
    primary_output: usize,
    output_names: Vec<String>,
}

impl RunnablePlan {
    /// Features per row (`F` of the `[N, F]` input).
    pub fn n_features(&self) -> usize {
        self.n_features
    }
    /// Names of the graph outputs, in declaration order.
    pub fn output_names(&self) -> &[String] {
        &self.output_names
    }
    /// The optimized tract plan.
    pub fn plan(&self) -> &Arc<TypedRunnableModel> {
        &self.plan
    }
    /// Index of the primary output (see [`run`]).
    pub fn primary_output(&self) -> usize {
        self.primary_output
    }
}

fn input_width(proto: &pb::ModelProto) -> Result<usize, ModelError> {
    let graph = proto
        .graph
        .as_ref()
        .ok_or_else(|| ModelError::Input("no graph".into()))?;
    let inits: Vec<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
    let inputs: Vec<&pb::ValueInfoProto> = graph
        .input
        .iter()
        .filter(|i| !inits.contains(&i.name.as_str()))
        .collect();
    let [input] = inputs.as_slice() else {
        return Err(ModelError::Input(format!(
            "expected 1 graph input, found {}",
            inputs.len()
        )));
    };
    let Some(pb::type_proto::Value::TensorType(t)) =
        input.r#type.as_ref().and_then(|t| t.value.as_ref())
    else {
        return Err(ModelError::Input(format!(
            "input `{}` is not a tensor",
            input.name
        )));
    };
    if t.elem_type != pb::tensor_proto::DataType::Float as i32 {
        return Err(ModelError::Input(format!(
            "input `{}` is not float32",
            input.name
        )));
    }
    let dims = t
        .shape
        .as_ref()
        .map(|s| s.dim.as_slice())
        .unwrap_or_default();
    let [_, f] = dims else {
        return Err(ModelError::Input(format!(
            "input `{}` must have rank 2",
            input.name
        )));
    };
    match f.value {
        Some(pb::tensor_shape_proto::dimension::Value::DimValue(f)) if f > 0 => {
            usize::try_from(f).map_err(|_| ModelError::Input(format!("bad width {f}")))
        }
        _ => Err(ModelError::Input(format!(
            "input `{}` must have a fixed positive feature dimension",
            input.name
        ))),
    }
}

/// Loads an ONNX model (bytes or file) with [`onnx_with_tree_ensemble`], sets
/// its single input to `f32 [N, F]` (`N` symbolic batch, `F` the width declared
/// in the graph), then `into_optimized()` and `into_runnable()`.
///
/// # Errors
/// [`ModelError::Io`] / [`ModelError::Decode`] for unreadable bytes,
/// [`ModelError::Input`] if the graph input is not one `[?, F]` float tensor,
/// [`ModelError::Tract`] if tract rejects the graph (e.g. an invalid tree
/// ensemble, an unknown op, a feature index `>= F`).
pub fn load_model<'a>(source: impl Into<ModelSource<'a>>) -> Result<RunnablePlan, ModelError> {
    let bytes_owned;
    let bytes: &[u8] = match source.into() {
        ModelSource::Bytes(b) => b,
        ModelSource::Path(p) => {
            bytes_owned = read_capped(p, MAX_ONNX_BYTES).map_err(|source| ModelError::Io {
                path: p.display().to_string(),
                source,
            })?;
            &bytes_owned
        }
    };
    let proto = pb::ModelProto::decode(bytes)?;
    let n_features = input_width(&proto)?;
    let onnx = onnx_with_tree_ensemble();
    let mut model = onnx
        .model_for_proto_model(&proto)
        .map_err(tract_err("parsing"))?;
    let batch = model.sym("N");
    let fact = InferenceFact::from(f32::fact([batch.to_dim(), n_features.to_dim()]));
    model
        .set_input_fact(0, fact)
        .map_err(tract_err("setting the input fact"))?;
    let output_names: Vec<String> = model
        .output_outlets()
        .map_err(tract_err("listing outputs"))?
        .iter()
        .map(|o| model.outlet_label(*o).unwrap_or_default().to_string())
        .collect();
    let primary_output = output_names
        .iter()
        .position(|n| n == PROBABILITY_OUTPUT)
        .unwrap_or(0);
    let typed = model.into_optimized().map_err(tract_err("optimizing"))?;
    let plan = typed.into_runnable().map_err(tract_err("planning"))?;
    Ok(RunnablePlan {
        plan,
        n_features,
        primary_output,
        output_names,
    })
}

/// Runs `n` rows (`rows`: `n × plan.n_features()` f32, row-major) and returns
/// every output flattened, in [`RunnablePlan::output_names`] order (each
/// output of the exported graph is `[n, 1]`, i.e. `n` values).
///
/// # Errors
/// [`ModelError::Shape`] if `rows.len() != n * n_features`; [`ModelError::Tract`] if tract fails.
pub fn run_all(plan: &RunnablePlan, rows: &[f32], n: usize) -> Result<Vec<Vec<f32>>, ModelError> {
    let shape_err = || ModelError::Shape {
        got: rows.len(),
        n,
        n_features: plan.n_features,
    };
    if n.checked_mul(plan.n_features).ok_or_else(shape_err)? != rows.len() {
        return Err(shape_err());
    }
    let input =
        Tensor::from_shape(&[n, plan.n_features], rows).map_err(tract_err("building input"))?;
    let outputs = plan
        .plan
        .run(tvec!(input.into_tvalue()))
        .map_err(tract_err("running"))?;
    outputs
        .iter()
        .map(|o| {
            let plain = o.try_as_plain_ram()?;
            Ok(plain.as_slice::<f32>()?.to_vec())
        })
        .collect::<TractResult<Vec<_>>>()
        .map_err(tract_err("reading outputs"))
}

/// Runs `n` rows and returns the primary output: the one named
/// [`PROBABILITY_OUTPUT`] if the graph has it, else the first output.
/// For the exported graph that is one probability in `[0, 1]` per row.
///
/// # Errors
/// As [`run_all`].
pub fn run(plan: &RunnablePlan, rows: &[f32], n: usize) -> Result<Vec<f32>, ModelError> {
    let mut all = run_all(plan, rows, n)?;
    if plan.primary_output < all.len() {
        Ok(all.swap_remove(plan.primary_output))
    } else {
        Err(ModelError::Tract {
            stage: "reading outputs",
            message: "model has no output".into(),
        })
    }
}
