"""
Cost after each iteration
=========================

A boosted model's prediction cost grows with its trees: each new tree may send a row to a feature it has not
read yet. :func:`lightgbm_cegb.lgbm.record_cost` is a LightGBM callback that records the mean cost per row
of given rows after every iteration, next to the validation metric that ``lightgbm.record_evaluation``
records. Here we compare plain LightGBM and CEGB on the bundled HIGGS subset.
"""

# %%
# Data and parameters
# -------------------

import lightgbm as lgb
import matplotlib.pyplot as plt
import numpy as np

from lightgbm_cegb import prediction_cost
from lightgbm_cegb.datasets import HIGGS_COSTS, higgs
from lightgbm_cegb.lgbm import cegb_tradeoff_scale, record_cost
from lightgbm_cegb.selection.plots import plot_cost_curve

X, y = higgs("train")
X_train, y_train, X_valid, y_valid = X[:5000], y[:5000], X[5000:], y[5000:]
train_set = lgb.Dataset(X_train, y_train, free_raw_data=False)
valid_set = lgb.Dataset(X_valid, y_valid, reference=train_set)

params = {"objective": "binary", "metric": "auc", "num_leaves": 15, "learning_rate": 0.1, "num_threads": 1,
          "verbose": -1, "seed": 0}
rounds = 200

# %%
# The CEGB parameters: ``FeatureCosts.to_params`` writes the ``cegb_penalty_*`` parameters of the patched
# LightGBM. :func:`~lightgbm_cegb.lgbm.cegb_tradeoff_scale` is the smallest ``cegb_tradeoff`` at which the
# first tree makes no split; we train at a fraction of it.

cost_params = HIGGS_COSTS.to_params()
scale = cegb_tradeoff_scale({**params, **cost_params}, train_set)
cegb_params = {**params, **cost_params, "cegb_tradeoff": 0.5 * scale}
print(f"cegb_tradeoff scale {scale:.3g}; training at {0.5 * scale:.3g}")

# %%
# Training with the callbacks
# ---------------------------
# ``record_cost(X, costs, eval_result)`` fills ``eval_result`` with one mean per iteration: ``cost``, and
# its two parts ``acquisition`` (lazy feature costs) and ``evaluation`` (split costs, none here). It routes
# only the new trees after each iteration, keeping each row's state between iterations. The plain model is
# priced with the same costs, although it was not trained with them.

curves = {}
for name, model_params in (("plain LightGBM", params), ("CEGB", cegb_params)):
    costs, metrics = {}, {}
    booster = lgb.train(model_params, train_set, rounds, valid_sets=[valid_set], valid_names=["valid"],
                        callbacks=[record_cost(X_valid, HIGGS_COSTS, costs), lgb.record_evaluation(metrics)])
    curves[name] = (booster, costs, metrics["valid"]["auc"])
    print(f"{name}: cost after 10 trees {costs['cost'][9]:.1f}, after {rounds} {costs['cost'][-1]:.1f}; "
          f"AUC {metrics['valid']['auc'][-1]:.3f}")

# %%
# The same curve without a callback: ``prediction_cost(..., per_iteration=True)`` routes the rows once and
# returns the mean cost after each iteration as ``curve``.

booster, costs, _ = curves["CEGB"]
report = prediction_cost(booster, X_valid, HIGGS_COSTS, per_iteration=True)
print("equal to the callback's record:", np.allclose(report.curve, costs["cost"]))

# %%
# The curves
# ----------
# Left: the mean cost per validation row after k trees, drawn by
# :func:`~lightgbm_cegb.selection.plots.plot_cost_curve` (which takes ``record_cost``'s dict or an array).
# Right: the validation AUC against that cost, one point per iteration.

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
for name, (_, costs, auc) in curves.items():
    plot_cost_curve(costs, ax=left, label=name)
    right.plot(costs["cost"], auc, label=name)
left.axhline(HIGGS_COSTS.lazy.sum(), color="grey", linestyle=":", linewidth=1)
left.set_title("mean cost per row after k trees")
right.set_xlabel("mean cost per row")
right.set_ylabel("validation AUC")
right.set_title("quality against cost, one point per iteration")
right.legend()
fig.tight_layout()
plt.show()

# %%
# The dotted line is the cost of reading every feature (91). Plain LightGBM comes close to it within about 50
# trees: every tree takes the best split whatever it costs, so the rows soon hold most features. CEGB's
# curve rises slowly, because a split on a feature the row has not read yet must gain more than its
# penalty, while a feature already read costs nothing more. On the right, CEGB reaches a useful AUC at costs
# plain LightGBM never has (its first tree alone costs more than 30 per row); where both curves exist, CEGB
# is about as good, and plain LightGBM's higher AUC comes at a higher cost.
#
# The first k trees are a model of their own. ``budget_stopping`` (see the budget-stopping example) stops
# training once the cost curve passes a budget, and keeps the best iteration within it.
