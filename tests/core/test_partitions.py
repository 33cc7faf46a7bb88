"""Rows in a Dask collection (issue 59, item 3): ``prediction_cost`` and ``LazyPredictor.predict`` /
``predict_proba`` / ``acquire`` work partition by partition, on a ``distributed.LocalCluster``'s worker processes, and
give the results of the same rows in memory: the per-row costs and the usage to the bit, the curve to rounding, the
predictions and every row's lazy result to the bit, with fetch called with the rows' ids in all of X."""

from __future__ import annotations

import dask.array as da
import dask.dataframe as dd
import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest

from lightgbm_cegb import FeatureCosts, LazyPredictor, StagedAcquisitionClassifier, prediction_cost
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.partitions import drawn_queries, is_dask, partitions, row_starts
from lightgbm_cegb.core.report import CostReport
from lightgbm_cegb.serving import DONE, FAILED, LazyFetchError, LazyResult

ROW_ARRAYS = ("status", "X", "known", "fetched", "acquisition", "evaluation", "leaves")

COSTS = FeatureCosts(lazy=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], split=[0.1] * 6, groups={"g": [4, 5]}, group_lazy=[2.0])


@pytest.fixture(scope="module")
def case():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 6))
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 2]) + 0.5 * np.nan_to_num(X[:, 4]) > 0).astype(int)
    booster = lgb.train({"objective": "binary", "verbose": -1, "num_leaves": 8, "seed": 0}, lgb.Dataset(X, y), 20)
    staged = StagedAcquisitionClassifier(feature_costs=COSTS, stages=4, n_estimators=30, tradeoff=0.2,
                                         random_state=0).fit(X, y)
    return X, booster, staged


def collections(X):
    """X as a Dask array of uneven row chunks and as a Dask DataFrame of 3 partitions."""
    frame = pd.DataFrame(X, columns=[f"Column_{j}" for j in range(X.shape[1])])
    return [da.from_array(X, chunks=((700, 1, 899, 400), X.shape[1])), dd.from_pandas(frame, npartitions=3)]


def test_prediction_cost_of_a_dask_collection_is_that_of_its_rows(case, client):
    X, booster, staged = case
    for model, asked in ((booster, {"per_iteration": True}), (staged, {})):
        expected = prediction_cost(model, X, COSTS, **asked) if model is booster else prediction_cost(model, X)
        for rows in collections(X):
            got = prediction_cost(model, rows, COSTS, **asked) if model is booster else prediction_cost(model, rows)
            np.testing.assert_array_equal(got.acquisition, expected.acquisition)
            np.testing.assert_array_equal(got.evaluation, expected.evaluation)
            np.testing.assert_array_equal(got.usage, expected.usage)
            assert got.group_usage == expected.group_usage and got.coupled == expected.coupled
            if expected.curve is not None:
                np.testing.assert_allclose(got.curve, expected.curve, rtol=1e-12)


def test_lazy_predictions_of_a_dask_collection_are_those_of_its_rows(case, client):
    X, booster, staged = case
    ids = 10_000 + 3 * np.arange(len(X))  # fetch reads a store by these ids: a partition's own positions would miss
    store = pd.DataFrame(X, index=ids)

    def fetch(key, row_ids):
        if key == "g":
            return store.loc[row_ids, [4, 5]].to_numpy()
        return store.loc[row_ids, key].to_numpy()

    unknown = np.full_like(X, np.nan)
    for model, method in ((booster, "predict"), (staged, "predict_proba")):
        predictor = LazyPredictor(model, fetch, feature_costs=COSTS if model is booster else None, feature_keys="index")
        expected = getattr(predictor, method)(unknown, ids=ids)
        np.testing.assert_array_equal(expected, booster.predict(X) if model is booster else staged.predict_proba(X))
        for rows in collections(unknown):
            np.testing.assert_array_equal(getattr(predictor, method)(rows, ids=ids), expected)
    with pytest.raises(CEGBError, match=r"ids should have one id per row of X \(2000 rows\), got 2001"):
        LazyPredictor(booster, fetch, feature_costs=COSTS, feature_keys="index").predict(
            da.from_array(unknown, chunks=(500, 6)), ids=np.concatenate([ids, [1]]))


def test_dask_rows_are_refused_when_not_whole(case):
    X = case[0]
    assert is_dask(da.from_array(X)) and not is_dask(X) and not is_dask(pd.DataFrame(X))
    with pytest.raises(CEGBError, match=r"chunked along its rows only .* got 2 column chunks"):
        partitions(da.from_array(X, chunks=(500, 3)))
    with pytest.raises(CEGBError, match="should be 2-dimensional, got 1"):
        partitions(da.from_array(X[:, 0]))
    uneven = da.from_array(X, chunks=((700, 1, 899, 400), 6))
    assert len(partitions(uneven)) == 4 and row_starts(uneven) == [0, 700, 701, 1600]
    frame = dd.from_pandas(pd.DataFrame(X), npartitions=3)
    assert row_starts(frame) == [0, *np.cumsum([len(part) for part in frame.partitions][:-1]).tolist()]
    with pytest.raises(CEGBError, match=r"chunk sizes are not known .*: call X\.compute_chunk_sizes\(\) first"):
        row_starts(frame.to_dask_array())
    with pytest.raises(CEGBError, match="known: a Dask X"):
        LazyPredictor(case[1], lambda key, ids: X[ids, key], feature_keys="index").predict(
            da.from_array(X), known=np.ones(X.shape, dtype=bool))


def test_stacked_reports_are_one_report_of_all_rows(case):
    X, booster, _ = case
    whole = prediction_cost(booster, X, COSTS, per_iteration=True)
    cuts = [0, 1, 1, 999, 2000]  # an empty part too
    parts = [prediction_cost(booster, X[a:b], COSTS, per_iteration=True) for a, b in zip(cuts, cuts[1:])]
    stacked = CostReport.stacked(parts)
    np.testing.assert_array_equal(stacked.usage, whole.usage)
    np.testing.assert_array_equal(stacked.per_instance, whole.per_instance)
    assert stacked.group_usage == whole.group_usage
    np.testing.assert_allclose(stacked.curve, whole.curve, rtol=1e-12)


def store_fetch(X: np.ndarray, ids: np.ndarray, failing=None):
    """fetch from a store of X's rows by ``ids`` (a group "g" of columns 4 and 5); the key ``failing`` always raises
    (a row that needs it fails in any batch)."""
    store = pd.DataFrame(X, index=ids)

    def fetch(key, row_ids):
        if key == failing:
            raise ConnectionError("store down")
        if key == "g":
            return store.loc[row_ids, [4, 5]].to_numpy()
        return store.loc[row_ids, key].to_numpy()

    return fetch


def assert_same_rows(got: LazyResult, expected: LazyResult) -> None:
    np.testing.assert_array_equal(np.asarray(got.prediction, dtype=float), np.asarray(expected.prediction, dtype=float))
    for name in ROW_ARRAYS:
        np.testing.assert_array_equal(getattr(got, name), getattr(expected, name), err_msg=name)


def test_lazy_results_of_a_dask_collection_are_those_of_its_rows(case, client):
    X, booster, staged = case
    ids = 10_000 + 3 * np.arange(len(X))
    given = np.full_like(X, np.nan)
    given[:, [0, 2]] = X[:, [0, 2]]  # the values a request gives (not NaN): the others are fetched
    for model, method in ((booster, "predict"), (staged, "predict_proba")):
        for failing, errors in ((None, "raise"), ("g", "partial")):
            predictor = LazyPredictor(model, store_fetch(X, ids, failing), feature_costs=COSTS if model is booster
                                      else None, feature_keys="index", errors=errors)
            expected = predictor.acquire(given, ids=ids, method=method)
            for rows in collections(given):
                got = predictor.acquire(rows, ids=ids, method=method)
                assert_same_rows(got, expected)
                np.testing.assert_array_equal(np.asarray(getattr(predictor, method)(rows, ids=ids), dtype=float),
                                              np.asarray(expected.prediction, dtype=float))
                assert got.fetch_calls >= expected.fetch_calls and got.rounds <= expected.rounds
                assert [f.feature for f in got.failures] == [f.feature for f in got.failures if f.feature == failing]
                for failure in got.failures:  # rows counted in all of X: the ids fetch was called with
                    np.testing.assert_array_equal(ids[failure.rows], failure.ids)
                    assert (got.status[failure.rows] == FAILED).all()
                if failing is not None:  # rows that need the group fail (the booster's all: no prediction at all)
                    assert (got.status == FAILED).any()
                    assert (got.status == DONE).any() == (model is staged) == (got.prediction is not None)
    predictor = LazyPredictor(booster, store_fetch(X, ids, 2), feature_costs=COSTS, feature_keys="index")
    with pytest.raises(LazyFetchError, match="store down"):
        predictor.acquire(collections(np.full_like(X, np.nan))[0], ids=ids)


def test_stacked_results_are_one_result_of_all_rows(case):
    """Batches of X's rows served apart and stacked: the result of all of them at once (a batch with every row failed
    too: its predictions NaN, or None in an object array of classes)."""
    X, booster, staged = case
    ids = np.arange(len(X))
    unknown = np.full_like(X, np.nan)
    for model, method, failing in ((booster, "predict", 0), (staged, "predict", "g"), (staged, "predict_proba", "g")):
        predictor = LazyPredictor(model, store_fetch(X, ids, failing), feature_costs=COSTS if model is booster
                                  else None, feature_keys="index", errors="partial")
        whole = predictor.acquire(unknown, ids=ids, method=method)
        first = int(np.argmax(whole.status == FAILED))
        cuts = [0, first, first + 1, first + 1, 999, 2000]  # a batch of one failed row: no prediction
        parts = [predictor.acquire(unknown[a:b], ids=ids[a:b], method=method) for a, b in zip(cuts, cuts[1:])]
        assert parts[1].prediction is None
        stacked = LazyResult.stacked(parts)
        assert_same_rows(stacked, whole)
        assert stacked.fetch_calls == sum(part.fetch_calls for part in parts)
        assert stacked.rounds == max(part.rounds for part in parts)
        assert stacked.failures
        for failure in stacked.failures:  # rows counted in all of X
            np.testing.assert_array_equal(ids[failure.rows], failure.ids)


def test_queries_are_drawn_whole_from_arrays_and_frames_alike():
    """drawn_queries: whole queries, each with the same probability from the seed and its partition's position (the
    same documents from a Dask array and from a DataFrame of the same partitions), every query where the documents
    are fewer than asked; query sizes that do not fit a partition refused by name."""
    rng = np.random.default_rng(3)
    sizes = rng.integers(1, 12, size=300)
    n = int(sizes.sum())
    X, y = rng.normal(size=(n, 3)), rng.integers(0, 4, size=n)
    cut = (100, 120, 80)
    starts = np.r_[0, np.cumsum(cut)]
    documents = tuple(int(sizes[a:b].sum()) for a, b in zip(starts[:-1], starts[1:]))
    group = da.from_array(sizes, chunks=(cut,))
    array = (da.from_array(X, chunks=(documents, 3)), da.from_array(y, chunks=(documents,)))
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    partitioned = dd.from_pandas(frame, npartitions=1).repartition(divisions=[0, *np.cumsum(documents)[:-1], n - 1])
    labels = dd.from_pandas(pd.Series(y), npartitions=1).repartition(divisions=partitioned.divisions)
    drawn_X, drawn_y, drawn_sizes = drawn_queries(*array, group, n // 3, seed=5)
    frame_X, frame_y, frame_sizes = drawn_queries(partitioned, labels, group, n // 3, seed=5)
    np.testing.assert_array_equal(drawn_X, frame_X.to_numpy())
    np.testing.assert_array_equal(drawn_y, frame_y)
    np.testing.assert_array_equal(drawn_sizes, frame_sizes)
    assert 0.2 * n < len(drawn_y) < 0.5 * n and drawn_sizes.sum() == len(drawn_y)
    # whole queries: each drawn query's documents are one query's of X, in order
    first_rows = {tuple(X[s]): size for s, size in zip(np.r_[0, np.cumsum(sizes)[:-1]], sizes)}
    at = 0
    for size in drawn_sizes:
        assert first_rows[tuple(drawn_X[at])] == size
        at += size
    every = drawn_queries(*array, group, n + 1)
    np.testing.assert_array_equal(every[0], X)
    np.testing.assert_array_equal(every[2], sizes)
    with pytest.raises(CEGBError, match=r"group \(partition 2\) should hold the sizes .* summing to the"):
        drawn_queries(*array, da.from_array(np.r_[sizes[:-1], sizes[-1] + 1], chunks=(cut,)), n)


def test_a_draw_of_no_query_takes_the_first_query_of_the_first_partition_that_holds_one():
    """A review (2026-12-07): a draw of few documents from few, large queries could take none (each query kept with
    probability rows / documents), and the staged ranker's Dask fit then failed after training every stage, learning
    its margins on no query. Such a draw now takes the first query of the first partition that holds one (an empty
    partition first here); a draw that takes some is as before."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(80, 2)), rng.integers(0, 3, size=80)
    group = da.from_array(np.array([40, 40]), chunks=((0, 2),))
    array = (da.from_array(X, chunks=((0, 80), 2)), da.from_array(y, chunks=((0, 80),)))
    empty = 0
    for seed in range(40):
        drawn_X, drawn_y, sizes = drawn_queries(*array, group, 1, seed=seed)
        assert len(sizes) >= 1 and sizes.sum() == len(drawn_y) == len(drawn_X)
        if len(sizes) == 1 and np.array_equal(drawn_X, X[:40]) and np.array_equal(drawn_y, y[:40]):
            empty += 1
    assert empty >= 30  # a query kept with probability 1/80: most seeds draw none
