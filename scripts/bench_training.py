#!/usr/bin/env python3
"""Training time with CEGB penalties relative to plain LightGBM, same data, same run.

Two shapes (issue 29's bar: lazy / plain <= 1.05, median of 5; issue 4's: coupled and split <= 1.05; issue 11's:
lazy-group, groups of 10 features, / plain <= 1.10):
  --shape small   200k rows x 100 features, 63 leaves, 50 rounds, 2 threads
  --shape yahoo   500k rows x 519 features with the real Yahoo! LTR cost vector (the 519 ids of set 1 that
                  have a real cost; --costs names the file, by default ../shared/data/yahoo_ltr_costs)
The penalties are negligible (tradeoff 1e-12: the same trees as plain LightGBM, so the ratio is the cost
of the bookkeeping alone); on the yahoo shape a "lazy-real" row also trains with the real costs at a
tradeoff that changes the model (other trees: informative, not part of the bar). The settings train in turn
within each repeat; prints the median of ``--repeats`` timings and the ratios; ratios, not seconds, since
timings on shared machines are noisy.
Run it under the stock wheel for stock figures (stock LightGBM ignores the group parameters of patch 0005, so
its lazy-group and coupled-group rows train plain LightGBM):
    PYTHONPATH=$(python3 scripts/build/lgbm_source.py stock) .venv/bin/python -m scripts.bench_training

    .venv/bin/python -m scripts.bench_training [--shape small|yahoo] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import lightgbm as lgb
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
YAHOO_COSTS = ROOT.parent / "shared" / "data" / "yahoo_ltr_costs" / "feature_cost.txt"
SHAPES = {"small": (200_000, 100), "yahoo": (500_000, 519)}
MISSING_FEATURE_COST = 10000.0  # the Yahoo file's sentinel for ids that never occur in set 1


def yahoo_costs(path: Path) -> np.ndarray:
    values = np.array([float(line) for line in path.read_text().split()])
    return values[values != MISSING_FEATURE_COST]


def make_data(rows: int, features: int) -> tuple[np.ndarray, np.ndarray]:
    """Dense float32 features, a third of them mostly zero (as ranking features often are)."""
    rng = np.random.default_rng(0)
    X = rng.random((rows, features), dtype=np.float32)
    sparse = rng.random(features) < 1 / 3
    X[:, sparse] *= rng.random((rows, int(sparse.sum())), dtype=np.float32) < 0.2
    y = X[:, :10].sum(axis=1) + X[:, 10] * X[:, 11] + rng.normal(0, 0.5, rows)
    return X, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=SHAPES, default="small")
    parser.add_argument("--costs", type=Path, default=YAHOO_COSTS, help="Yahoo-format cost file")
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    rows, features = SHAPES[args.shape]
    costs = yahoo_costs(args.costs) if args.shape == "yahoo" else np.ones(features)
    if len(costs) != features:
        raise SystemExit(f"--costs {args.costs}: expected {features} real costs, found {len(costs)}")
    X, y = make_data(rows, features)
    data = lgb.Dataset(X, y, params={"verbose": -1}).construct()
    del X
    base = {"objective": "regression", "num_leaves": 63, "num_threads": 2, "verbose": -1, "seed": 0}
    negligible = {"cegb_tradeoff": 1e-12}
    groups = {"cegb_feature_group": [j // 10 for j in range(features)]}
    group_costs = [float(costs[j:j + 10].sum()) for j in range(0, features, 10)]
    settings = {
        "plain": {},
        "lazy": {**negligible, "cegb_penalty_feature_lazy": list(costs)},
        "coupled": {**negligible, "cegb_penalty_feature_coupled": list(costs)},
        "split": {**negligible, "cegb_penalty_split": 1.0},
        # patch 0005: groups of 10 consecutive features, each group costing what its members cost together
        "lazy-group": {**negligible, **groups, "cegb_penalty_group_lazy": group_costs},
        "coupled-group": {**negligible, **groups, "cegb_penalty_group_coupled": group_costs},
    }
    if args.shape == "yahoo":
        settings["lazy-real"] = {"cegb_tradeoff": 1e-4, "cegb_penalty_feature_lazy": list(costs)}
    runs: dict[str, list[float]] = {name: [] for name in settings}
    for _ in range(args.repeats):  # the settings in turn, so that a drift of the machine's speed hits them all
        for name, extra in settings.items():
            start = time.perf_counter()
            lgb.train({**base, **extra}, data, args.rounds)
            runs[name].append(time.perf_counter() - start)
    times = {name: statistics.median(seconds) for name, seconds in runs.items()}
    print(f"lightgbm {lgb.__version__}: {rows} rows x {features} features ({args.shape}), 63 leaves, "
          f"{args.rounds} rounds, 2 threads, median of {args.repeats}")
    for name, seconds in times.items():
        print(f"{name:<13} {seconds:7.2f} s   ratio to plain {seconds / times['plain']:.2f}")


if __name__ == "__main__":
    main()
