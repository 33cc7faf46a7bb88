"""The saved-model format (lightgbm_cegb.io.saved): models saved by lightgbm_cegb 0.1.0 still load (committed
fixtures, fixtures/saved-0.1.0/README.md), the manifest holds what the specification says, a newer format
version and foreign folders are refused by name, and values round-trip through the encoding."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pytest

import lightgbm_cegb as lc
from lightgbm_cegb import CEGBError, FeatureCosts
from lightgbm_cegb.io import saved

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
