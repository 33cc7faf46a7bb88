"""The staged acquisition fitted on a Dask cluster against the same rows fitted in memory.

    .venv/bin/python -m scripts.bench_dask [--rows 100000] [--splits 5] [--workers 2] [--stages 10]

Data: a synthetic binary set (``make_classification``: 20 features, 10 informative, 5 redundant, 2% of labels
flipped) of --rows training rows and 20,000 test rows per split (seed = the split), with a cost model of three
tiers (features 1 to 8 at 1, 9 to 14 at 5, 15 to 20 at 25, the informative and the redundant ones spread over
them). Per split, ``StagedAcquisitionClassifier(stages=--stages, random_state=split)`` is fitted in memory (on the
machine's threads) and from a Dask array of 8 partitions on a ``LocalCluster`` of --workers processes of one
thread each, in the same process session. Each fitted model is measured on the test rows at three trade-offs
(read when predicting, one pass: ``predict_results``): accuracy and the mean cost per row, each the mean over the
splits with its 95% Student-t interval; the fit's seconds, Dask / in memory.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from lightgbm_cegb import FeatureCosts, StagedAcquisitionClassifier
from scripts.protocol import interval

TRADEOFFS = (0.0, 0.1, 0.3)
COSTS = FeatureCosts(lazy=[1.0] * 8 + [5.0] * 6 + [25.0] * 6)


def rows(train: int, seed: int):
    from sklearn.datasets import make_classification

    X, y = make_classification(train + 20_000, 20, n_informative=10, n_redundant=5, flip_y=0.02,
                               random_state=seed)  # rows and columns shuffled: the informative ones over the tiers
    return X[:train], y[:train], X[train:], y[train:]


def measured(model: StagedAcquisitionClassifier, X: np.ndarray, y: np.ndarray) -> list[tuple[float, float]]:
    results = model.predict_results(X, [{"tradeoff": t} for t in TRADEOFFS])
    return [(float((model.classes_[r.proba.argmax(axis=1)] == y).mean()), r.cost.mean) for r in results]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--stages", type=int, default=10)
    args = parser.parse_args()

    import dask.array as da
    from distributed import Client, LocalCluster

    figures = {"memory": [], "dask": []}
    seconds = {"memory": [], "dask": []}
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=50) as cluster, Client(cluster):
        for split in range(args.splits):
            X, y, X_test, y_test = rows(args.rows, split)
            chunk = -(-len(X) // 8)
            for kind, fit_rows in (("memory", (X, y)),
                                   ("dask", (da.from_array(X, chunks=(chunk, X.shape[1])),
                                             da.from_array(y, chunks=chunk)))):
                model = StagedAcquisitionClassifier(feature_costs=COSTS, stages=args.stages, random_state=split)
                start = time.perf_counter()
                model.fit(*fit_rows)
                seconds[kind].append(time.perf_counter() - start)
                figures[kind].append(measured(model, X_test, y_test))
                print(f"split {split} {kind}: {seconds[kind][-1]:.1f} s, {len(model.stages_)} stages, "
                      + ", ".join(f"{a:.4f} at {c:.2f}" for a, c in figures[kind][-1]), flush=True)

    print(f"\n{args.rows:,} training rows, {args.splits} splits, {args.workers} workers of one thread; test accuracy "
          "and mean cost per row (mean ± 95% interval)\n")
    print("| trade-off | in memory | from Dask | cost in memory | cost from Dask |")
    print("|---|---|---|---|---|")
    for i, tradeoff in enumerate(TRADEOFFS):
        cells = []
        for which in (0, 1):
            for kind in ("memory", "dask"):
                mean, half = interval([split[i][which] for split in figures[kind]])
                cells.append(f"{mean:.4f} ± {half:.4f}" if which == 0 else f"{mean:.2f} ± {half:.2f}")
        print(f"| {tradeoff:g} | " + " | ".join(cells) + " |")
    ratio = np.array(seconds["dask"]) / np.array(seconds["memory"])
    print(f"\nfit seconds: in memory {np.mean(seconds['memory']):.1f}, from Dask {np.mean(seconds['dask']):.1f} "
          f"(Dask / in memory {ratio.mean():.2f} x, from {ratio.min():.2f} to {ratio.max():.2f})")


if __name__ == "__main__":
    main()
