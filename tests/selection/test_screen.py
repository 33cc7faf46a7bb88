"""The screen of a sweep on many rows (issue 46): every method's grid swept on a subsample, only the leaders within
each budget fitted on every training row. Checked against a full sweep of the same subsample (the reference for
which methods lead and which points are refitted), and the subsample's properties; and the plain model a sweep's
methods share."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest

from lightgbm_cegb import FeatureCosts
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.selection import METHODS, fit_within_budget, refinement, runner, screen, sweep
from lightgbm_cegb.selection.registry import Rows
from lightgbm_cegb.selection.runner import frozen
from lightgbm_cegb.selection.screen import SCREEN_KEEP, SCREEN_SETTINGS, finalist_points

COSTS = FeatureCosts(lazy=[1.0, 1.0, 5.0, 5.0, 20.0, 20.0])
FAST = {"task": "binary", "params": {"num_leaves": 8, "num_threads": 1}, "num_boost_round": 150,
        "progress": False}
NAMES = ["lightgbm", "cegb", "greedy_miser", "early_exit"]
BUDGETS = [4.0, 12.0]


@pytest.fixture(scope="module")
def binary():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(3000, 6))
    y = ((X[:, 0] + X[:, 2] + 0.5 * X[:, 4] + rng.normal(0, 0.5, 3000)) > 0).astype(int)
    return (X[:2400], y[:2400]), (X[2400:], y[2400:])


@pytest.fixture(scope="module")
def screened(binary):
    """A sweep screened on 600 of its 2,400 training rows, and the full sweep of that subsample without the baseline
    (the reference: the screen leaves the baseline to every row)."""
    train, valid = binary
    sub = Rows(*train).subsample(600, "binary")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = sweep(NAMES, train, valid, COSTS, budget=BUDGETS, screen=600, **FAST)
        reference = sweep(NAMES, (sub.X, sub.y), valid, COSTS, budget=BUDGETS, baseline=False, **FAST)
    return frame, reference


def _params(frame, stage):
    return {(method, frozen({k: v for k, v in params.items() if k != "trees"}))
            for method, params, s in zip(frame["method"], frame["params"], frame["stage"]) if s == stage}


def test_the_leaders_within_each_budget_on_the_subsample_are_refitted_on_every_row(binary, screened):
    train, valid = binary
    frame, reference = screened
    sign = 1.0  # accuracy
    finalists = frame.attrs["screen"]["finalists"]
    assert frame.attrs["screen"]["rows"] == 600 and sorted(finalists) == BUDGETS
    # every method's time: the screened ones' on the subsample, the baseline's on every row
    assert sorted(frame.attrs["seconds"]) == sorted(NAMES + ["cheap_subset"])
    assert all(seconds > 0 for seconds in frame.attrs["seconds"].values())
    expected_points = set()
    for budget in BUDGETS:
        within = reference[reference["cost"] <= budget]
        best = within.groupby("method")["quality"].max().sort_values(ascending=False, kind="stable")
        assert finalists[budget] == list(best.index[:SCREEN_KEEP])
        for name in finalists[budget]:
            rows = [dict(row, stage="screen" if row["stage"] == "grid" else row["stage"])
                    for row in reference[reference["method"] == name].to_dict("records")]
            expected_points |= {(name, frozen(p))
                                for p in finalist_points(METHODS[name], rows, budget, sign)}
    # the refitted points are the reference's choices, with their record of the raw trade-off dropped, and the
    # baseline's whole path on every row (never screened out)
    refitted = {(m, tuple(kv for kv in p if kv[0] not in ("cegb_tradeoff", "tradeoff")))
                for m, p in _params(frame, "finalist")}
    baseline = frame[(frame["method"] == "cheap_subset") & (frame["stage"] == "finalist")]
    path = sweep(["cheap_subset"], train, valid, COSTS, budget=BUDGETS, baseline=False, screen=False, **FAST)
    def measured(rows):
        return {(frozen(p), q, c) for p, q, c in zip(rows["params"], rows["quality"], rows["cost"])}
    assert len(path) and measured(path) <= measured(baseline)
    assert refitted - _params(path, "grid") == expected_points - _params(path, "grid")
    assert expected_points <= refitted
    # no method but the finalists and the baseline was fitted on every row, and no subsample point is in the frame
    kept = {name for kept in finalists.values() for name in kept} | {"cheap_subset"}
    assert set(frame["method"]) <= kept
    assert frame.attrs["screen"]["left_out"] == [name for name in NAMES + ["cheap_subset"] if name not in kept]
    assert set(frame["stage"]) <= {"finalist", "refine"}


def test_the_screen_refines_the_contenders_within_each_budget_only(binary, monkeypatch):
    """After the screen's grid, each budget's SCREEN_CONTENDERS best methods within it (and those with no point
    within it) are refined there; the others keep their grid points."""
    from lightgbm_cegb.selection.refinement import CONTENDERS, contenders
    from lightgbm_cegb.selection.screen import SCREEN_CONTENDERS
    assert SCREEN_CONTENDERS == SCREEN_KEEP + 1 == CONTENDERS
    rows = [{"method": m, "quality": q, "cost": c} for m, q, c in [
        ("a", 0.9, 5.0), ("a", 0.95, 20.0), ("b", 0.8, 3.0), ("c", 0.85, 9.0), ("d", 0.7, 1.0), ("e", 0.99, 50.0)]]
    assert contenders(rows, 10.0, 1.0) == ["a", "c", "b", "e"]  # d trails; e has no point within 10
    assert contenders(rows, 10.0, -1.0) == ["d", "b", "c", "e"]  # smaller is better
    assert contenders(rows, 10.0, 1.0, 1) == ["a", "e"]
    refined = []
    refine = refinement.refine_around

    def recorded(rows, pairs, *args, **kwargs):
        if kwargs.get("stage") == "screen refine":
            refined.append((list(rows), set(pairs)))
        return refine(rows, pairs, *args, **kwargs)

    monkeypatch.setattr(refinement, "refine_around", recorded)
    train, valid = binary
    names = NAMES + ["budget_prune", "staged_acquisition"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sweep(names, train, valid, COSTS, budget=12.0, screen=600, **FAST)
    (grid_rows, pairs), = refined
    expected = {(name, 12.0) for name in contenders(grid_rows, 12.0, 1.0) if METHODS[name].knob is not None}
    assert pairs == expected
    assert {name for name in names if METHODS[name].knob is not None} - {name for name, _ in pairs}  # not vacuous


def test_a_finalists_points_bracket_its_best_along_the_knob():
    method = METHODS["cegb"]
    rows = [{"method": "cegb", "quality": q, "cost": c, "stage": "screen",
             "params": {"relative_tradeoff": r, "cegb_tradeoff": 10 * r, "trees": 50}}
            for r, q, c in [(0.0, 0.9, 30.0), (0.1, 0.88, 20.0), (0.3, 0.85, 9.0), (0.5, 0.8, 5.0)]]
    rows.append({"method": "cegb", "quality": 0.86, "cost": 9.5, "stage": "screen refine",
                 "params": {"relative_tradeoff": 0.2, "cegb_tradeoff": 2.0, "trees": 50}})
    points = finalist_points(method, rows, 10.0, 1.0)
    assert points == [{"relative_tradeoff": 0.2}, {"relative_tradeoff": 0.1}, {"relative_tradeoff": 0.3}]
    # nothing within the budget: the cheapest point and its neighbour
    assert finalist_points(method, rows, 1.0, 1.0) == [{"relative_tradeoff": 0.5}, {"relative_tradeoff": 0.3}]


def test_a_finalists_two_best_settings_are_refitted():
    """The staged acquisition's caps are settings of its other parameters: the best point of each of the
    SCREEN_SETTINGS best caps within the budget, with every grid value of its knob in that cap (a knob read at
    prediction costs no fit per value; a fitted knob's finalists take its grid neighbours only, as above)."""
    assert METHODS["staged_acquisition"].knob.read_at_predict and not METHODS["cegb"].knob.read_at_predict
    assert SCREEN_SETTINGS == 2
    method = METHODS["staged_acquisition"]
    rows = [{"method": "staged_acquisition", "quality": q, "cost": c, "stage": "screen",
             "params": {"relative_tradeoff": r, "tradeoff": r / 2, **({} if cap is None else {"max_cost": cap})}}
            for cap, r, q, c in [(None, 0.1, 0.95, 30.0), (None, 0.2, 0.93, 12.0), (None, 0.3, 0.9, 8.0),
                                 (5.0, 0.1, 0.91, 9.0), (5.0, 0.2, 0.9, 7.0),
                                 (9.0, 0.1, 0.92, 11.0), (9.0, 0.2, 0.89, 9.5), (9.0, 0.3, 0.87, 8.0)]]
    assert finalist_points(method, rows, 10.0, 1.0) == [
        {"relative_tradeoff": 0.1, "max_cost": 5.0}, {"relative_tradeoff": 0.2, "max_cost": 5.0},
        {"relative_tradeoff": 0.3}, {"relative_tradeoff": 0.1}, {"relative_tradeoff": 0.2}]


def test_after_the_screen_a_knob_read_at_prediction_is_refined_every_round(binary, monkeypatch):
    """On every row, a fitted knob (CEGB's) is refined for SCREEN_REFINE rounds, the staged acquisition's (one fit,
    its trade-off read when predicting) for every round of ``refine``."""
    from lightgbm_cegb.selection.screen import SCREEN_REFINE
    rounds = []
    execute = runner.execute
    monkeypatch.setattr(runner, "execute", lambda jobs, *args, **kwargs: rounds.append(
        {job[0].name for job in jobs if job[3] == "refine"}) or execute(jobs, *args, **kwargs))
    train, valid = binary
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = sweep(["cegb", "staged_acquisition"], train, valid, COSTS, budget=6.0, screen=600, refine=5,
                      focus=False, baseline=False, **FAST)
    assert sorted(frame.attrs["screen"]["finalists"][6.0]) == ["cegb", "staged_acquisition"]
    refined = [names for names in rounds if names]
    assert sum("cegb" in names for names in refined) == SCREEN_REFINE < 5
    assert sum("staged_acquisition" in names for names in refined) > SCREEN_REFINE


@pytest.mark.parametrize("task", ["binary", "multiclass", "regression", "ranking"])
def test_the_subsample_keeps_order_classes_and_whole_queries(task):
    rng = np.random.default_rng(1)
    group = rng.integers(1, 30, 200) if task == "ranking" else None
    n = int(group.sum()) if group is not None else 5000
    y = rng.choice(5 if task == "multiclass" else 2, n, p=[0.5, 0.3, 0.1, 0.07, 0.03] if task == "multiclass"
                   else [0.9, 0.1]) if task != "regression" else rng.normal(size=n)
    X = np.arange(n, dtype=float)[:, None]
    sub = Rows(X, y, group).subsample(1000, task)
    index = sub.X[:, 0].astype(int)
    assert np.all(np.diff(index) > 0) and np.array_equal(sub.y, y[index])
    if task == "ranking":
        starts = np.concatenate([[0], np.cumsum(group)[:-1]])
        assert sub.group.sum() == len(index) >= 1000
        taken = {int(q) for q in np.searchsorted(starts, index, side="right") - 1}
        assert sorted(sub.group.tolist()) == sorted(group[sorted(taken)].tolist())
    else:
        assert abs(len(index) - 1000) <= 5
    if task in ("binary", "multiclass"):
        assert set(np.unique(sub.y)) == set(np.unique(y))
        for label in np.unique(y):
            assert abs(np.mean(sub.y == label) - np.mean(y == label)) < 0.01


def test_the_screen_is_on_by_default_for_many_rows_only(binary, monkeypatch, caplog):
    train, valid = binary
    monkeypatch.setattr(screen, "SCREEN_FROM", 2000)
    monkeypatch.setattr(screen, "SCREEN_ROWS", 500)
    with warnings.catch_warnings(), caplog.at_level(logging.INFO, "lightgbm_cegb.selection"):
        warnings.simplefilter("ignore")
        chosen = fit_within_budget(train, valid, COSTS, 6.0, methods=["lightgbm", "cegb"], **FAST)
        plain = sweep(["cegb"], train, valid, COSTS, **FAST)  # no budget: no screen
    assert chosen.frontier.attrs["screen"]["rows"] == 500 and "screen" not in plain.attrs
    assert "screening on 500 of the 2400 training rows" in caplog.text
    assert "budget 6: the screen keeps" in caplog.text
    small = (train[0][:1500], train[1][:1500])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert "screen" not in sweep(["cegb"], small, valid, COSTS, budget=6.0, **FAST).attrs
        # a screen of as many rows as there are is no screen; False: none
        assert "screen" not in sweep(["cegb"], small, valid, COSTS, budget=6.0, screen=1500, **FAST).attrs
        assert "screen" not in sweep(["cegb"], train, valid, COSTS, budget=6.0, screen=False, **FAST).attrs


def test_the_screen_is_on_by_default_for_many_cells_from_twice_its_rows(binary, monkeypatch):
    """Below SCREEN_FROM rows, a sweep screens when its rows x columns x trees per round reach SCREEN_CELLS and it
    has twice the screen's rows; a multiclass task's classes count."""
    rows, cells = screen.SCREEN_FROM - 1, screen.SCREEN_CELLS
    assert screen.screen_size(None, rows, (5.0,), None, cells) == screen.SCREEN_ROWS
    assert screen.screen_size(None, rows, (5.0,), None, cells - 1) == 0
    assert screen.screen_size(None, 2 * screen.SCREEN_ROWS - 1, (5.0,), None, 10 * cells) == 0
    assert screen.screen_size(None, 2 * screen.SCREEN_ROWS, (5.0,), None, cells) == screen.SCREEN_ROWS
    assert screen.screen_size(None, rows, (), None, cells) == 0  # no budget: nothing to screen for
    train, valid = binary
    monkeypatch.setattr(screen, "SCREEN_ROWS", 500)
    monkeypatch.setattr(screen, "SCREEN_CELLS", 2400 * 6)
    three = [np.digitize(X[:, 0], [-0.5, 0.5]) for X in (train[0], valid[0])]  # 3 classes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert sweep(["cegb"], train, valid, COSTS, budget=6.0, **FAST).attrs["screen"]["rows"] == 500
        monkeypatch.setattr(screen, "SCREEN_CELLS", 2400 * 6 + 1)
        assert "screen" not in sweep(["cegb"], train, valid, COSTS, budget=6.0, **FAST).attrs
        multiclass = sweep(["cegb"], (train[0], three[0]), (valid[0], three[1]), COSTS, budget=6.0,
                           **{**FAST, "task": "multiclass"})
    assert multiclass.attrs["screen"]["rows"] == 500  # 3 classes: 3 x 2,400 x 6 cells


def test_bad_screens_are_refused(binary):
    train, valid = binary
    with pytest.raises(CEGBError, match="screen=True: a screen chooses .* needs budget="):
        sweep(["cegb"], train, valid, COSTS, screen=True, **FAST)
    with pytest.raises(CEGBError, match="screen should be"):
        sweep(["cegb"], train, valid, COSTS, budget=5.0, screen=1, **FAST)
    with pytest.raises(CEGBError, match="screen should be"):
        sweep(["cegb"], train, valid, COSTS, budget=5.0, screen=2.5, **FAST)


def test_a_cheap_subset_of_named_features_is_the_paths_step(binary, monkeypatch):
    train, valid = binary
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = sweep(["cheap_subset"], train, valid, COSTS, baseline=False, **FAST)
        features = path["features"].iloc[-1]
        from lightgbm_cegb.selection import baseline
        monkeypatch.setattr(baseline, "_search", None)  # a named subset (a finalist) runs no search
        alone = sweep(["cheap_subset"], train, valid, COSTS, baseline=False,
                      grid={"cheap_subset": [{"features": features}]}, **FAST)
    step = path[path["features"] == features]
    assert list(alone["quality"]) == list(step["quality"]) and list(alone["cost"]) == list(step["cost"])
    X = valid[0]
    np.testing.assert_array_equal(alone["model"].iloc[-1].predict(X), step["model"].iloc[-1].predict(X))
    with pytest.raises(CEGBError, match="features should be a non-empty list of unit names"):
        sweep(["cheap_subset"], train, valid, COSTS, baseline=False, grid={"cheap_subset": [{"features": ["x"]}]},
              **FAST)


def test_the_methods_of_a_sweep_share_one_plain_model(binary, monkeypatch):
    """lightgbm and early_exit start from the same plain model: one training of it per sweep (the cheap subset's
    search trains its subsets apart)."""
    from lightgbm_cegb.selection import points
    plain_trainings = []
    train_lightgbm = points.train_lightgbm

    def counted(context, params, callbacks=(), X=None):
        if X is None and params == points.lightgbm_params(context):
            plain_trainings.append(1)
        return train_lightgbm(context, params, callbacks, X)

    monkeypatch.setattr(points, "train_lightgbm", counted)
    train, valid = binary
    frame = sweep(["lightgbm", "early_exit"], train, valid, COSTS, grid={"early_exit": [{"threshold": 0.9}]}, **FAST)
    assert len(plain_trainings) == 1 and set(frame["method"]) == {"lightgbm", "early_exit", "cheap_subset"}
    plain = frame[frame["method"] == "lightgbm"]["model"].iloc[-1].model
    assert frame[frame["method"] == "early_exit"]["model"].iloc[0].model.booster is plain


def test_the_screens_acquisition_classifier_makes_the_full_sweeps_copies(binary, monkeypatch):
    """n_masks="auto" keeps rows x copies within a number of cells, so a subsample would get more copies per row
    than the sweep's every row does: the screen's adaptive acquisition makes the copies of the full sweep's rows."""
    from lightgbm_cegb.methods import acquisition
    made = []
    fit = acquisition.AdaptiveAcquisitionClassifier.fit_rounds  # what fit and the sweep train by

    def recorded(model, X, y, *args, **kwargs):
        made.append((len(y), model.n_masks, model._copies(len(y), X.shape[1])))
        return fit(model, X, y, *args, **kwargs)

    monkeypatch.setattr(acquisition.AdaptiveAcquisitionClassifier, "fit_rounds", recorded)
    monkeypatch.setattr(acquisition, "_AUTO_CELLS", 2400 * 6 * 2)  # the sweep's 2,400 rows: 2 copies; 600 rows: 8
    monkeypatch.setattr(screen, "SCREEN_FROM", 2000)
    train, valid = binary
    grid = {"adaptive_acquisition": [{"relative_tradeoff": 0.1, "policy_rounds": 0}]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sweep(["adaptive_acquisition"], train, valid, COSTS, budget=6.0, screen=600, grid=grid, baseline=False,
              **FAST)
    screened = [m for m in made if m[0] == 600]
    assert screened and all(masks == 2 and copies == 2 for _, masks, copies in screened), made
    assert acquisition.auto_masks(600, 6) == 8  # what "auto" would have made of the subsample


def test_the_refinement_walks_to_the_cheap_end_while_only_prefixes_are_within_the_budget():
    """CEGB's finalists fitted at relative trade-offs 0.01 and 0.02 on every row cost 28 and 45 per row, their
    prefixes 12 to 19: within budget 20 only prefixes, the bisection between 0.01 and 0.02 stays away from the
    budget, so the midpoint towards the cheap end is fitted too; once a whole model is within, the bisection
    alone."""
    from lightgbm_cegb.selection.refinement import refinements
    method = METHODS["cegb"]
    knob = method.knob
    rows = [{"method": "cegb", "params": {"relative_tradeoff": r, "trees": k}, "quality": q, "cost": c}
            for r, k, q, c in [(0.01, 100, 0.90, 45.0), (0.01, 5, 0.86, 19.0), (0.02, 100, 0.89, 28.0),
                               (0.02, 10, 0.87, 18.0)]]
    targets = sorted(point["relative_tradeoff"] for point in refinements(method, rows, 20.0, 1.0))
    assert targets == sorted([knob.between(0.01, 0.02), knob.between(0.02, knob.cheap_end)])
    rows.append({"method": "cegb", "params": {"relative_tradeoff": 0.07, "trees": 100}, "quality": 0.875,
                 "cost": 19.5})
    targets = sorted(point["relative_tradeoff"] for point in refinements(method, rows, 20.0, 1.0))
    assert targets == [knob.between(0.02, 0.07)]  # the best within (0.07) and its neighbour
