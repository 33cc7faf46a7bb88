"""
Training to a budget
====================

A budget here is a mean prediction cost per row, measured on validation rows. Two tools train models that
keep to it:

- :func:`lightgbm_cegb.lgbm.budget_stopping`, a LightGBM callback: training stops when the next
  iteration would take the mean cost on the given rows over the budget, and the booster's
  ``best_iteration`` becomes the best iteration within it;
- :func:`lightgbm_cegb.selection.fit_within_budget`: a sweep of several methods for that budget (each
  method's knob refined around it), then the best point within it.

The data is the bundled HIGGS subset with its costs (1 per low-level feature, 10 per high-level one; 91 for
every feature).
"""

# %%
# The budget_stopping callback
# ----------------------------

import warnings

import lightgbm as lgb
import matplotlib.pyplot as plt

from lightgbm_cegb import BudgetWarning, prediction_cost
from lightgbm_cegb.datasets import HIGGS_COSTS, higgs
from lightgbm_cegb.lgbm import budget_stopping, cegb_tradeoff_scale, record_cost
from lightgbm_cegb.selection import fit_within_budget
from lightgbm_cegb.selection.plots import plot_frontiers

X, y = higgs("train")
X_train, y_train, X_valid, y_valid = X[:5000], y[:5000], X[5000:], y[5000:]
X_test, y_test = higgs("test")
train_set = lgb.Dataset(X_train, y_train, free_raw_data=False)
valid_set = lgb.Dataset(X_valid, y_valid, reference=train_set)

params = {"objective": "binary", "metric": "auc", "num_leaves": 15, "learning_rate": 0.1, "num_threads": 1,
          "verbose": -1, "seed": 0}
cost_params = HIGGS_COSTS.to_params()
scale = cegb_tradeoff_scale({**params, **cost_params}, train_set)
cegb_params = {**params, **cost_params, "cegb_tradeoff": 0.5 * scale}

# %%
# A CEGB model trained with ``budget_stopping`` at a budget of 25 per row, with LightGBM's early stopping
# as well (the model kept is then the best validation iteration within the budget), and ``record_cost`` to
# see the cost of every iteration trained. The callbacks are listed in the order they should run:
# ``record_cost`` first, so that it records the iteration at which ``budget_stopping`` stops.

budget = 25.0
costs = {}
booster = lgb.train(cegb_params, train_set, 500, valid_sets=[valid_set], valid_names=["valid"],
                    callbacks=[record_cost(X_valid, HIGGS_COSTS, costs),
                               budget_stopping(X_valid, HIGGS_COSTS, budget, verbose=True),
                               lgb.early_stopping(20, verbose=False)])
kept = prediction_cost(booster, X_valid, HIGGS_COSTS)  # the best iteration, as predict uses
print(f"stopped after iteration {len(costs['cost'])}, kept {booster.best_iteration}: "
      f"mean cost {kept.mean:.2f} <= {budget:g}, validation AUC {booster.best_score['valid']['auc']:.3f}")

# %%
# Budget stopping raises LightGBM's ``EarlyStopException``, so ``predict``, ``save_model`` and
# ``prediction_cost`` use the best iteration within the budget by default.
#
# Plain LightGBM, priced with the same costs, cannot meet this budget: its first tree already reads
# features worth more than 25 per row. ``budget_stopping`` then keeps the first iteration and says so with
# a ``BudgetWarning``.

plain_costs = {}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", BudgetWarning)
    plain = lgb.train(params, train_set, 500, valid_sets=[valid_set], valid_names=["valid"],
                      callbacks=[record_cost(X_valid, HIGGS_COSTS, plain_costs),
                                 budget_stopping(X_valid, HIGGS_COSTS, budget, verbose=False),
                                 lgb.early_stopping(20, verbose=False)])
print([str(w.message) for w in caught if issubclass(w.category, BudgetWarning)])
print(f"plain LightGBM: kept {plain.best_iteration} iteration, cost {plain_costs['cost'][0]:.2f}")

# %%
# The best model within a budget, over several methods
# -----------------------------------------------------
# ``fit_within_budget`` sweeps the given methods (default: ``lightgbm``, ``cegb``, ``greedy_miser``,
# ``budget_prune``, ``early_exit``, and always the cheap-subset baseline) for this budget: each boosted
# model's longest prefix within the budget is a point, and each method's knob is bisected ``refine`` times
# around the budget. It returns a ``Selection``: the chosen model, its validation figures, its test
# figures when ``test`` rows are given, and the whole sweep as ``frontier``. Small grids keep this example
# short.

best = fit_within_budget((X_train, y_train), (X_valid, y_valid), HIGGS_COSTS, budget, task="binary",
                         methods=["lightgbm", "cegb", "greedy_miser"], test=(X_test, y_test), refine=2,
                         grid={"lightgbm": [{}],
                               "cegb": [{"relative_tradeoff": r} for r in (0.1, 0.5, 0.9)],
                               "greedy_miser": [{"relative_tradeoff": r, "learning_rate": 0.3, "n_jobs": 1}
                                                for r in (0.03, 0.3, 0.9)]},
                         num_boost_round=300, params={"num_leaves": 15, "num_threads": 1}, progress=False)
print(f"chosen: {best.method} {best.params}")
print(f"validation: accuracy {best.valid_quality:.3f} at cost {best.valid_cost:.2f}")
print(f"test:       accuracy {best.test_quality:.3f} at cost {best.test_cost:.2f}")
frame = best.frontier
print(frame.groupby(["method", "stage"]).size().rename("points").to_string())

# %%
# The chosen point is often a prefix of a model (``trees`` in its parameters); ``best.model`` holds only
# those trees. The budget bounds the mean cost on the validation rows: on other rows, such as the test rows
# here, the same model's mean cost differs a little, and may exceed the budget.

# %%
# The plots
# ---------
# Left: the cost curves of the two boosters trained above, with the budget; each stops at its first
# iteration over the budget, and the dot is the iteration it keeps. Right: the frontiers of
# ``fit_within_budget``'s sweep and the chosen point.

fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
for name, model, curve in (("CEGB", booster, costs), ("plain LightGBM", plain, plain_costs)):
    line, = left.plot(range(1, len(curve["cost"]) + 1), curve["cost"], label=name)
    left.plot(model.best_iteration, curve["cost"][model.best_iteration - 1], "o", color=line.get_color())
left.axhline(budget, color="grey", linestyle="--", linewidth=1, label=f"budget {budget:g}")
left.set_xlabel("iteration")
left.set_ylabel("mean cost per validation row")
left.set_title("budget_stopping")
left.legend()
plot_frontiers(frame, ax=right, budget=budget, title="fit_within_budget")
right.plot(best.valid_cost, best.valid_quality, "k*", markersize=14, label="chosen")
right.legend(fontsize="small")
right.set_xlim(0, 60)
fig.tight_layout()
plt.show()
