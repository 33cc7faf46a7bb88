"""The main job (make demo) on its bundled data: the budget workflow's table, its choices never below CEGB's or the
cheap subset's on the validation rows, and the choice served lazily as the model predicts."""

from __future__ import annotations

import re

import pytest

from lightgbm_cegb import demo

QUICK = ["--methods", "cegb", "staged_acquisition", "--fractions", "0.1", "0.3"]


@pytest.mark.long
def test_demo_table(capsys):
    demo.main(QUICK)
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if line.startswith(("LightGBM", "within", "  cegb", "  cheap_subset"))]
    plain = next(line for line in table if line.startswith("LightGBM")).split()
    plain_cost, plain_auc = float(plain[-3]), float(plain[-4])
    assert plain_auc > 0.75 and 80 < plain_cost <= 91
    budgets = [float(b) for b in re.findall(r"^within ([\d.]+):", "\n".join(table), re.M)]
    assert budgets == sorted(budgets) and len(budgets) == 2 and budgets[1] < 0.35 * plain_cost
    by_budget: dict[float, dict[str, float]] = {}
    for line in table:
        found = re.match(r"\s*(?:within ([\d.]+): (\S+)|(\S+) within ([\d.]+))\s+([\d.]+)", line)
        if found:
            budget = float(found.group(1) or found.group(4))
            by_budget.setdefault(budget, {})["chosen" if found.group(1) else found.group(3)] = float(found.group(5))
    for valid_auc in by_budget.values():  # the choice is the best on validation within its budget
        assert valid_auc["chosen"] >= max(valid_auc.values())
    served = re.search(r"Served lazily .*: ([\d,]+) of the ([\d,]+) test values fetched in (\d+) calls, "
                       r"[\d.]+ per event; predictions equal to the model's own", out)
    assert served, out
    assert 0 < int(served.group(1).replace(",", "")) < int(served.group(2).replace(",", ""))


@pytest.mark.long
def test_the_demo_runs_with_its_default_methods(capsys):
    """``make demo`` passes no --methods: fit_within_budget's own defaults for a binary task (BUDGET_METHODS holds the
    ranker's and the regressor's too, which a binary sweep refuses)."""
    demo.main(["--fractions", "0.1"])
    assert re.search(r"^within [\d.]+: \S+", capsys.readouterr().out, re.M)


def test_demo_figure(tmp_path, capsys):
    path = tmp_path / "demo.png"
    demo.main(QUICK[:3] + ["--fractions", "0.2", "--plot", str(path)])
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert [p.name for p in tmp_path.iterdir()] == ["demo.png"]  # no temporary file left beside it
    assert f"figure written to {path}" in capsys.readouterr().out
