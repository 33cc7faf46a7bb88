"""The registered methods of a sweep: one fit per method, each turning a grid point into candidates.

Its length: one fit per registered method (all but the cheap-subset baseline), each a few functions; they share
the LightGBM training, prefix and candidate helpers at the top.
"""

from __future__ import annotations

import copy
import logging
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import contextmanager
from functools import partial

import lightgbm as lgb
import numpy as np

from lightgbm_cegb.accounting import prediction_cost
from lightgbm_cegb.core.costs import FeatureCosts
from lightgbm_cegb.core.errors import CEGBError, NoSplitWarning, NothingToTradeOff, RoundsWarning
from lightgbm_cegb.core.validation import check_number
from lightgbm_cegb.io.models import has_split, library_of
from lightgbm_cegb.lgbm.cegb_tradeoff_scale import cegb_tradeoff_scale
from lightgbm_cegb.selection.metrics import Metric
from lightgbm_cegb.selection.registry import Candidate, Context, Knob, Rows, register

LOG = logging.getLogger("lightgbm_cegb.selection")

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
    return {"verbose": -1, "seed": 0, "deterministic": True, **_objective(context.task, num_class),
            **context.params, **extra}


def _dataset(rows: Rows, reference=None) -> lgb.Dataset:
    return lgb.Dataset(rows.X, rows.y, group=rows.group, reference=reference)


def train_lightgbm(context: Context, params: dict, callbacks: Iterable = (), X=None) -> lgb.Booster:
    """LightGBM on the training rows (``X``: other values for them), early stopping on the validation rows'
    first metric."""
    rows = context.train if X is None else Rows(X, context.train.y, context.train.group)
    train = _dataset(rows)
    return lgb.train(params, train, context.num_boost_round, valid_sets=[_dataset(context.valid, train)],
                     callbacks=[lgb.early_stopping(context.early_stopping_rounds, verbose=False), *callbacks])


# Candidates' predict and cost are partials of these module-level functions (not closures), so that a
# Candidate, a sweep's frame and a Selection pickle with their models.
def _predict(model, output: str, k: int | None, X):
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
        return _staged(model, _dense(X), k)
    if output == "ranking":
        return model.ranking_score(_dense(X), n_trees=k)
    if output == "cstc":
        return np.clip((model.decision_function(X) + 1) / 2, 0, 1)
    if output == "decision":
        return model.decision_function(X)
    raise CEGBError(f"unknown output {output!r}")


def _cost(model, costs: FeatureCosts, k: int | None, X):
    """The package's accounting of ``model`` (its first ``k`` iterations) on X."""
    return prediction_cost(model, X, costs, num_iteration=k)


def _own_cost(model, X):
    """``model.prediction_cost(X)``: a model whose cost is not that of a forest (gates, cascades, exits)."""
    return model.prediction_cost(X)


def _candidate(method: str, params: dict, model, output: str, costs: FeatureCosts | None = None) -> Candidate:
    """A whole model as a point: costed by the accounting of its trees, or (``costs`` None) by its own."""
    cost = partial(_own_cost, model) if costs is None else partial(_cost, model, costs, None)
    return Candidate(method, params, model, partial(_predict, model, output, None), cost)


def _iterations(model) -> int:
    """The iterations a boosted or bagged model predicts with: its best (early stopped) or all."""
    if library_of(model) == "catboost":  # use_best_model keeps the best iterations only
        return model.tree_count_
    if isinstance(model, lgb.Booster):
        return model.best_iteration if model.best_iteration > 0 else model.current_iteration()
    return model.best_iteration_ if hasattr(model, "best_iteration_") else model.n_estimators_


def _prefixes(context: Context, method: str, point: dict, model, output: str, trees: Sequence[int] = PREFIX_TREES,
              costs: FeatureCosts | None = None) -> list[Candidate]:
    """``model`` and its prefixes as points (``trees``: the prefix lengths, see PREFIX_TREES), each recording
    ``trees``; with the sweep's budgets, also the longest prefix within each on the validation rows (one pass)."""
    costs = context.costs if costs is None else costs
    total = _iterations(model)
    ks = {k for k in trees if k < total} | {total}
    if context.budgets:
        curve = prediction_cost(model, context.valid.X, costs, num_iteration=total, per_iteration=True).curve
        for budget in context.budgets:
            within = np.flatnonzero(curve <= budget * (1 + 1e-12))
            if len(within):
                ks.add(int(within[-1]) + 1)
    return [Candidate(method, {**point, "trees": k}, model, partial(_predict, model, output, k),
                      partial(_cost, model, costs, k), prefix=None if k == total else partial(_truncated, model, k))
            for k in sorted(ks)]


def _truncated(model, k: int):
    """A copy of a boosted or bagged ``model`` holding its first ``k`` iterations only."""
    if isinstance(model, lgb.Booster):
        return lgb.Booster(model_str=model.model_to_string(num_iteration=k))
    if hasattr(model, "prefix"):  # the package's estimators with prefixes (Greedy Miser, BudgetRF)
        return model.prefix(k)
    if library_of(model) == "catboost":
        shrunk = model.copy()
        shrunk.shrink(ntree_end=k)  # in place
        return shrunk
    raise CEGBError(f"cannot take a prefix of a {type(model).__name__}")


def _check_capped(method: str, context: Context, iterations: int, candidates: list[Candidate]) -> list[Candidate]:
    """Mark the points of a model whose training reached num_boost_round while the validation metric was still
    improving (its best iteration is within early_stopping_rounds of the cap): :func:`sweep` warns."""
    if iterations > context.num_boost_round - context.early_stopping_rounds:
        for candidate in candidates:
            candidate.capped = True
    return candidates


def booster_points(method: str, context: Context, point: dict, booster: lgb.Booster,
                   trees: Sequence[int] = PREFIX_TREES) -> list[Candidate]:
    """A LightGBM model and its prefixes as points, marked when its training reached the round cap."""
    return _check_capped(method, context, _iterations(booster),
                         _prefixes(context, method, point, booster, "predict", trees))


def plain_model(context: Context) -> lgb.Booster:
    """Plain LightGBM (no costs) on the sweep's rows and parameters: the base of several methods, trained once per
    sweep and process (deterministic training: each would train the same model)."""
    if "plain" not in context.shared:
        context.shared["plain"] = train_lightgbm(context, lightgbm_params(context))
    return context.shared["plain"]


def _check_keys(method: str, params: Mapping, allowed: set[str]) -> None:
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise CEGBError(f"{method}: unknown parameter(s) {unknown}; it takes {sorted(allowed)}")


@register("lightgbm", grid=lambda context: [{}])
def _fit_lightgbm(context: Context, state, params: dict) -> list[Candidate]:
    params = dict(params)
    trees = params.pop("trees", PREFIX_TREES)
    booster = train_lightgbm(context, lightgbm_params(context, **params)) if params else plain_model(context)
    return booster_points("lightgbm", context, params, booster, trees)


def _scaled_knob(method: str, params: dict, relative_key: str, raw_key: str, scale: float) -> tuple[float, dict]:
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


def _weighs_nothing(context: Context) -> bool:
    """Whether no feature's use costs anything that cegb_tradeoff weighs (free features, tree costs only)."""
    return not context.costs.penalised(np.shape(context.train.X)[1]).any()


def _cegb_prepare(context: Context) -> float:
    """The unit of ``relative_tradeoff``: cegb_tradeoff_scale; 0 when the costs give it nothing to weigh (then
    every cegb_tradeoff trains the same model, tradeoff 0 with the costs recorded)."""
    if _weighs_nothing(context):
        return 0.0
    cost_params = context.costs.to_params(tradeoff=1.0)
    return cegb_tradeoff_scale(lightgbm_params(context, **cost_params), _dataset(context.train))


def _cegb_grid(context: Context) -> list[dict]:
    return [{"relative_tradeoff": r} for r in ((0.0,) if _weighs_nothing(context) else CEGB_RELATIVE_TRADEOFFS)]


#: ``relative_tradeoff`` values of CEGB's default grid (0 is plain LightGBM with the costs recorded). Where
#: the cost moves depends on the data: on HIGGS and letter it barely moves below 0.05 (the later trees' gains,
#: which the penalty has to beat, are much smaller than the first tree's, which sets the scale) and falls
#: steeply near 1 (letter, 26 classes: 10.7 of 16 at 0.9, 0 at 1); on MNIST's 1,120 pixels it falls from 160
#: to 7 between 0 and 0.05. Hence points at both ends.
CEGB_RELATIVE_TRADEOFFS = (0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98,
                           0.995)


@register("cegb", grid=_cegb_grid, prepare=_cegb_prepare,
          knob=Knob("relative_tradeoff", "cegb_tradeoff", log=True, cheap_end=1.0))
def _fit_cegb(context: Context, scale: float, params: dict) -> list[Candidate]:
    from lightgbm_cegb.lgbm.callbacks import budget_stopping
    params = dict(params)
    budget = params.pop("budget", None)
    trees = params.pop("trees", PREFIX_TREES)
    tradeoff, knob = _scaled_knob("cegb", params, "relative_tradeoff", "cegb_tradeoff", scale)
    callbacks = [] if budget is None else [budget_stopping(context.valid.X, context.costs, budget, verbose=False)]
    booster = train_lightgbm(context, lightgbm_params(context, **context.costs.to_params(tradeoff=tradeoff), **params),
                             callbacks)
    if not has_split(booster):
        warnings.warn(f"cegb: cegb_tradeoff={tradeoff:g} leaves the model without a split (every split's penalty "
                      "outweighs its gain); its point predicts a constant", NoSplitWarning, stacklevel=2)
    point = {**knob, **({} if budget is None else {"budget": budget}), **params}
    return booster_points("cegb", context, point, booster, trees)


def _prune_prepare(context: Context):
    """The plain model, its BudgetPrune problem on the training rows (built once for every grid point) and
    its mean lazy cost there (the unit of ``budget_fraction``)."""
    from lightgbm_cegb.methods.budget_prune import Pruner
    booster = plain_model(context)
    costs = context.costs.per_row()
    pruner = Pruner(booster, context.train.X, context.train.y, costs)
    return pruner, float(prediction_cost(booster, context.train.X, costs).mean)


@register("budget_prune", prepare=_prune_prepare,
          grid=lambda context: [{"budget_fraction": f} for f in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0)],
          knob=Knob("budget_fraction", "tradeoff", cheap_end=0.0))
def _fit_budget_prune(context: Context, state, params: dict) -> list[Candidate]:
    pruner, full_cost = state
    _check_keys("budget_prune", params, {"budget_fraction", "tradeoff"})
    if ("budget_fraction" in params) == ("tradeoff" in params):
        raise CEGBError(f"budget_prune: give budget_fraction or tradeoff, got {params}")
    result = pruner.at(params["tradeoff"]) if "tradeoff" in params else \
        pruner.within(params["budget_fraction"] * full_cost)
    return [_candidate("budget_prune", {**params, "tradeoff": result.tradeoff}, result.model, "predict", context.costs)]


def _early_exit_grid(context: Context) -> list[dict]:
    """Proximity margins for a ranker, probabilities for a classifier (also a classifier ranking by its
    probabilities, as with binarised labels)."""
    from lightgbm_cegb.methods.early_exit import RANKING_OBJECTIVES
    ranker = lightgbm_params(context)["objective"] in RANKING_OBJECTIVES
    return [{"threshold": t} for t in ((0.5, 1.0, 2.0, 4.0) if ranker else (0.6, 0.8, 0.9, 0.95, 0.99))]


@register("early_exit", tasks=("binary", "multiclass", "ranking"), prepare=plain_model,
          grid=_early_exit_grid, knob=Knob("threshold", read_at_predict=True))
def _fit_early_exit(context: Context, booster, params: dict) -> list[Candidate]:
    from lightgbm_cegb.methods.early_exit import EarlyExit
    _check_keys("early_exit", params, {"threshold", "every"})
    model = EarlyExit(booster, threshold=params["threshold"], every=params.get("every", 10),
                      feature_costs=context.costs)
    return [_ExitCandidate("early_exit", params, model, partial(_predict, model, "predict", None),
                           partial(_own_cost, model))]


class _ExitCandidate(Candidate):
    """Early Exit: prediction and cost come from one pass (``EarlyExit.predict_result``). A ranker's exits depend on
    the query, so it is measured with the query sizes, a stopped document ranking below the others of its
    query (the score is minus its rank); its ``predict``/``cost`` callables need no queries only for a
    classifier."""

    def measure(self, rows: Rows, metric: Metric, *, choose: bool = False) -> tuple[float, float, float]:
        ranker = self.model.kind == "rank"
        result = self.model.predict_result(rows.X, group=rows.group if ranker else None)
        score = -result.rank.astype(np.float64) if ranker else result.prediction
        return self.quality(rows, score, metric, choose), float(result.cost.mean), float(result.cost.coupled)


@register("budgetrf", tasks=("binary", "multiclass", "ranking"),
          grid=lambda context: [{"tradeoff": a} for a in (0.0, 2.0, 8.0)], knob=Knob("tradeoff", log=True))
def _fit_budgetrf(context: Context, state, params: dict) -> list[Candidate]:
    from lightgbm_cegb.methods.budgetrf import BudgetRFClassifier
    params = dict(params)
    trees = params.pop("trees", PREFIX_TREES)
    params.setdefault("n_estimators", 30)
    params.setdefault("random_state", 0)
    labels = (context.train.y >= 1).astype(int) if context.task == "ranking" else context.train.y
    forest = BudgetRFClassifier(feature_costs=context.costs, **params).fit(_dense(context.train.X), labels)
    return _prefixes(context, "budgetrf", params, forest, "ranking" if context.task == "ranking" else "staged", trees)


#: ``relative_tradeoff`` values of Greedy Miser's default grid (as CEGB's: 1 is a first tree without a split).
GREEDY_MISER_RELATIVE_TRADEOFFS = (0.0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.2, 0.4, 0.7, 0.9)

def _greedy_miser(context: Context, **params):
    from lightgbm_cegb.methods.greedy_miser import (
        GreedyMiserClassifier,
        GreedyMiserRanker,
        GreedyMiserRegressor,
    )
    kind = {"binary": GreedyMiserClassifier, "multiclass": GreedyMiserClassifier,
            "regression": GreedyMiserRegressor, "ranking": GreedyMiserRanker}[context.task]
    return kind(feature_costs=context.costs, n_estimators=context.num_boost_round,
                early_stopping_rounds=context.early_stopping_rounds, random_state=0, **params)


def _greedy_miser_prepare(context: Context) -> float:
    train = context.train
    return _greedy_miser(context).tradeoff_scale(train.X, train.y,
                                                 **({} if train.group is None else {"group": train.group}))


@register("greedy_miser", prepare=_greedy_miser_prepare,
          grid=lambda context: [{"relative_tradeoff": r} for r in GREEDY_MISER_RELATIVE_TRADEOFFS],
          knob=Knob("relative_tradeoff", "tradeoff", log=True, cheap_end=1.0))
def _fit_greedy_miser(context: Context, scale: float, params: dict) -> list[Candidate]:
    params = dict(params)
    trees = params.pop("trees", PREFIX_TREES)
    tradeoff, knob = _scaled_knob("greedy_miser", params, "relative_tradeoff", "tradeoff", scale)
    train, valid = context.train, context.valid
    queries = {} if train.group is None else {"group": train.group, "eval_group": [valid.group]}
    model = _greedy_miser(context, tradeoff=tradeoff, **params).fit(train.X, train.y, eval_set=[(valid.X, valid.y)],
                                                                    **queries)
    output = {"binary": "positive", "multiclass": "proba"}.get(context.task, "predict")
    return _check_capped("greedy_miser", context, model.best_iteration_,
                         _prefixes(context, "greedy_miser", {**knob, **params}, model, output, trees))


def _adapt_prepare(context: Context):
    """f0 (plain LightGBM on the training rows) and the unit of ``relative_tradeoff`` (Greedy Miser's tradeoff_scale
    on the training rows: ADAPT's trees pay as Greedy Miser's)."""
    return plain_model(context), _greedy_miser_prepare(context)


def _adapt_fit(name: str, estimator: str, relative_key: str, raw_key: str) -> Callable:
    """The fit of an ADAPT estimator (``lightgbm_cegb.<estimator>``) in front of the prepared f0, its knob
    ``raw_key`` given as is or as ``relative_key`` times the prepared scale."""
    def fit(context: Context, state, params: dict) -> list[Candidate]:
        import lightgbm_cegb.methods.adapt.gbrt as adapt
        import lightgbm_cegb.methods.adapt.lin as adapt_lin
        f0, scale = state
        params = dict(params)
        value, knob = _scaled_knob(name, params, relative_key, raw_key, scale)
        cls = getattr(adapt, estimator, None) or getattr(adapt_lin, estimator)
        model = cls(f0=f0, feature_costs=context.costs, **{raw_key: value}, **params).fit(context.train.X,
                                                                                          context.train.y)
        return [_candidate(name, {**knob, **params}, model, "positive" if context.task == "binary" else "proba")]
    return fit


#: ADAPT-GBRT's default grid: ``p_full`` x ``relative_tradeoff``.
ADAPT_GBRT_GRID = tuple({"p_full": p, "relative_tradeoff": r} for p in (0.1, 0.2, 0.3, 0.5) for r in (0.0, 0.01, 0.1))

register("adapt_gbrt", tasks=("binary", "multiclass"), prepare=_adapt_prepare,
         grid=lambda context: [dict(point) for point in ADAPT_GBRT_GRID],
         knob=Knob("relative_tradeoff", "tradeoff", log=True))(
    _adapt_fit("adapt_gbrt", "AdaptGBRT", "relative_tradeoff", "tradeoff"))


def _adapt_lin_prepare(context: Context):
    """f0 (plain LightGBM on the training rows) and the unit of ``relative_tradeoff`` (AdaptLIN.tradeoff_scale)."""
    from lightgbm_cegb.methods.adapt.lin import AdaptLIN
    f0 = plain_model(context)
    return f0, AdaptLIN(f0=f0, feature_costs=context.costs).tradeoff_scale(context.train.X, context.train.y)


register("adapt_lin", tasks=("binary", "multiclass"), prepare=_adapt_lin_prepare,
         grid=lambda context: [{"p_full": p, "relative_tradeoff": r} for p in (0.1, 0.3, 0.5)
                               for r in (0.01, 0.05, 0.2)], knob=Knob("relative_tradeoff", "tradeoff", log=True))(
    _adapt_fit("adapt_lin", "AdaptLIN", "relative_tradeoff", "tradeoff"))

# the ADAPT paper's L1 baseline: the same knob and unit as ADAPT-LIN (its first fit is AdaptLIN's)
register("adapt_l1", tasks=("binary", "multiclass"), prepare=_adapt_lin_prepare,
         grid=lambda context: [{"p_full": p, "relative_tradeoff": r} for p in (0.1, 0.3, 0.5)
                               for r in (0.01, 0.05, 0.2)], knob=Knob("relative_tradeoff", "tradeoff", log=True))(
    _adapt_fit("adapt_l1", "AdaptL1", "relative_tradeoff", "tradeoff"))


#: ``relative_tradeoff`` values of CSTC's default grid.
CSTC_RELATIVE_TRADEOFFS = (1e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2)


def _cstc_targets(context: Context, rows: Rows, binary: bool) -> np.ndarray:
    """The labels a CSTC-family estimator fits: -1 / +1 for binary tasks and for the cascades (relevant: y > 0),
    the labels themselves for CSTC's regression and ranking."""
    return np.where(rows.y > 0, 1.0, -1.0) if binary or context.task == "binary" else rows.y


def _boosting_trick(context: Context, targets: np.ndarray, trees: int, depth: int) -> lgb.Booster:
    """The CSTC paper's phi (section 5, 6.2): ``trees`` rounds of gradient boosting with the squared loss on the
    targets, CART trees of at most ``depth`` levels (no early stopping: every tree is a column)."""
    params = {"objective": "regression", "max_depth": depth, "num_leaves": 2 ** depth, "learning_rate": 0.1,
              "verbose": -1, "seed": 0, "deterministic": True, "num_threads": context.params.get("num_threads", 0)}
    return lgb.train(params, lgb.Dataset(context.train.X, targets), trees)


def _cstc_method(name: str, binary_estimator: str, regression_estimator: str | None) -> None:
    """Register ``name``: ``relative_tradeoff`` x the variance of the targets, phi = the plain model's trees (or,
    with ``phi_trees``, the paper's boosting trick: that many squared-loss trees of ``phi_depth`` levels, 4 by
    default), pruned on the validation rows; binary scores ``(f + 1) / 2`` clipped to [0, 1]."""
    binary_only = regression_estimator is None

    def prepare(context: Context):
        import lightgbm_cegb.methods.cstc as cstc
        cls = getattr(cstc, binary_estimator if binary_only or context.task == "binary" else regression_estimator)
        targets = _cstc_targets(context, context.train, binary_only)
        return plain_model(context), cls().tradeoff_scale(context.train.X, targets), {}

    def fit(context: Context, state, params: dict) -> list[Candidate]:
        import lightgbm_cegb.methods.cstc as cstc
        phi, scale, tricks = state
        params = dict(params)
        tradeoff, knob = _scaled_knob(name, params, "relative_tradeoff", "tradeoff", scale)
        binary = binary_only or context.task == "binary"
        cls = getattr(cstc, binary_estimator if binary else regression_estimator)
        y_train, y_valid = (_cstc_targets(context, rows, binary_only) for rows in (context.train, context.valid))
        trick = {key: params.pop(key) for key in ("phi_trees", "phi_depth") if key in params}
        if trick:
            trees, depth = trick.get("phi_trees"), trick.get("phi_depth", 4)
            if not (isinstance(trees, (int, np.integer)) and trees >= 1 and isinstance(depth, (int, np.integer))
                    and 1 <= depth <= 16):
                raise CEGBError(f"{name}: phi_trees should be an integer >= 1 and phi_depth one in [1, 16], got "
                                f"phi_trees={trees!r}, phi_depth={depth!r}")
            if (trees, depth) not in tricks:  # one phi per setting, shared by the trade-offs (in this process)
                tricks[trees, depth] = _boosting_trick(context, y_train, int(trees), int(depth))
            phi = tricks[trees, depth]
        model = cls(tradeoff=tradeoff, feature_costs=context.costs, phi=phi, **params).fit(context.train.X, y_train,
                                                                          eval_set=(context.valid.X, y_valid))
        output = "cstc" if context.task == "binary" else "decision" if binary else "predict"
        return [_candidate(name, {**knob, **trick, **params}, model, output)]

    register(name, tasks=("binary", "ranking") if binary_only else ("binary", "regression", "ranking"),
             prepare=prepare, grid=lambda context: [{"relative_tradeoff": r} for r in CSTC_RELATIVE_TRADEOFFS],
             knob=Knob("relative_tradeoff", "tradeoff", log=True))(fit)


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




#: ``relative_tradeoff`` values of the adaptive acquisition's default grid: r x the first decision's best value (1:
#: nothing is bought), with its default gain (accuracy). Each classifier fitted serves every point (the policy reads
#: its tradeoff, cap and gain when predicting).
ACQUISITION_RELATIVE_TRADEOFFS = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7)
#: points at ``relative_tradeoff`` 0 with a per-row cap, ``max_cost``, at these fractions of the price of every
#: unit: the cheap end of the curve, below what the first purchases cost when nothing stops them early
ACQUISITION_CAPS = (0.05, 0.1, 0.2, 0.3)
#: ``relative_tradeoff`` values with ``gain="entropy"`` (r x its own first value): rows that go on buying while
#: unsure, the costly end of the curve (where the accuracy gain stops, as on MNIST)
ACQUISITION_ENTROPY_TRADEOFFS = (0.002, 0.005, 0.01, 0.02, 0.05, 0.2)
#: ``policy_rounds`` of the two classifiers each sweep fits: on random subsets only, and again on the states the
#: policy visits (measured: the second is better on MNIST and HIGGS at larger budgets, worse on CUBE; the
#: validation rows choose)
ACQUISITION_POLICY_ROUNDS = (0, 1)


def _unit_prices(context: Context) -> list[float]:
    """The price of each purchase a per-row acquisition can make on the sweep's columns (``FeatureCosts.units``)."""
    return [price for _, _, price in context.costs.units(np.shape(context.train.X)[1])]


def _acquisition_grid(context: Context) -> list[dict]:
    total = sum(_unit_prices(context))
    policies = [{"relative_tradeoff": r} for r in ACQUISITION_RELATIVE_TRADEOFFS] + \
        [{"relative_tradeoff": 0.0, "max_cost": round(f * total, 6)} for f in ACQUISITION_CAPS if total > 0] + \
        [{"relative_tradeoff": r, "gain": "entropy"} for r in ACQUISITION_ENTROPY_TRADEOFFS]
    return [{**policy, "policy_rounds": rounds} for rounds in ACQUISITION_POLICY_ROUNDS for policy in policies]


class _Traces:
    """Recorded policy runs at tradeoff 0 (``AdaptiveAcquisitionClassifier._trace``), one per (classifier, gain,
    cap) on the rows measured: every tradeoff of a point's grid is answered from it (``PolicyRun.result``, equal
    to its own run to the bit) instead of a run per point. Shared by a sweep's points when they run in this
    process (parallel jobs each record their own); the runs of one set of rows at a time are kept (validation,
    then test: a run holds arrays of rows x units); pickled empty (a frame keeps its models, not the runs)."""

    def __init__(self) -> None:
        self.rows = None  # the X the runs are of, compared by identity (kept alive with them)
        self.runs: dict[tuple, object] = {}  # (classifier's id, gain, cap) -> run

    def __reduce__(self):
        return (_Traces, ())

    def result(self, model, X):
        if self.rows is not X:
            self.rows, self.runs = X, {}
        key = (id(model.classifier_), model.gain, model.max_cost)
        if key not in self.runs:  # the classifier stays alive with the candidates: its id is not reused
            self.runs[key] = copy.copy(model).set_params(tradeoff=0.0)._trace(X)
        return self.runs[key].result(float(model.tradeoff))


def _acquisition_prepare(context: Context) -> dict:
    """{"classifiers": {policy_rounds: its AdaptiveAcquisitionClassifier}, fitted when a point first needs it (early
    stopped on the validation rows; to the most rounds a batch asks for, keeping each round's classifier on the
    way), "traces": the points' shared runs, "rounds": the most rounds planned}. NothingToTradeOff when every unit
    is free (its policy would buy whatever helps)."""
    if not any(price > 0 for price in _unit_prices(context)):
        raise NothingToTradeOff("no feature or group has a lazy or coupled cost: every purchase is free, there is "
                                "nothing to trade off")
    return {"classifiers": {}, "traces": _Traces(), "rounds": 0}


def _acquisition_plan(context: Context, state: dict, points: list[dict]) -> None:
    """The most policy_rounds a batch asks for: fitting that classifier passes through the others'."""
    state["rounds"] = max([state["rounds"]] + [point.get("policy_rounds", 0) for point in points])


def _acquisition_classifier(context: Context, state: dict, policy_rounds: int):
    from lightgbm_cegb.methods.acquisition import AdaptiveAcquisitionClassifier, auto_masks
    fitted = state["classifiers"]
    if policy_rounds not in fitted:
        # screened: the copies the classifier makes on the sweep's every row (a subsample's "auto" would make more)
        masks = "auto" if context.screen_of is None else auto_masks(context.screen_of, np.shape(context.train.X)[1])
        rounds = max(policy_rounds, state["rounds"])
        model = AdaptiveAcquisitionClassifier(feature_costs=context.costs, random_state=0, policy_rounds=rounds,
                                              n_jobs=context.params.get("num_threads") or None, n_masks=masks,
                                              **_acquisition_capacity(context))
        with _rounds_capped(state):
            for done in model._fitted_rounds(context.train.X, context.train.y,
                                             eval_set=(context.valid.X, context.valid.y)):
                # each round's classifier, as fit gives it
                fitted.setdefault(done, copy.copy(model).set_params(policy_rounds=done))
    return fitted[policy_rounds]


#: metrics that weigh the classes equally: the acquisitions' classifiers are trained with balanced class weights
#: for them (on a 10%-positive set, unweighted, no single purchase changes the prediction of a row that knows
#: nothing, and the adaptive acquisition's accuracy gain buys nothing)
BALANCED_METRICS = ("f1", "balanced_accuracy")


def _acquisition_capacity(context: Context) -> dict:
    """The acquisitions' training settings in a sweep: its round cap and patience, class weights by its metric."""
    return {"n_estimators": context.num_boost_round, "early_stopping_rounds": context.early_stopping_rounds,
            "class_weight": "balanced" if context.metric.name in BALANCED_METRICS else None}


@contextmanager
def _rounds_capped(state: dict):
    """Within it, an acquisition's RoundsWarning marks its state ``state["capped"] = True`` (its points are marked
    capped: :func:`sweep` warns once for all of them) instead of being shown; other warnings pass on."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for warning in caught:
        if issubclass(warning.category, RoundsWarning):
            state["capped"] = True
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)


@register("adaptive_acquisition", tasks=("binary", "multiclass"), prepare=_acquisition_prepare,
          plan=_acquisition_plan, grid=_acquisition_grid,
          knob=Knob("relative_tradeoff", "tradeoff", log=True, cheap_end=1.0, read_at_predict=True))
def _fit_acquisition(context: Context, state: dict, params: dict) -> list[Candidate]:
    params = dict(params)
    _check_keys("adaptive_acquisition", params, {"relative_tradeoff", "tradeoff", "max_cost", "gain", "policy_rounds"})
    classifier = _acquisition_classifier(context, state, params.get("policy_rounds", 0))
    model = copy.copy(classifier).set_params(**{k: params[k] for k in ("max_cost", "gain") if k in params})
    try:
        scale = model.first_value() if "relative_tradeoff" in params else 0.0
    except NothingToTradeOff as exc:  # e.g. the accuracy gain on unweighted imbalanced classes: its points buy nothing
        LOG.info("adaptive_acquisition %s: no point (%s)", params, exc)
        return []
    tradeoff, knob = _scaled_knob("adaptive_acquisition", params, "relative_tradeoff", "tradeoff", scale)
    model.set_params(tradeoff=tradeoff)  # a copy: shares the classifier and the tables
    candidate = _AcquisitionCandidate("adaptive_acquisition", {**knob, **params}, model,
                                      partial(_predict, model, "positive" if context.task == "binary" else "proba",
                                              None), partial(_own_cost, model))
    candidate.traces = state["traces"]
    candidate.capped = state.get("capped", False)
    return [candidate]


class _AcquisitionCandidate(Candidate):
    """The adaptive and the staged acquisition: prediction and cost from the policy's run on the rows, answered from
    what the grid's points share (``_Traces``: the run at tradeoff 0; ``_StagePasses``: the stages' pass), the same
    as ``predict_result``, to the bit."""

    traces: _Traces | _StagePasses | None = None

    def measure(self, rows: Rows, metric: Metric, *, choose: bool = False) -> tuple[float, float, float]:
        result = self.model.predict_result(rows.X) if self.traces is None else self.traces.result(self.model, rows.X)
        score = result.prediction if not hasattr(result, "proba") else \
            result.proba[:, 1] if result.proba.shape[1] == 2 else result.proba
        return self.quality(rows, score, metric, choose), float(result.cost.mean), float(result.cost.coupled)


#: ``relative_tradeoff`` values of the staged acquisition's default grid: a row stops where its top class
#: probability reaches 1 - r x (1 - the most frequent class's share); 1: at stage 0. Dense near 0, where a binary
#: problem's rows stop at 0.99 or above (MNIST) and a 26-class one's near 0.6 (letter)
STAGED_RELATIVE_TRADEOFFS = (0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7,
                              0.8, 0.9)
#: caps (``max_cost``) at these fractions of the price of every unit, beside no cap: the last stage within each
STAGED_CAPS = (0.01, 0.02, 0.04, 0.07, 0.1, 0.15, 0.2, 0.3, 0.45, 0.7)


def _staged_grid(context: Context) -> list[dict]:
    total = sum(_unit_prices(context))
    caps = [None] + [round(f * total, 6) for f in STAGED_CAPS if total > 0]
    return [{"relative_tradeoff": r, **({} if cap is None else {"max_cost": cap})}
            for cap in caps for r in STAGED_RELATIVE_TRADEOFFS]


class _StagePasses:
    """One pass of a fitted staged acquisition's stage classifiers over a set of rows (every stage's probabilities
    and evaluation costs): each grid point's result is replayed from it (``StagedAcquisitionClassifier._replayed``),
    equal to its own run to the bit. The passes of one set of rows at a time are kept; pickled empty."""

    def __init__(self) -> None:
        self.rows = None  # the X the passes are of, compared by identity (kept alive with them)
        self.passes: dict[int, tuple] = {}

    def __reduce__(self):
        return (_StagePasses, ())

    def result(self, model, X, *query):
        """The model's result on X (and, for the ranker, the sizes of X's queries)."""
        if self.rows is not X:
            self.rows, self.passes = X, {}
        key = id(model.stages_)  # the fitted list stays alive with the candidates: its id is not reused
        if key not in self.passes:
            self.passes[key] = copy.copy(model).set_params(max_cost=None)._passes(X)
        return model._replayed(*self.passes[key], *query)


def _staged_prepare(context: Context) -> dict:
    """{"model": the StagedAcquisitionClassifier, fitted when a point first needs it (early stopped on the
    validation rows; its stages up to the largest cap planned, ``max_stage_cost``), "passes": the points' shared
    passes, "ceiling": that cap}. NothingToTradeOff when every unit is free."""
    if not any(price > 0 for price in _unit_prices(context)):
        raise NothingToTradeOff("no feature or group has a lazy or coupled cost: every purchase is free, there is "
                                "nothing to trade off")
    return {"model": None, "passes": _StagePasses(), "ceiling": 0.0}


def _staged_plan(context: Context, state: dict, points: list[dict]) -> None:
    """The largest cap a batch asks for (None: a point without one): the stages above it are not fitted."""
    for point in points:
        state["ceiling"] = _higher(state["ceiling"], point.get("max_cost"))


def _fitted_ladder(state: dict, params: dict, fit):
    """The staged model of a sweep's state (the classifier, the ranker or the regressor), fitted by
    ``fit(max_stage_cost)`` when a point first needs it, and again when a point's cap lies above the stages the
    fitted model holds; its RoundsWarnings mark the state capped."""
    fitted = state["model"]
    if fitted is None or fitted.max_stage_cost is not None and \
            _higher(fitted.max_stage_cost, params.get("max_cost")) != fitted.max_stage_cost:
        with _rounds_capped(state):
            state["model"] = fit(_higher(state["ceiling"], params.get("max_cost")))
    return state["model"]


def _higher(a: float | None, b: float | None) -> float | None:
    """The larger of two caps, None (no cap) being the largest."""
    return None if a is None or b is None else max(a, b)


@register("staged_acquisition", tasks=("binary", "multiclass"), prepare=_staged_prepare, plan=_staged_plan,
          grid=_staged_grid,
          knob=Knob("relative_tradeoff", "tradeoff", cheap_end=1.0, read_at_predict=True))
def _fit_staged(context: Context, state: dict, params: dict) -> list[Candidate]:
    from lightgbm_cegb.methods.staged import StagedAcquisitionClassifier
    params = dict(params)
    _check_keys("staged_acquisition", params, {"relative_tradeoff", "tradeoff", "max_cost"})
    fitted = _fitted_ladder(state, params, lambda ceiling: StagedAcquisitionClassifier(
        feature_costs=context.costs, random_state=0, n_jobs=context.params.get("num_threads") or None,
        max_stage_cost=ceiling, **_acquisition_capacity(context)).fit(
        context.train.X, context.train.y, eval_set=(context.valid.X, context.valid.y)))
    scale = fitted.first_value() if "relative_tradeoff" in params else 0.0
    tradeoff, knob = _scaled_knob("staged_acquisition", params, "relative_tradeoff", "tradeoff", scale)
    model = copy.copy(fitted).set_params(tradeoff=min(tradeoff, 1.0), max_cost=params.get("max_cost"))
    candidate = _AcquisitionCandidate("staged_acquisition", {**knob, **params}, model,
                                      partial(_predict, model, "positive" if context.task == "binary" else "proba",
                                              None), partial(_own_cost, model))
    candidate.traces = state["passes"]
    candidate.capped = state.get("capped", False)
    return [candidate]


@register("staged_acquisition_regressor", tasks=("regression",), prepare=_staged_prepare, grid=_staged_grid,
          knob=Knob("relative_tradeoff", "tradeoff", cheap_end=1.0, read_at_predict=True))
def _fit_staged_regressor(context: Context, state: dict, params: dict) -> list[Candidate]:
    from lightgbm_cegb.methods.staged_regressor import StagedAcquisitionRegressor
    params = dict(params)
    _check_keys("staged_acquisition_regressor", params, {"relative_tradeoff", "tradeoff", "max_cost"})
    fitted = _fitted_ladder(state, params, lambda _: StagedAcquisitionRegressor(  # every stage: no ceiling
        feature_costs=context.costs, random_state=0, n_jobs=context.params.get("num_threads") or None,
        n_estimators=context.num_boost_round, early_stopping_rounds=context.early_stopping_rounds).fit(
        context.train.X, context.train.y, eval_set=(context.valid.X, context.valid.y)))
    scale = fitted.first_value() if "relative_tradeoff" in params else 0.0
    tradeoff, knob = _scaled_knob("staged_acquisition_regressor", params, "relative_tradeoff", "tradeoff", scale)
    model = copy.copy(fitted).set_params(tradeoff=tradeoff, max_cost=params.get("max_cost"))
    candidate = _AcquisitionCandidate("staged_acquisition_regressor", {**knob, **params}, model, model.predict,
                                      model.prediction_cost)
    candidate.traces = state["passes"]
    candidate.capped = state.get("capped", False)
    return [candidate]


#: ``tradeoff`` values of the staged acquisition ranker's default grid: the share of a query's documents at a stage
#: that each cut stops (0: every document goes to the last stage; 1: only ``top_k``)
CASCADE_TRADEOFFS = (0.0, 0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
#: ``top_k`` values of its grid: the documents of a query that go on at every cut
CASCADE_TOP_K = (0, 1, 3, 10)


def _cascade_grid(context: Context) -> list[dict]:
    total = sum(_unit_prices(context))
    caps = [None] + [round(f * total, 6) for f in STAGED_CAPS if total > 0]
    return [{"tradeoff": t, "top_k": k, **({} if cap is None else {"max_cost": cap})}
            for cap in caps for k in CASCADE_TOP_K for t in CASCADE_TRADEOFFS]


class _CascadeCandidate(Candidate):
    """The staged acquisition ranker: its scores and costs on a set of queries, replayed from the stages' pass
    (``_StagePasses``), the same as ``predict_result`` to the bit; ``predict`` and ``cost`` take the rows' ``group``
    (None: one query)."""

    passes: _StagePasses | None = None

    def measure(self, rows: Rows, metric: Metric, *, choose: bool = False) -> tuple[float, float, float]:
        result = self.passes.result(self.model, rows.X, rows.group)
        return self.quality(rows, result.score, metric, choose), float(result.cost.mean), float(result.cost.coupled)


@register("staged_acquisition_ranker", tasks=("ranking",), prepare=_staged_prepare, plan=_staged_plan,
          grid=_cascade_grid, knob=Knob("tradeoff", cheap_end=1.0, read_at_predict=True))
def _fit_cascade(context: Context, state: dict, params: dict) -> list[Candidate]:
    from lightgbm_cegb.methods.cascade import StagedAcquisitionRanker
    params = dict(params)
    _check_keys("staged_acquisition_ranker", params, {"tradeoff", "top_k", "max_cost"})
    fitted = _fitted_ladder(state, params, lambda ceiling: StagedAcquisitionRanker(
        feature_costs=context.costs, random_state=0, n_jobs=context.params.get("num_threads") or None,
        max_stage_cost=ceiling, n_estimators=context.num_boost_round,
        early_stopping_rounds=context.early_stopping_rounds).fit(
        context.train.X, context.train.y, group=context.train.group, eval_set=[(context.valid.X, context.valid.y)],
        eval_group=[context.valid.group]))
    model = copy.copy(fitted).set_params(**{"max_cost": None, **params})
    candidate = _CascadeCandidate("staged_acquisition_ranker", params, model, model.predict, model.prediction_cost)
    candidate.passes = state["passes"]
    candidate.capped = state.get("capped", False)
    return [candidate]


#: ``penalties_coefficient`` values of CatBoost's default grid: its penalties are in the units of its split scores,
#: which differ from data set to data set (on HIGGS the model reads every feature below 1e-5 and one feature from
#: 3e-3), so the grid spans five decades
CATBOOST_COEFFICIENTS = (1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1)


def _catboost_prepare(context: Context) -> dict:
    """CatBoost's penalties per feature: {"lazy": per_object_feature_penalties, "coupled":
    first_feature_use_penalties} (a group's own costs spread over its members: CatBoost has no groups).
    NothingToTradeOff without lazy or coupled costs; a CEGBError without CatBoost."""
    try:
        import catboost  # noqa: F401 (the method's optional dependency)
    except ImportError:
        raise CEGBError("catboost: this method trains CatBoost models: pip install lightgbm-cegb[catboost]") from None
    num_features = np.shape(context.train.X)[1]
    lazy, coupled, _ = context.costs.arrays(num_features)
    group_of, group_lazy, group_coupled = context.costs.group_arrays(num_features)
    members = np.bincount(group_of[group_of >= 0], minlength=len(group_lazy))
    spread = {}
    for name, own, group in (("lazy", lazy, group_lazy), ("coupled", coupled, group_coupled)):
        share = np.where(group_of >= 0, np.asarray(group, dtype=np.float64)[np.maximum(group_of, 0)]
                         / np.maximum(members[np.maximum(group_of, 0)], 1), 0.0) if len(group) else 0.0
        spread[name] = {int(f): float(v) for f, v in enumerate(own + share) if v > 0}
    if not spread["lazy"] and not spread["coupled"]:
        raise NothingToTradeOff("no feature or group has a lazy or coupled cost: CatBoost's penalties have nothing "
                                "to weigh")
    return spread


@register("catboost", prepare=_catboost_prepare, tasks=("binary", "multiclass", "regression"),
          grid=lambda context: [{"penalties_coefficient": c} for c in CATBOOST_COEFFICIENTS],
          knob=Knob("penalties_coefficient", log=True, cheap_end=CATBOOST_COEFFICIENTS[-1]))
def _fit_catboost(context: Context, penalties: dict, params: dict) -> list[Candidate]:
    import catboost
    params = dict(params)
    _check_keys("catboost", params, {"penalties_coefficient", "depth", "learning_rate", "l2_leaf_reg"})
    coefficient = params.get("penalties_coefficient", 1.0)
    check_number(coefficient, "catboost: penalties_coefficient", 0.0)
    kind, loss, output = {"binary": (catboost.CatBoostClassifier, "Logloss", "positive"),
                          "multiclass": (catboost.CatBoostClassifier, "MultiClass", "proba"),
                          "regression": (catboost.CatBoostRegressor, "RMSE", "predict")}[context.task]
    extra = {k: params[k] for k in ("depth", "learning_rate", "l2_leaf_reg") if k in params}
    model = kind(iterations=context.num_boost_round, early_stopping_rounds=context.early_stopping_rounds,
                 loss_function=loss, per_object_feature_penalties=penalties["lazy"] or None,
                 first_feature_use_penalties=penalties["coupled"] or None, penalties_coefficient=coefficient,
                 random_seed=0, thread_count=context.params.get("num_threads") or -1, verbose=0,
                 allow_writing_files=False, **extra)
    model.fit(context.train.X, context.train.y, eval_set=(context.valid.X, context.valid.y), use_best_model=True)
    return _check_capped("catboost", context, model.tree_count_, _prefixes(context, "catboost", params, model, output))
