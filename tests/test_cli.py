"""The lightgbm-cegb command line: cost reports on data files, training through LightGBM's CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pytest

from lightgbm_cegb import FeatureCosts, prediction_cost
from lightgbm_cegb.cli import main

CLI = [str(Path(sys.executable).parent / "lightgbm-cegb")]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 4))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 3]) + rng.normal(0, 0.2, 2000)
    data = tmp / "train.csv"
    np.savetxt(data, np.column_stack([y, X]), delimiter=",", fmt="%.17g")
    costs = tmp / "costs.txt"
    costs.write_text("1\n2\n5\n20\n")
    return tmp, data, costs, X, y


def test_cost_table_and_json(files, capsys):
    tmp, data, costs, X, y = files
    booster = lgb.train({"objective": "regression", "verbose": -1}, lgb.Dataset(X, y), 20)
    model = tmp / "plain.txt"
    booster.save_model(model)
    expected = prediction_cost(booster, X, FeatureCosts(lazy=[1, 2, 5, 20], split=0.5))
    assert main(["cost", str(model), str(data), "--costs", str(costs), "--split", "0.5", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rows"] == 2000
    assert report["mean"] == pytest.approx(expected.mean, rel=1e-12)
    assert list(report["usage"].values()) == pytest.approx(expected.usage.tolist(), rel=1e-12)
    proc = subprocess.run([*CLI, "cost", str(model), str(data), "--costs", str(costs)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "mean cost per row" in proc.stdout and "Column_0" in proc.stdout


def test_train_through_lightgbm_cli(files, capsys):
    tmp, data, costs, X, y = files
    conf = tmp / "train.conf"
    conf.write_text(f"task = train\nobjective = regression\ndata = {data.name}\nnum_iterations = 15\n"
                    "output_model = cli_model.txt\nverbose = -1\ndeterministic = true\nnum_threads = 2\n")
    assert main(["train", str(conf), "--costs", str(costs), "--tradeoff", "0.01"]) == 0
    cli_model = lgb.Booster(model_file=str(tmp / "cli_model.txt"))
    assert cli_model.params["cegb_penalty_feature_lazy"] == [1.0, 2.0, 5.0, 20.0]
    params = {"objective": "regression", "verbose": -1, "deterministic": True, "num_threads": 2,
              **FeatureCosts(lazy=[1, 2, 5, 20]).to_params(tradeoff=0.01)}
    api = lgb.train(params, lgb.Dataset(X, y), 15)
    np.testing.assert_allclose(cli_model.predict(X), api.predict(X), rtol=1e-12)
    assert conf.read_text().count("cegb") == 0  # the user's config is left alone
    # the report reads the costs the model was trained with
    assert main(["cost", str(tmp / "cli_model.txt"), str(data), "--format", "json"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize(("argv", "message"), [
    (["train", "missing.conf", "--costs", "c.txt"], r"config file 'missing.conf' does not exist"),
    (["cost", "missing.txt", "data.csv"], r"model file 'missing.txt' does not exist"),
])
def test_cli_errors(argv, message, capsys):
    assert main(argv) == 2
    assert message.replace("\\", "") in capsys.readouterr().err


def test_train_refuses_cegb_keys_in_config(files, capsys):
    tmp, data, costs, _, _ = files
    conf = tmp / "dup.conf"
    conf.write_text(f"data = {data.name}\ncegb_tradeoff = 0.5\n")
    assert main(["train", str(conf), "--costs", str(costs)]) == 2
    assert "already sets ['cegb_tradeoff']" in capsys.readouterr().err
