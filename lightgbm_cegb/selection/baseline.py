"""The obvious baseline every sweep includes: plain LightGBM on a cost-aware subset of the features, found by a
search that measures subsets.

``cheap_subset`` runs :class:`lightgbm_cegb.core.subsets.SubsetSearch` over the units of the costs (a feature group,
whose members are read together, or an ungrouped feature), each subset measured by the validation quality of a
LightGBM model of it (for accuracy: its log-loss, which a unit that sharpens the probabilities improves where the
accuracy, a step function, may not move and stop the search; for any other metric, that metric: a threshold metric
such as F1 on rare positives asks for other units than the log-loss): no single model's importance order decides,
and a group that pays only with its members together is tried as one. Its runs (by gain per unit of cost, by gain,
among the units below each of a few prices, then exchanges of one unit for another from the best of them:
``SubsetSearch.runs``) are made within each of the sweep's budgets (none: without a budget); the measures are
shared.

The subsets are measured on at most SEARCH_ROWS training and SEARCH_VALID validation rows (classes in proportion,
whole queries: ``Rows.subsample``), so the search holds at any training size. Each subset a run reaches is a point
(with its prefixes), measured on every validation row like every other point of the sweep; when the search's rows
are a subsample, only the SEARCH_REFITS best subsets it measured within each budget are fitted on every training row
(the validation rows choose among them: a subsample's measure is noisy), and in a sweep without a budget (a
frontier) also the steps of each run's path at each doubling of the price.

With more than ``core.subsets.MAX_UNITS`` priced units (MNIST's 1,120 pixels, Yahoo!'s 519 features), the search's
first step would fit a model per unit. It then searches the units that one plain LightGBM model of every feature, on
the search's rows, splits on (``core.subsets.searched``, as the staged acquisition's ``order="search"``): the
MAX_UNITS / 2 of the largest gain and the MAX_UNITS / 2 of the largest gain per unit of cost (by the summed gain of a
unit's columns), and the free ones.
:func:`lightgbm_cegb.selection.best_subset` answers "which features should I buy?" with it.

A unit's nominal cost is what reading it costs a row: its lazy cost (a group's own lazy cost plus its members');
when no feature has a lazy cost, its coupled cost. The search measures a subset by a model of its columns alone;
a point's model has the other features hidden from LightGBM as missing values (a column of one value cannot be split
on), so it keeps the data's columns and predicts on the full rows.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import scipy.sparse as sp

from lightgbm_cegb.core import subsets
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.subsets import SubsetSearch, Unit, columns_of, price_of, searched
from lightgbm_cegb.core.validation import check_number
from lightgbm_cegb.selection.metrics import METRICS, validation_quality
from lightgbm_cegb.selection.points import (
    PREFIX_TREES,
    booster_points,
    lightgbm_params,
    plain_model,
    sliced,
    train_lightgbm,
)
from lightgbm_cegb.selection.registry import Candidate, Context, Family


def units(context: Context, num_features: int) -> list[Unit]:
    """The units of the sweep's costs over ``num_features`` columns, groups first (``FeatureCosts.units``)."""
    names = context.train.X.columns.astype(str).tolist() if hasattr(context.train.X, "columns") else None
    return named_units(context.costs, num_features, names)


def named_units(costs, num_features: int, names: list[str] | None) -> list[Unit]:
    """The units of ``costs`` over ``num_features`` columns named ``names`` (None: LightGBM's Column_j), groups first:
    a group by its name, an ungrouped feature by its column's (a point's ``features``)."""
    names = [f"Column_{j}" for j in range(num_features)] if names is None else names
    return [Unit(names[columns[0]] if group is None else str(group), columns, price)
            for group, columns, price in costs.units(num_features)]


def hidden(X, columns: list[int]):
    """X with every column but ``columns`` set to a missing value (sparse: to 0), as a copy."""
    keep = np.zeros(X.shape[1], dtype=bool)
    keep[columns] = True
    if sp.issparse(X):
        return (X.tocsc() @ sp.diags(keep.astype(np.float64))).tocsr()
    if isinstance(X, pd.DataFrame):
        out = X.copy()
        for j in np.flatnonzero(~keep):
            dtype = X.dtypes.iloc[j]
            if isinstance(dtype, pd.CategoricalDtype):  # stays categorical: LightGBM matches train's and valid's kinds
                column = pd.Series(pd.Categorical.from_codes(np.full(len(X), -1), dtype=dtype), index=X.index)
            else:
                column = pd.Series(np.nan, index=X.index, dtype="float64")
            out.isetitem(int(j), column)
        return out
    out = np.array(X, dtype=np.float64)
    out[:, ~keep] = np.nan
    return out


def _constant_quality(context: Context, metric) -> float:
    """The validation quality of the constant model (the training labels' mean, or class frequencies)."""
    y, n = context.train.y, len(context.valid.y)
    if context.task == "multiclass":
        frequencies = np.bincount(y, minlength=int(max(y.max(), context.valid.y.max())) + 1) / len(y)
        prediction = np.tile(frequencies, (n, 1))
    else:
        prediction = np.full(n, 0.0 if context.task == "ranking" else float(np.mean(y)))
    return validation_quality(metric, context.valid.y, prediction, context.valid.group)


#: the training and the validation rows the subset search measures subsets on, at most (``Rows.subsample``), and
#: the best subsets it measured within each budget that are refitted on every row when those are a subsample (on
#: Fashion-MNIST's four tops within 6, the four best measured log losses were 0.5629, 0.5636, 0.5658 and 0.5659 on
#: the subsample, and the fourth is the best subset on every row: 0.8079 validation accuracy against the third's 0.8054)
SEARCH_ROWS, SEARCH_VALID, SEARCH_REFITS = subsets.SEARCH_ROWS, subsets.SEARCH_ROWS, 5


def searched_units(context: Context, pool: list[Unit]) -> list[Unit]:
    """The units of ``pool`` the search takes on ``context``'s rows (``core.subsets.searched``: beyond MAX_UNITS priced
    ones, by the gain of a plain model of every feature, in ``pool``'s order)."""
    def unit_gain() -> np.ndarray:
        gain = plain_model(context).feature_importance("gain")
        return np.array([gain[list(u.columns)].sum() for u in pool])
    return [pool[i] for i in searched(np.array([u.cost for u in pool]), unit_gain)]


def _search(context: Context) -> tuple[SubsetSearch, bool, Context]:
    """The subset search on ``context``'s rows (subsampled), each subset measured by the sign-adjusted validation
    quality of plain LightGBM on its columns (for accuracy: the log-loss); whether its rows are a subsample; the
    context of the search's rows."""
    train, valid = context.train, context.valid
    subsampled = len(train.y) > SEARCH_ROWS or len(valid.y) > SEARCH_VALID
    if subsampled:
        context = replace(context, train=train.subsample(SEARCH_ROWS, context.task) if len(train.y) > SEARCH_ROWS
                          else train, valid=valid.subsample(SEARCH_VALID, context.task) if len(valid.y) > SEARCH_VALID
                          else valid, shared={})
    metric = METRICS["logloss"] if context.metric.name == "accuracy" else context.metric
    sign = 1.0 if metric.greater_is_better else -1.0

    def score(columns: tuple[int, ...]) -> float:
        # a model of the subset's columns alone: on MNIST's 1,120 pixels, binning them all (the others missing) for
        # each of the search's 400 models took a third of its time
        booster = train_lightgbm(context, lightgbm_params(context), columns=columns, measure=True)
        quality = validation_quality(metric, context.valid.y, booster.predict(sliced(context.valid.X, columns)),
                                     context.valid.group)
        return sign * quality

    return SubsetSearch(score, sign * _constant_quality(context, metric)), subsampled, context


def _doubling(path: list[list[Unit]]) -> list[list[Unit]]:
    """The steps of a path whose price is at least twice the last such step's (the first step among them)."""
    kept, last = [], 0.0
    for step in path:
        price = price_of(step)
        if not kept or price >= 2 * last:
            kept.append(step)
            last = price
    return kept


#: this module's method, registered by the package (``lightgbm_cegb.selection``)
FAMILY = Family()


@FAMILY.method("cheap_subset", grid=lambda context: [{}])
def _fit_cheap_subset(context: Context, state, params: dict) -> list[Candidate]:
    """The search's path of subsets (see the module), each step a point; given ``features``, that subset's model
    alone (no search: a screen's finalist)."""
    params = dict(params)
    unknown = sorted(set(params) - {"features", "steps", "trees"})
    if unknown:
        raise CEGBError(f"cheap_subset: unknown parameter(s) {unknown}; it takes ['features', 'steps', 'trees']")
    steps = params.get("steps", 20)
    check_number(steps, "cheap_subset: steps", 1, integer=True)
    trees = params.get("trees", PREFIX_TREES)
    num_features = np.shape(context.train.X)[1]

    def points(taken: list[Unit]) -> list[Candidate]:  # a model of every column (the rest missing): it reads X
        booster = train_lightgbm(context, lightgbm_params(context), X=hidden(context.train.X, columns_of(taken)))
        return booster_points("cheap_subset", context, {"features": tuple(u.name for u in taken), "steps": steps},
                              booster, trees)

    if "features" in params:  # one subset, as a path's step recorded it: its model alone
        by_name = {u.name: u for u in units(context, num_features)}
        named = params["features"]
        if isinstance(named, str) or not isinstance(named, (list, tuple)) or not named or \
                not all(isinstance(name, str) and name in by_name for name in named):
            raise CEGBError(f"cheap_subset: features should be a non-empty list of unit names (groups or ungrouped "
                            f"features, e.g. {list(by_name)[:3]}), got {named!r:.80}")
        return points([by_name[name] for name in named])
    search, subsampled, searched = _search(context)
    pool = searched_units(searched, units(context, num_features))
    found: dict[tuple[str, ...], list[Unit]] = {}  # every subset a run reached, in the order reached
    for budget in sorted(context.budgets) or [None]:
        paths = search.runs(pool, budget, steps)
        if subsampled:  # every row: the best measured subsets within the budget, and without a budget the steps of
            # each run at each doubling of the price too (a frontier of a few fits)
            paths = [_doubling(path) for path in paths if budget is None] + [search.best(budget, SEARCH_REFITS)]
        for path in paths:
            for step in path:
                found.setdefault(tuple(u.name for u in step), step)
    candidates: list[Candidate] = []
    for taken in found.values():
        candidates += points(taken)
    return candidates
