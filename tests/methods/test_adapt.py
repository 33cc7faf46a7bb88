"""ADAPT-GBRT: the q-step against a generic solver, the composite's routing and exact cost against a reference
built from each model's leaves, the ends of p_full, save/load, bad input."""

from __future__ import annotations

import json
import warnings

import lightgbm as lgb
import numpy as np
import pytest
from references import row_paths
from scipy.optimize import minimize
from sklearn.ensemble import RandomForestClassifier
from sklearn.svm import SVC
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils.estimator_checks import parametrize_with_checks

from lightgbm_cegb import FeatureCosts, prediction_cost
from lightgbm_cegb.core.errors import CEGBError, NoSplitWarning
from lightgbm_cegb.methods.adapt.adapt_base import routing_weights, threshold_for
from lightgbm_cegb.methods.adapt.gbrt import AdaptGBRT
from lightgbm_cegb.methods.greedy_miser import proba_from_raw

COSTS = FeatureCosts(lazy=[1.0, 1.0, 1.0, 1.0, 1.0, 5.0, 5.0, 5.0], split=0.01)


def objective(q, A, B):
    q = np.clip(q, 1e-15, 1 - 1e-15)
    return float(np.sum((1 - q) * A + q * B + q * np.log(q) + (1 - q) * np.log(1 - q)))


@pytest.mark.parametrize("seed", range(6))
def test_q_step_against_a_generic_solver(seed):
    rng = np.random.default_rng(seed)
    n = 7
    A, B = rng.normal(0, 2, n), rng.normal(0, 2, n)
    p_full = rng.uniform(0.05, 0.95)
    q = routing_weights(A, B, p_full)
    assert q.mean() == pytest.approx(p_full, abs=1e-9)
    best = minimize(objective, np.full(n, p_full), args=(A, B), method="SLSQP", bounds=[(1e-9, 1 - 1e-9)] * n,
                    constraints=[{"type": "eq", "fun": lambda q: q.mean() - p_full}], options={"ftol": 1e-14})
    assert best.success
    assert objective(q, A, B) <= objective(best.x, A, B) + 1e-8
    np.testing.assert_allclose(q, best.x, atol=1e-4)
    np.testing.assert_array_equal(routing_weights(A, B, 0.0), 0.0)
    np.testing.assert_array_equal(routing_weights(A, B, 1.0), 1.0)


def data(seed=0, n=2400, classes=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8))
    score = X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * X[:, 5] * X[:, 6]
    y = np.digitize(score, [0.0] if classes == 2 else [-0.5, 0.5])
    return X, y


@pytest.fixture(scope="module")
def fitted():
    X, y = data()
    f0 = lgb.LGBMClassifier(n_estimators=60, verbose=-1).fit(X[:1600], y[:1600])
    model = AdaptGBRT(f0=f0, p_full=0.3, tradeoff=0.5, feature_costs=COSTS, n_rounds=3,
                      trees_per_round=30).fit(X[:1600], y[:1600])
    return model, f0, X[1600:], y[1600:]


def reference_composite_cost(model, f0, X, costs=COSTS):
    """Per row from LightGBM's pred_leaf and the model texts (scikit-learn's decision_path for its forests):
    the features and groups of the gate's paths and of the chosen model's paths, each paid once, plus the
    split cost of every node traversed and the tree cost of every tree."""
    lazy, _, split = costs.arrays(X.shape[1])
    group_of, group_lazy, _ = costs.group_arrays(X.shape[1])
    score = model.gate_.predict(X, raw_score=True)
    to_f0 = score > model.gate_threshold_
    paths = {"gate": row_paths(model.gate_, X), "f1": row_paths(model.f1_, X), "f0": row_paths(f0, X)}
    out = np.zeros(len(X))
    for i in range(len(X)):
        used, evaluation = set(), 0.0
        for name in ("gate", "f0" if to_f0[i] else "f1"):
            for path in paths[name][i]:
                used.update(path)
                evaluation += sum(split[f] for f in path) + costs.tree
        groups = {group_of[f] for f in used} - {-1}
        out[i] = sum(lazy[f] for f in used) + sum(group_lazy[g] for g in groups) + evaluation
    return out, to_f0


def test_composite_cost_and_routing_against_the_reference(fitted):
    model, f0, X, y = fitted
    expected, to_f0 = reference_composite_cost(model, f0, X)
    np.testing.assert_array_equal(model.route(X), np.where(to_f0, 0, 1))
    assert 0 < to_f0.mean() < 1 and model.train_fraction_to_f0_ == pytest.approx(0.3, abs=0.01)
    np.testing.assert_allclose(model.prediction_cost(X).per_instance, expected, rtol=1e-12)
    proba = model.predict_proba(X)
    np.testing.assert_array_equal(proba[to_f0], f0.predict_proba(X[to_f0]))
    p1 = 1 / (1 + np.exp(-model.f1_.predict(X[~to_f0], raw_score=True)))
    np.testing.assert_allclose(proba[~to_f0, 1], p1, rtol=1e-12)
    # cheaper than f0 on every row sent to f1 only if the gate and f1 use fewer features: at least on average
    assert model.prediction_cost(X).mean < prediction_cost(f0, X, COSTS).mean


GROUPED = FeatureCosts(lazy=[1.0, 0.0, 0.0, 1.0, 2.0, 0.5, 0.5, 3.0], split=[0.01] * 4 + [0.02] * 4,
                       groups=[-1, 0, 0, -1, 1, 1, 1, -1], group_lazy=[4.0, 2.0], tree=0.001)


@pytest.mark.filterwarnings("ignore:AdaptGBRT. the gate's scores take too few values")
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("kind", ["lightgbm multiclass", "random forest"])
def test_composite_kernel_against_the_reference_on_random_cases(kind, seed):
    """The Cython composite (one pass: gate, then f1 or f0) against the reference, with feature groups,
    per-feature split costs and a tree cost; its routing and f1's scores equal LightGBM's predictions bit for
    bit (scikit-learn's f0 reads float32 values, LightGBM's models doubles)."""
    X, y = data(10 + seed, n=1500, classes=3 if kind.endswith("multiclass") else 2)
    X[::7, seed] = np.nan
    X[1::11, 3] = 1e-36  # LightGBM reads it as 0.0, scikit-learn as float32 (also 0.0) alike
    f0 = lgb.LGBMClassifier(n_estimators=20, num_leaves=7, verbose=-1) if kind.startswith("lightgbm") else \
        RandomForestClassifier(n_estimators=15, max_depth=6, random_state=seed)
    f0.fit(X[:1000], y[:1000])
    model = AdaptGBRT(f0=f0, p_full=0.25 + 0.1 * seed, tradeoff=0.2, feature_costs=GROUPED, n_rounds=2,
                      trees_per_round=8, max_depth=3).fit(X[:1000], y[:1000])
    test = X[1000:]
    expected, to_f0 = reference_composite_cost(model, f0, test, GROUPED)
    assert 0 < to_f0.mean() < 1
    np.testing.assert_array_equal(model.route(test), np.where(to_f0, 0, 1))
    np.testing.assert_allclose(model.prediction_cost(test).per_instance, expected, rtol=1e-12, atol=1e-12)
    raw = model.f1_.predict(test[~to_f0], raw_score=True)
    proba = model.predict_proba(test)
    np.testing.assert_array_equal(proba[~to_f0], proba_from_raw(raw))


@pytest.mark.parametrize("num_class", [1, 3])
def test_training_scores_are_predict_bit_for_bit(num_class):
    """fit's scores of f1 and g between rounds are ``predict(raw_score=True)``'s bits over every tree, from a first
    call before any tree on: f1's LightGBM's own training scores (objective "none", no init score), g's from only
    the trees grown since the last round (leaf values added in the trees' order). On rows with missing values,
    zeros and ties, and with stumps (trees without a split)."""
    from lightgbm_cegb.methods.adapt.gbrt import _TrainingScores

    rng = np.random.default_rng(num_class)
    X = np.round(rng.normal(size=(400, 6)), 1)
    X[rng.random(X.shape) < 0.1] = np.nan
    X[:, 2] = 0.0  # a feature without a split
    y = rng.integers(0, max(num_class, 2), 400)
    k = max(num_class, 1)
    onehot = np.eye(max(num_class, 2))[y][:, :k] if k > 1 else y[:, None].astype(float)

    def objective(score, _):  # the log-loss's gradient, hessian 1 (ADAPT's trees)
        score = score.reshape(len(y), k)
        p = np.exp(score - score.max(axis=1, keepdims=True)) if k > 1 else 1 / (1 + np.exp(-score))
        gradient = (p / p.sum(axis=1, keepdims=True) if k > 1 else p) - onehot
        return gradient.reshape(score.shape) if k > 1 else gradient[:, 0], np.ones(score.shape if k > 1 else len(y))

    for kept in (True, False):
        params = {"objective": "none", "num_leaves": 7, "learning_rate": 0.3, "min_data_in_leaf": 150,
                  "verbose": -1, "num_threads": 1, **({"num_class": k} if k > 1 else {})}
        booster = lgb.Booster(params, lgb.Dataset(X, y.astype(float)))
        scores = _TrainingScores(booster, X, k, kept=kept)
        np.testing.assert_array_equal(scores(), 0.0)
        for grown in (1, 4, 0, 7):
            for _ in range(grown):
                booster.update(fobj=objective)
            np.testing.assert_array_equal(scores(), booster.predict(X, raw_score=True))
        with pytest.raises(ValueError, match="read-only"):
            scores()[0] = 1.0


def test_ends_of_p_full():
    X, y = data(1, n=1200)
    f0 = lgb.LGBMClassifier(n_estimators=30, verbose=-1).fit(X, y)
    everything = AdaptGBRT(f0=f0, p_full=1.0, feature_costs=COSTS, n_rounds=2, trees_per_round=10).fit(X, y)
    assert (everything.route(X) == 0).all()
    np.testing.assert_array_equal(everything.predict_proba(X), f0.predict_proba(X))
    nothing = AdaptGBRT(f0=f0, p_full=0.0, feature_costs=COSTS, n_rounds=2, trees_per_round=10).fit(X, y)
    assert (nothing.route(X) == 1).all()
    np.testing.assert_allclose(nothing.predict_proba(X)[:, 1],
                               1 / (1 + np.exp(-nothing.f1_.predict(X, raw_score=True))))
    as_booster = AdaptGBRT(f0=f0.booster_, p_full=1.0, feature_costs=COSTS, n_rounds=2, trees_per_round=10).fit(X, y)
    np.testing.assert_array_equal(as_booster.predict_proba(X), f0.predict_proba(X))  # a Booster is an f0 too
    gate_cost = prediction_cost(nothing.gate_, X, COSTS).per_instance
    assert not gate_cost.any()  # a gate without a split
    np.testing.assert_allclose(nothing.prediction_cost(X).per_instance,
                               prediction_cost(nothing.f1_, X, COSTS).per_instance)


@pytest.mark.parametrize("seed", range(20))
def test_gate_threshold_closest_share_under_ties(seed):
    rng = np.random.default_rng(seed)
    score = rng.integers(0, rng.integers(1, 6), size=rng.integers(1, 40)).astype(float)
    p_full = float(rng.uniform())
    t = threshold_for(score, p_full)
    brute = min((abs(np.mean(score > c) - p_full), np.mean(score > c)) for c in [*score, -np.inf, np.inf])
    assert (abs(np.mean(score > t) - p_full), np.mean(score > t)) == brute
    assert threshold_for(score, 0.0) == np.inf and threshold_for(score, 1.0) == -np.inf


def test_a_gate_without_splits_is_reported():
    X, y = data(4, n=600)
    f0 = lgb.LGBMClassifier(n_estimators=10, verbose=-1).fit(X, y)
    with pytest.warns(UserWarning, match=r"send p_full=0.3 of the training rows to f0: 0.000 go "
                                         r"\(a gate that reads no feature"):
        model = AdaptGBRT(f0=f0, p_full=0.3, tradeoff=1e6, feature_costs=COSTS, n_rounds=1, trees_per_round=3).fit(X, y)
    assert not model.gate_.feature_importance().any() and (model.route(X) == 1).all()


def test_multiclass_and_a_model_that_is_not_a_forest():
    X, y = data(2, n=1500, classes=3)
    f0 = SVC(probability=True, random_state=0).fit(X[:1000], y[:1000])
    usage = lambda rows: np.ones((len(rows), 8), dtype=bool)  # noqa: E731 (an SVM reads every feature)
    model = AdaptGBRT(f0=f0, p_full=0.4, tradeoff=0.2, feature_costs=COSTS, n_rounds=2, trees_per_round=10,
                      f0_usage=usage).fit(X[:1000], y[:1000])
    proba = model.predict_proba(X[1000:])
    assert proba.shape == (500, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    report = model.prediction_cost(X[1000:])
    to_f0 = model.route(X[1000:]) == 0
    assert (report.acquisition[to_f0] == COSTS.lazy.sum()).all()  # every feature, once
    assert (report.acquisition[~to_f0] <= COSTS.lazy.sum()).all()
    with pytest.raises(CEGBError, match="give f0_usage"):
        AdaptGBRT(f0=f0, p_full=0.4, feature_costs=COSTS, n_rounds=1, trees_per_round=5).fit(
            X[:1000], y[:1000]).prediction_cost(X)


def test_shared_record_of_used_features(fitted):
    """With the ledgers merged after every tree, a feature one model bought is free for the other: every
    feature the two use costs its tradeoff once, so with a high tradeoff the pair uses few features."""
    model, f0, X, y = fitted
    X_train, y_train = data()[0][:1600], data()[1][:1600]
    stingy = AdaptGBRT(f0=f0, p_full=0.3, tradeoff=50.0, feature_costs=COSTS, n_rounds=3,
                       trees_per_round=30).fit(X_train, y_train)
    used = lambda b: set(np.flatnonzero(b.feature_importance("split")))  # noqa: E731
    assert used(stingy.gate_) | used(stingy.f1_) < used(model.gate_) | used(model.f1_)


def test_save_and_load(fitted, tmp_path):
    model, f0, X, _ = fitted
    model.save(tmp_path / "adapt")
    again = AdaptGBRT.load(tmp_path / "adapt", f0=f0)
    np.testing.assert_array_equal(again.predict_proba(X), model.predict_proba(X))
    np.testing.assert_array_equal(again.prediction_cost(X).per_instance, model.prediction_cost(X).per_instance)
    files = json.loads((tmp_path / "adapt" / "manifest.json").read_text())["files"]
    stock = lgb.Booster(model_file=str(tmp_path / "adapt" / files["gate"]))
    np.testing.assert_array_equal(stock.predict(X, raw_score=True), model.gate_.predict(X, raw_score=True))


@pytest.mark.parametrize("kwargs, fit_on, message", [
    ({"p_full": 1.5}, None, r"p_full should be a number in \[0, 1\], got 1.5"),
    ({"p_full": -0.1}, None, r"p_full should be a number in \[0, 1\], got -0.1"),
    ({"tradeoff": -1.0}, None, r"tradeoff should be a number in \[0, inf\], got -1.0"),
    ({"feature_costs": [1.0, 2.0]}, None, "costs are for 2 features but the model has 8"),
    ({}, "features", "f0 was fitted on 5 features, X has 8"),
    ({}, "classes", r"y holds classes \[2\] that f0 was not trained on"),
])
def test_bad_input(kwargs, fit_on, message):
    X, y = data(3, n=300)
    f0 = lgb.LGBMClassifier(n_estimators=5, verbose=-1)
    f0.fit(X[:, :5], y) if fit_on == "features" else f0.fit(X, y)
    labels = np.where(np.arange(300) < 5, 2, y) if fit_on == "classes" else y
    with pytest.raises(CEGBError, match=message):
        AdaptGBRT(f0=f0, **{"p_full": 0.3, **kwargs}).fit(X, labels)
    with pytest.raises(CEGBError, match=r"f0 should be a classifier with predict_proba \(fitted, or a scikit-learn "
                                         r"one that fit trains\) or a LightGBM classification Booster, got "
                                         r"LinearRegression"):
        from sklearn.linear_model import LinearRegression
        AdaptGBRT(f0=LinearRegression()).fit(X, y)


@parametrize_with_checks([AdaptGBRT(f0=DecisionTreeClassifier(max_depth=3, random_state=0), n_rounds=1,
                                    trees_per_round=2)])
def test_follows_scikit_learn_conventions(estimator, check):
    """scikit-learn's estimator checks, f0 an unfitted classifier that fit trains first (the checks vary the
    data's columns and classes, which a fitted f0 could not follow)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoSplitWarning)  # the checks' tiny data: a gate that reads nothing
        check(estimator)


def test_an_unfitted_f0_is_fitted_on_the_training_rows():
    X, y = data(5, n=300)
    given = lgb.LGBMClassifier(n_estimators=10, verbose=-1)
    model = AdaptGBRT(f0=given, p_full=0.3, n_rounds=1, trees_per_round=2).fit(X, y)
    assert not hasattr(given, "booster_")  # the given model stays as it was: a clone is fitted
    expected = lgb.LGBMClassifier(n_estimators=10, verbose=-1).fit(X, y)
    np.testing.assert_array_equal(model.f0_.predict_proba(X), expected.predict_proba(X))
