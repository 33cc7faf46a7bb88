"""The workflows of selection within a budget, one call each: sweep then select (:func:`fit_within_budget`), the
cheap-subset baseline alone (:func:`best_subset`), and CEGB trained to the budget (:func:`train_to_budget`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from lightgbm_cegb.core.errors import BudgetWarning, CEGBError, CEGBWarning
from lightgbm_cegb.core.partitions import (
    as_array,
    check_chunks_known,
    computed,
    drawn,
    drawn_queries,
    is_dask,
    lengths,
)
from lightgbm_cegb.core.validation import (
    Number,
    Numbers,
    Satisfies,
    caller_stacklevel,
    validated,
)
from lightgbm_cegb.selection.chosen import Selection
from lightgbm_cegb.selection.frontier import select, selection_of
from lightgbm_cegb.selection.lightgbm_family import CEGB_RELATIVE_TRADEOFFS
from lightgbm_cegb.selection.refinement import BUDGETS, swept_budgets
from lightgbm_cegb.selection.registry import METHODS, Rows, encoded
from lightgbm_cegb.selection.runner import LOG, METHOD_FITS
from lightgbm_cegb.selection.sweep import (
    EARLY_STOPPING_ROUNDS,
    METHOD_NAMES,
    NUM_BOOST_ROUND,
    ROWS,
    SWEEP_CONSTRAINTS,
    sweep,
)

#: The methods :func:`fit_within_budget` sweeps by default: those that train in seconds on 100,000 rows (the
#: cheap-subset baseline joins every sweep). Pass ``methods`` for others (ADAPT, CSTC, BudgetRF, ...).
BUDGET_METHODS = ("lightgbm", "cegb", "greedy_miser", "budget_prune", "early_exit", "adaptive_acquisition",
                  "staged_acquisition", "staged_acquisition_ranker", "cegb_cascade", "staged_acquisition_regressor")
#: below this many training rows, ADAPT-LIN (``adapt_lin``, a linear gate and a linear low-cost model) joins the
#: default methods of a classification task: on AFABench's CUBE (600 rows, 5 seeds) it lifts fit_within_budget's
#: test accuracy within 12 and 20 features from 0.792 (both) to 0.828 and 0.816, where the trees' capacity on few
#: rows is the ceiling (15% more time); on more rows the trees catch up and it would cost seconds per fit
LINEAR_ROWS = 5_000
#: ... and with at most this many features: on MNIST 3 vs 8's 1,120 pixels (1,500 rows) its points took about 7 s
#: each, 23 of the workflow's 144 plain fits, for a frontier far below the staged acquisition's (RESULTS.md: 0.942
#: against 0.979 at a quarter of plain LightGBM's cost)
LINEAR_FEATURES = 100


#: fit_within_budget of rows in a Dask collection: the training rows its sweep reads, about this many drawn into memory
#: (from SCREEN_FROM = 20,000 rows the sweep screens on a subsample of them and fits each budget's finalists on all of
#: them); a staged acquisition, plain LightGBM or cheap subset chosen is then fitted again on every row, on the
#: cluster
DASK_SAMPLE_ROWS = 50_000


#: fit_within_budget's parameters and the options it passes on to sweep
FIT_WITHIN_BUDGET_CONSTRAINTS = {
    **SWEEP_CONSTRAINTS, "budget": BUDGETS, "test": ROWS,
    "methods": Satisfies(lambda methods: methods is None or METHOD_NAMES.test(methods),
                         f"None, {METHOD_NAMES.words}", bad=METHOD_NAMES.bad[1:]),
}


@validated(FIT_WITHIN_BUDGET_CONSTRAINTS)
def fit_within_budget(train, valid, costs, budget: float | Sequence[float], *, task: str,
                      methods: Sequence[str] | None = None, test=None, refine: int = 4,
                      **options) -> Selection | list[Selection]:
    """The best model any method reaches within ``budget`` (mean prediction cost per validation row).

    One call for the budget workflow: :func:`sweep` of ``methods`` (default :data:`BUDGET_METHODS` that
    support the task, with the cheap-subset baseline) for this budget (each method's knob refined around it,
    each model's longest prefix within it a point), then :func:`select`. The returned Selection holds the whole
    sweep as ``frontier``. When no point is within the budget, a BudgetWarning says so and the cheapest point
    is returned with ``within_budget=False``. Given several budgets, one sweep serves them all (the grid fitted
    once, the knobs refined around each budget): one Selection per budget, in the order given, sharing the
    frontier; ``select(selection.frontier, b)`` answers any other budget ``b`` from it without fitting (and warns
    when ``b`` falls in a gap between the points swept). From 20,000 training rows on (or 5,000 holding 20 million
    cells), the sweep screens the methods on a subsample and fits only each budget's leaders on every row
    (``screen``, see :func:`sweep`); ``frontier.attrs["seconds"]`` gives each method's time. Each method has
    the time of METHOD_FITS = 20 plain LightGBM fits of the rows (at least 30 s) in each stage, past which it
    starts no point that trains a model (``method_fits``, see :func:`sweep`: a CEGBWarning names a method
    stopped).

    Rows in Dask collections: the sweep reads about DASK_SAMPLE_ROWS = 50,000 of the training rows drawn into memory
    (ranking: of whole queries; ``frontier.attrs["sampled"]``), the validation and test rows are computed into memory,
    and a staged acquisition (classifier, regressor or ranker), plain LightGBM or cheap subset (classification and
    regression) chosen is fitted again on every training row on the active client's workers (the staged models of Dask
    rows, the ranker's stages early stopped on the validation queries' NDCG@k; ``lightgbm.dask`` with the sweep's
    parameters, early stopped on the validation rows' log loss or l2), its trade-off and cap (the ranker's top k too;
    a LightGBM model's prefix) chosen again on the validation rows within the budget, where that is at least as good
    there as the sample's point; another method's choice stays the sample's (a CEGBWarning says so);
    ``frontier.attrs["sampled"]["refitted"]`` lists the budgets whose choice was fitted on every row.

    Parameters
    ----------
    train : tuple or Rows
        The training rows, (X, y) or (X, y, group) with ``group`` the query sizes (ranking); X and y may be a Dask
        array or DataFrame and a Dask array or Series (``group`` then a Dask array of each partition's query sizes,
        each query whole in one partition).
    valid : tuple or Rows
        The validation rows, the same way: early stopping, the knobs' refinement and the selection.
    costs : FeatureCosts, lazy costs per column, or None
        The cost model (by feature name when X is a DataFrame; None: every feature at 1), as :func:`sweep` takes it.
    budget : float or sequence of float
        The largest mean prediction cost per validation row; several: a Selection for each, from one sweep.
    task : str
        "binary", "multiclass", "regression" or "ranking" (see :func:`sweep`).
    methods : sequence of str, optional
        The methods swept (default: those of :data:`BUDGET_METHODS` that support the task, and for classification
        on fewer than LINEAR_ROWS = 5,000 training rows of at most LINEAR_FEATURES = 100 features ADAPT-LIN; for
        ranking, BudgetPrune only with a pointwise ``objective`` in ``params`` and Early Exit only with a ranking or
        binary one). A method whose trade-off the costs or the data give nothing to weigh (every feature free to it;
        no split even without costs: too few rows, a constant target) is left out with a CEGBWarning naming it.
    test : tuple or Rows, optional
        Test rows, (X, y) or (X, y, group): the chosen point is measured on them.
    refine : int, default=4
        Rounds of refinement of each method's knob around the budget.
    **options : dict
        Passed on to :func:`sweep` (``params``, ``grid``, ``metric``, ``n_jobs``, ``progress``, ``screen``,
        ``method_fits`` (default METHOD_FITS; None: no limit), ...).

    Returns
    -------
    Selection or list of Selection
        The chosen point, with the whole sweep as ``frontier``; for a sequence of budgets, one per budget.

    Warns
    -----
    BudgetWarning
        When no point is within a budget (the cheapest point is returned, ``within_budget=False``), or as
        :func:`select` warns.
    """
    budgets = swept_budgets(budget)
    cluster = _cluster_rows(train, task)
    if cluster is not None:  # the sweep reads a sample in memory, its choice is fitted again on every row
        total = sum(lengths(cluster[0]))
        train = (drawn_queries if task == "ranking" else drawn)(*cluster, DASK_SAMPLE_ROWS, total=total)
        _every_class_drawn(cluster, train, task)
        valid, test = _in_memory(valid), _in_memory(test)
    if methods is None:
        methods = [m for m in BUDGET_METHODS if task in METHODS[m].tasks]
        rows = Rows.of(train, "train")
        if task in ("binary", "multiclass") and len(rows.y) < LINEAR_ROWS and np.shape(rows.X)[1] <= LINEAR_FEATURES:
            methods.append("adapt_lin")
        if task == "ranking":  # BudgetPrune ranks with a pointwise objective, Early Exit with a ranking one
            from lightgbm_cegb.methods.budget_prune import PRUNE_OBJECTIVES
            from lightgbm_cegb.methods.early_exit import CLASSIFICATION_OBJECTIVES, RANKING_OBJECTIVES
            objective = dict(options.get("params") or {}).get("objective", "lambdarank")
            reads = {"budget_prune": PRUNE_OBJECTIVES, "early_exit": RANKING_OBJECTIVES + CLASSIFICATION_OBJECTIVES}
            methods = [m for m in methods if objective in reads.get(m, (objective,))]
    options.setdefault("method_fits", METHOD_FITS)
    several = np.ndim(budget) != 0
    frame = sweep.unchecked(methods, train, valid, costs, task=task,
                            budget=list(budgets) if several else budgets[0], refine=refine, **options)
    if frame.empty:
        raise CEGBError(f"fit_within_budget: no method gave a point (methods {list(methods)}, "
                        f"baseline={options.get('baseline', True)})")
    chosen = [_within(frame, float(b), test) for b in (budget if several else [budget])]
    if cluster is not None:
        frame.attrs["sampled"] = {"rows": len(Rows.of(train, "train").y), "of": total}
        refits = {}  # one fit on every row per setting of the models chosen (their budgets share it)
        chosen = [_on_every_row(c, cluster, valid, test, float(b), refits, options)
                  for c, b in zip(chosen, budget if several else [budget])]
    return chosen if several else chosen[0]


def _cluster_rows(train, task: str) -> tuple | None:
    """(X, y), for ranking (X, y, group), where ``train``'s rows are a Dask collection (None otherwise)."""
    rows = (train.X, train.y, train.group) if isinstance(train, Rows) else train
    if not (isinstance(rows, tuple) and len(rows) in (2, 3) and is_dask(rows[0])):
        return None
    queries = len(rows) == 3 and rows[2] is not None
    if queries != (task == "ranking"):
        raise CEGBError(f"train: task={task!r} takes (X, y{', group' if task == 'ranking' else ''}), got "
                        f"{'query sizes' if queries else 'no query sizes'}")
    if not is_dask(rows[1]):
        raise CEGBError(f"train: with X a Dask collection, y should be a Dask array or Series of its labels, got "
                        f"{type(rows[1]).__name__}")
    for name, part in (("X", rows[0]), ("y", rows[1])):
        check_chunks_known(part, name, f"train: {name}, ")
    return tuple(rows[:3 if queries else 2])


def _every_class_drawn(cluster: tuple, sample: tuple, task: str) -> None:
    """A classification's drawn rows hold every class of the collection's labels (the sweep's classes come from them),
    or a CEGBError names the class missing."""
    if task not in ("binary", "multiclass"):
        return
    labels = as_array(cluster[1])
    classes, counts = (np.asarray(part) for part in _computed_unique(labels))
    drawn_classes = set(np.unique(sample[1]).tolist())
    missing = [(c, n) for c, n in zip(classes.tolist(), counts.tolist()) if c not in drawn_classes]
    if missing:
        label, count = missing[0]
        raise CEGBError(f"train: class {label!r} has {count} of the {int(counts.sum()):,} rows and none among the "
                        f"{len(sample[1]):,} drawn for the sweep: raise workflows.DASK_SAMPLE_ROWS (now "
                        f"{DASK_SAMPLE_ROWS:,}) or give its rows in memory")


def _computed_unique(labels) -> tuple:
    """(the labels' classes, their counts), computed."""
    import dask
    import dask.array as da
    return dask.compute(*da.unique(labels, return_counts=True))


def _in_memory(rows):
    """Rows given as Dask collections, computed (the validation and the test rows: every point is measured on them)."""
    if isinstance(rows, Rows):
        rows = (rows.X, rows.y) if rows.group is None else (rows.X, rows.y, rows.group)
    return computed(rows) if isinstance(rows, tuple) else rows


def _on_every_row(chosen: Selection, cluster: tuple, valid, test, budget: float, refits: dict,
                  options: dict) -> Selection:
    """fit_within_budget's choice for ``budget`` from the sweep of a sample of the Dask rows ``cluster``, fitted again
    on every row (on the active client's workers; its settings as the sample's; once per setting, kept in ``refits``)
    where it is the staged acquisition (classifier, regressor or ranker), or for classification and regression plain
    LightGBM or the cheap subset, and its point chosen again on the validation rows within the budget (the staged
    acquisition's trade-off and cap among its grid's values and the frame's caps, the ranker's top k too; a LightGBM
    model's prefix), where that is at least as good on them as the sample's
    point (or the sample's is over the budget); any other method's point stays the sample's, with a CEGBWarning naming
    it; nothing is fitted again where every row was drawn."""
    frame = chosen.frontier
    sampled = frame.attrs["sampled"]
    if sampled["rows"] == sampled["of"]:  # every row was drawn: the sweep's models are those of every row
        return chosen
    refit = {"staged_acquisition": _staged_points, "staged_acquisition_regressor": _staged_points,
             "staged_acquisition_ranker": _cascade_points}
    if len(cluster) == 2:  # ranking's LightGBM models are not refitted: their early stopping reads LightGBM's NDCG
        refit.update({"lightgbm": _booster_points, "cheap_subset": _booster_points})
    refit = refit.get(chosen.method)
    if refit is None:
        warnings.warn(f"fit_within_budget: the chosen {chosen.method} point (budget {budget:g}) was fitted on the "
                      f"{sampled['rows']:,} training rows drawn from the {sampled['of']:,} of the Dask collection "
                      "(plain LightGBM, the cheap subset and the staged acquisition classifier, regressor and ranker "
                      "are fitted again on every row; for ranking, the staged ranker)", CEGBWarning,
                      stacklevel=caller_stacklevel())
        return chosen
    classes, metric, task = frame.attrs["classes"], frame.attrs["metric_object"], frame.attrs["task"]
    classes = None if classes is None else np.asarray(classes)
    valid = encoded(Rows.of(valid, "valid"), classes, "valid")
    sign = 1.0 if metric.greater_is_better else -1.0
    best = None
    for candidate, quality, cost in refit(chosen, cluster, valid, budget, refits, options):
        key = (sign * quality, -cost)
        if best is None or key > best[0]:
            best = key, candidate, quality, cost
    if best is None or chosen.within_budget and best[0][0] < sign * chosen.valid_quality:
        LOG.info("fit_within_budget: budget %g: the %s on every row is worse on the validation rows than the sample's "
                 "point (or has no point within the budget); the sample's kept", budget, chosen.method)
        return chosen
    _, candidate, quality, cost = best
    sampled["refitted"] = [*sampled.get("refitted", []), budget]
    refitted = Selection(chosen.method, dict(candidate.params), candidate.model, candidate, quality, cost,
                         costs=chosen.costs, decision_threshold=candidate.decision_threshold, task=task,
                         classes=chosen.classes, frontier=frame)
    if test is not None:
        refitted.test_quality, refitted.test_cost, _ = candidate.measure(
            encoded(Rows.of(test, "test"), classes, "test"), metric)
    return refitted


def _staged_points(chosen: Selection, cluster: tuple, valid: Rows, budget: float, refits: dict, options: dict):
    """(candidate, validation quality, mean cost) of each point of the staged acquisition (classifier or regressor)
    fitted on every row within ``budget``: its grid's relative trade-offs (and the chosen one) under no cap and the
    frame's caps."""
    from sklearn.base import clone

    from lightgbm_cegb.selection.acquisition_family import (
        STAGED_REGRESSOR_TRADEOFFS,
        STAGED_RELATIVE_TRADEOFFS,
        staged_candidate,
    )

    frame = chosen.frontier
    metric, task = frame.attrs["metric_object"], frame.attrs["task"]
    regression = task == "regression"
    X, y = cluster
    setting = repr(sorted((k, v) for k, v in chosen.model.get_params().items()
                          if k not in ("tradeoff", "max_cost", "feature_costs")))
    if setting not in refits:
        classes = None if regression else np.asarray(frame.attrs["classes"])
        labels = y if regression else as_array(y).map_blocks(_codes, classes, dtype=np.int64)
        refits[setting] = clone(chosen.model).fit(X, labels, eval_set=(valid.X, valid.y))
    model = refits[setting]
    if not regression and len(model.classes_) != len(frame.attrs["classes"]):
        raise CEGBError(f"train: the Dask collection's labels should be the sweep's classes "
                        f"{list(frame.attrs['classes'])}, got {len(model.classes_)} classes")
    caps = {None} | {p.get("max_cost") for p, m in zip(frame["params"], frame["method"]) if m == chosen.method}
    own = {k: v for k, v in chosen.params.items() if k not in ("relative_tradeoff", "tradeoff", "max_cost")}
    grid = STAGED_REGRESSOR_TRADEOFFS if regression else STAGED_RELATIVE_TRADEOFFS
    points = [{**own, "relative_tradeoff": r, **({} if cap is None else {"max_cost": cap})}
              for cap in sorted(caps, key=lambda c: np.inf if c is None else c)
              for r in sorted(set(grid) | {chosen.params.get("relative_tradeoff", 0.0)})]
    scale = model.first_value()
    results = model.predict_results(valid.X, [
        {"tradeoff": p["relative_tradeoff"] * scale if regression else min(p["relative_tradeoff"] * scale, 1.0),
         "max_cost": p.get("max_cost")} for p in points])
    for point, result in zip(points, results):  # predict_results' figures are predict_result's, to the bit
        if result.cost.mean <= budget * (1 + 1e-12):
            candidate = staged_candidate(model, point, task)
            score = result.prediction if regression else result.proba[:, 1] if task == "binary" else result.proba
            yield candidate, candidate.quality(valid, score, metric, choose=True), float(result.cost.mean)


def _cascade_points(chosen: Selection, cluster: tuple, valid: Rows, budget: float, refits: dict, options: dict):
    """(candidate, validation quality, mean cost) of each point of the staged ranker fitted on every document within
    ``budget``: its grid's trade-offs of the chosen cut and top k (and the chosen ones) under no cap and the frame's
    caps, its unit order and stage models as chosen."""
    from sklearn.base import clone

    from lightgbm_cegb.selection.acquisition_family import (
        CASCADE_MARGINS,
        CASCADE_TOP_K,
        CASCADE_TRADEOFFS,
        cascade_candidate,
    )

    policy = ("tradeoff", "cut", "top_k", "max_cost")  # read when predicting: one fit serves them all
    frame = chosen.frontier
    setting = repr(sorted((k, v) for k, v in chosen.model.get_params().items()
                          if k not in (*policy, "feature_costs")))
    if setting not in refits:
        X, y, group = cluster
        refits[setting] = clone(chosen.model).fit(X, y, group=group, eval_set=[(valid.X, valid.y)],
                                                  eval_group=[valid.group])
    model = refits[setting]
    caps = {None} | {p.get("max_cost") for p, m in zip(frame["params"], frame["method"]) if m == chosen.method}
    own = {k: v for k, v in chosen.params.items() if k not in ("tradeoff", "top_k", "max_cost")}
    cut = chosen.params.get("cut", "share")
    points = [{**own, "tradeoff": t, "top_k": k, **({} if cap is None else {"max_cost": cap})}
              for cap in sorted(caps, key=lambda c: np.inf if c is None else c)
              for k in sorted(set(CASCADE_TOP_K) | {chosen.params.get("top_k", 0)})
              for t in sorted(set(CASCADE_MARGINS if cut == "margin" else CASCADE_TRADEOFFS)
                              | {chosen.params.get("tradeoff", 0.0)})]
    results = model.predict_results(valid.X, [{k: p.get(k, "share" if k == "cut" else None) for k in policy}
                                              for p in points], group=valid.group)
    for point, result in zip(points, results):  # predict_results' figures are predict_result's, to the bit
        if result.cost.mean <= budget * (1 + 1e-12):
            candidate = cascade_candidate(model, point)
            yield candidate, candidate.quality(valid, result.score, frame.attrs["metric_object"], choose=True), \
                float(result.cost.mean)


def _booster_points(chosen: Selection, cluster: tuple, valid: Rows, budget: float, refits: dict, options: dict):
    """(candidate, validation quality, mean cost) of each prefix within ``budget`` of plain LightGBM or the cheap
    subset's model (its units' columns, the others missing) fitted on every row with the sweep's LightGBM parameters,
    early stopped on the validation rows' log loss (regression: l2), each prefix as the sweep's."""
    from lightgbm_cegb.selection.baseline import named_units
    from lightgbm_cegb.selection.points import PREFIX_TREES, prefix_points

    frame = chosen.frontier
    X = cluster[0]
    names = [str(c) for c in X.columns] if hasattr(X, "columns") else None
    num_features = X.shape[1]
    columns = list(range(num_features))
    if chosen.method == "cheap_subset":
        by_name = {u.name: u for u in named_units(frame.attrs["costs"], num_features, names)}
        columns = sorted(c for name in chosen.params["features"] for c in by_name[name].columns)
    own = {k: v for k, v in chosen.params.items() if k not in ("trees", "features", "steps")}
    setting = repr((chosen.method, columns, sorted(own.items())))
    if setting not in refits:
        refits[setting] = _boosted_on_workers(cluster, valid, columns, own, frame.attrs, options, names)
    point = {k: v for k, v in chosen.params.items() if k != "trees"}
    for candidate in prefix_points(chosen.method, point, refits[setting], "predict", frame.attrs["costs"], valid.X,
                                   [budget], PREFIX_TREES):
        quality, cost, _ = candidate.measure(valid, frame.attrs["metric_object"], choose=True)
        if cost <= budget * (1 + 1e-12):
            yield candidate, quality, cost


def _boosted_on_workers(cluster: tuple, valid: Rows, columns: list[int], own: dict, attrs: dict, options: dict,
                        names: list[str] | None):
    """LightGBM with the sweep's parameters (``options["params"]`` and the point's ``own``) on every row of
    ``cluster`` with the columns outside ``columns`` missing, on the active client's workers, early stopped on the
    validation rows (``dask_stages.HeldOutStopping``: log loss, regression l2) and cut to its best iteration."""
    from lightgbm_cegb.io.lightgbm_text import loaded
    from lightgbm_cegb.methods import dask_stages
    from lightgbm_cegb.methods.acquisition import hidden
    from lightgbm_cegb.selection.points import task_params

    task, classes = attrs["task"], attrs["classes"]
    X, y = as_array(cluster[0]).astype(np.float64), as_array(cluster[1])
    y = y.astype(np.float64) if classes is None else y.map_blocks(_codes, np.asarray(classes), dtype=np.int64)
    rows = dask_stages.DaskRows(X, y.rechunk((X.chunks[0],)), X.shape[0]).spread(dask_stages.dask_client())
    params = task_params(task, 1 if classes is None else len(classes), {**(options.get("params") or {}), **own})
    loss = dask_stages.l2 if task == "regression" else dask_stages.log_loss
    stopping = dask_stages.HeldOutStopping(hidden(np.asarray(valid.X, dtype=np.float64), columns), np.asarray(valid.y),
                                           None, None, options.get("early_stopping_rounds", EARLY_STOPPING_ROUNDS),
                                           loss=loss)
    booster = dask_stages.on_workers(params, options.get("num_boost_round", NUM_BOOST_ROUND), rows.hidden(columns),
                                     rows.labels, None, None, [stopping], "auto" if names is None else names)
    return loaded(booster.model_to_string(num_iteration=booster.best_iteration))


def _codes(labels: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Labels as their indices in the sweep's ``classes`` (an unknown label is an error naming it)."""
    return encoded(Rows(None, labels), classes, "train").y


def best_subset(train, valid, costs, budget: float | Sequence[float], *, task: str, test=None,
                **options) -> Selection | list[Selection]:
    """Which features to buy within ``budget``: the best feature subset the cheap-subset baseline's search finds
    (forward by validation gain per unit of cost, groups as units, backward pruning; see
    :mod:`lightgbm_cegb.selection.baseline`), with plain LightGBM on it.

    :func:`fit_within_budget` with ``methods=["cheap_subset"]`` and no screen: the returned Selection's
    ``params["features"]`` names the units bought (groups by name, ungrouped features by column name), its model
    reads only their columns (the others hidden as missing values), and its frontier holds the search's path.

    Parameters
    ----------
    train : tuple or Rows
        The training rows, (X, y) or (X, y, group).
    valid : tuple or Rows
        The validation rows: the search's measures, early stopping and the choice.
    costs : FeatureCosts, lazy costs per column, or None
        The cost model, as :func:`sweep` takes it.
    budget : float or sequence of float
        The largest mean prediction cost per validation row; several: a Selection for each, from one search (within
        the largest).
    task : str
        "binary", "multiclass", "regression" or "ranking".
    test : tuple or Rows, optional
        Test rows: the chosen subset's model is measured on them.
    **options : dict
        Passed on to :func:`sweep` (``params``, ``metric``, ``grid={"cheap_subset": [{"steps": n}]}``, ...).

    Returns
    -------
    Selection or list of Selection
        The chosen subset's model; for a sequence of budgets, one per budget.

    Examples
    --------
    >>> from lightgbm_cegb.datasets import HIGGS_COSTS, higgs
    >>> from lightgbm_cegb.selection import best_subset
    >>> X, y = higgs("train")
    >>> chosen = best_subset((X[:5000], y[:5000]), (X[5000:], y[5000:]), HIGGS_COSTS, 40.0, task="binary",
    ...                      progress=False)
    >>> chosen.valid_cost <= 40.0 and len(chosen.params["features"]) > 0
    True
    """
    return fit_within_budget(train, valid, costs, budget, task=task, methods=["cheap_subset"], test=test,
                             screen=False, **{"method_fits": None, **options})


def _within(frame: pd.DataFrame, budget: float, test) -> Selection:
    """fit_within_budget's choice for one budget from its sweep."""
    if (frame["cost"] <= budget).any():
        chosen = select.unchecked(frame, budget, test)
    else:
        cheapest = frame.loc[frame["cost"].idxmin()]
        warnings.warn(f"fit_within_budget: budget={budget:g} is below every method's cheapest point (the "
                      f"cheapest, {cheapest['method']}, costs {cheapest['cost']:g} per validation row); returning "
                      "that point", BudgetWarning, stacklevel=caller_stacklevel())
        chosen = selection_of(frame, cheapest, test, None)
        chosen.within_budget = False
    chosen.frontier = frame
    return chosen


#: train_to_budget's parameters and the options it passes on to sweep (all but its methods and grid: its own)
TRAIN_TO_BUDGET_CONSTRAINTS = {
    **{name: constraint for name, constraint in SWEEP_CONSTRAINTS.items() if name not in ("methods", "grid")},
    "budget": Number(0.0), "test": ROWS, "relative_tradeoffs": Numbers(Number(0.0)),
}


@validated(TRAIN_TO_BUDGET_CONSTRAINTS)
def train_to_budget(train, valid, costs, budget: float, *, task: str, test=None,
                    relative_tradeoffs: Sequence[float] = CEGB_RELATIVE_TRADEOFFS,
                    refine: int = 4, **options) -> Selection:
    """CEGB trained to a budget: every model is trained with ``budget_stopping`` and early stopping.

    With ``budget_stopping`` a model's mean validation cost stays within ``budget``; the search over
    ``cegb_tradeoff`` (in units of :func:`~lightgbm_cegb.lgbm.cegb_tradeoff_scale`) starts on
    ``relative_tradeoffs`` (CEGB's default grid: where the cost moves depends on the data, and a sparse start
    misses it, e.g. MNIST's between 0 and 0.05) and then halves, ``refine`` times, the geometric gap around the
    best point (``sweep(..., budget=)``). The cheap-subset baseline is not swept.

    Parameters
    ----------
    train : tuple or Rows
        The training rows, (X, y) or (X, y, group) with ``group`` the query sizes (ranking).
    valid : tuple or Rows
        The validation rows, the same way.
    costs : FeatureCosts, lazy costs per column, or None
        The cost model (by feature name when X is a DataFrame; None: every feature at 1), as :func:`sweep` takes it.
    budget : float
        The largest mean prediction cost per validation row.
    task : str
        "binary", "multiclass", "regression" or "ranking" (see :func:`sweep`).
    test : tuple or Rows, optional
        Test rows, (X, y) or (X, y, group): the chosen point is measured on them.
    relative_tradeoffs : sequence of float, default=CEGB_RELATIVE_TRADEOFFS
        The starting grid of ``relative_tradeoff`` (CEGB's default grid).
    refine : int, default=4
        Rounds of halving the gap around the best point.
    **options : dict
        Passed on to :func:`sweep` (``params``, ``metric``, ``n_jobs``, ...; ``baseline`` is set to False).

    Returns
    -------
    Selection
        The :func:`select` of all points tried.

    Raises
    ------
    CEGBError
        When no point is within ``budget`` (as :func:`select`).
    """
    frame = sweep.unchecked("cegb", train, valid, costs, task=task, budget=budget, refine=refine,
                            grid={"cegb": [{"relative_tradeoff": r, "budget": budget} for r in relative_tradeoffs]},
                            **{**options, "baseline": False})
    return select.unchecked(frame, budget, test)
