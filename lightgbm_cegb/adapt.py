"""Adaptive gating: ADAPT-GBRT (Nan and Saligrama, NIPS 2017; SEEDS.md section 6).

An accurate, costly model f0 that the user already has is kept; a cheap gate g and a cheap model f1 are
learnt so that g sends the easy rows to f1 and only the hard ones to f0. ``fit`` alternates the paper's two
steps:

1. with g and f1 fixed, the routing weights ``q_i`` (the probability that row i goes to f0) minimise
   ``sum_i (1 - q_i) A_i + q_i B_i - H(q_i)`` with ``mean(q) = p_full`` (:func:`routing_weights`), where
   ``A_i = loss(f1(x_i), y_i) + log(1 + exp(g(x_i)))`` and ``B_i = -log p_f0(y_i | x_i) + log(1 + exp(-g(x_i)))``:
   ``q_i = 1 / (1 + exp(B_i - A_i + beta))`` with ``beta`` found by bisection;
2. with q fixed, g and f1 grow by boosting, tree after tree, in turn: f1 on the log-loss weighted by
   ``1 - q_i``, g on the cross-entropy to the soft labels ``q_i`` (first order, as Greedy Miser), a split on a
   feature (or group) that neither g nor f1 has used yet costing ``tradeoff * c``. The two boosters share one
   record of the features used: after every tree the bought sets of their CEGB ledgers (patch 0006) are
   merged, so each sees what the other bought.

Initialisation as the paper: g = 0 (plus the constant logit(p_full)), f1 a Greedy Miser model. A row goes to
f0 when g's score passes ``gate_threshold_``, the threshold that sends the share of training rows closest to
``p_full`` (the paper's ``g(x) > 0`` sends far fewer when most rows' q stays below 1/2). Routing, f1's scores
and the prediction cost run in one Cython pass (``_engine.gated``); the cost is exact
(:meth:`AdaptGBRT.prediction_cost`): the gate's features, then those of the model the row goes to, each (row,
feature or group) paid once across the models, in one per-row cost state. ADAPT-LIN, the linear version, is
:mod:`lightgbm_cegb.adapt_lin`; both estimators share :class:`_Adapt`.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path

import lightgbm as lgb
import numpy as np
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ._engine import gated
from ._io import write_atomically
from .accounting import CostReport
from .cost_state import CostState
from .costs import FeatureCosts, resolve_costs
from .errors import CEGBError, check_number
from .forest import Forest
from .greedy_miser import GreedyMiserClassifier, class_codes, log_loss_per_row, miser_params, proba_from_raw
from .ledger import CEGBState
from .models import to_forest
from .parallel import resolve_n_jobs

__all__ = ["AdaptGBRT", "routing_weights"]

GATE_LIMIT = 30.0  # |the gate's starting score|: logit(p_full), within +-30 (p_full 0 and 1 at the ends)


def routing_weights(A: np.ndarray, B: np.ndarray, p_full: float, *, tol: float = 1e-12) -> np.ndarray:
    """The q-step: ``q`` minimising ``sum_i (1 - q_i) A_i + q_i B_i - H(q_i)`` subject to ``mean(q) = p_full``
    (H the binary entropy): ``q_i = 1 / (1 + exp(B_i - A_i + beta))``, ``beta`` by bisection (mean(q) falls as
    beta grows). ``p_full`` 0 and 1 give q = 0 and q = 1."""
    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    if p_full <= 0.0:
        return np.zeros_like(A)
    if p_full >= 1.0:
        return np.ones_like(A)
    d = B - A

    def mean_q(beta: float) -> float:
        return float(expit(-(d + beta)).mean())

    lo, hi = -1.0, 1.0
    while mean_q(lo) < p_full:
        lo *= 2
    while mean_q(hi) > p_full:
        hi *= 2
    while hi - lo > tol * max(1.0, abs(lo), abs(hi)):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mean_q(mid) > p_full else (lo, mid)
    return expit(-(d + (lo + hi) / 2))


class _Adapt(ClassifierMixin, BaseEstimator):
    """What ADAPT's estimators share: f0 and its classes, the cost model, the gate's threshold, the cost of the
    rows sent to f0, the prediction and the files' cost manifest."""

    _finite_X = False  # the linear models need finite values
    _knob = "tradeoff"  # the parameter that keeps the gate from reading features

    def _check_common(self) -> None:
        if not isinstance(self.f0, lgb.Booster) and not hasattr(self.f0, "predict_proba"):
            raise CEGBError(f"f0 should be a fitted classifier with predict_proba or a LightGBM classification "
                            f"Booster, got {type(self.f0).__name__}")
        check_number(self.p_full, "p_full", 0.0, 1.0)
        check_number(self.n_rounds, "n_rounds", 1, math.inf, integer=True)
        if self.f0_usage is not None and not callable(self.f0_usage):
            raise CEGBError(f"f0_usage should be a callable X -> bool array (rows, features), got "
                            f"{type(self.f0_usage).__name__}")

    def _f0_proba(self, X) -> np.ndarray:
        if isinstance(self.f0, lgb.Booster):  # binary: the probability of class 1; multiclass: one per class
            proba = np.asarray(self.f0.predict(X), dtype=np.float64)
            proba = np.column_stack([1 - proba, proba]) if proba.ndim == 1 else proba
        else:
            proba = np.asarray(self.f0.predict_proba(X), dtype=np.float64)
        if proba.ndim != 2 or proba.shape != (X.shape[0], len(self.classes_)):
            raise CEGBError(f"f0.predict_proba should give ({X.shape[0]}, {len(self.classes_)}) probabilities "
                            f"(one per class {self.classes_.tolist()}), got shape {proba.shape}")
        return proba

    def _start(self, X, y) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Validate (X, y) against f0; set classes_, costs_. Returns (X, the class codes of y, f0's log-loss
        per row)."""
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_all_finite=self._finite_X or "allow-nan",
                             ensure_min_samples=2)
        check_classification_targets(y)
        if isinstance(self.f0, lgb.Booster):  # classes 0 .. K - 1
            classes, f0_features = np.arange(max(self.f0.num_model_per_iteration(), 2)), self.f0.num_feature()
        else:
            classes, f0_features = getattr(self.f0, "classes_", None), getattr(self.f0, "n_features_in_", None)
        self.classes_ = np.unique(y) if classes is None else np.asarray(classes)
        codes, unknown = class_codes(self.classes_, y)
        if unknown.size:
            raise CEGBError(f"y holds classes {unknown[:10].tolist()} that f0 was not trained on (its classes: "
                            f"{self.classes_.tolist()})")
        if len(self.classes_) < 2:
            raise CEGBError(f"y should hold at least two classes, got {self.classes_.tolist()}")
        if f0_features is not None and f0_features != X.shape[1]:
            raise CEGBError(f"f0 was fitted on {f0_features} features, X has {X.shape[1]}")
        names = [str(n) for n in getattr(self, "feature_names_in_", [])] or None
        self.costs_ = resolve_costs(FeatureCosts(lazy=np.ones(X.shape[1])) if self.costs is None else self.costs,
                                    X.shape[1], names)
        f0_loss = -np.log(np.clip(self._f0_proba(X)[np.arange(len(y)), codes], 1e-15, 1.0))
        return X, codes, f0_loss

    @property
    def _num_scores(self) -> int:
        """Raw scores per row of f1: one logit for two classes, else one per class."""
        return len(self.classes_) if len(self.classes_) > 2 else 1

    def _set_threshold(self, score: np.ndarray) -> None:
        """The gate's threshold from its scores on the training rows: the share above it as close as ties allow
        to p_full (the soft q of most rows stays below 1/2, so the paper's rule g > 0 would send far fewer)."""
        self.gate_threshold_ = _threshold_for(score, self.p_full)
        self.train_fraction_to_f0_ = float(np.mean(score > self.gate_threshold_))
        if abs(self.train_fraction_to_f0_ - self.p_full) > 0.05:
            warnings.warn(f"{type(self).__name__}: the gate's scores take too few values to send "
                          f"p_full={self.p_full:g} of the training rows to f0: {self.train_fraction_to_f0_:.3f} go (a gate that reads no "
                          f"feature sends none); a smaller {self._knob} lets the gate tell rows apart", stacklevel=3)

    def _validated(self, X) -> np.ndarray:
        check_is_fitted(self, "gate_threshold_")
        return validate_data(self, X, reset=False, dtype=np.float64, ensure_all_finite=self._finite_X or "allow-nan")

    def _forest(self, model) -> Forest:
        """``model`` (a gate, f1 or f0) as a Forest, read once per model object."""
        cache = self.__dict__.setdefault("_forest_cache", {})
        if cache.get(id(model), (None,))[0] is not model:
            cache[id(model)] = (model, to_forest(model))
        return cache[id(model)][1]

    def _f0_forest(self) -> Forest | None:
        """f0 as a Forest for its exact cost, or None when ``f0_usage`` gives it."""
        if self.f0_usage is not None:
            return None
        try:
            return self._forest(self.f0)
        except CEGBError as exc:
            raise CEGBError(f"f0: {exc}; for a model that is not a tree ensemble give f0_usage") from None

    def _charge_f0_usage(self, state: CostState, X: np.ndarray, rows: np.ndarray) -> None:
        """The rows ``rows`` (sent to f0) pay the features ``f0_usage`` says f0 reads for them."""
        if self.f0_usage is None or not rows.size:
            return
        need = np.asarray(self.f0_usage(X[rows]), dtype=bool)
        if need.shape != (rows.size, self.n_features_in_):
            raise CEGBError(f"f0_usage should give a bool array of shape ({rows.size}, {self.n_features_in_}), "
                            f"got {need.shape}")
        for feature in np.flatnonzero(need.any(axis=0)):
            state.pay(int(feature), rows[need[:, feature]])

    def predict(self, X) -> np.ndarray:
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def _write_manifest(self, folder: Path, **fields) -> None:
        """folder/manifest.json: the format, classes, p_full, the gate's threshold, the cost model and
        ``fields`` (the estimator's own parameters)."""
        manifest = {"format": f"lightgbm_cegb.{type(self).__name__}", "version": 1, "classes": self.classes_.tolist(),
                    "n_features_in": int(self.n_features_in_), "p_full": self.p_full,
                    "gate_threshold": self.gate_threshold_, "costs": self.costs_.to_dict(int(self.n_features_in_)),
                    **fields}
        write_atomically(folder / "manifest.json", lambda tmp: Path(tmp).write_text(json.dumps(manifest, indent=1)))

    @classmethod
    def _from_manifest(cls, folder: Path, f0, f0_usage, keys: tuple[str, ...]):
        """(the model with its fitted fields from folder/manifest.json and the parameters ``keys`` it holds,
        the manifest)."""
        manifest = json.loads((folder / "manifest.json").read_text())
        if manifest.get("format") != f"lightgbm_cegb.{cls.__name__}" or manifest.get("version") != 1:
            raise CEGBError(f"{folder}: not an {cls.__name__} model (manifest format {manifest.get('format')!r}, "
                            f"version {manifest.get('version')!r})")
        costs = FeatureCosts.from_dict(manifest["costs"])
        model = cls(f0, p_full=manifest["p_full"], costs=costs, f0_usage=f0_usage,
                    **{k: manifest[k] for k in keys})
        model.classes_ = np.asarray(manifest["classes"])
        model.n_features_in_ = manifest["n_features_in"]
        model.costs_ = costs
        model.gate_threshold_ = float(manifest["gate_threshold"])
        return model, manifest


class AdaptGBRT(_Adapt):
    """ADAPT-GBRT: a gate g and a cheap model f1 in front of a costly classifier f0.

    Parameters
    ----------
    f0 : fitted classifier with ``predict_proba``, or a LightGBM Booster (binary or multiclass objective)
        The accurate model (binary or multiclass), fitted on the same columns and classes. Its prediction
        cost: exact when ``to_forest`` reads it (LightGBM, scikit-learn trees); otherwise give ``f0_usage``.
    p_full : float in [0, 1]
        The fraction of training rows the q-step sends to f0.
    tradeoff : float, default 0.0
        gamma: a split of g or f1 on a feature neither has used yet costs ``tradeoff * c``.
    costs : FeatureCosts, lazy costs per column or by name, optional
        The cost model (default: every feature costs 1). A feature's ``c`` in training is its lazy plus
        coupled cost.
    n_rounds : int, default 5
        Alternations of the q-step and the growth of g and f1.
    trees_per_round : int, default 20
        Trees added to each of g and f1 per round (per class for f1 with more than two classes).
    max_depth, learning_rate, min_samples_leaf : as Greedy Miser's (depth-wise trees, 2 ** max_depth leaves)
    f0_usage : callable, optional
        For an f0 that ``to_forest`` cannot read: ``f0_usage(X)`` -> bool array (rows, features), the
        features f0 needs for each row.
    n_jobs : int, optional
        Threads.
    """

    def __init__(self, f0=None, *, p_full: float = 0.3, tradeoff: float = 0.0, costs=None, n_rounds: int = 5,
                 trees_per_round: int = 20, max_depth: int = 4, learning_rate: float = 0.1, min_samples_leaf: int = 1,
                 f0_usage=None, n_jobs: int | None = None) -> None:
        self.f0 = f0
        self.p_full = p_full
        self.tradeoff = tradeoff
        self.costs = costs
        self.n_rounds = n_rounds
        self.trees_per_round = trees_per_round
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.min_samples_leaf = min_samples_leaf
        self.f0_usage = f0_usage
        self.n_jobs = n_jobs

    # ------------------------------------------------------------------------------------- fitting

    def _check_params(self) -> None:
        self._check_common()
        check_number(self.tradeoff, "tradeoff", 0.0, math.inf)
        check_number(self.trees_per_round, "trees_per_round", 1, math.inf, integer=True)
        check_number(self.max_depth, "max_depth", 1, 30, integer=True)
        check_number(self.min_samples_leaf, "min_samples_leaf", 1, math.inf, integer=True)
        check_number(self.learning_rate, "learning_rate", 0.0, low_open=True)

    def fit(self, X, y) -> AdaptGBRT:
        """Learn g and f1 on (X, y) around the fitted f0."""
        self._check_params()
        X, codes, f0_loss = self._start(X, y)
        n, k = len(codes), self._num_scores
        weight_f1 = np.ones(n)  # 1 - q, read by f1's objective
        target_g = np.zeros(n)  # q, read by g's objective

        def f1_objective(score, _):
            gradient = GreedyMiserClassifier._gradient(score.reshape(n, k) if k > 1 else score, codes)
            w = weight_f1[:, None] if k > 1 else weight_f1
            return gradient * w, np.broadcast_to(w, gradient.shape).copy()

        def g_objective(score, _):
            return expit(score) - target_g, np.ones(n)

        params = miser_params(self.costs_, self.tradeoff, X.shape[1], k, max_depth=self.max_depth,
                              learning_rate=self.learning_rate, min_samples_leaf=self.min_samples_leaf,
                              n_jobs=self.n_jobs)
        f1 = lgb.Booster({**params, "objective": "none"}, lgb.Dataset(X, codes.astype(np.float64), free_raw_data=False))
        # g's score starts at logit(p_full), the mean of its targets (the paper's g = 0, up to that constant)
        offset = float(np.clip(np.log(self.p_full) - np.log1p(-self.p_full), -GATE_LIMIT, GATE_LIMIT)) \
            if 0 < self.p_full < 1 else math.copysign(GATE_LIMIT, self.p_full - 0.5)
        g = lgb.Booster({**params, "num_class": 1, "objective": "none"},
                        lgb.Dataset(X, np.zeros(n), init_score=np.full(n, offset), free_raw_data=False))
        for _ in range(self.trees_per_round):  # f1 starts as Greedy Miser (every row's weight 1)
            f1.update(fobj=f1_objective)
        for _ in range(self.n_rounds if self.p_full < 1 else 0):  # at 1, f0 takes every row
            f1_score = f1.predict(X, raw_score=True)
            g_score = offset + (g.predict(X, raw_score=True) if g.current_iteration() else 0.0)
            f1_loss = log_loss_per_row(f1_score, codes)
            A = f1_loss + np.logaddexp(0.0, g_score)
            B = f0_loss + np.logaddexp(0.0, -g_score)
            q = routing_weights(A, B, self.p_full)
            weight_f1[:], target_g[:] = 1.0 - q, q
            for _ in range(self.trees_per_round):
                for booster, objective in ((f1, f1_objective), (g, g_objective)) if self.p_full > 0 else \
                        ((f1, f1_objective),):  # at 0 no row goes to f0: no gate (it would cost every row)
                    booster.update(fobj=objective)
                    if self.tradeoff > 0:
                        _share_bought(f1, g)
        self.gate_ = lgb.Booster(model_str=g.model_to_string())
        self.f1_ = lgb.Booster(model_str=f1.model_to_string())
        self.__dict__.pop("_forest_cache", None)
        self._set_threshold(self.gate_.predict(X, raw_score=True))
        return self

    # ---------------------------------------------------------------------------------- prediction

    def _composite(self, X: np.ndarray, *, f0: Forest | None = None, n_jobs: int | None = None):
        """Every row through the composite in one pass of the Cython kernel (_engine.gated): the gate's trees,
        then f1's or (given f0's Forest) f0's. Returns (to_f0, f1's raw scores, the rows' CostState)."""
        gate, f1 = self._forest(self.gate_), self._forest(self.f1_)
        state = CostState(X.shape[0], self.costs_, self.n_features_in_)
        rows = gate.dense(X)
        to_f0, _, raw = gated(gate.flat, gate.leaf_value, gate.leaf_offset, self.gate_threshold_, f1.flat,
                              f1.leaf_value, f1.leaf_offset, None if f0 is None else f0.flat, rows,
                              rows if f0 is None or f0.drop_tiny else f0.dense(X), state.lazy, state.split,
                              state.group_of, state.group_lazy, state.paid, state.acquisition, state.evaluation,
                              resolve_n_jobs(n_jobs, X.shape[0]))
        trees = gate.num_trees + np.where(to_f0, 0 if f0 is None else f0.num_trees, f1.num_trees)
        state.evaluation += state.tree * trees
        return to_f0, raw, state

    def route(self, X) -> np.ndarray:
        """Which model each row goes to: 0 (f0) when the gate's score passes ``gate_threshold_``, else 1 (f1)."""
        return np.where(self._composite(self._validated(X))[0], 0, 1)

    def predict_proba(self, X) -> np.ndarray:
        X = self._validated(X)
        to_f0, raw, _ = self._composite(X)
        proba = np.empty((X.shape[0], len(self.classes_)))
        if (~to_f0).any():
            proba[~to_f0] = proba_from_raw(raw[~to_f0] if raw.shape[1] > 1 else raw[~to_f0, 0])
        if to_f0.any():
            proba[to_f0] = self._f0_proba(X[to_f0])
        return proba

    def prediction_cost(self, X, *, n_jobs: int | None = None) -> CostReport:
        """Exact cost per row: the gate's features, then those of the model the row goes to, each (row, feature
        or group) paid once across the models."""
        X = self._validated(X)
        to_f0, _, state = self._composite(X, f0=self._f0_forest(), n_jobs=n_jobs)
        self._charge_f0_usage(state, X, np.flatnonzero(to_f0))
        return state.report(self.costs_)

    # ------------------------------------------------------------------------------------- files

    def save(self, path: str | os.PathLike) -> None:
        """``path`` (a directory): gate.txt and f1.txt (LightGBM model files) and manifest.json. f0 is not
        saved: give it to :meth:`load`."""
        check_is_fitted(self, "gate_threshold_")
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        write_atomically(folder / "gate.txt", self.gate_.save_model)
        write_atomically(folder / "f1.txt", self.f1_.save_model)
        self._write_manifest(folder, tradeoff=self.tradeoff)

    @classmethod
    def load(cls, path: str | os.PathLike, f0, *, f0_usage=None) -> AdaptGBRT:
        folder = Path(path)
        model, _ = cls._from_manifest(folder, f0, f0_usage, ("tradeoff",))
        model.gate_ = lgb.Booster(model_file=str(folder / "gate.txt"))
        model.f1_ = lgb.Booster(model_file=str(folder / "f1.txt"))
        return model


def _threshold_for(score: np.ndarray, p_full: float) -> float:
    """The threshold t (-inf, inf or a score) with mean(score > t) closest to p_full; the smaller share on a
    tie (p_full 0: inf, every row to f1; 1: -inf)."""
    if p_full <= 0:
        return math.inf
    if p_full >= 1:
        return -math.inf
    values = np.unique(score)  # t = values[j] sends the rows above it; t = -inf sends all
    above = 1.0 - np.searchsorted(np.sort(score), values, side="right") / len(score)
    candidates, shares = np.concatenate([values, [-math.inf]]), np.concatenate([above, [1.0]])
    best = np.lexsort((shares, np.abs(shares - p_full)))[0]
    return float(candidates[best])


def _share_bought(*boosters: lgb.Booster) -> None:
    """Every booster's coupled costs bought = what any of them bought (their ledgers' bought sets merged)."""
    states = [CEGBState.from_booster(b) for b in boosters]
    bought = np.logical_or.reduce([s.bought for s in states])
    for booster, state in zip(boosters, states):
        if (state.bought != bought).any():
            state.bought = bought.copy()
            state.apply(booster)
