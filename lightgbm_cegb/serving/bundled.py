"""The bundled example of ``lightgbm-cegb serve`` (``make serve``): a SQLite store of the bundled HIGGS test events
and a CEGB model trained with the demo's costs, written to a working folder.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import lightgbm as lgb

from lightgbm_cegb.datasets import HIGGS_COSTS, HIGGS_FEATURES, NUM_LOW_LEVEL, higgs
from lightgbm_cegb.io.atomic import write_atomically
from lightgbm_cegb.serving.lazy import LazyPredictor
from lightgbm_cegb.serving.sqlite_store import SQLiteStore, quoted
from lightgbm_cegb.serving.stores import build_predictor

#: the bundled example's tables: the low-level measurements (cheap) and the invariant masses (reconstructed)
HIGGS_TABLES = {"detector": HIGGS_FEATURES[:NUM_LOW_LEVEL], "reconstruction": HIGGS_FEATURES[NUM_LOW_LEVEL:]}


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
    return build_predictor(booster, store, HIGGS_COSTS), f"the bundled HIGGS model ({model_path})"
