"""Budget-driven model selection: sweeps measured exactly, Pareto frontiers, select(budget), CEGB trained to a
budget, the normalised trade-off scale, the cost-aware scorer, parallel and Dask sweeps, the registry and plots."""

from __future__ import annotations

import copy
import logging
import math
import re
import warnings

import lightgbm as lgb
import matplotlib
import numpy as np
import pandas as pd
import pytest
from constraints import check_declared
from hypothesis import given, settings
from hypothesis import strategies as st

from lightgbm_cegb import FeatureCosts, prediction_cost
from lightgbm_cegb.core.errors import CEGBError, CEGBWarning, NothingToTradeOff, RoundsWarning
from lightgbm_cegb.core.ranking_metrics import ndcg_at_k
from lightgbm_cegb.lgbm.cegb_tradeoff_scale import cegb_tradeoff_scale
from lightgbm_cegb.selection import (
    METHODS,
    PREFIX_TREES,
    Candidate,
    Rows,
    Selection,
    cost_scorer,
    evaluate,
    fit_within_budget,
    pareto,
    register,
    select,
    sweep,
    train_to_budget,
)
from lightgbm_cegb.selection.lightgbm_family import CASCADE_EVERY, CASCADE_TOP_K

matplotlib.use("Agg")
COSTS = FeatureCosts(lazy=[1.0, 1.0, 5.0, 5.0, 20.0, 20.0])


@pytest.fixture(scope="module")
def binary():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 6))
    y = ((X[:, 0] + X[:, 2] + 0.5 * X[:, 4] + rng.normal(0, 0.5, 1500)) > 0).astype(int)
    return (X[:900], y[:900]), (X[900:1200], y[900:1200]), (X[1200:], y[1200:])


@pytest.fixture(scope="module")
def frontier(binary):
    train, valid, _ = binary
    grid = {"cegb": [{"relative_tradeoff": r} for r in (0.0, 0.01, 0.1)],
            "budget_prune": [{"budget_fraction": f} for f in (0.3, 1.0)],
            "early_exit": [{"threshold": 0.8}], "budgetrf": [{"tradeoff": 2.0, "n_estimators": 4, "trees": (1, 4)}],
            "greedy_miser": [{"relative_tradeoff": r} for r in (0.0, 0.3)]}
    return sweep(["lightgbm", "cegb", "budget_prune", "early_exit", "budgetrf", "greedy_miser"], train, valid, COSTS,
                 task="binary",
                 grid=grid, params={"num_leaves": 8}, num_boost_round=60)


def _setting(params: dict) -> str:
    """A grid point's parameters without the prefix length: one per trained model."""
    return repr(sorted((k, v) for k, v in params.items() if k != "trees"))


def test_sweep_measures_each_point_exactly(frontier, binary):
    _, (Xv, yv), _ = binary
    settings = frontier.assign(setting=frontier["params"].map(_setting))
    models = settings.groupby("method")["setting"].nunique()
    assert dict(models.drop(["greedy_miser", "cheap_subset"])) == {
        "budget_prune": 2, "budgetrf": 1, "cegb": 3, "early_exit": 1, "lightgbm": 1}
    assert models["greedy_miser"] == 2 and models["cheap_subset"] >= 1  # the baseline joins every sweep
    assert list(frontier[frontier["method"] == "budgetrf"]["trees"]) == [1, 4]
    # every boosted model is a point with each of its prefixes (the same kinds of points for every method)
    for (method, _), points in settings[settings["method"].isin(["lightgbm", "cegb", "greedy_miser", "cheap_subset"])
                                        ].groupby(["method", "setting"]):
        model = points["model"].iloc[0].model
        best = getattr(model, "best_iteration_", None) or model.best_iteration or model.current_iteration()
        assert list(points["trees"]) == sorted({k for k in PREFIX_TREES if k < best} | {best}), method
    assert frontier.attrs["metric"] == "accuracy"
    for _, row in frontier.iterrows():
        candidate = row["model"]
        if row["method"] == "early_exit":
            result = candidate.model.predict_result(Xv)
            expected_quality = np.mean((result.prediction > 0.5) == yv)
            expected_cost = result.cost.mean
        elif row["method"] == "budgetrf":
            k = row["params"]["trees"]
            expected_quality = np.mean(candidate.model.classes_[np.argmax(
                list(candidate.model.staged_predict_proba(Xv))[k - 1], axis=1)] == yv)
            expected_cost = prediction_cost(candidate.model, Xv, COSTS, num_iteration=k).mean
        elif row["method"] == "greedy_miser":
            k = row["params"]["trees"]
            expected_quality = np.mean((candidate.model.predict_proba(Xv, num_iteration=k)[:, 1] > 0.5) == yv)
            expected_cost = prediction_cost(candidate.model.booster_, Xv, COSTS, num_iteration=k).mean
        elif row["method"] == "budget_prune":
            booster = candidate.model
            expected_quality = np.mean((booster.predict(Xv) > 0.5) == yv)
            expected_cost = prediction_cost(booster, Xv, COSTS).mean
        else:  # LightGBM boosters: the prefix of k iterations, costed on the same trees
            booster, k = candidate.model, row["params"]["trees"]
            expected_quality = np.mean((booster.predict(Xv, num_iteration=k) > 0.5) == yv)
            expected_cost = prediction_cost(booster, Xv, COSTS, num_iteration=k).mean
        assert row["quality"] == pytest.approx(expected_quality, abs=1e-12)
        assert row["cost"] == pytest.approx(expected_cost, rel=1e-12)
    cegb = frontier[frontier["method"] == "cegb"].sort_values(["relative_tradeoff", "trees"])
    cegb = cegb.groupby("relative_tradeoff").tail(1)  # each trade-off's whole model
    assert cegb["cost"].iloc[-1] < cegb["cost"].iloc[0]  # the knob buys cost
    assert list(cegb["cegb_tradeoff"])[0] == 0.0
    # BudgetPrune's budget_fraction is of the plain model's mean cost on the training rows it prunes on
    X_train = binary[0][0]
    full = prediction_cost(frontier[frontier["method"] == "lightgbm"]["model"].iloc[0].model, X_train, COSTS).mean
    for _, row in frontier[frontier["method"] == "budget_prune"].iterrows():
        assert prediction_cost(row["model"].model, X_train, COSTS).mean <= row["budget_fraction"] * full + 1e-9


def test_pareto_and_select(frontier, binary):
    front = pareto(frontier)
    assert (np.diff(front["cost"]) >= 0).all() and (np.diff(front["quality"]) > 0).all()
    for _, row in frontier.iterrows():  # every point is matched by a frontier point no dearer
        assert (front[front["cost"] <= row["cost"]]["quality"] >= row["quality"]).any()
    budget = float(frontier["cost"].median())
    chosen = select(frontier, budget, test=binary[2])
    within = frontier[frontier["cost"] <= budget]
    assert chosen.valid_cost <= budget and chosen.valid_quality == within["quality"].max()
    assert chosen.valid_cost == within[within["quality"] == within["quality"].max()]["cost"].min()
    quality, cost, _ = chosen.candidate.measure(Rows.of(binary[2], "test"), frontier.attrs["metric_object"])
    assert (chosen.test_quality, chosen.test_cost) == (quality, cost)
    with pytest.raises(CEGBError, match=r"no point is within budget=0.001: the cheapest costs"):
        select(frontier, 0.001)
    with pytest.raises(CEGBError, match=r"budget should be a finite number >= 0, got -1"):
        select(frontier, -1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8)), min_size=1, max_size=25), st.booleans())
def test_pareto_against_brute_force(points, greater):
    frame = pd.DataFrame({"method": "m", "cost": [float(c) for c, _ in points],
                          "quality": [float(q) for _, q in points]})
    frame.attrs["greater_is_better"] = greater
    sign = 1 if greater else -1
    kept = set(pareto(frame).index)
    for i, (c, q) in enumerate(points):
        dominated = any((c2 < c and sign * q2 >= sign * q) or (c2 == c and sign * q2 > sign * q)
                        or (c2 == c and q2 == q and j < i) for j, (c2, q2) in enumerate(points))
        assert (i in kept) == (not dominated)


def test_tradeoff_scale_is_the_no_split_threshold(binary):
    (X, y), _, _ = binary
    params = {"objective": "binary", "num_leaves": 8, "verbose": -1, **COSTS.to_params(tradeoff=1.0)}
    scale = cegb_tradeoff_scale(params, lgb.Dataset(X, y), rel_tol=1e-4)

    def leaves(tradeoff):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            booster = lgb.train({**params, "cegb_tradeoff": tradeoff}, lgb.Dataset(X, y), 1)
        return booster.dump_model()["tree_info"][0]["num_leaves"]
    assert leaves(scale) == 1 and leaves(scale * (1 - 2e-4)) > 1
    with pytest.raises(CEGBError, match="params set none of cegb_penalty_feature_lazy, .*cegb_penalty_group_coupled"):
        cegb_tradeoff_scale({"objective": "binary", "cegb_penalty_split": 0.0}, lgb.Dataset(X, y))


@pytest.mark.parametrize("costs", [
    FeatureCosts(split=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),  # patch 0005's per-feature split costs only
    FeatureCosts(groups=[0, 0, 0, 1, 1, 1], group_lazy=[2.0, 5.0]),  # group costs only
    FeatureCosts(groups=[0, 0, 0, 1, 1, 1], group_coupled=[50.0, 500.0]),
], ids=["feature_split", "group_lazy", "group_coupled"])
def test_tradeoff_scale_of_costs_without_a_stock_penalty(binary, costs):
    """Costs with only patch 0005's penalties have a scale too (they were refused as 'nothing to trade off')."""
    (X, y), _, _ = binary
    params = {"objective": "binary", "num_leaves": 8, "verbose": -1, **costs.to_params(tradeoff=1.0)}
    scale = cegb_tradeoff_scale(params, lgb.Dataset(X, y), rel_tol=1e-3)
    trees = {t: lgb.train({**params, "cegb_tradeoff": t}, lgb.Dataset(X, y), 1).dump_model()["tree_info"][0]
             for t in (scale, scale / 1.01)}
    assert trees[scale]["num_leaves"] == 1 and trees[scale / 1.01]["num_leaves"] > 1


@pytest.mark.parametrize("costs", [
    FeatureCosts(lazy=[0.0, 1.0, 5.0, 5.0, 20.0, 20.0]),  # one free feature
    FeatureCosts(lazy=[0.0] * 6),  # every feature free
    FeatureCosts(split=[1.0] * 6),  # split costs only: Greedy Miser's trade-off weighs none
    FeatureCosts(lazy=[0.0] * 6, tree=1.0),  # tree costs only
], ids=["one_free", "all_free", "split_only", "tree_only"])
def test_costs_a_trade_off_cannot_weigh_still_give_points(binary, costs):
    """Issue 48 (11): a feature of cost 0 (or split- or tree-only costs) made the trade-off-scale search of CEGB and
    Greedy Miser raise, and fit_within_budget/train_to_budget returned no point at all. A free feature's splits no
    longer count in the scale (CEGB's point at relative_tradeoff 1 may split on it, on nothing else); a method the
    costs give nothing to weigh is left out with a warning (CEGB: its one point, tradeoff 0)."""
    train, valid, _ = binary
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chosen = fit_within_budget(train, valid, costs, budget=8.0, task="binary", num_boost_round=40)
    frame = chosen.frontier
    assert chosen.within_budget and chosen.valid_cost <= 8.0 and chosen.valid_quality > 0.8
    # issue 46: the choice carries the sweep's costs; its own prediction_cost is what the sweep measured
    assert chosen.costs is not None and chosen.costs.fields() == frame.attrs["costs"].fields()
    assert chosen.prediction_cost(valid[0]).mean == pytest.approx(chosen.valid_cost, rel=1e-12)
    left_out = {str(w.message).split()[1] for w in caught if "left out" in str(w.message)}
    free = not costs.penalised(6).any()
    bought = costs.penalised(6, split=False).any()  # what Greedy Miser's trade-off and a purchase's price weigh
    assert left_out == (set() if bought else {"greedy_miser", "adaptive_acquisition", "staged_acquisition"})
    assert set(frame["method"]) >= {"lightgbm", "cegb", "budget_prune", "early_exit"}
    cegb = frame[frame["method"] == "cegb"]
    if free:
        assert set(cegb["cegb_tradeoff"]) == {0.0}
    else:  # the knob moves the cost
        assert cegb["cegb_tradeoff"].max() > 0 and cegb["cost"].min() < cegb["cost"].max() / 2
    chosen = train_to_budget(train, valid, costs, budget=8.0, task="binary", num_boost_round=40, refine=1)
    assert chosen.method == "cegb" and chosen.valid_cost <= 8.0


def test_the_scale_counts_only_costly_splits(binary):
    """cegb_tradeoff_scale with a free feature: past the scale the first tree may split on it, on no other."""
    (X, y), _, _ = binary
    costs = FeatureCosts(lazy=[0.0, 1.0, 5.0, 5.0, 20.0, 20.0])
    params = {"objective": "binary", "num_leaves": 8, "verbose": -1, **costs.to_params(tradeoff=1.0)}
    scale = cegb_tradeoff_scale(params, lgb.Dataset(X, y), rel_tol=1e-4)

    def features(tradeoff):
        booster = lgb.train({**params, "cegb_tradeoff": tradeoff}, lgb.Dataset(X, y), 1)
        return set(booster.trees_to_dataframe()["split_feature"].dropna())
    assert features(scale) == {"Column_0"} and features(scale * (1 - 2e-4)) - {"Column_0"}
    with pytest.raises(NothingToTradeOff, match="params set none of .* there is nothing to trade off"):
        cegb_tradeoff_scale({**params, **FeatureCosts(lazy=[0.0] * 6).to_params(tradeoff=1.0)}, lgb.Dataset(X, y))


def test_frames_that_are_not_a_sweeps_and_ranking_metrics_elsewhere_are_named(frontier, binary):
    """Issue 48 (13): a frame read back from CSV or merged (pandas drops attrs) gave KeyError 'metric_object' or
    'model'; a ranking metric on a binary task "group should hold query sizes ..., got None"."""
    _, _, test = binary
    with pytest.raises(CEGBError, match=r"evaluate: the frame lacks \[\"attrs\['metric_object'\]\"\]: pass the "
                                        r"frame sweep returned"):
        evaluate(pd.DataFrame(frontier.to_dict()), test)  # a frame rebuilt from its values has no attrs
    with pytest.raises(CEGBError, match=r"select: the frame lacks \['params', 'model'\]"):
        select(pd.DataFrame({"method": ["m"], "cost": [1.0], "quality": [0.9]}), budget=2.0)
    with pytest.raises(CEGBError, match=r"select: frame should be a sweep's pandas DataFrame, got NoneType"):
        select(None, 3.0)
    with pytest.raises(CEGBError, match=r"pareto: the frame's column 'quality' should hold numbers, got (object|str)"):
        pareto(pd.DataFrame({"cost": [1.0, 2.0], "quality": ["a", "b"]}))
    with pytest.raises(CEGBError, match=r"evaluate: prefix should be a string, got 3"):
        evaluate(frontier, test, prefix=3)
    for metric in ("ndcg@5", "p@3", "ap@5"):
        with pytest.raises(CEGBError, match=rf"metric '{metric}' ranks the documents of each query: it needs "
                                            r"task='ranking' \(with the query sizes\), got task='binary'"):
            select(frontier, 100.0, test=test, metric=metric)
    with pytest.raises(CEGBError, match=r"cost_scorer: metric 'ndcg@5' needs the queries"):
        cost_scorer(COSTS, metric="ndcg@5")


def test_fit_within_budget_without_a_point_says_so(binary):
    """Issue 48 (13): no method and no baseline ended in numpy's "attempt to get argmin of an empty sequence"."""
    train, valid, _ = binary
    with pytest.raises(CEGBError, match=r"fit_within_budget: no method gave a point \(methods \[\], baseline=False\)"):
        fit_within_budget(train, valid, COSTS, budget=5.0, task="binary", methods=[], baseline=False)


def test_fit_within_budget_ranks_with_its_defaults():
    """Issue 48 (11): fit_within_budget(task="ranking") could not succeed with its defaults (BudgetPrune refuses
    lambdarank); it now sweeps BudgetPrune for ranking only with a pointwise objective."""
    train, valid, _ = ranking_rows()
    chosen = fit_within_budget(train, valid, [10, 1, 1, 30, 1], budget=20.0, task="ranking", num_boost_round=30)
    assert chosen.valid_cost <= 20.0 and "budget_prune" not in set(chosen.frontier["method"])
    assert {"cegb_cascade", "staged_acquisition_ranker"} <= set(chosen.frontier["method"])
    chosen = fit_within_budget(train, valid, [10, 1, 1, 30, 1], budget=20.0, task="ranking", num_boost_round=30,
                               params={"objective": "regression"})
    assert "budget_prune" in set(chosen.frontier["method"]) and "early_exit" not in set(chosen.frontier["method"])


def test_the_cegb_cascade_cuts_cegbs_own_models():
    """cegb_cascade: EarlyExit's cascade cut on the CEGB models (shared with cegb in the sweep), a point per top_k and
    tree prefix, each measured as its EarlyExit ranks and costs the validation queries."""
    from lightgbm_cegb.methods.early_exit import EarlyExit

    train, valid, _ = ranking_rows()
    costs = FeatureCosts(lazy=[10, 1, 1, 30, 1])
    frame = sweep(["cegb", "cegb_cascade"], train, valid, costs, task="ranking", num_boost_round=30, baseline=False,
                  params={"objective": "regression"},
                  grid={"cegb": [{"relative_tradeoff": 0.02}], "cegb_cascade": [{"relative_tradeoff": 0.02}]})
    cegb, cascade = frame[frame["method"] == "cegb"], frame[frame["method"] == "cegb_cascade"]
    booster = cegb["model"].iloc[0].model
    assert all(point.model.booster is booster for point in cascade["model"])
    cuts = [k for k in CASCADE_TOP_K if k < max(valid[2])]  # a larger cut stops nothing
    assert sorted(set(cascade["top_k"])) == cuts and len(cuts) >= 2 and set(cascade["every"]) == {CASCADE_EVERY}
    assert set(cascade["trees"]) == {t for t in cegb["trees"] if t > CASCADE_EVERY}  # a shorter prefix has no exit
    Xv, yv, gv = valid
    saved = 0.0
    for _, row in cascade.iterrows():
        own = EarlyExit(booster, top_k=int(row["top_k"]), every=CASCADE_EVERY, task="ranking",
                        num_iteration=int(row["trees"]), feature_costs=costs).predict_result(Xv, group=gv)
        assert row["quality"] == pytest.approx(ndcg_at_k(yv, -own.rank.astype(float), gv, k=5), abs=1e-12)
        assert row["cost"] == pytest.approx(own.cost.mean, rel=1e-12)
        whole = cegb[cegb["trees"] == row["trees"]]["cost"].iloc[0]
        assert row["cost"] <= whole * (1 + 1e-12)  # a cut only saves
        saved = max(saved, whole - row["cost"])
    assert saved > 0
    # under a time allowance (fit_within_budget's), a training that was not cut is shared too
    frame = sweep(["cegb", "cegb_cascade"], train, valid, costs, task="ranking", num_boost_round=30, baseline=False,
                  params={"objective": "regression"}, method_fits=20,
                  grid={"cegb": [{"relative_tradeoff": 0.02}], "cegb_cascade": [{"relative_tradeoff": 0.02}]})
    booster = frame[frame["method"] == "cegb"]["model"].iloc[0].model
    assert all(point.model.booster is booster for point in frame[frame["method"] == "cegb_cascade"]["model"])


def test_train_to_budget(binary):
    train, valid, test = binary
    budget = 12.0
    chosen = train_to_budget(train, valid, COSTS, budget, task="binary", test=test, refine=2,
                             params={"num_leaves": 8}, num_boost_round=60)
    assert chosen.method == "cegb" and chosen.valid_cost <= budget
    assert prediction_cost(chosen.model, valid[0], COSTS).mean == pytest.approx(chosen.valid_cost, rel=1e-12)
    assert chosen.test_cost == pytest.approx(prediction_cost(chosen.model, test[0], COSTS).mean, rel=1e-12)
    # at least as good as every point of the starting grid, each trained with the same budget stopping
    grid = sweep("cegb", train, valid, COSTS, task="binary", params={"num_leaves": 8}, num_boost_round=60,
                 baseline=False, grid={"cegb": [{"relative_tradeoff": r, "budget": budget} for r in (0.0, 0.01, 0.1)]})
    within = grid[grid["cost"] <= budget]  # with trade-off 0 the first iteration alone is over the budget
    assert len(within) >= 2 and chosen.valid_quality >= within["quality"].max()


def test_parallel_and_dask_sweeps_agree(binary):
    import distributed

    train, valid, _ = binary
    kwargs = {"task": "binary", "grid": {"cegb": [{"relative_tradeoff": r} for r in (0.0, 0.02, 0.2)]},
              "params": {"num_leaves": 8, "num_threads": 1}, "num_boost_round": 30, "baseline": False}
    serial = sweep("cegb", train, valid, COSTS, **kwargs)
    parallel = sweep("cegb", train, valid, COSTS, n_jobs=2, **kwargs)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50) as cluster, distributed.Client(cluster) as client:
        on_dask = sweep("cegb", train, valid, COSTS, client=client, **kwargs)
    for other in (parallel, on_dask):
        pd.testing.assert_frame_equal(serial.drop(columns="model"), other.drop(columns="model"))


def test_a_method_that_shares_its_fits_fits_them_once_in_the_sweep_s_process(binary, monkeypatch):
    """The staged acquisition's points read one model (their trade-off is read when predicting). With n_jobs=2 (or a
    Dask client) each point went to another process with a copy of the method's state and fitted the model again
    there: on HIGGS fit_within_budget took 2.5 times as long as with n_jobs=1, and its time limit changed the choice.
    Its points now run in this process, the model fitted once, and the frame is the serial one."""
    import distributed

    from lightgbm_cegb.methods.staged import StagedAcquisitionClassifier

    fits = []
    fit = StagedAcquisitionClassifier.fit

    def counted(self, *args, **kwargs):  # only this process's fits: joblib's and Dask's processes import their own
        fits.append(self)
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(StagedAcquisitionClassifier, "fit", counted)
    train, valid, _ = binary
    kwargs = {"task": "binary", "params": {"num_leaves": 8, "num_threads": 1}, "num_boost_round": 30,
              "baseline": False, "progress": False,
              "grid": {"staged_acquisition": [{"relative_tradeoff": r, "order": "importance"}
                                              for r in (0.05, 0.3, 0.7)],
                       "cegb": [{"relative_tradeoff": r} for r in (0.0, 0.2)]}}
    serial = sweep(["staged_acquisition", "cegb"], train, valid, COSTS, **kwargs)
    assert len(fits) == 1
    parallel = sweep(["staged_acquisition", "cegb"], train, valid, COSTS, n_jobs=2, **kwargs)
    assert len(fits) == 2
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50) as cluster, distributed.Client(cluster) as client:
        on_dask = sweep(["staged_acquisition", "cegb"], train, valid, COSTS, client=client, **kwargs)
    assert len(fits) == 3
    for other in (parallel, on_dask):
        pd.testing.assert_frame_equal(serial.drop(columns="model"), other.drop(columns="model"))


def ranking_rows():
    """Train, validation and test rows of 120 queries of 5 to 14 documents (relevance 0..4), with their sizes."""
    rng = np.random.default_rng(3)
    sizes = rng.integers(5, 15, 120)
    X = rng.normal(size=(sizes.sum(), 5))
    y = np.clip(np.round(X[:, 0] + 0.5 * X[:, 3] + rng.normal(0, 0.5, len(X)) + 1), 0, 4)
    cut, cut2 = sizes[:80].sum(), sizes[:100].sum()
    return (X[:cut], y[:cut], sizes[:80]), (X[cut:cut2], y[cut:cut2], sizes[80:100]), (X[cut2:], y[cut2:], sizes[100:])


def test_ranking_sweep():
    train, valid, test = ranking_rows()
    costs = FeatureCosts(lazy=[10, 1, 1, 30, 1])
    frame = sweep(["cegb", "early_exit"], train, valid, costs, task="ranking", num_boost_round=30,
                  grid={"cegb": [{"relative_tradeoff": 0.0}], "early_exit": [{"threshold": 1.0}]})
    assert frame.attrs["metric"] == "ndcg@5"
    whole = frame[frame["method"] == "cegb"].iloc[-1]  # the model at its best iteration (after its prefixes)
    booster = whole["model"].model
    Xv, yv, gv = valid
    assert whole["quality"] == pytest.approx(ndcg_at_k(yv, booster.predict(Xv), gv, k=5), abs=1e-12)
    exit_row = frame[frame["method"] == "early_exit"].iloc[0]
    result = exit_row["model"].model.predict_result(Xv, group=gv)
    assert exit_row["cost"] == pytest.approx(result.cost.mean, rel=1e-12)
    with pytest.raises(CEGBError, match=r"needs the query sizes"):
        sweep("cegb", train[:2], valid, costs, task="ranking")
    with pytest.raises(CEGBError, match=r"\['budgetrf'\] do not support task='regression'"):
        sweep("budgetrf", train[:2], valid[:2], costs, task="regression")
    with pytest.raises(CEGBError, match=r"budget_prune supports LightGBM objectives .* got 'lambdarank'"):
        sweep("budget_prune", train, valid, costs, task="ranking", num_boost_round=5)
    # with a regression objective, BudgetPrune ranks too; the test figures of evaluate are select's
    frame = sweep("budget_prune", train, valid, costs, task="ranking", num_boost_round=20, baseline=False,
                  params={"objective": "regression"}, grid={"budget_prune": [{"budget_fraction": 0.5}]})
    measured = evaluate(frame, test)
    chosen = select(frame, float(frame["cost"].iloc[0]), test=test)
    assert (measured["test_quality"].iloc[0], measured["test_cost"].iloc[0]) == (chosen.test_quality, chosen.test_cost)
    pruned = frame["model"].iloc[0].model
    assert chosen.test_quality == pytest.approx(ndcg_at_k(test[1], pruned.predict(test[0]), test[2], k=5), abs=1e-12)


def test_a_new_method_joins_with_one_registration(binary):
    train, valid, _ = binary

    @register("constant", grid=lambda context: [{"p": 0.5}], tasks=("binary",))
    def fit(context, state, params):
        report = prediction_cost(lgb.train({"objective": "binary", "verbose": -1}, lgb.Dataset(*train), 1),
                                 valid[0], COSTS)
        return [Candidate("constant", params, None, lambda X: np.full(len(X), 0.75), lambda X: report)]
    try:
        frame = sweep("constant", train, valid, COSTS, task="binary")
        assert frame["quality"].iloc[0] == np.mean(valid[1] == 1) and frame["p"].iloc[0] == 0.5
    finally:
        del METHODS["constant"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"methods": "nope"}, r"unknown method\(s\) \['nope'\]; registered:"),
    ({"task": "clustering"}, r"task should be one of .* got 'clustering'"),
    ({"grid": {"early_exit": [{}]}}, r"grid names method\(s\) \['early_exit'\] that are not swept"),
    ({"grid": {"budget_prune": [{"budget_fraction": 0.5, "tradeoff": 1.0}]}, "methods": "budget_prune"},
     r"budget_prune: give budget_fraction or tradeoff"),
    ({"grid": {"early_exit": [{"threshold": 0.9, "every": 5, "speed": 1}]}, "methods": "early_exit"},
     r"early_exit: unknown parameter\(s\) \['speed'\]"),
    ({"metric": "f2"}, r"metric should be one of .* got 'f2'"),  # f1 is a metric since issue 46
    ({"train": [1, 2]}, r"train should be \(X, y\) or \(X, y, group\), got list"),
    # issue 48 (13): bare numpy/joblib/LightGBM errors before
    ({"valid": (np.zeros((0, 6)), np.zeros(0))}, r"valid: X should be 2-dimensional with at least one row, got "
                                                 r"shape \(0, 6\)"),
    ({"train": (np.zeros(900), np.zeros(900))}, r"train: X should be 2-dimensional .* got shape \(900,\)"),
    ({"grid": {"cegb": {"relative_tradeoff": 0.1}}}, r"grid\['cegb'\] should be a list of parameter mappings"),
    ({"grid": {"cegb": [0.1, 0.2]}}, r"grid\['cegb'\] should be a list of parameter mappings"),
    ({"grid": [1, 2]}, r"grid should be a mapping \{method: \[params, ...\]\}, got list"),
    ({"params": "num_leaves=4"}, r"params should be a mapping of LightGBM parameters, got 'num_leaves=4'"),
    ({"n_jobs": 0}, r"n_jobs should be None or a non-zero integer, got 0"),
    ({"early_stopping_rounds": "5"}, r"early_stopping_rounds should be None or an integer >= 1, got '5'"),
    ({"methods": None}, r"methods should be a method's name or a list of names, got None"),
    ({"grid": {"cegb": [{"relative_tradeoff": "x"}]}}, r"cegb: relative_tradeoff should be a finite number >= 0, "
                                                         r"got 'x'"),
    ({"grid": {"cegb": [{"relative_tradeoff": -1}]}}, r"cegb: relative_tradeoff should be a finite number >= 0, "
                                                        r"got -1"),
    ({"task": "ranking", "train": (np.zeros((900, 6)), np.zeros(900), [500, 500])},
     r"train: group should hold the sizes .* summing to the 900 rows of X, got .* \(sum 1000\)"),
])
def test_bad_input(binary, kwargs, message):
    train, valid, _ = binary
    args = {"methods": "cegb", "train": train, "valid": valid, "costs": COSTS, "task": "binary",
            "num_boost_round": 5, **kwargs}
    with pytest.raises(CEGBError, match=message):
        sweep(args.pop("methods"), args.pop("train"), args.pop("valid"), args.pop("costs"), **args)


@pytest.mark.parametrize("entry", [sweep, select, fit_within_budget, train_to_budget])
def test_the_declared_parameters_refuse_what_they_say(entry):
    """Each entry point declares every parameter it takes (the workflows, the sweep options they pass on too) and
    refuses each invalid value at entry, before it reads the rows (rows of None are not reached)."""
    unread = {"train": None, "valid": None, "costs": None, "task": "binary"}
    valid = {sweep: {**unread, "methods": "lightgbm"}, select: {"frame": None, "budget": 1.0}}
    assert check_declared(entry, valid.get(entry, {**unread, "budget": 1.0})) >= 5


def test_a_workflow_checks_each_value_once(binary, monkeypatch):
    """fit_within_budget checks its arguments at entry and calls sweep and select unchecked: the budget is checked
    once, not once by each of the three as before."""
    from lightgbm_cegb.core import validation

    budgets, check_number = [], validation.check_number
    monkeypatch.setattr(validation, "check_number", lambda value, name, *args, **kwargs: (
        budgets.append(value) if name == "budget" else None) or check_number(value, name, *args, **kwargs))
    train, valid, _ = binary
    with pytest.warns(RoundsWarning) as caught:  # 5 rounds: still improving
        chosen = fit_within_budget(train, valid, COSTS, 30.0, task="binary", methods=["lightgbm"], baseline=False,
                                   num_boost_round=5, refine=0, progress=False)
    assert chosen.valid_cost <= 30.0 and budgets == [30.0]
    assert [warning.filename for warning in caught] == [__file__]  # the caller's line, through the checks' wrapper


def test_cost_scorer_in_grid_search(binary):
    from sklearn.model_selection import GridSearchCV

    from lightgbm_cegb.lgbm.cegb_estimators import CEGBClassifier

    (X, y), _, _ = binary
    budget = 10.0
    scorer = cost_scorer(COSTS, metric="accuracy", budget=budget)
    search = GridSearchCV(CEGBClassifier(feature_costs=COSTS, n_estimators=30, num_leaves=8, verbose=-1),
                          {"cegb_tradeoff": [0.0, 0.001, 0.01, 0.1]}, scoring=scorer, cv=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the non-finite scores of over-budget settings, named by sklearn
        search.fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    assert np.isneginf(scores[0])  # plain LightGBM (trade-off 0) passes the budget
    assert np.isfinite(search.best_score_)
    model = search.best_estimator_
    cost = prediction_cost(model, X, COSTS).mean
    expected = np.mean(model.predict(X) == y) if cost <= budget else -math.inf
    assert scorer(model, X, y) == expected
    with pytest.raises(CEGBError, match=r"cost_scorer: metric 'ndcg@5' needs the queries"):
        cost_scorer(COSTS, metric="ndcg@5")
    penalised = cost_scorer(COSTS, metric="logloss", penalty=0.01)(model, X, y)
    from sklearn.metrics import log_loss
    assert penalised == pytest.approx(-log_loss(y, model.predict_proba(X)) - 0.01 * cost, rel=1e-12)


def test_plots(frontier, binary):
    import matplotlib.pyplot as plt

    from lightgbm_cegb.selection.plots import plot_cost_curve, plot_feature_usage, plot_frontiers

    ax = plot_frontiers(frontier, budget=10.0, title="t")
    methods = list(dict.fromkeys(frontier["method"]))
    assert [line.get_label() for line in ax.get_lines()][:len(methods)] == methods
    lightgbm_line = ax.get_lines()[0]
    assert list(lightgbm_line.get_xdata()) == list(pareto(frontier[frontier["method"] == "lightgbm"])["cost"])
    booster = frontier[frontier["method"] == "lightgbm"]["model"].iloc[0].model
    report = prediction_cost(booster, binary[1][0], COSTS, per_iteration=True)
    ax = plot_feature_usage(report, COSTS)
    widths = [patch.get_width() for patch in ax.patches]
    assert sum(widths) == pytest.approx(1.0)
    ax = plot_cost_curve(report.curve, budget=5.0)
    np.testing.assert_array_equal(ax.get_lines()[0].get_ydata(), report.curve)
    ax = plot_cost_curve({"cost": [1.0, 2.0], "cost-stdv": [0.1, 0.2]}, label="cv")
    assert len(ax.collections) == 1
    with pytest.raises(CEGBError, match=r"frame should have the columns method, cost and quality"):
        plot_frontiers(pd.DataFrame({"cost": [1.0]}))
    plt.close("all")


def test_many_methods_get_their_own_colours_and_a_legend_beside_the_axes():
    """Fifteen methods (frontiers.py's tables): fifteen colours (tab10 would repeat), the legend outside the axes."""
    import matplotlib.pyplot as plt

    from lightgbm_cegb.selection.plots import plot_frontiers

    frame = pd.DataFrame({"method": [f"m{i}" for i in range(15) for _ in range(2)],
                          "cost": np.tile([1.0, 2.0], 15), "quality": np.arange(30, dtype=float)})
    ax = plot_frontiers(frame, pareto_only=False)
    assert len({line.get_color() for line in ax.get_lines()}) == 15
    legend = ax.get_legend()
    assert legend.get_bbox_to_anchor().x0 > ax.get_window_extent().x1  # right of the axes
    few = plot_frontiers(frame[frame["method"].isin(["m0", "m1"])], pareto_only=False)
    assert few.get_legend().get_bbox_to_anchor().x0 <= few.get_window_extent().x0 + 1  # the default: inside
    plt.close("all")


def test_from_a_dataframe_costs_by_name_and_a_budget(binary):
    """The README's few lines: a DataFrame, a cost per column by name, a budget -> the selected model."""
    (X, y), (Xv, yv), (Xt, yt) = binary
    names = ["age", "bmi", "blood_test", "ecg", "mri", "ct"]
    frame = lambda A: pd.DataFrame(A, columns=names)  # noqa: E731
    costs = dict(zip(names, COSTS.lazy))
    frontier = sweep("cegb", (frame(X), y), (frame(Xv), yv), costs, task="binary", num_boost_round=60,
                     grid={"cegb": [{"relative_tradeoff": r} for r in (0.0, 0.3, 0.7)]})
    best = select(frontier, budget=20.0, test=(frame(Xt), yt))
    assert best.valid_cost <= 20.0 < frontier["cost"].max()
    assert best.model.params["cegb_penalty_feature_lazy"] == list(COSTS.lazy)  # aligned by name
    assert best.test_cost == pytest.approx(prediction_cost(best.model, Xt, COSTS).mean, rel=1e-12)
    assert best.test_quality == np.mean((best.model.predict(frame(Xt)) > 0.5) == yt)
    with pytest.raises(CEGBError, match=r"costs name features, but train's X has no column names"):
        sweep("cegb", (X, y), (Xv, yv), costs, task="binary")


def test_frames_with_the_columns_in_another_order_are_refused(binary):
    """Issue 48, item 4: test rows whose columns are the training columns in another order were read by
    position (LightGBM's predict reads a frame so): test accuracy ~0.5 and another cost, no error."""
    (X, y), (Xv, yv), (Xt, yt) = binary
    names = ["age", "bmi", "blood test", "ecg", "mri", "ct"]  # a space: LightGBM's model names it blood_test
    frame = lambda A, order=names: pd.DataFrame(A, columns=names)[order]  # noqa: E731
    shuffled = ["ct", *names[:-1]]
    frontier = sweep(["lightgbm", "cegb"], (frame(X), y), (frame(Xv), yv), dict(zip(names, COSTS.lazy)),
                     task="binary", num_boost_round=30, grid={"cegb": [{"relative_tradeoff": 0.3}]})
    assert frontier.attrs["columns"] == names
    message = r"test: its columns are the sweep's training columns in another order \(column 0 is 'ct', expected 'age'"
    with pytest.raises(CEGBError, match=message):
        select(frontier, budget=100.0, test=(frame(Xt, shuffled), yt))
    with pytest.raises(CEGBError, match=message):
        evaluate(frontier, (frame(Xt, shuffled), yt), prefix="test_")
    with pytest.raises(CEGBError, match=r"valid: its columns are train's columns in another order"):
        sweep("lightgbm", (frame(X), y), (frame(Xv, shuffled), yv), COSTS, task="binary", num_boost_round=5)
    best = select(frontier, budget=100.0, test=(frame(Xt), yt))
    assert best.test_quality > 0.8
    with pytest.raises(CEGBError, match=r"X: its columns are the model's features in another order \(column 0 is "
                                        r"'ct', expected 'age'\): reorder them as \['age', 'bmi', 'blood_test'"):
        prediction_cost(best.model, frame(Xt, shuffled), COSTS)
    assert prediction_cost(best.model, frame(Xt), COSTS).mean == pytest.approx(best.test_cost, rel=1e-12)
    other = pd.DataFrame(Xt, columns=[f"x{i}" for i in range(6)])  # other names: read by position, as LightGBM
    assert prediction_cost(best.model, other, COSTS).mean == pytest.approx(best.test_cost, rel=1e-12)


def test_a_tradeoff_without_split_warns(binary):
    train, valid, _ = binary
    with pytest.warns(UserWarning, match=r"cegb: cegb_tradeoff=\S+ leaves the model without a split"):
        frame = sweep("cegb", train, valid, COSTS, task="binary", num_boost_round=10,
                      grid={"cegb": [{"relative_tradeoff": 1.01}]})
    assert frame["cost"].iloc[0] == 0.0


def test_budget_prune_and_adapt_with_group_costs(binary):
    """Group costs reach BudgetPrune (its per-row part: each (row, group) pair once) and ADAPT-LIN: every point's
    cost is prediction_cost's (or the composite's) with the groups, and BudgetPrune keeps within its budget on
    the training rows."""
    train, valid, _ = binary
    grouped = FeatureCosts(lazy=[1.0, 0.0, 0.0, 2.0, 0.5, 0.5], coupled=[0.0] * 6, groups=[-1, 0, 0, -1, 1, 1],
                           group_lazy=[4.0, 3.0])
    frame = sweep(["budget_prune", "adapt_lin"], train, valid, grouped, task="binary", params={"num_leaves": 8},
                  num_boost_round=40, baseline=False, grid={"budget_prune": [{"budget_fraction": 0.5}],
                                            "adapt_lin": [{"p_full": 0.3, "relative_tradeoff": 0.1}]})
    assert sorted(frame["method"]) == ["adapt_lin", "budget_prune"]
    for _, row in frame.iterrows():
        candidate = row["model"]
        expected = candidate.model.prediction_cost(valid[0]) if row["method"] == "adapt_lin" else \
            prediction_cost(candidate.model, valid[0], grouped)
        assert row["cost"] == pytest.approx(expected.mean, rel=1e-12)
    pruned = frame[frame["method"] == "budget_prune"].iloc[0]["model"].model
    plain = sweep("lightgbm", train, valid, grouped, task="binary", params={"num_leaves": 8}, num_boost_round=40,
                  baseline=False)
    full_cost = prediction_cost(plain.iloc[0]["model"].model, train[0], grouped).mean
    assert prediction_cost(pruned, train[0], grouped).mean <= 0.5 * full_cost + 1e-12


@pytest.mark.parametrize("labels", [(-1, 1), (2, 5), ("miss", "hit")])
def test_binary_labels_are_mapped_to_0_and_1(binary, labels):
    """{-1, +1} gave accuracy 0.51 where AUC was 0.996, and {2, 5} quality 0 at cost 0 (which select() chose):
    any two classes are mapped to 0 and 1 (the larger is 1) before every method, metric and test row, so a
    sweep gives what it gives on 0/1 labels."""
    (X, y), (Xv, yv), (Xt, yt) = binary
    low, high = sorted(labels)

    def relabel(values):
        return np.where(values == 1, high, low)
    grid = {"cegb": [{"relative_tradeoff": 0.01}], "budgetrf": [{"tradeoff": 2.0, "n_estimators": 2, "trees": (2,)}]}
    for metric in ("accuracy", "auc"):
        options = {"task": "binary", "grid": grid, "metric": metric, "params": {"num_leaves": 8},
                   "num_boost_round": 20}
        reference = sweep(["lightgbm", "cegb", "budgetrf"], (X, y), (Xv, yv), COSTS, **options)
        frame = sweep(["lightgbm", "cegb", "budgetrf"], (X, relabel(y)), (Xv, relabel(yv)), COSTS, **options)
        assert frame.attrs["classes"] == [low, high] and reference.attrs["classes"] == [0, 1]
        np.testing.assert_array_equal(frame["quality"], reference["quality"])
        np.testing.assert_array_equal(frame["cost"], reference["cost"])
        assert frame["quality"].max() > 0.9 and frame["quality"].min() > 0.6
        chosen, again = select(frame, 10.0, test=(Xt, relabel(yt))), select(reference, 10.0, test=(Xt, yt))
        assert (chosen.method, chosen.test_quality, chosen.test_cost) == (again.method, again.test_quality,
                                                                         again.test_cost)
        assert chosen.valid_cost > 0
    with pytest.raises(CEGBError, match=r"test: labels should be among the sweep's classes .*, got \['7'\]"):
        select(frame, 10.0, test=(Xt[:3], np.array([low, 7, high], dtype=object)))


@pytest.mark.parametrize(("task", "labels", "message"), [
    ("binary", lambda y: y + (np.arange(len(y)) % 3 == 0), r"task='binary' needs labels of exactly two classes "
     r"\(the larger is the positive class\), got 3 in train and valid: \[0, 1, 2\]"),
    ("binary", lambda y: np.zeros(len(y), dtype=int), r"task='binary' needs labels of exactly two classes .* got 1 "
     r"in train and valid: \[0\]"),
    ("binary", lambda y: np.where(y == 1, 1.0, np.nan), r"task='binary': labels should be finite, got \[nan"),
    ("multiclass", lambda y: np.full(len(y), 4), r"task='multiclass' needs labels of at least two classes, got "
     r"\[4\]"),
])
def test_class_labels_are_checked(binary, task, labels, message):
    (X, y), (Xv, yv), _ = binary
    with pytest.raises(CEGBError, match=message):
        sweep("lightgbm", (X, labels(y)), (Xv, labels(yv)), COSTS, task=task, num_boost_round=5)


def test_binary_train_without_one_class_is_refused(binary):
    (X, y), (Xv, yv), _ = binary
    with pytest.raises(CEGBError, match=r"task='binary': train should hold both classes \[0, 1\], got only \[1\]"):
        sweep("lightgbm", (X[y == 1], y[y == 1]), (Xv, yv), COSTS, task="binary", num_boost_round=5)


def test_multiclass_labels_are_mapped_to_0_to_k(binary):
    (X, y), (Xv, yv), (Xt, yt) = binary
    k = ((X[:, 1] > 0.5).astype(int) + y * 2)
    kv, kt = (Xv[:, 1] > 0.5).astype(int) + yv * 2, (Xt[:, 1] > 0.5).astype(int) + yt * 2
    spread = np.array([-3, 10, 11, 40])  # four classes, as any four values
    reference = sweep("lightgbm", (X, k), (Xv, kv), COSTS, task="multiclass", num_boost_round=10)
    frame = sweep("lightgbm", (X, spread[k]), (Xv, spread[kv]), COSTS, task="multiclass", num_boost_round=10)
    assert frame.attrs["classes"] == spread.tolist() and reference.attrs["classes"] == [0, 1, 2, 3]
    assert frame["model"].iloc[0].predict(Xv).shape == (len(Xv), 4)
    np.testing.assert_array_equal(frame["quality"], reference["quality"])
    assert frame["quality"].iloc[0] > 0.5
    assert evaluate(frame, (Xt, spread[kt]))["test_quality"].iloc[0] == \
        evaluate(reference, (Xt, kt))["test_quality"].iloc[0]


def test_select_takes_numpy_budgets(frontier):
    """np.float32(budget) (what a numpy computation of a budget gives) was refused as not a number."""
    budget = float(np.float32(frontier["cost"].median()))  # a float32 value: the same budget in both types
    expected = select(frontier, budget)
    for numpy_budget in (np.float32(budget), np.float64(budget)):
        chosen = select(frontier, numpy_budget)
        assert (chosen.method, chosen.params, chosen.valid_cost) == (expected.method, expected.params,
                                                                     expected.valid_cost)
    assert select(frontier, np.int64(10**6)).valid_cost == select(frontier, 10**6).valid_cost
    for bad in (np.float32("nan"), np.inf, "30", None):
        with pytest.raises(CEGBError, match=re.escape(f"budget should be a finite number >= 0, got {bad!r}")):
            select(frontier, bad)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"budget": float("nan")}, r"budget should be a finite number >= 0, got nan"),
    ({"budget": -1.0}, r"budget should be a finite number >= 0, got -1.0"),
    ({"budget": "10"}, r"budget should be a finite number >= 0, got '10'"),
    ({"penalty": float("nan")}, r"penalty should be a finite number >= 0, got nan"),
])
def test_cost_scorer_refuses_a_budget_it_cannot_apply(kwargs, message):
    """budget=nan compared False with every cost: the scorer silently ignored it."""
    with pytest.raises(CEGBError, match=message):
        cost_scorer(COSTS, **kwargs)
    assert callable(cost_scorer(COSTS, budget=np.float32(5.0)))


def test_a_budget_refines_the_knob_and_adds_the_longest_prefix_within_it(binary):
    train, valid, _ = binary
    budget = 9.0
    grid = {"cegb": [{"relative_tradeoff": r} for r in (0.0, 0.05, 0.5)]}
    kwargs = {"task": "binary", "params": {"num_leaves": 8, "num_threads": 1}, "num_boost_round": 200,
              "baseline": False, "grid": grid}
    plain = sweep("cegb", train, valid, COSTS, **kwargs)
    frame = sweep("cegb", train, valid, COSTS, budget=budget, refine=3, **kwargs)
    assert frame.attrs["budget"] == budget and plain.attrs["budget"] is None
    refined = frame[frame["stage"] == "refine"]
    assert len(refined) and set(refined["relative_tradeoff"]).isdisjoint({0.0, 0.05, 0.5})
    assert ((refined["relative_tradeoff"] > 0) & (refined["relative_tradeoff"] < 0.5)).all()
    # the longest prefix within the budget, by an independent loop over prefixes
    for _, models in frame.groupby("relative_tradeoff"):
        booster = models["model"].iloc[0].model
        best = booster.best_iteration
        fits = [k for k in range(1, best + 1) if prediction_cost(booster, valid[0], COSTS, num_iteration=k).mean
                <= budget]
        if fits and fits[-1] < best:
            assert fits[-1] in set(models["trees"])
    assert select(frame, budget).valid_quality >= select(plain, budget).valid_quality


def test_a_frame_and_a_selection_pickle(frontier, binary):
    import pickle

    _, (Xv, _), _ = binary
    again = pickle.loads(pickle.dumps(frontier))
    for (_, a), (_, b) in zip(frontier.iterrows(), again.iterrows()):
        np.testing.assert_array_equal(a["model"].predict(Xv), b["model"].predict(Xv))
        assert a["model"].cost(Xv).mean == b["model"].cost(Xv).mean
    assert again.attrs["metric_object"] == frontier.attrs["metric_object"]
    chosen = pickle.loads(pickle.dumps(select(frontier, float(frontier["cost"].median()))))
    assert chosen.candidate.measure(Rows.of(binary[1], "valid"), frontier.attrs["metric_object"])[0] == \
        chosen.valid_quality


def test_the_round_cap_warns(binary):
    from lightgbm_cegb.core.errors import RoundsWarning

    train, valid, _ = binary
    with pytest.warns(RoundsWarning, match=r"point\(s\) of \['lightgbm'\] reached num_boost_round=3 while the"):
        sweep("lightgbm", train, valid, COSTS, task="binary", num_boost_round=3, baseline=False)
    with pytest.warns(RoundsWarning, match=r"improving \(lightgbm \{'num_leaves': 4\}, lightgbm \{'num_leaves': 8\}\)"):
        sweep("lightgbm", train, valid, COSTS, task="binary", num_boost_round=3, baseline=False,
              grid={"lightgbm": [{"num_leaves": 4}, {"num_leaves": 8}]})  # each grid point named once
    with warnings.catch_warnings():
        warnings.simplefilter("error", RoundsWarning)  # the default cap does not bind here
        sweep("lightgbm", train, valid, COSTS, task="binary", params={"num_leaves": 8}, baseline=False)


def test_select_warns_of_a_gap_below_the_budget():
    from lightgbm_cegb.core.errors import BudgetWarning

    report = type("Report", (), {"mean": 0.0, "coupled": 0.0})()
    points = [Candidate("m", {}, None, lambda X: X, lambda X: report) for _ in range(3)]
    frame = pd.DataFrame({"method": "m", "quality": [0.6, 0.7, 0.9], "cost": [1.0, 5.0, 20.0],
                          "params": [{}, {}, {}], "model": points})
    frame.attrs.update(greater_is_better=True, task="binary")
    with pytest.warns(BudgetWarning, match=r"the best point within budget=10 costs 5 and no point was swept"):
        assert select(frame, 10.0).valid_cost == 5.0
    with warnings.catch_warnings():
        warnings.simplefilter("error", BudgetWarning)
        select(frame, 6.0)  # 5 is within 80% of it
        frame.attrs["budget"] = 10.0  # swept for this budget: refined there already
        select(frame, 10.0)


def test_the_staged_acquisition_fits_its_stages_up_to_the_largest_cap_of_the_points(binary):
    """A batch whose points all have a cap fits the stages up to the largest (max_stage_cost); each point measures
    as the model with every stage under its cap, to the bit; a point without a cap needs every stage."""
    from lightgbm_cegb.methods.staged import StagedAcquisitionClassifier
    train, valid, _ = binary
    full = StagedAcquisitionClassifier(feature_costs=COSTS, random_state=0, early_stopping_rounds=20).fit(
        *train, eval_set=valid)
    caps = [12.0, 30.0]
    grid = {"staged_acquisition": [{"relative_tradeoff": r, "max_cost": c} for c in caps for r in (0.0, 0.3)]}
    frame = sweep("staged_acquisition", train, valid, COSTS, task="binary", baseline=False, grid=grid,
                  progress=False)
    models = [candidate.model for candidate in frame["model"]]
    assert {m.max_stage_cost for m in models} == {30.0} and len({id(m.stages_) for m in models}) == 1
    assert len(models[0].stages_) < len(full.stages_)
    for row, model in zip(frame.to_dict("records"), models):
        expected = copy.copy(full).set_params(tradeoff=model.tradeoff, max_cost=model.max_cost).predict_result(
            valid[0])
        assert row["cost"] == expected.cost.mean
        assert row["quality"] == np.mean(expected.proba.argmax(axis=1) == valid[1])
    grid["staged_acquisition"].append({"relative_tradeoff": 0.3})  # no cap: every stage
    frame = sweep("staged_acquisition", train, valid, COSTS, task="binary", baseline=False, grid=grid,
                  progress=False)
    assert {candidate.model.max_stage_cost for candidate in frame["model"]} == {None}


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(0, 10_000))
def test_varying_columns_counts_a_missing_value_and_a_sparse_matrix_s_zeros_as_values(seed):
    """Whether each column holds two values or more, against the count of its distinct values (NaN one of them), for
    the same rows as an array, a DataFrame and a scipy sparse matrix (its absent entries zeros)."""
    import scipy.sparse

    from lightgbm_cegb.selection.acquisition_family import _varying_columns
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 6))
    X = rng.choice([0.0, 0.0, 1.0, 2.0, np.nan], size=(n, 12))
    for j in range(6):  # columns of one value, some with NaN or zeros beside it
        X[:, j] = rng.choice([0.0, 3.0, np.nan])
        if rng.random() < 0.5:
            X[rng.integers(n), j] = rng.choice([0.0, 3.0, np.nan])
    expected = [len({"nan" if np.isnan(v) else v for v in X[:, j]}) > 1 for j in range(X.shape[1])]
    np.testing.assert_array_equal(_varying_columns(X), expected)
    np.testing.assert_array_equal(_varying_columns(pd.DataFrame(X)), expected)
    stored = X != 0  # NaN stored, zeros absent but for an explicit one at random
    zeros = np.argwhere(~stored)
    if len(zeros) and rng.random() < 0.5:
        stored[tuple(zeros[rng.integers(len(zeros))])] = True
    rows, columns = np.nonzero(stored)
    sparse = scipy.sparse.coo_matrix((X[rows, columns], (rows, columns)), shape=X.shape).tocsr()
    np.testing.assert_array_equal(_varying_columns(sparse), expected)


def test_the_staged_caps_are_shares_of_the_units_that_tell_rows_apart(binary):
    """A column that holds one value in every training row (the synthetic Yahoo! set's never-occurring ids, priced
    10,000) does not price the staged models' caps: they are shares of the other units' prices."""
    from lightgbm_cegb.selection.acquisition_family import STAGED_CAPS, _caps
    from lightgbm_cegb.selection.registry import Context, Rows
    train, valid, _ = binary
    X = np.column_stack([train[0], np.full(len(train[0]), 7.0)])
    costs = FeatureCosts(lazy=[*COSTS.lazy, 10_000.0])
    context = Context(task="binary", train=Rows(X, train[1]), valid=Rows(np.column_stack(
        [valid[0], np.zeros(len(valid[0]))]), valid[1]), costs=costs, params={}, num_boost_round=10,
        early_stopping_rounds=5)
    total = sum(COSTS.lazy)
    assert _caps(context) == [{}] + [{"max_cost": round(f * total, 6)} for f in STAGED_CAPS]


def test_the_adaptive_acquisition_sweeps_one_fit_and_measures_each_policy(binary, monkeypatch):
    """One classifier per sweep; each point is its policy (tradeoff, cap, gain), measured exactly on validation,
    from one recorded run per classifier, gain and cap (the tradeoffs of a gain share it)."""
    import pickle

    from lightgbm_cegb.methods.acquisition import AdaptiveAcquisitionClassifier
    from lightgbm_cegb.selection.acquisition_family import (
        ACQUISITION_CAPS,
        ACQUISITION_ENTROPY_TRADEOFFS,
        ACQUISITION_RELATIVE_TRADEOFFS,
    )
    train, valid, _ = binary
    runs = []
    trace = AdaptiveAcquisitionClassifier.trace
    monkeypatch.setattr(AdaptiveAcquisitionClassifier, "trace",
                        lambda self, X, record=True: runs.append(record) or at.append(self) or trace(self, X, record))
    at = []  # the models the runs were recorded with
    trainings = []
    rounds = AdaptiveAcquisitionClassifier.fit_rounds
    monkeypatch.setattr(AdaptiveAcquisitionClassifier, "fit_rounds", lambda self, *args, **kwargs:
                        trainings.append(self.policy_rounds) or rounds(self, *args, **kwargs))
    frame = sweep("adaptive_acquisition", train, valid, COSTS, task="binary", baseline=False)
    assert runs.count(True) == 2 * (1 + len(ACQUISITION_CAPS) + 1)  # per classifier: accuracy, each cap, entropy
    entropy = [model for model in at if model.gain == "entropy"]  # recorded at the grid's lowest, not at 0
    assert len(entropy) == 2 and all(model.tradeoff == pytest.approx(
        ACQUISITION_ENTROPY_TRADEOFFS[0] * copy.copy(model).first_value(), rel=1e-12) for model in entropy)
    assert all(model.tradeoff == 0.0 for model in at if model.gain == "accuracy")
    again = pickle.loads(pickle.dumps(frame))
    assert again["model"].iloc[0].traces.runs == {} and frame["model"].iloc[0].traces.runs  # pickled empty
    models = frame["model"].map(lambda candidate: candidate.model)
    assert {m.policy_rounds: id(m.classifier_) for m in models}.keys() == {0, 1}
    assert len({id(m.classifier_) for m in models}) == 2  # one classifier per policy_rounds, shared by its points
    assert trainings == [1]  # one fit to policy_rounds=1, its round 0 kept as the policy_rounds=0 classifier
    for model in {m.policy_rounds: m for m in models}.values():  # each as fitted alone, to the bit
        alone = AdaptiveAcquisitionClassifier(feature_costs=COSTS, random_state=0, policy_rounds=model.policy_rounds,
                                              early_stopping_rounds=20).fit(*train, eval_set=valid)
        assert model.classifier_.model_to_string() == alone.classifier_.model_to_string()
    assert len(frame) == 2 * (len(ACQUISITION_RELATIVE_TRADEOFFS) + len(ACQUISITION_CAPS)
                              + len(ACQUISITION_ENTROPY_TRADEOFFS))
    total = sum(COSTS.lazy)
    for (_, row), model in zip(frame.iterrows(), models):
        assert isinstance(model, AdaptiveAcquisitionClassifier)
        result = model.predict_result(valid[0])  # its own run: the shared one answers it to the bit
        assert row["cost"] == result.cost.mean
        assert row["quality"] == np.mean(result.proba.argmax(axis=1) == valid[1])
        assert model.gain == row["params"].get("gain", "accuracy")
        assert model.policy_rounds == row["params"]["policy_rounds"]
        assert model.tradeoff == pytest.approx(row["params"]["relative_tradeoff"] * model.first_value(), rel=1e-12)
        if "max_cost" in row["params"]:
            assert row["params"]["max_cost"] in [round(f * total, 6) for f in ACQUISITION_CAPS]
            assert result.cost.acquisition.max() <= row["params"]["max_cost"] + 1e-9
    raw = sweep("adaptive_acquisition", train, valid, COSTS, task="binary", baseline=False,
                grid={"adaptive_acquisition": [{"tradeoff": 0.0}]})
    assert raw["model"].iloc[0].model.tradeoff == 0.0
    with pytest.raises(CEGBError, match="unknown parameter"):
        sweep("adaptive_acquisition", train, valid, COSTS, task="binary", baseline=False,
              grid={"adaptive_acquisition": [{"relative_tradeoff": 0.1, "depth": 3}]})


def test_a_shared_policy_run_is_recorded_at_the_lowest_tradeoff_planned_and_again_below_it(binary, monkeypatch):
    """The adaptive acquisition's points share one recorded run per classifier, gain and cap, recorded at the lowest
    tradeoff planned for it; a point asking for less records it again there; each answer equals the point's own
    run to the bit."""
    from lightgbm_cegb.methods.acquisition import AdaptiveAcquisitionClassifier
    from lightgbm_cegb.selection.acquisition_family import _Traces
    train, valid, _ = binary
    model = AdaptiveAcquisitionClassifier(feature_costs=COSTS, random_state=0, gain="entropy",
                                          early_stopping_rounds=20).fit(*train, eval_set=valid)
    scale = model.first_value()
    at = []
    trace = AdaptiveAcquisitionClassifier.trace
    monkeypatch.setattr(AdaptiveAcquisitionClassifier, "trace",
                        lambda self, X, record=True: at.append(self.tradeoff) or trace(self, X, record))
    traces = _Traces()
    points = [copy.copy(model).set_params(tradeoff=r * scale) for r in (0.2, 0.05, 0.5, 0.01, 0.05)]
    for point in points[:3]:
        traces.plan(point, point.tradeoff)
    for point in points:
        result, alone = traces.result(point, valid[0]), point.predict_result(valid[0])
        assert result.cost.mean == alone.cost.mean and np.array_equal(result.proba, alone.proba)
        assert np.array_equal(result.order, alone.order)
        assert np.array_equal(result.cost.per_instance, alone.cost.per_instance)
    assert at == [0.05 * scale, 0.01 * scale]  # the lowest planned, then the lower one asked


def test_a_sweep_logs_each_point_and_shows_it_on_its_bar(binary, caplog, capsys):
    """Progress a person sees: each fitted grid point logged (lightgbm_cegb.selection, INFO) with its method,
    parameters, best quality and seconds; with progress=True the bar names the method and point last fitted."""
    train, valid, _ = binary
    grid = {"cegb": [{"relative_tradeoff": 0.1}], "lightgbm": [{}]}
    with caplog.at_level(logging.INFO, logger="lightgbm_cegb.selection"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the few rounds' RoundsWarning
        frame = sweep(["lightgbm", "cegb"], train, valid, COSTS, task="binary", grid=grid, params={"num_leaves": 4},
                      num_boost_round=20, baseline=False, progress=True)
    records = [r.getMessage() for r in caplog.records if r.name == "lightgbm_cegb.selection"]
    assert len(records) == 2, records
    assert any(re.match(r"sweep: cegb \(relative_tradeoff=0\.1\) grid: \d+ point\(s\), best accuracy [\d.]+ at "
                        r"cost [\d.]+ \([\d.]+ s\)$", m) for m in records), records  # the point's seconds last
    assert any(m.startswith("sweep: lightgbm (defaults) grid:") for m in records), records
    assert len(frame) >= 2
    error = capsys.readouterr().err
    assert "sweep" in error and "cegb relative_tradeoff=0.1" in error, error


def test_adapt_lin_joins_the_default_methods_on_few_rows(monkeypatch):
    """Issue 60 (5): below LINEAR_ROWS training rows of at most LINEAR_FEATURES features a classification task's
    defaults add ADAPT-LIN; not above either, nor for regression."""
    from lightgbm_cegb.selection import workflows
    swept = []

    def recorded(methods, *args, **kwargs):
        swept.append(list(methods))
        raise CEGBError("recorded")

    monkeypatch.setattr(workflows.sweep, "unchecked", recorded)  # fit_within_budget checked its arguments
    rng = np.random.default_rng(0)
    for rows, features, task in ((workflows.LINEAR_ROWS - 1, 3, "binary"), (workflows.LINEAR_ROWS, 3, "binary"),
                                 (workflows.LINEAR_ROWS - 1, 3, "regression"),
                                 (100, workflows.LINEAR_FEATURES, "binary"),
                                 (100, workflows.LINEAR_FEATURES + 1, "binary")):
        X, y = rng.normal(size=(rows, features)), rng.integers(0, 2, rows)
        with pytest.raises(CEGBError, match="recorded"):
            fit_within_budget((X, y), (X[:10], y[:10]), None, 1.0, task=task)
    binary = [m for m in workflows.BUDGET_METHODS if "binary" in METHODS[m].tasks]
    assert swept[0] == swept[3] == binary + ["adapt_lin"]
    assert swept[1] == swept[4] == binary and "adapt_lin" not in swept[2]
    assert "staged_acquisition_regressor" in swept[2] and "staged_acquisition_ranker" not in swept[2]


@pytest.mark.parametrize("case", ["tiny binary", "constant regression", "tiny ranking"])
def test_tiny_or_constant_data_leaves_out_the_methods_that_cannot_fit_it(case):
    """Issue 61 (14): fit_within_budget on 10 rows, a constant regression target or a tiny ranking set failed whole
    ("cegb_tradeoff_scale: the first tree makes no split even without costs"). The methods whose trade-off has
    nothing to weigh are left out with a warning naming them; the others answer; nothing at all is an error."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(10, 3))
    task, train, valid = {
        "tiny binary": ("binary", (X, (X[:, 0] > 0).astype(int)), (X, (X[:, 0] > 0).astype(int))),
        "constant regression": ("regression", (X, np.ones(10)), (X, np.ones(10))),
        "tiny ranking": ("ranking", (X, rng.integers(0, 3, 10), [5, 5]), (X, rng.integers(0, 3, 10), [5, 5])),
    }[case]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chosen = fit_within_budget(train, valid, None, 2.0, task=task, num_boost_round=20)
    left_out = [str(w.message) for w in caught if "left out" in str(w.message)]
    assert any(re.match(r"sweep: cegb left out: cegb_tradeoff_scale: the first tree makes no split even without "
                        r"costs", message) for message in left_out), left_out
    assert chosen.valid_cost <= 2.0 and "cegb" not in set(chosen.frontier["method"])
    with pytest.warns(CEGBWarning, match="cegb left out"), \
            pytest.raises(CEGBError, match=r"fit_within_budget: no method gave a point \(methods \['cegb'\], "):
        fit_within_budget(train, valid, None, 2.0, task=task, methods=["cegb"], baseline=False)


def test_a_selection_predicts_labels_and_probabilities_whatever_its_method(binary, tmp_path):
    """``predict`` means the sweep's class labels and ``predict_proba`` probabilities for every method a Selection
    can hold (issue 61, item 17: ``selection.model.predict`` gave labels or probabilities by method); the labels
    are those the validation accuracy was measured on, and a loaded Selection predicts the same."""
    (X, y), (Xv, yv), _ = binary
    labels = np.array(["no", "yes"], dtype=object)
    grid = {"cegb": [{"relative_tradeoff": 0.01}], "budgetrf": [{"tradeoff": 2.0, "n_estimators": 3, "trees": (3,)}],
            "staged_acquisition": [{"tradeoff": 0.2}], "greedy_miser": [{"relative_tradeoff": 0.0}]}
    frame = sweep(list(grid) + ["lightgbm"], (X, labels[y]), (Xv, labels[yv]), COSTS, task="binary", grid=grid,
                  params={"num_leaves": 8}, num_boost_round=30, baseline=False)
    for method in frame["method"].unique():
        points = frame[frame["method"] == method]
        chosen = select(points, float(points["cost"].max()))
        predicted = chosen.predict(Xv)
        assert set(predicted) <= {"no", "yes"}, method
        assert np.mean(predicted == labels[yv]) == pytest.approx(chosen.valid_quality, abs=1e-12), method
        proba = chosen.predict_proba(Xv)
        assert proba.shape == (len(Xv), 2) and np.allclose(proba.sum(axis=1), 1.0), method
        np.testing.assert_array_equal(labels[(proba[:, 1] > 0.5).astype(int)], predicted)
        if method in ("lightgbm", "cegb", "staged_acquisition", "greedy_miser"):  # what Selection.save holds
            chosen.save(tmp_path / method)
            loaded = Selection.load(tmp_path / method)
            assert (loaded.task, loaded.classes.tolist()) == ("binary", ["no", "yes"])
            np.testing.assert_array_equal(loaded.predict(Xv), predicted)
            np.testing.assert_allclose(loaded.predict_proba(Xv), proba, rtol=1e-12, atol=1e-15)
    regression = select(sweep("lightgbm", (X, X[:, 0]), (Xv, Xv[:, 0]), COSTS, task="regression",
                              num_boost_round=10, baseline=False), 100.0)
    np.testing.assert_array_equal(regression.predict(Xv), regression.model.predict(Xv))
    with pytest.raises(CEGBError, match="a regression model; use predict"):
        regression.predict_proba(Xv)
