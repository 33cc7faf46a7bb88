"""The SQLite store (lightgbm_cegb/serving/sqlite_store.py) behind ``lightgbm-cegb serve --store``, started on
loopback with a generated model that has a feature group: the store answers a group in one query per round, each
(row, key) once; unknown ids are 404; a column renamed while serving and an id held twice are errors, not wrong
scores."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from collections import Counter
from contextlib import closing

import numpy as np
import pytest
from references import row_paths
from serve_process import FIRST_ID, GROUP, NAMES, Service, call, write_generated

from lightgbm_cegb import prediction_cost


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return write_generated(tmp_path_factory.mktemp("generated"))


@pytest.fixture(scope="module")
def sqlite_service(generated, tmp_path_factory):
    folder, *_ = generated
    log = folder / "queries.jsonl"
    service = Service(["--model", str(folder / "model.txt"), "--costs", str(folder / "costs.json"),
                       "--store", str(folder / "store.sqlite"), "--query-log", str(log)], folder,
                      tmp_path_factory.mktemp("log") / "log.txt")
    service.queries = log
    yield service
    service.stop()


def group_readers(booster, X) -> np.ndarray:
    """Rows whose paths read a member of the group (LightGBM's leaves and the model text)."""
    members = {NAMES.index(m) for m in GROUP}
    return np.array([any(members & set(path) for path in paths) for paths in row_paths(booster, X)])


def test_a_model_file_with_a_group_behind_a_sqlite_store(generated, sqlite_service):
    _, booster, X, costs = generated
    status, health = call(sqlite_service.url + "/health")
    assert status == 200 and health["groups"] == {"scan": GROUP} and "scan" in health["fetch_keys"]
    positions = np.arange(0, len(X), 2)
    sqlite_service.queries.unlink(missing_ok=True)
    status, answer = call(sqlite_service.url + "/score", {"ids": (FIRST_ID + positions).tolist()})
    assert status == 200, answer
    np.testing.assert_array_equal(answer["predictions"], booster.predict(X[positions]))
    report = prediction_cost(booster, X[positions], costs)
    np.testing.assert_allclose(answer["cost"], report.per_instance, rtol=1e-12)
    assert answer["eager_cost"] == 7.0 + 20.0 and answer["latency_ms"] > 0
    # the store's log: one SQL statement per fetch call, the group's naming all its members; at most one call
    # per key per round; each (row, key) once; the group asked for exactly the rows whose paths read a member
    queries = [json.loads(line) for line in sqlite_service.queries.read_text().splitlines()]
    assert len(queries) == answer["fetch_calls"]
    assert all(len(q["sql"]) == 1 and q["sql"][0].startswith("SELECT") for q in queries)
    per_key = Counter(q["key"] for q in queries)
    assert per_key["scan"] >= 1 and max(per_key.values()) <= answer["rounds"]
    assert not set(per_key) & set(GROUP), "a member was fetched on its own"
    for q in queries:
        if q["key"] == "scan":
            assert q["table"] == "scan" and all(f'"{m}"' in q["sql"][0] for m in GROUP)
    pairs = Counter((q["key"], i) for q in queries for i in q["ids"])
    assert max(pairs.values()) == 1
    asked = {i - FIRST_ID for q in queries if q["key"] == "scan" for i in q["ids"]}
    assert asked == set(positions[group_readers(booster, X[positions])].tolist())
    # the answer names the ids asked for: each feature's list holds the ids its values were fetched for
    assert answer["ids"] == (FIRST_ID + positions).tolist()
    fetched_ids = {(q["key"], i) for q in queries for i in q["ids"]}
    for name, ids in answer["fetched"].items():
        key = "scan" if name in GROUP else name
        assert {(key, i) for i in ids} <= fetched_ids and set(ids) <= set(answer["ids"])


def test_unknown_ids_are_404(sqlite_service):
    status, answer = call(sqlite_service.url + "/score", {"ids": [FIRST_ID, 5]})
    assert status == 404 and re.search(r"no row with id \[5\] in table '(cheap|f2|scan)'", answer["error"]), answer


def test_a_column_renamed_while_serving_is_an_error_not_its_name(generated, tmp_path):
    """Issue 48, item 5: the store quoted column names with double quotes, which SQLite reads as a string when no
    such column exists: after a rename, feature "f2" scored the value 'f2' -> HTTP 200 and a wrong score."""
    folder, booster, X, _ = generated
    for name in ("model.txt", "costs.json", "store.sqlite"):
        shutil.copy(folder / name, tmp_path / name)
    service = Service(["--model", str(tmp_path / "model.txt"), "--costs", str(tmp_path / "costs.json"),
                       "--store", str(tmp_path / "store.sqlite")], tmp_path, tmp_path / "log.txt")
    try:
        ids = [FIRST_ID + i for i in range(40)]
        status, answer = call(service.url + "/score", {"ids": ids})
        assert status == 200 and answer["predictions"] == booster.predict(X[:40]).tolist()
        with closing(sqlite3.connect(tmp_path / "store.sqlite")) as db, db:
            db.execute("ALTER TABLE f2 RENAME COLUMN f2 TO f2_old")
        status, answer = call(service.url + "/score", {"ids": ids})
        assert status == 502 and "no such column: f2.f2" in answer["error"], answer
    finally:
        service.stop()


def test_an_id_held_twice_by_the_store_is_an_error(generated, tmp_path):
    """Issue 61 (13): an id with two rows in a table was scored silently with the last one. A request for it is
    answered 502 naming the table and the id; the ids held once are scored as before."""
    folder, booster, X, _ = generated
    shutil.copy(folder / "store.sqlite", tmp_path / "store.sqlite")
    with closing(sqlite3.connect(tmp_path / "store.sqlite")) as db, db:
        db.execute("CREATE TABLE cheap2 (id INTEGER, f0 REAL, f1 REAL)")
        db.execute("INSERT INTO cheap2 SELECT * FROM cheap")
        db.execute(f"INSERT INTO cheap2 VALUES ({FIRST_ID + 3}, 100.0, 100.0)")
        db.execute("DROP TABLE cheap")
    service = Service(["--model", str(folder / "model.txt"), "--costs", str(folder / "costs.json"), "--store",
                       str(tmp_path / "store.sqlite")], tmp_path, tmp_path / "log.txt")
    try:
        status, answer = call(service.url + "/score", {"ids": [FIRST_ID, FIRST_ID + 1]})
        assert status == 200 and answer["predictions"] == booster.predict(X[:2]).tolist(), answer
        status, answer = call(service.url + "/score", {"ids": [FIRST_ID + 2, FIRST_ID + 3]})
        assert status == 502 and re.search(rf"table 'cheap2' of '.*store.sqlite' holds several rows with id "
                                           rf"\[{FIRST_ID + 3}\]: an id should name one row", answer["error"]), answer
    finally:
        service.stop()
