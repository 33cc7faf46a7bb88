"""Lazy acquisition against eager prediction on the HIGGS demo models.

    .venv/bin/python scripts/bench_lazy.py [--rows 100000] [--repeat 3]

Rows: the bundled HIGGS events (7,500) drawn with replacement up to --rows. For each model (plain LightGBM
and CEGB at the demo's tradeoffs, 100 rounds of 31 leaves), ``LazyPredictor.predict`` on rows that arrive
with no feature known and a zero-cost fetch (a column read from the full rows) is timed against
``Booster.predict`` on the full rows, both in this process, best of --repeat; the ratio is the figure
(the issue's bar: <= 3). Also: fetch rounds and calls, and the share of (row, feature) values fetched,
which is what lazy acquisition saves when values cost something.
"""

from __future__ import annotations

import sys
from pathlib import Path

import lightgbm as lgb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import best_of, higgs_rows, timing_parser  # noqa: E402

from lightgbm_cegb.datasets import HIGGS_COSTS  # noqa: E402
from lightgbm_cegb.serving.lazy import LazyPredictor  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = timing_parser(__doc__)
    parser.add_argument("--tradeoffs", type=float, nargs="*", default=[0.001, 0.003, 0.01])
    args = parser.parse_args(argv)
    X_train, y_train, X = higgs_rows(args.rows)
    unknown = np.full_like(X, np.nan)

    def fetch(feature: int, ids: np.ndarray) -> np.ndarray:
        return X[ids, feature]

    base = {"objective": "binary", "num_leaves": 31, "learning_rate": 0.1, "seed": 0, "deterministic": True,
            "verbose": -1}
    print(f"{args.rows:,} rows x {X.shape[1]} features, best of {args.repeat}")
    header = (f"{'model':<22} {'predict s':>9} {'lazy s':>8} {'ratio':>6} {'rounds':>6} {'calls':>6} "
              f"{'fetched':>8} {'cost lazy':>9}")
    print(header + "\n" + "-" * len(header))
    for tradeoff in [None, *args.tradeoffs]:
        params = dict(base, **({} if tradeoff is None else HIGGS_COSTS.to_params(tradeoff=tradeoff)))
        booster = lgb.train(params, lgb.Dataset(X_train, y_train), 100)
        predictor = LazyPredictor(booster, fetch, feature_costs=HIGGS_COSTS, feature_keys="index")
        # best_of calls the lambdas at once, within this iteration: the noqa: B023 below
        eager_time, expected = best_of(args.repeat, lambda: booster.predict(X))  # noqa: B023
        lazy_time, result = best_of(args.repeat, lambda: predictor.acquire(unknown))  # noqa: B023
        if not np.array_equal(result.prediction, expected):
            raise SystemExit("lazy predictions differ from predict: a bug")
        name = "LightGBM" if tradeoff is None else f"CEGB tradeoff={tradeoff:g}"
        print(f"{name:<22} {eager_time:>9.3f} {lazy_time:>8.3f} {lazy_time / eager_time:>6.2f} "
              f"{result.rounds:>6} {result.fetch_calls:>6} {result.fetched.mean():>8.1%} {result.mean:>9.2f}")
    print(f"\nfetched: share of the {X.size:,} (row, feature) values fetched; cost lazy: mean per row "
          f"(eager: {HIGGS_COSTS.lazy.sum():g}).")


if __name__ == "__main__":
    main()
