"""Rows held in a Dask collection, worked on partition by partition: the package's functions of rows take a Dask
array (chunked along its rows only) or a Dask DataFrame, run on each partition where the collection's scheduler
runs it (a ``distributed`` client's workers when one is active), and put the answers together in the partitions'
order. Dask is imported only when such a collection is given.
"""

from __future__ import annotations

from collections.abc import Callable

from lightgbm_cegb.core.errors import CEGBError


def is_dask(X) -> bool:
    """Whether X is a Dask collection (an array, a DataFrame or a Series), without importing Dask."""
    return type(X).__module__.split(".")[0] == "dask" and hasattr(X, "__dask_graph__")


def partitions(X) -> tuple[list, list[int]]:
    """The partitions of X, a Dask array or DataFrame, as delayed objects in the order of its rows, and the position
    of each one's first row in X (a DataFrame's partition lengths are computed for it); an array chunked along its
    columns is refused (each partition must hold whole rows)."""
    if hasattr(X, "numblocks"):  # a dask array
        if X.ndim != 2:
            raise CEGBError(f"X: a Dask array of rows should be 2-dimensional, got {X.ndim} dimensions")
        if X.numblocks[1] != 1:
            raise CEGBError(f"X: a Dask array of rows should be chunked along its rows only (one chunk of its "
                            f"{X.shape[1]} columns: X.rechunk({{1: -1}})), got {X.numblocks[1]} column chunks")
        parts, lengths = list(X.to_delayed().ravel()), list(X.chunks[0])
    elif hasattr(X, "to_delayed") and hasattr(X, "map_partitions"):  # a dask DataFrame
        parts, lengths = list(X.to_delayed()), [int(n) for n in X.map_partitions(len).compute()]
    else:
        raise CEGBError(f"X: a Dask array or DataFrame of rows is expected, got {type(X).__name__}")
    starts = [0]
    for length in lengths[:-1]:
        starts.append(starts[-1] + int(length))
    return parts, starts


def over_partitions(function: Callable, X, *args, starts: bool = False, **kwargs) -> list:
    """``function(partition, *args, **kwargs)`` of every partition of the Dask collection X (with ``starts``:
    ``function(partition, start, *args, **kwargs)``, ``start`` the position of its first row in X), computed by its
    scheduler, in the partitions' order."""
    import dask
    parts, first_rows = partitions(X)
    return list(dask.compute(*[dask.delayed(function)(part, *((start,) if starts else ()), *args, **kwargs)
                               for part, start in zip(parts, first_rows)]))
