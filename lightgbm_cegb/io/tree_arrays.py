"""What the readers of other libraries' models share: one tree given as node arrays (children, features,
thresholds) -> the split nodes and leaves of a ``Forest`` tree (``renumber``), a forest of numeric splits
(``numeric_forest``), and a JSON model's fields read with messages naming the library (``parsed``, ``field``).

A library numbers a tree's nodes its own way (XGBoost and scikit-learn's HistGradientBoosting: one array of
split nodes and leaves, children by index; a removed node may stay in the arrays unreached). ``renumber``
walks the tree from its root, depth first with the left child first, and numbers its split nodes and its
leaves in that order (a split node before its children, as ``Forest.parents`` needs); a child index out of
range or a node reached twice is refused, naming the tree and the node.
"""

from __future__ import annotations

import json

import numpy as np

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.forest import Forest

_ABSENT = object()  # a field a JSON object does not have


def parsed(text, library: str):
    """A JSON model's parsed value (``text``: str, bytes, or the parsed value already).

    Parameters
    ----------
    text : str, bytes or object
        The JSON text, or its parsed value.
    library : str
        The library, for the message ("XGBoost", "CatBoost").

    Returns
    -------
    object
        The parsed value.

    Raises
    ------
    CEGBError
        When the text is not JSON.
    """
    if not isinstance(text, (str, bytes)):
        return text
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CEGBError(f"{library} model: not JSON ({exc})") from None


def field(mapping, key: str, where: str, library: str):
    """``mapping[key]``, or a CEGBError naming the library, the place and the missing field.

    Parameters
    ----------
    mapping : object
        A parsed JSON object (anything else has no field).
    key : str
        The field.
    where : str
        The place of ``mapping`` in the model, for the message.
    library : str
        The library, for the message.

    Returns
    -------
    object
        The field's value.

    Raises
    ------
    CEGBError
        When ``mapping`` is not a JSON object or has no field ``key``.
    """
    value = optional(mapping, key, _ABSENT, where, library)
    if value is _ABSENT:
        raise CEGBError(f"{library} model: {where} has no field {key!r}")
    return value


def optional(mapping, key: str, default, where: str, library: str):
    """``mapping[key]`` or ``default`` when absent; a CEGBError when ``mapping`` is not a JSON object.

    Parameters
    ----------
    mapping : object
        A parsed JSON object.
    key : str
        The field.
    default : object
        Its value when absent.
    where : str
        The place of ``mapping`` in the model, for the message.
    library : str
        The library, for the message.

    Returns
    -------
    object
        The field's value, or ``default``.

    Raises
    ------
    CEGBError
        When ``mapping`` is not a JSON object.
    """
    if not isinstance(mapping, dict):
        raise CEGBError(f"{library} model: {where} should be a JSON object, got {type(mapping).__name__}")
    return mapping.get(key, default)


def listed(value, where: str) -> list:
    """``value`` when it is a JSON list, else a CEGBError naming ``where``.

    Parameters
    ----------
    value : object
        A parsed JSON value.
    where : str
        The field, for the message (with the library).

    Returns
    -------
    list
        The value.

    Raises
    ------
    CEGBError
        When ``value`` is not a list.
    """
    if not isinstance(value, list):
        raise CEGBError(f"{where} should be a list, got {type(value).__name__}")
    return value


def whole(value, where: str, low: int = 0) -> int:
    """A JSON integer (or a string of one: XGBoost writes its parameters so) >= ``low``, else a CEGBError.

    Parameters
    ----------
    value : object
        A parsed JSON value.
    where : str
        The field, for the message (with the library).
    low : int, default=0
        The smallest value allowed.

    Returns
    -------
    int
        The value.

    Raises
    ------
    CEGBError
        When ``value`` is not a whole number >= ``low``.
    """
    try:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        raise CEGBError(f"{where} should be an integer, got {value!r:.60}") from None
    if number < low:
        raise CEGBError(f"{where} should be >= {low}, got {number}")
    return number


def numbers(values, where: str, count: int | None = None, *, integer: bool = False) -> np.ndarray:
    """A JSON list of finite numbers as float64 (``integer``: whole numbers, as int64), or a CEGBError naming
    ``where``.

    Parameters
    ----------
    values : object
        The parsed JSON value.
    where : str
        The field, for the message (e.g. ``"XGBoost model: tree 3's left_children"``).
    count : int or None, default=None
        The length it should have (None: any).
    integer : bool, default=False
        Whole numbers within int64's exact range only.

    Returns
    -------
    ndarray of float64 or int64
        The values.

    Raises
    ------
    CEGBError
        When the value is not a list of finite numbers (of ``count``; whole with ``integer``): strings and
        booleans are not numbers here (the libraries refuse them).
    """
    if not isinstance(values, (list, np.ndarray)) or any(
            isinstance(v, bool) or not isinstance(v, (int, float, np.number)) for v in values):
        raise CEGBError(f"{where} should be a list of numbers (not strings or booleans), got {str(values)[:60]}")
    try:
        out = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise CEGBError(f"{where} should hold numbers, got {str(values)[:60]}") from None
    if out.ndim != 1 or (count is not None and len(out) != count):
        raise CEGBError(f"{where} should hold {'a list of' if count is None else count} numbers, got shape "
                        f"{out.shape}")
    if not np.isfinite(out).all():
        raise CEGBError(f"{where} should hold finite numbers")
    if integer:
        if (out != np.trunc(out)).any() or (np.abs(out) > 2**53).any():
            raise CEGBError(f"{where} should hold whole numbers")
        return out.astype(np.int64)
    return out


def numeric_forest(node_offset, leaf_offset, num_features: int, **arrays) -> Forest:
    """A Forest without categorical splits (``arrays``: its other arguments).

    Parameters
    ----------
    node_offset, leaf_offset : array-like of int
        As for Forest.
    num_features : int
        The model's number of features.
    **arrays : dict
        Forest's other arguments (feature, threshold, decision, left, right, leaf_value, reading mode, ...).

    Returns
    -------
    Forest
        The forest (checked by its constructor).
    """
    num_trees = len(node_offset) - 1
    return Forest(node_offset=np.asarray(node_offset), leaf_offset=np.asarray(leaf_offset),
                  cat_offset=np.zeros(num_trees + 1, dtype=np.int64), cat_boundaries=np.zeros(0, dtype=np.int64),
                  cat_threshold=np.zeros(0, dtype=np.uint32), num_features=num_features, **arrays)


def renumber(left: np.ndarray, right: np.ndarray, is_leaf: np.ndarray, where: str) -> tuple[np.ndarray, np.ndarray,
                                                                                            np.ndarray, np.ndarray]:
    """The reachable nodes of one tree, from its root (node 0), renumbered.

    Parameters
    ----------
    left, right : ndarray of int
        Each node's children (read at split nodes only).
    is_leaf : ndarray of bool
        Which nodes are leaves.
    where : str
        The tree, for messages (e.g. ``"XGBoost model: tree 3"``).

    Returns
    -------
    splits : ndarray of int64
        The library's index of each split node, in the new order.
    leaves : ndarray of int64
        The library's index of each leaf, in the new order.
    new_left, new_right : ndarray of int32
        Each split node's children in the Forest's numbering (``c >= 0`` a split node, ``c < 0`` the leaf ``~c``).

    Raises
    ------
    CEGBError
        When a child is out of range, a node is reached twice (not a tree), or the tree has no node.
    """
    count = len(is_leaf)
    if count == 0:
        raise CEGBError(f"{where} has no node")
    seen = np.zeros(count, dtype=bool)
    new_id = np.zeros(count, dtype=np.int64)
    splits, leaves, stack = [], [], [0]
    while stack:
        node = stack.pop()
        if seen[node]:
            raise CEGBError(f"{where} is not a tree: node {node} is reached twice")
        seen[node] = True
        if is_leaf[node]:
            new_id[node] = ~len(leaves)
            leaves.append(node)
            continue
        new_id[node] = len(splits)
        splits.append(node)
        for child in (int(right[node]), int(left[node])):  # popped left first
            if not 0 <= child < count:
                raise CEGBError(f"{where}: child {child} of node {node} is outside its {count} nodes")
            stack.append(child)
    splits_arr, leaves_arr = np.asarray(splits, dtype=np.int64), np.asarray(leaves, dtype=np.int64)
    return (splits_arr, leaves_arr, new_id[np.asarray(left)[splits_arr]].astype(np.int32),
            new_id[np.asarray(right)[splits_arr]].astype(np.int32))
