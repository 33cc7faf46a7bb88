"""LazyPredictor: predictions equal the model's own on the full rows, the fetched (row, feature) pairs are
exactly those on the rows' paths (read from LightGBM's model text), each fetched once, and the realised
cost is prediction_cost's; feature groups fetched whole, once per (row, group), on random groupings;
failures, time-outs, retries, concurrency and asyncio."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from constraints import check_declared
from hypothesis import given, settings
from hypothesis import strategies as st
from references import leaf_paths, model_and_data, row_paths, sklearn_model_and_data
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier

from lightgbm_cegb import CEGBError, FeatureCosts, budget_prune, prediction_cost, to_forest
from lightgbm_cegb.serving import DONE, FAILED, PENDING, LazyFetchError, LazyFetchValueError, LazyPredictor
from lightgbm_cegb.serving.lazy import UNKNOWN


class Store:
    """A fetch over full rows that records every call."""

    def __init__(self, X: np.ndarray, names=None) -> None:
        self.X, self.names, self.calls = X, names, []
        self.lock = threading.Lock()

    def column(self, feature) -> int:
        return self.names.index(feature) if self.names is not None else int(feature)

    def __call__(self, feature, ids):
        with self.lock:
            self.calls.append((feature, np.asarray(ids).copy()))
        return self.X[ids, self.column(feature)]

    def pairs(self) -> Counter:
        return Counter((self.column(f), int(i)) for f, ids in self.calls for i in ids)


#: every kind of fetch order: which (row, key) pairs are fetched, what is paid and predicted never depend on it
FETCH_ORDERS = ["cheapest", "costliest", "most_rows", "model", lambda key, ids: -len(str(key)) - ids.sum()]


def signal_rows(seed: int, n: int = 300, missing: bool = True):
    """(rng, X of n rows x 5 with 5% missing values (or none), a signal of columns 0-2 with noise) for the outputs'
    tests."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    if missing:
        X[rng.random(X.shape) < 0.05] = np.nan
    signal = np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) * (np.nan_to_num(X[:, 2]) > 0) + rng.normal(0, 0.3, n)
    return rng, X, signal


def refuse_model_predict(predictor) -> None:
    """Make ``predictor`` fail where it would call the model's predict on the filled rows."""
    def refused(*args, **kwargs):
        raise AssertionError("predicted by the model's predict")

    predictor.predict_rows = refused


def higgs_like(n=600, seed=0, objective="binary"):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 5]) * (np.nan_to_num(X[:, 1]) > 0) + rng.normal(0, 0.3, n)
    if objective == "binary":
        y = (y > 0).astype(float)
    costs = FeatureCosts(lazy=[1, 1, 1, 2, 2, 30, 40, 50], split=0.5)
    params = {"objective": objective, "num_leaves": 15, "verbose": -1, "seed": seed, "num_threads": 1,
              **costs.to_params(tradeoff=0.01)}
    return lgb.train(params, lgb.Dataset(X, y), 20), X, costs


@settings(max_examples=120, deadline=None, derandomize=True)
@given(model_and_data(), st.sampled_from([0.0, 0.3]), st.sampled_from([0.0, 0.5]), st.sampled_from(FETCH_ORDERS),
       st.sampled_from([1, 2]))
def test_exact_on_random_models(case, split_cost, known_share, order, n_jobs):
    booster, X, rng = case
    n_features = booster.num_feature()
    lazy = rng.integers(0, 20, n_features).astype(float)  # integers: sums exact in any order
    costs = FeatureCosts(lazy=lazy, split=rng.uniform(0, split_cost, n_features), tree=split_cost)
    store = Store(X)
    if to_forest(booster).linear is not None:
        with pytest.raises(CEGBError, match="linear trees"):
            LazyPredictor(booster, store, feature_costs=costs)
        return
    known = rng.random(X.shape) < known_share
    given_X = np.where(known, X, np.nan)
    result = LazyPredictor(booster, store, feature_costs=costs, feature_keys="index", order=order,
                           n_jobs=n_jobs).acquire(given_X, known)
    assert (result.status == DONE).all()
    np.testing.assert_array_equal(result.prediction, booster.predict(X))
    leaves = booster.predict(X, pred_leaf=True).reshape(len(X), -1)
    np.testing.assert_array_equal(result.leaves, leaves)
    # the features on each row's paths, from LightGBM's leaves and the model text
    paths = leaf_paths(booster)
    on_path = np.zeros(X.shape, dtype=bool)
    for i in range(len(X)):
        for t in range(leaves.shape[1]):
            on_path[i, paths[t][leaves[i, t]]] = True
    np.testing.assert_array_equal(result.fetched, on_path & ~known)
    pairs = store.pairs()
    assert all(count == 1 for count in pairs.values())
    assert set(pairs) == {(f, i) for i, f in zip(*np.nonzero(on_path & ~known))}
    assert max(Counter(f for f, _ in store.calls).values(), default=0) <= result.rounds
    depth = max((len(p) for tree in paths for p in tree.values()), default=0)
    assert result.rounds <= depth
    report = prediction_cost(booster, X, costs)
    np.testing.assert_allclose(result.evaluation, report.evaluation, rtol=1e-12)  # summed in another order
    np.testing.assert_array_equal(result.acquisition, (on_path & ~known) @ lazy)
    if known_share == 0:
        np.testing.assert_array_equal(result.acquisition, report.acquisition)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(sklearn_model_and_data(), st.sampled_from([0.0, 0.3]))
def test_exact_on_random_sklearn_models_at_float32_boundaries(case, known_share):
    """scikit-learn's trees compare float32(x) <= threshold: a fetched value is read as the given ones are, so
    the lazy run follows the model's own paths (values at every threshold's rounding boundary)."""
    model, X, rng = case
    num_features = X.shape[1]
    costs = FeatureCosts(lazy=rng.integers(0, 20, num_features).astype(float), split=0.5)
    known = rng.random(X.shape) < known_share
    store = Store(X)
    result = LazyPredictor(model, store, feature_costs=costs, feature_keys="index").acquire(
        np.where(known, X, np.nan), known)
    assert (result.status == DONE).all()
    np.testing.assert_array_equal(result.prediction, model.predict(X))
    on_path = np.zeros(X.shape, dtype=bool)
    for i, paths in enumerate(row_paths(model, X)):
        for path in paths:
            on_path[i, path] = True
    np.testing.assert_array_equal(result.fetched, on_path & ~known)
    np.testing.assert_array_equal(result.acquisition, (on_path & ~known) @ costs.lazy)
    report = prediction_cost(model, X, costs)
    np.testing.assert_allclose(result.evaluation, report.evaluation, rtol=1e-12)
    if known_share == 0:
        np.testing.assert_array_equal(result.acquisition, report.acquisition)
        np.testing.assert_array_equal(report.acquisition, on_path @ costs.lazy)


def test_higgs_like_costs_and_fetch_order():
    booster, X, costs = higgs_like()
    store = Store(X, booster.feature_name())
    predictor = LazyPredictor(booster, store)  # costs from the model's cegb_* parameters
    result = predictor.acquire(np.full_like(X, np.nan))
    report = prediction_cost(booster, X)
    np.testing.assert_allclose(result.per_instance, report.per_instance, rtol=1e-12)
    np.testing.assert_array_equal(result.prediction, booster.predict(X))
    assert result.fetch_calls == len(store.calls)
    assert result.fetched.sum() < X.size  # the expensive features are bought for some rows only
    # cheapest first within each round: rounds are separated by a feature fetched a second time
    rounds, seen = [[]], set()
    for name, _ in store.calls:
        if name in seen:
            rounds.append([])
            seen = set()
        seen.add(name)
        rounds[-1].append(costs.lazy[booster.feature_name().index(name)])
    assert all(r == sorted(r) for r in rounds)
    assert len(rounds) <= result.rounds


def test_order_callable_and_keys():
    booster, X, _ = higgs_like()
    events = []

    def fetch(feature, ids):
        events.append(("fetch", feature))
        return X[ids, feature]

    def order(feature, ids):
        events.append(("order", feature))
        return -feature

    LazyPredictor(booster, fetch, feature_keys="index", order=order).predict(np.full_like(X, np.nan))
    rounds = []  # the fetches after each run of order calls: one round, sorted by the key
    for kind, feature in events:
        if kind == "order" and (not rounds or rounds[-1]):
            rounds.append([])
        elif kind == "fetch":
            rounds[-1].append(feature)
    assert len(rounds) > 1 and all(isinstance(f, int) for r in rounds for f in r)
    assert all(r == sorted(r, reverse=True) for r in rounds)


def test_nothing_to_fetch_and_input_untouched():
    booster, X, _ = higgs_like()
    X[0, :] = UNKNOWN  # a NaN with the bits that mark unknown values inside: known here, so missing
    original = X.copy()
    store = Store(X)
    result = LazyPredictor(booster, store).acquire(X, np.ones(X.shape, dtype=bool))
    assert store.calls == [] and result.rounds == 0 and result.acquisition.sum() == 0
    np.testing.assert_array_equal(result.prediction, booster.predict(X))
    np.testing.assert_array_equal(X, original)
    # NaN in X means unknown unless a mask says it is a known missing value
    store = Store(X)
    LazyPredictor(booster, store, feature_keys="index").acquire(X)
    fetched = {(int(f), int(i)) for f, ids in store.calls for i in ids}
    assert fetched and all(np.isnan(original[i, f]) for f, i in fetched)
    np.testing.assert_array_equal(X, original)
    # a fetch returning those bits returns a missing value: not fetched again
    store = Store(X)
    result = LazyPredictor(booster, store, feature_keys="index").acquire(np.full_like(X, np.nan))
    assert all(count == 1 for count in store.pairs().values()) and result.fetched[0].any()
    np.testing.assert_array_equal(result.prediction, booster.predict(X))


def test_partial_failures_keep_the_other_rows():
    booster, X, _ = higgs_like()
    names = booster.feature_name()
    store = Store(X, names)

    def fetch(feature, ids):
        if feature == names[5]:
            raise ConnectionError("feature store down")
        return store(feature, ids)

    result = LazyPredictor(booster, fetch, errors="partial").acquire(np.full_like(X, np.nan))
    assert result.failures and result.failures[0].feature == names[5]
    assert "feature store down" in str(result.failures[0])
    failed = result.status == FAILED
    assert failed.any() and (~failed).any() and not (result.status == PENDING).any()
    assert np.isnan(result.prediction[failed]).all()
    np.testing.assert_array_equal(result.prediction[~failed], booster.predict(X[~failed]))
    assert not result.fetched[:, 5].any()


def test_raise_then_resume_without_fetching_twice():
    booster, X, _ = higgs_like()
    names = booster.feature_name()
    store = Store(X, names)
    broken = {names[5]}

    def fetch(feature, ids):
        if feature in broken:
            raise TimeoutError("upstream")
        return store(feature, ids)

    predictor = LazyPredictor(booster, fetch)
    with pytest.raises(LazyFetchError,
                       match=rf"fetch\('{names[5]}'\) for \d+ row\(s\) \[.*\] failed: upstream") as info:
        predictor.acquire(np.full_like(X, np.nan))
    partial = info.value.result
    assert partial.prediction is None and (partial.status == PENDING).any()
    assert partial.known.any() and partial.acquisition.sum() > 0
    before = store.pairs()
    broken.clear()
    resumed = predictor.acquire(partial.X, partial.known)
    np.testing.assert_array_equal(resumed.prediction, booster.predict(X))
    after = store.pairs()
    assert all(count == 1 for count in after.values()) and set(before) <= set(after)
    # the message names the ids fetch was called with (issue 47), not the rows' positions in the batch
    broken.add(names[5])
    ids = np.arange(len(X)) * 7 + 1000
    with pytest.raises(LazyFetchError) as info:
        LazyPredictor(booster, lambda feature, asked: fetch(feature, (asked - 1000) // 7)).acquire(
            np.full_like(X, np.nan), ids=ids)
    failure = info.value.failure
    np.testing.assert_array_equal(failure.ids, ids[failure.rows])
    shown = ", ".join(map(str, failure.ids[:5].tolist()))
    assert f"[ids {shown}" in str(info.value)


@pytest.mark.parametrize(("returned", "message"), [
    (lambda ids: np.zeros(len(ids) + 1), r"returned shape \(\d+,\), expected \(\d+,\)"),
    (lambda ids: np.zeros((len(ids), 2)), r"returned shape \(\d+, 2\)"),
    (lambda ids: ["x"] * len(ids), "not numbers"),
])
def test_wrong_values_name_the_feature(returned, message):
    booster, X, _ = higgs_like()
    with pytest.raises(LazyFetchError, match=message) as info:
        LazyPredictor(booster, lambda f, ids: returned(ids)).predict(np.full_like(X, np.nan))
    assert info.value.failure.feature in booster.feature_name()


def test_timeout_and_retries():
    booster, X, _ = higgs_like(n=100)
    names = booster.feature_name()
    store = Store(X, names)
    attempts = Counter()

    def flaky(feature, ids):
        attempts[feature] += 1
        if attempts[feature] == 1:
            raise OSError("first call fails")
        return store(feature, ids)

    result = LazyPredictor(booster, flaky, retries=1).acquire(np.full_like(X, np.nan))
    np.testing.assert_array_equal(result.prediction, booster.predict(X))
    assert result.fetch_calls == len(store.calls) + len(attempts)

    def slow(feature, ids):
        if feature == names[5]:
            time.sleep(2.0)
        return store(feature, ids)

    start = time.monotonic()
    result = LazyPredictor(booster, slow, timeout=0.05, errors="partial").acquire(np.full_like(X, np.nan))
    assert time.monotonic() - start < 1.9, "the call waited for the slow fetch instead of timing out"
    assert "timed out after 0.05 s" in str(result.failures[0])
    assert (result.status == FAILED).any() and (result.status == DONE).any()


def test_thread_pool_and_asyncio_give_the_same_result():
    booster, X, _ = higgs_like()
    unknown = np.full_like(X, np.nan)
    expected = LazyPredictor(booster, Store(X, booster.feature_name())).acquire(unknown)
    threads = set()
    store = Store(X, booster.feature_name())

    def fetch(feature, ids):
        threads.add(threading.get_ident())
        time.sleep(0.01)
        return store(feature, ids)

    pooled = LazyPredictor(booster, fetch, max_workers=4).acquire(unknown)
    assert len(threads) > 1 and threading.get_ident() not in threads

    async def afetch(feature, ids):
        await asyncio.sleep(0.001)
        return X[ids, booster.feature_name().index(feature)]

    async_result = asyncio.run(LazyPredictor(booster, afetch, max_workers=3).aacquire(unknown))
    threaded_async = asyncio.run(LazyPredictor(booster, Store(X, booster.feature_name())).aacquire(unknown))
    for other in (pooled, async_result, threaded_async):
        np.testing.assert_array_equal(other.prediction, expected.prediction)
        np.testing.assert_array_equal(other.per_instance, expected.per_instance)
        assert other.rounds == expected.rounds
    with pytest.raises(CEGBError, match="coroutine function: use aacquire"):
        LazyPredictor(booster, afetch).predict(unknown)


def test_model_kinds(tmp_path):
    rng = np.random.default_rng(1)
    X = pd.DataFrame(rng.normal(size=(400, 5)), columns=[f"x {i}" for i in range(5)])
    y = (X["x 0"] + X["x 2"] * (X["x 1"] > 0) > 0).astype(int)
    unknown = pd.DataFrame(np.nan, index=X.index, columns=X.columns)
    costs = {"x 0": 1.0, "x 1": 2.0, "x 2": 3.0}

    def by_name(feature, ids):  # LightGBM renames spaces to '_'; scikit-learn keeps them
        return X[feature.replace("_", " ")].to_numpy()[ids]

    classifier = lgb.LGBMClassifier(n_estimators=15, num_leaves=7, verbose=-1).fit(X, y)
    forest_model = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0).fit(X, y)
    boosting = GradientBoostingClassifier(n_estimators=5, random_state=0).fit(X.to_numpy(), y)
    path = tmp_path / "model.txt"
    classifier.booster_.save_model(path)
    pruned = budget_prune(classifier, X, y, costs, tradeoff=0.01)
    cases = [(classifier, "predict_proba"), (classifier, "predict"), (forest_model, "predict_proba"),
             (boosting, "predict"), (pruned, "predict_proba")]
    for model, method in cases:
        target = pruned.model if model is pruned else model
        data = X.to_numpy() if model is boosting else X
        fetch, model_costs = (Store(X.to_numpy()), [1.0, 2.0, 3.0, 0.0, 0.0]) if model is boosting else (by_name, costs)
        result = LazyPredictor(model, fetch, feature_costs=model_costs).acquire(data * np.nan, method=method)
        np.testing.assert_array_equal(result.prediction, getattr(target, method)(data))
        if model is not boosting:
            np.testing.assert_allclose(result.per_instance, prediction_cost(target, X, costs).per_instance)
    from_file = LazyPredictor(str(path), by_name, feature_costs=costs).predict(unknown)
    np.testing.assert_array_equal(from_file, classifier.booster_.predict(X.to_numpy()))
    forest = to_forest(classifier)
    raw = LazyPredictor(forest, by_name, feature_costs=costs).predict(unknown)
    np.testing.assert_array_equal(raw, classifier.predict(X, raw_score=True))


def test_ids_are_passed_to_fetch():
    booster, X, _ = higgs_like(n=50)
    ids = np.arange(1000, 1050)
    seen = set()

    def fetch(feature, row_ids):
        seen.update(row_ids.tolist())
        return X[row_ids - 1000, booster.feature_name().index(feature)]

    prediction = LazyPredictor(booster, fetch).predict(np.full_like(X, np.nan), ids=ids)
    np.testing.assert_array_equal(prediction, booster.predict(X))
    assert seen <= set(ids.tolist()) and seen


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"fetch": 3}, "fetch should be a callable"),
    ({"order": "random"}, "order should be one of"),
    ({"max_workers": 0}, "max_workers should be None or an integer >= 1, got 0"),
    ({"timeout": -1}, "timeout should be None or a number of seconds > 0, got -1"),
    ({"retries": 1.5}, "retries should be an integer >= 0, got 1.5"),
    ({"errors": "ignore"}, r"errors should be one of \['raise', 'partial'\], got 'ignore'"),
    ({"feature_keys": "id"}, r"feature_keys should be one of \['name', 'index'\], got 'id'"),
    ({"feature_costs": [1.0, 2.0]}, "costs are for 2 features but the model has 8"),
])
def test_bad_arguments(kwargs, message):
    booster, X, _ = higgs_like(n=50)
    arguments = {"model": booster, "fetch": Store(X), **kwargs}
    with pytest.raises(CEGBError, match=message):
        LazyPredictor(**arguments)


def test_the_declared_parameters_refuse_what_they_say():
    """LazyPredictor declares every parameter (``_constraints``) and refuses each invalid value at entry, before it
    reads the model (a model of None is not reached)."""
    assert check_declared(LazyPredictor, {"model": None, "fetch": Store(np.zeros((1, 1)))}) >= 20


def test_an_order_callable_whose_keys_cannot_be_compared_is_named():
    """Issue 48 (13): "'<' not supported between instances of 'NoneType' and 'NoneType'" from inside a round."""
    booster, X, costs = higgs_like()
    predictor = LazyPredictor(booster, Store(X), feature_costs=costs, feature_keys="index",
                              order=lambda key, ids: None)
    with pytest.raises(CEGBError, match=r"order: the keys the callable returned for this round's fetches cannot be "
                                        r"compared \(.*\); return numbers"):
        predictor.predict(np.full(X.shape, np.nan))


def test_no_rows_give_an_empty_answer_of_the_models_kind():
    """Issue 48 (13): acquire of 0 rows on a scikit-learn-API model raised scikit-learn's "Found array with 0
    sample(s)" from deep inside; a Booster returned []."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    classifier = lgb.LGBMClassifier(n_estimators=3, verbose=-1).fit(X, (X[:, 0] > 0).astype(int) + (X[:, 1] > 0))
    forest = RandomForestClassifier(n_estimators=2, random_state=0).fit(X, X[:, 0] > 0)
    for model, method, shape in ((classifier, "predict_proba", (0, 3)), (classifier, "predict", (0,)),
                                 (forest, "predict_proba", (0, 2)), (classifier.booster_, "predict", (0, 3))):
        none = LazyPredictor(model, Store(X), feature_keys="index").acquire(np.full((0, 4), np.nan), method=method)
        assert none.prediction.shape == shape and none.per_instance.shape == (0,), (model, method)


def test_a_pipeline_is_refused_by_what_it_does():
    """Issue 48 (13): a Pipeline got "model should be a LightGBM Booster ..., got Pipeline" though the docstring
    said anything prediction_cost takes (which reads a Pipeline's final trees)."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    pipeline = make_pipeline(StandardScaler(), lgb.LGBMClassifier(n_estimators=3, verbose=-1)).fit(X, X[:, 0] > 0)
    with pytest.raises(CEGBError, match=r"model: a Pipeline's steps transform the values before its trees see them"):
        LazyPredictor(pipeline, Store(X))


def test_bad_batches():
    booster, X, _ = higgs_like(n=50)
    predictor = LazyPredictor(booster, Store(X))
    with pytest.raises(CEGBError, match=r"known should be a bool array of X's shape \(50, 8\)"):
        predictor.predict(X, np.ones((50, 7), dtype=bool))
    with pytest.raises(CEGBError, match=r"ids should hold one id per row of X \(50\)"):
        predictor.predict(X, ids=np.arange(3))
    with pytest.raises(CEGBError, match="X has 3 features but the model has 8"):
        predictor.predict(X[:, :3])


def test_num_iteration_and_predict_arguments():
    booster, X, costs = higgs_like()
    unknown = np.full_like(X, np.nan)
    store = Store(X, booster.feature_name())
    result = LazyPredictor(booster, store, num_iteration=5).acquire(unknown, raw_score=True)
    np.testing.assert_array_equal(result.prediction, booster.predict(X, num_iteration=5, raw_score=True))
    np.testing.assert_allclose(result.per_instance, prediction_cost(booster, X, num_iteration=5).per_instance)
    assert result.leaves.shape == (len(X), 5)
    store = Store(X, booster.feature_name())
    predictor = LazyPredictor(booster, store)
    for kwargs, message in [({"method": "transform"}, "Booster has no 'transform'"),
                            ({"pred_contrib": True}, "pred_contrib: not a predict argument here"),
                            ({"num_iteration": 3}, "give num_iteration to LazyPredictor")]:
        with pytest.raises(CEGBError, match=message):
            predictor.acquire(unknown, **kwargs)
    assert store.calls == []  # refused before anything was fetched
    rf = RandomForestClassifier(n_estimators=3, random_state=0).fit(np.nan_to_num(X), X[:, 0] > 0)
    with pytest.raises(CEGBError, match="num_iteration applies to LightGBM models only"):
        LazyPredictor(rf, store, feature_costs=costs, num_iteration=2)


def test_rows_knowing_nothing_next_to_rows_knowing_some_and_one_leaf_trees():
    booster, X, _ = higgs_like()
    rng = np.random.default_rng(3)
    given_X = np.where(rng.random(X.shape) < 0.4, X, np.nan)
    given_X[::2] = np.nan
    known = ~np.isnan(given_X) | (np.isnan(X) & (rng.random(X.shape) < 0.5))  # some missing values given
    store = Store(X)
    result = LazyPredictor(booster, store, feature_keys="index").acquire(given_X, known)
    np.testing.assert_array_equal(result.prediction, booster.predict(X))
    np.testing.assert_array_equal(result.leaves, booster.predict(X, pred_leaf=True))
    assert not (result.fetched & known).any()
    constant = lgb.train({"objective": "regression", "verbose": -1}, lgb.Dataset(X, np.ones(len(X))), 3)
    store = Store(X)
    result = LazyPredictor(constant, store, feature_keys="index").acquire(np.full_like(X, np.nan))
    assert store.calls == [] and result.rounds == 0 and (result.status == DONE).all()
    np.testing.assert_array_equal(result.prediction, constant.predict(X))


@pytest.mark.parametrize("params", [
    {"objective": "binary", "sigmoid": 0.7},
    {"objective": "regression", "boosting": "rf", "bagging_freq": 1, "bagging_fraction": 0.7},
    {"objective": "binary", "boosting": "rf", "bagging_freq": 1, "bagging_fraction": 0.7},
    {"objective": "regression", "reg_sqrt": True},
    {"objective": "poisson"},
    {"objective": "multiclassova", "num_class": 3},
], ids=["binary-sigmoid", "rf-regression", "rf-binary", "reg-sqrt", "poisson", "ova"])
def test_outputs_computed_from_leaves_or_by_predict_are_exact(params):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(500, 6))
    y = np.abs(X[:, 0] + X[:, 1] * X[:, 2] + rng.normal(0, 0.3, 500))
    if params["objective"] in ("binary", "multiclassova"):
        y = np.digitize(y, np.quantile(y, [0.5] if params["objective"] == "binary" else [1 / 3, 2 / 3]))
    booster = lgb.train({**params, "verbose": -1, "num_leaves": 7}, lgb.Dataset(X, y), 15)
    for kwargs in ({}, {"raw_score": True}):
        predictor = LazyPredictor(booster, Store(X), feature_costs=np.ones(6), feature_keys="index")
        prediction = predictor.predict(np.full_like(X, np.nan), **kwargs)
        np.testing.assert_array_equal(prediction, booster.predict(X, **kwargs))


@pytest.mark.filterwarnings("ignore:The argument 'eval_set' is deprecated")
@settings(max_examples=24, deadline=None, derandomize=True)
@given(st.integers(0, 10_000), st.sampled_from(["booster", "classifier", "regressor", "ranker", "cegb"]),
       st.sampled_from([2, 3, 4]), st.sampled_from([0.0, 0.4]), st.booleans())
def test_lightgbm_outputs_are_computed_from_the_leaves_to_the_bit(seed, kind, classes, known_share, stopped):
    """A multiclass Booster and the scikit-learn estimators of LightGBM's API (string or number labels, early stopped
    or not) are answered from the leaves the rows reached (serving.outputs), never by the model's predict on the
    filled rows: predict, predict_proba and raw scores equal the model's own to the bit, lazily, in batches and on a
    prepared row."""
    from lightgbm_cegb.lgbm.cegb_estimators import CEGBClassifier
    rng, X, signal = signal_rows(seed, n=400)
    codes = np.digitize(signal, np.quantile(signal, np.linspace(0, 1, classes + 1)[1:-1]))
    labels = np.array(["no", "yes", "maybe", "never"])[codes] if seed % 2 else codes * 3
    common = {"n_estimators": 30, "num_leaves": 7, "min_child_samples": 5, "verbose": -1, "random_state": seed}
    # eval_set: LightGBM 4.7's eval_X/eval_y path does not encode string labels
    stop = {"eval_set": [(X[300:], signal[300:] if kind == "regressor" else labels[300:])],
            "callbacks": [lgb.early_stopping(3, verbose=False)]} if stopped and kind != "ranker" else {}
    if kind == "booster":
        model = lgb.train({"objective": "multiclass" if classes > 2 else "binary", "verbose": -1, "num_leaves": 7,
                           **({"num_class": classes} if classes > 2 else {})}, lgb.Dataset(X, codes), 20)
    elif kind == "classifier":
        model = lgb.LGBMClassifier(**common).fit(X, labels, **stop)
    elif kind == "cegb":
        model = CEGBClassifier(feature_costs=FeatureCosts(lazy=np.ones(5)), cegb_tradeoff=0.001, **common).fit(
            X, labels, **stop)
    elif kind == "regressor":
        model = lgb.LGBMRegressor(**common).fit(X, signal, **stop)
    else:
        model = lgb.LGBMRanker(**common).fit(X, codes, group=[40] * 10)
    predictor = LazyPredictor(model, Store(X), feature_costs=np.ones(5), feature_keys="index")
    assert predictor._own is not None
    refuse_model_predict(predictor)
    known = rng.random(X.shape) < known_share
    rows = np.where(known, X, np.nan)
    for method in ("predict", "predict_proba") if hasattr(model, "predict_proba") else ("predict",):
        for kwargs in ({}, {"raw_score": True}):
            expected = getattr(model, method)(X, **kwargs)
            np.testing.assert_array_equal(getattr(predictor, method)(rows, known, **kwargs), expected)
            np.testing.assert_array_equal(predictor.acquire(rows, known, method=method, **kwargs).prediction,
                                          expected)
    prepared = predictor.prepare()
    for i in range(5):
        np.testing.assert_array_equal(prepared.predict(id=i), model.predict(X[i:i + 1])[0])


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.integers(0, 10_000), st.sampled_from(["gb", "hist"]), st.sampled_from(["binary", "multiclass", "regression"]),
       st.sampled_from([0.0, 0.4]), st.booleans())
def test_sklearn_boosting_outputs_are_computed_from_the_leaves_to_the_bit(seed, family, task, known_share, variant):
    """scikit-learn's gradient boosting (GradientBoosting* with its default init or init="zero", subsampled or early
    stopped; HistGradientBoosting* with missing values, early stopping, a Poisson loss) is answered from the leaves
    the rows reached (serving.outputs.SklearnOutput), never by the model's predict: predict, predict_proba and
    decision_function equal the model's own to the bit, lazily and on a prepared row."""
    from sklearn.ensemble import (
        GradientBoostingClassifier,
        GradientBoostingRegressor,
        HistGradientBoostingClassifier,
        HistGradientBoostingRegressor,
    )

    from lightgbm_cegb.serving.outputs import SklearnOutput
    rng, X, signal = signal_rows(seed, missing=family == "hist")
    if task == "regression":
        y = np.exp(signal / 2) if family == "hist" and variant else signal
    else:
        codes = np.digitize(signal, [0.0] if task == "binary" else [-0.5, 0.5])
        y = np.array(["no", "yes", "maybe"])[codes] if seed % 2 else codes * 3
    if family == "gb":
        options = {"n_estimators": 20, "max_depth": 3, "random_state": seed,
                   **({"subsample": 0.7, "n_iter_no_change": 3, "validation_fraction": 0.2} if variant else
                      {"init": "zero"} if seed % 3 == 0 else {})}
        model = (GradientBoostingRegressor if task == "regression" else GradientBoostingClassifier)(**options)
    else:
        options = {"max_iter": 20, "random_state": seed, **({"early_stopping": True, "n_iter_no_change": 3,
                                                             "validation_fraction": 0.2} if variant else {})}
        if task == "regression" and variant:
            options["loss"] = "poisson"
        model = (HistGradientBoostingRegressor if task == "regression" else HistGradientBoostingClassifier)(**options)
    model.fit(X, y)
    predictor = LazyPredictor(model, Store(X), feature_costs=np.ones(5), feature_keys="index")
    assert isinstance(predictor._own, SklearnOutput)
    refuse_model_predict(predictor)
    known = rng.random(X.shape) < known_share
    rows = np.where(known, X, np.nan)
    methods = ("predict",) if task == "regression" else ("predict", "predict_proba", "decision_function")
    for method in methods:
        expected = getattr(model, method)(X)
        np.testing.assert_array_equal(predictor.acquire(rows, known, method=method).prediction, expected)
    prepared = predictor.prepare()
    for i in range(5):
        np.testing.assert_array_equal(prepared.predict(id=i), model.predict(X[i:i + 1])[0])


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.integers(0, 10_000), st.sampled_from(["tree", "forest", "extra"]), st.sampled_from([2, 3, 0]),
       st.sampled_from([0.0, 0.4]))
def test_sklearn_tree_outputs_are_computed_from_the_leaves_to_the_bit(seed, family, classes, known_share):
    """scikit-learn's decision trees, random forests and extra trees (classes 0: a regressor; string or number
    labels; missing values) are answered from the leaves the rows reached (serving.outputs.SklearnTreeOutput), never
    by the model's predict: predict and predict_proba equal the model's own to the bit, lazily and on a prepared
    row; a forest predicting on several threads (its own order of additions) is left to its predict."""
    from sklearn.ensemble import (
        ExtraTreesClassifier,
        ExtraTreesRegressor,
        RandomForestClassifier,
        RandomForestRegressor,
    )
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

    from lightgbm_cegb.serving.outputs import SklearnTreeOutput
    rng, X, signal = signal_rows(seed)
    kinds = {"tree": (DecisionTreeRegressor, DecisionTreeClassifier), "forest": (RandomForestRegressor,
             RandomForestClassifier), "extra": (ExtraTreesRegressor, ExtraTreesClassifier)}[family]
    options = {"max_depth": 6, "random_state": seed, **({} if family == "tree" else {"n_estimators": 10})}
    if classes:
        codes = np.digitize(signal, np.quantile(signal, np.linspace(0, 1, classes + 1)[1:-1]))
        model = kinds[1](**options).fit(X, np.array(["no", "yes", "maybe"])[codes] if seed % 2 else codes * 3)
    else:
        model = kinds[0](**options).fit(X, signal)
    predictor = LazyPredictor(model, Store(X), feature_costs=np.ones(5), feature_keys="index")
    assert isinstance(predictor._own, SklearnTreeOutput)
    refuse_model_predict(predictor)
    known = rng.random(X.shape) < known_share
    rows = np.where(known, X, np.nan)
    for method in ("predict", "predict_proba") if classes else ("predict",):
        expected = getattr(model, method)(X)
        got = predictor.acquire(rows, known, method=method).prediction
        np.testing.assert_array_equal(got, expected)
        assert got.dtype == expected.dtype
    prepared = predictor.prepare()
    for i in range(5):
        np.testing.assert_array_equal(prepared.predict(id=i), model.predict(X[i:i + 1])[0])
    if family != "tree":
        model.set_params(n_jobs=2)
        assert LazyPredictor(model, Store(X), feature_costs=np.ones(5), feature_keys="index")._own is None


def test_sklearn_boosting_that_the_leaves_do_not_answer_is_predicted_by_its_own_method_or_refused():
    """A subclass that changes predict is left to its own method; an init estimator that reads the rows' features
    (which no tree reads, so neither the costs nor a lazy row would have them) is refused by name."""
    from sklearn.ensemble import GradientBoostingRegressor, HistGradientBoostingRegressor
    from sklearn.linear_model import LinearRegression

    class Shifted(HistGradientBoostingRegressor):
        def predict(self, X):
            return super().predict(X) + 1.0

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    model = Shifted(max_iter=5).fit(X, X[:, 0])
    predictor = LazyPredictor(model, Store(X), feature_costs=np.ones(3), feature_keys="index")
    assert predictor._own is None
    np.testing.assert_array_equal(predictor.predict(np.full_like(X, np.nan)), model.predict(X))
    linear = GradientBoostingRegressor(n_estimators=5, init=LinearRegression()).fit(X, X[:, 0])
    for use in (lambda: LazyPredictor(linear, Store(X), feature_keys="index"), lambda: to_forest(linear),
                lambda: prediction_cost(linear, X, np.ones(3))):
        with pytest.raises(CEGBError, match="init estimator of this GradientBoostingRegressor .LinearRegression."):
            use()


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.integers(0, 10_000), st.sampled_from(["booster", "classifier", "regressor", "rf"]),
       st.sampled_from(["binary:logistic", "multi:softprob", "multi:softmax", "reg:squarederror", "count:poisson",
                        "reg:tweedie", "binary:logitraw"]), st.sampled_from([0.0, 0.4]), st.booleans())
def test_xgboost_outputs_are_computed_from_the_leaves_to_the_bit(seed, estimator, objective, known_share, stopped):
    """XGBoost Boosters and estimators (random forests, early stopped, missing values) are answered from the leaves
    the rows reached (serving.outputs.XGBoostOutput: float32 margins from the objective's margin of the base_score,
    the objective's float32 transform), never by the model's predict: predict (with output_margin too) and
    predict_proba equal the model's own to the bit, dtype and shape included, lazily and on a prepared row."""
    import xgboost as xgb

    from lightgbm_cegb.serving.outputs import XGBoostOutput
    rng, X, signal = signal_rows(seed)
    if objective.startswith("multi"):
        y = np.digitize(signal, [-0.5, 0.5])
    elif objective.startswith("binary"):
        y = (signal > 0).astype(int)
    else:
        y = np.exp(signal / 2) if objective != "reg:squarederror" else signal
    classifier = objective.startswith(("multi", "binary:logistic"))
    if estimator in ("classifier", "rf") and not classifier:
        estimator = "regressor"
    if estimator == "regressor" and classifier:
        estimator = "classifier"
    options = {"n_estimators": 15, "max_depth": 3, "random_state": seed, "objective": objective}
    if estimator == "booster":
        params = {"objective": objective, "max_depth": 3, "eta": 0.3, "seed": seed,
                  **({"num_class": 3} if objective.startswith("multi") else {})}
        model = xgb.train(params, xgb.DMatrix(X, y), 15)
    elif estimator == "rf":
        model = xgb.XGBRFClassifier(**{**options, "n_estimators": 5}).fit(X, y)
    else:
        kind = xgb.XGBClassifier if estimator == "classifier" else xgb.XGBRegressor
        if stopped:
            model = kind(**options, early_stopping_rounds=2).fit(X[:200], y[:200], eval_set=[(X[200:], y[200:])],
                                                                verbose=False)
        else:
            model = kind(**options).fit(X, y)
    predictor = LazyPredictor(model, Store(X), feature_costs=np.ones(5), feature_keys="index")
    assert isinstance(predictor._own, XGBoostOutput)
    refuse_model_predict(predictor)
    known = rng.random(X.shape) < known_share
    rows = np.where(known, X, np.nan)
    full = xgb.DMatrix(X) if estimator == "booster" else X
    calls = [("predict", {}), ("predict", {"output_margin": True})]
    if hasattr(model, "predict_proba"):
        calls.append(("predict_proba", {}))
    for method, kwargs in calls:
        expected = getattr(model, method)(full, **kwargs)
        got = predictor.acquire(rows, known, method=method, **kwargs).prediction
        np.testing.assert_array_equal(got, expected)
        assert (got.dtype, got.shape) == (expected.dtype, expected.shape)
    prepared = predictor.prepare()
    for i in range(5):
        np.testing.assert_array_equal(prepared.predict(id=i), model.predict(full.slice([i]) if estimator == "booster"
                                                                            else X[i:i + 1])[0])


def test_xgboost_dart_and_custom_objectives():
    """dart (its trees' outputs scaled when it predicts) is left to the model's own predict; an estimator trained with
    a callable objective predicts with the objective its model names (XGBClassifier's: binary:logistic), and so do
    its outputs computed from the leaves."""
    import xgboost as xgb

    from lightgbm_cegb.serving.outputs import XGBoostOutput

    def squared(y_true, y_pred):
        return y_pred - y_true, np.ones_like(y_pred)

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    dart = xgb.XGBRegressor(n_estimators=5, booster="dart").fit(X, X[:, 0])
    custom = xgb.XGBClassifier(n_estimators=5, objective=squared).fit(X, (X[:, 0] > 0).astype(int))
    for model, kind in ((dart, type(None)), (custom, XGBoostOutput)):
        predictor = LazyPredictor(model, Store(X), feature_costs=np.ones(3), feature_keys="index")
        assert isinstance(predictor._own, kind)
        for method in ("predict", "predict_proba") if hasattr(model, "predict_proba") else ("predict",):
            np.testing.assert_array_equal(getattr(predictor, method)(np.full_like(X, np.nan)),
                                          getattr(model, method)(X))


@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.integers(0, 10_000), st.sampled_from(["binary", "multiclass", "regression"]), st.sampled_from([0.0, 0.4]))
def test_catboost_outputs_are_computed_from_the_leaves_to_the_bit(seed, task, known_share):
    """CatBoost classifiers (labels of any type) and regressors (a bias from the mean) are answered from the leaves
    the rows reached (serving.outputs.CatBoostOutput: scale * sum + bias, the sigmoid, the class rule), never by the
    model's predict: predict of each prediction type it computes and predict_proba equal the model's own to the
    bit, dtype and shape included; a multiclass probability (CatBoost's approximate exp) is the model's own."""
    import catboost

    from lightgbm_cegb.serving.outputs import CatBoostOutput
    rng, X, signal = signal_rows(seed)
    options = {"iterations": 15, "depth": 3, "random_seed": seed, "verbose": 0, "thread_count": 1}
    if task == "regression":
        model = catboost.CatBoostRegressor(**options).fit(X, signal + 3)
    else:
        codes = np.digitize(signal, [0.0] if task == "binary" else [-0.5, 0.5])
        labels = np.array(["no", "yes", "maybe"])[codes] if seed % 2 else codes * 3 + 1
        model = catboost.CatBoostClassifier(**options).fit(X, labels)
    predictor = LazyPredictor(model, Store(X), feature_costs=np.ones(5), feature_keys="index")
    assert isinstance(predictor._own, CatBoostOutput)
    calls = [("predict", {}), ("predict", {"prediction_type": "RawFormulaVal"})]
    if task == "binary":
        calls += [("predict", {"prediction_type": "Probability"}), ("predict_proba", {})]
    known = rng.random(X.shape) < known_share
    rows = np.where(known, X, np.nan)
    model_predict_rows = predictor.predict_rows
    refuse_model_predict(predictor)
    for method, kwargs in calls:
        expected = getattr(model, method)(X, **kwargs)
        got = predictor.acquire(rows, known, method=method, **kwargs).prediction
        np.testing.assert_array_equal(got, expected)
        assert (got.dtype, got.shape) == (expected.dtype, expected.shape)
    if task == "multiclass":
        predictor.predict_rows = model_predict_rows
        np.testing.assert_array_equal(predictor.predict_proba(rows, known), model.predict_proba(X))


def test_a_subclass_that_changes_an_output_is_predicted_by_its_own_method():
    class Shifted(lgb.LGBMRegressor):
        def predict(self, X, **kwargs):
            return super().predict(X, **kwargs) + 1.0

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    model = Shifted(n_estimators=5, verbose=-1).fit(X, X[:, 0])
    predictor = LazyPredictor(model, Store(X), feature_costs=np.ones(3), feature_keys="index")
    assert predictor._own is None
    np.testing.assert_array_equal(predictor.predict(np.full_like(X, np.nan)), model.predict(X))


def test_a_slow_fetch_times_out_alone():
    booster, X, _ = higgs_like(n=300)
    names = booster.feature_name()
    store = Store(X, names)
    slow = names[5]

    def fetch(feature, ids):
        if feature == slow:
            time.sleep(0.6)
        return store(feature, ids)

    for predictor in (LazyPredictor(booster, fetch, timeout=0.1, errors="partial"),
                      LazyPredictor(booster, fetch, timeout=0.1, errors="partial", max_workers=2)):
        result = predictor.acquire(np.full_like(X, np.nan))
        assert {failure.feature for failure in result.failures} == {slow}
        assert not result.fetched[:, 5].any()
        needs_slow = result.status == FAILED
        assert needs_slow.any() and (result.status[~needs_slow] == DONE).all()
        assert any(name != slow for name, _ in store.calls)  # the others were fetched, not timed out
    result = asyncio.run(LazyPredictor(booster, fetch, timeout=0.1, errors="partial").aacquire(np.full_like(X, np.nan)))
    assert {failure.feature for failure in result.failures} == {slow}


def test_async_callable_object_and_string_values():
    booster, X, _ = higgs_like(n=100)
    names = booster.feature_name()

    class Source:
        async def __call__(self, feature, ids):
            await asyncio.sleep(0)
            return X[ids, names.index(feature)]

    prediction = asyncio.run(LazyPredictor(booster, Source()).apredict(np.full_like(X, np.nan)))
    np.testing.assert_array_equal(prediction, booster.predict(X))
    with pytest.raises(LazyFetchError, match="not numbers"):
        LazyPredictor(booster, lambda f, ids: np.full(len(ids), "1.5")).predict(np.full_like(X, np.nan))


def test_live_booster_with_a_sigmoid_the_model_text_rounds():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    booster = lgb.train({"objective": "binary", "sigmoid": 0.123456789, "verbose": -1}, lgb.Dataset(X, y), 20,
                        keep_training_booster=True)
    assert "sigmoid:0.123457" in booster.model_to_string()
    prediction = LazyPredictor(booster, Store(X), feature_costs=np.ones(4), feature_keys="index").predict(
        np.full_like(X, np.nan))
    np.testing.assert_array_equal(prediction, booster.predict(X))


def test_pandas_category_models_are_refused():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=300), "c": pd.Categorical(rng.choice([10, 20, 30], 300))})
    booster = lgb.train({"objective": "regression", "verbose": -1, "min_data_per_group": 5},
                        lgb.Dataset(frame, frame["a"] + frame["c"].cat.codes), 5)
    with pytest.raises(CEGBError, match="pandas category columns"):
        LazyPredictor(booster, Store(frame.to_numpy()), feature_costs=np.ones(2))


@pytest.mark.parametrize("penalties", [{"cegb_penalty_feature_coupled": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]},
                                       {"cegb_penalty_split": 0.5}])
@pytest.mark.parametrize("order", ["cheapest", "costliest", "most_rows", "model"])
def test_costs_without_a_lazy_part_cost_nothing_to_fetch(penalties, order):
    """A model trained with coupled or split penalties only: its costs (read from the model, as documented)
    have no lazy costs, which made every batch fail with a bare TypeError. Every feature's lazy cost is 0."""
    _, X, _ = higgs_like()
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 5]) > 0).astype(float)
    booster = lgb.train({"objective": "binary", "num_leaves": 15, "verbose": -1, "num_threads": 1,
                         "cegb_tradeoff": 0.01, **penalties}, lgb.Dataset(X, y), 10)
    store = Store(X)
    predictor = LazyPredictor(booster, store, feature_keys="index", order=order)
    assert predictor.costs_.lazy is None
    result = predictor.acquire(np.full_like(X, np.nan))
    np.testing.assert_array_equal(result.prediction, booster.predict(X))
    assert all(count == 1 for count in store.pairs().values()) and (result.acquisition == 0).all()
    np.testing.assert_array_equal(result.per_instance, prediction_cost(booster, X).per_instance)


@pytest.mark.parametrize("raised", [KeyboardInterrupt, SystemExit, RuntimeError])
@pytest.mark.parametrize("options", [{"max_workers": 2}, {"timeout": 30.0}, {"asyncio": True}])
def test_a_fetch_raising_on_a_worker_thread_is_reported_as_raised(raised, options):
    """A KeyboardInterrupt raised by fetch on a worker thread was lost with the thread and reported as
    'timed out after None s' (or after the time-out, at once); under aacquire it stopped the event loop. It is
    that call's failure, named (the exception fetch raised is the failure's cause)."""
    booster, X, _ = higgs_like(n=100)
    names = booster.feature_name()
    store = Store(X, names)

    def fetch(feature, ids):
        if feature == names[5]:
            raise raised()
        return store(feature, ids)

    options = dict(options)
    run_async = options.pop("asyncio", False)
    predictor = LazyPredictor(booster, fetch, errors="partial", **options)
    start = time.monotonic()
    try:  # a regression must fail this test, not interrupt or end the test session
        if run_async:
            result = asyncio.run(predictor.aacquire(np.full_like(X, np.nan)))
        else:
            result = predictor.acquire(np.full_like(X, np.nan))
    except (KeyboardInterrupt, SystemExit) as exc:
        pytest.fail(f"fetch's {type(exc).__name__} on a worker thread escaped to the caller")
    assert time.monotonic() - start < 20, "the failure waited for the time-out"
    assert len(result.failures) == 1 and result.failures[0].feature == names[5]
    message = str(result.failures[0])
    assert message.endswith(f"failed: it raised {raised.__name__}") and "timed out" not in message, message
    error = result.failures[0].error
    assert isinstance(error, Exception) and (isinstance(error, raised) or isinstance(error.__cause__, raised))
    assert (result.status == FAILED).any() and (result.status == DONE).any()
    with pytest.raises(LazyFetchError, match=rf"failed: it raised {raised.__name__}$"):
        if run_async:
            asyncio.run(LazyPredictor(booster, fetch, **options).aacquire(np.full_like(X, np.nan)))
        else:
            LazyPredictor(booster, fetch, **options).acquire(np.full_like(X, np.nan))


# ---------------------------------------------------------------------------------------------- feature groups


class GroupStore:
    """fetch(key, ids) over full rows with groups: a group's key returns its members together (a 2-D array in
    member order, a dict or a DataFrame); records every call."""

    def __init__(self, X: np.ndarray, groups: dict, keys=None, returns: str = "array") -> None:
        self.X, self.groups, self.returns, self.calls = X, groups, returns, []
        self.keys = list(range(X.shape[1])) if keys is None else list(keys)
        self.lock = threading.Lock()

    def __call__(self, key, ids):
        with self.lock:
            self.calls.append((key, np.asarray(ids).copy()))
        if key not in self.groups:
            return self.X[ids, self.keys.index(key)]
        members = self.groups[key]
        values = self.X[np.ix_(ids, [self.keys.index(m) for m in members])]
        if self.returns == "array":
            return values
        mapping = {m: values[:, j] for j, m in enumerate(members)}
        mapping = dict(reversed(mapping.items()))  # by key, not by position
        return mapping if self.returns == "dict" else pd.DataFrame(mapping)

    def pairs(self) -> Counter:
        return Counter((key, int(i)) for key, ids in self.calls for i in ids)


def random_groups(rng, num_features: int) -> dict[str, list[int]]:
    """Random groups of random sizes (some features in none), members in a random order."""
    group_id = rng.integers(-1, rng.integers(1, num_features + 1), num_features)
    groups = {f"g{g}": rng.permutation(np.flatnonzero(group_id == g)).tolist() for g in np.unique(group_id) if g >= 0}
    return {name: members for name, members in groups.items() if members}


@settings(max_examples=60, deadline=None, derandomize=True)
@given(model_and_data(), st.sampled_from([0.0, 0.3]), st.sampled_from(["array", "dict", "frame"]),
       st.sampled_from(FETCH_ORDERS), st.sampled_from([1, 2]))
def test_groups_fetched_once_per_row_on_random_models_and_groupings(case, known_share, returns, order, n_jobs):
    booster, X, rng = case
    if to_forest(booster).linear is not None:
        return
    num_features = booster.num_feature()
    groups = random_groups(rng, num_features)
    lazy = rng.integers(0, 20, num_features).astype(float)  # integers: sums exact in any order
    group_lazy = rng.integers(0, 50, len(groups)).astype(float)
    costs = FeatureCosts(lazy=lazy, split=rng.uniform(0, 0.3, num_features), groups=groups,
                         group_lazy=group_lazy, tree=0.1)
    group_of = np.full(num_features, -1)
    for g, members in enumerate(groups.values()):
        group_of[members] = g
    store = GroupStore(X, groups, returns=returns)
    known = rng.random(X.shape) < known_share
    predictor = LazyPredictor(booster, store, feature_costs=costs, feature_keys="index", order=order, n_jobs=n_jobs)
    assert predictor.groups == groups
    result = predictor.acquire(np.where(known, X, np.nan), known)
    assert (result.status == DONE).all()
    np.testing.assert_array_equal(result.prediction, booster.predict(X))
    # the reference: the features on each row's paths, from LightGBM's leaves and the model text
    paths = leaf_paths(booster)
    leaves = booster.predict(X, pred_leaf=True).reshape(len(X), -1)
    read = np.zeros(X.shape, dtype=bool)
    for i in range(len(X)):
        for t in range(leaves.shape[1]):
            read[i, paths[t][leaves[i, t]]] = True
    wanted = read & ~known
    pairs = store.pairs()
    assert all(count == 1 for count in pairs.values()), "a (row, key) was fetched twice"
    expected = {(int(f), int(i)) for i, f in zip(*np.nonzero(wanted)) if group_of[f] < 0}
    expected |= {(name, int(i)) for g, name in enumerate(groups)
                 for i in np.flatnonzero(wanted[:, group_of == g].any(axis=1))}
    assert set(pairs) == expected
    # realised cost from the store's log: a group's cost per (row, group) fetched, a feature's per (row, feature
    # in no group) fetched, a member's own cost where the row's paths read it (its group fetched for the row)
    realised = np.zeros(len(X))
    for key, ids in store.calls:
        realised[ids] += group_lazy[list(groups).index(key)] if key in groups else lazy[key]
    realised += (wanted & (group_of >= 0)) @ lazy
    np.testing.assert_array_equal(result.acquisition, realised)
    if known_share == 0:
        report = prediction_cost(booster, X, costs)
        np.testing.assert_array_equal(result.acquisition, report.acquisition)
        np.testing.assert_allclose(result.evaluation, report.evaluation, rtol=1e-12)
    # fetched: what was asked for, a group's members all (where not given)
    asked = np.zeros(X.shape, dtype=bool)
    for key, ids in store.calls:
        asked[np.ix_(ids, groups[key] if key in groups else [key])] = True
    np.testing.assert_array_equal(result.fetched, asked & ~known)
    np.testing.assert_array_equal(result.known, known | asked)
    calls_per_key = Counter(key for key, _ in store.calls)
    assert max(calls_per_key.values(), default=0) <= result.rounds and result.fetch_calls == len(store.calls)


def grouped_higgs_like(n=400):
    """higgs_like's data, trained with two groups (ids 0: columns 3, 4; 1: columns 5, 6, 7) in the model's
    cegb_* parameters."""
    _, X, _ = higgs_like(n)
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 5]) * (np.nan_to_num(X[:, 3]) > 0) > 0).astype(float)
    costs = FeatureCosts(lazy=[1, 1, 1, 2, 2, 3, 4, 5], split=0.5, groups=[-1, -1, -1, 0, 0, 1, 1, 1],
                         group_lazy=[5.0, 20.0])
    params = {"objective": "binary", "num_leaves": 15, "verbose": -1, "seed": 0, "num_threads": 1,
              **costs.to_params(tradeoff=0.01)}
    return lgb.train(params, lgb.Dataset(X, y), 20), X


def test_groups_from_the_model_sync_threads_asyncio_and_order():
    booster, X = grouped_higgs_like()
    names = booster.feature_name()
    unknown = np.full_like(X, np.nan)
    stores, results = [], []

    def run(returns="array", asynchronous=False, **options):
        probe = LazyPredictor(booster, Store(X))
        store = GroupStore(X, probe.groups, names, returns)
        stores.append(store)
        fetch = store
        if asynchronous == "coroutine":
            async def fetch(key, ids):
                await asyncio.sleep(0)
                return store(key, ids)
        predictor = LazyPredictor(booster, fetch, **options)  # costs and groups from the model's parameters
        results.append(asyncio.run(predictor.aacquire(unknown)) if asynchronous else predictor.acquire(unknown))

    run()
    run("dict", max_workers=3)
    run("frame", timeout=30.0)
    run(asynchronous=True)
    run("dict", asynchronous="coroutine", max_workers=2)
    report = prediction_cost(booster, X)
    groups = LazyPredictor(booster, Store(X)).groups
    assert sorted(map(len, groups.values())) == [2, 3]
    assert all(member.startswith("Column_") for members in groups.values() for member in members)
    for store, result in zip(stores, results):
        np.testing.assert_array_equal(result.prediction, booster.predict(X))
        np.testing.assert_allclose(result.per_instance, report.per_instance, rtol=1e-12)
        assert result.rounds == results[0].rounds
        assert all(count == 1 for count in store.pairs().values())
        keys = {key for key, _ in store.calls}
        assert set(groups) <= keys and not keys & {m for members in groups.values() for m in members}
    # the order callable gets the groups' keys; a round's calls follow its key
    events = []

    def order(key, ids):
        events.append(("order", key))
        return str(key)

    def fetch(key, ids):
        events.append(("fetch", key))
        return stores[0](key, ids)

    LazyPredictor(booster, fetch, order=order).predict(unknown)
    rounds = []
    for kind, key in events:
        if kind == "order" and (not rounds or rounds[-1]):
            rounds.append([])
        elif kind == "fetch":
            rounds[-1].append(key)
    assert set(groups) <= {key for kind, key in events if kind == "order"}
    assert all(r == sorted(r) for r in rounds) and len(rounds) > 1


def test_cheapest_order_prices_a_group_with_its_members():
    booster, X = grouped_higgs_like()
    predictor = LazyPredictor(booster, Store(X))
    store = GroupStore(X, predictor.groups, booster.feature_name())
    predictor.fetch = store
    predictor.acquire(np.full_like(X, np.nan))
    price = {name: 1.0 for name in booster.feature_name()[:3]}
    price.update({name: (5.0 + 4.0 if len(members) == 2 else 20.0 + 12.0)
                  for name, members in predictor.groups.items()})
    rounds, seen = [[]], set()  # rounds are separated by a key fetched a second time
    for key, _ in store.calls:
        if key in seen:
            rounds.append([])
            seen = set()
        seen.add(key)
        rounds[-1].append(price[key])
    assert all(r == sorted(r) for r in rounds) and any(len(r) > 1 for r in rounds)


def test_values_given_for_some_members_stay():
    booster, X = grouped_higgs_like()
    predictor = LazyPredictor(booster, Store(X), feature_keys="index")
    store = GroupStore(X, predictor.groups)
    predictor.fetch = store
    rng = np.random.default_rng(0)
    given = np.full_like(X, np.nan)
    known = np.zeros(X.shape, dtype=bool)
    known[:, 5] = rng.random(len(X)) < 0.5  # a member of the costly group, given for half the rows
    given[known] = X[known] + 0.5  # not the store's values: the given ones are used
    result = predictor.acquire(given, known)
    expected_X = np.where(known, given, X)
    np.testing.assert_array_equal(result.prediction, booster.predict(expected_X))
    np.testing.assert_array_equal(result.X[known], given[known])
    assert not (result.fetched & known).any()
    assert all(count == 1 for count in store.pairs().values())


@pytest.mark.parametrize(("returned", "message"), [
    (lambda ids, m: np.zeros(len(ids)), r"returned shape \((\d+),\) for group '1', expected \(\1, 3\): one row per "
                                        r"row id, one column per member \['Column_5', 'Column_6', 'Column_7'\]"),
    (lambda ids, m: np.zeros((len(ids), 2)), r"returned shape \((\d+), 2\) for group '1', expected \(\1, 3\)"),
    (lambda ids, m: np.zeros((len(ids) + 1, 3)), r"returned shape \(\d+, 3\) for group '1', expected \(\d+, 3\)"),
    (lambda ids, m: {k: np.zeros(len(ids)) for k in m[:2]},
     r"returned a mapping with the keys \['Column_5', 'Column_6'\], expected the members of group '1'"),
    (lambda ids, m: {**{k: np.zeros(len(ids)) for k in m}, "id": ids}, "returned a mapping with the keys"),
    (lambda ids, m: {k: np.zeros(len(ids) - 1) for k in m},
     r"returned shape \(\d+,\) for member 'Column_5' of group '1', expected \(\d+,\)"),
    (lambda ids, m: np.full((len(ids), 3), "x"), "returned values that are not numbers"),
])
def test_a_wrong_group_answer_is_a_clear_error(returned, message):
    booster, X = grouped_higgs_like(n=200)
    groups = LazyPredictor(booster, Store(X)).groups
    assert groups["1"] == ["Column_5", "Column_6", "Column_7"]
    names = booster.feature_name()
    store = GroupStore(X, groups, names)

    def fetch(key, ids):
        return returned(ids, groups[key]) if key == "1" else store(key, ids)

    with pytest.raises(CEGBError, match=r"fetch\('1'\) for \d+ row\(s\) \[.*\] failed: " + message) as info:
        LazyPredictor(booster, fetch).predict(np.full_like(X, np.nan))
    assert isinstance(info.value, LazyFetchError) and info.value.failure.feature == "1"
    assert isinstance(info.value.__cause__, CEGBError)


def test_group_failures_partial_raise_and_resume():
    booster, X = grouped_higgs_like()
    names = booster.feature_name()
    groups = LazyPredictor(booster, Store(X)).groups
    store = GroupStore(X, groups, names)
    broken = {"1"}

    def fetch(key, ids):
        if key in broken:
            raise ConnectionError("descriptor service down")
        return store(key, ids)

    result = LazyPredictor(booster, fetch, errors="partial").acquire(np.full_like(X, np.nan))
    assert {failure.feature for failure in result.failures} == {"1"}
    failed = result.status == FAILED
    assert failed.any() and (~failed).any()
    np.testing.assert_array_equal(result.prediction[~failed], booster.predict(X[~failed]))
    assert not result.fetched[:, 5:].any()
    store.calls.clear()
    with pytest.raises(LazyFetchError, match=r"fetch\('1'\) for \d+ row\(s\) .* failed: descriptor service down") \
            as info:
        LazyPredictor(booster, fetch).acquire(np.full_like(X, np.nan))
    assert not isinstance(info.value, CEGBError)  # the store failed, not the fetch's contract
    partial = info.value.result
    broken.clear()
    resumed = LazyPredictor(booster, fetch).acquire(partial.X, partial.known)
    np.testing.assert_array_equal(resumed.prediction, booster.predict(X))
    assert all(count == 1 for count in store.pairs().values()), "a (row, key) was fetched in both calls"


def test_a_group_named_as_a_feature_outside_it_is_refused():
    booster, X = grouped_higgs_like(n=100)
    costs = FeatureCosts(lazy=np.ones(8), groups={"Column_0": ["Column_1", "Column_2"]})
    with pytest.raises(CEGBError, match="the group name 'Column_0' is also the key of a feature in no group"):
        LazyPredictor(booster, Store(X), feature_costs=costs)
    own = FeatureCosts(lazy=np.ones(8), groups={"Column_1": ["Column_1", "Column_2"]})  # its own member: no clash
    store = GroupStore(X, {"Column_1": ["Column_1", "Column_2"]}, booster.feature_name())
    prediction = LazyPredictor(booster, store, feature_costs=own).predict(np.full_like(X, np.nan))
    np.testing.assert_array_equal(prediction, booster.predict(X))
    assert LazyPredictor(booster, Store(X), feature_costs=costs, feature_keys="index").groups == {"Column_0": [1, 2]}


@pytest.mark.parametrize("returns", ["series", "frame", "dict of series"])
def test_pandas_values_are_read_by_their_index_not_their_position(returns):
    """Issue 48 (3): a store answering WHERE id IN (...) in its own order, indexed by id, had its values assigned
    to other rows. A pandas object is read by its index (the row ids), or by position for a RangeIndex."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 4))
    y = X[:, 0] + X[:, 1] * X[:, 2] - X[:, 3]
    booster = lgb.train({"objective": "regression", "num_leaves": 8, "verbose": -1}, lgb.Dataset(X, y), 20)
    ids = np.array([f"row-{i}" for i in rng.permutation(1000)[:len(X)]])
    position = {row_id: i for i, row_id in enumerate(ids)}
    groups = {"pair": [1, 2]}

    def fetch(key, asked):
        shuffled = rng.permutation(asked)  # the store's own order, indexed by id
        rows = [position[a] for a in shuffled]
        if key != "pair":
            return pd.Series(X[rows, key], index=shuffled)
        frame = pd.DataFrame({1: X[rows, 1], 2: X[rows, 2]}, index=shuffled)
        if returns == "series":  # the group as a plain array in the order asked
            return X[[position[a] for a in asked]][:, [1, 2]]
        return frame if returns == "frame" else {1: frame[1], 2: frame[2]}

    predictor = LazyPredictor(booster, fetch, feature_costs=FeatureCosts(lazy=np.ones(4), groups=groups,
                                                                         group_lazy=[1.0]), feature_keys="index")
    result = predictor.acquire(np.full(X.shape, np.nan), ids=ids)
    np.testing.assert_array_equal(result.prediction, booster.predict(X))
    np.testing.assert_array_equal(result.X[result.known], X[result.known])

    positional = LazyPredictor(booster, lambda key, asked: pd.Series(X[[position[a] for a in asked], key]),
                               feature_keys="index")
    np.testing.assert_array_equal(positional.predict(np.full(X.shape, np.nan), ids=ids), booster.predict(X))
    wrong = LazyPredictor(booster, lambda key, asked: pd.Series(np.zeros(len(asked)), index=np.arange(len(asked)) + 7),
                          feature_keys="index")
    with pytest.raises(LazyFetchValueError, match=r"indexed by \[7, 8, 9, 10, 11, \.\.\.\]: its index should hold"):
        wrong.predict(np.full(X.shape, np.nan), ids=ids)


@pytest.mark.parametrize("grouped", [False, True])
def test_large_batches_on_threads_equal_one_thread(grouped):
    """Batches large enough for the kernel's parallel paths (routing, storing a fetch's values, the raw scores):
    every array of the result as with one thread, and the predictions LightGBM's own."""
    if grouped:
        booster, X = grouped_higgs_like(4000)
        costs = None
    else:
        booster, X, costs = higgs_like(4000)
    known = np.random.default_rng(1).random(X.shape) < 0.2
    groups = LazyPredictor(booster, Store(X)).groups
    assert bool(groups) == grouped
    results = [LazyPredictor(booster, GroupStore(X, groups, booster.feature_name()), feature_costs=costs,
                             n_jobs=n_jobs).acquire(np.where(known, X, np.nan), known) for n_jobs in (1, 2)]
    np.testing.assert_array_equal(results[0].prediction, booster.predict(X))
    for name in ("prediction", "status", "X", "known", "fetched", "acquisition", "evaluation", "leaves"):
        np.testing.assert_array_equal(getattr(results[1], name), getattr(results[0], name), err_msg=name)
    assert results[1].rounds == results[0].rounds and results[1].fetch_calls == results[0].fetch_calls


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("rows_order", ["advance", "shuffled"])
def test_a_round_stores_its_values_as_deliver_does(threads, rows_order):
    """LazyBatch.fetch_round stores a round's values after its last call, row tile by row tile (rows ascending, as
    advance gives them) or request by request (other rows): the batch ends as one given each request's values
    through deliver, the missing values included, on a batch of many tiles."""
    from lightgbm_cegb._engine import LazyBatch

    booster, X, costs = higgs_like(n=3000)
    plan = LazyPredictor(booster, Store(X), feature_costs=costs, feature_keys="index")._plan
    rng = np.random.default_rng(0)
    stored, delivered = (LazyBatch(plan, np.full_like(X, np.nan), None, threads) for _ in range(2))
    keys = list(range(X.shape[1]))
    rounds = 0
    while requests := stored.advance():
        assert [(u, list(rows)) for u, rows in requests] == [(u, list(rows)) for u, rows in delivered.advance()]
        if rows_order == "shuffled":
            requests = [(u, rng.permutation(rows)) for u, rows in requests]
        assert stored.fetch_round(requests, lambda key, ids: X[ids, key], keys, None) is None
        for unit, rows in requests:
            delivered.deliver(unit, rows, X[rows, unit])
        stored.read_held()
        delivered.read_held()
        rounds += 1
    assert rounds >= 2 and not delivered.advance()
    assert np.isnan(X).any()
    for field in ("fetched", "paid", "acquisition", "evaluation", "status"):
        np.testing.assert_array_equal(getattr(stored, field), getattr(delivered, field), err_msg=field)
    np.testing.assert_array_equal(stored.values()[0].view(np.uint64), delivered.values()[0].view(np.uint64))
    np.testing.assert_array_equal(stored.leaves(), delivered.leaves())
    np.testing.assert_array_equal(stored.raw_score(False), booster.predict(X, raw_score=True)[:, None])


def test_a_plan_refuses_sums_it_cannot_make():
    """LazyPlan's start holds one value per output; a float32 sum (sum32) takes float32 numbers only."""
    from lightgbm_cegb._engine import LazyPlan

    booster, X, costs = higgs_like(n=200)
    forest = to_forest(booster)
    zeros = np.zeros(X.shape[1])
    common = (forest.flat, forest.num_trees, zeros, zeros, np.full(X.shape[1], -1), np.zeros(0), [0], [],
              np.arange(X.shape[1]), 0.0, False, forest.leaf_offset)
    with pytest.raises(ValueError, match="start should hold 1 values, got 2"):
        LazyPlan(*common, forest.leaf_value, [0.0, 0.0])
    with pytest.raises(ValueError, match="sum32: the leaf values and start should be float32 numbers"):
        LazyPlan(*common, forest.leaf_value + 0.1, [0.0], True)
    with pytest.raises(ValueError, match="sum32"):
        LazyPlan(*common, forest.leaf_value.astype(np.float32), [0.1], True)
    assert LazyPlan(*common, forest.leaf_value.astype(np.float32), [0.5], True).sum32
