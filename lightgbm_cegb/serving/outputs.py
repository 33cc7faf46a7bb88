"""The outputs of the models whose arithmetic lazy serving repeats itself, from the raw scores the kernel sums over the
leaves the rows reached (``LazyBatch.raw_score``: from 0.0, tree by tree in the forest's order), instead of calling
the model's ``predict`` on the filled rows (a second routing, and the wrapper's checks).

Each output repeats its library's arithmetic operation for operation, so it equals the model's own to the bit:

- LightGBM (:class:`KernelOutput`): the raw score (objectives whose ConvertOutput is the identity), binary's sigmoid
  (``_engine.sigmoid``), the multiclass softmax (``_engine.softmax``); for a scikit-learn classifier of the LightGBM
  API, ``predict_proba`` of two classes as ``1 - p, p`` and ``predict`` the label of the largest probability, as
  ``LGBMClassifier`` computes them.
- XGBoost (:class:`XGBoostOutput`): float32 margins from the objective's margin of ``base_score``, tree by tree, and
  the objective's float32 transform; CatBoost (:class:`CatBoostOutput`): ``scale * sum + bias`` of the trees' own
  leaf values, the binary sigmoid and the class rules.
- scikit-learn's decision trees and forests (:class:`SklearnTreeOutput`): a tree's leaf values (a classifier's class
  fractions, as ``tree_.predict`` reads them), a forest's added tree by tree from 0.0 and divided by the number of
  trees, as ``_accumulate_prediction`` adds them one after the other (``n_jobs`` 1 or None: with more, the model's
  own order of the additions is the threads'); a classifier's label from the first largest value.
- scikit-learn's gradient boosting (:class:`SklearnOutput`): ``HistGradientBoosting*`` sums its baseline and its
  trees' values in the forest's order already (``io.sklearn_trees.read_hist``); ``GradientBoosting*`` adds
  ``learning_rate * value`` of each tree to its init estimator's constant raw prediction, so the kernel sums a table
  of its own (the first iteration's leaves hold the constant plus the product: the one rounding scikit-learn makes
  there). The raw predictions then go through the model's own loss (``_loss.predict_proba``, ``_loss.link``) and
  its decision rule (``>= 0`` for GradientBoostingClassifier, ``> 0`` for HistGradientBoostingClassifier).

Anything else (other objectives, custom ones, linear trees, a pipeline, a method that a subclass overrides, an init
estimator whose prediction depends on the row) is left to the model's ``predict``.
"""

from __future__ import annotations

from dataclasses import dataclass

import lightgbm as lgb
import numpy as np

from lightgbm_cegb._engine import sigmoid, softmax, xgboost_margin, xgboost_transform
from lightgbm_cegb.core.forest import Forest
from lightgbm_cegb.io.models import booster_of, library_of
from lightgbm_cegb.io.sklearn_trees import constant_init

#: LightGBM objectives whose ``predict`` is the raw score (written without options: no ``sqrt``)
RAW_OBJECTIVES = frozenset({"regression", "regression_l1", "huber", "fair", "quantile", "mape", "lambdarank",
                            "rank_xendcg"})


@dataclass(frozen=True)
class KernelOutput:
    """An output computed from the raw scores: ``link`` "raw", "sigmoid" (at ``scale``) or "softmax"; ``classes``: a
    scikit-learn classifier's labels (None: a Booster or a regressor, whose ``predict`` is the linked score)."""

    link: str
    scale: float = 0.0
    classes: np.ndarray | None = None
    #: the leaf values the kernel sums instead of the forest's (None: the forest's), where each sum starts (None:
    #: 0.0) and whether it sums in float32 (LazyPlan's leaf_value, start and sum32)
    leaf_value = start = None
    sum32 = False

    def takes(self, method: str, kwargs: dict) -> bool:
        """Whether ``method(X, **kwargs)`` of the model is this output (or, with ``raw_score``, the raw scores)."""
        methods = ("predict", "predict_proba") if self.classes is not None else ("predict",)
        return method in methods and set(kwargs) <= {"raw_score"}

    def __call__(self, raw: np.ndarray, method: str, kwargs: dict) -> np.ndarray:
        """The model's ``method(X, **kwargs)`` of rows whose raw scores are ``raw`` (n, trees per iteration)."""
        if kwargs.get("raw_score"):
            return raw[:, 0] if raw.shape[1] == 1 else raw
        if self.link == "raw":
            out = raw[:, 0]
        elif self.link == "sigmoid":
            out = sigmoid(np.ascontiguousarray(raw[:, 0]), self.scale)
        else:
            out = softmax(np.ascontiguousarray(raw))
        if self.classes is None:
            return out
        proba = np.vstack((1.0 - out, out)).transpose() if out.ndim == 1 else out
        return proba if method == "predict_proba" else self.classes[np.argmax(proba, axis=1)]

    def scalar(self, method: str, kwargs: dict) -> tuple[bool, float] | None:
        """(sigmoid?, scale) where the output of ``method(X, **kwargs)`` is one number per row that
        ``LazyBatch.row_output`` computes: the raw score or binary's sigmoid of a Booster or a regressor; None
        otherwise."""
        if kwargs.get("raw_score"):
            return (False, 0.0) if self.link != "softmax" else None
        if self.classes is not None or self.link == "softmax":
            return None
        return self.link == "sigmoid", self.scale


def kernel_output(model, forest: Forest):
    """The output of ``model`` that the predictor computes from the kernel's raw scores: a LightGBM Booster, or a
    fitted LGBMRegressor, LGBMClassifier or LGBMRanker whose ``predict`` and ``predict_proba`` are LightGBM's (see
    :func:`_lightgbm_methods`); scikit-learn's gradient boosting (:func:`sklearn_output`); XGBoost
    (:func:`xgboost_output`); None for any other."""
    if library_of(model) == "xgboost":
        return xgboost_output(model)
    if library_of(model) == "catboost":
        return catboost_output(model)
    if not isinstance(model, (lgb.Booster, lgb.LGBMModel)):
        return sklearn_output(model, forest) or sklearn_tree_output(model, forest)
    booster = model if isinstance(model, lgb.Booster) else booster_of(model) if _lightgbm_methods(model) else None
    if booster is None or forest.linear is not None or not forest.objective:
        return None
    classes = getattr(model, "classes_", None) if isinstance(model, lgb.LGBMClassifier) else None
    name, *options = forest.objective.split(" ")
    if name in RAW_OBJECTIVES and not options and classes is None:
        return KernelOutput("raw")
    if name == "binary" and len(options) == 1 and options[0].startswith("sigmoid:"):
        scale = float(options[0].split(":", 1)[1])
        # the text has 6 digits: a Booster trained here may hold a scale that the text rounds
        given = (booster.params or {}).get("sigmoid", scale)
        if scale > 0 and float(given) == scale and (classes is None or len(classes) == 2):
            return KernelOutput("sigmoid", scale, classes)
    if name == "multiclass" and forest.trees_per_iteration > 1 and not forest.average_output and \
            options == [f"num_class:{forest.trees_per_iteration}"] and \
            (classes is None or len(classes) == forest.trees_per_iteration):
        return KernelOutput("softmax", 0.0, classes)
    return None


def _lightgbm_methods(model) -> bool:
    """Whether ``model`` is a scikit-learn estimator of LightGBM's API whose ``predict`` (and ``predict_proba``)
    are LightGBM's own, or say they compute the same (a method with ``lightgbm_output = True``: the package's CEGB
    estimators, which only check that they are fitted first)."""
    if not isinstance(model, lgb.LGBMModel) or callable(getattr(model, "objective", None)):
        return False
    base = next(cls for cls in type(model).__mro__ if cls.__module__ == lgb.LGBMModel.__module__)
    return _own_methods(model, base, ("predict", "predict_proba"), marked=True)


def _own_methods(model, base: type, names: tuple, marked: bool = False) -> bool:
    """Whether ``model``'s methods ``names`` are those of ``base``, its library's class (an override computes
    something else), or with ``marked`` say they compute the same (``lightgbm_output = True``)."""
    for name in names:
        method = getattr(type(model), name, None)
        if method is not getattr(base, name, None) and not (marked and getattr(method, "lightgbm_output", False)):
            return False
    return True


@dataclass(frozen=True, eq=False)
class SklearnOutput:
    """The outputs of a fitted scikit-learn gradient boosting model (``hist``: HistGradientBoosting*, else
    GradientBoosting*) from its raw predictions; ``leaf_value``: the table the kernel sums (GradientBoosting*'s)."""

    model: object
    hist: bool
    leaf_value: np.ndarray | None = None
    start = None
    sum32 = False

    def takes(self, method: str, kwargs: dict) -> bool:
        """Whether ``method(X)`` of the model is computed here (no arguments)."""
        methods = ("predict", "predict_proba", "decision_function") if self._classifier else ("predict",)
        return method in methods and not kwargs

    @property
    def _classifier(self) -> bool:
        return hasattr(self.model, "classes_")

    def __call__(self, raw: np.ndarray, method: str, kwargs: dict) -> np.ndarray:
        """The model's ``method`` of rows whose raw predictions (``_raw_predict``) are ``raw`` (n, trees per
        iteration), as the model computes it from them."""
        model = self.model
        decision = raw[:, 0] if raw.shape[1] == 1 else raw  # decision_function's
        if not self._classifier:
            return model._loss.link.inverse(decision) if self.hist else decision
        if method == "decision_function":
            return decision
        if method == "predict_proba":
            return model._loss.predict_proba(raw if self.hist else decision)
        if decision.ndim == 1:
            encoded = (decision > 0 if self.hist else decision >= 0).astype(int)
        else:
            encoded = np.argmax(decision, axis=1)
        return model.classes_[encoded]

    def scalar(self, method: str, kwargs: dict) -> tuple[bool, float] | None:
        """(False, 0.0) where the output is the raw prediction itself (a regressor whose link is the identity,
        which LazyBatch.row_output computes); None otherwise."""
        if self._classifier or (self.hist and type(self.model._loss.link).__name__ != "IdentityLink"):
            return None
        return False, 0.0


def sklearn_output(model, forest: Forest) -> SklearnOutput | None:
    """The :class:`SklearnOutput` of a fitted GradientBoosting* or HistGradientBoosting* model whose prediction
    methods are scikit-learn's own (GradientBoosting*: whose init estimator predicts one constant,
    ``io.sklearn_trees.constant_init``); None for any other model."""
    from sklearn.ensemble import (
        GradientBoostingClassifier,
        GradientBoostingRegressor,
        HistGradientBoostingClassifier,
        HistGradientBoostingRegressor,
    )

    bases = (GradientBoostingClassifier, GradientBoostingRegressor, HistGradientBoostingClassifier,
             HistGradientBoostingRegressor)
    base = next((cls for cls in bases if isinstance(model, cls)), None)
    if base is None or forest.average_output or not hasattr(model, "_loss"):
        return None
    if not _own_methods(model, base, ("predict", "predict_proba", "decision_function", "_raw_predict")):
        return None
    if base in (HistGradientBoostingClassifier, HistGradientBoostingRegressor):
        return SklearnOutput(model, hist=True)
    if not constant_init(model):  # refused by the reader already
        return None
    start = model._raw_predict_init(np.zeros((1, model.n_features_in_)))[0]
    leaf_value = model.learning_rate * forest.leaf_value  # scale * value, each product as predict_stages makes it
    for k in range(forest.trees_per_iteration):  # the first iteration's trees: the init's prediction plus the product
        lo, hi = forest.leaf_offset[k], forest.leaf_offset[k + 1]
        leaf_value[lo:hi] = start[k] + leaf_value[lo:hi]
    return SklearnOutput(model, hist=False, leaf_value=leaf_value)


#: XGBoost objectives: (ProbToMargin of the base_score, PredTransform) as the objective computes them
XGBOOST_OBJECTIVES = {
    **dict.fromkeys(("binary:logistic", "reg:logistic"), ("logit", "sigmoid")),
    **dict.fromkeys(("count:poisson", "reg:gamma", "reg:tweedie"), ("log", "exp")),
    "multi:softprob": ("identity", "softprob"),
    "multi:softmax": ("identity", "softmax"),
    **dict.fromkeys(("reg:squarederror", "reg:linear", "reg:squaredlogerror", "reg:pseudohubererror",
                     "reg:absoluteerror", "reg:quantileerror", "binary:logitraw", "rank:pairwise", "rank:ndcg",
                     "rank:map"), ("identity", "identity")),
}


@dataclass(frozen=True, eq=False)
class XGBoostOutput:
    """The outputs of an XGBoost model (``estimator``: "booster", "classifier" or "regressor", a ranker's too) from
    the float32 margins the kernel sums as XGBoost's predictor does (``leaf_value``: the trees' own, ``start``: the
    objective's margin of the base_score, ``sum32``), through the objective's ``transform`` in float32
    (``_engine.xgboost_transform``) and the estimator's own rules (``XGBClassifier.predict_proba`` and
    ``predict``)."""

    estimator: str
    transform: str
    leaf_value: np.ndarray
    start: np.ndarray
    n_classes: int = 0
    sum32 = True

    def takes(self, method: str, kwargs: dict) -> bool:
        """Whether ``method(X, **kwargs)`` of the model is computed here."""
        if method == "predict_proba":
            return self.estimator == "classifier" and not kwargs
        return method == "predict" and set(kwargs) <= {"output_margin"}

    def __call__(self, raw: np.ndarray, method: str, kwargs: dict) -> np.ndarray:
        """The model's ``method(X, **kwargs)`` of rows whose margins are ``raw`` (n, outputs; float32 numbers)."""
        margin = raw.astype(np.float32)
        flat = margin[:, 0] if margin.shape[1] == 1 else margin  # Booster.predict's shape
        if kwargs.get("output_margin"):
            return flat
        if method == "predict_proba" and self.transform == "softmax":  # XGBClassifier's own: scipy's softmax
            from scipy.special import softmax as scipy_softmax

            return scipy_softmax(margin, axis=1)
        if self.transform == "identity":
            predicted = flat
        elif self.transform == "softmax":
            predicted = np.argmax(margin, axis=1).astype(np.float32)
        else:
            predicted = xgboost_transform(np.ascontiguousarray(margin), self.transform)
            predicted = predicted[:, 0] if predicted.shape[1] == 1 else predicted
        if self.estimator != "classifier":
            return predicted
        if method == "predict_proba":  # xgboost.sklearn._cls_predict_proba
            if predicted.ndim == 2 and (predicted.shape[1] == self.n_classes or self.n_classes == 2):
                return predicted
            return np.vstack((1.0 - predicted, predicted)).transpose()
        if predicted.ndim == 2 and self.n_classes != 2:  # XGBClassifier.predict
            return np.argmax(predicted, axis=1)
        if predicted.ndim == 2:
            labels = np.zeros(predicted.shape)
        elif self.transform == "softmax":
            return predicted.astype(np.int32)
        else:
            labels = np.repeat(0, predicted.shape[0])
        labels[predicted > 0.5] = 1
        return labels

    def scalar(self, method: str, kwargs: dict) -> tuple[bool, float] | None:
        """(False, 0.0) where the output is the margin itself, one number (LazyBatch.row_output); None otherwise."""
        if self.estimator == "classifier" or len(self.start) != 1:
            return None
        return (False, 0.0) if kwargs.get("output_margin") or self.transform == "identity" else None


def xgboost_output(model) -> XGBoostOutput | None:
    """The :class:`XGBoostOutput` of an ``xgboost.Booster`` or a fitted XGBClassifier, XGBRegressor or XGBRanker
    (their random-forest kinds too) whose ``predict`` and ``predict_proba`` are XGBoost's, ``gbtree``, of an objective
    of :data:`XGBOOST_OBJECTIVES` (a LazyPredictor serves the trees its ``predict`` uses: it takes no
    ``num_iteration`` but a LightGBM model's); None for any other."""
    import xgboost as xgb

    from lightgbm_cegb.io.xgboost_json import margins

    if isinstance(model, xgb.XGBModel):
        base = next((cls for cls in type(model).__mro__ if cls.__module__ == xgb.XGBModel.__module__), None)
        if not _own_methods(model, base, ("predict", "predict_proba")):
            return None
        estimator = "classifier" if isinstance(model, xgb.XGBClassifier) else "regressor"
    elif isinstance(model, xgb.Booster):
        estimator = "booster"
    else:
        return None
    parts = margins(model)
    if parts is None or parts.objective not in XGBOOST_OBJECTIVES:
        return None
    link, transform = XGBOOST_OBJECTIVES[parts.objective]
    start = np.array([xgboost_margin(np.float32(b), link) for b in parts.base_score], dtype=np.float64)
    if transform in ("sigmoid", "exp") and len(start) != 1:
        return None
    n_classes = int(getattr(model, "n_classes_", 0)) if estimator == "classifier" else 0
    return XGBoostOutput(estimator, transform, parts.leaf_value, start, n_classes)


@dataclass(frozen=True, eq=False)
class CatBoostOutput:
    """The outputs of a CatBoostClassifier or CatBoostRegressor from the sums of its trees' own leaf values
    (``leaf_value``, from 0.0 in tree order) as its evaluator computes them: ``scale * sum + bias``
    (RawFormulaVal); a binary classifier's Probability ``1 / (1 + exp(-raw))`` (the C library's exp; class 0
    ``1 - p``) and Class ``raw > 0`` (no probability threshold set); a multiclass Class the first largest raw value;
    each class index as the model's label. ``default``: the prediction type of ``predict`` without one."""

    classes: np.ndarray | None
    default: str
    scale: float
    bias: np.ndarray
    leaf_value: np.ndarray
    start = None
    sum32 = False

    def _type(self, method: str, kwargs: dict) -> str | None:
        """The prediction type ``method(X, **kwargs)`` asks for, where it is computed here; else None."""
        if method == "predict_proba":
            kind = "Probability" if not kwargs else None
        elif method == "predict" and set(kwargs) <= {"prediction_type"}:
            kind = kwargs.get("prediction_type") or self.default
        else:
            return None
        if kind == "RawFormulaVal" or (kind == "Class" and self.classes is not None):
            return kind
        return kind if kind == "Probability" and self.classes is not None and len(self.bias) == 1 else None

    def takes(self, method: str, kwargs: dict) -> bool:
        """Whether ``method(X, **kwargs)`` of the model is computed here."""
        return self._type(method, kwargs) is not None

    def __call__(self, raw: np.ndarray, method: str, kwargs: dict) -> np.ndarray:
        """The model's ``method(X, **kwargs)`` of rows whose sums of leaf values are ``raw`` (n, outputs)."""
        kind = self._type(method, kwargs)
        formula = self.scale * raw + self.bias
        if kind == "RawFormulaVal":
            return formula[:, 0] if formula.shape[1] == 1 else formula
        if kind == "Probability":
            p = sigmoid(np.ascontiguousarray(formula[:, 0]), 1.0)
            return np.vstack((1 - p, p)).transpose()
        if formula.shape[1] == 1:
            return self.classes[(formula[:, 0] > 0).astype(int)]
        return self.classes[np.argmax(formula, axis=1)].reshape(-1, 1)

    def scalar(self, method: str, kwargs: dict) -> tuple[bool, float] | None:
        """None: LazyBatch.row_output does not scale nor add the bias."""
        return None


def catboost_output(model) -> CatBoostOutput | None:
    """The :class:`CatBoostOutput` of a fitted CatBoostClassifier (Logloss or MultiClass; no binary probability
    threshold set) or CatBoostRegressor whose ``predict`` and ``predict_proba`` are CatBoost's; None for any other
    (a multiclass Probability is CatBoost's fast approximate exp: the model's predict computes it)."""
    import catboost

    from lightgbm_cegb.io.catboost_json import sums

    base = catboost.CatBoostClassifier if isinstance(model, catboost.CatBoostClassifier) else \
        catboost.CatBoostRegressor if isinstance(model, catboost.CatBoostRegressor) else None
    if base is None or not model.is_fitted():
        return None
    if not _own_methods(model, base, ("predict", "predict_proba", "_get_default_prediction_type")):
        return None
    classes, default = None, "Class"
    if base is catboost.CatBoostClassifier:
        loss = str(model.get_all_params().get("loss_function", "")).split(":")[0]
        if loss not in ("Logloss", "MultiClass") or "binclass_probability_threshold" in model.get_metadata().keys():
            return None
        classes = np.asarray(model.classes_)
    else:
        default = str(model._get_default_prediction_type())  # what the regressor's predict asks for
    parts = sums(model)
    return CatBoostOutput(classes, default, parts.scale, parts.bias, parts.leaf_value)


@dataclass(frozen=True, eq=False)
class SklearnTreeOutput:
    """The outputs of a fitted single-output DecisionTree* / ExtraTree* (``trees`` 1) or RandomForest* / ExtraTrees*
    model. A regressor's prediction is the kernel's raw score (a forest's averaged, as the Forest says); a
    classifier's is computed from the leaves the rows reached (``reads_leaves``): ``fractions[t]`` holds tree t's
    leaves' class fractions in the forest's leaf order."""

    model: object
    trees: int
    fractions: tuple | None = None
    leaf_value = start = None
    sum32 = False

    @property
    def reads_leaves(self) -> bool:
        return self.fractions is not None

    def takes(self, method: str, kwargs: dict) -> bool:
        """Whether ``method(X)`` of the model is computed here (no arguments)."""
        return method in (("predict", "predict_proba") if self.reads_leaves else ("predict",)) and not kwargs

    def __call__(self, computed: np.ndarray, method: str, kwargs: dict) -> np.ndarray:
        """The model's ``method`` of rows whose raw scores (a regressor) or leaves (a classifier, (n, trees)) are
        ``computed``."""
        if not self.reads_leaves:
            return computed[:, 0]
        proba = self.fractions[0][computed[:, 0]]
        if self.trees > 1:  # ForestClassifier.predict_proba: zeros, each tree's added in turn, then divided
            proba = np.zeros((len(computed), self.fractions[0].shape[1]))
            for t in range(self.trees):
                proba += self.fractions[t][computed[:, t]]
            proba /= self.trees
        if method == "predict_proba":
            return proba
        return self.model.classes_.take(np.argmax(proba, axis=1), axis=0)

    def scalar(self, method: str, kwargs: dict) -> tuple[bool, float] | None:
        """(False, 0.0) for a regressor: LazyBatch.row_output's raw score (averaged for a forest); None otherwise."""
        return None if self.reads_leaves else (False, 0.0)


def sklearn_tree_output(model, forest: Forest) -> SklearnTreeOutput | None:
    """The :class:`SklearnTreeOutput` of a fitted single-output decision tree, random forest or extra-trees model
    whose prediction methods are scikit-learn's own (a forest: ``n_jobs`` None or 1); None for any other."""
    from sklearn.ensemble import (
        ExtraTreesClassifier,
        ExtraTreesRegressor,
        RandomForestClassifier,
        RandomForestRegressor,
    )
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

    bases = (DecisionTreeClassifier, DecisionTreeRegressor, RandomForestClassifier, RandomForestRegressor,
             ExtraTreesClassifier, ExtraTreesRegressor)
    base = next((cls for cls in bases if isinstance(model, cls)), None)
    if base is None or getattr(model, "n_outputs_", 0) != 1:
        return None
    if not _own_methods(model, base, ("predict", "predict_proba")):
        return None
    single = base in (DecisionTreeClassifier, DecisionTreeRegressor)
    if not single and model.n_jobs not in (None, 1):
        return None
    estimators = [model] if single else list(model.estimators_)
    if not hasattr(model, "classes_"):
        return SklearnTreeOutput(model, len(estimators))
    fractions = []
    for estimator in estimators:
        tree = estimator.tree_
        fractions.append(tree.value[np.flatnonzero(tree.children_left == -1), 0, :model.n_classes_])
    return SklearnTreeOutput(model, len(estimators), tuple(fractions))
