"""From costs and a budget to the best model: sweeps, Pareto frontiers, selection within a budget.

    from lightgbm_cegb.selection import fit_within_budget, sweep, select
    best = fit_within_budget((X, y), (X_valid, y_valid), costs, budget=30.0, task="binary",
                             test=(X_test, y_test))
    best.model, best.valid_quality, best.valid_cost, best.test_quality, best.frontier

    frontier = sweep(["cegb", "budget_prune", "early_exit"], (X, y), (X_valid, y_valid), costs, task="binary")
    best = select(frontier, budget=30.0, test=(X_test, y_test))

One protocol for every method (the reasons: a comparison of methods is fair only if each gets the same
chances): every grid point is trained on the training rows, the boosted ones with early stopping on the
validation rows (patience ``early_stopping_rounds``, under a cap ``num_boost_round`` that a RoundsWarning reports
when it binds); every boosted or bagged model is also a point with each prefix of ``PREFIX_TREES`` iterations
below its best (a prefix is a cheaper model at no training cost, which Greedy Miser's and BudgetRF's papers
report and CEGB's would have too); with a budget, each model's longest prefix within it is a point (what
``budget_stopping`` trains) and each method's knob is refined around the budget (:class:`Knob`); every point is
measured on the same validation rows; and the cheap-subset baseline (plain LightGBM on a greedily chosen
cost-aware subset of features or groups, :mod:`lightgbm_cegb.selection.baseline`) joins every sweep, so that a
budgeted method is always compared with what a user would try by hand.

Every point of a sweep is a fitted model measured on the validation rows: its quality (``metric``) and its
exact mean prediction cost per row (the package's accounting, ``CostReport.mean``: lazy acquisition plus
evaluation; a coupled cost, paid once per model, is not per row and is reported in ``coupled``).

Methods are registered in :data:`METHODS`: the package's by family, each module defining its methods beside their
knobs' documentation (a :class:`~lightgbm_cegb.selection.registry.Family`) and registered here, explicitly; a
user's method joins every sweep, plot and script (``scripts/frontiers.py``, ``scripts/reproduce_yahoo.py``) with
one ``@register(...)``. The families and their knobs:

- :mod:`~lightgbm_cegb.selection.lightgbm_family`: ``lightgbm``, ``cegb``, ``budget_prune``, ``early_exit``;
- :mod:`~lightgbm_cegb.selection.greedy_family`: ``greedy_miser``, ``adapt_gbrt``, ``adapt_lin``, ``adapt_l1``;
- :mod:`~lightgbm_cegb.selection.forest_family`: ``budgetrf``;
- :mod:`~lightgbm_cegb.selection.cstc_family`: ``cstc``, ``cscc``, ``cronus``;
- :mod:`~lightgbm_cegb.selection.acquisition_family`: ``adaptive_acquisition``, ``staged_acquisition``,
  ``staged_acquisition_ranker``, ``staged_acquisition_regressor``;
- :mod:`~lightgbm_cegb.selection.catboost_family`: ``catboost``;
- :mod:`~lightgbm_cegb.selection.baseline`: ``cheap_subset``, the baseline, the subset search's path; ``steps``
  (default 20).

Every boosted or bagged method also takes ``trees``: the prefix lengths that are points (default
``PREFIX_TREES``).
"""


from lightgbm_cegb.selection import (
    acquisition_family,
    baseline,
    catboost_family,
    cstc_family,
    forest_family,
    greedy_family,
    lightgbm_family,
)
from lightgbm_cegb.selection.chosen import Selection, estimator_class
from lightgbm_cegb.selection.frontier import best_point, evaluate, pareto, select
from lightgbm_cegb.selection.metrics import METRICS, Metric, get_metric
from lightgbm_cegb.selection.points import PREFIX_TREES
from lightgbm_cegb.selection.registry import METHODS, TASKS, Candidate, Context, Knob, Method, Rows, register
from lightgbm_cegb.selection.scorer import cost_scorer
from lightgbm_cegb.selection.sweep import sweep
from lightgbm_cegb.selection.workflows import BUDGET_METHODS, best_subset, fit_within_budget, train_to_budget

for _family in (baseline, lightgbm_family, forest_family, greedy_family, cstc_family, acquisition_family,
                catboost_family):
    _family.FAMILY.register()

__all__ = ["BUDGET_METHODS", "METHODS", "METRICS", "PREFIX_TREES", "TASKS", "Candidate", "Context", "Knob", "Method",
           "Metric", "Rows", "Selection", "best_point", "best_subset", "cost_scorer", "estimator_class", "evaluate",
           "fit_within_budget", "get_metric", "pareto", "register", "select", "sweep", "train_to_budget"]
