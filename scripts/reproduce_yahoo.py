#!/usr/bin/env python3
"""The CEGB paper's Yahoo! Learning to Rank experiments (Peter et al., NIPS 2017, section 5 and figures 2a/2b).

    .venv/bin/python -m scripts.reproduce_yahoo --data yahoo --train set1.train.txt --valid set1.valid.txt \\
        --test set1.test.txt [--splits 5] [--rounds 500] [--out DIR]
    .venv/bin/python -m scripts.reproduce_yahoo --data mslr        # the bundled MSLR-WEB subset, its costs
    .venv/bin/python -m scripts.reproduce_yahoo --synthetic        # a Yahoo-shaped stand-in (runs in CI)
    .venv/bin/python -m scripts.reproduce_yahoo --synthetic --signal cheap   # the cheap features informative

Yahoo! LTR set 1 is not redistributable: bring your own copy (SVMlight files, 1-based ids, qid). Costs: the real
Yahoo cost vector bundled with the package (``lightgbm_cegb.datasets.yahoo_costs``). Two settings, as the paper:

(i)  feature costs plus a split cost alpha = 1/4 per node a row evaluates (a depth-4 tree costs as much as a
     feature of cost 1), graded labels 0-4: CEGB with Greedy-Miser-like trees (16 leaves, depth 4) and with deep
     trees (best-first, 64 leaves), both squared-loss regressors as in the paper, against plain LightGBM,
     BudgetPrune of the plain regressor and of a random forest of fully grown trees (BudgetPrune's paper), Early
     Exit of a LightGBM lambdarank model and Greedy Miser (depth 4, irrelevant documents weighted 10, the split
     cost in its accounting only).
(ii) feature costs only (alpha = 0), labels binarised (y > 0): CEGB (deep trees, binary objective), plain
     LightGBM, BudgetPrune (of both), Early Exit, BudgetRF and Greedy Miser.
Metric: the papers' Average Precision@5 (lightgbm_cegb.core.ranking_metrics) on the test queries. The one protocol of
scripts/protocol.py (``repeated_frontiers``), as scripts/frontiers.py: on each of ``--splits`` random query-wise
splits (the queries of the given train/valid/test parts pooled and dealt out again in the parts' numbers of
queries, seeds 0, 1, ...), each method is swept (lightgbm_cegb.selection: its grid, every boosted or bagged model
a point at each tree prefix, early stopping on the validation queries) on the training queries and measured on the
validation queries; its validation Pareto points are then measured on the test queries. Writes per setting
DIR/yahoo_<data>_<setting>.csv (<data>: synthetic-cheap with --signal cheap, synthetic-<N>q for --queries N other
than 300; every point of every split), .png (split 0's test figures, with matplotlib) and
.md: per method and budget (fractions of plain LightGBM's validation cost, and any cost) the mean test AP@5 over
the splits of the model chosen on validation within the budget, its 95% interval and mean test cost, with "CEGB
deep trained to the budget" (selection.train_to_budget) at each. Figure 3b's best-first against breadth-first
growth: "CEGB deep" against "CEGB deep, breadth-first" (tree_growth=depthwise, patch 0005), the same leaves and
rounds.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from lightgbm_cegb import FeatureCosts
from lightgbm_cegb.datasets import load_svmlight, yahoo_costs
from scripts.protocol import QUICK, mslr_parts, protocol_parser, query_split, repeated_frontiers, rf_run

SHALLOW = {"num_leaves": 16, "max_depth": 4}
DEEP = {"num_leaves": 64}
#: the synthetic stand-in's default number of queries (its reports are named for the others, e.g. synthetic-2000q)
QUERIES = 300
SETTINGS = {"i": "setting (i): feature + split cost 1/4, graded labels",
            "ii": "setting (ii): feature cost only, labels binarised"}


def synthetic(folder: Path, queries: int, seed: int = 0, signal_in: str = "expensive") -> dict[str, Path]:
    """Yahoo-shaped SVMlight files (1-based ids 1..700, qid, labels 0-4) in ``folder``, of :func:`synthetic_arrays`'
    documents, each value written to 4 decimals; a value of 0 is missing, left out of the line as Yahoo's zeros are."""
    files = {}
    for split, (values, labels, sizes) in synthetic_arrays(queries, seed, signal_in).items():
        qid = np.repeat(np.arange(len(sizes)), sizes)
        lines = []
        for i in range(len(labels)):
            present = np.flatnonzero(values[i])
            lines.append(f"{labels[i]} qid:{qid[i]} " + " ".join(f"{j + 1}:{values[i, j]:.4f}" for j in present))
        files[split] = folder / f"synthetic.{split}.txt"
        files[split].write_text("\n".join(lines) + "\n")
    return files


def synthetic_arrays(queries: int, seed: int = 0, signal_in: str = "expensive") -> dict[str, tuple]:
    """Yahoo-shaped documents by split ("train" 60% of the queries, "valid" and "test" 20%): (values of the 700
    features, labels 0-4, query sizes 5-29). The 519 features with a real cost occur, the 181 sentinel ones are always
    0; most features are noise, values lie in [0, 1] and a third of them are missing (0, as Yahoo's). ``signal_in``
    "expensive": a feature's signal grows with its cost (the expensive features are the informative ones, as the
    paper's setting assumes, which favours methods that buy them for a few rows); "cheap": it shrinks with its cost
    (the cheap features carry most of the signal)."""
    rng = np.random.default_rng(seed)
    lazy = yahoo_costs().lazy
    used = np.flatnonzero(lazy < 10000)
    rank = np.log1p(lazy[used]) / np.log1p(200)
    if signal_in not in ("expensive", "cheap"):
        raise ValueError(f"signal_in should be 'expensive' or 'cheap', got {signal_in!r}")
    strength = 0.15 + 0.85 * (rank if signal_in == "expensive" else 1.0 - rank)
    signal = np.where(rng.random(len(used)) < 0.3, strength, 0.0)
    parts = {}
    for split, share in (("train", 0.6), ("valid", 0.2), ("test", 0.2)):
        n_queries = max(int(queries * share), 2)
        sizes = rng.integers(5, 30, n_queries)
        n = int(sizes.sum())
        relevance = rng.normal(size=n) + np.repeat(rng.normal(0, 0.5, n_queries), sizes)
        labels = np.digitize(relevance + rng.normal(0, 0.3, n), [-0.3, 0.6, 1.4, 2.1])
        values = 1 / (1 + np.exp(-(relevance[:, None] * signal + rng.normal(size=(n, len(used))))))
        values[rng.random(values.shape) < 1 / 3] = 0.0
        full = np.zeros((n, len(lazy)))
        full[:, used] = values
        parts[split] = (full, labels, sizes)
    return parts


def load(args) -> tuple[dict, FeatureCosts]:
    """{split: (X, y, group)} and the lazy costs aligned to X's columns."""
    if args.data == "mslr":
        return mslr_parts()
    if args.data == "synthetic":
        folder = Path(tempfile.mkdtemp(prefix="yahoo-synthetic-"))
        paths = synthetic(folder, args.queries, signal_in=args.signal)
    else:
        missing = [name for name in ("train", "valid", "test") if getattr(args, name) is None]
        if missing:
            raise SystemExit(f"--data yahoo needs --train, --valid and --test (set1.*.txt), missing {missing}")
        paths = {name: Path(getattr(args, name)) for name in ("train", "valid", "test")}
    costs = yahoo_costs()
    parts = {}
    for name, path in paths.items():
        data = load_svmlight(path, costs)
        parts[name] = (data.X, data.y, data.group)
    return parts, FeatureCosts(lazy=costs.lazy)


#: the grid of Cronus and CSCC: relative trade-offs from where the cascades stop at their first stage to where they
#: read every tree, each with phi the plain model's trees (the registry's) and the CSTC paper's boosting trick (200
#: squared-loss trees of depth 4)
CASCADE_GRID = [{"relative_tradeoff": float(r), **phi} for r in np.geomspace(1e-6, 3e-2, 12)
                for phi in ({}, {"phi_trees": 200, "phi_depth": 4})]


def setting_runs(setting: str, args, rows: int) -> tuple[list[tuple], dict, dict]:
    """A setting's runs of ``repeated_frontiers`` (label, method, LightGBM parameters[, rounds[, grid]]: the
    methods of ``--methods``), the LightGBM parameters of "CEGB deep trained to the budget", and the grids of
    ``--quick``. ``rows``: all the rows of the data (the random forest's leaves are capped there)."""
    binarise = setting == "ii"
    objective = {"objective": "binary"} if binarise else {"objective": "regression"}
    prune = None if args.quick else [{"budget_fraction": f} for f in (0.2, 0.4, 0.6, 0.8)]  # ~10 max-flows each
    quick = {**QUICK, "cegb": [{"relative_tradeoff": r} for r in (0.0, 0.01, 0.1)],
             "cegb_cascade": [{"relative_tradeoff": r} for r in (0.01, 0.1)],
             "budget_prune": [{"budget_fraction": f} for f in (0.3, 1.0)],
             "early_exit": [{"threshold": 0.9 if binarise else 1.0}]}
    label, _, forest, trees = rf_run(rows, args.quick)
    runs = [("LightGBM", "lightgbm", {**DEEP, **objective}),
            ("BudgetPrune", "budget_prune", {**DEEP, **objective}, None, prune),
            (label, "budget_prune", {**forest, **objective}, trees, prune),
            ("Early Exit", "early_exit", {**DEEP, **objective} if binarise else {**DEEP, "objective": "lambdarank"})]
    if binarise:
        forests = None if args.quick else [{"tradeoff": a, "n_estimators": args.forest} for a in (0.0, 2.0, 8.0)]
        runs += [("CEGB", "cegb", {**DEEP, **objective}),
                 ("CEGB cascade", "cegb_cascade", {**DEEP, **objective}),
                 ("BudgetRF", "budgetrf", {}, None, forests)]
    else:
        runs += [("CEGB 16 leaves, depth 4", "cegb", {**SHALLOW, **objective}),
                 ("CEGB cascade, 16 leaves, depth 4", "cegb_cascade", {**SHALLOW, **objective}),
                 ("CEGB deep", "cegb", {**DEEP, **objective}),
                 ("CEGB deep, breadth-first", "cegb", {**DEEP, **objective, "tree_growth": "depthwise"})]
    runs += [("Greedy Miser", "greedy_miser", {}),
             ("Cronus", "cronus", {}, None, CASCADE_GRID),
             ("CSCC", "cscc", {}, None, CASCADE_GRID),
             ("Staged acquisition ranker", "staged_acquisition_ranker", {}),
             ("Cheap subset (baseline)", "cheap_subset", {**DEEP, **objective})]
    # a run's own grid (the 5th entry) wins over --quick's: None where --quick should apply
    runs = [run[:4] if len(run) > 4 and run[4] is None else run for run in runs]
    wanted = args.methods.split(",")
    if "lightgbm" not in wanted:
        raise SystemExit("--methods should include lightgbm: the budgets are fractions of its cost")
    return [run for run in runs if run[1] in wanted], {**DEEP, **objective}, quick


def binarised(parts: dict) -> dict:
    """The parts with labels y > 0 (setting (ii))."""
    return {k: (X, (y > 0).astype(np.float64), group) for k, (X, y, group) in parts.items()}


def main() -> None:
    parser = protocol_parser(__doc__, choices=("synthetic", "mslr", "yahoo"))
    parser.add_argument("--synthetic", action="store_const", const="synthetic", dest="data",
                        help="the same as --data synthetic")
    parser.add_argument("--train"), parser.add_argument("--valid"), parser.add_argument("--test")
    parser.add_argument("--queries", type=int, default=QUERIES,
                        help=f"synthetic: queries over train/valid/test (a size other than {QUERIES}: the reports are "
                             "named synthetic-<N>q)")
    parser.add_argument("--signal", choices=("expensive", "cheap"), default="expensive",
                        help="synthetic: the features whose signal is strongest (the report is named synthetic-cheap "
                             "for cheap)")
    parser.add_argument("--forest", type=int, default=30, help="BudgetRF: trees per forest")
    parser.add_argument("--settings", default="i,ii", help="which of the paper's settings to run")
    parser.add_argument("--methods", default="lightgbm,cegb,cegb_cascade,budget_prune,early_exit,budgetrf,greedy_miser,"
                                             "cronus,cscc,staged_acquisition_ranker,cheap_subset",
                        help="which methods to run (BudgetPrune on all of Yahoo's 473k rows takes hours)")
    args = parser.parse_args()
    unknown = [s for s in args.settings.split(",") if s not in SETTINGS]
    if unknown:
        parser.error(f"--settings takes i and/or ii (comma-separated), got {args.settings!r}")
    parts, lazy = load(args)
    name = f"{args.data}-cheap" if args.data == "synthetic" and args.signal == "cheap" else args.data
    if args.data == "synthetic" and args.queries != QUERIES:  # beside the default size's reports, not over them
        name += f"-{args.queries}q"
    rows = sum(part[0].shape[0] for part in parts.values())
    for setting in args.settings.split(","):
        runs, deep, quick = setting_runs(setting, args, rows)
        costs = FeatureCosts(lazy=lazy.lazy, split=0.0 if setting == "ii" else 0.25)

        def split(seed: int, setting=setting) -> dict:
            parts_of = query_split(parts, seed)
            return binarised(parts_of) if setting == "ii" else parts_of

        signal = " --signal cheap" if args.data == "synthetic" and args.signal == "cheap" else ""
        queries = f" --queries {args.queries}" if args.data == "synthetic" else ""
        repeated_frontiers(split, costs, "ranking", runs, args, name=f"yahoo_{name}_{setting}",
                           title=f"{name}, {SETTINGS[setting]}", metric="ap@5", quick_grids=quick,
                           trained=("CEGB deep trained to the budget", deep),
                           command=f"python -m scripts.reproduce_yahoo --data {args.data}{signal}{queries} --settings "
                                   f"{setting} --rounds {args.rounds}")


if __name__ == "__main__":
    main()
