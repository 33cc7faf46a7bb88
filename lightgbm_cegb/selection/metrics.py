"""Quality metrics of a sweep: name -> Metric (what it reads, higher or lower better)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.metrics import average_precision_at_5, ndcg_at_k, precision_at_k


# ---------------------------------------------------------------------------------------------- metrics
@dataclass(frozen=True)
class Metric:
    """A quality measure of predictions.

    The package's metrics are module-level functions (or partials of them), so that a Metric, and a sweep's frame
    holding one, pickles.

    Parameters
    ----------
    name : str
        The metric's name (a sweep's ``frame.attrs["metric"]``).
    fn : callable
        ``fn(y, prediction, group) -> float`` (``group``: the query sizes, None without queries).
    greater_is_better : bool, default=True
        Whether a higher value is better.
    """

    name: str
    fn: Callable
    greater_is_better: bool = True


def _labels(prediction: np.ndarray) -> np.ndarray:
    return np.argmax(prediction, axis=1) if prediction.ndim == 2 else (prediction > 0.5).astype(int)


def _accuracy(y, p, _):
    return float(np.mean(_labels(p) == y))


def _rmse(y, p, _):
    return float(np.sqrt(np.mean((np.asarray(p) - y) ** 2)))


def _at_k(fn: Callable, k: int, y, p, group):
    return fn(y, p, group, k=k)


def _auc(y, p, _):
    from sklearn.metrics import roc_auc_score
    return float(roc_auc_score(y, p))


def _logloss(y, p, _):
    from sklearn.metrics import log_loss
    return float(log_loss(y, p, labels=np.arange(p.shape[1]) if p.ndim == 2 else [0, 1]))


METRICS = {
    "accuracy": Metric("accuracy", _accuracy),
    "auc": Metric("auc", _auc),
    "logloss": Metric("logloss", _logloss, greater_is_better=False),
    "rmse": Metric("rmse", _rmse, greater_is_better=False),
    "ap@5": Metric("ap@5", average_precision_at_5),
}
DEFAULT_METRIC = {"binary": "accuracy", "multiclass": "accuracy", "regression": "rmse", "ranking": "ndcg@5"}


#: The metrics that score the documents of each query (task "ranking" only).
RANKING_PREFIXES = ("ndcg@", "p@", "ap@")


def get_metric(metric: str | Metric | None, task: str) -> Metric:
    """``metric`` by name, a Metric, or the task's default.

    Parameters
    ----------
    metric : str, Metric or None
        A name (``accuracy``, ``auc``, ``logloss``, ``rmse``, ``ap@5``, ``ndcg@K``, ``p@K``), a Metric (returned as
        it is), or None for the task's default (accuracy; rmse for regression; ndcg@5 for ranking).
    task : str
        "binary", "multiclass", "regression" or "ranking".

    Returns
    -------
    Metric
        The metric.

    Raises
    ------
    CEGBError
        When ``metric`` names no known metric, or a ranking metric for another task.
    """
    if isinstance(metric, Metric):
        return metric
    name = DEFAULT_METRIC[task] if metric is None else metric
    found = None
    for prefix, fn in (("ndcg@", ndcg_at_k), ("p@", precision_at_k)):
        if isinstance(name, str) and name.startswith(prefix) and name[len(prefix):].isdigit() and \
                int(name[len(prefix):]) > 0:
            found = Metric(name, partial(_at_k, fn, int(name[len(prefix):])))
    if found is None:
        if name not in METRICS:
            raise CEGBError(f"metric should be one of {sorted(METRICS) + ['ndcg@K', 'p@K']} or a Metric, got "
                            f"{metric!r}")
        found = METRICS[name]
    if task in ("binary", "multiclass", "regression") and found.name.startswith(RANKING_PREFIXES):
        raise CEGBError(f"metric {found.name!r} ranks the documents of each query: it needs task='ranking' (with "
                        f"the query sizes), got task={task!r}")
    return found


