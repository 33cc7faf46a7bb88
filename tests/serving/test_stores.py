"""The Store protocol and build_predictor (lightgbm_cegb/serving/stores.py), in process: a plain function is a store,
a store's bind hook is called once with the predictor built, and SQLiteStore's hook refuses a key no table serves
with a StoreError."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import lightgbm as lgb
import numpy as np
import pytest

from lightgbm_cegb import CEGBError, FeatureCosts
from lightgbm_cegb.serving import SQLiteStore, StoreError, build_predictor

NAMES = ["a", "b", "c"]


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] + X[:, 2] > 0).astype(float)
    booster = lgb.train({"objective": "binary", "num_leaves": 4, "verbose": -1, "seed": 0, "num_threads": 1},
                        lgb.Dataset(X, y, feature_name=NAMES), 5)
    return booster, X


def test_a_plain_function_is_a_store(model):
    booster, X = model
    calls = []

    def fetch(key, ids):
        calls.append(key)
        return X[ids, NAMES.index(key)]

    predictor = build_predictor(booster, fetch, FeatureCosts(lazy=[1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(predictor.predict(np.full_like(X, np.nan)), booster.predict(X))
    assert set(calls) <= set(predictor.fetch_keys)
    np.testing.assert_array_equal(predictor.costs_.arrays(3)[0], [1.0, 2.0, 3.0])


def test_the_bind_hook_is_called_once_with_the_predictor(model):
    booster, X = model

    class Store:
        def __init__(self) -> None:
            self.bound = []

        def __call__(self, key, ids):
            return X[ids, NAMES.index(key)]

        def bind(self, predictor) -> None:
            self.bound.append(predictor)

    store = Store()
    predictor = build_predictor(booster, store)
    assert store.bound == [predictor]


def test_sqlite_bind_refuses_a_key_no_table_serves(model, tmp_path):
    booster, _ = model
    path = tmp_path / "store.sqlite"
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, a REAL, b REAL)")
    with pytest.raises(StoreError, match=r"feature 'c': expected one table with the columns id, c; none of .* hold "
                                         r"them \(tables: \['t'\]\)") as info:
        build_predictor(booster, SQLiteStore(path), FeatureCosts(lazy=[1.0, 1.0, 1.0]))
    assert isinstance(info.value, CEGBError)
