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

``SQLiteStore`` is a fetch over a SQLite file whose tables have an integer column ``id`` and a column per feature
(named as the model's feature; NULL: a missing value); each key is served by the one table holding all its
columns (a group's members: one query). An id that a table holds twice is an error of the request that asks
for it (502, naming the table and the id), not a row chosen among them. ``bundled_example`` writes the bundled
HIGGS example (a store of the test events, a CEGB model with the demo's costs).
"""

from __future__ import annotations

import asyncio
import json
import queue
import sqlite3
import threading
import time
from collections import Counter
from contextlib import closing, contextmanager
from pathlib import Path

import lightgbm as lgb
import numpy as np

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.datasets import HIGGS_COSTS, HIGGS_FEATURES, NUM_LOW_LEVEL, higgs
from lightgbm_cegb.io.atomic import write_atomically
from lightgbm_cegb.serving.lazy import LazyPredictor
from lightgbm_cegb.serving.results import LazyFetchError
from lightgbm_cegb.serving.workers import in_thread

#: the bundled example's tables: the low-level measurements (cheap) and the invariant masses (reconstructed)
HIGGS_TABLES = {"detector": HIGGS_FEATURES[:NUM_LOW_LEVEL], "reconstruction": HIGGS_FEATURES[NUM_LOW_LEVEL:]}
#: ids a request may score
MAX_IDS = 10_000
#: the default limit of a request's body in bytes (``--max-body-bytes``): 10,000 ids of 19 digits take about 210 kB
MAX_BODY_BYTES = 1_048_576


class UnknownRows(LookupError):
    """Ids that the store does not hold (the service answers 404)."""


def quoted(name: str) -> str:
    """An SQL identifier."""
    return '"' + str(name).replace('"', '""') + '"'


class SQLiteStore:
    """fetch(key, ids) over a SQLite file: one query per call, on a read-only connection no other call uses at the
    same time (calls run in threads; connections are kept for the next calls); ``latency`` seconds of sleep
    before each query of the tables in ``slow`` (None: all); ``log``: a file a JSON line per query is appended to
    (the key, the table, the ids, the SQL statements SQLite ran).

    Raises
    ------
    CEGBError
        When ``path`` is not a SQLite file.
    """

    def __init__(self, path: Path, *, latency: float = 0.0, slow: set[str] | None = None,
                 log: Path | None = None) -> None:
        path = Path(path)
        if not path.is_file():
            raise CEGBError(f"expected a SQLite file, got {str(path)!r}, which does not exist")
        self.path, self.latency, self.slow, self.log = path, latency, slow, log
        self.lock = threading.Lock()
        self.idle: queue.SimpleQueue = queue.SimpleQueue()  # connections no call is using
        try:
            with closing(self.connect()) as db:
                tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
                self.tables = {table: [row[1] for row in db.execute(f"PRAGMA table_info({quoted(table)})")]
                               for table in tables}
        except sqlite3.DatabaseError as exc:
            raise CEGBError(f"{str(path)!r} is not a SQLite database ({exc})") from None
        self.routes: dict = {}  # key -> (table, its columns, whether it is a group)

    def connect(self) -> sqlite3.Connection:
        return sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)

    @contextmanager
    def connection(self):
        """A connection of the pool for one query (a new one when every kept one is in use)."""
        try:
            db = self.idle.get_nowait()
        except queue.Empty:
            db = self.connect()
        try:
            yield db
        except BaseException:
            db.close()  # in an unknown state
            raise
        self.idle.put(db)

    def bind(self, predictor: LazyPredictor) -> None:
        """The table of each key the predictor may fetch: the one holding all its columns (the key's own table
        when several do).

        Raises
        ------
        CEGBError
            Naming a key that no table serves, or several.
        """
        for key in predictor.fetch_keys:
            group = key in predictor.groups
            columns = [str(member) for member in predictor.groups[key]] if group else [str(key)]
            holders = [table for table, names in self.tables.items() if {"id", *columns} <= set(names)]
            if len(holders) > 1 and str(key) in holders:
                holders = [str(key)]
            what = f"group {key!r} (members {columns})" if group else f"feature {key!r}"
            if len(holders) != 1:
                raise CEGBError(f"{what}: expected one table with the columns id, {', '.join(columns)}; "
                                f"{'none' if not holders else f'the tables {holders}'} of {str(self.path)!r} hold "
                                f"them (tables: {sorted(self.tables)[:10]})")
            self.routes[key] = (holders[0], columns, group)

    def __call__(self, key, ids: np.ndarray):
        table, columns, group = self.routes[key]
        if self.latency and (self.slow is None or table in self.slow):
            time.sleep(self.latency)
        statements: list[str] = []
        with self.connection() as db:
            db.set_trace_callback(statements.append if self.log is not None else None)
            # qualified names: SQLite reads an unknown "column" alone as the string 'column' (a column dropped or
            # renamed while the service runs would score its name); "table"."column" is an error instead
            names = ", ".join(f"{quoted(table)}.{quoted(name)}" for name in ["id", *columns])
            rows = db.execute(f"SELECT {names} FROM {quoted(table)} WHERE {quoted(table)}.\"id\" IN "
                              "(SELECT value FROM json_each(?))", (json.dumps(ids.tolist()),)).fetchall()
        if self.log is not None:
            line = json.dumps({"key": key, "table": table, "ids": ids.tolist(), "sql": statements})
            with self.lock, open(self.log, "a", encoding="utf-8") as out:
                out.write(line + "\n")
        found = {row[0]: row[1:] for row in rows}
        if len(found) < len(rows):  # a table without a unique id: which of its rows is the id's is not known
            twice = sorted(i for i, n in Counter(row[0] for row in rows).items() if n > 1)
            raise CEGBError(f"table {table!r} of {str(self.path)!r} holds several rows with id {twice[:5]}: an id "
                            "should name one row (declare the column id INTEGER PRIMARY KEY, or UNIQUE)")
        missing = [int(i) for i in ids if int(i) not in found]
        if missing:
            raise UnknownRows(f"no row with id {missing[:5]} in table {table!r}")
        values = np.array([found[int(i)] for i in ids], dtype=np.float64).reshape(len(ids), len(columns))  # NULL: NaN
        return values if group else values[:, 0]


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


def bundled_example(workdir: Path, latency_ms: float = 20.0,
                    log: Path | None = None) -> tuple[LazyPredictor, str]:
    """The bundled example in ``workdir``: a SQLite store of the bundled HIGGS test events (ids 0..499; table
    ``detector``: the 21 low-level measurements, cost 1 each; ``reconstruction``: the 7 invariant masses, cost 10
    each, each query of it sleeping ``latency_ms``), a CEGB model trained deterministically on the training
    events with those costs (``model.txt``), and the predictor serving it from the store."""
    store_path, model_path = workdir / "store.sqlite", workdir / "model.txt"
    if not store_path.exists():
        X, _ = higgs("test")

        def fill(tmp):
            with closing(sqlite3.connect(tmp)) as db, db:
                for table, names in HIGGS_TABLES.items():
                    columns = [HIGGS_FEATURES.index(name) for name in names]
                    db.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, "
                               + ", ".join(f"{quoted(name)} REAL" for name in names) + ")")
                    db.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * (len(names) + 1))})",
                                   [(i, *map(float, X[i, columns])) for i in range(len(X))])

        write_atomically(store_path, fill)
    X, y = higgs("train")
    params = {"objective": "binary", "num_leaves": 31, "learning_rate": 0.1, "seed": 0, "deterministic": True,
              "num_threads": 1, "verbose": -1, **HIGGS_COSTS.to_params(tradeoff=0.003)}
    booster = lgb.train(params, lgb.Dataset(X, y, feature_name=HIGGS_FEATURES), 100)
    write_atomically(model_path, booster.save_model)
    store = SQLiteStore(store_path, latency=latency_ms / 1000, slow={"reconstruction"}, log=log)
    predictor = LazyPredictor(booster, store, feature_costs=HIGGS_COSTS)
    store.bind(predictor)
    return predictor, f"the bundled HIGGS model ({model_path})"


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
        for key, outcome in zip(keys, answers):  # each answer read as the lazy path reads it (_values)
            columns = [predictor.keys.index(member) for member in predictor.groups.get(key, [key])]
            X[:, columns] = predictor._values(predictor._unit_keys.index(key), ids, outcome)
            fetched[:, columns] = True
        # what the full rows cost: every feature read, and the split costs of their paths
        evaluation = predictor.forest.cost(X, np.zeros(num_features), predictor.costs_.arrays(num_features)[2],
                                           predictor.num_trees, tree=predictor.costs_.tree)[1]
        prediction = np.asarray(await asyncio.to_thread(predictor.predict_rows, X, method))
        return fetched, evaluation + eager_cost, 1, len(keys), prediction

    return Starlette(routes=[Route("/health", health), Route("/score", score, methods=["POST"])])
