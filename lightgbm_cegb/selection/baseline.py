"""The obvious baseline every sweep includes: plain LightGBM on a cost-aware subset of the features, found by a
search that measures subsets.

``cheap_subset`` searches subsets of "units" (a feature group, whose members are read together, or an ungrouped
feature) forward, by validation quality: units that cost nothing first, then at each step the unit whose addition
gains the most validation quality per unit of its cost (or, in a second run, the most quality: the better of the
two is within a constant factor of the best subset for submodular gains, Leskovec et al.'s CELF, KDD 2007), each
gain measured by a LightGBM model of the subset with it: no single model's importance order decides, and a group
that pays only with its members together is tried as one. The search is lazy (Minoux's): every unit is measured
at the first step, later only those whose last measured score could still beat the others' (a unit's gain rarely
grows as the subset does; when it does, the unit is measured again before it is passed over). A run stops when no
unit improves the validation quality (after the first unit, a step in any case), after ``steps`` steps, or when
no unit fits its budget; then backward pruning drops each unit of its last subset, the costliest first, whose
absence loses nothing, and the run goes on forward from the pruned subset once. Both runs are made within each
of the sweep's budgets (none: without a budget); the measures are shared.

The subsets are measured on at most SEARCH_ROWS training and SEARCH_VALID validation rows (classes in proportion,
whole queries: ``Rows.subsample``), so the search holds at any training size. Each subset a run reaches is a point
(with its prefixes), measured on every validation row like every other point of the sweep; when the search's rows
are a subsample, only each run's answer (its best measured subset) is fitted on every training row.
:func:`lightgbm_cegb.selection.best_subset` answers "which features should I buy?" with it.

A unit's nominal cost is what reading it costs a row: its lazy cost (a group's own lazy cost plus its members');
when no feature has a lazy cost, its coupled cost. The other features are hidden from LightGBM as missing values
(a column of one value cannot be split on), so the model keeps the data's columns and predicts on the full rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import lightgbm as lgb
import numpy as np
import pandas as pd
import scipy.sparse as sp

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.validation import check_number
from lightgbm_cegb.selection.adapters import PREFIX_TREES, booster_points, lightgbm_params, train_lightgbm
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


#: the training and the validation rows the subset search measures subsets on, at most (``Rows.subsample``)
SEARCH_ROWS, SEARCH_VALID = 5_000, 5_000


def _columns(taken: list[Unit]) -> list[int]:
    """The columns the units ``taken`` read, sorted."""
    return sorted(j for u in taken for j in u.columns)


class _Search:
    """The forward search with backward pruning of the module's doc on ``context``'s rows (subsampled).

    ``measure(units)`` is the sign-adjusted validation quality of plain LightGBM on their columns (memoised by
    columns; the boosters kept when the search's rows are the sweep's, where a step's point needs no refit)."""

    def __init__(self, context: Context) -> None:
        train, valid = context.train, context.valid
        self.subsampled = len(train.y) > SEARCH_ROWS or len(valid.y) > SEARCH_VALID
        if self.subsampled:
            context = replace(context, train=train.subsample(SEARCH_ROWS, context.task) if len(train.y) >
                              SEARCH_ROWS else train, valid=valid.subsample(SEARCH_VALID, context.task) if
                              len(valid.y) > SEARCH_VALID else valid, shared={})
        self.context = context
        self.sign = 1.0 if context.metric.greater_is_better else -1.0
        self.measured: dict[tuple[int, ...], tuple[float, lgb.Booster | None]] = {}

    def measure(self, taken: list[Unit]) -> float:
        columns = tuple(_columns(taken))
        if columns not in self.measured:
            context = self.context
            booster = train_lightgbm(context, lightgbm_params(context), X=hidden(context.train.X, list(columns)))
            quality = self.sign * validation_quality(context.metric, context.valid.y, booster.predict(context.valid.X),
                                                     context.valid.group)
            self.measured[columns] = (quality, None if self.subsampled else booster)
        return self.measured[columns][0]

    def booster(self, taken: list[Unit]) -> lgb.Booster | None:
        """The search's model of a measured subset when it was trained on the sweep's rows, else None."""
        return self.measured[tuple(_columns(taken))][1]

    def forward(self, chosen: list[Unit], quality: float, pool: list[Unit], budget: float | None, steps: int,
                path: list[list[Unit]], by_ratio: bool) -> float:
        """Add units to ``chosen`` (in place, each step's subset appended to ``path``) while one gains, the one of
        the largest gain per unit of cost (``by_ratio``) or of the largest gain; returns the last subset's
        quality."""
        bound = {u: np.inf for u in pool}  # each unit's last measured score: an upper bound, by the rule
        fresh: set[Unit] = set()  # the units measured against the current subset
        while len(path) < steps:
            spent = sum(u.cost for u in chosen)
            fits = sorted((u for u in pool if u not in chosen and (budget is None or spent + u.cost <= budget)),
                          key=lambda u: (-bound[u], pool.index(u)))
            picked = None
            while fits:
                unit = fits[0]
                if unit in fresh:
                    picked = unit
                    break
                bound[unit] = (self.measure(chosen + [unit]) - quality) / (unit.cost if by_ratio else 1.0)
                fresh.add(unit)
                fits.sort(key=lambda u: (-bound[u], pool.index(u)))
            if picked is None or (bound[picked] <= 0 and chosen):  # the first unit is a step in any case
                break
            chosen.append(picked)
            quality = self.measure(chosen)
            path.append(list(chosen))
            fresh.clear()
        return quality

    def prune(self, chosen: list[Unit], quality: float, path: list[list[Unit]]) -> tuple[list[Unit], float]:
        """Drop each unit of ``chosen`` (the costliest first) whose absence loses nothing; the pruned subset is a
        step of ``path`` when it differs."""
        kept = list(chosen)
        for unit in sorted(chosen, key=lambda u: (-u.cost, chosen.index(u))):
            rest = [u for u in kept if u is not unit]
            if rest and unit.cost > 0 and self.measure(rest) >= quality:
                kept, quality = rest, self.measure(rest)
        if len(kept) < len(chosen):
            path.append(list(kept))
        return kept, quality

    def run(self, pool: list[Unit], budget: float | None, steps: int, by_ratio: bool) -> list[list[Unit]]:
        """One search within ``budget``: forward, backward pruning, forward again once if it pruned; its path."""
        chosen = [u for u in pool if u.cost == 0]
        pool = [u for u in pool if u.cost > 0]
        path: list[list[Unit]] = []
        quality = self.sign * _constant_quality(self.context, self.context.metric)
        if chosen:
            quality = self.measure(chosen)
            path.append(list(chosen))
        quality = self.forward(chosen, quality, pool, budget, steps, path, by_ratio)
        pruned, quality = self.prune(chosen, quality, path)
        if len(pruned) < len(chosen) and len(path) < steps:  # the budget freed: forward again, once
            self.forward(pruned, quality, pool, budget, steps, path, by_ratio)
        return path


@register("cheap_subset", grid=lambda context: [{}])
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

    def points(taken: list[Unit], booster: lgb.Booster | None = None) -> list[Candidate]:
        if booster is None:
            booster = train_lightgbm(context, lightgbm_params(context), X=hidden(context.train.X, _columns(taken)))
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
    search = _Search(context)
    pool = units(context, num_features)
    found: dict[tuple[str, ...], list[Unit]] = {}  # every subset a run reached, in the order reached
    for budget in sorted(context.budgets) or [None]:
        for by_ratio in (True, False):
            path = search.run(pool, budget, steps, by_ratio)
            if search.subsampled and path:  # every row: the run's answer only (the best measured of its path)
                path = [max(path, key=lambda step: (search.measure(step), -sum(u.cost for u in step)))]
            for step in path:
                found.setdefault(tuple(u.name for u in step), step)
    candidates: list[Candidate] = []
    for taken in found.values():
        candidates += points(taken, search.booster(taken))
    return candidates
