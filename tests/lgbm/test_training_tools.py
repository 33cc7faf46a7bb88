"""Cost callbacks (lgb.train, lgb.cv, scikit-learn API) and the scikit-learn estimators."""

from __future__ import annotations

import pickle
import warnings

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from lightgbm_cegb import CEGBError, FeatureCosts, prediction_cost
from lightgbm_cegb.lgbm.callbacks import budget_stopping, record_cost
from lightgbm_cegb.lgbm.cegb_estimators import CEGBClassifier, CEGBRanker, CEGBRegressor

COSTS = FeatureCosts(lazy=[1.0, 2.0, 4.0, 8.0, 16.0], split=0.1)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 5))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 4]) * 0.5 + rng.normal(0, 0.3, 1500)
    return X[:1000], y[:1000], X[1000:], y[1000:]


PARAMS = {"objective": "regression", "num_leaves": 15, "verbose": -1, "learning_rate": 0.2}


def test_record_cost_matches_prediction_cost(data):
    X, y, Xv, _ = data
    result = {}
    booster = lgb.train(PARAMS, lgb.Dataset(X, y), 25, callbacks=[record_cost(Xv, COSTS, result)])
    full = prediction_cost(booster, Xv, COSTS, per_iteration=True)
    assert len(result["cost"]) == 25
    np.testing.assert_allclose(result["cost"], full.curve, rtol=1e-12)
    np.testing.assert_allclose(np.add(result["acquisition"], result["evaluation"]), result["cost"], rtol=1e-12)
    assert np.all(np.diff(result["cost"]) >= 0)


def test_record_cost_with_a_tree_cost(data):
    X, y, Xv, _ = data
    costs = FeatureCosts(lazy=COSTS.lazy, split=COSTS.split, tree=0.5)
    result = {}
    booster = lgb.train(PARAMS, lgb.Dataset(X, y), 10, callbacks=[record_cost(Xv, costs, result)])
    np.testing.assert_allclose(result["cost"], prediction_cost(booster, Xv, costs, per_iteration=True).curve,
                               rtol=1e-12)
    np.testing.assert_allclose(np.subtract(result["cost"],
                                           prediction_cost(booster, Xv, COSTS, per_iteration=True).curve),
                               0.5 * np.arange(1, 11), rtol=1e-9)


def test_record_cost_reads_costs_from_params_and_survives_pickle(data):
    X, y, Xv, _ = data
    callback = pickle.loads(pickle.dumps(record_cost(Xv, eval_result={})))
    params = {**PARAMS, **COSTS.to_params(tradeoff=0.01)}
    booster = lgb.train(params, lgb.Dataset(X, y), 10, callbacks=[callback])
    np.testing.assert_allclose(callback.eval_result["cost"][-1], prediction_cost(booster, Xv).mean, rtol=1e-12)


def test_budget_stopping_keeps_last_iteration_within_budget(data):
    X, y, Xv, yv = data
    curve = prediction_cost(lgb.train(PARAMS, lgb.Dataset(X, y), 40), Xv, COSTS, per_iteration=True).curve
    budget = float((curve[10] + curve[11]) / 2) if curve[11] > curve[10] else float(curve[10])
    expected_best = int(np.flatnonzero(curve <= budget)[-1]) + 1
    assert expected_best < 40
    booster = lgb.train(PARAMS, lgb.Dataset(X, y), 40, valid_sets=[lgb.Dataset(Xv, yv)],
                        callbacks=[budget_stopping(Xv, COSTS, budget, verbose=False)], keep_training_booster=True)
    assert booster.best_iteration == expected_best
    assert prediction_cost(booster, Xv, COSTS).mean <= budget  # the default num_iteration is the best one
    assert prediction_cost(booster, Xv, COSTS, num_iteration=booster.current_iteration()).mean > budget


@pytest.mark.parametrize("stopping_first", [False, True])
def test_callbacks_keep_their_order_whatever_the_list_order(data, stopping_first):
    """record_cost (order 20) runs before budget_stopping (29) however they are listed: lgb.train gives a
    callback without an instance ``order`` its list position, which once shadowed the class attribute, so a
    budget_stopping listed first stopped training before the stopping iteration's cost was recorded."""
    X, y, Xv, yv = data
    curve = prediction_cost(lgb.train(PARAMS, lgb.Dataset(X, y), 40), Xv, COSTS, per_iteration=True).curve
    budget = float(curve[5])
    result = {}
    callbacks = [record_cost(Xv, COSTS, result), budget_stopping(Xv, COSTS, budget, verbose=False)]
    booster = lgb.train(PARAMS, lgb.Dataset(X, y), 40, valid_sets=[lgb.Dataset(Xv, yv)],
                        callbacks=callbacks[::-1] if stopping_first else callbacks, keep_training_booster=True)
    assert [cb.order for cb in callbacks] == [20, 29]
    assert len(result["cost"]) == booster.current_iteration() < 40
    np.testing.assert_allclose(result["cost"], curve[:booster.current_iteration()], rtol=1e-12)


def test_cost_callbacks_follow_a_training_that_runs_out_of_splits(data):
    """When no split is left LightGBM adds no tree but keeps calling the callbacks: the cost stays put
    (stock LightGBM's own message: 'Stopped training because there are no more leaves that meet the
    split requirements')."""
    X, y, Xv, _ = data
    params = {**PARAMS, "min_data_in_leaf": 200, "num_leaves": 3, "learning_rate": 1.0, "lambda_l2": 0.0,
              "min_gain_to_split": 50.0}
    result = {}
    booster = lgb.train(params, lgb.Dataset(X, y), 30, callbacks=[record_cost(Xv, COSTS, result),
                                                                  budget_stopping(Xv, COSTS, 1e9, verbose=False)])
    assert booster.current_iteration() < 30 and len(result["cost"]) == 30
    np.testing.assert_allclose(result["cost"][-1], prediction_cost(booster, Xv, COSTS).mean, rtol=1e-12)


@pytest.mark.parametrize("early_stopping", [False, True])
def test_budget_stopping_keeps_the_best_validation_iteration_within_budget(early_stopping):
    # an overfitting model: validation loss turns up long before the cost stops growing
    rng = np.random.default_rng(3)
    X = rng.normal(size=(600, 5))
    y = X[:, 0] + rng.normal(0, 1.0, 600)
    params = {**PARAMS, "learning_rate": 0.5, "num_leaves": 31, "min_data_in_leaf": 3}
    train, valid = lgb.Dataset(X[:300], y[:300]), lgb.Dataset(X[300:], y[300:])
    history = {}
    full = lgb.train(params, train, 60, valid_sets=[valid], callbacks=[lgb.record_evaluation(history)])
    loss = np.array(history["valid_0"]["l2"])
    curve = prediction_cost(full, X[300:], COSTS, per_iteration=True).curve
    budget = float(curve[40])
    within = np.flatnonzero(curve <= budget)
    expected = int(within[np.argmin(loss[within])]) + 1
    assert expected < within[-1] + 1  # the point of the test: the last iteration within budget is worse
    callbacks = [budget_stopping(X[300:], COSTS, budget, verbose=False)]
    if early_stopping:
        callbacks.append(lgb.early_stopping(100, verbose=False))  # patient: the budget stops first
    booster = lgb.train(params, train, 60, valid_sets=[valid], callbacks=callbacks)
    assert booster.best_iteration == expected
    assert booster.best_score["valid_0"]["l2"] == pytest.approx(loss[expected - 1], rel=1e-12)


def test_record_cost_with_cv_has_the_folds_spread(data):
    X, y, Xv, _ = data
    result = {}
    cv = lgb.cv(PARAMS, lgb.Dataset(X, y), 8, nfold=3, stratified=False, return_cvbooster=True,
                callbacks=[record_cost(Xv, COSTS, result)])
    per_fold = np.array([prediction_cost(b, Xv, COSTS, per_iteration=True).curve for b in cv["cvbooster"].boosters])
    np.testing.assert_allclose(result["cost"], per_fold.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(result["cost-stdv"], per_fold.std(axis=0), rtol=1e-9, atol=1e-12)
    assert max(result["cost-stdv"]) > 0


def test_budget_stopping_with_cv_and_sklearn(data):
    X, y, Xv, _ = data
    result = lgb.cv(PARAMS, lgb.Dataset(X, y), 40, nfold=3, stratified=False, return_cvbooster=True,
                    callbacks=[budget_stopping(Xv, COSTS, 20.0, verbose=False)])
    cvbooster = result["cvbooster"]
    assert 0 < cvbooster.best_iteration < 40
    means = [prediction_cost(b, Xv, COSTS, num_iteration=cvbooster.best_iteration).mean for b in cvbooster.boosters]
    assert np.mean(means) <= 20.0

    model = lgb.LGBMRegressor(n_estimators=40, num_leaves=15, learning_rate=0.2, verbose=-1)
    model.fit(X, y, callbacks=[budget_stopping(Xv, COSTS, 20.0, verbose=False)])
    assert 0 < model.best_iteration_ < 40
    assert prediction_cost(model, Xv, COSTS).mean <= 20.0


def test_callback_errors(data):
    X, y, Xv, _ = data
    with pytest.raises(CEGBError, match=r"budget should be a finite number >= 0, got -1\.0"):
        budget_stopping(Xv, COSTS, -1.0)
    with pytest.raises(CEGBError, match=r"eval_result should be a dict to fill, got None"):
        record_cost(Xv, COSTS)
    with pytest.raises(CEGBError, match=r"costs is None and the model was not trained with cegb_\* parameters"):
        lgb.train(PARAMS, lgb.Dataset(X, y), 3, callbacks=[record_cost(Xv, eval_result={})])
    with pytest.raises(CEGBError, match=r"X has 3 features but the model has 5"):
        lgb.train(PARAMS, lgb.Dataset(X, y), 3, callbacks=[record_cost(Xv[:, :3], COSTS, {})])


# -------------------------------------------------------------------------------------------- sklearn


def test_estimator_trains_with_costs_by_name(data):
    X, y, Xv, _ = data
    names = ["cheap", "a", "b", "c", "pricey"]
    frame = pd.DataFrame(X, columns=names)
    costs = {"cheap": 1.0, "pricey": 100.0}
    model = CEGBRegressor(feature_costs=costs, cegb_tradeoff=0.05, n_estimators=30, num_leaves=15, verbose=-1)
    model.fit(frame, y)
    free = CEGBRegressor(n_estimators=30, num_leaves=15, verbose=-1).fit(frame, y)
    assert "feature_costs" not in model.booster_.params
    assert model.booster_.params["cegb_penalty_feature_lazy"] == [1.0, 0.0, 0.0, 0.0, 100.0]
    report = model.prediction_cost(pd.DataFrame(Xv, columns=names))
    free_report = prediction_cost(free, Xv, FeatureCosts(lazy=costs).align(names))
    assert report.usage[4] < free_report.usage[4]  # the expensive feature is bought for fewer rows
    assert report.mean < free_report.mean


def test_estimator_bad_costs(data):
    X, y, _, _ = data
    with pytest.raises(CEGBError, match=r"feature_costs should be a FeatureCosts, a mapping"):
        CEGBRegressor(feature_costs=[1, 2, 3, 4, 5], verbose=-1).fit(X, y)
    with pytest.raises(CEGBError, match=r"lazy costs name unknown features \['x9'\]"):
        CEGBRegressor(feature_costs={"x9": 1.0}, verbose=-1).fit(X, y)
    # issue 48 (13): LightGBM's messages before, naming its parameter or its C++ source
    with pytest.raises(CEGBError, match=r"feature_costs: the costs are for 2 features but X has 5 columns"):
        CEGBClassifier(feature_costs=FeatureCosts(lazy=[1, 2]), verbose=-1).fit(X, y > 0)
    for tradeoff in (-0.1, np.nan, "0.1", None):
        with pytest.raises(CEGBError, match=r"cegb_tradeoff should be a finite number >= 0, got"):
            CEGBClassifier(feature_costs=FeatureCosts(lazy=[1] * 5), cegb_tradeoff=tradeoff, verbose=-1).fit(X, y > 0)


@parametrize_with_checks([CEGBRegressor(), CEGBClassifier(),
                          CEGBRegressor(feature_costs=FeatureCosts(split=0.01), cegb_tradeoff=0.5)])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_ranker(data):
    X, y, Xv, _ = data
    group = [50] * 20
    labels = np.digitize(y, np.quantile(y, [0.5, 0.8]))
    model = CEGBRanker(feature_costs=FeatureCosts(lazy=[1, 1, 1, 1, 50]), cegb_tradeoff=0.01, n_estimators=10,
                       verbose=-1).fit(X, labels, group=group)
    assert model.prediction_cost(Xv).mean > 0


def test_estimator_warns_when_the_tradeoff_leaves_no_split(data):
    X, y, _, _ = data
    with pytest.warns(UserWarning, match=r"cegb_tradeoff=1000: the model has no split .* lower cegb_tradeoff"):
        CEGBRegressor(feature_costs=COSTS, cegb_tradeoff=1000.0, n_estimators=5, verbose=-1).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CEGBRegressor(feature_costs=COSTS, cegb_tradeoff=0.001, n_estimators=5, verbose=-1).fit(X, y)


def test_ranker_passes_the_sklearn_checks_stock_lgbmranker_passes():
    """scikit-learn's checks call fit without ``group``, which every LightGBM ranker needs ("Should set group
    for ranking task"): CEGBRanker must run the same checks as stock LGBMRanker and fail no other one."""
    from sklearn.utils.estimator_checks import check_estimator

    outcomes = {}
    for estimator in (lgb.LGBMRanker(), CEGBRanker()):  # (about 20 s for both)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results = check_estimator(estimator, on_fail=None)
        outcomes[type(estimator).__name__] = ({r["check_name"] for r in results},
                                              {r["check_name"] for r in results if r["status"] == "failed"})
    (stock_run, stock_failed), (ours_run, ours_failed) = outcomes["LGBMRanker"], outcomes["CEGBRanker"]
    assert ours_run == stock_run
    # all-zero sample weights are refused before LightGBM sees them (stock trains on them)
    assert ours_failed == stock_failed - {"check_all_zero_sample_weights_error"}
    assert "check_all_zero_sample_weights_error" in stock_failed
    assert len(stock_run - stock_failed) >= 10  # the checks that do not fit pass for both
