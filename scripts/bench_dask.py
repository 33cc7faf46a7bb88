"""The staged acquisition (classifier or ranker) fitted on a Dask cluster against the same rows fitted in memory.

    .venv/bin/python -m scripts.bench_dask [--rows 100000] [--splits 5] [--workers 2] [--stages 10]
    .venv/bin/python -m scripts.bench_dask --task ranking [--queries 2000] [--splits 5] [--workers 2] [--stages 10]

Binary: a synthetic set (``make_classification``: 20 features, 10 informative, 5 redundant, 2% of labels flipped)
of --rows training rows and 20,000 test rows per split (seed = the split), with a cost model of three tiers
(features 1 to 8 at 1, 9 to 14 at 5, 15 to 20 at 25, the informative and the redundant ones spread over them).
Per split, ``StagedAcquisitionClassifier(stages=--stages, random_state=split)`` is fitted in memory (on the
machine's threads) and from a Dask array of 8 partitions on a ``LocalCluster`` of --workers processes of one
thread each, in the same process session. Each fitted model is measured on the test rows at three trade-offs
(read when predicting, one pass: ``predict_results``): accuracy and the mean cost per row, each the mean over the
splits with its 95% Student-t interval; the fit's seconds, Dask / in memory.

Ranking (``--task ranking``): the synthetic Yahoo!-shaped documents of ``scripts.reproduce_yahoo`` (the real Yahoo!
lazy costs, the signal in the expensive features; --queries queries, 60% training, of which the validation queries
stop the stages, and 20% test; seed = the split), ``StagedAcquisitionRanker(stages=--stages, top_k=5)`` fitted in
memory and from Dask arrays of 8 partitions of whole queries, measured by the test queries' NDCG@10 and mean cost per
document at three trade-offs.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from lightgbm_cegb import FeatureCosts, StagedAcquisitionClassifier, StagedAcquisitionRanker
from scripts.protocol import interval

TRADEOFFS = (0.0, 0.1, 0.3)
COSTS = FeatureCosts(lazy=[1.0] * 8 + [5.0] * 6 + [25.0] * 6)
#: the ranker's trade-offs: the share of a query's documents each cut stops
RANKING_TRADEOFFS = (0.0, 0.5, 0.8)


def rows(train: int, seed: int):
    from sklearn.datasets import make_classification

    X, y = make_classification(train + 20_000, 20, n_informative=10, n_redundant=5, flip_y=0.02,
                               random_state=seed)  # rows and columns shuffled: the informative ones over the tiers
    return X[:train], y[:train], X[train:], y[train:]


def measured(model: StagedAcquisitionClassifier, X: np.ndarray, y: np.ndarray) -> list[tuple[float, float]]:
    results = model.predict_results(X, [{"tradeoff": t} for t in TRADEOFFS])
    return [(float((model.classes_[r.proba.argmax(axis=1)] == y).mean()), r.cost.mean) for r in results]


def classification(split: int, args) -> tuple:
    """(the in-memory fit's arguments, the Dask fit's, a fresh model, what measures a fitted one) of a binary split."""
    import dask.array as da

    X, y, X_test, y_test = rows(args.rows, split)
    chunk = -(-len(X) // 8)
    return ((X, y), {}), ((da.from_array(X, chunks=(chunk, X.shape[1])), da.from_array(y, chunks=chunk)), {}), \
        lambda: StagedAcquisitionClassifier(feature_costs=COSTS, stages=args.stages, random_state=split), \
        lambda model: measured(model, X_test, y_test)


def ranking(split: int, args) -> tuple:
    """As :func:`classification`, of a ranking split: whole queries in the Dask arrays' partitions, the validation
    queries stopping the stages of both fits."""
    import dask.array as da

    from lightgbm_cegb.core.ranking_metrics import ndcg_at_k
    from lightgbm_cegb.datasets import yahoo_costs
    from scripts.reproduce_yahoo import synthetic_arrays

    parts = synthetic_arrays(args.queries, split)
    (X, y, group), valid, (X_test, y_test, test_group) = parts["train"], parts["valid"], parts["test"]
    cut = np.linspace(0, len(group), 9).round().astype(int)
    queries = tuple(int(b - a) for a, b in zip(cut[:-1], cut[1:]))
    documents = tuple(int(group[a:b].sum()) for a, b in zip(cut[:-1], cut[1:]))
    stop = {"eval_set": [valid[:2]], "eval_group": [valid[2]]}
    dask_rows = (da.from_array(X, chunks=(documents, X.shape[1])), da.from_array(y, chunks=(documents,)))

    def measure(model: StagedAcquisitionRanker) -> list[tuple[float, float]]:
        results = model.predict_results(X_test, [{"tradeoff": t} for t in RANKING_TRADEOFFS], group=test_group)
        return [(ndcg_at_k(y_test, r.score, test_group, 10), r.cost.mean) for r in results]

    return ((X, y), {"group": group, **stop}), \
        (dask_rows, {"group": da.from_array(group, chunks=(queries,)), **stop}), \
        lambda: StagedAcquisitionRanker(feature_costs=FeatureCosts(lazy=yahoo_costs().lazy), stages=args.stages,
                                        top_k=5, random_state=split), measure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=("binary", "ranking"), default="binary")
    parser.add_argument("--rows", type=int, default=100_000, help="binary: training rows")
    parser.add_argument("--queries", type=int, default=2000, help="ranking: queries in all")
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--stages", type=int, default=10)
    args = parser.parse_args()

    from distributed import Client, LocalCluster

    figures = {"memory": [], "dask": []}
    seconds = {"memory": [], "dask": []}
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=50) as cluster, Client(cluster):
        for split in range(args.splits):
            memory, dask, fresh, measure = (ranking if args.task == "ranking" else classification)(split, args)
            for kind, (fit_rows, fit_params) in (("memory", memory), ("dask", dask)):
                model = fresh()
                start = time.perf_counter()
                model.fit(*fit_rows, **fit_params)
                seconds[kind].append(time.perf_counter() - start)
                figures[kind].append(measure(model))
                print(f"split {split} {kind}: {seconds[kind][-1]:.1f} s, {len(model.stages_)} stages, "
                      + ", ".join(f"{a:.4f} at {c:.2f}" for a, c in figures[kind][-1]), flush=True)

    ranked = args.task == "ranking"
    size = f"{args.queries:,} queries" if ranked else f"{args.rows:,} training rows"
    print(f"\n{size}, {args.splits} splits, {args.workers} workers of one thread; test "
          f"{'NDCG@10' if ranked else 'accuracy'} and mean cost per {'document' if ranked else 'row'} (mean ± 95% "
          "interval)\n")
    print("| trade-off | in memory | from Dask | cost in memory | cost from Dask |")
    print("|---|---|---|---|---|")
    for i, tradeoff in enumerate(RANKING_TRADEOFFS if ranked else TRADEOFFS):
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
