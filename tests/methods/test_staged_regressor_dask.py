"""StagedAcquisitionRegressor fitted from Dask collections (issue 59, item 3): fits on a ``distributed.LocalCluster``'s
two worker processes (arrays and DataFrames, eval_set or held-out rows) against the same rows fitted in memory, its
results, costs and lazy serving of Dask rows against the in-memory ones, and the refusals."""

from __future__ import annotations

import copy

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from lightgbm_cegb import CEGBError, FeatureCosts, LazyPredictor, StagedAcquisitionRegressor
from lightgbm_cegb.methods import dask_stages
from lightgbm_cegb.methods.dask_stages import l2

COSTS = FeatureCosts(lazy=[1.0, 2.0, 4.0, 8.0, 1.0, 3.0, 6.0, 12.0], groups={"g": [6, 7]}, group_lazy=[2.0])
NAMES = [f"f{j}" for j in range(8)]


def make_rows(n: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = np.nan_to_num(X[:, 0]) + 2 * np.nan_to_num(X[:, 1]) * (np.nan_to_num(X[:, 2]) > 0) \
        + np.nan_to_num(X[:, 6]) ** 2 + 0.3 * rng.normal(size=n)
    return X, y


@pytest.fixture(scope="module")
def rows():
    X, y = make_rows(5000, 0)
    return X[:4000], y[:4000], X[4000:], y[4000:]


def rmse(model, X, y) -> float:
    return float(np.sqrt(np.mean((model.predict(X) - y) ** 2)))


def clone_at(model, tradeoff: float):
    """A copy of a fitted model reading another ``tradeoff`` (read when predicting)."""
    return copy.copy(model).set_params(tradeoff=tradeoff)


def test_fit_from_a_dask_array_serves_as_the_rows_in_memory(rows, client):
    """A Dask array of uneven chunks, eval_set in memory: every stage stops before its cap at its least held-out l2,
    the gap models learn on the eval_set rows, test RMSE within 3% of the in-memory fit's with every row at the last
    stage and within 20% at trade-off 0.3, and the model's results, costs and lazy predictions of Dask rows equal its
    own of the rows in memory. The gap models (500 rows) amplify the distributed stages' differences: from Dask, 0.900
    to 1.052 at 0.3 over six fits of these rows, 0.945 in memory; 0.845 to 0.857 at 0, 0.840 in memory."""
    X, y, X_test, y_test = rows
    chunks = (1500, 1, 999, 1500)
    options = {"feature_costs": COSTS, "stages": 4, "tradeoff": 0.3, "random_state": 0}
    stop = (X_test[:500], y_test[:500])
    fitted = StagedAcquisitionRegressor(**options).fit(da.from_array(X, chunks=(chunks, 8)),
                                                       da.from_array(y, chunks=(chunks,)), eval_set=stop)
    memory = StagedAcquisitionRegressor(**options).fit(X, y, eval_set=stop)
    for tradeoff, within in ((0.0, 1.03), (0.3, 1.20)):  # every row to the last stage; the gap models' stops
        assert rmse(clone_at(fitted, tradeoff), X_test[500:], y_test[500:]) < \
            within * rmse(clone_at(memory, tradeoff), X_test[500:], y_test[500:])
    assert fitted.mean_ == pytest.approx(float(y.mean()), abs=1e-12)
    assert fitted.scale_ == pytest.approx(float(y.std()), abs=1e-12)
    assert len(fitted.gaps_) == len(fitted.stages_) - 1 >= 1
    for k, stage in enumerate(fitted.stages_, start=1):
        assert 1 <= stage.num_trees() < fitted.n_estimators
        masked = fitted._masked(stop[0], k)
        losses = [l2(stage.predict(masked, num_iteration=i), stop[1], None) for i in range(1, stage.num_trees() + 1)]
        assert np.argmin(losses) == len(losses) - 1
    dX_test = da.from_array(X_test, chunks=(333, 8))
    got, expected = fitted.predict_result(dX_test), fitted.predict_result(X_test)
    for name in ("prediction", "stage", "known"):
        np.testing.assert_array_equal(getattr(got, name), getattr(expected, name))
    np.testing.assert_array_equal(got.cost.per_instance, expected.cost.per_instance)
    np.testing.assert_array_equal(fitted.predict(dX_test), fitted.predict(X_test))
    np.testing.assert_array_equal(fitted.prediction_cost(dX_test).per_instance, expected.cost.per_instance)
    settings_ = [{"tradeoff": 0.0}, {"tradeoff": 1.0}, {"max_cost": 7.0}]
    for a, b in zip(fitted.predict_results(dX_test, settings_), fitted.predict_results(X_test, settings_)):
        np.testing.assert_array_equal(a.prediction, b.prediction)
        np.testing.assert_array_equal(a.cost.per_instance, b.cost.per_instance)
    lazy = LazyPredictor(fitted, lambda key, ids: X_test[ids][:, [6, 7]] if key == "g" else X_test[ids, key],
                         feature_keys="index")
    nothing = da.from_array(np.full_like(X_test, np.nan), chunks=(333, 8))
    np.testing.assert_array_equal(lazy.predict(nothing), fitted.predict(X_test))


def test_fit_from_a_dask_dataframe_holds_rows_out_for_the_stages_and_the_gap_models(rows, client, monkeypatch):
    """A Dask DataFrame with named columns and costs by name, no eval_set: a fifth of the rows held out partition by
    partition stops the stages and teaches the gap models; the mean is the trained rows'."""
    X, y, X_test, y_test = rows
    costs = {name: cost for name, cost in zip(NAMES, [1.0, 2.0, 4.0, 8.0, 1.0, 3.0, 6.0, 12.0])}
    seen = []

    def recorded(estimator, params, train, weights, columns, init, stop, *args):
        seen.append((train.labels.compute(), stop))
        return original(estimator, params, train, weights, columns, init, stop, *args)

    original = dask_stages.trained
    monkeypatch.setattr(dask_stages, "trained", recorded)
    frame = pd.DataFrame(X, columns=NAMES)
    fitted = StagedAcquisitionRegressor(feature_costs=costs, stages=3, random_state=1).fit(
        dd.from_pandas(frame, npartitions=3), dd.from_pandas(pd.Series(y), npartitions=3))
    memory = StagedAcquisitionRegressor(feature_costs=costs, stages=3, random_state=1).fit(frame, y)
    assert list(fitted.feature_names_in_) == NAMES
    assert fitted.stages_[-1].feature_name() == fitted.gaps_[0].feature_name() == NAMES
    trained, (X_stop, y_stop) = seen[0]
    assert 3000 < len(trained) < 3400 and len(trained) + len(y_stop) == len(y)
    assert fitted.mean_ == pytest.approx(float(trained.mean()), abs=1e-12)
    final = fitted._stage_prediction(len(fitted.stages_), fitted._masked(X_stop, len(fitted.stages_)))
    assert fitted.gap0_ == pytest.approx(float(np.abs(final - fitted.mean_).mean()), abs=1e-12)
    test = pd.DataFrame(X_test, columns=NAMES)
    assert rmse(fitted, test, y_test) < 1.20 * rmse(memory, test, y_test)


def test_without_held_out_rows_the_gap_models_learn_on_drawn_training_rows(rows, client, monkeypatch):
    X, y, X_test, y_test = rows
    monkeypatch.setattr(dask_stages, "HELD_OUT_ROWS", 1000)
    fitted = StagedAcquisitionRegressor(feature_costs=COSTS, stages=3, validation_fraction=0.0, n_estimators=100,
                                        random_state=2).fit(da.from_array(X, chunks=(1000, 8)),
                                                            da.from_array(y, chunks=1000))
    assert all(stage.num_trees() == 100 for stage in fitted.stages_)  # nothing stops them
    assert len(fitted.gaps_) == len(fitted.stages_) - 1 and rmse(fitted, X_test, y_test) < float(y_test.std())


def test_refusals_name_what_is_wrong(rows, client):
    X, y, _, _ = rows
    dX, dy = da.from_array(X, chunks=1000), da.from_array(y, chunks=1000)
    model = StagedAcquisitionRegressor(stages=2)
    cases = [
        ((dX, y), {}, "y: with X a Dask collection, y should be a Dask array or Series of its targets"),
        ((dX, dy[:-1]), {}, "y should hold 4000 targets"),
        ((dX, da.where(da.arange(4000) == 3, np.nan, dy)), {}, "y should hold finite numbers"),
        ((dX, da.from_array(y.astype(str), chunks=1000)), {}, "y should hold finite numbers, got <U"),
        ((da.where(da.arange(4000)[:, None] == 17, np.inf, dX), dy), {}, "finite numbers or NaN"),
        ((dX, dy), {"eval_set": [(X[:10], y[:10])]}, r"eval_set should be a tuple \(X_valid, y_valid\)"),
        ((dX, dy), {"eval_set": (X[:10], y[:9])}, "eval_set: y_valid should hold 10 targets"),
    ]
    for (X_, y_), params, message in cases:
        with pytest.raises(CEGBError, match=message):
            model.fit(X_, y_, **params)
