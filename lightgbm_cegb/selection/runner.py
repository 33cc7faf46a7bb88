"""A sweep's jobs: each grid point fitted and measured on the validation rows (here, in joblib's processes or on a
Dask cluster), each method's state prepared once, and the rule that reads a method's best point within a budget.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Mapping

import numpy as np

from lightgbm_cegb.core.errors import CEGBWarning, NothingToTradeOff
from lightgbm_cegb.core.validation import caller_stacklevel
from lightgbm_cegb.selection.registry import METHODS, Context, Method

#: each fitted grid point is logged here (INFO): its method, parameters, points and best quality
LOG = logging.getLogger("lightgbm_cegb.selection")


def run_point(method: Method, context: Context, state, params: dict, stage: str) -> tuple[list[dict], float]:
    """The rows of one grid point (its model and prefixes), and the seconds its fit and measures took."""
    start = time.perf_counter()
    rows = []
    for candidate in method.fit(context, state, dict(params)):
        quality, cost, coupled = candidate.measure(context.valid, context.metric, choose=True)
        rows.append({"method": method.name, "quality": quality, "cost": cost, "coupled": coupled,
                     "params": candidate.params, "stage": stage, "model": candidate})
    return rows, time.perf_counter() - start


def execute(jobs: list, context: Context, n_jobs: int, client, bar, spent: dict, *, flat: bool = True) -> list:
    """The rows of every job (method, state, params, stage), in the order of the jobs (flat=False: a list of rows
    per job); each job done is logged (``lightgbm_cegb.selection``, INFO) with its seconds (added to ``spent``, by
    method) and shown on the progress bar with its method and point (whose total grows by the jobs)."""
    if bar is not None:
        bar.total += len(jobs)
    batches: dict[str, tuple] = {}  # each method's state and points, shown to its plan before the fits
    for method, state, point, _ in jobs:
        batches.setdefault(method.name, (method, state, []))[2].append(point)
    for method, state, points in batches.values():
        method.plan(context, state, points)
    if client is not None:
        from distributed import as_completed
        futures = [client.submit(run_point, method, context, state, point, stage, pure=False)
                   for method, state, point, stage in jobs]
        order = {future.key: i for i, future in enumerate(futures)}
        results = [None] * len(futures)
        for future in as_completed(futures):
            i = order[future.key]
            results[i], seconds = future.result()
            _done(jobs[i], results[i], seconds, bar, context.metric, spent)
    else:
        from joblib import Parallel, delayed
        results = []
        for job, (result, seconds) in zip(jobs, Parallel(n_jobs=n_jobs, return_as="generator")(
                delayed(run_point)(method, context, state, point, stage) for method, state, point, stage in jobs)):
            results.append(result)
            _done(job, result, seconds, bar, context.metric, spent)
    return [row for result in results for row in result] if flat else results


def _done(job, rows: list[dict], seconds: float, bar, metric, spent: dict) -> None:
    """Report a finished job: its seconds in ``spent``, a log record and the progress bar's text."""
    method, _, point, stage = job
    spent[method.name] = spent.get(method.name, 0.0) + seconds
    shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in point.items()
                      if k != "trees")
    if rows:
        sign = 1.0 if metric.greater_is_better else -1.0
        best = max(rows, key=lambda row: sign * row["quality"])
        LOG.info("sweep: %s (%s) %s: %d point(s), best %s %.4g at cost %.4g (%.1f s)", method.name,
                 shown or "defaults", stage, len(rows), metric.name, best["quality"], best["cost"], seconds)
    else:
        LOG.info("sweep: %s (%s) %s: no point (%.1f s)", method.name, shown or "defaults", stage, seconds)
    if bar is not None:
        bar.set_postfix_str(f"{method.name} {shown}"[:60], refresh=False)
        bar.update()


def _key(value):
    """A hashable stand-in for a parameter's value (lists and dicts as their repr)."""
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


def frozen(params: Mapping) -> tuple:
    """A hashable stand-in for parameters, whatever the order of their keys."""
    return tuple(sorted((k, _key(v)) for k, v in params.items()))


def best_within(rows: list[dict], method: str, budget: float, sign: float) -> float:
    """The best validation quality (times ``sign``) of ``method``'s points within ``budget`` (-inf: none)."""
    return max((sign * row["quality"] for row in rows if row["method"] == method and row["cost"] <= budget),
               default=-np.inf)


def grid_jobs(states: dict, grid: dict, context: Context, stage: str, skip=()) -> list[tuple]:
    """The jobs (method, state, params, stage) of each prepared method's grid (``grid``'s, else its default),
    but for the methods in ``skip``."""
    return [(METHODS[name], state, point, stage) for name, state in states.items() if name not in skip
            for point in (grid[name] if name in grid else METHODS[name].grid(context))]


def prepared(names, context: Context, spent: dict) -> dict:
    """Each method's state for the sweep (``Method.prepare``, its seconds added to ``spent``), by name; a method
    every feature is free to, or whose first tree makes no split even without costs (NothingToTradeOff), is left
    out with a CEGBWarning (its points would all be plain models)."""
    states = {}
    for name in names:
        start = time.perf_counter()
        try:
            states[name] = METHODS[name].prepare(context)
        except NothingToTradeOff as exc:
            warnings.warn(f"sweep: {name} left out: {exc}", CEGBWarning, stacklevel=caller_stacklevel())
        spent[name] = spent.get(name, 0.0) + time.perf_counter() - start
    return states


