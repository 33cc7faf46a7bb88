"""What the method families share (``selection.points``): the trade-off scales a sweep prepares are shared by the
sweeps of the same training rows and parameters, and only by them."""

from __future__ import annotations

import pickle

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from scipy import sparse

from lightgbm_cegb import FeatureCosts
from lightgbm_cegb.methods.greedy_miser import GreedyMiserClassifier
from lightgbm_cegb.selection import lightgbm_family, points, sweep, train_to_budget


def _data(seed=0, n=600):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    return X, (X[:, 0] + 0.5 * X[:, 1] + rng.normal(size=n) > 0).astype(int)


@pytest.fixture
def counted(monkeypatch):
    """The number of calls of cegb_tradeoff_scale and of Greedy Miser's tradeoff_scale, the shared values cleared."""
    monkeypatch.setattr(points, "_SHARED", {})
    calls = {"cegb": 0, "greedy_miser": 0}
    cegb, greedy = lightgbm_family.cegb_tradeoff_scale, GreedyMiserClassifier.tradeoff_scale

    def cegb_counted(*args, **kwargs):
        calls["cegb"] += 1
        return cegb(*args, **kwargs)

    def greedy_counted(self, *args, **kwargs):
        calls["greedy_miser"] += 1
        return greedy(self, *args, **kwargs)
    monkeypatch.setattr(lightgbm_family, "cegb_tradeoff_scale", cegb_counted)
    monkeypatch.setattr(GreedyMiserClassifier, "tradeoff_scale", greedy_counted)
    return calls


def test_the_scale_is_found_once_for_the_same_rows_and_parameters(counted):
    X, y = _data()
    costs = FeatureCosts(lazy=[1.0, 2.0, 4.0, 8.0, 16.0])
    train, valid = (X[:400], y[:400]), (X[400:], y[400:])
    options = dict(task="binary", num_boost_round=20, baseline=False, grid={"cegb": [{"relative_tradeoff": 0.3}],
                                                            "greedy_miser": [{"relative_tradeoff": 0.1}]})
    first = sweep(["cegb", "greedy_miser"], train, valid, costs, **options)
    again = sweep(["cegb", "greedy_miser"], (X[:400].copy(), y[:400].copy()), valid, costs, **options)
    assert counted == {"cegb": 1, "greedy_miser": 1}
    pd.testing.assert_frame_equal(first.drop(columns=["model"]), again.drop(columns=["model"]))
    for budget in (3.0, 6.0):  # each budget of train_to_budget is a sweep: one bisection for all
        train_to_budget(train, valid, costs, budget, task="binary", num_boost_round=20, refine=0,
                        relative_tradeoffs=(0.0, 0.5))
    assert counted["cegb"] == 1
    # anything a scale reads changes its key: the rows, a label, the costs; CEGB's LightGBM parameters (Greedy
    # Miser's trees take none of them)
    y_changed = y[:400].copy()
    y_changed[0] = 1 - y_changed[0]
    for changed in [dict(train=(X[1:401], y[1:401])), dict(train=(X[:400], y_changed)),
                    dict(costs=FeatureCosts(lazy=[1.0, 2.0, 4.0, 8.0, 17.0])), dict(params={"num_leaves": 7})]:
        before = dict(counted)
        arguments = {"train": train, "costs": costs, **changed}
        sweep(["cegb", "greedy_miser"], arguments["train"], valid, arguments["costs"],
              **{**options, "params": changed.get("params", {})})
        greedy_reads = "params" not in changed
        assert counted == {"cegb": before["cegb"] + 1, "greedy_miser": before["greedy_miser"] + greedy_reads}, changed


@pytest.mark.parametrize("kind", ["dense", "sparse", "frame"])
def test_the_digest_reads_every_kind_of_rows(kind):
    X, y = _data(n=50)
    as_kind = {"dense": lambda a: a, "sparse": sparse.csr_matrix,
               "frame": lambda a: pd.DataFrame(a, columns=[f"f{j}" for j in range(a.shape[1])])}[kind]
    rows = points.Rows(as_kind(X), y)
    digest = points._digest(rows, {"k": 1})
    assert digest is not None and digest == points._digest(points.Rows(as_kind(X.copy()), y.copy()), {"k": 1})
    other = X.copy()
    other[3, 2] += 1e-12
    assert points._digest(points.Rows(as_kind(other), y), {"k": 1}) != digest
    assert points._digest(rows, {"k": 2}) != digest
    assert points._digest(points.Rows(as_kind(X), y, np.array([25, 25])), {"k": 1}) != digest
    assert points._digest(points.Rows(X.astype(object), y), {"k": 1}) is None


def _task_rows(task: str, seed: int = 0):
    """(train, valid, costs) of ``task`` on 8 columns (ranking: queries of 10 documents)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(900, 8))
    X[rng.random(X.shape) < 0.05] = np.nan
    signal = np.nan_to_num(X[:, 0]) + 0.7 * np.nan_to_num(X[:, 3]) + 0.4 * np.nan_to_num(X[:, 6])
    y = {"binary": (signal + rng.normal(size=900) > 0).astype(int),
         "multiclass": np.digitize(signal + rng.normal(scale=0.5, size=900), [-0.7, 0.0, 0.7]),
         "regression": signal + rng.normal(scale=0.3, size=900),
         "ranking": np.clip(np.round(signal + 1.5), 0, 3).astype(int)}[task]
    group = np.full(60, 10) if task == "ranking" else None
    train = (X[:600], y[:600]) if group is None else (X[:600], y[:600], group[:60 - 30] * 2)
    valid = (X[600:], y[600:]) if group is None else (X[600:], y[600:], group[:30])
    costs = FeatureCosts(lazy=[1.0, 2.0, 4.0, 8.0, 1.0, 2.0, 4.0, 8.0], split=0.05, groups={"g": [5, 6]},
                         group_lazy={"g": 3.0}, tree=0.01)
    return train, valid, costs


@pytest.mark.parametrize("task", ["binary", "multiclass", "regression", "ranking"])
def test_a_models_prefixes_measured_in_one_pass_equal_each_measured_alone(task, monkeypatch):
    """A sweep measures each boosted model's prefix points from one pass over its trees (points.PrefixPass); its frame
    equals, to the bit, the frame of the same sweep measuring each prefix alone (predict and prediction_cost)."""
    train, valid, costs = _task_rows(task)
    methods = ["lightgbm", "cegb", "greedy_miser"]
    options = dict(task=task, num_boost_round=60, baseline=False, budget=[6.0, 12.0], refine=1,
                   grid={"cegb": [{"relative_tradeoff": r} for r in (0.0, 0.3)],
                         "greedy_miser": [{"relative_tradeoff": 0.1}]})
    asked = []
    prefix_costs = points.prefix_costs

    def spied(model, X, costs, iterations, raw=False, **kwargs):
        asked.append(raw)
        return prefix_costs(model, X, costs, iterations, raw=raw, **kwargs)
    monkeypatch.setattr(points, "prefix_costs", spied)
    shared = sweep(methods, train, valid, costs, **options)
    assert asked and all(asked)  # every model's predictions came from its raw scores
    monkeypatch.setattr(points.PrefixPass, "take", lambda self, k, X: None)
    alone = sweep(methods, train, valid, costs, **options)
    pd.testing.assert_frame_equal(shared.drop(columns=["model"]), alone.drop(columns=["model"]), check_exact=True)


@pytest.mark.parametrize("task", ["binary", "multiclass"])
def test_other_libraries_prefixes_share_the_pass_of_their_costs(task, monkeypatch):
    """BudgetRF's and CatBoost's prefix points: their costs from the one pass, their predictions from their own
    predict (not computed from raw scores here); the frame equals the one measuring each prefix alone, to the bit."""
    train, valid, costs = _task_rows(task)
    options = dict(task=task, num_boost_round=40, baseline=False, budget=[6.0], refine=0,
                   grid={"budgetrf": [{"tradeoff": 2.0}], "catboost": [{"penalties_coefficient": 1.0}]})
    asked = []
    prefix_costs = points.prefix_costs

    def spied(model, X, costs, iterations, raw=False, **kwargs):
        done = prefix_costs(model, X, costs, iterations, raw=raw, **kwargs)
        asked.append((raw, done is not None))
        return done
    monkeypatch.setattr(points, "prefix_costs", spied)
    shared = sweep(["budgetrf", "catboost"], train, valid, costs, **options)
    assert asked == [(False, True)] * 2
    monkeypatch.setattr(points.PrefixPass, "take", lambda self, k, X: None)
    alone = sweep(["budgetrf", "catboost"], train, valid, costs, **options)
    pd.testing.assert_frame_equal(shared.drop(columns=["model"]), alone.drop(columns=["model"]), check_exact=True)


@pytest.mark.parametrize("case", ["random forest", "data frame", "infinite values"])
def test_where_the_raw_scores_do_not_give_the_predictions_each_prefix_predicts_alone(case, monkeypatch):
    """A random forest (its output the trees' mean), rows in a DataFrame (read by each model's own predict), and
    infinite values (Greedy Miser's predict refuses them): the pass prices, and the predictions are each prefix's
    own."""
    train, valid, costs = _task_rows("binary")
    X = pd.DataFrame(valid[0]) if case == "data frame" else valid[0].copy()
    if case == "infinite values":
        X[0, 0] = np.inf
        model = GreedyMiserClassifier(feature_costs=costs, n_estimators=20).fit(*train)
        output = "positive"
    else:
        extra = {"boosting": "rf", "bagging_fraction": 0.5, "bagging_freq": 1} if case == "random forest" else {}
        model = lgb.train({"objective": "binary", "verbose": -1, **extra}, lgb.Dataset(*train), 20)
        output = "predict"
    asked = []
    prefix_costs = points.prefix_costs
    monkeypatch.setattr(points, "prefix_costs",
                        lambda *args, **kwargs: asked.append(kwargs["raw"]) or prefix_costs(*args, **kwargs))
    for candidate in points.prefix_points("m", {}, model, output, costs, X, [6.0]):
        k = candidate.params["trees"]
        if case == "infinite values":
            with pytest.raises(ValueError, match="infinity"):
                candidate.measured(X)
            continue
        prediction, report = candidate.measured(X)
        np.testing.assert_array_equal(prediction, points.prediction(model, output, k, X))
        np.testing.assert_array_equal(report.per_instance,
                                      points.prediction_cost(model, X, costs, num_iteration=k).per_instance)
    assert asked == [False]


def test_a_prefix_measured_again_or_on_other_rows_is_measured_alone():
    train, valid, costs = _task_rows("multiclass")
    model = lgb.train({"objective": "multiclass", "num_class": 4, "verbose": -1}, lgb.Dataset(*train), 30)
    candidates = points.prefix_points("lightgbm", {}, model, "predict", costs, valid[0], [6.0])
    first = candidates[0].measured(valid[0])
    assert first is not None
    np.testing.assert_array_equal(first[0], candidates[0].predict(valid[0]))
    assert candidates[0].measured(valid[0]) is None  # given out once: measured again, alone
    assert candidates[1].measured(valid[0].copy()) is None  # other rows: alone
    pickled = pickle.loads(pickle.dumps(candidates[2]))
    assert pickled.measured(valid[0]) is None and pickled.measured.func.__self__._rows is None
    for candidate in candidates[1:]:  # the rest still from the pass, then the rows let go
        assert candidate.measured(valid[0]) is not None
    assert candidates[1].measured.func.__self__._rows is None
