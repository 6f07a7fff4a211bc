//! Building a [`FlatEnsemble`] from ONNX-ML `TreeEnsembleRegressor`
//! attributes: validation of the supported subset, then the depth-first
//! flattening (see [`super`] for the layout).

use std::collections::HashMap;

use super::*;

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
}
