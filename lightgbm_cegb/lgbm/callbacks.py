"""Training callbacks that watch the prediction cost, in the style of ``lightgbm/callback.py``.

Each is a small picklable class with an ``order``, built by a public factory function, so it works with
``lgb.train``, ``lgb.cv`` (one cost state per fold's booster; the mean over folds is reported) and the
scikit-learn API's ``fit(callbacks=...)``. The cost on X is updated incrementally: after each iteration
only the new trees are routed, with per-row state kept between iterations.
"""

from __future__ import annotations

import warnings

import lightgbm as lgb
import numpy as np
from lightgbm.callback import CallbackEnv, EarlyStopException

from lightgbm_cegb.core.cost_state import CostState
from lightgbm_cegb.core.costs import FeatureCosts, resolve_costs
from lightgbm_cegb.core.errors import BudgetWarning, CEGBError
from lightgbm_cegb.core.validation import check_number
from lightgbm_cegb.io.ledger import CEGBState
from lightgbm_cegb.io.lightgbm_text import read_text

__all__ = ["budget_stopping", "record_cost", "start_from"]


class _BoosterCosts:
    """Per-row cost of one booster's trees on X, updated as iterations are added."""

    def __init__(self, n_jobs: int | None) -> None:
        self.iterations = 0
        self.state: CostState | None = None
        self.n_jobs = n_jobs

    def update(self, booster, X, costs: FeatureCosts | None) -> tuple[float, float]:
        """Route X through the iterations added since the last call; return the mean (acquisition, evaluation)."""
        current = booster.current_iteration()
        if current < self.iterations:
            raise CEGBError(f"the booster has {current} iterations, fewer than the {self.iterations} already "
                            "counted (rollback_one_iter?): cost callbacks follow a model that only grows")
        if current == self.iterations and self.state is not None:  # LightGBM found no split: no tree added
            return self.state.mean()
        new = read_text(booster.model_to_string(start_iteration=self.iterations,
                                                num_iteration=current - self.iterations))
        if self.state is None:
            # None: the cegb_* parameters written in the model
            resolved = resolve_costs(costs, new.num_features, new.feature_names, new.params, unpriced="refuse")
            self.state = CostState(np.shape(X)[0], resolved, new.num_features)
        self.state.add(new, X, n_jobs=self.n_jobs)
        self.iterations = current
        return self.state.mean()


class _CostCallback:
    """Shared state: one _BoosterCosts per booster (one for lgb.train, one per fold for lgb.cv)."""

    def __init__(self, X, costs, n_jobs: int | None = None) -> None:
        self.X = X
        self.costs = None if costs is None else FeatureCosts.coerce(costs)
        self.n_jobs = n_jobs
        self._states: list[_BoosterCosts] = []

    def _mean_cost(self, env: CallbackEnv) -> tuple[float, float, float]:
        """Mean (acquisition, evaluation) per row, over the boosters (lgb.cv: the folds), and the standard
        deviation over the boosters of their mean cost."""
        boosters = getattr(env.model, "boosters", None) or [env.model]
        if len(self._states) != len(boosters) or env.iteration == env.begin_iteration:
            self._states = [_BoosterCosts(self.n_jobs) for _ in boosters]
        means = np.array([state.update(b, self.X, self.costs)
                          for state, b in zip(self._states, boosters)])
        acquisition, evaluation = means.mean(axis=0)
        return float(acquisition), float(evaluation), float(means.sum(axis=1).std())


class _RecordCostCallback(_CostCallback):
    def __init__(self, X, costs, eval_result: dict, n_jobs: int | None) -> None:
        super().__init__(X, costs, n_jobs)
        # an instance attribute, as LightGBM's callbacks have: lgb.train sets a missing instance order to the
        # callback's list position, which would shadow a class attribute
        self.order = 20  # with record_evaluation, before early stopping
        if not isinstance(eval_result, dict):
            raise CEGBError(f"eval_result should be a dict, got {type(eval_result).__name__}")
        self.eval_result = eval_result
        self.before_iteration = False

    def __call__(self, env: CallbackEnv) -> None:
        if env.iteration == env.begin_iteration:
            self.eval_result.clear()
            for key in ("cost", "cost-stdv", "acquisition", "evaluation"):
                self.eval_result[key] = []
        acquisition, evaluation, stdv = self._mean_cost(env)
        self.eval_result["cost"].append(acquisition + evaluation)
        self.eval_result["cost-stdv"].append(stdv)
        self.eval_result["acquisition"].append(acquisition)
        self.eval_result["evaluation"].append(evaluation)


class _BudgetStoppingCallback(_CostCallback):
    def __init__(self, X, costs, budget: float, verbose: bool, n_jobs: int | None) -> None:
        super().__init__(X, costs, n_jobs)
        self.order = 29  # just before LightGBM's early_stopping (30); an instance attribute (see record_cost's)
        check_number(budget, "budget", 0.0)
        self.budget = float(budget)
        self.verbose = verbose
        self.before_iteration = False
        self._within: list[tuple[int, list]] = []

    def __call__(self, env: CallbackEnv) -> None:
        if env.iteration == env.begin_iteration:
            self._within = []
        acquisition, evaluation, _ = self._mean_cost(env)
        cost = acquisition + evaluation
        if cost <= self.budget:
            self._within.append((env.iteration, list(env.evaluation_result_list or [])))
            return
        if not self._within:
            warnings.warn(f"budget_stopping: the first iteration already costs {cost:g} > budget "
                          f"{self.budget:g}; no iteration fits the budget, keeping the first", BudgetWarning,
                          stacklevel=2)
            best = (env.iteration, list(env.evaluation_result_list or []))
        else:
            best = self._best_within(env)
        if self.verbose:
            print(f"Budget stopping: iteration {env.iteration + 1} would cost {cost:g} > {self.budget:g}; "
                  f"best iteration within budget: {best[0] + 1}")
        raise EarlyStopException(best[0], best[1])

    def _best_within(self, env: CallbackEnv) -> tuple[int, list]:
        """The iteration within budget with the best score of the first validation metric (the one
        early_stopping reads first; the training data skipped as it skips it), else the last one."""
        scores = [_validation_score(results, env) for _, results in self._within]
        if any(score is None for score in scores):
            return self._within[-1]
        higher_better = scores[0][1]
        values = np.array([value for value, _ in scores])
        return self._within[int(np.argmax(values) if higher_better else np.argmin(values))]


def _validation_score(results: list, env: CallbackEnv) -> tuple[float, bool] | None:
    """(value, higher is better) of the first metric on validation data in an evaluation result list."""
    for result in results:
        dataset = result[0]
        if isinstance(env.model, lgb.CVBooster) and dataset == "train":
            continue
        if isinstance(env.model, lgb.Booster) and dataset == env.model._train_data_name:
            continue
        return float(result[2]), bool(result[3])
    return None


def record_cost(X, costs: FeatureCosts | None = None, eval_result: dict | None = None, *,
                n_jobs: int | None = None) -> _RecordCostCallback:
    """Record the mean prediction cost on X after every iteration.

    A training callback for ``lgb.train``, ``lgb.cv`` and the scikit-learn API's ``fit(callbacks=...)``, in the
    style of ``lightgbm.record_evaluation``. The cost is updated incrementally: after each iteration only the
    new trees are routed.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Rows to measure the cost on (typically validation data).
    costs : FeatureCosts, lazy costs per column, mapping by feature name or None, default=None
        The cost model. None uses the ``cegb_*`` training parameters.
    eval_result : dict
        Filled, like ``lightgbm.record_evaluation``'s, with lists ``"cost"``, ``"acquisition"`` and
        ``"evaluation"``: one mean per iteration (with ``lgb.cv``, the mean over the folds' models), and
        ``"cost-stdv"``: the standard deviation of the folds' mean costs (0 with ``lgb.train``). Cleared at
        the first iteration of each training.
    n_jobs : int or None, default=None
        Threads for routing the rows through the new trees (None: the CPUs this process may use).

    Returns
    -------
    callable
        The callback (a picklable object with LightGBM's ``order``), to pass in ``callbacks=[...]``.

    Raises
    ------
    CEGBError
        If ``eval_result`` is None or not a dict.
    """
    if eval_result is None:
        raise CEGBError("eval_result should be a dict to fill, got None")
    return _RecordCostCallback(X, costs, eval_result, n_jobs)


def budget_stopping(X, costs: FeatureCosts | None = None, budget: float = 0.0, *,
                    verbose: bool = True, n_jobs: int | None = None) -> _BudgetStoppingCallback:
    """Stop training when the mean prediction cost on X would exceed ``budget``.

    The booster's ``best_iteration`` becomes, among the iterations whose cost is within the budget, the one
    with the best score of the first validation metric (as ``early_stopping`` reads it; without validation
    data, the last one within the budget). With ``early_stopping`` as well, the model kept is the best
    validation iteration within the budget. Predictions and saved models then use it by default.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Rows to measure the mean cost on (typically validation data).
    costs : FeatureCosts, lazy costs per column, mapping by feature name or None, default=None
        The cost model. None uses the ``cegb_*`` training parameters.
    budget : float, default=0.0
        The largest mean cost per row of X (acquisition plus evaluation); a finite number >= 0.
    verbose : bool, default=True
        Print the iteration that went over the budget and the best iteration kept.
    n_jobs : int or None, default=None
        Threads for routing the rows through the new trees (None: the CPUs this process may use).

    Returns
    -------
    callable
        The callback (a picklable object with LightGBM's ``order``, just before ``early_stopping``'s), to pass in
        ``callbacks=[...]``.

    Raises
    ------
    CEGBError
        If ``budget`` is not a finite number >= 0.

    Warns
    -----
    BudgetWarning
        When the first iteration already costs more than ``budget``: that iteration is kept.
    """
    return _BudgetStoppingCallback(X, costs, budget, verbose, n_jobs)


class _StartFromCallback:
    def __init__(self, state: CEGBState) -> None:
        if not isinstance(state, CEGBState):
            raise CEGBError(f"state should be a CEGBState, got {type(state).__name__}")
        self.state = state
        self.order = 0  # an instance attribute (see record_cost's)
        self.before_iteration = True

    def __call__(self, env: CallbackEnv) -> None:
        if env.iteration != env.begin_iteration:
            return
        if isinstance(env.model, lgb.CVBooster):
            raise CEGBError("start_from: lgb.cv trains each fold on other rows; a ledger is for one training set")
        self.state.apply(env.model)


def start_from(state: CEGBState) -> _StartFromCallback:
    """Start training from a CEGB ledger: the rows have paid, and the model has bought, what ``state`` says.

    The ledger (:class:`~lightgbm_cegb.io.ledger.CEGBState`) is applied before the first new tree. For example
    what another booster on the same rows bought (``CEGBState.from_booster``), or features computed upstream for
    some rows (``CEGBState.empty(...).pay(feature, rows)``).

    Parameters
    ----------
    state : CEGBState
        The ledger of the training rows: which features each row has paid for and which the model has bought.

    Returns
    -------
    callable
        The callback (run before the first iteration), to pass in ``callbacks=[...]`` of ``lgb.train`` or of the
        scikit-learn API's ``fit``.

    Raises
    ------
    CEGBError
        If ``state`` is not a :class:`~lightgbm_cegb.io.ledger.CEGBState`; at training time, with ``lgb.cv``
        (each fold trains on other rows, a ledger is for one training set).
    """
    return _StartFromCallback(state)
