"""Greedy Miser (Xu, Weinberger and Chapelle, "The Greedy Miser: Learning under Test-time Budgets", ICML 2012)
on the patched LightGBM.

Stage-wise regression: tree t is a depth-limited CART tree, grown breadth-first, that fits the negative gradient of
the loss with the squared error; a split on a feature (or group) no earlier tree used adds ``tradeoff * c`` to the
impurity (the paper's lambda), the set of used features being refreshed once per tree. Trees are added with a fixed
step (``learning_rate``, 0.1 by default). In LightGBM's terms: a custom objective whose hessian is the row weight
(first order: a leaf's value is the weighted mean of the negative gradient, a split's gain the decrease of the
squared error), ``tree_growth=depthwise``, ``num_leaves = 2 ** max_depth``, no regularisation, the costs as coupled
penalties with ``cegb_coupled_refresh=tree`` (patch 0005: inside a tree every split on a feature no earlier tree
used pays its cost; the paper's impurity charges it once per tree, in a node order it leaves open; see the
method's documentation page) and ``cegb_tradeoff = tradeoff``. The fitted models are
LightGBM models (``booster_``; their text is read by stock LightGBM), and ``tests/methods/test_greedy_miser.py``
checks their trees against an independent NumPy implementation of the paper's algorithm.

``tradeoff`` (lambda) weighs the sum over rows of the squared error of the tree's fit (not half of it). Costs: the lazy
and coupled cost of a feature (of a group) add up to its ``c``; split and tree costs (``FeatureCosts(split=,
tree=)``, the paper's evaluation cost ``e`` per tree) are in the accounting only, as in the paper, where
the number of trees is the evaluation budget.

Its length: three estimators (regressor, classifier, ranker) over one training loop on the patched LightGBM,
with the loss pieces each task needs.
"""

from __future__ import annotations

import copy

import lightgbm as lgb
import numpy as np
from scipy.special import expit, log_softmax, softmax
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from lightgbm_cegb.accounting import prediction_cost
from lightgbm_cegb.base import COSTS, SEED, BudgetedEstimator
from lightgbm_cegb.core.costs import FeatureCosts
from lightgbm_cegb.core.errors import CEGBError, NothingToTradeOff
from lightgbm_cegb.core.parallel import N_JOBS, resolve_n_jobs
from lightgbm_cegb.core.ranking_metrics import ndcg_at_k
from lightgbm_cegb.core.report import CostReport
from lightgbm_cegb.core.validation import NoneOr, Number, Satisfies, check_number, checked_weights
from lightgbm_cegb.io import saved
from lightgbm_cegb.io.lightgbm_text import loaded, trained
from lightgbm_cegb.io.models import to_forest

__all__ = ["GreedyMiserClassifier", "GreedyMiserRanker", "GreedyMiserRegressor"]


def miser_params(costs: FeatureCosts | None, tradeoff: float, num_features: int, num_class: int, *, max_depth: int,
                 learning_rate: float, min_samples_leaf: int, max_bin: int = 255, seed: int = 0,
                 n_jobs: int | None = None) -> dict:
    """LightGBM's parameters for Greedy Miser's trees (also ADAPT-GBRT's): depth-wise CART trees without
    regularisation, a feature's (group's) lazy plus coupled cost as its coupled penalty, refreshed per tree."""
    params = {"learning_rate": learning_rate, "num_leaves": 2 ** max_depth, "max_depth": max_depth,
              "tree_growth": "depthwise", "min_data_in_leaf": min_samples_leaf,
              # a side of weight 0 has no mean to fit (and LightGBM fails a check on one at 0.0)
              "min_sum_hessian_in_leaf": 1e-10, "lambda_l1": 0.0, "lambda_l2": 0.0, "min_gain_to_split": 0.0,
              "max_bin": max_bin, "min_data_in_bin": 1, "feature_pre_filter": False, "metric": "None",
              "verbose": -1, "deterministic": True, "seed": seed, "num_threads": resolve_n_jobs(n_jobs, 1 << 30)}
    if num_class > 1:
        params["num_class"] = num_class
    if costs is not None and tradeoff > 0:
        lazy, coupled, _ = costs.arrays(num_features)
        group_of, group_lazy, group_coupled = costs.group_arrays(num_features)
        params.update({"cegb_tradeoff": float(tradeoff), "cegb_penalty_feature_coupled": (lazy + coupled).tolist(),
                       "cegb_coupled_refresh": "tree"})
        if costs.groups:
            params.update({"cegb_feature_group": group_of.tolist(),
                           "cegb_penalty_group_coupled": (group_lazy + group_coupled).tolist()})
    return params


def log_loss_per_row(score: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """-log p(y) per row under raw scores (a column per class, or one logit for two classes)."""
    if score.ndim == 2:
        return -log_softmax(score, axis=1)[np.arange(len(codes)), codes.astype(np.int64)]
    return np.logaddexp(0.0, np.where(codes > 0, -score, score))


def proba_from_raw(score: np.ndarray) -> np.ndarray:
    """Class probabilities from raw scores (one logit for two classes, else a column per class)."""
    if score.ndim == 1:
        p = expit(score)
        return np.column_stack([1.0 - p, p])
    return softmax(score, axis=1)


def class_codes(classes: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index of each label in the sorted ``classes``, the labels not among them)."""
    codes = np.searchsorted(classes, y)
    known = (codes < len(classes)) & (classes[np.minimum(codes, len(classes) - 1)] == y)
    return codes, np.unique(y[~known])


class _GreedyMiser(BudgetedEstimator, BaseEstimator):
    """The estimators' shared fit: the paper's algorithm as a LightGBM configuration."""

    _losses: tuple[str, ...] = ()
    _constraints = {
        "feature_costs": COSTS, "tradeoff": Number(0.0), "n_estimators": Number(1, integer=True),
        "max_depth": Number(1, 30, integer=True),  # num_leaves = 2 ** max_depth
        "learning_rate": Number(0.0, low_open=True), "early_stopping_rounds": NoneOr(Number(1, integer=True)),
        "min_samples_leaf": Number(1, integer=True), "max_bin": Number(2, integer=True), "random_state": SEED,
        "n_jobs": N_JOBS,
    }

    def __init_subclass__(cls, **kwargs) -> None:
        """Each estimator's ``loss``: one of its class's losses, or None (the first)."""
        super().__init_subclass__(**kwargs)
        losses = cls._losses
        cls._constraints = {**cls._constraints, "loss": Satisfies(
            lambda loss: loss is None or (isinstance(loss, str) and loss in losses),
            f"one of {list(losses)} for {cls.__name__}", bad=("hinge", 1))}
    _fitted_attribute = "booster_"
    _probe = {"n_estimators": 1, "early_stopping_rounds": None}  # tradeoff_scale: the first tree

    def __init__(self, *, feature_costs=None, tradeoff: float = 0.0, n_estimators: int = 500, max_depth: int = 4,
                 learning_rate: float = 0.1, loss: str | None = None, early_stopping_rounds: int | None = 50,
                 min_samples_leaf: int = 1, max_bin: int = 255, random_state: int | None = None,
                 n_jobs: int | None = None) -> None:
        self.feature_costs = feature_costs
        self.tradeoff = tradeoff
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.loss = loss
        self.early_stopping_rounds = early_stopping_rounds
        self.min_samples_leaf = min_samples_leaf
        self.max_bin = max_bin
        self.random_state = random_state
        self.n_jobs = n_jobs

    # ------------------------------------------------------------------------------- configuration


    def _params(self, num_features: int, num_class: int) -> dict:
        return miser_params(self.costs_, self.tradeoff, num_features, num_class, max_depth=self.max_depth,
                            learning_rate=self.learning_rate, min_samples_leaf=self.min_samples_leaf,
                            max_bin=self.max_bin, seed=0 if self.random_state is None else self.random_state,
                            n_jobs=self.n_jobs)

    def _fit(self, X, y, sample_weight, eval_set, eval_sample_weight, group=None, eval_group=None,
             num_class: int = 1, callbacks=None):
        """Train ``booster_``: the gradient of ``self._gradient``, hessian the row weights; early stopping on
        the first validation set's ``self._metric``; the user's ``callbacks`` after it."""
        self.costs_ = self._resolved_costs(X.shape[1])
        weight = checked_weights(sample_weight, len(y)) * self._row_weight(y)
        names = self._lightgbm_feature_names()
        train = lgb.Dataset(X, y, weight=weight, group=group, feature_name=names, free_raw_data=False)
        shape = (len(y), num_class) if num_class > 1 else (len(y),)

        def objective(score, _):
            gradient = self._gradient(score.reshape(shape), y)
            return gradient * (weight[:, None] if num_class > 1 else weight), \
                np.broadcast_to(weight[:, None] if num_class > 1 else weight, shape).copy()

        params = {**self._params(X.shape[1], num_class), "objective": objective}
        valid_sets, user_callbacks, callbacks, feval = [], list(callbacks or ()), [], None
        if eval_set is not None and len(eval_set):
            eval_set, eval_sample_weight, eval_group = first_eval(eval_set, eval_sample_weight, eval_group)
            X_valid, y_valid = eval_set
            X_valid = validate_data(self, X_valid, reset=False, accept_sparse=["csr", "csc"], dtype=np.float64,
                                    ensure_all_finite="allow-nan")
            y_valid = self._encode(np.asarray(y_valid))
            valid_weight = None if eval_sample_weight is None else \
                checked_weights(eval_sample_weight, len(y_valid), "eval_sample_weight")
            valid_group = eval_group
            valid_sets = [lgb.Dataset(X_valid, y_valid, weight=valid_weight, group=valid_group, feature_name=names,
                                      reference=train)]
            name, higher_better = self._metric_name

            def feval(score, dataset):
                rows = len(dataset.get_label())
                value = self._metric(score.reshape((rows, num_class) if num_class > 1 else rows), y_valid,
                                     valid_weight, valid_group)
                return name, value, higher_better

            if self.early_stopping_rounds is not None:
                callbacks.append(lgb.early_stopping(self.early_stopping_rounds, first_metric_only=True, verbose=False))
        self.booster_ = trained(params, train, self.n_estimators, valid_sets=valid_sets, feval=feval,
                                callbacks=callbacks + user_callbacks)
        self.best_iteration_ = self.booster_.best_iteration or self.booster_.current_iteration()
        return self

    def _row_weight(self, y) -> np.ndarray | float:
        return 1.0

    def _encode(self, y):
        return y

    def _raw(self, X, num_iteration: int | None) -> np.ndarray:
        self._check_fitted()
        X = validate_data(self, X, reset=False, accept_sparse=["csr", "csc"], dtype=np.float64,
                          ensure_all_finite="allow-nan")
        return self.booster_.predict(X, num_iteration=self.best_iteration_ if num_iteration is None else num_iteration)

    def _validated(self, X, y):
        return validate_data(self, X, y, accept_sparse=["csr", "csc"], dtype=np.float64, ensure_all_finite="allow-nan",
                             y_numeric=not isinstance(self, ClassifierMixin), ensure_min_samples=2)

    @property
    def forest_(self):
        """The fitted trees as a ``Forest`` (what ``prediction_cost(model, X)`` and the package read)."""
        self._check_fitted()
        return to_forest(self.booster_)

    def _reads_features(self, X) -> bool:
        """Whether the model (to ``best_iteration_``) splits on a feature its trade-off weighs: one with a lazy or
        coupled cost, its own or its group's (split costs are the accounting's only). NothingToTradeOff when no
        feature has one (tradeoff_scale's first probe)."""
        penalised = self.costs_.penalised(self.n_features_in_, split=False)
        if not penalised.any():
            raise NothingToTradeOff(f"{type(self).__name__}.tradeoff_scale: no feature or group has a lazy or "
                                    "coupled cost; there is nothing to trade off")
        forest = to_forest(self.booster_)
        return bool(penalised[forest.feature[:forest.node_offset[forest.num_trees_for(self.best_iteration_)]]].any())

    def _saved_state(self) -> tuple[dict, dict]:
        state = {"best_iteration": self.best_iteration_}
        if hasattr(self, "classes_"):
            state["classes"] = self.classes_.tolist()
        return state, {"booster": self.booster_.model_to_string()}

    def _restore(self, state: dict, folder, manifest: dict) -> None:
        if getattr(self, "costs_", None) is None:  # fit always resolves one (every feature at 1 without costs)
            raise saved.damaged(state, "the manifest's costs should be the fitted cost model, got null")
        classifier = "classes" in state
        self.booster_ = saved.booster(folder, manifest, "booster", kinds=("own",), outputs=None if classifier else 1)
        self.best_iteration_ = saved.integer(state, "best_iteration", 0)
        if self.best_iteration_ > self.booster_.current_iteration():
            raise saved.damaged(state, f"best_iteration should be at most the model's "
                                       f"{self.booster_.current_iteration()} iterations, got {self.best_iteration_}")
        if classifier:  # as many as the model's outputs (one output: two classes)
            self.classes_ = saved.class_labels(state, count=max(2, self.booster_.num_model_per_iteration()))

    def prefix(self, n_iterations: int):
        """A copy of the fitted model holding only its first ``n_iterations`` iterations.

        A cheaper model (a sweep's prefix points), which predicts, costs, saves and serves like this one.

        Parameters
        ----------
        n_iterations : int
            Iterations kept, from 1 to the fitted model's number of iterations.

        Returns
        -------
        object
            The copy, of the same class, whose ``best_iteration_`` is ``n_iterations``.

        Raises
        ------
        CEGBError
            If ``n_iterations`` is not an integer in that range.
        """
        self._check_fitted()
        check_number(n_iterations, "n_iterations", 1, self.booster_.current_iteration(), integer=True)
        model = copy.copy(self)
        model.booster_ = loaded(self.booster_.model_to_string(num_iteration=n_iterations))
        model.best_iteration_ = n_iterations
        return model

    def prediction_cost(self, X, *, num_iteration: int | None = None, n_jobs: int | None = None) -> CostReport:
        """Exact per-row cost of the fitted model on X under ``feature_costs`` (the tree cost included).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The rows.
        num_iteration : int or None, default=None
            Iterations counted. None: those ``predict`` uses (``best_iteration_``: the best on validation with
            early stopping).
        n_jobs : int or None, default=None
            Threads (None: the CPUs this process may use).

        Returns
        -------
        CostReport
            The per-row acquisition and evaluation costs, and the features' usage.
        """
        self._check_fitted()
        X = validate_data(self, X, reset=False, accept_sparse=["csr", "csc"], dtype=np.float64,
                          ensure_all_finite="allow-nan")
        return prediction_cost(self.booster_, X, self.costs_, n_jobs=n_jobs,
                               num_iteration=self.best_iteration_ if num_iteration is None else num_iteration)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.allow_nan = True
        return tags


_DOC_PARAMETERS = """
    Parameters
    ----------
    feature_costs : FeatureCosts, lazy costs per column, mapping by feature name or None, default=None
        The cost model. None: every feature costs 1. ``c`` of each feature: its lazy plus coupled cost
        (groups: each group's, paid by its first member); ``FeatureCosts(tree=e)`` adds the evaluation cost
        ``e`` per tree to ``prediction_cost``.
    tradeoff : float, default=0.0
        The paper's lambda: a split on a feature no earlier tree used costs ``tradeoff * c`` in squared error
        (summed over the rows, weighted). 0: stage-wise regression without costs.
    n_estimators : int, default=500
        Trees (per class for a multiclass classifier); fewer with early stopping.
    max_depth : int, default=4
        Depth of the CART trees (the paper: 4 on Yahoo, 3 on Scene-15).
    learning_rate : float, default=0.1
        The step size.
    loss : str or None, default=None
        {losses} None: that one.
    early_stopping_rounds : int or None, default=50
        With ``eval_set``: stop when the validation {metric} has not improved for this many trees; prediction
        and cost then use the best iteration (``best_iteration_``). The paper keeps the best iteration.
    min_samples_leaf : int, default=1
        Fewest (unweighted) training rows in a leaf.
    max_bin : int, default=255
        LightGBM's histogram bins per feature: CART's exact thresholds when a feature has at most this many
        distinct values.
{extra}    random_state : int or None, default=None
        LightGBM's seed (None: 0; the algorithm itself is deterministic).
    n_jobs : int or None, default=None
        Threads (None: the CPUs this process may use).

    Attributes
    ----------
    booster_ : lightgbm.Booster
        The trees; ``booster_.predict`` gives raw scores (the model has a custom objective).
    best_iteration_ : int
        Iterations used by ``predict`` and ``prediction_cost``.
    costs_ : FeatureCosts
        The costs aligned to the columns (every feature 1 without ``feature_costs``).
    forest_ : Forest
        The fitted trees as a ``Forest`` (a property read from ``booster_``).
    n_features_in_ : int
        Number of columns of fit's X.
    feature_names_in_ : ndarray of shape (n_features,)
        The columns' names, when fit's X is a DataFrame.
{attributes}"""


class GreedyMiserRegressor(RegressorMixin, _GreedyMiser):
    __doc__ = "Greedy Miser regression (squared loss).\n" + _DOC_PARAMETERS.format(
        losses="'squared' (the only one: the paper's regression loss).", metric="squared error", extra="",
        attributes="")

    _losses = ("squared",)
    _metric_name = ("l2", False)

    def fit(self, X, y, *, sample_weight=None, eval_set=None, eval_sample_weight=None,
            callbacks=None) -> GreedyMiserRegressor:
        """Grow the trees on (X, y), with early stopping on the first validation set if there is one.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The training rows (NaN allowed).
        y : array-like of shape (n_samples,)
            The targets.
        sample_weight : array-like of shape (n_samples,) or None, default=None
            Weights of the rows (None: 1).
        eval_set : list of (X_valid, y_valid) or None, default=None
            Validation sets; the first one's squared error drives early stopping.
        eval_sample_weight : list of array-like or None, default=None
            Weights of the validation rows (the first one's are used).
        callbacks : list of callable or None, default=None
            LightGBM callbacks called after each round, as ``lgb.train`` takes them (after the early stopping).

        Returns
        -------
        self : object
            The fitted estimator.

        Raises
        ------
        CEGBError
            If a parameter is out of range.
        """
        self._check_params()
        X, y = self._validated(X, y)
        return self._fit(X, y.astype(np.float64), sample_weight, eval_set, eval_sample_weight, callbacks=callbacks)

    @staticmethod
    def _gradient(score, y):
        return score - y

    @staticmethod
    def _metric(score, y, weight, group):
        return float(np.average((score - y) ** 2, weights=weight))

    def predict(self, X, *, num_iteration: int | None = None) -> np.ndarray:
        """Predict the targets of X.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The rows.
        num_iteration : int or None, default=None
            Iterations used (None: ``best_iteration_``).

        Returns
        -------
        ndarray of shape (n_samples,)
            The predictions.
        """
        return self._raw(X, num_iteration)


def log_loss_gradient(score: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The gradient of the log-loss in the raw scores: ``sigmoid(score) - y`` (binary: score of shape (n,)), else
    the softmax minus the one-hot labels (score of shape (n, classes), y the class indices).

    Parameters
    ----------
    score : ndarray of shape (n,) or (n, n_classes)
        The raw scores.
    y : ndarray of shape (n,)
        The labels (binary: 0 or 1; else the class indices).

    Returns
    -------
    ndarray
        The gradient, of score's shape.
    """
    if score.ndim == 1:
        return expit(score) - y
    gradient = softmax(score, axis=1)
    gradient[np.arange(len(y)), y.astype(np.int64)] -= 1.0
    return gradient


class GreedyMiserClassifier(ClassifierMixin, _GreedyMiser):
    __doc__ = "Greedy Miser classification (binary and multiclass log-loss).\n" + _DOC_PARAMETERS.format(
        losses="'log_loss' (the only one: the logistic loss, the multi-class log-loss of Scene-15 with "
               "more than two classes; each class its own tree per iteration).", metric="log-loss", extra="",
        attributes="    classes_ : ndarray of shape (n_classes,)\n        The class labels, sorted.\n")

    _losses = ("log_loss",)
    _metric_name = ("log_loss", False)

    def fit(self, X, y, *, sample_weight=None, eval_set=None, eval_sample_weight=None,
            callbacks=None) -> GreedyMiserClassifier:
        """Grow the trees on (X, y), with early stopping on the first validation set if there is one.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The training rows (NaN allowed).
        y : array-like of shape (n_samples,)
            The class labels (at least two classes).
        sample_weight : array-like of shape (n_samples,) or None, default=None
            Weights of the rows (None: 1).
        eval_set : list of (X_valid, y_valid) or None, default=None
            Validation sets; the first one's log-loss drives early stopping. Its labels should be among the
            training classes.
        eval_sample_weight : list of array-like or None, default=None
            Weights of the validation rows (the first one's are used).
        callbacks : list of callable or None, default=None
            LightGBM callbacks called after each round, as ``lgb.train`` takes them (after the early stopping).

        Returns
        -------
        self : object
            The fitted estimator.

        Raises
        ------
        CEGBError
            If a parameter is out of range, y holds fewer than two classes, or the validation labels are not
            among the training classes.
        """
        self._check_params()
        X, y = self._validated(X, y)
        check_classification_targets(y)
        self.classes_ = np.unique(y)
        if len(self.classes_) < 2:
            raise CEGBError(f"y should hold at least two classes, got {self.classes_.tolist()}")
        codes = self._encode(y)
        return self._fit(X, codes, sample_weight, eval_set, eval_sample_weight,
                         num_class=saved.class_scores(len(self.classes_)), callbacks=callbacks)

    def _encode(self, y):
        codes, unknown = class_codes(self.classes_, y)
        if unknown.size:
            raise CEGBError(f"eval_set: labels {unknown[:10].tolist()} are not among the training "
                            f"classes {self.classes_.tolist()}")
        return codes.astype(np.float64)

    _gradient = staticmethod(log_loss_gradient)

    @staticmethod
    def _metric(score, y, weight, group):
        return float(np.average(log_loss_per_row(score, y), weights=weight))

    def predict_proba(self, X, *, num_iteration: int | None = None) -> np.ndarray:
        """Predict the class probabilities of X.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The rows.
        num_iteration : int or None, default=None
            Iterations used (None: ``best_iteration_``).

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            The probability of each class of ``classes_`` (logistic or softmax of the raw scores).
        """
        return proba_from_raw(self._raw(X, num_iteration))

    def predict(self, X, *, num_iteration: int | None = None) -> np.ndarray:
        """Predict the classes of X: the most probable one.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The rows.
        num_iteration : int or None, default=None
            Iterations used (None: ``best_iteration_``).

        Returns
        -------
        ndarray of shape (n_samples,)
            The predicted class labels.
        """
        proba = self.predict_proba(X, num_iteration=num_iteration)
        return self.classes_[np.argmax(proba, axis=1)]


class GreedyMiserRanker(_GreedyMiser):
    __doc__ = ("Greedy Miser ranking (squared loss on the relevance labels, early stopping on NDCG@5).\n\n"
               "    Each irrelevant (label 0) document is weighted ``irrelevant_weight`` times (the paper replicates "
               "them 10 times;\n    a weight is the same for the fit and leaves ``min_samples_leaf`` unweighted).\n"
               + _DOC_PARAMETERS.format(losses="'squared' (the only one).", metric="NDCG@5", attributes="",
                                        extra="    irrelevant_weight : float, default=10.0\n        Weight of each "
                                              "label-0 document (> 0).\n"))

    _losses = ("squared",)
    _constraints = {**_GreedyMiser._constraints, "irrelevant_weight": Number(0.0, low_open=True)}
    _metric_name = ("ndcg@5", True)

    def __init__(self, *, feature_costs=None, tradeoff: float = 0.0, n_estimators: int = 500, max_depth: int = 4,
                 learning_rate: float = 0.1, loss: str | None = None, early_stopping_rounds: int | None = 50,
                 min_samples_leaf: int = 1, max_bin: int = 255, irrelevant_weight: float = 10.0,
                 random_state: int | None = None, n_jobs: int | None = None) -> None:
        super().__init__(feature_costs=feature_costs, tradeoff=tradeoff, n_estimators=n_estimators, max_depth=max_depth,
                         learning_rate=learning_rate, loss=loss, early_stopping_rounds=early_stopping_rounds,
                         min_samples_leaf=min_samples_leaf, max_bin=max_bin, random_state=random_state,
                         n_jobs=n_jobs)
        self.irrelevant_weight = irrelevant_weight

    def fit(self, X, y, *, group=None, sample_weight=None, eval_set=None, eval_group=None,
            eval_sample_weight=None, callbacks=None) -> GreedyMiserRanker:
        """Grow the trees on (X, y), with early stopping on the first validation set's NDCG@5 if there is one.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The training rows (NaN allowed), query by query.
        y : array-like of shape (n_samples,)
            The relevance labels (0: irrelevant).
        group : array-like of shape (n_queries,)
            The sizes of the consecutive queries of X (required).
        sample_weight : array-like of shape (n_samples,) or None, default=None
            Weights of the rows (None: 1), multiplied by ``irrelevant_weight`` for label-0 documents.
        eval_set : list of (X_valid, y_valid) or None, default=None
            Validation sets; the first one's NDCG@5 drives early stopping.
        eval_group : list of array-like or None, default=None
            The query sizes of each validation set (required with ``eval_set``).
        eval_sample_weight : list of array-like or None, default=None
            Weights of the validation rows (the first one's are used).
        callbacks : list of callable or None, default=None
            LightGBM callbacks called after each round, as ``lgb.train`` takes them (after the early stopping).

        Returns
        -------
        self : object
            The fitted estimator.

        Raises
        ------
        CEGBError
            If a parameter is out of range, or ``group`` (or, with ``eval_set``, ``eval_group``) is missing.
        """
        self._check_params()
        if group is None:
            raise CEGBError("group: a ranker needs the query sizes of the training rows (group=[...])")
        if eval_set and not eval_group:
            raise CEGBError("eval_group: a ranker needs the query sizes of the validation rows (eval_group=[...])")
        X, y = self._validated(X, y)
        return self._fit(X, y.astype(np.float64), sample_weight, eval_set, eval_sample_weight, group, eval_group,
                         callbacks=callbacks)

    def _row_weight(self, y):
        return np.where(y == 0, float(self.irrelevant_weight), 1.0)

    _gradient = staticmethod(GreedyMiserRegressor._gradient)

    @staticmethod
    def _metric(score, y, weight, group):
        return ndcg_at_k(y, score, group, 5)

    def predict(self, X, *, num_iteration: int | None = None) -> np.ndarray:
        """Predict the ranking scores of X (higher: ranked first).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The rows.
        num_iteration : int or None, default=None
            Iterations used (None: ``best_iteration_``).

        Returns
        -------
        ndarray of shape (n_samples,)
            The scores.
        """
        return self._raw(X, num_iteration)


def first_eval(eval_set, eval_sample_weight, eval_group) -> tuple:
    """The first validation set of ``fit``'s arguments, as LightGBM takes them: ``eval_set`` a list of (X, y) or
    one (X, y); ``eval_sample_weight`` and ``eval_group`` lists with one entry per set (or None). Returns
    ((X, y), its weights or None, its query sizes or None); a CEGBError naming the argument otherwise."""
    first = eval_set
    if isinstance(eval_set, list) or (isinstance(eval_set, tuple) and len(eval_set) and
                                      isinstance(eval_set[0], tuple)):
        first = eval_set[0]
    if not isinstance(first, tuple) or len(first) != 2:
        raise CEGBError(f"eval_set should be a list of (X, y) pairs or one (X, y), got {type(eval_set).__name__}")

    def entry(values, name):
        if values is None:
            return None
        if not isinstance(values, (list, tuple)):
            raise CEGBError(f"{name} should be a list with one entry per set of eval_set, got "
                            f"{type(values).__name__}")
        return values[0] if len(values) else None
    return first, entry(eval_sample_weight, "eval_sample_weight"), entry(eval_group, "eval_group")
