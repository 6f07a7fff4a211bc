//! A flat, cache-friendly tree-ensemble representation and its evaluators.
//!
//! The ensemble is built from the attributes of an ONNX-ML
//! `TreeEnsembleRegressor` node (domain `ai.onnx.ml`, opset 1/3; spec:
//! <https://onnx.ai/onnx/operators/onnx_aionnxml_TreeEnsembleRegressor.html>),
//! restricted to the subset that a LightGBM binary / regression model needs:
//!
//! * node modes `BRANCH_LEQ` and `LEAF` only;
//! * `n_targets = 1`, `aggregate_function = SUM`, `post_transform = NONE`;
//! * `base_values` absent or all zero.
//!
//! Anything else is refused with an [`EnsembleError`] naming the attribute.
//!
//! Semantics (ONNX-ML spec): at a `BRANCH_LEQ` node the row goes to the *true*
//! child when `x <= threshold`, else to the *false* child; when `x` is NaN it
//! goes to the true child iff `nodes_missing_value_tracks_true` is non-zero for
//! that node. The output is the sum of the reached leaves' weights, accumulated
//! in `f32` in ascending tree-id order (the weights of several target entries
//! on one leaf are summed first, in attribute order).
//!
//! All nodes of all trees live in one contiguous `Vec` of 16-byte [`FlatNode`]s
//! with absolute child indices. A leaf stores its weight inline and points to
//! itself, so stepping a leaf is a no-op: [`FlatEnsemble::eval_batch`] uses that
//! to walk [`LANES`] trees per row in lockstep for a fixed number of steps (the
//! group's maximum depth) without per-lane termination branches.

use std::collections::HashMap;

pub use super::attributes::{MODE_BRANCH_LEQ, MODE_LEAF, TreeEnsembleAttributes};
use super::complete::CompleteForest;

/// Number of trees walked in lockstep per row by [`FlatEnsemble::eval_batch`].
pub const LANES: usize = 8;
/// Rows at most this wide (a power of two) take the padded fast path of
/// [`FlatEnsemble::eval_batch`].
pub const PADDED_WIDTH: usize = 64;

/// Largest accepted depth of a tree (root at depth 0). LightGBM trees grown with
/// `num_leaves <= 131072` and no `max_depth` can in theory reach `num_leaves - 1`,
/// but real models are far below this bound; it exists to bound evaluation work.
pub const MAX_DEPTH: usize = 4096;

const LEAF_BIT: u32 = 1 << 31;
const MISSING_LEFT_BIT: u32 = 1 << 30;
const FEATURE_MASK: u32 = MISSING_LEFT_BIT - 1;

/// Errors raised while building a [`FlatEnsemble`] from ONNX attributes.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EnsembleError {
    /// Two attributes that must have one entry per node (or per target) differ in length.
    #[error("attribute `{attr}` has {got} entries, expected {expected} (one per {per})")]
    LengthMismatch {
        /// Offending attribute.
        attr: &'static str,
        /// Its length.
        got: usize,
        /// The required length.
        expected: usize,
        /// What each entry describes (`node` or `target`).
        per: &'static str,
    },
    /// The ensemble has no node at all.
    #[error("the ensemble has no nodes")]
    Empty,
    /// A node mode other than `BRANCH_LEQ` or `LEAF`.
    #[error("node {node} of tree {tree} has mode `{mode}`; only BRANCH_LEQ and LEAF are supported")]
    UnsupportedMode {
        /// Tree id.
        tree: i64,
        /// Node id.
        node: i64,
        /// The refused mode.
        mode: String,
    },
    /// An attribute has a value outside the supported subset.
    #[error("attribute `{attr}` = {value} is not supported ({reason})")]
    Unsupported {
        /// Attribute name.
        attr: &'static str,
        /// Its value, printed.
        value: String,
        /// What is supported instead.
        reason: &'static str,
    },
    /// A negative or too large id / index.
    #[error("attribute `{attr}` holds an invalid value {value} at index {index}")]
    BadIndex {
        /// Attribute name.
        attr: &'static str,
        /// Entry index in the attribute.
        index: usize,
        /// The value.
        value: i64,
    },
    /// The same `(tree, node)` id is declared twice.
    #[error("node {node} of tree {tree} is declared twice")]
    DuplicateNode {
        /// Tree id.
        tree: i64,
        /// Node id.
        node: i64,
    },
    /// A tree has no node with id 0 (its root).
    #[error("tree {tree} has no root (node id 0)")]
    MissingRoot {
        /// Tree id.
        tree: i64,
    },
    /// A child or target refers to a node that does not exist in its tree.
    #[error("tree {tree}: `{attr}` refers to missing node {node}")]
    DanglingReference {
        /// Tree id.
        tree: i64,
        /// Attribute holding the reference.
        attr: &'static str,
        /// Node id referred to.
        node: i64,
    },
    /// A target entry points at a branch node rather than a leaf.
    #[error("tree {tree}: target entry points at branch node {node}")]
    TargetOnBranch {
        /// Tree id.
        tree: i64,
        /// Node id.
        node: i64,
    },
    /// A node is reachable twice (a DAG or a cycle) or a node is unreachable from the root.
    #[error("tree {tree} is not a tree: {reason}")]
    NotATree {
        /// Tree id.
        tree: i64,
        /// Details.
        reason: &'static str,
    },
    /// A tree is deeper than [`MAX_DEPTH`].
    #[error("tree {tree} is deeper than {MAX_DEPTH}")]
    TooDeep {
        /// Tree id.
        tree: i64,
    },
    /// A threshold is NaN (the comparison would never be true).
    #[error("node {node} of tree {tree} has a NaN threshold")]
    NanThreshold {
        /// Tree id.
        tree: i64,
        /// Node id.
        node: i64,
    },
}

/// One node of a [`FlatEnsemble`] (16 bytes).
///
/// For a branch: `meta` holds the feature index (low 30 bits) and the
/// missing-goes-left bit (bit 30); `value` is the threshold; `left`/`right` are
/// absolute indices of the true/false children. For a leaf: bit 31 of `meta`
/// is set, the feature index is 0, `value` is the leaf weight and both
/// children are the leaf's own index.
#[derive(Debug, Clone, Copy)]
pub struct FlatNode {
    meta: u32,
    value: f32,
    left: u32,
    right: u32,
}

impl FlatNode {
    /// Whether this node is a leaf.
    pub fn is_leaf(&self) -> bool {
        self.meta & LEAF_BIT != 0
    }
    /// Feature (input column) index of a branch; 0 for a leaf.
    pub fn feature(&self) -> usize {
        (self.meta & FEATURE_MASK) as usize
    }
    /// Whether a NaN input takes the true (left) child.
    pub fn missing_goes_left(&self) -> bool {
        self.meta & MISSING_LEFT_BIT != 0
    }
    /// Threshold of a branch, weight of a leaf.
    pub fn value(&self) -> f32 {
        self.value
    }
    /// Absolute index of the true (left) child; own index for a leaf.
    pub fn left(&self) -> usize {
        self.left as usize
    }
    /// Absolute index of the false (right) child; own index for a leaf.
    pub fn right(&self) -> usize {
        self.right as usize
    }

    /// [`FlatNode::step`] on a row padded to [`PADDED_WIDTH`]: the masked
    /// index needs no bounds check.
    #[inline(always)]
    fn step_padded(&self, row: &[f32; PADDED_WIDTH]) -> u32 {
        let x = row[self.feature() & (PADDED_WIDTH - 1)];
        let go_left = (x <= self.value) | (x.is_nan() & self.missing_goes_left());
        if go_left { self.left } else { self.right }
    }

    /// One step of the walk: the index of the next node (own index for a leaf).
    #[inline(always)]
    fn step(&self, row: &[f32]) -> u32 {
        let x = row[self.feature()];
        let go_left = (x <= self.value) | (x.is_nan() & self.missing_goes_left());
        if go_left { self.left } else { self.right }
    }
}

/// A group of up to [`LANES`] consecutive trees walked in lockstep.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Group {
    /// Index of the first tree of the group in `roots`.
    first: usize,
    /// Number of trees in the group (1..=LANES).
    len: usize,
    /// Maximum depth over the group's trees: steps needed to reach every leaf.
    depth: usize,
}

/// A validated single-output tree ensemble with all nodes in one contiguous vector.
///
/// Build it with [`FlatEnsemble::from_attributes`]. Cloning copies the nodes;
/// the tract op shares one instance through an `Arc`.
#[derive(Debug, Clone)]
pub struct FlatEnsemble {
    nodes: Vec<FlatNode>,
    roots: Vec<u32>,
    groups: Vec<Group>,
    n_features: usize,
    /// The complete-tree layout, when the ensemble fits its limits.
    complete: Option<CompleteForest>,
}

impl PartialEq for FlatEnsemble {
    fn eq(&self, other: &Self) -> bool {
        self.roots == other.roots
            && self.n_features == other.n_features
            && self.groups == other.groups
            && self.nodes.len() == other.nodes.len()
            && self.nodes.iter().zip(&other.nodes).all(|(a, b)| {
                a.meta == b.meta
                    && a.value.to_bits() == b.value.to_bits()
                    && a.left == b.left
                    && a.right == b.right
            })
    }
}

/// Bitwise equality (thresholds and weights compared by bit pattern), so `Eq` holds.
impl Eq for FlatEnsemble {}

/// DFS stack entry: (attribute index, depth, parent flat index and whether this is its left child).
type StackEntry = (usize, usize, Option<(usize, bool)>);

fn check_len<T>(
    attr: &'static str,
    v: &[T],
    expected: usize,
    per: &'static str,
) -> Result<(), EnsembleError> {
    if v.len() != expected {
        return Err(EnsembleError::LengthMismatch {
            attr,
            got: v.len(),
            expected,
            per,
        });
    }
    Ok(())
}

fn non_negative(attr: &'static str, index: usize, value: i64) -> Result<u32, EnsembleError> {
    u32::try_from(value)
        .ok()
        .filter(|v| *v <= FEATURE_MASK)
        .ok_or(EnsembleError::BadIndex { attr, index, value })
}

impl FlatEnsemble {
    /// Validates ONNX `TreeEnsembleRegressor` attributes and flattens them.
    ///
    /// Trees are laid out in ascending tree-id order, each in depth-first
    /// pre-order from its root (node id 0).
    ///
    /// # Errors
    /// [`EnsembleError`] when the attributes are inconsistent (lengths, dangling
    /// or duplicate ids, non-tree shapes, depth over [`MAX_DEPTH`], NaN
    /// thresholds) or outside the supported subset (modes other than
    /// `BRANCH_LEQ`/`LEAF`, `n_targets != 1`, `target_ids != 0`, aggregate other
    /// than `SUM`, post-transform other than `NONE`, non-zero base values).
    pub fn from_attributes(a: &TreeEnsembleAttributes) -> Result<Self, EnsembleError> {
        let n = a.nodes_nodeids.len();
        if n == 0 {
            return Err(EnsembleError::Empty);
        }
        check_len("nodes_treeids", &a.nodes_treeids, n, "node")?;
        check_len("nodes_featureids", &a.nodes_featureids, n, "node")?;
        check_len("nodes_values", &a.nodes_values, n, "node")?;
        check_len("nodes_modes", &a.nodes_modes, n, "node")?;
        check_len("nodes_truenodeids", &a.nodes_truenodeids, n, "node")?;
        check_len("nodes_falsenodeids", &a.nodes_falsenodeids, n, "node")?;
        if !a.nodes_missing_value_tracks_true.is_empty() {
            check_len(
                "nodes_missing_value_tracks_true",
                &a.nodes_missing_value_tracks_true,
                n,
                "node",
            )?;
        }
        let t = a.target_nodeids.len();
        check_len("target_treeids", &a.target_treeids, t, "target")?;
        check_len("target_ids", &a.target_ids, t, "target")?;
        check_len("target_weights", &a.target_weights, t, "target")?;
        if a.n_targets != 1 {
            return Err(EnsembleError::Unsupported {
                attr: "n_targets",
                value: a.n_targets.to_string(),
                reason: "only a single output is supported",
            });
        }
        if let Some(agg) = &a.aggregate_function
            && agg != "SUM"
        {
            return Err(EnsembleError::Unsupported {
                attr: "aggregate_function",
                value: agg.clone(),
                reason: "only SUM is supported",
            });
        }
        if let Some(pt) = &a.post_transform
            && pt != "NONE"
        {
            return Err(EnsembleError::Unsupported {
                attr: "post_transform",
                value: pt.clone(),
                reason: "only NONE is supported; apply Sigmoid as a separate node",
            });
        }
        if a.base_values.iter().any(|b| *b != 0.0) || a.base_values.len() > 1 {
            return Err(EnsembleError::Unsupported {
                attr: "base_values",
                value: format!("{:?}", a.base_values),
                reason: "base values must be absent or a single zero",
            });
        }
        if let Some((i, id)) = a.target_ids.iter().enumerate().find(|(_, id)| **id != 0) {
            return Err(EnsembleError::BadIndex {
                attr: "target_ids",
                index: i,
                value: *id,
            });
        }

        // (tree, node) -> attribute index
        let mut by_id: HashMap<(i64, i64), usize> = HashMap::with_capacity(n);
        let mut tree_ids: Vec<i64> = Vec::new();
        for i in 0..n {
            let (tree, node) = (a.nodes_treeids[i], a.nodes_nodeids[i]);
            if tree < 0 {
                return Err(EnsembleError::BadIndex {
                    attr: "nodes_treeids",
                    index: i,
                    value: tree,
                });
            }
            if node < 0 {
                return Err(EnsembleError::BadIndex {
                    attr: "nodes_nodeids",
                    index: i,
                    value: node,
                });
            }
            if by_id.insert((tree, node), i).is_some() {
                return Err(EnsembleError::DuplicateNode { tree, node });
            }
            tree_ids.push(tree);
            match a.nodes_modes[i].as_str() {
                MODE_LEAF => {}
                MODE_BRANCH_LEQ => {
                    non_negative("nodes_featureids", i, a.nodes_featureids[i])?;
                    if a.nodes_values[i].is_nan() {
                        return Err(EnsembleError::NanThreshold { tree, node });
                    }
                }
                other => {
                    return Err(EnsembleError::UnsupportedMode {
                        tree,
                        node,
                        mode: other.to_string(),
                    });
                }
            }
        }
        tree_ids.sort_unstable();
        tree_ids.dedup();

        // Leaf weights, summed per leaf in attribute order.
        let mut leaf_weight: HashMap<(i64, i64), f32> = HashMap::new();
        for k in 0..t {
            let key = (a.target_treeids[k], a.target_nodeids[k]);
            let Some(&i) = by_id.get(&key) else {
                return Err(EnsembleError::DanglingReference {
                    tree: key.0,
                    attr: "target_nodeids",
                    node: key.1,
                });
            };
            if a.nodes_modes[i] != MODE_LEAF {
                return Err(EnsembleError::TargetOnBranch {
                    tree: key.0,
                    node: key.1,
                });
            }
            *leaf_weight.entry(key).or_insert(0.0) += a.target_weights[k];
        }

        let mut nodes: Vec<FlatNode> = Vec::with_capacity(n);
        let mut roots: Vec<u32> = Vec::with_capacity(tree_ids.len());
        let mut depths: Vec<usize> = Vec::with_capacity(tree_ids.len());
        let mut max_feature: usize = 0;
        // attribute index -> flat index, to detect nodes reached twice
        let mut placed: Vec<Option<u32>> = vec![None; n];
        for &tree in &tree_ids {
            let Some(&root) = by_id.get(&(tree, 0)) else {
                return Err(EnsembleError::MissingRoot { tree });
            };
            let before = nodes.len();
            // Explicit stack of (attribute index, depth, parent flat index, is_left).
            let mut stack: Vec<StackEntry> = vec![(root, 0, None)];
            let mut depth_max = 0;
            while let Some((i, depth, parent)) = stack.pop() {
                if depth > MAX_DEPTH {
                    return Err(EnsembleError::TooDeep { tree });
                }
                if placed[i].is_some() {
                    return Err(EnsembleError::NotATree {
                        tree,
                        reason: "a node is reached twice",
                    });
                }
                let flat = u32::try_from(nodes.len()).map_err(|_| EnsembleError::BadIndex {
                    attr: "nodes_nodeids",
                    index: i,
                    value: i64::MAX,
                })?;
                placed[i] = Some(flat);
                depth_max = depth_max.max(depth);
                if let Some((p, is_left)) = parent {
                    if is_left {
                        nodes[p].left = flat;
                    } else {
                        nodes[p].right = flat;
                    }
                }
                if a.nodes_modes[i] == MODE_LEAF {
                    let w = leaf_weight
                        .get(&(tree, a.nodes_nodeids[i]))
                        .copied()
                        .unwrap_or(0.0);
                    nodes.push(FlatNode {
                        meta: LEAF_BIT,
                        value: w,
                        left: flat,
                        right: flat,
                    });
                } else {
                    let feature = non_negative("nodes_featureids", i, a.nodes_featureids[i])?;
                    max_feature = max_feature.max(feature as usize);
                    let missing_left = a
                        .nodes_missing_value_tracks_true
                        .get(i)
                        .is_some_and(|v| *v != 0);
                    let meta = feature | if missing_left { MISSING_LEFT_BIT } else { 0 };
                    nodes.push(FlatNode {
                        meta,
                        value: a.nodes_values[i],
                        left: flat,
                        right: flat,
                    });
                    let child = |attr: &'static str, id: i64| {
                        by_id
                            .get(&(tree, id))
                            .copied()
                            .ok_or(EnsembleError::DanglingReference {
                                tree,
                                attr,
                                node: id,
                            })
                    };
                    let l = child("nodes_truenodeids", a.nodes_truenodeids[i])?;
                    let r = child("nodes_falsenodeids", a.nodes_falsenodeids[i])?;
                    let p = nodes.len() - 1;
                    // Push right first so the left subtree is laid out right after its parent.
                    stack.push((r, depth + 1, Some((p, false))));
                    stack.push((l, depth + 1, Some((p, true))));
                }
            }
            let tree_nodes = nodes.len() - before;
            let declared = a.nodes_treeids.iter().filter(|t| **t == tree).count();
            if tree_nodes != declared {
                return Err(EnsembleError::NotATree {
                    tree,
                    reason: "some nodes are unreachable from the root",
                });
            }
            // `before` fits in u32: nodes.len() was checked when the root was placed.
            roots.push(before as u32);
            depths.push(depth_max);
        }
        let complete =
            CompleteForest::build(&nodes, &roots, depths.iter().copied().max().unwrap_or(0));
        let groups = (0..roots.len())
            .step_by(LANES)
            .map(|first| {
                let len = LANES.min(roots.len() - first);
                let depth = depths[first..first + len]
                    .iter()
                    .copied()
                    .max()
                    .unwrap_or(0);
                Group { first, len, depth }
            })
            .collect();
        Ok(FlatEnsemble {
            nodes,
            roots,
            groups,
            n_features: max_feature + 1,
            complete,
        })
    }

    /// Minimum number of input columns: 1 + the largest feature index used by
    /// a branch (at least 1). Rows passed to the evaluators must be at least
    /// this wide.
    pub fn n_features(&self) -> usize {
        self.n_features
    }

    /// Number of trees.
    pub fn n_trees(&self) -> usize {
        self.roots.len()
    }

    /// Whether [`FlatEnsemble::eval_batch`] uses the
    /// [complete-tree layout](super::complete) (shallow trees, features
    /// below 64) rather than the pointer walk.
    pub fn uses_complete_layout(&self) -> bool {
        self.complete.is_some()
    }

    /// The same ensemble evaluated by the pointer walk only (for
    /// benchmarks and tests comparing the two evaluators).
    pub fn without_complete_layout(mut self) -> Self {
        self.complete = None;
        self
    }

    /// All nodes, trees in ascending tree-id order, each in depth-first pre-order.
    pub fn nodes(&self) -> &[FlatNode] {
        &self.nodes
    }

    /// Reference evaluator: walks each tree from its root with explicit
    /// branches and sums the leaf weights in `f32`, tree by tree.
    ///
    /// `row` holds one row's features (`row.len() >= self.n_features()`).
    /// This is the test oracle for [`FlatEnsemble::eval_batch`].
    ///
    /// # Panics
    /// If `row` is narrower than [`FlatEnsemble::n_features`] (callers check widths).
    pub fn eval_reference(&self, row: &[f32]) -> f32 {
        let mut sum = 0.0f32;
        for &root in &self.roots {
            let mut node = &self.nodes[root as usize];
            while !node.is_leaf() {
                let x = row[node.feature()];
                let next = if x.is_nan() {
                    if node.missing_goes_left() {
                        node.left()
                    } else {
                        node.right()
                    }
                } else if x <= node.value() {
                    node.left()
                } else {
                    node.right()
                };
                node = &self.nodes[next];
            }
            sum += node.value();
        }
        sum
    }

    /// Fast evaluator: `rows` is `N × F` row-major `f32` (`F = rows.len() / out.len()`),
    /// `out` receives one raw score per row.
    ///
    /// No allocation. Shallow ensembles use the
    /// [complete-tree layout](super::complete); otherwise groups of [`LANES`]
    /// trees are walked in lockstep for the group's maximum depth (leaves
    /// point to themselves, so finished lanes idle), the branch direction is
    /// computed as a select. Results are bit-identical to
    /// [`FlatEnsemble::eval_reference`] (same summation order).
    ///
    /// If `out` is empty nothing happens. If `rows.len()` is not a multiple of
    /// `out.len()` or the row width is below [`FlatEnsemble::n_features`], `out`
    /// is filled with NaN (callers validate shapes first; this keeps the hot
    /// path free of error values and panics).
    pub fn eval_batch(&self, rows: &[f32], out: &mut [f32]) {
        if out.is_empty() {
            return;
        }
        let width = rows.len() / out.len();
        if width * out.len() != rows.len() || width < self.n_features {
            out.fill(f32::NAN);
            return;
        }
        if let Some(c) = &self.complete {
            c.eval_batch(rows, width, out);
            return;
        }
        if self.n_features <= PADDED_WIDTH && width <= PADDED_WIDTH {
            // Rows copied into fixed 64-wide arrays: the feature index is
            // masked to 0..64, so the compiler drops the bounds check on
            // every step; two rows are walked together (2 × LANES
            // independent chains) to hide load latency.
            let mut a = [0f32; PADDED_WIDTH];
            let mut b = [0f32; PADDED_WIDTH];
            let mut pairs = rows.chunks_exact(2 * width).zip(out.chunks_exact_mut(2));
            for (two, o) in &mut pairs {
                a[..width].copy_from_slice(&two[..width]);
                b[..width].copy_from_slice(&two[width..]);
                let (sa, sb) = self.eval_two_padded(&a, &b);
                o[0] = sa;
                o[1] = sb;
            }
            if out.len() % 2 == 1
                && let Some(o) = out.last_mut()
            {
                *o = self.eval_row_lockstep(&rows[rows.len() - width..]);
            }
            return;
        }
        for (row, o) in rows.chunks_exact(width).zip(out.iter_mut()) {
            *o = self.eval_row_lockstep(row);
        }
    }

    #[inline]
    fn eval_two_padded(&self, a: &[f32; PADDED_WIDTH], b: &[f32; PADDED_WIDTH]) -> (f32, f32) {
        let (mut sa, mut sb) = (0.0f32, 0.0f32);
        for g in &self.groups {
            let mut ia = [0u32; LANES];
            let roots = &self.roots[g.first..g.first + g.len];
            ia[..g.len].copy_from_slice(roots);
            let mut ib = ia;
            for _ in 0..g.depth {
                for lane in 0..LANES {
                    ia[lane] = self.nodes[ia[lane] as usize].step_padded(a);
                    ib[lane] = self.nodes[ib[lane] as usize].step_padded(b);
                }
            }
            for lane in 0..g.len {
                sa += self.nodes[ia[lane] as usize].value;
                sb += self.nodes[ib[lane] as usize].value;
            }
        }
        (sa, sb)
    }

    #[inline]
    fn eval_row_lockstep(&self, row: &[f32]) -> f32 {
        let mut sum = 0.0f32;
        for g in &self.groups {
            let mut idx = [0u32; LANES];
            let roots = &self.roots[g.first..g.first + g.len];
            idx[..g.len].copy_from_slice(roots);
            if g.len == LANES {
                for _ in 0..g.depth {
                    for lane in idx.iter_mut() {
                        *lane = self.nodes[*lane as usize].step(row);
                    }
                }
            } else {
                for _ in 0..g.depth {
                    for lane in idx[..g.len].iter_mut() {
                        *lane = self.nodes[*lane as usize].step(row);
                    }
                }
            }
            for lane in &idx[..g.len] {
                sum += self.nodes[*lane as usize].value;
            }
        }
        sum
    }
}

#[cfg(test)]
#[path = "ensemble_tests.rs"]
mod tests;
