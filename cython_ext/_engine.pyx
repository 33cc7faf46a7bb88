# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Routing rows through a Forest (all at once or lazily, as features become known) and per-row prediction
cost, without the GIL; the structure check that makes routing safe.

The routing step itself is _routing.pxd's child(). Rows are processed in blocks of BLOCK rows, tree by
tree: one tree's nodes stay in cache while the block's rows go through it, which is what makes this
faster than LightGBM's row-by-row predictor. The kernels trust the arrays they are given: Forest
(lightgbm_cegb/core/forest.py) checks every index once, with check_structure() below for the children.
"""

from cython.parallel cimport parallel, prange, threadid
from libc.math cimport INFINITY, NAN, exp, expf, fmaxf, isnan, log, logf
from libc.stdlib cimport free, malloc
from libc.string cimport memset

import numpy as np

cimport numpy as cnp

cnp.import_array()

from _routing cimport (CATEGORICAL_MASK, DEFAULT_LEFT_MASK, MISSING_NAN, MISSING_NONE, Ensemble, Node, child,
                      lane_child, zero_threshold)
from _typedefs cimport float64, int8, int32, int64, uint8, uint32, uint64

#: the bits of the NaN that marks a value not known yet in lazy routing (a quiet NaN with a payload: NaN
#: to numpy and LightGBM, and unlike the NaN numpy, LightGBM or a fetch produce)
UNKNOWN_BITS = 0x7FF8_0000_0BAD_F00D
cdef uint64 UNKNOWN = UNKNOWN_BITS
#: LazyBatch.fetch_round's outcome of a call whose values it stored
STORED = object()


cdef extern from *:
    """
    static inline int ctz64(unsigned long long v) { return __builtin_ctzll(v); }
    """
    int ctz64(unsigned long long v) nogil

DEF BLOCK = 64
#: rows routed together through a tree, each one node per step (route_rows)
DEF LANES = 8
#: rows of one tile of LazyBatch._store_round (their values of every fetched unit written together)
DEF STORE_TILE = 256


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


cdef inline bint one_value_per_row(object values, Py_ssize_t n):
    """Whether a fetch returned ``values`` as the C-contiguous native float64 array of one value per row of ``n``
    rows that the batches store at once."""
    if type(values) is not np.ndarray:
        return False
    cdef cnp.ndarray array = values
    return (cnp.PyArray_TYPE(array) == cnp.NPY_DOUBLE and cnp.PyArray_NDIM(array) == 1
            and cnp.PyArray_DIM(array, 0) == n and cnp.PyArray_ISCARRAY_RO(array) and cnp.PyArray_ISNOTSWAPPED(array))


cdef inline object called(fetch, key, ids):
    """What fetch(key, ids) returned, or the exception it raised (the user's fetch: the caller reports it with its key
    and rows)."""
    try:
        return fetch(key, ids)
    except Exception as exc:
        return exc


cdef inline list with_outcome(list outcomes, object values, Py_ssize_t count):
    """A one-row round's outcomes (serve_row) with its count-th call's: None while every call's values were stored."""
    if values is not STORED and outcomes is None:
        outcomes = [STORED] * (count - 1)
    if outcomes is not None:
        outcomes.append(values)
    return outcomes


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
        cdef int missing
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
            missing = (decision[k] >> 2) & 3
            nodes[k].plain = (not (decision[k] & CATEGORICAL_MASK) and not nodes[k].zero_matters
                              and missing in (MISSING_NONE, MISSING_NAN))
            nodes[k].nan_left = ((decision[k] & DEFAULT_LEFT_MASK) != 0 if missing == MISSING_NAN
                                 else 0.0 <= threshold[k])
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

    cdef void _check_leaves(self, const float64[::1] leaf_value, const int64[::1] leaf_offset, str name) except *:
        """leaf_value[leaf_offset[t] + leaf] must be leaf `leaf` of tree t for every leaf the kernels reach."""
        cdef int64 t
        if leaf_offset.shape[0] != self.num_trees + 1 or leaf_offset[0] != 0 or \
                leaf_offset[self.num_trees] != leaf_value.shape[0]:
            raise ValueError(f"{name}'s leaf offsets do not match its leaf values")
        for t in range(self.num_trees):
            if leaf_offset[t + 1] - leaf_offset[t] != self.e.node_offset[t + 1] - self.e.node_offset[t] + 1:
                raise ValueError(f"{name}'s tree {t} should have one leaf more than split nodes")

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
                    route_rows(e, t, tree_nodes, &X[0, 0], n_cols, start, stop, &out[0, 0] + t, num_trees)
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
        cdef Py_ssize_t n = X.shape[0], n_blocks = (n + BLOCK - 1) // BLOCK
        cdef Py_ssize_t n_features = lazy.shape[0] + group_lazy.shape[0]  # paid flags per row: features, groups
        cdef int n_slots = max(1, min(num_threads, <int> n_blocks))
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
        cdef Py_ssize_t block, slot
        if n_slots == 1:  # without a parallel region (what starting one costs matters for a few rows)
            with nogil:
                for block in range(n_blocks):
                    cost_block(&self.e, X, block, num_trees, tpi, n_iter, lazy, split, group_of, group_lazy,
                               &paid_all[0, 0], &rows_using[0, 0], &curve[0, 0], acquisition, evaluation)
        else:
            with nogil, parallel(num_threads=n_slots):
                slot = threadid()
                for block in prange(n_blocks, schedule="static"):
                    cost_block(&self.e, X, block, num_trees, tpi, n_iter, lazy, split, group_of, group_lazy,
                               &paid_all[slot, 0], &rows_using[slot, 0], &curve[slot, 0], acquisition, evaluation)
        curve_out = curve_arr.sum(axis=0)[:n_iter] if per_iteration else None
        return acquisition_arr, evaluation_arr, rows_using_arr[0] if n_slots == 1 else rows_using_arr.sum(axis=0), \
            curve_out

    def prefix_cost(self, const float64[:, ::1] X, const int64[::1] ends, const float64[::1] lazy,
                    const float64[::1] split, const int32[::1] group_of, const float64[::1] group_lazy,
                    const float64[::1] leaf_value, const int64[::1] leaf_offset, bint raw, int num_threads):
        """cost() of each prefix of the first ends[j] trees (ends increasing), all in one pass over the trees: a
        row's costs after tree ends[j] are those of cost(X, ends[j], ...) to the bit (the same additions in the same
        order). Returns (acquisition[K, n], evaluation[K, n], rows_using[K, num_features + num_groups], raw[K, n,
        trees per iteration] or None): with raw, the rows' raw scores after ends[j] trees as LightGBM's
        GBDT::PredictRaw adds them (tree t's leaf value from leaf_value[leaf_offset[t] + leaf] to output t % trees
        per iteration, in tree order from 0.0)."""
        cdef Py_ssize_t K = ends.shape[0], j
        if K == 0:
            raise ValueError("ends should hold at least one tree count")
        for j in range(1, K):
            if ends[j] <= ends[j - 1]:
                raise ValueError(f"ends should increase, got {ends[j - 1]} then {ends[j]}")
        self._check(X, 0, ends[K - 1])
        if ends[0] < 0:
            raise ValueError(f"ends should be tree counts, got {ends[0]}")
        self._check_costs(lazy, split, group_of, group_lazy)
        if raw:
            self._check_leaves(leaf_value, leaf_offset, "the forest")
        cdef Py_ssize_t n = X.shape[0], width = lazy.shape[0] + group_lazy.shape[0]
        cdef Py_ssize_t n_blocks = (n + BLOCK - 1) // BLOCK
        cdef int n_slots = max(1, min(num_threads, <int> n_blocks))
        cdef int64 tpi = self.trees_per_iteration
        acquisition_arr = np.zeros((K, n), dtype=np.float64)
        evaluation_arr = np.zeros((K, n), dtype=np.float64)
        rows_using_arr = np.zeros((n_slots, K, width), dtype=np.int64)
        raw_arr = np.zeros((K, n, tpi), dtype=np.float64) if raw else np.zeros((1, 1, 1), dtype=np.float64)
        if n == 0:
            return acquisition_arr, evaluation_arr, rows_using_arr.sum(axis=0), raw_arr if raw else None
        # the running state (each row's costs and raw scores) and, per thread, the paid flags of a block's rows
        acquisition_now, evaluation_now = np.zeros(n, dtype=np.float64), np.zeros(n, dtype=np.float64)
        scores_arr = np.zeros(n * tpi if raw else 1, dtype=np.float64)
        paid_arr = np.zeros((n_slots, BLOCK * width), dtype=np.uint8)
        cdef float64[::1] acquisition_run = acquisition_now
        cdef float64[::1] evaluation_run = evaluation_now
        cdef float64[::1] scores = scores_arr
        cdef float64[:, ::1] acquisition = acquisition_arr
        cdef float64[:, ::1] evaluation = evaluation_arr
        cdef int64[:, :, ::1] rows_using = rows_using_arr
        cdef float64[:, :, ::1] raw_out = raw_arr
        cdef uint8[:, ::1] paid_all = paid_arr
        cdef const float64* values = &leaf_value[0] if raw and leaf_value.shape[0] else NULL
        cdef const int64* offsets = &leaf_offset[0] if raw else NULL
        cdef float64* running_scores = &scores[0] if raw else NULL
        cdef float64* raw_ptr = &raw_out[0, 0, 0] if raw else NULL
        cdef Py_ssize_t block, slot
        if n_slots == 1:  # without a parallel region (as cost)
            with nogil:
                for block in range(n_blocks):
                    prefix_block(&self.e, X, block, ends, lazy, split, group_of, group_lazy, &paid_all[0, 0],
                                 &rows_using[0, 0, 0], values, offsets, tpi, acquisition_run, evaluation_run,
                                 running_scores, acquisition, evaluation, raw_ptr)
        else:
            with nogil, parallel(num_threads=n_slots):
                slot = threadid()
                for block in prange(n_blocks, schedule="static"):
                    prefix_block(&self.e, X, block, ends, lazy, split, group_of, group_lazy, &paid_all[slot, 0],
                                 &rows_using[slot, 0, 0], values, offsets, tpi, acquisition_run, evaluation_run,
                                 running_scores, acquisition, evaluation, raw_ptr)
        return acquisition_arr, evaluation_arr, rows_using_arr.sum(axis=0), raw_arr if raw else None

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


#: a row's status in LazyBatch.status (serving/lazy.py's DONE, FAILED, PENDING)
DEF DONE = 0
DEF FAILED = 1
DEF PENDING = 2


cdef inline void* data(cnp.ndarray array) noexcept:
    return cnp.PyArray_DATA(array)


cdef cnp.ndarray owned(object array, object dtype, Py_ssize_t size):
    """array as a C-contiguous array of dtype (a copy when it is not one) of `size` elements, or a ValueError."""
    cdef cnp.ndarray out = np.ascontiguousarray(array, dtype=dtype)
    if out.size != size:
        raise ValueError(f"expected {size} values, got {out.size}")
    return out


cdef class LazyPlan:
    """What every batch of one LazyPredictor shares: the forest's first num_trees trees, the costs (lazy and
    split per feature, each feature's group or -1, each group's lazy cost, the cost of a tree), the groups'
    members (group g: member[member_offset[g]:member_offset[g + 1]], in a group fetch's column order), the
    order of the fetch units in a round's requests (unit u < num_features: feature u; num_features + g: group
    g), whether values are rounded to float32 as the model reads them, and the leaf values the raw score
    sums. Every index is checked here, once."""

    cdef FlatEnsemble flat
    cdef object keep
    cdef const float64* lazy
    cdef const float64* split
    cdef const int32* group_of
    cdef const float64* group_lazy
    cdef const int64* member_offset
    cdef const int64* member
    cdef const int64* unit_order
    cdef const int64* leaf_offset
    cdef const float64* leaf_value
    cdef const float64* start
    cdef const int32* root_feature
    cdef Py_ssize_t num_roots
    cdef readonly Py_ssize_t num_features, num_groups, num_units
    cdef readonly int64 num_trees
    cdef float64 tree_cost
    cdef bint float32, has_split
    cdef readonly bint sum32

    def __cinit__(self, FlatEnsemble flat, int64 num_trees, lazy, split, group_of, group_lazy, member_offset,
                  member, unit_order, float64 tree_cost, bint float32, leaf_offset, leaf_value, start=None,
                  bint sum32=False):
        """start: the value each output's raw score starts from (None: 0.0); sum32: the sums in float32 (XGBoost's
        predictor: leaf values and start float32 numbers) instead of float64."""
        cdef Py_ssize_t F = flat.num_features, G, k
        if not 0 <= num_trees <= flat.num_trees:
            raise ValueError(f"{num_trees} trees of the forest's {flat.num_trees}")
        cdef cnp.ndarray lazy_ = owned(lazy, np.float64, F), split_ = owned(split, np.float64, F)
        cdef cnp.ndarray group_of_ = owned(group_of, np.int32, F)
        cdef cnp.ndarray group_lazy_ = np.ascontiguousarray(group_lazy, dtype=np.float64)
        G = group_lazy_.size
        cdef cnp.ndarray offset_ = owned(member_offset, np.int64, G + 1)
        cdef cnp.ndarray member_ = np.ascontiguousarray(member, dtype=np.int64)
        cdef cnp.ndarray order_ = np.ascontiguousarray(unit_order, dtype=np.int64)
        cdef cnp.ndarray leaf_offset_ = owned(leaf_offset, np.int64, flat.num_trees + 1)
        cdef cnp.ndarray leaf_value_ = np.ascontiguousarray(leaf_value, dtype=np.float64)
        cdef cnp.ndarray start_ = np.zeros(flat.trees_per_iteration) if start is None else \
            np.array(start, dtype=np.float64).reshape(-1)
        if start_.size != flat.trees_per_iteration:
            raise ValueError(f"start should hold {flat.trees_per_iteration} values, got {start_.size}")
        if sum32 and not (np.array_equal(leaf_value_.astype(np.float32), leaf_value_)
                          and np.array_equal(start_.astype(np.float32), start_)):
            raise ValueError("sum32: the leaf values and start should be float32 numbers")
        self.keep = (lazy_, split_, group_of_, group_lazy_, offset_, member_, order_, leaf_offset_, leaf_value_, start_)
        self.start, self.sum32 = <const float64*> data(start_), sum32
        self.flat, self.num_trees, self.num_features, self.num_groups, self.num_units = flat, num_trees, F, G, F + G
        self.lazy, self.split = <const float64*> data(lazy_), <const float64*> data(split_)
        self.group_of, self.group_lazy = <const int32*> data(group_of_), <const float64*> data(group_lazy_)
        self.member_offset, self.member = <const int64*> data(offset_), <const int64*> data(member_)
        self.unit_order = <const int64*> data(order_)
        self.leaf_offset, self.leaf_value = <const int64*> data(leaf_offset_), <const float64*> data(leaf_value_)
        self.tree_cost, self.float32 = tree_cost, float32
        for k in range(F):
            if not -1 <= self.group_of[k] < G:
                raise ValueError(f"feature {k}'s group {self.group_of[k]} is not one of the {G} groups")
        if self.member_offset[0] != 0 or self.member_offset[G] != member_.size:
            raise ValueError("member offsets do not match the members")
        for k in range(G):
            if self.member_offset[k + 1] < self.member_offset[k]:
                raise ValueError(f"group {k}'s member offsets decrease")
        for k in range(member_.size):
            if not 0 <= self.member[k] < F:
                raise ValueError(f"group member {self.member[k]} is not one of the {F} features")
        if order_.size != F + G:
            raise ValueError(f"unit_order should list the {F + G} units")
        for k in range(F + G):
            if not 0 <= self.unit_order[k] < F + G:
                raise ValueError(f"unit {self.unit_order[k]} is not one of the {F + G} units")
        if self.leaf_offset[0] != 0 or self.leaf_offset[flat.num_trees] != leaf_value_.size:
            raise ValueError("leaf offsets do not match the leaf values")
        for k in range(flat.num_trees):
            if self.leaf_offset[k + 1] - self.leaf_offset[k] != \
                    flat.e.node_offset[k + 1] - flat.e.node_offset[k] + 1:
                raise ValueError(f"tree {k} should have one leaf more than split nodes")
        self.has_split = False
        for k in range(F):
            self.has_split = self.has_split or self.split[k] != 0
        roots = np.zeros(F, dtype=bool)
        for k in range(num_trees):
            if flat.e.node_offset[k + 1] > flat.e.node_offset[k]:
                roots[flat.e.nodes[flat.e.node_offset[k]].feature] = True
        cdef cnp.ndarray root_feature_ = np.flatnonzero(roots).astype(np.int32)
        self.keep += (root_feature_,)
        self.root_feature, self.num_roots = <const int32*> data(root_feature_), root_feature_.size


cdef inline void _free_all(void* a, void* b, void* c, void* d) noexcept nogil:
    free(a)
    free(b)
    free(c)
    free(d)


cdef class LazyBatch:
    """One batch of rows in lazy routing under a LazyPlan: the values known so far, where each row stands in each
    tree, what it has paid, and which rows need each fetch unit.

    X[i, f] is the value, or the NaN whose bits are UNKNOWN until it is known (any other NaN is a missing
    value). route[i, t] >= 0 is the node row i stands at in tree t, < 0 the leaf ~route[i, t] it reached; bit r
    of pending[b, t] says row 64 b + r is still inside tree t. A row passing a node testing f pays split[f]; a
    feature's lazy cost (and its group's, the first time) is paid when a path of the row reads the value. A
    group's fetch puts its members' values in held[i, f] (UNKNOWN elsewhere); a path that reaches a member
    reads it from there (into X, paid). The caller drives the rounds: advance() routes the rows as far as their
    values go and returns the round's fetches, deliver() (or fetch_round(), which calls fetch) stores what a
    fetch returned, read_held() lets rows stopped at a member of a group they have read it, fail() drops rows.
    Every row index given is checked.
    """

    cdef LazyPlan plan
    cdef readonly object X, held, has_group, fetched, paid, acquisition, evaluation, route, status
    cdef object scratch, every_row, round_units
    cdef float64* x
    cdef float64* h
    cdef uint8* hg
    cdef uint8* fe
    cdef uint8* pd
    cdef uint8* need
    cdef float64* acq
    cdef float64* ev
    cdef int32* rt
    cdef uint64* pending
    cdef uint64* move
    cdef uint8* active
    cdef uint8* blocked
    cdef uint8* any_need
    cdef int8* st
    cdef readonly Py_ssize_t n
    cdef Py_ssize_t F, G, T, n_blocks
    cdef int threads
    cdef bint started
    cdef readonly bint leaves_ready

    def __cinit__(self, LazyPlan plan, X, known, int num_threads):
        """X: the rows' values, float64[n, num_features] (copied); known: uint8[n, num_features] of the values X
        gives, or None for its non-NaN ones; a NaN given is a missing value. num_threads: of the routing and the
        bookkeeping of large batches."""
        cdef Py_ssize_t F = plan.num_features, G = plan.num_groups
        cdef int64 T = plan.num_trees
        cdef cnp.ndarray given = np.ascontiguousarray(X, dtype=np.float64)
        if given.ndim != 2 or given.shape[1] != F:
            raise ValueError(f"X should have {F} columns, got shape {np.shape(X)}")
        cdef cnp.ndarray values = np.empty_like(given)  # filled from given by _start
        cdef Py_ssize_t n = values.shape[0], n_blocks = (n + 63) // 64
        cdef cnp.ndarray known_
        cdef const uint8* kn = NULL
        if known is not None:
            known_ = np.ascontiguousarray(known, dtype=np.uint8)
            if known_.ndim != 2 or known_.shape[0] != n or known_.shape[1] != F:
                raise ValueError("known does not match X")
            kn = <const uint8*> data(known_)
        self.plan, self.n, self.F, self.G, self.T, self.n_blocks = plan, n, F, G, T, n_blocks
        self.threads, self.started = max(1, min(num_threads, <int> n_blocks)), False
        self.X = values
        self.held = np.empty((n if G else 0, F), dtype=np.float64)
        # zeroed below, without the GIL: np.zeros' pages would be faulted in (and zeroed) during the first
        # round's routing instead, where the two threads' faults wait for each other (40 ms of 100,000 rows x
        # 100 trees' 110 ms)
        self.has_group = np.empty((n, G), dtype=np.uint8)
        self.fetched = np.empty((n, F), dtype=np.uint8)
        self.paid = np.empty((n, F + G), dtype=np.uint8)
        self.acquisition = np.empty(n, dtype=np.float64)
        self.evaluation = np.empty(n, dtype=np.float64)
        self.route = np.empty((n, T), dtype=np.int32)
        self.status = np.empty(n, dtype=np.int8)
        # pending, the rows to move (per block), then active, blocked, any_need (per row), need (per unit, row)
        cdef Py_ssize_t scratch_bytes = n_blocks * T * 8 + n_blocks * 8 + 3 * n + F * n
        self.scratch = np.empty(scratch_bytes, dtype=np.uint8)
        self.x, self.h = <float64*> data(self.X), <float64*> data(self.held)
        self.hg, self.fe, self.pd = <uint8*> data(self.has_group), <uint8*> data(self.fetched), <uint8*> data(self.paid)
        self.acq, self.ev = <float64*> data(self.acquisition), <float64*> data(self.evaluation)
        self.rt, self.st = <int32*> data(self.route), <int8*> data(self.status)
        self.pending = <uint64*> data(self.scratch)
        self.move = self.pending + n_blocks * T
        self.active = <uint8*> (self.move + n_blocks)
        self.blocked = self.active + n
        self.any_need = self.blocked + n
        self.need = self.any_need + n
        cdef const float64* src = <const float64*> data(given)
        with nogil:  # one thread: the pages' first touch, which threads would wait for each other for
            self._start(src, kn)

    cdef void _start(self, const float64* src, const uint8* kn) noexcept nogil:
        """The state of rows that have routed nowhere yet, their values copied from src into X (kn: which src
        gives, NULL for its non-NaN ones; a NaN given is a missing value; with float32, a value is rounded as such
        models read it)."""
        cdef Py_ssize_t n = self.n, F = self.F, G = self.G, i, f, b
        cdef int64 T = self.T, t
        cdef uint64* v
        cdef float64 value
        cdef bint float32 = self.plan.float32
        memset(self.hg, 0, n * G)
        memset(self.fe, 0, n * F)
        memset(self.pd, 0, n * (F + G))
        memset(self.rt, 0, n * T * sizeof(int32))
        memset(self.pending, 0, self.n_blocks * T * 8 + self.n_blocks * 8 + 3 * n + F * n)
        memset(self.active, 1, n)
        for i in range(n):
            self.acq[i] = 0.0
            self.ev[i] = self.plan.tree_cost * T
            self.st[i] = PENDING
            v = <uint64*> (self.x + i * F)
            for f in range(F):
                value = src[i * F + f]
                if (kn != NULL and not kn[i * F + f]) or (kn == NULL and isnan(value)):
                    v[f] = UNKNOWN
                elif isnan(value):
                    self.x[i * F + f] = NAN  # a missing value: never the bits of UNKNOWN
                elif float32:
                    self.x[i * F + f] = <float64> (<float> value)
                else:
                    self.x[i * F + f] = value
            if G:
                for f in range(F):
                    (<uint64*> self.h)[i * F + f] = UNKNOWN
        for t in range(T):
            if self.plan.flat.e.node_offset[t + 1] == self.plan.flat.e.node_offset[t]:  # one leaf: every row at leaf 0
                for i in range(n):
                    self.rt[i * T + t] = -1
            else:  # every row inside the tree: whole words, the last block's rows only
                for b in range(self.n_blocks):
                    self.pending[b * T + t] = ~(<uint64> 0) if b < self.n_blocks - 1 else \
                        (~(<uint64> 0)) >> (64 - (n - b * 64))
        self.started = False
        self.leaves_ready = False

    def restart(self, const float64[::1] x, known):
        """The batch again from nothing, for a row of one request (a batch of one row): x its num_features values
        (copied), known a uint8 array of the values x gives or None (its non-NaN ones). Nothing is allocated: a
        prepared predictor serves request after request on one batch."""
        cdef const uint8[::1] kn
        if self.n != 1 or x.shape[0] != self.F:
            raise ValueError(f"restart takes the {self.F} values of a batch of one row")
        if known is not None:
            kn = known
            if kn.shape[0] != self.F:
                raise ValueError("known does not match x")
        with nogil:
            self._start(&x[0], NULL if known is None else &kn[0])

    cdef inline void _pay(self, Py_ssize_t i, Py_ssize_t f) noexcept nogil:
        """Row i reads feature f: its lazy cost, and its group's the first time, as the cost kernel charges."""
        cdef int32 g
        cdef uint8* row_paid = self.pd + i * (self.F + self.G)
        if row_paid[f]:
            return
        row_paid[f] = 1
        self.acq[i] += self.plan.lazy[f]
        g = self.plan.group_of[f]
        if g >= 0 and not row_paid[self.F + g]:
            row_paid[self.F + g] = 1
            self.acq[i] += self.plan.group_lazy[g]

    cdef void _route_block(self, Py_ssize_t block) noexcept nogil:
        """Move the rows move[block] of a block of 64 down every tree they are inside, as far as their values go;
        blocked[i] = 1 for a row that stopped in some tree (need[f, i] = 1 for the feature it waits for). Every
        array is read through a local pointer: a write through need (bytes, which alias anything) would otherwise
        make the compiler load them again from self at every node."""
        cdef const Ensemble* e = &self.plan.flat.e
        cdef const float64* split = self.plan.split
        cdef bint has_split = self.plan.has_split
        cdef const Node* tree_nodes
        cdef const Node* nd
        cdef const uint64* row
        cdef uint64 moving = self.move[block], rest, bit, stopped, stopped_any = 0
        cdef uint64* pending = self.pending + block * self.T
        cdef Py_ssize_t i, n = self.n, F = self.F
        cdef int64 t, T = self.T
        cdef int32 f, following
        cdef float64 value
        cdef uint64 unknown = UNKNOWN
        cdef int32 node[LANES]
        cdef float64 spent[LANES]
        cdef Py_ssize_t lane_row[LANES]
        cdef uint64 lane_bit[LANES]
        cdef bint live[LANES]
        cdef Py_ssize_t k, m
        cdef bint going
        cdef int32* rt = self.rt
        cdef const float64* x = self.x
        cdef uint8* need = self.need
        cdef float64* ev = self.ev
        for t in range(T):
            rest = pending[t] & moving
            if rest == 0:
                continue
            tree_nodes = e.nodes + e.node_offset[t]
            stopped = 0
            while rest:  # LANES rows at a time, each one node per step (see route_rows)
                m = 0
                while m < LANES and rest:
                    bit = rest & (~rest + 1)
                    rest = rest ^ bit
                    i = block * 64 + ctz64(bit)
                    lane_row[m], lane_bit[m], node[m], spent[m] = i, bit, rt[i * T + t], 0.0
                    live[m] = node[m] >= 0
                    m += 1
                going = True
                while going:
                    going = False
                    for k in range(m):
                        if not live[k]:
                            continue
                        i = lane_row[k]
                        row = <const uint64*> (x + i * F)
                        nd = tree_nodes + node[k]
                        f = nd.feature
                        value = (<const float64*> row)[f]
                        if nd.plain and value == value:  # child()'s short path, without a branch on the direction
                            following = (&nd.left)[not (value <= nd.threshold)]
                        elif row[f] == unknown:  # checked only where a value compares as NaN
                            need[f * n + i] = 1
                            stopped = stopped | lane_bit[k]
                            live[k] = False
                            continue
                        else:
                            following = child(e, t, nd, value)
                        if has_split:
                            spent[k] = spent[k] + split[f]
                        node[k] = following
                        live[k] = following >= 0
                        going = True
                for k in range(m):
                    i = lane_row[k]
                    rt[i * T + t] = node[k]
                    if has_split:
                        ev[i] += spent[k]
            pending[t] = (pending[t] & ~moving) | stopped
            stopped_any = stopped_any | stopped
        rest = moving
        while rest:
            bit = rest & (~rest + 1)
            rest = rest ^ bit
            self.blocked[block * 64 + ctz64(bit)] = (stopped_any & bit) != 0

    cdef void _route_one(self) noexcept nogil:
        """_route_block for a batch of one row (a request of one row): its trees one after the other, no lanes."""
        cdef const Ensemble* e = &self.plan.flat.e
        cdef const float64* split = self.plan.split
        cdef bint has_split = self.plan.has_split, stopped_any = False
        cdef const Node* tree_nodes
        cdef const Node* nd
        cdef const float64* x = self.x
        cdef const uint64* row = <const uint64*> self.x
        cdef uint64* pending = self.pending
        cdef int64 t, T = self.T
        cdef int32 f, node
        cdef float64 value, spent
        for t in range(T):
            if not pending[t] & 1:
                continue
            tree_nodes = e.nodes + e.node_offset[t]
            node = self.rt[t]
            spent = 0.0
            while node >= 0:
                nd = tree_nodes + node
                f = nd.feature
                value = x[f]
                if nd.plain and value == value:
                    node = (&nd.left)[not (value <= nd.threshold)]
                elif row[f] == UNKNOWN:
                    self.need[f] = 1
                    break
                else:
                    node = child(e, t, nd, value)
                if has_split:
                    spent = spent + split[f]
            self.rt[t] = node
            if has_split:
                self.ev[0] += spent
            if node < 0:
                pending[t] = 0
            else:
                stopped_any = True
        self.blocked[0] = stopped_any

    cdef Py_ssize_t _read_held(self) noexcept nogil:
        """Rows stopped at a member of a group they have read it (into X, paid); their other needs are cleared
        (found again when they move on) and any_need[i] = 1 marks them. Returns how many rows read something."""
        cdef Py_ssize_t i, f, n = self.n, read = 0
        cdef int32 g
        if not self.G:
            return 0
        memset(self.any_need, 0, n)
        for f in range(self.F):
            g = self.plan.group_of[f]
            if g < 0:
                continue
            for i in range(n):
                if self.need[f * n + i] and self.hg[i * self.G + g]:
                    self.x[i * self.F + f] = self.h[i * self.F + f]
                    (<uint64*> self.h)[i * self.F + f] = UNKNOWN
                    self._pay(i, f)
                    if not self.any_need[i]:
                        self.any_need[i] = 1
                        read += 1
        if read:
            for f in range(self.F):
                for i in range(n):
                    if self.any_need[i]:
                        self.need[f * n + i] = 0
        return read

    def read_held(self):
        """Let the rows stopped at a member of a group they have read it (after a round's deliveries)."""
        with nogil:
            self._read_held()

    cdef bint _route(self) noexcept nogil:
        """Route the active rows as far as their values (and the groups they have) take them; rows that reach a
        leaf in every tree become DONE. Whether a row waits for a value (need says which)."""
        cdef Py_ssize_t n = self.n, F = self.F, n_blocks = self.n_blocks, block, i, f, k
        cdef bint any_active = False, any_blocked = False, idle
        cdef int threads = self.threads
        for i in range(n):
            any_active = any_active or self.active[i]
        if not any_active:
            return False
        memset(self.need, 0, F * n)
        memset(self.move, 0, n_blocks * 8)
        for i in range(n):
            if not self.active[i]:
                continue
            if not self.started and self.plan.num_roots:  # a row that knows nothing stops at every root
                idle = True
                for f in range(F):
                    if (<uint64*> self.x)[i * F + f] != UNKNOWN:
                        idle = False
                        break
                if idle:
                    for k in range(self.plan.num_roots):
                        self.need[self.plan.root_feature[k] * n + i] = 1
                    self.blocked[i] = 1
                    continue
            self.move[i >> 6] |= (<uint64> 1) << (i & 63)
        self.started = True
        while True:
            if n == 1:
                if self.move[0]:
                    self._route_one()
            elif threads == 1:
                for block in range(n_blocks):
                    if self.move[block]:
                        self._route_block(block)
            else:
                for block in prange(n_blocks, schedule="static", num_threads=threads):
                    if self.move[block]:
                        self._route_block(block)
            if not self._read_held():
                break
            memset(self.move, 0, n_blocks * 8)
            for i in range(n):
                if self.any_need[i]:
                    self.move[i >> 6] |= (<uint64> 1) << (i & 63)
        for i in range(n):
            if self.active[i]:
                if self.blocked[i]:
                    any_blocked = True
                else:
                    self.st[i] = DONE
                    self.active[i] = 0
        return any_blocked

    cdef const uint8* _unit_flags(self, int64 u) noexcept nogil:
        """After _route: which rows wait for unit u (a group: for any of its members; into any_need, until the next
        call), NULL for a feature in a group (fetched with its group)."""
        cdef Py_ssize_t n = self.n, F = self.F, i, m
        cdef int64 f
        if u < F:
            return NULL if self.plan.group_of[u] >= 0 else self.need + u * n
        memset(self.any_need, 0, n)
        for m in range(self.plan.member_offset[u - F], self.plan.member_offset[u - F + 1]):
            f = self.plan.member[m]
            for i in range(n):
                self.any_need[i] |= self.need[f * n + i]
        return self.any_need

    cdef object _every_row(self):
        """The rows of a request of every row (read-only: fetch may see it), one array for every such request."""
        if self.every_row is None:
            self.every_row = np.arange(self.n, dtype=np.int64)
            self.every_row.setflags(write=False)
        return self.every_row

    def advance(self):
        """Route the active rows as far as their values (and the groups they have) take them; rows that reach a
        leaf in every tree become DONE. Returns the round's fetches, [(unit, rows int64[...])], the units in the
        plan's order (a group for the rows stopped at any of its members); [] when no row waits for a value."""
        cdef Py_ssize_t n = self.n, i, k, count
        cdef int64 u
        cdef const uint8* flags
        cdef bint any_blocked
        with nogil:
            any_blocked = self._route()
        if not any_blocked:
            return []
        requests = []
        cdef cnp.ndarray rows
        cdef int64* out
        for k in range(self.plan.num_units):
            u = self.plan.unit_order[k]
            flags = self._unit_flags(u)
            if flags == NULL:
                continue
            count = 0
            for i in range(n):
                count += flags[i]
            if count == n:
                requests.append((u, self._every_row()))
            elif count:
                rows = np.empty(count, dtype=np.int64)
                out = <int64*> data(rows)
                count = 0
                for i in range(n):
                    if flags[i]:
                        out[count] = i
                        count += 1
                requests.append((u, rows))
        return requests

    def serve_row(self, fetch, list keys, ids):
        """A batch of one row (see restart) through its rounds: fetch(keys[unit], ids) for each unit it waits for, in
        the plan's order, a feature's values stored as fetch_round stores them. Returns (rounds, calls, None) when the
        row is DONE; at the end of the first round with a call whose values were not stored (fetch raised, or
        returned anything else), (rounds, calls, (requests, outcomes)): the round's requests as advance gives them,
        their outcomes as fetch_round's, for the caller to deliver (and go on from)."""
        cdef Py_ssize_t rounds = 0, calls = 0, count, k, j
        cdef int64 u, row = 0
        cdef const uint8* flags
        cdef cnp.ndarray array
        cdef bint blocked
        if self.n != 1:
            raise ValueError(f"serve_row serves a batch of one row, not {self.n}")
        every_row = self._every_row()
        if self.round_units is None:
            self.round_units = np.empty(self.plan.num_units, dtype=np.int64)
        cdef int64* units = <int64*> data(self.round_units)
        while True:
            blocked = self._route()  # one row: microseconds, not worth releasing the GIL
            if not blocked:
                return rounds, calls, None
            rounds += 1
            count = 0
            outcomes = None
            for k in range(self.plan.num_units):
                u = self.plan.unit_order[k]
                flags = self._unit_flags(u)
                if flags == NULL or not flags[0]:
                    continue
                calls += 1
                units[count] = u
                count += 1
                values = called(fetch, keys[u], ids)
                if u < self.F and one_value_per_row(values, 1):
                    array = values
                    self._store_rows(u, -1, NULL, 1, &row, <const float64*> data(array), 0, 1)
                    values = STORED
                outcomes = with_outcome(outcomes, values, count)
            if outcomes is not None:
                return rounds, calls, ([(units[j], every_row) for j in range(count)], outcomes)
            self._read_held()

    def row_output(self, bint sigmoid_, float64 scale, bint average):
        """The prediction of a DONE batch of one row whose model has one output: its raw score as raw_score sums it
        (divided by the iterations with average), through binary's sigmoid (as sigmoid computes it) with
        sigmoid_."""
        cdef int64 T = self.T, t
        cdef int32 node
        cdef float64 score = self.plan.start[0], leaf
        if self.n != 1 or self.plan.flat.trees_per_iteration != 1 or self.st[0] != DONE:
            raise ValueError("row_output: a DONE batch of one row of a model with one output")
        for t in range(T):
            node = self.rt[t]
            leaf = self.plan.leaf_value[self.plan.leaf_offset[t] + (node if self.leaves_ready else ~node)]
            score = <float64> (<float> score + <float> leaf) if self.plan.sum32 else score + leaf
        if average and T:
            score /= <float64> T
        return 1.0 / (1.0 + exp(-scale * score)) if sigmoid_ else score

    def fetch_round(self, list requests, fetch, list keys, ids):
        """Call fetch(keys[unit], row ids) for each request (unit, rows) of advance in turn (row ids: ids[rows],
        or rows when ids is None). A feature's values returned as a C-contiguous float64 array of one value per
        row are stored as deliver stores them, after the round's last call (all of them in one pass over the rows:
        a row's values are written together); anything else (a group's values, other types, the exception fetch
        raised) is left to the caller. Returns each call's outcome, STORED for those stored; None when every
        call's values were stored."""
        cdef Py_ssize_t j
        cdef int64 unit
        cdef bint every = True
        outcomes = [None] * len(requests)
        stored = []
        for j in range(len(requests)):
            unit, rows = requests[j]
            try:
                values = fetch(keys[unit], rows if ids is None else ids[rows])
            except Exception as exc:  # the user's fetch: the caller reports it with its key and rows
                outcomes[j] = exc
                every = False
                continue
            if unit < self.F and one_value_per_row(values, len(rows)):
                stored.append((unit, self._rows(rows), values))
                outcomes[j] = STORED
                continue
            outcomes[j] = values
            every = False
        self._store_round(stored)
        return None if every else outcomes

    cdef void _store_round(self, list stored) except *:
        """Store fetch_round's feature values, [(unit, rows, values)]: row tile by row tile, each tile's rows of
        every unit (rows ascending, as advance gives them; otherwise unit by unit, as deliver)."""
        cdef Py_ssize_t q = len(stored), j, k, tiles = (self.n + STORE_TILE - 1) // STORE_TILE, total = 0
        cdef cnp.ndarray rows, values
        cdef const int64* r
        if q == 0:
            return
        for unit, rows, values in stored:
            r = <const int64*> data(rows)
            for j in range(1, rows.shape[0]):
                if r[j] <= r[j - 1]:
                    for unit_, rows_, values_ in stored:
                        self._store(unit_, rows_, <const float64*> data(values_), rows_.shape[0], self.threads)
                    return
            total += rows.shape[0]
        cdef int64* units = <int64*> malloc(q * sizeof(int64))
        cdef const int64** row_of = <const int64**> malloc(q * sizeof(int64*))
        cdef const float64** value_of = <const float64**> malloc(q * sizeof(float64*))
        cdef Py_ssize_t* count = <Py_ssize_t*> malloc(q * sizeof(Py_ssize_t))
        if units == NULL or row_of == NULL or value_of == NULL or count == NULL:
            _free_all(units, row_of, value_of, count)
            raise MemoryError()
        for k in range(q):
            unit, rows, values = stored[k]
            units[k], row_of[k], value_of[k] = unit, <const int64*> data(rows), <const float64*> data(values)
            count[k] = rows.shape[0]
        with nogil:
            if self.threads > 1 and total >= 4 * BLOCK * self.threads:
                for j in prange(tiles, schedule="static", num_threads=self.threads):
                    self._store_tile(q, units, row_of, value_of, count, j * STORE_TILE)
            else:
                for j in range(tiles):
                    self._store_tile(q, units, row_of, value_of, count, j * STORE_TILE)
        _free_all(units, row_of, value_of, count)

    cdef void _store_tile(self, Py_ssize_t q, const int64* units, const int64** row_of, const float64** value_of,
                          const Py_ssize_t* count, Py_ssize_t lo) noexcept nogil:
        """The values of rows [lo, lo + STORE_TILE) of each of q units (rows ascending)."""
        cdef Py_ssize_t k, a, b, mid, hi = lo + STORE_TILE
        cdef const int64* r
        for k in range(q):
            r = row_of[k]
            a, b = 0, count[k]
            while a < b:  # the first of the unit's rows at or above lo
                mid = (a + b) // 2
                if r[mid] < lo:
                    a = mid + 1
                else:
                    b = mid
            while a < count[k] and r[a] < hi:
                self._store_value(r[a], units[k], value_of[k][a])
                a += 1

    cdef inline float64 _as_read(self, float64 value) noexcept nogil:
        """A fetched value as the model reads it: a NaN as a missing value (never UNKNOWN's bits), rounded to float32
        for float32 models."""
        if isnan(value):
            return NAN
        return <float64> (<float> value) if self.plan.float32 else value

    cdef inline void _store_value(self, int64 i, int64 f, float64 value) noexcept nogil:
        """Row i's fetched value of feature f (as read): stored and paid."""
        self.x[i * self.F + f] = self._as_read(value)
        self.fe[i * self.F + f] = 1
        self._pay(i, f)

    def deliver(self, int64 unit, rows, values):
        """Store what a fetch of `unit` returned for `rows`: values (float64, flattened) [j * width + c] for
        rows[j] and the unit's c-th feature (width 1 for a feature, the group's members for a group). Any NaN is
        stored as a missing value; with float32, values are rounded to float32 (as such models read them). A
        feature is paid at once (the row stopped at it); a group's members go to held (the values given in X
        stay) and are paid when a path reads them."""
        cdef cnp.ndarray flat = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
        self._store(unit, rows, <const float64*> data(flat), flat.size, 1)

    cdef void _store(self, int64 unit, rows_given, const float64* values, Py_ssize_t count, int threads) except *:
        """deliver's work; with threads > 1 (rows each once: advance's), the rows of a large fetch in parallel."""
        cdef Py_ssize_t F = self.F, width = 1, g = -1, m
        cdef const int64* member = self.plan.member
        cdef cnp.ndarray rows = self._rows(rows_given)
        cdef const int64* r = <const int64*> data(rows)
        m = rows.size
        if unit < 0 or unit >= self.plan.num_units:
            raise ValueError(f"unit {unit} is not one of the {self.plan.num_units} units")
        if unit >= F:
            g = unit - F
            width = self.plan.member_offset[g + 1] - self.plan.member_offset[g]
            member = member + self.plan.member_offset[g]
        if count != m * width:
            raise ValueError(f"{count} values for {m} rows of width {width}")
        cdef Py_ssize_t chunk = 4 * BLOCK, k
        if threads > 1 and m >= chunk * threads:
            with nogil:
                for k in prange((m + chunk - 1) // chunk, schedule="static", num_threads=threads):
                    self._store_rows(unit, g, member, width, r, values, k * chunk, min(m, (k + 1) * chunk))
        else:
            with nogil:
                self._store_rows(unit, g, member, width, r, values, 0, m)

    cdef void _store_rows(self, int64 unit, Py_ssize_t g, const int64* member, Py_ssize_t width, const int64* r,
                          const float64* values, Py_ssize_t j0, Py_ssize_t j1) noexcept nogil:
        cdef Py_ssize_t F = self.F, j, c
        cdef int64 i, f
        cdef float64 value
        for j in range(j0, j1):
            i = r[j]
            for c in range(width):
                value = values[j * width + c]
                if g < 0:
                    self._store_value(i, unit, value)
                    continue
                f = member[c]
                if (<uint64*> self.x)[i * F + f] == UNKNOWN:
                    self.h[i * F + f] = self._as_read(value)
                    self.fe[i * F + f] = 1
            if g >= 0:
                self.hg[i * self.G + g] = 1

    cdef cnp.ndarray _rows(self, rows_given):
        """rows_given as int64 row indices of this batch (advance's arrays as they are), or a ValueError."""
        cdef cnp.ndarray rows
        if type(rows_given) is np.ndarray and cnp.PyArray_TYPE(rows_given) == cnp.NPY_INT64 \
                and cnp.PyArray_NDIM(rows_given) == 1 and cnp.PyArray_ISCARRAY_RO(rows_given) \
                and cnp.PyArray_ISNOTSWAPPED(rows_given):
            rows = rows_given
        else:
            rows = np.ascontiguousarray(rows_given, dtype=np.int64).reshape(-1)
        cdef const int64* r = <const int64*> data(rows)
        cdef Py_ssize_t j
        for j in range(rows.size):
            if not 0 <= r[j] < self.n:
                raise ValueError(f"row {r[j]} is not one of the batch's {self.n}")
        return rows

    def fail(self, rows_given):
        """Rows whose fetch failed: FAILED, routed no further."""
        cdef cnp.ndarray rows = self._rows(rows_given)
        cdef const int64* r = <const int64*> data(rows)
        cdef Py_ssize_t j
        cdef int64 i, t
        with nogil:
            for j in range(rows.shape[0]):
                i = r[j]
                self.st[i] = FAILED
                self.active[i] = 0
                for t in range(self.T):
                    self.pending[(i >> 6) * self.T + t] &= ~((<uint64> 1) << (i & 63))

    def leaves(self):
        """The leaf each row reached in each tree, -1 where it has not: the routing state becomes this (call it
        when the routing is over)."""
        if not self.leaves_ready:
            with nogil:
                self._to_leaves(0, self.n)
            self.leaves_ready = True
        return self.route

    cdef void _to_leaves(self, Py_ssize_t start, Py_ssize_t stop) noexcept nogil:
        """The routing state of rows [start, stop) becomes the leaves: ~node where a row reached a leaf, else -1."""
        cdef Py_ssize_t k
        cdef int32 node
        for k in range(start * self.T, stop * self.T):
            node = self.rt[k]
            self.rt[k] = ~node if node < 0 else -1

    def raw_score(self, bint average):
        """The raw scores, float64[n, trees per iteration], of the DONE rows from the leaves they reached (0.0 for
        the others), summed as LightGBM's GBDT::PredictRaw sums them (tree t's output to class t % trees per
        iteration, in tree order from the plan's start, 0.0 by default; in float32 with the plan's sum32, as XGBoost's
        predictor); average (rf): divided by the number of iterations."""
        out_ = np.zeros((self.n, self.plan.flat.trees_per_iteration), dtype=np.float64)
        cdef float64* out = <float64*> data(out_)
        cdef Py_ssize_t block
        cdef bint convert = not self.leaves_ready  # the routing state becomes the leaves in the same pass
        with nogil:
            if self.threads == 1:
                self._raw_score(out, average, convert, 0, self.n)
            else:
                for block in prange(self.n_blocks, schedule="static", num_threads=self.threads):
                    self._raw_score(out, average, convert, block * 64, min(self.n, block * 64 + 64))
        self.leaves_ready = True
        return out_

    cdef void _raw_score(self, float64* out, bint average, bint convert, Py_ssize_t start,
                         Py_ssize_t stop) noexcept nogil:
        cdef int64 tpi = self.plan.flat.trees_per_iteration, T = self.T, t, k
        cdef float64 iterations = <float64> (T // tpi), score
        cdef float score32
        cdef const float64* leaf_value = self.plan.leaf_value
        cdef const int64* leaf_offset = self.plan.leaf_offset
        cdef const float64* first = self.plan.start
        cdef bint sum32 = self.plan.sum32
        cdef int32* rt
        cdef Py_ssize_t i
        if convert:
            self._to_leaves(start, stop)
        for i in range(start, stop):
            if self.st[i] != DONE:
                continue
            rt = self.rt + i * T
            if tpi == 1 and sum32:
                score32 = <float> first[0]
                for t in range(T):
                    score32 = score32 + <float> leaf_value[leaf_offset[t] + rt[t]]
                out[i] = score32
            elif tpi == 1:  # one sum in a register: the same additions, in the same order
                score = first[0]
                for t in range(T):
                    score += leaf_value[leaf_offset[t] + rt[t]]
                out[i] = score
            else:
                for k in range(tpi):
                    out[i * tpi + k] = first[k]
                k = 0
                for t in range(T):
                    if sum32:
                        out[i * tpi + k] = <float> (<float> out[i * tpi + k] + <float> leaf_value[leaf_offset[t] + rt[t]])
                    else:
                        out[i * tpi + k] += leaf_value[leaf_offset[t] + rt[t]]
                    k = k + 1 if k + 1 < tpi else 0
            if average and T:
                for k in range(tpi):
                    out[i * tpi + k] /= iterations

    def filled(self):
        """X with 0.0 for the values not known (no split the rows passed reads them)."""
        out_ = np.array(self.X)
        cdef uint64* out = <uint64*> data(out_)
        cdef Py_ssize_t k
        with nogil:
            for k in range(self.n * self.F):
                if out[k] == UNKNOWN:
                    out[k] = 0
        return out_

    def values(self):
        """(X, known) as a result reports them: the members fetched with a group and read by no path known all
        the same, NaN where nothing is known. X becomes this (call it when the run is over)."""
        known_ = np.empty((self.n, self.F), dtype=np.uint8)
        cdef uint8* known = <uint8*> data(known_)
        cdef Py_ssize_t block
        with nogil:
            if self.threads == 1:
                self._values(known, 0, self.n)
            else:
                for block in prange(self.n_blocks, schedule="static", num_threads=self.threads):
                    self._values(known, block * 64, min(self.n, block * 64 + 64))
        return self.X, known_.view(bool)

    cdef void _values(self, uint8* known, Py_ssize_t start, Py_ssize_t stop) noexcept nogil:
        """values() of rows [start, stop)."""
        cdef Py_ssize_t k
        cdef bint unknown
        for k in range(start * self.F, stop * self.F):
            if self.G and (<uint64*> self.h)[k] != UNKNOWN:
                self.x[k] = self.h[k]
            unknown = (<uint64*> self.x)[k] == UNKNOWN
            if unknown:
                self.x[k] = NAN
            known[k] = not unknown


cdef inline void route_rows(const Ensemble* e, int64 t, const Node* tree_nodes, const float64* X, Py_ssize_t n_cols,
                            Py_ssize_t start, Py_ssize_t stop, int32* out, Py_ssize_t stride,
                            const float64* split=NULL, float64* cost=NULL) noexcept nogil:
    """Rows [start, stop) of X through tree t (which has a split) from its root: out[i * stride] = the leaf row i
    reaches; LANES rows at a time, each one node per step (lane_child). With split, cost[i] += split[f] for each node
    row i passes, in path order."""
    cdef int32 node[LANES]
    cdef const float64* x[LANES]
    cdef Py_ssize_t i, k, m
    cdef const Node* nd
    cdef bint moving
    for i in range(start, stop, LANES):
        m = min(<Py_ssize_t> LANES, stop - i)
        for k in range(m):
            node[k] = 0
            x[k] = X + (i + k) * n_cols
        moving = True
        while moving:
            moving = False
            for k in range(m):
                if node[k] < 0:
                    continue
                nd = tree_nodes + node[k]
                if split != NULL:
                    cost[i + k] += split[nd.feature]
                node[k] = lane_child(e, t, nd, x[k][nd.feature])
                moving = True
        for k in range(m):
            out[(i + k) * stride] = ~node[k]


cdef void cost_block(const Ensemble* e, const float64[:, ::1] X, Py_ssize_t block, int64 num_trees, int64 tpi,
                     int64 n_iter, const float64[::1] lazy, const float64[::1] split, const int32[::1] group_of,
                     const float64[::1] group_lazy, uint8* paid, int64* rows_using, float64* curve,
                     float64[::1] acquisition, float64[::1] evaluation) noexcept nogil:
    """FlatEnsemble.cost on the rows of one block of BLOCK, with a thread's scratch: paid (BLOCK rows' paid flags),
    rows_using and curve (added to; curve with n_iter > 0 only: the rows' total after each iteration)."""
    cdef Py_ssize_t n = X.shape[0], n_features = lazy.shape[0] + group_lazy.shape[0], i, f
    cdef Py_ssize_t start = block * BLOCK, stop = min(start + BLOCK, n)
    cdef int64 it, t0, t1
    cdef float64 total
    memset(paid, 0, BLOCK * n_features)
    if n_iter == 0:
        accumulate(e, X, start, stop, 0, num_trees, lazy, split, group_of, group_lazy, paid, acquisition, evaluation)
    else:
        for it in range(n_iter):
            t0 = it * tpi
            t1 = min(t0 + tpi, num_trees)
            accumulate(e, X, start, stop, t0, t1, lazy, split, group_of, group_lazy, paid, acquisition, evaluation)
            total = 0.0
            for i in range(start, stop):
                total = total + acquisition[i] + evaluation[i]
            curve[it] += total
    for i in range(start, stop):
        for f in range(n_features):
            rows_using[f] += paid[(i - start) * n_features + f]


cdef void prefix_block(const Ensemble* e, const float64[:, ::1] X, Py_ssize_t block, const int64[::1] ends,
                       const float64[::1] lazy, const float64[::1] split, const int32[::1] group_of,
                       const float64[::1] group_lazy, uint8* paid, int64* rows_using, const float64* leaf_value,
                       const int64* leaf_offset, int64 tpi, float64[::1] acquisition_run,
                       float64[::1] evaluation_run, float64* scores, float64[:, ::1] acquisition,
                       float64[:, ::1] evaluation, float64* raw) noexcept nogil:
    """FlatEnsemble.prefix_cost on the rows of one block of BLOCK: the trees up to each end in turn, the rows'
    running costs (and with raw, their raw scores: scores[i * tpi + c]) copied out after each; paid and rows_using
    (K x width, added to) a thread's scratch."""
    cdef Py_ssize_t n = X.shape[0], width = lazy.shape[0] + group_lazy.shape[0], i, f, c
    cdef Py_ssize_t start = block * BLOCK, stop = min(start + BLOCK, n), j
    cdef int64 t0 = 0
    memset(paid, 0, BLOCK * width)
    for j in range(ends.shape[0]):
        accumulate(e, X, start, stop, t0, ends[j], lazy, split, group_of, group_lazy, paid, acquisition_run,
                   evaluation_run, NULL, 0, leaf_value, leaf_offset, scores, tpi)
        t0 = ends[j]
        for i in range(start, stop):
            acquisition[j, i] = acquisition_run[i]
            evaluation[j, i] = evaluation_run[i]
            if raw != NULL:
                for c in range(tpi):
                    raw[(j * n + i) * tpi + c] = scores[i * tpi + c]
            for f in range(width):
                rows_using[j * width + f] += paid[(i - start) * width + f]


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
    cdef Py_ssize_t n_cols = X.shape[1], n_features = lazy.shape[0], width = n_features + group_lazy.shape[0], i, f
    cdef int64 t
    cdef int32 root, g
    cdef const Node* tree_nodes
    cdef const Node* nd
    cdef uint8* row_paid
    # the arrays through local pointers (a write through paid, bytes that alias anything, would otherwise make the
    # compiler load them again); a row's evaluation cost is summed in a register in the order of the nodes, so to
    # the same bits as adding each node's cost in memory, and not at all when no split costs anything
    cdef const float64* rows = &X[0, 0]
    cdef const float64* split_cost = &split[0] if n_features else NULL
    cdef const float64* lazy_cost = &lazy[0] if n_features else NULL
    cdef const int32* group = &group_of[0] if n_features else NULL
    cdef float64* acq = &acquisition[0]
    cdef float64* ev = &evaluation[0]
    cdef bint has_split = False
    for f in range(n_features):
        has_split = has_split or split_cost[f] != 0
    cdef int32 node[LANES]
    cdef float64 spending[LANES]
    cdef Py_ssize_t row[LANES]
    cdef Py_ssize_t k, m, j
    cdef bint moving
    for t in range(t0, t1):
        tree_nodes = e.nodes + e.node_offset[t]
        root = 0 if e.node_offset[t + 1] > e.node_offset[t] else ~0  # a tree without splits: leaf 0
        if root < 0 and leaf_value == NULL:
            continue
        # LANES rows at a time, each one node per step (see route_rows)
        j = start
        while j < stop:
            m = 0
            while m < LANES and j < stop:
                if side == NULL or side[j] == want:
                    row[m] = j
                    node[m] = root
                    spending[m] = ev[j]
                    m += 1
                j += 1
            moving = True
            while moving:
                moving = False
                for k in range(m):
                    if node[k] < 0:
                        continue
                    i = row[k]
                    nd = tree_nodes + node[k]
                    f = nd.feature
                    if has_split:
                        spending[k] = spending[k] + split_cost[f]
                    row_paid = paid + (i - start) * width
                    if not row_paid[f]:
                        row_paid[f] = 1
                        acq[i] += lazy_cost[f]
                        g = group[f]
                        if g >= 0 and not row_paid[n_features + g]:
                            row_paid[n_features + g] = 1
                            acq[i] += group_lazy[g]
                    node[k] = lane_child(e, t, nd, rows[i * n_cols + f])
                    moving = True
            for k in range(m):
                i = row[k]
                ev[i] = spending[k]
                if leaf_value != NULL:
                    scores[i * num_scores + t % num_scores] += leaf_value[leaf_offset[t] + ~node[k]]


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
    gate._check_leaves(gate_leaf_value, gate_leaf_offset, "gate")
    f1._check_leaves(f1_leaf_value, f1_leaf_offset, "f1")
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


def xgboost_transform(const float[:, ::1] margin, str name):
    """XGBoost's prediction of each row of float32 margins (one column per output), as its objectives' PredTransform
    computes it in float32 with the C library's expf (the one XGBoost's calls): "sigmoid" (common::Sigmoid: 1.0f /
    (expf(min(-x, 88.7f)) + 1.0f + 1e-16f), one output), "exp" (one output) or "softprob" (common::Softmax: the
    largest margin (fmaxf, in output order) subtracted, expf, the sum in double in output order, each divided by the
    sum as a float)."""
    cdef Py_ssize_t n = margin.shape[0], K = margin.shape[1], i, k
    cdef int kind = 0 if name == "sigmoid" else 1 if name == "exp" else 2 if name == "softprob" else -1
    if kind < 0 or (kind < 2 and K != 1) or K == 0:
        raise ValueError(f"xgboost_transform: {name!r} of {K} outputs")
    out_ = np.empty((n, K), dtype=np.float32)
    cdef float[:, ::1] out = out_
    cdef float one = 1.0, eps = 1e-16, cap = 88.7, value, wmax
    cdef float64 wsum
    with nogil:
        for i in range(n):
            if kind == 0:
                value = -margin[i, 0]
                if cap < value:  # std::min(-x, 88.7f): -x unless 88.7f is below it (a NaN stays)
                    value = cap
                value = expf(value) + one
                value = value + eps
                out[i, 0] = one / value
            elif kind == 1:
                out[i, 0] = expf(margin[i, 0])
            else:
                wmax = margin[i, 0]
                for k in range(1, K):
                    wmax = fmaxf(margin[i, k], wmax)
                wsum = 0.0
                for k in range(K):
                    out[i, k] = expf(margin[i, k] - wmax)
                    wsum += out[i, k]
                for k in range(K):
                    out[i, k] = out[i, k] / <float> wsum
    return out_


def xgboost_margin(float base, str link):
    """The margin XGBoost starts a prediction from, of a float32 ``base_score``, as its objective's ProbToMargin
    computes it in float32: "logit" (clamped to [1e-6f, 1 - 1e-6f], then -logf(1.0f / x - 1.0f)), "log" (logf) or
    "identity"."""
    cdef float x = base, eps = 1e-6, one = 1.0
    if link == "identity":
        return x
    if link == "log":
        return logf(x)
    if link != "logit":
        raise ValueError(f"xgboost_margin: link {link!r}")
    if x < eps:
        x = eps
    if one - eps < x:
        x = one - eps
    x = one / x - one
    return -logf(x)


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


cdef inline void softmax_row(const float64* score, float64* out, Py_ssize_t C) noexcept nogil:
    """LightGBM's multiclass output of one row's C raw scores (Common::Softmax): the largest score (std::max, in
    class order) subtracted, the C library's exp, the sum in class order, each divided by it."""
    cdef float64 wmax = score[0], wsum = 0.0
    cdef Py_ssize_t c
    for c in range(1, C):
        wmax = score[c] if not (score[c] < wmax) else wmax
    for c in range(C):
        out[c] = exp(score[c] - wmax)
        wsum += out[c]
    for c in range(C):
        out[c] /= wsum


def softmax(const float64[:, ::1] raw):
    """LightGBM's multiclass output (MulticlassSoftmax::ConvertOutput) of each row of raw scores, as softmax_row
    computes it."""
    out_ = np.empty((raw.shape[0], raw.shape[1]), dtype=np.float64)
    cdef float64[:, ::1] out = out_
    cdef Py_ssize_t i
    if raw.shape[1] == 0:
        return out_
    with nogil:
        for i in range(raw.shape[0]):
            softmax_row(&raw[i, 0], &out[i, 0], raw.shape[1])
    return out_


cdef class StageStack:
    """The stages of a staged model compiled as one (lightgbm_cegb/methods/ladder.py): stage 0 answers the prior (one
    raw score, or class probabilities), stage k >= 1 a LightGBM model (a FlatEnsemble, its first num_trees[k - 1]
    trees and their leaf values) that reads the columns columns[k] marks (columns: uint8[num stages + 1,
    num_features]), every other one missing (NaN). The outputs (num_class of them per row: 1 for a raw score) are
    computed as LightGBM's predict computes them, operation for operation: the trees' outputs added to their class
    (tree t to t % trees per iteration) in tree order from 0.0 (GBDT::PredictRaw), then nothing more (one output:
    the raw score, for objectives whose ConvertOutput is the identity), binary's sigmoid at ``scale``
    (BinaryLogloss::ConvertOutput; the class-1 probability p, with 1.0 - p for class 0) or the multiclass softmax
    (Common::Softmax: the largest score subtracted, exp, the sum in class order, each divided by it), with the C
    library's exp that LightGBM's std::exp calls. Every index is checked here, once (the forests were checked by
    their Forest).

    A continued stack (``continued``: stage k's trees were trained from the scores of stages 1 to k - 1, each stage
    reading its own columns) gives at stage k >= 2 the sum of the stage's own trees' scores (from 0.0, as above) and
    the row's scores at stage k - 1 (``below + own``, per class), before the output is computed; stage 1's are its
    own. Its methods take the rows' scores (tpi per row) in and out."""

    cdef object keep
    cdef const Ensemble** ens
    cdef const int64** leaf_offset
    cdef const float64** leaf_value
    cdef const int64* num_trees
    cdef const uint8* columns
    cdef const float64* prior
    cdef readonly Py_ssize_t num_stages, num_features, num_class
    cdef float64 scale
    cdef readonly bint continued
    cdef object source  # the constructor's arguments, for __reduce__

    def __cinit__(self, list forests, num_trees, list leaf_offsets, list leaf_values, Py_ssize_t num_features,
                  columns, prior, float64 scale, bint continued=False):
        cdef Py_ssize_t S = len(forests), F = num_features, k, t
        cdef FlatEnsemble flat
        cdef cnp.ndarray prior_ = np.ascontiguousarray(prior, dtype=np.float64)
        cdef Py_ssize_t C = prior_.size
        self.source = (forests, num_trees, leaf_offsets, leaf_values, num_features, columns, prior, scale, continued)
        if C < 1:
            raise ValueError("prior should hold one raw score, or 2 or more class probabilities, got none")
        if len(leaf_offsets) != S or len(leaf_values) != S:
            raise ValueError(f"{S} forests need as many leaf offsets and values")
        cdef cnp.ndarray trees_ = owned(num_trees, np.int64, S)
        cdef cnp.ndarray columns_ = owned(columns, np.uint8, (S + 1) * F)
        pointers = np.zeros(3 * max(S, 1), dtype=np.uintp)
        self.ens = <const Ensemble**> data(pointers)
        self.leaf_offset = <const int64**> (self.ens + max(S, 1))
        self.leaf_value = <const float64**> (self.ens + 2 * max(S, 1))
        kept = [prior_, trees_, columns_, pointers]
        for k in range(S):
            flat = forests[k]
            if flat.num_features != F:
                raise ValueError(f"stage {k + 1}'s forest reads {flat.num_features} features, the stages {F}")
            if flat.trees_per_iteration != (1 if C <= 2 else C):
                raise ValueError(f"stage {k + 1}'s forest has {flat.trees_per_iteration} trees per iteration, "
                                 f"{C} outputs take {1 if C <= 2 else C}")
            if not 0 <= (<int64*> data(trees_))[k] <= flat.num_trees:
                raise ValueError(f"stage {k + 1} uses {(<int64*> data(trees_))[k]} of its {flat.num_trees} trees")
            offset_ = owned(leaf_offsets[k], np.int64, flat.num_trees + 1)
            value_ = np.ascontiguousarray(leaf_values[k], dtype=np.float64)
            if offset_[0] != 0 or offset_[flat.num_trees] != value_.size:
                raise ValueError(f"stage {k + 1}'s leaf offsets do not match its leaf values")
            for t in range(flat.num_trees):
                if offset_[t + 1] - offset_[t] != flat.e.node_offset[t + 1] - flat.e.node_offset[t] + 1:
                    raise ValueError(f"stage {k + 1}'s tree {t} should have one leaf more than split nodes")
            self.ens[k] = &flat.e
            self.leaf_offset[k] = <const int64*> data(offset_)
            self.leaf_value[k] = <const float64*> data(value_)
            kept += [flat, offset_, value_]
        self.keep = kept
        self.num_trees = <const int64*> data(trees_)
        self.columns = <const uint8*> data(columns_)
        self.prior = <const float64*> data(prior_)
        self.num_stages, self.num_features, self.num_class, self.scale = S + 1, F, C, scale
        self.continued = continued

    cdef inline Py_ssize_t _scores_per_row(self) noexcept nogil:
        return 1 if self.num_class <= 2 else self.num_class

    cdef float64* _raw(self, object raw, Py_ssize_t n) except? NULL:
        """A continued stack's scores of n rows (float64[n, tpi], C-contiguous and writable), checked; NULL for a
        stack that is not continued."""
        if not self.continued:
            if raw is not None:
                raise ValueError("raw scores are read and written by a continued stack only")
            return NULL
        if not isinstance(raw, np.ndarray) or raw.dtype != np.float64 or raw.shape != (n, self._scores_per_row()) \
                or not raw.flags.c_contiguous or not raw.flags.writeable:
            raise ValueError(f"a continued stack takes the rows' scores as a writable C-contiguous float64 array of "
                             f"shape ({n}, {self._scores_per_row()}), got {type(raw).__name__} "
                             f"{getattr(raw, 'shape', '')}")
        return <float64*> data(raw) if n else NULL

    def __reduce__(self):
        """Pickled as its arguments (it holds pointers into them)."""
        return StageStack, self.source

    cdef void _check(self, const float64[:, ::1] X, Py_ssize_t k) except *:
        if X.shape[1] != self.num_features:
            raise ValueError(f"X has {X.shape[1]} columns, the stages {self.num_features} features")
        if not 0 <= k < self.num_stages:
            raise ValueError(f"stage {k} is not one of the {self.num_stages} stages")

    def proba(self, const float64[:, ::1] X, Py_ssize_t k, int num_threads, raw=None):
        """Stage k's class probabilities of the rows X, as they are (NaN: missing), float64[n, num_class]. A continued
        stack's ``raw`` (float64[n, tpi]) holds the rows' scores at stage k - 1 (read from stage 2 on) and is left
        holding stage k's (untouched at stage 0)."""
        self._check(X, k)
        cdef Py_ssize_t n = X.shape[0], block
        cdef float64* scores = self._raw(raw, n)
        out_ = np.empty((n, self.num_class), dtype=np.float64)
        if n == 0:
            return out_
        cdef float64[:, ::1] out = out_
        cdef int failed = 0
        if k == 0:
            out_[:] = self.keep[0]
            return out_
        if num_threads <= 1 or n <= BLOCK:
            with nogil:
                for block in range(0, n, BLOCK):
                    failed |= self._stage(k, &X[0, 0], NULL, block, min(block + BLOCK, n), NULL, &out[0, 0], NULL,
                                          NULL, scores)
        else:
            with nogil:
                for block in prange(0, n, BLOCK, schedule="static", num_threads=num_threads):
                    failed |= self._stage(k, &X[0, 0], NULL, block, min(block + BLOCK, n), NULL, &out[0, 0], NULL,
                                          NULL, scores)
        if failed:
            raise MemoryError("StageStack.proba: no memory for a block of rows")
        return out_

    def ladder(self, const float64[:, ::1] X, float64 threshold, Py_ssize_t last, int num_threads):
        """Every row up the ladder from stage 0, reading at stage k only the columns it marks: it stops at the first
        stage whose top probability is at least threshold, or at stage last. Returns (stop int64[n], the stop
        stage's probabilities float64[n, num_class])."""
        self._check(X, last)
        cdef Py_ssize_t n = X.shape[0], block
        stop_ = np.zeros(n, dtype=np.int64)
        out_ = np.empty((n, self.num_class), dtype=np.float64)
        if n == 0:
            return stop_, out_
        cdef int64[::1] stop = stop_
        cdef float64[:, ::1] out = out_
        cdef int failed = 0
        raw_ = np.empty((n, self._scores_per_row()), dtype=np.float64) if self.continued else None
        cdef float64* raw = self._raw(raw_, n)
        if num_threads <= 1 or n <= BLOCK:
            with nogil:
                for block in range(0, n, BLOCK):
                    failed |= self._climb(&X[0, 0], block, min(block + BLOCK, n), threshold, last, &stop[0],
                                          &out[0, 0], raw)
        else:
            with nogil:
                for block in prange(0, n, BLOCK, schedule="static", num_threads=num_threads):
                    failed |= self._climb(&X[0, 0], block, min(block + BLOCK, n), threshold, last, &stop[0],
                                          &out[0, 0], raw)
        if failed:
            raise MemoryError("StageStack.ladder: no memory for a block of rows")
        return stop_, out_

    cdef int _climb(self, const float64* X, Py_ssize_t start, Py_ssize_t stop, float64 threshold, Py_ssize_t last,
                    int64* stage, float64* out, float64* raw) noexcept nogil:
        """ladder() on rows [start, stop): the rows still climbing move up one stage at a time, together (0; -1 when
        _stage had no memory); raw: a continued stack's scores of the rows (NULL otherwise)."""
        cdef Py_ssize_t C = self.num_class, i, c, m = 0, k, kept
        cdef Py_ssize_t rows[BLOCK]
        cdef float64 top
        for i in range(start, stop):
            stage[i] = 0
            for c in range(C):
                out[i * C + c] = self.prior[c]
            top = self.prior[0]
            for c in range(1, C):
                top = max(top, self.prior[c])
            if top < threshold and last > 0:
                rows[m] = i
                m += 1
        k = 0
        while m and k < last:
            k += 1
            if self._stage(k, X, self.columns + k * self.num_features, 0, m, rows, out, NULL, NULL, raw):
                return -1
            kept = 0
            for i in range(m):
                stage[rows[i]] = k
                top = out[rows[i] * C]
                for c in range(1, C):
                    top = max(top, out[rows[i] * C + c])
                if top < threshold:
                    rows[kept] = rows[i]
                    kept += 1
            m = kept
        return 0

    cdef int _stage(self, Py_ssize_t k, const float64* X, const uint8* reads, Py_ssize_t start, Py_ssize_t stop,
                     const Py_ssize_t* rows, float64* out, const float64* split=NULL, float64* spent=NULL,
                     float64* raw=NULL) noexcept nogil:
        """0, or -1 when the block's memory could not be had (out untouched). Stage k's probabilities of rows [start, stop) (at most BLOCK: of X's rows, or rows[start:stop] when rows is
        not NULL) into out (row i's at out[i * num_class]). The rows' values are copied into a block first, a column
        that reads does not mark as NaN (reads NULL: X as it is); then tree by tree through route_rows, each tree's
        output added to its class's score. With split, spent[i] becomes the split costs of
        the nodes row i passes, added from 0.0 tree by tree in path order (as FlatEnsemble.cost adds them). With raw
        (a continued stack's), row i's scores at raw[i * tpi] are read (from stage 2 on: below + own) and replaced by
        stage k's."""
        cdef const Ensemble* e = self.ens[k - 1]
        cdef const int64* leaf_offset = self.leaf_offset[k - 1]
        cdef const float64* leaf_value = self.leaf_value[k - 1]
        cdef Py_ssize_t F = self.num_features, C = self.num_class, tpi = self._scores_per_row(), n = stop - start
        cdef Py_ssize_t i, j, c, f, cls = 0
        cdef int64 t
        cdef int32 leaf[BLOCK]
        cdef float64* o
        # the block's values, then its scores (tpi per row), then its split costs
        cdef float64* block = <float64*> malloc(max(n, 1) * (F + tpi + 1) * sizeof(float64))
        cdef float64* score = block + n * F
        cdef float64* cost = score + n * tpi
        if block == NULL:
            return -1
        for j in range(n):
            i = rows[start + j] if rows != NULL else start + j
            for f in range(F):
                block[j * F + f] = X[i * F + f] if reads == NULL or reads[f] else NAN
            for c in range(tpi):
                score[j * tpi + c] = 0.0
            cost[j] = 0.0
        for t in range(self.num_trees[k - 1]):
            if e.node_offset[t + 1] > e.node_offset[t]:
                route_rows(e, t, e.nodes + e.node_offset[t], block, F, 0, n, leaf, 1, split, cost)
            else:  # a tree without splits: leaf 0
                memset(leaf, 0, n * sizeof(int32))
            for j in range(n):
                score[j * tpi + cls] += leaf_value[leaf_offset[t] + leaf[j]]
            cls += 1
            if cls == tpi:
                cls = 0
        for j in range(n):
            i = rows[start + j] if rows != NULL else start + j
            if split != NULL:
                spent[i] = cost[j]
            if raw != NULL:
                for c in range(tpi):
                    if k > 1:
                        score[j * tpi + c] = raw[i * tpi + c] + score[j * tpi + c]
                    raw[i * tpi + c] = score[j * tpi + c]
            o = out + i * C
            if C == 1:  # the raw score (GBDT::Predict of an objective whose output is its raw score)
                o[0] = score[j]
                continue
            if C == 2:
                o[1] = 1.0 / (1.0 + exp(-self.scale * score[j]))
                o[0] = 1.0 - o[1]
                continue
            softmax_row(score + j * tpi, o, C)
        free(block)
        return 0


cdef tuple batch_arrays(X, known, Py_ssize_t F):
    """A batch's X (float64) and known (uint8) as C-contiguous arrays of F columns: the arrays themselves when they are
    so (a bool known viewed as uint8; the batch writes fetched values into them), else copies."""
    cdef cnp.ndarray X_ = np.require(X, dtype=np.float64, requirements=("C", "W"))
    if X_.ndim != 2 or X_.shape[1] != F:
        raise ValueError(f"X should have {F} columns, got shape {np.shape(X_)}")
    known = np.require(known, requirements=("C", "W"))
    cdef cnp.ndarray known_ = known.view(np.uint8) if known.dtype == np.bool_ else \
        np.require(known, dtype=np.uint8, requirements=("C", "W"))
    if known_.ndim != 2 or known_.shape[0] != X_.shape[0] or known_.shape[1] != F:
        raise ValueError(f"known should have X's shape {np.shape(X_)}, got {np.shape(known_)}")
    return X_, known_


cdef class UnitPlan:
    """What every compiled run of one acquisition model shares (LadderPlan, PolicyPlan): its StageStack, the policy
    units (unit u's columns: member[unit_offset[u]:unit_offset[u + 1]]) and the costs (each feature's lazy and split
    cost and group, -1 for none, each group's lazy cost, the cost of a tree). Every index is checked here, once."""

    cdef StageStack stack
    cdef object keep, source  # source: the constructor's arguments, for __reduce__
    cdef const int64* unit_offset
    cdef const int64* member
    cdef const float64* lazy
    cdef const int32* group_of
    cdef const float64* group_lazy
    cdef const float64* split
    cdef float64 tree_cost
    cdef bint costs  # a split or a tree costs something: the evaluations are priced
    cdef Py_ssize_t F, G, U

    cdef void _units_and_costs(self, StageStack stack, unit_offset, member, lazy, group_of, group_lazy, split,
                               float64 tree_cost) except *:
        """The subclass's constructor's common part: the units and the costs, checked."""
        cdef Py_ssize_t F = stack.num_features, k, U
        cdef cnp.ndarray offset_ = np.ascontiguousarray(unit_offset, dtype=np.int64)
        U = offset_.size - 1
        cdef cnp.ndarray member_ = np.ascontiguousarray(member, dtype=np.int64)
        cdef cnp.ndarray lazy_ = owned(lazy, np.float64, F), split_ = owned(split, np.float64, F)
        cdef cnp.ndarray group_of_ = owned(group_of, np.int32, F)
        cdef cnp.ndarray group_lazy_ = np.ascontiguousarray(group_lazy, dtype=np.float64)
        self.keep = (offset_, member_, lazy_, split_, group_of_, group_lazy_)
        self.unit_offset, self.member = <const int64*> data(offset_), <const int64*> data(member_)
        self.lazy, self.split = <const float64*> data(lazy_), <const float64*> data(split_)
        self.group_of, self.group_lazy = <const int32*> data(group_of_), <const float64*> data(group_lazy_)
        self.stack, self.tree_cost, self.F, self.G, self.U = stack, tree_cost, F, group_lazy_.size, U
        if U < 0 or self.unit_offset[0] != 0 or self.unit_offset[U] != member_.size:
            raise ValueError("unit offsets do not match the members")
        for k in range(U):
            if self.unit_offset[k + 1] < self.unit_offset[k]:
                raise ValueError(f"unit {k}'s offsets decrease")
        for k in range(member_.size):
            if not 0 <= self.member[k] < F:
                raise ValueError(f"unit member {self.member[k]} is not one of the {F} features")
        self.costs = tree_cost != 0
        for k in range(F):
            if not -1 <= self.group_of[k] < self.G:
                raise ValueError(f"feature {k}'s group {self.group_of[k]} is not one of the {self.G} groups")
            self.costs = self.costs or self.split[k] != 0

    def __reduce__(self):
        """Pickled as its arguments (it holds pointers into them)."""
        return type(self), self.source


cdef class LadderPlan(UnitPlan):
    """What every lazy run of one staged model shares (LadderBatch): a UnitPlan and the ladder (stage k + 1 buys the
    units order[stage_units[k]:stage_units[k + 1]])."""

    cdef const int64* stage_units
    cdef const int64* order

    def __cinit__(self, StageStack stack, unit_offset, member, stage_units, order, lazy, group_of, group_lazy, split,
                  float64 tree_cost):
        self.source = (stack, unit_offset, member, stage_units, order, lazy, group_of, group_lazy, split, tree_cost)
        self._units_and_costs(stack, unit_offset, member, lazy, group_of, group_lazy, split, tree_cost)
        cdef cnp.ndarray stage_units_ = owned(stage_units, np.int64, stack.num_stages)
        cdef cnp.ndarray order_ = np.ascontiguousarray(order, dtype=np.int64)
        self.keep += (stage_units_, order_)
        self.stage_units, self.order = <const int64*> data(stage_units_), <const int64*> data(order_)
        cdef Py_ssize_t k
        for k in range(order_.size):
            if not 0 <= self.order[k] < self.U:
                raise ValueError(f"order's unit {self.order[k]} is not one of the {self.U} units")
        if self.stage_units[0] != 0 or self.stage_units[stack.num_stages - 1] > order_.size:
            raise ValueError(f"stage_units should rise from 0 to at most the {order_.size} units of order")
        for k in range(1, stack.num_stages):
            if self.stage_units[k] < self.stage_units[k - 1]:
                raise ValueError("stage_units should rise")


cdef class UnitBatch:
    """What a compiled run keeps of its batch of rows (LadderBatch, PolicyBatch): X and known (the batch's own: it writes
    the fetched values into them, see batch_arrays), which values were fetched, each row's probabilities (its stage's
    or the policy classifier's) and what it has paid (lazy costs per feature and group; split and tree costs).

    deliver() stores what a fetch of a unit returned for some rows (a value given in X stays; any NaN is a missing
    value) and tells the subclass each row bought the unit (_bought: by default, the unit's lazy costs are charged,
    each feature's and its group's once, in the unit's column order: CostState.pay's arithmetic); fetch_round() calls
    fetch and stores what it can itself. Every row index given is checked."""

    cdef UnitPlan units
    cdef StageStack stack
    cdef readonly object X, known, fetched, proba, acquisition, evaluation
    cdef object paid_, cost_, prior_, every_row
    cdef float64* x
    cdef uint8* kn
    cdef uint8* fe
    cdef uint8* paid
    cdef float64* pr
    cdef float64* acq
    cdef float64* ev
    cdef float64* cost  # a row's split costs in one evaluation
    cdef readonly Py_ssize_t n
    cdef Py_ssize_t F
    cdef int threads

    cdef void _start(self, UnitPlan units, X, known, prior, int num_threads) except *:
        """The subclass's constructor's common part: the rows' arrays, every row at ``prior``'s probabilities."""
        cdef StageStack stack = units.stack
        cdef Py_ssize_t F = units.F
        cdef cnp.ndarray X_, known_
        X_, known_ = batch_arrays(X, known, F)
        cdef Py_ssize_t n = X_.shape[0]
        self.units, self.stack, self.F, self.n, self.threads = units, stack, F, n, max(num_threads, 1)
        self.X, self.known = X_, known_
        self.fetched = np.zeros((n, F), dtype=np.uint8)
        self.proba = np.empty((n, stack.num_class), dtype=np.float64)
        self.prior_ = owned(prior, np.float64, stack.num_class)
        self.proba[:] = self.prior_
        self.acquisition = np.zeros(n, dtype=np.float64)
        self.evaluation = np.zeros(n, dtype=np.float64)
        self.paid_ = np.zeros((n, F + units.G), dtype=np.uint8)
        self.cost_ = np.zeros(n, dtype=np.float64)
        self.x, self.kn, self.fe = <float64*> data(X_), <uint8*> data(known_), <uint8*> data(self.fetched)
        self.pr, self.paid = <float64*> data(self.proba), <uint8*> data(self.paid_)
        self.acq, self.ev = <float64*> data(self.acquisition), <float64*> data(self.evaluation)
        self.cost = <float64*> data(self.cost_)

    cdef void _bought(self, Py_ssize_t unit, Py_ssize_t i) noexcept nogil:
        """Row i bought ``unit`` by a fetch (its values stored): charged for it."""
        self._pay(unit, i)

    cdef void _restarted(self) except *:
        """The subclass's state of a batch made again (restart): as its constructor leaves it."""

    def restart(self, const float64[::1] x, known):
        """The batch again from nothing, for a row of one request (a batch of one row): x its F values and known a
        uint8 array of those it gives, or None for its non-NaN ones (both copied); a NaN given is a missing value. Its
        arrays are the same: a prepared predictor serves request after request on one batch."""
        cdef Py_ssize_t F = self.F, C = self.stack.num_class, f
        cdef const uint8[::1] kn
        if self.n != 1 or x.shape[0] != F:
            raise ValueError(f"restart takes the {F} values of a batch of one row")
        if known is not None:
            kn = known
            if kn.shape[0] != F:
                raise ValueError("known does not match x")
        cdef const float64* prior = <const float64*> data(self.prior_)
        for f in range(F):
            self.kn[f] = (kn[f] != 0) if known is not None else not isnan(x[f])
            self.x[f] = (NAN if isnan(x[f]) else x[f]) if self.kn[f] else NAN
            self.fe[f] = 0
        memset(self.paid, 0, F + self.units.G)
        for f in range(C):
            self.pr[f] = prior[f]
        self.acq[0] = self.ev[0] = self.cost[0] = 0.0
        self._restarted()

    def serve_row(self, fetch, list keys, ids, list key_of, list rank):
        """A batch of one row (see restart) through its rounds: each round's requests in the order of rank (of each
        policy unit), fetch(keys[key_of[unit]], ids) for each, a one-column unit's values stored as fetch_round stores
        them. Returns (rounds, calls, None) when the row buys nothing more; at the end of the first round with a call
        whose values were not stored (fetch raised, or returned anything else), (rounds, calls, (requests, outcomes)):
        the round's requests as (key_of[unit], rows), in order, their outcomes as fetch_round's, for the caller to
        deliver (and go on from)."""
        cdef Py_ssize_t rounds = 0, calls = 0, count, j, k
        cdef int64 u
        cdef UnitPlan units = self.units
        cdef cnp.ndarray array
        if self.n != 1 or len(key_of) != units.U or len(rank) != units.U:
            raise ValueError("serve_row serves a batch of one row, with a key and a rank per unit")
        while True:
            requests = self.advance()
            if not requests:
                return rounds, calls, None
            rounds += 1
            if len(requests) > 1:
                requests.sort(key=lambda request: rank[request[0]])
            outcomes = None
            count = 0
            for u, rows in requests:
                if not 0 <= u < units.U:
                    raise ValueError(f"unit {u} is not one of the {units.U} units")
                calls += 1
                count += 1
                values = called(fetch, keys[key_of[u]], ids)
                if units.unit_offset[u + 1] - units.unit_offset[u] == 1 and one_value_per_row(values, 1):
                    array = values
                    self._store_one(u, (<const float64*> data(array))[0])
                    values = STORED
                outcomes = with_outcome(outcomes, values, count)
            if outcomes is not None:
                return rounds, calls, ([(key_of[u], rows) for u, rows in requests], outcomes)

    cdef void _store_one(self, Py_ssize_t unit, float64 value) noexcept:
        """deliver of one value of a one-column unit to row 0."""
        cdef Py_ssize_t f = self.units.member[self.units.unit_offset[unit]]
        if not self.kn[f]:
            self.x[f] = NAN if isnan(value) else value
            self.kn[f] = 1
            self.fe[f] = 1
        self._bought(unit, 0)

    cdef void _pay(self, Py_ssize_t unit, Py_ssize_t i) noexcept nogil:
        """Row i is charged ``unit``'s lazy costs: each feature's and its group's once, in the unit's column order."""
        cdef Py_ssize_t F = self.F, W = self.F + self.units.G, b, f, g
        for b in range(self.units.unit_offset[unit], self.units.unit_offset[unit + 1]):
            f = self.units.member[b]
            if not self.paid[i * W + f]:
                self.paid[i * W + f] = 1
                self.acq[i] += self.units.lazy[f]
                g = self.units.group_of[f]
                if g >= 0 and not self.paid[i * W + F + g]:
                    self.paid[i * W + F + g] = 1
                    self.acq[i] += self.units.group_lazy[g]

    def fetch_round(self, list requests, list units, fetch, list keys, ids):
        """Call fetch(keys[key], row ids) for each request (key, rows) of a round in turn (row ids: ids[rows], or rows
        when ids is None), whose policy unit is units[j]. Values of a one-column unit returned as a C-contiguous
        float64 array of one value per row are stored at once, as deliver stores them; anything else (a group's
        values, other types, the exception fetch raised) is left to the caller. Returns each call's outcome, STORED
        for those stored; None when every call's values were stored."""
        cdef const int64* unit_offset = self.units.unit_offset
        cdef Py_ssize_t num_units = self.units.U
        cdef Py_ssize_t j
        cdef int64 unit
        cdef bint every = True
        outcomes = [None] * len(requests)
        for j in range(len(requests)):
            key, rows = requests[j]
            unit = units[j]
            try:
                values = fetch(keys[key], rows if ids is None else ids[rows])
            except Exception as exc:  # the user's fetch: the caller reports it with its key and rows
                outcomes[j] = exc
                every = False
                continue
            if 0 <= unit < num_units and unit_offset[unit + 1] - unit_offset[unit] == 1 \
                    and one_value_per_row(values, len(rows)):
                self.deliver(unit, rows, values)
                outcomes[j] = STORED
                continue
            outcomes[j] = values
            every = False
        return None if every else outcomes

    def deliver(self, int64 unit, rows, values):
        """Rows ``rows`` bought ``unit``: values float64[len(rows), its columns] (see the class)."""
        cdef UnitPlan units = self.units
        if not 0 <= unit < units.U:
            raise ValueError(f"unit {unit} is not one of the {units.U} units")
        cdef cnp.ndarray r_ = np.ascontiguousarray(rows, dtype=np.int64).reshape(-1)
        cdef Py_ssize_t width = units.unit_offset[unit + 1] - units.unit_offset[unit], m = r_.size, j, b, i, f
        cdef cnp.ndarray v_ = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
        if v_.size != m * width:
            raise ValueError(f"{v_.size} values for {m} rows of width {width}")
        cdef const int64* r = <const int64*> data(r_)
        cdef const float64* v = <const float64*> data(v_)
        cdef const int64* cols = units.member + units.unit_offset[unit]
        cdef Py_ssize_t F = self.F
        self._check_rows(r, m)
        with nogil:
            for j in range(m):
                i = r[j]
                for b in range(width):
                    f = cols[b]
                    if not self.kn[i * F + f]:
                        self.x[i * F + f] = NAN if isnan(v[j * width + b]) else v[j * width + b]
                        self.kn[i * F + f] = 1
                        self.fe[i * F + f] = 1
                self._bought(unit, i)

    cdef void _check_rows(self, const int64* r, Py_ssize_t m) except *:
        """A ValueError unless each of the m rows r is one of the batch's."""
        cdef Py_ssize_t j
        for j in range(m):
            if not 0 <= r[j] < self.n:
                raise ValueError(f"row {r[j]} is not one of the batch's {self.n}")


cdef class LadderBatch(UnitBatch):
    """One batch of rows climbing a LadderPlan's stages lazily (lightgbm_cegb/serving/runs.py's CompiledPolicyRun):
    a UnitBatch, with each row's stage.

    Each advance() first moves the rows that bought their next stage's units to it (its probabilities, and its split
    and tree costs when the plan prices them: the split costs of the nodes passed, added from 0.0, plus tree_cost per
    tree, as prediction_cost prices one evaluation), then keeps climbing the rows whose top probability is below
    threshold, up to stage last: a unit whose every column a row knows (given in X, or fetched) is handed to it
    unfetched and unpaid, the others are the round's requests [(unit, rows int64[...])] in the stage's unit order
    (none: those rows move at once). drop() takes rows off the climb where they stand."""

    cdef LadderPlan plan
    cdef readonly object stage
    cdef object climbing_, dropped_, raw_
    cdef float64* raw  # a continued stack's scores of the rows (NULL otherwise)
    cdef int64* stg
    cdef Py_ssize_t* climbing
    cdef uint8* dropped
    cdef float64 threshold
    cdef Py_ssize_t last, m
    cdef bint bought  # the climbing rows were given their next stage's units: they move at the next advance

    def __cinit__(self, LadderPlan plan, X, known, float64 threshold, Py_ssize_t last, int num_threads):
        if not 0 <= last < plan.stack.num_stages:
            raise ValueError(f"stage {last} is not one of the {plan.stack.num_stages} stages")
        self._start(plan, X, known, plan.stack.keep[0], num_threads)
        cdef Py_ssize_t n = self.n
        self.plan, self.threshold, self.last = plan, threshold, last
        self.stage = np.zeros(n, dtype=np.int64)
        self.climbing_ = np.arange(n, dtype=np.intp)
        self.dropped_ = np.zeros(n, dtype=np.uint8)
        self.stg = <int64*> data(self.stage)
        self.climbing, self.dropped = <Py_ssize_t*> data(self.climbing_), <uint8*> data(self.dropped_)
        self.m, self.bought = n, False
        self.raw_ = np.empty((n, self.stack._scores_per_row()), dtype=np.float64) if self.stack.continued else None
        self.raw = self.stack._raw(self.raw_, n)

    cdef void _restarted(self) except *:
        self.stg[0], self.climbing[0], self.dropped[0] = 0, 0, 0
        self.m, self.bought = 1, False

    def advance(self):
        """Move the rows that bought their units, then the next round's requests (see the class): [(unit, rows)] in
        the stage's unit order; [] when no row climbs further."""
        cdef Py_ssize_t F = self.F, C = self.stack.num_class, i, j, c, kept, k, a, b, count
        cdef int64 u
        cdef int64* out
        cdef float64 top
        cdef bint lacking
        while True:
            if self.bought:
                self._move()
            if self.m == 0:
                return []
            k = self.stg[self.climbing[0]]  # the climbing rows are all at one stage
            kept = 0
            if k < self.last:
                for j in range(self.m):
                    i = self.climbing[j]
                    top = self.pr[i * C]
                    for c in range(1, C):
                        top = max(top, self.pr[i * C + c])
                    if top < self.threshold:
                        self.climbing[kept] = i
                        kept += 1
            self.m = kept
            if kept == 0:
                return []
            self.bought = True
            requests = []
            for a in range(self.plan.stage_units[k], self.plan.stage_units[k + 1]):
                u = self.plan.order[a]
                rows_ = np.empty(self.m, dtype=np.int64)
                out = <int64*> data(rows_)
                count = 0
                for j in range(self.m):
                    i = self.climbing[j]
                    lacking = False
                    for b in range(self.plan.unit_offset[u], self.plan.unit_offset[u + 1]):
                        if not self.kn[i * F + self.plan.member[b]]:
                            lacking = True
                            break
                    if lacking:
                        out[count] = i
                        count += 1
                if count:
                    requests.append((int(u), rows_[:count]))
            if requests:
                return requests

    cdef void _move(self) except *:
        """The climbing rows not dropped move up one stage: its probabilities (and costs) from what they know."""
        cdef Py_ssize_t j, kept = 0, i, k
        for j in range(self.m):
            if not self.dropped[self.climbing[j]]:
                self.climbing[kept] = self.climbing[j]
                kept += 1
        self.m = kept
        self.bought = False
        if kept == 0:
            return
        k = self.stg[self.climbing[0]] + 1
        cdef bint costs = self.plan.costs
        cdef float64 tree_cost = self.plan.tree_cost
        cdef const uint8* reads = self.stack.columns + k * self.F
        cdef const float64* split = self.plan.split if costs else NULL
        cdef Py_ssize_t block
        cdef int failed = 0
        with nogil:
            if self.threads == 1 or kept <= BLOCK:  # a block's rows through every tree, while they are in cache
                for block in range(0, kept, BLOCK):
                    failed |= self.stack._stage(k, self.x, reads, block, min(block + BLOCK, kept), self.climbing,
                                                self.pr, split, self.cost, self.raw)
            else:
                for block in prange(0, kept, BLOCK, schedule="static", num_threads=self.threads):
                    failed |= self.stack._stage(k, self.x, reads, block, min(block + BLOCK, kept), self.climbing,
                                                self.pr, split, self.cost, self.raw)
        if failed:  # some rows' probabilities are the next stage's, some not: the batch cannot go on
            self.m = 0
            raise MemoryError("LadderBatch: no memory for a block of rows")
        with nogil:
            for j in range(kept):
                i = self.climbing[j]
                self.stg[i] = k
                if costs:
                    self.ev[i] += self.cost[i] + tree_cost * <float64> self.stack.num_trees[k - 1]

    def drop(self, rows):
        """Rows that cannot go on (a failed fetch) stay at the stage they reached."""
        cdef cnp.ndarray r_ = np.ascontiguousarray(rows, dtype=np.int64).reshape(-1)
        cdef const int64* r = <const int64*> data(r_)
        cdef Py_ssize_t j
        self._check_rows(r, r_.size)
        for j in range(r_.size):
            self.dropped[r[j]] = 1


cdef void unit_gains(const float64* p, const float64* tables, Py_ssize_t num_units, Py_ssize_t num_class,
                     Py_ssize_t num_outcomes, bint entropy, float64 tolerance, float64* out) noexcept nogil:
    """The adaptive acquisition's expected gain of every unit for one row of class probabilities p, into
    out[0:num_units] (see ``gains``); tables[(u * num_class + c) * num_outcomes + a] = T[u, c, a]."""
    cdef Py_ssize_t u, c, a
    cdef float64 top = p[0], total, best, joint, outcome, gain
    cdef const float64* t
    for c in range(1, num_class):
        if p[c] > top:
            top = p[c]
    for u in range(num_units):
        t = tables + u * num_class * num_outcomes
        total = 0.0
        for a in range(num_outcomes):
            if entropy:
                outcome = 0.0
                for c in range(num_class):
                    outcome = outcome + p[c] * t[c * num_outcomes + a]
                for c in range(num_class):
                    joint = p[c] * t[c * num_outcomes + a]
                    if joint > 0:
                        total = total + joint * log(joint / (p[c] * outcome))
            else:
                best = p[0] * t[a]
                for c in range(1, num_class):
                    joint = p[c] * t[c * num_outcomes + a]
                    if joint > best:
                        best = joint
                total = total + best
        gain = total if entropy else total - top
        out[u] = 0.0 if gain < tolerance else gain


def gains(const float64[:, ::1] proba, const float64[:, :, ::1] tables, float64[:, ::1] out, bint entropy,
          float64 tolerance, int n_threads):
    """The adaptive acquisition's expected gain of every unit for every row (methods.acquisition's ``gains``): out[r, u]
    for the row of class probabilities proba[r], rows spread over threads.

    With p a row's class probabilities and T[u, c, a] the probability of outcome a of unit u in a row of class c, the
    joint J[c, a] = p[c] T[u, c, a] and:
    - accuracy: sum_a max_c J[c, a] - max_c p[c];
    - entropy: sum_{c, a: J[c, a] > 0} J[c, a] log(J[c, a] / (p[c] sum_c' J[c', a])), the mutual information of the
      unit's outcome and the class.
    Sums run in index order (outcomes, then classes within one). A gain below ``tolerance`` is 0. The caller checks
    the shapes; probabilities are finite and in [0, 1]."""
    cdef Py_ssize_t n = proba.shape[0], r
    if n == 0 or tables.shape[0] == 0:
        return
    for r in prange(n, nogil=True, num_threads=max(n_threads, 1), schedule="static"):
        unit_gains(&proba[r, 0], &tables[0, 0, 0], tables.shape[0], tables.shape[1], tables.shape[2], entropy,
                   tolerance, &out[r, 0])


cdef class PolicyPlan(UnitPlan):
    """What every run of one adaptive acquisition model shares (PolicyBatch): a UnitPlan whose StageStack's one stage is
    the classifier (it reads every column), the outcome tables (T[u, c, a], float64[num_units, num_class,
    num_outcomes]), the gain's tolerance and the units' prices."""

    cdef const float64* tables
    cdef const float64* unit_cost
    cdef float64 tolerance
    cdef Py_ssize_t A

    def __cinit__(self, StageStack stack, tables, float64 tolerance, unit_cost, unit_offset, member, lazy, group_of,
                  group_lazy, split, float64 tree_cost):
        self.source = (stack, tables, tolerance, unit_cost, unit_offset, member, lazy, group_of, group_lazy, split,
                       tree_cost)
        if stack.num_stages != 2:
            raise ValueError(f"the classifier should be the one stage of its StageStack, got {stack.num_stages - 1}")
        self._units_and_costs(stack, unit_offset, member, lazy, group_of, group_lazy, split, tree_cost)
        cdef Py_ssize_t U = self.U, C = stack.num_class
        cdef cnp.ndarray tables_ = np.ascontiguousarray(tables, dtype=np.float64)
        if tables_.ndim != 3 or tables_.shape[0] != U or tables_.shape[1] != C or tables_.shape[2] < 1:
            raise ValueError(f"tables should have shape ({U} units, {C} classes, outcomes), got {np.shape(tables_)}")
        cdef cnp.ndarray unit_cost_ = owned(unit_cost, np.float64, U)
        self.keep += (tables_, unit_cost_)
        self.tables, self.unit_cost = <const float64*> data(tables_), <const float64*> data(unit_cost_)
        self.tolerance, self.A = tolerance, tables_.shape[2]


cdef class PolicyBatch(UnitBatch):
    """One batch of rows through an adaptive acquisition's policy (lightgbm_cegb/serving/runs.py's CompiledPolicyRun, as
    methods.acquisition.PolicyRun runs it): a UnitBatch, with what each row bought and holds.

    At step s, each row still going buys the unit of the largest value (its gain for the row's probabilities, the
    information gain with entropy, else the accuracy gain, per unit of price; a free unit's is infinite when it gains
    something, else 0; a unit bought, or whose price would take the row's spending over cap, is out; ties: the first unit) while that value is above
    tradeoff, at most one unit per step and every unit once. advance() first moves the rows that received their
    unit (the classifier on what they hold: their probabilities, and one evaluation's split and tree costs when the
    plan prices them), then returns the step's requests [(unit, rows)], units rising, rows in the batch's order: a
    unit whose every column a row knows (given in X, or fetched) is handed to it unfetched and unpaid. deliver()
    stores what a fetch returned and charges its lazy costs; drop() takes rows out. Every row is
    charged one evaluation of the classifier on nothing when the batch is made."""

    cdef PolicyPlan plan
    cdef readonly object held
    cdef object spent_, bought_, active_, received_, values_
    cdef float64* xh
    cdef uint8* bought
    cdef uint8* received
    cdef float64* spent
    cdef float64* values
    cdef Py_ssize_t* active
    cdef float64 tradeoff, cap
    cdef Py_ssize_t m, step
    cdef bint moving, entropy

    def __cinit__(self, PolicyPlan plan, X, known, prior, bint entropy, float64 tradeoff, float64 cap,
                  int num_threads):
        self._start(plan, X, known, prior, num_threads)
        cdef Py_ssize_t n = self.n, i
        self.plan, self.tradeoff, self.cap, self.entropy = plan, tradeoff, cap, entropy
        self.held = np.full((n, self.F), np.nan)  # the values of the units bought, NaN elsewhere: the classifier's
        self.bought_ = np.zeros((n, max(plan.U, 1)), dtype=np.uint8)
        self.received_ = np.zeros(n, dtype=np.uint8)
        self.spent_ = np.zeros(n, dtype=np.float64)
        self.values_ = np.zeros(max(plan.U, 1), dtype=np.float64)  # a row's gains
        self.active_ = np.arange(n, dtype=np.intp)
        self.xh, self.bought = <float64*> data(self.held), <uint8*> data(self.bought_)
        self.received, self.spent = <uint8*> data(self.received_), <float64*> data(self.spent_)
        self.values, self.active = <float64*> data(self.values_), <Py_ssize_t*> data(self.active_)
        self.m, self.step, self.moving = n, 0, False
        self._on_nothing()

    cdef void _on_nothing(self) except *:
        """Every row charged one evaluation of the classifier on nothing (when the plan prices them)."""
        cdef Py_ssize_t i
        if self.plan.costs and self.n:
            for i in range(self.n):
                self.received[i] = 1
            self._evaluate(False)

    cdef void _restarted(self) except *:
        cdef Py_ssize_t f
        for f in range(self.F):
            self.xh[f] = NAN
        memset(self.bought, 0, max(self.plan.U, 1))
        self.received[0], self.spent[0], self.active[0] = 0, 0.0, 0
        self.m, self.step, self.moving = 1, 0, False
        self._on_nothing()

    cdef void _evaluate(self, bint proba) except *:
        """The rows that received their unit: the classifier on what they hold (their probabilities when proba), and
        one evaluation's cost when the plan prices it."""
        cdef Py_ssize_t i, j, k = 0, block, n = self.n
        cdef int failed = 0
        rows_ = np.empty(max(n, 1), dtype=np.intp)
        cdef Py_ssize_t* rows = <Py_ssize_t*> data(rows_)
        for i in range(n):
            if self.received[i]:
                rows[k] = i
                k += 1
                self.received[i] = 0
        if k == 0:
            return
        scratch = None if proba else np.empty((n, self.stack.num_class), dtype=np.float64)
        cdef float64* out = self.pr if proba else <float64*> data(scratch)
        cdef const float64* split = self.plan.split if self.plan.costs else NULL
        cdef float64 tree_cost = self.plan.tree_cost
        with nogil:
            if self.threads == 1 or k <= BLOCK:
                for block in range(0, k, BLOCK):
                    failed |= self.stack._stage(1, self.xh, NULL, block, min(block + BLOCK, k), rows, out, split,
                                                self.cost)
            else:
                for block in prange(0, k, BLOCK, schedule="static", num_threads=self.threads):
                    failed |= self.stack._stage(1, self.xh, NULL, block, min(block + BLOCK, k), rows, out, split,
                                                self.cost)
        if failed:  # some rows' probabilities are new, some not: the batch cannot go on
            self.m = 0
            raise MemoryError("PolicyBatch: no memory for a block of rows")
        if split != NULL:
            for j in range(k):
                i = rows[j]
                self.ev[i] += self.cost[i] + tree_cost * <float64> self.stack.num_trees[0]

    def advance(self):
        """Move the rows that received their unit, then the next step's requests (see the class): [(unit, rows)]; []
        when no row buys any more."""
        cdef PolicyPlan plan = self.plan
        cdef Py_ssize_t U = plan.U, C = self.stack.num_class, F = self.F, i, j, u, best, kept, b, count
        cdef float64 value, top
        cdef bint lacking
        cdef float64* values = self.values
        cdef int64* out
        while True:
            if self.moving:
                self._evaluate(True)
                self.step += 1
                self.moving = False
            if self.m == 0 or self.step >= U:
                self.m = 0
                return []
            kept = 0
            for j in range(self.m):
                i = self.active[j]
                unit_gains(self.pr + i * C, plan.tables, U, C, plan.A, self.entropy, plan.tolerance, values)
                best = -1
                top = -INFINITY
                for u in range(U):
                    if plan.unit_cost[u] == 0:
                        value = INFINITY if values[u] > 0 else 0.0
                    else:
                        value = values[u] / plan.unit_cost[u]
                    if self.bought[i * U + u] or self.spent[i] + plan.unit_cost[u] > self.cap:
                        value = -INFINITY
                    if best < 0 or value > top:
                        best, top = u, value
                if top > self.tradeoff:
                    self.active[kept] = i
                    self.received[i] = 0
                    self.bought[i * U + best] = 2  # chosen this step (1 once delivered)
                    kept += 1
            self.m = kept
            if kept == 0:
                return []
            self.moving = True
            requests = []
            for u in range(U):
                rows_ = None
                count = 0
                for j in range(self.m):
                    i = self.active[j]
                    if self.bought[i * U + u] != 2:
                        continue
                    lacking = False
                    for b in range(plan.unit_offset[u], plan.unit_offset[u + 1]):
                        if not self.kn[i * F + plan.member[b]]:
                            lacking = True
                            break
                    if not lacking:
                        self._hold(u, i)
                        continue
                    if rows_ is None:
                        rows_ = np.empty(self.m, dtype=np.int64)
                        out = <int64*> data(rows_)
                    out[count] = i
                    count += 1
                if count:
                    requests.append((u, rows_[:count]))
            if requests:
                return requests

    cdef void _hold(self, Py_ssize_t u, Py_ssize_t i) noexcept nogil:
        """Row i bought unit u: it holds the unit's values (X's), and its spending rises by the unit's price."""
        cdef Py_ssize_t F = self.F, b, f
        self.bought[i * self.plan.U + u] = 1
        self.received[i] = 1
        self.spent[i] += self.plan.unit_cost[u]
        for b in range(self.plan.unit_offset[u], self.plan.unit_offset[u + 1]):
            f = self.plan.member[b]
            self.xh[i * F + f] = self.x[i * F + f]

    cdef void _bought(self, Py_ssize_t unit, Py_ssize_t i) noexcept nogil:
        """Row i bought ``unit`` by a fetch: it holds the unit and is charged for it."""
        self._hold(unit, i)
        self._pay(unit, i)

    def drop(self, rows):
        """Rows that cannot go on (a failed fetch) leave with what they hold."""
        cdef cnp.ndarray r_ = np.ascontiguousarray(rows, dtype=np.int64).reshape(-1)
        cdef const int64* r = <const int64*> data(r_)
        cdef Py_ssize_t j, kept = 0, i
        self._check_rows(r, r_.size)
        dropped = set(r_.tolist())
        for j in range(self.m):
            i = self.active[j]
            if i not in dropped:
                self.active[kept] = i
                kept += 1
        self.m = kept
