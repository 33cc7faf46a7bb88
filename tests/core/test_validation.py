"""core.validation's declared constraints: what each accepts and refuses, and its words (the estimators' declarations
are exercised by tests/test_contract.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.validation import CheckedElsewhere, Flag, NoneOr, Number, OneOf, Satisfies


@pytest.mark.parametrize("constraint, good", [
    (Number(0.0), [0, 0.5, np.float32(2.0), 10**9]),
    (Number(1, 30, integer=True), [1, 30, np.int64(7)]),
    (Number(0.0, math.inf), [0.0, 1e300]),
    (Number(0.0, low_open=True), [1e-300, 3]),
    (NoneOr(Number(1, integer=True)), [None, 1, 5]),
    (OneOf(("accuracy", "entropy")), ["accuracy", np.str_("entropy")]),  # numpy's str_ from a parameter grid
    (Flag(), [True, False]),
    (Satisfies(callable, "a callable", bad=(1,)), [len, print]),
    (CheckedElsewhere("another check"), [object(), None, "anything"]),
])
def test_each_constraint_accepts_its_values_and_refuses_its_invalid_ones(constraint, good):
    for value in good:
        constraint.check(value, "p")
    for value in constraint.invalid():
        with pytest.raises(CEGBError, match=r"^p should be "):
            constraint.check(value, "p")
    assert constraint.invalid() or isinstance(constraint, CheckedElsewhere)


def test_the_words():
    cases = [
        (Number(0.0), -1, "p should be a finite number >= 0, got -1"),
        (Number(0.0, low_open=True), 0, "p should be a finite number > 0, got 0"),
        (Number(0.0, 1.0), 2, "p should be a number in [0, 1], got 2"),
        (Number(1, math.inf, integer=True), 1.5, "p should be an integer in [1, inf], got 1.5"),
        (NoneOr(Number(0.0, low_open=True)), 0, "p should be None or a finite number > 0, got 0"),
        (OneOf(("a", "b")), True, "p should be one of ['a', 'b'], got True"),
        (OneOf((1, 2)), True, "p should be one of [1, 2], got True"),  # a bool is no integer option
        (Flag(), 1, "p should be True or False, got 1"),
        (Satisfies(callable, "a callable", show_type=True), 3, "p should be a callable, got int"),
    ]
    for constraint, value, message in cases:
        with pytest.raises(CEGBError) as caught:
            constraint.check(value, "p")
        assert str(caught.value) == message
