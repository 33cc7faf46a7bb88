"""Query-aware ranking metrics of the papers: NDCG@k, precision@k, and the "Average Precision@5" that
BudgetRF (F. Nan, J. Wang and V. Saligrama, "Feature-budgeted random forest", ICML 2015), BudgetPrune (F. Nan,
J. Wang and V. Saligrama, "Pruning random forests for prediction on a budget", NIPS 2016) and CEGB (S. Peter,
F. Diego, F. A. Hamprecht and B. Nadler, "Cost efficient gradient boosting", NIPS 2017) report on Yahoo! LTR.

Documents of a query are ranked by decreasing score; ties keep the order the documents are given in.
``group`` holds the sizes of the consecutive queries, as LightGBM's ``Dataset(group=...)``.
"""

from __future__ import annotations

import numpy as np

from lightgbm_cegb.core.errors import CEGBError


def _queries(y, score, group) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y, score, sizes = np.asarray(y, dtype=np.float64), np.asarray(score, dtype=np.float64), np.asarray(group)
    if y.ndim != 1 or score.shape != y.shape:
        raise CEGBError(f"y and score should be 1-d of the same length, got shapes {y.shape} and {score.shape}")
    if sizes.ndim != 1 or sizes.dtype.kind not in "iu" or (sizes < 0).any() or sizes.sum() != len(y):
        raise CEGBError(f"group should hold query sizes summing to the {len(y)} documents, got "
                        f"{sizes.tolist() if sizes.size <= 10 else sizes.size} (sum {sizes.sum()})")
    if not np.isfinite(score).all():
        raise CEGBError("score should be finite")
    return y, score, np.concatenate([[0], np.cumsum(sizes)])


def _ranked(y: np.ndarray, score: np.ndarray, start: int, stop: int) -> np.ndarray:
    """The labels of documents start..stop-1 by decreasing score (ties: given order)."""
    return y[start:stop][np.argsort(-score[start:stop], kind="stable")]


def ndcg_at_k(y, score, group, k: int = 5) -> float:
    """Mean NDCG@k over queries with gain 2^y - 1 and discount log2(rank + 1) (LightGBM's defaults); a query
    without a relevant document scores 1, an empty one is left out.

    Parameters
    ----------
    y : array-like of shape (n_documents,)
        Relevance labels.
    score : array-like of shape (n_documents,)
        The model's scores (finite).
    group : array-like of int
        The sizes of the consecutive queries, summing to ``n_documents``.
    k : int, default=5
        The rank cut-off.

    Returns
    -------
    float
        The mean NDCG@k over the non-empty queries (0.0 without any).

    Raises
    ------
    CEGBError
        When y and score are not 1-d of the same length, group does not hold sizes summing to their length,
        or a score is not finite.
    """
    y, score, starts = _queries(y, score, group)
    discount = 1.0 / np.log2(np.arange(2, k + 2))
    values = []
    for start, stop in zip(starts, starts[1:]):
        if stop == start:
            continue
        gains = 2.0 ** _ranked(y, score, start, stop)[:k] - 1
        ideal = 2.0 ** np.sort(y[start:stop])[::-1][:k] - 1
        best = float(ideal @ discount[:len(ideal)])
        values.append(float(gains @ discount[:len(gains)]) / best if best > 0 else 1.0)
    return float(np.mean(values)) if values else 0.0


def average_precision_at_5(y, score, group) -> float:
    """The papers' "Average Precision@5" (BudgetRF, BudgetPrune, CEGB on Yahoo!): per query, the top 5
    documents' labels (relevant: y > 0) score 1 when all are relevant, else (j - 1) / 5 with j the position of
    the first irrelevant one; the mean over the non-empty queries. A query of fewer than 5 documents is
    judged on those it has.

    Parameters
    ----------
    y : array-like of shape (n_documents,)
        Relevance labels (relevant: y > 0).
    score : array-like of shape (n_documents,)
        The model's scores (finite).
    group : array-like of int
        The sizes of the consecutive queries, summing to ``n_documents``.

    Returns
    -------
    float
        The mean over the non-empty queries (0.0 without any).

    Raises
    ------
    CEGBError
        When y and score are not 1-d of the same length, group does not hold sizes summing to their length,
        or a score is not finite.
    """
    y, score, starts = _queries(y, score, group)
    values = []
    for start, stop in zip(starts, starts[1:]):
        if stop == start:
            continue
        relevant = _ranked(y, score, start, stop)[:5] > 0
        values.append(1.0 if relevant.all() else float(np.argmin(relevant)) / 5)
    return float(np.mean(values)) if values else 0.0


def precision_at_k(y, score, group, k: int = 5) -> float:
    """Mean precision@k over the non-empty queries: the share of relevant documents (y > 0) among the top k (a
    query of fewer than k documents: among those it has).

    Parameters
    ----------
    y : array-like of shape (n_documents,)
        Relevance labels (relevant: y > 0).
    score : array-like of shape (n_documents,)
        The model's scores (finite).
    group : array-like of int
        The sizes of the consecutive queries, summing to ``n_documents``.
    k : int, default=5
        The rank cut-off.

    Returns
    -------
    float
        The mean precision@k over the non-empty queries (0.0 without any).

    Raises
    ------
    CEGBError
        When y and score are not 1-d of the same length, group does not hold sizes summing to their length,
        or a score is not finite.
    """
    y, score, starts = _queries(y, score, group)
    values = [float(np.mean(_ranked(y, score, start, stop)[:k] > 0)) for start, stop in zip(starts, starts[1:])
              if stop > start]
    return float(np.mean(values)) if values else 0.0
