"""The service (lightgbm_cegb/serving/app.py) as ``lightgbm-cegb serve`` starts it on loopback with a model and a
store (lightgbm_cegb/serving/stores.py's build_predictor): eager fetches, the request body's limit, a saved
estimator behind a Python fetch function, model files of XGBoost and CatBoost, sequential fetch calls, a saved
Selection. Predictions equal the model's own on the full rows, costs equal prediction_cost, and bad options are
refused naming the option."""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from contextlib import closing
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from serve_process import FIRST_ID, GROUP, NAMES, Service, call, raw_request, write_generated

from lightgbm_cegb import FeatureCosts, GreedyMiserClassifier, cli, prediction_cost
from lightgbm_cegb.selection import Selection


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return write_generated(tmp_path_factory.mktemp("generated"))


def test_eager_fetches_every_feature_and_predicts_the_full_rows(generated, tmp_path):
    """--eager, the baseline of the load test: every feature of every row fetched (one call per key), the model's
    own predict on the full rows, each row priced with every lazy cost and its paths' split costs."""
    folder, booster, X, costs = generated
    service = Service(["--model", str(folder / "model.txt"), "--costs", str(folder / "costs.json"), "--store",
                       str(folder / "store.sqlite"), "--eager"], folder, tmp_path / "log.txt")
    try:
        status, health = call(service.url + "/health")
        assert status == 200 and health["eager"] is True
        positions = np.arange(1, len(X), 3)
        status, answer = call(service.url + "/score", {"ids": (FIRST_ID + positions).tolist()})
        assert status == 200, answer
        np.testing.assert_array_equal(answer["predictions"], booster.predict(X[positions]))
        report = prediction_cost(booster, X[positions], FeatureCosts(lazy=np.zeros(len(NAMES)), split=0.5))
        np.testing.assert_allclose(answer["cost"], report.per_instance + 7.0 + 20.0, rtol=1e-12)
        assert answer["fetch_calls"] == len(health["fetch_keys"]) and answer["rounds"] == 1
        keys = health["fetch_keys"]
        columns = {m for key in keys for m in (GROUP if key == "scan" else [key])}
        assert set(answer["fetched"]) == columns and "scan" in keys
        assert all(ids == answer["ids"] for ids in answer["fetched"].values())
        status, answer = call(service.url + "/score", {"ids": [FIRST_ID, 5]})
        assert status == 404 and "no row with id [5]" in answer["error"], answer
    finally:
        service.stop()


def test_a_request_body_beyond_the_limit_is_413_unread(generated, tmp_path):
    """Issue 61 (13): the service read a body of any size (60 MB of padding around valid ids: HTTP 200, the server's
    memory 206 -> 325 MB). A body longer than --max-body-bytes answers 413: a Content-Length beyond it with no
    body sent is answered at once (nothing read), a chunked body once it passes the limit."""
    folder, booster, X, _ = generated
    service = Service(["--model", str(folder / "model.txt"), "--costs", str(folder / "costs.json"), "--store",
                       str(folder / "store.sqlite"), "--max-body-bytes", "1000"], folder, tmp_path / "log.txt")
    try:
        ids = [FIRST_ID, FIRST_ID + 1]
        status, answer = call(service.url + "/score", json.dumps({"ids": ids}).encode().ljust(1000))
        assert status == 200 and answer["predictions"] == booster.predict(X[:2]).tolist(), answer
        status, answer = call(service.url + "/score", json.dumps({"ids": ids}).encode().ljust(1001))
        assert status == 413 and answer["error"] == ("the body should be at most 1000 bytes (--max-body-bytes); "
                                                     "got 1001"), answer
        head = f"POST /score HTTP/1.1\r\nHost: 127.0.0.1:{service.port}\r\nContent-Type: application/json"
        status, answer = raw_request(service.url, head.encode() + b"\r\nContent-Length: 60000000")
        assert status == 413 and "got 60000000" in answer["error"], answer
        chunk = b" " * 600
        status, answer = raw_request(service.url, head.encode() + b"\r\nTransfer-Encoding: chunked",
                                     b"%x\r\n%s\r\n" % (len(chunk), chunk) * 2 + b"0\r\n\r\n")
        assert status == 413 and "got more" in answer["error"], answer
    finally:
        service.stop()


FETCH_MODULE = '''
import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
X = np.load(HERE / "X.npy")
NAMES = json.loads((HERE / "names.json").read_text())
GROUPS = {"scan": GROUP_MEMBERS}


def fetch(key, ids):
    with open(HERE / "calls.jsonl", "a") as log:
        log.write(json.dumps({"key": key, "ids": ids.tolist()}) + "\\n")
    rows = np.asarray(ids) - FIRST_ID
    if (rows < 0).any() or (rows >= len(X)).any():
        raise KeyError(f"unknown ids {ids[(rows < 0) | (rows >= len(X))].tolist()[:5]}")
    if key in GROUPS:
        return {member: X[rows, NAMES.index(member)] for member in GROUPS[key]}
    return X[rows, NAMES.index(key)]
'''.replace("GROUP_MEMBERS", repr(GROUP)).replace("FIRST_ID", str(FIRST_ID))


def test_a_saved_estimator_behind_a_fetch_function(generated, tmp_path):
    _, _, X, costs = generated
    X = np.nan_to_num(X)  # Greedy Miser takes no missing values
    frame = pd.DataFrame(X, columns=NAMES)
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 3]) > 0).astype(int)
    model = GreedyMiserClassifier(feature_costs=costs, tradeoff=0.01, n_estimators=20, max_depth=3,
                                  random_state=0).fit(frame, y)
    model.save(tmp_path / "model")
    np.save(tmp_path / "X.npy", X)
    (tmp_path / "names.json").write_text(json.dumps(NAMES))
    (tmp_path / "store.py").write_text(FETCH_MODULE)
    service = Service(["--model", str(tmp_path / "model"), "--fetch", f"{tmp_path / 'store.py'}:fetch",
                       "--method", "predict_proba"], tmp_path, tmp_path / "log.txt")
    try:
        ids = (FIRST_ID + np.arange(len(X))).tolist()
        status, answer = call(service.url + "/score", {"ids": ids})
        assert status == 200, answer
        np.testing.assert_array_equal(answer["predictions"], model.predict_proba(frame))
        np.testing.assert_allclose(answer["cost"], model.prediction_cost(frame).per_instance, rtol=1e-12)
        calls = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
        assert max(Counter((c["key"], i) for c in calls for i in c["ids"]).values()) == 1
        assert {c["key"] for c in calls} & {"scan"} and not {c["key"] for c in calls} & set(GROUP)
        status, answer = call(service.url + "/score", {"ids": [FIRST_ID + len(X)]})
        assert status == 404 and "unknown ids" in answer["error"], answer
    finally:
        service.stop()
    # --eager with the same function, which answers the group as a mapping member -> values
    service = Service(["--model", str(tmp_path / "model"), "--fetch", f"{tmp_path / 'store.py'}:fetch",
                       "--method", "predict_proba", "--eager"], tmp_path, tmp_path / "eager.txt")
    try:
        status, answer = call(service.url + "/score", {"ids": ids})
        assert status == 200, answer
        np.testing.assert_array_equal(answer["predictions"], model.predict_proba(frame))
    finally:
        service.stop()


# ---------------------------------------------------------------------------------------------- bad options


def bad_store(folder: Path) -> Path:
    """The generated store without the group's table."""
    path = folder / "no_scan.sqlite"
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("CREATE TABLE cheap (id INTEGER PRIMARY KEY, f0 REAL, f1 REAL, f2 REAL, f3 REAL)")
    return path


@pytest.mark.parametrize(("args", "message"), [
    (["--port", "70000"], "--port: expected a port number in 0..65535, got 70000"),
    (["--latency-ms", "-1"], r"--latency-ms: expected a number of milliseconds >= 0, got -1.0"),
    (["--max-body-bytes", "0"], r"--max-body-bytes: expected a number of bytes >= 1, got 0"),
    (["--store", "{store}"], "--store: needs --model"),
    (["--method", "predict_proba"], "--method: needs --model"),
    (["--model", "{model}"], "--model: needs a feature store: --store FILE.sqlite or --fetch MODULE:FUNCTION"),
    (["--model", "{missing}", "--store", "{store}"], r"--model: expected a model file or a folder saved by "
                                                     r"an estimator's save\(\), got '.*missing.txt', which does not"),
    (["--model", "{costs}", "--store", "{store}"], r"--model: model file '.*costs.json': a JSON file that is not a "
                                                   r"model of LightGBM \(text\), XGBoost"),
    (["--model", "{folder}", "--store", "{store}"], "--model: path: '.*' holds no saved model"),
    (["--model", "{model}", "--store", "{missing}"], "--store: expected a SQLite file, got '.*missing.txt'"),
    (["--model", "{model}", "--store", "{costs}"], "--store: '.*costs.json' is not a SQLite database"),
    (["--model", "{model}", "--costs", "{costs}", "--store", "{no_scan}"],
     r"--store: group 'scan' \(members \['f4', 'f3', 'f5'\]\): expected one table with the columns id, f4, f3, f5; "
     r"none of .* hold them \(tables: \['cheap'\]\)"),
    (["--model", "{model}", "--store", "{store}", "--costs", "{bad_costs}"],
     r"--costs: '.*bad.json' should hold a JSON object of FeatureCosts' arguments \[.*\], got the keys \['lazzy'\]"),
    (["--model", "{model}", "--store", "{store}", "--costs", "{short_costs}"],
     "--costs: .*short.txt has 2 costs .* the data has 6 columns"),
    (["--model", "{model}", "--store", "{store}", "--costs", "{unknown_group}"],
     r"--costs: .*groups name unknown features \['x9'\]"),
    (["--model", "{model}", "--fetch", "no_colon"], "--fetch: expected MODULE:FUNCTION or path/to/file.py:FUNCTION, "
                                                    "got 'no_colon'"),
    (["--model", "{model}", "--fetch", "no_such_module_here:fetch"], "--fetch: cannot import no_such_module_here"),
    (["--model", "{model}", "--fetch", "json:no_such_function"], "--fetch: json has no function 'no_such_function'"),
    (["--model", "{model}", "--fetch", "json:loads", "--query-log", "q.jsonl"],
     "--query-log: applies to a SQLite --store, not to a --fetch function"),
    (["--model", "{model}", "--store", "{store}", "--workdir", "w"], "--workdir: holds the bundled example's files"),
    (["--model", "{model}", "--store", "{store}", "--method", "transform"],
     "--method: Booster has no method 'transform'"),
    (["--model", "{model}", "--store", "{store}", "--fetch", "json:loads"], "argument --fetch: not allowed with "
                                                                            "argument --store"),
])
def test_bad_options_name_the_option(generated, tmp_path, capsys, monkeypatch, args, message):
    folder, *_ = generated

    def serve(*args, **kwargs):
        raise AssertionError("the service started")

    monkeypatch.setattr("uvicorn.run", serve)
    (tmp_path / "bad.json").write_text(json.dumps({"lazzy": [1.0]}))
    (tmp_path / "short.txt").write_text("1\n2\n")
    (tmp_path / "unknown.json").write_text(json.dumps({"lazy": [1.0] * 6, "groups": {"g": ["x9"]}}))
    paths = {"model": folder / "model.txt", "store": folder / "store.sqlite", "costs": folder / "costs.json",
             "missing": tmp_path / "missing.txt", "folder": tmp_path, "no_scan": bad_store(tmp_path),
             "bad_costs": tmp_path / "bad.json", "short_costs": tmp_path / "short.txt",
             "unknown_group": tmp_path / "unknown.json"}
    with pytest.raises(SystemExit) as info:
        cli.main(["serve", *(arg.format(**paths) for arg in args)])
    assert info.value.code == 2
    error = capsys.readouterr().err
    assert re.search("error: " + message, error), error


def _library_model_file(library: str, X: np.ndarray, tmp_path, rounds: int, depth: int):
    """A binary classifier of XGBoost (its JSON file) or CatBoost (its binary file) on the generated rows: (model,
    path, its positive class's probability on X)."""
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 4]) > 0).astype(int)
    frame = pd.DataFrame(X, columns=NAMES)
    if library == "xgboost":
        import xgboost as xgb

        model = xgb.train({"max_depth": depth, "objective": "binary:logistic", "nthread": 1}, xgb.DMatrix(frame, y),
                          rounds)
        path = tmp_path / "model.json"
        model.save_model(path)
        return model, path, model.predict(xgb.DMatrix(frame))
    import catboost as cb

    model = cb.CatBoost({"iterations": rounds, "depth": depth, "loss_function": "Logloss", "verbose": 0,
                         "thread_count": 1, "allow_writing_files": False}).fit(frame, y)
    path = tmp_path / "model.cbm"
    model.save_model(str(path))
    return model, path, model.predict(frame, prediction_type="Probability")[:, 1]


@pytest.mark.parametrize("library", ["xgboost", "catboost"])
def test_a_model_file_of_another_library(generated, library, tmp_path):
    """Issue 45: the service reads an XGBoost JSON model or a CatBoost binary model as it reads LightGBM's."""
    folder, _, X, costs = generated
    model, path, p = _library_model_file(library, X, tmp_path, 10, 4)
    expected = p if library == "xgboost" else model.predict(pd.DataFrame(X, columns=NAMES))
    service = Service(["--model", str(path), "--costs", str(folder / "costs.json"), "--store",
                       str(folder / "store.sqlite")], folder, tmp_path / "log.txt")
    try:
        positions = np.arange(1, len(X), 3)
        status, answer = call(service.url + "/score", {"ids": (FIRST_ID + positions).tolist()})
        assert status == 200, answer
        np.testing.assert_allclose(answer["predictions"], expected[positions], rtol=1e-12)
        np.testing.assert_allclose(answer["cost"], prediction_cost(model, X[positions], costs).per_instance,
                                   rtol=1e-12)
    finally:
        service.stop()


@pytest.mark.parametrize("library", ["xgboost", "catboost"])
def test_predict_proba_of_another_librarys_model_file(generated, library, tmp_path):
    """Issue 61 (17): `serve --method predict_proba` was refused for an XGBoost model file (its Booster has no
    predict_proba): a classifier's file is served as the library's classifier, its probabilities by column."""
    folder, _, X, _ = generated
    _, path, p = _library_model_file(library, X, tmp_path, 5, 3)
    service = Service(["--model", str(path), "--costs", str(folder / "costs.json"), "--store",
                       str(folder / "store.sqlite"), "--method", "predict_proba"], folder, tmp_path / "log.txt")
    try:
        positions = np.arange(0, len(X), 7)
        status, answer = call(service.url + "/score", {"ids": (FIRST_ID + positions).tolist()})
        assert status == 200, answer
        np.testing.assert_allclose(answer["predictions"], np.column_stack([1 - p, p])[positions], rtol=1e-6)
    finally:
        service.stop()


def test_sequential_fetch_calls_answer_as_concurrent_ones(generated, tmp_path):
    """--fetch-calls sequential: a request's calls one after the other (acquire on a thread), the same answers."""
    folder, booster, X, costs = generated
    service = Service(["--model", str(folder / "model.txt"), "--costs", str(folder / "costs.json"), "--store",
                       str(folder / "store.sqlite"), "--fetch-calls", "sequential"], folder, tmp_path / "log.txt")
    try:
        assert call(service.url + "/health")[1]["fetch"] == "sequential"
        positions = np.arange(2, len(X), 4)
        status, answer = call(service.url + "/score", {"ids": (FIRST_ID + positions).tolist()})
        assert status == 200, answer
        np.testing.assert_array_equal(answer["predictions"], booster.predict(X[positions]))
        np.testing.assert_allclose(answer["cost"], prediction_cost(booster, X[positions], costs).per_instance,
                                   rtol=1e-12)
        status, answer = call(service.url + "/score", {"ids": [5]})
        assert status == 404 and "no row with id [5]" in answer["error"], answer
    finally:
        service.stop()


def test_a_saved_selection_serves_with_its_costs(generated, tmp_path):
    """A saved Selection is served with the costs its point was measured with, given no --costs: its Booster, plain
    LightGBM's, holds none (the group comes from the Selection's costs alone)."""
    folder, _, X, costs = generated
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 4]) > 0).astype(float)
    booster = lgb.train({"objective": "binary", "num_leaves": 7, "verbose": -1, "seed": 0, "num_threads": 1},
                        lgb.Dataset(X, y, feature_name=NAMES), 15)
    assert booster.feature_importance()[[NAMES.index(m) for m in GROUP]].sum() > 0, "the model should read the group"
    aligned = costs.align(NAMES)
    Selection("cegb", {"relative_tradeoff": 0.1}, booster, None, 0.9, 12.0, costs=aligned).save(tmp_path / "choice")
    service = Service(["--model", str(tmp_path / "choice"), "--store", str(folder / "store.sqlite")], folder,
                      tmp_path / "log.txt")
    try:
        status, health = call(service.url + "/health")
        assert status == 200 and health["groups"] == {"scan": GROUP} and "Selection" in health["model"]
        positions = np.arange(0, len(X), 5)
        status, answer = call(service.url + "/score", {"ids": (FIRST_ID + positions).tolist()})
        assert status == 200, answer
        np.testing.assert_array_equal(answer["predictions"], booster.predict(X[positions]))
        np.testing.assert_allclose(answer["cost"], prediction_cost(booster, X[positions], aligned).per_instance,
                                   rtol=1e-12)
    finally:
        service.stop()
