"""What a choice within a budget holds: :class:`Selection`, the point ``select`` and ``fit_within_budget`` chose,
its figures, its predictions whatever its method, its exact costs, and its saved form (``estimator_class`` finds the
package's estimator a saved choice names)."""

from __future__ import annotations

import numbers
import os
from dataclasses import dataclass, field

import lightgbm as lgb
import numpy as np
import pandas as pd

import lightgbm_cegb.lgbm.cegb_estimators  # noqa: F401 (defines CEGB's estimators, which estimator_class finds)
import lightgbm_cegb.methods  # noqa: F401 (defines the methods' estimators)
from lightgbm_cegb.accounting import prediction_cost
from lightgbm_cegb.base import BudgetedEstimator, nested_model, nested_parts
from lightgbm_cegb.core.costs import FeatureCosts
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.report import CostReport
from lightgbm_cegb.io import saved
from lightgbm_cegb.io.models import booster_of
from lightgbm_cegb.methods.early_exit import KINDS, EarlyExit
from lightgbm_cegb.selection.registry import Candidate

#: the kinds of LightGBM model (io.saved.objective_kind) a saved Selection's model may be, by its task (None: a
#: Selection saved without one); a ranking's plain models may have a pointwise objective
TASK_OBJECTIVES = {"binary": ("classification", "probability"), "multiclass": ("classification",),
                   "regression": ("regression", "probability"),
                   "ranking": ("ranking", "regression", "classification", "probability"), None: tuple(saved.KIND_NAMES)}


def _unfit_for(task: str | None, estimator, classes: np.ndarray | None) -> str:
    """Why the package's ``estimator`` cannot be the chosen model of a Selection of ``task`` and ``classes`` ("": it
    can): a binary or multiclass task needs a classifier (a regressor's predict_proba would be its values); a
    classifier is no regression, has as many classes as the Selection names, and ranks by its ``decision_function``
    (the CSTC family's cascades, Cronus and CSCC: its class labels are no ranking)."""
    name = type(estimator).__name__
    if not hasattr(estimator, "classes_"):
        if task in ("binary", "multiclass"):
            return f"task {task!r} needs a classifier, got the chosen model a {name}, which has no classes"
        return ""
    if task == "regression" or (classes is not None and len(estimator.classes_) != len(classes)):
        return (f"the chosen model is a classifier of {len(estimator.classes_)} classes: task should be binary, "
                f"multiclass, ranking or null and classes its labels, got {task!r:.20} and "
                f"{None if classes is None else classes.tolist()!r:.60}")
    if task == "ranking" and not hasattr(estimator, "decision_function"):
        return (f"task 'ranking' ranks by a classifier's decision_function (Cronus's, CSCC's), got the chosen model a "
                f"{name}, which has none")
    return ""


#: EarlyExit's ``task`` of its ``kind``
TASK_OF_KIND = {kind: task for task, kind in KINDS.items()}
#: what a saved Selection keeps of a chosen EarlyExit beside its Booster and its own costs (``costs_``)
EXIT_SETTINGS = ("threshold", "top_k", "every", "task", "num_iteration")


def _exits_unfit_for(task: str | None, model: EarlyExit) -> str:
    """Why the EarlyExit ``model`` cannot be the chosen model of a Selection of ``task`` ("": it can): a ranker's
    exits rank; a classifier's classify, and rank by their probability when they have one output (a binary objective
    on binarised relevance, as a ranking sweep runs Early Exit then)."""
    fits = ("ranking", None) if model.kind == "rank" else ("binary", "multiclass", None) + \
        (("ranking",) if model.forest.trees_per_iteration == 1 else ())
    if task in fits:
        return ""
    return (f"the chosen model is an EarlyExit {TASK_OF_KIND[model.kind]} model: task should be one of {list(fits)}, "
            f"got {task!r:.20}")


def _saved_exits(booster, state, task: str | None) -> EarlyExit:
    """The EarlyExit a saved Selection's ``state`` describes (its model's EXIT_SETTINGS and its own costs) on its
    ``booster``, checked."""
    described = state["model"]
    missing = [key for key in EXIT_SETTINGS + ("costs",) if key not in described]
    if missing:
        raise saved.damaged(state, f"the saved early exits lack {missing}")
    try:
        model = EarlyExit(booster, feature_costs=FeatureCosts.from_dict(described["costs"]),
                          **{key: described[key] for key in EXIT_SETTINGS})
    except CEGBError as error:
        raise saved.damaged(state, f"the saved early exits: {error}") from None
    unfit = _exits_unfit_for(task, model)
    if unfit:
        raise saved.damaged(state, unfit)
    return model


@dataclass
class Selection:
    """The point :func:`select` chose, its validation figures and, with test rows, its test figures.

    Parameters
    ----------
    method : str
        The method of the point.
    params : dict
        The point's parameters.
    model : object
        The fitted model of that point alone, e.g. a prefix of a boosted model cut to its trees (Booster, pruned
        Booster, EarlyExit, BudgetRFClassifier, ...).
    candidate : Candidate or None
        The point as the sweep made it (None for a Selection read by :meth:`load`).
    valid_quality : float
        Its quality on the validation rows.
    valid_cost : float
        Its mean prediction cost per validation row.
    test_quality : float or None, default=None
        Its quality on the test rows (None without them).
    test_cost : float or None, default=None
        Its mean prediction cost per test row (None without them).
    frontier : pandas.DataFrame or None, default=None
        The sweep it was chosen from (:func:`fit_within_budget`).
    within_budget : bool, default=True
        False when no point was within the budget and this is the cheapest one.
    costs : FeatureCosts or None, default=None
        The sweep's costs, aligned to its columns: what the point was measured with (a plain LightGBM model does
        not hold them; :meth:`prediction_cost` uses them).
    decision_threshold : float or None, default=None
        With a threshold metric (``f1``, ``balanced_accuracy``): the decision threshold the point chose on the
        validation rows, with which the test figures were measured; label new rows positive where the model's
        score is above it (``model.predict(X) > decision_threshold`` for a Booster). :meth:`predict` does.
    task : str or None, default=None
        The sweep's task ("binary", "multiclass", "regression", "ranking"; None in a Selection saved before it was
        kept).
    classes : ndarray or None, default=None
        Classification: the sweep's class labels (sorted; the model's outputs are in their order).

    Notes
    -----
    ``model`` predicts as its own library does (a Booster's ``predict`` gives probabilities, an estimator's
    labels); :meth:`predict` and :meth:`predict_proba` mean the same for every method: labels (values, scores) as
    the sweep measured them, and class probabilities.
    """

    method: str
    params: dict
    model: object  # the fitted model (Booster, pruned Booster, EarlyExit, BudgetRFClassifier, ...)
    candidate: Candidate | None
    valid_quality: float
    valid_cost: float
    test_quality: float | None = None
    test_cost: float | None = None
    frontier: pd.DataFrame | None = field(default=None, repr=False)
    within_budget: bool = True
    costs: FeatureCosts | None = field(default=None, repr=False)
    decision_threshold: float | None = None
    task: str | None = None
    classes: np.ndarray | None = field(default=None, repr=False)

    def _by_query(self, X, group) -> dict:
        """The ``group`` argument for the chosen model when it cuts per query (the staged acquisition ranker; an
        EarlyExit ranker, to which None is X as one query, as to the staged ranker); nothing for a model that scores
        each row alone."""
        model = self.model if self.candidate is None else self.candidate.model
        if isinstance(model, EarlyExit) and model.kind == "rank":
            return {"group": [np.shape(X)[0]] if group is None else group}
        takes = "group" in getattr(model, "_policy_methods", {}).get("predict", ())
        return {"group": group} if takes and group is not None else {}

    def _scores(self, X, group=None) -> np.ndarray:
        """What the sweep's metric read of the point on X: class probabilities (binary: the positive class's),
        values or scores."""
        if self.candidate is not None:
            return np.asarray(self.candidate.predict(X, **self._by_query(X, group)))
        if self.task in ("binary", "multiclass") and booster_of(self.model) is None and \
                hasattr(self.model, "predict_proba"):
            proba = self.model.predict_proba(X)
            return proba[:, 1] if self.task == "binary" else proba
        if self.task == "ranking" and hasattr(self.model, "classes_"):  # a cascade's score, as the sweep read it
            return np.asarray(self.model.decision_function(X))
        return np.asarray(self.model.predict(X, **self._by_query(X, group)))

    def _task(self, what: str) -> str:
        if self.task is None:
            raise CEGBError(f"Selection.{what}: this Selection was saved before its task was kept; predict with "
                            "its model (.model), as its library does")
        return self.task

    def predict(self, X, *, group=None) -> np.ndarray:
        """The chosen point's prediction, whatever its method: class labels (at :attr:`decision_threshold` when a
        threshold metric chose one, else the most probable class), regression values or ranking scores.

        Parameters
        ----------
        X : array-like of shape (n_rows, n_features)
            The rows (as the sweep's).
        group : array-like of int or None, default=None
            The sizes of X's consecutive queries, for a model that cuts per query (the staged acquisition
            ranker; None: X is one query); a model that scores each row alone does not read it.

        Returns
        -------
        ndarray of shape (n_rows,)
            The labels (the sweep's classes), values or scores.
        """
        scores = self._scores(X, group)
        if self._task("predict") not in ("binary", "multiclass"):
            return scores
        threshold = 0.5 if self.decision_threshold is None else self.decision_threshold
        codes = scores.argmax(axis=1) if scores.ndim == 2 else (scores > threshold).astype(np.int64)
        return codes if self.classes is None else self.classes[codes]

    def predict_proba(self, X) -> np.ndarray:
        """The chosen point's class probabilities (as the sweep measured them), whatever its method.

        Parameters
        ----------
        X : array-like of shape (n_rows, n_features)
            The rows (as the sweep's).

        Returns
        -------
        ndarray of shape (n_rows, n_classes)
            A column per class of :attr:`classes`.

        Raises
        ------
        CEGBError
            For a regression or ranking point.
        """
        if self._task("predict_proba") not in ("binary", "multiclass"):
            raise CEGBError(f"Selection.predict_proba: the chosen point is a {self.task} model; use predict")
        scores = self._scores(X)
        return np.column_stack([1.0 - scores, scores]) if scores.ndim == 1 else scores

    def prediction_cost(self, X, *, group=None) -> CostReport:
        """The exact per-row cost of the chosen point on rows X, as the sweep measured it (the point's own accounting
        with the sweep's costs, whatever its model holds).

        Parameters
        ----------
        X : array-like of shape (n_rows, n_features)
            The rows.
        group : array-like of int or None, default=None
            As for :meth:`predict`.

        Returns
        -------
        CostReport
            The point's per-row costs.
        """
        if self.candidate is None:  # a loaded Selection: the model's own accounting with the sweep's costs
            own = getattr(self.model, "prediction_cost", None)
            return own(X, **self._by_query(X, group)) if callable(own) else prediction_cost(self.model, X, self.costs)
        return self.candidate.cost(X, **self._by_query(X, group))

    # ------------------------------------------------------------------------------------- what serving reads

    def __lightgbm_cegb_model__(self):
        """The chosen model (``LazyPredictor``, ``prediction_cost`` and ``to_forest`` take a Selection as it)."""
        return self.model

    @property
    def costs_(self) -> FeatureCosts | None:
        """The sweep's costs (:attr:`costs`): what ``LazyPredictor`` and ``prediction_cost`` use for this point
        when given no costs."""
        return self.costs

    # ------------------------------------------------------------------------------------- save / load

    @property
    def n_features_in_(self) -> int:
        """The chosen model's number of features."""
        booster = booster_of(self.model)
        return int(booster.num_feature() if booster is not None else self.model.n_features_in_)

    @property
    def feature_names_in_(self):
        """The chosen estimator's feature names (None for a Booster: its own names are in its model text)."""
        return None if booster_of(self.model) is not None else getattr(self.model, "feature_names_in_", None)

    def save(self, path: str | os.PathLike) -> None:
        """Save the choice into the folder ``path`` in the package's saved-model format: the chosen model, the
        sweep's costs, the method, its parameters and the validation (and test) figures. The frontier and the
        sweep's candidate are not saved. Atomic, as every save of the format.

        The model is a LightGBM Booster (saved as its model text) or one of the package's estimators (saved with
        its own state, in the same folder). Other models (CatBoost's, scikit-learn's) are refused: save them with
        their library.

        Parameters
        ----------
        path : str or os.PathLike
            The folder (created with its parents if needed).

        Raises
        ------
        CEGBError
            When the model is of another kind, or ``path`` is a file.
        """
        figures = {"valid_quality": self.valid_quality, "valid_cost": self.valid_cost,
                   "test_quality": self.test_quality, "test_cost": self.test_cost,
                   "decision_threshold": self.decision_threshold, "task": self.task,
                   "classes": None if self.classes is None else self.classes.tolist()}
        booster = booster_of(self.model)
        if isinstance(self.model, lgb.Booster):
            state, files = {**figures, "model": {"kind": "booster"}}, {"model": booster.model_to_string()}
        elif isinstance(self.model, EarlyExit) and self.model.booster is not None:
            unfit = _exits_unfit_for(self.task, self.model)
            if unfit:
                raise CEGBError(f"Selection.save: {unfit}")
            exits = {"threshold": self.model.threshold, "top_k": self.model.top_k, "every": self.model.every,
                     "task": TASK_OF_KIND[self.model.kind], "num_iteration": self.model.iterations,
                     "costs": self.model.costs_.to_dict(self.model.n_features_in_)}
            state = {**figures, "model": {"kind": "early_exit", **exits}}
            files = {"model": self.model.booster.model_to_string()}
        elif isinstance(self.model, BudgetedEstimator):
            unfit = _unfit_for(self.task, self.model, self.classes)
            if unfit:
                raise CEGBError(f"Selection.save: {unfit}")
            described, files = nested_parts(self.model, "model.")
            state = {**figures, "model": described}
        else:
            raise CEGBError(f"Selection.save: the chosen model is a {type(self.model).__name__}, which the package's "
                            "format does not hold (a LightGBM Booster, EarlyExit of one, or one of the package's "
                            "estimators): save it "
                            "with its own library, and the costs with FeatureCosts.to_dict")
        saved.save(path, self, params={"method": self.method, "params": self.params,
                                       "within_budget": self.within_budget}, state=state, files=files)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Selection:
        """The Selection saved in ``path`` by :meth:`save`: the model, costs, method, parameters and figures
        (``candidate`` and ``frontier`` are None; :meth:`prediction_cost` uses the model's own accounting).

        Parameters
        ----------
        path : str or os.PathLike
            The folder.

        Returns
        -------
        Selection
            The saved choice.

        Raises
        ------
        CEGBError
            When the folder holds no saved Selection, or what it holds is damaged (named).
        """
        manifest, folder = saved.read(path, "Selection")
        params, state = saved.decode(manifest["params"]), saved.decode(manifest["state"])
        for key in ("method", "params", "within_budget", "valid_quality", "valid_cost", "test_quality",
                    "test_cost", "model"):
            if key not in params and key not in state:
                raise saved.damaged(manifest, f"the saved Selection lacks {key!r}")
        if not isinstance(params["method"], str) or not isinstance(params["params"], dict) \
                or not isinstance(params["within_budget"], bool) or not isinstance(state["model"], dict):
            raise saved.damaged(manifest, "method, params, within_budget or model is not of its type")
        task = state.get("task")
        if not isinstance(task, (str, type(None))) or task not in TASK_OBJECTIVES:
            raise saved.damaged(state, f"task should be binary, multiclass, regression, ranking or null, got "
                                       f"{task!r:.40}")
        classes = None if state.get("classes") is None else saved.class_labels(state)
        if classes is not None and task not in (("binary", "multiclass") if len(classes) == 2 else ("multiclass",)):
            raise saved.damaged(state, f"classes: {len(classes)} labels are not a {task!r:.20} task's")
        described = state["model"]
        costs = None if manifest["costs"] is None else FeatureCosts.from_dict(manifest["costs"])
        if described.get("kind") in ("booster", "early_exit"):
            model = saved.booster(folder, manifest, "model", kinds=TASK_OBJECTIVES[task],
                                  outputs=None if classes is None else 1 if task == "binary" else len(classes))
            if described["kind"] == "early_exit":
                model = _saved_exits(model, state, task)
        elif described.get("kind") == "estimator":
            estimator = estimator_class(described.get("estimator"))
            if estimator is None:
                raise saved.damaged(manifest, f"the chosen model is a {described.get('estimator')!r:.40}, not an "
                                              "estimator of lightgbm_cegb")
            model = nested_model(estimator, described, manifest, folder, "model.")
        else:
            raise saved.damaged(manifest, f"model kind should be 'booster', 'early_exit' or 'estimator', got "
                                          f"{described.get('kind')!r:.40}")
        saved.every_file_used(manifest)
        unfit = described["kind"] == "estimator" and _unfit_for(task, model, classes)
        if unfit:
            raise saved.damaged(state, unfit)
        figures = {}
        for key in ("valid_quality", "valid_cost", "test_quality", "test_cost", "decision_threshold"):
            value = state.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real)):
                raise saved.damaged(state, f"{key} should be a number or null, got {value!r:.40}")
            figures[key] = None if value is None else float(value)
        return cls(params["method"], dict(params["params"]), model, None, within_budget=params["within_budget"],
                   costs=costs, task=task, classes=classes, **figures)


def estimator_class(name):
    """The package's estimator class named ``name`` (as a saved folder's manifest names it), or None.

    Parameters
    ----------
    name : str
        The class's name.

    Returns
    -------
    type or None
        The class (one with ``load``), or None when no estimator the package defines has that name (its base
        classes, which hold no model of their own, are not estimators: their names begin with "_" or they are
        marked ``_abstract``).
    """
    classes, seen = [BudgetedEstimator], []
    while classes:
        cls = classes.pop()
        seen.append(cls)
        classes.extend(cls.__subclasses__())
    return next((cls for cls in seen if cls.__name__ == name and not name.startswith("_")
                 and not cls.__dict__.get("_abstract") and cls.__module__.startswith("lightgbm_cegb.")), None)
