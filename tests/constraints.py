"""The check of a function's or class's declared parameters (``core.validation.validated``), shared by the tests of
the entry points that declare them, as ``tests/test_contract.py`` checks the estimators' ``_constraints``."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping

import pytest

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.validation import Constraint


def check_declared(entry: Callable, valid: Mapping) -> int:
    """Check the declaration of ``entry`` (a function or method decorated by ``validated``, or a class whose
    ``__init__`` is): it declares every named parameter (and, with ``**options``, the options it passes on), its
    defaults satisfy it, and each value a parameter's constraint calls invalid (``Constraint.invalid``) makes the
    call raise a CEGBError that names the parameter, at entry (the other arguments ``valid``: only those the
    checks read need be real).

    Returns
    -------
    int
        The invalid values tried.
    """
    checked = entry.__init__ if isinstance(entry, type) else entry
    constraints = checked.constraints
    parameters = [p for p in inspect.signature(checked.unchecked).parameters.values() if p.name != "self"]
    named = {p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        assert named <= set(constraints), sorted(named - set(constraints))
    else:
        assert set(constraints) == named, sorted(set(constraints) ^ named)
    assert all(isinstance(constraint, Constraint) for constraint in constraints.values())
    for parameter in parameters:
        if parameter.default is not parameter.empty:
            constraints[parameter.name].check(parameter.default, parameter.name)
    tried = 0
    for name, constraint in constraints.items():
        for bad in constraint.invalid():
            with pytest.raises(CEGBError, match=rf"^{re.escape(name)} should be "):
                entry(**{**valid, name: bad})
            tried += 1
    return tried
