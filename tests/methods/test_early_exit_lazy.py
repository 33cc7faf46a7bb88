"""Early Exit served lazily (``LazyPredictor`` drives its ``ExitRun``): each row fetches exactly the features its paths
read in the trees before its exit (LightGBM's own pred_leaf and the model text, row by row), a group whole, once;
its prediction and cost are ``predict`` and ``predict_result``'s on the whole row, to the bit."""

from __future__ import annotations

import functools
import pickle
import threading
import warnings

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from references import by_queries, row_paths

from lightgbm_cegb import CEGBError, FeatureCosts, LazyFetchError, LazyPredictor
from lightgbm_cegb.methods.early_exit import EarlyExit
from lightgbm_cegb.serving.results import DONE, FAILED

GROUPS = {"lab": [2, 3, 4]}
LAZY, GROUP_LAZY = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 8.0, 13.0]), 6.0
KINDS = ("cascade", "proximity", "binary", "multiclass")


def case(seed: int, kind: str, grouped: bool):
    """A model of ``kind`` on random rows with missing values, its EarlyExit and the query sizes (rankers)."""
    rng = np.random.default_rng(seed)
    n = 480
    X = rng.normal(size=(n, 7))
    X[rng.random(X.shape) < 0.05] = np.nan
    score = np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 3]) * np.nan_to_num(X[:, 5]) + rng.normal(0, 0.5, n)
    costs = FeatureCosts(lazy=LAZY, split=0.1, tree=0.25, groups=GROUPS if grouped else None,
                         group_lazy={"lab": GROUP_LAZY} if grouped else None)
    sizes = np.diff(np.sort(rng.choice(np.arange(1, n), 39, replace=False)), prepend=0, append=n)
    params = {"verbose": -1, "num_leaves": int(rng.integers(3, 12)), "min_data_in_leaf": 5, "seed": seed}
    every = int(rng.integers(1, 6))
    if kind == "cascade":  # a CEGB regressor ranked by its scores, as the sweep's cegb_cascade
        booster = lgb.train({**params, "objective": "regression", **costs.to_params(tradeoff=0.01)},
                            lgb.Dataset(X, np.digitize(score, [0.0, 1.0])), 25)
        return X, EarlyExit(booster, top_k=int(rng.integers(1, 6)), every=every, task="ranking",
                            feature_costs=costs), sizes
    if kind == "proximity":
        booster = lgb.train({**params, "objective": "lambdarank"},
                            lgb.Dataset(X, np.digitize(score, [0.0, 1.0]), group=sizes), 25)
        return X, EarlyExit(booster, threshold=float(rng.choice([0.0, 0.5, 2.0])), every=every,
                            feature_costs=costs), sizes
    classes = 2 if kind == "binary" else 3
    booster = lgb.train({**params, "objective": kind, **({"num_class": 3} if classes == 3 else {})},
                        lgb.Dataset(X, np.digitize(score, [0.0] if classes == 2 else [-0.5, 0.5])), 25)
    return X, EarlyExit(booster, threshold=float(rng.choice([0.6, 0.75, 1.0])), every=every, feature_costs=costs), None


def from_rows(X, key, ids):
    """fetch from the rows X by column index (picklable with functools.partial)."""
    return X[np.ix_(ids, GROUPS[key])] if key in GROUPS else X[ids, key]


def recording(X, calls):
    """fetch from the rows X (by column index), recording each (key, row) it is asked for."""
    def fetch(key, ids):
        calls.extend((key, int(i)) for i in ids)
        return from_rows(X, key, ids)
    return fetch


@settings(max_examples=16, deadline=None, derandomize=True)
@given(st.integers(0, 10_000), st.sampled_from(KINDS), st.booleans(), st.sampled_from([0.0, 0.3]))
def test_a_row_fetches_what_its_paths_read_before_its_exit(seed, kind, grouped, given_share):
    X, model, sizes = case(seed, kind, grouped)
    group = {} if sizes is None else {"group": sizes}
    given_ = np.random.default_rng(seed).random(X.shape) < given_share  # values the caller has already
    calls = []
    lazy = LazyPredictor(model, recording(X, calls), feature_keys="index")
    result = lazy.acquire(np.where(given_, X, np.nan), known=given_, **group)
    whole = model.predict_result(X, **group)
    assert (result.status == DONE).all()
    np.testing.assert_array_equal(result.prediction, model.predict(X, **group))
    np.testing.assert_array_equal(result.evaluation, whole.cost.evaluation)
    if not given_.any():
        np.testing.assert_array_equal(result.acquisition, whole.cost.acquisition)
    assert len(calls) == len(set(calls))  # each (key, row) asked for once
    paths = row_paths(model.booster, X)  # LightGBM's pred_leaf on the whole rows
    tpi = model.forest.trees_per_iteration
    member = {f: name for name, members in GROUPS.items() for f in members} if grouped else {}
    for i in range(len(X)):
        read = {f for t in range(whole.iterations[i] * tpi) for f in paths[i][t]}
        bought_read = {f for f in read if not given_[i, f]}  # values given cost nothing, as for a routed model
        needed = {member.get(f, f) for f in bought_read}
        assert {key for key, row in calls if row == i} == needed, i
        bought = set(np.flatnonzero(result.fetched[i]))
        assert bought == {f for key in needed for f in GROUPS.get(key, [key])} - set(np.flatnonzero(given_[i])), i
        paid = LAZY[sorted(bought_read)].sum() + GROUP_LAZY * len({member[f] for f in bought_read if f in member})
        assert result.acquisition[i] == pytest.approx(paid, rel=1e-12, abs=1e-12), i
    every_value = lazy.acquire(X, known=np.ones(X.shape, dtype=bool), **group)  # all given: nothing fetched or paid
    assert not every_value.fetched.any() and not every_value.acquisition.any()
    np.testing.assert_array_equal(every_value.prediction, result.prediction)
    np.testing.assert_array_equal(every_value.evaluation, result.evaluation)


def within(seconds, function, *args, **kwargs):
    """function(*args, **kwargs) on a thread, failed as "timed out" after ``seconds`` (a loaded machine is slow: a
    generous limit) instead of hanging the suite."""
    box = {}

    def run():
        try:
            box["value"] = function(*args, **kwargs)
        except BaseException as exc:  # handed to the test thread
            box["error"] = exc
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"timed out after {seconds} s: {function.__name__}")
    if "error" in box:
        raise box["error"]
    return box["value"]


@pytest.mark.parametrize("failing_call", [3, 4, 5, 9, 10, 15])
def test_a_fetch_failed_within_a_block_leaves_the_other_rows_as_they_were(failing_call):
    """errors="partial": the rows of a failed fetch call (the k-th) are FAILED, a classifier's other rows are as
    predict says, nothing is fetched twice. A call failing after a block's first round once sent later requests to
    the wrong rows (the rows still in had shrunk under the block's routing): acquire hung or raised an IndexError.
    Both: each row has paid for the values fetched for it (each was read by the path that asked), in the block it
    failed in too."""
    X, model, _ = case(3, "binary", False)
    calls, count = [], [0]

    def fetch(key, ids):
        count[0] += 1
        if count[0] == failing_call:
            raise OSError("store down")
        return recording(X, calls)(key, ids)
    lazy = LazyPredictor(model, fetch, feature_keys="index", errors="partial")
    result = within(300, lazy.acquire, np.full(X.shape, np.nan))
    failed = result.status == FAILED
    assert failed.any() and not failed.all()
    assert (result.status[~failed] == DONE).all()
    np.testing.assert_array_equal(result.prediction[~failed], model.predict(X)[~failed])
    assert np.isnan(result.prediction[failed]).all()
    assert len(calls) == len(set(calls))
    # a failed row keeps what it paid in the block it failed in (once lost when the others finished the block)
    np.testing.assert_allclose(result.acquisition, result.fetched @ model.costs_.lazy, rtol=1e-12)
    count[0] = 0
    with pytest.raises(LazyFetchError, match="store down") as raised:
        within(300, LazyPredictor(model, fetch, feature_keys="index").acquire, np.full(X.shape, np.nan))
    kept = raised.value.result
    np.testing.assert_allclose(kept.acquisition, kept.fetched @ model.costs_.lazy, rtol=1e-12)


def test_empty_batches_and_bad_query_sizes():
    X, classifier, _ = case(6, "multiclass", False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "mean of empty slice"
        empty = LazyPredictor(classifier, recording(X, []), feature_keys="index").acquire(np.zeros((0, 7)))
    booster = LazyPredictor(classifier.booster, recording(X, []), feature_keys="index", feature_costs=classifier.costs_)
    assert empty.prediction.shape == (0, 3) == booster.acquire(np.zeros((0, 7))).prediction.shape
    X, ranker, _ = case(6, "cascade", False)
    for group in (["2", "3"], [None], [[1, 2]]):
        with pytest.raises(CEGBError, match="group should hold query sizes"):
            ranker.predict(X, group)


def test_a_ranker_is_served_by_query():
    X, model, sizes = case(5, "cascade", True)
    lazy = LazyPredictor(model, recording(X, []), feature_keys="index")
    np.testing.assert_array_equal(lazy.predict(np.full(X.shape, np.nan)), model.predict(X, [len(X)]))  # one query
    again = pickle.loads(pickle.dumps(LazyPredictor(model, functools.partial(from_rows, X), feature_keys="index")))
    # the blocks' routings, kept by the model, are built again where it is unpickled
    assert "_routings" in model.__dict__ and "_routings" not in again.model.__dict__
    np.testing.assert_array_equal(again.predict(np.full(X.shape, np.nan), group=sizes), model.predict(X, sizes))
    with pytest.raises(CEGBError, match="summing to the 480 rows of X"):
        lazy.acquire(np.full(X.shape, np.nan), group=[1, 2])
    with pytest.raises(CEGBError, match=r"method: EarlyExit predicts with 'predict' with \['group'\]"):
        lazy.acquire(np.full(X.shape, np.nan), method="predict_proba", group=sizes)
    with pytest.raises(CEGBError, match="feature_costs: EarlyExit buys by the costs"):
        LazyPredictor(model, recording(X, []), feature_costs=model.costs_)
    assert LazyPredictor(model, recording(X, [])).keys == list(range(7))  # trained without names: by position
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(7)])
    booster = lgb.train({"objective": "regression", "verbose": -1, "num_leaves": 7}, lgb.Dataset(frame, X[:, 0]), 10)
    named = EarlyExit(booster, top_k=2, every=3, task="ranking", feature_costs=model.costs_)
    by_name = LazyPredictor(named, lambda key, ids: frame.loc[ids, key].to_numpy() if key != "lab" else
                            frame.iloc[ids, GROUPS["lab"]].to_numpy())
    assert by_name.keys == list(frame.columns)
    np.testing.assert_array_equal(by_name.predict(frame.iloc[:, ::-1] * np.nan, group=sizes),
                                  named.predict(X, sizes))  # a frame's columns read by name


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_the_blocks_are_routed_on_the_predictor_s_threads(n_jobs, monkeypatch):
    """n_jobs of the LazyPredictor serving an EarlyExit reaches every block's routing (not the block routing's own
    default), with the same predictions."""
    from lightgbm_cegb.serving import runs

    X, model, sizes = case(3, "cascade", False)
    threads, batch = [], runs.LazyBatch
    monkeypatch.setattr(runs, "LazyBatch", lambda plan, X, known, num_threads: threads.append(num_threads) or
                        batch(plan, X, known, num_threads))
    lazy = LazyPredictor(model, recording(X, []), feature_keys="index", n_jobs=n_jobs)
    np.testing.assert_array_equal(lazy.predict(np.full(X.shape, np.nan), group=sizes), model.predict(X, sizes))
    assert len(threads) > 1 and set(threads) == {lazy._threads}  # n_jobs, at most the CPUs this process may use


def test_dask_documents_are_served_by_partition(client):
    """A Dask array of whole queries, served where its partitions are: the results of the documents in memory."""
    X, model, sizes = case(11, "cascade", True)
    lazy = LazyPredictor(model, recording(X, []), feature_keys="index")
    nothing, _, dgroup = by_queries(np.full(X.shape, np.nan), np.zeros(len(X)), sizes, 3)
    acquired, whole = lazy.acquire(nothing, group=dgroup), lazy.acquire(np.full(X.shape, np.nan), group=sizes)
    for name in ("prediction", "fetched", "acquisition", "evaluation"):
        np.testing.assert_array_equal(getattr(acquired, name), getattr(whole, name))
    X, classifier, _ = case(11, "multiclass", True)  # a classifier takes no group, on Dask neither (it was refused)
    lazy = LazyPredictor(classifier, recording(X, []), feature_keys="index")
    nothing = by_queries(np.full(X.shape, np.nan), np.zeros(len(X)), sizes, 3)[0]
    np.testing.assert_array_equal(lazy.predict(nothing), classifier.predict(X))


@pytest.mark.parametrize("library", ["xgboost", "catboost"])
def test_other_libraries_exits_are_served_as_they_predict(library):
    """Another library's exits read its own predict on the values bought: the same predictions and costs."""
    X = case(2, "binary", False)[0]
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 3]) > 0).astype(int)
    if library == "xgboost":
        import xgboost as xgb
        model = xgb.XGBClassifier(n_estimators=20, max_depth=3).fit(X, y)
    else:
        import catboost
        model = catboost.CatBoostClassifier(iterations=20, depth=3, verbose=0, thread_count=1).fit(X, y)
    exits = EarlyExit(model, threshold=0.8, every=4, feature_costs=FeatureCosts(lazy=np.arange(1.0, 8.0)))
    result = LazyPredictor(exits, recording(X, []), feature_keys="index").acquire(np.full(X.shape, np.nan))
    whole = exits.predict_result(X)
    assert (whole.iterations < exits.iterations).any()
    np.testing.assert_array_equal(result.prediction, whole.prediction)
    np.testing.assert_array_equal(result.acquisition, whole.cost.acquisition)
    np.testing.assert_array_equal(result.evaluation, whole.cost.evaluation)


def test_linear_trees_are_refused():
    X, _, sizes = case(4, "cascade", False)
    booster = lgb.train({"objective": "regression", "linear_tree": True, "verbose": -1}, lgb.Dataset(X, X[:, 0] > 0), 5)
    exits = EarlyExit(booster, top_k=3, every=2, task="ranking", feature_costs=FeatureCosts(lazy=np.ones(7)))
    with pytest.raises(CEGBError, match="model: an EarlyExit of a model with linear trees .* cannot be served lazily"):
        LazyPredictor(exits, recording(X, []))
    with pytest.raises(CEGBError, match="num_iteration: EarlyExit decides itself which trees"):
        LazyPredictor(EarlyExit(booster, top_k=3, task="ranking", feature_costs=FeatureCosts(lazy=np.ones(7))),
                      recording(X, []), num_iteration=2)


@pytest.mark.parametrize(("grouped", "given_share", "failing_call"),
                         [(False, 0.0, 5), (False, 0.25, 9), (True, 0.0, 9), (True, 0.0, 12), (True, 0.25, 12)])
def test_a_failed_run_s_costs_match_the_paths_read_so_far(grouped, given_share, failing_call, monkeypatch):
    """LazyFetchError's result, the run stopped within a block, against an independent count from LightGBM's own
    paths (pred_leaf and the model text): the blocks passed whole; in the block under way each tree walked from its
    root while the value at the node is there (given, or fetched in an earlier round; a value fetched in the failing
    round is paid, not routed). A row pays the lazy costs of what it read and did not get given (a group's once),
    and the split and tree costs of what it passed. Before, values given up front were paid in the blocks passed
    only, and a group member fetched in an earlier block and read in this one not at all."""
    from lightgbm_cegb.methods import early_exit

    rng = np.random.default_rng(7)
    X = rng.normal(size=(120, 7))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 3]) * np.nan_to_num(X[:, 5]) + rng.normal(0, 0.5, 120) > 0)
    booster = lgb.train({"objective": "binary", "verbose": -1, "num_leaves": 6, "min_data_in_leaf": 3, "seed": 2},
                        lgb.Dataset(X, y.astype(int)), 15)
    split, tree = np.array([0.5, 0.25, 0.125, 1.0, 2.0, 0.75, 0.375]), 0.0625
    groups, group_lazy = ({"g": [2, 4], "h": [5, 6]}, {"g": 30.0, "h": 70.0}) if grouped else ({}, {})
    member = {f: name for name, members in groups.items() for f in members}
    model = EarlyExit(booster, threshold=0.8, every=3, feature_costs=FeatureCosts(
        lazy=LAZY, split=split, tree=tree, groups=groups or None, group_lazy=group_lazy or None))
    given_ = np.random.default_rng(4).random(X.shape) < given_share
    rounds, fetched_in, calls = [0, None], {}, [0]
    requests = early_exit.ExitRun.requests

    def counted(run):  # the round of each request, and the block it is in
        out = requests(run)
        rounds[0] += 1
        rounds[1] = (run.exits.start, run.exits.stops[0] if run.exits.stops else None)
        return out
    monkeypatch.setattr(early_exit.ExitRun, "requests", counted)

    def fetch(key, ids):
        calls[0] += 1
        if calls[0] == failing_call:
            raise OSError("store down")
        fetched_in.update(((key, int(i)), rounds[0]) for i in ids)
        return X[np.ix_(ids, groups[key])] if key in groups else X[ids, key]
    with pytest.raises(LazyFetchError) as raised:
        LazyPredictor(model, fetch, feature_keys="index").acquire(np.where(given_, X, np.nan), known=given_)
    result, (start, stop), last = raised.value.result, rounds[1], rounds[0]
    paths, whole = row_paths(booster, X), model.predict_result(X)
    for i in range(len(X)):
        read, passed = set(), 0.0
        for t in range(min(whole.iterations[i], start)):
            read |= set(paths[i][t])
            passed += split[paths[i][t]].sum() + tree
        if whole.iterations[i] > start:
            for t in range(start, stop):
                passed += tree
                for f in paths[i][t]:
                    at = fetched_in.get((member.get(f, f), i))
                    if given_[i, f] or (at is not None and at < last):
                        read.add(f)
                        passed += split[f]
                        continue
                    if at == last:  # fetched in the failing round: paid, not routed yet
                        read.add(f)
                    break
        bought = {f for f in read if not given_[i, f]}
        paid = LAZY[sorted(bought)].sum() + sum(group_lazy[g] for g in {member[f] for f in bought if f in member})
        assert result.acquisition[i] == pytest.approx(paid, rel=1e-12, abs=1e-12), i
        assert result.evaluation[i] == pytest.approx(passed, rel=1e-12), i
