"""Training speed of ADAPT-LIN, CSTC and the adaptive acquisition against plain LightGBM on the same data (issue 29:
a fit costs at most 20x a plain LightGBM fit; issue 44: the adaptive acquisition fits in minutes on 100,000 rows).

    .venv/bin/python -m scripts.bench_methods [--rows 40000] [--features 54] [--methods adapt_lin,cstc,acquisition]
                                              [--profile adapt_lin] [--sweep cstc]

Data: synthetic and forest-cover-like (seed 0): a fifth of the columns continuous, the rest binary indicators,
a binary label from a few of each with noise; unit costs; three quarters of the rows train, a quarter
validates (CSTC's pruning and early stopping, as the selection sweep fits it). Plain LightGBM: 100 rounds of 31
leaves on one thread, the median of 3 fits. ADAPT-LIN: p_full 0.3, tradeoff 0.05 x ``tradeoff_scale``, f0 the
plain model. CSTC: CSTCClassifier (depth 3) at tradeoff 1e-3 x ``tradeoff_scale``, phi the plain model's trees.
Adaptive acquisition: AdaptiveAcquisitionClassifier with its defaults on one thread, early stopped on the
validation rows; its notes add the time of its policy (tradeoff 0.1 x its scale) on the validation rows.
Each line: the fit's wall time and its ratio to plain LightGBM's. ``--profile`` prints cProfile's top entries
of that method's fit. ``--sweep cstc`` also times ``lightgbm_cegb.selection.sweep(["cstc"], ...)`` on the same
split (its default grid and phi, task binary, unit costs, ``baseline=False``: the method's points only);
``--sweep all`` every registered method's default sweep.
Timings on a loaded machine are noisy: read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time

import lightgbm as lgb
import numpy as np

from lightgbm_cegb import AdaptiveAcquisitionClassifier, AdaptLIN, CSTCClassifier

PARAMS = {"objective": "binary", "num_leaves": 31, "learning_rate": 0.1, "num_threads": 1, "seed": 0,
          "deterministic": True, "verbose": -1}


def synthetic(rows: int, features: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Forest-cover-like rows: continuous columns first (a fifth, at least one), binary indicators after."""
    rng = np.random.default_rng(seed)
    continuous = max(1, features // 5)
    X = np.empty((rows, features))
    X[:, :continuous] = rng.normal(size=(rows, continuous)) * rng.uniform(1, 100, continuous) + \
        rng.uniform(0, 1000, continuous)
    X[:, continuous:] = rng.random((rows, features - continuous)) < rng.uniform(0.02, 0.3, features - continuous)
    z = (X[:, :continuous] - X[:, :continuous].mean(axis=0)) / X[:, :continuous].std(axis=0)
    score = z[:, 0] - 0.7 * z[:, min(1, continuous - 1)] * (z[:, min(2, continuous - 1)] > 0)
    score += X[:, continuous:continuous + 5].sum(axis=1) - 0.5 + rng.normal(0, 0.5, rows)
    return X, (score > np.median(score)).astype(int)


def plain(X: np.ndarray, y: np.ndarray) -> lgb.Booster:
    return lgb.train(PARAMS, lgb.Dataset(X, y), 100)


def timed(run, profile: bool):
    profiler = cProfile.Profile() if profile else None
    start = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    out = run()
    if profiler is not None:
        profiler.disable()
    seconds = time.perf_counter() - start
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
    return seconds, out


def fit_adapt_lin(f0, X_train, y_train, X_valid, y_valid, profile: bool) -> tuple[float, str]:
    scale = AdaptLIN(f0=f0).tradeoff_scale(X_train, y_train)
    seconds, model = timed(lambda: AdaptLIN(f0=f0, p_full=0.3, tradeoff=0.05 * scale).fit(X_train, y_train), profile)
    return seconds, f"gate {model.gate_features_.size} features, f1 {model.f1_features_.size}, {model.n_iter_} " \
        "iterations in the last M-step"


def fit_cstc(f0, X_train, y_train, X_valid, y_valid, profile: bool) -> tuple[float, str]:
    targets, valid_targets = np.where(y_train > 0, 1.0, -1.0), np.where(y_valid > 0, 1.0, -1.0)
    scale = CSTCClassifier().tradeoff_scale(X_train, targets)
    seconds, model = timed(lambda: CSTCClassifier(tradeoff=1e-3 * scale, phi=f0).fit(
        X_train, targets, eval_set=(X_valid, valid_targets)), profile)
    return seconds, f"{model.n_iter_} sweeps, {len(model.terminals_)} terminals"


def fit_acquisition(f0, X_train, y_train, X_valid, y_valid, profile: bool) -> tuple[float, str]:
    seconds, model = timed(lambda: AdaptiveAcquisitionClassifier(random_state=0, n_jobs=1).fit(
        X_train, y_train, eval_set=(X_valid, y_valid)), profile)
    model.set_params(tradeoff=0.1 * model.first_value())
    policy, result = timed(lambda: model.predict_result(X_valid), False)
    return seconds, f"{model.classifier_.current_iteration()} iterations; its policy on the {len(X_valid):,} " \
        f"validation rows {policy:.1f} s, {result.cost.mean:.1f} features per row"


FITS = {"adapt_lin": fit_adapt_lin, "cstc": fit_cstc, "acquisition": fit_acquisition}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=40_000)
    parser.add_argument("--features", type=int, default=54)
    parser.add_argument("--methods", default="adapt_lin,cstc", help="comma-separated: adapt_lin, cstc, acquisition")
    parser.add_argument("--profile", default="", help="a method whose fit to profile")
    parser.add_argument("--sweep", default="", help="comma-separated selection methods to time a default sweep "
                                                    "of, or 'all' (every registered method for binary labels)")
    args = parser.parse_args(argv)
    X, y = synthetic(args.rows, args.features)
    cut = args.rows * 3 // 4
    X_train, y_train, X_valid, y_valid = X[:cut], y[:cut], X[cut:], y[cut:]

    times = []
    for _ in range(3):
        seconds, f0 = timed(lambda: plain(X_train, y_train), False)
        times.append(seconds)
    base = statistics.median(times)
    print(f"{cut:,} training rows x {args.features} features, unit costs; plain LightGBM (median of 3) "
          f"{base:.3f} s")
    print(f"{'fit':<12} {'seconds':>9} {'/ LightGBM':>10}  notes")
    print(f"{'lightgbm':<12} {base:>9.3f} {1.0:>10.2f}")
    for method in [m for m in args.methods.split(",") if m]:
        if method not in FITS:
            raise SystemExit(f"unknown method {method!r}: {', '.join(FITS)}")
        seconds, notes = FITS[method](f0, X_train, y_train, X_valid, y_valid, args.profile == method)
        print(f"{method:<12} {seconds:>9.3f} {seconds / base:>10.2f}  {notes}", flush=True)
    from lightgbm_cegb import FeatureCosts
    from lightgbm_cegb.selection import METHODS, sweep

    sweeps = [name for name, m in METHODS.items() if "binary" in m.tasks] if args.sweep == "all" else \
        [m for m in args.sweep.split(",") if m]
    for method in sweeps:
        seconds, frame = timed(lambda method=method: sweep([method], (X_train, y_train), (X_valid, y_valid),
                                                           FeatureCosts(lazy=np.ones(args.features)), task="binary",
                                                           baseline=False), args.profile == f"sweep:{method}")
        print(f"{'sweep ' + method:<12} {seconds:>9.3f} {seconds / base:>10.2f}  {len(frame)} points", flush=True)


if __name__ == "__main__":
    main()
