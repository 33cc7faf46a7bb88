"""Lazy acquisition against eager prediction on the HIGGS demo models.

    .venv/bin/python -m scripts.bench_lazy [--rows 100000] [--repeat 3] [--small 1 10 100]

Rows: the bundled HIGGS events (7,500) drawn with replacement up to --rows. For each model (plain LightGBM
and CEGB at the demo's tradeoffs, 100 rounds of 31 leaves; classifiers of LightGBM's, XGBoost's, scikit-learn's and
CatBoost's of 100 trees each against their own ``predict_proba``; Early Exit of a CEGB model, tradeoff 0.01, exits
every 10 and 25 trees, against its own ``predict``), ``LazyPredictor.predict`` on rows that arrive
with no feature known and a zero-cost fetch (a column of a column store, ``columns[key][ids]``) is timed against
``Booster.predict`` on the full rows, both in this process, best of --repeat; the ratio is the figure, with the
default threads of both and with one thread each (``num_threads=1``, ``n_jobs=1``). Also:
fetch rounds and calls, and the share of (row, feature) values fetched, which is what lazy acquisition saves
when values cost something.

Then the latency of small requests (--small rows each; the median of many calls, the models' default threads):
the plain model and one of 500 rounds, lazy prediction against ``predict`` of the same rows, with the share of
the lazy time spent inside the fetch function itself (measured on the same requests with a fetch that times
itself); a request of one row also on a prepared row (``LazyPredictor.prepare()``). The script checks that every
lazy prediction equals ``predict``'s.

Last, the per-input acquisitions (the HIGGS costs; staged models at tradeoff 0.25, with separate and with continued
stage models, an adaptive one at a tenth of its first trade-off) on one thread against the plain 100-tree model's
``predict`` of the same rows: their own ``predict_proba`` and their lazy prediction, for the --small requests and for
all --rows (with the fetch rounds, the mean number of units a row buys and, for the staged models, the mean number of
trees a row evaluates).
"""

from __future__ import annotations

import statistics
import time

import lightgbm as lgb
import numpy as np

from lightgbm_cegb.datasets import HIGGS_COSTS
from lightgbm_cegb.serving.lazy import LazyPredictor
from scripts.timing import best_of, higgs_rows, timing_parser


class ColumnStore:
    """A zero-cost fetch: each feature a column of its own, read at the ids asked for; ``timed`` the same fetch
    adding up the time spent inside it."""

    def __init__(self, X: np.ndarray) -> None:
        self.columns = [np.ascontiguousarray(X[:, f]) for f in range(X.shape[1])]
        self.seconds = 0.0

    def __call__(self, feature: int, ids: np.ndarray) -> np.ndarray:
        return self.columns[feature][ids]

    def timed(self, feature: int, ids: np.ndarray) -> np.ndarray:
        start = time.perf_counter()
        values = self.columns[feature][ids]
        self.seconds += time.perf_counter() - start
        return values


def median_call(function, seconds: float = 1.0) -> float:
    """The median time of one call, over calls for about ``seconds`` (at least 20)."""
    function()
    times: list[float] = []
    began = time.perf_counter()
    while len(times) < 20 or time.perf_counter() - began < seconds:
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def small_requests(X_train, y_train, X, sizes: list[int]) -> None:
    """Latency of requests of a few rows, lazily against predict (see the module's doc); a request of one row also
    on a prepared row (``LazyPredictor.prepare``)."""
    base = {"objective": "binary", "num_leaves": 31, "learning_rate": 0.1, "seed": 0, "deterministic": True,
            "verbose": -1}
    header = (f"{'model':<24} {'rows':>5} {'predict us':>10} {'lazy us':>8} {'ratio':>6} {'in fetch':>8} "
              f"{'prepared us':>11} {'ratio':>6}")
    print("\nsmall requests, the median of many calls\n" + header + "\n" + "-" * len(header))
    for rounds in (100, 500):
        booster = lgb.train(base, lgb.Dataset(X_train, y_train), rounds)
        store = ColumnStore(X)
        predictor = LazyPredictor(booster, store, feature_costs=HIGGS_COSTS, feature_keys="index")
        row = predictor.prepare()
        for size in sizes:
            rows, unknown = X[:size], np.full((size, X.shape[1]), np.nan)
            if not np.array_equal(predictor.predict(unknown), booster.predict(rows)) or \
                    (size == 1 and row.predict(id=0) != booster.predict(rows)[0]):
                raise SystemExit("lazy predictions differ from predict: a bug")
            eager = median_call(lambda: booster.predict(rows))  # noqa: B023 (called here)
            lazy_time = median_call(lambda: predictor.predict(unknown))  # noqa: B023 (called here)
            # the share of the lazy time inside fetch: the same requests with the timed fetch
            timed = LazyPredictor(booster, store.timed, feature_costs=HIGGS_COSTS, feature_keys="index")
            store.seconds, calls = 0.0, 200
            for _ in range(calls):
                timed.predict(unknown)
            fetch_share = store.seconds / calls / lazy_time
            prepared = ""
            if size == 1:
                prepared_time = median_call(lambda: row.predict(id=0))  # noqa: B023 (called here)
                prepared = f"{prepared_time * 1e6:>11.1f} {prepared_time / eager:>6.2f}"
            print(f"{f'LightGBM, {rounds} trees':<24} {size:>5} {eager * 1e6:>10.1f} {lazy_time * 1e6:>8.1f} "
                  f"{lazy_time / eager:>6.2f} {fetch_share:>8.0%} {prepared}")


def policy_requests(X_train, y_train, X, sizes: list[int], repeat: int) -> None:
    """The per-input acquisitions (HIGGS costs) against plain LightGBM's ``Booster.predict`` of a 100-tree model, one
    thread each: a staged acquisition model (tradeoff 0.25) and an adaptive one (a tenth of its first trade-off),
    their own ``predict_proba`` (the compiled stages or policy) and their lazy prediction on rows that know nothing,
    for requests of ``sizes`` rows (the median of many calls) and for every row of X (best of ``repeat``). Checks that
    every prediction equals the model's ``predict_result``."""
    from lightgbm_cegb import AdaptiveAcquisitionClassifier, StagedAcquisitionClassifier

    base = {"objective": "binary", "num_leaves": 31, "learning_rate": 0.1, "seed": 0, "deterministic": True,
            "verbose": -1, "num_threads": 1}
    plain = lgb.train(base, lgb.Dataset(X_train, y_train), 100)
    staged = {kind: StagedAcquisitionClassifier(feature_costs=HIGGS_COSTS, tradeoff=0.25, random_state=0, n_jobs=1,
                                                stage_models=kind).fit(X_train, y_train)
              for kind in ("separate", "continued")}
    adaptive = AdaptiveAcquisitionClassifier(feature_costs=HIGGS_COSTS, random_state=0, n_jobs=1).fit(X_train, y_train)
    adaptive.set_params(tradeoff=0.1 * adaptive.first_value())
    header = (f"{'model':<10} {'rows':>7} {'predict us':>10} {'own us':>9} {'ratio':>6} {'lazy us':>9} {'ratio':>6} "
              f"{'rounds':>6} {'units':>5} {'trees':>5} {'prepared us':>11} {'ratio':>6}")
    print("\nper-input acquisition against a plain 100-tree model's predict, one thread\n" + header + "\n"
          + "-" * len(header))
    for name, model in (("staged", staged["separate"]), ("continued", staged["continued"]), ("adaptive", adaptive)):
        predictor = LazyPredictor(model, ColumnStore(X), feature_keys="index", n_jobs=1)
        row = predictor.prepare("predict_proba")
        for size in [*sizes, len(X)]:
            rows, unknown = X[:size], np.full((size, X.shape[1]), np.nan)
            expected = model.predict_result(rows)
            result = predictor.acquire(unknown, method="predict_proba")
            if not (np.array_equal(model.predict_proba(rows), expected.proba)
                    and np.array_equal(result.prediction, expected.proba)
                    and (size > 1 or np.array_equal(row.predict(id=0), expected.proba[0]))):
                raise SystemExit(f"the {name} model's predictions differ from its own: a bug")

            def time_of(function):
                return best_of(repeat, function)[0] if size == len(X) else median_call(function)  # noqa: B023

            eager = time_of(lambda: plain.predict(rows, num_threads=1))  # noqa: B023 (called here)
            own = time_of(lambda: model.predict_proba(rows))  # noqa: B023 (called here)
            lazy = time_of(lambda: predictor.acquire(unknown, method="predict_proba"))  # noqa: B023 (called here)
            prepared = ""
            if size == 1:
                prepared_time = median_call(lambda: row.predict(id=0))  # noqa: B023 (called here)
                prepared = f"{prepared_time * 1e6:>11.1f} {prepared_time / eager:>6.2f}"
            print(f"{name:<10} {size:>7} {eager * 1e6:>10.1f} {own * 1e6:>9.1f} {own / eager:>6.2f} {lazy * 1e6:>9.1f} "
                  f"{lazy / eager:>6.2f} {result.rounds:>6} {expected.steps.mean():>5.1f} "
                  f"{trees_per_row(model, expected)} {prepared}")


def other_classifiers(X_train, y_train) -> list[tuple[str, object]]:
    """The classifiers of the first part's last rows, 100 trees each, lazily against their own ``predict_proba``:
    LightGBM's scikit-learn estimator, XGBoost's, scikit-learn's histogram gradient boosting and CatBoost's."""
    import catboost
    import xgboost as xgb
    from sklearn.ensemble import HistGradientBoostingClassifier

    models = [("LGBMClassifier, 100 trees", lgb.LGBMClassifier(n_estimators=100, num_leaves=31, learning_rate=0.1,
                                                             random_state=0, deterministic=True, verbose=-1)),
            ("XGBClassifier, 100 trees", xgb.XGBClassifier(n_estimators=100, max_depth=5, random_state=0)),
            ("HistGradientBoosting 100", HistGradientBoostingClassifier(max_iter=100, early_stopping=False,
                                                                        random_state=0)),
            ("CatBoostClassifier 100", catboost.CatBoostClassifier(iterations=100, depth=5, random_seed=0,
                                                                   verbose=0))]
    return [(name, model.fit(X_train, y_train), "predict_proba") for name, model in models]


def early_exits(X_train, y_train, params: dict) -> list[tuple[str, object, str]]:
    """Early Exit of a CEGB model (tradeoff 0.01, 100 rounds of ``params``) against its own ``predict``: exits every
    10 and every 25 trees, a row stopping where its probability of either class reaches 0.9."""
    from lightgbm_cegb.methods.early_exit import EarlyExit

    booster = lgb.train(dict(params, **HIGGS_COSTS.to_params(tradeoff=0.01)), lgb.Dataset(X_train, y_train), 100)
    return [(f"Early Exit, every {every}", EarlyExit(booster, threshold=0.9, every=every, feature_costs=HIGGS_COSTS),
             "predict") for every in (10, 25)]


def trees_per_row(model, result) -> str:
    """The mean number of trees a row of ``result`` evaluated: a staged model's, from the stage it stopped at ("-" for
    other models)."""
    if not hasattr(model, "stage_units_"):
        return f"{'-':>5}"
    trees = np.concatenate([[0], np.cumsum([booster.num_trees() for booster in model.stages_])])
    return f"{trees[np.searchsorted(model.stage_units_, result.steps)].mean():>5.0f}"


def main(argv: list[str] | None = None) -> None:
    parser = timing_parser(__doc__)
    parser.add_argument("--tradeoffs", type=float, nargs="*", default=[0.001, 0.003, 0.01])
    parser.add_argument("--small", type=int, nargs="*", default=[1, 10, 100], help="rows of the small requests")
    args = parser.parse_args(argv)
    X_train, y_train, X = higgs_rows(args.rows)
    unknown = np.full_like(X, np.nan)
    fetch = ColumnStore(X)

    base = {"objective": "binary", "num_leaves": 31, "learning_rate": 0.1, "seed": 0, "deterministic": True,
            "verbose": -1}
    print(f"{args.rows:,} rows x {X.shape[1]} features, best of {args.repeat}")
    header = (f"{'model':<24} {'predict s':>9} {'lazy s':>8} {'ratio':>6} {'1 thread':>8} {'lazy':>6} {'ratio':>6} "
              f"{'rounds':>6} {'calls':>6} {'fetched':>8} {'cost lazy':>9}")
    print(header + "\n" + "-" * len(header))
    for tradeoff, rounds in [(None, 100), (None, 500), *((tradeoff, 100) for tradeoff in args.tradeoffs)]:
        params = dict(base, **({} if tradeoff is None else HIGGS_COSTS.to_params(tradeoff=tradeoff)))
        booster = lgb.train(params, lgb.Dataset(X_train, y_train), rounds)
        times = []
        for threads in (None, 1):  # the default threads, then one thread each
            predictor = LazyPredictor(booster, fetch, feature_costs=HIGGS_COSTS, feature_keys="index", n_jobs=threads)
            options = {} if threads is None else {"num_threads": threads}
            # best_of calls the lambdas at once, within this iteration: the noqa: B023 below
            eager_time, expected = best_of(args.repeat, lambda: booster.predict(X, **options))  # noqa: B023
            lazy_time, result = best_of(args.repeat, lambda: predictor.acquire(unknown))  # noqa: B023
            if not np.array_equal(result.prediction, expected):
                raise SystemExit("lazy predictions differ from predict: a bug")
            times.append((eager_time, lazy_time))
        (eager_time, lazy_time), (eager_one, lazy_one) = times
        name = f"LightGBM, {rounds} trees" if tradeoff is None else f"CEGB tradeoff={tradeoff:g}"
        print(f"{name:<24} {eager_time:>9.3f} {lazy_time:>8.3f} {lazy_time / eager_time:>6.2f} {eager_one:>8.3f} "
              f"{lazy_one:>6.3f} {lazy_one / eager_one:>6.2f} {result.rounds:>6} {result.fetch_calls:>6} "
              f"{result.fetched.mean():>8.1%} {result.mean:>9.2f}")
    for name, classifier, method in [*other_classifiers(X_train, y_train), *early_exits(X_train, y_train, base)]:
        own = hasattr(classifier, "__lightgbm_cegb_policy__")  # a policy model buys by the costs it holds
        predictor = LazyPredictor(classifier, fetch, feature_costs=None if own else HIGGS_COSTS, feature_keys="index")
        eager_time, expected = best_of(args.repeat, lambda: getattr(classifier, method)(X))  # noqa: B023
        lazy_time, result = best_of(args.repeat, lambda: predictor.acquire(unknown, method=method))  # noqa: B023
        if not np.array_equal(result.prediction, expected):
            raise SystemExit(f"lazy predictions of {name} differ from {method}: a bug")
        print(f"{name:<24} {eager_time:>9.3f} {lazy_time:>8.3f} {lazy_time / eager_time:>6.2f} {'':>8} {'':>6} "
              f"{'':>6} {result.rounds:>6} {result.fetch_calls:>6} {result.fetched.mean():>8.1%} {result.mean:>9.2f}")
    print(f"\nfetched: share of the {X.size:,} (row, feature) values fetched; cost lazy: mean per row "
          f"(eager: {HIGGS_COSTS.lazy.sum():g}).")
    if args.small:
        small_requests(X_train, y_train, X, args.small)
    policy_requests(X_train, y_train, X, args.small, args.repeat)


if __name__ == "__main__":
    main()
