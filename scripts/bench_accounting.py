#!/usr/bin/env python3
"""Speed of lightgbm_cegb.prediction_cost relative to Booster.predict on the same rows, same run.

100k rows x 100 features, a 500-tree, 63-leaf model. Prints the median of ``--repeats`` timings of each and
their ratios (prediction_cost / predict; issue 47's bar for the batch: <= 0.5), then the same on each
--small-rows number of rows (the parsed model is cached with the Booster; the bar for one row: <= 1.2), and the
first call on a fresh Booster (parsing included). Timings on shared machines are noisy: read the ratios, not
the seconds.

    .venv/bin/python -m scripts.bench_accounting [--rows 100000] [--features 100] [--trees 500] [--small-rows 1 10]
"""

from __future__ import annotations

import argparse
import statistics
import time

import lightgbm as lgb
import numpy as np

from lightgbm_cegb import FeatureCosts, prediction_cost


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--trees", type=int, default=500)
    parser.add_argument("--leaves", type=int, default=63)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--small-rows", type=int, nargs="+", default=[1, 10])
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.rows, args.features))
    X[rng.random(X.shape) < 0.02] = np.nan
    y = X[:, :10].sum(axis=1) + np.nan_to_num(X[:, 10] * X[:, 11]) + rng.normal(0, 1, args.rows)
    params = {"objective": "regression", "num_leaves": args.leaves, "min_data_in_leaf": 20, "verbose": -1,
              "learning_rate": 0.05, "feature_fraction": 0.5}
    start = time.perf_counter()
    booster = lgb.train(params, lgb.Dataset(X, y), args.trees)
    print(f"trained {booster.num_trees()} trees x {args.leaves} leaves on {args.rows} x {args.features} "
          f"in {time.perf_counter() - start:.1f} s")
    costs = FeatureCosts(lazy=rng.uniform(1, 100, args.features), split=0.25)

    predict = median_time(lambda: booster.predict(X), args.repeats)
    cost = median_time(lambda: prediction_cost(booster, X, costs), args.repeats)
    curve = median_time(lambda: prediction_cost(booster, X, costs, per_iteration=True), args.repeats)
    print(f"Booster.predict:                        {predict:8.3f} s")
    print(f"prediction_cost:                        {cost:8.3f} s   ratio {cost / predict:.2f}")
    print(f"prediction_cost(per_iteration=True):    {curve:8.3f} s   ratio {curve / predict:.2f}")

    for rows in args.small_rows:
        few = X[:rows]
        predict_few = median_time(lambda: booster.predict(few), args.repeats * 200)  # noqa: B023 (called here)
        cost_few = median_time(lambda: prediction_cost(booster, few, costs), args.repeats * 200)  # noqa: B023
        print(f"on {rows} rows: Booster.predict {predict_few * 1e3:8.3f} ms")
        print(f"on {rows} rows: prediction_cost {cost_few * 1e3:8.3f} ms   ratio {cost_few / predict_few:.2f}")
    text = booster.model_to_string()
    first = median_time(lambda: prediction_cost(lgb.Booster(model_str=text), X[:10], costs), args.repeats)
    load = median_time(lambda: lgb.Booster(model_str=text), args.repeats)
    print(f"first call on a fresh Booster (model parsed): {(first - load) * 1e3:8.2f} ms beyond loading the Booster")


if __name__ == "__main__":
    main()
