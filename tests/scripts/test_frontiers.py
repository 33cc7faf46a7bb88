"""scripts/frontiers.py runs end to end (quick sweeps on the bundled HIGGS subset, two random splits): every
registered method that classifies has points in each split, measured on validation and test rows, and the report
holds the table of means with their 95% intervals; the table's statistics against scipy's."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from references import run_script
from scipy import stats

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.selection.cstc_family import CSTC_RELATIVE_TRADEOFFS
from lightgbm_cegb.selection.greedy_family import ADAPT_GBRT_GRID
from scripts import protocol
from scripts.frontiers import TRICK, TRICK_DEPTHS, frontier_runs
from scripts.protocol import (
    earlier_points,
    earlier_rounds,
    interval,
    interval_table,
    merged,
    method_rounds,
    protocol_parser,
)


@pytest.mark.long
def test_quick_frontiers_on_higgs(tmp_path):
    run_script("frontiers", "--data", "higgs", "--quick", "--splits", "2", "--rounds", "100",
               "--method-rounds", "greedy_miser=30", "--out", str(tmp_path))
    frame = pd.read_csv(tmp_path / "frontier_higgs.csv")
    assert set(frame["split"]) == {0, 1}
    for _, points in frame.groupby("split"):
        assert {"LightGBM", "CEGB", "Greedy Miser", "BudgetRF", "Cheap subset (baseline)"} <= set(points["method"])
    assert set(frame["method"]) == {"LightGBM", "CEGB", "BudgetPrune", "BudgetPrune (random forest)", "Early Exit",
                                   "BudgetRF", "Greedy Miser", "ADAPT-GBRT", "ADAPT-LIN", "ADAPT's L1 baseline", "CSTC",
                                   "CSTC without polish", "CSTC, boosting trick",
                                   "CSTC, boosting trick, without polish", "CSCC", "Cronus",
                                   "CEGB trained to the budget", "Cheap subset (baseline)", "Adaptive acquisition",
                                   "Staged acquisition", "CatBoost (feature penalties)"}
    assert frame["test_quality"].between(0, 1).all() and frame["test_cost"].between(0, 91).all()
    assert "| Greedy Miser |" in (tmp_path / "frontier_higgs.md").read_text()
    assert frame["cost"].between(0, 91).all()
    report = (tmp_path / "frontier_higgs.md").read_text()
    assert "| method | 0.1 x plain | 0.25 x plain | 0.5 x plain | any cost |" in report and "| BudgetRF |" in report
    assert "--splits 2" in report and re.search(r"\| LightGBM \|.* 0\.\d{4} ± 0\.\d{4} @ ", report)
    assert "--splits 2 --quick --rounds 100 --method-rounds greedy_miser=30`" in report  # the command that made it
    without = frame[frame["method"] == "CSTC without polish"]  # its own grid: the estimator's polish=False
    assert len(without) >= 2 and without["polish"].eq(False).all()
    assert frame.loc[frame["method"] == "CSTC", "polish"].isna().all()
    trick = frame[frame["method"].str.startswith("CSTC, boosting trick")]  # phi: 20 squared-loss trees
    assert trick["phi_trees"].eq(20).all() and trick["phi_depth"].eq(2).all()
    assert trick.loc[trick["method"] == "CSTC, boosting trick, without polish", "polish"].eq(False).all()
    plain = frame[frame["method"] == "LightGBM"].groupby("split")["cost"].max()
    trained = frame[frame["method"] == "CEGB trained to the budget"]
    assert len(trained) >= 1
    assert all(row["cost"] <= 0.5 * plain[row["split"]] + 1e-3 for _, row in trained.iterrows())
    assert (tmp_path / "frontier_higgs.png").stat().st_size > 1000
    # --only re-runs some runs (and plain LightGBM, for the budgets) into this report: with the same points (the
    # runs are deterministic) every file comes out byte for byte as the whole run wrote it
    written = {suffix: (tmp_path / f"frontier_higgs.{suffix}").read_bytes() for suffix in ("csv", "md", "png")}
    run_script("frontiers", "--data", "higgs", "--quick", "--splits", "2", "--rounds", "100",
               "--method-rounds", "greedy_miser=30", "--out", str(tmp_path), "--only", "Early Exit",
               "--only", "CEGB trained to the budget")
    for suffix, content in written.items():
        assert (tmp_path / f"frontier_higgs.{suffix}").read_bytes() == content, suffix
    assert not list(tmp_path.glob(".frontier_higgs.split*"))  # each split's saved points, gone with the report
    # --skip leaves a run out: its points and row are gone, the report says so, every other row is the same
    run_script("frontiers", "--data", "higgs", "--quick", "--splits", "2", "--rounds", "100",
               "--method-rounds", "greedy_miser=30", "--out", str(tmp_path), "--only", "Early Exit",
               "--skip", "Staged acquisition")
    skipped = (tmp_path / "frontier_higgs.md").read_text()
    assert "| Staged acquisition |" not in skipped and "Left out (--skip): Staged acquisition." in skipped
    rows = [line for line in written["md"].decode().splitlines() if line.startswith("| ") and "Staged" not in line]
    assert [line for line in skipped.splitlines() if line.startswith("| ")] == rows
    assert "Staged acquisition" not in set(pd.read_csv(tmp_path / "frontier_higgs.csv")["method"])
    with pytest.raises(AssertionError, match="--skip should name runs"):
        run_script("frontiers", "--data", "higgs", "--quick", "--splits", "2", "--out", str(tmp_path),
                   "--skip", "LightGBM")


def test_runs_of_each_task():
    """Binary data gets CSTC four times (the plain model's trees or the boosting trick as phi, each with and without
    polish; the trick's runs choose among CSTC depths) and BudgetPrune twice; multiclass data (letter), which the
    CSTC family does not do, gets BudgetPrune twice and no CSTC (the first version looked CSTC up and failed)."""
    binary, multiclass = frontier_runs("binary", False, 4500), frontier_runs("multiclass", False, 10_000)
    labels = [run[0] for run in binary]
    assert labels.index("CSTC without polish") == labels.index("CSTC") + 1
    assert labels.index("BudgetPrune (random forest)") == labels.index("BudgetPrune") + 1
    assert [run[4] for run in binary if run[0] == "CSTC without polish"][0] == \
        [{"relative_tradeoff": r, "polish": False} for r in CSTC_RELATIVE_TRADEOFFS]
    assert labels[labels.index("CSTC") + 2:labels.index("CSTC") + 4] == \
        ["CSTC, boosting trick", "CSTC, boosting trick, without polish"]
    trick, unpolished = (run[4] for run in binary if run[0].startswith("CSTC, boosting trick"))
    assert trick == [{"relative_tradeoff": r, **TRICK, "depth": depth} for r in CSTC_RELATIVE_TRADEOFFS
                     for depth in TRICK_DEPTHS]
    assert unpolished == [{**point, "polish": False} for point in trick] and len(set(TRICK_DEPTHS)) > 1
    # ADAPT-GBRT on its authors' schedule only when asked (--adapt-authors): the default grid's points, 50 rounds of
    # 100 trees each
    assert "ADAPT-GBRT, authors' schedule" not in labels
    authors = frontier_runs("binary", False, 4500, adapt_authors=True)
    labels = [run[0] for run in authors]
    assert labels.index("ADAPT-GBRT, authors' schedule") == labels.index("ADAPT-GBRT") + 1
    grid = [run[4] for run in authors if run[0] == "ADAPT-GBRT, authors' schedule"][0]
    assert grid == [{**point, "n_rounds": 50, "trees_per_round": 100} for point in ADAPT_GBRT_GRID] and len(grid) == 12
    labels = [run[0] for run in multiclass]
    assert "BudgetPrune (random forest)" in labels and not {"CSTC", "CSTC without polish", "CSCC"} & set(labels)
    # the forest's leaves capped at the training rows, which never binds for leaves of one row or more
    assert [run[2]["num_leaves"] for run in multiclass if run[0] == "BudgetPrune (random forest)"] == [10_000]


def test_method_rounds_names_what_is_wrong():
    """--method-rounds METHOD=ROUNDS: a registered method and a positive count, repeatable; anything else is refused
    with what was expected and what was given."""
    args = protocol_parser("doc", choices=("higgs",)).parse_args(
        ["--method-rounds", "greedy_miser=2000", "--method-rounds", "cegb=50"])
    assert dict(args.method_rounds) == {"greedy_miser": 2000, "cegb": 50}
    with pytest.raises(Exception, match="METHOD should be one of .*, got 'greedy'"):
        method_rounds("greedy=10")
    for bad in ("cegb=0", "cegb=-3", "cegb=ten", "cegb"):
        with pytest.raises(Exception, match="ROUNDS should be a positive integer"):
            method_rounds(bad)


def test_interval_is_students():
    values = [0.71, 0.74, 0.69, 0.73, 0.70]
    mean, half = interval(values)
    low, high = stats.t.interval(0.95, len(values) - 1, loc=np.mean(values), scale=stats.sem(values))
    assert mean == pytest.approx(np.mean(values)) and half == pytest.approx((high - low) / 2)


def test_interval_table_bolds_only_a_separated_best():
    rows = [{"method": m, "budget": b, "split": s, "test_quality": q + 0.001 * s, "test_cost": 10.0}
            for s in range(5) for m, b, q in [("A", 0, 0.90), ("B", 0, 0.80), ("A", 1, 0.80), ("B", 1, 0.801),
                                              ("C", 1, 0.5)]]
    rows += [{"method": "C", "budget": 0, "split": 0, "test_quality": 0.99, "test_cost": 1.0}]  # one split only
    lines = interval_table(pd.DataFrame(rows), ["small", "large"], 5)
    table = {line.split(" | ")[0].strip("| "): line.split(" | ")[1:] for line in lines[2:]}
    assert table["A"][0].startswith("**0.9020 ± 0.0020 @ 10**")  # separated from B: bold
    assert table["C"][0] == "0.9900 @ 1 (1/5 splits)"  # in one split only: not ranked
    assert not any(cell.startswith("**") for cells in table.values() for cell in [cells[1]])  # A, B overlap


def only_args(tmp_path, *only: str, splits: int = 2, extra: tuple = ()):
    return protocol_parser("doc", choices=("higgs",)).parse_args(
        ["--splits", str(splits), "--out", str(tmp_path), *(f"--only={label}" for label in only), *extra])


def points(method: str, split: int, quality: float, **columns) -> dict:
    return {"method": method, "quality": quality, "cost": 2.0, "test_quality": quality, "test_cost": 2.0,
            "split": split, **columns}


def test_only_refuses_what_it_cannot_merge(tmp_path):
    """--only names runs of the command, needs the earlier CSV with the same splits and every run it does not re-run,
    and refuses to merge where plain LightGBM's points moved (the other runs were chosen within its budgets)."""
    labels = ["LightGBM", "CEGB", "Greedy Miser"]
    path = tmp_path / "frontier_higgs.csv"
    with pytest.raises(CEGBError, match=r"--only should name runs of this command \('LightGBM', 'CEGB', "
                                        r"'Greedy Miser'\), got 'Greedy'"):
        earlier_points(path, labels, only_args(tmp_path, "Greedy"))
    with pytest.raises(CEGBError, match="frontier_higgs.csv should exist, and does not"):
        earlier_points(path, labels, only_args(tmp_path, "CEGB"))
    pd.DataFrame([points(m, s, 0.7) for s in (0, 1) for m in ("LightGBM", "CEGB")]).to_csv(path, index=False)
    with pytest.raises(CEGBError, match=r"should hold the splits 0 to 2 \(--splits 3\), holds \[0, 1\]"):
        earlier_points(path, labels, only_args(tmp_path, "CEGB", splits=3))
    with pytest.raises(CEGBError, match="has no points of 'Greedy Miser': add them to --only"):
        earlier_points(path, labels, only_args(tmp_path, "CEGB"))
    earlier = earlier_points(path, labels, only_args(tmp_path, "Greedy Miser"))
    fresh = pd.DataFrame([points(m, s, 0.8, trees=3) for s in (0, 1) for m in ("LightGBM", "Greedy Miser")])
    with pytest.raises(CEGBError, match="plain LightGBM's points should be those of the earlier report"):
        merged(fresh, earlier, labels, "LightGBM")
    fresh.loc[fresh["method"] == "LightGBM", ["quality", "test_quality"]] = 0.7
    every = merged(fresh, earlier, labels, "LightGBM")
    assert list(every["method"]) == labels * 2 and list(every["split"]) == [0, 0, 0, 1, 1, 1]
    assert list(every.columns) == [*earlier.columns, "trees"]
    assert every.loc[every["method"] == "Greedy Miser", "quality"].eq(0.8).all()


def test_only_keeps_the_earlier_reports_round_caps(tmp_path):
    """A report merged by --only records each method's --method-rounds as its points had them: the earlier report's
    for the methods not re-run, this command's for those re-run; a cap given to a method that is not re-run, or a
    --quick that differs, is refused."""
    path = tmp_path / "frontier_higgs.md"
    with pytest.raises(CEGBError, match="frontier_higgs.md should exist, and does not"):
        earlier_rounds(path, only_args(tmp_path, "CEGB"), {"cegb", "lightgbm"})
    path.write_text("## higgs\n\n`python -m scripts.frontiers --data higgs --splits 2 "
                    "--method-rounds greedy_miser=2000 --method-rounds cegb=50`; 28 features\n")
    args = only_args(tmp_path, "CEGB", extra=("--method-rounds", "cegb=80"))
    assert earlier_rounds(path, args, {"cegb", "lightgbm"}) == [("greedy_miser", 2000), ("cegb", 80)]
    args = only_args(tmp_path, "CEGB", extra=("--method-rounds", "greedy_miser=2000"))
    assert earlier_rounds(path, args, {"cegb", "lightgbm"}) == [("greedy_miser", 2000)]
    args = only_args(tmp_path, "CEGB", extra=("--method-rounds", "greedy_miser=500"))
    with pytest.raises(CEGBError, match=r"--method-rounds greedy_miser=500: no run of greedy_miser is re-run "
                                        r"\(--only\), and its points in .* had 2000 rounds"):
        earlier_rounds(path, args, {"cegb", "lightgbm"})
    args = only_args(tmp_path, "CEGB", extra=("--method-rounds", "budgetrf=10"))
    with pytest.raises(CEGBError, match="no run of budgetrf is re-run .* had the --rounds"):
        earlier_rounds(path, args, {"cegb", "lightgbm"})
    with pytest.raises(CEGBError, match="was made without --quick, this command with: run the whole command"):
        earlier_rounds(path, only_args(tmp_path, "CEGB", extra=("--quick",)), {"cegb", "lightgbm"})
    path.write_text("## higgs\n\n`python -m scripts.frontiers --data higgs --splits 2 --quick --method-rounds "
                    "greedy_miser=30`; 28 features\n")  # --quick followed by a cap, as the report writes it
    args = only_args(tmp_path, "CEGB", extra=("--quick", "--method-rounds", "greedy_miser=30"))
    assert earlier_rounds(path, args, {"cegb", "lightgbm"}) == [("greedy_miser", 30)]
    with pytest.raises(CEGBError, match="was made with --quick, this command without: run the whole command"):
        earlier_rounds(path, only_args(tmp_path, "CEGB"), {"cegb", "lightgbm"})


def test_resume_runs_only_the_splits_left(tmp_path, monkeypatch):
    """Each split's points are saved as it ends; --resume reads back the splits an interrupted run of the same command
    finished and runs the others, and the report comes out byte for byte as an uninterrupted run's. A split saved
    by another command (here --rounds) is not reused. --split K runs one split and saves it without a report (the
    splits spread over processes); --resume then writes the same report."""
    from lightgbm_cegb.datasets import HIGGS_COSTS, higgs

    X, y = higgs("train")
    X, y = X[:1200], y[:1200]
    runs = [("LightGBM", "lightgbm", {})]
    ran = []
    run_split = protocol.split_frontiers

    def recorded(parts, *args, **kwargs):
        ran.append(len(ran))
        return run_split(parts, *args, **kwargs)

    monkeypatch.setattr(protocol, "split_frontiers", recorded)

    def report(out, *extra, fail_at=None):
        args = protocol_parser("doc", choices=("higgs",)).parse_args(
            ["--splits", "3", "--quick", "--rounds", "20", "--out", str(out), *extra])

        def split(seed):
            if seed == fail_at:
                raise KeyboardInterrupt
            return protocol.random_split(X, y, (600, 300, 300), seed)

        every = protocol.repeated_frontiers(split, HIGGS_COSTS, "binary", runs, args, name="frontier_t", title="t",
                                          command="frontiers.py")
        if every is None:
            assert "--split" in extra and not (out / "frontier_t.md").exists()
            return None
        return {suffix: (out / f"frontier_t.{suffix}").read_bytes() for suffix in ("csv", "md")}

    whole = report(tmp_path / "whole")
    assert len(ran) == 3
    ran.clear()
    with pytest.raises(KeyboardInterrupt):
        report(tmp_path / "resumed", fail_at=2)
    assert len(ran) == 2 and len(list((tmp_path / "resumed").glob(".frontier_t.split*"))) == 2
    ran.clear()
    assert report(tmp_path / "resumed", "--resume") == whole
    assert len(ran) == 1  # split 2 only
    assert not list((tmp_path / "resumed").glob(".frontier_t.split*"))
    ran.clear()
    with pytest.raises(KeyboardInterrupt):
        report(tmp_path / "other", fail_at=1)
    ran.clear()
    args = ("--resume", "--rounds", "21")
    report(tmp_path / "other", *args)
    assert len(ran) == 3  # another --rounds: nothing reused
    ran.clear()
    for k in (2, 0):
        assert report(tmp_path / "spread", "--split", str(k)) is None
    assert len(ran) == 2 and len(list((tmp_path / "spread").glob(".frontier_t.split*"))) == 2
    ran.clear()
    assert report(tmp_path / "spread", "--resume") == whole
    assert len(ran) == 1  # split 1 only
    with pytest.raises(CEGBError, match=r"--split should be a split of --splits 3 \(0 to 2\), got 3"):
        report(tmp_path / "spread", "--split", "3")
    assert ran == [0]


def test_resume_runs_only_the_runs_left_of_an_interrupted_split(tmp_path, monkeypatch):
    """Within a split, each run's points are saved as the run ends: a split interrupted in its third run resumes at
    that run (plain LightGBM and the first are read back, not trained), CEGB trained to the budgets included, and the
    report is byte for byte an uninterrupted run's; the run files go once the split's file is written."""
    from lightgbm_cegb.datasets import HIGGS_COSTS, higgs

    X, y = higgs("train")
    X, y = X[:1200], y[:1200]
    runs = [("LightGBM", "lightgbm", {}), ("CEGB", "cegb", {}), ("Cheap subset", "cheap_subset", {})]
    swept, trained = [], []
    sweep, to_budgets = protocol.sweep, protocol.trained_to_budgets

    def recorded(name, *args, **kwargs):
        swept.append(name)
        if name == fail_at[0]:
            raise KeyboardInterrupt
        return sweep(name, *args, **kwargs)

    def recorded_trained(*args, **kwargs):
        trained.append(1)
        return to_budgets(*args, **kwargs)

    monkeypatch.setattr(protocol, "sweep", recorded)
    monkeypatch.setattr(protocol, "trained_to_budgets", recorded_trained)

    def report(out, *extra):
        args = protocol_parser("doc", choices=("higgs",)).parse_args(
            ["--splits", "1", "--quick", "--rounds", "20", "--out", str(out), *extra])
        every = protocol.repeated_frontiers(lambda seed: protocol.random_split(X, y, (600, 300, 300), seed),
                                            HIGGS_COSTS, "binary", runs, args, name="frontier_t", title="t",
                                            command="frontiers.py")
        return None if every is None else {suffix: (out / f"frontier_t.{suffix}").read_bytes() for suffix in
                                           ("csv", "md")}

    fail_at = [None]
    whole = report(tmp_path / "whole")
    assert swept == ["lightgbm", "cegb", "cheap_subset"] and trained == [1]
    swept.clear(), trained.clear()
    fail_at[0] = "cheap_subset"
    with pytest.raises(KeyboardInterrupt):
        report(tmp_path / "resumed")
    assert sorted(path.name.split(".")[-2] for path in (tmp_path / "resumed").glob(".frontier_t.split0.*")) == \
        ["run0", "run1"]
    swept.clear()
    fail_at[0] = None
    assert report(tmp_path / "resumed", "--resume") == whole
    assert swept == ["cheap_subset"] and trained == [1]
    assert not list((tmp_path / "resumed").glob(".frontier_t.*"))
    swept.clear(), trained.clear()
    monkeypatch.setattr(protocol, "trained_to_budgets", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        report(tmp_path / "last")
    monkeypatch.setattr(protocol, "trained_to_budgets", recorded_trained)
    swept.clear()
    assert report(tmp_path / "last", "--resume") == whole
    assert swept == [] and trained == [1]  # every run read back; only CEGB trained to the budgets runs again
    assert report(tmp_path / "fresh", "--resume") == whole  # --resume with nothing saved runs everything
    fail_at[0] = "cheap_subset"
    with pytest.raises(KeyboardInterrupt):
        report(tmp_path / "garbled")
    next((tmp_path / "garbled").glob(".frontier_t.split0.*.run1.csv")).write_text("")  # a file that cannot be read
    swept.clear()
    fail_at[0] = None
    assert report(tmp_path / "garbled", "--resume") == whole
    assert swept == ["cegb", "cheap_subset"]  # the unreadable run runs again
    assert report(tmp_path / "leftover", "--split", "0") is None  # the split's file, no report
    split_file = next((tmp_path / "leftover").glob(".frontier_t.split0.*.csv"))
    protocol.run_file(split_file, 0).write_text("stale")  # as a kill between the split's file and the cleanup left it
    swept.clear()
    assert report(tmp_path / "leftover", "--resume") == whole
    assert swept == [] and not list((tmp_path / "leftover").glob(".frontier_t.*"))


@pytest.mark.long
def test_the_workflow_s_row_is_fit_within_budget_s_answer_within_each_budget(tmp_path):
    """--workflow adds fit_within_budget's answers (its defaults, the protocol's metric and round cap, no time limit
    per method; every budget in one call) as a run of their own: added to an earlier report with --only, the other
    rows stay as they were, each point is what a direct call answers on the same split, and the report's command says
    --workflow."""
    from lightgbm_cegb.datasets import HIGGS_COSTS, higgs
    from lightgbm_cegb.selection import fit_within_budget

    X, y = higgs("train")
    X, y = X[:1200], y[:1200]
    runs = [("LightGBM", "lightgbm", {})]

    def split(seed):
        return protocol.random_split(X, y, (600, 300, 300), seed)

    def report(*extra):
        args = protocol_parser("doc", choices=("higgs",)).parse_args(
            ["--splits", "1", "--quick", "--rounds", "20", "--out", str(tmp_path), *extra])
        return protocol.repeated_frontiers(split, HIGGS_COSTS, "binary", runs, args, name="frontier_w", title="w",
                                           command="frontiers.py")

    before = report()
    after = report("--workflow", "--only", protocol.WORKFLOW)
    others = after[after["method"] != protocol.WORKFLOW].reset_index(drop=True)
    pd.testing.assert_frame_equal(others[before.columns], before)
    points = after[after["method"] == protocol.WORKFLOW]
    parts = split(0)
    plain = before.loc[before["method"] == "LightGBM", "cost"].max()
    direct = fit_within_budget(parts["train"], parts["valid"], HIGGS_COSTS, protocol.budgets_of(plain), task="binary",
                               test=parts["test"], metric="accuracy", num_boost_round=20, method_fits=None)
    answered = [s for s in direct if s.within_budget]
    assert len(points) == len(answered) > 0
    np.testing.assert_array_equal(points["quality"], [s.valid_quality for s in answered])
    np.testing.assert_array_equal(points["test_quality"], [s.test_quality for s in answered])
    assert list(points["params"]) == [repr({"method": s.method, **s.params}) for s in answered]
    text = (tmp_path / "frontier_w.md").read_text()
    assert "`frontiers.py --splits 1 --quick --workflow --rounds 20`" in text and f"| {protocol.WORKFLOW} |" in text
    with pytest.raises(CEGBError, match="holds points of 'The budget workflow .*give the options that made them"):
        report("--only", "LightGBM")  # without --workflow, whose row the report holds


@pytest.mark.long
def test_quick_frontiers_on_cube_at_afabenchs_budgets(tmp_path):
    """CUBE: AFABench's instances as the splits, its mean budgets as the table's columns (the same in each split)."""
    run_script("frontiers", "--data", "cube", "--quick", "--splits", "2", "--rounds", "50",
               "--method-rounds", "greedy_miser=20", "--out", str(tmp_path))
    frame = pd.read_csv(tmp_path / "frontier_cube.csv")
    assert set(frame["split"]) == {0, 1}
    assert {"LightGBM", "Adaptive acquisition", "Cheap subset (baseline)"} <= set(frame["method"])
    assert not any(m.startswith(("CSTC", "CSCC", "Cronus")) for m in set(frame["method"]))  # multiclass
    report = (tmp_path / "frontier_cube.md").read_text()
    assert "| method | <= 2 | <= 4 | <= 6 | <= 8 | <= 12 | <= 20 | any cost |" in report
    assert "a mean validation cost per row" in report and "train: 600 rows; valid: 200 rows; test: 200 rows" in report
    trained = frame[frame["method"] == "CEGB trained to the budget"]
    assert (trained["cost"] <= 20 + 1e-9).all()
    with pytest.raises(AssertionError, match="CUBE has AFABench's 5 instances"):
        run_script("frontiers", "--data", "cube", "--quick", "--splits", "6", "--out", str(tmp_path))


def test_runs_without_plain_lightgbm_are_refused_before_anything_trains(monkeypatch):
    runs = [("CEGB", "cegb", {}), ("LightGBM", "lightgbm", {}), ("LightGBM again", "lightgbm", {})]
    assert protocol.plain_run(runs) is runs[1]
    monkeypatch.setattr(protocol, "sweep", lambda *a, **k: pytest.fail("a sweep ran before the runs were checked"))
    with pytest.raises(CEGBError, match=r"the runs need plain LightGBM .*they are \['CEGB'\]"):
        protocol.split_frontiers({}, None, "binary", runs[:1], None)
