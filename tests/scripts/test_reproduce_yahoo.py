"""scripts/reproduce_yahoo.py runs end to end in CI under the one protocol (two query-wise random splits): on the
synthetic Yahoo-shaped stand-in (written as 1-based SVMlight files with the real cost vector and read back by
load_svmlight) and on the bundled MSLR subset; its query-wise splits keep every query whole and deal out the
parts' numbers of queries."""

from __future__ import annotations

import subprocess

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT
from references import run_script, script
from scipy import sparse

from scripts.protocol import query_split
from scripts.reproduce_yahoo import synthetic

TRAINED = "CEGB deep trained to the budget"


@pytest.mark.long
@pytest.mark.parametrize("data", ["synthetic", "mslr"])
def test_reproduce_yahoo_quick(tmp_path, data):
    # every default method but the cheap subset, whose search fits a model per unit of the stand-in's 519 first
    # (minutes here; its runs are tested with the protocol's other scripts)
    run_script("reproduce_yahoo", "--data", data, "--quick", "--queries", "60", "--splits", "2", "--rounds", "100",
               "--methods", "lightgbm,cegb,budget_prune,early_exit,budgetrf,greedy_miser,staged_acquisition_ranker",
               "--out", str(tmp_path))
    forest, staged = "BudgetPrune (random forest)", {"Staged acquisition ranker"}
    for setting, methods in (("i", {"LightGBM", "BudgetPrune", forest, "Early Exit", "CEGB 16 leaves, depth 4",
                                    "CEGB deep", "CEGB deep, breadth-first", "Greedy Miser", TRAINED, *staged}),
                             ("ii", {"LightGBM", "BudgetPrune", forest, "Early Exit", "CEGB", "BudgetRF",
                                     "Greedy Miser", TRAINED, *staged})):
        name = f"yahoo_{data}-60q_{setting}" if data == "synthetic" else f"yahoo_{data}_{setting}"  # not 300 queries
        frame = pd.read_csv(tmp_path / f"{name}.csv")
        assert set(frame["method"]) == methods and set(frame["split"]) == {0, 1}
        for _, points in frame.groupby("split"):
            assert methods - {TRAINED} <= set(points["method"])
        assert frame["test_quality"].between(0, 1).all() and (frame["test_cost"] >= 0).all()
        assert (tmp_path / f"{name}.png").stat().st_size > 1000
        report = (tmp_path / f"{name}.md").read_text()
        assert "| method | 0.1 x plain | 0.25 x plain | 0.5 x plain | any cost |" in report
        assert f"--settings {setting} --rounds 100 --splits 2 --quick`" in report and " ± " in report
        assert "test AP@5" in report and "queries" in report
        plain = frame[frame["method"] == "LightGBM"].groupby("split")["cost"].max()
        cegb = frame[frame["method"].str.startswith("CEGB") & (frame["method"] != TRAINED)]
        assert (cegb.groupby("split")["cost"].min() < plain).all()  # the trade-off buys cost on validation
        trained = frame[frame["method"] == TRAINED]
        assert all(row["cost"] <= 0.5 * plain[row["split"]] + 1e-9 for _, row in trained.iterrows())


@pytest.mark.parametrize("sparse_X", [False, True])
def test_query_split_deals_whole_queries(sparse_X):
    """Every query lands in exactly one part, whole and in its row order, each part gets its own number of
    queries, the labels follow their rows, and two seeds split differently."""
    rng = np.random.default_rng(0)
    sizes = {"train": rng.integers(1, 9, 12), "valid": rng.integers(1, 9, 5), "test": rng.integers(1, 9, 7)}
    parts, first = {}, 0
    for name, group in sizes.items():
        n = int(group.sum())
        ids = np.arange(first, first + n, dtype=np.float64)  # a row's id in column 0, its query in column 1
        query = np.repeat(np.arange(len(group)) + 100 * len(parts), group).astype(np.float64)
        X = np.column_stack([ids, query])
        parts[name] = (sparse.csr_matrix(X) if sparse_X else X, ids * 2, group)
        first += n
    splits = [query_split(parts, seed) for seed in (0, 1)]
    for split in splits:
        seen = []
        for name in ("train", "valid", "test"):
            X, y, group = split[name]
            X = X.toarray() if sparse_X else X
            assert len(group) == len(sizes[name]) and group.sum() == len(y) == X.shape[0]
            np.testing.assert_array_equal(y, X[:, 0] * 2)
            for rows in np.split(np.arange(len(y)), np.cumsum(group)[:-1]):
                assert len(set(X[rows, 1])) == 1 and np.all(np.diff(X[rows, 0]) == 1)  # one query, in order
                seen.append(X[rows[0], 1])
        assert sorted(seen) == sorted(set(seen)) and len(seen) == sum(len(g) for g in sizes.values())
    assert not np.array_equal(splits[0]["train"][1], splits[1]["train"][1])


def test_the_stand_in_puts_the_signal_in_the_expensive_or_the_cheap_features(tmp_path):
    """--signal: the mean absolute correlation of a feature with the labels grows with its cost ("expensive",
    the paper's assumption) or shrinks with it ("cheap")."""

    from lightgbm_cegb.datasets import load_svmlight, yahoo_costs

    costs = yahoo_costs()
    by_cost = {}
    for signal_in in ("expensive", "cheap"):
        (tmp_path / signal_in).mkdir()
        data = load_svmlight(synthetic(tmp_path / signal_in, 200, signal_in=signal_in)["train"], costs)
        X, y = np.nan_to_num(data.X.toarray() if hasattr(data.X, "toarray") else np.asarray(data.X, float)), data.y
        varied = X.std(axis=0) > 0
        corr = np.zeros(X.shape[1])
        corr[varied] = np.abs([np.corrcoef(X[:, j], y)[0, 1] for j in np.flatnonzero(varied)])
        lazy = costs.lazy[:X.shape[1]]
        by_cost[signal_in] = (corr[(lazy <= 5) & varied].mean(), corr[(lazy >= 100) & (lazy < 10000) & varied].mean())
    assert by_cost["expensive"][1] > 1.5 * by_cost["expensive"][0]
    assert by_cost["cheap"][0] > 1.5 * by_cost["cheap"][1]


def test_a_bad_setting_is_refused_before_any_run():
    proc = subprocess.run([*script("reproduce_yahoo"), "--settings", "i,iii"], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert proc.returncode == 2 and "--settings takes i and/or ii (comma-separated), got 'i,iii'" in proc.stderr
