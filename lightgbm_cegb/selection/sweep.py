"""sweep(): every registered method's grid fitted and measured on the same validation rows.

Its stages have their modules: the jobs (``selection.runner``), the refinement around each budget
(``selection.refinement``) and the screen on a subsample (``selection.screen``).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from lightgbm_cegb.base import COSTS
from lightgbm_cegb.core.costs import resolve_costs
from lightgbm_cegb.core.errors import CEGBError, CEGBWarning, RoundsWarning
from lightgbm_cegb.core.parallel import N_JOBS
from lightgbm_cegb.core.validation import (
    CheckedElsewhere,
    Flag,
    NoneOr,
    Number,
    OneOf,
    Satisfies,
    caller_stacklevel,
    check_column_order,
    validated,
)
from lightgbm_cegb.selection import refinement, runner
from lightgbm_cegb.selection import screen as screening
from lightgbm_cegb.selection.metrics import Metric, get_metric
from lightgbm_cegb.selection.refinement import BUDGETS, go_on_from, swept_budgets
from lightgbm_cegb.selection.registry import METHODS, TASKS, Context, Rows, class_labels, encoded
from lightgbm_cegb.selection.runner import grid_jobs, prepared

#: The baseline every sweep includes unless ``baseline=False`` (lightgbm_cegb.selection.baseline)
BASELINE = "cheap_subset"
#: num_boost_round's default: a cap for early stopping that does not bind on the bundled data sets (a point that
#: reaches it while still improving is reported by a RoundsWarning)
NUM_BOOST_ROUND = 5000
#: the patience of early stopping on the validation rows (``early_stopping_rounds``)
EARLY_STOPPING_ROUNDS = 20


def _show_progress() -> bool:
    """The progress bar's default: on a terminal, or in a Jupyter notebook (whose stderr is no terminal)."""
    if sys.stderr.isatty():
        return True
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    return type(shell).__name__ == "ZMQInteractiveShell"


#: ``methods`` as sweep takes it (whether each is registered: sweep, against METHODS)
METHOD_NAMES = Satisfies(lambda methods: isinstance(methods, (str, Sequence))
                         and all(isinstance(method, str) for method in methods),
                         "a method's name or a list of names", bad=(None, 3, ["lightgbm", 3]))
#: the rows sweep and the workflows built on it take: (X, y) or (X, y, group)
ROWS = CheckedElsewhere("Rows.of")
#: sweep's parameters; the workflows that pass options on to it declare them with their own
SWEEP_CONSTRAINTS = {
    "methods": METHOD_NAMES, "train": ROWS, "valid": ROWS, "costs": COSTS, "task": OneOf(TASKS),
    "grid": Satisfies(lambda grid: grid is None or isinstance(grid, Mapping), "a mapping {method: [params, ...]}",
                      bad=([1, 2], "cegb"), show_type=True),
    "metric": CheckedElsewhere("get_metric, for the task"),
    "params": Satisfies(lambda params: params is None or isinstance(params, Mapping),
                        "a mapping of LightGBM parameters", bad=("num_leaves=4", [("num_leaves", 4)])),
    "num_boost_round": Number(1, integer=True), "early_stopping_rounds": NoneOr(Number(1, integer=True)),
    "budget": NoneOr(BUDGETS), "refine": Number(0, integer=True), "focus": Flag(), "baseline": Flag(),
    "n_jobs": N_JOBS, "client": CheckedElsewhere("dask.distributed, by the jobs submitted to it"),
    "progress": Satisfies(lambda progress: progress is None or isinstance(progress, bool), "None, True or False",
                          bad=(1, "yes")),
    "frontier": CheckedElsewhere("refinement.go_on_from, against this sweep's task, metric and costs"),
    "screen": CheckedElsewhere("screen.screen_size, with the budgets and rows it needs"),
    "method_fits": NoneOr(Number(0, low_open=True)),
}


@validated(SWEEP_CONSTRAINTS)
def sweep(methods: str | Sequence[str], train, valid, costs, *, task: str, grid: Mapping | None = None,
          metric: str | Metric | None = None, params: Mapping | None = None,
          num_boost_round: int = NUM_BOOST_ROUND, early_stopping_rounds: int = EARLY_STOPPING_ROUNDS,
          budget: float | Sequence[float] | None = None,
          refine: int = 4, focus: bool = True, baseline: bool = True, n_jobs: int = 1, client=None,
          progress: bool | None = None, frontier: pd.DataFrame | None = None,
          screen: bool | int | None = None, method_fits: float | None = None) -> pd.DataFrame:
    """Train every grid point of each method on ``train`` and measure it on ``valid``.

    Every method gets the same kinds of points under one protocol: each grid point trained on ``train`` (the
    boosted ones with early stopping on ``valid``'s first LightGBM metric, patience
    ``early_stopping_rounds``), and every boosted or bagged model also contributes its prefixes
    (``PREFIX_TREES`` below its best iteration, and with a budget the longest prefix within it); every point
    measured on the same ``valid`` rows.

    Parameters
    ----------
    methods : str or sequence of str
        A name of :data:`METHODS` or a list of names.
    train : tuple or Rows
        The training rows: (X, y) or (X, y, group) with ``group`` the query sizes (ranking).
    valid : tuple or Rows
        The validation rows, the same way: early stopping and every point's measures.
    costs : FeatureCosts, lazy costs per column, or None
        The cost model; by feature name (a mapping or a FeatureCosts of names) when X is a DataFrame; None prices
        every feature at 1.
    task : str
        "binary", "multiclass", "regression" or "ranking". binary: labels of exactly two classes, any two
        values ({0, 1}, {-1, +1}, {2, 5}, two strings), the larger being the positive class (as scikit-learn's
        ``classes_[1]``); multiclass: two or more classes. Every method is fitted and measured on the labels'
        indices in the sorted classes (binary: 0 and 1; multiclass: 0..K-1), which ``frame.attrs["classes"]``
        lists; ``select`` and ``evaluate`` map test labels the same way. A model's ``predict`` answers in
        these indices (a probability of class 1 for binary).
    grid : Mapping, optional
        {method: [params, ...]} replacing a method's default grid (see the module doc for the knobs).
    metric : str or Metric, optional
        A name (``accuracy``, ``auc``, ``logloss``, ``rmse``, ``ap@5``, ``ndcg@K``, ``p@K``) or a Metric (None:
        the task's default, :func:`get_metric`).
    params : Mapping, optional
        LightGBM parameters for the LightGBM-based methods (e.g. ``num_leaves``, ``learning_rate``).
    num_boost_round : int, default=NUM_BOOST_ROUND
        The cap on boosting rounds (5000); early stopping decides below it. A point whose validation metric
        still improved at the cap is reported by a RoundsWarning: raise the cap.
    early_stopping_rounds : int, default=20
        The patience of early stopping on ``valid``'s first LightGBM metric.
    budget : float or sequence of float, optional
        The mean validation cost per row the sweep is for: each method's knob is refined around it (``refine``
        rounds of bisection between the best point within the budget and its neighbours, the new points marked
        ``stage == "refine"``), and each boosted or bagged model's longest prefix within it is a point. Several
        budgets: one sweep for all of them (the grid fitted once; in each round, each budget's bisection reads
        the grid's points and its own, as a sweep for it alone would, a point several ask for fitted once), whose
        frame :func:`select` answers each budget from. None: the grid only.
    refine : int, default=4
        The rounds of refinement around each budget (none without a budget).
    focus : bool, default=True
        Fit and refine a method only where it pays. With a budget, each setting of a method's grid (its other
        parameters fixed) whose knob has a cheap end and costs a fit per value (CEGB's, Greedy Miser's,
        BudgetPrune's, CatBoost's) is fitted from that end, and its dearer values are not fitted after two values
        in a row whose whole model costs more than every budget and whose points improve within none (the
        ``lightgbm_cegb.selection`` logger names the values left). Only the three methods of the best points
        within a budget (and those with none within it) are refined there (the logger names the others), each
        while its rounds improve its best point within the budget enough to catch the leader in the rounds left
        at that pace, it leads the methods there, or it has no point within the budget yet; a method behind the
        leader is not refined there again after a round that did not when it trails by more than 5% of the
        spread of the qualities within the budget, else after two such rounds. A knob read at prediction (the
        acquisitions' trade-offs, Early Exit's threshold: no fit per value) is refined whatever its standing,
        while it improves. False: every grid point, every method every round (the exhaustive sweep, several
        times slower where slow methods trail; ``scripts/bench_budget_workflow.py`` compares the two).
    baseline : bool, default=True
        Include the cheap-subset baseline (``cheap_subset``: plain LightGBM on a greedily chosen cost-aware
        subset of the features or groups), which any budgeted method should beat.
    n_jobs : int, default=1
        Grid points trained in parallel by joblib (processes). The points of a method that shares its fits
        (``Method.shares_fits``: the adaptive and staged acquisitions) run in this process, and a focused sweep walks
        a knob one value at a time: on HIGGS (5,000 rows) fit_within_budget is no faster with 2 than with 1
        (``scripts/bench_budget_workflow.py --n-jobs``).
    client : distributed.Client, optional
        A dask.distributed Client to run the grid points on instead of joblib (the points of a method that shares
        its fits run in this process meanwhile).
    progress : bool, optional
        A tqdm bar over the grid points, showing the method and point last fitted (default: when stderr is a
        terminal or in a Jupyter notebook). Each fitted point is also logged to the ``lightgbm_cegb.selection``
        logger at INFO level (``logging.basicConfig(level=logging.INFO)`` or a file handler shows them).
    frontier : pandas.DataFrame, optional
        A sweep's frame of the same rows, costs, task and metric to go on from: its points are kept, and its
        methods' grids are not fitted again; each budget is refined only where it falls in a gap of the points
        (the best point within it costs less than 80% of it while dearer points exist, and the frame was not
        swept for it), which the ``lightgbm_cegb.selection`` logger says at INFO level for every budget, and
        ``frame.attrs["refined"]`` lists. Methods not in it are swept in full.
    screen : bool or int, optional
        Screen the methods on a subsample before fitting on every training row: every method's grid is swept on
        ``screen`` training rows (True: SCREEN_ROWS = 2,500; classes in proportion, whole queries), each point
        measured on at most SCREEN_VALID = 2,500 of the validation rows, and refined there around each budget for
        the SCREEN_CONTENDERS = 3 methods of the best grid points within it (and any with no point within it); for
        each budget, the
        SCREEN_KEEP = 2 methods of the best points within it are kept, and only their best points in the
        SCREEN_SETTINGS = 2 best settings of their other parameters (e.g. the staged acquisition's caps), each with
        the nearest grid values of the knob on either side (a knob read at prediction, ``Knob.read_at_predict``:
        every grid value, which costs no fit), are fitted on every training row (stage "finalist") and measured on
        every validation row, then refined there for at most SCREEN_REFINE = 2 rounds (a knob read at prediction:
        ``refine`` rounds). The baseline (``cheap_subset``, when swept) is not screened: its search runs with the
        finalists on every row (on its own subsample, see ``selection.baseline``) whatever the screen finds, so the
        answer within a budget is never below it on the validation rows (on the screen's subsample a group that only
        pays at size can look worthless), and the finalists are the other methods. The frame holds these points only;
        ``frame.attrs["screen"]`` gives the subsample's size, each budget's finalists and the methods the screen
        ``left_out`` (the ``lightgbm_cegb.selection`` logger says them too).
        None (default): screen when a budget is given, no ``frontier``, and the training rows number at least
        SCREEN_FROM = 20,000 (there a full sweep costs many times the screen: ``scripts/bench_budget_workflow.py
        --data large`` measures both), or at least 5,000 holding SCREEN_CELLS = 20 million cells (rows x columns x
        the classes of a multiclass task). False: never. Needs a budget and no frontier.
    method_fits : float, optional
        A time limit for each method in each stage of the sweep (the screen, every row): the time of this many
        plain LightGBM fits of the stage's rows (timed at its start), at least ALLOWANCE_FLOOR = 30 s. A method
        that has spent it (its preparation, its points' fits and measures) starts no other point there, but for a
        knob read when predicting (the acquisitions', Early Exit's), whose points that read a model it fitted
        already run (they train nothing; one that would train a model is left); the points it fitted stay, and a
        CEGBWarning names it, its time and the points it left (``frame.attrs["stopped"]``). A point already
        started runs to its end, but for a point that is one boosted model (CEGB's, Greedy Miser's), whose training
        ends where its method's allowance does (``Context.cut_callbacks``: the rounds trained are kept, the prefixes
        measured as ever; the warning gives the rounds), and the adaptive acquisition's classifiers, cut the same way
        (a policy round after a cut one, or one the time left cannot hold, is not trained: its points are left); on
        a Dask cluster, where the points are submitted at once, a method's points not finished are cancelled when it
        passes its allowance (a knob read when predicting: they run). None (default): no limit
        (:func:`fit_within_budget` sets METHOD_FITS = 20).

    Returns
    -------
    pandas.DataFrame
        One row per fitted point: ``method``, ``quality``, ``cost`` (mean per validation row), ``coupled``,
        ``params`` (dict) and its keys as columns, ``stage`` ("grid", "refine" or, after a screen, "finalist"),
        ``model`` (a Candidate: ``.model``, ``.predict``, ``.cost``). ``frame.attrs`` holds ``metric``,
        ``greater_is_better``, ``task``, ``classes``, ``budget`` (None, the number given, or the list given,
        sorted), ``columns`` (train's column names, or None), ``seconds`` (by method, the seconds its preparation
        and its points' fits and measures took, the screen's included; parallel jobs overlap, so they add up to more
        than the wall time), ``stopped`` (by stage, "screen" or "rows": the methods ``method_fits`` stopped, each
        with its seconds, its plain fits, its points not fitted and the rounds of its trainings cut) and
        ``metric_object``; going on from a
        frontier, ``budget`` holds its budgets and these, ``refined`` the budgets refined and ``seconds`` its
        seconds and this sweep's; after a screen, ``screen``.
        The frame pickles, its models with it.

    Raises
    ------
    CEGBError
        When a method is unknown or does not support the task, ``grid`` names a method not swept, a number is
        out of range, the labels do not fit the task, ranking rows lack their query sizes, valid's columns are
        train's in another order, costs by name meet an X without column names, or ``screen`` is given without a
        budget or with a frontier.

    Warns
    -----
    RoundsWarning
        When a point reached ``num_boost_round`` while its validation metric was still improving.
    """
    names = [methods] if isinstance(methods, str) else list(methods)
    unknown = [m for m in names if m not in METHODS]
    if unknown:
        raise CEGBError(f"unknown method(s) {unknown}; registered: {sorted(METHODS)}")
    if baseline and BASELINE not in names and task in METHODS[BASELINE].tasks:
        names.append(BASELINE)
    unfit = [m for m in names if task not in METHODS[m].tasks]
    if unfit:
        raise CEGBError(f"method(s) {unfit} do not support task={task!r} "
                        f"({', '.join(f'{m}: {METHODS[m].tasks}' for m in unfit)})")
    grid = dict(grid or {})
    extra = sorted(set(grid) - set(names))
    if extra:
        raise CEGBError(f"grid names method(s) {extra} that are not swept ({names})")
    for name, points in grid.items():
        if isinstance(points, Mapping) or not isinstance(points, Sequence) or \
                not all(isinstance(point, Mapping) for point in points):
            raise CEGBError(f"grid[{name!r}] should be a list of parameter mappings, e.g. [{{'num_leaves': 8}}], "
                            f"got {points!r:.60}")
    budgets = swept_budgets(budget)
    if budget is not None:
        budget = budgets[0] if np.ndim(budget) == 0 else list(budgets)
    train, valid = Rows.of(train, "train"), Rows.of(valid, "valid")
    columns = list(train.X.columns) if hasattr(train.X, "columns") else None
    check_column_order(valid.X, columns, "valid", "train's columns")
    classes = class_labels(task, train, valid)
    train, valid = encoded(train, classes, "train"), encoded(valid, classes, "valid")
    if task == "ranking" and (train.group is None or valid.group is None):
        raise CEGBError("task='ranking' needs the query sizes: train=(X, y, group) and valid=(X, y, group)")
    # by feature name: aligned to train's columns (LightGBM's parameters are by column); None: every feature at 1
    costs = resolve_costs(costs, train.X.shape[1], train.X if hasattr(train.X, "columns") else None,
                          unpriced="unit", given_as="costs", rows="train's X")
    metric = get_metric(metric, task)
    context = Context(task, train, valid, costs, dict(params or {}), num_boost_round, early_stopping_rounds,
                      metric, budgets)
    sign = 1.0 if metric.greater_is_better else -1.0
    previous, refined = [], list(budgets)
    if frontier is not None:
        previous, refined = go_on_from(frontier, context, budgets, sign)
    show = _show_progress() if progress is None else progress
    bar = None
    if show:
        from tqdm.auto import tqdm
        bar = tqdm(total=0, desc="sweep", unit="fit")
    spent = dict(frontier.attrs.get("seconds", {})) if frontier is not None else {}  # seconds by method
    execution = runner.Execution(n_jobs, client, bar, spent)
    trees = len(classes) if task == "multiclass" else 1  # per boosting round
    size = screening.screen_size(screen, len(train.y), budgets, frontier, len(train.y) * train.X.shape[1] * trees)
    if size:
        # the baseline is not screened: its search runs on every row whatever the screen finds (on a subsample its
        # order can miss a group that only pays at size), and the finalists' places go to the other methods
        points, finalists = screening.screened([name for name in names if name != BASELINE], context, grid, size,
                                               refine, focus, sign, execution, method_fits)
        if BASELINE in names:
            points += [(BASELINE, point) for point in (grid[BASELINE] if BASELINE in grid else
                                                       METHODS[BASELINE].grid(context))]
        execution = execution.limited(method_fits, context, "rows")
        states = prepared(dict.fromkeys(name for name, _ in points), context, execution)
        jobs = [(METHODS[name], states[name], point, "finalist") for name, point in points if name in states]
        pairs = {(name, budget) for budget, kept in finalists.items() for name in kept
                 if name in states and METHODS[name].knob is not None}
        rounds, free_rounds = min(refine, screening.SCREEN_REFINE), refine
    else:
        done = {row["method"] for row in previous}  # methods of the frontier given: no grid, refined where in a gap
        execution = execution.limited(method_fits, context, "rows")
        states = prepared([name for name in names if name not in done or (refined and METHODS[name].knob is not None)],
                          context, execution)
        jobs = grid_jobs(states, grid, context, "grid", skip=done)
        swept_anew = {job[0].name for job in jobs}  # a method new to the frontier given: refined for every budget
        pairs = {(name, budget) for name in states if METHODS[name].knob is not None
                 for budget in (budgets if name in swept_anew else refined)}
        rounds = free_rounds = refine if budgets else 0
    walked = budgets and focus and not size  # the finalists are few: each is fitted
    rows = previous + (runner.walk(jobs, context, execution, sign) if walked else runner.execute(jobs, context,
                                                                                                    execution))
    rows += refinement.refine_around(rows, pairs, states, context, rounds, focus, sign, execution,
                                     free_rounds=free_rounds)
    if bar is not None:
        bar.close()
    capped = [row for row in rows[len(previous):] if row["model"].capped]
    if capped:
        points = dict.fromkeys(f"{row['method']} {({k: v for k, v in row['params'].items() if k != 'trees'})}"
                               for row in capped)  # a model's prefixes share its grid point
        warnings.warn(f"sweep: point(s) of {sorted({row['method'] for row in capped})} reached num_boost_round="
                      f"{num_boost_round} while the validation metric was still improving ({', '.join(points)}): "
                      "raise num_boost_round", RoundsWarning, stacklevel=caller_stacklevel())
    stopped = {stage: allowance.stopped() for stage, allowance in execution.allowances.items()
               if allowance.skipped or allowance.cut}
    if stopped:
        where = {"screen": "the screen's subsample", "rows": "every training row"}
        said = "; ".join(f"{name} on {where[stage]} after {left['seconds']:g} s = {left['plain_fits']:g} plain fits "
                         f"there ({left['not_fitted']} point(s) not fitted"
                         + (f", trainings cut after {left['cut']} rounds" if left["cut"] else "") + ")"
                         for stage, methods in stopped.items() for name, left in methods.items())
        warnings.warn(f"sweep: method_fits={method_fits:g}: stopped {said}; their points so far are kept "
                      "(method_fits=None fits every point)", CEGBWarning, stacklevel=caller_stacklevel())
    frame = pd.DataFrame(rows, columns=["method", "quality", "cost", "coupled", "params", "stage", "model"])
    if metric.threshold:  # each point's decision threshold, chosen on the validation rows
        frame.insert(4, "decision_threshold", [row["model"].decision_threshold for row in rows])
    keys = sorted({k for row in rows for k in row["params"]})
    for key in keys:
        frame[key] = [row["params"].get(key) for row in rows]
    frame.attrs.update(metric=metric.name, greater_is_better=metric.greater_is_better, task=task,
                       classes=None if classes is None else classes.tolist(), budget=budget, columns=columns,
                       costs=costs, seconds=spent, stopped=stopped)
    if size:
        fitted = {name for kept in finalists.values() for name in kept} | {BASELINE}  # on every training row
        frame.attrs["screen"] = {"rows": size, "finalists": {budget: list(kept) for budget, kept in finalists.items()},
                                 "left_out": [name for name in names if name not in fitted]}
    if frontier is not None:  # swept for its budgets and these
        every = sorted(set(swept_budgets(frontier.attrs.get("budget"))) | set(budgets))
        frame.attrs.update(budget=every[0] if len(every) == 1 else every or None, refined=list(refined))
    frame.attrs["metric_object"] = metric
    return frame
