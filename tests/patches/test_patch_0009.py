"""Patch 0009: a reset refused inside the tree learner or the sample strategy leaves the booster as it was.

Patch 0007 refuses a candidate config before anything changes, but LightGBM's own checks past that point could
still refuse it after the tree learner had taken the new config's address: GBDT's copy of it was freed while
unwinding and later updates read freed memory (issue 48, item 7). Run in a child process (``run_python``), so
that a crash fails the test.
"""

from __future__ import annotations

import textwrap

import pytest
from conftest import RESET_TOOLS, run_python

RESET = textwrap.dedent("""
    import lightgbm as lgb, numpy as np
""") + RESET_TOOLS + textwrap.dedent("""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3)); y = X[:, 0] + rng.normal(0, 0.1, 30)
    # 30 rows: LightGBM drops every feature when it builds the Dataset (min_data_in_bin), so its tree
    # learner's own check refuses any reset (HistogramPool::ResetConfig)
    params = {"objective": "regression", "verbose": -1, "deterministic": True, "num_threads": 1, "seed": 3,
              "min_data_in_leaf": 1, "cegb_tradeoff": 0.1, "cegb_penalty_feature_lazy": [1.0, 2.0, 3.0],
              "bagging_fraction": 0.5, "bagging_freq": 1}
    def booster():
        return lgb.Booster(params, lgb.Dataset(X, y, params={"verbose": -1}))
    refused, reference = booster(), booster()
    for b in (refused, reference):
        b.update()
    for bad in ({"min_data_in_leaf": 20}, {"learning_rate": 0.05}):
        refuse(refused, bad)
        in_step(refused, reference, 3)
    print("OK")
""")


@pytest.mark.upstream_bug
def test_a_reset_refused_inside_the_tree_learner_leaves_the_booster_as_it_was():
    """Stock 4.7.0 (and the series before 0009): the learner's check failed after it took the new config's address;
    the next updates read the freed config (with a lazy penalty: "cegb_penalty_feature_lazy should have one value
    per feature ...: expected 3 values, got 417334")."""
    proc = run_python(RESET)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr
    assert proc.stdout.count("REFUSED Cannot reset the parameters: the training data has no usable feature") == 2, \
        proc.stdout


GOSS = textwrap.dedent("""
    import lightgbm as lgb, numpy as np
""") + RESET_TOOLS + textwrap.dedent("""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5000, 4)); y = (X[:, 0] + rng.normal(0, 0.5, 5000) > 0).astype(float)
    params = {"objective": "binary", "verbose": -1, "deterministic": True, "num_threads": 1, "seed": 3,
              "data_sample_strategy": "goss", "num_leaves": 31}
    def booster():
        return lgb.Booster(params, lgb.Dataset(X, y, params={"verbose": -1}))
    refused, reference = booster(), booster()
    for b in (refused, reference):
        b.update()
    # CEGB on with 2 leaves: the learner takes it, then GOSS refuses bagging (the sample strategy's check)
    refuse(refused, {"cegb_penalty_feature_lazy": [1, 1, 1, 1], "num_leaves": 2, "bagging_fraction": 0.5,
                     "bagging_freq": 1})
    in_step(refused, reference, 20)
    print("OK")
""")


@pytest.mark.upstream_bug
def test_a_reset_refused_by_the_sample_strategy_leaves_the_booster_as_it_was():
    """The learner had taken the new config (CEGB on, 2 leaves) when GOSS refused bagging: the rollback left its
    CEGB state sized for 2 leaves, and the next updates wrote past it ("free(): invalid next size")."""
    proc = run_python(GOSS)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    assert "REFUSED Cannot use bagging in GOSS" in proc.stdout, proc.stdout


OFF = textwrap.dedent("""
    import lightgbm as lgb, numpy as np
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5000, 4)); y = X[:, 0] + 0.5 * X[:, 1] * (X[:, 2] > 0) + rng.normal(0, 0.3, 5000)
    params = {"objective": "regression", "verbose": -1, "deterministic": True, "num_threads": 1, "seed": 3,
              "num_leaves": 2, "cegb_tradeoff": 0.1, "cegb_penalty_feature_lazy": [1.0] * 4}
    booster = lgb.Booster(params, lgb.Dataset(X, y, params={"verbose": -1}))
    booster.update()
    booster.reset_parameter({"cegb_penalty_feature_lazy": [], "cegb_tradeoff": 1.0, "num_leaves": 63})
    for _ in range(20):
        booster.update()
    assert booster.num_trees() == 21 and booster.dump_model()["tree_info"][-1]["num_leaves"] > 2
    print("OK")
""")


@pytest.mark.upstream_bug
def test_a_reset_that_turns_cegb_off_with_more_leaves_trains_on():
    """The learner called a CEGB state sized for the earlier num_leaves after a reset that turned CEGB off (its
    penalties emptied) and raised num_leaves: writes past its per-leaf arrays (stock 4.7.0 fails here too)."""
    proc = run_python(OFF)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr[-3000:]
