"""Adaptive gating: ADAPT-GBRT (Feng Nan and Venkatesh Saligrama, "Adaptive Classification for Prediction Under
a Budget", NIPS 2017).

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
:mod:`lightgbm_cegb.methods.adapt.lin`; both estimators share :class:`AdaptBase`.
"""

from __future__ import annotations

import ctypes
import math

import lightgbm as lgb
import numpy as np
from lightgbm.basic import _LIB, _safe_call
from scipy.special import expit

from lightgbm_cegb._engine import gated
from lightgbm_cegb.base import SEED
from lightgbm_cegb.core.cost_state import CostState
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.forest import Forest
from lightgbm_cegb.core.parallel import resolve_n_jobs
from lightgbm_cegb.core.report import CostReport
from lightgbm_cegb.core.validation import Number
from lightgbm_cegb.io import saved
from lightgbm_cegb.io.ledger import CEGBState
from lightgbm_cegb.io.models import to_forest
from lightgbm_cegb.methods.adapt.adapt_base import GATE_LIMIT, AdaptBase, routing_weights
from lightgbm_cegb.methods.greedy_miser import (
    GreedyMiserClassifier,
    log_loss_gradient,
    log_loss_per_row,
    miser_params,
    proba_from_raw,
)

__all__ = ["AdaptGBRT", "routing_weights"]

class AdaptGBRT(AdaptBase):
    """ADAPT-GBRT: a gate g and a cheap model f1 in front of a costly classifier f0.

    ``fit`` alternates the q-step (:func:`~lightgbm_cegb.methods.adapt.routing_weights`) and the growth of g and f1
    by boosting (module :mod:`lightgbm_cegb.methods.adapt.gbrt`); a row goes to f0 when g's score passes
    ``gate_threshold_``, else to f1.

    Parameters
    ----------
    f0 : fitted classifier with ``predict_proba``, or a LightGBM Booster (binary or multiclass objective)
        The accurate model (binary or multiclass), fitted on the same columns and classes; an unfitted
        scikit-learn classifier is cloned and fitted on ``fit``'s (X, y) first. The model used is ``f0_``. Its
        prediction cost: exact when ``to_forest`` reads it (LightGBM, scikit-learn trees); otherwise give
        ``f0_usage``. Required: the default None makes ``fit`` raise a :class:`~lightgbm_cegb.CEGBError`.
    p_full : float in [0, 1], default=0.3
        The fraction of training rows the q-step sends to f0.
    tradeoff : float, default=0.0
        gamma: a split of g or f1 on a feature neither has used yet costs ``tradeoff * c``.
    feature_costs : FeatureCosts, lazy costs per column or by name, optional
        The cost model (default: every feature costs 1). A feature's ``c`` in training is its lazy plus
        coupled cost.
    n_rounds : int, default=5
        Alternations of the q-step and the growth of g and f1.
    trees_per_round : int, default=20
        Trees added to each of g and f1 per round (per class for f1 with more than two classes).
    max_depth : int, default=4
        As Greedy Miser's: the depth of g's and f1's depth-wise trees (``2 ** max_depth`` leaves).
    learning_rate : float, default=0.1
        As Greedy Miser's: the shrinkage of g's and f1's trees.
    min_samples_leaf : int, default=1
        As Greedy Miser's: the fewest training rows in a leaf of g's and f1's trees.
    f0_usage : callable, optional
        For an f0 that ``to_forest`` cannot read: ``f0_usage(X)`` -> bool array (rows, features), the
        features f0 needs for each row.
    random_state : int, optional
        LightGBM's seed for g's and f1's trees (the fit is deterministic; None: 0).
    n_jobs : int, optional
        Threads (of the training of g and f1).

    Attributes
    ----------
    f0_ : object
        The f0 used: ``f0`` itself when it is fitted, else its clone fitted on ``fit``'s (X, y).
    classes_ : ndarray of shape (n_classes,)
        The classes (f0's ``classes_``; 0 .. K - 1 for a Booster).
    costs_ : FeatureCosts
        The cost model aligned to the columns of X.
    gate_ : lightgbm.Booster
        The gate g (one raw score per row).
    f1_ : lightgbm.Booster
        The cheap model f1 (raw scores: one logit for two classes, else one per class).
    gate_threshold_ : float
        A row goes to f0 when g's raw score passes it (inf at ``p_full`` 0: every row to f1; -inf at 1: every row
        to f0).
    train_fraction_to_f0_ : float
        The share of the training rows the gate sends to f0 (a
        :class:`~lightgbm_cegb.NoSplitWarning` when it is more than 0.05 from ``p_full``).
    n_features_in_ : int
        The number of columns of X.
    feature_names_in_ : ndarray of shape (n_features,)
        The column names of a DataFrame X (only then).

    See Also
    --------
    AdaptLIN : The linear version.
    """

    _constraints = {
        **AdaptBase._constraints, "tradeoff": Number(0.0, math.inf),
        "trees_per_round": Number(1, math.inf, integer=True), "max_depth": Number(1, 30, integer=True),
        "min_samples_leaf": Number(1, math.inf, integer=True), "learning_rate": Number(0.0, low_open=True),
        "random_state": SEED,
    }

    def __init__(self, *, f0=None, p_full: float = 0.3, tradeoff: float = 0.0, feature_costs=None, n_rounds: int = 5,
                 trees_per_round: int = 20, max_depth: int = 4, learning_rate: float = 0.1, min_samples_leaf: int = 1,
                 f0_usage=None, random_state: int | None = None, n_jobs: int | None = None) -> None:
        self.f0 = f0
        self.p_full = p_full
        self.tradeoff = tradeoff
        self.feature_costs = feature_costs
        self.n_rounds = n_rounds
        self.trees_per_round = trees_per_round
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.min_samples_leaf = min_samples_leaf
        self.f0_usage = f0_usage
        self.random_state = random_state
        self.n_jobs = n_jobs

    # ------------------------------------------------------------------------------------- fitting

    def fit(self, X, y) -> AdaptGBRT:
        """Learn g and f1 on (X, y) around the fitted f0.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The training rows (NaN read as LightGBM does).
        y : array-like of shape (n_samples,)
            The labels, among f0's classes (at least two).

        Returns
        -------
        self : object
            The fitted estimator.

        Raises
        ------
        CEGBError
            When a parameter is out of range, f0 is no classifier, y holds classes that f0 was not trained on or
            fewer than two, or f0 was fitted on another number of features.

        Warns
        -----
        NoSplitWarning
            When the gate's scores take too few values to send about ``p_full`` of the training rows to f0.
        """
        self._check_params()
        X, codes, f0_loss = self._start(X, y)
        n, k = len(codes), self._num_scores
        weight_f1 = np.ones(n)  # 1 - q, read by f1's objective
        target_g = np.zeros(n)  # q, read by g's objective

        def f1_objective(score, _):
            gradient = log_loss_gradient(score.reshape(n, k) if k > 1 else score, codes)
            w = weight_f1[:, None] if k > 1 else weight_f1
            return gradient * w, np.broadcast_to(w, gradient.shape).copy()

        def g_objective(score, _):
            return expit(score) - target_g, np.ones(n)

        params = miser_params(self.costs_, self.tradeoff, X.shape[1], k, max_depth=self.max_depth,
                              learning_rate=self.learning_rate, min_samples_leaf=self.min_samples_leaf,
                              seed=0 if self.random_state is None else self.random_state, n_jobs=self.n_jobs)
        # the Datasets take the trees' binning parameters: with LightGBM's defaults (min_data_in_leaf 20,
        # feature_pre_filter) a feature no 20-row split can use is dropped before training, all of them on a small X
        binning = {key: params[key] for key in ("max_bin", "min_data_in_bin", "min_data_in_leaf", "feature_pre_filter",
                                                "verbose")}
        names = self._lightgbm_feature_names()
        f1 = lgb.Booster({**params, "objective": "none"},
                         lgb.Dataset(X, codes.astype(np.float64), params=binning, feature_name=names,
                                     free_raw_data=False))
        # g's score starts at logit(p_full), the mean of its targets (the paper's g = 0, up to that constant)
        offset = float(np.clip(np.log(self.p_full) - np.log1p(-self.p_full), -GATE_LIMIT, GATE_LIMIT)) \
            if 0 < self.p_full < 1 else math.copysign(GATE_LIMIT, self.p_full - 0.5)
        g = lgb.Booster({**params, "num_class": 1, "objective": "none"},
                        lgb.Dataset(X, np.zeros(n), init_score=np.full(n, offset), params=binning, feature_name=names,
                                    free_raw_data=False))
        for _ in range(self.trees_per_round):  # f1 starts as Greedy Miser (every row's weight 1)
            f1.update(fobj=f1_objective)
        f1_scores, g_scores = _TrainingScores(f1, X, k, kept=True), _TrainingScores(g, X, 1)  # g: an init score
        for _ in range(self.n_rounds if self.p_full < 1 else 0):  # at 1, f0 takes every row
            f1_score = f1_scores()
            g_score = offset + g_scores()
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
        self._set_threshold(self.gate_.predict(X, raw_score=True))
        return self

    # ---------------------------------------------------------------------------------- prediction

    def _composite(self, X: np.ndarray, *, f0: Forest | None = None, n_jobs: int | None = None):
        """Every row through the composite in one pass of the Cython kernel (_engine.gated): the gate's trees,
        then f1's or (given f0's Forest) f0's. Returns (to_f0, f1's raw scores, the rows' CostState)."""
        gate, f1 = to_forest(self.gate_), to_forest(self.f1_)
        state = CostState(X.shape[0], self.costs_, self.n_features_in_)
        rows = gate.dense(X)
        to_f0, _, raw = gated(gate.flat, gate.leaf_value, gate.leaf_offset, self.gate_threshold_, f1.flat,
                              f1.leaf_value, f1.leaf_offset, None if f0 is None else f0.flat, rows,
                              rows if f0 is None or not f0.float32 else f0.dense(X), state.lazy, state.split,
                              state.group_of, state.group_lazy, state.paid, state.acquisition, state.evaluation,
                              resolve_n_jobs(n_jobs, X.shape[0]))
        trees = gate.num_trees + np.where(to_f0, 0 if f0 is None else f0.num_trees, f1.num_trees)
        state.evaluation += state.tree * trees
        return to_f0, raw, state

    def route(self, X) -> np.ndarray:
        """Which model each row goes to: 0 (f0) when the gate's score passes ``gate_threshold_``, else 1 (f1).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The rows.

        Returns
        -------
        ndarray of shape (n_samples,)
            0 for the rows sent to f0, 1 for those f1 predicts.
        """
        return np.where(self._composite(self._validated(X))[0], 0, 1)

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities: f1's for the rows the gate keeps, f0's for the rows it sends to f0.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The rows.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            The probability of each class of ``classes_``.
        """
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
        or group) paid once across the models.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The rows.
        n_jobs : int, optional
            Threads of the routing (None: every available CPU, at most one per block of rows).

        Returns
        -------
        CostReport
            The cost of each row (acquisition and evaluation) and the features' usage.

        Raises
        ------
        CEGBError
            When f0 is not a tree ensemble that ``to_forest`` reads and ``f0_usage`` is not given.
        """
        X = self._validated(X)
        to_f0, _, state = self._composite(X, f0=self._f0_forest(), n_jobs=n_jobs)
        self._charge_f0_usage(state, X, np.flatnonzero(to_f0))
        return state.report(self.costs_, self._names_in())

    # ------------------------------------------------------------------------------------- files

    def tradeoff_scale(self, X, y, **fit_params) -> float:
        """Greedy Miser's scale on (X, y) with this model's costs and trees: the smallest ``tradeoff`` at which
        a first tree of f1 fitted on every row makes no split (g and f1 pay as Greedy Miser's trees).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The training rows.
        y : array-like of shape (n_samples,)
            The labels.
        **fit_params : dict
            Accepted for the estimators' common signature; not used.

        Returns
        -------
        float
            The smallest ``tradeoff`` at which f1's first tree makes no split.
        """
        miser = GreedyMiserClassifier(feature_costs=self.feature_costs, max_depth=self.max_depth,
                                      min_samples_leaf=self.min_samples_leaf, random_state=self.random_state,
                                      n_jobs=self.n_jobs)
        return miser.tradeoff_scale(X, y)

    def _saved_state(self) -> tuple[dict, dict]:
        state, _ = super()._saved_state()
        return state, {"gate": self.gate_.model_to_string(), "f1": self.f1_.model_to_string()}

    def _restore(self, state: dict, folder, manifest: dict) -> None:
        super()._restore(state, folder, manifest)
        self.gate_ = saved.booster(folder, manifest, "gate", legacy="gate.txt", kinds=("own",), outputs=1)
        self.f1_ = saved.booster(folder, manifest, "f1", legacy="f1.txt", kinds=("own",), outputs=self._num_scores)


class _TrainingScores:
    """A booster's raw scores on its training rows X as ``predict(X, raw_score=True)`` gives them, bit for bit.

    ``kept``: the booster's objective is "none" and its Dataset has no init score, so LightGBM's own training
    scores (each tree's leaf values added to rows in the trees' order, from 0, as ``predict`` adds them) are read.
    Otherwise each call routes X through only the trees grown since the last (``predict`` over all the trees at
    every round would cost the square of the rounds) and adds their leaf values in the trees' order, from 0."""

    def __init__(self, booster: lgb.Booster, X: np.ndarray, k: int, *, kept: bool = False) -> None:
        self.booster, self.X, self.k, self.kept = booster, X, k, kept
        self.iterations = 0
        self.score = np.zeros((X.shape[0], k))

    def __call__(self) -> np.ndarray:
        """(rows, k) scores, or (rows,) when k is 1: read-only, updated in place by the next call."""
        grown = self.booster.current_iteration() - self.iterations
        if grown > 0 and self.kept:
            kept = np.empty(self.score.size)
            length = ctypes.c_int64(0)
            _safe_call(_LIB.LGBM_BoosterGetPredict(self.booster._handle, ctypes.c_int(0), ctypes.byref(length),
                                                   kept.ctypes.data_as(ctypes.POINTER(ctypes.c_double))))
            if length.value != kept.size:
                raise CEGBError(f"LightGBM's training scores should be {kept.size} numbers, got {length.value}")
            self.score[:] = kept.reshape(self.score.shape, order="F")  # LightGBM's scores: class by class
        elif grown > 0:
            leaves = self.booster.predict(self.X, pred_leaf=True, start_iteration=self.iterations,
                                          num_iteration=grown).reshape(self.X.shape[0], grown * self.k)
            leaves = np.ascontiguousarray(leaves.T)  # a tree's leaves side by side
            score = np.ascontiguousarray(self.score.T)
            for t in range(grown * self.k):
                tree = self.iterations * self.k + t
                value = np.array([self.booster.get_leaf_output(tree, leaf) for leaf in range(leaves[t].max() + 1)])
                score[t % self.k] += value[leaves[t]]
            self.score[:] = score.T
        self.iterations += grown
        score = self.score if self.k > 1 else self.score[:, 0]
        score = score.view()
        score.flags.writeable = False
        return score


def _share_bought(*boosters: lgb.Booster) -> None:
    """Every booster's coupled costs bought = what any of them bought (their ledgers' bought sets merged)."""
    states = [CEGBState.from_booster(b) for b in boosters]
    bought = np.logical_or.reduce([s.bought for s in states])
    for booster, state in zip(boosters, states):
        if (state.bought != bought).any():
            state.bought = bought.copy()
            state.apply(booster)
