"""
Lazy feature acquisition at serving time
========================================

The cost :func:`lightgbm_cegb.prediction_cost` reports assumes that a row acquires a feature only when one of
its paths reaches a split on it. :class:`lightgbm_cegb.LazyPredictor` serves predictions that way: it routes
a batch of rows as far as the known values allow, asks a ``fetch(key, ids)`` function for the feature each
stopped row waits for, and resumes, until every row has reached a leaf in every tree.

Here the feature store is a NumPy array in memory, and ``fetch`` counts what it serves. We check that the
lazy predictions equal the model's ``predict`` on the full rows, and that the cost of what was fetched
equals the cost ``prediction_cost`` reports, far below the cost of fetching every feature.
"""

# %%
# Two models
# ----------
# A plain LightGBM model and a CEGB model (trained with the HIGGS costs: 1 per low-level feature, 10 per
# high-level one) on the same rows.

from collections import Counter

import lightgbm as lgb
import matplotlib.pyplot as plt
import numpy as np

from lightgbm_cegb import LazyPredictor, prediction_cost
from lightgbm_cegb.datasets import HIGGS_COSTS, higgs
from lightgbm_cegb.lgbm import cegb_tradeoff_scale

X, y = higgs("train")
X_train, y_train, X_serve = X[:5000], y[:5000], X[5000:5500]
train_set = lgb.Dataset(X_train, y_train, free_raw_data=False)
params = {"objective": "binary", "num_leaves": 15, "learning_rate": 0.1, "num_threads": 1, "verbose": -1,
          "seed": 0}
cost_params = HIGGS_COSTS.to_params()
scale = cegb_tradeoff_scale({**params, **cost_params}, train_set)
models = {
    "plain LightGBM": lgb.train(params, train_set, 100),
    "CEGB": lgb.train({**params, **cost_params, "cegb_tradeoff": 0.5 * scale}, train_set, 100),
}

# %%
# A simulated feature store
# -------------------------
# ``fetch(key, ids)`` gets a feature's key (its column here, with ``feature_keys="index"``; by default the
# model's feature name) and the ids of the rows that need it, and returns one value per id. This store
# reads them from ``X_serve`` and counts the values it served per feature.


class Store:
    def __init__(self, table):
        self.table = table
        self.served = Counter()
        self.calls = 0

    def fetch(self, key, ids):
        self.calls += 1
        self.served[key] += len(ids)
        return self.table[ids, key]


# %%
# Serving a batch
# ---------------
# The batch starts with no value known (NaN everywhere; ``known`` can say otherwise). ``acquire`` returns a
# ``LazyResult``: the predictions, each row's ``acquisition`` and ``evaluation`` costs, the values fetched,
# and the number of fetch rounds.

n, num_features = X_serve.shape
lazy_costs = HIGGS_COSTS.lazy
summary = {}
for name, model in models.items():
    store = Store(X_serve)
    predictor = LazyPredictor(model, store.fetch, feature_costs=HIGGS_COSTS, feature_keys="index")
    result = predictor.acquire(np.full((n, num_features), np.nan))
    report = prediction_cost(model, X_serve, HIGGS_COSTS)
    served = np.array([store.served[j] for j in range(num_features)])
    fetched_cost = float(served @ lazy_costs) / n
    assert np.array_equal(result.prediction, model.predict(X_serve))  # bit for bit
    assert np.array_equal(served, np.round(report.usage * n).astype(int))  # one fetch per (row, feature) read
    summary[name] = {"fetched": fetched_cost, "reported": report.mean, "every feature": lazy_costs.sum(),
                     "served": served}
    print(f"{name}: {store.calls} fetch calls in {result.rounds} rounds, {served.sum()} values of {n * num_features}; "
          f"mean cost per row: fetched {fetched_cost:.2f}, LazyResult {result.mean:.2f}, "
          f"prediction_cost {report.mean:.2f}, every feature {lazy_costs.sum():g}")

# %%
# The three figures agree: what the store served, priced by the costs, is the ``LazyResult``'s cost and the
# ``prediction_cost`` of the same rows. Each (row, feature) pair is fetched at most once, and only when a
# path of the row tests the feature, so the values served per feature equal ``usage`` times the rows.
#
# The plot
# --------
# Left: mean cost per row of the two models served lazily, against fetching every feature. Right: values
# served per feature.

fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [1, 2]})
names = list(summary)
left.bar(["every\nfeature", *[name.replace(" ", "\n") for name in names]],
         [lazy_costs.sum(), *[summary[name]["fetched"] for name in names]], color=["grey", "C0", "C1"])
left.set_ylabel("mean cost per row")
left.set_title("fetched lazily")
columns = np.arange(num_features)
for k, name in enumerate(names):
    right.bar(columns + (k - 0.5) * 0.4, summary[name]["served"], width=0.4, label=name, color=f"C{k}")
right.axhline(n, color="grey", linestyle=":", linewidth=1)
right.axvspan(20.5, num_features - 0.5, color="grey", alpha=0.1, label="cost 10")
right.set_xlabel("feature (column)")
right.set_ylabel(f"rows served (of {n})")
right.set_title("values served per feature")
right.set_ylim(0, 1.3 * n)
right.legend(loc="upper center", ncol=3, fontsize="small")
fig.tight_layout()
plt.show()

# %%
# Fetching every feature costs 91 per row. Even the plain model, which ignores the costs, saves a little by
# lazy acquisition (a feature that no path of a row tests is never fetched); the CEGB model, trained to
# reuse what a row has already paid for and to avoid the high-level features (shaded), saves much more.
#
# In a real service, ``fetch`` would query a database or call a feature service; ``max_workers``,
# ``timeout``, ``retries`` and ``errors`` control how its calls run and fail, and ``aacquire`` serves an
# asynchronous ``fetch``.
