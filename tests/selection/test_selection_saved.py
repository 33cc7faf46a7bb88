"""Selection.save / load: the chosen model of every kind the format holds comes back predicting and costing as it
did, with its method, parameters, figures and costs; LazyPredictor and prediction_cost take a Selection with its
costs; a model the format does not hold, and a damaged folder, are refused by name."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

from lightgbm_cegb import FeatureCosts, LazyPredictor, prediction_cost, to_forest
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.selection import Selection, select, sweep

COSTS = FeatureCosts(lazy=[1.0, 1.0, 5.0, 5.0, 20.0, 20.0], split=0.5)


@pytest.fixture(scope="module")
def rows():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(1500, 6))  # no missing values: Greedy Miser and BudgetRF take none (issue 46)
    y = ((X[:, 0] + X[:, 2] + 0.5 * X[:, 4] + rng.normal(0, 0.5, 1500)) > 0).astype(int)
    return (X[:900], y[:900]), (X[900:1200], y[900:1200]), (X[1200:], y[1200:])


@pytest.fixture(scope="module")
def frontier(rows):
    train, valid, _ = rows
    grid = {"cegb": [{"relative_tradeoff": 0.1}], "greedy_miser": [{"relative_tradeoff": 0.3}],
            "budgetrf": [{"tradeoff": 2.0, "n_estimators": 4, "trees": (4,)}],
            "staged_acquisition": [{"relative_tradeoff": 0.5, "max_cost": 30.0}]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sweep(["lightgbm", "cegb", "greedy_miser", "budgetrf", "staged_acquisition"], train, valid, COSTS,
                     task="binary", grid=grid, params={"num_leaves": 8}, num_boost_round=30)


def predictions(model, X):
    proba = getattr(model, "predict_proba", None)
    return np.asarray(proba(X) if callable(proba) else model.predict(X))


@pytest.mark.parametrize("method", ["lightgbm", "cegb", "greedy_miser", "budgetrf", "staged_acquisition"])
def test_every_kind_of_chosen_model_round_trips(frontier, rows, method, tmp_path):
    points = frontier[frontier["method"] == method]
    assert len(points), f"the sweep has no {method} point"
    X_test, _ = rows[2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chosen = select(points, 1e9, test=rows[2])
    chosen.save(tmp_path / "choice")
    loaded = Selection.load(tmp_path / "choice")
    assert (loaded.method, loaded.params, loaded.within_budget) == (chosen.method, chosen.params, chosen.within_budget)
    assert (loaded.valid_quality, loaded.valid_cost, loaded.test_quality, loaded.test_cost) == \
        (chosen.valid_quality, chosen.valid_cost, chosen.test_quality, chosen.test_cost)
    assert loaded.costs.to_dict(6) == chosen.costs.to_dict(6) and loaded.candidate is None and loaded.frontier is None
    assert type(loaded.model) is type(chosen.model)
    np.testing.assert_array_equal(predictions(loaded.model, X_test), predictions(chosen.model, X_test))
    np.testing.assert_array_equal(loaded.prediction_cost(X_test).per_instance,
                                  chosen.prediction_cost(X_test).per_instance)
    if method != "staged_acquisition":  # a policy, not a forest
        assert to_forest(loaded).num_trees == to_forest(chosen.model).num_trees
    # a Selection carries its costs into serving and accounting
    lazy = LazyPredictor(loaded, lambda key, ids: X_test[ids, key], feature_keys="index")
    assert lazy.costs_.to_dict(6) == chosen.costs.to_dict(6)
    result = lazy.acquire(np.full_like(X_test, np.nan))
    if method != "staged_acquisition":
        np.testing.assert_array_equal(result.prediction, np.asarray(chosen.model.predict(X_test)))
        np.testing.assert_allclose(result.per_instance, prediction_cost(loaded, X_test).per_instance, rtol=1e-12)
        np.testing.assert_array_equal(prediction_cost(loaded, X_test).per_instance,
                                      prediction_cost(chosen.model, X_test, chosen.costs).per_instance)
    else:  # a policy: it buys by its own fitted costs
        np.testing.assert_array_equal(result.prediction, chosen.model.predict(X_test))


def test_a_model_the_format_does_not_hold_is_refused_by_name(rows, tmp_path):
    (X, y), _, _ = rows
    forest = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y)
    choice = Selection("sklearn", {}, forest, None, 0.5, 1.0, costs=COSTS)
    with pytest.raises(CEGBError, match="the chosen model is a RandomForestClassifier, which the package's format "
                                        "does not hold"):
        choice.save(tmp_path / "choice")
    assert not (tmp_path / "choice").exists()


def test_a_damaged_saved_selection_is_refused_by_name(frontier, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chosen = select(frontier[frontier["method"] == "greedy_miser"], 1e9)
    chosen.save(tmp_path / "choice")
    manifest_path = tmp_path / "choice" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    for change, message in [(("model", "estimator"), "the chosen model is a 'NoSuchEstimator', not an estimator"),
                            (("model", "kind"), "model kind should be 'booster', 'early_exit' or 'estimator'")]:
        damaged = json.loads(json.dumps(manifest))
        damaged["state"][change[0]][change[1]] = "NoSuchEstimator" if change[1] == "estimator" else "pickle"
        manifest_path.write_text(json.dumps(damaged))
        with pytest.raises(CEGBError, match=message):
            Selection.load(tmp_path / "choice")
    manifest_path.write_text(json.dumps({**manifest, "estimator": "GreedyMiserClassifier"}))
    with pytest.raises(CEGBError, match="Selection"):
        Selection.load(tmp_path / "choice")


@pytest.mark.parametrize(("path", "value", "message"), [
    (("valid_quality",), "x", r"\(state\): valid_quality should be a number or null, got 'x'"),
    (("test_cost",), [1], r"\(state\): test_cost should be a number or null, got \[1\]"),
    (("classes",), [1, 0], r"\(state\): classes should be 2 or more distinct labels .* in sorted order"),
    (("task",), "regression", r"\(state\): classes: 2 labels are not a 'regression' task's"),
    (("task",), ["binary"], r"\(state\): task should be binary, multiclass, regression, ranking or null"),
    (("model", "params"), [1], r"\(the chosen model\): params should be a mapping, got \[1\]"),
    (("model", "n_features_in"), "6", r"\(the chosen model\): n_features_in should be an integer >= 1, got '6'"),
    (("model", "state"), None, r"the chosen model's description lacks \['state'\]"),
    (("model", "estimator"), "_GreedyMiser", r"the chosen model is a '_GreedyMiser', not an estimator"),
    (("model", "estimator"), "PolicyClassifier", r"the chosen model is a 'PolicyClassifier', not an estimator"),
])
def test_a_saved_selection_s_figures_classes_and_model_description_are_checked(frontier, tmp_path, path, value,
                                                                               message):
    """A review (2026-12-07): a Selection's classes out of order loaded and predicted each row's other class, a
    figure that is not a number was a ValueError or TypeError, the chosen model's description was read unchecked
    (a TypeError or KeyError) and could name one of the package's base classes."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        select(frontier[frontier["method"] == "greedy_miser"], 1e9).save(tmp_path / "choice")
    manifest_path = tmp_path / "choice" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    part = manifest["state"]
    for key in path[:-1]:
        part = part[key]
    if value is None:
        del part[path[-1]]
    else:
        part[path[-1]] = value
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(CEGBError, match=message):
        Selection.load(tmp_path / "choice")


def test_a_classifier_chosen_is_not_read_as_a_regression(frontier, tmp_path):
    """A review (2026-12-07): a Selection of a Greedy Miser classifier with its task edited to regression and its
    classes removed loaded and predicted the class codes as values. Refused at load, and such a Selection is not
    written either."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chosen = select(frontier[frontier["method"] == "greedy_miser"], 1e9)
    chosen.save(tmp_path / "choice")
    path = tmp_path / "choice" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["state"].update(task="regression", classes=None)
    path.write_text(json.dumps(manifest))
    message = (r"the chosen model is a classifier of 2 classes: task should be binary, multiclass, ranking or null "
               r"and classes its labels, got 'regression' and None")
    with pytest.raises(CEGBError, match=message):
        Selection.load(tmp_path / "choice")
    as_regression = Selection(method="greedy_miser", params={}, model=chosen.model, candidate=None, valid_quality=0.5,
                              valid_cost=1.0, task="regression")
    with pytest.raises(CEGBError, match=f"Selection.save: {message}"):
        as_regression.save(tmp_path / "regression")
    assert not (tmp_path / "regression").exists()


def test_a_multiclass_selection_of_two_classes_round_trips(rows, tmp_path):
    """A review (2026-12-07): a task="multiclass" sweep of two classes (its LightGBM model gives two scores per row)
    was refused at load ("2 labels are not a 'multiclass' task's")."""
    train, valid, (X_test, _) = rows
    labels = np.array(["no", "yes"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = sweep(["lightgbm"], (train[0], labels[train[1]]), (valid[0], labels[valid[1]]), COSTS,
                      task="multiclass", num_boost_round=20)
        chosen = select(frame, 1e9)
    chosen.save(tmp_path / "choice")
    again = Selection.load(tmp_path / "choice")
    assert again.task == "multiclass" and list(again.classes) == ["no", "yes"]
    np.testing.assert_array_equal(again.predict(X_test), chosen.predict(X_test))


def test_a_regressor_chosen_is_not_read_as_a_classifier(tmp_path):
    """A review (2026-12-07): a Selection whose task is binary and whose chosen estimator is a regressor loaded, and
    its predict_proba read the regression values as probabilities (outside [0, 1]). Refused when saved, and when a
    folder says so at load."""
    from lightgbm_cegb import CEGBRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    model = CEGBRegressor(n_estimators=3, verbose=-1, n_jobs=1).fit(X, 5.0 * X[:, 0])
    message = r"task 'binary' needs a classifier, got the chosen model a CEGBRegressor, which has no classes"
    mismatched = Selection(method="cegb", params={}, model=model, candidate=None, valid_quality=0.9, valid_cost=1.0,
                           task="binary", classes=np.array([0, 1]))
    with pytest.raises(CEGBError, match=f"Selection.save: {message}"):  # not written
        mismatched.save(tmp_path / "choice")
    assert not (tmp_path / "choice").exists()
    Selection(method="cegb", params={}, model=model, candidate=None, valid_quality=0.9, valid_cost=1.0,
              task="regression").save(tmp_path / "choice")
    path = tmp_path / "choice" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["state"].update(task="binary", classes=[0, 1])  # a folder edited, or written by other code
    path.write_text(json.dumps(manifest))
    with pytest.raises(CEGBError, match=message):
        Selection.load(tmp_path / "choice")


def test_a_cascade_chosen_for_ranking_round_trips_and_ranks_by_its_decision_function(tmp_path):
    """A review (2026-12-07): a ranking Selection whose chosen model is Cronus (a binary classifier of relevance, the
    sweep reading its decision_function) was saved and then refused at load ("a classifier ... task should be
    binary, multiclass or null"); loaded without that check it ranked by its class labels. It round-trips now,
    scoring as the sweep did; a classifier without a decision_function (Greedy Miser's) is refused for ranking."""
    from lightgbm_cegb import GreedyMiserClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    y = np.clip(np.round(1.5 * X[:, 0] + rng.normal(size=400)), 0, 3).astype(int)
    group = np.full(40, 10)
    costs = FeatureCosts(lazy=[1.0, 2.0, 4.0, 8.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = sweep(["cronus"], (X[:200], y[:200], group[:20]), (X[200:], y[200:], group[20:]), costs,
                      task="ranking", grid={"cronus": [{"relative_tradeoff": 1e-3}]}, num_boost_round=20)
    chosen = select(frame[[type(c.model).__name__ == "Cronus" for c in frame["model"]]], 1e9)
    chosen.save(tmp_path / "choice")
    again = Selection.load(tmp_path / "choice")
    assert type(again.model).__name__ == "Cronus" and again.task == "ranking"
    np.testing.assert_array_equal(again.predict(X), chosen.predict(X))
    np.testing.assert_array_equal(again.predict(X), chosen.model.decision_function(X))
    miser = GreedyMiserClassifier(n_estimators=3).fit(X, (y > 0).astype(int))
    with pytest.raises(CEGBError, match=r"Selection.save: task 'ranking' ranks by a classifier's decision_function "
                                        r"\(Cronus's, CSCC's\), got the chosen model a GreedyMiserClassifier, "
                                        r"which has none"):
        Selection(method="greedy_miser", params={}, model=miser, candidate=None, valid_quality=0.5, valid_cost=1.0,
                  task="ranking").save(tmp_path / "miser")


def ranking_rows(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(900, 4))
    y = np.clip(np.round(1.5 * X[:, 0] + X[:, 2] + rng.normal(size=900)), 0, 3).astype(int)
    group = np.full(60, 15)
    return [(X[a:b], y[a:b], group[a // 15:b // 15]) for a, b in ((0, 450), (450, 675), (675, 900))]


def test_an_early_exit_chosen_round_trips_and_ranks_as_the_sweep_measured(rows, tmp_path):
    """A chosen EarlyExit (the CEGB cascade, Early Exit) could not be saved ("save it with its own library"), and a
    ranking Selection of one could not predict: its predict was called without the query sizes, and EarlyExit's
    predict gave raw scores, which are not comparable across exits. It now saves its exits with its Booster, and
    ranks (with ``group``) as the sweep measured it."""
    from lightgbm_cegb.core.ranking_metrics import ndcg_at_k

    train, valid, test = ranking_rows()
    costs = FeatureCosts(lazy=[1.0, 2.0, 4.0, 8.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = sweep(["cegb_cascade"], train, valid, costs, task="ranking", baseline=False, num_boost_round=20,
                      params={"objective": "regression"}, grid={"cegb_cascade": [{"relative_tradeoff": 0.01,
                                                                                   "top_k": 4}]})
    chosen = select(frame[frame["trees"] == 20], 1e9, test=test)
    assert chosen.model.top_k == 4 and chosen.model.iterations == 20
    X_valid, y_valid, group_valid = valid
    assert ndcg_at_k(y_valid, chosen.predict(X_valid, group=group_valid), group_valid, k=5) == \
        pytest.approx(chosen.valid_quality, abs=1e-12)
    chosen.save(tmp_path / "choice")
    again = Selection.load(tmp_path / "choice")
    assert type(again.model).__name__ == "EarlyExit" and (again.model.top_k, again.model.iterations) == (4, 20)
    X_test, _, group_test = test
    np.testing.assert_array_equal(again.predict(X_test, group=group_test), chosen.predict(X_test, group=group_test))
    np.testing.assert_array_equal(again.predict(X_test[:15]), chosen.predict(X_test[:15], group=[15]))  # one query
    np.testing.assert_array_equal(again.prediction_cost(X_test, group=group_test).per_instance,
                                  chosen.prediction_cost(X_test, group=group_test).per_instance)
    assert again.prediction_cost(X_test, group=group_test).mean == pytest.approx(chosen.test_cost, rel=1e-12)
    served = LazyPredictor(again, lambda key, ids: X_test[ids, key], feature_keys="index").acquire(
        np.full_like(X_test, np.nan), group=group_test)  # served lazily, buying per exit
    np.testing.assert_array_equal(served.prediction, again.predict(X_test, group=group_test))
    cost = again.prediction_cost(X_test, group=group_test)
    np.testing.assert_array_equal(served.acquisition, cost.acquisition)
    np.testing.assert_array_equal(served.evaluation, cost.evaluation)
    manifest_path = tmp_path / "choice" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    for change, message in [({"top_k": "4"}, r"the saved early exits: top_k should be None or an integer >= 1, got "
                                             r"'4'"),
                            ({"num_iteration": 99}, "the saved early exits: num_iteration should be at most the 20 "
                                                    "iterations the model predicts with, got 99"),
                            ({"every": None}, "the saved early exits: every should be an integer >= 1, got None"),
                            ({"task": "classification"}, "the saved early exits: task: a classifier's exits read a "
                                                         "classification objective"),
                            ({"threshold": 1.0}, "the saved early exits: threshold or top_k: a ranker's exits read "
                                                 "one of them")]:
        damaged = json.loads(json.dumps(manifest))
        damaged["state"]["model"].update(change)
        manifest_path.write_text(json.dumps(damaged))
        with pytest.raises(CEGBError, match=message):
            Selection.load(tmp_path / "choice")
    damaged = json.loads(json.dumps(manifest))
    del damaged["state"]["model"]["every"], damaged["state"]["model"]["costs"]
    manifest_path.write_text(json.dumps(damaged))
    with pytest.raises(CEGBError, match=r"the saved early exits lack \['every', 'costs'\]"):
        Selection.load(tmp_path / "choice")
    # the exits keep their own costs, whatever the Selection's (none, or others)
    for others in (None, FeatureCosts(lazy=[5.0, 5.0, 5.0, 5.0])):
        Selection(method="cegb_cascade", params={}, model=chosen.model, candidate=None, valid_quality=0.5,
                  valid_cost=1.0, task="ranking", costs=others).save(tmp_path / "others")
        np.testing.assert_array_equal(
            Selection.load(tmp_path / "others").model.prediction_cost(X_test, group=group_test).per_instance,
            chosen.model.prediction_cost(X_test, group=group_test).per_instance)
    with pytest.raises(CEGBError, match=r"Selection.save: the chosen model is an EarlyExit ranking model: task should "
                                        r"be one of \['ranking', None\], got 'binary'"):
        Selection(method="cegb_cascade", params={}, model=chosen.model, candidate=None, valid_quality=0.5,
                  valid_cost=1.0, task="binary").save(tmp_path / "binary")
    # a classifier's exits round-trip too, and as a ranking's (binarised relevance, a binary objective)
    train_binary, valid_binary, test_binary = [(X, (y > 1).astype(int), group) for X, y, group in ranking_rows()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = sweep(["early_exit"], train_binary, valid_binary, costs, task="ranking", baseline=False,
                      num_boost_round=20, params={"objective": "binary"}, grid={"early_exit": [{"threshold": 0.9}]})
    chosen = select(frame, 1e9)
    chosen.save(tmp_path / "ranking_exits")
    again = Selection.load(tmp_path / "ranking_exits")
    assert again.model.kind == "classify" and again.task == "ranking"
    np.testing.assert_array_equal(again.predict(test_binary[0]), chosen.predict(test_binary[0]))
    (X, y), valid_binary, (X_test, _) = rows
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = sweep(["early_exit"], (X, y), valid_binary, COSTS, task="binary", baseline=False,
                      num_boost_round=20, grid={"early_exit": [{"threshold": 0.9}]})
    chosen = select(frame, 1e9)
    chosen.save(tmp_path / "exits")
    again = Selection.load(tmp_path / "exits")
    assert again.model.threshold == 0.9 and again.model.kind == "classify"
    np.testing.assert_array_equal(again.predict_proba(X_test), chosen.predict_proba(X_test))
    np.testing.assert_array_equal(again.prediction_cost(X_test).per_instance,
                                  chosen.prediction_cost(X_test).per_instance)
