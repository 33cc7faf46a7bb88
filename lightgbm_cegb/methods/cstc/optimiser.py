"""The training problem of CSTC, CSCC and Cronus: cost units, the structure, the relaxed objective and its optimiser.

Its length: the structure, the relaxed objective and the block coordinate descent share one problem's arrays
(units, live columns, the tree's nodes); the estimators are in ``cstc_estimators``.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from lightgbm_cegb._cstc import forward_select, route, soft_pass
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.parallel import one_blas_thread

CLAMP = 1e-4  # the paper's: a bound below this clamps its weight to zero
GRAM_SETS = 3  # row sets (and their Gram matrices) kept per leaf for select_leaf's updates


class Units:
    """The cost units of the relaxation: unit u costs ``cost[u]`` and is paid by a path that puts a non-zero
    weight on any phi column of ``member[u]`` (bool, units x columns)."""

    def __init__(self, cost: np.ndarray, member: np.ndarray) -> None:
        keep = (cost > 0) & member.any(axis=1)
        self.cost = np.asarray(cost, dtype=np.float64)[keep]
        self.member = np.asarray(member, dtype=bool)[keep]
        self.M = self.member.astype(np.float64)

    def norms2(self, sq: np.ndarray) -> np.ndarray:
        """Per unit, the sum of ``sq`` (per column) over its members."""
        return self.M @ sq

    def path_cost(self, used: np.ndarray) -> float:
        """The exact (l0) cost of a path that reads the columns ``used`` (bool per column)."""
        return float(self.cost[(self.member & used).any(axis=1)].sum())


class LiveColumns:
    """A copy of one node's live columns of Z (the node's weights are zero at the others) for the passes of its
    L-BFGS steps, which then read only those columns of each row (the copy: at most 7/8 of Z's size, for a round).

    ``_cstc.soft_pass``'s dot product keeps four partial sums, column c in sum c % 4 (the last d % 4 columns in
    sum 0), each in the columns' order. The copy keeps every live column in its sum and in that order: position
    4 t + l holds sum l's t-th live column, and the shorter sums end in zero columns. A skipped column's term was
    +-0 (a zero weight) and a zero column's is +0; neither changes a partial sum, which starts at +0 and so is never
    -0. The scores, and the gradient's sums over rows (each column's in the rows' order), have the same bits as
    over all of Z."""

    def __init__(self, Z: np.ndarray, index: np.ndarray) -> None:
        self.index = index  # per position, its column of Z (-1: a zero column)
        self.filled = index >= 0
        self.Z = np.take(Z, np.maximum(index, 0), axis=1)
        self.Z[:, ~self.filled] = 0.0

    @classmethod
    def of(cls, Z: np.ndarray, live: np.ndarray) -> LiveColumns | None:
        """The copy of Z's columns ``live``, or None when it would leave out less than an eighth of them (making
        the copy costs about one pass)."""
        d = len(live)
        column = np.flatnonzero(live)
        lane = np.where(column < d - d % 4, column % 4, 0)
        sums = [column[lane == q] for q in range(4)]
        index = np.full((max(len(q) for q in sums), 4), -1, dtype=np.int64)
        for q, members in enumerate(sums):
            index[:len(members), q] = members
        return cls(Z, index.ravel()) if 8 * index.size <= 7 * d else None

    def weights(self, row: np.ndarray) -> np.ndarray:
        """A weight row over all columns, laid out as the copy's."""
        return np.where(self.filled, row[np.maximum(self.index, 0)], 0.0)

    def scatter(self, rows: np.ndarray, d: int) -> np.ndarray:
        """Rows over the copy's columns as rows over all d columns (zero at the columns left out)."""
        out = np.zeros((len(rows), d))
        out[:, self.index[self.filled]] = rows[:, self.filled]
        return out


def _integers(name: str, values) -> np.ndarray:
    try:
        arr = np.asarray(values)
    except ValueError:  # ragged lists
        raise CEGBError(f"structure: {name} should be an array of slot numbers, got {values!r:.80}") from None
    if arr.size and arr.dtype.kind not in "iu":
        raise CEGBError(f"structure: {name} should hold slot numbers (integers), got {arr.dtype} values")
    return arr.astype(np.int64)


def _checked_parents(kids: np.ndarray, param_of: np.ndarray, own_loss: np.ndarray) -> np.ndarray:
    """The parent of each slot (-1: none), or a CEGBError naming what makes the slots no tree rooted at 0."""
    size = len(param_of)
    if size < 1 or param_of.ndim != 1 or kids.shape != (size, 2) or own_loss.shape != (size,):
        raise CEGBError(f"structure: kids should be [slots, 2], param_of and own_loss [slots] with slots >= 1, got "
                        f"shapes {kids.shape}, {param_of.shape} and {own_loss.shape}")
    for j, (down, up) in enumerate(kids.tolist()):
        if (down, up) != (-1, -1) and not (0 <= down < size and 0 <= up < size and down != up):
            raise CEGBError(f"structure: children ({down}, {up}) of slot {j} should be two different slots in "
                            f"0..{size - 1}, or -1, -1 for none")
    # from the root, each slot reached once (bounded: a slot is expanded once)
    parent = np.full(size, -2, dtype=np.int64)  # -2: not reached
    parent[0], todo = -1, [0]
    while todo:
        j = todo.pop()
        if kids[j, 0] < 0:
            continue
        for kid in kids[j].tolist():
            if parent[kid] != -2:
                above = j
                while above not in (kid, -1):  # within the reached tree, which has no cycle
                    above = int(parent[above])
                if above == kid:
                    raise CEGBError(f"structure: has a cycle: slot {j}'s child {kid} is "
                                    + ("itself" if kid == j else "the root" if kid == 0 else "one of its ancestors"))
                raise CEGBError(f"structure: slot {kid} is reached twice, as a child of slot {int(parent[kid])} "
                                f"and of slot {j}")
            parent[kid] = j
            todo.append(kid)
    # slots left by pruning are not reached; they point to none of the tree's, to none twice, and come after
    # their parents as every slot does (so no cycle among them either)
    reached = parent != -2
    parent[~reached] = -1
    for j in np.flatnonzero(~reached & (kids[:, 0] >= 0)).tolist():
        for kid in kids[j].tolist():
            if kid == 0:
                raise CEGBError(f"structure: slot 0 is the root, not a child (of slot {j})")
            if reached[kid] or parent[kid] >= 0:
                raise CEGBError(f"structure: slot {kid} is reached twice, as a child of slot {int(parent[kid])} "
                                f"and of slot {j}")
            parent[kid] = j
    late = np.flatnonzero(parent > np.arange(size))
    if late.size:
        j = above = int(late[0])
        for _ in range(size):
            above = int(parent[above])
            if above in (j, -1):
                break
        if above == j:
            raise CEGBError(f"structure: has a cycle through slot {j} (among the slots not reached from the root)")
        raise CEGBError(f"structure: slot {j} comes before its parent, slot {int(parent[j])}: slots are numbered "
                        "parents first")
    bad = np.flatnonzero((param_of < 0) | (param_of >= size))
    if bad.size:
        raise CEGBError(f"structure: param_of[{int(bad[0])}] should be a slot in 0..{size - 1}, got "
                        f"{int(param_of[bad[0]])}")
    for j in np.flatnonzero(reached).tolist():  # a pruned cascade's exits keep their old parent's weights
        owner = int(param_of[j])
        if owner != j and (owner != parent[j] or param_of[owner] != owner or kids[j, 0] >= 0):
            raise CEGBError(f"structure: slot {j} predicts with slot {owner}'s weights: a slot predicts with its "
                            "own, or (a cascade's exit, without children) with its parent classifier's")
    return parent


class Structure:
    """The shape of a model: slots 0..S-1, each after its parent. A slot is a classifier node (its own weights
    and threshold; with children ``kids[j] = (down, up)``: a row goes up when ``z.beta_j > theta_j``) or a
    cascade's exit (``param_of[j]``: the parent whose weights predict there). ``own_loss[j]``: the slot's reach
    weighs the squared loss of its prediction (CSTC: every node; a cascade: its exits and its last node).

    The constructor is the trust boundary of a saved structure (``load``): it checks that the slots form a tree
    rooted at slot 0 (children in range and after their parent, no slot reached twice, so no cycle) and that
    every exit predicts with its parent's weights. Slots no longer reached are allowed: pruning
    (``make_leaf``) leaves them."""

    def __init__(self, kids: np.ndarray, param_of: np.ndarray, own_loss: np.ndarray) -> None:
        self.kids = _integers("kids", kids)
        self.param_of = _integers("param_of", param_of)
        self.own_loss = np.asarray(own_loss, dtype=bool)
        self.parent = _checked_parents(self.kids, self.param_of, self.own_loss)
        self.refresh()

    @classmethod
    def tree(cls, depth: int) -> Structure:
        """CSTC: a balanced tree of ``depth`` levels in heap order."""
        size = 2 ** depth - 1
        inner = np.arange(size) < 2 ** (depth - 1) - 1
        kids = np.where(inner[:, None], np.column_stack([2 * np.arange(size) + 1, 2 * np.arange(size) + 2]), -1)
        return cls(kids, np.arange(size), np.ones(size, dtype=bool))

    @classmethod
    def cascade(cls, stages: int) -> Structure:
        """CSCC and Cronus: classifier nodes 0, 2, 4, ... each with an exit (1, 3, ...) below and the next
        node above; the last node predicts for every row that reaches it."""
        size = 2 * stages - 1
        kids = np.full((size, 2), -1)
        param_of = np.arange(size)
        for k in range(0, size - 1, 2):
            kids[k] = (k + 1, k + 2)
            param_of[k + 1] = k
        own_loss = param_of != np.arange(size)
        own_loss[size - 1] = True
        return cls(kids, param_of, own_loss)

    def refresh(self) -> None:
        """Recompute the reachable slots (after ``make_leaf``)."""
        reached, todo = [], [0]
        while todo:
            j = todo.pop()
            reached.append(j)
            if self.kids[j, 0] >= 0:
                todo += list(self.kids[j])
        self.slots = sorted(reached)
        self.classifiers = [j for j in self.slots if self.param_of[j] == j]
        self.terminals = [j for j in self.slots if self.kids[j, 0] < 0]
        self.leaves = [j for j in self.classifiers if self.kids[j, 0] < 0]
        self.loss_slots = [j for j in self.slots if self.own_loss[j]]

    def has_kids(self, j: int) -> bool:
        return bool(self.kids[j, 0] >= 0)

    def path(self, j: int) -> list[int]:
        """The classifier nodes whose weights a row reaching slot j has read (root first)."""
        out = []
        while j >= 0:
            if self.param_of[j] not in out:
                out.append(int(self.param_of[j]))
            j = int(self.parent[j])
        return out[::-1]

    def subtree(self, j: int) -> list[int]:
        out, todo = [], [j]
        while todo:
            x = todo.pop()
            out.append(x)
            if self.has_kids(x):
                todo += list(self.kids[x])
        return sorted(out)

    def make_leaf(self, j: int) -> None:
        self.kids[j] = -1
        self.own_loss[j] = True
        self.refresh()

    def copy(self) -> Structure:
        return Structure(self.kids.copy(), self.param_of.copy(), self.own_loss.copy())


class Problem:
    """The training problem: ``Z`` (rows, 1 + columns; column 0 the intercept), targets, sample weights ``s``
    (mean 1), cost units, the structure, ``lam``, ``rho``; weights ``beta`` (slots, 1 + columns) and thresholds
    ``theta``. The cost term: per terminal, its reach times the mixed norm of the weights on its path (CSTC,
    CSCC); ``cronus``: one mixed norm over every node's weights scaled by the node's reach."""

    def __init__(self, Z: np.ndarray, y: np.ndarray, s: np.ndarray, units: Units, structure: Structure, lam: float,
                 rho: float, cronus: bool = False) -> None:
        # C-contiguous float64, as the kernels read them
        self.Z, self.y, self.s = (np.ascontiguousarray(a, dtype=np.float64) for a in (Z, y, s))
        self.n, self.d = Z.shape
        self.units, self.lam, self.rho, self.cronus = units, lam, rho, cronus
        self.shape = structure
        size = len(structure.param_of)
        self.beta = np.zeros((size, self.d))
        self.theta = np.zeros(size)
        self.frozen = np.zeros((size, self.d), dtype=bool)  # weights clamped to zero for good
        self._gram_cache: dict = {}  # select_leaf's row sets and Gram matrices per leaf (``_gram``)
        self._select_cache: dict = {}  # select_leaf's choices by (leaf, lam, rows, paid units)
        self._soft_memo = None  # _soft_state's last (key, P, S, scores)

    def is_leaf(self, k: int) -> bool:
        return not self.shape.has_kids(k)

    def _layout(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The structure as the kernels read it: reachable slots (parents first), kids, param_of, own_loss."""
        shape = self.shape
        return (np.asarray(shape.slots, dtype=np.int64), np.ascontiguousarray(shape.kids, dtype=np.int64),
                np.ascontiguousarray(shape.param_of, dtype=np.int64),
                np.ascontiguousarray(shape.own_loss, dtype=bool).view(np.uint8))

    def _node_scores(self, beta: np.ndarray, nodes: list[int]) -> np.ndarray:
        """(rows, slots): z.beta_j in the columns of ``nodes`` (one product), zero elsewhere."""
        scores = np.zeros((self.n, len(beta)))
        if nodes:
            scores[:, nodes] = self.Z @ beta[nodes].T
        return scores

    def _pass(self, beta: np.ndarray, theta: np.ndarray, scores: np.ndarray, mode: int, *, fresh: int = -1,
              vtot=None, vgrad=None, wanted=(), store: bool = False, sigmoid: np.ndarray | None = None,
              live: int = -1, columns: LiveColumns | None = None):
        """_cstc.soft_pass over the training rows: (objective's per-row part, sum_i s_i p_ij, gradient rows of
        ``wanted``, d/d theta, P, S). ``sigmoid``: the S of a pass over the same scores and thresholds at every node
        with children but ``live``. ``columns``: the live columns of node ``fresh`` (or of the one wanted node when
        ``fresh`` is -1), the only ones read; the gradient row is zero at the others."""
        size = len(beta)
        order, kids, param_of, own_loss = self._layout()
        zeros = np.zeros(size)
        wanted = np.asarray(wanted, dtype=np.int64)
        Z = self.Z if columns is None else columns.Z
        p_sum, g_out, g_theta = np.zeros(size), np.zeros((len(wanted), Z.shape[1])), np.zeros(size)
        P = np.zeros((self.n, size) if store else (0, 0))
        S = np.zeros_like(P)
        beta_fresh = np.ascontiguousarray(beta[fresh] if fresh >= 0 else beta[0], dtype=np.float64)
        if columns is not None:
            beta_fresh = columns.weights(beta_fresh)
        total = soft_pass(Z, scores, fresh, beta_fresh, np.ascontiguousarray(theta, dtype=np.float64),
                          np.zeros((0, 0)) if sigmoid is None else sigmoid, live, self.y, self.s, order, kids,
                          param_of, own_loss, zeros if vtot is None else vtot, zeros if vgrad is None else vgrad,
                          wanted, mode, p_sum, g_out, g_theta, P, S)
        if columns is not None:
            g_out = columns.scatter(g_out, self.d)
        return total, p_sum, g_out, g_theta, P, S

    def reach(self, beta: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(p_ij, sigma_ij): the probability of reaching each slot, of going up at each slot with children."""
        return self._soft_state(beta, theta)[:2]

    def _soft_state(self, beta: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(P, S, scores) of ``reach`` and ``_node_scores`` of the nodes with children, read-only: the last
        call's arrays again while those nodes keep their weights and thresholds (as over block coordinate
        descent's run of leaves)."""
        inner = [j for j in self.shape.slots if self.shape.has_kids(j)]
        key = (tuple(inner), len(beta), beta[inner].tobytes(), np.asarray(theta)[inner].tobytes())
        if self._soft_memo is None or self._soft_memo[0] != key:
            scores = self._node_scores(beta, inner)
            *_, P, S = self._pass(beta, theta, scores, 0, store=True)
            for array in (P, S, scores):
                array.flags.writeable = False
            self._soft_memo = key, P, S, scores
        return self._soft_memo[1:]

    def _p_bar(self, beta: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """sum_i s_i p_ij / n per slot."""
        inner = [j for j in self.shape.slots if self.shape.has_kids(j)]
        return self._pass(beta, theta, self._node_scores(beta, inner), 0)[1] / self.n

    def _route(self, Z: np.ndarray, scores: np.ndarray | None = None, known: list[int] = (),
               predict: bool = True, *, rows: np.ndarray | None = None,
               into: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(terminal slot, its prediction) of each row of ``Z`` by hard routing (_cstc.route); ``scores[:, j]``:
        z.beta_j of the slots ``known``; ``predict`` False: the slots only (the predictions left zero). ``rows``:
        only those rows, written into the arrays ``into`` (the other rows keep their entries)."""
        beta = np.ascontiguousarray(self.beta, dtype=np.float64)
        nonzero = beta != 0
        nz_start = np.zeros(len(beta) + 1, dtype=np.int64)
        np.cumsum(nonzero.sum(axis=1), out=nz_start[1:])
        nz_column = np.nonzero(nonzero)[1].astype(np.int64)
        slot, prediction = into if into is not None else (np.zeros(Z.shape[0], dtype=np.int64), np.zeros(Z.shape[0]))
        rows = np.arange(Z.shape[0], dtype=np.int64) if rows is None else rows
        mask = np.zeros(len(beta), dtype=np.uint8)
        mask[list(known)] = 1
        _, kids, param_of, _ = self._layout()
        route(np.ascontiguousarray(Z, dtype=np.float64), beta,
                    np.ascontiguousarray(self.theta, dtype=np.float64), kids, param_of, nz_start, nz_column,
                    np.zeros((0, 0)) if scores is None else scores, mask, rows, slot, prediction, predict)
        return slot, prediction

    def hard_terminal(self, Z: np.ndarray) -> np.ndarray:
        """The terminal slot each row of ``Z`` reaches by hard routing (up when ``z.beta_j > theta_j``)."""
        return self._route(Z, predict=False)[0]

    def predictions(self, Z: np.ndarray, slot: np.ndarray) -> np.ndarray:
        return np.einsum("ij,ij->i", Z, self.beta[self.shape.param_of[slot]])

    # ----------------------------------------------------------------------------------- objective

    def _entries(self, beta: np.ndarray, p_bar: np.ndarray) -> list[tuple[int, float, list, np.ndarray]]:
        """The cost term's mixed norms: (terminal slot or -1, weight, [(node, scale)], unit norms^2)."""
        sq = beta[:, 1:] ** 2
        if self.cronus:
            rows = [(k, float(p_bar[k])) for k in self.shape.classifiers]
            return [(-1, 1.0, rows, self.units.norms2(sum(scale ** 2 * sq[k] for k, scale in rows)))]
        return [(t, float(p_bar[t]), [(k, 1.0) for k in self.shape.path(t)],
                 self.units.norms2(sq[self.shape.path(t)].sum(axis=0))) for t in self.shape.terminals]

    @one_blas_thread
    def objective(self, beta: np.ndarray | None = None, theta: np.ndarray | None = None, bounds=None) -> float:
        """The relaxed objective (CSTC eq. 12, CSCC eq. 19, Cronus); with ``bounds`` = (gamma per slot and
        column, eta per cost entry and unit) its variational upper bound."""
        return self._evaluate(beta, theta, bounds, gradient=False)[0]

    @one_blas_thread
    def gradient(self, beta: np.ndarray | None = None, theta: np.ndarray | None = None, bounds=None):
        """(objective, d/d beta, d/d theta) of the bounded objective (``bounds`` required)."""
        return self._evaluate(beta, theta, bounds, gradient=True)

    def _evaluate(self, beta, theta, bounds, gradient: bool, *, fresh: int = -1, scores: np.ndarray | None = None,
                  sigmoid: np.ndarray | None = None, columns: LiveColumns | None = None):
        """(objective, d/d beta, d/d theta), the gradient when ``gradient`` (else None, None). The per-row part in
        one pass over Z (_cstc.soft_pass). ``fresh`` >= 0 and ``scores`` (rows, slots: z.beta_j of every
        other classifier node, as ``_node_scores``): only node ``fresh``'s scores are recomputed and only its
        row of d/d beta is filled (the others are zero); ``sigmoid``: the other nodes' sigmoids (the S of a
        ``_pass`` over ``scores`` and ``theta``); ``columns``: node ``fresh``'s live columns, the only ones read
        (its row of d/d beta is zero at the others)."""
        live = fresh
        beta = self.beta if beta is None else beta
        theta = self.theta if theta is None else theta
        nodes = self.shape.classifiers
        size = len(beta)
        if scores is None:
            scores, fresh = self._node_scores(beta, nodes), -1
        w = beta[:, 1:]
        if bounds is None:
            total = self.rho * float(np.abs(w[nodes]).sum())
        else:
            gamma, eta = bounds
            total = self.rho * float(np.sum((w[nodes] ** 2 / gamma[nodes] + gamma[nodes]) / 2))
        wanted = nodes if fresh < 0 else [fresh]
        vtot, vgrad, entries = np.zeros(size), np.zeros(size), None
        if not self.cronus:
            for (t, e), g in self._terminal_norms(beta):
                vtot[t] += self.lam * float(self.units.cost @ (np.sqrt(g) if bounds is None else
                                                               (g / eta[e] + eta[e]) / 2)) / self.n
        elif gradient:  # Cronus weighs each node's norm by its mean reach, which the gradient's pass needs first
            entries = self._entries(beta, self._pass(beta, theta, scores, 0, fresh=fresh, sigmoid=sigmoid,
                                                     live=live, columns=columns)[1] / self.n)
            fresh = -1
            for k, scale in entries[0][2]:
                vgrad[k] = self.lam * scale * float(self.units.cost @ (self.units.norms2(w[k] ** 2) / eta[0])) / self.n
        part, p_sum, g_rows, g_theta, _, _ = self._pass(beta, theta, scores, 2 if gradient else 1, fresh=fresh,
                                                        vtot=vtot, vgrad=vgrad, wanted=wanted, sigmoid=sigmoid,
                                                        live=live, columns=columns)
        total += part
        if entries is None:
            entries = self._entries(beta, p_sum / self.n)
        if self.cronus:
            g = entries[0][3]
            total += self.lam * float(self.units.cost @ (np.sqrt(g) if bounds is None else (g / eta[0] + eta[0]) / 2))
        if not gradient:
            return total, None, None
        g_beta = np.zeros_like(beta)
        g_beta[wanted] = g_rows
        g_beta[nodes, 1:] += self.rho * w[nodes] / gamma[nodes]
        for e, (_, weight, rows, _) in enumerate(entries):
            per_column = self.units.M.T @ (self.units.cost / eta[e])  # d cost / d (w_ka^2 / 2), scale 1
            for k, scale in rows:
                g_beta[k, 1:] += self.lam * weight * scale ** 2 * per_column * w[k]
        if fresh >= 0 or len(wanted) < len(nodes):
            g_beta[[k for k in nodes if k not in wanted]] = 0.0
        return total, g_beta, g_theta

    def _terminal_norms(self, beta: np.ndarray) -> list[tuple[tuple[int, int], np.ndarray]]:
        """CSTC, CSCC: per terminal ((slot, entry), unit norms^2 of the weights on its path)."""
        sq = beta[:, 1:] ** 2
        return [((t, e), self.units.norms2(sq[self.shape.path(t)].sum(axis=0)))
                for e, t in enumerate(self.shape.terminals)]

    @one_blas_thread
    def tight_bounds(self, p_bar: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The bounds at which the variational bound equals the objective at the current weights (floored at
        CLAMP). ``p_bar``: ``_p_bar`` of the current weights (None: computed)."""
        gamma = np.maximum(np.abs(self.beta[:, 1:]), CLAMP)
        p_bar = self._p_bar(self.beta, self.theta) if p_bar is None else p_bar
        eta = np.array([np.maximum(np.sqrt(g), CLAMP) for *_, g in self._entries(self.beta, p_bar)])
        return gamma, eta

    def _clamp(self, k: int) -> None:
        """Node k's weights whose bound sits at the floor (|beta| < CLAMP) are zero for good."""
        self.frozen[k, 1:] |= np.abs(self.beta[k, 1:]) < CLAMP
        self.beta[k, self.frozen[k]] = 0.0

    # ----------------------------------------------------------------------------------- steps

    @one_blas_thread
    def fit_as_leaf(self, k: int, rounds: int, *, start: float | None = None) -> None:
        """Eq. 16 for node k as the last node of the path to it (what follows it cut off), alternated with its
        bounds: ``beta = (Z' Omega Z + n/2 diag(rho / gamma + lam p_k Q))^-1 Z' Omega y``, Omega = diag(s_i p_ik),
        Q the column's share of the path's bounded unit costs (Cronus: each node's weights scaled by its reach,
        ``p_k Q`` becoming ``p_k^2 Q``). ``start``: the bounds' first value (None: from the current weights)."""
        path = self.shape.path(k)
        P = self.reach(self.beta, self.theta)[0]
        omega = self.s * P[:, k]
        p_k = omega.mean()
        scale = (self.s[:, None] * P[:, path]).mean(axis=0) if self.cronus else np.ones(len(path))
        weight = p_k ** 2 if self.cronus else p_k

        def ridge(r: int) -> np.ndarray:
            if r == 0 and start is not None:
                gamma = np.full(self.d - 1, start)
                eta = np.full(len(self.units.cost), start)
            else:
                w = self.beta[:, 1:]
                gamma = np.maximum(np.abs(w[k]), CLAMP)
                eta = np.maximum(np.sqrt(self.units.norms2(((scale[:, None] * w[path]) ** 2).sum(axis=0))), CLAMP)
            return self.rho / gamma + self.lam * weight * (self.units.M.T @ (self.units.cost / eta))

        self._weighted_ridge(k, omega, rounds, ridge)
        self._clamp(k)

    def _weighted_ridge(self, k: int, omega: np.ndarray, rounds: int, ridge) -> None:
        """Node k's live weights: ``rounds`` times ``(Z' Omega Z + n/2 diag(0, ridge(r)))^-1 Z' Omega y``, ``ridge(r)``
        (per column) read from the weights of the round before. A node no row reaches (Omega = 0, the sigmoid
        saturated) keeps its weights."""
        if not omega.sum() > 0:
            return
        live = ~self.frozen[k]
        if live.sum() * 2 > self.d:  # most columns: the full product (no copy of Z's columns), then its block
            A0 = (self.Z.T @ (self.Z * omega[:, None]))[np.ix_(live, live)]
            b = (self.Z.T @ (omega * self.y))[live]
        else:
            A0 = self.Z[:, live].T @ (self.Z[:, live] * omega[:, None])
            b = self.Z[:, live].T @ (omega * self.y)
        jitter = 1e-10 * np.trace(A0) / self.d * np.eye(int(live.sum()))
        for r in range(rounds):
            A = A0 + self.n / 2 * np.diag(np.append(0.0, ridge(r))[live]) + jitter
            self.beta[k] = 0.0
            self.beta[k, live] = np.linalg.solve(A, b)

    @one_blas_thread
    def initialise(self) -> None:
        """Top-down: each node fitted as a leaf given its ancestors (bounds starting at 1), an internal node's
        threshold in the widest gap of its scores between their 20% and 80% weighted quantiles."""
        for k in self.shape.classifiers:
            self.fit_as_leaf(k, 10, start=1.0)
            if not self.is_leaf(k):
                weight = self.s * self.reach(self.beta, self.theta)[0][:, k]
                rows = np.flatnonzero(weight > 0)
                if rows.size < 2:
                    continue
                score = self.Z[rows] @ self.beta[k]
                order = np.argsort(score, kind="stable")
                score, mass = score[order], np.cumsum(weight[rows][order]) / weight.sum()
                inside = np.flatnonzero((mass[:-1] >= 0.2) & (mass[:-1] <= 0.8))  # cuts after row j
                if inside.size == 0:
                    inside = np.array([min(int(np.searchsorted(mass, 0.5)), rows.size - 2)])
                at = int(inside[np.argmax(score[inside + 1] - score[inside])])
                self.theta[k] = float(score[at] + score[at + 1]) / 2

    @one_blas_thread
    def update(self, k: int, rounds: int = 3) -> None:
        """One block step on node k: a leaf by eq. 16 with its bounds; an internal node's live weights and its
        threshold by L-BFGS on the bounded objective, alternated with the bounds."""
        if self.is_leaf(k):
            self.fit_as_leaf(k, rounds)
            return
        # every node's scores: the others' fixed here, node k's recomputed by each pass (the first of a round
        # recomputes them from the weights the round before kept)
        scores = self._node_scores(self.beta, self.shape.classifiers)
        for r in range(rounds):
            live = ~self.frozen[k]
            columns = LiveColumns.of(self.Z, live | (self.beta[k] != 0))
            _, p_sum, _, _, _, sigmoid = self._pass(self.beta, self.theta, scores, 0, store=True, fresh=k if r else -1,
                                                    columns=columns)
            bounds = self.tight_bounds(p_sum / self.n)

            start = np.append(self.beta[k, live], self.theta[k])
            at_start = []  # f(start): L-BFGS-B's first evaluation

            # f is only called within this iteration (by minimize and just after it): the noqa: B023 below
            def f(v: np.ndarray):
                beta, theta = self.beta.copy(), self.theta.copy()
                beta[k, live], theta[k] = v[:-1], v[-1]  # noqa: B023
                value, g_beta, g_theta = self._evaluate(beta, theta, bounds, True, fresh=k,  # noqa: B023
                                                        scores=scores, sigmoid=sigmoid,  # noqa: B023
                                                        columns=columns)  # noqa: B023
                if not at_start and np.array_equal(v, start):  # noqa: B023
                    at_start.append(value)  # noqa: B023
                return value, np.append(g_beta[k, live], g_theta[k])  # noqa: B023

            result = minimize(f, start, jac=True, method="L-BFGS-B", options={"maxiter": 50})
            if result.fun < (at_start[0] if at_start else f(start)[0]):
                self.beta[k, live], self.theta[k] = result.x[:-1], result.x[-1]
            self._clamp(k)

    # ----------------------------------------------------------------------------------- after BCD

    @one_blas_thread
    def fine_tune(self) -> None:
        """Section 3.5: each leaf's squared loss (and l1 penalty) re-minimised on the columns it already uses,
        without the cost term, over the rows hard routing sends it (ours: the paper weighs rows by p_ik, and the
        few rows of other regions that a sigmoid still leaks can pull a leaf's weights far off). A cascade's exits
        predict with their node's weights, which also route: they are not re-fitted."""
        leaf_of = self.hard_terminal(self.Z)
        for k in self.shape.leaves:
            omega = self.s * (leaf_of == k)
            if omega.any():
                self._weighted_ridge(k, omega, 10 if self.rho > 0 else 1,
                                     lambda r, k=k: self.rho / np.maximum(np.abs(self.beta[k, 1:]), CLAMP))

    @one_blas_thread
    def exact_objective(self, scores: np.ndarray | None = None, known: list[int] = ()) -> float:
        """Eq. 3 on the training rows under hard routing: the weighted squared error plus lam times the mean l0
        cost of the units each row's path reads (with the boosting trick: every feature of a used tree).
        ``scores[:, j]``: z.beta_j of the slots ``known`` (``_route``)."""
        return self._routed_objective(*self._route(self.Z, scores, known))

    def _routed_objective(self, slot: np.ndarray, prediction: np.ndarray) -> float:
        """``exact_objective`` of the rows' terminal slots and predictions."""
        return self._slot_objective(slot, float(np.mean(self.s * (prediction - self.y) ** 2)))

    def _slot_objective(self, slot: np.ndarray, error: float) -> float:
        """``exact_objective`` of the rows' terminal slots and their weighted squared error / n."""
        total = error
        mass = np.bincount(slot, weights=self.s, minlength=len(self.beta))
        for t in np.flatnonzero(mass).tolist():  # a terminal whose rows all weigh 0 would add 0
            used = (self.beta[self.shape.path(t), 1:] != 0).any(axis=0)
            total += self.lam * float(mass[t]) / self.n * self.units.path_cost(used)
        return total

    def select_leaf(self, k: int, rows: np.ndarray) -> float:
        """Leaf k's columns chosen for ``exact_objective`` over ``rows`` (those hard routing sends it): every
        column its ancestors' units already pay for, then forward selection, each step the column of the best
        true gain (squared error saved minus lam times the share of rows times the units it newly pays) among the
        five that a matching-pursuit score ranks first, while that gain is positive (the error a candidate saves
        from the Schur complement of the current solve; ties: the lower column). Least squares from the rows'
        weighted Gram matrix, formed once; the selection runs compiled (``forward_select``). A leaf no row reaches
        keeps its weights. Returns the rows' weighted squared error / n under the chosen weights (from the Gram
        matrix)."""
        if rows.size == 0 or not self.s[rows].sum() > 0:
            return 0.0
        used = (self.beta[self.shape.path(k)[:-1], 1:] != 0).any(axis=0)
        paid = (self.units.member & used).any(axis=1)
        mask = np.zeros(self.n, dtype=bool)
        mask[rows] = True
        key = (k, self.lam, np.packbits(mask).tobytes(), np.packbits(paid).tobytes())
        if key in self._select_cache:  # the same rows and paid units as a call before: its choice (polish)
            beta, frozen, err = self._select_cache[key]
            self.beta[k], self.frozen[k] = beta, frozen
            return err
        self.beta[k] = 0.0
        self.frozen[k] = True
        self.frozen[k, 0] = False
        share = float(self.s[rows].sum()) / self.n
        G, g, yy = self._gram(k, rows, mask)
        index, coef, err = forward_select(G, g, yy, float(self.n), self.units.cost, self.units.member.view(np.uint8),
                                          paid.view(np.uint8), self.lam * share)
        self.beta[k, index] = coef
        self.frozen[k, index] = False
        if len(self._select_cache) >= 256:
            self._select_cache.pop(next(iter(self._select_cache)))
        self._select_cache[key] = self.beta[k].copy(), self.frozen[k].copy(), err
        return err

    @one_blas_thread
    def _gram(self, k: int, rows: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """(Z' W Z, Z' W y, y' W y) over ``rows`` (W = diag(s); ``mask``: the same rows, a bool per row): from the
        nearest of leaf k's last few row sets plus the rows that came and minus those that left, when few did; from
        scratch otherwise. ``polish`` tries many small changes of one routing: the sets a candidate's are nearest to
        are the routing's, which stay while they are used (the least recently used of ``GRAM_SETS`` is dropped)."""
        sets = [entry for entry in self._gram_cache.get(k, []) if entry[0].shape == mask.shape]

        def formed(index: np.ndarray):
            Zr, w, yr = self.Z[index], self.s[index], self.y[index]
            return Zr.T @ (Zr * w[:, None]), Zr.T @ (w * yr), float(w @ yr ** 2)

        nearest, changed = -1, rows.size // 4 + 1
        for i, entry in enumerate(sets):
            moved = int(np.count_nonzero(mask ^ entry[0]))
            if moved < changed:
                nearest, changed = i, moved
        if nearest < 0:
            G, g, yy = formed(rows)
        else:
            sets.insert(0, sets.pop(nearest))
            old, G, g, yy = sets[0]
            if changed == 0:
                self._gram_cache[k] = sets
                return G, g, yy
            (Ga, ga, ya), (Gl, gl, yl) = formed(np.flatnonzero(mask & ~old)), formed(np.flatnonzero(old & ~mask))
            G, g, yy = G + Ga - Gl, g + ga - gl, yy + ya - yl
        self._gram_cache[k] = [(mask, G, g, yy), *sets][:GRAM_SETS]
        return G, g, yy

    def select_leaves(self, leaves: list[int], scores: np.ndarray | None = None, known: list[int] = (), *,
                      rows: np.ndarray | None = None) -> tuple[np.ndarray, float]:
        """``select_leaf`` of each of ``leaves`` over the rows hard routing sends it; ``rows`` (ascending): the only
        rows that can reach them, the only ones routed (None: every row). Returns each row's terminal slot (-1
        outside ``rows``) and the sum of the leaves' errors (``select_leaf``'s)."""
        rows = np.arange(self.n, dtype=np.int64) if rows is None else rows
        leaf_of = np.full(self.n, -1, dtype=np.int64)
        self._route(self.Z, scores, known, predict=False, rows=rows, into=(leaf_of, np.zeros(0)))
        landed = leaf_of[rows]
        return leaf_of, sum(self.select_leaf(k, rows[landed == k]) for k in leaves)

    @one_blas_thread
    def polish(self, passes: int = 3) -> None:
        """Local search for ``exact_objective``: the leaves' columns re-selected (``select_leaf``); then, in level
        order, for each internal node k and column a it reads, drop a from k alone or from k and its internal
        descendants (each intercept moved by the dropped term's mean over the node's soft reach), the leaves
        below re-selected; keep what lowers the objective.

        The internal nodes' scores and soft reach, and the rows' hard routing, are computed once and again only
        after a kept change; a candidate moves its nodes' scores by the change (the dropped column's term and the
        intercept's shift) and routes again only the rows that reach node k (the others' paths and predictions
        do not change); the error of those that end at a leaf is the leaves' own, from the Gram matrices
        ``select_leaf`` solves with, not from each row's prediction."""
        best = self.exact_objective()
        saved = self.beta.copy(), self.frozen.copy()
        self.select_leaves(self.shape.leaves)
        value = self.exact_objective()
        if value < best:
            best = value
        else:
            self.beta, self.frozen = saved
        inner = [k for k in self.shape.classifiers if not self.is_leaf(k)]
        Zt = np.ascontiguousarray(self.Z.T)  # the columns, each contiguous
        P = scores = routed = None
        reaching_of: dict = {}  # per internal node, the rows that reach it under the current routing, their error
        weights: dict = {}  # per internal node, its rows' weights s_i p_ij under the current soft reach and their sum
        rejected = set()  # (nodes, column) tried since the last kept change: trying again would change nothing
        for _ in range(passes):
            improved = False
            for k in inner:
                subtree = [j for j in self.shape.subtree(k) if j in self.shape.classifiers]
                below = [j for j in subtree if self.is_leaf(j)]
                for nodes in ([k], [j for j in subtree if not self.is_leaf(j)]):
                    for a in np.flatnonzero(self.beta[k, 1:] != 0) + 1:
                        if (tuple(nodes), a) in rejected:
                            continue
                        if P is None:  # at the start and after a kept change of the internal nodes
                            P, _, scores = self._soft_state(self.beta, self.theta)
                            scores = scores.copy()  # a candidate's nodes' moved in place
                            routed = self._route(self.Z, scores, inner)
                            squared = self.s * (routed[1] - self.y) ** 2
                            error = float(np.mean(squared))
                            reaching_of.clear()
                            weights.clear()
                        if k not in reaching_of:
                            reaching = np.flatnonzero(np.isin(routed[0], self.shape.subtree(k)))
                            reaching_of[k] = reaching, float(squared[reaching].sum())
                        reaching, reaching_squared = reaching_of[k]
                        saved = self.beta.copy(), self.frozen.copy()
                        saved_scores = scores[:, nodes].copy()
                        for j in nodes:
                            if j not in weights:
                                weight = self.s * P[:, j]
                                weights[j] = weight, max(weight.sum(), 1e-300)
                            weight, mass = weights[j]
                            shift = self.beta[j, a] * float(weight @ Zt[a]) / mass
                            if self.beta[j, a] != 0:
                                scores[:, j] += shift - self.beta[j, a] * Zt[a]
                            self.beta[j, 0] += shift
                            self.beta[j, a] = 0.0
                            self.frozen[j, a] = True
                        leaf_of, leaves_error = self.select_leaves(below, scores, inner, rows=reaching)
                        slot = routed[0].copy()
                        slot[reaching] = leaf_of[reaching]
                        # a cascade's exits predict with their parent's weights, an internal node's known scores
                        owner = self.shape.param_of[slot[reaching]]
                        exits = reaching[owner != slot[reaching]]
                        owner = owner[owner != slot[reaching]]
                        exits_error = float(self.s[exits] @ (scores[exits, owner] - self.y[exits]) ** 2) / self.n
                        value = self._slot_objective(
                            slot, error - reaching_squared / self.n + leaves_error + exits_error)
                        if value < best - 1e-9 * max(1.0, abs(best)):
                            best, improved = value, True
                            P = None
                            rejected.clear()
                        else:
                            self.beta, self.frozen = saved
                            scores[:, nodes] = saved_scores
                            rejected.add((tuple(nodes), a))
            if not improved:
                return

    @one_blas_thread
    def error(self, Z: np.ndarray, y: np.ndarray, s: np.ndarray) -> float:
        """The weighted squared error of rows ``Z`` under hard routing."""
        return float(np.sum(s * (self._route(Z)[1] - y) ** 2))

    @one_blas_thread
    def prune(self, Z_valid: np.ndarray, y_valid: np.ndarray, s_valid: np.ndarray) -> None:
        """Section 3.6.1, bottom-up: a node whose children are both terminal becomes a leaf (its initial weights,
        fitted as the last node of its path) when that does not raise the validation squared error under hard
        routing (a cascade loses its last stage)."""

        changed = True
        while changed:
            changed = False
            for k in reversed(self.shape.classifiers):
                if self.is_leaf(k) or any(self.shape.has_kids(j) for j in self.shape.kids[k]):
                    continue
                before, saved = self.error(Z_valid, y_valid, s_valid), self.shape.copy()
                self.shape.make_leaf(k)
                if self.error(Z_valid, y_valid, s_valid) <= before:
                    changed = True
                else:
                    self.shape = saved


