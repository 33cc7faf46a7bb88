"""CatBoost with its feature penalties: the protocol's peer of CEGB (needs the extra ``catboost``; not among
:func:`fit_within_budget`'s defaults).

Knob: ``catboost``: ``penalties_coefficient`` of CatBoost (CPU) with the lazy costs as its
``per_object_feature_penalties`` and the coupled ones as its ``first_feature_use_penalties`` (a group's own costs
spread over its members; CatBoost has no groups), early stopped on the validation rows; ``depth``,
``learning_rate``, ``l2_leaf_reg`` pass through.
"""

from __future__ import annotations

import numpy as np

from lightgbm_cegb.core.errors import CEGBError, NothingToTradeOff
from lightgbm_cegb.core.validation import check_number
from lightgbm_cegb.selection.points import (
    check_capped,
    check_keys,
    prefixes,
)
from lightgbm_cegb.selection.registry import Candidate, Context, Family, Knob

#: this module's methods, registered by the package (``lightgbm_cegb.selection``)
FAMILY = Family()


#: ``penalties_coefficient`` values of CatBoost's default grid: its penalties are in the units of its split scores,
#: which differ from data set to data set (on HIGGS the model reads every feature below 1e-5 and one feature from
#: 3e-3), so the grid spans five decades
CATBOOST_COEFFICIENTS = (1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1)


def _catboost_prepare(context: Context) -> dict:
    """CatBoost's penalties per feature: {"lazy": per_object_feature_penalties, "coupled":
    first_feature_use_penalties} (a group's own costs spread over its members: CatBoost has no groups).
    NothingToTradeOff without lazy or coupled costs; a CEGBError without CatBoost."""
    try:
        import catboost  # noqa: F401 (the method's optional dependency)
    except ImportError:
        raise CEGBError("catboost: this method trains CatBoost models: pip install lightgbm-cegb[catboost]") from None
    num_features = np.shape(context.train.X)[1]
    lazy, coupled, _ = context.costs.arrays(num_features)
    group_of, group_lazy, group_coupled = context.costs.group_arrays(num_features)
    members = np.bincount(group_of[group_of >= 0], minlength=len(group_lazy))
    spread = {}
    for name, own, group in (("lazy", lazy, group_lazy), ("coupled", coupled, group_coupled)):
        share = np.where(group_of >= 0, np.asarray(group, dtype=np.float64)[np.maximum(group_of, 0)]
                         / np.maximum(members[np.maximum(group_of, 0)], 1), 0.0) if len(group) else 0.0
        spread[name] = {int(f): float(v) for f, v in enumerate(own + share) if v > 0}
    if not spread["lazy"] and not spread["coupled"]:
        raise NothingToTradeOff("no feature or group has a lazy or coupled cost: CatBoost's penalties have nothing "
                                "to weigh")
    return spread


@FAMILY.method("catboost", prepare=_catboost_prepare, tasks=("binary", "multiclass", "regression"),
          grid=lambda context: [{"penalties_coefficient": c} for c in CATBOOST_COEFFICIENTS],
          knob=Knob("penalties_coefficient", log=True, cheap_end=CATBOOST_COEFFICIENTS[-1]))
def _fit_catboost(context: Context, penalties: dict, params: dict) -> list[Candidate]:
    import catboost
    params = dict(params)
    check_keys("catboost", params, {"penalties_coefficient", "depth", "learning_rate", "l2_leaf_reg"})
    coefficient = params.get("penalties_coefficient", 1.0)
    check_number(coefficient, "catboost: penalties_coefficient", 0.0)
    kind, loss, output = {"binary": (catboost.CatBoostClassifier, "Logloss", "positive"),
                          "multiclass": (catboost.CatBoostClassifier, "MultiClass", "proba"),
                          "regression": (catboost.CatBoostRegressor, "RMSE", "predict")}[context.task]
    extra = {k: params[k] for k in ("depth", "learning_rate", "l2_leaf_reg") if k in params}
    model = kind(iterations=context.num_boost_round, early_stopping_rounds=context.early_stopping_rounds,
                 loss_function=loss, per_object_feature_penalties=penalties["lazy"] or None,
                 first_feature_use_penalties=penalties["coupled"] or None, penalties_coefficient=coefficient,
                 random_seed=0, thread_count=context.params.get("num_threads") or -1, verbose=0,
                 allow_writing_files=False, **extra)
    model.fit(context.train.X, context.train.y, eval_set=(context.valid.X, context.valid.y), use_best_model=True)
    return check_capped("catboost", context, model.tree_count_, prefixes(context, "catboost", params, model, output))
