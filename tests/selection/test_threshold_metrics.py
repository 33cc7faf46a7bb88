"""Threshold metrics (f1, balanced_accuracy): each point chooses its decision threshold on the validation rows, the
test figures use it; on imbalanced data where 0.5 is far from the best threshold."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import balanced_accuracy_score, f1_score

from lightgbm_cegb import FeatureCosts
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.selection import Selection, get_metric, select, sweep
from lightgbm_cegb.selection.metrics import best_threshold

COSTS = FeatureCosts(lazy=[1.0, 1.0, 5.0, 5.0, 20.0, 20.0])


@pytest.fixture(scope="module")
def imbalanced():
    """About 10% positives, a noisy score: F1's best threshold lies well below 0.5."""
    rng = np.random.default_rng(11)
    n = 4000
    X = rng.normal(size=(n, 6))
    y = ((X[:, 0] + X[:, 2] + rng.normal(0, 1.0, n)) > 2.2).astype(int)
    return (X[:2000], y[:2000]), (X[2000:3000], y[2000:3000]), (X[3000:], y[3000:])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 20)), min_size=1, max_size=40),
       st.sampled_from(["f1", "balanced_accuracy"]))
def test_the_best_threshold_is_the_best_of_every_cut(pairs, name):
    """Against brute force: every cut between distinct scores, below all and above all."""
    y = np.array([p[0] for p in pairs])
    scores = np.array([p[1] for p in pairs], dtype=float) / 20
    metric = get_metric(name, "binary")
    threshold, quality = best_threshold(metric, y, scores)
    assert quality == metric.fn(y, (scores > threshold).astype(int), None)
    cuts = np.concatenate([[-1.0], np.unique(scores)])
    assert quality == max(metric.fn(y, (scores > t).astype(int), None) for t in cuts)
    # the counts' choice is the loop's over the same candidates with scikit-learn's function: ties nearest 0.5
    loop = best_threshold(dataclasses.replace(metric, counts=None), y, scores)
    assert (threshold, quality) == loop
    if len(np.unique(y)) == 1:  # one class only: the counts' rules for an absent class are scikit-learn's
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert metric.counts(*(np.array([v]) for v in (0, 0, int(y.sum()), len(y) - int(y.sum()))))[0] == \
                metric.fn(y, np.zeros_like(y), None)


def test_points_choose_their_threshold_on_validation_and_test_uses_it(imbalanced):
    train, valid, test = imbalanced
    grid = {"cegb": [{"relative_tradeoff": 0.1}], "staged_acquisition": [{"relative_tradeoff": 0.5}]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = sweep(["lightgbm", "cegb", "early_exit", "staged_acquisition"], train, valid, COSTS, task="binary",
                      metric="f1", grid=grid, params={"num_leaves": 8}, num_boost_round=200)
    assert "decision_threshold" in frame.columns and set(frame["method"]) >= {"lightgbm", "cegb", "early_exit",
                                                                    "staged_acquisition", "cheap_subset"}
    for _, row in frame.iterrows():
        candidate = row["model"]
        scores = np.asarray(candidate.predict(valid[0]))
        if row["method"] in ("early_exit", "staged_acquisition"):  # measured from one pass of the method
            continue
        assert row["decision_threshold"] == candidate.decision_threshold
        assert row["quality"] == f1_score(valid[1], scores > row["decision_threshold"], zero_division=0.0)
        assert row["quality"] >= f1_score(valid[1], scores > 0.5, zero_division=0.0)
    best = select(frame, 100.0, test)
    assert best.decision_threshold is not None and abs(best.decision_threshold - 0.5) > 0.1, best.decision_threshold
    scores = np.asarray(best.candidate.predict(test[0]))
    assert best.test_quality == f1_score(test[1], scores > best.decision_threshold, zero_division=0.0)
    valid_scores = np.asarray(best.candidate.predict(valid[0]))
    assert best.valid_quality > f1_score(valid[1], valid_scores > 0.5, zero_division=0.0) + 0.05
    # LightGBM's own best point: its threshold chosen on validation carries to the test rows (on this data)
    plain = select(frame[frame["method"] == "lightgbm"], 100.0, test)
    scores = np.asarray(plain.model.predict(test[0]))
    assert plain.test_quality == f1_score(test[1], scores > plain.decision_threshold, zero_division=0.0)
    assert plain.test_quality > f1_score(test[1], scores > 0.5, zero_division=0.0) + 0.05


def test_a_saved_selection_keeps_its_threshold(imbalanced, tmp_path):
    train, valid, test = imbalanced
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = sweep(["lightgbm"], train, valid, COSTS, task="binary", metric="balanced_accuracy",
                      params={"num_leaves": 8}, num_boost_round=100, baseline=False)
    best = select(frame, 100.0, test)
    labels = best.model.predict(valid[0]) > best.decision_threshold
    assert best.valid_quality == balanced_accuracy_score(valid[1], labels)
    best.save(tmp_path / "choice")
    assert Selection.load(tmp_path / "choice").decision_threshold == best.decision_threshold


def test_a_threshold_metric_needs_a_binary_task():
    with pytest.raises(CEGBError, match="metric 'f1' reads labels decided by a threshold on a binary score: it "
                                        "needs task='binary', got task='multiclass'"):
        get_metric("f1", "multiclass")


def test_the_staged_acquisition_is_swept_with_and_without_class_weights_for_f1(imbalanced):
    """For F1 the staged acquisition's grid has points of unweighted and of balanced stages (two models fitted, the
    validation rows choose), each point read from its own model; for accuracy only the unweighted one."""
    from lightgbm_cegb.selection.metrics import thresholded

    train, valid, _ = imbalanced
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = sweep(["staged_acquisition"], train, valid, COSTS, task="binary", metric="f1", baseline=False,
                      params={"num_leaves": 8}, num_boost_round=200)
        plain = sweep(["staged_acquisition"], train, valid, COSTS, task="binary", metric="accuracy", baseline=False,
                      params={"num_leaves": 8}, num_boost_round=200)
    weights = [p["class_weight"] for p in frame["params"]]
    assert set(weights) == {None, "balanced"} and weights.count(None) == weights.count("balanced")
    # one model per class weight and unit order (the grid has both orders: STAGED_ORDERS)
    settings = [(p["class_weight"], p["order"]) for p in frame["params"]]
    rows = {setting: frame[[s == setting for s in settings]] for setting in set(settings)}
    assert set(rows) == {(weight, order) for weight in (None, "balanced") for order in ("importance", "search")}
    models = {setting: {id(model.model.stages_) for model in rows[setting]["model"]} for setting in rows}
    assert all(len(ids) == 1 for ids in models.values()) and len(set.union(*models.values())) == 4
    for (weight, order), setting_rows in rows.items():
        row = setting_rows.iloc[len(setting_rows) // 2]
        model = row["model"].model
        assert model.class_weight == weight and model.order == order
        proba = model.predict_result(valid[0]).proba[:, 1]
        assert row["quality"] == thresholded(get_metric("f1", "binary"), valid[1], proba, None,
                                             row["decision_threshold"])
    assert all("class_weight" not in p for p in plain["params"]) and \
        {row["model"].model.class_weight for _, row in plain.iterrows()} == {None}
