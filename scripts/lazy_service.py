"""Example service: score HIGGS events with lazy feature acquisition from a SQLite feature store.

    make serve                                    # or: .venv/bin/python scripts/lazy_service.py --help
    curl -s localhost:8000/score -d '{"ids": [0, 1, 2]}'

On start it builds (once) a feature store in --workdir from the bundled HIGGS test events (ids 0..499):
table ``detector`` holds the 21 low-level measurements (cheap: cost 1 each), table ``reconstruction`` the 7
invariant masses (cost 10 each; every query of it sleeps --latency-ms, standing in for the reconstruction
job). It trains a CEGB model on the bundled training events with the demo's costs (written to
``model.txt`` there) and serves, with Starlette on uvicorn:

    GET  /health            {"status": "ok", "features": [...], "events": 500}
    POST /score {"ids": [...]}
        {"predictions": [...], "cost": [...], "mean_cost": ..., "eager_cost": 91.0, "fetched": {feature: rows},
         "rounds": ..., "fetch_calls": ..., "latency_ms": ...}

Each request asks the store only for the features its events' paths reach: a round's queries run
concurrently (LazyPredictor.aacquire), one query per feature per round.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import time
from pathlib import Path

import lightgbm as lgb
import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from lightgbm_cegb.datasets import HIGGS_COSTS, HIGGS_FEATURES, NUM_LOW_LEVEL, higgs
from lightgbm_cegb.io.atomic import write_atomically
from lightgbm_cegb.serving.lazy import LazyFetchError, LazyPredictor

TABLES = {"detector": HIGGS_FEATURES[:NUM_LOW_LEVEL], "reconstruction": HIGGS_FEATURES[NUM_LOW_LEVEL:]}
MAX_IDS = 10_000


class UnknownEvent(LookupError):
    """An id that the store does not hold."""


def build_store(path: Path) -> int:
    """The SQLite store of the bundled test events (written to a temporary file, then renamed)."""
    X, _ = higgs("test")
    if path.exists():
        return len(X)

    def fill(tmp):
        with sqlite3.connect(tmp) as db:
            for table, names in TABLES.items():
                columns = [HIGGS_FEATURES.index(name) for name in names]
                db.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, "
                           + ", ".join(f'"{name}" REAL' for name in names) + ")")
                db.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * (len(names) + 1))})",
                               [(i, *map(float, X[i, columns])) for i in range(len(X))])
        db.close()

    write_atomically(path, fill)
    return len(X)


def train_model(path: Path) -> lgb.Booster:
    """The CEGB model the service uses (trained deterministically; written atomically to ``path``)."""
    X, y = higgs("train")
    params = {"objective": "binary", "num_leaves": 31, "learning_rate": 0.1, "seed": 0, "deterministic": True,
              "num_threads": 1, "verbose": -1, **HIGGS_COSTS.to_params(tradeoff=0.003)}
    booster = lgb.train(params, lgb.Dataset(X, y, feature_name=HIGGS_FEATURES), 100)
    write_atomically(path, booster.save_model)
    return booster


class FeatureStore:
    """fetch(feature, ids) over the SQLite store: one query per call, on its own connection (calls run in
    threads); the reconstruction table answers after ``latency`` seconds."""

    def __init__(self, path: Path, latency: float) -> None:
        self.path, self.latency = path, latency
        self.table = {name: table for table, names in TABLES.items() for name in names}

    def __call__(self, feature: str, ids: np.ndarray) -> list[float]:
        table = self.table[feature]
        if table == "reconstruction":
            time.sleep(self.latency)
        with sqlite3.connect(self.path) as db:
            found = dict(db.execute(f'SELECT id, "{feature}" FROM {table} WHERE id IN '
                                    "(SELECT value FROM json_each(?))", (json.dumps(ids.tolist()),)))
        db.close()
        missing = [int(i) for i in ids if int(i) not in found]
        if missing:
            raise UnknownEvent(f"no event {missing[:5]} in table {table}")
        return [found[int(i)] for i in ids]


def make_app(workdir: Path, latency: float) -> Starlette:
    workdir.mkdir(parents=True, exist_ok=True)
    num_events = build_store(workdir / "store.sqlite")
    booster = train_model(workdir / "model.txt")
    predictor = LazyPredictor(booster, FeatureStore(workdir / "store.sqlite", latency), feature_costs=HIGGS_COSTS)
    eager_cost = float(HIGGS_COSTS.lazy.sum())

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "features": HIGGS_FEATURES, "events": num_events})

    async def score(request: Request) -> JSONResponse:
        expected = f'the body should be {{"ids": [event ids]}} with 1..{MAX_IDS} integer ids of events ' \
                   f"0..{num_events - 1}"
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
        unknown = np.full((len(ids), len(HIGGS_FEATURES)), np.nan)
        try:
            result = await predictor.aacquire(unknown, ids=np.asarray(ids, dtype=np.int64))
        except LazyFetchError as exc:
            return JSONResponse({"error": str(exc)},
                                status_code=404 if isinstance(exc.__cause__, UnknownEvent) else 502)
        fetched = {name: np.flatnonzero(result.fetched[:, f]).tolist() for f, name in enumerate(HIGGS_FEATURES)
                   if result.fetched[:, f].any()}
        return JSONResponse({"predictions": result.prediction.tolist(), "cost": result.per_instance.tolist(),
                             "mean_cost": result.mean, "eager_cost": eager_cost, "fetched": fetched,
                             "rounds": result.rounds, "fetch_calls": result.fetch_calls,
                             "latency_ms": (time.perf_counter() - start) * 1000})

    return Starlette(routes=[Route("/health", health), Route("/score", score, methods=["POST"])])


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--workdir", type=Path, default=Path(".lazy_service"),
                        help="where the store and the model go (default: %(default)s)")
    parser.add_argument("--latency-ms", type=float, default=20.0,
                        help="simulated latency of each reconstruction query (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.latency_ms < 0:
        parser.error(f"--latency-ms should be >= 0, got {args.latency_ms}")
    app = make_app(args.workdir, args.latency_ms / 1000)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
