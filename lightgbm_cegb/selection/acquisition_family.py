"""The per-input acquisitions of a sweep: the adaptive and the staged acquisition, the staged ranker and regressor.
Each fits one model per sweep (or per ``policy_rounds``), and every grid point reads it with its own policy, its
result replayed from a pass the points share.

Knobs:

- ``adaptive_acquisition``: ``relative_tradeoff`` r of ``AdaptiveAcquisitionClassifier`` (tradeoff = r x its
  first decision's best gain per unit of cost, above which nothing is bought; ``tradeoff`` the raw value),
  ``max_cost`` (a per-row cap; default none), ``gain`` ("accuracy" or "entropy") and ``policy_rounds`` (0 or 1,
  the classifier's); one classifier per ``policy_rounds`` is fitted in a sweep (early stopped on the validation
  rows, in the process that first needs it) and every point reads it with its own policy (classification).
- ``staged_acquisition``: ``relative_tradeoff`` r of ``StagedAcquisitionClassifier`` (a row stops at the first
  stage whose top class probability is at least 1 - r x (1 - the most frequent class's share); ``tradeoff`` the
  raw value), ``max_cost`` (a per-row cap; default none) and ``class_weight`` (for a metric that weighs the classes
  equally, the grid has points of both None and "balanced": the validation rows choose) and ``order`` (the units'
  order, by importance or by a subset search: the grid has both, ``STAGED_ORDERS``); one model per ``class_weight``
  and ``order`` is fitted in a sweep (early stopped on the validation rows) and every point reads it with its own
  exit rule (classification).
- ``staged_acquisition_ranker``: ``tradeoff`` of ``StagedAcquisitionRanker`` (the share of a query's documents at a
  stage that each cut stops, or with ``cut="margin"`` about the share of the eventual top documents it may lose:
  ``CASCADE_TRADEOFFS`` and ``CASCADE_MARGINS``), ``top_k`` (the documents per query that go on at every cut),
  ``max_cost`` (a per-document cap), ``order`` (as the classifier's) and ``stage_models`` (each stage its own
  ranker, or trees added to the stage below's scores: ``CASCADE_STAGE_MODELS``; where split or tree costs price a
  model's evaluation, also continued stages of ``CASCADE_SMALL_LEAVES`` leaves, ``num_leaves``); one model per order
  and kind is fitted in a sweep (each stage's ranker early stopped on the validation queries) and every point reads
  it with its own cuts (ranking).
- ``staged_acquisition_regressor``: ``relative_tradeoff`` r of ``StagedAcquisitionRegressor`` (a row stops at the
  first stage whose gap model predicts its prediction within r x stage 0's predicted gap of the last stage's;
  ``tradeoff`` the raw value, in units of the targets' standard deviation) and ``max_cost``; one model is fitted in
  a sweep (early stopped, and its gap models learned, on the validation rows) and every point reads it
  (regression).
"""

from __future__ import annotations

import copy
import logging
import warnings
from contextlib import contextmanager
from functools import partial

import numpy as np
import scipy.sparse

from lightgbm_cegb.core.errors import NothingToTradeOff, RoundsWarning
from lightgbm_cegb.selection.metrics import Metric
from lightgbm_cegb.selection.points import (
    check_keys,
    own_cost,
    prediction,
    scaled_knob,
)
from lightgbm_cegb.selection.registry import Candidate, Context, Family, Knob, NeedsFit, Rows

LOG = logging.getLogger("lightgbm_cegb.selection")

#: this module's methods, registered by the package (``lightgbm_cegb.selection``)
FAMILY = Family()


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
    """The price of each purchase a per-row acquisition can make on the sweep's columns (``FeatureCosts.units``) that
    can tell two training rows apart: a unit whose every column holds one value (or is missing) in every training row
    is left out, as every model leaves it out (the synthetic Yahoo! set's 181 ids that never occur, priced 10,000
    each, put every cap of a share of all the prices above the price of every useful unit)."""
    varying = _varying_columns(context.train.X)
    return [price for _, columns, price in context.costs.units(len(varying)) if varying[list(columns)].any()]


def _varying_columns(X) -> np.ndarray:
    """Per column of X (array, scipy sparse matrix or DataFrame), whether it holds two values or more (a missing
    value counts as one; a sparse matrix's absent entries are zeros)."""
    if hasattr(X, "nunique"):
        return X.nunique(dropna=False).to_numpy() > 1
    if scipy.sparse.issparse(X):
        X = X.tocsc()
        stored = np.diff(X.indptr)
        varying = np.zeros(X.shape[1], dtype=bool)
        some = stored > 0
        if some.any():
            starts = X.indptr[:-1][some]
            low, high = np.fmin.reduceat(X.data, starts), np.fmax.reduceat(X.data, starts)  # NaN only if all are
            nan = np.add.reduceat(np.isnan(X.data), starts)
            zeros_too = stored[some] < X.shape[0]
            varying[some] = (high > low) | ((nan > 0) & (nan < stored[some])) | \
                (zeros_too & ((low != 0) | (high != 0)))
        return varying
    X = np.asarray(X, dtype=np.float64)
    nan = np.isnan(X)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-missing column's min and max
        spread = np.nanmax(X, axis=0) > np.nanmin(X, axis=0)
    return spread | (nan.any(axis=0) & ~nan.all(axis=0))


def _acquisition_grid(context: Context) -> list[dict]:
    total = sum(_unit_prices(context))
    policies = [{"relative_tradeoff": r} for r in ACQUISITION_RELATIVE_TRADEOFFS] + \
        [{"relative_tradeoff": 0.0, "max_cost": round(f * total, 6)} for f in ACQUISITION_CAPS if total > 0] + \
        [{"relative_tradeoff": r, "gain": "entropy"} for r in ACQUISITION_ENTROPY_TRADEOFFS]
    return [{**policy, "policy_rounds": rounds} for rounds in ACQUISITION_POLICY_ROUNDS for policy in policies]


class _Traces:
    """Recorded policy runs, one per (classifier, gain, cap) on the rows measured: every tradeoff of a point's grid
    is answered from it (``PolicyRun.result``, equal to its own run to the bit) instead of a run per point. A run is
    recorded at the lowest tradeoff its points were planned with (``floors``; a run at tradeoff 0 of the entropy
    gain buys most units of every row: on MNIST's 1,120 pixels 702 a row and 37 s, where the grid's lowest, 0.002 x
    its first value, buys 63) and again lower when a point asks for less. Shared by a sweep's points, which run in
    its process whatever its ``n_jobs`` (``Method.shares_fits``); the runs of one set of rows at a time are kept
    (validation, then test: a run holds arrays of rows x units); pickled empty (a frame keeps its models, not the
    runs)."""

    def __init__(self) -> None:
        self.rows = None  # the X the runs are of, compared by identity (kept alive with them)
        self.runs: dict[tuple, object] = {}  # (classifier's id, gain, cap) -> run
        self.floors: dict[tuple, float] = {}  # (classifier's id, gain, cap) -> the lowest tradeoff planned

    def __reduce__(self):
        return (_Traces, ())

    @staticmethod
    def key(model) -> tuple:
        return id(model.classifier_), model.gain, model.max_cost

    def plan(self, model, tradeoff: float) -> None:
        """A point of ``model``'s classifier, gain and cap will ask for ``tradeoff``."""
        key = self.key(model)
        self.floors[key] = min(self.floors.get(key, np.inf), tradeoff)

    def result(self, model, X):
        if self.rows is not X:
            self.rows, self.runs = X, {}
        key, tradeoff = self.key(model), float(model.tradeoff)
        run = self.runs.get(key)  # the classifier stays alive with the candidates: its id is not reused
        if run is None or run.model.tradeoff > tradeoff:
            at = min(self.floors.get(key, tradeoff), tradeoff)
            run = self.runs[key] = copy.copy(model).set_params(tradeoff=at).trace(X)
        return run.result(tradeoff)


def _acquisition_prepare(context: Context) -> dict:
    """{"classifiers": {policy_rounds: its AdaptiveAcquisitionClassifier}, fitted when a point first needs it (early
    stopped on the validation rows; to the most rounds a batch asks for, keeping each round's classifier on the
    way), "traces": the points' shared runs, "rounds": the most rounds planned, "lowest": the lowest
    relative_tradeoff planned per (policy_rounds, gain, cap)}. NothingToTradeOff when every unit is free (its policy
    would buy whatever helps)."""
    if not any(price > 0 for price in _unit_prices(context)):
        raise NothingToTradeOff("no feature or group has a lazy or coupled cost: every purchase is free, there is "
                                "nothing to trade off")
    return {"classifiers": {}, "traces": _Traces(), "rounds": 0, "lowest": {}}


def _setting(params: dict) -> tuple:
    """What a point's run is shared by: (policy_rounds, gain, max_cost)."""
    return params.get("policy_rounds", 0), params.get("gain", "accuracy"), params.get("max_cost")


def _acquisition_plan(context: Context, state: dict, points: list[dict]) -> None:
    """The most policy_rounds a batch asks for (fitting that classifier passes through the others'), and the lowest
    relative_tradeoff of each setting (its run is recorded there)."""
    state["rounds"] = max([state["rounds"]] + [point.get("policy_rounds", 0) for point in points])
    lowest = state["lowest"]
    for point in points:
        if "relative_tradeoff" in point:
            setting = _setting(point)
            lowest[setting] = min(lowest.get(setting, np.inf), float(point["relative_tradeoff"]))


def _acquisition_classifier(context: Context, state: dict, policy_rounds: int):
    """The sweep's adaptive acquisition classifier of ``policy_rounds``, fitted (with every round's up to the most
    planned) when a point first needs it; NeedsFit where the context allows no fit. Its trainings end where the
    method's allowance does (``Context.cut_callbacks``, one limit for all of them): a round whose training was cut, or
    after which the time left is less than it took (the next round's states and classifier take longer: more rows),
    is the last fitted (``state["cut"]``), and a point asking for a later round raises NeedsFit (not fitted)."""
    from lightgbm_cegb.methods.acquisition import AdaptiveAcquisitionClassifier, auto_masks
    fitted = state["classifiers"]
    if policy_rounds not in fitted:
        if not context.fits or state.get("cut"):
            raise NeedsFit
        # screened: the copies the classifier makes on the sweep's every row (a subsample's "auto" would make more)
        masks = "auto" if context.screen_of is None else auto_masks(context.screen_of, np.shape(context.train.X)[1])
        rounds = max(policy_rounds, state["rounds"])
        model = AdaptiveAcquisitionClassifier(feature_costs=context.costs, random_state=0, policy_rounds=rounds,
                                              n_jobs=context.params.get("num_threads") or None, n_masks=masks,
                                              **_acquisition_capacity(context))
        callbacks = context.cut_callbacks()
        limit, begun = next(iter(callbacks), None), 0.0
        with _rounds_capped(state):
            for done in model.fit_rounds(context.train.X, context.train.y, (context.valid.X, context.valid.y),
                                         callbacks):
                # each round's classifier, as fit gives it
                fitted.setdefault(done, copy.copy(model).set_params(policy_rounds=done))
                if limit is not None and done < rounds:
                    now = limit.elapsed()  # the next round (more rows) takes longer than this one: does it fit?
                    if context.cut or 2 * now - begun > limit.seconds:
                        state["cut"] = True
                        break
                    begun = now
    if policy_rounds not in fitted:  # a training before it was cut at the allowance
        raise NeedsFit
    return fitted[policy_rounds]


#: metrics that weigh the classes equally: the adaptive acquisition's classifier is trained with balanced class
#: weights for them (on a 10%-positive set, unweighted, no single purchase changes the prediction of a row that knows
#: nothing, and its accuracy gain buys nothing); the staged acquisition's grid has both (``_staged_weights``)
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


@FAMILY.method("adaptive_acquisition", tasks=("binary", "multiclass"), prepare=_acquisition_prepare,
          plan=_acquisition_plan, grid=_acquisition_grid, shares_fits=True,
          knob=Knob("relative_tradeoff", "tradeoff", log=True, cheap_end=1.0, read_at_predict=True))
def _fit_acquisition(context: Context, state: dict, params: dict) -> list[Candidate]:
    params = dict(params)
    check_keys("adaptive_acquisition", params, {"relative_tradeoff", "tradeoff", "max_cost", "gain", "policy_rounds"})
    classifier = _acquisition_classifier(context, state, params.get("policy_rounds", 0))
    model = copy.copy(classifier).set_params(**{k: params[k] for k in ("max_cost", "gain") if k in params})
    try:
        scale = model.first_value() if "relative_tradeoff" in params else 0.0
    except NothingToTradeOff as exc:  # e.g. the accuracy gain on unweighted imbalanced classes: its points buy nothing
        LOG.info("adaptive_acquisition %s: no point (%s)", params, exc)
        return []
    tradeoff, knob = scaled_knob("adaptive_acquisition", params, "relative_tradeoff", "tradeoff", scale)
    model.set_params(tradeoff=tradeoff)  # a copy: shares the classifier and the tables
    lowest = state["lowest"].get(_setting(params))
    state["traces"].plan(model, tradeoff if lowest is None else min(tradeoff, lowest * scale))
    candidate = _AcquisitionCandidate("adaptive_acquisition", {**knob, **params}, model,
                                      partial(prediction, model, "positive" if context.task == "binary" else "proba",
                                              None), partial(own_cost, model))
    return _sharing(candidate, state["traces"], state)



def _sharing(candidate: Candidate, shared, state: dict) -> list[Candidate]:
    """``candidate`` as a point that reads what the grid's points share (``shared``: their runs or the stages'
    pass), marked capped when its state's model reached the round cap."""
    candidate.traces = shared
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


#: the staged acquisition's unit orders in a sweep (``order``): each its own model, the validation rows choose. On
#: Fashion-MNIST's four tops (16,800 training rows; validation accuracy within 3 / 6 / 10) the importance order gave
#: 0.250 / 0.798 / 0.807 (its first stage a 16x16 quadrant of price 4), the search's 0.786 / 0.791 / 0.804; on HIGGS
#: (4,500 rows) within 17 the importance order 0.655, the search's 0.583 (it fills the cheap levels first)
STAGED_ORDERS = ("importance", "search")


def _caps(context: Context, fractions: tuple[float, ...] = STAGED_CAPS) -> list[dict]:
    """The staged models' caps: none, and each of ``fractions`` of the price of every unit that can tell training rows
    apart (``_unit_prices``)."""
    total = sum(_unit_prices(context))
    return [{}] + [{"max_cost": round(f * total, 6)} for f in fractions if total > 0]


#: ``relative_tradeoff`` values of the staged regressor's default grid (a row goes on while its predicted gap is above
#: r x stage 0's): 0 and a factor of 2^(1/8) apart from 0.01 to 0.9, each read when predicting (no fit). A row's cost
#: is steep in r: with the classifier's grid, on diamonds (split 0) it jumped from 9.2 (r = 0.2) to 22.7 (0.15), no
#: point between a quarter and a half of plain LightGBM's cost; a factor of 2^(1/4) still left 6.1 (0.226) to 10.2
#: (0.190), below and above a quarter
STAGED_REGRESSOR_TRADEOFFS = (0.0, *(round(0.01 * 2 ** (i / 8), 4) for i in range(53)))


def _ladder_grid(context: Context, tradeoffs: tuple[float, ...] = STAGED_RELATIVE_TRADEOFFS) -> list[dict]:
    """The staged models' points: each relative tradeoff under each cap (and class weight)."""
    return [{"relative_tradeoff": r, **cap, **weight}
            for weight in _staged_weights(context) for cap in _caps(context) for r in tradeoffs]


def _staged_grid(context: Context) -> list[dict]:
    """The staged classifier's points: the ladder's, for each unit order."""
    return [{**point, "order": order} for order in STAGED_ORDERS for point in _ladder_grid(context)]


def _staged_weights(context: Context) -> list[dict]:
    """The class weights of the staged acquisition's grid: for a metric of BALANCED_METRICS both unweighted and
    balanced stages (measured on Fashion-MNIST's shirts, 10% positive, F1: unweighted 0.708 with every stage,
    balanced 0.694; the validation rows choose), else its capacity's (none)."""
    return [{"class_weight": None}, {"class_weight": "balanced"}] if context.metric.name in BALANCED_METRICS else [{}]


class _StagePasses:
    """One pass of a fitted staged acquisition's stage classifiers over a set of rows (every stage's probabilities
    and evaluation costs): each grid point's result is replayed from it (``StagedAcquisitionClassifier.replay``),
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
            self.passes[key] = copy.copy(model).set_params(max_cost=None).stage_passes(X)
        return model.replay(*self.passes[key], *query)


def _staged_prepare(context: Context) -> dict:
    """{"models": the staged models by their kind (order, class weights, stage models), each fitted when a point
    first needs it (early stopped on the validation rows; its stages up to the largest cap planned,
    ``max_stage_cost``), "memo": the trainings their fits share (``StageMemo``), "passes": the points' shared passes,
    "ceiling": that cap}. NothingToTradeOff when every unit is free."""
    from lightgbm_cegb.methods.ladder import StageMemo
    if not any(price > 0 for price in _unit_prices(context)):
        raise NothingToTradeOff("no feature or group has a lazy or coupled cost: every purchase is free, there is "
                                "nothing to trade off")
    return {"models": {}, "memo": StageMemo(), "passes": _StagePasses(), "ceiling": 0.0}


def _staged_plan(context: Context, state: dict, points: list[dict]) -> None:
    """The largest cap a batch asks for (None: a point without one): the stages above it are not fitted."""
    for point in points:
        state["ceiling"] = _higher(state["ceiling"], point.get("max_cost"))


def _fitted_ladder(context: Context, state: dict, params: dict, fit, key=None):
    """The staged model of a sweep's state (the classifier, the ranker or the regressor) for ``key`` (the classifier's
    class weights), fitted by ``fit(max_stage_cost)`` when a point first needs it, and again when a point's cap lies
    above the stages the fitted model holds (NeedsFit where the context allows no fit); its RoundsWarnings mark the
    state capped."""
    fitted = state["models"].get(key)
    if fitted is None or fitted.max_stage_cost is not None and \
            _higher(fitted.max_stage_cost, params.get("max_cost")) != fitted.max_stage_cost:
        if not context.fits:
            raise NeedsFit
        with _rounds_capped(state):
            state["models"][key] = fit(_higher(state["ceiling"], params.get("max_cost")))
    return state["models"][key]


def _higher(a: float | None, b: float | None) -> float | None:
    """The larger of two caps, None (no cap) being the largest."""
    return None if a is None or b is None else max(a, b)


@FAMILY.method("staged_acquisition", tasks=("binary", "multiclass"), prepare=_staged_prepare, plan=_staged_plan,
          grid=_staged_grid, shares_fits=True,
          knob=Knob("relative_tradeoff", "tradeoff", cheap_end=1.0, read_at_predict=True))
def _fit_staged(context: Context, state: dict, params: dict) -> list[Candidate]:
    from lightgbm_cegb.methods.staged import StagedAcquisitionClassifier
    params = dict(params)
    check_keys("staged_acquisition", params, {"relative_tradeoff", "tradeoff", "max_cost", "class_weight", "order"})
    capacity = {**_acquisition_capacity(context), **{k: params[k] for k in ("class_weight", "order") if k in params}}
    fitted = _fitted_ladder(context, state, params, lambda ceiling: StagedAcquisitionClassifier(
        feature_costs=context.costs, random_state=0, n_jobs=context.params.get("num_threads") or None,
        max_stage_cost=ceiling, **capacity).fit(
        context.train.X, context.train.y, eval_set=(context.valid.X, context.valid.y), memo=state["memo"]),
        key=repr((capacity["class_weight"], capacity.get("order", "importance"))))
    return _sharing(staged_candidate(fitted, params, context.task), state["passes"], state)


def staged_candidate(fitted, params: dict, task: str) -> Candidate:
    """The staged acquisition's point ``params`` (its ``relative_tradeoff`` or ``tradeoff``, and ``max_cost``) of the
    fitted StagedAcquisitionClassifier ``fitted`` (StagedAcquisitionRegressor where ``task`` is regression): a copy
    reading them, as a sweep's Candidate of ``task``."""
    name = "staged_acquisition_regressor" if task == "regression" else "staged_acquisition"
    params = dict(params)
    scale = fitted.first_value() if "relative_tradeoff" in params else 0.0
    tradeoff, knob = scaled_knob(name, params, "relative_tradeoff", "tradeoff", scale)
    model = copy.copy(fitted).set_params(tradeoff=tradeoff if task == "regression" else min(tradeoff, 1.0),
                                         max_cost=params.get("max_cost"))
    output = {"binary": "positive", "regression": "predict"}.get(task, "proba")
    return _AcquisitionCandidate(name, {**knob, **params}, model, partial(prediction, model, output, None),
                                 partial(own_cost, model))


@FAMILY.method("staged_acquisition_regressor", tasks=("regression",), prepare=_staged_prepare, shares_fits=True,
          grid=partial(_ladder_grid, tradeoffs=STAGED_REGRESSOR_TRADEOFFS),
          knob=Knob("relative_tradeoff", "tradeoff", cheap_end=1.0, read_at_predict=True))
def _fit_staged_regressor(context: Context, state: dict, params: dict) -> list[Candidate]:
    from lightgbm_cegb.methods.staged_regressor import StagedAcquisitionRegressor
    params = dict(params)
    check_keys("staged_acquisition_regressor", params, {"relative_tradeoff", "tradeoff", "max_cost"})
    fitted = _fitted_ladder(context, state, params, lambda _: StagedAcquisitionRegressor(  # every stage: no ceiling
        feature_costs=context.costs, random_state=0, n_jobs=context.params.get("num_threads") or None,
        n_estimators=context.num_boost_round, early_stopping_rounds=context.early_stopping_rounds).fit(
        context.train.X, context.train.y, eval_set=(context.valid.X, context.valid.y)))
    return _sharing(staged_candidate(fitted, params, "regression"), state["passes"], state)


#: ``tradeoff`` values of the staged acquisition ranker's default grid: the share of a query's documents at a stage
#: that each cut stops (0: every document goes to the last stage; 1: only ``top_k``)
CASCADE_TRADEOFFS = (0.0, 0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
#: ``tradeoff`` values of its grid's margin cuts (``cut="margin"``): about the share of the documents that end in the
#: last stage's top ``eval_at`` that each cut may stop. On the synthetic Yahoo! set (2,000 queries, one split, setting
#: (i), continued stages of 7 leaves, the validation queries' halves learning the margins and measuring in turn) a
#: share cut of 0.5 with top_k 5 lost a quarter of the AP@5 (0.86 -> 0.63 within 0.1 x plain LightGBM's cost: the
#: first cuts, on stages of a few cheap features, stop the relevant documents), where a margin cut of 0.02 kept 0.869
#: at 584 per document against 0.879 at 1,236 without a cut. In the sweep of that split (its 72 validation Pareto points
#: 34 margin cuts) the best point within 0.25 x is a margin cut (test AP@5 0.8745), within 0.1 x a share cut of top_k
#: 10 (0.847): level with CEGB's sweep (0.8765, 0.851)
CASCADE_MARGINS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2)
#: ``top_k`` values of its grid: the documents of a query that go on at every cut
CASCADE_TOP_K = (0, 1, 3, 10)
#: its caps (``max_cost``): fractions of the price of every unit, a factor of sqrt(2) apart (STAGED_CAPS' factor of 2
#: at the cheap end left the synthetic Yahoo! set's best cascade within a tenth of plain LightGBM's cost at a stage of
#: price 287 where the next cap's cost 647: a cut after each of a ladder's many cheap stages stops too many documents
#: to fill the gap)
CASCADE_CAPS = tuple(round(0.01 * 2 ** (i / 2), 4) for i in range(13))


#: the staged acquisition ranker's kinds of stage models in a sweep (``stage_models``): each its own model, the
#: validation queries choose. On the synthetic Yahoo! set (2,000 queries, one split) with split costs (the CEGB paper's
#: setting (i)) 30 of the 35 validation Pareto points are continued models' (separate stages' split costs add up to
#: more than plain LightGBM's); with lazy costs only (setting (ii)) 30 of 35 are separate models'.
CASCADE_STAGE_MODELS = ("separate", "continued")
#: the leaves of the ranker's small continued stages, which join its grid where evaluating a model costs something
#: (split or tree costs): each stage a few small trees on the scores below. On the synthetic Yahoo! set (2,000 queries,
#: one split, setting (i)) the best test AP@5 within 0.1 and 0.25 x plain LightGBM's cost went from 0.819 and 0.852
#: (31 leaves, "auto") to 0.847 and 0.878, against CEGB's sweep's 0.851 and 0.881 (with only the small kind: 3 leaves
#: 0.840 and 0.868, 15 leaves 0.842 and 0.867)
CASCADE_SMALL_LEAVES = 7


def _cascade_grid(context: Context) -> list[dict]:
    """The ranker's points: each tradeoff of each cut (share: CASCADE_TRADEOFFS, margin: CASCADE_MARGINS) and top_k
    under each cap, for each unit order (STAGED_ORDERS) and each kind of stage models (``_cascade_kinds``)."""
    cuts = [("share", t) for t in CASCADE_TRADEOFFS] + [("margin", t) for t in CASCADE_MARGINS]
    return [{"tradeoff": t, "cut": cut, "top_k": k, **cap, "order": order, **kind}
            for order in STAGED_ORDERS for kind in _cascade_kinds(context) for cap in _caps(context, CASCADE_CAPS)
            for k in CASCADE_TOP_K for cut, t in cuts]


def _cascade_kinds(context: Context) -> list[dict]:
    """The ranker's kinds of stage models: each of CASCADE_STAGE_MODELS, and continued stages of CASCADE_SMALL_LEAVES
    leaves where the costs price a model's evaluation (a split or a tree costs something)."""
    kinds = [{"stage_models": models} for models in CASCADE_STAGE_MODELS]
    split = context.costs.arrays(context.train.X.shape[1])[2]
    if np.any(split > 0) or context.costs.tree > 0:
        kinds.append({"stage_models": "continued", "num_leaves": CASCADE_SMALL_LEAVES})
    return kinds


class _CascadeCandidate(Candidate):
    """The staged acquisition ranker: its scores and costs on a set of queries, replayed from the stages' pass
    (``_StagePasses``), the same as ``predict_result`` to the bit; ``predict`` and ``cost`` take the rows' ``group``
    (None: one query)."""

    traces: _StagePasses | None = None

    def measure(self, rows: Rows, metric: Metric, *, choose: bool = False) -> tuple[float, float, float]:
        result = self.model.predict_result(rows.X, group=rows.group) if self.traces is None else \
            self.traces.result(self.model, rows.X, rows.group)
        return self.quality(rows, result.score, metric, choose), float(result.cost.mean), float(result.cost.coupled)


def cascade_candidate(fitted, params: dict) -> Candidate:
    """The staged ranker's point ``params`` (``tradeoff``, ``cut``, ``top_k``, ``max_cost``; the fit's own settings
    beside them) of the fitted StagedAcquisitionRanker ``fitted``: a copy reading them, as a sweep's Candidate."""
    model = copy.copy(fitted).set_params(**{"max_cost": None, **params})
    return _CascadeCandidate("staged_acquisition_ranker", dict(params), model, model.predict, model.prediction_cost)


@FAMILY.method("staged_acquisition_ranker", tasks=("ranking",), prepare=_staged_prepare, plan=_staged_plan,
          grid=_cascade_grid, shares_fits=True, knob=Knob("tradeoff", cheap_end=1.0, read_at_predict=True))
def _fit_cascade(context: Context, state: dict, params: dict) -> list[Candidate]:
    from lightgbm_cegb.methods.cascade import StagedAcquisitionRanker
    params = dict(params)
    check_keys("staged_acquisition_ranker", params, {"tradeoff", "cut", "top_k", "max_cost", "order", "stage_models",
                                                     "num_leaves"})
    kind = {"order": params.get("order", "importance"), "stage_models": params.get("stage_models", "separate"),
            "num_leaves": params.get("num_leaves", "auto")}
    fitted = _fitted_ladder(context, state, params, lambda ceiling: StagedAcquisitionRanker(
        feature_costs=context.costs, random_state=0, n_jobs=context.params.get("num_threads") or None,
        max_stage_cost=ceiling, n_estimators=context.num_boost_round,
        early_stopping_rounds=context.early_stopping_rounds, **kind).fit(
        context.train.X, context.train.y, group=context.train.group, eval_set=[(context.valid.X, context.valid.y)],
        eval_group=[context.valid.group], memo=state["memo"]), key=repr(kind))
    return _sharing(cascade_candidate(fitted, params), state["passes"], state)
