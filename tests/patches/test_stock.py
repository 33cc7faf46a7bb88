"""Every test marked ``upstream_bug`` must fail on the stock LightGBM 4.7.0 wheel: that is what shows it
reproduces a real upstream bug rather than passing vacuously. This re-runs them under the stock wheel
(pinned sha256, unpacked by scripts/build/lgbm_source.py) and reads the outcome of each from a JUnit report."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from conftest import ON_STOCK, ROOT, lgbm_source


def pytest_args(*extra: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-m", "upstream_bug", "-p", "no:cacheprovider", "-q",
            str(ROOT / "tests"), *extra]


@pytest.mark.long
@pytest.mark.skipif(ON_STOCK, reason="this test starts the stock run itself")
def test_upstream_bug_tests_fail_on_stock_lightgbm(tmp_path):
    collected = subprocess.run(pytest_args("--collect-only"), capture_output=True, text=True, cwd=ROOT)
    expected = {line.strip() for line in collected.stdout.splitlines() if "::" in line}
    assert len(expected) >= 10, collected.stdout + collected.stderr

    report = tmp_path / "stock.xml"
    env = dict(os.environ, PYTHONPATH=str(lgbm_source.stock_package_dir()), LIGHTGBM_CEGB_STOCK="1")
    proc = subprocess.run(pytest_args(f"--junitxml={report}"), env=env, capture_output=True, text=True,
                          cwd=ROOT, timeout=1800)
    assert report.is_file(), ("the stock run died before writing its report (a test that can crash stock "
                              "LightGBM must train in a child process, see conftest.run_python):\n"
                              + proc.stdout[-2000:] + proc.stderr[-2000:])
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        module = case.get("classname").replace(".", "/") + ".py"
        name = f"{module}::{case.get('name')}"
        kinds = {child.tag for child in case} & {"failure", "error", "skipped"}
        outcomes[name] = kinds.pop() if kinds else "passed"
    assert {n.split("::", 1)[1] for n in outcomes} == {n.split("::", 1)[1] for n in expected}
    not_failing = {name: kind for name, kind in outcomes.items() if kind not in ("failure", "error")}
    assert not not_failing, f"these upstream_bug tests do not fail on stock LightGBM 4.7.0: {not_failing}"
