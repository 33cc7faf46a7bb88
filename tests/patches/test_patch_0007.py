"""Patch 0007: memory safety and hostile input in the CEGB parts of LightGBM.

- a refused ``reset_parameter`` leaves the booster on its previous config (the tree learner kept a pointer to
  the refused config, freed while unwinding: later updates read freed memory, added no tree or crashed);
- ``cegb_feature_group`` ids parsed strictly and bounded by the number of features;
- the trees of an init model checked where CEGB reads them (features outside the data, broken structure);
- penalties whose total over the training rows overflows refused;
- the command-line program's temporary leaves file created exclusively, its output model replaced atomically.

Cases that could crash run in a child process (``run_python``), so a crash fails the test.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pytest
from conftest import CLI, ON_STOCK, RESET_TOOLS, run_python

BASE = {"objective": "regression", "verbose": -1, "deterministic": True, "num_threads": 1, "seed": 3,
        "num_leaves": 8, "min_data_in_leaf": 5}


def make_data(n: int = 600, f: int = 6, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f))
    return X, X[:, 0] + 0.5 * X[:, 1] * (X[:, 2] > 0) + rng.normal(0, 0.3, n)


RESET = textwrap.dedent("""
    import lightgbm as lgb, numpy as np
""") + RESET_TOOLS + textwrap.dedent("""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 6)); y = X[:, 0] + 0.5 * X[:, 1] * (X[:, 2] > 0) + rng.normal(0, 0.3, 600)
    params = {"objective": "regression", "verbose": -1, "deterministic": True, "num_threads": 1, "seed": 3,
              "num_leaves": 8, "min_data_in_leaf": 5, "cegb_tradeoff": 0.1,
              "cegb_penalty_feature_lazy": [1.0] * 6, **GROUPS}
    def booster():
        return lgb.Booster(params, lgb.Dataset(X, y, params={"verbose": -1}))
    refused, reference = booster(), booster()
    for b in (refused, reference):
        for _ in range(3):
            b.update()
    refuse(refused, BAD)
    in_step(refused, reference, 5)
    assert refused.num_trees() == reference.num_trees() == 8, (refused.num_trees(), reference.num_trees())
    refused.reset_parameter({"learning_rate": 0.05})  # the refused values were not kept either
    reference.reset_parameter({"learning_rate": 0.05})
    in_step(refused, reference, 1)
    print("OK")
""")


@pytest.mark.upstream_bug
def test_a_refused_reset_leaves_the_booster_on_its_previous_config():
    """Stock LightGBM has the pattern: lazy penalties of the wrong length are refused by its tree learner
    after it took the new config's address; the booster then reads freed memory and adds no tree."""
    proc = run_python(RESET.replace("BAD", repr({"cegb_penalty_feature_lazy": [1.0] * 5})).replace("GROUPS", "{}"))
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr
    assert "REFUSED cegb_penalty_feature_lazy should have one value per feature" in proc.stdout, proc.stdout


@pytest.mark.skipif(ON_STOCK, reason="cegb_feature_group and group penalties are the patch series' parameters")
@pytest.mark.parametrize("bad, message", [
    ({"cegb_feature_group": [0, 1, 2, 2, -1, -1]}, "cegb_penalty_group_lazy should have one value per group"),
    ({"cegb_penalty_group_lazy": [1.0]}, "cegb_penalty_group_lazy should have one value per group"),
    ({"cegb_penalty_feature_coupled": [1.0] * 7}, "cegb_penalty_feature_coupled should have one value per feature"),
    ({"cegb_feature_group": [2147483647] + [-1] * 5}, "cegb_feature_group should hold -1 (no group) or group ids"),
    ({"cegb_feature_group": "0,1e3,1,1,-1,-1"}, "cegb_feature_group should be a comma-separated list of integers"),
])
def test_every_refusal_of_a_reset_leaves_the_booster_as_it_was(bad, message):
    """Patch 0005's refusals (groups, group penalties) and 0007's (group ids) on a booster with groups."""
    groups = {"cegb_feature_group": [0, 0, 1, 1, -1, -1], "cegb_penalty_group_lazy": [2.0, 3.0]}
    proc = run_python(RESET.replace("BAD", repr(bad)).replace("GROUPS", repr(groups)))
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr
    assert f"REFUSED {message}" in proc.stdout, proc.stdout


@pytest.mark.parametrize("ids, message", [
    ("1e3", "'1e3'"), ("1.7", "'1.7'"), ("a", "'a'"), ("0x10", "'0x10'"), ("4294967295", "'4294967295'"),
])
def test_group_ids_are_parsed_strictly(ids, message):
    X, y = make_data(f=3)
    params = {**BASE, "cegb_feature_group": f"0,{ids},-1", "cegb_penalty_group_lazy": [1.0]}
    with pytest.raises(lgb.basic.LightGBMError, match=f"cegb_feature_group should be a comma-separated list of "
                                                      f"integers, got {message} for feature 1"):
        lgb.train(params, lgb.Dataset(X, y), 1)


@pytest.mark.parametrize("group_id", [2147483647, 3, 100_000_000])
def test_group_ids_are_bounded_by_the_number_of_features(group_id):
    """An id of 2**31 - 1 made the group count overflow (a crash at the first split); 1e8 made the ledger
    3.76 GB on 300 rows. Ids are -1 or below the number of features."""
    code = textwrap.dedent(f"""
        import lightgbm as lgb, numpy as np
        X = np.random.default_rng(0).normal(size=(300, 3)); y = X[:, 0]
        params = {{"objective": "regression", "verbose": -1, "cegb_feature_group": [0, {group_id}, -1],
                   "cegb_penalty_group_lazy": [1.0] * {min(group_id, 10) + 1}}}
        try:
            lgb.train(params, lgb.Dataset(X, y), 2)
        except lgb.basic.LightGBMError as exc:
            print("REFUSED", str(exc).splitlines()[0])
    """)
    proc = run_python(code)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (f"REFUSED cegb_feature_group should hold -1 (no group) or group ids from 0 to 2 (fewer groups than the "
            f"training data's 3 features), got {group_id} for feature 1") in proc.stdout, proc.stdout


def init_model_text(num_features_in_model: int, feature: int) -> str:
    """A one-tree model over ``num_features_in_model`` features whose root splits on ``feature``."""
    X = np.random.default_rng(1).normal(size=(200, num_features_in_model))
    text = lgb.train({**BASE, "num_leaves": 2}, lgb.Dataset(X, X[:, 0]), 1).model_to_string()
    return text.replace("split_feature=0\n", f"split_feature={feature}\n")


@pytest.mark.upstream_bug
@pytest.mark.parametrize("feature", [3, 1000, -1])
def test_a_model_splitting_on_a_feature_it_does_not_have_is_refused_where_it_is_read(feature, tmp_path):
    """max_feature_idx=2 and a split on feature 3, 1000 or -1: stock LightGBM loads the model, then reads out
    of bounds in prediction and writes out of bounds counting feature importance (heap corruption when it is
    continued: 'double free or corruption', found by tests/patches/test_fuzz_cegb.py)."""
    path = tmp_path / "model.txt"
    path.write_text(init_model_text(3, feature))
    code = textwrap.dedent(f"""
        import lightgbm as lgb
        for source in ({{"model_file": {str(path)!r}}}, {{"model_str": open({str(path)!r}).read()}}):
            try:
                lgb.Booster(**source)
            except lgb.basic.LightGBMError as exc:
                print("REFUSED", str(exc).splitlines()[0])
    """)
    proc = run_python(code)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count(f"REFUSED Model format error: node 0 of tree 0 splits on feature {feature}, but the "
                             f"model has 3 features (max_feature_idx=2)") == 2, proc.stdout


@pytest.mark.upstream_bug
def test_a_model_whose_child_is_outside_the_tree_is_refused(tmp_path):
    text = init_model_text(3, 0).replace("left_child=-1\n", "left_child=-7\n")
    code = textwrap.dedent(f"""
        import lightgbm as lgb
        try:
            lgb.Booster(model_str={text!r})
        except lgb.basic.LightGBMError as exc:
            print("REFUSED", str(exc).splitlines()[0])
    """)
    proc = run_python(code)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "REFUSED Model format error: node 0 of tree 0 with 2 leaves has a child -7 outside the tree" in proc.stdout


@pytest.mark.parametrize("penalty", ["cegb_penalty_feature_coupled", "cegb_penalty_feature_lazy"])
def test_an_init_model_over_more_features_than_the_data_is_refused_or_trains(penalty, tmp_path):
    """An init model over 6 features (its root on feature 5) continued on data with 3: patch 0003's
    bookkeeping of its trees indexed the data's features with the model's (out of bounds). Now LightGBM refuses
    the data (or trains, the feature neither bought nor paid); nothing crashes."""
    path = tmp_path / "init.txt"
    path.write_text(init_model_text(6, 5))
    code = textwrap.dedent(f"""
        import lightgbm as lgb, numpy as np
        X = np.random.default_rng(0).normal(size=(400, 3)); y = X[:, 0]
        params = {{"objective": "regression", "verbose": -1, "{penalty}": [1.0, 1.0, 1.0], "cegb_tradeoff": 0.01}}
        try:
            print("TREES", lgb.train(params, lgb.Dataset(X, y), 3, init_model={str(path)!r}).num_trees())
        except lgb.basic.LightGBMError as exc:
            print("REFUSED", str(exc).splitlines()[0])
    """)
    proc = run_python(code)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "TREES 4" in proc.stdout or "REFUSED The number of features in data (3) is not the same" in proc.stdout, \
        proc.stdout


@pytest.mark.skipif(ON_STOCK, reason="the totals are checked by the patch series' CEGB")
@pytest.mark.parametrize("params, name", [
    ({"cegb_penalty_split": float("inf")}, "cegb_penalty_split"),
    ({"cegb_penalty_split": 1e308, "cegb_tradeoff": 0.0}, "cegb_penalty_split"),
    ({"cegb_penalty_feature_lazy": [1e308, 1.0, 1.0], "cegb_tradeoff": 0.0}, "cegb_penalty_feature_lazy"),
    ({"cegb_penalty_feature_coupled": [1.0, 1e306, 1.0], "cegb_tradeoff": 1e5}, "cegb_penalty_feature_coupled"),
])
def test_penalties_whose_total_overflows_are_refused(params, name):
    X, y = make_data(n=300, f=3)
    with pytest.raises(lgb.basic.LightGBMError, match=f"{name}: .* per row over the 300 training rows .* overflows"):
        lgb.train({**BASE, **params}, lgb.Dataset(X, y), 1)


def cli_continue(tmp_path, output: Path, extra: str = "") -> subprocess.CompletedProcess:
    X, y = make_data(n=400, f=4)
    init = lgb.train(BASE, lgb.Dataset(X, y), 2)
    init.save_model(tmp_path / "init.txt")
    data = tmp_path / "train.csv"
    np.savetxt(data, np.column_stack([y, X]), delimiter=",", fmt="%.17g")
    conf = tmp_path / "train.conf"
    conf.write_text(f"task = train\nobjective = regression\ndata = {data}\ninput_model = {tmp_path / 'init.txt'}\n"
                    f"num_leaves = 4\nnum_iterations = 2\noutput_model = {output}\nverbose = -1\n"
                    f"cegb_tradeoff = 0.01\ncegb_penalty_feature_lazy = 1,1,1,1\n{extra}")
    return subprocess.run([str(CLI), f"config={conf}"], capture_output=True, text=True, timeout=600)


@pytest.mark.skipif(ON_STOCK, reason="the stock wheel has no command-line program")
def test_cli_leaves_a_planted_file_or_symlink_alone(tmp_path):
    """The leaves of the init model went to '<output_model>.cegb-init-leaves.tmp', a fixed name: a symlink
    planted there had its target overwritten, a user's file of that name was overwritten and deleted."""
    output = tmp_path / "out.txt"
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    planted = tmp_path / "out.txt.cegb-init-leaves.tmp"
    planted.symlink_to(victim)
    proc = cli_continue(tmp_path, output)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert victim.read_text() == "precious\n" and planted.is_symlink()
    assert lgb.Booster(model_file=str(output)).num_trees() == 4
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == [planted.name]


@pytest.mark.skipif(ON_STOCK, reason="the stock wheel has no command-line program")
def test_cli_replaces_its_output_model_atomically(tmp_path):
    """The output model was opened with truncation and written in place (a kill mid-write left a damaged
    model). Now it is written beside and renamed onto the output: a hard link to the previous file keeps the
    previous model, and no temporary file is left."""
    output = tmp_path / "out.txt"
    output.write_text("the previous model\n")
    os.link(output, tmp_path / "previous.txt")
    proc = cli_continue(tmp_path, output)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "previous.txt").read_text() == "the previous model\n"
    assert lgb.Booster(model_file=str(output)).num_trees() == 4
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.skipif(ON_STOCK, reason="the stock wheel has no command-line program")
def test_cli_refuses_an_unwritable_output_without_touching_it(tmp_path):
    missing = tmp_path / "no such folder" / "out.txt"
    proc = cli_continue(tmp_path, missing)
    assert proc.returncode != 0 and not missing.parent.exists()
    assert "Could not create a temporary file beside" in proc.stdout + proc.stderr
