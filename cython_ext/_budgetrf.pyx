# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""BudgetRF's GreedyTree (Nan, Wang, Saligrama, "Feature-Budgeted Random Forest", ICML 2015), without the GIL.

At a node of rows S (class counts n), for each feature t: k random thresholds (80, 40 or 20 values of t
drawn from S's rows when |S| > 2000, > 500, or fewer); for each, the outcomes L = {x_t <= v} and
R = S \\ L. The split chosen minimises the minimax risk c(t) * max(1 / (F(S) - F(L)), 1 / (F(S) - F(R))),
where c(t) is the feature's cost plus its group's (with free_path, each 0 when a node above already tests
t, respectively a member of t's group) and F the
threshold-Pairs impurity
F(G) = sum over ordered class pairs i != j of [[n_i - alpha]_+ [n_j - alpha]_+ - alpha^2]_+. Ties, and
the all-free case where every risk is 0, go to the smaller max(1 / (F(S) - F(L)), 1 / (F(S) - F(R)))
(the larger sure impurity drop), then to the first feature and threshold. A split whose outcome does not
lower F is never taken; a node with F = 0, at max_depth, smaller than min_samples_split or without such
a split is a leaf.

Trees are written as lightgbm_cegb.core.Forest numbers them: split nodes parents first (preorder), a child
c >= 0 a split node, c < 0 the leaf ~c; x <= threshold goes left.
"""

import numpy as np

from libc.math cimport INFINITY, NAN, signbit
from libc.string cimport memcpy, memset

from _typedefs cimport float64, int32, int64, uint64


cdef extern from *:
    int __builtin_ctzll(unsigned long long) nogil


cdef int64 LOCAL_BYTES = 1 << 24  # a tree's copy of its current subtree's values


cdef inline uint64 next_random(uint64* state) noexcept nogil:
    """xorshift64* (Vigna 2016): the tree's own generator, so that trees grown in parallel are reproducible."""
    state[0] ^= state[0] >> 12
    state[0] ^= state[0] << 25
    state[0] ^= state[0] >> 27
    return state[0] * <uint64> 2685821657736338717


cdef float64 pairs(const float64* n, int classes, float64 alpha) noexcept nogil:
    cdef float64 total = 0.0, a, b, v
    cdef int i, j
    for i in range(classes):
        a = n[i] - alpha
        if a <= 0:
            continue
        for j in range(classes):
            b = n[j] - alpha
            if j == i or b <= 0:
                continue
            v = a * b - alpha * alpha
            if v > 0:
                total += v
    return total


def pairs_impurity(const float64[::1] counts, float64 alpha):
    """F_alpha of a node with these class counts."""
    return pairs(&counts[0], counts.shape[0], alpha) if counts.shape[0] else 0.0


cdef struct Tree:
    const float64* X     # column-major: feature t's value of row i at X[t * stride + i]
    Py_ssize_t stride
    Py_ssize_t num_cols
    int classes
    const float64* cost
    const int32* group_of     # per feature: its group, -1 for none
    const float64* group_cost  # per group
    float64 alpha
    int64 max_depth
    int64 min_split
    uint64 rng
    int32* rows          # the bootstrap sample, permuted so that every node's rows are contiguous
    int32* labels        # labels[i]: y[rows[i]], permuted with rows
    # a subtree's values, column-major (feature t of position i at local[t * capacity + i - origin]), kept in
    # its nodes' order, for the subtree's positions [origin, origin + local_size); local_size 0: none
    float64* local
    int64 capacity
    int64 origin
    int64 local_size
    float64* values      # scratch: one feature's values of a node in its order (n)
    int64* order         # scratch: a partition's order (capacity)
    uint64* used         # per feature, then per group: tested by a node above the current one
    float64* drawn       # scratch: thresholds of one feature (80), then +inf up to a power of two (128)
    float64* bins        # scratch: class counts per threshold bin, (80 + 1) x classes
    float64* left_counts  # scratch: classes
    float64* right_counts  # scratch: classes


cdef struct Split:
    int32 feature
    float64 threshold
    float64 risk
    float64 tie


cdef inline int draws_for(int64 size) noexcept nogil:
    return 80 if size > 2000 else (40 if size > 500 else 20)


cdef void sort_values(float64* v, int n) noexcept nogil:
    """Insertion sort: at most 80 values."""
    cdef int i, j
    cdef float64 key
    for i in range(1, n):
        key = v[i]
        j = i - 1
        while j >= 0 and v[j] > key:
            v[j + 1] = v[j]
            j -= 1
        v[j + 1] = key


cdef inline int bin_of(const float64* drawn, int m, float64 x) noexcept nogil:
    """The first of the m sorted thresholds >= x (m if none): binary search."""
    cdef int lo = 0, hi = m, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if drawn[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef void bin_rows(Tree* tr, const float64* values, const int32* labels, int64 size, int m,
                   bint ordered) noexcept nogil:
    """Class counts per bin of the size values (labels alike): bin j holds the values x whose first threshold
    >= x is drawn[j] (bin m: none). ordered: drawn[:m] is sorted without NaN; then drawn[m:] is padded with
    +inf up to the power of two p > m and a branchless search counts the thresholds < x, the same bin (a NaN
    x: 0, as the binary search)."""
    cdef int classes = tr.classes, p = 2, pos
    cdef int64 r
    cdef float64 x
    cdef const float64* drawn = tr.drawn
    cdef float64* bins = tr.bins
    memset(bins, 0, (m + 1) * classes * sizeof(float64))
    if not ordered:
        for r in range(size):
            bins[bin_of(drawn, m, values[r]) * classes + labels[r]] += 1
        return
    while p <= m:
        p <<= 1
    for pos in range(m, p):
        tr.drawn[pos] = INFINITY
    if p == 128:  # 64 <= m <= 80 (k = 80): unrolled
        for r in range(size):
            x = values[r]
            pos = 64 if drawn[63] < x else 0
            pos += 32 if drawn[pos + 31] < x else 0
            pos += 16 if drawn[pos + 15] < x else 0
            pos += 8 if drawn[pos + 7] < x else 0
            pos += 4 if drawn[pos + 3] < x else 0
            pos += 2 if drawn[pos + 1] < x else 0
            pos += 1 if drawn[pos] < x else 0
            bins[pos * classes + labels[r]] += 1
        return
    cdef int step
    for r in range(size):
        x = values[r]
        pos = 0
        step = p >> 1
        while step:
            pos += step if drawn[pos + step - 1] < x else 0
            step >>= 1
        bins[pos * classes + labels[r]] += 1


cdef Split choose(Tree* tr, int64 start, int64 stop, const float64* total, float64 impurity,
                  float64* record) noexcept nogil:
    """The split of rows[start:stop] (see the module docstring); feature -1 if none. record, when not
    NULL, receives each feature's drawn thresholds (num_cols x 80, NaN after the last)."""
    cdef Split best
    best.feature = -1
    best.threshold = 0.0
    best.risk = 0.0
    best.tie = 0.0
    cdef int64 size = stop - start
    cdef int k = draws_for(size), m, j, cls, classes = tr.classes
    cdef Py_ssize_t t, num_cols = tr.num_cols
    cdef float64 cost, n_left, drop_left, drop_right, tie, risk, x
    cdef int32 g
    cdef int n, zeros
    cdef uint64 drawn_at
    cdef float64 picked[64]
    cdef bint ordered
    cdef int64 r
    cdef const float64* column
    cdef const float64* values
    cdef const int32* rows = tr.rows + start
    cdef bint local = tr.local_size > 0 and start >= tr.origin and stop <= tr.origin + tr.local_size
    for t in range(num_cols):
        if local:  # the node's values in its order already
            values = tr.local + t * tr.capacity + (start - tr.origin)
        else:  # gathered first: the loads do not wait on one another
            column = tr.X + t * tr.stride
            for r in range(size):
                tr.values[r] = column[rows[r]]
            values = tr.values
        cost = 0.0 if tr.used[t] else tr.cost[t]
        g = tr.group_of[t]
        if g >= 0 and not tr.used[num_cols + g]:
            cost = cost + tr.group_cost[g]
        n = k
        if size <= 64:
            # a small node: the values at the positions drawn, each once, sort to the same distinct values
            # (only a NaN, or zeros of both signs, tell apart which draw insertion sort keeps: then all k)
            drawn_at = 0
            for j in range(k):
                r = <int64> (next_random(&tr.rng) % <uint64> size)
                tr.drawn[j] = values[r]
                drawn_at |= (<uint64> 1) << r
            n = 0
            zeros = 0
            while drawn_at:
                x = values[__builtin_ctzll(drawn_at)]
                drawn_at &= drawn_at - 1
                if x == 0:
                    zeros |= 2 if signbit(x) else 1
                elif x != x:
                    zeros = 3
                picked[n] = x
                n += 1
            if zeros == 3:
                n = k
            else:
                memcpy(tr.drawn, picked, n * sizeof(float64))
        else:
            for j in range(k):
                tr.drawn[j] = values[<int64> (next_random(&tr.rng) % <uint64> size)]
        sort_values(tr.drawn, n)
        m = 0  # distinct values
        ordered = True
        for j in range(n):
            if j == 0 or tr.drawn[j] != tr.drawn[m - 1]:
                tr.drawn[m] = tr.drawn[j]
                m += 1
            if tr.drawn[j] != tr.drawn[j]:
                ordered = False  # a NaN: insertion sort leaves it where it was
        if record != NULL:
            for j in range(80):
                record[t * 80 + j] = tr.drawn[j] if j < m else NAN
        bin_rows(tr, values, tr.labels + start, size, m, ordered)
        memset(tr.left_counts, 0, classes * sizeof(float64))
        for j in range(m):
            n_left = 0.0
            for cls in range(classes):
                tr.left_counts[cls] += tr.bins[j * classes + cls]
                tr.right_counts[cls] = total[cls] - tr.left_counts[cls]
                n_left += tr.left_counts[cls]
            if n_left == 0 or n_left == size:
                continue
            drop_left = impurity - pairs(tr.left_counts, classes, tr.alpha)
            drop_right = impurity - pairs(tr.right_counts, classes, tr.alpha)
            if drop_left <= 0 or drop_right <= 0:
                continue
            tie = 1.0 / (drop_left if drop_left < drop_right else drop_right)
            risk = cost * tie
            if best.feature < 0 or risk < best.risk or (risk == best.risk and tie < best.tie):
                best.feature = <int32> t
                best.threshold = tr.drawn[j]
                best.risk = risk
                best.tie = tie
    return best


def best_split(X, const int32[::1] y, int32[::1] rows, const float64[::1] cost,
               const int32[::1] group_of, const float64[::1] group_cost, const uint64[::1] used, int classes,
               float64 alpha, uint64 seed):
    """GreedyTree's choice at one node of rows ``rows`` (features, then groups, marked in ``used`` are free),
    for tests: (feature or -1, threshold, risk, tie, thresholds drawn: float64[num_cols, 80], NaN-padded)."""
    cdef const float64[::1, :] XF = np.asfortranarray(X)
    _check_groups(XF.shape[1], cost, group_of, group_cost)
    if used.shape[0] != XF.shape[1] + group_cost.shape[0]:
        raise ValueError("used needs one flag per feature and per group")
    cdef Tree tr
    cdef int64 i
    total_ = np.zeros(classes, dtype=np.float64)
    labels_ = np.zeros(rows.shape[0], dtype=np.int32)
    cdef float64[::1] total = total_
    cdef int32[::1] labels = labels_
    for i in range(rows.shape[0]):
        labels[i] = y[rows[i]]
        total[labels[i]] += 1
    drawn_ = np.zeros(128)
    bins_ = np.zeros(81 * classes)
    left_ = np.zeros(classes)
    right_ = np.zeros(classes)
    record_ = np.full((XF.shape[1], 80), np.nan)
    cdef float64[::1] drawn = drawn_, bins = bins_, left = left_, right = right_
    cdef float64[:, ::1] record = record_
    tr.X, tr.stride, tr.num_cols = &XF[0, 0], XF.strides[1] // sizeof(float64), XF.shape[1]
    tr.classes, tr.cost, tr.alpha = classes, &cost[0], alpha
    tr.group_of, tr.group_cost = &group_of[0], &group_cost[0] if group_cost.shape[0] else NULL
    tr.rng = seed | 1
    tr.rows, tr.labels, tr.used = &rows[0], &labels[0], <uint64*> &used[0]
    tr.drawn, tr.bins, tr.left_counts, tr.right_counts = &drawn[0], &bins[0], &left[0], &right[0]
    values_ = np.zeros(rows.shape[0])
    cdef float64[::1] values = values_
    tr.values, tr.local, tr.local_size, tr.capacity, tr.origin, tr.order = &values[0], NULL, 0, 0, 0, NULL
    cdef Split s = choose(&tr, 0, rows.shape[0], &total[0], pairs(&total[0], classes, alpha), &record[0, 0])
    return s.feature, s.threshold, s.risk, s.tie, record_


def _check_groups(Py_ssize_t num_cols, const float64[::1] cost, const int32[::1] group_of,
                  const float64[::1] group_cost):
    cdef Py_ssize_t t
    if cost.shape[0] != num_cols or group_of.shape[0] != num_cols:
        raise ValueError(f"cost and group_of need one value per feature ({num_cols})")
    for t in range(num_cols):
        if not -1 <= group_of[t] < group_cost.shape[0]:
            raise ValueError(f"feature {t}'s group {group_of[t]} is not one of the {group_cost.shape[0]} groups")


def grow_tree(X, const int32[::1] y, const int64[::1] sample, const float64[::1] cost,
              const int32[::1] group_of, const float64[::1] group_cost, int classes, float64 alpha,
              int64 max_depth, int64 min_samples_split, bint free_path, uint64 seed,
              int64 local_bytes=LOCAL_BYTES):
    """One GreedyTree on the rows ``sample`` (a bootstrap sample, repeats allowed) of X (float64, read in
    Fortran order: another order is copied) with class codes y in 0..classes-1; a feature costs cost[t] plus group_cost[group_of[t]] (group -1: none);
    free_path: a feature, or a group, tested above a node costs 0 there; local_bytes: the most memory of the
    copy a subtree is grown on (its nodes' values in their order; the same tree whatever its size). Returns
    (feature int32, threshold float64, left int32, right int32, leaf class counts float64[num_leaves,
    classes]); see the module docstring for the numbering."""
    cdef int64 n = sample.shape[0], i, top, v, node, side, split_count = 0, leaf_count = 0, start, stop, mid
    cdef const float64[::1, :] XF = np.asfortranarray(X)
    cdef Py_ssize_t num_cols = XF.shape[1]
    if n == 0:
        raise ValueError("an empty sample")
    _check_groups(num_cols, cost, group_of, group_cost)
    rows_ = np.asarray(sample, dtype=np.int32).copy()
    labels_ = np.zeros(n, dtype=np.int32)
    values_ = np.zeros(n)
    # subtrees of at most capacity rows are grown on their own column-major copy (local_bytes at most)
    cdef int64 capacity = min(n, max(local_bytes // (8 * max(num_cols, 1)), 1))
    local_ = np.zeros(capacity * num_cols)
    order_ = np.zeros(capacity, dtype=np.int64)
    used_ = np.zeros(num_cols + group_cost.shape[0], dtype=np.uint64)
    drawn_ = np.zeros(128)
    bins_ = np.zeros(81 * classes)
    left_ = np.zeros(classes)
    right_ = np.zeros(classes)
    total_ = np.zeros(classes)
    feature_ = np.zeros(max(n - 1, 1), dtype=np.int32)
    threshold_ = np.zeros(max(n - 1, 1))
    left_child_ = np.zeros(max(n - 1, 1), dtype=np.int32)
    right_child_ = np.zeros(max(n - 1, 1), dtype=np.int32)
    parent_ = np.full(max(n - 1, 1), -1, dtype=np.int64)
    leaves_ = np.zeros((n, classes))
    stack_ = np.zeros((n, 5), dtype=np.int64)  # nodes to grow: (start, stop, depth, parent, side); < n wait
    cdef int32[::1] rows = rows_, labels = labels_, feature = feature_
    cdef int32[::1] left_child = left_child_, right_child = right_child_
    cdef uint64[::1] used = used_
    cdef float64[::1] drawn = drawn_, bins = bins_, left = left_, right = right_, total = total_
    cdef float64[::1] threshold = threshold_, values = values_, local = local_
    cdef int64[::1] order = order_
    cdef float64* values_at
    cdef int64 j, at
    cdef Py_ssize_t t
    cdef bint inside
    cdef int64[::1] parent = parent_
    cdef float64[:, ::1] leaves = leaves_
    cdef int64[:, ::1] stack = stack_
    cdef Tree tr
    cdef Split s
    cdef float64 impurity
    cdef int32 code, tmp
    cdef const float64* column
    for i in range(n):
        labels[i] = y[rows[i]]
    tr.X, tr.stride, tr.num_cols = &XF[0, 0], XF.strides[1] // sizeof(float64), num_cols
    tr.classes, tr.cost, tr.alpha = classes, &cost[0], alpha
    tr.group_of, tr.group_cost = &group_of[0], &group_cost[0] if group_cost.shape[0] else NULL
    tr.max_depth, tr.min_split, tr.rng = max_depth, min_samples_split, seed | 1
    tr.rows, tr.labels, tr.used = &rows[0], &labels[0], &used[0]
    tr.drawn, tr.bins, tr.left_counts, tr.right_counts = &drawn[0], &bins[0], &left[0], &right[0]
    tr.values, tr.local, tr.capacity, tr.order = &values[0], &local[0], capacity, &order[0]
    tr.origin, tr.local_size = 0, 0
    with nogil:
        stack[0, 0], stack[0, 1], stack[0, 2], stack[0, 3], stack[0, 4] = 0, n, 0, -1, 0
        top = 0
        while top >= 0:
            start, stop = stack[top, 0], stack[top, 1]
            node = stack[top, 3]
            side = stack[top, 4]
            v = stack[top, 2]  # depth
            top -= 1
            # depth first: a subtree's nodes come one after another, so one copy serves it whole
            inside = tr.local_size > 0 and start >= tr.origin and stop <= tr.origin + tr.local_size
            if not inside:
                tr.local_size = 0
            memset(&total[0], 0, classes * sizeof(float64))
            for i in range(start, stop):
                total[labels[i]] += 1
            impurity = pairs(&total[0], classes, alpha)
            s.feature = -1
            if impurity > 0 and v < max_depth and stop - start >= min_samples_split:
                if not inside and stop - start <= capacity:
                    for t in range(num_cols):
                        column = tr.X + t * tr.stride
                        values_at = tr.local + t * capacity
                        for j in range(stop - start):
                            values_at[j] = column[rows[start + j]]
                    tr.origin, tr.local_size = start, stop - start
                    inside = True
                # the features tested above: walk up the parents
                i = node if free_path else -1
                while i >= 0:
                    used[feature[i]] = 1
                    if group_of[feature[i]] >= 0:
                        used[num_cols + group_of[feature[i]]] = 1
                    i = parent[i]
                s = choose(&tr, start, stop, &total[0], impurity, NULL)
                i = node if free_path else -1
                while i >= 0:
                    used[feature[i]] = 0
                    if group_of[feature[i]] >= 0:
                        used[num_cols + group_of[feature[i]]] = 0
                    i = parent[i]
            if s.feature < 0:
                for i in range(classes):
                    leaves[leaf_count, i] = total[i]
                code = ~(<int32> leaf_count)
                leaf_count += 1
            else:
                # rows with x <= threshold first
                mid = start
                if inside:  # the same swaps, on labels and on the subtree's copy of every feature
                    values_at = tr.local + s.feature * capacity + (start - tr.origin)
                    for j in range(stop - start):
                        order[j] = j
                    for i in range(start, stop):
                        if values_at[order[i - start]] <= s.threshold:
                            at = order[i - start]
                            order[i - start] = order[mid - start]
                            order[mid - start] = at
                            tmp = labels[i]
                            labels[i] = labels[mid]
                            labels[mid] = tmp
                            mid += 1
                    for t in range(num_cols):
                        values_at = tr.local + t * capacity + (start - tr.origin)
                        for j in range(stop - start):
                            values[j] = values_at[order[j]]
                        memcpy(values_at, &values[0], (stop - start) * sizeof(float64))
                else:
                    column = tr.X + s.feature * tr.stride
                    for i in range(start, stop):
                        if column[rows[i]] <= s.threshold:
                            tmp = rows[i]
                            rows[i] = rows[mid]
                            rows[mid] = tmp
                            tmp = labels[i]
                            labels[i] = labels[mid]
                            labels[mid] = tmp
                            mid += 1
                feature[split_count] = s.feature
                threshold[split_count] = s.threshold
                parent[split_count] = node
                code = <int32> split_count
                # right waits below left: left is numbered first (preorder)
                top += 1
                stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3], stack[top, 4] = mid, stop, v + 1, split_count, 1
                top += 1
                stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3], stack[top, 4] = start, mid, v + 1, split_count, 0
                split_count += 1
            if node >= 0:
                if side == 0:
                    left_child[node] = code
                else:
                    right_child[node] = code
    return (feature_[:split_count].copy(), threshold_[:split_count].copy(), left_child_[:split_count].copy(),
            right_child_[:split_count].copy(), leaves_[:leaf_count].copy())
