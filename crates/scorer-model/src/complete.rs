//! Complete-tree layout of a tree ensemble: the fast path of
//! [`FlatEnsemble::eval_batch`](super::ensemble::FlatEnsemble::eval_batch)
//! for ensembles of shallow trees (issue #6).
//!
//! Every tree is padded to a complete binary tree of the ensemble's maximum
//! depth `d` and stored in implicit-heap (level) order: the children of node
//! `i` are `2i + 1` (true, `x <= t`) and `2i + 2` (false), the `2^d` leaves
//! follow the `2^d − 1` internal nodes, and each tree takes a power-of-two
//! stride `S = 2^(d+1)` (one slot unused) so that a masked index needs no
//! bounds check. A leaf above depth `d` becomes a pass-through node that
//! sends every input to its true child (threshold `+∞`), and its weight is
//! copied to every leaf below it. A walk is then exactly `d` predicated
//! steps, `i = 2i + 1 + (x > t)`, with no child pointers and no branch, and
//! several walks run interleaved so that their loads overlap: [`ROW_LANES`]
//! rows through one tree, or one row through [`TREE_LANES`] trees. These are
//! the "predication" and "vectorization" (interleaved instances) techniques
//! of Asadi, Lin and de Vries, *Runtime Optimizations for Tree-Based Machine
//! Learning Models*, IEEE TKDE 26(9), 2014.
//!
//! Missing values cost nothing per step: each row is copied once into a
//! buffer holding every feature twice, column `2f` with NaN replaced by `−∞`
//! and column `2f + 1` with NaN replaced by `+∞`, and each node reads the
//! copy matching its NaN direction (`−∞ <= t` always goes to the true child,
//! `+∞ <= t` never does for a finite or `−∞` threshold). A branch with
//! threshold `+∞` whose NaN goes to the false child cannot be expressed
//! this way, so such an ensemble keeps the pointer walk.
//!
//! Per row, leaf weights are added in `f32` in ascending tree order, exactly
//! as [`FlatEnsemble::eval_reference`](super::ensemble::FlatEnsemble::eval_reference)
//! does, so the two agree bit for bit.
//!
//! Padding costs memory exponential in `d`, so the layout is built only when
//! `d <=` [`COMPLETE_MAX_DEPTH`], the padded ensemble has at most
//! [`COMPLETE_MAX_NODES`] nodes, and every feature index is below
//! [`ROW_WIDTH`]. The shipped model (50 trees, depth ≤ 6) takes
//! 50 × 128 nodes × 8 bytes = 51 KB.

use std::cell::RefCell;

use super::ensemble::FlatNode;

/// Deepest ensemble (root at depth 0) laid out as complete trees.
pub const COMPLETE_MAX_DEPTH: usize = 10;
/// Most nodes (8 bytes each) a padded ensemble may take: 8 MiB.
pub const COMPLETE_MAX_NODES: usize = 1 << 20;
/// Feature indices must be below this to use the layout.
pub const ROW_WIDTH: usize = 64;
/// Rows walked together through one tree by the batch kernel.
pub const ROW_LANES: usize = 8;
/// Trees walked together for one row by the single-row kernel.
pub const TREE_LANES: usize = 8;
/// A batch remainder at least this long is walked as one padded
/// [`ROW_LANES`] chunk; shorter ones row by row.
const CHUNK_REMAINDER_MIN: usize = 3;
/// Width of a row buffer: each feature twice (NaN as −∞, NaN as +∞), the
/// `2 × ROW_WIDTH` columns used padded to 256 so
/// that a `u8` column indexes it with no bounds check and no mask.
const BUF: usize = 256;
const _: () = assert!(2 * ROW_WIDTH <= BUF && BUF == u8::MAX as usize + 1);

type RowBuf = [f32; BUF];

/// One node (8 bytes): threshold or leaf weight, and the row-buffer column
/// it reads (`2 × feature + 1` when NaN goes to the false side).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Node {
    value: f32,
    column: u8,
}

impl Node {
    /// Sends every input, NaN included, to the true child.
    const PASS: Node = Node {
        value: f32::INFINITY,
        column: 0,
    };

    /// 1 when the walk goes to the false (right) child.
    ///
    /// Written `!(x <= t)` rather than `x > t`: the two agree here (the row
    /// buffer holds no NaN and NaN thresholds are refused at load), and on
    /// x86-64 the unordered form lets the compare read the row value straight
    /// from memory and fold the `+ 1` into the index update: 7% fewer
    /// instructions per 16-row batch, measured under callgrind.
    #[inline(always)]
    #[allow(clippy::neg_cmp_op_on_partial_ord)] // deliberate: see above
    fn right(self, row: &RowBuf) -> usize {
        usize::from(!(row[usize::from(self.column)] <= self.value))
    }
}

/// A tree ensemble in complete-tree layout; see the module docs.
#[derive(Debug, Clone, PartialEq)]
pub struct CompleteForest {
    depth: usize,
    n_trees: usize,
    /// `n_trees × 2^(depth+1)` nodes.
    nodes: Vec<Node>,
}

impl CompleteForest {
    /// Lays out the trees rooted at `roots` (indices into `nodes`, a
    /// validated [`FlatNode`] array whose trees are at most `depth` deep).
    ///
    /// Returns `None` when the ensemble is outside the layout's limits
    /// (module docs), in which case callers use the pointer walk.
    pub(super) fn build(nodes: &[FlatNode], roots: &[u32], depth: usize) -> Option<Self> {
        if depth > COMPLETE_MAX_DEPTH {
            return None;
        }
        let stride = 1usize << (depth + 1);
        let total = stride.checked_mul(roots.len())?;
        let unsupported = |n: &FlatNode| {
            !n.is_leaf()
                && (n.feature() >= ROW_WIDTH
                    || (n.value() == f32::INFINITY && !n.missing_goes_left()))
        };
        if total > COMPLETE_MAX_NODES || nodes.iter().any(unsupported) {
            return None;
        }
        let mut out = vec![Node::PASS; total];
        let first_leaf = stride / 2 - 1;
        for (t, &root) in roots.iter().enumerate() {
            let tree = &mut out[t * stride..(t + 1) * stride];
            // (flat index, heap index)
            let mut stack = vec![(root as usize, 0usize)];
            while let Some((f, h)) = stack.pop() {
                let node = nodes.get(f)?;
                let slot = tree.get_mut(h)?;
                if node.is_leaf() {
                    if h >= first_leaf {
                        *slot = Node {
                            value: node.value(),
                            column: 0,
                        };
                    } else {
                        stack.push((f, 2 * h + 1));
                        stack.push((f, 2 * h + 2));
                    }
                } else {
                    if h >= first_leaf {
                        // Deeper than `depth`: the caller's depth was wrong.
                        return None;
                    }
                    // feature < ROW_WIDTH (checked above), so the column fits a u8.
                    let column =
                        u8::try_from(2 * node.feature() + usize::from(!node.missing_goes_left()))
                            .ok()?;
                    *slot = Node {
                        value: node.value(),
                        column,
                    };
                    stack.push((node.left(), 2 * h + 1));
                    stack.push((node.right(), 2 * h + 2));
                }
            }
        }
        Some(CompleteForest {
            depth,
            n_trees: roots.len(),
            nodes: out,
        })
    }

    /// Padded depth: steps per walk.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// Number of trees.
    pub fn n_trees(&self) -> usize {
        self.n_trees
    }

    /// Raw scores of `out.len()` rows of `width` features each (`rows` is
    /// `out.len() × width` f32, row-major, `width >= 1`). No allocation.
    ///
    /// Precondition (checked by [`FlatEnsemble::eval_batch`](super::ensemble::FlatEnsemble::eval_batch),
    /// the only caller; asserted in debug builds): `rows.len() == out.len() * width`
    /// and `width` at least the ensemble's feature count. Otherwise `out` is
    /// filled with NaN rather than panicking.
    pub(super) fn eval_batch(&self, rows: &[f32], width: usize, out: &mut [f32]) {
        debug_assert_eq!(rows.len(), out.len() * width);
        if width == 0 || rows.len() != out.len() * width {
            out.fill(f32::NAN);
            return;
        }
        // One monomorphised kernel per stride, so the index mask is a
        // constant and needs no bounds check. The step count is passed as a
        // run-time value on purpose: with it constant, LLVM unrolls the walk
        // and keeps every lane's branch bits apart in registers, spilling
        // most of them (50% more instructions per step, measured on the
        // shipped model).
        let walk = Walk {
            rows,
            width,
            steps: self.depth,
        };
        match self.nodes.len().checked_div(self.n_trees) {
            Some(2) => walk.eval::<2>(&self.nodes, out),
            Some(4) => walk.eval::<4>(&self.nodes, out),
            Some(8) => walk.eval::<8>(&self.nodes, out),
            Some(16) => walk.eval::<16>(&self.nodes, out),
            Some(32) => walk.eval::<32>(&self.nodes, out),
            Some(64) => walk.eval::<64>(&self.nodes, out),
            Some(128) => walk.eval::<128>(&self.nodes, out),
            Some(256) => walk.eval::<256>(&self.nodes, out),
            Some(512) => walk.eval::<512>(&self.nodes, out),
            Some(1024) => walk.eval::<1024>(&self.nodes, out),
            Some(2048) => walk.eval::<2048>(&self.nodes, out),
            // No trees, or a stride `build` never makes.
            _ => out.fill(0.0),
        }
    }
}

/// Copies a row into its buffer: feature `f` at `2f` (NaN → −∞) and `2f + 1` (NaN → +∞).
#[inline]
fn fill(buf: &mut RowBuf, row: &[f32]) {
    for (pair, &x) in buf.chunks_exact_mut(2).zip(row.iter().take(ROW_WIDTH)) {
        if x.is_nan() {
            pair[0] = f32::NEG_INFINITY;
            pair[1] = f32::INFINITY;
        } else {
            pair[0] = x;
            pair[1] = x;
        }
    }
}

/// A batch to walk: `rows` holds `out.len()` rows of `width` features, and
/// each tree takes `steps` (the padded depth) steps.
#[derive(Clone, Copy)]
struct Walk<'a> {
    rows: &'a [f32],
    width: usize,
    steps: usize,
}

thread_local! {
    /// Row buffers reused across calls (8 KB: zeroing a fresh one cost a
    /// `memset` per call). Columns the batch does not fill keep older rows'
    /// values; no node reads them (every node's column is below twice the
    /// ensemble's feature count, and the caller checked the row width).
    static ROW_BUFS: RefCell<[RowBuf; ROW_LANES]> =
        const { RefCell::new([[0f32; BUF]; ROW_LANES]) };
}

/// Nodes per 64-byte cache line.
const NODES_PER_LINE: usize = 64 / std::mem::size_of::<Node>();

/// Reads one node per cache line of `nodes`, in address order, so that the
/// hardware prefetchers bring the whole ensemble in before the walk (see
/// [`super::warmth`], which decides when). Every line is read: touching one
/// in four left the in-service latency where it was without the read.
fn stream_in(nodes: &[Node]) {
    let mut acc = [0u32; 4];
    for block in nodes.chunks(4 * NODES_PER_LINE) {
        for (a, node) in acc.iter_mut().zip(block.iter().step_by(NODES_PER_LINE)) {
            *a ^= node.value.to_bits();
        }
    }
    std::hint::black_box(acc);
}

impl Walk<'_> {
    fn eval<const S: usize>(self, nodes: &[Node], out: &mut [f32]) {
        if super::warmth::take_stream_request() {
            stream_in(nodes);
        }
        ROW_BUFS.with(|bufs| match bufs.try_borrow_mut() {
            Ok(mut buf) => self.eval_in::<S>(nodes, out, &mut buf),
            // Not reachable (nothing inside borrows again); kept panic-free.
            Err(_) => self.eval_in::<S>(nodes, out, &mut [[0f32; BUF]; ROW_LANES]),
        });
    }

    fn eval_in<const S: usize>(
        self,
        nodes: &[Node],
        out: &mut [f32],
        buf: &mut [RowBuf; ROW_LANES],
    ) {
        let trees = nodes.as_chunks::<S>().0;
        let mut row_chunks = self.rows.chunks_exact(self.width * ROW_LANES);
        let mut out_chunks = out.chunks_exact_mut(ROW_LANES);
        for (chunk, o) in (&mut row_chunks).zip(&mut out_chunks) {
            for (b, row) in buf.iter_mut().zip(chunk.chunks_exact(self.width)) {
                fill(b, row);
            }
            o.copy_from_slice(&rows_through_trees::<S>(trees, buf, self.steps));
        }
        let rest = row_chunks.remainder();
        let out_rest = out_chunks.into_remainder();
        if out_rest.len() >= CHUNK_REMAINDER_MIN {
            for (b, row) in buf.iter_mut().zip(rest.chunks_exact(self.width)) {
                fill(b, row);
            }
            let sums = rows_through_trees::<S>(trees, buf, self.steps);
            out_rest.copy_from_slice(&sums[..out_rest.len()]);
        } else {
            for (o, row) in out_rest.iter_mut().zip(rest.chunks_exact(self.width)) {
                fill(&mut buf[0], row);
                *o = row_through_trees::<S>(trees, &buf[0], self.steps);
            }
        }
    }
}

/// [`ROW_LANES`] rows through each tree in turn, `steps` steps each.
#[inline]
fn rows_through_trees<const S: usize>(
    trees: &[[Node; S]],
    rows: &[RowBuf; ROW_LANES],
    steps: usize,
) -> [f32; ROW_LANES] {
    let mut sums = [0f32; ROW_LANES];
    for tree in trees {
        let mut idx = [0usize; ROW_LANES];
        for _ in 0..steps {
            for (i, row) in idx.iter_mut().zip(rows) {
                *i = 2 * *i + 1 + tree[*i & (S - 1)].right(row);
            }
        }
        for (s, i) in sums.iter_mut().zip(idx) {
            *s += tree[i & (S - 1)].value;
        }
    }
    sums
}

/// One row through [`TREE_LANES`] trees at a time, `steps` steps each.
#[inline]
fn row_through_trees<const S: usize>(trees: &[[Node; S]], row: &RowBuf, steps: usize) -> f32 {
    let (groups, rest) = trees.as_chunks::<TREE_LANES>();
    let mut sum = 0f32;
    for group in groups {
        let mut idx = [0usize; TREE_LANES];
        for _ in 0..steps {
            for (i, tree) in idx.iter_mut().zip(group) {
                *i = 2 * *i + 1 + tree[*i & (S - 1)].right(row);
            }
        }
        for (i, tree) in idx.into_iter().zip(group) {
            sum += tree[i & (S - 1)].value;
        }
    }
    for tree in rest {
        let mut i = 0;
        for _ in 0..steps {
            i = 2 * i + 1 + tree[i & (S - 1)].right(row);
        }
        sum += tree[i & (S - 1)].value;
    }
    sum
}

#[cfg(test)]
#[path = "complete_tests.rs"]
mod tests;
