"""Staged acquisition, a cascade of nested feature sets: per input, buy the next set of features only while the
prediction is unsure.

:class:`StagedAcquisitionClassifier` orders the units (a feature group of the cost model, whose members are bought
together, or an ungrouped feature) by gain importance per unit of cost in a LightGBM model trained on every
feature, and cuts the order into stages: stage k holds the first ``m_k`` units, where the prices of the first
units add up to about the k-th of ``stages`` levels spaced geometrically between the cheapest unit's price and
the price of every unit the order holds (units the model never splits on are left out). Stage 0 buys nothing
and predicts the training classes' frequencies; each later stage has its own LightGBM classifier, trained on
the training rows with every unit outside the stage hidden as a missing value.

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

import copy
from collections.abc import Mapping

import lightgbm as lgb
import numpy as np

from lightgbm_cegb._engine import StageStack
from lightgbm_cegb.base import COSTS, RANDOM_STATE
from lightgbm_cegb.core.cost_state import CostState
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.parallel import N_JOBS, resolve_n_jobs
from lightgbm_cegb.core.validation import NoneOr, Number, checked_sequence
from lightgbm_cegb.io import saved
from lightgbm_cegb.io.models import num_trees_used, to_forest
from lightgbm_cegb.methods.acquisition import (
    CLASS_WEIGHT,
    NUM_LEAVES,
    AcquisitionResult,
    EvaluationCost,
    PolicyClassifier,
    checked_data,
    class_weights,
)


def hidden(X: np.ndarray, columns: list[int]) -> np.ndarray:
    """A copy of X with every column outside ``columns`` missing (NaN): what a stage of those columns reads."""
    out = np.full(X.shape, np.nan)
    out[:, columns] = X[:, columns]
    return out


class StageLadder:
    """The stages of a staged acquisition model (the classifier here, the ranker of ``methods.cascade``): the units'
    order, the ladder of nested stages cut from it, their prices and the deepest stage within ``max_cost``.

    A subclass has ``units_``, ``unit_cost_``, ``stages``, ``max_stage_cost`` and ``max_cost``, trains a stage's
    model with the ``train_on(columns)`` it gives :meth:`_fit_stages`, and says what a stage gives each row in
    ``_stage_pass(k, X, masked)`` (what :meth:`stage_passes` collects).
    """

    def _fit_stages(self, train_on, num_features: int) -> None:
        """``order_`` (the units by the gain importance per unit of cost of a model on every column, ties by index;
        units it never splits on left out), ``stage_units_`` (up to ``max_stage_cost``) and ``stages_``."""
        full = train_on(list(range(num_features)))
        gain = full.feature_importance("gain")
        unit_gain = np.array([gain[list(columns)].sum() for columns in self.units_])
        with np.errstate(divide="ignore"):
            value = np.where(self.unit_cost_ > 0, unit_gain / self.unit_cost_, np.inf)
        useful = np.flatnonzero(unit_gain > 0)
        self.order_ = useful[np.lexsort((useful, -value[useful]))]  # ties: the unit's index
        self.stage_units_ = self._ladder()
        if self.max_stage_cost is not None:
            self.stage_units_ = self.stage_units_[self._prices() <= float(self.max_stage_cost) * (1 + 1e-12)]
        self.stages_ = [full if m == len(self.order_) and len(self.order_) == len(self.units_) else
                        train_on(self._columns(m)) for m in self.stage_units_[1:]]

    def _ladder(self) -> np.ndarray:
        """The number of units of each stage: 0, then the shortest prefix of the order whose price reaches each
        level (geometric from the first unit with a price to the whole order's price), the whole order last."""
        prices = np.cumsum(self.unit_cost_[self.order_])
        if not len(prices):
            return np.zeros(1, dtype=np.int64)
        positive = prices[prices > 0]
        if len(positive) and self.stages > 1:
            levels = np.geomspace(positive[0], positive[-1], int(self.stages))
            sizes = np.searchsorted(prices, levels * (1 - 1e-12), side="left") + 1
        else:
            sizes = np.empty(0, dtype=np.int64)
        sizes = np.concatenate([sizes, [len(prices)], [int(np.sum(prices == 0))] if prices[0] == 0 else []])
        return np.concatenate([[0], np.unique(np.clip(sizes, 1, len(prices)))]).astype(np.int64)

    def _columns(self, m: int) -> list[int]:
        """The columns of the first ``m`` units of the order."""
        return sorted(f for u in self.order_[:m] for f in self.units_[u])

    def stage_costs(self) -> np.ndarray:
        """Each stage's price per row: the price of its units (stage 0: 0).

        Returns
        -------
        ndarray of shape (n_stages,)
            The prices, rising.
        """
        self._check_fitted()
        return self._prices()

    def _prices(self) -> np.ndarray:
        return np.concatenate([[0.0], np.cumsum(self.unit_cost_[self.order_])])[self.stage_units_]

    def stage_passes(self, X, deepest: int | None = None) -> tuple[list, ...]:
        """Every stage's outputs on every row of X (up to stage ``deepest``; None: the last within ``max_cost``) and
        what each stage's models cost each row to evaluate (None: nothing): the classifier's probabilities, the
        ranker's scores, the regressor's predictions and gaps.

        One pass serves every setting read at prediction (``tradeoff``, ``max_cost``, the ranker's ``top_k``, up to
        ``deepest``): :meth:`replay` reads each setting's result from it, equal to its own ``predict_result`` to the
        bit (a sweep's points share it).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The rows.
        deepest : int, optional
            The last stage to pass (default: the last within ``max_cost``).

        Returns
        -------
        tuple of lists
            What :meth:`replay` takes, per stage.
        """
        X = self._pass_rows(X)
        deepest = self._last_stage() if deepest is None else deepest
        per_stage = [self._stage_pass(k, X, self._masked(X, k)) for k in range(deepest + 1)]
        return tuple(list(outputs) for outputs in zip(*per_stage))

    def _pass_rows(self, X) -> np.ndarray:
        """X checked for a fitted model's pass."""
        self._check_fitted()
        return checked_data(self, "X", X, reset=False)

    def _added(self, model, X: np.ndarray, masked: np.ndarray) -> np.ndarray:
        """What evaluating ``model`` (a stage's) costs each row of X, whose acquired values ``masked`` holds."""
        return EvaluationCost(model, self.costs_, X.shape[1], len(X)).add(masked, np.arange(len(X)))

    def _last_stage(self) -> int:
        """The deepest stage within ``max_cost``."""
        if self.max_cost is None:
            return len(self.stage_units_) - 1
        within = self.stage_costs() <= float(self.max_cost) * (1 + 1e-12)
        return int(np.flatnonzero(within)[-1])

    def _masked(self, X: np.ndarray, k: int) -> np.ndarray:
        """X as stage k sees it: the columns of its units, the others missing."""
        return hidden(X, self._columns(int(self.stage_units_[k])))

    def _results_at(self, X, settings, *extra) -> list:
        """``predict_results``' work: each setting (a dict of ``_policy_params``) checked and set on a copy, one
        ``stage_passes`` over X up to the deepest stage a setting reaches, each copy's result ``replay`` from it (with
        ``extra``, e.g. the ranker's query sizes)."""
        names = self._policy_params
        either = f"{', '.join(names[:-1])} and/or {names[-1]}"
        models = []
        for setting in checked_sequence(settings, "settings", f"dicts of {either}"):
            if not isinstance(setting, Mapping):
                raise CEGBError(f"settings: each setting should be a dict of {either}, got {setting!r:.60}")
            unknown = set(setting) - set(names)
            if unknown:
                raise CEGBError(f"settings: a setting holds {', '.join(names[:-1])} and {names[-1]} only, got "
                                f"{sorted(unknown)}")
            model = copy.copy(self).set_params(**setting)
            model._check_policy()
            models.append(model)
        passes = self.stage_passes(X, max(model._last_stage() for model in models) if models else 0)
        return [model.replay(*passes, *extra) for model in models]

    def _restore_ladder(self, state: dict) -> None:
        """``order_`` and ``stage_units_`` of a saved state, checked against ``units_``."""
        units = self.units_
        order = saved.array(state, "order", (None,), np.int64, low=0)
        if len(np.unique(order)) != len(order) or (order >= len(units)).any():
            raise saved.damaged(state, f"order should hold distinct units below {len(units)}")
        self.order_ = order
        stage_units = saved.array(state, "stage_units", (None,), np.int64, low=0)
        if not len(stage_units) or stage_units[0] != 0 or (np.diff(stage_units) <= 0).any() \
                or stage_units[-1] > len(order):
            raise saved.damaged(state, f"stage_units should rise from 0 to at most the {len(order)} units of order")
        self.stage_units_ = stage_units


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
        stage does with ``max_cost`` at most this, to the bit (the stages are trained independently): a model that
        is only ever used under a cap needs no more (``selection`` fits its capped finalists so).
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
        The classifier of each stage after stage 0 (its units' columns read, the others missing).
    stage_units_ : ndarray of int
        The number of units (of ``order_``) each stage holds, stage 0's (0) first.
    order_ : ndarray of int
        The units in the order the stages buy them (indices into ``units_``).
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
        "stages": Number(1, 1000, integer=True), "max_stage_cost": NoneOr(Number(0.0)),
        "n_estimators": Number(1, integer=True),
        "learning_rate": Number(0.0, low_open=True), "num_leaves": NUM_LEAVES, "class_weight": CLASS_WEIGHT,
        "min_child_samples": Number(1, integer=True), "validation_fraction": Number(0.0, 0.9),
        "early_stopping_rounds": Number(1, integer=True), "random_state": RANDOM_STATE, "n_jobs": N_JOBS,
    }

    def __init__(self, *, feature_costs=None, tradeoff: float = 0.0, max_cost: float | None = None, stages: int = 30,
                 max_stage_cost: float | None = None, n_estimators: int = 5000, learning_rate: float = 0.1,
                 num_leaves="auto", min_child_samples: int = 10, class_weight=None,
                 validation_fraction: float = 0.2, early_stopping_rounds: int = 30, random_state=None,
                 n_jobs: int | None = None) -> None:
        self.feature_costs = feature_costs
        self.tradeoff = tradeoff
        self.max_cost = max_cost
        self.stages = stages
        self.max_stage_cost = max_stage_cost
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

    def fit(self, X, y, *, eval_set=None):
        """Order the units, cut the order into stages and train each stage's classifier.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The training rows (NaN: a missing value).
        y : array-like of shape (n_samples,)
            The class labels (two or more classes).
        eval_set : tuple (X_valid, y_valid), optional
            Rows for early stopping; without it, ``validation_fraction`` of the training rows are held out.

        Returns
        -------
        StagedAcquisitionClassifier
            The fitted estimator.
        """
        self._check_params()
        X, codes, train, X_valid, valid_codes, _, seed = self._fit_inputs(X, y, eval_set)
        n, num_features = X.shape
        units = self.costs_.units(num_features)
        self.units_, self.unit_cost_ = [columns for _, columns, _ in units], np.array([p for _, _, p in units])
        num_class = len(self.classes_)
        params = self._lightgbm_params(num_class, seed, n, len(train))
        weights = class_weights(self.class_weight, self.classes_, codes[train])
        counts = np.bincount(codes[train], minlength=num_class) * (1.0 if weights is None else weights)
        self.prior_ = counts / counts.sum()

        def train_on(columns: list[int]) -> lgb.Booster:
            stop = (hidden(X_valid, columns), valid_codes) if X_valid is not None and len(X_valid) else None
            return self._boosted(params, (hidden(X[train], columns), codes[train]), stop,
                                 f"the stage of {len(columns)} of the {num_features} columns")

        self._fit_stages(train_on, num_features)
        self._stack()  # compiled now: predicting leaves the estimator as it is
        return self

    # ----------------------------------------------------------------------------------------- the policy

    def _stack(self) -> StageStack | None:
        """The stages compiled as one (built by fit and load, once per set of stages); None when a stage's objective is
        not one whose output StageStack repeats (binary at one sigmoid scale for every stage, multiclass)."""
        cached = getattr(self, "_compiled", None)
        if cached is None or cached[0] is not self.stages_:
            forests = [to_forest(booster) for booster in self.stages_]
            scales = {_output_scale(booster, forest.objective, len(self.classes_))
                      for booster, forest in zip(self.stages_, forests)}
            stack = None
            if None not in scales and len(scales) <= 1:
                columns = np.zeros((len(self.stages_) + 1, self.n_features_in_), dtype=np.uint8)
                for k in range(1, len(self.stages_) + 1):
                    columns[k, self._columns(int(self.stage_units_[k]))] = 1
                used = [num_trees_used(booster, forest, None) for booster, forest in zip(self.stages_, forests)]
                flats, offsets, values = ([getattr(forest, name) for forest in forests]
                                          for name in ("flat", "leaf_offset", "leaf_value"))
                stack = StageStack(flats, used, offsets, values, self.n_features_in_, columns, self.prior_,
                                   scales.pop() if scales else 1.0)
            self._compiled = cached = (self.stages_, stack)
        return cached[1]

    def _proba(self, k: int, masked: np.ndarray) -> np.ndarray:
        """Stage k's probabilities of rows whose unknown values are NaN: LightGBM's ``predict``, to the bit (the
        compiled stages repeat its arithmetic)."""
        threads = resolve_n_jobs(self.n_jobs, len(masked))
        stack = self._stack()
        if stack is not None:
            return stack.proba(np.ascontiguousarray(masked, dtype=np.float64), k, threads)
        if k == 0:
            return np.tile(self.prior_, (len(masked), 1))
        p = self.stages_[k - 1].predict(masked, num_threads=threads)
        return np.column_stack([1.0 - p, p]) if p.ndim == 1 else p

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities from what each row buys: ``predict_result(X).proba`` to the bit, without the accounting
        (every row climbs the compiled stages in one call).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The rows.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            The probabilities of the classes of ``classes_``.
        """
        X = np.ascontiguousarray(self._checked_rows(X), dtype=np.float64)
        self._check_policy()
        stack = self._stack()
        if stack is None:
            return super().predict_proba(X)
        return stack.ladder(X, 1.0 - self.tradeoff, self._last_stage(), resolve_n_jobs(self.n_jobs, len(X)))[1]

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

    def _stage_pass(self, k: int, X: np.ndarray, masked: np.ndarray) -> tuple:
        """Stage ``k``'s probabilities of every row and what its evaluation costs each (stage 0: nothing)."""
        return self._proba(k, masked), self._added(self.stages_[k - 1], X, masked) if k else None

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
                 "order": self.order_, "stage_units": self.stage_units_, "prior": self.prior_},
                {f"stage_{k}": booster.model_to_string() for k, booster in enumerate(self.stages_, start=1)})

    def _restore(self, state: dict, folder, manifest: dict) -> None:
        self._restore_units(state)
        self._restore_ladder(state)
        self.prior_ = saved.distributions(state, "prior", saved.array(state, "prior", (len(self.classes_),), low=0.0))
        self.stages_ = [self._restored_classifier(state, folder, manifest, f"stage_{k}")
                        for k in range(1, len(self.stage_units_))]
        self._stack()


def _output_scale(booster: lgb.Booster, objective: str | None, num_class: int) -> float | None:
    """The sigmoid scale of a binary stage's ``objective`` (LightGBM's model text: ``binary sigmoid:1``), 0.0 for
    ``multiclass num_class:<num_class>``, None for any other (its output is not what StageStack computes)."""
    name, *options = (objective or "").split(" ")
    if name == "binary" and num_class == 2 and len(options) == 1 and options[0].startswith("sigmoid:"):
        scale = float(options[0].split(":", 1)[1])
        # the text has 6 digits: a Booster trained with a scale the text rounds predicts with its own
        return scale if scale > 0 and float((booster.params or {}).get("sigmoid", scale)) == scale else None
    return 0.0 if name == "multiclass" and num_class > 2 and options == [f"num_class:{num_class}"] else None


class LadderRun:
    """Rows on their way up a staged model's ladder, stage by stage (the interface of the adaptive acquisition's
    ``PolicyRun``, which ``LazyPredictor`` drives): ``requests()`` says which units the rows that go on buy next
    (the others leave), ``deliver`` hands over the values bought, ``evaluate`` moves the rows that received them to
    the next stage and asks its model; ``result()`` once ``requests()`` is empty.

    A subclass says which rows at stage k go on (``_going(k, rows)``), keeps what stage k's model says of the rows
    that reach it (``_entered(k, rows)``), and gives ``output(method)`` and ``result()``.

    Parameters
    ----------
    model : StageLadder
        The fitted model.
    n : int
        Number of rows.
    """

    def __init__(self, model: StageLadder, n: int) -> None:
        self.model = model
        num_features = model.n_features_in_
        self.X = np.full((n, num_features), np.nan)  # the values bought (NaN elsewhere), as the stages see them
        self.stage = np.zeros(n, dtype=np.int64)
        self.state = CostState(n, model.costs_, num_features)
        self.evaluation = EvaluationCost(None, model.costs_, num_features, n)
        self.active = np.arange(n)
        self.last = model._last_stage()
        self.received = np.zeros(n, dtype=bool)

    def _going(self, k: int, rows: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _entered(self, k: int, rows: np.ndarray) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def requests(self) -> list[tuple[int, np.ndarray]]:
        """(unit, rows) for every unit of the next stage of the rows that go on; the others leave the run."""
        model, active = self.model, self.active
        k = int(self.stage[active[0]]) if len(active) else self.last  # the rows that go on are all at one stage
        self.active = active[self._going(k, active)] if k < self.last else active[:0]
        if not len(self.active):
            return []
        units = model.order_[model.stage_units_[k]:model.stage_units_[k + 1]]
        return [(int(u), self.active) for u in units]

    def deliver(self, unit: int, rows: np.ndarray, values: np.ndarray, *, pay: bool = True) -> None:
        """Rows ``rows`` (that asked for ``unit``) bought it: its columns' ``values`` (one row each), paid unless
        ``pay`` is False (values the caller already had)."""
        self.X[np.ix_(rows, list(self.model.units_[unit]))] = values
        self.received[rows] = True
        if pay:
            self.model._pay(self.state, unit, rows)

    def drop(self, rows: np.ndarray) -> None:
        """Rows that cannot go on (a failed fetch) leave the run, at the stage they reached."""
        self.active = self.active[~np.isin(self.active, rows)]

    def evaluate(self) -> None:
        """The rows that received their stage's units move to it: its model on what they hold."""
        rows = np.intersect1d(self.active, np.flatnonzero(self.received))
        if len(rows):
            k = int(self.stage[rows[0]]) + 1
            self.stage[rows] = k
            self._entered(k, rows)
            self.evaluation.booster = self.model.stages_[k - 1]
            self.evaluation.add(self.X[rows], rows)
        self.active = rows
        self.received[:] = False

    def _known(self) -> np.ndarray:
        """The features each row holds: its stage's units' columns."""
        steps = self.model.stage_units_[self.stage]
        known = np.zeros((len(self.stage), self.model.n_features_in_), dtype=bool)
        for m in np.unique(steps):
            known[np.ix_(steps == m, self.model._columns(int(m)))] = True
        return known


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

    def _going(self, k: int, rows: np.ndarray) -> np.ndarray:
        return self.proba[rows].max(axis=1) < 1.0 - self.model.tradeoff

    def _entered(self, k: int, rows: np.ndarray) -> None:
        self.proba[rows] = self.model._proba(k, self.X[rows])

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
