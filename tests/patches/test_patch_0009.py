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
