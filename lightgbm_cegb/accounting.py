"""Exact prediction cost of a tree ensemble on given rows (SEEDS.md section 0).

For every row: the lazy (per-instance) cost of the distinct features tested on its root-to-leaf paths in
all trees (acquisition), plus the split cost of every split node it traverses (evaluation). The model's
coupled cost is the sum of the coupled costs of the features any split uses. Rows are routed by the
Cython engine exactly as LightGBM (or scikit-learn) routes them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import lightgbm as lgb
import numpy as np

from .costs import FeatureCosts
from .ensemble import TreeEnsemble, to_ensemble
from .errors import CEGBError


@dataclass(frozen=True)
class CostReport:
    """Prediction cost of a model on a set of rows."""

    acquisition: np.ndarray  # per row: lazy costs of the distinct features the row's paths test
    evaluation: np.ndarray  # per row: split costs of the split nodes traversed in all trees
    coupled: float  # coupled costs of the features the model uses (once per model)
    usage: np.ndarray  # per feature: fraction of rows whose paths test it
    curve: np.ndarray | None = None  # mean per-row cost after each iteration (per_iteration=True)

    @property
    def per_instance(self) -> np.ndarray:
        return self.acquisition + self.evaluation

    @property
    def mean(self) -> float:
        return float(self.per_instance.mean()) if self.per_instance.size else 0.0

    def to_dict(self) -> dict:
        """A JSON-ready summary (without the per-row arrays)."""
        out = {"rows": int(self.per_instance.size), "mean": self.mean,
               "mean_acquisition": float(self.acquisition.mean()) if self.acquisition.size else 0.0,
               "mean_evaluation": float(self.evaluation.mean()) if self.evaluation.size else 0.0,
               "coupled": self.coupled, "usage": self.usage.tolist()}
        if self.curve is not None:
            out["curve"] = self.curve.tolist()
        return out


def resolve_costs(ensemble: TreeEnsemble, costs) -> FeatureCosts:
    """``costs`` as aligned FeatureCosts for the model; None reads the model's own cegb_* parameters."""
    if costs is None:
        costs = FeatureCosts.from_params(ensemble.params)
        if costs is None:
            raise CEGBError("costs is None and the model was not trained with cegb_* parameters: "
                            "pass costs=FeatureCosts(...)")
    elif not isinstance(costs, FeatureCosts):
        costs = FeatureCosts(lazy=costs)
    if not costs.is_aligned:
        if ensemble.feature_names is None:
            raise CEGBError("costs are given by feature name but the model has no feature names")
        costs = costs.align(ensemble.feature_names)
    if costs.num_features not in (None, ensemble.num_features):
        raise CEGBError(f"costs are for {costs.num_features} features but the model has {ensemble.num_features}")
    return costs


def _booster_of(model) -> lgb.Booster | None:
    """The LightGBM Booster behind model (a Booster or a fitted sklearn-API model), else None."""
    if isinstance(model, lgb.LGBMModel):
        return model.booster_
    return model if isinstance(model, lgb.Booster) else None


def as_rows(ensemble: TreeEnsemble, X, model=None) -> np.ndarray:
    """X as the C-contiguous float64 rows the engine reads, converted as the model's library would."""
    booster = _booster_of(model)
    if hasattr(X, "columns") and booster is not None:
        from lightgbm.basic import _data_from_pandas  # LightGBM's own mapping of pandas categoricals

        X = _data_from_pandas(X, feature_name="auto", categorical_feature="auto",
                              pandas_categorical=booster.pandas_categorical)[0]
    elif hasattr(X, "tocsr"):
        X = X.toarray()
    X = np.asarray(X)
    if X.ndim != 2:
        raise CEGBError(f"X should be 2-dimensional, got shape {X.shape}")
    if X.shape[1] != ensemble.num_features:
        raise CEGBError(f"X has {X.shape[1]} features but the model has {ensemble.num_features}")
    if not ensemble.drop_tiny:  # scikit-learn predicts on float32 values
        X = X.astype(np.float32)
    return np.ascontiguousarray(X, dtype=np.float64)


def prediction_cost(model, X, costs=None, *, num_iteration: int | None = None,
                    per_iteration: bool = False) -> CostReport:
    """Per-row prediction cost of ``model`` on ``X``.

    Parameters
    ----------
    model : lightgbm.Booster, LGBMModel, model file path, or fitted scikit-learn tree model
        scikit-learn: DecisionTree*, RandomForest*, ExtraTrees*, GradientBoosting*.
    X : array-like of shape (n_rows, n_features)
        numpy array, scipy sparse matrix or pandas DataFrame.
    costs : FeatureCosts or array-like of lazy costs, optional
        None reads the ``cegb_*`` parameters the LightGBM model was trained with.
    num_iteration : int, optional
        Use the first ``num_iteration`` iterations. None: as ``Booster.predict``, the best iteration if
        the booster has one, otherwise all.
    per_iteration : bool, default False
        Also compute ``curve``: the mean per-row cost after each iteration, in the same pass.
    """
    ensemble = to_ensemble(model)
    costs = resolve_costs(ensemble, costs)
    booster = _booster_of(model)
    if num_iteration is None and booster is not None:
        num_iteration = booster.best_iteration
    num_trees = ensemble.num_trees_for(num_iteration)
    rows = as_rows(ensemble, X, model)
    lazy, coupled, split = costs.arrays(ensemble.num_features)
    acquisition, evaluation, rows_using, curve = ensemble.flat.cost(
        rows, num_trees, np.ascontiguousarray(lazy), np.ascontiguousarray(split), per_iteration,
        os.cpu_count() or 1)
    used = ensemble.used_features(num_trees)
    return CostReport(acquisition=acquisition, evaluation=evaluation, coupled=float(coupled[used].sum()),
                      usage=rows_using / max(len(rows), 1), curve=curve)
