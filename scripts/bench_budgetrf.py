"""BudgetRF's training time against scikit-learn's RandomForestClassifier on the same data.

    .venv/bin/python -m scripts.bench_budgetrf [--rows 100000] [--features 50] [--trees 100]
        [--max-features sqrt|none|both] [--jobs 1] [--repeats 3]

Data: a random linear rule with noise (numpy seed 0), rows x features; both forests grow --trees trees on
bootstrap samples with --jobs threads each (default 1: a ratio of single-threaded fits), timed in the same run,
the median of --repeats fits. GreedyTree weighs every feature at every node (80/40/20 random thresholds each):
``--max-features none`` compares it with scikit-learn's random forest weighing every feature too
(``max_features=None``, like for like), ``sqrt`` with scikit-learn's default (sqrt(features) per node, not like
for like); ``both`` (the default) prints both ratios.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from sklearn.ensemble import RandomForestClassifier

from lightgbm_cegb.methods.budgetrf import BudgetRFClassifier


def _fit_seconds(model, X, y) -> float:
    start = time.perf_counter()
    model.fit(X, y)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--features", type=int, default=50)
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--max-features", choices=["sqrt", "none", "both"], default="both",
                        help="scikit-learn's max_features: sqrt (its default), none (all, as GreedyTree) or both")
    parser.add_argument("--jobs", type=int, default=1, help="threads of each fit (default 1: a fair ratio)")
    parser.add_argument("--repeats", type=int, default=3, help="fits per model; the median is reported")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.rows, args.features))
    y = (X @ rng.normal(size=args.features) + rng.normal(0, 3, args.rows) > 0).astype(int)
    settings = ["sqrt", "none"] if args.max_features == "both" else [args.max_features]
    # interleaved (BudgetRF, then each scikit-learn setting, per repeat) so that a load change on a shared
    # machine hits both sides alike
    times: dict[str, list[float]] = {name: [] for name in ["BudgetRF", *settings]}
    for _ in range(args.repeats):
        times["BudgetRF"].append(_fit_seconds(
            BudgetRFClassifier(n_estimators=args.trees, random_state=0, n_jobs=args.jobs), X, y))
        for setting in settings:
            times[setting].append(_fit_seconds(
                RandomForestClassifier(n_estimators=args.trees, random_state=0, n_jobs=args.jobs,
                                       max_features=None if setting == "none" else "sqrt"), X, y))
    median = {name: statistics.median(values) for name, values in times.items()}
    print(f"{args.rows:,} rows x {args.features} features, {args.trees} trees, {args.jobs} thread(s), "
          f"median of {args.repeats}")
    print(f"{'BudgetRF':<32} fit {median['BudgetRF']:8.2f} s")
    for setting in settings:
        label = f"sklearn RF max_features={'None' if setting == 'none' else 'sqrt'}"
        print(f"{label:<32} fit {median[setting]:8.2f} s")
    for setting in settings:
        ratios = [b / s for b, s in zip(times["BudgetRF"], times[setting])]
        print(f"ratio BudgetRF / sklearn RF (max_features={'None' if setting == 'none' else 'sqrt'}): "
              f"{median['BudgetRF'] / median[setting]:.2f} (per repeat: {', '.join(f'{r:.2f}' for r in ratios)})")


if __name__ == "__main__":
    main()
