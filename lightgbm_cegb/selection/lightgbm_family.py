"""The LightGBM family of a sweep: plain LightGBM, CEGB, BudgetPrune and Early Exit (the last two on the plain model).

Knobs, each on a documented scale:

- ``lightgbm``: plain LightGBM (no costs), any LightGBM parameter; the reference point.
- ``cegb``: ``relative_tradeoff`` r in [0, 1]: ``cegb_tradeoff = r * scale`` where ``scale`` is the
  smallest trade-off at which the first tree of the training data makes no split
  (:func:`cegb_tradeoff_scale`): r = 1 is a model without splits, whatever the costs' units and the
  number of rows. ``cegb_tradeoff`` sets the raw value instead. Trained with early stopping on the
  validation rows, and with ``budget_stopping`` when the point has a ``budget``.
- ``budget_prune``: ``budget_fraction`` f in (0, 1]: BudgetPrune (``budget_prune(..., budget=B)``,
  exact) of a plain LightGBM model to ``B = f x`` its own mean cost on the pruning rows (the training
  rows); ``tradeoff`` sets the raw trade-off instead. Ranking: with a regression or binary objective in
  ``params`` (BudgetPrune has no lambdarank loss).
- ``early_exit``: ``threshold`` of ``EarlyExit`` on a plain LightGBM model (classification: a
  probability; ranking: the proximity margin), ``every`` (default 10).
- ``cegb_cascade`` (ranking): CEGB's ``relative_tradeoff``, and the cascade cut of ``EarlyExit`` on each CEGB
  model: at an exit every ``every`` (default CASCADE_EVERY) trees, a query's best ``top_k`` documents still in go on
  and the others stop, so the expensive features of the later trees are bought only for the documents near the top
  (each document pays the paths it takes). Each model gives a point per tree prefix longer than ``every`` (a
  shorter one has no exit: it is CEGB's point) and ``top_k`` (default CASCADE_TOP_K, those below the largest
  validation query); its models are CEGB's own, shared with ``cegb`` in the same sweep and process (but for a
  training a time allowance cut).
"""

from __future__ import annotations

import warnings

import lightgbm as lgb
import numpy as np

from lightgbm_cegb.accounting import prediction_cost
from lightgbm_cegb.core.errors import CEGBError, NoSplitWarning
from lightgbm_cegb.io.models import has_split
from lightgbm_cegb.lgbm.cegb_tradeoff_scale import cegb_tradeoff_scale
from lightgbm_cegb.selection.metrics import Metric
from lightgbm_cegb.selection.points import (
    PREFIX_TREES,
    booster_points,
    check_capped,
    check_keys,
    dataset,
    iterations_of,
    lightgbm_params,
    plain_model,
    scaled_knob,
    shared,
    train_lightgbm,
    whole_model,
)
from lightgbm_cegb.selection.registry import Candidate, Context, Family, Knob, Rows

#: this module's methods, registered by the package (``lightgbm_cegb.selection``)
FAMILY = Family()


@FAMILY.method("lightgbm", grid=lambda context: [{}])
def _fit_lightgbm(context: Context, state, params: dict) -> list[Candidate]:
    params = dict(params)
    trees = params.pop("trees", PREFIX_TREES)
    booster = train_lightgbm(context, lightgbm_params(context, **params)) if params else plain_model(context)
    return booster_points("lightgbm", context, params, booster, trees)


def _weighs_nothing(context: Context) -> bool:
    """Whether no feature's use costs anything that cegb_tradeoff weighs (free features, tree costs only)."""
    return not context.costs.penalised(np.shape(context.train.X)[1]).any()


def _cegb_prepare(context: Context) -> float:
    """The unit of ``relative_tradeoff``: cegb_tradeoff_scale (shared by the sweeps of the same rows and
    parameters); 0 when the costs give it nothing to weigh (then every cegb_tradeoff trains the same model,
    tradeoff 0 with the costs recorded)."""
    if _weighs_nothing(context):
        return 0.0
    params = lightgbm_params(context, **context.costs.to_params(tradeoff=1.0))
    return shared(context, {"cegb": params}, lambda: cegb_tradeoff_scale(params, dataset(context.train)))


def _cegb_grid(context: Context) -> list[dict]:
    return [{"relative_tradeoff": r} for r in ((0.0,) if _weighs_nothing(context) else CEGB_RELATIVE_TRADEOFFS)]


#: ``relative_tradeoff`` values of CEGB's default grid (0 is plain LightGBM with the costs recorded). Where
#: the cost moves depends on the data: on HIGGS and letter it barely moves below 0.05 (the later trees' gains,
#: which the penalty has to beat, are much smaller than the first tree's, which sets the scale) and falls
#: steeply near 1 (letter, 26 classes: 10.7 of 16 at 0.9, 0 at 1); on MNIST's 1,120 pixels it falls from 160
#: to 7 between 0 and 0.05. Hence points at both ends.
CEGB_RELATIVE_TRADEOFFS = (0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98,
                           0.995)


def _cegb_model(method: str, context: Context, scale: float, params: dict) -> tuple[lgb.Booster, dict]:
    """The CEGB model of a grid point (``params``: its knob, ``budget`` and LightGBM parameters; ``trees`` taken out
    by the caller) and the point's record; trained once per sweep and process for ``cegb`` and ``cegb_cascade``
    alike (deterministic training: each would train the same model), except to a budget or where a time allowance
    cut the training (:meth:`Context.cut_callbacks`)."""
    from lightgbm_cegb.lgbm.callbacks import budget_stopping
    params = dict(params)
    budget = params.pop("budget", None)
    tradeoff, knob = scaled_knob(method, params, "relative_tradeoff", "cegb_tradeoff", scale)
    lightgbm = lightgbm_params(context, **context.costs.to_params(tradeoff=tradeoff), **params)
    key = None if budget is not None else ("cegb", repr(sorted(lightgbm.items(), key=lambda item: item[0])))
    booster = context.shared.get(key) if key else None
    if booster is None:
        callbacks = [] if budget is None else [budget_stopping(context.valid.X, context.costs, budget, verbose=False)]
        cut = len(context.cut)
        booster = train_lightgbm(context, lightgbm, callbacks + context.cut_callbacks())
        if key and len(context.cut) == cut:
            context.shared[key] = booster
    if not has_split(booster):
        warnings.warn(f"{method}: cegb_tradeoff={tradeoff:g} leaves the model without a split (every split's "
                      "penalty outweighs its gain); its point predicts a constant", NoSplitWarning, stacklevel=3)
    return booster, {**knob, **({} if budget is None else {"budget": budget}), **params}


@FAMILY.method("cegb", grid=_cegb_grid, prepare=_cegb_prepare,
          knob=Knob("relative_tradeoff", "cegb_tradeoff", log=True, cheap_end=1.0))
def _fit_cegb(context: Context, scale: float, params: dict) -> list[Candidate]:
    params = dict(params)
    trees = params.pop("trees", PREFIX_TREES)
    booster, point = _cegb_model("cegb", context, scale, params)
    return booster_points("cegb", context, point, booster, trees)


#: ``cegb_cascade``'s cuts: the documents of a query that go on at each exit (on the synthetic Yahoo!-shaped set's
#: queries of about 17 documents, 8 to 12 kept the AP@5 of the whole model where 5 lost 0.02 to 0.05; the MSLR
#: subset's hold about 116). A cut at least as large as every validation query stops nothing: it is left out
CASCADE_TOP_K = (6, 8, 10, 12, 16, 24, 32, 48)
#: ... and the trees between its exits
CASCADE_EVERY = 5


@FAMILY.method("cegb_cascade", tasks=("ranking",), grid=_cegb_grid, prepare=_cegb_prepare,
          knob=Knob("relative_tradeoff", "cegb_tradeoff", log=True, cheap_end=1.0))
def _fit_cegb_cascade(context: Context, scale: float, params: dict) -> list[Candidate]:
    from lightgbm_cegb.methods.early_exit import EarlyExit
    params = dict(params)
    trees = params.pop("trees", PREFIX_TREES)
    top_k = params.pop("top_k", CASCADE_TOP_K)
    every = params.pop("every", CASCADE_EVERY)
    booster, point = _cegb_model("cegb_cascade", context, scale, params)
    total = iterations_of(booster)
    candidates = []
    cuts = tuple(top_k) if isinstance(top_k, (tuple, list)) else (top_k,)
    largest = int(np.max(context.valid.group))
    for k in [k for k in cuts if k < largest] or [min(cuts)]:
        for t in sorted({t for t in (*trees, total) if every < t <= total}):
            model = EarlyExit(booster, top_k=k, every=every, task="ranking", num_iteration=t,
                              feature_costs=context.costs)
            candidates.append(_ExitCandidate.of("cegb_cascade", {**point, "top_k": k, "every": every, "trees": t},
                                                model))
    return check_capped("cegb_cascade", context, total, candidates)


def _prune_prepare(context: Context):
    """The plain model, its BudgetPrune problem on the training rows (built once for every grid point) and
    its mean lazy cost there (the unit of ``budget_fraction``)."""
    from lightgbm_cegb.methods.budget_prune import Pruner
    booster = plain_model(context)
    costs = context.costs.per_row()
    pruner = Pruner(booster, context.train.X, context.train.y, costs)
    return pruner, float(prediction_cost(booster, context.train.X, costs).mean)


@FAMILY.method("budget_prune", prepare=_prune_prepare,
          grid=lambda context: [{"budget_fraction": f} for f in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0)],
          knob=Knob("budget_fraction", "tradeoff", cheap_end=0.0))
def _fit_budget_prune(context: Context, state, params: dict) -> list[Candidate]:
    pruner, full_cost = state
    check_keys("budget_prune", params, {"budget_fraction", "tradeoff"})
    if ("budget_fraction" in params) == ("tradeoff" in params):
        raise CEGBError(f"budget_prune: give budget_fraction or tradeoff, got {params}")
    result = pruner.at(params["tradeoff"]) if "tradeoff" in params else \
        pruner.within(params["budget_fraction"] * full_cost)
    return [whole_model("budget_prune", {**params, "tradeoff": result.tradeoff}, result.model, "predict",
                        context.costs)]


def _early_exit_grid(context: Context) -> list[dict]:
    """Proximity margins for a ranker, probabilities for a classifier (also a classifier ranking by its
    probabilities, as with binarised labels)."""
    from lightgbm_cegb.methods.early_exit import RANKING_OBJECTIVES
    ranker = lightgbm_params(context)["objective"] in RANKING_OBJECTIVES
    return [{"threshold": t} for t in ((0.5, 1.0, 2.0, 4.0) if ranker else (0.6, 0.8, 0.9, 0.95, 0.99))]


@FAMILY.method("early_exit", tasks=("binary", "multiclass", "ranking"), prepare=plain_model,
          grid=_early_exit_grid, knob=Knob("threshold", read_at_predict=True))
def _fit_early_exit(context: Context, booster, params: dict) -> list[Candidate]:
    from lightgbm_cegb.methods.early_exit import EarlyExit
    check_keys("early_exit", params, {"threshold", "every"})
    model = EarlyExit(booster, threshold=params["threshold"], every=params.get("every", 10),
                      feature_costs=context.costs)
    return [_ExitCandidate.of("early_exit", params, model)]


class _ExitCandidate(Candidate):
    """Early Exit: prediction and cost come from one pass (``EarlyExit.predict_result``). A ranker's exits depend on
    the query, so it is measured with the query sizes, a stopped document ranking below the others of its
    query (the score is minus its rank); its ``predict``/``cost`` callables are the model's own, which take the
    query sizes (``group``) a ranker needs."""

    @classmethod
    def of(cls, method: str, params: dict, model) -> _ExitCandidate:
        """The point of an EarlyExit ``model``."""
        return cls(method, params, model, model.predict, model.prediction_cost)

    def measure(self, rows: Rows, metric: Metric, *, choose: bool = False) -> tuple[float, float, float]:
        ranker = self.model.kind == "rank"
        result = self.model.predict_result(rows.X, group=rows.group if ranker else None)
        score = -result.rank.astype(np.float64) if ranker else result.prediction
        return self.quality(rows, score, metric, choose), float(result.cost.mean), float(result.cost.coupled)
