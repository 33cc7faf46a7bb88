"""Shared fixtures. The suite runs against the patched LightGBM in .venv; ``test_stock.py`` re-runs the
``upstream_bug`` tests against the stock 4.7.0 wheel (LIGHTGBM_CEGB_STOCK=1, stock package first on
PYTHONPATH) and requires every one of them to fail there."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

if os.environ.get("PYTEST_XDIST_WORKER"):  # make test: one worker per CPU, each with OpenMP's threads (every CPU)
    # a thread waiting at an OpenMP barrier sleeps instead of spinning on a CPU that another worker needs; read by
    # the OpenMP runtime when it loads (with LightGBM below), and by the child processes the tests start
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import lightgbm  # noqa: E402 (after the OpenMP setting above)
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from scripts.build import lgbm_source  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

ON_STOCK = os.environ.get("LIGHTGBM_CEGB_STOCK") == "1"
#: the patched command-line program: the venv's, or LIGHTGBM_CEGB_CLI's (the sanitized build of make asan)
CLI = Path(os.environ.get("LIGHTGBM_CEGB_CLI") or Path(sys.executable).parent / "lightgbm")


def pytest_configure(config):
    patched = "+cegb." in lightgbm.__version__
    if ON_STOCK and patched:
        pytest.exit(f"LIGHTGBM_CEGB_STOCK=1 but lightgbm {lightgbm.__version__} is the patched build", 2)
    if not ON_STOCK and not patched:
        pytest.exit(f"lightgbm {lightgbm.__version__} from {lightgbm.__file__} is not the patched build: "
                    "run the tests with 'make test'", 2)


def pytest_collection_modifyitems(config, items):
    """Each worker of ``make test`` (``--dist worksteal``: worker i takes the i-th contiguous share of the tests, and
    an idle one steals from the end of another's queue) starts with its share of the ``long`` tests, dealt out in
    turn, so that no worker runs the long tests one after another while the others steal its short ones."""
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    if workers < 2:
        return
    long, short = [], []
    for item in items:
        (long if item.get_closest_marker("long") else short).append(item)
    size = len(items) // workers  # the scheduler's share per worker, as it splits the pending tests
    shares = [long[i::workers] for i in range(workers)]
    ordered = []
    for share in shares:
        take = max(size - len(share), 0)
        ordered += share + short[:take]
        short = short[take:]
    items[:] = ordered + short


#: Code for a child process (``run_python``, after ``import lightgbm as lgb``): ``refuse(booster, params)`` prints
#: "REFUSED <the error's first line>" or "ACCEPTED"; ``in_step(refused, reference, updates)`` updates both boosters
#: and asserts that they stay identical. The tests of a refused reset_parameter (patches 0007 and 0009).
RESET_TOOLS = textwrap.dedent("""
    def refuse(booster, params):
        try:
            booster.reset_parameter(params)
        except lgb.basic.LightGBMError as exc:
            print("REFUSED", str(exc).splitlines()[0])
        else:
            print("ACCEPTED")

    def in_step(refused, reference, updates):
        for _ in range(updates):
            finished = refused.update(), reference.update()
            assert finished[0] == finished[1], finished
        assert refused.model_to_string() == reference.model_to_string()
""")


def run_python(code: str, stock: bool = False, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter, so that a crash or a hang there (stock LightGBM's memory errors
    can do either) fails the test instead of taking pytest down: a child still running after ``timeout``
    seconds is killed and reported with returncode None. With stock=True the child imports the stock 4.7.0
    wheel; otherwise it imports what this process does."""
    env = dict(os.environ)
    if stock:
        env["PYTHONPATH"] = str(lgbm_source.stock_package_dir())
    try:
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, errors="replace",
                              timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(exc.cmd, None, exc.stdout or "", f"timed out after {timeout} s")


def with_tree_sizes(text: str) -> str:
    """tree_sizes recomputed from where the Tree= lines are (when there are some)."""
    if "tree_sizes=" not in text or "\nTree=0\n" not in text or "end of trees" not in text:
        return text
    first, end = text.index("\nTree=0\n") + 1, text.index("end of trees")
    starts = [i + 1 for i in range(first - 1, end) if text.startswith("\nTree=", i)] + [end]
    sizes = " ".join(str(len(text[a:b].encode())) for a, b in zip(starts, starts[1:]))
    header = text[:first]
    line = header.index("tree_sizes=")
    return header[:line] + f"tree_sizes={sizes}" + header[header.index("\n", line):] + text[first:]


def splits(booster: lightgbm.Booster, tree: int = 0) -> list[dict]:
    """Split nodes of one tree in depth-first order, with the features tested above each."""
    out = []
    stack = [(booster.dump_model()["tree_info"][tree]["tree_structure"], ())]
    while stack:
        node, above = stack.pop()
        if "split_index" in node:
            out.append({"feature": node["split_feature"], "threshold": node["threshold"],
                        "gain": node["split_gain"], "count": node["internal_count"], "above": above})
            below = (*above, node["split_feature"])
            stack += [(node["right_child"], below), (node["left_child"], below)]
    return out


def structure(booster: lightgbm.Booster, tree: int = 0) -> list[tuple]:
    return [(s["feature"], s["threshold"], s["count"], s["above"]) for s in splits(booster, tree)]


@pytest.fixture(autouse=True)
def _no_time_limit_under_load(monkeypatch):
    """fit_within_budget's time limit per method (``method_fits``) never binds in a test of this process: its floor
    raised from 30 s to an hour, so that a loaded machine (10x slower) does not change what a test's sweep fits.
    tests/selection/test_allowance.py tests the limit on a clock of its own."""
    from lightgbm_cegb.selection import runner
    monkeypatch.setattr(runner, "ALLOWANCE_FLOOR", 3600.0)


@pytest.fixture(scope="module")
def client():
    """A ``distributed`` client of a LocalCluster of two worker processes of one thread each (the module's tests)."""
    import distributed
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50) as cluster, distributed.Client(cluster) as dask_client:
        yield dask_client


@pytest.fixture(scope="module")
def strong_weak():
    """The issue's reproduction: y depends strongly on x1 where x0 < 0 and weakly where x0 >= 0."""
    rng = np.random.default_rng(0)
    n = 4000
    X = rng.uniform(-1, 1, size=(n, 2))
    y = (np.where(X[:, 0] < 0, 4.0, 0.3) * (X[:, 1] > 0) + 3.0 * (X[:, 0] < 0)
         + rng.normal(0, 0.1, n))
    return X, y
