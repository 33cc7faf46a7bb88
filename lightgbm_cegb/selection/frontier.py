"""Pareto frontiers, test evaluation and selection within a budget."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lightgbm_cegb.core.errors import CEGBError, check_number
from lightgbm_cegb.selection.adapters import CEGB_RELATIVE_TRADEOFFS
from lightgbm_cegb.selection.metrics import Metric, get_metric
from lightgbm_cegb.selection.registry import Candidate, Rows, encoded
from lightgbm_cegb.selection.sweep import sweep


def pareto(frame: pd.DataFrame) -> pd.DataFrame:
    """The points of ``frame`` that no cheaper (or equally cheap) point matches in quality, by increasing
    cost; over all its rows (filter one method first for that method's own frontier)."""
    sign = 1.0 if frame.attrs.get("greater_is_better", True) else -1.0
    ordered = frame.assign(_q=sign * frame["quality"]).sort_values(["cost", "_q"], ascending=[True, False],
                                                                   kind="stable")
    best, keep = -np.inf, []
    for index, q in zip(ordered.index, ordered["_q"]):
        if q > best:
            keep.append(index)
            best = q
    out = ordered.loc[keep].drop(columns="_q")
    out.attrs = dict(frame.attrs)
    return out


def evaluate(frame: pd.DataFrame, rows, *, prefix: str = "test_") -> pd.DataFrame:
    """``frame`` with each point measured on other ``rows`` ((X, y) or (X, y, group)) by the sweep's
    metric: columns ``test_quality``, ``test_cost`` (``prefix`` names them)."""
    name = prefix.rstrip("_") or "rows"
    rows, metric = _sweep_labels(frame, Rows.of(rows, name), name), frame.attrs["metric_object"]
    figures = [row["model"].measure(rows, metric)[:2] for _, row in frame.iterrows()]
    out = frame.assign(**{f"{prefix}quality": [q for q, _ in figures], f"{prefix}cost": [c for _, c in figures]})
    out.attrs = dict(frame.attrs)
    return out


def _sweep_labels(frame: pd.DataFrame, rows: Rows, name: str) -> Rows:
    """Rows labelled as the sweep's methods saw its labels (classification: indices in its classes)."""
    classes = frame.attrs.get("classes")
    return encoded(rows, None if classes is None else np.asarray(classes), name)


@dataclass
class Selection:
    """The point :func:`select` chose, its validation figures and, with test rows, its test figures."""

    method: str
    params: dict
    model: object  # the fitted model (Booster, pruned Booster, EarlyExit, BudgetRFClassifier)
    candidate: Candidate
    valid_quality: float
    valid_cost: float
    test_quality: float | None = None
    test_cost: float | None = None


def select(frame: pd.DataFrame, budget: float, test=None, *, metric: str | Metric | None = None) -> Selection:
    """The point of ``frame`` (a :func:`sweep`) with the best validation quality among those whose mean
    validation cost is at most ``budget`` (ties: the cheaper); with ``test`` rows, its test figures too."""
    check_number(budget, "budget", 0.0)  # any real number: numpy's float32 too
    budget = float(budget)
    if len(frame) == 0:
        raise CEGBError("the frontier is empty")
    within = frame[frame["cost"] <= budget]
    if len(within) == 0:
        raise CEGBError(f"no point is within budget={budget:g}: the cheapest costs {frame['cost'].min():g} "
                        "per validation row; sweep further (a larger trade-off, a smaller budget_fraction)")
    best = pareto(within).iloc[-1]
    candidate = best["model"]
    chosen = Selection(best["method"], dict(best["params"]), candidate.model, candidate, float(best["quality"]),
                       float(best["cost"]))
    if test is not None:
        used = get_metric(metric, frame.attrs["task"]) if metric is not None else frame.attrs["metric_object"]
        chosen.test_quality, chosen.test_cost, _ = candidate.measure(
            _sweep_labels(frame, Rows.of(test, "test"), "test"), used)
    return chosen


def train_to_budget(train, valid, costs, budget: float, *, task: str, test=None,
                    relative_tradeoffs: Sequence[float] = CEGB_RELATIVE_TRADEOFFS,
                    refine: int = 4, **options) -> Selection:
    """CEGB trained to a budget: every model is trained with ``budget_stopping`` (its mean validation cost
    stays within ``budget``) and early stopping; the search over ``cegb_tradeoff`` (in units of
    :func:`cegb_tradeoff_scale`) starts on ``relative_tradeoffs`` (CEGB's default grid: where the cost moves
    depends on the data, and a sparse start misses it, e.g. MNIST's between 0 and 0.05) and then halves,
    ``refine`` times, the geometric gap around the best point. Returns the :func:`select` of all points tried."""
    frames = [sweep("cegb", train, valid, costs, task=task,
                    grid={"cegb": [{"relative_tradeoff": r, "budget": budget} for r in relative_tradeoffs]}, **options)]
    tried = sorted(relative_tradeoffs)
    for _ in range(refine):
        frame = pd.concat(frames, ignore_index=True)
        frame.attrs = frames[0].attrs
        best = select(frame, budget).params["relative_tradeoff"]
        i = tried.index(best)
        new = [math.sqrt(max(a, 1e-6 * b) * b) for a, b in zip(tried[max(i - 1, 0):i + 1], tried[i:i + 2]) if a != b]
        new = [r for r in new if all(abs(r - t) > 1e-12 * max(r, 1e-300) for t in tried)]
        if not new:
            break
        frames.append(sweep("cegb", train, valid, costs, task=task,
                            grid={"cegb": [{"relative_tradeoff": r, "budget": budget} for r in new]}, **options))
        tried = sorted(tried + new)
    frame = pd.concat(frames, ignore_index=True)
    frame.attrs = frames[0].attrs
    return select(frame, budget, test)


