"""Serving with lazy feature acquisition: fetch only the features a row's paths need (depends on core and io).

Modules by job: ``lazy`` (LazyPredictor), ``runs`` (one batch's rounds through a model), ``results`` (what a
prediction returns and raises), ``workers`` (synchronous fetches from an event loop), ``service`` (the HTTP
service of ``lightgbm-cegb serve``).
"""

from lightgbm_cegb.serving.lazy import LazyPredictor
from lightgbm_cegb.serving.results import (
    DONE,
    FAILED,
    PENDING,
    FetchFailure,
    LazyFetchError,
    LazyFetchValueError,
    LazyResult,
)

__all__ = ["DONE", "FAILED", "PENDING", "FetchFailure", "LazyFetchError", "LazyFetchValueError", "LazyPredictor",
           "LazyResult"]
