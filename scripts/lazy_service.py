"""Example service: score rows of a tree model with lazy feature acquisition from a feature store.

    make serve                               # the bundled example (HIGGS events, the demo's costs): below
    .venv/bin/python scripts/lazy_service.py --model MODEL [--costs FILE] --store STORE.sqlite
    .venv/bin/python scripts/lazy_service.py --model MODEL [--costs FILE] --fetch MODULE:FUNCTION
    curl -s localhost:8000/score -d '{"ids": [0, 1, 2]}'

Options (``--help`` lists them all):

- ``--model``: a LightGBM model file, or a folder written by an estimator's ``save()`` (any model
  LazyPredictor takes: the CEGB, Greedy Miser and BudgetRF estimators; ADAPT, CSTC and Early Exit are not
  tree ensembles and are refused).
- ``--costs``: the costs and the feature groups: a JSON object of FeatureCosts' arguments (``lazy``,
  ``coupled``, ``split``, ``groups``, ``group_lazy``, ``group_coupled``, ``tree``, as ``FeatureCosts.fields()``
  or ``to_dict()`` give them; by column or by feature name), or the cost file of the ``lightgbm-cegb``
  command line (one lazy cost per line, line i for column i - 1; read by ``FeatureCosts.from_file``, as the
  command line reads it). Default: the model's own (a saved estimator's fitted costs, a LightGBM model's
  ``cegb_*`` parameters; none: everything costs 0).
- ``--store``: a SQLite file. Each table has an integer column ``id`` (the ids requests give) and one column
  per feature it holds, named as the model's feature (NULL: a missing value). Each key LazyPredictor fetches
  is served by the one table that holds all its columns: a feature in no group by the table holding its
  column (a table per feature, or several features in a table), a group by the table holding all its
  members, which one query returns together. Checked at start: a key no table serves is an error.
- ``--fetch``: instead of a store, a Python function ``module:function`` (or ``path/to/file.py:function``)
  called as LazyPredictor's ``fetch(key, ids)`` (a group's key: all its members' values at once); a
  coroutine function is awaited. A LookupError it raises answers 404 (ids it does not know).
- ``--method``: the model's method that predicts (default ``predict``; e.g. ``predict_proba`` for a
  classifier's probabilities).
- ``--query-log FILE``: the SQLite store appends a JSON line per query (the key, the table, the ids, the SQL
  statements SQLite ran).
- ``--host`` (default 127.0.0.1: this machine only) and ``--port``.

Without ``--model``, the bundled example: a SQLite store of the bundled HIGGS test events (ids 0..499), table
``detector`` with the 21 low-level measurements (cost 1 each) and table ``reconstruction`` with the 7
invariant masses (cost 10 each; each query of it sleeps ``--latency-ms``, standing in for the reconstruction
job), and a CEGB model trained on the bundled training events with those costs. Its files (``store.sqlite``,
``model.txt``) go to ``--workdir``, by default a temporary folder removed when the service stops.

    GET  /health            {"status": "ok", "model": ..., "features": [...], "groups": {...}, "fetch_keys": [...]}
    POST /score {"ids": [...]}
        {"predictions": [...], "cost": [...], "mean_cost": ..., "eager_cost": ..., "fetched": {feature: ids},
         "rounds": ..., "fetch_calls": ..., "latency_ms": ...}

``cost`` is each row's cost (the lazy costs of the features its paths read, each group's once, the split
costs), which is what ``prediction_cost`` reports for the full row; ``eager_cost`` the lazy cost of reading
every feature; ``latency_ms`` the time from the request's start to its answer. Each request asks the store
only for what its rows' paths reach: a round's queries run concurrently (LazyPredictor.aacquire), at most one
query per feature in no group and one per group (all its members) per round.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import signal
import sqlite3
import sys
import tempfile
import threading
import time
from contextlib import closing
from pathlib import Path

import lightgbm as lgb
import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import lightgbm_cegb
from lightgbm_cegb import CEGBError, FeatureCosts, LazyFetchError, LazyPredictor, to_forest
from lightgbm_cegb.datasets import HIGGS_COSTS, HIGGS_FEATURES, NUM_LOW_LEVEL, higgs
from lightgbm_cegb.io.atomic import write_atomically
from lightgbm_cegb.io.models import load_file
from lightgbm_cegb.io.saved import read as read_saved

HIGGS_TABLES = {"detector": HIGGS_FEATURES[:NUM_LOW_LEVEL], "reconstruction": HIGGS_FEATURES[NUM_LOW_LEVEL:]}
MAX_IDS = 10_000
COST_FIELDS = ("lazy", "coupled", "split", "groups", "group_lazy", "group_coupled", "tree")


class OptionError(Exception):
    """A command-line option's value cannot be used: reported as argparse reports its errors (status 2)."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"{option}: {message}")


class UnknownRows(LookupError):
    """Ids that the store does not hold."""


# ---------------------------------------------------------------------------------------------- the inputs


def load_model(path: Path):
    """A model file (LightGBM, XGBoost, CatBoost), or the estimator saved in a folder (its class named by the
    manifest)."""
    try:
        if path.is_dir():
            manifest, _ = read_saved(path)
            estimator = getattr(lightgbm_cegb, str(manifest["estimator"]), None)
            if not (isinstance(estimator, type) and callable(getattr(estimator, "load", None))):
                raise CEGBError(f"{str(path)!r} holds a {manifest['estimator']!r}, not an estimator of lightgbm_cegb")
            return estimator.load(path)
        if not path.exists():
            raise CEGBError(f"expected a model file or a folder saved by an estimator's save(), got "
                            f"{str(path)!r}, which does not exist")
        to_forest(path)  # a clear error for a file that is not a model
        return load_file(path)
    except CEGBError as exc:
        raise OptionError("--model", str(exc)) from None


def load_costs(path: Path, num_features: int) -> FeatureCosts:
    """FeatureCosts from a JSON object of its arguments, or from the command line's cost file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise OptionError("--costs", f"cannot read {str(path)!r}: {exc}") from None
    try:
        if not text.lstrip().startswith("{"):
            return FeatureCosts.from_file(path, num_features=num_features)
        try:
            fields = json.loads(text)
        except ValueError as exc:
            raise CEGBError(f"{str(path)!r} is not valid JSON ({exc})") from None
        unknown = sorted(set(fields) - set(COST_FIELDS)) if isinstance(fields, dict) else None
        if unknown is None or unknown:
            raise CEGBError(f"{str(path)!r} should hold a JSON object of FeatureCosts' arguments {list(COST_FIELDS)}, "
                            f"got " + (f"the keys {unknown}" if unknown else f"a JSON {type(fields).__name__}"))
        return FeatureCosts(**fields)
    except (CEGBError, TypeError, ValueError) as exc:
        raise OptionError("--costs", str(exc)) from None


def load_function(spec: str):
    """The function ``module:function`` or ``path/to/file.py:function``."""
    module_name, _, name = spec.rpartition(":")
    if not module_name or not name:
        raise OptionError("--fetch", f"expected MODULE:FUNCTION or path/to/file.py:FUNCTION, got {spec!r}")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise OptionError("--fetch", f"expected MODULE:FUNCTION or path/to/file.py:FUNCTION, got {spec!r}, "
                                             f"and {module_name} does not exist")
            loader = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path:  # a module next to where the service starts, as `python -m` finds it
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except OptionError:
        raise
    except Exception as exc:  # the user's module: whatever importing it raised
        raise OptionError("--fetch", f"cannot import {module_name} ({type(exc).__name__}: {exc})") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise OptionError("--fetch", f"{module_name} has no function {name!r}")
    return function


# ---------------------------------------------------------------------------------------------- the store


def quoted(name: str) -> str:
    """An SQL identifier."""
    return '"' + str(name).replace('"', '""') + '"'


class SQLiteStore:
    """fetch(key, ids) over a SQLite file: one query per call, on a read-only connection of its own (calls
    run in threads); ``latency`` seconds of sleep before each query of the tables in ``slow`` (None: all)."""

    def __init__(self, path: Path, *, latency: float = 0.0, slow: set[str] | None = None,
                 log: Path | None = None) -> None:
        if not path.is_file():
            raise OptionError("--store", f"expected a SQLite file, got {str(path)!r}, which does not exist")
        self.path, self.latency, self.slow, self.log = path, latency, slow, log
        self.lock = threading.Lock()
        try:
            with closing(self.connect()) as db:
                tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
                self.tables = {table: [row[1] for row in db.execute(f"PRAGMA table_info({quoted(table)})")]
                               for table in tables}
        except sqlite3.DatabaseError as exc:
            raise OptionError("--store", f"{str(path)!r} is not a SQLite database ({exc})") from None
        self.routes: dict = {}  # key -> (table, its columns, whether it is a group)

    def connect(self) -> sqlite3.Connection:
        return sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True)

    def bind(self, predictor: LazyPredictor) -> None:
        """The table of each key the predictor may fetch: the one holding all its columns (the key's own table
        when several do). OptionError naming a key that no table serves, or several."""
        for key in predictor.fetch_keys:
            group = key in predictor.groups
            columns = [str(member) for member in predictor.groups[key]] if group else [str(key)]
            holders = [table for table, names in self.tables.items() if {"id", *columns} <= set(names)]
            if len(holders) > 1 and str(key) in holders:
                holders = [str(key)]
            what = f"group {key!r} (members {columns})" if group else f"feature {key!r}"
            if len(holders) != 1:
                raise OptionError("--store", f"{what}: expected one table with the columns id, {', '.join(columns)}; "
                                             f"{'none' if not holders else f'the tables {holders}'} of "
                                             f"{str(self.path)!r} hold them (tables: {sorted(self.tables)[:10]})")
            self.routes[key] = (holders[0], columns, group)

    def __call__(self, key, ids: np.ndarray):
        table, columns, group = self.routes[key]
        if self.latency and (self.slow is None or table in self.slow):
            time.sleep(self.latency)
        statements: list[str] = []
        with closing(self.connect()) as db:
            db.set_trace_callback(statements.append)
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
        missing = [int(i) for i in ids if int(i) not in found]
        if missing:
            raise UnknownRows(f"no row with id {missing[:5]} in table {table!r}")
        values = np.array([found[int(i)] for i in ids], dtype=np.float64).reshape(len(ids), len(columns))  # NULL: NaN
        return values if group else values[:, 0]


# ---------------------------------------------------------------------------------------------- the bundled example


def build_higgs_store(path: Path) -> None:
    """The SQLite store of the bundled HIGGS test events, once (written to a temporary file, then renamed)."""
    if path.exists():
        return
    X, _ = higgs("test")

    def fill(tmp):
        with closing(sqlite3.connect(tmp)) as db, db:
            for table, names in HIGGS_TABLES.items():
                columns = [HIGGS_FEATURES.index(name) for name in names]
                db.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, "
                           + ", ".join(f"{quoted(name)} REAL" for name in names) + ")")
                db.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * (len(names) + 1))})",
                               [(i, *map(float, X[i, columns])) for i in range(len(X))])

    write_atomically(path, fill)


def train_higgs_model(path: Path) -> lgb.Booster:
    """The bundled example's CEGB model (trained deterministically; written atomically to ``path``)."""
    X, y = higgs("train")
    params = {"objective": "binary", "num_leaves": 31, "learning_rate": 0.1, "seed": 0, "deterministic": True,
              "num_threads": 1, "verbose": -1, **HIGGS_COSTS.to_params(tradeoff=0.003)}
    booster = lgb.train(params, lgb.Dataset(X, y, feature_name=HIGGS_FEATURES), 100)
    write_atomically(path, booster.save_model)
    return booster


# ---------------------------------------------------------------------------------------------- the service


def make_predictor(args, workdir: Path | None) -> tuple[LazyPredictor, str]:
    """The predictor the options describe, its store bound, and a description of the model."""
    if args.model is None:
        build_higgs_store(workdir / "store.sqlite")
        booster = train_higgs_model(workdir / "model.txt")
        latency = 20.0 if args.latency_ms is None else args.latency_ms
        store = SQLiteStore(workdir / "store.sqlite", latency=latency / 1000, slow={"reconstruction"},
                            log=args.query_log)
        predictor = LazyPredictor(booster, store, feature_costs=HIGGS_COSTS)
        store.bind(predictor)
        return predictor, f"the bundled HIGGS model ({workdir / 'model.txt'})"
    model = load_model(args.model)
    if args.fetch is not None:
        fetch = load_function(args.fetch)
    else:
        fetch = SQLiteStore(args.store, latency=(args.latency_ms or 0.0) / 1000, log=args.query_log)
    try:
        predictor = LazyPredictor(model, fetch)
    except CEGBError as exc:
        raise OptionError("--model", f"{args.model}: {exc}") from None
    if args.costs is not None:
        costs = load_costs(args.costs, predictor.forest.num_features)
        try:
            predictor = LazyPredictor(model, fetch, feature_costs=costs)
        except CEGBError as exc:
            raise OptionError("--costs", f"{args.costs}: {exc}") from None
    if not callable(getattr(predictor.model, args.method, None)):
        raise OptionError("--method", f"{type(predictor.model).__name__} has no method {args.method!r}")
    if isinstance(fetch, SQLiteStore):
        fetch.bind(predictor)
    return predictor, f"{type(model).__name__} from {args.model}"


def make_app(predictor: LazyPredictor, description: str, method: str = "predict") -> Starlette:
    num_features = predictor.forest.num_features
    lazy = predictor.costs_.arrays(num_features)[0]
    eager_cost = float(lazy.sum() + predictor.costs_.group_arrays(num_features)[1].sum())
    names = [str(key) for key in predictor.keys]

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "model": description, "features": names,
                             "groups": {name: list(map(str, members)) for name, members in predictor.groups.items()},
                             "fetch_keys": list(map(str, predictor.fetch_keys))})

    async def score(request: Request) -> JSONResponse:
        expected = f'the body should be {{"ids": [row ids]}} with 1..{MAX_IDS} integer ids >= 0'
        try:
            body = json.loads(await request.body())
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
        unknown = np.full((len(ids), num_features), np.nan)
        try:
            result = await predictor.aacquire(unknown, ids=np.asarray(ids, dtype=np.int64), method=method)
        except LazyFetchError as exc:
            return JSONResponse({"error": str(exc)}, status_code=404 if isinstance(exc.__cause__, LookupError) else 502)
        asked = np.asarray(ids, dtype=np.int64)
        fetched = {names[f]: asked[result.fetched[:, f]].tolist() for f in range(num_features)
                   if result.fetched[:, f].any()}
        return JSONResponse({"predictions": result.prediction.tolist(), "cost": result.per_instance.tolist(),
                             "mean_cost": result.mean, "eager_cost": eager_cost, "fetched": fetched,
                             "rounds": result.rounds, "fetch_calls": result.fetch_calls,
                             "latency_ms": (time.perf_counter() - start) * 1000})

    return Starlette(routes=[Route("/health", health), Route("/score", score, methods=["POST"])])


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="Without --model: the bundled HIGGS example (see the script's doc).")
    parser.add_argument("--model", type=Path, help="LightGBM model file, or a folder saved by an estimator's save()")
    parser.add_argument("--costs", type=Path, help="costs and groups: JSON of FeatureCosts' arguments, or the CLI's "
                                                   "cost file (default: the model's own)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--store", type=Path, help="SQLite feature store: tables with an id column and one column "
                                                   "per feature; a group's members in one table")
    source.add_argument("--fetch", help="MODULE:FUNCTION or path/to/file.py:FUNCTION, called as fetch(key, ids)")
    parser.add_argument("--method", default="predict", help="the model's method that predicts, e.g. predict_proba "
                                                            "(default: %(default)s)")
    parser.add_argument("--query-log", type=Path, help="append a JSON line per store query to this file")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s, this "
                                                            "machine only)")
    parser.add_argument("--port", type=int, default=8000, help="(default: %(default)s)")
    parser.add_argument("--workdir", type=Path, help="the bundled example's store and model (default: a temporary "
                                                     "folder removed on exit)")
    parser.add_argument("--latency-ms", type=float, help="simulated latency of each query: of the bundled store's "
                                                         "reconstruction table (default 20), of a --store (default 0)")
    return parser


def check(args) -> None:
    """Options that cannot go together, or values out of range: OptionError."""
    if not 0 <= args.port <= 65535:
        raise OptionError("--port", f"expected a port number in 0..65535, got {args.port}")
    if args.latency_ms is not None and not args.latency_ms >= 0:
        raise OptionError("--latency-ms", f"expected a number of milliseconds >= 0, got {args.latency_ms}")
    if args.model is None:
        for option, value in (("--costs", args.costs), ("--store", args.store), ("--fetch", args.fetch),
                              ("--method", None if args.method == "predict" else args.method)):
            if value is not None:
                raise OptionError(option, "needs --model (without --model the bundled HIGGS example runs, with its "
                                          "own costs and store)")
        return
    if args.store is None and args.fetch is None:
        raise OptionError("--model", "needs a feature store: --store FILE.sqlite or --fetch MODULE:FUNCTION")
    if args.workdir is not None:
        raise OptionError("--workdir", "holds the bundled example's files; with --model the service writes none")
    if args.fetch is not None:
        for option, value in (("--query-log", args.query_log), ("--latency-ms", args.latency_ms)):
            if value is not None:
                raise OptionError(option, "applies to a SQLite --store, not to a --fetch function")


def stop(signum, frame) -> None:
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    options = parser()
    args = options.parse_args(argv)
    try:
        check(args)
        with tempfile.TemporaryDirectory(prefix="lazy_service-") as tmp:
            workdir = None
            if args.model is None:
                workdir = args.workdir or Path(tmp)
                workdir.mkdir(parents=True, exist_ok=True)
            predictor, description = make_predictor(args, workdir)
            files = "" if workdir is None else f"; working files in {workdir}" + \
                ("" if args.workdir else " (removed on exit)")
            print(f"serving {description} on http://{args.host}:{args.port}{files}", file=sys.stderr, flush=True)
            # uvicorn re-raises the SIGTERM it stopped on once it is done: an exit through this handler lets the
            # temporary folder be removed (the default action would end the process at once)
            signal.signal(signal.SIGTERM, stop)
            uvicorn.run(make_app(predictor, description, args.method), host=args.host, port=args.port,
                        log_level="warning")
    except OptionError as exc:
        options.error(str(exc))


if __name__ == "__main__":
    main()
