"""The scale of LightGBM's cegb_tradeoff on given data: the smallest value at which the first tree makes no split."""

from __future__ import annotations

from collections.abc import Mapping

import lightgbm as lgb

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.scales import no_split_scale
from lightgbm_cegb.io.models import has_split


def cegb_tradeoff_scale(params: Mapping, train_set: lgb.Dataset, *, rel_tol: float = 1e-3) -> float:
    """The smallest ``cegb_tradeoff`` at which the first tree LightGBM grows on ``train_set`` with
    ``params`` (and its cegb penalties) has no split: past it no split pays. Found by bisection (geometric,
    to ``rel_tol``) on one-iteration trainings; the scale of CEGB's ``relative_tradeoff``."""
    params = {**params, "verbose": -1}
    params.pop("cegb_tradeoff", None)
    if not any(params.get(k) for k in ("cegb_penalty_feature_lazy", "cegb_penalty_feature_coupled",
                                       "cegb_penalty_split")):
        raise CEGBError("cegb_tradeoff_scale: params set no cegb_penalty_*; there is nothing to trade off")
    return no_split_scale(lambda t: has_split(lgb.train({**params, "cegb_tradeoff": t}, train_set, 1)),
                          "cegb_tradeoff_scale", rel_tol)


