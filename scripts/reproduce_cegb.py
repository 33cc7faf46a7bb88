#!/usr/bin/env python3
"""The CEGB paper's experiments on public data without known feature costs (Peter, Diego, Hamprecht and Nadler,
"Cost efficient gradient boosting", NIPS 2017, section 5): figure 2c (MiniBooNE), 2d (Forest Covertype, two
classes), 2e and 2f (HEPMASS-1000, HEPMASS-not1000), on your copy of each data set.

    .venv/bin/python -m scripts.reproduce_cegb --data miniboone MiniBooNE_PID.txt [--splits 5] [--out DIR]
    .venv/bin/python -m scripts.reproduce_cegb --data covertype covtype.data.gz
    .venv/bin/python -m scripts.reproduce_cegb --data hepmass 1000_train.csv.gz 1000_test.csv.gz

As the paper: every feature costs 1 and only feature acquisition counts (its setting (ii), alpha = 0); the
methods it compares, CEGB, Greedy Miser and BudgetPrune (of a random forest of fully grown trees, as
BudgetPrune's paper runs it), beside plain LightGBM, whose validation cost is the budgets' unit. Unlike the
paper, the one protocol of scripts/protocol.py: --splits random splits of the paper's sizes (the paper used one),
every boosted or bagged model a point at each of its tree prefixes, the table the mean test accuracy within each
budget with its 95% interval. The paper's sizes (train / valid / test):
- miniboone: 45,523 / 19,510 / 65,031, all 130,064 rows of MiniBooNE_PID.txt (lightgbm_cegb.datasets.miniboone);
- covertype: 36,603 / 15,688 / 58,101 rows of class 2 against the others (covertype(binary=True): the paper
  restricts Covertype to two classes without saying which);
- hepmass: 3,500,000 / 1,400,000 / 5,600,000 rows of the given files, pooled (the paper's HEPMASS sets have
  over ten million rows; BudgetPrune did not finish on them in the paper).
``--sizes TRAIN VALID [TEST]`` replaces them (e.g. a tenth for a first look on a small machine). Writes
DIR/cegb_<data>.csv, .png and .md as scripts/frontiers.py does.
"""

from __future__ import annotations

import numpy as np

from lightgbm_cegb import FeatureCosts
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.datasets import covertype, hepmass, miniboone
from scripts.protocol import LABELS, QUICK, protocol_parser, random_split, repeated_frontiers, rf_run

SIZES = {"miniboone": (45_523, 19_510, 65_031), "covertype": (36_603, 15_688, 58_101),
         "hepmass": (3_500_000, 1_400_000, 5_600_000)}
FIGURES = {"miniboone": "2c", "covertype": "2d", "hepmass": "2e/2f"}


def runs(train_rows: int) -> list[tuple]:
    """The figures' methods: plain LightGBM, CEGB, Greedy Miser and BudgetPrune of a fully grown random forest."""
    return [(LABELS["lightgbm"], "lightgbm", {}), (LABELS["cegb"], "cegb", {}),
            (LABELS["greedy_miser"], "greedy_miser", {}), rf_run(train_rows)]


def load(name: str, paths: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) of the data set from the user's files (HEPMASS: one or more files, pooled)."""
    if name == "hepmass":
        parts = [hepmass(path) for path in paths]
        return np.vstack([X for X, _ in parts]), np.concatenate([y for _, y in parts])
    if len(paths) != 1:
        raise CEGBError(f"--data {name} takes one file, got {len(paths)}: {paths}")
    return covertype(paths[0], binary=True) if name == "covertype" else miniboone(paths[0])


def main() -> None:
    parser = protocol_parser(__doc__, choices=tuple(SIZES), data_paths=True)
    parser.add_argument("--sizes", type=int, nargs="+", metavar="N",
                        help="TRAIN VALID [TEST] rows instead of the paper's (without TEST, the rest tests)")
    args = parser.parse_args()
    name, paths = args.data[0], args.data[1:]
    if name not in SIZES or not paths:
        parser.error(f"--data takes a name ({', '.join(SIZES)}) and its file(s), got {args.data}")
    sizes = tuple(args.sizes) if args.sizes else SIZES[name]
    if len(sizes) not in (2, 3):
        parser.error(f"--sizes takes TRAIN VALID [TEST], got {sizes}")
    X, y = load(name, paths)
    costs = FeatureCosts(lazy=np.ones(X.shape[1]))
    repeated_frontiers(lambda seed: random_split(X, y, sizes, seed), costs, "binary", runs(sizes[0]), args,
                       name=f"cegb_{name}", title=f"{name} (CEGB paper, figure {FIGURES[name]})",
                       command=f"python -m scripts.reproduce_cegb --data {name} PATH", quick_grids=QUICK)


if __name__ == "__main__":
    main()
