"""sweep(): every registered method's grid fitted and measured on the same validation rows.

Its length: the sweep's stages (grid, refinement, the screen on a subsample) share its job runner and the rule
that reads a method's best point within a budget; one stage alone is not a public step.
"""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from lightgbm_cegb.core.costs import resolve_costs
from lightgbm_cegb.core.errors import CEGBError, CEGBWarning, NothingToTradeOff, RoundsWarning
from lightgbm_cegb.core.validation import check_column_order, check_number
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


def _execute(jobs: list, context: Context, n_jobs: int, client, bar, *, flat: bool = True) -> list:
    """The rows of every job (method, state, params, stage), in the order of the jobs (flat=False: a list of rows
    per job); each job done is logged (``lightgbm_cegb.selection``, INFO) and shown on the progress bar with its
    method and point (whose total grows by the jobs)."""
    if bar is not None:
        bar.total += len(jobs)
    batches: dict[str, tuple] = {}  # each method's state and points, shown to its plan before the fits
    for method, state, point, _ in jobs:
        batches.setdefault(method.name, (method, state, []))[2].append(point)
    for method, state, points in batches.values():
        method.plan(context, state, points)
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
    return [row for result in results for row in result] if flat else results


def _go_on_from(frontier: pd.DataFrame, context: Context, budgets: tuple[float, ...],
                sign: float) -> tuple[list[dict], list[float]]:
    """sweep(frontier=): the frame's points as rows (after checking it was swept as this sweep is), and the
    budgets to refine: those in a gap of its points (each budget's verdict logged)."""
    if not isinstance(frontier, pd.DataFrame) or "metric_object" not in frontier.attrs:
        raise CEGBError(f"frontier should be a frame that sweep returned, got {type(frontier).__name__}")
    attrs = frontier.attrs
    for key, value, mine in (("task", attrs.get("task"), context.task),
                             ("metric", attrs.get("metric"), context.metric.name),
                             ("costs", attrs.get("costs"), context.costs)):
        if value != mine:
            raise CEGBError(f"frontier: swept with {key} {value!r:.80}, this sweep has {mine!r:.80}")
    fields = ("method", "quality", "cost", "coupled", "params", "stage", "model")
    previous = [dict(zip(fields, values)) for values in zip(*(frontier[f] for f in fields))]
    swept, costs, qualities = swept_budgets(attrs.get("budget")), frontier["cost"].to_numpy(float), \
        frontier["quality"].to_numpy(float)
    refined = []
    for budget in budgets:
        if budget in swept:
            LOG.info("sweep: budget %g: the frontier given was swept for it", budget)
        elif in_gap(costs, qualities, budget, sign):
            LOG.info("sweep: budget %g falls in a gap of the frontier given: refining the knobs there", budget)
            refined.append(budget)
        else:
            LOG.info("sweep: budget %g: the frontier given has points close below it, no refinement", budget)
    return previous, refined


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


def _frozen(params: Mapping) -> tuple:
    """A hashable stand-in for parameters, whatever the order of their keys."""
    return tuple(sorted((k, _key(v)) for k, v in params.items()))


def swept_budgets(budget) -> tuple[float, ...]:
    """``budget`` as sweep and select take it (None, a number or a sequence of numbers >= 0) as a tuple of
    distinct floats in increasing order (empty for None); a CEGBError names what is wrong."""
    if budget is None:
        return ()
    if np.ndim(budget) == 0:
        check_number(budget, "budget", 0.0)
        return (float(budget),)
    if isinstance(budget, (str, bytes, Mapping)) or np.ndim(budget) != 1 or len(budget) == 0:
        raise CEGBError(f"budget should be a number >= 0 or a non-empty list of them, got {budget!r:.60}")
    for value in budget:
        check_number(value, "budget", 0.0)
    return tuple(sorted({float(value) for value in budget}))


#: A frontier "has a gap" below a budget when its best point within the budget costs less than this fraction of
#: the budget while dearer points exist: a point nearer the budget may well be better (select warns, and a sweep
#: going on from the frontier refines there).
GAP = 0.8


def in_gap(costs: np.ndarray, qualities: np.ndarray, budget: float, sign: float) -> bool:
    """Whether ``budget`` falls in a gap of the points (``costs``, ``qualities``; ``sign`` 1 when greater is
    better): the best point within it (ties: the cheapest) costs less than GAP x budget while some point costs
    more than the budget. No point within it: not a gap (a refinement towards the cheap end finds those)."""
    within = costs <= budget
    if not within.any() or not (costs > budget).any():
        return False
    best = np.max(sign * qualities[within])
    return bool(np.min(costs[within][sign * qualities[within] == best]) < GAP * budget)


#: sweep(focus=True): a method behind the leader within a budget is no longer refined there after a round that
#: brought it nothing better when it trails by more than CLOSE x the spread of the qualities within the budget,
#: else after PATIENCE such rounds in a row
CLOSE, PATIENCE = 0.05, 2


def _spread_within(rows: list[dict], budget: float, sign: float) -> float:
    """The best minus the worst validation quality (times ``sign``) of the points within ``budget``."""
    qualities = [sign * row["quality"] for row in rows if row["cost"] <= budget]
    return max(qualities) - min(qualities) if qualities else 0.0


def _refine(rows: list[dict], pairs: set, states: dict, context: Context, rounds: int, focus: bool, sign: float,
            execution: tuple, stage: str = "refine", free_rounds: int | None = None) -> list[dict]:
    """The rows of the refinement rounds around the budgets of ``pairs`` (method, budget), after ``rows``: ``rounds``
    of them, ``free_rounds`` (default ``rounds``) for a method whose knob is read at prediction.

    Each budget's bisection reads the points of ``rows`` (the grid's, the frontier's) and those refined for
    that budget, as a sweep for that budget alone would; a point several budgets ask for is fitted once. With
    ``focus``, a (method, budget) pair is refined while its rounds improve the method's best point within the
    budget, it leads the methods there, or it has no point within the budget yet; a method behind the leader is
    not refined there again after a round that brought it nothing better when it trails far (CLOSE), else after
    PATIENCE such rounds (most of a sweep's time otherwise)."""
    new: list[dict] = []
    own: dict[float, list[dict]] = {budget: [] for _, budget in pairs}  # the rows refined for each budget
    fitted: dict[tuple, list[dict]] = {}  # the rows of each refinement point fitted
    active, idle = set(pairs), dict.fromkeys(pairs, 0)

    def best(pair) -> float:
        return _best_within(rows + own[pair[1]], *pair, sign)

    free_rounds = rounds if free_rounds is None else free_rounds
    limit = {name: free_rounds if METHODS[name].knob.read_at_predict else rounds for name, _ in pairs}
    for round_ in range(max(limit.values(), default=0)):
        active = {pair for pair in active if round_ < limit[pair[0]]}
        before = {pair: best(pair) for pair in pairs}
        wanted: dict[tuple, tuple[str, dict, list[float]]] = {}
        shared = False
        for name, budget in sorted(active):
            seen = [row for row in rows + own[budget] if row["method"] == name]
            for point in _refinements(METHODS[name], seen, budget, sign):
                key = (name, _frozen(point))
                if key in fitted:  # fitted for another budget: this one reads it too
                    own[budget] += fitted[key]
                    shared = True
                else:
                    wanted.setdefault(key, (name, point, []))[2].append(budget)
        if not wanted and not shared:
            break
        jobs = [(METHODS[name], states[name], point, stage) for name, point, _ in wanted.values()]
        for (key, (_, _, budgets)), result in zip(wanted.items(), _execute(jobs, context, *execution, flat=False)):
            fitted[key] = result
            new += result
            for budget in budgets:
                own[budget] += result
        if focus:
            after = {pair: best(pair) for pair in pairs}
            leading = {budget: max(q for (_, b), q in after.items() if b == budget) for _, budget in pairs}
            close = {budget: CLOSE * _spread_within(rows + own[budget], budget, sign) for _, budget in pairs}
            for pair in active:
                idle[pair] = 0 if after[pair] > before[pair] or after[pair] >= leading[pair[1]] \
                    or before[pair] == -np.inf else idle[pair] + 1  # none within yet: walking to the cheap end
            active = {pair for pair in active if idle[pair] == 0
                      or (idle[pair] < PATIENCE and leading[pair[1]] - after[pair] <= close[pair[1]])}
    return new


def _best_within(rows: list[dict], method: str, budget: float, sign: float) -> float:
    """The best validation quality (times ``sign``) of ``method``'s points within ``budget`` (-inf: none)."""
    return max((sign * row["quality"] for row in rows if row["method"] == method and row["cost"] <= budget),
               default=-np.inf)


def _refinements(method: Method, rows: list[dict], budget: float, sign: float) -> list[dict]:
    """New knob values for ``method`` around the budget: for each setting of its other parameters, the knob
    value whose points (any prefix) reach the best validation quality within the budget, and the midpoints
    between it and its neighbours among the values tried (as a bisection: each round halves the gaps around
    the best). When no point of a setting is within the budget, the midpoint towards the knob's cheap end; when
    only prefixes are (every whole model over the budget, as a subsample's bracket can leave a finalist on every
    row), that midpoint too: a model trained for the budget is usually better than a cut-down costlier one."""
    knob = method.knob
    settings: dict[tuple, dict] = {}
    for row in rows:
        params = row["params"]
        if knob.name not in params:  # a raw knob (e.g. cegb_tradeoff) given instead: not refined
            continue
        rest = {k: v for k, v in params.items() if k not in (knob.name, knob.record, "trees")}
        setting = settings.setdefault(_frozen(rest),
                                      {"rest": rest, "values": {}, "whole": {}})
        value = float(params[knob.name])
        best = setting["values"].setdefault(value, -np.inf)
        if row["cost"] <= budget:
            setting["values"][value] = max(best, sign * row["quality"])
        trees = params.get("trees", np.inf)  # the whole model: the most trees of the value's points
        if trees >= setting["whole"].get(value, (-np.inf, 0.0))[0]:
            setting["whole"][value] = (trees, row["cost"])
    new = []
    for setting in settings.values():
        values = sorted(setting["values"])
        qualities = [setting["values"][v] for v in values]
        targets = []
        if max(qualities) > -np.inf:
            i = int(np.argmax(qualities))
            targets = [knob.between(values[i], values[j]) for j in (i - 1, i + 1) if 0 <= j < len(values)]
        if knob.cheap_end is not None and all(cost > budget for _, cost in setting["whole"].values()):
            nearest = min(values, key=lambda v: abs(v - knob.cheap_end))
            targets.append(knob.between(nearest, knob.cheap_end))
        for target in targets:
            if all(abs(target - v) > 1e-9 * max(abs(v), 1e-12) for v in values):
                new.append({knob.name: target, **setting["rest"]})
    return new


def _grid_jobs(states: dict, grid: dict, context: Context, stage: str, skip=()) -> list[tuple]:
    """The jobs (method, state, params, stage) of each prepared method's grid (``grid``'s, else its default),
    but for the methods in ``skip``."""
    return [(METHODS[name], state, point, stage) for name, state in states.items() if name not in skip
            for point in (grid[name] if name in grid else METHODS[name].grid(context))]


def _prepared(names, context: Context) -> dict:
    """Each method's state for the sweep (``Method.prepare``), by name; a method every feature is free to, or whose
    first tree makes no split even without costs (NothingToTradeOff), is left out with a CEGBWarning (its points
    would all be plain models)."""
    states = {}
    for name in names:
        try:
            states[name] = METHODS[name].prepare(context)
        except NothingToTradeOff as exc:
            warnings.warn(f"sweep: {name} left out: {exc}", CEGBWarning, stacklevel=3)
    return states


# ------------------------------------------------------------------------------------------------ screening
#: sweep(screen=None): the training rows of the screen's subsample, and how many training rows a sweep with a
#: budget needs before it screens (below, a full sweep costs little more than the screen)
SCREEN_ROWS, SCREEN_FROM = 2_500, 20_000
#: the validation rows the screen measures on, at most (the per-row policies' runs cost as many as the fits)
SCREEN_VALID = 2_500
#: the methods of the best screened points within each budget that are refitted on every training row
SCREEN_KEEP = 2
#: the methods the screen refines around a budget: those of its best grid points within it (one more than are kept)
SCREEN_CONTENDERS = SCREEN_KEEP + 1
#: the settings of a finalist's other parameters (e.g. the acquisitions' caps) whose best screened points are
#: refitted on every training row
SCREEN_SETTINGS = 2
#: the rounds of refinement on every training row after a screen (the screen's points bracket the knob already); a
#: knob read at prediction (``Knob.read_at_predict``: no fit per value) is refined for every round of ``refine``
SCREEN_REFINE = 2


def _screen_size(screen, rows: int, budgets: tuple, frontier) -> int:
    """The training rows a sweep screens on (0: no screen), from ``screen`` as sweep takes it."""
    if screen is None:
        return SCREEN_ROWS if budgets and frontier is None and rows >= SCREEN_FROM else 0
    if screen is False:
        return 0
    size = SCREEN_ROWS if screen is True else screen
    check_number(size, "screen", 2, integer=True)
    if not budgets or frontier is not None:
        raise CEGBError(f"screen={screen!r}: a screen chooses the methods to fit on every row by their points "
                        "within a budget: it needs budget= and no frontier=")
    return int(size) if size < rows else 0


def _screen(names: list[str], context: Context, grid: dict, size: int, refine: int, focus: bool, sign: float,
            execution: tuple) -> tuple[list[tuple[str, dict]], dict[float, list[str]]]:
    """Sweep on a subsample of ``size`` training rows and of SCREEN_VALID validation rows (grids, and refinement of
    each budget's contenders);
    returns the points to refit on every training row, as (method, params), and each budget's finalists: the
    SCREEN_KEEP methods of the best points within it (none within: of the cheapest points), whose points
    :func:`_finalist_points` chooses."""
    valid = context.valid.subsample(SCREEN_VALID, context.task) if len(context.valid.y) > SCREEN_VALID else \
        context.valid
    sub = replace(context, train=context.train.subsample(size, context.task), valid=valid, shared={},
                  screen_of=len(context.train.y))
    LOG.info("sweep: screening on %d of the %d training rows and %d of the %d validation rows", len(sub.train.y),
             len(context.train.y), len(valid.y), len(context.valid.y))
    states = _prepared(names, sub)
    jobs = _grid_jobs(states, grid, sub, "screen")
    rows = _execute(jobs, sub, *execution)
    pairs = {(name, budget) for budget in context.budgets for name in _contenders(rows, budget, sign)
             if name in states and METHODS[name].knob is not None}
    rows += _refine(rows, pairs, states, sub, refine, focus, sign, execution, stage="screen refine")
    finalists, points = {}, {}
    for budget in context.budgets:
        kept = _leaders(rows, budget, sign) or \
            list(dict.fromkeys(row["method"] for row in sorted(rows, key=lambda row: row["cost"])))
        finalists[budget] = kept[:SCREEN_KEEP]
        LOG.info("sweep: budget %g: the screen keeps %s", budget, ", ".join(finalists[budget]))
        for name in finalists[budget]:
            for point in _finalist_points(METHODS[name], [row for row in rows if row["method"] == name], budget, sign):
                points.setdefault((name, _frozen(point)), (name, point))
    return list(points.values()), finalists


def _leaders(rows: list[dict], budget: float, sign: float) -> list[str]:
    """The methods with a point within ``budget``, the one of the best such point first (ties: in the rows' order)."""
    best = {name: _best_within(rows, name, budget, sign)
            for name in dict.fromkeys(row["method"] for row in rows if row["cost"] <= budget)}
    return sorted(best, key=lambda name: -best[name])


def _contenders(rows: list[dict], budget: float, sign: float) -> list[str]:
    """The methods the screen refines around ``budget``: the SCREEN_CONTENDERS whose grid points are best within it,
    and those with no point within it yet (their refinement walks towards the knob's cheap end)."""
    leaders = _leaders(rows, budget, sign)
    return leaders[:SCREEN_CONTENDERS] + [name for name in dict.fromkeys(row["method"] for row in rows)
                                          if name not in leaders]


def _finalist_points(method: Method, rows: list[dict], budget: float, sign: float) -> list[dict]:
    """The parameters of ``method``'s best screened point within ``budget`` (none within: its cheapest), each with
    its knob's nearest grid values on either side (a knob read at prediction: every grid value), in each of the
    SCREEN_SETTINGS settings of its other parameters whose best points within the budget are best."""
    knob = method.knob
    drop = {"trees"} | ({knob.record} if knob is not None and knob.record else set())

    def own(row) -> dict:  # what fits the point again: its parameters without the prefix and the knob's record
        return {k: v for k, v in row["params"].items() if k not in drop}

    def setting(row) -> tuple:
        return _frozen({k: v for k, v in own(row).items() if knob is None or k != knob.name})

    within = [row for row in rows if row["cost"] <= budget] or [min(rows, key=lambda row: row["cost"])]
    best: dict[tuple, dict] = {}  # each setting's best point within the budget
    for row in sorted(within, key=lambda row: (-sign * row["quality"], row["cost"])):
        best.setdefault(setting(row), row)
    points = []
    for key, row in list(best.items())[:SCREEN_SETTINGS]:
        point = own(row)
        points.append(point)
        if knob is None or knob.name not in point:
            continue
        value = float(point[knob.name])
        grid = {float(other["params"][knob.name]) for other in rows if other["stage"] == "screen"
                and knob.name in other["params"] and setting(other) == key}
        rest = {k: v for k, v in point.items() if k != knob.name}
        if knob.read_at_predict:  # no fit per value: every grid value (the full rows' costs may leave the bracket)
            near = sorted(grid - {value})
        else:
            near = [v for v in (max((v for v in grid if v < value), default=None),
                                min((v for v in grid if v > value), default=None)) if v is not None]
        points += [{**rest, knob.name: v} for v in near]
    return points


def sweep(methods: str | Sequence[str], train, valid, costs, *, task: str, grid: Mapping | None = None,
          metric: str | Metric | None = None, params: Mapping | None = None,
          num_boost_round: int = NUM_BOOST_ROUND, early_stopping_rounds: int = 20,
          budget: float | Sequence[float] | None = None,
          refine: int = 4, focus: bool = True, baseline: bool = True, n_jobs: int = 1, client=None,
          progress: bool | None = None, frontier: pd.DataFrame | None = None,
          screen: bool | int | None = None) -> pd.DataFrame:
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
        Refine a method around a budget only while it pays: while its rounds improve its best point within the
        budget, it leads the methods there, or it has no point within the budget yet. A method behind the
        leader is not refined there again after a round that brought it nothing better when it trails by more
        than 5% of the spread of the qualities within the budget, else after two such rounds. False: every
        method every round (the exhaustive sweep, several times slower where slow methods trail;
        ``scripts/bench_budget_workflow.py`` compares the two).
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
        --data large`` measures both). False: never. Needs a budget and no frontier.

    Returns
    -------
    pandas.DataFrame
        One row per fitted point: ``method``, ``quality``, ``cost`` (mean per validation row), ``coupled``,
        ``params`` (dict) and its keys as columns, ``stage`` ("grid", "refine" or, after a screen, "finalist"),
        ``model`` (a Candidate: ``.model``, ``.predict``, ``.cost``). ``frame.attrs`` holds ``metric``,
        ``greater_is_better``, ``task``, ``classes``, ``budget`` (None, the number given, or the list given,
        sorted), ``columns`` (train's column names, or None) and ``metric_object``; going on from a frontier,
        ``budget`` holds its budgets and these, and ``refined`` the budgets refined; after a screen, ``screen``.
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
    if not isinstance(focus, (bool, np.bool_)):
        raise CEGBError(f"focus should be True or False, got {focus!r:.60}")
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
        previous, refined = _go_on_from(frontier, context, budgets, sign)
    show = _show_progress() if progress is None else progress
    bar = None
    if show:
        from tqdm.auto import tqdm
        bar = tqdm(total=0, desc="sweep", unit="fit")
    execution = (n_jobs, client, bar)
    size = _screen_size(screen, len(train.y), budgets, frontier)
    if size:
        # the baseline is not screened: its search runs on every row whatever the screen finds (on a subsample its
        # order can miss a group that only pays at size), and the finalists' places go to the other methods
        points, finalists = _screen([name for name in names if name != BASELINE], context, grid, size, refine, focus,
                                    sign, execution)
        if BASELINE in names:
            points += [(BASELINE, point) for point in (grid[BASELINE] if BASELINE in grid else
                                                       METHODS[BASELINE].grid(context))]
        states = _prepared(dict.fromkeys(name for name, _ in points), context)
        jobs = [(METHODS[name], states[name], point, "finalist") for name, point in points if name in states]
        pairs = {(name, budget) for budget, kept in finalists.items() for name in kept
                 if name in states and METHODS[name].knob is not None}
        rounds, free_rounds = min(refine, SCREEN_REFINE), refine
    else:
        done = {row["method"] for row in previous}  # methods of the frontier given: no grid, refined where in a gap
        states = _prepared([name for name in names if name not in done or (refined and METHODS[name].knob is not None)],
                           context)
        jobs = _grid_jobs(states, grid, context, "grid", skip=done)
        swept_anew = {job[0].name for job in jobs}  # a method new to the frontier given: refined for every budget
        pairs = {(name, budget) for name in states if METHODS[name].knob is not None
                 for budget in (budgets if name in swept_anew else refined)}
        rounds = free_rounds = refine if budgets else 0
    rows = previous + _execute(jobs, context, *execution)
    rows += _refine(rows, pairs, states, context, rounds, focus, sign, execution, free_rounds=free_rounds)
    if bar is not None:
        bar.close()
    capped = [row for row in rows[len(previous):] if row["model"].capped]
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
    if size:
        fitted = {name for kept in finalists.values() for name in kept} | {BASELINE}  # on every training row
        frame.attrs["screen"] = {"rows": size, "finalists": {budget: list(kept) for budget, kept in finalists.items()},
                                 "left_out": [name for name in names if name not in fitted]}
    if frontier is not None:  # swept for its budgets and these
        every = sorted(set(swept_budgets(frontier.attrs.get("budget"))) | set(budgets))
        frame.attrs.update(budget=every[0] if len(every) == 1 else every or None, refined=list(refined))
    frame.attrs["metric_object"] = metric
    return frame
