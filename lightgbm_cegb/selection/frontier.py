"""Pareto frontiers, test evaluation and selection within a budget."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from lightgbm_cegb.core.errors import BudgetWarning, CEGBError
from lightgbm_cegb.core.validation import (
    CheckedElsewhere,
    Number,
    Numbers,
    Satisfies,
    caller_stacklevel,
    check_column_order,
    validated,
)
from lightgbm_cegb.selection.chosen import Selection
from lightgbm_cegb.selection.lightgbm_family import CEGB_RELATIVE_TRADEOFFS
from lightgbm_cegb.selection.metrics import Metric, get_metric
from lightgbm_cegb.selection.refinement import BUDGETS, in_gap, swept_budgets
from lightgbm_cegb.selection.registry import METHODS, Rows, encoded
from lightgbm_cegb.selection.sweep import METHOD_NAMES, ROWS, SWEEP_CONSTRAINTS, sweep


def pareto(frame: pd.DataFrame) -> pd.DataFrame:
    """The points of ``frame`` that no cheaper (or equally cheap) point matches in quality, by increasing cost.

    Over all its rows (filter one method first for that method's own frontier).

    Parameters
    ----------
    frame : pandas.DataFrame
        Points with columns ``cost`` and ``quality`` (a :func:`sweep` result); ``frame.attrs["greater_is_better"]``
        (default True) says which quality is better.

    Returns
    -------
    pandas.DataFrame
        The rows of the Pareto frontier, by increasing cost, with ``frame``'s ``attrs``.
    """
    _check_frame(frame, "pareto", ("cost", "quality"), ())
    sign = 1.0 if frame.attrs.get("greater_is_better", True) else -1.0
    ordered = frame.assign(_q=sign * frame["quality"]).sort_values(["cost", "_q"], ascending=[True, False],
                                                                   kind="stable")
    best, keep = -np.inf, []
    for index, q in zip(ordered.index, ordered["_q"]):
        if q > best:
            keep.append(index)
            best = q
    out = ordered.loc[keep].drop(columns="_q")
    out.attrs = dict(frame.attrs)
    return out


def best_point(frame: pd.DataFrame, budget: float) -> pd.Series | None:
    """The point :func:`select` chooses within ``budget``: the best validation quality among the points whose
    validation cost is at most ``budget`` (ties: the cheaper), or None when no point is within it.

    Parameters
    ----------
    frame : pandas.DataFrame
        Points with columns ``cost`` and ``quality`` (a :func:`sweep` result, or one method's points of it; any
        other columns, such as a test figure's, come with the row); ``frame.attrs["greater_is_better"]`` (default
        True) says which quality is better.
    budget : float
        The largest mean prediction cost per validation row.

    Returns
    -------
    pandas.Series or None
        The chosen row of ``frame``.
    """
    within = frame[frame["cost"] <= budget]
    return pareto(within).iloc[-1] if len(within) else None


def evaluate(frame: pd.DataFrame, rows, *, prefix: str = "test_") -> pd.DataFrame:
    """``frame`` with each point measured on other ``rows`` by the sweep's metric.

    Parameters
    ----------
    frame : pandas.DataFrame
        A :func:`sweep` result (or any frame with its columns and ``attrs``).
    rows : tuple or Rows
        (X, y) or (X, y, group); classification labels are mapped to the sweep's classes as its own were.
    prefix : str, optional
        The prefix of the new columns' names (default ``"test_"``).

    Returns
    -------
    pandas.DataFrame
        A copy of ``frame`` with the columns ``test_quality`` and ``test_cost`` (mean cost per row; ``prefix``
        names them), with ``frame``'s ``attrs``.
    """
    _check_frame(frame, "evaluate", ("model",), ("metric_object",))
    if not isinstance(prefix, str):
        raise CEGBError(f"evaluate: prefix should be a string, got {prefix!r:.40}")
    name = prefix.rstrip("_") or "rows"
    rows, metric = _sweep_labels(frame, Rows.of(rows, name), name), frame.attrs["metric_object"]
    figures = [row["model"].measure(rows, metric)[:2] for _, row in frame.iterrows()]
    out = frame.assign(**{f"{prefix}quality": [q for q, _ in figures], f"{prefix}cost": [c for _, c in figures]})
    out.attrs = dict(frame.attrs)
    return out


def _check_frame(frame, caller: str, columns: tuple, attrs: tuple) -> None:
    """``frame`` is a sweep's frame for ``caller``: a DataFrame with ``columns`` (numbers for cost and quality) and
    ``attrs`` (a frame read from CSV, or rebuilt from the values, has neither its models nor its attrs)."""
    if not isinstance(frame, pd.DataFrame):
        raise CEGBError(f"{caller}: frame should be a sweep's pandas DataFrame, got {type(frame).__name__}")
    missing = [c for c in columns if c not in frame.columns] + [f"attrs[{a!r}]" for a in attrs if a not in frame.attrs]
    if missing:
        raise CEGBError(f"{caller}: the frame lacks {missing}: pass the frame sweep returned, or rows of it (a frame "
                        "read from CSV, or rebuilt from the values, has neither its models nor its attrs)")
    for column in ("cost", "quality"):
        if column in columns and len(frame) and not pd.api.types.is_numeric_dtype(frame[column]):
            raise CEGBError(f"{caller}: the frame's column {column!r} should hold numbers, got {frame[column].dtype}")


def _sweep_labels(frame: pd.DataFrame, rows: Rows, name: str) -> Rows:
    """Rows labelled as the sweep's methods saw its labels (classification: indices in its classes); a frame of
    the sweep's training columns in another order is refused."""
    check_column_order(rows.X, frame.attrs.get("columns"), name, "the sweep's training columns")
    classes = frame.attrs.get("classes")
    return encoded(rows, None if classes is None else np.asarray(classes), name)


#: select's parameters
SELECT_CONSTRAINTS = {"frame": CheckedElsewhere("select, by the columns and attrs it reads"), "budget": Number(0.0),
                      "test": ROWS, "metric": CheckedElsewhere("get_metric, for the sweep's task")}


@validated(SELECT_CONSTRAINTS)
def select(frame: pd.DataFrame, budget: float, test=None, *, metric: str | Metric | None = None) -> Selection:
    """The point of ``frame`` with the best validation quality among those whose mean validation cost is at most
    ``budget`` (ties: the cheaper); with ``test`` rows, its test figures too.

    Parameters
    ----------
    frame : pandas.DataFrame
        A :func:`sweep` result (or any frame with its columns and ``attrs``).
    budget : float
        The largest mean prediction cost per validation row.
    test : tuple or Rows, optional
        Test rows, (X, y) or (X, y, group): the chosen point is measured on them.
    metric : str or Metric, optional
        The metric of the test figures (None: the sweep's).

    Returns
    -------
    Selection
        The chosen point.

    Raises
    ------
    CEGBError
        When ``frame`` is empty or no point is within ``budget``.

    Warns
    -----
    BudgetWarning
        When the frame was not swept for this budget and its best point within it costs less than 80% of it
        while dearer points exist (a gap in the grid: ``sweep(..., budget=)`` or :func:`fit_within_budget`
        refine the knobs there).
    """
    budget = float(budget)
    _check_frame(frame, "select", ("method", "params", "cost", "quality", "model"),
                 ("metric_object",) if test is not None and metric is None else ())
    if len(frame) == 0:
        raise CEGBError("the frontier is empty")
    best = best_point(frame, budget)
    if best is None:
        raise CEGBError(f"no point is within budget={budget:g}: the cheapest costs {frame['cost'].min():g} "
                        "per validation row; sweep further (a larger trade-off, a smaller budget_fraction)")
    sign = 1.0 if frame.attrs.get("greater_is_better", True) else -1.0
    if budget not in swept_budgets(frame.attrs.get("budget")) and \
            in_gap(frame["cost"].to_numpy(float), frame["quality"].to_numpy(float), budget, sign):
        warnings.warn(f"select: the best point within budget={budget:g} costs {best['cost']:g} and no point was "
                      f"swept between it and the budget; sweep(..., budget={budget:g}) or fit_within_budget refine "
                      "the methods' knobs there", BudgetWarning, stacklevel=caller_stacklevel())
    return _chosen(frame, best, test, metric)


def _chosen(frame: pd.DataFrame, best: pd.Series, test, metric) -> Selection:
    candidate = best["model"]
    classes = frame.attrs.get("classes")
    chosen = Selection(best["method"], dict(best["params"]), candidate.fitted_model(), candidate,
                       float(best["quality"]), float(best["cost"]), costs=frame.attrs.get("costs"),
                       decision_threshold=candidate.decision_threshold, task=frame.attrs.get("task"),
                       classes=None if classes is None else np.asarray(classes))
    if test is not None:
        used = get_metric(metric, frame.attrs["task"]) if metric is not None else frame.attrs["metric_object"]
        chosen.test_quality, chosen.test_cost, _ = candidate.measure(
            _sweep_labels(frame, Rows.of(test, "test"), "test"), used)
    return chosen


#: The methods :func:`fit_within_budget` sweeps by default: those that train in seconds on 100,000 rows (the
#: cheap-subset baseline joins every sweep). Pass ``methods`` for others (ADAPT, CSTC, BudgetRF, ...).
BUDGET_METHODS = ("lightgbm", "cegb", "greedy_miser", "budget_prune", "early_exit", "adaptive_acquisition",
                  "staged_acquisition", "staged_acquisition_ranker", "staged_acquisition_regressor")
#: below this many training rows, ADAPT-LIN (``adapt_lin``, a linear gate and a linear low-cost model) joins the
#: default methods of a classification task: on AFABench's CUBE (600 rows, 5 seeds) it lifts fit_within_budget's
#: test accuracy within 12 and 20 features from 0.792 (both) to 0.828 and 0.816, where the trees' capacity on few
#: rows is the ceiling (15% more time); on more rows the trees catch up and it would cost seconds per fit
LINEAR_ROWS = 5_000


#: fit_within_budget's parameters and the options it passes on to sweep
FIT_WITHIN_BUDGET_CONSTRAINTS = {
    **SWEEP_CONSTRAINTS, "budget": BUDGETS, "test": ROWS,
    "methods": Satisfies(lambda methods: methods is None or METHOD_NAMES.test(methods),
                         f"None, {METHOD_NAMES.words}", bad=METHOD_NAMES.bad[1:]),
}


@validated(FIT_WITHIN_BUDGET_CONSTRAINTS)
def fit_within_budget(train, valid, costs, budget: float | Sequence[float], *, task: str,
                      methods: Sequence[str] | None = None, test=None, refine: int = 4,
                      **options) -> Selection | list[Selection]:
    """The best model any method reaches within ``budget`` (mean prediction cost per validation row).

    One call for the budget workflow: :func:`sweep` of ``methods`` (default :data:`BUDGET_METHODS` that
    support the task, with the cheap-subset baseline) for this budget (each method's knob refined around it,
    each model's longest prefix within it a point), then :func:`select`. The returned Selection holds the whole
    sweep as ``frontier``. When no point is within the budget, a BudgetWarning says so and the cheapest point
    is returned with ``within_budget=False``. Given several budgets, one sweep serves them all (the grid fitted
    once, the knobs refined around each budget): one Selection per budget, in the order given, sharing the
    frontier; ``select(selection.frontier, b)`` answers any other budget ``b`` from it without fitting (and warns
    when ``b`` falls in a gap between the points swept). From 20,000 training rows on, the sweep screens the
    methods on a subsample and fits only each budget's leaders on every row (``screen``, see :func:`sweep`).

    Parameters
    ----------
    train : tuple or Rows
        The training rows, (X, y) or (X, y, group) with ``group`` the query sizes (ranking).
    valid : tuple or Rows
        The validation rows, the same way: early stopping, the knobs' refinement and the selection.
    costs : FeatureCosts, lazy costs per column, or None
        The cost model (by feature name when X is a DataFrame; None: every feature at 1), as :func:`sweep` takes it.
    budget : float or sequence of float
        The largest mean prediction cost per validation row; several: a Selection for each, from one sweep.
    task : str
        "binary", "multiclass", "regression" or "ranking" (see :func:`sweep`).
    methods : sequence of str, optional
        The methods swept (default: those of :data:`BUDGET_METHODS` that support the task, and for classification
        on fewer than LINEAR_ROWS = 5,000 training rows ADAPT-LIN; for ranking, BudgetPrune only with a pointwise
        ``objective`` in ``params`` and Early Exit only with a ranking or binary one). A
        method whose trade-off the costs or the data give nothing to weigh (every feature free to it; no split even
        without costs: too few rows, a constant target) is left out with a CEGBWarning naming it.
    test : tuple or Rows, optional
        Test rows, (X, y) or (X, y, group): the chosen point is measured on them.
    refine : int, default=4
        Rounds of refinement of each method's knob around the budget.
    **options : dict
        Passed on to :func:`sweep` (``params``, ``grid``, ``metric``, ``n_jobs``, ``progress``, ``screen``, ...).

    Returns
    -------
    Selection or list of Selection
        The chosen point, with the whole sweep as ``frontier``; for a sequence of budgets, one per budget.

    Warns
    -----
    BudgetWarning
        When no point is within a budget (the cheapest point is returned, ``within_budget=False``), or as
        :func:`select` warns.
    """
    budgets = swept_budgets(budget)
    if methods is None:
        methods = [m for m in BUDGET_METHODS if task in METHODS[m].tasks]
        if task in ("binary", "multiclass") and len(Rows.of(train, "train").y) < LINEAR_ROWS:
            methods.append("adapt_lin")
        if task == "ranking":  # BudgetPrune ranks with a pointwise objective, Early Exit with a ranking one
            from lightgbm_cegb.methods.budget_prune import PRUNE_OBJECTIVES
            from lightgbm_cegb.methods.early_exit import CLASSIFICATION_OBJECTIVES, RANKING_OBJECTIVES
            objective = dict(options.get("params") or {}).get("objective", "lambdarank")
            reads = {"budget_prune": PRUNE_OBJECTIVES, "early_exit": RANKING_OBJECTIVES + CLASSIFICATION_OBJECTIVES}
            methods = [m for m in methods if objective in reads.get(m, (objective,))]
    several = np.ndim(budget) != 0
    frame = sweep.unchecked(methods, train, valid, costs, task=task,
                            budget=list(budgets) if several else budgets[0], refine=refine, **options)
    if frame.empty:
        raise CEGBError(f"fit_within_budget: no method gave a point (methods {list(methods)}, "
                        f"baseline={options.get('baseline', True)})")
    chosen = [_within(frame, float(b), test) for b in (budget if several else [budget])]
    return chosen if several else chosen[0]


def best_subset(train, valid, costs, budget: float | Sequence[float], *, task: str, test=None,
                **options) -> Selection | list[Selection]:
    """Which features to buy within ``budget``: the best feature subset the cheap-subset baseline's search finds
    (forward by validation gain per unit of cost, groups as units, backward pruning; see
    :mod:`lightgbm_cegb.selection.baseline`), with plain LightGBM on it.

    :func:`fit_within_budget` with ``methods=["cheap_subset"]`` and no screen: the returned Selection's
    ``params["features"]`` names the units bought (groups by name, ungrouped features by column name), its model
    reads only their columns (the others hidden as missing values), and its frontier holds the search's path.

    Parameters
    ----------
    train : tuple or Rows
        The training rows, (X, y) or (X, y, group).
    valid : tuple or Rows
        The validation rows: the search's measures, early stopping and the choice.
    costs : FeatureCosts, lazy costs per column, or None
        The cost model, as :func:`sweep` takes it.
    budget : float or sequence of float
        The largest mean prediction cost per validation row; several: a Selection for each, from one search (within
        the largest).
    task : str
        "binary", "multiclass", "regression" or "ranking".
    test : tuple or Rows, optional
        Test rows: the chosen subset's model is measured on them.
    **options : dict
        Passed on to :func:`sweep` (``params``, ``metric``, ``grid={"cheap_subset": [{"steps": n}]}``, ...).

    Returns
    -------
    Selection or list of Selection
        The chosen subset's model; for a sequence of budgets, one per budget.

    Examples
    --------
    >>> from lightgbm_cegb.datasets import HIGGS_COSTS, higgs
    >>> from lightgbm_cegb.selection import best_subset
    >>> X, y = higgs("train")
    >>> chosen = best_subset((X[:5000], y[:5000]), (X[5000:], y[5000:]), HIGGS_COSTS, 40.0, task="binary",
    ...                      progress=False)
    >>> chosen.valid_cost <= 40.0 and len(chosen.params["features"]) > 0
    True
    """
    return fit_within_budget(train, valid, costs, budget, task=task, methods=["cheap_subset"], test=test,
                             screen=False, **options)


def _within(frame: pd.DataFrame, budget: float, test) -> Selection:
    """fit_within_budget's choice for one budget from its sweep."""
    if (frame["cost"] <= budget).any():
        chosen = select.unchecked(frame, budget, test)
    else:
        cheapest = frame.loc[frame["cost"].idxmin()]
        warnings.warn(f"fit_within_budget: budget={budget:g} is below every method's cheapest point (the "
                      f"cheapest, {cheapest['method']}, costs {cheapest['cost']:g} per validation row); returning "
                      "that point", BudgetWarning, stacklevel=caller_stacklevel())
        chosen = _chosen(frame, cheapest, test, None)
        chosen.within_budget = False
    chosen.frontier = frame
    return chosen


#: train_to_budget's parameters and the options it passes on to sweep (all but its methods and grid: its own)
TRAIN_TO_BUDGET_CONSTRAINTS = {
    **{name: constraint for name, constraint in SWEEP_CONSTRAINTS.items() if name not in ("methods", "grid")},
    "budget": Number(0.0), "test": ROWS, "relative_tradeoffs": Numbers(Number(0.0)),
}


@validated(TRAIN_TO_BUDGET_CONSTRAINTS)
def train_to_budget(train, valid, costs, budget: float, *, task: str, test=None,
                    relative_tradeoffs: Sequence[float] = CEGB_RELATIVE_TRADEOFFS,
                    refine: int = 4, **options) -> Selection:
    """CEGB trained to a budget: every model is trained with ``budget_stopping`` and early stopping.

    With ``budget_stopping`` a model's mean validation cost stays within ``budget``; the search over
    ``cegb_tradeoff`` (in units of :func:`~lightgbm_cegb.lgbm.cegb_tradeoff_scale`) starts on
    ``relative_tradeoffs`` (CEGB's default grid: where the cost moves depends on the data, and a sparse start
    misses it, e.g. MNIST's between 0 and 0.05) and then halves, ``refine`` times, the geometric gap around the
    best point (``sweep(..., budget=)``). The cheap-subset baseline is not swept.

    Parameters
    ----------
    train : tuple or Rows
        The training rows, (X, y) or (X, y, group) with ``group`` the query sizes (ranking).
    valid : tuple or Rows
        The validation rows, the same way.
    costs : FeatureCosts, lazy costs per column, or None
        The cost model (by feature name when X is a DataFrame; None: every feature at 1), as :func:`sweep` takes it.
    budget : float
        The largest mean prediction cost per validation row.
    task : str
        "binary", "multiclass", "regression" or "ranking" (see :func:`sweep`).
    test : tuple or Rows, optional
        Test rows, (X, y) or (X, y, group): the chosen point is measured on them.
    relative_tradeoffs : sequence of float, default=CEGB_RELATIVE_TRADEOFFS
        The starting grid of ``relative_tradeoff`` (CEGB's default grid).
    refine : int, default=4
        Rounds of halving the gap around the best point.
    **options : dict
        Passed on to :func:`sweep` (``params``, ``metric``, ``n_jobs``, ...; ``baseline`` is set to False).

    Returns
    -------
    Selection
        The :func:`select` of all points tried.

    Raises
    ------
    CEGBError
        When no point is within ``budget`` (as :func:`select`).
    """
    frame = sweep.unchecked("cegb", train, valid, costs, task=task, budget=budget, refine=refine,
                            grid={"cegb": [{"relative_tradeoff": r, "budget": budget} for r in relative_tradeoffs]},
                            **{**options, "baseline": False})
    return select.unchecked(frame, budget, test)
