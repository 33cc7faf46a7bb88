"""
Quality-cost frontier on HIGGS
==============================

A budgeted method is judged by its frontier: the best validation quality it reaches at each mean prediction
cost per row. :func:`lightgbm_cegb.selection.sweep` fits every grid point of several methods on the same
training rows and measures each point on the same validation rows: its quality (accuracy here) and its exact
mean cost per row. :func:`lightgbm_cegb.selection.plots.plot_frontiers` draws one line per method.

The data is the bundled HIGGS subset. Its 21 low-level features cost 1 each and its 7 high-level features
cost 10 each (``HIGGS_COSTS``), so a model that reads every feature costs 91 per row.
"""

# %%
# Data and costs
# --------------
# The bundled training split has 7,000 rows. We train on the first 5,000 and keep the last 2,000 as the
# validation rows of the sweep.

import matplotlib.pyplot as plt

from lightgbm_cegb.datasets import HIGGS_COSTS, higgs
from lightgbm_cegb.selection import pareto, sweep
from lightgbm_cegb.selection.plots import plot_frontiers

X, y = higgs("train")
train, valid = (X[:5000], y[:5000]), (X[5000:], y[5000:])
print("rows:", len(train[1]), "train,", len(valid[1]), "valid; features:", X.shape[1])
print("cost of reading every feature:", HIGGS_COSTS.lazy.sum())

# %%
# The sweep
# ---------
# Four methods, each with a small grid:
#
# - ``lightgbm``: plain LightGBM, which ignores the costs (the reference point);
# - ``cegb``: CEGB on the patched LightGBM, ``relative_tradeoff`` in [0, 1] (1: the first tree makes no
#   split);
# - ``greedy_miser``: Greedy Miser, its ``relative_tradeoff`` on the same scale;
# - ``early_exit``: the plain model stopped early for rows whose predicted probability is already far
#   from 0.5 (``threshold``).
#
# Every boosted model also gives a point for each of its prefixes of ``trees`` iterations. The cheap-subset
# baseline (plain LightGBM on a greedily chosen subset of features) joins every sweep unless
# ``baseline=False``; it is kept here. ``num_boost_round`` caps the rounds; early stopping on the validation
# rows decides below it. ``params`` are LightGBM parameters for the LightGBM-based methods; the Greedy Miser
# grid points carry that estimator's own parameters (a larger ``learning_rate`` so that it converges within
# the cap).

grid = {
    "lightgbm": [{"trees": (1, 3, 10, 30)}],
    "cegb": [{"relative_tradeoff": r, "trees": (3, 10, 30)} for r in (0.02, 0.1, 0.3, 0.6, 0.9)],
    "greedy_miser": [{"relative_tradeoff": r, "trees": (3, 10, 30), "learning_rate": 0.3, "n_jobs": 1}
                     for r in (0.003, 0.03, 0.2, 0.7)],
    "early_exit": [{"threshold": t} for t in (0.6, 0.7, 0.8, 0.9)],
}
frame = sweep(list(grid), train, valid, HIGGS_COSTS, task="binary", grid=grid, num_boost_round=500,
              params={"num_leaves": 15, "learning_rate": 0.1, "num_threads": 1}, progress=False)
print(frame.groupby("method").size().rename("points"))

# %%
# Each row of the frame is one fitted point: its method, its parameters, its validation ``quality``
# (``frame.attrs["metric"]``) and its mean ``cost`` per validation row. :func:`~lightgbm_cegb.selection.pareto`
# keeps the points that no cheaper point matches in quality.

best = pareto(frame)
print(best[["method", "cost", "quality", "trees", "relative_tradeoff", "threshold"]].to_string(index=False))

# %%
# The frontiers
# -------------
# One line per method: its own Pareto frontier (``pareto_only=True``, the default). The dashed line marks
# a budget of 30 per row.

fig, ax = plt.subplots(figsize=(7, 4.5))
plot_frontiers(frame, ax=ax, budget=30.0, title="HIGGS subset: validation accuracy against mean cost")
ax.set_xlim(0, HIGGS_COSTS.lazy.sum() + 5)
fig.tight_layout()
plt.show()

# %%
# Reading the plot: plain LightGBM ignores the costs, so even its one-tree prefix reads several high-level
# features and its whole model reads most features for most rows. CEGB and Greedy Miser come close to its
# accuracy at a fraction of its cost, because the trade-off makes the trees reuse the features a row has
# already paid for and pass over the expensive ones. Early Exit saves less: it checks a row's margin every
# 10 trees, and the plain model's first trees already read many features. The cheap-subset baseline is strong
# at the cheapest end, where a few unit-cost features are all a model can afford; a budgeted method earns its
# place by beating it.
#
# To pick a model for a budget, call :func:`lightgbm_cegb.selection.select` on this frame, or
# :func:`lightgbm_cegb.selection.fit_within_budget`, which also refines each method's knob around the budget
# (see the budget-stopping example).

within = frame[frame["cost"] <= 30.0]
print("best point of each method within 30 per row:")
print(within.sort_values("quality").groupby("method").tail(1)[["method", "cost", "quality"]].to_string(index=False))
