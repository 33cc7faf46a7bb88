"""The estimator contract (lightgbm_cegb.base), checked on every budgetED estimator of the package.

scikit-learn's own checks run per estimator in its test module (``parametrize_with_checks``); this suite adds
the package's: keyword-only ``__init__`` with the names of the names table, NotFittedError before ``fit``,
``predict`` returning arrays, save/load round trips with equal predictions, costs and parameters (also after
``prediction_cost``, and over an earlier save), clone and pickle, ``prediction_cost`` equal to the accounting
of the model's trees, and ``tradeoff_scale`` as the smallest trade-off at which the model reads nothing.
"""

from __future__ import annotations

import copy
import inspect
import pickle

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

import lightgbm_cegb as lc
from lightgbm_cegb import CEGBError, FeatureCosts, NotFittedError, prediction_cost
from lightgbm_cegb.base import BudgetedEstimator
from lightgbm_cegb.core.errors import CEGBWarning
from lightgbm_cegb.core.validation import Constraint, Number
from lightgbm_cegb.lgbm import CEGBClassifier, CEGBRanker, CEGBRegressor

COSTS = FeatureCosts(lazy=[1.0, 2.0, 4.0, 8.0, 3.0])


def data(kind: str, n: int = 400, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    signal = X[:, 0] + (X[:, 1] > 0) * X[:, 2] + 0.5 * X[:, 3]
    if kind == "regression":
        return X, signal + 0.1 * rng.normal(size=n), {}
    if kind == "ranking":
        return X, np.digitize(signal, [0.0, 1.0]), {"group": np.full(n // 20, 20)}
    return X, (signal > 0).astype(int), {}


def f0():
    X, y, _ = data("binary", seed=1)
    return lgb.LGBMClassifier(n_estimators=20, num_leaves=7, verbose=-1).fit(X, y)


#: (a factory of the unfitted estimator, the kind of its task, whether its tradeoff_scale is the no-read bisection)
ESTIMATORS = {
    "CEGBClassifier": (lambda: CEGBClassifier(feature_costs=COSTS, cegb_tradeoff=0.01, n_estimators=10, verbose=-1),
                       "binary", True),
    "CEGBRegressor": (lambda: CEGBRegressor(feature_costs=COSTS, cegb_tradeoff=0.01, n_estimators=10, verbose=-1),
                      "regression", True),
    "CEGBRanker": (lambda: CEGBRanker(feature_costs=COSTS, cegb_tradeoff=0.01, n_estimators=10, verbose=-1),
                   "ranking", True),
    "GreedyMiserClassifier": (lambda: lc.GreedyMiserClassifier(feature_costs=COSTS, tradeoff=0.1, n_estimators=10),
                              "binary", True),
    "GreedyMiserRegressor": (lambda: lc.GreedyMiserRegressor(feature_costs=COSTS, tradeoff=0.1, n_estimators=10),
                             "regression", True),
    "GreedyMiserRanker": (lambda: lc.GreedyMiserRanker(feature_costs=COSTS, tradeoff=0.1, n_estimators=10),
                          "ranking", True),
    "AdaptGBRT": (lambda: lc.AdaptGBRT(f0=f0(), feature_costs=COSTS, tradeoff=0.01, n_rounds=2, trees_per_round=3),
                  "binary", False),
    "AdaptLIN": (lambda: lc.AdaptLIN(f0=f0(), feature_costs=COSTS, tradeoff=0.01, n_rounds=2), "binary", False),
    "AdaptL1": (lambda: lc.AdaptL1(f0=f0(), feature_costs=COSTS, tradeoff=0.01), "binary", False),
    "BudgetRFClassifier": (lambda: lc.BudgetRFClassifier(feature_costs=COSTS, n_estimators=5, random_state=0),
                           "binary", True),
    "CSTC": (lambda: lc.CSTC(depth=2, feature_costs=COSTS, tradeoff=0.01, n_iter=2), "regression", False),
    "CSTCClassifier": (lambda: lc.CSTCClassifier(depth=2, feature_costs=COSTS, tradeoff=0.01, n_iter=2, phi=5),
                       "binary", False),
    "CSCC": (lambda: lc.CSCC(n_stages=2, feature_costs=COSTS, tradeoff=0.01, n_iter=2), "binary", False),
    "Cronus": (lambda: lc.Cronus(n_stages=2, feature_costs=COSTS, tradeoff=0.01, n_iter=2), "binary", False),
    "AdaptiveAcquisitionClassifier": (lambda: lc.AdaptiveAcquisitionClassifier(feature_costs=COSTS, tradeoff=0.002,
                                                                               n_masks=4, random_state=0),
                                      "binary", True),
    "StagedAcquisitionClassifier": (lambda: lc.StagedAcquisitionClassifier(feature_costs=COSTS, tradeoff=0.1,
                                                                           stages=5, random_state=0),
                                    "binary", True),
    "StagedAcquisitionRanker": (lambda: lc.StagedAcquisitionRanker(feature_costs=COSTS, tradeoff=0.6, top_k=2,
                                                                   stages=5, random_state=0), "ranking", False),
    "StagedAcquisitionRegressor": (lambda: lc.StagedAcquisitionRegressor(feature_costs=COSTS, tradeoff=0.1, stages=5,
                                                                         random_state=0), "regression", True),
}
NAMES = list(ESTIMATORS)
_fitted: dict = {}


def fitted(name: str):
    """(a fitted estimator, X, y, fit parameters), fitted once per session."""
    if name not in _fitted:
        factory, kind, _ = ESTIMATORS[name]
        X, y, fit_params = data(kind)
        _fitted[name] = (factory().fit(X, y, **fit_params), X, y, fit_params)
    return _fitted[name]


def test_every_budgeted_estimator_of_the_package_is_checked():
    exported = {name for name in lc.__all__ if isinstance(getattr(lc, name), type)
                and issubclass(getattr(lc, name), BudgetedEstimator)}
    assert exported | {"CEGBClassifier", "CEGBRegressor", "CEGBRanker"} == set(ESTIMATORS)


@pytest.mark.parametrize("name", NAMES)
def test_init_takes_keyword_arguments_named_by_the_table(name):
    cls = type(ESTIMATORS[name][0]())
    parameters = inspect.signature(cls.__init__).parameters
    own = [p for p in parameters.values() if p.name != "self" and p.kind != p.VAR_KEYWORD]
    assert all(p.kind == p.KEYWORD_ONLY for p in own), [p.name for p in own if p.kind != p.KEYWORD_ONLY]
    params = cls().get_params()
    assert {"feature_costs", "random_state", "n_jobs", cls._tradeoff} <= set(params)
    assert cls._tradeoff == ("cegb_tradeoff" if name.startswith("CEGB") else "tradeoff")
    assert "costs" not in params and "lam" not in params and "alpha" not in params


@pytest.mark.parametrize("name", NAMES)
def test_every_parameter_is_declared_once(name):
    """``_constraints`` (core.validation) declares every parameter of the class's own ``__init__`` (the CEGB
    estimators' LightGBM parameters, taken as **kwargs, are LightGBM's to check), and nothing else."""
    cls = type(ESTIMATORS[name][0]())
    own = [p.name for p in inspect.signature(cls.__init__).parameters.values()
           if p.name != "self" and p.kind != p.VAR_KEYWORD]
    assert sorted(cls._constraints) == sorted(own)
    assert all(isinstance(c, Constraint) for c in cls._constraints.values())


@pytest.mark.parametrize("name", NAMES)
def test_the_declared_constraints_refuse_what_they_say(name):
    """Each value a parameter's declaration says is invalid (``Constraint.invalid``) makes ``fit`` refuse the
    estimator with a CEGBError that names the parameter, before any training; the declared defaults fit (the
    estimator of the table, fitted by the other tests)."""
    factory, kind, _ = ESTIMATORS[name]
    X, y, fit_params = data(kind, n=60)
    tried = 0
    for parameter, constraint in type(factory())._constraints.items():
        for bad in constraint.invalid():
            model = factory().set_params(**{parameter: bad})
            with pytest.raises(CEGBError, match=rf"^{parameter} should be "):
                model.fit(X, y, **fit_params)
            tried += 1
    assert tried >= 4 * len([c for c in type(factory())._constraints.values() if isinstance(c, Number)])


@pytest.mark.parametrize("name", NAMES)
def test_unfitted_models_raise_not_fitted_error(name, tmp_path):
    model = ESTIMATORS[name][0]()
    X, _, _ = data(ESTIMATORS[name][1])
    for call in (lambda: model.predict(X), lambda: model.prediction_cost(X), lambda: model.save(tmp_path / "m")):
        with pytest.raises(NotFittedError, match="not fitted"):  # ours, a CEGBError and scikit-learn's
            call()
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("name", NAMES)
def test_predict_returns_an_array_and_prediction_cost_equals_the_accounting(name):
    model, X, _, _ = fitted(name)
    prediction = model.predict(X)
    assert isinstance(prediction, np.ndarray) and prediction.shape[0] == X.shape[0]
    report = model.prediction_cost(X)
    assert isinstance(report, lc.CostReport) and report.per_instance.shape == (X.shape[0],)
    assert np.isfinite(report.per_instance).all() and (report.per_instance >= 0).all()
    forest = getattr(model, "forest_", None) or getattr(model, "booster_", None)
    if forest is not None:  # a tree model: the package's accounting of its trees, with its fitted costs
        num_iteration = getattr(model, "best_iteration_", None)
        expected = prediction_cost(forest, X, model.costs_ if hasattr(model, "costs_") else COSTS,
                                   **({} if num_iteration is None else {"num_iteration": num_iteration}))
        np.testing.assert_array_equal(report.per_instance, expected.per_instance)


def same_params(a, b) -> None:
    pa, pb = a.get_params(deep=False), b.get_params(deep=False)
    assert pa.keys() == pb.keys()
    for key in pa:
        if isinstance(pa[key], (lgb.Booster, lgb.LGBMModel)):
            continue  # a costly model given at load (f0) or phi, read back as a Booster
        assert pa[key] == pb[key], (key, pa[key], pb[key])


@pytest.mark.parametrize("name", NAMES)
def test_save_load_round_trip(name, tmp_path):
    model, X, _, _ = fitted(name)
    given = {"f0": model.f0} if "f0" in model._given_at_load else {}
    model.prediction_cost(X[:5])  # caches must not reach the files
    model.save(tmp_path / "m")
    again = type(model).load(tmp_path / "m", **given)
    np.testing.assert_array_equal(np.asarray(again.predict(X)), np.asarray(model.predict(X)))
    np.testing.assert_array_equal(again.prediction_cost(X).per_instance, model.prediction_cost(X).per_instance)
    same_params(again, model)
    assert again.n_features_in_ == model.n_features_in_
    # over an earlier save: the folder holds the new model and no stale artifact
    again.save(tmp_path / "m")
    import json
    named = json.loads((tmp_path / "m" / "manifest.json").read_text())["files"].values()
    assert {p.name for p in (tmp_path / "m").iterdir()} == {"manifest.json", *named}


@pytest.mark.parametrize("name", NAMES)
def test_a_failed_save_leaves_the_earlier_one_intact(name, tmp_path):
    model, X, _, _ = fitted(name)
    given = {"f0": model.f0} if "f0" in model._given_at_load else {}
    model.save(tmp_path / "m")
    before = {p.name: p.read_bytes() for p in (tmp_path / "m").iterdir()}
    broken = pickle.loads(pickle.dumps(model))
    param = "verbose" if name.startswith("CEGB") else "n_jobs"
    broken.set_params(**{param: object()})
    with pytest.raises(CEGBError, match=f"cannot save the parameter {param}"):
        broken.save(tmp_path / "m")
    assert {p.name: p.read_bytes() for p in (tmp_path / "m").iterdir()} == before
    np.testing.assert_array_equal(np.asarray(type(model).load(tmp_path / "m", **given).predict(X)),
                                  np.asarray(model.predict(X)))


@pytest.mark.parametrize("name", NAMES)
def test_clone_and_pickle(name):
    model, X, _, _ = fitted(name)
    model.prediction_cost(X[:5])  # fills the caches of the accounting
    same_params(clone(model), model)
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(np.asarray(again.predict(X)), np.asarray(model.predict(X)))
    np.testing.assert_array_equal(again.prediction_cost(X).per_instance, model.prediction_cost(X).per_instance)


@pytest.mark.parametrize("name", NAMES)
def test_pickle_copy_and_clone_after_every_method(name, tmp_path):
    """Caches a method fills (compiled routing structures, parsed forests) never stop a model from pickling,
    copying or cloning; they are rebuilt after unpickling."""
    factory, kind, _ = ESTIMATORS[name]
    X, y, fit_params = data(kind)
    model = factory().fit(X, y, **fit_params)
    expected = np.asarray(model.predict(X)), model.prediction_cost(X).per_instance
    calls = {"predict": lambda: model.predict(X), "prediction_cost": lambda: model.prediction_cost(X[:7]),
             "save": lambda: model.save(tmp_path / "m")}
    for method in ("predict_proba", "decision_function", "route"):
        if hasattr(model, method):
            calls[method] = lambda method=method: getattr(model, method)(X)
    for method, call in calls.items():
        call()
        for again in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model)):
            np.testing.assert_array_equal(np.asarray(again.predict(X)), expected[0], err_msg=method)
            np.testing.assert_array_equal(again.prediction_cost(X).per_instance, expected[1], err_msg=method)
            pickle.dumps(again)  # its caches filled again
        same_params(clone(model), model)


NAMED_COSTS = FeatureCosts(lazy={"f0": 1.0, "f 1": 2.0, "f2": 4.0, "f3": 8.0, "f4": 3.0},
                           groups={"pair": ["f2", "f3"]}, group_lazy={"pair": 5.0})
COLUMN_COSTS = FeatureCosts(lazy=[1.0, 2.0, 4.0, 8.0, 3.0], groups={"pair": [2, 3]}, group_lazy=[5.0])


def lightgbm_models(model) -> dict:
    """The LightGBM models an estimator trained and holds (its own trees; not a model given to it)."""
    held = {attr: getattr(model, attr, None) for attr in ("booster_", "gate_", "f1_", "phi_booster_")}
    return {attr: booster for attr, booster in held.items() if isinstance(booster, lgb.Booster)}


@pytest.mark.parametrize("name", NAMES)
def test_a_dataframe_fit_keeps_the_names_in_the_models_it_holds(name):
    """Fitted on a DataFrame, every model the estimator holds names the columns as X does (LightGBM writes a
    space as an underscore), so that costs by name work on them as on the estimator: equal to the costs by
    column of the same model fitted on the array."""
    factory, kind, _ = ESTIMATORS[name]
    X, y, fit_params = data(kind)
    frame = pd.DataFrame(X, columns=["f0", "f 1", "f2", "f3", "f4"])
    model = factory().set_params(feature_costs=NAMED_COSTS).fit(frame, y, **fit_params)
    plain = factory().set_params(feature_costs=COLUMN_COSTS).fit(X, y, **fit_params)
    # LightGBM's estimators give the names they hold (f_1)
    assert list(model.feature_names_in_) == (["f0", "f_1", "f2", "f3", "f4"] if name.startswith("CEGB") else
                                             list(frame.columns))
    report = model.prediction_cost(frame)
    assert list(report.group_usage) == ["pair"]
    np.testing.assert_array_equal(report.per_instance, plain.prediction_cost(X).per_instance)
    # a DataFrame's values reach the linear models in another memory order: the last bits may differ
    np.testing.assert_allclose(np.asarray(model.predict(frame), dtype=float), np.asarray(plain.predict(X), dtype=float),
                               rtol=1e-12, atol=1e-12)
    held = lightgbm_models(model)
    if name in ("GreedyMiserClassifier", "GreedyMiserRegressor", "GreedyMiserRanker", "AdaptGBRT",
                "CSTCClassifier"):  # the LightGBM models these train (CSTCClassifier: its phi of 5 trees)
        assert held, name
    for attr, booster in held.items():
        assert booster.feature_name() == ["f0", "f_1", "f2", "f3", "f4"], attr
        prediction_cost(booster, frame, NAMED_COSTS)  # costs by name align to the model's names
    forest = getattr(model, "forest_", None)
    if forest is not None:
        assert [name.replace(" ", "_") for name in forest.feature_names] == ["f0", "f_1", "f2", "f3", "f4"]
        by_name = prediction_cost(model, frame, NAMED_COSTS)
        np.testing.assert_array_equal(by_name.per_instance, report.per_instance)
        assert by_name.group_usage == report.group_usage


@pytest.mark.parametrize("name", [n for n in NAMES if ESTIMATORS[n][2]])
def test_tradeoff_scale_is_where_the_model_stops_reading(name):
    factory, kind, _ = ESTIMATORS[name]
    X, y, fit_params = data(kind, n=300)
    model = factory().set_params(**factory()._probe)
    scale = model.tradeoff_scale(X, y, **fit_params)
    assert scale > 0
    below = clone(model).set_params(**{model._tradeoff: scale * 0.98}).fit(X, y, **fit_params)
    above = clone(model).set_params(**{model._tradeoff: scale * 1.02}).fit(X, y, **fit_params)
    assert below._reads_features(X) and not above._reads_features(X)


def test_the_package_warnings_have_classes():
    assert issubclass(lc.NoSplitWarning, CEGBWarning) and issubclass(CEGBWarning, UserWarning)
    X, y, _ = data("regression")
    with pytest.warns(lc.NoSplitWarning, match="no split"):
        CEGBRegressor(feature_costs=COSTS, cegb_tradeoff=1e6, n_estimators=2, verbose=-1).fit(X, y)
