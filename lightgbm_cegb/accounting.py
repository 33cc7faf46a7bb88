"""Exact prediction cost of a LightGBM model on given rows (SEEDS.md section 0).

For every row: the lazy (per-instance) cost of the distinct features tested on its root-to-leaf paths in
all trees, plus ``split_cost`` per split node traversed. The leaves each row reaches come from LightGBM
itself (``predict(pred_leaf=True)``), so routing is LightGBM's own; this module flattens the trees into
their leaves' paths and hands checked arrays to the Cython kernel.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import lightgbm as lgb
import numpy as np

from ._accounting import path_costs
from .errors import CEGBError


@dataclass(frozen=True)
class LeafPaths:
    """Every leaf's root-to-leaf path, flattened over the trees of a model.

    The path of leaf ``l`` of tree ``t`` is ``features[indptr[k]:indptr[k + 1]]`` with
    ``k = tree_leaf_offset[t] + l``: one entry per split node, root first.
    """

    tree_leaf_offset: np.ndarray  # int64[num_trees + 1]
    indptr: np.ndarray  # int64[total_leaves + 1]
    features: np.ndarray  # int32[indptr[-1]]
    num_features: int


def leaf_paths(booster: lgb.Booster, num_iteration: int | None = None) -> LeafPaths:
    """Flatten ``booster``'s trees (up to ``num_iteration``) into their leaves' paths."""
    dump = booster.dump_model(num_iteration=num_iteration)
    offsets = [0]
    indptr = [0]
    features: list[int] = []
    for tree in dump["tree_info"]:
        paths: dict[int, list[int]] = {}
        stack = [(tree["tree_structure"], [])]
        while stack:
            node, path = stack.pop()
            if "split_index" in node:
                below = [*path, node["split_feature"]]
                stack.append((node["left_child"], below))
                stack.append((node["right_child"], below))
            else:
                paths[node.get("leaf_index", 0)] = path
        if sorted(paths) != list(range(tree["num_leaves"])):
            raise CEGBError(f"tree {tree['tree_index']}: expected leaves 0..{tree['num_leaves'] - 1}, "
                            f"found {sorted(paths)}")
        for leaf in range(tree["num_leaves"]):
            features.extend(paths[leaf])
            indptr.append(len(features))
        offsets.append(offsets[-1] + tree["num_leaves"])
    return LeafPaths(np.asarray(offsets, dtype=np.int64), np.asarray(indptr, dtype=np.int64),
                     np.asarray(features, dtype=np.int32), int(dump["max_feature_idx"]) + 1)


@dataclass(frozen=True)
class CostReport:
    """Prediction cost of a model on a set of rows."""

    acquisition: np.ndarray  # per row: lazy costs of the distinct features the row's paths test
    evaluation: np.ndarray  # per row: split_cost * split nodes traversed (over all trees)
    usage: np.ndarray  # per feature: fraction of rows whose paths test it

    @property
    def per_instance(self) -> np.ndarray:
        return self.acquisition + self.evaluation

    @property
    def mean(self) -> float:
        return float(self.per_instance.mean()) if self.per_instance.size else 0.0


def prediction_cost(booster: lgb.Booster, X, lazy_costs, split_cost: float = 0.0, *,
                    num_iteration: int | None = None) -> CostReport:
    """Per-row prediction cost of ``booster`` on ``X``.

    Parameters
    ----------
    booster : lightgbm.Booster
    X : array-like of shape (n_rows, n_features)
        Anything ``booster.predict`` accepts.
    lazy_costs : array-like of shape (n_features,)
        Cost of acquiring each feature for one row (paid once per row).
    split_cost : float
        Cost of evaluating one split node.
    num_iteration : int, optional
        Use only the first ``num_iteration`` iterations, as in ``booster.predict``.
    """
    lazy = np.asarray(lazy_costs, dtype=np.float64)
    paths = leaf_paths(booster, num_iteration)
    if lazy.ndim != 1 or lazy.shape[0] != paths.num_features:
        raise CEGBError(f"lazy_costs should have one value per feature of the model ({paths.num_features}), "
                        f"got shape {lazy.shape}")
    if not np.all(np.isfinite(lazy)) or np.any(lazy < 0):
        raise CEGBError(f"lazy_costs should be finite and >= 0, got {lazy[~(np.isfinite(lazy) & (lazy >= 0))][:5]}")
    if not np.isfinite(split_cost) or split_cost < 0:
        raise CEGBError(f"split_cost should be a finite number >= 0, got {split_cost!r}")
    leaves = booster.predict(X, pred_leaf=True, num_iteration=num_iteration)
    leaves = np.ascontiguousarray(np.asarray(leaves).reshape(len(leaves), -1), dtype=np.int32)
    acquisition, num_splits, rows_using = path_costs(
        leaves, paths.tree_leaf_offset, paths.indptr, paths.features, lazy, os.cpu_count() or 1)
    n = max(len(leaves), 1)
    return CostReport(acquisition, split_cost * num_splits, rows_using / n)
