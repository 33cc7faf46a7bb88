"""A feature store over a SQLite file: the first implementation of ``stores.Store`` (``lightgbm-cegb serve
--store``).

``SQLiteStore`` reads a SQLite file whose tables have an integer column ``id`` and a column per feature (named as
the model's feature; NULL: a missing value); each key is served by the one table holding all its columns (a
group's members: one query), found by its ``bind`` hook. An id that a table holds twice is an error of the
request that asks for it (502, naming the table and the id), not a row chosen among them.
"""

from __future__ import annotations

import json
import queue
import sqlite3
import threading
import time
from collections import Counter
from contextlib import closing, contextmanager
from pathlib import Path

import numpy as np

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.serving.lazy import LazyPredictor
from lightgbm_cegb.serving.stores import StoreError


class UnknownRows(LookupError):
    """Ids that the store does not hold (the service answers 404)."""


def quoted(name: str) -> str:
    """An SQL identifier."""
    return '"' + str(name).replace('"', '""') + '"'


class SQLiteStore:
    """A ``stores.Store`` over a SQLite file: one query per call, on a read-only connection no other call uses at
    the same time (calls run in threads; connections are kept for the next calls).

    Parameters
    ----------
    path : Path
        The SQLite file: tables with an integer column ``id`` and a column per feature.
    latency : float, default=0.0
        Seconds of sleep before each query of the tables in ``slow`` (a stand-in for a slow store).
    slow : set of str or None, default=None
        The tables that sleep (None: all).
    log : Path or None, default=None
        A file a JSON line per query is appended to (the key, the table, the ids, the SQL statements SQLite ran).

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
        """A new read-only connection to the file.

        Returns
        -------
        sqlite3.Connection
            The connection (usable from any thread).
        """
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
        when several do); the ``bind`` hook of ``stores.Store``.

        Parameters
        ----------
        predictor : LazyPredictor
            The predictor this store serves.

        Raises
        ------
        StoreError
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
                raise StoreError(f"{what}: expected one table with the columns id, {', '.join(columns)}; "
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
