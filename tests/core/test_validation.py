"""core.validation's declared constraints: what each accepts and refuses, and its words (the estimators' declarations
are exercised by tests/test_contract.py)."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.validation import (
    CheckedElsewhere,
    Flag,
    NoneOr,
    Number,
    Numbers,
    OneOf,
    Satisfies,
    check_args,
    validated,
)


@pytest.mark.parametrize("constraint, good", [
    (Number(0.0), [0, 0.5, np.float32(2.0), 10**9]),
    (Number(1, 30, integer=True), [1, 30, np.int64(7)]),
    (Number(0.0, math.inf), [0.0, 1e300]),
    (Number(0.0, low_open=True), [1e-300, 3]),
    (NoneOr(Number(1, integer=True)), [None, 1, 5]),
    (OneOf(("accuracy", "entropy")), ["accuracy", np.str_("entropy")]),  # numpy's str_ from a parameter grid
    (Flag(), [True, False, np.True_]),  # numpy's bool from a parameter grid
    (Numbers(Number(0.0), single=True), [0, 2.5, [1.0], (0, 3), np.array([1.0, 2.0])]),
    (Numbers(Number(1, integer=True), empty=True), [[], [1, 2], np.arange(1, 4)]),
    (NoneOr(Numbers(Number(0.0), single=True)), [None, 1.0, [1.0, 2.0]]),
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
        (Numbers(Number(0.0), single=True), -1, "p should be a finite number >= 0, got -1"),
        (Numbers(Number(0.0), single=True), [], "p should be a finite number >= 0 or a non-empty list of them, got []"),
        (Numbers(Number(0.0), single=True), [1.0, -1.0],
         "p should be a finite number >= 0 or a non-empty list of them, got -1.0 at position 1"),
        (Numbers(Number(0.0), single=True), [[1.0], 2.0],  # ragged: no shape for numpy
         "p should be a finite number >= 0 or a non-empty list of them, got [[1.0], 2.0]"),
        (Numbers(Number(0.0), empty=True), 3, "p should be a list, each item a finite number >= 0, got 3"),
        (NoneOr(Numbers(Number(0.0), single=True)), [-1],
         "p should be None or a finite number >= 0 or a non-empty list of them, got [-1]"),
    ]
    for constraint, value, message in cases:
        with pytest.raises(CEGBError) as caught:
            constraint.check(value, "p")
        assert str(caught.value) == message


@validated({"rounds": Number(1, integer=True), "flag": Flag(), "seed": NoneOr(Number(0, integer=True))})
def _entry(rounds, *, flag=False, **options):
    return rounds, flag, options


def test_validated_checks_the_arguments_given_at_entry_and_passes_them_on():
    assert _entry(3, flag=True, other="x") == (3, True, {"other": "x"})
    assert _entry.__name__ == "_entry" and list(inspect.signature(_entry).parameters) == ["rounds", "flag", "options"]
    with pytest.raises(CEGBError, match=r"^rounds should be an integer >= 1, got 0$"):
        _entry(0)
    with pytest.raises(CEGBError, match=r"^flag should be True or False, got 1$"):
        _entry(2, flag=1)
    with pytest.raises(CEGBError, match=r"^seed should be None or an integer >= 0, got -1$"):  # an option, by name
        _entry(2, seed=-1)
    assert _entry.unchecked(0, flag=1) == (0, 1, {})  # for a caller whose own entry checked them
    with pytest.raises(TypeError, match=r"_entry\(\) missing 1 required positional argument: 'rounds'"):
        _entry(flag=True)  # Python's own message for a call that does not fit


def test_check_args_checks_the_declared_values_given():
    constraints = {"a": Number(0.0), "b": Flag()}
    check_args(constraints, {"a": 1.0, "c": "undeclared"})  # b left at its default: not checked
    with pytest.raises(CEGBError, match=r"^b should be True or False, got 'yes'$"):
        check_args(constraints, {"a": 1.0, "b": "yes"})
