"""What the tests of the service share (tests/serving/test_app.py, test_sqlite_store.py, test_bundled.py):
``lightgbm-cegb serve`` started in a subprocess on loopback (``Service``), requests to it (``call``,
``raw_request``), and a small model with a feature group behind a SQLite store (``write_generated``)."""

from __future__ import annotations

import json
import re
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import closing
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pytest

from lightgbm_cegb import FeatureCosts

COMMAND = [sys.executable, "-m", "lightgbm_cegb.cli", "serve"]
START_TIMEOUT = 180  # seconds: imports and training on a loaded machine
FIRST_ID = 1000  # the generated rows' ids: not their positions


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


class Service:
    """``lightgbm-cegb serve`` running in a subprocess (in ``cwd``) on a free port of 127.0.0.1."""

    def __init__(self, args: list[str], cwd: Path, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log
        self.log = open(log, "w")
        self.process = subprocess.Popen([*COMMAND, "--port", str(self.port), *args], cwd=cwd, stdout=self.log,
                                        stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.process.poll() is not None:
                self.stop()
                pytest.fail(f"the service exited with {self.process.returncode}:\n{log.read_text()}")
            try:
                if call(self.url + "/health", timeout=5)[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"timed out: the service did not answer /health within {START_TIMEOUT} s")
            time.sleep(0.2)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        return self.process.returncode


NAMES = ["f0", "f1", "f2", "f3", "f4", "f5"]
GROUP = ["f4", "f3", "f5"]  # the group "scan", its members not in column order


def write_generated(folder: Path) -> tuple[Path, lgb.Booster, np.ndarray, FeatureCosts]:
    """A small model trained with a group, its costs as JSON and a SQLite store in ``folder``: a table of two cheap
    features, a table per feature, the group's table. Returns (folder, the booster, its rows X, the costs)."""
    rng = np.random.default_rng(7)
    n = 300
    X = rng.normal(size=(n, len(NAMES)))
    X[rng.random(X.shape) < 0.05] = np.nan
    z = np.nan_to_num(X)
    y = (z[:, 0] + z[:, 3] * (z[:, 2] > 0) + 0.5 * z[:, 4] + rng.normal(0, 0.3, n) > 0).astype(float)
    costs = FeatureCosts(lazy={"f0": 1, "f1": 1, "f2": 2, "f3": 1, "f4": 1, "f5": 1}, split=0.5,
                         groups={"scan": GROUP}, group_lazy={"scan": 20.0})
    params = {"objective": "binary", "num_leaves": 7, "verbose": -1, "seed": 0, "num_threads": 1,
              **costs.align(NAMES).to_params(tradeoff=0.001)}
    booster = lgb.train(params, lgb.Dataset(X, y, feature_name=NAMES), 15)
    assert booster.feature_importance()[[3, 4, 5]].sum() > 0, "the model should read the group"
    booster.save_model(folder / "model.txt")
    (folder / "costs.json").write_text(json.dumps(costs.fields()))
    with closing(sqlite3.connect(folder / "store.sqlite")) as db, db:
        for table, columns in {"cheap": ["f0", "f1"], "f2": ["f2"], "scan": ["f3", "f4", "f5"]}.items():
            db.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, {', '.join(f'{c} REAL' for c in columns)})")
            values = X[:, [NAMES.index(c) for c in columns]]
            rows = [(FIRST_ID + i, *(None if np.isnan(v) else float(v) for v in values[i])) for i in range(n)]
            db.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * (len(columns) + 1))})", rows)
    return folder, booster, X, costs


def raw_request(url: str, head: bytes, body: bytes = b"") -> tuple[int, dict]:
    """Send ``head`` (the request line and headers, without the blank line) and ``body`` on a socket as they are,
    then read the answer: a request urllib would not send (a Content-Length with no body to follow)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head + b"\r\n\r\n" + body)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < int(
                re.search(rb"content-length: (\d+)", answer.lower())[1]):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    status = int(answer.split(b" ", 2)[1])
    return status, json.loads(answer.partition(b"\r\n\r\n")[2])
