"""scripts/reproduce_yahoo.py runs end to end in CI: on the synthetic Yahoo-shaped stand-in (written as 1-based
SVMlight files with the real cost vector and read back by load_svmlight) and on the bundled MSLR subset."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "reproduce_yahoo.py"


@pytest.mark.parametrize("data", ["synthetic", "mslr"])
def test_reproduce_yahoo_quick(tmp_path, data):
    try:
        result = subprocess.run([sys.executable, str(SCRIPT), "--data", data, "--quick", "--queries", "120",
                                 "--rounds", "100", "--out", str(tmp_path)], capture_output=True, text=True,
                                timeout=1200)
    except subprocess.TimeoutExpired:
        pytest.fail("reproduce_yahoo.py timed out after 1200 s")
    assert result.returncode == 0, result.stderr[-3000:]
    report = (tmp_path / f"yahoo_{data}.md").read_text()
    assert report.count("| method | budget") == 2
    report_sections = dict(zip(("i", "ii"), report.split("## setting")[1:]))
    trained = "CEGB deep trained to the budget"
    for setting, methods in (("i", {"LightGBM", "BudgetPrune", "Early Exit", "CEGB 16 leaves, depth 4", "CEGB deep",
                                    "CEGB deep, breadth-first", "Greedy Miser", trained}),
                             ("ii", {"LightGBM", "BudgetPrune", "Early Exit", "CEGB", "BudgetRF", "Greedy Miser",
                                     trained})):
        frame = pd.read_csv(tmp_path / f"yahoo_{data}_{setting}.csv")
        assert set(frame["method"]) == methods
        assert frame["test_quality"].between(0, 1).all() and (frame["test_cost"] >= 0).all()
        assert (tmp_path / f"yahoo_{data}_{setting}.png").stat().st_size > 1000
        cegb = frame[frame["method"].str.startswith("CEGB")]
        plain = frame[frame["method"] == "LightGBM"]
        assert cegb["cost"].min() < plain["cost"].min()  # the trade-off buys cost on validation
        budgets = [float(b) for b in re.findall(r"budget ([0-9.e+]+)", report_sections[setting])]
        assert len(budgets) == 3 and (frame[frame["method"] == trained]["cost"] <= max(budgets) + 1e-9).all()


def test_the_stand_in_puts_the_signal_in_the_expensive_or_the_cheap_features(tmp_path):
    """--signal: the mean absolute correlation of a feature with the labels grows with its cost ("expensive",
    the paper's assumption) or shrinks with it ("cheap")."""
    sys.path.insert(0, str(SCRIPT.parent))
    from reproduce_yahoo import synthetic

    from lightgbm_cegb.datasets import load_svmlight, yahoo_costs

    costs = yahoo_costs()
    by_cost = {}
    for signal_in in ("expensive", "cheap"):
        (tmp_path / signal_in).mkdir()
        data = load_svmlight(synthetic(tmp_path / signal_in, 200, signal_in=signal_in)["train"], costs)
        X, y = np.nan_to_num(data.X.toarray() if hasattr(data.X, "toarray") else np.asarray(data.X, float)), data.y
        varied = X.std(axis=0) > 0
        corr = np.zeros(X.shape[1])
        corr[varied] = np.abs([np.corrcoef(X[:, j], y)[0, 1] for j in np.flatnonzero(varied)])
        lazy = costs.lazy[:X.shape[1]]
        by_cost[signal_in] = (corr[(lazy <= 5) & varied].mean(), corr[(lazy >= 100) & (lazy < 10000) & varied].mean())
    assert by_cost["expensive"][1] > 1.5 * by_cost["expensive"][0]
    assert by_cost["cheap"][0] > 1.5 * by_cost["cheap"][1]
