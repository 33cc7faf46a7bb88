"""Missing values: every registered method sweeps, measures and is selected on rows with 30% NaN, for every task it
supports, and learns something from them (each method's own rule: LightGBM's default children, ADAPT-LIN's
training means, BudgetRF's 0.0; the methods' tests check each rule exactly)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from lightgbm_cegb import FeatureCosts
from lightgbm_cegb.selection import METHODS, select, sweep

COSTS = FeatureCosts(lazy=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
#: what each task's best point beats on the validation rows: AUC, accuracy (3 classes), minus the RMSE of the
#: constant prediction (the task's default metrics)
FLOOR = {"binary": 0.6, "multiclass": 0.45}


def rows(task: str, seed: int = 0):
    """(train, valid, test) of 30% NaN, the labels from two features (a third as noise)."""
    rng = np.random.default_rng(seed)
    n = 900
    X = rng.normal(size=(n, 6))
    score = X[:, 0] + 0.7 * X[:, 1] + 0.3 * rng.normal(size=n)
    y = {"binary": (score > 0).astype(int), "multiclass": np.digitize(score, [-0.5, 0.5]),
         "regression": score}[task]
    X[rng.random(X.shape) < 0.3] = np.nan
    return (X[:500], y[:500]), (X[500:700], y[500:700]), (X[700:], y[700:])


CASES = [(name, task) for name, method in METHODS.items() for task in ("binary", "multiclass", "regression")
         if task in method.tasks]


@pytest.mark.parametrize("name, task", CASES, ids=[f"{name}-{task}" for name, task in CASES])
def test_every_method_sweeps_rows_with_missing_values(name, task):
    train, valid, test = rows(task)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rounds caps and gates with few distinct scores on 500 rows
        frame = sweep(name, train, valid, COSTS, task=task, num_boost_round=60, refine=0, baseline=False)
    assert len(frame) and (frame["method"] == name).all()
    assert np.isfinite(frame["quality"]).all() and np.isfinite(frame["cost"]).all() and (frame["cost"] >= 0).all()
    best = frame["quality"].max()
    floor = FLOOR.get(task, -float(np.std(valid[1])))
    assert best > floor, f"{name} learned nothing from rows with missing values: {best} <= {floor}"
    selection = select(frame, budget=float(frame["cost"].max()), test=test)
    assert np.isfinite(selection.test_quality) and np.isfinite(selection.test_cost)
