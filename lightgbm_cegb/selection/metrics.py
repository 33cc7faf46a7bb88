"""Quality metrics of a sweep: name -> Metric (what it reads, higher or lower better)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.ranking_metrics import average_precision_at_5, ndcg_at_k, precision_at_k


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
    threshold : bool, default=False
        A metric of labels (binary tasks): ``fn(y, labels, group)`` reads the 0/1 labels ``score > t``, with the
        decision threshold ``t`` chosen for each point on the validation rows (:func:`best_threshold`) and used as
        it is on test rows.
    counts : callable or None, default=None
        A threshold metric of the confusion counts alone: ``counts(tp, fp, fn, tn)`` on arrays of them (one entry
        per threshold), equal to ``fn`` to the bit; :func:`best_threshold` then scores every threshold at once
        (without it, one ``fn`` call per threshold).
    """

    name: str
    fn: Callable
    greater_is_better: bool = True
    threshold: bool = False
    counts: Callable | None = None


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


def _f1(y, labels, _):
    from sklearn.metrics import f1_score
    return float(f1_score(y, labels, zero_division=0.0))


def _balanced_accuracy(y, labels, _):
    from sklearn.metrics import balanced_accuracy_score
    return float(balanced_accuracy_score(y, labels))


def _f1_counts(tp, fp, fn, tn):
    """scikit-learn's F1 (``zero_division=0``) from the counts: ``2 tp / ((tp + fn) + (tp + fp))``."""
    denominator = (tp + fn) + (tp + fp)
    return np.where(denominator > 0, 2.0 * tp / np.maximum(denominator, 1), 0.0)


def _balanced_accuracy_counts(tp, fp, fn, tn):
    """scikit-learn's balanced accuracy from the counts: the mean recall of the classes present in y."""
    negatives, positives = tn + fp, tp + fn  # the same for every threshold
    recalls = [r for r, present in ((tn / np.maximum(negatives, 1), negatives[0] > 0),
                                    (tp / np.maximum(positives, 1), positives[0] > 0)) if present]
    return np.mean(recalls, axis=0)


#: A threshold metric tries every distinct score as the decision threshold up to this many distinct scores; beyond,
#: this many quantiles of the scores (and 0.5)
THRESHOLD_CANDIDATES = 512


def best_threshold(metric: Metric, y, scores, group=None) -> tuple[float, float]:
    """The decision threshold of a threshold metric on rows (y, scores): (t, the metric of ``scores > t``) for the
    best t among the distinct scores (every one, up to THRESHOLD_CANDIDATES; beyond, that many quantiles) and 0.5,
    below every score (all positive) included; ties: the t nearest 0.5.

    Parameters
    ----------
    metric : Metric
        A metric with ``threshold=True``.
    y : ndarray of shape (n,)
        The 0/1 labels.
    scores : ndarray of shape (n,)
        The positive class's scores.
    group : ndarray or None, default=None
        Passed to the metric.

    Returns
    -------
    threshold : float
        The decision threshold: a row is positive when its score is above it.
    quality : float
        The metric at that threshold.
    """
    scores = np.asarray(scores, dtype=np.float64)
    distinct = np.unique(scores)
    if len(distinct) > THRESHOLD_CANDIDATES:
        distinct = np.unique(np.quantile(scores, np.linspace(0, 1, THRESHOLD_CANDIDATES)))
    below = np.nextafter(distinct[0], -np.inf) if len(distinct) else 0.0
    candidates = np.unique(np.concatenate([[below, 0.5], distinct]))
    sign = 1.0 if metric.greater_is_better else -1.0
    if metric.counts is not None and len(scores):
        return _best_of_counts(metric, np.asarray(y), scores, candidates, sign)
    best = None
    for t in candidates:
        quality = metric.fn(y, (scores > t).astype(int), group)
        key = (sign * quality, -abs(t - 0.5))
        if best is None or key > best[0]:
            best = (key, float(t), quality)
    return best[1], best[2]


def _best_of_counts(metric: Metric, y: np.ndarray, scores: np.ndarray, candidates: np.ndarray,
                    sign: float) -> tuple[float, float]:
    """``best_threshold`` of a metric of the confusion counts: every candidate threshold at once (the rows sorted by
    score once), the same choice as the loop over them."""
    order = np.argsort(scores, kind="stable")
    positive = (y[order] == 1).astype(np.int64)
    at_or_below = np.searchsorted(scores[order], candidates, side="right")  # rows with score <= t: negative
    positives_below = np.concatenate([[0], np.cumsum(positive)])[at_or_below]
    total_positive = int(positive.sum())
    tp = total_positive - positives_below
    fp = (len(y) - at_or_below) - tp
    fn = total_positive - tp
    tn = at_or_below - positives_below
    quality = np.asarray(metric.counts(tp, fp, fn, tn), dtype=np.float64)
    index = np.lexsort((-np.arange(len(candidates)), -np.abs(candidates - 0.5), sign * quality))[-1]
    return float(candidates[index]), float(quality[index])


def thresholded(metric: Metric, y, scores, group, threshold: float) -> float:
    """A threshold metric at ``threshold`` (a row is positive when its score is above it)."""
    return metric.fn(y, (np.asarray(scores) > threshold).astype(int), group)


def validation_quality(metric: Metric, y, prediction, group=None) -> float:
    """The metric of a prediction on validation rows: a threshold metric's at the best threshold there."""
    return best_threshold(metric, y, prediction, group)[1] if metric.threshold else metric.fn(y, prediction, group)


def _logloss(y, p, _):
    from sklearn.metrics import log_loss
    return float(log_loss(y, p, labels=np.arange(p.shape[1]) if p.ndim == 2 else [0, 1]))


METRICS = {
    "accuracy": Metric("accuracy", _accuracy),
    "auc": Metric("auc", _auc),
    "logloss": Metric("logloss", _logloss, greater_is_better=False),
    "rmse": Metric("rmse", _rmse, greater_is_better=False),
    "ap@5": Metric("ap@5", average_precision_at_5),
    "f1": Metric("f1", _f1, threshold=True, counts=_f1_counts),
    "balanced_accuracy": Metric("balanced_accuracy", _balanced_accuracy, threshold=True,
                                counts=_balanced_accuracy_counts),
}
DEFAULT_METRIC = {"binary": "accuracy", "multiclass": "accuracy", "regression": "rmse", "ranking": "ndcg@5"}


#: The metrics that score the documents of each query (task "ranking" only).
RANKING_PREFIXES = ("ndcg@", "p@", "ap@")


def get_metric(metric: str | Metric | None, task: str) -> Metric:
    """``metric`` by name, a Metric, or the task's default.

    Parameters
    ----------
    metric : str, Metric or None
        A name (``accuracy``, ``auc``, ``logloss``, ``rmse``, ``ap@5``, ``ndcg@K``, ``p@K``; binary: ``f1`` and
        ``balanced_accuracy``, threshold metrics whose decision threshold each point chooses on the validation rows),
        a Metric (returned as it is), or None for the task's default (accuracy; rmse for regression; ndcg@5 for
        ranking).
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
    if found.threshold and task != "binary":
        raise CEGBError(f"metric {found.name!r} reads labels decided by a threshold on a binary score: it needs "
                        f"task='binary', got task={task!r}")
    if task in ("binary", "multiclass", "regression") and found.name.startswith(RANKING_PREFIXES):
        raise CEGBError(f"metric {found.name!r} ranks the documents of each query: it needs task='ranking' (with "
                        f"the query sizes), got task={task!r}")
    return found


