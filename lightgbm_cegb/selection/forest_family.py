"""BudgetRF in a sweep.

Knob: ``budgetrf``: ``tradeoff`` (the paper's alpha) of ``BudgetRFClassifier`` (classification; ranking on
label >= 1).
"""

from __future__ import annotations

from lightgbm_cegb.selection.points import (
    PREFIX_TREES,
    dense,
    prefixes,
)
from lightgbm_cegb.selection.registry import Candidate, Context, Family, Knob

#: this module's methods, registered by the package (``lightgbm_cegb.selection``)
FAMILY = Family()


@FAMILY.method("budgetrf", tasks=("binary", "multiclass", "ranking"),
          grid=lambda context: [{"tradeoff": a} for a in (0.0, 2.0, 8.0)], knob=Knob("tradeoff", log=True))
def _fit_budgetrf(context: Context, state, params: dict) -> list[Candidate]:
    from lightgbm_cegb.methods.budgetrf import BudgetRFClassifier
    params = dict(params)
    trees = params.pop("trees", PREFIX_TREES)
    params.setdefault("n_estimators", 30)
    params.setdefault("random_state", 0)
    labels = (context.train.y >= 1).astype(int) if context.task == "ranking" else context.train.y
    forest = BudgetRFClassifier(feature_costs=context.costs, **params).fit(dense(context.train.X), labels)
    return prefixes(context, "budgetrf", params, forest, "ranking" if context.task == "ranking" else "staged", trees)
