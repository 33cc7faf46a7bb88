#!/usr/bin/env python3
"""Quality-cost frontiers of every method the package has, on classification data, for docs/RESULTS.md.

    .venv/bin/python scripts/frontiers.py --data higgs|letter|mnist [--quick] [--out docs/results]

Every registered method of lightgbm_cegb.selection that supports the task (plain LightGBM, CEGB, BudgetPrune,
Early Exit, BudgetRF, Greedy Miser, ADAPT-GBRT, ADAPT-LIN, CSTC, CSCC, Cronus; a method registered later joins
by itself) is swept on its default grid on the training rows and measured on the validation rows; its validation
Pareto points are then measured on the test rows.
BudgetPrune runs twice: on the plain boosted model and on a LightGBM random forest (its paper's setting). "CEGB
trained to the budget" is selection.train_to_budget at each of the table's budgets (one point each).
Quality: accuracy; cost: the exact mean feature cost per row (Early Exit: only the trees each row went through).
- higgs: the bundled HIGGS subset (5,500 / 1,500 / 500 rows), the demo's costs (21 low-level features 1,
  7 high-level 10).
- letter: UCI Letter Recognition, bundled (10,000 / 3,000 / 7,000 rows, 26 classes, unit costs).
- mnist: the cost-sensitive MNIST of CSTC's section 6.7 from ../shared/data: digits 3 against 8, each image at
  4x4, 8x8, 16x16 and 28x28 (area-averaged), 1,120 unit-cost features; 1,500 / 500 / the rest.
Writes DIR/frontier_<data>.csv, .png (with matplotlib) and .md (the best test accuracy of each method within 3
budgets, fractions of plain LightGBM's validation cost). For the ranking data (Yahoo! LTR, MSLR) see
scripts/reproduce_yahoo.py.
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, budget_table, load_letter, report_frontier, trained_to_budgets, write_atomically  # noqa: E402

from lightgbm_cegb import FeatureCosts  # noqa: E402
from lightgbm_cegb.datasets import HIGGS_COSTS, higgs  # noqa: E402
from lightgbm_cegb.selection import METHODS, evaluate, pareto, sweep  # noqa: E402

BUDGET_FRACTIONS = (0.1, 0.25, 0.5)
RESOLUTIONS = (4, 8, 16, 28)


def area_weights(size: int, source: int = 28) -> np.ndarray:
    """(size, source) matrix averaging a row of ``source`` pixels into ``size`` cells by overlap."""
    edges = np.linspace(0, source, size + 1)
    weights = np.clip(np.minimum(edges[1:, None], np.arange(1, source + 1)) - np.maximum(edges[:-1, None],
                                                                                     np.arange(source)), 0, None)
    return weights / weights.sum(axis=1, keepdims=True)


def multi_resolution(images: np.ndarray) -> np.ndarray:
    """(n, 28, 28) images as their 4x4, 8x8, 16x16 and 28x28 versions side by side: (n, 1120)."""
    parts = [np.einsum("ia,nab,jb->nij", area_weights(s), images, area_weights(s)).reshape(len(images), -1)
             for s in RESOLUTIONS]
    return np.hstack(parts)


def load_mnist() -> tuple[np.ndarray, np.ndarray]:
    folder = DATA / "mnist"
    with gzip.open(folder / "t10k-images-idx3-ubyte.gz") as fh:
        images = np.frombuffer(fh.read(), np.uint8, offset=16).reshape(-1, 28, 28)
    with gzip.open(folder / "t10k-labels-idx1-ubyte.gz") as fh:
        labels = np.frombuffer(fh.read(), np.uint8, offset=8)
    extra = np.loadtxt(folder / "mnist_5k.csv.gz", delimiter=",", dtype=np.float64)
    images = np.concatenate([images.astype(np.float64), extra[:, :-1].reshape(-1, 28, 28)]) / 255.0
    labels = np.concatenate([labels, extra[:, -1].astype(np.uint8)])
    keep = np.isin(labels, (3, 8))
    return multi_resolution(images[keep]), (labels[keep] == 8).astype(int)


def load(name: str) -> tuple[dict, FeatureCosts, str]:
    """{split: (X, y)}, the costs and the task."""
    if name == "higgs":
        X, y = higgs("train")
        return ({"train": (X[:5500], y[:5500]), "valid": (X[5500:], y[5500:]), "test": higgs("test")},
                HIGGS_COSTS, "binary")
    if name == "letter":
        parts = load_letter()
        classes = {c: i for i, c in enumerate(sorted(set(parts[0][1])))}
        coded = [(X, np.array([classes[c] for c in y])) for X, y in parts]
        return dict(zip(("train", "valid", "test"), coded)), FeatureCosts(lazy=np.ones(16)), "multiclass"
    X, y = load_mnist()
    order = np.random.default_rng(0).permutation(len(y))
    split = np.split(order, [1500, 2000])
    return ({k: (X[p], y[p]) for k, p in zip(("train", "valid", "test"), split)},
            FeatureCosts(lazy=np.ones(X.shape[1])), "binary")


QUICK = {"cegb": [{"relative_tradeoff": r} for r in (0.0, 0.05)], "budget_prune": [{"budget_fraction": 0.3}],
         "early_exit": [{"threshold": 0.9}], "budgetrf": [{"tradeoff": 2.0, "n_estimators": 5, "trees": (1, 5)}],
         "greedy_miser": [{"relative_tradeoff": r} for r in (0.0, 0.1)],
         "adapt_gbrt": [{"p_full": 0.3, "relative_tradeoff": 0.01, "n_rounds": 2, "trees_per_round": 10}],
         "adapt_lin": [{"p_full": 0.3, "relative_tradeoff": 0.05}],
         **{name: [{"relative_tradeoff": 1e-3}] for name in ("cstc", "cscc", "cronus")},
         "cheap_subset": [{"width": 2, "steps": 2}]}
# BudgetPrune's own setting (Nan et al. 2016): a random forest (LightGBM's rf mode: bootstrap-like bagging,
# a random half of the features per tree, 100 trees) rather than a boosted model
RF = {"boosting": "rf", "bagging_fraction": 0.632, "bagging_freq": 1, "feature_fraction": 0.5}
LABELS = {"lightgbm": "LightGBM", "cegb": "CEGB", "budget_prune": "BudgetPrune", "early_exit": "Early Exit",
          "budgetrf": "BudgetRF", "greedy_miser": "Greedy Miser", "adapt_gbrt": "ADAPT-GBRT",
          "adapt_lin": "ADAPT-LIN", "cstc": "CSTC", "cscc": "CSCC", "cronus": "Cronus",
          "cheap_subset": "Cheap subset (baseline)"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", choices=("higgs", "letter", "mnist"), default="higgs")
    parser.add_argument("--rounds", type=int, default=500, help="boosting rounds (early stopping on validation)")
    parser.add_argument("--jobs", type=int, default=1, help="grid points trained in parallel")
    parser.add_argument("--quick", action="store_true", help="small grids (the test runs this)")
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    parts, costs, task = load(args.data)
    args.out.mkdir(parents=True, exist_ok=True)
    runs = [(LABELS.get(name, name), name, {}, args.rounds) for name, method in METHODS.items() if task in method.tasks]
    runs.insert([r[1] for r in runs].index("budget_prune") + 1,
                ("BudgetPrune (random forest)", "budget_prune", RF, 100))
    frames = []
    for label, name, params, rounds in runs:
        start = time.perf_counter()
        grid = {name: QUICK[name]} if args.quick and name in QUICK else None
        frame = sweep(name, parts["train"], parts["valid"], costs, task=task, grid=grid, params=params,
                      num_boost_round=rounds, n_jobs=args.jobs, baseline=False)  # the baseline is a run
        frame = evaluate(pareto(frame), parts["test"])
        frame["method"] = label
        frames.append(frame)
        print(f"{label}: {len(frame)} validation Pareto points in "
              f"{time.perf_counter() - start:.1f} s", flush=True)
    plain = frames[[run[1] for run in runs].index("lightgbm")]["cost"].max()  # the budgets: fractions of it
    budgets = [round(f * plain, 4) for f in BUDGET_FRACTIONS]
    start = time.perf_counter()
    frames.append(trained_to_budgets(parts["train"], parts["valid"], parts["test"], costs, budgets,
                                     "CEGB trained to the budget", task=task, quick=args.quick,
                                     num_boost_round=args.rounds, n_jobs=args.jobs))
    print(f"CEGB trained to each budget in {time.perf_counter() - start:.1f} s", flush=True)
    frame = pd.concat(frames, ignore_index=True)
    frame.attrs = dict(frames[0].attrs)
    lines = budget_table(frame, budgets)
    print("\n".join(lines))
    shapes = "; ".join(f"{k}: {len(v[1])} rows" for k, v in parts.items())
    name = f"frontier_{args.data}"
    report = [f"## {args.data}", "",
              f"`scripts/frontiers.py --data {args.data}{' --quick' if args.quick else ''}`; "
              f"{parts['train'][0].shape[1]} features; {shapes}. Cells: test accuracy at the mean test cost per row "
              f"of the model chosen on validation within the budget ({', '.join(f'{f:g}' for f in BUDGET_FRACTIONS)}"
              " x plain LightGBM's validation cost).", "", *lines, "",
              *report_frontier(frame, args.out, name, f"{args.data}: validation Pareto points on test rows",
                               "accuracy")]
    write_atomically(args.out / f"{name}.md", lambda tmp: Path(tmp).write_text("\n".join(report) + "\n"))
    print(f"report: {args.out / f'{name}.md'}")


if __name__ == "__main__":
    main()
