# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""BudgetPrune's minimum-weight closure as a maximum flow on an implicit network, without the GIL.

Rows: each tree's rows are laid out so that every node's rows are a contiguous range of that tree's row
permutation (layout()). Network (lightgbm_cegb/methods/budget_prune.py, _solve_maxflow, states the problem):
- tree nodes v (the input trees' internal nodes, numbered parents first): source -> v with capacity
  max(gain, 0), v -> sink with max(-gain, 0), v -> parent(v) infinite;
- pairs p = (row i, feature k), numbered k * N + i (so a node's pairs lie in one block of N): p -> sink
  with capacity lam * c_k;
- v -> (i, k_v) infinite for every row i in v's range when v is the topmost node testing k_v on the path.
The arcs are implicit. A node's pairs are read from its range of the row permutation; per pair, the nodes
whose arcs enter it are stored (in tree order, 3 bytes each, 4 from 2^24 nodes: per (row, tree, feature first
tested on the row's path), a "triple", the network's only per-arc storage) with a 4-byte start per pair. Only positive
flows of v -> pair arcs are stored, by pair: after the greedy start nearly every pair is fed by one node (the
first to saturate it), so one (node, amount) per pair and a pool of linked entries for the pairs fed by
several (measured at 200,000 rows x 40 trees: 5.6M positive flows for 5.6M pairs and 95M triples). A node
counts its positive flows, so the global relabelling's scan of a node's range for them stops at the last.

Maximum flow: a greedy start saturates every source arc and routes the flow up each tree, absorbed on the
way by each node's sink arc and pairs (this carries ~99% of the final flow); the excess left at the roots
is then moved by push-relabel (FIFO, with global relabelling: exact distances to the sink by a BFS over
reverse arcs, which also marks every node that can no longer reach the sink); what cannot reach the sink
goes back to the source. Residual capacities at or below eps count as zero.
"""

import numpy as np

from libc.math cimport INFINITY
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from libc.stdlib cimport calloc, free, realloc


def layout(const int64_t[::1] parent, const int64_t[::1] leaf_of_row):
    """(perm, lo, hi) for one tree: the rows ordered by the preorder rank of their leaf, and for every node
    the range perm[lo:hi] of the rows that pass through it. Nodes must be numbered parents first (node 0 is
    the root); leaf_of_row holds node numbers."""
    cdef int64_t n = parent.shape[0], num_rows = leaf_of_row.shape[0], v, i, r
    size_ = np.ones(n, dtype=np.int64)
    rank_ = np.zeros(n, dtype=np.int64)
    taken_ = np.zeros(n, dtype=np.int64)
    start_ = np.zeros(n + 1, dtype=np.int64)
    perm_ = np.empty(num_rows, dtype=np.int32)
    lo_ = np.empty(n, dtype=np.int32)
    hi_ = np.empty(n, dtype=np.int32)
    cdef int64_t[::1] size = size_, rank = rank_, taken = taken_, start = start_
    cdef int32_t[::1] perm = perm_, lo = lo_, hi = hi_
    with nogil:
        for v in range(n - 1, 0, -1):
            size[parent[v]] += size[v]
        for v in range(1, n):  # preorder: a child follows its parent and the subtrees of its elder siblings
            rank[v] = rank[parent[v]] + 1 + taken[parent[v]]
            taken[parent[v]] += size[v]
        for i in range(num_rows):  # counting sort of the rows by their leaf's rank
            start[rank[leaf_of_row[i]] + 1] += 1
        for r in range(n):
            start[r + 1] += start[r]
        for v in range(n):
            lo[v] = <int32_t>start[rank[v]]
            hi[v] = <int32_t>start[rank[v] + size[v]]
        for i in range(num_rows):
            r = rank[leaf_of_row[i]]
            perm[start[r]] = <int32_t>i
            start[r] += 1
    return perm_, lo_, hi_


def mark_paid(const int32_t[:, ::1] perm, const int32_t[::1] tree, const int32_t[::1] lo, const int32_t[::1] hi,
              const int32_t[::1] feature, uint8_t[:, ::1] paid):
    """paid[i, feature[j]] = 1 for every row i in the range of node j of tree tree[j]."""
    cdef int64_t j, r
    with nogil:
        for j in range(tree.shape[0]):
            for r in range(lo[j], hi[j]):
                paid[perm[tree[j], r], feature[j]] = 1


cdef struct Entry:  # a node's flow into a pair whose flow comes from more than one node
    double flow
    int32_t node
    int32_t next  # the pair's next entry, -1 at the end (or the free list's next)


cdef class Network:
    """The network of one forest; set_lam() then max_flow() (repeatable with growing lam: a warm start),
    then source_side()."""

    cdef int64_t num_rows, num_nodes, num_pairs, sink  # node ids: tree nodes, then pairs, then the sink
    cdef const int32_t[:, ::1] perm
    cdef const int32_t[::1] tree, parent, lo, hi, feature
    cdef uint8_t[::1] pays
    cdef int32_t[::1] child, level, queue, fed_by, nonzero
    cdef uint8_t[::1] pair_nodes  # the nodes entering each pair, node_bytes each (little-endian)
    cdef int64_t node_bytes
    cdef uint32_t[::1] pair_start  # pair p's nodes: entries offset(p) .. offset(p + 1) - 1 of pair_nodes
    cdef int64_t[::1] block_base, child_offset, current
    cdef int block_shift
    cdef double[::1] source_cap, to_source, to_sink, up, pair_cap, pair_unit, excess, fed
    cdef double lam, eps
    cdef int32_t unreachable
    cdef Entry* pool
    cdef public int64_t pool_used  # pool entries ever taken (the pairs fed by more than one node)
    cdef int64_t pool_size
    cdef int32_t pool_free
    cdef public double flow
    cdef public int64_t global_relabels  # how many so far (diagnostics, and tests that must exercise them)

    def __init__(self, const int32_t[:, ::1] perm, const int32_t[::1] tree, const int32_t[::1] parent,
                 const int32_t[::1] lo, const int32_t[::1] hi, const int32_t[::1] feature,
                 const uint8_t[::1] topmost, const double[::1] gain, const double[::1] lazy, double eps,
                 int node_bytes=0):
        """perm: (trees, rows) row permutations; per node (all trees, parents first): tree, parent (-1 at
        roots), range, feature, topmost (has pair arcs), gain; lazy: c_k. node_bytes: the width of the node
        ids stored per pair, 3 (fewer than 2^24 nodes) or 4; 0 takes the narrowest that fits."""
        cdef int64_t v, r, p, num_triples = 0, m = tree.shape[0], k_count = lazy.shape[0]
        cdef int64_t num_rows = perm.shape[1], block, start
        self.perm, self.tree, self.parent, self.lo, self.hi, self.feature = perm, tree, parent, lo, hi, feature
        self.pays = np.array(topmost, dtype=np.uint8)
        self.num_rows, self.num_nodes = num_rows, m
        self.num_pairs = num_rows * k_count
        self.sink = m + self.num_pairs
        self.eps, self.lam, self.flow = eps, 0.0, 0.0
        self.to_source = np.zeros(m)  # residual of source -> v
        self.source_cap = np.zeros(m)
        self.to_sink = np.zeros(m)  # residual of v -> sink
        self.up = np.zeros(m)  # flow on v -> parent
        self.pair_unit = np.asarray(lazy, dtype=np.float64)
        # a pair has at most one node per tree: its offset is a 4-byte start within a block of 2^block_shift
        # pairs (fewer than 2^32 nodes) plus the block's 8-byte base
        self.block_shift = 16
        while self.block_shift > 0 and (<int64_t>1 << self.block_shift) * perm.shape[0] >= <int64_t>1 << 32:
            self.block_shift -= 1
        self.pair_start = np.zeros(self.num_pairs + 1, dtype=np.uint32)
        self.block_base = np.zeros((self.num_pairs >> self.block_shift) + 1, dtype=np.int64)
        self.child_offset = np.zeros(m + 1, dtype=np.int64)
        cdef uint32_t[::1] fill
        with nogil:
            for v in range(m):
                self.to_source[v] = max(gain[v], 0.0)
                self.source_cap[v] = self.to_source[v]
                self.to_sink[v] = max(-gain[v], 0.0)
                if parent[v] >= 0:
                    self.child_offset[parent[v] + 1] += 1
                if topmost[v]:
                    num_triples += hi[v] - lo[v]
                    for r in range(lo[v], hi[v]):
                        self.pair_start[feature[v] * num_rows + perm[tree[v], r]] += 1
            for v in range(m):
                self.child_offset[v + 1] += self.child_offset[v]
            start = 0  # the pairs' counts become their starts
            for p in range(self.num_pairs + 1):
                block = p >> self.block_shift
                if p == block << self.block_shift:
                    self.block_base[block] = start
                r = self.pair_start[p]
                self.pair_start[p] = <uint32_t>(start - self.block_base[block])
                start += r
        if node_bytes not in (0, 3, 4) or node_bytes == 3 and m >= 1 << 24:
            raise ValueError(f"node_bytes should be 0, 3 (fewer than 2^24 nodes) or 4, got {node_bytes} for {m} nodes")
        self.node_bytes = node_bytes or (3 if m < 1 << 24 else 4)
        self.pair_nodes = np.empty(num_triples * self.node_bytes, dtype=np.uint8)
        self.child = np.empty(self.child_offset[m], dtype=np.int32)
        fill_ = np.array(self.pair_start[:self.num_pairs])
        fill = fill_
        child_fill = np.array(self.child_offset[:m])
        cdef int64_t[::1] child_at = child_fill
        # feature by feature (the writes stay within one feature's block), nodes in order within each
        by_feature_ = np.argsort(np.asarray(feature), kind="stable").astype(np.int64)
        cdef int64_t[::1] by_feature = by_feature_
        cdef int64_t j, at, b
        with nogil:
            for v in range(m):
                if parent[v] >= 0:
                    self.child[child_at[parent[v]]] = <int32_t>v
                    child_at[parent[v]] += 1
            for j in range(m):
                v = by_feature[j]
                if topmost[v]:
                    for r in range(lo[v], hi[v]):
                        p = feature[v] * num_rows + perm[tree[v], r]
                        at = (self.block_base[p >> self.block_shift] + fill[p]) * self.node_bytes
                        for b in range(self.node_bytes):
                            self.pair_nodes[at + b] = <uint8_t>(v >> (8 * b))
                        fill[p] += 1
        del fill_, child_fill, by_feature_
        self.pair_cap = np.zeros(self.num_pairs)  # residual of pair -> sink
        # the flow into each pair: from one node (fed_by >= 0, the amount in fed), none (-1), or from several
        # (fed_by = -2 - e: a list of pool entries from e)
        self.fed_by = np.full(self.num_pairs, -1, dtype=np.int32)
        self.fed = np.zeros(self.num_pairs)
        self.nonzero = np.zeros(m, dtype=np.int32)  # per node, the pairs it sends a positive flow to
        self.level = np.empty(self.sink + 1, dtype=np.int32)
        self.queue = np.empty(self.sink + 1, dtype=np.int32)  # the BFS's queue, and push-relabel's FIFO
        self.excess = np.zeros(self.sink)  # of the tree nodes and pairs, during max_flow()
        self.unreachable = <int32_t>(self.sink + 1)
        self.current = np.empty(m, dtype=np.int64)
        self.pool, self.pool_used, self.pool_size, self.pool_free = NULL, 0, 0, -1

    def __dealloc__(self):
        free(self.pool)

    def set_lam(self, double lam):
        """Raise lam (the pair -> sink capacities grow; the flow stays feasible)."""
        cdef int64_t p
        cdef double step = lam - self.lam
        if step < 0:
            raise ValueError(f"lam can only grow: {self.lam!r} -> {lam!r}")
        with nogil:
            for p in range(self.num_pairs):
                if self._offset(p + 1) > self._offset(p):
                    self.pair_cap[p] += step * self.pair_unit[p // self.num_rows]
        self.lam = lam

    cdef inline int64_t _offset(self, int64_t p) noexcept nogil:
        return self.block_base[p >> self.block_shift] + self.pair_start[p]

    cdef inline int32_t _pair_node(self, int64_t e) noexcept nogil:
        cdef const uint8_t* q = &self.pair_nodes[e * self.node_bytes]
        cdef uint32_t v = q[0] | (<uint32_t>q[1] << 8) | (<uint32_t>q[2] << 16)
        if self.node_bytes == 4:
            v |= <uint32_t>q[3] << 24
        return <int32_t>v

    # ------------------------------------------------------------------------ the flows of node -> pair arcs
    # Only positive flows are stored: after the greedy start a pair's flow comes from one node (the first to
    # saturate it) in all but a few pairs, so one (node, amount) per pair, and a pool of entries for the rest.

    cdef int32_t _new_entry(self, int32_t node, double flow, int32_t next) noexcept nogil:
        """A pool entry, or -1 if the pool cannot grow."""
        cdef int32_t e
        cdef int64_t size
        cdef Entry* grown
        if self.pool_free >= 0:
            e = self.pool_free
            self.pool_free = self.pool[e].next
        else:
            if self.pool_used == self.pool_size:
                size = min(self.pool_size + self.pool_size // 2 + 1024, <int64_t>2147483645)
                if size <= self.pool_used:
                    return -1
                grown = <Entry*>realloc(self.pool, size * sizeof(Entry))
                if grown == NULL:
                    return -1
                self.pool, self.pool_size = grown, size
            e = <int32_t>self.pool_used
            self.pool_used += 1
        self.pool[e].flow, self.pool[e].node, self.pool[e].next = flow, node, next
        return e

    cdef int _add_flow(self, int32_t v, int64_t p, double a) noexcept nogil:
        """Flow of v -> p plus a > 0; -1 if the pool cannot grow."""
        cdef int32_t fed_by = self.fed_by[p], e
        if fed_by == -1:
            self.fed_by[p], self.fed[p] = v, a
            self.nonzero[v] += 1
            return 0
        if fed_by == v:
            self.fed[p] += a
            return 0
        if fed_by >= 0:  # a second node: the pair's flows move to the pool
            e = self._new_entry(fed_by, self.fed[p], -1)
            if e < 0:
                return -1
            self.fed_by[p] = fed_by = -2 - e
        e = -2 - fed_by
        while e >= 0:
            if self.pool[e].node == v:
                self.pool[e].flow += a
                return 0
            e = self.pool[e].next
        e = self._new_entry(v, a, -2 - fed_by)
        if e < 0:
            return -1
        self.fed_by[p] = -2 - e
        self.nonzero[v] += 1
        return 0

    cdef double _flow_of(self, int32_t v, int64_t p) noexcept nogil:
        cdef int32_t e = self.fed_by[p]
        if e >= -1:
            return self.fed[p] if e == v else 0.0
        e = -2 - e
        while e >= 0:
            if self.pool[e].node == v:
                return self.pool[e].flow
            e = self.pool[e].next
        return 0.0

    cdef inline void _moved_back(self, int64_t u, int32_t v, double a, uint8_t* queued, int64_t head,
                                 int64_t* count) noexcept nogil:
        """a of pair node u's excess moved to node v, which joins the FIFO (if queued is not NULL)."""
        self.excess[u] -= a
        self.excess[v] += a
        if queued != NULL:
            self._enqueue(v, queued, head, count)

    cdef int64_t _send_back(self, int64_t p, int32_t to_level, double above, double until, uint8_t* queued,
                            int64_t head, int64_t* count) noexcept nogil:
        """Move p's excess back over its flows of more than `above` from nodes at level to_level (any level
        if -1), until the excess is at most `until`; the nodes that receive some join the FIFO (if queued is
        not NULL). Returns the entries scanned."""
        cdef int64_t u = self.num_nodes + p, scanned = 0
        cdef int32_t v, e, previous = -1, next
        cdef double a
        if self.fed_by[p] >= 0:
            v = self.fed_by[p]
            scanned = 1
            if self.fed[p] > above and (to_level < 0 or self.level[v] == to_level):
                a = min(self.excess[u], self.fed[p])
                self.fed[p] -= a
                self._moved_back(u, v, a, queued, head, count)
                if self.fed[p] <= 0:
                    self.fed_by[p], self.fed[p] = -1, 0.0
                    self.nonzero[v] -= 1
            return scanned
        e = -2 - self.fed_by[p] if self.fed_by[p] <= -2 else -1
        while e >= 0 and self.excess[u] > until:
            scanned += 1
            next = self.pool[e].next
            v = self.pool[e].node
            if self.pool[e].flow > above and (to_level < 0 or self.level[v] == to_level):
                a = min(self.excess[u], self.pool[e].flow)
                self.pool[e].flow -= a
                self._moved_back(u, v, a, queued, head, count)
                if self.pool[e].flow <= 0:  # unlinked, and onto the free list
                    self.nonzero[v] -= 1
                    if previous < 0:
                        self.fed_by[p] = -2 - next if next >= 0 else -1
                    else:
                        self.pool[previous].next = next
                    self.pool[e].next = self.pool_free
                    self.pool_free = e
                    e = next
                    continue
            previous = e
            e = next
        return scanned

    # ------------------------------------------------------------------------------------------- max flow

    cdef int _greedy(self) noexcept nogil:
        """Saturate the source arcs and route the flow up each tree, absorbed on the way by each node's sink
        arc, then its pairs; what reaches a root stays there as excess. -1 if the pool cannot grow."""
        cdef int64_t v, r, p, t
        cdef double a
        for v in range(self.num_nodes - 1, -1, -1):  # children before parents
            self.excess[v] += self.to_source[v]
            self.to_source[v] = 0.0
            a = min(self.excess[v], self.to_sink[v])
            self.to_sink[v] -= a
            self.excess[v] -= a
            self.flow += a
            if self.pays[v]:
                t = self.tree[v]
                for r in range(self.lo[v], self.hi[v]):
                    if self.excess[v] <= self.eps:
                        break
                    p = self.feature[v] * self.num_rows + self.perm[t, r]
                    a = min(self.excess[v], self.pair_cap[p])
                    if a > 0:
                        if self._add_flow(<int32_t>v, p, a) < 0:
                            return -1
                        self.pair_cap[p] -= a
                        self.excess[v] -= a
                        self.flow += a
            if self.parent[v] >= 0:
                self.up[v] += self.excess[v]
                self.excess[self.parent[v]] += self.excess[v]
                self.excess[v] = 0.0
        return 0

    cdef void _return_excess(self) noexcept nogil:
        """Send every excess back to the source (pairs to the nodes that fed them, then down each tree,
        parents first: a node's inflow comes only from the source and its children)."""
        cdef int64_t m = self.num_nodes, p, e, v, c
        cdef double a
        for p in range(self.num_pairs):
            if self.excess[m + p] > 0:
                self._send_back(p, -1, 0.0, 0.0, NULL, 0, NULL)
            self.excess[m + p] = 0.0
        for v in range(m):
            a = min(self.excess[v], self.source_cap[v] - self.to_source[v])
            self.to_source[v] += a
            self.excess[v] -= a
            for e in range(self.child_offset[v], self.child_offset[v + 1]):
                if self.excess[v] <= 0:
                    break
                c = self.child[e]
                a = min(self.excess[v], self.up[c])
                self.up[c] -= a
                self.excess[c] += a
                self.excess[v] -= a
            self.excess[v] = 0.0

    cdef int64_t _arc(self, int64_t u, int64_t a, double* cap) noexcept nogil:
        """Head of arc a of tree node u (its residual capacity in cap), -1 for an absent arc, -2 past the
        last. Arcs: sink, parent, children (reverse), pairs."""
        cdef int64_t v, children
        if a == 0:
            cap[0] = self.to_sink[u]
            return self.sink
        if a == 1:
            cap[0] = INFINITY
            return self.parent[u]  # -1 at a root
        a -= 2
        children = self.child_offset[u + 1] - self.child_offset[u]
        if a < children:
            v = self.child[self.child_offset[u] + a]
            cap[0] = self.up[v]
            return v
        a -= children
        if not self.pays[u] or a >= self.hi[u] - self.lo[u]:
            return -2
        cap[0] = INFINITY
        return self.num_nodes + self.feature[u] * self.num_rows + self.perm[self.tree[u], self.lo[u] + a]

    cdef int _augment(self, int64_t u, int64_t a, int64_t h, double amount) noexcept nogil:
        """Push amount over arc a of tree node u (head h); -1 if the pool cannot grow."""
        cdef int64_t children
        if a == 0:
            self.to_sink[u] -= amount
        elif a == 1:
            self.up[u] += amount
        else:
            a -= 2
            children = self.child_offset[u + 1] - self.child_offset[u]
            if a < children:
                self.up[self.child[self.child_offset[u] + a]] -= amount
            else:
                return self._add_flow(<int32_t>u, h - self.num_nodes, amount)
        return 0

    cdef void _reachable(self) noexcept nogil:
        """level[u] = 0 for the nodes reachable from the source over residual arcs, -1 elsewhere (BFS;
        the sink is not needed and not marked)."""
        cdef int64_t m = self.num_nodes, front = 0, back = 0, u, v, p, e, r, t, k
        for u in range(self.sink + 1):
            self.level[u] = -1
        for v in range(m):
            if self.to_source[v] > self.eps:
                self._mark(v, &back)
        while front < back:
            u = self.queue[front]
            front += 1
            if u >= m:  # a pair: back to the nodes whose flow enters it
                p = u - m
                if self.fed_by[p] >= 0:
                    if self.fed[p] > self.eps:
                        self._mark(self.fed_by[p], &back)
                    continue
                e = -2 - self.fed_by[p] if self.fed_by[p] <= -2 else -1
                while e >= 0:
                    if self.pool[e].flow > self.eps:
                        self._mark(self.pool[e].node, &back)
                    e = self.pool[e].next
                continue
            if self.parent[u] >= 0:
                self._mark(self.parent[u], &back)
            for e in range(self.child_offset[u], self.child_offset[u + 1]):
                if self.up[self.child[e]] > self.eps:
                    self._mark(self.child[e], &back)
            if self.pays[u]:
                t, k = self.tree[u], m + self.feature[u] * self.num_rows
                for r in range(self.lo[u], self.hi[u]):
                    self._mark(k + self.perm[t, r], &back)

    cdef inline void _mark(self, int64_t u, int64_t* back) noexcept nogil:
        if self.level[u] < 0:
            self.level[u] = 0
            self.queue[back[0]] = <int32_t>u
            back[0] += 1

    cdef inline void _label(self, int64_t u, int32_t d, int64_t* back) noexcept nogil:
        if self.level[u] == self.unreachable:
            self.level[u] = d
            self.queue[back[0]] = <int32_t>u
            back[0] += 1

    cdef int64_t _global_relabel(self) noexcept nogil:
        """Exact labels: residual distance to the sink (BFS over reverse arcs); unreachable elsewhere.
        Returns the work done (arcs scanned)."""
        cdef int64_t m = self.num_nodes, front = 0, back = 0, u, p, e, r, t, k, work = 0, first, last
        cdef int32_t d, found
        cdef double f
        self.global_relabels += 1
        for u in range(self.sink + 1):
            self.level[u] = self.unreachable
        for u in range(m):
            self.current[u] = 0
        self.level[self.sink] = 0
        for u in range(m):
            if self.to_sink[u] > self.eps:
                self._label(u, 1, &back)
        # pairs with spare capacity are at 1 and the nodes whose arcs enter them at 2: done here in one
        # sequential sweep instead of through the queue (most pairs are there, and the queue's order is random)
        for p in range(self.num_pairs):
            if self.pair_cap[p] > self.eps:
                self.level[m + p] = 1
                first, last = self._offset(p), self._offset(p + 1)
                for e in range(first, last):
                    self._label(self._pair_node(e), 2, &back)
                work += last - first + 1
        while front < back:
            u = self.queue[front]
            front += 1
            d = self.level[u] + 1
            if u >= m:  # a pair: the nodes whose (infinite) arcs enter it
                p = u - m
                first, last = self._offset(p), self._offset(p + 1)
                for e in range(first, last):
                    self._label(self._pair_node(e), d, &back)
                work += last - first + 1
                continue
            for e in range(self.child_offset[u], self.child_offset[u + 1]):  # child -> u: infinite
                self._label(self.child[e], d, &back)
            if self.parent[u] >= 0 and self.up[u] > self.eps:  # parent -> u: the reverse of u's flow up
                self._label(self.parent[u], d, &back)
            if self.nonzero[u] > 0:  # pair -> u: the reverse of u's flow into the pair
                t, k, found = self.tree[u], self.feature[u] * self.num_rows, 0
                r = self.lo[u]
                while r < self.hi[u] and found < self.nonzero[u]:
                    f = self._flow_of(<int32_t>u, k + self.perm[t, r])
                    if f > 0:
                        found += 1
                        if f > self.eps:
                            self._label(m + k + self.perm[t, r], d, &back)
                    r += 1
                work += r - self.lo[u]
            work += self.child_offset[u + 1] - self.child_offset[u] + 2
        return work

    cdef int64_t _relabel(self, int64_t u) noexcept nogil:
        """level[u] = 1 + the lowest label over u's residual arcs (unreachable if none); no arc of u is
        admissible, so no label is below level[u] and the scan stops at one equal to it. Returns the
        number of arcs scanned."""
        cdef int32_t lowest = self.unreachable, floor = self.level[u]
        cdef int64_t m = self.num_nodes, e, r, t, k, scanned = 0, p
        if u >= m:
            p = u - m
            if self.pair_cap[p] > self.eps:
                lowest = 0
            if self.fed_by[p] >= 0:
                if self.fed[p] > self.eps and self.level[self.fed_by[p]] < lowest:
                    lowest = self.level[self.fed_by[p]]
                scanned = 2
            else:
                e = -2 - self.fed_by[p] if self.fed_by[p] <= -2 else -1
                while e >= 0:
                    if self.pool[e].flow > self.eps and self.level[self.pool[e].node] < lowest:
                        lowest = self.level[self.pool[e].node]
                    e = self.pool[e].next
                    scanned += 1
        else:
            if self.to_sink[u] > self.eps:
                lowest = 0
            if self.parent[u] >= 0 and self.level[self.parent[u]] < lowest:
                lowest = self.level[self.parent[u]]
            for e in range(self.child_offset[u], self.child_offset[u + 1]):
                if self.up[self.child[e]] > self.eps and self.level[self.child[e]] < lowest:
                    lowest = self.level[self.child[e]]
            scanned = self.child_offset[u + 1] - self.child_offset[u] + 2
            if self.pays[u]:
                t, k = self.tree[u], m + self.feature[u] * self.num_rows
                r = self.lo[u]
                while r < self.hi[u] and lowest > floor:
                    if self.level[k + self.perm[t, r]] < lowest:
                        lowest = self.level[k + self.perm[t, r]]
                    r += 1
                scanned += r - self.lo[u]
        self.level[u] = lowest + 1 if lowest < self.unreachable else self.unreachable
        return scanned

    cdef int64_t _skip(self, int64_t u, int64_t a) noexcept nogil:
        """The first arc of tree node u from a on whose head's label is level[u] - 1 (or the next arc that
        is not to a pair): a fast pass over the long runs of a node's pair arcs."""
        cdef int64_t m = self.num_nodes, base, r, t, k
        cdef int32_t target = self.level[u] - 1
        if a < 2 or not self.pays[u]:
            return a
        base = 2 + self.child_offset[u + 1] - self.child_offset[u]
        if a < base:
            return a
        t, k = self.tree[u], m + self.feature[u] * self.num_rows
        r = self.lo[u] + a - base
        while r < self.hi[u] and self.level[k + self.perm[t, r]] != target:
            r += 1
        return base + r - self.lo[u]

    cdef inline void _enqueue(self, int64_t v, uint8_t* queued, int64_t head, int64_t* count) noexcept nogil:
        """v joins push-relabel's FIFO (``queue``: count[0] entries from head, cyclic) unless it is in it."""
        if not queued[v]:
            self.queue[(head + count[0]) % (self.sink + 1)] = <int32_t>v
            count[0] += 1
            queued[v] = 1

    cdef int64_t _refill(self, uint8_t* queued) noexcept nogil:
        """The FIFO afresh from its start: every node and pair with excess that can still reach the sink, in
        order. Returns their count."""
        cdef int64_t u, count = 0
        for u in range(self.sink):
            queued[u] = 0
            if self.excess[u] > self.eps and self.level[u] < self.unreachable:
                self._enqueue(u, queued, 0, &count)
        return count

    cdef int _push_relabel(self) noexcept nogil:
        """Move all excess to the sink or to nodes that cannot reach it (FIFO push-relabel; a global
        relabelling whenever pushes and relabels have done a sixteenth of the last one's work: measured
        best at 200,000 rows x 40 trees among 1/2 .. 1/64). A pair's arcs are its sink arc and the reverse
        of its flows (rarely more than one), scanned from the first at each discharge. Returns -1 if memory
        runs out."""
        cdef int64_t n = self.sink + 1, m = self.num_nodes, head = 0, count = 0, u, a, h, work = 0, budget
        cdef double cap, amount
        cdef uint8_t* queued = <uint8_t*>calloc(n, 1)
        if queued == NULL:
            return -1
        budget = self._global_relabel() // 16 + 300000
        count = self._refill(queued)
        while count > 0:
            u = self.queue[head]  # the BFS's queue, refilled after every global relabelling
            head = (head + 1) % n
            count -= 1
            queued[u] = 0
            if u >= m:
                work += self._discharge_pair(u - m, queued, head, &count)
            while u < m and self.excess[u] > self.eps and self.level[u] < self.unreachable:
                a = self._skip(u, self.current[u])
                self.current[u] = a
                h = self._arc(u, a, &cap)
                if h == -2:
                    work += self._relabel(u)
                    self.current[u] = 0
                    continue
                if h >= 0 and cap > self.eps and self.level[u] == self.level[h] + 1:
                    amount = min(self.excess[u], cap)
                    work += 1
                    if self._augment(u, a, h, amount) < 0:
                        free(queued)
                        return -1
                    self.excess[u] -= amount
                    if h == self.sink:
                        self.flow += amount
                    else:
                        self.excess[h] += amount
                        self._enqueue(h, queued, head, &count)
                    if self.excess[u] <= self.eps:
                        break
                self.current[u] += 1
            if work > budget:
                work = 0
                budget = self._global_relabel() // 16 + 300000
                head, count = 0, self._refill(queued)
        free(queued)
        return 0

    cdef int64_t _discharge_pair(self, int64_t p, uint8_t* queued, int64_t head, int64_t* count) noexcept nogil:
        """Push pair p's excess to the sink, then back to the nodes one label down that fed it; relabel and
        repeat until no excess is left or p cannot reach the sink. Returns the work done."""
        cdef int64_t u = self.num_nodes + p, work = 0
        cdef double a
        while self.excess[u] > self.eps and self.level[u] < self.unreachable:
            if self.level[u] == 1 and self.pair_cap[p] > self.eps:
                a = min(self.excess[u], self.pair_cap[p])
                self.pair_cap[p] -= a
                self.excess[u] -= a
                self.flow += a
                work += 1
                if self.excess[u] <= self.eps:
                    break
            work += self._send_back(p, self.level[u] - 1, self.eps, self.eps, queued, head, count)
            if self.excess[u] <= self.eps:
                break
            work += self._relabel(u)
        return work

    def max_flow(self):
        """Make the flow maximum for the current lam: the greedy start, push-relabel, then the excess left
        at nodes that cannot reach the sink goes back to the source."""
        cdef int status
        with nogil:
            status = self._greedy()
            if status == 0:
                status = self._push_relabel()
            if status == 0:
                self._return_excess()
        if status != 0:
            raise MemoryError("budget_prune: no memory left for the max-flow")

    def source_side(self):
        """Tree nodes reachable from the source in the residual network: a minimum cut's source side."""
        with nogil:
            self._reachable()
        return np.asarray(self.level[:self.num_nodes]) >= 0


def topmost(const int64_t[::1] parent, const int64_t[::1] feature):
    """For each internal node (feature >= 0): no ancestor tests its feature."""
    cdef int64_t n = parent.shape[0], v, u
    result_ = np.zeros(n, dtype=np.uint8)
    cdef uint8_t[::1] result = result_
    with nogil:
        for v in range(n):
            if feature[v] < 0:
                continue
            result[v] = 1
            u = parent[v]
            while u >= 0:
                if feature[u] == feature[v]:
                    result[v] = 0
                    break
                u = parent[u]
    return result_.astype(bool)
