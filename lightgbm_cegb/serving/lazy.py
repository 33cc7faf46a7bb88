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
reached with the model library's own operations (``serving.outputs``: LightGBM's raw score, sigmoid and softmax;
XGBoost's float32 margins and transforms; CatBoost's scaled sums; scikit-learn's trees, forests and gradient
boosting through their own rules and loss), otherwise by the model's ``predict`` on the rows with the values nobody
fetched set to 0.0, which no split reads.

Its length: this module is the predictor; its fetch rounds (in turn, on threads with timeouts, or awaited) and its
checks of what fetch returns stay with the one class whose state they read. A batch's rounds are in
``runs``, what a call returns and raises in ``results``, the threads of synchronous fetches under asyncio in
``workers``.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import os
import threading
import time
from collections.abc import Callable, Mapping

import numpy as np

from lightgbm_cegb._engine import STORED, UNKNOWN_BITS, LazyBatch, LazyPlan
from lightgbm_cegb.base import COSTS
from lightgbm_cegb.core.costs import resolve_costs
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.forest import Forest
from lightgbm_cegb.core.parallel import N_JOBS, resolve_n_jobs
from lightgbm_cegb.core.partitions import is_dask, over_partitions, partitions, query_parts
from lightgbm_cegb.core.validation import CheckedElsewhere, NoneOr, Number, OneOf, Satisfies, validated
from lightgbm_cegb.io.models import booster_of, fitted_costs, library_of, load_file, num_trees_used, to_forest, unwrap
from lightgbm_cegb.serving.outputs import kernel_output
from lightgbm_cegb.serving.prepared import PreparedRow
from lightgbm_cegb.serving.results import FetchInterrupted, LazyResult, Malformed, stacked_predictions
from lightgbm_cegb.serving.runs import CompiledPolicyRun, PolicyModelRun, RoutingRun, fetch_units, policy_run
from lightgbm_cegb.serving.workers import direct, in_thread, is_async

ORDERS = ("cheapest", "costliest", "most_rows", "model")
#: aacquire routes batches of at most this many rows on the event loop (in microseconds; handing them to a thread
#: would take longer), larger ones on a thread
INLINE_ROWS = 64
#: a value not known yet: the NaN with the bits UNKNOWN_BITS (see LazyBatch)
UNKNOWN = np.array([UNKNOWN_BITS], dtype=np.uint64).view(np.float64)[0]


def _rebuilt(model, fetch, options: dict) -> LazyPredictor:
    """A LazyPredictor unpickled: built from its arguments."""
    return LazyPredictor(model, fetch, **options)


def _partition_result(X, start: int, predictor: LazyPredictor, ids, method: str, kwargs: dict, whole: bool,
                      group=None) -> LazyResult | tuple[np.ndarray | None, int]:
    """The LazyResult of one partition of a Dask X whose first row is row ``start`` of X (the ids of its rows: ``ids``'
    slice, default their positions in X; a ranker's: ``group``, the sizes of its queries); not ``whole``: its
    predictions and rows only."""
    n = len(X)
    own = np.arange(start, start + n) if ids is None else ids[start:start + n]
    if len(own) != n:
        raise CEGBError(f"ids should have one id per row of X, got {len(ids)} for more rows")
    if group is not None:
        kwargs = {**kwargs, "group": np.asarray(group)}
    result = predictor.acquire(X, ids=own, method=method, **kwargs)
    return result if whole else (result.prediction, n)


class LazyPredictor:
    """Predict with ``model`` fetching each feature (or feature group) only for the rows whose paths reach a
    split on it.

    Parameters
    ----------
    model : lightgbm.Booster, LGBMModel, XGBoost or CatBoost model, model file, fitted scikit-learn tree model, \
PruneResult, Forest or policy
        The tree models ``prediction_cost`` takes (a model file of LightGBM, XGBoost or CatBoost is loaded with its
        library to predict), not a Pipeline (its steps transform the values before the trees see them, so the trees'
        splits name no column to fetch). A Forest has no ``predict``: its raw score is returned (as LightGBM's
        ``predict(raw_score=True)``). Linear trees are refused (their leaves read features no split tests). A policy
        model (one with ``__lightgbm_cegb_policy__``: the adaptive and the staged acquisitions, ``EarlyExit``)
        decides itself what each row buys next: fetch is called with the units it asks for, round by round, and its
        predictions equal its own; its ``_policy_methods`` name the methods served and their arguments (the ranker's
        ``group``; default ``predict`` and ``predict_proba`` without arguments), and its run's ``output(method)``
        gives them.
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
        once (a store's ``pd.read_sql(..., index_col="id")`` in its own order works). The values are read after
        the round's last call: an array returned may not be overwritten by a later call of the same round. A
        coroutine function is awaited by ``aacquire``/``apredict``.
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

    _constraints = {
        "model": CheckedElsewhere("the model readers (io.models.to_forest) or the policy protocol"),
        "fetch": Satisfies(callable, "a callable fetch(key, row_ids) -> values", bad=(3, None), show_type=True),
        "feature_costs": COSTS,
        "num_iteration": CheckedElsewhere("Forest.num_trees_for: None or an integer"),
        "order": Satisfies(lambda order: callable(order) or (isinstance(order, str) and order in ORDERS),
                           f"one of {ORDERS} or a callable", bad=("random", None, 1)),
        "max_workers": NoneOr(Number(1, integer=True)),
        "timeout": Satisfies(lambda timeout: timeout is None or (isinstance(timeout, (int, float))
                                                                and not isinstance(timeout, bool) and timeout > 0),
                             "None or a number of seconds > 0", bad=(0, -1, math.nan, "1", True)),
        "retries": Number(0, integer=True), "errors": OneOf(("raise", "partial")),
        "feature_keys": OneOf(("name", "index")), "n_jobs": N_JOBS,
    }

    @validated(_constraints)
    def __init__(self, model, fetch: Callable, *, feature_costs=None, num_iteration: int | None = None,
                 order="cheapest", max_workers: int | None = None, timeout: float | None = None,
                 retries: int = 0, errors: str = "raise", feature_keys: str = "name",
                 n_jobs: int | None = None) -> None:
        given, model = model, unwrap(model)  # a Selection stands for its model, and carries its costs
        self._arguments = (given, fetch, {"feature_costs": feature_costs, "num_iteration": num_iteration,
                                          "order": order, "max_workers": max_workers, "timeout": timeout,
                                          "retries": retries, "errors": errors, "feature_keys": feature_keys,
                                          "n_jobs": n_jobs})
        if hasattr(model, "steps") and hasattr(model, "named_steps"):  # a scikit-learn Pipeline
            raise CEGBError("model: a Pipeline's steps transform the values before its trees see them, so a split "
                            "names no column to fetch: serve its final estimator (model[-1]) on the transformed "
                            "features, or a model trained on the raw columns")
        self._threads = resolve_n_jobs(n_jobs)  # the batch uses at most one per block of 64 rows
        self.policy = getattr(type(model), "__lightgbm_cegb_policy__", None) is not None
        if self.policy:  # a model that decides per row what to buy next (AdaptiveAcquisitionClassifier)
            if num_iteration is not None:
                raise CEGBError(f"num_iteration: {type(model).__name__} decides itself which trees or stages each "
                                f"row goes through (an EarlyExit covers its own num_iteration), got {num_iteration!r}")
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
            self.costs_ = resolve_costs(costs, self.forest.num_features, self.forest.feature_names,
                                        self.forest.params, unpriced="zero")
            names, num_features = self.forest.feature_names, self.forest.num_features
        # the fetch order's costs: 0 for every feature when the costs have no lazy part (a model trained with
        # coupled or split penalties only)
        self._lazy = self.costs_.arrays(num_features)[0]
        self.fetch, self.order, self.max_workers = fetch, order, max_workers
        self._direct = (fetch, direct(fetch))  # (fetch, what the compiled rounds call for it)
        self._async = is_async(fetch)
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
        self._unit_rank = {int(u): rank for rank, u in enumerate(units)}  # a fixed order's place of each unit
        if self.policy:
            self._policy_units = fetch_units(model.units_, self._group_of, num_features)
            # a group's fetch answers its members in the costs' order, a policy unit holds its columns in its own:
            # the columns of a group's values in the unit's order, where they differ
            self._unit_columns = {}
            for u, columns in enumerate(model.units_):
                g = self._group_of[columns[0]]
                if g >= 0 and list(self._members[g]) != list(columns):
                    self._unit_columns[u] = np.array([list(self._members[g]).index(f) for f in columns])
        self._own = None if self.policy else kernel_output(self.model, self.forest)  # None: the model's predict
        if not self.policy:
            lazy, _, split = self.costs_.arrays(num_features)
            forest, own = self.forest, self._own
            leaf_value = forest.leaf_value if own is None or own.leaf_value is None else own.leaf_value
            self._plan = LazyPlan(forest.flat, self.num_trees, lazy, split, self._group_of, group_lazy,
                                  np.cumsum([0] + [len(m) for m in self._members]),
                                  np.concatenate([np.zeros(0, dtype=np.int64), *self._members]), self._unit_order,
                                  float(self.costs_.tree), forest.float32, forest.leaf_offset, leaf_value,
                                  None if own is None else own.start, own is not None and own.sum32)

    def __reduce__(self):
        """Pickled as its arguments (its compiled plan is built again where it is unpickled: a Dask worker)."""
        model, fetch, options = self._arguments
        return _rebuilt, (model, fetch, options)

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

    def read_fetched(self, key, ids: np.ndarray, values) -> np.ndarray:
        """What ``fetch(key, ids)`` returned, read as a lazy prediction reads it: how the service reads its eager
        fetches (every key for every row) too.

        Parameters
        ----------
        key : object
            One of :attr:`fetch_keys`.
        ids : numpy.ndarray
            The row ids fetch was called with.
        values : object
            What it returned (see ``fetch``).

        Returns
        -------
        numpy.ndarray
            float64 of shape (len(ids), 1) for a feature, (len(ids), its members) for a group (``groups[key]``'s
            order).

        Raises
        ------
        CEGBError
            When ``values`` are not what ``fetch`` should return for ``key`` (the error says what was expected).
        """
        return self._values(self._unit_keys.index(key), ids, values)

    def acquire(self, X, known=None, *, ids=None, method: str = "predict", **kwargs) -> LazyResult:
        """Route, fetch and predict a batch: the LazyResult of every row. ``known``: bool mask of the values
        given in X (default: the non-NaN ones); ``method``: the model's method that predicts
        ("predict", "predict_proba", ...), called with ``kwargs``.

        Parameters
        ----------
        X : array-like of shape (n_rows, n_features)
            The rows' values known so far (NaN, or anything where ``known`` is False, for the others). A Dask array
            (chunked along its rows) or DataFrame is served partition by partition where its scheduler runs it, fetch
            called with the rows' ids in all of X, and the partitions' results stacked (``LazyResult.stacked``:
            every row's as of X in memory; ``rounds`` the most a partition took, ``fetch_calls`` all of them).
        known : ndarray of bool of shape (n_rows, n_features), optional
            Which values X gives (default: the non-NaN ones, so that a NaN of X is fetched; to give a missing
            value, a NaN, mark it known). Not taken with a Dask X.
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
            With ``errors="raise"``, when a fetch call fails (its ``result`` holds what was computed; of a Dask X,
            what was computed of the partition where it failed).
        LazyFetchValueError
            With ``errors="raise"``, when a fetch returns what its contract does not allow.
        CEGBError
            When fetch is a coroutine function (use :meth:`aacquire`), the model has no such ``method``, or
            ``known`` or ``ids`` do not match X.
        """
        if self._async:
            raise CEGBError("fetch is a coroutine function: use aacquire / apredict")
        if is_dask(X):
            return LazyResult.stacked(self._by_partition(X, known, ids, method, kwargs, whole=True))
        self._check_method(method, kwargs)
        run = self._run(X, known, ids, kwargs)
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
        run = self._run(X, known, ids, kwargs)
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
        return self._predicted(X, known, ids, "predict", kwargs)

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
        return self._predicted(X, known, ids, "predict_proba", kwargs)

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

    def prepare(self, method: str = "predict", **kwargs) -> PreparedRow:
        """A service's one-row requests on buffers made once: ``prepare().predict(x, id=...)`` answers as
        ``acquire(x[None], ids=[id], method=method, **kwargs).prediction[0]``, with the same fetch calls, in a few
        microseconds of its own (see :class:`~lightgbm_cegb.serving.prepared.PreparedRow`).

        Parameters
        ----------
        method : str, default="predict"
            The model's method that predicts.
        **kwargs : dict
            Its arguments.

        Returns
        -------
        PreparedRow
            Not thread-safe: one per thread.

        Raises
        ------
        CEGBError
            For a coroutine fetch (see :meth:`aacquire`), or a method the model lacks or arguments it does not take.

        Examples
        --------
        >>> import lightgbm as lgb, numpy as np
        >>> from lightgbm_cegb import LazyPredictor
        >>> X = np.random.default_rng(0).normal(size=(500, 4))
        >>> booster = lgb.train({"objective": "binary", "verbose": -1}, lgb.Dataset(X, X[:, 0] > 0), 10)
        >>> row = LazyPredictor(booster, lambda key, ids: X[ids, key], feature_keys="index").prepare()
        >>> bool(row.predict(id=7) == booster.predict(X[7:8])[0])
        True
        """
        return PreparedRow(self, method, kwargs)

    # ------------------------------------------------------------------------------------ fetching

    def _fetch_round(self, requests, run, first: list | None = None) -> list:
        """Outcome (values or the exception) of each request, retried as configured. With max_workers or a
        timeout, each call runs on a thread of its own (max_workers at a time), timed from its start: a call
        that times out keeps its thread, never another call's. Without them, the calls of a run that stores fetches
        are made by its compiled batch (a RoutingRun's LazyBatch, unless the model reads a value as missing:
        ``Forest.missing_value``, which RoutingRun.deliver maps; a CompiledPolicyRun's batch), which stores a
        feature's float64 values at once (outcome STORED). ``first``: the outcomes of the first calls, made (and
        counted) by the caller (LazyBatch.serve_row)."""
        outcomes: list = [None] * len(requests)
        pending = list(range(len(requests)))
        for attempt in range(self.retries + 1):
            if attempt or first is None:
                run.fetch_calls += len(pending)
            if attempt == 0 and first is not None:
                outcomes = self._returned_all(first)
            elif not self.max_workers and self.timeout is None:
                if attempt == 0 and run.stores_fetches:
                    outcomes = run.fetch_round(requests, self._direct_fetch, self._unit_keys)
                    if outcomes is None:  # every call's values stored
                        return None
                    outcomes = self._returned_all(outcomes)
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

    @property
    def _direct_fetch(self) -> Callable:
        """What the compiled rounds call: ``workers.direct`` of ``fetch`` (as it is now: it may be set again)."""
        if self._direct[0] is not self.fetch:
            self._direct = (self.fetch, direct(self.fetch))
        return self._direct[1]

    def _returned_all(self, outcomes: list) -> list:
        """_returned of each outcome that is neither stored nor an exception."""
        return [outcome if outcome is STORED or isinstance(outcome, BaseException) else self._returned(outcome)
                for outcome in outcomes]

    @staticmethod
    def _returned(values):
        """What a synchronous fetch returned, or the error of an awaitable (closed: never awaited)."""
        if type(values) is not np.ndarray and inspect.isawaitable(values):
            getattr(values, "close", lambda: None)()
            return Malformed("fetch returned an awaitable: use aacquire / apredict for asynchronous fetches")
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
        column = self._unit_column[unit]
        if self.order == "model":
            return column, unit
        first = -len(rows) if self.order == "most_rows" else self._unit_cost[unit]
        return (-first if self.order == "costliest" else first), column, unit

    def _values(self, unit: int, ids: np.ndarray, outcome) -> np.ndarray:
        """What fetch returned for the row ids ``ids`` of ``unit``, as float64 of shape (len(ids), its features),
        pandas objects aligned to the ids by their index (_by_id); a Malformed error saying what was expected
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
                raise Malformed(f"returned shape {values.shape}, expected ({n},): one value per row id")
            return values[:, None]
        name, members = self._unit_keys[unit], self.groups[self._unit_keys[unit]]
        if isinstance(outcome, Mapping) or hasattr(outcome, "columns"):  # a dict, a pandas DataFrame
            given = list(outcome.keys())
            if len(given) != len(members) or any(member not in given for member in members):
                raise Malformed(f"returned a mapping with the keys {given[:10]}, expected the members of group "
                                f"{name!r}: {members}")
            columns = []
            for member in members:
                values = _numbers(_by_id(outcome[member], ids), f"for member {member!r} ")
                if values.shape != (n,):
                    raise Malformed(f"returned shape {values.shape} for member {member!r} of group {name!r}, "
                                    f"expected ({n},): one value per row id")
                columns.append(values)
            return np.column_stack(columns) if columns else np.zeros((n, 0))
        values = _numbers(outcome)
        if values.shape != (n, len(members)):
            raise Malformed(f"returned shape {values.shape} for group {name!r}, expected ({n}, {len(members)}): one "
                            f"row per row id, one column per member {members} (or a mapping member -> values)")
        return values

    # ------------------------------------------------------------------------------------ predicting

    def _predicted(self, X, known, ids, method: str, kwargs: dict) -> np.ndarray:
        """:meth:`acquire`'s prediction; of a Dask X, only each partition's predictions come back (_by_partition),
        concatenated in the rows' order: those of X in memory."""
        if not is_dask(X):
            return self.acquire(X, known, ids=ids, method=method, **kwargs).prediction
        parts = self._by_partition(X, known, ids, method, kwargs, whole=False)
        return stacked_predictions([prediction for prediction, _ in parts], [n for _, n in parts])

    def _by_partition(self, X, known, ids, method: str, kwargs: dict, whole: bool) -> list:
        """Each partition's ``_partition_result`` of a Dask X, where its scheduler runs it (the predictor and its fetch
        pickled to a ``distributed`` client's workers), fetch called with the rows' ids in all of X (``ids``: a 1-D
        array of them, default their positions)."""
        if known is not None:
            raise CEGBError("known: a Dask X is read as its values known where they are not NaN; known is not "
                            f"taken with it, got {type(known).__name__}")
        self._check_method(method, kwargs)
        ids = None if ids is None else np.asarray(ids)
        if ids is not None and ids.ndim != 1:
            raise CEGBError(f"ids should be 1-dimensional, one id per row of X, got shape {ids.shape}")
        each = None
        if self.policy and "group" in getattr(self.model, "_policy_methods", {}).get(method, ()):
            # a ranker's queries: each partition's own sizes (a query lies whole in one partition)
            each = {"group": query_parts(kwargs.get("group"), len(partitions(X)))}
            kwargs = {name: value for name, value in kwargs.items() if name != "group"}
        parts = over_partitions(_partition_result, X, self, ids, method, kwargs, whole, starts=True, each=each)
        rows = sum(len(part.status) if whole else part[1] for part in parts)
        if ids is not None and len(ids) != rows:
            raise CEGBError(f"ids should have one id per row of X ({rows} rows), got {len(ids)}")
        return parts

    def _run(self, X, known, ids, kwargs: dict) -> PolicyModelRun | CompiledPolicyRun | RoutingRun:
        """The batch's run (a policy model's takes the method's ``kwargs``). A policy model reads a frame's columns
        by name: one it lacks is named here."""
        names = getattr(self.model, "feature_names_in_", None) if self.policy else None
        present = set(getattr(X, "columns", names if names is not None else ()))
        lacking = [] if names is None else [name for name in names if name not in present]
        if lacking:
            raise CEGBError(f"X: a frame should hold the model's columns (read by name); it lacks {lacking}")
        return policy_run(self, X, known, ids, kwargs) if self.policy else RoutingRun(self, X, known, ids)

    def _check_method(self, method: str, kwargs: dict) -> None:
        """Before anything is fetched: the model can predict so, with what the routing fetches."""
        if self.policy:
            methods = getattr(self.model, "_policy_methods", {"predict": (), "predict_proba": ()})
            if method not in methods or not set(kwargs) <= set(methods[method]):
                said = " or ".join(f"{name!r} with {list(arguments) or 'no arguments'}"
                                   for name, arguments in methods.items())
                raise CEGBError(f"method: {type(self.model).__name__} predicts with {said}, got {method!r} with "
                                f"{sorted(kwargs)}")
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
        """The model's prediction on the ``done`` rows of ``batch``. A Forest, and a model whose output
        ``serving.outputs`` computes, are predicted from the leaves the rows reached with their library's own
        arithmetic: the same bits as ``predict``, without routing again. Other models predict on the rows with 0.0 for
        the values nobody fetched (no split the rows passed reads them)."""
        model, forest = self.model, self.forest
        every = done.all()
        if isinstance(model, Forest) or (self._own is not None and self._own.takes(method, kwargs)):
            if getattr(self._own, "reads_leaves", False):
                leaves = batch.leaves()
                return self._own(leaves if every else leaves[done], method, kwargs)
            raw = isinstance(model, Forest) or bool(kwargs.get("raw_score"))  # as predict(raw_score=True)
            score = batch.raw_score(not raw and forest.average_output)
            score = score if every else score[done]
            if isinstance(model, Forest):
                return score[:, 0] if forest.trees_per_iteration == 1 else score
            return self._own(score, method, kwargs)
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
        raise Malformed(f"returned a pandas {type(outcome).__name__} indexed by [{shown}]: its index should hold "
                        f"each of the {len(ids)} row ids asked for once (or be a RangeIndex, read by position)")
    return outcome.loc[ids]


def _numbers(outcome, where: str = "") -> np.ndarray:
    try:
        values = np.asarray(outcome)
        if values.dtype.kind in "USV":
            raise TypeError(f"got {values.dtype} values")
        return values.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise Malformed(f"returned values {where}that are not numbers ({exc})") from None
