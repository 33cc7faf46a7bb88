"""XGBoost models -> ``Forest``.

``read_json`` reads XGBoost's JSON model (``Booster.save_raw("json")``, ``save_model("model.json")``; the
format of XGBoost 2 and 3): boosters ``gbtree`` and ``dart`` (each tree's ``weight_drop`` folded into its
leaves), one output per tree (binary, multiclass, regression, ranking, several targets), default directions for
missing values. XGBoost compares ``float32(x) < split_condition`` in float32; the forest reads X as float32
and its threshold is the float32 just below the condition, so ``<=`` makes the same decision for every value.
The model's intercept (``base_score``, turned into a margin by the objective's link, as XGBoost does) is added
to the leaves of the first iteration's trees, so the forest's raw score is ``predict(output_margin=True)``
(XGBoost adds in float32: the two agree to its rounding). A tree of the forest is one of XGBoost's, placed by
its ``id`` as XGBoost places it; with ``num_parallel_tree`` P, one of XGBoost's iterations is P groups of the
forest's trees (``Forest.parallel_trees``), so ``num_iteration`` counts XGBoost's rounds. XGBoost reads the
entries a sparse matrix does not store as missing, and an estimator's ``missing`` value too: the forest reads
them so (``Forest.sparse_missing``, ``Forest.missing_value``).

Refused, naming the field: ``gblinear``, categorical splits, vector leaves (``multi_strategy=
"multi_output_tree"``), objectives whose intercept link is not known here; fields XGBoost would read with
another meaning or refuse (trees whose ids are not 0..n-1 once each, ``default_left`` other than 0 or 1,
strings or booleans where numbers belong).

``READER`` is XGBoost's model reader (``io.model_readers``): Boosters and estimators, JSON and UBJSON model files
(a UBJSON file loaded by XGBoost, which is imported only then).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lightgbm_cegb.core.errors import CEGBError, NotFittedError
from lightgbm_cegb.core.forest import MISSING_TYPE_NAN, Forest
from lightgbm_cegb.io.model_readers import FileFormat, ModelReader, from_library, import_library
from lightgbm_cegb.io.tree_arrays import field, listed, numbers, numeric_forest, optional, parsed, renumber, whole

#: objectives whose ``base_score`` is a probability (the margin is its logit) or a mean (its log)
_LOGIT = {"binary:logistic", "reg:logistic"}
_LOG = {"count:poisson", "reg:gamma", "reg:tweedie", "survival:cox", "survival:aft"}
#: objectives whose ``base_score`` is already the margin
_IDENTITY = {"reg:squarederror", "reg:squaredlogerror", "reg:pseudohubererror", "reg:absoluteerror",
             "reg:quantileerror", "reg:linear", "multi:softmax", "multi:softprob", "rank:pairwise", "rank:ndcg",
             "rank:map", "binary:logitraw", "binary:hinge"}


def read_model(model) -> Forest:
    """The Forest of an ``xgboost.Booster`` or a fitted XGBoost scikit-learn estimator (its JSON model).

    Parameters
    ----------
    model : xgboost.Booster or xgboost.XGBModel
        The model.

    Returns
    -------
    Forest
        Its trees (see the module).

    Raises
    ------
    NotFittedError
        For an XGBoost estimator that is not fitted.
    CEGBError
        For what the module refuses.
    """
    import xgboost as xgb

    missing = None
    if isinstance(model, xgb.XGBModel):
        if not model.__sklearn_is_fitted__():
            raise NotFittedError(f"model: this {type(model).__name__} is not fitted yet: call fit first")
        missing = model.missing
        model = model.get_booster()
    return read_json(bytes(model.save_raw("json")).decode("utf-8"), missing=missing)


def _field(mapping, key: str, where: str):
    return field(mapping, key, where, "XGBoost")


def _number_list(text, where: str) -> list[float]:
    """A field XGBoost writes as a number, a string of a number or a string "[a,b,...]": finite numbers."""
    if isinstance(text, str):
        try:
            text = [float(part) for part in text.strip().strip("[]").split(",") if part.strip()]
        except ValueError:
            raise CEGBError(f"XGBoost model: {where} should be a number or a list of numbers, got {text!r:.60}") \
                from None
    elif isinstance(text, (int, float)) and not isinstance(text, bool):
        text = [text]
    else:
        raise CEGBError(f"XGBoost model: {where} should be a number or a list of numbers, got {text!r:.60}")
    return numbers(text, f"XGBoost model: {where}").tolist()


def _integer(text, where: str, low: int = 0) -> int:
    return whole(text, f"XGBoost model: {where}", low)


def _margin(base: float, objective: str) -> float:
    if objective in _IDENTITY:
        return base
    if objective in _LOGIT:
        if not 0 < base < 1:
            raise CEGBError(f"XGBoost model: base_score {base!r} of objective {objective!r} should be a probability")
        return math.log(base / (1 - base))
    if objective in _LOG:
        if not base > 0:
            raise CEGBError(f"XGBoost model: base_score {base!r} of objective {objective!r} should be positive")
        return math.log(base)
    raise CEGBError(f"XGBoost model: objective {objective!r}: how its base_score becomes a margin is not known here "
                    f"(supported: {sorted(_IDENTITY | _LOGIT | _LOG)})")


def read_json(text, *, missing: float | None = None) -> Forest:
    """The Forest of an XGBoost JSON model.

    Parameters
    ----------
    text : str, bytes or dict
        The JSON text, or its parsed value.
    missing : float or None, default=None
        The value XGBoost is told is missing besides NaN (an estimator's ``missing``; None or NaN: NaN only).

    Returns
    -------
    Forest
        Its trees (see the module).

    Raises
    ------
    CEGBError
        When the text is not an XGBoost JSON model, or for what the module refuses.
    """
    return _read(text, missing)[0]


@dataclass(frozen=True)
class Margins:
    """What XGBoost's predictor sums besides the forest (``serving.outputs``): the model's ``objective``, its
    ``base_score`` per output (as stored: a probability for the logistic objectives), and the leaf values in the
    forest's leaf order before the intercept was added to them (float32 numbers, as the model stores them)."""

    objective: str
    base_score: tuple[float, ...]
    leaf_value: np.ndarray


def margins(model) -> Margins | None:
    """The :class:`Margins` of an ``xgboost.Booster`` or a fitted XGBoost estimator whose booster is ``gbtree`` (a
    ``dart`` model scales its trees' outputs: None)."""
    import xgboost as xgb

    booster = model.get_booster() if isinstance(model, xgb.XGBModel) else model
    return _read(bytes(booster.save_raw("json")).decode("utf-8"), None)[1]


def _read(text, missing: float | None) -> tuple[Forest, Margins | None]:
    """read_json's Forest and the model's Margins (None for dart)."""
    learner = _field(parsed(text, "XGBoost"), "learner", "the model")
    param = _field(learner, "learner_model_param", "learner")
    num_features = _integer(_field(param, "num_feature", "learner_model_param"), "num_feature", 1)
    num_class = _integer(optional(param, "num_class", 0, "learner_model_param", "XGBoost"), "num_class")
    num_target = _integer(optional(param, "num_target", 1, "learner_model_param", "XGBoost"), "num_target", 1)
    outputs = max(num_class, num_target, 1)
    objective = _field(_field(learner, "objective", "learner"), "name", "objective")
    booster = _field(learner, "gradient_booster", "learner")
    name = _field(booster, "name", "gradient_booster")
    if name == "dart":
        weights = numbers(_field(booster, "weight_drop", "dart"), "XGBoost model: weight_drop")
        booster = _field(booster, "gbtree", "dart")
    elif name == "gbtree":
        weights = None
    else:
        raise CEGBError(f"XGBoost model: booster {name!r} has no trees (supported: 'gbtree', 'dart')")
    model = _field(booster, "model", "gbtree")
    trees = _placed(listed(_field(model, "trees", "gbtree model"), "XGBoost model: trees"))
    tree_info = listed(_field(model, "tree_info", "gbtree model"), "XGBoost model: tree_info")
    if len(tree_info) != len(trees):
        raise CEGBError(f"XGBoost model: tree_info should give the output of each of the {len(trees)} trees")
    if weights is not None and len(weights) != len(trees):
        raise CEGBError(f"XGBoost model: weight_drop should have {len(trees)} values, got {len(weights)}")
    base = _number_list(optional(param, "base_score", 0.5, "learner_model_param", "XGBoost"), "base_score")
    if len(base) not in (1, outputs):
        raise CEGBError(f"XGBoost model: base_score should hold 1 or {outputs} values, got {len(base)}")
    base_score = tuple(base * outputs if len(base) == 1 else base)
    base = [_margin(b, objective) for b in base_score]
    for t, tree in enumerate(trees):
        size = optional(_field(tree, "tree_param", f"tree {t}"), "size_leaf_vector", 1, f"tree {t}'s tree_param",
                        "XGBoost")
        if _integer(size, f"tree {t}'s size_leaf_vector") > 1:
            raise CEGBError(f"XGBoost model: tree {t} has vector leaves (multi_strategy='multi_output_tree'): not "
                            "supported; train with multi_strategy='one_output_per_tree'")
    by_output: list[list[int]] = [[] for _ in range(outputs)]
    for t, k in enumerate(tree_info):
        k = _integer(k, f"tree_info[{t}]")
        if k >= outputs:
            raise CEGBError(f"XGBoost model: tree_info[{t}] is {k}, outside its {outputs} outputs")
        by_output[k].append(t)
    rounds = {len(ts) for ts in by_output}
    if len(rounds) > 1:
        raise CEGBError(f"XGBoost model: its outputs have different numbers of trees {sorted(rounds)}")
    parallel = _parallel_trees(model, len(trees), outputs)
    order = [by_output[k][i] for i in range(rounds.pop()) for k in range(outputs)]  # iteration-major
    parts: dict[str, list] = {key: [] for key in ("feature", "threshold", "decision", "left", "right", "leaf_value",
                                                  "internal_value", "internal_weight", "leaf_weight", "split_gain")}
    node_offset, leaf_offset = [0], [0]
    stored: list[np.ndarray] = []
    for position, t in enumerate(order):
        tree = _tree(trees[t], t, num_features)
        stored.append(tree["leaf_value"])
        leaf_value = tree["leaf_value"] * (1.0 if weights is None else weights[t])
        if position < outputs:
            leaf_value = leaf_value + base[position]
        tree["leaf_value"] = leaf_value
        for key in parts:
            parts[key].append(tree[key])
        node_offset.append(node_offset[-1] + len(tree["feature"]))
        leaf_offset.append(leaf_offset[-1] + len(tree["leaf_value"]))
    if not order:  # no tree: one leaf per output holding the intercept
        parts = {key: [np.zeros(0)] for key in parts}
        parts["leaf_value"] = [np.asarray(base, dtype=np.float64)]
        parts["leaf_weight"] = [np.zeros(outputs)]
        node_offset, leaf_offset = [0] * (outputs + 1), list(range(outputs + 1))
        stored = [np.zeros(outputs)]
    arrays = {key: np.concatenate(value) for key, value in parts.items()}
    names = optional(learner, "feature_names", None, "learner", "XGBoost") or None
    if names is not None and (not isinstance(names, list) or len(names) != num_features):
        raise CEGBError(f"XGBoost model: feature_names should name the {num_features} features, got "
                        f"{str(names)[:60]}")
    forest = numeric_forest(node_offset, leaf_offset, num_features, trees_per_iteration=outputs, drop_tiny=False,
                            float32=True, feature_names=None if names is None else [str(n) for n in names],
                            parallel_trees=parallel, missing_value=missing, sparse_missing=True, **arrays)
    return forest, None if weights is not None else Margins(str(objective), base_score, np.concatenate(stored))


def _placed(trees: list) -> list:
    """The trees in the order of their ``id`` (XGBoost puts tree ``id`` at that index; ids repeated or missing
    would leave an index empty)."""
    ids = [_integer(_field(tree, "id", f"tree {t}"), f"tree {t}'s id") for t, tree in enumerate(trees)]
    if sorted(ids) != list(range(len(trees))):
        repeated = sorted(i for i, times in Counter(ids).items() if times > 1)
        outside = sorted(i for i in ids if i >= len(trees))
        raise CEGBError(f"XGBoost model: the trees' ids should be 0..{len(trees) - 1}, each once, got "
                        + (f"{repeated[:5]} repeated" if repeated else f"{outside[:5]}"))
    placed = [None] * len(trees)
    for i, tree in zip(ids, trees):
        placed[i] = tree
    return placed


def _parallel_trees(model: dict, num_trees: int, outputs: int) -> int:
    """XGBoost's ``num_parallel_tree``: trees per output in one round (``gbtree_model_param``; its
    ``iteration_indptr``, the rounds' first trees, agreeing when present)."""
    param = optional(model, "gbtree_model_param", {}, "gbtree model", "XGBoost")
    parallel = _integer(optional(param, "num_parallel_tree", 1, "gbtree_model_param", "XGBoost"),
                        "num_parallel_tree", 1)
    if num_trees % (outputs * parallel):
        raise CEGBError(f"XGBoost model: {num_trees} trees are not whole rounds of num_parallel_tree={parallel} "
                        f"trees for each of {outputs} output(s)")
    indptr = optional(model, "iteration_indptr", None, "gbtree model", "XGBoost")
    if indptr is not None:
        indptr = numbers(indptr, "XGBoost model: iteration_indptr", integer=True)
        expected = np.arange(0, num_trees + 1, outputs * parallel)
        if not np.array_equal(indptr, expected):
            raise CEGBError(f"XGBoost model: iteration_indptr should mark rounds of {outputs * parallel} trees "
                            f"(num_parallel_tree={parallel} x {outputs} output(s)), got {indptr[:6].tolist()}")
    return parallel


def _array(tree: dict, key: str, count: int, where: str, *, integer: bool = False) -> np.ndarray:
    return numbers(_field(tree, key, where), f"XGBoost model: {where}'s {key}", count, integer=integer)


def _tree(tree: dict, t: int, num_features: int) -> dict:
    """One XGBoost tree's split nodes and leaves, renumbered (see tree_arrays.renumber)."""
    where = f"tree {t}"
    param = _field(tree, "tree_param", where)
    count = _integer(_field(param, "num_nodes", f"{where}'s tree_param"), f"{where}'s num_nodes", 1)
    left = _array(tree, "left_children", count, where, integer=True)
    right = _array(tree, "right_children", count, where, integer=True)
    feature = _array(tree, "split_indices", count, where, integer=True)
    condition = _array(tree, "split_conditions", count, where)
    default_left = _array(tree, "default_left", count, where, integer=True)
    if ((default_left != 0) & (default_left != 1)).any():
        raise CEGBError(f"XGBoost model: {where}'s default_left should hold 0 or 1, got "
                        f"{int(default_left[(default_left != 0) & (default_left != 1)][0])}")
    split_type = _array(tree, "split_type", count, where, integer=True) if "split_type" in tree else np.zeros(count)
    is_leaf = left == -1
    if ((right == -1) != is_leaf).any():
        raise CEGBError(f"XGBoost model: {where}: node {int(np.flatnonzero((right == -1) != is_leaf)[0])} has one "
                        "child")
    splits, leaves, new_left, new_right = renumber(left, right, is_leaf, f"XGBoost model: {where}")
    if (split_type[splits] != 0).any():
        raise CEGBError(f"XGBoost model: {where} has a categorical split (node "
                        f"{int(splits[split_type[splits] != 0][0])}): not supported yet; train on numeric codes")
    bad = (feature[splits] < 0) | (feature[splits] >= num_features)
    if bad.any():
        raise CEGBError(f"XGBoost model: {where}: split feature {int(feature[splits][bad][0])} outside "
                        f"0..{num_features - 1}")
    # x < c in float32  <=>  x <= the float32 just below c (x a float32; c finite: _array refuses NaN and inf)
    threshold = np.nextafter(condition[splits].astype(np.float32), np.float32(-np.inf)).astype(np.float64)
    weights = _array(tree, "base_weights", count, where) if "base_weights" in tree else np.zeros(count)
    hessian = _array(tree, "sum_hessian", count, where) if "sum_hessian" in tree else np.zeros(count)
    gain = _array(tree, "loss_changes", count, where) if "loss_changes" in tree else np.zeros(count)
    return {"feature": feature[splits], "threshold": threshold,
            "decision": (MISSING_TYPE_NAN << 2) | ((default_left[splits] != 0).astype(np.int64) << 1),
            "left": new_left, "right": new_right, "leaf_value": condition[leaves].astype(np.float32).astype(np.float64),
            "internal_value": weights[splits], "internal_weight": hessian[splits], "leaf_weight": hessian[leaves],
            "split_gain": gain[splits]}



def _fingerprint(model) -> tuple:
    """The model's booster and a digest of what it saves (``load_model`` of another model of as many rounds, or
    ``set_param`` of its ``base_score``, changes nothing else a Booster shows), and an estimator's ``missing`` (the
    forest reads it)."""
    if not hasattr(model, "get_booster"):  # a Booster: the cache's weak key is the object itself
        return (None, _saved_digest(model))
    booster = model.get_booster() if model.__sklearn_is_fitted__() else None
    return (booster, booster and _saved_digest(booster), repr(model.missing))


def _saved_digest(booster) -> str:
    return hashlib.sha256(bytes(booster.save_raw(raw_format="ubj"))).hexdigest()


def _load(path: Path):
    xgboost = import_library("xgboost", path)
    try:
        return xgboost.Booster(model_file=str(path))
    except xgboost.core.XGBoostError as exc:
        raise CEGBError(f"model file {str(path)!r}: XGBoost cannot read it: {str(exc).splitlines()[0]}") from None


READER = ModelReader(name="xgboost", title="XGBoost", recognises=lambda model: from_library(model, "xgboost"),
                     fingerprint=_fingerprint, read=read_model,
                     file_formats=(FileFormat(json_key="learner", read=read_json, load=_load),
                                   # UBJSON: a map whose first key's length is typed
                                   FileFormat(heads=(b"{L", b"{U", b"{i", b"{$", b"{#"), load=_load)))
