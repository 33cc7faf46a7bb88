"""What ADAPT-GBRT and ADAPT-LIN share: the q-step, the gate's threshold, f0, costs and the manifest."""

from __future__ import annotations

import math
import warnings

import lightgbm as lgb
import numpy as np
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils import get_tags
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from lightgbm_cegb.base import COSTS, BudgetedEstimator
from lightgbm_cegb.core.cost_state import CostState
from lightgbm_cegb.core.costs import FeatureCosts
from lightgbm_cegb.core.errors import CEGBError, NoSplitWarning
from lightgbm_cegb.core.forest import Forest
from lightgbm_cegb.core.parallel import N_JOBS
from lightgbm_cegb.core.validation import Number, Satisfies
from lightgbm_cegb.io import saved
from lightgbm_cegb.io.models import to_forest
from lightgbm_cegb.methods.greedy_miser import class_codes

GATE_LIMIT = 30.0  # |the gate's starting score|: logit(p_full), within +-30 (p_full 0 and 1 at the ends)


def routing_weights(A: np.ndarray, B: np.ndarray, p_full: float, *, tol: float = 1e-12) -> np.ndarray:
    """The q-step: ``q`` minimising ``sum_i (1 - q_i) A_i + q_i B_i - H(q_i)`` subject to ``mean(q) = p_full``.

    H is the binary entropy: ``q_i = 1 / (1 + exp(B_i - A_i + beta))``, ``beta`` by bisection (mean(q) falls as
    beta grows). ``p_full`` 0 and 1 give q = 0 and q = 1.

    Parameters
    ----------
    A : array-like of shape (n_samples,)
        The loss of each row if it stays with f1 (f1's loss plus the gate's).
    B : array-like of shape (n_samples,)
        The loss of each row if it goes to f0 (f0's loss plus the gate's).
    p_full : float
        The mean of q: the share of the rows sent to f0.
    tol : float, default=1e-12
        The bisection stops when the bracket of ``beta`` is narrower than ``tol`` (relative to its ends, at least
        1).

    Returns
    -------
    ndarray of shape (n_samples,)
        The routing weights ``q_i``, the probability that row i goes to f0.
    """
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


class AdaptBase(BudgetedEstimator, ClassifierMixin, BaseEstimator):
    """What ADAPT's estimators share: f0 and its classes, the cost model, the gate's threshold, the cost of the
    rows sent to f0, the prediction and the files' cost manifest."""

    _abstract = True  # a base of estimators (selection.chosen.estimator_class)

    _fitted_attribute = "gate_threshold_"
    _given_at_load = ("f0", "f0_usage")
    _constraints = {
        "f0": Satisfies(lambda f0: isinstance(f0, lgb.Booster) or hasattr(f0, "predict_proba"),
                        "a classifier with predict_proba (fitted, or a scikit-learn one that fit trains) or a LightGBM "
                        "classification Booster", bad=(None, 3), show_type=True),
        "p_full": Number(0.0, 1.0), "n_rounds": Number(1, math.inf, integer=True), "feature_costs": COSTS,
        "f0_usage": Satisfies(lambda usage: usage is None or callable(usage),
                              "a callable X -> bool array (rows, features)", bad=(3, "usage"), show_type=True),
        "n_jobs": N_JOBS,
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # the gate and f1 read NaN (the trees as LightGBM does, ADAPT-LIN's linear models as the training mean):
        # a NaN is as good as f0 takes it
        tags.input_tags.allow_nan = self._f0_reads_nan()
        return tags

    def _f0_reads_nan(self) -> bool:
        """Whether f0 takes NaN (a Booster, or a scikit-learn estimator that says so): X may hold NaN then."""
        return isinstance(self.f0, lgb.Booster) or (
            hasattr(self.f0, "__sklearn_tags__") and get_tags(self.f0).input_tags.allow_nan)

    def _nan_rule(self) -> bool | str:
        """validate_data's ensure_all_finite: NaN allowed when f0 takes it."""
        return "allow-nan" if self._f0_reads_nan() else True

    def _fitted_f0(self, X: np.ndarray, y: np.ndarray):
        """f0 as given when it is fitted (a Booster, a fitted scikit-learn model, or any object with
        predict_proba); an unfitted scikit-learn classifier: a clone fitted on (X, y)."""
        if isinstance(self.f0, lgb.Booster):
            return self.f0
        try:
            check_is_fitted(self.f0)
        except NotFittedError:
            return clone(self.f0).fit(X, y)
        except TypeError:  # not a scikit-learn estimator: a model with predict_proba, used as it is
            pass
        return self.f0

    def _f0_proba(self, X) -> np.ndarray:
        f0 = self.f0_
        if isinstance(f0, lgb.Booster):  # binary: the probability of class 1; multiclass: one per class
            proba = np.asarray(f0.predict(X), dtype=np.float64)
            proba = np.column_stack([1 - proba, proba]) if proba.ndim == 1 else proba
        else:
            proba = np.asarray(f0.predict_proba(X), dtype=np.float64)
        if proba.ndim != 2 or proba.shape != (X.shape[0], len(self.classes_)):
            raise CEGBError(f"f0.predict_proba should give ({X.shape[0]}, {len(self.classes_)}) probabilities "
                            f"(one per class {self.classes_.tolist()}), got shape {proba.shape}")
        return proba

    def _start(self, X, y) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Validate (X, y) against f0; set classes_, costs_. Returns (X, the class codes of y, f0's log-loss
        per row)."""
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_all_finite=self._nan_rule(),
                             ensure_min_samples=2)
        check_classification_targets(y)
        self.f0_ = f0 = self._fitted_f0(X, y)
        if isinstance(f0, lgb.Booster):  # classes 0 .. K - 1
            classes, f0_features = np.arange(max(f0.num_model_per_iteration(), 2)), f0.num_feature()
        else:
            classes, f0_features = getattr(f0, "classes_", None), getattr(f0, "n_features_in_", None)
        self.classes_ = np.unique(y) if classes is None else np.asarray(classes)
        codes, unknown = class_codes(self.classes_, y)
        if unknown.size:
            raise CEGBError(f"y holds classes {unknown[:10].tolist()} that f0 was not trained on (its classes: "
                            f"{self.classes_.tolist()})")
        if len(self.classes_) < 2:
            raise CEGBError(f"y should hold at least two classes, got {self.classes_.tolist()}")
        if f0_features is not None and f0_features != X.shape[1]:
            raise CEGBError(f"f0 was fitted on {f0_features} features, X has {X.shape[1]}")
        self.costs_ = self._resolved_costs(X.shape[1])
        f0_loss = -np.log(np.clip(self._f0_proba(X)[np.arange(len(y)), codes], 1e-15, 1.0))
        return X, codes, f0_loss

    @property
    def _num_scores(self) -> int:
        """Raw scores per row of f1: one logit for two classes, else one per class."""
        return saved.class_scores(len(self.classes_))

    def _set_threshold(self, score: np.ndarray) -> None:
        """The gate's threshold from its scores on the training rows: the share above it as close as ties allow
        to p_full (the soft q of most rows stays below 1/2, so the paper's rule g > 0 would send far fewer)."""
        self.gate_threshold_ = threshold_for(score, self.p_full)
        self.train_fraction_to_f0_ = float(np.mean(score > self.gate_threshold_))
        if abs(self.train_fraction_to_f0_ - self.p_full) > 0.05:
            warnings.warn(f"{type(self).__name__}: the gate's scores take too few values to send "
                          f"p_full={self.p_full:g} of the training rows to f0: {self.train_fraction_to_f0_:.3f} go "
                          f"(a gate that reads no feature sends none); a smaller {self._tradeoff} lets the gate tell "
                          "rows apart", NoSplitWarning, stacklevel=3)

    def _validated(self, X) -> np.ndarray:
        self._check_fitted()
        return validate_data(self, X, reset=False, dtype=np.float64, ensure_all_finite=self._nan_rule())

    def _f0_forest(self) -> Forest | None:
        """f0 as a Forest for its exact cost, or None when ``f0_usage`` gives it."""
        if self.f0_usage is not None:
            return None
        try:
            return to_forest(self.f0_)  # parsed once per model (io.models caches it)
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
        """The class of the largest probability of :meth:`predict_proba` (f1's or f0's, as the gate routes).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The rows.

        Returns
        -------
        ndarray of shape (n_samples,)
            One of ``classes_`` per row.
        """
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def _saved_state(self) -> tuple[dict, dict]:
        return {"classes": self.classes_.tolist(), "gate_threshold": self.gate_threshold_,
                "train_fraction_to_f0": getattr(self, "train_fraction_to_f0_", None)}, {}

    def _restore(self, state: dict, folder, manifest: dict) -> None:
        self.f0_ = self.f0  # given to load, fitted
        self.classes_ = saved.class_labels(state, least=1)
        self.gate_threshold_ = float(saved.array(state, "gate_threshold", (), finite=False))  # inf: p_full 0 or 1
        if state.get("train_fraction_to_f0") is not None:
            self.train_fraction_to_f0_ = float(saved.array(state, "train_fraction_to_f0", (), low=0.0))

    @classmethod
    def _upgrade(cls, manifest: dict) -> dict:
        """lightgbm_cegb 0.1.0's manifest (it kept p_full, the trade-off, the costs and the fitted fields; the
        other parameters take their defaults)."""
        knob = "tradeoff" if "tradeoff" in manifest else "lam"
        params = {"p_full": manifest["p_full"], "tradeoff": manifest[knob],
                  "feature_costs": FeatureCosts.from_dict(manifest["costs"])}
        state = {k: v for k, v in manifest.items() if k not in ("format", "version", "format_version", "estimator",
                                                                   "p_full", knob, "costs", "n_features_in")}
        return {**manifest, "params": saved.encode(params), "state": state, "feature_names_in": None}


def threshold_for(score: np.ndarray, p_full: float) -> float:
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


