#!/usr/bin/env python3
"""Training time with CEGB penalties relative to plain LightGBM, same data, same run.

The shape of issue 4's bar: 200k rows x 100 features, 63 leaves, 50 rounds, 2 threads. Prints the median
of ``--repeats`` timings and the ratios (lazy / plain; the bar is <= 1.10, coupled and split <= 1.05).
Ratios, not seconds: timings on shared machines are noisy.

    .venv/bin/python scripts/bench_training.py [--rows 200000] [--features 100] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import lightgbm as lgb
import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.rows, args.features))
    y = X[:, :10].sum(axis=1) + X[:, 10] * X[:, 11] + rng.normal(0, 1, args.rows)
    data = lgb.Dataset(X, y, params={"verbose": -1}).construct()
    base = {"objective": "regression", "num_leaves": 63, "num_threads": 2, "verbose": -1, "seed": 0}
    tiny = [1e-12] * args.features  # a negligible penalty: the cost of the bookkeeping alone
    settings = {
        "plain": {},
        "lazy": {"cegb_penalty_feature_lazy": tiny},
        "coupled": {"cegb_penalty_feature_coupled": tiny},
        "split": {"cegb_penalty_split": 1e-12},
    }
    times = {}
    for name, extra in settings.items():
        runs = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            lgb.train({**base, **extra}, data, args.rounds)
            runs.append(time.perf_counter() - start)
        times[name] = statistics.median(runs)
    print(f"lightgbm {lgb.__version__}: {args.rows} rows x {args.features} features, 63 leaves, "
          f"{args.rounds} rounds, 2 threads, median of {args.repeats}")
    for name, seconds in times.items():
        print(f"{name:<8} {seconds:7.2f} s   ratio to plain {seconds / times['plain']:.2f}")


if __name__ == "__main__":
    main()
