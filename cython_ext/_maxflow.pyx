# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Maximum flow (Dinic's algorithm: shortest-path levels, then blocking flows by depth-first pushes with
current-arc pointers) on a graph in compressed sparse rows, without the GIL.

Arc a goes from the node whose row holds it to head[a] with residual capacity cap[a]; rev[a] is the index
of its reverse arc. Residual capacities at or below eps count as zero. The flow is left in cap (residual
capacities); reachable_from() gives the source side of a minimum cut.
"""

import numpy as np

from libc.stdint cimport int32_t, int64_t


cdef bint _levels(int64_t[::1] offsets, int32_t[::1] head, double[::1] cap, int32_t source, int32_t sink,
                  double eps, int32_t[::1] level, int32_t[::1] queue) noexcept nogil:
    cdef int64_t n = level.shape[0], front = 0, back = 0, a
    cdef int32_t u, v
    for u in range(n):
        level[u] = -1
    level[source] = 0
    queue[back] = source
    back += 1
    while front < back:
        u = queue[front]
        front += 1
        for a in range(offsets[u], offsets[u + 1]):
            v = head[a]
            if level[v] < 0 and cap[a] > eps:
                level[v] = level[u] + 1
                queue[back] = v
                back += 1
    return level[sink] >= 0


cdef double _push(int64_t[::1] offsets, int32_t[::1] head, double[::1] cap, int64_t[::1] rev, int32_t u,
                  int32_t sink, double limit, double eps, int32_t[::1] level, int64_t[::1] current) noexcept nogil:
    """Send up to limit from u to the sink along the level graph (current-arc pointers skip arcs that are
    saturated or lead to dead ends); returns what was sent. Recursion depth: the sink's level."""
    cdef double sent = 0.0, pushed
    cdef int64_t a
    cdef int32_t v
    if u == sink:
        return limit
    while current[u] < offsets[u + 1]:
        a = current[u]
        v = head[a]
        if cap[a] > eps and level[v] == level[u] + 1:
            pushed = _push(offsets, head, cap, rev, v, sink, min(limit - sent, cap[a]), eps, level, current)
            if pushed > 0.0:
                cap[a] -= pushed
                cap[rev[a]] += pushed
                sent += pushed
                if limit - sent <= eps:
                    return sent
        current[u] += 1
    level[u] = -1  # nothing more gets through u in this phase
    return sent


def max_flow(int64_t[::1] offsets, int32_t[::1] head, double[::1] cap, int64_t[::1] rev,
             int source, int sink, double eps):
    """Send a maximum flow from source to sink (cap becomes the residual capacities); returns its value."""
    cdef int64_t n = offsets.shape[0] - 1
    cdef int32_t[::1] level = np.empty(n, dtype=np.int32)
    cdef int32_t[::1] queue = np.empty(n, dtype=np.int32)
    cdef int64_t[::1] current = np.empty(n, dtype=np.int64)
    cdef double total = 0.0, sent, unlimited = 0.0
    cdef int64_t a, u
    for a in range(cap.shape[0]):
        unlimited += cap[a]
    with nogil:
        while _levels(offsets, head, cap, source, sink, eps, level, queue):
            for u in range(n):
                current[u] = offsets[u]
            sent = _push(offsets, head, cap, rev, source, sink, unlimited, eps, level, current)
            while sent > eps:
                total += sent
                sent = _push(offsets, head, cap, rev, source, sink, unlimited, eps, level, current)
            total += sent
    return total


def reachable_from(int64_t[::1] offsets, int32_t[::1] head, double[::1] cap, int source, double eps):
    """Nodes reachable from source over arcs with residual capacity above eps (a minimum cut's source side
    after max_flow)."""
    cdef int64_t n = offsets.shape[0] - 1
    cdef int32_t[::1] level = np.empty(n, dtype=np.int32)
    cdef int32_t[::1] queue = np.empty(n, dtype=np.int32)
    with nogil:
        _levels(offsets, head, cap, source, source, eps, level, queue)
    return np.asarray(level) >= 0
