# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Routing rows through a flat tree ensemble, and per-row prediction cost, without the GIL.

Routing mirrors LightGBM's ``Tree::NumericalDecision`` / ``Tree::CategoricalDecision`` (tree.h) and the
C API's dense-row reader, which drops values with ``|x| <= kZeroThreshold`` (they become 0.0). The
Python side (``lightgbm_cegb/ensemble.py``) builds and validates every array; nothing is re-checked here.

Rows are processed in blocks of BLOCK rows, tree by tree: one tree's nodes stay in cache while the
block's rows go through it, which is what makes this faster than LightGBM's row-by-row predictor.
"""

from cython.parallel cimport parallel, prange, threadid
from libc.math cimport fabs, isnan
from libc.string cimport memset

import numpy as np

from _tree_types cimport (CATEGORICAL_MASK, DEFAULT_LEFT_MASK, MISSING_NAN, MISSING_ZERO, Ensemble,
                          Node)
from _typedefs cimport float64, int32, int64, uint8, uint32

# LightGBM's kZeroThreshold is the float literal 1e-35f widened to double
cdef float64 ZERO_THRESHOLD = <float64> (<float> 1e-35)
DEF BLOCK = 64


cdef inline int32 child(const Ensemble* e, int64 tree, const Node* nd, float64 fval) noexcept nogil:
    """The child of node nd that a row whose value of the node's feature is fval goes to."""
    cdef uint8 d = nd.decision
    cdef int missing
    cdef int ival
    cdef int64 cat, lo, hi
    if nd.zero_matters and fabs(fval) <= ZERO_THRESHOLD:
        fval = 0.0
    if d & CATEGORICAL_MASK:
        if isnan(fval):
            return nd.right
        ival = <int> fval
        if ival < 0:
            return nd.right
        cat = e.cat_offset[tree] + <int> nd.threshold
        lo = e.cat_boundaries[cat]
        hi = e.cat_boundaries[cat + 1]
        if ival // 32 < hi - lo and (e.cat_threshold[lo + ival // 32] >> (ival % 32)) & 1:
            return nd.left
        return nd.right
    missing = (d >> 2) & 3
    if isnan(fval) and missing != MISSING_NAN:
        fval = 0.0
    if (missing == MISSING_ZERO and -ZERO_THRESHOLD <= fval <= ZERO_THRESHOLD) or (
            missing == MISSING_NAN and isnan(fval)):
        return nd.left if d & DEFAULT_LEFT_MASK else nd.right
    return nd.left if fval <= nd.threshold else nd.right


cdef class FlatEnsemble:
    """The C view of a TreeEnsemble's arrays (which it keeps alive)."""

    cdef Ensemble e
    cdef object arrays
    cdef readonly int64 num_trees
    cdef readonly int64 trees_per_iteration

    def __cinit__(self, const int64[::1] node_offset, const int32[::1] feature, const float64[::1] threshold,
                  const uint8[::1] decision, const int32[::1] left, const int32[::1] right,
                  const int64[::1] cat_offset, const int64[::1] cat_boundaries,
                  const uint32[::1] cat_threshold, int64 trees_per_iteration, bint drop_tiny):
        cdef Py_ssize_t n = feature.shape[0], k
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
                                     and -ZERO_THRESHOLD <= threshold[k] < ZERO_THRESHOLD)
        # keep the buffers referenced for as long as the pointers below are used
        self.arrays = (packed, node_offset, cat_offset, cat_boundaries, cat_threshold)
        self.num_trees = node_offset.shape[0] - 1
        self.trees_per_iteration = trees_per_iteration
        self.e.nodes = nodes
        self.e.node_offset = &node_offset[0]
        self.e.cat_offset = &cat_offset[0] if cat_offset.shape[0] else NULL
        self.e.cat_boundaries = &cat_boundaries[0] if cat_boundaries.shape[0] else NULL
        self.e.cat_threshold = &cat_threshold[0] if cat_threshold.shape[0] else NULL
        self.e.num_trees = self.num_trees
        self.e.trees_per_iteration = trees_per_iteration

    def apply(self, const float64[:, ::1] X, int64 num_trees, int num_threads):
        """The leaf of each of the first num_trees trees that each row reaches: int32[n_rows, num_trees]."""
        cdef Py_ssize_t n = X.shape[0], n_cols = X.shape[1]
        out_arr = np.empty((n, num_trees), dtype=np.int32)
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
             const float64[::1] split, bint per_iteration, int num_threads):
        """Per-row prediction cost of the first num_trees trees.

        A row pays lazy[f] the first time any node on its paths tests feature f, and split[f] for every
        node testing f that it traverses. Returns (acquisition[n], evaluation[n], rows_using[num_features],
        curve) where curve[k] is the mean per-row cost after iteration k (None unless per_iteration).
        """
        cdef Py_ssize_t n = X.shape[0]
        cdef Py_ssize_t n_features = lazy.shape[0]
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
                    accumulate(&self.e, X, start, stop, 0, num_trees, lazy, split, paid, acquisition, evaluation)
                else:
                    for it in range(n_iter):
                        t0 = it * tpi
                        t1 = min(t0 + tpi, num_trees)
                        accumulate(&self.e, X, start, stop, t0, t1, lazy, split, paid, acquisition, evaluation)
                        total = 0.0
                        for i in range(start, stop):
                            total = total + acquisition[i] + evaluation[i]
                        curve[slot, it] += total
                for i in range(start, stop):
                    for f in range(n_features):
                        rows_using[slot, f] += paid[(i - start) * n_features + f]
        curve_out = curve_arr.sum(axis=0) / max(n, 1) if per_iteration else None
        return acquisition_arr, evaluation_arr, rows_using_arr.sum(axis=0), curve_out

    def cost_update(self, const float64[:, ::1] X, const float64[::1] lazy, const float64[::1] split,
                    uint8[:, ::1] paid, float64[::1] acquisition, float64[::1] evaluation, int num_threads):
        """Add the cost of all this ensemble's trees to per-row state kept by the caller between calls
        (paid[i, f]: row i has paid feature f), as when trees are appended during training."""
        cdef Py_ssize_t n = X.shape[0]
        cdef Py_ssize_t block, start, stop
        with nogil:
            for block in prange((n + BLOCK - 1) // BLOCK, schedule="static", num_threads=max(num_threads, 1)):
                start = block * BLOCK
                stop = min(start + BLOCK, n)
                accumulate(&self.e, X, start, stop, 0, self.e.num_trees, lazy, split, &paid[start, 0],
                           acquisition, evaluation)


cdef void accumulate(const Ensemble* e, const float64[:, ::1] X, Py_ssize_t start, Py_ssize_t stop,
                     int64 t0, int64 t1, const float64[::1] lazy, const float64[::1] split, uint8* paid,
                     float64[::1] acquisition, float64[::1] evaluation) noexcept nogil:
    """Route rows [start, stop) through trees [t0, t1), adding to their acquisition and evaluation cost.
    paid + (i - start) * num_features holds row i's paid flags; tree by tree, so a tree stays in cache."""
    cdef Py_ssize_t n_cols = X.shape[1], n_features = lazy.shape[0], i
    cdef int64 t
    cdef int32 node, f
    cdef const Node* tree_nodes
    cdef const Node* nd
    cdef const float64* x
    cdef uint8* row_paid
    for t in range(t0, t1):
        if e.node_offset[t + 1] == e.node_offset[t]:
            continue
        tree_nodes = e.nodes + e.node_offset[t]
        for i in range(start, stop):
            x = &X[0, 0] + i * n_cols
            row_paid = paid + (i - start) * n_features
            node = 0
            while node >= 0:
                nd = tree_nodes + node
                f = nd.feature
                evaluation[i] += split[f]
                if not row_paid[f]:
                    row_paid[f] = 1
                    acquisition[i] += lazy[f]
                node = child(e, t, nd, x[f])
