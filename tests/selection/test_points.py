"""What the method families share (``selection.points``): the trade-off scales a sweep prepares are shared by the
sweeps of the same training rows and parameters, and only by them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import sparse

from lightgbm_cegb import FeatureCosts
from lightgbm_cegb.methods.greedy_miser import GreedyMiserClassifier
from lightgbm_cegb.selection import lightgbm_family, points, sweep, train_to_budget


def _data(seed=0, n=600):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    return X, (X[:, 0] + 0.5 * X[:, 1] + rng.normal(size=n) > 0).astype(int)


@pytest.fixture
def counted(monkeypatch):
    """The number of calls of cegb_tradeoff_scale and of Greedy Miser's tradeoff_scale, the shared values cleared."""
    monkeypatch.setattr(points, "_SHARED", {})
    calls = {"cegb": 0, "greedy_miser": 0}
    cegb, greedy = lightgbm_family.cegb_tradeoff_scale, GreedyMiserClassifier.tradeoff_scale

    def cegb_counted(*args, **kwargs):
        calls["cegb"] += 1
        return cegb(*args, **kwargs)

    def greedy_counted(self, *args, **kwargs):
        calls["greedy_miser"] += 1
        return greedy(self, *args, **kwargs)
    monkeypatch.setattr(lightgbm_family, "cegb_tradeoff_scale", cegb_counted)
    monkeypatch.setattr(GreedyMiserClassifier, "tradeoff_scale", greedy_counted)
    return calls


def test_the_scale_is_found_once_for_the_same_rows_and_parameters(counted):
    X, y = _data()
    costs = FeatureCosts(lazy=[1.0, 2.0, 4.0, 8.0, 16.0])
    train, valid = (X[:400], y[:400]), (X[400:], y[400:])
    options = dict(task="binary", num_boost_round=20, baseline=False, grid={"cegb": [{"relative_tradeoff": 0.3}],
                                                            "greedy_miser": [{"relative_tradeoff": 0.1}]})
    first = sweep(["cegb", "greedy_miser"], train, valid, costs, **options)
    again = sweep(["cegb", "greedy_miser"], (X[:400].copy(), y[:400].copy()), valid, costs, **options)
    assert counted == {"cegb": 1, "greedy_miser": 1}
    pd.testing.assert_frame_equal(first.drop(columns=["model"]), again.drop(columns=["model"]))
    for budget in (3.0, 6.0):  # each budget of train_to_budget is a sweep: one bisection for all
        train_to_budget(train, valid, costs, budget, task="binary", num_boost_round=20, refine=0,
                        relative_tradeoffs=(0.0, 0.5))
    assert counted["cegb"] == 1
    # anything a scale reads changes its key: the rows, a label, the costs; CEGB's LightGBM parameters (Greedy
    # Miser's trees take none of them)
    y_changed = y[:400].copy()
    y_changed[0] = 1 - y_changed[0]
    for changed in [dict(train=(X[1:401], y[1:401])), dict(train=(X[:400], y_changed)),
                    dict(costs=FeatureCosts(lazy=[1.0, 2.0, 4.0, 8.0, 17.0])), dict(params={"num_leaves": 7})]:
        before = dict(counted)
        arguments = {"train": train, "costs": costs, **changed}
        sweep(["cegb", "greedy_miser"], arguments["train"], valid, arguments["costs"],
              **{**options, "params": changed.get("params", {})})
        greedy_reads = "params" not in changed
        assert counted == {"cegb": before["cegb"] + 1, "greedy_miser": before["greedy_miser"] + greedy_reads}, changed


@pytest.mark.parametrize("kind", ["dense", "sparse", "frame"])
def test_the_digest_reads_every_kind_of_rows(kind):
    X, y = _data(n=50)
    as_kind = {"dense": lambda a: a, "sparse": sparse.csr_matrix,
               "frame": lambda a: pd.DataFrame(a, columns=[f"f{j}" for j in range(a.shape[1])])}[kind]
    rows = points.Rows(as_kind(X), y)
    digest = points._digest(rows, {"k": 1})
    assert digest is not None and digest == points._digest(points.Rows(as_kind(X.copy()), y.copy()), {"k": 1})
    other = X.copy()
    other[3, 2] += 1e-12
    assert points._digest(points.Rows(as_kind(other), y), {"k": 1}) != digest
    assert points._digest(rows, {"k": 2}) != digest
    assert points._digest(points.Rows(as_kind(X), y, np.array([25, 25])), {"k": 1}) != digest
    assert points._digest(points.Rows(X.astype(object), y), {"k": 1}) is None
