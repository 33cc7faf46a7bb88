"""The cheap-subset baseline: plain LightGBM on a greedily grown cost-aware subset of features or groups, and the
budget workflow it anchors (fit_within_budget never loses to it)."""

from __future__ import annotations

import warnings

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest

from lightgbm_cegb import FeatureCosts, prediction_cost
from lightgbm_cegb.core.errors import BudgetWarning, CEGBError
from lightgbm_cegb.selection import fit_within_budget, sweep
from lightgbm_cegb.selection.baseline import hidden

PARAMS = {"num_leaves": 8, "num_threads": 1}


@pytest.fixture(scope="module")
def strong_cheap():
    """Columns 0-2 cost 1 and carry most of the signal; 3 costs 1 and carries none; 4-7 cost 8 each and add a
    little; 8-11 are a survey group of cost 30 that adds a little too."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(4000, 12))
    signal = X[:, 0] + X[:, 1] + 0.8 * X[:, 2] + 0.25 * X[:, 4:8].sum(axis=1) + 0.2 * X[:, 8:12].sum(axis=1)
    y = (signal + rng.normal(0, 0.6, len(X)) > 0).astype(int)
    costs = FeatureCosts(lazy=[1.0] * 4 + [8.0] * 4 + [0.0] * 4, groups={"survey": [8, 9, 10, 11]},
                         group_lazy=[30.0])
    return (X[:2000], y[:2000]), (X[2000:3000], y[2000:3000]), (X[3000:], y[3000:]), costs


def _plain_on(columns, train, valid):
    """Plain LightGBM trained on the given columns only (an independent reference of a subset model)."""
    (X, y), (Xv, yv) = train, valid
    data = lgb.Dataset(X[:, columns], y)
    booster = lgb.train({"objective": "binary", "verbose": -1, "seed": 0, "deterministic": True, **PARAMS}, data,
                        5000, valid_sets=[lgb.Dataset(Xv[:, columns], yv, reference=data)],
                        callbacks=[lgb.early_stopping(20, verbose=False)])
    return float(np.mean((booster.predict(Xv[:, columns]) > 0.5) == yv))


def test_the_baseline_finds_the_cheap_columns(strong_cheap):
    train, valid, _, costs = strong_cheap
    frame = sweep("lightgbm", train, valid, costs, task="binary", params=PARAMS)
    subsets = frame[frame["method"] == "cheap_subset"]
    first = [tuple(f) for f in subsets["features"].drop_duplicates()]
    assert set(first[2]) == {"Column_0", "Column_1", "Column_2"}  # the three strong cheap columns first
    # the first run is a path: each step adds one unit (the next run, by gain, and pruning start elsewhere)
    assert all(set(a) < set(b) and len(b) == len(a) + 1 for a, b in zip(first[:3], first[1:3]))
    for _, row in subsets.iterrows():  # a point's model reads its units' columns only, costed exactly
        booster, k = row["model"].model, row["trees"]
        read = set(np.flatnonzero(booster.feature_importance("split", iteration=k)).tolist())
        allowed = {8, 9, 10, 11} if "survey" in row["features"] else set()
        allowed |= {int(name.split("_")[1]) for name in row["features"] if name.startswith("Column_")}
        assert read <= allowed
        assert row["cost"] == prediction_cost(booster, valid[0], costs, num_iteration=k).mean
    # the 3-column model is the one plain LightGBM trains on those columns alone
    three = subsets[subsets["features"].map(lambda f: len(f) == 3)].iloc[-1]
    assert three["quality"] == _plain_on([0, 1, 2], train, valid)


def test_the_baseline_takes_a_group_as_one_unit():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(2000, 6))
    y = (X[:, 3] + X[:, 4] + X[:, 5] + 0.3 * X[:, 0] + rng.normal(0, 0.5, 2000) > 0).astype(int)
    costs = FeatureCosts(lazy=[1.0, 1.0, 1.0, 0.0, 0.0, 0.0], groups={"panel": [3, 4, 5]}, group_lazy=[2.0])
    frame = sweep("lightgbm", (X[:1000], y[:1000]), (X[1000:], y[1000:]), costs, task="binary", params=PARAMS)
    subsets = frame[frame["method"] == "cheap_subset"]
    assert subsets["features"].iloc[0] == ("panel",)  # worth 3 columns for a cost of 2
    with pytest.raises(CEGBError, match=r"cheap_subset: unknown parameter\(s\) \['depth'\]"):
        sweep("cheap_subset", (X[:1000], y[:1000]), (X[1000:], y[1000:]), costs, task="binary",
              grid={"cheap_subset": [{"depth": 2}]})


def test_hidden_columns_cannot_be_split_on():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    frame = pd.DataFrame(X, columns=list("abcd"))
    for data in (X, frame):
        out = hidden(data, [1, 3])
        values = np.asarray(out, dtype=float)
        assert np.isnan(values[:, [0, 2]]).all() and (values[:, [1, 3]] == X[:, [1, 3]]).all()
    kinds = frame.assign(d=pd.Categorical(np.where(X[:, 3] > 0, "hi", "lo")))
    out = hidden(kinds, [0])
    assert out["d"].dtype == kinds["d"].dtype and out["d"].isna().all() and kinds["d"].notna().all()
    import scipy.sparse as sp
    out = hidden(sp.csr_matrix(X), [2])
    assert (out.toarray()[:, [0, 1, 3]] == 0).all() and (out.toarray()[:, 2] == X[:, 2]).all()
    assert np.asarray(X).shape == (300, 4) and not np.isnan(X).any()  # a copy: the input is untouched


def test_fit_within_budget_never_loses_to_the_cheap_subset(strong_cheap):
    train, valid, test, costs = strong_cheap
    budget = 3.5
    reference = _plain_on([0, 1, 2], train, valid)  # cost 3: the obvious baseline a user would try by hand
    chosen = fit_within_budget(train, valid, costs, budget, task="binary", test=test, params=PARAMS,
                               methods=["lightgbm", "cegb"])
    assert chosen.within_budget and chosen.valid_cost <= budget
    assert chosen.valid_quality >= reference
    assert prediction_cost(chosen.model, valid[0], costs).mean >= 0  # the model itself is returned
    frame = chosen.frontier
    assert set(frame["method"]) == {"lightgbm", "cegb", "cheap_subset"} and (frame["stage"] == "refine").any()
    assert chosen.test_cost == chosen.candidate.cost(test[0]).mean


def test_fit_within_budget_below_every_point_warns():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 3))
    y = (X[:, 0] > 0).astype(int)
    costs = FeatureCosts(lazy=[1.0, 1.0, 1.0], tree=1.0)  # every model pays 1 per tree and row
    with pytest.warns(BudgetWarning, match=r"budget=0.5 is below every method's cheapest point"):
        chosen = fit_within_budget((X[:300], y[:300]), (X[300:], y[300:]), costs, 0.5, task="binary",
                                   params=PARAMS, methods=["lightgbm"], refine=1)
    assert not chosen.within_budget and chosen.valid_cost == chosen.frontier["cost"].min()
    with warnings.catch_warnings():
        warnings.simplefilter("error", BudgetWarning)
        # one tree reading one feature costs 2 per row
        assert fit_within_budget((X[:300], y[:300]), (X[300:], y[300:]), costs, 2.5, task="binary",
                                 params=PARAMS, methods=["lightgbm"], refine=1).within_budget


def _whole(frame, features) -> float:
    """The validation quality of a subset's whole model (its most trees) in a sweep's frame."""
    points = frame[frame["features"] == tuple(features)]
    return points.loc[points["trees"].idxmax(), "quality"]


def test_the_search_finds_a_group_that_an_importance_order_passes_over():
    """A costly group carries most of the signal (an interaction of two members), twelve cheap columns a little
    each. Per unit of cost the cheap columns lead the plain model's importance order, and after five of them the
    group no longer fits the budget: the search before this one (the units tried in that order, four at a time)
    answered 0.523 with two cheap columns. The search's second run, by gain, takes the group first."""
    rng = np.random.default_rng(0)
    n = 4000
    X = rng.normal(size=(n, 16))
    signal = 2.0 * np.sign(X[:, 12] * X[:, 13]) + 0.3 * X[:, :12].sum(axis=1)
    y = (signal + rng.normal(0, 0.5, n) > 0).astype(int)
    costs = FeatureCosts(lazy=[1.0] * 12 + [0.0] * 4, groups={"survey": [12, 13, 14, 15]}, group_lazy=[100.0])
    train, valid = (X[:2000], y[:2000]), (X[2000:3000], y[2000:3000])
    from lightgbm_cegb.selection import best_subset
    chosen = best_subset(train, valid, costs, 104.0, task="binary", params=PARAMS, progress=False)
    assert "survey" in chosen.params["features"] and chosen.valid_cost <= 104.0
    assert chosen.valid_quality > _plain_on(list(range(12)), train, valid) + 0.1  # above every cheap column at once
    columns = sorted({12, 13, 14, 15} | {int(f.split("_")[1]) for f in chosen.params["features"] if f != "survey"})
    assert _whole(chosen.frontier, chosen.params["features"]) == _plain_on(columns, train, valid)  # plain LightGBM


def test_on_a_subsample_the_best_measured_subsets_are_refitted_on_every_row(strong_cheap, monkeypatch):
    from lightgbm_cegb.selection import baseline
    monkeypatch.setattr(baseline, "SEARCH_ROWS", 600)
    monkeypatch.setattr(baseline, "SEARCH_VALID", 400)
    train, valid, _, costs = strong_cheap
    frame = sweep("cheap_subset", train, valid, costs, task="binary", params=PARAMS, budget=[3.5, 12.0],
                  baseline=False, progress=False)
    subsets = {tuple(f) for f in frame["features"]}
    assert 2 <= len(subsets) <= 2 * baseline.SEARCH_REFITS  # the best few of each budget
    for features in subsets:
        columns = sorted({8, 9, 10, 11} if "survey" in features else set()) + \
            sorted(int(f.split("_")[1]) for f in features if f.startswith("Column_"))
        assert _whole(frame, features) == _plain_on(sorted(columns), train, valid)


def test_with_many_units_the_search_takes_those_a_plain_model_splits_on(monkeypatch):
    """Above MAX_UNITS priced units the search measures only the units a plain model of every feature splits on
    (the most gain, and the most per unit of cost): one model per such unit at the first step, not per unit; the
    cheap informative columns and the costly one that carries the most are among them, the noise is not."""
    from lightgbm_cegb.core import subsets
    from lightgbm_cegb.selection import baseline

    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 40))
    y = (X[:, 0] + 0.7 * X[:, 1] + 2.0 * X[:, 30] + rng.normal(0, 0.5, len(X)) > 0).astype(int)
    costs = FeatureCosts(lazy=[1.0] * 30 + [20.0] * 10)
    monkeypatch.setattr(subsets, "MAX_UNITS", 4)
    measured = []
    score = baseline.SubsetSearch.__init__

    def counting(self, score_fn, empty):
        score(self, lambda columns: (measured.append(columns), score_fn(columns))[1], empty)
    monkeypatch.setattr(baseline.SubsetSearch, "__init__", counting)
    frame = sweep("cheap_subset", (X[:2000], y[:2000]), (X[2000:], y[2000:]), costs, task="binary", params=PARAMS,
                  baseline=False)
    read = {j for columns in measured for j in columns}
    assert {0, 1, 30} <= read and len(read) <= 4, sorted(read)
    assert len(measured) < 20  # 4 units at the first step, not 40
    assert {"Column_0", "Column_1", "Column_30"} <= set(frame["features"].map(set).iloc[-1])


def test_a_subsampled_search_without_a_budget_refits_a_frontier(monkeypatch, strong_cheap):
    """On more rows than the search measures on, a sweep without a budget refits each run's answer and the steps of
    its path at each doubling of the price (a frontier, not one point); with a budget, the answer within it only."""
    from lightgbm_cegb.selection import baseline

    train, valid, _, costs = strong_cheap
    monkeypatch.setattr(baseline, "SEARCH_ROWS", 500)
    frame = sweep("cheap_subset", train, valid, costs, task="binary", params=PARAMS, baseline=False)
    prices = sorted({sum(costs.lazy[int(name.split("_")[1])] if name.startswith("Column_") else 30.0
                         for name in features) for features in frame["features"]})
    assert len(prices) >= 3 and prices[0] <= 2, prices  # the cheap steps are points too
    # a few fits per run (its doublings) and the best measured, not one per step: a run's path has up to 20 steps
    runs = 5  # by gain per cost, by gain, below the price of each answer, the exchanges (SubsetSearch.runs)
    doublings = int(np.ceil(np.log2(prices[-1] / prices[0]))) + 1
    assert frame["features"].nunique() <= runs * doublings + baseline.SEARCH_REFITS
    budgeted = sweep("cheap_subset", train, valid, costs, task="binary", params=PARAMS, baseline=False, budget=3.0,
                     refine=0, screen=False)
    assert budgeted["features"].nunique() < len(prices)


@pytest.mark.parametrize("seed", range(6))
def test_a_subset_measured_on_its_columns_is_the_full_width_model(strong_cheap, seed):
    """The search measures a subset by LightGBM on its columns alone (``train_lightgbm(columns=...)``); a point's model
    has every column, the others missing. Both are the same model: their predictions agree to the bit (random subsets,
    binary and 3 classes, a DataFrame too)."""
    from lightgbm_cegb.selection.points import lightgbm_params, sliced, train_lightgbm
    from lightgbm_cegb.selection.registry import Context, Rows
    (X, y), (Xv, yv), _, costs = strong_cheap
    rng = np.random.default_rng(seed)
    if seed % 2:
        y, yv = np.digitize(X[:, 0] + X[:, 4], [-0.5, 0.5]), np.digitize(Xv[:, 0] + Xv[:, 4], [-0.5, 0.5])
    if seed >= 4:
        names = [f"f{j}" for j in range(12)]
        X, Xv = pd.DataFrame(X, columns=names), pd.DataFrame(Xv, columns=names)
    context = Context(task="multiclass" if seed % 2 else "binary", train=Rows(X, y), valid=Rows(Xv, yv), costs=costs,
                      params=PARAMS, num_boost_round=300, early_stopping_rounds=10)
    columns = sorted(rng.choice(12, size=int(rng.integers(1, 12)), replace=False).tolist())
    alone = train_lightgbm(context, lightgbm_params(context), columns=columns)
    full = train_lightgbm(context, lightgbm_params(context), X=hidden(X, columns))
    assert alone.current_iteration() == full.current_iteration()
    np.testing.assert_array_equal(alone.predict(sliced(Xv, columns)), full.predict(Xv))
