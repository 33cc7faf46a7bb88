"""BudgetRF's training time against scikit-learn's RandomForestClassifier on the same data.

    .venv/bin/python scripts/bench_budgetrf.py [--rows 100000] [--features 50] [--trees 100]

Data: a random linear rule with noise (numpy seed 0), rows x features; both forests grow --trees trees on
bootstrap samples with all threads (n_jobs=-1), timed in the same run. The ratio is not like for like:
GreedyTree weighs every feature at every node (80/40/20 random thresholds each), scikit-learn's random
forest sqrt(features) of them (all thresholds) -- see the README for the figure and why.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.ensemble import RandomForestClassifier

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lightgbm_cegb.methods.budgetrf import BudgetRFClassifier  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--features", type=int, default=50)
    parser.add_argument("--trees", type=int, default=100)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.rows, args.features))
    y = (X @ rng.normal(size=args.features) + rng.normal(0, 3, args.rows) > 0).astype(int)
    rows = []
    for name, model in [("BudgetRF", BudgetRFClassifier(n_estimators=args.trees, random_state=0, n_jobs=-1)),
                        ("sklearn RF", RandomForestClassifier(n_estimators=args.trees, random_state=0, n_jobs=-1))]:
        start = time.perf_counter()
        model.fit(X, y)
        rows.append((name, time.perf_counter() - start, model))
    print(f"{args.rows:,} rows x {args.features} features, {args.trees} trees")
    for name, seconds, _model in rows:
        print(f"{name:<11} fit {seconds:8.1f} s")
    print(f"ratio BudgetRF / sklearn RF: {rows[0][1] / rows[1][1]:.2f}")


if __name__ == "__main__":
    main()
