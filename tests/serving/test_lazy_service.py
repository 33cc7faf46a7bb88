"""The example service (scripts/lazy_service.py), started on loopback as a user starts it, then sent
requests: predictions equal the model's own on the full events, costs equal prediction_cost, bad requests
get clear errors."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pytest

from lightgbm_cegb import prediction_cost
from lightgbm_cegb.datasets import HIGGS_COSTS, higgs

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "lazy_service.py"
START_TIMEOUT = 180  # seconds: training the model on a loaded machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(url: str, body=None, timeout: float = 60):
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("service")
    port = free_port()
    log = open(workdir / "log.txt", "w")
    process = subprocess.Popen([sys.executable, str(SCRIPT), "--port", str(port), "--workdir", str(workdir),
                                "--latency-ms", "5"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT
    try:
        while True:
            if process.poll() is not None:
                pytest.fail(f"the service exited with {process.returncode}:\n{(workdir / 'log.txt').read_text()}")
            try:
                if call(url + "/health", timeout=5)[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"timed out: the service did not answer /health within {START_TIMEOUT} s")
            time.sleep(0.2)
        yield url, workdir
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def test_scores_equal_the_model_on_full_rows(service):
    url, workdir = service
    X, _ = higgs("test")
    booster = lgb.Booster(model_file=workdir / "model.txt")
    ids = list(range(0, 500, 3))
    status, answer = call(url + "/score", {"ids": ids})
    assert status == 200, answer
    np.testing.assert_array_equal(answer["predictions"], booster.predict(X[ids]))
    np.testing.assert_allclose(answer["cost"], prediction_cost(booster, X[ids], HIGGS_COSTS).per_instance,
                               rtol=1e-12)
    assert answer["mean_cost"] < answer["eager_cost"] == 91.0
    assert 0 < answer["rounds"] and answer["latency_ms"] > 0
    fetched = sum(len(rows) for rows in answer["fetched"].values())
    assert fetched < len(ids) * 28


def test_concurrent_requests(service):
    url, workdir = service
    X, _ = higgs("test")
    booster = lgb.Booster(model_file=workdir / "model.txt")
    batches = [[i] for i in range(8)] + [list(range(100, 140))]
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda ids: call(url + "/score", {"ids": ids}), batches))
    for ids, (status, answer) in zip(batches, answers):
        assert status == 200
        np.testing.assert_array_equal(answer["predictions"], booster.predict(X[ids]))


@pytest.mark.parametrize(("body", "code", "message"), [
    ({"ids": [0, 10_000]}, 404, r"no event \[10000\] in table"),
    ({"ids": []}, 400, "with 1..10000 integer ids"),
    ({"ids": ["a"]}, 400, "integer ids of events 0..499"),
    ({"ids": [2**64]}, 400, "integer ids of events 0..499"),
    ({"rows": [1]}, 400, 'the body should be {"ids"'),
    (b"not json", 400, 'the body should be {"ids".*; got a body that is not JSON'),
    (b"\xff\xfe", 400, 'the body should be {"ids".*; got a body that is not JSON'),
    # deeper than the JSON parser's recursion limit: it raised RecursionError, answered 500 with a traceback
    (b"[" * 100_000 + b"]" * 100_000, 400, 'the body should be {"ids".*; got JSON nested too deeply to read'),
    (b'{"ids": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400, "nested too deeply"),
    ([1, 2], 400, 'the body should be {"ids"'),
])
def test_bad_requests(service, body, code, message):
    status, answer = call(service[0] + "/score", body)
    assert status == code and re.search(message, answer["error"]), answer
