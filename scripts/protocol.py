"""The benchmark protocol the experiment scripts share: the data they read (``DATA``: the shared data folder) and
how they split it (random and query-wise splits), the sweeps of every method on each split (budgets as fractions of
plain LightGBM's validation cost, ``--resume``/``--split``/``--only``), and the report of a frontier (CSV of every
point, PNG of the test figures, a markdown table of each method's test figures within each budget: the mean over
the splits with its 95% Student-t interval, bold where it separates from the runner-up's). The point a method
reaches within a budget is the one ``lightgbm_cegb.selection.select`` would choose (``best_point``)."""

from __future__ import annotations

import argparse
import csv
import hashlib
import re
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import sparse

from lightgbm_cegb import __version__
from lightgbm_cegb.core.costs import FeatureCosts
from lightgbm_cegb.core.errors import BudgetWarning, CEGBError
from lightgbm_cegb.datasets import letter, mslr_subset
from lightgbm_cegb.io.atomic import write_atomically
from lightgbm_cegb.selection import METHODS, best_point, evaluate, fit_within_budget, pareto, sweep, train_to_budget
from lightgbm_cegb.selection.metrics import get_metric

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def write_table(path: Path, rows: list[dict]) -> None:
    """rows as a CSV file, written atomically."""
    def write_csv(tmp):
        with open(tmp, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)

    write_atomically(path, write_csv)


def pyplot():
    """matplotlib's pyplot drawing to files, or None (with a message) when matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install matplotlib): no plot")
        return None
    return plt


def best_within(frame: pd.DataFrame, budgets: list[float]) -> list[dict]:
    """Per method and budget: the test figures of the point ``select`` would choose among the method's points
    (``best_point``; no row where no point is within the budget). ``frame``: a sweep with test_* columns."""
    rows = []
    for method, points in frame.groupby("method", sort=False):
        points.attrs = dict(frame.attrs)
        for i, budget in enumerate(budgets):
            best = best_point(points, budget)
            if best is not None:
                rows.append({"method": method, "budget": i, "test_quality": float(best["test_quality"]),
                             "test_cost": float(best["test_cost"])})
    return rows


def interval(values) -> tuple[float, float]:
    """(mean, half-width of the 95% Student-t interval of the mean); half-width nan for one value."""
    from scipy import stats

    values = np.asarray(values, dtype=np.float64)
    if len(values) < 2:
        return float(values.mean()), float("nan")
    return float(values.mean()), float(stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) /
                                       np.sqrt(len(values)))


def interval_table(results: pd.DataFrame, labels: list[str], num_splits: int, greater: bool = True) -> list[str]:
    """Markdown rows from ``best_within`` rows of several splits (a ``split`` column): per method and budget,
    the mean test quality over the splits with its 95% interval and the mean test cost. A method missing in
    some splits (nothing within the budget there) shows in how many it had a point, and is not ranked. In each
    column the best mean is bold only where its interval does not overlap the runner-up's."""
    lines = ["| method | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    cells: dict[tuple, str] = {}
    bold: set = set()
    for budget in range(len(labels)):
        ranked = []
        for method, points in results[results["budget"] == budget].groupby("method", sort=False):
            mean, half = interval(points["test_quality"])
            cost = points["test_cost"].mean()
            text = f"{mean:.4f} ± {half:.4f} @ {cost:.4g}" if np.isfinite(half) else f"{mean:.4f} @ {cost:.4g}"
            if len(points) < num_splits:
                text += f" ({len(points)}/{num_splits} splits)"
            else:
                ranked.append((mean if greater else -mean, half, method))
            cells[(method, budget)] = text
        ranked.sort(reverse=True)
        if len(ranked) >= 2 and ranked[0][0] - ranked[0][1] > ranked[1][0] + ranked[1][1]:
            bold.add((ranked[0][2], budget))
    for method in dict.fromkeys(results["method"]):
        row = [(f"**{cells[(method, b)]}**" if (method, b) in bold else cells.get((method, b), "-"))
               for b in range(len(labels))]
        lines.append(f"| {method} | " + " | ".join(row) + " |")
    return lines


def report_frontier(frame: pd.DataFrame, out: Path, name: str, title: str, metric: str,
                    plotted: pd.DataFrame | None = None) -> list[str]:
    """Write ``out/name.csv`` (every point, validation and test figures) and ``out/name.png`` (each method's
    validation Pareto points at their test figures: those of ``plotted``, by default every point); return the
    PNG's markdown line (none without matplotlib)."""
    table = frame.drop(columns=["model"], errors="ignore").assign(
        params=frame["params"].map(lambda p: p if isinstance(p, str) else repr(p)))
    write_atomically(out / f"{name}.csv", lambda tmp: table.to_csv(tmp, index=False))
    plt = pyplot()
    if plt is None:
        return []
    from lightgbm_cegb.selection.plots import plot_frontiers

    plotted = frame if plotted is None else plotted
    test = plotted.assign(cost=plotted["test_cost"], quality=plotted["test_quality"])
    ax = plot_frontiers(test, pareto_only=False, xlabel="mean cost per test row", title=title)
    ax.set_ylabel(f"test {metric}")
    ax.figure.set_size_inches(9.5, 5.0)
    ax.figure.tight_layout()
    write_atomically(out / f"{name}.png", lambda tmp: ax.figure.savefig(tmp, format="png", dpi=110))
    plt.close(ax.figure)
    return [f"![{title}]({name}.png)", ""]


def load_letter() -> list:
    """UCI Letter Recognition (bundled): [(X, y)] x 3 (10,000 / 3,000 / 7,000 rows, shuffled with
    seed 0; y the letters), 16 unit-cost features."""
    X, y = letter()
    order = np.random.default_rng(0).permutation(len(y))
    return [(X[p], y[p]) for p in np.split(order, [10_000, 13_000])]


def trained_to_budgets(train, valid, test, costs, budgets: list[float], label: str, *, task: str,
                       quick: bool = False, **options) -> pd.DataFrame:
    """One point per budget: CEGB trained to it (selection.train_to_budget: budget_stopping on the
    validation rows, the relative trade-off searched), with its validation and test figures."""
    rows = []
    for budget in budgets:
        search = {"relative_tradeoffs": (0.0, 0.5), "refine": 0} if quick else {}
        try:
            chosen = train_to_budget(train, valid, costs, budget, task=task, test=test, **search, **options)
        except CEGBError as exc:  # even the first iteration of every trade-off tried costs more
            print(f"{label}: nothing within budget {budget:g} ({exc})", flush=True)
            continue
        rows.append({"method": label, "quality": chosen.valid_quality, "cost": chosen.valid_cost, "coupled": 0.0,
                     "params": chosen.params, "model": chosen.candidate, "test_quality": chosen.test_quality,
                     "test_cost": chosen.test_cost})
    return pd.DataFrame(rows, columns=["method", "quality", "cost", "coupled", "params", "model", "test_quality",
                                       "test_cost"])


def workflow_points(train, valid, test, costs, budgets: list[float], label: str, *, task: str,
                    **options) -> pd.DataFrame:
    """One point per budget: what ``fit_within_budget`` with its defaults answers within it (every budget in one
    call; ``options``: the protocol's metric, round cap and jobs), with its validation and test figures; a budget
    it has nothing within gives no point. ``params``: the chosen method's name and point. Without the time limit
    per method (``method_fits=None``): a limit in plain fits of this machine's moment would make the points depend
    on its load, and every other run of the protocol is the same whatever the load."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BudgetWarning)  # a budget below every point: no point, as the table says
        chosen = fit_within_budget(train, valid, costs, list(budgets), task=task, test=test, method_fits=None,
                                   **options)
    rows = [{"method": label, "quality": s.valid_quality, "cost": s.valid_cost, "coupled": 0.0,
             "params": {"method": s.method, **s.params}, "model": s.model, "test_quality": s.test_quality,
             "test_cost": s.test_cost} for s in chosen if s.within_budget]
    return pd.DataFrame(rows, columns=["method", "quality", "cost", "coupled", "params", "model", "test_quality",
                                       "test_cost"])


def mslr_parts() -> tuple[dict, FeatureCosts]:
    """The bundled MSLR subset as {split: (X, y, query sizes)} (a third of the training queries validate) and
    its lazy costs."""
    train, test = mslr_subset("train"), mslr_subset("test")
    qids = np.unique(train.qid)
    valid = np.isin(train.qid, qids[: len(qids) // 3])

    def part(mask):
        sizes = np.diff(np.flatnonzero(np.r_[True, train.qid[mask][1:] != train.qid[mask][:-1], True]))
        return train.X[mask], train.y[mask], sizes
    return ({"train": part(~valid), "valid": part(valid), "test": (test.X, test.y, test.group)},
            FeatureCosts(lazy=train.costs.lazy))


# ---------------------------------------------------------------------------------------- the one protocol

#: budgets of the tables: fractions of plain LightGBM's mean validation cost in each split
BUDGET_FRACTIONS = (0.1, 0.25, 0.5)
#: small grids for --quick (the tests run them)
QUICK = {"cegb": [{"relative_tradeoff": r} for r in (0.0, 0.05)], "budget_prune": [{"budget_fraction": 0.3}],
         "early_exit": [{"threshold": 0.9}], "budgetrf": [{"tradeoff": 2.0, "n_estimators": 5, "trees": (1, 5)}],
         "greedy_miser": [{"relative_tradeoff": r} for r in (0.0, 0.1)],
         "adapt_gbrt": [{"p_full": 0.3, "relative_tradeoff": 0.01, "n_rounds": 2, "trees_per_round": 10}],
         "adapt_lin": [{"p_full": 0.3, "relative_tradeoff": 0.05}],
         "adapt_l1": [{"p_full": 0.3, "relative_tradeoff": 0.05}],
         **{name: [{"relative_tradeoff": 1e-3}] for name in ("cstc", "cscc", "cronus")},
         "cheap_subset": [{"steps": 2}],
         "adaptive_acquisition": [{"relative_tradeoff": r} for r in (0.05, 0.3)],
         "staged_acquisition": [{"relative_tradeoff": r} for r in (0.05, 0.3)],
         "staged_acquisition_ranker": [{"tradeoff": t, "top_k": 3} for t in (0.0, 0.7)],
         "staged_acquisition_regressor": [{"relative_tradeoff": r} for r in (0.05, 0.3)],
         "catboost": [{"penalties_coefficient": c} for c in (1e-5, 1e-3)]}
RF_TREES = 100
#: --rounds' default (a report's command line names --rounds only when it differs)
ROUNDS = 500
#: its trees under --quick (the tests): BudgetPrune's max-flows grow with the forest
RF_QUICK_TREES = 20
#: the protocol's "CEGB trained to the budget" run: its label and LightGBM parameters
TRAINED = ("CEGB trained to the budget", {})
#: the label of --workflow's run: fit_within_budget's answer within each budget
WORKFLOW = "The budget workflow (fit_within_budget)"


def rf_params(train_rows: int) -> dict:
    """BudgetPrune's own setting (Nan, Wang and Saligrama, NIPS 2016): a random forest of fully grown trees
    (LightGBM's rf mode: bootstrap-like bagging, a random half of the features per tree, leaves down to one row),
    ``RF_TREES`` rounds, rather than the boosted model. ``num_leaves`` is the training rows: a tree whose leaves hold
    one row or more has at most that many, so the cap never binds. LightGBM sizes its histogram cache (bounded at
    512 MB here: unbounded, 14 GB for HIGGS's 100 trees) and each tree's arrays by num_leaves: at 131,072, letter's
    2,600 trees went past 24 GB and were killed; capped, 2.7 GB. The same trees either way (model text compared on
    HIGGS)."""
    return {"boosting": "rf", "bagging_fraction": 0.632, "bagging_freq": 1, "feature_fraction": 0.5,
            "num_leaves": max(2, min(int(train_rows), 131072)), "min_data_in_leaf": 1, "min_sum_hessian_in_leaf": 0.0,
            "histogram_pool_size": 512}


def rf_run(train_rows: int, quick: bool = False) -> tuple:
    """``repeated_frontiers``' run of BudgetPrune on that forest (``rf_params``, ``RF_TREES`` trees; ``quick``:
    ``RF_QUICK_TREES``)."""
    return "BudgetPrune (random forest)", "budget_prune", rf_params(train_rows), RF_QUICK_TREES if quick else RF_TREES


LABELS = {"lightgbm": "LightGBM", "cegb": "CEGB", "budget_prune": "BudgetPrune", "early_exit": "Early Exit",
          "budgetrf": "BudgetRF", "greedy_miser": "Greedy Miser", "adapt_gbrt": "ADAPT-GBRT",
          "adapt_lin": "ADAPT-LIN", "adapt_l1": "ADAPT's L1 baseline", "cstc": "CSTC", "cscc": "CSCC",
          "cronus": "Cronus", "cheap_subset": "Cheap subset (baseline)",
          "adaptive_acquisition": "Adaptive acquisition", "staged_acquisition": "Staged acquisition",
          "staged_acquisition_ranker": "Staged acquisition ranker",
          "staged_acquisition_regressor": "Staged acquisition regressor",
          "catboost": "CatBoost (feature penalties)"}


def protocol_parser(doc: str, choices=None, data_paths: bool = False) -> argparse.ArgumentParser:
    """The command line of the scripts that run the protocol: --data (a bundled name, or NAME PATH...), --splits,
    --rounds, --jobs, --quick, --out."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    if data_paths:
        parser.add_argument("--data", nargs="+", required=True, metavar=("NAME", "PATH"),
                            help=f"the data set ({', '.join(choices)}) and its file(s)")
    else:
        parser.add_argument("--data", choices=choices, default=choices[0])
    parser.add_argument("--splits", type=int, default=5, help="random splits of the rows (seeds 0, 1, ...)")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="boosting rounds (early stopping on validation)")
    parser.add_argument("--method-rounds", type=method_rounds, action="append", default=[], metavar="METHOD=ROUNDS",
                        help="a method's own round cap instead of --rounds (repeatable; e.g. greedy_miser=2000 where "
                             "its cheap trees hit the cap)")
    parser.add_argument("--jobs", type=int, default=1, help="grid points trained in parallel")
    parser.add_argument("--quick", action="store_true",
                        help=f"small grids, a random forest of {RF_QUICK_TREES} trees (the tests run this)")
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--only", action="append", default=[], metavar="LABEL",
                        help="re-run only this run (its label in the table, e.g. \"Greedy Miser\"; repeatable) and "
                             "plain LightGBM, whose cost sets the budgets; every other run's points are those of "
                             "OUT's earlier CSV of the same command, whose plain LightGBM points must be the same; "
                             "the report is rewritten from all of them")
    parser.add_argument("--skip", action="append", default=[], metavar="LABEL",
                        help="leave this run out (its label in the table; repeatable): no points, no row, and the "
                             "report says so (e.g. a run not measured on this data yet, with --only)")
    parser.add_argument("--workflow", action="store_true",
                        help=f"add the run {WORKFLOW!r}: what fit_within_budget with its defaults answers within each "
                             "budget of the split (one call for every budget, the protocol's metric and round cap, no "
                             "time limit per method: the points do not depend on the machine's load); its own default "
                             "methods and parameters, whatever --methods, --quick or the setting's objective")
    parser.add_argument("--resume", action="store_true",
                        help="reuse the splits, and the runs within a split, that an interrupted run of the same "
                             "command finished (the same data, runs, caps and package version): each run's points are "
                             "saved in OUT as it ends (removed once its split's are saved), each split's as it ends "
                             "(removed once the report is written)")
    parser.add_argument("--split", type=int, metavar="K",
                        help="run split K only (0 to --splits - 1) and save its points in OUT, without a report: the "
                             "splits spread over processes or machines (each e.g. under `taskset -c N`); the same "
                             "command with --resume then reads every saved split and writes the report")
    return parser


def method_rounds(text: str) -> tuple[str, int]:
    """--method-rounds' METHOD=ROUNDS: a registered method and a positive number of rounds."""
    name, _, rounds = text.partition("=")
    if name not in METHODS:
        raise argparse.ArgumentTypeError(f"METHOD should be one of {', '.join(METHODS)}, got {name!r}")
    if not rounds.isdigit() or int(rounds) < 1:
        raise argparse.ArgumentTypeError(f"ROUNDS should be a positive integer, got {rounds!r} in {text!r}")
    return name, int(rounds)


def random_split(X, y, sizes: tuple[int, ...], seed: int) -> dict:
    """{train, valid, test: (X, y)}: the rows shuffled with ``seed`` and cut at the sizes (train, valid[, test];
    without a test size, the rest tests)."""
    if sum(sizes) > len(y):
        raise CEGBError(f"the split sizes {sizes} need {sum(sizes)} rows; the data has {len(y)}")
    order = np.random.default_rng(seed).permutation(len(y))
    cuts = np.cumsum(sizes)
    parts = np.split(order[: cuts[-1]] if len(sizes) == 3 else order, cuts[:2])
    return {k: (X[p], y[p]) for k, p in zip(("train", "valid", "test"), parts)}


def query_split(parts: dict, seed: int) -> dict:
    """{train, valid, test: (X, y, query sizes)}: the queries of ``parts`` (the same keys and form) pooled,
    shuffled with ``seed`` and dealt out in the parts' own numbers of queries, each query's rows together and in
    order."""
    names = ("train", "valid", "test")
    X = [parts[k][0] for k in names]
    X = sparse.vstack(X, format="csr") if sparse.issparse(X[0]) else np.vstack(X)
    y = np.concatenate([parts[k][1] for k in names])
    sizes = np.concatenate([np.asarray(parts[k][2], dtype=np.int64) for k in names])
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    order = np.random.default_rng(seed).permutation(len(sizes))
    out, at = {}, 0
    for k in names:
        chosen = order[at: at + len(parts[k][2])]
        at += len(chosen)
        rows = np.concatenate([np.arange(starts[q], starts[q] + sizes[q]) for q in chosen])
        out[k] = (X[rows], y[rows], sizes[chosen])
    return out


def budgets_of(plain: float) -> list[float]:
    """The protocol's budgets: ``BUDGET_FRACTIONS`` of plain LightGBM's validation cost ``plain``."""
    return [round(f * plain, 4) for f in BUDGET_FRACTIONS]


def split_key(parts: dict, runs: list[tuple], trained, args, metric: str, quick_grids: dict | None,
              workflow: str | None = None) -> str:
    """What one split's points depend on, hashed: its rows, the runs (grids and parameters; the budget workflow's
    where it runs), the caps, --quick's grids, the metric and the package's and LightGBM's versions."""
    import lightgbm

    digest = hashlib.sha256(repr((runs, trained, args.rounds, sorted(args.method_rounds), args.quick and quick_grids,
                                  metric, __version__, lightgbm.__version__) + ((workflow,) if workflow else ()))
                            .encode())
    for key in sorted(parts):
        for array in parts[key]:
            for part in (array.data, array.indices, array.indptr) if sparse.issparse(array) else (array,):
                digest.update(np.ascontiguousarray(part).tobytes())
    return digest.hexdigest()[:16]


def plain_run(runs: list[tuple]) -> tuple:
    """The first run of ``lightgbm`` in ``runs``: the plain model whose validation cost the budgets are fractions
    of. Refused, before anything is trained, where there is none."""
    plain = next((run for run in runs if run[1] == "lightgbm"), None)
    if plain is None:
        raise CEGBError("the runs need plain LightGBM (the budgets are fractions of its cost); they are "
                        f"{[run[0] for run in runs]}")
    return plain


def split_frontiers(parts: dict, costs: FeatureCosts, task: str, runs: list[tuple], args,
                    quick_grids: dict | None = None, *, metric: str | None = None,
                    trained: tuple[str, dict] | None = TRAINED, workflow: str | None = None,
                    budgets: list[float] | None = None, saved: Path | None = None) -> tuple[pd.DataFrame, list[float]]:
    """Every run's validation Pareto points with their test figures on one split, CEGB trained to each budget
    (``trained``: its label and LightGBM parameters; None: not run), ``fit_within_budget``'s answer within each
    (``workflow``: its label; None: not run) and the split's budgets. ``runs``: (label,
    registered method, LightGBM parameters[, rounds[, grid]]): rounds None or absent: --method-rounds' or --rounds;
    grid: the run's own points (the method's parameters), instead of its default grid (or --quick's). The first run
    of ``lightgbm`` is the plain model whose validation cost the budgets are fractions of (``budgets``: fixed ones
    instead); ``metric``: the sweeps' (None: the task's default). ``saved``: the split's file (``repeated_frontiers``);
    each run's points are then saved beside it as the run ends (``run_file``) and returned as the file holds them
    (``saved_points``), and ``args.resume`` reads a run's back instead of running it again: a split interrupted after
    hours loses only the run under way."""
    frames, first = [], plain_run(runs)
    for i, run in enumerate(runs):
        label, name, params = run[:3]
        frame = resumed(saved, i, label, args)
        if frame is not None:
            frames.append(frame)
            if run is first:
                plain = frames[-1]["cost"].max()
            continue
        rounds = run[3] if len(run) > 3 and run[3] is not None else \
            dict(args.method_rounds).get(name, args.rounds)
        start = time.perf_counter()
        grid = {name: run[4]} if len(run) > 4 else \
            {name: quick_grids[name]} if args.quick and quick_grids and name in quick_grids else None
        frame = sweep(name, parts["train"], parts["valid"], costs, task=task, grid=grid, params=params, metric=metric,
                      num_boost_round=rounds, n_jobs=args.jobs, baseline=False)  # the baseline is a run of its own
        frame = evaluate(pareto(frame), parts["test"])
        frame["method"] = label
        frames.append(frame if saved is None else saved_points(frame, run_file(saved, i)))
        if run is first:
            plain = frames[-1]["cost"].max()
        print(f"{label}: {len(frame)} validation Pareto points in {time.perf_counter() - start:.1f} s", flush=True)
    budgets = budgets_of(plain) if budgets is None else list(budgets)
    rows, options = (parts["train"], parts["valid"], parts["test"], costs, budgets), \
        {"task": task, "metric": metric, "num_boost_round": args.rounds, "n_jobs": args.jobs}
    if trained is not None:
        frames.append(budget_run(saved, len(runs), trained[0], args, lambda: trained_to_budgets(
            *rows, trained[0], quick=args.quick, params=trained[1], **options)))
    if workflow is not None:
        frames.append(budget_run(saved, len(runs) + 1, workflow, args,
                                 lambda: workflow_points(*rows, workflow, **options)))
    frame = pd.concat(frames, ignore_index=True)
    frame.attrs = dict(frames[0].attrs)
    return frame, budgets


def budget_run(saved: Path | None, i: int, label: str, args, make) -> pd.DataFrame:
    """The points of a split's run ``i`` (``label``) that answers each budget (``make()``: CEGB trained to it, the
    budget workflow), saved and resumed as a sweep's run is (``resumed``, ``saved_points``)."""
    frame = resumed(saved, i, label, args)
    if frame is None:
        start = time.perf_counter()
        frame = make()
        frame = frame if saved is None else saved_points(frame, run_file(saved, i))
        print(f"{label} in {time.perf_counter() - start:.1f} s", flush=True)
    return frame


def run_file(saved: Path, i: int) -> Path:
    """Where run ``i`` of a split (``len(runs)``: CEGB trained to the budgets; ``len(runs) + 1``: the budget
    workflow) saved in ``saved`` keeps its points until the split ends."""
    return saved.with_name(f"{saved.stem}.run{i}.csv")


def resumed(saved: Path | None, i: int, label: str, args) -> pd.DataFrame | None:
    """With ``args.resume``, the points run ``i`` (``label``) of the split saved in ``saved`` saved before the
    split was interrupted; None where there are none (or no --resume): the run runs."""
    if saved is None or not args.resume or not run_file(saved, i).is_file():
        return None
    try:
        frame = pd.read_csv(run_file(saved, i))
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as error:
        print(f"{label}: {run_file(saved, i)} cannot be read ({type(error).__name__}); the run runs again", flush=True)
        return None
    print(f"{label}: resumed from {run_file(saved, i)}", flush=True)
    return frame


def saved_points(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    """``frame``'s points as a split's file holds them (without the models, the parameters as text), written to
    ``path`` atomically and read back."""
    points = frame.drop(columns=["model"]).assign(params=frame["params"].map(repr))
    write_atomically(path, lambda tmp: points.to_csv(tmp, index=False))
    return pd.read_csv(path)


def earlier_points(path: Path, labels: list[str], args) -> pd.DataFrame:
    """--only's points of the runs not re-run: those of ``path`` (a report's CSV of the same command), every split's
    (``split`` 0 .. --splits - 1), params as written. Refused, naming what is wrong, where --only names no run of
    ``labels`` or the CSV is missing, holds other splits, lacks a run that is not re-run or holds one this command
    does not run."""
    unknown = [label for label in args.only if label not in labels]
    if unknown:
        raise CEGBError(f"--only should name runs of this command ({', '.join(map(repr, labels))}), got "
                        f"{', '.join(map(repr, unknown))}")
    if not path.is_file():
        raise CEGBError(f"--only re-runs some runs into an earlier report: {path} should exist, and does not")
    earlier = pd.read_csv(path)
    if sorted(set(earlier["split"])) != list(range(args.splits)):
        raise CEGBError(f"--only: {path} should hold the splits 0 to {args.splits - 1} (--splits {args.splits}), "
                        f"holds {sorted(set(earlier['split']))}")
    missing = [label for label in labels if label not in args.only and label not in set(earlier["method"])]
    if missing:
        raise CEGBError(f"--only: {path} has no points of {', '.join(map(repr, missing))}: add them to --only")
    extra = sorted(set(earlier["method"]) - set(labels) - set(args.skip))
    if extra:  # the report would keep rows its command line no longer makes
        raise CEGBError(f"--only: {path} holds points of {', '.join(map(repr, extra))}, which this command does not "
                        "run: give the options that made them (e.g. --workflow, --adapt-authors)")
    return earlier


def earlier_rounds(path: Path, args, rerun: set[str]) -> list[tuple[str, int]]:
    """The --method-rounds a report merged by --only is made with: those of the earlier report at ``path`` (its
    command line) for the methods not re-run, this command's for the methods ``rerun``. Refused where the earlier
    report is missing or was made with(out) --quick when this command is not, or where --method-rounds gives a
    method that is not re-run a cap other than the earlier report's (its points would not have it)."""
    if not path.is_file():
        raise CEGBError(f"--only re-runs some runs into an earlier report: {path} should exist, and does not")
    line = next((line for line in path.read_text().splitlines() if line.startswith("`")), "``")
    command = line.split("`")[1]
    quick = "--quick" in command.split()
    if quick != args.quick:
        raise CEGBError(f"--only: {path} was made {'with' if quick else 'without'} --quick, this "
                        f"command {'with' if args.quick else 'without'}: run the whole command")
    before = {name: int(rounds) for name, rounds in re.findall(r"--method-rounds (\w+)=(\d+)", command)}
    for name, rounds in args.method_rounds:
        if name not in rerun and before.get(name) != rounds:
            raise CEGBError(f"--method-rounds {name}={rounds}: no run of {name} is re-run (--only), and its points in "
                            f"{path} had {f'{before[name]} rounds' if name in before else 'the --rounds'}")
    return [*((name, rounds) for name, rounds in before.items() if name not in rerun),
            *((name, rounds) for name, rounds in args.method_rounds if name in rerun)]


def merged(fresh: pd.DataFrame, earlier: pd.DataFrame, labels: list[str], plain: str) -> pd.DataFrame:
    """``fresh`` points (plain LightGBM, labelled ``plain``, and the runs of --only, params as text) with
    ``earlier``'s of every other run, in the order of a whole run (split by split, runs in the order of ``labels``).
    Refused where plain LightGBM's points differ from the earlier ones (another build, data or --rounds: the budgets
    would move)."""
    figures = ["quality", "cost", "test_quality", "test_cost", "split"]
    now, before = (part.loc[part["method"] == plain, figures].reset_index(drop=True) for part in (fresh, earlier))
    if not now.equals(before):
        raise CEGBError("--only: plain LightGBM's points should be those of the earlier report, whose budgets the "
                        "other runs were chosen within; they differ (another build, data or --rounds?): run the "
                        "whole command")
    every = pd.concat([fresh, earlier[~earlier["method"].isin(set(fresh["method"]))]], ignore_index=True)
    rank = every["method"].map({label: i for i, label in enumerate(labels)})
    order = np.lexsort((np.arange(len(every)), rank.to_numpy(), every["split"].to_numpy()))
    columns = [*earlier.columns, *(column for column in fresh.columns if column not in earlier.columns)]
    return every.iloc[order][columns].reset_index(drop=True)


def repeated_frontiers(split, costs: FeatureCosts, task: str, runs: list[tuple], args, *, name: str, title: str,
                       command: str, quick_grids: dict | None = None, metric: str = "accuracy",
                       trained: tuple[str, dict] = TRAINED, budgets: list[float] | None = None) -> pd.DataFrame | None:
    """The protocol on ``args.splits`` splits (``split(seed)``: {train, valid, test: rows}, e.g. ``random_split`` or
    ``query_split``): every run's points (``split_frontiers``, with ``metric`` and ``trained``) in each, then
    ``out/name.csv`` (every point, with its split), ``.png`` (split 0's test figures) and ``.md`` (per run and
    budget, the mean test quality over the splits with its 95% interval: ``interval_table``). With ``args.only``
    (labels), only those runs and plain LightGBM run; every other run's points are ``out/name.csv``'s
    (``earlier_points``, ``merged``). Each split's points are saved as it ends (``out/.name.splitK.KEY.csv``, KEY
    ``split_key``'s; removed with the report written), and each run's within it as the run ends (``run_file``;
    removed with the split's saved); ``args.resume`` reads a split's (or a run's) back instead of running it
    again; ``args.split`` runs (or reads) that split only and writes no report. ``budgets``: the same mean costs per
    row in every split instead of ``BUDGET_FRACTIONS`` of plain LightGBM's. Returns every point (without the
    models; None with ``args.split``)."""
    if args.split is not None and not 0 <= args.split < args.splits:
        raise CEGBError(f"--split should be a split of --splits {args.splits} (0 to {args.splits - 1}), got "
                        f"{args.split}")
    args.out.mkdir(parents=True, exist_ok=True)
    unknown = [label for label in args.skip if label not in [run[0] for run in runs]]
    if unknown or plain_run(runs)[0] in args.skip or set(args.skip) & set(args.only):
        raise CEGBError(f"--skip should name runs of this command other than plain LightGBM and --only's, got "
                        f"{', '.join(map(repr, args.skip))}")
    runs = [run for run in runs if run[0] not in args.skip]
    workflow = WORKFLOW if args.workflow else None
    order, rounds = [run[0] for run in runs] + [trained[0]] + [workflow] * args.workflow, args.method_rounds
    plain = plain_run(runs)
    if args.only:
        earlier = earlier_points(args.out / f"{name}.csv", order, args)
        earlier = earlier[~earlier["method"].isin(args.skip)]
        rerun = {run[1] for run in runs if run[0] in args.only} | {"lightgbm"}
        rounds = earlier_rounds(args.out / f"{name}.md", args, rerun)
        runs = [run for run in runs if run is plain or run[0] in args.only]
        trained = trained if trained[0] in args.only else None
        workflow = workflow if workflow in args.only else None
    fixed, budgets, frames, rows, saved = budgets, [], [], {}, []
    for seed in range(args.splits) if args.split is None else [args.split]:
        print(f"split {seed + 1} of {args.splits} (seed {seed})", flush=True)
        parts = split(seed)
        for k, v in parts.items():
            rows.setdefault(k, []).append(len(v[1]))
        key = split_key(parts, runs, trained, args, metric, quick_grids, workflow)
        saved.append(args.out / f".{name}.split{seed}.{key}.csv")
        if args.resume and saved[-1].is_file():
            print(f"resumed from {saved[-1]}", flush=True)
        else:
            frame, _ = split_frontiers(parts, costs, task, runs, args, quick_grids, metric=metric, trained=trained,
                                       workflow=workflow, budgets=fixed, saved=saved[-1])
            points = frame.assign(split=seed)
            write_atomically(saved[-1], lambda tmp: points.to_csv(tmp, index=False))  # noqa: B023
        for i in range(len(runs) + 2):  # the split's file holds them (also where a kill came between the two)
            run_file(saved[-1], i).unlink(missing_ok=True)
        frames.append(pd.read_csv(saved[-1]))  # as the CSV holds them, whether run now or resumed
        plain_cost = frames[-1].loc[frames[-1]["method"] == plain[0], "cost"].max()
        budgets.append([*(budgets_of(plain_cost) if fixed is None else fixed), float("inf")])
    if args.split is not None:
        print(f"--split {args.split} (seed {args.split}) saved in {saved[-1]}; the report: this command with --resume, "
              "without --split, once every split is saved")
        return None
    attrs = {"greater_is_better": get_metric(metric, task).greater_is_better}
    every = pd.concat(frames, ignore_index=True)
    if args.only:
        every = merged(every, earlier, order, plain[0])
    results = []
    for seed in range(args.splits):
        points = every[every["split"] == seed]
        points.attrs = attrs
        results += [{**row, "split": seed} for row in best_within(points, budgets[seed])]
    labels = [f"{f:g} x plain" for f in BUDGET_FRACTIONS] if fixed is None else [f"<= {b:g}" for b in fixed]
    labels.append("any cost")
    lines = interval_table(pd.DataFrame(results), labels, args.splits, greater=attrs["greater_is_better"])
    print("\n".join(lines))
    shapes = "; ".join(f"{k}: {min(rows[k])}{'' if min(rows[k]) == max(rows[k]) else f'-{max(rows[k])}'} rows"
                       + (f", {len(v[2])} queries" if len(v) > 2 else "") for k, v in parts.items())
    quality = metric.upper() if metric.startswith(("ap@", "ndcg@", "p@")) else metric
    report = [f"## {title}", "",
              f"`{command} --splits {args.splits}{' --quick' if args.quick else ''}{' --workflow' * args.workflow}"
              f"{f' --rounds {args.rounds}' if args.rounds != ROUNDS and '--rounds' not in command.split() else ''}"
              f"{''.join(f' --method-rounds {m}={r}' for m, r in rounds)}`; "
              f"{parts['train'][0].shape[1]} features; "
              f"{shapes}; {args.splits} random splits. Cells: the mean over the splits of the test {quality} of the "
              "model chosen on validation within the budget ("
              + ("fractions of plain LightGBM's validation cost in each split" if fixed is None else
                 "a mean validation cost per row") +
              "), ± the half-width of its 95% interval, @ its mean test cost per row; bold: the best mean, "
              "where its interval separates from the runner-up's."
              + (f" Left out (--skip): {', '.join(args.skip)}." if args.skip else ""), "", *lines, "",
              *report_frontier(every, args.out, name, f"{title}: validation Pareto points on test rows (split 0)",
                               quality, plotted=every[every["split"] == 0])]
    write_atomically(args.out / f"{name}.md", lambda tmp: Path(tmp).write_text("\n".join(report) + "\n"))
    print(f"report: {args.out / f'{name}.md'}")
    for path in saved:
        path.unlink(missing_ok=True)
    return every
