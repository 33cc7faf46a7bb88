"""Plots of costs and frontiers (matplotlib, the optional ``plot`` extra: ``pip install lightgbm-cegb[plot]``).

Each function draws on ``ax`` (a new figure's axes when None) and returns it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.report import CostReport


def _axes(ax):
    if ax is not None:
        return ax
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise CEGBError("plotting needs matplotlib: pip install 'lightgbm-cegb[plot]' (or matplotlib)") from None
    return plt.subplots(figsize=(6, 4))[1]


MARKERS = "os^vDP*Xh<>"


def plot_frontiers(frame: pd.DataFrame, *, ax=None, budget: float | None = None, pareto_only: bool = True,
                   xlabel: str = "mean cost per validation row", title: str | None = None):
    """Quality against mean cost, one line per method of ``frame`` (a :func:`~lightgbm_cegb.selection.sweep`
    result, or any DataFrame with ``method``, ``cost`` and ``quality``); each method's Pareto frontier
    (``pareto_only``) or all its points; ``budget`` draws a vertical line."""
    from lightgbm_cegb.selection import pareto

    missing = {"method", "cost", "quality"} - set(frame.columns)
    if missing:
        raise CEGBError(f"frame should have the columns method, cost and quality; missing {sorted(missing)}")
    ax = _axes(ax)
    for i, (method, points) in enumerate(frame.groupby("method", sort=False)):
        points = points.copy()
        points.attrs = dict(frame.attrs)
        points = pareto(points) if pareto_only else points.sort_values("cost")
        ax.plot(points["cost"], points["quality"], marker=MARKERS[i % len(MARKERS)], label=str(method))
    if budget is not None:
        ax.axvline(budget, color="grey", linestyle="--", linewidth=1, label=f"budget {budget:g}")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(frame.attrs.get("metric", "quality"))
    if title:
        ax.set_title(title)
    ax.legend()
    return ax


def plot_feature_usage(report: CostReport, costs=None, *, top: int = 20, ax=None):
    """Share of rows that acquire each feature (bars), the ``top`` most used; with ``costs`` (lazy cost
    per feature), the bars are the features' share of the mean cost instead."""
    usage = np.asarray(report.usage, dtype=np.float64)
    names = np.asarray(report.feature_names or [f"Column_{i}" for i in range(len(usage))])
    value, label = usage, "share of rows acquiring the feature"
    if costs is not None:
        lazy = np.asarray(costs.lazy if hasattr(costs, "lazy") else costs, dtype=np.float64)
        if lazy.shape != usage.shape:
            raise CEGBError(f"costs should have one value per feature ({len(usage)}), got {lazy.shape[0]}")
        value = usage * lazy / max(float(report.acquisition.mean()), np.finfo(float).tiny)
        label = "share of the mean acquisition cost"
    order = np.argsort(-value, kind="stable")[:top]
    order = order[value[order] > 0][::-1]
    ax = _axes(ax)
    ax.barh(names[order], value[order])
    ax.set_xlabel(label)
    return ax


def plot_cost_curve(curve, *, ax=None, label: str | None = None, budget: float | None = None):
    """Mean cost after each iteration: ``curve`` an array (``prediction_cost(..., per_iteration=True).curve``)
    or the ``eval_result`` dict that ``record_cost`` filled (with ``cost-stdv`` from ``lgb.cv``, a band)."""
    stdv = None
    if isinstance(curve, Mapping):
        if "cost" not in curve:
            raise CEGBError(f"curve should be record_cost's eval_result (with a 'cost' list), got keys {sorted(curve)}")
        stdv = np.asarray(curve["cost-stdv"]) if "cost-stdv" in curve else None
        curve = curve["cost"]
    values = np.asarray(curve, dtype=np.float64)
    if values.ndim != 1:
        raise CEGBError(f"curve should be 1-d (one mean cost per iteration), got shape {values.shape}")
    ax = _axes(ax)
    iterations = np.arange(1, len(values) + 1)
    ax.plot(iterations, values, label=label)
    if stdv is not None and stdv.any():
        ax.fill_between(iterations, values - stdv, values + stdv, alpha=0.25)
    if budget is not None:
        ax.axhline(budget, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("iteration")
    ax.set_ylabel("mean cost per row")
    if label:
        ax.legend()
    return ax
