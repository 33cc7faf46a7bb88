"""From costs and a budget to the best model: sweeps, Pareto frontiers, selection within a budget.

    from lightgbm_cegb.selection import sweep, select
    frontier = sweep(["cegb", "budget_prune", "early_exit"], train=(X, y), valid=(X_valid, y_valid),
                     costs=costs, task="binary")
    best = select(frontier, budget=30.0, test=(X_test, y_test))
    best.model.predict(X_new), best.test_quality, best.test_cost

Every point of a sweep is a fitted model measured on the validation rows: its quality (``metric``) and its
exact mean prediction cost per row (the package's accounting, ``CostReport.mean``: lazy acquisition plus
evaluation; a coupled cost, paid once per model, is not per row and is reported in ``coupled``).

Methods are registered in :data:`METHODS` by :func:`register` (the registrations of the package's methods are
in this module, after :func:`register`); a method landing later joins every sweep, plot and script
(``scripts/frontiers.py``, ``scripts/reproduce_yahoo.py``) with one ``@register(...)``. The knobs of the
registered methods, each on a documented scale:

- ``lightgbm``: plain LightGBM (no costs), any LightGBM parameter; the reference point.
- ``cegb``: ``relative_tradeoff`` r in [0, 1]: ``cegb_tradeoff = r * scale`` where ``scale`` is the
  smallest trade-off at which the first tree of the training data makes no split
  (:func:`cegb_tradeoff_scale`): r = 1 is a model without splits, whatever the costs' units and the
  number of rows. ``cegb_tradeoff`` sets the raw value instead. Trained with early stopping on the
  validation rows, and with ``budget_stopping`` when the point has a ``budget``.
- ``budget_prune``: ``budget_fraction`` f in (0, 1]: BudgetPrune (``budget_prune(..., budget=B)``,
  exact) of a plain LightGBM model to ``B = f x`` its own mean cost on the pruning rows (the training
  rows); ``lam`` sets the raw trade-off instead. Ranking: with a regression or binary objective in
  ``params`` (BudgetPrune has no lambdarank loss).
- ``early_exit``: ``threshold`` of ``EarlyExit`` on a plain LightGBM model (classification: a
  probability; ranking: the proximity margin), ``every`` (default 10).
- ``greedy_miser``: ``relative_lam`` r in [0, 1]: ``lam = r * scale``, the scale being the smallest ``lam`` at
  which the first tree has no split (``GreedyMiser*.lam_scale``); ``lam`` sets the raw value. Early stopping
  on the validation rows keeps the best iteration (``GreedyMiserRanker``: NDCG@5); one point per prefix of
  5, 10, 20, 50, 100, 200 trees below it, and one at it.
- ``adapt_gbrt``: ``p_full`` and ``relative_tradeoff`` of ``AdaptGBRT`` (tradeoff = r x Greedy Miser's
  ``lam_scale``) in front of f0, the plain LightGBM model (classification).
- ``adapt_lin``: ``p_full`` and ``relative_lam`` of ``AdaptLIN`` (lam = r x ``AdaptLIN.lam_scale``, the
  smallest lam at which f1 reads no feature) in front of the same f0 (classification; finite X).
- ``cstc``, ``cscc``, ``cronus``: ``relative_lam`` r of ``CSTC`` / ``CSCC`` / ``Cronus`` (lam = r x the variance of
  the targets they fit: the labels, or -1 / +1 for binary tasks and for the cascades, whose ranking targets are
  relevant (y > 0) or not; CSTC's ranking regresses the relevance labels) on the outputs of the plain LightGBM
  model's trees (the boosting trick), pruned on the validation rows; binary scores are ``(f + 1) / 2`` clipped
  to [0, 1] (squared-loss classifiers: accuracy and AUC, not log-loss).
- ``budgetrf``: ``alpha`` of ``BudgetRFClassifier`` (classification; ranking on label >= 1), one point
  per prefix of ``n_estimators`` trees in ``trees`` (default 1, 2, 3, 5, 10, 20, 30, ...).
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import lightgbm as lgb
import numpy as np
import pandas as pd

from .accounting import prediction_cost
from .costs import FeatureCosts
from .errors import CEGBError
from .metrics import average_precision_at_5, ndcg_at_k, precision_at_k
from .models import has_split

TASKS = ("binary", "multiclass", "regression", "ranking")


@dataclass(frozen=True)
class Rows:
    """Rows, labels and, for ranking, the sizes of the consecutive queries (as ``lgb.Dataset(group=...)``)."""

    X: object
    y: np.ndarray
    group: np.ndarray | None = None

    @classmethod
    def of(cls, rows, name: str) -> Rows:
        if isinstance(rows, Rows):
            return rows
        if isinstance(rows, tuple) and len(rows) in (2, 3):
            X, y, *group = rows
            y = np.asarray(y)
            if y.ndim != 1 or y.shape[0] != np.shape(X)[0]:
                raise CEGBError(f"{name}: y should be 1-d with one label per row of X ({np.shape(X)[0]}), "
                                f"got shape {y.shape}")
            return cls(X, y, np.asarray(group[0]) if group and group[0] is not None else None)
        raise CEGBError(f"{name} should be (X, y) or (X, y, group), got {type(rows).__name__}")


# ---------------------------------------------------------------------------------------------- metrics
@dataclass(frozen=True)
class Metric:
    """A quality measure of predictions: ``fn(y, prediction, group)``; ``greater_is_better``."""

    name: str
    fn: Callable
    greater_is_better: bool = True


def _labels(prediction: np.ndarray) -> np.ndarray:
    return np.argmax(prediction, axis=1) if prediction.ndim == 2 else (prediction > 0.5).astype(int)


def _auc(y, p, _):
    from sklearn.metrics import roc_auc_score
    return float(roc_auc_score(y, p))


def _logloss(y, p, _):
    from sklearn.metrics import log_loss
    return float(log_loss(y, p, labels=np.arange(p.shape[1]) if p.ndim == 2 else [0, 1]))


METRICS = {
    "accuracy": Metric("accuracy", lambda y, p, _: float(np.mean(_labels(p) == y))),
    "auc": Metric("auc", _auc),
    "logloss": Metric("logloss", _logloss, greater_is_better=False),
    "rmse": Metric("rmse", lambda y, p, _: float(np.sqrt(np.mean((np.asarray(p) - y) ** 2))), False),
    "ap@5": Metric("ap@5", average_precision_at_5),
}
DEFAULT_METRIC = {"binary": "accuracy", "multiclass": "accuracy", "regression": "rmse", "ranking": "ndcg@5"}


def get_metric(metric: str | Metric | None, task: str) -> Metric:
    """``metric`` by name (``accuracy``, ``auc``, ``logloss``, ``rmse``, ``ap@5``, ``ndcg@K``, ``p@K``), a
    Metric, or the task's default (accuracy; rmse for regression; ndcg@5 for ranking)."""
    if isinstance(metric, Metric):
        return metric
    name = DEFAULT_METRIC[task] if metric is None else metric
    for prefix, fn in (("ndcg@", ndcg_at_k), ("p@", precision_at_k)):
        if isinstance(name, str) and name.startswith(prefix) and name[len(prefix):].isdigit() and \
                int(name[len(prefix):]) > 0:
            k = int(name[len(prefix):])
            return Metric(name, lambda y, p, g, fn=fn: fn(y, p, g, k=k))
    if name not in METRICS:
        raise CEGBError(f"metric should be one of {sorted(METRICS) + ['ndcg@K', 'p@K']} or a Metric, got "
                        f"{metric!r}")
    return METRICS[name]


# ---------------------------------------------------------------------------------------------- methods
@dataclass
class Candidate:
    """A fitted point of a sweep: ``predict(X)`` gives what the metric reads (class probabilities, scores
    or values) and ``cost(X)`` the exact per-row costs (a CostReport)."""

    method: str
    params: dict
    model: object
    predict: Callable = field(repr=False)
    cost: Callable = field(repr=False)

    def measure(self, rows: Rows, metric: Metric) -> tuple[float, float, float]:
        """(quality, mean cost per row, coupled cost) on ``rows``."""
        report = self.cost(rows.X)
        return metric.fn(rows.y, self.predict(rows.X), rows.group), float(report.mean), float(report.coupled)


@dataclass(frozen=True)
class Method:
    """A registered method: ``prepare(context) -> state`` once per sweep (e.g. the base model or the knob's
    scale), ``fit(context, state, params) -> [Candidate, ...]`` per grid point, ``grid(context)`` the
    default grid, ``tasks`` those it supports."""

    name: str
    fit: Callable
    grid: Callable
    tasks: tuple[str, ...]
    prepare: Callable = lambda context: None


#: The methods every sweep, plot and script knows, by name. Add one with :func:`register`.
METHODS: dict[str, Method] = {}


def register(name: str, *, grid: Callable, tasks: Sequence[str] = TASKS, prepare: Callable | None = None):
    """Decorator registering ``fit(context, state, params) -> list[Candidate]`` as method ``name``."""
    def decorate(fit: Callable) -> Callable:
        METHODS[name] = Method(name, fit, grid, tuple(tasks), prepare or (lambda context: None))
        return fit
    return decorate


@dataclass(frozen=True)
class Context:
    """What every fit of a sweep sees."""

    task: str
    train: Rows
    valid: Rows
    costs: FeatureCosts
    params: Mapping  # LightGBM parameters shared by the LightGBM-based methods
    num_boost_round: int
    early_stopping_rounds: int


def _objective(task: str, num_class: int) -> dict:
    return {"binary": {"objective": "binary"}, "multiclass": {"objective": "multiclass", "num_class": num_class},
            "regression": {"objective": "regression"}, "ranking": {"objective": "lambdarank", "eval_at": [5]}}[task]


def _lgb_params(context: Context, **extra) -> dict:
    num_class = int(max(np.max(context.train.y), np.max(context.valid.y))) + 1 if context.task == "multiclass" else 1
    return {"verbose": -1, "seed": 0, "deterministic": True, **_objective(context.task, num_class),
            **context.params, **extra}


def _dataset(rows: Rows, reference=None) -> lgb.Dataset:
    return lgb.Dataset(rows.X, rows.y, group=rows.group, reference=reference)


def _train(context: Context, params: dict, callbacks: Iterable = ()) -> lgb.Booster:
    """LightGBM on the training rows, early stopping on the validation rows' first metric."""
    train = _dataset(context.train)
    return lgb.train(params, train, context.num_boost_round, valid_sets=[_dataset(context.valid, train)],
                     callbacks=[lgb.early_stopping(context.early_stopping_rounds, verbose=False), *callbacks])


def _booster_candidate(method: str, params: dict, booster: lgb.Booster, costs: FeatureCosts) -> Candidate:
    return Candidate(method, params, booster, booster.predict, lambda X: prediction_cost(booster, X, costs))


def _plain(context: Context) -> lgb.Booster:
    return _train(context, _lgb_params(context))


def _check_keys(method: str, params: Mapping, allowed: set[str]) -> None:
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise CEGBError(f"{method}: unknown parameter(s) {unknown}; it takes {sorted(allowed)}")


@register("lightgbm", grid=lambda context: [{}])
def _fit_lightgbm(context: Context, state, params: dict) -> list[Candidate]:
    booster = _train(context, _lgb_params(context, **params))
    return [_booster_candidate("lightgbm", params, booster, context.costs)]


def cegb_tradeoff_scale(params: Mapping, train_set: lgb.Dataset, *, rel_tol: float = 1e-3) -> float:
    """The smallest ``cegb_tradeoff`` at which the first tree LightGBM grows on ``train_set`` with
    ``params`` (and its cegb penalties) has no split: past it no split pays. Found by bisection (geometric,
    to ``rel_tol``) on one-iteration trainings; the scale of CEGB's ``relative_tradeoff``."""
    params = {**params, "verbose": -1}
    params.pop("cegb_tradeoff", None)
    if not any(params.get(k) for k in ("cegb_penalty_feature_lazy", "cegb_penalty_feature_coupled",
                                       "cegb_penalty_split")):
        raise CEGBError("cegb_tradeoff_scale: params set no cegb_penalty_*; there is nothing to trade off")
    return no_split_scale(lambda t: has_split(lgb.train({**params, "cegb_tradeoff": t}, train_set, 1)),
                          "cegb_tradeoff_scale", rel_tol)


def no_split_scale(splits: Callable[[float], bool], name: str, rel_tol: float = 1e-3) -> float:
    """The smallest trade-off ``t`` at which ``splits(t)`` (the first tree has a split) is False, by geometric
    bisection to ``rel_tol``; ``splits`` falls from True to False as ``t`` grows."""
    if not splits(0.0):
        raise CEGBError(f"{name}: the first tree makes no split even without costs")
    lo, hi = 0.0, 1.0
    while splits(hi):
        lo, hi = hi, hi * 16
        if hi > 1e30:
            raise CEGBError(f"{name}: every trade-off up to 1e30 still splits; are all costs 0?")
    if lo == 0.0:
        lo = hi
        while not splits(lo):
            hi, lo = lo, lo / 16
            if lo < 1e-30:
                raise CEGBError(f"{name}: no trade-off down to 1e-30 splits")
    while hi / lo > 1 + rel_tol:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if splits(mid) else (lo, mid)
    return hi


def _scaled_knob(method: str, params: dict, relative_key: str, raw_key: str, scale: float) -> tuple[float, dict]:
    """Take a method's trade-off out of ``params``: the raw value (``raw_key``) or the relative one times
    ``scale``; returns it and the point's record of it."""
    relative = params.pop(relative_key, None)
    if relative is not None and raw_key in params:
        raise CEGBError(f"{method}: give {relative_key} or {raw_key}, not both")
    value = params.pop(raw_key, None)
    if value is None:
        value = float(relative or 0.0) * scale
    return value, {**({} if relative is None else {relative_key: relative}), raw_key: value}


def _cegb_prepare(context: Context) -> float:
    cost_params = context.costs.to_params(tradeoff=1.0)
    return cegb_tradeoff_scale(_lgb_params(context, **cost_params), _dataset(context.train))


#: ``relative_tradeoff`` values of CEGB's default grid (0 is plain LightGBM with the costs recorded). Where
#: the cost moves depends on the data: on HIGGS and letter it barely moves below 0.05 (the later trees' gains,
#: which the penalty has to beat, are much smaller than the first tree's, which sets the scale) and falls
#: steeply near 1 (letter, 26 classes: 10.7 of 16 at 0.9, 0 at 1); on MNIST's 1,120 pixels it falls from 160
#: to 7 between 0 and 0.05. Hence points at both ends.
CEGB_RELATIVE_TRADEOFFS = (0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98,
                           0.995)


@register("cegb", grid=lambda context: [{"relative_tradeoff": r} for r in CEGB_RELATIVE_TRADEOFFS],
          prepare=_cegb_prepare)
def _fit_cegb(context: Context, scale: float, params: dict) -> list[Candidate]:
    from .callbacks import budget_stopping
    params = dict(params)
    budget = params.pop("budget", None)
    tradeoff, knob = _scaled_knob("cegb", params, "relative_tradeoff", "cegb_tradeoff", scale)
    callbacks = [] if budget is None else [budget_stopping(context.valid.X, context.costs, budget, verbose=False)]
    booster = _train(context, _lgb_params(context, **context.costs.to_params(tradeoff=tradeoff), **params), callbacks)
    if not has_split(booster):
        warnings.warn(f"cegb: cegb_tradeoff={tradeoff:g} leaves the model without a split (every split's penalty "
                      "outweighs its gain); its point predicts a constant", UserWarning, stacklevel=2)
    point = {**knob, **({} if budget is None else {"budget": budget}), **params}
    return [_booster_candidate("cegb", point, booster, context.costs)]


def _prune_prepare(context: Context):
    """The plain model, its BudgetPrune problem on the training rows (built once for every grid point) and
    its mean lazy cost there (the unit of ``budget_fraction``)."""
    from .prune import Pruner
    booster = _plain(context)
    costs = context.costs.per_row()
    pruner = Pruner(booster, context.train.X, context.train.y, costs)
    return pruner, float(prediction_cost(booster, context.train.X, costs).mean)


@register("budget_prune", prepare=_prune_prepare,
          grid=lambda context: [{"budget_fraction": f} for f in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0)])
def _fit_budget_prune(context: Context, state, params: dict) -> list[Candidate]:
    pruner, full_cost = state
    _check_keys("budget_prune", params, {"budget_fraction", "lam"})
    if ("budget_fraction" in params) == ("lam" in params):
        raise CEGBError(f"budget_prune: give budget_fraction or lam, got {params}")
    result = pruner.at(params["lam"]) if "lam" in params else pruner.within(params["budget_fraction"] * full_cost)
    pruned = result.model
    return [Candidate("budget_prune", {**params, "lam": result.lam}, pruned, pruned.predict,
                      lambda X: prediction_cost(pruned, X, context.costs))]


def _early_exit_grid(context: Context) -> list[dict]:
    """Proximity margins for a ranker, probabilities for a classifier (also a classifier ranking by its
    probabilities, as with binarised labels)."""
    from .early_exit import RANKING_OBJECTIVES
    ranker = _lgb_params(context)["objective"] in RANKING_OBJECTIVES
    return [{"threshold": t} for t in ((0.5, 1.0, 2.0, 4.0) if ranker else (0.6, 0.8, 0.9, 0.95, 0.99))]


@register("early_exit", tasks=("binary", "multiclass", "ranking"), prepare=lambda context: _plain(context),
          grid=_early_exit_grid)
def _fit_early_exit(context: Context, booster, params: dict) -> list[Candidate]:
    from .early_exit import EarlyExit
    _check_keys("early_exit", params, {"threshold", "every"})
    model = EarlyExit(booster, params["threshold"], every=params.get("every", 10), costs=context.costs)
    return [_ExitCandidate("early_exit", params, model, lambda X: model.predict(X).prediction,
                           lambda X: model.predict(X).cost)]


class _ExitCandidate(Candidate):
    """Early Exit: prediction and cost come from one pass (``EarlyExit.predict``). A ranker's exits depend on
    the query, so it is measured with the query sizes, a stopped document ranking below the others of its
    query (the score is minus its rank); its ``predict``/``cost`` callables need no queries only for a
    classifier."""

    def measure(self, rows: Rows, metric: Metric) -> tuple[float, float, float]:
        ranker = self.model.kind == "rank"
        result = self.model.predict(rows.X, group=rows.group) if ranker else self.model.predict(rows.X)
        score = -result.rank.astype(np.float64) if ranker else result.prediction
        return metric.fn(rows.y, score, rows.group), float(result.cost.mean), float(result.cost.coupled)


BUDGETRF_TREES = (1, 2, 3, 5, 10, 20, 30, 50, 100, 200)


@register("budgetrf", tasks=("binary", "multiclass", "ranking"),
          grid=lambda context: [{"alpha": a} for a in (0.0, 2.0, 8.0)])
def _fit_budgetrf(context: Context, state, params: dict) -> list[Candidate]:
    from .budgetrf import BudgetRFClassifier
    params = dict(params)
    trees = params.pop("trees", BUDGETRF_TREES)
    params.setdefault("n_estimators", 30)
    params.setdefault("random_state", 0)
    labels = (context.train.y >= 1).astype(int) if context.task == "ranking" else context.train.y
    forest = BudgetRFClassifier(costs=context.costs, **params).fit(_dense(context.train.X), labels)
    candidates = []
    for k in sorted({min(k, forest.n_estimators_) for k in trees}):
        if context.task == "ranking":
            predict = lambda X, k=k: forest.ranking_score(_dense(X), n_trees=k)  # noqa: E731
        else:
            predict = lambda X, k=k: _staged(forest, _dense(X), k)  # noqa: E731
        candidates.append(Candidate("budgetrf", {**params, "trees": k}, forest, predict,
                                    lambda X, k=k: prediction_cost(forest, X, context.costs, num_iteration=k)))
    return candidates


#: ``relative_lam`` values of Greedy Miser's default grid (as CEGB's: 1 is a first tree without a split).
GREEDY_MISER_RELATIVE_LAMS = (0.0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.2, 0.4, 0.7, 0.9)
#: Tree counts at which a Greedy Miser model (up to its best validation iteration) is also a point.
GREEDY_MISER_TREES = (5, 10, 20, 50, 100, 200)


def _greedy_miser(context: Context, **params):
    from .greedy_miser import GreedyMiserClassifier, GreedyMiserRanker, GreedyMiserRegressor
    kind = {"binary": GreedyMiserClassifier, "multiclass": GreedyMiserClassifier,
            "regression": GreedyMiserRegressor, "ranking": GreedyMiserRanker}[context.task]
    return kind(feature_costs=context.costs, n_estimators=context.num_boost_round,
                early_stopping_rounds=context.early_stopping_rounds, random_state=0, **params)


def _greedy_miser_prepare(context: Context) -> float:
    train = context.train
    return _greedy_miser(context).lam_scale(train.X, train.y, **({} if train.group is None else {"group": train.group}))


@register("greedy_miser", prepare=_greedy_miser_prepare,
          grid=lambda context: [{"relative_lam": r} for r in GREEDY_MISER_RELATIVE_LAMS])
def _fit_greedy_miser(context: Context, scale: float, params: dict) -> list[Candidate]:
    params = dict(params)
    lam, knob = _scaled_knob("greedy_miser", params, "relative_lam", "lam", scale)
    train, valid = context.train, context.valid
    queries = {} if train.group is None else {"group": train.group, "eval_group": [valid.group]}
    model = _greedy_miser(context, lam=lam, **params).fit(train.X, train.y, eval_set=[(valid.X, valid.y)], **queries)
    if context.task == "binary":
        predict = lambda X, k: model.predict_proba(X, num_iteration=k)[:, 1]  # noqa: E731
    elif context.task == "multiclass":
        predict = lambda X, k: model.predict_proba(X, num_iteration=k)  # noqa: E731
    else:
        predict = lambda X, k: model.predict(X, num_iteration=k)  # noqa: E731
    point = {**knob, **params}
    best = model.best_iteration_
    return [Candidate("greedy_miser", {**point, "trees": k}, model, lambda X, k=k: predict(X, k),
                      lambda X, k=k: model.prediction_cost(X, num_iteration=k))
            for k in sorted({k for k in GREEDY_MISER_TREES if k < best} | {best})]


def _adapt_prepare(context: Context):
    """f0 (plain LightGBM on the training rows) and the unit of ``relative_tradeoff`` (Greedy Miser's lam_scale
    on the training rows: ADAPT's trees pay as Greedy Miser's)."""
    return _plain(context), _greedy_miser_prepare(context)


def _adapt_fit(name: str, estimator: str, relative_key: str, raw_key: str) -> Callable:
    """The fit of an ADAPT estimator (``lightgbm_cegb.<estimator>``) in front of the prepared f0, its knob
    ``raw_key`` given as is or as ``relative_key`` times the prepared scale."""
    def fit(context: Context, state, params: dict) -> list[Candidate]:
        from . import adapt, adapt_lin
        f0, scale = state
        params = dict(params)
        value, knob = _scaled_knob(name, params, relative_key, raw_key, scale)
        cls = getattr(adapt, estimator, None) or getattr(adapt_lin, estimator)
        model = cls(f0, costs=context.costs, **{raw_key: value}, **params).fit(context.train.X, context.train.y)
        predict = (lambda X: model.predict_proba(X)[:, 1]) if context.task == "binary" else model.predict_proba
        return [Candidate(name, {**knob, **params}, model, predict, model.prediction_cost)]
    return fit


register("adapt_gbrt", tasks=("binary", "multiclass"), prepare=_adapt_prepare,
         grid=lambda context: [{"p_full": p, "relative_tradeoff": r} for p in (0.1, 0.2, 0.3, 0.5)
                               for r in (0.0, 0.01, 0.1)])(
    _adapt_fit("adapt_gbrt", "AdaptGBRT", "relative_tradeoff", "tradeoff"))


def _adapt_lin_prepare(context: Context):
    """f0 (plain LightGBM on the training rows) and the unit of ``relative_lam`` (AdaptLIN.lam_scale)."""
    from .adapt_lin import AdaptLIN
    f0 = _plain(context)
    return f0, AdaptLIN(f0, costs=context.costs).lam_scale(context.train.X, context.train.y)


register("adapt_lin", tasks=("binary", "multiclass"), prepare=_adapt_lin_prepare,
         grid=lambda context: [{"p_full": p, "relative_lam": r} for p in (0.1, 0.3, 0.5)
                               for r in (0.01, 0.05, 0.2)])(
    _adapt_fit("adapt_lin", "AdaptLIN", "relative_lam", "lam"))


#: ``relative_lam`` values of CSTC's default grid.
CSTC_RELATIVE_LAMS = (1e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2)


def _cstc_targets(context: Context, rows: Rows, binary: bool) -> np.ndarray:
    """The labels a CSTC-family estimator fits: -1 / +1 for binary tasks and for the cascades (relevant: y > 0),
    the labels themselves for CSTC's regression and ranking."""
    return np.where(rows.y > 0, 1.0, -1.0) if binary or context.task == "binary" else rows.y


def _cstc_method(name: str, binary_estimator: str, regression_estimator: str | None) -> None:
    """Register ``name``: ``relative_lam`` x the variance of the targets, phi = the plain model's trees, pruned on
    the validation rows; binary scores ``(f + 1) / 2`` clipped to [0, 1]."""
    binary_only = regression_estimator is None

    def prepare(context: Context):
        return _plain(context), float(np.var(_cstc_targets(context, context.train, binary_only)))

    def fit(context: Context, state, params: dict) -> list[Candidate]:
        from . import cstc
        phi, scale = state
        params = dict(params)
        lam, knob = _scaled_knob(name, params, "relative_lam", "lam", scale)
        binary = binary_only or context.task == "binary"
        cls = getattr(cstc, binary_estimator if binary else regression_estimator)
        y_train, y_valid = (_cstc_targets(context, rows, binary_only) for rows in (context.train, context.valid))
        model = cls(lam=lam, costs=context.costs, phi=phi, **params).fit(context.train.X, y_train,
                                                                          eval_set=(context.valid.X, y_valid))
        if context.task == "binary":
            predict = lambda X: np.clip((model.decision_function(X) + 1) / 2, 0, 1)  # noqa: E731
        else:
            predict = model.decision_function if binary else model.predict
        return [Candidate(name, {**knob, **params}, model, predict, model.prediction_cost)]

    register(name, tasks=("binary", "ranking") if binary_only else ("binary", "regression", "ranking"),
             prepare=prepare, grid=lambda context: [{"relative_lam": r} for r in CSTC_RELATIVE_LAMS])(fit)


_cstc_method("cstc", "CSTCClassifier", "CSTC")
_cstc_method("cscc", "CSCC", None)
_cstc_method("cronus", "Cronus", None)


def _dense(X):
    """BudgetRF reads dense float32 rows (as scikit-learn's trees): a sparse X is densified in that type."""
    return X.astype(np.float32).toarray() if hasattr(X, "toarray") else X


def _staged(forest, X, k: int) -> np.ndarray:
    for i, proba in enumerate(forest.staged_predict_proba(X), start=1):
        if i == k:
            return proba[:, 1] if proba.shape[1] == 2 else proba
    raise CEGBError(f"the forest has fewer than {k} trees")


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
    task : "binary", "multiclass", "regression" or "ranking"
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
    frame.attrs.update(metric=metric.name, greater_is_better=metric.greater_is_better, task=task)
    frame.attrs["metric_object"] = metric
    return frame


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
    rows, metric = Rows.of(rows, prefix.rstrip("_") or "rows"), frame.attrs["metric_object"]
    figures = [row["model"].measure(rows, metric)[:2] for _, row in frame.iterrows()]
    out = frame.assign(**{f"{prefix}quality": [q for q, _ in figures], f"{prefix}cost": [c for _, c in figures]})
    out.attrs = dict(frame.attrs)
    return out


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
    if not isinstance(budget, (int, float)) or not budget >= 0 or not math.isfinite(budget):
        raise CEGBError(f"budget should be a finite number >= 0, got {budget!r}")
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
        chosen.test_quality, chosen.test_cost, _ = candidate.measure(Rows.of(test, "test"), used)
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


# ---------------------------------------------------------------------------------------------- scorers
def cost_scorer(costs=None, *, metric: str | Metric = "accuracy", budget: float | None = None,
                penalty: float = 0.0) -> Callable:
    """A scorer for scikit-learn's ``GridSearchCV`` / ``cross_val_score`` (``scorer(estimator, X, y)``):
    the metric's value (negated when lower is better, as scikit-learn maximises) minus ``penalty`` times the
    mean prediction cost per row of X, and ``-inf`` when that cost passes ``budget``. ``costs``: as
    ``prediction_cost`` takes them (None: the model's own cegb_* parameters)."""
    used = get_metric(metric, "binary")
    if penalty < 0 or not math.isfinite(penalty):
        raise CEGBError(f"penalty should be a finite number >= 0, got {penalty!r}")

    if used.name.startswith(("ndcg@", "ap@", "p@")):
        raise CEGBError(f"cost_scorer: metric {used.name!r} needs the queries, which a scikit-learn scorer does not "
                        "get; use sweep(..., task='ranking')")

    def score(estimator, X, y) -> float:
        cost = prediction_cost(estimator, X, costs).mean
        if budget is not None and cost > budget:
            return -math.inf
        if used.name in ("accuracy",):
            prediction = estimator.predict(X)
            value = float(np.mean(np.asarray(prediction) == np.asarray(y)))
        elif hasattr(estimator, "predict_proba") and used.name in ("auc", "logloss"):
            proba = estimator.predict_proba(X)
            value = used.fn(np.searchsorted(estimator.classes_, y), proba[:, 1] if proba.shape[1] == 2 else proba, None)
        else:
            value = used.fn(np.asarray(y), estimator.predict(X), None)
        return (value if used.greater_is_better else -value) - penalty * cost
    return score
