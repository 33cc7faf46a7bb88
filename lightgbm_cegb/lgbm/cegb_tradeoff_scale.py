"""The scale of LightGBM's cegb_tradeoff on given data: the smallest value at which the first iteration makes no
split that costs something."""

from __future__ import annotations

from collections.abc import Mapping

import lightgbm as lgb
import numpy as np

from lightgbm_cegb.core.costs import FeatureCosts
from lightgbm_cegb.core.errors import NothingToTradeOff
from lightgbm_cegb.core.tradeoff_scales import no_split_scale
from lightgbm_cegb.io.models import to_forest

#: The penalties cegb_tradeoff weighs: stock LightGBM's three and patch 0005's per-feature split and group ones.
PENALTIES = ("cegb_penalty_feature_lazy", "cegb_penalty_feature_coupled", "cegb_penalty_split",
             "cegb_penalty_feature_split", "cegb_penalty_group_lazy", "cegb_penalty_group_coupled")


def _is_set(value) -> bool:
    """A penalty given with some value (a nonzero number, or a non-empty list or string of values)."""
    if value is None:
        return False
    if isinstance(value, str):
        return value.strip() != ""
    return bool(np.size(value)) and bool(np.any(np.asarray(value, dtype=object) != 0))


def cegb_tradeoff_scale(params: Mapping, train_set: lgb.Dataset, *, rel_tol: float = 1e-3) -> float:
    """The smallest ``cegb_tradeoff`` at which the first iteration LightGBM grows on ``train_set`` makes no split
    that costs something.

    With ``params`` (and their cegb penalties), past this value no costly split pays. A split costs something
    when its feature has a penalty (lazy, coupled or split, its own or its group's): splits on free features go
    on at any trade-off and are not counted (with every feature penalised: the first tree has no split). Found
    by bisection (geometric, to ``rel_tol``) on one-iteration trainings; the scale of CEGB's
    ``relative_tradeoff``.

    Parameters
    ----------
    params : mapping
        LightGBM's training parameters, with at least one of the ``cegb_penalty_*`` of :data:`PENALTIES`
        (feature, split or group penalties). A ``cegb_tradeoff`` among them is ignored.
    train_set : lightgbm.Dataset
        The training data.
    rel_tol : float, default=1e-3
        Relative tolerance of the bisection: the value returned is within a factor ``1 + rel_tol`` above the
        exact scale.

    Returns
    -------
    float
        The smallest ``cegb_tradeoff`` (to ``rel_tol``) at which the first iteration makes no costly split.

    Raises
    ------
    NothingToTradeOff
        If ``params`` set no ``cegb_penalty_*``, or every penalty is 0, or the first iteration makes no split even
        at trade-off 0 (too few rows, a constant target) (a CEGBError).
    """
    params = {**params, "verbose": -1}
    params.pop("cegb_tradeoff", None)
    costs = FeatureCosts.from_params(params) if any(_is_set(params.get(k)) for k in PENALTIES) else None
    first = None if costs is None else lgb.train({**params, "cegb_tradeoff": 0.0}, train_set, 1)
    penalised = None if first is None else costs.penalised(first.num_feature())
    if penalised is None or not penalised.any():  # (a group penalty of a group without members weighs nothing)
        raise NothingToTradeOff(f"cegb_tradeoff_scale: params set none of {', '.join(PENALTIES)} (to a nonzero "
                                "value of a feature); there is nothing to trade off")

    def splits(tradeoff: float) -> bool:
        booster = first if tradeoff == 0.0 else lgb.train({**params, "cegb_tradeoff": tradeoff}, train_set, 1)
        return bool(penalised[first_iteration_features(booster)].any())

    return no_split_scale(splits, "cegb_tradeoff_scale", rel_tol)


def first_iteration_features(model) -> np.ndarray:
    """The features of the split nodes of a model's first iteration (its first ``trees_per_iteration`` trees)."""
    forest = to_forest(model)
    return forest.feature[:forest.node_offset[min(forest.trees_per_iteration, forest.num_trees)]]
