"""The checks of the package's input: a numeric parameter, row weights, query sizes, a sequence, a frame's column
order and columns, and a text file's encoding; each raises a CEGBError that names the parameter, what was expected
and what was received.

Parameters are declared once, in one vocabulary for classes and functions (as scikit-learn declares
``_parameter_constraints`` and ``validate_params``; its format differs, hence our names): ``{name: constraint}``
over every parameter. An estimator's class attribute ``_constraints`` is checked by :func:`check_params` when
``fit`` starts (scikit-learn's ``set_params`` may change the parameters after ``__init__``); a function's (or a
class's ``__init__``'s) by the :func:`validated` decorator when it is called, before its body runs. A constraint
checks a value (:meth:`Constraint.check`) and gives values that break it (:meth:`Constraint.invalid`), from which
the tests make their bad parameters (``tests/test_contract.py``, ``tests/constraints.py``).
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lightgbm_cegb.core.errors import CEGBError


def check_number(value, name: str, low: float, high: float | None = None, *, low_open: bool = False,
                 integer: bool = False) -> None:
    """``value`` is a finite number (an integer with ``integer``) >= ``low`` (> with ``low_open``) and, given
    ``high``, <= ``high`` (``math.inf``: unbounded, said as the interval [low, inf]).

    Parameters
    ----------
    value : object
        The value checked (a bool is refused).
    name : str
        The parameter's name, for the message.
    low : float
        The lower bound.
    high : float, optional
        The upper bound, inclusive (None: none).
    low_open : bool, default=False
        ``value`` must be > ``low`` rather than >= ``low``.
    integer : bool, default=False
        ``value`` must be an integer.

    Raises
    ------
    CEGBError
        When ``value`` is not such a number; the message names ``name``, the bounds and the value.
    """
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind) or not math.isfinite(value) or \
            (value <= low if low_open else value < low) or (high is not None and value > high):
        raise CEGBError(f"{name} should be {_number_words(low, high, low_open, integer)}, got {value!r}")


def _number_words(low: float, high: float | None, low_open: bool, integer: bool) -> str:
    what = "an integer" if integer else "a finite number" if high is None else "a number"
    bound = f"{'>' if low_open else '>='} {low:g}" if high is None else \
        f"in [{low:g}, {'inf' if math.isinf(high) else f'{high:g}'}]"
    return f"{what} {bound}"


def checked_weights(weight, n: int, name: str = "sample_weight") -> np.ndarray:
    """``weight`` (None: all 1) as n finite float64 weights >= 0, not all zero.

    Parameters
    ----------
    weight : array-like of shape (n,) or None
        The row weights.
    n : int
        The number of rows.
    name : str, default="sample_weight"
        The parameter's name, for the message.

    Returns
    -------
    ndarray of shape (n,)
        The weights as float64.

    Raises
    ------
    CEGBError
        When the weights are not n finite numbers >= 0, or all zero.
    """
    weight = np.ones(n) if weight is None else np.asarray(weight, dtype=np.float64)
    if weight.shape != (n,) or not np.isfinite(weight).all() or (weight < 0).any() or not weight.any():
        raise CEGBError(f"{name} should hold {n} finite weights >= 0, not all zero")
    return weight


def checked_group(group, n: int, name: str = "group") -> np.ndarray:
    """``group``, the sizes of the consecutive queries of ``n`` rows (as ``lgb.Dataset(group=...)``), as int64:
    1-d integers >= 1 summing to ``n``.

    Parameters
    ----------
    group : array-like of int
        The query sizes.
    n : int
        The rows they should sum to.
    name : str, default="group"
        The argument's name, for the message.

    Returns
    -------
    ndarray of int64
        The sizes.

    Raises
    ------
    CEGBError
        When ``group`` is not such sizes.
    """
    sizes = np.asarray(group)
    if sizes.ndim != 1 or sizes.dtype.kind not in "iu" or (sizes < 1).any() or sizes.sum() != n:
        raise CEGBError(f"{name} should hold the sizes (integers >= 1) of the consecutive queries, summing to the {n} "
                        f"rows of X, got {sizes!r:.60}{f' (sum {sizes.sum()})' if sizes.dtype.kind in 'iu' else ''}")
    return sizes.astype(np.int64)


def check_column_order(X, names, name: str, expected: str = "the model's features") -> None:
    """Refuse a pandas DataFrame ``X`` whose columns are ``names`` in another order: read by position, as
    LightGBM's ``predict`` reads a frame, its values would go to other features without an error. Column names
    compare as strings, also with spaces as "_" (LightGBM's renaming). Anything else passes.

    Raises
    ------
    CEGBError
        Naming ``name``, the first column out of place and the order expected.
    """
    columns = getattr(X, "columns", None)
    if columns is None or names is None:
        return
    names = [str(n) for n in names]
    for given in ([str(c) for c in columns], [str(c).replace(" ", "_") for c in columns]):
        if given == names:
            return
        if sorted(given) == sorted(names):
            at = next(i for i, (a, b) in enumerate(zip(given, names)) if a != b)
            shown = ", ".join(map(repr, names[:6])) + (", ..." if len(names) > 6 else "")
            raise CEGBError(f"{name}: its columns are {expected} in another order (column {at} is "
                            f"{list(columns)[at]!r}, expected {names[at]!r}): reorder them as [{shown}]")


def check_numeric_frame(X, name: str) -> None:
    """Refuse a pandas DataFrame ``X`` that an estimator reading float arrays (by scikit-learn's ``validate_data``)
    cannot read as it means: a category column (its values are labels, not numbers) or column names of mixed
    types (scikit-learn reads names only when all are strings; a TypeError otherwise). Anything else passes.

    Raises
    ------
    CEGBError
        Naming ``name`` and the first such column.
    """
    columns, dtypes = getattr(X, "columns", None), getattr(X, "dtypes", None)
    if columns is None or dtypes is None:
        return
    categorical = [column for column, dtype in zip(columns, dtypes) if getattr(dtype, "name", "") == "category"]
    if categorical:
        raise CEGBError(f"{name}: its column {categorical[0]!r} is a pandas category column; numbers are expected "
                        "(encode it first, e.g. its .cat.codes with NaN for -1)")
    kinds = {isinstance(column, str) for column in columns}
    if len(kinds) == 2:
        other = next(column for column in columns if not isinstance(column, str))
        raise CEGBError(f"{name}: its column names should all be strings (or none of them), got "
                        f"{type(other).__name__} {other!r} among strings")


def checked_sequence(values, name: str, what: str) -> list:
    """``values`` as a list: a list, tuple, 1-D array or pandas Series (not a str or a mapping).

    Raises
    ------
    CEGBError
        Naming ``name``, ``what`` its items should be and the value, when ``values`` is no such sequence.
    """
    if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__len__") \
            or getattr(values, "ndim", 1) != 1:
        raise CEGBError(f"{name} should be a sequence of {what}, got {values!r:.80}")
    return list(values)


def read_utf8(path: str | os.PathLike, what: str) -> str:
    """The text of a file that should be UTF-8 (a model file, a cost file, a data file's lines), without a leading
    byte order mark (as editors on Windows write one), or a CEGBError naming the file and what is wrong.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    what : str
        What the file is ("model file", "cost file", ...), for the message.

    Returns
    -------
    str
        The file's text.

    Raises
    ------
    CEGBError
        When the file does not exist, cannot be read or is not UTF-8 (the message gives the first bad byte, its
        line and offset).
    """
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise CEGBError(f"{what} {str(path)!r} does not exist") from None
    except IsADirectoryError:
        raise CEGBError(f"{what} {str(path)!r} is a directory, not a file") from None
    except OSError as exc:
        raise CEGBError(f"{what} {str(path)!r} cannot be read: {exc.strerror or exc}") from None
    return utf8_text(data, path, what)


def utf8_text(data: bytes, path: str | os.PathLike, what: str) -> str:
    """The bytes ``data`` of the file ``path`` as :func:`read_utf8` reads them (UTF-8, a leading byte order mark
    dropped), or its CEGBError."""
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise CEGBError(f"{what} {str(path)!r} should be UTF-8 text, got byte 0x{data[exc.start]:02x} on line "
                        f"{line} (offset {exc.start})") from None


class Constraint:
    """What a parameter may be (see the module's doc)."""

    def check(self, value, name: str) -> None:  # pragma: no cover - abstract
        """Raise a CEGBError naming ``name``, what it should be and ``value`` when ``value`` breaks the constraint."""
        raise NotImplementedError

    def invalid(self) -> list:  # pragma: no cover - abstract
        """Values that break the constraint (none where no value can be made up: a constraint checked elsewhere)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Number(Constraint):
    """A real number (an integer with ``integer``) >= ``low`` (> with ``low_open``), <= ``high`` given one
    (``math.inf``: said as the interval [low, inf]); a bool is no number. :func:`check_number`'s words."""

    low: float
    high: float | None = None
    low_open: bool = False
    integer: bool = False

    def check(self, value, name: str) -> None:
        check_number(value, name, self.low, self.high, low_open=self.low_open, integer=self.integer)

    def words(self) -> str:
        return _number_words(self.low, self.high, self.low_open, self.integer)

    def invalid(self) -> list:
        out = [self.low if self.low_open else self.low - 1, str(self.low + 1), True, math.nan, None]
        if self.high is not None and math.isfinite(self.high):
            out.append(self.high + 1)
        if self.integer:
            out.append(self.low + 1.5)
        return out


@dataclass(frozen=True)
class OneOf(Constraint):
    """One of ``options``: equal to one, and of its type or a subclass (numpy's str_ from a parameter grid is a
    str), a bool only for a bool (True is not 1)."""

    options: tuple

    def check(self, value, name: str) -> None:
        if not any(isinstance(value, type(option)) and isinstance(value, bool) == isinstance(option, bool)
                   and value == option for option in self.options):
            raise CEGBError(f"{name} should be {self.words()}, got {value!r}")

    def words(self) -> str:
        return f"one of {list(self.options)}"

    def invalid(self) -> list:
        return ["no such option", None, 1]


@dataclass(frozen=True)
class Numbers(Constraint):
    """A sequence (a list, tuple, 1-d array or pandas Series) of numbers that ``inner`` allows, non-empty unless
    ``empty``; with ``single``, one such number too (``budget=5.0`` or ``budget=[5.0, 10.0]``). A number alone is
    refused in ``inner``'s words; a bad item of a sequence is shown with its position."""

    inner: Number
    single: bool = False
    empty: bool = False

    def check(self, value, name: str) -> None:
        try:
            ndim = np.ndim(value)
        except ValueError:  # ragged nesting, which numpy cannot shape
            ndim = None
        if ndim == 0 and self.single:
            self.inner.check(value, name)
            return
        if ndim != 1 or (not self.empty and len(value) == 0):
            raise CEGBError(f"{name} should be {self.words()}, got {value!r:.80}")
        for i, item in enumerate(value):
            try:
                self.inner.check(item, name)
            except CEGBError:
                raise CEGBError(f"{name} should be {self.words()}, got {item!r} at position {i}") from None

    def words(self) -> str:
        if self.single:
            return f"{self.inner.words()} or a {'' if self.empty else 'non-empty '}list of them"
        return f"a {'' if self.empty else 'non-empty '}list, each item {self.inner.words()}"

    def invalid(self) -> list:
        out = [[bad] for bad in self.inner.invalid()] + [{"a": self.inner.low + 1}, [[self.inner.low + 1]]]
        if not self.empty:
            out.append([])
        return out + (self.inner.invalid() if self.single else [self.inner.low + 1])


@dataclass(frozen=True)
class NoneOr(Constraint):
    """None, or what ``inner`` allows; the words: "None or <inner's words>"."""

    inner: Number | Numbers | OneOf

    def check(self, value, name: str) -> None:
        if value is None:
            return
        try:
            self.inner.check(value, name)
        except CEGBError:
            raise CEGBError(f"{name} should be None or {self.inner.words()}, got {value!r}") from None

    def invalid(self) -> list:
        return [v for v in self.inner.invalid() if v is not None]


@dataclass(frozen=True)
class Flag(Constraint):
    """True or False, numpy's too (a parameter grid's ``np.True_``); not 0, 1 or a string."""

    def check(self, value, name: str) -> None:
        if not isinstance(value, (bool, np.bool_)):
            raise CEGBError(f"{name} should be True or False, got {value!r}")

    def invalid(self) -> list:
        return [1, "yes", None]


@dataclass(frozen=True)
class Satisfies(Constraint):
    """What ``test(value)`` accepts, said as ``words``; the message shows the value (its type's name with
    ``show_type``). ``bad``: values that break it."""

    test: Callable[[object], bool]
    words: str
    bad: tuple = ()
    show_type: bool = False

    def check(self, value, name: str) -> None:
        if not self.test(value):
            shown = type(value).__name__ if self.show_type else repr(value)
            raise CEGBError(f"{name} should be {self.words}, got {shown}")

    def invalid(self) -> list:
        return list(self.bad)


@dataclass(frozen=True)
class CheckedElsewhere(Constraint):
    """A parameter checked where it is used (``where`` says by what: the cost resolver, the thread count, a check
    that needs the data); no value is made up for it."""

    where: str

    def check(self, value, name: str) -> None:
        return None

    def invalid(self) -> list:
        return []


def check_params(estimator, constraints: dict, names=None) -> None:
    """Check ``estimator``'s parameters against ``constraints`` (its class's declared ones; only ``names`` when
    given).

    Parameters
    ----------
    estimator : object
        The estimator whose parameters (attributes) are checked.
    constraints : dict
        {parameter: Constraint}, as an estimator class declares them (``_constraints``).
    names : iterable of str, optional
        The parameters to check (default: every declared one).

    Raises
    ------
    CEGBError
        For the first parameter whose value breaks its constraint.
    """
    for name in constraints if names is None else names:
        constraints[name].check(getattr(estimator, name), name)


def check_args(constraints: Mapping[str, Constraint], values: Mapping) -> None:
    """Check the arguments ``values`` {parameter: value} that ``constraints`` declares (a parameter not among
    ``values``, left at its default, is not checked: a declared default is valid, as the tests check).

    Raises
    ------
    CEGBError
        For the first declared parameter whose value breaks its constraint.
    """
    for name, constraint in constraints.items():
        if name in values:
            constraint.check(values[name], name)


def validated(constraints: Mapping[str, Constraint]) -> Callable:
    """Decorator: the function (or method: ``__init__``) checks the arguments it is given against ``constraints``
    when called, before its body runs (:func:`check_args`; the values of ``**kwargs`` by their names: options
    passed on to another function are declared with the function's own parameters).

    The decorated function keeps its name, docstring and signature, and holds ``constraints`` as ``.constraints``
    and itself undecorated as ``.unchecked``: a caller whose own entry checked the arguments calls that, so that a
    value is checked once per call of a public entry point.

    Parameters
    ----------
    constraints : Mapping
        {parameter: Constraint}, over every parameter of the function.

    Returns
    -------
    callable
        The decorator.
    """
    def decorate(function: Callable) -> Callable:
        signature = inspect.signature(function)
        options = next((p.name for p in signature.parameters.values() if p.kind is p.VAR_KEYWORD), None)

        @functools.wraps(function)
        def checked(*args, **kwargs):
            try:
                values = signature.bind(*args, **kwargs).arguments
            except TypeError:  # a call that does not fit the signature: Python's own TypeError, from the call
                return function(*args, **kwargs)
            check_args(constraints, {**values, **values.get(options, {})} if options else values)
            return function(*args, **kwargs)

        checked.constraints, checked.unchecked = constraints, function
        return checked

    return decorate


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def caller_stacklevel() -> int:
    """The ``stacklevel`` at which a warning raised by the function calling this points to the first caller outside
    the package (as pandas' ``find_stack_level``): a fixed one would point into the package when the function is
    reached through :func:`validated`'s wrapper or a workflow (fit_within_budget calls sweep).

    Returns
    -------
    int
        For ``warnings.warn(..., stacklevel=caller_stacklevel())``.
    """
    frame, level = inspect.currentframe().f_back, 1  # the warning function: stacklevel 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


def known_names(unknown, names, what: str = "features") -> str:
    """What an error about ``unknown`` names says of the ``names`` known: all of them (20 at most), else how many
    there are and the closest to each unknown one.

    Parameters
    ----------
    unknown : sequence of str
        The names not found.
    names : sequence of str
        The names known.
    what : str, default="features"
        What the names are.

    Returns
    -------
    str
        E.g. "the 3 features are ['a', 'b', 'c']" or "250 features are known; the closest: 'x' -> ['x1', 'x2']".
    """
    import difflib

    names = [str(n) for n in names]
    if len(names) <= 20:
        return f"the {len(names)} {what} are {names}"
    closest = "; ".join(f"{str(u)!r} -> {difflib.get_close_matches(str(u), names, 3, 0.5)}" for u in unknown)
    return f"{len(names)} {what} are known; the closest: {closest}"
