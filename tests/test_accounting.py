"""Routing and prediction cost against independent references: LightGBM's own pred_leaf / raw scores,
scikit-learn's apply, and costs rebuilt from the leaves' paths in the model's JSON dump."""

from __future__ import annotations

import json
import warnings

import dask.array as dd
import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from references import model_and_data, reference_costs
from scipy import sparse
from sklearn.ensemble import (
    ExtraTreesClassifier,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestRegressor,
)
from sklearn.tree import DecisionTreeClassifier

from lightgbm_cegb import CEGBError, FeatureCosts, prediction_cost, to_forest
from lightgbm_cegb.accounting import prefix_costs
from lightgbm_cegb.io.lightgbm_text import read_text


@settings(max_examples=300, deadline=None, derandomize=True)
@given(model_and_data())
def test_leaves_and_raw_scores_match_lightgbm(case):
    booster, X, _ = case
    forest = to_forest(booster)
    leaves = forest.apply(X)
    np.testing.assert_array_equal(leaves, booster.predict(X, pred_leaf=True).reshape(len(X), -1))
    raw = booster.predict(X, raw_score=True).reshape(len(X), -1)
    if forest.linear is None:  # the same operations as LightGBM's: the same bits
        np.testing.assert_array_equal(forest.raw_score(X, leaves), raw)
    else:
        np.testing.assert_allclose(forest.raw_score(X, leaves), raw, rtol=1e-9, atol=1e-9)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(model_and_data(), st.sampled_from([0.0, 0.25]), st.sampled_from([0.0, 0.7]))
def test_costs_match_reference(case, split_cost, tree_cost):
    booster, X, rng = case
    n_features = booster.num_feature()
    lazy = rng.uniform(0, 10, n_features)
    split = rng.uniform(0, 1, n_features) if split_cost else np.zeros(n_features)
    report = prediction_cost(booster, X, FeatureCosts(lazy=lazy, split=split, tree=tree_cost), per_iteration=True)
    tpi = booster.num_model_per_iteration()
    acquisition, evaluation, usage, curve = reference_costs(booster, X, lazy, split, tpi, tree=tree_cost)
    np.testing.assert_allclose(report.acquisition, acquisition, rtol=1e-12)
    np.testing.assert_allclose(report.evaluation, evaluation, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(report.usage, usage, rtol=1e-12)
    np.testing.assert_allclose(report.curve, curve, rtol=1e-12, atol=1e-12)
    assert report.curve[-1] == pytest.approx(report.mean, rel=1e-12, abs=1e-12)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(model_and_data(), st.sampled_from([0.0, 0.25]), st.sampled_from([0.0, 0.7]), st.booleans(), st.data())
def test_prefix_costs_equal_each_prefix_alone(case, split_cost, tree_cost, grouped, data):
    """One pass for several prefixes (what a sweep measures of a model's prefix points) gives each prefix's report
    and LightGBM's raw scores to the bit."""
    booster, X, rng = case
    n_features, iterations = booster.num_feature(), booster.current_iteration()
    costs = FeatureCosts(lazy=rng.uniform(0, 10, n_features),
                         split=rng.uniform(0, 1, n_features) if split_cost else 0.0, tree=tree_cost,
                         groups={"g": [0, n_features - 1]} if grouped and n_features > 1 else None,
                         group_lazy={"g": 3.0} if grouped and n_features > 1 else None)
    ks = sorted(data.draw(st.sets(st.integers(1, iterations), min_size=1)))
    linear = to_forest(booster).linear is not None
    done = prefix_costs(booster, X, costs, ks, raw=True)
    if linear:  # their raw scores read the leaves' features: each prefix alone
        assert done is None
        done = prefix_costs(booster, X, costs, ks)
    reports, raw = done
    assert len(reports) == len(ks) and (raw is None) == linear
    for j, k in enumerate(ks):
        alone = prediction_cost(booster, X, costs, num_iteration=k)
        for field in ("acquisition", "evaluation", "usage"):
            np.testing.assert_array_equal(getattr(reports[j], field), getattr(alone, field))
        assert reports[j].coupled == alone.coupled and reports[j].group_usage == alone.group_usage
        if not linear:
            np.testing.assert_array_equal(raw[j], booster.predict(X, raw_score=True, num_iteration=k).reshape(len(X),
                                                                                                           -1))


def test_prefix_costs_read_every_kind_of_rows_and_refuse_bad_prefixes():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    X[rng.random(X.shape) < 0.3] = 0.0
    booster = lgb.train({"objective": "multiclass", "num_class": 3, "verbose": -1, "num_leaves": 5},
                        lgb.Dataset(X, rng.integers(0, 3, 300)), 8)
    costs = FeatureCosts(lazy=[1.0, 2.0, 3.0, 4.0], split=0.5)
    expected, raw = prefix_costs(booster, X, costs, [2, 5, 8], raw=True)
    for rows in (sparse.csr_matrix(X), sparse.csc_matrix(X), pd.DataFrame(X), X.astype(np.float32)):
        got, got_raw = prefix_costs(booster, rows, costs, [2, 5, 8], raw=True)
        np.testing.assert_array_equal(got_raw, raw)
        for a, b in zip(got, expected):
            np.testing.assert_array_equal(a.per_instance, b.per_instance)
    forest = to_forest(booster)
    lazy, split = np.ones(4), np.zeros(4)
    for ends in ([], [3, 3], [5, 2], [-1], [forest.num_trees + 1], [1.5], np.array([5, 2], dtype=np.uint64)):
        with pytest.raises(CEGBError, match=r"ends should be increasing tree counts within 0\.\.24"):
            forest.prefix_cost(X, lazy, split, ends)
    assert prefix_costs(booster, dd.from_array(X, chunks=(100, 4)), costs, [2]) is None  # each prefix alone
    with pytest.raises(CEGBError, match=r"costs are for 2 features but the model has 4"):
        prefix_costs(booster, X, FeatureCosts(lazy=[1.0, 2.0]), [2])


@pytest.mark.parametrize(("make", "nan"), [
    (lambda: DecisionTreeClassifier(max_depth=6, random_state=0), True),
    (lambda: RandomForestRegressor(n_estimators=7, min_samples_leaf=3, random_state=0), True),
    (lambda: ExtraTreesClassifier(n_estimators=5, random_state=0), True),
    (lambda: GradientBoostingClassifier(n_estimators=6, random_state=0), False),
    (lambda: GradientBoostingRegressor(n_estimators=6, max_depth=2, random_state=0), False),
], ids=["tree", "rf", "extratrees", "gb-multiclass", "gb-regressor"])
def test_sklearn_models(make, nan):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 5))
    y = (X[:, 0] + X[:, 1] > 0).astype(int) + (X[:, 2] > 1)
    if nan:  # models that learn where missing values go
        X[rng.random(X.shape) < 0.05] = np.nan
    model = make().fit(X, y)
    leaves = to_forest(model).apply(X)
    trees = ([model] if not hasattr(model, "estimators_")
             else list(np.asarray(model.estimators_).ravel()))
    for t, tree in enumerate(trees):
        expected_nodes = tree.apply(X.astype(np.float32))
        leaf_nodes = np.flatnonzero(tree.tree_.children_left == -1)
        np.testing.assert_array_equal(leaf_nodes[leaves[:, t]], expected_nodes)
    lazy = rng.uniform(0, 5, 5)
    report = prediction_cost(model, X, FeatureCosts(lazy=lazy, split=1.0))
    for i in range(0, 400, 37):
        used, nodes = set(), 0
        for tree in trees:
            path = tree.decision_path(X[i:i + 1].astype(np.float32)).indices
            internal = [k for k in path if tree.tree_.children_left[k] != -1]
            used |= {int(tree.tree_.feature[k]) for k in internal}
            nodes += len(internal)
        assert report.acquisition[i] == pytest.approx(sum(lazy[f] for f in used), rel=1e-12)
        assert report.evaluation[i] == nodes


def test_single_leaf_trees_and_num_iteration():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    flat = lgb.train({"objective": "regression", "min_data_in_leaf": 1000, "verbose": -1}, lgb.Dataset(X, X[:, 0]), 3)
    assert to_forest(flat).node_offset.tolist() == [0] * (flat.num_trees() + 1)  # one-leaf trees
    report = prediction_cost(flat, X, FeatureCosts(lazy=[1, 2, 3], coupled=[1, 1, 1], split=1.0))
    assert report.mean == 0.0 and report.coupled == 0.0 and not report.usage.any()

    stump = lgb.train({"objective": "regression", "num_leaves": 2, "verbose": -1}, lgb.Dataset(X, X[:, 0]), 5)
    costs = FeatureCosts(lazy=[5.0, 1.0, 1.0], coupled=[7.0, 1.0, 1.0], split=0.5)
    report = prediction_cost(stump, X, costs, per_iteration=True)
    np.testing.assert_array_equal(report.usage, [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(report.per_instance, np.full(200, 5.0 + 5 * 0.5))
    np.testing.assert_allclose(report.curve, 5.0 + 0.5 * np.arange(1, 6))
    assert report.coupled == 7.0
    assert prediction_cost(stump, X, costs, num_iteration=2).mean == 6.0


def test_costs_read_back_from_the_model(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 4))
    costs = FeatureCosts(lazy=[1.0, 2.0, 3.0, 4.0], coupled=[0.0, 0.0, 1.0, 0.0], split=0.01)
    booster = lgb.train({"objective": "regression", "verbose": -1, **costs.to_params(tradeoff=0.001)},
                        lgb.Dataset(X, X[:, 0] + X[:, 2]), 10)
    path = tmp_path / "model.txt"
    booster.save_model(path)
    expected = prediction_cost(booster, X, costs)
    for model in (booster, path, str(path), lgb.Booster(model_file=str(path))):
        report = prediction_cost(model, X)
        np.testing.assert_array_equal(report.per_instance, expected.per_instance)
    json.dumps(expected.to_dict())


def test_best_iteration_is_the_default(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    y = X[:, 0] + rng.normal(0, 2.0, 600)
    booster = lgb.train({"objective": "regression", "verbose": -1, "learning_rate": 0.5}, lgb.Dataset(X[:400], y[:400]),
                        100, valid_sets=[lgb.Dataset(X[400:], y[400:])],
                        callbacks=[lgb.early_stopping(3, verbose=False)], keep_training_booster=True)
    assert 0 < booster.best_iteration < booster.current_iteration()
    costs = FeatureCosts(split=1.0)
    assert prediction_cost(booster, X, costs).mean == prediction_cost(
        booster, X, costs, num_iteration=booster.best_iteration).mean


@pytest.mark.parametrize(("costs", "X_shape", "message"), [
    (FeatureCosts(lazy=[1.0, 2.0]), (5, 3), r"costs are for 2 features but the model has 3"),
    (FeatureCosts(lazy=[1.0, 2.0, 3.0]), (5, 4), r"X has 4 features but the model has 3"),
    (None, (5, 3), r"costs is None and the model was not trained with cegb_\* parameters"),
    (FeatureCosts(lazy={"nope": 1.0}), (5, 3), r"lazy costs name unknown features \['nope'\]"),
])
def test_bad_prediction_cost_input(costs, X_shape, message):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    booster = lgb.train({"objective": "regression", "verbose": -1}, lgb.Dataset(X, X[:, 0]), 2)
    with pytest.raises(CEGBError, match=message):
        prediction_cost(booster, np.zeros(X_shape), costs)


def test_unknown_decision_type_is_refused():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    text = lgb.train({"objective": "regression", "verbose": -1}, lgb.Dataset(X, X[:, 0]), 1).model_to_string()
    lines = [line for line in text.splitlines() if not line.startswith("tree_sizes=")]  # optional; sizes change
    i = next(k for k, line in enumerate(lines) if line.startswith("decision_type="))
    lines[i] = "decision_type=" + " ".join(["64"] * len(lines[i].split("=")[1].split()))
    with pytest.raises(CEGBError, match=r"unknown decision_type 64"):
        read_text("\n".join(lines))


def test_pipeline_whose_last_step_is_a_model():
    import pandas as pd
    from sklearn.ensemble import RandomForestClassifier as Forest
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(400, 4)), columns=["age", "bmi", "blood test", "mri"])
    X.iloc[rng.random(400) < 0.1, 1] = np.nan
    y = (X["age"] + X["mri"].fillna(0) > 0).astype(int)
    costs = {"age": 1.0, "bmi": 2.0, "blood test": 20.0, "mri": 500.0}
    by_position = [1.0, 2.0, 20.0, 500.0]
    for model in (lgb.LGBMClassifier(n_estimators=10, verbose=-1), Forest(n_estimators=5, random_state=0)):
        pipeline = make_pipeline(SimpleImputer(), StandardScaler(), model).set_output(transform="pandas").fit(X, y)
        inner = pipeline[:-1].transform(X)
        expected = prediction_cost(pipeline[-1], inner, by_position)
        for given_costs in (costs, by_position):
            report = prediction_cost(pipeline, X, given_costs)
            np.testing.assert_array_equal(report.per_instance, expected.per_instance)
        assert report.mean > 0
    plain = make_pipeline(StandardScaler(), Forest(n_estimators=3, random_state=0)).fit(X.fillna(0).to_numpy(), y)
    np.testing.assert_array_equal(prediction_cost(plain, X.fillna(0).to_numpy(), by_position).per_instance,
                                  prediction_cost(plain[-1], plain[0].transform(X.fillna(0).to_numpy()),
                                                  by_position).per_instance)


def test_mistaken_models_and_num_iteration_are_named():
    """Model text where a path goes (an OSError 'File name too long'), num_iteration='2' (a TypeError from a
    comparison), an unfitted scikit-learn model (an AttributeError or 'should be a ... fitted ... model')."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.exceptions import NotFittedError as SklearnNotFittedError
    from sklearn.tree import DecisionTreeRegressor

    from lightgbm_cegb import NotFittedError

    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    booster = lgb.train({"objective": "regression", "verbose": -1}, lgb.Dataset(X, X[:, 0]), 3)
    text = booster.model_to_string()
    for call in (lambda: to_forest(text), lambda: prediction_cost(text, X, np.ones(3))):
        with pytest.raises(CEGBError, match=r"model should be a model file's path, got a string of \d+ characters "
                                            r"over several lines \('tree\\nversion=v4.*lightgbm.Booster\(model_str"):
            call()
    with pytest.raises(CEGBError, match=r"model file 'xxxxx.*' cannot be read: File name too long"):
        prediction_cost("x" * 5000, X, np.ones(3))
    for bad in ("2", 2.5, True):
        with pytest.raises(CEGBError, match=r"num_iteration should be None or an integer \(<= 0: all iterations\), "
                                            rf"got {bad!r}"):
            prediction_cost(booster, X, np.ones(3), num_iteration=bad)
    assert prediction_cost(booster, X, np.ones(3), num_iteration=np.int64(2)).mean == \
        prediction_cost(booster, X, np.ones(3), num_iteration=2).mean
    # one error for every unfitted model, scikit-learn's or LightGBM's (LightGBM's raised a plain CEGBError)
    for model in (RandomForestClassifier(), DecisionTreeRegressor(), lgb.LGBMRegressor()):
        with pytest.raises(NotFittedError, match=rf"model: this {type(model).__name__} is not fitted yet: call fit "
                                                 "first") as info:
            prediction_cost(model, X, np.ones(3))
        assert isinstance(info.value, CEGBError) and isinstance(info.value, SklearnNotFittedError)


def _package_models():
    """One fitted model of each family the package produces, on 200 rows of 4 columns (binary)."""
    import lightgbm_cegb as lc

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    costs = FeatureCosts(lazy=[1.0, 2.0, 3.0, 4.0])
    f0 = lgb.LGBMClassifier(n_estimators=5, verbose=-1).fit(X, y)
    booster = lgb.train({"objective": "binary", "verbose": -1}, lgb.Dataset(X, y), 10)
    fitted = [make(feature_costs=costs).fit(X, y) for make in (
        lc.StagedAcquisitionClassifier, lc.AdaptiveAcquisitionClassifier, lc.CSTC, lc.CSCC, lc.Cronus,
        lc.CSTCClassifier, lc.BudgetRFClassifier, lambda **kw: lc.GreedyMiserClassifier(n_estimators=5, **kw),
        lambda **kw: lc.CEGBClassifier(n_estimators=5, cegb_tradeoff=0.01, verbose=-1, **kw))]
    fitted += [make(f0=f0, feature_costs=costs).fit(X, y) for make in (lc.AdaptGBRT, lc.AdaptLIN, lc.AdaptL1)]
    return X, y, costs, fitted + [lc.EarlyExit(booster, threshold=0.9, feature_costs=costs)]


def test_every_model_of_the_package_is_priced_by_its_own_accounting():
    """Issue 61 (12): prediction_cost and cost_scorer refused the package's ADAPT, CSTC-family, acquisition and
    EarlyExit models ("model should be a LightGBM Booster, ..., got StagedAcquisitionClassifier") though each has
    its exact prediction_cost."""
    from lightgbm_cegb.selection import cost_scorer

    X, y, costs, models = _package_models()
    for model in models:
        own = model.prediction_cost(X)
        for report in (prediction_cost(model, X), prediction_cost(model, X, costs)):
            np.testing.assert_array_equal(report.per_instance, own.per_instance, err_msg=type(model).__name__)
        if hasattr(model, "classes_"):
            assert cost_scorer(costs, penalty=0.1)(model, X, y) == pytest.approx(
                np.mean(model.predict(X) == y) - 0.1 * own.mean)
    trees = ("BudgetRFClassifier", "GreedyMiserClassifier", "CEGBClassifier")
    for model in models:  # other costs: the trees priced, or a refusal naming what was asked for
        if type(model).__name__ in trees:
            assert prediction_cost(model, X, np.zeros(4)).mean == 0.0
            continue
        for kwargs, asked in (({"costs": np.ones(4)}, "other costs than those it was fitted with"),
                              ({"num_iteration": 2}, "num_iteration=2"), ({"per_iteration": True}, "per_iteration")):
            with pytest.raises(CEGBError, match=rf"prediction_cost: a {type(model).__name__} is priced by its own "
                                                rf"exact accounting.*got {asked}"):
                prediction_cost(model, X, **kwargs)


def test_a_selection_of_an_acquisition_model_is_priced(tmp_path):
    """Issue 61 (12): prediction_cost(selection, X) failed for the Selections fit_within_budget often returns (an
    acquisition model), though the selection guide documents it."""
    from lightgbm_cegb.selection import Selection, fit_within_budget

    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chosen = fit_within_budget((X[:400], y[:400]), (X[400:], y[400:]), [1, 2, 3, 4], 3.0, task="binary",
                                   methods=["staged_acquisition"], baseline=False)
    assert type(chosen.model).__name__ == "StagedAcquisitionClassifier"
    np.testing.assert_array_equal(prediction_cost(chosen, X).per_instance, chosen.prediction_cost(X).per_instance)
    chosen.save(tmp_path / "chosen")
    loaded = Selection.load(tmp_path / "chosen")
    np.testing.assert_array_equal(prediction_cost(loaded, X).per_instance, chosen.prediction_cost(X).per_instance)


def test_a_ranker_whose_cost_depends_on_its_queries_is_priced_with_group():
    """prediction_cost(model, X, group=...): an EarlyExit ranker (which needs the query sizes) and the staged
    acquisition ranker (one query without them) are priced by their own accounting of those queries, a Dask X with
    each partition's sizes; a model that prices each row alone ignores them. Before, the generic entry could not
    price an EarlyExit ranker at all."""
    from references import by_queries

    from lightgbm_cegb import EarlyExit, StagedAcquisitionRanker

    rng = np.random.default_rng(0)
    sizes = rng.integers(2, 20, 30)
    X = rng.normal(size=(int(sizes.sum()), 5))
    y = np.digitize(X[:, 0] + X[:, 4] + rng.normal(0, 0.5, len(X)), [0.0, 1.0])
    costs = FeatureCosts(lazy=[1.0, 2.0, 3.0, 4.0, 5.0])
    booster = lgb.train({"objective": "regression", "verbose": -1, "num_leaves": 7}, lgb.Dataset(X, y), 20)
    exits = EarlyExit(booster, top_k=2, every=4, task="ranking", feature_costs=costs)
    with pytest.raises(CEGBError, match="pass the query sizes"):
        prediction_cost(exits, X)
    expected = exits.prediction_cost(X, group=sizes)
    np.testing.assert_array_equal(prediction_cost(exits, X, group=sizes).per_instance, expected.per_instance)
    dX, _, dgroup = by_queries(X, y, sizes, 3)
    np.testing.assert_array_equal(prediction_cost(exits, dX, group=dgroup).per_instance, expected.per_instance)
    ranker = StagedAcquisitionRanker(feature_costs=costs, stages=3, tradeoff=0.5, top_k=2, n_estimators=30,
                                     random_state=0).fit(X, y, group=sizes)
    by_query = prediction_cost(ranker, X, group=sizes).per_instance
    np.testing.assert_array_equal(by_query, ranker.prediction_cost(X, group=sizes).per_instance)
    assert not np.array_equal(by_query, prediction_cost(ranker, X).per_instance)  # X as one query
    np.testing.assert_array_equal(prediction_cost(booster, X, costs, group=sizes).per_instance,
                                  prediction_cost(booster, X, costs).per_instance)
