#!/usr/bin/env python3
"""Quality-cost frontiers of every method the package has, on classification and regression data, for
docs/RESULTS.md.

    .venv/bin/python -m scripts.frontiers --data higgs|letter|mnist|cube [--splits 5] [--adapt-authors] [--quick]
    .venv/bin/python -m scripts.frontiers --data diamonds --diamonds PATH [--splits 5] [--workflow]
                                          [--only LABEL ...] [--resume] [--split K] [--out docs/results]

Every registered method of lightgbm_cegb.selection that supports the task (plain LightGBM, CEGB, BudgetPrune,
Early Exit, BudgetRF, Greedy Miser, ADAPT-GBRT, ADAPT-LIN, CSTC, CSCC, Cronus; a method registered later joins
by itself) is swept on its default grid on the training rows and measured on the validation rows; its validation
Pareto points are then measured on the test rows.
BudgetPrune runs twice: on the plain boosted model and on a LightGBM random forest (its paper's setting). CSTC runs
four times: on the plain model's trees (the package's default phi) and on its paper's boosting trick (``TRICK``:
squared-loss trees of depth 4, the CSTC depth chosen on validation among ``TRICK_DEPTHS``), each with its ``polish``
step (the package's default, a local search of ours) and without it (the paper's method). "CEGB trained to the
budget" is selection.train_to_budget at each of the table's budgets (one point each); with ``--workflow``, "The
budget workflow (fit_within_budget)" is what ``fit_within_budget`` with its defaults answers within each budget (one
call for all of them, the protocol's metric and round cap, no time limit per method, so that its points do not
depend on the machine's load), beside the methods it chooses among.
``--method-rounds greedy_miser=2000`` gives one method its own round cap; ``--adapt-authors`` adds ADAPT-GBRT on its
authors' schedule (``ADAPT_AUTHORS``). ``--only LABEL`` re-runs one run (and plain LightGBM, whose points must not
move) into the report already in ``--out``: e.g. ``--adapt-authors --only "ADAPT-GBRT, authors' schedule"`` adds that
row to a table made without it. ``--resume`` reuses the splits (and the runs within a split) an interrupted run of the
same command finished; ``--split K`` runs split K only and saves it without a report (splits spread over processes,
each pinned to its own cores with ``taskset``), and the same command with ``--resume`` then writes the report from
every saved split.
Quality: accuracy; cost: the exact mean feature cost per row (Early Exit: only the trees each row went through).
The whole protocol is repeated on ``--splits`` random splits of the data's rows (seeds 0, 1, ...); the budgets are
fractions of plain LightGBM's validation cost in each split.
- higgs: the bundled HIGGS subset (its 7,500 rows split 4,500 / 1,500 / 1,500), the demo's costs (21 low-level
  features 1, 7 high-level 10).
- letter: UCI Letter Recognition, bundled (10,000 / 3,000 / 7,000 rows, 26 classes, unit costs).
- mnist: the cost-sensitive MNIST of CSTC's section 6.7 from ../shared/data: digits 3 against 8, each image at
  4x4, 8x8, 16x16 and 28x28 (area-averaged), 1,120 unit-cost features; 1,500 / 500 / the rest.
- diamonds: ggplot2's diamonds (53,940 round diamonds: price against the 4 Cs and the measurements) from a CSV
  given by ``--diamonds PATH`` (plotnine ships it: ``pip download plotnine --no-deps`` and unzip
  ``plotnine/data/diamonds.csv``); regression of log(price), RMSE, 30,000 / 10,000 / the rest. Its cost model is
  an appraisal's (``DIAMONDS_COSTS``): weighing the stone (carat) 1, the caliper measurements (x, y, z, depth,
  table) one group of 2, then the gemologist's grades, cut 5, color 10 and clarity 20 (clarity under a loupe takes
  longest).
- cube: AFABench's CUBE (``datasets.cube``: 20 unit-cost features, 8 classes), split K being AFABench's instance
  K (seed 42 + K: its own 1,000 rows, 600 / 200 / 200), at AFABench's mean budgets (``CUBE_BUDGETS``) rather than
  fractions of plain LightGBM's cost; at most 5 splits.
Writes DIR/frontier_<data>.csv (every point of every split, with its split), .png (split 0's test figures, with
matplotlib) and .md: per method and budget (3 fractions of plain LightGBM's validation cost, and any cost) the
mean test accuracy over the splits of the model chosen on validation within the budget, its 95% interval and
its mean test cost; the best mean is bold only where its interval separates from the runner-up's. For the
ranking data (Yahoo! LTR, MSLR) see scripts/reproduce_yahoo.py.
"""

from __future__ import annotations

import gzip

import numpy as np

from lightgbm_cegb import FeatureCosts
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.datasets import CUBE_SEEDS, HIGGS_COSTS, cube, higgs, letter
from lightgbm_cegb.selection import METHODS
from lightgbm_cegb.selection.cstc_family import CSTC_RELATIVE_TRADEOFFS
from lightgbm_cegb.selection.greedy_family import ADAPT_GBRT_GRID
from scripts.protocol import DATA, LABELS, QUICK, protocol_parser, random_split, repeated_frontiers, rf_run

RESOLUTIONS = (4, 8, 16, 28)
#: CSTC's phi by its paper's boosting trick (section 5: squared-loss trees of depth 4; the paper's 3,000 trees
#: would make every leaf solve a 3,000-column system, so fewer), and the CSTC depths the grid chooses among.
TRICK = {"phi_trees": 300, "phi_depth": 4}
TRICK_DEPTHS = (2, 3, 4)
TRICK_QUICK = {"phi_trees": 20, "phi_depth": 2}
#: ADAPT-GBRT as its authors' code runs it (100 trees of each of the gate and f1 a round, up to 50 rounds; ours
#: runs all 50), on the default grid's points: 50 times the default's trees (--adapt-authors).
ADAPT_AUTHORS = {"n_rounds": 50, "trees_per_round": 100}
#: the mean acquisition costs per row at which AFABench reports CUBE (its soft-budget figure)
CUBE_BUDGETS = [2.0, 4.0, 6.0, 8.0, 12.0, 20.0]


def area_weights(size: int, source: int = 28) -> np.ndarray:
    """(size, source) matrix averaging a row of ``source`` pixels into ``size`` cells by overlap."""
    edges = np.linspace(0, source, size + 1)
    weights = np.clip(np.minimum(edges[1:, None], np.arange(1, source + 1)) - np.maximum(edges[:-1, None],
                                                                                     np.arange(source)), 0, None)
    return weights / weights.sum(axis=1, keepdims=True)


def multi_resolution(images: np.ndarray, sizes: tuple[int, ...] = RESOLUTIONS) -> np.ndarray:
    """(n, 28, 28) images as their ``sizes`` x ``sizes`` versions side by side (by default 4x4, 8x8, 16x16 and
    28x28: (n, 1120))."""
    parts = [np.einsum("ia,nab,jb->nij", area_weights(s), images, area_weights(s)).reshape(len(images), -1)
             for s in sizes]
    return np.hstack(parts)


def read_idx(path) -> np.ndarray:
    """A gzipped IDX file of unsigned bytes (MNIST's format: images (n, rows, columns) or labels (n,))."""
    with gzip.open(path) as fh:
        raw = fh.read()
    if len(raw) < 4 or raw[:2] != b"\0\0" or raw[2] != 8:
        raise CEGBError(f"{path}: not an IDX file of unsigned bytes (its first bytes are {raw[:4]!r})")
    shape = [int.from_bytes(raw[4 + 4 * d:8 + 4 * d], "big") for d in range(raw[3])]
    offset = 4 + 4 * raw[3]
    if len(raw) != offset + int(np.prod(shape)):
        raise CEGBError(f"{path}: its header promises {shape} bytes after {offset}, it holds {len(raw) - offset}")
    return np.frombuffer(raw, np.uint8, offset=offset).reshape(shape)


def load_mnist() -> tuple[np.ndarray, np.ndarray]:
    folder = DATA / "mnist"
    images = read_idx(folder / "t10k-images-idx3-ubyte.gz")
    labels = read_idx(folder / "t10k-labels-idx1-ubyte.gz")
    extra = np.loadtxt(folder / "mnist_5k.csv.gz", delimiter=",", dtype=np.float64)
    images = np.concatenate([images.astype(np.float64), extra[:, :-1].reshape(-1, 28, 28)]) / 255.0
    labels = np.concatenate([labels, extra[:, -1].astype(np.uint8)])
    keep = np.isin(labels, (3, 8))
    return multi_resolution(images[keep]), (labels[keep] == 8).astype(int)


#: the diamonds' columns as X holds them, the grades' orders (worst first), and the appraisal's costs
DIAMOND_COLUMNS = ("carat", "x", "y", "z", "depth", "table", "cut", "color", "clarity")
DIAMOND_GRADES = {"cut": ("Fair", "Good", "Very Good", "Premium", "Ideal"),
                  "color": ("J", "I", "H", "G", "F", "E", "D"),
                  "clarity": ("I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF")}
DIAMONDS_COSTS = FeatureCosts(lazy=[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0, 10.0, 20.0],
                              groups={"caliper": [1, 2, 3, 4, 5]}, group_lazy=[2.0])


def load_diamonds(path) -> tuple[np.ndarray, np.ndarray]:
    """ggplot2's diamonds from its CSV: X (``DIAMOND_COLUMNS``, the grades as their ranks) and log(price)."""
    import pandas as pd
    frame = pd.read_csv(path)
    lacking = [c for c in (*DIAMOND_COLUMNS, "price") if c not in frame.columns]
    if lacking:
        raise CEGBError(f"--diamonds: {path} should be ggplot2's diamonds.csv; it lacks the columns {lacking}")
    for column, grades in DIAMOND_GRADES.items():
        ranks = frame[column].map({grade: rank for rank, grade in enumerate(grades)})
        if ranks.isna().any():
            raise CEGBError(f"--diamonds: {column} should be one of {list(grades)}, got "
                            f"{frame[column][ranks.isna()].iloc[0]!r}")
        frame[column] = ranks
    return frame[list(DIAMOND_COLUMNS)].to_numpy(dtype=np.float64), np.log(frame["price"].to_numpy(np.float64))


def load(name: str) -> tuple[np.ndarray, np.ndarray, tuple[int, int], FeatureCosts, str]:
    """(X, y, the training and validation sizes (the rest tests), the costs, the task)."""
    if name == "higgs":
        X, y = higgs("train")
        X_test, y_test = higgs("test")
        return np.vstack([X, X_test]), np.concatenate([y, y_test]), (4500, 1500), HIGGS_COSTS, "binary"
    if name == "letter":
        X, letters = letter()
        classes = {c: i for i, c in enumerate(sorted(set(letters)))}
        return X, np.array([classes[c] for c in letters]), (10_000, 3_000), FeatureCosts(lazy=np.ones(16)), \
            "multiclass"
    X, y = load_mnist()
    return X, y, (1500, 500), FeatureCosts(lazy=np.ones(X.shape[1])), "binary"


def frontier_runs(task: str, quick: bool, train_rows: int, adapt_authors: bool = False) -> list[tuple]:
    """The runs of ``repeated_frontiers`` for ``task``: every registered method that does it, BudgetPrune also on a
    random forest of fully grown trees (``rf_params``), CSTC (where it applies: not multiclass) also without
    polish and on the boosting trick, with and without polish; with ``adapt_authors``, ADAPT-GBRT also on its
    authors' schedule (``ADAPT_AUTHORS``)."""
    runs = [(LABELS.get(name, name), name, {}) for name, method in METHODS.items() if task in method.tasks]
    names = [r[1] for r in runs]

    def after(method: str, *added: tuple) -> None:
        """``added`` right after the run of ``method``."""
        at = [r[1] for r in runs].index(method) + 1
        runs[at:at] = added

    after("budget_prune", rf_run(train_rows, quick))
    if adapt_authors:
        after("adapt_gbrt", ("ADAPT-GBRT, authors' schedule", "adapt_gbrt", {}, None,
                             [{**point, **ADAPT_AUTHORS} for point in ADAPT_GBRT_GRID]))
    if "cstc" in names:
        tradeoffs = [p["relative_tradeoff"] for p in QUICK["cstc"]] if quick else CSTC_RELATIVE_TRADEOFFS
        trick, depths = (TRICK_QUICK, (2,)) if quick else (TRICK, TRICK_DEPTHS)
        grid = [{"relative_tradeoff": r, **trick, "depth": depth} for r in tradeoffs for depth in depths]
        after("cstc", ("CSTC without polish", "cstc", {}, None, [{"relative_tradeoff": r, "polish": False}
                                                                 for r in tradeoffs]),
              ("CSTC, boosting trick", "cstc", {}, None, grid),
              ("CSTC, boosting trick, without polish", "cstc", {}, None,
               [{**point, "polish": False} for point in grid]))
    return runs


def main() -> None:
    parser = protocol_parser(__doc__, choices=("higgs", "letter", "mnist", "cube", "diamonds"))
    parser.add_argument("--diamonds", metavar="PATH", help="ggplot2's diamonds.csv (with --data diamonds)")
    parser.add_argument("--adapt-authors", action="store_true",
                        help="ADAPT-GBRT also on its authors' schedule (50 rounds of 100 trees: a few minutes a "
                             "split on HIGGS, far more on letter and MNIST)")
    args = parser.parse_args()
    command = f"python -m scripts.frontiers --data {args.data}" + " --adapt-authors" * args.adapt_authors
    if args.data == "cube":
        if args.splits > len(CUBE_SEEDS):
            raise CEGBError(f"--splits: CUBE has AFABench's {len(CUBE_SEEDS)} instances, got {args.splits}")
        runs = frontier_runs("multiclass", args.quick, 600, args.adapt_authors)
        repeated_frontiers(lambda k: {part: cube(CUBE_SEEDS[k])[part] for part in ("train", "valid", "test")},
                           cube(CUBE_SEEDS[0])["costs"], "multiclass", runs, args, name="frontier_cube",
                           title="cube", command=command, quick_grids=QUICK, budgets=CUBE_BUDGETS)
        return
    if args.data == "diamonds":
        if args.diamonds is None:
            parser.error("--data diamonds takes the CSV's path: --diamonds PATH")
        (X, y), sizes, costs, task = load_diamonds(args.diamonds), (30_000, 10_000), DIAMONDS_COSTS, "regression"
        command += " --diamonds diamonds.csv"
    else:
        X, y, sizes, costs, task = load(args.data)
    runs = frontier_runs(task, args.quick, sizes[0], args.adapt_authors)
    repeated_frontiers(lambda seed: random_split(X, y, sizes, seed), costs, task, runs, args,
                       name=f"frontier_{args.data}", title=args.data, command=command, quick_grids=QUICK,
                       metric="rmse" if task == "regression" else "accuracy")


if __name__ == "__main__":
    main()
