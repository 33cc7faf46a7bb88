"""The cost model of cost-efficient gradient boosting (CEGB: S. Peter, F. Diego, F. A. Hamprecht and B. Nadler,
"Cost efficient gradient boosting", NIPS 2017): per-instance (lazy) and per-model (coupled) feature costs and an
evaluation cost per split node.

Its length: one class, FeatureCosts, with every form the cost model itself takes (arrays, names, groups, the
patched LightGBM's ``cegb_*`` parameters and back, the plain lists of a saved manifest), and the one resolver
(``resolve_costs``) with its policy for no costs (``UNPRICED``); each form builds or reads the same checked state
(aligned, finite, non-negative costs), which would otherwise be checked in several modules. Text formats are
read above the ground floor (cost files: ``lightgbm_cegb.datasets.cost_files``).
"""

from __future__ import annotations

import math
import sys
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import NamedTuple
from urllib.parse import quote, unquote

import numpy as np

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.validation import known_names

CEGB_KEYS = ("cegb_penalty_feature_lazy", "cegb_penalty_feature_coupled", "cegb_penalty_split",
             "cegb_penalty_feature_split", "cegb_feature_group", "cegb_penalty_group_lazy",
             "cegb_penalty_group_coupled")
GROUP_KEYS = ("cegb_feature_group", "cegb_penalty_group_lazy", "cegb_penalty_group_coupled")
#: The names of the groups 0..G-1 of cegb_feature_group, which LightGBM numbers: not a LightGBM parameter (a
#: model text holds them in its own line, see ``lightgbm_cegb.io.lightgbm_text.with_group_names``)
GROUP_NAMES_KEY = "cegb_group_names"


def encode_group_names(names: Sequence[str]) -> str:
    """Group names as one comma-separated value, each percent-encoded (so that no name can hold a comma, a
    colon, a bracket, a space or a line break).

    Parameters
    ----------
    names : sequence of str
        The group names.

    Returns
    -------
    str
        The encoded names, comma-separated.
    """
    return ",".join(quote(str(name), safe="") for name in names)


def decode_group_names(value) -> list[str]:
    """The names :func:`encode_group_names` wrote (or a list of names as they are).

    Parameters
    ----------
    value : str or sequence of str
        The encoded string, or a list of names.

    Returns
    -------
    list of str
        The group names.

    Raises
    ------
    CEGBError
        When ``value`` is neither a string nor a sequence of names.
    """
    if isinstance(value, str):
        return [unquote(name) for name in value.split(",")]
    if isinstance(value, Sequence) and not isinstance(value, bytes):
        return [str(name) for name in value]
    raise CEGBError(f"{GROUP_NAMES_KEY} should be a list of group names or their encoded string, got "
                    f"{type(value).__name__}")


def _is_lightgbm_dataset(features) -> bool:
    """Whether ``features`` is a lightgbm Dataset (without importing LightGBM: the core does not depend on it; a
    Dataset exists only where lightgbm was imported)."""
    lgb = sys.modules.get("lightgbm")
    return lgb is not None and isinstance(features, lgb.Dataset)


def _feature_names(features) -> list[str]:
    """Names from a list of names, a pandas DataFrame, or a lightgbm Dataset (constructed or not)."""
    if _is_lightgbm_dataset(features):
        if features._handle is not None:  # constructed: LightGBM's own names
            return list(features.get_feature_name())
        data = features.data
        if hasattr(data, "columns"):
            return [str(c) for c in data.columns]
        if isinstance(features.feature_name, Sequence) and not isinstance(features.feature_name, str):
            return list(features.feature_name)
        return [f"Column_{i}" for i in range(np.shape(data)[1])]
    if hasattr(features, "columns"):
        return [str(c) for c in features.columns]
    if isinstance(features, (str, bytes)) or not isinstance(features, Sequence):
        raise CEGBError(f"features should be a list of names, a pandas DataFrame or a lightgbm Dataset, "
                        f"got {type(features).__name__}")
    names = [str(n) for n in features]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise CEGBError(f"feature names should be unique, got duplicates {duplicated}")
    return names


def _numbers(name: str, values) -> np.ndarray:
    """``values`` (a number or a sequence of numbers) as float64; a CEGBError naming the costs ``name`` when they
    are not numbers (a string such as "1.5€", None, a complex number, a set)."""
    try:
        if values is None:
            raise TypeError("None is not a number")
        with warnings.catch_warnings():
            warnings.simplefilter("error", np.exceptions.ComplexWarning)  # 1j would lose its imaginary part
            return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, np.exceptions.ComplexWarning) as exc:
        raise CEGBError(f"{name} costs should be numbers, got {values!r:.80} ({exc})") from None


def _check_values(name: str, values: np.ndarray, what: str = "feature") -> np.ndarray:
    bad = ~np.isfinite(values) | (values < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise CEGBError(f"{name} costs should be finite and >= 0, got {float(values[i])!r} for {what} {i}")
    return values


def _groups_input(groups) -> tuple[dict[str, list] | None, int | None, int | None]:
    """({group name: members (column indices or feature names)}, the number of features and the number of
    group ids (the largest + 1) when groups came as one id per feature). Only the ids that occur become
    groups (named by their id, in increasing order): the ids are labels, so memory and time are
    O(features + groups present) whatever their values (a model file may say 2e9)."""
    if groups is None:
        return None, None, None
    if isinstance(groups, Mapping):
        out: dict[str, list] = {}
        owner: dict = {}
        for name, members in groups.items():
            if isinstance(members, (str, bytes)) or np.ndim(members) == 0:
                members = [members]
            keyed = []
            for member in members:
                if isinstance(member, (int, np.integer)) and not isinstance(member, bool):
                    member = int(member)
                    if member < 0:
                        raise CEGBError(f"groups: group {name!r} names column {member}; columns are >= 0")
                else:
                    member = str(member)
                if member in owner:
                    raise CEGBError(f"groups: feature {member!r} is in two groups, {owner[member]!r} and {name!r}")
                owner[member] = name
                keyed.append(member)
            out[str(name)] = keyed
        return out, None, None
    ids = np.asarray(groups)
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        raise CEGBError("groups should be a mapping from group name to its features, or one integer group id per "
                        f"feature (-1: no group), got {type(groups).__name__} of dtype {ids.dtype} and shape "
                        f"{ids.shape}")
    if ids.size and ids.min() < -1:
        raise CEGBError(f"groups: ids should be >= 0, or -1 for no group, got {int(ids.min())} for feature "
                        f"{int(np.argmin(ids))}")
    ids = ids.astype(np.int64)
    grouped = np.flatnonzero(ids >= 0)
    by_id = grouped[np.argsort(ids[grouped], kind="stable")]  # members of a group stay in column order
    present, starts = np.unique(ids[by_id], return_index=True)
    members = np.split(by_id, starts[1:]) if by_id.size else []
    out = {str(int(g)): m.tolist() for g, m in zip(present, members)}
    return out, len(ids), (int(present[-1]) + 1 if present.size else 0)


def _group_costs(kind: str, values, names: list[str] | None, num_ids: int | None = None) -> np.ndarray | None:
    """One cost per group, in the groups' order, from a sequence or a mapping by group name (others: 0).
    Groups given as ids (``num_ids``: the largest id + 1): a sequence has one value per id 0..num_ids - 1, as
    LightGBM's cegb_penalty_group_* (the values of the ids that occur are kept), and a mapping may name an id
    that no feature has (its cost is never paid)."""
    if values is None:
        return None
    if names is None:
        raise CEGBError(f"{kind} costs need groups (groups=...)")
    if _is_named_series(values):
        values = dict(zip(map(str, values.index), values.to_numpy()))
    if num_ids is not None and not isinstance(values, Mapping):
        arr = _numbers(kind, values)
        if arr.ndim != 1 or len(arr) != num_ids:
            raise CEGBError(f"{kind} costs should have one value per group id 0..{num_ids - 1} ({num_ids} values, "
                            f"the largest id + 1), got shape {arr.shape}")
        _check_values(kind, arr, "group")  # every id's value, as LightGBM checks them
        return arr[np.array([int(name) for name in names], dtype=np.int64)].copy()
    if isinstance(values, Mapping):
        known = set(names)
        if num_ids is not None:
            known |= {str(k) for k in values if str(k).isdigit() and int(str(k)) < num_ids}
        unknown = sorted(set(map(str, values)) - known)
        if unknown:
            raise CEGBError(f"{kind} costs name unknown groups {unknown}; " + known_names(unknown, names, "groups"))
        values = {str(k): v for k, v in values.items()}
        arr = _numbers(kind, [values.get(name, 0.0) for name in names])
    else:
        arr = _numbers(kind, values)
        if arr.ndim != 1 or len(arr) != len(names):
            raise CEGBError(f"{kind} costs should have one value per group ({len(names)}), got shape {arr.shape}")
    return _check_values(kind, arr.copy(), "group")


def lightgbm_feature_name(name: str) -> str:
    """The name LightGBM gives a feature called ``name``: its spaces become underscores.

    Parameters
    ----------
    name : str
        The feature's name.

    Returns
    -------
    str
        The name as LightGBM holds it.
    """
    return name.replace(" ", "_")


def lightgbm_feature_names(names: Sequence[str]) -> list[str]:
    """``names`` as LightGBM holds them (spaces as underscores, which it warns about), for a Dataset's
    ``feature_name``; CEGBError for names a LightGBM model cannot hold: with a character it refuses
    (``"`` ``,`` ``:`` ``[`` ``]`` ``{`` ``}``) or one that would split its ``feature_names`` line, empty, or the
    same as another once renamed.

    Parameters
    ----------
    names : sequence of str
        The feature names.

    Returns
    -------
    list of str
        The names as LightGBM holds them.

    Raises
    ------
    CEGBError
        For names a LightGBM model cannot hold (see above).
    """
    out = [lightgbm_feature_name(str(name)) for name in names]
    bad = [name for name in out if not name or any(c in '",:[]{}' or c.isspace() for c in name)]
    if bad:
        raise CEGBError(f"feature names: a LightGBM model holds names without the characters \" , : [ ] {{ }}, "
                        f"tabs or line breaks, and not empty; got {bad[:5]}: rename these columns")
    duplicated = sorted(name for name, count in Counter(out).items() if count > 1)
    if duplicated:
        raise CEGBError(f"feature names: LightGBM writes spaces as underscores, which makes names the same: "
                        f"{duplicated[:5]}; rename these columns")
    return out


def _is_named_series(values) -> bool:
    """A pandas Series whose index names features (not the default 0..n-1 positions)."""
    index = getattr(values, "index", None)
    if index is None or not hasattr(values, "to_numpy") or getattr(values, "ndim", 0) != 1:
        return False
    return not (index.dtype.kind in "iu" and (np.asarray(index) == np.arange(len(index))).all())


class FeatureCosts:
    """Prediction-cost model of a tree ensemble.

    Parameters
    ----------
    lazy : array-like or mapping, optional
        Per-instance acquisition cost of each feature: paid once per row that needs the feature. An array
        (by column index) or a mapping from feature name to cost (features not named cost 0).
    coupled : array-like or mapping, optional
        Per-model cost of each feature: paid once if any split of the model uses it.
    split : float or array-like, default=0.0
        Cost of evaluating one split node (an array: per feature tested, CEGB's multi-scale variant).
    groups : mapping or array-like, optional
        Features whose costs are shared: a mapping from group name to its members (feature names or column
        indices; a feature in two groups is an error), or one integer group id per column (-1: none). Ids are
        labels: the groups are the ids that occur, named by their id (``"7"``), in increasing order.
    group_lazy, group_coupled : array-like or mapping, optional
        Cost of each group (in the order of ``groups``, or a mapping by group name; with ids, as LightGBM's
        ``cegb_penalty_group_*``, one value per id 0..largest id), paid once by the first
        use of any member: per row (lazy) or per model (coupled). Members' own costs are paid on top
        (Greedy Miser's Scene-15 costs: a descriptor's extraction, then each classifier on it).
    tree : float, default=0.0
        Cost of evaluating one tree, paid per row for every tree the row goes through (Greedy Miser's and
        CSTC's evaluation cost ``e``). Not a training penalty: it is in the accounting only.

    Raises
    ------
    CEGBError
        When a cost is negative or not finite, when the arrays give different numbers of features, or when
        ``groups`` is malformed (a feature in two groups, a negative column or id) or group costs are given
        without groups.

    See Also
    --------
    prediction_cost : The prediction cost of a model under these costs.

    Examples
    --------
    >>> costs = FeatureCosts(lazy={"age": 1.0, "mri": 50.0}).align(["age", "bmi", "mri"])
    >>> costs.lazy
    array([ 1.,  0., 50.])
    >>> costs.to_params(tradeoff=0.1)["cegb_penalty_feature_lazy"]
    [1.0, 0.0, 50.0]
    """

    def __init__(self, lazy=None, coupled=None, split=0.0, *, groups=None, group_lazy=None, group_coupled=None,
                 tree: float = 0.0):
        self._lazy = self._input("lazy", lazy)
        self._coupled = self._input("coupled", coupled)
        self._groups, self._groups_length, num_ids = _groups_input(groups)
        names = None if self._groups is None else list(self._groups)
        self._group_lazy = _group_costs("group_lazy", group_lazy, names, num_ids)
        self._group_coupled = _group_costs("group_coupled", group_coupled, names, num_ids)
        split_arr = _numbers("split", split)
        if split_arr.ndim > 1:
            raise CEGBError(f"split should be a number or one value per feature, got shape {split_arr.shape}")
        self._split = _check_values("split", split_arr.reshape(-1)).reshape(split_arr.shape)
        try:
            self._tree = float(tree)
        except (TypeError, ValueError):
            self._tree = math.nan
        if not (math.isfinite(self._tree) and self._tree >= 0):
            raise CEGBError(f"tree (the cost of evaluating one tree) should be a finite number >= 0, got {tree!r}")
        lengths = {len(v) for v in (self._lazy, self._coupled, self._split.reshape(-1) if self._split.ndim else None)
                   if isinstance(v, np.ndarray)} | ({self._groups_length} if self._groups_length is not None else set())
        if len(lengths) > 1:
            raise CEGBError(f"lazy, coupled, split and groups should give the same number of features, got "
                            f"{sorted(lengths)}")

    @staticmethod
    def _input(name: str, values):
        if values is None:
            return None
        if _is_named_series(values):  # a pandas Series by feature name: its index, not its order
            values = dict(zip(map(str, values.index), values.to_numpy()))
        if isinstance(values, Mapping):
            out = {}
            for key, value in values.items():
                cost = _numbers(f"{name} ({key!r})", value)
                if cost.ndim:
                    raise CEGBError(f"{name} costs by name should be one number per feature, got {value!r:.40} "
                                    f"for feature {key!r}")
                if not (math.isfinite(cost) and cost >= 0):
                    raise CEGBError(f"{name} costs should be finite and >= 0, got {float(cost)!r} for feature {key!r}")
                out[str(key)] = float(cost)
            return out
        arr = _numbers(name, values)
        if arr.ndim != 1:
            raise CEGBError(f"{name} should be one value per feature, got an array of shape {arr.shape}")
        return _check_values(name, arr.copy())

    # ------------------------------------------------------------------------------------ alignment

    @property
    def num_features(self) -> int | None:
        """Number of features, or None while costs are given by name and not aligned."""
        for v in (self._lazy, self._coupled):
            if isinstance(v, np.ndarray):
                return len(v)
        return len(self._split) if self._split.ndim else self._groups_length

    @property
    def is_aligned(self) -> bool:
        """Whether every cost and group member is given by column (not by feature name)."""
        return not isinstance(self._lazy, dict) and not isinstance(self._coupled, dict) and \
            not any(isinstance(m, str) for members in (self._groups or {}).values() for m in members)

    def align(self, features) -> FeatureCosts:
        """Costs as arrays in the column order of ``features`` (names, DataFrame or lightgbm Dataset).

        A name given with spaces matches LightGBM's renamed feature (spaces become underscores); features not
        named cost 0.

        Parameters
        ----------
        features : list of str, pandas.DataFrame or lightgbm.Dataset
            The features, in column order (a DataFrame's columns; a Dataset's names).

        Returns
        -------
        FeatureCosts
            New, aligned costs (by column).

        Raises
        ------
        CEGBError
            When a cost or group names an unknown feature, when costs by column have another length, or when
            the names are not unique.
        """
        names = _feature_names(features)

        def by_name(kind, values):
            if not isinstance(values, dict):
                if isinstance(values, np.ndarray) and len(values) != len(names):
                    raise CEGBError(f"{kind} costs have {len(values)} values but there are {len(names)} features")
                return values
            index = {n: i for i, n in enumerate(names)}
            out = np.zeros(len(names))
            unknown = []
            for key, value in values.items():
                # LightGBM writes a feature name's spaces as underscores (Dataset::set_feature_names)
                i = index.get(key, index.get(lightgbm_feature_name(key)))
                if i is None:
                    unknown.append(key)
                else:
                    out[i] = value
            if unknown:
                raise CEGBError(f"{kind} costs name unknown features {sorted(unknown)}; "
                                + known_names(sorted(unknown), names))
            return out

        split = self._split
        if split.ndim and len(split) != len(names):
            raise CEGBError(f"split costs have {len(split)} values but there are {len(names)} features")
        groups = None
        if self._groups is not None:
            if self._groups_length not in (None, len(names)):
                raise CEGBError(f"groups give {self._groups_length} features but there are {len(names)}")
            index = {n: i for i, n in enumerate(names)}
            groups, unknown = {}, []
            for group, members in self._groups.items():
                groups[group] = []
                for member in members:
                    i = (member if isinstance(member, int)
                         else index.get(member, index.get(lightgbm_feature_name(member))))
                    if i is None or i >= len(names):
                        unknown.append(member)
                    else:
                        groups[group].append(i)
            if unknown:
                raise CEGBError(f"groups name unknown features {unknown}; " + known_names(unknown, names))
        aligned = FeatureCosts(by_name("lazy", self._lazy), by_name("coupled", self._coupled), split, groups=groups,
                               group_lazy=self._group_lazy, group_coupled=self._group_coupled, tree=self._tree)
        if groups is not None:  # aligned costs know their number of features, even with groups only
            aligned._groups_length = len(names)
        return aligned

    def _require_aligned(self, num_features: int | None = None) -> None:
        if not self.is_aligned:
            raise CEGBError("costs are given by feature name: call .align(feature names, DataFrame or Dataset) "
                            "first")
        if num_features is not None and self.num_features not in (None, num_features):
            raise CEGBError(f"costs are for {self.num_features} features but the model has {num_features}")

    @property
    def lazy(self):
        """Per-instance costs: an array, a mapping by name (before ``align``), or None."""
        return self._lazy

    @property
    def coupled(self):
        """Per-model costs: an array, a mapping by name (before ``align``), or None."""
        return self._coupled

    @property
    def split(self) -> np.ndarray:
        """Cost per split node: a 0-d array, or one value per feature."""
        return self._split

    @property
    def tree(self) -> float:
        """Cost of evaluating one tree (per row and tree)."""
        return self._tree

    def arrays(self, num_features: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lazy, coupled, split) as float64 arrays of ``num_features`` values (absent costs are 0).

        Parameters
        ----------
        num_features : int
            The model's number of features.

        Returns
        -------
        lazy : ndarray of shape (num_features,)
            Per-instance costs.
        coupled : ndarray of shape (num_features,)
            Per-model costs.
        split : ndarray of shape (num_features,)
            Cost per split node on each feature.

        Raises
        ------
        CEGBError
            When the costs are given by name (call :meth:`align` first) or are for another number of
            features.
        """
        memo = self._memo()
        if ("arrays", num_features) not in memo:  # the costs never change: computed once per number of features
            self._require_aligned(num_features)
            zeros = np.zeros(num_features)
            lazy = zeros if self._lazy is None else self._lazy
            coupled = zeros if self._coupled is None else self._coupled
            memo["arrays", num_features] = (lazy, coupled,
                                            np.broadcast_to(self._split, (num_features,)).astype(np.float64))
        return memo["arrays", num_features]

    @property
    def groups(self) -> dict[str, list] | None:
        """{group name: members (column indices; names before ``align``)}, or None."""
        return None if self._groups is None else {k: list(v) for k, v in self._groups.items()}

    def group_arrays(self, num_features: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(group of each feature as int32, -1 for none; lazy and coupled cost of each group), the groups in
        the order of ``groups``.

        Parameters
        ----------
        num_features : int
            The model's number of features.

        Returns
        -------
        group_of : ndarray of int32 of shape (num_features,)
            Each feature's group (its index in :attr:`groups`), -1 for none.
        group_lazy : ndarray of shape (n_groups,)
            Each group's lazy cost (0 when absent).
        group_coupled : ndarray of shape (n_groups,)
            Each group's coupled cost (0 when absent).

        Raises
        ------
        CEGBError
            When the costs are given by name, are for another number of features, or a group names a column
            beyond ``num_features``.
        """
        memo = self._memo()
        if ("group_arrays", num_features) not in memo:
            self._require_aligned(num_features)
            group_of = np.full(num_features, -1, dtype=np.int32)
            for g, members in enumerate((self._groups or {}).values()):
                for member in members:
                    if member >= num_features:
                        raise CEGBError(f"groups: column {member} is beyond the model's {num_features} features")
                    group_of[member] = g
            zeros = np.zeros(len(self._groups or {}))
            memo["group_arrays", num_features] = (group_of, zeros if self._group_lazy is None else self._group_lazy,
                                                  zeros if self._group_coupled is None else self._group_coupled)
        return memo["group_arrays", num_features]

    def _memo(self) -> dict:
        """What :meth:`arrays` and :meth:`group_arrays` computed, by number of features (the arrays are shared:
        never write into them)."""
        return self.__dict__.setdefault("_arrays_memo", {})

    def units(self, num_features: int) -> list[tuple[str | None, tuple[int, ...], float]]:
        """What one purchase buys, with its nominal price per row: each group with a member (its name, its columns),
        then each feature in no group (None, its column). The price is the lazy cost (a group's own plus its
        members'); when no feature or group has a lazy cost, the coupled cost (likewise).

        Parameters
        ----------
        num_features : int
            The model's number of features.

        Returns
        -------
        list of (str or None, tuple of int, float)
            (group name or None, columns, price) of each unit, groups first in their order.
        """
        lazy, coupled, _ = self.arrays(num_features)
        group_of, group_lazy, group_coupled = self.group_arrays(num_features)
        own, group_own = (lazy, group_lazy) if lazy.any() or group_lazy.any() else (coupled, group_coupled)
        found = [(name, tuple(int(f) for f in np.flatnonzero(group_of == g)), float(group_own[g] +
                                                                                   own[group_of == g].sum()))
                 for g, name in enumerate(self._groups or {}) if (group_of == g).any()]
        return found + [(None, (int(f),), float(own[f])) for f in np.flatnonzero(group_of < 0)]

    def penalised(self, num_features: int, *, split: bool = True) -> np.ndarray:
        """The features whose use costs something: a lazy or coupled cost of their own or of their group, or (with
        ``split``) a split cost. A trade-off weighs nothing else: a model that reads only the other features is
        free.

        Parameters
        ----------
        num_features : int
            The model's number of features.
        split : bool, default=True
            Whether split costs count (a method that leaves them to the accounting passes False).

        Returns
        -------
        ndarray of bool of shape (num_features,)
            True for each feature whose use costs something.
        """
        lazy, coupled, split_cost = self.arrays(num_features)
        group_of, group_lazy, group_coupled = self.group_arrays(num_features)
        group_cost = np.append(group_lazy + group_coupled, 0.0)[group_of]  # -1: no group, no cost
        return (lazy + coupled + group_cost + (split_cost if split else 0.0)) > 0

    def per_row(self) -> FeatureCosts:
        """The per-row part of these costs: the lazy costs of the features and groups (what BudgetPrune
        prunes for), without coupled, split and tree costs.

        Returns
        -------
        FeatureCosts
            The lazy and group lazy costs, with the same groups.
        """
        return FeatureCosts(lazy=self._lazy, groups=self.groups, group_lazy=self._group_lazy)

    def model_cost(self, used: np.ndarray, num_features: int) -> float:
        """Coupled cost of a model whose splits test the features ``used`` (indices): their own coupled
        costs and, once, each group they belong to.

        Parameters
        ----------
        used : ndarray of int
            The column indices of the features the model's splits test (each once).
        num_features : int
            The model's number of features.

        Returns
        -------
        float
            The model's coupled cost.
        """
        _, coupled, _ = self.arrays(num_features)
        group_of, _, group_coupled = self.group_arrays(num_features)
        cost = float(coupled[used].sum())
        if len(group_coupled):
            groups = np.unique(group_of[used])
            cost += float(group_coupled[groups[groups >= 0]].sum())
        return cost

    def to_dict(self, num_features: int) -> dict:
        """The aligned costs of ``num_features`` features as JSON-ready lists (:meth:`from_dict` reads them).

        Parameters
        ----------
        num_features : int
            The model's number of features.

        Returns
        -------
        dict
            ``lazy``, ``coupled``, ``split`` (lists of ``num_features`` values), ``tree``, ``groups`` (as
            :attr:`groups`), ``group_lazy`` and ``group_coupled`` (lists, one value per group).
        """
        lazy, coupled, split = self.arrays(num_features)
        _, group_lazy, group_coupled = self.group_arrays(num_features)
        return {"lazy": lazy.tolist(), "coupled": coupled.tolist(), "split": split.tolist(), "tree": self.tree,
                "groups": self.groups, "group_lazy": group_lazy.tolist(), "group_coupled": group_coupled.tolist()}

    def fields(self) -> dict:
        """The constructor's arguments that rebuild these costs as given (by name or by column):
        ``FeatureCosts(**costs.fields())`` is an equal FeatureCosts.

        Returns
        -------
        dict
            The keyword arguments ``lazy``, ``coupled``, ``split``, ``groups``, ``group_lazy``,
            ``group_coupled`` and ``tree``, as lists, dicts and numbers.
        """
        def plain(v):
            return v.tolist() if isinstance(v, np.ndarray) else dict(v) if isinstance(v, dict) else v
        return {"lazy": plain(self._lazy), "coupled": plain(self._coupled), "split": plain(self._split),
                "groups": None if self._groups is None else {k: list(v) for k, v in self._groups.items()},
                "group_lazy": plain(self._group_lazy), "group_coupled": plain(self._group_coupled),
                "tree": self._tree}

    def __eq__(self, other) -> bool:
        if not isinstance(other, FeatureCosts):
            return NotImplemented
        return self.fields() == other.fields()

    __hash__ = None

    @classmethod
    def from_dict(cls, values: Mapping) -> FeatureCosts:
        """The costs :meth:`to_dict` wrote; also the earlier form with ``group_of`` (each feature's group or
        -1) that ADAPT's manifests held before.

        Parameters
        ----------
        values : mapping
            What :meth:`to_dict` returned.

        Returns
        -------
        FeatureCosts
            The costs, by column.

        Raises
        ------
        CEGBError
            When ``values`` is not such a mapping (naming the keys it has).
        """
        keys = ("lazy", "coupled", "split", "tree")
        missing = None if not isinstance(values, Mapping) else \
            [k for k in keys if k not in values] + ([] if "groups" in values or "group_of" in values else ["groups"])
        if missing is None or missing:
            if missing and hasattr(values, "__missing__"):  # a manifest's fields name their file and the key
                values[missing[0]]
            given = sorted(map(str, values)) if isinstance(values, Mapping) else type(values).__name__
            raise CEGBError(f"FeatureCosts.from_dict: expected the mapping FeatureCosts.to_dict writes (the keys "
                            f"{', '.join(keys)}, groups, group_lazy and group_coupled), got {given}")
        groups = values["groups"] if "groups" in values else \
            (values["group_of"] if any(g >= 0 for g in values["group_of"]) else None)
        grouped = bool(groups)
        return cls(values["lazy"], values["coupled"], values["split"], tree=values["tree"],
                   groups=groups if grouped else None,
                   group_lazy=values["group_lazy"] if grouped else None,
                   group_coupled=values["group_coupled"] if grouped else None)

    # ------------------------------------------------------------------------------ LightGBM params

    def to_params(self, tradeoff: float | None = None) -> dict:
        """The ``cegb_*`` parameters for ``lgb.train`` (lists by column index).

        Parameters
        ----------
        tradeoff : float, optional
            Also set ``cegb_tradeoff``.

        Returns
        -------
        dict
            The parameters: ``cegb_penalty_feature_lazy``, ``cegb_penalty_feature_coupled``,
            ``cegb_penalty_split`` or ``cegb_penalty_feature_split``, ``cegb_feature_group`` and
            ``cegb_penalty_group_lazy`` / ``cegb_penalty_group_coupled``, as given (the tree cost is not a
            training penalty: it is left out).

        Raises
        ------
        CEGBError
            When the costs are given by name (call :meth:`align` first), or groups by column index leave the
            number of features unknown.
        """
        self._require_aligned()
        params = {}
        if self._lazy is not None:
            params["cegb_penalty_feature_lazy"] = self._lazy.tolist()
        if self._coupled is not None:
            params["cegb_penalty_feature_coupled"] = self._coupled.tolist()
        if self._split.ndim:  # per feature (patch 0005)
            params["cegb_penalty_feature_split"] = self._split.tolist()
        elif float(self._split):
            params["cegb_penalty_split"] = float(self._split)
        if self._groups is not None:  # patch 0005
            if self.num_features is None:
                raise CEGBError("groups by column index need the number of features: give lazy, coupled or split "
                                "costs per feature, or align() to the features")
            params["cegb_feature_group"] = self.group_arrays(self.num_features)[0].tolist()
            for key, values in (("cegb_penalty_group_lazy", self._group_lazy),
                                ("cegb_penalty_group_coupled", self._group_coupled)):
                if values is not None:
                    params[key] = values.tolist()
        if tradeoff is not None:
            params["cegb_tradeoff"] = float(tradeoff)
        return params

    def to_config(self, tradeoff: float | None = None) -> str:
        """The same as lines of a LightGBM CLI config file.

        Parameters
        ----------
        tradeoff : float, optional
            Also set ``cegb_tradeoff``.

        Returns
        -------
        str
            One ``key = value`` line per parameter of :meth:`to_params` (lists comma-separated).
        """
        lines = []
        for key, value in self.to_params(tradeoff).items():
            # group ids as integers: LightGBM refuses "-1.0" in cegb_feature_group
            text = ",".join(str(v) if isinstance(v, int) else repr(float(v)) for v in value) \
                if isinstance(value, list) else repr(value)
            lines.append(f"{key} = {text}")
        return "\n".join(lines) + "\n"

    @classmethod
    def from_params(cls, params: Mapping) -> FeatureCosts | None:
        """Costs from ``cegb_*`` parameters (as given to lgb.train, or as strings in a model file's
        parameters section); None if there are none.

        ``cegb_penalty_split`` and ``cegb_penalty_feature_split`` add up, as in training; group names are read
        from ``cegb_group_names`` when present.

        Parameters
        ----------
        params : mapping
            LightGBM parameters.

        Returns
        -------
        FeatureCosts or None
            The costs by column, or None when the parameters hold no cost.
        """
        def values(key):
            value = params.get(key)
            if value is None or (isinstance(value, str) and not value.strip()):
                return None
            return _numbers(key, value.split(",") if isinstance(value, str) else value)
        lazy, coupled = values("cegb_penalty_feature_lazy"), values("cegb_penalty_feature_coupled")
        split = values("cegb_penalty_split")
        if split is not None and split.size != 1:
            raise CEGBError(f"cegb_penalty_split should be one number, got {params['cegb_penalty_split']!r:.60}")
        split = 0.0 if split is None else float(split.reshape(-1)[0])
        per_feature_split = values("cegb_penalty_feature_split")
        if per_feature_split is not None:  # the two add up, as in training
            split = np.asarray(per_feature_split, dtype=np.float64) + split
        groups = values("cegb_feature_group")
        group_lazy, group_coupled = values("cegb_penalty_group_lazy"), values("cegb_penalty_group_coupled")
        if lazy is None and coupled is None and not np.any(split) and group_lazy is None and group_coupled is None:
            return None
        groups = None if groups is None else np.asarray(groups, dtype=np.float64).astype(np.int64)
        costs = cls(lazy, coupled, split, groups=groups, group_lazy=group_lazy, group_coupled=group_coupled)
        names = params.get(GROUP_NAMES_KEY)
        if names is not None and costs._groups is not None:
            costs._name_groups(decode_group_names(names))
        return costs

    def _name_groups(self, names: list[str]) -> None:
        """Groups given as ids (a model's cegb_feature_group) renamed in place: id k is ``names[k]``."""
        ids = [int(g) for g in self._groups]
        if ids and max(ids) >= len(names):
            raise CEGBError(f"{GROUP_NAMES_KEY} should name every group id 0..{max(ids)} (at least {max(ids) + 1} "
                            f"names), got {len(names)} names: {names[:10]}")
        taken = [names[g] for g in ids]
        duplicated = sorted(name for name, count in Counter(taken).items() if count > 1)
        if duplicated:
            raise CEGBError(f"{GROUP_NAMES_KEY} should give each group its own name, got {duplicated[:10]} for "
                            "several groups")
        self._groups = dict(zip(taken, self._groups.values()))
        self._memo().clear()

    @classmethod
    def coerce(cls, costs) -> FeatureCosts:
        """``costs`` as FeatureCosts: itself, or lazy costs (an array by column, a mapping or a pandas
        Series by feature name).

        Parameters
        ----------
        costs : FeatureCosts, array-like, mapping or pandas.Series
            The costs.

        Returns
        -------
        FeatureCosts
            ``costs`` itself, or new FeatureCosts with these lazy costs.

        Raises
        ------
        CEGBError
            When ``costs`` is a string, or not valid lazy costs.
        """
        if isinstance(costs, FeatureCosts):
            return costs
        if isinstance(costs, (str, bytes)):
            raise CEGBError(f"costs should be FeatureCosts, lazy costs per feature or a mapping from feature "
                            f"name to cost, got the string {costs!r}")
        return cls(lazy=costs)

    def __repr__(self) -> str:
        def show(v):
            if v is None:
                return "None"
            if isinstance(v, dict):
                return repr(v)
            return np.array2string(np.asarray(v), threshold=8)
        groups = "" if self._groups is None else (f", groups={show(self._groups)}, group_lazy={show(self._group_lazy)}"
                                                  f", group_coupled={show(self._group_coupled)}")
        tree = f", tree={self._tree!r}" if self._tree else ""
        return (f"FeatureCosts(lazy={show(self._lazy)}, coupled={show(self._coupled)}, "
                f"split={show(self._split)}{groups}{tree})")


class Unpriced(NamedTuple):
    """What ``costs=None`` means for one kind of entry point: a row of :data:`UNPRICED`."""

    #: Whether the model's own ``cegb_*`` training parameters price it when they hold a cost.
    own: bool
    #: Otherwise every feature's lazy cost; None: no costs (or a refusal, with ``refused``).
    each: float | None
    #: Whether no costs at all is refused: the entry point needs a price.
    refused: bool
    #: The entry points that state this case, and why.
    used_by: str


#: The one policy for ``costs=None``: ``resolve_costs``'s ``unpriced`` names its row; every caller states its case.
UNPRICED = {
    "refuse": Unpriced(own=True, each=None, refused=True,
                       used_by="prediction_cost, budget_prune, EarlyExit, record_cost and budget_stopping: they "
                               "report or trade off a trained model's cost, which a model without costs does not "
                               "have"),
    "zero": Unpriced(own=True, each=0.0, refused=False,
                     used_by="LazyPredictor (and the service) and the CEGB estimators' prediction_cost: a plain "
                             "LightGBM model is served and reported as it is, its features free (fetching what a "
                             "row's paths need requires no price)"),
    "unit": Unpriced(own=False, each=1.0, refused=False,
                     used_by="the methods' estimators, sweep and fit_within_budget: they fit, and count the "
                             "features a row reads"),
    "none": Unpriced(own=False, each=None, refused=False,
                     used_by="CEGBClassifier, CEGBRegressor and CEGBRanker when they fit: they train as LightGBM "
                             "does"),
}


def resolve_costs(costs, num_features: int, names=None, params: Mapping | None = None, *, unpriced: str,
                  given_as: str | None = None, rows: str = "X") -> FeatureCosts | None:
    """The one resolution of costs for ``num_features`` columns, used by every entry point: FeatureCosts, lazy
    costs by column, or by name (a mapping or a pandas Series: aligned to the columns' names with LightGBM's
    renaming); what None means is the row ``unpriced`` of :data:`UNPRICED`.

    Parameters
    ----------
    costs : FeatureCosts, array-like, mapping, pandas.Series or None
        The costs as given.
    num_features : int
        The number of columns (the model's, or X's when fitting).
    names : list of str, pandas.DataFrame or lightgbm.Dataset, optional
        The columns' names, to align costs given by name.
    params : mapping, optional
        The model's training parameters, read when ``costs`` is None and the row reads the model's own costs.
    unpriced : {"refuse", "zero", "unit", "none"}
        What ``costs=None`` means (:data:`UNPRICED`): the model's cegb_* ``params``, else refused (``"refuse"``)
        or every feature at 0 (``"zero"``); every feature at 1 (``"unit"``); no costs (``"none"``: None is
        returned).
    given_as : str, optional
        The parameter the costs were given as when an estimator fits on X (e.g. "feature_costs"); the errors
        name it and the columns of ``rows``.
    rows : str, default="X"
        What the errors call the rows whose columns the costs are for (e.g. "train's X"), with ``given_as``.

    Returns
    -------
    FeatureCosts or None
        The costs, aligned to the columns (None only with ``unpriced="none"``).

    Raises
    ------
    CEGBError
        When ``costs`` is None, ``unpriced="refuse"`` and ``params`` hold no ``cegb_*`` cost, when costs by name
        meet columns without names, or when the costs are for another number of columns.
    """
    policy = UNPRICED.get(unpriced)
    if policy is None:
        raise CEGBError(f"unpriced should be one of {sorted(UNPRICED)}, got {unpriced!r}")
    if costs is None and policy.own:
        costs = FeatureCosts.from_params(params or {})
    if costs is None:
        if policy.refused:
            raise CEGBError("costs is None and the model was not trained with cegb_* parameters: "
                            "pass costs=FeatureCosts(...)")
        if policy.each is None:
            return None
        costs = FeatureCosts(lazy=np.full(num_features, policy.each))
    costs = FeatureCosts.coerce(costs)
    if not costs.is_aligned:
        if names is None:
            if given_as is not None:
                raise CEGBError(f"{given_as} name features, but {rows} has no column names (pass a pandas "
                                "DataFrame, or give the costs by column)")
            raise CEGBError("costs are given by feature name but the model has no feature names (fit it on a "
                            "DataFrame, or give costs by column)")
        costs = costs.align(names)
    if costs.num_features not in (None, num_features):
        if given_as is not None:
            raise CEGBError(f"{given_as}: the costs are for {costs.num_features} features but {rows} has "
                            f"{num_features} columns")
        raise CEGBError(f"costs are for {costs.num_features} features but the model has {num_features}")
    return costs
