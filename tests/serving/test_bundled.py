"""The bundled example (lightgbm_cegb/serving/bundled.py), served as ``make serve`` serves it: ``lightgbm-cegb
serve`` with no arguments, started on loopback. Its predictions equal the model's on the full rows, its costs
prediction_cost, bad requests get clear errors (lightgbm_cegb/serving/app.py), and it leaves no file behind."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pytest
from serve_process import Service, call

from lightgbm_cegb import LazyPredictor, prediction_cost
from lightgbm_cegb.datasets import HIGGS_COSTS, HIGGS_FEATURES, higgs


def start_bundled(cwd: Path, log: Path) -> Service:
    """``make serve``: no arguments but the port, started in ``cwd``."""
    service = Service([], cwd, log)
    match = re.search(r"working files in (\S+) \(removed on exit\)", log.read_text())
    if not match:
        service.stop()
        pytest.fail(f"the service did not say where its files are:\n{log.read_text()}")
    service.workdir = Path(match[1])
    return service


@pytest.fixture(scope="module")
def bundled(tmp_path_factory):
    service = start_bundled(tmp_path_factory.mktemp("cwd"), tmp_path_factory.mktemp("log") / "log.txt")
    yield service
    service.stop()


def test_bundled_scores_equal_the_model_on_full_rows(bundled):
    X, _ = higgs("test")
    booster = lgb.Booster(model_file=bundled.workdir / "model.txt")
    ids = list(range(0, 500, 3))
    status, answer = call(bundled.url + "/score", {"ids": ids})
    assert status == 200, answer
    np.testing.assert_array_equal(answer["predictions"], booster.predict(X[ids]))
    np.testing.assert_allclose(answer["cost"], prediction_cost(booster, X[ids], HIGGS_COSTS).per_instance,
                               rtol=1e-12)
    assert answer["mean_cost"] < answer["eager_cost"] == 91.0
    assert 0 < answer["rounds"] and answer["latency_ms"] > 0
    fetched = sum(len(rows) for rows in answer["fetched"].values())
    assert fetched < len(ids) * 28
    # issue 47: the ids asked for, not the rows' positions in the request (0, 1, 2, ...)
    local = LazyPredictor(booster, lambda name, rows: X[rows, HIGGS_FEATURES.index(name)], feature_costs=HIGGS_COSTS)
    result = local.acquire(np.full((len(ids), 28), np.nan), ids=np.asarray(ids))
    assert answer["fetched"] == {name: np.asarray(ids)[result.fetched[:, f]].tolist()
                                 for f, name in enumerate(HIGGS_FEATURES) if result.fetched[:, f].any()}


def test_bundled_concurrent_requests(bundled):
    X, _ = higgs("test")
    booster = lgb.Booster(model_file=bundled.workdir / "model.txt")
    batches = [[i] for i in range(8)] + [list(range(100, 140))]
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda ids: call(bundled.url + "/score", {"ids": ids}), batches))
    for ids, (status, answer) in zip(batches, answers):
        assert status == 200
        np.testing.assert_array_equal(answer["predictions"], booster.predict(X[ids]))


@pytest.mark.parametrize(("body", "code", "message"), [
    ({"ids": [0, 10_000]}, 404, r"no row with id \[10000\] in table"),
    ({"ids": []}, 400, "with 1..10000 integer ids"),
    ({"ids": ["a"]}, 400, "integer ids >= 0"),
    ({"ids": [-1]}, 400, "integer ids >= 0"),
    ({"ids": [2**64]}, 400, "integer ids >= 0"),
    ({"rows": [1]}, 400, 'the body should be {"ids"'),
    (b"not json", 400, 'the body should be {"ids".*; got a body that is not JSON'),
    (b"\xff\xfe", 400, 'the body should be {"ids".*; got a body that is not JSON'),
    # deeper than the JSON parser's recursion limit: it raised RecursionError, answered 500 with a traceback
    (b"[" * 100_000 + b"]" * 100_000, 400, 'the body should be {"ids".*; got JSON nested too deeply to read'),
    (b'{"ids": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400, "nested too deeply"),
    ([1, 2], 400, 'the body should be {"ids"'),
])
def test_bundled_bad_requests(bundled, body, code, message):
    status, answer = call(bundled.url + "/score", body)
    assert status == code and re.search(message, answer["error"]), answer


def test_bundled_leaves_no_file_behind(tmp_path):
    """Its store and model live in a temporary folder, removed when the service stops (SIGTERM): nothing in
    the folder it ran in (the checkout, for make serve)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    service = start_bundled(cwd, tmp_path / "log.txt")
    try:
        assert (service.workdir / "store.sqlite").is_file() and (service.workdir / "model.txt").is_file()
        assert not service.workdir.is_relative_to(cwd)
    finally:
        assert service.stop() == 0
    assert not service.workdir.exists()
    assert list(cwd.iterdir()) == []
