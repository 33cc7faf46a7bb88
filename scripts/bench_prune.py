#!/usr/bin/env python3
"""Time and peak memory of budget_prune as rows and trees grow (issue 5's scale benchmark).

Random forests with max_depth=None and min_samples_leaf=5 on synthetic data with 50 features and random
costs in [1, 10], pruned on their training rows at lam=0.01. Each configuration runs in its own process so
that its peak resident memory (getrusage) is its own; the time is budget_prune's alone (not the forest's).

    .venv/bin/python scripts/bench_prune.py [--rows 20000 50000] [--trees 10 20 40] [--solver maxflow]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def one(rows: int, trees: int, solver: str) -> dict:
    import numpy as np
    from sklearn.ensemble import RandomForestClassifier

    from lightgbm_cegb import budget_prune

    rng = np.random.default_rng(0)
    X = rng.normal(size=(rows, 50))
    y = (X[:, :5].sum(axis=1) + X[:, 5] * X[:, 6] + rng.normal(0, 1, rows) > 0).astype(int)
    forest = RandomForestClassifier(n_estimators=trees, min_samples_leaf=5, n_jobs=2, random_state=0).fit(X, y)
    start = time.perf_counter()
    result = budget_prune(forest, X, y, rng.uniform(1, 10, 50), 0.01, solver=solver)
    seconds = time.perf_counter() - start
    return {"rows": rows, "trees": trees, "seconds": round(seconds, 2),
            "peak_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
            "nodes": int(sum(est.tree_.node_count for est in forest.estimators_)),
            "gap": result.objective - result.lower_bound}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[20_000, 50_000])
    parser.add_argument("--trees", type=int, nargs="+", default=[10, 20, 40])
    parser.add_argument("--solver", choices=("maxflow", "highs"), default="maxflow")
    parser.add_argument("--one", type=int, nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(*args.one, args.solver)))
        return
    grid = [(rows, max(args.trees)) for rows in args.rows] + [(min(args.rows), t) for t in args.trees[:-1]]
    print(f"budget_prune(solver={args.solver!r}): 50 features, max_depth=None, min_samples_leaf=5, lam=0.01")
    for rows, trees in grid:
        proc = subprocess.run([sys.executable, __file__, "--one", str(rows), str(trees), "--solver", args.solver],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"{rows:>9} rows {trees:>4} trees: failed ({proc.stderr.strip().splitlines()[-1:]})")
            continue
        r = json.loads(proc.stdout)
        print(f"{r['rows']:>9} rows {r['trees']:>4} trees ({r['nodes']:>8} nodes): {r['seconds']:7.1f} s, "
              f"peak {r['peak_gb']:.2f} GB, objective - bound {r['gap']:.1e}")


if __name__ == "__main__":
    main()
