"""Patch 0003: continued training (init_model) starts from what the init model already paid for.

The command-line tests are not marked upstream_bug: the stock wheel has no command-line program to run
them against (they exercise the same C++ as the Python tests)."""

from __future__ import annotations

import subprocess

import lightgbm as lgb
import numpy as np
import pytest
from conftest import CLI, splits

from lightgbm_cegb import FeatureCosts, prediction_cost

BASE = {"objective": "regression", "num_leaves": 4, "verbose": -1, "deterministic": True, "num_threads": 2}


@pytest.fixture(scope="module")
def init_case(tmp_path_factory):
    """An init model of 3 trees over x0 and x1 (x2, x3 unused), its data and its model file."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(3000, 4))
    y = 3 * X[:, 0] + 2 * (X[:, 1] > 0) + rng.normal(0, 0.1, 3000)
    init = lgb.train(BASE, lgb.Dataset(X, y), 3)
    path = tmp_path_factory.mktemp("init") / "init.txt"
    init.save_model(path)
    return X, y, init, path


@pytest.mark.upstream_bug
@pytest.mark.parametrize("init_kind", ["booster", "file"])
def test_init_model_features_are_already_bought(init_case, init_kind):
    """Coupled penalties of 1e9 on every feature: only the features the init model bought can be used
    (stock LightGBM charges them again and grows no tree at all)."""
    X, y, init, path = init_case
    params = {**BASE, "cegb_penalty_feature_coupled": [1e9] * 4}
    model = lgb.train(params, lgb.Dataset(X, y), 5, init_model=init if init_kind == "booster" else str(path))
    new_splits = [s for t in range(3, model.num_trees()) for s in splits(model, t)]
    assert model.num_trees() == 8 and new_splits
    assert {s["feature"] for s in new_splits} <= {0, 1}


def continue_with_cli(init_case, tmp_path, penalty_line: str) -> subprocess.CompletedProcess:
    """Continue the init model for 5 iterations with the command-line program (input_model)."""
    X, y, _, path = init_case
    data = tmp_path / "train.csv"
    np.savetxt(data, np.column_stack([y, X]), delimiter=",", fmt="%.17g")
    conf = tmp_path / "train.conf"
    conf.write_text(f"task = train\nobjective = regression\ndata = {data}\ninput_model = {path}\nnum_leaves = 4\n"
                    f"num_iterations = 5\noutput_model = {tmp_path / 'out.txt'}\nverbose = -1\n{penalty_line}\n")
    return subprocess.run([str(CLI), f"config={conf}"], capture_output=True, text=True)


def test_cli_input_model_features_are_already_bought(init_case, tmp_path):
    proc = continue_with_cli(init_case, tmp_path, "cegb_penalty_feature_coupled = 1e9,1e9,1e9,1e9")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    model = lgb.Booster(model_file=str(tmp_path / "out.txt"))
    new_splits = [s for t in range(3, model.num_trees()) for s in splits(model, t)]
    assert model.num_trees() == 8 and new_splits and {s["feature"] for s in new_splits} <= {0, 1}


@pytest.fixture(scope="module")
def partial_init():
    """An init model that tests x2 only where x0 > 0.5, and a target whose residual over it is a step in x2:
    continuing with stumps, the first new stump splits all rows on x2. Also: how many rows have not paid
    x2 on their paths through the init model, counted independently by lightgbm_cegb.prediction_cost."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(3000, 4))
    init = lgb.train(BASE, lgb.Dataset(X, 3 * X[:, 0] + 2 * (X[:, 2] > 0) * (X[:, 0] > 0.5)), 3)
    y = init.predict(X) + 2.0 * (X[:, 2] > 0) + rng.normal(0, 0.05, 3000)
    unpaid = int(np.sum(prediction_cost(init, X, FeatureCosts(lazy=[0, 0, 1, 0])).acquisition == 0))
    assert 0 < unpaid < len(X)
    return X, y, init, unpaid


TRADEOFF = 0.01


def charged_by_first_new_stump(free: dict, paid: dict, n: int) -> float:
    assert (free["feature"], free["count"]) == (paid["feature"], paid["count"]) == (2, n)
    return (free["gain"] - paid["gain"]) / TRADEOFF


@pytest.mark.upstream_bug
def test_rows_have_paid_the_features_on_their_init_paths(partial_init):
    X, y, init, unpaid = partial_init

    def first_new_split(beta):
        params = {**BASE, "num_leaves": 2, "cegb_tradeoff": TRADEOFF, "cegb_penalty_feature_lazy": [0, 0, beta, 0]}
        return splits(lgb.train(params, lgb.Dataset(X, y), 1, init_model=init), 3)[0]

    charged = charged_by_first_new_stump(first_new_split(0.0), first_new_split(1.0), len(X))
    assert charged == pytest.approx(unpaid, abs=0.05)


def test_cli_rows_have_paid_the_features_on_their_input_model_paths(partial_init, tmp_path):
    X, y, init, unpaid = partial_init
    init.save_model(tmp_path / "init.txt")
    data = tmp_path / "train.csv"
    np.savetxt(data, np.column_stack([y, X]), delimiter=",", fmt="%.17g")

    def first_new_split(beta):
        out = tmp_path / f"out{beta}.txt"
        conf = tmp_path / "train.conf"
        conf.write_text(f"task = train\nobjective = regression\ndata = {data}\ninput_model = {tmp_path / 'init.txt'}\n"
                        f"num_leaves = 2\nnum_iterations = 1\noutput_model = {out}\nverbose = -1\n"
                        f"cegb_tradeoff = {TRADEOFF}\ncegb_penalty_feature_lazy = 0,0,{beta},0\n")
        proc = subprocess.run([str(CLI), f"config={conf}"], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert not list(tmp_path.glob("*.tmp")), "the temporary leaves file is removed"
        return splits(lgb.Booster(model_file=str(out)), 3)[0]

    charged = charged_by_first_new_stump(first_new_split(0.0), first_new_split(1.0), len(X))
    assert charged == pytest.approx(unpaid, abs=0.05)


def test_cli_input_model_with_lazy_penalties_refused_where_rows_cannot_be_traced(init_case, tmp_path):
    proc = continue_with_cli(init_case, tmp_path, "cegb_penalty_feature_lazy = 1,1,1,1\nignore_column = 4")
    assert proc.returncode != 0
    assert "cegb_penalty_feature_lazy or cegb_penalty_group_lazy with input_model is not supported with " \
           "weight_column, group_column or " \
           "ignore_column" in proc.stdout + proc.stderr
