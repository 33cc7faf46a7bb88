"""Feature stores: what a lazy prediction fetches from (:class:`Store`), and the one way the service and the command
line join a model to its store (:func:`build_predictor`).

A store is the ``fetch`` of ``LazyPredictor``: a callable ``store(key, ids)``. One that must check its keys before
the first request (which table holds each, say) defines the optional hook ``bind(predictor)``, which
:func:`build_predictor` calls. ``sqlite_store.SQLiteStore`` is the first implementation; docs/developer/stores.md
shows how to write another.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.serving.lazy import LazyPredictor


class StoreError(CEGBError):
    """A store cannot serve a predictor: what its ``bind`` raises, naming a key it holds no values for."""


class Store(Protocol):
    """What a feature store provides: ``store(key, ids)``, the values of the feature or group ``key`` (one of the
    predictor's ``fetch_keys``) for the row ids ``ids``: ``LazyPredictor``'s ``fetch``, whose doc says what it
    returns (a feature's value per id; a group's members' values, as an array or a mapping). A ``LookupError``
    says that the store does not hold some of the ids (the service answers 404); any other error fails the fetch
    (502).

    A store may also define ``bind(predictor) -> None``, called once by :func:`build_predictor` before the first
    fetch: it checks that the store serves every key of ``predictor.fetch_keys`` (a group's members are
    ``predictor.groups[key]``), raising :class:`StoreError` naming one it does not, and may prepare its queries.
    A plain function needs none.
    """

    def __call__(self, key, ids: np.ndarray):
        ...


def build_predictor(model, store: Store, feature_costs=None) -> LazyPredictor:
    """The predictor serving ``model`` from ``store``, the store bound to it: what ``lightgbm-cegb serve`` and the
    bundled example serve.

    Parameters
    ----------
    model : object
        Any model ``LazyPredictor`` takes (a model file's path too).
    store : Store
        The feature store (a fetch function, or an object with the optional ``bind`` hook, as ``SQLiteStore``).
    feature_costs : FeatureCosts, array-like, mapping or None, default=None
        As ``LazyPredictor``'s (None: the model's own).

    Returns
    -------
    LazyPredictor
        The predictor, the store's ``bind`` called with it.

    Raises
    ------
    StoreError
        When the store's ``bind`` finds a key it cannot serve.
    CEGBError
        When ``LazyPredictor`` refuses the model or the costs.
    """
    predictor = LazyPredictor(model, store, feature_costs=feature_costs)
    bind = getattr(store, "bind", None)
    if callable(bind):
        bind(predictor)
    return predictor
