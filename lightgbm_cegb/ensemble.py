"""Tree ensembles as flat arrays: LightGBM text models and fitted scikit-learn trees and forests.

``TreeEnsemble`` is the one representation the accounting (and later BudgetPrune) works on. Nodes of
tree ``t`` are ``node_offset[t]:node_offset[t + 1]``, numbered from 0 (the root) inside the tree; a
child ``c >= 0`` is an internal node and ``c < 0`` is the leaf ``~c``, as in LightGBM's model files.
Parsing checks every field it uses and fails with a clear message on anything it does not know.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import lightgbm as lgb
import numpy as np

from ._engine import FlatEnsemble
from .errors import CEGBError

KNOWN_DECISION_BITS = 0b1111  # categorical, default-left, 2 bits of missing type
MISSING_TYPE_NAN = 2


@dataclass
class TreeEnsemble:
    """A tree ensemble as parallel arrays (see the module docstring for the layout)."""

    node_offset: np.ndarray  # int64[num_trees + 1]
    feature: np.ndarray  # int32 per node
    threshold: np.ndarray  # float64 per node (categorical: index of the node's category bitset)
    decision: np.ndarray  # uint8 per node: LightGBM decision_type bits
    left: np.ndarray  # int32 per node
    right: np.ndarray  # int32 per node
    leaf_offset: np.ndarray  # int64[num_trees + 1]
    leaf_value: np.ndarray  # float64 per leaf
    cat_offset: np.ndarray  # int64[num_trees]: first entry of each tree's bitset boundaries
    cat_boundaries: np.ndarray  # int64: word ranges of the bitsets in cat_threshold
    cat_threshold: np.ndarray  # uint32: category bitsets
    num_features: int
    trees_per_iteration: int = 1
    feature_names: list[str] | None = None
    average_output: bool = False
    drop_tiny: bool = True  # LightGBM reads |x| <= 1e-35 as 0; scikit-learn compares float32 values
    linear: dict | None = None  # per-leaf linear models of linear_tree models (leaf_const, indptr, features, coeff)
    params: dict = field(default_factory=dict)  # training parameters written in a LightGBM model
    _flat: FlatEnsemble | None = field(default=None, repr=False)

    @property
    def num_trees(self) -> int:
        return len(self.node_offset) - 1

    @property
    def num_iterations(self) -> int:
        return self.num_trees // self.trees_per_iteration

    @property
    def flat(self) -> FlatEnsemble:
        if self._flat is None:
            self._flat = FlatEnsemble(self.node_offset, self.feature, self.threshold, self.decision, self.left,
                                      self.right, self.cat_offset, self.cat_boundaries, self.cat_threshold,
                                      self.trees_per_iteration, self.drop_tiny)
        return self._flat

    def num_trees_for(self, num_iteration: int | None) -> int:
        """Trees used by the first ``num_iteration`` iterations (None or <= 0: all)."""
        if num_iteration is None or num_iteration <= 0 or num_iteration >= self.num_iterations:
            return self.num_trees
        return int(num_iteration) * self.trees_per_iteration

    def used_features(self, num_trees: int | None = None) -> np.ndarray:
        """Sorted features tested by at least one split node of the first ``num_trees`` trees."""
        end = self.node_offset[self.num_trees if num_trees is None else num_trees]
        return np.unique(self.feature[:end])

    def apply(self, X: np.ndarray, num_trees: int | None = None) -> np.ndarray:
        """Leaf index reached in each tree: int32[n_rows, num_trees]. X: checked float64 C array."""
        return self.flat.apply(X, self.num_trees if num_trees is None else num_trees, os.cpu_count() or 1)

    def raw_score(self, X: np.ndarray, leaves: np.ndarray) -> np.ndarray:
        """Raw score rebuilt from the leaves: float64[n_rows, trees_per_iteration] (linear leaves included)."""
        n, num_trees = leaves.shape
        out = np.zeros((n, self.trees_per_iteration))
        for t in range(num_trees):
            index = self.leaf_offset[t] + leaves[:, t]
            values = self.leaf_value[index].copy()
            if self.linear is not None:
                values = self._linear_values(X, index, values)
            out[:, t % self.trees_per_iteration] += values
        if self.average_output and num_trees:
            out /= num_trees // self.trees_per_iteration
        return out

    def _linear_values(self, X: np.ndarray, index: np.ndarray, fallback: np.ndarray) -> np.ndarray:
        lin = self.linear
        out = lin["leaf_const"][index].copy()
        for row, k in enumerate(index):
            feats = lin["features"][lin["indptr"][k]:lin["indptr"][k + 1]]
            x = X[row, feats]
            if np.isnan(x).any():  # LightGBM falls back to the plain leaf value
                out[row] = fallback[row]
            else:
                out[row] += float(np.dot(lin["coeff"][lin["indptr"][k]:lin["indptr"][k + 1]], x))
        return out


# ------------------------------------------------------------------------------------------- LightGBM


def _parse_block(block: str) -> dict[str, str]:
    fields = {}
    for line in block.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip()
        elif line.strip():
            fields[line.strip()] = ""
    return fields


def _array(fields: dict, key: str, dtype, count: int, tree: int) -> np.ndarray:
    if count == 0:
        return np.zeros(0, dtype=dtype)
    if key not in fields:
        raise CEGBError(f"LightGBM model: tree {tree} has no '{key}' line")
    values = np.array(fields[key].split(), dtype=np.float64 if dtype is np.uint32 else dtype)
    if len(values) != count:
        raise CEGBError(f"LightGBM model: tree {tree}: '{key}' should have {count} values, got {len(values)}")
    return values.astype(dtype)


def from_lightgbm_text(text: str) -> TreeEnsemble:
    """Parse a LightGBM model file's text (``Booster.model_to_string()``)."""
    head, sep, rest = text.partition("\nTree=")
    if not sep and "end of trees" not in text:
        raise CEGBError("not a LightGBM model: no 'Tree=' block and no 'end of trees' line")
    header = _parse_block(head)
    if header.get("version") not in ("v3", "v4"):
        raise CEGBError(f"LightGBM model version should be v3 or v4, got {header.get('version')!r}")
    for key in ("max_feature_idx", "num_tree_per_iteration"):
        if key not in header:
            raise CEGBError(f"LightGBM model: header has no '{key}' line")
    num_features = int(header["max_feature_idx"]) + 1
    trees_text, _, footer = ("Tree=" + rest).partition("end of trees") if sep else ("", "", text)
    blocks = [b for b in trees_text.split("Tree=") if b.strip()]
    parts: dict[str, list] = {k: [] for k in ("feature", "threshold", "decision", "left", "right", "leaf_value",
                                              "cat_boundaries", "cat_threshold")}
    node_offset, leaf_offset, cat_offset = [0], [0], []
    linear_parts: dict[str, list] = {"leaf_const": [], "counts": [], "features": [], "coeff": []}
    any_linear = False
    cat_words = 0
    for tree, block in enumerate(blocks):
        fields = _parse_block(block.split("\n", 1)[1] if "\n" in block else "")
        num_leaves = int(fields.get("num_leaves", "0"))
        if num_leaves < 1:
            raise CEGBError(f"LightGBM model: tree {tree} has num_leaves={fields.get('num_leaves')!r}")
        n_nodes = num_leaves - 1
        num_cat = int(fields.get("num_cat", "0"))
        feature = _array(fields, "split_feature", np.int32, n_nodes, tree)
        decision = _array(fields, "decision_type", np.int64, n_nodes, tree)
        left = _array(fields, "left_child", np.int32, n_nodes, tree)
        right = _array(fields, "right_child", np.int32, n_nodes, tree)
        threshold = _array(fields, "threshold", np.float64, n_nodes, tree)
        leaf_value = _array(fields, "leaf_value", np.float64, num_leaves, tree)
        if n_nodes:
            if feature.min() < 0 or feature.max() >= num_features:
                raise CEGBError(f"LightGBM model: tree {tree} splits on a feature outside 0..{num_features - 1}")
            bad = decision[(decision < 0) | (decision & ~KNOWN_DECISION_BITS != 0) | ((decision >> 2) & 3 == 3)]
            if bad.size:
                raise CEGBError(f"LightGBM model: tree {tree} has unknown decision_type {int(bad[0])}")
            for name, child in (("left_child", left), ("right_child", right)):
                if child.max() >= n_nodes or child.min() < -num_leaves:
                    raise CEGBError(f"LightGBM model: tree {tree}: {name} out of range")
        categorical = (decision & 1).astype(bool)
        if num_cat:
            bounds = _array(fields, "cat_boundaries", np.int64, num_cat + 1, tree)
            words = _array(fields, "cat_threshold", np.uint32, int(bounds[-1]), tree)
            if categorical.any() and (threshold[categorical] >= num_cat).any():
                raise CEGBError(f"LightGBM model: tree {tree}: categorical threshold beyond num_cat={num_cat}")
            cat_offset.append(sum(len(b) for b in parts["cat_boundaries"]))
            parts["cat_boundaries"].append(bounds + cat_words)
            parts["cat_threshold"].append(words)
            cat_words += len(words)
        else:
            if categorical.any():
                raise CEGBError(f"LightGBM model: tree {tree} has categorical splits but num_cat=0")
            cat_offset.append(0)
        if fields.get("is_linear", "0") == "1":
            any_linear = True
            counts = _array(fields, "num_features", np.int64, num_leaves, tree)
            linear_parts["leaf_const"].append(_array(fields, "leaf_const", np.float64, num_leaves, tree))
            linear_parts["counts"].append(counts)
            linear_parts["features"].append(_array(fields, "leaf_features", np.int32, int(counts.sum()), tree))
            linear_parts["coeff"].append(_array(fields, "leaf_coeff", np.float64, int(counts.sum()), tree))
        else:
            linear_parts["leaf_const"].append(leaf_value)
            linear_parts["counts"].append(np.zeros(num_leaves, dtype=np.int64))
        for key, value in (("feature", feature), ("threshold", threshold), ("decision", decision),
                           ("left", left), ("right", right), ("leaf_value", leaf_value)):
            parts[key].append(value)
        node_offset.append(node_offset[-1] + n_nodes)
        leaf_offset.append(leaf_offset[-1] + num_leaves)

    def cat(key, dtype):
        return np.concatenate(parts[key]).astype(dtype) if parts[key] else np.zeros(0, dtype=dtype)

    linear = None
    if any_linear:
        counts = np.concatenate(linear_parts["counts"])
        linear = {"leaf_const": np.concatenate(linear_parts["leaf_const"]),
                  "indptr": np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
                  "features": np.concatenate(linear_parts["features"] or [np.zeros(0)]).astype(np.int32),
                  "coeff": np.concatenate(linear_parts["coeff"] or [np.zeros(0)])}
    names = header.get("feature_names", "").split() or None
    return TreeEnsemble(
        node_offset=np.asarray(node_offset, dtype=np.int64), feature=cat("feature", np.int32),
        threshold=cat("threshold", np.float64), decision=cat("decision", np.uint8),
        left=cat("left", np.int32), right=cat("right", np.int32),
        leaf_offset=np.asarray(leaf_offset, dtype=np.int64), leaf_value=cat("leaf_value", np.float64),
        cat_offset=np.asarray(cat_offset, dtype=np.int64), cat_boundaries=cat("cat_boundaries", np.int64),
        cat_threshold=cat("cat_threshold", np.uint32), num_features=num_features,
        trees_per_iteration=int(header["num_tree_per_iteration"]), feature_names=names,
        average_output="average_output" in header, linear=linear, params=_parse_params(footer))


def _parse_params(footer: str) -> dict[str, str]:
    """The ``parameters:`` section of a model file: ``[name: value]`` lines."""
    params = {}
    for line in footer.splitlines():
        if line.startswith("[") and line.endswith("]") and ": " in line:
            key, _, value = line[1:-1].partition(": ")
            params[key] = value
    return params


# --------------------------------------------------------------------------------------- scikit-learn


def _sklearn_trees(model) -> tuple[list, int, bool]:
    """(list of sklearn Tree objects in iteration-major order, trees per iteration, average_output)."""
    from sklearn.ensemble import BaseEnsemble, GradientBoostingClassifier, GradientBoostingRegressor
    from sklearn.tree import BaseDecisionTree

    if isinstance(model, BaseDecisionTree):
        return [model.tree_], 1, False
    if isinstance(model, (GradientBoostingClassifier, GradientBoostingRegressor)):
        estimators = np.asarray(model.estimators_)
        return [est.tree_ for est in estimators.ravel()], estimators.shape[1], False
    if isinstance(model, BaseEnsemble) and all(isinstance(e, BaseDecisionTree) for e in model.estimators_):
        return [est.tree_ for est in model.estimators_], 1, True
    raise CEGBError(f"model should be a LightGBM Booster, a model file or a fitted scikit-learn tree, "
                    f"forest or gradient boosting model, got {type(model).__name__}")


def from_sklearn(model) -> TreeEnsemble:
    """Convert a fitted scikit-learn DecisionTree*, RandomForest*, ExtraTrees* or GradientBoosting* model.

    Leaf values are the trees' first output (a regression value; a classifier's class-0 weight), enough
    to identify leaves; scikit-learn compares float32 feature values, so callers cast X to float32.
    """
    trees, per_iteration, average = _sklearn_trees(model)
    parts: dict[str, list] = {k: [] for k in ("feature", "threshold", "decision", "left", "right", "leaf_value")}
    node_offset, leaf_offset = [0], [0]
    for tree in trees:
        is_leaf = tree.children_left == -1
        internal = np.flatnonzero(~is_leaf)
        leaves = np.flatnonzero(is_leaf)
        new_id = np.empty(tree.node_count, dtype=np.int64)
        new_id[internal] = np.arange(len(internal))
        new_id[leaves] = ~np.arange(len(leaves))
        missing_left = getattr(tree, "missing_go_to_left", np.zeros(tree.node_count, dtype=np.uint8))
        parts["feature"].append(tree.feature[internal])
        parts["threshold"].append(tree.threshold[internal])
        # numerical split, missing type NaN: NaN goes where scikit-learn sends it, values compare with <=
        parts["decision"].append((MISSING_TYPE_NAN << 2) | (np.asarray(missing_left)[internal].astype(np.int64) << 1))
        parts["left"].append(new_id[tree.children_left[internal]])
        parts["right"].append(new_id[tree.children_right[internal]])
        parts["leaf_value"].append(tree.value[leaves, 0, 0])
        node_offset.append(node_offset[-1] + len(internal))
        leaf_offset.append(leaf_offset[-1] + len(leaves))
    names = [str(n) for n in model.feature_names_in_] if hasattr(model, "feature_names_in_") else None
    return TreeEnsemble(
        node_offset=np.asarray(node_offset, dtype=np.int64),
        feature=np.concatenate(parts["feature"]).astype(np.int32),
        threshold=np.concatenate(parts["threshold"]).astype(np.float64),
        decision=np.concatenate(parts["decision"]).astype(np.uint8),
        left=np.concatenate(parts["left"]).astype(np.int32), right=np.concatenate(parts["right"]).astype(np.int32),
        leaf_offset=np.asarray(leaf_offset, dtype=np.int64),
        leaf_value=np.concatenate(parts["leaf_value"]).astype(np.float64),
        cat_offset=np.zeros(len(trees), dtype=np.int64), cat_boundaries=np.zeros(0, dtype=np.int64),
        cat_threshold=np.zeros(0, dtype=np.uint32), num_features=int(model.n_features_in_),
        trees_per_iteration=per_iteration, feature_names=names, average_output=average, drop_tiny=False)


def to_ensemble(model) -> TreeEnsemble:
    """A TreeEnsemble from a LightGBM Booster or sklearn-API model, a model file, or a scikit-learn model."""
    if isinstance(model, TreeEnsemble):
        return model
    if isinstance(model, lgb.LGBMModel):
        model = model.booster_
    if isinstance(model, lgb.Booster):
        return from_lightgbm_text(model.model_to_string(num_iteration=-1))
    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        if not path.is_file():
            raise CEGBError(f"model file {str(path)!r} does not exist")
        return from_lightgbm_text(path.read_text())
    return from_sklearn(model)
