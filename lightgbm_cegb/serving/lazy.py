"""Lazy feature acquisition at serving time: a row acquires a feature only when one of its paths reaches a
split on it.

``LazyPredictor(model, fetch)`` routes a batch of rows through the model's trees as far as the features
already known allow (``FlatEnsemble.advance``, Cython without the GIL, on the shared routing step), collects
the rows stopped at a split on each feature, calls ``fetch(key, row_ids)`` once per key per round for those
rows, and resumes. A key is an ungrouped feature (its name or column; fetch returns one value per row) or a
feature group of the cost model (``FeatureCosts(groups=...)``; the group's name; fetch returns every
member's value for the rows, as a 2-D array with one column per member in the group's order or as a mapping
member -> values): a row stopped at any member gets all the members at once, and a member that a later path
of the row reaches is read from what the group's fetch returned. Each (row, group) and each (row, ungrouped
feature) is fetched at most once per call, and a row whose values are known is never asked for them.

A stopped row will pass the node it stopped at whatever its other values are, so every feature it waits for
is one its paths test. A feature's lazy cost is paid when one of the row's paths reads it, a group's lazy
cost once, with the first member read (members fetched with their group that no path reads cost nothing
of their own): the realised cost (priced by the cost model, split costs included) is what
``prediction_cost`` reports for the full row. Each round moves every stopped (row, tree) at least one node
deeper, so there are at most as many rounds as the deepest tree has levels.

Predictions equal the model's ``predict`` on the full rows, bit for bit: computed from the leaves the routing
reached with LightGBM's own operations for Boosters whose output is the raw score or binary's sigmoid
(_own_output), otherwise by the model's ``predict`` on the rows with the values nobody fetched set to 0.0,
which no split reads.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import lightgbm as lgb
import numpy as np

from lightgbm_cegb._engine import STORED, UNKNOWN_BITS, LazyBatch, LazyPlan, sigmoid
from lightgbm_cegb.core.costs import FeatureCosts, resolve_costs
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.forest import Forest
from lightgbm_cegb.core.parallel import resolve_n_jobs
from lightgbm_cegb.io.models import booster_of, fitted_costs, library_of, load_file, num_trees_used, to_forest, unwrap

#: status of a row in a LazyResult
DONE, FAILED, PENDING = 0, 1, 2
ORDERS = ("cheapest", "costliest", "most_rows", "model")
#: aacquire routes batches of at most this many rows on the event loop (in microseconds; handing them to a thread
#: would take longer), larger ones on a thread
INLINE_ROWS = 64
#: LightGBM objectives whose ``predict`` is the raw score (written without options: no ``sqrt``)
RAW_OBJECTIVES = frozenset({"regression", "regression_l1", "huber", "fair", "quantile", "mape", "lambdarank",
                            "rank_xendcg"})
#: a value not known yet: the NaN with the bits UNKNOWN_BITS (see LazyBatch)
UNKNOWN = np.array([UNKNOWN_BITS], dtype=np.uint64).view(np.float64)[0]


@dataclass(frozen=True)
class FetchFailure:
    """A fetch call that failed: its key as passed to fetch (a feature, or a group's name), the batch
    positions of its rows, why, and the row ids fetch was called with.

    Parameters
    ----------
    feature : object
        The key as passed to fetch: a feature's name or column, or a group's name.
    rows : ndarray of int
        The batch positions of the rows the call was for.
    error : BaseException
        Why it failed: what fetch raised, a ``TimeoutError``, or what was wrong with what it returned.
    ids : ndarray or None, default=None
        The row ids fetch was called with (``acquire``'s ``ids`` of ``rows``), which the message names.
    """

    feature: object
    rows: np.ndarray
    error: BaseException
    ids: np.ndarray | None = None

    def __str__(self) -> str:
        named = self.rows if self.ids is None else self.ids
        shown = ", ".join(map(str, np.asarray(named)[:5].tolist())) + (", ..." if len(named) > 5 else "")
        why = str(self.error) or f"it raised {type(self.error).__name__}"  # an exception without a message
        return f"fetch({self.feature!r}) for {len(self.rows)} row(s) [ids {shown}] failed: {why}"


@dataclass
class LazyResult:
    """What a lazy prediction computed for each row of a batch.

    ``status[i]`` is DONE (row i reached a leaf in every tree; ``prediction[i]`` is set), FAILED (a fetch it
    needed failed: see ``failures``) or PENDING (the call stopped at a failure before the row was done).
    ``X`` holds the values given and fetched (NaN where unknown), ``known`` which ones are known and
    ``fetched`` which ones this call fetched (a group's members all, when the group was fetched);
    ``acquisition[i]`` is the lazy cost of the fetched values row i's paths read (and of each group once,
    with its first member read) and ``evaluation[i]`` the split costs of the nodes it passed. To resume after
    a failure, call ``acquire(result.X, result.known)``: nothing fetched is fetched again (a member fetched
    with its group and read only after the resume is known then, so its own cost is not charged).

    Parameters
    ----------
    prediction : ndarray or None
        The prediction of each row (where a row is not DONE: NaN, or None in an object array); None when no
        row is done, or in the ``result`` of a LazyFetchError.
    status : ndarray of int8 of shape (n_rows,)
        Each row's status: DONE (0), FAILED (1) or PENDING (2).
    X : ndarray of shape (n_rows, n_features)
        The values given and fetched (NaN where unknown).
    known : ndarray of bool of shape (n_rows, n_features)
        Which values are known.
    fetched : ndarray of bool of shape (n_rows, n_features)
        Which values this call fetched.
    acquisition : ndarray of shape (n_rows,)
        Each row's lazy cost of the fetched values its paths read (and of each group once).
    evaluation : ndarray of shape (n_rows,)
        Each row's split costs of the nodes it passed, and the trees' costs.
    leaves : ndarray of int32 of shape (n_rows, num_trees)
        The leaf each row reached in each tree, -1 where not reached yet.
    rounds : int
        Number of fetch rounds.
    fetch_calls : int
        Number of calls of fetch, retries included.
    failures : list of FetchFailure, optional
        The failed fetch calls (default: none).
    """

    prediction: np.ndarray | None
    status: np.ndarray
    X: np.ndarray
    known: np.ndarray
    fetched: np.ndarray
    acquisition: np.ndarray
    evaluation: np.ndarray
    leaves: np.ndarray  # int32[n_rows, num_trees]: the leaf reached, -1 where not reached yet
    rounds: int  # fetch rounds
    fetch_calls: int  # calls of fetch, retries included
    failures: list[FetchFailure] = field(default_factory=list)

    @property
    def ok(self) -> np.ndarray:
        """Whether each row is DONE (its prediction is set)."""
        return self.status == DONE

    @property
    def per_instance(self) -> np.ndarray:
        """Each row's cost: ``acquisition + evaluation``."""
        return self.acquisition + self.evaluation

    @property
    def mean(self) -> float:
        """Mean per-row cost (0.0 without rows)."""
        return float(self.per_instance.mean()) if len(self.status) else 0.0


class FetchInterrupted(RuntimeError):
    """fetch raised KeyboardInterrupt or SystemExit on a worker thread (``max_workers``, ``timeout``, or a plain
    function under ``aacquire``): that call's failure, not an interrupt of the program (signals reach the main
    thread only). The exception fetch raised is its ``__cause__``."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(f"it raised {type(error).__name__}" + (f": {error}" if str(error) else ""))
        self.__cause__ = error


class LazyFetchError(RuntimeError):
    """A fetch failed (raised, timed out or returned the wrong shape) with ``errors="raise"``. ``result``
    holds everything computed so far (values fetched, costs paid, rows already done).

    The exception fetch raised is its ``__cause__``.

    Parameters
    ----------
    failure : FetchFailure
        The (first) failed fetch call: its key, its rows and the error.
    result : LazyResult
        Everything computed so far (its ``prediction`` is None).

    Attributes
    ----------
    failure : FetchFailure
        As given.
    result : LazyResult
        As given: resume with ``acquire(result.X, result.known)``.
    """

    def __init__(self, failure: FetchFailure, result: LazyResult) -> None:
        super().__init__(str(failure))
        self.failure = failure
        self.result = result


class _Returned(CEGBError):
    """What fetch returned breaks its contract (found here, not raised by fetch)."""


class LazyFetchValueError(LazyFetchError, CEGBError):
    """A fetch returned what its contract does not allow (the wrong shape, values that are not numbers, a
    mapping without a group's members, an awaitable to ``acquire``): a LazyFetchError that is also a CEGBError,
    its message naming the key, what was expected and what was received.

    Parameters
    ----------
    failure : FetchFailure
        The (first) failed fetch call: its key, its rows and the error.
    result : LazyResult
        Everything computed so far (its ``prediction`` is None).

    Attributes
    ----------
    failure : FetchFailure
        As given.
    result : LazyResult
        As given: resume with ``acquire(result.X, result.known)``.
    """


class LazyPredictor:
    """Predict with ``model`` fetching each feature (or feature group) only for the rows whose paths reach a
    split on it.

    Parameters
    ----------
    model : lightgbm.Booster, LGBMModel, XGBoost or CatBoost model, model file, fitted scikit-learn tree model, \
PruneResult, Forest or policy
        The tree models ``prediction_cost`` takes (a model file of LightGBM, XGBoost or CatBoost is loaded with its
        library to predict), not a Pipeline (its steps transform the values before the
        trees see them, so the trees' splits name no column to fetch). A Forest has no ``predict``: its raw score
        is returned (as
        LightGBM's ``predict(raw_score=True)``). Linear trees are refused (their leaves read features no split
        tests). A policy model (one with ``__lightgbm_cegb_policy__``: AdaptiveAcquisitionClassifier) decides itself
        what each row buys next: fetch is called with the units it asks for, round by round, and
        ``predict``/``predict_proba`` equal its own.
    fetch : callable ``fetch(key, row_ids) -> values``
        Called once per key per round with the ids of the rows that need it (``ids`` given to ``acquire``,
        default the rows' positions in the batch). NaN is a missing value, as for ``predict``.

        - ``key`` a feature in no group: the model's feature name (``feature_keys="name"``) or column index
          (``"index"``); fetch returns one value per row id.
        - ``key`` a group of the costs (its name, as in ``feature_costs.groups``; the members' keys, in
          order, are ``predictor.groups[key]``): fetch returns every member's value for each row id, as an
          array of shape (len(row_ids), number of members), its columns in the group's member order, or as
          a mapping (a dict, a pandas DataFrame) from each member's key to its values. A group is fetched
          whole for a row that needs any member, once per row; its members are never fetched one by one.

        Values are in the order of the row ids, except a pandas Series or DataFrame (or a mapping's Series)
        with an index other than a RangeIndex: it is read by its index, which must hold each row id asked for
        once (a store's ``pd.read_sql(..., index_col="id")`` in its own order works). A coroutine function is
        awaited by ``aacquire``/``apredict``.
    feature_costs : FeatureCosts, lazy costs per column or by name, optional
        As ``prediction_cost`` (None: the model's cegb_* parameters or a package estimator's fitted costs;
        no costs at all: everything costs 0). Its groups are the groups fetch is called with; a group's
        name may not be the key of a feature outside it.
    num_iteration : int, optional
        As ``predict``: the first iterations only (None: the best iteration if there is one, else all).
    order : {"cheapest", "costliest", "most_rows", "model"} or callable, default="cheapest"
        Order of a round's fetch calls (by lazy cost, a group's being its own plus its members'; by number
        of rows; by column, a group's being its first member's); a callable gets ``(key, row_ids)`` and
        returns a sort key. Which (row, key) pairs are fetched does not depend on it: every one is needed.
    max_workers : int, optional
        Fetch calls of a round run this many at a time on threads (None: one after the other in the
        calling thread; ``aacquire``: all of a round's calls concurrently).
    timeout : float, optional
        Seconds a fetch call may take; a slower one counts as failed (its thread cannot be stopped and
        finishes in the background).
    retries : int, default=0
        Times a fetch call that raised or timed out is repeated before it counts as failed.
    errors : {"raise", "partial"}, default="raise"
        On a failed fetch: raise LazyFetchError (its ``result`` keeps what was computed), or mark the rows
        that needed it FAILED and finish the others.
    feature_keys : {"name", "index"}, default="name"
        The keys of features in fetch calls and in :attr:`groups`: the model's feature names (column indices
        when the model has none) or column indices.
    n_jobs : int, optional
        Threads of the routing kernel.

    Attributes
    ----------
    keys : list
        The key of each feature (column order).
    groups : dict
        {group name: its members' keys, in the order of a group fetch's columns} (empty without groups).
    fetch_keys : list
        The keys fetch may be called with (a store can check it serves them all before the first request).
    forest : Forest
        The model's forest.
    num_trees : int
        The trees the routing goes through (those of ``num_iteration``).
    costs_ : FeatureCosts
        The costs, aligned to the model's columns.

    Raises
    ------
    CEGBError
        When an argument is invalid, the model has linear trees or pandas category columns, ``num_iteration``
        is given for a model that is not LightGBM's, the costs do not fit the model, or a group's name is
        also the key of a feature in no group.

    See Also
    --------
    prediction_cost : The cost of the same rows when every feature is known.
    """

    def __init__(self, model, fetch: Callable, *, feature_costs=None, num_iteration: int | None = None,
                 order="cheapest", max_workers: int | None = None, timeout: float | None = None,
                 retries: int = 0, errors: str = "raise", feature_keys: str = "name",
                 n_jobs: int | None = None) -> None:
        given, model = model, unwrap(model)  # a Selection stands for its model, and carries its costs
        if hasattr(model, "steps") and hasattr(model, "named_steps"):  # a scikit-learn Pipeline
            raise CEGBError("model: a Pipeline's steps transform the values before its trees see them, so a split "
                            "names no column to fetch: serve its final estimator (model[-1]) on the transformed "
                            "features, or a model trained on the raw columns")
        if not callable(fetch):
            raise CEGBError(f"fetch should be a callable fetch(key, row_ids) -> values, got {type(fetch).__name__}")
        if not (callable(order) or order in ORDERS):
            raise CEGBError(f"order should be one of {ORDERS} or a callable, got {order!r}")
        if max_workers is not None and (isinstance(max_workers, bool) or not isinstance(max_workers, int)
                                        or max_workers < 1):
            raise CEGBError(f"max_workers should be None or an integer >= 1, got {max_workers!r}")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not timeout > 0):
            raise CEGBError(f"timeout should be None or a number of seconds > 0, got {timeout!r}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise CEGBError(f"retries should be an integer >= 0, got {retries!r}")
        if errors not in ("raise", "partial"):
            raise CEGBError(f"errors should be 'raise' or 'partial', got {errors!r}")
        if feature_keys not in ("name", "index"):
            raise CEGBError(f"feature_keys should be 'name' or 'index', got {feature_keys!r}")
        self._threads = resolve_n_jobs(n_jobs)  # the batch uses at most one per block of 64 rows
        self.policy = getattr(type(model), "__lightgbm_cegb_policy__", None) is not None
        if self.policy:  # a model that decides per row what to buy next (AdaptiveAcquisitionClassifier)
            if num_iteration is not None:
                raise CEGBError(f"num_iteration: {type(model).__name__} has no iterations to cut, got "
                                f"{num_iteration!r}")
            if feature_costs is not None:
                raise CEGBError(f"feature_costs: {type(model).__name__} buys by the costs it was fitted with "
                                "(its costs_); give none")
            model.__lightgbm_cegb_policy__(0)  # refuses an unfitted model here, not at the first request
            self.forest, self.model, self.num_iteration, self.num_trees = None, model, None, 0
            num_features = int(model.n_features_in_)
            given_names = getattr(model, "feature_names_in_", None)
            names = None if given_names is None else [str(n) for n in given_names]
            self.costs_ = model.costs_
        else:
            self.forest = to_forest(model)
            if self.forest.pandas_categorical:
                raise CEGBError("model: trained on pandas category columns, which fetched values would have to be "
                                "mapped to LightGBM's codes; not supported yet (train on the codes instead)")
            if self.forest.linear is not None:
                raise CEGBError("model: linear trees are not supported (their leaves read features that no split "
                                "tests, and prediction_cost does not count)")
            self.model = load_file(model) if isinstance(model, (str, os.PathLike)) else model
            if num_iteration is not None and booster_of(self.model) is None and not isinstance(self.model, Forest):
                raise CEGBError(f"num_iteration: {type(self.model).__name__} predicts with all its trees; "
                                f"num_iteration applies to LightGBM models only, got {num_iteration!r}")
            self.num_iteration = num_iteration
            self.num_trees = num_trees_used(self.model, self.forest, num_iteration)
            costs = feature_costs
            if costs is None:
                costs = fitted_costs(given) if fitted_costs(given) is not None else fitted_costs(model)
            if costs is None and FeatureCosts.from_params(self.forest.params) is None:
                costs = FeatureCosts(lazy=np.zeros(self.forest.num_features))
            self.costs_ = resolve_costs(costs, self.forest.num_features, self.forest.feature_names,
                                        self.forest.params)
            names, num_features = self.forest.feature_names, self.forest.num_features
        # the fetch order's costs: 0 for every feature when the costs have no lazy part (a model trained with
        # coupled or split penalties only)
        self._lazy = self.costs_.arrays(num_features)[0]
        self.fetch, self.order, self.max_workers = fetch, order, max_workers
        self._async = _is_async(fetch)
        self.timeout, self.retries, self.errors, self.n_jobs = timeout, retries, errors, n_jobs
        self.keys = list(names) if feature_keys == "name" and names else list(range(num_features))
        # a fetch unit u is feature u (u < num_features) or group u - num_features
        self._group_of, group_lazy, _ = self.costs_.group_arrays(num_features)
        groups = self.costs_.groups or {}
        self._members = [np.asarray(members, dtype=np.int64) for members in groups.values()]
        self.groups = {name: [self.keys[f] for f in members] for name, members in zip(groups, self._members)}
        ungrouped = {self.keys[f] for f in np.flatnonzero(self._group_of < 0)}
        clash = [name for name in groups if name in ungrouped]
        if clash:
            raise CEGBError(f"feature_costs: the group name {clash[0]!r} is also the key of a feature in no group; "
                            "fetch(key, ids) could not tell them apart: rename the group")
        self._unit_keys = self.keys + list(groups)
        members_lazy = np.array([self._lazy[m].sum() for m in self._members], dtype=np.float64)
        self._unit_cost = np.concatenate([self._lazy, group_lazy + members_lazy])
        first = np.array([m.min() if len(m) else num_features for m in self._members], dtype=np.int64)
        self._unit_column = np.concatenate([np.arange(num_features, dtype=np.int64), first])
        # a round's fetches come out of LazyBatch in the order of a fixed sort key; "most_rows" and a callable
        # order sort each round
        self._sorted = callable(order) or order == "most_rows"
        units = range(len(self._unit_keys))
        if not self._sorted:
            units = sorted(units, key=lambda u: self._sort_key((u, ()), None))
        self._unit_order = np.array(units, dtype=np.int64)
        if not self.policy:
            lazy, _, split = self.costs_.arrays(num_features)
            forest = self.forest
            self._plan = LazyPlan(forest.flat, self.num_trees, lazy, split, self._group_of, group_lazy,
                                  np.cumsum([0] + [len(m) for m in self._members]),
                                  np.concatenate([np.zeros(0, dtype=np.int64), *self._members]), self._unit_order,
                                  float(self.costs_.tree), forest.float32, forest.leaf_offset, forest.leaf_value)
        self._own = None if self.policy else _own_output(self.model, self.forest)  # None: the model's predict;
        # 0: raw; > 0: sigmoid

    # ------------------------------------------------------------------------------------ public API

    @property
    def fetch_keys(self) -> list:
        """The keys fetch may be called with: the features in no group that a split of the trees used tests
        (column order), then the groups with a member so tested (the groups' order); for a policy model, every
        feature in no group and every group with a member."""
        used = np.arange(len(self.keys)) if self.policy else self.forest.used_features(self.num_trees)
        group_of = self._group_of[used]
        return [self.keys[f] for f in used[group_of < 0]] + \
            [name for g, name in enumerate(self.groups) if (group_of == g).any()]

    def acquire(self, X, known=None, *, ids=None, method: str = "predict", **kwargs) -> LazyResult:
        """Route, fetch and predict a batch: the LazyResult of every row. ``known``: bool mask of the values
        given in X (default: the non-NaN ones); ``method``: the model's method that predicts
        ("predict", "predict_proba", ...), called with ``kwargs``.

        Parameters
        ----------
        X : array-like of shape (n_rows, n_features)
            The rows' values known so far (NaN, or anything where ``known`` is False, for the others).
        known : ndarray of bool of shape (n_rows, n_features), optional
            Which values X gives (default: the non-NaN ones, so that a NaN of X is fetched; to give a missing
            value, a NaN, mark it known).
        ids : array-like of shape (n_rows,), optional
            The row ids fetch is called with (default: the rows' positions in the batch).
        method : str, default="predict"
            The model's method that predicts.
        **kwargs : dict
            Arguments of ``method`` (not ``num_iteration``, ``start_iteration`` or ``pred_contrib``).

        Returns
        -------
        LazyResult
            Predictions, values, statuses and costs of every row.

        Raises
        ------
        LazyFetchError
            With ``errors="raise"``, when a fetch call fails (its ``result`` holds what was computed).
        LazyFetchValueError
            With ``errors="raise"``, when a fetch returns what its contract does not allow.
        CEGBError
            When fetch is a coroutine function (use :meth:`aacquire`), the model has no such ``method``, or
            ``known`` or ``ids`` do not match X.
        """
        if self._async:
            raise CEGBError("fetch is a coroutine function: use aacquire / apredict")
        self._check_method(method, kwargs)
        run = (_PolicyRun if self.policy else _Run)(self, X, known, ids)
        while requests := run.advance():
            run.deliver(requests, self._fetch_round(requests, run))
        return run.finish(method, kwargs)

    async def aacquire(self, X, known=None, *, ids=None, method: str = "predict", **kwargs) -> LazyResult:
        """``acquire`` for asyncio: a round's fetch calls run concurrently (at most ``max_workers`` at a time
        when set); a plain function fetch runs on a thread of its own per call.

        Parameters
        ----------
        X : array-like of shape (n_rows, n_features)
            The rows' values known so far.
        known : ndarray of bool of shape (n_rows, n_features), optional
            Which values X gives (default: the non-NaN ones).
        ids : array-like of shape (n_rows,), optional
            The row ids fetch is called with (default: the rows' positions in the batch).
        method : str, default="predict"
            The model's method that predicts.
        **kwargs : dict
            Arguments of ``method``.

        Returns
        -------
        LazyResult
            Predictions, values, statuses and costs of every row.

        Raises
        ------
        LazyFetchError
            With ``errors="raise"``, when a fetch call fails (its ``result`` holds what was computed).
        LazyFetchValueError
            With ``errors="raise"``, when a fetch returns what its contract does not allow.
        CEGBError
            When the model has no such ``method``, or ``known`` or ``ids`` do not match X.
        """
        self._check_method(method, kwargs)
        run = (_PolicyRun if self.policy else _Run)(self, X, known, ids)
        limit = asyncio.Semaphore(self.max_workers) if self.max_workers else None

        async def off_loop(function, *args):  # the routing of a large batch off the event loop; a few rows at once
            return function(*args) if len(run.ids) <= INLINE_ROWS else await asyncio.to_thread(function, *args)

        while requests := await off_loop(run.advance):
            outcomes = await asyncio.gather(*(self._fetch_async(unit, rows, run, limit) for unit, rows in requests))
            run.deliver(requests, outcomes)
        return await off_loop(run.finish, method, kwargs)

    def predict(self, X, known=None, *, ids=None, **kwargs) -> np.ndarray:
        """The model's ``predict`` on the full rows, fetching only what the rows' paths need.

        Parameters
        ----------
        X : array-like of shape (n_rows, n_features)
            The rows' values known so far.
        known : ndarray of bool of shape (n_rows, n_features), optional
            Which values X gives (default: the non-NaN ones).
        ids : array-like of shape (n_rows,), optional
            The row ids fetch is called with (default: the rows' positions in the batch).
        **kwargs : dict
            Arguments of the model's ``predict``.

        Returns
        -------
        ndarray or None
            :meth:`acquire`'s ``prediction``.

        Raises
        ------
        LazyFetchError
            As :meth:`acquire`.
        """
        return self.acquire(X, known, ids=ids, **kwargs).prediction

    def predict_proba(self, X, known=None, *, ids=None, **kwargs) -> np.ndarray:
        """The model's ``predict_proba`` on the full rows, fetching only what the rows' paths need.

        Parameters
        ----------
        X : array-like of shape (n_rows, n_features)
            The rows' values known so far.
        known : ndarray of bool of shape (n_rows, n_features), optional
            Which values X gives (default: the non-NaN ones).
        ids : array-like of shape (n_rows,), optional
            The row ids fetch is called with (default: the rows' positions in the batch).
        **kwargs : dict
            Arguments of the model's ``predict_proba``.

        Returns
        -------
        ndarray or None
            :meth:`acquire`'s ``prediction`` with ``method="predict_proba"``.

        Raises
        ------
        LazyFetchError
            As :meth:`acquire`.
        """
        return self.acquire(X, known, ids=ids, method="predict_proba", **kwargs).prediction

    async def apredict(self, X, known=None, *, ids=None, **kwargs) -> np.ndarray:
        """:meth:`predict` for asyncio (see :meth:`aacquire`).

        Parameters
        ----------
        X : array-like of shape (n_rows, n_features)
            The rows' values known so far.
        known : ndarray of bool of shape (n_rows, n_features), optional
            Which values X gives (default: the non-NaN ones).
        ids : array-like of shape (n_rows,), optional
            The row ids fetch is called with (default: the rows' positions in the batch).
        **kwargs : dict
            Arguments of the model's ``predict``.

        Returns
        -------
        ndarray or None
            :meth:`aacquire`'s ``prediction``.

        Raises
        ------
        LazyFetchError
            As :meth:`aacquire`.
        """
        return (await self.aacquire(X, known, ids=ids, **kwargs)).prediction

    # ------------------------------------------------------------------------------------ fetching

    def _fetch_round(self, requests, run) -> list:
        """Outcome (values or the exception) of each request, retried as configured. With max_workers or a
        timeout, each call runs on a thread of its own (max_workers at a time), timed from its start: a call
        that times out keeps its thread, never another call's. Without them, a _Run's calls are made by its
        LazyBatch, which stores a feature's float64 values at once (outcome STORED)."""
        outcomes: list = [None] * len(requests)
        pending = list(range(len(requests)))
        for attempt in range(self.retries + 1):
            run.fetch_calls += len(pending)
            if not self.max_workers and self.timeout is None:
                if attempt == 0 and isinstance(run, _Run):
                    outcomes = run.batch.fetch_round(requests, self.fetch, self._unit_keys, run.fetch_ids)
                    if outcomes is None:  # every call's values stored
                        return None
                    outcomes = [outcome if outcome is STORED or isinstance(outcome, BaseException)
                                else self._returned(outcome) for outcome in outcomes]
                else:
                    for j in pending:
                        outcomes[j] = self._call(requests[j], run.ids)
            else:
                width = self.max_workers or 1
                for w in range(0, len(pending), width):
                    wave = pending[w:w + width]
                    done: dict = {}
                    threads = [threading.Thread(target=self._call_into, args=(done, j, requests[j], run.ids),
                                                daemon=True) for j in wave]
                    for thread in threads:
                        thread.start()
                    deadline = None if self.timeout is None else time.monotonic() + self.timeout
                    for j, thread in zip(wave, threads):
                        thread.join(None if deadline is None else max(deadline - time.monotonic(), 0.0))
                        outcomes[j] = done[j] if j in done else TimeoutError(f"timed out after {self.timeout} s")
            pending = [j for j in pending if isinstance(outcomes[j], BaseException)]
            if not pending:
                break
        return outcomes

    def _call_into(self, done: dict, j: int, request, ids) -> None:
        """_call on a worker thread: its outcome in done[j], whatever fetch raised. A KeyboardInterrupt or
        SystemExit raised there is fetch's own (signals reach the main thread only): a failure of that call,
        reported as such (FetchInterrupted; it was lost with the thread and read as a time-out)."""
        try:
            done[j] = self._call(request, ids)
        except BaseException as exc:  # KeyboardInterrupt, SystemExit: _call lets only those through
            done[j] = FetchInterrupted(exc)

    def _call(self, request, ids):
        unit, rows = request
        try:
            values = self.fetch(self._unit_keys[unit], ids[rows])
        except Exception as exc:  # the user's fetch: any failure is reported with its key and rows
            return exc
        return self._returned(values)

    @staticmethod
    def _returned(values):
        """What a synchronous fetch returned, or the error of an awaitable (closed: never awaited)."""
        if type(values) is not np.ndarray and inspect.isawaitable(values):
            getattr(values, "close", lambda: None)()
            return _Returned("fetch returned an awaitable: use aacquire / apredict for asynchronous fetches")
        return values

    async def _fetch_async(self, unit, rows, run, limit):
        key, outcome = self._unit_keys[unit], None
        for _ in range(self.retries + 1):
            run.fetch_calls += 1
            try:
                if limit is not None:
                    await limit.acquire()
                try:
                    ids = run.ids[rows]
                    call = self.fetch(key, ids) if self._async else in_thread(self.fetch, key, ids)
                    values = await asyncio.wait_for(call, self.timeout)
                    if inspect.isawaitable(values):  # an async callable that did not say so
                        values = await asyncio.wait_for(values, self.timeout)
                    return values
                finally:
                    if limit is not None:
                        limit.release()
            except asyncio.TimeoutError:
                outcome = TimeoutError(f"timed out after {self.timeout} s")
            except Exception as exc:  # the user's fetch: any failure is reported with its key and rows
                outcome = exc
        return outcome

    def _in_order(self, requests: list, ids: np.ndarray) -> list:
        """A round's requests in the order fetch is called (``order``)."""
        try:
            return sorted(requests, key=lambda request: self._sort_key(request, ids))
        except TypeError as exc:  # the keys an order callable returned cannot be compared (None, str with int)
            raise CEGBError(f"order: the keys the callable returned for this round's fetches cannot be compared "
                            f"({exc}); return numbers (or tuples of them)") from None

    def _sort_key(self, request, ids: np.ndarray):
        unit, rows = request
        if callable(self.order):
            return self.order(self._unit_keys[unit], ids[rows])
        cost, column = self._unit_cost[unit], self._unit_column[unit]
        return {"cheapest": (cost, column, unit), "costliest": (-cost, column, unit),
                "most_rows": (-len(rows), column, unit), "model": (column, unit)}[self.order]

    def _values(self, unit: int, ids: np.ndarray, outcome) -> np.ndarray:
        """What fetch returned for the row ids ``ids`` of ``unit``, as float64 of shape (len(ids), its features),
        pandas objects aligned to the ids by their index (_by_id); a _Returned error saying what was expected
        otherwise."""
        n = len(ids)
        num_features = len(self.keys)
        if unit < num_features and type(outcome) is np.ndarray and outcome.dtype == np.float64 \
                and outcome.shape == (n,):  # what a fetch from an array returns, as it is
            return outcome[:, None]
        outcome = _by_id(outcome, ids)
        if unit < num_features:
            values = _numbers(outcome)
            if values.shape != (n,):
                raise _Returned(f"returned shape {values.shape}, expected ({n},): one value per row id")
            return values[:, None]
        name, members = self._unit_keys[unit], self.groups[self._unit_keys[unit]]
        if isinstance(outcome, Mapping) or hasattr(outcome, "columns"):  # a dict, a pandas DataFrame
            given = list(outcome.keys())
            if len(given) != len(members) or any(member not in given for member in members):
                raise _Returned(f"returned a mapping with the keys {given[:10]}, expected the members of group "
                                f"{name!r}: {members}")
            columns = []
            for member in members:
                values = _numbers(_by_id(outcome[member], ids), f"for member {member!r} ")
                if values.shape != (n,):
                    raise _Returned(f"returned shape {values.shape} for member {member!r} of group {name!r}, "
                                    f"expected ({n},): one value per row id")
                columns.append(values)
            return np.column_stack(columns) if columns else np.zeros((n, 0))
        values = _numbers(outcome)
        if values.shape != (n, len(members)):
            raise _Returned(f"returned shape {values.shape} for group {name!r}, expected ({n}, {len(members)}): one "
                            f"row per row id, one column per member {members} (or a mapping member -> values)")
        return values

    # ------------------------------------------------------------------------------------ predicting

    def _check_method(self, method: str, kwargs: dict) -> None:
        """Before anything is fetched: the model can predict so, with what the routing fetches."""
        if self.policy:
            if method not in ("predict", "predict_proba") or kwargs:
                raise CEGBError(f"method: {type(self.model).__name__} predicts with 'predict' or 'predict_proba' "
                                f"without arguments, got {method!r} with {sorted(kwargs)}")
            return
        if isinstance(self.model, Forest):
            if method != "predict" or kwargs:
                raise CEGBError(f"method: a Forest predicts its raw score only ('predict' without arguments), got "
                                f"{method!r} with {sorted(kwargs)}")
        elif not callable(getattr(self.model, method, None)):
            raise CEGBError(f"method: {type(self.model).__name__} has no {method!r}")
        for key in ("num_iteration", "start_iteration", "pred_contrib"):
            if key in kwargs:
                raise CEGBError(f"{key}: not a predict argument here: "
                                + ("give num_iteration to LazyPredictor" if key == "num_iteration" else
                                   "the rows fetch what the first num_iteration iterations' paths need, and "
                                   f"{key} would read other trees or nodes"))

    def _predict(self, batch: LazyBatch, done: np.ndarray, method: str, kwargs: dict) -> np.ndarray:
        """The model's prediction on the ``done`` rows of ``batch``. A Forest, and a Booster whose output is its
        raw score or binary's sigmoid, are predicted from the leaves the rows reached with LightGBM's own
        arithmetic (see _own_output): the same bits as ``predict``, without routing again. Other models predict
        on the rows with 0.0 for the values nobody fetched (no split the rows passed reads them)."""
        model, forest = self.model, self.forest
        every = done.all()
        own = isinstance(model, Forest) or (self._own is not None and method == "predict"
                                            and set(kwargs) <= {"raw_score"})
        if own:
            raw = isinstance(model, Forest) or kwargs.get("raw_score")  # as predict(raw_score=True)
            score = batch.raw_score(not raw and forest.average_output)
            score = score if every else score[done]
            score = score[:, 0] if forest.trees_per_iteration == 1 else score
            return score if raw or self._own == 0 else sigmoid(score, self._own)
        return self.predict_rows(batch.filled() if every else batch.filled()[done], method, **kwargs)

    def predict_rows(self, X: np.ndarray, method: str = "predict", **kwargs) -> np.ndarray:
        """The model's own ``method`` on rows whose values are all given (nothing fetched): X as the model reads it
        (a DataFrame of its feature names, an XGBoost DMatrix), the model's ``num_iteration``.

        Parameters
        ----------
        X : ndarray of shape (n_rows, n_features)
            The full rows.
        method : str, default="predict"
            The model's method.
        **kwargs : dict
            Its arguments.

        Returns
        -------
        ndarray
            Its answer (of no rows too).
        """
        model = self.model
        predict = getattr(model, method)
        if booster_of(model) is not None:
            kwargs = {"num_iteration": self.num_iteration, **kwargs}
        rows = len(X)
        if not rows:  # scikit-learn's estimators refuse no rows: their answer's type and shape, for none
            X = np.zeros((1, X.shape[1]))
        names = getattr(model, "feature_names_in_", None)
        if names is not None:  # as the model was fitted (pandas category models are refused)
            import pandas as pd

            X = pd.DataFrame(X, columns=names, copy=False)
        elif library_of(model) == "xgboost" and not hasattr(model, "get_booster"):  # a Booster predicts a DMatrix
            import xgboost as xgb

            X = xgb.DMatrix(X, feature_names=model.feature_names, feature_types=model.feature_types)
        return predict(X, **kwargs) if rows else np.asarray(predict(X, **kwargs))[:0]


class _Run:
    """One batch on its way through the model: its rows' compiled state (values, routing, costs: LazyBatch) and
    what the run reports (rounds, fetch calls, failures)."""

    def __init__(self, predictor: LazyPredictor, X, known, ids) -> None:
        forest = self.forest = predictor.forest
        self.predictor = predictor
        if type(X) is np.ndarray and X.dtype == np.float64 and not forest.float32:  # read as it is
            forest._check_shape(X.shape)
        else:
            X = forest.dense(X)
        known, self.fetch_ids = _known_and_ids(X, known, ids, positions=False)  # None: the rows' positions
        known = None if known is None else np.ascontiguousarray(known).view(np.uint8)
        self.batch = LazyBatch(predictor._plan, X, known, predictor._threads)
        self.status = self.batch.status
        self.rounds = self.fetch_calls = 0
        self.failures: list[FetchFailure] = []

    @property
    def ids(self) -> np.ndarray:
        """The row ids fetch is called with (the rows' positions when acquire was given none)."""
        return np.arange(self.batch.n) if self.fetch_ids is None else self.fetch_ids

    def advance(self) -> list[tuple[int, np.ndarray]]:
        """Route the active rows as far as they can go; the fetches they wait for, in the predictor's order:
        (unit, rows), unit a feature in no group or num_features + a group."""
        requests = self.batch.advance()
        if not requests:
            return requests
        self.rounds += 1
        return self.predictor._in_order(requests, self.ids) if self.predictor._sorted else requests

    def deliver(self, requests, outcomes) -> None:
        """Store what each fetch returned (the members the rows stopped at read from their group's values);
        then handle the failures (all successes are kept first). outcomes None: every fetch's values stored."""
        if outcomes is None:
            self.batch.read_held()
            return
        received, failed = _received(self.predictor, self.ids, requests, outcomes)
        for unit, rows, values in received:
            self.batch.deliver(unit, rows, values.ravel())
        self.batch.read_held()
        if failed:
            for rows in _failed(self, failed):
                self.batch.fail(rows)

    def finish(self, method: str, kwargs: dict) -> LazyResult:
        done = self.status == DONE
        prediction = None
        if done.any() or not len(done):
            prediction = _spread(np.asarray(self.predictor._predict(self.batch, done, method, kwargs)), done)
        return self.result(prediction)

    def result(self, prediction) -> LazyResult:
        """The run's result; the run ends here (its arrays are handed over, not copied)."""
        batch = self.batch
        leaves = batch.leaves()
        X, known = batch.values()
        return LazyResult(prediction=prediction, status=self.status, X=X, known=known,
                          fetched=batch.fetched.view(bool), acquisition=batch.acquisition,
                          evaluation=batch.evaluation, leaves=leaves, rounds=self.rounds,
                          fetch_calls=self.fetch_calls, failures=self.failures)


class _PolicyRun:
    """One batch through a policy model (``__lightgbm_cegb_policy__``): each round, the units the policy asks for
    that a row does not have yet are fetched (a group whole, once per row), and the policy sees their values;
    values given in X are handed to it unfetched and unpaid. The interface of :class:`_Run`."""

    def __init__(self, predictor: LazyPredictor, X, known, ids) -> None:
        self.predictor = predictor
        model = predictor.model
        if hasattr(X, "columns"):
            names = getattr(model, "feature_names_in_", None)
            X = X[list(names)] if names is not None else X
        self.X = np.array(X, dtype=np.float64, order="C")  # a copy: fetched values go in
        num_features = len(predictor.keys)
        if self.X.ndim != 2 or self.X.shape[1] != num_features:
            raise CEGBError(f"X should have {num_features} columns, got shape {self.X.shape}")
        n = len(self.X)
        known, self.ids = _known_and_ids(self.X, known, ids)
        self.known = ~np.isnan(self.X) if known is None else known.copy()  # a fetched value becomes known
        self.fetched = np.zeros((n, num_features), dtype=bool)
        self.status = np.full(n, PENDING, dtype=np.int8)
        self.rounds = self.fetch_calls = 0
        self.failures: list[FetchFailure] = []
        self.run = model.__lightgbm_cegb_policy__(n)
        self.units = model.units_
        group_of = predictor._group_of
        # the predictor's fetch unit of each of the policy's units: a feature, or num_features + its group
        self.unit_of = [columns[0] if group_of[columns[0]] < 0 else num_features + int(group_of[columns[0]])
                        for columns in self.units]
        self.policy_unit = {unit: u for u, unit in enumerate(self.unit_of)}
        self.started = False

    def advance(self) -> list[tuple[int, np.ndarray]]:
        """The next round's fetches: (unit, rows) of the rows whose next purchase is not in X already."""
        while True:
            if self.started:
                self.run.evaluate()
            self.started = True
            wanted = self.run.requests()
            if not wanted:
                self.status[self.status == PENDING] = DONE
                return []
            requests = []
            for u, rows in wanted:
                columns = list(self.units[u])
                have = self.known[np.ix_(rows, columns)].all(axis=1)
                if have.any():
                    self.run.deliver(u, rows[have], self.X[np.ix_(rows[have], columns)], pay=False)
                if not have.all():
                    requests.append((self.unit_of[u], rows[~have]))
            if requests:
                self.rounds += 1
                return self.predictor._in_order(requests, self.ids)

    def deliver(self, requests, outcomes) -> None:
        """Store what each fetch returned and hand it to the policy; then handle the failures."""
        received, failed = _received(self.predictor, self.ids, requests, outcomes)
        for unit, rows, values in received:
            u = self.policy_unit[unit]
            columns = list(self.units[u])
            given = self.known[np.ix_(rows, columns)]
            values = np.where(np.isnan(values), np.nan, values)
            block = np.where(given, self.X[np.ix_(rows, columns)], values)  # values given in X stay
            self.X[np.ix_(rows, columns)] = block
            self.fetched[np.ix_(rows, columns)] |= ~given
            self.known[np.ix_(rows, columns)] = True
            self.run.deliver(u, rows, block)
        if failed:
            for rows in _failed(self, failed):
                self.run.drop(rows)

    def finish(self, method: str, kwargs: dict) -> LazyResult:
        done = self.status == DONE
        prediction = None
        if done.any() or not len(done):
            proba = self.run.proba[done]
            values = proba if method == "predict_proba" else self.predictor.model.classes_[proba.argmax(axis=1)]
            prediction = _spread(values, done)
        return self.result(prediction)

    def result(self, prediction) -> LazyResult:
        cost = self.run.result().cost
        X = np.where(self.known, self.X, np.nan)
        return LazyResult(prediction=prediction, status=self.status, X=X, known=self.known, fetched=self.fetched,
                          acquisition=cost.acquisition, evaluation=cost.evaluation,
                          leaves=np.zeros((len(X), 0), dtype=np.int32), rounds=self.rounds,
                          fetch_calls=self.fetch_calls, failures=self.failures)


def _known_and_ids(X: np.ndarray, known, ids, positions: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """acquire's ``known`` (None: X's non-NaN values) and ``ids`` (default: the rows' positions; None with
    ``positions=False``), checked against the batch X."""
    if known is not None:
        known = np.asarray(known)
        if known.shape != X.shape or known.dtype != bool:
            raise CEGBError(f"known should be a bool array of X's shape {X.shape}, got {known.dtype} of shape "
                            f"{known.shape}")
    if ids is None:
        return known, np.arange(len(X)) if positions else None
    ids = np.asarray(ids)
    if ids.shape != (len(X),):
        raise CEGBError(f"ids should hold one id per row of X ({len(X)}), got shape {ids.shape}")
    return known, ids


def _received(predictor: LazyPredictor, ids: np.ndarray, requests, outcomes) -> tuple[list, list[FetchFailure]]:
    """A round's fetch outcomes (the batch's row ``ids``): (unit, rows, values: float64 of shape (len(rows), the
    unit's features)) of the calls that returned what their contract allows, and a FetchFailure for each other
    call. A NaN among the values may have any bits (the caller stores it as a missing value, never as
    UNKNOWN)."""
    received, failed = [], []
    for (unit, rows), outcome in zip(requests, outcomes):
        if outcome is STORED:
            continue
        if not isinstance(outcome, BaseException):
            try:
                values = predictor._values(unit, ids[rows], outcome)
            except _Returned as exc:
                outcome = exc
        if isinstance(outcome, BaseException):
            failed.append(FetchFailure(predictor._unit_keys[unit], rows, outcome, ids[rows]))
        else:
            received.append((unit, rows, values))
    return received, failed


def _failed(run, failed: list[FetchFailure]) -> list[np.ndarray]:
    """Record a round's failed fetches on ``run`` (a _Run or _PolicyRun): with errors="raise", raise the first
    (LazyFetchValueError where fetch broke its contract); else mark their rows FAILED and return them."""
    run.failures.extend(failed)
    if run.predictor.errors == "raise":
        kind = LazyFetchValueError if isinstance(failed[0].error, _Returned) else LazyFetchError
        raise kind(failed[0], run.result(None)) from failed[0].error
    for failure in failed:
        run.status[failure.rows] = FAILED
    return [failure.rows for failure in failed]


def _spread(values: np.ndarray, done: np.ndarray) -> np.ndarray:
    """The predictions ``values`` of the DONE rows in an array of every row: NaN elsewhere (None in an object
    array, for values that are not numbers)."""
    if done.all():
        return values
    fill = np.nan if values.dtype.kind in "fc" else None
    spread = np.full((len(done),) + values.shape[1:], fill, dtype=values.dtype if fill is not None else object)
    spread[done] = values
    return spread


def _by_id(outcome, ids: np.ndarray):
    """A pandas Series or DataFrame that fetch returned, in the order of the row ids asked for: by its index, which
    must hold exactly those ids (a store's ``pd.read_sql(..., index_col="id")`` in its own order); by position
    where the index is a RangeIndex (a frame built from values in the ids' order). Anything else as it is."""
    index = getattr(outcome, "index", None)
    if index is None or not hasattr(outcome, "reindex"):
        return outcome
    import pandas as pd

    if isinstance(index, pd.RangeIndex):
        return outcome
    if len(index) != len(ids) or index.has_duplicates or not index.isin(ids).all():
        shown = ", ".join(map(repr, index[:5].tolist())) + (", ..." if len(index) > 5 else "")
        raise _Returned(f"returned a pandas {type(outcome).__name__} indexed by [{shown}]: its index should hold "
                        f"each of the {len(ids)} row ids asked for once (or be a RangeIndex, read by position)")
    return outcome.loc[ids]


def _numbers(outcome, where: str = "") -> np.ndarray:
    try:
        values = np.asarray(outcome)
        if values.dtype.kind in "USV":
            raise TypeError(f"got {values.dtype} values")
        return values.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise _Returned(f"returned values {where}that are not numbers ({exc})") from None


def _own_output(model, forest: Forest) -> float | None:
    """For a Booster whose ``predict`` LightGBM computes as the raw score (GBDT::Predict: the trees' outputs
    summed in tree order from 0.0, averaged for rf; 0.0 returned here) or as binary's sigmoid (its scale):
    arithmetic that Forest.raw_score and _engine.sigmoid repeat operation for operation. None otherwise."""
    if not isinstance(model, lgb.Booster) or forest.linear is not None or not forest.objective:
        return None
    name, *options = forest.objective.split(" ")
    if name in RAW_OBJECTIVES and not options:
        return 0.0
    if name == "binary" and len(options) == 1 and options[0].startswith("sigmoid:"):
        scale = float(options[0].split(":", 1)[1])
        # the text has 6 digits: a Booster trained here may hold a scale that the text rounds
        given = (model.params or {}).get("sigmoid", scale)
        return scale if scale > 0 and float(given) == scale else None
    return None


def _is_async(fetch) -> bool:
    # getattr reads a callable object's __call__ method (is it async?); not a callable test, hence the noqa
    return inspect.iscoroutinefunction(fetch) or inspect.iscoroutinefunction(
        getattr(fetch, "__call__", None))  # noqa: B004


class _Workers:
    """Daemon threads for aacquire's synchronous fetch calls: a call goes to an idle worker, or to a new one when
    none is idle, so a call that never returns holds its own thread only, never one that a later call would wait
    for (the event loop's default executor queues calls behind its busy workers); a worker idle for ``idle``
    seconds ends. Threads are reused: starting one per call costs more than a fast store's query."""

    def __init__(self, idle: float = 30.0) -> None:
        self.idle_seconds = idle
        self.lock = threading.Lock()
        self.waiting = 0  # workers waiting for a task that no submit has counted on yet
        self.tasks: queue.SimpleQueue = queue.SimpleQueue()

    def submit(self, task: Callable[[], None]) -> None:
        with self.lock:
            reuse = self.waiting > 0
            self.waiting -= reuse
        self.tasks.put(task)
        if not reuse:
            threading.Thread(target=self._work, daemon=True).start()

    def _work(self) -> None:
        while True:
            try:
                task = self.tasks.get(timeout=self.idle_seconds)
            except queue.Empty:
                with self.lock:
                    if self.waiting > 0:  # not counted on by a submit: end
                        self.waiting -= 1
                        return
                continue  # a submit counted on this worker: its task is on the way
            task()
            with self.lock:
                self.waiting += 1


_WORKERS = _Workers()


def in_thread(function, *args) -> asyncio.Future:
    """function(*args) on a worker thread (never behind another call; see _Workers), awaited on the running event
    loop: how ``aacquire`` calls a synchronous fetch (and the service's eager fetches)."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def run():
        try:
            result = function(*args)
            settle = lambda: future.done() or future.set_result(result)  # noqa: E731
        except BaseException as exc:  # handed to the awaiting coroutine
            # a KeyboardInterrupt / SystemExit of this thread is the function's own: re-raised by the await, it
            # would stop the event loop as a real interrupt does
            error = exc if isinstance(exc, Exception) else FetchInterrupted(exc)  # 'exc' is unbound after
            settle = lambda: future.done() or future.set_exception(error)  # noqa: E731
        try:
            loop.call_soon_threadsafe(settle)
        except RuntimeError:  # the loop has closed: nobody waits for this call any more
            pass

    _WORKERS.submit(run)
    return future
