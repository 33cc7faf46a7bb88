"""Rows held in a Dask collection, worked on partition by partition: the package's functions of rows take a Dask
array (chunked along its rows only) or a Dask DataFrame, run on each partition where the collection's scheduler
runs it (a ``distributed`` client's workers when one is active), and put the answers together in the partitions'
order. Dask is imported only when such a collection is given.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import accumulate

from lightgbm_cegb.core.errors import CEGBError


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


def row_starts(X) -> list[int]:
    """The position in X of each partition's first row: an array's from its chunks (known sizes needed), a
    DataFrame's from its partitions' lengths (a pass over its rows)."""
    if hasattr(X, "numblocks"):
        lengths = X.chunks[0]
        if any(length != length for length in lengths):  # NaN: chunk sizes not known
            raise CEGBError("X: a Dask array whose chunk sizes are not known (e.g. from a DataFrame's "
                            "to_dask_array()): call X.compute_chunk_sizes() first")
    else:
        lengths = X.map_partitions(len).compute()
    return [0, *accumulate(int(length) for length in lengths[:-1])]


def over_partitions(function: Callable, X, *args, starts: bool = False, **kwargs) -> list:
    """``function(partition, *args, **kwargs)`` of every partition of the Dask collection X (with ``starts``:
    ``function(partition, start, *args, **kwargs)``, ``start`` the position of its first row in X, which a DataFrame's
    partitions are measured for), computed by its scheduler, in the partitions' order."""
    import dask
    parts = partitions(X)
    first_rows = row_starts(X) if starts else [None] * len(parts)
    return list(dask.compute(*[dask.delayed(function)(part, *((start,) if starts else ()), *args, **kwargs)
                               for part, start in zip(parts, first_rows)]))


def drawn(X, y, rows: int, seed: int = 0) -> tuple:
    """About ``rows`` rows of the Dask collection X and their labels y (a Dask array or Series partitioned as X), each
    row drawn with the same probability from ``seed`` and its partition's position, brought into memory in their
    order: X as numpy rows or a pandas DataFrame, y as a numpy array (all of them where they are fewer)."""
    import dask
    import numpy as np

    X_parts = partitions(X)
    y_parts = list(y.to_delayed().ravel()) if hasattr(y, "numblocks") else list(y.to_delayed())
    if hasattr(y, "numblocks") and hasattr(X, "numblocks") and y.chunks[0] != X.chunks[0]:
        y_parts = list(y.rechunk((X.chunks[0],)).to_delayed().ravel())
    if len(y_parts) != len(X_parts):
        raise CEGBError(f"y: the labels of a Dask X should be partitioned as X ({len(X_parts)} partitions), got "
                        f"{len(y_parts)}")
    total = sum(X.chunks[0]) if hasattr(X, "numblocks") else int(X.map_partitions(len).compute().sum())
    fraction = 1.0 if total != total or total <= rows else rows / total  # NaN: chunk sizes not known
    parts = dask.compute(*[dask.delayed(_drawn_part)(part, labels, fraction, seed, i)
                           for i, (part, labels) in enumerate(zip(X_parts, y_parts))])
    if hasattr(X, "numblocks"):
        return np.concatenate([part for part, _ in parts]), np.concatenate([labels for _, labels in parts])
    import pandas as pd
    return pd.concat([part for part, _ in parts]), np.concatenate([labels for _, labels in parts])


def _drawn_part(X, y, fraction: float, seed: int, index: int) -> tuple:
    import numpy as np

    chosen = np.random.default_rng([seed, index]).random(len(X)) < fraction
    if len(y) != len(X):
        raise CEGBError(f"y: the labels of a Dask X should be partitioned as X, got {len(y)} labels in a partition of "
                        f"{len(X)} rows")
    return X[chosen], np.asarray(y)[chosen]
