"""A scikit-learn scorer that weighs quality against the exact prediction cost."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from lightgbm_cegb.accounting import prediction_cost
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.validation import check_number
from lightgbm_cegb.selection.metrics import RANKING_PREFIXES, Metric, get_metric


# ---------------------------------------------------------------------------------------------- scorers
def cost_scorer(costs=None, *, metric: str | Metric = "accuracy", budget: float | None = None,
                penalty: float = 0.0) -> Callable:
    """A scorer for scikit-learn's ``GridSearchCV`` / ``cross_val_score`` (``scorer(estimator, X, y)``).

    The score is the metric's value (negated when lower is better, as scikit-learn maximises) minus ``penalty``
    times the mean prediction cost per row of X, and ``-inf`` when that cost passes ``budget``.

    Parameters
    ----------
    costs : FeatureCosts, lazy costs per column, or a mapping by feature name, optional
        As ``prediction_cost`` takes them (None: the model's own cegb_* parameters).
    metric : str or Metric, default="accuracy"
        The quality measure (:func:`get_metric`); not a ranking metric (``ndcg@K``, ``ap@5``, ``p@K``), which
        needs the queries.
    budget : float or None, default=None
        The largest mean cost per row that scores (None: no budget).
    penalty : float, default=0.0
        The weight of the mean cost per row subtracted from the metric's value.

    Returns
    -------
    callable
        ``scorer(estimator, X, y) -> float``.

    Raises
    ------
    CEGBError
        When the metric is unknown or a ranking metric, or ``penalty`` or ``budget`` is not a finite number >= 0.
    """
    name = metric.name if isinstance(metric, Metric) else metric
    if isinstance(name, str) and name.startswith(RANKING_PREFIXES):
        raise CEGBError(f"cost_scorer: metric {name!r} needs the queries, which a scikit-learn scorer does not "
                        "get; use sweep(..., task='ranking')")
    used = get_metric(metric, "binary")
    check_number(penalty, "penalty", 0.0)
    if budget is not None:  # nan compared False with every cost: the budget was silently ignored
        check_number(budget, "budget", 0.0)

    def score(estimator, X, y) -> float:
        cost = prediction_cost(estimator, X, costs).mean
        if budget is not None and cost > budget:
            return -math.inf
        if used.name in ("accuracy",):
            prediction = estimator.predict(X)
            value = float(np.mean(np.asarray(prediction) == np.asarray(y)))
        elif hasattr(estimator, "predict_proba") and used.name in ("auc", "logloss"):
            proba = estimator.predict_proba(X)
            value = used.fn(np.searchsorted(estimator.classes_, y), proba[:, 1] if proba.shape[1] == 2 else proba, None)
        else:
            value = used.fn(np.asarray(y), estimator.predict(X), None)
        return (value if used.greater_is_better else -value) - penalty * cost
    return score
