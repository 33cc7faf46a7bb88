"""The saved-model format (lightgbm_cegb.io.saved): models saved by lightgbm_cegb 0.1.0 still load (committed
fixtures, fixtures/saved-0.1.0/README.md), the manifest holds what the specification says, a newer format
version and foreign folders are refused by name, and values round-trip through the encoding."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from conftest import run_python

import lightgbm_cegb as lc
from lightgbm_cegb import CEGBError, FeatureCosts, prediction_cost
from lightgbm_cegb.io import saved
from lightgbm_cegb.io.lightgbm_text import with_group_names

FIXTURES = Path(__file__).with_name("fixtures") / "saved-0.1.0"
OLD = ["AdaptGBRT", "AdaptLIN", "CSTC", "CSTCClassifier", "CSCC", "Cronus"]


@pytest.mark.parametrize("name", OLD)
def test_models_saved_by_0_1_0_load_and_predict_as_they_did(name):
    expected = json.loads((FIXTURES / "expected.json").read_text())[name]
    X = np.load(FIXTURES / "X_check.npy")
    cls = getattr(lc, name)
    given = {"f0": lgb.Booster(model_file=str(FIXTURES / "f0.txt"))} if name.startswith("Adapt") else {}
    model = cls.load(FIXTURES / name, **given)
    np.testing.assert_array_equal(np.asarray(model.predict(X), dtype=float), expected["predict"])
    np.testing.assert_array_equal(model.prediction_cost(X).per_instance, expected["cost"])
    assert model.tradeoff == 0.01  # 0.1.0 kept the costs aligned to the columns: equal costs, as arrays
    assert model.feature_costs.to_dict(5) == FeatureCosts(lazy=[1.0, 2.0, 3.0, 4.0, 5.0]).to_dict(5)


def test_a_model_saved_by_0_1_0_resaves_in_the_current_format(tmp_path):
    model = lc.CSTCClassifier.load(FIXTURES / "CSTCClassifier")
    model.save(tmp_path / "m")
    manifest = json.loads((tmp_path / "m" / "manifest.json").read_text())
    assert (manifest["format"], manifest["format_version"], manifest["estimator"]) == \
        ("lightgbm_cegb", saved.FORMAT_VERSION, "CSTCClassifier")
    assert manifest["package_version"] == lc.__version__ and manifest["lightgbm_version"] == lgb.__version__
    assert manifest["params"]["phi"] == 5 and set(manifest["files"]) == {"phi"}
    X = np.load(FIXTURES / "X_check.npy")
    np.testing.assert_array_equal(lc.CSTCClassifier.load(tmp_path / "m").predict(X), model.predict(X))


def fitted_greedy_miser(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    model = lc.GreedyMiserRegressor(tradeoff=0.1, n_estimators=5).fit(X, X[:, 0] + X[:, 1])
    model.save(tmp_path / "m")
    return model, X


def test_a_newer_format_version_and_foreign_folders_are_refused(tmp_path):
    fitted_greedy_miser(tmp_path)
    path = tmp_path / "m" / "manifest.json"
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps({**manifest, "format_version": saved.FORMAT_VERSION + 1}))
    with pytest.raises(CEGBError, match=f"format version {saved.FORMAT_VERSION + 1}.*reads versions up to "
                                        f"{saved.FORMAT_VERSION}"):
        lc.GreedyMiserRegressor.load(tmp_path / "m")
    with pytest.raises(CEGBError, match="holds no saved model"):
        lc.GreedyMiserRegressor.load(tmp_path / "nothing")
    path.write_text("{not json")
    with pytest.raises(CEGBError, match="cannot be read as JSON"):
        lc.GreedyMiserRegressor.load(tmp_path / "m")
    path.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(CEGBError, match="is not a lightgbm_cegb model"):
        lc.GreedyMiserRegressor.load(tmp_path / "m")


def test_a_missing_artifact_is_named(tmp_path):
    fitted_greedy_miser(tmp_path)
    manifest = json.loads((tmp_path / "m" / "manifest.json").read_text())
    (tmp_path / "m" / manifest["files"]["booster"]).unlink()
    with pytest.raises(CEGBError, match="lacks its file 'booster-"):
        lc.GreedyMiserRegressor.load(tmp_path / "m")
    manifest["files"]["booster"] = "../outside.txt"
    (tmp_path / "m" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CEGBError, match="lacks its file '../outside.txt'"):
        lc.GreedyMiserRegressor.load(tmp_path / "m")


@pytest.mark.parametrize(("where", "key"), [
    ((), "state"), ((), "files"), ((), "n_features_in"), ((), "params"), ((), "costs"),
    (("state",), "best_iteration"), (("costs",), "lazy"), (("costs",), "tree"),
])
def test_a_missing_manifest_key_is_named(tmp_path, where, key):
    """A manifest without one of its keys raised a bare KeyError from inside load."""
    fitted_greedy_miser(tmp_path)
    path = tmp_path / "m" / "manifest.json"
    manifest = json.loads(path.read_text())
    part = manifest
    for name in where:
        part = part[name]
    assert key in part
    del part[key]
    path.write_text(json.dumps(manifest))
    inside = f" \\({where[0]}\\)" if where else ""
    with pytest.raises(CEGBError, match=rf"path: the manifest '.*manifest.json'{inside} lacks the key '{key}': the "
                                        r"file is damaged, or was not written by lightgbm_cegb"):
        lc.GreedyMiserRegressor.load(tmp_path / "m")


def test_load_names_the_arguments_the_format_does_not_hold(tmp_path):
    shutil.copytree(FIXTURES / "AdaptGBRT", tmp_path / "a")
    with pytest.raises(CEGBError, match=r"unexpected arguments \['phi'\]; it takes \['f0', 'f0_usage'\]"):
        lc.AdaptGBRT.load(tmp_path / "a", phi=1)
    with pytest.raises(CEGBError, match=r"unexpected arguments \['f0'\]; it takes none"):
        lc.CSTC.load(FIXTURES / "CSTC", f0=1)
    with pytest.raises(CEGBError, match="not a CSTC model"):
        lc.CSTC.load(FIXTURES / "CSCC")


@pytest.mark.parametrize("value", [
    None, True, 3, 2.5, "text", [1, [2.0, "a"]], {"a": 1}, {1: "one", "b": 2.0}, np.float32(0.5), np.int64(7),
    np.arange(3), FeatureCosts(lazy={"x": 1.0}, split=0.25), FeatureCosts(lazy=[1, 2], groups={"g": [0, 1]},
                                                                           group_lazy=[3.0], tree=1.0),
])
def test_values_round_trip_through_the_encoding(value):
    back = saved.decode(json.loads(json.dumps(saved.encode(value))))
    if isinstance(value, (np.ndarray, np.generic)):
        np.testing.assert_array_equal(back, value)
    else:
        assert back == value


def test_a_value_json_cannot_hold_is_named():
    with pytest.raises(CEGBError, match="cannot save a value of type object"):
        saved.encode(object())


def test_group_names_round_trip_through_save_and_load(tmp_path):
    """A CEGB model's booster artifact names the groups LightGBM numbers: after load, the booster's own
    parameters give the costs with their names (the package's prediction_cost, its file, the CLI), and stock
    LightGBM 4.7.0 loads the artifact and predicts as the model does. A save without the names line (an
    earlier one) still loads, its costs named from the estimator's state."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(400, 5)), columns=["a", "b", "c", "d", "e"])
    y = X["a"] + X["c"] * X["d"] + 0.5 * X["e"]
    costs = FeatureCosts(lazy={"a": 1.0, "b": 1.0}, groups={"wild": ["a", "b"], "soil": ["c", "d", "e"]},
                         group_lazy={"wild": 2.0, "soil": 30.0})
    model = lc.CEGBRegressor(feature_costs=costs, cegb_tradeoff=0.001, n_estimators=10, verbose=-1).fit(X, y)
    assert set(lc.prediction_cost(model, X).group_usage) == {"wild", "soil"}  # its costs_
    model.save(tmp_path / "m")
    manifest = json.loads((tmp_path / "m" / "manifest.json").read_text())
    artifact = tmp_path / "m" / manifest["files"]["booster"]
    assert "[cegb_group_names=wild,soil: ]\n" in artifact.read_text()
    assert manifest["costs"]["groups"] == {"wild": [0, 1], "soil": [2, 3, 4]}
    again = lc.CEGBRegressor.load(tmp_path / "m")
    expected = model.prediction_cost(X)
    for report in (prediction_cost(again.booster_, X), prediction_cost(str(artifact), X), again.prediction_cost(X),
                   lc.prediction_cost(again, X)):
        assert report.group_usage == expected.group_usage and list(report.group_usage) == ["wild", "soil"]
        np.testing.assert_array_equal(report.per_instance, expected.per_instance)
    np.save(tmp_path / "X.npy", X.to_numpy())
    result = run_python(textwrap.dedent(f"""
        import lightgbm, numpy as np
        assert "+cegb" not in lightgbm.__version__, lightgbm.__version__
        model = lightgbm.Booster(model_file={str(artifact)!r})
        np.save({str(tmp_path / "p.npy")!r}, model.predict(np.load({str(tmp_path / "X.npy")!r})))
        """), stock=True)
    assert result.returncode == 0, result.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), model.predict(X))
    # an earlier save: no names line, no costs in the manifest
    artifact.write_text(with_group_names(artifact.read_text(), None))
    (tmp_path / "m" / "manifest.json").write_text(json.dumps({**manifest, "costs": None}))
    old = lc.CEGBRegressor.load(tmp_path / "m")
    assert old.costs_ == model.costs_ and list(old.prediction_cost(X).group_usage) == ["wild", "soil"]
    assert list(prediction_cost(old.booster_, X).group_usage) == ["0", "1"]


def test_a_save_deletes_only_the_artifacts_saves_wrote(tmp_path):
    """Issue 48 (6): stale artifacts were found by a name pattern alone, so a save into a folder of results deleted
    the user's files whose names fit it (log-2024-11-27_12-30.txt). Only files whose name ends in the first 16 hex
    digits of their content's sha256 are a save's."""
    import hashlib
    X = np.random.default_rng(0).normal(size=(200, 3))
    y = (X[:, 0] > 0).astype(int)
    folder = tmp_path / "results"
    folder.mkdir()
    theirs = {"log-2024-11-27_12-30.txt": "a run's log\n", "notes-0123456789abcdef.txt": "hex-like, not its hash\n",
              "model-ABCDEF0123456789.txt": "upper case\n"}
    for name, text in theirs.items():
        (folder / name).write_text(text)
    first = lc.GreedyMiserClassifier(tradeoff=0.1, n_estimators=5).fit(X, y)
    first.save(folder)
    old = set(json.loads((folder / "manifest.json").read_text())["files"].values())
    second = lc.GreedyMiserClassifier(tradeoff=0.2, n_estimators=3).fit(X, y)
    second.save(folder)
    new = set(json.loads((folder / "manifest.json").read_text())["files"].values())
    assert old != new and not any((folder / name).exists() for name in old - new)  # the earlier save's artifacts go
    for name, text in theirs.items():
        assert (folder / name).read_text() == text, name
    orphan = "booster-" + hashlib.sha256(b"left by a save that failed\n").hexdigest()[:16] + ".txt"
    (folder / orphan).write_text("left by a save that failed\n")
    second.save(folder)
    assert not (folder / orphan).exists()  # a save's own file, named by no manifest
    assert {p.name for p in folder.iterdir()} == {"manifest.json", *new, *theirs}
