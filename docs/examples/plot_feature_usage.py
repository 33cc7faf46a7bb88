"""
Which features a model reads
============================

:func:`lightgbm_cegb.prediction_cost` routes rows through a model's trees and reports, besides each row's
cost, the share of rows whose paths test each feature (``CostReport.usage``). A row pays a feature's lazy
cost once, the first time one of its paths reaches a split on it, so this share is what drives the cost.

Here we compare a plain LightGBM model with a CEGB model trained on the same rows with the HIGGS costs (1
per low-level feature, 10 per high-level one).
"""

# %%
# Two models
# ----------
# The data as a DataFrame, so that the models and the reports name the features.

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from lightgbm_cegb import CEGBClassifier, prediction_cost
from lightgbm_cegb.datasets import HIGGS_COSTS, HIGGS_FEATURES, higgs
from lightgbm_cegb.selection.plots import plot_feature_usage

X, y = higgs("train")
X = pd.DataFrame(X, columns=HIGGS_FEATURES)
X_train, y_train, X_valid = X.iloc[:5000], y[:5000], X.iloc[5000:]

params = {"n_estimators": 100, "num_leaves": 15, "learning_rate": 0.1, "num_threads": 1, "verbose": -1}
plain = CEGBClassifier(**params).fit(X_train, y_train)

# %%
# ``CEGBClassifier`` is LightGBM's classifier with a cost model (``feature_costs``) and its trade-off
# (``cegb_tradeoff``); without costs, as above, it is plain LightGBM. The trade-off's scale depends on the
# data and the costs: ``tradeoff_scale`` finds the smallest trade-off at which the first tree makes no split,
# and we take a fraction of it.

cegb = CEGBClassifier(feature_costs=HIGGS_COSTS, **params)
scale = cegb.tradeoff_scale(X_train, y_train)
cegb.set_params(cegb_tradeoff=0.6 * scale).fit(X_train, y_train)
print(f"trade-off scale {scale:.3g}; cegb_tradeoff = {0.6 * scale:.3g}")

# %%
# Their cost reports
# ------------------
# ``prediction_cost(model, X, costs)`` takes the costs to price the rows with; the CEGB model's default is
# the costs it was fitted with. The plain model is priced with the same costs.

plain_report = prediction_cost(plain, X_valid, HIGGS_COSTS)
cegb_report = prediction_cost(cegb, X_valid)
for name, model, report in (("plain", plain, plain_report), ("cegb", cegb, cegb_report)):
    accuracy = (model.predict(X_valid) == y[5000:]).mean()
    print(f"{name:>5}: accuracy {accuracy:.3f}, mean cost per row {report.mean:.1f} "
          f"(acquisition {report.acquisition.mean():.1f}, evaluation {report.evaluation.mean():.1f}), "
          f"features used {int((report.usage > 0).sum())} of {len(report.usage)}")

# %%
# The report's fields: ``acquisition`` and ``evaluation`` are per row (the lazy costs of the distinct
# features a row's paths test; split costs, 0 here), ``usage`` is per feature (the share of rows whose paths
# test it), ``feature_names`` names them and ``usage_by_name`` pairs the two.

usage = pd.DataFrame({"cost": HIGGS_COSTS.lazy, "plain": plain_report.usage, "cegb": cegb_report.usage},
                     index=plain_report.feature_names)
print(usage.round(3).to_string())

# %%
# Usage per feature
# -----------------
# Share of validation rows that read each feature, for both models. The high-level features (cost 10) are
# the last seven.

fig, ax = plt.subplots(figsize=(7, 7))
rows = np.arange(len(usage))
ax.barh(rows - 0.2, usage["plain"], height=0.4, label="plain LightGBM")
ax.barh(rows + 0.2, usage["cegb"], height=0.4, label="CEGB")
ax.set_yticks(rows, [f"{name} ({cost:g})" for name, cost in zip(usage.index, usage["cost"])])
ax.invert_yaxis()
ax.set_xlabel("share of validation rows reading the feature")
ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2)
fig.suptitle("Feature usage (feature cost in brackets)")
fig.tight_layout()
plt.show()

# %%
# The plain model reads nearly every feature for nearly every row. The CEGB model, at about the same
# accuracy, still reads the useful cheap features for every row, but most expensive features only for some
# rows: it reads ``m_bb`` (the most informative) for every row, and the other high-level features only where
# a path needs them. A feature with a share below 1 is one that only some paths test; with lazy costs, only
# the rows on those paths pay for it.
#
# Share of the cost
# -----------------
# :func:`lightgbm_cegb.selection.plots.plot_feature_usage` draws one report's usage; given the costs, it
# draws each feature's share of the mean acquisition cost instead, its ``top`` features only.

fig, axes = plt.subplots(1, 2, figsize=(9, 4), sharex=True)
plot_feature_usage(plain_report, HIGGS_COSTS, top=10, ax=axes[0]).set_title("plain LightGBM")
plot_feature_usage(cegb_report, HIGGS_COSTS, top=10, ax=axes[1]).set_title("CEGB")
fig.tight_layout()
plt.show()
