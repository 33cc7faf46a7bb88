"""What a lazy prediction returns and raises: each row's status, the result, the failed fetches and the errors."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from lightgbm_cegb.core.errors import CEGBError, LightGBMCEGBError

#: status of a row in a LazyResult
DONE, FAILED, PENDING = 0, 1, 2


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

    @classmethod
    def stacked(cls, results: list[LazyResult]) -> LazyResult:
        """One result of the rows of several results, in their order (the partitions of a Dask collection, each
        served on its own): the rows' arrays concatenated, the rounds of the partition that took the most, the fetch
        calls of all, each failure's rows counted in all the rows.

        Parameters
        ----------
        results : list of LazyResult
            At least one; of one predictor and method.

        Returns
        -------
        LazyResult
            Of all the rows.
        """
        starts = np.cumsum([0] + [len(result.status) for result in results])
        failures = [replace(failure, rows=np.asarray(failure.rows) + start)
                    for result, start in zip(results, starts) for failure in result.failures]

        def joined(name: str) -> np.ndarray:
            return np.concatenate([getattr(result, name) for result in results])

        return cls(prediction=stacked_predictions([result.prediction for result in results],
                                                  [len(result.status) for result in results]),
                   status=joined("status"), X=joined("X"), known=joined("known"), fetched=joined("fetched"),
                   acquisition=joined("acquisition"), evaluation=joined("evaluation"), leaves=joined("leaves"),
                   rounds=max(result.rounds for result in results),
                   fetch_calls=sum(result.fetch_calls for result in results), failures=failures)


def stacked_predictions(predictions: list, sizes: list[int]) -> np.ndarray | None:
    """The predictions of several batches of ``sizes`` rows, in their order; a batch whose prediction is None (no row
    done) gives NaN rows (None in an object array, as ``acquire`` fills rows not done); None when every batch's is."""
    given = [prediction for prediction in predictions if prediction is not None]
    if not given:
        return None
    like = np.asarray(given[0])
    fill = np.nan if like.dtype.kind in "fc" else None
    parts = [np.asarray(prediction) if prediction is not None else
             np.full((size,) + like.shape[1:], fill, dtype=like.dtype if fill is not None else object)
             for prediction, size in zip(predictions, sizes)]
    return np.concatenate(parts)


class FetchInterrupted(LightGBMCEGBError, RuntimeError):
    """fetch raised KeyboardInterrupt or SystemExit on a worker thread (``max_workers``, ``timeout``, or a plain
    function under ``aacquire``): that call's failure, not an interrupt of the program (signals reach the main
    thread only). The exception fetch raised is its ``__cause__``."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(f"it raised {type(error).__name__}" + (f": {error}" if str(error) else ""))
        self.__cause__ = error


class LazyFetchError(LightGBMCEGBError, RuntimeError):
    """A fetch failed (raised, timed out or returned the wrong shape) with ``errors="raise"``. ``result``
    holds everything computed so far (values fetched, costs paid, rows already done). A ``RuntimeError`` and a
    ``LightGBMCEGBError``.

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


class Malformed(CEGBError):
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
