"""The selection method ``catboost`` (issue 45): CatBoost with its feature penalties as the protocol's peer of CEGB.
Its points (every tree prefix of each model) are measured with the package's accounting of each point's own
model; the penalties it trains with are the sweep's costs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from lightgbm_cegb import FeatureCosts, prediction_cost
from lightgbm_cegb.selection import sweep


@pytest.fixture(scope="module")
def rows():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 6))
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 3]) > 0).astype(int)
    return (X[:400], y[:400]), (X[400:], y[400:])


def test_points_are_their_own_models_and_the_knob_moves_the_cost(rows):
    train, valid = rows
    costs = FeatureCosts(lazy=[1, 1, 2, 5, 5, 9.0], groups={"g": [4, 5]}, group_lazy=[3.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small coefficients reach the round cap here
        frame = sweep(["catboost"], train, valid, costs, task="binary", progress=False, num_boost_round=150)
    points = frame[frame["method"] == "catboost"]
    assert points["trees"].nunique() > 3  # prefixes
    assert points["cost"].max() > 2 * points["cost"].min()  # larger coefficients read fewer features
    for _, point in points.sample(6, random_state=0).iterrows():
        model = point["model"].fitted_model()
        assert model.tree_count_ == point["trees"]
        assert point["cost"] == pytest.approx(prediction_cost(model, valid[0], costs).mean, rel=1e-12)
        accuracy = np.mean((model.predict_proba(valid[0])[:, 1] > 0.5) == valid[1])
        assert point["quality"] == pytest.approx(accuracy)
    # the penalties are the costs, a group's own spread over its members (CatBoost has no groups)
    model = points.iloc[0]["model"].model
    penalties = model.get_params()["per_object_feature_penalties"]
    assert penalties == {0: 1.0, 1: 1.0, 2: 2.0, 3: 5.0, 4: 6.5, 5: 10.5}


def test_free_features_leave_it_out_with_a_warning(rows):
    train, valid = rows
    with pytest.warns(Warning, match="catboost.*left out"):
        frame = sweep(["catboost", "lightgbm"], train, valid, FeatureCosts(lazy=np.zeros(6)), task="binary",
                      progress=False, num_boost_round=50)
    assert "catboost" not in set(frame["method"])
