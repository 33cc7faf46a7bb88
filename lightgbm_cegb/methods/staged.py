"""Staged acquisition, a cascade of nested feature sets: per input, buy the next set of features only while the
prediction is unsure.

:class:`StagedAcquisitionClassifier` orders the units (a feature group of the cost model, whose members are bought
together, or an ungrouped feature) by gain importance per unit of cost in a LightGBM model trained on every
feature (``order="importance"``), or by a nested subset search that measures sets of units on a held-out part of
the training rows (``order="search"``: within each doubling level of price, the units whose addition gains the most
log loss per unit of cost; a costly unit that a model of every feature splits on can hide a cheap one that does
nearly as well alone, and the importance order then has no cheap stage), and cuts the order into stages: stage k
holds the first ``m_k`` units, where the prices of the first units add up to about the k-th of ``stages`` levels
spaced geometrically between the cheapest unit's price and the price of every unit the order holds (units the model
never splits on are left out). Stage 0 buys nothing and predicts the training classes' frequencies; each later stage
has its own LightGBM classifier, trained on the training rows with every unit outside the stage hidden as a missing
value (``stage_models="separate"``), or trees that add to the raw scores of the stages below
(``stage_models="continued"``: stage k's classifier is trained from the scores of stages 1 to k - 1, each on its own
columns, and a row's scores at stage k are its scores at k - 1 plus stage k's trees'), so a row that climbs evaluates
each stage's trees once.

A row starts at stage 0 and moves to the next stage, buying its new units, until its top class probability is
at least ``1 - tradeoff``, or the next stage would take its cost over ``max_cost``, or it reaches the last stage;
its prediction is that stage's. The first stages read the same features for every row; the rows that stop
early pay for them only. ``tradeoff`` and ``max_cost`` are read when predicting: ``set_params`` on a fitted model
gives another point of the cost-quality curve without fitting again, and
:meth:`StagedAcquisitionClassifier.predict_results` answers many settings from one pass of the stages'
classifiers.

Under the protocol (docs/RESULTS.md) it has the best mean of every method at 0.1 and 0.25 x plain LightGBM's cost
on HIGGS and MNIST 3 vs 8, and separates from the cheap-subset baseline on letter at 0.1 and 0.5 x: a classifier
per stage, trained on the features the row holds, is sharper than the adaptive acquisition's one classifier for
every subset, and the cap keeps the cheap end of the curve. On AFABench's CUBE, where the informative features
depend on the class, the adaptive acquisition's per-row choice of feature wins.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import lightgbm as lgb
import numpy as np
from sklearn.metrics import log_loss
from sklearn.utils import check_random_state

from lightgbm_cegb._engine import LadderBatch, LadderPlan, StageStack
from lightgbm_cegb.base import COSTS, RANDOM_STATE
from lightgbm_cegb.core.errors import CEGBError, RoundsWarning
from lightgbm_cegb.core.parallel import N_JOBS, resolve_n_jobs
from lightgbm_cegb.core.partitions import computed, is_dask
from lightgbm_cegb.core.subsets import SEARCH_HELD_OUT, SEARCH_ROWS, subsample_index
from lightgbm_cegb.core.validation import NoneOr, Number, OneOf
from lightgbm_cegb.io import saved
from lightgbm_cegb.methods import dask_stages
from lightgbm_cegb.methods.acquisition import (
    CLASS_WEIGHT,
    NUM_LEAVES,
    AcquisitionResult,
    PolicyClassifier,
    class_weights,
    unit_arrays,
)
from lightgbm_cegb.methods.ladder import ORDERS, STAGE_MODELS, LadderRun, StageLadder, continued_stages, hidden


class StagedAcquisitionClassifier(StageLadder, PolicyClassifier):
    """Classifier that buys nested feature sets stage by stage, per input, while its prediction is unsure.

    See the module's doc for the stages and the exit rule.

    Parameters
    ----------
    feature_costs : FeatureCosts, lazy costs per column, mapping or pandas Series by name, or None, default=None
        The cost model (None: every feature costs 1). A unit's price is its lazy cost (a group's own lazy cost
        plus its members'); when nothing has a lazy cost, its coupled cost.
    tradeoff : float, default=0.0
        A row stops at the first stage where its top class probability is at least ``1 - tradeoff`` (0: only a
        certain prediction stops it before the last stage). Read when predicting.
    max_cost : float or None, default=None
        A hard cap on each row's acquisition cost: a row stops before a stage whose units would take it over.
        Read when predicting.
    stages : int, default=30
        Levels of the stage ladder (stages that would hold the same units are one).
    max_stage_cost : float or None, default=None
        Stages priced above it are not trained (None: every stage). The model then predicts as the one with every
        stage does with ``max_cost`` at most this, to the bit (a stage's classifier depends on the stages below it
        only): a model that is only ever used under a cap needs no more (``selection`` fits its capped finalists so).
    order : {"importance", "search"}, default="importance"
        How the units are ordered: by the gain importance per unit of cost of a classifier of every feature, or
        led by a nested subset search (within each doubling level of price, the unit whose addition gains the most
        log loss per unit of its cost, measured on a quarter of the training rows by a stage's classifier of the
        units taken so far trained on the rest, each part at most 5,000 rows; then the other units by importance).
        The search fits a classifier per unit at its first step (of at most 256 units, see
        ``core.subsets.searched``) and a few per later step; it does not read ``eval_set``.
    stage_models : {"separate", "continued"}, default="separate"
        Each stage's classifier its own model of the stage's columns, or trees trained from the raw scores of the
        stages below (each stage's on its own columns) and added to them: a row at stage k has evaluated each of its
        stages' trees once, where separate models are each a whole classifier (on HIGGS at ``tradeoff=0.25``, 216
        trees a row against 532: docs/speed.md). Separate stages are a little sharper (the method's guide page).
    n_estimators : int, default=5000
        Most boosting rounds of each stage's classifier (early stopped; a RoundsWarning names a stage that still
        improved at the cap).
    learning_rate : float, default=0.1
        LightGBM's learning rate.
    num_leaves : int or "auto", default="auto"
        LightGBM's leaves per tree ("auto": 15 below 20,000 training rows, 31 below 200,000, 63 from there on).
    min_child_samples : int, default=10
        LightGBM's ``min_data_in_leaf``.
    class_weight : None, "balanced" or dict, default=None
        The weight of a training row by its class (the rows that stop early too), as scikit-learn's classifiers
        take it: none, "balanced" (each class weighs the same in all; stage 0 then predicts equal probabilities)
        or a dict by class label. Balanced, a row's top probability is that of balanced classes: on a 10%-positive
        set a row is not sure of the majority class before it buys anything. For metrics that weigh the classes
        equally (F1, balanced accuracy).
    validation_fraction : float, default=0.2
        Share of the training rows held out for early stopping when ``fit`` gets no ``eval_set`` (0: no early
        stopping).
    early_stopping_rounds : int, default=30
        Rounds without improvement of the held-out log loss before a classifier stops.
    random_state : int, RandomState or None, default=None
        Seed of the held-out rows and of LightGBM.
    n_jobs : int or None, default=None
        Threads of LightGBM (None: the CPUs this process may use).

    Attributes
    ----------
    stages_ : list of lightgbm.Booster
        The classifier of each stage after stage 0 (its units' columns read, the others missing; with
        ``stage_models="continued"`` the trees stage k adds to stage k - 1's raw scores).
    stage_units_ : ndarray of int
        The number of units (of ``order_``) each stage holds, stage 0's (0) first.
    order_ : ndarray of int
        The units in the order the stages buy them (indices into ``units_``).
    stage_models_ : str
        The kind of stage models fitted (``stage_models`` at ``fit``; what prediction reads).
    units_ : list of tuple of int
        The columns of each unit: the groups of the costs (in their order), then the ungrouped features.
    unit_cost_ : ndarray of shape (n_units,)
        Each unit's price.
    prior_ : ndarray of shape (n_classes,)
        Stage 0's probabilities: the training classes' frequencies (weighted by ``class_weight``).
    classes_ : ndarray of shape (n_classes,)
        The class labels.
    costs_ : FeatureCosts
        The costs aligned to the columns.
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
    _fitted_attribute = "stages_"
    _auto_leaves = (15, 31, 63)

    _policy_params = ("tradeoff", "max_cost")
    _constraints = {
        "feature_costs": COSTS, "tradeoff": Number(0.0, 1.0), "max_cost": NoneOr(Number(0.0)),
        "stages": Number(1, 1000, integer=True), "max_stage_cost": NoneOr(Number(0.0)), "order": OneOf(ORDERS),
        "stage_models": OneOf(STAGE_MODELS), "n_estimators": Number(1, integer=True),
        "learning_rate": Number(0.0, low_open=True), "num_leaves": NUM_LEAVES, "class_weight": CLASS_WEIGHT,
        "min_child_samples": Number(1, integer=True), "validation_fraction": Number(0.0, 0.9),
        "early_stopping_rounds": Number(1, integer=True), "random_state": RANDOM_STATE, "n_jobs": N_JOBS,
    }

    def __init__(self, *, feature_costs=None, tradeoff: float = 0.0, max_cost: float | None = None, stages: int = 30,
                 max_stage_cost: float | None = None, order: str = "importance", stage_models: str = "separate",
                 n_estimators: int = 5000,
                 learning_rate: float = 0.1, num_leaves="auto", min_child_samples: int = 10, class_weight=None,
                 validation_fraction: float = 0.2, early_stopping_rounds: int = 30, random_state=None,
                 n_jobs: int | None = None) -> None:
        self.feature_costs = feature_costs
        self.tradeoff = tradeoff
        self.max_cost = max_cost
        self.stages = stages
        self.max_stage_cost = max_stage_cost
        self.order = order
        self.stage_models = stage_models
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.class_weight = class_weight
        self.validation_fraction = validation_fraction
        self.early_stopping_rounds = early_stopping_rounds
        self.random_state = random_state
        self.n_jobs = n_jobs

    # ------------------------------------------------------------------------------------------------ fit

    def fit(self, X, y, *, eval_set=None, memo=None):
        """Order the units, cut the order into stages and train each stage's classifier.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or a Dask array or DataFrame
            The training rows (NaN: a missing value). Rows in a Dask collection are trained on where they lie, with
            ``lightgbm.dask`` on the active ``distributed`` client's workers (see ``methods.dask_stages``).
        y : array-like of shape (n_samples,), or a Dask array or Series (with X a Dask collection)
            The class labels (two or more classes).
        eval_set : tuple (X_valid, y_valid), optional
            Rows for early stopping (in memory; a Dask collection is computed); without it, ``validation_fraction`` of
            the training rows are held out (from a Dask collection, about ``dask_stages.HELD_OUT_ROWS`` where that
            is fewer).
        memo : StageMemo, optional
            Trainings shared with other fits on the same rows and settings (another ``order`` or ``stage_models``):
            a stage of the same columns is trained once, the same model to the bit (``methods.ladder.StageMemo``;
            rows in memory only).

        Returns
        -------
        StagedAcquisitionClassifier
            The fitted estimator.
        """
        self._check_params()
        if is_dask(X):
            self._fit_dask(X, y, eval_set)
            self._stack()
            return self
        X, codes, train, X_valid, valid_codes, _, seed = self._fit_inputs(X, y, eval_set)
        n, num_features = X.shape
        num_class = len(self.classes_)
        params = self._lightgbm_params(num_class, seed, n, len(train))
        weights = class_weights(self.class_weight, self.classes_, codes[train])
        self._units_and_prior(num_features, np.bincount(codes[train], minlength=num_class), weights)

        stopping = X_valid is not None and len(X_valid) > 0

        def train_on(columns: list[int], init=(None, None)) -> lgb.Booster:
            stop = (hidden(X_valid, columns), valid_codes) if stopping else None
            return self._boosted(params, (hidden(X[train], columns), codes[train]), stop,
                                 f"the stage of {len(columns)} of the {num_features} columns", init)

        train_on, measure = self._shared(memo, train_on, self._measure(params, X[train], codes[train]), params,
                                         X[train], codes[train], X_valid, valid_codes)
        continued = continued_stages(train_on, (X[train], X_valid if stopping else None), params["num_threads"])
        self._fit_stages(train_on, num_features, measure, continued if self.stage_models == "continued" else None)
        self._stack()  # compiled now: predicting leaves the estimator as it is
        return self

    def _fit_dask(self, X, y, eval_set) -> None:
        """``fit`` of rows in Dask collections (``methods.dask_stages``): every training with ``lightgbm.dask`` on the
        active client's workers, on the rows spread there once, early stopped on rows in memory."""
        client = dask_stages.dask_client()
        rows = dask_stages.DaskRows.of(self, X, y)
        num_features = rows.X.shape[1]
        self.costs_ = self._resolved_costs(num_features)
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(0, 2**31 - 1))
        stop = None if eval_set is None else \
            self._checked_eval_set(computed(eval_set) if isinstance(eval_set, tuple) else eval_set)
        train, stop = dask_stages.spread_with_stop(self, rows, stop, rng, client)
        num_class = len(self.classes_)
        counts = train.counts(num_class)
        weights = class_weights(self.class_weight, self.classes_, None, counts=counts)
        self._units_and_prior(num_features, counts, weights)
        params = self._lightgbm_params(num_class, seed, rows.n, int(counts.sum()))
        names = self._lightgbm_feature_names()

        def train_on(columns: list[int], init=(None, None)) -> lgb.Booster:
            return dask_stages.trained(self, params, train, weights, columns, init, stop,
                                       f"the stage of {len(columns)} of the {num_features} columns", names)

        measure = None
        if self.order == "search":
            sample = train.sample(dask_stages.SEARCH_SAMPLE, int(rng.randint(0, 2**31 - 1)))
            measure = self._measure(params, *sample)
        continued = continued_stages(train_on, (train.X, None if stop is None else stop[0]), params["num_threads"])
        self._fit_stages(train_on, num_features, measure, continued if self.stage_models == "continued" else None)

    def _units_and_prior(self, num_features: int, counts: np.ndarray, weights: np.ndarray | None) -> None:
        """``units_`` and ``unit_cost_`` of the costs over ``num_features`` columns, and ``prior_``: the training rows'
        class ``counts`` weighted by the classes' ``weights`` (None: 1), as shares."""
        units = self.costs_.units(num_features)
        self.units_, self.unit_cost_ = [columns for _, columns, _ in units], np.array([p for _, _, p in units])
        weighted = counts * (1.0 if weights is None else weights)
        self.prior_ = weighted / weighted.sum()

    def _measure(self, params: dict, X: np.ndarray, codes: np.ndarray) -> Callable | None:
        """``order="search"``'s measure of a set of columns: minus the log loss (weighted by ``class_weight``) of a
        stage's classifier of them on SEARCH_HELD_OUT of the training rows ``X`` (classes in proportion), trained
        on the others (each part at most SEARCH_ROWS rows); None for the importance order. The held-out rows that
        stop the stages (``eval_set``) are not read: a sweep chooses among its models on them, and an order tuned
        on them would look better there than it is."""
        if self.order != "search":
            return None
        held = np.zeros(len(codes), dtype=bool)
        held[subsample_index(codes, max(1, round(SEARCH_HELD_OUT * len(codes))), True)] = True
        if held.all():
            raise CEGBError(f"order='search' measures feature sets on a quarter of the training rows (each class "
                            f"at least once) and trains on the others: the {len(codes)} training rows are too few")
        parts = []
        for part in (np.flatnonzero(~held), np.flatnonzero(held)):
            if len(part) > SEARCH_ROWS:
                part = part[subsample_index(codes[part], SEARCH_ROWS, True)]
            parts.append((X[part], codes[part]))
        (X, codes), (X_valid, valid_codes) = parts
        weights = class_weights(self.class_weight, self.classes_, valid_codes)
        weights = None if weights is None else weights[valid_codes]
        labels = np.arange(len(self.classes_))

        def measure(columns: list[int]) -> float:
            if not columns:
                proba = np.tile(self.prior_, (len(valid_codes), 1))
            else:
                with warnings.catch_warnings():  # a capped search model is no stage: the stages warn for themselves
                    warnings.simplefilter("ignore", RoundsWarning)
                    # of the columns alone (not every column, the rest missing: binning them is most of a small fit)
                    booster = self._boosted(params, (X[:, columns], codes), (X_valid[:, columns], valid_codes), "",
                                            named=False, cut=False)
                proba = booster.predict(X_valid[:, columns], num_iteration=booster.best_iteration)
            return -log_loss(valid_codes, proba, sample_weight=weights, labels=labels)

        return measure

    # ----------------------------------------------------------------------------------------- the policy

    def _stack(self) -> StageStack | None:
        """The stages compiled as one (by fit and load; again for another list of stages); None when a stage's output
        is not one StageStack repeats (binary at one sigmoid scale for every stage, multiclass): continued stages are
        then refused (their scores are added before the output, which LightGBM's ``predict`` of a stage does not
        give)."""
        entry = self.__dict__.get("_compiled", {}).get("stages")
        if entry is not None and entry[0] is self.stages_:
            return entry[1]
        continued = self._continued()
        stack = self._compile("stages", self.stages_, self.prior_, continued)
        if stack is None and continued:
            raise CEGBError("stage_models='continued': each stage's classifier should be binary with one sigmoid scale "
                            "for every stage, or multiclass (softmax), to add its scores to the stage below's")
        num_features = self.n_features_in_
        lazy, _, split = self.costs_.arrays(num_features)
        group_of, group_lazy, _ = self.costs_.group_arrays(num_features)
        plan = None if stack is None else LadderPlan(stack, *unit_arrays(self.units_), self.stage_units_, self.order_,
                                                     lazy, group_of, group_lazy, split, float(self.costs_.tree))
        self._compiled = {**self._compiled, "plan": plan}
        return stack

    def _proba(self, k: int, masked: np.ndarray, raw: np.ndarray | None = None) -> np.ndarray:
        """Stage k's probabilities of rows whose unknown values are NaN: LightGBM's ``predict``, to the bit (the
        compiled stages repeat its arithmetic); continued stages' from the rows' raw scores at the stage below, in
        ``raw`` (see ``_carried``), which is left holding stage k's."""
        self._stack()
        compiled = self._compiled_outputs("stages", self.stages_, k, masked, raw)
        if compiled is not None:
            return compiled
        if k == 0:
            return np.tile(self.prior_, (len(masked), 1))
        p = self.stages_[k - 1].predict(masked, num_threads=resolve_n_jobs(self.n_jobs, len(masked)))
        return np.column_stack([1.0 - p, p]) if p.ndim == 1 else p

    def _compiled_proba(self, X: np.ndarray) -> np.ndarray | None:
        """Every row climbs the compiled stages in one call."""
        self._check_policy()
        stack = self._stack()
        if stack is None:
            return None
        return stack.ladder(X, 1.0 - self.tradeoff, self._last_stage(), resolve_n_jobs(self.n_jobs, len(X)))[1]

    def __lightgbm_cegb_batch__(self, X: np.ndarray, known: np.ndarray) -> tuple[LadderBatch, Callable] | None:
        """A compiled lazy run of rows ``X`` whose values ``known`` marks (how ``LazyPredictor`` serves the model, to
        the same predictions, payments and fetches as its policy run): (the run, ``output(proba, method)``); None
        where the stages are not compiled (see ``_stack``). The run writes the values it is given into X and known
        (pass copies)."""
        self._check_fitted()
        self._check_policy()
        stack = self._stack()
        if stack is None:
            return None
        batch = LadderBatch(self._compiled["plan"], X, known, 1.0 - self.tradeoff, self._last_stage(),
                            resolve_n_jobs(self.n_jobs, len(X)))
        return batch, self._output

    def __lightgbm_cegb_batch_key__(self) -> tuple:
        """What ``__lightgbm_cegb_batch__``'s run depends on: a prepared row (``LazyPredictor.prepare``) makes its
        batch again when it changes."""
        return self.tradeoff, self.max_cost, self.__dict__.get("stages_")

    def predict_results(self, X, settings) -> list[AcquisitionResult]:
        """:meth:`predict_result` at each of ``settings`` (dicts of ``tradeoff`` and ``max_cost``, the model's own
        where a dict does not say), from one pass of every stage's classifier over X: each result equals
        ``predict_result`` with those parameters set, to the bit (the payments are made in the run's order).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The rows, every value known.
        settings : sequence of dict
            Each with ``tradeoff`` and/or ``max_cost``.

        Returns
        -------
        list of AcquisitionResult
            One per setting, in their order.
        """
        self._check_fitted()
        return self._results_at(X, settings)

    def _carried(self, n: int) -> np.ndarray | None:
        """Continued stages: n rows' raw scores (one per row for two classes, one per class for more), which each stage
        reads and replaces; None for separate ones."""
        if not self._continued():
            return None
        return np.empty((n, saved.class_scores(len(self.classes_))))

    def _stage_pass(self, k: int, X: np.ndarray, masked: np.ndarray, carried=None) -> tuple:
        """Stage ``k``'s probabilities of every row and what its evaluation costs each (stage 0: nothing)."""
        return self._proba(k, masked, carried), self._added(self.stages_[k - 1], X, masked) if k else None

    def replay(self, proba: list, added: list) -> AcquisitionResult:
        """The result of a run whose stages' probabilities (and evaluation costs) on every row are known.

        Parameters
        ----------
        proba, added : list
            :meth:`stage_passes`'s result on the rows, for stages up to this model's last at least.

        Returns
        -------
        AcquisitionResult
            As ``predict_result`` on the rows.
        """
        n = len(proba[0])
        last = self._last_stage()
        stop = np.full(n, last)
        for k in range(last - 1, -1, -1):
            stop[proba[k].max(axis=1) >= 1.0 - self.tradeoff] = k
        run = StagedRun(self, n)
        for k in range(1, last + 1):
            rows = np.flatnonzero(stop >= k)
            for unit in self.order_[self.stage_units_[k - 1]:self.stage_units_[k]]:
                self._pay(run.state, int(unit), rows)
            if added[k] is not None:
                run.evaluation.cost[rows] += added[k][rows]
        run.stage = stop
        run.proba = np.empty((n, len(self.classes_)))
        for k in range(last + 1):
            run.proba[stop == k] = proba[k][stop == k]
        return run.result()

    def _run(self, n: int) -> StagedRun:
        return StagedRun(self, n)

    def tradeoff_scale(self, X, y, **fit_params) -> float:
        """The smallest ``tradeoff`` at which the model fitted on (X, y) buys nothing: every row stops at stage 0,
        whose top probability is the most frequent class's share of the training rows (fits the model).

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
            ``1 - max(prior_)`` of the fitted model.
        """
        from sklearn.base import clone
        return clone(self).fit(X, y, **fit_params).first_value()

    def first_value(self) -> float:
        """The smallest ``tradeoff`` at which this fitted model buys nothing: ``1 - max(prior_)``.

        Returns
        -------
        float
            The value.
        """
        self._check_fitted()
        return float(1.0 - self.prior_.max())

    # --------------------------------------------------------------------------------------- save / load

    def _saved_state(self) -> tuple[dict, dict]:
        return ({"classes": self.classes_, "units": [list(u) for u in self.units_], "unit_cost": self.unit_cost_,
                 "order": self.order_, "stage_units": self.stage_units_, "prior": self.prior_,
                 "stage_models": self.stage_models_},
                {f"stage_{k}": booster.model_to_string() for k, booster in enumerate(self.stages_, start=1)})

    def _restore(self, state: dict, folder, manifest: dict) -> None:
        self._restore_units(state)
        self._restore_ladder(state)
        self.prior_ = saved.distributions(state, "prior", saved.array(state, "prior", (len(self.classes_),), low=0.0))
        self.stages_ = [self._restored_classifier(state, folder, manifest, f"stage_{k}")
                        for k in range(1, len(self.stage_units_))]
        self._stack()


class StagedRun(LadderRun):
    """The classifier's rows on the ladder: a row goes on while its top class probability is below
    ``1 - tradeoff``.

    Parameters
    ----------
    model : StagedAcquisitionClassifier
        The fitted model.
    n : int
        Number of rows.
    """

    def __init__(self, model: StagedAcquisitionClassifier, n: int) -> None:
        super().__init__(model, n)
        self.proba = np.tile(model.prior_, (n, 1))
        self.raw = model._carried(n)

    def _going(self, k: int, rows: np.ndarray) -> np.ndarray:
        return self.proba[rows].max(axis=1) < 1.0 - self.model.tradeoff

    def _entered(self, k: int, rows: np.ndarray) -> None:
        raw = None if self.raw is None else self.raw[rows]
        self.proba[rows] = self.model._proba(k, self.X[rows], raw)
        if raw is not None:
            self.raw[rows] = raw

    def output(self, method: str) -> np.ndarray:
        """What the model's ``method`` answers for every row from the probabilities it holds now."""
        return self.model._output(self.proba, method)

    def result(self) -> AcquisitionResult:
        """What the run did."""
        model = self.model
        n = len(self.stage)
        steps = model.stage_units_[self.stage]
        order = np.full((n, len(model.units_)), -1, dtype=np.int64)
        positions = np.arange(len(model.order_))
        if len(positions):
            order[:, :len(positions)] = np.where(positions < steps[:, None], model.order_[None], -1)
        return model._result(self.proba, order, self._known(), self.state, self.evaluation.cost)
