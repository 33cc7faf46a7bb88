"""Feature groups in the package (patch 0005's cegb_feature_group and group penalties): FeatureCosts takes
them, the accounting charges a row each group once (checked against the Python reference of
tests/references.py on random models and groupings), the per-row cost state, the training callbacks and
lazy acquisition do the same, and the methods that cannot honour groups refuse them."""

from __future__ import annotations

import textwrap

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from conftest import run_python
from hypothesis import given, settings
from references import model_and_data, reference_costs

from lightgbm_cegb import CEGBError, FeatureCosts, LazyPredictor, prediction_cost
from lightgbm_cegb.io.lightgbm_text import with_group_names
from lightgbm_cegb.lgbm import name_groups
from lightgbm_cegb.lgbm.callbacks import record_cost


@settings(max_examples=150, deadline=None, derandomize=True)
@given(model_and_data())
def test_group_costs_match_the_reference(case):
    booster, X, rng = case
    n_features = booster.num_feature()
    lazy = rng.uniform(0, 10, n_features) * (rng.random(n_features) < 0.7)
    split = rng.uniform(0, 1, n_features)
    ids = rng.integers(-1, 3, n_features)
    num_groups = int(ids.max()) + 1
    group_lazy, group_coupled = rng.uniform(0, 50, num_groups), rng.uniform(0, 100, num_groups)
    costs = FeatureCosts(lazy=lazy, split=split, groups=ids, group_lazy=group_lazy, group_coupled=group_coupled)
    report = prediction_cost(booster, X, costs, per_iteration=True)
    acquisition, evaluation, usage, curve = reference_costs(booster, X, lazy, split,
                                                            booster.num_model_per_iteration(), (ids, group_lazy))
    np.testing.assert_allclose(report.acquisition, acquisition, rtol=1e-12)
    np.testing.assert_allclose(report.evaluation, evaluation, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(report.usage, usage[:n_features], rtol=1e-12)
    np.testing.assert_allclose(list(report.group_usage.values()), usage[n_features:], rtol=1e-12)
    np.testing.assert_allclose(report.curve, curve, rtol=1e-12, atol=1e-12)
    used = {int(f) for f in booster.trees_to_dataframe().split_feature.dropna().str.replace("Column_", "")}
    assert report.coupled == pytest.approx(sum(group_coupled[g] for g in {ids[f] for f in used} if g >= 0))


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 6))
    y = X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * X[:, 4] + rng.normal(0, 0.3, 2000)
    return pd.DataFrame(X, columns=["age", "bmi", "hdl", "ldl", "mri_a", "mri_b"]), y


GROUPED = FeatureCosts(lazy={"age": 1.0, "bmi": 1.0}, groups={"blood": ["hdl", "ldl"], "mri": ["mri_a", "mri_b"]},
                       group_lazy={"blood": 20.0, "mri": 200.0}, group_coupled=[5.0, 0.0])


def test_costs_by_name_train_and_read_back(data):
    X, y = data
    costs = GROUPED.align(X)
    assert costs.groups == {"blood": [2, 3], "mri": [4, 5]}
    params = costs.to_params(tradeoff=0.01)
    assert params["cegb_feature_group"] == [-1, -1, 0, 0, 1, 1]
    assert params["cegb_penalty_group_lazy"] == [20.0, 200.0]
    booster = lgb.train({"objective": "regression", "verbose": -1, **params}, lgb.Dataset(X, y), 20)
    back = prediction_cost(booster, X)  # the costs read from the model's parameters
    explicit = prediction_cost(booster, X, GROUPED)  # by name, aligned to the model's feature names
    np.testing.assert_array_equal(back.acquisition, explicit.acquisition)
    assert back.coupled == explicit.coupled and set(back.group_usage) == {"0", "1"}
    assert set(explicit.group_usage) == {"blood", "mri"}
    # rows whose paths test hdl and ldl pay the blood group once (the costly mri group is avoided)
    assert back.usage[2] > 0.5 and back.usage[3] > 0.5 and back.group_usage["1"] == 0.0
    assert back.acquisition.max() == pytest.approx(1 + 1 + 20)
    assert back.to_dict()["group_usage"] == back.group_usage


@pytest.mark.parametrize("groups", [{"blood": [2, 3], "mri": [4, 5]}, {"blood": ["hdl", "ldl"], "mri": [4, "mri_b"]}])
def test_aligned_group_only_costs_know_the_number_of_features(data, groups):
    """Costs with groups only (no per-feature costs) become trainable once aligned: align() gives them the
    number of features, which to_params needs for cegb_feature_group (it used to refuse them even after
    align(), whose advice its message gave)."""
    X, _ = data
    costs = FeatureCosts(groups=groups, group_lazy=[20.0, 200.0])
    aligned = costs.align(X)
    assert aligned.num_features == X.shape[1]
    params = aligned.to_params(tradeoff=0.01)
    assert params["cegb_feature_group"] == [-1, -1, 0, 0, 1, 1]
    assert params["cegb_penalty_group_lazy"] == [20.0, 200.0]
    with pytest.raises(CEGBError, match="align"):
        FeatureCosts(groups={"blood": [2, 3]}, group_lazy=[20.0]).to_params()


def test_group_names_kept_in_the_model_text(data, tmp_path):
    """LightGBM numbers groups; name_groups writes their names into the model text's parameters section (a line
    LightGBM skips without a word and writes back when it saves a model it loaded), where the package reads
    them: prediction_cost with the model's own costs names the groups, from the Booster and from its file."""
    X, y = data
    costs = GROUPED.align(X)
    booster = lgb.train({"objective": "regression", "verbose": -1, **costs.to_params(tradeoff=0.01)},
                        lgb.Dataset(X, y), 20)
    named = name_groups(booster, costs)
    text = named.model_to_string()
    assert text.count("[cegb_group_names=blood,mri: ]\n") == 1
    np.testing.assert_array_equal(named.predict(X), booster.predict(X))
    explicit = prediction_cost(booster, X, costs)
    for model in (named, lgb.Booster(model_str=text)):
        back = prediction_cost(model, X)
        assert set(back.group_usage) == {"blood", "mri"}
        assert back.group_usage == explicit.group_usage and back.coupled == explicit.coupled
        np.testing.assert_array_equal(back.acquisition, explicit.acquisition)
    named.save_model(tmp_path / "named.txt")
    assert set(prediction_cost(str(tmp_path / "named.txt"), X).group_usage) == {"blood", "mri"}
    assert set(prediction_cost(booster, X).group_usage) == {"0", "1"}  # the trained booster as LightGBM wrote it
    # renaming replaces the line; the text without names reads the ids again
    renamed = with_group_names(text, ["a b", "c:d"])
    assert renamed.count("cegb_group_names") == 1
    assert set(prediction_cost(lgb.Booster(model_str=renamed), X).group_usage) == {"a b", "c:d"}
    assert "cegb_group_names" not in with_group_names(text, None)
    # a text without a parameters section (LightGBM writes none for a model it loaded without one) gets one
    bare = text[:text.index("\nparameters:\n")] + text[text.index("end of parameters\n") + 18:]
    assert "\nparameters:" not in bare and bare.endswith("\npandas_categorical:[]\n")
    named_bare = with_group_names(bare, ["blood", "mri"])
    assert named_bare.endswith("parameters:\n[cegb_group_names=blood,mri: ]\nend of parameters\n\n"
                               "pandas_categorical:[]\n")
    assert lgb.Booster(model_str=named_bare).model_to_string().count("[cegb_group_names=blood,mri: ]") == 1
    with pytest.raises(CEGBError, match=r"costs have 1 groups but the booster's cegb_feature_group has ids up to 1"):
        name_groups(booster, FeatureCosts(lazy=[1.0] * 6, groups={"g": [0]}))
    with pytest.raises(CEGBError, match=r"its parameters have no cegb_feature_group"):
        name_groups(lgb.train({"verbose": -1}, lgb.Dataset(X, y), 2), costs)


def test_group_names_line_is_silent_in_stock_and_patched_lightgbm(data, tmp_path):
    """The named model file loads and predicts in stock LightGBM 4.7.0 as in the patched build, and neither
    warns about the names line (stock warns about the cegb_* parameters it does not know, as before)."""
    X, y = data
    costs = GROUPED.align(X)
    booster = lgb.train({"objective": "regression", "verbose": -1, **costs.to_params(tradeoff=0.01)},
                        lgb.Dataset(X, y), 10)
    path = tmp_path / "named.txt"
    name_groups(booster, costs).save_model(path)
    np.save(tmp_path / "X.npy", X.to_numpy())
    code = textwrap.dedent(f"""
        import lightgbm, numpy as np
        model = lightgbm.Booster(model_file={str(path)!r})
        np.save({str(tmp_path / "p.npy")!r}, model.predict(np.load({str(tmp_path / "X.npy")!r})))
        again = lightgbm.Booster(model_str=model.model_to_string())
        print("names kept:", "[cegb_group_names=blood,mri: ]" in again.model_to_string())
        print("version:", lightgbm.__version__)
        """)
    for stock in (True, False):
        result = run_python(code, stock=stock)
        assert result.returncode == 0, result.stderr
        assert ("+cegb" in result.stdout) != stock
        assert "names kept: True" in result.stdout
        assert "cegb_group_names" not in result.stdout + result.stderr
        if stock:  # the stock wheel does know it loaded a model with parameters it does not know
            assert "Ignoring unrecognized parameter 'cegb_feature_group'" in result.stdout + result.stderr
        np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), booster.predict(X))


def test_training_callbacks_charge_groups_as_prediction_cost(data):
    X, y = data
    costs = GROUPED.align(X)
    result = {}
    booster = lgb.train({"objective": "regression", "verbose": -1, **costs.to_params(tradeoff=0.001)},
                        lgb.Dataset(X, y), 15, callbacks=[record_cost(X, costs, result)])
    np.testing.assert_allclose(result["cost"], prediction_cost(booster, X, costs, per_iteration=True).curve,
                               rtol=1e-12)


def test_lazy_acquisition_pays_each_group_once(data):
    X, y = data
    costs = GROUPED.align(X)
    booster = lgb.train({"objective": "regression", "verbose": -1, "num_leaves": 15}, lgb.Dataset(X, y), 10)
    values = X.to_numpy()
    groups = costs.groups
    predictor = LazyPredictor(booster, lambda key, rows: values[np.ix_(rows, groups[key])] if key in groups
                              else values[rows, key], feature_costs=costs, feature_keys="index")
    result = predictor.acquire(np.zeros_like(values), known=np.zeros(values.shape, dtype=bool))
    np.testing.assert_allclose(result.acquisition, prediction_cost(booster, values, costs).acquisition, rtol=1e-12)
    assert result.fetched.shape == values.shape


@pytest.mark.parametrize(("make", "message"), [
    (lambda: FeatureCosts(groups={"a": ["x", "y"], "b": ["y"]}), r"feature 'y' is in two groups, 'a' and 'b'"),
    (lambda: FeatureCosts(groups={"a": [0, 1]}, group_lazy=[1.0, 2.0]),
     r"group_lazy costs should have one value per group \(1\), got shape \(2,\)"),
    (lambda: FeatureCosts(group_coupled=[1.0]), r"group_coupled costs need groups"),
    (lambda: FeatureCosts(groups={"a": [0]}, group_lazy={"b": 1.0}), r"group_lazy costs name unknown groups \['b'\]"),
    (lambda: FeatureCosts(groups={"a": [0]}, group_lazy=[-1.0]),
     r"group_lazy costs should be finite and >= 0, got -1.0 for group 0"),
    (lambda: FeatureCosts(groups=[0, -2, 1]), r"ids should be >= 0, or -1 for no group, got -2 for feature 1"),
    (lambda: FeatureCosts(groups=[0.5, 1.0]), r"one integer group id per feature"),
    (lambda: FeatureCosts(lazy=[1, 2, 3], groups=[0, 0]), r"should give the same number of features, got \[2, 3\]"),
    (lambda: FeatureCosts(groups={"a": ["zz"]}).align(["x", "y"]), r"groups name unknown features \['zz'\]"),
    (lambda: FeatureCosts(groups={"a": [0]}, group_lazy=[1.0]).to_params(),
     r"groups by column index need the number of features"),
])
def test_bad_groups(make, message):
    with pytest.raises(CEGBError, match=message):
        make()
