"""Staged acquisition for regression: per input, buy the next set of features only while the prediction is not
settled.

:class:`StagedAcquisitionRegressor` orders the units (a feature group of the cost model, or an ungrouped feature)
and cuts the order into nested stages as :class:`~lightgbm_cegb.methods.staged.StagedAcquisitionClassifier` does;
each stage after stage 0 has its own LightGBM regressor (squared loss), trained on the training rows with the units
outside the stage hidden as missing values and early stopped on held-out rows. Stage 0 buys nothing and predicts
the training targets' mean.

Whether a row's prediction is settled is learned on the held-out rows: for each stage k before the last, a small
LightGBM regressor (the stage's *gap model*) predicts, from the stage's features, how far the last stage's
prediction lies from stage k's, ``|f_last(x) - f_k(x)|`` (stage 0's gap model is the held-out rows' mean gap). A row
at stage k goes on, buying stage k + 1's units, while its predicted gap is above ``tradeoff`` times the training
targets' standard deviation and the next stage fits ``max_cost``; its prediction is that of the stage it stops at.
``tradeoff`` and ``max_cost`` are read when predicting. A row pays the lazy costs of its stages' units (a group's own
once), and the split and tree costs of each stage's regressor that predicted it and of each gap model that decided
for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import lightgbm as lgb
import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import column_or_1d

from lightgbm_cegb.base import COSTS, RANDOM_STATE, BudgetedEstimator
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.parallel import N_JOBS, resolve_n_jobs
from lightgbm_cegb.core.partitions import computed, is_dask
from lightgbm_cegb.core.report import CostReport
from lightgbm_cegb.core.validation import NoneOr, Number, check_params
from lightgbm_cegb.io import saved
from lightgbm_cegb.methods import dask_stages
from lightgbm_cegb.methods.acquisition import (
    NUM_LEAVES,
    auto_value,
    checked_data,
    drive,
    early_stopped,
    restore_units,
    run_cost,
)
from lightgbm_cegb.methods.ladder import LadderRun, StageLadder, hidden, stacked_result

#: the gap models' LightGBM parameters and rounds: small models, each read once per row and stage
GAP_PARAMS = {"objective": "regression", "learning_rate": 0.1, "num_leaves": 7, "min_data_in_leaf": 20,
              "deterministic": True, "verbose": -1}
GAP_ROUNDS = 50


@dataclass(frozen=True)
class StagedRegressionResult:
    """What the staged regressor did for each row (:meth:`StagedAcquisitionRegressor.predict_result`).

    Parameters
    ----------
    prediction : ndarray of shape (n_samples,)
        The prediction of the stage each row stopped at.
    stage : ndarray of int of shape (n_samples,)
        That stage.
    known : ndarray of bool of shape (n_samples, n_features)
        The features each row bought.
    cost : CostReport
        Each row's cost: the lazy costs of the units it bought (a group's own once), and the split and tree costs
        of each stage's regressor and gap model that read it.
    """

    prediction: np.ndarray
    stage: np.ndarray
    known: np.ndarray
    cost: CostReport

    @classmethod
    def stacked(cls, results: list[StagedRegressionResult]) -> StagedRegressionResult:
        """One result of the rows of several results of one model, in their order (a Dask collection's partitions).

        Parameters
        ----------
        results : list of StagedRegressionResult
            At least one; of the same model.

        Returns
        -------
        StagedRegressionResult
            The rows of all, in the results' order.
        """
        return stacked_result(cls, results, ("prediction", "stage", "known"))


class StagedAcquisitionRegressor(StageLadder, BudgetedEstimator, RegressorMixin, BaseEstimator):
    """Regressor that buys nested feature sets stage by stage, per input, while its prediction is not settled.

    See the module's doc for the stages and the exit rule.

    Parameters
    ----------
    feature_costs : FeatureCosts, lazy costs per column, mapping or pandas Series by name, or None, default=None
        The cost model (None: every feature costs 1). A unit's price is its lazy cost (a group's own lazy cost
        plus its members'); when nothing has a lazy cost, its coupled cost.
    tradeoff : float, default=0.0
        A row stops at the first stage whose predicted gap to the last stage's prediction is at most ``tradeoff``
        x the training targets' standard deviation (0: only a gap predicted at 0 stops before the last stage).
        Read when predicting.
    max_cost : float or None, default=None
        A hard cap on each row's acquisition cost: a row stops before a stage whose units would take it over.
        Read when predicting.
    stages : int, default=30
        Levels of the stage ladder (stages that would hold the same units are one).
    n_estimators : int, default=5000
        Most boosting rounds of each stage's regressor (early stopped; a RoundsWarning names a stage that still
        improved at the cap).
    learning_rate : float, default=0.1
        LightGBM's learning rate.
    num_leaves : int or "auto", default="auto"
        LightGBM's leaves per tree ("auto": 15 below 20,000 training rows, 31 below 200,000, 63 from there on).
    min_child_samples : int, default=10
        LightGBM's ``min_data_in_leaf``.
    validation_fraction : float, default=0.2
        Share of the training rows held out (for early stopping and the gap models) when ``fit`` gets no
        ``eval_set``; at 0 the gap models learn on the training rows.
    early_stopping_rounds : int, default=30
        Rounds without improvement of the held-out squared error before a regressor stops.
    random_state : int, RandomState or None, default=None
        Seed of the held-out rows and of LightGBM.
    n_jobs : int or None, default=None
        Threads of LightGBM (None: the CPUs this process may use).

    Attributes
    ----------
    stages_ : list of lightgbm.Booster
        The regressor of each stage after stage 0 (its units' columns read, the others missing).
    gaps_ : list of lightgbm.Booster
        The gap model of each stage after stage 0 but the last.
    gap0_ : float
        Stage 0's predicted gap: the held-out rows' mean ``|f_last - mean|``.
    mean_ : float
        Stage 0's prediction: the training targets' mean.
    scale_ : float
        The training targets' standard deviation (1 when it is 0), ``tradeoff``'s unit.
    stage_units_, order_, units_, unit_cost_, costs_, n_features_in_, feature_names_in_
        As :class:`~lightgbm_cegb.methods.staged.StagedAcquisitionClassifier`'s.

    Raises
    ------
    CEGBError
        When a parameter is out of range, y is not finite numbers, or the costs do not fit X.
    """

    _tradeoff = "tradeoff"
    _fitted_attribute = "stages_"
    _auto_leaves = (15, 31, 63)
    max_stage_cost = None  # every stage is trained: the gap models read the last stage

    _policy_params = ("tradeoff", "max_cost")
    _policy_methods = {"predict": ()}
    _constraints = {
        "feature_costs": COSTS, "tradeoff": Number(0.0), "max_cost": NoneOr(Number(0.0)),
        "stages": Number(1, 1000, integer=True), "n_estimators": Number(1, integer=True),
        "learning_rate": Number(0.0, low_open=True), "num_leaves": NUM_LEAVES,
        "min_child_samples": Number(1, integer=True), "validation_fraction": Number(0.0, 0.9),
        "early_stopping_rounds": Number(1, integer=True), "random_state": RANDOM_STATE, "n_jobs": N_JOBS,
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    def __init__(self, *, feature_costs=None, tradeoff: float = 0.0, max_cost: float | None = None, stages: int = 30,
                 n_estimators: int = 5000, learning_rate: float = 0.1, num_leaves="auto", min_child_samples: int = 10,
                 validation_fraction: float = 0.2, early_stopping_rounds: int = 30, random_state=None,
                 n_jobs: int | None = None) -> None:
        self.feature_costs = feature_costs
        self.tradeoff = tradeoff
        self.max_cost = max_cost
        self.stages = stages
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.validation_fraction = validation_fraction
        self.early_stopping_rounds = early_stopping_rounds
        self.random_state = random_state
        self.n_jobs = n_jobs

    # ------------------------------------------------------------------------------------------------ fit

    def fit(self, X, y, *, eval_set=None):
        """Order the units, cut the order into stages, train each stage's regressor and gap model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or a Dask array or DataFrame
            The training rows (NaN: a missing value). Rows in a Dask collection are trained on where they lie, with
            ``lightgbm.dask`` on the active ``distributed`` client's workers (see ``methods.dask_stages``).
        y : array-like of shape (n_samples,)
            The targets (finite numbers); a Dask array or Series with X a Dask collection.
        eval_set : tuple (X_valid, y_valid), optional
            Held-out rows for early stopping and the gap models (in memory; a Dask collection is computed); without
            it, ``validation_fraction`` of the training rows are held out (from a Dask collection, about
            ``dask_stages.HELD_OUT_ROWS`` where that is fewer).

        Returns
        -------
        StagedAcquisitionRegressor
            The fitted estimator.
        """
        self._check_params()
        if is_dask(X):
            self._fit_dask(X, y, eval_set)
            return self
        X = checked_data(self, "X", X)
        y = _targets(y, len(X), "y")
        n, num_features = X.shape
        self.costs_ = self._resolved_costs(num_features)
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(0, 2**31 - 1))
        if eval_set is not None:
            train, valid = (X, y), self._checked_eval_set(eval_set)
        else:
            held = int(round(self.validation_fraction * n))
            permutation = rng.permutation(n)
            fit_rows, held_rows = np.sort(permutation[held:]), np.sort(permutation[:held])
            train = (X[fit_rows], y[fit_rows])
            valid = (X[held_rows], y[held_rows]) if held else None
        params = self._units_and_params(num_features, len(train[0]), n, seed)
        names = self._lightgbm_feature_names()

        def train_on(columns: list[int]) -> lgb.Booster:
            train_set = lgb.Dataset(hidden(train[0], columns), train[1], feature_name=names)
            valid_set = None if valid is None else \
                lgb.Dataset(hidden(valid[0], columns), valid[1], reference=train_set)
            return early_stopped(self, params, train_set, valid_set,
                                 f"the stage of {len(columns)} of the {num_features} columns", "squared error")

        self._fit_stages(train_on, num_features)
        self._gap_models(float(train[1].mean()), float(train[1].std()), train[0] if valid is None else valid[0],
                         seed, params["num_threads"])
        return self

    def _checked_eval_set(self, eval_set) -> tuple | None:
        """(X_valid, y_valid) of ``eval_set``, checked (a Dask collection computed); None without one."""
        if eval_set is None:
            return None
        if not (isinstance(eval_set, tuple) and len(eval_set) == 2):
            raise CEGBError(f"eval_set should be a tuple (X_valid, y_valid), got {type(eval_set).__name__}")
        X_valid, y_valid = computed(eval_set)
        X_valid = checked_data(self, "eval_set: X_valid", X_valid, reset=False)
        return X_valid, _targets(y_valid, len(X_valid), "eval_set: y_valid")

    def _units_and_params(self, num_features: int, rows: int, n: int, seed: int) -> dict:
        """``units_`` and ``unit_cost_`` of the costs over ``num_features`` columns, and the stages' LightGBM parameters
        for ``rows`` training rows (of ``n`` in all, which set the threads)."""
        units = self.costs_.units(num_features)
        self.units_, self.unit_cost_ = [columns for _, columns, _ in units], np.array([p for _, _, p in units])
        leaves = auto_value(rows, self._auto_leaves) if self.num_leaves == "auto" else int(self.num_leaves)
        return {"objective": "regression", "learning_rate": self.learning_rate, "num_leaves": leaves,
                "min_data_in_leaf": self.min_child_samples, "seed": seed, "deterministic": True, "verbose": -1,
                "num_threads": resolve_n_jobs(self.n_jobs, n)}

    def _fit_dask(self, X, y, eval_set) -> None:
        """``fit`` of rows in Dask collections (``methods.dask_stages``): every stage's regressor trained with
        ``lightgbm.dask`` on the active client's workers, on the rows spread there once, early stopped on rows in
        memory by the l2 every worker computes alike; the gap models learn in memory on the held-out rows (without
        any: on about ``dask_stages.HELD_OUT_ROWS`` training rows drawn into memory)."""
        import dask

        client = dask_stages.dask_client()
        rows = dask_stages.DaskRows.of_targets(self, X, y)
        num_features = rows.X.shape[1]
        self.costs_ = self._resolved_costs(num_features)
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(0, 2**31 - 1))
        train, stop = dask_stages.spread_with_stop(self, rows, self._checked_eval_set(eval_set), rng, client)
        params = self._units_and_params(num_features, train.n, rows.n, seed)
        names = self._lightgbm_feature_names()

        def train_on(columns: list[int]) -> lgb.Booster:
            return dask_stages.trained(self, params, train, None, columns, (None, None), stop,
                                       f"the stage of {len(columns)} of the {num_features} columns", names,
                                       dask_stages.l2, "squared error")

        self._fit_stages(train_on, num_features)
        mean, std = dask.compute(train.labels.mean(), train.labels.std())
        judged = stop[0] if stop is not None else train.sample(dask_stages.HELD_OUT_ROWS, seed)[0]
        self._gap_models(float(mean), float(std), judged, seed, params["num_threads"])

    def _gap_models(self, mean: float, std: float, judged: np.ndarray, seed: int, threads: int) -> None:
        """Stage 0 (the training targets' ``mean``), ``tradeoff``'s unit (their ``std``, 1 where it is 0) and the gap
        models, learned on the rows ``judged`` (in memory)."""
        names = self._lightgbm_feature_names()
        self.mean_ = mean
        self._compile("stages", self.stages_, [self.mean_])
        self.scale_ = std if std > 0 else 1.0
        last = len(self.stages_)
        final = self._stage_prediction(last, self._masked(judged, last))
        self.gap0_ = float(np.abs(final - self.mean_).mean())
        self.gaps_ = []
        for k in range(1, last):
            masked = self._masked(judged, k)
            gap = np.abs(final - self._stage_prediction(k, masked))
            self.gaps_.append(lgb.train({**GAP_PARAMS, "seed": seed, "num_threads": threads},
                                        lgb.Dataset(masked, gap, feature_name=names), GAP_ROUNDS))
        self._compile("gaps", self.gaps_, [self.gap0_])

    # ----------------------------------------------------------------------------------------- the policy

    def _stage_prediction(self, k: int, masked: np.ndarray) -> np.ndarray:
        if k == 0:
            return np.full(len(masked), self.mean_)
        compiled = self._compiled_outputs("stages", self.stages_, k, masked)
        if compiled is not None:
            return compiled[:, 0]
        return self.stages_[k - 1].predict(masked, num_threads=resolve_n_jobs(self.n_jobs, len(masked)))

    def _gap(self, k: int, masked: np.ndarray) -> np.ndarray:
        """Stage k's predicted gap to the last stage's prediction, of rows at stage k (their ``masked`` values)."""
        if k == 0:
            return np.full(len(masked), self.gap0_)
        compiled = self._compiled_outputs("gaps", self.gaps_, k, masked)
        if compiled is not None:
            return compiled[:, 0]
        return self.gaps_[k - 1].predict(masked, num_threads=resolve_n_jobs(self.n_jobs, len(masked)))

    def _settled(self, gap: np.ndarray) -> np.ndarray:
        return gap <= float(self.tradeoff) * self.scale_

    def _pay(self, state, unit: int, rows: np.ndarray) -> None:
        """Charge ``rows`` of ``state`` for ``unit``'s columns (a group's own cost once per row)."""
        for f in self.units_[unit]:
            state.pay(f, rows)

    def _check_policy(self) -> None:
        """Check the parameters read when predicting (``set_params`` changes them on a fitted model)."""
        check_params(self, self._constraints, self._policy_params)

    def __lightgbm_cegb_policy__(self, n: int) -> StagedRegressionRun:
        """A run for ``n`` rows that are told the values of the units they ask for: how ``predict_result`` and
        ``LazyPredictor`` drive it."""
        self._check_fitted()
        self._check_policy()
        return StagedRegressionRun(self, n)

    def predict_result(self, X) -> StagedRegressionResult:
        """What each row buys, its prediction and its cost.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or a Dask array or DataFrame
            The rows, every value known (only those bought are read); a Dask collection's partition by partition,
            where they lie.

        Returns
        -------
        StagedRegressionResult
            The predictions, the stages, the features bought and the costs.
        """
        if is_dask(X):
            return self._by_partition(X, StagedRegressionResult.stacked)
        self._check_fitted()
        X = checked_data(self, "X", X, reset=False)
        run = self.__lightgbm_cegb_policy__(len(X))
        return drive(self, X, run).result()

    def predict(self, X) -> np.ndarray:
        """The prediction of the stage each row stops at.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or a Dask array or DataFrame
            The rows (a Dask collection's partition by partition).

        Returns
        -------
        ndarray of shape (n_samples,)
            The predictions.
        """
        return self.predict_result(X).prediction

    def prediction_cost(self, X, *, n_jobs: int | None = None) -> CostReport:
        """The exact per-row cost of what each row buys on X (and of the stages' and gap models' evaluations).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or a Dask array or DataFrame
            The rows (a Dask collection's partition by partition).
        n_jobs : int or None, default=None
            Unused (the models' threads are the estimator's ``n_jobs``); accepted as by every estimator.

        Returns
        -------
        CostReport
            ``predict_result(X).cost``.
        """
        return self.predict_result(X).cost

    def predict_results(self, X, settings) -> list[StagedRegressionResult]:
        """:meth:`predict_result` at each of ``settings`` (dicts of ``tradeoff`` and ``max_cost``, the model's own
        where a dict does not say), from one pass of every stage's models over X: each result equals
        ``predict_result`` with those parameters set, to the bit.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or a Dask array or DataFrame
            The rows, every value known (a Dask collection's partition by partition).
        settings : sequence of dict
            Each with ``tradeoff`` and/or ``max_cost``.

        Returns
        -------
        list of StagedRegressionResult
            One per setting, in their order.
        """
        self._check_fitted()
        if is_dask(X):
            return self._by_partition(X, StagedRegressionResult.stacked, settings)
        return self._results_at(X, settings)

    def _stage_pass(self, k: int, X: np.ndarray, masked: np.ndarray, carried=None) -> tuple:
        """Stage ``k``'s predictions and gaps (the last stage's: 0) of every row, and what its regressor and gap
        model cost each to evaluate (None: nothing)."""
        last = len(self.stages_)
        return (self._stage_prediction(k, masked), self._gap(k, masked) if k < last else np.zeros(len(X)),
                self._added(self.stages_[k - 1], X, masked) if k else None,
                self._added(self.gaps_[k - 1], X, masked) if 0 < k < last else None)

    def replay(self, predictions: list, gaps: list, added: list, gap_added: list) -> StagedRegressionResult:
        """The result of a run whose stages' predictions, gaps and evaluation costs on every row are known.

        Parameters
        ----------
        predictions, gaps, added, gap_added : list
            :meth:`stage_passes`'s result on the rows, for stages up to this model's last at least.

        Returns
        -------
        StagedRegressionResult
            As ``predict_result`` on the rows.
        """
        run = StagedRegressionRun(self, len(predictions[0]))
        rows = np.arange(len(predictions[0]))
        for k in range(1, run.last + 1):
            if gap_added[k - 1] is not None:  # every row at stage k - 1 asks its gap model
                run.evaluation.cost[rows] += gap_added[k - 1][rows]
            rows = rows[~self._settled(gaps[k - 1][rows])]
            for unit in self.order_[self.stage_units_[k - 1]:self.stage_units_[k]]:
                self._pay(run.state, int(unit), rows)
            if added[k] is not None:
                run.evaluation.cost[rows] += added[k][rows]
            run.stage[rows] = k
            run.prediction[rows] = predictions[k][rows]
        return run.result()

    def tradeoff_scale(self, X, y, **fit_params) -> float:
        """The smallest ``tradeoff`` at which the model fitted on (X, y) buys nothing: stage 0's predicted gap over
        the targets' standard deviation (fits the model).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The training rows.
        y : array-like of shape (n_samples,)
            The targets.
        **fit_params : dict
            As for ``fit``.

        Returns
        -------
        float
            ``first_value()`` of the fitted model.
        """
        from sklearn.base import clone
        return clone(self).fit(X, y, **fit_params).first_value()

    def first_value(self) -> float:
        """The smallest ``tradeoff`` at which this fitted model buys nothing: ``gap0_ / scale_``.

        Returns
        -------
        float
            The value.
        """
        self._check_fitted()
        return float(self.gap0_ / self.scale_)

    # --------------------------------------------------------------------------------------- save / load

    def _saved_state(self) -> tuple[dict, dict]:
        return ({"units": [list(u) for u in self.units_], "unit_cost": self.unit_cost_, "order": self.order_,
                 "stage_units": self.stage_units_, "mean": self.mean_, "scale": self.scale_, "gap0": self.gap0_},
                {**{f"stage_{k}": b.model_to_string() for k, b in enumerate(self.stages_, start=1)},
                 **{f"gap_{k}": b.model_to_string() for k, b in enumerate(self.gaps_, start=1)}})

    def _restore(self, state: dict, folder, manifest: dict) -> None:
        restore_units(self, state)
        self._restore_ladder(state)
        for key, low in (("mean", None), ("scale", 0.0), ("gap0", 0.0)):
            value = state.get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or \
                    (low is not None and value < low) or (key == "scale" and value == 0):
                raise saved.damaged(state, f"{key} should be a finite number"
                                           f"{'' if low is None else ' above 0' if key == 'scale' else ' >= 0'}, "
                                           f"got {value!r:.40}")
        self.mean_, self.scale_, self.gap0_ = float(state["mean"]), float(state["scale"]), float(state["gap0"])
        self.stages_ = [saved.booster(folder, manifest, f"stage_{k}", kinds=("regression",), outputs=1)
                        for k in range(1, len(self.stage_units_))]
        self.gaps_ = [saved.booster(folder, manifest, f"gap_{k}", kinds=("regression",), outputs=1)
                      for k in range(1, len(self.stages_))]
        self._compile("stages", self.stages_, [self.mean_])
        self._compile("gaps", self.gaps_, [self.gap0_])


def _targets(y, n: int, name: str) -> np.ndarray:
    """Regression targets: ``n`` finite numbers, as float64 (a column vector raveled, with scikit-learn's
    DataConversionWarning)."""
    if y is None:
        raise CEGBError(f"{name}: this regressor requires y to be passed, but the target y is None")
    y = np.asarray(y)
    if y.shape == (n, 1):
        y = column_or_1d(y, warn=True)
    if y.shape != (n,):
        raise CEGBError(f"{name} should hold {n} targets (one per row of X), got shape {y.shape}")
    try:
        values = y.astype(np.float64)
    except (TypeError, ValueError):
        raise CEGBError(f"{name} should hold finite numbers, got {y.dtype}") from None
    bad = np.flatnonzero(~np.isfinite(values))
    if len(bad):
        raise CEGBError(f"{name} should hold finite numbers, got {values[bad[0]].item()!r} in row {bad[0]}")
    return values


class StagedRegressionRun(LadderRun):
    """The regressor's rows on the ladder (a :class:`~lightgbm_cegb.methods.ladder.LadderRun`): a row at stage k
    goes on while stage k's gap model says its prediction is not settled; deciding costs the gap model's
    evaluation.

    Parameters
    ----------
    model : StagedAcquisitionRegressor
        The fitted model.
    n : int
        Number of rows.
    """

    def __init__(self, model: StagedAcquisitionRegressor, n: int) -> None:
        super().__init__(model, n)
        self.prediction = np.full(n, model.mean_)

    def _going(self, k: int, rows: np.ndarray) -> np.ndarray:
        model = self.model
        masked = self.X[rows]
        if k:
            self.evaluation.booster = model.gaps_[k - 1]
            self.evaluation.add(masked, rows)
        return ~model._settled(model._gap(k, masked))

    def _entered(self, k: int, rows: np.ndarray) -> None:
        self.prediction[rows] = self.model._stage_prediction(k, self.X[rows])

    def output(self, method: str) -> np.ndarray:
        """``predict``'s values: each row's stage's prediction."""
        return self.prediction

    def result(self) -> StagedRegressionResult:
        """What the run did."""
        return StagedRegressionResult(prediction=self.prediction.copy(), stage=self.stage.copy(), known=self._known(),
                                      cost=run_cost(self.model, self.state, self.evaluation.cost))
