"""Routing and prediction cost against independent references: LightGBM's own pred_leaf / raw scores,
scikit-learn's apply, and costs rebuilt from the leaves' paths in the model's JSON dump."""

from __future__ import annotations

import json

import lightgbm as lgb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.ensemble import (ExtraTreesClassifier, GradientBoostingClassifier, GradientBoostingRegressor,
                              RandomForestRegressor)
from sklearn.tree import DecisionTreeClassifier

from lightgbm_cegb import CEGBError, FeatureCosts, prediction_cost, to_forest
from lightgbm_cegb.lightgbm_model import read_text


def leaf_paths(booster: lgb.Booster) -> list[dict[int, list[int]]]:
    """Per tree: leaf index -> features of the split nodes on its path, read from the model text's
    split_feature / left_child / right_child lines (dump_model's JSON cannot hold the inf thresholds
    some of these models have)."""
    out = []
    for block in booster.model_to_string().split("end of trees")[0].split("\nTree=")[1:]:
        fields = dict(line.split("=", 1) for line in block.splitlines()[1:] if "=" in line)
        if int(fields["num_leaves"]) == 1:
            out.append({0: []})
            continue
        feature, left, right = ([int(v) for v in fields[k].split()] for k in ("split_feature", "left_child", "right_child"))
        paths, stack = {}, [(0, [])]
        while stack:
            node, path = stack.pop()
            if node < 0:
                paths[~node] = path
            else:
                stack += [(left[node], [*path, feature[node]]), (right[node], [*path, feature[node]])]
        out.append(paths)
    return out


def reference_costs(booster, X, lazy, split, trees_per_iteration=1):
    """Costs from LightGBM's own pred_leaf and the dump's paths, row by row in Python."""
    leaves = booster.predict(X, pred_leaf=True).reshape(len(X), -1)
    paths = leaf_paths(booster)
    n_iter = leaves.shape[1] // trees_per_iteration
    acquisition, evaluation = np.zeros(len(X)), np.zeros(len(X))
    usage, curve = np.zeros(len(lazy)), np.zeros(n_iter)
    for i in range(len(X)):
        used, ev = set(), 0.0
        for t in range(leaves.shape[1]):
            for f in paths[t][leaves[i, t]]:
                used.add(f)
                ev += split[f]
            if (t + 1) % trees_per_iteration == 0:
                curve[t // trees_per_iteration] += sum(lazy[f] for f in used) + ev
        acquisition[i], evaluation[i] = sum(lazy[f] for f in used), ev
        usage[list(used)] += 1
    return acquisition, evaluation, usage / len(X), curve / len(X)


@st.composite
def model_and_data(draw):
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    n, n_num = 300, draw(st.integers(1, 6))
    X = rng.normal(size=(n, n_num))
    X[rng.random(X.shape) < draw(st.sampled_from([0.0, 0.1, 0.3]))] = np.nan
    X[rng.random(X.shape) < draw(st.sampled_from([0.0, 0.2]))] = 0.0
    X[rng.random(X.shape) < 0.02] = draw(st.sampled_from([np.inf, -np.inf, 1e-40, -1e-40]))
    categorical = draw(st.booleans())
    if categorical:
        cat = rng.integers(0, 40, n).astype(float)
        cat[rng.random(n) < 0.1] = np.nan
        X = np.column_stack([X, cat])
    y = np.nan_to_num(X[:, 0]) + (np.nan_to_num(X[:, -1]) % 3 if categorical else 0) + rng.normal(0, 0.5, n)
    objective = draw(st.sampled_from(["regression", "binary", "multiclass"]))
    params = {"objective": objective, "num_leaves": draw(st.integers(2, 31)), "min_data_in_leaf": 5,
              "verbose": -1, "seed": seed, "num_threads": 1, "min_data_per_group": 5, "cat_smooth": 1.0,
              "zero_as_missing": draw(st.booleans()), "use_missing": draw(st.booleans())}
    if objective == "binary":
        y = (y > np.median(y)).astype(float)
    elif objective == "multiclass":
        params["num_class"] = 3
        y = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    if objective == "regression" and not params["zero_as_missing"] and draw(st.booleans()):
        params["linear_tree"] = True
    ds = lgb.Dataset(X, y, categorical_feature=[X.shape[1] - 1] if categorical else "auto")
    booster = lgb.train(params, ds, draw(st.integers(1, 12)))
    # rows to score: fresh values from the same distribution, plus categories never seen and negative
    Xt = X[rng.permutation(n)[:120]].copy()
    if categorical:
        Xt[:10, -1] = rng.choice([-3.0, 55.0, 1e10, 31.7], 10)
    return booster, Xt, rng


@settings(max_examples=300, deadline=None, derandomize=True)
@given(model_and_data())
def test_leaves_and_raw_scores_match_lightgbm(case):
    booster, X, _ = case
    forest = to_forest(booster)
    leaves = forest.apply(X)
    np.testing.assert_array_equal(leaves, booster.predict(X, pred_leaf=True).reshape(len(X), -1))
    raw = booster.predict(X, raw_score=True).reshape(len(X), -1)
    np.testing.assert_allclose(forest.raw_score(X, leaves), raw, rtol=1e-9, atol=1e-9)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(model_and_data(), st.sampled_from([0.0, 0.25]))
def test_costs_match_reference(case, split_cost):
    booster, X, rng = case
    n_features = booster.num_feature()
    lazy = rng.uniform(0, 10, n_features)
    split = rng.uniform(0, 1, n_features) if split_cost else np.zeros(n_features)
    report = prediction_cost(booster, X, FeatureCosts(lazy=lazy, split=split), per_iteration=True)
    tpi = booster.num_model_per_iteration()
    acquisition, evaluation, usage, curve = reference_costs(booster, X, lazy, split, tpi)
    np.testing.assert_allclose(report.acquisition, acquisition, rtol=1e-12)
    np.testing.assert_allclose(report.evaluation, evaluation, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(report.usage, usage, rtol=1e-12)
    np.testing.assert_allclose(report.curve, curve, rtol=1e-12, atol=1e-12)
    assert report.curve[-1] == pytest.approx(report.mean, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize(("make", "nan"), [
    (lambda: DecisionTreeClassifier(max_depth=6, random_state=0), True),
    (lambda: RandomForestRegressor(n_estimators=7, min_samples_leaf=3, random_state=0), True),
    (lambda: ExtraTreesClassifier(n_estimators=5, random_state=0), True),
    (lambda: GradientBoostingClassifier(n_estimators=6, random_state=0), False),
    (lambda: GradientBoostingRegressor(n_estimators=6, max_depth=2, random_state=0), False),
], ids=["tree", "rf", "extratrees", "gb-multiclass", "gb-regressor"])
def test_sklearn_models(make, nan):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 5))
    y = (X[:, 0] + X[:, 1] > 0).astype(int) + (X[:, 2] > 1)
    if nan:  # models that learn where missing values go
        X[rng.random(X.shape) < 0.05] = np.nan
    model = make().fit(X, y)
    leaves = to_forest(model).apply(X)
    trees = ([model] if not hasattr(model, "estimators_")
             else list(np.asarray(model.estimators_).ravel()))
    for t, tree in enumerate(trees):
        expected_nodes = tree.apply(X.astype(np.float32))
        leaf_nodes = np.flatnonzero(tree.tree_.children_left == -1)
        np.testing.assert_array_equal(leaf_nodes[leaves[:, t]], expected_nodes)
    lazy = rng.uniform(0, 5, 5)
    report = prediction_cost(model, X, FeatureCosts(lazy=lazy, split=1.0))
    for i in range(0, 400, 37):
        used, nodes = set(), 0
        for tree in trees:
            path = tree.decision_path(X[i:i + 1].astype(np.float32)).indices
            internal = [k for k in path if tree.tree_.children_left[k] != -1]
            used |= {int(tree.tree_.feature[k]) for k in internal}
            nodes += len(internal)
        assert report.acquisition[i] == pytest.approx(sum(lazy[f] for f in used), rel=1e-12)
        assert report.evaluation[i] == nodes


def test_single_leaf_trees_and_num_iteration():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    flat = lgb.train({"objective": "regression", "min_data_in_leaf": 1000, "verbose": -1}, lgb.Dataset(X, X[:, 0]), 3)
    assert to_forest(flat).node_offset.tolist() == [0] * (flat.num_trees() + 1)  # one-leaf trees
    report = prediction_cost(flat, X, FeatureCosts(lazy=[1, 2, 3], coupled=[1, 1, 1], split=1.0))
    assert report.mean == 0.0 and report.coupled == 0.0 and not report.usage.any()

    stump = lgb.train({"objective": "regression", "num_leaves": 2, "verbose": -1}, lgb.Dataset(X, X[:, 0]), 5)
    costs = FeatureCosts(lazy=[5.0, 1.0, 1.0], coupled=[7.0, 1.0, 1.0], split=0.5)
    report = prediction_cost(stump, X, costs, per_iteration=True)
    np.testing.assert_array_equal(report.usage, [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(report.per_instance, np.full(200, 5.0 + 5 * 0.5))
    np.testing.assert_allclose(report.curve, 5.0 + 0.5 * np.arange(1, 6))
    assert report.coupled == 7.0
    assert prediction_cost(stump, X, costs, num_iteration=2).mean == 6.0


def test_costs_read_back_from_the_model(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 4))
    costs = FeatureCosts(lazy=[1.0, 2.0, 3.0, 4.0], coupled=[0.0, 0.0, 1.0, 0.0], split=0.01)
    booster = lgb.train({"objective": "regression", "verbose": -1, **costs.to_params(tradeoff=0.001)},
                        lgb.Dataset(X, X[:, 0] + X[:, 2]), 10)
    path = tmp_path / "model.txt"
    booster.save_model(path)
    expected = prediction_cost(booster, X, costs)
    for model in (booster, path, str(path), lgb.Booster(model_file=str(path))):
        report = prediction_cost(model, X)
        np.testing.assert_array_equal(report.per_instance, expected.per_instance)
    json.dumps(expected.to_dict())


def test_best_iteration_is_the_default(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    y = X[:, 0] + rng.normal(0, 2.0, 600)
    booster = lgb.train({"objective": "regression", "verbose": -1, "learning_rate": 0.5}, lgb.Dataset(X[:400], y[:400]),
                        100, valid_sets=[lgb.Dataset(X[400:], y[400:])],
                        callbacks=[lgb.early_stopping(3, verbose=False)], keep_training_booster=True)
    assert 0 < booster.best_iteration < booster.current_iteration()
    costs = FeatureCosts(split=1.0)
    assert prediction_cost(booster, X, costs).mean == prediction_cost(
        booster, X, costs, num_iteration=booster.best_iteration).mean


@pytest.mark.parametrize(("costs", "X_shape", "message"), [
    (FeatureCosts(lazy=[1.0, 2.0]), (5, 3), r"costs are for 2 features but the model has 3"),
    (FeatureCosts(lazy=[1.0, 2.0, 3.0]), (5, 4), r"X has 4 features but the model has 3"),
    (None, (5, 3), r"costs is None and the model was not trained with cegb_\* parameters"),
    (FeatureCosts(lazy={"nope": 1.0}), (5, 3), r"lazy costs name unknown features \['nope'\]"),
])
def test_bad_prediction_cost_input(costs, X_shape, message):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    booster = lgb.train({"objective": "regression", "verbose": -1}, lgb.Dataset(X, X[:, 0]), 2)
    with pytest.raises(CEGBError, match=message):
        prediction_cost(booster, np.zeros(X_shape), costs)


def test_unknown_decision_type_is_refused():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    text = lgb.train({"objective": "regression", "verbose": -1}, lgb.Dataset(X, X[:, 0]), 1).model_to_string()
    lines = [line for line in text.splitlines() if not line.startswith("tree_sizes=")]  # optional; sizes change
    i = next(k for k, line in enumerate(lines) if line.startswith("decision_type="))
    lines[i] = "decision_type=" + " ".join(["64"] * len(lines[i].split("=")[1].split()))
    with pytest.raises(CEGBError, match=r"unknown decision_type 64"):
        read_text("\n".join(lines))
