"""What a staged acquisition model fitted on a Dask cluster is made of (``fit`` of rows in a Dask array or DataFrame
of ``StagedAcquisitionClassifier``, ``StagedAcquisitionRegressor`` and ``StagedAcquisitionRanker``): the rows
(:class:`DaskRows`, the ranker's documents :class:`DaskQueries`), a stage's training (:func:`trained`) and its early
stopping (:class:`HeldOutStopping`).

The model of every column (the units' order) and each stage's model are trained with ``lightgbm.dask`` on the
workers of the active ``distributed`` client, from the partitions where they lie. ``lightgbm.dask`` has no early
stopping of its own; the rows that stop the stages (``eval_set``, or a held-out ``validation_fraction`` of the rows
(of the queries, for the ranker), about HELD_OUT_ROWS of them where that is fewer, drawn partition by partition) are
brought into memory and sent with each training to every worker, where :class:`HeldOutStopping` applies
``lgb.early_stopping``'s rule to them: every worker holds the same model and the same rows and computes the same
loss (log loss, l2, minus NDCG@k) in the same order, so all stop at the same round (a worker that stopped alone
would leave the others waiting for it). ``order="search"`` measures its subsets on a sample of about SEARCH_SAMPLE
training rows in memory (its measure reads at most that many). The fitted model holds in-memory LightGBM models,
served and saved as any other.

Distributed training sums the histograms of the workers' rows in another order than one machine does: the stages
are not those of the same rows fitted in memory to the bit, but of the same quality (``scripts.bench_dask``).
"""

from __future__ import annotations

import math
import warnings

import lightgbm as lgb
import numpy as np
from sklearn.utils.multiclass import check_classification_targets

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.partitions import as_array, check_chunks_known, drawing, drawn_queries, is_dask, query_parts
from lightgbm_cegb.core.subsets import SEARCH_HELD_OUT, SEARCH_ROWS
from lightgbm_cegb.core.validation import checked_group
from lightgbm_cegb.methods.acquisition import best_cut, checked_data, hidden

#: about how many rows are held out in memory to stop the stages when ``fit`` gets no ``eval_set`` and
#: ``validation_fraction`` of the rows is more (each row is drawn with a probability): they travel to every worker
#: with each stage's training
HELD_OUT_ROWS = 100_000
#: about how many training rows ``order="search"`` reads (each drawn with a probability; its measure trains on at
#: most SEARCH_ROWS of them and measures on at most SEARCH_ROWS held out, a SEARCH_HELD_OUT share)
SEARCH_SAMPLE = int(SEARCH_ROWS / SEARCH_HELD_OUT)
#: LightGBM's floor of a predicted probability in its log loss metrics
_EPSILON = 1e-15


def dask_client():
    """The active ``distributed`` client, which ``lightgbm.dask`` trains on; a CEGBError says how to start one."""
    try:
        import distributed
        return distributed.default_client()
    except (ImportError, ValueError):
        raise CEGBError("X: a Dask collection is fitted on a Dask cluster with lightgbm.dask, which needs an active "
                        "distributed Client (distributed.Client(...)), got none") from None


class DaskRows:
    """Rows of a Dask collection as the stages train on them: X a Dask array of float64 chunked along its rows only,
    ``labels`` (the class indices; a regression's targets) in chunks aligned with it."""

    #: the query sizes lightgbm.dask trains a ranker with (see :class:`DaskQueries`)
    group = None

    def __init__(self, X, labels, n: int) -> None:
        self.X, self.labels, self.n = X, labels, n  # n: the rows (about, after a draw: X's chunks are then not known)

    @classmethod
    def of(cls, estimator, X, y) -> DaskRows:
        """X and y checked (a head of each by ``checked_data``, which sets ``n_features_in_`` and
        ``feature_names_in_``; every value finite or NaN, every label there), ``classes_`` set."""
        import dask
        import dask.array as da

        X, y = _checked(estimator, X, y, "labels")
        classes, infinite = dask.compute(da.unique(y), da.isinf(X).any())
        if infinite:
            raise CEGBError("X should hold finite numbers or NaN (a missing value), got an infinite value")
        if classes.dtype.kind == "f" and np.isnan(classes).any():
            raise CEGBError("y should hold a class label in every row, got nan")
        try:
            check_classification_targets(classes)
        except ValueError as exc:
            raise CEGBError(f"y: {exc}") from None
        if len(classes) < 2:
            raise CEGBError(f"y should hold at least two classes, got {len(classes)}")
        estimator.classes_ = np.asarray(classes.tolist())  # strings as np.unique of them in memory gives (not object)
        return cls(X, y.map_blocks(_codes, estimator.classes_, dtype=np.int64), X.shape[0])

    @classmethod
    def of_targets(cls, estimator, X, y) -> DaskRows:
        """A regression's rows: X and y checked as :meth:`of` does (every target a finite number), ``labels`` the
        targets as float64."""
        import dask
        import dask.array as da

        X, y = _checked(estimator, X, y, "targets", classes=False)
        if y.dtype.kind not in "biuf":
            raise CEGBError(f"y should hold finite numbers, got {y.dtype}")
        y = y.astype(np.float64)
        finite, infinite = dask.compute(da.isfinite(y).all(), da.isinf(X).any())
        if not finite:
            raise CEGBError("y should hold finite numbers, got an infinite or missing value")
        if infinite:
            raise CEGBError("X should hold finite numbers or NaN (a missing value), got an infinite value")
        return cls(X, y, X.shape[0])

    def held_out(self, fraction: float, seed: int) -> tuple[DaskRows, np.ndarray, np.ndarray]:
        """(the rows not held out, the held-out rows' X and class indices in memory): each row held out with
        probability ``fraction`` (HELD_OUT_ROWS on average where that is fewer), drawn from ``seed`` and its partition's
        position (the same rows for the same partitions)."""
        fraction = min(fraction, HELD_OUT_ROWS / max(1, self.n))
        held = self.X.map_blocks(_drawn, fraction, seed, drop_axis=1, dtype=bool)
        X_valid, valid_codes = _computed(self.X[held], self.labels[held])
        return DaskRows(self.X[~held], self.labels[~held], self.n - len(valid_codes)), X_valid, valid_codes

    def sample(self, rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """About ``rows`` of the rows drawn at random (all of them when they are fewer), in memory."""
        fraction = min(1.0, rows / max(1, self.n))
        drawn = self.X.map_blocks(_drawn, fraction, seed, drop_axis=1, dtype=bool)
        return _computed(self.X[drawn], self.labels[drawn])

    def spread(self, client) -> DaskRows:
        """The rows computed once onto the workers (each stage's training reads them), in partitions of even sizes:
        lightgbm.dask trains each worker on the partitions it holds, and one that holds a partition of a single row
        alone fails."""
        X, labels = client.persist([self.X, self.labels])
        sizes = np.array(client.compute(X.map_blocks(_length, drop_axis=1, chunks=(1,), dtype=np.int64)).result())
        n, parts = int(sizes.sum()), len(sizes)
        even = tuple(size for size in (n // parts + (i < n % parts) for i in range(parts)) if size)
        X = X.map_blocks(np.asarray, chunks=(tuple(sizes), X.chunks[1]), dtype=np.float64).rechunk({0: even})
        labels = labels.map_blocks(np.asarray, chunks=(tuple(sizes),), dtype=labels.dtype).rechunk((even,))
        return DaskRows(*client.persist([X, labels]), n)

    def counts(self, num_class: int) -> np.ndarray:
        """The rows of each class."""
        import dask.array as da
        return da.bincount(self.labels, minlength=num_class).compute()

    def hidden(self, columns: list[int]):
        """X with every column outside ``columns`` missing (NaN), lazily; X itself where ``columns`` are all of them
        (plain LightGBM's refit, a stage on every unit: no copy of each partition)."""
        if set(columns) >= set(range(self.X.shape[1])):
            return self.X
        return self.X.map_blocks(hidden, columns, dtype=np.float64)


def spread_with_stop(estimator, rows: DaskRows, stop, rng, client) -> tuple[DaskRows, tuple | None]:
    """(the training rows computed onto the workers (``DaskRows.spread``), the rows that stop the stages in memory):
    ``stop`` where given (an ``eval_set``'s, checked), else a held-out ``validation_fraction`` of ``rows`` drawn from
    ``rng`` (none where it is 0 or draws no row)."""
    train = rows
    if stop is None and estimator.validation_fraction > 0:
        train, *held = rows.held_out(estimator.validation_fraction, int(rng.randint(0, 2**31 - 1)))
        stop = tuple(held) if len(held[1]) else None
    return train.spread(client), stop


class DaskQueries:
    """A ranker's documents in a Dask collection as its stages train on them: X a Dask array of float64 chunked along
    its rows only, ``labels`` (the relevance grades) in chunks aligned with it, and ``sizes``: the sizes of each
    partition's consecutive queries, in memory (a query lies whole in one partition, as ``lightgbm.dask`` takes
    them)."""

    def __init__(self, X, labels, sizes: list[np.ndarray]) -> None:
        self.X, self.labels, self.sizes = X, labels, sizes
        self.n = int(sum(part.sum() for part in sizes))

    hidden = DaskRows.hidden

    @property
    def group(self):
        """The query sizes as ``lightgbm.dask`` takes them: a Dask array of a chunk per partition of X."""
        import dask.array as da
        return da.from_array(np.concatenate(self.sizes), chunks=(tuple(len(part) for part in self.sizes),))

    @classmethod
    def of(cls, estimator, X, y, group, grades) -> DaskQueries:
        """X, y and group checked (a head of X and y by ``checked_data``, which sets ``n_features_in_`` and
        ``feature_names_in_``; every value finite or NaN; each partition's query sizes summing to its rows; the
        grades by ``grades(values, n, name)``)."""
        import dask
        import dask.array as da

        X, y = _checked(estimator, X, y, "relevance grades", classes=False)
        sizes, values, infinite = dask.compute(query_parts(group, X.numblocks[0]), da.unique(y), da.isinf(X).any())
        if infinite:
            raise CEGBError("X should hold finite numbers or NaN (a missing value), got an infinite value")
        grades(values, len(values), "y")
        sizes = [checked_group(np.asarray(part) if len(part) else np.zeros(0, dtype=np.int64), length,
                               f"group (partition {i})") for i, (part, length) in enumerate(zip(sizes, X.chunks[0]))]
        if any(length == 0 for length in X.chunks[0]):  # a filter's empty partitions: no worker trains on none
            every = [np.ones(length, dtype=bool) for length in X.chunks[0]]
            X, y, sizes = _kept(X, every), _kept(y, every), [part for part in sizes if len(part)]
        return cls(X, y.astype(np.float64), sizes)

    def _queries_drawn(self, fraction: float, seed: int) -> list[np.ndarray]:
        """Each partition's queries drawn with probability ``fraction``, from ``seed`` and the partition's position."""
        return [drawing(len(part), fraction, seed, i) for i, part in enumerate(self.sizes)]

    def held_out(self, fraction: float, seed: int) -> tuple[DaskQueries, tuple]:
        """(the documents of the queries not held out, the held-out queries' (X, grades, query sizes) in memory): each
        query held out with probability ``fraction`` (about HELD_OUT_ROWS documents where that is fewer)."""
        drawn = self._queries_drawn(min(fraction, HELD_OUT_ROWS / max(1, self.n)), seed)
        kept = [~chosen for chosen in drawn]
        rows = [np.repeat(chosen, part) for chosen, part in zip(kept, self.sizes)]
        train = DaskQueries(_kept(self.X, rows), _kept(self.labels, rows),
                            [part[chosen] for chosen, part in zip(kept, self.sizes) if chosen.any()])
        held = [np.repeat(chosen, part) for chosen, part in zip(drawn, self.sizes)]
        X, y = _computed(_kept(self.X, held), _kept(self.labels, held))
        return train, (X, y, np.concatenate([part[chosen] for chosen, part in zip(drawn, self.sizes)]))

    def sample(self, rows: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The documents of queries drawn at random (about ``rows`` of them; all where they are fewer), in memory."""
        return drawn_queries(self.X, self.labels, self.group, rows, seed, total=self.n)

    def spread(self, client) -> DaskQueries:
        """The documents computed once onto the workers (each stage's training reads them), in their partitions
        (a query stays whole in its own)."""
        return DaskQueries(*client.persist([self.X, self.labels]), self.sizes)


class NDCGLoss:
    """Minus the mean NDCG@``k`` of scores over the consecutive queries of sizes ``group`` (the early-stopping loss of
    a ranker's stages), as LightGBM's ``ndcg`` metric defines it: gains 2^grade - 1, discounts 1 / log2(2 + rank), a
    query's documents ranked by score (ties: the given order), a query without a relevant document scoring 1; each
    query's DCG added rank by rank and the queries' NDCG query by query, as LightGBM does on one thread (equal rounds'
    NDCG tie to the bit, as there)."""

    def __init__(self, group: np.ndarray, k: int) -> None:
        self.sizes, self.k = np.asarray(group, dtype=np.int64), int(k)
        self.query = np.repeat(np.arange(len(self.sizes)), self.sizes)
        self.place = np.arange(len(self.query)) - np.repeat(np.cumsum(self.sizes) - self.sizes, self.sizes)
        self.discount = [1.0 / math.log2(2.0 + i) for i in range(self.k)]  # the C library's log2, as LightGBM's
        self.__name__ = f"ndcg@{self.k}"
        self._graded = None

    def _dcg(self, grades: np.ndarray, order: np.ndarray) -> np.ndarray:
        """Each query's DCG@k of its documents ranked by ``order`` (a permutation keeping the queries in place)."""
        top = self.place < self.k
        gains = np.zeros((len(self.sizes), self.k))
        gains[self.query[top], self.place[top]] = np.exp2(grades[order][top]) - 1.0
        dcg = np.zeros(len(self.sizes))
        for rank in range(self.k):
            dcg += gains[:, rank] * self.discount[rank]
        return dcg

    def __call__(self, raw: np.ndarray, grades: np.ndarray, weight: np.ndarray | None = None) -> float:
        position = np.arange(len(grades))
        if self._graded is not grades:  # the ideal DCGs of these grades, once (every round asks)
            self._graded = grades
            best = self._dcg(grades, np.lexsort((position, -grades, self.query)))
            self._relevant = best > 0
            self._inverse = 1.0 / best[self._relevant]
        dcg = self._dcg(grades, np.lexsort((position, -raw, self.query)))
        ndcg = np.ones(len(self.sizes))
        ndcg[self._relevant] = dcg[self._relevant] * self._inverse
        return -float(np.cumsum(ndcg)[-1] / len(ndcg))  # added query by query, as LightGBM's metric on one thread


def _checked(estimator, X, y, what: str, classes: bool = True) -> tuple:
    """X and y of Dask collections as Dask arrays, X of float64 chunked along its rows only, y ``what`` (its name in
    the messages) chunked as X's rows, a head of X (and of y's ``classes``) checked by ``checked_data`` (which sets
    ``n_features_in_`` and ``feature_names_in_``)."""
    if not is_dask(y):
        raise CEGBError(f"y: with X a Dask collection, y should be a Dask array or Series of its {what}, got "
                        f"{type(y).__name__}")
    for name, rows in (("X", X), ("y", y)):
        check_chunks_known(rows, name)
    checked_data(estimator, "X", *(rows.head(2, npartitions=-1) if hasattr(rows, "head") else rows[:2].compute()
                                   for rows in ((X, y) if classes else (X,))))
    X, y = as_array(X), as_array(y)
    X = X.astype(np.float64)
    if X.ndim != 2 or X.numblocks[1] != 1:
        raise CEGBError(f"X: a Dask array of rows should be 2-dimensional and chunked along its rows only (one chunk "
                        f"of its columns: X.rechunk({{1: -1}})), got shape {X.shape} in {X.numblocks} chunks")
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise CEGBError(f"y should hold {X.shape[0]} {what} (one per row of X), got shape {y.shape}")
    return X, y.rechunk((X.chunks[0],))


def _kept(rows, kept: list[np.ndarray]):
    """The rows of each partition of the Dask array ``rows`` that ``kept`` marks (a mask per partition), as a Dask
    array of known chunk sizes; a partition left empty is dropped."""
    import dask
    import dask.array as da

    parts = [da.from_delayed(dask.delayed(_masked)(block, mask), shape=(int(mask.sum()), *rows.shape[1:]),
                             dtype=rows.dtype)
             for block, mask in zip(rows.to_delayed().ravel(), kept) if mask.any()]
    return da.concatenate(parts) if parts else rows[:0]


def _masked(block: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return block[mask]


def _drawn(block: np.ndarray, fraction: float, seed: int, block_info=None) -> np.ndarray:
    """Which rows of a partition are drawn, each with probability ``fraction``, from ``seed`` and the partition's
    position."""
    return drawing(len(block), fraction, seed, block_info[0]["chunk-location"][0] if block_info else 0)


def _length(block: np.ndarray) -> np.ndarray:
    return np.array([len(block)])


def _codes(block: np.ndarray, classes: np.ndarray) -> np.ndarray:
    return np.searchsorted(classes, block)


def _weights(block: np.ndarray, weights: np.ndarray) -> np.ndarray:
    return weights[block]


def _computed(*collections) -> tuple[np.ndarray, ...]:
    import dask
    return tuple(np.asarray(part) for part in dask.compute(*collections))


def raw_scores(booster: lgb.Booster, X, columns: list[int]):
    """The raw scores of ``booster`` on the rows of the Dask array X with the columns outside ``columns`` missing,
    lazily (a column per class for a multiclass model)."""
    scores = booster.num_model_per_iteration()

    def block_scores(block: np.ndarray) -> np.ndarray:
        return booster.predict(hidden(block, columns), raw_score=True, num_threads=1)

    if scores == 1:
        return X.map_blocks(block_scores, drop_axis=1, dtype=np.float64)
    return X.map_blocks(block_scores, chunks=(X.chunks[0], (scores,)), dtype=np.float64)


def persisted(scores):
    """The Dask array ``scores`` computed onto the workers of the active client (kept there for what reads it)."""
    return dask_client().persist(scores)


def log_loss(raw: np.ndarray, codes: np.ndarray, weight: np.ndarray | None) -> float:
    """The (weighted) mean log loss of raw scores (one per row: binary, the sigmoid's; one per class: the softmax's)
    as LightGBM's ``binary_logloss`` and ``multi_logloss`` define it (probabilities floored at 1e-15, the weights
    rounded to float32 as a Dataset holds them), computed in one fixed order."""
    if raw.ndim == 1:
        p = 1.0 / (1.0 + np.exp(-raw))
        p = np.where(codes == 1, p, 1.0 - p)
    else:
        shifted = np.exp(raw - raw.max(axis=1, keepdims=True))
        p = shifted[np.arange(len(codes)), codes] / shifted.sum(axis=1)
    return _mean(-np.log(np.maximum(p, _EPSILON)), weight)


def l2(raw: np.ndarray, y: np.ndarray, weight: np.ndarray | None) -> float:
    """The (weighted) mean squared error of raw scores, LightGBM's ``l2`` metric (the targets and the weights rounded
    to float32 as a Dataset holds them), computed in one fixed order."""
    return _mean((raw - np.asarray(y, dtype=np.float32).astype(np.float64)) ** 2, weight)


def _mean(loss: np.ndarray, weight: np.ndarray | None) -> float:
    """The (weighted) mean of the rows' losses, the weights rounded to float32 as a Dataset holds them."""
    if weight is None:
        return float(loss.mean())
    weight = np.asarray(weight, dtype=np.float32).astype(np.float64)
    return float((loss * weight).sum() / weight.sum())


class HeldOutStopping:
    """``lgb.early_stopping(patience)``'s rule on rows the callback holds: training stops once the held-out ``loss``
    (:func:`log_loss` of class indices, :func:`l2` of targets, an :class:`NDCGLoss` of grades) has not improved for
    ``patience`` rounds, or at the last round, and the model's best iteration is the round of the least loss (the
    first of equal ones). Each round adds its trees' raw scores to the rows' (from ``init``, the rows' starting raw
    scores, as a Dataset's ``init_score``) and computes the loss in numpy: on every worker of a distributed training
    the same numbers in the same order, so every worker stops at the same round."""

    def __init__(self, X: np.ndarray, labels: np.ndarray, weight: np.ndarray | None, init: np.ndarray | None,
                 patience: int, loss=log_loss) -> None:
        self.X, self.labels, self.weight, self.init, self.patience, self.loss = X, labels, weight, init, patience, loss
        self.order = 30  # after LightGBM's other callbacks, as lgb.early_stopping (lgb.train reads the instance's)

    def __call__(self, env) -> None:
        if env.iteration == env.begin_iteration:
            self._raw, self._best, self._best_iteration = None, np.inf, env.iteration
        own = env.model.predict(self.X, start_iteration=env.iteration, num_iteration=1, raw_score=True)
        base = self.init if self._raw is None else self._raw
        self._raw = own if base is None else base + own
        loss = self.loss(self._raw, self.labels, self.weight)
        if loss < self._best:
            self._best, self._best_iteration = loss, env.iteration
        if env.iteration - self._best_iteration >= self.patience or env.iteration == env.end_iteration - 1:
            raise lgb.callback.EarlyStopException(self._best_iteration,
                                                  [("held_out", self.loss.__name__, self._best, False)])


#: LightGBM's parameters of ``PolicyClassifier._lightgbm_params`` as the scikit-learn interface of lightgbm.dask
#: names them (the others pass as they are; its threads are each worker's)
_SKLEARN_NAMES = {"min_data_in_leaf": "min_child_samples", "seed": "random_state"}


def trained(estimator, params: dict, rows: DaskRows | DaskQueries, weights: np.ndarray | None, columns: list[int],
            init, stop, what: str, feature_name, loss=log_loss, metric: str = "log loss") -> lgb.Booster:
    """A stage's model as ``PolicyClassifier._boosted`` (the ranker's ``fit``) trains it, on the workers: on ``rows``
    (weighted by their class's of ``weights``) with the columns outside ``columns`` hidden, from the raw scores
    ``init`` = (the rows', a Dask array, or None; the stopping rows', or None), early stopped on ``stop`` = (X,
    labels) in memory by ``loss`` (None: every round) and cut to its best iteration (a RoundsWarning names
    ``metric`` where it stopped at the cap); its columns named ``feature_name`` (a Dataset's). A classifier's stages
    are trained by lightgbm.dask's estimator of a regressor, with the classifier's objective: its classifier would
    take the classes from each worker's own labels."""
    callbacks = None
    if stop is not None:
        X_stop, stop_labels = stop
        callbacks = [HeldOutStopping(hidden(X_stop, columns), stop_labels,
                                     None if weights is None else weights[stop_labels], init[1],
                                     estimator.early_stopping_rounds, loss)]
    booster = on_workers(params, estimator.n_estimators, rows.hidden(columns), rows.labels,
                         None if weights is None else rows.labels.map_blocks(_weights, weights, dtype=np.float64),
                         init[0], callbacks, feature_name, rows.group)
    if stop is None:
        return booster
    return best_cut(estimator, booster, what, metric)


def on_workers(params: dict, rounds: int, X, y, weight, init, callbacks, feature_name, group=None) -> lgb.Booster:
    """LightGBM of ``params`` trained for at most ``rounds`` rounds on the rows of the Dask arrays X and y (``weight``,
    ``init``: Dask arrays or None) on the workers of the active client (``lightgbm.dask``'s regressor, which takes the
    params' objective as it is; its ranker, of the query sizes ``group``, a Dask array of a chunk per partition), with
    ``callbacks``; its columns named ``feature_name``."""
    from lightgbm.dask import DaskLGBMRanker, DaskLGBMRegressor

    settings = {_SKLEARN_NAMES.get(name, name): value for name, value in params.items() if name != "num_threads"}
    queries = {} if group is None else {"group": group}
    model = (DaskLGBMRegressor if group is None else DaskLGBMRanker)(n_estimators=rounds, client=dask_client(),
                                                                   **settings)
    with warnings.catch_warnings():  # lightgbm.dask sets each worker's threads itself
        warnings.filterwarnings("ignore", "Parameter n_jobs will be ignored")
        model.fit(X, y, sample_weight=weight, init_score=init, callbacks=callbacks, feature_name=feature_name,
                  **queries)
    return model.booster_
