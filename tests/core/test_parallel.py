"""resolve_n_jobs reads n_jobs as scikit-learn does, within the CPUs this process may use; the default stays
within OMP_NUM_THREADS, which joblib's workers get as their share of the CPUs."""

from __future__ import annotations

import pytest
from joblib import Parallel, cpu_count, delayed

from lightgbm_cegb.core import parallel
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.parallel import ROWS_PER_THREAD, omp_num_threads, resolve_n_jobs


@pytest.fixture
def eight_cpus(monkeypatch):
    monkeypatch.setattr(parallel, "available_cpus", lambda: 8)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)


@pytest.mark.parametrize(("n_jobs", "expected"), [(None, 8), (-1, 8), (-3, 6), (-8, 1), (-20, 1), (1, 1), (5, 5),
                                                  (64, 8)])
def test_scikit_learn_convention(eight_cpus, n_jobs, expected):
    assert resolve_n_jobs(n_jobs) == expected


def test_few_rows_few_threads(eight_cpus):
    assert resolve_n_jobs(None, rows=1) == 1
    assert resolve_n_jobs(8, rows=3 * ROWS_PER_THREAD) == 3
    assert resolve_n_jobs(-1, rows=3 * ROWS_PER_THREAD + 1) == 4
    assert resolve_n_jobs(None, rows=10**9) == 8


@pytest.mark.parametrize(("value", "expected"), [("3", 3), ("3,1", 3), (" 2 ", 2), ("0", None), ("", None),
                                                 ("-2", None), ("many", None)])
def test_omp_num_threads(monkeypatch, value, expected):
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert omp_num_threads() == expected


def test_default_stays_within_omp_num_threads(eight_cpus, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert resolve_n_jobs(None) == 3 and resolve_n_jobs(-1) == 3 and resolve_n_jobs(-2) == 2
    assert resolve_n_jobs(6) == 6  # asked for: as scikit-learn, an explicit count is not capped by the variable
    monkeypatch.setenv("OMP_NUM_THREADS", "32")
    assert resolve_n_jobs(None) == 8  # never more than the CPUs


@pytest.mark.parametrize("n_jobs", [0, 1.5, "2", True])
def test_bad_n_jobs_named(n_jobs):
    with pytest.raises(CEGBError, match=rf"n_jobs should be None or a non-zero integer, got {n_jobs!r}"):
        resolve_n_jobs(n_jobs)


def test_joblib_workers_share_the_cpus(monkeypatch):
    """Two loky workers (a sweep with n_jobs=2) each default to half of the CPUs, not all of them."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # else joblib passes the parent's value on
    threads = Parallel(n_jobs=2)(delayed(resolve_n_jobs)(None) for _ in range(4))
    assert threads == [min(parallel.available_cpus(), max(1, cpu_count() // 2))] * 4
