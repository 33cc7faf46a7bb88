"""The obvious baseline every sweep includes: plain LightGBM on a cost-aware subset of the features.

``cheap_subset`` grows a subset of "units" (a feature group, whose members are read together, or an
ungrouped feature) greedily: at each step it tries the ``width`` units not yet taken with the largest gain
importance per unit of cost in the plain model (trained once on every feature), keeps the one whose
addition gives the largest validation gain per unit of cost, and makes each step's model (and its prefixes)
a point. Units that cost nothing are taken first; with the sweep's budget, a unit whose nominal cost would
take the subset over it is not tried. It stops when no unit improves the validation quality (after the
first, which is a point in any case), after ``steps`` steps, or when no unit fits.

A unit's nominal cost is what reading it costs a row: its lazy cost (a group's own lazy cost plus its
members'); when no feature has a lazy cost, its coupled cost. Each point is then measured exactly, like every
other point of the sweep. The other features are hidden from LightGBM as missing values (a column of one
value cannot be split on), so the model keeps the data's columns and predicts on the full rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.validation import check_number
from lightgbm_cegb.selection.adapters import PREFIX_TREES, booster_points, lightgbm_params, plain_model, train_lightgbm
from lightgbm_cegb.selection.metrics import validation_quality
from lightgbm_cegb.selection.registry import Candidate, Context, register


@dataclass(frozen=True)
class Unit:
    """A group or an ungrouped feature: its name, its columns, its nominal cost per row."""

    name: str
    columns: tuple[int, ...]
    cost: float


def units(context: Context, num_features: int) -> list[Unit]:
    """The units of the sweep's costs over ``num_features`` columns, groups first (``FeatureCosts.units``)."""
    names = context.train.X.columns.astype(str).tolist() if hasattr(context.train.X, "columns") else \
        [f"Column_{j}" for j in range(num_features)]
    return [Unit(names[columns[0]] if group is None else str(group), columns, price)
            for group, columns, price in context.costs.units(num_features)]


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


@register("cheap_subset", grid=lambda context: [{}])
def _fit_cheap_subset(context: Context, state, params: dict) -> list[Candidate]:
    """A path of subsets, the units ranked by the plain model's gain importance per cost; given ``features``, that
    subset's model alone (no plain model: a screen's finalist)."""
    params = dict(params)
    unknown = sorted(set(params) - {"features", "width", "steps", "trees"})
    if unknown:
        raise CEGBError(f"cheap_subset: unknown parameter(s) {unknown}; it takes ['features', 'steps', 'trees', "
                        "'width']")
    width, steps = params.get("width", 4), params.get("steps", 20)
    check_number(width, "cheap_subset: width", 1, integer=True)
    check_number(steps, "cheap_subset: steps", 1, integer=True)
    trees = params.get("trees", PREFIX_TREES)
    metric = context.metric
    sign = 1.0 if metric.greater_is_better else -1.0
    num_features = np.shape(context.train.X)[1]
    candidates: list[Candidate] = []

    def fit(taken: list[Unit]):
        columns = sorted(j for u in taken for j in u.columns)
        booster = train_lightgbm(context, lightgbm_params(context), X=hidden(context.train.X, columns))
        point = {"features": tuple(u.name for u in taken), "width": width, "steps": steps}
        points = booster_points("cheap_subset", context, point, booster, trees)
        whole = points[-1]  # the most trees
        return points, sign * validation_quality(metric, context.valid.y, whole.predict(context.valid.X),
                                                 context.valid.group)

    if "features" in params:  # one subset, as a path's step recorded it: its model alone
        by_name = {u.name: u for u in units(context, num_features)}
        named = params["features"]
        if isinstance(named, str) or not isinstance(named, (list, tuple)) or not named or \
                not all(isinstance(name, str) and name in by_name for name in named):
            raise CEGBError(f"cheap_subset: features should be a non-empty list of unit names (groups or ungrouped "
                            f"features, e.g. {list(by_name)[:3]}), got {named!r:.80}")
        return fit([by_name[name] for name in named])[0]
    gain = plain_model(context).feature_importance("gain")
    pool = [u for u in units(context, num_features) if gain[list(u.columns)].sum() > 0]
    chosen = [u for u in pool if u.cost == 0]
    pool = [u for u in pool if u.cost > 0]
    pool.sort(key=lambda u: -gain[list(u.columns)].sum() / u.cost)
    quality = sign * _constant_quality(context, metric)
    if chosen:
        points, quality = fit(chosen)
        candidates += points
    spent = sum(u.cost for u in chosen)
    for _ in range(steps):
        tried = [u for u in pool if context.budget is None or spent + u.cost <= context.budget][:width]
        if not tried:
            break
        results = [(u, *fit(chosen + [u])) for u in tried]
        unit, points, better = max(results, key=lambda r: (r[2] - quality) / r[0].cost)
        if better <= quality and candidates:  # the first unit is a point even when it does not beat the constant
            break
        chosen.append(unit)
        pool.remove(unit)
        spent += unit.cost
        quality = better
        candidates += points
    return candidates
