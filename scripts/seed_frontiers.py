#!/usr/bin/env python3
"""Accuracy-cost frontiers of the seed methods the package has: CEGB, BudgetRF and Early Exit.

    .venv/bin/python scripts/seed_frontiers.py --data higgs|letter|mslr [--quick] [--out DIR]

Every point is measured on test rows: quality (accuracy; NDCG@5 on MSLR) and the exact mean feature cost
per row (prediction_cost; Early Exit: only the trees each row went through).
- CEGB: LightGBM with cegb_tradeoff swept, the iteration chosen by early stopping on validation rows.
- BudgetRF: one forest per alpha, each prefix of its trees a point (the budget the paper sweeps).
- Early Exit: a plain LightGBM model with exits every 10 iterations, its threshold swept.
Data: higgs is the bundled subset (demo costs: 21 low-level features 1, 7 high-level 10); letter (unit costs,
10,000 / 3,000 / 7,000 rows) and mslr (the MSLR-WEB subset, its 136-feature cost vector; BudgetRF on
label >= 1) come from ../shared/data (see its MANIFEST.md). Writes DIR/seed_frontiers_<data>.csv and, with
matplotlib, a PNG. --quick: small sweeps (the test runs it on higgs).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import lightgbm as lgb
import numpy as np
from sklearn.datasets import load_svmlight_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from budget_prune_frontier import DATA, pyplot, write_atomically, write_table  # noqa: E402
from budget_prune_frontier import load as load_split  # noqa: E402

from lightgbm_cegb import BudgetRFClassifier, EarlyExit, FeatureCosts, prediction_cost  # noqa: E402
from lightgbm_cegb.demo import HIGGS_COSTS, load_higgs  # noqa: E402
from lightgbm_cegb.metrics import ndcg_at_k  # noqa: E402


# cegb_tradeoff sweeps: the penalty is tradeoff x cost x rows, so the useful range shrinks as costs grow
# (MSLR's rows cost about 1,000 with every feature, HIGGS's 91, letter's 16); past it, no split pays
TRADEOFFS = {"higgs": [0.0, 3e-4, 1e-3, 2e-3, 3e-3, 5e-3], "letter": [0.0, 0.01, 0.03, 0.1, 0.3, 1.0],
             "mslr": [0.0, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3]}


def load(name: str) -> dict:
    """train / valid / test rows, labels, query sizes (ranking) and the costs."""
    if name == "higgs":
        X, y = load_higgs("train")
        X_test, y_test = load_higgs("test")
        return {"train": (X[:5500], y[:5500], None), "valid": (X[5500:], y[5500:], None),
                "test": (X_test, y_test, None), "costs": HIGGS_COSTS.lazy, "kind": "binary"}
    if name == "letter":
        (X, y), (X_valid, y_valid), (X_test, y_test), costs = load_split("letter")
        classes = {c: i for i, c in enumerate(sorted(set(y)))}
        codes = [np.array([classes[c] for c in labels]) for labels in (y, y_valid, y_test)]
        return {"train": (X, codes[0], None), "valid": (X_valid, codes[1], None), "test": (X_test, codes[2], None),
                "costs": costs, "kind": "multiclass"}
    folder = DATA / "mslr_subset"
    parts = {}
    for split, file in (("train", "train"), ("test", "test")):
        X, y, qid = load_svmlight_file(str(folder / f"msn1.fold1.{file}.5k.txt.gz"), n_features=136, query_id=True)
        parts[split] = (X.toarray(), y, qid)
    X, y, qid = parts["train"]
    queries = np.unique(qid)
    valid = np.isin(qid, queries[: len(queries) // 3])  # a third of the training queries validate
    sizes = lambda q: np.unique(q, return_counts=True)[1][np.argsort(np.unique(q, return_index=True)[1])]  # noqa: E731
    costs = FeatureCosts.from_file(folder / "feature_cost.txt", num_features=136).arrays(136)[0]
    X_test, y_test, qid_test = parts["test"]
    return {"train": (X[~valid], y[~valid], sizes(qid[~valid])), "valid": (X[valid], y[valid], sizes(qid[valid])),
            "test": (X_test, y_test, sizes(qid_test)), "costs": costs, "kind": "rank"}


def quality(kind: str, y, score, group) -> float:
    """Accuracy from class probabilities, or NDCG@5 (gain 2^y - 1, as LightGBM's)."""
    if kind == "binary":
        return float(np.mean((score > 0.5) == y))
    if kind == "multiclass":
        return float(np.mean(np.argmax(score, axis=1) == y))
    return ndcg_at_k(y, score, group, k=5)


def lightgbm_params(kind: str, num_class: int) -> dict:
    params = {"num_leaves": 31, "learning_rate": 0.1, "verbose": -1, "seed": 0, "deterministic": True,
              "min_data_in_leaf": 20}
    if kind == "binary":
        return {**params, "objective": "binary"}
    if kind == "multiclass":
        return {**params, "objective": "multiclass", "num_class": num_class}
    return {**params, "objective": "lambdarank", "eval_at": [5]}


def run(name: str, quick: bool) -> list[dict]:
    data = load(name)
    kind, costs = data["kind"], FeatureCosts(lazy=data["costs"])
    (X, y, g), (Xv, yv, gv), (Xt, yt, gt) = data["train"], data["valid"], data["test"]
    num_class = int(max(y.max(), yt.max())) + 1
    rounds = 40 if quick else 200
    rows = []

    def point(method, setting, score, report):
        rows.append({"data": name, "method": method, "setting": setting, "quality": quality(kind, yt, score, gt),
                     "cost": report.mean})

    tradeoffs = [0.0, 0.01] if quick else TRADEOFFS[name]
    for tradeoff in tradeoffs:
        params = {**lightgbm_params(kind, num_class), **costs.to_params(tradeoff=tradeoff)}
        booster = lgb.train(params, lgb.Dataset(X, y, group=g), rounds,
                            valid_sets=[lgb.Dataset(Xv, yv, group=gv)],
                            callbacks=[lgb.early_stopping(20, verbose=False)])
        point("CEGB", f"tradeoff={tradeoff:g}", booster.predict(Xt), prediction_cost(booster, Xt, costs))
        if tradeoff == 0.0:
            plain = booster
    for threshold in ([0.9] if quick else ([0.5, 1.0, 2.0, 4.0] if kind == "rank" else [0.6, 0.8, 0.9, 0.95, 0.99])):
        result = EarlyExit(plain, threshold, every=10, costs=costs).predict(Xt, group=gt)
        score = -result.rank if kind == "rank" else result.prediction
        point("Early Exit", f"threshold={threshold:g}", score, result.cost)
    labels = (y >= 1).astype(int) if kind == "rank" else y
    for alpha in ([2.0] if quick else [0.0, 2.0, 8.0]):
        forest = BudgetRFClassifier(costs=costs, n_estimators=5 if quick else 30, alpha=alpha, max_depth=None,
                                    random_state=0).fit(X, labels)
        for k, proba in enumerate(forest.staged_predict_proba(Xt), start=1):
            if k in (1, 2, 3, 5, 10, 20, 30):
                score = proba[:, 1] if kind != "multiclass" else proba
                if kind == "rank":
                    score = forest.ranking_score(Xt, n_trees=k)
                point("BudgetRF", f"alpha={alpha:g} trees={k}", score,
                      prediction_cost(forest, Xt, num_iteration=k))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", choices=("higgs", "letter", "mslr"), default="higgs")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    rows = run(args.data, args.quick)
    args.out.mkdir(parents=True, exist_ok=True)
    table = args.out / f"seed_frontiers_{args.data}.csv"
    write_table(table, rows)
    metric = "NDCG@5" if args.data == "mslr" else "accuracy"
    for row in rows:
        print(f"{row['method']:<10} {row['setting']:<22} {metric} {row['quality']:.4f}  cost {row['cost']:9.2f}")
    print(f"table: {table}")
    plt = pyplot()
    if plt is None:
        return
    figure, axes = plt.subplots(figsize=(6, 4))
    for method, style in (("CEGB", "o-"), ("BudgetRF", "s"), ("Early Exit", "^-")):
        points = sorted((r["cost"], r["quality"]) for r in rows if r["method"] == method)
        axes.plot([p[0] for p in points], [p[1] for p in points], style, label=method)
    axes.set_xlabel("mean feature cost per test row")
    axes.set_ylabel(f"test {metric}")
    axes.set_title(f"Seed methods on {args.data}")
    axes.legend()
    figure.tight_layout()
    picture = args.out / f"seed_frontiers_{args.data}.png"
    write_atomically(picture, lambda tmp: figure.savefig(tmp, format="png", dpi=120))
    print(f"plot: {picture}")


if __name__ == "__main__":
    main()
