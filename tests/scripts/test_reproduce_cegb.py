"""scripts/reproduce_cegb.py runs the CEGB paper's MiniBooNE experiment end to end on a small file in the public
format (quick grids, two random splits): the methods the paper compares, in each split, and the table of means
with intervals; and it names a bad --data."""

from __future__ import annotations

import subprocess

import numpy as np
import pandas as pd
from conftest import ROOT
from references import run_script, script


def miniboone_file(path, n_signal=300, n_background=300):
    """MiniBooNE_PID.txt's format: 'n_signal n_background', then the signal rows, then the background rows."""
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(n_signal + n_background, 50))
    rows[:n_signal, :5] += 1.0  # the signal differs in a few columns
    lines = [f"{n_signal:>10d}{n_background:>10d}"] + ["".join(f"{v:>13.5E}" for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_miniboone_experiment(tmp_path):
    data = miniboone_file(tmp_path / "MiniBooNE_PID.txt")
    run_script("reproduce_cegb", "--data", "miniboone", str(data), "--sizes", "240", "120", "120", "--quick",
               "--splits", "2", "--rounds", "30", "--out", str(tmp_path))
    frame = pd.read_csv(tmp_path / "cegb_miniboone.csv")
    expected = {"LightGBM", "CEGB", "Greedy Miser", "BudgetPrune (random forest)", "CEGB trained to the budget"}
    assert set(frame["method"]) == expected and set(frame["split"]) == {0, 1}
    for _, points in frame.groupby("split"):
        assert expected - {"CEGB trained to the budget"} <= set(points["method"])
    assert frame["test_cost"].between(0, 50).all()
    report = (tmp_path / "cegb_miniboone.md").read_text()
    assert "figure 2c" in report and "| BudgetPrune (random forest) |" in report and " ± " in report


def test_bad_data_is_named(tmp_path):
    proc = subprocess.run([*script("reproduce_cegb"), "--data", "iris", "x.txt"], capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.returncode == 2 and "--data takes a name (miniboone, covertype, hepmass)" in proc.stderr
    proc = subprocess.run([*script("reproduce_cegb"), "--data", "miniboone", str(tmp_path / "missing.txt")],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode != 0 and "missing.txt' does not exist" in proc.stderr
