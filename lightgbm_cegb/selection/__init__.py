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

Methods are registered in :data:`METHODS` by :func:`register` (the registrations of the package's methods are
in this module, after :func:`register`); a method landing later joins every sweep, plot and script
(``scripts/frontiers.py``, ``scripts/reproduce_yahoo.py``) with one ``@register(...)``. The knobs of the
registered methods, each on a documented scale:

- ``lightgbm``: plain LightGBM (no costs), any LightGBM parameter; the reference point.
- ``cegb``: ``relative_tradeoff`` r in [0, 1]: ``cegb_tradeoff = r * scale`` where ``scale`` is the
  smallest trade-off at which the first tree of the training data makes no split
  (:func:`cegb_tradeoff_scale`): r = 1 is a model without splits, whatever the costs' units and the
  number of rows. ``cegb_tradeoff`` sets the raw value instead. Trained with early stopping on the
  validation rows, and with ``budget_stopping`` when the point has a ``budget``.
- ``budget_prune``: ``budget_fraction`` f in (0, 1]: BudgetPrune (``budget_prune(..., budget=B)``,
  exact) of a plain LightGBM model to ``B = f x`` its own mean cost on the pruning rows (the training
  rows); ``tradeoff`` sets the raw trade-off instead. Ranking: with a regression or binary objective in
  ``params`` (BudgetPrune has no lambdarank loss).
- ``early_exit``: ``threshold`` of ``EarlyExit`` on a plain LightGBM model (classification: a
  probability; ranking: the proximity margin), ``every`` (default 10).
- ``greedy_miser``: ``relative_tradeoff`` r in [0, 1]: ``tradeoff = r * scale``, the scale being the smallest
  ``tradeoff`` at which the first tree has no split (``GreedyMiser*.tradeoff_scale``); ``tradeoff`` sets the raw
  value. Early stopping
  on the validation rows keeps the best iteration (``GreedyMiserRanker``: NDCG@5).
- ``adapt_gbrt``: ``p_full`` and ``relative_tradeoff`` of ``AdaptGBRT`` (tradeoff = r x Greedy Miser's
  ``tradeoff_scale``) in front of f0, the plain LightGBM model (classification).
- ``adapt_lin``: ``p_full`` and ``relative_tradeoff`` of ``AdaptLIN`` (tradeoff = r x
  ``AdaptLIN.tradeoff_scale``, the smallest tradeoff at which f1 reads no feature) in front of the same f0
  (classification; finite X).
- ``cstc``, ``cscc``, ``cronus``: ``relative_tradeoff`` r of ``CSTC`` / ``CSCC`` / ``Cronus`` (tradeoff = r x
  ``tradeoff_scale``, the variance of
  the targets they fit: the labels, or -1 / +1 for binary tasks and for the cascades, whose ranking targets are
  relevant (y > 0) or not; CSTC's ranking regresses the relevance labels) on the outputs of the plain LightGBM
  model's trees (the boosting trick), pruned on the validation rows; binary scores are ``(f + 1) / 2`` clipped
  to [0, 1] (squared-loss classifiers: accuracy and AUC, not log-loss). ``phi_trees`` (and ``phi_depth``, default
  4) in a grid point: phi is instead the paper's own boosting trick, that many squared-loss trees of that depth
  trained on the targets (one model per setting, shared by the trade-offs); the estimator's other parameters
  (``depth``, ``polish``, ``n_stages``, ...) pass through.
- ``budgetrf``: ``tradeoff`` (the paper's alpha) of ``BudgetRFClassifier`` (classification; ranking on
  label >= 1).
- ``adaptive_acquisition``: ``relative_tradeoff`` r of ``AdaptiveAcquisitionClassifier`` (tradeoff = r x its
  first decision's best gain per unit of cost, above which nothing is bought; ``tradeoff`` the raw value),
  ``max_cost`` (a per-row cap; default none), ``gain`` ("accuracy" or "entropy") and ``policy_rounds`` (0 or 1,
  the classifier's); one classifier per ``policy_rounds`` is fitted in a sweep (early stopped on the validation
  rows, in the process that first needs it) and every point reads it with its own policy (classification).
- ``staged_acquisition``: ``relative_tradeoff`` r of ``StagedAcquisitionClassifier`` (a row stops at the first
  stage whose top class probability is at least 1 - r x (1 - the most frequent class's share); ``tradeoff`` the
  raw value) and ``max_cost`` (a per-row cap; default none); one model is fitted in a sweep (early stopped on the
  validation rows) and every point reads it with its own exit rule (classification).
- ``staged_acquisition_ranker``: ``tradeoff`` of ``StagedAcquisitionRanker`` (the share of a query's documents at a
  stage that each cut stops), ``top_k`` (the documents per query that go on at every cut) and ``max_cost`` (a
  per-document cap); one model is fitted in a sweep (each stage's ranker early stopped on the validation queries)
  and every point reads it with its own cuts (ranking).
- ``staged_acquisition_regressor``: ``relative_tradeoff`` r of ``StagedAcquisitionRegressor`` (a row stops at the
  first stage whose gap model predicts its prediction within r x stage 0's predicted gap of the last stage's;
  ``tradeoff`` the raw value, in units of the targets' standard deviation) and ``max_cost``; one model is fitted in a
  sweep (early stopped, and its gap models learned, on the validation rows) and every point reads it (regression).
- ``catboost``: ``penalties_coefficient`` of CatBoost (CPU) with the lazy costs as its
  ``per_object_feature_penalties`` and the coupled ones as its ``first_feature_use_penalties`` (a group's own costs
  spread over its members; CatBoost has no groups), early stopped on the validation rows; ``depth``,
  ``learning_rate``, ``l2_leaf_reg`` pass through. The protocol's peer of CEGB (needs the extra ``catboost``;
  not among :func:`fit_within_budget`'s defaults).
- ``cheap_subset``: the baseline, the subset search's path (``selection.baseline``); ``steps`` (default 20).

Every boosted or bagged method also takes ``trees``: the prefix lengths that are points (default
``PREFIX_TREES``).
"""


import lightgbm_cegb.selection.baseline  # noqa: F401,E402 (registers the cheap-subset baseline)
from lightgbm_cegb.selection.adapters import PREFIX_TREES  # (importing it registers the package's methods)
from lightgbm_cegb.selection.chosen import Selection, estimator_class
from lightgbm_cegb.selection.frontier import (
    BUDGET_METHODS,
    best_point,
    best_subset,
    evaluate,
    fit_within_budget,
    pareto,
    select,
    train_to_budget,
)
from lightgbm_cegb.selection.metrics import METRICS, Metric, get_metric
from lightgbm_cegb.selection.registry import METHODS, TASKS, Candidate, Context, Knob, Method, Rows, register
from lightgbm_cegb.selection.scorer import cost_scorer
from lightgbm_cegb.selection.sweep import sweep

__all__ = ["BUDGET_METHODS", "METHODS", "METRICS", "PREFIX_TREES", "TASKS", "Candidate", "Context", "Knob", "Method",
           "Metric", "Rows", "Selection", "best_point", "best_subset", "cost_scorer", "estimator_class", "evaluate",
           "fit_within_budget", "get_metric", "pareto", "register", "select", "sweep", "train_to_budget"]
