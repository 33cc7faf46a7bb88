"""The workflows of selection within a budget, one call each: sweep then select (:func:`fit_within_budget`), the
cheap-subset baseline alone (:func:`best_subset`), and CEGB trained to the budget (:func:`train_to_budget`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from lightgbm_cegb.core.errors import BudgetWarning, CEGBError
from lightgbm_cegb.core.validation import (
    Number,
    Numbers,
    Satisfies,
    caller_stacklevel,
    validated,
)
from lightgbm_cegb.selection.chosen import Selection
from lightgbm_cegb.selection.frontier import select, selection_of
from lightgbm_cegb.selection.lightgbm_family import CEGB_RELATIVE_TRADEOFFS
from lightgbm_cegb.selection.refinement import BUDGETS, swept_budgets
from lightgbm_cegb.selection.registry import METHODS, Rows
from lightgbm_cegb.selection.runner import METHOD_FITS
from lightgbm_cegb.selection.sweep import METHOD_NAMES, ROWS, SWEEP_CONSTRAINTS, sweep

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
    when ``b`` falls in a gap between the points swept). From 20,000 training rows on (or 5,000 holding 20 million
    cells), the sweep screens the methods on a subsample and fits only each budget's leaders on every row
    (``screen``, see :func:`sweep`); ``frontier.attrs["seconds"]`` gives each method's time. Each method has
    the time of METHOD_FITS = 20 plain LightGBM fits of the rows (at least 30 s) in each stage, past which it
    starts no point that trains a model (``method_fits``, see :func:`sweep`: a CEGBWarning names a method
    stopped).

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
        Passed on to :func:`sweep` (``params``, ``grid``, ``metric``, ``n_jobs``, ``progress``, ``screen``,
        ``method_fits`` (default METHOD_FITS; None: no limit), ...).

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
    options.setdefault("method_fits", METHOD_FITS)
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
                             screen=False, **{"method_fits": None, **options})


def _within(frame: pd.DataFrame, budget: float, test) -> Selection:
    """fit_within_budget's choice for one budget from its sweep."""
    if (frame["cost"] <= budget).any():
        chosen = select.unchecked(frame, budget, test)
    else:
        cheapest = frame.loc[frame["cost"].idxmin()]
        warnings.warn(f"fit_within_budget: budget={budget:g} is below every method's cheapest point (the "
                      f"cheapest, {cheapest['method']}, costs {cheapest['cost']:g} per validation row); returning "
                      "that point", BudgetWarning, stacklevel=caller_stacklevel())
        chosen = selection_of(frame, cheapest, test, None)
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
