"""scikit-learn estimators: LightGBM's, plus a cost model and its CEGB trade-off.

Cost-efficient gradient boosting (CEGB): Peter, Diego, Hamprecht and Nadler, "Cost efficient gradient boosting",
NIPS 2017, as implemented by the patched LightGBM's ``cegb_*`` parameters.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import lightgbm as lgb
import numpy as np
from sklearn.preprocessing import LabelEncoder

from lightgbm_cegb.accounting import prediction_cost
from lightgbm_cegb.base import BudgetedEstimator
from lightgbm_cegb.core.costs import FeatureCosts, resolve_costs
from lightgbm_cegb.core.errors import CEGBError, NoSplitWarning
from lightgbm_cegb.core.report import CostReport
from lightgbm_cegb.core.validation import Number, Satisfies
from lightgbm_cegb.io import saved
from lightgbm_cegb.io.lightgbm_text import with_group_names
from lightgbm_cegb.io.models import has_split, to_forest

__all__ = ["CEGBClassifier", "CEGBRanker", "CEGBRegressor"]


def _costs_kind(costs) -> bool:
    """Whether ``feature_costs`` is of a kind the CEGB estimators take: None, a FeatureCosts, or lazy costs by
    feature name (a mapping or a pandas Series)."""
    import pandas as pd

    return costs is None or isinstance(costs, (FeatureCosts, Mapping, pd.Series))


class _CEGBMixin(BudgetedEstimator):
    """Adds ``feature_costs`` (kept out of LightGBM's own parameters), ``prediction_cost`` and the package's
    estimator contract (``tradeoff_scale``, ``save``/``load``)."""

    _tradeoff = "cegb_tradeoff"
    _fitted_attribute = "fitted_"
    _probe = {"n_estimators": 1}  # tradeoff_scale: the first tree, as lightgbm_cegb.lgbm.cegb_tradeoff_scale
    _objective_kinds = ("regression", "probability")  # of a saved model's booster (io.saved.objective_kind)
    # the package's own parameters; LightGBM checks its own (LGBMModel's)
    _constraints = {
        "feature_costs": Satisfies(_costs_kind, "a FeatureCosts, a mapping or pandas Series from feature name to "
                                   "lazy cost, or None", bad=([1.0, 2.0], "costs", 3), show_type=True),
        "cegb_tradeoff": Number(0.0),  # LightGBM's own check names its C++ source
    }

    def _aligned_costs(self, X, feature_name) -> FeatureCosts | None:
        """``feature_costs`` through the one resolver (None: no costs), by name aligned to the names LightGBM gives
        the columns: fit's ``feature_name=``, else the DataFrame's, else ``Column_i``."""
        costs = self.feature_costs
        if costs is None:
            return None
        shape = X.shape if hasattr(X, "shape") else np.asarray(X).shape
        if len(shape) != 2:
            raise CEGBError(f"X should be 2-dimensional, got shape {shape}")
        unnamed = not isinstance(feature_name, (list, tuple)) and not hasattr(X, "columns")
        names = [str(n) for n in feature_name] if isinstance(feature_name, (list, tuple)) else \
            X if hasattr(X, "columns") else [f"Column_{i}" for i in range(shape[1])]
        try:
            return resolve_costs(costs, shape[1], names, unpriced="none", given_as="feature_costs")
        except CEGBError as exc:
            if unnamed and not FeatureCosts.coerce(costs).is_aligned:
                raise CEGBError(f"{exc}. X came without column names (a numpy array, e.g. from a Pipeline step): "
                                "pass fit(..., feature_name=[...]), or set_output(transform='pandas') on the "
                                "pipeline so that the names reach this estimator") from None
            raise

    def fit(self, X, y, sample_weight=None, **kwargs):
        """Build the model from the training set (X, y), with ``feature_costs`` as LightGBM's cegb penalties.

        LightGBM's ``fit``, after turning ``feature_costs`` into the ``cegb_penalty_*`` parameters (aligned to
        the columns' names: ``feature_name=``, else the DataFrame's, else ``Column_i``).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The training rows.
        y : array-like of shape (n_samples,)
            The targets.
        sample_weight : array-like of shape (n_samples,) or None, default=None
            Weights of the rows; not all zero.
        **kwargs : dict
            The other arguments of LightGBM's ``fit`` (``eval_X``, ``eval_y``, ``feature_name``, ``callbacks``,
            ``group`` for the ranker, ...).

        Returns
        -------
        self : object
            The fitted estimator.

        Raises
        ------
        CEGBError
            If ``cegb_tradeoff`` is not a finite number >= 0; if ``feature_costs`` is not a FeatureCosts, a
            mapping, a pandas Series or None; if costs given by feature name do not match the columns' names, or
            by column are for another number of columns; if every weight of ``sample_weight`` is zero.

        Warns
        -----
        NoSplitWarning
            When, with ``feature_costs`` and ``cegb_tradeoff > 0``, the model has no split (the penalty of a
            split outweighs every gain).
        """
        self._check_params()
        # sample_weight named, as in LightGBM's signature: scikit-learn looks for it there (has_fit_parameter)
        if sample_weight is not None:
            weights = np.asarray(sample_weight, dtype=np.float64)
            if weights.size and not weights.any():
                raise CEGBError("sample_weight: every weight is zero; at least one should be non-zero")
        self._fit_costs = self._aligned_costs(X, kwargs.get("feature_name", "auto"))
        super().fit(X, y, sample_weight=sample_weight, **kwargs)
        self.costs_ = self._fit_costs
        if self._fit_costs is not None and self.cegb_tradeoff > 0:
            if not has_split(self.booster_):
                warnings.warn(f"cegb_tradeoff={self.cegb_tradeoff:g}: the model has no split (the penalty of a "
                              "split, tradeoff x cost x rows, outweighs every gain); lower cegb_tradeoff",
                              NoSplitWarning, stacklevel=2)
        return self

    def predict(self, X, *args, **kwargs):
        """Predict with LightGBM's ``predict``, raising the package's NotFittedError before ``fit``.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The rows.
        *args : tuple
            LightGBM's positional arguments (``raw_score``, ``start_iteration``, ``num_iteration``, ...).
        **kwargs : dict
            LightGBM's keyword arguments.

        Returns
        -------
        ndarray
            LightGBM's predictions (of ``best_iteration`` by default).

        Raises
        ------
        NotFittedError
            If the estimator is not fitted.
        """
        self._check_fitted()  # the package's NotFittedError (LightGBM raises scikit-learn's)
        return super().predict(X, *args, **kwargs)

    predict.lightgbm_output = True  # LightGBM's answer: LazyPredictor computes it as LightGBM does (serving.outputs)

    def _reads_features(self, X) -> bool:
        return has_split(self.booster_)

    def _saved_state(self) -> tuple[dict, dict]:
        state = {"objective": self._objective, "best_iteration": self._best_iteration,
                 "fit_costs": None if self._fit_costs is None else self._fit_costs.fields(),
                 "classes": getattr(self, "_classes", None)}
        text = self.booster_.model_to_string()
        if self._fit_costs is not None and self._fit_costs.groups:  # LightGBM numbers the groups
            text = with_group_names(text, list(self._fit_costs.groups))
        return state, {"booster": text}

    def _restore_inputs(self, n_features: int, names: list[str] | None) -> None:
        self._n_features = self._n_features_in = n_features
        self._fitted_with_feature_names = names is not None

    def _restore(self, state: dict, folder, manifest: dict) -> None:
        """The fitted attributes LightGBM's ``fit`` sets (its estimators have no other way to load)."""
        self._Booster = saved.booster(folder, manifest, "booster", kinds=self._objective_kinds)
        if not isinstance(state["objective"], str):
            raise saved.damaged(state, f"objective should be a string, got {state['objective']!r:.40}")
        self._objective = state["objective"]
        self._best_iteration = saved.integer(state, "best_iteration", -1)
        if self._best_iteration > self._Booster.current_iteration():
            raise saved.damaged(state, f"best_iteration should be at most the model's "
                                       f"{self._Booster.current_iteration()} iterations, got {self._best_iteration}")
        self._best_score, self._evals_result = {}, {}
        if state["fit_costs"] is not None and not isinstance(state["fit_costs"], dict):
            raise saved.damaged(state, f"fit_costs should be null or a mapping, got {state['fit_costs']!r:.40}")
        self._fit_costs = None if state["fit_costs"] is None else FeatureCosts(**state["fit_costs"])
        self.costs_ = self._fit_costs
        if state["classes"] is not None:  # as many as the model's outputs (one output: two classes)
            self._le = LabelEncoder().fit(saved.class_labels(
                state, count=max(2, self._Booster.num_model_per_iteration())))
            self._classes = self._le.classes_
            self._n_classes = len(self._classes)
            self._class_map = dict(zip(self._classes, self._le.transform(self._classes)))
        self.fitted_ = True

    def _process_params(self, stage: str) -> dict:
        params = super()._process_params(stage)
        params.pop("feature_costs", None)  # ours, not LightGBM's
        if stage == "fit" and getattr(self, "_fit_costs", None) is not None:
            params.update(self._fit_costs.to_params())
        return params

    def prediction_cost(self, X, *, num_iteration: int | None = None, per_iteration: bool = False,
                        n_jobs: int | None = None) -> CostReport:
        """Prediction cost of the fitted model on X under ``feature_costs``.

        As :func:`lightgbm_cegb.prediction_cost` computes it on ``booster_``. Without ``feature_costs``, the cost
        model is read from the penalties given as LightGBM keyword arguments (the model's ``cegb_*``
        parameters); without those either, every cost is 0 (``core.costs.UNPRICED["zero"]``).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The rows.
        num_iteration : int or None, default=None
            Iterations counted (None: those ``predict`` uses, the best iteration if there is one).
        per_iteration : bool, default=False
            Also report the mean cost after each iteration.
        n_jobs : int or None, default=None
            Threads (None: the CPUs this process may use).

        Returns
        -------
        CostReport
            The per-row acquisition and evaluation costs, and the features' usage.

        Raises
        ------
        NotFittedError
            If the estimator is not fitted.
        """
        self._check_fitted()
        costs = self._fit_costs
        if costs is None:  # penalties given as LightGBM keyword arguments are in the model's parameters
            forest = to_forest(self.booster_)
            costs = resolve_costs(None, forest.num_features, params=forest.params, unpriced="zero")
        return prediction_cost(self.booster_, X, costs, num_iteration=num_iteration, per_iteration=per_iteration,
                               n_jobs=n_jobs)


_DOC = """{kind} with cost-efficient gradient boosting (``lightgbm.{base}`` plus a cost model).

    Cost-efficient gradient boosting: Peter, Diego, Hamprecht and Nadler, NIPS 2017. The cost model is turned
    into the patched LightGBM's ``cegb_penalty_*`` parameters at fit time; every other parameter, method and
    attribute is ``lightgbm.{base}``'s. Added: :meth:`prediction_cost`, :meth:`tradeoff_scale`, :meth:`save`
    and :meth:`load` (the package's estimator contract, :class:`lightgbm_cegb.base.BudgetedEstimator`).

    Parameters
    ----------
    feature_costs : FeatureCosts, mapping, pandas Series or None, default=None
        The prediction-cost model: a ``FeatureCosts`` (lazy, coupled and split costs, by column index or
        by feature name) or a mapping (or pandas Series) from feature name to lazy cost. Turned into LightGBM's
        ``cegb_penalty_*`` parameters at fit time and used by ``prediction_cost``. None: no cost model of the
        estimator's own (``cegb_penalty_*`` given as LightGBM keyword arguments still apply).
    cegb_tradeoff : float, default=1.0
        LightGBM's ``cegb_tradeoff``: how much one unit of cost weighs against one unit of gain.
    **kwargs : dict
        Every parameter of ``lightgbm.{base}``.

    Attributes
    ----------
    costs_ : FeatureCosts or None
        The costs of ``fit`` aligned to the columns (None without ``feature_costs``).
    fitted_ : bool
        LightGBM's fitted flag (True once fitted); LightGBM's other fitted attributes (``booster_``, ...) as
        ``lightgbm.{base}``'s.

    Examples
    --------
    >>> from lightgbm_cegb import FeatureCosts
    >>> model = {name}(feature_costs=FeatureCosts(lazy=[1.0, 10.0]), cegb_tradeoff=0.01, n_estimators=20)
    """


class CEGBRegressor(_CEGBMixin, lgb.LGBMRegressor):
    __doc__ = _DOC.format(kind="Regressor", base="LGBMRegressor", name="CEGBRegressor")

    def __init__(self, *, feature_costs=None, cegb_tradeoff: float = 1.0, **kwargs):
        self.feature_costs = feature_costs
        self.cegb_tradeoff = cegb_tradeoff
        super().__init__(**kwargs)


class CEGBClassifier(_CEGBMixin, lgb.LGBMClassifier):
    __doc__ = _DOC.format(kind="Classifier", base="LGBMClassifier", name="CEGBClassifier")
    _objective_kinds = ("classification", "probability")

    def predict_proba(self, X, *args, **kwargs):
        """Predict class probabilities with LightGBM's ``predict_proba``, raising NotFittedError before ``fit``.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The rows.
        *args : tuple
            LightGBM's positional arguments (``raw_score``, ``start_iteration``, ``num_iteration``, ...).
        **kwargs : dict
            LightGBM's keyword arguments.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            The probability of each class (with ``raw_score``, ``pred_leaf`` or ``pred_contrib``: LightGBM's
            other outputs).

        Raises
        ------
        NotFittedError
            If the estimator is not fitted.
        """
        self._check_fitted()
        return super().predict_proba(X, *args, **kwargs)

    predict_proba.lightgbm_output = True

    def __init__(self, *, feature_costs=None, cegb_tradeoff: float = 1.0, **kwargs):
        self.feature_costs = feature_costs
        self.cegb_tradeoff = cegb_tradeoff
        super().__init__(**kwargs)


class CEGBRanker(_CEGBMixin, lgb.LGBMRanker):
    __doc__ = _DOC.format(kind="Ranker", base="LGBMRanker", name="CEGBRanker")
    _objective_kinds = ("ranking", "regression", "classification", "probability")  # pointwise objectives rank too

    def __init__(self, *, feature_costs=None, cegb_tradeoff: float = 1.0, **kwargs):
        self.feature_costs = feature_costs
        self.cegb_tradeoff = cegb_tradeoff
        super().__init__(**kwargs)
