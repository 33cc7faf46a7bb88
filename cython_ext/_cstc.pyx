# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""CSTC, CSCC and Cronus (lightgbm_cegb/methods/cstc/optimiser.py): the per-row passes over the design matrix
Z, without the GIL.

soft_pass: the soft routing (each slot's reach and sigmoid), the relaxed objective's per-row terms and the row
weights of its gradient, one row at a time over all slots, with the products with Z fused into the same pass
(Z is read once per call: the fresh node's scores and the wanted nodes' gradients). route: hard routing and the
terminal's prediction, each row's scores only at the nodes on its path and only over the weights' non-zero
columns. The kernels trust their arrays: optimiser.py builds them from a checked Structure."""

from libc.math cimport exp
from libc.stdlib cimport free, malloc

from _typedefs cimport float64, int64, uint8


cdef inline float64 expit(float64 x) noexcept nogil:
    cdef float64 e
    if x < 0:
        e = exp(x)
        return e / (1.0 + e)
    return 1.0 / (1.0 + exp(-x))


cdef inline float64 dot(const float64* a, const float64* b, Py_ssize_t d) noexcept nogil:
    """a . b with four partial sums (the additions of one chain wait on each other; four chains do not)."""
    cdef float64 s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef Py_ssize_t c = 0
    while c + 4 <= d:
        s0 += a[c] * b[c]
        s1 += a[c + 1] * b[c + 1]
        s2 += a[c + 2] * b[c + 2]
        s3 += a[c + 3] * b[c + 3]
        c += 4
    while c < d:
        s0 += a[c] * b[c]
        c += 1
    return (s0 + s1) + (s2 + s3)


def soft_pass(const float64[:, ::1] Z, float64[:, ::1] scores, int64 fresh, const float64[::1] beta_fresh,
              const float64[::1] theta, const float64[::1] y, const float64[::1] s, const int64[::1] order,
              const int64[:, ::1] kids, const int64[::1] param_of, const uint8[::1] own_loss,
              const float64[::1] vtot, const float64[::1] vgrad, const int64[::1] wanted, int mode,
              float64[::1] p_sum, float64[:, ::1] g_out, float64[::1] g_theta, float64[:, ::1] P_out,
              float64[:, ::1] S_out):
    """One pass over the rows of Z (n, d); ``scores`` (n, slots): z.beta_j in the columns of the classifier
    nodes. ``fresh`` >= 0: that column is computed first, as z.beta_fresh (and stored). ``order``: the
    reachable slots, parents first.

    mode 0: the reach only; 1: also the objective's per-row part, sum_ij p_ij V_ij with
    V_ij = s_i (own_loss_j (z_i.beta_{param_of j} - y_i)^2 / n + vtot_j); 2: also the gradient: ``g_out[q]`` +=
    the gradient of that part (with V_ij + s_i vgrad_j) in beta_{wanted[q]}, ``g_theta`` += in theta.
    Always ``p_sum[j]`` += sum_i s_i p_ij. ``P_out`` / ``S_out`` (n, slots) or (0, 0): each row's reach and
    sigmoid stored when given. Returns the objective's part (0 in mode 0), summed with compensation."""
    cdef Py_ssize_t n = Z.shape[0], d = Z.shape[1], size = scores.shape[1], m = order.shape[0]
    cdef Py_ssize_t nw = wanted.shape[0], i, idx, q, a, j, k, down, up
    cdef bint store = P_out.shape[0] > 0
    cdef float64 total = 0.0, carry = 0.0, row_total, t, sig, r, ds, wk, si, yi, inv_n = 1.0 / n
    cdef const float64* zi
    cdef float64* sc
    cdef float64* buffer = <float64*> malloc(5 * size * sizeof(float64))
    if buffer == NULL:
        raise MemoryError()
    cdef float64* P = buffer
    cdef float64* Sg = buffer + size
    cdef float64* V = buffer + 2 * size
    cdef float64* U = buffer + 3 * size
    cdef float64* W = buffer + 4 * size
    with nogil:
        for idx in range(m):
            j = order[idx]
            P[j] = 0.0
            Sg[j] = 0.0
        for i in range(n):
            zi = &Z[i, 0]
            sc = &scores[i, 0]
            si = s[i]
            yi = y[i]
            if fresh >= 0:
                sc[fresh] = dot(zi, &beta_fresh[0], d)
            P[order[0]] = 1.0
            row_total = 0.0
            for idx in range(m):
                j = order[idx]
                if kids[j, 0] >= 0:
                    sig = expit(sc[j] - theta[j])
                    Sg[j] = sig
                    P[kids[j, 0]] = P[j] * (1.0 - sig)
                    P[kids[j, 1]] = P[j] * sig
                p_sum[j] += si * P[j]
                if mode >= 1:
                    V[j] = si * vtot[j]
                    if own_loss[j]:
                        r = sc[param_of[j]] - yi
                        V[j] += si * r * r * inv_n
                    row_total += P[j] * V[j]
            if store:
                for idx in range(m):
                    j = order[idx]
                    P_out[i, j] = P[j]
                    S_out[i, j] = Sg[j]
            if mode == 0:
                continue
            t = total + row_total  # Neumaier's compensated sum over the rows
            if (total if total >= 0 else -total) >= (row_total if row_total >= 0 else -row_total):
                carry += (total - t) + row_total
            else:
                carry += (row_total - t) + total
            total = t
            if mode == 1:
                continue
            for idx in range(m):
                j = order[idx]
                W[j] = 0.0
            for idx in range(m):
                j = order[idx]
                if own_loss[j]:
                    k = param_of[j]
                    W[k] += 2.0 * inv_n * si * P[j] * (sc[k] - yi)
                U[j] = P[j] * (V[j] + si * vgrad[j])
            for idx in range(m - 1, -1, -1):
                j = order[idx]
                if kids[j, 0] >= 0:
                    down = kids[j, 0]
                    up = kids[j, 1]
                    ds = (1.0 - Sg[j]) * U[up] - Sg[j] * U[down]
                    U[j] += U[up] + U[down]
                    W[j] += ds
                    g_theta[j] -= ds
            for q in range(nw):
                wk = W[wanted[q]]
                if wk != 0.0:
                    for a in range(d):
                        g_out[q, a] += wk * zi[a]
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
