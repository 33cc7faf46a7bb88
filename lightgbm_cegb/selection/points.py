"""What the method families of a sweep share: LightGBM training on the sweep's rows, the plain model, a model and its
prefixes as points, the checks of a grid point's parameters.

Candidates' ``predict`` and ``cost`` are partials of this module's functions (not closures), so that a Candidate, a
sweep's frame and a Selection pickle with their models.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import TypeVar

import lightgbm as lgb
import numpy as np
import pandas as pd
from scipy import sparse

from lightgbm_cegb.accounting import prediction_cost, prefix_costs
from lightgbm_cegb.core.costs import FeatureCosts
from lightgbm_cegb.core.errors import CEGBError, still_improving
from lightgbm_cegb.core.validation import check_number
from lightgbm_cegb.io.lightgbm_text import loaded, trained
from lightgbm_cegb.io.models import library_of, to_forest
from lightgbm_cegb.methods.greedy_miser import (
    GreedyMiserClassifier,
    GreedyMiserRanker,
    GreedyMiserRegressor,
    proba_from_raw,
)
from lightgbm_cegb.selection.registry import Candidate, Context, Rows
from lightgbm_cegb.serving.outputs import KernelOutput, kernel_output

T = TypeVar("T")

#: Numbers of iterations (trees; per class in multiclass) at which every boosted or bagged model of a sweep is
#: also a point, below its best iteration (boosting: early stopped on the validation rows) or its size
#: (bagging), beside the whole model: the same kinds of points for every method, as a prefix of a model is a
#: cheaper model at no training cost. With a budget, the longest prefix within it on the validation rows is a
#: point too (what ``budget_stopping`` would have trained).
PREFIX_TREES = (1, 2, 3, 5, 10, 20, 30, 50, 100, 200, 300, 500, 1000, 2000, 5000)


def _objective(task: str, num_class: int) -> dict:
    return {"binary": {"objective": "binary"}, "multiclass": {"objective": "multiclass", "num_class": num_class},
            "regression": {"objective": "regression"}, "ranking": {"objective": "lambdarank", "eval_at": [5]}}[task]


def lightgbm_params(context: Context, **extra) -> dict:
    """The LightGBM parameters of the sweep's task and ``params``, updated with ``extra``."""
    num_class = int(max(np.max(context.train.y), np.max(context.valid.y))) + 1 if context.task == "multiclass" else 1
    return task_params(context.task, num_class, {**context.params, **extra})


def task_params(task: str, num_class: int, params: Mapping) -> dict:
    """The LightGBM parameters of a sweep of ``task`` (``num_class`` classes) and ``params``."""
    return {"verbose": -1, "seed": 0, "deterministic": True, **_objective(task, num_class), **params}


def dataset(rows: Rows, reference=None) -> lgb.Dataset:
    return lgb.Dataset(rows.X, rows.y, group=rows.group, reference=reference)


def _digest(rows: Rows, key: Mapping) -> str | None:
    """A digest of the training rows (values, labels, query sizes) and ``key``; None when the rows are of a kind it
    does not read."""
    h = hashlib.blake2b(digest_size=20)
    X = rows.X
    if isinstance(X, pd.DataFrame):
        h.update(repr((list(X.columns), [str(t) for t in X.dtypes])).encode())
        h.update(pd.util.hash_pandas_object(X, index=False).to_numpy().tobytes())
    elif sparse.issparse(X):
        X = sparse.csr_matrix(X)
        parts = (X.data, X.indices, X.indptr)
        h.update(repr(("csr", X.shape, [str(a.dtype) for a in parts])).encode())
        for part in parts:
            h.update(np.ascontiguousarray(part).data)
    elif isinstance(X, np.ndarray) and X.dtype != object:
        h.update(repr((X.shape, str(X.dtype))).encode())
        h.update(np.ascontiguousarray(X).data)  # the buffer itself, not a copy
    else:
        return None
    for values in (rows.y, rows.group):
        values = None if values is None else np.asarray(values)
        if values is not None and values.dtype == object:
            return None
        h.update(b"-" if values is None else repr((values.shape, str(values.dtype))).encode() + values.tobytes())
    h.update(json.dumps(key, sort_keys=True, default=lambda v: v.tolist() if isinstance(v, np.ndarray) else repr(v))
             .encode())
    return h.hexdigest()


#: What methods prepared from the training rows alone (shared), by digest: the latest few
_SHARED: dict[str, object] = {}
_SHARED_KEPT = 8


def shared(context: Context, key: Mapping, compute: Callable[[], T]) -> T:
    """``compute()``, or its value from an earlier sweep of the same training rows and ``key`` (what else it reads:
    the method, its parameters, the costs): a trade-off scale, which each budget of ``train_to_budget`` and each
    call of a session on the same rows would otherwise find again by training a model per bisection step. The
    latest few values are kept; rows of a kind the digest does not read are never shared."""
    name = _digest(context.train, key)
    if name is not None and name in _SHARED:
        return _SHARED[name]
    value = compute()
    if name is not None:
        while len(_SHARED) >= _SHARED_KEPT:
            _SHARED.pop(next(iter(_SHARED)))
        _SHARED[name] = value
    return value


def train_lightgbm(context: Context, params: dict, callbacks: Iterable = (), X=None,
                   columns: Sequence[int] | None = None, measure: bool = False) -> lgb.Booster:
    """LightGBM on the training rows (``X``: other values for them), early stopping on the validation rows'
    first metric; given ``columns``, on those columns of both alone (a model of their width, which predicts
    ``sliced(X, columns)``). ``measure``: the Booster as trained, to predict once (its best iteration, the same
    predictions), not written and read back as a model kept is."""
    rows, valid = context.train if X is None else Rows(X, context.train.y, context.train.group), context.valid
    if columns is not None:
        rows, valid = (Rows(sliced(r.X, columns), r.y, r.group) for r in (rows, valid))
    train = dataset(rows)
    return (partial(lgb.train, keep_training_booster=True) if measure else trained)(
        params, train, context.num_boost_round, valid_sets=[dataset(valid, train)],
        callbacks=[lgb.early_stopping(context.early_stopping_rounds, verbose=False), *callbacks])


def sliced(X, columns: Sequence[int]):
    """X's ``columns`` alone, in their order (a DataFrame keeps their names and kinds)."""
    return X.iloc[:, list(columns)] if isinstance(X, pd.DataFrame) else X[:, list(columns)]


# Candidates' predict and cost are partials of these module-level functions (not closures), so that a
# Candidate, a sweep's frame and a Selection pickle with their models.
def prediction(model, output: str, k: int | None, X):
    """What a metric reads of ``model`` (its first ``k`` iterations; None: as the model predicts) on X:
    ``output`` "predict", "proba" (every class), "positive" (class 1's probability), "staged" (a BudgetRF's
    first k trees: probabilities), "ranking" (a BudgetRF's score of relevance), "decision"
    (``decision_function``), "cstc" ((f + 1) / 2 of it, in [0, 1])."""
    at = {} if k is None else {"ntree_end": k} if library_of(model) == "catboost" else {"num_iteration": k}
    if output == "predict":
        return model.predict(X, **at)
    if output == "proba":
        return model.predict_proba(X, **at)
    if output == "positive":
        return model.predict_proba(X, **at)[:, 1]
    if output == "staged":
        return _staged(model, dense(X), k)
    if output == "ranking":
        return model.ranking_score(dense(X), n_trees=k)
    if output == "cstc":
        return np.clip((model.decision_function(X) + 1) / 2, 0, 1)
    if output == "decision":
        return model.decision_function(X)
    raise CEGBError(f"unknown output {output!r}")


def _cost(model, costs: FeatureCosts, k: int | None, X):
    """The package's accounting of ``model`` (its first ``k`` iterations) on X."""
    return prediction_cost(model, X, costs, num_iteration=k)


def own_cost(model, X):
    """``model.prediction_cost(X)``: a model whose cost is not that of a forest (gates, cascades, exits)."""
    return model.prediction_cost(X)


def whole_model(method: str, params: dict, model, output: str, costs: FeatureCosts | None = None) -> Candidate:
    """A whole model as a point: costed by the accounting of its trees, or (``costs`` None) by its own."""
    cost = partial(own_cost, model) if costs is None else partial(_cost, model, costs, None)
    return Candidate(method, params, model, partial(prediction, model, output, None), cost)


def iterations_of(model) -> int:
    """The iterations a boosted or bagged model predicts with: its best (early stopped) or all."""
    if library_of(model) == "catboost":  # use_best_model keeps the best iterations only
        return model.tree_count_
    if isinstance(model, lgb.Booster):
        return model.best_iteration if model.best_iteration > 0 else model.current_iteration()
    return model.best_iteration_ if hasattr(model, "best_iteration_") else model.n_estimators_


def prefixes(context: Context, method: str, point: dict, model, output: str, trees: Sequence[int] = PREFIX_TREES,
              costs: FeatureCosts | None = None) -> list[Candidate]:
    """``model`` and its prefixes as points (``trees``: the prefix lengths, see PREFIX_TREES), each recording
    ``trees``; with the sweep's budgets, also the longest prefix within each on the validation rows (one pass)."""
    return prefix_points(method, point, model, output, context.costs if costs is None else costs, context.valid.X,
                         context.budgets, trees)


def prefix_points(method: str, point: dict, model, output: str, costs: FeatureCosts, X_valid, budgets: Sequence[float],
                  trees: Sequence[int] = PREFIX_TREES) -> list[Candidate]:
    """:func:`prefixes` of ``model`` with the ``costs``, the validation rows ``X_valid`` and the ``budgets`` given;
    measured on ``X_valid``, they share one pass over the model's trees (:class:`PrefixPass`)."""
    total = iterations_of(model)
    ks = {k for k in trees if k < total} | {total}
    if budgets:
        curve = prediction_cost(model, X_valid, costs, num_iteration=total, per_iteration=True).curve
        for budget in budgets:
            within = np.flatnonzero(curve <= budget * (1 + 1e-12))
            if len(within):
                ks.add(int(within[-1]) + 1)
    shared = PrefixPass(model, output, costs, sorted(ks), X_valid)
    return [Candidate(method, {**point, "trees": k}, model, partial(prediction, model, output, k),
                      partial(_cost, model, costs, k), prefix=None if k == total else partial(_truncated, model, k),
                      measured=partial(shared.take, k))
            for k in sorted(ks)]


#: PrefixPass computes at most this many raw scores (prefixes x rows x trees per iteration; 256 MB) in its pass
#: (beyond, each prefix predicts alone; the per-row costs, two per prefix and row, are always from the pass)
PASS_VALUES = 1 << 25


class PrefixPass:
    """What a sweep measures of a boosted model's prefixes on its validation rows, from one pass over the trees.

    ``accounting.prefix_costs`` routes the rows once through the model's trees and gives each prefix's CostReport and
    raw scores, to the bits of pricing and predicting each prefix alone (the same additions in the same order);
    :func:`_from_raw` turns the raw scores into what ``prediction`` gives, by the model's own arithmetic. Each
    prefix's (prediction, report) is given out once (a sweep measures a model's points one after the other); asked
    again, for other rows, or where the pass does not apply (see ``prefix_costs``; a model whose outputs are not
    computed from its raw scores here has only its costs from the pass), :meth:`take` returns None and the
    Candidate predicts and prices that prefix alone. It keeps nothing when pickled (a sweep's points come back from
    its processes without their rows).
    """

    def __init__(self, model, output: str, costs: FeatureCosts, ks: list[int], rows) -> None:
        self.model, self.output, self.costs, self.ks = model, output, costs, ks
        self._rows, self._left, self._convert = rows, None, None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_rows": None, "_left": None, "_convert": None}

    def take(self, k: int, X) -> tuple[np.ndarray, object] | None:
        """(prediction, CostReport) of the first ``k`` iterations on ``X``, or None (see the class)."""
        if X is not self._rows or self._rows is None:
            return None
        if self._left is None:
            self._left = self._pass(X)
        raw, report = self._left.pop(k, (None, None))
        if not self._left:
            self._rows = None  # every prefix measured: let the rows go
        if report is None:
            return None
        return (prediction(self.model, self.output, k, X) if raw is None else self._convert(raw)), report

    def _pass(self, X) -> dict:
        """Each prefix's (raw scores or None, CostReport), or {} where the pass does not apply. Predictions come from
        the raw scores of float rows in a numpy array only (other rows: each prefix's ``predict``, which reads them
        its own way), and not beyond PASS_VALUES raw scores."""
        outputs = np.shape(X)[0] * len(self.ks) * to_forest(self.model).trees_per_iteration
        if outputs <= PASS_VALUES and type(X) is np.ndarray and X.dtype.kind == "f" and not np.isinf(X).any():
            self._convert = _from_raw(self.model, self.output)
        done = prefix_costs(self.model, X, self.costs, self.ks, raw=self._convert is not None)
        if done is None:
            return {}
        reports, scores = done
        return {k: (None if scores is None else scores[j], reports[j]) for j, k in enumerate(self.ks)}


def _from_raw(model, output: str) -> Callable | None:
    """``raw -> prediction(model, output, k, X)`` from the raw scores of the first k iterations (float64[n, trees
    per iteration]), as the model computes it from them: a LightGBM model's outputs as ``serving.outputs`` repeats
    them, Greedy Miser's (a custom objective's raw scores, its ``proba_from_raw``); None for any other."""
    if isinstance(model, (GreedyMiserClassifier, GreedyMiserRegressor, GreedyMiserRanker)):
        if isinstance(model, GreedyMiserClassifier) and output in ("proba", "positive"):
            return partial(_miser_proba, output == "positive")
        return _first_column if output == "predict" and not isinstance(model, GreedyMiserClassifier) else None
    if not isinstance(model, (lgb.Booster, lgb.LGBMModel)) or output not in ("predict", "proba", "positive"):
        return None
    forest = to_forest(model)
    if forest.average_output:  # a random forest's output is its trees' mean
        return None
    kernel = kernel_output(model, forest)
    method = "predict" if output == "predict" else "predict_proba"
    if not isinstance(kernel, KernelOutput) or not kernel.takes(method, {}):
        return None
    return partial(_kernel_output, kernel, method, output == "positive")


def _first_column(raw: np.ndarray) -> np.ndarray:
    return raw[:, 0]


def _miser_proba(positive: bool, raw: np.ndarray) -> np.ndarray:
    """Greedy Miser's ``predict_proba`` (``[:, 1]`` with ``positive``) of its raw scores."""
    proba = proba_from_raw(raw[:, 0] if raw.shape[1] == 1 else raw)
    return proba[:, 1] if positive else proba


def _kernel_output(kernel: KernelOutput, method: str, positive: bool, raw: np.ndarray) -> np.ndarray:
    out = kernel(raw, method, {})
    return out[:, 1] if positive else out


def _truncated(model, k: int):
    """A copy of a boosted or bagged ``model`` holding its first ``k`` iterations only."""
    if isinstance(model, lgb.Booster):
        return loaded(model.model_to_string(num_iteration=k))
    if hasattr(model, "prefix"):  # the package's estimators with prefixes (Greedy Miser, BudgetRF)
        return model.prefix(k)
    if library_of(model) == "catboost":
        shrunk = model.copy()
        shrunk.shrink(ntree_end=k)  # in place
        return shrunk
    raise CEGBError(f"cannot take a prefix of a {type(model).__name__}")


def check_capped(method: str, context: Context, iterations: int, candidates: list[Candidate]) -> list[Candidate]:
    """Mark the points of a model whose training reached num_boost_round while the validation metric was still
    improving (``still_improving``: its best iteration near the cap): :func:`sweep` warns."""
    if still_improving(iterations, context.num_boost_round, context.early_stopping_rounds):
        for candidate in candidates:
            candidate.capped = True
    return candidates


def booster_points(method: str, context: Context, point: dict, booster: lgb.Booster,
                   trees: Sequence[int] = PREFIX_TREES) -> list[Candidate]:
    """A LightGBM model and its prefixes as points, marked when its training reached the round cap."""
    return check_capped(method, context, iterations_of(booster),
                         prefixes(context, method, point, booster, "predict", trees))


def plain_model(context: Context) -> lgb.Booster:
    """Plain LightGBM (no costs) on the sweep's rows and parameters: the base of several methods, trained once per
    sweep and process (deterministic training: each would train the same model)."""
    if "plain" not in context.shared:
        context.shared["plain"] = train_lightgbm(context, lightgbm_params(context))
    return context.shared["plain"]


def check_keys(method: str, params: Mapping, allowed: set[str]) -> None:
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise CEGBError(f"{method}: unknown parameter(s) {unknown}; it takes {sorted(allowed)}")


def dense(X):
    """BudgetRF reads dense float32 rows (as scikit-learn's trees): a sparse X is densified in that type."""
    return X.astype(np.float32).toarray() if hasattr(X, "toarray") else X


def _staged(forest, X, k: int) -> np.ndarray:
    for i, proba in enumerate(forest.staged_predict_proba(X), start=1):
        if i == k:
            return proba[:, 1] if proba.shape[1] == 2 else proba
    raise CEGBError(f"the forest has fewer than {k} trees")


def scaled_knob(method: str, params: dict, relative_key: str, raw_key: str, scale: float) -> tuple[float, dict]:
    """Take a method's trade-off out of ``params``: the raw value (``raw_key``) or the relative one times
    ``scale``; returns it and the point's record of it."""
    relative = params.pop(relative_key, None)
    if relative is not None and raw_key in params:
        raise CEGBError(f"{method}: give {relative_key} or {raw_key}, not both")
    value = params.pop(raw_key, None)
    if relative is not None:
        check_number(relative, f"{method}: {relative_key}", 0.0)
    if value is None:
        value = float(relative or 0.0) * scale
    return value, {**({} if relative is None else {relative_key: relative}), raw_key: value}
