"""sweep(): every registered method's grid fitted and measured on the same validation rows."""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from lightgbm_cegb.core.costs import FeatureCosts
from lightgbm_cegb.core.errors import (
    CEGBError,
    CEGBWarning,
    NothingToTradeOff,
    RoundsWarning,
    check_column_order,
    check_number,
)
from lightgbm_cegb.selection.metrics import Metric, get_metric
from lightgbm_cegb.selection.registry import METHODS, TASKS, Context, Method, Rows, class_labels, encoded

# ------------------------------------------------------------------------------------------------ sweep
#: The baseline every sweep includes unless ``baseline=False`` (lightgbm_cegb.selection.baseline)
#: each fitted grid point is logged here (INFO): its method, parameters, points and best quality
LOG = logging.getLogger("lightgbm_cegb.selection")
BASELINE = "cheap_subset"
#: num_boost_round's default: a cap for early stopping that does not bind on the bundled data sets (a point that
#: reaches it while still improving is reported by a RoundsWarning)
NUM_BOOST_ROUND = 5000


def _run(method: Method, context: Context, state, params: dict, stage: str) -> list[dict]:
    rows = []
    for candidate in method.fit(context, state, dict(params)):
        quality, cost, coupled = candidate.measure(context.valid, context.metric, choose=True)
        rows.append({"method": method.name, "quality": quality, "cost": cost, "coupled": coupled,
                     "params": candidate.params, "stage": stage, "model": candidate})
    return rows


def _execute(jobs: list, context: Context, n_jobs: int, client, bar) -> list[dict]:
    """The rows of every job (method, state, params, stage), in the order of the jobs; each job done is logged
    (``lightgbm_cegb.selection``, INFO) and shown on the progress bar with its method and point."""
    if client is not None:
        from distributed import as_completed
        futures = [client.submit(_run, method, context, state, point, stage, pure=False)
                   for method, state, point, stage in jobs]
        order = {future.key: i for i, future in enumerate(futures)}
        results = [None] * len(futures)
        for future in as_completed(futures):
            i = order[future.key]
            results[i] = future.result()
            _done(jobs[i], results[i], bar, context.metric)
    else:
        from joblib import Parallel, delayed
        results = []
        for job, result in zip(jobs, Parallel(n_jobs=n_jobs, return_as="generator")(
                delayed(_run)(method, context, state, point, stage) for method, state, point, stage in jobs)):
            results.append(result)
            _done(job, result, bar, context.metric)
    return [row for result in results for row in result]


def _done(job, rows: list[dict], bar, metric) -> None:
    """Report a finished job: a log record and the progress bar's text."""
    method, _, point, stage = job
    shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in point.items()
                      if k != "trees")
    if rows:
        sign = 1.0 if metric.greater_is_better else -1.0
        best = max(rows, key=lambda row: sign * row["quality"])
        LOG.info("sweep: %s (%s) %s: %d point(s), best %s %.4g at cost %.4g", method.name, shown or "defaults",
                 stage, len(rows), metric.name, best["quality"], best["cost"])
    else:
        LOG.info("sweep: %s (%s) %s: no point", method.name, shown or "defaults", stage)
    if bar is not None:
        bar.set_postfix_str(f"{method.name} {shown}"[:60], refresh=False)
        bar.update()


def _show_progress() -> bool:
    """The progress bar's default: on a terminal, or in a Jupyter notebook (whose stderr is no terminal)."""
    if sys.stderr.isatty():
        return True
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    return type(shell).__name__ == "ZMQInteractiveShell"


def _key(value):
    """A hashable stand-in for a parameter's value (lists and dicts as their repr)."""
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


def _refinements(method: Method, rows: list[dict], budget: float, sign: float) -> list[dict]:
    """New knob values for ``method`` around the budget: for each setting of its other parameters, the knob
    value whose points (any prefix) reach the best validation quality within the budget, and the midpoints
    between it and its neighbours among the values tried (as a bisection: each round halves the gaps around
    the best). When no point of a setting is within the budget, the midpoint towards the knob's cheap end."""
    knob = method.knob
    settings: dict[tuple, dict] = {}
    for row in rows:
        params = row["params"]
        if knob.name not in params:  # a raw knob (e.g. cegb_tradeoff) given instead: not refined
            continue
        rest = {k: v for k, v in params.items() if k not in (knob.name, knob.record, "trees")}
        setting = settings.setdefault(tuple(sorted((k, _key(v)) for k, v in rest.items())),
                                      {"rest": rest, "values": {}})
        best = setting["values"].setdefault(float(params[knob.name]), -np.inf)
        if row["cost"] <= budget:
            setting["values"][float(params[knob.name])] = max(best, sign * row["quality"])
    new = []
    for setting in settings.values():
        values = sorted(setting["values"])
        qualities = [setting["values"][v] for v in values]
        if max(qualities) > -np.inf:
            i = int(np.argmax(qualities))
            targets = [knob.between(values[i], values[j]) for j in (i - 1, i + 1) if 0 <= j < len(values)]
        elif knob.cheap_end is not None:
            nearest = min(values, key=lambda v: abs(v - knob.cheap_end))
            targets = [knob.between(nearest, knob.cheap_end)]
        else:
            targets = []
        for target in targets:
            if all(abs(target - v) > 1e-9 * max(abs(v), 1e-12) for v in values):
                new.append({knob.name: target, **setting["rest"]})
    return new


def sweep(methods: str | Sequence[str], train, valid, costs, *, task: str, grid: Mapping | None = None,
          metric: str | Metric | None = None, params: Mapping | None = None,
          num_boost_round: int = NUM_BOOST_ROUND, early_stopping_rounds: int = 20, budget: float | None = None,
          refine: int = 4, baseline: bool = True, n_jobs: int = 1, client=None,
          progress: bool | None = None) -> pd.DataFrame:
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
    costs : FeatureCosts, or lazy costs per column
        The cost model; by feature name (a mapping or a FeatureCosts of names) when X is a DataFrame.
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
    budget : float, optional
        The mean validation cost per row the sweep is for: each method's knob is refined around it (``refine``
        rounds of bisection between the best point within the budget and its neighbours, the new points marked
        ``stage == "refine"``), and each boosted or bagged model's longest prefix within it is a point. None:
        the grid only.
    refine : int, default=4
        The rounds of refinement around ``budget`` (none without a budget).
    baseline : bool, default=True
        Include the cheap-subset baseline (``cheap_subset``: plain LightGBM on a greedily chosen cost-aware
        subset of the features or groups), which any budgeted method should beat.
    n_jobs : int, default=1
        Grid points trained in parallel by joblib (processes).
    client : distributed.Client, optional
        A dask.distributed Client to run the grid points on instead of joblib.
    progress : bool, optional
        A tqdm bar over the grid points, showing the method and point last fitted (default: when stderr is a
        terminal or in a Jupyter notebook). Each fitted point is also logged to the ``lightgbm_cegb.selection``
        logger at INFO level (``logging.basicConfig(level=logging.INFO)`` or a file handler shows them).

    Returns
    -------
    pandas.DataFrame
        One row per fitted point: ``method``, ``quality``, ``cost`` (mean per validation row), ``coupled``,
        ``params`` (dict) and its keys as columns, ``stage`` ("grid" or "refine"), ``model`` (a Candidate:
        ``.model``, ``.predict``, ``.cost``). ``frame.attrs`` holds ``metric``, ``greater_is_better``, ``task``,
        ``classes``, ``budget``, ``columns`` (train's column names, or None) and ``metric_object``. The frame
        pickles, its models with it.

    Raises
    ------
    CEGBError
        When a method is unknown or does not support the task, ``grid`` names a method not swept, a number is
        out of range, the labels do not fit the task, ranking rows lack their query sizes, valid's columns are
        train's in another order, or costs by name
        meet an X without column names.

    Warns
    -----
    RoundsWarning
        When a point reached ``num_boost_round`` while its validation metric was still improving.
    """
    if task not in TASKS:
        raise CEGBError(f"task should be one of {TASKS}, got {task!r}")
    if not isinstance(methods, (str, Sequence)) or not all(isinstance(m, str) for m in methods):
        raise CEGBError(f"methods should be a method's name or a list of names, got {methods!r:.60}")
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
    if grid is not None and not isinstance(grid, Mapping):
        raise CEGBError(f"grid should be a mapping {{method: [params, ...]}}, got {type(grid).__name__}")
    grid = dict(grid or {})
    extra = sorted(set(grid) - set(names))
    if extra:
        raise CEGBError(f"grid names method(s) {extra} that are not swept ({names})")
    for name, points in grid.items():
        if isinstance(points, Mapping) or not isinstance(points, Sequence) or \
                not all(isinstance(point, Mapping) for point in points):
            raise CEGBError(f"grid[{name!r}] should be a list of parameter mappings, e.g. [{{'num_leaves': 8}}], "
                            f"got {points!r:.60}")
    if params is not None and not isinstance(params, Mapping):
        raise CEGBError(f"params should be a mapping of LightGBM parameters, got {params!r:.60}")
    check_number(num_boost_round, "num_boost_round", 1, integer=True)
    if early_stopping_rounds is not None:
        check_number(early_stopping_rounds, "early_stopping_rounds", 1, integer=True)
    if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0):
        raise CEGBError(f"n_jobs should be a nonzero integer (-1: every CPU) or None, got {n_jobs!r}")
    check_number(refine, "refine", 0, integer=True)
    if budget is not None:
        check_number(budget, "budget", 0.0)
        budget = float(budget)
    train, valid = Rows.of(train, "train"), Rows.of(valid, "valid")
    columns = list(train.X.columns) if hasattr(train.X, "columns") else None
    check_column_order(valid.X, columns, "valid", "train's columns")
    classes = class_labels(task, train, valid)
    train, valid = encoded(train, classes, "train"), encoded(valid, classes, "valid")
    if task == "ranking" and (train.group is None or valid.group is None):
        raise CEGBError("task='ranking' needs the query sizes: train=(X, y, group) and valid=(X, y, group)")
    costs = FeatureCosts.coerce(costs)
    if not costs.is_aligned:  # costs by feature name: to train's columns (LightGBM's parameters are by column)
        if not hasattr(train.X, "columns"):
            raise CEGBError("costs name features, but train's X has no column names: pass a pandas DataFrame or "
                            "costs by column position")
        costs = costs.align(train.X)
    metric = get_metric(metric, task)
    context = Context(task, train, valid, costs, dict(params or {}), num_boost_round, early_stopping_rounds,
                      metric, budget)
    states, jobs = {}, []
    for name in names:
        method = METHODS[name]
        try:
            states[name] = method.prepare(context)
        except NothingToTradeOff as exc:  # every feature free to the method: its points would all be plain models
            warnings.warn(f"sweep: {name} left out: {exc}", CEGBWarning, stacklevel=2)
            continue
        jobs += [(method, states[name], point, "grid")
                 for point in (grid[name] if name in grid else method.grid(context))]
    show = _show_progress() if progress is None else progress
    bar = None
    if show:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(jobs), desc="sweep", unit="fit")
    rows = _execute(jobs, context, n_jobs, client, bar)
    sign = 1.0 if metric.greater_is_better else -1.0
    for _ in range(refine if budget is not None else 0):
        jobs = [(METHODS[name], states[name], point, "refine") for name in states if METHODS[name].knob is not None
                for point in _refinements(METHODS[name], [r for r in rows if r["method"] == name], budget, sign)]
        if not jobs:
            break
        if bar is not None:
            bar.total += len(jobs)
        rows += _execute(jobs, context, n_jobs, client, bar)
    if bar is not None:
        bar.close()
    capped = [row for row in rows if row["model"].capped]
    if capped:
        points = dict.fromkeys(f"{row['method']} {({k: v for k, v in row['params'].items() if k != 'trees'})}"
                               for row in capped)  # a model's prefixes share its grid point
        warnings.warn(f"sweep: point(s) of {sorted({row['method'] for row in capped})} reached num_boost_round="
                      f"{num_boost_round} while the validation metric was still improving ({', '.join(points)}): "
                      "raise num_boost_round", RoundsWarning, stacklevel=2)
    frame = pd.DataFrame(rows, columns=["method", "quality", "cost", "coupled", "params", "stage", "model"])
    if metric.threshold:  # each point's decision threshold, chosen on the validation rows
        frame.insert(4, "decision_threshold", [row["model"].decision_threshold for row in rows])
    keys = sorted({k for row in rows for k in row["params"]})
    for key in keys:
        frame[key] = [row["params"].get(key) for row in rows]
    frame.attrs.update(metric=metric.name, greater_is_better=metric.greater_is_better, task=task,
                       classes=None if classes is None else classes.tolist(), budget=budget, columns=columns,
                       costs=costs)
    frame.attrs["metric_object"] = metric
    return frame
