"""FeatureCosts: construction, alignment by name, LightGBM parameters, the manifests' plain lists; resolve_costs and
its policy for no costs (UNPRICED). The cost file format: tests/datasets/test_cost_files.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest

from lightgbm_cegb import CEGBError, FeatureCosts
from lightgbm_cegb.core.costs import (
    UNPRICED,
    decode_group_names,
    encode_group_names,
    lightgbm_feature_names,
    resolve_costs,
)


def test_by_name_aligned_to_names_frame_and_dataset():
    costs = FeatureCosts(lazy={"b": 2.0, "c": 3.0}, coupled={"a": 1.0})
    names = ["a", "b", "c"]
    frame = pd.DataFrame(np.zeros((3, 3)), columns=names)
    for features in (names, frame, lgb.Dataset(frame), lgb.Dataset(np.zeros((3, 3)), feature_name=names)):
        aligned = costs.align(features)
        np.testing.assert_array_equal(aligned.lazy, [0.0, 2.0, 3.0])
        np.testing.assert_array_equal(aligned.coupled, [1.0, 0.0, 0.0])


def test_params_and_config():
    costs = FeatureCosts(lazy=[1, 2.5], coupled=[0, 7], split=0.25)
    assert costs.to_params(tradeoff=0.1) == {"cegb_penalty_feature_lazy": [1.0, 2.5],
                                             "cegb_penalty_feature_coupled": [0.0, 7.0],
                                             "cegb_penalty_split": 0.25, "cegb_tradeoff": 0.1}
    assert costs.to_config() == ("cegb_penalty_feature_lazy = 1.0,2.5\ncegb_penalty_feature_coupled = 0.0,7.0\n"
                                 "cegb_penalty_split = 0.25\n")
    back = FeatureCosts.from_params({k: ",".join(map(str, v)) if isinstance(v, list) else str(v)
                                     for k, v in costs.to_params().items()})
    assert back.to_params() == costs.to_params()
    assert FeatureCosts.from_params({"cegb_penalty_feature_lazy": ""}) is None


def test_per_feature_split_costs_are_training_parameters():
    """Patch 0005 trains with per-feature split costs; in a model's parameters they add to the scalar one."""
    costs = FeatureCosts(lazy=[1, 2], split=[0.5, 0.0])
    assert costs.to_params() == {"cegb_penalty_feature_lazy": [1.0, 2.0], "cegb_penalty_feature_split": [0.5, 0.0]}
    back = FeatureCosts.from_params({"cegb_penalty_split": "0.25", "cegb_penalty_feature_split": "0.5,0"})
    np.testing.assert_array_equal(back.split, [0.75, 0.25])
    assert FeatureCosts.from_params({"cegb_penalty_feature_split": "0,0"}) is None
    grouped = FeatureCosts.from_params({"cegb_feature_group": "0,-1,0", "cegb_penalty_group_lazy": "2.5"})
    assert grouped.groups == {"0": [0, 2]} and grouped.to_params() == {
        "cegb_feature_group": [0, -1, 0], "cegb_penalty_group_lazy": [2.5]}


@pytest.mark.parametrize(("make", "message"), [
    (lambda: FeatureCosts(lazy=[1.0, -1.0]), r"lazy costs should be finite and >= 0, got -1\.0 for feature 1"),
    (lambda: FeatureCosts(coupled=[np.nan]), r"coupled costs should be finite and >= 0, got nan for feature 0"),
    (lambda: FeatureCosts(lazy={"a": np.inf}), r"lazy costs should be finite and >= 0, got inf for feature 'a'"),
    # issue 48 (13): values that are not numbers were bare ValueErrors/TypeErrors naming no cost
    (lambda: FeatureCosts(lazy={"age": "1.5€"}), r"lazy \('age'\) costs should be numbers, got '1.5€' \(could not "
                                                 r"convert string to float"),
    (lambda: FeatureCosts(lazy={"age": None}), r"lazy \('age'\) costs should be numbers, got None"),
    (lambda: FeatureCosts(lazy=["1", "n/a", "3"]), r"lazy costs should be numbers, got \['1', 'n/a', '3'\]"),
    (lambda: FeatureCosts(lazy=[1j, 2]), r"lazy costs should be numbers, got \[1j, 2\]"),
    (lambda: FeatureCosts(lazy={1, 2}), r"lazy costs should be numbers, got \{1, 2\}"),
    (lambda: FeatureCosts(split="a"), r"split costs should be numbers, got 'a'"),
    (lambda: FeatureCosts(lazy=[1, 2], groups={"g": [0, 1]}, group_lazy={"g": "x"}),
     r"group_lazy costs should be numbers, got \['x'\]"),
    (lambda: FeatureCosts(split=-0.5), r"split costs should be finite and >= 0, got -0\.5"),
    (lambda: FeatureCosts(lazy=[[1.0]]), r"lazy should be one value per feature, got an array of shape \(1, 1\)"),
    (lambda: FeatureCosts(lazy=[1, 2], coupled=[1, 2, 3]), r"should give the same number of features, got \[2, 3\]"),
    (lambda: FeatureCosts(lazy=[1, 2]).align(["a", "b", "c"]), r"lazy costs have 2 values but there are 3 features"),
    (lambda: FeatureCosts(lazy={"z": 1}).align(["a", "b"]), r"lazy costs name unknown features \['z'\]"),
    (lambda: FeatureCosts(lazy={"a": 1}).align(["a", "a"]), r"feature names should be unique, got duplicates \['a'\]"),
    (lambda: FeatureCosts(lazy={"a": 1}).to_params(), r"costs are given by feature name: call \.align"),
])
def test_bad_input(make, message):
    with pytest.raises(CEGBError, match=message):
        make()


def test_costs_round_trip_through_dicts():
    """to_dict / from_dict (the models' manifests), and the earlier group_of form ADAPT manifests held."""
    costs = resolve_costs(FeatureCosts(lazy=[1.0, 2.0, 3.0], coupled=[0.5, 0.0, 0.0], split=0.25,
                                       groups={"g": [1, 2]}, group_lazy=[4.0], group_coupled=[1.0], tree=0.1), 3,
                          unpriced="refuse")
    again = FeatureCosts.from_dict(json.loads(json.dumps(costs.to_dict(3))))
    for a, b in zip(again.arrays(3) + again.group_arrays(3), costs.arrays(3) + costs.group_arrays(3)):
        np.testing.assert_array_equal(a, b)
    assert again.tree == 0.1 and again.groups == {"g": [1, 2]}
    old = {"lazy": [1.0, 2.0, 3.0], "coupled": [0.5, 0.0, 0.0], "split": [0.25] * 3, "group_of": [-1, 0, 0],
           "group_lazy": [4.0], "group_coupled": [1.0], "tree": 0.1}
    for a, b in zip(FeatureCosts.from_dict(old).group_arrays(3), costs.group_arrays(3)):
        np.testing.assert_array_equal(a, b)
    plain = FeatureCosts.from_dict({**old, "group_of": [-1, -1, -1]})
    assert plain.groups is None


def test_group_ids_are_labels_kept_sparse():
    """Groups given as ids keep only the ids that occur; a cost sequence has one value per id (LightGBM's
    cegb_penalty_group_*), a mapping may name an id no feature has."""
    costs = FeatureCosts(lazy=[1.0, 2.0, 3.0, 4.0], groups=[5, -1, 5, 0], group_lazy=[1.0, 9.0, 9.0, 9.0, 9.0, 7.0],
                         group_coupled={"5": 2.0, "3": 8.0})
    assert costs.groups == {"0": [3], "5": [0, 2]}
    group_of, group_lazy, group_coupled = costs.group_arrays(4)
    np.testing.assert_array_equal(group_of, [1, -1, 1, 0])
    np.testing.assert_array_equal(group_lazy, [1.0, 7.0])
    np.testing.assert_array_equal(group_coupled, [0.0, 2.0])
    assert FeatureCosts(**costs.fields()) == costs
    with pytest.raises(CEGBError, match=r"group_lazy costs should have one value per group id 0\.\.5 \(6 values, "
                                         r"the largest id \+ 1\), got shape \(2,\)"):
        FeatureCosts(groups=[5, -1, 5, 0], group_lazy=[1.0, 2.0])
    with pytest.raises(CEGBError, match=r"group_coupled costs should be finite and >= 0, got -1\.0 for group 1"):
        FeatureCosts(groups=[0, 2], group_coupled=[0.0, -1.0, 0.0])
    with pytest.raises(CEGBError, match=r"group_lazy costs name unknown groups \['6'\]"):
        FeatureCosts(groups=[5, 0], group_lazy={"6": 1.0})


def test_huge_group_id_in_a_model_file_is_a_label_not_a_size(tmp_path):
    """A model file whose cegb_feature_group holds the id 2e9 made prediction_cost (costs read from the model)
    and `lightgbm-cegb cost` allocate an entry per id up to it (1e7: 68 s and 3.45 GB; 2e9: killed)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    params = {"objective": "binary", "verbose": -1, "num_leaves": 4, "cegb_tradeoff": 0.01,
              "cegb_penalty_feature_lazy": [1, 2, 3], "cegb_feature_group": [0, 1, -1]}
    text = lgb.train(params, lgb.Dataset(X, (X[:, 0] > 0).astype(int)), 3).model_to_string()
    assert "[cegb_feature_group: 0,1,-1]" in text
    model = tmp_path / "model.txt"
    model.write_text(text.replace("[cegb_feature_group: 0,1,-1]", "[cegb_feature_group: 0,2000000000,-1]"))
    np.savetxt(tmp_path / "data.csv", np.c_[np.zeros(len(X)), X], delimiter=",")
    np.save(tmp_path / "X.npy", X)
    code = (f"import numpy as np; from lightgbm_cegb import prediction_cost; "
            f"r = prediction_cost({str(model)!r}, np.load({str(tmp_path / 'X.npy')!r})); "
            "print(sorted(r.group_usage), r.mean)")
    cli = str(Path(sys.executable).parent / "lightgbm-cegb")
    outputs = []
    for command in ([sys.executable, "-c", code], [cli, "cost", str(model), str(tmp_path / "data.csv")]):
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{command[1]}: timed out after 120 s")
        assert proc.returncode == 0, proc.stderr[-2000:]
        outputs.append(proc.stdout)
    assert outputs[0].startswith("['0', '2000000000']"), outputs[0]
    assert "rows                     200" in outputs[1], outputs[1]
    # the same ids through the manifests' earlier group_of form (ADAPT/CSTC load)
    with pytest.raises(CEGBError, match=r"group_lazy costs should have one value per group id 0\.\.2000000000"):
        FeatureCosts.from_dict({"lazy": [1.0] * 3, "coupled": [0.0] * 3, "split": [0.0] * 3, "tree": 0.0,
                                "group_of": [0, 2_000_000_000, -1], "group_lazy": [1.0, 2.0], "group_coupled": [0, 0]})


def test_config_writes_group_ids_as_integers():
    """LightGBM refuses cegb_feature_group = -1.0,0.0 (patch 0007 reads the ids strictly): to_config wrote that."""
    config = FeatureCosts(lazy=[1, 0, 0], groups={"g": [1, 2]}, group_lazy=[5]).to_config(tradeoff=0.1)
    assert config == ("cegb_penalty_feature_lazy = 1.0,0.0,0.0\ncegb_feature_group = -1,0,0\n"
                      "cegb_penalty_group_lazy = 5.0\ncegb_tradeoff = 0.1\n")


def test_group_names_read_from_params():
    """cegb_group_names names the ids of cegb_feature_group (the model text's line, read as that parameter)."""
    names = ["wild", "soil, survey: 40 columns [2]", "ünïcode"]
    encoded = encode_group_names(names)
    assert "," not in encoded.replace(",", "", 2) and ":" not in encoded and " " not in encoded
    assert decode_group_names(encoded) == names and decode_group_names(names) == names
    params = {"cegb_penalty_feature_lazy": "1,1,1,1", "cegb_feature_group": "2,-1,0,0",
              "cegb_penalty_group_lazy": "5,6,7"}
    assert FeatureCosts.from_params(params).groups == {"0": [2, 3], "2": [0]}
    costs = FeatureCosts.from_params({**params, "cegb_group_names": encoded})
    assert costs.groups == {"wild": [2, 3], "ünïcode": [0]}
    np.testing.assert_array_equal(costs.group_arrays(4)[1], [5.0, 7.0])
    assert costs.to_params()["cegb_feature_group"] == [1, -1, 0, 0]
    assert FeatureCosts.from_params({**params, "cegb_group_names": names}).groups == costs.groups
    with pytest.raises(CEGBError, match=r"cegb_group_names should name every group id 0..2 \(at least 3 names\), got "
                                        r"2 names: \['a', 'b'\]"):
        FeatureCosts.from_params({**params, "cegb_group_names": "a,b"})
    with pytest.raises(CEGBError, match=r"cegb_group_names should give each group its own name, got \['a'\] for "
                                        r"several groups"):
        FeatureCosts.from_params({**params, "cegb_group_names": "a,b,a"})


def test_lightgbm_feature_names():
    assert lightgbm_feature_names(["a", "blood test", "x_1"]) == ["a", "blood_test", "x_1"]
    for bad in ("a:b", "x[0]", 'q"', "a,b", "{", "tab\there", ""):
        with pytest.raises(CEGBError, match=r"feature names: a LightGBM model holds names without the characters"):
            lightgbm_feature_names(["ok", bad])
    with pytest.raises(CEGBError, match=r"LightGBM writes spaces as underscores, which makes names the same: "
                                        r"\['a_b'\]"):
        lightgbm_feature_names(["a b", "a_b"])


def test_units_are_the_purchases_with_their_prices():
    """FeatureCosts.units: each group with a member (whole), then each ungrouped feature; lazy prices, or coupled ones
    when nothing has a lazy cost (the cheap-subset baseline's and the adaptive acquisition's units)."""
    costs = FeatureCosts(lazy=[1.0, 2.0, 0.5, 0.5, 3.0], groups={"pair": [2, 3], "none": [], "one": [4]},
                         group_lazy=[2.0, 9.0, 1.0])
    assert costs.units(5) == [("pair", (2, 3), 3.0), ("one", (4,), 4.0), (None, (0,), 1.0), (None, (1,), 2.0)]
    coupled = FeatureCosts(coupled=[5.0, 1.0, 2.0], groups={"g": [0, 2]}, group_coupled=[4.0])
    assert coupled.units(3) == [("g", (0, 2), 11.0), (None, (1,), 1.0)]


def test_dicts_that_are_not_costs_are_named():
    """Issue 48 (13): from_dict of a mapping without its keys was a KeyError on 'group_of'."""
    for values, got in (({"lazy": [1.0, 2.0]}, r"\['lazy'\]"), (None, "NoneType"), ([1, 2], "list")):
        with pytest.raises(CEGBError, match=r"FeatureCosts.from_dict: expected the mapping FeatureCosts.to_dict "
                                            rf"writes \(the keys lazy, coupled, split, tree, .*\), got {got}"):
            FeatureCosts.from_dict(values)
    costs = FeatureCosts(lazy=[1, 2], groups={"g": [0, 1]}, group_lazy=[3], tree=0.5)
    assert FeatureCosts.from_dict(costs.to_dict(2)).to_dict(2) == costs.to_dict(2)


def test_cost_parameters_that_are_not_numbers_are_named(tmp_path):
    """Issue 48 (13): from_params read "1,x" or a trailing comma with a bare ValueError; a directory given as a
    model file "does not exist"."""
    from lightgbm_cegb import prediction_cost
    for params, message in (({"cegb_penalty_feature_lazy": "1,x"}, r"cegb_penalty_feature_lazy costs should be "
                                                                    r"numbers, got \['1', 'x'\]"),
                            ({"cegb_penalty_feature_lazy": "1,2,"}, r"cegb_penalty_feature_lazy costs should be "
                                                                    r"numbers, got \['1', '2', ''\]"),
                            ({"cegb_penalty_split": [1, 2]}, r"cegb_penalty_split should be one number, got \[1, 2\]")):
        with pytest.raises(CEGBError, match=message):
            FeatureCosts.from_params(params)
    costs = FeatureCosts.from_params({"cegb_penalty_feature_lazy": "1,2", "cegb_penalty_split": "0.5"})
    np.testing.assert_array_equal(costs.arrays(2)[0], [1.0, 2.0])
    np.testing.assert_array_equal(costs.arrays(2)[2], [0.5, 0.5])
    with pytest.raises(CEGBError, match=r"model file '.*' is a directory, not a file"):
        prediction_cost(str(tmp_path), np.zeros((1, 1)), [1.0])


def test_the_one_resolver():
    """resolve_costs: costs by column or by name (from a list, a DataFrame or a lightgbm Dataset); the errors name
    what was given."""
    import lightgbm as lgb
    import pandas as pd

    frame = pd.DataFrame(np.zeros((4, 3)), columns=["a", "b c", "d"])
    by_name = {"b c": 2.0, "d": 5.0}
    for names in (["a", "b c", "d"], frame, lgb.Dataset(frame, np.zeros(4)),
                  lgb.Dataset(frame.to_numpy(), np.zeros(4), feature_name=["a", "b c", "d"])):
        np.testing.assert_array_equal(resolve_costs(by_name, 3, names, unpriced="refuse").lazy, [0.0, 2.0, 5.0])
    np.testing.assert_array_equal(resolve_costs([1.0, 2.0, 3.0], 3, unpriced="refuse").lazy, [1.0, 2.0, 3.0])
    with pytest.raises(CEGBError, match="costs are given by feature name but the model has no feature names"):
        resolve_costs(by_name, 3, unpriced="refuse")
    with pytest.raises(CEGBError, match="feature_costs name features, but X has no column names"):
        resolve_costs(by_name, 3, unpriced="none", given_as="feature_costs")
    with pytest.raises(CEGBError, match="costs are for 2 features but the model has 3"):
        resolve_costs([1.0, 2.0], 3, unpriced="refuse")
    with pytest.raises(CEGBError, match="feature_costs: the costs are for 2 features but X has 3 columns"):
        resolve_costs([1.0, 2.0], 3, unpriced="none", given_as="feature_costs")
    with pytest.raises(CEGBError, match="costs name features, but train's X has no column names"):
        resolve_costs(by_name, 3, unpriced="unit", given_as="costs", rows="train's X")
    with pytest.raises(CEGBError, match="costs: the costs are for 2 features but train's X has 3 columns"):
        resolve_costs([1.0, 2.0], 3, unpriced="unit", given_as="costs", rows="train's X")


@pytest.mark.parametrize(("unpriced", "own", "without"), [
    ("refuse", [0.0, 4.0, 0.0], None),            # a model without costs is refused
    ("zero", [0.0, 4.0, 0.0], [0.0, 0.0, 0.0]),   # a model without costs is free
    ("unit", [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]),   # the model's params are not read
    ("none", None, None),                          # no costs at all
])
def test_each_row_of_the_policy_for_no_costs(unpriced, own, without):
    """costs=None means the row ``unpriced`` of UNPRICED: the model's own cegb_* parameters (``refuse``, ``zero``)
    when they hold a cost, else a refusal, every feature at 0 or 1, or None; given costs are the same in every row."""
    params = FeatureCosts(lazy=[0.0, 4.0, 0.0]).to_params(tradeoff=1.0)
    for model_params, expected in ((params, own), ({}, without)):
        if unpriced == "refuse" and expected is None:
            with pytest.raises(CEGBError, match=r"costs is None and the model was not trained with cegb_\* "
                                                r"parameters: pass costs=FeatureCosts"):
                resolve_costs(None, 3, params=model_params, unpriced=unpriced)
        elif expected is None:
            assert resolve_costs(None, 3, params=model_params, unpriced=unpriced) is None
        else:
            resolved = resolve_costs(None, 3, params=model_params, unpriced=unpriced)
            np.testing.assert_array_equal(resolved.arrays(3)[0], expected)
            assert resolved.num_features == 3
    np.testing.assert_array_equal(resolve_costs([2.0, 0.0, 1.0], 3, params=params, unpriced=unpriced).lazy,
                                  [2.0, 0.0, 1.0])


def test_the_policy_is_one_table_every_caller_names():
    """UNPRICED has one row per case; resolve_costs takes no default (each caller states its case) and refuses a
    name the table does not have."""
    assert sorted(UNPRICED) == ["none", "refuse", "unit", "zero"]
    assert all(row.used_by for row in UNPRICED.values())
    with pytest.raises(TypeError, match="unpriced"):
        resolve_costs(None, 3)
    with pytest.raises(CEGBError, match=r"unpriced should be one of \['none', 'refuse', 'unit', 'zero'\], got "
                                        r"'params'"):
        resolve_costs(None, 3, unpriced="params")


def test_no_entry_point_resolves_costs_on_its_own():
    """Outside core.costs, costs reach an aligned FeatureCosts only through resolve_costs: no module aligns them
    (``.align(``) or decides a default (``FeatureCosts(lazy=np.ones(...))``, a zero ``FeatureCosts()``) itself: a
    default is a row of UNPRICED. (The CUBE loader's costs are data, not a default.)"""
    import re
    from pathlib import Path

    package = Path(__file__).resolve().parents[2] / "lightgbm_cegb"
    found = [f"{path.relative_to(package)}:{number}: {line.strip()}"
             for path in package.rglob("*.py") if path.name != "costs.py"
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if re.search(r"\.align\(|FeatureCosts\((lazy=)?np\.(ones|zeros|full)|FeatureCosts\(\)", line)
             and "datasets/cube.py" not in str(path)]
    assert found == []


def test_an_unknown_name_error_lists_every_known_name_or_the_closest():
    """Issue 61 (17): an unknown-name error listed only the first 10 known names: all of them now (up to 20), else
    how many there are and the closest to each unknown one."""
    names = [f"f{i}" for i in range(15)]
    with pytest.raises(CEGBError, match=re.escape(f"lazy costs name unknown features ['x']; the 15 features are "
                                                  f"{names}")):
        FeatureCosts(lazy={"x": 1.0}).align(names)
    names = [f"pixel_{i}" for i in range(300)]
    with pytest.raises(CEGBError, match=r"lazy costs name unknown features \['pixel_300', 'zzz'\]; 300 features are "
                                        r"known; the closest: 'pixel_300' -> \['pixel_30', .*\]; 'zzz' -> \[\]"):
        FeatureCosts(lazy={"pixel_300": 1.0, "zzz": 2.0}).align(names)
    with pytest.raises(CEGBError, match=r"groups name unknown features \['pixl_7'\]; 300 features are known; the "
                                        r"closest: 'pixl_7' -> \['pixel_7'"):
        FeatureCosts(groups={"g": ["pixl_7"]}).align(names)
