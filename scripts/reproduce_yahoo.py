#!/usr/bin/env python3
"""The CEGB paper's Yahoo! Learning to Rank experiments (Peter et al., NIPS 2017, section 5 and figures 2a/2b).

    .venv/bin/python scripts/reproduce_yahoo.py --data yahoo --train set1.train.txt --valid set1.valid.txt \\
        --test set1.test.txt [--rounds 1000] [--out DIR]
    .venv/bin/python scripts/reproduce_yahoo.py --data mslr        # the bundled MSLR-WEB subset, its costs
    .venv/bin/python scripts/reproduce_yahoo.py --synthetic        # a Yahoo-shaped stand-in (runs in CI)
    .venv/bin/python scripts/reproduce_yahoo.py --synthetic --signal cheap   # the cheap features informative

Yahoo! LTR set 1 is not redistributable: bring your own copy (SVMlight files, 1-based ids, qid). Costs: the real
Yahoo cost vector bundled with the package (``lightgbm_cegb.datasets.yahoo_costs``). Two settings, as the paper:

(i)  feature costs plus a split cost alpha = 1/4 per node a row evaluates (a depth-4 tree costs as much as a
     feature of cost 1), graded labels 0-4: CEGB with Greedy-Miser-like trees (16 leaves, depth 4) and with deep
     trees (best-first, 64 leaves), both squared-loss regressors as in the paper, against plain LightGBM,
     BudgetPrune of the plain regressor, Early Exit of a LightGBM lambdarank model and Greedy Miser (depth 4,
     irrelevant documents weighted 10, the split cost in its accounting only).
(ii) feature costs only (alpha = 0), labels binarised (y > 0): CEGB (deep trees, binary objective), plain
     LightGBM, BudgetPrune, Early Exit, BudgetRF and Greedy Miser.
Metric: the papers' Average Precision@5 (lightgbm_cegb.core.metrics) on the test queries. Each
method is swept (lightgbm_cegb.selection: trade-offs on their documented scales) on the training rows, its
points measured on the validation rows; the validation Pareto points are then measured on the test rows.
Writes DIR/yahoo_<data>_<setting>.csv (every point, validation and test figures), a PNG per setting with
matplotlib, and DIR/yahoo_<data>.md: per method the test AP@5 of the model select() picks within 3 budgets
(fractions of plain LightGBM's validation cost), with "CEGB deep trained to the budget" (selection.train_to_budget)
at each. Figure 3b's best-first against breadth-first growth: "CEGB deep" against "CEGB deep, breadth-first"
(tree_growth=depthwise, patch 0005), the same leaves and rounds.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    BUDGET_FRACTIONS,
    budget_table,
    mslr_parts,
    report_frontier,
    trained_to_budgets,
    write_atomically,
)

from lightgbm_cegb import FeatureCosts  # noqa: E402
from lightgbm_cegb.datasets import load_svmlight, yahoo_costs  # noqa: E402
from lightgbm_cegb.selection import evaluate, pareto, sweep  # noqa: E402

SHALLOW = {"num_leaves": 16, "max_depth": 4}
DEEP = {"num_leaves": 64}


def synthetic(folder: Path, queries: int, seed: int = 0, signal_in: str = "expensive") -> dict[str, Path]:
    """Yahoo-shaped SVMlight files (1-based ids 1..700, qid, labels 0-4) in ``folder``: the 519 ids with a real
    cost occur, the 181 sentinel ids never do; most features are noise, values lie in [0, 1] and a third of them
    are missing (left out of the line, as Yahoo's zeros are). ``signal_in`` "expensive": a feature's signal grows
    with its cost (the expensive features are the informative ones, as the paper's setting assumes, which favours
    methods that buy them for a few rows); "cheap": it shrinks with its cost (the cheap features carry most of
    the signal)."""
    rng = np.random.default_rng(seed)
    lazy = yahoo_costs().lazy
    used = np.flatnonzero(lazy < 10000)
    rank = np.log1p(lazy[used]) / np.log1p(200)
    if signal_in not in ("expensive", "cheap"):
        raise ValueError(f"signal_in should be 'expensive' or 'cheap', got {signal_in!r}")
    strength = 0.15 + 0.85 * (rank if signal_in == "expensive" else 1.0 - rank)
    signal = np.where(rng.random(len(used)) < 0.3, strength, 0.0)
    files = {}
    for split, share in (("train", 0.6), ("valid", 0.2), ("test", 0.2)):
        n_queries = max(int(queries * share), 2)
        sizes = rng.integers(5, 30, n_queries)
        n = int(sizes.sum())
        relevance = rng.normal(size=n) + np.repeat(rng.normal(0, 0.5, n_queries), sizes)
        labels = np.digitize(relevance + rng.normal(0, 0.3, n), [-0.3, 0.6, 1.4, 2.1])
        values = 1 / (1 + np.exp(-(relevance[:, None] * signal + rng.normal(size=(n, len(used))))))
        values[rng.random(values.shape) < 1 / 3] = 0.0
        qid = np.repeat(np.arange(n_queries), sizes)
        lines = []
        for i in range(n):
            present = np.flatnonzero(values[i])
            lines.append(f"{labels[i]} qid:{qid[i]} " + " ".join(f"{used[j] + 1}:{values[i, j]:.4f}" for j in present))
        files[split] = folder / f"synthetic.{split}.txt"
        files[split].write_text("\n".join(lines) + "\n")
    return files


def load(args) -> tuple[dict, FeatureCosts]:
    """{split: (X, y, group)} and the lazy costs aligned to X's columns."""
    if args.data == "mslr":
        return mslr_parts()
    if args.data == "synthetic":
        folder = Path(tempfile.mkdtemp(prefix="yahoo-synthetic-"))
        paths = synthetic(folder, args.queries, signal_in=args.signal)
    else:
        missing = [name for name in ("train", "valid", "test") if getattr(args, name) is None]
        if missing:
            raise SystemExit(f"--data yahoo needs --train, --valid and --test (set1.*.txt), missing {missing}")
        paths = {name: Path(getattr(args, name)) for name in ("train", "valid", "test")}
    costs = yahoo_costs()
    parts = {}
    for name, path in paths.items():
        data = load_svmlight(path, costs)
        parts[name] = (data.X, data.y, data.group)
    return parts, FeatureCosts(lazy=costs.lazy)


def run_setting(setting: str, parts: dict, lazy: FeatureCosts, args) -> tuple[pd.DataFrame, list[float]]:
    binarise = setting == "ii"
    costs = FeatureCosts(lazy=lazy.lazy, split=0.0 if binarise else 0.25)

    def rows(name):
        X, y, group = parts[name]
        return X, (y > 0).astype(np.float64) if binarise else y, group

    train, valid = rows("train"), rows("valid")
    common = {"task": "ranking", "metric": "ap@5", "num_boost_round": args.rounds, "n_jobs": args.jobs,
              "early_stopping_rounds": 30, "baseline": False}  # each run is one method (relabelled below)
    objective = {"objective": "binary"} if binarise else {"objective": "regression"}
    prune_grid = [{"budget_fraction": f} for f in (0.2, 0.4, 0.6, 0.8)]  # ~10 max-flows each on all the rows
    runs = [("LightGBM", "lightgbm", {**DEEP, **objective}, None),
            ("BudgetPrune", "budget_prune", {**DEEP, **objective}, prune_grid),
            ("Early Exit", "early_exit", {**DEEP, "objective": "lambdarank"} if not binarise else {**DEEP, **objective},
             None)]
    if binarise:
        runs += [("CEGB", "cegb", {**DEEP, **objective}, None),
                 ("BudgetRF", "budgetrf", {}, [{"tradeoff": a, "n_estimators": args.forest} for a in (0.0, 2.0, 8.0)])]
    else:
        runs += [("CEGB 16 leaves, depth 4", "cegb", {**SHALLOW, **objective}, None),
                 ("CEGB deep", "cegb", {**DEEP, **objective}, None),
                 ("CEGB deep, breadth-first", "cegb", {**DEEP, **objective, "tree_growth": "depthwise"}, None)]
    runs += [("Greedy Miser", "greedy_miser", {}, None)]
    if args.quick:
        quick_grids = {"cegb": [{"relative_tradeoff": r} for r in (0.0, 0.01, 0.1)],
                       "budget_prune": [{"budget_fraction": f} for f in (0.3, 1.0)],
                       "early_exit": [{"threshold": 1.0 if not binarise else 0.9}],
                       "budgetrf": [{"tradeoff": 2.0, "n_estimators": 5, "trees": (1, 5)}],
                       "greedy_miser": [{"relative_tradeoff": r} for r in (0.0, 0.1)]}
    frames = []
    for label, method, params, grid in [run for run in runs if run[1] in args.methods.split(",")]:
        start = time.perf_counter()
        grid = quick_grids[method] if args.quick and method in quick_grids else grid
        frame = sweep(method, train, valid, costs, params=params, grid=None if grid is None else {method: grid},
                      **common)
        frame = evaluate(pareto(frame), rows("test"))
        frame["method"] = label
        frames.append(frame)
        print(f"[{setting}] {label}: {len(frame)} validation Pareto points in {time.perf_counter() - start:.1f} s",
              flush=True)
    if "lightgbm" not in args.methods.split(","):
        raise SystemExit("--methods should include lightgbm: the budgets are fractions of its cost")
    plain = frames[[run[1] for run in runs if run[1] in args.methods.split(",")].index("lightgbm")]["cost"].max()
    budgets = [round(f * plain, 4) for f in BUDGET_FRACTIONS]
    if "cegb" in args.methods.split(","):
        start = time.perf_counter()
        frames.append(trained_to_budgets(train, valid, rows("test"), costs, budgets, "CEGB deep trained to the budget",
                                         quick=args.quick, params={**DEEP, **objective}, **common))
        print(f"[{setting}] CEGB trained to each budget in {time.perf_counter() - start:.1f} s", flush=True)
    frame = pd.concat(frames, ignore_index=True)
    frame.attrs = dict(frames[0].attrs)
    return frame, budgets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", choices=("yahoo", "mslr", "synthetic"), default="synthetic")
    parser.add_argument("--synthetic", action="store_const", const="synthetic", dest="data",
                        help="the same as --data synthetic")
    parser.add_argument("--train"), parser.add_argument("--valid"), parser.add_argument("--test")
    parser.add_argument("--queries", type=int, default=300, help="synthetic: queries over train/valid/test")
    parser.add_argument("--signal", choices=("expensive", "cheap"), default="expensive",
                        help="synthetic: the features whose signal is strongest (the report is named synthetic-cheap "
                             "for cheap)")
    parser.add_argument("--rounds", type=int, default=300, help="boosting rounds (early stopping on validation)")
    parser.add_argument("--forest", type=int, default=30, help="BudgetRF: trees per forest")
    parser.add_argument("--settings", default="i,ii", help="which of the paper's settings to run")
    parser.add_argument("--methods", default="lightgbm,cegb,budget_prune,early_exit,budgetrf,greedy_miser",
                        help="which methods to run (BudgetPrune on all of Yahoo's 473k rows takes hours)")
    parser.add_argument("--jobs", type=int, default=1, help="grid points trained in parallel")
    parser.add_argument("--quick", action="store_true", help="small grids (the test runs this)")
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    parts, lazy = load(args)
    name = f"{args.data}-cheap" if args.data == "synthetic" and args.signal == "cheap" else args.data
    args.out.mkdir(parents=True, exist_ok=True)
    shapes = {name: f"{parts[name][0].shape[0]} rows, {len(parts[name][2])} queries" for name in parts}
    signal = " --signal cheap" if name == "synthetic-cheap" else ""
    report = [f"# Yahoo! LTR experiments of the CEGB paper on `{name}`", "",
              f"`scripts/reproduce_yahoo.py --data {args.data}{signal}{' --quick' if args.quick else ''} "
              f"--rounds {args.rounds}`; "
              f"{parts['train'][0].shape[1]} features; " + "; ".join(f"{k}: {v}" for k, v in shapes.items()) + ".",
              "Cells: test AP@5 at the mean test cost per document of the model chosen on validation within the budget "
              f"(budgets: {', '.join(f'{f:g}' for f in BUDGET_FRACTIONS)} x plain LightGBM's validation cost).",
              ""]
    for setting in args.settings.split(","):
        frame, budgets = run_setting(setting, parts, lazy, args)
        title = {"i": "setting (i): feature + split cost 1/4, graded labels",
                 "ii": "setting (ii): feature cost only, labels binarised"}[setting]
        lines = budget_table(frame, budgets)
        print("\n".join(lines))
        report += [f"## {title}", "", *lines, "",
                   *report_frontier(frame, args.out, f"yahoo_{name}_{setting}", f"{name}: {title}", "AP@5")]
    write_atomically(args.out / f"yahoo_{name}.md", lambda tmp: Path(tmp).write_text("\n".join(report) + "\n"))
    print(f"report: {args.out / f'yahoo_{name}.md'}")


if __name__ == "__main__":
    main()
