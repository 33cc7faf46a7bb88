"""The dependency floors of pyproject.toml are true: a virtual environment with exactly the declared minimum
versions (numpy, scipy, scikit-learn, pandas, joblib, tqdm at their floors; the patched LightGBM wheel) and
lightgbm_cegb built and installed into it runs a smoke script from a folder outside the clone.

The environment is cached outside the clone (``$LIGHTGBM_CEGB_CACHE/floors-<key>``), keyed by the floors,
the package's sources and the patched wheel, as the LightGBM build is: a second run on one machine only
runs the script.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys

import pytest
import tomllib
from conftest import ROOT, lgbm_source

SMOKE = r'''
import importlib.metadata as md
import sys

import numpy as np

import lightgbm_cegb as lc
from lightgbm_cegb.datasets import HIGGS_COSTS, higgs, letter
from lightgbm_cegb.selection import select, sweep

def release(version):
    parts = [int(part) for part in version.split(".")]
    while parts and parts[-1] == 0:
        parts.pop()
    return parts


floors = dict(arg.split("==") for arg in sys.argv[1:])
for name, version in floors.items():
    assert release(md.version(name)) == release(version), (name, md.version(name), version)
assert lc.PATCHED_LIGHTGBM and lc.__file__.find("site-packages") > 0, lc.__file__
X, y = higgs("train")
X, y = X[:2000], y[:2000]
model = lc.CEGBClassifier(feature_costs=HIGGS_COSTS, cegb_tradeoff=0.01, n_estimators=20, verbose=-1).fit(X, y)
report = model.prediction_cost(X)
assert report.per_instance.shape == (2000,) and report.mean > 0
miser = lc.GreedyMiserClassifier(feature_costs=HIGGS_COSTS, tradeoff=1.0, n_estimators=10).fit(X, y)
forest = lc.BudgetRFClassifier(feature_costs=HIGGS_COSTS, n_estimators=3, random_state=0).fit(X[:500], y[:500])
cstc = lc.CSTCClassifier(feature_costs=HIGGS_COSTS, tradeoff=0.01, n_iter=1, phi=5).fit(X[:500], y[:500])
for fitted in (model, miser, forest, cstc):
    fitted.save("saved")
    again = type(fitted).load("saved")
    assert np.array_equal(again.predict(X[:100]), fitted.predict(X[:100]))
frame = sweep(["lightgbm", "cegb"], (X[:1500], y[:1500]), (X[1500:], y[1500:]), HIGGS_COSTS, task="binary",
              grid={"cegb": [{"relative_tradeoff": r} for r in (0.3, 0.9)]}, num_boost_round=20)
best = select(frame, budget=frame["cost"].max())
assert best.valid_cost <= frame["cost"].max() and best.model.predict(X[:5]).shape[0] == 5
import catboost
import xgboost

small_X, small_y = X[:500], y[:500]
boosted = xgboost.XGBClassifier(n_estimators=5, max_depth=6, n_jobs=1).fit(small_X, small_y)
forest = lc.to_forest(boosted)
margin = boosted.predict(small_X, output_margin=True)
assert np.allclose(forest.raw_score(small_X, forest.apply(small_X))[:, 0], margin, rtol=1e-5, atol=1e-6)
symmetric = catboost.CatBoostClassifier(iterations=5, depth=6, verbose=0, thread_count=1,
                                        allow_writing_files=False).fit(small_X, small_y)
forest = lc.to_forest(symmetric)
raw = symmetric.predict(small_X, prediction_type="RawFormulaVal")
assert np.allclose(forest.raw_score(small_X, forest.apply(small_X))[:, 0], raw, rtol=1e-12)
L, letters = letter()
assert L.shape == (20000, 16) and letters.shape == (20000,)
print("smoke ok")
'''


#: the extras whose floors are checked too (the model readers), and the distribution installed for each requirement
#: (XGBoost's floor as xgboost-cpu: the same Python package without the CUDA libraries)
EXTRAS = ("xgboost", "catboost")
INSTALLED_AS = {"xgboost": "xgboost-cpu"}


def floors() -> dict[str, str]:
    """{distribution installed: its declared minimum} for every runtime dependency with a floor and every
    requirement of EXTRAS."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    out = {}
    requirements = project["dependencies"] + [r for extra in EXTRAS for r in project["optional-dependencies"][extra]]
    for requirement in requirements:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9][0-9A-Za-z.]*)", requirement.replace(" ", ""))
        if match:
            out[INSTALLED_AS.get(match.group(1), match.group(1))] = match.group(2)
    return out


@pytest.mark.long
def test_the_package_runs_on_its_declared_minimum_versions(tmp_path):
    pins = floors()
    assert {"numpy", "scipy", "scikit-learn", "pandas", "xgboost-cpu", "catboost"} <= set(pins), pins
    build = lgbm_source.build(2)  # the cached patched LightGBM (wheel and CLI)
    wheel = next(build.glob("lightgbm-*.whl"))
    sources = sorted(p for p in (ROOT / "lightgbm_cegb").rglob("*") if p.is_file() and p.suffix in (".py", ""))
    sources += sorted((ROOT / "cython_ext").iterdir()) + [ROOT / "pyproject.toml", ROOT / "setup.py"]
    digest = hashlib.sha256(repr(sorted(pins.items())).encode() + wheel.name.encode())
    for path in sources:
        digest.update(path.read_bytes())
    venv = lgbm_source.cache_dir() / f"floors-{digest.hexdigest()[:16]}"
    python = venv / "bin" / "python"

    def run(*cmd, timeout=1800, **kwargs):
        try:
            proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kwargs)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"timed out after {timeout} s: {' '.join(map(str, cmd))}") from None
        assert proc.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        return proc

    if not (venv / "DONE").exists():
        shutil.rmtree(venv, ignore_errors=True)
        run(sys.executable, "-m", "venv", venv)
        pip = [python, "-m", "pip", "--disable-pip-version-check", "-q", "install"]
        run(*pip, *(f"{name}=={version}" for name, version in pins.items()), wheel,
            "Cython>=3.0.10", "setuptools>=77")
        # built against the floor of numpy, without build isolation: what a user on the floors compiles
        source = tmp_path / "source"  # a copy without the clone's build products (compiled against .venv's numpy)
        shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".venv", ".git", "build", "*.so", "*.c",
                                                                     "__pycache__", "*.egg-info", "tests", "docs"))
        run(*pip, "--no-build-isolation", "--no-deps", source, cwd=tmp_path)
        (venv / "DONE").write_text("ok")
    proc = run(python, "-c", SMOKE, *(f"{name}=={version}" for name, version in pins.items()), cwd=tmp_path,
               timeout=900)
    assert "smoke ok" in proc.stdout
