"""Serving with lazy feature acquisition: fetch only the features a row's paths need (depends on core and io).

Modules by job: ``lazy`` (LazyPredictor), ``prepared`` (its one-row requests: PreparedRow), ``runs`` (one batch's
rounds through a model), ``results`` (what a prediction returns and raises), ``workers`` (synchronous fetches from an
event loop), ``stores`` (the ``Store`` protocol of feature stores, ``build_predictor``), ``sqlite_store``
(``SQLiteStore``), ``app`` (the HTTP service of ``lightgbm-cegb serve``), ``bundled`` (its bundled HIGGS example).
"""

from lightgbm_cegb.serving.lazy import LazyPredictor
from lightgbm_cegb.serving.prepared import PreparedRow
from lightgbm_cegb.serving.results import (
    DONE,
    FAILED,
    PENDING,
    FetchFailure,
    LazyFetchError,
    LazyFetchValueError,
    LazyResult,
)
from lightgbm_cegb.serving.sqlite_store import SQLiteStore
from lightgbm_cegb.serving.stores import Store, StoreError, build_predictor

__all__ = ["DONE", "FAILED", "PENDING", "FetchFailure", "LazyFetchError", "LazyFetchValueError", "LazyPredictor",
           "LazyResult", "PreparedRow", "SQLiteStore", "Store", "StoreError", "build_predictor"]
