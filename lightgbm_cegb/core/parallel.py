"""How many threads the Cython kernels use: ``n_jobs`` as scikit-learn reads it, within the CPUs this
process may run on (its affinity mask and a cgroup CPU quota, as in a container or a CI job) and, for the default,
``OMP_NUM_THREADS`` (which joblib sets in its workers to their share of the CPUs: a sweep with ``n_jobs=2``
does not run two threads in each of two processes on two cores); and one BLAS thread for the solvers of small
products (``one_blas_thread``)."""

from __future__ import annotations

import functools
import math
import os
import threading
from pathlib import Path

from threadpoolctl import threadpool_limits

from lightgbm_cegb.core.validation import Satisfies

ROWS_PER_THREAD = 256


@functools.lru_cache(maxsize=1)
def available_cpus() -> int:
    """CPUs this process may use: the affinity mask, capped by a cgroup v2 (``cpu.max``) or v1 quota."""
    try:
        count = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        count = os.cpu_count() or 1
    for quota_file, period_file in (("/sys/fs/cgroup/cpu.max", None),
                                    ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.cfs_period_us")):
        try:
            if period_file is None:
                quota, period = Path(quota_file).read_text().split()[:2]
            else:
                quota, period = Path(quota_file).read_text().strip(), Path(period_file).read_text().strip()
            if quota not in ("max", "-1") and int(period) > 0:
                count = min(count, max(1, math.ceil(int(quota) / int(period))))
                break
        except (OSError, ValueError):
            continue
    return max(count, 1)


def omp_num_threads() -> int | None:
    """``OMP_NUM_THREADS`` (its first level, as in ``4,2``) when it is a positive integer, else None."""
    first = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(first) if first.isdigit() and int(first) > 0 else None


#: what every ``n_jobs`` parameter may be (the estimators declare it: core.validation)
N_JOBS = Satisfies(lambda n_jobs: n_jobs is None or (isinstance(n_jobs, int) and not isinstance(n_jobs, bool)
                                                     and n_jobs != 0),
                   "None or a non-zero integer", bad=(0, 1.5, "2", True))


def resolve_n_jobs(n_jobs: int | None, rows: int | None = None) -> int:
    """Threads for ``n_jobs``: None or -1 all available CPUs, at most ``OMP_NUM_THREADS`` when it is set;
    -k all but k - 1 of those; k > 0 that many, at most the available CPUs (scikit-learn's convention); at
    most one per ROWS_PER_THREAD of ``rows`` (starting threads costs more than routing a few rows)."""
    N_JOBS.check(n_jobs, "n_jobs")
    if rows is not None and rows <= ROWS_PER_THREAD:  # one thread, whatever n_jobs says
        return 1
    cpus = available_cpus() if rows is None else max(1, min(available_cpus(), -(-rows // ROWS_PER_THREAD)))
    if n_jobs is not None and n_jobs > 0:
        return min(n_jobs, cpus)
    default = min(cpus, omp_num_threads() or cpus)
    return default if n_jobs is None else max(default + 1 + n_jobs, 1)


_blas = threading.local()  # depth of the calls under one_blas_thread in this thread


def one_blas_thread(method):
    """Run ``method`` with one BLAS thread: for solvers whose products are matrix-vector or small (CSTC's,
    ADAPT-LIN's), where BLAS threads mostly wait for each other, and on a loaded machine for a core (tens of
    times slower). Only the outermost call sets the limit (threadpoolctl's look-up of the libraries costs
    milliseconds)."""
    @functools.wraps(method)
    def wrapped(*args, **kwargs):
        if getattr(_blas, "depth", 0):
            return method(*args, **kwargs)
        _blas.depth = 1
        try:
            with threadpool_limits(limits=1, user_api="blas"):
                return method(*args, **kwargs)
        finally:
            _blas.depth = 0
    return wrapped
