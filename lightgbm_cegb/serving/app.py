"""The service of ``lightgbm-cegb serve``: score rows by id with lazy feature acquisition from a feature store.

``make_app(predictor, ...)`` is a Starlette application (``pip install 'lightgbm-cegb[serve]'``):

    GET  /health            {"status": "ok", "model": ..., "features": [...], "groups": {...}, "fetch_keys": [...]}
    POST /score {"ids": [...]}
        {"ids": [...], "predictions": [...], "cost": [...], "mean_cost": ..., "eager_cost": ...,
         "fetched": {feature: [ids]}, "rounds": ..., "fetch_calls": ..., "latency_ms": ...}

``cost`` is each row's cost (the lazy costs of the features its paths read, each group's once, the split
costs), what ``prediction_cost`` reports for the full row; ``eager_cost`` the lazy cost of reading every
feature; ``fetched`` the ids each feature was fetched for; ``latency_ms`` the time from the request's start to
its answer. A round's fetches run concurrently (``LazyPredictor.aacquire``). With ``eager=True`` (the baseline
lazy acquisition is measured against) each request fetches every feature the model reads for every row, one
call per key, then predicts with the model's own method on the full rows. A body longer than ``max_body_bytes``
(default :data:`MAX_BODY_BYTES`) answers 413 unread.

The predictor comes from ``stores.build_predictor`` (a model and its store: ``sqlite_store.SQLiteStore``, a fetch
function); ``bundled.bundled_example`` is the bundled HIGGS example's.
"""

from __future__ import annotations

import asyncio
import json
import time

import numpy as np

from lightgbm_cegb.serving.lazy import LazyPredictor
from lightgbm_cegb.serving.results import LazyFetchError
from lightgbm_cegb.serving.workers import in_thread

#: ids a request may score
MAX_IDS = 10_000
#: the default limit of a request's body in bytes (``--max-body-bytes``): 10,000 ids of 19 digits take about 210 kB
MAX_BODY_BYTES = 1_048_576


async def _bounded_body(request, limit: int) -> bytes | None:
    """The request's body, or None when it is longer than ``limit`` bytes: said by its Content-Length (nothing is
    read then), or found while reading a body of unknown length (read no further)."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        return None
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def make_app(predictor: LazyPredictor, description: str, method: str = "predict", *, eager: bool = False,
             sequential: bool = False, max_body_bytes: int = MAX_BODY_BYTES):
    """The Starlette application serving ``predictor`` (see the module's doc); ``eager``: fetch every feature
    of the rows, then predict on the full rows; ``sequential``: a request's fetch calls one after the other on one
    thread (``acquire``), not a round's concurrently (``aacquire``): faster with a store that answers in
    microseconds, slower with one whose queries wait; ``max_body_bytes``: the longest body a request may send (a
    longer one answers 413, its Content-Length read, the body not)."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    num_features = len(predictor.keys)
    lazy = predictor.costs_.arrays(num_features)[0]
    eager_cost = float(lazy.sum() + predictor.costs_.group_arrays(num_features)[1].sum())
    names = [str(key) for key in predictor.keys]

    async def health(request) -> JSONResponse:
        return JSONResponse({"status": "ok", "model": description, "features": names,
                             "groups": {name: list(map(str, members)) for name, members in predictor.groups.items()},
                             "fetch_keys": list(map(str, predictor.fetch_keys)), "eager": eager,
                             "fetch": "sequential" if sequential else "concurrent"})

    async def score(request) -> JSONResponse:
        expected = f'the body should be {{"ids": [row ids]}} with 1..{MAX_IDS} integer ids >= 0'
        text = await _bounded_body(request, max_body_bytes)
        if text is None:
            return JSONResponse({"error": f"the body should be at most {max_body_bytes} bytes (--max-body-bytes); "
                                          f"got {request.headers.get('content-length') or 'more'}"}, status_code=413)
        try:
            body = json.loads(text)
        except RecursionError:  # JSON nested deeper than the parser's recursion limit (e.g. [[[[...]]]])
            return JSONResponse({"error": f"{expected}; got JSON nested too deeply to read"}, status_code=400)
        except ValueError:  # not JSON, not UTF-8
            return JSONResponse({"error": f"{expected}; got a body that is not JSON"}, status_code=400)
        try:
            ids = body["ids"]
            if not isinstance(ids, list) or not 0 < len(ids) <= MAX_IDS or \
                    not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 2**63 for i in ids):
                raise ValueError
        except (ValueError, KeyError, TypeError):
            return JSONResponse({"error": expected}, status_code=400)
        start = time.perf_counter()
        asked = np.asarray(ids, dtype=np.int64)
        try:
            answer = await (_eager(predictor, asked, method) if eager else _lazy(predictor, asked, method))
        except LazyFetchError as exc:
            return JSONResponse({"error": str(exc)}, status_code=404 if isinstance(exc.__cause__, LookupError) else 502)
        except LookupError as exc:  # an eager fetch of ids the store does not hold
            return JSONResponse({"error": str(exc)}, status_code=404)
        except Exception as exc:  # an eager fetch that failed otherwise: the store's error, as the lazy answer says it
            return JSONResponse({"error": f"fetch failed: {type(exc).__name__}: {exc}"}, status_code=502)
        fetched, cost, rounds, calls, prediction = answer
        return JSONResponse({"ids": ids, "predictions": prediction.tolist(), "cost": cost.tolist(),
                             "mean_cost": float(cost.mean()), "eager_cost": eager_cost,
                             "fetched": {names[f]: asked[fetched[:, f]].tolist() for f in range(num_features)
                                         if fetched[:, f].any()},
                             "rounds": rounds, "fetch_calls": calls,
                             "latency_ms": (time.perf_counter() - start) * 1000})

    async def _lazy(predictor: LazyPredictor, ids: np.ndarray, method: str):
        unknown = np.full((len(ids), num_features), np.nan)
        result = await (asyncio.to_thread(predictor.acquire, unknown, ids=ids, method=method) if sequential else
                        predictor.aacquire(unknown, ids=ids, method=method))
        return result.fetched, result.per_instance, result.rounds, result.fetch_calls, result.prediction

    async def _eager(predictor: LazyPredictor, ids: np.ndarray, method: str):
        keys = predictor.fetch_keys
        answers = await asyncio.gather(*(in_thread(predictor.fetch, key, ids) for key in keys))
        X = np.zeros((len(ids), num_features))
        fetched = np.zeros(X.shape, dtype=bool)
        for key, outcome in zip(keys, answers):  # each answer read as the lazy path reads it
            columns = [predictor.keys.index(member) for member in predictor.groups.get(key, [key])]
            X[:, columns] = predictor.read_fetched(key, ids, outcome)
            fetched[:, columns] = True
        # what the full rows cost: every feature read, and the split costs of their paths
        evaluation = predictor.forest.cost(X, np.zeros(num_features), predictor.costs_.arrays(num_features)[2],
                                           predictor.num_trees, tree=predictor.costs_.tree)[1]
        prediction = np.asarray(await asyncio.to_thread(predictor.predict_rows, X, method))
        return fetched, evaluation + eager_cost, 1, len(keys), prediction

    return Starlette(routes=[Route("/health", health), Route("/score", score, methods=["POST"])])
