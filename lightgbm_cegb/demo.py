"""Demo: the budget workflow on the bundled HIGGS subset: the best model within a few budgets, what each event
pays, and the choice saved and served lazily.

The cost story. HIGGS rows describe collision events. Its first 21 features are low-level detector
measurements (momenta, angles, b-tags of the lepton and jets, missing energy), available as soon as the
event is read: cost 1 each. The last 7 are high-level invariant masses (m_jj, m_jjj, m_lv, m_jlv, m_bb,
m_wbb, m_wwbb) that physicists derive from the low-level ones by reconstructing the decay chain (pairing
jets with partons, solving for the neutrino momentum): cost 10 each, paid per event that needs one. The
costs are illustrative; the structure (a few expensive, highly informative derived features) is the
common case this package is for.

The 7,000 bundled training events are split 5,000 / 2,000 (training, validation; seeded); the 500 held-out
events are the test rows. Plain LightGBM on every feature gives the reference cost; then
``fit_within_budget`` (every default method, the cheap-subset baseline among them) answers each budget, a
fraction of plain LightGBM's mean validation cost, from one sweep. Beside each choice: CEGB's and the cheap
subset's best points within the same budget from that sweep. Costs are exact (``prediction_cost``: each feature
paid once per event that reads it); "high-level" is the mean over the 7 expensive features of the share of test
events that buy it. Finally the choice at the middle budget is saved, loaded and served by ``LazyPredictor``,
which fetches each feature only for the events that need it.

Run: ``make demo`` (or ``.venv/bin/python -m lightgbm_cegb.demo --help``); ``--plot demo.png`` also draws the
figure (test AUC against mean cost per event; the README's figure).
"""

from __future__ import annotations

import argparse
import tempfile
import warnings
from pathlib import Path

import lightgbm as lgb
import numpy as np
from sklearn.metrics import roc_auc_score

from lightgbm_cegb.accounting import prediction_cost
from lightgbm_cegb.datasets import HIGGS_COSTS, NUM_HIGH_LEVEL, NUM_LOW_LEVEL, higgs
from lightgbm_cegb.io.atomic import write_atomically
from lightgbm_cegb.selection import Selection, best_point, evaluate, fit_within_budget
from lightgbm_cegb.serving import LazyPredictor

#: the methods whose best point within each budget the table shows beside the choice
COMPARED = ("cegb", "cheap_subset")


def _row(kind: str, name: str, valid_auc: float, test_auc: float, report, budget: float | None = None) -> dict:
    per_event = report.per_instance
    return {"kind": kind, "budget": budget, "model": name, "valid_auc": valid_auc, "auc": test_auc,
            "cost": float(per_event.mean()),
            "p90": float(np.quantile(per_event, 0.9)), "high_level": float(report.usage[NUM_LOW_LEVEL:].mean())}


def run(fractions: list[float], methods: list[str] | None, seed: int) -> tuple[list[dict], dict]:
    """The table's rows (plain LightGBM, then per budget the choice, CEGB's and the cheap subset's best points) and
    what serving the middle budget's choice lazily fetched."""
    X, y = higgs("train")
    X_test, y_test = higgs("test")
    order = np.random.default_rng(seed).permutation(len(y))
    train, valid, test = (X[order[:5000]], y[order[:5000]]), (X[order[5000:]], y[order[5000:]]), (X_test, y_test)
    params = {"objective": "binary", "verbose": -1, "seed": seed, "deterministic": True}
    data = lgb.Dataset(*train)
    plain = lgb.train(params, data, 5000, valid_sets=[lgb.Dataset(*valid, reference=data)],
                      callbacks=[lgb.early_stopping(20, verbose=False)])
    rows = [_row("plain", "LightGBM, every feature", roc_auc_score(valid[1], plain.predict(valid[0])),
                 roc_auc_score(y_test, plain.predict(X_test)), prediction_cost(plain, X_test, HIGGS_COSTS))]
    full = float(prediction_cost(plain, valid[0], HIGGS_COSTS).mean)
    budgets = [round(f * full, 2) for f in fractions]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a method's round cap or a budget gap: the table shows what it reached
        choices = fit_within_budget(train, valid, HIGGS_COSTS, budgets, task="binary", metric="auc", test=test,
                                    methods=methods, progress=False)
    frontier = choices[0].frontier
    frame = evaluate(frontier[frontier["method"].isin(COMPARED)], test)  # the points compared with the choices only
    for budget, chosen in zip(budgets, choices):
        rows.append(_row("choice", f"within {budget:g}: {chosen.method}", chosen.valid_quality,
                         chosen.test_quality, chosen.prediction_cost(X_test), budget))
        for method in COMPARED:
            point = best_point(frame[frame["method"] == method], budget)
            if point is not None and method != chosen.method:
                rows.append(_row(method, f"  {method} within {budget:g}", point["quality"], point["test_quality"],
                                 point["model"].cost(X_test), budget))
    chosen = choices[len(choices) // 2]
    with tempfile.TemporaryDirectory() as folder:
        chosen.save(Path(folder) / "choice")
        kept = Selection.load(Path(folder) / "choice")
    fetched = []

    def fetch(column, ids):
        fetched.append(len(ids))
        return X_test[ids, column]

    result = LazyPredictor(kept, fetch, feature_keys="index").acquire(np.full(X_test.shape, np.nan))  # none known
    served = result.prediction if result.prediction.ndim == 1 else result.prediction[:, 1]
    expected = chosen.model.predict(X_test) if not hasattr(chosen.model, "predict_proba") else \
        chosen.model.predict_proba(X_test)[:, 1]
    serving = {"budget": budgets[len(choices) // 2], "method": chosen.method, "values": int(sum(fetched)),
               "calls": len(fetched), "every": int(X_test.size), "equal": bool(np.array_equal(served, expected)),
               "cost": float(result.per_instance.mean())}
    return rows, serving


def plot(rows: list[dict], path: str) -> None:
    """Test AUC against mean cost per event, one point per row of the table (the budgets dotted), written atomically to
    ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.8), layout="constrained")
    styles = {"plain": ("s", "C3", 7, "plain LightGBM"), "choice": ("*", "C0", 13, "fit_within_budget's choice"),
              "cegb": ("o", "C2", 7, "CEGB's best"), "cheap_subset": ("^", "C1", 7, "cheap subset's best")}
    shown = set()
    for budget in sorted({r["budget"] for r in rows if r["budget"] is not None}):
        ax.axvline(budget, color="0.6", linestyle=":", linewidth=1)
    for r in sorted(rows, key=lambda r: r["kind"] == "choice"):  # the choices on top
        marker, color, size, label = styles[r["kind"]]
        ax.plot(r["cost"], r["auc"], marker, color=color, markersize=size, label=None if r["kind"] in shown else label)
        shown.add(r["kind"])
    ax.set_xlim(0, 1.1 * max(r["cost"] for r in rows))
    ax.margins(y=0.12)
    ax.set(xlabel="mean feature cost per test event", ylabel="test AUC",
           title="HIGGS subset: the best model within each budget")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    suffix = path.rsplit(".", 1)[-1] if "." in path else "png"
    write_atomically(path, lambda out: fig.savefig(out, format=suffix, dpi=120))
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.1, 0.25, 0.5],
                        help="budgets as fractions of plain LightGBM's mean validation cost (default: %(default)s)")
    parser.add_argument("--methods", nargs="+", metavar="METHOD",
                        help="the methods fit_within_budget chooses among, beside the cheap-subset baseline "
                             "(default: its defaults for a binary task)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", metavar="PATH", help="also write the figure (needs matplotlib: the 'plot' extra)")
    args = parser.parse_args(argv)
    rows, serving = run(args.fractions, args.methods, args.seed)
    print("HIGGS subset: 5,000 training / 2,000 validation / 500 test events.")
    print(f"Feature costs: {NUM_LOW_LEVEL} low-level x 1, {NUM_HIGH_LEVEL} high-level x 10 "
          f"(all features for one event: {HIGGS_COSTS.lazy.sum():g}).\n")
    header = (f"{'model':<40} {'valid AUC':>9} {'test AUC':>8} {'mean cost':>9} {'90% of events <=':>16} "
              f"{'high-level':>10}")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['model']:<40} {r['valid_auc']:>9.4f} {r['auc']:>8.4f} {r['cost']:>9.2f} {r['p90']:>16.2f} "
              f"{r['high_level']:>10.1%}")
    print("\nmean cost: per test event, exact; high-level: the mean over the 7 expensive features of the share of test "
          "events that buy it.")
    print(f"Served lazily (the choice within {serving['budget']:g}, {serving['method']}, saved and loaded): "
          f"{serving['values']:,} of the {serving['every']:,} test values fetched in {serving['calls']} calls, "
          f"{serving['cost']:.2f} per event; predictions {'equal to' if serving['equal'] else 'DIFFERENT from'} "
          "the model's own.")
    if args.plot:
        plot(rows, args.plot)
        print(f"figure written to {args.plot}")


if __name__ == "__main__":
    main()
