"""Serving with lazy feature acquisition: fetch only the features a row's paths need (depends on core and io)."""

from lightgbm_cegb.serving.lazy import LazyFetchError, LazyFetchValueError, LazyPredictor, LazyResult

__all__ = ["LazyFetchError", "LazyFetchValueError", "LazyPredictor", "LazyResult"]
