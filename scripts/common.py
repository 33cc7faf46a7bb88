"""Helpers shared by the scripts: where the shared data lies, atomic writes, timing, and the report of a
frontier (CSV of every point, PNG of the test figures, markdown table of the best model within budgets)."""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np
import pandas as pd

from lightgbm_cegb.core.costs import FeatureCosts
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.datasets import letter, mslr_subset
from lightgbm_cegb.io.atomic import write_atomically  # noqa: F401 (the scripts' writer)
from lightgbm_cegb.selection import pareto, train_to_budget

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def timing_parser(doc: str) -> argparse.ArgumentParser:
    """The speed benchmarks' command line: --rows (HIGGS events drawn) and --repeat (best of)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    return parser


def higgs_rows(rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the bundled HIGGS training rows and labels, ``rows`` events drawn with replacement from the training
    and test rows, seed 0)."""
    from lightgbm_cegb.datasets import higgs

    X_train, y_train = higgs("train")
    pool = np.vstack([X_train, higgs("test")[0]])
    return X_train, y_train, pool[np.random.default_rng(0).integers(0, len(pool), rows)]


def best_of(repeat: int, run) -> tuple[float, object]:
    """(the shortest wall time of ``repeat`` calls of run(), its last result)."""
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = run()
        times.append(time.perf_counter() - start)
    return min(times), out


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


def budget_table(frame: pd.DataFrame, budgets: list[float]) -> list[str]:
    """Markdown rows: per method, the test figures of its best validation point within each budget (on the
    validation cost, as select() chooses), and its best at any cost. ``frame``: a sweep with test_* columns."""
    lines = ["| method | " + " | ".join(f"budget {b:.4g}" for b in budgets) + " | best (any cost) |",
             "|---|" + "---|" * (len(budgets) + 1)]
    for method, points in frame.groupby("method", sort=False):
        points = points.copy()
        points.attrs = dict(frame.attrs)
        cells = []
        for budget in [*budgets, float("inf")]:
            within = points[points["cost"] <= budget]
            if len(within) == 0:
                cells.append("-")
                continue
            best = pareto(within).iloc[-1]
            cells.append(f"{best['test_quality']:.4f} at {best['test_cost']:.4g}")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return lines


def report_frontier(frame: pd.DataFrame, out: Path, name: str, title: str, metric: str) -> list[str]:
    """Write ``out/name.csv`` (every point, validation and test figures) and ``out/name.png`` (each method's
    validation Pareto points at their test figures); return the PNG's markdown line (none without matplotlib)."""
    table = frame.drop(columns=["model"]).assign(params=frame["params"].map(repr))
    write_atomically(out / f"{name}.csv", lambda tmp: table.to_csv(tmp, index=False))
    plt = pyplot()
    if plt is None:
        return []
    from lightgbm_cegb.selection.plots import plot_frontiers

    test = frame.assign(cost=frame["test_cost"], quality=frame["test_quality"])
    ax = plot_frontiers(test, pareto_only=False, xlabel="mean cost per test row", title=title)
    ax.set_ylabel(f"test {metric}")
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
