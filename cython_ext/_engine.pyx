# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Routing rows through a Forest (all at once or lazily, as features become known) and per-row prediction
cost, without the GIL; the structure check that makes routing safe.

The routing step itself is _routing.pxd's child(). Rows are processed in blocks of BLOCK rows, tree by
tree: one tree's nodes stay in cache while the block's rows go through it, which is what makes this
faster than LightGBM's row-by-row predictor. The kernels trust the arrays they are given: Forest
(lightgbm_cegb/core/forest.py) checks every index once, with check_structure() below for the children.
"""

from cython.parallel cimport parallel, prange, threadid
from libc.math cimport exp
from libc.string cimport memset

import numpy as np

from _routing cimport CATEGORICAL_MASK, Ensemble, Node, child, zero_threshold
from _typedefs cimport float64, int32, int64, uint8, uint32, uint64

#: the bits of the NaN that marks a value not known yet in lazy routing (a quiet NaN with a payload: NaN
#: to numpy and LightGBM, and unlike the NaN numpy, LightGBM or a fetch produce)
UNKNOWN_BITS = 0x7FF8_0000_0BAD_F00D
cdef uint64 UNKNOWN = UNKNOWN_BITS


cdef extern from *:
    """
    static inline int ctz64(unsigned long long v) { return __builtin_ctzll(v); }
    """
    int ctz64(unsigned long long v) nogil

DEF BLOCK = 64


def check_structure(const int64[::1] node_offset, const int32[::1] left, const int32[::1] right):
    """Check the children of every tree and find each node's parent, in one depth-first pass per tree.

    Nodes of tree t are numbered here as internal node j -> j, leaf l -> num_internal + l (a tree of n
    internal nodes has n + 1 leaves). Returns (problem, tree, node, other, parent):
    problem 0: a tree (every node reached once from the root); 1: the child `other` of node `node` is
    out of range; 2: a cycle through node `node`; 3: node `node` is reached twice (from `other` and an
    earlier node); 4: node `node` is unreachable. 1 and 2 are checked in every tree first (routing is
    unsafe with them); 3 and 4, which LightGBM routes without harm, are reported for the first tree that
    has one. parent: int32 over all trees' nodes in that numbering (tree t's at node_offset[t] + t +
    ...): the parent that first reaches a node, -1 at roots and for unreachable nodes.
    """
    cdef int64 num_trees = node_offset.shape[0] - 1, t, n, base, top, j, c, u, k
    cdef int64 problem = 0, p_tree = -1, p_node = -1, p_other = -1, shape_problem = 0
    cdef int64 s_tree = -1, s_node = -1, s_other = -1
    cdef int64 total = node_offset[num_trees] * 2 + num_trees
    parent_ = np.full(max(total, 1), -1, dtype=np.int32)
    cdef int32[::1] parent = parent_
    state_ = np.zeros(max(total, 1), dtype=np.uint8)  # 0 unseen, 1 on the DFS stack, 2 done
    cdef uint8[::1] state = state_
    stack_ = np.zeros(max(int(np.max(np.diff(node_offset))) if num_trees else 1, 1) * 2, dtype=np.int64)
    cdef int64[::1] stack = stack_
    with nogil:
        for t in range(num_trees):
            n = node_offset[t + 1] - node_offset[t]
            base = node_offset[t] * 2 + t  # this tree's first slot in parent/state
            for j in range(2 * n):
                c = left[node_offset[t] + j // 2] if j % 2 == 0 else right[node_offset[t] + j // 2]
                if c >= n or c < -(n + 1):
                    problem, p_tree, p_node, p_other = 1, t, j // 2, c
                    break
            if problem:
                break
            if n == 0:
                state[base] = 2
                continue
            # iterative DFS; stack entries are node * 4 + (children visited so far: 0, 1 or 2); a node is
            # done (state 2) only when its whole subtree is, so that a child pointing to any ancestor on
            # the stack is seen as the cycle it is
            top = 0
            stack[0] = 0
            state[base] = 1
            while top >= 0:
                u = stack[top] >> 2
                k = stack[top] & 3
                if k == 2:
                    state[base + u] = 2
                    top -= 1
                    continue
                c = left[node_offset[t] + u] if k == 0 else right[node_offset[t] + u]
                stack[top] += 1
                j = c if c >= 0 else n + ~c  # the child's number in this tree
                if state[base + j] == 1:
                    problem, p_tree, p_node, p_other = 2, t, j, u
                    break
                if state[base + j] == 2:
                    if not shape_problem:
                        shape_problem, s_tree, s_node, s_other = 3, t, j, u
                    continue
                parent[base + j] = <int32> u
                if c >= 0:
                    state[base + j] = 1
                    top += 1
                    stack[top] = c * 4
                else:
                    state[base + j] = 2
            if problem:
                break
            if not shape_problem:
                for j in range(2 * n + 1):
                    if state[base + j] == 0:
                        shape_problem, s_tree, s_node, s_other = 4, t, j, -1
                        break
    if problem:
        return problem, p_tree, p_node, p_other, parent_
    return shape_problem, s_tree, s_node, s_other, parent_


cdef class FlatEnsemble:
    """The C view of a Forest's arrays (which it keeps alive)."""

    cdef Ensemble e
    cdef object arrays
    cdef object source  # the constructor's arguments, for __reduce__
    cdef readonly int64 num_trees
    cdef readonly int64 trees_per_iteration
    cdef readonly int64 num_features

    def __cinit__(self, const int64[::1] node_offset, const int32[::1] feature, const float64[::1] threshold,
                  const uint8[::1] decision, const int32[::1] left, const int32[::1] right,
                  const int64[::1] cat_offset, const int64[::1] cat_boundaries,
                  const uint32[::1] cat_threshold, int64 trees_per_iteration, bint drop_tiny, int64 num_features):
        cdef Py_ssize_t n = feature.shape[0], k
        cdef float64 zero = zero_threshold()
        self.source = (np.asarray(node_offset), np.asarray(feature), np.asarray(threshold), np.asarray(decision),
                       np.asarray(left), np.asarray(right), np.asarray(cat_offset), np.asarray(cat_boundaries),
                       np.asarray(cat_threshold), trees_per_iteration, drop_tiny, num_features)
        packed = np.zeros(max(n, 1) * sizeof(Node), dtype=np.uint8)
        cdef uint8[::1] packed_view = packed
        cdef Node* nodes = <Node*> &packed_view[0]
        for k in range(n):
            nodes[k].threshold = threshold[k]
            nodes[k].feature = feature[k]
            nodes[k].left = left[k]
            nodes[k].right = right[k]
            nodes[k].decision = decision[k]
            # only a numerical threshold in [-1e-35, 1e-35) tells x apart from 0.0 for |x| <= 1e-35
            nodes[k].zero_matters = (drop_tiny and not (decision[k] & CATEGORICAL_MASK)
                                     and -zero <= threshold[k] < zero)
        # keep the buffers referenced for as long as the pointers below are used
        self.arrays = (packed, node_offset, cat_offset, cat_boundaries, cat_threshold)
        self.num_trees = node_offset.shape[0] - 1
        self.trees_per_iteration = trees_per_iteration
        self.num_features = num_features
        self.e.nodes = nodes
        self.e.node_offset = &node_offset[0]
        self.e.cat_offset = &cat_offset[0] if cat_offset.shape[0] else NULL
        self.e.cat_boundaries = &cat_boundaries[0] if cat_boundaries.shape[0] else NULL
        self.e.cat_threshold = &cat_threshold[0] if cat_threshold.shape[0] else NULL
        self.e.num_trees = self.num_trees
        self.e.trees_per_iteration = trees_per_iteration

    def __reduce__(self):
        """Pickled as its arrays (it holds pointers into them): a model holding one pickles and copies."""
        return FlatEnsemble, self.source

    cdef void _check(self, const float64[:, ::1] X, int64 t0, int64 t1) except *:
        if X.shape[1] != self.num_features:
            raise ValueError(f"X has {X.shape[1]} columns, the forest {self.num_features} features")
        if not 0 <= t0 <= t1 <= self.num_trees:
            raise ValueError(f"trees {t0}..{t1} outside the forest's {self.num_trees}")

    cdef void _check_costs(self, const float64[::1] lazy, const float64[::1] split, const int32[::1] group_of,
                           const float64[::1] group_lazy) except *:
        cdef Py_ssize_t f
        if lazy.shape[0] != self.num_features or split.shape[0] != self.num_features or \
                group_of.shape[0] != self.num_features:
            raise ValueError(f"lazy and split costs and group ids need {self.num_features} values each")
        for f in range(group_of.shape[0]):
            if not -1 <= group_of[f] < group_lazy.shape[0]:
                raise ValueError(f"feature {f}'s group {group_of[f]} is not one of the {group_lazy.shape[0]} groups")

    def apply(self, const float64[:, ::1] X, int64 num_trees, int num_threads):
        """The leaf of each of the first num_trees trees that each row reaches: int32[n_rows, num_trees]."""
        self._check(X, 0, num_trees)
        cdef Py_ssize_t n = X.shape[0], n_cols = X.shape[1]
        out_arr = np.empty((n, num_trees), dtype=np.int32)
        if n == 0:
            return out_arr
        cdef int32[:, ::1] out = out_arr
        cdef const Ensemble* e = &self.e
        cdef Py_ssize_t block, i, start, stop
        cdef int64 t
        cdef int32 node
        cdef const Node* tree_nodes
        cdef const float64* x
        with nogil:
            for block in prange((n + BLOCK - 1) // BLOCK, schedule="static", num_threads=max(num_threads, 1)):
                start = block * BLOCK
                stop = min(start + BLOCK, n)
                for t in range(num_trees):
                    tree_nodes = e.nodes + e.node_offset[t]
                    if e.node_offset[t + 1] == e.node_offset[t]:
                        for i in range(start, stop):
                            out[i, t] = 0
                        continue
                    for i in range(start, stop):
                        x = &X[0, 0] + i * n_cols
                        node = 0
                        while node >= 0:
                            node = child(e, t, tree_nodes + node, x[tree_nodes[node].feature])
                        out[i, t] = ~node
        return out_arr

    def cost(self, const float64[:, ::1] X, int64 num_trees, const float64[::1] lazy,
             const float64[::1] split, const int32[::1] group_of, const float64[::1] group_lazy,
             bint per_iteration, int num_threads):
        """Per-row prediction cost of the first num_trees trees.

        A row pays lazy[f] the first time any node on its paths tests feature f, group_lazy[g] the first time
        one tests a member of group g (group_of[f] = g; -1: none), and split[f] for every node testing f that
        it traverses. Returns (acquisition[n], evaluation[n], rows_using[num_features + num_groups], curve)
        where curve[k] is the total cost of the rows after iteration k (None unless per_iteration).
        """
        self._check(X, 0, num_trees)
        self._check_costs(lazy, split, group_of, group_lazy)
        cdef Py_ssize_t n = X.shape[0]
        cdef Py_ssize_t n_features = lazy.shape[0] + group_lazy.shape[0]  # paid flags per row: features, groups
        cdef int n_slots = max(num_threads, 1)
        cdef int64 tpi = self.trees_per_iteration
        cdef int64 n_iter = (num_trees + tpi - 1) // tpi if per_iteration else 0
        acquisition_arr = np.zeros(n, dtype=np.float64)
        evaluation_arr = np.zeros(n, dtype=np.float64)
        # per-thread scratch: for each row of the current block, the features it has paid
        paid_arr = np.zeros((n_slots, BLOCK * n_features), dtype=np.uint8)
        rows_using_arr = np.zeros((n_slots, n_features), dtype=np.int64)
        curve_arr = np.zeros((n_slots, max(n_iter, 1)), dtype=np.float64)
        cdef float64[::1] acquisition = acquisition_arr
        cdef float64[::1] evaluation = evaluation_arr
        cdef uint8[:, ::1] paid_all = paid_arr
        cdef int64[:, ::1] rows_using = rows_using_arr
        cdef float64[:, ::1] curve = curve_arr
        cdef Py_ssize_t block, i, start, stop, slot, f
        cdef int64 it, t0, t1
        cdef float64 total
        cdef uint8* paid
        with nogil, parallel(num_threads=n_slots):
            slot = threadid()
            paid = &paid_all[slot, 0]
            for block in prange((n + BLOCK - 1) // BLOCK, schedule="static"):
                start = block * BLOCK
                stop = min(start + BLOCK, n)
                memset(paid, 0, BLOCK * n_features)
                if not per_iteration:
                    accumulate(&self.e, X, start, stop, 0, num_trees, lazy, split, group_of, group_lazy, paid,
                               acquisition, evaluation)
                else:
                    for it in range(n_iter):
                        t0 = it * tpi
                        t1 = min(t0 + tpi, num_trees)
                        accumulate(&self.e, X, start, stop, t0, t1, lazy, split, group_of, group_lazy, paid,
                                   acquisition, evaluation)
                        total = 0.0
                        for i in range(start, stop):
                            total = total + acquisition[i] + evaluation[i]
                        curve[slot, it] += total
                for i in range(start, stop):
                    for f in range(n_features):
                        rows_using[slot, f] += paid[(i - start) * n_features + f]
        curve_out = curve_arr.sum(axis=0)[:n_iter] if per_iteration else None
        return acquisition_arr, evaluation_arr, rows_using_arr.sum(axis=0), curve_out

    def cost_update(self, const float64[:, ::1] X, int64 t0, int64 t1, const float64[::1] lazy,
                    const float64[::1] split, const int32[::1] group_of, const float64[::1] group_lazy,
                    uint8[:, ::1] paid, float64[::1] acquisition, float64[::1] evaluation, int num_threads):
        """Add the cost of trees [t0, t1) to per-row state kept by the caller between calls (row i of X:
        paid[i, f] says it has paid feature f, paid[i, num_features + g] group g; acquisition[i],
        evaluation[i] its cost so far)."""
        self._check(X, t0, t1)
        self._check_costs(lazy, split, group_of, group_lazy)
        cdef Py_ssize_t n = X.shape[0]
        cdef Py_ssize_t block, start, stop
        if paid.shape[0] != n or paid.shape[1] != self.num_features + group_lazy.shape[0] or \
                acquisition.shape[0] != n or evaluation.shape[0] != n:
            raise ValueError("cost state arrays do not match the rows and features")
        if n == 0:
            return
        with nogil:
            for block in prange((n + BLOCK - 1) // BLOCK, schedule="static", num_threads=max(num_threads, 1)):
                start = block * BLOCK
                stop = min(start + BLOCK, n)
                accumulate(&self.e, X, start, stop, t0, t1, lazy, split, group_of, group_lazy, &paid[start, 0],
                           acquisition, evaluation)

    def advance(self, const float64[:, ::1] X, int32[:, ::1] state, uint64[:, ::1] pending,
                const uint64[::1] routed, const float64[::1] split, float64[::1] evaluation, uint8[:, ::1] need,
                int num_threads):
        """Lazy routing: move rows down the trees as far as their known values allow; a value not known yet is
        the NaN whose bits are UNKNOWN (any other NaN is a missing value).

        Rows go in blocks of 64: bit r of pending[b, t] says row 64 b + r is still inside tree t, where
        state[i, t] >= 0 is the node it stands at (< 0: the leaf ~state[i, t] it reached); only the rows
        whose bit is set in routed[b] move in this call. A row passing a node testing f pays split[f] to
        evaluation[i]; it stops at a node whose value it does not know and sets need[f, i] (need is zero on
        entry; by feature: a row of it lists the rows to fetch f for). Returns uint64[n_blocks]: the rows of
        each block that stopped in some tree."""
        cdef Py_ssize_t n = X.shape[0], n_features = X.shape[1], n_blocks = (n + 63) // 64, k
        cdef int64 num_trees = state.shape[1], t
        self._check(X, 0, num_trees)
        if split.shape[0] != n_features:
            raise ValueError(f"split costs need {n_features} values")
        if need.shape[0] != n_features or need.shape[1] != n or state.shape[0] != n or evaluation.shape[0] != n \
                or pending.shape[0] != n_blocks or pending.shape[1] != num_trees or routed.shape[0] != n_blocks:
            raise ValueError("lazy routing arrays do not match the rows, trees and features")
        blocked_arr = np.zeros(n_blocks, dtype=np.uint64)
        if n == 0:
            return blocked_arr
        cdef uint64[::1] blocked = blocked_arr
        cdef const Ensemble* e = &self.e
        cdef Py_ssize_t block, i
        cdef int32 node, f
        cdef const Node* tree_nodes
        cdef const Node* nd
        cdef const uint64* x
        cdef float64 value, paid
        cdef uint64 moving, rest, stopped, stopped_any, bit
        cdef uint64 last = (~(<uint64> 0)) >> (64 - (n - (n_blocks - 1) * 64))  # rows of the last block
        cdef bint has_split = False
        for k in range(n_features):
            has_split = has_split or split[k] != 0
        with nogil:
            # a block of 64 rows tree by tree (one tree's nodes stay in cache), visiting only its pending rows
            for block in prange(n_blocks, schedule="static", num_threads=max(num_threads, 1)):
                moving = routed[block] & (last if block == n_blocks - 1 else ~(<uint64> 0))
                stopped_any = 0
                for t in range(num_trees):
                    rest = pending[block, t] & moving
                    if rest == 0:
                        continue
                    tree_nodes = e.nodes + e.node_offset[t]
                    stopped = 0
                    while rest:
                        bit = rest & (~rest + 1)
                        rest = rest ^ bit
                        i = block * 64 + ctz64(bit)
                        node = state[i, t]
                        x = <const uint64*> &X[i, 0]
                        paid = 0.0
                        while node >= 0:
                            nd = tree_nodes + node
                            f = nd.feature
                            if x[f] == UNKNOWN:
                                need[f, i] = 1
                                stopped = stopped | bit
                                break
                            if has_split:
                                paid = paid + split[f]
                            value = (<const float64*> x)[f]  # assigned, so private to the thread
                            node = child(e, t, nd, value)
                        state[i, t] = node
                        if has_split:
                            evaluation[i] += paid
                    pending[block, t] = (pending[block, t] & ~moving) | stopped
                    stopped_any = stopped_any | stopped
                blocked[block] = stopped_any
        return blocked_arr


cdef void accumulate(const Ensemble* e, const float64[:, ::1] X, Py_ssize_t start, Py_ssize_t stop,
                     int64 t0, int64 t1, const float64[::1] lazy, const float64[::1] split,
                     const int32[::1] group_of, const float64[::1] group_lazy, uint8* paid,
                     float64[::1] acquisition, float64[::1] evaluation, const uint8* side = NULL, uint8 want = 0,
                     const float64* leaf_value = NULL, const int64* leaf_offset = NULL, float64* scores = NULL,
                     int64 num_scores = 1) noexcept nogil:
    """Route rows [start, stop) through trees [t0, t1), adding to their acquisition and evaluation cost.
    paid + (i - start) * (num_features + num_groups) holds row i's paid flags (features, then groups); tree by
    tree, so a tree stays in cache. With side, only the rows i whose side[i] == want. With leaf_value, tree t's
    output is added to scores[i * num_scores + t % num_scores] (in tree order, as LightGBM's PredictRaw)."""
    cdef Py_ssize_t n_cols = X.shape[1], n_features = lazy.shape[0], width = n_features + group_lazy.shape[0], i
    cdef int64 t
    cdef int32 node, root, f, g
    cdef const Node* tree_nodes
    cdef const Node* nd
    cdef const float64* x
    cdef uint8* row_paid
    for t in range(t0, t1):
        tree_nodes = e.nodes + e.node_offset[t]
        root = 0 if e.node_offset[t + 1] > e.node_offset[t] else ~0  # a tree without splits: leaf 0
        if root < 0 and leaf_value == NULL:
            continue
        for i in range(start, stop):
            if side != NULL and side[i] != want:
                continue
            node = root
            x = &X[0, 0] + i * n_cols
            row_paid = paid + (i - start) * width
            while node >= 0:
                nd = tree_nodes + node
                f = nd.feature
                evaluation[i] += split[f]
                if not row_paid[f]:
                    row_paid[f] = 1
                    acquisition[i] += lazy[f]
                    g = group_of[f]
                    if g >= 0 and not row_paid[n_features + g]:
                        row_paid[n_features + g] = 1
                        acquisition[i] += group_lazy[g]
                node = child(e, t, nd, x[f])
            if leaf_value != NULL:
                scores[i * num_scores + t % num_scores] += leaf_value[leaf_offset[t] + ~node]


def gated(FlatEnsemble gate, const float64[::1] gate_leaf_value, const int64[::1] gate_leaf_offset,
          float64 threshold, FlatEnsemble f1, const float64[::1] f1_leaf_value, const int64[::1] f1_leaf_offset,
          FlatEnsemble f0, const float64[:, ::1] X, const float64[:, ::1] X0, const float64[::1] lazy,
          const float64[::1] split, const int32[::1] group_of, const float64[::1] group_lazy, uint8[:, ::1] paid,
          float64[::1] acquisition, float64[::1] evaluation, int num_threads):
    """An adaptive composite (ADAPT) in one pass over the rows: each row goes through the gate's trees (its
    raw score summed as LightGBM sums it), to f0 when that score > threshold, else through f1's trees (f1's raw
    scores kept); rows to f0 go through f0's trees when f0 is a forest (None: the caller charges them). The
    cost accumulates in the caller's per-row state (paid, acquisition, evaluation, as cost_update), so a
    feature or group a row paid in the gate is free in the next model. X0: the rows as f0 reads them (X itself
    unless f0 is a scikit-learn model). Returns (to_f0 bool[n], gate score[n], f1 raw scores[n, f1's trees per
    iteration], zero for the rows to f0)."""
    cdef Py_ssize_t n = X.shape[0]
    cdef int64 k = f1.trees_per_iteration
    for model, name in ((gate, "gate"), (f1, "f1")):
        model._check(X, 0, model.num_trees)
        model._check_costs(lazy, split, group_of, group_lazy)
    if gate.trees_per_iteration != 1:
        raise ValueError(f"the gate should have one tree per iteration, has {gate.trees_per_iteration}")
    for values, offsets, model, name in ((gate_leaf_value, gate_leaf_offset, gate, "gate"),
                                         (f1_leaf_value, f1_leaf_offset, f1, "f1")):
        if offsets.shape[0] != model.num_trees + 1 or offsets[0] != 0 or offsets[model.num_trees] != values.shape[0]:
            raise ValueError(f"{name}'s leaf values do not match its trees")
    if f0 is not None:
        f0._check(X0, 0, f0.num_trees)
        f0._check_costs(lazy, split, group_of, group_lazy)
    if X0.shape[0] != n or paid.shape[0] != n or paid.shape[1] != lazy.shape[0] + group_lazy.shape[0] or \
            acquisition.shape[0] != n or evaluation.shape[0] != n:
        raise ValueError("cost state arrays do not match the rows and features")
    to_f0_arr = np.zeros(n, dtype=np.uint8)
    score_arr = np.zeros(n, dtype=np.float64)
    raw_arr = np.zeros((n, k), dtype=np.float64)
    if n == 0:
        return to_f0_arr.astype(bool), score_arr, raw_arr
    cdef uint8[::1] to_f0 = to_f0_arr
    cdef float64[::1] score = score_arr
    cdef float64[:, ::1] raw = raw_arr
    cdef const Ensemble* e0 = &f0.e if f0 is not None else NULL
    cdef int64 t0 = f0.num_trees if f0 is not None else 0
    cdef Py_ssize_t block, start, stop, i
    with nogil:
        for block in prange((n + BLOCK - 1) // BLOCK, schedule="static", num_threads=max(num_threads, 1)):
            start = block * BLOCK
            stop = min(start + BLOCK, n)
            accumulate(&gate.e, X, start, stop, 0, gate.num_trees, lazy, split, group_of, group_lazy,
                       &paid[start, 0], acquisition, evaluation, NULL, 0, &gate_leaf_value[0],
                       &gate_leaf_offset[0], &score[0], 1)
            for i in range(start, stop):
                to_f0[i] = score[i] > threshold
            accumulate(&f1.e, X, start, stop, 0, f1.num_trees, lazy, split, group_of, group_lazy,
                       &paid[start, 0], acquisition, evaluation, &to_f0[0], 0, &f1_leaf_value[0],
                       &f1_leaf_offset[0], &raw[0, 0], k)
            if e0 != NULL:
                accumulate(e0, X0, start, stop, 0, t0, lazy, split, group_of, group_lazy, &paid[start, 0],
                           acquisition, evaluation, &to_f0[0], 1)
    return to_f0_arr.astype(bool), score_arr, raw_arr


def raw_scores(const int32[:, ::1] leaves, const int64[::1] leaf_offset, const float64[::1] leaf_value,
               const float64[:, ::1] values, int64 trees_per_iteration, bint average, int num_threads):
    """Raw scores of rows that reached leaves[i, t] (leaves of tree t numbered from leaf_offset[t]) as
    LightGBM's GBDT::PredictRaw adds them: tree t's output to class t % trees_per_iteration, in tree order
    from 0.0; average (rf): divided by the number of iterations. values[i, t], when given (linear trees),
    replaces the leaf's value. The caller checks the leaves (they come from routing this forest)."""
    cdef Py_ssize_t n = leaves.shape[0], num_trees = leaves.shape[1], i, t, k
    cdef int64 tpi = trees_per_iteration
    cdef bint given = values.shape[0] > 0
    if given and (values.shape[0] != n or values.shape[1] != num_trees):
        raise ValueError("values should have one per row and tree")
    if leaf_offset.shape[0] < num_trees + 1:
        raise ValueError(f"leaves of {num_trees} trees, the forest has {leaf_offset.shape[0] - 1}")
    out_ = np.zeros((n, tpi), dtype=np.float64)
    cdef float64[:, ::1] out = out_
    cdef float64 iterations = <float64> (num_trees // tpi)
    with nogil:
        for i in prange(n, schedule="static", num_threads=max(num_threads, 1)):
            for t in range(num_trees):
                out[i, t % tpi] += values[i, t] if given else leaf_value[leaf_offset[t] + leaves[i, t]]
            if average and num_trees:
                for k in range(tpi):
                    out[i, k] /= iterations
    return out_


def sigmoid(const float64[::1] raw, float64 scale):
    """LightGBM's binary output, as BinaryLogloss::ConvertOutput computes it: 1.0 / (1.0 + exp(-scale * raw))
    in double precision with the C library's exp (the one LightGBM's std::exp calls)."""
    out_ = np.empty(raw.shape[0], dtype=np.float64)
    cdef float64[::1] out = out_
    cdef Py_ssize_t i
    with nogil:
        for i in range(raw.shape[0]):
            out[i] = 1.0 / (1.0 + exp(-scale * raw[i]))
    return out_


def path_marks(const int64[::1] parent, const uint8[::1] mark):
    """For one tree numbered parents first (parent[v] < v, -1 at the root): (above, below) where above[v]
    counts the marked nodes on the path from the root to v (v included) and below[v] says whether v or a
    node under it is marked."""
    cdef int64 n = parent.shape[0], v
    above_ = np.zeros(n, dtype=np.int64)
    below_ = np.zeros(n, dtype=np.uint8)
    cdef int64[::1] above = above_
    cdef uint8[::1] below = below_
    with nogil:
        for v in range(n):
            above[v] = (above[parent[v]] if parent[v] >= 0 else 0) + (mark[v] != 0)
        for v in range(n - 1, -1, -1):
            if mark[v]:
                below[v] = 1
            if below[v] and parent[v] >= 0:
                below[parent[v]] = 1
    return above_, below_.astype(bool)
