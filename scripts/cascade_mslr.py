#!/usr/bin/env python3
"""CSCC and Cronus against CEGB on a skewed ranking set (Xu et al. 2014, section 6.3's LTR-Skewed, built from the
bundled MSLR-WEB subset): precision@5 against the mean feature cost per document.

    .venv/bin/python scripts/cascade_mslr.py [--relevant 3] [--out docs/results] [--quick]

Data: lightgbm_cegb.datasets.mslr_subset with its cost vector; a document is relevant when its label is >=
--relevant (3, the issue's choice: 1.6% of the training documents, 2.6% of the test ones; 2: about 10%); a third
of the training queries validate, the test split tests. Methods through lightgbm_cegb.selection on the ranking
task (metric p@5): plain LightGBM
(binary objective: the phi of the CSTC family), CEGB (its relative trade-off grid), CSCC and Cronus (5 stages,
their relative trade-off grid, on the plain model's trees, pruned on validation), CSTC (depth 3, same). Each method's
validation Pareto points are measured on the test queries. Writes DIR/cascade_mslr_<relevant>.csv, .md (budget table:
0.1, 0.25, 0.5 x plain LightGBM's validation cost) and .png.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BUDGET_FRACTIONS, budget_table, mslr_parts, report_frontier, write_atomically  # noqa: E402

from lightgbm_cegb.selection import evaluate, pareto, sweep  # noqa: E402

METHODS = (("LightGBM", "lightgbm"), ("CEGB", "cegb"), ("CSCC", "cscc"), ("Cronus", "cronus"), ("CSTC", "cstc"))
QUICK = {"cegb": [{"relative_tradeoff": 0.05}], "cscc": [{"relative_tradeoff": 1e-3}],
         "cronus": [{"relative_tradeoff": 1e-3}], "cstc": [{"relative_tradeoff": 1e-3}]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=300, help="boosting rounds (early stopping on validation)")
    parser.add_argument("--quick", action="store_true", help="one grid point per method (the test runs this)")
    parser.add_argument("--relevant", type=int, default=3, help="the lowest label that is relevant")
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    parts, costs = mslr_parts()
    parts = {k: (X, (y >= args.relevant).astype(np.float64), group) for k, (X, y, group) in parts.items()}
    print("relevant share: " + ", ".join(f"{k} {np.mean(v[1]):.3f}" for k, v in parts.items()), flush=True)
    frames = []
    for label, name in METHODS:
        start = time.perf_counter()
        grid = {name: QUICK[name]} if args.quick and name in QUICK else None
        frame = sweep(name, parts["train"], parts["valid"], costs, task="ranking", metric="p@5", grid=grid,
                      params={"objective": "binary"}, num_boost_round=args.rounds, early_stopping_rounds=30,
                      baseline=False)
        frame = evaluate(pareto(frame), parts["test"])
        frame["method"] = label
        frames.append(frame)
        print(f"{label}: {len(frame)} validation Pareto points in {time.perf_counter() - start:.1f} s", flush=True)
    plain = frames[0]["cost"].max()
    budgets = [round(f * plain, 4) for f in BUDGET_FRACTIONS]
    frame = pd.concat(frames, ignore_index=True)
    frame.attrs = dict(frames[0].attrs)
    lines = budget_table(frame, budgets)
    print("\n".join(lines))
    shapes = "; ".join(f"{k}: {len(v[1])} documents, {len(v[2])} queries, {int(v[1].sum())} relevant"
                       for k, v in parts.items())
    name = f"cascade_mslr_{args.relevant}"
    report = [f"`scripts/cascade_mslr.py --relevant {args.relevant}{' --quick' if args.quick else ''}`; {shapes}. "
              "Cells: test precision@5 at "
              "the mean test cost per document of the model chosen on validation within the budget "
              f"({', '.join(f'{f:g}' for f in BUDGET_FRACTIONS)} x plain LightGBM's validation cost).", "",
              *lines, "", *report_frontier(frame, args.out, name, f"MSLR, label >= {args.relevant}: validation Pareto "
                                           "points on test queries", "precision@5")]
    args.out.mkdir(parents=True, exist_ok=True)
    write_atomically(args.out / f"{name}.md", lambda tmp: Path(tmp).write_text("\n".join(report) + "\n"))
    print(f"report: {args.out / f'{name}.md'}")


if __name__ == "__main__":
    main()
