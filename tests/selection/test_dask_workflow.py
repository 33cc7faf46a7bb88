"""fit_within_budget of rows in Dask collections (issue 59, item 3): the sweep reads a sample drawn into memory (of
whole queries for ranking), a staged acquisition (classifier, regressor or ranker), plain LightGBM or cheap subset
chosen is fitted again on every row on a LocalCluster's workers and its point chosen again on the validation rows
within the budget; its figures are its own on those rows, and never below the sample's point."""

from __future__ import annotations

import warnings

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from lightgbm_cegb import CEGBError, CEGBWarning, FeatureCosts
from lightgbm_cegb.core.partitions import drawn, drawn_queries
from lightgbm_cegb.selection import fit_within_budget, workflows
from lightgbm_cegb.selection.metrics import METRICS, validation_quality

COSTS = FeatureCosts(lazy=[1.0, 1.0, 2.0, 4.0, 8.0, 8.0])
BUDGET = 6.0
OPTIONS = {"baseline": False, "progress": False, "refine": 1}


@pytest.fixture(scope="module")
def case():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(16_000, 6))
    signal = X[:, 0] + 0.8 * X[:, 2] + 1.5 * X[:, 4] * (X[:, 1] > 0) + 0.6 * X[:, 5]
    y = np.where(signal + 0.5 * rng.normal(size=len(X)) > 0, "yes", "no")
    return X[:12_000], y[:12_000], X[12_000:14_000], y[12_000:14_000], X[14_000:], y[14_000:]


@pytest.fixture
def small_sample(monkeypatch):
    monkeypatch.setattr(workflows, "DASK_SAMPLE_ROWS", 1_000)  # a twelfth: the refit on every row gains 0.02


def test_the_staged_choice_is_fitted_again_on_every_row(case, client, small_sample):
    X, y, X_valid, y_valid, X_test, y_test = case
    dX, dy = da.from_array(X, chunks=(3000, 6)), da.from_array(y, chunks=3000)
    chosen = fit_within_budget((dX, dy), (X_valid, y_valid), COSTS, BUDGET, task="binary",
                               methods=["staged_acquisition"], test=(X_test, y_test), **OPTIONS)
    sample = drawn(dX, dy, 1_000)
    assert chosen.frontier.attrs["sampled"] == {"rows": len(sample[1]), "of": 12_000, "refitted": [BUDGET]}
    in_memory = fit_within_budget(sample, (X_valid, y_valid), COSTS, BUDGET, task="binary",
                                  methods=["staged_acquisition"], **OPTIONS)
    model = chosen.model
    assert chosen.method == "staged_acquisition" and chosen.within_budget
    np.testing.assert_array_equal(model.prior_, np.bincount((y == "yes").astype(int)) / len(y))  # every row
    assert chosen.valid_cost <= BUDGET and chosen.valid_quality >= in_memory.valid_quality
    assert chosen.valid_quality == float((chosen.predict(X_valid) == y_valid).mean())
    assert chosen.valid_cost == chosen.prediction_cost(X_valid).mean
    assert chosen.test_quality == float((chosen.predict(X_test) == y_test).mean())
    assert chosen.test_cost == chosen.prediction_cost(X_test).mean
    assert chosen.params["tradeoff"] == model.tradeoff and chosen.params.get("max_cost") == model.max_cost


@pytest.mark.parametrize("method", ["staged_acquisition", "cheap_subset"])
def test_a_dask_dataframe_and_dask_validation_rows(case, client, small_sample, method):
    X, y, X_valid, y_valid, _, _ = case
    names = [f"c{j}" for j in range(6)]
    frame = dd.from_pandas(pd.DataFrame(X, columns=names), npartitions=3)
    labels = dd.from_pandas(pd.Series(y), npartitions=3)
    costs = dict(zip(names, COSTS.lazy))
    named = (dd.from_pandas(pd.DataFrame(X_valid, columns=names), npartitions=2),
             dd.from_pandas(pd.Series(y_valid), npartitions=2))
    chosen = fit_within_budget((frame, labels), named, costs, BUDGET, task="binary", methods=[method], **OPTIONS)
    assert chosen.method == method and chosen.frontier.attrs["sampled"]["refitted"] == [BUDGET]
    assert (list(chosen.model.feature_names_in_) if method == "staged_acquisition" else
            chosen.model.feature_name()) == names
    assert chosen.valid_quality == float((chosen.predict(pd.DataFrame(X_valid, columns=names)) == y_valid).mean())


def test_another_method_stays_the_samples_with_a_warning(case, client, small_sample):
    X, y, X_valid, y_valid, _, _ = case
    with pytest.warns(CEGBWarning, match=r"the chosen budget_prune point \(budget 40\) was fitted on the [\d,]+ "
                                         r"training rows drawn from the 12,000"):
        chosen = fit_within_budget((da.from_array(X, chunks=4000), da.from_array(y, chunks=4000)),
                                   (X_valid, y_valid), COSTS, 40.0, task="binary", methods=["budget_prune"], **OPTIONS)
    assert chosen.method == "budget_prune" and "refitted" not in chosen.frontier.attrs["sampled"]


def own_figures(chosen, X, y) -> tuple[float, float]:
    """A choice's quality (accuracy; regression: rmse) and mean cost on rows, from its own predict and
    prediction_cost."""
    prediction = chosen.predict(X)
    quality = validation_quality(METRICS["rmse"], y, prediction) if chosen.task == "regression" else \
        float((prediction == y).mean())
    return quality, chosen.prediction_cost(X).mean


@pytest.mark.parametrize("method", ["lightgbm", "cheap_subset"])
def test_a_lightgbm_choice_is_fitted_again_on_every_row(case, client, small_sample, method):
    """Plain LightGBM and the cheap subset's model trained on the cluster's every row (lightgbm.dask, early stopped
    on the validation rows), its prefix chosen within the budget: at least the sample's validation quality, its
    figures its own, the subset's model reading the subset's columns alone."""
    X, y, X_valid, y_valid, X_test, y_test = case
    dX, dy = da.from_array(X, chunks=(3000, 6)), da.from_array(y, chunks=3000)
    budget = 40.0 if method == "lightgbm" else BUDGET
    with warnings.catch_warnings():
        warnings.simplefilter("error", CEGBWarning)
        chosen = fit_within_budget((dX, dy), (X_valid, y_valid), COSTS, budget, task="binary", methods=[method],
                                   test=(X_test, y_test), **OPTIONS)
    in_memory = fit_within_budget(drawn(dX, dy, 1_000), (X_valid, y_valid), COSTS, budget, task="binary",
                                  methods=[method], **OPTIONS)
    assert chosen.method == method and chosen.frontier.attrs["sampled"]["refitted"] == [budget]
    assert chosen.valid_quality > in_memory.valid_quality and chosen.valid_cost <= budget
    assert (chosen.valid_quality, chosen.valid_cost) == own_figures(chosen, X_valid, y_valid)
    assert (chosen.test_quality, chosen.test_cost) == own_figures(chosen, X_test, y_test)
    booster = chosen.model
    assert chosen.params["trees"] <= booster.current_iteration()
    if method == "cheap_subset":
        assert chosen.params["features"] == in_memory.params["features"]
        read = {int(name.split("_")[1]) for name in in_memory.params["features"]}
        used = set(np.flatnonzero(booster.feature_importance("split")).tolist())
        assert used and used <= read


@pytest.mark.parametrize("method, budget", [("lightgbm", 40.0), ("staged_acquisition_regressor", 12.0)])
def test_a_regression_choice_is_fitted_again_on_every_row(client, small_sample, method, budget):
    """Plain LightGBM and the staged regressor (its stages trained on the cluster, its trade-off and cap chosen again
    on the validation rows): RMSE below the sample's choice, within the budget, its figures its own."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(14_000, 6))
    target = X[:, 0] + np.sin(2 * X[:, 2]) + X[:, 4] * X[:, 1] + 0.3 * rng.normal(size=len(X))
    dX, dy = da.from_array(X[:12_000], chunks=(4000, 6)), da.from_array(target[:12_000], chunks=4000)
    valid = (X[12_000:], target[12_000:])
    chosen = fit_within_budget((dX, dy), valid, COSTS, budget, task="regression", methods=[method], **OPTIONS)
    in_memory = fit_within_budget(drawn(dX, dy, 1_000), valid, COSTS, budget, task="regression", methods=[method],
                                  **OPTIONS)
    assert chosen.method == method and chosen.frontier.attrs["sampled"]["refitted"] == [budget]
    assert chosen.valid_quality < in_memory.valid_quality and chosen.valid_cost <= budget  # rmse
    assert (chosen.valid_quality, chosen.valid_cost) == own_figures(chosen, *valid)


@pytest.fixture(scope="module")
def queries():
    """Ranking documents of 800 queries: 600 training (as Dask arrays of 3 partitions of whole queries), 100 validation
    and 100 test queries in memory."""
    rng = np.random.default_rng(11)
    sizes = rng.integers(5, 30, size=800)
    X = rng.normal(size=(int(sizes.sum()), 6))
    relevance = X[:, 0] + 0.8 * X[:, 2] + 1.5 * X[:, 4] * (X[:, 1] > 0) + 0.5 * rng.normal(size=len(X))
    y = np.digitize(relevance, [0.0, 1.0, 2.0])
    starts = np.r_[0, np.cumsum(sizes)]
    parts = [(X[starts[a]:starts[b]], y[starts[a]:starts[b]], sizes[a:b]) for a, b in ((0, 600), (600, 700),
                                                                                         (700, 800))]
    (X_train, y_train, group), valid, test = parts
    cut = (200, 200, 200)
    documents = tuple(int(group[i * 200:(i + 1) * 200].sum()) for i in range(3))
    cluster = (da.from_array(X_train, chunks=(documents, 6)), da.from_array(y_train, chunks=(documents,)),
               da.from_array(group, chunks=(cut,)))
    return cluster, valid, test


def test_a_staged_ranker_choice_is_fitted_again_on_every_document(queries, client, small_sample):
    """The sweep reads whole queries drawn from the partitions; the staged ranker chosen is fitted on every training
    document on the cluster and its trade-off, top k and cap chosen again: at least the sample's validation NDCG@5,
    within the budget, its figures its own on the validation and the test queries."""
    cluster, valid, test = queries
    budget = 8.0
    chosen = fit_within_budget(cluster, valid, COSTS, budget, task="ranking", methods=["staged_acquisition_ranker"],
                               test=test, **OPTIONS)
    sample = drawn_queries(*cluster, 1_000)
    assert sample[2].sum() == len(sample[1]) == len(sample[0]) and 30 < len(sample[2]) < 70
    in_memory = fit_within_budget(sample, valid, COSTS, budget, task="ranking", methods=["staged_acquisition_ranker"],
                                  **OPTIONS)
    assert chosen.method == "staged_acquisition_ranker"
    assert chosen.frontier.attrs["sampled"] == {"rows": len(sample[1]), "of": int(cluster[2].sum().compute()),
                                                "refitted": [budget]}
    assert chosen.valid_quality >= in_memory.valid_quality and chosen.valid_cost <= budget
    metric = chosen.frontier.attrs["metric_object"]
    for rows, quality, cost in ((valid, chosen.valid_quality, chosen.valid_cost),
                                (test, chosen.test_quality, chosen.test_cost)):
        assert quality == validation_quality(metric, rows[1], chosen.predict(rows[0], group=rows[2]), rows[2])
        assert cost == chosen.prediction_cost(rows[0], group=rows[2]).mean
    assert len(chosen.model.stages_[0].feature_name()) == 6 and chosen.model.n_features_in_ == 6


def test_a_ranking_lightgbm_choice_stays_the_samples_with_a_warning(queries, client, small_sample):
    cluster, valid, _ = queries
    with pytest.warns(CEGBWarning, match=r"the chosen lightgbm point \(budget 40\) was fitted on the [\d,]+ training "
                                         r"rows drawn"):
        chosen = fit_within_budget(cluster, valid, COSTS, 40.0, task="ranking", methods=["lightgbm"], **OPTIONS)
    assert "refitted" not in chosen.frontier.attrs["sampled"]


@pytest.mark.parametrize("metric", ["accuracy", "logloss"])
def test_a_refit_worse_on_the_validation_rows_leaves_the_samples_point(case, client, small_sample, monkeypatch,
                                                                       metric):
    """The refit trained on shuffled labels (its validation quality worse): the sample's point is returned, as the
    in-memory sweep of the same sample chooses it, whichever way the metric is better."""
    X, y, X_valid, y_valid, _, _ = case
    encode = workflows._codes

    def shuffled(labels, classes):
        return np.random.default_rng(len(labels)).permutation(encode(labels, classes))

    monkeypatch.setattr(workflows, "_codes", shuffled)
    dX, dy = da.from_array(X, chunks=(3000, 6)), da.from_array(y, chunks=3000)
    chosen = fit_within_budget((dX, dy), (X_valid, y_valid), COSTS, BUDGET, task="binary", metric=metric,
                               methods=["staged_acquisition"], **OPTIONS)
    in_memory = fit_within_budget(drawn(dX, dy, 1_000), (X_valid, y_valid), COSTS, BUDGET, task="binary",
                                  metric=metric, methods=["staged_acquisition"], **OPTIONS)
    assert "refitted" not in chosen.frontier.attrs["sampled"]
    assert chosen.valid_quality == in_memory.valid_quality and chosen.params == in_memory.params


def test_every_row_drawn_is_not_fitted_again(case, client, monkeypatch):
    X, y, X_valid, y_valid, _, _ = case
    monkeypatch.setattr(workflows, "DASK_SAMPLE_ROWS", 20_000)
    fits = []
    monkeypatch.setattr(workflows, "_codes", lambda *args: fits.append(args))
    chosen = fit_within_budget((da.from_array(X[:2000], chunks=1000), da.from_array(y[:2000], chunks=1000)),
                               (X_valid, y_valid), COSTS, BUDGET, task="binary", methods=["staged_acquisition"],
                               **OPTIONS)
    assert chosen.frontier.attrs["sampled"] == {"rows": 2000, "of": 2000} and not fits


def test_refusals(case, client, small_sample):
    X, y, X_valid, y_valid, _, _ = case
    dX = da.from_array(X, chunks=4000)
    with pytest.raises(CEGBError, match="y should be a Dask array or Series of its labels, got ndarray"):
        fit_within_budget((dX, y), (X_valid, y_valid), COSTS, BUDGET, task="binary")
    with pytest.raises(CEGBError, match=r"train: X, a Dask array whose chunk sizes are not known .*"
                                        r"compute_chunk_sizes\(\) first"):
        fit_within_budget((dX[dX[:, 0] > 0], da.from_array(y, chunks=4000)[dX[:, 0] > 0]), (X_valid, y_valid),
                          COSTS, BUDGET, task="binary")
    rare = np.where(np.arange(len(y)) == 5, "rare", y)
    with pytest.raises(CEGBError, match=r"train: class 'rare' has 1 of the 12,000 rows and none among the [\d,]+ "
                                        r"drawn for the sweep: raise workflows.DASK_SAMPLE_ROWS \(now 1,000\)"):
        fit_within_budget((dX, da.from_array(rare, chunks=4000)), (X_valid, y_valid), COSTS, BUDGET,
                          task="multiclass")
    grades = da.from_array(np.zeros(len(X)), chunks=4000)
    with pytest.raises(CEGBError, match="group: with X a Dask collection, group should be a Dask array"):
        fit_within_budget((dX, grades, [12_000]), (X_valid, y_valid, [2000]), COSTS, BUDGET, task="ranking")
    with pytest.raises(CEGBError, match=r"train: task='ranking' takes \(X, y, group\), got no query sizes"):
        fit_within_budget((dX, grades), (X_valid, y_valid, [2000]), COSTS, BUDGET, task="ranking")
    with pytest.raises(CEGBError, match=r"train: task='binary' takes \(X, y\), got query sizes"):
        fit_within_budget((dX, da.from_array(y, chunks=4000), da.from_array(np.full(3, 4000), chunks=1)),
                          (X_valid, y_valid), COSTS, BUDGET, task="binary")


def test_budgets_share_the_fit_of_one_setting(case, client, small_sample, monkeypatch):
    X, y, X_valid, y_valid, _, _ = case
    from lightgbm_cegb.methods import dask_stages
    fits = []
    original = dask_stages.DaskRows.of

    def counted(estimator, *args):
        fits.append(estimator.order)
        return original(estimator, *args)

    monkeypatch.setattr(dask_stages.DaskRows, "of", staticmethod(counted))
    budgets = [5.0, 6.0, 7.0]
    chosen = fit_within_budget((da.from_array(X, chunks=4000), da.from_array(y, chunks=4000)), (X_valid, y_valid),
                               COSTS, budgets, task="binary", methods=["staged_acquisition"], **OPTIONS)
    orders = {c.model.order for c in chosen}
    assert sorted(fits) == sorted(orders) and all(c.method == "staged_acquisition" for c in chosen)
    refitted = [c for c, b in zip(chosen, budgets) if b in chosen[0].frontier.attrs["sampled"]["refitted"]]
    assert refitted
    # the budgets whose choice was fitted on every row (where it beat the sample's point) share the setting's one fit
    assert len({id(c.model.stages_) for c in refitted}) == len({c.model.order for c in refitted})
