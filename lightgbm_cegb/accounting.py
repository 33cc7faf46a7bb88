"""Exact prediction cost of a tree ensemble on given rows, under the cost model of cost-efficient gradient
boosting (CEGB: S. Peter, F. Diego, F. A. Hamprecht and B. Nadler, "Cost efficient gradient boosting", NIPS 2017).

For every row: the lazy (per-instance) cost of the distinct features tested on its root-to-leaf paths in
all trees (acquisition), plus the split cost of every split node it traverses and the cost of every tree it
goes through (evaluation). The model's coupled cost is the sum of the coupled costs of the features any split
uses (and of their groups', each once). Rows are routed by the Cython engine exactly as LightGBM (or
scikit-learn) routes them.
"""

from __future__ import annotations

import numpy as np
from sklearn.pipeline import Pipeline

from lightgbm_cegb.core.costs import resolve_costs
from lightgbm_cegb.core.partitions import is_dask, over_partitions, partitions, query_parts
from lightgbm_cegb.core.report import CostReport
from lightgbm_cegb.io.models import fitted_costs, num_trees_used, to_forest, unwrap


def prediction_cost(model, X, costs=None, *, num_iteration: int | None = None,
                    per_iteration: bool = False, n_jobs: int | None = None, group=None) -> CostReport:
    """Per-row prediction cost of ``model`` on ``X``.

    For every row: the lazy (per-instance) cost of the distinct features tested on its root-to-leaf paths
    in all trees used (acquisition), plus the split cost of every split node it traverses and the cost of
    every tree it goes through (evaluation); for the model, the coupled cost of the features any split of
    the trees used tests.

    Parameters
    ----------
    model : lightgbm.Booster, LGBMModel, XGBoost or CatBoost model, model file path, Forest, scikit-learn trees, \
or any model of the package
        The package's estimators (CEGB, GreedyMiser, BudgetRF, ADAPT, CSTC, the acquisition classifiers) and an
        EarlyExit, alone or chosen by a Selection, are priced by their own exact accounting (their
        ``prediction_cost``: the cost of what ``predict`` does, under the costs they were fitted with); asked for
        other costs, ``num_iteration`` or ``per_iteration``, those with trees have their trees priced, the others
        refuse.
        scikit-learn: DecisionTree*, ExtraTree*, RandomForest*, ExtraTrees*, GradientBoosting*,
        HistGradientBoosting*, Bagging* of trees, IsolationForest. XGBoost: a Booster or its scikit-learn
        estimators; CatBoost: its models with symmetric trees on float features; files: LightGBM text, XGBoost
        JSON or UBJSON, CatBoost JSON or binary. A fitted scikit-learn Pipeline whose last step is one of these: X goes
        through the steps before it, and costs are those of the columns the last step sees (by position, or
        by the names ``get_feature_names_out`` gives them: a scaler or an imputer keeps X's names).
    X : array-like of shape (n_rows, n_features)
        numpy array, scipy sparse matrix (routed in blocks, never densified as a whole), pandas
        DataFrame (category columns mapped to the model's codes as LightGBM does), or a Dask array (chunked along
        its rows only) or DataFrame: each partition priced where its scheduler runs it (a ``distributed`` client's
        workers), the reports stacked in the rows' order (``CostReport.stacked``: the per-row costs and the usage
        equal to those of the rows in memory).
    costs : FeatureCosts, lazy costs per column, or a mapping / pandas Series by feature name, optional
        None reads the ``cegb_*`` parameters the LightGBM model was trained with (a package estimator:
        the costs it was fitted with). Names given with spaces
        match LightGBM's renamed features (spaces become underscores).
    num_iteration : int, optional
        Use the first ``num_iteration`` iterations. None: as ``Booster.predict``, the best iteration if
        the booster has one, otherwise all.
    per_iteration : bool, default=False
        Also compute ``curve``: the mean per-row cost after each iteration, in the same pass.
    n_jobs : int, optional
        Threads (None: the CPUs this process may use).
    group : array-like of shape (n_queries,), optional
        The sizes of X's consecutive queries, for a ranker whose cost depends on them (an EarlyExit ranker, which
        needs them; the staged acquisition ranker, which reads X as one query without them); a model that prices
        each row alone ignores them. With a Dask X, whatever the model: a Dask array of each partition's query
        sizes, a chunk per partition (as ``lightgbm.dask`` takes it).

    Returns
    -------
    CostReport
        The per-row ``acquisition`` and ``evaluation`` costs, the model's ``coupled`` cost, the share of
        rows whose paths test each feature (``usage``; ``group_usage`` with feature groups) and, with
        ``per_iteration``, the ``curve``.

    Raises
    ------
    CEGBError
        When ``costs`` is None and the model was trained without ``cegb_*`` parameters, when the costs
        do not match the model's features, when X does not have the model's number of columns, or when a model
        of the package without trees is asked for other costs, ``num_iteration`` or ``per_iteration``.

    See Also
    --------
    to_forest : The Forest a model is read into.
    CostState : The same accounting, kept across several models or added to tree by tree.
    """
    if is_dask(X):
        each = None if group is None else {"group": query_parts(group, len(partitions(X)))}
        return CostReport.stacked(over_partitions(_partition_cost, X, model, costs, num_iteration=num_iteration,
                                                  per_iteration=per_iteration, n_jobs=n_jobs, each=each))
    names = None
    if costs is None:  # a Selection carries the costs its point was measured with
        costs = fitted_costs(model)
    model = unwrap(model)
    if isinstance(model, Pipeline):
        model, X, names = _last_step(model, X)
    asked = {"num_iteration": num_iteration, "per_iteration": per_iteration, "n_jobs": n_jobs,
             **({} if group is None else {"group": group})}
    report = _own_cost(model, X, costs, asked)  # the package's estimators: what predict does
    if report is not None:
        return report
    forest, costs = _forest_costs(model, costs, names)
    num_trees = num_trees_used(model, forest, num_iteration)
    lazy, _, split = costs.arrays(forest.num_features)
    group_of, group_lazy, _ = costs.group_arrays(forest.num_features)
    acquisition, evaluation, rows_using, curve = forest.cost(X, lazy, split, num_trees, group_of=group_of,
                                                             group_lazy=group_lazy, tree=costs.tree,
                                                             per_iteration=per_iteration, n_jobs=n_jobs)
    return _report(forest, costs, num_trees, acquisition, evaluation, rows_using, curve)


def prefix_costs(model, X, costs, iterations, *, raw: bool = False,
                 n_jobs: int | None = None) -> tuple[list[CostReport], np.ndarray | None] | None:
    """``prediction_cost(model, X, costs, num_iteration=k)`` for each ``k`` of ``iterations`` (increasing), in one
    pass over the trees, each report to the bit; with ``raw``, also the rows' raw scores after each (LightGBM's
    ``predict(raw_score=True)`` bits: float64[len(iterations), n_rows, trees per iteration]). None where the one pass
    does not apply (a Dask X, a Pipeline, a model priced by its own accounting at these iterations, linear trees or a
    random forest's averaged output with ``raw``): ask ``prediction_cost`` for each. The reports' per-row arrays are
    rows of one array of all the prefixes."""
    if is_dask(X):
        return None
    if costs is None:
        costs = fitted_costs(model)
    model = unwrap(model)
    asked = {"num_iteration": iterations[0], "per_iteration": False, "n_jobs": n_jobs}
    if isinstance(model, Pipeline) or _own_cost(model, X, costs, asked) is not None:
        return None
    forest, costs = _forest_costs(model, costs, None)
    if raw and (forest.linear is not None or forest.average_output):
        return None
    trees = [num_trees_used(model, forest, k) for k in iterations]
    ends = sorted(set(trees))
    lazy, _, split = costs.arrays(forest.num_features)
    group_of, group_lazy, _ = costs.group_arrays(forest.num_features)
    acquisition, evaluation, rows_using, scores = forest.prefix_cost(X, lazy, split, ends, group_of=group_of,
                                                                     group_lazy=group_lazy, tree=costs.tree, raw=raw,
                                                                     n_jobs=n_jobs)
    at = [ends.index(t) for t in trees]
    if scores is not None and at != list(range(len(ends))):
        scores = scores[at]
    return [_report(forest, costs, t, acquisition[j], evaluation[j], rows_using[j], None)
            for t, j in zip(trees, at)], scores


def _forest_costs(model, costs, names):
    """(the model's Forest, the costs resolved against its features: ``names``, else the forest's own)."""
    forest = to_forest(model)
    return forest, resolve_costs(fitted_costs(model) if costs is None else costs, forest.num_features,
                                 names or forest.feature_names, forest.params, unpriced="refuse")


def _report(forest, costs, num_trees: int, acquisition, evaluation, rows_using, curve) -> CostReport:
    """The CostReport of the first ``num_trees`` trees from the kernel's per-row costs, rows using each unit and
    total cost after each iteration (or None)."""
    n = max(len(acquisition), 1)
    groups = costs.groups
    return CostReport(acquisition=acquisition, evaluation=evaluation,
                      coupled=costs.model_cost(forest.used_features(num_trees), forest.num_features),
                      usage=rows_using[:forest.num_features] / n, curve=None if curve is None else curve / n,
                      feature_names=forest.feature_names,
                      group_usage=None if groups is None else
                      dict(zip(groups, (rows_using[forest.num_features:] / n).tolist())))


def _partition_cost(X, model, costs, **asked) -> CostReport:
    """prediction_cost of one partition of a Dask collection (its rows first: ``over_partitions``' order)."""
    return prediction_cost(model, X, costs, **asked)


def _own_cost(model, X, costs, asked: dict) -> CostReport | None:
    """The model's own exact accounting, by its ``__lightgbm_cegb_cost__`` (the package's estimators, EarlyExit), or
    None where its trees answer (or it has none of its own)."""
    own = getattr(type(model), "__lightgbm_cegb_cost__", None)
    return None if own is None else own(model, X, costs, **asked)


def _last_step(pipeline: Pipeline, X):
    """(the pipeline's model, X through the steps before it, the names of those columns or None)."""
    head, model = pipeline[:-1], pipeline[-1]
    if not len(head.steps):
        return model, X, None
    X = head.transform(X)
    try:
        names = [str(name) for name in head.get_feature_names_out()]
    except (AttributeError, TypeError, ValueError):  # a step that cannot name its output columns
        names = None
    return model, X, names
