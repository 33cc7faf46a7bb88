"""BudgetPrune (Nan, Wang and Saligrama, "Pruning Random Forests for Prediction on a Budget", NIPS 2016): prune a
trained forest for a feature budget.

For every tree, choose which nodes become leaves, minimising::

    (1/N) sum_t sum_h e_h z_h  +  tradeoff * (1/N) sum_i sum_k c_k w_ki

where ``z_h = 1`` makes node h a leaf, ``w_ki = 1`` acquires feature k for row i, ``e_h`` is the number of
rows of (X, y) that reach h and that h's stored prediction gets wrong, and ``c_k`` the lazy cost of feature
k (paid once per row, however many kept nodes test it). Constraints: (a) every root-to-leaf path of the
input tree holds exactly one new leaf; (b) a row reaching a kept internal node that tests feature k pays
for k. The constraint matrix is totally unimodular, so the LP relaxation has an integral optimum. Feature
groups (``FeatureCosts(groups=..., group_lazy=...)``): a row pays its group g's cost ``c_g`` once, with the
first member it acquires: one more term ``tradeoff * (1/N) sum_i sum_g c_g v_gi`` and (b') a row reaching a kept
node that tests a member of g pays for g (each member keeps its own ``c_k``).

Solvers:

- ``"maxflow"`` (default): the problem as a minimum-weight closure (see _solve_maxflow), solved exactly by
  a maximum flow in Cython without the GIL (cython_ext/_prune.pyx); the flow's value is the bound. A (row,
  group) pair is one more pair kind; a node that pays both its feature's and its group's pair hands the
  group's to a carrier node of gain 0 inserted above it. The
  network is implicit: each tree's rows are ordered so that every node's rows are a contiguous range; per
  pair, the nodes whose arcs enter it are stored (3 bytes per (row, tree, feature first tested on the row's
  path), 4 from 2^24 nodes) and only the positive flows. 40 unlimited-depth trees x 28 features: 200,000 rows
  in ~19 s and 0.95 GB peak, 3,500,000 rows in 12-13 minutes and 13.1 GB (scripts/bench_prune.py).
- ``"highs"``: the LP written literally (one constraint (b) per row and internal node it reaches) and
  solved with HiGHS (scipy.optimize.linprog), for small problems and as the reference; the bound comes
  from HiGHS's dual values.

Models and their ``e_h``:

- scikit-learn RandomForestClassifier and ExtraTreesClassifier (binary and multiclass): the rows reaching
  h that the argmax of h's stored class distribution gets wrong. The pruned model is a fitted estimator of
  the same class whose trees are the pruned trees.
- LightGBM boosters and models (``boosting="gbdt"`` or ``"rf"``; objectives regression (L2), binary,
  multiclass), with a per-tree loss surrogate: ``e_h`` is the ensemble's training loss summed over the
  rows reaching h when tree t's output for them is replaced by h's value (its ``internal_value``; leaves:
  their ``leaf_value``) and every other tree is unchanged. The pruned model is a ``lightgbm.Booster``
  (a model file stock LightGBM loads) whose pruned leaves hold those values; for a LightGBM scikit-learn
  estimator, a copy of the estimator holding that booster.

Its length: one problem, built from two kinds of model (scikit-learn forests, LightGBM boosters), solved two
ways (max-flow, HiGHS as the reference) and written back as the model it came from; the pieces share the
problem's layout.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import lightgbm as lgb
import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from lightgbm_cegb.base import COSTS
from lightgbm_cegb.core.costs import resolve_costs
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.forest import Forest, kept_nodes
from lightgbm_cegb.core.parallel import N_JOBS
from lightgbm_cegb.core.validation import CheckedElsewhere, NoneOr, Number, Numbers, OneOf, validated
from lightgbm_cegb.io.lightgbm_text import write_text
from lightgbm_cegb.io.models import booster_of, to_forest
from lightgbm_cegb.io.sklearn_trees import cut_model, node_ids

INTEGRALITY_TOLERANCE = 1e-7
HIGHS_TOLERANCE = 1e-10
SOLVERS = ("maxflow", "highs")
#: a trade-off, or a budget: the mean lazy cost per row
TRADEOFF = Number(0.0)


@dataclass
class PruneResult:
    """The pruned model and the terms of the objective at the returned (integral) solution.

    What :func:`budget_prune`, :func:`budget_prune_path` and :class:`Pruner` return. Nodes are numbered as
    scikit-learn's ``tree_`` does; for LightGBM, internal node j is j and leaf l is ``num_leaves - 1 + l``.

    Parameters
    ----------
    model : object
        The pruned model: a fitted estimator of the input's class (scikit-learn forests, LightGBM scikit-learn
        estimators) or a ``lightgbm.Booster``.
    tradeoff : float
        The trade-off the pruning is optimal at (with a budget: the smallest such trade-off).
    objective : float
        ``error + tradeoff * cost``.
    lower_bound : float
        The solver's dual bound on the optimum.
    error : float
        The objective's error term: the mean over the rows of X of the errors (or losses) of the pruned
        trees' leaves.
    cost : float
        The objective's cost term, without ``tradeoff``: the mean lazy cost per row of the pruned model on X.
    kept : list of ndarray of bool
        ``kept[t]`` marks the nodes of tree t of the input model that the pruned tree keeps (internal or
        leaf).
    leaves : list of ndarray of bool
        ``leaves[t]`` marks the kept nodes that are leaves of the pruned tree.
    solver : str
        The solver used, ``"maxflow"`` or ``"highs"``.
    """

    model: object
    tradeoff: float
    objective: float
    lower_bound: float
    error: float
    cost: float
    kept: list[np.ndarray]
    leaves: list[np.ndarray]
    solver: str

    def __lightgbm_cegb_model__(self):
        return self.model


@dataclass(frozen=True)
class _PairCosts:
    """BudgetPrune's costs: c_k per feature, and per group g of features c_g, paid once per row by the first
    member it acquires (group_of[k] = g, -1: no group)."""

    lazy: np.ndarray
    group_of: np.ndarray
    group_lazy: np.ndarray

    @property
    def extended(self) -> np.ndarray:
        """The costs of the features, then of the groups: pair kinds k < F are features, F + g groups."""
        return np.concatenate([self.lazy, self.group_lazy])


@dataclass
class _Problem:
    """The trees of a forest in Forest's one numbering per tree (split nodes, then leaves), with what the
    rows of (X, y) do in them."""

    parent: list[np.ndarray]  # per tree: parent of each node (parents numbered first), -1 for the root
    feature: list[np.ndarray]  # per tree: tested feature, -1 for leaves of the input tree
    errors: list[np.ndarray]  # per tree: e_h, float
    perm: np.ndarray  # int32 (trees, rows): each tree's rows in an order where every node's rows are contiguous
    lo: list[np.ndarray]  # per tree: node h's rows are perm[t, lo[h]:hi[h]]
    hi: list[np.ndarray]
    num_rows: int
    num_features: int

    def rows(self, t: int, node: int) -> np.ndarray:
        return self.perm[t, self.lo[t][node]:self.hi[t][node]]


def _is_sklearn_forest(model) -> bool:
    from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier

    return isinstance(model, (RandomForestClassifier, ExtraTreesClassifier))


def _layout(forest: Forest, X, y: np.ndarray, n_jobs: int | None) -> _Problem:
    """Route the rows once; each tree's rows laid out so that every node's rows are one range
    (cython_ext/_prune.pyx, layout)."""
    from lightgbm_cegb._prune import layout

    leaves = forest.apply(X, n_jobs=n_jobs)
    if len(leaves) == 0:
        raise CEGBError("X should hold at least one row")
    if len(y) != len(leaves):
        raise CEGBError(f"y should have one label per row of X ({len(leaves)}), got {len(y)}")
    problem = _Problem([], [], [], np.empty((forest.num_trees, len(leaves)), dtype=np.int32), [], [],
                       num_rows=len(leaves), num_features=forest.num_features)
    for t in range(forest.num_trees):
        parent = forest.parents(t)
        n = (len(parent) - 1) // 2
        s, s1 = forest.node_offset[t], forest.node_offset[t + 1]
        problem.parent.append(parent)
        problem.feature.append(np.concatenate([forest.feature[s:s1], np.full(n + 1, -1)]).astype(np.int64))
        problem.perm[t], lo, hi = layout(parent, np.ascontiguousarray(n + leaves[:, t], dtype=np.int64))
        problem.lo.append(lo)
        problem.hi.append(hi)
    return problem, leaves


def _range_chunks(lo: np.ndarray, hi: np.ndarray, max_pairs: int = 1 << 22):
    """(nodes, positions) over all nodes' row ranges, in chunks of about max_pairs (node, row) pairs."""
    sizes = (hi - lo).astype(np.int64)
    ends = np.cumsum(sizes)
    first = 0
    while first < len(sizes):
        last = int(np.searchsorted(ends, (ends[first - 1] if first else 0) + max_pairs, side="right"))
        last = max(last, first + 1)
        nodes = np.arange(first, last)
        count = sizes[first:last]
        node_of_pair = np.repeat(nodes, count)
        offset = np.repeat(lo[first:last].astype(np.int64) - (np.cumsum(count) - count), count)
        yield node_of_pair, np.arange(int(count.sum())) + offset
        first = last


def _sklearn_problem(model, forest: Forest, X, y, n_jobs: int | None) -> _Problem:
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(model)
    if getattr(model, "n_outputs_", 1) != 1:
        raise CEGBError(f"model should have a single output, got n_outputs_={model.n_outputs_}")
    y = np.asarray(y).ravel()
    problem, _ = _layout(forest, X, y, n_jobs)
    classes = model.classes_
    label = np.searchsorted(classes, y)
    unseen = (label >= len(classes)) | (classes[np.minimum(label, len(classes) - 1)] != y)
    if unseen.any():
        raise CEGBError(f"y holds labels the model was not trained on: {np.unique(y[unseen])[:10].tolist()} "
                        f"(model classes: {classes.tolist()[:10]})")
    for t, estimator in enumerate(model.estimators_):
        lo, hi = problem.lo[t], problem.hi[t]
        # correct[h]: rows in h's range whose label is h's prediction (prefix counts per predicted class)
        predicted = np.argmax(estimator.tree_.value[node_ids(estimator.tree_), 0, :], axis=1)
        label_in_order = label[problem.perm[t]]
        correct = np.zeros(len(lo))
        for c in np.unique(predicted):
            prefix = np.concatenate([[0], np.cumsum(label_in_order == c)])
            nodes = predicted == c
            correct[nodes] = prefix[hi[nodes]] - prefix[lo[nodes]]
        problem.errors.append((hi - lo) - correct)
    return problem


# ------------------------------------------------------------------------------------------------ LightGBM

LIGHTGBM_OBJECTIVES = ("regression", "binary", "multiclass")
_SQUARED_ERROR = ("regression", "regression_l2", "l2", "mean_squared_error", "mse")
#: The objective names (LightGBM's, with their aliases) whose training loss BudgetPrune evaluates.
PRUNE_OBJECTIVES = (*_SQUARED_ERROR, "binary", "multiclass", "softmax")


def _objective_loss(objective: str, y: np.ndarray, score: np.ndarray):
    """loss(rows, k, delta): the training loss of ``rows`` of y, for the model's objective, when the raw score
    of class k (column k of ``score``, one row per row of y) moves by ``delta`` (one value per row)."""
    name = objective.split()[0] if objective else ""
    if name in _SQUARED_ERROR:
        return lambda rows, k, delta: (score[rows, 0] + delta - y[rows]) ** 2
    if name == "binary":
        if not np.isin(y, (0, 1)).all():
            raise CEGBError(f"y should hold labels 0 and 1 for a binary model, got {np.unique(y)[:10].tolist()}")
        sigmoid = float(dict(p.split(":") for p in objective.split()[1:]).get("sigmoid", 1.0))
        sign = np.where(y == 1, -sigmoid, sigmoid)
        return lambda rows, k, delta: np.logaddexp(0.0, sign[rows] * (score[rows, 0] + delta))
    if name in ("multiclass", "softmax"):
        num_class = score.shape[1]
        label = y.astype(np.int64)
        if (label != y).any() or (label < 0).any() or (label >= num_class).any():
            raise CEGBError(f"y should hold class labels 0..{num_class - 1}, got {np.unique(y)[:10].tolist()}")
        # softmax loss logsumexp(s) - s[y] with only s[k] moved: log(sum_{j != k} e^s_j + e^(s_k + delta))
        # - s[y] - [k == y] delta; the sums over the other classes are computed once per row and class
        others = np.stack([np.logaddexp.reduce(np.delete(score, k, axis=1), axis=1) if num_class > 1
                           else np.full(len(score), -np.inf) for k in range(num_class)], axis=1)
        true_score = score[np.arange(len(score)), label]

        def loss(rows, k, delta):
            return (np.logaddexp(others[rows, k], score[rows, k] + delta) - true_score[rows]
                    - np.where(label[rows] == k, delta, 0.0))
        return loss
    raise CEGBError(f"budget_prune supports LightGBM objectives {LIGHTGBM_OBJECTIVES}, got {objective!r}")


def _lightgbm_problem(forest: Forest, X, y, n_jobs: int | None) -> _Problem:
    if forest.linear is not None:
        raise CEGBError("budget_prune does not support linear trees (linear_tree=True)")
    if forest.internal_value is None:
        raise CEGBError("budget_prune needs the model's internal_value lines (a LightGBM model file has them)")
    try:
        y = np.asarray(y, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise CEGBError("y should hold numbers for a LightGBM model") from None
    objective = (forest.text_header and _header_value(forest.text_header, "objective")) or ""
    per_iteration = forest.trees_per_iteration
    problem, leaves = _layout(forest, X, y, n_jobs)
    # rf averages the trees of each class: a tree's output enters the score the loss sees divided by the
    # number of iterations
    scale = per_iteration / forest.num_trees if forest.average_output else 1.0
    tree_output = forest.leaf_values(X, leaves)
    score = forest.raw_score(X, leaves, averaged=True, values=tree_output, n_jobs=n_jobs).reshape(len(y), -1)
    loss = _objective_loss(objective, y, score)
    for t in range(forest.num_trees):
        s, s1 = forest.node_offset[t], forest.node_offset[t + 1]
        value = np.concatenate([forest.internal_value[s:s1],
                                forest.leaf_value[forest.leaf_offset[t]:forest.leaf_offset[t + 1]]])
        errors = np.zeros(len(value))
        for nodes, positions in _range_chunks(problem.lo[t], problem.hi[t]):
            rows = problem.perm[t][positions]
            delta = scale * (value[nodes] - tree_output[rows, t])
            errors += np.bincount(nodes, weights=loss(rows, t % per_iteration, delta), minlength=len(value))
        problem.errors.append(errors)
    return problem


def _header_value(header: str, key: str) -> str | None:
    for line in header.splitlines():
        if line.startswith(key + "="):
            return line[len(key) + 1:]
    return None


def _paths(parent: np.ndarray) -> list[list[int]]:
    """Each node's path from the root, itself included (parents come before children in scikit-learn)."""
    paths: list[list[int]] = []
    for node, up in enumerate(parent):
        paths.append([node] if up < 0 else paths[up] + [node])
    return paths


def _solve_highs(forest: _Problem, costs: _PairCosts, tradeoff: float):
    """The LP exactly as written above; returns z per tree, the LP optimum and HiGHS's dual bound. The (row,
    group) pairs are variables after the (row, feature) ones: w_index's keys (i, F + g)."""
    n, num_features = forest.num_rows, len(costs.lazy)
    offsets = np.cumsum([0] + [len(p) for p in forest.parent])
    num_z = int(offsets[-1])
    eq_rows, eq_cols = [], []
    ub_rows, ub_cols, ub_vals = [], [], []
    w_index: dict[tuple[int, int], int] = {}
    num_ub = 0
    num_eq = 0
    for t, (parent, feature) in enumerate(zip(forest.parent, forest.feature)):
        paths = _paths(parent)
        for node in np.flatnonzero(feature < 0):  # (a): one leaf on each original root-to-leaf path
            eq_rows += [num_eq] * len(paths[node])
            eq_cols += [offsets[t] + u for u in paths[node]]
            num_eq += 1
        for node in np.flatnonzero(feature >= 0):  # (b), (b'): -w_ki - sum_{u in path(h)} z_u <= -1
            k = int(feature[node])
            kinds = [k] + ([num_features + int(costs.group_of[k])] if costs.group_of[k] >= 0 else [])
            for i in forest.rows(t, node):
                for kind in kinds:
                    w = w_index.setdefault((int(i), kind), len(w_index))
                    ub_rows += [num_ub] * (len(paths[node]) + 1)
                    ub_cols += [offsets[t] + u for u in paths[node]] + [num_z + w]
                    ub_vals += [-1.0] * (len(paths[node]) + 1)
                    num_ub += 1
    num_w = len(w_index)
    w_feature = np.fromiter((k for (_, k) in w_index), dtype=np.int64, count=num_w)
    # in units of 1/N (error counts and tradeoff * c_k): HiGHS's tolerances are absolute (1e-7 by default), and
    # tradeoff * c_k / N can be as small as that (tradeoff=3e-4, c=1, N=3000 made HiGHS pay for 202 needless pairs)
    objective = np.concatenate([np.concatenate(forest.errors), tradeoff * costs.extended[w_feature]])
    # ... and relative to nothing: with errors of 1e-12 (a regression on small targets) every reduced cost is
    # within them and HiGHS stops anywhere. Scaled to a largest error of 1, they are relative to the errors, as
    # the max-flow solver's eps is to the gains (not to the pairs' costs: a pair dearer than every error is
    # never worth paying, and errors below 1e-10 of it would be lost); the optimum and duals are scaled back.
    errors = np.concatenate(forest.errors)
    scale = float(np.abs(errors).max(initial=0.0)) or float(np.abs(objective).max(initial=0.0)) or 1.0
    objective = objective / scale
    a_eq = sp.csr_matrix((np.ones(len(eq_rows)), (eq_rows, eq_cols)), shape=(num_eq, num_z + num_w))
    b_eq = np.ones(num_eq)
    a_ub = sp.csr_matrix((ub_vals, (ub_rows, ub_cols)), shape=(num_ub, num_z + num_w)) if num_ub else None
    b_ub = -np.ones(num_ub) if num_ub else None
    upper = np.ones(num_z + num_w)
    res = linprog(objective, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, bounds=np.c_[np.zeros_like(upper), upper],
                  method="highs", options={"primal_feasibility_tolerance": HIGHS_TOLERANCE,
                                           "dual_feasibility_tolerance": HIGHS_TOLERANCE})
    if res.status != 0:
        raise CEGBError(f"HiGHS did not solve the pruning LP: {res.message}")
    fractional = np.abs(res.x - np.round(res.x)).max()
    if fractional > INTEGRALITY_TOLERANCE:
        raise CEGBError(f"the LP optimum is not integral (max distance to an integer {fractional:.3g}); "
                        "please report this")
    dual = float(b_eq @ res.eqlin.marginals + res.upper.marginals @ upper)
    if num_ub:
        dual += float(b_ub @ res.ineqlin.marginals)
    z = np.round(res.x[:num_z]).astype(bool)
    return ([z[offsets[t]:offsets[t + 1]] for t in range(len(forest.parent))], float(res.fun) * scale / n,
            dual * scale / n)


def _solve_maxflow(forest: _Problem, costs: _PairCosts, tradeoffs: list[float]):
    """The same problem as a minimum-weight closure, solved by a maximum flow (cython_ext/_prune.pyx).

    x_h = 1 keeps internal node h (it then tests its feature); keeping h requires keeping its parent and
    paying (i, k_h) for each row i reaching h, but only where h is the topmost node testing k_h on the path
    (deeper ones are implied by it); likewise (i, g) for k_h's group g, where h is the topmost node testing
    a member of g. In units of 1/N: keeping h gains e_h - sum of its children's e, a pair costs tradeoff * c_k (or
    tradeoff * c_g). Network: source -> h (positive gains), h -> sink (negative gains), h -> parent and h -> pair
    (infinite), pair -> sink (tradeoff * c). The network gives a node arcs to one kind of pair: a node that pays
    both gets a carrier of gain 0 between it and its parent (h -> carrier -> parent), which pays the group's
    pairs. The kept nodes are the source side of a minimum cut.
    Trade-offs are solved in increasing order on one network: raising tradeoff only raises the pair -> sink
    capacities, so the flow found for the previous one stays feasible and is augmented (a warm start).
    Returns, in the order of tradeoffs, the new leaves per tree and the flow's bound on the optimum.
    """
    from lightgbm_cegb._prune import Network, topmost

    num_features, extended = len(costs.lazy), costs.extended
    tree, parent_id, lo, hi, feature, top, gain, ids = [], [], [], [], [], [], [], []
    first = 0
    for t, (parent, feat, errors) in enumerate(zip(forest.parent, forest.feature, forest.errors)):
        internal = np.flatnonzero(feat >= 0)
        has_parent = parent >= 0
        children_error = np.bincount(parent[has_parent], weights=errors[has_parent], minlength=len(parent))
        k = feat[internal]
        own = (topmost(parent, feat) & (extended[np.maximum(feat, 0)] > 0))[internal]
        group = np.where(feat >= 0, costs.group_of[np.maximum(feat, 0)], -1)
        kind = np.where(group >= 0, num_features + group, -1)
        grouped = (topmost(parent, kind) & (extended[np.maximum(kind, 0)] > 0))[internal]
        carrier = own & grouped  # a node of gain 0 above, paying the group's pairs
        position = first + np.arange(len(internal)) + np.cumsum(carrier)  # parents (and carriers) first
        node_id = np.full(len(parent), -1, dtype=np.int64)
        node_id[internal] = position
        up = np.where(parent[internal] >= 0, node_id[parent[internal]], -1)
        size = len(internal) + int(carrier.sum())
        order = np.argsort(np.concatenate([position, position[carrier] - 1]))

        def laid(nodes, carriers):  # the tree's network nodes in their order: the nodes' and carriers' values
            return np.concatenate([nodes, carriers])[order]  # noqa: B023 (only called within this iteration)

        tree.append(np.full(size, t))
        parent_id.append(laid(np.where(carrier, position - 1, up), up[carrier]))
        lo.append(laid(forest.lo[t][internal], forest.lo[t][internal][carrier]))
        hi.append(laid(forest.hi[t][internal], forest.hi[t][internal][carrier]))
        pays = np.where(own, k, np.where(grouped, kind[internal], k))  # the pair kind of a node's own arcs
        feature.append(laid(pays, kind[internal][carrier]))
        top.append(laid(own | grouped, np.ones(int(carrier.sum()), dtype=bool)))
        gain.append(laid((errors - children_error)[internal], np.zeros(int(carrier.sum()))))
        ids.append(node_id)
        first += size
    gain_all = np.concatenate(gain)
    # Residuals at or below eps count as zero. The flow is at most the gains' sum, whatever the trade-off, so the
    # tolerance is relative to the gains alone: neither an absolute floor (gains of 1e-10, as a regression on
    # small targets has, were lost in one of 1e-13) nor the path's largest pair capacity (tradeoff x c of the
    # path's largest trade-off made pairs of its small trade-offs count as saturated: "internal error").
    eps = 1e-13 * float(np.abs(gain_all).max(initial=0.0))

    # pairs (row, feature or group) are indexed densely: only over the kinds that some node pays for
    top_all, feature_all = np.concatenate(top), np.concatenate(feature)
    paid_features = np.unique(feature_all[top_all])
    if first + forest.num_rows * len(paid_features) + 2 >= 2**31:
        raise CEGBError(f"budget_prune's max-flow numbers nodes with 32 bits: {forest.num_rows} rows x "
                        f"{len(paid_features)} costly features and groups tested are too many; prune on fewer rows")
    compact = np.zeros(len(extended), dtype=np.int32)
    compact[paid_features] = np.arange(len(paid_features))

    def int32(parts):
        return np.ascontiguousarray(np.concatenate(parts), dtype=np.int32)

    constant = sum(float(errors[0]) for errors in forest.errors) - float(np.clip(gain_all, 0, None).sum())
    network = Network(forest.perm, int32(tree), int32(parent_id), int32(lo), int32(hi), compact[feature_all],
                      top_all.astype(np.uint8), gain_all, np.ascontiguousarray(extended[paid_features]), eps)
    del tree, parent_id, lo, hi, feature, top, gain, gain_all, top_all, feature_all  # the network has its copies
    solutions: dict[float, tuple] = {}
    for tradeoff in sorted(set(tradeoffs)):
        network.set_lam(tradeoff)
        network.max_flow()
        keep = np.append(network.source_side(), False)  # leaves' node_id -1 reads the False
        leaves = []
        for parent, node_id in zip(forest.parent, ids):
            kept_internal = keep[node_id]
            leaves.append(~kept_internal & ((parent < 0) | kept_internal[np.maximum(parent, 0)] & (parent >= 0)))
        solutions[tradeoff] = (leaves, (constant + network.flow) / forest.num_rows)
    return [solutions[tradeoff] for tradeoff in tradeoffs]


def _evaluate(forest: _Problem, leaves: list[np.ndarray], kept: list[np.ndarray],
              costs: _PairCosts) -> tuple[float, float]:
    """error and cost terms of a pruning, computed from the rows' paths (not from the solver's w)."""
    from lightgbm_cegb._prune import mark_paid

    n = forest.num_rows
    error = sum(float(e[leaf].sum()) for e, leaf in zip(forest.errors, leaves)) / n
    paid = np.zeros((n, forest.num_features), dtype=np.uint8)
    internal = [np.flatnonzero(keep & ~leaf) for keep, leaf in zip(kept, leaves)]
    if sum(map(len, internal)):
        mark_paid(forest.perm,
                  np.concatenate([np.full(len(nodes), t, dtype=np.int32) for t, nodes in enumerate(internal)]),
                  *(np.concatenate([part[nodes] for part, nodes in zip(parts, internal)]).astype(np.int32)
                    for parts in (forest.lo, forest.hi, forest.feature)), paid)
    cost = float(paid.sum(axis=0, dtype=np.int64) @ costs.lazy)
    for g in np.flatnonzero(costs.group_lazy):
        cost += float(paid[:, costs.group_of == g].any(axis=1).sum()) * float(costs.group_lazy[g])
    return error, cost / n


def _pair_costs(forest: Forest, costs) -> _PairCosts:
    """c_k and the groups' c_g, from costs as prediction_cost takes them (FeatureCosts validates them: finite,
    >= 0, one per feature). BudgetPrune has no coupled or split costs: they are refused rather than ignored."""
    costs = resolve_costs(costs, forest.num_features, forest.feature_names, forest.params, unpriced="refuse")
    lazy, coupled, split = costs.arrays(forest.num_features)
    group_of, group_lazy, group_coupled = costs.group_arrays(forest.num_features)
    if coupled.any() or split.any() or costs.tree or group_coupled.any():
        raise CEGBError("budget_prune uses lazy (per-row) feature and group costs only; got coupled costs for "
                        f"features {np.flatnonzero(coupled)[:10].tolist()} and groups "
                        f"{np.flatnonzero(group_coupled)[:10].tolist()}, split costs {np.unique(split)[:5].tolist()} "
                        f"and a tree cost of {costs.tree:g}")
    return _PairCosts(np.asarray(lazy, dtype=np.float64), np.asarray(group_of, dtype=np.int64),
                      np.asarray(group_lazy, dtype=np.float64))


def _problem(model, X, y, costs, n_jobs: int | None):
    sklearn = _is_sklearn_forest(model)
    if not sklearn and booster_of(model) is None:
        raise CEGBError("model should be a fitted RandomForestClassifier, ExtraTreesClassifier, a "
                        f"lightgbm.Booster or a fitted LightGBM estimator, got {type(model).__name__}")
    forest = to_forest(model, cache=False)  # pruning reads leaf values too: no forest cached before an edit
    pair_costs = _pair_costs(forest, costs)
    problem = _sklearn_problem(model, forest, X, y, n_jobs) if sklearn else _lightgbm_problem(forest, X, y, n_jobs)
    return forest, problem, pair_costs


def _result(model, forest: Forest | None, problem: _Problem, costs: _PairCosts, tradeoff: float,
            leaves: list[np.ndarray], optimum: float, lower_bound: float, solver: str) -> PruneResult:
    """The pruned model and the objective's terms, computed from the rows' paths and checked against the
    solver's optimum."""
    kept = [kept_nodes(parent, leaf) for parent, leaf in zip(problem.parent, leaves)]
    error, cost = _evaluate(problem, leaves, kept, costs)
    objective = error + tradeoff * cost
    # the rounding of the flow's sums is relative to the errors' scale (pruning every tree to its root costs
    # their roots' errors): no absolute floor, which at tiny scales (errors of 1e-12) would check nothing
    magnitude = sum(float(errors.max(initial=0.0)) for errors in problem.errors) / problem.num_rows
    if not np.isclose(objective, optimum, rtol=1e-9, atol=1e-12 * magnitude):
        raise CEGBError(f"internal error: the pruned model's objective {objective!r} differs from the "
                        f"solver's optimum {optimum!r}; please report this")
    if _is_sklearn_forest(model):
        pruned = cut_model(model, leaves, kept)
        ids = [node_ids(estimator.tree_) for estimator in model.estimators_]
        leaves, kept = ([_renumbered(marks, i) for marks, i in zip(masks, ids)] for masks in (leaves, kept))
    else:
        pruned = lgb.Booster(model_str=write_text(forest.cut(leaves)))
        if hasattr(model, "booster_"):  # a LightGBM scikit-learn estimator: the same, with the pruned booster
            estimator = copy.deepcopy(model)
            estimator._Booster = pruned
            pruned = estimator
    return PruneResult(model=pruned, tradeoff=tradeoff, objective=objective,
                       lower_bound=lower_bound, error=error, cost=cost, kept=kept, leaves=leaves, solver=solver)


def _renumbered(marks: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """A per-node mask from Forest's one numbering to scikit-learn's node ids."""
    out = np.zeros(len(marks), dtype=bool)
    out[ids] = marks
    return out


class Pruner:
    """One BudgetPrune problem, built once, to solve at several trade-offs or budgets.

    The problem: the rows' paths through the model's trees, the nodes' errors and the lazy feature and group
    costs. ``at(tradeoff)``, ``path(tradeoffs)`` and ``within(budget)`` solve it (``budget_prune`` and
    ``budget_prune_path`` are these on a fresh Pruner); arguments as :func:`budget_prune` takes them.

    Parameters
    ----------
    model : RandomForestClassifier, ExtraTreesClassifier, lightgbm.Booster or LightGBM estimator
        The fitted forest to prune (LightGBM: ``boosting="gbdt"`` or ``"rf"``, objective regression (L2),
        binary or multiclass).
    X : array-like or sparse matrix of shape (n_samples, n_features)
        The rows the errors and costs are measured on (read as the model's library reads them: numpy array,
        scipy sparse matrix or pandas DataFrame).
    y : array-like of shape (n_samples,)
        Their labels: the classes the scikit-learn model was trained on; for LightGBM, the targets
        (regression), 0 and 1 (binary) or 0 .. num_class - 1 (multiclass).
    costs : FeatureCosts, lazy costs per column, mapping by feature name or None
        Lazy feature (and group) costs as ``prediction_cost`` takes them; None: the
        ``cegb_penalty_feature_lazy`` a CEGB-trained LightGBM model was trained with. Coupled, split and tree
        costs are refused.
    solver : {"maxflow", "highs"}, default="maxflow"
        The exact max-flow solver, or the LP solved by HiGHS (small problems; the reference).
    n_jobs : int or None, default=None
        Threads for routing the rows (None: the CPUs this process may use).

    Raises
    ------
    CEGBError
        If the model, the solver, the labels or the costs are not supported (see the parameters).
    """

    _constraints = {
        "model": CheckedElsewhere("the problem's build: a scikit-learn forest or a LightGBM model"),
        "X": CheckedElsewhere("the problem's build, against the model"),
        "y": CheckedElsewhere("the problem's build, against the model's labels"),
        "costs": COSTS, "solver": OneOf(SOLVERS), "n_jobs": N_JOBS,
    }

    @validated(_constraints)
    def __init__(self, model, X, y, costs, *, solver: str = "maxflow", n_jobs: int | None = None) -> None:
        self.model, self.solver = model, solver
        self.forest, self.problem, self.costs = _problem(model, X, y, costs, n_jobs)
        self._solved: dict[float, tuple] = {}  # tradeoff -> _solve's answer: budgets share their searches' first steps
        if _is_sklearn_forest(model):
            self.forest = None  # its pruned trees are written from the estimator: no need to hold the arrays

    def _result(self, tradeoff: float, leaves, optimum: float, bound: float) -> PruneResult:
        return _result(self.model, self.forest, self.problem, self.costs, tradeoff, leaves, optimum, bound, self.solver)

    @validated({"tradeoffs": Numbers(TRADEOFF, empty=True)})
    def path(self, tradeoffs) -> list[PruneResult]:
        """The optimal pruning at each trade-off of ``tradeoffs`` (in the given order).

        The max-flow solver goes through them in increasing order, each starting from the previous one's flow.

        Parameters
        ----------
        tradeoffs : sequence of float
            The trade-offs, finite and >= 0.

        Returns
        -------
        list of PruneResult
            One result per trade-off, in the given order.
        """
        return self._path([float(tradeoff) for tradeoff in tradeoffs])

    def _path(self, tradeoffs: list[float]) -> list[PruneResult]:
        """:meth:`path` of trade-offs checked."""
        if self.solver == "highs":
            solved = [_solve_highs(self.problem, self.costs, tradeoff) for tradeoff in tradeoffs]
        else:
            solved = [(leaves, bound, bound) for leaves, bound in _solve_maxflow(self.problem, self.costs, tradeoffs)]
        return [self._result(tradeoff, leaves, optimum, bound)
                for tradeoff, (leaves, optimum, bound) in zip(tradeoffs, solved)]

    @validated({"tradeoff": TRADEOFF})
    def at(self, tradeoff: float) -> PruneResult:
        """The optimal pruning at trade-off ``tradeoff``.

        Parameters
        ----------
        tradeoff : float
            The trade-off, finite and >= 0.

        Returns
        -------
        PruneResult
            The pruned model and the objective's terms.
        """
        return self._path([float(tradeoff)])[0]

    def _solve(self, tradeoff: float) -> tuple:
        """(tradeoff, leaves, the solver's optimum, its bound, error, cost) of the optimal pruning at tradeoff."""
        if tradeoff in self._solved:
            return self._solved[tradeoff]
        if self.solver == "highs":
            leaves, optimum, bound = _solve_highs(self.problem, self.costs, tradeoff)
        else:
            (leaves, optimum), = _solve_maxflow(self.problem, self.costs, [tradeoff])
            bound = optimum
        kept = [kept_nodes(parent, leaf) for parent, leaf in zip(self.problem.parent, leaves)]
        self._solved[tradeoff] = (tradeoff, leaves, optimum, bound) + _evaluate(self.problem, leaves, kept, self.costs)
        return self._solved[tradeoff]

    @validated({"budget": TRADEOFF})
    def within(self, budget: float) -> PruneResult:
        """The least-error pruning that some trade-off makes optimal with mean cost <= ``budget`` on the rows.

        At the smallest such trade-off (see :func:`budget_prune`).

        Parameters
        ----------
        budget : float
            The mean lazy cost per row of X to stay within, finite and >= 0.

        Returns
        -------
        PruneResult
            The pruned model and the objective's terms; ``tradeoff`` is the smallest trade-off at which it is
            optimal.
        """
        return self._within(float(budget))

    def _within(self, budget: float) -> PruneResult:
        """:meth:`within` a budget checked."""
        low = self._solve(0.0)
        if low[5] <= budget:
            return self._result(*low[:4])
        high, tradeoff = None, 1.0
        while high is None:  # a tradeoff large enough: the cost falls to 0 (every tree a leaf) as tradeoff grows
            trial = self._solve(tradeoff)
            if trial[5] <= budget:
                high = trial
            elif tradeoff > 1e300:
                raise CEGBError(f"internal error: no trade-off brings the cost within budget {budget!r}")
            else:
                low, tradeoff = trial, tradeoff * 4
        while True:
            # the lines error + tradeoff * cost of the two prunings meet at cross; a pruning better there lies between
            cross = (high[4] - low[4]) / (low[5] - high[5])
            middle = self._solve(cross)
            line = low[4] + cross * low[5]
            if middle[4] + cross * middle[5] >= line - 1e-12 * abs(line):  # relative: errors may be 1e-12
                # a breakpoint: low and high are both optimal at cross, high (within budget) for every tradeoff above
                return self._result(cross, high[1], middle[2], middle[3])
            if middle[5] <= budget:
                high = middle
            else:
                low = middle


#: budget_prune's and budget_prune_path's parameters that they build a Pruner from: the Pruner checks them (before
#: any work)
BY_PRUNER = {name: CheckedElsewhere("the Pruner built from it") for name in Pruner._constraints}


@validated({**BY_PRUNER, "tradeoff": NoneOr(TRADEOFF), "budget": NoneOr(TRADEOFF)})
def budget_prune(model, X, y, costs, tradeoff: float | None = None, *, budget: float | None = None,
                 solver: str = "maxflow", n_jobs: int | None = None) -> PruneResult:
    """Prune ``model`` on (X, y) for feature costs ``costs`` at a trade-off, or within a budget.

    At trade-off ``tradeoff`` (the objective: see the Notes), or, with ``budget`` instead, at the smallest
    trade-off whose pruning costs at most ``budget`` per row of X. Several trade-offs or budgets on the same
    rows: build a :class:`Pruner` once.

    Parameters
    ----------
    model : RandomForestClassifier, ExtraTreesClassifier, lightgbm.Booster or LightGBM estimator
        The fitted forest to prune (LightGBM: ``boosting="gbdt"`` or ``"rf"``, objective regression (L2),
        binary or multiclass).
    X : array-like or sparse matrix of shape (n_samples, n_features)
        The rows the errors and costs are measured on: numpy array, scipy sparse matrix or pandas DataFrame
        (read as the model's library reads it).
    y : array-like of shape (n_samples,)
        Their labels: the classes the scikit-learn model was trained on; for LightGBM, the targets
        (regression), 0 and 1 (binary) or 0 .. num_class - 1 (multiclass).
    costs : FeatureCosts, lazy costs per column, mapping by feature name or None
        Lazy feature costs as prediction_cost takes them: FeatureCosts, one value per feature, by feature
        name, or None for the ``cegb_penalty_feature_lazy`` a CEGB-trained LightGBM model was trained with.
        Coupled, split and tree costs are refused.
    tradeoff : float or None, default=None
        The trade-off, finite and >= 0. Give either ``tradeoff`` or ``budget``.
    budget : float or None, default=None
        The mean lazy cost per row of X to stay within. The optimal cost falls in steps as tradeoff grows;
        the search moves between the prunings on both sides of the budget by intersecting their objective
        lines (each intersection is a breakpoint or yields a new pruning), so it ends on the exact
        breakpoint: the result is the least-error pruning that some tradeoff makes optimal within the
        budget, and ``result.tradeoff`` the smallest such tradeoff.
    solver : {"maxflow", "highs"}, default="maxflow"
        The exact max-flow solver, or the LP solved by HiGHS (small problems; the reference).
    n_jobs : int or None, default=None
        Threads for routing the rows (None: the CPUs this process may use).

    Returns
    -------
    PruneResult
        The pruned model and the objective's terms.

    Raises
    ------
    CEGBError
        If both or neither of ``tradeoff`` and ``budget`` are given, one is not a finite number >= 0, or the
        model, the solver, the labels or the costs are not supported.

    Notes
    -----
    Nan, Wang and Saligrama, "Pruning Random Forests for Prediction on a Budget", NIPS 2016. For every tree,
    the nodes that become leaves minimise::

        (1/N) sum_t sum_h e_h z_h  +  tradeoff * (1/N) sum_i sum_k c_k w_ki

    where ``z_h = 1`` makes node h a leaf, ``w_ki = 1`` acquires feature k for row i, ``e_h`` is the error of
    node h's stored prediction on the rows of (X, y) that reach it (scikit-learn forests: the rows it gets
    wrong; LightGBM: the ensemble's training loss on them when the tree's output is replaced by h's value) and
    ``c_k`` the lazy cost of feature k (paid once per row, however many kept nodes test it). A feature group's
    cost is paid once per row, with the first member it acquires.
    """
    if (tradeoff is None) == (budget is None):
        raise CEGBError(f"give either tradeoff or budget, got tradeoff={tradeoff!r} and budget={budget!r}")
    pruner = Pruner(model, X, y, costs, solver=solver, n_jobs=n_jobs)
    return pruner._path([float(tradeoff)])[0] if budget is None else pruner._within(float(budget))


@validated({**BY_PRUNER, "tradeoffs": Numbers(TRADEOFF, empty=True)})
def budget_prune_path(model, X, y, costs, tradeoffs, *, solver: str = "maxflow",
                      n_jobs: int | None = None) -> list[PruneResult]:
    """:func:`budget_prune` at each trade-off of ``tradeoffs``: the accuracy-cost points.

    The rows' paths are computed once; the max-flow solver goes through the trade-offs in increasing order
    and starts each from the previous one's flow.

    Parameters
    ----------
    model : RandomForestClassifier, ExtraTreesClassifier, lightgbm.Booster or LightGBM estimator
        The fitted forest to prune, as :func:`budget_prune` takes it.
    X : array-like or sparse matrix of shape (n_samples, n_features)
        The rows the errors and costs are measured on.
    y : array-like of shape (n_samples,)
        Their labels, as :func:`budget_prune` takes them.
    costs : FeatureCosts, lazy costs per column, mapping by feature name or None
        Lazy feature costs, as :func:`budget_prune` takes them.
    tradeoffs : sequence of float
        The trade-offs, finite and >= 0.
    solver : {"maxflow", "highs"}, default="maxflow"
        The exact max-flow solver, or the LP solved by HiGHS (small problems; the reference).
    n_jobs : int or None, default=None
        Threads for routing the rows (None: the CPUs this process may use).

    Returns
    -------
    list of PruneResult
        One result per trade-off, in the given order.

    Raises
    ------
    CEGBError
        If a trade-off is not a finite number >= 0, or the model, the solver, the labels or the costs are not
        supported.
    """
    return Pruner(model, X, y, costs, solver=solver, n_jobs=n_jobs)._path([float(tradeoff) for tradeoff in tradeoffs])
