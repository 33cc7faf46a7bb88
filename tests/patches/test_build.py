"""The patched build: version, the command-line program, model files readable by stock LightGBM, and the
patch tooling (checksum, --fuzz=0, unpack/refresh round trip)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import lightgbm as lgb
import numpy as np
import pytest
from conftest import CLI, ROOT, lgbm_source, run_python


def test_version_is_the_series_version():
    version, names = lgbm_source.read_series()
    assert names, "patches/series lists no patch"
    assert lgb.__version__ == f"4.7.0+cegb.{version}"


@pytest.fixture(scope="module")
def strong_weak_file(strong_weak, tmp_path_factory):
    """The coupled-penalty reproduction of test_patch_0001 as a CSV file (label first)."""
    X, y = strong_weak
    path = tmp_path_factory.mktemp("cli") / "train.csv"
    np.savetxt(path, np.column_stack([y, X]), delimiter=",", fmt="%.17g")
    return path, X, y


CEGB_PARAMS = {"objective": "regression", "num_leaves": 4, "learning_rate": 1.0, "min_data_in_leaf": 1,
               "cegb_penalty_split": 0.05, "cegb_penalty_feature_coupled": "0,5000", "num_threads": 2,
               "deterministic": True, "verbose": -1}


def test_cli_trains_with_the_patched_cegb(strong_weak_file, tmp_path):
    data, X, y = strong_weak_file
    model = tmp_path / "model.txt"
    conf = tmp_path / "train.conf"
    lines = ["task = train", f"data = {data}", "header = false", "num_iterations = 3",
             f"output_model = {model}", *(f"{k} = {v}" for k, v in CEGB_PARAMS.items())]
    conf.write_text("\n".join(lines) + "\n")
    proc = subprocess.run([str(CLI), f"config={conf}"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cli_model = lgb.Booster(model_file=str(model))
    # patched: the weak split is rejected (stock's CLI makes it: 4 leaves)
    assert cli_model.dump_model()["tree_info"][0]["num_leaves"] == 3
    params = {**CEGB_PARAMS, "cegb_penalty_feature_coupled": [0, 5000]}
    api_model = lgb.train(params, lgb.Dataset(X, y), num_boost_round=3)
    np.testing.assert_array_equal(cli_model.predict(X), api_model.predict(X))


def test_cegb_model_file_loads_in_stock_lightgbm(strong_weak_file, tmp_path):
    _, X, y = strong_weak_file
    params = {**CEGB_PARAMS, "cegb_penalty_feature_coupled": [0, 5000]}
    booster = lgb.train(params, lgb.Dataset(X, y), num_boost_round=5)
    model = tmp_path / "model.txt"
    booster.save_model(str(model))
    np.save(tmp_path / "X.npy", X)
    code = (f"import numpy as np, lightgbm as lgb; assert '+cegb' not in lgb.__version__; "
            f"b = lgb.Booster(model_file={str(model)!r}); "
            f"np.save({str(tmp_path / 'stock.npy')!r}, b.predict(np.load({str(tmp_path / 'X.npy')!r})))")
    proc = run_python(code, stock=True)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "stock.npy"), booster.predict(X))


# ---------------------------------------------------------------------------------------- tooling


def test_unpack_then_refresh_reproduces_the_series(tmp_path):
    tree = tmp_path / "tree"
    lgbm_source.unpack(tree)
    copy = tmp_path / "patches"
    shutil.copytree(lgbm_source.PATCHES, copy)
    lgbm_source.refresh(tree, copy)
    for path in lgbm_source.PATCHES.iterdir():
        assert (copy / path.name).read_bytes() == path.read_bytes(), path.name

    # an uncommitted edit is folded into the last patch
    config = tree / "src" / "io" / "config.cpp"
    config.write_text(config.read_text() + "// refreshed\n")
    lgbm_source.refresh(tree, copy)
    _, names = lgbm_source.read_series(copy)
    assert "+// refreshed" in (copy / names[-1]).read_text()


def test_a_patch_that_does_not_apply_exactly_stops_the_build(tmp_path):
    _, names = lgbm_source.read_series()
    patches = tmp_path / "patches"
    shutil.copytree(lgbm_source.PATCHES, patches)
    text = (patches / names[0]).read_text()
    # change one context line (lines starting with a space inside a hunk): --fuzz=0 must reject it
    header, diff = lgbm_source.split_patch(text)
    lines = diff.splitlines(keepends=True)
    i = next(k for k, line in enumerate(lines) if line.startswith(" ") and line.strip())
    lines[i] = " " + lines[i][1:].replace(lines[i].strip(), lines[i].strip() + " /* changed */", 1)
    (patches / names[0]).write_text(header + "---\n" + "".join(lines))
    tree = tmp_path / "tree"
    tree.mkdir()
    lgbm_source.extract_sdist(tree)
    with pytest.raises(lgbm_source.SourceError, match=r"does not apply with --fuzz=0"):
        lgbm_source.apply_series(tree, patches=patches)


def test_sdist_checksum_is_enforced(tmp_path, monkeypatch):
    monkeypatch.setenv("LIGHTGBM_CEGB_CACHE", str(tmp_path))
    (tmp_path / "downloads").mkdir()
    (tmp_path / "downloads" / lgbm_source.SDIST_NAME).write_bytes(b"not the sdist")
    with pytest.raises(lgbm_source.SourceError, match=r"sha256 mismatch: expected f8e20f68"):
        lgbm_source.fetch_sdist()


def test_series_rejects_bad_names(tmp_path):
    (tmp_path / "series").write_text("# version: 3\nnot-a-patch.diff\n")
    with pytest.raises(lgbm_source.SourceError, match=r"series:2: expected a patch name like 0001-name.patch"):
        lgbm_source.read_series(tmp_path)
    (tmp_path / "series").write_text("0001-x.patch\n")
    (tmp_path / "0001-x.patch").write_text("")
    with pytest.raises(lgbm_source.SourceError, match=r"no '# version: N' line"):
        lgbm_source.read_series(tmp_path)


def test_scripts_are_importable_without_the_venv():
    """lgbm_source.py needs only the standard library (no site-packages), so any Python 3.10+ runs it."""
    proc = subprocess.run([sys.executable, "-I", "-S", str(ROOT / "scripts" / "build" / "lgbm_source.py"), "key"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == lgbm_source.series_key()
