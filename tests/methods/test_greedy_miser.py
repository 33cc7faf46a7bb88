"""Greedy Miser estimators: trees equal to an independent NumPy implementation of the paper's algorithm,
the cost axis, early stopping, ranking, scikit-learn's checks, bad input."""

from __future__ import annotations

import re

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from references import greedy_miser_reference, tree_output
from sklearn.utils.estimator_checks import parametrize_with_checks

from lightgbm_cegb import FeatureCosts, prediction_cost
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.io.models import has_split
from lightgbm_cegb.methods.greedy_miser import GreedyMiserClassifier, GreedyMiserRanker, GreedyMiserRegressor


def assert_same_tree(node: dict, ref, X: np.ndarray, rows: np.ndarray, path: str = "root") -> None:
    """LightGBM's dumped tree against the reference's, node by node: the same feature and the same training
    rows going left at every split, the same leaf values."""
    if ref[0] == "leaf":
        assert "leaf_value" in node, f"{path}: LightGBM splits on feature {node.get('split_feature')}, the reference " \
                                     f"makes a leaf"
        assert node["leaf_value"] == pytest.approx(ref[1], rel=1e-6, abs=1e-12), path
        return
    assert "split_feature" in node, f"{path}: LightGBM makes a leaf, the reference splits on feature {ref[1]}"
    assert node["split_feature"] == ref[1], f"{path}: feature {node['split_feature']} != reference {ref[1]}"
    goes_left = X[rows, ref[1]] <= node["threshold"]
    assert set(rows[goes_left].tolist()) == ref[2], f"{path}: another partition of the rows"
    assert_same_tree(node["left_child"], ref[3], X, rows[goes_left], path + "/left")
    assert_same_tree(node["right_child"], ref[4], X, rows[~goes_left], path + "/right")


def random_case(seed: int, n: int = 120, num_features: int = 6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, num_features))
    signal = X[:, 0] + 2 * X[:, 1] * (X[:, 2] > 0) + 0.5 * X[:, 3] ** 2
    costs = rng.choice([1.0, 5.0, 20.0], size=num_features)
    return X, signal, costs, rng


def dumped_trees(booster: lgb.Booster) -> list[dict]:
    return [info["tree_structure"] for info in booster.dump_model()["tree_info"]]


CASES = [  # (seed, lam, kind, max_depth, groups)
    (0, 0.0, "regression", 3, False), (1, 0.5, "regression", 3, False), (2, 2.0, "regression", 3, False),
    (3, 0.02, "binary", 3, False), (4, 0.05, "binary", 2, False), (5, 0.01, "multiclass", 2, False),
    (6, 0.5, "regression", 3, True), (21, 0.0, "binary", 3, False), (22, 1.0, "regression", 4, False),
]


@pytest.mark.parametrize("seed, lam, kind, depth, groups", CASES)
def test_trees_equal_the_numpy_reference(seed, lam, kind, depth, groups):
    X, signal, costs, rng = random_case(seed)
    group_of, group_costs = (np.array([0, 0, 1, 1, -1, -1]), [30.0, 3.0]) if groups else (None, ())
    if kind == "regression":
        y, model, num_class = signal + 0.3 * rng.normal(size=len(signal)), GreedyMiserRegressor, 0
    elif kind == "binary":
        y, model, num_class = (signal > np.median(signal)).astype(float), GreedyMiserClassifier, 1
    else:
        y, model, num_class = np.digitize(signal, np.quantile(signal, [1 / 3, 2 / 3])).astype(float), \
            GreedyMiserClassifier, 3
    if seed in (2, 4):
        # LightGBM counts a side's rows from its hessians (sum x rows / hessian of the node) when it checks
        # min_data_in_leaf: with weights the check is exact only for min_samples_leaf=1 and weights that a
        # single row cannot round to 0 rows
        min_leaf, weight = 1, rng.uniform(0.8, 1.2, size=len(y))
    else:  # nodes of a few rows tie between features (see greedy_miser_reference)
        min_leaf, weight = 4 + seed % 3, None
    cost_model = FeatureCosts(coupled=costs) if not groups else \
        FeatureCosts(coupled=costs, groups=group_of, group_coupled=group_costs)
    trees = 6
    fitted = model(feature_costs=cost_model, tradeoff=lam, n_estimators=trees, max_depth=depth,
                   min_samples_leaf=min_leaf, max_bin=1024).fit(X, y, sample_weight=weight)
    reference = greedy_miser_reference(X, y, costs=costs, lam=lam, depth=depth, trees=trees, min_leaf=min_leaf,
                                       weight=weight, num_class=num_class, group_of=group_of, group_costs=group_costs)
    dumped = dumped_trees(fitted.booster_)
    assert len(dumped) == len(reference) == trees * max(num_class, 1)
    rows = np.arange(len(y))
    for t, (node, ref) in enumerate(zip(dumped, reference)):
        assert_same_tree(node, ref, X, rows, f"tree {t}")
    raw = fitted.booster_.predict(X, raw_score=True).reshape(len(y), -1)
    expected = np.zeros_like(raw)
    for t, ref in enumerate(reference):
        expected[:, t % raw.shape[1]] += tree_output(ref, len(y))
    np.testing.assert_allclose(raw, expected, rtol=1e-6, atol=1e-9)


def test_the_cost_trade_off_changes_the_trees():
    """The reference test is not vacuous: with these costs, lam moves the model away from the expensive
    features (and the reference follows, above)."""
    X, signal, _, rng = random_case(11, n=400)
    y = signal + 0.3 * rng.normal(size=len(signal))
    costs = FeatureCosts(coupled=[1.0, 100.0, 100.0, 1.0, 1.0, 1.0])
    free = GreedyMiserRegressor(feature_costs=costs, tradeoff=0.0, n_estimators=30).fit(X, y)
    miser = GreedyMiserRegressor(feature_costs=costs, tradeoff=5.0, n_estimators=30).fit(X, y)
    used_free = set(np.flatnonzero(free.booster_.feature_importance("split")))
    used_miser = set(np.flatnonzero(miser.booster_.feature_importance("split")))
    assert {1, 2} <= used_free
    assert not {1, 2} & used_miser
    assert miser.prediction_cost(X).coupled < free.prediction_cost(X).coupled


def test_within_a_tree_every_split_on_a_new_feature_pays():
    """The per-tree refresh: the used set changes only between trees, so a feature first used in this tree
    costs lam * c at each of its splits in it (cegb_coupled_refresh=tree), unlike CEGB's per-split refresh."""
    X, signal, _, rng = random_case(12, n=300)
    y = signal + 0.1 * rng.normal(size=len(signal))
    costs = np.array([0.0, 8.0, 0.0, 0.0, 0.0, 0.0])
    miser = GreedyMiserRegressor(feature_costs=FeatureCosts(coupled=costs), tradeoff=1.0, n_estimators=3, max_depth=3,
                                 max_bin=1024).fit(X, y)
    reference = greedy_miser_reference(X, y, costs=costs, lam=1.0, depth=3, trees=3, num_class=0)
    for t, (node, ref) in enumerate(zip(dumped_trees(miser.booster_), reference)):
        assert_same_tree(node, ref, X, np.arange(len(y)), f"tree {t}")


def test_tradeoff_scale_is_where_the_first_tree_stops_splitting():
    X, signal, costs, rng = random_case(20, n=300)
    y = signal + 0.3 * rng.normal(size=len(signal))
    model = GreedyMiserRegressor(feature_costs=costs, n_estimators=1)
    scale = model.tradeoff_scale(X, y)
    assert has_split(model.set_params(tradeoff=scale * 0.99).fit(X, y).booster_)
    assert not has_split(model.set_params(tradeoff=scale * 1.01).fit(X, y).booster_)
    # the root's best penalised split, by the reference: lam * c_f against the root gain of each feature
    reference = greedy_miser_reference(X, y, costs=costs, lam=scale * 0.99, depth=4, trees=1, num_class=0)
    assert reference[0][0] == "split"


def test_tree_cost_is_on_the_cost_axis():
    X, signal, costs, rng = random_case(13, n=300)
    y = signal + 0.3 * rng.normal(size=len(signal))
    plain = FeatureCosts(lazy=costs)
    with_trees = FeatureCosts(lazy=costs, tree=0.5)
    model = GreedyMiserRegressor(feature_costs=with_trees, tradeoff=0.1, n_estimators=20).fit(X, y)
    report = model.prediction_cost(X)
    base = prediction_cost(model.booster_, X, plain)
    np.testing.assert_allclose(report.evaluation, base.evaluation + 0.5 * 20)
    np.testing.assert_array_equal(report.acquisition, base.acquisition)
    np.testing.assert_array_equal(prediction_cost(model, X).per_instance, report.per_instance)  # costs_, forest_


def test_early_stopping_keeps_the_best_validation_iteration():
    X, signal, costs, rng = random_case(14, n=1200)
    y = (signal + rng.normal(size=len(signal)) > 0.5).astype(int)
    model = GreedyMiserClassifier(feature_costs=costs, tradeoff=0.01, n_estimators=400, early_stopping_rounds=20,
                                  learning_rate=0.5).fit(X[:800], y[:800], eval_set=[(X[800:], y[800:])])
    # the same trees without early stopping, 20 further: the validation loss is lowest at best_iteration_
    full = GreedyMiserClassifier(feature_costs=costs, tradeoff=0.01, n_estimators=model.best_iteration_ + 20,
                                 early_stopping_rounds=None, learning_rate=0.5).fit(X[:800], y[:800])
    losses = []
    for k in range(1, full.best_iteration_ + 1):
        p = full.predict_proba(X[800:], num_iteration=k)[:, 1]
        losses.append(-np.mean(np.where(y[800:] == 1, np.log(p), np.log(1 - p))))
    assert model.best_iteration_ == int(np.argmin(losses)) + 1
    assert model.prediction_cost(X).mean == prediction_cost(model.booster_, X, costs,
                                                            num_iteration=model.best_iteration_).mean


def test_classifier_labels_and_probabilities():
    X, signal, costs, _ = random_case(15, n=300)
    labels = np.array(["low", "mid", "high"])[np.digitize(signal, np.quantile(signal, [1 / 3, 2 / 3]))]
    model = GreedyMiserClassifier(feature_costs=costs, tradeoff=0.01, n_estimators=20).fit(X, labels)
    proba = model.predict_proba(X)
    assert proba.shape == (300, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert set(model.predict(X)) <= set(labels)
    assert (model.predict(X) == labels).mean() > 0.6


def test_ranker_weights_irrelevant_documents_and_stops_on_ndcg():
    rng = np.random.default_rng(16)
    X = rng.normal(size=(600, 5))
    y = np.clip(np.round(X[:, 0] + 0.5 * X[:, 1] + rng.normal(scale=0.5, size=600)), 0, 4)
    group = [20] * 30
    weighted = GreedyMiserRanker(feature_costs=[1.0] * 5, tradeoff=0.1, n_estimators=50).fit(
        X[:400], y[:400], group=group[:20], eval_set=[(X[400:], y[400:])], eval_group=[group[20:]])
    by_weight = GreedyMiserRegressor(feature_costs=[1.0] * 5, tradeoff=0.1, n_estimators=50,
                                     early_stopping_rounds=None).fit(
        X[:400], y[:400], sample_weight=np.where(y[:400] == 0, 10.0, 1.0))
    np.testing.assert_allclose(weighted.predict(X, num_iteration=weighted.best_iteration_),
                               by_weight.predict(X, num_iteration=weighted.best_iteration_))
    assert weighted.prediction_cost(X[400:]).mean > 0
    with pytest.raises(CEGBError, match="group: a ranker needs the query sizes"):
        GreedyMiserRanker().fit(X, y)


def test_costs_by_feature_name():
    X, signal, costs, _ = random_case(17, n=200)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    by_name = GreedyMiserRegressor(feature_costs=FeatureCosts(coupled={f"f{i}": c for i, c in enumerate(costs)}),
                                   tradeoff=0.5, n_estimators=10).fit(frame, signal)
    by_index = GreedyMiserRegressor(feature_costs=FeatureCosts(coupled=costs), tradeoff=0.5,
                                    n_estimators=10).fit(X, signal)
    np.testing.assert_array_equal(by_name.predict(frame), by_index.predict(X))



def test_dataframe_names_reach_the_booster_or_are_refused():
    """The booster names the DataFrame's columns (a space as LightGBM writes it); names a LightGBM model cannot
    hold are refused at fit, naming them (the booster said Column_i, and costs by name failed on it)."""
    X, signal, costs, _ = random_case(19, n=200)
    columns = ["age", "blood test", "c", "d", "e", "f"][:X.shape[1]]
    frame = pd.DataFrame(X, columns=columns)
    model = GreedyMiserRegressor(tradeoff=0.5, n_estimators=5).fit(frame, signal)
    assert model.booster_.feature_name() == [c.replace(" ", "_") for c in columns]
    by_name = dict(zip(columns, costs))
    np.testing.assert_array_equal(prediction_cost(model.booster_, frame, by_name, num_iteration=5).per_instance,
                                  prediction_cost(model.booster_, X, costs, num_iteration=5).per_instance)
    for bad in ("x[0]", "a:b"):
        with pytest.raises(CEGBError, match=r"feature names: a LightGBM model holds names without the characters .*"
                                            + re.escape(repr(bad))):
            GreedyMiserRegressor(n_estimators=2).fit(frame.rename(columns={"c": bad}), signal)

def test_model_text_loads_in_lightgbm():
    X, signal, costs, _ = random_case(18, n=200)
    model = GreedyMiserRegressor(feature_costs=costs, tradeoff=0.5, n_estimators=10).fit(X, signal)
    again = lgb.Booster(model_str=model.booster_.model_to_string())
    np.testing.assert_array_equal(again.predict(X), model.predict(X))


@pytest.mark.parametrize("kwargs, message", [
    ({"loss": "hinge"}, r"loss should be one of \['squared'\] for GreedyMiserRegressor, got 'hinge'"),
    ({"max_depth": 0}, r"max_depth should be an integer in \[1, 30\], got 0"),
    ({"max_depth": 31}, r"max_depth should be an integer in \[1, 30\], got 31"),
    ({"tradeoff": -1.0}, "tradeoff should be a finite number >= 0, got -1.0"),
    ({"learning_rate": 0.0}, "learning_rate should be a finite number > 0, got 0.0"),
    ({"n_estimators": 2.5}, "n_estimators should be an integer >= 1, got 2.5"),
    ({"feature_costs": [1.0, 2.0]}, "costs are for 2 features but the model has 6"),
    ({"feature_costs": FeatureCosts(coupled={"nope": 1.0})}, "no feature names"),
])
def test_bad_input(kwargs, message):
    X, signal, _, _ = random_case(19, n=50)
    with pytest.raises(CEGBError, match=message):
        GreedyMiserRegressor(**kwargs).fit(X, signal)


def test_bad_tree_cost():
    with pytest.raises(CEGBError, match=r"tree \(the cost of evaluating one tree\) should be a finite number >= 0, "
                                        r"got -1"):
        FeatureCosts(lazy=[1.0], tree=-1)


# As stock LightGBM's estimators declare (LGBMModel._more_tags): a weight of 0 is not the same as leaving the
# row out, and a weight of k not the same as k copies, since the rows still shape the histogram bins and
# min_data_in_leaf counts them.
WEIGHT_CHECKS = {f"check_sample_weight_equivalence_on_{kind}_data": "LightGBM: rows of weight 0 still shape the "
                 "histogram bins and count in min_data_in_leaf" for kind in ("dense", "sparse")}


@parametrize_with_checks([GreedyMiserRegressor(n_estimators=10), GreedyMiserClassifier(n_estimators=10)],
                         expected_failed_checks=lambda estimator:
                         WEIGHT_CHECKS if isinstance(estimator, GreedyMiserClassifier) else {})
def test_sklearn_checks(estimator, check):
    check(estimator)


def test_a_prefix_is_the_model_of_its_first_iterations():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(500, 4))
    y = (X[:, 0] - X[:, 2] > 0).astype(int)
    model = GreedyMiserClassifier(feature_costs=FeatureCosts(lazy=[1.0, 1.0, 5.0, 5.0]), n_estimators=20,
                                  random_state=0).fit(X, y)
    small = model.prefix(7)
    np.testing.assert_array_equal(small.predict_proba(X), model.predict_proba(X, num_iteration=7))
    assert small.prediction_cost(X).mean == model.prediction_cost(X, num_iteration=7).mean
    assert model.best_iteration_ == 20 and small.booster_.current_iteration() == 7
    with pytest.raises(CEGBError, match=r"n_iterations should be an integer in \[1, 20\], got 0"):
        model.prefix(0)


def test_eval_set_as_lightgbm_takes_it():
    """Issue 48 (13): eval_set=(X, y) (one pair, as LightGBM takes it) raised "too many values to unpack", and
    eval_sample_weight given as one array "The truth value of an array ... is ambiguous"."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = (X[:, 0] + rng.normal(0, 0.5, 300) > 0).astype(int)
    train, valid = slice(0, 200), slice(200, 300)

    def fitted(**kwargs):
        return GreedyMiserClassifier(tradeoff=0.1, n_estimators=300, early_stopping_rounds=3).fit(
            X[train], y[train], **kwargs)
    listed = fitted(eval_set=[(X[valid], y[valid])], eval_sample_weight=[np.ones(100)])
    one = fitted(eval_set=(X[valid], y[valid]))
    assert one.best_iteration_ == listed.best_iteration_ < 300
    assert one.booster_.model_to_string() == listed.booster_.model_to_string()
    with pytest.raises(CEGBError, match=r"eval_sample_weight should be a list with one entry per set of eval_set, "
                                        r"got ndarray"):
        fitted(eval_set=[(X[valid], y[valid])], eval_sample_weight=np.ones(100))
    with pytest.raises(CEGBError, match=r"eval_sample_weight should hold 100 finite weights >= 0"):
        fitted(eval_set=[(X[valid], y[valid])], eval_sample_weight=[np.ones(7)])
    with pytest.raises(CEGBError, match=r"eval_set should be a list of \(X, y\) pairs or one \(X, y\), got dict"):
        fitted(eval_set={"valid": (X[valid], y[valid])})
