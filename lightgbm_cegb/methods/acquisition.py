"""Instance-adaptive feature acquisition: for each input, which feature to buy next and when to stop, from the
values bought so far.

:class:`AdaptiveAcquisitionClassifier` holds one LightGBM classifier that predicts from any subset of the
features (trained on copies of the training rows with random subsets of the units hidden as missing values, so
that a missing value means "not acquired") and a greedy policy on top of it. A *unit* is what one purchase
buys: a feature group of the cost model (all its members at once) or an ungrouped feature.

For a row in state (acquired units S, their values), with class probabilities ``p = model(x_S)``, the policy
scores every unit u not acquired yet by its expected gain per unit of cost, ``value(u) = gain(u) / cost(u)``,
where, with ``gain="accuracy"`` (the default),

    gain(u) = sum_a max_c p_c P_u[c, a] - max_c p_c

and with ``gain="entropy"`` the mutual information of u and the class, ``H(p) - sum_a P(a) H(p | a)``.
``P_u[c, a]`` is the probability that u shows outcome ``a`` in a row of class c: the training values' quantile
bins of a feature (its missing values one more bin), or for a group the training rows' joint values at a sample
of rows, weighted under each class by the product of its members' bin probabilities (members independent given
the class). ``sum_a max_c p_c P_u[c, a]`` is the accuracy of the Bayes decision after seeing u, when u is
independent of the units already seen given the class (naive Bayes; the model itself sees every dependence;
gains below ``GAIN_TOLERANCE``, 1e-12, count as 0). The policy acquires the unit of the highest value while that
value is above ``tradeoff`` and the unit fits the row's ``max_cost``, then asks the model again; it stops
otherwise. The first decision is the same for every row (nothing is known yet); later ones differ from row to
row. A unit that costs nothing is taken whenever it can gain something (its value is infinite).

``tradeoff``, ``max_cost`` and ``gain`` are read when predicting: ``set_params`` on a fitted model gives another
point of the cost-quality curve without fitting again.

Its length: the classifier, its policy's rounds (``PolicyRun``) and what both acquisition classifiers share
(``PolicyClassifier`` with its fit inputs, ``AcquisitionResult``, ``checked_data``, ``EvaluationCost``;
``methods.staged`` builds on them): one policy's parts, which read the same outcome tables.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import lightgbm as lgb
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from lightgbm_cegb._engine import PolicyBatch, PolicyPlan, StageStack
from lightgbm_cegb._engine import gains as gains_kernel
from lightgbm_cegb.accounting import prediction_cost
from lightgbm_cegb.base import COSTS, RANDOM_STATE, BudgetedEstimator, names_in
from lightgbm_cegb.core.cost_state import CostState
from lightgbm_cegb.core.costs import FeatureCosts
from lightgbm_cegb.core.errors import CEGBError, NothingToTradeOff, RoundsWarning, still_improving
from lightgbm_cegb.core.parallel import N_JOBS, resolve_n_jobs
from lightgbm_cegb.core.partitions import is_dask, over_partitions
from lightgbm_cegb.core.report import CostReport
from lightgbm_cegb.core.validation import (
    NoneOr,
    Number,
    OneOf,
    Satisfies,
    check_number,
    check_numeric_frame,
    check_params,
    checked_sequence,
)
from lightgbm_cegb.io import saved
from lightgbm_cegb.io.lightgbm_text import loaded
from lightgbm_cegb.io.models import num_trees_used, to_forest

#: cells (rows x features) of the masked training set that ``n_masks="auto"`` aims at
_AUTO_CELLS = 20_000_000
#: training rows from which ``num_leaves="auto"`` takes the second and the third value of a classifier's ladder (the
#: first serves the bundled sets, up to 20,000 rows, as before it; issue 60: at 47,533 rows of Forest Covertype a
#: staged stage of 15 leaves stopped at 1,000 rounds, 0.891 against plain LightGBM's 0.920 at 31 leaves; on 50,000
#: rows of make_classification 4 of 13 stages stopped at the cap, none with 31 leaves)
AUTO_LEAVES_FROM = (20_000, 200_000)
#: what ``class_weight`` takes: None (every row weighs 1), "balanced" or a dict of weights by class label (the labels
#: and the weights are checked against y's classes at fit)
CLASS_WEIGHT = Satisfies(lambda w: w is None or w == "balanced" if not isinstance(w, dict) else True,
                         "None, 'balanced' or a dict of weights by class label", bad=("auto", 1.0, ["balanced"]))
#: ``num_leaves``: an integer of LightGBM's range or "auto" (the classifier's ladder, by training rows)
NUM_LEAVES = Satisfies(lambda n: n == "auto" if isinstance(n, str) else
                       isinstance(n, (int, np.integer)) and not isinstance(n, bool) and 2 <= n <= 131072,
                       "an integer from 2 to 131072 or 'auto'", bad=(1, "many", 2.5, True))
#: ``learning_rate``: a finite number > 0 or "auto" (the adaptive classifier's ladder, by training rows)
LEARNING_RATE = Satisfies(lambda r: r == "auto" if isinstance(r, str) else
                          isinstance(r, (int, float, np.integer, np.floating)) and not isinstance(r, bool) and
                          bool(np.isfinite(r)) and r > 0, "a finite number > 0 or 'auto'", bad=(0.0, "fast", -1, True))
#: rows sampled per class for a group's joint outcomes
_GROUP_ATOMS_PER_CLASS = 8
#: what a purchase is expected to gain: the Bayes decision's accuracy, or the information on the class (nats)
GAINS = ("accuracy", "entropy")
#: gains below this are 0: the difference of two sums of probabilities carries rounding noise of about 1e-16, which
#: must not decide whether a row buys one more unit at ``tradeoff=0``
GAIN_TOLERANCE = 1e-12
#: objectives whose ``predict`` is the raw score, as a staged ranker's and regressor's stages write them
RAW_OUTPUT = frozenset({"regression", "lambdarank"})


@dataclass(frozen=True)
class AcquisitionResult:
    """What the acquisition policy did for each row (:meth:`AdaptiveAcquisitionClassifier.predict_result`).

    Parameters
    ----------
    proba : ndarray of shape (n_samples, n_classes)
        The class probabilities from the units acquired when the row stopped.
    order : ndarray of int of shape (n_samples, n_units)
        The units each row acquired, in order (indices into ``units``), -1 after its last.
    units : list of tuple of int
        The columns of each unit (a group's members, or one feature).
    known : ndarray of bool of shape (n_samples, n_features)
        The features each row acquired.
    cost : CostReport
        Each row's cost: the lazy costs of what it acquired (a group's own once), and the split and tree costs of
        each evaluation of the model (one before the first purchase and one after each).
    unit_names : list of str
        Each unit's name: its group's, or its feature's (a DataFrame's column; ``Column_<j>`` without names).
    """

    proba: np.ndarray
    order: np.ndarray
    units: list
    known: np.ndarray
    cost: CostReport
    unit_names: list

    @property
    def steps(self) -> np.ndarray:
        """Number of units each row acquired."""
        return (self.order >= 0).sum(axis=1)

    def purchases(self, row: int) -> list[str]:
        """The names of the units row ``row`` acquired, in order.

        Parameters
        ----------
        row : int
            The row's position.

        Returns
        -------
        list of str
            Its units' names (groups' or features').
        """
        return [self.unit_names[u] for u in self.order[row] if u >= 0]


def auto_value(rows: int, ladder: tuple, thresholds: tuple[int, int] = AUTO_LEAVES_FROM):
    """A setting "auto" for ``rows`` training rows: ``ladder``'s first value below ``thresholds[0]`` rows, its
    second below ``thresholds[1]``, its third from there on."""
    return ladder[int(np.searchsorted(thresholds, rows, side="right"))]


def class_weights(class_weight, classes: np.ndarray, codes: np.ndarray | None, *,
                  counts: np.ndarray | None = None) -> np.ndarray | None:
    """The weight of each class of ``classes`` by ``class_weight`` (None: none; "balanced": ``n / (n_classes *
    n_c)`` with ``n_c`` the rows of class c among ``codes``, the training rows' class indices, or ``counts[c]``
    where they are counted already; a dict: by label, 1 for a class it does not name), scikit-learn's rules."""
    if class_weight is None:
        return None
    from sklearn.utils.class_weight import compute_class_weight
    if counts is not None and isinstance(class_weight, str):
        if not counts.all():
            raise CEGBError(f"class_weight='balanced' weighs each class by its training rows: class "
                            f"{classes[np.flatnonzero(counts == 0)[0]].item()!r} has none")
        return int(counts.sum()) / (len(classes) * counts.astype(np.float64))  # compute_class_weight's arithmetic
    try:
        return compute_class_weight(class_weight, classes=np.arange(len(classes)), y=codes) \
            if isinstance(class_weight, str) else \
            compute_class_weight(class_weight, classes=classes, y=classes if codes is None else classes[codes])
    except ValueError as exc:
        raise CEGBError(f"class_weight should be None, 'balanced' or a dict of weights by class label "
                        f"{classes.tolist()!r:.80}: {exc}") from None


def auto_masks(rows: int, num_features: int) -> int:
    """The copies per training row ``n_masks="auto"`` makes of ``rows`` x ``num_features``: as many as keep them
    within 20 million cells, from 1 to 16."""
    return int(np.clip(_AUTO_CELLS // max(rows * num_features, 1), 1, 16))


class PolicyClassifier(BudgetedEstimator, ClassifierMixin, BaseEstimator):
    """The base of the package's classifiers that decide per row what to buy: :class:`AdaptiveAcquisitionClassifier`
    and :class:`~lightgbm_cegb.methods.staged.StagedAcquisitionClassifier`.

    A subclass fits ``classes_``, ``units_`` and ``unit_cost_``, names the parameters read when predicting in
    ``_policy_params`` (checked again there: ``set_params`` changes them on a fitted model) and gives its run in
    ``_run(n)``: an object with ``requests()`` ((unit, rows) pairs, empty when every row has stopped),
    ``deliver(unit, rows, values, pay=True)``, ``evaluate()``, ``drop(rows)``, ``proba`` and ``result()`` (an
    :class:`AcquisitionResult`), which ``predict_result`` drives with the values of X and ``LazyPredictor`` with
    the values it fetches.
    """

    _abstract = True  # a base of estimators (selection.chosen.estimator_class)

    _policy_params: tuple[str, ...] = ()
    #: the training rows from which ``num_leaves="auto"`` (and ``learning_rate="auto"``, where a subclass takes it)
    #: take their ladders' second and third values
    _auto_from = AUTO_LEAVES_FROM

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    def _check_policy(self) -> None:
        """Check the parameters read when predicting (``_policy_params``)."""
        check_params(self, self._constraints, self._policy_params)

    #: LazyPredictor's methods of the model, and their arguments (passed to ``__lightgbm_cegb_policy__``)
    _policy_methods = {"predict": (), "predict_proba": ()}

    def __lightgbm_cegb_policy__(self, n: int):
        """A run for ``n`` rows that are told the values of the units they ask for: how ``predict_result`` and
        ``LazyPredictor`` (which fetches them) drive it."""
        self._check_fitted()
        self._check_policy()
        return self._run(n)

    def _output(self, proba: np.ndarray, method: str) -> np.ndarray:
        """What ``method`` ("predict" or "predict_proba") answers for rows of class probabilities ``proba``."""
        return proba if method == "predict_proba" else self.classes_[proba.argmax(axis=1)]

    def _checked_rows(self, X) -> np.ndarray:
        self._check_fitted()
        return checked_data(self, "X", X, reset=False)

    def predict_result(self, X) -> AcquisitionResult:
        """What each row buys, in order, its prediction and its cost.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The rows, every value known (only those bought are read).

        Returns
        -------
        AcquisitionResult
            The probabilities, the order of acquisition, the acquired features and the costs.
        """
        X = self._checked_rows(X)
        return drive(self, X, self.__lightgbm_cegb_policy__(len(X))).result()

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities from what each row buys: ``predict_result(X).proba``, to the bit (a model whose policy
        is compiled runs every row through it in one call, without the accounting).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or a Dask array or DataFrame
            The rows (a Dask collection's partition by partition, where its scheduler runs them).

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            The probabilities of the classes of ``classes_``.
        """
        if is_dask(X):
            self._check_fitted()
            parts = [p for p in over_partitions(_of_rows, X, self, "predict_proba") if p is not None]
            return np.concatenate(parts) if parts else np.empty((0, len(self.classes_)))
        X = self._checked_rows(X)
        proba = self._compiled_proba(np.ascontiguousarray(X, dtype=np.float64))
        return self.predict_result(X).proba if proba is None else proba

    def _compiled_proba(self, X: np.ndarray) -> np.ndarray | None:
        """``predict_proba`` of the checked rows X by the compiled policy; None where the model has none."""
        return None

    def predict(self, X) -> np.ndarray:
        """The most probable class of each row, from what it buys.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or a Dask array or DataFrame
            The rows.

        Returns
        -------
        ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        return self._output(self.predict_proba(X), "predict")  # proba first: an unfitted model has no classes_

    def prediction_cost(self, X, *, n_jobs: int | None = None) -> CostReport:
        """The exact per-row cost of what each row buys on X (and of the classifiers' evaluations).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or a Dask array or DataFrame
            The rows (a Dask collection's partition by partition).
        n_jobs : int or None, default=None
            Unused (the classifiers' threads are the estimator's ``n_jobs``); accepted as by every estimator.

        Returns
        -------
        CostReport
            ``predict_result(X).cost``.
        """
        if is_dask(X):
            reports = [r for r in over_partitions(_of_rows, X, self, "prediction_cost") if r is not None]
            if not reports:
                raise CEGBError("X: a Dask collection without rows has no prediction cost")
            return CostReport.stacked(reports)
        return self.predict_result(X).cost

    def _pay(self, state: CostState, unit: int, rows: np.ndarray) -> None:
        """Charge ``rows`` of ``state`` for ``unit``'s columns (a group's own cost once per row)."""
        for f in self.units_[unit]:
            state.pay(f, rows)

    def _result(self, proba: np.ndarray, order: np.ndarray, known: np.ndarray, state: CostState,
                evaluation: np.ndarray) -> AcquisitionResult:
        """A run's result: its lazy costs from ``state``, plus the classifiers' ``evaluation`` costs."""
        cost = run_cost(self, state, evaluation)
        names = self._names_in() or [f"Column_{j}" for j in range(self.n_features_in_)]
        unit_names = [names[columns[0]] if group is None else str(group)
                      for group, columns, _ in self.costs_.units(self.n_features_in_)]
        return AcquisitionResult(proba=proba, order=order, units=list(self.units_), known=known, cost=cost,
                                 unit_names=unit_names)

    def _lightgbm_params(self, num_class: int, seed: int, n: int, train_rows: int) -> dict:
        """LightGBM's parameters of the classifiers for X of ``n`` rows, ``train_rows`` of them trained on (what
        ``num_leaves="auto"`` reads)."""
        leaves = auto_value(train_rows, self._auto_leaves, self._auto_from) if self.num_leaves == "auto" else \
            int(self.num_leaves)
        rate = auto_value(train_rows, self._auto_rates, self._auto_from) if self.learning_rate == "auto" else \
            float(self.learning_rate)
        return {"objective": "binary" if num_class == 2 else "multiclass", "learning_rate": rate,
                "num_leaves": leaves, "min_data_in_leaf": self.min_child_samples, "seed": seed,
                "deterministic": True, "verbose": -1, "num_threads": resolve_n_jobs(self.n_jobs, n),
                **({} if num_class == 2 else {"num_class": num_class})}

    def _boosted(self, params: dict, fit: tuple, stop: tuple | None, what: str, init=(None, None),
                 named: bool = True, callbacks=(), cut: bool = True) -> lgb.Booster:
        """A classifier trained on ``fit`` = (X, class codes), early stopped on ``stop`` (None: every round) and
        cut to its best iteration (the model file holds what predicts), the rows weighted by ``class_weight``, boosted
        from the raw scores ``init`` of the fitting and the stopping rows (None: LightGBM's start); a RoundsWarning
        names ``what`` when its held-out log loss still improved within ``early_stopping_rounds`` of
        ``n_estimators``. ``named=False``: X holds other columns than fit's (LightGBM's own names); ``callbacks``:
        LightGBM callbacks after the early stopping; ``cut``: as :func:`early_stopped`'s."""
        weights = class_weights(self.class_weight, self.classes_, fit[1])
        train_set = lgb.Dataset(fit[0], fit[1], weight=None if weights is None else weights[fit[1]],
                                init_score=init[0], feature_name=self._lightgbm_feature_names() if named else "auto")
        valid_set = None if stop is None else \
            lgb.Dataset(stop[0], stop[1], weight=None if weights is None else weights[stop[1]], init_score=init[1],
                        reference=train_set)
        return early_stopped(self, params, train_set, valid_set, what, "log loss", callbacks, cut)

    def _restore_units(self, state: dict) -> None:
        """``classes_``, ``units_`` and ``unit_cost_`` of a saved state, checked: the classes distinct labels of one
        kind (as ``np.unique`` of y gives them), the units as :func:`restore_units` checks them."""
        self.classes_ = saved.class_labels(state)
        restore_units(self, state)

    def _restored_classifier(self, state: dict, folder, manifest: dict, name: str) -> lgb.Booster:
        """The saved classifier ``name``, which must score the ``classes_`` (one score per row for two classes,
        one per class for more)."""
        return saved.booster(folder, manifest, name, kinds=("classification",),
                             outputs=saved.class_scores(len(self.classes_)))

    def _checked_eval_set(self, eval_set) -> tuple[np.ndarray, np.ndarray]:
        """``eval_set``'s (X_valid, its labels' class indices), checked: a pair, X_valid's columns as fit's, one
        label per row among ``classes_``."""
        if not (isinstance(eval_set, tuple) and len(eval_set) == 2):
            raise CEGBError(f"eval_set should be a tuple (X_valid, y_valid), got {type(eval_set).__name__}"
                            + (f" of length {len(eval_set)}" if isinstance(eval_set, (tuple, list)) else ""))
        X_valid, y_valid = eval_set
        X_valid = checked_data(self, "eval_set: X_valid", X_valid, reset=False)
        y_valid = np.asarray(y_valid)
        if y_valid.shape != (len(X_valid),):
            raise CEGBError(f"eval_set: y_valid should hold {len(X_valid)} labels (one per row of X_valid), got "
                            f"shape {y_valid.shape}")
        try:
            index = np.minimum(np.searchsorted(self.classes_, y_valid), len(self.classes_) - 1)
            known = (self.classes_[index] == y_valid).all()
        except TypeError:  # labels of another type than the classes'
            known = False
        if not known:
            raise CEGBError(f"eval_set: its labels should be among the training classes {self.classes_.tolist()}")
        return X_valid, index

    def _fit_inputs(self, X, y, eval_set) -> tuple:
        """What the fit of an acquisition classifier starts from: X and y checked (``validate_data``; NaN allowed), the
        classes (``classes_``), the costs (``costs_``, every feature costing 1 without ``feature_costs``), and the rows
        that stop early: ``eval_set``, or a held-out ``validation_fraction`` of the training rows.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The training rows.
        y : array-like of shape (n_samples,)
            Their labels (two or more classes).
        eval_set : tuple (X_valid, y_valid) or None
            Rows for early stopping.

        Returns
        -------
        tuple
            (X as float64, the labels' class indices, the training rows' positions, X_valid or None, its class
            indices or None, the RandomState of ``random_state``, LightGBM's seed drawn from it before the held-out
            rows).

        Raises
        ------
        CEGBError
            When :func:`checked_data` refuses X, y or eval_set's X_valid, y holds fewer than two classes, eval_set is
            not a pair or its labels are not one per row among the training classes, or the costs do not fit X.
        """
        X, y = checked_data(self, "X", X, y, ensure_min_samples=2)
        self.classes_, codes = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise CEGBError(f"y should hold at least two classes, got {len(self.classes_)}")
        n, num_features = X.shape
        self.costs_ = self._resolved_costs(num_features)
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(0, 2**31 - 1))
        if eval_set is not None:
            return X, codes, np.arange(n), *self._checked_eval_set(eval_set), rng, seed
        held = int(round(self.validation_fraction * n))
        permutation = rng.permutation(n)
        train, valid = np.sort(permutation[held:]), np.sort(permutation[:held])
        X_valid, valid_codes = (X[valid], codes[valid]) if held else (None, None)
        return X, codes, train, X_valid, valid_codes, rng, seed


class AdaptiveAcquisitionClassifier(PolicyClassifier):
    """Classifier that decides per input which feature (or feature group) to acquire next and when to stop.

    See the module's doc for the policy. ``fit`` trains one LightGBM classifier on copies of the training rows
    with random subsets of the units hidden (``n_masks`` copies per row; the number of hidden units is uniform,
    then the units uniformly among them), early stopped on the same kind of copies of ``eval_set`` (or of a
    ``validation_fraction`` of the training rows), and the class-conditional outcome tables of the units.

    Parameters
    ----------
    feature_costs : FeatureCosts, lazy costs per column, mapping or pandas Series by name, or None, default=None
        The cost model (None: every feature costs 1). A unit's price is its lazy cost (a group's own lazy cost
        plus its members'); when nothing has a lazy cost, its coupled cost.
    tradeoff : float, default=0.0
        A row acquires the best unit while its expected accuracy gain per unit of cost is above this (0: while
        any unit can change the prediction). Read when predicting.
    max_cost : float or None, default=None
        A hard cap on each row's acquisition cost: a unit whose price would take the row over it is not bought.
        Read when predicting.
    gain : {"accuracy", "entropy"}, default="accuracy"
        What a purchase is expected to gain: the accuracy of the Bayes decision after it (a row stops once no
        single purchase can change its prediction), or the information it gives on the class (the expected drop
        of the entropy of the class probabilities: rows go on buying while they are unsure). Read when predicting.
    n_masks : int or "auto", default="auto"
        Copies of each training row, each with its own hidden units ("auto": as many as keep the copies within
        20 million cells, from 1 to 16).
    n_bins : int, default=16
        Quantile bins of a feature's outcome tables (its missing values make one more).
    n_estimators : int, default=5000
        Most boosting rounds of the classifier (early stopped; a RoundsWarning when it still improved at the cap).
    learning_rate : float or "auto", default="auto"
        LightGBM's learning rate ("auto": 0.05 below 10,000 training rows, 0.1 from there on).
    num_leaves : int or "auto", default="auto"
        LightGBM's leaves per tree ("auto": 8 below 10,000 training rows, 32 below 200,000, 64 from there on).
        Measured on Fashion-MNIST's four tops (16,800 training rows, 336 columns, 4 classes; the best validation
        accuracy within 3 / 6 / 10 of the policy's tradeoffs and caps): 8 leaves at 0.05 took 182 s for 0.752 /
        0.765 / 0.802, 32 leaves at 0.1 took 65 s for 0.748 / 0.771 / 0.805.
    min_child_samples : int, default=10
        LightGBM's ``min_data_in_leaf``.
    class_weight : None, "balanced" or dict, default=None
        The weight of a training row by its class (the rows that stop early too), as scikit-learn's classifiers
        take it: none, "balanced" (each class weighs the same in all) or a dict by class label. Balanced, the
        classifier's probabilities are those of balanced classes: on a 10%-positive set a row that knows nothing is
        at 0.5 and a purchase can change its predicted class (unweighted, it is negative whatever one unit shows,
        and the accuracy gain buys nothing). For metrics that weigh the classes equally (F1, balanced accuracy).
    validation_fraction : float, default=0.2
        Share of the training rows held out for early stopping when ``fit`` gets no ``eval_set`` (0: no early
        stopping).
    early_stopping_rounds : int, default=30
        Rounds without improvement of the held-out log loss before training stops.
    policy_rounds : int, default=0
        Times the classifier is trained again with, beside the random subsets, ``n_masks`` states per row that the
        policy (accuracy gain, ``tradeoff`` 0) passes through with the previous classifier: random prefixes of each
        row's purchases (as DAgger trains on the states its own policy visits). Measured (one split each, the best
        validation point within each budget): 1 is better on MNIST (0.962 against 0.947 at 15 pixels, 0.975
        against 0.964 at 33) and on HIGGS at 35 or more cost units, worse on CUBE's five instances (0.633 against
        0.661 at 4 features, 0.755 against 0.778 at 6): a surer classifier stops earlier. ``selection`` fits both.
    random_state : int, RandomState or None, default=None
        Seed of the masks, the split and LightGBM.
    n_jobs : int or None, default=None
        Threads of LightGBM (None: the CPUs this process may use).

    Attributes
    ----------
    classifier_ : lightgbm.Booster
        The classifier that predicts from any subset (unacquired values are missing).
    classes_ : ndarray of shape (n_classes,)
        The class labels.
    costs_ : FeatureCosts
        The costs aligned to the columns.
    units_ : list of tuple of int
        The columns of each unit: the groups of the costs (in their order), then the ungrouped features.
    unit_cost_ : ndarray of shape (n_units,)
        Each unit's price.
    tables_ : ndarray of shape (n_units, n_classes, n_outcomes)
        ``tables_[u, c, a]``: the probability of outcome a of unit u in a row of class c (zero-padded).
    prior_ : ndarray of shape (n_classes,)
        The classifier's probabilities with nothing acquired.
    n_features_in_ : int
        Number of features seen by ``fit``.
    feature_names_in_ : ndarray of shape (n_features,)
        Names of the features seen by ``fit`` (a DataFrame's columns).

    Raises
    ------
    CEGBError
        When a parameter is out of range, y holds fewer than two classes, or the costs do not fit X.
    """

    _tradeoff = "tradeoff"
    _fitted_attribute = "classifier_"
    _auto_leaves = (8, 32, 64)
    _auto_rates = (0.05, 0.1, 0.1)
    #: below 10,000 training rows (the bundled sets) as before issue 59; above, the copies of the rows hold enough
    #: to fit more per tree, and 8 leaves at 0.05 took thousands of rounds (2,134 x 4 classes on the tops)
    _auto_from = (10_000, 200_000)

    _policy_params = ("tradeoff", "max_cost", "gain")
    _constraints = {
        "feature_costs": COSTS, "tradeoff": Number(0.0), "max_cost": NoneOr(Number(0.0)), "gain": OneOf(GAINS),
        "n_masks": Satisfies(lambda n: n == "auto" if isinstance(n, str) else
                             isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1,
                             "an integer >= 1 or 'auto'", bad=(0, "all", 1.5, True)),
        "n_bins": Number(2, 1024, integer=True), "n_estimators": Number(1, integer=True),
        "learning_rate": LEARNING_RATE, "num_leaves": NUM_LEAVES, "class_weight": CLASS_WEIGHT,
        "min_child_samples": Number(1, integer=True), "validation_fraction": Number(0.0, 0.9),
        "early_stopping_rounds": Number(1, integer=True), "policy_rounds": Number(0, 10, integer=True),
        "random_state": RANDOM_STATE, "n_jobs": N_JOBS,
    }

    def __init__(self, *, feature_costs=None, tradeoff: float = 0.0, max_cost: float | None = None,
                 gain: str = "accuracy", n_masks="auto", n_bins: int = 16, n_estimators: int = 5000,
                 learning_rate="auto", num_leaves="auto", min_child_samples: int = 10,
                 class_weight=None, validation_fraction: float = 0.2, early_stopping_rounds: int = 30,
                 policy_rounds: int = 0, random_state=None, n_jobs: int | None = None) -> None:
        self.feature_costs = feature_costs
        self.tradeoff = tradeoff
        self.max_cost = max_cost
        self.gain = gain
        self.n_masks = n_masks
        self.n_bins = n_bins
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.class_weight = class_weight
        self.validation_fraction = validation_fraction
        self.early_stopping_rounds = early_stopping_rounds
        self.policy_rounds = policy_rounds
        self.random_state = random_state
        self.n_jobs = n_jobs

    # ------------------------------------------------------------------------------------------------ fit

    def fit(self, X, y, *, eval_set=None, callbacks=None):
        """Train the classifier on masked copies of the rows and build the units' outcome tables.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The training rows (NaN: a missing value).
        y : array-like of shape (n_samples,)
            The class labels (two or more classes).
        eval_set : tuple (X_valid, y_valid), optional
            Rows for early stopping (masked as the training rows); without it, ``validation_fraction`` of the
            training rows are held out.
        callbacks : list of callable, optional
            LightGBM callbacks called after each round of each training of the classifier, as ``lgb.train`` takes
            them (after the early stopping).

        Returns
        -------
        AdaptiveAcquisitionClassifier
            The fitted estimator.
        """
        for _ in self.fit_rounds(X, y, eval_set, callbacks):
            pass
        return self

    def fit_rounds(self, X, y, eval_set, callbacks=None):
        """``fit``, one training of the classifier at a time: after each, yields the round's number (0: on the
        random subsets only); this estimator is then fitted as with ``policy_rounds`` set to that number, to the
        bit (a sweep reads round 0 on its way to round 1 instead of fitting both).

        Parameters
        ----------
        X, y, eval_set, callbacks
            As :meth:`fit` takes them.

        Yields
        ------
        int
            The round just fitted, from 0 to ``policy_rounds``.
        """
        self._check_params()
        X, codes, train, X_valid, valid_codes, rng, seed = self._fit_inputs(X, y, eval_set)
        n, num_features = X.shape
        units = self.costs_.units(num_features)
        self.units_, self.unit_cost_ = [columns for _, columns, _ in units], np.array([p for _, _, p in units])
        copies = self._copies(len(train), num_features)
        num_class = len(self.classes_)
        params = self._lightgbm_params(num_class, seed, n, len(train))
        self.tables_ = _tables(X[train], codes[train], num_class, self.units_, self.n_bins, rng)
        X_fit, y_fit = self._masked(X[train], copies, rng), np.tile(codes[train], copies)
        stopping = X_valid is not None and len(X_valid) > 0  # early stopping on masked copies of X_valid
        if stopping:
            X_stop, y_stop = self._masked(X_valid, copies, rng), np.tile(valid_codes, copies)
        for round_ in range(self.policy_rounds + 1):
            if round_:  # the states the policy visits, beside the random ones (DAgger-like)
                X_fit = np.vstack([X_fit, self._visited(X[train], copies, rng)])
                y_fit = np.concatenate([y_fit, np.repeat(codes[train], copies)])
                if stopping:
                    X_stop = np.vstack([X_stop, self._visited(X_valid, copies, rng)])
                    y_stop = np.concatenate([y_stop, np.repeat(valid_codes, copies)])
            booster = self._boosted(params, (X_fit, y_fit), (X_stop, y_stop) if stopping else None,
                                    f"the classifier of policy round {round_}", callbacks=callbacks or ())
            self.classifier_ = booster
            self._compile()
            self.prior_ = self._proba(np.full((1, num_features), np.nan))[0]
            yield round_

    def _copies(self, n: int, num_features: int) -> int:
        return int(self.n_masks) if self.n_masks != "auto" else auto_masks(n, num_features)

    def _masked(self, X: np.ndarray, copies: int, rng: np.random.RandomState) -> np.ndarray:
        """``copies`` copies of X (one after the other), each row with a random set of units hidden."""
        n, num_units = len(X), len(self.units_)
        hidden_units = rng.randint(0, num_units + 1, size=(n * copies, 1))
        ranks = rng.random_sample((n * copies, num_units)).argsort(axis=1).argsort(axis=1)
        unit_hidden = ranks < hidden_units
        out = np.tile(X, (copies, 1))
        for u, columns in enumerate(self.units_):
            out[np.ix_(unit_hidden[:, u], list(columns))] = np.nan
        return out

    def _visited(self, X: np.ndarray, copies: int, rng: np.random.RandomState) -> np.ndarray:
        """``copies`` states per row of X that the policy (accuracy gain, ``tradeoff`` 0, no cap) passes through
        with the current classifier: each a random prefix of the row's purchases, the rest hidden (row-major: the copies
        of row 0 first)."""
        policy = copy.copy(self).set_params(tradeoff=0.0, max_cost=None, gain="accuracy")
        # X: the fit's checked rows (a frame's names already read); bounded: the accuracy gain stops when no
        # purchase can help
        order = drive(policy, X, policy.__lightgbm_cegb_policy__(len(X))).result().order
        steps = (order >= 0).sum(axis=1)
        prefix = np.floor(rng.random_sample((len(X), copies)) * (steps[:, None] + 1)).astype(np.int64)
        bought_at = np.full((len(X), len(self.units_)), np.iinfo(np.int64).max)  # each unit's step in each row
        rows, taken = np.nonzero(order >= 0)
        bought_at[rows, order[rows, taken]] = taken
        unit_of = np.empty(X.shape[1], dtype=np.int64)
        for u, columns in enumerate(self.units_):
            unit_of[list(columns)] = u
        out = np.repeat(X, copies, axis=0)
        out[(bought_at[:, None, unit_of] >= prefix[:, :, None]).reshape(len(out), -1)] = np.nan
        return out

    # ----------------------------------------------------------------------------------------- the policy

    def _proba(self, X: np.ndarray) -> np.ndarray:
        """The classifier's probabilities of rows whose unknown values are NaN: LightGBM's ``predict``, to the bit (the
        classifier compiled by fit and load, where its output is one StageStack repeats)."""
        threads = resolve_n_jobs(self.n_jobs, len(X))
        cached = getattr(self, "_compiled", None)
        if cached is not None and cached[0] is self.classifier_ and cached[1] is not None:
            return cached[1].proba(np.ascontiguousarray(X, dtype=np.float64), 1, threads)
        p = self.classifier_.predict(X, num_threads=threads)
        return np.column_stack([1.0 - p, p]) if p.ndim == 1 else p

    def _compile(self) -> None:
        """The classifier compiled (what ``_proba`` reads), and the policy's plan (what a compiled run reads)."""
        num_class, num_features = len(self.classes_), self.n_features_in_
        stack = compiled_stages([self.classifier_], num_class, num_features, np.ones((2, num_features), dtype=np.uint8),
                                np.full(num_class, 1.0 / num_class))
        plan = None
        if stack is not None:
            lazy, _, split = self.costs_.arrays(num_features)
            group_of, group_lazy, _ = self.costs_.group_arrays(num_features)
            plan = PolicyPlan(stack, self.tables_, GAIN_TOLERANCE, self.unit_cost_, *unit_arrays(self.units_), lazy,
                              group_of, group_lazy, split, float(self.costs_.tree))
        self._compiled = (self.classifier_, stack, plan)

    def _compiled_proba(self, X: np.ndarray) -> np.ndarray | None:
        """Every row runs the compiled policy, every value given."""
        compiled = self.__lightgbm_cegb_batch__(X.copy(), np.ones(X.shape, dtype=bool))  # a batch writes into its X
        if compiled is None:
            return None
        batch = compiled[0]
        batch.advance()  # every value is given: no request, the run goes to its end
        return batch.proba

    def __lightgbm_cegb_batch__(self, X: np.ndarray, known: np.ndarray) -> tuple[PolicyBatch, Callable] | None:
        """A compiled run of the policy for rows ``X`` whose values ``known`` marks (how ``LazyPredictor`` serves the
        model, to the same purchases, payments and predictions as its policy run): (the run, ``output(proba,
        method)``); None where the classifier is not compiled. The run writes the values it is given into X and known
        (pass copies)."""
        self._check_fitted()
        self._check_policy()
        cached = getattr(self, "_compiled", None)
        if cached is None or cached[0] is not self.classifier_ or cached[2] is None:
            return None
        cap = np.inf if self.max_cost is None else float(self.max_cost) * (1 + 1e-12)
        return PolicyBatch(cached[2], X, known, self.prior_, self.gain == "entropy", float(self.tradeoff), cap,
                           resolve_n_jobs(self.n_jobs, len(X))), self._output

    def __lightgbm_cegb_batch_key__(self) -> tuple:
        """What ``__lightgbm_cegb_batch__``'s run depends on: a prepared row (``LazyPredictor.prepare``) makes its
        batch again when it changes."""
        return self.gain, self.tradeoff, self.max_cost, self.__dict__.get("classifier_")

    def gains(self, proba: np.ndarray) -> np.ndarray:
        """Each unit's expected gain for rows with class probabilities ``proba``, by ``gain`` (see the module).

        Parameters
        ----------
        proba : ndarray of shape (n_rows, n_classes)
            The rows' class probabilities.

        Returns
        -------
        ndarray of shape (n_rows, n_units)
            "accuracy": ``sum_a max_c proba_c tables_[u, c, a] - max_c proba_c``; "entropy": the entropy of
            ``proba`` minus the expected entropy of the posterior after seeing u (its mutual information with the
            class); 0 where it is below ``GAIN_TOLERANCE``.
        """
        self._check_fitted()
        proba = np.ascontiguousarray(proba, dtype=np.float64)
        if proba.ndim != 2 or proba.shape[1] != self.tables_.shape[1] or not np.isfinite(proba).all():
            raise CEGBError(f"proba should be finite, of shape (n_rows, {self.tables_.shape[1]} classes), got "
                            f"shape {proba.shape}{'' if np.isfinite(proba).all() else ' with non-finite values'}")
        out = np.empty((len(proba), len(self.tables_)))
        gains_kernel(proba, np.ascontiguousarray(self.tables_), out, self.gain == "entropy", GAIN_TOLERANCE,
                     resolve_n_jobs(self.n_jobs, len(proba)))
        return out

    def _values(self, gains: np.ndarray) -> np.ndarray:
        """Gain per unit of cost; a free unit's is infinite when it gains something."""
        cost = self.unit_cost_
        with np.errstate(divide="ignore", invalid="ignore"):
            values = gains / cost
        free = cost == 0
        values[:, free] = np.where(gains[:, free] > 0, np.inf, 0.0)
        return values

    def predict_results(self, X, tradeoffs) -> list[AcquisitionResult]:
        """:meth:`predict_result` at each of ``tradeoffs`` (the model's other settings as they are), from one run of
        the policy.

        A row's purchases at a trade-off are the first ones of its purchases at a smaller trade-off: it buys the
        same units in the same order, and stops at the first whose value is not above the trade-off. One run at
        the smallest trade-off, which records each purchase's value, the probabilities after it and the
        evaluation's cost, answers every one: each result equals ``predict_result`` with ``tradeoff`` set to that
        value, to the bit (the payments are replayed in the run's order).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The rows, every value known (the policy reads only those it acquires).
        tradeoffs : sequence of float
            The trade-offs (each a finite number >= 0).

        Returns
        -------
        list of AcquisitionResult
            One per trade-off, in their order.
        """
        tradeoffs = checked_sequence(tradeoffs, "tradeoffs", "finite numbers >= 0")
        for tradeoff in tradeoffs:
            check_number(tradeoff, "tradeoffs", 0.0)
        if not len(tradeoffs):
            return []
        trace = copy.copy(self).set_params(tradeoff=float(min(tradeoffs))).trace(X)
        return [trace.result(float(tradeoff)) for tradeoff in tradeoffs]

    def trace(self, X, record: bool = True) -> PolicyRun:
        """The policy run on X (at this model's tradeoff); with ``record``, recording what :meth:`PolicyRun.result`
        needs to answer any larger tradeoff (what :meth:`predict_results` and a sweep's points read).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The rows.
        record : bool, default=True
            Record the run's decisions for :meth:`PolicyRun.result`.

        Returns
        -------
        PolicyRun
            The run; ``run.result(tradeoff)`` is the result at any tradeoff at least this model's.
        """
        X = self._checked_rows(X)
        run = self.__lightgbm_cegb_policy__(len(X))
        if record:
            run.record()
        return drive(self, X, run)

    def _run(self, n: int) -> PolicyRun:
        return PolicyRun(self, n)

    def tradeoff_scale(self, X, y, **fit_params) -> float:
        """The smallest ``tradeoff`` at which the model fitted on (X, y) acquires nothing: the best value of the
        first decision, which is the same for every row.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The training rows.
        y : array-like of shape (n_samples,)
            The labels.
        **fit_params : dict
            As for ``fit``.

        Returns
        -------
        float
            The first decision's best gain per unit of cost (units that cost nothing aside).

        Raises
        ------
        NothingToTradeOff
            If no unit with a cost can change the prediction of a row that knows nothing (a CEGBError).
        """
        from sklearn.base import clone
        model = clone(self).fit(X, y, **fit_params)
        return model.first_value()

    def first_value(self) -> float:
        """The best gain per unit of cost of the first decision (of a fitted model), units that cost nothing aside:
        the smallest ``tradeoff`` at which no row acquires a unit with a cost.

        Returns
        -------
        float
            The value.

        Raises
        ------
        NothingToTradeOff
            If no unit with a cost can change the prediction of a row that knows nothing (a CEGBError).
        """
        self._check_fitted()
        gains = self.gains(self.prior_[None])[0]
        costly = self.unit_cost_ > 0
        values = gains[costly] / self.unit_cost_[costly]
        if not len(values) or values.max() <= 0:
            raise NothingToTradeOff("AdaptiveAcquisitionClassifier: no unit with a cost can change the prediction of a "
                                    f"row that knows nothing, at any tradeoff (gain={self.gain!r}; on imbalanced "
                                    "classes, class_weight='balanced' or gain='entropy' buys)")
        return float(values.max())

    # --------------------------------------------------------------------------------------- save / load

    def _saved_state(self) -> tuple[dict, dict]:
        return ({"classes": self.classes_, "units": [list(u) for u in self.units_], "unit_cost": self.unit_cost_,
                 "tables_shape": list(self.tables_.shape), "tables": self.tables_.reshape(-1)},
                {"classifier": self.classifier_.model_to_string()})

    def _restore(self, state: dict, folder, manifest: dict) -> None:
        num_features = self.n_features_in_
        self._restore_units(state)
        units = self.units_
        shape = tuple(saved.array(state, "tables_shape", (3,), np.int64, low=1))
        if shape[:2] != (len(units), len(self.classes_)):
            raise saved.damaged(state, f"tables_shape should be [{len(units)} units, {len(self.classes_)} classes, "
                                       f"outcomes], got {list(shape)}")
        self.tables_ = saved.distributions(
            state, "tables", saved.array(state, "tables", (int(np.prod(shape)),), low=0.0).reshape(shape))
        self.classifier_ = self._restored_classifier(state, folder, manifest, "classifier")
        self._compile()
        self.prior_ = self._proba(np.full((1, num_features), np.nan))[0]


def hidden(X: np.ndarray, columns: list[int]) -> np.ndarray:
    """A copy of X with every column outside ``columns`` missing (NaN): what a stage of those columns reads."""
    out = np.full(X.shape, np.nan)
    out[:, columns] = X[:, columns]
    return out


def _of_rows(X, model: PolicyClassifier, method: str):
    """``model.method(X)`` of one partition of a Dask collection; None for a partition without rows (a filter's)."""
    return None if len(X) == 0 else getattr(model, method)(X)


def unit_arrays(units: list) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, members) of policy units as the compiled runs take them: unit u's columns are
    ``members[offsets[u]:offsets[u + 1]]``.

    Parameters
    ----------
    units : list of sequences of int
        Each unit's columns.

    Returns
    -------
    tuple of ndarray
        The offsets (int64, one more than the units) and the members (int64).
    """
    return (np.cumsum([0] + [len(columns) for columns in units]).astype(np.int64),
            np.array([f for columns in units for f in columns], dtype=np.int64))


def output_scale(booster: lgb.Booster, objective: str | None, num_class: int) -> float | None:
    """The sigmoid scale of a binary classifier's ``objective`` (LightGBM's model text: ``binary sigmoid:1``), 0.0 for
    ``multiclass num_class:<num_class>`` and, with ``num_class`` 1, for an objective whose output is the raw score
    (``regression``, ``lambdarank``), None for any other (its output is not what StageStack computes).

    Parameters
    ----------
    booster : lightgbm.Booster
        The classifier (its parameters' ``sigmoid`` must be the text's: the text has 6 digits).
    objective : str or None
        Its objective as the model text writes it.
    num_class : int
        The classes it scores (1: a raw score).

    Returns
    -------
    float or None
        The scale, 0.0 or None.
    """
    name, *options = (objective or "").split(" ")
    if num_class == 1:
        return 0.0 if name in RAW_OUTPUT and not options else None
    if name == "binary" and num_class == 2 and len(options) == 1 and options[0].startswith("sigmoid:"):
        scale = float(options[0].split(":", 1)[1])
        # a Booster trained with a scale the text rounds predicts with its own
        return scale if scale > 0 and float((booster.params or {}).get("sigmoid", scale)) == scale else None
    return 0.0 if name == "multiclass" and num_class > 2 and options == [f"num_class:{num_class}"] else None


def compiled_stages(boosters: list, num_class: int, num_features: int, columns: np.ndarray,
                    prior: np.ndarray, continued: bool = False) -> StageStack | None:
    """LightGBM models compiled as the stages of one StageStack (stage k, from 1, is ``boosters[k - 1]`` reading the
    columns ``columns[k]`` marks; stage 0 the ``prior``), each with the trees its ``predict`` uses; None where a
    model's output is not one StageStack repeats (see :func:`output_scale`; rf's averaged trees and linear trees are
    not), or the classifiers' sigmoid scales differ.

    Parameters
    ----------
    boosters : list of lightgbm.Booster
        The classifiers.
    num_class : int
        The classes they score (1: a raw score each).
    num_features : int
        Their columns.
    columns : ndarray of uint8 of shape (len(boosters) + 1, num_features)
        The columns each stage reads.
    prior : ndarray of shape (num_class,)
        Stage 0's outputs.
    continued : bool, default=False
        Each stage's trees add to the scores of the stage below (see StageStack).

    Returns
    -------
    StageStack or None
        The compiled stages.
    """
    forests = [to_forest(booster) for booster in boosters]
    scales = {output_scale(booster, forest.objective, num_class) for booster, forest in zip(boosters, forests)}
    if None in scales or len(scales) > 1 or any(forest.average_output or forest.linear is not None
                                                for forest in forests):
        return None
    used = [num_trees_used(booster, forest, None) for booster, forest in zip(boosters, forests)]
    flats, offsets, values = ([getattr(forest, name) for forest in forests] for name in ("flat", "leaf_offset",
                                                                                          "leaf_value"))
    return StageStack(flats, used, offsets, values, num_features, columns, prior, scales.pop() if scales else 1.0,
                      continued)


class PolicyRun:
    """Rows on their way through the policy, step by step: ``requests()`` says which unit each row buys next
    (rows that stop leave), ``deliver`` hands over the values bought, ``evaluate`` asks the classifier again;
    ``result()`` once ``requests()`` is empty.

    Parameters
    ----------
    model : AdaptiveAcquisitionClassifier
        The fitted model.
    n : int
        Number of rows.
    """

    def __init__(self, model: AdaptiveAcquisitionClassifier, n: int) -> None:
        self.model = model
        num_features, num_units = model.n_features_in_, len(model.units_)
        self.X = np.full((n, num_features), np.nan)  # the values bought (NaN elsewhere), as the classifier sees them
        self.bought = np.zeros((n, num_units), dtype=bool)
        self.order = np.full((n, num_units), -1, dtype=np.int64)
        self.spent = np.zeros(n)
        self.proba = np.tile(model.prior_, (n, 1))
        self.cap = np.inf if model.max_cost is None else float(model.max_cost) * (1 + 1e-12)
        self.state = CostState(n, model.costs_, num_features)
        self.evaluation = EvaluationCost(model.classifier_, model.costs_, model.n_features_in_, n)
        self.evaluation.add(self.X, np.arange(n))
        self.active = np.arange(n)
        self.step = 0
        self.received = np.zeros(n, dtype=bool)
        self.recording: dict | None = None

    def requests(self) -> list[tuple[int, np.ndarray]]:
        """(unit, rows) for every unit some active row buys next, by unit; the rows that stop leave the run."""
        model, active = self.model, self.active
        if not len(active) or self.step == len(model.units_):
            self.active = active[:0]
            return []
        values = model._values(model.gains(self.proba[active]))
        values[self.bought[active] | (self.spent[active, None] + model.unit_cost_[None] > self.cap)] = -np.inf
        best = values.argmax(axis=1)  # ties: the first unit
        chosen = values[np.arange(len(active)), best]
        go = chosen > model.tradeoff
        self.active, best = active[go], best[go]
        self.order[self.active, self.step] = best
        if self.recording is not None:
            self.recording["value"][self.active, self.step] = chosen[go]
        return [(int(u), self.active[best == u]) for u in np.unique(best)]

    def deliver(self, unit: int, rows: np.ndarray, values: np.ndarray, *, pay: bool = True) -> None:
        """Rows ``rows`` (that asked for ``unit``) bought it: its columns' ``values`` (one row each), paid unless
        ``pay`` is False (values the caller already had)."""
        columns = list(self.model.units_[unit])
        self.X[np.ix_(rows, columns)] = values
        self.bought[rows, unit] = True
        self.spent[rows] += self.model.unit_cost_[unit]
        self.received[rows] = True
        if pay:
            self.model._pay(self.state, unit, rows)

    def output(self, method: str) -> np.ndarray:
        """What the model's ``method`` answers for every row from the probabilities it holds now."""
        return self.model._output(self.proba, method)

    def drop(self, rows: np.ndarray) -> None:
        """Rows that cannot go on (a failed fetch) leave the run."""
        self.active = self.active[~np.isin(self.active, rows)]

    def evaluate(self) -> None:
        """The classifier on what the rows that received something this step hold now; the next step."""
        rows = np.flatnonzero(self.received)
        if len(rows):
            self.proba[rows] = self.model._proba(self.X[rows])
            added = self.evaluation.add(self.X[rows], rows)
            if self.recording is not None:
                self.recording["steps"].append((rows, self.proba[rows], added))
        self.received[:] = False
        self.step += 1

    def record(self) -> None:
        """From now on (before the first step), keep the value of each purchase, and per step the rows that
        bought, their probabilities and the evaluation's cost after it: ``result(tradeoff)`` then answers any
        tradeoff at or above the run's."""
        self.recording = {"value": np.full(self.order.shape, np.nan), "steps": [],
                          "evaluation": self.evaluation.cost.copy()}

    def result(self, tradeoff: float | None = None) -> AcquisitionResult:
        """What the run did; with ``tradeoff`` (a recorded run, ``tradeoff`` at or above the model's), what a run
        at that tradeoff would have done: each row's purchases up to the first whose value is not above it, the
        probabilities after the last, the evaluations and the payments replayed in the run's order."""
        model = self.model
        if tradeoff is None:
            return self._result(self.proba, self.order, self.bought, self.state, self.evaluation.cost)
        if self.recording is None or not tradeoff >= model.tradeoff:
            raise CEGBError(f"tradeoff: a recorded run answers tradeoffs at or above its own ({model.tradeoff:g}), "
                            f"got {tradeoff!r}")
        above = self.recording["value"] > tradeoff  # NaN (no purchase) is not
        steps = np.where(above.all(axis=1), above.shape[1], above.argmin(axis=1))
        order = np.where(np.arange(above.shape[1]) < steps[:, None], self.order, -1)
        proba, evaluation = np.tile(model.prior_, (len(steps), 1)), self.recording["evaluation"].copy()
        for step, (rows, step_proba, added) in enumerate(self.recording["steps"]):
            took = steps[rows] > step
            proba[rows[took]] = step_proba[took]
            if added is not None:
                evaluation[rows[took]] += added[took]
        state = CostState(len(steps), model.costs_, self.X.shape[1])
        for step in range(int(steps.max(initial=0))):
            rows = np.flatnonzero(steps > step)
            for unit in np.unique(order[rows, step]):  # as deliver paid them: by unit, rows in order
                model._pay(state, unit, rows[order[rows, step] == unit])
        bought = np.zeros(self.bought.shape, dtype=bool)
        rows, steps_taken = np.nonzero(order >= 0)
        bought[rows, order[rows, steps_taken]] = True
        return self._result(proba, order, bought, state, evaluation)

    def _result(self, proba: np.ndarray, order: np.ndarray, bought: np.ndarray, state: CostState,
                evaluation: np.ndarray) -> AcquisitionResult:
        model = self.model
        member = np.zeros((len(model.units_), self.X.shape[1]), dtype=np.float32)
        for u, columns in enumerate(model.units_):
            member[u, list(columns)] = 1.0
        # a column is known where a unit holding it was bought; float32 counts (exact below 2**24) through BLAS, where a
        # boolean product loops in numpy (0.27 s a result on MNIST's 500 x 1,120 units)
        return model._result(proba, order, bought.astype(np.float32) @ member > 0, state, evaluation)


class EvaluationCost:
    """The split and tree costs of each evaluation of a classifier on rows' acquired values (zero, without computing
    anything, when the costs have none).

    Parameters
    ----------
    booster : lightgbm.Booster
        The classifier.
    costs : FeatureCosts
        The costs, aligned to its columns.
    num_features : int
        Its number of columns.
    n : int
        Number of rows.
    """

    def __init__(self, booster, costs: FeatureCosts, num_features: int, n: int) -> None:
        self.booster = booster
        self.cost = np.zeros(n)
        split = costs.arrays(num_features)[2]
        self.costs = FeatureCosts(split=split, tree=costs.tree) if costs.tree > 0 or split.any() else None

    def add(self, masked: np.ndarray, rows: np.ndarray) -> np.ndarray | None:
        """Charge ``rows`` one evaluation on their ``masked`` values.

        Parameters
        ----------
        masked : ndarray of shape (len(rows), num_features)
            The rows' values, NaN where not acquired.
        rows : ndarray of int
            The rows (positions in the run).

        Returns
        -------
        ndarray or None
            What each row paid (None: the costs have no split or tree cost).
        """
        if self.costs is None or not len(rows):
            return None
        added = prediction_cost(self.booster, masked, self.costs).evaluation
        self.cost[rows] += added
        return added


def drive(model, X: np.ndarray, run):
    """A policy ``run`` of ``model`` (its ``units_``) through the rows X (checked), each told the values of the
    units it asks for: how ``predict_result`` drives the package's policy models (``LazyPredictor`` fetches the
    values instead)."""
    while requests := run.requests():
        for unit, rows in requests:
            run.deliver(unit, rows, X[np.ix_(rows, list(model.units_[unit]))])
        run.evaluate()
    return run


def run_cost(estimator, state: CostState, evaluation: np.ndarray) -> CostReport:
    """The cost of a policy's run: the lazy costs ``state`` holds, plus the models' ``evaluation`` costs per row."""
    cost = state.report(estimator.costs_, names_in(estimator))
    return CostReport(acquisition=cost.acquisition, evaluation=cost.evaluation + evaluation, coupled=cost.coupled,
                      usage=cost.usage, feature_names=cost.feature_names, group_usage=cost.group_usage)


def early_stopped(estimator, params: dict, train_set: lgb.Dataset, valid_set: lgb.Dataset | None, what: str,
                  metric: str, callbacks=(), cut: bool = True) -> lgb.Booster:
    """A LightGBM model of ``estimator`` (its ``n_estimators`` and ``early_stopping_rounds``) trained on
    ``train_set``, early stopped on ``valid_set`` (None: every round) and cut to its best iteration (the model file
    holds what predicts); a RoundsWarning names ``what`` when the held-out ``metric`` was still improving at
    ``n_estimators`` (``still_improving``). ``callbacks``: LightGBM callbacks after the early stopping (one that ends
    the training at its current round, as the sweep's ``TimeCut`` does, keeps every round trained). ``cut=False``:
    the Booster as trained, to predict once at its ``best_iteration`` (a search's measure: the same predictions as
    the cut model's, without writing and reading it; no RoundsWarning)."""
    rounds, patience = estimator.n_estimators, estimator.early_stopping_rounds
    if valid_set is None:
        return lgb.train(params, train_set, rounds, callbacks=list(callbacks))
    # kept as trained: best_cut reads it into a Booster of its own (lgb.train would write and read it once more)
    booster = lgb.train(params, train_set, rounds, valid_sets=[valid_set], keep_training_booster=True,
                        callbacks=[lgb.early_stopping(patience, first_metric_only=True, verbose=False), *callbacks])
    return best_cut(estimator, booster, what, metric) if cut else booster


def best_cut(estimator, booster: lgb.Booster, what: str, metric: str) -> lgb.Booster:
    """``booster``, early stopped, cut to its best iteration (the model file holds what predicts); a RoundsWarning
    names ``what`` when the held-out ``metric`` was still improving at the estimator's ``n_estimators``."""
    rounds, patience = estimator.n_estimators, estimator.early_stopping_rounds
    if still_improving(booster.best_iteration, rounds, patience):
        warnings.warn(f"{type(estimator).__name__}: {what} reached n_estimators={rounds} while its held-out {metric} "
                      f"was still improving (best iteration {booster.best_iteration}): raise n_estimators or "
                      "learning_rate", RoundsWarning, stacklevel=5)
    return loaded(booster.model_to_string(num_iteration=booster.best_iteration))


def restore_units(estimator, state: dict) -> None:
    """``units_`` and ``unit_cost_`` of a saved state, checked: the units a partition of the columns, and both
    what ``FeatureCosts.units`` gives of the fitted costs (as fit sets them)."""
    if getattr(estimator, "costs_", None) is None:  # fit always resolves one (every feature at 1 without costs)
        raise saved.damaged(state, "the manifest's costs should be the fitted cost model, got null")
    num_features = estimator.n_features_in_
    units = state["units"]
    if not isinstance(units, list) or not units or any(
            not isinstance(u, list) or not u or any(isinstance(f, bool) or not isinstance(f, int)
                                                    or not 0 <= f < num_features for f in u) for u in units):
        raise saved.damaged(state, f"units should be lists of column indices below {num_features}, got "
                                   f"{units!r:.80}")
    # counts up to the largest column named only (not num_features of them: a manifest's n_features_in may be 10**12)
    times = np.bincount([f for u in units for f in u])
    if len(times) < num_features or (times != 1).any():
        column = int(np.flatnonzero(times != 1)[0]) if (times != 1).any() else len(times)
        count = times[column] if column < len(times) else 0
        raise saved.damaged(state, f"units should hold each of the {num_features} columns once (a partition of "
                                   f"the columns), got column {column} in {count} units")
    estimator.units_ = [tuple(u) for u in units]
    estimator.unit_cost_ = saved.array(state, "unit_cost", (len(units),), low=0.0)
    fitted = estimator.costs_.units(num_features)  # num_features is at most the columns the units name
    if estimator.units_ != [columns for _, columns, _ in fitted] or \
            not np.array_equal(estimator.unit_cost_, [price for _, _, price in fitted]):
        raise saved.damaged(state, f"units and unit_cost should be the fitted costs' units and their prices, "
                                   f"{[list(columns) for _, columns, _ in fitted]!r:.60} at "
                                   f"{[price for _, _, price in fitted]!r:.60}, got {units!r:.60} at "
                                   f"{estimator.unit_cost_.tolist()!r:.60}")


def checked_data(estimator, name: str, *data, **kwargs):
    """``validate_data(estimator, *data, **kwargs)`` as the acquisition classifiers read data: X (and y, the
    classification labels) as float64 rows, NaN a missing value; each refusal a CEGBError that names ``name``.

    Parameters
    ----------
    estimator : PolicyClassifier
        The estimator (its ``n_features_in_`` and ``feature_names_in_``, set or checked as ``kwargs`` say).
    name : str
        What the messages call X ("X", "eval_set: X_valid"); y is "y".
    *data : array-like
        X, or X and y.
    **kwargs : dict
        ``validate_data``'s (``reset``, ``ensure_min_samples``).

    Returns
    -------
    ndarray or tuple of ndarray
        What ``validate_data`` returns.

    Raises
    ------
    CEGBError
        For a pandas category column, column names of mixed types, an infinite value, a missing label (None or
        NaN), labels that are not classes, and what scikit-learn refuses (its words after ``name``).
    """
    X = data[0]
    if len(data) == 1 and kwargs == {"reset": False} and type(X) is np.ndarray and X.dtype == np.float64 \
            and X.ndim == 2 and len(X) and X.shape[1] == getattr(estimator, "n_features_in_", -1) \
            and not hasattr(estimator, "feature_names_in_"):
        out = X  # what validate_data returns for it, without its checks of data frames (a small request's most time)
    else:
        check_numeric_frame(X, name)
        try:
            out = validate_data(estimator, *data, dtype=np.float64, ensure_all_finite=False, **kwargs)
        except ValueError as exc:
            raise CEGBError(f"{name}{', y' * (len(data) > 1)}: {exc}") from None
    rows, y = (out, None) if len(data) == 1 else out
    infinite = np.argwhere(np.isinf(rows))
    if len(infinite):
        row, column = infinite[0]
        raise CEGBError(f"{name} should hold finite numbers or NaN (a missing value), got "
                        f"{rows[row, column]} in row {row}, column {column}")
    if y is not None:
        missing = np.flatnonzero([label is None or label != label for label in y]) if y.dtype == object else []
        if len(missing):
            raise CEGBError(f"y should hold a class label in every row, got {y[missing[0]]!r} in row {missing[0]}")
        try:
            check_classification_targets(y)
        except ValueError as exc:
            raise CEGBError(f"y: {exc}") from None
    return out


def _tables(X: np.ndarray, codes: np.ndarray, num_class: int, units, n_bins: int,
            rng: np.random.RandomState) -> np.ndarray:
    """``tables[u, c, a]``: the probability of outcome a of unit u in a row of class c (see the module)."""
    num_features = X.shape[1]
    bins, counts = [], []  # per feature: each training row's bin, and the smoothed per-class bin probabilities
    for f in range(num_features):
        values = X[:, f]
        present = values[~np.isnan(values)]
        edges = np.unique(np.quantile(present, np.linspace(0, 1, n_bins + 1)[1:-1])) if len(present) else np.empty(0)
        row_bin = np.where(np.isnan(values), len(edges) + 1, np.searchsorted(edges, values, side="right"))
        table = np.zeros((num_class, len(edges) + 2))
        np.add.at(table, (codes, row_bin), 1.0)
        table += 1.0 / table.shape[1]  # one pseudo-row per class, spread over the outcomes
        bins.append(row_bin)
        counts.append(table / table.sum(axis=1, keepdims=True))
    atoms = []  # per unit: (classes, outcomes)
    sample = None
    for columns in units:
        if len(columns) == 1:
            atoms.append(counts[columns[0]])
            continue
        if sample is None:  # the same rows for every group: a sample of each class
            sample = np.concatenate([rng.permutation(np.flatnonzero(codes == c))[:_GROUP_ATOMS_PER_CLASS]
                                     for c in range(num_class)])
        likelihood = np.ones((num_class, len(sample)))
        for f in columns:
            likelihood *= counts[f][:, bins[f][sample]]
        atoms.append(likelihood / likelihood.sum(axis=1, keepdims=True))
    width = max(a.shape[1] for a in atoms)
    tables = np.zeros((len(units), num_class, width))
    for u, a in enumerate(atoms):
        tables[u, :, :a.shape[1]] = a
    return tables
