"""One batch's way through a model, round by round (the state machine of a lazy prediction): ``RoutingRun`` over the
compiled routing (``LazyBatch``), ``PolicyModelRun`` over a policy model's own loop. A LazyPredictor (``predictor``
below) drives either, one fetch round at a time."""

from __future__ import annotations

import numpy as np

from lightgbm_cegb._engine import STORED, LazyBatch
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.serving.results import (
    DONE,
    FAILED,
    PENDING,
    FetchFailure,
    LazyFetchError,
    LazyFetchValueError,
    LazyResult,
    Malformed,
)


class RoutingRun:
    """One batch on its way through the model: its rows' compiled state (values, routing, costs: LazyBatch) and
    what the run reports (rounds, fetch calls, failures)."""

    def __init__(self, predictor, X, known, ids, threads: int | None = None) -> None:
        """``threads``: the routing's (None: the predictor's)."""
        forest = self.forest = predictor.forest
        self.predictor = predictor
        if type(X) is np.ndarray and X.dtype == np.float64 and not forest.float32 and forest.missing_value is None:
            forest.check_shape(X.shape)  # read as it is
        else:
            X = forest.dense(X, missing=False)
            if known is None and forest.missing_value is not None:  # a value given as missing is known
                known = ~np.isnan(X)
            X = forest.with_missing(X)
        known, fetch_ids = _known_and_ids(X, known, ids, positions=False)  # None: the rows' positions
        known = None if known is None else np.ascontiguousarray(known).view(np.uint8)
        self._begin(LazyBatch(predictor._plan, X, known, predictor._threads if threads is None else threads), fetch_ids)

    @classmethod
    def over(cls, predictor, batch: LazyBatch, fetch_ids: np.ndarray) -> RoutingRun:
        """A run over a batch that outlives it (a PreparedRow's, restarted for each request)."""
        run = cls.__new__(cls)
        run.forest, run.predictor = predictor.forest, predictor
        run._begin(batch, fetch_ids)
        return run

    def _begin(self, batch: LazyBatch, fetch_ids) -> None:
        self.batch, self.status, self.fetch_ids = batch, batch.status, fetch_ids
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

    @property
    def stores_fetches(self) -> bool:
        """Whether fetch_round stores a fetch's values as they come (not for a model that reads a value as missing)."""
        return self.forest.missing_value is None

    def fetch_round(self, requests, fetch, keys) -> list | None:
        """Call fetch for each request, storing what it can (LazyBatch.fetch_round)."""
        return self.batch.fetch_round(requests, fetch, keys, self.fetch_ids)

    def deliver(self, requests, outcomes) -> None:
        """Store what each fetch returned (the members the rows stopped at read from their group's values);
        then handle the failures (all successes are kept first). outcomes None: every fetch's values stored."""
        if outcomes is None:
            self.batch.read_held()
            return
        received, failed = _received(self.predictor, self.ids, requests, outcomes)
        for unit, rows, values in received:
            self.batch.deliver(unit, rows, self.forest.with_missing(values.ravel()))
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


def fetch_units(units: list, group_of: np.ndarray, num_features: int) -> tuple[list[int], dict[int, int]]:
    """The lazy routing's fetch unit (a feature, or ``num_features`` + its group: ``group_of``'s) of each of a policy
    model's ``units`` (their columns), and the policy unit of each fetch unit."""
    unit_of = [columns[0] if group_of[columns[0]] < 0 else num_features + int(group_of[columns[0]])
               for columns in units]
    return unit_of, {unit: u for u, unit in enumerate(unit_of)}


def policy_run(predictor, X, known, ids, kwargs: dict) -> PolicyModelRun | CompiledPolicyRun:
    """The run of a batch through a policy model: on its compiled run where it has one (``__lightgbm_cegb_batch__``,
    for a method without arguments), else on its policy run."""
    model = predictor.model
    if hasattr(X, "columns"):
        names = getattr(model, "feature_names_in_", None)
        X = X[list(names)] if names is not None else X
    X = np.array(X, dtype=np.float64, order="C")  # a copy: fetched values go in
    num_features = len(predictor.keys)
    if X.ndim != 2 or X.shape[1] != num_features:
        raise CEGBError(f"X should have {num_features} columns, got shape {X.shape}")
    positions = ids is None
    known, ids = _known_and_ids(X, known, ids)
    known = ~np.isnan(X) if known is None else known.copy()  # a fetched value becomes known
    batch_of = getattr(model, "__lightgbm_cegb_batch__", None)
    compiled = batch_of(X, known) if batch_of is not None and not kwargs else None
    if compiled is not None:
        return CompiledPolicyRun(predictor, ids, positions, *compiled)
    return PolicyModelRun(predictor, X, known, ids, kwargs)


class PolicyModelRun:
    """One batch through a policy model (``__lightgbm_cegb_policy__``): each round, the units the policy asks for
    that a row does not have yet are fetched (a group whole, once per row), and the policy sees their values;
    values given in X are handed to it unfetched and unpaid. The interface of :class:`RoutingRun`; made by
    :func:`policy_run` (X a float64 copy of the rows, ``known`` a copy of the values X gives)."""

    def __init__(self, predictor, X: np.ndarray, known: np.ndarray, ids: np.ndarray, kwargs: dict) -> None:
        self.predictor = predictor
        model = predictor.model
        self.X, self.known, self.ids = X, known, ids
        n, num_features = X.shape
        self.fetched = np.zeros((n, num_features), dtype=bool)
        self.status = np.full(n, PENDING, dtype=np.int8)
        self.rounds = self.fetch_calls = 0
        self.failures: list[FetchFailure] = []
        self.run = model.__lightgbm_cegb_policy__(n, **kwargs)
        if hasattr(self.run, "begin_serving"):  # a run that routes by values reads those given first (EarlyExit)
            self.run.begin_serving(X, known, predictor._threads)
        self.units = [np.asarray(columns, dtype=np.intp) for columns in model.units_]
        self.unit_of, self.policy_unit = predictor._policy_units
        self.started = False

    stores_fetches = False  # each fetch's values go through deliver

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
                rows = np.asarray(rows, dtype=np.intp)
                columns = self.units[u]  # indexed as [rows[:, None], columns]: np.ix_'s checks cost more here
                have = self.known[rows[:, None], columns].all(axis=1)
                if have.any():
                    self.run.deliver(u, rows[have], self.X[rows[have][:, None], columns], pay=False)
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
            values = _in_unit_order(self.predictor, u, values)
            at = rows[:, None], self.units[u]
            given = self.known[at]
            values = np.where(np.isnan(values), np.nan, values)
            block = np.where(given, self.X[at], values)  # values given in X stay
            self.X[at] = block
            self.fetched[at] |= ~given
            self.known[at] = True
            self.run.deliver(u, rows, block)
        if failed:
            for rows in _failed(self, failed):
                self.run.drop(rows)

    def finish(self, method: str, kwargs: dict) -> LazyResult:
        done = self.status == DONE
        prediction = None
        if done.any() or not len(done):
            prediction = _spread(self.run.output(method)[done], done)
        return self.result(prediction)

    def result(self, prediction) -> LazyResult:
        cost = self.run.result().cost
        X = np.where(self.known, self.X, np.nan)
        return LazyResult(prediction=prediction, status=self.status, X=X, known=self.known, fetched=self.fetched,
                          acquisition=cost.acquisition, evaluation=cost.evaluation,
                          leaves=np.zeros((len(X), 0), dtype=np.int32), rounds=self.rounds,
                          fetch_calls=self.fetch_calls, failures=self.failures)


class CompiledPolicyRun:
    """One batch through a policy model's compiled run (the staged acquisition's LadderBatch, the adaptive
    acquisition's PolicyBatch): the rounds, fetches, payments and results of :class:`PolicyModelRun` on the model's
    policy run, a few C calls a round. Made by :func:`policy_run`."""

    stores_fetches = True  # fetch_round stores what it can

    def __init__(self, predictor, ids: np.ndarray, positions: bool, batch, output) -> None:
        self.predictor, self.ids, self.batch, self.output = predictor, ids, batch, output
        self.fetch_ids = None if positions else ids  # None: fetch is called with the rows' positions
        self.status = np.full(batch.n, PENDING, dtype=np.int8)
        self.rounds = self.fetch_calls = 0
        self.failures: list[FetchFailure] = []
        self.unit_of, self.policy_unit = predictor._policy_units

    def advance(self) -> list[tuple[int, np.ndarray]]:
        """The next round's fetches: (unit, rows) of the rows whose next purchase is not all in X."""
        wanted = self.batch.advance()
        if not wanted:
            self.status[self.status == PENDING] = DONE
            return []
        self.rounds += 1
        unit_of = self.unit_of
        requests = [(unit_of[u], rows) for u, rows in wanted]
        if len(requests) == 1:
            return requests
        predictor = self.predictor
        if predictor._sorted:
            return predictor._in_order(requests, self.ids)
        rank = predictor._unit_rank
        return sorted(requests, key=lambda request: rank[request[0]])

    def fetch_round(self, requests, fetch, keys) -> list | None:
        """Call fetch for each request, storing what it can (the batch's fetch_round)."""
        policy_unit = self.policy_unit
        return self.batch.fetch_round(requests, [policy_unit[unit] for unit, _ in requests], fetch, keys,
                                      self.fetch_ids)

    def deliver(self, requests, outcomes) -> None:
        """Store what each fetch returned (values given in X stay); then handle the failures. outcomes None: every
        fetch's values stored."""
        if outcomes is None:
            return
        received, failed = _received(self.predictor, self.ids, requests, outcomes)
        for unit, rows, values in received:
            u = self.policy_unit[unit]
            self.batch.deliver(u, rows, _in_unit_order(self.predictor, u, values))
        if failed:
            for rows in _failed(self, failed):
                self.batch.drop(rows)

    def finish(self, method: str, kwargs: dict) -> LazyResult:
        done = self.status == DONE
        if done.all():
            return self.result(self.output(self.batch.proba, method))
        prediction = _spread(self.output(self.batch.proba, method)[done], done) if done.any() else None
        return self.result(prediction)

    def result(self, prediction) -> LazyResult:
        batch = self.batch
        known = batch.known.view(bool)
        return LazyResult(prediction=prediction, status=self.status, X=np.where(known, batch.X, np.nan), known=known,
                          fetched=batch.fetched.view(bool), acquisition=batch.acquisition,
                          evaluation=batch.evaluation, leaves=np.zeros((batch.n, 0), dtype=np.int32),
                          rounds=self.rounds, fetch_calls=self.fetch_calls, failures=self.failures)


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


def _received(predictor, ids: np.ndarray, requests, outcomes) -> tuple[list, list[FetchFailure]]:
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
            except Malformed as exc:
                outcome = exc
        if isinstance(outcome, BaseException):
            failed.append(FetchFailure(predictor._unit_keys[unit], rows, outcome, ids[rows]))
        else:
            received.append((unit, rows, values))
    return received, failed


def _in_unit_order(predictor, u: int, values: np.ndarray) -> np.ndarray:
    """A fetch's values (a group's: its members in the costs' order) in the column order of policy unit u."""
    columns = predictor._unit_columns.get(u)
    return values if columns is None else values[:, columns]


def _failed(run, failed: list[FetchFailure]) -> list[np.ndarray]:
    """Record a round's failed fetches on ``run`` (a RoutingRun or PolicyModelRun): with errors="raise", raise the first
    (LazyFetchValueError where fetch broke its contract); else mark their rows FAILED and return them."""
    run.failures.extend(failed)
    if run.predictor.errors == "raise":
        kind = LazyFetchValueError if isinstance(failed[0].error, Malformed) else LazyFetchError
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
