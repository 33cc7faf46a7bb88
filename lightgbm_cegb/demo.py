"""Demo: plain LightGBM against cost-efficient gradient boosting on HIGGS (bundled subset).

The cost story. HIGGS rows describe collision events. Its first 21 features are low-level detector
measurements (momenta, angles, b-tags of the lepton and jets, missing energy), available as soon as the
event is read: cost 1 each. The last 7 are high-level invariant masses (m_jj, m_jjj, m_lv, m_jlv, m_bb,
m_wbb, m_wwbb) that physicists derive from the low-level ones by reconstructing the decay chain (pairing
jets with partons, solving for the neutrino momentum): cost 10 each, paid per event that needs one. The
costs are illustrative; the structure (a few expensive, highly informative derived features) is the
common case CEGB is for.

Each model is trained on 7,000 events and scored on 500 held-out events; the cost column is the mean
per-event acquisition cost from ``lightgbm_cegb.prediction_cost`` (each feature paid once per event).

Run: ``make demo`` (or ``.venv/bin/python -m lightgbm_cegb.demo --help``); ``--plot demo.png`` also draws the
table as a figure (test AUC against mean cost; the README's figure).
"""

from __future__ import annotations

import argparse

import lightgbm as lgb
import numpy as np
from sklearn.metrics import roc_auc_score

from lightgbm_cegb.accounting import prediction_cost
from lightgbm_cegb.datasets import HIGGS_COSTS, NUM_HIGH_LEVEL, NUM_LOW_LEVEL, higgs
from lightgbm_cegb.io.atomic import write_atomically


def run(tradeoffs: list[float], rounds: int, seed: int) -> list[dict]:
    X_train, y_train = higgs("train")
    X_test, y_test = higgs("test")
    base = {"objective": "binary", "num_leaves": 31, "learning_rate": 0.1, "min_data_in_leaf": 20,
            "seed": seed, "deterministic": True, "force_row_wise": True, "verbose": -1}
    settings = [("LightGBM", None)] + [(f"CEGB tradeoff={t:g}", t) for t in tradeoffs]
    rows = []
    for name, tradeoff in settings:
        params = dict(base)
        if tradeoff is not None:
            params.update(HIGGS_COSTS.to_params(tradeoff=tradeoff))
        booster = lgb.train(params, lgb.Dataset(X_train, y_train), num_boost_round=rounds)
        prob = booster.predict(X_test)
        report = prediction_cost(booster, X_test, HIGGS_COSTS)
        rows.append({
            "model": name,
            "auc": roc_auc_score(y_test, prob),
            "accuracy": float(np.mean((prob > 0.5) == y_test)),
            "cost": report.mean,
            "high_level_share": float(report.usage[NUM_LOW_LEVEL:].mean()),
        })
    return rows


def plot(rows: list[dict], path: str) -> None:
    """Test AUC against mean cost per event, one point per model, written atomically to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6), layout="constrained")
    cegb = [r for r in rows if r["model"] != "LightGBM"]
    ax.plot([r["cost"] for r in cegb], [r["auc"] for r in cegb], "o-", color="C0", label="CEGB")
    for r in cegb:
        ax.annotate(r["model"].replace("CEGB ", ""), (r["cost"], r["auc"]), textcoords="offset points",
                    xytext=(6, -12), fontsize=8)
    for r in rows:
        if r["model"] == "LightGBM":
            ax.plot(r["cost"], r["auc"], "s", color="C3", label="LightGBM")
    ax.set_xlim(0, 1.15 * max(r["cost"] for r in rows))
    ax.margins(y=0.12)
    ax.set(xlabel="mean feature cost per test event", ylabel="test AUC",
           title="HIGGS subset: accuracy against prediction cost")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    suffix = path.rsplit(".", 1)[-1] if "." in path else "png"
    write_atomically(path, lambda out: fig.savefig(out, format=suffix, dpi=120))
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tradeoffs", type=float, nargs="+", default=[0.001, 0.003, 0.01],
                        help="cegb_tradeoff values to train (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=100, help="boosting rounds (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", metavar="PATH", help="also write the figure (needs matplotlib: the 'plot' extra)")
    args = parser.parse_args(argv)
    rows = run(args.tradeoffs, args.rounds, args.seed)
    print(f"HIGGS subset: 7,000 training / 500 test events, {args.rounds} rounds, 31 leaves.")
    print(f"Feature costs: {NUM_LOW_LEVEL} low-level x 1, {NUM_HIGH_LEVEL} high-level x 10 "
          f"(all features for one event: {HIGGS_COSTS.lazy.sum():g}).\n")
    header = f"{'model':<22} {'test AUC':>8} {'accuracy':>8} {'mean cost / event':>18} {'high-level use':>15}"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['model']:<22} {r['auc']:>8.4f} {r['accuracy']:>8.4f} {r['cost']:>18.2f} "
              f"{r['high_level_share']:>14.1%}")
    print("\nhigh-level use: mean over the 7 expensive features of the share of test events that buy it.")
    if args.plot:
        plot(rows, args.plot)
        print(f"figure written to {args.plot}")


if __name__ == "__main__":
    main()
