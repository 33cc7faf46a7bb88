"""Shared fixtures. The suite runs against the patched LightGBM in .venv; ``test_stock.py`` re-runs the
``upstream_bug`` tests against the stock 4.7.0 wheel (LIGHTGBM_CEGB_STOCK=1, stock package first on
PYTHONPATH) and requires every one of them to fail there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import lightgbm
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import lgbm_source  # noqa: E402

ON_STOCK = os.environ.get("LIGHTGBM_CEGB_STOCK") == "1"


def pytest_configure(config):
    patched = "+cegb." in lightgbm.__version__
    if ON_STOCK and patched:
        pytest.exit(f"LIGHTGBM_CEGB_STOCK=1 but lightgbm {lightgbm.__version__} is the patched build", 2)
    if not ON_STOCK and not patched:
        pytest.exit(f"lightgbm {lightgbm.__version__} from {lightgbm.__file__} is not the patched build: "
                    "run the tests with 'make test'", 2)


def run_python(code: str, stock: bool = False, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (a segfault there fails the test instead of killing pytest).
    With stock=True the child imports the stock 4.7.0 wheel; otherwise it imports what this process does."""
    env = dict(os.environ)
    if stock:
        env["PYTHONPATH"] = str(lgbm_source.stock_package_dir())
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=timeout)
