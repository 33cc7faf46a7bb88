"""BudgetPrune (Nan, Wang and Saligrama, NIPS 2016): prune a trained forest for a feature budget.

For every tree, choose which nodes become leaves, minimising

    (1/N) sum_t sum_h e_h z_h  +  lam * (1/N) sum_i sum_k c_k w_ki

where ``z_h = 1`` makes node h a leaf, ``w_ki = 1`` acquires feature k for row i, ``e_h`` is the number of
rows of (X, y) that reach h and that h's stored prediction gets wrong, and ``c_k`` the lazy cost of feature
k (paid once per row, however many kept nodes test it). Constraints: (a) every root-to-leaf path of the
input tree holds exactly one new leaf; (b) a row reaching a kept internal node that tests feature k pays
for k. The constraint matrix is totally unimodular, so the LP relaxation has an integral optimum.

Solvers:
- ``"maxflow"`` (default): the problem as a minimum-weight closure (see _solve_maxflow), solved exactly by
  a maximum flow in Cython without the GIL (cython_ext/_prune.pyx); the flow's value is the bound. The
  network is implicit: each tree's rows are ordered so that every node's rows are a contiguous range, and
  only the flow on each (node, row) pair arc is stored, 12 bytes per (row, tree, feature first tested on
  the row's path). 200,000 rows x 40 unlimited-depth trees: ~45 s, peak 2.2 GB (scripts/bench_prune.py).
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
  (a model file stock LightGBM loads) whose pruned leaves hold those values.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from .accounting import _booster_of, resolve_costs
from .ensemble import _parse_block, to_ensemble
from .errors import CEGBError

INTEGRALITY_TOLERANCE = 1e-7
HIGHS_TOLERANCE = 1e-10
SOLVERS = ("maxflow", "highs")


@dataclass
class PruneResult:
    """The pruned model and the terms of the objective at the returned (integral) solution.

    ``kept[t]`` marks the nodes of tree t of the input model that the pruned tree keeps (internal or leaf);
    ``leaves[t]`` the kept nodes that are leaves of the pruned tree. Nodes are numbered as scikit-learn's
    ``tree_`` does; for LightGBM, internal node j is j and leaf l is ``num_leaves - 1 + l``. ``error`` and ``cost`` are the
    objective's two terms (``cost`` without ``lam``: the mean lazy cost per row of the pruned model on X),
    ``objective = error + lam * cost``, and ``lower_bound`` the solver's dual bound on the optimum.
    """

    model: object
    lam: float
    objective: float
    lower_bound: float
    error: float
    cost: float
    kept: list[np.ndarray]
    leaves: list[np.ndarray]
    solver: str


@dataclass
class _Forest:
    """The trees of a forest as flat node arrays, with what the rows of (X, y) do in them."""

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


def _layout(parent: np.ndarray, leaf_of_row: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(perm, lo, hi) of one tree (cython_ext/_prune.pyx, layout)."""
    from ._prune import layout

    if len(parent) == 0 or parent[0] != -1 or (parent[1:] >= np.arange(1, len(parent))).any():
        raise CEGBError("internal error: a tree's nodes are not numbered parents first; please report this")
    return layout(np.ascontiguousarray(parent, dtype=np.int64), np.ascontiguousarray(leaf_of_row, dtype=np.int64))


def _is_sklearn_forest(model) -> bool:
    from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier

    return isinstance(model, (RandomForestClassifier, ExtraTreesClassifier))


def _check_rows(X, y: np.ndarray, num_features: int) -> None:
    if X.ndim != 2 or X.shape[0] == 0:
        raise CEGBError(f"X should be a non-empty 2-d array, got shape {X.shape}")
    if X.shape[1] != num_features:
        raise CEGBError(f"X should have {num_features} features (as the model), got {X.shape[1]}")
    if len(y) != X.shape[0]:
        raise CEGBError(f"y should have one label per row of X ({X.shape[0]}), got {len(y)}")


def _sklearn_forest(model, X, y) -> _Forest:
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(model)
    if getattr(model, "n_outputs_", 1) != 1:
        raise CEGBError(f"model should have a single output, got n_outputs_={model.n_outputs_}")
    X = np.asarray(X, dtype=np.float32) if not sp.issparse(X) else X
    y = np.asarray(y).ravel()
    _check_rows(X, y, model.n_features_in_)
    classes = model.classes_
    label = np.searchsorted(classes, y)
    unseen = (label >= len(classes)) | (classes[np.minimum(label, len(classes) - 1)] != y)
    if unseen.any():
        raise CEGBError(f"y holds labels the model was not trained on: {np.unique(y[unseen])[:10].tolist()} "
                        f"(model classes: {classes.tolist()[:10]})")
    trees = model.estimators_
    forest = _Forest([], [], [], np.empty((len(trees), X.shape[0]), dtype=np.int32), [], [],
                     num_rows=X.shape[0], num_features=int(model.n_features_in_))
    for t, estimator in enumerate(trees):
        tree = estimator.tree_
        parent = np.full(tree.node_count, -1, dtype=np.int64)
        internal = np.flatnonzero(tree.children_left >= 0)
        parent[tree.children_left[internal]] = internal
        parent[tree.children_right[internal]] = internal
        forest.perm[t], lo, hi = _layout(parent, estimator.apply(X))
        # correct[h]: rows in h's range whose label is h's prediction (prefix counts per predicted class)
        predicted = np.argmax(tree.value[:, 0, :], axis=1)
        label_in_order = label[forest.perm[t]]
        correct = np.zeros(tree.node_count)
        for c in np.unique(predicted):
            prefix = np.concatenate([[0], np.cumsum(label_in_order == c)])
            nodes = predicted == c
            correct[nodes] = prefix[hi[nodes]] - prefix[lo[nodes]]
        forest.parent.append(parent)
        forest.feature.append(np.where(tree.children_left >= 0, tree.feature, -1).astype(np.int64))
        forest.errors.append((hi - lo) - correct)
        forest.lo.append(lo)
        forest.hi.append(hi)
    return forest


# ------------------------------------------------------------------------------------------------ LightGBM

LIGHTGBM_OBJECTIVES = ("regression", "binary", "multiclass")


@dataclass
class _LightGBMTrees:
    """A LightGBM model text cut into what the pruning rewrites: per tree, its fields in file order."""

    header: str
    trees: list[dict[str, str]]
    footer: str


def _lightgbm_text(model) -> str:
    booster = _booster_of(model)
    if booster is None:
        raise CEGBError("model should be a fitted RandomForestClassifier, ExtraTreesClassifier, a "
                        f"lightgbm.Booster or a fitted LightGBM estimator, got {type(model).__name__}")
    return booster.model_to_string()


def _split_lightgbm(text: str) -> _LightGBMTrees:
    head, _, rest = text.partition("\nTree=")
    trees_text, _, footer = ("Tree=" + rest).partition("end of trees")
    trees = [_parse_block(block.split("\n", 1)[1]) for block in trees_text.split("Tree=")[1:]]
    return _LightGBMTrees(header=head + "\n", trees=trees, footer=footer)


def _numbers(fields: dict, key: str, dtype=np.float64) -> np.ndarray:
    return np.array(fields.get(key, "").split(), dtype=dtype)


def _lightgbm_tree_nodes(fields: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """parent, feature (-1: leaf) and value of each node: internal nodes 0..n-1, then leaf l as n + l."""
    num_internal = int(fields["num_leaves"]) - 1
    left, right = _numbers(fields, "left_child", np.int64), _numbers(fields, "right_child", np.int64)
    parent = np.full(2 * num_internal + 1, -1, dtype=np.int64)
    for children in (left, right):
        ids = np.where(children >= 0, children, num_internal + ~children)
        parent[ids] = np.arange(num_internal)
    feature = np.concatenate([_numbers(fields, "split_feature", np.int64), np.full(num_internal + 1, -1)])
    value = np.concatenate([_numbers(fields, "internal_value"), _numbers(fields, "leaf_value")])
    return parent, feature, value


def _objective_loss(objective: str, y: np.ndarray, num_class: int):
    """loss(score, rows): the training loss of rows ``rows`` of y at raw scores ``score`` (one row each;
    a column per class for multiclass), for the model's objective."""
    name = objective.split()[0] if objective else ""
    if name in ("regression", "regression_l2", "l2", "mean_squared_error", "mse"):
        return lambda score, rows: (score[:, 0] - y[rows]) ** 2
    if name == "binary":
        if not np.isin(y, (0, 1)).all():
            raise CEGBError(f"y should hold labels 0 and 1 for a binary model, got {np.unique(y)[:10].tolist()}")
        sigmoid = float(dict(p.split(":") for p in objective.split()[1:]).get("sigmoid", 1.0))
        return lambda score, rows: np.logaddexp(0.0, np.where(y[rows] == 1, -sigmoid, sigmoid) * score[:, 0])
    if name in ("multiclass", "softmax"):
        label = y.astype(np.int64)
        if (label != y).any() or (label < 0).any() or (label >= num_class).any():
            raise CEGBError(f"y should hold class labels 0..{num_class - 1}, got {np.unique(y)[:10].tolist()}")
        return lambda score, rows: (np.logaddexp.reduce(score, axis=1)
                                    - score[np.arange(len(rows)), label[rows]])
    raise CEGBError(f"budget_prune supports LightGBM objectives {LIGHTGBM_OBJECTIVES}, got {objective!r}")


def _lightgbm_forest(model, X, y) -> tuple[_Forest, _LightGBMTrees]:
    import lightgbm as lgb

    text = _lightgbm_text(model)
    parts = _split_lightgbm(text)
    header = _parse_block(parts.header)
    if any(fields.get("is_linear", "0") == "1" for fields in parts.trees):
        raise CEGBError("budget_prune does not support linear trees (linear_tree=True)")
    num_features = int(header["max_feature_idx"]) + 1
    X = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).ravel()
    _check_rows(X, y, num_features)
    per_iteration = int(header["num_tree_per_iteration"])
    loss = _objective_loss(header.get("objective", ""), y, per_iteration)
    booster = lgb.Booster(model_str=text)
    # rf averages the trees of each class (raw_score=True gives their sum): a tree's output enters the
    # score the model's loss sees divided by the number of iterations
    scale = per_iteration / len(parts.trees) if "average_output" in header else 1.0
    score = scale * booster.predict(X, raw_score=True).reshape(len(X), -1)
    leaf_of_row = booster.predict(X, pred_leaf=True).reshape(len(X), -1)
    forest = _Forest([], [], [], np.empty((len(parts.trees), len(X)), dtype=np.int32), [], [],
                     num_rows=len(X), num_features=num_features)
    for t, fields in enumerate(parts.trees):
        parent, feature, value = _lightgbm_tree_nodes(fields)
        leaf_node = int(fields["num_leaves"]) - 1 + leaf_of_row[:, t]
        rows, nodes = [np.arange(len(X))], [leaf_node]
        while (nodes[-1] >= 0).any():  # climb to the root: the (row, node) pairs of every row's path
            up = parent[nodes[-1]]
            keep = up >= 0
            rows.append(rows[-1][keep])
            nodes.append(up[keep])
            if not keep.any():
                break
        rows, nodes = np.concatenate(rows), np.concatenate(nodes)
        pair_score = score[rows].copy()
        pair_score[:, t % per_iteration] += scale * (value[nodes] - value[leaf_node[rows]])
        forest.parent.append(parent)
        forest.feature.append(feature)
        forest.errors.append(np.bincount(nodes, weights=loss(pair_score, rows), minlength=len(parent)))
        forest.perm[t], lo, hi = _layout(parent, leaf_node)
        forest.lo.append(lo)
        forest.hi.append(hi)
    return forest, parts


def _tree_block(t: int, fields: dict[str, str]) -> str:
    return f"Tree={t}\n" + "".join(f"{k}={v}\n" for k, v in fields.items()) + "\n\n"


def _pruned_lightgbm(parts: _LightGBMTrees, leaves: list[np.ndarray], kept: list[np.ndarray]):
    """A Booster from the model text with each tree cut to its kept nodes; a pruned internal node becomes a
    leaf with its internal value, weight and count."""
    import lightgbm as lgb

    blocks = []
    for t, (fields, leaf, keep) in enumerate(zip(parts.trees, leaves, kept)):
        num_internal = int(fields["num_leaves"]) - 1
        if not leaf[:num_internal].any():  # nothing cut (a one-leaf tree, say): the tree as it was
            blocks.append(_tree_block(t, fields))
            continue
        internal = np.flatnonzero(keep[:num_internal] & ~leaf[:num_internal])
        new_leaves = np.flatnonzero(leaf)
        new_id = np.zeros(len(leaf), dtype=np.int64)
        new_id[internal] = np.arange(len(internal))
        new_id[new_leaves] = ~np.arange(len(new_leaves))
        out = dict(fields)
        out["num_leaves"] = str(len(new_leaves))

        def pick(key, nodes, fields=fields):
            return [fields.get(key, "").split()[n] for n in nodes]

        for key in ("split_feature", "split_gain", "threshold", "decision_type", "internal_value",
                    "internal_weight", "internal_count"):
            out[key] = " ".join(pick(key, internal))
        for side in ("left_child", "right_child"):
            children = _numbers(fields, side, np.int64)[internal]
            ids = np.where(children >= 0, children, num_internal + ~children)
            out[side] = " ".join(str(v) for v in new_id[ids])
        for leaf_key, internal_key in (("leaf_value", "internal_value"), ("leaf_weight", "internal_weight"),
                                       ("leaf_count", "internal_count")):
            leaf_values, internal_values = fields.get(leaf_key, "").split(), fields.get(internal_key, "").split()
            out[leaf_key] = " ".join(internal_values[n] if n < num_internal else leaf_values[n - num_internal]
                                     for n in new_leaves)
        if int(fields.get("num_cat", "0")):
            bounds = _numbers(fields, "cat_boundaries", np.int64)
            words = fields["cat_threshold"].split()
            decision = _numbers(fields, "decision_type", np.int64)[internal]
            thresholds, new_bounds, new_words = out["threshold"].split(), [0], []
            for j, node in enumerate(internal):
                if decision[j] & 1:
                    cat = int(float(fields["threshold"].split()[node]))
                    new_words += words[bounds[cat]:bounds[cat + 1]]
                    thresholds[j] = str(len(new_bounds) - 1)
                    new_bounds.append(len(new_words))
            out["threshold"] = " ".join(thresholds)
            out["num_cat"] = str(len(new_bounds) - 1)
            out["cat_boundaries"] = " ".join(map(str, new_bounds))
            out["cat_threshold"] = " ".join(new_words)
            if len(new_bounds) == 1:
                del out["cat_boundaries"], out["cat_threshold"]
        if len(new_leaves) == 1:  # LightGBM writes a one-leaf tree without weights
            out["leaf_weight"] = ""
        blocks.append(_tree_block(t, out))
    header = "\n".join(f"tree_sizes={' '.join(str(len(b)) for b in blocks)}" if line.startswith("tree_sizes=")
                       else line for line in parts.header.split("\n"))
    footer = parts.footer
    importances = footer.find("feature_importances:")
    if importances >= 0:  # counts of the unpruned model: dropped rather than left stale
        footer = footer[:importances] + footer[footer.index("parameters:"):]
    return lgb.Booster(model_str=header + "".join(blocks) + "end of trees" + footer)


def _paths(parent: np.ndarray) -> list[list[int]]:
    """Each node's path from the root, itself included (parents come before children in scikit-learn)."""
    paths: list[list[int]] = []
    for node, up in enumerate(parent):
        paths.append([node] if up < 0 else paths[up] + [node])
    return paths


def _solve_highs(forest: _Forest, lazy: np.ndarray, lam: float):
    """The LP exactly as written above; returns z per tree, the LP optimum and HiGHS's dual bound."""
    n = forest.num_rows
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
        for node in np.flatnonzero(feature >= 0):  # (b): -w_ki - sum_{u in path(h)} z_u <= -1
            k = int(feature[node])
            for i in forest.rows(t, node):
                w = w_index.setdefault((int(i), k), len(w_index))
                ub_rows += [num_ub] * (len(paths[node]) + 1)
                ub_cols += [offsets[t] + u for u in paths[node]] + [num_z + w]
                ub_vals += [-1.0] * (len(paths[node]) + 1)
                num_ub += 1
    num_w = len(w_index)
    w_feature = np.fromiter((k for (_, k) in w_index), dtype=np.int64, count=num_w)
    # in units of 1/N (error counts and lam * c_k): HiGHS's tolerances are absolute (1e-7 by default), and
    # lam * c_k / N can be as small as that (lam=3e-4, c=1, N=3000 made HiGHS pay for 202 needless pairs)
    objective = np.concatenate([np.concatenate(forest.errors), lam * lazy[w_feature]])
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
    return [z[offsets[t]:offsets[t + 1]] for t in range(len(forest.parent))], float(res.fun) / n, dual / n


def _solve_maxflow(forest: _Forest, lazy: np.ndarray, lams: list[float]):
    """The same problem as a minimum-weight closure, solved by a maximum flow (cython_ext/_prune.pyx).

    x_h = 1 keeps internal node h (it then tests its feature); keeping h requires keeping its parent and
    paying (i, k_h) for each row i reaching h, but only where h is the topmost node testing k_h on the path
    (deeper ones are implied by it). In units of 1/N: keeping h gains e_h - sum of its children's e, a pair
    costs lam * c_k. Network: source -> h (positive gains), h -> sink (negative gains), h -> parent and
    h -> pair (infinite), pair -> sink (lam * c_k). The kept nodes are the source side of a minimum cut.
    Trade-offs are solved in increasing order on one network: raising lam only raises the pair -> sink
    capacities, so the flow found for the previous one stays feasible and is augmented (a warm start).
    Returns, in the order of lams, the new leaves per tree and the flow's bound on the optimum.
    """
    from ._prune import Network, topmost

    tree, parent_id, lo, hi, feature, top, gain, ids = [], [], [], [], [], [], [], []
    first = 0
    for t, (parent, feat, errors) in enumerate(zip(forest.parent, forest.feature, forest.errors)):
        internal = feat >= 0
        node_id = np.full(len(parent), -1, dtype=np.int64)
        node_id[internal] = first + np.arange(internal.sum())
        has_parent = parent >= 0
        children_error = np.bincount(parent[has_parent], weights=errors[has_parent], minlength=len(parent))
        gain.append((errors - children_error)[internal])
        parent_id.append(np.where(parent[internal] >= 0, node_id[parent[internal]], -1))
        tree.append(np.full(internal.sum(), t))
        lo.append(forest.lo[t][internal])
        hi.append(forest.hi[t][internal])
        feature.append(feat[internal])
        top.append(topmost(parent, feat)[internal] & (lazy[feat[internal]] > 0))
        ids.append(node_id)
        first += int(internal.sum())
    gain_all = np.concatenate(gain)
    largest_pair = max(lams, default=0.0) * float(lazy.max(initial=0.0))
    eps = 1e-13 * max(1.0, float(np.abs(gain_all).max(initial=0.0)), largest_pair)

    # pairs (row, feature) are indexed densely: only over the features that some node pays for
    top_all, feature_all = np.concatenate(top), np.concatenate(feature)
    paid_features = np.unique(feature_all[top_all])
    if len(gain_all) + forest.num_rows * len(paid_features) + 2 >= 2**31:
        raise CEGBError(f"budget_prune's max-flow numbers nodes with 32 bits: {forest.num_rows} rows x "
                        f"{len(paid_features)} costly features tested are too many; prune on fewer rows")
    compact = np.zeros(forest.num_features, dtype=np.int32)
    compact[paid_features] = np.arange(len(paid_features))

    def int32(parts):
        return np.ascontiguousarray(np.concatenate(parts), dtype=np.int32)

    network = Network(forest.perm, int32(tree), int32(parent_id), int32(lo), int32(hi), compact[feature_all],
                      top_all.astype(np.uint8), gain_all, np.ascontiguousarray(lazy[paid_features]), eps)
    constant = sum(float(errors[0]) for errors in forest.errors) - float(np.clip(gain_all, 0, None).sum())
    solutions: dict[float, tuple] = {}
    for lam in sorted(set(lams)):
        network.set_lam(lam)
        network.max_flow()
        keep = np.append(network.source_side(), False)  # leaves' node_id -1 reads the False
        leaves = []
        for parent, node_id in zip(forest.parent, ids):
            kept_internal = keep[node_id]
            leaves.append(~kept_internal & ((parent < 0) | kept_internal[np.maximum(parent, 0)] & (parent >= 0)))
        solutions[lam] = (leaves, (constant + network.flow) / forest.num_rows)
    return [solutions[lam] for lam in lams]


def _evaluate(forest: _Forest, leaves: list[np.ndarray], kept: list[np.ndarray],
              lazy: np.ndarray) -> tuple[float, float]:
    """error and cost terms of a pruning, computed from the rows' paths (not from the solver's w)."""
    from ._prune import mark_paid

    n = forest.num_rows
    error = sum(float(e[leaf].sum()) for e, leaf in zip(forest.errors, leaves)) / n
    paid = np.zeros((n, forest.num_features), dtype=np.uint8)
    internal = [np.flatnonzero(keep & ~leaf) for keep, leaf in zip(kept, leaves)]
    if sum(map(len, internal)):
        mark_paid(forest.perm, np.concatenate([np.full(len(nodes), t, dtype=np.int32) for t, nodes in enumerate(internal)]),
                  *(np.concatenate([part[nodes] for part, nodes in zip(parts, internal)]).astype(np.int32)
                    for parts in (forest.lo, forest.hi, forest.feature)), paid)
    cost = float(paid.sum(axis=0, dtype=np.int64) @ lazy) / n
    return error, cost


def _kept(parent: np.ndarray, leaf: np.ndarray) -> np.ndarray:
    """Nodes of the pruned tree: the new leaves and all their ancestors."""
    kept = leaf.copy()
    frontier = np.flatnonzero(leaf)
    while frontier.size:
        up = np.unique(parent[frontier])
        frontier = up[(up >= 0) & ~kept[np.maximum(up, 0)]]
        kept[frontier] = True
    return kept


def _pruned_sklearn(model, leaves: list[np.ndarray], kept: list[np.ndarray]):
    """A copy of the forest whose trees hold only the kept nodes (renumbered depth-first)."""
    from sklearn.tree._tree import TREE_LEAF, TREE_UNDEFINED, Tree

    pruned = copy.deepcopy(model)
    for estimator, leaf, keep in zip(pruned.estimators_, leaves, kept):
        state = estimator.tree_.__getstate__()
        nodes, values = state["nodes"], state["values"]
        order, depth = [], {0: 0}
        stack = [0]
        while stack:  # depth-first, left child first, as scikit-learn numbers nodes
            node = stack.pop()
            order.append(node)
            if not leaf[node]:
                for child in (nodes["right_child"][node], nodes["left_child"][node]):
                    depth[child] = depth[node] + 1
                    stack.append(child)
        order = np.asarray(order)
        if not keep[order].all() or keep.sum() != len(order):
            raise CEGBError("internal error: the pruned tree's nodes are not the kept nodes; please report this")
        new_id = np.full(len(nodes), -1, dtype=np.int64)
        new_id[order] = np.arange(len(order))
        new_nodes = nodes[order].copy()
        is_leaf = leaf[order]
        for side in ("left_child", "right_child"):
            new_nodes[side] = np.where(is_leaf, TREE_LEAF, new_id[np.maximum(nodes[side][order], 0)])
        new_nodes["feature"][is_leaf] = TREE_UNDEFINED
        new_nodes["threshold"][is_leaf] = TREE_UNDEFINED
        tree = Tree(estimator.tree_.n_features, np.asarray(estimator.tree_.n_classes, dtype=np.intp),
                    estimator.tree_.n_outputs)
        tree.__setstate__({"max_depth": int(max(depth[node] for node in order)), "node_count": len(order),
                           "nodes": new_nodes, "values": np.ascontiguousarray(values[order])})
        estimator.tree_ = tree
    return pruned


def _check_lam(lam) -> float:
    try:
        value = float(lam)
    except (TypeError, ValueError):
        raise CEGBError(f"lam should be a number >= 0, got {lam!r}") from None
    if not np.isfinite(value) or value < 0:
        raise CEGBError(f"lam should be a finite number >= 0, got {lam!r}")
    return value


def _lazy_costs(model, costs, num_features: int) -> np.ndarray:
    """The c_k, from costs as prediction_cost takes them (FeatureCosts validates them: finite, >= 0, one per
    feature). BudgetPrune has no coupled or split costs: they are refused rather than ignored."""
    lazy, coupled, split = resolve_costs(to_ensemble(model), costs).arrays(num_features)
    if coupled.any() or split.any():
        raise CEGBError("budget_prune uses lazy (per-row) feature costs only; got coupled costs for features "
                        f"{np.flatnonzero(coupled)[:10].tolist()} and split costs {np.unique(split)[:5].tolist()}")
    return np.asarray(lazy, dtype=np.float64)


def _problem(model, X, y, costs, solver: str):
    if solver not in SOLVERS:
        raise CEGBError(f"solver should be one of {SOLVERS}, got {solver!r}")
    if _is_sklearn_forest(model):
        forest, parts = _sklearn_forest(model, X, y), None
    else:
        forest, parts = _lightgbm_forest(model, X, y)
    return forest, parts, _lazy_costs(model, costs, forest.num_features)


def _result(model, forest: _Forest, parts, lazy: np.ndarray, lam: float, leaves: list[np.ndarray], optimum: float,
            lower_bound: float, solver: str) -> PruneResult:
    """The pruned model and the objective's terms, computed from the rows' paths and checked against the
    solver's optimum."""
    kept = [_kept(parent, leaf) for parent, leaf in zip(forest.parent, leaves)]
    error, cost = _evaluate(forest, leaves, kept, lazy)
    objective = error + lam * cost
    if not np.isclose(objective, optimum, rtol=1e-9, atol=1e-12):
        raise CEGBError(f"internal error: the pruned model's objective {objective!r} differs from the "
                        f"solver's optimum {optimum!r}; please report this")
    if parts is None:
        pruned = _pruned_sklearn(model, leaves, kept)
    else:
        pruned = _pruned_lightgbm(parts, leaves, kept)
        if hasattr(model, "booster_"):  # a LightGBM scikit-learn estimator: the same, with the pruned booster
            estimator = copy.deepcopy(model)
            estimator._Booster = pruned
            pruned = estimator
    return PruneResult(model=pruned, lam=lam, objective=objective,
                       lower_bound=lower_bound, error=error, cost=cost, kept=kept, leaves=leaves, solver=solver)


def budget_prune(model, X, y, costs, lam: float, *, solver: str = "maxflow") -> PruneResult:
    """Prune ``model`` on (X, y) for feature costs ``costs`` at trade-off ``lam`` (see the module doc).

    model : fitted RandomForestClassifier / ExtraTreesClassifier, lightgbm.Booster or LightGBM estimator
    costs : lazy feature costs as prediction_cost takes them: FeatureCosts, one value per feature, by feature
            name, or None for the cegb_penalty_feature_lazy a CEGB-trained LightGBM model was trained with
    """
    return budget_prune_path(model, X, y, costs, [lam], solver=solver)[0]


def budget_prune_path(model, X, y, costs, lams, *, solver: str = "maxflow") -> list[PruneResult]:
    """budget_prune at each trade-off of ``lams`` (results in the given order): the accuracy-cost points.
    The rows' paths are computed once; the max-flow solver goes through the trade-offs in increasing order
    and starts each from the previous one's flow."""
    lams = [_check_lam(lam) for lam in lams]
    forest, parts, lazy = _problem(model, X, y, costs, solver)
    if solver == "highs":
        solved = [_solve_highs(forest, lazy, lam) for lam in lams]
    else:
        solved = [(leaves, bound, bound) for leaves, bound in _solve_maxflow(forest, lazy, lams)]
    return [_result(model, forest, parts, lazy, lam, leaves, optimum, bound, solver)
            for lam, (leaves, optimum, bound) in zip(lams, solved)]
