"""StagedAcquisitionRegressor: the exit rule against an independent simulation written from its description (costs
from LightGBM's pred_leaf paths), one pass for many settings, lazy serving, save and load, refusals, and the
selection API."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from references import compiled_stages_predict_as_lightgbm, reference_costs
from sklearn.utils.estimator_checks import parametrize_with_checks

from lightgbm_cegb import CEGBError, FeatureCosts, LazyPredictor
from lightgbm_cegb.methods.staged_regressor import StagedAcquisitionRegressor


def random_case(seed: int, n: int = 400):
    rng = np.random.default_rng(seed)
    num_features = int(rng.integers(3, 8))
    X = rng.normal(size=(n, num_features))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = np.nan_to_num(X[:, 0]) + 2 * np.nan_to_num(X[:, 1]) * (np.nan_to_num(X[:, 2]) > 0) + 0.3 * rng.normal(size=n)
    lazy = rng.choice([0.0, 1.0, 2.0, 5.0], size=num_features, p=[0.1, 0.4, 0.3, 0.2])
    groups = {"pair": rng.choice(num_features, size=2, replace=False).tolist()} \
        if num_features >= 4 and rng.random() < 0.6 else None
    costs = FeatureCosts(lazy=lazy, groups=groups, split=rng.choice([0.0, 0.1]),
                         group_lazy=None if groups is None else [float(rng.integers(1, 4))])
    return X, y, costs, rng


def fitted(seed: int, **params):
    X, y, costs, rng = random_case(seed)
    model = StagedAcquisitionRegressor(feature_costs=costs, stages=6, n_estimators=40, early_stopping_rounds=5,
                                       random_state=seed, **params).fit(X, y)
    return model, X, y, costs, rng


def simulate(model: StagedAcquisitionRegressor, x: np.ndarray, costs: FeatureCosts):
    """The regressor on one row, written from the module's description: (stage, prediction, lazy cost, split
    cost)."""
    num_features = len(x)
    prices = np.concatenate([[0.0], np.cumsum(model.unit_cost_[model.order_])])[model.stage_units_]
    last = len(prices) - 1
    if model.max_cost is not None:
        last = max(k for k in range(len(prices)) if prices[k] <= model.max_cost * (1 + 1e-12))
    split = costs.arrays(num_features)[2]
    zero = np.zeros(num_features)

    def row_at(k):
        row = np.full((1, num_features), np.nan)
        for u in model.order_[:model.stage_units_[k]]:
            for f in model.units_[u]:
                row[0, f] = x[f]
        return row
    k, prediction, evaluation = 0, float(np.mean(model.mean_)), 0.0
    while k < last:
        if k == 0:
            gap = model.gap0_
        else:
            gap = float(model.gaps_[k - 1].predict(row_at(k))[0])
            evaluation += reference_costs(model.gaps_[k - 1], row_at(k), zero, split)[1][0]
        if gap <= model.tradeoff * model.scale_:
            break
        k += 1
        prediction = float(model.stages_[k - 1].predict(row_at(k))[0])
        evaluation += reference_costs(model.stages_[k - 1], row_at(k), zero, split)[1][0]
    lazy = costs.arrays(num_features)[0]
    group_of, group_lazy, _ = costs.group_arrays(num_features)
    features = {f for u in model.order_[:model.stage_units_[k]] for f in model.units_[u]}
    groups = {int(group_of[f]) for f in features if group_of[f] >= 0}
    return k, prediction, sum(lazy[f] for f in features) + sum(group_lazy[g] for g in groups), evaluation


@settings(max_examples=12, deadline=None, derandomize=True)
@given(st.integers(0, 10_000), st.sampled_from([0.0, 0.05, 0.2, 0.6]), st.sampled_from([None, 2.0, 6.0]))
def test_the_exit_rule_equals_an_independent_simulation(seed, tradeoff, max_cost):
    model, X, _, costs, _ = fitted(seed, tradeoff=tradeoff, max_cost=max_cost)
    result = model.predict_result(X[:50])
    for i, x in enumerate(X[:50]):
        k, prediction, lazy, evaluation = simulate(model, x, costs)
        assert result.stage[i] == k
        assert result.prediction[i] == pytest.approx(prediction, rel=1e-12, abs=1e-15)
        assert result.cost.acquisition[i] == pytest.approx(lazy, rel=1e-12, abs=1e-12)
        assert result.cost.evaluation[i] == pytest.approx(evaluation, rel=1e-12, abs=1e-12)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(st.integers(0, 10_000))
def test_one_pass_answers_every_setting_to_the_bit(seed):
    model, X, _, _, rng = fitted(seed)
    settings_ = [{"tradeoff": float(t), "max_cost": c} for t in rng.uniform(0, 0.8, 3) for c in (None, 1.0, 4.0)]
    for setting, result in zip(settings_, model.predict_results(X, settings_)):
        own = copy.copy(model).set_params(**setting).predict_result(X)
        for field in ("prediction", "stage", "known"):
            np.testing.assert_array_equal(getattr(result, field), getattr(own, field))
        np.testing.assert_array_equal(result.cost.per_instance, own.cost.per_instance)


def test_the_gap_models_and_the_scale():
    model, X, y, _, _ = fitted(3)
    assert len(model.gaps_) == len(model.stages_) - 1 and model.scale_ == pytest.approx(np.std(y), rel=0.2)
    # at first_value() every row stops at stage 0 (predicting the mean), just below it every row buys stage 1
    scale = model.first_value()
    nothing = copy.copy(model).set_params(tradeoff=scale).predict_result(X)
    assert (nothing.stage == 0).all() and nothing.cost.acquisition.sum() == 0
    np.testing.assert_array_equal(nothing.prediction, np.full(len(X), model.mean_))
    assert (copy.copy(model).set_params(tradeoff=scale * 0.99).predict_result(X).stage >= 1).all()
    everything = copy.copy(model).set_params(tradeoff=0.0).predict_result(X)
    last = model.stages_[-1].predict(model._masked(X, len(model.stages_)))
    settled = everything.stage < len(model.stages_)  # a gap predicted at 0 or below stops a row early
    np.testing.assert_array_equal(everything.prediction[~settled], last[~settled])
    # a larger tradeoff never buys more for a row
    cheaper = copy.copy(model).set_params(tradeoff=0.3).predict_result(X)
    assert (cheaper.stage <= everything.stage).all()


def test_lazy_serving_fetches_the_stages_units_and_predicts_as_the_model():
    model, X, _, _, _ = fitted(5, tradeoff=0.2)
    calls = []

    def fetch(key, ids):
        calls.append((key, list(ids)))
        members = model.costs_.groups["pair"] if model.costs_.groups else []
        return X[np.asarray(ids)][:, members] if key == "pair" else X[np.asarray(ids), key]

    lazy = LazyPredictor(model, fetch, feature_keys="index")
    result = lazy.acquire(np.full(X.shape, np.nan))
    expected = model.predict_result(X)
    np.testing.assert_array_equal(result.prediction, expected.prediction)
    np.testing.assert_array_equal(result.acquisition, expected.cost.acquisition)
    np.testing.assert_array_equal(result.fetched, expected.known)
    pairs = [(key, i) for key, ids in calls for i in ids]
    assert len(pairs) == len(set(pairs))
    with pytest.raises(CEGBError, match=r"predicts with 'predict' with no arguments, got 'predict_proba'"):
        lazy.acquire(np.full(X.shape, np.nan), method="predict_proba")


@settings(max_examples=6, deadline=None, derandomize=True)
@given(st.integers(0, 10_000))
def test_the_compiled_stages_and_gaps_predict_as_lightgbm_to_the_bit(seed):
    model, X, _, _, rng = fitted(seed)
    compiled_stages_predict_as_lightgbm(model, "stages", model.stages_, model._stage_prediction, X, rng)
    compiled_stages_predict_as_lightgbm(model, "gaps", model.gaps_, model._gap, X, rng)


def test_save_and_load(tmp_path):
    model, X, _, _, _ = fitted(7, tradeoff=0.1)
    model.save(tmp_path / "m")
    again = StagedAcquisitionRegressor.load(tmp_path / "m")
    np.testing.assert_array_equal(again.predict(X), model.predict(X))
    np.testing.assert_array_equal(again.prediction_cost(X).per_instance, model.prediction_cost(X).per_instance)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("scale", 0.0, "scale should be a finite number above 0, got 0.0"),
    ("gap0", -1.0, "gap0 should be a finite number >= 0, got -1.0"),
    ("mean", "x", "mean should be a finite number, got 'x'")])
def test_a_saved_state_is_checked(tmp_path, key, value, message):
    import json
    model, _, _, _, _ = fitted(8)
    model.save(tmp_path / "m")
    path = tmp_path / "m" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["state"][key] = value
    path.write_text(json.dumps(manifest))
    with pytest.raises(CEGBError, match=message):
        StagedAcquisitionRegressor.load(tmp_path / "m")


def test_bad_inputs_are_refused_by_name():
    X, y, costs, _ = random_case(2)
    model = StagedAcquisitionRegressor(feature_costs=costs, stages=3, n_estimators=10)
    with pytest.raises(CEGBError, match=r"y should hold finite numbers, got inf in row 4"):
        model.fit(X, np.where(np.arange(len(y)) == 4, np.inf, y))
    with pytest.raises(CEGBError, match=r"eval_set should be a tuple \(X_valid, y_valid\)"):
        model.fit(X, y, eval_set=[X, y])
    fitted_model = model.fit(X, y, eval_set=(X[:50], y[:50]))
    with pytest.raises(CEGBError, match="tradeoff and max_cost only"):
        fitted_model.predict_results(X, [{"top_k": 1}])


@parametrize_with_checks([StagedAcquisitionRegressor(stages=4, n_estimators=20, random_state=0)])
def test_scikit_learn_checks(estimator, check):
    check(estimator)


def test_the_sweep_and_fit_within_budget_run_it():
    from lightgbm_cegb.selection import fit_within_budget, sweep
    from lightgbm_cegb.selection.workflows import BUDGET_METHODS
    assert "staged_acquisition_regressor" in BUDGET_METHODS
    X, y, costs, _ = random_case(9, n=600)
    train, valid = (X[:400], y[:400]), (X[400:], y[400:])
    frame = sweep(["staged_acquisition_regressor"], train, valid, costs, task="regression", progress=False)
    points = frame[frame["method"] == "staged_acquisition_regressor"]
    assert len(points) > 10 and points["cost"].min() < points["cost"].max()
    for _, point in points.sample(5, random_state=0).iterrows():
        model = point["model"].fitted_model()
        assert point["cost"] == pytest.approx(model.prediction_cost(valid[0]).mean, rel=1e-12)
    budget = float(points["cost"].median())
    chosen = fit_within_budget(train, valid, costs, budget, task="regression",
                               methods=["staged_acquisition_regressor"], progress=False)
    assert chosen.valid_cost <= budget * (1 + 1e-9)
