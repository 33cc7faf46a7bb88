"""The distribution files of ``make wheels`` (scripts/build/wheels.py) install and run: a fresh virtual environment in a
temporary folder outside the clone gets ``pip install --find-links DIST "lightgbm-cegb[plot]"`` and nothing
else, and a smoke script run from another folder outside the clone trains with CEGB, accounts, sweeps and
selects, predicts lazily, and runs both command-line programs (``lightgbm-cegb`` and the patched ``lightgbm``
the LightGBM wheel ships).

The built files are cached outside the clone (``$LIGHTGBM_CEGB_CACHE/wheels-<key>``), keyed by the package's
sources and the patched LightGBM build, as the LightGBM build is; the environment is made and installed into on
every run. The package pins ``lightgbm==4.7.0+cegb.N`` exactly, N the version of patches/series: without the
patched wheel pip fails at resolution, which the test checks too.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pytest
import tomllib
from conftest import ROOT, lgbm_source

from scripts.build import wheels

SMOKE = r'''
import importlib.metadata as md
import json
import subprocess
import sys
from pathlib import Path

import lightgbm as lgb
import numpy as np

import lightgbm_cegb as lc
from lightgbm_cegb.datasets import HIGGS_COSTS, higgs
from lightgbm_cegb.selection import select, sweep

suffix, checkout = sys.argv[1], sys.argv[2]
assert lgb.__version__.endswith(suffix) and lc.PATCHED_LIGHTGBM, lgb.__version__
for module in (lgb, lc):
    assert "site-packages" in module.__file__ and checkout not in module.__file__, module.__file__
assert f"lightgbm==4.7.0{suffix}" in md.requires("lightgbm-cegb"), md.requires("lightgbm-cegb")
import matplotlib  # noqa: F401  (the extra [plot])

X, y = higgs("train")
X, y = X[:3000], y[:3000]
Xt, yt = higgs("test")
lazy = HIGGS_COSTS.lazy.tolist()
params = {"objective": "binary", "cegb_tradeoff": 0.01, "cegb_penalty_feature_lazy": lazy, "verbose": -1,
          "num_threads": 2}
booster = lgb.train(params, lgb.Dataset(X, y), num_boost_round=30)
report = lc.prediction_cost(booster, Xt)  # the costs the booster was trained with
assert report.per_instance.shape == (len(Xt),) and 0 < report.mean <= sum(lazy), report.mean
again = lc.prediction_cost(booster, Xt, HIGGS_COSTS)
assert np.array_equal(again.per_instance, report.per_instance)

frame = sweep(["lightgbm", "cegb"], (X[:2000], y[:2000]), (X[2000:], y[2000:]), HIGGS_COSTS, task="binary",
              grid={"cegb": [{"relative_tradeoff": r} for r in (0.3, 0.9)]}, num_boost_round=20)
budget = float(frame["cost"].median())
best = select(frame, budget=budget)
assert best.valid_cost <= budget and best.model.predict(Xt[:5]).shape[0] == 5

asked = []
def fetch(key, ids):
    asked.append(len(ids))
    return Xt[ids, key]
predictor = lc.LazyPredictor(booster, fetch, feature_keys="index")
result = predictor.acquire(np.full_like(Xt, np.nan))
assert np.array_equal(result.prediction, booster.predict(Xt)), "lazy prediction differs"
assert np.allclose(result.per_instance, report.per_instance) and 0 < sum(asked) < Xt.size

def cli(*args):
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{args} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return proc.stdout

assert "cost" in cli("lightgbm-cegb", "--help")
booster.save_model("model.txt")
np.savetxt("test.csv", np.column_stack([yt, Xt]), delimiter=",")
np.savetxt("train.csv", np.column_stack([y, X]), delimiter=",")
Path("costs.txt").write_text("\n".join(map(str, lazy)) + "\n")
out = json.loads(cli("lightgbm-cegb", "cost", "model.txt", "test.csv", "--costs", "costs.txt", "--format", "json"))
assert out["rows"] == len(Xt) and abs(out["mean"] - report.mean) < 1e-9, (out["mean"], report.mean)

# the patched lightgbm program of the LightGBM wheel: through lightgbm-cegb train, then on its own
Path("train.conf").write_text("task=train\nobjective=binary\ndata=train.csv\nnum_iterations=20\n"
                              "output_model=cli_model.txt\nnum_threads=2\n")
cli("lightgbm-cegb", "train", "train.conf", "--costs", "costs.txt", "--tradeoff", "0.01")
assert "[cegb_tradeoff: 0.01]" in Path("cli_model.txt").read_text()
cli("lightgbm", "task=predict", "data=test.csv", "input_model=model.txt", "output_result=pred.txt")
assert np.allclose(np.loadtxt("pred.txt"), booster.predict(Xt), rtol=0, atol=1e-12)
print("smoke ok")
'''


def run(*cmd, timeout=900, check=True, **kwargs) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"timed out after {timeout} s: {' '.join(map(str, cmd))}") from None
    if check:
        assert proc.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def lightgbm_pin() -> str:
    """The package's requirement on lightgbm, as pyproject.toml writes it."""
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = [d.replace(" ", "") for d in dependencies if re.match(r"lightgbm\b", d)]
    assert len(pins) == 1, dependencies
    return pins[0]


def test_the_lightgbm_pin_is_the_patched_build_of_the_series():
    version, _ = lgbm_source.read_series()
    assert lightgbm_pin() == f"lightgbm=={lgbm_source.UPSTREAM_VERSION}+cegb.{version}", (
        "pyproject.toml must pin exactly the build of patches/series: bump it with the series' '# version:'")


def built_dist() -> Path:
    """The files of make wheels, built with scripts/build/wheels.py once per key and cached."""
    build = lgbm_source.build(2)
    dist = lgbm_source.cache_dir() / f"wheels-{wheels.key(build)}"
    if not (dist / "DONE").exists():
        tmp = Path(tempfile.mkdtemp(prefix="wheels-", dir=lgbm_source.cache_dir()))
        try:
            run(sys.executable, "-m", "scripts.build.wheels", "--out", tmp / "dist", "-j", "2", cwd=ROOT)
            (tmp / "dist" / "DONE").write_text("ok")
            shutil.rmtree(dist, ignore_errors=True)
            os.replace(tmp / "dist", dist)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return dist


@pytest.mark.long
def test_the_wheels_install_and_run_outside_the_clone(tmp_path):
    version, _ = lgbm_source.read_series()
    suffix = f"+cegb.{version}"
    dist = built_dist()
    lgbm_wheel, = dist.glob("lightgbm-*.whl")
    package_wheel, = dist.glob("lightgbm_cegb-*.whl")
    sdist, = dist.glob("lightgbm_cegb-*.tar.gz")
    assert lgbm_wheel.name.startswith(f"lightgbm-{lgbm_source.UPSTREAM_VERSION}{suffix}-py3-none-manylinux_")
    assert re.fullmatch(r"lightgbm_cegb-[^-]+-cp3\d+-cp3\d+-manylinux_\d+_\d+_x86_64\.whl", package_wheel.name)
    with zipfile.ZipFile(lgbm_wheel) as zf:
        names = set(zf.namelist())
    assert f"lightgbm-{lgbm_source.UPSTREAM_VERSION}{suffix}.data/scripts/lightgbm" in names, sorted(names)
    with tarfile.open(sdist) as tar:
        members = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    needed = {"setup.py", "pyproject.toml", "LICENSE", "NOTICE", "lightgbm_cegb/datasets/data/higgs/binary.train.gz"}
    needed |= {p.relative_to(ROOT).as_posix() for p in (ROOT / "cython_ext").iterdir() if p.suffix in (".pyx", ".pxd")}
    assert needed <= members, sorted(needed - members)

    venv, work = tmp_path / "venv", tmp_path / "work"
    assert ROOT not in tmp_path.parents
    work.mkdir()
    run(sys.executable, "-m", "venv", venv)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    pip = [venv / "bin" / "python", "-m", "pip", "--disable-pip-version-check", "install"]
    # without the patched LightGBM wheel the pin cannot be met: pip stops at resolution (stock 4.7.0 is no match)
    proc = run(*pip, "--dry-run", package_wheel, cwd=work, env=env, check=False)
    assert proc.returncode != 0 and f"No matching distribution found for {lightgbm_pin()}" in proc.stderr, (
        f"installing the package without the patched wheel should fail at resolution:\n{proc.stdout[-2000:]}\n"
        f"{proc.stderr[-2000:]}")
    run(*pip, "-q", "--find-links", dist, "lightgbm-cegb[plot]", cwd=work, env=env)
    proc = run(venv / "bin" / "python", "-c", SMOKE, suffix, ROOT, cwd=work, env=env)
    assert "smoke ok" in proc.stdout
