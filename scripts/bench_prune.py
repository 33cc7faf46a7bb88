#!/usr/bin/env python3
"""Time and peak memory of budget_prune as rows and trees grow (issue 5's scale benchmark).

Random forests with max_depth=None and min_samples_leaf=5 on synthetic data with --features features (28 by
default, HEPMASS's shape: --rows 3500000 is its training set's size) and random costs in [1, 10], pruned on
their training rows at tradeoff=0.01. Each configuration runs in its own process so
that its peak resident memory (getrusage) is its own; the time is budget_prune's alone (not the forest's).
Rows grow at --base-trees trees, trees grow at --base-rows rows. --path times budget_prune_path over
PATH_LAMS (one network, warm-started flows) against budget_prune at each trade-off alone, at --rows[0].

    .venv/bin/python -m scripts.bench_prune [--rows 200000] [--trees 40] [--features 28] [--solver maxflow]
    .venv/bin/python -m scripts.bench_prune --rows 3500000
    .venv/bin/python -m scripts.bench_prune --rows 50000 100000 200000 500000 1000000 --trees 10 20 100 200
    .venv/bin/python -m scripts.bench_prune --rows 50000 --path
    .venv/bin/python -m scripts.bench_prune --big-trees 16384
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

PATH_LAMS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2]


def one(rows: int, trees: int, features: int, solver: str, path: bool = False) -> dict:
    import numpy as np
    from sklearn.ensemble import RandomForestClassifier

    from lightgbm_cegb import budget_prune, budget_prune_path

    rng = np.random.default_rng(0)
    X = rng.normal(size=(rows, features)).astype(np.float32)  # the trees' own dtype: no copy when they read it
    y = (X[:, :5].sum(axis=1) + X[:, 5] * X[:, 6] + rng.normal(0, 1, rows) > 0).astype(int)
    start = time.perf_counter()
    forest = RandomForestClassifier(n_estimators=trees, min_samples_leaf=5, n_jobs=2, random_state=0).fit(X, y)
    forest_seconds = time.perf_counter() - start
    forest_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    costs = rng.uniform(1, 10, features)
    if path:
        start = time.perf_counter()
        budget_prune_path(forest, X, y, costs, PATH_LAMS, solver=solver)
        warm = time.perf_counter() - start
        start = time.perf_counter()
        for tradeoff in PATH_LAMS:
            budget_prune(forest, X, y, costs, tradeoff, solver=solver)
        return {"rows": rows, "trees": trees, "path_seconds": round(warm, 2),
                "alone_seconds": round(time.perf_counter() - start, 2)}
    start = time.perf_counter()
    result = budget_prune(forest, X, y, costs, 0.01, solver=solver)
    seconds = time.perf_counter() - start
    return {"rows": rows, "trees": trees, "seconds": round(seconds, 2),
            "peak_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
            "forest_seconds": round(forest_seconds, 1), "forest_peak_gb": round(forest_peak, 2),
            "nodes": int(sum(est.tree_.node_count for est in forest.estimators_)),
            "gap": result.objective - result.lower_bound}


def big_trees(leaves: int) -> None:
    """budget_prune on a LightGBM model of two trees of ``leaves`` leaves, on 2,000 rows: the time is mostly
    writing the pruned model (linear in nodes)."""
    import lightgbm as lgb
    import numpy as np

    from lightgbm_cegb import budget_prune

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200_000, 20))
    y = X[:, :5].sum(axis=1) + rng.normal(0, 1, len(X))
    booster = lgb.train({"objective": "regression", "num_leaves": leaves, "min_data_in_leaf": 2, "verbose": -1},
                        lgb.Dataset(X, y), 2)
    start = time.perf_counter()
    budget_prune(booster, X[:2000], y[:2000], np.ones(20), 0.001)
    sizes = [t["num_leaves"] for t in booster.dump_model()["tree_info"]]
    print(f"LightGBM, 2 trees of {sizes} leaves, 2,000 rows: budget_prune {time.perf_counter() - start:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[200_000])
    parser.add_argument("--trees", type=int, nargs="+", default=[])
    parser.add_argument("--base-trees", type=int, default=40)
    parser.add_argument("--base-rows", type=int, default=50_000)
    parser.add_argument("--features", type=int, default=28)
    parser.add_argument("--solver", choices=("maxflow", "highs"), default="maxflow")
    parser.add_argument("--path", action="store_true")
    parser.add_argument("--big-trees", type=int, metavar="LEAVES",
                        help="time budget_prune on a LightGBM model of two trees of LEAVES leaves instead")
    parser.add_argument("--one", type=int, nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.big_trees:
        big_trees(args.big_trees)
        return
    if args.one:
        print(json.dumps(one(*args.one, args.features, args.solver, args.path)))
        return
    if args.path:
        r = one(args.rows[0], args.base_trees, args.features, args.solver, path=True)
        print(f"{r['rows']} rows {r['trees']} trees, {len(PATH_LAMS)} trade-offs: budget_prune_path "
              f"{r['path_seconds']} s, budget_prune one by one {r['alone_seconds']} s")
        return
    grid = [(rows, args.base_trees) for rows in args.rows] + [(args.base_rows, t) for t in args.trees]
    print(f"budget_prune(solver={args.solver!r}): {args.features} features, max_depth=None, min_samples_leaf=5, "
          "tradeoff=0.01", flush=True)
    for rows, trees in grid:
        proc = subprocess.run([sys.executable, __file__, "--one", str(rows), str(trees), "--features",
                               str(args.features), "--solver", args.solver], capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"{rows:>9} rows {trees:>4} trees: failed ({proc.stderr.strip().splitlines()[-1:]})")
            continue
        r = json.loads(proc.stdout)
        print(f"{r['rows']:>9} rows {r['trees']:>4} trees ({r['nodes']:>8} nodes): {r['seconds']:7.1f} s, "
              f"peak {r['peak_gb']:.2f} GB, objective - bound {r['gap']:.1e} (the forest: {r['forest_seconds']} s, "
              f"peak {r['forest_peak_gb']:.2f} GB)", flush=True)


if __name__ == "__main__":
    main()
