"""A service's one-row requests on buffers made once: ``LazyPredictor.prepare()``.

A request of one row pays, in ``acquire``, for what a batch of any size needs: its arrays made (a dozen), its
arguments checked, a list of requests per round and a Python step per fetch. A PreparedRow makes one batch of one row
when it is prepared and restarts it for each request (``restart``); its rounds run in the kernel (``serve_row``),
which calls fetch once per unit a round and stores a float64 array of one value without a Python step.

- A model routed tree by tree (LightGBM, XGBoost, CatBoost, scikit-learn trees, a Forest) runs on a ``LazyBatch``;
  one whose output is one number the kernel computes (a LightGBM model's raw score or binary's sigmoid, see
  ``serving.outputs``; a Forest's raw score) is answered from the leaves the row reached (``LazyBatch.row_output``),
  and such a request allocates no array.
- A policy model with a compiled run (the staged and the adaptive acquisition) runs on its ``LadderBatch`` or
  ``PolicyBatch``, made again when the model's settings change (``__lightgbm_cegb_batch_key__``); a policy model
  without one is served by ``acquire`` of the row.

Whatever the kernel does not store (a group's values, pandas objects, lists, a failed call), and every round of a
predictor that fetches on threads (``max_workers``, ``timeout``) or sorts each round (``order``), goes on through the
predictor's general path on the same batch: every answer is ``acquire``'s.
"""

from __future__ import annotations

import dataclasses
import math
import numbers

import numpy as np

from lightgbm_cegb._engine import LazyBatch
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.forest import Forest
from lightgbm_cegb.serving.results import DONE, PENDING, LazyFetchError, LazyResult
from lightgbm_cegb.serving.runs import CompiledPolicyRun, RoutingRun

#: the arrays of a LazyResult that a prepared row's result copies (its batch serves the next request)
RESULT_ARRAYS = ("prediction", "status", "X", "known", "fetched", "acquisition", "evaluation", "leaves")


class PreparedRow:
    """One-row requests of a LazyPredictor, served on one batch made once (made by :meth:`LazyPredictor.prepare`).

    Each call of :meth:`predict` answers as ``predictor.acquire(x[None], known[None], ids=[id], method=...)`` would:
    the same fetch calls in the same order, the same prediction to the bit, the same costs (:meth:`result`). fetch
    is called with ``ids`` an int64 array holding the request's id (read-only, the same array at every call: copy it
    to keep it). Not thread-safe: one PreparedRow per thread (they may share a predictor).

    Parameters
    ----------
    predictor : LazyPredictor
        The predictor served.
    method : str
        The model's method that predicts.
    kwargs : dict
        Its arguments.

    Raises
    ------
    CEGBError
        For a coroutine fetch, or a method the model lacks or arguments it does not take.
    """

    def __init__(self, predictor, method: str, kwargs: dict) -> None:
        if predictor._async:
            raise CEGBError("prepare: fetch is a coroutine function, and a prepared row calls fetch synchronously; "
                            "serve it with aacquire / apredict")
        predictor._check_method(method, kwargs)
        self.predictor, self.method, self._kwargs = predictor, method, dict(kwargs)
        self._width = len(predictor.keys)
        self._nothing = np.full(self._width, np.nan)  # the values of a row that knows nothing
        self._nothing.setflags(write=False)
        self._id = np.zeros(1, dtype=np.int64)
        self._ids = self._id.view()
        self._ids.setflags(write=False)
        # the kernel's own rounds: fetch in the calling thread, in a fixed order, values stored as they come
        self._compiled = not predictor.max_workers and predictor.timeout is None and not predictor._sorted
        self._answered = False  # whether the batch holds the last request's answer (result() builds it)
        self._last = None  # its prediction
        self._result: LazyResult | None = None
        self._batch = self._run = self._batch_key = self._output = None
        if predictor.policy:
            self._policy_batch()
            self._serve = self._serve_policy
        else:
            self._routed_batch()
            self._serve = self._serve_routed

    def __reduce__(self):
        """Pickled as its predictor and method (its batch is made again where it is unpickled)."""
        return PreparedRow, (self.predictor, self.method, self._kwargs)

    def predict(self, x=None, known=None, *, id=0):
        """The model's prediction of one row, fetching only what it needs.

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
            What ``acquire``'s ``prediction[0]`` is: a float for a model of one output, the row of a model of more
            (``predict_proba``'s probabilities); NaN when a fetch failed with ``errors="partial"``.

        Raises
        ------
        LazyFetchError
            With ``errors="raise"``, when a fetch call fails (its ``result`` holds what was computed).
        CEGBError
            When x or known do not hold one value per feature, or id is an integer beyond int64.
        """
        values, given = (self._nothing, None) if x is None and known is None else self._row(x, known)
        if type(id) is int or (isinstance(id, numbers.Integral) and not isinstance(id, bool)):
            if not -2**63 <= id < 2**63:
                raise CEGBError(f"id: an integer id should fit in int64, got {id}")
            self._id[0] = id
            ids = self._ids
        else:
            ids = np.array([id])
        self._answered = False
        self._result = None
        try:
            answer = self._serve(values, given, ids)
        except LazyFetchError as exc:  # its result's arrays are the batch's, which the next request reuses
            exc.result = _copied(exc.result)
            raise
        self._answered, self._last = True, answer
        return answer

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
            done = self._run.status[0] == DONE
            prediction = np.array([self._last]) if done else None
            self._result = _copied(self._run.result(prediction))
        return self._result

    @property
    def cost(self) -> float:
        """The last request's cost: what it fetched and evaluated (``result().per_instance[0]``)."""
        if not self._answered:
            raise CEGBError("cost: no request has been answered yet (or the last one raised)")
        if self._batch is None:
            return float(self.result().per_instance[0])
        return float(self._batch.acquisition[0] + self._batch.evaluation[0])

    def _rounds(self, run, *serving) -> bool:
        """A restarted batch's rounds for ``run``: in the kernel (``serve_row``, with ``serving`` after fetch, keys
        and ids) while it stores every fetch, then through the predictor's general path, as acquire runs them. Whether
        the kernel ran them all."""
        predictor = self.predictor
        if run.failures:
            run.failures = []
        if self._compiled:
            run.rounds, run.fetch_calls, left = self._batch.serve_row(predictor._direct_fetch, predictor._unit_keys,
                                                                      run.fetch_ids, *serving)
            if left is None:
                return True
            requests, first = left  # a round with a call the kernel did not store
            run.deliver(requests, predictor._fetch_round(requests, run, first))
        else:
            run.rounds = run.fetch_calls = 0
        while requests := run.advance():
            run.deliver(requests, predictor._fetch_round(requests, run))
        return False

    # ------------------------------------------------------------------------------------ routed models

    def _routed_batch(self) -> None:
        predictor = self.predictor
        forest = predictor.forest
        self._batch = LazyBatch(predictor._plan, self._nothing[None], None, 1)
        self._run = RoutingRun.over(predictor, self._batch, self._ids)
        self._compiled = self._compiled and forest.missing_value is None
        raw = isinstance(predictor.model, Forest) or bool(self._kwargs.get("raw_score"))
        # (sigmoid, scale, average) of an output of one number the kernel computes; None: the predictor's _predict
        scalar = (False, 0.0) if isinstance(predictor.model, Forest) else None
        if predictor._own is not None and predictor._own.takes(self.method, self._kwargs):
            scalar = predictor._own.scalar(self.method, self._kwargs)
        if scalar is not None and forest.trees_per_iteration == 1:
            self._output = (*scalar, not raw and forest.average_output)

    def _serve_routed(self, values: np.ndarray, given: np.ndarray | None, ids: np.ndarray):
        batch, run = self._batch, self._run
        batch.restart(values, given)
        run.fetch_ids = ids
        if self._rounds(run) and self._output is not None:  # DONE, every value stored: the common case
            return batch.row_output(*self._output)
        if batch.status[0] != DONE:
            return math.nan
        if self._output is not None:
            return batch.row_output(*self._output)
        self._result = _copied(run.finish(self.method, self._kwargs))
        return self._result.prediction[0]

    # ------------------------------------------------------------------------------------ policy models

    def _policy_batch(self) -> None:
        """The compiled run of the model as it is now (none: acquire serves it), and what it depends on."""
        predictor, model = self.predictor, self.predictor.model
        batch_of = getattr(model, "__lightgbm_cegb_batch__", None)
        key_of = getattr(model, "__lightgbm_cegb_batch_key__", None)
        compiled = None
        if batch_of is not None and key_of is not None and not self._kwargs:
            compiled = batch_of(self._nothing[None].copy(), np.zeros((1, self._width), dtype=bool))
        if compiled is None:
            self._batch = self._run = self._batch_key = None
            return
        self._batch, output = compiled
        self._batch_key = key_of()
        self._run = CompiledPolicyRun(predictor, self._ids, False, self._batch, output)
        unit_of = predictor._policy_units[0]
        self._key_of = list(unit_of)
        self._rank = [predictor._unit_rank[unit] for unit in unit_of]

    def _serve_policy(self, values: np.ndarray, given: np.ndarray | None, ids: np.ndarray):
        predictor = self.predictor
        if self._batch_key is not None and predictor.model.__lightgbm_cegb_batch_key__() != self._batch_key:
            self._policy_batch()  # the model's settings changed since the batch was made
        if self._batch is None:
            known = None if given is None else given.view(bool)[None]
            self._result = _copied(predictor.acquire(values[None], known, ids=ids, method=self.method,
                                                     **self._kwargs))
            prediction = self._result.prediction
            return math.nan if prediction is None or self._result.status[0] != DONE else prediction[0]
        batch, run = self._batch, self._run
        batch.restart(values, given)
        run.ids = run.fetch_ids = ids
        run.status[0] = PENDING
        if self._rounds(run, self._key_of, self._rank):
            run.status[0] = DONE  # what the run's advance says when the batch buys nothing more
        if run.status[0] != DONE:
            return math.nan
        answer = run.output(batch.proba, self.method)[0]
        return answer.copy() if isinstance(answer, np.ndarray) else answer  # proba is the batch's

    # ------------------------------------------------------------------------------------ checks

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
        if forest is not None and forest.missing_value is not None:  # as RoutingRun reads it
            if known is None:
                known = ~np.isnan(values)
            values = forest.with_missing(values[None])[0]
        return np.ascontiguousarray(values), None if known is None else np.ascontiguousarray(known).view(np.uint8)


def _copied(result: LazyResult) -> LazyResult:
    """``result`` with arrays of its own."""
    arrays = {name: np.array(getattr(result, name)) for name in RESULT_ARRAYS if getattr(result, name) is not None}
    return dataclasses.replace(result, **arrays, failures=list(result.failures))
