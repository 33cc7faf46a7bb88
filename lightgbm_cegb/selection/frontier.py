"""A sweep's frame: its Pareto frontier, its points measured on test rows, the selection within a budget.

The workflows that sweep and select in one call are :mod:`lightgbm_cegb.selection.workflows`.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from lightgbm_cegb.core.errors import BudgetWarning, CEGBError
from lightgbm_cegb.core.validation import (
    CheckedElsewhere,
    Number,
    caller_stacklevel,
    check_column_order,
    validated,
)
from lightgbm_cegb.selection.chosen import Selection
from lightgbm_cegb.selection.metrics import Metric, get_metric
from lightgbm_cegb.selection.refinement import in_gap, swept_budgets
from lightgbm_cegb.selection.registry import Rows, encoded
from lightgbm_cegb.selection.sweep import ROWS


def pareto(frame: pd.DataFrame) -> pd.DataFrame:
    """The points of ``frame`` that no cheaper (or equally cheap) point matches in quality, by increasing cost.

    Over all its rows (filter one method first for that method's own frontier).

    Parameters
    ----------
    frame : pandas.DataFrame
        Points with columns ``cost`` and ``quality`` (a :func:`sweep` result); ``frame.attrs["greater_is_better"]``
        (default True) says which quality is better.

    Returns
    -------
    pandas.DataFrame
        The rows of the Pareto frontier, by increasing cost, with ``frame``'s ``attrs``.
    """
    _check_frame(frame, "pareto", ("cost", "quality"), ())
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


def best_point(frame: pd.DataFrame, budget: float) -> pd.Series | None:
    """The point :func:`select` chooses within ``budget``: the best validation quality among the points whose
    validation cost is at most ``budget`` (ties: the cheaper), or None when no point is within it.

    Parameters
    ----------
    frame : pandas.DataFrame
        Points with columns ``cost`` and ``quality`` (a :func:`sweep` result, or one method's points of it; any
        other columns, such as a test figure's, come with the row); ``frame.attrs["greater_is_better"]`` (default
        True) says which quality is better.
    budget : float
        The largest mean prediction cost per validation row.

    Returns
    -------
    pandas.Series or None
        The chosen row of ``frame``.
    """
    within = frame[frame["cost"] <= budget]
    return pareto(within).iloc[-1] if len(within) else None


def evaluate(frame: pd.DataFrame, rows, *, prefix: str = "test_") -> pd.DataFrame:
    """``frame`` with each point measured on other ``rows`` by the sweep's metric.

    Parameters
    ----------
    frame : pandas.DataFrame
        A :func:`sweep` result (or any frame with its columns and ``attrs``).
    rows : tuple or Rows
        (X, y) or (X, y, group); classification labels are mapped to the sweep's classes as its own were.
    prefix : str, optional
        The prefix of the new columns' names (default ``"test_"``).

    Returns
    -------
    pandas.DataFrame
        A copy of ``frame`` with the columns ``test_quality`` and ``test_cost`` (mean cost per row; ``prefix``
        names them), with ``frame``'s ``attrs``.
    """
    _check_frame(frame, "evaluate", ("model",), ("metric_object",))
    if not isinstance(prefix, str):
        raise CEGBError(f"evaluate: prefix should be a string, got {prefix!r:.40}")
    name = prefix.rstrip("_") or "rows"
    rows, metric = _sweep_labels(frame, Rows.of(rows, name), name), frame.attrs["metric_object"]
    figures = [row["model"].measure(rows, metric)[:2] for _, row in frame.iterrows()]
    out = frame.assign(**{f"{prefix}quality": [q for q, _ in figures], f"{prefix}cost": [c for _, c in figures]})
    out.attrs = dict(frame.attrs)
    return out


def _check_frame(frame, caller: str, columns: tuple, attrs: tuple) -> None:
    """``frame`` is a sweep's frame for ``caller``: a DataFrame with ``columns`` (numbers for cost and quality) and
    ``attrs`` (a frame read from CSV, or rebuilt from the values, has neither its models nor its attrs)."""
    if not isinstance(frame, pd.DataFrame):
        raise CEGBError(f"{caller}: frame should be a sweep's pandas DataFrame, got {type(frame).__name__}")
    missing = [c for c in columns if c not in frame.columns] + [f"attrs[{a!r}]" for a in attrs if a not in frame.attrs]
    if missing:
        raise CEGBError(f"{caller}: the frame lacks {missing}: pass the frame sweep returned, or rows of it (a frame "
                        "read from CSV, or rebuilt from the values, has neither its models nor its attrs)")
    for column in ("cost", "quality"):
        if column in columns and len(frame) and not pd.api.types.is_numeric_dtype(frame[column]):
            raise CEGBError(f"{caller}: the frame's column {column!r} should hold numbers, got {frame[column].dtype}")


def _sweep_labels(frame: pd.DataFrame, rows: Rows, name: str) -> Rows:
    """Rows labelled as the sweep's methods saw its labels (classification: indices in its classes); a frame of
    the sweep's training columns in another order is refused."""
    check_column_order(rows.X, frame.attrs.get("columns"), name, "the sweep's training columns")
    classes = frame.attrs.get("classes")
    return encoded(rows, None if classes is None else np.asarray(classes), name)


#: select's parameters
SELECT_CONSTRAINTS = {"frame": CheckedElsewhere("select, by the columns and attrs it reads"), "budget": Number(0.0),
                      "test": ROWS, "metric": CheckedElsewhere("get_metric, for the sweep's task")}


@validated(SELECT_CONSTRAINTS)
def select(frame: pd.DataFrame, budget: float, test=None, *, metric: str | Metric | None = None) -> Selection:
    """The point of ``frame`` with the best validation quality among those whose mean validation cost is at most
    ``budget`` (ties: the cheaper); with ``test`` rows, its test figures too.

    Parameters
    ----------
    frame : pandas.DataFrame
        A :func:`sweep` result (or any frame with its columns and ``attrs``).
    budget : float
        The largest mean prediction cost per validation row.
    test : tuple or Rows, optional
        Test rows, (X, y) or (X, y, group): the chosen point is measured on them.
    metric : str or Metric, optional
        The metric of the test figures (None: the sweep's).

    Returns
    -------
    Selection
        The chosen point.

    Raises
    ------
    CEGBError
        When ``frame`` is empty or no point is within ``budget``.

    Warns
    -----
    BudgetWarning
        When the frame was not swept for this budget and its best point within it costs less than 80% of it
        while dearer points exist (a gap in the grid: ``sweep(..., budget=)`` or :func:`fit_within_budget`
        refine the knobs there).
    """
    budget = float(budget)
    _check_frame(frame, "select", ("method", "params", "cost", "quality", "model"),
                 ("metric_object",) if test is not None and metric is None else ())
    if len(frame) == 0:
        raise CEGBError("the frontier is empty")
    best = best_point(frame, budget)
    if best is None:
        raise CEGBError(f"no point is within budget={budget:g}: the cheapest costs {frame['cost'].min():g} "
                        "per validation row; sweep further (a larger trade-off, a smaller budget_fraction)")
    sign = 1.0 if frame.attrs.get("greater_is_better", True) else -1.0
    if budget not in swept_budgets(frame.attrs.get("budget")) and \
            in_gap(frame["cost"].to_numpy(float), frame["quality"].to_numpy(float), budget, sign):
        warnings.warn(f"select: the best point within budget={budget:g} costs {best['cost']:g} and no point was "
                      f"swept between it and the budget; sweep(..., budget={budget:g}) or fit_within_budget refine "
                      "the methods' knobs there", BudgetWarning, stacklevel=caller_stacklevel())
    return selection_of(frame, best, test, metric)


def selection_of(frame: pd.DataFrame, best: pd.Series, test, metric) -> Selection:
    """The Selection of ``frame``'s point ``best`` (a row of it), measured on the ``test`` rows when given (with
    ``metric``; None: the sweep's).

    Parameters
    ----------
    frame : pandas.DataFrame
        A sweep's frame.
    best : pandas.Series
        The chosen row of ``frame``.
    test : tuple or Rows or None
        Test rows, as ``select`` takes them.
    metric : str or Metric or None
        The test metric (None: the sweep's).

    Returns
    -------
    Selection
        The choice, its figures and its model.
    """
    candidate = best["model"]
    classes = frame.attrs.get("classes")
    chosen = Selection(best["method"], dict(best["params"]), candidate.fitted_model(), candidate,
                       float(best["quality"]), float(best["cost"]), costs=frame.attrs.get("costs"),
                       decision_threshold=candidate.decision_threshold, task=frame.attrs.get("task"),
                       classes=None if classes is None else np.asarray(classes))
    if test is not None:
        used = get_metric(metric, frame.attrs["task"]) if metric is not None else frame.attrs["metric_object"]
        chosen.test_quality, chosen.test_cost, _ = candidate.measure(
            _sweep_labels(frame, Rows.of(test, "test"), "test"), used)
    return chosen
