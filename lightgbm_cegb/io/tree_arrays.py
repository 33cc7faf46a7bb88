"""One tree given as node arrays (children, features, thresholds) -> the split nodes and leaves of a ``Forest``
tree: what the readers of other libraries' models share.

A library numbers a tree's nodes its own way (XGBoost and scikit-learn's HistGradientBoosting: one array of
split nodes and leaves, children by index; a removed node may stay in the arrays unreached). ``renumber``
walks the tree from its root, depth first with the left child first, and numbers its split nodes and its
leaves in that order (a split node before its children, as ``Forest.parents`` needs); a child index out of
range or a node reached twice is refused, naming the tree and the node.
"""

from __future__ import annotations

import numpy as np

from lightgbm_cegb.core.errors import CEGBError


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
