"""scripts/frontiers.py runs end to end (quick sweeps on the bundled HIGGS subset): every registered method
that classifies has points, measured on validation and test rows, and the report holds the budget table."""

from __future__ import annotations

import re

import pandas as pd
from references import run_script


def test_quick_frontiers_on_higgs(tmp_path):
    run_script("frontiers.py", "--data", "higgs", "--quick", "--rounds", "100", "--out", str(tmp_path))
    frame = pd.read_csv(tmp_path / "frontier_higgs.csv")
    assert set(frame["method"]) == {"LightGBM", "CEGB", "BudgetPrune", "BudgetPrune (random forest)",
                                   "Early Exit", "BudgetRF", "Greedy Miser", "ADAPT-GBRT", "ADAPT-LIN", "CSTC", "CSCC",
                                   "Cronus", "CEGB trained to the budget", "Cheap subset (baseline)"}
    assert frame["test_quality"].between(0, 1).all() and frame["test_cost"].between(0, 91).all()
    assert "| Greedy Miser |" in (tmp_path / "frontier_higgs.md").read_text()
    assert frame["cost"].between(0, 91).all()
    report = (tmp_path / "frontier_higgs.md").read_text()
    assert "| method | budget" in report and "| BudgetRF |" in report
    budgets = [float(b) for b in re.findall(r"budget ([0-9.e+]+)", report)]
    trained = frame[frame["method"] == "CEGB trained to the budget"]
    assert len(budgets) == 3 and len(trained) >= 1 and (trained["cost"] <= max(budgets) + 1e-9).all()
    assert (tmp_path / "frontier_higgs.png").stat().st_size > 1000
