"""Per-row prediction-cost state: what each of a set of rows has paid so far, as trees are added.

The training callbacks keep one per booster (only the new trees are routed after each iteration); a
method that routes rows through several models in turn (a gate, then a cheap or a costly model; a
service acquiring features lazily) keeps one across them, so that a feature a row already paid for is
free in the next model. ``prediction_cost`` is the one-shot form of the same kernel.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from lightgbm_cegb.core.costs import FeatureCosts
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.forest import Forest
from lightgbm_cegb.core.parallel import resolve_n_jobs
from lightgbm_cegb.core.report import CostReport


class CostState:
    """Per-row cost of ``num_rows`` rows under ``costs`` (aligned FeatureCosts for ``num_features``).

    ``paid[i, f]`` says row i has paid feature f's lazy cost, ``paid[i, num_features + g]`` group g's (the
    groups of ``costs``); ``acquisition[i]`` and ``evaluation[i]`` are its lazy costs and its split and tree
    costs so far.

    Parameters
    ----------
    num_rows : int
        Number of rows followed.
    costs : FeatureCosts
        The cost model, aligned (by column) to ``num_features`` features.
    num_features : int
        Number of features (columns) of the models the rows are routed through.

    Attributes
    ----------
    paid : ndarray of uint8 of shape (num_rows, num_features + number of groups)
        ``paid[i, f]``: row i has paid feature f's lazy cost; ``paid[i, num_features + g]``: group g's.
    acquisition : ndarray of shape (num_rows,)
        Each row's lazy costs so far.
    evaluation : ndarray of shape (num_rows,)
        Each row's split and tree costs so far.
    num_features : int
        Number of features.
    lazy, split : ndarray of shape (num_features,)
        The features' lazy and split costs (float64).
    group_of : ndarray of int32 of shape (num_features,)
        Each feature's group, -1 for none.
    group_lazy : ndarray
        Each group's lazy cost.
    tree : float
        The cost of evaluating one tree.

    Raises
    ------
    CEGBError
        When ``costs`` are given by feature name (not aligned) or are for another number of features.
    """

    def __init__(self, num_rows: int, costs: FeatureCosts, num_features: int) -> None:
        lazy, _, split = costs.arrays(num_features)
        group_of, group_lazy, _ = costs.group_arrays(num_features)
        self.num_features = num_features
        self.lazy = np.ascontiguousarray(lazy, dtype=np.float64)
        self.split = np.ascontiguousarray(split, dtype=np.float64)
        self.group_of = np.ascontiguousarray(group_of, dtype=np.int32)
        self.group_lazy = np.ascontiguousarray(group_lazy, dtype=np.float64)
        self.tree = costs.tree
        self.paid = np.zeros((num_rows, num_features + len(group_lazy)), dtype=np.uint8)
        self.acquisition = np.zeros(num_rows)
        self.evaluation = np.zeros(num_rows)
        self._blocks: list | None = None
        self._blocks_of = None

    @property
    def num_rows(self) -> int:
        """Number of rows followed."""
        return len(self.acquisition)

    @property
    def per_instance(self) -> np.ndarray:
        """Each row's cost so far: ``acquisition + evaluation``."""
        return self.acquisition + self.evaluation

    def mean(self) -> tuple[float, float]:
        """Mean (acquisition, evaluation) per row.

        Returns
        -------
        acquisition : float
            The mean lazy cost per row (0.0 without rows).
        evaluation : float
            The mean split and tree cost per row (0.0 without rows).
        """
        n = max(self.num_rows, 1)
        return float(self.acquisition.sum() / n), float(self.evaluation.sum() / n)

    def add(self, forest: Forest, X, trees: tuple[int, int] | None = None, rows=None, *,
            n_jobs: int | None = None) -> None:
        """Route rows through trees ``trees = (t0, t1)`` of ``forest`` (default: all) and add what they pay.

        A feature (or group) a row has paid already is free; the rows' :attr:`paid`, :attr:`acquisition` and
        :attr:`evaluation` are updated in place.

        Parameters
        ----------
        forest : Forest
            The model, of ``num_features`` features.
        X : array-like of shape (n_rows, num_features)
            The rows' values (numpy array, scipy sparse matrix or pandas DataFrame, read as ``forest``'s
            library reads them).
        trees : tuple of (int, int), optional
            The trees ``t0..t1 - 1`` to route through (default: all of ``forest``'s).
        rows : array-like of int, optional
            The state's rows that X holds, in X's order (default: all, X has num_rows rows).
        n_jobs : int, optional
            Threads of the routing kernel (None: the CPUs this process may use).

        Raises
        ------
        CEGBError
            When ``forest`` has another number of features, X another number of rows (without ``rows``), or
            ``rows`` does not index the state's rows one per row of X.
        """
        if forest.num_features != self.num_features:
            raise CEGBError(f"the forest has {forest.num_features} features, this cost state {self.num_features}")
        t0, t1 = (0, forest.num_trees) if trees is None else trees
        if rows is None:
            if np.shape(X)[0] != self.num_rows:
                raise CEGBError(f"X has {np.shape(X)[0]} rows, this cost state {self.num_rows}")
            for start, block in self._row_blocks(forest, X):
                stop = start + len(block)
                forest.flat.cost_update(block, t0, t1, self.lazy, self.split, self.group_of, self.group_lazy,
                                        self.paid[start:stop], self.acquisition[start:stop],
                                        self.evaluation[start:stop], resolve_n_jobs(n_jobs, len(block)))
            self.evaluation += self.tree * (t1 - t0)
            return
        rows = np.asarray(rows, dtype=np.int64)
        if (rows.ndim != 1 or len(rows) != np.shape(X)[0]
                or (rows.size and (rows.min() < 0 or rows.max() >= self.num_rows))):
            raise CEGBError(f"rows should index this cost state's {self.num_rows} rows, one per row of X")
        for start, block in forest.row_blocks(X):
            index = rows[start:start + len(block)]
            paid = np.ascontiguousarray(self.paid[index])
            acquisition, evaluation = self.acquisition[index], self.evaluation[index]
            forest.flat.cost_update(block, t0, t1, self.lazy, self.split, self.group_of, self.group_lazy, paid,
                                    acquisition, evaluation, resolve_n_jobs(n_jobs, len(block)))
            self.paid[index], self.acquisition[index], self.evaluation[index] = \
                paid, acquisition, evaluation + self.tree * (t1 - t0)

    def pay(self, feature: int, rows: np.ndarray) -> None:
        """Rows ``rows`` acquire ``feature``: each that has not paid it (or its group) yet pays its lazy cost
        (and its group's), as the routing kernel charges them.

        Parameters
        ----------
        feature : int
            Column index of the feature.
        rows : array-like of int
            The state's rows that acquire it.
        """
        rows = np.asarray(rows, dtype=np.int64)
        unpaid = rows[self.paid[rows, feature] == 0]
        self.paid[unpaid, feature] = 1
        self.acquisition[unpaid] += self.lazy[feature]
        group = self.group_of[feature]
        if group >= 0:
            column = self.num_features + group
            unpaid = unpaid[self.paid[unpaid, column] == 0]
            self.paid[unpaid, column] = 1
            self.acquisition[unpaid] += self.group_lazy[group]

    def report(self, costs: FeatureCosts, feature_names: list[str] | None = None) -> CostReport:
        """The rows' costs as a CostReport (the columns named ``feature_names``), the coupled cost that of every
        feature some row paid, ``group_usage`` the share of rows that paid each group of ``costs``.

        Parameters
        ----------
        costs : FeatureCosts
            The cost model (aligned), for the coupled cost and the groups' names.
        feature_names : list of str, optional
            The names of the columns, for the report's ``usage_by_name``.

        Returns
        -------
        CostReport
            The rows' acquisition and evaluation costs (the state's arrays, not copies), the coupled cost of
            the features some row paid, the share of rows that paid each feature (``usage``) and each group
            (``group_usage``, with groups).
        """
        used = np.flatnonzero(self.feature_paid.any(axis=0))
        n = max(self.num_rows, 1)
        groups = costs.groups
        return CostReport(acquisition=self.acquisition, evaluation=self.evaluation,
                          coupled=costs.model_cost(used, self.num_features),
                          usage=self.feature_paid.sum(axis=0) / n, feature_names=feature_names,
                          group_usage=None if groups is None else
                          dict(zip(groups, (self.paid[:, self.num_features:].sum(axis=0) / n).tolist())))

    @property
    def feature_paid(self) -> np.ndarray:
        """:attr:`paid`'s feature columns (a view): ``[i, f]`` says row i has paid feature f."""
        return self.paid[:, :self.num_features]

    def _row_blocks(self, forest: Forest, X):
        """X's row blocks, converted once and kept for the next trees (sparse X: converted each time)."""
        if sp.issparse(X):
            return forest.row_blocks(X)
        # how the forest's library reads X
        key = (X, forest.drop_tiny, forest.float32, repr(forest.pandas_categorical))
        if self._blocks_of is None or self._blocks_of[0] is not X or self._blocks_of[1:] != key[1:]:
            self._blocks = list(forest.row_blocks(X))
            self._blocks_of = key
        return self._blocks
