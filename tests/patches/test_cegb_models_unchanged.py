"""The incremental lazy-penalty bookkeeping of patches 0004 and 0008 is an optimisation: it must not change any model.

FINGERPRINTS holds the sha256 of ``model_to_string()`` for each case below as trained by the patch series
*before* patch 0004 (its scan of every row of a leaf per feature, with the penalty computed as
``penalty * unpaid_rows``); the ``large-*`` cases, added with patch 0008's vertical counters, as trained by
series 8 (before patch 0008). Re-record only for a deliberate change of the models:
``PYTHONPATH=<unoptimised build> python tests/patches/test_cegb_models_unchanged.py``.
"""

from __future__ import annotations

import hashlib

import lightgbm as lgb
import numpy as np
import pytest

N, F = 4000, 12


def _data():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(N, F))
    X[rng.random(X.shape) < 0.05] = np.nan
    X[:, 3] = np.round(X[:, 3], 1)
    X[:, F - 1] = rng.integers(0, 9, N)
    y = (X[:, 0] + np.nan_to_num(X[:, 1]) * X[:, 2] + 0.5 * (X[:, F - 1] % 3) + 0.3 * np.nan_to_num(X[:, 5])
         + rng.normal(0, 0.5, N))
    return X, y


LAZY = [0.5, 1.0, 2.0, 0.0, 4.0, 1.5, 3.0, 0.25, 1.0, 2.0, 5.0, 1.0]
COUPLED = [300.0, 100.0, 50.0, 200.0, 800.0, 100.0, 0.0, 100.0, 400.0, 200.0, 100.0, 600.0]

CASES = {
    "lazy": dict(cegb_tradeoff=0.01, cegb_penalty_feature_lazy=LAZY),
    "lazy-bagging": dict(cegb_tradeoff=0.01, cegb_penalty_feature_lazy=LAZY, bagging_fraction=0.8,
                         bagging_freq=1),
    "lazy-bagging-subset": dict(cegb_tradeoff=0.01, cegb_penalty_feature_lazy=LAZY, bagging_fraction=0.3,
                                bagging_freq=1),
    "lazy-goss": dict(cegb_tradeoff=0.01, cegb_penalty_feature_lazy=LAZY, data_sample_strategy="goss",
                      top_rate=0.2, other_rate=0.1),
    "lazy-binary-bynode": dict(objective="binary", cegb_tradeoff=0.002, cegb_penalty_feature_lazy=LAZY,
                               feature_fraction_bynode=0.6),
    "lazy-monotone": dict(cegb_tradeoff=0.01, cegb_penalty_feature_lazy=LAZY,
                          monotone_constraints=[1] + [0] * (F - 1), monotone_constraints_method="advanced",
                          monotone_penalty=0.5),
    "lazy-multiclass": dict(objective="multiclass", num_class=3, cegb_tradeoff=0.002,
                            cegb_penalty_feature_lazy=LAZY),
    "coupled": dict(cegb_tradeoff=1.0, cegb_penalty_feature_coupled=COUPLED),
    "all-three": dict(cegb_tradeoff=0.05, cegb_penalty_split=0.5, cegb_penalty_feature_lazy=LAZY,
                      cegb_penalty_feature_coupled=COUPLED),
    "split": dict(cegb_penalty_split=0.05),
}


def _train(name: str) -> lgb.Booster:
    X, y = _data()
    params = {"objective": "regression", "num_leaves": 15, "min_data_in_leaf": 10, "verbose": -1, "seed": 1,
              "deterministic": True, "num_threads": 2, "force_col_wise": True, **CASES[name]}
    if params["objective"] == "binary":
        y = (y > 0).astype(float)
    elif params["objective"] == "multiclass":
        y = np.digitize(y, [-0.5, 0.5]).astype(float)
    return lgb.train(params, lgb.Dataset(X, y, categorical_feature=[F - 1]), 20)


def _continued() -> lgb.Booster:
    """Continued training with lazy penalties (the init model's paths are paid) and a reset_parameter that
    changes which features carry a lazy penalty half-way."""
    X, y = _data()
    params = dict(objective="regression", num_leaves=15, min_data_in_leaf=10, verbose=-1, seed=1,
                  deterministic=True, num_threads=2, force_col_wise=True, cegb_tradeoff=0.01,
                  cegb_penalty_feature_lazy=LAZY)
    ds = lgb.Dataset(X, y, categorical_feature=[F - 1], free_raw_data=False)
    init = lgb.train(params, ds, 5, keep_training_booster=True)
    other = [0.0 if p else 1.0 for p in LAZY]
    schedule = lgb.reset_parameter(cegb_penalty_feature_lazy=[LAZY] * 5 + [other] * 10)
    return lgb.train(params, ds, 15, init_model=init, callbacks=[schedule])


def _wide() -> lgb.Booster:
    """150 features: a row's paid bits span three 64-bit words, at every offset."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 150))
    y = X[:, ::7].sum(axis=1) + X[:, 100] * X[:, 140] + rng.normal(0, 0.5, 3000)
    lazy = list(rng.uniform(0.0, 3.0, 150) * (rng.random(150) < 0.9))
    params = {"objective": "regression", "num_leaves": 31, "min_data_in_leaf": 5, "verbose": -1, "seed": 1,
              "deterministic": True, "num_threads": 2, "force_col_wise": True, "cegb_tradeoff": 0.002,
              "cegb_penalty_feature_lazy": lazy, "bagging_fraction": 0.7, "bagging_freq": 2}
    return lgb.train(params, lgb.Dataset(X, y), 30)


def _large(bagging: bool, groups: bool) -> lgb.Booster:
    """24,000 rows, 100 lazy features (113 slots with groups): leaves large enough for the parallel count and
    for several reads of the vertical counters, slots across two words."""
    rng = np.random.default_rng(11)
    n, f = 24000, 100
    X = rng.normal(size=(n, f))
    y = X[:, ::5].sum(axis=1) + X[:, 70] * X[:, 90] + rng.normal(0, 0.5, n)
    lazy = list(rng.uniform(0.0, 2.0, f) * (rng.random(f) < 0.9))
    params = {"objective": "regression", "num_leaves": 31, "min_data_in_leaf": 20, "verbose": -1, "seed": 1,
              "deterministic": True, "num_threads": 2, "force_col_wise": True, "cegb_tradeoff": 0.02,
              "cegb_penalty_feature_lazy": lazy}
    if bagging:
        params.update(bagging_fraction=0.6, bagging_freq=1)
    if groups:
        params.update(cegb_feature_group=[i % 13 for i in range(f)], cegb_penalty_group_lazy=[1.0] * 13)
    return lgb.train(params, lgb.Dataset(X, y), 25)


SPECIAL = {
    "continued": _continued,
    "wide": _wide,
    "large": lambda: _large(bagging=False, groups=False),
    "large-groups": lambda: _large(bagging=False, groups=True),
    "large-bagging": lambda: _large(bagging=True, groups=False),
    "large-bagging-groups": lambda: _large(bagging=True, groups=True),
}


def fingerprint(name: str) -> str:
    booster = SPECIAL[name]() if name in SPECIAL else _train(name)
    return hashlib.sha256(booster.model_to_string().encode()).hexdigest()


FINGERPRINTS = {
    'lazy': 'a82ffff8ad81a44fe8e344d020f810bdf44ba0af83aa4554ddc90caa17b563e1',
    'lazy-bagging': 'e8c216529dc3bdf1c9559a605fc30ab8c00ef62e757b8343bd24312d2e17b222',
    'lazy-bagging-subset': 'cc32eab2e029e70b3ed5402373145b50e88236584227f4107d5269145f861c19',
    'lazy-goss': 'd9740882e3ed4b60cc049d2b397994962ef63592d76ac231e665157a87921603',
    'lazy-binary-bynode': '6d9f33e19a65c6d97dfd54c054bd9006b2128d7283e763e0d846c30306d69002',
    'lazy-monotone': '9b1c4fef5d00d5b59af0bce37cbda6d631e9952ed0e2d859d04f342f079121d4',
    'lazy-multiclass': 'eac70f359c9a8c178960da883f1121f61e7218d4bcc4fc226680f62e63f8f676',
    'coupled': '0445a0b79a3b99763e45358cffb6c01711af81cd4057371c6d83dc893ece9eb1',
    'all-three': '525d186328c6574b9b5bbecec368c10adb43a7aa6df06cddc0858890ddedf760',
    'split': 'f101e042998bba21c1c4647074784a691e6ddd9ba98e95f0edc0be32b5b9b800',
    'continued': '102e9acea57a13e8ab4e5929c84eb86daa32a50cd5e02cc6da54a4b4e93dfcba',
    'wide': '7f43bb5d5b135c5eacd1883c96ee5402d765d4e3d203fe32f8afa64f0d9578ab',
    'large': '9b98e1f189fcf5af254177ba01eacd0ac9ace8583dde5372e776e91afd557064',
    'large-groups': '7911567fee4876dac81002bc2fe19347c81a681b2d789c59144b8e4d6aaf9b59',
    'large-bagging': '615f890cbeaf9105a78390d5c66a6accca5f99a3122751b414fc174a6d117717',
    'large-bagging-groups': '8bdc3a58748146bb661e1171afeede695047e659dc57bdbf0b12cfa68d973b09',
}


@pytest.mark.parametrize("name", [*CASES, *SPECIAL])
def test_model_unchanged_by_the_optimisation(name):
    assert fingerprint(name) == FINGERPRINTS[name]


if __name__ == "__main__":
    for case in [*CASES, *SPECIAL]:
        print(f"    {case!r}: {fingerprint(case)!r},")
