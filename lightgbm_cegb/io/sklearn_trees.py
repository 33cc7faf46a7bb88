"""Fitted scikit-learn trees <-> ``Forest``.

``read_model`` converts DecisionTree* / ExtraTree*, RandomForest* / ExtraTrees*, GradientBoosting*,
Bagging* of trees and IsolationForest; ``read_hist`` HistGradientBoosting* (numeric splits: it compares the
float64 value with ``<=``, a missing value goes where the node says; its baseline added to the first
iteration's leaves, so the forest's raw score is its ``_raw_predict``, to the bit). Ensembles that fit each
tree on a subset of the columns (``max_features < 1`` in Bagging* and IsolationForest: ``estimators_features_``)
have their trees' feature indices mapped back to the columns of X. Split node j of a tree is its j-th internal
node in scikit-learn's numbering and leaf l its l-th leaf, so ``node_ids`` translates the one numbering of
``Forest`` to scikit-learn's node ids; ``cut_model`` writes a cut forest back into a copy of the estimator.

``HIST_READER`` and ``READER`` are their model readers (``io.model_readers``); ``READER`` is the table's last: it
takes any model no other reader recognises, and refuses what is not a fitted tree model.
"""

from __future__ import annotations

import copy

import numpy as np

from lightgbm_cegb.core.errors import CEGBError, NotFittedError
from lightgbm_cegb.core.forest import MISSING_TYPE_NAN, Forest
from lightgbm_cegb.io.model_readers import ModelReader, from_library
from lightgbm_cegb.io.tree_arrays import numeric_forest, renumber


def _trees(model) -> tuple[list, list, int, bool]:
    """(estimators with a ``tree_`` in iteration-major order, their column subsets or None, trees per
    iteration, average_output)."""
    from sklearn.ensemble import BaseEnsemble, GradientBoostingClassifier, GradientBoostingRegressor
    from sklearn.exceptions import NotFittedError as SklearnNotFittedError
    from sklearn.tree import BaseDecisionTree
    from sklearn.utils.validation import check_is_fitted

    if isinstance(model, (BaseDecisionTree, BaseEnsemble)):
        try:
            check_is_fitted(model)
        except SklearnNotFittedError:
            raise NotFittedError(f"model: this {type(model).__name__} is not fitted yet: call fit first") from None
    if isinstance(model, BaseDecisionTree):
        return [model], [None], 1, False
    if isinstance(model, (GradientBoostingClassifier, GradientBoostingRegressor)):
        if not constant_init(model):
            raise CEGBError(f"model: the init estimator of this {type(model).__name__} ({type(model.init_).__name__}) "
                            "predicts from the row's features, which no tree reads: its cost and lazy prediction "
                            "would miss them; use init=None (a constant) or 'zero'")
        estimators = np.asarray(model.estimators_)
        return list(estimators.ravel()), [None] * estimators.size, estimators.shape[1], False
    if isinstance(model, BaseEnsemble) and hasattr(model, "estimators_") \
            and all(isinstance(e, BaseDecisionTree) for e in model.estimators_):
        subsets = list(getattr(model, "estimators_features_", None) or [None] * len(model.estimators_))
        return list(model.estimators_), subsets, 1, True
    raise CEGBError(f"model should be a LightGBM Booster, a model file or a fitted scikit-learn tree, "
                    f"forest, bagging of trees, IsolationForest or gradient boosting model, got "
                    f"{type(model).__name__}")


def constant_init(model) -> bool:
    """Whether a fitted GradientBoosting* model's init estimator predicts one constant for every row: ``"zero"``, or
    a ``DummyClassifier`` / ``DummyRegressor`` of a constant strategy (its default)."""
    from sklearn.dummy import DummyClassifier, DummyRegressor

    init = model.init_
    if isinstance(init, str):
        return init == "zero"
    return (isinstance(init, DummyClassifier) and init.strategy in ("prior", "most_frequent", "constant")) or (
        isinstance(init, DummyRegressor) and init.strategy in ("mean", "median", "quantile", "constant"))


def node_ids(tree) -> np.ndarray:
    """scikit-learn's id of each node of ``tree`` (a ``tree_``) in Forest's one numbering."""
    is_leaf = tree.children_left == -1
    return np.concatenate([np.flatnonzero(~is_leaf), np.flatnonzero(is_leaf)])


def read_model(model) -> Forest:
    """A Forest from a fitted scikit-learn tree model. Leaf and internal values are the trees' first output
    (a regression value; a classifier's class-0 weight); scikit-learn compares float32 feature values, so
    the forest reads X as float32 (``drop_tiny=False``)."""
    estimators, subsets, per_iteration, average = _trees(model)
    num_features = int(model.n_features_in_)
    keys = ("feature", "threshold", "decision", "left", "right", "internal_value", "internal_weight",
            "internal_count", "leaf_value", "leaf_weight", "leaf_count")
    parts: dict[str, list] = {k: [] for k in keys}
    node_offset, leaf_offset = [0], [0]
    for estimator, subset in zip(estimators, subsets):
        tree = estimator.tree_
        is_leaf = tree.children_left == -1
        internal, leaves = np.flatnonzero(~is_leaf), np.flatnonzero(is_leaf)
        new_id = np.empty(tree.node_count, dtype=np.int64)
        new_id[internal] = np.arange(len(internal))
        new_id[leaves] = ~np.arange(len(leaves))
        feature = tree.feature[internal]
        if subset is not None:
            feature = np.asarray(subset)[feature]
        missing_left = getattr(tree, "missing_go_to_left", np.zeros(tree.node_count, dtype=np.uint8))
        parts["feature"].append(feature)
        parts["threshold"].append(tree.threshold[internal])
        # numerical split, missing type NaN: NaN goes where scikit-learn sends it, values compare with <=
        parts["decision"].append((MISSING_TYPE_NAN << 2) | (np.asarray(missing_left)[internal].astype(np.int64) << 1))
        parts["left"].append(new_id[tree.children_left[internal]])
        parts["right"].append(new_id[tree.children_right[internal]])
        for prefix, nodes in (("internal", internal), ("leaf", leaves)):
            parts[f"{prefix}_value"].append(tree.value[nodes, 0, 0])
            parts[f"{prefix}_weight"].append(tree.weighted_n_node_samples[nodes])
            parts[f"{prefix}_count"].append(tree.n_node_samples[nodes])
        node_offset.append(node_offset[-1] + len(internal))
        leaf_offset.append(leaf_offset[-1] + len(leaves))
    arrays = {k: np.concatenate(v) for k, v in parts.items()}
    names = [str(n) for n in model.feature_names_in_] if hasattr(model, "feature_names_in_") else None
    return numeric_forest(node_offset, leaf_offset, num_features, trees_per_iteration=per_iteration,
                          feature_names=names, average_output=average, drop_tiny=False, **arrays)


def is_hist(model) -> bool:
    """Whether ``model`` is a scikit-learn HistGradientBoosting estimator.

    Parameters
    ----------
    model : object
        Any model.

    Returns
    -------
    bool
        True for HistGradientBoostingClassifier and HistGradientBoostingRegressor (fitted or not).
    """
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    return isinstance(model, (HistGradientBoostingClassifier, HistGradientBoostingRegressor))


def _hist_columns(model) -> np.ndarray:
    """The column of X that each column of a HistGradientBoosting model's trees is: with categorical features,
    its preprocessor puts them first (in X's order), then the others (in X's order)."""
    num_features = int(model.n_features_in_)
    if getattr(model, "_preprocessor", None) is None:
        return np.arange(num_features)
    categorical = np.asarray(model.is_categorical_, dtype=bool)
    if categorical.shape != (num_features,):
        raise CEGBError(f"model: {type(model).__name__}'s is_categorical_ should mark its {num_features} features, "
                        f"got shape {categorical.shape}")
    return np.concatenate([np.flatnonzero(categorical), np.flatnonzero(~categorical)])


def read_hist(model) -> Forest:
    """A Forest from a fitted HistGradientBoostingClassifier or HistGradientBoostingRegressor (see the module);
    categorical splits are refused. With categorical features, the trees' columns are its preprocessor's (the
    categorical ones first): they are mapped back to X's."""
    if not hasattr(model, "_predictors"):
        raise NotFittedError(f"model: this {type(model).__name__} is not fitted yet: call fit first")
    columns = _hist_columns(model)
    baseline = np.asarray(model._baseline_prediction, dtype=np.float64).reshape(-1)
    per_iteration = len(baseline)
    keys = ("feature", "threshold", "decision", "left", "right", "internal_value", "internal_count", "split_gain",
            "leaf_value", "leaf_count")
    parts: dict[str, list] = {k: [] for k in keys}
    node_offset, leaf_offset = [0], [0]
    for i, predictors in enumerate(model._predictors):
        if len(predictors) != per_iteration:
            raise CEGBError(f"model: iteration {i} has {len(predictors)} trees, expected {per_iteration}")
        for k, predictor in enumerate(predictors):
            nodes = predictor.nodes
            where = f"{type(model).__name__}: tree {k} of iteration {i}"
            is_leaf = nodes["is_leaf"].astype(bool)
            splits, leaves, left, right = renumber(nodes["left"], nodes["right"], is_leaf, where)
            if nodes["is_categorical"][splits].any():
                raise CEGBError(f"model: {where} has a categorical split: not supported yet (train with "
                                "categorical_features=None on numeric codes)")
            parts["feature"].append(columns[nodes["feature_idx"][splits]])
            parts["threshold"].append(nodes["num_threshold"][splits])
            parts["decision"].append((MISSING_TYPE_NAN << 2)
                                     | (nodes["missing_go_to_left"][splits].astype(np.int64) << 1))
            parts["left"].append(left)
            parts["right"].append(right)
            parts["internal_value"].append(nodes["value"][splits])
            parts["internal_count"].append(nodes["count"][splits])
            parts["split_gain"].append(nodes["gain"][splits])
            # as _raw_predict adds: baseline + first tree's value, then the next trees' (the same bits)
            parts["leaf_value"].append(nodes["value"][leaves] + (baseline[k] if i == 0 else 0.0))
            parts["leaf_count"].append(nodes["count"][leaves])
            node_offset.append(node_offset[-1] + len(splits))
            leaf_offset.append(leaf_offset[-1] + len(leaves))
    arrays = {k: np.concatenate(v) for k, v in parts.items()}
    names = [str(n) for n in model.feature_names_in_] if hasattr(model, "feature_names_in_") else None
    return numeric_forest(node_offset, leaf_offset, int(model.n_features_in_), trees_per_iteration=per_iteration,
                          feature_names=names, drop_tiny=False, float32=False, **arrays)


def cut_model(model, leaves: list[np.ndarray], kept: list[np.ndarray]):
    """A copy of the forest ``model`` whose trees hold only the kept nodes (``leaves[t]`` and ``kept[t]``
    in Forest's one numbering of tree t), renumbered depth-first as scikit-learn numbers them."""
    from sklearn.tree._tree import TREE_LEAF, TREE_UNDEFINED, Tree

    pruned = copy.deepcopy(model)
    for estimator, leaf_one, keep_one in zip(pruned.estimators_, leaves, kept):
        ids = node_ids(estimator.tree_)
        leaf = np.zeros(len(ids), dtype=bool)
        keep = np.zeros(len(ids), dtype=bool)
        leaf[ids], keep[ids] = leaf_one, keep_one
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


def _hist_fingerprint(model) -> tuple:
    predictors = getattr(model, "_predictors", None)
    return (predictors, len(predictors or ()))


def _fingerprint(model) -> tuple:
    """Its trees' ``tree_`` objects themselves (not their ids: a tree fitted again may take a freed tree's address)."""
    estimators = getattr(model, "estimators_", None)
    trees = [model] if estimators is None else list(getattr(estimators, "ravel", lambda: estimators)())
    return (tuple((getattr(e, "tree_", None), getattr(getattr(e, "tree_", None), "node_count", 0)) for e in trees),)


HIST_READER = ModelReader(name="hist", title="HistGradientBoosting",
                          recognises=lambda model: from_library(model, "sklearn") and is_hist(model),
                          fingerprint=_hist_fingerprint, read=read_hist)
READER = ModelReader(name="sklearn", title="scikit-learn", named=False, recognises=lambda model: True,
                     fingerprint=_fingerprint, read=read_model)
