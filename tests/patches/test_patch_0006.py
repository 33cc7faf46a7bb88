"""Patch 0006: CEGB's per-row ledger (Booster.get_cegb_state / set_cegb_state; lightgbm_cegb.io.CEGBState and the
start_from callback): what the training rows paid and the model bought, shared between boosters, declared by
hand, saved and restored."""

from __future__ import annotations

import lightgbm as lgb
import numpy as np
import pytest
from test_patch_0005 import BASE, before_parameters, check_charges, make_data

from lightgbm_cegb import CEGBError
from lightgbm_cegb.io import CEGBState
from lightgbm_cegb.lgbm.callbacks import start_from

COSTS = {"cegb_tradeoff": 0.05, "cegb_feature_group": [0, 0, 1, 1, -1, 2, 2, -1],
         "cegb_penalty_group_lazy": [3.0, 1.0, 6.0], "cegb_penalty_group_coupled": [100.0, 20.0, 200.0],
         "cegb_penalty_feature_lazy": [0.5, 0.2, 1.0, 0.0, 2.0, 0.3, 0.1, 4.0],
         "cegb_penalty_feature_coupled": [10.0] * 8}


def train(X, y, rounds, callbacks=(), init_model=None, **params):
    return lgb.train({**BASE, **params}, lgb.Dataset(X, y), rounds, init_model=init_model,
                     callbacks=list(callbacks), keep_training_booster=True)


class Record:
    """A callback that keeps the ledger as the first new iteration starts (after start_from's, order 0: an
    instance attribute, as lgb.train shadows a class attribute ``order`` with the callback's list position)."""

    def __init__(self):
        self.order, self.before_iteration = 1, True

    def __call__(self, env):
        if env.iteration == env.begin_iteration:
            self.state = env.model.get_cegb_state()


def test_ledger_round_trip_continues_as_one_booster():
    X, y = make_data(20)
    first = train(X, y, 5, **COSTS)
    ledger = first.get_cegb_state()
    record = Record()
    continued = train(X, y, 5, init_model=first, callbacks=[record], **COSTS)
    # continued training rebuilds the ledger from the init model (patch 0003): the same bytes
    assert record.state == ledger
    restored = train(X, y, 5, init_model=first, callbacks=[start_from(CEGBState.from_bytes(ledger))], **COSTS)
    one = train(X, y, 10, **COSTS)
    assert before_parameters(restored) == before_parameters(continued) == before_parameters(one)


def test_the_ledger_reads_what_was_paid():
    X, y = make_data(21)
    booster = train(X, y, 4, **COSTS)
    state = CEGBState.from_booster(booster)
    assert (state.num_rows, state.num_features, state.num_groups) == (len(X), 8, 3)
    used = np.asarray(booster.feature_importance()) > 0
    np.testing.assert_array_equal(state.bought[:8], used)
    group = np.array(COSTS["cegb_feature_group"])
    np.testing.assert_array_equal(state.bought[8:], [used[group == g].any() for g in range(3)])
    # a row has paid a feature (with a lazy penalty) iff one of its paths tests it
    leaves = booster.predict(X, pred_leaf=True)
    from references import leaf_paths
    paths = leaf_paths(booster)
    expected = np.zeros((len(X), 8), dtype=bool)
    for t, tree in enumerate(paths):
        for leaf, features in tree.items():
            rows = leaves[:, t] == leaf
            for f in features:
                expected[rows, f] = True
    lazy = np.array(COSTS["cegb_penalty_feature_lazy"]) > 0
    np.testing.assert_array_equal(state.paid[:, :8][:, lazy], expected[:, lazy])
    for g in range(3):
        np.testing.assert_array_equal(state.paid[:, 8 + g], expected[:, group == g].any(axis=1))


def test_empty_ledger_trains_the_same_model():
    X, y = make_data(22)
    plain = train(X, y, 6, **COSTS)
    started = train(X, y, 6, callbacks=[start_from(CEGBState.empty(len(X), 8, 3))], **COSTS)
    assert before_parameters(started) == before_parameters(plain)


def test_prepaid_features_are_free():
    """Every row has paid feature 1 and the model has bought it: as if it cost nothing."""
    X, y = make_data(23)
    costly = {"cegb_tradeoff": 0.05, "cegb_penalty_feature_lazy": [1.0, 50.0] + [1.0] * 6,
              "cegb_penalty_feature_coupled": [5.0, 5000.0] + [5.0] * 6}
    free = {"cegb_tradeoff": 0.05, "cegb_penalty_feature_lazy": [1.0, 0.0] + [1.0] * 6,
            "cegb_penalty_feature_coupled": [5.0, 0.0] + [5.0] * 6}
    prepaid = CEGBState.empty(len(X), 8).pay(1).buy(1)
    started = train(X, y, 6, callbacks=[start_from(prepaid)], **costly)
    assert before_parameters(started) == before_parameters(train(X, y, 6, **free))
    assert before_parameters(started) != before_parameters(train(X, y, 6, **costly))


def test_a_second_booster_starts_from_what_the_first_paid():
    """A gate-like first model on the same rows; the second is charged only what the first did not pay
    (checked split by split with patch 0005's reference, started from the ledger)."""
    X, y = make_data(24)
    first = train(X, y, 3, **COSTS)
    ledger = CEGBState.from_booster(first)
    second = train(X, y, 4, callbacks=[start_from(ledger)], **COSTS)
    assert check_charges(second, X, y, COSTS, start=ledger) >= 4
    assert before_parameters(second) != before_parameters(train(X, y, 4, **COSTS))


def test_save_and_load(tmp_path):
    X, y = make_data(25)
    state = CEGBState.from_booster(train(X, y, 3, **COSTS))
    state.save(tmp_path / "ledger.bin")
    assert CEGBState.load(tmp_path / "ledger.bin").to_bytes() == state.to_bytes()
    assert [p.name for p in tmp_path.iterdir()] == ["ledger.bin"]


@pytest.mark.parametrize(("change", "message"), [
    (lambda b: b[:-1], r"CEGB state: expected \d+ bytes for its sizes, got \d+"),
    (lambda b: b"XEGBLDGR" + b[8:], r"CEGB state: expected the ledger format"),
    (lambda b: b[:8] + (2).to_bytes(4, "little") + b[12:],
     r"CEGB state: format version 2, this LightGBM reads version 1"),
])
def test_damaged_ledgers_are_refused_by_lightgbm(change, message):
    X, y = make_data(26)
    booster = train(X, y, 2, **COSTS)
    with pytest.raises(lgb.basic.LightGBMError, match=message):
        booster.set_cegb_state(change(booster.get_cegb_state()))


def test_ledgers_of_other_data_are_refused():
    X, y = make_data(27)
    booster = train(X, y, 2, **COSTS)
    with pytest.raises(lgb.basic.LightGBMError, match=r"CEGB state: for 10 rows, 8 features and 3 groups, but the "
                                                       r"training data has 1500 rows and 8 features"):
        booster.set_cegb_state(CEGBState.empty(10, 8, 3).to_bytes())
    with pytest.raises(lgb.basic.LightGBMError, match=r"for 1500 rows, 8 features and 0 groups, but the training data "
                                                       r"has 1500 rows and 8 features and cegb_feature_group 3 groups"):
        booster.set_cegb_state(CEGBState.empty(1500, 8).to_bytes())
    plain = train(X, y, 2)
    with pytest.raises(lgb.basic.LightGBMError, match=r"no cegb_\* penalty is set, so there is no ledger"):
        plain.get_cegb_state()
    with pytest.raises(CEGBError, match=r"start_from: lgb.cv trains each fold on other rows"):
        lgb.cv({**BASE, **COSTS}, lgb.Dataset(X, y), 2, nfold=2, stratified=False,
               callbacks=[start_from(CEGBState.empty(1500, 8, 3))])


@pytest.mark.parametrize(("make", "message"), [
    (lambda: CEGBState.empty(5, 3).pay(3), r"feature should be an index in 0..2, got 3"),
    (lambda: CEGBState.empty(5, 3, 1).pay_group(1), r"group should be an index in 0..0, got 1"),
    (lambda: CEGBState.empty(5, 3).buy(), r"buy: give a feature or a group"),
    (lambda: CEGBState.from_bytes(b"CEGBLDGR" + bytes(4)), r"not a ledger"),
    (lambda: CEGBState.from_bytes(CEGBState.empty(5, 3).to_bytes()[:-8]), r"5 rows x 3 columns and groups take 56 "
                                                                           r"bytes, got 48"),
    (lambda: start_from(b"..."), r"state should be a CEGBState, got bytes"),
])
def test_bad_package_input(make, message):
    with pytest.raises(CEGBError, match=message):
        make()


def test_package_format_is_lightgbms():
    """The package writes what LightGBM reads and reads what it writes, bit for bit (random ledgers)."""
    X, y = make_data(28)
    booster = train(X, y, 2, **COSTS)
    rng = np.random.default_rng(0)
    state = CEGBState(rng.random((len(X), 11)) < 0.3, rng.random(11) < 0.5, 8)
    state.apply(booster)
    back = CEGBState.from_booster(booster)
    np.testing.assert_array_equal(back.bought, state.bought)
    np.testing.assert_array_equal(back.paid, state.paid)


def test_paid_bits_without_a_lazy_penalty_are_kept_and_charge_nothing():
    """A ledger may say rows paid features that have no lazy penalty (only coupled ones here): LightGBM keeps
    the bits (they are read back) and charges nothing for them (it used to read the absent penalty vector)."""
    X, y = make_data(29)
    coupled = {"cegb_penalty_feature_coupled": [10.0] * 8}
    state = CEGBState.empty(len(X), 8)
    state.paid[np.random.default_rng(0).random(state.paid.shape) < 0.5] = True
    record = Record()
    started = train(X, y, 5, callbacks=[start_from(state), record], **coupled)
    assert before_parameters(started) == before_parameters(train(X, y, 5, **coupled))
    np.testing.assert_array_equal(CEGBState.from_bytes(record.state).paid, state.paid)
