//! The attributes of an ONNX-ML `TreeEnsembleRegressor` node as plain
//! vectors (spec:
//! <https://onnx.ai/onnx/operators/onnx_aionnxml_TreeEnsembleRegressor.html>):
//! what the exporter writes and what [`FlatEnsemble::from_attributes`](super::ensemble::FlatEnsemble::from_attributes)
//! validates and flattens.

/// Node mode string of a numeric `x <= threshold` split (ONNX-ML spec).
pub const MODE_BRANCH_LEQ: &str = "BRANCH_LEQ";
/// Node mode string of a leaf (ONNX-ML spec).
pub const MODE_LEAF: &str = "LEAF";

/// The attributes of one ONNX-ML `TreeEnsembleRegressor` node, as plain vectors.
///
/// Field names and meanings are those of the ONNX-ML spec
/// (<https://onnx.ai/onnx/operators/onnx_aionnxml_TreeEnsembleRegressor.html>).
/// `nodes_*` vectors have one entry per node (branch or leaf), `target_*`
/// vectors one entry per leaf contribution. An empty
/// `nodes_missing_value_tracks_true` means "all false"; empty `base_values`
/// means "absent"; `None` strings mean "attribute absent" (spec defaults:
/// `aggregate_function = SUM`, `post_transform = NONE`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TreeEnsembleAttributes {
    /// Tree id of each node.
    pub nodes_treeids: Vec<i64>,
    /// Node id (unique within its tree) of each node; id 0 is the root.
    pub nodes_nodeids: Vec<i64>,
    /// Input column compared at each branch node (ignored for leaves).
    pub nodes_featureids: Vec<i64>,
    /// Threshold of each branch node (ignored for leaves).
    pub nodes_values: Vec<f32>,
    /// `BRANCH_LEQ` or `LEAF` for each node.
    pub nodes_modes: Vec<String>,
    /// Node id of the child taken when the comparison is true.
    pub nodes_truenodeids: Vec<i64>,
    /// Node id of the child taken when the comparison is false.
    pub nodes_falsenodeids: Vec<i64>,
    /// Non-zero: a NaN input takes the true child. Empty: all zero.
    pub nodes_missing_value_tracks_true: Vec<i64>,
    /// Tree id of each leaf contribution.
    pub target_treeids: Vec<i64>,
    /// Leaf node id of each leaf contribution.
    pub target_nodeids: Vec<i64>,
    /// Output column of each leaf contribution (must be 0).
    pub target_ids: Vec<i64>,
    /// Weight of each leaf contribution.
    pub target_weights: Vec<f32>,
    /// Number of output columns (must be 1).
    pub n_targets: i64,
    /// `SUM` (or `None` = default `SUM`).
    pub aggregate_function: Option<String>,
    /// `NONE` (or `None` = default `NONE`).
    pub post_transform: Option<String>,
    /// Per-target base value; must be empty or all zero.
    pub base_values: Vec<f32>,
}

impl TreeEnsembleAttributes {
    /// Appends leaf `node` of tree `tree` with weight `weight` (one node
    /// entry and one target entry for output 0).
    pub fn push_leaf(&mut self, tree: i64, node: i64, weight: f32) {
        self.nodes_treeids.push(tree);
        self.nodes_nodeids.push(node);
        self.nodes_featureids.push(0);
        self.nodes_values.push(0.0);
        self.nodes_modes.push(MODE_LEAF.into());
        self.nodes_truenodeids.push(0);
        self.nodes_falsenodeids.push(0);
        self.nodes_missing_value_tracks_true.push(0);
        self.target_treeids.push(tree);
        self.target_nodeids.push(node);
        self.target_ids.push(0);
        self.target_weights.push(weight);
    }
}
