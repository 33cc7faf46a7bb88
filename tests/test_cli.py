"""The lightgbm-cegb command line: cost reports on data files, training through LightGBM's CLI."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pandas as pd
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


def test_train_through_lightgbm_cli(files, capsys, monkeypatch):
    tmp, data, costs, X, y = files
    monkeypatch.chdir(tmp)  # the config's relative paths are relative to where the command runs
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
    (["cost", "missing.txt", "data.csv"], r"expected a model file or a folder saved by an estimator's save(), got "
                                          r"'missing.txt', which does not exist"),
])
def test_cli_errors(argv, message, capsys):
    assert main(argv) == 2
    assert message.replace("\\", "") in capsys.readouterr().err


def test_train_refuses_cegb_keys_in_config(files, capsys):
    tmp, data, costs, _, _ = files
    conf = tmp / "dup.conf"
    conf.write_text(f"data = {data.name}\ncegb_tradeoff = 0.5\n")
    assert main(["train", str(conf), "--costs", str(costs)]) == 2
    assert "already set ['cegb_tradeoff']" in capsys.readouterr().err
    conf.write_text(f"data = {data}\n")
    assert main(["train", str(conf), "--costs", str(costs), "--", "cegb_penalty_split=1"]) == 2
    assert "already set ['cegb_penalty_split']" in capsys.readouterr().err
    assert main(["train", str(conf), "--costs", str(costs), "--", "num_iterations"]) == 2
    assert "overrides should be key=value, got 'num_iterations'" in capsys.readouterr().err


def _svmlight(path, X, y):
    """X's column j as feature id j + 1 (SVMlight's 1-based ids), zeros left out."""
    with open(path, "w") as fh:
        for label, row in zip(y, X):
            fh.write(f"{label:.17g} " + " ".join(f"{j + 1}:{v:.17g}" for j, v in enumerate(row) if v != 0) + "\n")


def test_one_based_svmlight(tmp_path, capsys, monkeypatch):
    """A 1-based SVMlight file and its cost file (line i = id i): LightGBM reads id i into column i, so the
    costs go one column right; a Yahoo-style tail of 10000 for ids that never occur is dropped."""
    rng = np.random.default_rng(1)
    X = np.round(rng.normal(size=(600, 5)), 3)
    X[:, 4] = 0.0  # id 5 never occurs: LightGBM sees columns 0..4
    y = X[:, 0] + X[:, 3] + rng.normal(0, 0.1, 600)
    monkeypatch.chdir(tmp_path)
    _svmlight("train.svm", X, y)
    Path("costs.txt").write_text("1\n2\n3\n40\n10000\n10000\n")  # ids 1..6
    Path("train.conf").write_text("objective = regression\ndata = train.svm\nnum_iterations = 200\n"
                                  "verbose = -1\nnum_threads = 1\nmin_data_in_leaf = 5\n")
    assert main(["train", "train.conf", "--costs", "costs.txt", "--tradeoff", "0.01", "--one-based",
                 "--", "num_iterations=8", "output_model=m.txt"]) == 0
    model = lgb.Booster(model_file="m.txt")
    assert model.num_trees() == 8  # the override took
    assert model.params["cegb_penalty_feature_lazy"] == [0.0, 1.0, 2.0, 3.0, 40.0]
    Xl = np.column_stack([np.zeros(600), X[:, :4]])  # LightGBM's columns: id i in column i
    expected = prediction_cost(model, Xl, FeatureCosts(lazy=[0, 1, 2, 3, 40]))
    assert main(["cost", "m.txt", "train.svm", "--costs", "costs.txt", "--one-based", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["mean"] == pytest.approx(expected.mean, rel=1e-12)
    assert expected.mean > 0
    # a file without id 0 needs its base said: read from column 0, the cost file would be shifted by one
    # (here the sentinel tail would even make the lengths agree, as the Yahoo file does with LightGBM)
    for command in (["cost", "m.txt", "train.svm"], ["train", "train.conf"]):
        assert main([*command, "--costs", "costs.txt"]) == 2
        assert ("train.svm has no feature id 0: if its ids start at 1 (SVMlight, Yahoo! LTR, MSLR), pass --one-based"
                in capsys.readouterr().err)
    Path("costs4.txt").write_text("1\n2\n3\n40\n")
    assert main(["cost", "m.txt", "train.svm", "--costs", "costs4.txt", "--zero-based"]) == 2
    assert ("has 4 costs for columns 0..3, but the data has 5 columns (0..4); if its first line"
            in capsys.readouterr().err)
    Path("costs7.txt").write_text("1\n2\n3\n40\n10000\n5\n")
    assert main(["cost", "m.txt", "train.svm", "--costs", "costs7.txt", "--one-based"]) == 2
    assert "has 6 costs for columns 1..6, but the data has 5 columns" in capsys.readouterr().err
    # run from elsewhere: the config's relative data path is relative to the working directory
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert main(["train", "../train.conf", "--costs", "../costs.txt", "--one-based"]) == 2
    assert ("training data file 'train.svm' does not exist (paths are relative to the directory"
            in capsys.readouterr().err)
    Path("x.csv").write_text("1,2,3\n")
    assert main(["train", "../train.conf", "--costs", "../costs.txt", "--one-based", "data=x.csv"]) == 2
    assert "x.csv is not a LibSVM file; --one-based is for LibSVM/SVMlight feature ids" in capsys.readouterr().err


def test_cost_reads_header_and_label_from_config(files, capsys):
    tmp, data, costs, X, y = files
    booster = lgb.train({"objective": "regression", "verbose": -1}, lgb.Dataset(X, y), 10)
    booster.save_model(tmp / "h.txt")
    named = tmp / "named.csv"
    named.write_text("a,b,c,target,d\n" + "\n".join(
        ",".join(f"{v:.17g}" for v in (*row[:3], label, row[3])) for row, label in zip(X, y)) + "\n")
    assert main(["cost", str(tmp / "h.txt"), str(named), "--costs", str(costs)]) == 2
    assert "line 1 is not numeric ('a,b,c,target,d'): if it is a header, pass --header" in capsys.readouterr().err
    conf = tmp / "named.conf"
    conf.write_text("header = true\nlabel_column = name:target\n")
    assert main(["cost", str(tmp / "h.txt"), str(named), "--costs", str(costs), "--config", str(conf),
                 "--format", "json"]) == 0
    expected = prediction_cost(booster, X, FeatureCosts(lazy=[1, 2, 5, 20]))
    assert json.loads(capsys.readouterr().out)["mean"] == pytest.approx(expected.mean, rel=1e-12)
    conf.write_text("header = true\nlabel_column = 3\nweight_column = 1\n")
    assert main(["cost", str(tmp / "h.txt"), str(named), "--config", str(conf)]) == 2
    assert "sets weight_column=1: the cost command reads label and features only" in capsys.readouterr().err
    conf.write_text("label_column = name:target\n")
    assert main(["cost", str(tmp / "h.txt"), str(named), "--costs", str(costs), "--config", str(conf)]) == 2
    assert "label_column='name:target' names a column: the file needs a header" in capsys.readouterr().err


@pytest.mark.parametrize(("text", "expected"), [
    ("1 qid:3 2:0.5 7:1\n0 qid:3 1:2\n", (1, 7)), ("1 0:1 3:2\n", (0, 3)), ("1 qid:1\n2 4:1 # c 9:1\n", (4, 4)),
    ("1,2,3\n", None), ("1 2:1 5:3 # x\n\n", (2, 5)), ("1 qid:2 4:1\n", (4, 4))])
def test_libsvm_id_range(tmp_path, text, expected):
    from lightgbm_cegb.cli import libsvm_id_range

    path = tmp_path / "data.svm"
    path.write_text(text)
    assert libsvm_id_range(path) == expected


@pytest.mark.parametrize("inherited", [signal.SIG_DFL, signal.SIG_IGN])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_train_forwards_sigterm_and_sigint_to_lightgbm(files, tmp_path, signum, inherited):
    """`lightgbm-cegb train` stopped by SIGTERM (a job scheduler, a container stop) left the LightGBM child
    training: the signal is forwarded, the CLI waits for the child and exits as it did (128 + the signal). Also
    when the CLI inherits the signal ignored, as a background job of a non-interactive shell does SIGINT: the
    child then inherited it ignored too, the forwarded signal did nothing and the CLI waited forever."""
    _, data, costs, _, _ = files
    fake = tmp_path / "lightgbm"
    fake.write_text("#!/bin/sh\n"
                    f"trap 'echo $$ > {tmp_path / 'stopped'}; exit 143' TERM\n"
                    f"trap 'echo $$ > {tmp_path / 'stopped'}; exit 130' INT\n"
                    f"echo $$ > {tmp_path / 'started.tmp'}; mv {tmp_path / 'started.tmp'} {tmp_path / 'started'}\n"
                    "while :; do sleep 0.05; done\n")
    fake.chmod(0o755)
    conf = tmp_path / "train.conf"
    conf.write_text(f"task = train\nobjective = regression\ndata = {data}\n")
    previous = signal.signal(signum, inherited)  # the CLI inherits this disposition
    try:
        cli = subprocess.Popen([*CLI, "train", str(conf), "--costs", str(costs), "--lightgbm", str(fake)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        signal.signal(signum, previous)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "started").exists():
            assert cli.poll() is None and time.monotonic() < deadline, f"the child never started: {cli.stderr.read()}"
            time.sleep(0.05)
        child = int((tmp_path / "started").read_text())
        cli.send_signal(signum)
        try:
            status = cli.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("lightgbm-cegb train did not end within 60 s of the signal: timed out")
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
        if (tmp_path / "started").exists() and not (tmp_path / "stopped").exists():
            try:  # a regression left the child running: end it here, then fail below
                os.kill(int((tmp_path / "started").read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert (tmp_path / "stopped").exists() and int((tmp_path / "stopped").read_text()) == child
    assert status == (143 if signum == signal.SIGTERM else 130)
    with pytest.raises(ProcessLookupError):  # ended and reaped: no process of that id is left
        os.kill(child, 0)


@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    """A 4-feature model and a 4-line cost file, for the cost command's bad inputs."""
    tmp = tmp_path_factory.mktemp("bad_input")
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 4))
    booster = lgb.train({"objective": "regression", "num_leaves": 4, "verbose": -1}, lgb.Dataset(X, X[:, 0]), 3)
    booster.save_model(tmp / "model.txt")
    (tmp / "costs.txt").write_text("1\n2\n3\n4\n")
    return tmp


@pytest.mark.parametrize(("data", "options", "message"), [
    (b"1,2,3,4,5\n0,1,2,3,4\n", ["--label-column", "9"],
     r"label_column=9 is beyond the data file's 5 columns \(0..4\)"),
    (b"1,2,3,4,5\n0,1,2,3,4\n", ["--label-column", "-1"],
     r"--label-column should be a column index >= 0, name:COLUMN or auto, got '-1'"),
    (b"1,2,3,4,5\n0,1,2,3\n1,2,3,4,5\n", [], r"line 2: 4 fields where the first row has 5: every row should have the "
                                             r"same columns"),
    (b"y,a,b,c,d\n1,2,3,4,5\n\n0,1,2\n", ["--header"], r"line 4: 3 fields where the first row has 5"),
    (b"1,2,3,4,5\n\xff\xfe,1,2,3,4\n", [], r"data file '.*data.csv' should be UTF-8 text, got byte 0xff on line 2"),
    # a ':' in a CSV field: read as LibSVM rows with no feature (all zero), exit 0
    (b"1,2:30,3,4,5\n0,1,2,3,4\n", ["--zero-based"], r"line 1 is not numeric \('1,2:30,3,4,5'\)"),
    (b"1,2,3,4,5\n0,1:2,2,3,4\n", [], r"line 2, column 1: expected a number or a missing value \('', 'na', 'NA', "
                                     r"'nan', 'NaN'\), got '1:2'"),
    (b"1 0:1.5 2:3\n1,2,3,4,5\n", ["--zero-based"], r"line 2: expected a LibSVM row \(a label, then index:value "
                                                    r"pairs\), got '1,2,3,4,5'"),
    (b"1,2,3,4,x\n", ["--header"], r"holds no rows"),
])
def test_cost_refuses_bad_data_files(small_model, tmp_path, capsys, data, options, message):
    (tmp_path / "data.csv").write_bytes(data)
    argv = ["cost", str(small_model / "model.txt"), str(tmp_path / "data.csv"), "--costs",
            str(small_model / "costs.txt"), *options]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("lightgbm-cegb: error: ") and re.search(message, err), err
    proc = subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=120)  # no traceback either
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and re.search(message, proc.stderr), proc.stderr


def test_cost_refuses_files_that_are_not_utf8(small_model, tmp_path, capsys):
    data = tmp_path / "data.csv"
    data.write_text("1,2,3,4,5\n0,1,2,3,4\n")
    costs = tmp_path / "costs.txt"
    costs.write_bytes(b"1\n\xff\n3\n4\n")
    assert main(["cost", str(small_model / "model.txt"), str(data), "--costs", str(costs)]) == 2
    assert re.search(r"cost file '.*costs.txt' should be UTF-8 text, got byte 0xff on line 2", capsys.readouterr().err)
    model = tmp_path / "model.txt"
    model.write_bytes((small_model / "model.txt").read_bytes() + b"\xfe\n")
    assert main(["cost", str(model), str(data), "--costs", str(small_model / "costs.txt")]) == 2
    assert re.search(r"model file '.*model.txt' should be UTF-8 text, got byte 0xfe on line \d+",
                     capsys.readouterr().err)
    config = tmp_path / "bad.conf"
    config.write_bytes(b"label_column = 0 # \xe9\n")
    assert main(["cost", str(small_model / "model.txt"), str(data), "--costs", str(small_model / "costs.txt"),
                 "--config", str(config)]) == 2
    assert re.search(r"config file '.*bad.conf' should be UTF-8 text", capsys.readouterr().err)
    config.write_text("label_column = -2\n")
    assert main(["cost", str(small_model / "model.txt"), str(data), "--costs", str(small_model / "costs.txt"),
                 "--config", str(config)]) == 2
    assert "label_column should be a column index >= 0, name:COLUMN or auto, got '-2'" in capsys.readouterr().err


def test_cost_still_reads_csv_with_missing_values_and_libsvm(small_model, tmp_path, capsys):
    X = np.array([[0.5, np.nan, 2.0, -1.0], [1.5, 0.0, -2.0, 3.0]])
    expected = prediction_cost(str(small_model / "model.txt"), X, np.array([1.0, 2.0, 3.0, 4.0]))
    (tmp_path / "a.csv").write_text("1,0.5,,2,-1\n0,1.5,0,-2,3\n")
    (tmp_path / "b.tsv").write_text("1\t0.5\tNA\t2\t-1\n0\t1.5\t0\t-2\t3\n")
    (tmp_path / "c.svm").write_text("1 0:0.5 1:nan 2:2 3:-1\n0 0:1.5 2:-2 3:3\n")
    for name in ("a.csv", "b.tsv", "c.svm"):
        assert main(["cost", str(small_model / "model.txt"), str(tmp_path / name), "--costs",
                     str(small_model / "costs.txt"), "--format", "json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["mean"] == pytest.approx(expected.mean, rel=1e-12), name


@pytest.fixture(scope="module")
def soil(tmp_path_factory):
    """Columns 2..4 a soil survey sold as one (a group), 1 and 5 another group: the label needs the survey."""
    tmp = tmp_path_factory.mktemp("groups")
    rng = np.random.default_rng(3)
    X = rng.normal(size=(1500, 6))
    y = X[:, 0] + X[:, 2] - X[:, 3] + 0.5 * X[:, 4] + 0.3 * X[:, 5] + rng.normal(0, 0.1, 1500)
    np.savetxt(tmp / "train.csv", np.column_stack([y, X]), delimiter=",", fmt="%.17g")
    (tmp / "grouped.txt").write_text("1\n2\n0\n0\n0\n3\ngroup soil 100 2-4\ngroup wild 5 1,5\n")
    (tmp / "flat.txt").write_text("1\n2\n0\n0\n0\n3\n")
    costs = FeatureCosts(lazy=[1, 2, 0, 0, 0, 3], groups={"soil": [2, 3, 4], "wild": [1, 5]},
                         group_lazy=[100.0, 5.0])
    params = {"objective": "regression", "verbose": -1, "deterministic": True, "num_threads": 2}
    api = lgb.train({**params, **costs.to_params(tradeoff=0.001)}, lgb.Dataset(X, y), 15)
    return tmp, X, y, costs, api


def _config(path, output: str, extra: str = "") -> Path:
    path.write_text(f"task = train\nobjective = regression\ndata = train.csv\nnum_iterations = 15\n"
                    f"output_model = {output}\nverbose = -1\ndeterministic = true\nnum_threads = 2\n{extra}")
    return path


def test_train_and_cost_with_group_lines_in_the_cost_file(soil, capsys, monkeypatch):
    """The grouped columns cost their group's fee once per row (not 0): trained as lgb.train with the same
    FeatureCosts, the model file names the groups, and the cost command reports them by name, from the model's
    parameters or from the cost file, in its table and its JSON, whatever the blocks it reads."""
    tmp, X, y, costs, api = soil
    monkeypatch.chdir(tmp)
    conf = _config(tmp / "grouped.conf", "grouped_model.txt")
    assert main(["train", str(conf), "--costs", "grouped.txt", "--tradeoff", "0.001"]) == 0
    model = lgb.Booster(model_file="grouped_model.txt")
    assert model.params["cegb_feature_group"] == [-1, 1, 0, 0, 0, 1]
    assert model.params["cegb_penalty_group_lazy"] == [100.0, 5.0]
    assert "[cegb_group_names=soil,wild: ]\n" in (tmp / "grouped_model.txt").read_text()
    np.testing.assert_allclose(model.predict(X), api.predict(X), rtol=1e-12)
    expected = prediction_cost(api, X, costs)
    assert expected.group_usage["soil"] == 1.0 and expected.mean >= 101  # the model reads the survey
    for options in ([], ["--costs", "grouped.txt"]):
        assert main(["cost", "grouped_model.txt", "train.csv", *options, "--format", "json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["mean"] == pytest.approx(expected.mean, rel=1e-12)
        assert report["group_usage"] == pytest.approx(expected.group_usage, rel=1e-12)
        assert list(report["group_usage"]) == ["soil", "wild"]
    monkeypatch.setattr("lightgbm_cegb.cli.CHUNK_ROWS", 7)  # group usage summed over the blocks read
    assert main(["cost", "grouped_model.txt", "train.csv", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["group_usage"] == pytest.approx(expected.group_usage, rel=1e-12)
    assert main(["cost", "grouped_model.txt", "train.csv"]) == 0
    table = capsys.readouterr().out
    assert "group usage (share of rows paying the group's cost):" in table
    assert re.search(r"\n  soil +100\.00%\n", table)
    assert re.search(rf"\n  wild +{100 * expected.group_usage['wild']:.2f}%\n", table)
    assert re.search(rf"mean cost per row +{expected.mean:.6g}\n", table)


def test_train_reads_duplicated_keys_and_aliases_as_lightgbm_does(soil, monkeypatch):
    """Issue 48 (12): train kept the last value of a duplicated key and preferred an alias over its canonical name,
    where LightGBM keeps the first value (command-line overrides before the file's lines) and the canonical name
    (else the shortest alias): a duplicated output_model ended a successful training in an error and a model
    without its group names."""
    tmp, X, *_ = soil
    monkeypatch.chdir(tmp)
    names = "[cegb_group_names=soil,wild: ]\n"
    cases = [  # (config's extra lines, overrides, the file LightGBM writes, files it must not write)
        ("output_model = second.txt\n", [], "first.txt", ["second.txt"]),
        ("model_out = alias.txt\n", [], "first.txt", ["alias.txt"]),
        ("", ["output_model=over.txt", "output_model=later.txt"], "over.txt", ["later.txt", "first.txt"]),
        ("", ["model_output=long_alias.txt", "model_out=short_alias.txt"], "first.txt", ["short_alias.txt"]),
        ("'output_model' = \"quoted.txt\"\nignored = a = b\n", ["output_model=quoted.txt"], "quoted.txt",
         ["first.txt"]),
    ]
    for extra, overrides, written, absent in cases:
        for name in {written, *absent}:
            (tmp / name).unlink(missing_ok=True)
        conf = _config(tmp / "dup.conf", "first.txt", extra)
        assert main(["train", str(conf), "--costs", "grouped.txt", "--tradeoff", "0.001", *overrides]) == 0, extra
        assert names in (tmp / written).read_text(), (extra, overrides)
        assert not any((tmp / name).exists() for name in absent), (extra, overrides)
    from lightgbm_cegb.cli import _key_value, _setting, read_config
    assert _key_value("  a = 'b'  ") == ("a", "b") and _key_value("a=b=c") is None and _key_value("a==b") == ("a", "b")
    assert _key_value("flag") == ("flag", "") and _key_value("=") is None
    assert read_config(conf, ["x=1", "x=2"])["x"] == "1"
    odd = tmp / "odd.conf"
    odd.write_bytes(b"data=train.csv= \r num_leaves = 7 # a comment\rverbose=-1\n")  # LightGBM trims, then splits
    assert read_config(odd) == {"data": "train.csv", "num_leaves": "7", "verbose": "-1"}
    assert _setting({"train_data_file": "a", "data_filename": "b", "train": "c"}, "data", "train_data_file",
                    "data_filename", "train") == "c"
    assert _setting({"train_data_file": "a", "data_filename": "b"}, "data", "train_data_file", "data_filename") == "b"


def test_train_with_group_keys_in_the_config(soil, capsys, monkeypatch):
    """A config (or overrides) may set cegb_feature_group and the group penalties next to a per-feature cost
    file; the cost command then takes the model's groups with the file's per-feature costs."""
    tmp, X, y, costs, api = soil
    monkeypatch.chdir(tmp)
    conf = _config(tmp / "keys.conf", "keys_model.txt", "cegb_feature_group = -1,1,0,0,0,1\n")
    assert main(["train", str(conf), "--costs", "flat.txt", "--tradeoff", "0.001", "--",
                 "cegb_penalty_group_lazy=100,5"]) == 0
    model = lgb.Booster(model_file="keys_model.txt")
    np.testing.assert_allclose(model.predict(X), api.predict(X), rtol=1e-12)
    expected = prediction_cost(api, X, costs)
    assert main(["cost", "keys_model.txt", "train.csv", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["mean"] == pytest.approx(expected.mean, rel=1e-12)
    assert report["group_usage"] == pytest.approx({"0": expected.group_usage["soil"],
                                                   "1": expected.group_usage["wild"]}, rel=1e-12)
    assert main(["cost", "keys_model.txt", "train.csv", "--costs", "flat.txt"]) == 0
    table = capsys.readouterr().out
    assert "group usage (share of rows paying the group's cost; groups from the model's parameters):" in table
    assert re.search(rf"mean cost per row +{expected.mean:.6g}\n", table)
    # groups in the config and in the cost file: refused, naming both
    assert main(["train", str(conf), "--costs", "grouped.txt"]) == 2
    assert ("keys.conf or the overrides set ['cegb_feature_group'], and the cost file grouped.txt has group lines: "
            "give the groups in one of them") in capsys.readouterr().err
    assert main(["train", str(_config(tmp / "plain.conf", "x.txt")), "--costs", "grouped.txt", "--",
                 "cegb_penalty_group_lazy=1,1"]) == 2
    assert "set ['cegb_penalty_group_lazy'], and the cost file grouped.txt" in capsys.readouterr().err
    # the per-feature keys stay refused: the cost file gives them
    assert main(["train", str(conf), "--costs", "flat.txt", "--", "cegb_penalty_feature_lazy=1,1,1,1,1,1"]) == 2
    assert "already set ['cegb_penalty_feature_lazy']" in capsys.readouterr().err


def test_train_coupled_groups_and_bad_group_lines(soil, capsys, monkeypatch):
    tmp, X, y, costs, _ = soil
    monkeypatch.chdir(tmp)
    conf = _config(tmp / "coupled.conf", "coupled_model.txt")
    assert main(["train", str(conf), "--costs", "grouped.txt", "--kind", "coupled", "--tradeoff", "0.001"]) == 0
    model = lgb.Booster(model_file="coupled_model.txt")
    assert model.params["cegb_penalty_feature_coupled"] == [1.0, 2.0, 0.0, 0.0, 0.0, 3.0]
    assert model.params["cegb_penalty_group_coupled"] == [100.0, 5.0]
    assert not model.params.get("cegb_penalty_group_lazy")
    assert main(["cost", "coupled_model.txt", "train.csv", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    used = prediction_cost(model, X, FeatureCosts(coupled=[1, 2, 0, 0, 0, 3], groups=costs.groups,
                                                  group_coupled=[100.0, 5.0]))
    assert report["coupled"] == used.coupled >= 100 and list(report["group_usage"]) == ["soil", "wild"]
    (tmp / "bad.txt").write_text("1\n2\n0\n0\n0\n3\ngroup soil 100 2-9\n")
    for command in (["train", str(conf)], ["cost", "coupled_model.txt", "train.csv"]):
        assert main([*command, "--costs", "bad.txt"]) == 2
        assert ("bad.txt:7: group 'soil' names column 9, beyond the 6 columns the file's costs cover (0..5)"
                in capsys.readouterr().err)


@pytest.fixture(scope="module")
def named_model(tmp_path_factory):
    """A model trained on named columns f0..f3 (its rows read f3 only where f0 > 0: a shifted column costs
    otherwise), its costs (a cost file and JSON) and rows."""
    tmp = tmp_path_factory.mktemp("named")
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 4))
    y = np.where(X[:, 0] > 0, 3 * X[:, 3], 0.0) + rng.normal(0, 0.1, 300)
    booster = lgb.train({"objective": "regression", "num_leaves": 3, "verbose": -1}, lgb.Dataset(
        X, y, feature_name=["f0", "f1", "f2", "f3"]), 10)
    booster.save_model(tmp / "model.txt")
    (tmp / "costs.txt").write_text("1\n2\n5\n20\n")
    (tmp / "costs.json").write_text(json.dumps(FeatureCosts(lazy=[1.0, 2.0, 5.0, 20.0]).fields()))
    return tmp, booster, X, y


def _csv(path: Path, header: list[str], columns: list[np.ndarray]) -> Path:
    path.write_text(",".join(header) + "\n" + "\n".join(",".join(f"{v:.17g}" for v in row)
                                                        for row in np.column_stack(columns)) + "\n")
    return path


def test_a_header_named_csv_is_read_by_name(named_model, tmp_path, capsys):
    """Issue 61 (16): `cost MODEL test.csv --header` without --label-column, on a CSV whose label is the last
    column, took the first feature as the label and shifted every column, silently. The header is read by the
    model's feature names: the other column is the label, in any order; what cannot be aligned is refused."""
    tmp, booster, X, y = named_model
    expected = prediction_cost(booster, X, FeatureCosts(lazy=[1, 2, 5, 20])).mean

    def mean(path, *options):
        assert main(["cost", str(tmp / "model.txt"), str(path), "--costs", str(tmp / "costs.txt"), "--header",
                     "--format", "json", *options]) == 0, capsys.readouterr().err
        return json.loads(capsys.readouterr().out)["mean"]

    last = _csv(tmp_path / "last.csv", ["f0", "f1", "f2", "f3", "label"], [*X.T, y])
    assert mean(last) == pytest.approx(expected, rel=1e-12)
    shuffled = _csv(tmp_path / "shuffled.csv", ["f3", "label", "f1", "f0", "f2"], [X[:, 3], y, X[:, 1], X[:, 0],
                                                                                     X[:, 2]])
    assert mean(shuffled) == pytest.approx(expected, rel=1e-12)
    assert mean(shuffled, "--label-column", "name:label") == pytest.approx(expected, rel=1e-12)  # as docs/CLI.md
    assert mean(shuffled, "--label-column", "1") == pytest.approx(expected, rel=1e-12)
    first = _csv(tmp_path / "first.csv", ["label", "f0", "f1", "f2", "f3"], [y, *X.T])
    assert mean(first, "--label-column", "auto") == pytest.approx(expected, rel=1e-12)
    for header, columns, options, message in [
        (["f0", "f1", "x", "f3", "label"], [*X.T, y], [],
         r"the header's columns \['f0', 'f1', 'x', 'f3', 'label'\] are read by name, as the model names its 4 "
         r"features \['f0', 'f1', 'f2', 'f3'\]: it lacks \['f2'\]"),
        (["f0", "f1", "f2", "f3", "label", "id"], [*X.T, y, y], [],
         r"the header's columns \['label', 'id'\] are not the model's features: name the label with --label-column "
         r"name:COLUMN"),
        (["f0", "f1", "f2", "f3", "label", "id"], [*X.T, y, y], ["--label-column", "name:label"],
         r"the header's columns \['id'\] are neither the label nor the model's features"),
        (["f0", "f1", "f2", "f3", "label"], [*X.T, y], ["--label-column", "0"],
         r"the label column 0 \('f0'\) is a feature of the model"),
    ]:
        path = _csv(tmp_path / "bad.csv", header, columns)
        assert main(["cost", str(tmp / "model.txt"), str(path), "--costs", str(tmp / "costs.txt"), "--header",
                     *options]) == 2
        assert re.search("error: " + message, capsys.readouterr().err)


def test_cost_takes_what_serve_takes(named_model, tmp_path, capsys):
    """Issue 61 (17): `cost` refused the JSON costs and the saved Selection folder that `serve` accepts, and worded a
    missing --costs in Python's terms ("pass costs=FeatureCosts(...)"); a saved estimator of the package is priced by
    its own accounting."""
    from lightgbm_cegb import StagedAcquisitionClassifier
    from lightgbm_cegb.selection import Selection

    tmp, booster, X, y = named_model
    costs = FeatureCosts(lazy=[1.0, 2.0, 5.0, 20.0])
    data = _csv(tmp_path / "data.csv", ["f0", "f1", "f2", "f3", "label"], [*X.T, y])

    def report(model, *options):
        assert main(["cost", str(model), str(data), "--header", "--format", "json", *options]) == 0, \
            capsys.readouterr().err
        return json.loads(capsys.readouterr().out)

    expected = prediction_cost(booster, X, costs)
    assert report(tmp / "model.txt", "--costs", str(tmp / "costs.json"))["mean"] == pytest.approx(expected.mean)
    Selection("lightgbm", {}, booster, None, 0.9, 12.0, costs=costs).save(tmp_path / "choice")
    assert report(tmp_path / "choice")["mean"] == pytest.approx(expected.mean, rel=1e-12)
    frame = pd.DataFrame(X, columns=["f0", "f1", "f2", "f3"])
    staged = StagedAcquisitionClassifier(feature_costs=costs).fit(frame, (y > 0).astype(int))
    staged.save(tmp_path / "staged")
    answer = report(tmp_path / "staged")
    assert answer["mean"] == pytest.approx(staged.prediction_cost(frame).mean, rel=1e-12)
    assert main(["cost", str(tmp / "model.txt"), str(data), "--header"]) == 2
    assert re.search(r"error: --costs is needed: the model .*model.txt holds no costs \(it was not trained with "
                     r"cegb_\* parameters\); give them with --costs FILE", capsys.readouterr().err)
    assert main(["cost", str(tmp / "model.txt"), str(data), "--header", "--costs", str(tmp / "costs.json"),
                 "--one-based"]) == 2
    assert "--one-based moves the lines of a cost file; " in capsys.readouterr().err
