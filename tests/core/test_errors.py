"""The package's exceptions and warnings: one root exception, each kind also the builtin it refines, and the
names a user filters or catches at the top level."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import lightgbm_cegb
from lightgbm_cegb import FeatureCosts, LazyPredictor


def test_every_error_of_the_package_derives_from_the_root():
    root = lightgbm_cegb.LightGBMCEGBError
    for error, builtin in [(lightgbm_cegb.CEGBError, ValueError), (lightgbm_cegb.NotFittedError, ValueError),
                           (lightgbm_cegb.LazyFetchError, RuntimeError),
                           (lightgbm_cegb.LazyFetchValueError, ValueError)]:
        assert issubclass(error, root) and issubclass(error, builtin), error
    with pytest.raises(root, match="lazy"):  # bad input, caught by the root
        FeatureCosts(lazy=[-1.0])


def test_a_failed_fetch_is_caught_by_the_root():
    import lightgbm as lgb
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    booster = lgb.train({"objective": "binary", "verbose": -1, "num_leaves": 4}, lgb.Dataset(X, X[:, 0] > 0), 3)

    def fetch(key, ids):
        raise OSError("store down")

    with pytest.raises(lightgbm_cegb.LightGBMCEGBError, match="store down") as info:
        LazyPredictor(booster, fetch, feature_costs=FeatureCosts(lazy=[1.0, 1.0, 1.0])).predict(
            np.full((2, 3), np.nan))
    assert isinstance(info.value, RuntimeError) and isinstance(info.value.__cause__, OSError)


@pytest.mark.parametrize("name", ["CEGBWarning", "NoSplitWarning", "BudgetWarning", "RoundsWarning"])
def test_the_warnings_are_top_level_names_a_filter_can_use(name):
    warning = getattr(lightgbm_cegb, name)
    assert issubclass(warning, lightgbm_cegb.CEGBWarning) and name in lightgbm_cegb.__all__
    with warnings.catch_warnings():
        warnings.simplefilter("error", warning)
        with pytest.raises(warning):
            warnings.warn("a test", warning, stacklevel=1)


def test_low_level_types_live_in_their_subpackages():
    from lightgbm_cegb.core import CostState, Forest
    from lightgbm_cegb.io import CEGBState
    for name, kind in [("Forest", Forest), ("CostState", CostState), ("CEGBState", CEGBState)]:
        assert name not in lightgbm_cegb.__all__ and not hasattr(lightgbm_cegb, name), kind


def test_still_improving_at_the_cap():
    """Within ``patience`` of the cap when early stopping could judge the model; with no more rounds than the
    patience, within the last half of them (a best iteration of 1 in 20 rounds is no model still improving)."""
    from lightgbm_cegb.core.errors import still_improving

    assert still_improving(1000, 1000, 30) and still_improving(971, 1000, 30) and not still_improving(970, 1000, 30)
    assert still_improving(3, 3, 30) and not still_improving(1, 3, 30)
    assert still_improving(11, 20, 30) and not still_improving(10, 20, 30) and not still_improving(1, 20, 30)
    assert still_improving(1, 1, 30)  # one round: its only iteration is the last
    assert still_improving(21, 50, 30) and not still_improving(20, 50, 30)  # rounds > patience: unchanged
