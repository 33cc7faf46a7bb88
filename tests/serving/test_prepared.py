"""PreparedRow (LazyPredictor.prepare): each one-row request answers as acquire of that row does (the same fetch calls
in the same order, the prediction to the bit, the same result), on the kernel's rounds and on the general path alike
(groups, pandas values, sorted orders, failures, retries, time-outs); the reference is LightGBM's predict and
acquire; bad requests are refused by name and leave the row usable."""

from __future__ import annotations

import pickle
import tracemalloc

import lightgbm as lgb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from references import model_and_data, sklearn_model_and_data, staged_case
from test_lazy import FETCH_ORDERS, GroupStore, Store, higgs_like, random_groups

from lightgbm_cegb import (
    AdaptiveAcquisitionClassifier,
    CEGBError,
    FeatureCosts,
    StagedAcquisitionClassifier,
    StagedAcquisitionRegressor,
    to_forest,
)
from lightgbm_cegb.serving import DONE, FAILED, LazyFetchError, LazyFetchValueError, LazyPredictor

RESULT_ARRAYS = ("status", "X", "known", "fetched", "acquisition", "evaluation", "leaves")


def answers_as_acquire(predictor: LazyPredictor, store, X: np.ndarray, known: np.ndarray | None, method="predict",
                       **kwargs) -> list:
    """Serve each row of X on one PreparedRow and on acquire of that row alone: the same fetch calls, prediction and
    result; each row's values, costs and leaves also those of acquire of every row at once (its routing block by
    block, the independent reference of the one-row routing). Returns the prepared predictions."""
    row = predictor.prepare(method, **kwargs)
    start = len(store.calls)
    together = predictor.acquire(X, known, method=method, **kwargs)
    del store.calls[start:]
    answers = []
    for i in range(len(X)):
        given = None if known is None else known[i]
        start = len(store.calls)
        answer = row.predict(X[i], given, id=i)
        served = store.calls[start:]
        start = len(store.calls)
        expected = predictor.acquire(X[i:i + 1], None if known is None else known[i:i + 1], ids=[i], method=method,
                                     **kwargs)
        assert [(key, ids.tolist()) for key, ids in served] == \
            [(key, ids.tolist()) for key, ids in store.calls[start:]]
        if expected.status[0] == DONE:
            assert np.array_equal(np.asarray(answer), np.asarray(expected.prediction[0]), equal_nan=True)
        else:  # acquire's prediction is None: no row is done
            assert expected.prediction is None and isinstance(answer, float) and np.isnan(answer)
        result = row.result()
        for name in RESULT_ARRAYS:
            np.testing.assert_array_equal(getattr(result, name), getattr(expected, name), err_msg=name)
        assert (result.rounds, result.fetch_calls) == (expected.rounds, expected.fetch_calls)
        assert row.cost == expected.per_instance[0]
        for name in RESULT_ARRAYS:
            np.testing.assert_array_equal(getattr(result, name)[0], getattr(together, name)[i], err_msg=name)
        if together.status[i] == DONE:
            assert np.array_equal(np.asarray(answer), np.asarray(together.prediction[i]), equal_nan=True)
        answers.append(answer)
    return answers


@settings(max_examples=80, deadline=None, derandomize=True)
@given(model_and_data(), st.sampled_from([0.0, 0.3]), st.sampled_from([0.0, 0.5]), st.sampled_from(FETCH_ORDERS))
def test_a_prepared_row_answers_as_acquire_on_random_models(case, split_cost, known_share, order):
    booster, X, rng = case
    if to_forest(booster).linear is not None:
        return
    X = X[:25]
    n_features = booster.num_feature()
    costs = FeatureCosts(lazy=rng.integers(0, 20, n_features).astype(float),
                         split=rng.uniform(0, split_cost, n_features), tree=split_cost)
    known = rng.random(X.shape) < known_share
    store = Store(X)
    predictor = LazyPredictor(booster, store, feature_costs=costs, feature_keys="index", order=order)
    answers = answers_as_acquire(predictor, store, np.where(known, X, np.nan), known)
    np.testing.assert_array_equal(np.array(answers), booster.predict(X))  # the independent reference


@settings(max_examples=40, deadline=None, derandomize=True)
@given(model_and_data(), st.sampled_from([0.0, 0.3]), st.sampled_from(["array", "dict", "frame"]))
def test_groups_go_through_the_general_path_with_the_same_answers(case, known_share, returns):
    booster, X, rng = case
    if to_forest(booster).linear is not None:
        return
    X = X[:20]
    num_features = booster.num_feature()
    groups = random_groups(rng, num_features)
    costs = FeatureCosts(lazy=rng.integers(0, 20, num_features).astype(float), split=0.2, groups=groups,
                         group_lazy=rng.integers(0, 50, len(groups)).astype(float), tree=0.1)
    store = GroupStore(X, groups, returns=returns)
    known = rng.random(X.shape) < known_share
    predictor = LazyPredictor(booster, store, feature_costs=costs, feature_keys="index")
    answers = answers_as_acquire(predictor, store, np.where(known, X, np.nan), known)
    np.testing.assert_array_equal(np.array(answers), booster.predict(X))


@settings(max_examples=25, deadline=None, derandomize=True)
@given(sklearn_model_and_data(), st.sampled_from([0.0, 0.3]), st.booleans())
def test_scikit_learn_models_at_float32_boundaries(case, known_share, say_known):
    """Given values are rounded to float32 as the model reads them (restart; ``known`` given or not), fetched ones as
    acquire stores them."""
    model, X, rng = case
    X = X[:20]
    known = rng.random(X.shape) < known_share
    if not say_known:  # a NaN given is then read as not known: none is given
        known &= ~np.isnan(X)
    store = Store(X)
    predictor = LazyPredictor(model, store, feature_costs=FeatureCosts(lazy=np.ones(X.shape[1]), split=0.5),
                              feature_keys="index")
    answers = answers_as_acquire(predictor, store, np.where(known, X, np.nan), known if say_known else None)
    np.testing.assert_array_equal(np.array(answers).reshape(model.predict(X).shape), model.predict(X))


def test_model_kinds_threads_time_outs_and_methods():
    """A classifier's predict_proba (the model's own predict on the filled row), a multiclass Booster, raw scores,
    a model whose fetches run on threads with a time-out, each as acquire answers."""
    booster, X, costs = higgs_like(200)
    X = X[:15]
    unknown = np.full_like(X, np.nan)
    store = Store(X)
    for options in ({}, {"max_workers": 2}, {"timeout": 30.0}, {"order": "most_rows"}):
        predictor = LazyPredictor(booster, store, feature_costs=costs, feature_keys="index", **options)
        answers_as_acquire(predictor, store, unknown, None)
        answers_as_acquire(predictor, store, unknown, None, raw_score=True)
    rng = np.random.default_rng(1)
    y = rng.integers(0, 3, 200)
    multiclass = lgb.train({"objective": "multiclass", "num_class": 3, "verbose": -1, "num_threads": 1},
                           lgb.Dataset(rng.normal(size=(200, 8)), y), 5)
    answers = answers_as_acquire(LazyPredictor(multiclass, store, feature_keys="index"), store, unknown, None)
    np.testing.assert_array_equal(np.array(answers), multiclass.predict(X))
    classifier = lgb.LGBMClassifier(n_estimators=10, verbose=-1).fit(rng.normal(size=(200, 8)), y)
    answers = answers_as_acquire(LazyPredictor(classifier, store, feature_keys="index"), store, unknown, None,
                                 method="predict_proba")
    np.testing.assert_array_equal(np.array(answers), classifier.predict_proba(X))


def test_random_forests_cut_iterations_forests_xgboost_missing_and_catboost():
    """Each model kind's branch of a prepared row: rf's averaged output and a num_iteration cut from the leaves, a
    Forest's raw score, an XGBoost model with a missing value (the general path: the value mapped as RoutingRun maps
    it) and a CatBoost model (its own predict_proba on the filled row), each as acquire and as the model's own."""
    import catboost as cb
    import xgboost as xgb

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) > 0).astype(int)
    rf = lgb.train({"objective": "binary", "boosting": "rf", "bagging_fraction": 0.5, "bagging_freq": 1,
                    "verbose": -1, "num_threads": 1}, lgb.Dataset(X, y), 10)
    regression = lgb.train({"objective": "regression", "verbose": -1, "num_threads": 1}, lgb.Dataset(X, y), 20)
    rows = X[:15]
    unknown = np.full_like(rows, np.nan)
    for model, options, expected in ((rf, {}, rf.predict(rows)),
                                     (regression, {"num_iteration": 5}, regression.predict(rows, num_iteration=5)),
                                     (to_forest(regression), {}, regression.predict(rows, raw_score=True))):
        store = Store(X)
        answers = answers_as_acquire(LazyPredictor(model, store, feature_keys="index", **options), store, unknown, None)
        np.testing.assert_array_equal(np.array(answers), expected)
    Xm = np.where(np.isnan(X), -999.0, X)  # XGBoost reads -999 as missing
    store = Store(Xm)
    booster = xgb.XGBClassifier(n_estimators=10, missing=-999.0, n_jobs=1).fit(Xm, y)
    answers = answers_as_acquire(LazyPredictor(booster, store, feature_keys="index"), store, unknown, None,
                                 method="predict_proba")
    np.testing.assert_array_equal(np.array(answers), booster.predict_proba(Xm[:15]))
    Xc = np.nan_to_num(X)
    store = Store(Xc)
    catboost = cb.CatBoostClassifier(iterations=20, verbose=0, thread_count=1).fit(Xc, y)
    answers = answers_as_acquire(LazyPredictor(catboost, store, feature_keys="index"), store, unknown, None,
                                 method="predict_proba")
    np.testing.assert_array_equal(np.array(answers), catboost.predict_proba(Xc[:15]))


def test_failures_raise_or_mark_the_row_and_the_next_request_is_unharmed():
    booster, X, costs = higgs_like(200)
    broken = {5}

    def fetch(key, ids):
        if key in broken:
            raise ConnectionError("store down")
        return X[ids, key]

    unknown = np.full(X.shape[1], np.nan)
    row = LazyPredictor(booster, fetch, feature_costs=costs, feature_keys="index").prepare()
    with pytest.raises(LazyFetchError, match="store down") as raised:
        for i in range(len(X)):  # until a row's paths reach feature 5
            row.predict(unknown, id=i)
    failed = raised.value.result
    kept = (failed.X.copy(), failed.status.copy(), failed.acquisition.copy())
    with pytest.raises(CEGBError, match="no request has been answered"):
        row.result()
    broken.clear()
    assert row.predict(unknown, id=3) == booster.predict(X[3:4])[0]
    for before, after in zip(kept, (failed.X, failed.status, failed.acquisition)):  # the error's result was copied
        np.testing.assert_array_equal(before, after)
    broken.add(5)
    partial = LazyPredictor(booster, fetch, feature_costs=costs, feature_keys="index", errors="partial").prepare()
    answers = [partial.predict(unknown, id=i) for i in range(40)]
    expected = LazyPredictor(booster, fetch, feature_costs=costs, feature_keys="index", errors="partial").acquire(
        np.full((40, X.shape[1]), np.nan))
    np.testing.assert_array_equal(np.array(answers), expected.prediction)
    assert np.isnan(answers).any() and partial.result().status[0] in (DONE, FAILED)


def test_retries_and_malformed_values_as_acquire():
    booster, X, costs = higgs_like(200)
    failed_once: set = set()

    def flaky(key, ids):
        if (key, int(ids[0])) not in failed_once:
            failed_once.add((key, int(ids[0])))
            raise TimeoutError("slow")
        return X[ids, key]

    predictor = LazyPredictor(booster, flaky, feature_costs=costs, feature_keys="index", retries=1)
    row = predictor.prepare()
    assert row.predict(id=2) == booster.predict(X[2:3])[0]
    assert row.result().fetch_calls == 2 * len(failed_once)
    wrong = LazyPredictor(booster, lambda key, ids: X[ids, key].astype(str), feature_costs=costs,
                          feature_keys="index").prepare()
    with pytest.raises(LazyFetchValueError, match="not numbers"):
        wrong.predict(id=0)
    lists = LazyPredictor(booster, lambda key, ids: X[ids, key].tolist(), feature_costs=costs,
                          feature_keys="index").prepare()  # not the kernel's array: read as acquire reads it
    assert lists.predict(id=4) == booster.predict(X[4:5])[0]


class Columns:
    """A fetch that pickles: X's column ``key`` at the ids."""

    def __init__(self, X: np.ndarray) -> None:
        self.X = X

    def __call__(self, key, ids):
        return self.X[ids, key]


def test_a_prepared_row_pickles_as_its_predictor_and_method():
    booster, X, costs = higgs_like(200)
    row = LazyPredictor(booster, Columns(X), feature_costs=costs, feature_keys="index").prepare(raw_score=True)
    row.predict(id=3)
    again = pickle.loads(pickle.dumps(row))
    with pytest.raises(CEGBError, match="no request has been answered"):  # a new batch: no answer in it
        again.result()
    assert again.method == "predict" and again.predict(id=3) == booster.predict(X[3:4], raw_score=True)[0]


def test_a_callable_object_is_called_as_python_calls_it_and_a_new_fetch_is_used():
    """The compiled rounds call a fetch object's class method bound to it (workers.direct): what ``fetch(...)`` runs,
    not an instance attribute named __call__; a fetch set on the predictor afterwards is the one called."""
    booster, X, costs = higgs_like(200)
    fetch = Columns(X)
    fetch.__call__ = lambda key, ids: 1 / 0  # never called by fetch(key, ids)
    predictor = LazyPredictor(booster, fetch, feature_costs=costs, feature_keys="index")
    row = predictor.prepare()
    assert row.predict(id=5) == booster.predict(X[5:6])[0]
    np.testing.assert_array_equal(predictor.predict(np.full((20, X.shape[1]), np.nan)), booster.predict(X[:20]))
    shifted = Columns(X + 1.0)
    predictor.fetch = shifted
    assert row.predict(id=5) == booster.predict(X[5:6] + 1.0)[0]


def test_ids_of_any_kind_reach_fetch():
    booster, X, costs = higgs_like(200)
    seen = []

    def fetch(key, ids):
        seen.append(ids.copy())
        return X[[int(str(i).split("-")[-1]) for i in ids], key]

    row = LazyPredictor(booster, fetch, feature_costs=costs, feature_keys="index").prepare()
    assert row.predict(id="row-7") == booster.predict(X[7:8])[0]
    assert {i for ids in seen for i in ids.tolist()} == {"row-7"}
    seen.clear()
    assert row.predict(id=np.int32(9)) == booster.predict(X[9:10])[0]
    assert {i for ids in seen for i in ids.tolist()} == {9}


def test_the_kernels_path_allocates_no_array():
    """A request whose fetches return arrays made beforehand: what the call allocates is a few Python objects (its
    answer, the kernel's counts), not a batch (acquire's dozen arrays)."""
    booster, X, costs = higgs_like(400)
    one = [np.ascontiguousarray(X[3:4, f]) for f in range(X.shape[1])]
    predictor = LazyPredictor(booster, lambda key, ids: one[key], feature_costs=costs, feature_keys="index")
    row = predictor.prepare()
    unknown = np.full(X.shape[1], np.nan)
    assert row.predict(unknown, id=3) == booster.predict(X[3:4])[0]

    def peak(call) -> int:
        tracemalloc.start()
        try:
            call()
            tracemalloc.reset_peak()
            start = tracemalloc.get_traced_memory()[0]
            call()
            return tracemalloc.get_traced_memory()[1] - start
        finally:
            tracemalloc.stop()

    prepared = peak(lambda: row.predict(unknown, id=3))
    batch = peak(lambda: predictor.acquire(unknown[None], ids=[3]))
    assert prepared <= 400, f"the prepared row allocated {prepared} bytes"
    assert batch > 5 * prepared  # the measure sees a batch's arrays


@pytest.mark.parametrize(("call", "message"), [
    (lambda row: row.predict(np.zeros(3)), r"x should hold the row's 8 values .* got shape \(3,\)"),
    (lambda row: row.predict(["a"] * 8), "x should hold the row's 8 values as numbers"),
    (lambda row: row.predict(None, np.ones(8)), "known should be a bool array of the row's 8 values, got float64"),
    (lambda row: row.predict(id=2**70), "id: an integer id should fit in int64"),
    (lambda row: row.result(), "no request has been answered yet"),
    (lambda row: row.cost, "cost: no request has been answered yet"),
])
def test_bad_requests_are_refused_by_name_and_the_row_serves_on(call, message):
    booster, X, costs = higgs_like(200)
    row = LazyPredictor(booster, lambda key, ids: X[ids, key], feature_costs=costs, feature_keys="index").prepare()
    with pytest.raises(CEGBError, match=message):
        call(row)
    assert row.predict(id=1) == booster.predict(X[1:2])[0]


def test_a_coroutine_fetch_or_a_method_the_model_lacks_is_refused_by_name():
    booster, X, costs = higgs_like(200)

    async def fetch_async(key, ids):
        return X[ids, key]

    with pytest.raises(CEGBError, match="prepare: fetch is a coroutine function"):
        LazyPredictor(booster, fetch_async, feature_keys="index").prepare()
    with pytest.raises(CEGBError, match="has no 'predict_proba'"):
        LazyPredictor(booster, lambda key, ids: X[ids, key], feature_keys="index").prepare("predict_proba")


def policy_case(seed: int):
    """staged_case's rows and costs (a tree cost at times), and the staged and adaptive models fitted on them."""
    X, y, costs, rng = staged_case(seed)
    costs = FeatureCosts.from_dict({**costs.to_dict(X.shape[1]), "tree": float(rng.choice([0.0, 0.01]))})
    staged = StagedAcquisitionClassifier(feature_costs=costs, stages=5, n_estimators=25, random_state=seed,
                                         tradeoff=float(rng.choice([0.0, 0.1, 0.3]))).fit(X, y)
    adaptive = AdaptiveAcquisitionClassifier(feature_costs=costs, n_masks=3, n_estimators=25, random_state=seed,
                                             gain=str(rng.choice(["accuracy", "entropy"]))).fit(X, y)
    if (adaptive.unit_cost_ > 0).any():
        adaptive.set_params(tradeoff=float(rng.choice([0.0, 0.01, 0.1])) * adaptive.first_value())
    return X, costs, rng, staged, adaptive


@pytest.mark.filterwarnings("ignore::lightgbm_cegb.RoundsWarning")
@settings(max_examples=8, deadline=None, derandomize=True)
@given(st.integers(0, 10_000), st.sampled_from([0.0, 0.3]), st.sampled_from(["raise", "partial"]))
def test_policy_models_answer_as_acquire(seed, known_share, errors):
    """The staged and the adaptive acquisition on their compiled batches restarted per request: each row as acquire
    of it alone and of every row at once (a feature or a group whose fetch fails: the rows that need it FAILED, or the
    error raised with what was computed), predictions the model's own."""
    X, costs, rng, staged, adaptive = policy_case(seed)
    X = X[:25]
    known = rng.random(X.shape) < known_share
    broken = "pair" if costs.groups and rng.random() < 0.5 else int(rng.integers(X.shape[1]))
    for model in (staged, adaptive):
        for method in ("predict_proba", "predict"):
            store = GroupStore(X, costs.groups or {}, returns="array")
            failing = Failing(store, broken if errors == "partial" else None)
            predictor = LazyPredictor(model, failing, feature_keys="index", errors=errors)
            answers = answers_as_acquire(predictor, store, np.where(known, X, np.nan), known, method=method)
            if errors == "partial" and known_share == 0:
                done = ~np.isnan(np.asarray(answers, dtype=float).reshape(len(X), -1)).any(axis=1)
                np.testing.assert_array_equal(np.array([a for a, ok in zip(answers, done) if ok]),
                                              getattr(model, method)(X[done]))
    broken_raise = Failing(GroupStore(X, costs.groups or {}, returns="array"), "all")
    row = LazyPredictor(staged, broken_raise, feature_keys="index").prepare()
    if staged.predict_result(X[:1]).steps[0]:  # the row buys something: its first fetch raises
        with pytest.raises(LazyFetchError, match="store down"):
            row.predict(id=0)


class Failing:
    """A store whose fetches of key ``broken`` raise ("all": every key)."""

    def __init__(self, store, broken) -> None:
        self.store, self.broken, self.calls = store, broken, store.calls

    def __call__(self, key, ids):
        if self.broken == "all" or (self.broken is not None and key == self.broken):
            self.calls.append((key, np.asarray(ids).copy()))
            raise ConnectionError("store down")
        return self.store(key, ids)


@pytest.mark.filterwarnings("ignore::lightgbm_cegb.RoundsWarning")
def test_a_policy_models_settings_changed_after_prepare_are_served():
    X, costs, rng, staged, adaptive = policy_case(3)
    store = GroupStore(X, costs.groups or {}, returns="array")
    for model in (staged, adaptive):
        predictor = LazyPredictor(model, store, feature_keys="index")
        row = predictor.prepare("predict_proba")
        row.predict(id=0)
        model.set_params(max_cost=1.0)
        answers_as_acquire(predictor, store, np.full((10, X.shape[1]), np.nan), None, method="predict_proba")
        np.testing.assert_array_equal(row.predict(id=4), model.predict_result(X[4:5]).proba[0])
        model.set_params(max_cost=-1.0)  # refused where the model checks it, as acquire refuses it
        with pytest.raises(CEGBError, match="max_cost"):
            row.predict(id=0)
        with pytest.raises(CEGBError, match="max_cost"):
            predictor.acquire(np.full((1, X.shape[1]), np.nan))
        model.set_params(max_cost=None)
        assert np.array_equal(row.predict(id=4), model.predict_result(X[4:5]).proba[0])


def test_a_policy_model_without_a_compiled_run_is_served_by_acquire():
    X, y, costs, _ = staged_case(5)
    y = y.astype(float)
    model = StagedAcquisitionRegressor(feature_costs=costs, stages=3, n_estimators=10, random_state=0).fit(X, y)
    store = GroupStore(X, costs.groups or {}, returns="array")
    predictor = LazyPredictor(model, store, feature_keys="index")
    answers = answers_as_acquire(predictor, store, np.full((12, X.shape[1]), np.nan), None)
    np.testing.assert_array_equal(np.array(answers), model.predict(X[:12]))
