"""BudgetRF: the feature-budgeted random forest of Nan, Wang and Saligrama ("Feature-Budgeted Random Forest",
ICML 2015).

Trees are grown by GreedyTree (``cython_ext/_budgetrf.pyx``, without the GIL, several at a time) on bootstrap
samples and added while the forest's mean feature cost per row on validation data, computed exactly with
the package's per-row cost state, stays within the budget. The fitted forest is a ``Forest`` (``forest_``),
so that everything else in the package reads it: ``prediction_cost``, ``LazyPredictor``.

Missing values (NaN) are read as 0.0, in fit as in prediction: the rule of LightGBM's missing type None, which
the fitted forest's splits carry (so LightGBM, ``to_lightgbm``'s text and every router of the package read a
NaN the same way). A row whose path passes a split on a feature it misses pays for that feature all the same:
it acquired the feature to find it missing.
"""

from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from lightgbm_cegb._budgetrf import grow_tree
from lightgbm_cegb.accounting import prediction_cost
from lightgbm_cegb.base import COSTS, RANDOM_STATE, BudgetedEstimator
from lightgbm_cegb.core.cost_state import CostState
from lightgbm_cegb.core.costs import lightgbm_feature_name
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.forest import Forest
from lightgbm_cegb.core.parallel import N_JOBS, resolve_n_jobs
from lightgbm_cegb.core.report import CostReport
from lightgbm_cegb.core.validation import Flag, NoneOr, Number, check_number
from lightgbm_cegb.io import saved
from lightgbm_cegb.io.lightgbm_text import write_text


class BudgetRFClassifier(BudgetedEstimator, ClassifierMixin, BaseEstimator):
    """Feature-budgeted random forest (BudgetRF).

    Nan, Wang and Saligrama, "Feature-Budgeted Random Forest", ICML 2015. Trees are grown by GreedyTree on
    bootstrap samples and added while the mean feature cost per row on validation data stays within the
    budget.

    Parameters
    ----------
    feature_costs : FeatureCosts, lazy costs per column, mapping by feature name or None, default=None
        Acquisition cost of each feature (paid once per row), and of feature groups (``group_lazy``: paid once
        per row, with the first member; a split's cost is its feature's plus its group's). None: every
        feature costs 1.
    budget : float or None, default=None
        Trees are added while the mean cost per row of ``X_valid`` (given to ``fit``; split costs included
        when the costs have some) stays <= budget: growth stops at the first tree that would exceed it.
        None: ``n_estimators`` trees.
    n_estimators : int, default=100
        Most trees grown.
    tradeoff : float, default=0.0
        The paper's alpha, the threshold of the threshold-Pairs impurity: a node where no two classes both have
        more than ``tradeoff`` rows (roughly) is a leaf. Larger: shallower, cheaper trees.
    max_depth : int or None, default=None
        Depth limit of the trees (None: grown until the impurity is 0).
    min_samples_split : int, default=2
        Nodes with fewer rows are leaves.
    free_path : bool, default=False
        A feature tested above a node costs nothing there (its value is known), nor does a group a member of
        which is tested above. False is the paper's Algorithm 1 as written: every split weighs its feature's
        full cost. With True, a feature a branch has paid for has risk 0 and wins every later split that lowers
        the impurity of both outcomes, so on continuous data a tree keeps cutting its first feature: on an XOR
        of two unit-cost features (tests), accuracy 0.554 with True against 0.998 with False.
    random_state : int, RandomState or None, default=None
        Bootstrap samples and random stumps; the same value gives the same trees whatever ``n_jobs``.
    n_jobs : int or None, default=None
        Trees grown at once (threads; None: the CPUs this process may use), and threads routing rows in
        prediction.

    Attributes
    ----------
    forest_ : Forest
        The trees (split nodes test ``x <= threshold`` on float32 values, as scikit-learn's trees).
    leaf_counts_ : ndarray of shape (n_leaves, n_classes)
        Training rows of each class in each leaf (leaves of all trees, in the forest's order).
    valid_cost_ : float or None
        Mean cost per row of ``X_valid`` of the fitted forest (with a budget; None without, and for a
        :meth:`prefix`).
    classes_ : ndarray of shape (n_classes,)
        The class labels, sorted.
    n_estimators_ : int
        Number of trees grown (fewer than ``n_estimators`` when the budget stopped the growth).
    costs_ : FeatureCosts
        The costs aligned to the columns (every feature 1 without ``feature_costs``).
    n_features_in_ : int
        Number of columns of fit's X.
    feature_names_in_ : ndarray of shape (n_features,)
        The columns' names, when fit's X is a DataFrame.
    """

    _fitted_attribute = "forest_"
    _probe = {"n_estimators": 1, "budget": None}  # tradeoff_scale: the first tree
    _constraints = {
        "feature_costs": COSTS, "budget": NoneOr(Number(0.0, low_open=True)), "n_estimators": Number(1, integer=True),
        "tradeoff": Number(0.0), "max_depth": NoneOr(Number(1, integer=True)),
        "min_samples_split": Number(2, integer=True), "free_path": Flag(), "random_state": RANDOM_STATE,
        "n_jobs": N_JOBS,
    }

    def __init__(self, *, feature_costs=None, budget: float | None = None, n_estimators: int = 100,
                 tradeoff: float = 0.0, max_depth: int | None = None, min_samples_split: int = 2,
                 free_path: bool = False, random_state=None, n_jobs: int | None = None) -> None:
        self.feature_costs = feature_costs
        self.budget = budget
        self.n_estimators = n_estimators
        self.tradeoff = tradeoff
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.free_path = free_path
        self.random_state = random_state
        self.n_jobs = n_jobs

    def fit(self, X, y, *, X_valid=None) -> BudgetRFClassifier:
        """Grow the forest.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The training rows (read as float32; a NaN is read as 0.0, see the module doc).
        y : array-like of shape (n_samples,)
            The class labels.
        X_valid : array-like of shape (n_valid_samples, n_features) or None, default=None
            The rows whose mean cost the budget bounds (required with a budget; unused without).

        Returns
        -------
        self : object
            The fitted estimator.

        Raises
        ------
        CEGBError
            If a parameter is out of range; with a budget, if ``X_valid`` is missing or the first tree alone
            costs more than the budget.
        """
        self._check_params()
        X, y = validate_data(self, X, y, dtype=np.float32, ensure_min_samples=2, ensure_all_finite="allow-nan")
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        num_features = X.shape[1]
        self.costs_ = self._resolved_costs(num_features)
        lazy = np.ascontiguousarray(self.costs_.arrays(num_features)[0], dtype=np.float64)
        group_of, group_lazy, _ = self.costs_.group_arrays(num_features)
        group_of = np.ascontiguousarray(group_of, dtype=np.int32)
        group_lazy = np.ascontiguousarray(group_lazy, dtype=np.float64)
        valid = None
        if self.budget is not None:
            if X_valid is None:
                raise CEGBError("budget: the budget bounds the mean cost on validation rows; pass "
                                "fit(X, y, X_valid=...)")
            valid = validate_data(self, X_valid, dtype=np.float32, reset=False,
                                  ensure_all_finite="allow-nan").astype(np.float64)
        X64 = np.asfortranarray(X, dtype=np.float64)  # GreedyTree reads columns
        X64[np.isnan(X64)] = 0.0  # as the forest's splits (missing type None) read a NaN
        codes = codes.astype(np.int32)
        rng = check_random_state(self.random_state)
        seeds = rng.randint(1, 2**62, size=self.n_estimators, dtype=np.int64).astype(np.uint64)
        max_depth = 2**62 if self.max_depth is None else self.max_depth

        def grow(t):  # tree t's bootstrap sample and stumps come from its own seed: any n_jobs, same trees
            sample = np.random.default_rng(int(seeds[t])).integers(0, len(X64), len(X64))
            return grow_tree(X64, codes, sample, lazy, group_of, group_lazy, len(self.classes_), float(self.tradeoff),
                             max_depth, self.min_samples_split, bool(self.free_path), seeds[t])

        trees, state = [], None if valid is None else CostState(len(valid), self.costs_, num_features)
        threads = resolve_n_jobs(self.n_jobs)
        with ThreadPoolExecutor(threads) as pool:
            for start in range(0, self.n_estimators, threads):
                for tree in pool.map(grow, range(start, min(start + threads, self.n_estimators))):
                    if state is not None and not self._within_budget(state, tree, num_features, valid):
                        break
                    trees.append(tree)
                else:
                    continue
                break
        if not trees:
            raise CEGBError(f"budget: the first tree alone costs more than {self.budget} per validation row; "
                            "raise the budget or tradeoff, or lower max_depth")
        self.forest_ = _forest(trees, num_features, self._names_in())
        self.leaf_counts_ = np.concatenate([tree[4] for tree in trees])
        self.n_estimators_ = len(trees)
        self.valid_cost_ = None if state is None else float(state.per_instance.mean())
        return self

    def _within_budget(self, state: CostState, tree, num_features: int, valid: np.ndarray) -> bool:
        """Add ``tree`` to the validation rows' cost state if the mean cost stays within the budget."""
        trial = CostState(state.num_rows, self.costs_, num_features)
        trial.paid, trial.acquisition, trial.evaluation = state.paid.copy(), state.acquisition.copy(), \
            state.evaluation.copy()
        trial.add(_forest([tree], num_features, None), valid)
        if trial.per_instance.mean() > self.budget:
            return False
        state.paid, state.acquisition, state.evaluation = trial.paid, trial.acquisition, trial.evaluation
        return True

    # ------------------------------------------------------------------------------------ prediction

    def _leaves(self, X):
        self._check_fitted()
        X = validate_data(self, X, dtype=np.float32, reset=False, ensure_all_finite="allow-nan")
        return self.forest_.apply(X.astype(np.float64), n_jobs=self.n_jobs) + self.forest_.leaf_offset[:-1]

    def _votes(self, X):
        """Votes per class after each tree (one array, updated in place)."""
        leaves = self._leaves(X)
        majority = np.argmax(self.leaf_counts_, axis=1)[leaves]
        votes = np.zeros((len(leaves), len(self.classes_)))
        rows = np.arange(len(leaves))
        for t in range(leaves.shape[1]):
            votes[rows, majority[:, t]] += 1
            yield votes

    def staged_predict_proba(self, X):
        """``predict_proba`` of the first 1, 2, ... trees: the forests smaller budgets keep.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The rows.

        Yields
        ------
        ndarray of shape (n_samples, n_classes)
            The share of the first t trees voting for each class, for t = 1, 2, ..., ``n_estimators_``.
        """
        for t, votes in enumerate(self._votes(X), start=1):
            yield votes / t

    def predict_proba(self, X) -> np.ndarray:
        """Share of the trees voting for each class (a tree votes its leaf's majority class).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The rows.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            The share of the trees voting for each class of ``classes_``.
        """
        *_, votes = self._votes(X)  # the last yield: every tree's votes (one array, updated in place)
        return votes / self.n_estimators_

    def predict(self, X) -> np.ndarray:
        """The majority vote (ties: the first class).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The rows.

        Returns
        -------
        ndarray of shape (n_samples,)
            The predicted class labels.
        """
        votes = self.predict_proba(X)
        return self.classes_[np.argmax(votes, axis=1)]

    def ranking_score(self, X, n_trees: int | None = None) -> np.ndarray:
        """For two classes, the paper's ranking score.

        The share of the second class among the training rows of all the leaves a row reaches in the first
        ``n_trees`` trees (not scikit-learn's decision_function, since predict is the vote).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The rows.
        n_trees : int or None, default=None
            Trees read, the first ones (None: all).

        Returns
        -------
        ndarray of shape (n_samples,)
            The scores, in [0, 1].

        Raises
        ------
        CEGBError
            If the model does not have two classes.
        """
        leaves = self._leaves(X)[:, :n_trees]
        if len(self.classes_) != 2:
            raise CEGBError(f"ranking_score: needs two classes, the model has {len(self.classes_)}")
        counts = self.leaf_counts_[leaves].sum(axis=1)
        return counts[:, 1] / counts.sum(axis=1)

    def prediction_cost(self, X, *, n_jobs: int | None = None) -> CostReport:
        """The exact per-row feature cost of the fitted forest on X (``lightgbm_cegb.prediction_cost``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The rows.
        n_jobs : int or None, default=None
            Threads (None: the CPUs this process may use).

        Returns
        -------
        CostReport
            The per-row acquisition and evaluation costs, and the features' usage.
        """
        self._check_fitted()
        return prediction_cost(self.forest_, X, self.costs_, n_jobs=n_jobs)

    def prefix(self, n_trees: int) -> BudgetRFClassifier:
        """A copy of the fitted forest holding only its first ``n_trees`` trees.

        The forest a smaller budget keeps (a sweep's prefix points); its ``valid_cost_`` is None.

        Parameters
        ----------
        n_trees : int
            Trees kept, from 1 to ``n_estimators_``.

        Returns
        -------
        BudgetRFClassifier
            The copy.

        Raises
        ------
        CEGBError
            If ``n_trees`` is not an integer in that range.
        """
        self._check_fitted()
        check_number(n_trees, "n_trees", 1, self.n_estimators_, integer=True)
        state, _ = self._saved_state()
        nodes, leaves = state["node_offset"][:n_trees + 1], state["leaf_offset"][:n_trees + 1]
        state.update(node_offset=nodes, leaf_offset=leaves, n_estimators=n_trees, valid_cost=None,
                     leaf_counts=state["leaf_counts"][:leaves[-1]],
                     **{k: state[k][:nodes[-1]] for k in ("feature", "threshold", "left", "right")})
        model = copy.copy(self)
        model._restore(state, None, {})
        return model

    def _saved_state(self) -> tuple[dict, dict]:
        forest = self.forest_
        return {"classes": self.classes_, "n_estimators": self.n_estimators_, "valid_cost": self.valid_cost_,
                "node_offset": forest.node_offset, "leaf_offset": forest.leaf_offset, "feature": forest.feature,
                "threshold": forest.threshold, "left": forest.left, "right": forest.right,
                "leaf_counts": self.leaf_counts_}, {}

    def _restore(self, state: dict, folder, manifest: dict) -> None:
        """The fitted forest from its arrays (checked where they enter: shapes, offsets, finite values; the tree
        structure by Forest)."""
        classes = saved.class_labels(state, least=1)  # fit takes one
        nodes, leaves = (saved.array(state, key, (None,), np.int64, low=0) for key in ("node_offset", "leaf_offset"))
        arrays = {k: saved.array(state, k, (None,), dtype) for k, dtype in
                  (("feature", np.int32), ("threshold", np.float64), ("left", np.int32), ("right", np.int32))}
        counts = saved.array(state, "leaf_counts", (None, len(classes)), low=0.0)
        n_trees = saved.integer(state, "n_estimators", 1)
        if (len(nodes) != n_trees + 1 or len(leaves) != n_trees + 1 or nodes[0] != 0 or leaves[0] != 0
                or (np.diff(nodes) < 0).any() or (np.diff(leaves) != np.diff(nodes) + 1).any()
                or leaves[-1] != len(counts) or any(len(a) != nodes[-1] for a in arrays.values())):
            raise saved.damaged(state, f"the forest's arrays do not match its n_estimators ({n_trees}), offsets and "
                                       "one another")
        trees = [(*(arrays[k][nodes[t]:nodes[t + 1]] for k in ("feature", "threshold", "left", "right")),
                  counts[leaves[t]:leaves[t + 1]]) for t in range(n_trees)]
        names = None if getattr(self, "feature_names_in_", None) is None else [str(n) for n in self.feature_names_in_]
        self.forest_ = _forest(trees, self.n_features_in_, names)
        self.leaf_counts_ = counts
        self.classes_ = classes
        self.n_estimators_ = n_trees
        self.valid_cost_ = state["valid_cost"]

    def to_lightgbm(self) -> str:
        """The forest as LightGBM model text that stock LightGBM loads.

        Its ``predict`` equals this model's ``predict_proba`` (two classes: its second column). Each tree
        becomes one iteration of a random forest (``average_output``; no objective, so the output is the
        averaged raw score): per class, a copy of the tree whose leaves are 1 where that class wins the vote,
        else 0. Thresholds move to the largest double that float32 rounding keeps at or below them, so that
        LightGBM's ``x <= t`` on doubles decides as this model's comparison of float32 values. LightGBM reads
        ``|x| <= 1e-35`` as 0: for such inputs a threshold within 1e-35 of 0 can decide differently.

        Returns
        -------
        str
            The model text (``lightgbm.Booster(model_str=...)`` loads it).

        Raises
        ------
        NotFittedError
            If the estimator is not fitted.
        """
        self._check_fitted()
        forest, classes = self.forest_, len(self.classes_)
        per_class = 1 if classes == 2 else classes
        winners = np.argmax(self.leaf_counts_, axis=1)
        names = forest.feature_names or [f"Column_{i}" for i in range(forest.num_features)]
        names = [lightgbm_feature_name(name) for name in names]
        trees = []
        for t in range(forest.num_trees):
            s0, s1 = forest.node_offset[t], forest.node_offset[t + 1]
            l0, l1 = forest.leaf_offset[t], forest.leaf_offset[t + 1]
            for k in range(per_class):
                target = 1 if classes == 2 else k
                trees.append((forest.feature[s0:s1], _double_threshold(forest.threshold[s0:s1]), forest.left[s0:s1],
                              forest.right[s0:s1], (winners[l0:l1] == target).astype(np.float64),
                              self.leaf_counts_[l0:l1].sum(axis=1)))
        header = (f"tree\nversion=v4\nnum_class={per_class}\nnum_tree_per_iteration={per_class}\nlabel_index=0\n"
                  f"max_feature_idx={forest.num_features - 1}\naverage_output\nfeature_names={' '.join(names)}\n"
                  f"feature_infos={' '.join(['none'] * forest.num_features)}\ntree_sizes=\n\n")
        footer = ("\nfeature_importances:\n\nparameters:\n[boosting: rf]\n[num_class: "
                  f"{per_class}]\nend of parameters\n\npandas_categorical:null\n")
        export = _stack(trees, forest.num_features, trees_per_iteration=per_class, feature_names=names,
                        average_output=True, text_header=header, text_footer=footer)
        return write_text(export)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # read as 0.0 (the module doc)
        return tags


def _forest(trees: list[tuple], num_features: int, names: list[str] | None) -> Forest:
    """Trees from grow_tree as one Forest (leaf values: the leaf's majority class code; float32 reading)."""
    parts = [(t[0], t[1], t[2], t[3], np.argmax(t[4], axis=1).astype(np.float64), t[4].sum(axis=1)) for t in trees]
    forest = _stack(parts, num_features, feature_names=names, drop_tiny=False)
    forest.leaf_weight = forest.leaf_count
    return forest


def _stack(trees: list[tuple], num_features: int, **fields) -> Forest:
    """Trees given as (feature, threshold, left, right, leaf values, leaf counts) in one Forest of numerical
    splits (NaN read as 0.0, as LightGBM's missing type None); ``fields``: the Forest's other fields."""
    node_offset = np.cumsum([0] + [len(tree[0]) for tree in trees])
    leaf_offset = np.cumsum([0] + [len(tree[4]) for tree in trees])
    feature, threshold, left, right, leaf_value, leaf_count = (np.concatenate(part) for part in zip(*trees))
    return Forest(node_offset=node_offset, feature=feature, threshold=threshold,
                  decision=np.zeros(node_offset[-1], dtype=np.uint8), left=left, right=right,
                  leaf_offset=leaf_offset, leaf_value=leaf_value, cat_offset=np.zeros(len(trees) + 1, dtype=np.int64),
                  cat_boundaries=np.zeros(0, dtype=np.int64), cat_threshold=np.zeros(0, dtype=np.uint32),
                  num_features=num_features, leaf_count=leaf_count, **fields)


def _double_threshold(threshold: np.ndarray) -> np.ndarray:
    """For float32 thresholds v: the largest double x with float32(x) <= v (round to nearest, ties to even)."""
    v = threshold.astype(np.float32)
    up = np.nextafter(v, np.float32(np.inf))
    middle = (v.astype(np.float64) + up.astype(np.float64)) / 2  # exact: one more bit than float32
    even = (v.view(np.uint32) & 1) == 0  # a tie rounds to v when v's last mantissa bit is 0
    out = np.where(even, middle, np.nextafter(middle, -np.inf))
    return np.where(np.isinf(v), v.astype(np.float64), out)
