# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Per-row prediction cost of a tree ensemble from the leaf each row reaches in each tree.

The Python side (``lightgbm_cegb/accounting.py``) flattens every tree into its leaves' root-to-leaf
paths (one entry per split node, so a feature tested twice on a path appears twice) and validates all
arrays; this module only runs the loop over rows, in parallel and without the GIL.
"""

from cython.parallel cimport parallel, prange, threadid

import numpy as np

from _typedefs cimport float64, int32, int64, uint8


def path_costs(const int32[:, ::1] leaves, const int64[::1] tree_leaf_offset,
               const int64[::1] path_indptr, const int32[::1] path_features,
               const float64[::1] lazy_costs, int num_threads):
    """Acquisition cost and number of split nodes traversed, per row.

    leaves[i, t] is the leaf of tree t that row i reaches; the path of leaf l of tree t is
    path_features[path_indptr[k]:path_indptr[k + 1]] with k = tree_leaf_offset[t] + l. A feature's
    lazy cost is paid once per row, however many trees and nodes test it.

    Returns (acquisition float64[n], num_splits int64[n], rows_using int64[num_features]).
    """
    cdef Py_ssize_t n_rows = leaves.shape[0]
    cdef Py_ssize_t n_trees = leaves.shape[1]
    cdef Py_ssize_t n_features = lazy_costs.shape[0]
    cdef int n_slots = max(num_threads, 1)
    acquisition_arr = np.zeros(n_rows, dtype=np.float64)
    num_splits_arr = np.zeros(n_rows, dtype=np.int64)
    # per-thread scratch (features seen on the current row, and which) and per-thread usage counts
    seen_arr = np.zeros((n_slots, n_features), dtype=np.uint8)
    touched_arr = np.zeros((n_slots, n_features), dtype=np.int32)
    rows_using_arr = np.zeros((n_slots, n_features), dtype=np.int64)
    cdef float64[::1] acquisition = acquisition_arr
    cdef int64[::1] num_splits = num_splits_arr
    cdef uint8[:, ::1] seen = seen_arr
    cdef int32[:, ::1] touched = touched_arr
    cdef int64[:, ::1] rows_using = rows_using_arr
    cdef Py_ssize_t i, t, p, k, node, n_touched, slot
    cdef int32 f
    cdef float64 acq
    cdef int64 depth
    with nogil, parallel(num_threads=n_slots):
        slot = threadid()
        for i in prange(n_rows, schedule="static"):
            acq = 0.0
            depth = 0
            n_touched = 0
            for t in range(n_trees):
                node = tree_leaf_offset[t] + leaves[i, t]
                for p in range(path_indptr[node], path_indptr[node + 1]):
                    f = path_features[p]
                    depth = depth + 1
                    if not seen[slot, f]:
                        seen[slot, f] = 1
                        touched[slot, n_touched] = f
                        n_touched = n_touched + 1
                        acq = acq + lazy_costs[f]
            for k in range(n_touched):
                seen[slot, touched[slot, k]] = 0
                rows_using[slot, touched[slot, k]] += 1
            acquisition[i] = acq
            num_splits[i] = depth
    return acquisition_arr, num_splits_arr, rows_using_arr.sum(axis=0)
