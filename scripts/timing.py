"""What the speed benchmarks share: their command line, the HIGGS rows they time on, and best-of timing."""

from __future__ import annotations

import argparse
import time

import numpy as np


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
