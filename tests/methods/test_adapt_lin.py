"""ADAPT-LIN: the M-step's gradient against finite differences and its solution against the optimality
conditions of the group lasso, tradeoff_scale, the composite's routing and exact cost against a reference, the ends
of p_full, save/load, bad input."""

from __future__ import annotations

import warnings

import lightgbm as lgb
import numpy as np
import pytest
from references import row_paths
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.utils.estimator_checks import parametrize_with_checks

from lightgbm_cegb import AdaptL1, AdaptLIN, FeatureCosts, prediction_cost
from lightgbm_cegb.core.errors import CEGBError, NoSplitWarning
from lightgbm_cegb.methods.adapt.lin import _Problem
from lightgbm_cegb.methods.greedy_miser import proba_from_raw

COSTS = FeatureCosts(lazy=[1.0, 1.0, 1.0, 1.0, 1.0, 5.0, 5.0, 5.0], split=0.01)
GROUPED = FeatureCosts(lazy=[1.0, 0.0, 0.0, 1.0, 2.0, 0.5, 0.5, 3.0], split=0.02,
                       groups=[-1, 0, 0, -1, 1, 1, 1, -1], group_lazy=[4.0, 2.0], tree=0.001)


def data(seed=0, n=1500, classes=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8)) * rng.uniform(0.5, 3.0, 8) + rng.normal(size=8)
    score = X[:, 0] - 0.5 * X[:, 1] + 0.8 * X[:, 5] * (X[:, 6] > 0) + rng.normal(0, 0.3, n)
    y = np.digitize(score, [np.median(score)] if classes == 2 else np.quantile(score, [0.33, 0.66]))
    return X, y


def problem(seed, k):
    rng = np.random.default_rng(seed)
    n, d = 200, 5
    Z = rng.normal(size=(n, d))
    codes = rng.integers(0, max(k, 2), n)
    return _Problem(Z, codes, rng.uniform(0.005, 0.05, d)), rng.uniform(0, 1, n), rng


@pytest.mark.parametrize("k", [1, 3])
def test_gradient_against_finite_differences(k):
    p, q, rng = problem(0, k)
    gate, f1 = rng.normal(size=6), rng.normal(size=(6, k))
    eps = 1e-6
    for j in range(6):
        e = np.zeros(6)
        e[j] = eps
        numeric = (p.smooth(gate + e, f1, q, True) - p.smooth(gate - e, f1, q, True)) / (2 * eps)
        assert p.gate_gradient(gate, q)[j] == pytest.approx(numeric, rel=1e-6, abs=1e-8)
        for c in range(k):
            E = np.zeros((6, k))
            E[j, c] = eps
            numeric = (p.smooth(gate, f1 + E, q, True) - p.smooth(gate, f1 - E, q, True)) / (2 * eps)
            assert p.f1_gradient(f1, q)[j, c] == pytest.approx(numeric, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("k", [1, 3])
def test_m_step_meets_the_group_lasso_optimality_conditions(seed, k):
    """At the solution, for each feature j with weights w_j = (gate_j, f1_j): the smooth part's gradient is
    -penalty_j w_j / ||w_j|| when w_j != 0, and of norm <= penalty_j when w_j = 0 (intercepts: zero)."""
    p, q, _ = problem(seed, k)
    gate, f1, _ = p.solve(np.zeros(6), np.zeros((6, k)), q, 20000, 1e-12, fit_gate=True)
    grad = np.column_stack([p.gate_gradient(gate, q), p.f1_gradient(f1, q)])
    w = np.column_stack([gate, f1])
    np.testing.assert_allclose(grad[0], 0.0, atol=1e-7)
    zero = 0
    for j in range(1, 6):
        norm = np.linalg.norm(w[j])
        if norm == 0:
            zero += 1
            assert np.linalg.norm(grad[j]) <= p.penalty[j - 1] + 1e-7
        else:
            np.testing.assert_allclose(grad[j], -p.penalty[j - 1] * w[j] / norm, atol=1e-6)
    assert seed > 0 or zero < 5  # not the trivial solution everywhere


def test_tradeoff_scale_is_where_f1_reads_no_feature():
    X, y = data(1)
    f0 = lgb.LGBMClassifier(n_estimators=20, verbose=-1).fit(X, y)
    scale = AdaptLIN(f0=f0, feature_costs=COSTS).tradeoff_scale(X, y)
    above = AdaptLIN(f0=f0, p_full=0.0, tradeoff=scale * 1.001, feature_costs=COSTS).fit(X, y)
    below = AdaptLIN(f0=f0, p_full=0.0, tradeoff=scale * 0.95, feature_costs=COSTS).fit(X, y)
    assert above.f1_features_.size == 0 and below.f1_features_.size > 0


def reference_cost(model, f0, X, costs):
    """Per row: the gate's non-zero features, then f1's or f0's path features (LightGBM's pred_leaf and the model
    text, or scikit-learn's decision_path), each feature and group once; f0's split and tree costs."""
    lazy, _, split = costs.arrays(X.shape[1])
    group_of, group_lazy, _ = costs.group_arrays(X.shape[1])
    filled = np.where(np.isnan(X), model.mean_, X)  # the gate reads a missing value as its training mean
    to_f0 = filled @ model.gate_coef_ + model.gate_intercept_ > model.gate_threshold_
    f0_paths = row_paths(f0, X)
    out = np.zeros(len(X))
    gate = set(np.flatnonzero(model.gate_coef_))
    f1 = set(np.flatnonzero(np.abs(model.f1_coef_).sum(axis=1)))
    for i in range(len(X)):
        used, evaluation = set(gate), 0.0
        if to_f0[i]:
            for path in f0_paths[i]:
                used.update(path)
                evaluation += sum(split[f] for f in path) + costs.tree
        else:
            used |= f1
        groups = {group_of[f] for f in used} - {-1}
        out[i] = sum(lazy[f] for f in used) + sum(group_lazy[g] for g in groups) + evaluation
    return out, to_f0


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("kind", ["lightgbm", "random forest multiclass"])
def test_composite_cost_and_routing_against_the_reference(kind, seed):
    X, y = data(10 + seed, classes=3 if kind.endswith("multiclass") else 2)
    f0 = lgb.LGBMClassifier(n_estimators=20, num_leaves=7, verbose=-1) if kind == "lightgbm" else \
        RandomForestClassifier(n_estimators=10, max_depth=5, random_state=seed)
    f0.fit(X[:1000], y[:1000])
    model = AdaptLIN(f0=f0, p_full=0.3 + 0.1 * seed, tradeoff=0.01, feature_costs=GROUPED).fit(X[:1000], y[:1000])
    test = X[1000:]
    expected, to_f0 = reference_cost(model, f0, test, GROUPED)
    assert 0 < to_f0.mean() < 1 and 0 < model.f1_features_.size < 8
    np.testing.assert_array_equal(model.route(test), np.where(to_f0, 0, 1))
    np.testing.assert_allclose(model.prediction_cost(test).per_instance, expected, rtol=1e-12, atol=1e-12)
    proba = model.predict_proba(test)
    np.testing.assert_array_equal(proba[to_f0], f0.predict_proba(test[to_f0]))
    np.testing.assert_allclose(proba[~to_f0], proba_from_raw(model.decision_function_f1(test[~to_f0])), rtol=1e-12)
    assert model.train_fraction_to_f0_ == pytest.approx(model.p_full, abs=0.01)


def test_adaptation_sends_f0_what_f1_cannot_do():
    """Half the rows (x1 < 0) follow the sign of the cheap x0, the other half the product of the costly x5 and x6.
    The gate learns to send the second half to f0 from x1: the composite is about as accurate as f0, far more
    than f1 alone, and cheaper than f0."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(4000, 8))
    y = np.where(X[:, 1] < 0, X[:, 0] > 0, X[:, 5] * X[:, 6] > 0).astype(int)
    f0 = lgb.LGBMClassifier(n_estimators=200, verbose=-1).fit(X[:3000], y[:3000])
    model = AdaptLIN(f0=f0, p_full=0.5, tradeoff=0.01, feature_costs=COSTS).fit(X[:3000], y[:3000])
    test, truth = X[3000:], y[3000:]
    accuracy = (model.predict(test) == truth).mean()
    alone = ((model.decision_function_f1(test) > 0) == truth).mean()
    assert accuracy > alone + 0.15 and accuracy > (f0.predict(test) == truth).mean() - 0.03
    assert set(model.gate_features_) >= {1}
    assert model.prediction_cost(test).mean < 0.8 * prediction_cost(f0, test, COSTS).mean


def test_ends_of_p_full_and_save_load(tmp_path):
    X, y = data(4, n=900)
    f0 = lgb.LGBMClassifier(n_estimators=10, verbose=-1).fit(X, y)
    everything = AdaptLIN(f0=f0, p_full=1.0, tradeoff=0.01, feature_costs=COSTS).fit(X, y)
    assert (everything.route(X) == 0).all() and everything.gate_features_.size == 0
    np.testing.assert_array_equal(everything.predict_proba(X), f0.predict_proba(X))
    nothing = AdaptLIN(f0=f0, p_full=0.0, tradeoff=0.01, feature_costs=COSTS).fit(X, y)
    assert (nothing.route(X) == 1).all()
    lazy = COSTS.arrays(8)[0]
    np.testing.assert_allclose(nothing.prediction_cost(X).per_instance, lazy[nothing.f1_features_].sum())
    model = AdaptLIN(f0=f0, p_full=0.4, tradeoff=0.005, feature_costs=GROUPED).fit(X, y)
    model.save(tmp_path / "lin")
    again = AdaptLIN.load(tmp_path / "lin", f0=f0)
    np.testing.assert_array_equal(again.predict_proba(X), model.predict_proba(X))
    np.testing.assert_array_equal(again.prediction_cost(X).per_instance, model.prediction_cost(X).per_instance)
    assert again.tradeoff == model.tradeoff and again.get_params()["p_full"] == 0.4
    with pytest.raises(CEGBError, match=r"not an AdaptGBRT model \(it holds an AdaptLIN model\)"):
        from lightgbm_cegb import AdaptGBRT
        AdaptGBRT.load(tmp_path / "lin", f0=f0)


@pytest.mark.parametrize("kwargs, message", [
    ({"tradeoff": -1.0}, r"tradeoff should be a number in \[0, inf\], got -1.0"),
    ({"p_full": 2}, r"p_full should be a number in \[0, 1\], got 2"),
    ({"max_iter": 0}, r"max_iter should be an integer in \[1, inf\], got 0"),
    ({"feature_costs": [1.0]}, "costs are for 1 features but the model has 8"),
])
def test_bad_input(kwargs, message):
    X, y = data(5, n=300)
    f0 = lgb.LGBMClassifier(n_estimators=5, verbose=-1).fit(X, y)
    with pytest.raises(CEGBError, match=message):
        AdaptLIN(f0=f0, **kwargs).fit(X, y)
    X[3, 2] = np.inf
    with pytest.raises(ValueError, match="Input X contains infinity"):
        AdaptLIN(f0=f0).fit(X, y)


@pytest.mark.parametrize("cls", [AdaptLIN, AdaptL1])
def test_a_missing_value_reads_as_its_training_mean(cls):
    """30% NaN: the gate and f1 centre and scale each feature by its mean and deviation over the training rows
    that know it, and read a missing value as that mean, in fit and in prediction; f0 reads the NaN itself;
    a missing value of a feature the row's models read is paid as a known one (the reference's routing)."""
    X, y = data(7)
    rng = np.random.default_rng(7)
    X[rng.random(X.shape) < 0.3] = np.nan
    f0 = lgb.LGBMClassifier(n_estimators=20, num_leaves=7, verbose=-1).fit(X[:1000], y[:1000])
    model = cls(f0=f0, p_full=0.3, tradeoff=0.01, feature_costs=GROUPED).fit(X[:1000], y[:1000])
    np.testing.assert_allclose(model.mean_, np.nanmean(X[:1000], axis=0), rtol=1e-12)
    np.testing.assert_allclose(model.scale_, np.nanstd(X[:1000], axis=0), rtol=1e-12)
    test = X[1000:]
    filled = np.where(np.isnan(test), model.mean_, test)
    expected, to_f0 = reference_cost(model, f0, test, GROUPED)
    assert 0 < to_f0.mean() < 1 and model.f1_features_.size > 0
    np.testing.assert_array_equal(model.route(test), np.where(to_f0, 0, 1))
    np.testing.assert_array_equal(model.decision_function_f1(test), model.decision_function_f1(filled))
    proba = model.predict_proba(test)
    np.testing.assert_array_equal(proba[to_f0], f0.predict_proba(test[to_f0]))
    np.testing.assert_allclose(proba[~to_f0], proba_from_raw(model.decision_function_f1(filled[~to_f0])), rtol=1e-12)
    np.testing.assert_allclose(model.prediction_cost(test).per_instance, expected, rtol=1e-12, atol=1e-12)
    assert (model.predict(test) == y[1000:]).mean() > 0.7


@parametrize_with_checks([AdaptLIN(f0=LogisticRegression(), n_rounds=1, max_iter=50),
                          AdaptL1(f0=LogisticRegression(), max_iter=50)])
def test_follows_scikit_learn_conventions(estimator, check):
    """scikit-learn's estimator checks, f0 an unfitted classifier that fit trains first."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoSplitWarning)
        check(estimator)


# ----------------------------------------------------------------------------------------- the L1 baseline


@pytest.mark.parametrize("classes", [2, 3])
def test_l1_baseline_follows_the_papers_three_steps(classes):
    """AdaptL1 against scikit-learn doing the ADAPT paper's L1 baseline by hand: the features S are those of the
    cost-weighted L1 fit (AdaptLIN's first f1, p_full 0); f1 is scikit-learn's unpenalised logistic regression on
    S; the gate is the unpenalised logistic regression on S of f1's mistakes, and the p_full share of the
    training rows with the highest 'mistake' scores goes to f0."""
    X, y = data(21, n=1200, classes=classes)
    f0 = lgb.LGBMClassifier(n_estimators=30, verbose=-1).fit(X, y)
    model = AdaptL1(f0=f0, p_full=0.3, tradeoff=0.02, feature_costs=COSTS, max_iter=20_000, tol=1e-12).fit(X, y)
    selected = AdaptLIN(f0=f0, p_full=0.0, tradeoff=0.02, feature_costs=COSTS, max_iter=20_000, tol=1e-12).fit(X, y)
    S = selected.f1_features_
    assert 0 < S.size < 8 and np.array_equal(model.support_, S)
    assert set(model.f1_features_) <= set(S) and set(model.gate_features_) <= set(S)
    Z = (X[:, S] - X[:, S].mean(axis=0)) / X[:, S].std(axis=0)
    f1 = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(Z, y)
    np.testing.assert_allclose(model.decision_function_f1(X), np.squeeze(f1.decision_function(Z)), atol=1e-4)
    wrong = (f1.predict(Z) != y).astype(int)
    gate = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(Z, wrong)
    mistake = gate.decision_function(Z)
    expected_to_f0 = mistake > np.quantile(mistake, 0.7)
    assert (model.route(X) == 0).mean() == pytest.approx(0.3, abs=0.01)
    assert np.mean((model.route(X) == 0) == expected_to_f0) > 0.99
    # the rows sent to f0 are those f1 gets wrong more often
    to_f0 = model.route(X) == 0
    assert wrong[to_f0].mean() > wrong[~to_f0].mean()


def test_l1_baseline_saves_and_is_swept(tmp_path):
    X, y = data(22, n=900)
    f0 = lgb.LGBMClassifier(n_estimators=10, verbose=-1).fit(X, y)
    model = AdaptL1(f0=f0, p_full=0.4, tradeoff=0.01, feature_costs=GROUPED).fit(X, y)
    model.save(tmp_path / "l1")
    again = AdaptL1.load(tmp_path / "l1", f0=f0)
    np.testing.assert_array_equal(again.support_, model.support_)
    np.testing.assert_array_equal(again.predict_proba(X), model.predict_proba(X))
    np.testing.assert_array_equal(again.prediction_cost(X).per_instance, model.prediction_cost(X).per_instance)
    from lightgbm_cegb.selection import sweep
    frame = sweep(["adapt_l1"], (X[:600], y[:600]), (X[600:], y[600:]), COSTS, task="binary", baseline=False,
                  grid={"adapt_l1": [{"p_full": 0.3, "relative_tradeoff": r} for r in (0.05, 0.5)]})
    assert list(frame["method"]) == ["adapt_l1", "adapt_l1"]
    assert (frame["cost"].iloc[1] <= frame["cost"].iloc[0]) and frame["quality"].between(0, 1).all()
