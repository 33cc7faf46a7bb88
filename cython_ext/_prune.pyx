# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""BudgetPrune's minimum-weight closure as a maximum flow on an implicit network, without the GIL.

Rows: each tree's rows are laid out so that every node's rows are a contiguous range of that tree's row
permutation (layout()). Network (lightgbm_cegb/methods/budget_prune.py, _solve_maxflow, states the problem):
- tree nodes v (the input trees' internal nodes, numbered parents first): source -> v with capacity
  max(gain, 0), v -> sink with max(-gain, 0), v -> parent(v) infinite;
- pairs p = (row i, feature k), numbered k * N + i (so a node's pairs lie in one block of N): p -> sink
  with capacity lam * c_k;
- v -> (i, k_v) infinite for every row i in v's range when v is the topmost node testing k_v on the path.
Nothing is stored per arc except the flow of the v -> pair arcs (one double per (v, row), "triples", in v's
row order) and, per pair, the nodes whose arcs enter it (int32, in tree order): 12 bytes per triple. A
triple's flow is found from either side: from v by its position in v's range, from a pair through the
inverse row permutation of v's tree.

Maximum flow: a greedy start saturates every source arc and routes the flow up each tree, absorbed on the
way by each node's sink arc and pairs (this carries ~99% of the final flow); the excess left at the roots
is then moved by push-relabel (FIFO, with global relabelling: exact distances to the sink by a BFS over
reverse arcs, which also marks every node that can no longer reach the sink); what cannot reach the sink
goes back to the source. Residual capacities at or below eps count as zero.
"""

import numpy as np

from libc.math cimport INFINITY
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport calloc, free, malloc


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


cdef class Network:
    """The network of one forest; set_lam() then max_flow() (repeatable with growing lam: a warm start),
    then source_side()."""

    cdef int64_t num_rows, num_nodes, num_pairs, sink  # node ids: tree nodes, then pairs, then the sink
    cdef const int32_t[:, ::1] perm
    cdef int32_t[:, ::1] inverse
    cdef const int32_t[::1] tree, parent, lo, hi, feature
    cdef int32_t[::1] pair_nodes, child, level, queue
    cdef int64_t[::1] triple_offset, pair_offset, child_offset, current
    cdef double[::1] source_cap, to_source, to_sink, up, triple, pair_cap, pair_unit, excess
    cdef double lam, eps
    cdef int32_t unreachable
    cdef public double flow
    cdef public int64_t global_relabels  # how many so far (diagnostics, and tests that must exercise them)

    def __init__(self, const int32_t[:, ::1] perm, const int32_t[::1] tree, const int32_t[::1] parent,
                 const int32_t[::1] lo, const int32_t[::1] hi, const int32_t[::1] feature,
                 const uint8_t[::1] topmost, const double[::1] gain, const double[::1] lazy, double eps):
        """perm: (trees, rows) row permutations; per node (all trees, parents first): tree, parent (-1 at
        roots), range, feature, topmost (has pair arcs), gain; lazy: c_k."""
        cdef int64_t v, r, p, num_triples = 0, m = tree.shape[0], k_count = lazy.shape[0]
        cdef int64_t num_rows = perm.shape[1]
        self.perm, self.tree, self.parent, self.lo, self.hi, self.feature = perm, tree, parent, lo, hi, feature
        self.num_rows, self.num_nodes = num_rows, m
        self.num_pairs = num_rows * k_count
        self.sink = m + self.num_pairs
        self.eps, self.lam, self.flow = eps, 0.0, 0.0
        self.to_source = np.zeros(m)  # residual of source -> v
        self.source_cap = np.zeros(m)
        self.to_sink = np.zeros(m)  # residual of v -> sink
        self.up = np.zeros(m)  # flow on v -> parent
        self.pair_cap = np.zeros(self.num_pairs)  # residual of pair -> sink
        self.pair_unit = np.asarray(lazy, dtype=np.float64)
        self.triple_offset = np.full(m, -1, dtype=np.int64)
        self.pair_offset = np.zeros(self.num_pairs + 1, dtype=np.int64)
        self.child_offset = np.zeros(m + 1, dtype=np.int64)
        self.inverse = np.empty((perm.shape[0], num_rows), dtype=np.int32)
        cdef int64_t[::1] fill
        with nogil:
            for v in range(m):
                self.to_source[v] = max(gain[v], 0.0)
                self.source_cap[v] = self.to_source[v]
                self.to_sink[v] = max(-gain[v], 0.0)
                if parent[v] >= 0:
                    self.child_offset[parent[v] + 1] += 1
                if topmost[v]:
                    self.triple_offset[v] = num_triples
                    num_triples += hi[v] - lo[v]
                    for r in range(lo[v], hi[v]):
                        self.pair_offset[feature[v] * num_rows + perm[tree[v], r] + 1] += 1
            for v in range(m):
                self.child_offset[v + 1] += self.child_offset[v]
            for p in range(self.num_pairs):
                self.pair_offset[p + 1] += self.pair_offset[p]
            for v in range(perm.shape[0]):
                for r in range(num_rows):
                    self.inverse[v, perm[v, r]] = <int32_t>r
        self.triple = np.zeros(num_triples)
        self.pair_nodes = np.empty(num_triples, dtype=np.int32)
        self.child = np.empty(self.child_offset[m], dtype=np.int32)
        fill_ = np.array(self.pair_offset[:self.num_pairs])
        fill = fill_
        child_fill = np.array(self.child_offset[:m])
        cdef int64_t[::1] child_at = child_fill
        # feature by feature (the writes stay within one feature's block), nodes in order within each
        by_feature_ = np.argsort(np.asarray(feature), kind="stable").astype(np.int64)
        cdef int64_t[::1] by_feature = by_feature_
        cdef int64_t j
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
                        self.pair_nodes[fill[p]] = <int32_t>v
                        fill[p] += 1
        del fill_, child_fill, by_feature_
        self.level = np.empty(self.sink + 1, dtype=np.int32)
        self.queue = np.empty(self.sink + 1, dtype=np.int32)
        self.excess = np.zeros(self.sink)  # of the tree nodes and pairs, during max_flow()
        self.unreachable = <int32_t>(self.sink + 1)
        self.current = np.empty(self.sink + 1, dtype=np.int64)

    def set_lam(self, double lam):
        """Raise lam (the pair -> sink capacities grow; the flow stays feasible)."""
        cdef int64_t p
        cdef double step = lam - self.lam
        if step < 0:
            raise ValueError(f"lam can only grow: {self.lam!r} -> {lam!r}")
        with nogil:
            for p in range(self.num_pairs):
                if self.pair_offset[p + 1] > self.pair_offset[p]:
                    self.pair_cap[p] += step * self.pair_unit[p // self.num_rows]
        self.lam = lam

    cdef inline int64_t _triple_of(self, int32_t v, int64_t pair) noexcept nogil:
        return self.triple_offset[v] + self.inverse[self.tree[v], pair % self.num_rows] - self.lo[v]

    cdef void _greedy(self) noexcept nogil:
        """Saturate the source arcs and route the flow up each tree, absorbed on the way by each node's sink
        arc, then its pairs; what reaches a root stays there as excess."""
        cdef int64_t v, r, p, t
        cdef double a
        for v in range(self.num_nodes - 1, -1, -1):  # children before parents
            self.excess[v] += self.to_source[v]
            self.to_source[v] = 0.0
            a = min(self.excess[v], self.to_sink[v])
            self.to_sink[v] -= a
            self.excess[v] -= a
            self.flow += a
            if self.triple_offset[v] >= 0:
                t = self.tree[v]
                for r in range(self.lo[v], self.hi[v]):
                    if self.excess[v] <= self.eps:
                        break
                    p = self.feature[v] * self.num_rows + self.perm[t, r]
                    a = min(self.excess[v], self.pair_cap[p])
                    if a > 0:
                        self.pair_cap[p] -= a
                        self.triple[self.triple_offset[v] + r - self.lo[v]] += a
                        self.excess[v] -= a
                        self.flow += a
            if self.parent[v] >= 0:
                self.up[v] += self.excess[v]
                self.excess[self.parent[v]] += self.excess[v]
                self.excess[v] = 0.0

    cdef void _return_excess(self) noexcept nogil:
        """Send every excess back to the source (pairs to the nodes that fed them, then down each tree,
        parents first: a node's inflow comes only from the source and its children)."""
        cdef int64_t m = self.num_nodes, p, e, v, idx, c
        cdef double a
        for p in range(self.num_pairs):
            e = self.pair_offset[p]
            while self.excess[m + p] > 0 and e < self.pair_offset[p + 1]:
                v = self.pair_nodes[e]
                idx = self._triple_of(<int32_t>v, p)
                a = min(self.excess[m + p], self.triple[idx])
                self.triple[idx] -= a
                self.excess[m + p] -= a
                self.excess[v] += a
                e += 1
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
        """Head of arc a of node u (its residual capacity in cap), -1 for an absent arc, -2 past the last.
        Arcs of a tree node: sink, parent, children (reverse), pairs; of a pair: sink, nodes (reverse)."""
        cdef int64_t v, children
        if u >= self.num_nodes:
            u -= self.num_nodes
            if a == 0:
                cap[0] = self.pair_cap[u]
                return self.sink
            a += self.pair_offset[u] - 1
            if a >= self.pair_offset[u + 1]:
                return -2
            v = self.pair_nodes[a]
            cap[0] = self.triple[self._triple_of(<int32_t>v, u)]
            return v
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
        if self.triple_offset[u] < 0 or a >= self.hi[u] - self.lo[u]:
            return -2
        cap[0] = INFINITY
        return self.num_nodes + self.feature[u] * self.num_rows + self.perm[self.tree[u], self.lo[u] + a]

    cdef void _augment(self, int64_t u, int64_t a, double amount) noexcept nogil:
        cdef int64_t children
        if u >= self.num_nodes:
            u -= self.num_nodes
            if a == 0:
                self.pair_cap[u] -= amount
            else:
                self.triple[self._triple_of(self.pair_nodes[self.pair_offset[u] + a - 1], u)] -= amount
        elif a == 0:
            self.to_sink[u] -= amount
        elif a == 1:
            self.up[u] += amount
        else:
            a -= 2
            children = self.child_offset[u + 1] - self.child_offset[u]
            if a < children:
                self.up[self.child[self.child_offset[u] + a]] -= amount
            else:
                self.triple[self.triple_offset[u] + a - children] += amount

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
                for e in range(self.pair_offset[p], self.pair_offset[p + 1]):
                    v = self.pair_nodes[e]
                    if self.level[v] < 0 and self.triple[self._triple_of(<int32_t>v, p)] > self.eps:
                        self._mark(v, &back)
                continue
            if self.parent[u] >= 0:
                self._mark(self.parent[u], &back)
            for e in range(self.child_offset[u], self.child_offset[u + 1]):
                if self.up[self.child[e]] > self.eps:
                    self._mark(self.child[e], &back)
            if self.triple_offset[u] >= 0:
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
        cdef int64_t m = self.num_nodes, front = 0, back = 0, u, v, p, e, r, t, work = 0
        cdef int32_t d
        self.global_relabels += 1
        for u in range(self.sink + 1):
            self.level[u] = self.unreachable
            self.current[u] = 0
        self.level[self.sink] = 0
        for v in range(m):
            if self.to_sink[v] > self.eps:
                self._label(v, 1, &back)
        # pairs with spare capacity are at 1 and the nodes whose arcs enter them at 2: done here in one
        # sequential sweep instead of through the queue (most pairs are there, and the queue's order is random)
        for p in range(self.num_pairs):
            if self.pair_cap[p] > self.eps:
                self.level[m + p] = 1
                for e in range(self.pair_offset[p], self.pair_offset[p + 1]):
                    self._label(self.pair_nodes[e], 2, &back)
                work += self.pair_offset[p + 1] - self.pair_offset[p] + 1
        while front < back:
            u = self.queue[front]
            front += 1
            d = self.level[u] + 1
            if u >= m:  # a pair: the nodes whose (infinite) arcs enter it
                p = u - m
                for e in range(self.pair_offset[p], self.pair_offset[p + 1]):
                    self._label(self.pair_nodes[e], d, &back)
                work += self.pair_offset[p + 1] - self.pair_offset[p] + 1
                continue
            for e in range(self.child_offset[u], self.child_offset[u + 1]):  # child -> u: infinite
                self._label(self.child[e], d, &back)
            if self.parent[u] >= 0 and self.up[u] > self.eps:  # parent -> u: the reverse of u's flow up
                self._label(self.parent[u], d, &back)
            if self.triple_offset[u] >= 0:  # pair -> u: the reverse of u's flow into the pair
                t = self.tree[u]
                for r in range(self.lo[u], self.hi[u]):
                    if self.triple[self.triple_offset[u] + r - self.lo[u]] > self.eps:
                        self._label(m + self.feature[u] * self.num_rows + self.perm[t, r], d, &back)
                work += self.hi[u] - self.lo[u]
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
            e = self.pair_offset[p]
            while e < self.pair_offset[p + 1] and lowest > floor:
                if self.level[self.pair_nodes[e]] < lowest and self.triple[self._triple_of(self.pair_nodes[e], p)] > self.eps:
                    lowest = self.level[self.pair_nodes[e]]
                e += 1
            scanned = e - self.pair_offset[p] + 1
        else:
            if self.to_sink[u] > self.eps:
                lowest = 0
            if self.parent[u] >= 0 and self.level[self.parent[u]] < lowest:
                lowest = self.level[self.parent[u]]
            for e in range(self.child_offset[u], self.child_offset[u + 1]):
                if self.up[self.child[e]] > self.eps and self.level[self.child[e]] < lowest:
                    lowest = self.level[self.child[e]]
            scanned = self.child_offset[u + 1] - self.child_offset[u] + 2
            if self.triple_offset[u] >= 0:
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
        """The first arc of u from a on whose head's label is level[u] - 1 (or the next arc that is not
        to or from a pair): a fast pass over the long runs of a node's pair arcs and a pair's entries."""
        cdef int64_t m = self.num_nodes, base, end, r, t, k, p
        cdef int32_t target = self.level[u] - 1
        if u >= m:
            if a == 0:
                return a
            p = u - m
            base = self.pair_offset[p] - 1
            end = self.pair_offset[p + 1] - base
            while a < end and self.level[self.pair_nodes[base + a]] != target:
                a += 1
            return a
        if a < 2 or self.triple_offset[u] < 0:
            return a
        base = 2 + self.child_offset[u + 1] - self.child_offset[u]
        if a < base:
            return a
        t, k = self.tree[u], m + self.feature[u] * self.num_rows
        r = self.lo[u] + a - base
        while r < self.hi[u] and self.level[k + self.perm[t, r]] != target:
            r += 1
        return base + r - self.lo[u]

    cdef int _push_relabel(self) noexcept nogil:
        """Move all excess to the sink or to nodes that cannot reach it (FIFO push-relabel; a global
        relabelling whenever pushes and relabels have done a sixteenth of the last one's work: measured
        best at 200,000 rows x 40 trees among 1/2 .. 1/64). Returns -1 if its queue cannot be allocated."""
        cdef int64_t n = self.sink + 1, head = 0, count = 0, u, a, h, work = 0, budget
        cdef double cap, amount
        cdef uint8_t* queued = <uint8_t*>calloc(n, 1)
        cdef int32_t* fifo = <int32_t*>malloc(n * sizeof(int32_t))
        if queued == NULL or fifo == NULL:
            free(queued)
            free(fifo)
            return -1
        budget = self._global_relabel() // 16 + 300000
        for u in range(self.sink):
            if self.excess[u] > self.eps and self.level[u] < self.unreachable:
                fifo[(head + count) % n] = <int32_t>u
                count += 1
                queued[u] = 1
        while count > 0:
            u = fifo[head]
            head = (head + 1) % n
            count -= 1
            queued[u] = 0
            while self.excess[u] > self.eps and self.level[u] < self.unreachable:
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
                    self._augment(u, a, amount)
                    self.excess[u] -= amount
                    if h == self.sink:
                        self.flow += amount
                    else:
                        self.excess[h] += amount
                        if not queued[h]:
                            fifo[(head + count) % n] = <int32_t>h
                            count += 1
                            queued[h] = 1
                    if self.excess[u] <= self.eps:
                        break
                self.current[u] += 1
            if work > budget:
                work = 0
                budget = self._global_relabel() // 16 + 300000
                head, count = 0, 0
                for u in range(self.sink):
                    queued[u] = 0
                    if self.excess[u] > self.eps and self.level[u] < self.unreachable:
                        fifo[count] = <int32_t>u
                        count += 1
                        queued[u] = 1
        free(queued)
        free(fifo)
        return 0

    def max_flow(self):
        """Make the flow maximum for the current lam: the greedy start, push-relabel, then the excess left
        at nodes that cannot reach the sink goes back to the source."""
        cdef int status
        with nogil:
            self._greedy()
            status = self._push_relabel()
            if status == 0:
                self._return_excess()
        if status != 0:
            raise MemoryError("budget_prune: no memory for the max-flow queue")

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
