"""CSTC, CSTCClassifier, CSCC and Cronus: the scikit-learn estimators over the shared optimiser.

Its length: four estimators (CSTC, CSTCClassifier, CSCC, Cronus) over one base; each is short, the shared base
and the boosting trick's features (``_Phi``) are the rest.
"""

from __future__ import annotations

import math

import lightgbm as lgb
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import validate_data

from lightgbm_cegb.base import COSTS, SEED, BudgetedEstimator
from lightgbm_cegb.core.cost_state import CostState
from lightgbm_cegb.core.costs import FeatureCosts
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.parallel import N_JOBS, one_blas_thread
from lightgbm_cegb.core.report import CostReport
from lightgbm_cegb.core.validation import CheckedElsewhere, Flag, Number, Satisfies, checked_weights
from lightgbm_cegb.io import saved
from lightgbm_cegb.io.models import booster_of, to_forest
from lightgbm_cegb.methods.cstc.optimiser import Problem, Structure, Units


class _Phi:
    """phi(x) and the cost units: the raw features (``forest`` None), or the outputs of a LightGBM model's
    trees (the boosting trick)."""

    def __init__(self, costs: FeatureCosts, num_features: int, forest=None) -> None:
        self.forest = forest
        lazy, _, _ = costs.arrays(num_features)
        group_of, group_lazy, _ = costs.group_arrays(num_features)
        groups = np.zeros((len(group_lazy), num_features), dtype=bool)
        groups[group_of[group_of >= 0], np.flatnonzero(group_of >= 0)] = True
        if forest is None:
            F = np.eye(num_features, dtype=bool)  # feature x column
            units = [(lazy, F), (group_lazy, groups)]
        else:
            F = np.zeros((num_features, forest.num_trees), dtype=bool)
            for t in range(forest.num_trees):
                F[forest.feature[forest.node_offset[t]:forest.node_offset[t + 1]], t] = True
            units = [(lazy, F), (group_lazy, (groups.astype(np.int64) @ F) > 0),
                     (np.full(forest.num_trees, costs.tree), np.eye(forest.num_trees, dtype=bool))]
        self.F = F
        self.units = Units(np.concatenate([u[0] for u in units]), np.vstack([u[1] for u in units]))

    @property
    def num_columns(self) -> int:
        return self.F.shape[1]

    def design(self, X) -> np.ndarray:
        """[1, phi(X)]."""
        phi = np.asarray(X, dtype=np.float64) if self.forest is None else \
            self.forest.leaf_values(X, self.forest.apply(X))
        return np.hstack([np.ones((phi.shape[0], 1)), phi])


class _Base(BudgetedEstimator, BaseEstimator):
    """What the estimators share: parameters, fit, routing, cost, files. A subclass gives ``_structure()``,
    ``_target`` (the labels as regression targets) and ``_phi_objective``."""

    _cronus = False
    _fitted_attribute = "coef_"
    _constraints = {
        "tradeoff": Number(0.0, math.inf), "rho": Number(0.0, math.inf), "feature_costs": COSTS,
        "phi": Satisfies(lambda phi: phi is None or isinstance(phi, (lgb.Booster, lgb.LGBMModel)) or
                         (isinstance(phi, int) and not isinstance(phi, bool) and phi >= 1),
                         "None (the raw features), a LightGBM Booster or fitted LightGBM model (the outputs of its "
                         "trees) or a number of trees >= 1 to train", bad=(0, "trees", True)),
        "n_iter": Number(0, math.inf, integer=True), "tol": Number(0.0, math.inf), "polish": Flag(),
        "random_state": SEED,  # the seed of phi's trees
        "n_jobs": N_JOBS,
    }

    def _set(self, tradeoff, rho, feature_costs, phi, n_iter, tol, polish, random_state, n_jobs) -> None:
        self.tradeoff = tradeoff
        self.rho = rho
        self.feature_costs = feature_costs
        self.phi = phi
        self.n_iter = n_iter
        self.tol = tol
        self.polish = polish
        self.random_state = random_state
        self.n_jobs = n_jobs

    # ------------------------------------------------------------------------------------- fitting

    def _validated(self, X, reset: bool = False) -> np.ndarray:
        return validate_data(self, X, reset=reset, **self._reading(), ensure_min_samples=2 if reset else 1)

    def _reading(self) -> dict:
        """How X is read: linear nodes on the raw features need finite dense X; tree outputs read NaN and sparse
        X as LightGBM does."""
        return {"dtype": np.float64} if self.phi is None else \
            {"dtype": np.float64, "ensure_all_finite": "allow-nan", "accept_sparse": ["csr", "csc"]}

    def _make_phi(self, X: np.ndarray, target: np.ndarray, weight: np.ndarray) -> _Phi:
        if self.phi is None:
            return _Phi(self.costs_, X.shape[1])
        if isinstance(self.phi, int):
            params = {"objective": self._phi_objective, "num_leaves": 8, "learning_rate": 0.1, "verbose": -1,
                      "seed": 0 if self.random_state is None else int(self.random_state), "deterministic": True,
                      "num_threads": 1}
            label = (target > 0).astype(np.float64) if self._phi_objective == "binary" else target
            train = lgb.Dataset(X, label, weight=weight, feature_name=self._lightgbm_feature_names())
            booster = lgb.train(params, train, self.phi)
        else:
            booster = booster_of(self.phi)
        if booster.num_feature() != X.shape[1]:
            raise CEGBError(f"phi: the LightGBM model reads {booster.num_feature()} features, X has {X.shape[1]}")
        self.phi_booster_ = booster
        return _Phi(self.costs_, X.shape[1], to_forest(booster))

    def _class_weights(self, target: np.ndarray) -> tuple[float, float]:
        """Row weights of targets <= 0 and > 0 (the estimator's class weights; 1 and 1 here)."""
        return 1.0, 1.0

    @one_blas_thread  # once for the whole fit: each limit set costs threadpoolctl a look-up of the libraries
    def _fit(self, X, target: np.ndarray, sample_weight, eval_set) -> _Base:
        self._check_params()
        structure = self._structure()
        self.costs_ = self._resolved_costs(X.shape[1])
        negative, positive = self._class_weights(target)
        weight = checked_weights(sample_weight, len(target)) * np.where(target > 0, positive, negative)
        self.phi_booster_ = None
        phi = self._make_phi(X, target, weight)
        problem = Problem(phi.design(X), target, weight / weight.mean(), phi.units, structure, self.tradeoff, self.rho,
                          cronus=self._cronus)
        problem.initialise()
        if eval_set is not None:
            if not (isinstance(eval_set, (tuple, list)) and len(eval_set) in (2, 3)):
                raise CEGBError("eval_set should be (X_valid, y_valid) or (X_valid, y_valid, sample_weight_valid), "
                                f"got {type(eval_set).__name__}")
            X_valid = self._validated(eval_set[0])
            y_valid = self._target(np.asarray(eval_set[1]), "eval_set's labels")
            if len(y_valid) != X_valid.shape[0]:
                raise CEGBError(f"eval_set: {X_valid.shape[0]} rows but {len(y_valid)} labels")
            valid_weight = checked_weights(eval_set[2] if len(eval_set) == 3 else None, len(y_valid),
                                           "eval_set's weights")
            valid = (phi.design(X_valid), y_valid, valid_weight * np.where(y_valid > 0, positive, negative))
            problem.prune(*valid)
        previous = problem.objective()
        best = (problem.error(*valid), 0, problem.beta.copy(), problem.theta.copy(), problem.frozen.copy()) \
            if eval_set is not None else None
        self.n_iter_ = 0
        for sweep in range(1, self.n_iter + 1):
            for k in problem.shape.classifiers:
                problem.update(k)
            self.n_iter_ = sweep
            if best is not None:
                error = problem.error(*valid)
                if error < best[0]:
                    best = (error, sweep, problem.beta.copy(), problem.theta.copy(), problem.frozen.copy())
            value = problem.objective()
            if previous - value <= self.tol * max(abs(previous), 1e-300):
                break
            previous = value
        self.best_iteration_ = self.n_iter_
        if best is not None:  # the sweep of the best validation error (the paper's early stopping)
            _, self.best_iteration_, problem.beta, problem.theta, problem.frozen = best
        self.objective_ = problem.objective()
        problem.fine_tune()
        if self.polish:
            problem.polish()
        self.coef_, self.threshold_, self.structure_ = problem.beta.copy(), problem.theta.copy(), problem.shape
        self._phi_ = phi
        return self

    # ---------------------------------------------------------------------------------- prediction

    def _fitted(self) -> tuple[_Phi, Problem]:
        """phi and a Problem holding the fitted model (for routing)."""
        self._check_fitted()
        model = Problem(np.zeros((0, self.coef_.shape[1])), np.zeros(0), np.zeros(0), self._phi_.units,
                        self.structure_, 0.0, 0.0)
        model.beta, model.theta = self.coef_, self.threshold_
        return self._phi_, model

    def apply(self, X) -> np.ndarray:
        """The terminal slot each row reaches by hard routing (a leaf, or a cascade's exit).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The rows (finite and dense for nodes on the raw features; with ``phi`` a LightGBM model, NaN and
            sparse rows are read as LightGBM does).

        Returns
        -------
        ndarray of shape (n_samples,)
            The terminal slot of each row (one of ``terminals_``).
        """
        phi, model = self._fitted()
        return model.hard_terminal(phi.design(self._validated(X)))

    def _raw(self, X) -> np.ndarray:
        phi, model = self._fitted()
        Z = phi.design(self._validated(X))
        return model.predictions(Z, model.hard_terminal(Z))

    @property
    def terminals_(self) -> list[int]:
        """The terminal slots (``apply``'s values), as a list of int."""
        self._check_fitted()
        return [int(t) for t in self.structure_.terminals]

    def path_columns(self, terminal: int) -> np.ndarray:
        """The phi columns (raw features, or trees of ``phi_booster_``) read by the nodes on the way to a terminal.

        Parameters
        ----------
        terminal : int
            The terminal slot (one of ``terminals_``).

        Returns
        -------
        ndarray of int
            The indices of the phi columns with a non-zero weight in a node on the path to ``terminal``.

        Raises
        ------
        CEGBError
            When ``terminal`` is not one of ``terminals_``.
        """
        if terminal not in self.terminals_:
            raise CEGBError(f"terminal should be one of {self.terminals_}, got {terminal!r}")
        return np.flatnonzero((self.coef_[self.structure_.path(int(terminal)), 1:] != 0).any(axis=0))

    def prediction_cost(self, X, *, n_jobs: int | None = None) -> CostReport:
        """Exact cost per row: each feature (and group) read on the row's path once.

        With the boosting trick, the features each used tree tests on the row's way through it and the trees'
        evaluation, as LightGBM evaluates them (the package's per-row cost state).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The rows (finite and dense for nodes on the raw features; with ``phi`` a LightGBM model, NaN and
            sparse rows are read as LightGBM does).
        n_jobs : int, optional
            Threads of the routing through phi's trees (None: the estimator's ``n_jobs``).

        Returns
        -------
        CostReport
            The cost of each row (acquisition and evaluation) and the features' usage.
        """
        X = self._validated(X)
        phi, model = self._fitted()
        slot = model.hard_terminal(phi.design(X))
        state = CostState(X.shape[0], self.costs_, self.n_features_in_)
        for t in np.unique(slot):
            rows = np.flatnonzero(slot == t)
            columns = self.path_columns(int(t))
            if phi.forest is None:
                for column in columns:
                    state.pay(int(column), rows)
                continue
            X_rows = X[rows]
            starts = columns[np.r_[True, np.diff(columns) > 1]] if columns.size else columns
            stops = columns[np.r_[np.diff(columns) > 1, True]] + 1 if columns.size else columns
            for t0, t1 in zip(starts, stops):  # runs of consecutive trees, one pass each
                state.add(phi.forest, X_rows, trees=(int(t0), int(t1)), rows=rows,
                          n_jobs=self.n_jobs if n_jobs is None else n_jobs)
        return state.report(self.costs_, self._names_in())

    # ------------------------------------------------------------------------------------- files

    def tradeoff_scale(self, X, y, **fit_params) -> float:
        """The variance of the targets the model fits (the labels; -1 / +1 for the classifiers).

        It is the scale of the squared loss that ``tradeoff`` weighs the expected cost against. Not a bisection
        on fits, as the other estimators' (a CSTC fit costs too much for one): models at ``tradeoff = scale``
        read few features, not always none.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The training rows (not read).
        y : array-like of shape (n_samples,)
            The labels.
        **fit_params : dict
            Accepted for the estimators' common signature; not used.

        Returns
        -------
        float
            The variance of the targets.
        """
        y = np.asarray(y).ravel()
        return float(np.var(self._scale_targets(y)))

    def _scale_targets(self, y: np.ndarray) -> np.ndarray:
        return y.astype(np.float64)

    def _saved_state(self) -> tuple[dict, dict]:
        shape = self.structure_
        state = {"phi_given": isinstance(self.phi, (lgb.Booster, lgb.LGBMModel)), "n_iter": self.n_iter_,
                 "best_iteration": self.best_iteration_, "objective": self.objective_, "kids": shape.kids,
                 "param_of": shape.param_of, "own_loss": shape.own_loss, "coef": self.coef_,
                 "threshold": self.threshold_, "classes": getattr(self, "classes_", None)}
        files = {} if self.phi_booster_ is None else {"phi": self.phi_booster_.model_to_string()}
        return state, files

    def _saved_params(self) -> dict:
        params = super()._saved_params()
        if not isinstance(params["phi"], (int, np.integer)):
            params["phi"] = None  # a LightGBM model: its trees are the artifact "phi"
        return params

    def _restore(self, state: dict, folder, manifest: dict) -> None:
        trees = bool(state["phi_given"]) or self.phi is not None  # phi: a given LightGBM model or trained trees
        if trees != ("phi" in manifest["files"]):
            raise saved.damaged(manifest, f"files should {'' if trees else 'not '}name the artifact 'phi' (a model on "
                                          f"{'the trees of phi' if trees else 'the raw features'}), got "
                                          f"{manifest['files']!r:.80}")
        kinds = tuple(saved.KIND_NAMES) if state["phi_given"] else (saved.objective_kind(self._phi_objective),)
        booster = saved.booster(folder, manifest, "phi", legacy="phi.txt", kinds=kinds) if trees else None
        if state["phi_given"]:
            self.phi = booster  # phi=int keeps training new trees
        self.phi_booster_ = booster
        self._phi_ = _Phi(self.costs_, self.n_features_in_, None if booster is None else to_forest(booster))
        self.structure_ = Structure(state["kids"], state["param_of"], state["own_loss"])  # checked: a tree
        slots, columns = len(self.structure_.param_of), 1 + self._phi_.num_columns
        self.coef_ = saved.array(state, "coef", (slots, columns))
        self.threshold_ = saved.array(state, "threshold", (slots,), finite=False)
        self.n_iter_ = saved.integer(state, "n_iter", 0)
        self.best_iteration_ = saved.integer(state, "best_iteration", 0)
        self.objective_ = state["objective"]
        if state["classes"] is not None:
            self.classes_ = saved.class_labels(state)

    @classmethod
    def _upgrade(cls, manifest: dict) -> dict:
        """lightgbm_cegb 0.1.0's manifest: ``lam`` and ``costs`` renamed, its fields as the state."""
        params = dict(manifest["params"])
        params["tradeoff"] = params.pop("lam")
        if isinstance(params.get("class_weight"), list):
            params["class_weight"] = {"__items__": params["class_weight"]}
        if manifest["costs_given"]:
            params["feature_costs"] = {"__FeatureCosts__": FeatureCosts.from_dict(manifest["costs"]).fields()}
        state = {k: manifest[k] for k in ("n_iter", "best_iteration", "objective", "kids", "param_of", "own_loss",
                                          "coef", "threshold", "classes")}
        state["phi_given"] = bool(manifest["phi"]) and manifest["params"]["phi"] is None
        return {**manifest, "params": params, "state": state, "files": {"phi": "phi.txt"} if manifest["phi"] else {}}


def _plain(value):
    """A numpy scalar as the Python value JSON writes."""
    return value.item() if isinstance(value, np.generic) else value


_SHARED = """    tradeoff : float, default=0.01
        Weight of the expected feature cost against the mean squared error (the labels' scale matters, and it
        also sets how sharply the soft routing splits: the same weights predict and route, so labels in the
        thousands saturate the sigmoids; scale them to units or tens).
    rho : float, default=0
        Weight of every node's l1 penalty.
    feature_costs : FeatureCosts or lazy costs per column, optional
        The cost model (default: every feature costs 1). Lazy costs and groups are paid per row; coupled and
        split costs are reported, not optimised.
    phi : None, LightGBM Booster or model, or int, default=None
        None: the nodes read the raw features (which should be on comparable scales: weights below 1e-4 are
        clamped to zero). A LightGBM model: the nodes read its trees' outputs (the boosting trick; a used tree's
        features and evaluation are paid; scikit-learn's ``clone``, as in cross-validation, unfits an
        ``LGBMModel`` but keeps a ``Booster``: give ``model.booster_`` there). An int: a LightGBM model of that
        many trees is trained first.
    n_iter : int, default=10
        Sweeps of block coordinate descent at most.
    tol : float, default=1e-6
        Stop when a sweep lowers the objective by less than ``tol`` (relative).
    polish : bool, default=True
        The local search on the unrelaxed objective after fine-tuning (module :mod:`lightgbm_cegb.methods.cstc`).
    random_state : int, optional
        Seed of the LightGBM model trained for ``phi=int`` (the rest is deterministic).
    n_jobs : int, optional
        Threads of the routing in ``prediction_cost`` (the LightGBM model of ``phi=int`` trains on one thread)."""

#: The fitted attributes every estimator of the family sets (``classes_``: the classifiers only).
_ATTRIBUTES = """    Attributes
    ----------
    coef_ : ndarray of shape (n_slots, 1 + n_phi_columns)
        Each slot's weights ``beta_k`` on ``[1, phi(x)]`` (column 0 the intercept); a cascade's exit predicts
        with its parent's.
    threshold_ : ndarray of shape (n_slots,)
        Each slot's threshold ``theta_k``.
    structure_ : Structure
        The shape after pruning (slots, children, which weights predict where).
    terminals_ : list of int
        The terminal slots (``apply``'s values).
    costs_ : FeatureCosts
        The cost model aligned to the columns of X.
    phi_booster_ : lightgbm.Booster or None
        The LightGBM model whose trees' outputs the nodes read (None: the raw features).
    n_iter_ : int
        The sweeps of block coordinate descent run.
    best_iteration_ : int
        The sweep kept: that of the lowest validation error with ``eval_set`` (0 for the initialisation), else
        the last.
    objective_ : float
        The relaxed objective of the sweep kept (before fine-tuning and the polish).
    classes_ : ndarray of shape (2,)
        The classes (classifiers only); ``classes_[1]`` is the positive one (+1).
    n_features_in_ : int
        The number of columns of X.
    feature_names_in_ : ndarray of shape (n_features,)
        The column names of a DataFrame X (only then).

    Notes
    -----
    ``fit(X, y, sample_weight=None, eval_set=None)``: with ``eval_set = (X_valid, y_valid[, weights])`` the
    initialised model is pruned bottom-up on it and the block coordinate descent keeps the sweep of the lowest
    validation error (``best_iteration_``, 0 for the initialisation; without ``eval_set`` the last), as the paper
    stops early."""


class _Tree(_Base):
    """The tree's parameter (``depth``)."""

    _constraints = {**_Base._constraints, "depth": Number(1, 16, integer=True)}

    def __init__(self, *, depth: int = 3, tradeoff: float = 0.01, rho: float = 0.0, feature_costs=None, phi=None,
                 n_iter: int = 10, tol: float = 1e-6, polish: bool = True, random_state: int | None = None,
                 n_jobs: int | None = None) -> None:
        self.depth = depth
        self._set(tradeoff, rho, feature_costs, phi, n_iter, tol, polish, random_state, n_jobs)

    def _structure(self) -> Structure:
        return Structure.tree(self.depth)


class CSTC(RegressorMixin, _Tree):
    __doc__ = f"""CSTC for regression (squared loss), also ranking by regression on relevance labels.

    Parameters
    ----------
    depth : int, default=3
        Levels of the balanced tree (2 ** depth - 1 nodes, 2 ** (depth - 1) leaves), before pruning.
{_SHARED}

{_ATTRIBUTES}
    """

    _phi_objective = "regression"

    def fit(self, X, y, *, sample_weight=None, eval_set=None) -> CSTC:
        """Fit the tree of linear nodes on (X, y) by the paper's block coordinate descent.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The training rows (finite and dense for nodes on the raw features; with ``phi`` a LightGBM model, NaN
            and sparse rows are read as LightGBM does).
        y : array-like of shape (n_samples,)
            The targets (finite numbers; relevance labels for ranking).
        sample_weight : array-like of shape (n_samples,), optional
            Row weights (finite, >= 0, not all zero; None: all 1), scaled to mean 1 in the objective.
        eval_set : tuple, optional
            ``(X_valid, y_valid)`` or ``(X_valid, y_valid, sample_weight_valid)``: the initialised model is pruned
            bottom-up on it and the block coordinate descent keeps the sweep of the lowest validation error
            (``best_iteration_``, 0 for the initialisation; without ``eval_set`` the last), as the paper stops
            early.

        Returns
        -------
        self : object
            The fitted estimator.

        Raises
        ------
        CEGBError
            When a parameter is out of range, y (or ``eval_set``'s targets) holds values that are not finite,
            ``eval_set`` is malformed, or ``phi``'s model reads another number of features than X has.
        """
        X, y = validate_data(self, X, y, y_numeric=True, reset=True, ensure_min_samples=2, **self._reading())
        return self._fit(X, self._target(y, "y"), sample_weight, eval_set)

    def _target(self, y: np.ndarray, name: str) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64).ravel()
        if not np.isfinite(y).all():
            raise CEGBError(f"{name} should be finite numbers")
        return y

    def predict(self, X) -> np.ndarray:
        """The prediction of the terminal each row reaches by hard routing.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The rows (finite and dense for nodes on the raw features; with ``phi`` a LightGBM model, NaN and
            sparse rows are read as LightGBM does).

        Returns
        -------
        ndarray of shape (n_samples,)
            The predicted values.
        """
        return self._raw(X)


class _Binary:
    """Binary classification by the squared loss on labels coded -1 / +1 (the paper's nodes are regressors):
    ``decision_function`` is the terminal's prediction, positive for ``classes_[1]``."""

    _phi_objective = "binary"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def fit(self, X, y, *, sample_weight=None, eval_set=None):
        """Fit the model on (X, y), the labels coded -1 (``classes_[0]``) and +1 (``classes_[1]``).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The training rows (finite and dense for nodes on the raw features; with ``phi`` a LightGBM model, NaN
            and sparse rows are read as LightGBM does).
        y : array-like of shape (n_samples,)
            The labels, of exactly two classes.
        sample_weight : array-like of shape (n_samples,), optional
            Row weights (finite, >= 0, not all zero; None: all 1), scaled to mean 1 in the objective.
        eval_set : tuple, optional
            ``(X_valid, y_valid)`` or ``(X_valid, y_valid, sample_weight_valid)``: the initialised model is pruned
            bottom-up on it and the block coordinate descent keeps the sweep of the lowest validation error
            (``best_iteration_``, 0 for the initialisation; without ``eval_set`` the last), as the paper stops
            early.

        Returns
        -------
        self : object
            The fitted estimator.

        Raises
        ------
        CEGBError
            When a parameter is out of range, y does not hold exactly two classes, ``eval_set``'s labels are not
            among them, ``eval_set`` is malformed, ``class_weight`` is invalid (CSCC, Cronus), or ``phi``'s model
            reads another number of features than X has.
        """
        X, y = validate_data(self, X, y, reset=True, ensure_min_samples=2, **self._reading())
        kind = type_of_target(y, input_name="y", raise_unknown=True)
        if kind != "binary":
            raise CEGBError(f"Only binary classification is supported. The type of the target is {kind} "
                            f"({len(np.unique(y))} classes)")
        self.classes_ = np.unique(y)
        if len(self.classes_) != 2:
            raise CEGBError(f"y: {type(self).__name__} needs 2 classes, got 1 class ({self.classes_[0]!r})")
        return self._fit(X, self._target(y, "y"), sample_weight, eval_set)

    def _scale_targets(self, y: np.ndarray) -> np.ndarray:
        return np.where(y == np.unique(y)[-1], 1.0, -1.0)

    def _target(self, y: np.ndarray, name: str) -> np.ndarray:
        y = np.asarray(y).ravel()
        unknown = ~np.isin(y, self.classes_)
        if unknown.any():
            raise CEGBError(f"{name}: labels {np.unique(y[unknown])[:10].tolist()} are not among the training "
                            f"classes {self.classes_.tolist()}")
        return np.where(y == self.classes_[1], 1.0, -1.0)

    def decision_function(self, X) -> np.ndarray:
        """The prediction of the terminal each row reaches by hard routing: positive for ``classes_[1]``.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The rows (finite and dense for nodes on the raw features; with ``phi`` a LightGBM model, NaN and
            sparse rows are read as LightGBM does).

        Returns
        -------
        ndarray of shape (n_samples,)
            The score of each row (the squared loss fits -1 / +1).
        """
        return self._raw(X)

    def predict(self, X) -> np.ndarray:
        """``classes_[1]`` for the rows whose ``decision_function`` is positive, else ``classes_[0]``.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The rows (finite and dense for nodes on the raw features; with ``phi`` a LightGBM model, NaN and
            sparse rows are read as LightGBM does).

        Returns
        -------
        ndarray of shape (n_samples,)
            One of ``classes_`` per row.
        """
        positive = self._raw(X) > 0
        return self.classes_[positive.astype(np.int64)]


class CSTCClassifier(_Binary, ClassifierMixin, _Tree):
    __doc__ = f"""CSTC for binary classification (squared loss on -1 / +1).

    ``phi=int`` trains a binary LightGBM model.

    Parameters
    ----------
    depth : int, default=3
        Levels of the balanced tree (2 ** depth - 1 nodes, 2 ** (depth - 1) leaves), before pruning.
{_SHARED}

{_ATTRIBUTES}
    """


class CSCC(_Binary, ClassifierMixin, _Base):
    __doc__ = f"""CSCC, the cost-sensitive cascade of classifiers (Xu et al. 2014, section 4, eq. 19).

    A chain of linear nodes, node k exiting the rows with ``phi.beta_k <= theta_k`` (their prediction is node k's) and
    passing the others on; the last node predicts for every row that reaches it. Each node's squared loss is
    weighted by the probability of exiting there, the cost term sums over the exits, each weighted by its
    probability, of the mixed norm of the weights of the nodes before it; ``class_weight`` re-weights the
    classes for skewed data. Binary classification (squared loss on -1 / +1).

    Parameters
    ----------
    n_stages : int, default=5
        Classifier nodes in the chain, before pruning (pruning on ``eval_set`` drops the last stages that do not
        help).
    class_weight : None, "balanced" or {{label: weight}}, default=None
        Row weights per class (multiplying ``sample_weight``; "balanced": n / (2 n_class) on the training rows).
{_SHARED}

{_ATTRIBUTES}
    """

    _constraints = {**_Base._constraints, "n_stages": Number(1, 64, integer=True),
                              "class_weight": CheckedElsewhere("fit, against the classes (_class_weights)")}

    def __init__(self, *, n_stages: int = 5, class_weight=None, tradeoff: float = 0.01, rho: float = 0.0,
                 feature_costs=None, phi=None, n_iter: int = 10, tol: float = 1e-6, polish: bool = True,
                 random_state: int | None = None, n_jobs: int | None = None) -> None:
        self.n_stages = n_stages
        self.class_weight = class_weight
        self._set(tradeoff, rho, feature_costs, phi, n_iter, tol, polish, random_state, n_jobs)

    def _structure(self) -> Structure:
        return Structure.cascade(self.n_stages)

    def _class_weights(self, target: np.ndarray) -> tuple[float, float]:
        """(weight of classes_[0], of classes_[1]) from ``class_weight`` ("balanced": n / (2 n_class) on the
        training rows)."""
        if self.class_weight is None:
            return 1.0, 1.0
        if isinstance(self.class_weight, str) and self.class_weight == "balanced":
            share = float(np.mean(target > 0))
            return 0.5 / (1 - share), 0.5 / share
        if isinstance(self.class_weight, dict) and set(self.class_weight) == set(self.classes_.tolist()):
            weights = [self.class_weight[c] for c in self.classes_.tolist()]
            if all(isinstance(w, (int, float)) and not isinstance(w, bool) and w > 0 and math.isfinite(w)
                   for w in weights):
                return float(weights[0]), float(weights[1])
        raise CEGBError(f"class_weight should be None, 'balanced' or {{label: weight > 0}} for the classes "
                        f"{self.classes_.tolist()}, got {self.class_weight!r}")


class Cronus(CSCC):
    __doc__ = f"""Cronus (Chen et al., AISTATS 2012), the cascade CSCC supersedes.

    CSCC's loss, but the cost term is one mixed norm over every node's weights, each node's scaled by the
    probability of reaching it (Xu et al. 2014, section 4.1).

    Parameters
    ----------
    n_stages : int, default=5
        As :class:`CSCC`'s: classifier nodes in the chain, before pruning.
    class_weight : None, "balanced" or {{label: weight}}, default=None
        As :class:`CSCC`'s: row weights per class (multiplying ``sample_weight``).
{_SHARED}

{_ATTRIBUTES}
    """

    _cronus = True
