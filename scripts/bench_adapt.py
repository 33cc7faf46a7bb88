"""Speed of ADAPT-GBRT's composite (one Cython pass: the gate, then f1 or f0) against predicting with the
three models it is made of.

    .venv/bin/python -m scripts.bench_adapt [--rows 100000] [--repeat 3]

Data: the bundled HIGGS events with the demo's costs, drawn with replacement up to --rows. f0: LightGBM,
100 rounds of 31 leaves; the composite: AdaptGBRT(p_full=0.3, tradeoff=3, 3 rounds of 30 trees). Timed in
this process, best of --repeat:
- baseline: ``gate.predict(X, raw_score=True) + f1.predict(X) + f0.predict(X)`` on every row (what a
  composite without its own router would run);
- ``route``: the composite's routing (gate score, the chosen model's trees, per-row cost state);
- ``prediction_cost``: routing and the exact cost, f0's trees walked for the rows sent to it;
- ``predict_proba``: routing, f1's scores, f0's ``predict`` on its rows.
The issue's bar: routing and cost at most as slow as the baseline (ratio <= 1).

``--fit ROUNDS,TREES`` (the authors' schedule: 50,100) times instead ``AdaptGBRT.fit`` (tradeoff 0, one thread)
on the bundled HIGGS training rows (binary) and on the first 10,000 rows of letter (26 classes), against plain
LightGBM growing the same trees alone: f1's (ROUNDS + 1) x TREES iterations and g's ROUNDS x TREES, of the
same shape (``miser_params``). The ratio is what the rounds cost beyond growing the trees.
"""

from __future__ import annotations

import lightgbm as lgb
import numpy as np

from lightgbm_cegb import AdaptGBRT, prediction_cost
from lightgbm_cegb.datasets import HIGGS_COSTS
from scripts.timing import best_of, higgs_rows, timing_parser


def fit_ratio(rounds: int, trees: int, repeat: int) -> None:
    """``--fit``: AdaptGBRT.fit against growing its trees with plain LightGBM."""
    from lightgbm_cegb.datasets import higgs, letter
    from lightgbm_cegb.methods.greedy_miser import miser_params

    X_letter, letters = letter()
    classes = {c: i for i, c in enumerate(sorted(set(letters)))}
    sets = (("HIGGS", *higgs("train")),
            ("letter", X_letter[:10_000], np.array([classes[c] for c in letters[:10_000]])))
    print(f"AdaptGBRT.fit, {rounds} rounds of {trees} trees, one thread; best of {repeat}")
    print(f"{'data':<8} {'rows':>7} {'classes':>7} {'fit s':>8} {'trees alone s':>13} {'ratio':>6}")
    for name, X, y in sets:
        k = len(np.unique(y))
        params = {"objective": "multiclass", "num_class": k} if k > 2 else {"objective": "binary"}
        f0 = lgb.train({**params, "num_leaves": 31, "seed": 0, "num_threads": 1, "verbose": -1},
                       lgb.Dataset(X, y), 100)
        model = AdaptGBRT(f0=f0, n_rounds=rounds, trees_per_round=trees, n_jobs=1)
        fit, _ = best_of(repeat, lambda: model.fit(X, y))  # noqa: B023
        f1_shape, g_shape = (miser_params(None, 0.0, X.shape[1], num_class, max_depth=model.max_depth,
                                          learning_rate=model.learning_rate, min_samples_leaf=model.min_samples_leaf,
                                          n_jobs=1) for num_class in (k if k > 2 else 1, 1))

        def alone():
            lgb.train({**f1_shape, **params}, lgb.Dataset(X, y), (rounds + 1) * trees)  # noqa: B023
            lgb.train({**g_shape, "objective": "binary"}, lgb.Dataset(X, y > 0), rounds * trees)  # noqa: B023

        base, _ = best_of(repeat, alone)
        print(f"{name:<8} {len(X):>7,} {k:>7} {fit:>8.1f} {base:>13.1f} {fit / base:>6.2f}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = timing_parser(__doc__)
    parser.add_argument("--fit", metavar="ROUNDS,TREES", help="time AdaptGBRT.fit on this schedule instead")
    args = parser.parse_args(argv)
    if args.fit:
        rounds, trees = (int(v) for v in args.fit.split(","))
        fit_ratio(rounds, trees, args.repeat)
        return
    X_train, y_train, X = higgs_rows(args.rows)
    f0 = lgb.train({"objective": "binary", "num_leaves": 31, "seed": 0, "deterministic": True, "verbose": -1},
                   lgb.Dataset(X_train, y_train), 100)
    model = AdaptGBRT(f0=f0, p_full=0.3, tradeoff=3.0, feature_costs=HIGGS_COSTS, n_rounds=3,
                      trees_per_round=30).fit(X_train, y_train)

    def baseline():
        return model.gate_.predict(X, raw_score=True), model.f1_.predict(X), f0.predict(X)

    base_time, _ = best_of(args.repeat, baseline)
    print(f"{args.rows:,} rows x {X.shape[1]} features; gate {model.gate_.num_trees()} trees, f1 "
          f"{model.f1_.num_trees()}, f0 {f0.num_trees()}; best of {args.repeat}")
    print(f"{'run':<34} {'seconds':>8} {'/ baseline':>10}")
    print(f"{'gate + f1 + f0 predict (baseline)':<34} {base_time:>8.3f} {1.0:>10.2f}")
    for name, run in (("route", lambda: model.route(X)), ("prediction_cost", lambda: model.prediction_cost(X)),
                      ("predict_proba", lambda: model.predict_proba(X))):
        seconds, out = best_of(args.repeat, run)
        print(f"{name:<34} {seconds:>8.3f} {seconds / base_time:>10.2f}")
        if name == "prediction_cost":
            report = out
    print(f"\nrows to f0: {np.mean(model.route(X) == 0):.3f}; mean cost {report.mean:.2f} "
          f"(f0 alone: {prediction_cost(f0, X, HIGGS_COSTS).mean:.2f})")


if __name__ == "__main__":
    main()
