"""Early Exit's view of the additive models of other libraries than LightGBM: XGBoost, CatBoost and scikit-learn's
HistGradientBoostingClassifier (their objectives, iterations and their own prediction with the first iterations)."""

from __future__ import annotations

import json

import numpy as np

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.io.models import library_of, to_forest

#: XGBoost's and CatBoost's objectives (loss functions) that Early Exit reads as classification or ranking
XGBOOST_CLASSIFICATION = ("binary:logistic", "multi:softprob", "multi:softmax")
CATBOOST_CLASSIFICATION = ("Logloss", "CrossEntropy", "MultiClass")
CATBOOST_RANKING = ("YetiRank", "YetiRankPairwise", "PairLogit", "PairLogitPairwise", "QueryRMSE", "QuerySoftMax",
                    "LambdaMart", "StochasticRank")


class OtherLibrary:
    """Early Exit's view of a model of XGBoost, CatBoost or scikit-learn's HistGradientBoostingClassifier:
    its forest, ``kind``, the iterations its ``predict`` uses and ``predict(X, stop)``, the library's own
    prediction with its first ``stop`` iterations (classification: class probabilities, two classes the
    second's; ranking: the raw score)."""

    def __init__(self, model) -> None:
        library = library_of(model)
        self.model, self.library, self.forest = model, library, to_forest(model) if library else None
        if library == "xgboost":
            booster = model.get_booster() if hasattr(model, "get_booster") else model
            self.objective = json.loads(booster.save_config())["learner"]["objective"]["name"]
            self.kind = "classify" if self.objective in XGBOOST_CLASSIFICATION else \
                "rank" if self.objective.startswith("rank:") else None
            rounds = booster.num_boosted_rounds()
            if self.forest.parallel_trees > 1:
                raise CEGBError("model: an XGBoost model of several trees per output and round (num_parallel_tree "
                                "> 1) has no exit between its trees' groups; not supported")
            best = getattr(model, "best_iteration", None) if hasattr(model, "get_booster") else None
            self.iterations, self.booster = rounds if best is None else best + 1, booster
        elif library == "catboost":
            self.objective = str(model.get_all_params()["loss_function"]).split(":")[0]
            self.kind = "classify" if self.objective in CATBOOST_CLASSIFICATION else \
                "rank" if self.objective in CATBOOST_RANKING else None
            self.iterations = model.tree_count_
        elif library == "hist":
            from sklearn.base import is_classifier
            self.objective = type(model).__name__
            self.kind = "classify" if is_classifier(model) else None
            self.iterations = model.n_iter_
        else:
            raise CEGBError(f"model should be a LightGBM, XGBoost or CatBoost model or a HistGradientBoosting"
                            f"Classifier, got {type(model).__name__}")
        if self.kind is None:
            raise CEGBError(f"model: {library}'s objective {self.objective!r} is neither a ranking nor a "
                            "classification one")

    def predict(self, X: np.ndarray, stop: int) -> np.ndarray:
        if self.library == "xgboost":
            import xgboost as xgb

            margin = self.kind == "rank" or self.objective == "multi:softmax"
            out = self.booster.predict(xgb.DMatrix(X, feature_names=self.booster.feature_names),
                                       iteration_range=(0, stop), output_margin=margin)
            if self.objective == "multi:softmax":  # its predict gives labels: the probabilities of softprob
                out = np.exp(out - out.max(axis=1, keepdims=True))
                out /= out.sum(axis=1, keepdims=True)
            return out
        if self.library == "catboost":
            if self.kind == "rank":
                return self.model.predict(X, prediction_type="RawFormulaVal", ntree_end=stop)
            proba = self.model.predict(X, prediction_type="Probability", ntree_end=stop)
            return proba[:, 1] if proba.shape[1] == 2 else proba
        for k, proba in enumerate(self.model.staged_predict_proba(X), start=1):
            if k == stop:
                return proba[:, 1] if proba.shape[1] == 2 else proba
        raise CEGBError(f"internal error: the model has fewer than {stop} iterations; please report this")
