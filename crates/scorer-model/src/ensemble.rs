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

impl FlatEnsemble {
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

#[path = "ensemble_build.rs"]
mod build;
pub use build::EnsembleError;

#[cfg(test)]
#[path = "ensemble_tests.rs"]
mod tests;
