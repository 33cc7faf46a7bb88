"""scripts/seed_frontiers.py runs end to end (quick sweeps on the bundled HIGGS subset) and writes a table
with every method's points."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "seed_frontiers.py"


def test_quick_frontiers_on_higgs(tmp_path):
    result = subprocess.run([sys.executable, str(SCRIPT), "--data", "higgs", "--quick", "--out", str(tmp_path)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    with open(tmp_path / "seed_frontiers_higgs.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert {row["method"] for row in rows} == {"CEGB", "BudgetRF", "Early Exit"}
    for row in rows:
        assert 0.0 <= float(row["quality"]) <= 1.0 and 0.0 <= float(row["cost"]) <= 91.0
    costs = {row["setting"]: float(row["cost"]) for row in rows if row["method"] == "BudgetRF"}
    assert costs["alpha=2 trees=1"] <= costs["alpha=2 trees=5"]  # more trees never cost less
