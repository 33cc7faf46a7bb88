"""Rows held in a Dask collection, worked on partition by partition: the package's functions of rows take a Dask
array (chunked along its rows only) or a Dask DataFrame, run on each partition where the collection's scheduler
runs it (a ``distributed`` client's workers when one is active), and put the answers together in the partitions'
order. Dask is imported only when such a collection is given.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import accumulate

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.validation import checked_group


def is_dask(X) -> bool:
    """Whether X is a Dask collection (an array, a DataFrame or a Series), without importing Dask."""
    return type(X).__module__.split(".")[0] == "dask" and hasattr(X, "__dask_graph__")


def partitions(X) -> list:
    """The partitions of X, a Dask array or DataFrame, as delayed objects in the order of its rows; an array chunked
    along its columns is refused (each partition must hold whole rows)."""
    if hasattr(X, "numblocks"):  # a dask array
        if X.ndim != 2:
            raise CEGBError(f"X: a Dask array of rows should be 2-dimensional, got {X.ndim} dimensions")
        if X.numblocks[1] != 1:
            raise CEGBError(f"X: a Dask array of rows should be chunked along its rows only (one chunk of its "
                            f"{X.shape[1]} columns: X.rechunk({{1: -1}})), got {X.numblocks[1]} column chunks")
        return list(X.to_delayed().ravel())
    if hasattr(X, "to_delayed") and hasattr(X, "map_partitions"):  # a dask DataFrame
        return list(X.to_delayed())
    raise CEGBError(f"X: a Dask array or DataFrame of rows is expected, got {type(X).__name__}")


def as_array(rows):
    """A Dask DataFrame or Series as a Dask array of known chunk sizes (string labels an object array, without Dask's
    warning about it); a Dask array as it is."""
    if not hasattr(rows, "to_dask_array"):
        return rows
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Dask currently has limited support for converting pandas extension")
        return rows.to_dask_array(lengths=True)


def query_parts(group, parts: int) -> list:
    """The query sizes of each of the ``parts`` partitions of a ranker's Dask X, as delayed objects: ``group`` should
    be a Dask array (or Series) of a chunk per partition, as ``lightgbm.dask`` takes it (each query lies whole in one
    partition)."""
    if not is_dask(group):
        raise CEGBError(f"group: with X a Dask collection, group should be a Dask array of the query sizes of each "
                        f"partition of X (a chunk per partition, as lightgbm.dask takes it), got "
                        f"{type(group).__name__}")
    group = as_array(group)
    if group.ndim != 1 or group.numblocks[0] != parts:
        raise CEGBError(f"group should hold the query sizes of each of X's {parts} partitions in a chunk of its own (a "
                        f"query lies whole in one partition), got shape {group.shape} in {group.numblocks} chunks")
    return list(group.to_delayed().ravel())


def check_chunks_known(rows, name: str, lead: str | None = None) -> None:
    """Refuse a Dask array whose chunk sizes are not known (NaN), calling it ``name`` (the message starts with
    ``lead``, default ``"name: "``); any other collection passes."""
    if hasattr(rows, "numblocks") and any(length != length for length in rows.chunks[0]):
        raise CEGBError(f"{name + ': ' if lead is None else lead}a Dask array whose chunk sizes are not known (e.g. "
                        f"from a DataFrame's to_dask_array()): call {name}.compute_chunk_sizes() first")


def lengths(X) -> list[int]:
    """The rows of each partition of X: an array's from its chunks (known sizes needed), a DataFrame's from its
    partitions' lengths (a pass over its rows)."""
    check_chunks_known(X, "X")
    return [int(length) for length in (X.chunks[0] if hasattr(X, "numblocks") else X.map_partitions(len).compute())]


def row_starts(X) -> list[int]:
    """The position in X of each partition's first row (see :func:`lengths`)."""
    return [0, *accumulate(lengths(X)[:-1])]


def computed(parts: tuple) -> tuple:
    """``parts`` with its Dask collections computed (in one pass), the others as they are."""
    if not any(is_dask(part) for part in parts):
        return parts
    import dask
    return tuple(dask.compute(*parts))


def drawing(length: int, fraction: float, seed: int, index: int):
    """Which of a partition's ``length`` rows are drawn, each with probability ``fraction``, from ``seed`` and the
    partition's position ``index`` (the same rows for the same partitions)."""
    import numpy as np
    return np.random.default_rng([seed, index]).random(length) < fraction


def over_partitions(function: Callable, X, *args, starts: bool = False, each: dict | None = None, **kwargs) -> list:
    """``function(partition, *args, **kwargs)`` of every partition of the Dask collection X (with ``starts``:
    ``function(partition, start, *args, **kwargs)``, ``start`` the position of its first row in X, which a DataFrame's
    partitions are measured for; ``each``: keyword arguments of a value per partition, by name), computed by its
    scheduler, in the partitions' order."""
    import dask
    parts = partitions(X)
    first_rows = row_starts(X) if starts else [None] * len(parts)
    own = [{name: values[i] for name, values in (each or {}).items()} for i in range(len(parts))]
    return list(dask.compute(*[dask.delayed(function)(part, *((start,) if starts else ()), *args, **kwargs, **mine)
                               for part, start, mine in zip(parts, first_rows, own)]))


def drawn(X, y, rows: int, seed: int = 0, total: int | None = None) -> tuple:
    """About ``rows`` rows of the Dask collection X and their labels y (a Dask array or Series partitioned as X), each
    row drawn with the same probability (:func:`drawing`), brought into memory in their order: X as numpy rows or a
    pandas DataFrame, y as a numpy array (all of them where they are fewer). ``total``: X's rows where they are
    counted already (default: :func:`lengths`)."""
    import dask
    import numpy as np

    X_parts, y_parts = partitions(X), _label_parts(X, y)
    total = sum(lengths(X)) if total is None else total
    fraction = 1.0 if total <= rows else rows / total
    parts = dask.compute(*[dask.delayed(_drawn_part)(part, labels, fraction, seed, i)
                           for i, (part, labels) in enumerate(zip(X_parts, y_parts))])
    if hasattr(X, "numblocks"):
        return np.concatenate([part for part, _ in parts]), np.concatenate([labels for _, labels in parts])
    import pandas as pd
    return pd.concat([part for part, _ in parts]), np.concatenate([labels for _, labels in parts])


def drawn_queries(X, y, group, rows: int, seed: int = 0, total: int | None = None) -> tuple:
    """The documents of queries of the Dask collection X drawn whole, each query with the same probability (about
    ``rows`` documents in all; every query where they are fewer; where the draw takes none, the first query of the
    first partition that holds one), their grades y (a Dask array or Series partitioned as X) and their query sizes
    (``group``: a Dask array of a chunk per partition, see :func:`query_parts`), brought into memory in their order: X
    as numpy rows or a pandas DataFrame, y and the sizes as numpy arrays. ``total``: X's rows where they are counted
    already."""
    import dask
    import numpy as np

    X_parts, y_parts = partitions(X), _label_parts(X, y)
    groups = query_parts(group, len(X_parts))
    total = sum(lengths(X)) if total is None else total
    fraction = 1.0 if total <= rows else rows / total
    parts = dask.compute(*[dask.delayed(_drawn_queries_part)(part, labels, sizes, fraction, seed, i)
                           for i, (part, labels, sizes) in enumerate(zip(X_parts, y_parts, groups))])
    if not any(len(drawn[2]) for drawn in parts):  # few, large queries: none drawn
        for i, (part, labels, sizes) in enumerate(zip(X_parts, y_parts, groups)):
            parts = dask.compute(dask.delayed(_drawn_queries_part)(part, labels, sizes, fraction, seed, i, first=True))
            if len(parts[0][2]):
                break
    grades, sizes = (np.concatenate([part[i] for part in parts]) for i in (1, 2))
    if hasattr(X, "numblocks"):
        return np.concatenate([part for part, _, _ in parts]), grades, sizes
    import pandas as pd
    return pd.concat([part for part, _, _ in parts]), grades, sizes


def _drawn_queries_part(X, y, sizes, fraction: float, seed: int, index: int, first: bool = False) -> tuple:
    """The documents, grades and sizes of the queries drawn of one partition (partition ``index``; ``first``: its
    first query alone)."""
    import numpy as np

    if len(y) != len(X):
        raise CEGBError(f"y: the grades of a Dask X should be partitioned as X, got {len(y)} grades in partition "
                        f"{index} of {len(X)} documents")
    sizes = checked_group(np.asarray(sizes) if len(sizes) else np.zeros(0, dtype=np.int64), len(X),
                          f"group (partition {index})")
    chosen = drawing(len(sizes), fraction, seed, index)
    if first:
        chosen = np.arange(len(sizes)) == 0
    documents = np.repeat(chosen, sizes)
    return X[documents], np.asarray(y)[documents], sizes[chosen]


def _label_parts(X, y) -> list:
    """The partitions of y, the labels of the Dask collection X, aligned with X's."""
    X_parts = partitions(X)
    y_parts = list(y.to_delayed().ravel()) if hasattr(y, "numblocks") else list(y.to_delayed())
    if hasattr(y, "numblocks") and hasattr(X, "numblocks") and y.chunks[0] != X.chunks[0]:
        y_parts = list(y.rechunk((X.chunks[0],)).to_delayed().ravel())
    if len(y_parts) != len(X_parts):
        raise CEGBError(f"y: the labels of a Dask X should be partitioned as X ({len(X_parts)} partitions), got "
                        f"{len(y_parts)}")
    return y_parts


def _drawn_part(X, y, fraction: float, seed: int, index: int) -> tuple:
    import numpy as np

    chosen = drawing(len(X), fraction, seed, index)
    if len(y) != len(X):
        raise CEGBError(f"y: the labels of a Dask X should be partitioned as X, got {len(y)} labels in a partition of "
                        f"{len(X)} rows")
    return X[chosen], np.asarray(y)[chosen]
