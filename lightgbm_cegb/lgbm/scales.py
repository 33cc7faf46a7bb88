"""The scale of LightGBM's cegb_tradeoff on given data: the smallest value at which the first tree makes no split."""

from __future__ import annotations

from collections.abc import Mapping

import lightgbm as lgb
import numpy as np

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.scales import no_split_scale
from lightgbm_cegb.io.models import has_split

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
    """The smallest ``cegb_tradeoff`` at which the first tree LightGBM grows on ``train_set`` has no split.

    With ``params`` (and their cegb penalties), past this value no split pays. Found by bisection (geometric,
    to ``rel_tol``) on one-iteration trainings; the scale of CEGB's ``relative_tradeoff``.

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
        The smallest ``cegb_tradeoff`` (to ``rel_tol``) at which the first tree makes no split.

    Raises
    ------
    CEGBError
        If ``params`` set no ``cegb_penalty_*``; if the first tree makes no split even without costs, or every
        trade-off up to 1e30 still splits.
    """
    params = {**params, "verbose": -1}
    params.pop("cegb_tradeoff", None)
    if not any(_is_set(params.get(k)) for k in PENALTIES):
        raise CEGBError(f"cegb_tradeoff_scale: params set none of {', '.join(PENALTIES)}; there is nothing to "
                        "trade off")
    return no_split_scale(lambda t: has_split(lgb.train({**params, "cegb_tradeoff": t}, train_set, 1)),
                          "cegb_tradeoff_scale", rel_tol)


