# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""CSTC, CSCC and Cronus (lightgbm_cegb/methods/cstc/optimiser.py): the per-row passes over the design matrix
Z, without the GIL.

soft_pass: the soft routing (each slot's reach and sigmoid), the relaxed objective's per-row terms and the row
weights of its gradient, a block of rows at a time over all slots, with the products with Z fused into the same
pass (Z is read once per call: the fresh node's scores and the wanted nodes' gradients). route: hard routing and
the terminal's prediction, each row's scores only at the nodes on its path and only over the weights' non-zero
columns. forward_select: a leaf's choice of columns from its rows' Gram matrix. The kernels trust their arrays:
optimiser.py builds them from a checked Structure."""

from libc.math cimport INFINITY, exp
from libc.stdlib cimport free, malloc
from scipy.linalg.cython_lapack cimport dgetrf, dgetrs

import numpy as np

from _typedefs cimport float64, int64, uint8


cdef extern from *:
    void __builtin_prefetch(const void* address) noexcept nogil


cdef enum:
    BLOCK = 64  # rows per block of soft_pass


cdef inline float64 expit(float64 x) noexcept nogil:
    cdef float64 e
    if x < 0:
        e = exp(x)
        return e / (1.0 + e)
    return 1.0 / (1.0 + exp(-x))


cdef extern from *:
    """
    /* On x86-64 with glibc (whose ifunc picks a version when the module loads), GCC >= 6 and Clang >= 14 compile
       these twice, for AVX2 and for the baseline. Each lane of the AVX2 code is one of the four partial sums and
       no multiply-add is fused (AVX2 does not include FMA), so both versions give the same bits. */
    #if defined(__x86_64__) && defined(__GLIBC__) && \
        ((defined(__clang__) && __clang_major__ >= 14) || (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 6))
    #define CSTC_CLONES __attribute__((target_clones("avx2", "default")))
    #else
    #define CSTC_CLONES
    #endif
    CSTC_CLONES static double cstc_dot(const double* a, const double* b, Py_ssize_t d) {
        double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
        Py_ssize_t c = 0;
        for (; c + 4 <= d; c += 4) {
            s0 += a[c] * b[c];
            s1 += a[c + 1] * b[c + 1];
            s2 += a[c + 2] * b[c + 2];
            s3 += a[c + 3] * b[c + 3];
        }
        for (; c < d; ++c)
            s0 += a[c] * b[c];
        return (s0 + s1) + (s2 + s3);
    }
    CSTC_CLONES static void cstc_axpy(double* y, double w, const double* x, Py_ssize_t d) {
        for (Py_ssize_t a = 0; a < d; ++a)
            y[a] += w * x[a];
    }
    """
    # a . b with four partial sums (the additions of one chain wait on each other; four chains do not)
    float64 dot "cstc_dot"(const float64* a, const float64* b, Py_ssize_t d) noexcept nogil
    # y += w x
    void axpy "cstc_axpy"(float64* y, float64 w, const float64* x, Py_ssize_t d) noexcept nogil


def soft_pass(const float64[:, ::1] Z, float64[:, ::1] scores, int64 fresh, const float64[::1] beta_fresh,
              const float64[::1] theta, const float64[:, ::1] sigmoid, int64 live, const float64[::1] y,
              const float64[::1] s, const int64[::1] order, const int64[:, ::1] kids, const int64[::1] param_of,
              const uint8[::1] own_loss, const float64[::1] vtot, const float64[::1] vgrad, const int64[::1] wanted,
              int mode,
              float64[::1] p_sum, float64[:, ::1] g_out, float64[::1] g_theta, float64[:, ::1] P_out,
              float64[:, ::1] S_out):
    """One pass over the rows of Z (n, d), in blocks of BLOCK rows whose per-slot loops run across the block's
    rows; every sum over rows is taken in the rows' order, and every per-row sum over slots in the slots' order
    (the values do not depend on BLOCK). ``scores`` (n, slots): z.beta_j in the columns of the classifier
    nodes. ``fresh`` >= 0: that column is computed first, as z.beta_fresh (and stored). ``sigmoid`` (n, slots)
    or (0, 0): when given, the sigmoid of every slot with children but ``live`` is read from it (the
    ``S_out`` of a pass over the same scores and thresholds: the same values, without their exp). ``order``:
    the reachable slots, parents first.

    mode 0: the reach only; 1: also the objective's per-row part, sum_ij p_ij V_ij with
    V_ij = s_i (own_loss_j (z_i.beta_{param_of j} - y_i)^2 / n + vtot_j); 2: also the gradient: ``g_out[q]`` +=
    the gradient of that part (with V_ij + s_i vgrad_j) in beta_{wanted[q]}, ``g_theta`` += in theta.
    Always ``p_sum[j]`` += sum_i s_i p_ij. ``P_out`` / ``S_out`` (n, slots) or (0, 0): each row's reach and
    sigmoid stored when given. Returns the objective's part (0 in mode 0), summed with compensation."""
    cdef Py_ssize_t n = Z.shape[0], d = Z.shape[1], size = scores.shape[1], m = order.shape[0]
    cdef Py_ssize_t nw = wanted.shape[0], i, i0, blk, b, nb, idx, q, a, j, k
    cdef bint store = P_out.shape[0] > 0, cached = sigmoid.shape[0] > 0
    if cached and (sigmoid.shape[0] != n or sigmoid.shape[1] != size):
        raise ValueError(f"soft_pass: sigmoid should be ({n}, {size}) or (0, 0), got ({sigmoid.shape[0]}, "
                         f"{sigmoid.shape[1]})")
    cdef float64 total = 0.0, carry = 0.0, row_total, t, r, ds, wk, vt, th, inv_n = 1.0 / n
    cdef const float64* zi
    cdef float64 *Pj
    cdef float64 *Sj
    cdef float64 *Vj
    cdef float64 *Uj
    cdef float64 *Wj
    cdef float64 *Pd
    cdef float64 *Pu
    cdef float64 *Ud
    cdef float64 *Uu
    # per block of rows, slot-major: each slot's values for the block's rows side by side, so that the loops
    # over a slot's rows are independent across rows; every sum is still taken in the rows' order
    cdef float64* buffer = <float64*> malloc((6 * size + 3) * BLOCK * sizeof(float64))
    if buffer == NULL:
        raise MemoryError()
    cdef float64* P = buffer
    cdef float64* Sg = P + size * BLOCK
    cdef float64* V = Sg + size * BLOCK
    cdef float64* U = V + size * BLOCK
    cdef float64* W = U + size * BLOCK
    cdef float64* DS = W + size * BLOCK
    cdef float64* RT = DS + size * BLOCK
    cdef float64* SI = RT + BLOCK
    cdef float64* YI = SI + BLOCK
    with nogil:
        for b in range(size * BLOCK):
            Sg[b] = 0.0
        for blk in range((n + BLOCK - 1) // BLOCK):
            i0 = blk * BLOCK
            nb = min(<Py_ssize_t> BLOCK, n - i0)
            for b in range(nb):
                SI[b] = s[i0 + b]
                YI[b] = y[i0 + b]
                RT[b] = 0.0
            if fresh >= 0:
                for b in range(nb):
                    scores[i0 + b, fresh] = dot(&Z[i0 + b, 0], &beta_fresh[0], d)
            Pj = P + order[0] * BLOCK
            for b in range(nb):
                Pj[b] = 1.0
            for idx in range(m):
                j = order[idx]
                Pj = P + j * BLOCK
                if kids[j, 0] >= 0:
                    Sj = Sg + j * BLOCK
                    if cached and j != live:
                        for b in range(nb):
                            Sj[b] = sigmoid[i0 + b, j]
                    else:
                        th = theta[j]
                        for b in range(nb):
                            Sj[b] = expit(scores[i0 + b, j] - th)
                    Pd = P + kids[j, 0] * BLOCK
                    Pu = P + kids[j, 1] * BLOCK
                    for b in range(nb):
                        Pd[b] = Pj[b] * (1.0 - Sj[b])
                        Pu[b] = Pj[b] * Sj[b]
                if mode >= 1:
                    Vj = V + j * BLOCK
                    vt = vtot[j]
                    for b in range(nb):
                        Vj[b] = SI[b] * vt
                    if own_loss[j]:
                        k = param_of[j]
                        for b in range(nb):
                            r = scores[i0 + b, k] - YI[b]
                            Vj[b] += SI[b] * r * r * inv_n
                    for b in range(nb):
                        RT[b] += Pj[b] * Vj[b]
            for b in range(nb):
                for idx in range(m):
                    j = order[idx]
                    p_sum[j] += SI[b] * P[j * BLOCK + b]
                if fresh >= 0 and i0 + BLOCK + b < n:  # the next block's row on its way while this one computes
                    zi = &Z[i0 + BLOCK + b, 0]
                    for a in range(0, d, 8):
                        __builtin_prefetch(zi + a)
            if store:
                for idx in range(m):
                    j = order[idx]
                    for b in range(nb):
                        P_out[i0 + b, j] = P[j * BLOCK + b]
                        S_out[i0 + b, j] = Sg[j * BLOCK + b]
            if mode == 0:
                continue
            for b in range(nb):
                row_total = RT[b]
                t = total + row_total  # Neumaier's compensated sum over the rows
                if (total if total >= 0 else -total) >= (row_total if row_total >= 0 else -row_total):
                    carry += (total - t) + row_total
                else:
                    carry += (row_total - t) + total
                total = t
            if mode == 1:
                continue
            for idx in range(m):
                Wj = W + order[idx] * BLOCK
                for b in range(nb):
                    Wj[b] = 0.0
            for idx in range(m):
                j = order[idx]
                Pj = P + j * BLOCK
                if own_loss[j]:
                    k = param_of[j]
                    Wj = W + k * BLOCK
                    for b in range(nb):
                        Wj[b] += 2.0 * inv_n * SI[b] * Pj[b] * (scores[i0 + b, k] - YI[b])
                Uj = U + j * BLOCK
                Vj = V + j * BLOCK
                vt = vgrad[j]
                for b in range(nb):
                    Uj[b] = Pj[b] * (Vj[b] + SI[b] * vt)
            for idx in range(m - 1, -1, -1):
                j = order[idx]
                if kids[j, 0] >= 0:
                    Sj = Sg + j * BLOCK
                    Uj = U + j * BLOCK
                    Wj = W + j * BLOCK
                    Ud = U + kids[j, 0] * BLOCK
                    Uu = U + kids[j, 1] * BLOCK
                    for b in range(nb):
                        ds = (1.0 - Sj[b]) * Uu[b] - Sj[b] * Ud[b]
                        Uj[b] += Uu[b] + Ud[b]
                        Wj[b] += ds
                        DS[j * BLOCK + b] = ds
            for b in range(nb):
                for idx in range(m - 1, -1, -1):
                    j = order[idx]
                    if kids[j, 0] >= 0:
                        g_theta[j] -= DS[j * BLOCK + b]
                zi = &Z[i0 + b, 0]
                for q in range(nw):
                    wk = W[wanted[q] * BLOCK + b]
                    if wk != 0.0:
                        axpy(&g_out[q, 0], wk, zi, d)
    free(buffer)
    return total + carry


cdef inline float64 sparse_dot(const float64* z, const float64* b, const int64* column, Py_ssize_t count) noexcept nogil:
    """sum_c z[column[c]] b[column[c]] with four partial sums."""
    cdef float64 s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef Py_ssize_t c = 0
    while c + 4 <= count:
        s0 += z[column[c]] * b[column[c]]
        s1 += z[column[c + 1]] * b[column[c + 1]]
        s2 += z[column[c + 2]] * b[column[c + 2]]
        s3 += z[column[c + 3]] * b[column[c + 3]]
        c += 4
    while c < count:
        s0 += z[column[c]] * b[column[c]]
        c += 1
    return (s0 + s1) + (s2 + s3)


def route(const float64[:, ::1] Z, const float64[:, ::1] beta, const float64[::1] theta, const int64[:, ::1] kids,
          const int64[::1] param_of, const int64[::1] nz_start, const int64[::1] nz_column,
          const float64[:, ::1] scores, const uint8[::1] known, const int64[::1] rows, int64[::1] slot,
          float64[::1] prediction, bint predict=True):
    """Hard routing of the rows ``rows`` of Z from slot 0: up at slot j when z.beta_j > theta_j; ``slot[i]`` the
    terminal reached, ``prediction[i]`` z.beta_{param_of[slot]} (other rows' entries are not written). z.beta_j is
    ``scores[i, j]`` where ``known[j]``, else the sum over beta_j's non-zero columns
    ``nz_column[nz_start[j]:nz_start[j + 1]]``, at the nodes on the row's path only. ``predict`` False: the slots
    only (``prediction`` not written)."""
    cdef Py_ssize_t m = rows.shape[0], r, i, j, k, last
    cdef float64 score, last_score
    with nogil:
        for r in range(m):
            i = rows[r]
            j = 0
            last = -1
            last_score = 0.0
            while kids[j, 0] >= 0:
                if known[j]:
                    score = scores[i, j]
                else:
                    score = sparse_dot(&Z[i, 0], &beta[j, 0], &nz_column[nz_start[j]], nz_start[j + 1] - nz_start[j])
                last, last_score = j, score
                j = kids[j, 1] if score > theta[j] else kids[j, 0]
            slot[i] = j
            if not predict:
                continue
            k = param_of[j]
            if k != last:
                if known[k]:
                    last_score = scores[i, k]
                else:
                    last_score = sparse_dot(&Z[i, 0], &beta[k, 0], &nz_column[nz_start[k]],
                                            nz_start[k + 1] - nz_start[k])
            prediction[i] = last_score


cdef inline void gathered_dots(const float64* G, Py_ssize_t stride, const int64* which, int count,
                               const int64* index, const float64* x, int s, float64* out) noexcept nogil:
    """``out[q]`` = sum_i G[which[q], index[i]] x[i] for the ``count`` (at most 4) rows ``which`` of G (row length
    ``stride``), each sum one chain in the order of i as a loop per row takes it: the rows' chains run side by
    side (the additions of one chain wait on each other; four chains do not)."""
    cdef const float64* r0 = G + which[0] * stride
    cdef const float64* r1 = G + which[count - 1 if count < 2 else 1] * stride
    cdef const float64* r2 = G + which[count - 1 if count < 3 else 2] * stride
    cdef const float64* r3 = G + which[count - 1] * stride
    cdef float64 s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, xi
    cdef int i
    cdef int64 c
    for i in range(s):
        c = index[i]
        xi = x[i]
        s0 += r0[c] * xi
        s1 += r1[c] * xi
        s2 += r2[c] * xi
        s3 += r3[c] * xi
    out[0] = s0
    if count > 1:
        out[1] = s1
    if count > 2:
        out[2] = s2
    if count > 3:
        out[3] = s3


cdef int least_squares(const float64[:, ::1] G, const float64[::1] g, float64 yy, float64 n, const int64* index,
                       int s, float64* lu, int* pivot, float64* coef, float64* err) noexcept nogil:
    """Weights ``coef`` over the columns ``index[:s]`` of the Gram matrix G (ridged by 1e-12 times its mean
    diagonal) and their weighted squared error / n, ``err``; ``lu``/``pivot`` keep the ridged matrix's LU factors
    (LAPACK getrf, column-major). Returns getrf's info (0: solved)."""
    cdef int i, j, info = 0, one = 1
    cdef float64 trace = 0.0, ridge, fit = 0.0, quad = 0.0, row
    cdef float64 rows[4]
    for i in range(s):
        trace += G[index[i], index[i]]
    ridge = trace / s
    ridge = 1e-12 * (ridge if ridge > 1e-300 else 1e-300)
    for j in range(s):
        for i in range(s):
            lu[i + j * s] = G[index[i], index[j]]
        lu[j + j * s] += ridge
        coef[j] = g[index[j]]
    dgetrf(&s, &s, lu, &s, pivot, &info)
    if info != 0:
        return info
    dgetrs(b"N", &s, &one, lu, &s, pivot, coef, &s, &info)
    for i in range(0, s, 4):
        gathered_dots(&G[0, 0], G.shape[1], &index[i], min(4, s - i), index, coef, s, rows)
        for j in range(min(4, s - i)):
            fit += coef[i + j] * g[index[i + j]]
            quad += coef[i + j] * rows[j]
    row = yy - 2.0 * fit + quad
    err[0] = (row if row > 0.0 else 0.0) / n
    return 0


cdef void unpaid_prices(const float64[::1] cost, const uint8[:, ::1] member, const uint8* paid,
                        float64* price) noexcept nogil:
    """``price[a]``: the summed cost of the units not ``paid`` that phi column a belongs to (in unit order)."""
    cdef Py_ssize_t a, u
    for a in range(member.shape[1]):
        price[a] = 0.0
    for u in range(member.shape[0]):
        if not paid[u]:
            for a in range(member.shape[1]):
                if member[u, a]:
                    price[a] += cost[u]


def forward_select(const float64[:, ::1] G, const float64[::1] g, float64 yy, float64 n, const float64[::1] cost,
                   const uint8[:, ::1] member, const uint8[::1] paid, float64 lam_share, int candidates=5):
    """CSTC's choice of a leaf's columns (``Problem.select_leaf``) from its rows' weighted Gram matrix
    ``G = Z' W Z`` (column 0 the intercept), ``g = Z' W y``, ``yy = y' W y``: every phi column whose units
    (``member``: units x phi columns, ``cost`` each) are all ``paid`` already, then forward selection, each step
    the column of the best gain (squared error saved / n minus ``lam_share`` times the units it newly pays)
    among the ``candidates`` that a matching-pursuit score ranks first (ties: the lower column), while that
    gain is positive; the error a candidate saves from the Schur complement of the current solve (one LAPACK
    getrs for all candidates).

    Returns (index: 0 and the chosen phi columns + 1, in the order taken; their weights; the weighted squared
    error / n). A ridged Gram matrix that getrf finds singular raises numpy.linalg.LinAlgError."""
    cdef Py_ssize_t m = G.shape[0], p = m - 1, units = cost.shape[0], a, u, i, c, t, best
    cdef int s, top_count, info
    if m < 1 or g.shape[0] != m or G.shape[1] != m or member.shape[0] != units or member.shape[1] != p \
            or paid.shape[0] != units or candidates < 1:
        raise ValueError(f"forward_select: G ({G.shape[0]}, {G.shape[1]}), g ({g.shape[0]}), cost ({units}), "
                         f"member ({member.shape[0]}, {member.shape[1]}), paid ({paid.shape[0]}) and candidates "
                         f"{candidates} do not fit together")
    index_arr = np.empty(m, dtype=np.int64)
    work = np.empty(m * m + m * (1 + candidates) + 3 * p + candidates, dtype=np.float64)
    pivot_arr = np.empty(m, dtype=np.intc)
    top_arr = np.empty(candidates, dtype=np.int64)
    paid_arr = np.array(paid, dtype=np.uint8)
    chosen_arr = np.zeros(p, dtype=np.uint8)
    cdef int64[::1] index = index_arr, top = top_arr, columns_of = np.arange(1, m, dtype=np.int64)  # G's phi rows
    cdef float64[::1] w = work
    cdef int[::1] pivot = pivot_arr
    cdef uint8[::1] is_paid = paid_arr, chosen = chosen_arr
    cdef float64* lu = &w[0]
    cdef float64* coef = lu + m * m
    cdef float64* columns = coef + m  # the candidates' columns of G over the chosen rows, then their solves
    cdef float64* price = columns + m * candidates
    cdef float64* score = price + p
    cdef float64* norm2 = score + p
    cdef float64* top_gain = norm2 + p
    cdef float64 err = 0.0, fit, schur, residual, saved, gain
    cdef float64 fits[4]
    with nogil:
        for a in range(p):
            norm2[a] = G[a + 1, a + 1] if G[a + 1, a + 1] > 1e-300 else 1e-300
        unpaid_prices(cost, member, &is_paid[0], price)
        s = 1
        index[0] = 0
        for a in range(p):
            if price[a] == 0.0:
                index[s] = a + 1
                chosen[a] = 1
                s += 1
        info = least_squares(G, g, yy, n, &index[0], s, lu, &pivot[0], coef, &err)
        while info == 0:
            for a in range(0, p, 4):
                gathered_dots(&G[0, 0], G.shape[1], &columns_of[a], min(4, p - a), &index[0], coef, s, fits)
                for c in range(min(4, p - a)):
                    fit = fits[c]
                    score[a + c] = (g[a + c + 1] - fit) * (g[a + c + 1] - fit) / norm2[a + c] / n \
                        - lam_share * price[a + c]
            # the candidates: the highest finite scores of the columns not chosen, highest first
            top_count = 0
            while top_count < candidates:
                best = -1
                for a in range(p):
                    if not chosen[a] and score[a] - score[a] == 0.0 and (best < 0 or score[a] > score[best]):
                        best = a
                if best < 0:
                    break
                top[top_count] = best
                score[best] = -INFINITY
                top_count += 1
            if top_count == 0:
                break
            for c in range(top_count):
                for i in range(s):
                    columns[i + c * s] = G[index[i], top[c] + 1]
            dgetrs(b"N", &s, &top_count, lu, &s, &pivot[0], columns, &s, &info)
            best = -1
            for c in range(top_count):
                t = top[c] + 1
                residual = g[t]
                schur = G[t, t]
                for i in range(s):
                    residual -= G[index[i], t] * coef[i]
                    schur -= G[index[i], t] * columns[i + c * s]
                saved = 0.0
                if schur > 1e-9 * norm2[t - 1]:
                    saved = residual * residual / (schur if schur > 1e-300 else 1e-300) / n
                gain = (saved if saved < err or saved != saved else err) - lam_share * price[t - 1]
                if gain != gain:  # NaN: no gain is known, stop
                    best = -1
                    break
                top_gain[c] = gain
                if best < 0 or gain > top_gain[best]:
                    best = c
            if best < 0 or not top_gain[best] > 1e-12 * (err if err > 1e-300 else 1e-300):
                break
            a = top[best]
            chosen[a] = 1
            index[s] = a + 1
            s += 1
            for u in range(units):
                if member[u, a]:
                    is_paid[u] = 1
            unpaid_prices(cost, member, &is_paid[0], price)
            info = least_squares(G, g, yy, n, &index[0], s, lu, &pivot[0], coef, &err)
    if info != 0:
        raise np.linalg.LinAlgError(f"select_leaf: singular Gram matrix (getrf info {info} at {s} columns)")
    return index_arr[:s].copy(), work[m * m:m * m + s].copy(), err
