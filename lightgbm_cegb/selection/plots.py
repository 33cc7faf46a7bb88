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
    """Quality against mean cost, one line per method of ``frame``.

    Each method's Pareto frontier (``pareto_only``) or all its points.

    Parameters
    ----------
    frame : pandas.DataFrame
        A :func:`~lightgbm_cegb.selection.sweep` result, or any DataFrame with ``method``, ``cost`` and
        ``quality`` (``frame.attrs["metric"]``, when set, labels the y axis).
    ax : matplotlib.axes.Axes, optional
        The axes to draw on (None: a new figure's).
    budget : float, optional
        Draws a vertical line at this cost.
    pareto_only : bool, default=True
        Draw each method's Pareto frontier only (else all its points, by cost).
    xlabel : str, default="mean cost per validation row"
        The x axis' label.
    title : str, optional
        The plot's title.

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Raises
    ------
    CEGBError
        When ``ax`` is None and matplotlib is not installed, or ``frame`` lacks one of the columns.
    """
    from lightgbm_cegb.selection import pareto

    missing = {"method", "cost", "quality"} - set(frame.columns)
    if missing:
        raise CEGBError(f"frame should have the columns method, cost and quality; missing {sorted(missing)}")
    ax = _axes(ax)
    from matplotlib import colormaps

    groups = list(frame.groupby("method", sort=False))
    colors = colormaps["tab10" if len(groups) <= 10 else "tab20"]  # a colour of its own for each method
    for i, (method, points) in enumerate(groups):
        points = points.copy()
        points.attrs = dict(frame.attrs)
        points = pareto(points) if pareto_only else points.sort_values("cost")
        ax.plot(points["cost"], points["quality"], marker=MARKERS[i % len(MARKERS)], color=colors(i % colors.N),
                label=str(method))
    if budget is not None:
        ax.axvline(budget, color="grey", linestyle="--", linewidth=1, label=f"budget {budget:g}")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(frame.attrs.get("metric", "quality"))
    if title:
        ax.set_title(title)
    if len(groups) > 6:  # beside the axes: inside, a long legend hides the lines
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    else:
        ax.legend()
    return ax


def plot_feature_usage(report: CostReport, costs=None, *, top: int = 20, ax=None):
    """Share of rows that acquire each feature (bars), the ``top`` most used.

    With ``costs`` (lazy cost per feature), the bars are the features' share of the mean acquisition cost
    instead.

    Parameters
    ----------
    report : CostReport
        A cost report (``prediction_cost``): its ``usage`` per feature and its feature names.
    costs : FeatureCosts or array-like of shape (n_features,), optional
        The lazy cost of each feature (a FeatureCosts' ``lazy``).
    top : int, default=20
        The number of features drawn (those with the largest values; features at 0 are left out).
    ax : matplotlib.axes.Axes, optional
        The axes to draw on (None: a new figure's).

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Raises
    ------
    CEGBError
        When ``ax`` is None and matplotlib is not installed, or ``costs`` has another number of features than
        ``report``.
    """
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
    """Mean cost after each iteration.

    Parameters
    ----------
    curve : array-like of shape (n_iterations,) or Mapping
        An array (``prediction_cost(..., per_iteration=True).curve``) or the ``eval_result`` dict that
        ``record_cost`` filled (with ``cost-stdv`` from ``lgb.cv``, a band).
    ax : matplotlib.axes.Axes, optional
        The axes to draw on (None: a new figure's).
    label : str, optional
        The line's label (then a legend is drawn).
    budget : float, optional
        Draws a horizontal line at this cost.

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Raises
    ------
    CEGBError
        When ``ax`` is None and matplotlib is not installed, ``curve`` is a dict without a ``cost`` list, or it is
        not 1-d.
    """
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
