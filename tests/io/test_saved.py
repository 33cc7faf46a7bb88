"""The saved-model format (lightgbm_cegb.io.saved): models saved by lightgbm_cegb 0.1.0 still load (committed
fixtures, fixtures/saved-0.1.0/README.md), the manifest holds what the specification says, a newer format
version and foreign folders are refused by name, and values round-trip through the encoding."""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import re
import shutil
import subprocess
import sys
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
    with pytest.raises(CEGBError, match=r"names its file '../outside.txt' for 'booster': expected "
                                        r"booster-<16 hex digits>.txt"):
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
    # an earlier save: no names line (the artifact named by its content, as every save names it), no costs
    _rename_as_saved(tmp_path / "m", "booster", with_group_names(artifact.read_text(), None))
    manifest = json.loads((tmp_path / "m" / "manifest.json").read_text())
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


def _rename_as_saved(folder: Path, name: str, text: str) -> None:
    """Write ``text`` as the artifact ``name`` under the name a save would give it (its hash), in the manifest."""
    import hashlib
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / manifest["files"][name]).unlink()
    file_name = f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:16]}.txt"
    (folder / file_name).write_text(text)
    manifest["files"][name] = file_name
    (folder / "manifest.json").write_text(json.dumps(manifest))


def test_an_artifact_changed_after_saving_is_refused_before_lightgbm_reads_it(tmp_path):
    """Issue 48 (8): an artifact edited so that a tree's byte length changes aborted the process (SIGABRT in
    LightGBM) in every estimator's load: the content hashes were never verified, nor the text read by the
    package's checked reader before LightGBM's."""
    model, X = fitted_greedy_miser(tmp_path)
    folder = tmp_path / "m"
    file_name = json.loads((folder / "manifest.json").read_text())["files"]["booster"]
    text = (folder / file_name).read_text()
    edited = text.replace("leaf_value=", "leaf_value=0.000", 1)  # one tree 4 bytes longer: tree_sizes is wrong
    (folder / file_name).write_text(edited)
    with pytest.raises(CEGBError, match=rf"file '.*{file_name}' does not hold what was saved \(the SHA-256 of its "
                                        r"content begins [0-9a-f]{16}, its name says [0-9a-f]{16}\): it was changed "
                                        "after saving"):
        lc.GreedyMiserRegressor.load(folder)
    _rename_as_saved(folder, "booster", edited)  # the hash matches: the package's reader still refuses it
    code = textwrap.dedent(f"""
        import lightgbm_cegb as lc
        try:
            lc.GreedyMiserRegressor.load({str(folder)!r})
        except lc.CEGBError as exc:
            print(exc)
    """)
    done = run_python(code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "the saved model's file for 'booster'" in done.stdout and "is not a LightGBM model this package reads" \
        in done.stdout and "tree_sizes" in done.stdout, done.stdout
    other = lgb.train({"objective": "regression", "verbose": -1}, lgb.Dataset(X[:, :3], X[:, 0]), 3)
    _rename_as_saved(folder, "booster", other.model_to_string())  # a valid model of 3 features for 4
    with pytest.raises(CEGBError, match="file for 'booster' .* reads 3 features, the manifest's n_features_in is 4"):
        lc.GreedyMiserRegressor.load(folder)


def _fitted(kind: str, tmp_path: Path):
    """(a fitted model of ``kind`` saved in tmp_path / "m", the class, arguments load needs)."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 4))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    given = {}
    if kind == "BudgetRF":
        model = lc.BudgetRFClassifier(n_estimators=3, feature_costs=[1, 1, 1, 1], random_state=0).fit(X, y)
    elif kind == "AdaptLIN":
        f0 = lgb.LGBMClassifier(n_estimators=5, verbose=-1).fit(X, y)
        model, given = lc.AdaptLIN(f0=f0, feature_costs=[1, 1, 1, 1], p_full=0.3).fit(X, y), {"f0": f0}
    elif kind == "CSTC":
        model = lc.CSTCClassifier(phi=5, feature_costs=[1, 1, 1, 1], tradeoff=0.01).fit(X, y)
    elif kind == "Acquisition":
        model = lc.AdaptiveAcquisitionClassifier(feature_costs=[1, 1, 1, 1], n_estimators=20, random_state=0).fit(X, y)
    else:
        model = lc.GreedyMiserClassifier(tradeoff=0.1, n_estimators=5).fit(X, y)
    model.save(tmp_path / "m")
    return model, type(model), given, X


def _edit(tmp_path: Path, path: tuple, value) -> None:
    manifest = json.loads((tmp_path / "m" / "manifest.json").read_text())
    part = manifest
    for key in path[:-1]:
        part = part[key]
    if value is _DELETE:
        del part[path[-1]]
    else:
        part[path[-1]] = value(part[path[-1]]) if callable(value) else value
    (tmp_path / "m" / "manifest.json").write_text(json.dumps(manifest))  # NaN as JSON's NaN token, as json reads


_DELETE = object()


@pytest.mark.parametrize(("kind", "path", "value", "message"), [
    ("GreedyMiser", ("format_version",), 0, r"format_version should be an integer from 2 to 2, got 0"),
    ("GreedyMiser", ("format_version",), -7, r"format_version should be an integer from 2 to 2, got -7"),
    ("GreedyMiser", ("format_version",), "2", r"format_version should be an integer from 2 to 2, got '2'"),
    ("GreedyMiser", ("format_version",), True, r"format_version should be an integer from 2 to 2, got True"),
    ("GreedyMiser", ("n_features_in",), "4", r"n_features_in should be an integer >= 1, got '4'"),
    ("GreedyMiser", ("n_features_in",), 4.7, r"n_features_in should be an integer >= 1, got 4.7"),
    ("GreedyMiser", ("n_features_in",), 0, r"n_features_in should be an integer >= 1, got 0"),
    ("GreedyMiser", ("feature_names_in",), ["a", "b"], r"feature_names_in should be null or a list of 4 strings"),
    ("GreedyMiser", ("files",), [], r"files should be a mapping of artifact names to file names, got \[\]"),
    ("GreedyMiser", ("state",), [], r"state should be a mapping, got \[\]"),
    ("GreedyMiser", ("state", "best_iteration"), 10**9, r"best_iteration should be at most the model's 5 iterations"),
    ("GreedyMiser", ("state", "best_iteration"), "3", r"best_iteration should be an integer >= 0, got '3'"),
    ("BudgetRF", ("state", "n_estimators"), 10**9, r"the forest's arrays do not match its n_estimators \(1000000000\)"),
    ("BudgetRF", ("state", "threshold"), lambda t: [float("nan")] + t[1:], r"\(state\): threshold should hold finite"),
    ("BudgetRF", ("state", "classes"), [0, 1, 2], r"leaf_counts should be an array of shape \(n, 3\), got shape"),
    ("BudgetRF", ("state", "classes"), [0, 0], r"classes should be 1 or more distinct labels of one kind .* in sorted "
                                               r"order, as fit gives them, got \[0, 0\]"),
    ("BudgetRF", ("state", "classes"), [1, 0], r"classes should be 1 or more distinct labels .* in sorted order"),
    ("BudgetRF", ("state", "node_offset"), lambda o: [0, 1e19] + o[2:], r"node_offset should hold int64 integers >= 0"),
    ("GreedyMiser", ("state", "classes"), [1, 0], r"classes should be 2 distinct labels .* in sorted order"),
    ("GreedyMiser", ("state", "classes"), [0], r"classes should be 2 distinct labels"),
    ("GreedyMiser", ("params", "bogus"), 1, r"params are not GreedyMiserClassifier's parameters"),
    ("Acquisition", ("state", "classes"), [1, 0], r"classes should be 2 or more distinct labels .* in sorted order"),
    ("Acquisition", ("costs",), None, r"the manifest's costs should be the fitted cost model, got null"),
    ("GreedyMiser", ("costs",), None, r"the manifest's costs should be the fitted cost model, got null"),
    ("Acquisition", ("n_features_in",), 10**12, r"units should hold each of the 1000000000000 columns once .* got "
                                                       r"column 4 in 0 units"),
    ("CSTC", ("state", "classes"), [1, 0], r"classes should be 2 or more distinct labels .* in sorted order"),
    ("BudgetRF", ("state", "node_offset"), lambda o: [0] + [v + 1 for v in o[1:]], r"do not match its n_estimators"),
    ("BudgetRF", ("state", "feature"), lambda f: [7] + f[1:], r"feature"),
    ("AdaptLIN", ("state", "gate_coef"), [1.0, 2.0], r"gate_coef should be an array of shape \(4,\), got shape \(2,\)"),
    ("AdaptLIN", ("state", "f1_coef"), lambda c: [row[:1] + row for row in c],
     r"f1_coef should be an array of shape \(4, 1\), got shape \(4, 2\)"),
    ("AdaptLIN", ("state", "scale"), [1.0, 0.0, 1.0, 1.0], r"scale should hold numbers > 0"),
    ("AdaptLIN", ("state", "gate_threshold"), "high", r"gate_threshold should be an array of shape \(\) of numbers"),
    ("CSTC", ("files",), {}, r"files should name the artifact 'phi' \(a model on the trees of phi\), got \{\}"),
    ("CSTC", ("state", "coef"), lambda c: c[:-1], r"coef should be an array of shape"),
    ("Acquisition", ("state", "units"), [[0], [9]], r"units should be lists of column indices below 4"),
    ("Acquisition", ("state", "tables_shape"), lambda s: [s[0], s[1] + 1, s[2]], r"tables_shape should be \[4 units, "
                                                                                  r"2 classes, outcomes\]"),
    ("Acquisition", ("state", "unit_cost"), [1, 1, 1, -1], r"unit_cost should hold finite numbers >= 0"),
    ("Acquisition", ("state", "unit_cost"), [5, 1, 1, 1],
     r"units and unit_cost should be the fitted costs' units and their prices, \[\[0\], \[1\], \[2\], \[3\]\] at "
     r"\[1.0, 1.0, 1.0, 1.0\], got .* at \[5.0, 1.0, 1.0, 1.0\]"),
    ("Acquisition", ("state", "units"), [[1], [0], [2], [3]], r"units and unit_cost should be the fitted costs' units"),
])
def test_manifest_fields_are_checked_where_they_enter(tmp_path, kind, path, value, message):
    """Issue 48 (9): manifest fields were used without a check (a forest of 10**9 trees, NaN thresholds, a binary
    forest with 3 classes, coefficients of the wrong shape, CSTC without its phi loading on raw features, format
    versions 0 or -7, n_features_in "5" or 5.7 accepted): each is a CEGBError naming the file and the field."""
    _, cls, given, _ = _fitted(kind, tmp_path)
    _edit(tmp_path, path, value)
    with pytest.raises(CEGBError, match=r"manifest\.json|format_version|Forest") as info:
        cls.load(tmp_path / "m", **given)
    assert re.search(message, str(info.value)), str(info.value)


def test_what_the_format_does_not_write_is_refused_by_name(tmp_path):
    """Found by an independent review: values encode never writes (an ``__items__`` that is not a list of pairs, a
    nesting deeper than Python's recursion), a manifest without its class, and a Selection in format version 1
    (lightgbm_cegb 0.1.0 had none: its model was read from a file named 'None', unverified) were TypeErrors,
    RecursionErrors or loads; each is a CEGBError now."""
    from lightgbm_cegb.selection import Selection

    _, cls, given, _ = _fitted("GreedyMiser", tmp_path)
    for value in ({"__items__": 5}, {"__items__": [[{"a": 1}, 2]]}, {"__FeatureCosts__": {"bogus": 1}}):
        _edit(tmp_path, ("state", "extra"), value)
        with pytest.raises(CEGBError, match=r"is not what lightgbm_cegb writes"):
            cls.load(tmp_path / "m", **given)
    manifest = json.loads((tmp_path / "m" / "manifest.json").read_text())
    (tmp_path / "m" / "manifest.json").write_text(json.dumps({**manifest, "state": {
        **manifest["state"], "extra": json.loads("[" * 700 + "]" * 700)}}))
    with pytest.raises(CEGBError, match=r"is not what lightgbm_cegb writes|cannot be read as JSON"):
        cls.load(tmp_path / "m", **given)
    (tmp_path / "m" / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CEGBError, match=r"cannot be read as JSON"):
        cls.load(tmp_path / "m", **given)
    (tmp_path / "m" / "manifest.json").write_text(json.dumps({key: v for key, v in manifest.items()
                                                              if key != "estimator"}))
    with pytest.raises(CEGBError, match=r"estimator should be a class name, got None"):
        cls.load(tmp_path / "m", **given)
    (tmp_path / "m" / "manifest.json").write_text(json.dumps({"format": "lightgbm_cegb.Selection", "version": 1}))
    with pytest.raises(CEGBError, match=r"format version 1 \(lightgbm_cegb 0\.1\.0\) saved only AdaptGBRT, .*"
                                        r"got 'Selection'"):
        Selection.load(tmp_path / "m")


SAVER = """
import sys
import numpy as np
import lightgbm_cegb as lc
folder, seconds = sys.argv[1], float(sys.argv[2])
rng = np.random.default_rng(0)
X = rng.normal(size=(200, 3))
y = (X[:, 0] > 0).astype(int)
models = [lc.GreedyMiserClassifier(tradeoff=t, n_estimators=n).fit(X, y) for t, n in ((0.1, 5), (0.3, 3))]
models[0].save(folder)
print("ready", flush=True)
import time
end, k = time.monotonic() + seconds, 0
while time.monotonic() < end:
    k += 1
    models[k % 2].save(folder)
print(k)
"""


def test_loads_concurrent_with_saves_see_the_old_model_or_the_new_one(tmp_path):
    """Issue 48 (10): a load concurrent with a save over the same folder (another process) failed 1-2% of the
    time: an artifact deleted between reading the manifest and the file. Now a read starts again on the new
    manifest, and returns the old model or the new one."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] > 0).astype(int)
    expected = {n: lc.GreedyMiserClassifier(tradeoff=t, n_estimators=n).fit(X, y).predict_proba(X)
                for t, n in ((0.1, 5), (0.3, 3))}
    folder = tmp_path / "m"
    saver = subprocess.Popen([sys.executable, "-c", SAVER, str(folder), "600"], stdout=subprocess.PIPE, text=True)
    errors, loads = [], 0
    try:
        assert saver.stdout.readline().strip() == "ready"
        while loads < 400 and saver.poll() is None:
            loads += 1
            try:
                loaded = lc.GreedyMiserClassifier.load(folder)
            except CEGBError as exc:
                errors.append(str(exc))
                continue
            np.testing.assert_array_equal(loaded.predict_proba(X), expected[loaded.n_estimators])
    finally:
        saver.kill()
        saver.wait()
    assert loads == 400, f"the saving process ended early (returncode {saver.returncode})"
    assert not errors, f"{len(errors)} of {loads} loads failed: {errors[:2]}"


def test_infinite_numbers_save_and_load():
    """An ADAPT gate's threshold is infinite at p_full 0 and 1: the manifest could not hold it (a bare
    ValueError from json at save)."""
    for value in (np.inf, -np.inf, [1.0, -np.inf]):
        back = saved.decode(json.loads(json.dumps(saved.encode(value), allow_nan=False)))
        assert back == (value if not isinstance(value, float) else float(value))
    with pytest.raises(CEGBError, match=r"should be 'inf', '-inf' or 'nan'"):
        saved.decode({"__float__": "big"})


@pytest.mark.parametrize("path", ["", None, 3])
def test_a_path_that_names_no_folder_is_refused(path, tmp_path, monkeypatch):
    """Issue 48 (13): save("") wrote the model into the working directory; None or 3 were bare TypeErrors."""
    monkeypatch.chdir(tmp_path)
    model, _ = fitted_greedy_miser(tmp_path)
    with pytest.raises(CEGBError, match=rf"path should name a folder \(a str or os.PathLike\), got {path!r}"):
        model.save(path)
    with pytest.raises(CEGBError, match=rf"path should name a folder \(a str or os.PathLike\), got {path!r}"):
        lc.GreedyMiserRegressor.load(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def test_one_class_models_save_load_and_cut(tmp_path):
    """BudgetRF and ADAPT fit on one class (as scikit-learn's trees do): their saves load, and BudgetRF's prefix
    (which restores a state) works."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = np.zeros(60, dtype=int)
    forest = lc.BudgetRFClassifier(n_estimators=2, random_state=0).fit(X, y)
    forest.save(tmp_path / "rf")
    np.testing.assert_array_equal(lc.BudgetRFClassifier.load(tmp_path / "rf").predict(X), forest.predict(X))
    np.testing.assert_array_equal(forest.prefix(1).predict(X), y)
    f0 = lgb.LGBMClassifier(n_estimators=2, verbose=-1).fit(X, (X[:, 0] > 0).astype(int))
    adapt = lc.AdaptLIN(f0=f0, feature_costs=[1, 1, 1]).fit(X, y)
    adapt.save(tmp_path / "lin")
    np.testing.assert_array_equal(lc.AdaptLIN.load(tmp_path / "lin", f0=f0).predict(X), adapt.predict(X))


def test_an_artifact_saved_with_windows_newlines_still_loads(tmp_path):
    """Saves before 0.2.0 wrote artifacts with Path.write_text, which writes \\r\\n on Windows, but named them by the
    hash of the text with \\n: the verification reads those bytes as they were named."""
    model, X = fitted_greedy_miser(tmp_path)
    folder = tmp_path / "m"
    path = folder / json.loads((folder / "manifest.json").read_text())["files"]["booster"]
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    np.testing.assert_array_equal(lc.GreedyMiserRegressor.load(folder).predict(X), model.predict(X))


def _save_in_rounds(folder: str, tradeoff: float, n_estimators: int, rounds: int, barrier, errors) -> None:
    """A process of the test below: fits its model, then saves it into ``folder`` once per round, all processes
    released together by ``barrier`` (the test loads between rounds); what a save raised goes to ``errors``."""
    import lightgbm_cegb as lc
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    model = lc.GreedyMiserClassifier(tradeoff=tradeoff, n_estimators=n_estimators).fit(X, (X[:, 0] > 0).astype(int))
    for _ in range(rounds):
        barrier.wait()
        try:
            model.save(folder)
        except Exception as exc:  # noqa: BLE001 - reported to the test
            errors.put(f"{type(exc).__name__}: {exc}")
        barrier.wait()


def test_concurrent_saves_into_one_folder_leave_one_model_whole(tmp_path):
    """Issue 61 (9): processes saving into one folder deleted each other's artifacts (a save's cleanup deletes the
    files its manifest does not name, and another save's manifest replaced it meanwhile): saves raised
    FileNotFoundError, and in 17 of 100 rounds of three processes the folder no longer loaded ("lacks its file").
    Saves into a folder now run one at a time; two processes save one model, the third another."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] > 0).astype(int)
    settings = [(0.1, 5), (0.1, 5), (0.3, 3)]
    expected = {n: lc.GreedyMiserClassifier(tradeoff=t, n_estimators=n).fit(X, y).predict_proba(X)
                for t, n in settings}
    rounds, folder = 40, str(tmp_path / "m")
    context = multiprocessing.get_context("spawn")
    barrier, errors = context.Barrier(len(settings) + 1, timeout=120), context.Queue()
    savers = [context.Process(target=_save_in_rounds, args=(folder, t, n, rounds, barrier, errors))
              for t, n in settings]
    for saver in savers:
        saver.start()
    failed = []
    try:
        for _ in range(rounds):
            barrier.wait()
            barrier.wait()
            try:
                loaded = lc.GreedyMiserClassifier.load(folder)
            except CEGBError as exc:
                failed.append(str(exc))
                continue
            np.testing.assert_array_equal(loaded.predict_proba(X), expected[loaded.n_estimators])
    finally:
        for saver in savers:
            saver.join(timeout=60)
            if saver.is_alive():
                saver.kill()
    raised = []
    while not errors.empty():
        raised.append(errors.get())
    assert not raised, f"{len(raised)} saves raised: {raised[:2]}"
    assert not failed, f"the folder did not load after {len(failed)} of {rounds} rounds: {failed[:2]}"
    assert [saver.exitcode for saver in savers] == [0] * len(savers)


@pytest.mark.parametrize("damage", ["appended", "emptied", "fifo", "folder"])
def test_a_save_over_a_damaged_artifact_writes_it_again(tmp_path, damage):
    """Issue 61 (9): a save wrote only the artifacts whose name was absent, so saving a model again over its
    damaged artifact kept the damage, and the folder still did not load. A file of the artifact's name that does
    not hold what the name says (changed, emptied, a FIFO) is written again."""
    model, X = fitted_greedy_miser(tmp_path)
    folder = tmp_path / "m"
    path = folder / json.loads((folder / "manifest.json").read_text())["files"]["booster"]
    text = path.read_text()
    if damage in ("fifo", "folder"):
        path.unlink()
    {"appended": lambda: path.write_text(text + "Tree=99\n"), "emptied": lambda: path.write_text(""),
     "fifo": lambda: os.mkfifo(path), "folder": path.mkdir}[damage]()
    if damage == "folder":  # not a file a save wrote: it stays, and the save names it before writing anything
        with pytest.raises(CEGBError, match=rf"'.*{path.name}' is a folder where the save writes its file"):
            model.save(folder)
        assert path.is_dir() and {p.name for p in folder.iterdir()} == {"manifest.json", path.name}
        return
    model.save(folder)
    assert path.is_file() and path.read_text() == text
    np.testing.assert_array_equal(lc.GreedyMiserRegressor.load(folder).predict(X), model.predict(X))


LOAD_ONCE = """
import resource
import lightgbm_cegb as lc
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))  # a read that never ends fails here, not the machine
try:
    lc.GreedyMiserRegressor.load({folder!r})
except lc.CEGBError as exc:
    print("CEGBError:", exc)
"""


@pytest.mark.parametrize("which", ["manifest", "artifact"])
@pytest.mark.parametrize(("kind", "words"), [("fifo", "a FIFO (named pipe)"), ("dev_zero", "a character device"),
                                             ("folder", "a folder")])
def test_a_load_reads_regular_files_only(tmp_path, which, kind, words):
    """Issue 61 (10): a saved folder's files were read without a look at what they are: a FIFO in an artifact's
    place blocked load() forever, a symbolic link to /dev/zero read until memory ran out. A load reads regular files
    (or links to them) only, and names any other file before reading it. Run in a fresh interpreter with a time
    limit (the load hung before the fix)."""
    fitted_greedy_miser(tmp_path)
    folder = tmp_path / "m"
    path = folder / ("manifest.json" if which == "manifest" else
                     json.loads((folder / "manifest.json").read_text())["files"]["booster"])
    path.unlink()
    {"fifo": os.mkfifo, "dev_zero": lambda p: os.symlink("/dev/zero", p), "folder": os.mkdir}[kind](path)
    done = run_python(LOAD_ONCE.format(folder=str(folder)), timeout=60)
    assert done.returncode is not None, f"the load timed out after 60 s reading {kind} as the {which}"
    assert done.returncode == 0, done.stderr[-2000:]
    what = "the manifest" if which == "manifest" else "the saved model's file"
    assert f"CEGBError: path: {what} {str(path)!r} is {words}: a load reads regular files only" in done.stdout, \
        done.stdout


def test_a_load_follows_links_to_regular_files_and_bounds_their_size(tmp_path, monkeypatch):
    """Issue 61 (10): a symbolic link to a regular file is read (its content is verified as any file's, so a
    folder may link the artifacts of another); a file larger than MAX_FILE_BYTES is refused by name, and a save
    that would write one fails before the folder is touched."""
    model, X = fitted_greedy_miser(tmp_path)
    folder = tmp_path / "m"
    path = folder / json.loads((folder / "manifest.json").read_text())["files"]["booster"]
    kept = tmp_path / "kept.txt"
    path.rename(kept)
    path.symlink_to(kept)
    np.testing.assert_array_equal(lc.GreedyMiserRegressor.load(folder).predict(X), model.predict(X))
    monkeypatch.setattr(saved, "MAX_FILE_BYTES", kept.stat().st_size - 1)
    with pytest.raises(CEGBError, match=rf"the saved model's file '.*{path.name}' holds {kept.stat().st_size} bytes, "
                                        r"more than a load reads \(MAX_FILE_BYTES"):
        lc.GreedyMiserRegressor.load(folder)
    with pytest.raises(CEGBError, match=r"cannot save the file 'booster': it holds \d+ bytes, more than a load reads"):
        model.save(tmp_path / "new")
    assert not (tmp_path / "new").exists()


def _sibling(kind: str):
    """(a fitted model of ``kind``, the rows): small, fast fits of the estimators whose saves the next tests edit."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 4))
    y, y3, values = (X[:, 0] > 0).astype(int), np.digitize(X[:, 0], [-0.5, 0.5]), X[:, 0] + X[:, 1]
    fits = {
        "GreedyMiserClassifier": lambda: lc.GreedyMiserClassifier(n_estimators=5).fit(X, y),
        "GreedyMiserClassifier3": lambda: lc.GreedyMiserClassifier(n_estimators=5).fit(X, y3),
        "GreedyMiserRegressor": lambda: lc.GreedyMiserRegressor(n_estimators=5).fit(X, values),
        "CEGBClassifier": lambda: lc.CEGBClassifier(n_estimators=5, verbose=-1).fit(X, y),
        "StagedAcquisitionClassifier": lambda: lc.StagedAcquisitionClassifier(
            stages=2, n_estimators=5, random_state=0).fit(X, y),
        "StagedAcquisitionRegressor": lambda: lc.StagedAcquisitionRegressor(
            stages=2, n_estimators=5, random_state=0).fit(X, values),
        "StagedAcquisitionRanker": lambda: lc.StagedAcquisitionRanker(
            stages=2, n_estimators=5, random_state=0).fit(X, y3, group=[10] * 30),
        "AdaptGBRT": lambda: lc.AdaptGBRT(f0=lgb.LGBMClassifier(n_estimators=5, verbose=-1).fit(X, y3), p_full=0.3,
                                          n_rounds=1, trees_per_round=3).fit(X, y3),
    }
    return fits[kind](), X


@pytest.mark.parametrize(("saved_as", "named", "message"), [
    ("GreedyMiserClassifier", "GreedyMiserRegressor",
     r"GreedyMiserRegressor is not a classifier: its state should not hold class labels, got classes \[0, 1\]"),
    ("CEGBClassifier", "CEGBRegressor",
     r"CEGBRegressor is not a classifier: its state should not hold class labels, got classes \[0, 1\]"),
    ("GreedyMiserRegressor", "GreedyMiserClassifier",
     r"GreedyMiserClassifier is a classifier: its state should hold class labels, got classes None"),
])
def test_a_sibling_class_named_in_the_manifest_is_refused(tmp_path, saved_as, named, message):
    """A review (2026-12-07): a classifier's manifest naming its regressor sibling loaded and predicted raw scores
    as values; a regressor's naming the classifier failed with an AttributeError at predict."""
    model, _ = _sibling(saved_as)
    model.save(tmp_path / "m")
    _edit(tmp_path, ("estimator",), named)
    with pytest.raises(CEGBError, match=r"manifest\.json' \(state\): " + message):
        getattr(lc, named).load(tmp_path / "m")


def _foreign(kind: str, X: np.ndarray) -> str:
    """A LightGBM model text of another kind than the package's, on X's columns."""
    label = {"regression": X[:, 0], "binary": (X[:, 1] > 0).astype(int)}[kind]
    return lgb.train({"objective": kind, "verbose": -1}, lgb.Dataset(X, label), 3).model_to_string()


@pytest.mark.parametrize(("kind", "artifact", "foreign", "message"), [
    ("GreedyMiserClassifier", "booster", "regression",
     r"holds a model of objective 'regression', where a GreedyMiserClassifier keeps models of the package's own "
     r"gradients \(objective none\) there"),
    ("CEGBClassifier", "booster", "regression",
     r"holds a model of objective 'regression', where a CEGBClassifier keeps models of a classification objective or "
     r"a cross-entropy objective there"),
    ("StagedAcquisitionClassifier", "stage_1", "regression",
     r"holds a model of objective 'regression', where a StagedAcquisitionClassifier keeps models of a classification "
     r"objective there"),
    ("StagedAcquisitionRegressor", "stage_1", "binary",
     r"holds a model of objective 'binary sigmoid:1', where a StagedAcquisitionRegressor keeps models of a "
     r"regression objective there"),
    ("StagedAcquisitionRanker", "stage_1", "regression",
     r"holds a model of objective 'regression', where a StagedAcquisitionRanker keeps models of a ranking objective"),
    ("GreedyMiserRegressor", "booster", "GreedyMiserClassifier3",
     r"gives 3 scores per row, where a GreedyMiserRegressor keeps a model of 1 there"),
    ("AdaptGBRT", "f1", "gate", r"gives 1 scores per row, where an AdaptGBRT keeps a model of 3 there"),
])
def test_an_artifact_of_another_kind_of_model_is_refused(tmp_path, kind, artifact, foreign, message):
    """A review (2026-12-07): an artifact replaced by another LightGBM model of the same columns, renamed to its
    hash as a save names it, loaded when its feature count matched: a Greedy Miser classifier then predicted from
    a regression model, a staged regressor's stage from a binary one, an ADAPT model from its gate in f1's place.
    Each estimator now names the kind of model (objective) and the scores per row it keeps there."""
    model, X = _sibling(kind)
    model.save(tmp_path / "m")
    folder = tmp_path / "m"
    files = json.loads((folder / "manifest.json").read_text())["files"]
    if foreign in files:  # another artifact of the same save (ADAPT's gate for its f1)
        text = (folder / files[foreign]).read_text()
    elif foreign in ("regression", "binary"):
        text = _foreign(foreign, X)
    else:
        text = _sibling(foreign)[0].booster_.model_to_string()
    _rename_as_saved(folder, artifact, text)
    with pytest.raises(CEGBError, match=rf"the saved model's file for '{artifact}' in .*{message}"):
        type(model).load(folder, **({"f0": model.f0} if kind == "AdaptGBRT" else {}))


def test_only_the_estimators_the_package_exports_are_read_by_name():
    """A review (2026-12-07): a manifest (a Selection's chosen model, ``lightgbm-cegb`` commands) naming one of the
    package's base classes (``_GreedyMiser``, ``PolicyClassifier``) was read with it: a model of no estimator."""
    from lightgbm_cegb.base import BudgetedEstimator
    from lightgbm_cegb.selection.chosen import estimator_class
    for name in ("_GreedyMiser", "PolicyClassifier", "AdaptBase", "BudgetedEstimator", "_CEGBMixin", "_Tree"):
        assert estimator_class(name) is None, name
    exported = [name for name in lc.__all__ if isinstance(getattr(lc, name), type)
                and issubclass(getattr(lc, name), BudgetedEstimator)]
    assert len(exported) >= 18
    for name in exported:
        assert estimator_class(name) is getattr(lc, name), name

    class GreedyMiserClassifier(lc.GreedyMiserClassifier):  # a user's class of the same name is not the package's
        pass

    assert estimator_class("GreedyMiserClassifier") is lc.GreedyMiserClassifier


def test_artifacts_a_state_does_not_read_are_refused(tmp_path):
    """A review (2026-12-07): a staged model whose stage count was edited down (``stage_units`` shorter) loaded
    without its last stage's file, another model than the one saved; now every file the manifest names must be
    read by the estimator its state describes."""
    model, X = _sibling("StagedAcquisitionClassifier")
    model.save(tmp_path / "m")
    stages = len(model.stage_units_)
    _edit(tmp_path, ("state", "stage_units"), lambda units: units[:-1])
    with pytest.raises(CEGBError, match=rf"manifest\.json': files name \['stage_{stages - 1}'\], which the "
                                        r"StagedAcquisitionClassifier its state describes does not read"):
        lc.StagedAcquisitionClassifier.load(tmp_path / "m")


@pytest.mark.parametrize(("cls", "objective"), [("CEGBClassifier", "cross_entropy"),
                                                ("CEGBRegressor", "cross_entropy"), ("CEGBRegressor", "huber"),
                                                ("CEGBRanker", "binary"), ("CEGBClassifier", "multiclassova")])
def test_cegb_models_of_every_objective_kind_load(tmp_path, cls, objective):
    """A review (2026-12-07): the objective-kind check refused CEGBClassifier(objective="cross_entropy"), which
    LightGBM fits as a classifier (probabilities): the cross-entropy objectives are a kind both classifiers and
    regressors keep."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 4))
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 1) * (objective == "multiclassova")
    fit = {"group": [10] * 30} if cls == "CEGBRanker" else {}
    model = getattr(lc, cls)(objective=objective, n_estimators=5, verbose=-1).fit(X, y, **fit)
    model.save(tmp_path / "m")
    again = getattr(lc, cls).load(tmp_path / "m")
    np.testing.assert_array_equal(again.predict(X), model.predict(X))


def test_a_model_without_its_objective_line_is_not_a_cegb_model(tmp_path):
    """A review (2026-12-07): a foreign regression model with its objective line deleted read as a model of the
    package's own gradients, which the CEGB estimators accepted (a CEGBClassifier then gave scores from -8 to 9 as
    probabilities); a CEGB estimator's save always holds a LightGBM objective."""
    model, X = _sibling("CEGBClassifier")
    model.save(tmp_path / "m")
    text = "\n".join(line for line in _foreign("regression", X).splitlines() if not line.startswith("objective="))
    _rename_as_saved(tmp_path / "m", "booster", text + "\n")
    with pytest.raises(CEGBError, match=r"holds a model of objective 'none', where a CEGBClassifier keeps models of a "
                                        r"classification objective or a cross-entropy objective there"):
        lc.CEGBClassifier.load(tmp_path / "m")


def test_a_ranker_saved_before_margin_cuts_loads_with_share_cuts(tmp_path):
    """Rankers saved before ``cut="margin"`` hold no margins: they load and rank as before (share cuts), and a
    margin cut on them is refused by name."""
    model, X = _sibling("StagedAcquisitionRanker")
    model.set_params(tradeoff=0.5, top_k=2).save(tmp_path / "m")
    manifest = json.loads((tmp_path / "m" / "manifest.json").read_text())
    del manifest["state"]["cut_scale"], manifest["state"]["cut_levels"], manifest["state"]["cut_gaps"]
    (tmp_path / "m" / "manifest.json").write_text(json.dumps(manifest))
    again = lc.StagedAcquisitionRanker.load(tmp_path / "m")
    group = [10] * 30
    np.testing.assert_array_equal(again.predict(X, group=group), model.predict(X, group=group))
    with pytest.raises(CEGBError, match=r"cut: this model was saved before margin cuts"):
        again.set_params(cut="margin").predict(X, group=group)
    again.set_params(cut="share").save(tmp_path / "again")  # a review (2026-12-07): its null margins were refused
    np.testing.assert_array_equal(lc.StagedAcquisitionRanker.load(tmp_path / "again").predict(X, group=group),
                                  model.predict(X, group=group))


def test_a_ranker_saved_with_the_first_margin_format_ranks_as_then(tmp_path):
    """Margins saved before CUT_TRADEOFFS (2026-12-07's first format: each stage's quantiles at 129 levels evenly from
    0 to 1, ``cut_gaps`` of shape (stages, 129), no ``cut_levels``) load, and every last stage reads them as that
    format's rule did, to the bit: the margin at tradeoff t is their interpolation at 1 - t. So does a pickle of a
    model fitted then (its ``cut_gaps_`` of a row per stage, no ``cut_levels_``)."""
    from lightgbm_cegb.methods.cascade import _queries

    model, X = _sibling("StagedAcquisitionRanker")
    model.set_params(cut="margin", top_k=1).save(tmp_path / "m")
    manifest = json.loads((tmp_path / "m" / "manifest.json").read_text())
    stages = len(model.stage_units_)
    rng = np.random.default_rng(0)
    quantiles = np.sort(rng.uniform(0.0, 3.0, (stages, 129)), axis=1)
    manifest["state"]["cut_gaps"] = quantiles.tolist()
    del manifest["state"]["cut_levels"]
    (tmp_path / "m" / "manifest.json").write_text(json.dumps(manifest))
    again = lc.StagedAcquisitionRanker.load(tmp_path / "m")
    group = np.array([10] * 30)
    query = _queries(group, len(X))
    score = again.stages_[0].predict(again._masked(X, 1))
    for tradeoff in (0.003, 0.05, 0.4):
        again.set_params(tradeoff=tradeoff)
        margin = np.interp(1 - tradeoff, np.linspace(0, 1, 129), quantiles[1])
        expected = np.zeros(len(X), dtype=bool)
        for q in range(len(group)):
            rows = np.flatnonzero(query == q)
            best = rows[np.argmax(score[rows])]  # the first of equal scores, as the rule's ties
            expected[rows] = (score[best] - score[rows]) / again.cut_scale_[1] <= margin
            expected[best] = True
        moving = again._moving(1, np.arange(len(X)), query, score, stages - 1)
        np.testing.assert_array_equal(moving, expected)
    pickled = dict(vars(again), cut_gaps_=quantiles)  # a model of then, as pickle saved it
    del pickled["cut_levels_"]
    old = lc.StagedAcquisitionRanker.__new__(lc.StagedAcquisitionRanker)
    old.__setstate__(pickled)
    again.set_params(tradeoff=0.05)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(old)).set_params(tradeoff=0.05).predict(X, group=group),
                                  again.predict(X, group=group))
    before = {k: v for k, v in vars(again).items() if not k.startswith("cut_")}  # pickled before margin cuts
    older = lc.StagedAcquisitionRanker.__new__(lc.StagedAcquisitionRanker)
    older.__setstate__(dict(before, cut="share"))
    assert older.cut_gaps_ is None
    older.save(tmp_path / "older")  # its share cuts saved and loaded
    np.testing.assert_array_equal(lc.StagedAcquisitionRanker.load(tmp_path / "older").predict(X, group=group),
                                  again.set_params(cut="share").predict(X, group=group))
    manifest["state"]["cut_gaps"] = quantiles[:, ::-1].tolist()  # falling: not quantiles
    (tmp_path / "m" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CEGBError, match="cut_gaps quantiles rising along them"):
        lc.StagedAcquisitionRanker.load(tmp_path / "m")


@pytest.mark.parametrize(("key", "value", "message"), [
    ("cut_levels", "not to 1", "cut_levels quantile levels rising from 0 to 1"),
    ("cut_levels", None, "cut_levels should be an array"),
    ("cut_scale", "zeros", "cut_scale should hold numbers > 0"),
    ("cut_gaps", "falling", "cut_gaps quantiles rising along them"),
    ("cut_gaps", "flat", r"cut_gaps should be an array of shape \(\d+, \d+, 20\)"),
])
def test_a_ranker_s_damaged_margins_are_refused_by_name(tmp_path, key, value, message):
    model, _ = _sibling("StagedAcquisitionRanker")
    model.save(tmp_path / "m")
    manifest = json.loads((tmp_path / "m" / "manifest.json").read_text())
    state = manifest["state"]
    if value == "not to 1":
        value = np.linspace(0.0, 0.9, len(state["cut_levels"])).tolist()
    elif value == "zeros":
        value = [0.0] * len(state["cut_scale"])
    elif value == "falling":
        value = np.array(state["cut_gaps"])
        value[-1, 1] = np.linspace(1.0, 0.0, value.shape[-1])
        value = value.tolist()
    elif value == "flat":
        value = np.array(state["cut_gaps"])[0].tolist()
    state[key] = value
    (tmp_path / "m" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CEGBError, match=message):
        lc.StagedAcquisitionRanker.load(tmp_path / "m")
