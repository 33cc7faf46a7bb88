"""sweep(): every registered method's grid fitted and measured on the same validation rows."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

import pandas as pd

from lightgbm_cegb.core.costs import FeatureCosts
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.selection.metrics import Metric, get_metric
from lightgbm_cegb.selection.registry import METHODS, TASKS, Context, Method, Rows, class_labels, encoded


# ------------------------------------------------------------------------------------------------ sweep
def _run(method: Method, context: Context, state, params: dict, metric: Metric) -> list[dict]:
    rows = []
    for candidate in method.fit(context, state, dict(params)):
        quality, cost, coupled = candidate.measure(context.valid, metric)
        rows.append({"method": method.name, "quality": quality, "cost": cost, "coupled": coupled,
                     "params": candidate.params, "model": candidate})
    return rows


def sweep(methods: str | Sequence[str], train, valid, costs, *, task: str, grid: Mapping | None = None,
          metric: str | Metric | None = None, params: Mapping | None = None, num_boost_round: int = 500,
          early_stopping_rounds: int = 20, n_jobs: int = 1, client=None, progress: bool | None = None) -> pd.DataFrame:
    """Train every grid point of each method on ``train`` and measure it on ``valid``.

    Parameters
    ----------
    methods : a name of :data:`METHODS` or a list of names
    train, valid : (X, y) or (X, y, group) with ``group`` the query sizes (ranking)
    costs : FeatureCosts, or lazy costs per column; by feature name (a mapping or a FeatureCosts of names)
            when X is a DataFrame
    task : "binary", "multiclass", "regression" or "ranking". binary: labels of exactly two classes, any two
           values ({0, 1}, {-1, +1}, {2, 5}, two strings), the larger being the positive class (as scikit-learn's
           ``classes_[1]``); multiclass: two or more classes. Every method is fitted and measured on the labels'
           indices in the sorted classes (binary: 0 and 1; multiclass: 0..K-1), which ``frame.attrs["classes"]``
           lists; ``select`` and ``evaluate`` map test labels the same way. A model's ``predict`` answers in
           these indices (a probability of class 1 for binary).
    grid : {method: [params, ...]} replacing a method's default grid (see the module doc for the knobs)
    metric : a name (``accuracy``, ``auc``, ``logloss``, ``rmse``, ``ap@5``, ``ndcg@K``, ``p@K``) or a Metric
    params : LightGBM parameters for the LightGBM-based methods (e.g. ``num_leaves``, ``learning_rate``)
    n_jobs : grid points trained in parallel by joblib (processes); ``client``: a dask.distributed Client
             to run them on instead
    progress : a tqdm bar over the grid points (default: when stderr is a terminal)

    Returns
    -------
    DataFrame, one row per fitted point: ``method``, ``quality``, ``cost`` (mean per validation row),
    ``coupled``, ``params`` (dict) and its keys as columns, ``model`` (a Candidate: ``.model``, ``.predict``,
    ``.cost``). ``frame.attrs`` holds ``metric`` and ``greater_is_better``.
    """
    if task not in TASKS:
        raise CEGBError(f"task should be one of {TASKS}, got {task!r}")
    names = [methods] if isinstance(methods, str) else list(methods)
    unknown = [m for m in names if m not in METHODS]
    if unknown:
        raise CEGBError(f"unknown method(s) {unknown}; registered: {sorted(METHODS)}")
    unfit = [m for m in names if task not in METHODS[m].tasks]
    if unfit:
        raise CEGBError(f"method(s) {unfit} do not support task={task!r} "
                        f"({', '.join(f'{m}: {METHODS[m].tasks}' for m in unfit)})")
    grid = dict(grid or {})
    extra = sorted(set(grid) - set(names))
    if extra:
        raise CEGBError(f"grid names method(s) {extra} that are not swept ({names})")
    train, valid = Rows.of(train, "train"), Rows.of(valid, "valid")
    classes = class_labels(task, train, valid)
    train, valid = encoded(train, classes, "train"), encoded(valid, classes, "valid")
    if task == "ranking" and (train.group is None or valid.group is None):
        raise CEGBError("task='ranking' needs the query sizes: train=(X, y, group) and valid=(X, y, group)")
    costs = FeatureCosts.coerce(costs)
    if not costs.is_aligned:  # costs by feature name: to train's columns (LightGBM's parameters are by column)
        if not hasattr(train.X, "columns"):
            raise CEGBError("costs name features, but train's X has no column names: pass a pandas DataFrame or "
                            "costs by column position")
        costs = costs.align(train.X)
    metric = get_metric(metric, task)
    context = Context(task, train, valid, costs, dict(params or {}), num_boost_round, early_stopping_rounds)
    jobs = []
    for name in names:
        method = METHODS[name]
        state = method.prepare(context)
        jobs += [(method, state, point) for point in (grid[name] if name in grid else method.grid(context))]
    show = sys.stderr.isatty() if progress is None else progress
    bar = None
    if show:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(jobs), desc="sweep", unit="fit")
    if client is not None:
        from distributed import as_completed
        futures = [client.submit(_run, method, context, state, point, metric, pure=False)
                   for method, state, point in jobs]
        order = {future.key: i for i, future in enumerate(futures)}
        results = [None] * len(futures)
        for future in as_completed(futures):
            results[order[future.key]] = future.result()
            bar is not None and bar.update()
    else:
        from joblib import Parallel, delayed
        results = []
        for result in Parallel(n_jobs=n_jobs, return_as="generator")(
                delayed(_run)(method, context, state, point, metric) for method, state, point in jobs):
            results.append(result)
            bar is not None and bar.update()
    if bar is not None:
        bar.close()
    rows = [row for result in results for row in result]
    frame = pd.DataFrame(rows, columns=["method", "quality", "cost", "coupled", "params", "model"])
    keys = sorted({k for row in rows for k in row["params"]})
    for key in keys:
        frame[key] = [row["params"].get(key) for row in rows]
    frame.attrs.update(metric=metric.name, greater_is_better=metric.greater_is_better, task=task,
                       classes=None if classes is None else classes.tolist())
    frame.attrs["metric_object"] = metric
    return frame


