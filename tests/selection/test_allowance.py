"""Each method's time in a sweep bounded by its allowance (issue 59, item 2): ``method_fits`` plain fits of a stage's
rows; a method that has spent it starts no other point, the points it fitted stay, and a warning names it."""

from __future__ import annotations

import itertools
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from lightgbm_cegb import AdaptiveAcquisitionClassifier, FeatureCosts, GreedyMiserClassifier
from lightgbm_cegb.core.errors import CEGBError, CEGBWarning
from lightgbm_cegb.selection import best_subset, fit_within_budget, registry, runner, sweep

COSTS = FeatureCosts(lazy=[1.0, 1.0, 5.0, 5.0, 20.0, 20.0])
GRID = {name: [{"relative_tradeoff": r} for r in (0.003, 0.01, 0.03, 0.1, 0.3, 0.9)]
        for name in ("cegb", "greedy_miser")}
FAST = {"task": "binary", "params": {"num_leaves": 8, "num_threads": 1}, "num_boost_round": 100,
        "progress": False, "refine": 2, "grid": GRID}
pytestmark = pytest.mark.filterwarnings("ignore::lightgbm_cegb.core.errors.RoundsWarning")
#: the seconds each method's point is said to take (the fake clock of ``timed``)
SECONDS = {"cegb": 1.0, "greedy_miser": 10.0}


@pytest.fixture(scope="module")
def binary():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(1500, 6))
    y = ((X[:, 0] + X[:, 2] + 0.5 * X[:, 4] + rng.normal(0, 0.5, 1500)) > 0).astype(int)
    return (X[:900], y[:900]), (X[900:1200], y[900:1200])


@pytest.fixture
def timed(monkeypatch):
    """Every point takes SECONDS of its method on a plain fit of 1 s, the floor 0, and preparing takes no time;
    yields the jobs started, by method, in order."""
    started = []
    run_point = runner.run_point

    def fake(method, context, state, params, stage):
        started.append((method.name, stage))
        rows, _, cut = run_point(method, context, state, params, stage)
        return rows, SECONDS.get(method.name, 1.0), cut

    monkeypatch.setattr(runner, "run_point", fake)
    monkeypatch.setattr(runner, "ALLOWANCE_FLOOR", 0.0)
    monkeypatch.setattr(runner.Allowance, "timed", classmethod(lambda cls, fits, context: cls(fits, 1.0)))
    monkeypatch.setattr(runner, "time", SimpleNamespace(perf_counter=lambda: 0.0))  # preparing: no time
    monkeypatch.setattr(registry, "time", SimpleNamespace(perf_counter=lambda: 0.0))  # no training is cut
    return started


@pytest.fixture
def rounds_clock(monkeypatch):
    """A training's clock that moves a second a round (each call of the cut's clock), a plain fit of 1 s, no floor,
    the points' own time none."""
    ticks = itertools.count()
    monkeypatch.setattr(registry, "time", SimpleNamespace(perf_counter=lambda: float(next(ticks))))
    monkeypatch.setattr(runner, "ALLOWANCE_FLOOR", 0.0)
    monkeypatch.setattr(runner.Allowance, "timed", classmethod(lambda cls, fits, context: cls(fits, 1.0)))
    monkeypatch.setattr(runner, "time", SimpleNamespace(perf_counter=lambda: 0.0))


def test_a_boosted_point_is_cut_inside_its_fit_where_its_allowance_ends(binary, rounds_clock):
    """Greedy Miser's and CEGB's points, their trainings a second a round on a fake clock, with 12 plain fits of 1 s:
    each cut after the round that passed 12 s (the 13th), the rounds trained kept (the same model as 13 rounds
    trained), the warning and frame.attrs["stopped"] saying so."""
    train, valid = binary
    options = {**FAST, "grid": {"greedy_miser": [{"relative_tradeoff": 0.0}], "cegb": [{"relative_tradeoff": 0.0}]},
               "refine": 0}
    with pytest.warns(CEGBWarning, match=r"stopped cegb on every training row after 0 s = 0 plain fits there \(0 "
                                         r"point\(s\) not fitted, trainings cut after \[13\] rounds\); greedy_miser"):
        frame = sweep(["greedy_miser", "cegb"], train, valid, COSTS, budget=6.0, baseline=False, method_fits=12,
                      **options)
    stopped = frame.attrs["stopped"]["rows"]
    assert {name: left["cut"] for name, left in stopped.items()} == {"cegb": [13], "greedy_miser": [13]}
    model = frame.loc[frame["method"] == "greedy_miser", "model"].iloc[0].model
    assert model.booster_.current_iteration() == model.best_iteration_ == 13
    same = GreedyMiserClassifier(feature_costs=COSTS, n_estimators=13, random_state=0).fit(*train, eval_set=[valid])
    np.testing.assert_array_equal(model.predict_proba(valid[0]), same.predict_proba(valid[0]))
    booster = frame.loc[frame["method"] == "cegb", "model"].iloc[0].model
    assert booster.current_iteration() == booster.best_iteration == 13


def test_the_adaptive_acquisitions_classifiers_are_cut_where_its_allowance_ends(binary, rounds_clock):
    """The adaptive acquisition's first point trains its classifiers (policy rounds 0 and 1), a second a round on a
    fake clock, with 12 plain fits of 1 s: round 0's classifier is cut after the 13th round (the same classifier as
    13 rounds trained), round 1's is not trained and its points are not fitted; round 0's points are, from the
    classifier fitted."""
    train, valid = binary
    grid = {"adaptive_acquisition": [{"relative_tradeoff": r, "policy_rounds": k} for k in (0, 1) for r in (0.1, 1.0)]}
    with pytest.warns(CEGBWarning, match=r"stopped adaptive_acquisition on every training row after 0 s = 0 plain "
                                         r"fits there \(2 point\(s\) not fitted, trainings cut after \[13\] rounds\)"):
        frame = sweep(["adaptive_acquisition"], train, valid, COSTS, budget=6.0, baseline=False, method_fits=12,
                      **{**FAST, "grid": grid, "refine": 0})
    assert frame.attrs["stopped"]["rows"]["adaptive_acquisition"]["cut"] == [13]
    assert sorted(frame["params"].map(lambda p: p["policy_rounds"])) == [0, 0]
    model = frame["model"].iloc[0].model
    assert model.classifier_.current_iteration() == 13
    same = AdaptiveAcquisitionClassifier(feature_costs=COSTS, random_state=0, n_estimators=13,
                                         early_stopping_rounds=model.early_stopping_rounds,
                                         n_jobs=1).fit(*train, eval_set=valid)
    trees = [m.classifier_.model_to_string().split("end of trees")[0] for m in (model, same)]
    assert trees[0] == trees[1]  # the trees to the bit (the parameters' footer says num_iterations)


def test_no_policy_round_is_trained_after_the_adaptive_acquisitions_time_is_spent(binary, rounds_clock):
    """Round 0's classifier trained whole (5 rounds, the cap; none cut) with 8 plain fits of 1 s: the clock then
    reads 5 s, and round 1 (the policy's visited states and a classifier on more rows) would take longer than the 3 s
    left, so it is not started and its points are not fitted."""
    train, valid = binary
    grid = {"adaptive_acquisition": [{"relative_tradeoff": r, "policy_rounds": k} for k in (0, 1) for r in (0.1, 1.0)]}
    with pytest.warns(CEGBWarning, match=r"stopped adaptive_acquisition .* \(2 point\(s\) not fitted\)"):
        frame = sweep(["adaptive_acquisition"], train, valid, COSTS, budget=6.0, baseline=False, method_fits=8,
                      **{**FAST, "grid": grid, "refine": 0, "num_boost_round": 5})
    assert frame.attrs["stopped"]["rows"]["adaptive_acquisition"]["cut"] == []
    assert sorted(frame["params"].map(lambda p: p["policy_rounds"])) == [0, 0]
    assert frame["model"].iloc[0].model.classifier_.current_iteration() == 5


def test_a_method_over_its_allowance_starts_no_other_point(binary, timed):
    train, valid = binary
    with pytest.warns(CEGBWarning, match=r"method_fits=25: stopped greedy_miser on every training row after 30 s = "
                                         r"30 plain fits there \(\d+ point\(s\) not fitted\)"):
        frame = sweep(["cegb", "greedy_miser"], train, valid, COSTS, budget=6.0, baseline=False, method_fits=25,
                      **FAST)
    # the third point took it to 30 >= 25: no fourth started, in the grid's walk or the refinement
    assert [name for name, _ in timed].count("greedy_miser") == 3
    stopped = frame.attrs["stopped"]
    assert list(stopped) == ["rows"] and list(stopped["rows"]) == ["greedy_miser"]
    assert stopped["rows"]["greedy_miser"]["seconds"] == 30.0 and stopped["rows"]["greedy_miser"]["plain_fits"] == 30
    assert stopped["rows"]["greedy_miser"]["not_fitted"] >= 1
    # its three points stay; CEGB (1 s a point) was never stopped
    assert frame.loc[frame["method"] == "greedy_miser", "stage"].isin(["grid", "refine"]).all()
    assert frame[frame["method"] == "greedy_miser"]["params"].map(str).nunique() >= 3
    assert [name for name, _ in timed].count("cegb") > 3 and frame.attrs["seconds"]["greedy_miser"] == 30.0


def test_without_a_limit_every_point_is_fitted(binary, timed):
    train, valid = binary
    with warnings.catch_warnings():
        warnings.filterwarnings("error", "sweep: method_fits")
        frame = sweep(["cegb", "greedy_miser"], train, valid, COSTS, budget=6.0, baseline=False, **FAST)
    assert [name for name, _ in timed].count("greedy_miser") > 3 and frame.attrs["stopped"] == {}


def test_the_screen_and_every_row_have_their_own_allowance(binary, timed):
    """The screen stops Greedy Miser on its subsample; the finalists' fits on every row have an allowance of
    their own."""
    train, valid = binary
    with pytest.warns(CEGBWarning, match="stopped greedy_miser on the screen's subsample after 20 s = 20 plain fits"):
        frame = sweep(["cegb", "greedy_miser"], train, valid, COSTS, budget=6.0, baseline=False, method_fits=15,
                      screen=400, **FAST)
    screened = [name for name, stage in timed if stage.startswith("screen")]
    assert screened.count("greedy_miser") == 2 and "screen" in frame.attrs["stopped"]
    rows = [name for name, stage in timed if not stage.startswith("screen")]
    assert rows.count("cegb") >= 1 and frame.attrs["screen"]["rows"] == 400


def test_fit_within_budget_limits_each_method_and_best_subset_does_not(binary, timed, monkeypatch):
    train, valid = binary
    with pytest.warns(CEGBWarning, match="method_fits=20: stopped greedy_miser on every training row after 20 s"):
        chosen = fit_within_budget(train, valid, COSTS, 6.0, methods=["cegb", "greedy_miser"], baseline=False,
                                   **FAST)
    assert [name for name, _ in timed].count("greedy_miser") == 2
    assert chosen.frontier.attrs["stopped"]["rows"]["greedy_miser"]["plain_fits"] == 20
    limits = []
    monkeypatch.setattr(runner.Execution, "limited", lambda self, fits, context, stage: limits.append(fits) or self)
    best_subset(train, valid, COSTS, 6.0, **{k: v for k, v in FAST.items() if k != "grid"})
    assert limits == [None]


@pytest.mark.parametrize("bad", [0, -1.0, "20", float("nan")])
def test_method_fits_is_checked(binary, bad):
    train, valid = binary
    with pytest.raises(CEGBError, match="method_fits"):
        sweep("cegb", train, valid, COSTS, budget=6.0, method_fits=bad, **FAST)


def test_the_floor_and_the_plain_fit_unit(monkeypatch):
    monkeypatch.setattr(runner, "ALLOWANCE_FLOOR", 30.0)  # the suite's conftest raises it
    allowance = runner.Allowance(20, 0.1)
    assert allowance.seconds == 30.0
    assert runner.Allowance(20, 3.0).seconds == 60.0
    allowance.used["cegb"] = 29.9
    assert allowance.allows("cegb")
    allowance.used["cegb"] = 30.0
    assert not allowance.allows("cegb")


@pytest.mark.parametrize("where", ["joblib", "dask"])
def test_in_parallel_a_method_over_its_allowance_starts_at_most_the_points_in_flight(binary, where, monkeypatch):
    """Two joblib processes or a one-thread Dask worker: Greedy Miser's first point takes it over its allowance, so
    of its six grid points at most those already started when the first came back are fitted (joblib: the first
    wave of n_jobs; Dask: the one running), and the rest are counted as not fitted."""
    run_point = runner.run_point

    def slow(method, context, state, params, stage):
        rows, _, cut = run_point(method, context, state, params, stage)
        return rows, 10.0, cut

    monkeypatch.setattr(runner, "run_point", slow)
    monkeypatch.setattr(runner, "ALLOWANCE_FLOOR", 0.0)
    monkeypatch.setattr(runner.Allowance, "timed", classmethod(lambda cls, fits, context: cls(fits, 1.0)))
    train, valid = binary
    kwargs = {**FAST, "grid": {"greedy_miser": GRID["greedy_miser"]}, "refine": 0}
    if where == "joblib":
        frame = _swept(train, valid, kwargs, n_jobs=2)
        in_flight = 2  # the first wave
    else:
        import distributed
        with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None,
                                      silence_logs=50) as cluster, distributed.Client(cluster) as client:
            frame = _swept(train, valid, kwargs, client=client)
        in_flight = 2  # the first, and the one the worker started before the first's result was read
    fitted = frame[frame["method"] == "greedy_miser"]["params"].map(lambda p: p["relative_tradeoff"]).nunique()
    left = frame.attrs["stopped"]["rows"]["greedy_miser"]["not_fitted"]
    assert 1 <= fitted <= in_flight and fitted + left == len(GRID["greedy_miser"])


def test_an_allowance_in_parallel_on_every_cpu_ends():
    """With an allowance the jobs run in waves of n_jobs jobs: n_jobs=-1 made every wave empty and the sweep never
    ended, n_jobs=None raised a TypeError. The waves are now as long as joblib's processes. In a child process, so
    that a hang fails the test as "timed out"."""
    from conftest import run_python

    result = run_python("""
import numpy as np
from lightgbm_cegb import FeatureCosts
from lightgbm_cegb.selection import sweep
rng = np.random.default_rng(4)
X = rng.normal(size=(600, 4))
y = (X[:, 0] + X[:, 1] > 0).astype(int)
for n_jobs in (-1, None):
    frame = sweep(["cegb"], (X[:400], y[:400]), (X[400:], y[400:]), FeatureCosts(lazy=[1.0, 1.0, 5.0, 5.0]),
                  task="binary", budget=3.0, baseline=False, method_fits=20, n_jobs=n_jobs, progress=False, refine=0,
                  grid={"cegb": [{"relative_tradeoff": r} for r in (0.01, 0.1, 0.3)]},
                  params={"num_leaves": 8, "num_threads": 1}, num_boost_round=30)
    print(n_jobs, sorted(float(r) for r in frame["params"].map(lambda p: p["relative_tradeoff"]).unique()))
""", timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split("\n")[:2] == ["-1 [0.01, 0.1, 0.3]", "None [0.01, 0.1, 0.3]"], result.stdout


def _swept(train, valid, kwargs, **execution):
    with pytest.warns(CEGBWarning, match="stopped greedy_miser on every training row"):
        return sweep(["greedy_miser"], train, valid, COSTS, budget=6.0, baseline=False, method_fits=5, focus=False,
                     **kwargs, **execution)


def test_past_its_allowance_a_knob_read_when_predicting_reads_only_the_models_it_fitted(binary, timed):
    """The staged acquisition's points share one model per order (its trade-off is read when predicting): past its
    allowance the points of the order fitted first still run (they train nothing), those of the other order would
    train a model and are not fitted."""
    SECONDS["staged_acquisition"] = 50.0  # its first point alone is past the allowance
    orders = ("importance", "search")
    grid = {"staged_acquisition": [{"relative_tradeoff": r, "order": order} for order in orders
                                   for r in (0.05, 0.3, 0.7)]}
    train, valid = binary
    try:
        with pytest.warns(CEGBWarning, match=r"stopped staged_acquisition on every training row after \d+ s"):
            frame = sweep(["staged_acquisition"], train, valid, COSTS, budget=6.0, baseline=False, method_fits=25,
                          **{**FAST, "grid": grid, "refine": 0})
    finally:
        del SECONDS["staged_acquisition"]
    points = frame[frame["method"] == "staged_acquisition"]
    assert set(points["order"]) == {"importance"} and points["relative_tradeoff"].nunique() == 3
    assert frame.attrs["stopped"]["rows"]["staged_acquisition"]["not_fitted"] == 3
    assert timed.count(("staged_acquisition", "grid")) == 6  # each started: the last three raised NeedsFit
