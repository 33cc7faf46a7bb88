"""A service's one-row requests on buffers made once: ``LazyPredictor.prepare()``.

A request of one row pays, in ``acquire``, for what a batch of any size needs: its arrays made (a dozen), its
arguments checked, a list of requests per round. A PreparedRow makes one batch of one row when it is prepared and
restarts it for each request (``LazyBatch.restart``); its rounds run in the kernel (``LazyBatch.serve_row``), which
calls fetch once per unit a round and stores a float64 array of one value without a Python step; a model whose
output the kernel computes (a LightGBM Booster's raw score or binary's sigmoid, a Forest's raw score) is answered
from the leaves the row reached (``LazyBatch.row_output``). Whatever the kernel does not store (a group's values,
pandas objects, a failed call) goes on through the predictor's general path on the same batch, with the same
results as ``acquire``.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from lightgbm_cegb._engine import LazyBatch
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.forest import Forest
from lightgbm_cegb.serving.results import DONE, LazyResult
from lightgbm_cegb.serving.runs import RoutingRun


class PreparedRow:
    """One-row requests of a LazyPredictor, served on one batch made once (made by :meth:`LazyPredictor.prepare`).

    Each call of :meth:`predict` answers as ``predictor.acquire(x[None], known[None], ids=[id], method=...)`` would:
    the same fetch calls in the same order, the same prediction to the bit, the same costs (:meth:`result`). fetch
    is called with ``ids`` an int64 array holding the request's id (read-only, the same array at every call: copy it
    to keep it). Not thread-safe: one PreparedRow per thread (they may share a predictor).

    Attributes
    ----------
    predictor : LazyPredictor
        The predictor served.
    method : str
        The model's method that predicts.
    """

    def __init__(self, predictor, method: str, kwargs: dict) -> None:
        if predictor.policy:
            raise CEGBError(f"prepare: {type(predictor.model).__name__} decides per row what to buy on its own run; "
                            "a prepared row serves models routed tree by tree (LightGBM, XGBoost, CatBoost, "
                            "scikit-learn trees, a Forest): serve it with acquire")
        if predictor._async:
            raise CEGBError("prepare: fetch is a coroutine function, and a prepared row calls fetch synchronously; "
                            "serve it with aacquire / apredict")
        predictor._check_method(method, kwargs)
        self.predictor, self.method, self._kwargs = predictor, method, dict(kwargs)
        forest = predictor.forest
        self._width = forest.num_features
        self._nothing = np.full(self._width, np.nan)  # the values of a row that knows nothing
        self._nothing.setflags(write=False)
        self._id = np.zeros(1, dtype=np.int64)
        self._ids = self._id.view()
        self._ids.setflags(write=False)
        self._batch = LazyBatch(predictor._plan, self._nothing[None], None, 1)
        self._run = RoutingRun.over(predictor, self._batch, self._ids)
        # the kernel's own rounds: fetch in the calling thread, in the plan's fixed order, values stored as they come
        self._compiled = (not predictor.max_workers and predictor.timeout is None and not predictor._sorted
                          and forest.missing_value is None)
        raw = isinstance(predictor.model, Forest) or bool(kwargs.get("raw_score"))
        own = isinstance(predictor.model, Forest) or (predictor._own is not None and method == "predict"
                                                      and set(kwargs) <= {"raw_score"})
        # (sigmoid, scale, average) of an output the kernel computes; None: the predictor's _predict
        self._output = (not raw and predictor._own > 0, predictor._own or 0.0, not raw and forest.average_output) \
            if own and forest.trees_per_iteration == 1 else None
        self._answered = False  # whether the batch holds the last request's answer (result() builds it)
        self._last = None  # its prediction, when the kernel computed it
        self._result: LazyResult | None = None

    def predict(self, x=None, known=None, *, id=0):
        """The model's prediction of one row, fetching only what its paths need.

        Parameters
        ----------
        x : array-like of shape (n_features,), optional
            The row's values known so far, in the model's column order (NaN, or anything where ``known`` is False,
            for the others); None: nothing known.
        known : array-like of bool of shape (n_features,), optional
            Which values x gives (default: its non-NaN ones).
        id : object, default=0
            The row's id, given to fetch (an integer in the int64 array ``ids``; anything else in an array of its
            own).

        Returns
        -------
        float or ndarray
            What ``acquire``'s ``prediction[0]`` is: a float for a model of one output, the row of a model of more;
            NaN when a fetch failed with ``errors="partial"``.

        Raises
        ------
        LazyFetchError
            With ``errors="raise"``, when a fetch call fails (its ``result`` holds what was computed).
        CEGBError
            When x or known do not hold one value per feature.
        """
        predictor, batch, run = self.predictor, self._batch, self._run
        values, given = self._row(x, known)
        batch.restart(values, given)
        if type(id) is int or (isinstance(id, numbers.Integral) and not isinstance(id, bool)):
            if not -2**63 <= id < 2**63:
                raise CEGBError(f"id: an integer id should fit in int64, got {id}")
            self._id[0] = id
            run.fetch_ids = self._ids
        else:
            run.fetch_ids = np.array([id])
        run.rounds = run.fetch_calls = 0
        run.failures.clear()
        self._answered, self._last, self._result = False, None, None
        if self._compiled:
            run.rounds, run.fetch_calls, left = batch.serve_row(predictor.fetch, predictor._unit_keys, run.fetch_ids)
            if left is None and self._output is not None:  # DONE, every value stored: the common case
                self._answered, self._last = True, batch.row_output(*self._output)
                return self._last
            if left is not None:  # a round with a call the kernel did not store: delivered as acquire does
                requests, first = left
                run.deliver(requests, predictor._fetch_round(requests, run, first))
        while requests := run.advance():
            run.deliver(requests, predictor._fetch_round(requests, run))
        self._answered = True
        if batch.status[0] != DONE:
            return math.nan
        if self._output is not None:
            self._last = batch.row_output(*self._output)
            return self._last
        self._result = run.finish(self.method, self._kwargs)
        return self._result.prediction[0]

    def result(self) -> LazyResult:
        """The last request's LazyResult, as ``acquire`` returns it (copies: the next request reuses the buffers).

        Returns
        -------
        LazyResult
            Of one row.

        Raises
        ------
        CEGBError
            Before any request, or after one that raised.
        """
        if self._result is None:
            if not self._answered:
                raise CEGBError("result: no request has been answered yet (or the last one raised)")
            self._result = self._run.result(None if self._last is None else np.array([self._last]))
        return self._result

    @property
    def cost(self) -> float:
        """The last request's cost: what its row's paths fetched and passed (``result().per_instance[0]``)."""
        return float(self._batch.acquisition[0] + self._batch.evaluation[0])

    def _row(self, x, known) -> tuple[np.ndarray, np.ndarray | None]:
        """x and known as restart takes them: float64 values, uint8 flags (None: x's non-NaN values); a model that
        reads a value as missing (XGBoost's ``missing``) gets it as a missing value given."""
        width, forest = self._width, self.predictor.forest
        if x is None:
            values = self._nothing
        elif type(x) is np.ndarray and x.dtype == np.float64 and x.shape == (width,):
            values = x
        else:
            try:
                values = np.asarray(x, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise CEGBError(f"x should hold the row's {width} values as numbers (NaN: not known), got "
                                f"{type(x).__name__}: {exc}") from None
            if values.shape != (width,):
                raise CEGBError(f"x should hold the row's {width} values (NaN: not known), got shape {values.shape}")
        if known is not None:
            known = np.asarray(known)
            if known.shape != (width,) or known.dtype != bool:
                raise CEGBError(f"known should be a bool array of the row's {width} values, got {known.dtype} of "
                                f"shape {known.shape}")
        if forest.missing_value is not None:  # as RoutingRun reads it
            if known is None:
                known = ~np.isnan(values)
            values = forest.with_missing(values[None])[0]
        return np.ascontiguousarray(values), None if known is None else np.ascontiguousarray(known).view(np.uint8)
