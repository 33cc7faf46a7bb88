#!/usr/bin/env python3
"""Accuracy-cost frontier of BudgetPrune on real data: a random forest pruned at a sweep of trade-offs.

    .venv/bin/python -m scripts.budget_prune_frontier --data letter [--trees 20 --depth 8] [--out DIR]
    .venv/bin/python -m scripts.budget_prune_frontier --data mslr

letter: UCI Letter Recognition (26 classes, 16 features, unit costs); 10,000 rows train the forest, 3,000
are the pruning data, 7,000 measure test accuracy and cost. mslr: the MSLR-WEB subset (label >= 1 is
"relevant"), its 136-feature cost vector; its train file is split 3,000 / 2,000 (forest / pruning data),
its test file measures. letter is bundled (lightgbm_cegb/datasets/data/letter); mslr from ../shared/data (see its
MANIFEST.md for sources and licences).
Writes DIR/budget_prune_<data>.csv (one row per trade-off, plus the unpruned forest) and, with
matplotlib installed, DIR/budget_prune_<data>.png. --solver highs uses the reference LP instead of the
max-flow solver.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import load_svmlight_file
from sklearn.ensemble import RandomForestClassifier

from lightgbm_cegb import FeatureCosts, budget_prune_path, prediction_cost
from lightgbm_cegb.datasets import read_cost_file
from lightgbm_cegb.io.atomic import write_atomically
from scripts.protocol import DATA, load_letter, pyplot, write_table

# trade-offs per data set: the error term sums the trees' error rates (up to the number of trees), the cost
# term is per row (letter: at most 16, MSLR: thousands)
LAMS = {"letter": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8], "mslr": [0.0, 1e-5, 3e-5, 1e-4, 2e-4, 3e-4, 1e-3]}


def load(name: str):
    """(X_forest, y_forest), (X_prune, y_prune), (X_test, y_test), costs"""
    rng = np.random.default_rng(0)
    if name == "letter":
        return load_letter() + [np.ones(16)]
    if name == "mslr":
        folder = DATA / "mslr_subset"
        X, y = load_svmlight_file(str(folder / "msn1.fold1.train.5k.txt.gz"), n_features=136)
        X_test, y_test = load_svmlight_file(str(folder / "msn1.fold1.test.5k.txt.gz"), n_features=136)
        X, X_test = X.toarray(), X_test.toarray()
        y, y_test = (y >= 1).astype(int), (y_test >= 1).astype(int)
        order = rng.permutation(len(y))
        forest, prune = order[:3000], order[3000:]
        costs = read_cost_file(folder / "feature_cost.txt", num_features=136).arrays(136)[0]
        return (X[forest], y[forest]), (X[prune], y[prune]), (X_test, y_test), costs
    raise SystemExit(f"--data should be letter or mslr, got {name!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", choices=("letter", "mslr"), default="letter")
    parser.add_argument("--trees", type=int, default=20)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--tradeoffs", type=float, nargs="+", help="trade-offs (default: per data set)")
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--solver", choices=("maxflow", "highs"), default="maxflow")
    args = parser.parse_args()

    (X_fit, y_fit), (X_prune, y_prune), (X_test, y_test), costs = load(args.data)
    forest = RandomForestClassifier(n_estimators=args.trees, max_depth=args.depth, random_state=0,
                                    n_jobs=2).fit(X_fit, y_fit)
    start = time.perf_counter()
    tradeoffs = args.tradeoffs or LAMS[args.data]
    path = budget_prune_path(forest, X_prune, y_prune, costs, tradeoffs, solver=args.solver)
    seconds = time.perf_counter() - start

    def point(model, tradeoff, result=None):
        report = prediction_cost(model, X_test, FeatureCosts(lazy=costs))
        return {"tradeoff": tradeoff, "test_accuracy": float(np.mean(model.predict(X_test) == y_test)),
                "test_cost": float(np.mean(report.per_instance)),
                "prune_objective": None if result is None else result.objective,
                "prune_error": None if result is None else result.error,
                "prune_cost": None if result is None else result.cost,
                "nodes": int(sum(est.tree_.node_count for est in model.estimators_))}

    rows = [point(forest, "unpruned")] + [point(r.model, r.tradeoff, r) for r in path]
    args.out.mkdir(parents=True, exist_ok=True)
    table = args.out / f"budget_prune_{args.data}.csv"
    write_table(table, rows)
    print(f"{args.data}: {args.trees} trees of depth <= {args.depth}, {len(y_prune)} pruning rows, "
          f"{len(tradeoffs)} trade-offs in {seconds:.1f} s ({args.solver})")
    for row in rows:
        print(f"  tradeoff {row['tradeoff']!s:>8}  test accuracy {row['test_accuracy']:.4f}"
              f"  test cost {row['test_cost']:8.2f}  nodes {row['nodes']}")
    prune_costs = [r.cost for r in path]
    monotone = all(b <= a + 1e-12 for a, b in zip(prune_costs, prune_costs[1:]))
    print(f"cost on the pruning data non-increasing in tradeoff: {monotone}; table: {table}")
    plt = pyplot()
    if plt is None:
        return
    figure, axes = plt.subplots(figsize=(6, 4))
    axes.plot([r["test_cost"] for r in rows[1:]], [r["test_accuracy"] for r in rows[1:]], "o-", label="BudgetPrune")
    axes.plot([rows[0]["test_cost"]], [rows[0]["test_accuracy"]], "k*", markersize=12, label="unpruned forest")
    axes.set_xlabel("mean feature cost per test row")
    axes.set_ylabel("test accuracy")
    axes.set_title(f"BudgetPrune on {args.data} ({args.trees} trees, depth <= {args.depth})")
    axes.legend()
    figure.tight_layout()
    picture = args.out / f"budget_prune_{args.data}.png"
    write_atomically(picture, lambda tmp: figure.savefig(tmp, format="png", dpi=120))
    print(f"plot: {picture}")


if __name__ == "__main__":
    main()
