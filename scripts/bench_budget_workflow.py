"""The budget workflow (issue 46): fit_within_budget with its defaults (one focused sweep for every budget,
screened on a subsample above 20,000 training rows) against the exhaustive sweep of each budget alone, its time
in plain LightGBM fits and its choices.

    .venv/bin/python -m scripts.bench_budget_workflow [--data cube higgs letter mnist diamonds covertype covertype7
                                                           large] [--no-exhaustive] [--diamonds PATH] [--covertype PATH]
                                                           [--n-jobs N]

For each data set, the unit of time is one plain LightGBM fit of the sweep's ``lightgbm`` point (its defaults,
early stopped on the validation rows, in this process; the median of three). Then
``fit_within_budget(train, valid, costs, budgets)`` with its defaults (one sweep, the knobs refined around every
budget, ``focus=True``, screened on 2,500 training rows above 20,000), and for each budget alone
``fit_within_budget(..., budget, focus=False, screen=False, method_fits=None)`` (the exhaustive sweep with
refinement: every method's grid on every training row, every method refined every round, no time limit). The
methods the defaults' time limit stopped (``method_fits``) are listed. Per budget: the method each chooses,
the validation quality of its choice and the difference (the bar: the default's choice within 0.002 of the
exhaustive one's, or better), then the times.

Data: AFABench's CUBE (seed 42: 600 / 200 / 200 rows, 20 unit-cost features, 8 classes) at AFABench's mean
budgets; the bundled HIGGS events (the 7,000 training events split 5,000 / 2,000, seed 0; its costs) at a
tenth, a fifth and two fifths of plain LightGBM's validation cost; ``letter`` (26 classes, 16 unit-cost features)
and ``mnist`` (digits 3 against 8 at four resolutions, 1,120 unit-cost pixels, from ../shared/data) as split 0 of
``scripts/frontiers.py``'s protocol (10,000 / 3,000 and 1,500 / 500 rows) at a tenth and a quarter of plain
LightGBM's validation cost (not run by default: letter's exhaustive sweeps take hours, Greedy Miser's 26 classes
about 2 minutes a point); ``diamonds`` (``--diamonds PATH``: ggplot2's, regression of log(price), RMSE, as
``scripts/frontiers.py`` reads it, split 0: 30,000 / 10,000 rows, the appraisal's costs) at a tenth, a quarter and a
half of plain LightGBM's validation cost; ``covertype`` and ``covertype7`` (``--covertype PATH``: UCI Forest Covertype's
``covtype.data[.gz]``, not on this machine) as ``scripts/bench_quality.py`` builds them for issue 60 (classes 1 and 2,
or all seven, of a seeded sample of 80,000 rows split 60 / 20 / 20; the lookup and survey groups of its cost model),
at its budgets 10, 20 and 30; ``large`` (not run by default: its exhaustive
sweep takes most of an hour on 2 cores), 50,000 / 10,000 rows (of 70,000) x 54 features of scikit-learn's
``make_classification`` (20 informative, 10 redundant, 5% of labels flipped, seed 0) at random costs in {1, 2, 5,
10, 20}, at a budget of 60 (plain LightGBM's validation cost is about 400).
"""

from __future__ import annotations

import argparse
import time
import warnings

import lightgbm as lgb
import numpy as np

from lightgbm_cegb import prediction_cost
from lightgbm_cegb.datasets import HIGGS_COSTS, cube, higgs
from lightgbm_cegb.selection import fit_within_budget

CUBE_BUDGETS = [2.0, 4.0, 6.0, 8.0, 12.0, 20.0]  # AFABench's (scripts/frontiers.py's)
#: the unit is the median of this many plain fits (one fit's time varies by a fifth from run to run here)
UNIT_FITS = 3


def plain_fit(train, valid, task: str) -> tuple[float, lgb.Booster]:
    """(seconds, booster) of plain LightGBM as the sweep's ``lightgbm`` point trains it for ``task`` ("binary",
    "multiclass", its classes those of train's labels, which it trains on as their indices, as the sweep does: e.g.
    covertype's 1 to 7; or "regression")."""
    num_class = 1
    if task == "multiclass":
        classes = np.unique(train[1])
        num_class = len(classes)
        train, valid = ((X, np.searchsorted(classes, y)) for X, y in (train, valid))
    params = {"objective": task, "verbose": -1, "seed": 0, "deterministic": True,
              **({"num_class": num_class} if num_class > 2 else {})}
    start = time.perf_counter()
    booster = lgb.train(params, lgb.Dataset(*train), 5000, valid_sets=[lgb.Dataset(*valid)],
                        callbacks=[lgb.early_stopping(20, verbose=False)])
    return time.perf_counter() - start, booster


def by_method(frame, unit: float) -> str:
    """A sweep's time by method (``frame.attrs["seconds"]``) in plain fits of ``unit`` seconds, the slowest first."""
    return ", ".join(f"{method} {seconds / unit:.1f}" for method, seconds in
                     sorted(frame.attrs["seconds"].items(), key=lambda item: -item[1]))


def fractions_of_plain(train, valid, costs, task: str, fractions: tuple[float, ...]) -> list[float]:
    """Budgets at ``fractions`` of plain LightGBM's mean cost per validation row."""
    _, booster = plain_fit(train, valid, task)
    full = float(prediction_cost(booster, valid[0], costs).per_instance.mean())
    return [round(f * full, 2) for f in fractions]


def data_sets(names: list[str], diamonds: str | None = None, cluster: int = 2_000_000, covertype: str | None = None):
    """(name, train, valid, costs, task, budgets) of each data set asked for (``diamonds``: its CSV's path;
    ``cluster``: the cluster row's training rows; ``covertype``: the UCI file's path)."""
    for name in names:
        if name == "cube":
            d = cube(42)
            yield name, d["train"], d["valid"], d["costs"], "multiclass", CUBE_BUDGETS
        elif name == "higgs":
            X, y = higgs("train")
            order = np.random.default_rng(0).permutation(len(y))
            train, valid = (X[order[:5000]], y[order[:5000]]), (X[order[5000:]], y[order[5000:]])
            yield name, train, valid, HIGGS_COSTS, "binary", fractions_of_plain(train, valid, HIGGS_COSTS, "binary",
                                                                                (0.1, 0.2, 0.4))
        elif name in ("letter", "mnist"):
            from scripts.frontiers import load
            from scripts.protocol import random_split
            X, y, sizes, costs, task = load(name)
            parts = random_split(X, y, sizes, 0)  # split 0 of the protocol (scripts/frontiers.py)
            yield name, parts["train"], parts["valid"], costs, task, fractions_of_plain(parts["train"], parts["valid"],
                                                                                        costs, task, (0.1, 0.25))
        elif name == "diamonds":
            from scripts.frontiers import DIAMONDS_COSTS, load_diamonds
            from scripts.protocol import random_split
            if diamonds is None:
                raise SystemExit("--data diamonds takes the CSV's path: --diamonds PATH")
            X, y = load_diamonds(diamonds)
            parts = random_split(X, y, (30_000, 10_000), 0)  # split 0 of scripts/frontiers.py's protocol
            yield name, parts["train"], parts["valid"], DIAMONDS_COSTS, "regression", fractions_of_plain(
                parts["train"], parts["valid"], DIAMONDS_COSTS, "regression", (0.1, 0.25, 0.5))
        elif name in ("covertype", "covertype7"):
            from scripts.bench_quality import data_sets as quality_sets  # it imports this module's unit
            _, train, valid, _, costs, task, _, budgets = next(quality_sets([name], covertype))
            yield name, train, valid, costs, task, budgets
        elif name == "large":
            from sklearn.datasets import make_classification
            X, y = make_classification(70_000, 54, n_informative=20, n_redundant=10, flip_y=0.05, random_state=0)
            costs = np.random.default_rng(0).choice([1.0, 2.0, 5.0, 10.0, 20.0], 54)
            train, valid = (X[:50_000], y[:50_000]), (X[50_000:60_000], y[50_000:60_000])  # the rest: unused
            yield name, train, valid, costs, "binary", [60.0]
        elif name == "cluster":
            train, valid, costs = cluster_rows(cluster)
            _, booster = cluster_plain_fit(train, valid)
            full = float(prediction_cost(booster, valid[0], costs).per_instance.mean())
            yield name, train, valid, costs, "binary", [round(0.1 * full, 2), round(0.25 * full, 2)]
        else:
            raise SystemExit(f"--data: unknown data set {name!r} (cube, higgs, letter, mnist, diamonds, covertype, "
                             "covertype7, large, cluster)")


#: the cluster row's costs: three tiers over its 20 columns (the rule's columns 0, 1, 3 cheap, 9, 12 middling, 15, 18
#: costly)
CLUSTER_COSTS = [1.0] * 8 + [5.0] * 6 + [25.0] * 6
#: the cluster row's rows per partition, and its validation rows (in memory)
CLUSTER_PARTITION, CLUSTER_VALID = 100_000, 20_000


def cluster_block(index: int, rows: int) -> np.ndarray:
    """Partition ``index`` of the cluster row's data, generated where it is computed: ``rows`` rows of 20 standard
    normal columns and, last, the label of a fixed rule of seven of them (an interaction, a threshold), 10% of the
    labels flipped."""
    rng = np.random.default_rng([7, index])
    X = rng.normal(size=(rows, 20))
    signal = X[:, 0] + 0.7 * X[:, 3] + 1.2 * X[:, 9] * (X[:, 1] > 0) + 0.8 * X[:, 15] + 0.5 * (X[:, 12] > 1) \
        - 0.6 * X[:, 18]
    y = (signal + 0.4 * rng.normal(size=rows) > 0).astype(np.float64)
    flipped = rng.random(rows) < 0.1
    y[flipped] = 1.0 - y[flipped]
    return np.column_stack([X, y])


def cluster_rows(rows: int):
    """The cluster row's training rows as Dask arrays of CLUSTER_PARTITION-row partitions (generated on the workers),
    its validation rows in memory (a partition after them), and its costs."""
    import dask
    import dask.array as da

    sizes = [CLUSTER_PARTITION] * (rows // CLUSTER_PARTITION) + ([rows % CLUSTER_PARTITION] if rows %
                                                                  CLUSTER_PARTITION else [])
    blocks = [da.from_delayed(dask.delayed(cluster_block)(i, size), (size, 21), dtype=np.float64)
              for i, size in enumerate(sizes)]
    whole = da.concatenate(blocks).persist()  # generated once, kept on the workers
    valid = cluster_block(len(sizes), CLUSTER_VALID)  # a partition of its own
    return (whole[:, :20], whole[:, 20]), (valid[:, :20], valid[:, 20]), CLUSTER_COSTS


def cluster_plain_fit(train, valid) -> tuple[float, lgb.Booster]:
    """(seconds, booster) of plain LightGBM on the cluster's workers (``lightgbm.dask``), early stopped on the
    validation rows as ``plain_fit`` (every worker applying the rule to them: ``methods.dask_stages``)."""
    from lightgbm.dask import DaskLGBMClassifier

    from lightgbm_cegb.methods.dask_stages import HeldOutStopping
    start = time.perf_counter()
    model = DaskLGBMClassifier(n_estimators=5000, random_state=0, deterministic=True, verbose=-1)
    model.fit(*train, callbacks=[HeldOutStopping(valid[0], valid[1].astype(np.int64), None, None, 20)])
    return time.perf_counter() - start, model.booster_


def sample_point(chosen, budget: float) -> str:
    """Of a choice fitted again on a cluster's every row: the sweep's best point of its method within ``budget`` on
    the sample (the refit's starting point); empty otherwise."""
    frame = chosen.frontier
    if budget not in frame.attrs.get("sampled", {}).get("refitted", []):
        return ""
    own = frame[(frame["method"] == chosen.method) & (frame["cost"] <= budget)]
    best = own["quality"].max() if frame.attrs["greater_is_better"] else own["quality"].min()
    return f" (the sample's: {best:.4f})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", nargs="+", default=["cube", "higgs"])
    parser.add_argument("--diamonds", metavar="PATH", help="ggplot2's diamonds.csv (with --data diamonds)")
    parser.add_argument("--covertype", metavar="PATH",
                        help="UCI Forest Covertype's covtype.data[.gz] (with --data covertype or covertype7)")
    parser.add_argument("--cluster-rows", type=int, default=2_000_000,
                        help="the training rows of --data cluster (default 2,000,000)")
    parser.add_argument("--no-exhaustive", action="store_true",
                        help="the defaults' time and choices only (the exhaustive sweeps are most of the run)")
    parser.add_argument("--methods", help="comma-separated methods instead of fit_within_budget's defaults (e.g. "
                                          "cheap_subset,lightgbm: a cluster's refit of a LightGBM choice)")
    parser.add_argument("--n-jobs", type=int, default=1,
                        help="fit_within_budget's n_jobs (the defaults' call only; default 1)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # rounds caps and budget gaps: the figures are the point here
    client = None
    if "cluster" in args.data:
        from distributed import Client, LocalCluster
        client = Client(LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None, silence_logs=50))
    for name, train, valid, costs, task, budgets in data_sets(args.data, args.diamonds, args.cluster_rows,
                                                              args.covertype):
        units = [(cluster_plain_fit(train, valid) if name == "cluster" else plain_fit(train, valid, task))[0]
                 for _ in range(UNIT_FITS)]
        unit = float(np.median(units))
        start = time.perf_counter()
        focused = fit_within_budget(train, valid, costs, budgets, task=task, progress=False, n_jobs=args.n_jobs,
                                    methods=None if args.methods is None else args.methods.split(","))
        focused_time = time.perf_counter() - start
        screen = focused[0].frontier.attrs.get("screen")
        screened = f"; screened on {screen['rows']} rows, finalists {screen['finalists']}" if screen else ""
        shown = ", ".join(f"{u:.2f}" for u in units)
        print(f"\n{name}: one plain fit {unit:.2f} s (the median of {shown}); budgets {budgets}{screened}; "
              f"fit_within_budget's defaults: "
              f"{focused_time:.1f} s = {focused_time / unit:.1f} plain fits; by method: "
              f"{by_method(focused[0].frontier, unit)}")
        for stage, methods in focused[0].frontier.attrs["stopped"].items():  # method_fits' limit
            print(f"  stopped ({stage}): " + ", ".join(f"{method} after {left['plain_fits']:g} plain fits of the "
                                                        f"stage's rows, {left['not_fitted']} point(s) not fitted"
                                                        + (f", trainings cut after {left['cut']} rounds"
                                                           if left["cut"] else "")
                                                        for method, left in methods.items()))
        if "sampled" in focused[0].frontier.attrs:
            sampled = focused[0].frontier.attrs["sampled"]
            print(f"  the sweep on {sampled['rows']:,} of the {sampled['of']:,} training rows; the choice fitted again "
                  f"on every row at budget(s) {sampled.get('refitted', [])}")
        if args.no_exhaustive or name == "cluster":
            for budget, chosen in zip(budgets, focused):
                print(f"{budget:>8g} {chosen.method:<22} {chosen.valid_quality:>8.4f} {chosen.params}"
                      f"{sample_point(chosen, budget)}")
            continue
        print(f"{'budget':>8} {'defaults':<22} {'quality':>8} {'exhaustive':<22} {'quality':>8} {'difference':>10} "
              f"{'exhaustive s':>12}")
        exhaustive_time, worst = 0.0, -np.inf
        for budget, chosen in zip(budgets, focused):
            start = time.perf_counter()
            alone = fit_within_budget(train, valid, costs, budget, task=task, focus=False, screen=False,
                                      method_fits=None, progress=False)
            seconds = time.perf_counter() - start
            exhaustive_time += seconds
            sign = 1.0 if alone.frontier.attrs["greater_is_better"] else -1.0
            difference = sign * (alone.valid_quality - chosen.valid_quality)  # > 0: the exhaustive choice is better
            worst = max(worst, difference)
            print(f"{budget:>8g} {chosen.method:<22} {chosen.valid_quality:>8.4f} {alone.method:<22} "
                  f"{alone.valid_quality:>8.4f} {difference:>10.4f} {seconds:>12.1f}")
        print(f"the defaults' one sweep for the {len(budgets)} budget(s): {focused_time:.1f} s = "
              f"{focused_time / unit:.1f} plain fits; the exhaustive sweeps, one per budget: {exhaustive_time:.1f} s = "
              f"{exhaustive_time / unit:.0f} plain fits; largest shortfall of the defaults' choice: {worst:.4f} "
              f"({'within' if worst <= 0.002 else 'OVER'} the 0.002 bar)")
    if client is not None:
        client.close()
        client.cluster.close()


if __name__ == "__main__":
    main()
