"""``Forest``: the one representation of a tree ensemble every method of the package works on.

Tree ``t``'s split nodes are ``node_offset[t]:node_offset[t + 1]`` of the node arrays, numbered from 0
(the root) inside the tree; a child ``c >= 0`` is a split node and ``c < 0`` is the leaf ``~c``, as in
LightGBM's model files. Its leaves are ``leaf_offset[t]:leaf_offset[t + 1]`` of the leaf arrays (a tree
of n split nodes has n + 1 leaves; a tree without split nodes is the single leaf 0). Where a method
needs one numbering of all nodes of a tree (parents, pruning), split node j is j and leaf l is
``n + l``.

The constructor is the trust boundary: it checks every index a Cython kernel will follow (children in
range and acyclic, features, categorical thresholds and bitset ranges, trees per iteration), so a
``Forest`` can never crash or hang the kernels; leaf indices given to it (``raw_score``, ``leaf_values``)
are checked where they enter (``checked_leaves``). Readers: ``lightgbm_model`` (LightGBM model text) and
``sklearn_model`` (fitted scikit-learn trees); ``models.to_forest`` picks one for any supported model.

Its length: one class whose constructor is the kernels' trust boundary; its readers of X (dense, sparse, a
DataFrame) and its views (parents, leaf values, a cut to fewer trees) stay with the checked arrays they read.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from lightgbm_cegb._engine import FlatEnsemble, check_structure, path_marks, raw_scores
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.frames import lightgbm_frame_values
from lightgbm_cegb.core.parallel import resolve_n_jobs
from lightgbm_cegb.core.validation import check_column_order

KNOWN_DECISION_BITS = 0b1111  # categorical, default-left, 2 bits of missing type
CATEGORICAL = 1
MISSING_TYPE_NAN = 2
#: rows of a sparse or pandas X are converted to dense float64 at most this many values at a time
BLOCK_VALUES = 1 << 22

_STRUCTURE_PROBLEMS = {
    1: "child {other} of node {node} is out of range",
    2: "has a cycle through node {node} (reached again from node {other})",
    3: "is not a tree: node {node} is reached from node {other} and from another node",
    4: "is not a tree: node {node} cannot be reached from the root",
}


def _checked(name: str, values, dtype, ndim: int = 1) -> np.ndarray:
    """``values`` as a C-contiguous array of ``dtype``; integers must convert without changing value."""
    arr = np.asarray(values)
    if arr.ndim != ndim:
        raise CEGBError(f"Forest: {name} should be a {ndim}-d array, got shape {arr.shape}")
    out = np.ascontiguousarray(arr, dtype=dtype) if arr.size else np.zeros(arr.shape, dtype=dtype)
    if np.issubdtype(np.dtype(dtype), np.integer) and arr.size:
        if arr.dtype.kind not in "iub":
            if arr.dtype.kind != "f" or not np.isfinite(arr).all() or (arr != np.trunc(arr)).any():
                raise CEGBError(f"Forest: {name} should hold integers, got {arr.dtype} values")
        info = np.iinfo(dtype)
        low, high = arr.min(), arr.max()
        if low < info.min or high > info.max:
            bad = low if low < info.min else high
            raise CEGBError(f"Forest: {name} should fit in {np.dtype(dtype).name}, got {bad}")
    return out


@dataclass(eq=False)
class Forest:
    """A tree ensemble as parallel arrays: the compiled forest layout every method works on.

    Most users get one from :func:`to_forest` rather than build one. Tree ``t``'s split nodes are
    ``node_offset[t]:node_offset[t + 1]`` of the node arrays, numbered from 0 (the root) inside the tree; a
    child ``c >= 0`` is a split node and ``c < 0`` is the leaf ``~c``, as in LightGBM's model files. Its leaves
    are ``leaf_offset[t]:leaf_offset[t + 1]`` of the leaf arrays (a tree of n split nodes has n + 1 leaves; a
    tree without split nodes is the single leaf 0). Where a method needs one numbering of all nodes of a
    tree (parents, pruning), split node j is j and leaf l is ``n + l``.

    The node statistics (``internal_*``, ``leaf_weight``, ``leaf_count``, ``split_gain``, ``shrinkage``)
    are optional: LightGBM models carry all of them, scikit-learn models values and counts. ``text_header``
    and ``text_footer`` hold a LightGBM model file's text around its trees, for writing it back.

    The constructor is the trust boundary: it checks every index a Cython kernel will follow (children in
    range and acyclic, features, categorical thresholds and bitset ranges, trees per iteration), so a
    ``Forest`` can never crash or hang the kernels.

    Parameters
    ----------
    node_offset : array-like of int of shape (num_trees + 1,)
        Tree t's split nodes are ``node_offset[t]:node_offset[t + 1]``; rises from 0 to the number of split
        nodes.
    feature : array-like of int of shape (n_split_nodes,)
        The feature (column) each split node tests.
    threshold : array-like of float of shape (n_split_nodes,)
        Each split node's threshold (a categorical split: the index of the node's category bitset in its
        tree).
    decision : array-like of uint8 of shape (n_split_nodes,)
        LightGBM's ``decision_type`` bits of each split node: categorical, default-left, then 2 bits of
        missing type.
    left, right : array-like of int of shape (n_split_nodes,)
        Each split node's children, numbered inside the tree: ``c >= 0`` a split node, ``c < 0`` the leaf
        ``~c``.
    leaf_offset : array-like of int of shape (num_trees + 1,)
        Tree t's leaves are ``leaf_offset[t]:leaf_offset[t + 1]`` (one more than its split nodes).
    leaf_value : array-like of float of shape (n_leaves,)
        Each leaf's output.
    cat_offset : array-like of int of shape (num_trees + 1,)
        Tree t's bitset boundaries are ``cat_boundaries[cat_offset[t]:cat_offset[t + 1]]``.
    cat_boundaries : array-like of int
        Word ranges of the category bitsets in ``cat_threshold``.
    cat_threshold : array-like of uint32
        The category bitsets.
    num_features : int
        The model's number of features (>= 1).
    trees_per_iteration : int, default=1
        Trees per boosting iteration (LightGBM's ``num_tree_per_iteration``: the classes of a multiclass
        model); tree t adds to output ``t % trees_per_iteration``.
    parallel_trees : int, default=1
        Consecutive groups of ``trees_per_iteration`` trees that make one iteration (XGBoost's
        ``num_parallel_tree``): an iteration is ``trees_per_iteration * parallel_trees`` trees.
    feature_names : list of str, optional
        The features' names, one per feature.
    average_output : bool, default=False
        The model averages its trees' outputs (LightGBM's random forest mode).
    drop_tiny : bool, default=True
        Read values as LightGBM does (``|x| <= 1e-35`` as 0); False: compare them as they are (float64, as
        scikit-learn's HistGradientBoosting does) or rounded to float32 (``float32``).
    float32 : bool, optional
        Compare the values rounded to float32, as scikit-learn's trees, XGBoost and CatBoost do (None: when
        ``drop_tiny`` is False).
    missing_value : float, optional
        A value read as missing besides NaN (XGBoost's ``missing``; compared as the splits compare values).
    sparse_missing : bool, default=False
        The entries a scipy sparse matrix does not store are missing (XGBoost), not 0.0 (LightGBM, scikit-learn).
    linear : dict, optional
        The per-leaf linear models of a ``linear_tree`` model: ``leaf_const``, ``indptr``, ``features``,
        ``coeff``.
    params : dict, optional
        The training parameters written in a LightGBM model (default: empty).
    internal_value : array-like of float of shape (n_split_nodes,), optional
        Each split node's value (the output it would have as a leaf).
    internal_weight : array-like of float of shape (n_split_nodes,), optional
        Each split node's sum of hessians (LightGBM) or weight of training rows.
    internal_count : array-like of float of shape (n_split_nodes,), optional
        Each split node's count of training rows.
    split_gain : array-like of float of shape (n_split_nodes,), optional
        Each split node's gain.
    leaf_weight : array-like of float of shape (n_leaves,), optional
        Each leaf's sum of hessians (LightGBM) or weight of training rows.
    leaf_count : array-like of float of shape (n_leaves,), optional
        Each leaf's count of training rows.
    shrinkage : array-like of float of shape (num_trees,), optional
        Each tree's shrinkage (learning rate).
    pandas_categorical : list, optional
        LightGBM: the categories of a pandas DataFrame's category columns.
    objective : str, optional
        LightGBM: the model's objective line, e.g. ``"binary sigmoid:1"``.
    text_header : str, optional
        A LightGBM model file's text before its trees.
    text_footer : str, optional
        A LightGBM model file's text after its trees.

    Raises
    ------
    CEGBError
        When an array has the wrong shape or type, or an index a kernel would follow is out of range (children,
        features, categorical thresholds and bitsets), or a tree has a cycle.

    See Also
    --------
    to_forest : The Forest of a LightGBM or scikit-learn model.
    """

    node_offset: np.ndarray  # int64[num_trees + 1]
    feature: np.ndarray  # int32 per split node
    threshold: np.ndarray  # float64 per split node (categorical: index of the node's category bitset)
    decision: np.ndarray  # uint8 per split node: LightGBM decision_type bits
    left: np.ndarray  # int32 per split node
    right: np.ndarray  # int32 per split node
    leaf_offset: np.ndarray  # int64[num_trees + 1]
    leaf_value: np.ndarray  # float64 per leaf
    # cat_offset: int64[num_trees + 1]; tree t's bitset boundaries are cat_boundaries[cat_offset[t]:cat_offset[t + 1]]
    cat_offset: np.ndarray
    cat_boundaries: np.ndarray  # int64: word ranges of the bitsets in cat_threshold
    cat_threshold: np.ndarray  # uint32: category bitsets
    num_features: int
    trees_per_iteration: int = 1
    parallel_trees: int = 1  # XGBoost's num_parallel_tree: groups of trees_per_iteration trees per iteration
    feature_names: list[str] | None = None
    average_output: bool = False
    drop_tiny: bool = True  # LightGBM reads |x| <= 1e-35 as 0; scikit-learn compares float32 values
    float32: bool | None = None  # values compared rounded to float32 (None: not drop_tiny)
    missing_value: float | None = None  # XGBoost's missing: a value read as missing besides NaN
    sparse_missing: bool = False  # XGBoost: the entries a sparse matrix does not store are missing
    linear: dict | None = None  # per-leaf linear models of linear_tree models (leaf_const, indptr, features, coeff)
    params: dict = field(default_factory=dict)  # training parameters written in a LightGBM model
    internal_value: np.ndarray | None = None  # per split node
    internal_weight: np.ndarray | None = None
    internal_count: np.ndarray | None = None
    split_gain: np.ndarray | None = None
    leaf_weight: np.ndarray | None = None  # per leaf
    leaf_count: np.ndarray | None = None
    shrinkage: np.ndarray | None = None  # per tree
    pandas_categorical: list | None = None  # LightGBM: categories of a pandas DataFrame's category columns
    objective: str | None = None  # LightGBM: the model's objective line, e.g. "binary sigmoid:1"
    text_header: str | None = None
    text_footer: str | None = None

    def __post_init__(self) -> None:
        self.node_offset = _checked("node_offset", self.node_offset, np.int64)
        self.leaf_offset = _checked("leaf_offset", self.leaf_offset, np.int64)
        self.feature = _checked("feature", self.feature, np.int32)
        self.threshold = _checked("threshold", self.threshold, np.float64)
        self.decision = _checked("decision", self.decision, np.uint8)
        self.left = _checked("left", self.left, np.int32)
        self.right = _checked("right", self.right, np.int32)
        self.leaf_value = _checked("leaf_value", self.leaf_value, np.float64)
        self.cat_offset = _checked("cat_offset", self.cat_offset, np.int64)
        self.cat_boundaries = _checked("cat_boundaries", self.cat_boundaries, np.int64)
        self.cat_threshold = _checked("cat_threshold", self.cat_threshold, np.uint32)
        for name in ("internal_value", "internal_weight", "internal_count", "split_gain"):
            self._optional(name, len(self.feature))
        for name in ("leaf_weight", "leaf_count"):
            self._optional(name, len(self.leaf_value))
        self.drop_tiny = bool(self.drop_tiny)
        self.float32 = not self.drop_tiny if self.float32 is None else bool(self.float32)
        if self.drop_tiny and self.float32:
            raise CEGBError("Forest: drop_tiny (LightGBM's reading) and float32 exclude each other")
        self._check()
        self._flat: FlatEnsemble | None = None
        self._used: dict[int, np.ndarray] = {}

    def _optional(self, name: str, length: int) -> None:
        value = getattr(self, name)
        if value is not None:
            value = _checked(name, value, np.float64)
            if len(value) != length:
                raise CEGBError(f"Forest: {name} should have {length} values, got {len(value)}")
            setattr(self, name, value)

    # ------------------------------------------------------------------------------------ validation

    def _check(self) -> None:
        """Every index a kernel follows, checked once (see the module docstring)."""
        if isinstance(self.num_features, bool) or not isinstance(self.num_features, (int, np.integer)) \
                or self.num_features < 1:
            raise CEGBError(f"Forest: num_features should be an integer >= 1, got {self.num_features!r}")
        self.num_features = int(self.num_features)
        tpi = self.trees_per_iteration
        if isinstance(tpi, bool) or not isinstance(tpi, (int, np.integer)) or tpi < 1:
            raise CEGBError(f"Forest: trees_per_iteration (LightGBM's num_tree_per_iteration) should be an "
                            f"integer >= 1, got {tpi!r}")
        self.trees_per_iteration = int(tpi)
        parallel = self.parallel_trees
        if isinstance(parallel, bool) or not isinstance(parallel, (int, np.integer)) or parallel < 1:
            raise CEGBError(f"Forest: parallel_trees (XGBoost's num_parallel_tree) should be an integer >= 1, got "
                            f"{parallel!r}")
        self.parallel_trees = int(parallel)
        if self.missing_value is not None:
            if isinstance(self.missing_value, bool) or not isinstance(self.missing_value, (int, float, np.number)):
                raise CEGBError(f"Forest: missing_value should be a number or None, got {self.missing_value!r}")
            self.missing_value = None if np.isnan(self.missing_value) else float(self.missing_value)
        offsets, leaf_offsets = self.node_offset, self.leaf_offset
        if len(offsets) < 1 or offsets[0] != 0 or (np.diff(offsets) < 0).any() or offsets[-1] != len(self.feature):
            raise CEGBError(f"Forest: node_offset should rise from 0 to the {len(self.feature)} split nodes")
        num_trees = len(offsets) - 1
        if num_trees % (self.trees_per_iteration * self.parallel_trees):
            raise CEGBError(f"Forest: {num_trees} trees are not whole iterations of trees_per_iteration="
                            f"{self.trees_per_iteration} x parallel_trees={self.parallel_trees}")
        for name in ("threshold", "decision", "left", "right"):
            if len(getattr(self, name)) != len(self.feature):
                raise CEGBError(f"Forest: {name} should have {len(self.feature)} values (one per split node), "
                                f"got {len(getattr(self, name))}")
        if len(leaf_offsets) != num_trees + 1 or leaf_offsets[0] != 0 \
                or (np.diff(leaf_offsets) != np.diff(offsets) + 1).any() or leaf_offsets[-1] != len(self.leaf_value):
            raise CEGBError("Forest: leaf_offset should give each tree one leaf more than split nodes, "
                            f"and {len(self.leaf_value)} leaves in all")
        if self.feature.size and (self.feature.min() < 0 or self.feature.max() >= self.num_features):
            bad = int(self.feature[(self.feature < 0) | (self.feature >= self.num_features)][0])
            raise CEGBError(f"Forest: split feature {bad} outside 0..{self.num_features - 1}")
        bad = (self.decision > KNOWN_DECISION_BITS) | ((self.decision >> 2) & 3 == 3)
        if bad.any():
            raise CEGBError(f"Forest: unknown decision_type {int(self.decision[bad][0])}")
        if self.feature_names is not None and len(self.feature_names) != self.num_features:
            raise CEGBError(f"Forest: {len(self.feature_names)} feature names for {self.num_features} features")
        if self.shrinkage is not None:
            self.shrinkage = _checked("shrinkage", self.shrinkage, np.float64)
            if len(self.shrinkage) != num_trees:
                raise CEGBError(f"Forest: shrinkage should have {num_trees} values, got {len(self.shrinkage)}")
        self._check_categorical(num_trees)
        self._check_linear()
        problem, tree, node, other, parent = check_structure(self.node_offset, self.left, self.right)
        if problem in (1, 2):
            raise CEGBError(f"Forest: tree {tree} " + _STRUCTURE_PROBLEMS[problem].format(node=node, other=other))
        self._parent = parent
        self._not_a_tree = (f"tree {tree} " + _STRUCTURE_PROBLEMS[problem].format(node=node, other=other)
                            if problem else None)

    def _check_categorical(self, num_trees: int) -> None:
        cat_offset, bounds = self.cat_offset, self.cat_boundaries
        if len(cat_offset) != num_trees + 1 or cat_offset[0] != 0 or (np.diff(cat_offset) < 0).any() \
                or cat_offset[-1] != len(bounds):
            raise CEGBError(f"Forest: cat_offset should rise from 0 to the {len(bounds)} cat_boundaries, one "
                            "entry per tree and one more")
        sizes = np.diff(cat_offset)
        if (sizes == 1).any():
            raise CEGBError(f"Forest: tree {int(np.flatnonzero(sizes == 1)[0])} has one cat_boundaries entry")
        if bounds.size:
            inner = np.ones(len(bounds) - 1, dtype=bool)
            starts = cat_offset[1:-1]
            inner[starts[(starts > 0) & (starts < len(bounds))] - 1] = False  # steps between trees
            if bounds.min() < 0 or bounds.max() > len(self.cat_threshold) or (np.diff(bounds)[inner] < 0).any():
                raise CEGBError(f"Forest: cat_boundaries should be non-decreasing word offsets within the "
                                f"{len(self.cat_threshold)} words of cat_threshold")
        categorical = (self.decision & CATEGORICAL).astype(bool)
        if categorical.any():
            tree_of = np.repeat(np.arange(num_trees), np.diff(self.node_offset))[categorical]
            num_cat = np.maximum(sizes - 1, 0)[tree_of]
            threshold = self.threshold[categorical]
            finite = np.isfinite(threshold)
            index = np.where(finite, np.trunc(np.where(finite, threshold, 0)), -1)
            bad = ~finite | (index < 0) | (index >= num_cat)
            if bad.any():
                k = int(np.flatnonzero(bad)[0])
                raise CEGBError(f"Forest: tree {int(tree_of[k])} has a categorical split whose threshold "
                                f"{float(threshold[k])!r} is not one of its {int(num_cat[k])} category bitsets")

    def _check_linear(self) -> None:
        if self.linear is None:
            return
        lin = self.linear
        indptr = _checked("linear indptr", lin["indptr"], np.int64)
        features = _checked("linear features", lin["features"], np.int32)
        if len(indptr) != len(self.leaf_value) + 1 or indptr[0] != 0 or (np.diff(indptr) < 0).any() \
                or indptr[-1] != len(features) or len(lin["coeff"]) != len(features) \
                or len(lin["leaf_const"]) != len(self.leaf_value):
            raise CEGBError("Forest: linear leaves' arrays are inconsistent")
        if features.size and (features.min() < 0 or features.max() >= self.num_features):
            raise CEGBError(f"Forest: a linear leaf uses a feature outside 0..{self.num_features - 1}")
        self.linear = {"leaf_const": np.asarray(lin["leaf_const"], dtype=np.float64), "indptr": indptr,
                       "features": features, "coeff": np.asarray(lin["coeff"], dtype=np.float64)}

    # ---------------------------------------------------------------------------------------- shape

    @property
    def num_trees(self) -> int:
        """Number of trees."""
        return len(self.node_offset) - 1

    @property
    def num_iterations(self) -> int:
        """Number of iterations (trees / (``trees_per_iteration`` x ``parallel_trees``))."""
        return self.num_trees // (self.trees_per_iteration * self.parallel_trees)

    def num_trees_for(self, num_iteration: int | None) -> int:
        """Trees used by the first ``num_iteration`` iterations (None or <= 0: all).

        Parameters
        ----------
        num_iteration : int or None
            Iterations used (None or <= 0: all; more than there are: all).

        Returns
        -------
        int
            The number of trees.

        Raises
        ------
        CEGBError
            When ``num_iteration`` is neither None nor an integer.
        """
        if num_iteration is not None and (isinstance(num_iteration, bool)
                                          or not isinstance(num_iteration, (int, np.integer))):
            raise CEGBError(f"num_iteration should be None or an integer (<= 0: all iterations), got "
                            f"{num_iteration!r}")
        if num_iteration is None or num_iteration <= 0 or num_iteration >= self.num_iterations:
            return self.num_trees
        return int(num_iteration) * self.trees_per_iteration * self.parallel_trees

    def used_features(self, num_trees: int | None = None) -> np.ndarray:
        """Sorted features tested by at least one split node of the first ``num_trees`` trees.

        Parameters
        ----------
        num_trees : int, optional
            Trees considered (None: all).

        Returns
        -------
        ndarray of int32
            The column indices, sorted (cached: do not modify it).
        """
        num_trees = self.num_trees if num_trees is None else num_trees
        if num_trees not in self._used:
            self._used[num_trees] = np.unique(self.feature[:self.node_offset[num_trees]])
        return self._used[num_trees]

    def tree_size(self, t: int) -> int:
        """Nodes of tree t in the one numbering (split nodes, then leaves).

        Parameters
        ----------
        t : int
            The tree.

        Returns
        -------
        int
            Its number of nodes: twice its split nodes, plus one.
        """
        return 2 * int(self.node_offset[t + 1] - self.node_offset[t]) + 1

    def parents(self, t: int) -> np.ndarray:
        """int64 parent of each node of tree t (split node j is j, leaf l is n + l), -1 at the root.

        Split nodes come before their children (as LightGBM and scikit-learn number them) or a clear error:
        the methods that need parents need a tree numbered that way.

        Parameters
        ----------
        t : int
            The tree.

        Returns
        -------
        ndarray of int64 of shape (tree_size(t),)
            The parent of each node in the one numbering, -1 at the root.

        Raises
        ------
        CEGBError
            When a tree of the forest is not a tree (a node reached twice or never), or tree t's split nodes
            are not numbered parents first.
        """
        if self._not_a_tree is not None:
            raise CEGBError(f"the model's {self._not_a_tree}")
        start = 2 * int(self.node_offset[t]) + t
        parent = self._parent[start:start + self.tree_size(t)].astype(np.int64)
        n = int(self.node_offset[t + 1] - self.node_offset[t])
        if (parent[1:n] >= np.arange(1, n)).any():
            raise CEGBError(f"tree {t}'s split nodes are not numbered parents first (node "
                            f"{int(np.flatnonzero(parent[1:n] >= np.arange(1, n))[0]) + 1}); LightGBM and "
                            "scikit-learn always number them so")
        return parent

    # ----------------------------------------------------------------------------------------- rows

    def __getstate__(self) -> dict:
        """Pickled without the compiled routing structure (rebuilt on first use: it cannot be pickled)."""
        return {**self.__dict__, "_flat": None}

    @property
    def flat(self) -> FlatEnsemble:
        """The compiled routing structure of the Cython kernels (built on first use)."""
        if self._flat is None:
            self._flat = FlatEnsemble(self.node_offset, self.feature, self.threshold, self.decision, self.left,
                                      self.right, self.cat_offset, self.cat_boundaries, self.cat_threshold,
                                      self.trees_per_iteration, self.drop_tiny, self.num_features)
        return self._flat

    def row_blocks(self, X, *, missing: bool = True) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, C-contiguous float64 rows) blocks of X, read as the model's library reads them:
        LightGBM maps a DataFrame's category columns to its codes (its ``pandas_categorical``) and reads
        sparse zeros as 0.0; scikit-learn's trees, XGBoost and CatBoost compare float32 values; XGBoost reads the
        entries a sparse matrix does not store, and its ``missing`` value, as missing (``sparse_missing``,
        ``missing_value``). Sparse X and DataFrames are converted BLOCK_VALUES values at a time, never as a whole.

        Parameters
        ----------
        X : array-like of shape (n_rows, num_features)
            numpy array, scipy sparse matrix or pandas DataFrame.
        missing : bool, default=True
            Read ``missing_value`` as NaN (False: as the number it is).

        Yields
        ------
        start : int
            The index of the block's first row in X.
        rows : ndarray of shape (n_block_rows, num_features)
            The block's rows as C-contiguous float64.

        Raises
        ------
        CEGBError
            When X is not 2-d with ``num_features`` columns, or does not hold numbers.
        """
        if hasattr(X, "columns") and hasattr(X, "dtypes"):
            yield from self._frame_blocks(X, missing)
            return
        if sp.issparse(X):
            X = X.tocsr()
            self.check_shape(X.shape)
            step = max(1, BLOCK_VALUES // max(X.shape[1], 1))
            for start in range(0, X.shape[0], step):
                yield start, self._dense(self._sparse_block(X[start:start + step]), missing)
            return
        X = np.asarray(X)
        if X.dtype == object or X.dtype.kind in "USV":
            try:
                X = X.astype(np.float64)
            except (TypeError, ValueError):
                raise CEGBError("X should hold numbers") from None
        self.check_shape(X.shape)
        yield 0, self._dense(X, missing)

    def dense(self, X, *, missing: bool = True) -> np.ndarray:
        """X as one C-contiguous float64 array, read as ``row_blocks`` reads it.

        Parameters
        ----------
        X : array-like of shape (n_rows, num_features)
            numpy array, scipy sparse matrix or pandas DataFrame.
        missing : bool, default=True
            As for ``row_blocks``.

        Returns
        -------
        ndarray of shape (n_rows, num_features)
            The rows as C-contiguous float64.
        """
        parts = [block for _, block in self.row_blocks(X, missing=missing)]
        return np.concatenate(parts) if parts else np.zeros((0, self.num_features))

    def _frame_blocks(self, frame, missing: bool) -> Iterator[tuple[int, np.ndarray]]:
        self.check_shape(frame.shape)
        check_column_order(frame, self.feature_names, "X")
        step = max(1, BLOCK_VALUES // max(frame.shape[1], 1))
        for start in range(0, frame.shape[0], step):
            part = frame.iloc[start:start + step]
            if self.drop_tiny:  # LightGBM: its own mapping of pandas category columns
                part = lightgbm_frame_values(part, self.pandas_categorical)
            yield start, self._dense(np.asarray(part), missing)

    def check_shape(self, shape) -> None:
        """Refuse rows that this forest cannot read: not 2-dimensional, or not one value per feature.

        Parameters
        ----------
        shape : tuple of int
            The rows' shape.

        Raises
        ------
        CEGBError
            Naming the shape expected and the one received.
        """
        if len(shape) != 2:
            raise CEGBError(f"X should be 2-dimensional, got shape {tuple(shape)}")
        if shape[1] != self.num_features:
            raise CEGBError(f"X has {shape[1]} features but the model has {self.num_features}")

    def _sparse_block(self, block) -> np.ndarray:
        """A CSR block as dense values: the entries it does not store 0.0, or missing (``sparse_missing``)."""
        if not self.sparse_missing:
            return block.toarray()
        block = block.copy()
        block.sum_duplicates()
        out = np.full(block.shape, np.nan)
        rows = np.repeat(np.arange(block.shape[0]), np.diff(block.indptr))
        out[rows, block.indices] = block.data
        return out

    def _dense(self, X: np.ndarray, missing: bool) -> np.ndarray:
        return np.ascontiguousarray(self.as_read(X, missing=missing), dtype=np.float64)

    def as_read(self, values: np.ndarray, *, missing: bool = True) -> np.ndarray:
        """``values`` as this forest's splits compare them.

        Parameters
        ----------
        values : ndarray
            Feature values (float64).
        missing : bool, default=True
            Read ``missing_value`` as NaN (False: as the number it is).

        Returns
        -------
        ndarray
            With ``float32`` (scikit-learn's trees, XGBoost, CatBoost), the values rounded to float32 (they
            compare ``float32(x) <= threshold``: a value just above a threshold can go left); otherwise ``values``
            as they are (LightGBM's own reading of tiny values is the routing kernel's); with ``missing``,
            ``missing_value`` as NaN (``with_missing``).
        """
        values = values.astype(np.float32) if self.float32 else values
        return self.with_missing(values) if missing else values

    def with_missing(self, values: np.ndarray) -> np.ndarray:
        """``values`` with every value that ``missing_value`` makes missing (compared as the splits compare,
        in float32 with ``float32``) as NaN.

        Parameters
        ----------
        values : ndarray
            Feature values.

        Returns
        -------
        ndarray
            ``values`` itself when there is no ``missing_value``, else a copy of its dtype.
        """
        if self.missing_value is None:
            return values
        if self.float32:
            return np.where(np.asarray(values, dtype=np.float32) == np.float32(self.missing_value), np.nan, values)
        return np.where(values == self.missing_value, np.nan, values)

    def apply(self, X, num_trees: int | None = None, *, n_jobs: int | None = None) -> np.ndarray:
        """Leaf index reached in each of the first ``num_trees`` trees: int32[n_rows, num_trees] (as
        LightGBM's ``predict(pred_leaf=True)`` and scikit-learn's ``apply``, with leaves numbered per tree).

        Parameters
        ----------
        X : array-like of shape (n_rows, num_features)
            numpy array, scipy sparse matrix or pandas DataFrame.
        num_trees : int, optional
            Trees used (None: all).
        n_jobs : int, optional
            Threads (None: the CPUs this process may use).

        Returns
        -------
        ndarray of int32 of shape (n_rows, num_trees)
            The leaf each row reaches in each tree.
        """
        num_trees = self._num_trees(num_trees)
        parts = [self.flat.apply(rows, num_trees, resolve_n_jobs(n_jobs, len(rows))) for _, rows in self.row_blocks(X)]
        return np.concatenate(parts) if parts else np.zeros((0, num_trees), dtype=np.int32)

    def _num_trees(self, num_trees: int | None) -> int:
        if num_trees is None:
            return self.num_trees
        if not 0 <= num_trees <= self.num_trees:
            raise CEGBError(f"num_trees should be within 0..{self.num_trees}, got {num_trees}")
        return int(num_trees)

    def cost(self, X, lazy: np.ndarray, split: np.ndarray, num_trees: int | None = None, *,
             group_of: np.ndarray | None = None, group_lazy: np.ndarray | None = None, tree: float = 0.0,
             per_iteration: bool = False, n_jobs: int | None = None):
        """(acquisition, evaluation, rows using each feature then each group, total cost after each iteration
        or None): the kernel behind ``prediction_cost``, over X's row blocks. ``group_of``: each feature's group
        (-1: none), whose lazy cost ``group_lazy`` a row pays once; ``tree``: the cost of evaluating a tree.

        Parameters
        ----------
        X : array-like of shape (n_rows, num_features)
            numpy array, scipy sparse matrix or pandas DataFrame.
        lazy : ndarray of shape (num_features,)
            Each feature's lazy cost.
        split : ndarray of shape (num_features,)
            The cost of a split node on each feature.
        num_trees : int, optional
            Trees used (None: all).
        group_of : ndarray of int32 of shape (num_features,), optional
            Each feature's group, -1 for none (None: no groups).
        group_lazy : ndarray of shape (n_groups,), optional
            Each group's lazy cost, paid once per row.
        tree : float, default=0.0
            The cost of evaluating a tree, paid per row and tree.
        per_iteration : bool, default=False
            Also compute the total cost after each iteration.
        n_jobs : int, optional
            Threads (None: the CPUs this process may use).

        Returns
        -------
        acquisition : ndarray of shape (n_rows,)
            Each row's lazy costs.
        evaluation : ndarray of shape (n_rows,)
            Each row's split and tree costs.
        rows_using : ndarray of int64 of shape (num_features + n_groups,)
            The number of rows whose paths test each feature, then each group.
        curve : ndarray of shape (n_iterations,) or None
            The rows' total cost after each iteration (with ``per_iteration``; else None).
        """
        num_trees = self._num_trees(num_trees)
        lazy, split, group_of, group_lazy = self._cost_arrays(lazy, split, group_of, group_lazy)
        parts = [self.flat.cost(rows, num_trees, lazy, split, group_of, group_lazy, per_iteration,
                                resolve_n_jobs(n_jobs, len(rows))) for rows in self._cost_blocks(X)]
        if not parts:
            return np.zeros(0), np.zeros(0), np.zeros(self.num_features + len(group_lazy), dtype=np.int64), \
                (np.zeros(math.ceil(num_trees / self.trees_per_iteration)) if per_iteration else None)
        if len(parts) == 1:
            acquisition, evaluation, rows_using, curve = parts[0]
        else:
            acquisition = np.concatenate([p[0] for p in parts])
            evaluation = np.concatenate([p[1] for p in parts])
            rows_using = sum(p[2] for p in parts)
            curve = sum(p[3] for p in parts) if per_iteration else None
        if tree:
            evaluation += tree * num_trees
        if per_iteration and tree:
            trees_done = np.minimum(np.arange(1, len(curve) + 1) * self.trees_per_iteration, num_trees)
            curve = curve + tree * len(acquisition) * trees_done
        return acquisition, evaluation, rows_using, curve

    def prefix_cost(self, X, lazy: np.ndarray, split: np.ndarray, ends, *, group_of: np.ndarray | None = None,
                    group_lazy: np.ndarray | None = None, tree: float = 0.0, raw: bool = False,
                    n_jobs: int | None = None):
        """:meth:`cost` of several prefixes of the trees in one pass over them: for each ``ends[j]`` (increasing
        tree counts), the (acquisition, evaluation, rows_using) that ``cost(X, ..., num_trees=ends[j])`` gives, to the
        bit, and with ``raw`` the rows' raw scores after those trees (as :meth:`raw_score` computes them, so with
        the bits of LightGBM's ``predict(raw_score=True)``; not for linear trees).

        Parameters
        ----------
        X : array-like of shape (n_rows, num_features)
            numpy array, scipy sparse matrix or pandas DataFrame.
        lazy, split : ndarray of shape (num_features,)
            As :meth:`cost`.
        ends : sequence of int
            The prefixes' tree counts, increasing, each within 0..num_trees.
        group_of, group_lazy, tree
            As :meth:`cost`.
        raw : bool, default=False
            Also the raw scores after each prefix.
        n_jobs : int, optional
            Threads (None: the CPUs this process may use).

        Returns
        -------
        acquisition, evaluation : ndarray of shape (len(ends), n_rows)
            Each row's lazy costs, and its split and tree costs, after each prefix.
        rows_using : ndarray of int64 of shape (len(ends), num_features + n_groups)
            The rows whose paths test each feature, then each group, after each prefix.
        raw : ndarray of shape (len(ends), n_rows, trees_per_iteration) or None
            With ``raw``, the raw scores after each prefix.

        Raises
        ------
        CEGBError
            When ``ends`` is empty, does not increase or leaves 0..num_trees, or ``raw`` is asked of linear trees.
        """
        given = np.asarray(ends)
        ends = given.astype(np.int64) if given.dtype.kind in "iu" else given  # uint64 beyond int64: negative here
        if ends.ndim != 1 or not len(ends) or ends.dtype.kind != "i" or (np.diff(ends) <= 0).any() or \
                ends[0] < 0 or ends[-1] > self.num_trees:
            raise CEGBError(f"ends should be increasing tree counts within 0..{self.num_trees}, got {given.tolist()}")
        if raw and self.linear is not None:
            raise CEGBError("prefix_cost: the raw scores of linear trees read their leaves' features; use raw_score")
        lazy, split, group_of, group_lazy = self._cost_arrays(lazy, split, group_of, group_lazy)
        parts = [self.flat.prefix_cost(rows, ends, lazy, split, group_of, group_lazy, self.leaf_value,
                                       self.leaf_offset, raw, resolve_n_jobs(n_jobs, len(rows)))
                 for rows in self._cost_blocks(X)]
        width = self.num_features + len(group_lazy)
        if not parts:
            empty = np.zeros((len(ends), 0))
            return empty, empty.copy(), np.zeros((len(ends), width), dtype=np.int64), \
                (np.zeros((len(ends), 0, self.trees_per_iteration)) if raw else None)
        acquisition, evaluation, rows_using, scores = (parts[0] if len(parts) == 1 else (
            np.concatenate([p[0] for p in parts], axis=1), np.concatenate([p[1] for p in parts], axis=1),
            sum(p[2] for p in parts), np.concatenate([p[3] for p in parts], axis=1) if raw else None))
        if tree:
            for j, trees in enumerate(ends.tolist()):
                evaluation[j] += tree * trees
        return acquisition, evaluation, rows_using, scores

    def _cost_arrays(self, lazy, split, group_of, group_lazy) -> tuple[np.ndarray, ...]:
        """The cost kernels' arrays (no groups: every feature's group -1, none's lazy cost)."""
        lazy, split = np.ascontiguousarray(lazy, dtype=np.float64), np.ascontiguousarray(split, dtype=np.float64)
        group_of = np.full(self.num_features, -1, dtype=np.int32) if group_of is None else \
            np.ascontiguousarray(group_of, dtype=np.int32)
        group_lazy = np.zeros(0) if group_lazy is None else np.ascontiguousarray(group_lazy, dtype=np.float64)
        return lazy, split, group_of, group_lazy

    def _cost_blocks(self, X):
        """X as the cost kernels read it: a float64 numpy array as it is, anything else in row blocks."""
        if type(X) is np.ndarray and X.dtype == np.float64 and X.ndim == 2 and not self.float32:
            self.check_shape(X.shape)
            return [np.ascontiguousarray(X)]
        return (rows for _, rows in self.row_blocks(X))

    def checked_leaves(self, leaves) -> np.ndarray:
        """``leaves`` as C-contiguous int32[n_rows, trees used] or a clear error: leaves[i, t] must be a leaf of
        tree t (0 <= leaf < its leaf count), since the kernels index the leaf arrays with them unchecked.

        Parameters
        ----------
        leaves : array-like of int of shape (n_rows, trees used)
            The leaf of each row in each of the first trees.

        Returns
        -------
        ndarray of int32 of shape (n_rows, trees used)
            The leaves, C-contiguous.

        Raises
        ------
        CEGBError
            When ``leaves`` is not a 2-d array of integers of at most ``num_trees`` columns, or holds an index
            that is not a leaf of its tree.
        """
        arr = np.asarray(leaves)
        if arr.ndim != 2 or arr.shape[1] > self.num_trees:
            raise CEGBError(f"leaves should be a 2-d array of shape (rows, trees used <= {self.num_trees}), "
                            f"got shape {arr.shape}")
        if arr.dtype.kind not in "iu" and arr.size:
            raise CEGBError(f"leaves should hold integers (leaf indices), got {arr.dtype} values")
        if arr.size:
            counts = np.diff(self.leaf_offset)[:arr.shape[1]]
            bad = (arr < 0) | (arr >= counts)
            if bad.any():
                row, t = (int(k) for k in np.argwhere(bad)[0])
                raise CEGBError(f"leaves[{row}, {t}] should be a leaf of tree {t} (0..{int(counts[t]) - 1}), "
                                f"got {arr[row, t]}")
        return np.ascontiguousarray(arr, dtype=np.int32)

    def leaf_values(self, X, leaves: np.ndarray) -> np.ndarray:
        """Each tree's output for each row, given the leaves the rows reach: float64[n_rows, num_trees]
        (linear leaves included; LightGBM's fallback to the leaf value where a linear feature is NaN).

        Parameters
        ----------
        X : array-like of shape (n_rows, num_features)
            The rows (read for linear trees only).
        leaves : ndarray of int of shape (n_rows, trees used)
            The leaf each row reaches in each of the first trees (checked by :meth:`checked_leaves`).

        Returns
        -------
        ndarray of shape (n_rows, trees used)
            Each tree's output for each row.
        """
        leaves = self.checked_leaves(leaves)
        index = self.leaf_offset[:leaves.shape[1]] + leaves
        values = self.leaf_value[index]
        if self.linear is not None:
            values = self._linear_values(self.dense(X), index, values)
        return values

    def raw_score(self, X, leaves: np.ndarray, *, averaged: bool = False, values: np.ndarray | None = None,
                  n_jobs: int | None = None) -> np.ndarray:
        """Raw score of rows X that reach ``leaves`` (int32[n_rows, trees used]): float64[n_rows,
        trees_per_iteration], computed as LightGBM's GBDT::PredictRaw does (the trees' outputs added in tree
        order from 0.0), so with the same bits as ``predict(raw_score=True)``. ``averaged``: as GBDT::Predict
        continues for rf models, divided by the number of iterations (the score its objective transforms).
        X is read for linear trees only, unless ``values`` gives the trees' outputs (``leaf_values``) already.

        Parameters
        ----------
        X : array-like of shape (n_rows, num_features)
            The rows (read for linear trees only, without ``values``).
        leaves : ndarray of int of shape (n_rows, trees used)
            The leaf each row reaches in each of the first trees.
        averaged : bool, default=False
            Divide by the number of iterations when the model averages its outputs (``average_output``).
        values : ndarray of shape (n_rows, trees used), optional
            The trees' outputs, as :meth:`leaf_values` gives them.
        n_jobs : int, optional
            Threads (None: the CPUs this process may use).

        Returns
        -------
        ndarray of shape (n_rows, trees_per_iteration)
            The raw scores.

        Raises
        ------
        CEGBError
            When ``leaves`` is not valid (see :meth:`checked_leaves`) or ``values`` is not numbers of its
            shape.
        """
        leaves = self.checked_leaves(leaves)
        if values is None:
            values = self.leaf_values(X, leaves) if self.linear is not None else np.zeros((0, 0))
        else:
            values = np.asarray(values)
            if values.shape != leaves.shape or values.dtype.kind not in "iuf":
                raise CEGBError(f"values should be numbers of shape {leaves.shape} (one per row and tree of "
                                f"leaves), got {values.dtype} values of shape {values.shape}")
        return raw_scores(leaves, self.leaf_offset, self.leaf_value, np.ascontiguousarray(values, dtype=np.float64),
                          self.trees_per_iteration, averaged and self.average_output,
                          resolve_n_jobs(n_jobs, len(leaves)))

    def _linear_values(self, X: np.ndarray, index: np.ndarray, fallback: np.ndarray) -> np.ndarray:
        lin = self.linear
        out = lin["leaf_const"][index].copy()
        for row, t in np.ndindex(*index.shape):
            k = index[row, t]
            feats = lin["features"][lin["indptr"][k]:lin["indptr"][k + 1]]
            x = X[row, feats]
            if np.isnan(x).any():
                out[row, t] = fallback[row, t]
            else:
                out[row, t] += float(np.dot(lin["coeff"][lin["indptr"][k]:lin["indptr"][k + 1]], x))
        return out

    # ------------------------------------------------------------------------------------- rewriting

    def trees(self, start: int, stop: int) -> Forest:
        """The forest of trees ``start`` to ``stop`` - 1 (whole iterations): each routes and scores as it does here.

        Parameters
        ----------
        start, stop : int
            The first tree and one past the last, multiples of the trees of an iteration, 0 <= start < stop <=
            num_trees.

        Returns
        -------
        Forest
            Those trees, with their statistics; the category bitsets' words are shared (all of them kept).

        Raises
        ------
        CEGBError
            For linear trees, or bounds that are not whole iterations within the forest.
        """
        per = self.trees_per_iteration * self.parallel_trees
        if not (0 <= start < stop <= self.num_trees and start % per == 0 and stop % per == 0):
            raise CEGBError(f"trees: start and stop should be whole iterations ({per} trees each) with 0 <= start < "
                            f"stop <= {self.num_trees}, got {start} and {stop}")
        if self.linear is not None:
            raise CEGBError("trees: slicing linear trees (linear_tree=True) is not supported")
        n0, n1 = int(self.node_offset[start]), int(self.node_offset[stop])
        l0, l1 = int(self.leaf_offset[start]), int(self.leaf_offset[stop])
        c0, c1 = int(self.cat_offset[start]), int(self.cat_offset[stop])

        def part(values, a, b):
            return None if values is None else values[a:b]
        return Forest(
            node_offset=self.node_offset[start:stop + 1] - n0, feature=self.feature[n0:n1],
            threshold=self.threshold[n0:n1], decision=self.decision[n0:n1], left=self.left[n0:n1],
            right=self.right[n0:n1], leaf_offset=self.leaf_offset[start:stop + 1] - l0,
            leaf_value=self.leaf_value[l0:l1], cat_offset=self.cat_offset[start:stop + 1] - c0,
            cat_boundaries=self.cat_boundaries[c0:c1], cat_threshold=self.cat_threshold,
            num_features=self.num_features, trees_per_iteration=self.trees_per_iteration,
            parallel_trees=self.parallel_trees, feature_names=self.feature_names, average_output=self.average_output,
            drop_tiny=self.drop_tiny, float32=self.float32, missing_value=self.missing_value,
            sparse_missing=self.sparse_missing, params=dict(self.params),
            internal_value=part(self.internal_value, n0, n1), internal_weight=part(self.internal_weight, n0, n1),
            internal_count=part(self.internal_count, n0, n1), split_gain=part(self.split_gain, n0, n1),
            leaf_weight=part(self.leaf_weight, l0, l1), leaf_count=part(self.leaf_count, l0, l1),
            shrinkage=part(self.shrinkage, start, stop), pandas_categorical=self.pandas_categorical,
            objective=self.objective)

    def cut(self, leaves: list[np.ndarray]) -> Forest:
        """The forest with each tree cut at its new leaves: ``leaves[t]`` marks, in tree t's one numbering,
        the nodes that become the leaves of the cut tree (exactly one on every root-to-leaf path). A split
        node that becomes a leaf takes its internal value, weight and count; kept split nodes keep their
        order, new leaves are numbered in their order in the one numbering. Linear trees are refused.

        Parameters
        ----------
        leaves : list of ndarray of bool
            One mask per tree: ``leaves[t]``, of shape ``(tree_size(t),)``, marks the nodes of tree t that
            become leaves.

        Returns
        -------
        Forest
            The cut forest.

        Raises
        ------
        CEGBError
            For linear trees, a mask of the wrong shape, a cut that does not hold exactly one node of every
            root-to-leaf path, or a split node made a leaf without the forest's internal values.
        """
        if self.linear is not None:
            raise CEGBError("cutting linear trees (linear_tree=True) is not supported")
        node_parts: dict[str, list] = {k: [] for k in ("feature", "threshold", "decision", "left", "right",
                                                       "internal_value", "internal_weight", "internal_count",
                                                       "split_gain")}
        leaf_parts: dict[str, list] = {k: [] for k in ("leaf_value", "leaf_weight", "leaf_count")}
        node_offset, leaf_offset, cat_offset, cat_parts, words, num_words = [0], [0], [0], [], [], 0
        for t, leaf in enumerate(leaves):
            parent = self.parents(t)
            leaf = np.asarray(leaf, dtype=bool)
            if leaf.shape != parent.shape:
                raise CEGBError(f"leaves[{t}] should mark the {len(parent)} nodes of tree {t}, got {leaf.shape}")
            n = (len(parent) - 1) // 2
            try:
                kept = kept_nodes(parent, leaf)
            except CEGBError as exc:
                raise CEGBError(f"leaves[{t}]: {exc}") from None
            internal = np.flatnonzero(kept[:n] & ~leaf[:n])
            new_leaves = np.flatnonzero(leaf)
            new_id = np.zeros(len(leaf), dtype=np.int64)
            new_id[internal] = np.arange(len(internal))
            new_id[new_leaves] = ~np.arange(len(new_leaves))
            s, s1 = int(self.node_offset[t]), int(self.node_offset[t + 1])
            for key in ("feature", "threshold", "decision"):
                node_parts[key].append(getattr(self, key)[s:s1][internal])
            # the kept categorical splits' bitsets, renumbered in node order (as LightGBM numbers them)
            categorical = (node_parts["decision"][-1] & CATEGORICAL).astype(bool)
            c0 = int(self.cat_offset[t])
            old = c0 + np.trunc(node_parts["threshold"][-1][categorical]).astype(np.int64)
            starts, stops = self.cat_boundaries[old], self.cat_boundaries[old + 1]
            node_parts["threshold"][-1][categorical] = np.arange(len(old))
            if len(old):
                cat_parts.append(np.concatenate([[0], np.cumsum(stops - starts)]) + num_words)
                words.extend(self.cat_threshold[a:b] for a, b in zip(starts, stops))
                num_words += int((stops - starts).sum())
            cat_offset.append(cat_offset[-1] + (len(old) + 1 if len(old) else 0))
            for key, children in (("left", self.left[s:s1]), ("right", self.right[s:s1])):
                ids = children[internal].astype(np.int64)
                node_parts[key].append(new_id[np.where(ids >= 0, ids, n + ~ids)])
            l0, l1 = int(self.leaf_offset[t]), int(self.leaf_offset[t + 1])
            for leaf_key, node_key in (("leaf_value", "internal_value"), ("leaf_weight", "internal_weight"),
                                       ("leaf_count", "internal_count")):
                node_stat, leaf_stat = getattr(self, node_key), getattr(self, leaf_key)
                if leaf_key == "leaf_value" and node_stat is None and (new_leaves < n).any():
                    raise CEGBError("cutting a split node into a leaf needs the forest's internal values")
                if leaf_stat is not None and (node_stat is not None or not (new_leaves < n).any()):
                    both = np.concatenate([node_stat[s:s1] if node_stat is not None else np.zeros(n),
                                           leaf_stat[l0:l1]])
                    leaf_parts[leaf_key].append(both[new_leaves])
                else:
                    leaf_parts[leaf_key].append(None)
            for key in ("internal_value", "internal_weight", "internal_count", "split_gain"):
                values = getattr(self, key)
                node_parts[key].append(None if values is None else values[s:s1][internal])
            node_offset.append(node_offset[-1] + len(internal))
            leaf_offset.append(leaf_offset[-1] + len(new_leaves))

        def join(parts, dtype=np.float64):
            if any(p is None for p in parts):
                return None
            return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)

        return Forest(
            node_offset=np.asarray(node_offset), feature=join(node_parts["feature"], np.int32),
            threshold=join(node_parts["threshold"]), decision=join(node_parts["decision"], np.uint8),
            left=join(node_parts["left"], np.int32), right=join(node_parts["right"], np.int32),
            leaf_offset=np.asarray(leaf_offset), leaf_value=join(leaf_parts["leaf_value"]),
            cat_offset=np.asarray(cat_offset), cat_boundaries=join(cat_parts, np.int64),
            cat_threshold=join(words, np.uint32), num_features=self.num_features,
            trees_per_iteration=self.trees_per_iteration, parallel_trees=self.parallel_trees,
            feature_names=self.feature_names, average_output=self.average_output, drop_tiny=self.drop_tiny,
            float32=self.float32, missing_value=self.missing_value, sparse_missing=self.sparse_missing,
            params=dict(self.params),
            internal_value=join(node_parts["internal_value"]), internal_weight=join(node_parts["internal_weight"]),
            internal_count=join(node_parts["internal_count"]), split_gain=join(node_parts["split_gain"]),
            leaf_weight=join(leaf_parts["leaf_weight"]), leaf_count=join(leaf_parts["leaf_count"]),
            shrinkage=self.shrinkage, pandas_categorical=self.pandas_categorical,
            text_header=self.text_header, text_footer=self.text_footer)


def kept_nodes(parent: np.ndarray, leaf: np.ndarray) -> np.ndarray:
    """Nodes of a tree cut at ``leaf`` (parents numbered first): the new leaves and all their ancestors;
    a clear error unless every original leaf has exactly one new leaf on its root path.

    Parameters
    ----------
    parent : ndarray of int
        The parent of each node in the tree's one numbering (-1 at the root), as :meth:`Forest.parents`.
    leaf : ndarray of bool
        The nodes that become leaves.

    Returns
    -------
    ndarray
        Per node: whether the cut tree keeps it.

    Raises
    ------
    CEGBError
        When the new leaves do not hold exactly one node of every root-to-leaf path.
    """
    above, below = path_marks(np.ascontiguousarray(parent, dtype=np.int64),
                              np.ascontiguousarray(leaf, dtype=np.uint8))
    n = (len(parent) - 1) // 2
    if (above[n:] != 1).any():
        raise CEGBError("the new leaves should hold exactly one node of every root-to-leaf path")
    return below
