"""prediction_cost against an independent reference: rows routed through the model's JSON dump in Python."""

from __future__ import annotations

import lightgbm as lgb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightgbm_cegb import CEGBError, prediction_cost


def reference_costs(booster: lgb.Booster, X: np.ndarray, lazy: np.ndarray, split_cost: float):
    """Walk every row down every tree of the dump (numeric splits, no missing values)."""
    acquisition = np.zeros(len(X))
    evaluation = np.zeros(len(X))
    usage = np.zeros(len(lazy))
    trees = booster.dump_model()["tree_info"]
    leaves = np.zeros((len(X), len(trees)), dtype=np.int64)
    for i, row in enumerate(X):
        used = set()
        for t, tree in enumerate(trees):
            node = tree["tree_structure"]
            while "split_index" in node:
                assert node["decision_type"] == "<="
                used.add(node["split_feature"])
                evaluation[i] += split_cost
                go_left = row[node["split_feature"]] <= node["threshold"]
                node = node["left_child"] if go_left else node["right_child"]
            leaves[i, t] = node.get("leaf_index", 0)
        acquisition[i] = sum(lazy[f] for f in used)
        usage[list(used)] += 1 / len(X)
    return acquisition, evaluation, usage, leaves


def fit(seed: int, n_features: int, num_leaves: int, rounds: int, num_class: int = 1, min_data: int = 5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(400, n_features))
    y = X[:, 0] + X[:, -1] ** 2 + rng.normal(0, 0.3, 400)
    if num_class > 1:
        params = {"objective": "multiclass", "num_class": num_class}
        y = np.digitize(y, np.quantile(y, np.linspace(0, 1, num_class + 1)[1:-1]))
    else:
        params = {"objective": "regression"}
    params.update(num_leaves=num_leaves, min_data_in_leaf=min_data, verbose=-1, seed=seed)
    return lgb.train(params, lgb.Dataset(X, y), rounds), X, rng


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n_features=st.integers(1, 12), num_leaves=st.integers(2, 40),
       rounds=st.integers(1, 15), num_class=st.sampled_from([1, 3]),
       split_cost=st.sampled_from([0.0, 0.25, 1.0]))
def test_matches_reference(seed, n_features, num_leaves, rounds, num_class, split_cost):
    booster, X, rng = fit(seed, n_features, num_leaves, rounds, num_class)
    lazy = rng.uniform(0, 10, n_features)
    report = prediction_cost(booster, X, lazy, split_cost)
    acquisition, evaluation, usage, leaves = reference_costs(booster, X, lazy, split_cost)
    np.testing.assert_array_equal(leaves, booster.predict(X, pred_leaf=True).reshape(len(X), -1))
    np.testing.assert_allclose(report.acquisition, acquisition, rtol=1e-12)
    np.testing.assert_allclose(report.evaluation, evaluation, rtol=1e-12)
    np.testing.assert_allclose(report.per_instance, acquisition + evaluation, rtol=1e-12)
    np.testing.assert_allclose(report.usage, usage, rtol=1e-12)


def test_usage_and_single_leaf_trees():
    # min_data_in_leaf above the row count: every tree is a single leaf, nothing is paid
    booster, X, _ = fit(0, 3, 8, 4, min_data=1000)
    assert booster.dump_model()["tree_info"][0]["num_leaves"] == 1
    report = prediction_cost(booster, X, [1.0, 2.0, 3.0], split_cost=1.0)
    assert report.mean == 0.0 and not report.usage.any()

    # a stump on feature 0: every row pays feature 0 once per row, one split per tree
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    booster = lgb.train({"objective": "regression", "num_leaves": 2, "verbose": -1}, lgb.Dataset(X, X[:, 0]), 5)
    report = prediction_cost(booster, X, [5.0, 1.0, 1.0], split_cost=0.5)
    np.testing.assert_array_equal(report.usage, [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(report.per_instance, np.full(200, 5.0 + 5 * 0.5))

    first_two = prediction_cost(booster, X, [5.0, 1.0, 1.0], split_cost=0.5, num_iteration=2)
    np.testing.assert_array_equal(first_two.evaluation, np.full(200, 1.0))


@pytest.mark.parametrize(("lazy", "split", "message"), [
    ([1.0, 2.0], 0.0, r"lazy_costs should have one value per feature of the model \(3\), got shape \(2,\)"),
    ([1.0, -2.0, 0.0], 0.0, r"lazy_costs should be finite and >= 0, got \[-2\.\]"),
    ([1.0, np.nan, 0.0], 0.0, r"lazy_costs should be finite and >= 0, got \[nan\]"),
    ([1.0, 1.0, 1.0], -1.0, r"split_cost should be a finite number >= 0, got -1\.0"),
])
def test_bad_costs(lazy, split, message):
    booster, X, _ = fit(0, 3, 4, 2)
    with pytest.raises(CEGBError, match=message):
        prediction_cost(booster, X, lazy, split)
