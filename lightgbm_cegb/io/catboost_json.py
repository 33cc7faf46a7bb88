"""CatBoost models -> ``Forest``.

``read_json`` reads CatBoost's JSON model (``save_model(path, format="json")``): symmetric (oblivious) trees on
float features, binary, multiclass and regression. An oblivious tree of depth d tests the same d splits on
every path; it becomes a complete binary tree of depth d whose level l tests split l, the right child where
``float32(x) > border`` (the bit l of CatBoost's leaf index). A missing value goes where the feature's
``nan_value_treatment`` sends it (``AsTrue``: right; ``AsFalse`` and ``AsIs``: left, as CatBoost compares NaN).
A multiclass tree (a vector per leaf) becomes one tree per class, one iteration. The model's ``scale_and_bias``
is folded into the leaves (scaled, the bias added to the first iteration's trees), so the forest's raw score is
``predict(prediction_type="RawFormulaVal")`` (to the rounding of the order of the additions).

Split costs count once per class's tree in a multiclass model (its trees share their splits in CatBoost).
A float feature is the one at its position in ``float_features`` (as CatBoost reads them: their
``feature_index`` field is not read), and a split's border the one its ``split_index`` names among the features'
``borders``.

Refused, naming the field: categorical, text and embedding features in splits (one-hot and CTR splits have
no single column to account), non-symmetric trees (``grow_policy`` other than ``SymmetricTree``), a split whose
``border`` and ``split_index`` disagree, two features of one column.

``READER`` is CatBoost's model reader (``io.model_readers``): fitted models, JSON and binary model files (a binary
file loaded by CatBoost, which is imported only then).
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lightgbm_cegb.core.errors import CEGBError, NotFittedError
from lightgbm_cegb.core.forest import MISSING_TYPE_NAN, Forest
from lightgbm_cegb.io.model_readers import FileFormat, ModelReader, from_library, import_library
from lightgbm_cegb.io.tree_arrays import field, listed, numbers, numeric_forest, optional, parsed, whole


def read_model(model) -> Forest:
    """The Forest of a fitted CatBoost model (``CatBoost``, ``CatBoostClassifier``, ``CatBoostRegressor``, ...).

    Parameters
    ----------
    model : catboost.CatBoost
        The fitted model.

    Returns
    -------
    Forest
        Its trees (see the module).

    Raises
    ------
    NotFittedError
        For a model that is not fitted.
    CEGBError
        For what the module refuses.
    """
    return read_json(_json(model))


def _json(model) -> str:
    """A fitted CatBoost model's JSON text."""
    if not model.is_fitted():
        raise NotFittedError(f"model: this {type(model).__name__} is not fitted yet: call fit first")
    with tempfile.TemporaryDirectory(prefix="lightgbm-cegb-catboost-") as folder:
        path = os.path.join(folder, "model.json")
        model.save_model(path, format="json")  # its fields' bytes as they are (a binary model's guid: any bytes)
        return Path(path).read_text(encoding="utf-8", errors="replace")


def _field(mapping, key: str, where: str):
    return field(mapping, key, where, "CatBoost")


def _floats(values, where: str, count: int | None = None) -> np.ndarray:
    return numbers(values, f"CatBoost model: {where}", count)


def read_json(text) -> Forest:
    """The Forest of a CatBoost JSON model.

    Parameters
    ----------
    text : str, bytes or dict
        The JSON text, or its parsed value.

    Returns
    -------
    Forest
        Its trees (see the module).

    Raises
    ------
    CEGBError
        When the text is not a CatBoost JSON model, or for what the module refuses.
    """
    return _read(text)[0]


@dataclass(frozen=True)
class Sums:
    """What CatBoost's evaluator sums besides the forest (``serving.outputs``): the trees' leaf values in the
    forest's leaf order before the model's ``scale`` and ``bias`` (one per output) were folded into them; CatBoost
    computes ``scale * sum + bias`` of their sum."""

    scale: float
    bias: np.ndarray
    leaf_value: np.ndarray


def sums(model) -> Sums:
    """The :class:`Sums` of a fitted CatBoost model."""
    return _read(_json(model))[1]


def _read(text) -> tuple[Forest, Sums]:
    """read_json's Forest and the model's Sums."""
    text = parsed(text, "CatBoost")
    info = _field(text, "features_info", "the model")
    if "oblivious_trees" not in text:
        raise CEGBError("CatBoost model: no oblivious_trees: only symmetric trees (grow_policy='SymmetricTree', "
                        "the default) are supported")
    floats = listed(_field(info, "float_features", "features_info"), "CatBoost model: float_features")
    flat, nan_right, ids = {}, {}, {}  # by float feature: its column, NaN's side; by column: its name
    borders, first = [], [0]  # by float feature (its position, as CatBoost numbers them): its borders; the
    for k, feature in enumerate(floats):  # index of its first border among every float feature's (split_index)
        flat[k] = whole(_field(feature, "flat_feature_index", f"float feature {k}"),
                        f"CatBoost model: float feature {k}'s flat_feature_index")
        nan_right[k] = optional(feature, "nan_value_treatment", "AsIs", f"float feature {k}", "CatBoost") == "AsTrue"
        ids[flat[k]] = optional(feature, "feature_id", None, f"float feature {k}", "CatBoost")
        borders.append(_floats(optional(feature, "borders", [], f"float feature {k}", "CatBoost"),
                               f"float feature {k}'s borders").astype(np.float32))
        first.append(first[-1] + len(borders[-1]))
    columns = list(flat.values())
    for key in ("categorical_features", "text_features", "embedding_features"):
        for k, feature in enumerate(listed(optional(info, key, None, "features_info", "CatBoost") or [],
                                           f"CatBoost model: {key}")):
            columns.append(whole(_field(feature, "flat_feature_index", f"{key} {k}"),
                                 f"CatBoost model: {key} {k}'s flat_feature_index"))
    num_features = max(columns, default=-1) + 1
    if num_features < 1:
        raise CEGBError("CatBoost model: features_info lists no feature")
    if len(set(columns)) != len(columns):
        raise CEGBError("CatBoost model: features_info gives two features one flat_feature_index")
    scale_and_bias = listed(optional(text, "scale_and_bias", [1.0, [0.0]], "the model", "CatBoost"),
                            "CatBoost model: scale_and_bias")
    if len(scale_and_bias) != 2:
        raise CEGBError(f"CatBoost model: scale_and_bias should be [scale, bias], got {str(scale_and_bias)[:60]}")
    scale = float(_floats([scale_and_bias[0]], "scale_and_bias's scale", 1)[0])
    bias = scale_and_bias[1]
    bias = _floats(bias if isinstance(bias, list) else [bias], "scale_and_bias's bias")
    dim = len(bias)
    if dim < 1:
        raise CEGBError("CatBoost model: scale_and_bias's bias should hold one value per output, got none")
    stored: list[np.ndarray] = []
    parts: dict[str, list] = {key: [] for key in ("feature", "threshold", "decision", "left", "right",
                                                  "leaf_value", "leaf_weight")}
    trees = listed(_field(text, "oblivious_trees", "the model"), "CatBoost model: oblivious_trees")
    for t, tree in enumerate(trees):
        where = f"tree {t}"
        splits = listed(_field(tree, "splits", where), f"CatBoost model: {where}'s splits")
        depth = len(splits)
        if depth > 16:
            raise CEGBError(f"CatBoost model: {where} has depth {depth}; CatBoost's trees are at most 16 deep")
        feature, border, right_nan = [], [], []
        for s, split in enumerate(splits):
            kind = optional(split, "split_type", "FloatFeature", f"{where}'s split {s}", "CatBoost")
            if kind != "FloatFeature":
                raise CEGBError(f"CatBoost model: {where}'s split {s} is a {kind!r} split: only float features are "
                                "supported (one-hot and CTR splits of categorical features have no single column "
                                "to account)")
            index = whole(_field(split, "float_feature_index", f"{where}'s split {s}"),
                          f"CatBoost model: {where}'s split {s}'s float_feature_index")
            if index not in flat:
                raise CEGBError(f"CatBoost model: {where}'s split {s} tests float feature {index!r}, which "
                                "features_info does not list")
            feature.append(flat[index])
            border.append(_border(split, f"{where}'s split {s}", index, borders[index], first[index]))
            right_nan.append(nan_right[index])
        values = _floats(_field(tree, "leaf_values", where), f"{where}'s leaf_values", dim << depth)
        weights = optional(tree, "leaf_weights", None, where, "CatBoost")
        weights = np.zeros(1 << depth) if weights is None else _floats(weights, f"{where}'s leaf_weights", 1 << depth)
        shape = _complete_tree(np.asarray(feature), np.asarray(border), np.asarray(right_nan, dtype=bool))
        for k in range(dim):
            stored.append(values.reshape(1 << depth, dim)[shape["leaf_index"], k])
            leaf_value = stored[-1] * scale
            if t == 0:
                leaf_value = leaf_value + bias[k]
            for key in ("feature", "threshold", "decision", "left", "right"):
                parts[key].append(shape[key])
            parts["leaf_value"].append(leaf_value)
            parts["leaf_weight"].append(weights[shape["leaf_index"]])
    if not trees:  # no tree: one leaf per output holding the bias
        parts = {key: [np.zeros(0)] for key in parts}
        parts["leaf_value"], parts["leaf_weight"] = [bias], [np.zeros(dim)]
        stored = [np.zeros(dim)]
        node_counts = np.zeros(dim, dtype=np.int64)
    else:
        node_counts = np.asarray([len(f) for f in parts["feature"]], dtype=np.int64)
    arrays = {key: np.concatenate(value) for key, value in parts.items()}
    forest = numeric_forest(np.concatenate([[0], np.cumsum(node_counts)]),
                            np.concatenate([[0], np.cumsum(node_counts + 1)]), num_features, trees_per_iteration=dim,
                            feature_names=_names(ids, num_features), drop_tiny=False, float32=True, **arrays)
    return forest, Sums(scale, bias, np.concatenate(stored))


def _border(split: dict, where: str, index: int, borders: np.ndarray, first: int) -> float:
    """The border a split compares with, as float32: CatBoost reads it from its ``split_index`` among every float
    feature's borders (its ``border`` field only repeats it). A split whose ``split_index`` is not a border of
    its feature, or whose ``border`` is not that one, is refused: CatBoost would read another split."""
    cut = _floats([_field(split, "border", where)], f"{where}'s border", 1)[0]
    if not len(borders):  # a model without its features' borders: the split's own
        return float(np.float32(cut))
    at = whole(_field(split, "split_index", where), f"CatBoost model: {where}'s split_index") - first
    if not 0 <= at < len(borders):
        raise CEGBError(f"CatBoost model: {where}'s split_index {at + first} is not one of float feature {index}'s "
                        f"borders (split_index {first}..{first + len(borders) - 1})")
    if np.float32(cut) != borders[at]:
        raise CEGBError(f"CatBoost model: {where}'s border {cut!r} is not float feature {index}'s border "
                        f"{float(borders[at])!r} that its split_index {at + first} names")
    return float(borders[at])


def _names(ids: dict, num_features: int) -> list[str] | None:
    """The features' names, when CatBoost kept one (``feature_id``) for every column."""
    if len(ids) != num_features or not all(isinstance(n, str) and n for n in ids.values()):
        return None
    return [ids[c] for c in range(num_features)]


def _complete_tree(feature: np.ndarray, border: np.ndarray, right_nan: np.ndarray) -> dict:
    """The complete binary tree of an oblivious tree (split l at level l), numbered depth first (a split node
    before its children, the left child first), and CatBoost's leaf index of each of its leaves."""
    depth = len(feature)
    out: dict[str, list] = {key: [] for key in ("feature", "threshold", "decision", "left", "right")}
    leaf_index: list[int] = []

    def grow(level: int, index: int) -> int:
        """Numbers the subtree below a node at ``level`` whose path so far sets the bits ``index``; returns its
        id (>= 0 a split node, < 0 the leaf ~id)."""
        if level == depth:
            leaf_index.append(index)
            return ~(len(leaf_index) - 1)
        node = len(out["feature"])
        out["feature"].append(feature[level])
        out["threshold"].append(border[level])
        out["decision"].append((MISSING_TYPE_NAN << 2) | (0 if right_nan[level] else 2))
        out["left"].append(0)
        out["right"].append(0)
        out["left"][node] = grow(level + 1, index)
        out["right"][node] = grow(level + 1, index | (1 << level))
        return node

    grow(0, 0)
    shape = {key: np.asarray(value, dtype=np.float64 if key == "threshold" else np.int64)
             for key, value in out.items()}
    shape["leaf_index"] = np.asarray(leaf_index, dtype=np.int64)
    return shape


def _fingerprint(model) -> tuple:
    """Its tree count, leaf values, scale and bias: fitting again trains the same object, ``set_scale_and_bias``
    changes what every leaf gives."""
    if not model.is_fitted():
        return (None,)
    leaves = np.ascontiguousarray(model.get_leaf_values())
    return (model.tree_count_, hashlib.sha256(leaves.tobytes()).hexdigest(), repr(model.get_scale_and_bias()))


def _load(path: Path, file_format: str):
    catboost = import_library("catboost", path)
    model = catboost.CatBoost()
    try:
        model.load_model(str(path), format=file_format)
    except catboost.CatBoostError as exc:
        raise CEGBError(f"model file {str(path)!r}: CatBoost cannot read it: {exc}") from None
    return model


READER = ModelReader(name="catboost", title="CatBoost", recognises=lambda model: from_library(model, "catboost"),
                     fingerprint=_fingerprint, read=read_model,
                     file_formats=(FileFormat(json_key="features_info", read=read_json,
                                              load=functools.partial(_load, file_format="json")),
                                   FileFormat(heads=(b"CBM1",), load=functools.partial(_load, file_format="cbm"))))
