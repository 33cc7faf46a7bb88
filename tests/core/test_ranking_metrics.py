"""Ranking metrics: NDCG@k against LightGBM's own ndcg@k evaluation, AP@5 on cases worked by hand and
against a direct transcription of its definition."""

from __future__ import annotations

import lightgbm as lgb
import numpy as np
import pytest

from lightgbm_cegb import CEGBError
from lightgbm_cegb.core.ranking_metrics import average_precision_at_5, ndcg_at_k, precision_at_k


@pytest.mark.parametrize("seed", range(4))
def test_ndcg_matches_lightgbm(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 25, 60)
    X = rng.normal(size=(sizes.sum(), 5))
    y = np.clip(np.round(X[:, 0] + rng.normal(0, 1, len(X)) + 1), 0, 4)
    y[:sizes[0]] = 0  # a query without a relevant document
    train = lgb.Dataset(X, y, group=sizes)
    history = {}
    booster = lgb.train({"objective": "lambdarank", "metric": "ndcg", "eval_at": [1, 3, 5], "verbose": -1,
                         "num_leaves": 7}, train, 8, valid_sets=[lgb.Dataset(X, y, group=sizes, reference=train)],
                        valid_names=["valid"], callbacks=[lgb.record_evaluation(history)])
    score = booster.predict(X)  # piecewise constant: ties within queries, kept in the given order by both
    for k in (1, 3, 5):
        assert ndcg_at_k(y, score, sizes, k) == pytest.approx(history["valid"][f"ndcg@{k}"][-1], rel=1e-12)


def reference_ap5(y, score, sizes):
    values, start = [], 0
    for size in sizes:
        if size:
            order = sorted(range(start, start + size), key=lambda i: (-score[i], i))[:5]
            labels = [y[i] > 0 for i in order]
            values.append(1.0 if all(labels) else (labels.index(False)) / 5)
        start += size
    return float(np.mean(values))


def test_average_precision_at_5():
    assert average_precision_at_5([1, 1, 0, 1, 1, 1], [6, 5, 4, 3, 2, 1], [6]) == pytest.approx(0.4)
    assert average_precision_at_5([2, 1, 3, 1, 1, 0], [6, 5, 4, 3, 2, 1], [6]) == 1.0
    assert average_precision_at_5([0, 1], [1, 0], [2]) == 0.0
    assert average_precision_at_5([1, 1], [0, 1], [2]) == 1.0  # fewer than 5 documents, all relevant
    assert average_precision_at_5([1, 0, 1, 1], [1, 1, 2, 0], [1, 3]) == pytest.approx((1.0 + 0.2) / 2)
    rng = np.random.default_rng(0)
    sizes = rng.integers(0, 12, 80)
    y = rng.integers(0, 3, sizes.sum())
    score = rng.integers(0, 4, sizes.sum()).astype(float)  # many ties
    assert average_precision_at_5(y, score, sizes) == pytest.approx(reference_ap5(y, score, sizes), rel=1e-12)


def test_precision_at_k():
    assert precision_at_k([1, 1, 0, 1, 1, 1], [6, 5, 4, 3, 2, 1], [6]) == pytest.approx(0.8)
    assert precision_at_k([0, 1, 0], [3, 2, 1], [3], k=1) == 0.0
    assert precision_at_k([1, 0], [0, 1], [2]) == 0.5  # fewer than k documents: among those
    assert precision_at_k([1, 0, 2, 0], [1, 1, 0, 5], [0, 1, 3], k=2) == pytest.approx((1.0 + 0.0) / 2)
    rng = np.random.default_rng(1)
    sizes = rng.integers(0, 12, 80)
    y = rng.integers(0, 3, sizes.sum())
    score = rng.integers(0, 4, sizes.sum()).astype(float)  # ties keep the given order
    starts = np.concatenate([[0], np.cumsum(sizes)])
    expected = [np.mean([y[start + j] > 0 for j in sorted(range(stop - start), key=lambda j: -score[start + j])[:3]])
                for start, stop in zip(starts, starts[1:]) if stop > start]
    assert precision_at_k(y, score, sizes, k=3) == pytest.approx(np.mean(expected), rel=1e-12)


@pytest.mark.parametrize(("args", "message"), [
    (([1, 0], [1.0, 0.0], [3]), r"group should hold query sizes summing to the 2 documents, got \[3\]"),
    (([1, 0], [1.0], [2]), "y and score should be 1-d of the same length"),
    (([1, 0], [1.0, np.nan], [2]), "score should be finite"),
])
def test_bad_input(args, message):
    with pytest.raises(CEGBError, match=message):
        ndcg_at_k(*args)
    with pytest.raises(CEGBError, match=message):
        average_precision_at_5(*args)
    with pytest.raises(CEGBError, match=message):
        precision_at_k(*args)
