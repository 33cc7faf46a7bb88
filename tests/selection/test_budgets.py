"""One sweep, every budget (issue 46): sweep and fit_within_budget for several budgets at once, the longest prefix
within each budget, going on from a frontier (refined only where a budget falls in a gap, and said so), and the
focused refinement against the exhaustive one."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest

from lightgbm_cegb import FeatureCosts, prediction_cost
from lightgbm_cegb.core.errors import BudgetWarning, CEGBError
from lightgbm_cegb.selection import fit_within_budget, select, sweep

COSTS = FeatureCosts(lazy=[1.0, 1.0, 5.0, 5.0, 20.0, 20.0])
FAST = {"task": "binary", "params": {"num_leaves": 8, "num_threads": 1}, "num_boost_round": 150,
        "progress": False}
METHODS = ["lightgbm", "cegb", "greedy_miser"]


@pytest.fixture(scope="module")
def binary():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(1500, 6))
    y = ((X[:, 0] + X[:, 2] + 0.5 * X[:, 4] + rng.normal(0, 0.5, 1500)) > 0).astype(int)
    return (X[:900], y[:900]), (X[900:1200], y[900:1200]), (X[1200:], y[1200:])


@pytest.fixture(scope="module")
def several(binary):
    """fit_within_budget for three budgets (given out of order) from one sweep."""
    train, valid, test = binary
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_within_budget(train, valid, COSTS, [12.0, 3.0, 6.0], methods=METHODS, test=test, **FAST)


def test_one_sweep_answers_each_budget(several, binary):
    assert [round(s.valid_cost, 9) <= b for s, b in zip(several, [12.0, 3.0, 6.0])] == [True] * 3
    frame = several[0].frontier
    assert all(s.frontier is frame for s in several) and frame.attrs["budget"] == [3.0, 6.0, 12.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", BudgetWarning)  # swept for each: no gap warning
        for chosen, budget in zip(several, [12.0, 3.0, 6.0]):
            again = select(frame, budget, binary[2])
            assert (again.method, again.params, again.valid_quality, again.test_quality) == \
                (chosen.method, chosen.params, chosen.valid_quality, chosen.test_quality)
    assert several[1].valid_quality <= several[2].valid_quality <= several[0].valid_quality
    # the knobs were refined around every budget: refinement points on both sides of the middle budget
    refined = frame[(frame["stage"] == "refine") & (frame["method"] == "cegb")]
    assert len(refined) and refined["cost"].min() < 6.0 < refined["cost"].max()


def test_each_boosted_model_has_its_longest_prefix_within_each_budget(several, binary):
    """By an independent loop over the prefixes of each cegb model."""
    frame, valid_X = several[0].frontier, binary[1][0]
    models = frame[frame["method"] == "cegb"].groupby("relative_tradeoff")
    for _, points in list(models)[:4]:
        booster = points["model"].iloc[0].model
        best, trees = booster.best_iteration, set(points["trees"])
        costs = [prediction_cost(booster, valid_X, COSTS, num_iteration=k).mean for k in range(1, best + 1)]
        for budget in (3.0, 6.0, 12.0):
            fits = [k for k, cost in enumerate(costs, 1) if cost <= budget * (1 + 1e-12)]
            if fits:
                assert fits[-1] in trees, (budget, fits[-1], sorted(trees))


def test_going_on_from_a_frontier_refines_only_in_a_gap(several, binary, caplog):
    train, valid, _ = binary
    frame = several[0].frontier
    gap = [b for b in np.linspace(1.5, 19.5, 37) if b not in (3.0, 6.0, 12.0)
           and select_warns(frame, b)]
    close = [b for b in np.linspace(1.5, 19.5, 37) if not select_warns(frame, b) and b not in (3.0, 6.0, 12.0)
             and (frame["cost"] <= b).any()]
    assert gap and close, "the case needs a budget in a gap and one close above a point"
    with caplog.at_level(logging.INFO, logger="lightgbm_cegb.selection"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = sweep(METHODS, train, valid, COSTS, budget=[6.0, close[0]], frontier=frame, **FAST)
    assert len(again) == len(frame) and again.attrs["refined"] == []  # nothing fitted
    assert again.attrs["seconds"] == frame.attrs["seconds"]  # the frontier's; nothing prepared or fitted
    assert "budget 6: the frontier given was swept for it" in caplog.text
    assert f"budget {close[0]:g}: the frontier given has points close below it, no refinement" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="lightgbm_cegb.selection"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        refined = sweep(METHODS, train, valid, COSTS, budget=gap[0], frontier=frame, **FAST)
    assert f"budget {gap[0]:g} falls in a gap of the frontier given: refining the knobs there" in caplog.text
    assert refined.attrs["refined"] == [gap[0]] and refined.attrs["budget"] == sorted([3.0, 6.0, 12.0, gap[0]])
    new = refined.iloc[len(frame):]
    assert len(new) and (new["stage"] == "refine").all()  # no grid fitted again
    assert all(refined.attrs["seconds"][m] > frame.attrs["seconds"][m] for m in set(new["method"]))
    assert refined.iloc[:len(frame)]["model"].tolist() == frame["model"].tolist()  # the frontier's points kept
    assert select(refined, gap[0]).valid_quality >= select_quietly(frame, gap[0]).valid_quality
    with warnings.catch_warnings():
        warnings.simplefilter("error", BudgetWarning)
        select(refined, gap[0])  # swept for it now


def select_warns(frame, budget) -> bool:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        select(frame, budget)
    return any(issubclass(w.category, BudgetWarning) for w in caught)


def select_quietly(frame, budget):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BudgetWarning)
        return select(frame, budget)


def test_a_frontier_of_another_sweep_is_refused(several, binary):
    train, valid, _ = binary
    frame = several[0].frontier
    other = "logloss" if frame.attrs["metric"] != "logloss" else "auc"
    with pytest.raises(CEGBError, match=rf"frontier: swept with metric '{frame.attrs['metric']}', this sweep has "
                                        rf"'{other}'"):
        sweep(METHODS, train, valid, COSTS, budget=5.0, frontier=frame, metric=other, **FAST)
    with pytest.raises(CEGBError, match=r"frontier: swept with costs .*, this sweep has"):
        sweep(METHODS, train, valid, FeatureCosts(lazy=[1.0] * 6), budget=5.0, frontier=frame, **FAST)
    with pytest.raises(CEGBError, match=r"frontier should be a frame that sweep returned, got dict"):
        sweep(METHODS, train, valid, COSTS, budget=5.0, frontier={}, **FAST)


@pytest.mark.parametrize("budget", [[], [1.0, -1.0], [[1.0]], "5", [float("nan")], {"a": 1}])
def test_bad_budgets(binary, budget):
    train, valid, _ = binary
    with pytest.raises(CEGBError, match="budget should be"):
        sweep("lightgbm", train, valid, COSTS, budget=budget, **FAST)
    with pytest.raises(CEGBError, match="budget should be"):
        fit_within_budget(train, valid, COSTS, budget, methods=["lightgbm"], **FAST)


def test_focus_chooses_as_the_exhaustive_refinement_does(binary):
    """The focused refinement fits fewer points and chooses what the exhaustive one chooses (within 0.002)."""
    train, valid, _ = binary
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        focused = sweep(METHODS, train, valid, COSTS, budget=[4.0, 8.0], **FAST)
        exhaustive = sweep(METHODS, train, valid, COSTS, budget=[4.0, 8.0], focus=False, **FAST)
    assert len(focused) < len(exhaustive)
    for budget in (4.0, 8.0):
        assert select(focused, budget).valid_quality >= select(exhaustive, budget).valid_quality - 0.002
    with pytest.raises(CEGBError, match="focus should be True or False, got 'yes'"):
        sweep("lightgbm", train, valid, COSTS, budget=4.0, focus="yes", **FAST)


def test_a_focused_sweep_walks_each_knob_from_its_cheap_end(binary, caplog):
    """With a budget, CEGB's and Greedy Miser's grids are fitted from the knob's cheap end, and the dearer values are
    left after two in a row whose whole model costs more than the budget and improve on nothing within it (logged);
    what is fitted does not depend on n_jobs; focus=False fits every grid value."""
    from lightgbm_cegb.selection.greedy_family import GREEDY_MISER_RELATIVE_TRADEOFFS
    from lightgbm_cegb.selection.lightgbm_family import CEGB_RELATIVE_TRADEOFFS
    from lightgbm_cegb.selection.runner import WALK_PATIENCE
    train, valid, _ = binary
    budget = 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with caplog.at_level(logging.INFO, logger="lightgbm_cegb.selection"):
            walked = sweep(["cegb", "greedy_miser"], train, valid, COSTS, budget=budget, refine=0, baseline=False,
                           **FAST)
        parallel = sweep(["cegb", "greedy_miser"], train, valid, COSTS, budget=budget, refine=0, baseline=False,
                         **{**FAST, "n_jobs": 2})
        every = sweep(["cegb", "greedy_miser"], train, valid, COSTS, budget=budget, refine=0, baseline=False,
                      focus=False, **FAST)
    stopped = 0
    for name, grid in (("cegb", CEGB_RELATIVE_TRADEOFFS), ("greedy_miser", GREEDY_MISER_RELATIVE_TRADEOFFS)):
        order = sorted(grid, key=lambda value: abs(value - 1.0))  # from the cheap end
        points = walked[walked["method"] == name]
        fitted = order[:len(set(points["relative_tradeoff"]))]  # the frame keeps the grid's order
        assert set(points["relative_tradeoff"]) == set(fitted)
        assert sorted(set(every[every["method"] == name]["relative_tradeoff"])) == sorted(grid)
        if len(fitted) < len(grid):
            stopped += 1
            assert f"{name} (defaults) grid: from relative_tradeoff={order[len(fitted)]:g} on" in caplog.text
            best = -np.inf
            idle = []
            for value in fitted:  # the rule, replayed from the frame
                rows = points[points["relative_tradeoff"] == value]
                whole = rows.loc[rows["trees"].fillna(np.inf).idxmax(), "cost"]
                within = rows[rows["cost"] <= budget]["quality"].max() if (rows["cost"] <= budget).any() else -np.inf
                idle = idle + [value] if whole > budget and within <= best else []
                best = max(best, within)
            assert len(idle) == WALK_PATIENCE and idle == fitted[-WALK_PATIENCE:]
    assert stopped  # the budget is far below the dear models' costs: some walk stops
    columns = ["method", "relative_tradeoff", "quality", "cost"]
    assert parallel[columns].equals(walked[columns])


def test_a_focused_sweep_refines_the_contenders_within_the_budget_only(binary, caplog):
    """Unscreened too, only the CONTENDERS methods of the best points within the budget (and those with none within
    it, and those whose knob is read at prediction: Early Exit's) are refined there, the others named on the log;
    focus=False refines them all."""
    from lightgbm_cegb.selection import METHODS as REGISTERED
    from lightgbm_cegb.selection.refinement import CONTENDERS, contenders
    train, valid, _ = binary
    names = ["cegb", "greedy_miser", "budget_prune", "early_exit"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with caplog.at_level(logging.INFO, logger="lightgbm_cegb.selection"):
            focused = sweep(names, train, valid, COSTS, budget=6.0, **FAST)
        exhaustive = sweep(names, train, valid, COSTS, budget=6.0, focus=False, **FAST)
    grid = focused[focused["stage"] == "grid"].to_dict("records")
    ahead = contenders(grid, 6.0, 1.0)
    free = [name for name in names if REGISTERED[name].knob.read_at_predict]
    behind = [name for name in names if name not in ahead and name not in free]
    assert free == ["early_exit"] and len(ahead) >= CONTENDERS and behind  # four methods and the baseline
    assert set(focused[focused["stage"] == "refine"]["method"]) <= set(ahead) | set(free)
    assert f"budget 6: {', '.join(sorted(behind))} not refined" in caplog.text
    assert set(behind) & set(exhaustive[exhaustive["stage"] == "refine"]["method"])


@pytest.mark.parametrize("trailing, pace, rounds", [("greedy_miser", 0.001, 1), ("greedy_miser", 0.05, 4),
                                                     ("staged_acquisition", 0.001, 4)])
def test_a_trailing_method_is_refined_while_it_can_catch_the_leader(monkeypatch, trailing, pace, rounds):
    """With focus, a trailing method whose round gains too little to catch the leader in the rounds left (at that
    pace) is dropped after it when it trails far; one gaining enough goes on, and so does one whose knob is read at
    prediction (no fit) while it gains at all (fits replaced by a rule)."""
    from lightgbm_cegb.selection import refinement, runner
    fitted = []

    def fake(jobs, context, *execution, flat=True):
        results = []
        for method, _, point, stage in jobs:
            fitted.append(method.name)
            quality = 0.9 if method.name == "cegb" else min(0.7 + pace * fitted.count(method.name), 0.899)
            results.append([{"method": method.name, "quality": quality, "cost": 5.0, "params": dict(point),
                             "stage": stage}])
        return results

    monkeypatch.setattr(runner, "execute", fake)
    rows = [{"method": name, "quality": quality, "cost": cost, "params": {"relative_tradeoff": value},
             "stage": "grid"} for name, value, quality, cost in [
        ("cegb", 0.1, 0.9, 5.0), ("cegb", 0.5, 0.5, 1.0), ("cegb", 0.01, 0.95, 20.0),
        (trailing, 0.1, 0.7, 5.0), (trailing, 0.5, 0.4, 1.0), (trailing, 0.01, 0.93, 20.0)]]
    pairs = {("cegb", 6.0), (trailing, 6.0)}
    refinement.refine_around(rows, pairs, {"cegb": None, trailing: None}, None, 4, True, 1.0, ())
    miser = fitted.count(trailing)
    assert miser == 2 * rounds  # two midpoints a round
