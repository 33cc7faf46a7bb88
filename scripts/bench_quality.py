"""Never lose to a person picking features by hand (issue 60): ``fit_within_budget`` with its defaults against an
independent reference search of feature subsets, at three budgets per data set.

    .venv/bin/python -m scripts.bench_quality [--data letter covertype covertype7] [--covertype PATH] [--out DIR]

Writes DIR/quality_<data>.md (default docs/results): the command, the times and the table RESULTS.md copies. The
times are also given in plain fits (``scripts.bench_budget_workflow``'s unit: one plain LightGBM fit with its
defaults, early stopped on the validation rows, timed here), the workflow's by method (``frame.attrs["seconds"]``).

Per budget, three answers, each with its validation and test quality and its mean cost per test row:

- ``fit_within_budget(train, valid, costs, budgets, task=...)`` with its defaults (every default method, the
  cheap-subset baseline, the screen above 20,000 training rows), and the method it chose;
- ``best_subset`` (the package's subset search alone);
- the reference search, independent of the package's: every union of units (a group, or an ungrouped feature)
  whose nominal cost is within the budget, each measured by plain LightGBM (31 leaves, learning rate 0.1, early
  stopped on the validation rows' log loss) on a subsample of REFERENCE_ROWS training and validation rows; the
  REFERENCE_REFITS best refitted on every training row the same way (its columns alone, the others dropped), and the
  best of those on the validation rows is the reference's answer. Its cost is the subset's exact mean cost per row
  (every row reads every unit of the subset).

The bar (issue 60): fit_within_budget's validation quality at or above the reference's at every budget, its test
quality within 0.003 of it or above.

Data:

- ``letter`` (bundled UCI Letter Recognition, 20,000 rows): the letters H, K and X positive (12%), the metric F1
  (each point's decision threshold chosen on the validation rows); the first eight columns (the box's position and
  size, its pixel count, the mean x and y, x's variance) cost 1 each, the last eight (the other moments and the
  edge counts) 4 each; budgets 3, 6 and 10 (every feature: 40). Rows split 60 / 20 / 20 (seeded, classes in
  proportion).
- ``covertype`` and ``covertype7`` (UCI Forest Covertype, the user's ``covtype.data[.gz]`` by ``--covertype``; not
  on this machine): a seeded sample of 80,000 rows (``covertype``: classes 1 and 2 only, binary; ``covertype7``: the
  seven classes) split 60 / 20 / 20, accuracy. The cost model (COVERTYPE_COSTS): elevation, aspect and slope from a
  digital elevation model, 1 each; the four distances (hydrology horizontal and vertical, roadways, fire points),
  3 each, a GIS query apiece; the three hillshade indices 1 each; the four wilderness-area columns one group, a
  lookup of 4; the forty soil-type columns one group, a field survey of 30. Every feature: 52. Budgets 10, 20 and 30.
- ``fashion_shirt`` and ``fashion_tops`` (Fashion-MNIST's 70,000 images from the folder ``--fashion-mnist``; Debian's
  package ``dataset-fashion-mnist`` installs them in the default folder): each image at 4x4, 8x8 and 16x16
  (area-averaged, 336 columns), split 60 / 20 / 20. ``fashion_shirt``: shirts against the nine other classes (10%
  positive, 42,000 training rows), F1; ``fashion_tops``: the four tops (T-shirt, pullover, coat, shirt; 16,800 training
  rows), accuracy. The cost model (FASHION_COSTS) is a camera that charges 1 per 16 pixels it reads out, at any
  resolution: the 4x4 thumbnail one group of 1, each quadrant of the 8x8 image a group of 1, each quadrant of the
  16x16 image a group of 4. Every feature: 21. Budgets 3, 6 and 10.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import lightgbm as lgb
import numpy as np

from lightgbm_cegb import FeatureCosts
from lightgbm_cegb.datasets import covertype, letter
from lightgbm_cegb.io.atomic import write_atomically
from lightgbm_cegb.selection import best_subset, fit_within_budget, get_metric
from lightgbm_cegb.selection.metrics import best_threshold, thresholded, validation_quality
from scripts.bench_budget_workflow import by_method, plain_fit

#: the reference measures each subset on this many training and validation rows (classes in proportion)
REFERENCE_ROWS = 2_500
#: the reference's best subsets on the subsample that are refitted on every training row
REFERENCE_REFITS = 20
#: the reference refuses to enumerate more subsets than this
REFERENCE_LIMIT = 5_000

COVERTYPE_COSTS = FeatureCosts(
    lazy=[1.0, 1.0, 1.0, 3.0, 3.0, 3.0, 1.0, 1.0, 1.0, 3.0] + [0.0] * 44,
    groups={"wilderness": list(range(10, 14)), "soil": list(range(14, 54))}, group_lazy=[4.0, 30.0])
LETTER_COSTS = FeatureCosts(lazy=[1.0] * 8 + [4.0] * 8)
#: Debian's dataset-fashion-mnist installs the four IDX files here
FASHION_FOLDER = "/usr/share/datasets/fashion-mnist"
FASHION_SIZES = (4, 8, 16)


def image_quadrants(size: int, first: int) -> dict[str, list[int]]:
    """The columns of each quadrant of a ``size`` x ``size`` image stored row by row from column ``first``."""
    half = size // 2
    return {f"{size}x{size} {name}": [first + r * size + c for r in range(top, top + half)
                                      for c in range(left, left + half)]
            for name, top, left in (("top left", 0, 0), ("top right", 0, half), ("bottom left", half, 0),
                                    ("bottom right", half, half))}


FASHION_COSTS = FeatureCosts(
    lazy=np.zeros(sum(s * s for s in FASHION_SIZES)),
    groups={"4x4": list(range(16)), **image_quadrants(8, 16), **image_quadrants(16, 80)},
    group_lazy=[1.0] * 5 + [4.0] * 4)


def fashion_mnist(folder: str) -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST's 70,000 images (training and test files) at FASHION_SIZES, and their labels."""
    from scripts.frontiers import multi_resolution, read_idx

    path = Path(folder)
    if not (path / "train-images-idx3-ubyte.gz").exists():
        raise SystemExit(f"--fashion-mnist: {folder} holds no train-images-idx3-ubyte.gz (apt-get install "
                         "dataset-fashion-mnist, or give the folder of the four IDX files)")
    images = np.concatenate([read_idx(path / f"{part}-images-idx3-ubyte.gz") for part in ("train", "t10k")])
    labels = np.concatenate([read_idx(path / f"{part}-labels-idx1-ubyte.gz") for part in ("train", "t10k")])
    return multi_resolution(images / 255.0, FASHION_SIZES), labels.astype(int)


def split(X, y, seed: int = 0):
    """60 / 20 / 20 of the rows, seeded, each class in proportion."""
    rng = np.random.default_rng(seed)
    parts = [[], [], []]
    for label in np.unique(y):
        rows = rng.permutation(np.flatnonzero(y == label))
        cut = np.round(np.array([0.6, 0.8]) * len(rows)).astype(int)
        for part, chunk in zip(parts, np.split(rows, cut)):
            part.append(chunk)
    return [(X[np.sort(np.concatenate(p))], y[np.sort(np.concatenate(p))]) for p in parts]


def data_sets(names: list[str], covertype_path: str | None, fashion_folder: str = FASHION_FOLDER):
    """(name, train, valid, test, costs, task, metric, budgets) of each data set asked for."""
    for name in names:
        if name == "letter":
            X, letters = letter()
            y = np.isin(letters, ["H", "K", "X"]).astype(int)
            yield (name, *split(X, y), LETTER_COSTS, "binary", "f1", [3.0, 6.0, 10.0])
        elif name in ("covertype", "covertype7"):
            if covertype_path is None:
                raise SystemExit(f"--data {name}: give the UCI file with --covertype PATH (covtype.data[.gz])")
            X, y = covertype(covertype_path)
            if name == "covertype":
                keep = np.isin(y, [1, 2])
                X, y = X[keep], (y[keep] == 2).astype(int)
            rows = np.sort(np.random.default_rng(0).choice(len(y), min(80_000, len(y)), replace=False))
            task = "binary" if name == "covertype" else "multiclass"
            yield (name, *split(X[rows], y[rows]), COVERTYPE_COSTS, task, "accuracy", [10.0, 20.0, 30.0])
        elif name in ("fashion_shirt", "fashion_tops"):
            X, y = fashion_mnist(fashion_folder)
            if name == "fashion_shirt":
                y = (y == 6).astype(int)
                task, metric = "binary", "f1"
            else:
                keep = np.isin(y, [0, 2, 4, 6])
                X, y = X[keep], y[keep] // 2
                task, metric = "multiclass", "accuracy"
            yield (name, *split(X, y), FASHION_COSTS, task, metric, [3.0, 6.0, 10.0])
        else:
            raise SystemExit(f"--data: unknown data set {name!r} (letter, covertype, covertype7, fashion_shirt, "
                             "fashion_tops)")


def plain(task: str, num_class: int, train, valid, columns: list[int]) -> lgb.Booster:
    """Plain LightGBM at full capacity on ``columns`` of the rows (the others dropped), early stopped on valid."""
    params = {"objective": "binary" if task == "binary" else "multiclass", "num_leaves": 31, "learning_rate": 0.1,
              "verbose": -1, "seed": 0, "deterministic": True, **({"num_class": num_class} if num_class > 2 else {})}
    data = lgb.Dataset(train[0][:, columns], train[1])
    return lgb.train(params, data, 10_000, valid_sets=[lgb.Dataset(valid[0][:, columns], valid[1], reference=data)],
                     callbacks=[lgb.early_stopping(30, verbose=False)])


def subsets_within(units: list[tuple], budget: float) -> list[tuple[int, ...]]:
    """Every non-empty set of units (indices) whose prices add up to at most ``budget``."""
    found = []

    def grow(start: int, taken: tuple[int, ...], spent: float) -> None:
        for u in range(start, len(units)):
            cost = spent + units[u][2]
            if cost <= budget * (1 + 1e-12):
                found.append(taken + (u,))
                if len(found) > REFERENCE_LIMIT:
                    raise SystemExit(f"the reference would measure more than {REFERENCE_LIMIT} subsets within "
                                     f"{budget:g}: a smaller budget or coarser units")
                grow(u + 1, taken + (u,), cost)

    grow(0, (), 0.0)
    return found


def reference(task, metric, costs: FeatureCosts, train, valid, test, budgets: list[float]) -> dict:
    """The reference search's answer per budget: {budget: (units' names, valid, test, cost per row)}."""
    units = costs.units(train[0].shape[1])
    num_class = int(train[1].max()) + 1
    rng = np.random.default_rng(1)
    sub = [(X[rows], y[rows]) for X, y in (train, valid)
           for rows in [np.sort(rng.choice(len(y), min(REFERENCE_ROWS, len(y)), replace=False))]]

    def score(booster, rows, columns, threshold=None):
        prediction = booster.predict(rows[0][:, columns])
        if threshold is not None:
            return thresholded(metric, rows[1], prediction, None, threshold)
        return validation_quality(metric, rows[1], prediction)

    measured = {}
    for subset in subsets_within(units, max(budgets)):
        columns = sorted(f for u in subset for f in units[u][1])
        measured[subset] = score(plain(task, num_class, *sub, columns), sub[1], columns)
    answers = {}
    for budget in budgets:
        within = [s for s in measured if sum(units[u][2] for u in s) <= budget * (1 + 1e-12)]
        best = sorted(within, key=lambda s: -measured[s])[:REFERENCE_REFITS]
        results = []
        for subset in best:
            columns = sorted(f for u in subset for f in units[u][1])
            booster = plain(task, num_class, train, valid, columns)
            prediction = booster.predict(valid[0][:, columns])
            if metric.threshold:
                threshold, quality = best_threshold(metric, valid[1], prediction)
            else:
                threshold, quality = None, validation_quality(metric, valid[1], prediction)
            names = tuple(units[u][0] or f"Column_{units[u][1][0]}" for u in subset)
            results.append((quality, -sum(units[u][2] for u in subset), names,
                            score(booster, test, columns, threshold)))
        quality, negative_cost, names, test_quality = max(results, key=lambda r: r[:2])
        answers[budget] = (names, quality, test_quality, -negative_cost)
    return answers


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", nargs="+", default=["letter"])
    parser.add_argument("--covertype", help="the UCI covtype.data[.gz] file")
    parser.add_argument("--fashion-mnist", default=FASHION_FOLDER, help="the folder of Fashion-MNIST's IDX files")
    parser.add_argument("--out", type=Path, default=Path("docs/results"), help="the reports' folder")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # rounds caps and budget gaps: the figures are the point here
    args.out.mkdir(parents=True, exist_ok=True)
    asked = data_sets(args.data, args.covertype, args.fashion_mnist)
    for name, train, valid, test, costs, task, metric_name, budgets in asked:
        metric = get_metric(metric_name, task)
        common = {"task": task, "metric": metric_name, "test": test, "progress": False}
        unit, _ = plain_fit(train, valid, task)
        start = time.perf_counter()
        chosen = fit_within_budget(train, valid, costs, budgets, **common)
        workflow = time.perf_counter() - start
        start = time.perf_counter()
        subset = best_subset(train, valid, costs, budgets, **common)
        searched = time.perf_counter() - start
        start = time.perf_counter()
        answers = reference(task, metric, costs, train, valid, test, budgets)
        referenced = time.perf_counter() - start
        lines = [f"# fit_within_budget against a reference subset search: {name}", "",
                 f"`python -m scripts.bench_quality --data {name}`: {len(train[1])} / {len(valid[1])} / "
                 f"{len(test[1])} rows, {metric_name}; fit_within_budget {workflow:.0f} s, best_subset {searched:.0f} "
                 f"s, the reference {referenced:.0f} s (one run, 2 cores).", "",
                 f"In plain fits ({unit:.1f} s each): fit_within_budget {workflow / unit:.0f}; by method, "
                 + by_method(chosen[0].frontier, unit)
                 + (f" (screened on {chosen[0].frontier.attrs['screen']['rows']} training rows)"
                    if "screen" in chosen[0].frontier.attrs else "") + ".", "",
                 f"| budget | fit_within_budget's choice | valid {metric_name} | test {metric_name} | test cost | "
                 "best_subset valid / test | reference valid / test | bar |", "|---|---|---|---|---|---|---|---|"]
        units = []
        for budget, ours, alone in zip(budgets, chosen, subset):
            names, quality, test_quality, cost = answers[budget]
            bar = ours.valid_quality >= quality and ours.test_quality >= test_quality - 0.003
            lines.append(f"| {budget:g} | {ours.method} | {ours.valid_quality:.4f} | {ours.test_quality:.4f} | "
                         f"{ours.test_cost:.2f} | {alone.valid_quality:.4f} / {alone.test_quality:.4f} | "
                         f"{quality:.4f} / {test_quality:.4f} | {'met' if bar else 'missed'} |")
            units.append(f"- within {budget:g}: the reference's units {', '.join(names)} (cost {cost:g}); "
                         f"best_subset's {', '.join(alone.params['features'])}")
        report = "\n".join(lines + [""] + units) + "\n"
        print(report)
        write_atomically(args.out / f"quality_{name}.md", lambda tmp, text=report: Path(tmp).write_text(text))


if __name__ == "__main__":
    main()
