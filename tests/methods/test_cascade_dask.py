"""StagedAcquisitionRanker fitted from Dask collections (issue 59, item 3: the cascade ranker on a cluster): the NDCG
every worker computes to stop the stages against LightGBM's own metric and early stopping on random cases, fits on a
``distributed.LocalCluster``'s two worker processes (arrays and DataFrames, separate and continued stages, both orders,
eval_set) against the same documents fitted in memory, its results, costs and lazy serving of Dask documents against
the in-memory ones, the held-out queries, and the refusals."""

from __future__ import annotations

import dask.array as da
import dask.dataframe as dd
import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from references import by_queries

from lightgbm_cegb import CEGBError, FeatureCosts, LazyPredictor
from lightgbm_cegb.core.errors import RoundsWarning
from lightgbm_cegb.core.ranking_metrics import ndcg_at_k
from lightgbm_cegb.methods import dask_stages
from lightgbm_cegb.methods.cascade import StagedAcquisitionRanker, _grades
from lightgbm_cegb.methods.dask_stages import DaskQueries, HeldOutStopping, NDCGLoss

COSTS = FeatureCosts(lazy=[1.0, 2.0, 4.0, 8.0, 1.0, 3.0, 6.0, 12.0], groups={"g": [6, 7]}, group_lazy=[2.0])
NAMES = [f"f{j}" for j in range(8)]


def make_queries(queries: int, seed: int, sizes=(3, 30)):
    """Documents of ``queries`` queries: grades 0-3 from a few features, some values missing."""
    rng = np.random.default_rng(seed)
    group = rng.integers(*sizes, size=queries)
    n = int(group.sum())
    X = rng.normal(size=(n, 8))
    X[rng.random(X.shape) < 0.05] = np.nan
    relevance = np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) * (np.nan_to_num(X[:, 2]) > 0) \
        + 0.8 * np.nan_to_num(X[:, 6])
    return X, np.digitize(relevance + rng.normal(size=n) * 0.5, [0.0, 1.0, 2.0]), group


@pytest.fixture(scope="module")
def documents():
    return make_queries(400, 0), make_queries(200, 1)


def ndcg(model, X, y, group) -> float:
    return ndcg_at_k(y, model.predict(X, group=group), group, 10)


# --------------------------------------------------------------------------------- the rule on every worker

@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(1, 12), ties=st.booleans())
def test_ndcg_loss_is_the_reference_ndcg(seed, k, ties):
    """NDCGLoss against core.ranking_metrics.ndcg_at_k (written query by query) on random grades and scores, ties
    among the scores (ranked in the given order) and queries without a relevant document (which score 1)."""
    rng = np.random.default_rng(seed)
    group = rng.integers(1, 25, size=int(rng.integers(1, 30)))
    n = int(group.sum())
    grades = rng.integers(0, 5, size=n).astype(np.float64) * (rng.random(n) < 0.6)
    scores = rng.integers(0, 4, size=n).astype(np.float64) if ties else rng.normal(size=n)
    assert -NDCGLoss(group, k)(scores, grades) == pytest.approx(ndcg_at_k(grades, scores, group, k), abs=1e-14)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(1, 10), init=st.booleans(), patience=st.integers(1, 10),
       rounds=st.integers(5, 60), hidden=st.booleans())
def test_held_out_stopping_of_ndcg_is_lightgbms_early_stopping(seed, k, init, patience, rounds, hidden):
    """A lambdarank model trained in memory with HeldOutStopping(NDCGLoss) and with lgb.early_stopping on the same
    queries as a validation set (starting scores as a Dataset holds them; with only one column read, as a cheap stage
    whose scores tie): the same last round trained, the same best iteration, the same best NDCG@k as LightGBM's
    metric."""
    X, y, group = make_queries(40, seed)
    X_valid, y_valid, valid_group = make_queries(25, seed + 1)
    if hidden:
        X, X_valid = (np.where(np.arange(8) == 0, rows, np.nan) for rows in (X, X_valid))
    rng = np.random.default_rng(seed)
    starts = (rng.normal(size=len(y)), rng.normal(size=len(y_valid))) if init else (None, None)
    params = {"objective": "lambdarank", "eval_at": [k], "min_data_in_leaf": 5, "verbose": -1, "num_threads": 1,
              "deterministic": True, "seed": seed}
    trained = {}

    def recorder(name):
        def record(env):
            trained[name] = env.iteration
        return record

    train = lgb.Dataset(X, y, group=group, init_score=starts[0])
    valid = lgb.Dataset(X_valid, y_valid, group=valid_group, init_score=starts[1], reference=train)
    theirs = lgb.train({**params, "metric": "ndcg"}, train, rounds, valid_sets=[valid],
                       callbacks=[recorder("theirs"), lgb.early_stopping(patience, first_metric_only=True,
                                                                         verbose=False)])
    loss = NDCGLoss(valid_group, k)
    ours = lgb.train({**params, "metric": "None"}, lgb.Dataset(X, y, group=group, init_score=starts[0]), rounds,
                     callbacks=[recorder("ours"), HeldOutStopping(X_valid, y_valid.astype(np.float64), None,
                                                                  starts[1], patience, loss)])
    assert trained["ours"] == trained["theirs"]
    assert ours.best_iteration == theirs.best_iteration
    score = ours.predict(X_valid, num_iteration=ours.best_iteration, raw_score=True)
    best = -loss(score + (0 if starts[1] is None else starts[1]), y_valid.astype(np.float64))
    assert best == pytest.approx(theirs.best_score["valid_0"][f"ndcg@{k}"], abs=1e-12)


# -------------------------------------------------------------------------------------------- on the cluster

def test_fit_from_dask_arrays_ranks_as_the_fit_in_memory(documents, client):
    """Dask arrays of whole queries in partitions of uneven sizes, eval_set in memory: every stage stops before its cap
    and is cut at its best round (its last tree raises the held-out NDCG), test NDCG@10 within 0.02 of the in-memory
    fit's, and the model's results at one setting and at many, costs and lazy results of Dask documents equal its own
    of the documents in memory."""
    (X, y, group), (X_test, y_test, test_group) = documents
    valid = (X_test[:1000], y_test[:1000]), test_group[np.cumsum(test_group) <= 1000]
    X_valid, y_valid = valid[0][0][:valid[1].sum()], valid[0][1][:valid[1].sum()]
    rest = slice(len(y_valid), None)
    X_rest, y_rest, rest_group = X_test[rest], y_test[rest], test_group[len(valid[1]):]
    options = {"feature_costs": COSTS, "stages": 4, "tradeoff": 0.5, "top_k": 3, "random_state": 0}
    dX, dy, dgroup = by_queries(X, y, group, 3)
    fitted = StagedAcquisitionRanker(**options).fit(dX, dy, group=dgroup, eval_set=[(X_valid, y_valid)],
                                                    eval_group=[valid[1]])
    memory = StagedAcquisitionRanker(**options).fit(X, y, group=group, eval_set=[(X_valid, y_valid)],
                                                    eval_group=[valid[1]])
    assert abs(ndcg(fitted, X_rest, y_rest, rest_group) - ndcg(memory, X_rest, y_rest, rest_group)) < 0.02
    assert len(fitted.stages_) == len(fitted.stage_units_) - 1 >= 2
    loss = NDCGLoss(valid[1], 10)
    for k, stage in enumerate(fitted.stages_, start=1):
        assert 1 <= stage.num_trees() < fitted.n_estimators
        masked = np.full_like(X_valid, np.nan)
        columns = fitted._columns(int(fitted.stage_units_[k]))
        masked[:, columns] = X_valid[:, columns]
        losses = [loss(stage.predict(masked, num_iteration=i), y_valid) for i in range(1, stage.num_trees() + 1)]
        assert np.argmin(losses) == len(losses) - 1
    tX, ty, tgroup = by_queries(X_rest, y_rest, rest_group, 4)
    got, expected = fitted.predict_result(tX, group=tgroup), fitted.predict_result(X_rest, group=rest_group)
    for name in ("score", "stage", "stage_score", "known"):
        np.testing.assert_array_equal(getattr(got, name), getattr(expected, name))
    np.testing.assert_array_equal(got.cost.per_instance, expected.cost.per_instance)
    np.testing.assert_array_equal(fitted.predict(tX, group=tgroup), fitted.predict(X_rest, group=rest_group))
    np.testing.assert_array_equal(fitted.prediction_cost(tX, group=tgroup).per_instance,
                                  expected.cost.per_instance)
    settings_ = [{"tradeoff": 0.0}, {"tradeoff": 0.9, "top_k": 1}, {"max_cost": 7.0}]
    for a, b in zip(fitted.predict_results(tX, settings_, group=tgroup),
                    fitted.predict_results(X_rest, settings_, group=rest_group)):
        np.testing.assert_array_equal(a.score, b.score)
        np.testing.assert_array_equal(a.cost.per_instance, b.cost.per_instance)
    lazy = LazyPredictor(fitted, lambda key, ids: X_rest[ids][:, [6, 7]] if key == "g" else X_rest[ids, key],
                         feature_keys="index")
    nothing = da.from_array(np.full_like(X_rest, np.nan), chunks=tX.chunks)
    np.testing.assert_array_equal(lazy.predict(nothing, group=tgroup), fitted.predict(X_rest, group=rest_group))
    acquired = lazy.acquire(nothing, group=tgroup)  # the fetches happen on the workers: what they bought comes back
    np.testing.assert_array_equal(acquired.fetched, expected.known)
    np.testing.assert_array_equal(acquired.acquisition + acquired.evaluation, expected.cost.per_instance)
    with pytest.raises(CEGBError, match="group: with X a Dask collection, group should be a Dask array"):
        lazy.predict(nothing)


def test_fit_from_a_dask_dataframe_with_names_held_out_queries_and_the_search_order(documents, client, monkeypatch):
    """A Dask DataFrame with named columns and costs by name, no eval_set: the stages stop on queries held out
    partition by partition (the held-out queries are not trained on: a fifth of them), names as an in-memory fit
    sets them, order="search" measured on queries in memory; NDCG near the in-memory fit's."""
    (X, y, group), (X_test, y_test, test_group) = documents
    dX, dy, dgroup = by_queries(X, y, group, 3)
    frame = dd.from_dask_array(dX, columns=NAMES)
    costs = {name: cost for name, cost in zip(NAMES, [1.0, 2.0, 4.0, 8.0, 1.0, 3.0, 6.0, 12.0])}
    options = {"feature_costs": costs, "stages": 3, "order": "search", "random_state": 3}
    seen = []

    def recorded(estimator, params, train, *args):
        seen.append((train.n, args[3]))
        return original(estimator, params, train, *args)

    original = dask_stages.trained
    monkeypatch.setattr(dask_stages, "trained", recorded)
    fitted = StagedAcquisitionRanker(**options).fit(frame, dd.from_dask_array(dy), group=dgroup)
    memory = StagedAcquisitionRanker(**options).fit(pd.DataFrame(X, columns=NAMES), y, group=group)
    assert list(fitted.feature_names_in_) == NAMES
    assert fitted.stages_[-1].feature_name() == memory.stages_[-1].feature_name() == NAMES
    trained_rows, stop = seen[0]
    assert all(n == trained_rows for n, _ in seen)
    assert 0.7 * len(y) < trained_rows < 0.9 * len(y) and trained_rows + len(stop[1]) == len(y)
    test = pd.DataFrame(X_test, columns=NAMES)
    assert abs(ndcg(fitted, test, y_test, test_group) - ndcg(memory, test, y_test, test_group)) < 0.03


def test_continued_stages_from_dask(documents, client):
    """Continued stages train each stage from the summed scores of the stages below, kept on the workers."""
    (X, y, group), (X_test, y_test, test_group) = documents
    options = {"feature_costs": COSTS, "stages": 4, "stage_models": "continued", "random_state": 2}
    fitted = StagedAcquisitionRanker(**options).fit(*by_queries(X, y, group, 2)[:2], group=by_queries(X, y, group,
                                                                                                      2)[2])
    memory = StagedAcquisitionRanker(**options).fit(X, y, group=group)
    assert fitted.stage_models_ == "continued"
    assert abs(ndcg(fitted, X_test, y_test, test_group) - ndcg(memory, X_test, y_test, test_group)) < 0.03
    tX, _, tgroup = by_queries(X_test, y_test, test_group, 3)
    np.testing.assert_array_equal(fitted.predict(tX, group=tgroup), fitted.predict(X_test, group=test_group))


def test_held_out_queries_are_drawn_whole_per_partition_and_capped(documents, client, monkeypatch):
    (X, y, group), _ = documents
    rows = DaskQueries.of(StagedAcquisitionRanker(), *by_queries(X, y, group, 3), _grades)
    assert rows.n == len(y) and [len(part) for part in rows.sizes] == [133, 134, 133]
    train, (X_valid, y_valid, valid_group) = rows.held_out(0.2, 7)
    again = rows.held_out(0.2, 7)[1]
    np.testing.assert_array_equal(X_valid, again[0])
    assert valid_group.sum() == len(y_valid) == len(X_valid) and 40 < len(valid_group) < 120
    assert train.n == len(y) - len(y_valid) == len(train.X.compute()) == int(train.group.compute().sum())
    assert train.X.chunks[0] == tuple(int(part.sum()) for part in train.sizes)
    # every query whole, in one of the two parts: the documents of both, each with its grade, are X's
    stacked = np.column_stack([np.concatenate([train.X.compute(), X_valid]),
                               np.concatenate([train.labels.compute(), y_valid])])
    assert sorted(map(tuple, np.nan_to_num(stacked))) == sorted(map(tuple, np.nan_to_num(np.column_stack([X, y]))))
    starts = np.r_[0, np.cumsum(group)[:-1]]
    first = {tuple(np.nan_to_num(X[s])): size for s, size in zip(starts, group)}
    at = 0
    for size in valid_group:  # each held-out query's documents lie together, as a query of X
        assert first[tuple(np.nan_to_num(X_valid[at]))] == size
        at += size
    sizes = sorted(np.concatenate([np.concatenate(train.sizes), valid_group]).tolist())
    assert sizes == sorted(group.tolist())
    monkeypatch.setattr(dask_stages, "HELD_OUT_ROWS", 300)
    assert 100 < len(rows.held_out(0.2, 7)[1][1]) < 600
    sample = rows.sample(2000, 1)
    assert 1000 < len(sample[1]) < 3000 and sample[2].sum() == len(sample[1])


def test_a_stage_at_its_cap_warns_and_eval_set_of_dask_is_computed(documents, client, monkeypatch):
    """eval_set of Dask collections: every stage stopped on its documents and grades, computed (and its queries'
    NDCG); a stage still improving at its cap warns as in memory."""
    (X, y, group), (X_test, y_test, test_group) = documents
    vX, vy, vgroup = by_queries(X_test, y_test, test_group, 2)
    stops = []

    def recorded(estimator, params, train, weights, columns, init, stop, what, names, loss, metric):
        stops.append((stop, loss))
        return original(estimator, params, train, weights, columns, init, stop, what, names, loss, metric)

    original = dask_stages.trained
    monkeypatch.setattr(dask_stages, "trained", recorded)
    with pytest.warns(RoundsWarning, match=r"the stage of .* columns reached n_estimators=1 while its held-out "
                                           r"NDCG@10 was still improving"):  # one round: its best, at the cap
        StagedAcquisitionRanker(feature_costs=COSTS, stages=2, n_estimators=1, random_state=0).fit(
            *by_queries(X, y, group, 2)[:2], group=by_queries(X, y, group, 2)[2], eval_set=[(vX, vy)],
            eval_group=[vgroup])
    assert len(stops) >= 2
    for (X_stop, grades), loss in stops:
        np.testing.assert_array_equal(X_stop, X_test)
        np.testing.assert_array_equal(grades, y_test)
        np.testing.assert_array_equal(loss.sizes, test_group)


def test_empty_partitions_of_a_filter(documents, client):
    """A Dask DataFrame filtered by query so that a partition holds no document (its chunk of query sizes empty): fit
    trains on the others (no worker is given an empty partition), and predict and prediction_cost answer the documents
    that are there, as in memory; a size given for an empty partition is refused."""
    (X, y, group), (X_test, y_test, test_group) = documents
    query = np.repeat(np.arange(len(group)), group)
    dX, dy, _ = by_queries(X, y, group, 4)  # 100 queries a partition
    frame = dd.from_dask_array(dX, columns=NAMES).assign(grade=dd.from_dask_array(dy),
                                                          query=dd.from_dask_array(da.from_array(query,
                                                                                                 chunks=dX.chunks[0])))
    kept = frame[(frame["query"] < 100) | (frame["query"] >= 250)]
    sizes = np.concatenate([group[:100], group[250:]])
    dgroup = da.from_array(sizes, chunks=((100, 0, 50, 100),))
    rows = (query < 100) | (query >= 250)
    options = {"feature_costs": COSTS, "stages": 3, "random_state": 4}
    valid = {"eval_set": [(X_test, y_test)], "eval_group": [test_group]}
    fitted = StagedAcquisitionRanker(**options).fit(kept[NAMES], kept["grade"], group=dgroup, **valid)
    memory = StagedAcquisitionRanker(**options).fit(X[rows], y[rows], group=sizes, **valid)
    assert abs(ndcg(fitted, X_test, y_test, test_group) - ndcg(memory, X_test, y_test, test_group)) < 0.03
    got = fitted.predict_result(kept[NAMES], group=dgroup)
    expected = fitted.predict_result(pd.DataFrame(X[rows], columns=NAMES), group=sizes)
    np.testing.assert_array_equal(got.score, expected.score)
    np.testing.assert_array_equal(got.cost.per_instance, expected.cost.per_instance)
    with pytest.raises(CEGBError, match="group: an empty partition of X should have no query sizes, got 3"):
        fitted.predict(kept[NAMES], group=da.from_array(np.r_[sizes[:100], [1, 1, 1], sizes[100:]],
                                                        chunks=((100, 3, 50, 100),)))


def test_refusals_name_what_is_wrong(documents, client):
    (X, y, group), _ = documents
    dX, dy, dgroup = by_queries(X, y, group, 3)
    model = StagedAcquisitionRanker(stages=2)
    cases = [
        ((dX, y, dgroup), "y: with X a Dask collection, y should be a Dask array or Series of its relevance grades"),
        ((dX, dy, group), "group: with X a Dask collection, group should be a Dask array of the query sizes"),
        ((dX, dy, da.from_array(group, chunks=200)), r"group should hold the query sizes of each of X's 3 partitions"),
        ((dX, dy, da.from_array(np.r_[group[:-1], group[-1] + 1], chunks=dgroup.chunks)),
         r"group \(partition 2\) should hold the sizes .* summing to the"),
        ((dX, dy + 0.5, dgroup), "y should hold relevance grades"),
        ((da.where(da.arange(len(y))[:, None] == 17, np.inf, dX), dy, dgroup), "finite numbers or NaN"),
        ((dX, dy, None), "group: a ranker needs the sizes"),
    ]
    for (X_, y_, group_), message in cases:
        with pytest.raises(CEGBError, match=message):
            model.fit(X_, y_, group=group_)
    fitted = StagedAcquisitionRanker(stages=2, random_state=0).fit(X, y, group=group)
    with pytest.raises(CEGBError, match="group: with X a Dask collection"):
        fitted.predict(dX)
    with pytest.raises(CEGBError, match="group: with X a Dask collection"):
        fitted.prediction_cost(dX, group=group)
