"""Patch 0002: CEGB under bagging/GOSS subsets, forced splits, a new training set; CUDA and rollback refused.

The lazy penalty a split pays is tradeoff * beta * (rows of the leaf that have not paid the feature yet).
Training the same model with beta > 0 and beta = 0 (same bags, same trees) and taking the difference of a
split's stored gain recovers how many rows it charged, which is what these tests check.
"""

from __future__ import annotations

import json
import textwrap

import lightgbm as lgb
import numpy as np
import pytest
from conftest import run_python, splits, structure

TRADEOFF = 0.01


def root_splits(booster: lgb.Booster) -> list[dict]:
    return [splits(booster, t)[0] for t in range(booster.num_trees()) if splits(booster, t)]


def charged_rows(X, y, params, rounds, beta_index, features=None):
    """Rows charged by each tree's root split: (gain without the lazy penalty - gain with it) / (tradeoff * beta)."""
    base = {"objective": "regression", "num_leaves": 2, "verbose": -1, "deterministic": True, "num_threads": 2,
            "min_data_in_leaf": 5, "cegb_tradeoff": TRADEOFF, **params}
    n_features = X.shape[1]

    def lazy(beta):
        out = [0.0] * n_features
        out[beta_index] = beta
        for f in features or ():
            out[f] = 1e6  # padding features: never worth buying
        return out

    free = lgb.train({**base, "cegb_penalty_feature_lazy": lazy(0.0)}, lgb.Dataset(X, y), rounds)
    paid = lgb.train({**base, "cegb_penalty_feature_lazy": lazy(1.0)}, lgb.Dataset(X, y), rounds)
    assert [structure(free, t) for t in range(rounds)] == [structure(paid, t) for t in range(rounds)]
    return [((f["gain"] - p["gain"]) / TRADEOFF, p["feature"], p["count"])
            for f, p in zip(root_splits(free), root_splits(paid))]


@pytest.mark.upstream_bug
def test_bagging_subset_charges_the_rows_of_the_bag():
    """Bagging at 30% uses a row subset when there are fewer than 100 feature groups. 120 extra noise
    features turn subset mode off without changing the bags: both must charge the same rows."""
    rng = np.random.default_rng(0)
    n = 6000
    X = rng.uniform(-1, 1, size=(n, 2))
    y = 3.0 * X[:, 0] + 0.3 * X[:, 1] + rng.normal(0, 0.1, n)
    padded = np.column_stack([X, rng.uniform(-1, 1, size=(n, 120))])
    params = {"learning_rate": 0.3, "bagging_fraction": 0.3, "bagging_freq": 1, "bagging_seed": 7}
    subset = charged_rows(X, y, params, 8, beta_index=0)
    full = charged_rows(padded, y, params, 8, beta_index=0, features=range(2, 122))
    for (rows_subset, f1, c1), (rows_full, f2, c2) in zip(subset, full):
        assert (f1, c1) == (f2, c2) == (0, c1)
        assert rows_subset == pytest.approx(rows_full, abs=0.05)
    assert subset[0][0] == pytest.approx(subset[0][2], abs=0.05)  # the first bag pays in full
    assert sum(r for r, _, _ in subset) <= n + 0.5


@pytest.mark.upstream_bug
def test_goss_subset_charges_rows_new_to_the_feature():
    """GOSS with top_rate + other_rate <= 0.5 trains on row subsets. Tree 0 (full data) splits on x0;
    every later tree splits on x1 and must charge exactly the rows of its sample that no earlier sample
    held: after the first, fewer than the whole sample, but not none."""
    rng = np.random.default_rng(0)
    n = 6000
    X = rng.uniform(-1, 1, size=(n, 2))
    y = 10.0 * (X[:, 0] > 0) + X[:, 1] + rng.normal(0, 0.05, n)
    params = {"learning_rate": 1.0, "data_sample_strategy": "goss", "top_rate": 0.2, "other_rate": 0.1, "seed": 3}
    charged = charged_rows(X, y, params, 6, beta_index=1)
    assert charged[0][1] == 0 and charged[0][0] == pytest.approx(0, abs=0.05)
    assert charged[1][0] == pytest.approx(charged[1][2], abs=0.05)  # the first sample pays in full
    for rows, feature, count in charged[2:]:
        assert feature == 1
        assert rows == pytest.approx(round(rows), abs=0.05)
        assert 0 < round(rows) < count
    assert sum(r for r, _, _ in charged) <= n + 0.5


@pytest.mark.upstream_bug
@pytest.mark.parametrize(("beta", "made"), [(0.01, True), (0.1, False)])
def test_forced_split_pays_its_penalty(tmp_path, beta, made):
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(3000, 3))
    y = 2.0 * X[:, 0] + 0.5 * (X[:, 1] > 0.2) + rng.normal(0, 0.1, 3000)
    forced = tmp_path / "forced.json"
    forced.write_text(json.dumps({"feature": 1, "threshold": 0.2}))
    params = {"objective": "regression", "num_leaves": 4, "verbose": -1, "deterministic": True,
              "forcedsplits_filename": str(forced)}
    plain = lgb.train(params, lgb.Dataset(X, y), 1)
    raw_gain = splits(plain)[0]["gain"]  # about 144: the forced split at the root
    cegb = lgb.train({**params, "cegb_penalty_feature_lazy": [0.0, beta, 0.0]}, lgb.Dataset(X, y), 1)
    root = splits(cegb)[0]
    if made:  # 3000 rows x 0.01 = 30 < 144
        assert root["feature"] == 1
        assert root["gain"] == pytest.approx(raw_gain - beta * 3000, rel=1e-6)
    else:  # 3000 rows x 0.1 = 300 > 144: not forced, the best split is chosen instead
        assert root["feature"] == 0


@pytest.mark.upstream_bug
def test_cuda_with_cegb_is_refused():
    X = np.random.default_rng(0).normal(size=(100, 3))
    with pytest.raises(lgb.basic.LightGBMError, match=r"cegb_penalty_split, cegb_penalty_feature_\* and "
                       r"cegb_penalty_group_\* are not supported with device_type=cuda"):
        lgb.train({"device_type": "cuda", "cegb_penalty_split": 0.1, "verbose": -1}, lgb.Dataset(X, X[:, 0]), 2)


@pytest.mark.upstream_bug
@pytest.mark.parametrize("boosting", ["gbdt", "rf"])
def test_rollback_with_cegb_state_is_refused(boosting):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 3))
    params = {"boosting": boosting, "verbose": -1, "cegb_penalty_feature_lazy": [0.001] * 3,
              "bagging_fraction": 0.8, "bagging_freq": 1}
    booster = lgb.train(params, lgb.Dataset(X, X[:, 0] + rng.normal(size=500)), 3, keep_training_booster=True)
    with pytest.raises(lgb.basic.LightGBMError, match=r"rollback_one_iter is not supported with "
                       r"cegb_penalty_feature_lazy, cegb_penalty_feature_coupled, cegb_penalty_group_lazy or "
                       r"cegb_penalty_group_coupled"):
        booster.rollback_one_iter()
    assert booster.current_iteration() == 3


def test_rollback_without_cegb_state_still_works():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 3))
    booster = lgb.train({"verbose": -1, "cegb_penalty_split": 0.001}, lgb.Dataset(X, X[:, 0]), 3,
                        keep_training_booster=True)
    booster.rollback_one_iter()
    assert booster.current_iteration() == 2


@pytest.mark.parametrize("rows_b", [3000, pytest.param(1000, marks=pytest.mark.upstream_bug)])
def test_new_training_set_resets_per_row_state(rows_b):
    """After update(train_set=B), every row of B is new: the first split on x0 charges all of B's rows.
    (Stock LightGBM reads its bitset, sized for A, out of range with 3000 rows: the training runs in a
    child; what it charges then depends on the memory past the bitset, so only the 1000-row case is an
    upstream_bug test: with as many rows as A, stock charges nothing, as if B's rows were A's. Patch 0004
    fixes that.)"""
    code = textwrap.dedent("""
        import json, numpy as np, lightgbm as lgb
        rng = np.random.default_rng(0)
        A, B = rng.uniform(-1, 1, size=(1000, 2)), rng.uniform(-1, 1, size=(ROWS_B, 2))
        yA, yB = 3 * A[:, 0] + rng.normal(0, 0.1, 1000), 3 * B[:, 0] + rng.normal(0, 0.1, ROWS_B)
        def run(beta):
            params = {"objective": "regression", "num_leaves": 2, "verbose": -1, "deterministic": True,
                      "cegb_tradeoff": 0.01, "cegb_penalty_feature_lazy": [beta, 0.0]}
            data_a = lgb.Dataset(A, yA, params=params).construct()
            booster = lgb.Booster(params, data_a)
            booster.update()
            booster.update()
            booster.update(train_set=lgb.Dataset(B, yB, reference=data_a, params=params))
            booster.update()
            trees = booster.dump_model()["tree_info"]
            return [(t["tree_structure"]["split_feature"], t["tree_structure"]["split_gain"]) for t in trees]
        print(json.dumps([run(0.0), run(1.0)]))
    """).replace("ROWS_B", str(rows_b))
    proc = run_python(code)
    assert proc.returncode == 0, f"training failed (exit {proc.returncode}): {proc.stderr[-2000:]}"
    free, paid = json.loads(proc.stdout)
    assert [f for f, _ in paid] == [0, 0, 0, 0]
    charged = [(f - p) / TRADEOFF for (_, f), (_, p) in zip(free, paid)]
    assert charged == pytest.approx([1000, 0, rows_b, 0], abs=0.05)


def test_dart_keeps_bought_features(strong_weak):
    """DART drops trees only for a while (they stay in the model): a feature bought stays bought."""
    X, y = strong_weak
    params = {"objective": "regression", "boosting": "dart", "num_leaves": 4, "min_data_in_leaf": 1,
              "drop_rate": 0.5, "verbose": -1, "deterministic": True, "seed": 5}
    plain = lgb.train(params, lgb.Dataset(X, y), 6)
    cegb = lgb.train({**params, "cegb_penalty_feature_coupled": [0, 5000]}, lgb.Dataset(X, y), 6)
    assert [structure(cegb, t) for t in range(6)] == [structure(plain, t) for t in range(6)]
    differences = [p["gain"] - c["gain"] for t in range(6) for p, c in zip(splits(plain, t), splits(cegb, t))]
    # exactly one split in the whole model paid the coupled penalty
    assert sorted(round(d) for d in differences)[-1] == 5000
    assert sum(abs(d) > 1e-3 * 5000 for d in differences) == 1
