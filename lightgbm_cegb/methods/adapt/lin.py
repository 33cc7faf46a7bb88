"""ADAPT-LIN (Feng Nan and Venkatesh Saligrama, "Adaptive Classification for Prediction Under a Budget", NIPS
2017): a linear gate g and a linear cheap model f1 in front of a costly classifier f0, sparse in features together.

``fit`` alternates the paper's two steps, as ADAPT-GBRT (:mod:`lightgbm_cegb.methods.adapt`): the q-step
(:func:`~lightgbm_cegb.methods.adapt.routing_weights`, a ``p_full`` share of the training rows to f0), then g and f1
minimise, with q fixed,

    (1/n) sum_i [ q_i log(1 + exp(-g(x_i))) + (1 - q_i) (log(1 + exp(g(x_i))) + loss(f1(x_i), y_i)) ]
        + lam * sum_j c_j * || (g_j, f1_j) ||_2

(``loss`` the log-loss, softmax with more than two classes; ``f1_j`` feature j's weights in f1, one per
class), the L2,1 penalty weighting feature j by its cost ``c_j`` so that g and f1 drop a feature together, by
accelerated proximal gradient (FISTA with backtracking; the group shrinkage gives exact zeros). f1 starts as
the cost-weighted group-sparse logistic regression on every row (q = 0), g at 0. The features are centred and
scaled by the training rows' standard deviations inside the models (which does not change the features they
read).
Missing values (NaN): g and f1 read a missing value as its feature's mean on the training rows (where it is
known), i.e. 0 after centring, in fit and in prediction; f0 reads NaN as it was trained to (LightGBM: its
learned default child). A missing value costs what a known one costs: the row acquired the feature to find it
missing, so a model that reads the feature pays for it on every row it reads it for.

A row pays the features of the gate (those with a non-zero weight), then those of the model it goes to: f1's,
or f0's (exactly for a tree ensemble, else ``f0_usage``), each (row, feature or group) once. Split and tree
costs of the cost model apply to trees only: f0's.

Its length: two estimators (ADAPT-LIN and the paper's L1 baseline) over one convex problem (``_Problem``: its
objective, gradient and proximal steps), whose derivation the docstrings carry.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit

from lightgbm_cegb.core.cost_state import CostState
from lightgbm_cegb.core.parallel import one_blas_thread
from lightgbm_cegb.core.report import CostReport
from lightgbm_cegb.core.validation import CheckedElsewhere, Number
from lightgbm_cegb.io import saved
from lightgbm_cegb.methods.adapt.adapt_base import AdaptBase, routing_weights
from lightgbm_cegb.methods.greedy_miser import log_loss_per_row, proba_from_raw

__all__ = ["AdaptL1", "AdaptLIN"]


class AdaptLIN(AdaptBase):
    """ADAPT-LIN: a linear gate g and a linear model f1 (logistic, softmax for more than two classes), sparse in
    features together, in front of a costly classifier f0.

    ``fit`` alternates the q-step and the fit of g and f1 by accelerated proximal gradient on the cost-weighted
    L2,1 penalty (module :mod:`lightgbm_cegb.methods.adapt.lin`); a row goes to f0 when g's score passes
    ``gate_threshold_``, else to f1. A missing value (NaN) reads as its feature's training mean in g and f1 (see
    the module doc).

    Parameters
    ----------
    f0 : fitted classifier with ``predict_proba``, or a LightGBM Booster (binary or multiclass objective)
        As :class:`~lightgbm_cegb.AdaptGBRT`'s.
    p_full : float in [0, 1], default=0.3
        The fraction of training rows the q-step sends to f0.
    tradeoff : float, default=0.01
        The paper's lambda, the weight of the cost-weighted L2,1 penalty; ``tradeoff_scale(X, y)`` is the
        smallest value at which f1's first fit reads no feature.
    feature_costs : FeatureCosts, lazy costs per column or by name, optional
        The cost model (default: every feature costs 1). Feature j's ``c_j`` in the penalty is its lazy plus
        coupled cost plus its group's costs shared among the group's members.
    n_rounds : int, default=10
        Alternations of the q-step and the fit of g and f1.
    max_iter : int, default=300
        Proximal-gradient iterations per fit at most (``n_iter_``: those the last fit ran).
    tol : float, default=1e-6
        A fit stops when no weight moves by more than ``tol`` (relative to the largest weight) in an iteration.
    f0_usage : callable, optional
        For an f0 that ``to_forest`` cannot read: ``f0_usage(X)`` -> bool array (rows, features).
    random_state : None, default=None
        The fit is deterministic (no random draw); accepted as every estimator of the package does.
    n_jobs : int, optional
        Threads of the routing of f0's trees in ``prediction_cost``.

    Attributes
    ----------
    f0_ : object
        The f0 used: ``f0`` itself when it is fitted, else its clone fitted on ``fit``'s (X, y).
    classes_ : ndarray of shape (n_classes,)
        The classes (f0's ``classes_``; 0 .. K - 1 for a Booster).
    costs_ : FeatureCosts
        The cost model aligned to the columns of X.
    gate_coef_ : ndarray of shape (n_features,)
        The gate's weights on the raw (unscaled) features.
    gate_intercept_ : float
        The gate's intercept.
    f1_coef_ : ndarray of shape (n_features, n_scores)
        f1's weights on the raw features, one column per raw score (one for two classes, else one per class).
    f1_intercept_ : ndarray of shape (n_scores,)
        f1's intercepts.
    mean_ : ndarray of shape (n_features,)
        The training rows' means (the centring inside the models; a missing value reads as its feature's mean, 0
        for a feature missing on every training row), over the rows where the feature is known.
    scale_ : ndarray of shape (n_features,)
        The training rows' standard deviations (1 for a constant column).
    n_iter_ : int
        The proximal-gradient iterations the last fit ran.
    gate_features_ : ndarray of int
        The features the gate reads.
    f1_features_ : ndarray of int
        The features f1 reads.
    gate_threshold_ : float
        A row goes to f0 when the gate's score passes it (inf at ``p_full`` 0: every row to f1; -inf at 1: every
        row to f0).
    train_fraction_to_f0_ : float
        The share of the training rows the gate sends to f0.
    n_features_in_ : int
        The number of columns of X.
    feature_names_in_ : ndarray of shape (n_features,)
        The column names of a DataFrame X (only then).

    See Also
    --------
    AdaptGBRT : The version with boosted trees.
    """

    _constraints = {
        **AdaptBase._constraints, "tradeoff": Number(0.0, math.inf),
        "max_iter": Number(1, math.inf, integer=True), "tol": Number(0.0, math.inf),
        "random_state": CheckedElsewhere("nowhere: unused, the fit draws nothing"),
    }

    def __init__(self, *, f0=None, p_full: float = 0.3, tradeoff: float = 0.01, feature_costs=None,
                 n_rounds: int = 10, max_iter: int = 300, tol: float = 1e-6, f0_usage=None, random_state=None,
                 n_jobs: int | None = None) -> None:
        self.f0 = f0
        self.p_full = p_full
        self.tradeoff = tradeoff
        self.feature_costs = feature_costs
        self.n_rounds = n_rounds
        self.max_iter = max_iter
        self.tol = tol
        self.f0_usage = f0_usage
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _penalty_weights(self, num_features: int) -> np.ndarray:
        """c_j: feature j's lazy and coupled cost plus its group's, shared among the group's members."""
        lazy, coupled, _ = self.costs_.arrays(num_features)
        group_of, group_lazy, group_coupled = self.costs_.group_arrays(num_features)
        c = lazy + coupled
        grouped = group_of >= 0
        if grouped.any():
            size = np.bincount(group_of[grouped], minlength=len(group_lazy))
            c[grouped] += (group_lazy + group_coupled)[group_of[grouped]] / size[group_of[grouped]]
        return c

    # ------------------------------------------------------------------------------------- fitting

    def fit(self, X, y) -> AdaptLIN:
        """Learn g and f1 on (X, y) around the fitted f0.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The training rows (NaN: a missing value).
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
        Z, self.mean_, self.scale_ = _standardise(X)
        problem, f1, self.n_iter_ = self._logistic(Z, codes, self.tradeoff * self._penalty_weights(X.shape[1]),
                                                   self._num_scores)  # f1 alone
        gate = np.zeros(X.shape[1] + 1)
        for _ in range(self.n_rounds if 0 < self.p_full < 1 else 0):  # at 0 and 1 no gate: f1 or f0 takes all
            g_score = problem.linear(gate)
            A = log_loss_per_row(_squeeze(problem.linear(f1)), codes) + np.logaddexp(0.0, g_score)
            B = f0_loss + np.logaddexp(0.0, -g_score)
            q = routing_weights(A, B, self.p_full)
            gate, f1, self.n_iter_ = problem.solve(gate, f1, q, self.max_iter, self.tol, fit_gate=True)
        self._set_models(X, gate, f1)
        return self

    def _logistic(self, Z: np.ndarray, codes: np.ndarray, penalty: np.ndarray, k: int) -> tuple:
        """(its problem, its weights (intercept first, (d + 1, k)), the iterations run): the logistic regression
        of codes on Z with the penalty weights ``penalty``, on every row and without a gate (f1's first fit)."""
        problem = _Problem(Z, codes, penalty)
        _, weights, iterations = problem.solve(np.zeros(Z.shape[1] + 1), np.zeros((Z.shape[1] + 1, k)),
                                               np.zeros(len(codes)), self.max_iter, self.tol, fit_gate=False)
        return problem, weights, iterations

    def _set_models(self, X: np.ndarray, gate: np.ndarray, f1: np.ndarray) -> None:
        """The gate's and f1's weights on the standardised rows (intercept first) as weights on X, and the gate's
        threshold from its scores on the training rows X."""
        self.gate_coef_ = gate[1:] / self.scale_
        self.gate_intercept_ = float(gate[0] - gate[1:] @ (self.mean_ / self.scale_))
        self.f1_coef_ = f1[1:] / self.scale_[:, None]
        self.f1_intercept_ = f1[0] - (self.mean_ / self.scale_) @ f1[1:]
        self._set_threshold(self._gate_score(X))  # p_full 0 and 1: a gate without weights, the threshold +-inf

    def tradeoff_scale(self, X, y) -> float:
        """The smallest ``tradeoff`` at which f1's first fit (every row, intercepts only) reads no feature.

        Past it the composite is f1 = the class prior for the rows the gate keeps (exact, from the gradient at the
        prior: no fits).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The training rows (NaN: a missing value).
        y : array-like of shape (n_samples,)
            The labels, among f0's classes.

        Returns
        -------
        float
            The smallest ``tradeoff`` at which f1 reads no feature (0 when every feature is free).
        """
        self._check_params()
        X, codes, _ = self._start(X, y)
        k = self._num_scores
        c = self._penalty_weights(X.shape[1])
        problem = _Problem(_standardise(X)[0], codes, np.zeros(X.shape[1]))
        prior = np.bincount(codes, minlength=len(self.classes_)) / len(codes)
        f1 = np.zeros((X.shape[1] + 1, k))
        f1[0] = np.log(prior[1] / prior[0]) if k == 1 else np.log(np.maximum(prior, 1e-300))
        gradient = problem.f1_gradient(f1, np.zeros(len(codes)))[1:]
        norms = np.linalg.norm(gradient, axis=1)
        return float(np.max(np.where(c > 0, norms / np.where(c > 0, c, 1.0), 0.0)))

    # ---------------------------------------------------------------------------------- prediction

    def _filled(self, X: np.ndarray) -> np.ndarray:
        """X with each missing value (NaN) replaced by its feature's training mean (X itself when none is)."""
        missing = np.isnan(X)
        return np.where(missing, self.mean_, X) if missing.any() else X

    def _gate_score(self, X: np.ndarray) -> np.ndarray:
        return self._filled(X) @ self.gate_coef_ + self.gate_intercept_

    def _to_f0(self, X: np.ndarray) -> np.ndarray:
        return self._gate_score(X) > self.gate_threshold_

    def _f1_raw(self, X: np.ndarray) -> np.ndarray:
        return _squeeze(self._filled(X) @ self.f1_coef_ + self.f1_intercept_)

    @property
    def gate_features_(self) -> np.ndarray:
        """The features the gate reads (none at p_full 0 and 1: no gate is fitted), as column indices."""
        return np.flatnonzero(self.gate_coef_)

    @property
    def f1_features_(self) -> np.ndarray:
        """The features f1 reads (a non-zero weight for some class), as column indices."""
        return np.flatnonzero(np.any(self.f1_coef_ != 0, axis=1))

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
        return np.where(self._to_f0(self._validated(X)), 0, 1)

    def decision_function_f1(self, X) -> np.ndarray:
        """f1's raw scores (one logit for two classes, else one per class) on every row.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The rows.

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_classes)
            The logit of ``classes_[1]`` for two classes, else one score per class.
        """
        return self._f1_raw(self._validated(X))

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
        to_f0 = self._to_f0(X)
        proba = np.empty((X.shape[0], len(self.classes_)))
        if (~to_f0).any():
            proba[~to_f0] = proba_from_raw(self._f1_raw(X[~to_f0]))
        if to_f0.any():
            proba[to_f0] = self._f0_proba(X[to_f0])
        return proba

    def prediction_cost(self, X, *, n_jobs: int | None = None) -> CostReport:
        """Exact cost per row: the gate's features, then f1's or f0's, each (row, feature or group) paid once.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The rows.
        n_jobs : int, optional
            Threads of the routing of f0's trees (None: the estimator's ``n_jobs``).

        Returns
        -------
        CostReport
            The cost of each row (acquisition and, for f0's trees, evaluation) and the features' usage.

        Raises
        ------
        CEGBError
            When ``p_full`` > 0, f0 is not a tree ensemble that ``to_forest`` reads and ``f0_usage`` is not given.
        """
        X = self._validated(X)
        f0 = self._f0_forest() if self.p_full > 0 else None
        to_f0 = self._to_f0(X)
        state = CostState(X.shape[0], self.costs_, self.n_features_in_)
        everyone = np.arange(X.shape[0])
        for feature in self.gate_features_:
            state.pay(int(feature), everyone)
        to_f1 = np.flatnonzero(~to_f0)
        for feature in self.f1_features_:
            state.pay(int(feature), to_f1)
        rows = np.flatnonzero(to_f0)
        if f0 is not None and rows.size:
            state.add(f0, X[rows], rows=rows, n_jobs=self.n_jobs if n_jobs is None else n_jobs)
        self._charge_f0_usage(state, X, rows)
        return state.report(self.costs_, self._names_in())

    # ------------------------------------------------------------------------------------- files

    def _saved_state(self) -> tuple[dict, dict]:
        state, files = super()._saved_state()
        return {**state, "gate_coef": self.gate_coef_, "gate_intercept": self.gate_intercept_,
                "f1_coef": self.f1_coef_, "f1_intercept": np.asarray(self.f1_intercept_), "mean": self.mean_,
                "scale": self.scale_, "n_iter": self.n_iter_}, files

    def _restore(self, state: dict, folder, manifest: dict) -> None:
        super()._restore(state, folder, manifest)
        n = self.n_features_in_
        self.gate_coef_ = saved.array(state, "gate_coef", (n,))
        self.gate_intercept_ = float(saved.array(state, "gate_intercept", ()))
        self.f1_intercept_ = saved.array(state, "f1_intercept", (None,))
        self.f1_coef_ = saved.array(state, "f1_coef", (n, len(self.f1_intercept_)))
        self.mean_ = saved.array(state, "mean", (n,))
        self.scale_ = saved.array(state, "scale", (n,))
        if not (self.scale_ > 0).all():
            raise saved.damaged(state, "scale should hold numbers > 0")
        if "n_iter" in state:  # not in lightgbm_cegb 0.1.0's files
            self.n_iter_ = saved.integer(state, "n_iter", 0)


class AdaptL1(AdaptLIN):
    """The L1 baseline of the ADAPT paper (Nan and Saligrama, NIPS 2017, section 5): a gate and a cheap model f1
    on the features an L1-regularised logistic regression selects, in front of a costly classifier f0.

    ``fit`` runs the paper's three steps: (1) the cost-weighted L1 logistic regression on every row (AdaptLIN's
    first f1 fit: ``tradeoff * c_j`` on feature j, one group over the classes) selects the features S it reads;
    (2) f1 is the logistic regression on S alone, without a penalty; (3) the gate is the logistic regression on S
    of f1's mistakes on the training rows (the paper's pseudo labels: 1 where f1 is wrong), and the ``p_full``
    share of the training rows with the highest gate scores goes to f0, as in :class:`AdaptLIN`. Unlike ADAPT-LIN,
    the gate and f1 are not fitted together: the features are chosen before the gate exists. Prediction,
    ``prediction_cost``, ``route``, saving and ``tradeoff_scale`` are :class:`AdaptLIN`'s.

    Parameters
    ----------
    f0 : fitted classifier with ``predict_proba``, or a LightGBM Booster (binary or multiclass objective)
        The costly model the gate sends rows to (a clone is fitted if it is an unfitted scikit-learn
        classifier: ``f0_``).
    p_full : float, default=0.3
        The share of the training rows the gate sends to f0 (0: f1 alone; 1: f0 alone).
    tradeoff : float, default=0.01
        The L1 penalty's weight: ``tradeoff * c_j`` on feature j in step (1).
    feature_costs : FeatureCosts, mapping, pandas Series or None, default=None
        The costs (None: every feature costs 1).
    n_rounds : int, default=10
        Unused (AdaptLIN's alternation); kept so that the two share their parameters.
    max_iter : int, default=300
        FISTA iterations of each of the three fits.
    tol : float, default=1e-6
        FISTA's stopping tolerance (largest weight change relative to the largest weight).
    f0_usage : callable, optional
        For an f0 that ``to_forest`` cannot read: ``f0_usage(X)`` -> bool array (rows, features).
    random_state : int or None, default=None
        Unused (the fits are deterministic); the estimator contract's parameter.
    n_jobs : int or None, default=None
        Threads for routing rows through f0 in ``prediction_cost``.

    Attributes
    ----------
    support_ : ndarray of int
        The features S of step (1), as column indices; the gate and f1 read no other.
    gate_coef_, gate_intercept_, f1_coef_, f1_intercept_, gate_threshold_, mean_, scale_, n_iter_
        As :class:`AdaptLIN`'s.
    """

    def fit(self, X, y) -> AdaptL1:
        """Select S by the L1 fit, then fit f1 on S and the gate on f1's mistakes (see the class doc).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The training rows (NaN: a missing value).
        y : array-like of shape (n_samples,)
            The labels, among f0's classes (at least two).

        Returns
        -------
        self : object
            The fitted estimator.

        Raises
        ------
        CEGBError
            As :meth:`AdaptLIN.fit`.

        Warns
        -----
        NoSplitWarning
            When the gate's scores take too few values to send about ``p_full`` of the training rows to f0.
        """
        self._check_params()
        X, codes, _ = self._start(X, y)
        Z, self.mean_, self.scale_ = _standardise(X)
        d, k = X.shape[1], self._num_scores
        _, chosen, self.n_iter_ = self._logistic(Z, codes, self.tradeoff * self._penalty_weights(d), k)
        self.support_ = np.flatnonzero(np.any(chosen[1:] != 0, axis=1))
        on_support = Z[:, self.support_]
        no_penalty = np.zeros(len(self.support_))
        f1_problem, f1, _ = self._logistic(on_support, codes, no_penalty, k)
        score = _squeeze(f1_problem.linear(f1))
        predicted = (score > 0) if k == 1 else np.argmax(score, axis=1)
        wrong = (predicted != codes).astype(np.int64)
        gate = np.zeros((len(self.support_) + 1, 1))
        if 0 < self.p_full < 1 and 0 < wrong.sum() < len(wrong):  # else no gate: f1 or f0 takes all, or no mistake
            gate = self._logistic(on_support, wrong, no_penalty, 1)[1]
        full_gate, full_f1 = np.zeros(d + 1), np.zeros((d + 1, k))
        full_gate[0], full_f1[0] = gate[0, 0], f1[0]
        full_gate[1 + self.support_], full_f1[1 + self.support_] = gate[1:, 0], f1[1:]
        self._set_models(X, full_gate, full_f1)
        return self

    def _saved_state(self) -> tuple[dict, dict]:
        state, files = super()._saved_state()
        return {**state, "support": self.support_}, files

    def _restore(self, state: dict, folder, manifest: dict) -> None:
        super()._restore(state, folder, manifest)
        self.support_ = saved.array(state, "support", (None,), np.int64, low=0)
        if (self.support_ >= self.n_features_in_).any() or (np.diff(self.support_) <= 0).any():
            raise saved.damaged(state, f"support should hold increasing column indices below {self.n_features_in_}")


def _standardise(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X centred and scaled by its standard deviations (1 for a constant column), the means, the scales), both
    over the rows where a feature is known (mean 0, scale 1 for a feature known on no row); a missing value
    (NaN) becomes 0, its feature's mean."""
    missing = np.isnan(X)
    if not missing.any():
        mean, scale = X.mean(axis=0), X.std(axis=0)
    else:
        known = (~missing).sum(axis=0)
        mean = np.where(known > 0, np.where(missing, 0.0, X).sum(axis=0) / np.maximum(known, 1), 0.0)
        centred = np.where(missing, 0.0, X - mean)
        scale = np.sqrt((centred ** 2).sum(axis=0) / np.maximum(known, 1))
    scale = np.where(scale > 0, scale, 1.0)
    Z = (X - mean) / scale
    if missing.any():
        Z[missing] = 0.0
    return Z, mean, scale


def _squeeze(score: np.ndarray) -> np.ndarray:
    """(n, 1) scores of a binary model as the one logit per row proba_from_raw and log_loss_per_row read."""
    return score[:, 0] if score.ndim == 2 and score.shape[1] == 1 else score


class _Problem:
    """The M-step's objective on standardised rows Z (an intercept column in front) for weights gate (d + 1)
    and f1 (d + 1, k), with the penalty weights ``penalty`` (lam * c_j) on the rows 1..d of both.

    Internally the weights are one matrix W = [gate, f1] (d + 1, 1 + k) and the rows' scores S = Z W: the
    objective and its gradient (``Z' R / n``, R the residuals per row and score) come from S in one pass (one
    exponential per score), and FISTA's extrapolated point's scores are the same combination of the scores of
    the last two iterates (no product with Z): an iteration multiplies by Z once per step size tried and by Z'
    once."""

    def __init__(self, Z: np.ndarray, codes: np.ndarray, penalty: np.ndarray) -> None:
        self.Z = np.hstack([np.ones((Z.shape[0], 1)), Z])
        self.codes = codes
        self.penalty = penalty
        self.n = Z.shape[0]
        codes = np.asarray(codes, dtype=np.int64)
        self._rows = np.arange(self.n)
        self._codes = codes
        self._sign = np.where(codes > 0, -1.0, 1.0)  # binary: the log-loss is softplus(sign * f)

    def linear(self, w: np.ndarray) -> np.ndarray:
        return self.Z @ w

    def _times(self, W: np.ndarray, skip_gate: bool = False) -> np.ndarray:
        """S = Z W (column-major), a matrix-vector product per column (OpenBLAS is several times slower on a
        product with a few columns); with skip_gate column 0 is left at 0."""
        S = np.zeros((self.n, W.shape[1]), order="F")
        for c in range(1 if skip_gate else 0, W.shape[1]):
            np.dot(self.Z, W[:, c], out=S[:, c])
        return S

    def _gradient_of(self, R: np.ndarray, skip_gate: bool = False) -> np.ndarray:
        """Z' R / n, a product per column (column 0 left at 0 with skip_gate)."""
        G = np.zeros((self.Z.shape[1], R.shape[1]))
        for c in range(1 if skip_gate else 0, R.shape[1]):
            G[:, c] = self.Z.T @ R[:, c]
        return G / self.n

    # --------------------------------------------------------------------- the objective from the scores

    def _evaluate(self, S: np.ndarray, q: np.ndarray, fit_gate: bool, gradient: bool):
        """(the smooth objective, R (n, 1 + k) with gradient Z' R / n, or None) at the scores S = Z [gate, f1]."""
        keep = 1.0 - q
        f = S[:, 1:]
        R = np.empty(S.shape, order="F") if gradient else None
        if f.shape[1] == 1:  # one logit: loss softplus(m), m = sign * f; d loss / d f = sign * expit(m)
            m = self._sign * f[:, 0]
            e = np.exp(-np.abs(m))
            total = float(keep @ (np.maximum(m, 0.0) + np.log1p(e)))
            if gradient:
                R[:, 1] = self._sign * keep * np.where(m >= 0, 1.0, e) / (1.0 + e)
        else:  # softmax: loss logsumexp(f) - f_y; d loss / d f = softmax(f) - onehot(y)
            top = f.max(axis=1)
            ex = np.exp(f - top[:, None])
            se = ex.sum(axis=1)
            total = float(keep @ (top + np.log(se) - f[self._rows, self._codes]))
            if gradient:
                ex /= se[:, None]
                ex[self._rows, self._codes] -= 1.0
                np.multiply(ex, keep[:, None], out=R[:, 1:])
        if fit_gate:  # q softplus(-s) + (1 - q) softplus(s) = softplus(s) - q s
            s = S[:, 0]
            e = np.exp(-np.abs(s))
            total += float(np.sum(np.maximum(s, 0.0) + np.log1p(e) - q * s))
            if gradient:
                R[:, 0] = np.where(s >= 0, 1.0, e) / (1.0 + e) - q
        elif gradient:
            R[:, 0] = 0.0
        return total / self.n, R

    def _weights(self, gate: np.ndarray, f1: np.ndarray) -> np.ndarray:
        return np.column_stack([gate, f1.reshape(len(gate), -1)])

    def smooth(self, gate: np.ndarray, f1: np.ndarray, q: np.ndarray, fit_gate: bool) -> float:
        """The objective without the penalty."""
        return self._evaluate(self._times(self._weights(gate, f1)), q, fit_gate, False)[0]

    def _gradient(self, gate: np.ndarray, f1: np.ndarray, q: np.ndarray) -> np.ndarray:
        return self._gradient_of(self._evaluate(self._times(self._weights(gate, f1)), q, True, True)[1])

    def f1_gradient(self, f1: np.ndarray, q: np.ndarray) -> np.ndarray:
        return self._gradient(np.zeros(len(f1)), f1, q)[:, 1:]

    def gate_gradient(self, gate: np.ndarray, q: np.ndarray) -> np.ndarray:
        return self.Z.T @ (expit(self.Z @ gate) - q) / self.n

    def penalty_value(self, gate: np.ndarray, f1: np.ndarray) -> float:
        norms = np.sqrt(gate[1:] ** 2 + np.sum(f1[1:] ** 2, axis=1))
        return float(self.penalty @ norms)

    def prox(self, gate: np.ndarray, f1: np.ndarray, step: float) -> tuple[np.ndarray, np.ndarray]:
        """The group shrinkage: each feature's (gate_j, f1_j) scaled by max(0, 1 - step * penalty_j / norm)."""
        W = self._prox(self._weights(gate, f1), step)
        return W[:, 0], W[:, 1:].reshape(f1.shape)

    def _prox(self, W: np.ndarray, step: float) -> np.ndarray:
        """``prox`` on W = [gate, f1] (a new array)."""
        norms = np.sqrt(np.sum(W[1:] ** 2, axis=1))
        shrink = np.where(norms > 0, np.maximum(0.0, 1.0 - step * self.penalty / np.where(norms > 0, norms, 1.0)), 0.0)
        W = W.copy()
        W[1:] *= shrink[:, None]
        return W

    @one_blas_thread
    def solve(self, gate: np.ndarray, f1: np.ndarray, q: np.ndarray, max_iter: int, tol: float, *,
              fit_gate: bool) -> tuple[np.ndarray, np.ndarray, int]:
        """FISTA with backtracking from (gate, f1); without fit_gate the gate stays where it is. Returns the
        weights and the iterations run."""
        return self._fista(self._weights(gate, f1), q, max_iter, tol, fit_gate, f1.shape)

    def _fista(self, x: np.ndarray, q: np.ndarray, max_iter: int, tol: float, fit_gate: bool, f1_shape) -> tuple:
        step = 1.0
        S_x = self._times(x, not fit_gate)
        y, S_y, t = x, S_x, 1.0
        iterations = 0
        while iterations < max_iter:
            iterations += 1
            value, R = self._evaluate(S_y, q, fit_gate, True)
            G = self._gradient_of(R, not fit_gate)
            while True:
                new = self._prox(y - step * G, step)
                D = new - y
                bound = value + float(np.sum(G * D)) + float(np.sum(D * D)) / (2 * step)
                S_new = self._times(new, not fit_gate)
                if self._evaluate(S_new, q, fit_gate, False)[0] <= bound + 1e-12 * abs(bound) or step < 1e-12:
                    break
                step /= 2
            moved = float(np.max(np.abs(new - x)))
            largest = max(float(np.max(np.abs(new))), 1.0)
            t_next = (1 + math.sqrt(1 + 4 * t * t)) / 2
            momentum = (t - 1) / t_next
            y = new + momentum * (new - x)
            S_y = S_new + momentum * (S_new - S_x)
            x, S_x, t = new, S_new, t_next
            if moved <= tol * largest:
                break
        return x[:, 0].copy(), x[:, 1:].reshape(f1_shape).copy(), iterations
