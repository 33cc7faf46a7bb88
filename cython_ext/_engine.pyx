# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Routing rows through a flat tree ensemble, and per-row prediction cost, without the GIL.

Routing mirrors LightGBM's ``Tree::NumericalDecision`` / ``Tree::CategoricalDecision`` (tree.h) and the
C API's dense-row reader, which drops values with ``|x| <= kZeroThreshold`` (they become 0.0). The
Python side (``lightgbm_cegb/ensemble.py``) builds and validates every array; nothing is re-checked here.
"""

from cython.parallel cimport parallel, prange, threadid
from libc.math cimport fabs, isnan

import numpy as np

from _tree_types cimport (CATEGORICAL_MASK, DEFAULT_LEFT_MASK, MISSING_NAN, MISSING_ZERO, Ensemble)
from _typedefs cimport float64, int32, int64, uint8, uint32

# LightGBM's kZeroThreshold is the float literal 1e-35f widened to double
cdef float64 ZERO_THRESHOLD = <float64> (<float> 1e-35)


cdef inline int32 child(const Ensemble* e, int64 tree, int64 k, float64 fval) noexcept nogil:
    """The child of global node k that a row with value fval of the node's feature goes to."""
    cdef uint8 d = e.decision[k]
    cdef int missing
    cdef int ival
    cdef int64 cat, lo, hi
    if d & CATEGORICAL_MASK:
        if isnan(fval):
            return e.right[k]
        ival = <int> fval
        if ival < 0:
            return e.right[k]
        cat = e.cat_offset[tree] + <int> e.threshold[k]
        lo = e.cat_boundaries[cat]
        hi = e.cat_boundaries[cat + 1]
        if ival // 32 < hi - lo and (e.cat_threshold[lo + ival // 32] >> (ival % 32)) & 1:
            return e.left[k]
        return e.right[k]
    missing = (d >> 2) & 3
    if isnan(fval) and missing != MISSING_NAN:
        fval = 0.0
    if (missing == MISSING_ZERO and -ZERO_THRESHOLD <= fval <= ZERO_THRESHOLD) or (
            missing == MISSING_NAN and isnan(fval)):
        return e.left[k] if d & DEFAULT_LEFT_MASK else e.right[k]
    return e.left[k] if fval <= e.threshold[k] else e.right[k]


cdef inline float64 read(const float64* x, int32 f, bint drop_tiny) noexcept nogil:
    cdef float64 v = x[f]
    if drop_tiny and fabs(v) <= ZERO_THRESHOLD:
        return 0.0
    return v


cdef int32 leaf_of(const Ensemble* e, int64 tree, const float64* x) noexcept nogil:
    cdef int64 base = e.node_offset[tree]
    cdef int32 node = 0
    if e.node_offset[tree + 1] == base:
        return 0
    while node >= 0:
        node = child(e, tree, base + node, read(x, e.feature[base + node], e.drop_tiny))
    return ~node


cdef class FlatEnsemble:
    """Holds the arrays of a TreeEnsemble (kept alive here) and the C view of them."""

    cdef Ensemble e
    cdef object arrays
    cdef readonly int64 num_trees
    cdef readonly int64 trees_per_iteration

    def __cinit__(self, const int64[::1] node_offset, const int32[::1] feature, const float64[::1] threshold,
                  const uint8[::1] decision, const int32[::1] left, const int32[::1] right,
                  const int64[::1] cat_offset, const int64[::1] cat_boundaries,
                  const uint32[::1] cat_threshold, int64 trees_per_iteration, bint drop_tiny):
        # keep the buffers referenced for as long as the pointers below are used
        self.arrays = (node_offset, feature, threshold, decision, left, right, cat_offset, cat_boundaries,
                       cat_threshold)
        self.num_trees = node_offset.shape[0] - 1
        self.trees_per_iteration = trees_per_iteration
        self.e.node_offset = &node_offset[0]
        self.e.feature = &feature[0] if feature.shape[0] else NULL
        self.e.threshold = &threshold[0] if threshold.shape[0] else NULL
        self.e.decision = &decision[0] if decision.shape[0] else NULL
        self.e.left = &left[0] if left.shape[0] else NULL
        self.e.right = &right[0] if right.shape[0] else NULL
        self.e.cat_offset = &cat_offset[0] if cat_offset.shape[0] else NULL
        self.e.cat_boundaries = &cat_boundaries[0] if cat_boundaries.shape[0] else NULL
        self.e.cat_threshold = &cat_threshold[0] if cat_threshold.shape[0] else NULL
        self.e.num_trees = self.num_trees
        self.e.trees_per_iteration = trees_per_iteration
        self.e.drop_tiny = drop_tiny

    def apply(self, const float64[:, ::1] X, int64 num_trees, int num_threads):
        """The leaf of each of the first num_trees trees that each row reaches: int32[n_rows, num_trees]."""
        cdef Py_ssize_t n = X.shape[0]
        out_arr = np.empty((n, num_trees), dtype=np.int32)
        cdef int32[:, ::1] out = out_arr
        cdef Py_ssize_t i
        cdef int64 t
        with nogil:
            for i in prange(n, schedule="static", num_threads=max(num_threads, 1)):
                for t in range(num_trees):
                    out[i, t] = leaf_of(&self.e, t, &X[i, 0])
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
        # per-thread scratch: which features the current row has paid, and which to clear afterwards
        paid_arr = np.zeros((n_slots, n_features), dtype=np.uint8)
        touched_arr = np.zeros((n_slots, n_features), dtype=np.int32)
        rows_using_arr = np.zeros((n_slots, n_features), dtype=np.int64)
        curve_arr = np.zeros((n_slots, max(n_iter, 1)), dtype=np.float64)
        cdef float64[::1] acquisition = acquisition_arr
        cdef float64[::1] evaluation = evaluation_arr
        cdef uint8[:, ::1] paid = paid_arr
        cdef int32[:, ::1] touched = touched_arr
        cdef int64[:, ::1] rows_using = rows_using_arr
        cdef float64[:, ::1] curve = curve_arr
        cdef const Ensemble* e = &self.e
        cdef Py_ssize_t i, k
        cdef int64 t, base, slot, n_touched
        cdef int32 node, f
        cdef float64 acq, ev
        cdef const float64* x
        with nogil, parallel(num_threads=n_slots):
            slot = threadid()
            for i in prange(n, schedule="static"):
                x = &X[i, 0]
                acq = 0.0
                ev = 0.0
                n_touched = 0
                for t in range(num_trees):
                    base = e.node_offset[t]
                    if e.node_offset[t + 1] > base:
                        node = 0
                        while node >= 0:
                            f = e.feature[base + node]
                            ev = ev + split[f]
                            if not paid[slot, f]:
                                paid[slot, f] = 1
                                touched[slot, n_touched] = f
                                n_touched = n_touched + 1
                                acq = acq + lazy[f]
                            node = child(e, t, base + node, read(x, f, e.drop_tiny))
                    if per_iteration and (t + 1) % tpi == 0:
                        curve[slot, t // tpi] += acq + ev
                if per_iteration and num_trees % tpi != 0:
                    curve[slot, n_iter - 1] += acq + ev
                for k in range(n_touched):
                    paid[slot, touched[slot, k]] = 0
                    rows_using[slot, touched[slot, k]] += 1
                acquisition[i] = acq
                evaluation[i] = ev
        curve_out = curve_arr.sum(axis=0) / max(n, 1) if per_iteration else None
        return acquisition_arr, evaluation_arr, rows_using_arr.sum(axis=0), curve_out
